"""Kafka's ZooKeeper-mode reassignment rules, as pure functions.

From ``core/src/main/scala/kafka/admin/ReassignPartitionsCommand.scala`` (throttles),
``kafka/controller/KafkaController.scala`` (completion, the reassign znode) and
``kafka/zk/ZkData.scala`` (``/admin/reassign_partitions``, ``/config/changes``), 3.3.1.

Throttles are computed exactly as ``kafka-reassign-partitions`` 2.6+/3.x computes them; completion
and "in flight" are read the way the controller and the tool read them. The operators only do the
I/O around these functions, so a dry run and a real run make the same decisions.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .safety import LeaseHolder
from .znodes import PartitionState, ReassignPartitions, TopicAssignment

TopicPartition = tuple[str, int]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_THROTTLE_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


@dataclass(frozen=True)
class InFlight:
    """What says a reassignment is running: the znode, and (2.4+) adding/removing in topic znodes."""

    znode_partitions: tuple[TopicPartition, ...] = ()
    topic_znode_partitions: tuple[TopicPartition, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.znode_partitions or self.topic_znode_partitions)

    def describe(self) -> str:
        parts = []
        if self.znode_partitions:
            parts.append(f"/admin/reassign_partitions lists {_list(self.znode_partitions)}")
        if self.topic_znode_partitions:
            parts.append(
                f"topic znodes show adding/removing replicas for {_list(self.topic_znode_partitions)}"
            )
        return "; ".join(parts) or "no reassignment in flight"


def reassignments_in_flight(
    topics: Iterable[TopicAssignment], reassign_znode: ReassignPartitions | None
) -> InFlight:
    znode = tuple(sorted((e.topic, e.partition) for e in reassign_znode.partitions)) if reassign_znode else ()
    moving = tuple(
        sorted(
            (t.topic, p)
            for t in topics
            for p in t.partitions
            if t.adding_replicas.get(p) or t.removing_replicas.get(p)
        )
    )
    return InFlight(znode, moving)


def in_flight_targets(
    topics: Iterable[TopicAssignment], reassign_znode: ReassignPartitions | None
) -> dict[TopicPartition, tuple[int, ...]]:
    """Where each partition in flight is going: the znode's replicas, else (2.4+, the znode gone or
    an Admin API request) the topic znode's target (replicas minus removing)."""
    out = {
        (t.topic, p): t.target_replicas(p)
        for t in topics
        for p in t.partitions
        if t.adding_replicas.get(p) or t.removing_replicas.get(p)
    }
    if reassign_znode is not None:
        out.update({(e.topic, e.partition): tuple(e.replicas) for e in reassign_znode.partitions})
    return out


@dataclass(frozen=True)
class PlannedRun:
    """A run of this provider that planned moves (a drain or post-maintenance ``plan.json``)."""

    plan_dir: str
    run_id: str | None
    kind: str
    batches: tuple[Mapping[TopicPartition, tuple[int, ...]], ...]

    def batch_of(self, moving: Mapping[TopicPartition, Sequence[int]]) -> int | None:
        """The 0-based batch whose targets include every moving partition's target, None if none does."""
        for index, batch in enumerate(self.batches):
            if moving and all(tuple(batch.get(tp, ())) == tuple(target) for tp, target in moving.items()):
                return index
        return None


def owning_runs(
    moving: Mapping[TopicPartition, Sequence[int]], runs: Iterable[PlannedRun]
) -> list[PlannedRun]:
    """The runs whose plan holds exactly these moves (partition and target replicas) in one batch."""
    return [r for r in runs if r.batch_of(moving) is not None]


def owner_advice(
    moving: Mapping[TopicPartition, Sequence[int]],
    runs: Sequence[PlannedRun],
    lease: LeaseHolder | None,
    *,
    lease_read: bool = True,
    searched: str | None = None,
    own_run_id: str | None = None,
) -> str:
    """Who a reassignment in flight belongs to, from the maintenance lease and the runs' plans, and
    what to do: wait for its owner. Never "cancel it": another run is moving data under its own
    throttles, and whoever started it is the one to decide about it.

    :param moving: the partitions in flight and their targets (:func:`in_flight_targets`).
    :param runs: this provider's runs that planned moves (their ``plan.json``).
    :param lease: the cluster's maintenance lease holder (None: no lease, or not read).
    :param lease_read: whether the lease could be read at all.
    :param searched: where the plans were looked for (named when none matched).
    :param own_run_id: the run asking (its own lease says nothing about someone else's reassignment).
    """
    owners = owning_runs(moving, runs)
    own_lease = lease is not None and own_run_id is not None and lease.run_id == own_run_id
    if own_lease:
        lease = None
    holder = (
        f"{lease.describe()}"
        if lease is not None
        else (
            "nobody (no maintenance lease is held)"
            if lease_read
            else "unknown (the maintenance lease was not read)"
        )
    )
    if owners:
        owner = owners[-1]  # the latest plan listing these moves
        batch = owner.batch_of(moving)
        if lease is not None:
            lease_text = (
                "; it holds the cluster's maintenance lease"
                if lease.run_id == owner.run_id
                else f"; the maintenance lease is held by {holder}"
            )
        elif own_lease:
            lease_text = "; this run holds the maintenance lease"
        elif lease_read:
            lease_text = (
                "; it holds no maintenance lease any more (expired, or the run stopped: look at it first)"
            )
        else:
            lease_text = ""
        return (
            f"It belongs to {owner.kind} run {owner.run_id!r} ({owner.plan_dir}/plan.json lists these moves, "
            f"batch {(batch or 0) + 1} of {len(owner.batches)}){lease_text}. That run is moving data: wait for "
            "it to finish (it clears its throttles and releases the lease), then run again. Do not cancel its "
            "reassignment: that leaves its partitions half-moved under its throttles."
        )
    where = f" and no plan under {searched} lists these moves" if searched else ""
    if lease is not None:
        return (
            f"The cluster's maintenance lease is held by {holder}, the run most likely carrying it out{where}. "
            "Wait for that run to finish and release the lease, then run again; do not cancel a reassignment "
            "another run is carrying out."
        )
    if not lease_read:
        return (
            f"Its owner is unknown (the maintenance lease was not read{where}). Find out who started it and wait "
            "for it to finish (kafka-reassign-partitions --verify, or ReassignmentSensor), then run again."
        )
    nobody = "only this run holds the maintenance lease" if own_lease else "no maintenance lease is held"
    return (
        f"No run of this provider owns it ({nobody}{where}): another tool or a person "
        "started it (kafka-reassign-partitions, Cruise Control, the Admin API). Find out who, and wait for it "
        "to finish (kafka-reassign-partitions --verify, or ReassignmentSensor), then run again."
    )


@dataclass(frozen=True)
class ThrottlePlan:
    """Config values one execution sets: rates per broker and replica lists per topic (whole values)."""

    rate: int
    broker_rates: tuple[int, ...]
    leader_replicas: Mapping[str, str] = field(default_factory=dict)
    follower_replicas: Mapping[str, str] = field(default_factory=dict)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for topic, value in self.leader_replicas.items():
            out.setdefault(topic, {})[LEADER_REPLICAS] = value
        for topic, value in self.follower_replicas.items():
            out.setdefault(topic, {})[FOLLOWER_REPLICAS] = value
        return out

    def broker_configs(self) -> dict[int, dict[str, str]]:
        return {b: {LEADER_RATE: str(self.rate), FOLLOWER_RATE: str(self.rate)} for b in self.broker_rates}


def plan_throttles(
    targets: Mapping[TopicPartition, Sequence[int]], topics: Mapping[str, TopicAssignment], rate: int
) -> ThrottlePlan:
    """``ReassignPartitionsCommand`` 3.x: sources are the current (or, mid-reassignment, origin)
    replicas; destinations are target minus sources. Leader lists cover the sources of every
    partition moved plus ongoing reassignments of the same topics; follower lists the
    destinations; values are sorted as strings (Java TreeSet of "p:b"); rates go on every broker
    involved."""
    if rate <= 0:
        raise ValueError("throttle rate must be a positive number of bytes/s")
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in targets.items():
        assignment = topics[topic]
        sources = assignment.original_replicas(partition)
        destinations = [b for b in target if b not in sources]
        if not destinations and list(target) == list(sources):
            continue
        leader.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        follower.setdefault(topic, set()).update(f"{partition}:{b}" for b in destinations)
        brokers.update(sources)
        brokers.update(destinations)
    for topic in list(leader):
        assignment = topics[topic]
        for partition in assignment.partitions:
            if assignment.adding_replicas.get(partition) or assignment.removing_replicas.get(partition):
                leader[topic].update(f"{partition}:{b}" for b in assignment.original_replicas(partition))
    return ThrottlePlan(
        rate=rate,
        broker_rates=tuple(sorted(brokers)),
        leader_replicas={t: ",".join(sorted(v)) for t, v in sorted(leader.items())},
        follower_replicas={t: ",".join(sorted(v)) for t, v in sorted(follower.items()) if v},
    )


def merged_config(current: Mapping[str, str], set_values: Mapping[str, str]) -> dict[str, str]:
    """kafka-configs' ZK path: read the whole map, change some keys, write the whole map back."""
    return {**current, **set_values}


def config_without_our_values(
    current: Mapping[str, str], ours: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Remove only the keys that still hold the value this run set; report keys someone changed since."""
    kept = dict(current)
    changed_by_others = []
    for key, value in ours.items():
        if key not in current:
            continue
        if current[key] == value:
            del kept[key]
        else:
            changed_by_others.append(key)
    return kept, changed_by_others


@dataclass(frozen=True)
class Progress:
    total: int
    done: tuple[TopicPartition, ...]
    moving: tuple[TopicPartition, ...]
    bytes_total: int = 0
    bytes_done: int = 0

    @property
    def complete(self) -> bool:
        return not self.moving

    def describe(self) -> str:
        text = f"{len(self.done)}/{self.total} partitions done"
        if self.bytes_total:
            text += f", {self.bytes_done / 2**20:.1f}/{self.bytes_total / 2**20:.1f} MiB"
        if self.moving:
            text += f"; still moving: {_list(self.moving)}"
        return text


def partition_complete(
    target: Sequence[int],
    assignment: TopicAssignment,
    partition: int,
    state: PartitionState | None,
    reassign_znode: ReassignPartitions | None,
) -> bool:
    """Kafka's observable end state (2.4+): gone from the znode, ``partitions[p]`` equals the target
    with no adding/removing, and the ISR within the target."""
    if reassign_znode is not None and any(
        (e.topic, e.partition) == (assignment.topic, partition) for e in reassign_znode.partitions
    ):
        return False
    if tuple(assignment.partitions.get(partition, ())) != tuple(target):
        return False
    if assignment.adding_replicas.get(partition) or assignment.removing_replicas.get(partition):
        return False
    return state is not None and set(state.isr) <= set(target)


def progress(
    targets: Mapping[TopicPartition, Sequence[int]],
    topics: Mapping[str, TopicAssignment],
    states: Mapping[TopicPartition, PartitionState],
    reassign_znode: ReassignPartitions | None,
    sizes: Mapping[TopicPartition, int] | None = None,
) -> Progress:
    sizes = sizes or {}
    done, moving = [], []
    for tp, target in sorted(targets.items()):
        assignment = topics.get(tp[0])
        finished = assignment is not None and partition_complete(
            target, assignment, tp[1], states.get(tp), reassign_znode
        )
        (done if finished else moving).append(tp)
    return Progress(
        total=len(targets),
        done=tuple(done),
        moving=tuple(moving),
        bytes_total=sum(sizes.get(tp, 0) for tp in targets),
        bytes_done=sum(sizes.get(tp, 0) for tp in done),
    )


def same_request(znode: ReassignPartitions, targets: Mapping[TopicPartition, Sequence[int]]) -> bool:
    """Is this reassign znode the one this plan would create (a retry finding its own work)?

    The znode cannot carry a marker (2.0+ controllers reject extra keys), so identity is content:
    the controller only ever removes finished entries, so ours is a non-empty subset of the plan.
    """
    entries = {(e.topic, e.partition): tuple(e.replicas) for e in znode.partitions}
    return bool(entries) and all(tuple(targets.get(tp, ())) == r for tp, r in entries.items())


def _list(partitions: Sequence[TopicPartition], limit: int = 10) -> str:
    names = [f"{t}-{p}" for t, p in partitions[:limit]]
    more = f" and {len(partitions) - limit} more" if len(partitions) > limit else ""
    return ", ".join(names) + more


def throttle_cleanup_commands(
    entities: Mapping[str, Mapping[str, str]], bootstrap: str = "<broker-host:port>"
) -> list[str]:
    """The ``kafka-configs`` commands that remove throttle keys by hand (``entities``: "topics/<t>" or
    "brokers/<id>" -> {key: value this run set}); for the message of a step that had to leave them.
    """
    commands = []
    for key in sorted(entities):
        keys = sorted(entities[key])
        if not keys:
            continue
        entity_type, name = key.split("/", 1)
        commands.append(
            f"kafka-configs.sh --bootstrap-server {shlex.quote(bootstrap)} --alter --entity-type {entity_type} "
            f"--entity-name {shlex.quote(name)} --delete-config {','.join(keys)}"
        )
    return commands
