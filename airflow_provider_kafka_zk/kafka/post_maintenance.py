"""After maintenance, decided without I/O: is the cluster healthy enough to continue, and which of a
drain's moves can be undone.

A drain moved partitions off brokers (its ``plan.json`` lists ``current`` -> ``target`` per
partition and each moved topic's incarnation, its ``rollback.json`` the assignment before). Moving
one back is safe only while the partition is still exactly where the drain put it, *in the topic the
drain moved*: anything moved since (another reassignment, a person) is reported and left alone,
never "restored" over someone else's change; a topic deleted and created again under the same name
(another czxid, another topic id) is not the drain's, whatever its layout; and nothing goes back
onto a broker that is not registered (a replica there never joins the ISR: the move-back would never
complete).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .drain import Move
from .model import ClusterState
from .steps import ElectionRequest

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class DrainedMove:
    """One partition a drain moved: where it was (``original``) and where the drain put it.

    ``topic_id`` / ``topic_czxid``: the topic the drain moved (its id, None when its znode had none;
    its znode's creation zxid, None when the drain's records do not say).
    """

    topic: str
    partition: int
    original: tuple[int, ...]
    drained_to: tuple[int, ...]
    size_bytes: int = 0
    topic_id: str | None = None
    topic_czxid: int | None = None


def not_the_drained_topic(move: DrainedMove, now: tuple[str | None, int] | None) -> str | None:
    """Why the topic named like the drained one is not the topic the drain moved (None: it is).

    Identified by topic id where both have one, and by the znode's creation zxid (its incarnation)
    always: a topic deleted and created again gets a new czxid (and, on 2.8+, a new id). The same
    czxid with another id is a topicId repair (or an old tool) rewriting the id: not provably the
    drained topic's data either, so it is left alone too.

    :param now: (topic id, czxid) of the topic znode now (None: no such topic).
    """
    if now is None:
        return None  # the partition is gone: reported as such
    topic_id, czxid = now
    if move.topic_czxid is not None and czxid != move.topic_czxid:
        ids = (
            f", topic id {move.topic_id or 'none'} -> {topic_id or 'none'}"
            if move.topic_id or topic_id
            else ""
        )
        return (
            f"topic {move.topic} was deleted and created again since the drain (znode czxid "
            f"{move.topic_czxid:#x} -> {czxid:#x}{ids}): not the partition the drain moved; left where it is"
        )
    if move.topic_id is not None and topic_id is not None and topic_id != move.topic_id:
        return (
            f"topic {move.topic}'s id changed since the drain ({move.topic_id} -> {topic_id}, same znode "
            f"czxid {czxid:#x}: a topicId repair?): not provably the partition the drain moved; left where it is"
        )
    return None


@dataclass(frozen=True)
class Untouched:
    """A drained partition not moved back, with why; ``rule`` names the reason as a refusal would
    (``partition-gone``, ``topic-recreated``, ``reassignment-in-flight``, ``partition-moved-since``,
    ``replica-count-changed``, ``broker-not-registered``)."""

    topic: str
    partition: int
    reason: str
    rule: str = ""

    def describe(self) -> str:
        return f"{self.topic}-{self.partition}: {self.reason}"


@dataclass(frozen=True)
class MoveBackPlan:
    moves: tuple[Move, ...]  # current = where the drain put it, target = where it was before
    already_back: tuple[PartitionKey, ...]
    untouched: tuple[Untouched, ...]  # moved since, gone, or still moving: reported, not touched


def plan_move_back(
    drained: Iterable[DrainedMove],
    current: Mapping[PartitionKey, tuple[int, ...]],
    *,
    reassigning: Collection[PartitionKey] = (),
    sizes: Mapping[PartitionKey, int] | None = None,
    topics: Mapping[str, tuple[str | None, int]] | None = None,
    registered: Collection[int] | None = None,
) -> MoveBackPlan:
    """The moves that put each drained partition back, for those still where the drain put them.

    :param drained: the drain's moves (from its plan and rollback artefacts).
    :param current: every partition's assignment in ZooKeeper now (target replicas).
    :param reassigning: partitions with a reassignment in flight now (never touched).
    :param sizes: current partition sizes in bytes (else the drain's sizes are used).
    :param topics: topic -> (topic id, czxid) now: a partition of a topic that is not the drained
        one (:func:`not_the_drained_topic`) is left alone (None: not compared -- by name only).
    :param registered: the brokers registered in ``/brokers/ids`` now: nothing goes back onto
        another one (None: not checked).
    """
    moves, back, untouched = [], [], []
    for d in sorted(drained, key=lambda m: (m.topic, m.partition)):
        key = (d.topic, d.partition)
        now = current.get(key)
        other = None if topics is None else not_the_drained_topic(d, topics.get(d.topic))
        down = [] if registered is None else sorted(set(d.original) - set(registered))
        if now is None:
            untouched.append(
                Untouched(d.topic, d.partition, "the partition no longer exists", "partition-gone")
            )
        elif other is not None:
            untouched.append(Untouched(d.topic, d.partition, other, "topic-recreated"))
        elif key in reassigning:
            untouched.append(
                Untouched(
                    d.topic,
                    d.partition,
                    f"a reassignment of it is in flight (now {list(now)})",
                    "reassignment-in-flight",
                )
            )
        elif tuple(now) == tuple(d.original):
            back.append(key)
        elif tuple(now) != tuple(d.drained_to):
            untouched.append(
                Untouched(
                    d.topic,
                    d.partition,
                    f"moved since the drain: the drain put it on {list(d.drained_to)}, it is on {list(now)} "
                    f"now (before the drain: {list(d.original)}); left where it is",
                    "partition-moved-since",
                )
            )
        elif len(d.original) != len(now):
            untouched.append(
                Untouched(
                    d.topic,
                    d.partition,
                    f"replica count differs: {list(d.original)} before, {list(now)} now; left where it is",
                    "replica-count-changed",
                )
            )
        elif down:
            untouched.append(
                Untouched(
                    d.topic,
                    d.partition,
                    f"broker(s) {down} not registered in /brokers/ids (still down?): not moved back onto "
                    f"{list(d.original)}; run post-maintenance again once {'it is' if len(down) == 1 else 'they are'} "
                    "back",
                    "broker-not-registered",
                )
            )
        else:
            size = (sizes or {}).get(key, d.size_bytes)
            moves.append(Move(d.topic, d.partition, tuple(now), tuple(d.original), int(size)))
    return MoveBackPlan(tuple(moves), tuple(back), tuple(untouched))


def batch_moves(
    moves: Sequence[Move], *, max_partitions: int, max_bytes: int | None = None
) -> list[tuple[Move, ...]]:
    """Consecutive batches bounded by partitions and bytes (one oversize partition goes alone)."""
    if max_partitions < 1 or (max_bytes is not None and max_bytes < 1):
        raise ValueError("batch limits must be positive")
    batches: list[tuple[Move, ...]] = []
    current: list[Move] = []
    size = 0
    for move in moves:
        if current and (
            len(current) >= max_partitions or (max_bytes is not None and size + move.size_bytes > max_bytes)
        ):
            batches.append(tuple(current))
            current, size = [], 0
        current.append(move)
        size += move.size_bytes
    if current:
        batches.append(tuple(current))
    return batches


# ---------------------------------------------------------------------------------------------
# Health gate
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthGate:
    missing_brokers: tuple[int, ...]
    offline: tuple[PartitionKey, ...]
    under_replicated: tuple[PartitionKey, ...]
    baseline_under_replicated: int

    @property
    def problems(self) -> list[str]:
        out = []
        if self.missing_brokers:
            out.append(
                f"broker(s) {list(self.missing_brokers)} not registered in /brokers/ids (not running?)"
            )
        if self.offline:
            out.append(f"{len(self.offline)} partition(s) without a live leader: {_names(self.offline)}")
        if len(self.under_replicated) > self.baseline_under_replicated:
            out.append(
                f"{len(self.under_replicated)} under-replicated partition(s), {self.baseline_under_replicated} "
                f"before the maintenance: {_names(self.under_replicated)}"
            )
        return out

    @property
    def passed(self) -> bool:
        return not self.problems


def health_gate(state: ClusterState, returning: Iterable[int], baseline_under_replicated: int) -> HealthGate:
    """Whether the cluster is back in shape to put partitions and leaders back.

    :param returning: brokers that must be registered again (the ones the maintenance stopped).
    :param baseline_under_replicated: under-replicated partitions before the maintenance.
    """
    live = state.live_broker_ids
    offline, urp = [], []
    for info in state.partitions():
        if info.topic in state.pending_deletions:
            continue  # a topic being deleted has leader -1 by design
        if info.is_offline(live):
            offline.append((info.topic, info.partition))
        elif info.under_replicated:
            urp.append((info.topic, info.partition))
    return HealthGate(
        tuple(sorted(set(returning) - live)), tuple(offline), tuple(urp), int(baseline_under_replicated)
    )


def count_under_replicated(state: ClusterState) -> int:
    """The baseline a gate compares with: under-replicated partitions (online ones; offline is its own test)."""
    live = state.live_broker_ids
    return sum(
        1
        for info in state.partitions()
        if info.topic not in state.pending_deletions and not info.is_offline(live) and info.under_replicated
    )


def _names(keys: Sequence[PartitionKey]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in keys[:10])
    return shown + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")


def move_back_from_state(
    drained: Iterable[DrainedMove], state: ClusterState, *, sizes: Mapping[PartitionKey, int] | None = None
) -> MoveBackPlan:
    """:func:`plan_move_back` against a snapshot's model: every partition's target replicas, the
    reassignments in flight (topic znodes and ``/admin/reassign_partitions``), each topic's
    incarnation (id, czxid) and the registered brokers."""
    current = {(p.topic, p.partition): p.target_replicas or p.replicas for p in state.partitions()}
    reassigning = {(p.topic, p.partition) for p in state.partitions() if p.is_reassigning}
    if state.reassign_partitions is not None:
        reassigning |= {(e.topic, e.partition) for e in state.reassign_partitions.partitions}
    return plan_move_back(
        drained,
        current,
        reassigning=reassigning,
        sizes=sizes,
        topics={
            name: (None if t.topic_id is None else str(t.topic_id), t.czxid)
            for name, t in state.topics.items()
        },
        registered=state.live_broker_ids,
    )


# ---------------------------------------------------------------------------------------------
# What a person reads
# ---------------------------------------------------------------------------------------------


def plan_summary(document: Mapping[str, Any], moves: int) -> str:
    """``summary.txt`` of a post-maintenance plan (its ``plan.json`` document), for a person to read."""
    lines = [f"Post-maintenance plan for {document['cluster']}; snapshot {document['snapshot']}"]
    if document["restores"]:
        lines.append(f"restores drain run {document['restores']} (run id {document['restores_run_id']})")
    gate = document["gate"]
    lines.append(
        f"health gate: {'passed' if gate['passed'] else 'FAILED'} (returning brokers "
        f"{document['returning_brokers']}; under-replicated baseline {gate['baseline_under_replicated']}, "
        f"from {gate['baseline_from']})"
    )
    lines += [f"  - {p}" for p in gate["problems"]]
    back = document["move_back"]
    if back["requested"]:
        lines.append(f"move back: {moves} partition(s) in {len(document['batches'])} batch(es)")
        for batch in document["batches"]:
            lines += [f"  {m['topic']}-{m['partition']}: {m['current']} -> {m['target']}" for m in batch]
        if back["already_back"]:
            lines.append(f"already where they were before the drain: {', '.join(back['already_back'])}")
        if back["untouched"]:
            lines.append("left alone (reported, not moved):")
            lines += [f"  - {u}" for u in back["untouched"]]
    else:
        lines.append("move back: not requested")
    preview = document["election_preview"]
    lines.append(
        f"preferred leader election for brokers {preview['brokers']}: "
        f"{len(preview['electable_now'])} partition(s) electable now (the election recomputes after the move-back)"
    )
    lines += [f"  - not electable: {n}" for n in preview["not_electable_now"][:10]]
    return "\n".join(lines)


def report_text(result: Mapping[str, Any]) -> str:
    """``report.txt`` of a post-maintenance run from its ``verify.json`` result."""
    lines = [f"Post-maintenance of {result['plan_dir']}"]
    if result["restores"]:
        lines.append(f"restores drain run {result['restores']} (run id {result['restores_run_id']})")
    lines.append(f"returning brokers: {result['returning_brokers']}")
    lines.append(
        f"moved back: {result['moved_back'] - len(result['not_back'])} of {result['moved_back']} partition(s)"
    )
    lines += [f"  - not back: {n}" for n in result["not_back"]]
    if result["untouched"]:
        lines.append("left alone (moved since the drain, gone or moving):")
        lines += [f"  - {u}" for u in result["untouched"]]
    lines.append(result.get("election_line") or f"preferred leaders elected: {len(result['elected'])}")
    lines += [f"  - not moved: {n}" for n in result["not_moved"]]
    if result["problems"]:
        lines.append("NOT DONE:")
        lines += [f"  - {p}" for p in result["problems"]]
    else:
        lines.append(
            "verified: partitions back in place with full ISRs, no leader imbalance on the returning brokers, "
            "no replication throttle left"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The preferred leader election as the step executor's steps
# ---------------------------------------------------------------------------------------------


def election_steps(
    electable: Sequence[tuple[str, int]],
    preferred: Mapping[tuple[str, int], int],
    *,
    requested: Collection[tuple[str, int]] = (),
    max_partitions: int,
    max_bytes: int,
    first: int = 1,
) -> list[ElectionRequest]:
    """The election of ``electable`` partitions not requested before, as
    :class:`~.steps.ElectionRequest` steps (``election-<n>``, numbered on from ``first``), each one
    ``/admin/preferred_replica_election`` within both limits (:func:`~.leadership.election_batches`).

    :param electable: partitions an election would move now (:func:`~.leadership.choose_election`).
    :param preferred: each partition's preferred replica (the first of its replicas).
    :param requested: partitions this run requested already (never requested twice).
    """
    from .leadership import election_batches

    asked = {(str(t), int(p)) for t, p in requested}
    todo = [tp for tp in electable if (tp[0], tp[1]) not in asked]
    if not todo:
        return []
    batches = election_batches(todo, max_partitions=max_partitions, max_bytes=max_bytes)  # type: ignore[arg-type]
    return [
        ElectionRequest(
            id=f"election-{first + n}",
            partitions=tuple((t, int(p), int(preferred[(t, p)])) for t, p in batch),
        )
        for n, batch in enumerate(batches)
    ]
