"""Where the provider's runs publish their metrics: one call per place, each never failing its task.

* :func:`publish_daily` -- the daily DAG's ``alert`` teardown, after every other task (the audit's
  ``summary.json``, the tasks' durations, the run's result).
* :func:`observe_progress` -- the step executor of every mutation (drain, move-back, topicId repair,
  election, deletion cleanup): each time ``progress.json`` is saved, the plan's figures are kept in it
  (``figures``) and published (during the run).
* :func:`reassignment_wait_metrics` / :func:`publish_reassignment_wait` -- the drain's and the
  move-back's wait in the triggerer: partitions and bytes left while a batch moves.
* :func:`publish_maintenance_run` -- every manual DAG's ``alert`` teardown (:mod:`..dags._alerting`):
  the last figures, the approval's wait, the writes and the run's result, from the run folder. A new
  manual DAG built with :func:`~airflow_provider_kafka_zk.dags._alerting.add_run_alert` gets them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kafka_zk.metrics.figures import (
    daily_samples,
    maintenance_samples,
    plan_table,
    run_result,
    stage_seconds,
    table_figures,
)
from airflow_provider_kafka_zk.metrics.publish import (
    DAILY_JOB,
    MAINTENANCE_JOB,
    MetricsSettings,
    Outcome,
    Sample,
    metrics_settings,
    publish,
)

log = logging.getLogger(__name__)


def _seconds_since(start: Any, now: float) -> float | None:
    if isinstance(start, datetime):
        return max(0.0, now - start.timestamp())
    return None


def publish_daily(
    ti: Any,
    dag_run: Any,
    cluster: str,
    summary: Mapping[str, Any] | None,
    *,
    failed: bool,
    logger: Any = None,
) -> dict[str, Any]:
    """Publish a daily run's metrics (its alert task calls this last); returns what was done.

    :param ti: the alert task's running task instance (for the run's task durations).
    :param dag_run: the run (its start).
    :param cluster: the cluster.
    :param summary: the audit's ``summary.json`` (None: it did not finish; the group's figures from
        the last audit stay, only the run's own are updated).
    :param failed: a task of the run failed.
    """
    out = logger or log
    try:
        settings = metrics_settings(cluster)
        if not settings.enabled:
            return {"receivers": {}}
        now = time.time()
        try:
            crumbs = list(ti.get_task_breadcrumbs(ti.dag_id, ti.run_id))
        except Exception as exc:  # the durations are a nicety: the rest is published anyway
            out.warning("Task durations unavailable for the metrics: %s: %s", type(exc).__name__, exc)
            crumbs = []
        samples = daily_samples(
            cluster,
            summary,
            stages=stage_seconds(crumbs),
            run_seconds=_seconds_since(getattr(dag_run, "start_date", None), now),
            ended_at=now,
            success=not failed,
        )
        outcome = publish(
            samples,
            cluster=cluster,
            job=DAILY_JOB,
            grouping={"cluster": cluster},
            settings=settings,
            replace=summary is not None,
            logger=out,
        )
        return outcome.to_dict()
    except Exception as exc:  # never fail the alert for a metric
        out.warning("Metrics of the daily run not published: %s: %s", type(exc).__name__, exc)
        return {"error": f"{type(exc).__name__}: {exc}"}


# ---------------------------------------------------------------------------------------------
# maintenance runs
# ---------------------------------------------------------------------------------------------


def _read_json(folder: str, name: str, conn_id: str | None) -> dict[str, Any] | None:
    import fsspec

    from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url

    fs, path = fsspec.core.url_to_fs(artefacts_url(f"{folder.rstrip('/')}/{name}", conn_id))
    try:
        data = json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def observe_progress(ctx: Any, *, rate: int | None = None) -> None:
    """Make the step executor's ``progress.json`` carry the plan's figures and publish them at every
    save (nothing at all when the cluster's metrics are off: no read, no push).

    :param ctx: the executor's :class:`~airflow_provider_kafka_zk.maintenance.executor.StepContext`.
    :param rate: the reassignment throttle in bytes/s (drains and move-backs).
    """
    try:
        session = ctx.session
        cluster = str(session.cluster)
        settings = metrics_settings(cluster)
        if not settings.enabled or getattr(session, "dry_run", False):
            return
        progress = ctx.progress
        folder = progress.url.rsplit("/", 1)[0]
        approval = _read_json(folder, "approval.json", None)
        dag_id = str(getattr(session.run, "dag_id", "") or "")
        table = plan_table(list(ctx.plan_steps), rate)  # once: each save then costs O(batches)

        def figures(data: Mapping[str, Any]) -> dict[str, Any]:
            earlier = dict(data.get("figures") or {})
            try:
                now = table_figures(table, data.get("completed") or {})
            except Exception as exc:
                log.warning("Progress figures not computed: %s: %s", type(exc).__name__, exc)
                return earlier
            # a later executor of the same run (clear_throttles) keeps the reassignment's figures
            return earlier if "batches" in earlier and "batches" not in now else now

        def published(data: Mapping[str, Any]) -> None:
            try:
                samples = maintenance_samples(
                    cluster,
                    dag_id,
                    figures=data.get("figures"),
                    result="running",
                    now=time.time(),
                    approval=approval,
                    dry_run=False,
                )
            except Exception as exc:
                log.warning("Progress metrics not made: %s: %s", type(exc).__name__, exc)
                return
            publish(
                samples,
                cluster=cluster,
                job=MAINTENANCE_JOB,
                grouping={"cluster": cluster, "dag_id": dag_id},
                settings=settings,
            )

        progress.figures_of = figures
        progress.after_save = published
        if progress.data.get("completed"):
            # a resumed run recorded its waited-for batch before this executor existed: refresh
            progress.save()
    except Exception as exc:  # never fail a mutation for a metric
        log.warning("Progress metrics off for this run: %s: %s", type(exc).__name__, exc)


def reassignment_wait_metrics(
    cluster: str, dag_id: str, batches: Sequence[Sequence[Any]], index: int, rate: int
) -> dict[str, Any] | None:
    """What the reassignment trigger needs to publish progress during batch ``index``'s wait (its
    ``metrics`` argument), or None when no Pushgateway is configured (it then publishes nothing).
    Never raises.

    :param batches: the plan's batches (moves with ``size_bytes``, ``current``, ``target``).
    :param index: the batch waited for (0-based).
    :param rate: the throttle, bytes/s per broker.
    """
    from airflow_provider_kafka_zk.kafka.approval import batch_seconds_at_rate

    try:
        settings = metrics_settings(cluster)
        if not settings.pushgateway_url:
            return None

        def seconds(batch: Sequence[Any]) -> float:
            moves = [{"size_bytes": m.size_bytes, "current": m.current, "target": m.target} for m in batch]
            return batch_seconds_at_rate(moves, rate)

        later = batches[index + 1 :]
        return {
            "cluster": cluster,
            "dag_id": dag_id,
            "url": settings.pushgateway_url,
            "timeout_s": settings.timeout_s,
            "later_partitions": sum(len(b) for b in later),
            "later_bytes": sum(m.size_bytes or 0 for b in later for m in b),
            "later_seconds": sum(seconds(b) for b in later),
            "batch_seconds": seconds(batches[index]),
        }
    except Exception as exc:
        log.warning("The wait publishes no progress metrics: %s: %s", type(exc).__name__, exc)
        return None


def publish_reassignment_wait(
    spec: Mapping[str, Any], *, moving: int, bytes_done: int, bytes_total: int
) -> Outcome:
    """One progress update from the trigger's wait (POST: the other figures of the group stay).

    :param spec: :func:`reassignment_wait_metrics`.
    :param moving: partitions of this batch still moving.
    :param bytes_done: bytes of this batch's completed partitions.
    :param bytes_total: this batch's bytes.
    """
    labels = {"cluster": spec["cluster"], "dag_id": spec["dag_id"]}
    left_in_batch = max(0, bytes_total - bytes_done)
    share = left_in_batch / bytes_total if bytes_total else (1.0 if moving else 0.0)
    samples = [
        Sample("kafka_zk_maintenance_partitions_left", labels, spec["later_partitions"] + moving),
        Sample("kafka_zk_maintenance_bytes_left", labels, spec["later_bytes"] + left_in_batch),
        Sample(
            "kafka_zk_maintenance_estimated_remaining_seconds",
            labels,
            spec["later_seconds"] + spec["batch_seconds"] * share,
        ),
        Sample("kafka_zk_maintenance_last_update_timestamp_seconds", labels, time.time()),
    ]
    return publish(
        samples,
        cluster=spec["cluster"],
        job=MAINTENANCE_JOB,
        grouping=labels,
        settings=MetricsSettings(str(spec["url"]), False, float(spec["timeout_s"])),
        replace=False,
    )


def publish_maintenance_run(
    *,
    cluster: str,
    dag_id: str,
    folder: str | None,
    conn_id: str | None,
    failed: Sequence[str],
    writes: int | None,
    dry_run: bool | None,
    logger: Any = None,
) -> dict[str, Any]:
    """Publish a finished maintenance run's metrics (its alert teardown calls this): the last figures
    its step executor kept in ``progress.json``, the approval's wait, its writes and its result.

    :param folder: the run folder (None: the run made none).
    :param conn_id: the artefact store's connection.
    :param failed: the run's failed tasks.
    :param writes: cluster writes in its change logs.
    :param dry_run: the run's ``dry_run`` (None: the DAG has none).
    """
    out = logger or log
    try:
        settings = metrics_settings(cluster)
        if not settings.enabled:
            return {"receivers": {}}
        approval = progress = None
        if folder:
            approval = _read_json(folder, "approval.json", conn_id)
            progress = _read_json(folder, "progress.json", conn_id)
        samples = maintenance_samples(
            cluster,
            dag_id,
            figures=(progress or {}).get("figures"),
            result=run_result(finished=True, failed=bool(failed), approval=approval),
            now=datetime.now(UTC).timestamp(),
            approval=approval,
            writes=writes,
            dry_run=dry_run,
        )
        return publish(
            samples,
            cluster=cluster,
            job=MAINTENANCE_JOB,
            grouping={"cluster": cluster, "dag_id": dag_id},
            settings=settings,
            logger=out,
        ).to_dict()
    except Exception as exc:  # never fail the alert for a metric
        out.warning("Metrics of the maintenance run not published: %s: %s", type(exc).__name__, exc)
        return {"error": f"{type(exc).__name__}: {exc}"}
