"""From what a run wrote to metric samples (pure: no Airflow, no I/O).

* A daily run: the audit's ``summary.json`` (findings by check and severity, and its ``figures``:
  :func:`airflow_provider_kafka_zk.kafka.figures.audit_figures`), the tasks' durations, the run's end
  and result: :func:`daily_samples`.
* A maintenance run: the step executor's plan steps and ``progress.json`` (:func:`step_figures`, kept
  in ``progress.json`` as ``figures`` so the run's teardown finds the last ones), ``approval.json``,
  the change logs' write count and the run's result: :func:`maintenance_samples`. Any DAG whose
  mutation runs on the step executor gets them; a DAG that only reads gets its result and times.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_provider_kafka_zk.metrics.definitions import RESULTS
from airflow_provider_kafka_zk.metrics.publish import Sample

STAGES = {"snapshot": "snapshot", "inventory": "inventory", "audit": "audit"}
"""Daily stage -> the task whose duration it is (a mapped task: its slowest instance)."""


# ---------------------------------------------------------------------------------------------
# the daily run
# ---------------------------------------------------------------------------------------------


def stage_seconds(breadcrumbs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Stage -> seconds from Airflow's task breadcrumbs (``task_id``, ``map_index``, ``duration``) of
    the finished tasks; a stage whose task did not finish is absent.

    :param breadcrumbs: the run's finished task instances (``ti.get_task_breadcrumbs``).
    """
    by_task: dict[str, float] = {}
    for crumb in breadcrumbs:
        task, duration = crumb.get("task_id"), crumb.get("duration")
        if task in STAGES.values() and isinstance(duration, int | float):
            by_task[task] = max(by_task.get(task, 0.0), float(duration))
    return {stage: by_task[task] for stage, task in STAGES.items() if task in by_task}


def daily_samples(
    cluster: str,
    summary: Mapping[str, Any] | None,
    *,
    stages: Mapping[str, float],
    run_seconds: float | None,
    ended_at: float,
    success: bool,
) -> list[Sample]:
    """The daily metrics of one run (:data:`~.definitions.METRICS`, group ``daily``).

    :param cluster: the cluster.
    :param summary: the audit's ``summary.json`` (None: the audit did not finish; only the run's own
        figures then).
    :param stages: :func:`stage_seconds`.
    :param run_seconds: from the run's start to now (None: unknown).
    :param ended_at: now, Unix seconds.
    :param success: no task of the run failed.
    """
    c = {"cluster": cluster}
    out = [
        Sample("kafka_zk_daily_last_run_timestamp_seconds", c, ended_at),
        Sample("kafka_zk_daily_last_run_success", c, 1.0 if success else 0.0),
    ]
    if run_seconds is not None:
        out.append(Sample("kafka_zk_daily_last_run_duration_seconds", c, run_seconds))
    out += [Sample("kafka_zk_daily_stage_duration_seconds", {**c, "stage": s}, v) for s, v in stages.items()]
    if summary is None:
        return out
    for check, severities in sorted((summary.get("by_check") or {}).items()):
        for severity, count in sorted(severities.items()):
            out.append(Sample("kafka_zk_findings", {**c, "check": check, "severity": severity}, count))
    figures = summary.get("figures") or {}
    for broker, exposure in (figures.get("rf1_exposure") or {}).items():
        b = {**c, "broker": str(broker)}
        out.append(Sample("kafka_zk_rf1_exposure_partitions", b, exposure.get("partitions") or 0))
        if exposure.get("bytes") is not None:
            out.append(Sample("kafka_zk_rf1_exposure_bytes", b, exposure["bytes"]))
    for broker, size in (figures.get("leftover_bytes") or {}).items():
        out.append(Sample("kafka_zk_leftover_bytes", {**c, "broker": str(broker)}, size))
    for key, name in (
        ("topic_id_trouble_topics", "kafka_zk_topic_id_trouble_topics"),
        ("pending_deletions", "kafka_zk_pending_deletions"),
        ("oldest_pending_deletion_age_s", "kafka_zk_pending_deletion_oldest_age_seconds"),
        ("brokers_down", "kafka_zk_brokers_down"),
    ):
        if figures.get(key) is not None:
            out.append(Sample(name, c, figures[key]))
    return out


# ---------------------------------------------------------------------------------------------
# a maintenance run
# ---------------------------------------------------------------------------------------------


def _moves_as_plan(step: Any) -> list[dict[str, Any]]:
    return [
        {"size_bytes": m.size_bytes, "current": list(m.replicas_before), "target": list(m.replicas_after)}
        for m in step.moves
    ]


@dataclass(frozen=True)
class PlanTable:
    """A plan reduced once to what its figures need: the step ids, and per reassignment batch its id,
    position, partitions, bytes and copy time at the throttle (so a figure costs O(batches), not
    O(partitions), at every progress save)."""

    step_ids: tuple[str, ...]
    batches: tuple[tuple[str, int, int, int, float], ...]  # id, index, partitions, bytes, seconds
    rate: int | None


def plan_table(steps: Sequence[Any], rate: int | None = None) -> PlanTable:
    """:class:`PlanTable` of ``steps`` (:mod:`airflow_provider_kafka_zk.kafka.steps`) at ``rate`` bytes/s."""
    from airflow_provider_kafka_zk.kafka.approval import batch_seconds_at_rate

    batches = tuple(
        (
            s.id,
            s.batch,
            len(s.moves),
            sum(m.size_bytes or 0 for m in s.moves),
            batch_seconds_at_rate(_moves_as_plan(s), rate) if rate else 0.0,
        )
        for s in steps
        if s.kind == "drain_batch"
    )
    return PlanTable(tuple(s.id for s in steps), batches, rate)


def table_figures(table: PlanTable, completed: Collection[str]) -> dict[str, Any]:
    """:func:`step_figures` from a :class:`PlanTable`."""
    figures: dict[str, Any] = {
        "steps": len(table.step_ids),
        "steps_done": sum(1 for i in table.step_ids if i in completed),
    }
    if not table.batches:
        return figures
    left = [b for b in table.batches if b[0] not in completed]
    figures.update(
        partitions=sum(b[2] for b in table.batches),
        bytes=sum(b[3] for b in table.batches),
        partitions_left=sum(b[2] for b in left),
        bytes_left=sum(b[3] for b in left),
        batches=len(table.batches),
        batch=(left[0][1] + 1) if left else len(table.batches),
    )
    if table.rate:
        figures["throttle_bytes_per_second"] = table.rate
        figures["estimated_remaining_s"] = sum(b[4] for b in left)
    return figures


def step_figures(steps: Sequence[Any], completed: Collection[str], rate: int | None = None) -> dict[str, Any]:
    """Where a plan on the step executor stands (JSON-safe): steps planned and done; for the batches of
    a reassignment (a drain, a move-back) the partitions and bytes planned and left, the batch it is
    at, and a lower bound of the time left at ``rate`` (the busiest broker of each batch sets its
    pace, as the approval's estimate says).

    :param steps: every step of the plan (:mod:`airflow_provider_kafka_zk.kafka.steps`).
    :param completed: ids of the completed steps (``progress.json``).
    :param rate: the throttle in bytes/s per broker (None: no reassignment or unknown).
    """
    return table_figures(plan_table(steps, rate), completed)


_FIGURE_METRICS = {
    "partitions": "kafka_zk_maintenance_partitions",
    "partitions_left": "kafka_zk_maintenance_partitions_left",
    "bytes": "kafka_zk_maintenance_bytes",
    "bytes_left": "kafka_zk_maintenance_bytes_left",
    "batch": "kafka_zk_maintenance_batch",
    "batches": "kafka_zk_maintenance_batches",
    "steps": "kafka_zk_maintenance_steps",
    "steps_done": "kafka_zk_maintenance_steps_done",
    "throttle_bytes_per_second": "kafka_zk_maintenance_throttle_bytes_per_second",
    "estimated_remaining_s": "kafka_zk_maintenance_estimated_remaining_seconds",
}


def _when(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp() if text else None
    except ValueError:
        return None


def approval_wait_seconds(approval: Mapping[str, Any] | None, now: float) -> float | None:
    """How long the plan waited for a decision (``approval.json``: ``requested_at`` to ``decided_at``,
    or to ``now`` while pending); 0 when no person was asked (a dry run, ``require_approval = false``);
    None without a record (the DAG has no approval step, or the run stopped before it)."""
    if not isinstance(approval, Mapping) or approval.get("decision") is None:
        return None
    if approval.get("decision") in ("not_needed", "not_required"):
        return 0.0
    asked = _when(approval.get("requested_at"))
    if asked is None:
        return None
    decided = _when(approval.get("decided_at"))
    return max(0.0, (decided if decided is not None else now) - asked)


def run_result(*, finished: bool, failed: bool, approval: Mapping[str, Any] | None) -> str:
    """``running`` until the run's teardown, then ``succeeded``, ``failed``, or ``rejected`` /
    ``timed_out`` when the plan was not approved (:data:`~.definitions.RESULTS`)."""
    if not finished:
        return "running"
    decision = approval.get("decision") if isinstance(approval, Mapping) else None
    if decision in ("rejected", "timed_out"):
        return str(decision)
    return "failed" if failed else "succeeded"


def maintenance_samples(
    cluster: str,
    dag_id: str,
    *,
    figures: Mapping[str, Any] | None,
    result: str,
    now: float,
    approval: Mapping[str, Any] | None = None,
    writes: int | None = None,
    dry_run: bool | None = None,
) -> list[Sample]:
    """The maintenance metrics of one run (group ``maintenance``).

    :param figures: :func:`step_figures` (None: the run has no executed plan, e.g. a read-only DAG).
    :param result: :func:`run_result`.
    :param now: Unix seconds.
    :param approval: ``approval.json`` (None: none).
    :param writes: cluster writes in the change logs (None: not counted here).
    :param dry_run: the run's ``dry_run`` (None: the DAG has none).
    """
    labels = {"cluster": cluster, "dag_id": dag_id}
    out = [
        Sample(name, labels, figures[key]) for key, name in _FIGURE_METRICS.items() if key in (figures or {})
    ]
    wait = approval_wait_seconds(approval, now)
    if wait is not None:
        out.append(Sample("kafka_zk_maintenance_approval_wait_seconds", labels, wait))
    if writes is not None:
        out.append(Sample("kafka_zk_maintenance_cluster_writes", labels, writes))
    if dry_run is not None:
        out.append(Sample("kafka_zk_maintenance_dry_run", labels, 1.0 if dry_run else 0.0))
    out += [
        Sample("kafka_zk_maintenance_result", {**labels, "result": r}, 1.0 if r == result else 0.0)
        for r in RESULTS
    ]
    out.append(Sample("kafka_zk_maintenance_last_update_timestamp_seconds", labels, now))
    return out
