"""Publishing metric samples: Airflow's own metrics layer (StatsD or OpenTelemetry, whichever the
deployment turned on) and a Prometheus Pushgateway (the batch-job path Prometheus documents).

Both are optional and off by default (:func:`metrics_settings`). Neither ever fails or stalls the
task that publishes: the Pushgateway push has a bounded timeout (``[kafka_zk] metrics_timeout_s``,
default 2 s), a failure is one warning in the task log, is counted
(``kafka_zk_metrics_push_failures_total`` through Airflow's layer) and is returned to the caller
(the run's alert record keeps it); StatsD is one UDP datagram per sample and OpenTelemetry records in
memory (Airflow's exporter sends them), so neither waits for a receiver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.metrics.definitions import COUNTER, metric

log = logging.getLogger(__name__)

DAILY_JOB = "kafka_zk_daily"
MAINTENANCE_JOB = "kafka_zk_maintenance"
DEFAULT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Sample:
    """One value of one metric (:mod:`.definitions`) with its labels."""

    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class MetricsSettings:
    """Where a cluster's metrics go.

    :param pushgateway_url: the Pushgateway's base URL (empty: no pushes).
    :param airflow: also through Airflow's metrics layer (``[metrics] statsd_on`` / ``otel_on``).
    :param timeout_s: the bound of one push.
    """

    pushgateway_url: str = ""
    airflow: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def enabled(self) -> bool:
        return bool(self.pushgateway_url) or self.airflow


@dataclass
class Outcome:
    """What one publication did: per receiver ``ok``, ``off`` or the error (for logs and records)."""

    receivers: dict[str, str] = field(default_factory=dict)
    samples: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(v not in ("ok", "off") for v in self.receivers.values())

    def to_dict(self) -> dict[str, Any]:
        return {"receivers": dict(self.receivers), "samples": self.samples, "seconds": round(self.seconds, 4)}


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def metrics_settings(
    cluster: str | None, clusters: Mapping[str, Mapping[str, Any]] | None = None
) -> MetricsSettings:
    """The cluster's metrics settings: the cluster file's ``metrics_pushgateway_url`` and
    ``metrics_airflow`` (``[defaults]`` too), else ``[kafka_zk] metrics_pushgateway_url``,
    ``metrics_airflow``; ``[kafka_zk] metrics_timeout_s``. A cluster file's ``metrics = false``
    turns a cluster's off. Never raises: an unreadable setting means off, said in the log.

    :param cluster: the cluster's name (None: the section's settings only).
    :param clusters: the cluster file's clusters (default: read it).
    """
    from airflow_provider_kafka_zk.clusters import load_clusters, provider_option

    try:
        configured = (clusters if clusters is not None else load_clusters()).get(cluster or "", {})
        if configured.get("metrics") is False:
            return MetricsSettings()
        url = str(
            configured.get("metrics_pushgateway_url") or provider_option("metrics_pushgateway_url") or ""
        )
        airflow = configured.get("metrics_airflow")
        if airflow is None:
            airflow = provider_option("metrics_airflow") or False
        timeout = float(provider_option("metrics_timeout_s") or DEFAULT_TIMEOUT_S)
        return MetricsSettings(url.rstrip("/"), _truthy(airflow), max(0.1, timeout))
    except Exception as exc:  # a metrics setting must never fail a task
        log.warning(
            "Metrics are off for %s: their settings cannot be read (%s: %s)", cluster, type(exc).__name__, exc
        )
        return MetricsSettings()


# ---------------------------------------------------------------------------------------------
# Pushgateway
# ---------------------------------------------------------------------------------------------


class _SampleCollector:
    """The samples as prometheus_client metric families (HELP and TYPE from the definitions)."""

    def __init__(self, samples: Iterable[Sample]) -> None:
        self.samples = list(samples)

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        by_name: dict[str, list[Sample]] = {}
        for s in self.samples:
            by_name.setdefault(s.name, []).append(s)
        for name, items in by_name.items():
            m = metric(name)
            if m.kind == COUNTER:
                family: Any = CounterMetricFamily(name.removesuffix("_total"), m.help, labels=m.labels)
            else:
                family = GaugeMetricFamily(name, m.help, labels=m.labels)
            for s in items:
                family.add_metric([str(s.labels[label]) for label in m.labels], float(s.value))
            yield family


BACKOFF_S = 60.0
"""After a failed push, further pushes to that Pushgateway from this process are skipped for this
long (counted as failed): a receiver that is down costs one timeout a minute, not one per update."""
_failed_at: dict[str, float] = {}


def push(
    samples: Iterable[Sample],
    *,
    url: str,
    job: str,
    grouping: Mapping[str, str],
    timeout_s: float,
    replace: bool = True,
) -> None:
    """Push ``samples`` to the Pushgateway at ``url`` as ``job`` with ``grouping`` (raises on failure).

    :param replace: PUT -- the group then holds exactly these samples (label sets gone since the last
        push disappear); False: POST, replacing only the metrics pushed (a progress update).
    """
    from prometheus_client import CollectorRegistry, push_to_gateway, pushadd_to_gateway

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SampleCollector(samples))
    send = push_to_gateway if replace else pushadd_to_gateway
    send(url, job=job, registry=registry, grouping_key=dict(grouping), timeout=timeout_s)


# ---------------------------------------------------------------------------------------------
# Airflow's metrics layer
# ---------------------------------------------------------------------------------------------


def _tags_supported() -> bool:
    """Whether Airflow's metrics backend keeps tags: OpenTelemetry, DogStatsD, StatsD with InfluxDB-style
    tags (``statsd_influxdb_enabled``: statsd_exporter reads them). Plain StatsD drops them."""
    from airflow.sdk.configuration import conf

    if conf.getboolean("metrics", "statsd_on", fallback=False) and not conf.getboolean(
        "metrics", "statsd_datadog_enabled", fallback=False
    ):
        return conf.getboolean("metrics", "statsd_influxdb_enabled", fallback=False)
    return True


def stat_name(sample: Sample, *, tags: bool) -> str:
    """The name Airflow's layer gets: the metric's, plus (without tags) its label values in the
    definition's order, dot-separated, dots inside a value made ``_`` (the statsd_exporter mapping of
    :func:`~.definitions.statsd_mapping` turns them back into labels)."""
    if tags:
        return sample.name
    m = metric(sample.name)
    return ".".join([sample.name, *(str(sample.labels[label]).replace(".", "_") for label in m.labels)])


def _airflow_stats() -> Any:
    """The Task SDK's ``Stats``, set up from ``[metrics]`` as Airflow's task runner sets it up
    (``task_runner.main``) when this process has not been (``airflow dags test`` runs tasks in its
    own process; a triggerer's callback runs outside any task)."""
    from airflow.sdk._shared.observability.metrics import stats as shared
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    if getattr(shared, "_factory", None) is None:
        stats.initialize(
            factory=stats_utils.get_stats_factory(),
            export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=True),
        )
    return stats


def through_airflow(samples: Iterable[Sample]) -> int:
    """Record ``samples`` with Airflow's ``Stats`` (gauges; counters incremented); returns how many."""
    stats = _airflow_stats()

    tags = _tags_supported()
    count = 0
    for s in samples:
        name = stat_name(s, tags=tags)
        labels = {k: str(v) for k, v in s.labels.items()} if tags else None
        if metric(s.name).kind == COUNTER:
            stats.incr(name, count=int(s.value), tags=labels)
        else:
            stats.gauge(name, float(s.value), tags=labels)
        count += 1
    return count


# ---------------------------------------------------------------------------------------------
# One publication
# ---------------------------------------------------------------------------------------------


def publish(
    samples: Iterable[Sample],
    *,
    cluster: str,
    job: str,
    grouping: Mapping[str, str],
    settings: MetricsSettings | None = None,
    replace: bool = True,
    logger: Any = None,
) -> Outcome:
    """Send ``samples`` to every receiver ``settings`` enables; never raises, never waits longer than
    the push timeout. A failed push is logged (a warning naming the receiver and the cause), counted
    (``kafka_zk_metrics_push_failures_total``) and in the returned outcome.

    :param cluster: the cluster (the failure counter's label; the settings when none are given).
    :param job: the Pushgateway job (:data:`DAILY_JOB`, :data:`MAINTENANCE_JOB`).
    :param grouping: the Pushgateway grouping key (``cluster``, and ``dag_id`` for maintenance).
    :param settings: where to (default: :func:`metrics_settings` of ``cluster``).
    :param replace: PUT (the group's whole state) or POST (some metrics updated).
    :param logger: where to log (the task's logger; default this module's).
    """
    out = logger or log
    started = time.monotonic()
    outcome = Outcome()
    try:
        settings = settings or metrics_settings(cluster)
        if not settings.enabled:
            return outcome
        samples = list(samples)
        outcome.samples = len(samples)
        failed_at = _failed_at.get(settings.pushgateway_url)
        if settings.pushgateway_url and failed_at is not None and time.monotonic() - failed_at < BACKOFF_S:
            outcome.receivers["pushgateway"] = (
                f"skipped: a push to it failed {time.monotonic() - failed_at:.0f} s ago (retried after {BACKOFF_S:.0f} s)"
            )
        elif settings.pushgateway_url:
            try:
                push(
                    samples,
                    url=settings.pushgateway_url,
                    job=job,
                    grouping=grouping,
                    timeout_s=settings.timeout_s,
                    replace=replace,
                )
                outcome.receivers["pushgateway"] = "ok"
                _failed_at.pop(settings.pushgateway_url, None)
            except Exception as exc:  # unreachable, refused, timed out, prometheus_client missing
                _failed_at[settings.pushgateway_url] = time.monotonic()
                outcome.receivers["pushgateway"] = f"{type(exc).__name__}: {exc}"
                out.warning(
                    "Metrics not delivered to the Pushgateway %s (%s: %s; %d sample(s) of %s dropped, the task "
                    "goes on): is it running and reachable from this worker? ([kafka_zk] metrics_pushgateway_url)",
                    settings.pushgateway_url,
                    type(exc).__name__,
                    exc,
                    len(samples),
                    job,
                )
        if settings.airflow:
            failures = [
                Sample("kafka_zk_metrics_push_failures_total", {"cluster": cluster, "receiver": r}, 1)
                for r, v in outcome.receivers.items()
                if v != "ok"
            ]
            try:
                through_airflow([*samples, *failures])
                outcome.receivers["airflow"] = "ok"
            except Exception as exc:  # Airflow's layer misconfigured: say so, go on
                outcome.receivers["airflow"] = f"{type(exc).__name__}: {exc}"
                out.warning(
                    "Metrics not recorded through Airflow's metrics layer: %s: %s", type(exc).__name__, exc
                )
    except Exception as exc:  # never fail the task for a metric
        outcome.receivers["error"] = f"{type(exc).__name__}: {exc}"
        out.warning("Metrics not published (%s: %s); the task goes on", type(exc).__name__, exc)
    finally:
        outcome.seconds = time.monotonic() - started
    if outcome.receivers and not outcome.failed:
        out.info(
            "Metrics published: %d sample(s) of %s to %s in %.3f s",
            outcome.samples,
            job,
            ", ".join(outcome.receivers),
            outcome.seconds,
        )
    return outcome
