"""One approval rule for every real write to a Kafka cluster (issues 25 and 31), applied by the
maintenance session -- the gate every ZooKeeper write and broker-file change passes -- so no writer
can leave it out, whether it runs in a shipped DAG or in a team's own.

:class:`WriteApprovalRule`, for a real (not dry) session:

1. **before any cluster I/O** -- from the cluster file, the Airflow connections and the plan folder
   only: the run's approved plan, if one is given, is checked (:meth:`ApprovedPlan.verify`: the
   decision lets writes run, the plan hash recomputed now is the approved one) and must be this
   run's (DAG and run id) and list this writing task among the writers it covers; then the cluster
   file's entries are matched against the connection the session really uses
   (:mod:`airflow_provider_kafka_zk.kafka.write_approval`: an entry is its pinned ``cluster_id``, or
   its own connection's ensemble + chroot). A ``cluster`` argument naming another entry refuses
   (:class:`ClusterEntryMismatchError`); a write that needs approval and has none refuses
   (:class:`ApprovalRequiredError`, saying how to add the approval step);
2. **once ``/cluster/id`` is read** through that connection: the same again with the id (entries that
   pin one are decided now), the strictest matching entry wins, a cluster in no entry requires
   approval. Where approval is required only ``approved`` counts -- a ``not_required`` decision of an
   approval step whose own entry opts out does not carry over to a cluster that requires it -- and
   the decision must be for one of the entries written to.

The step executor applies the rule once more right before the first write. Opting out
(``require_approval = false``) is read from the cluster file only: nothing of a run's conf or params
reaches it.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_kafka_zk.kafka.approval import (
    PLAN_INPUTS,
    Decision,
    PlanDigest,
    digest_differences,
    plan_digest,
)
from airflow_provider_kafka_zk.kafka.write_approval import (
    ApprovalRequirement,
    ClusterEntry,
    WriteTarget,
    approval_requirement,
    ensemble_members,
    label_problem,
)
from airflow_provider_kafka_zk.maintenance.errors import ClusterIdentityError, MaintenanceRefusedError

log = logging.getLogger(__name__)


class PlanNotApprovedError(MaintenanceRefusedError):
    """A real run's write step found no approval of its plan (rejected, timed out, never asked)."""


class PlanChangedSinceApprovalError(MaintenanceRefusedError):
    """The plan artefacts or settings differ from the approved ones: nothing is written."""


class ApprovalRequiredError(PlanNotApprovedError):
    """A real write to a cluster that requires approval, and no approval of this run's plan covers it
    (no approval step before the writing task, or one that does not list it)."""


class ClusterEntryMismatchError(ClusterIdentityError):
    """The ``cluster`` argument names another entry of the cluster file than the cluster the
    connection reaches (or the approval was given for another entry)."""


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


class WritingRun(Protocol):
    """Who writes (:class:`~airflow_provider_kafka_zk.maintenance.session.RunIdentity`)."""

    dag_id: str
    run_id: str
    task_id: str


class PlanApproval(Protocol):
    """The approved plan a real run's writes are bound to (:class:`ApprovedPlan`)."""

    def verify(self) -> Mapping[str, Any]:
        """Raise (typed) unless the plan is approved and unchanged; returns the decision record."""


def cluster_entries() -> tuple[ClusterEntry, ...]:
    """Every entry of the cluster file (``enabled = false`` ones too), each with its pinned
    ``cluster_id`` and its own connection's ensemble and chroot, read from Airflow's connections --
    no cluster I/O. An entry whose connection cannot be read here can match by ``cluster_id`` only.

    :raises ClusterFileError: the cluster file is unreadable (a real write refuses on it).
    """
    from airflow_provider_kafka_zk.clusters import load_clusters
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

    out = []
    for name, settings in sorted(load_clusters(include_disabled=True).items()):
        conn_id = str(settings["kafka_zookeeper_conn_id"])
        pinned = settings.get("cluster_id")
        hosts: frozenset[str] | None = None
        chroot, unreadable = "", None
        try:
            config = KafkaZooKeeperHook(conn_id).config
            hosts, chroot = ensemble_members(config.hosts), config.chroot
        except Exception as exc:  # any reason: the entry is then known by its cluster_id only
            unreadable = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        out.append(
            ClusterEntry(
                name=name,
                require_approval=bool(settings["require_approval"]),
                cluster_id=str(pinned).strip() if pinned else None,
                hosts=hosts,
                chroot=chroot,
                connection=conn_id,
                unreadable=unreadable,
            )
        )
    return tuple(out)


def add_the_approval_step(task_id: str, cluster: str) -> str:
    """How a DAG puts this rule's approval before a writing task (for refusals)."""
    return (
        "Put the approval step between the plan and this task: "
        f'`plan >> PlanApprovalOperator(task_id="approve", plan_dir=<the plan task\'s folder>, '
        f'cluster="{cluster}", dry_run=<the run\'s dry_run>) >> {task_id}` '
        "(from airflow_provider_kafka_zk.operators.approval; the shipped DAGs do this), then approve the "
        "plan it shows. A cluster whose changes are reviewed elsewhere (automation) sets "
        "require_approval = false in its own [clusters.<name>] table of the cluster file -- never in a "
        "run's conf"
    )


class WriteApprovalRule:
    """The approval rule of one real session (see the module docstring).

    :param label: the session's ``cluster`` argument.
    :param connection: returns the ``host:port`` members and the chroot of the connection the session
        uses (called after the given approval was verified: a refused approval refuses first).
    :param run: who writes (DAG, run and task ids).
    :param approval: the run's approved plan (None: no approval step before the writing task).
    :param entries: the cluster file's entries (default: :func:`cluster_entries`, read at each check).
    """

    def __init__(
        self,
        *,
        label: str,
        connection: Callable[[], tuple[Sequence[str], str]],
        run: WritingRun,
        approval: PlanApproval | None,
        entries: Callable[[], Sequence[ClusterEntry]] = cluster_entries,
    ) -> None:
        self.label = label
        self.connection = connection
        self.run = run
        self.approval = approval
        self.entries = entries
        self.requirement: ApprovalRequirement | None = None
        self.record: Mapping[str, Any] | None = None

    def check(self, cluster_id: str | None = None) -> ApprovalRequirement:
        """Refuse (typed) unless this write may go ahead as far as can be told from ``cluster_id``
        (None: before any cluster I/O; then only what is certain without it refuses).

        :raises PlanNotApprovedError, PlanChangedSinceApprovalError: the given approval does not
            let this run's write go ahead (rejected, edited plan, another run's, not this task's).
        :raises ClusterEntryMismatchError: ``cluster`` names another entry than the cluster written to.
        :raises ApprovalRequiredError: approval is required and none covers this write.
        """
        record = self._verified_record()
        hosts, chroot = self.connection()
        target = WriteTarget(ensemble_members(hosts), chroot, cluster_id)
        entries = tuple(self.entries())
        problem = label_problem(self.label, entries, target)
        if problem:
            raise ClusterEntryMismatchError(
                f"{self.run.task_id}: {problem}. Refusing to change anything: give this task the connection "
                f"of [clusters.{self.label}], or the cluster argument of the entry it writes to"
            )
        requirement = approval_requirement(entries, target)
        self.requirement = requirement
        if requirement.required is False:
            return requirement
        if record is None:
            if requirement.required is None:
                return requirement  # only /cluster/id can tell: asked again once it is read
            raise ApprovalRequiredError(
                f"{self.run.task_id}: a real write to {target.describe()} needs a person's approval of this run's "
                f"plan ({requirement.why()}), and no approval step before this task covers it: nothing was read "
                f"from or written to the cluster. {add_the_approval_step(self.run.task_id, self.label)}"
            )
        decision = Decision(record["decision"])
        if requirement.required and decision is not Decision.APPROVED:
            raise ApprovalRequiredError(
                f"{self.run.task_id}: the approval step {record.get('task_id')} of this run let the plan through as "
                f"{decision.value} (its cluster {record.get('cluster')!r}), but this task writes to "
                f"{target.describe()}, which needs a person's approval ({requirement.why()}): nothing was written. "
                f'Give the approval step cluster="{(requirement.names or (self.label,))[0]}"'
            )
        for_entry = str(record.get("cluster"))
        allowed = requirement.names or (self.label,)
        if requirement.required and for_entry not in allowed and not requirement.undecided:
            raise ClusterEntryMismatchError(
                f"{self.run.task_id}: the plan was approved for cluster {for_entry!r} (its approvers, its "
                f"settings), but this task writes to {target.describe()}, which is "
                f"{', '.join(repr(n) for n in allowed)}: nothing was written. Give the approval step the cluster "
                "this task writes to"
            )
        return requirement

    def _verified_record(self) -> Mapping[str, Any] | None:
        """The given approval, verified (plan hash, decision) and bound to this run and task."""
        if self.approval is None:
            return None
        record = self.approval.verify()
        run = self.run
        if (record.get("dag_id"), record.get("run_id")) != (run.dag_id, run.run_id):
            raise PlanNotApprovedError(
                f"{run.task_id}: the approval record is of run {record.get('run_id')!r} of "
                f"{record.get('dag_id')!r}, not of this run ({run.run_id!r} of {run.dag_id!r}): an approval "
                "counts for the run that asked for it only; nothing was written"
            )
        covered = (record.get("plan") or {}).get("settings") or {}
        if run.task_id not in covered:
            raise ApprovalRequiredError(
                f"{run.task_id}: the approved plan (sha256 {(record.get('plan') or {}).get('sha256')}) covers the "
                f"writing task(s) {', '.join(sorted(covered)) or 'none'}, not this one: nothing was written. The "
                "approval step lists the writers after it by their class (operators.approved_plan.WRITERS): "
                "register this task's operator there, after the approval step"
            )
        self.record = record
        return record


def refuse_unapproved_write_before_io(
    *, kafka_zookeeper_conn_id: str, cluster: str, run: WritingRun, approval: PlanApproval | None
) -> None:
    """The part of the rule that needs no cluster I/O, for a task that reads the cluster before its
    maintenance session opens (the deletion verifier's cleanup): refuse now what the session would
    refuse later. Reads the cluster file, the Airflow connections and the plan folder only.

    :raises ApprovalRequiredError, ClusterEntryMismatchError, PlanNotApprovedError,
        PlanChangedSinceApprovalError: see :meth:`WriteApprovalRule.check`.
    """
    from airflow_provider_kafka_zk.clusters import ClusterFileError
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

    def connection() -> tuple[Sequence[str], str]:
        config = KafkaZooKeeperHook(kafka_zookeeper_conn_id).config
        return config.hosts, config.chroot

    rule = WriteApprovalRule(label=cluster, connection=connection, run=run, approval=approval)
    try:
        rule.check()
    except ClusterFileError as exc:
        raise MaintenanceRefusedError(
            f"cannot tell whether a write to cluster {cluster} needs a person's approval: {exc}. "
            "Refusing to change anything"
        ) from None


__all__ = [
    "ApprovalRequiredError",
    "ApprovedPlan",
    "ClusterEntryMismatchError",
    "PlanApproval",
    "PlanChangedSinceApprovalError",
    "PlanNotApprovedError",
    "WriteApprovalRule",
    "WritingRun",
    "add_the_approval_step",
    "cluster_entries",
    "read_artefact",
    "read_plan_digest",
    "refuse_unapproved_write_before_io",
]
