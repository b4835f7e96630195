"""Every metric the provider publishes, defined once: name (unit in the name), type, help text, labels.

The publishers (:mod:`.publish`), the Grafana dashboard (:mod:`.dashboard`), the statsd_exporter
mapping and the README's metric list (``python -m airflow_provider_kafka_zk.metrics list``; a test
fails when the README differs) are all made from :data:`METRICS`. Names follow Prometheus'
conventions: ``kafka_zk_`` first, the base unit last (``_seconds``, ``_bytes``), ``_total`` on
counters, ``_timestamp_seconds`` for points in time; labels are bounded (clusters, brokers, checks,
severities, stages, DAG ids, results), never topic names or run ids. Pure: no Airflow, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DAILY = "daily"
MAINTENANCE = "maintenance"
DELIVERY = "delivery"
GROUPS = {
    DAILY: "after each daily hygiene run, per cluster (Pushgateway job `kafka_zk_daily`, grouping key `cluster`)",
    MAINTENANCE: (
        "during and after every maintenance run on the step executor, per cluster and DAG (Pushgateway job "
        "`kafka_zk_maintenance`, grouping key `cluster`, `dag_id`: the latest run of each DAG)"
    ),
    DELIVERY: "about the metrics themselves, through Airflow's metrics layer only (StatsD/OpenTelemetry)",
}

GAUGE = "gauge"
COUNTER = "counter"

LABELS = {
    "cluster": "the cluster's name in the cluster file",
    "broker": "a broker id",
    "check": "an audit check (rf1-exposure-broker, topic-id-mismatch, ...)",
    "severity": "critical, error, warning, info",
    "stage": "snapshot, inventory, audit",
    "dag_id": "the maintenance DAG (kafka_zk_pre_maintenance_drain, ...)",
    "result": "running, succeeded, failed, rejected, timed_out",
    "receiver": "pushgateway",
}
"""Every label any metric may carry, each with bounded values."""

RESULTS = ("running", "succeeded", "failed", "rejected", "timed_out")
"""The values of a maintenance run's ``result`` label."""

_NAME = re.compile(r"kafka_zk_[a-z0-9_]+")


@dataclass(frozen=True)
class Metric:
    """One metric.

    :param name: the Prometheus name (``kafka_zk_...``, unit last).
    :param kind: ``gauge`` or ``counter``.
    :param help: what it measures, one sentence (the HELP line and the README).
    :param labels: its label names (from :data:`LABELS`), in the order a StatsD name without tags
        carries their values.
    :param group: when it is published (:data:`GROUPS`).
    """

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]
    group: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"metric name {self.name!r} is not kafka_zk_<snake_case>")
        if self.kind not in (GAUGE, COUNTER) or (self.kind == COUNTER) != self.name.endswith("_total"):
            raise ValueError(f"{self.name}: a counter's name ends with _total, a gauge's does not")
        unknown = set(self.labels) - set(LABELS)
        if unknown:
            raise ValueError(f"{self.name}: unknown label(s) {sorted(unknown)}")
        if self.group not in GROUPS:
            raise ValueError(f"{self.name}: unknown group {self.group!r}")


def _m(name: str, kind: str, labels: tuple[str, ...], group: str, help: str) -> Metric:
    return Metric(name, kind, help, labels, group)


C, CB, CD = ("cluster",), ("cluster", "broker"), ("cluster", "dag_id")

METRICS: tuple[Metric, ...] = (
    # -- after each daily run ----------------------------------------------------------------------
    _m("kafka_zk_findings", GAUGE, ("cluster", "check", "severity"), DAILY,
       "Findings of the last daily audit, by check and severity."),
    _m("kafka_zk_rf1_exposure_partitions", GAUGE, CB, DAILY,
       "RF=1 partitions on the broker: offline while it is stopped."),
    _m("kafka_zk_rf1_exposure_bytes", GAUGE, CB, DAILY,
       "Bytes (.log files) of the broker's RF=1 partitions; absent when its disk was not read."),
    _m("kafka_zk_topic_id_trouble_topics", GAUGE, C, DAILY,
       "Topics whose topic id is in trouble (KAFKA-14190 mismatch, precursor, replicas disagreeing, changed or lost)."),
    _m("kafka_zk_pending_deletions", GAUGE, C, DAILY,
       "Topics marked for deletion (/admin/delete_topics) and not deleted yet."),
    _m("kafka_zk_pending_deletion_oldest_age_seconds", GAUGE, C, DAILY,
       "Age of the oldest pending deletion marker (0: none)."),
    _m("kafka_zk_leftover_bytes", GAUGE, CB, DAILY,
       "Bytes on the broker's disk in directories holding no live replica (-delete past its delay, orphan, -stray)."),
    _m("kafka_zk_brokers_down", GAUGE, C, DAILY,
       "Brokers that hold replicas but are not registered in ZooKeeper."),
    _m("kafka_zk_daily_stage_duration_seconds", GAUGE, ("cluster", "stage"), DAILY,
       "How long the daily run's snapshot, inventory (slowest broker) and audit took."),
    _m("kafka_zk_daily_last_run_duration_seconds", GAUGE, C, DAILY,
       "How long the last daily run took, from its start to its alert."),
    _m("kafka_zk_daily_last_run_timestamp_seconds", GAUGE, C, DAILY,
       "When the last daily run ended (Unix time)."),
    _m("kafka_zk_daily_last_run_success", GAUGE, C, DAILY,
       "1 when no task of the last daily run failed, else 0."),
    # -- during and after every maintenance run -----------------------------------------------------
    _m("kafka_zk_maintenance_partitions", GAUGE, CD, MAINTENANCE,
       "Partitions the run's plan moves."),
    _m("kafka_zk_maintenance_partitions_left", GAUGE, CD, MAINTENANCE,
       "Partitions of the plan not moved yet."),
    _m("kafka_zk_maintenance_bytes", GAUGE, CD, MAINTENANCE,
       "Bytes the run's plan moves."),
    _m("kafka_zk_maintenance_bytes_left", GAUGE, CD, MAINTENANCE,
       "Bytes of the plan not moved yet."),
    _m("kafka_zk_maintenance_batch", GAUGE, CD, MAINTENANCE,
       "The batch the run is at (1-based; the last one once all are done)."),
    _m("kafka_zk_maintenance_batches", GAUGE, CD, MAINTENANCE,
       "Batches in the run's plan."),
    _m("kafka_zk_maintenance_steps", GAUGE, CD, MAINTENANCE,
       "Steps in the run's plan (throttles, batches, topic-id writes, restarts, elections)."),
    _m("kafka_zk_maintenance_steps_done", GAUGE, CD, MAINTENANCE,
       "Steps of the plan completed."),
    _m("kafka_zk_maintenance_throttle_bytes_per_second", GAUGE, CD, MAINTENANCE,
       "The replication throttle the run sets, per broker."),
    _m("kafka_zk_maintenance_estimated_remaining_seconds", GAUGE, CD, MAINTENANCE,
       "Lower bound of the time left: what is left at the throttle, the busiest broker of each batch setting its pace."),
    _m("kafka_zk_maintenance_approval_wait_seconds", GAUGE, CD, MAINTENANCE,
       "How long the plan waited for a person's decision (still waiting: so far)."),
    _m("kafka_zk_maintenance_cluster_writes", GAUGE, CD, MAINTENANCE,
       "ZooKeeper writes the run made to the cluster (its change logs; the lease's own apart)."),
    _m("kafka_zk_maintenance_dry_run", GAUGE, CD, MAINTENANCE,
       "1 when the run is a dry run, else 0."),
    _m("kafka_zk_maintenance_result", GAUGE, ("cluster", "dag_id", "result"), MAINTENANCE,
       "1 for the run's result (running, succeeded, failed, rejected, timed_out), 0 for the others."),
    _m("kafka_zk_maintenance_last_update_timestamp_seconds", GAUGE, CD, MAINTENANCE,
       "When the run's figures were last published (Unix time)."),
    # -- about the metrics -------------------------------------------------------------------------
    _m("kafka_zk_metrics_push_failures_total", COUNTER, ("cluster", "receiver"), DELIVERY,
       "Pushes of these metrics that did not reach the receiver (the task went on)."),
)  # fmt: skip

BY_NAME = {m.name: m for m in METRICS}


def metric(name: str) -> Metric:
    """The definition of ``name`` (KeyError: not a metric of this provider)."""
    return BY_NAME[name]


README_BEGIN = "<!-- metrics-table: generated by python -m airflow_provider_kafka_zk.metrics list -->"
README_END = "<!-- /metrics-table -->"


def markdown_table() -> str:
    """The README's metric list: one table per group, a row per metric."""
    lines = [README_BEGIN]
    for group, when in GROUPS.items():
        lines += [
            "",
            f"Published {when}:",
            "",
            "| metric | type | labels | what it measures |",
            "|---|---|---|---|",
        ]
        for m in METRICS:
            if m.group == group:
                labels = ", ".join(f"`{label}`" for label in m.labels)
                lines.append(f"| `{m.name}` | {m.kind} | {labels} | {m.help} |")
    lines.append(README_END)
    return "\n".join(lines)


def statsd_mapping(prefix: str = "airflow") -> str:
    """A statsd_exporter mapping (YAML) for StatsD without tags: Airflow's ``[metrics] statsd_prefix``
    then the metric's name, then its label values in :attr:`Metric.labels` order, dot-separated
    (what :mod:`.publish` sends when ``[metrics] statsd_influxdb_enabled`` is off).

    :param prefix: Airflow's ``[metrics] statsd_prefix``.
    """
    lines = ["mappings:"]
    for m in METRICS:
        stars = ".".join("*" for _ in m.labels)
        lines.append(f'  - match: "{prefix}.{m.name}{"." + stars if stars else ""}"')
        lines.append(f'    name: "{m.name}"')
        if m.labels:
            lines.append("    labels:")
            lines += [f'      {label}: "${i}"' for i, label in enumerate(m.labels, 1)]
    return "\n".join(lines) + "\n"
