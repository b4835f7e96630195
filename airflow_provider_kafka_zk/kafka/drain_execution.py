"""What a drain's execution does next, decided without I/O.

The execute step of a drain (and of a post-maintenance move-back, which is written as a drain plan)
runs batch by batch, and it is retried, cleared and resumed: a worker dies mid-batch, a batch's
reassignment finishes while nobody watches, someone else starts a reassignment, a person moves a
partition after the plan was made. Every one of those cases is decided here, from plain data the
operator read (the plan's batches, the batch it is at, what ZooKeeper shows), so the decision is
tested on its own and a dry run and a real run decide alike. The operators only read, call these
functions, and carry out the :class:`Step` they return (throttles, the reassign znode, a wait).

The rules are Kafka's (``ReassignPartitionsCommand.scala``, ``KafkaController.scala``, 3.3.1; see
:mod:`.reassignment`): a reassignment is *created*, never overwritten; one that is in flight and not
ours is never touched; ours is recognised by its content (the znode cannot carry a marker).

The steps around it are decided here too: the plan from a snapshot's model (:func:`plan_from_state`)
and, after the drain, whether ZooKeeper and the disks show what the plan promised
(:func:`verify_outcome`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import steps as executor_steps
from .drain import BrokerInfo, DrainPlan, DrainRequest, Move, in_drain_scope, plan_drain, unreadable_topics
from .model import ClusterState
from .reassignment import (
    ThrottlePlan,
    TopicPartition,
    plan_throttles,
    progress,
    reassignments_in_flight,
    same_request,
)
from .znodes import (
    NO_LEADER,
    REASSIGN_PARTITIONS,
    PartitionState,
    ReassignmentEntry,
    ReassignPartitions,
    TopicAssignment,
)
from .znodes import topic_path as zk_topic_path

Batch = Sequence[Move]


class Action(Enum):
    """What the execute (or clear) step does next."""

    SUBMIT = "submit"
    """Set the throttles of the batch's remaining partitions, then create the reassign znode, then wait."""
    WAIT = "wait"
    """The batch's reassignment is in flight and it is ours (a retry, a resume): wait for it, submit nothing."""
    SKIP = "skip"
    """The batch is already applied (finished while nobody watched, or an earlier try): go on with the next."""
    CONTINUE = "continue"
    """The wait for the batch ended with the batch complete: go on with the next."""
    REFUSE = "refuse"
    """Stop without writing: ``Step.message`` says why, ``Step.refusal`` which kind of refusal."""
    CLEAR = "clear"
    """Remove the throttles this run recorded (only where they still hold its values)."""
    DONE = "done"
    """Nothing is left to do: every batch is behind."""


class Refusal(Enum):
    """Why a step refuses; the operator raises the matching typed error with ``Step.message``."""

    FOREIGN_REASSIGNMENT = "foreign_reassignment"
    """A reassignment that is not this batch's is in flight (the znode, or adding/removing replicas)."""
    PLAN_OUTDATED = "plan_outdated"
    """ZooKeeper no longer shows the assignment the plan was made from."""
    WAIT_TIMED_OUT = "wait_timed_out"
    """The batch did not complete before its deadline (it keeps running, throttled)."""
    WAIT_FAILED = "wait_failed"
    """The wait could not follow the batch (ZooKeeper unreadable, a bad event)."""
    STILL_MOVING = "still_moving"
    """Partitions of the plan still move: removing the throttles now would unthrottle them."""


@dataclass(frozen=True)
class Submission:
    """What a :attr:`Action.SUBMIT` writes: throttles first, then the reassign znode.

    :param targets: the batch's partitions that still have to move, with their targets.
    :param request: the ``/admin/reassign_partitions`` content (no ``log_dirs``), sorted.
    :param throttles: the throttle values, as ``kafka-reassign-partitions`` computes them.
    :param size_bytes: the planned bytes of ``targets``, for the log line.
    """

    targets: Mapping[TopicPartition, tuple[int, ...]]
    request: ReassignPartitions
    throttles: ThrottlePlan
    size_bytes: int


@dataclass(frozen=True)
class Step:
    """One decision: the action, the batch it concerns, and the text to log or to refuse with.

    :param action: what to do.
    :param batch: the batch's 0-based index (None for steps that concern no single batch).
    :param message: the log line of the step, or the refusal's error message (without the
        operator's throttle advice, which needs I/O to compose).
    :param refusal: for :attr:`Action.REFUSE`, which refusal (the operator's error type).
    :param submission: for :attr:`Action.SUBMIT`, what to write.
    """

    action: Action
    batch: int | None
    message: str
    refusal: Refusal | None = None
    submission: Submission | None = field(default=None, compare=True)


@dataclass(frozen=True)
class Observed:
    """What ZooKeeper showed just before deciding about one batch.

    :param topics: every topic znode (the in-flight check must look at all of them), by name.
    :param states: the partition state znodes of the batch's partitions that exist.
    :param reassign: ``/admin/reassign_partitions`` when it exists.
    :param reassign_czxid: that znode's czxid (for the log line of a retry that finds it).
    :param reassign_path: how messages name the znode (the operator adds the chroot).
    """

    topics: Mapping[str, TopicAssignment]
    states: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)
    reassign: ReassignPartitions | None = None
    reassign_czxid: int | None = None
    reassign_path: str = REASSIGN_PARTITIONS


def batch_label(index: int, count: int) -> str:
    """``batch 2/5``: how logs and messages name a batch (1-based)."""
    return f"batch {index + 1}/{count}"


def targets_of(batch: Batch) -> dict[TopicPartition, tuple[int, ...]]:
    """The batch's partitions and their targets, in plan order."""
    return {(m.topic, m.partition): tuple(m.target) for m in batch}


def plan_from_state(
    state: ClusterState, request: DrainRequest, *, sizes: Mapping[TopicPartition, int]
) -> DrainPlan:
    """The drain plan for ``request`` from a safety snapshot's model and the inventory's sizes.

    Every broker that holds a replica takes part: a registered one with its rack, one that is not
    registered (down) as not live, so the planner neither moves data to it nor trusts its copy.
    Topic znodes the model could not read are handed on, so the plan lists them and never drops them.

    :param state: the model of the safety snapshot (no reassignment in flight: checked by the caller).
    :param request: what to drain.
    :param sizes: bytes per partition (largest replica); a partition not in it counts as 0 bytes.
    :raises ValueError: the request names no broker, or is otherwise invalid for this cluster.
    """
    # One pass; only the partitions with a replica on a drained broker reach the planner (the only
    # ones it can move: a 200k-partition model gives it ~1k), every replica holder counts as a broker.
    drained = frozenset(request.brokers)
    holders: set[int] = set()
    assignment: dict[TopicPartition, tuple[int, ...]] = {}
    isr: dict[TopicPartition, tuple[int, ...]] = {}
    for p in state.partitions():
        holders.update(p.replicas)
        if not drained.isdisjoint(p.replicas):
            assignment[p.topic, p.partition] = p.replicas
            if p.state is not None:
                isr[p.topic, p.partition] = p.isr
    brokers = {b: BrokerInfo(b, live.rack, True) for b, live in state.brokers.items()}
    for b in holders:
        brokers.setdefault(b, BrokerInfo(b, None, live=False))
    return plan_drain(
        assignment,
        brokers,
        request,
        sizes=sizes,
        isr=isr,
        unreadable_topics=unreadable_topics(state.findings),
    )


def partitions_on(state: ClusterState, brokers: frozenset[int], scope: str = "all") -> list[TopicPartition]:
    """The partitions a drain of ``brokers`` in ``scope`` must move (``all``: every one with a
    replica on a drained broker), hence the only partition state znodes (leader, ISR) a planning
    read needs: :func:`~.drain.in_drain_scope`, the planner's own rule.

    :param state: a model (a planning read's: topic znodes only are enough).
    :param brokers: the brokers to drain.
    :param scope: ``rf1`` or ``all``.
    """
    # from the topic znodes' replica lists (a partition's replicas, as PartitionInfo.replicas has them)
    return [
        (name, p)
        for name, topic in state.topics.items()
        for p, replicas in topic.assignment.partitions.items()
        if in_drain_scope(replicas, brokers, scope)
    ]


def read_record(state: ClusterState, brokers: frozenset[int]) -> dict[str, Any]:
    """What a later step compares with what it sees: the read's cluster id, every topic znode's
    (czxid, version), the topics with a replica on a drained broker, the in-flight markers.

    JSON-ready (``plan.json`` keeps it under ``read``); :func:`read_disagreements` compares two.

    :param state: the model of the read (a planning read's, or a full snapshot's).
    :param brokers: the brokers the plan drains.
    """
    return {
        "cluster_id": state.cluster_id,
        "last_zxid": state.last_zxid,
        "topics": {name: [t.czxid, t.zk_version] for name, t in state.topics.items()},
        "drained_topics": sorted({tp[0] for tp in partitions_on(state, brokers)}),
        "reassign_partitions": state.reassign_partitions is not None,
        "reassigning": len(state.reassigning_partitions),
        "pending_deletions": sorted(state.pending_deletions),
    }


def read_disagreements(planned: Mapping[str, Any], seen: Mapping[str, Any], seen_as: str) -> list[str]:
    """Why ``seen`` (a safety snapshot, or ZooKeeper now) is not the cluster the plan was read from.

    Only what can change the drain counts: another cluster id; a reassignment in flight; a topic
    with a replica on a drained broker (in either read) whose topic znode was created, deleted or
    rewritten (czxid or version differ: a partition added, a replica moved) or whose deletion
    marker came or went. A topic with no replica on the drained brokers in either read cannot
    change what the drain moves, so it may change freely. Empty: they agree.

    :param planned: the plan's :func:`read_record`.
    :param seen: the other read's :func:`read_record`, for the same brokers.
    :param seen_as: how messages name the other read.
    """
    problems = []
    if planned.get("cluster_id") != seen.get("cluster_id"):
        problems.append(
            f"{seen_as} shows cluster id {seen.get('cluster_id')!r}, the plan's read {planned.get('cluster_id')!r}"
        )
    if seen.get("reassign_partitions") or seen.get("reassigning"):
        problems.append(f"{seen_as} shows a reassignment in flight")
    before, after = planned.get("topics", {}), seen.get("topics", {})
    relevant = set(planned.get("drained_topics", ())) | set(seen.get("drained_topics", ()))
    for name in sorted(relevant):
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and list(was) == list(now):
            continue
        path = zk_topic_path(name)
        if was is None:
            problems.append(f"{seen_as} has topic znode {path} (czxid {now[0]:#x}), the plan's read had not")
        elif now is None:
            problems.append(
                f"{seen_as} lacks topic znode {path} (or cannot decode it), which the plan's read had"
            )
        else:
            problems.append(
                f"{seen_as}: topic znode {path} rewritten (czxid {was[0]:#x} -> {now[0]:#x}, "
                f"version {was[1]} -> {now[1]})"
            )
    marked = set(planned.get("pending_deletions", ())) ^ set(seen.get("pending_deletions", ()))
    for name in sorted(marked & relevant):
        problems.append(f"{seen_as}: the deletion marker of topic {name!r} differs from the plan's read")
    return problems


def next_step(batches: Sequence[Batch], position: int, observed: Observed | None, *, rate: int) -> Step:
    """What the execute step does about batch ``position`` given what ZooKeeper shows.

    In order: every batch behind -> DONE; the batch already complete (Kafka's completion rule) ->
    SKIP; the reassign znode is this batch's own request -> WAIT (a retry never submits twice);
    it is anyone else's -> REFUSE; topic znodes show adding/removing replicas not towards this
    batch's targets -> REFUSE; only ours -> WAIT (a reassignment the controller is still carrying
    out after the znode went); a partition still to move no longer has the assignment the plan was
    made from -> REFUSE (plan outdated); else SUBMIT the partitions still to move.

    :param batches: the plan's batches, in order.
    :param position: the 0-based index of the batch to decide about (``len(batches)``: past the end).
    :param observed: ZooKeeper just before, read for that batch; None only past the end.
    :param rate: the throttle in bytes/s (a positive number, checked by the caller).
    :raises ValueError: ``observed`` is None while a batch is left.
    """
    if position >= len(batches):
        return Step(Action.DONE, None, f"all {len(batches)} batch(es) behind")
    if observed is None:
        raise ValueError(f"{batch_label(position, len(batches))} needs what ZooKeeper shows to decide")
    batch = batches[position]
    label = batch_label(position, len(batches))
    targets = targets_of(batch)
    topics, reassign, where = observed.topics, observed.reassign, observed.reassign_path
    found = progress(targets, topics, observed.states, reassign)
    if found.complete:
        return Step(Action.SKIP, position, f"{label}: already complete ({found.total} partitions), skipping")
    in_flight = reassignments_in_flight(topics.values(), reassign)
    if reassign is not None:
        if same_request(reassign, targets):
            return Step(
                Action.WAIT,
                position,
                f"{label}: {where} (czxid 0x{observed.reassign_czxid or 0:x}) is this batch's own request "
                "(a retry): waiting for it, not submitting again",
            )
        return Step(
            Action.REFUSE,
            position,
            f"{where} holds a reassignment that is not this plan's {label} ({in_flight.describe()}): "
            "refusing to start; wait for whoever owns it to finish, then run again",
            Refusal.FOREIGN_REASSIGNMENT,
        )
    ours_moving = [
        tp
        for tp in in_flight.topic_znode_partitions
        if tp in targets and topics[tp[0]].target_replicas(tp[1]) == targets[tp]
    ]
    foreign = [tp for tp in in_flight.topic_znode_partitions if tp not in ours_moving]
    if foreign:
        names = ", ".join(f"{t}-{p}" for t, p in foreign[:10])
        return Step(
            Action.REFUSE,
            position,
            f"topic znodes show adding/removing replicas for {names} (a reassignment started through "
            "the Admin API or by another tool): refusing to start",
            Refusal.FOREIGN_REASSIGNMENT,
        )
    if ours_moving:
        return Step(
            Action.WAIT, position, f"{label}: already moving (adding/removing replicas are ours): waiting"
        )

    remaining = {tp: t for tp, t in targets.items() if tp in found.moving}
    outdated = []
    for move in batch:
        tp = (move.topic, move.partition)
        if tp not in remaining:
            continue
        topic = topics.get(tp[0])
        now = None if topic is None else topic.partitions.get(tp[1])
        if now is None or tuple(now) != tuple(move.current):
            outdated.append(
                f"{tp[0]}-{tp[1]} planned from {list(move.current)}, now {None if now is None else list(now)}"
            )
    if outdated:
        return Step(
            Action.REFUSE,
            position,
            f"{label}: ZooKeeper no longer shows the assignment the plan was made from: "
            + "; ".join(outdated[:10])
            + ". Make a new plan.",
            Refusal.PLAN_OUTDATED,
        )
    request = ReassignPartitions(
        tuple(ReassignmentEntry(t, p, tuple(r)) for (t, p), r in sorted(remaining.items()))
    )
    submission = Submission(
        targets=remaining,
        request=request,
        throttles=plan_throttles(remaining, topics, rate),
        size_bytes=sum(m.size_bytes for m in batch if (m.topic, m.partition) in remaining),
    )
    return Step(
        Action.SUBMIT,
        position,
        f"{label}: submitting {len(remaining)} partition(s), throttled at {rate} B/s",
        submission=submission,
    )


def preflight_batch(batches: Sequence[Batch], position: int, observed: Observed) -> Step:
    """What the run's preflight says about batch ``position`` before the run's first write (or when
    a resumed run starts again), while earlier batches of the same plan may still be ahead of it.

    Like :func:`next_step`, read-only, with one difference: a reassignment in flight that is
    another batch of *this* plan (a resumed run, an earlier batch still moving) is not foreign --
    the batch is then only checked for what it assumes itself: its partitions where the plan found
    them (or already moved), and nothing foreign moving. SKIP: already complete; WAIT: its own
    request is in flight; SUBMIT (without a submission): it can go when its turn comes; REFUSE.

    :param batches: the plan's batches, in order.
    :param position: the batch to judge (0-based).
    :param observed: ZooKeeper now (every topic znode, the batch's partition states, the reassign znode).
    """
    batch = batches[position]
    label = batch_label(position, len(batches))
    targets = targets_of(batch)
    topics, reassign, where = observed.topics, observed.reassign, observed.reassign_path
    found = progress(targets, topics, observed.states, reassign)
    if found.complete:
        return Step(Action.SKIP, position, f"{label}: already complete ({found.total} partitions)")
    planned: dict[TopicPartition, tuple[int, ...]] = {}
    for other in batches:
        planned.update(targets_of(other))
    in_flight = reassignments_in_flight(topics.values(), reassign)
    if reassign is not None:
        if same_request(reassign, targets):
            return Step(
                Action.WAIT, position, f"{label}: {where} is this batch's own request: it waits for it"
            )
        if not any(same_request(reassign, targets_of(other)) for other in batches):
            return Step(
                Action.REFUSE,
                position,
                f"{where} holds a reassignment that is not this plan's ({in_flight.describe()}): "
                f"refusing to start {label}; wait for whoever owns it to finish, then run again",
                Refusal.FOREIGN_REASSIGNMENT,
            )
    foreign = [
        tp
        for tp in in_flight.topic_znode_partitions
        if tp not in planned or topics[tp[0]].target_replicas(tp[1]) != planned[tp]
    ]
    if foreign:
        names = ", ".join(f"{t}-{p}" for t, p in foreign[:10])
        return Step(
            Action.REFUSE,
            position,
            f"topic znodes show adding/removing replicas for {names} (a reassignment started through "
            f"the Admin API or by another tool): refusing to start {label}",
            Refusal.FOREIGN_REASSIGNMENT,
        )
    ours_moving = set(in_flight.topic_znode_partitions) & set(targets)
    outdated = []
    for move in batch:
        tp = (move.topic, move.partition)
        if tp not in found.moving or tp in ours_moving:
            continue
        topic = topics.get(tp[0])
        now = None if topic is None else topic.partitions.get(tp[1])
        if now is None or tuple(now) != tuple(move.current):
            outdated.append(
                f"{tp[0]}-{tp[1]} planned from {list(move.current)}, now {None if now is None else list(now)}"
            )
    if outdated:
        return Step(
            Action.REFUSE,
            position,
            f"{label}: ZooKeeper no longer shows the assignment the plan was made from: "
            + "; ".join(outdated[:10])
            + ". Make a new plan.",
            Refusal.PLAN_OUTDATED,
        )
    if ours_moving:
        return Step(Action.WAIT, position, f"{label}: already moving (adding/removing replicas are ours)")
    return Step(Action.SUBMIT, position, f"{label}: can be submitted when its turn comes")


def batch_throttles(batch: Batch, rate: int) -> ThrottlePlan:
    """The throttles ``kafka-reassign-partitions`` sets for ``batch``, from the plan alone.

    A batch is only submitted while every partition still to move sits where the plan found it
    and no other reassignment runs (:func:`next_step` refuses otherwise), so its sources are the
    plan's ``current`` replicas: the values are known before the run's first write, and the dry
    run shows exactly what a real run writes. (Partitions of the batch already moved, which the
    controller would not need throttled, are throttled too: harmless, and cleared with the rest.)

    :param batch: the batch's moves.
    :param rate: bytes/s (positive).
    """
    topics: dict[str, TopicAssignment] = {}
    for m in batch:
        known = topics.get(m.topic)
        partitions = {**(known.partitions if known else {}), m.partition: tuple(m.current)}
        topics[m.topic] = TopicAssignment(m.topic, partitions)
    return plan_throttles(targets_of(batch), topics, rate)


def drain_steps(
    batches: Sequence[Batch],
    rate: int,
    incarnations: Mapping[str, tuple[str | None, int | None]] | None = None,
) -> list[executor_steps.Step]:
    """A drain plan (or a move-back written as one) as the step executor's typed steps.

    Per batch, in order: one :class:`~.steps.ThrottleSet` per throttled entity (topics, then
    brokers; applied together), then the :class:`~.steps.DrainBatch` that creates the reassign
    znode and waits. Ids are stable for a plan (``batch-<n>``, ``batch-<n>:throttle:<type>/<name>``):
    progress is recorded per id and a resumed run continues after the last completed one.

    :param batches: the plan's batches.
    :param rate: the throttle in bytes/s (positive).
    :param incarnations: topic -> (topic id, czxid) the plan read (``plan.json``'s ``topics``);
        a topic missing from it is not pinned to an incarnation.
    """
    out: list[executor_steps.Step] = []
    known = incarnations or {}
    for index, batch in enumerate(batches):
        batch_id = f"batch-{index + 1}"
        throttles = batch_throttles(batch, rate)
        entities = [("topics", t, c) for t, c in throttles.topic_configs().items()]
        entities += [("brokers", str(b), c) for b, c in throttles.broker_configs().items()]
        for entity_type, name, config in entities:
            out.append(
                executor_steps.ThrottleSet(
                    id=f"{batch_id}:throttle:{entity_type}/{name}",
                    entity_type=entity_type,
                    entity_name=name,
                    keys=tuple(sorted(config.items())),
                    batch_step=batch_id,
                )
            )
        moves = []
        for m in batch:
            topic_id, czxid = known.get(m.topic, (None, None))
            moves.append(
                executor_steps.PartitionMove(
                    m.topic, m.partition, tuple(m.current), tuple(m.target), topic_id, czxid, m.size_bytes
                )
            )
        out.append(
            executor_steps.DrainBatch(id=batch_id, batch=index, batches=len(batches), moves=tuple(moves))
        )
    return out


def batch_of(step: executor_steps.DrainBatch) -> tuple[Move, ...]:
    """A :class:`~.steps.DrainBatch`'s moves as the decisions here take them."""
    return tuple(
        Move(m.topic, m.partition, m.replicas_before, m.replicas_after, m.size_bytes) for m in step.moves
    )


def after_lost_create(
    batches: Sequence[Batch], position: int, now: ReassignPartitions | None, where: str = REASSIGN_PARTITIONS
) -> Step:
    """The create of our reassign znode found one there (created between our check and our create).

    Ours after all (a concurrent try of this run) -> WAIT; anything else, or gone again -> REFUSE:
    the run no longer knows what moves, so it stops rather than create a second time.

    :param batches: the plan's batches.
    :param position: the batch that was being submitted.
    :param now: the reassign znode read right after the failed create (None: gone again).
    :param where: how messages name the znode.
    """
    label = batch_label(position, len(batches))
    if now is not None and same_request(now, targets_of(batches[position])):
        return Step(Action.WAIT, position, f"{label}: {where} appeared meanwhile and is ours: waiting")
    return Step(
        Action.REFUSE,
        position,
        f"{where} was created by someone else between our check and our create: refusing to continue",
        Refusal.FOREIGN_REASSIGNMENT,
    )


def after_wait(event: Mapping[str, Any], *, batch_timeout: float, batch: int | None = None) -> Step:
    """The wait for a batch ended (the trigger's event): continue with the next batch, or refuse.

    A timeout leaves the reassignment running and the lease with the run (a re-run keeps waiting);
    it is not retried automatically because only a person can tell whether to wait longer.

    :param event: the trigger's event: ``status`` (``complete``/``timeout``/other), ``message``,
        ``echo.batch`` (the batch index the wait was for).
    :param batch_timeout: the deadline the wait had, in seconds (for the message).
    :param batch: the batch index when the event does not echo one (default 0).
    """
    index = int(event.get("echo", {}).get("batch", batch if batch is not None else 0))
    status = event.get("status")
    if status == "timeout":
        return Step(
            Action.REFUSE,
            index,
            f"batch {index + 1} not complete after {float(batch_timeout):g}s: {event.get('message')}; "
            "the reassignment keeps running, throttled, and the maintenance lease stays with this run. "
            "Re-run this task to keep waiting; the clear_throttles step removes this run's throttles "
            "once nothing of the plan moves.",
            Refusal.WAIT_TIMED_OUT,
        )
    if status != "complete":
        return Step(
            Action.REFUSE,
            index,
            f"could not follow batch {index + 1}: {event.get('message')}.",
            Refusal.WAIT_FAILED,
        )
    return Step(Action.CONTINUE, index, f"Batch {index + 1} complete: {event.get('message')}")


def clear_step(batches: Sequence[Batch], observed: Observed, *, force: bool = False) -> Step:
    """Whether the clear step may remove the throttles this run recorded, now.

    It runs whatever happened before it (a refusal, a timeout, a failed wait). A partition of the
    plan still in flight (in the reassign znode, or adding/removing in its topic znode) -> REFUSE
    unless ``force``: the throttles still hold it back, so they and the lease stay with the run;
    else CLEAR. A run that recorded no throttles has nothing to clear and does not ask.

    :param batches: the plan's batches (all of them: any of its partitions may still move).
    :param observed: ZooKeeper now (every topic znode and the reassign znode).
    :param force: clear even while partitions of the plan move.
    """
    planned = {tp for batch in batches for tp in targets_of(batch)}
    in_flight = reassignments_in_flight(observed.topics.values(), observed.reassign)
    moving = [tp for tp in in_flight.znode_partitions + in_flight.topic_znode_partitions if tp in planned]
    if moving and not force:
        names = ", ".join(sorted({f"{t}-{p}" for t, p in moving}))
        return Step(
            Action.REFUSE,
            None,
            f"partitions of this drain are still moving ({names}): throttles left in place and the "
            "maintenance lease kept. Re-run this task once they finished (or set force).",
            Refusal.STILL_MOVING,
        )
    return Step(Action.CLEAR, None, "removing the throttles this run set (where they still hold its values)")


def unrestored_moves(batches: Sequence[Batch], saved: Mapping[TopicPartition, Sequence[int]]) -> list[str]:
    """The planned moves a rollback (partition -> replicas before) does not undo, as ``topic-p``.

    Before the first change the execute step refuses unless this is empty.
    """
    return [
        f"{m.topic}-{m.partition}"
        for batch in batches
        for m in batch
        if (before := saved.get((m.topic, m.partition))) is None or list(before) != list(m.current)
    ]


def replaced_values(
    previous: Mapping[str, str], written: Mapping[str, str], ours_before: Mapping[str, str]
) -> dict[str, str]:
    """Throttle values of someone else that a write of ``written`` replaced (to record, and warn about).

    A key whose old value was ours (an earlier batch of this run) or already the new value is not.

    :param previous: the entity's config before the write.
    :param written: the keys and values written.
    :param ours_before: the values this run had recorded for the entity before the write.
    """
    return {
        k: previous[k]
        for k in written
        if k in previous and previous[k] != written[k] and previous[k] != ours_before.get(k)
    }


@dataclass(frozen=True)
class Verification:
    """What the verify step found; ``ok`` when ``problems`` is empty.

    :param problems: what is wrong, one sentence each, in the order found.
    :param moved: per planned move: ``partition``, ``target``, ``replicas`` now, and ``leader``
        and ``isr`` where the state znode exists.
    :param left_on_drained: partitions in scope still on a drained broker, with the plan's reason
        (or ``not in the plan``).
    """

    problems: tuple[str, ...]
    moved: tuple[dict[str, Any], ...]
    left_on_drained: tuple[dict[str, Any], ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_outcome(
    batches: Sequence[Batch],
    *,
    drained: frozenset[int],
    scope: str,
    excluded_topics: frozenset[str],
    known_left: Mapping[TopicPartition, str],
    topics: Mapping[str, TopicAssignment],
    states: Mapping[TopicPartition, PartitionState],
    inventory: Mapping[int, set[TopicPartition]] | None = None,
    throttles_left: Mapping[str, Sequence[str]] | None = None,
) -> Verification:
    """Whether the drain did what its plan promised, from ZooKeeper (and the disks, if inventoried).

    A problem is: a partition in scope still on a drained broker that the plan did not list as
    left behind; a moved partition not on its target, without a leader among it, or without the
    full target in its ISR; with an inventory, a moved partition's data still on a broker it left,
    or missing on (or not inventoried for) a broker it went to; a throttle of this run still set.

    :param batches: the plan's batches.
    :param drained: the brokers the plan drained.
    :param scope: the plan's scope (``rf1``: only single-replica partitions count as left behind).
    :param excluded_topics: topics the plan was told to leave alone.
    :param known_left: partitions the plan listed as unmovable, unsatisfiable or excluded, with why.
    :param topics: every topic znode now, by name.
    :param states: the state znodes of the moved partitions that exist.
    :param inventory: normal partition directories per broker after the drain; None: disks not checked.
    :param throttles_left: per ``<type>/<name>`` entity, this run's throttle keys still set.
    """
    problems: list[str] = []
    remaining = [
        (topic.topic, p)
        for topic in topics.values()
        if topic.topic not in excluded_topics
        for p, replicas in topic.partitions.items()
        if not drained.isdisjoint(replicas) and not (scope == "rf1" and len(replicas) != 1)
    ]
    for t, p in remaining:
        if (t, p) not in known_left:
            problems.append(
                f"{t}-{p} is still on drained broker(s) {sorted(drained & set(topics[t].partitions[p]))}"
            )
    moves = [m for batch in batches for m in batch]
    checked = []
    for m in moves:
        tp = (m.topic, m.partition)
        target = list(m.target)
        topic = topics.get(m.topic)
        now = None if topic is None else topic.partitions.get(m.partition)
        state = states.get(tp)
        entry: dict[str, Any] = {"partition": f"{m.topic}-{m.partition}", "target": target, "replicas": now}
        if now is None or list(now) != target:
            problems.append(f"{m.topic}-{m.partition}: replicas {now}, planned {target}")
        elif state is None or state.leader == NO_LEADER or state.leader not in target:
            problems.append(
                f"{m.topic}-{m.partition}: no leader among {target} ({None if state is None else state.leader})"
            )
        elif set(state.isr) != set(target):
            problems.append(
                f"{m.topic}-{m.partition}: ISR {list(state.isr)} is not the full replica set {target}"
            )
        if state is not None:
            entry.update(leader=state.leader, isr=list(state.isr))
        checked.append(entry)
    if inventory is not None:
        for m in moves:
            tp = (m.topic, m.partition)
            for b in set(m.current) - set(m.target):
                if b in inventory and tp in inventory[b]:
                    problems.append(f"{m.topic}-{m.partition}: data directory still on broker {b}")
            for b in set(m.target) - set(m.current):
                if b not in inventory:
                    problems.append(
                        f"{m.topic}-{m.partition}: broker {b} was not inventoried after the drain"
                    )
                elif tp not in inventory[b]:
                    problems.append(f"{m.topic}-{m.partition}: no data directory on target broker {b}")
    if throttles_left:
        problems.append(f"throttles this run set are still in place: {dict(throttles_left)}")
    left = tuple(
        {"partition": f"{t}-{p}", "reason": known_left.get((t, p), "not in the plan")} for t, p in remaining
    )
    return Verification(tuple(problems), tuple(checked), left)


__all__ = [
    "Action",
    "Batch",
    "Observed",
    "Refusal",
    "Step",
    "Submission",
    "Verification",
    "after_lost_create",
    "after_wait",
    "batch_label",
    "batch_of",
    "batch_throttles",
    "clear_step",
    "drain_steps",
    "next_step",
    "plan_from_state",
    "preflight_batch",
    "replaced_values",
    "targets_of",
    "unrestored_moves",
    "verify_outcome",
]
