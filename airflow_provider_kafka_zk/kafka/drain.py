"""Planner for draining brokers before maintenance: move their replicas elsewhere, balanced.

Stopping a broker that holds the only replica of a partition takes that partition offline until the
broker returns. The plan moves only the replicas that sit on the drained brokers (RF=1 partitions by
default, every replica with ``scope="all"``) to live brokers outside the drained set: never two
replicas of a partition on one broker, racks kept distinct when they were, the moved replica taking
the drained one's place in the preference order, destinations chosen largest partition first onto
the destination with the least bytes added so far (then the fewest partitions added). Whatever
cannot be planned is reported with its reason, never dropped: also a topic znode the model could
not take (a name Kafka refuses, data that does not decode), which may hold data on a drained broker.
Rack awareness is reported as it was applied, not as it was asked for: it is off (with the reason)
unless every broker involved has a rack.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from . import znodes as zk
from .model import ModelFinding, ModelFindingKind

Scope = Literal["rf1", "all"]
TopicPartition = tuple[str, int]
UnplannedTopicReason = Literal["invalid_topic_name", "undecodable_topic_znode"]
INVALID_TOPIC_NAME: UnplannedTopicReason = "invalid_topic_name"
UNDECODABLE_TOPIC_ZNODE: UnplannedTopicReason = "undecodable_topic_znode"


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    rack: str | None = None
    live: bool = True


@dataclass(frozen=True)
class DrainRequest:
    """What the operator asked for (validated: brokers must exist, limits positive)."""

    brokers: frozenset[int]
    scope: Scope = "rf1"
    excluded_topics: frozenset[str] = frozenset()
    max_partitions_per_batch: int = 500
    max_bytes_per_batch: int | None = None
    rack_aware: bool = True

    def __post_init__(self) -> None:
        if not self.brokers:
            raise ValueError("name at least one broker to drain")
        if self.scope not in ("rf1", "all"):
            raise ValueError(f"scope must be 'rf1' or 'all', not {self.scope!r}")
        if self.max_partitions_per_batch < 1:
            raise ValueError("max_partitions_per_batch must be at least 1")
        if self.max_bytes_per_batch is not None and self.max_bytes_per_batch < 1:
            raise ValueError("max_bytes_per_batch must be positive")


@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    size_bytes: int

    @property
    def sources(self) -> tuple[int, ...]:
        return tuple(b for b in self.current if b not in self.target)

    @property
    def destinations(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.current)


@dataclass(frozen=True)
class Unplanned:
    """A partition in scope that the plan does not move, and why (the operator must see these)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class UnreadableTopic:
    """A topic znode the cluster model could not take, as the planner's input.

    ``reason`` is ``invalid_topic_name`` (a name Kafka refuses, e.g. a znode written into
    ZooKeeper by hand) or ``undecodable_topic_znode``; ``message`` is the decoder's. ``assignment``
    (partition -> replicas) when the data still decodes, else None: then nobody can tell where its
    replicas are.
    """

    topic: str
    reason: UnplannedTopicReason
    message: str
    assignment: Mapping[int, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class UnplannedTopic:
    """A whole topic the plan cannot handle (see :class:`UnreadableTopic`), as the plan reports it.

    ``touches_drained``: some replica is on a drained broker (None: unknown). ``partitions``: its
    partitions in the request's scope on the drained brokers (None: unknown). ``excluded``: the
    request excludes the topic by name.
    """

    topic: str
    reason: UnplannedTopicReason
    message: str
    touches_drained: bool | None
    partitions: tuple[int, ...] | None
    excluded: bool = False

    @property
    def blocks_completion(self) -> bool:
        """May leave data in scope on a drained broker (or nobody can tell): the plan is not complete."""
        return not self.excluded and (self.partitions is None or bool(self.partitions))

    @property
    def topic_repr(self) -> str:
        """The name escaped for a report (it may hold blanks, control or non-ASCII characters)."""
        return repr(self.topic)


@dataclass(frozen=True)
class DrainPlan:
    request: DrainRequest
    batches: tuple[tuple[Move, ...], ...]
    unmovable: tuple[Unplanned, ...]
    unsatisfiable: tuple[Unplanned, ...]
    excluded: tuple[Unplanned, ...]
    added_bytes: Mapping[int, int] = field(default_factory=dict)
    added_partitions: Mapping[int, int] = field(default_factory=dict)
    unknown_sizes: int = 0
    unplanned_topics: tuple[UnplannedTopic, ...] = ()
    rack_aware: bool = False
    """Whether placement really kept racks distinct (``request.rack_aware`` is what was asked)."""
    rack_aware_reason: str = ""

    @property
    def moves(self) -> tuple[Move, ...]:
        return tuple(m for batch in self.batches for m in batch)

    @property
    def complete(self) -> bool:
        """True when every partition in scope gets moved: nothing unmovable or unsatisfiable, and no
        unreadable topic that may have a partition in scope on a drained broker."""
        return (
            not self.unmovable
            and not self.unsatisfiable
            and not any(t.blocks_completion for t in self.unplanned_topics)
        )

    @property
    def balance_ratio(self) -> float | None:
        """max/min bytes added over the destinations that received anything (1.0 = perfect)."""
        used = [b for b in self.added_bytes.values() if b > 0]
        if not used:
            return None
        return max(used) / min(used)

    def reassignment_json(self, batch: int | None = None) -> dict:
        """Kafka's ``--reassignment-json-file`` format (with ``log_dirs`` "any"), one batch or all."""
        moves = self.moves if batch is None else self.batches[batch]
        return _tool_json((m.topic, m.partition, m.target) for m in moves)

    def rollback_json(self) -> dict:
        """The current assignment of every moved partition: applying it undoes the plan."""
        return _tool_json((m.topic, m.partition, m.current) for m in self.moves)

    def summary(self) -> str:
        req = self.request
        lines = [
            f"Drain brokers {sorted(req.brokers)} (scope {req.scope}): {len(self.moves)} partition(s) "
            f"to move in {len(self.batches)} batch(es), "
            f"{human_bytes(sum(m.size_bytes for m in self.moves))}",
        ]
        destinations = sorted(b for b, n in self.added_partitions.items() if n)
        if destinations:
            ratio = self.balance_ratio
            balance = f"; bytes added max/min = {ratio:.3f}" if ratio else "; no sizes known"
            lines.append(f"  destinations: {len(destinations)} broker(s){balance}")
            lines += [
                f"    broker {b}: +{self.added_partitions[b]} partitions, +{human_bytes(self.added_bytes[b])}"
                for b in destinations
            ]
        else:
            lines.append("  destinations: none")
        if self.rack_aware:
            lines.append(f"  rack-aware placement: yes ({self.rack_aware_reason})")
        else:
            asked = " (requested, but off)" if req.rack_aware else ""
            lines.append(f"  rack-aware placement: NO{asked}: {self.rack_aware_reason}")
        if self.unknown_sizes:
            lines.append(
                f"  WARNING: no size known for {self.unknown_sizes} partition(s); counted as 0 bytes"
            )
        if self.unplanned_topics:
            lines.append(
                f"  NOT PLANNED (topic znode the model cannot read): {len(self.unplanned_topics)} topic(s)"
            )
            lines += [f"    {_describe_unplanned(t)}" for t in self.unplanned_topics[:50]]
            if len(self.unplanned_topics) > 50:
                lines.append(f"    ... and {len(self.unplanned_topics) - 50} more")
        for title, items in (
            ("CANNOT MOVE (data only on a broker that is down)", self.unmovable),
            ("UNSATISFIABLE", self.unsatisfiable),
            ("excluded by request", self.excluded),
        ):
            if items:
                lines.append(f"  {title}: {len(items)}")
                lines += [f"    {u.topic}-{u.partition} {list(u.replicas)}: {u.reason}" for u in items[:50]]
                if len(items) > 50:
                    lines.append(f"    ... and {len(items) - 50} more")
        return "\n".join(lines)


def in_drain_scope(replicas: Sequence[int], brokers: frozenset[int], scope: str) -> bool:
    """Whether a drain of ``brokers`` in ``scope`` must move a partition with ``replicas``: one on
    a drained broker and, for ``rf1``, its only replica. The planner's rule; a planning read uses it
    to fetch only the partition states (ISR) the planner will look at.

    :param replicas: the partition's replicas.
    :param brokers: the drained brokers.
    :param scope: ``rf1`` or ``all``.
    """
    return not brokers.isdisjoint(replicas) and (scope != "rf1" or len(replicas) == 1)


def plan_drain(
    assignment: Mapping[TopicPartition, Sequence[int]],
    brokers: Mapping[int, BrokerInfo],
    request: DrainRequest,
    *,
    sizes: Mapping[TopicPartition, int] | None = None,
    isr: Mapping[TopicPartition, Sequence[int]] | None = None,
    unreadable_topics: Iterable[UnreadableTopic] = (),
) -> DrainPlan:
    """Plan the moves. ``isr`` (default: replicas) decides where a live copy of the data exists.

    ``unreadable_topics`` (see :func:`unreadable_topics`) are reported as ``unplanned_topics``;
    one that may have a partition in scope on a drained broker makes the plan incomplete.
    """
    unknown = sorted(b for b in request.brokers if b not in brokers)
    if unknown:
        raise ValueError(f"brokers {unknown} are not in the cluster")
    sizes = sizes or {}
    drained = request.brokers
    destinations = sorted(b for b, info in brokers.items() if info.live and b not in drained)
    racks = {b: info.rack for b, info in brokers.items()}

    in_scope: list[tuple[TopicPartition, tuple[int, ...]]] = []
    excluded: list[Unplanned] = []
    unmovable: list[Unplanned] = []
    for tp, replicas in assignment.items():
        replicas = tuple(replicas)
        if not in_drain_scope(replicas, drained, request.scope):
            continue
        if tp[0] in request.excluded_topics:
            excluded.append(Unplanned(tp[0], tp[1], replicas, "topic excluded"))
            continue
        holders = [
            b
            for b in (isr.get(tp, replicas) if isr else replicas)
            if brokers.get(b, BrokerInfo(b, live=False)).live
        ]
        if not holders:
            unmovable.append(
                Unplanned(
                    tp[0],
                    tp[1],
                    replicas,
                    "no live in-sync replica holds the data: bring its broker back first",
                )
            )
            continue
        in_scope.append((tp, replicas))

    rack_aware, rack_aware_reason = _rack_awareness(request, brokers, destinations, in_scope)
    racks_known = rack_aware
    # Largest first onto the least-loaded destination (LPT): near-perfect balance in O(n log b).
    in_scope.sort(key=lambda item: (-sizes.get(item[0], 0), item[0]))
    load = {b: [0, 0] for b in destinations}  # bytes added, partitions added
    heap = [(0, 0, b) for b in destinations]
    heapq.heapify(heap)
    moves: list[Move] = []
    unsatisfiable: list[Unplanned] = []
    for tp, replicas in in_scope:
        size = sizes.get(tp, 0)
        target, reason = _place(tp, replicas, drained, heap, load, racks if racks_known else None)
        if target is None:
            unsatisfiable.append(Unplanned(tp[0], tp[1], replicas, reason))
            continue
        moves.append(Move(tp[0], tp[1], replicas, target, size))
        for b in target:
            if b not in replicas:
                load[b][0] += size
                load[b][1] += 1
                heapq.heappush(heap, (load[b][0], load[b][1], b))

    moves = _even_out_counts(moves, load, drained, racks if racks_known else None)
    return DrainPlan(
        request=request,
        batches=_batches(moves, request),
        unmovable=tuple(sorted(unmovable, key=lambda u: (u.topic, u.partition))),
        unsatisfiable=tuple(sorted(unsatisfiable, key=lambda u: (u.topic, u.partition))),
        excluded=tuple(sorted(excluded, key=lambda u: (u.topic, u.partition))),
        added_bytes={b: v[0] for b, v in load.items()},
        added_partitions={b: v[1] for b, v in load.items()},
        unknown_sizes=sum(1 for tp, _ in in_scope if tp not in sizes),
        unplanned_topics=_unplanned_topics(unreadable_topics, request),
        rack_aware=rack_aware,
        rack_aware_reason=rack_aware_reason,
    )


def _rack_awareness(
    request: DrainRequest,
    brokers: Mapping[int, BrokerInfo],
    destinations: Sequence[int],
    in_scope: Sequence[tuple[TopicPartition, tuple[int, ...]]],
) -> tuple[bool, str]:
    """(rack-aware, why): on only when asked and every involved broker has a rack.

    Involved: every live broker outside the drained set (any may be chosen as a destination) and
    every replica of a partition to move (the drained sources and the replicas that stay, whose
    racks a destination must not share). One without a rack would make the rack rules compare
    ``None``: placement then ignores racks entirely, as Kafka's tool does when racks are partial,
    and the plan says so instead of claiming a rack-aware placement.
    """
    if not request.rack_aware:
        return False, "rack awareness not requested"
    involved = set(destinations) | {b for _, replicas in in_scope for b in replicas}
    missing = sorted(b for b in involved if brokers.get(b) is None or brokers[b].rack is None)
    if not missing:
        return True, f"all {len(involved)} involved broker(s) have a rack"
    if len(missing) == len(involved) > 1:
        return False, f"none of the {len(involved)} involved brokers has a rack: placement is not rack-aware"
    unregistered = [b for b in missing if b not in brokers or not brokers[b].live]
    names = ", ".join(str(b) for b in missing[:20]) + (
        f" and {len(missing) - 20} more" if len(missing) > 20 else ""
    )
    subject = f"broker {names} has" if len(missing) == 1 else f"brokers {names} have"
    note = (
        f" ({', '.join(str(b) for b in unregistered)} not registered: rack unknown)" if unregistered else ""
    )
    return False, f"{subject} no rack{note}: placement is not rack-aware"


def _unplanned_topics(
    unreadable: Iterable[UnreadableTopic], request: DrainRequest
) -> tuple[UnplannedTopic, ...]:
    out = []
    for topic in unreadable:
        if topic.assignment is None:
            touches, partitions = None, None
        else:
            touching = {p: tuple(r) for p, r in topic.assignment.items() if not request.brokers.isdisjoint(r)}
            touches = bool(touching)
            partitions = tuple(
                sorted(p for p, r in touching.items() if request.scope == "all" or len(r) == 1)
            )
        out.append(
            UnplannedTopic(
                topic.topic,
                topic.reason,
                topic.message,
                touches,
                partitions,
                excluded=topic.topic in request.excluded_topics,
            )
        )
    return tuple(sorted(out, key=lambda t: t.topic))


def _describe_unplanned(topic: UnplannedTopic) -> str:
    if topic.partitions is None:
        where = "may have partitions on the drained brokers (its data does not decode)"
    elif topic.partitions:
        where = f"partitions {list(topic.partitions)} in scope on the drained brokers"
    elif topic.touches_drained:
        where = "has replicas on the drained brokers, none in scope"
    else:
        where = "nothing on the drained brokers"
    excluded = "; excluded by request" if topic.excluded else ""
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in topic.message)
    return f"{topic.topic_repr}: {topic.reason} ({message}); {where}{excluded}"


def unreadable_topics(findings: Iterable[ModelFinding]) -> tuple[UnreadableTopic, ...]:
    """The topic znodes the model left out (``ClusterState.findings``), for :func:`plan_drain`.

    A topic znode under a name Kafka refuses (``/brokers/topics/a b``) is a finding, not a topic,
    and so is one whose data does not decode: both would otherwise vanish from a plan. For an
    invalid name the data is still decoded (under a stand-in name) to learn where its replicas are.
    """
    found: dict[str, UnreadableTopic] = {}
    for finding in findings:
        match = zk.TopicAssignment.PATH_PATTERN.fullmatch(finding.path)
        if match is None or match[1] in found:
            continue
        name = match[1]
        if finding.kind is ModelFindingKind.INVALID_TOPIC_NAME:
            assignment, message = None, finding.message
            stand_in = zk.topic_path("_")
            try:
                decoded = zk.TopicAssignment.decode(finding.data, stand_in)
                assignment = {p: tuple(r) for p, r in decoded.partitions.items()}
            except Exception as exc:  # where the replicas are stays unknown: said, never guessed
                why = str(exc).replace(stand_in, finding.path)
                message += f"; its data does not decode either ({type(exc).__name__}: {why})"
            found[name] = UnreadableTopic(name, INVALID_TOPIC_NAME, message, assignment)
        elif finding.kind in (ModelFindingKind.MALFORMED_ZNODE, ModelFindingKind.DECODER_FAILURE):
            found[name] = UnreadableTopic(name, UNDECODABLE_TOPIC_ZNODE, finding.message)
    return tuple(found[name] for name in sorted(found))


def _place(
    tp: TopicPartition,
    replicas: tuple[int, ...],
    drained: frozenset[int],
    heap: list[tuple[int, int, int]],
    load: dict[int, list[int]],
    racks: Mapping[int, str | None] | None,
) -> tuple[tuple[int, ...] | None, str]:
    """Replace each drained replica in place; returns (target, "") or (None, reason)."""
    target = list(replicas)
    kept = [b for b in replicas if b not in drained]
    keep_racks_distinct = racks is not None and len({racks[b] for b in replicas}) == len(replicas)
    for index, broker in enumerate(replicas):
        if broker not in drained:
            continue
        taken = set(kept) | {b for b in target if b not in drained}
        used_racks = {racks[b] for b in taken} if keep_racks_distinct and racks is not None else set()
        chosen = _least_loaded(
            heap, load, lambda b, t=taken, r=used_racks: b not in t and (racks is None or racks[b] not in r)
        )
        if chosen is None:
            if not load:
                return None, "no live broker outside the drained set"
            if keep_racks_distinct and _least_loaded(heap, load, lambda b, t=taken: b not in t) is not None:
                return None, f"too few racks: every live destination shares a rack with {sorted(taken)}"
            return None, f"too few brokers: every live destination already holds a replica ({sorted(taken)})"
        target[index] = chosen
    return tuple(target), ""


def _even_out_counts(
    moves: list[Move],
    load: dict[int, list[int]],
    drained: frozenset[int],
    racks: Mapping[int, str | None] | None,
    byte_tolerance: float = 1.02,
) -> list[Move]:
    """Second pass: LPT balances bytes almost perfectly but not partition counts (a destination that
    got a huge partition gets few others). Move the smallest partitions from the destination with
    the most added partitions to the one with the fewest while bytes stay within ``byte_tolerance``
    (or no worse than now). Only single-destination moves are relocated, within the same rules."""
    if len(load) < 2:
        return moves
    by_destination: dict[int, list[int]] = {b: [] for b in load}
    for index, move in enumerate(moves):
        if len(move.destinations) == 1:
            by_destination[move.destinations[0]].append(index)
    for indexes in by_destination.values():
        indexes.sort(key=lambda i: moves[i].size_bytes, reverse=True)  # smallest at the end
    for _ in range(len(moves)):
        high = max(load, key=lambda b: (load[b][1], b))
        low = min(load, key=lambda b: (load[b][1], b))
        if load[high][1] - load[low][1] <= 1 or not by_destination[high]:
            break
        index = by_destination[high][-1]
        move = moves[index]
        if low in move.target or (
            racks is not None
            and len({racks[b] for b in move.current}) == len(move.current)
            and racks[low] in {racks[b] for b in move.target if b != high}
        ):
            break
        before = _ratio(load)
        load[high][0] -= move.size_bytes
        load[low][0] += move.size_bytes
        if _ratio(load) > max(byte_tolerance, before):
            load[high][0] += move.size_bytes
            load[low][0] -= move.size_bytes
            break
        load[high][1] -= 1
        load[low][1] += 1
        by_destination[high].pop()
        by_destination[low].append(index)
        moves[index] = Move(
            move.topic,
            move.partition,
            move.current,
            tuple(low if b == high else b for b in move.target),
            move.size_bytes,
        )
    return moves


def _ratio(load: dict[int, list[int]]) -> float:
    values = [v[0] for v in load.values()]
    return max(values) / min(values) if min(values) > 0 else float("inf")


def _least_loaded(heap: list[tuple[int, int, int]], load: dict[int, list[int]], allowed) -> int | None:
    """Pop stale heap entries lazily; return the least-loaded allowed destination (entry left in place)."""
    skipped = []
    chosen = None
    while heap:
        added, count, broker = heap[0]
        if [added, count] != load[broker]:
            heapq.heappop(heap)  # stale entry from before this broker's last assignment
            continue
        if allowed(broker):
            chosen = broker
            break
        skipped.append(heapq.heappop(heap))
    for entry in skipped:
        heapq.heappush(heap, entry)
    return chosen


def _batches(moves: list[Move], request: DrainRequest) -> tuple[tuple[Move, ...], ...]:
    """Consecutive batches bounded by partitions and bytes; one oversize partition goes alone."""
    batches: list[tuple[Move, ...]] = []
    current: list[Move] = []
    current_bytes = 0
    for move in sorted(moves, key=lambda m: (m.topic, m.partition)):
        over_count = len(current) >= request.max_partitions_per_batch
        over_bytes = (
            request.max_bytes_per_batch is not None
            and current
            and (current_bytes + move.size_bytes > request.max_bytes_per_batch)
        )
        if current and (over_count or over_bytes):
            batches.append(tuple(current))
            current, current_bytes = [], 0
        current.append(move)
        current_bytes += move.size_bytes
    if current:
        batches.append(tuple(current))
    return tuple(batches)


def _tool_json(entries: Iterable[tuple[str, int, tuple[int, ...]]]) -> dict:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for t, p, r in sorted(entries)
    ]
    return {"version": 1, "partitions": partitions}


def batches_json(batches: Iterable[Iterable[Move]]) -> list[list[dict[str, Any]]]:
    """``plan.json``'s ``batches``: each move as the drain's ``load_plan`` checks it and
    ``plan_batches`` reads it back (the operators and the drain benchmark write it alike)."""
    return [
        [
            {
                "topic": m.topic,
                "partition": m.partition,
                "current": list(m.current),
                "target": list(m.target),
                "size_bytes": m.size_bytes,
            }
            for m in batch
        ]
        for batch in batches
    ]


def dumps_tool_json(document: dict) -> str:
    """Pretty JSON as people hand it to ``kafka-reassign-partitions --reassignment-json-file``."""
    return json.dumps(document, indent=1)


def human_bytes(n: int) -> str:
    """``1.5 MiB``: a byte count as people read it in summaries and logs."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
