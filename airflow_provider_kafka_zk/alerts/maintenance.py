"""What the alert of a failed maintenance run says: what failed and why, where the run stopped, what it
had changed on the cluster by then (its change logs and rollback artefacts), and how to undo or finish.

Pure (no Airflow, no I/O): the alert task (:class:`~.operators.MaintenanceRunAlertOperator`) feeds it
the run's task states in DAG order, the failed tasks' errors, the run folder's change logs
(``changes-<task>-<try>.json``, written by :mod:`airflow_provider_kafka_zk.maintenance` after every
write) and the names of its rollback artefacts. The result goes into the same templates as the daily
alert (:func:`~.render.alert_content`'s ``maintenance``).

Every failed maintenance run pages, once: a maintenance run is one person's one-off action on a
cluster, with its own lease, its own partial changes and its own rollback files, so two failed runs
are two situations that each need a decision (finish it or undo it). A fingerprint shared across
runs (``task:execute``) would hide the second failed drain behind the first. What repeats daily --
the same broken cluster seen by every scheduled audit -- is what the daily alert dedupes; a person
does not trigger the same failing drain every day without knowing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_kafka_zk.alerts.incidents import TASKS, Incident
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT
from airflow_provider_kafka_zk.kafka.undo import (
    DAG_KINDS,
    UNDO_DAG_ID,
    UNDO_FOLDER,
    trigger_command,
    undo_conf,
)

FAILURE_XCOM_KEY = "kafka_zk_failure"
"""The XCom a failed task of a maintenance DAG leaves its error in (:func:`failure_record`)."""
CHANGE_LOG = re.compile(r"changes-(?P<task>.+)-(?P<try>[0-9]+)\.json")
"""The change log a maintenance session writes after each write (``changes-<task>-<try>.json``)."""
ROLLBACK = re.compile(r"rollback[A-Za-z0-9_.-]*\.json")
"""Rollback artefacts (``rollback.json``, ``rollback-files.json``): written and read back before the
change they undo."""
MAX_CHANGES_SHOWN = 15
MAX_ERROR_CHARS = 3000

DONE, FAILED, SKIPPED, NOT_RUN = "done", "FAILED", "skipped", "not run"
_OUTCOME = {"success": DONE, "failed": FAILED, "skipped": SKIPPED}

DRAIN = "kafka_zk_pre_maintenance_drain"
POST_MAINTENANCE = "kafka_zk_post_maintenance"
TOPIC_ID_REPAIR = "kafka_zk_topic_id_repair"
DELETION_CLEANUP = "kafka_zk_deletion_cleanup"
PRE_RESTART_CHECK = "kafka_zk_pre_restart_check"
KRAFT_READINESS = "kafka_zk_kraft_migration_readiness"
UNDO = UNDO_DAG_ID
READ_ONLY = (PRE_RESTART_CHECK, KRAFT_READINESS)
"""Manual DAGs that only read: their runs change nothing, whatever fails."""
ARTEFACT_KIND = {
    DRAIN: "drain",
    POST_MAINTENANCE: "post-maintenance",
    TOPIC_ID_REPAIR: "topic-id-repair",
    DELETION_CLEANUP: "deletion-cleanup",
    PRE_RESTART_CHECK: "log-scan",
    KRAFT_READINESS: "kraft-readiness",
    UNDO: UNDO_FOLDER,
}
"""Each manual DAG's run folder under ``<base>/<cluster>/`` (its run key below it)."""


def declined_by_a_person(
    failed: Mapping[str, Sequence[int]],
    *,
    report_task_id: str,
    writes: int,
    approval: Mapping[str, Any] | None,
) -> str | None:
    """Why a failed run does not page, or None when it pages: a person rejected its plan.

    A rejected plan fails the run on purpose (its ``report`` task says nothing changed), and the one
    who rejected it is the one a page would tell. A time-out still pages: nobody decided, and the
    person who triggered the run may not know. Anything else that failed, or any write, pages.

    :param failed: task id -> failed map indexes, of the run.
    :param report_task_id: the task that fails when the plan was not approved.
    :param writes: cluster writes the run's change logs count.
    :param approval: the run folder's ``approval.json`` (None: none there).
    """
    if set(failed) != {report_task_id} or writes or not isinstance(approval, Mapping):
        return None
    if approval.get("decision") != "rejected":
        return None
    who = (approval.get("decided_by") or {}).get("name") or "someone"
    comment = f' ("{approval["comment"]}")' if approval.get("comment") else ""
    return (
        f"not paged: the plan was rejected by {who} at {approval.get('decided_at')}{comment}; "
        "nothing was changed"
    )


def failure_record(exception: BaseException | str | None, try_number: int | None = None) -> dict[str, Any]:
    """What a failed task leaves for the run's alert: its error as a person reads it in the log.

    :param exception: the exception the task failed with (Airflow's context ``exception``).
    :param try_number: the try that failed.
    """
    if exception is None:
        text = "(no exception: the task was failed by Airflow, e.g. marked failed or timed out)"
    elif isinstance(exception, BaseException):
        text = f"{type(exception).__name__}: {exception}"
    else:
        text = str(exception)
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return {"error": text, "try_number": try_number}


def steps(order: Sequence[str], states: Mapping[str, Mapping[int, str]]) -> list[dict[str, Any]]:
    """Every task of the run in DAG order with its outcome (``done``, ``FAILED``, ``skipped``, ``not
    run``); a mapped task counts its instances (``FAILED 1 of 3``).

    :param order: the DAG's task ids, upstream first (the alert left out).
    :param states: task id -> {map index: terminal state} (tasks without one did not run).
    """
    out = []
    for task_id in order:
        by_index = states.get(task_id) or {}
        values = list(by_index.values())
        mapped = [i for i in by_index if i >= 0]
        if not values:
            outcome = NOT_RUN
        elif "failed" in values:
            outcome = FAILED
        elif all(v == "success" for v in values):
            outcome = DONE
        elif all(v in ("skipped", "removed") for v in values):
            outcome = SKIPPED
        elif "success" in values:
            outcome = DONE  # some instances skipped
        else:
            outcome = NOT_RUN  # upstream_failed
        count = ""
        if mapped and outcome == FAILED:
            count = f"{values.count('failed')} of {len(mapped)}"
        elif mapped:
            count = f"{len(mapped)} mapped"
        out.append({"task_id": task_id, "outcome": outcome, "count": count})
    return out


def stopped_at(run_steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The failed tasks, upstream first: where the run stopped."""
    return [s["task_id"] for s in run_steps if s["outcome"] == FAILED]


def _change_text(change: Mapping[str, Any]) -> str:
    op = str(change.get("op", "?")).removesuffix("Op")
    text = f"{op} {change.get('path', '?')}"
    if change.get("expected_version") is not None:
        text += f" (version {change['expected_version']}"
        text += f" -> {change['new_version']})" if change.get("new_version") is not None else ")"
    return text


def change_logs(logs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What the run changed, from its change logs: per log the task, the try and the writes (the
    maintenance lease's own znodes apart), the whole run's count, and whether the run still holds
    the cluster's maintenance lease (its last lease op a create or set, not a delete).

    :param logs: change-log file name -> its parsed JSON (``{"changes": [...], "run": {...}}``).
    """
    out = []
    lease_ops: list[tuple[str, str]] = []
    total = 0
    for name in sorted(logs, key=_log_order):
        record = logs[name]
        match = CHANGE_LOG.fullmatch(name)
        changes = [c for c in record.get("changes") or () if isinstance(c, Mapping)]
        # the lease's own znodes and the approval decision (a record of who decided, no cluster write)
        writes = [
            c
            for c in changes
            if c.get("op") not in ("approval", "CheckVersionOp")  # a decision, a version check: no write
            and not str(c.get("path", "")).startswith(LEASE_ROOT)
        ]
        lease_ops += [
            (str(c.get("at", "")), str(c.get("op", ""))) for c in changes if c.get("path") == LEASE_PATH
        ]
        total += len(writes)
        out.append(
            {
                "name": name,
                "task": (record.get("run") or {}).get("task_id") or (match["task"] if match else "?"),
                "try": int(match["try"]) if match else None,
                "writes": len(writes),
                "changes": [_change_text(c) for c in writes[:MAX_CHANGES_SHOWN]],
                "more": max(0, len(writes) - MAX_CHANGES_SHOWN),
            }
        )
    lease = None
    if lease_ops:
        lease = "released" if sorted(lease_ops)[-1][1].startswith("Delete") else "held"
    return {"logs": out, "writes": total, "lease": lease}


def _log_order(name: str) -> tuple[int, str]:
    match = CHANGE_LOG.fullmatch(name)
    return (int(match["try"]) if match else 0, name)


def _conf_command(dag_id: str, conf: Mapping[str, Any]) -> str:
    return trigger_command(dag_id, conf)


def next_steps(
    dag_id: str,
    *,
    cluster: str,
    run_id: str,
    changed: bool,
    dry_run: bool | None,
    throttles_cleared: bool | None,
    rollback_artefacts: Iterable[str],
    lease: str | None = None,
) -> tuple[list[str], list[dict[str, str]]]:
    """(what to do, the commands) after a failed run: how to finish it, and how to undo what it
    changed with the artefacts it wrote -- never an action that makes the incident worse (a move-back
    onto brokers that are being stopped is said to be for brokers still up).

    :param dag_id: the maintenance DAG.
    :param cluster: the run's cluster.
    :param run_id: the failed run.
    :param changed: whether the change logs show writes to the cluster.
    :param dry_run: the run's ``dry_run`` (None: the DAG has none).
    :param throttles_cleared: whether the drain's ``clear_throttles`` step succeeded (None: no such step).
    :param rollback_artefacts: the rollback files in the run folder.
    :param lease: ``held`` when the change logs show the run still holds the maintenance lease.
    """
    rollback = sorted(rollback_artefacts)
    if dag_id in READ_ONLY:
        return [
            "This DAG only reads: it changed nothing. Fix the cause in the failed task's log and trigger "
            "it again."
        ], []
    if dry_run is True or not changed:
        why = "a dry run writes nothing" if dry_run is True else "its change logs show no write"
        return [
            f"Nothing was changed on the cluster ({why}). Fix the cause in the failed task's log, then "
            "clear the failed task or trigger a new run."
        ], []
    text = [
        "The cluster is part-way through this run's change. Either finish it -- fix the cause, then clear "
        "the failed task in this run (a rerun resumes after the last completed step and keeps the run's "
        "lease) -- or undo what it did, as below."
    ]
    commands: list[dict[str, str]] = []
    if dag_id in DAG_KINDS:
        what = {
            DRAIN: "moves every partition this drain moved that is still where it put them back where it was "
            "(throttled, as the drain moved them) and removes the throttles it left -- only while the drained "
            "brokers are still up",
            POST_MAINTENANCE: "moves the partitions this run moved back to where it found them (its preferred "
            "leader election is not undone)",
            TOPIC_ID_REPAIR: "writes every topic znode this run changed back to its bytes before (versioned: it "
            "refuses a znode changed since), moves the controller again if this run did, and writes removed "
            "partition.metadata files back (a broker restart that passed its gate is not undone)",
        }.get(dag_id, "puts back what this run changed, from its rollback artefacts")
        text.append(
            f"Undo: {UNDO_DAG_ID} {what}, once this run no longer holds the lease and nothing of it is in flight; "
            "it shows its plan and waits for approval. Trigger it as a dry run first (the command below), then "
            "with dry_run false. The rollback files stay the fallback by hand (they carry no TLS/SASL options)."
        )
        commands.append(
            {
                "label": "Undo this run (dry run first)",
                "command": _conf_command(UNDO_DAG_ID, undo_conf(cluster, run_id, dag_id)),
            }
        )
    if dag_id == DRAIN:
        text.append(
            "Or finish the maintenance as planned and put the partitions back afterwards with "
            "kafka_zk_post_maintenance, which leaves alone any partition moved since the drain."
        )
        commands.append(
            {
                "label": "Move this drain's partitions back after the maintenance (dry run first)",
                "command": _conf_command(
                    POST_MAINTENANCE, {"cluster": cluster, "drain_run": run_id, "dry_run": True}
                ),
            }
        )
    elif dag_id == UNDO:
        text.append(
            "This undo stopped part-way: clear its failed task to finish it (it resumes after the last step it "
            "completed). An undo is not undone by another undo: to make the original change again, trigger the "
            "DAG that made it (the undo's plan.json names the run it undoes)."
        )
    if lease == "held":
        text.append(
            "This run still holds the cluster's maintenance lease: every other maintenance run of the "
            "cluster is refused until this run finishes (clear its failed task) or the lease expires."
        )
    if throttles_cleared is False:
        text.append(
            "The replication throttles this run set are still in place: clear_throttles did not succeed "
            "(it leaves them while this run's partitions still move, since removing them would unthrottle "
            "the move). Once no partition of this run moves, clear clear_throttles: it removes exactly "
            "what throttles.json lists."
        )
    if not rollback:
        text.append("This run's folder holds no rollback artefact: undo by hand from its change logs.")
    return text, commands


def failed_task_incidents(
    failed: Mapping[str, Sequence[int]],
    errors: Mapping[str, Mapping[int, str]],
    log_urls: Mapping[str, str],
    *,
    changed: bool,
) -> list[Incident]:
    """One incident per failed task with its error (what the task raised), upstream first.

    :param failed: task id -> failed map indexes (``[-1]``: unmapped), in DAG order.
    :param errors: task id -> {map index: error text} (:func:`failure_record`'s).
    :param log_urls: task id -> its log page.
    :param changed: the run changed the cluster before it stopped: critical (the cluster is
        half-way); else error.
    """
    out = []
    for task_id, indexes in failed.items():
        mapped = [i for i in indexes if i >= 0]
        what = f"{len(mapped)} mapped instance(s) of task {task_id}" if mapped else f"task {task_id}"
        texts = errors.get(task_id) or {}
        facts = tuple(
            (f"map index {i}" if i >= 0 else "error", texts[i]) for i in sorted(texts) if i in indexes
        )
        summary = texts.get(indexes[0]) if len(indexes) == 1 and indexes[0] in texts else None
        out.append(
            Incident(
                key=f"task:{task_id}",
                source=TASKS,
                severity="critical" if changed else "error",
                title=f"{what} failed",
                summary=summary or f"{what} failed after its retries; its log says why.",
                facts=() if summary else facts,
                magnitude=len(mapped),
                link=log_urls.get(task_id),
            )
        )
    return out


def headline(
    *,
    dag_id: str,
    cluster: str,
    failed: Sequence[str],
    changed: bool,
    writes: int,
    lease: str | None,
    dry_run: bool | None,
) -> str:
    """One sentence: the run, where it stopped and what it had changed."""
    if not failed:
        return f"{dag_id} on {cluster} succeeded."
    what = f"{dag_id} on {cluster} FAILED at {', '.join(failed)}"
    if dag_id in READ_ONLY:
        return what + "; it only reads, so nothing was changed."
    if dry_run is True:
        return what + " (dry run: nothing was changed)."
    if not changed:
        return what + " before changing anything."
    held = "; this run still holds the cluster's maintenance lease" if lease == "held" else ""
    return what + f" after {writes} ZooKeeper write(s) to the cluster{held}."
