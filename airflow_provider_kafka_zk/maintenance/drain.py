"""A drain (and a post-maintenance move-back, written as a drain plan) carried out by the step executor.

The plan's batches become typed steps (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.
drain_steps`): per batch, the throttles of its moves (one :class:`~airflow_provider_kafka_zk.kafka.
steps.ThrottleSet` per config entity, applied together), then the :class:`~airflow_provider_kafka_zk.
kafka.steps.DrainBatch` that creates ``/admin/reassign_partitions`` and waits for Kafka's completion
rule -- in the triggerer: the handler hands the wait to the operator's deferral, and the resumed
task runs the executor again, which continues from ``progress.json``. :func:`execute_drain` opens
the maintenance session, checks ``rollback.json`` and hands the steps to
:class:`~airflow_provider_kafka_zk.maintenance.executor.StepExecutor`. Before the run's first write
(dry run too) every remaining step is checked:

* ``throttle_set`` -- the config entity is a readable config znode (a topic's exists: Kafka creates
  it with the topic); not needed when its batch is already complete;
* ``drain_batch`` -- every target broker registered (a replica assigned to a broker that is down
  never joins the ISR: the batch would never complete); each moved topic still the incarnation
  the plan read (czxid, ``znode-recreated``); and, from ZooKeeper now
  (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.preflight_batch`): its partitions where the
  plan found them (``plan-outdated``), no reassignment in flight that is not this plan's
  (``reassignment-in-flight``, naming whose it is), or this batch's own request (a retry waits).

When the batch's turn comes, :func:`~airflow_provider_kafka_zk.kafka.drain_execution.next_step`
decides again on a fresh read (skip, wait for its own, submit, refuse) as Kafka's ZooKeeper tooling
does: the reassign znode is *created*, never overwritten, without ``log_dirs``.

:func:`clear_throttles` is the run's last step: one :class:`~airflow_provider_kafka_zk.kafka.steps.
ThrottleClear` per entity this run recorded in ``throttles.json``, refused at the preflight while a
partition of the plan still moves (``throttles-still-needed``: the throttles hold it back), each
removing only the values that are still this run's; then the lease goes back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import fsspec

from airflow_provider_kafka_zk.artefacts.drain_folder import (
    PLAN_FILE,
    ROLLBACK_FILE,
    THROTTLES_FILE,
    DrainError,
    DrainLocation,
    PlanOutdatedError,
    ReassignmentInFlightError,
    ThrottlesStillNeededError,
    load_throttle_record,
    refusal_error,
)
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.hooks.zookeeper_drain import (
    bootstrap_address,
    observe,
    read_all_topics,
    read_reassign,
    read_states,
    update_config,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.drain import Move
from airflow_provider_kafka_zk.kafka.drain_execution import (
    Action,
    Batch,
    Observed,
    after_lost_create,
    batch_of,
    clear_step,
    drain_steps,
    next_step,
    preflight_batch,
    replaced_values,
    targets_of,
    unrestored_moves,
)
from airflow_provider_kafka_zk.kafka.drain_execution import Refusal as DrainRefusal
from airflow_provider_kafka_zk.kafka.drain_execution import Step as Decision
from airflow_provider_kafka_zk.kafka.reassignment import (
    PlannedRun,
    in_flight_targets,
    owner_advice,
    throttle_cleanup_commands,
)
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import (
    DrainBatch,
    Refusal,
    Step,
    StepState,
    ThrottleClear,
    ThrottleSet,
    content_id,
)
from airflow_provider_kafka_zk.maintenance.executor import (
    ExecutionResult,
    PreflightRefusedError,
    ProgressLog,
    StepContext,
    StepExecutor,
)
from airflow_provider_kafka_zk.maintenance.session import (
    MaintenanceRefusedError,
    MaintenanceSession,
    PlanApproval,
    RollbackArtefactError,
    RunIdentity,
    lease_held_by,
    read_lease,
)

log = logging.getLogger(__name__)

# the refusal rules of the drain's own checks, and the typed error each is raised as
FOREIGN_REASSIGNMENT = "reassignment-in-flight"
PLAN_OUTDATED = "plan-outdated"
THROTTLES_STILL_NEEDED = "throttles-still-needed"
_RULES = {
    DrainRefusal.FOREIGN_REASSIGNMENT: FOREIGN_REASSIGNMENT,
    DrainRefusal.PLAN_OUTDATED: PLAN_OUTDATED,
    DrainRefusal.STILL_MOVING: THROTTLES_STILL_NEEDED,
}


class DrainPreflightRefusedError(PreflightRefusedError, DrainError):
    """The drain's preflight refused: nothing was written by this try (``advice`` says how to remove
    throttles an earlier try set)."""

    def __init__(self, what: str, refusals: Sequence[Refusal], *, dry_run: bool, advice: str = "") -> None:
        super().__init__(what, refusals, dry_run=dry_run)
        if advice:
            self.args = (f"{self.args[0]}\n{advice}",)


class ForeignReassignmentRefusedError(DrainPreflightRefusedError, ReassignmentInFlightError):
    """A reassignment that is not this plan's is in flight (the znode, or a topic znode's
    adding/removing replicas)."""


class PlanOutdatedRefusedError(DrainPreflightRefusedError, PlanOutdatedError):
    """ZooKeeper no longer shows the assignment (or the topic incarnation) the plan was made from."""


class ThrottlesNeededRefusedError(DrainPreflightRefusedError, ThrottlesStillNeededError):
    """Partitions of this plan still move: the throttles stay."""


def drain_refusal(exc: PreflightRefusedError, advice: str = "") -> DrainPreflightRefusedError:
    """``exc`` as the typed error of its most telling refusal (a foreign reassignment first)."""
    rules = {r.rule for r in exc.refusals}
    cls: type[DrainPreflightRefusedError] = DrainPreflightRefusedError
    if FOREIGN_REASSIGNMENT in rules:
        cls = ForeignReassignmentRefusedError
    elif PLAN_OUTDATED in rules or "znode-recreated" in rules or "znode-gone" in rules:
        cls = PlanOutdatedRefusedError
    elif THROTTLES_STILL_NEEDED in rules:
        cls = ThrottlesNeededRefusedError
    return cls(exc.what, exc.refusals, dry_run=exc.dry_run, advice=advice)


# ---------------------------------------------------------------------------------------------
# Rollback, advice, owners
# ---------------------------------------------------------------------------------------------


def check_rollback(plan_dir: str, batches: Sequence[Sequence[Move]]) -> None:
    """Before the first change (and in the dry run): rollback.json is there, readable, and undoes
    every planned move.

    :param plan_dir: the drain run's folder.
    :param batches: the plan's batches.
    :raises RollbackArtefactError: missing, unreadable, or not undoing a planned move.
    """
    location = DrainLocation(plan_dir)
    where = location.path(ROLLBACK_FILE)
    try:
        rollback = location.read_json(ROLLBACK_FILE)
        saved = {(e["topic"], int(e["partition"])): list(e["replicas"]) for e in rollback["partitions"]}
    except FileNotFoundError:
        raise RollbackArtefactError(f"{where} is missing: refusing to change anything without it") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise RollbackArtefactError(
            f"{where} is unreadable ({type(exc).__name__}: {exc}): refusing"
        ) from None
    missing = unrestored_moves(batches, saved)
    if missing:
        raise RollbackArtefactError(
            f"{where} does not restore {len(missing)} planned move(s) ({', '.join(missing[:10])}): refusing"
        )


def throttle_advice(plan_dir: str | None, hook: KafkaZooKeeperHook | None = None) -> str:
    """What a person runs to remove this run's throttles by hand (empty when it set none).

    Appended to the error of a step that stops after setting throttles; never raises itself.

    :param plan_dir: the drain run's folder (unset: no plan, no throttles).
    :param hook: an open ZooKeeper hook to take a broker address from (None: a placeholder).
    """
    if plan_dir in (None, "", "None"):
        return ""
    location = DrainLocation(str(plan_dir))
    try:
        if not location.exists(THROTTLES_FILE):
            return ""
        entities = load_throttle_record(location)["entities"]
    except Exception as exc:
        return f"(throttles record {location.path(THROTTLES_FILE)} unreadable: {exc})"
    commands = throttle_cleanup_commands(entities, bootstrap_address(hook))
    if not commands:
        return ""
    return (
        "Throttles this run set are still in place (" + location.path(THROTTLES_FILE) + "); once nothing "
        "of the plan moves, re-run the clear_throttles task, or remove them by hand: " + " ; ".join(commands)
    )


def planned_runs(cluster_root: str) -> list[PlannedRun]:
    """This provider's runs that planned moves on the cluster: the ``plan.json`` of every
    ``<cluster_root>/drain/*`` and ``<cluster_root>/post-maintenance/*`` folder (unreadable ones skipped)."""
    fs, root = fsspec.core.url_to_fs(cluster_root)
    runs = []
    for kind in ("drain", "post-maintenance"):
        folder = f"{root.rstrip('/')}/{kind}"
        if not fs.isdir(folder):
            continue
        for entry in sorted(fs.ls(folder, detail=False)):
            location = DrainLocation(
                f"{cluster_root.rstrip('/')}/{kind}/{entry.rstrip('/').rsplit('/', 1)[-1]}"
            )
            try:
                plan = location.read_json(PLAN_FILE)
                batches = tuple(
                    {
                        (str(m["topic"]), int(m["partition"])): tuple(int(b) for b in m["target"])
                        for m in batch
                    }
                    for batch in plan["batches"]
                )
            except (DrainError, KeyError, TypeError, ValueError):
                continue  # not a plan this search can read: it names no owner
            runs.append(PlannedRun(location.url, plan.get("run_id"), kind, batches))
    return runs


def reassignment_owner(
    cluster_root: str,
    topics: Iterable[znodes.TopicAssignment],
    reassign: znodes.ReassignPartitions | None,
    hook: KafkaZooKeeperHook | None,
    own_run_id: str | None = None,
) -> str:
    """:func:`~airflow_provider_kafka_zk.kafka.reassignment.owner_advice` for what ZooKeeper shows in
    flight, from the cluster's maintenance lease (read through ``hook``; None: not read) and the plans
    under ``cluster_root``."""
    lease, lease_read = None, False
    if hook is not None:
        lease, stat = read_lease(hook)
        lease_read = stat is None or lease is not None  # a znode that is no record of ours: unknown
    return owner_advice(
        in_flight_targets(topics, reassign),
        planned_runs(cluster_root),
        lease,
        lease_read=lease_read,
        searched=cluster_root,
        own_run_id=own_run_id,
    )


def plan_incarnations(plan: Mapping[str, Any]) -> dict[str, tuple[str | None, int | None]]:
    """``plan.json``'s ``topics``: topic -> (topic id, czxid) of every moved topic as the plan read it
    (empty for a plan made before plans recorded them)."""
    return {
        str(name): (record.get("topic_id"), None if record.get("czxid") is None else int(record["czxid"]))
        for name, record in (plan.get("topics") or {}).items()
    }


# ---------------------------------------------------------------------------------------------
# The run's context and the handlers
# ---------------------------------------------------------------------------------------------


@dataclass
class DrainContext(StepContext):
    """The executor's context plus what the drain's handlers share within one try.

    :param defer_wait: hands a submitted batch's wait to the triggerer (raises ``TaskDeferred``);
        None: the wait polls here.
    """

    location: DrainLocation | None = None
    batches: tuple[Batch, ...] = ()
    rate: int = 1
    force: bool = False
    batch_timeout: float = 6 * 3600.0
    defer_wait: Callable[[DrainBatch], None] | None = None

    @property
    def folder(self) -> DrainLocation:
        assert self.location is not None
        return self.location

    @property
    def cluster_root(self) -> str:
        """``<base>/<cluster>``: where the owner of a foreign reassignment is looked for."""
        return self.folder.url.rstrip("/").rsplit("/", 2)[0]

    def seen(self) -> Observed:
        """Every topic znode and the reassign znode, read once for the preflight."""
        if "seen" not in self.cache:
            reassign, czxid = read_reassign(self.hook)
            self.cache["seen"] = Observed(
                read_all_topics(self.hook),
                reassign=reassign,
                reassign_czxid=czxid,
                reassign_path=self.hook.describe_path(znodes.REASSIGN_PARTITIONS),
            )
        return self.cache["seen"]

    def verdict(self, step: DrainBatch) -> Decision:
        """The preflight's verdict on a batch (:func:`preflight_batch`), once per try."""
        key = f"verdict:{step.id}"
        if key not in self.cache:
            seen = self.seen()
            states = read_states(self.hook, [(m.topic, m.partition) for m in step.moves])
            self.cache[key] = preflight_batch(self.batches, step.batch, replace(seen, states=states))
        return self.cache[key]

    def with_owner(self, decision: Decision, seen: Observed) -> Decision:
        """A foreign-reassignment refusal with whose reassignment it is (nobody is told to cancel it)."""
        if decision.refusal is not DrainRefusal.FOREIGN_REASSIGNMENT:
            return decision
        owner = reassignment_owner(
            self.cluster_root,
            seen.topics.values(),
            seen.reassign,
            self.hook,
            own_run_id=self.session.run.run_id,
        )
        return replace(decision, message=f"{decision.message}. {owner}")


def _as_refusal(decision: Decision, step: Step) -> Refusal:
    assert decision.refusal is not None
    actions = {
        DrainRefusal.FOREIGN_REASSIGNMENT: "Nothing was written; wait for its owner to finish, then run again",
        DrainRefusal.PLAN_OUTDATED: "Nothing was written; make a new plan (run the DAG again)",
        DrainRefusal.STILL_MOVING: "Nothing was removed; run this task again once they finished (or set force)",
    }
    return Refusal(
        _RULES.get(decision.refusal, decision.refusal.value),
        decision.message,
        actions.get(decision.refusal, "Nothing was written"),
        step.id,
    )


def _entity(
    step: ThrottleSet | ThrottleClear, ctx: StepContext
) -> tuple[Refusal | None, znodes.ConfigEntity | None]:
    """The step's config entity as read now: (a refusal when it is no config znode Kafka can read,
    the entity; None when the znode does not exist)."""
    try:
        data, _ = ctx.hook.get_znode(step.entity_path)
    except ZnodeNotFoundError:
        return None, None
    try:
        return None, znodes.ConfigEntity.decode(data, step.entity_path)
    except (znodes.ZnodeFormatError, ValueError) as exc:
        return (
            Refusal(
                "znode-unreadable",
                f"{ctx.hook.describe_path(step.entity_path)} is not a config znode Kafka can read ({exc})",
                "Nothing was written; repair the znode (kafka-configs) and run again",
                step.id,
                (step.entity_path,),
            ),
            None,
        )


class ThrottleSetHandler:
    """Set a batch's throttles, recording each in ``throttles.json`` before its write (clear finds it)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, ThrottleSet) and isinstance(ctx, DrainContext)
        refusal, entity = _entity(step, ctx)
        if refusal is not None:
            return [refusal]
        if entity is None and step.entity_type == "topics":
            return [
                Refusal(
                    "znode-gone",
                    f"{ctx.hook.describe_path(step.entity_path)} is missing (Kafka creates it with the topic): "
                    f"the throttle of topic {step.entity_name} has nowhere to go",
                    "Nothing was written; check the topic (was it deleted?) and make a new plan",
                    step.id,
                    (step.entity_path,),
                )
            ]
        batch = next((s for s in ctx.plan_steps if s.id == step.batch_step), None)
        if isinstance(batch, DrainBatch) and ctx.verdict(batch).action is Action.SKIP:
            return StepState.DONE  # the batch is complete: its throttles are not needed
        if entity is not None and all(entity.config.get(k) == v for k, v in step.keys):
            return StepState.DONE  # an earlier try set exactly these (recorded before its write)
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, DrainContext)
        location = ctx.folder
        record = (
            load_throttle_record(location)
            if location.exists(THROTTLES_FILE)
            else {"entities": {}, "previous": {}}
        )
        outcomes: dict[str, dict[str, Any]] = {}
        for step in steps:
            assert isinstance(step, ThrottleSet)
            key, config = step.entity_key, dict(step.keys)
            ours_before = dict(record["entities"].get(key, {}))  # an earlier batch of this run
            # recorded before the write: clearing later removes a key only if it still holds our value
            record["entities"].setdefault(key, {}).update(config)
            location.write(THROTTLES_FILE, json.dumps(record, indent=1, sort_keys=True))
            previous, _, written = update_config(
                ctx.hook,
                step.entity_type,
                step.entity_name,
                set_values=config,
                create_if_missing=step.entity_type == "brokers",
            )
            overwritten = replaced_values(previous, config, ours_before)
            if overwritten and key not in record["previous"]:
                log.warning("%s had throttle values set by someone else; replaced: %s", key, overwritten)
                record["previous"][key] = overwritten
                location.write(THROTTLES_FILE, json.dumps(record, indent=1, sort_keys=True))
            if written:
                log.info("Throttle set on /config/%s: %s", key, config)
            outcomes[step.id] = {"written": written, "replaced": overwritten}
        return outcomes


class DrainBatchHandler:
    """Create the batch's reassign znode (never overwriting one), then wait for Kafka to complete it."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, DrainBatch) and isinstance(ctx, DrainContext)
        decision = ctx.verdict(step)
        if decision.action is Action.SKIP:
            return StepState.DONE
        if decision.action is Action.REFUSE:
            return [_as_refusal(ctx.with_owner(decision, ctx.seen()), step)]
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, DrainContext)
        (step,) = steps
        assert isinstance(step, DrainBatch)
        batches, index, hook = ctx.batches, step.batch, ctx.hook
        seen = observe(hook, batch_of(step))
        decision = ctx.with_owner(next_step(batches, index, seen, rate=ctx.rate), seen)
        if decision.action is Action.SKIP:
            log.info("%s", decision.message)
            return {step.id: {"skipped": decision.message}}
        if decision.submission is not None:  # the throttles went on in the steps before this one
            where = hook.describe_path(znodes.REASSIGN_PARTITIONS)
            request = decision.submission.request
            ctx.progress.set_pending(step.id, {"request": json.loads(request.encode())})
            if hook.create_if_absent(znodes.REASSIGN_PARTITIONS, request.encode()):
                log.info(
                    "%s: created %s for %d partition(s), throttled at %d B/s",
                    step.label,
                    where,
                    len(decision.submission.targets),
                    ctx.rate,
                )
            else:
                decision = after_lost_create(batches, index, read_reassign(hook)[0], where)
        if decision.action is Action.REFUSE:
            raise refusal_error(decision)
        log.info("%s", decision.message)
        return self._wait(step, ctx)

    def _wait(self, step: DrainBatch, ctx: DrainContext) -> Mapping[str, Mapping[str, Any]]:
        """In the triggerer (the operator's deferral; the resumed try continues from progress), or here."""
        if ctx.defer_wait is not None:
            ctx.defer_wait(step)
            raise RuntimeError("defer_wait returned instead of deferring")  # pragma: no cover
        from airflow_provider_kafka_zk.triggers.reassignment import read_progress

        targets = targets_of(batch_of(step))

        def still_moving() -> list[str]:
            found = read_progress(ctx.hook, targets)
            return [] if found.complete else [found.describe()]

        waited = ctx.wait(
            f"drain {step.label}",
            still_moving,
            ctx.batch_timeout,
            lambda why: DrainError(
                f"{step.label} not complete after {ctx.batch_timeout:g}s: {'; '.join(why)}; the reassignment "
                "keeps running, throttled, and the maintenance lease stays with this run. Re-run this task "
                "to keep waiting"
            ),
        )
        return {step.id: {"waited_s": round(waited, 1)}}


class ThrottleClearHandler:
    """Remove this run's throttle values from one entity, where they still hold them."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, ThrottleClear) and isinstance(ctx, DrainContext)
        refusals: list[Refusal] = []
        if "clear_decision" not in ctx.cache:
            seen = ctx.seen()
            decision = clear_step(ctx.batches, seen, force=ctx.force)
            ctx.cache["clear_decision"] = decision
            if decision.action is Action.REFUSE:  # said once, for the whole run
                refusals.append(_as_refusal(decision, step))
        refusal, entity = _entity(step, ctx)
        if refusal is not None:
            refusals.append(refusal)
        if refusals:
            return refusals
        return StepState.DONE if entity is None else StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        (step,) = steps
        assert isinstance(step, ThrottleClear)
        ours = dict(step.keys)
        previous, changed, written = update_config(
            ctx.hook, step.entity_type, step.entity_name, remove_values=ours
        )
        if changed:
            log.warning(
                "/config/%s: %s changed by someone else since this run set them; left in place",
                step.entity_key,
                changed,
            )
        removed = [k for k in ours if k in previous and k not in changed] if written else []
        if written:
            log.info("Removed %s from /config/%s", removed, step.entity_key)
        return {step.id: {"entity": step.entity_key, "removed": removed, "changed_by_others": changed}}


HANDLERS = {
    ThrottleSet.KIND: ThrottleSetHandler(),
    DrainBatch.KIND: DrainBatchHandler(),
    ThrottleClear.KIND: ThrottleClearHandler(),
}


# ---------------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------------


def _session(
    hook: KafkaZooKeeperHook,
    plan: Mapping[str, Any],
    location: str,
    run: RunIdentity,
    dry_run: bool,
    expected: ClusterIdentity,
    lease_ttl_s: float | None,
    approval: PlanApproval | None = None,
    *,
    lease_only: bool = False,
) -> MaintenanceSession:
    """A drain's session: multi-task (the lease stays with the run until ``clear_throttles``)."""
    return MaintenanceSession(
        hook,
        cluster=str(plan["cluster"]),
        artefact_dir=location,
        run=run,
        dry_run=dry_run,
        expected=expected,
        lease_ttl_s=lease_ttl_s,
        approval=approval,
        lease_only=lease_only,
    )


def execute_drain(
    location: str,
    plan: Mapping[str, Any],
    batches: Sequence[Batch],
    *,
    kafka_zookeeper_conn_id: str,
    rate: int,
    run: RunIdentity,
    dry_run: bool,
    expected: ClusterIdentity,
    poll_interval: float = 10.0,
    batch_timeout: float = 6 * 3600.0,
    defer_wait: Callable[[DrainBatch], None] | None = None,
    waited: tuple[int, str] | None = None,
    before_steps: Callable[[KafkaZooKeeperHook], None] | None = None,
    lease_ttl_s: float | None = None,
    approval: PlanApproval | None = None,
) -> ExecutionResult:
    """Carry out a drain plan's batches through the step executor inside one maintenance session.

    :param location: the run's folder (``plan.json``; ``progress.json`` and ``throttles.json`` go there).
    :param plan: ``plan.json``'s validated content.
    :param batches: its batches (``plan_batches(plan)``).
    :param rate: the throttle in bytes/s (positive, checked by the caller).
    :param expected: the identity the plan was made for.
    :param defer_wait: hands a submitted batch's wait to the triggerer (raises ``TaskDeferred``).
    :param waited: (batch index, the trigger's message) when a deferred wait ended with the batch
        complete: recorded in ``progress.json`` before the executor continues after it.
    :param before_steps: a check run inside the session before the executor (the plan's read
        against the safety snapshot); it raises to refuse.
    :param approval: the run's approved plan (a real run after an approval step): the session
        verifies it before reading the cluster, the executor again before the first write.
    :raises PlanNotApprovedError, PlanChangedSinceApprovalError: see ``approval``; nothing was read
        from the cluster or written.
    :raises DrainPreflightRefusedError: a step failed its preflight (typed: a foreign reassignment, an
        outdated plan...); nothing was written by this try.
    """
    steps = drain_steps(batches, rate, plan_incarnations(plan))
    progress = ProgressLog(location)
    with KafkaZooKeeperHook(kafka_zookeeper_conn_id) as hook:
        session = _session(hook, plan, location, run, dry_run, expected, lease_ttl_s, approval)
        with session:
            check_rollback(location, batches)
            if before_steps is not None:
                before_steps(hook)
            if waited is not None:
                index, message = waited
                progress.complete({f"batch-{index + 1}": {"completed": message}})
            ctx = DrainContext(
                session=session,
                progress=progress,
                plan_steps=steps,
                poll_interval=poll_interval,
                location=DrainLocation(location),
                batches=tuple(tuple(b) for b in batches),
                rate=rate,
                batch_timeout=batch_timeout,
                defer_wait=defer_wait,
            )
            executor = StepExecutor(f"drain {location}", HANDLERS, ctx)
            try:
                return executor.run(steps)
            except PreflightRefusedError as exc:
                raise drain_refusal(exc) from None
            except MaintenanceRefusedError as exc:
                if not dry_run and session.changed_anything:
                    raise type(exc)(f"{exc}. {throttle_advice(location, hook)}") from exc
                raise
            except DrainError as exc:
                if not dry_run and session.changed_anything:
                    raise type(exc)(f"{exc}. {throttle_advice(location)}") from exc
                raise


def release_lease_if_ours(
    location: str,
    plan: Mapping[str, Any],
    *,
    kafka_zookeeper_conn_id: str,
    run: RunIdentity,
    expected: ClusterIdentity,
) -> bool:
    """An execute step that refused after taking the lease leaves it to the run's last step."""
    with KafkaZooKeeperHook(kafka_zookeeper_conn_id) as hook:
        if not lease_held_by(hook, run):
            return False
        # giving the lease back changes nothing of Kafka's: no approval needed, nothing else written
        with _session(hook, plan, location, run, False, expected, None, lease_only=True) as session:
            return session.release_lease()


def clear_steps(entities: Mapping[str, Mapping[str, str]]) -> list[ThrottleClear]:
    """One :class:`ThrottleClear` per entity of ``throttles.json`` (ids by content: what a later
    batch added to an entity is cleared by a later try, not skipped as done)."""
    out = []
    for key, ours in sorted(entities.items()):
        entity_type, name = key.split("/", 1)
        keys = tuple(sorted((str(k), str(v)) for k, v in ours.items()))
        out.append(
            ThrottleClear(
                id=content_id(f"clear-throttles:{key}", keys),
                entity_type=entity_type,
                entity_name=name,
                keys=keys,
            )
        )
    return out


def clear_throttles(
    location: str,
    plan: Mapping[str, Any],
    batches: Sequence[Batch],
    record: Mapping[str, Any],
    *,
    kafka_zookeeper_conn_id: str,
    run: RunIdentity,
    dry_run: bool,
    force: bool,
    expected: ClusterIdentity,
    approval: PlanApproval | None = None,
) -> dict[str, Any]:
    """Remove exactly the throttle values this run set (``record``: ``throttles.json``), then give the
    run's lease back. Returns ``{"cleared": {entity: [keys]}, "changed_by_others": {...}, "dry_run"}``.

    :param approval: the run's approved plan (the drain's): removing throttles is a write, bound to
        the same approval rule as setting them.

    :raises ThrottlesNeededRefusedError: partitions of the plan still move (unless ``force``); the
        error carries the commands that remove the throttles by hand.
    """
    steps = clear_steps(record["entities"])
    progress = ProgressLog(location)
    with KafkaZooKeeperHook(kafka_zookeeper_conn_id) as hook:
        session = _session(hook, plan, location, run, dry_run, expected, None, approval)
        with session:
            ctx = DrainContext(
                session=session,
                progress=progress,
                plan_steps=steps,
                location=DrainLocation(location),
                batches=tuple(tuple(b) for b in batches),
                force=force,
            )
            executor = StepExecutor(f"clearing the throttles of {location}", HANDLERS, ctx)
            try:
                executor.run(steps)
            except PreflightRefusedError as exc:
                raise drain_refusal(exc, throttle_advice(location, hook)) from None
            if not dry_run:
                session.release_lease()
    cleared: dict[str, list[str]] = {}
    others: dict[str, list[str]] = {}
    for step in steps:
        outcome = progress.completed.get(step.id) or {}
        if outcome.get("removed"):
            cleared[step.entity_key] = list(outcome["removed"])
        if outcome.get("changed_by_others"):
            others[step.entity_key] = list(outcome["changed_by_others"])
    return {"cleared": cleared, "changed_by_others": others, "dry_run": dry_run}


__all__ = [
    "DrainContext",
    "DrainPreflightRefusedError",
    "ForeignReassignmentRefusedError",
    "PlanOutdatedRefusedError",
    "ThrottlesNeededRefusedError",
    "check_rollback",
    "clear_steps",
    "clear_throttles",
    "drain_refusal",
    "execute_drain",
    "plan_incarnations",
    "planned_runs",
    "reassignment_owner",
    "release_lease_if_ours",
    "throttle_advice",
]
