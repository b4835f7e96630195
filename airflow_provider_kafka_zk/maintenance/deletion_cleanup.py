"""The cleanup of deleted topics' leftovers carried out by the step executor.

:func:`run_cleanup` opens a maintenance session (the whole cleanup is one task: the lease goes back
on any exit), looks once more whether each topic came back, plans
(:func:`~airflow_provider_kafka_zk.kafka.deletion_cleanup.plan_cleanup`), pins every broker host it
will touch (its ``meta.properties`` against ZooKeeper's ``/cluster/id``), checks every path rule on
this side, and hands the steps to :class:`~airflow_provider_kafka_zk.maintenance.executor.StepExecutor`.

Checked for every step before the first move (the dry run runs the same checks):

* ``quarantine_move`` -- each topic still gone from ZooKeeper (no topic znode, no deletion marker:
  the executor's znode check); the host script run as a dry run on the broker: every path, no
  symlink anywhere, the same filesystem, no running process of this broker for a live-named
  directory. Any directory the host would refuse refuses the cleanup (``quarantine-refused``,
  naming broker, directory and why): nothing is moved.
* ``delete_config_znode`` -- the topic and its marker still gone, the znode at the version and with
  the bytes read for the plan (gone: done).

Then the moves, one host command per broker (under a lease heartbeat), the list of moves written
and read back first; the config znodes of topics whose directories are all out, saved (read back)
and deleted in one versioned multi-op. A cleanup is planned again from a fresh verdict at every try
(what an earlier try moved is no leftover any more), so its progress record is per try.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostError
from airflow_provider_kafka_zk.hooks.broker_quarantine import (
    QuarantineMove as HostMove,
)
from airflow_provider_kafka_zk.hooks.broker_quarantine import (
    QuarantinePathError,
    quarantine_directories,
    validate_request,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    DeleteOp,
    KafkaZooKeeperHook,
    MultiOpError,
    ZnodeNotFoundError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.deletion_cleanup import CleanupPlan, ConfigZnode, Leftover, plan_cleanup
from airflow_provider_kafka_zk.kafka.steps import ConfigZnodeDelete, QuarantineMove, Refusal, Step, StepState
from airflow_provider_kafka_zk.kafka.undo import BY_HAND, undo_pointer
from airflow_provider_kafka_zk.maintenance.executor import ProgressLog, StepContext, StepExecutor
from airflow_provider_kafka_zk.maintenance.session import (
    ClusterIdentityError,
    MaintenanceRefusedError,
    MaintenanceSession,
    PlanApproval,
    RunIdentity,
)

if TYPE_CHECKING:
    from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
    from airflow_provider_kafka_zk.triggers.deletion_check import BrokerDisk, DeletionCheck

log = logging.getLogger(__name__)

MOVED = ("moved", "already_moved", "gone")


class QuarantineRefusedError(MaintenanceRefusedError):
    """A quarantine path breaks a rule (relative, inside a log dir, ...): the cleanup does nothing."""


@dataclass
class CleanupContext(StepContext):
    """The executor's context plus the broker disks and host access of one cleanup try."""

    host_hook: BrokerHostHook | None = None
    disks: Mapping[int, BrokerDisk] = field(default_factory=dict)

    def host_moves(self, step: QuarantineMove) -> list[HostMove]:
        return [HostMove(d.log_dir, d.name, step.quarantine_dir, d.kind) for d in step.dirs]

    def quarantine(self, step: QuarantineMove, *, dry_run: bool) -> dict[str, Any]:
        assert self.host_hook is not None
        return quarantine_directories(
            self.host_hook,
            step.broker_id,
            self.host_moves(step),
            log_dirs=self.disks[step.broker_id].log_dirs,
            ts=step.ts,
            dry_run=dry_run,
            broker_running=step.broker_running,
            allow_running_broker_orphans=step.allow_running_broker_orphans,
            session=None if dry_run else self.session,
        )


class QuarantineMoveHandler:
    """Move one broker's leftovers into the quarantine (the host's dry run is the preflight)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, QuarantineMove) and isinstance(ctx, CleanupContext)
        try:
            found = ctx.quarantine(step, dry_run=True)
        except (BrokerHostError, OSError) as exc:
            return [
                Refusal(
                    "broker-host",
                    f"broker {step.broker_id}: the host's check could not run ({type(exc).__name__}: {exc})",
                    "Fix the broker host's access; nothing was moved",
                    step.id,
                    (f"broker {step.broker_id}",),
                )
            ]
        ctx.cache[f"checked:{step.id}"] = found
        refusals = [
            Refusal(
                "quarantine-refused",
                f"broker {step.broker_id} ({found['host']}): {r.get('source') or r.get('name')}: "
                f"{r.get('detail') or r['status']}",
                "Nothing was moved or deleted; fix it on the host (or the quarantine_dir) and run again",
                step.id,
                (f"broker {step.broker_id}:{r.get('source') or r.get('name')}",),
            )
            for r in found["results"]
            if r["status"] not in ("would_move", *MOVED)
        ]
        if refusals:
            return refusals
        if all(r["status"] in MOVED for r in found["results"]):
            return StepState.DONE
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, CleanupContext)
        (step,) = steps
        assert isinstance(step, QuarantineMove)
        log.info("Cleanup: broker %d, %d director(ies) to quarantine", step.broker_id, len(step.dirs))
        try:
            with ctx.session.heartbeat_during(f"moving directories on broker {step.broker_id}"):
                done = ctx.quarantine(step, dry_run=False)
        except MaintenanceRefusedError:
            raise  # the lease or the host's pin: stop before anything else changes
        except Exception as exc:  # this broker's moves failed; the others go on, the topic keeps its znode
            log.error("Cleanup of broker %d failed: %s: %s", step.broker_id, type(exc).__name__, exc)
            return {step.id: {"failed": f"{type(exc).__name__}: {exc}"}}
        return {step.id: {"host": done["host"], "results": done["results"], "listings": done["listings"]}}


class ConfigZnodeDeleteHandler:
    """Delete leftover config znodes whose topics' directories are all out: saved first, one multi."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, ConfigZnodeDelete)
        stat = ctx.hook.exists(step.path)
        if stat is None:
            return StepState.DONE
        if stat.numChildren:
            return [
                Refusal(
                    "znode-has-children",
                    f"{ctx.hook.describe_path(step.path)} has {stat.numChildren} child znode(s)",
                    "Nothing was deleted; look at them first",
                    step.id,
                    (step.path,),
                )
            ]
        return StepState.PENDING

    def _unfinished(self, step: ConfigZnodeDelete, ctx: StepContext) -> bool:
        """Whether a directory of the step's topic is still in a log dir after this try's moves."""
        for move in ctx.plan_steps:
            if not isinstance(move, QuarantineMove) or step.topic not in move.topics:
                continue
            outcome = ctx.progress.completed.get(move.id) or {}
            if outcome.get("failed"):
                return True
            results = outcome.get("results")
            if results is None:
                results = (ctx.cache.get(f"checked:{move.id}") or {}).get("results", [])
            mine = {d.path for d in move.dirs if d.topic == step.topic}
            if any(r.get("source") in mine and r["status"] not in MOVED for r in results):
                return True
        return False

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        outcomes: dict[str, dict[str, Any]] = {}
        saved: list[tuple[ConfigZnodeDelete, bytes | None, Any]] = []
        for step in steps:
            assert isinstance(step, ConfigZnodeDelete)
            if self._unfinished(step, ctx):
                outcomes[step.id] = {
                    "path": step.path,
                    "status": "kept",
                    "detail": "some of the topic's directories were not quarantined",
                }
                continue
            try:
                data, stat = ctx.hook.get_znode(step.path)
            except ZnodeNotFoundError:
                outcomes[step.id] = {"path": step.path, "status": "gone", "detail": "already removed"}
                continue
            saved.append((step, data, stat))
        if not saved:
            return outcomes
        rollback = ctx.session.write_rollback(
            f"rollback/znodes-{ctx.session.run.try_number}-{uuid.uuid4().hex[:8]}.json",
            json.dumps(
                {
                    **ctx.session.artefact_header(),
                    "target": ctx.hook.target_description(),
                    "saved_at": datetime.now(UTC).isoformat(),
                    "undo": undo_pointer(ctx.session.cluster, ctx.session.run.run_id, ctx.session.run.dag_id),
                    "by_hand": "create each path with base64-decoded data_base64 (persistent), e.g. "
                    f"zookeeper-shell <zk>/<chroot> create <path> '<data>': {BY_HAND}",
                    "znodes": [
                        {
                            "path": step.path,
                            "topic": step.topic,
                            "data_base64": None if data is None else base64.b64encode(data).decode(),
                            "version": stat.version,
                            "ctime_ms": stat.ctime,
                            "mtime_ms": stat.mtime,
                        }
                        for step, data, stat in saved
                    ],
                },
                indent=1,
            ),
        )
        log.info("Saved %d znode(s) to %s (read back) before deleting them", len(saved), rollback)
        ctx.cache["znodes_rollback"] = rollback
        try:
            ctx.hook.multi([DeleteOp(step.path, step.expected_version) for step, _, _ in saved])
        except MultiOpError as exc:
            log.error("Not deleted (%s at %s): %s", exc.reason, exc.path, [s.path for s, _, _ in saved])
            for step, _, _ in saved:
                outcomes[step.id] = {
                    "path": step.path,
                    "status": "failed",
                    "detail": f"{exc.reason} at {exc.path}: changed since the plan; nothing of the multi-op applied",
                }
            return outcomes
        for step, _, _ in saved:
            log.info("Deleted %s (was version %d)", step.path, step.expected_version)
            outcomes[step.id] = {"path": step.path, "status": "deleted", "version": step.expected_version}
        return outcomes


HANDLERS = {QuarantineMove.KIND: QuarantineMoveHandler(), ConfigZnodeDelete.KIND: ConfigZnodeDeleteHandler()}


def _config_znodes(hook: KafkaZooKeeperHook, topics: Sequence[str]) -> dict[str, ConfigZnode | None]:
    out: dict[str, ConfigZnode | None] = {}
    for topic in topics:
        try:
            data, stat = hook.get_znode(znodes.config_entity_path("topics", topic))
        except ZnodeNotFoundError:
            out[topic] = None
        else:
            out[topic] = ConfigZnode(stat.version, data, stat.numChildren)
    return out


def _reappeared(hook: KafkaZooKeeperHook, topics: Sequence[str]) -> dict[str, str]:
    """Topics whose znode or marker exists again right before a cleanup acts (topic -> why)."""
    found = {}
    for topic in topics:
        for path in (znodes.topic_path(topic), znodes.delete_topic_path(topic)):
            if hook.exists(path) is not None:
                found[topic] = f"{path} exists again: the cluster is not in the state the verdict saw"
                break
    return found


def _incomplete(check: DeletionCheck) -> list[Any]:
    from airflow_provider_kafka_zk.kafka.deletion import Verdict

    return [v for v in check.verdicts if v.verdict is Verdict.INCOMPLETE]


def plan_from_check(
    hook: KafkaZooKeeperHook,
    check: DeletionCheck,
    *,
    ts: str,
    quarantine_dir: str | None,
    allow_running_broker_orphans: bool,
) -> CleanupPlan:
    """The cleanup of ``check``'s INCOMPLETE topics, with ZooKeeper read once more for each topic
    (came back?) and its config znode (version and bytes to delete)."""
    from airflow_provider_kafka_zk.kafka.deletion import Cause

    incomplete = _incomplete(check)
    config_topics = [v.topic for v in incomplete if Cause.CONFIG_ZNODE_LEFT in v.causes]
    return plan_cleanup(
        [
            Leftover(d.broker_id, v.topic, d.log_dir, d.name, d.kind)
            for v in incomplete
            for d in check.leftovers(v)
        ],
        _config_znodes(hook, config_topics),
        reappeared=_reappeared(hook, [v.topic for v in incomplete]),
        running=set(check.live_brokers),
        ts=ts,
        quarantine_dir=quarantine_dir,
        allow_running_broker_orphans=allow_running_broker_orphans,
    )


def pin_and_validate(
    session: MaintenanceSession, moves: Sequence[QuarantineMove], check: DeletionCheck
) -> None:
    """Every broker host to be touched proves it is that broker of this cluster, and every path rule
    holds for every broker, before the first change anywhere."""
    for move in moves:
        disk = check.disks.get(move.broker_id)
        if disk is None:
            raise ClusterIdentityError(
                f"broker {move.broker_id}: its disk was not read, refusing to touch it"
            )
        session.pin_broker(
            move.broker_id, disk.host, disk.meta, disk.effective_broker_id, host_evidence=disk.host_evidence
        )
        try:
            validate_request(
                [HostMove(d.log_dir, d.name, move.quarantine_dir, d.kind) for d in move.dirs],
                disk.log_dirs,
                move.ts,
            )
        except QuarantinePathError as exc:
            raise QuarantineRefusedError(
                f"broker {move.broker_id}: {exc}; nothing was moved or deleted"
            ) from None


def _quarantine_rollback(
    session: MaintenanceSession, moves: Sequence[QuarantineMove], dry_run: bool
) -> str | None:
    """The list of moves, written and read back before the first directory moves."""
    if not moves:
        return None
    planned = {
        "format": "kafka-zk-quarantine-plan",
        **session.artefact_header(),
        "dry_run": dry_run,
        "undo": undo_pointer(session.cluster, session.run.run_id, session.run.dag_id),
        "by_hand": "each moved directory is listed in quarantine-listing*.json beside it on the "
        "broker host; `mv <destination> <source>` puts it back (a -delete directory even under a "
        "running broker, which reads its log dirs only at startup; a live-named one only while its "
        f"broker is stopped): {BY_HAND}",
        "moves": {str(m.broker_id): [{"log_dir": d.log_dir, "name": d.name} for d in m.dirs] for m in moves},
    }
    return session.write_rollback(
        f"rollback/quarantine-{session.run.try_number}.json", json.dumps(planned, indent=1)
    )


def run_cleanup(
    check: DeletionCheck,
    *,
    cluster: str,
    kafka_zookeeper_conn_id: str,
    host_hook: BrokerHostHook,
    artefact_dir: str,
    ts: str,
    run: RunIdentity,
    dry_run: bool,
    quarantine_dir: str | None,
    allow_running_broker_orphans: bool,
    approval: PlanApproval | None = None,
) -> dict[str, Any]:
    """Quarantine the leftover directories and delete the leftover config znodes of ``check``'s
    INCOMPLETE topics, planned and carried out in one task (the deletion verifier's ``cleanup``; see
    the module docstring). Returns the report ``verdicts.json`` keeps.

    A real one writes only where the cluster file opts the cluster out of approval: it has no plan
    for a person to approve (the ``kafka_zk_deletion_cleanup`` DAG has: :func:`plan_deletion_cleanup`,
    :func:`execute_deletion_cleanup`).

    :param approval: the run's approved plan (a real cleanup after an approval step): the session
        verifies it before the cleanup reads the cluster, the executor again before the first move.
    :raises MaintenanceRefusedError: the session or the preflight refused (nothing was changed).
    """
    from airflow_provider_kafka_zk.kafka.deletion import Cause

    incomplete = _incomplete(check)
    report: dict[str, Any] = {"dry_run": dry_run, "directories": [], "znodes": [], "actions_taken": 0}
    config_topics = [v.topic for v in incomplete if Cause.CONFIG_ZNODE_LEFT in v.causes]
    if not any(check.leftovers(v) for v in incomplete) and not config_topics:
        return report
    with KafkaZooKeeperHook(kafka_zookeeper_conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster=cluster,
            artefact_dir=artefact_dir,
            run=run,
            dry_run=dry_run,
            single_step=True,  # the whole mutation is this task: the lease goes back on any exit
            approval=approval,
        )
        with session:
            report["identity"] = session.artefact_header()["identity"]
            plan = plan_from_check(
                hook,
                check,
                ts=ts,
                quarantine_dir=quarantine_dir,
                allow_running_broker_orphans=allow_running_broker_orphans,
            )
            for entry in plan.left_dirs:
                log.warning(
                    "Cleanup leaves broker %d %s: %s", entry["broker_id"], entry["source"], entry["detail"]
                )
            report["directories"] += list(plan.left_dirs)
            pin_and_validate(session, plan.moves, check)
            ctx = CleanupContext(
                session=session,
                progress=ProgressLog(artefact_dir, f"progress-cleanup-{run.try_number}.json"),
                plan_steps=list(plan.steps),
                host_hook=host_hook,
                disks=check.disks,
            )

            def write_plan() -> None:
                written = _quarantine_rollback(session, plan.moves, dry_run)
                if written:
                    report["plan"] = written

            executor = StepExecutor(
                f"deletion cleanup of cluster {cluster}", HANDLERS, ctx, before_first_step=write_plan
            )
            executor.run(list(plan.steps))
            _report_steps(report, plan.moves, plan.deletes, ctx, dry_run)
            report["znodes"] += list(plan.left_znodes)
    return report


# ---------------------------------------------------------------------------------------------
# The kafka_zk_deletion_cleanup DAG: plan, (approve), execute the stored plan, verify
# ---------------------------------------------------------------------------------------------

PLAN_PROGRESS_FILE = "progress-cleanup-plan.json"
"""Never written: the plan's dry run of the executor reads it (absent: nothing completed)."""
EXECUTE_PROGRESS_FILE = "progress-cleanup.json"
"""The execute step's record, one per run: a cleared task resumes after the last completed step."""


class CleanupPlanOutdatedError(MaintenanceRefusedError):
    """The cluster is not what the stored cleanup plan saw: nothing is written; plan again."""


@dataclass(frozen=True)
class CleanupPlanned:
    """What the plan step hands its operator to store: ``plan.json``, ``rollback.json``, the summary."""

    plan: dict[str, Any]
    rollback: dict[str, Any]
    summary: str


def plan_deletion_cleanup(
    settings: Mapping[str, Any],
    topics: Sequence[str],
    *,
    cluster: str,
    location: str,
    ts: str,
    run: RunIdentity,
    quarantine_dir: str | None,
    allow_running_broker_orphans: bool,
) -> CleanupPlanned:
    """The plan of a deletion cleanup, made and checked as its dry run: a dry-run maintenance
    session (the cluster pinned; a ``cluster`` naming another entry of the cluster file refused), a
    fresh verdict of each topic, the plan (:func:`plan_from_check`), every broker host to be touched
    pinned, every path rule, then every step preflighted by the executor in the dry run (each topic
    still gone, the config znodes as read, the host script's own dry run on each broker: a directory
    a host would refuse refuses the plan). Writes nothing to the cluster.

    :param settings: how to reach the cluster and its brokers (the deletion check's settings).
    :param topics: the deleted topics whose leftovers to clean.
    :param location: the run's folder (``identity.json`` of the dry-run session goes there).
    :param ts: the run's key: the quarantine's subfolder on every broker.
    :raises PreflightRefusedError: a step cannot run as planned (nothing is planned to run then).
    """
    from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_documents
    from airflow_provider_kafka_zk.triggers.deletion_check import host_hook_from_kwargs, run_check

    with KafkaZooKeeperHook(settings["kafka_zookeeper_conn_id"]) as hook:
        session = MaintenanceSession(
            hook, cluster=cluster, artefact_dir=location, run=run, dry_run=True, single_step=True
        )
        with session:
            check = run_check(settings, topics, zk_hook=hook)
            plan = plan_from_check(
                hook,
                check,
                ts=ts,
                quarantine_dir=quarantine_dir,
                allow_running_broker_orphans=allow_running_broker_orphans,
            )
            pin_and_validate(session, plan.moves, check)
            ctx = CleanupContext(
                session=session,
                progress=ProgressLog(location, PLAN_PROGRESS_FILE),
                plan_steps=list(plan.steps),
                host_hook=host_hook_from_kwargs(settings, zookeeper=hook),
                disks=check.disks,
            )
            StepExecutor(f"deletion cleanup plan of cluster {cluster}", HANDLERS, ctx).run(list(plan.steps))
            checked = {m.id: ctx.cache.get(f"checked:{m.id}") or {} for m in plan.moves}
            identity = session.artefact_header()["identity"]
    plan_doc, rollback_doc, summary = cleanup_documents(
        plan,
        cluster=cluster,
        identity=identity,
        topics=list(topics),
        verdicts=check.to_dicts(),
        coverage=check.coverage(),
        live_brokers=list(check.live_brokers),
        hosts={b: d.host for b, d in check.disks.items()},
        meta_cluster_ids={b: sorted({c for _, _, c in d.meta if c}) for b, d in check.disks.items()},
        host_checks=checked,
        ts=ts,
        quarantine_dir=quarantine_dir,
        allow_running_broker_orphans=allow_running_broker_orphans,
    )
    return CleanupPlanned(plan_doc, rollback_doc, summary)


def execute_deletion_cleanup(
    location: str,
    plan: Mapping[str, Any],
    settings: Mapping[str, Any],
    *,
    run: RunIdentity,
    dry_run: bool,
    approval: PlanApproval | None = None,
) -> dict[str, Any]:
    """Carry out a stored (and, where the cluster requires it, approved) cleanup plan on the step
    executor: a maintenance session pinned to the plan's cluster identity (approval rule first), a
    fresh verdict of the plan's topics compared with what the plan saw -- the same leftovers of the
    steps still to run, on brokers running or stopped as planned, every topic still INCOMPLETE, no
    leftover the plan does not know -- else :class:`CleanupPlanOutdatedError`, then every broker host
    pinned, every step preflighted and applied in order (the list of moves written and read back
    first; config znodes saved, then deleted in one versioned multi-op). Resumes after the last
    completed step (``progress-cleanup.json``). Returns the cleanup report.

    :param location: the run's folder (``plan.json`` beside it).
    :param plan: ``plan.json``'s content.
    :param settings: how to reach the cluster and its brokers.
    :param approval: the run's approved plan (None: no approval step; the rule decides).
    :raises CleanupPlanOutdatedError: the cluster moved since the plan; nothing was written.
    """
    from airflow_provider_kafka_zk.kafka.deletion_cleanup import changes_since_plan, planned_steps
    from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
    from airflow_provider_kafka_zk.triggers.deletion_check import host_hook_from_kwargs, run_check

    steps = planned_steps(plan)
    moves = [s for s in steps if isinstance(s, QuarantineMove)]
    deletes = [s for s in steps if isinstance(s, ConfigZnodeDelete)]
    expected = ClusterIdentity.from_dict(plan["identity"], f"{location}/plan.json")
    progress = ProgressLog(location, EXECUTE_PROGRESS_FILE)
    report: dict[str, Any] = {"dry_run": dry_run, "directories": [], "znodes": [], "actions_taken": 0}
    with KafkaZooKeeperHook(settings["kafka_zookeeper_conn_id"]) as hook:
        session = MaintenanceSession(
            hook,
            cluster=str(plan["cluster"]),
            artefact_dir=location,
            run=run,
            dry_run=dry_run,
            expected=expected,
            single_step=True,
            approval=approval,
        )
        with session:
            report["identity"] = session.artefact_header()["identity"]
            check = run_check(settings, list(plan["topics"]), zk_hook=hook)
            fresh = {(d.broker_id, d.path, d.kind) for v in _incomplete(check) for d in check.leftovers(v)}
            problems = changes_since_plan(
                plan,
                completed=set(progress.completed),
                verdicts={v.topic: v.verdict.value for v in check.verdicts},
                leftovers=fresh,
                running=set(check.live_brokers),
                meta_cluster_ids={b: sorted({c for _, _, c in d.meta if c}) for b, d in check.disks.items()},
            )
            if problems:
                raise CleanupPlanOutdatedError(
                    f"the cluster is not what the cleanup plan {location}/plan.json saw: "
                    + "; ".join(problems[:20])
                    + ". Nothing was written; trigger kafka_zk_deletion_cleanup again to plan (and approve) afresh"
                )
            todo = [m for m in moves if m.id not in progress.completed]
            pin_and_validate(session, todo, check)
            ctx = CleanupContext(
                session=session,
                progress=progress,
                plan_steps=steps,
                host_hook=host_hook_from_kwargs(settings, zookeeper=hook),
                disks=check.disks,
            )

            def write_moves() -> None:
                written = _quarantine_rollback(session, todo, dry_run)
                if written:
                    report["plan"] = written

            StepExecutor(
                f"deletion cleanup of cluster {plan['cluster']}", HANDLERS, ctx, before_first_step=write_moves
            ).run(steps)
            _report_steps(report, moves, deletes, ctx, dry_run)
    return report


def _report_steps(
    report: dict[str, Any],
    moves: Sequence[QuarantineMove],
    deletes: Sequence[ConfigZnodeDelete],
    ctx: CleanupContext,
    dry_run: bool,
) -> None:
    """What each step did (or, in a dry run, would do), as ``verdicts.json``'s cleanup report."""
    completed = ctx.progress.completed
    for move in moves:
        outcome = completed.get(move.id) or {}
        if outcome.get("failed"):
            report["directories"].append(
                {"broker_id": move.broker_id, "status": "failed", "detail": outcome["failed"]}
            )
            continue
        found = outcome if "results" in outcome else ctx.cache.get(f"checked:{move.id}") or {}
        for result in found.get("results", []):
            report["directories"].append({"broker_id": move.broker_id, "host": found.get("host"), **result})
            report["actions_taken"] += result["status"] == "moved"
        if "results" in outcome:
            report.setdefault("listings", []).extend(
                {"broker_id": move.broker_id, "host": outcome["host"], **listing}
                for listing in outcome["listings"]
            )
    for step in deletes:
        if dry_run:
            log.info("Cleanup (dry run): would delete %s at version %d", step.path, step.expected_version)
            report["znodes"].append(
                {"path": step.path, "status": "would_delete", "version": step.expected_version}
            )
            continue
        outcome = completed.get(step.id) or {}
        if outcome.get("already"):
            report["znodes"].append({"path": step.path, "status": "gone", "detail": "already removed"})
            continue
        report["znodes"].append(dict(outcome))
        report["actions_taken"] += outcome.get("status") == "deleted"
    if "znodes_rollback" in ctx.cache:
        report["rollback"] = ctx.cache["znodes_rollback"]


__all__ = [
    "EXECUTE_PROGRESS_FILE",
    "CleanupPlanOutdatedError",
    "CleanupPlanned",
    "QuarantineRefusedError",
    "execute_deletion_cleanup",
    "pin_and_validate",
    "plan_deletion_cleanup",
    "plan_from_check",
    "run_cleanup",
]
