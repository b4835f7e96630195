"""An undo carried out by the step executor, in one maintenance session like every other mutation.

The plan (:mod:`airflow_provider_kafka_zk.kafka.undo`, written by the undo DAG's ``plan`` task) is a
drain-shaped ``plan.json``: its batches are the partitions that go back, its ``undo.steps`` the other
typed steps (throttle clears of the run undone, topic znodes and config znodes written back, files
and quarantined directories put back). :func:`execute_undo` opens a maintenance session pinned to the
identity the undone run recorded (its ``identity.json``), checks the undo's ``rollback.json`` (read
back: it must cover every step), and hands the steps to :class:`~.executor.StepExecutor` with one
handler per kind -- the drain's, the repair's and the ones here:

* ``throttle_clear`` / ``throttle_set`` / ``drain_batch`` -- the drain's own handlers
  (:mod:`.drain`): the run's leftover throttle values removed where they still hold them, then each
  batch moved back throttled (the wait in the triggerer when the operator defers); a throttle set on
  an entity whose leftover values an earlier step of this undo clears is never skipped as "already
  set" (the values there are the undone run's, not this undo's);
* ``write_topic_id`` / ``move_controller`` / ``wait_healthy`` -- the repair's (:mod:`.topic_id_repair`):
  all topic znodes in one multi-op with a version check each, ``/controller_epoch`` and the lease;
* ``restore_config_znode`` -- the topic and its marker still gone, the znode absent; created again
  (Kafka's ACL) in one multi-op;
* ``quarantine_restore`` -- the broker host pinned (its ``meta.properties``, and the host the undone
  run pinned for it), the host's restore script run as a dry run (original place free, the
  directory still in the quarantine, no symlink, same filesystem, the running-broker rule); then
  the renames, under a lease heartbeat;
* ``restore_partition_files`` -- the broker host pinned, each file absent or holding exactly what the
  plan found (the broker's own rewrite), then written back through a temporary file and a rename.

Every remaining step is checked before the first write, in the dry run too; the run resumes after the
last completed step (``progress.json``); the lease stays with the run until its ``clear_throttles``
step gives it back (as a drain's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostError, BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_partition_files import PartitionFile, restore_partition_files
from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove as HostMove
from airflow_provider_kafka_zk.hooks.broker_quarantine import restore_directories
from airflow_provider_kafka_zk.hooks.zookeeper import CreateOp, KafkaZooKeeperHook, MultiOpError
from airflow_provider_kafka_zk.kafka.drain_execution import Action, Batch, drain_steps
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import (
    ConfigZnodeRestore,
    ControllerMove,
    DrainBatch,
    HealthWait,
    PartitionFileRestore,
    QuarantineRestore,
    Refusal,
    Step,
    StepState,
    ThrottleClear,
    ThrottleSet,
    TopicIdWrite,
)
from airflow_provider_kafka_zk.kafka.undo import undo_steps
from airflow_provider_kafka_zk.maintenance import drain as drain_mutation
from airflow_provider_kafka_zk.maintenance import topic_id_repair as repair_mutation
from airflow_provider_kafka_zk.maintenance.executor import (
    ExecutionResult,
    PreflightRefusedError,
    ProgressLog,
    StepContext,
    StepExecutor,
)
from airflow_provider_kafka_zk.maintenance.session import (
    ClusterIdentityError,
    MaintenanceRefusedError,
    MaintenanceSession,
    PlanApproval,
    RollbackArtefactError,
    RunIdentity,
)

log = logging.getLogger(__name__)

ROLLBACK_FILE = "rollback.json"


class UndoRefusedError(PreflightRefusedError):
    """The undo cannot be planned or carried out as it stands; nothing was written. ``refusals``
    names every problem (znode, file, directory, broker, partition) and what to do."""


class UndoStoppedError(MaintenanceRefusedError):
    """A step of the undo did not complete on a broker host; the message lists what happened to
    each item. Re-running the execute task resumes (what was put back counts as done)."""


@dataclass(frozen=True)
class UndoSettings:
    """How one execute try reaches the cluster and how long it waits (parsed by the operator)."""

    kafka_zookeeper_conn_id: str
    ssh_conn_id: str | None = None
    broker_hosts: Mapping[int | str, str] | None = None
    server_properties_path: str | None = None
    poll_interval: float = 10.0
    batch_timeout: float = 6 * 3600.0
    health_timeout: float = 120.0
    lease_ttl_s: float | None = None


@dataclass
class UndoContext(StepContext):
    """The executor's context: the drain's and the repair's contexts (their handlers run on them,
    sharing the session, the progress record and the plan's steps) and what the host steps need.

    :param original_brokers: broker id -> host the undone run pinned (its ``identity.json``): the
        undo touches a broker's disk only at that host.
    """

    drain: drain_mutation.DrainContext | None = None
    repair: repair_mutation.RepairContext | None = None
    original_brokers: Mapping[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def host_hook(self) -> BrokerHostHook:
        assert self.repair is not None
        if self.repair.host_hook is None:
            raise MaintenanceRefusedError(
                "the undo puts files or directories back on broker hosts: the cluster needs an ssh_conn_id"
            )
        return self.repair.host_hook

    def log_dirs(self, broker: int) -> list[str]:
        """The broker's log dirs, read over SSH once per try; its host pinned to this cluster and to
        the host the undone run pinned for it."""
        assert self.repair is not None
        inventory = self.repair.inventory(broker)
        was = self.original_brokers.get(broker)
        if was is not None and was[0] != inventory.host:
            raise ClusterIdentityError(
                f"broker {broker} is at {inventory.host} now, the undone run changed its disk at {was[0]}: "
                "refusing to touch either"
            )
        return [d.path for d in inventory.log_dirs]


class _Via:
    """A handler of another mutation, run on that mutation's context."""

    def __init__(self, handler: Any, context: str) -> None:
        self.handler = handler
        self.context = context

    def _ctx(self, ctx: StepContext) -> StepContext:
        assert isinstance(ctx, UndoContext)
        inner = getattr(ctx, self.context)
        if inner is None:
            raise MaintenanceRefusedError(f"this undo has no {self.context} context for its steps")
        return inner

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        return self.handler.preflight(step, self._ctx(ctx))

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        return self.handler.apply(steps, self._ctx(ctx))


class _ThrottleSetAfterClears(_Via):
    """The drain's throttle set, except that values found on an entity whose leftover throttles an
    earlier step of this undo still has to clear are the undone run's, not this undo's: the set is
    still to do (the drain's handler would take equal values for "already set by an earlier try")."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        verdict = super().preflight(step, ctx)
        if verdict is not StepState.DONE:
            return verdict
        assert isinstance(step, ThrottleSet) and isinstance(ctx, UndoContext) and ctx.drain is not None
        batch = next((s for s in ctx.plan_steps if s.id == step.batch_step), None)
        if isinstance(batch, DrainBatch) and ctx.drain.verdict(batch).action is Action.SKIP:
            return verdict  # the batch is complete: its throttles are not needed
        clears_first = [
            s
            for s in ctx.plan_steps
            if isinstance(s, ThrottleClear)
            and s.entity_key == step.entity_key
            and s.id not in ctx.progress.completed
        ]
        return StepState.PENDING if clears_first else verdict


class ConfigZnodeRestoreHandler:
    """Create deleted config znodes again (one multi-op; the executor checked each is absent and its
    topic still gone)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        restores = [s for s in steps if isinstance(s, ConfigZnodeRestore)]
        try:
            ctx.hook.multi([CreateOp(s.path, s.data) for s in restores])
        except MultiOpError as exc:
            raise UndoStoppedError(
                f"{ctx.hook.describe_path(exc.path)}: {exc.reason} between the preflight and the create: the "
                f"multi-op was rolled back, none of {', '.join(s.path for s in restores)} was created; undo again "
                "(its plan looks at the cluster afresh)"
            ) from None
        for s in restores:
            log.info("Created %s again (%d bytes)", ctx.hook.describe_path(s.path), len(s.data or b""))
        return {s.id: {"path": s.path, "status": "created"} for s in restores}


class _HostRestoreHandler:
    """A restore on one broker host, all or none: the host script run as a dry run is the preflight
    (``would_restore`` to do, ``already_restored`` done, anything else a refusal naming the broker and
    the path); then the real run under a lease heartbeat."""

    VERB = "changed"

    def _results(self, step: Any, ctx: UndoContext, *, dry_run: bool) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _refusal(self, step: Any, result: Mapping[str, Any]) -> Refusal | None:
        """The refusal of one result the host would not restore (None: held back for another's sake)."""
        raise NotImplementedError

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, QuarantineRestore | PartitionFileRestore) and isinstance(ctx, UndoContext)
        try:
            results = self._results(step, ctx, dry_run=True)
        except (BrokerHostError, OSError, ValueError) as exc:
            return [_host_refusal(step, step.broker_id, exc)]
        except MaintenanceRefusedError as exc:
            return [
                Refusal("broker-identity", str(exc), f"Fix the broker host; nothing was {self.VERB}", step.id)
            ]
        blocking = [r for r in results if r["status"] not in ("would_restore", "already_restored")]
        if blocking:
            return [x for r in blocking if (x := self._refusal(step, r)) is not None] or [
                Refusal(
                    "broker-host",
                    f"broker {step.broker_id}: the host held the restore back",
                    f"Nothing was {self.VERB}",
                    step.id,
                )
            ]
        if all(r["status"] == "already_restored" for r in results):
            return StepState.DONE
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        (step,) = steps
        assert isinstance(step, QuarantineRestore | PartitionFileRestore) and isinstance(ctx, UndoContext)
        with ctx.session.heartbeat_during(f"putting back {step.kind} items on broker {step.broker_id}"):
            results = self._results(step, ctx, dry_run=False)
        bad = [r for r in results if r["status"] not in ("restored", "already_restored")]
        if bad:
            raise UndoStoppedError(
                f"broker {step.broker_id}: "
                + "; ".join(
                    f"{r.get('source') or r.get('path')}: {r['status']} ({r.get('detail')})" for r in bad
                )
                + ". What was put back stays back; clear this task to go on after fixing it"
            )
        return {step.id: {"results": results}}


class QuarantineRestoreHandler(_HostRestoreHandler):
    """Move one broker's quarantined directories back."""

    VERB = "moved"

    def _results(self, step: Any, ctx: UndoContext, *, dry_run: bool) -> list[dict[str, Any]]:
        found = restore_directories(
            ctx.host_hook,
            step.broker_id,
            [HostMove(d.log_dir, d.name, step.quarantine_dir, d.kind) for d in step.dirs],
            log_dirs=ctx.log_dirs(step.broker_id),
            ts=step.ts,
            dry_run=dry_run,
            broker_running=step.broker_running,
            allow_running_broker_orphans=step.allow_running_broker_orphans,
            session=None if dry_run else ctx.session,
        )
        return [{**r, "host": found["host"]} for r in found["results"]]

    def _refusal(self, step: Any, r: Mapping[str, Any]) -> Refusal | None:
        return Refusal(
            "quarantine-original-occupied" if r["status"] == "occupied" else f"quarantine-{r['status']}",
            f"broker {step.broker_id} ({r['host']}): {r.get('destination') or r.get('name')} -> "
            f"{r.get('source')}: {r.get('detail') or r['status']}",
            "Nothing was moved; look at both places on the host and undo again",
            step.id,
            (f"broker {step.broker_id}:{r.get('source') or r.get('name')}",),
        )


class PartitionFileRestoreHandler(_HostRestoreHandler):
    """Write one broker's removed files back (the host checks every file first)."""

    VERB = "written"

    def _results(self, step: Any, ctx: UndoContext, *, dry_run: bool) -> list[dict[str, Any]]:
        return restore_partition_files(
            ctx.host_hook,
            step.broker_id,
            [(PartitionFile(f.log_dir, f.dir_name, f.name), f.content, f.found_sha256) for f in step.files],
            log_dirs=ctx.log_dirs(step.broker_id),
            dry_run=dry_run,
            session=None if dry_run else ctx.session,
        )

    def _refusal(self, step: Any, r: Mapping[str, Any]) -> Refusal | None:
        if str(r.get("detail") or "").startswith("nothing is written"):
            return None  # held back because of another file, which has its own refusal
        return Refusal(
            "file-changed" if r["status"] == "changed" else "file-refused",
            f"broker {step.broker_id}: {r['path'] or r['name']}: {r.get('detail') or r['status']}",
            "Nothing was written; look at the file on the host, then undo again (its plan reads it afresh)",
            step.id,
            (f"broker {step.broker_id}:{r['path'] or r['name']}",),
        )


def _host_refusal(step: Step, broker: int, exc: BaseException) -> Refusal:
    return Refusal(
        "broker-host",
        f"broker {broker}: the host's check could not run ({type(exc).__name__}: {exc})",
        "Fix the broker host's access; nothing was changed",
        step.id,
        (f"broker {broker}",),
    )


HANDLERS: dict[str, Any] = {
    ThrottleClear.KIND: _Via(drain_mutation.HANDLERS[ThrottleClear.KIND], "drain"),
    ThrottleSet.KIND: _ThrottleSetAfterClears(drain_mutation.HANDLERS[ThrottleSet.KIND], "drain"),
    DrainBatch.KIND: _Via(drain_mutation.HANDLERS[DrainBatch.KIND], "drain"),
    TopicIdWrite.KIND: _Via(repair_mutation.HANDLERS[TopicIdWrite.KIND], "repair"),
    ControllerMove.KIND: _Via(repair_mutation.HANDLERS[ControllerMove.KIND], "repair"),
    HealthWait.KIND: _Via(repair_mutation.HANDLERS[HealthWait.KIND], "repair"),
    ConfigZnodeRestore.KIND: ConfigZnodeRestoreHandler(),
    QuarantineRestore.KIND: QuarantineRestoreHandler(),
    PartitionFileRestore.KIND: PartitionFileRestoreHandler(),
}


def ordered_steps(plan: Mapping[str, Any], batches: Sequence[Batch], rate: int) -> list[Step]:
    """Every step of an undo in the order it runs: the undone run's leftover throttles cleared, the
    partitions moved back (per batch its throttles, then the batch), then every other step."""
    others = undo_steps(plan)
    clears = [s for s in others if isinstance(s, ThrottleClear)]
    incarnations = {
        str(t): (r.get("topic_id"), None if r.get("czxid") is None else int(r["czxid"]))
        for t, r in (plan.get("topics") or {}).items()
    }
    moves = drain_steps(batches, rate, incarnations) if batches else []
    return [*clears, *moves, *(s for s in others if not isinstance(s, ThrottleClear))]


def check_rollback(
    location: str, plan: Mapping[str, Any], batches: Sequence[Batch], steps: Sequence[Step]
) -> None:
    """Before the first write (dry run too): the undo's ``rollback.json`` is there, readable, is
    this plan's, and records every partition, znode, file and directory the undo puts back.

    :raises RollbackArtefactError: naming what is missing.
    """
    drain_mutation.check_rollback(location, batches)  # the partitions, as the drain checks them
    folder = DrainLocation(location)
    where = folder.path(ROLLBACK_FILE)
    try:
        record = folder.read_json(ROLLBACK_FILE)
        undone = (record.get("undoes") or {}).get("run_id")
        znodes = {z["path"] for z in record.get("znodes") or ()}
        files = {(int(f["broker_id"]), f["path"]) for f in record.get("files") or ()}
        dirs = {(int(d["broker_id"]), d["source"]) for d in record.get("directories") or ()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RollbackArtefactError(
            f"{where} is unreadable ({type(exc).__name__}: {exc}): refusing"
        ) from None
    expected = ((plan.get("undo") or {}).get("original") or {}).get("run_id")
    if undone != expected:
        raise RollbackArtefactError(
            f"{where} is the rollback of an undo of {undone!r}, this plan undoes {expected!r}"
        )
    missing: list[str] = []
    for step in steps:
        if isinstance(step, TopicIdWrite | ConfigZnodeRestore) and step.path not in znodes:
            missing.append(step.path)
        elif isinstance(step, PartitionFileRestore):
            missing += [
                f"broker {step.broker_id}:{f.path}"
                for f in step.files
                if (step.broker_id, f.path) not in files
            ]
        elif isinstance(step, QuarantineRestore):
            missing += [
                f"broker {step.broker_id}:{d.path}" for d in step.dirs if (step.broker_id, d.path) not in dirs
            ]
    if missing:
        raise RollbackArtefactError(f"{where} does not record {', '.join(missing[:10])}: refusing")


def execute_undo(
    location: str,
    plan: Mapping[str, Any],
    batches: Sequence[Batch],
    settings: UndoSettings,
    *,
    rate: int,
    run: RunIdentity,
    dry_run: bool,
    expected: ClusterIdentity,
    defer_wait: Callable[[DrainBatch], None] | None = None,
    waited: tuple[int, str] | None = None,
    approval: PlanApproval | None = None,
) -> ExecutionResult:
    """Carry out an undo plan's steps through the step executor inside one maintenance session.

    :param location: the undo run's folder (``plan.json``, ``rollback.json``; progress goes there).
    :param plan: ``plan.json``'s content (validated as a drain plan by the caller).
    :param batches: its batches (the partitions going back).
    :param rate: the throttle of the moves back, bytes/s.
    :param expected: the identity the undone run pinned (its ``identity.json``): any difference refuses.
    :param defer_wait: hands a batch's wait to the triggerer (raises ``TaskDeferred``).
    :param waited: (batch index, message) when a deferred wait ended with the batch complete.
    :param approval: the run's approved plan (a real run after the approval step).
    :raises UndoRefusedError: a step failed its preflight (nothing written by this try).
    """
    steps = ordered_steps(plan, batches, rate)
    progress = ProgressLog(location)
    original = (plan.get("undo") or {}).get("original") or {}
    original_brokers = (
        ClusterIdentity.from_dict(original["identity"], location).brokers if original.get("identity") else {}
    )
    needs_hosts = any(isinstance(s, QuarantineRestore | PartitionFileRestore) for s in steps)
    if needs_hosts and not settings.ssh_conn_id:
        raise MaintenanceRefusedError(
            "the undo puts files or directories back on broker hosts: give ssh_conn_id"
        )
    with KafkaZooKeeperHook(settings.kafka_zookeeper_conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster=str(plan["cluster"]),
            artefact_dir=location,
            run=run,
            dry_run=dry_run,
            expected=expected,
            lease_ttl_s=settings.lease_ttl_s,
            approval=approval,
        )
        host_hook = None
        if needs_hosts:
            host_hook = BrokerHostHook(
                str(settings.ssh_conn_id),
                settings.kafka_zookeeper_conn_id,
                broker_hosts=settings.broker_hosts or None,
                server_properties_path=settings.server_properties_path or None,
            )
        with session:
            if host_hook is not None:
                host_hook.resolve_connections()  # reads ZooKeeper: after the approval was verified
            check_rollback(location, plan, batches, steps)
            if waited is not None:
                index, message = waited
                progress.complete({f"batch-{index + 1}": {"completed": message}})
            common: dict[str, Any] = {"session": session, "progress": progress, "plan_steps": steps}
            ctx = UndoContext(
                **common,
                poll_interval=settings.poll_interval,
                drain=drain_mutation.DrainContext(
                    **common,
                    poll_interval=settings.poll_interval,
                    location=DrainLocation(location),
                    batches=tuple(tuple(b) for b in batches),
                    rate=rate,
                    batch_timeout=settings.batch_timeout,
                    defer_wait=defer_wait,
                ),
                repair=repair_mutation.RepairContext(
                    **common,
                    poll_interval=settings.poll_interval,
                    host_hook=host_hook,
                    location=location,
                    settings=repair_mutation.RepairSettings(
                        settings.kafka_zookeeper_conn_id,
                        health_timeout=settings.health_timeout,
                        poll_interval=settings.poll_interval,
                    ),
                ),
                original_brokers=original_brokers,
            )
            what = f"undo of {original.get('dag_id') or original.get('kind')} run {original.get('run_id')}"
            executor = StepExecutor(what, HANDLERS, ctx)
            try:
                return executor.run(steps)
            except PreflightRefusedError as exc:
                if any(
                    r.rule in ("reassignment-in-flight", "plan-outdated", "throttles-still-needed")
                    for r in exc.refusals
                ):
                    raise drain_mutation.drain_refusal(exc) from None
                raise UndoRefusedError(exc.what, exc.refusals, dry_run=exc.dry_run) from None


__all__ = [
    "HANDLERS",
    "UndoContext",
    "UndoRefusedError",
    "UndoSettings",
    "UndoStoppedError",
    "check_rollback",
    "execute_undo",
    "ordered_steps",
]
