"""What changed between two snapshots of the same cluster, as typed change records.

The headline is the topic id: a ``topic_id`` that vanished from a topic znode (an old client
rewrote it) or that changed / appeared on an existing topic (a controller failover minted a new
one) is KAFKA-14190 in the making or already broken, so those records are critical and come first
(``SnapshotDiff.topic_id_changes``, ``SnapshotDiff.headline``). Everything else (topics, partitions,
assignments, brokers, controller, configs, deletion markers, reassignments) is reported with a
severity so a report can sort it, but the judgement of whether the cluster is healthy belongs to
the audit rules, not here. Pure: works on two :class:`~.model.ClusterState` objects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TypeAlias

from . import znodes as zk
from .findings import Severity
from .model import ClusterState, ModelFindingKind, TopicState
from .uuid import KafkaUuid


class ChangeKind(StrEnum):
    CLUSTER_ID_CHANGED = "cluster_id_changed"
    TOPIC_ID_LOST = "topic_id_lost"
    TOPIC_ID_CHANGED = "topic_id_changed"
    TOPIC_ID_ADDED = "topic_id_added"
    TOPIC_ADDED = "topic_added"
    TOPIC_REMOVED = "topic_removed"
    TOPIC_UNREADABLE = "topic_unreadable"
    PARTITION_COUNT_CHANGED = "partition_count_changed"
    ASSIGNMENT_CHANGED = "assignment_changed"
    BROKER_JOINED = "broker_joined"
    BROKER_LEFT = "broker_left"
    BROKER_RESTARTED = "broker_restarted"
    CONTROLLER_MOVED = "controller_moved"
    CONFIG_CHANGED = "config_changed"
    DELETION_MARKER_APPEARED = "deletion_marker_appeared"
    DELETION_MARKER_CLEARED = "deletion_marker_cleared"
    REASSIGNMENT_STARTED = "reassignment_started"
    REASSIGNMENT_FINISHED = "reassignment_finished"


# --------------------------------------------------------------------------------------------
# Change records
# --------------------------------------------------------------------------------------------


def _id(topic_id: KafkaUuid | None) -> str:
    return "none" if topic_id is None else str(topic_id)


@dataclass(frozen=True, slots=True)
class ClusterIdChange:
    """``/cluster/id`` differs: the two snapshots are not of the same cluster (or it was wiped)."""

    kind: ChangeKind
    severity: Severity
    before: str | None
    after: str | None

    @property
    def message(self) -> str:
        return (
            f"/cluster/id changed {self.before} -> {self.after}: these snapshots are not of the same "
            "cluster (or its ZooKeeper data was replaced); every other change below is suspect"
        )


@dataclass(frozen=True, slots=True)
class TopicIdChange:
    """A topic that exists in both snapshots has a different ``topic_id`` (or lost / gained one).

    ``topic_recreated`` is True when the topic znode itself is new (different czxid): the topic was
    deleted and created again, so a new id is expected and no replica of the old one survived.
    """

    kind: ChangeKind
    severity: Severity
    topic: str
    before: KafkaUuid | None
    after: KafkaUuid | None
    topic_recreated: bool = False

    @property
    def message(self) -> str:
        t = self.topic
        if self.topic_recreated:
            return (
                f"topic {t!r} was deleted and created again (new topic znode): topic_id "
                f"{_id(self.before)} -> {_id(self.after)}"
            )
        if self.kind is ChangeKind.TOPIC_ID_LOST:
            return (
                f"topic {t!r} lost its topic_id {self.before} from /brokers/topics/{t} (an old client "
                "rewrote the znode); the next controller failover mints a new id that no replica's "
                f"partition.metadata holds (KAFKA-14190): write {self.before} back (format version 3) "
                "before any controller change"
            )
        if self.kind is ChangeKind.TOPIC_ID_CHANGED:
            return (
                f"topic {t!r} topic_id changed {self.before} -> {self.after} on the same topic znode: "
                f"replicas still hold {self.before} in partition.metadata and reject the controller "
                "(KAFKA-14190); write the replicas' id back and move the controller"
            )
        if self.severity is Severity.CRITICAL:
            return (
                f"topic {t!r} got a newly minted topic_id {self.after} (it had none): replicas created "
                "before hold the previous id in partition.metadata (KAFKA-14190); compare them and "
                "write their id back"
            )
        return (
            f"topic {t!r} got its first topic_id {self.after} (expected once, when "
            "inter.broker.protocol.version reaches 2.8)"
        )


@dataclass(frozen=True, slots=True)
class TopicChange:
    """A topic znode appeared, disappeared, or stopped decoding."""

    kind: ChangeKind
    severity: Severity
    topic: str
    topic_id: KafkaUuid | None
    partition_count: int
    detail: str = ""

    @property
    def message(self) -> str:
        if self.kind is ChangeKind.TOPIC_ADDED:
            what = f"topic {self.topic!r} created ({self.partition_count} partitions, topic_id {_id(self.topic_id)})"
        elif self.kind is ChangeKind.TOPIC_REMOVED:
            what = f"topic {self.topic!r} removed (had {self.partition_count} partitions, topic_id {_id(self.topic_id)})"
        else:
            what = f"topic {self.topic!r} znode no longer decodes, Kafka's controller cannot read it either"
        return f"{what}{': ' + self.detail if self.detail else ''}"


@dataclass(frozen=True, slots=True)
class PartitionCountChange:
    kind: ChangeKind
    severity: Severity
    topic: str
    before: int
    after: int

    @property
    def message(self) -> str:
        note = (
            "" if self.after > self.before else " (Kafka never removes partitions: re-created or hand-edited)"
        )
        return f"topic {self.topic!r} partitions {self.before} -> {self.after}{note}"


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    """A partition present in both snapshots has a different replica list."""

    kind: ChangeKind
    severity: Severity
    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]

    @property
    def message(self) -> str:
        return f"{self.topic}-{self.partition} replicas {list(self.before)} -> {list(self.after)}"


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """A broker registered, deregistered, or re-registered (new broker epoch = it restarted)."""

    kind: ChangeKind
    severity: Severity
    broker_id: int
    epoch_before: int | None
    epoch_after: int | None

    @property
    def message(self) -> str:
        if self.kind is ChangeKind.BROKER_JOINED:
            return f"broker {self.broker_id} registered (epoch {self.epoch_after})"
        if self.kind is ChangeKind.BROKER_LEFT:
            return f"broker {self.broker_id} is no longer registered (was epoch {self.epoch_before})"
        return f"broker {self.broker_id} re-registered (restarted): epoch {self.epoch_before} -> {self.epoch_after}"


@dataclass(frozen=True, slots=True)
class ControllerChange:
    kind: ChangeKind
    severity: Severity
    broker_before: int | None
    broker_after: int | None
    epoch_before: int | None
    epoch_after: int | None

    @property
    def message(self) -> str:
        if self.broker_after is None:
            return f"no active controller (was broker {self.broker_before}, epoch {self.epoch_before})"
        return (
            f"controller {self.broker_before} -> {self.broker_after}, "
            f"epoch {self.epoch_before} -> {self.epoch_after}"
        )


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One key of one config entity (``/config/<type>/<name>``); None = key absent."""

    kind: ChangeKind
    severity: Severity
    entity_type: str
    entity_name: str
    key: str
    before: str | None
    after: str | None

    @property
    def message(self) -> str:
        return f"config {self.entity_type}/{self.entity_name} {self.key}: {self.before} -> {self.after}"


@dataclass(frozen=True, slots=True)
class DeletionMarkerChange:
    kind: ChangeKind
    severity: Severity
    topic: str
    topic_exists_after: bool

    @property
    def message(self) -> str:
        if self.kind is ChangeKind.DELETION_MARKER_APPEARED:
            return f"topic {self.topic!r} marked for deletion"
        if self.topic_exists_after:
            return (
                f"deletion marker of {self.topic!r} cleared but the topic is still there "
                "(delete.topic.enable=false makes the controller drop requests)"
            )
        return f"deletion of {self.topic!r} completed (marker cleared)"


@dataclass(frozen=True, slots=True)
class ReassignmentChange:
    """A partition started or stopped being reassigned (topic znode or /admin/reassign_partitions)."""

    kind: ChangeKind
    severity: Severity
    topic: str
    partition: int
    replicas_before: tuple[int, ...] | None
    replicas_after: tuple[int, ...] | None

    @property
    def message(self) -> str:
        verb = "started" if self.kind is ChangeKind.REASSIGNMENT_STARTED else "finished"
        after = "gone" if self.replicas_after is None else list(self.replicas_after)
        before = "none" if self.replicas_before is None else list(self.replicas_before)
        return f"reassignment of {self.topic}-{self.partition} {verb}: replicas {before} -> {after}"


Change: TypeAlias = (
    ClusterIdChange
    | TopicIdChange
    | TopicChange
    | PartitionCountChange
    | AssignmentChange
    | BrokerChange
    | ControllerChange
    | ConfigChange
    | DeletionMarkerChange
    | ReassignmentChange
)


# --------------------------------------------------------------------------------------------
# The diff
# --------------------------------------------------------------------------------------------

_REPORTED_SEVERITIES = (Severity.CRITICAL, Severity.WARNING, Severity.INFO)
"""The severities a change can have (ERROR is for audit rules that judge, not for changes)."""


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    """Every change between two snapshots, grouped by what changed; ``changes`` has them worst first."""

    cluster: str
    before_last_zxid: int
    after_last_zxid: int
    cluster_id_changes: tuple[ClusterIdChange, ...]
    topic_id_changes: tuple[TopicIdChange, ...]
    topic_changes: tuple[TopicChange, ...]
    partition_count_changes: tuple[PartitionCountChange, ...]
    assignment_changes: tuple[AssignmentChange, ...]
    broker_changes: tuple[BrokerChange, ...]
    controller_changes: tuple[ControllerChange, ...]
    config_changes: tuple[ConfigChange, ...]
    deletion_marker_changes: tuple[DeletionMarkerChange, ...]
    reassignment_changes: tuple[ReassignmentChange, ...]

    @property
    def changes(self) -> tuple[Change, ...]:
        """All changes, critical first; within a severity in field order (cluster id, topic ids, ...)."""
        groups: list[Change] = []
        for f in fields(self):
            if f.name.endswith("_changes"):
                groups.extend(getattr(self, f.name))
        return tuple(sorted(groups, key=lambda c: -c.severity))

    @property
    def headline(self) -> tuple[Change, ...]:
        """The critical changes, topic-id ones first: what a report must say before anything else."""
        return tuple(c for c in self.changes if c.severity is Severity.CRITICAL)

    def of_kind(self, kind: ChangeKind) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind is kind)

    @property
    def is_empty(self) -> bool:
        return not self.changes

    @property
    def zxid_went_backwards(self) -> bool:
        """True when "after" is older than "before": swapped arguments turn a loss into a gain."""
        return 0 < self.after_last_zxid < self.before_last_zxid

    def summary(self) -> dict[str, int]:
        """Count per change kind (every kind, zeros included) and per severity, plus ``total``."""
        changes = self.changes
        kinds = Counter(c.kind for c in changes)
        severities = Counter(c.severity for c in changes)
        counts = {kind.value: kinds[kind] for kind in ChangeKind}
        counts.update({s.name.lower(): severities[s] for s in _REPORTED_SEVERITIES})
        counts["total"] = len(changes)
        return counts

    def describe(self, max_lines: int = 20) -> str:
        """A few lines for a human: counts, then the changes worst first (headline on top)."""
        name = f"{self.cluster}: " if self.cluster else ""
        changes = self.changes
        if not changes:
            return f"{name}no changes between the snapshots"
        summary = self.summary()
        counts = ", ".join(f"{summary[s.name.lower()]} {s.name.lower()}" for s in _REPORTED_SEVERITIES)
        lines = [f"{name}{len(changes)} changes between the snapshots ({counts})"]
        if self.zxid_went_backwards:
            lines.append("WARNING the 'after' snapshot is older than 'before' (zxid went backwards)")
        shown = changes[:max_lines]
        lines += [f"{c.severity.name} {c.kind.value}: {c.message}" for c in shown]
        rest = Counter(c.kind.value for c in changes[len(shown) :])
        if rest:
            lines.append("... and " + ", ".join(f"{n} {kind}" for kind, n in sorted(rest.items())))
        return "\n".join(lines)


def diff_states(before: ClusterState, after: ClusterState) -> SnapshotDiff:
    """Compare two snapshots of one cluster (``before`` the older)."""
    return SnapshotDiff(
        cluster=after.cluster or before.cluster,
        before_last_zxid=before.last_zxid,
        after_last_zxid=after.last_zxid,
        cluster_id_changes=_cluster_id_changes(before, after),
        topic_id_changes=_topic_id_changes(before, after),
        topic_changes=_topic_changes(before, after),
        partition_count_changes=_partition_count_changes(before, after),
        assignment_changes=_assignment_changes(before, after),
        broker_changes=_broker_changes(before, after),
        controller_changes=_controller_changes(before, after),
        config_changes=_config_changes(before, after),
        deletion_marker_changes=_deletion_marker_changes(before, after),
        reassignment_changes=_reassignment_changes(before, after),
    )


# --------------------------------------------------------------------------------------------
# One function per kind of change
# --------------------------------------------------------------------------------------------


def _cluster_id_changes(before: ClusterState, after: ClusterState) -> tuple[ClusterIdChange, ...]:
    if before.cluster_id == after.cluster_id:
        return ()
    return (
        ClusterIdChange(
            ChangeKind.CLUSTER_ID_CHANGED, Severity.CRITICAL, before.cluster_id, after.cluster_id
        ),
    )


def _common_topics(before: ClusterState, after: ClusterState) -> Iterable[tuple[TopicState, TopicState]]:
    for name in sorted(before.topics.keys() & after.topics.keys()):
        yield before.topics[name], after.topics[name]


def _recreated(old: TopicState, new: TopicState) -> bool:
    """A different czxid means a new topic znode; 0 (unknown Stat) never counts as different."""
    return bool(old.czxid and new.czxid and old.czxid != new.czxid)


def _topic_id_changes(before: ClusterState, after: ClusterState) -> tuple[TopicIdChange, ...]:
    # A cluster whose topics already had ids uses them (IBP >= 2.8): an id appearing on an existing
    # topic there is a re-mint by a controller failover, not the one-off of an IBP upgrade.
    cluster_had_ids = any(t.topic_id is not None for t in before.topics.values())
    out = []
    for old, new in _common_topics(before, after):
        if old.topic_id == new.topic_id:
            continue
        recreated = _recreated(old, new)
        if new.topic_id is None:
            kind, severity = ChangeKind.TOPIC_ID_LOST, Severity.CRITICAL
        elif old.topic_id is None:
            kind = ChangeKind.TOPIC_ID_ADDED
            severity = Severity.CRITICAL if cluster_had_ids else Severity.WARNING
        else:
            kind, severity = ChangeKind.TOPIC_ID_CHANGED, Severity.CRITICAL
        if recreated:
            severity = Severity.WARNING
        out.append(TopicIdChange(kind, severity, old.name, old.topic_id, new.topic_id, recreated))
    return tuple(out)


def _topic_changes(before: ClusterState, after: ClusterState) -> tuple[TopicChange, ...]:
    out = []
    for name in sorted(after.topics.keys() - before.topics.keys()):
        topic = after.topics[name]
        out.append(
            TopicChange(ChangeKind.TOPIC_ADDED, Severity.INFO, name, topic.topic_id, topic.partition_count)
        )
    for name in sorted(before.topics.keys() - after.topics.keys()):
        topic = before.topics[name]
        unreadable = [
            f
            for f in after.findings
            if f.path == topic.path
            and f.kind in (ModelFindingKind.MALFORMED_ZNODE, ModelFindingKind.DECODER_FAILURE)
        ]
        if unreadable:
            out.append(
                TopicChange(
                    ChangeKind.TOPIC_UNREADABLE,
                    Severity.CRITICAL,
                    name,
                    topic.topic_id,
                    topic.partition_count,
                    unreadable[0].message,
                )
            )
            continue
        detail = "its deletion completed" if topic.has_delete_marker else "no deletion marker was seen before"
        out.append(
            TopicChange(
                ChangeKind.TOPIC_REMOVED, Severity.INFO, name, topic.topic_id, topic.partition_count, detail
            )
        )
    return tuple(out)


def _partition_count_changes(before: ClusterState, after: ClusterState) -> tuple[PartitionCountChange, ...]:
    return tuple(
        PartitionCountChange(
            ChangeKind.PARTITION_COUNT_CHANGED,
            Severity.INFO if new.partition_count > old.partition_count else Severity.WARNING,
            old.name,
            old.partition_count,
            new.partition_count,
        )
        for old, new in _common_topics(before, after)
        if old.partition_count != new.partition_count
    )


def _assignment_changes(before: ClusterState, after: ClusterState) -> tuple[AssignmentChange, ...]:
    out = []
    for old, new in _common_topics(before, after):
        for p in sorted(old.partitions.keys() & new.partitions.keys()):
            was, now = old.partitions[p].replicas, new.partitions[p].replicas
            if was != now:
                out.append(
                    AssignmentChange(ChangeKind.ASSIGNMENT_CHANGED, Severity.INFO, old.name, p, was, now)
                )
    return tuple(out)


def _broker_changes(before: ClusterState, after: ClusterState) -> tuple[BrokerChange, ...]:
    out = []
    for broker_id in sorted(before.brokers.keys() | after.brokers.keys()):
        old, new = before.brokers.get(broker_id), after.brokers.get(broker_id)
        if old is None and new is not None:
            out.append(BrokerChange(ChangeKind.BROKER_JOINED, Severity.INFO, broker_id, None, new.epoch))
        elif new is None and old is not None:
            out.append(BrokerChange(ChangeKind.BROKER_LEFT, Severity.WARNING, broker_id, old.epoch, None))
        elif old is not None and new is not None and old.epoch != new.epoch:
            out.append(
                BrokerChange(ChangeKind.BROKER_RESTARTED, Severity.INFO, broker_id, old.epoch, new.epoch)
            )
    return tuple(out)


def _controller_changes(before: ClusterState, after: ClusterState) -> tuple[ControllerChange, ...]:
    if (before.controller_id, before.controller_epoch) == (after.controller_id, after.controller_epoch):
        return ()
    severity = Severity.WARNING if after.controller is None else Severity.INFO
    return (
        ControllerChange(
            ChangeKind.CONTROLLER_MOVED,
            severity,
            before.controller_id,
            after.controller_id,
            before.controller_epoch,
            after.controller_epoch,
        ),
    )


def _config_changes(before: ClusterState, after: ClusterState) -> tuple[ConfigChange, ...]:
    """Key changes of every config entity; a topic created or removed is reported as such instead."""
    out = []
    for entity_type in zk.CONFIG_ENTITY_TYPES:
        old_entities, new_entities = before.configs.of_type(entity_type), after.configs.of_type(entity_type)
        names = old_entities.keys() | new_entities.keys()
        if entity_type == "topics":
            names &= before.topics.keys() & after.topics.keys()
        for name in sorted(names):
            old, new = old_entities.get(name, {}), new_entities.get(name, {})
            for key in sorted(old.keys() | new.keys()):
                if old.get(key) != new.get(key):
                    out.append(
                        ConfigChange(
                            ChangeKind.CONFIG_CHANGED,
                            Severity.INFO,
                            entity_type,
                            name,
                            key,
                            old.get(key),
                            new.get(key),
                        )
                    )
    return tuple(out)


def _deletion_marker_changes(before: ClusterState, after: ClusterState) -> tuple[DeletionMarkerChange, ...]:
    out = [
        DeletionMarkerChange(ChangeKind.DELETION_MARKER_APPEARED, Severity.INFO, topic, topic in after.topics)
        for topic in sorted(after.pending_deletions - before.pending_deletions)
    ]
    for topic in sorted(before.pending_deletions - after.pending_deletions):
        still_there = topic in after.topics
        severity = Severity.WARNING if still_there else Severity.INFO
        out.append(DeletionMarkerChange(ChangeKind.DELETION_MARKER_CLEARED, severity, topic, still_there))
    return tuple(out)


def _in_flight(state: ClusterState) -> set[zk.TopicPartition]:
    """Reassigning per the topic znodes (2.4+) or listed in /admin/reassign_partitions (any version)."""
    listed = state.reassign_partitions.targets.keys() if state.reassign_partitions else ()
    return {*state.reassigning_partitions, *listed}


def _replicas(state: ClusterState, tp: zk.TopicPartition) -> tuple[int, ...] | None:
    partition = state.partition(tp.topic, tp.partition)
    return None if partition is None else partition.replicas


def _reassignment_changes(before: ClusterState, after: ClusterState) -> tuple[ReassignmentChange, ...]:
    was, now = _in_flight(before), _in_flight(after)
    out = [
        ReassignmentChange(
            ChangeKind.REASSIGNMENT_STARTED,
            Severity.INFO,
            tp.topic,
            tp.partition,
            _replicas(before, tp),
            _replicas(after, tp),
        )
        for tp in sorted(now - was)
    ]
    out += [
        ReassignmentChange(
            ChangeKind.REASSIGNMENT_FINISHED,
            Severity.INFO,
            tp.topic,
            tp.partition,
            _replicas(before, tp),
            _replicas(after, tp),
        )
        for tp in sorted(was - now)
    ]
    return tuple(out)
