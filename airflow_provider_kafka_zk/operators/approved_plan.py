"""What every writing step checks before it touches a cluster: that a person approved exactly this
plan (issue 25). Light on imports on purpose: the drain's, the move-back's, the repair's and the
cleanup's execute steps import it (the approval step itself is :mod:`.approval`).

Each execute step starts with ``require_approved_plan(self, context)`` (one line). In a real run it
refuses, before any I/O on the cluster, unless the approval step before it in the DAG let this plan
through (``approved``, or ``not_required`` by the cluster file) and the plan hash recomputed now --
the plan folder's ``plan.json`` and ``rollback.json`` as stored, and this task's rendered settings
(:data:`WRITERS`) -- is the approved one. A cluster that changed since the plan is refused after
that by the execute step's own checks (the drain's read agreement, the repair's preflight).

A new mutation plugs in the same way: add its operator and the fields that decide what it writes to
:data:`WRITERS`, put the approval step between its plan and it, and call
:func:`require_approved_plan` first in its ``execute``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import fsspec

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.kafka.approval import (
    APPROVAL_FILE,
    PLAN_INPUTS,
    Decision,
    PlanDigest,
    approved_lines,
    digest_differences,
    not_approved_text,
    plan_digest,
    respond_commands,
)
from airflow_provider_kafka_zk.maintenance import MaintenanceRefusedError, parse_safety_flags

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

APPROVAL_TASK_ID = "approve"
XCOM_KEY = "approval"
"""The XCom key of the decision record (pushed by the approval step, pulled by the execute steps)."""

WRITERS: dict[str, tuple[str, ...]] = {
    "DrainExecuteOperator": ("throttle_bytes_per_sec", "kafka_zookeeper_conn_id"),
    "PreferredLeaderElectionOperator": ("brokers", "topics", "kafka_zookeeper_conn_id"),
    "TopicIdRepairExecuteOperator": (
        "restart_command",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
    ),
}
"""Operators that write to a cluster from an approved plan -> the fields (rendered per run) that decide
what they write besides the plan artefacts: their values are part of the plan hash."""


class PlanNotApprovedError(MaintenanceRefusedError):
    """A real run's write step found no approval of its plan (rejected, timed out, never asked)."""


class PlanChangedSinceApprovalError(MaintenanceRefusedError):
    """The plan artefacts or settings differ from the approved ones: nothing is written."""


def read_artefact(folder: str, name: str) -> bytes | None:
    """The bytes of ``name`` in the plan folder (None: not there)."""
    fs, root = fsspec.core.url_to_fs(folder)
    try:
        return fs.cat_file(f"{root.rstrip('/')}/{name}")
    except FileNotFoundError:
        return None


def read_plan_digest(plan_dir: str, settings: Mapping[str, Mapping[str, Any]]) -> PlanDigest:
    """The plan hash of the folder's :data:`~airflow_provider_kafka_zk.kafka.approval.PLAN_INPUTS`
    as stored now and the writing tasks' settings.

    :param plan_dir: the plan folder (a URL bound to its store's connection).
    :param settings: writing task id -> {field: rendered value}.
    """
    return plan_digest({name: read_artefact(plan_dir, name) for name in PLAN_INPUTS}, settings)


def read_approval(plan_dir: str) -> dict[str, Any] | None:
    """``approval.json`` of a plan folder (None: not there or unreadable)."""
    data = read_artefact(plan_dir, APPROVAL_FILE)
    try:
        record = None if data is None else json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def approval_url(dag_id: str, run_id: str, task_id: str = APPROVAL_TASK_ID) -> str:
    """The page where a person approves or rejects: the task's Required Actions in the Airflow UI
    (the HITL operator's ``generate_link_to_ui`` builds the same path)."""
    from urllib.parse import quote

    from airflow_provider_kafka_zk.plugins.links import api_base_url

    return (
        f"{api_base_url()}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
        f"/tasks/{quote(task_id, safe='')}/required_actions"
    )


def approval_links(dag_id: str, run_id: str, task_id: str = APPROVAL_TASK_ID) -> dict[str, str]:
    """What an alert or a report of a waiting approval links to: the run's page (``run_url``), the
    approval page (``approval_url``) and the REST calls that approve or reject (``approve``,
    ``reject``). For the manual DAGs' alerts to call."""
    from airflow_provider_kafka_zk.plugins.links import api_base_url, run_url

    return {
        "run_url": run_url(dag_id, run_id),
        "approval_url": approval_url(dag_id, run_id, task_id),
        **respond_commands(api_base_url(), dag_id, run_id, task_id),
    }


def _approval_upstream(task: Any) -> Any | None:
    """The approval step before ``task`` (None: its DAG has none, e.g. the operator used on its own)."""
    try:
        upstream = task.get_flat_relatives(upstream=True)
    except Exception:  # not in a DAG: an operator run on its own (tests, a user's script)
        return None
    found = sorted((t for t in upstream if getattr(t, "is_plan_approval", False)), key=lambda t: t.task_id)
    return found[0] if found else None


def require_approved_plan(operator: Any, context: Context) -> dict[str, Any] | None:
    """First thing in a writing step's ``execute``: in a real run, refuse before any I/O on the
    cluster unless the approval step before it let this plan through and the plan hash -- the plan
    folder's artefacts as stored now and this task's rendered settings -- is the approved one.

    Returns the decision record (None: a dry run, or no approval step in this DAG -- the operator
    used on its own, which the shipped DAGs never do).

    :param operator: the writing operator (``plan_dir``, ``dry_run``, ``artefacts_conn_id`` are read).
    :param context: its task context.
    :raises PlanNotApprovedError: no decision that lets writes run (rejected, timed out, missing).
    :raises PlanChangedSinceApprovalError: an artefact or a setting differs from the approved plan.
    """
    if parse_safety_flags(dry_run=getattr(operator, "dry_run", True))["dry_run"]:
        return None
    approval = _approval_upstream(context.get("task") or operator)
    if approval is None:
        return None
    task_id = operator.task_id
    record = context["ti"].xcom_pull(task_ids=approval.task_id, key=XCOM_KEY)
    if not isinstance(record, Mapping) or "decision" not in record:
        raise PlanNotApprovedError(
            f"{task_id}: the approval step {approval.task_id} recorded no decision for this run: refusing to "
            "write anything"
        )
    decision = Decision(record["decision"])
    if not decision.lets_writes_run:
        who = (record.get("decided_by") or {}).get("name")
        raise PlanNotApprovedError(
            f"{task_id}: the plan was not approved ({decision.value}{f' by {who}' if who else ''} at "
            f"{record.get('decided_at')}): nothing was written"
        )
    approved = PlanDigest.from_dict(record["plan"])
    plan_dir = getattr(operator, "plan_dir", None) or record["plan_dir"]
    folder = artefacts_url(str(plan_dir), getattr(operator, "artefacts_conn_id", None) or None)
    names = WRITERS.get(type(operator).__name__, ())
    mine = {task_id: {n: getattr(operator, n, None) for n in names}} if names else {}
    now = read_plan_digest(folder, {**approved.settings, **mine})
    problems = []
    if folder.rstrip("/") != str(record["plan_dir"]).rstrip("/"):
        problems.append(f"this step acts on {folder}, the approved plan is {record['plan_dir']}")
    if names and task_id not in approved.settings:
        problems.append(f"task {task_id} was not among the approved plan's writing tasks")
    problems += digest_differences(approved, now, task_id=task_id)
    if problems:
        raise PlanChangedSinceApprovalError(
            f"{task_id}: this is not the plan that was approved (sha256 {approved.sha256}, {decision.value} "
            f"at {record.get('decided_at')}): "
            + "; ".join(problems)
            + ". Nothing was written; trigger the DAG again to plan and approve afresh"
        )
    who = (record.get("decided_by") or {}).get("name")
    log.info(
        "%s: carrying out the approved plan sha256 %s (%s%s)",
        task_id,
        approved.sha256,
        decision.value,
        f" by {who}" if who else "",
    )
    return dict(record)


def report_with_approval(plan_dir: str, read_report: Callable[[], str]) -> str:
    """A manual DAG's final report with the approval first (who approved which plan hash); for a
    plan rejected or timed out, the not-approved report instead -- written to ``report.txt``,
    printed, and raised as :class:`PlanNotApprovedError` (the run fails: nothing changed, and the
    report says why).

    :param plan_dir: the plan folder (a URL bound to its store).
    :param read_report: returns the run's own report (called only when the run went ahead).
    """
    record = read_approval(plan_dir)
    if record is None:
        return read_report()
    decision = Decision(record["decision"])
    if not decision.lets_writes_run and decision is not Decision.NOT_NEEDED:
        text = not_approved_text(record)
        write_url_atomically(f"{plan_dir.rstrip('/')}/report.txt", text.encode())
        print(text)
        raise PlanNotApprovedError(text.splitlines()[0])
    return "\n".join(approved_lines(record)) + "\n\n" + read_report()


__all__ = [
    "APPROVAL_TASK_ID",
    "WRITERS",
    "XCOM_KEY",
    "PlanChangedSinceApprovalError",
    "PlanNotApprovedError",
    "approval_links",
    "approval_url",
    "read_approval",
    "read_artefact",
    "read_plan_digest",
    "report_with_approval",
    "require_approved_plan",
]
