"""The approved plan a real run's writes are bound to (issue 25): checked by the maintenance session
when it opens, before it reads anything of the cluster, and by the step executor again right before
the first write -- one check for every mutation that runs on the executor (the drain and its
move-back, the preferred leader election, the topicId repair, the deletion cleanup).

An :class:`ApprovedPlan` carries what the run's approval step decided (its XCom record) and what the
writing task renders now; :meth:`ApprovedPlan.verify` recomputes the plan hash -- ``plan.json`` and
``rollback.json`` as stored now (:data:`~airflow_provider_kafka_zk.kafka.approval.PLAN_INPUTS`) and
the task's rendered settings -- and refuses, typed, unless the decision lets writes run and the hash
is the approved one. The Airflow side (finding the approval step, pulling its record) is
:mod:`airflow_provider_kafka_zk.operators.approved_plan`; the step itself is
:mod:`airflow_provider_kafka_zk.operators.approval`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.kafka.approval import (
    PLAN_INPUTS,
    Decision,
    PlanDigest,
    digest_differences,
    plan_digest,
)
from airflow_provider_kafka_zk.maintenance.session import MaintenanceRefusedError

log = logging.getLogger(__name__)


class PlanNotApprovedError(MaintenanceRefusedError):
    """A real run's write step found no approval of its plan (rejected, timed out, never asked)."""


class PlanChangedSinceApprovalError(MaintenanceRefusedError):
    """The plan artefacts or settings differ from the approved ones: nothing is written."""


def read_artefact(folder: str, name: str) -> bytes | None:
    """The bytes of ``name`` in the plan folder (None: not there)."""
    import fsspec

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


@dataclass(frozen=True)
class ApprovedPlan:
    """What one writing task of a real run must match before it writes.

    :param task_id: the writing task.
    :param approval_task_id: the approval step before it in the DAG.
    :param record: the decision record that step pushed (None: it recorded none).
    :param plan_dir: the plan folder this task acts on (a URL bound to its store).
    :param settings: this task's rendered settings that are part of the plan hash
        (``{task_id: {field: value}}``; empty when its kind has none).
    """

    task_id: str
    approval_task_id: str
    record: Mapping[str, Any] | None
    plan_dir: str
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def verify(self) -> Mapping[str, Any]:
        """Refuse unless the decision lets writes run and the plan hash recomputed now is the
        approved one; returns the decision record. Reads only the plan folder, never the cluster.

        :raises PlanNotApprovedError: no decision that lets writes run (rejected, timed out, missing).
        :raises PlanChangedSinceApprovalError: an artefact or a setting differs from the approved plan.
        """
        record = self.record
        if not isinstance(record, Mapping) or "decision" not in record:
            raise PlanNotApprovedError(
                f"{self.task_id}: the approval step {self.approval_task_id} recorded no decision for this run: "
                "refusing to write anything"
            )
        decision = Decision(record["decision"])
        who = (record.get("decided_by") or {}).get("name")
        if not decision.lets_writes_run:
            raise PlanNotApprovedError(
                f"{self.task_id}: the plan was not approved ({decision.value}{f' by {who}' if who else ''} at "
                f"{record.get('decided_at')}): nothing was written"
            )
        approved = PlanDigest.from_dict(record["plan"])
        now = read_plan_digest(self.plan_dir, {**approved.settings, **self.settings})
        problems = []
        if self.plan_dir.rstrip("/") != str(record["plan_dir"]).rstrip("/"):
            problems.append(f"this step acts on {self.plan_dir}, the approved plan is {record['plan_dir']}")
        if self.settings and self.task_id not in approved.settings:
            problems.append(f"task {self.task_id} was not among the approved plan's writing tasks")
        problems += digest_differences(approved, now, task_id=self.task_id)
        if problems:
            raise PlanChangedSinceApprovalError(
                f"{self.task_id}: this is not the plan that was approved (sha256 {approved.sha256}, "
                f"{decision.value} at {record.get('decided_at')}): "
                + "; ".join(problems)
                + ". Nothing was written; trigger the DAG again to plan and approve afresh"
            )
        log.info(
            "%s: carrying out the approved plan sha256 %s (%s%s)",
            self.task_id,
            approved.sha256,
            decision.value,
            f" by {who}" if who else "",
        )
        return record


__all__ = [
    "ApprovedPlan",
    "PlanChangedSinceApprovalError",
    "PlanNotApprovedError",
    "read_artefact",
    "read_plan_digest",
]
