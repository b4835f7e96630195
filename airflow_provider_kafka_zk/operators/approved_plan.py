"""The Airflow side of the approved plan a writing step is bound to (issue 25). Light on imports on
purpose: the drain's, the move-back's, the election's, the repair's and the cleanup's operators
import it (the approval step itself is :mod:`.approval`).

Each writing operator passes ``approved_plan(self, context)`` to its mutation (``approval=``), which
hands it to its :class:`~airflow_provider_kafka_zk.maintenance.session.MaintenanceSession`. The
session verifies it when it opens, before it reads anything of the cluster, and the step executor
again right before the first write (:class:`~airflow_provider_kafka_zk.maintenance.approval.ApprovedPlan`):
in a real run nothing is written unless the approval step before the task in the DAG let this plan
through (``approved``, or ``not_required`` by the cluster file) and the plan hash recomputed then --
the plan folder's ``plan.json`` and ``rollback.json`` as stored, and this task's rendered settings
(:data:`WRITERS`) -- is the approved one. A cluster that changed since the plan is refused after
that by the executor's preflight (the drain's read agreement, every step's expected znodes).

A new mutation plugs in the same way: add its operator and the fields that decide what it writes to
:data:`WRITERS`, put the approval step between its plan and it, and give its session
``approval=approved_plan(self, context)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.kafka.approval import (
    APPROVAL_FILE,
    Decision,
    approved_lines,
    not_approved_text,
    respond_commands,
)
from airflow_provider_kafka_zk.maintenance.approval import (
    ApprovedPlan,
    PlanChangedSinceApprovalError,
    PlanNotApprovedError,
    read_artefact,
    read_plan_digest,
)
from airflow_provider_kafka_zk.maintenance.session import parse_safety_flags

if TYPE_CHECKING:
    from airflow.sdk import Context

APPROVAL_TASK_ID = "approve"
XCOM_KEY = "approval"
"""The XCom key of the decision record (pushed by the approval step, pulled by the execute steps)."""

WRITERS: dict[str, tuple[str, ...]] = {
    "DrainExecuteOperator": ("throttle_bytes_per_sec", "kafka_zookeeper_conn_id"),
    "ClearReplicationThrottlesOperator": ("kafka_zookeeper_conn_id", "force"),
    "PreferredLeaderElectionOperator": ("brokers", "topics", "kafka_zookeeper_conn_id"),
    "DeletionCleanupExecuteOperator": (
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
    ),
    "TopicIdRepairExecuteOperator": (
        "restart_command",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
    ),
    "KraftMigrationExecuteOperator": ("cluster", "kafka_zookeeper_conn_id", "ssh_conn_id"),
    "UndoExecuteOperator": (
        "throttle_bytes_per_sec",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
    ),
}
"""Operators that write to a cluster from an approved plan -> the fields (rendered per run) that decide
what they write besides the plan artefacts: their values are part of the plan hash. The approval step
lists every such task after it in the plan hash (a writer with no such field too), and a writing
task the approved plan does not list is refused where the cluster requires approval
(:class:`~airflow_provider_kafka_zk.maintenance.approval.WriteApprovalRule`): a new writer that is not
registered here cannot write behind an approval meant for others. Subclasses count as their base."""


def writer_fields(task: Any) -> tuple[str, ...] | None:
    """The :data:`WRITERS` fields of ``task``'s class or of the nearest base class listed there
    (None: not a writer)."""
    for cls in type(task).__mro__:
        if cls.__name__ in WRITERS:
            return WRITERS[cls.__name__]
    return None


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


def approved_plan(operator: Any, context: Context) -> ApprovedPlan | None:
    """What a writing operator hands its mutation (``approval=``): in a real run with an approval
    step before it in the DAG, the decision that step recorded and this task's plan folder and
    rendered settings, for the maintenance session to verify before it reads the cluster. Reads only
    Airflow's XCom; verifies nothing itself.

    Returns None for a dry run, or with no approval step before the task (a team's own DAG): the
    session's approval rule then lets a real write go ahead only on a cluster the cluster file opts
    out of approval, and otherwise refuses before any cluster I/O, saying how to add the step.

    :param operator: the writing operator (``plan_dir``, ``dry_run``, ``artefacts_conn_id`` are read).
    :param context: its task context.
    """
    if parse_safety_flags(dry_run=getattr(operator, "dry_run", True))["dry_run"]:
        return None
    approval = _approval_upstream(context.get("task") or operator)
    if approval is None:
        return None
    record = context["ti"].xcom_pull(task_ids=approval.task_id, key=XCOM_KEY)
    plan_dir = getattr(operator, "plan_dir", None)
    if not plan_dir and isinstance(record, dict):
        plan_dir = record.get("plan_dir")
    folder = (
        artefacts_url(str(plan_dir), getattr(operator, "artefacts_conn_id", None) or None) if plan_dir else ""
    )
    names = writer_fields(operator)
    settings = {operator.task_id: {n: getattr(operator, n, None) for n in names}} if names is not None else {}
    return ApprovedPlan(operator.task_id, approval.task_id, record, folder, settings)


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
    "ApprovedPlan",
    "PlanChangedSinceApprovalError",
    "PlanNotApprovedError",
    "approval_links",
    "approval_url",
    "approved_plan",
    "read_approval",
    "read_artefact",
    "read_plan_digest",
    "report_with_approval",
    "writer_fields",
]
