"""Did a topic deletion really happen everywhere, and if not, why.

Kafka's rules as in ``core/src/main/scala/kafka/controller/TopicDeletionManager.scala`` and
``KafkaController.scala`` (3.3.1), and as a real 3.3.1 cluster behaved: with a replica's broker
down, ZooKeeper keeps the marker, topic, config and state znodes while the live replicas are
renamed ``-delete`` at once and removed 60 s later; when the broker returns, ZooKeeper is cleaned
within seconds, before that broker's own ``-delete`` directories go.

One verdict function, used by the deletion-verification operator and by the daily audit alike.
It reads what ZooKeeper says about one topic name and what the inventoried brokers hold on disk,
and names the cause the way Kafka's controller decides it: deletion is *paused* (not failed) while
a replica's broker is offline or a reassignment of the topic runs; with delete.topic.enable=false
the controller drops the request and the topic stays; ZooKeeper is cleaned before the disks, and
``-delete`` directories go only after the broker's log.segment.delete.delay.ms.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .logdir import DirKind

DEFAULT_DELETE_DELAY_MS = 60_000


class Verdict(enum.Enum):
    DELETED = "deleted"
    IN_PROGRESS = "in_progress"
    BLOCKED = "blocked"
    IGNORED = "ignored"
    NOT_REQUESTED = "not_requested"
    INCOMPLETE = "incomplete"

    @property
    def finished(self) -> bool:
        """No point waiting longer: DELETED, or a state only a person can change."""
        return self in (Verdict.DELETED, Verdict.IGNORED, Verdict.NOT_REQUESTED, Verdict.INCOMPLETE)


class Cause(enum.Enum):
    REPLICA_BROKER_OFFLINE = "replica_broker_offline"
    REASSIGNMENT_IN_PROGRESS = "reassignment_in_progress"
    DELETION_DISABLED = "deletion_disabled"
    NO_CONTROLLER = "no_controller"
    PARTITION_DIRS_LEFT = "partition_dirs_left"
    DELETE_DIRS_PAST_DELAY = "delete_dirs_past_delay"
    STRAY_DIRS_LEFT = "stray_dirs_left"
    FUTURE_DIRS_LEFT = "future_dirs_left"
    CONFIG_ZNODE_LEFT = "config_znode_left"
    PARTITIONS_LEFT = "partition_znodes_left"


@dataclass(frozen=True)
class TopicInZooKeeper:
    """What ZooKeeper holds for one topic name (all False/empty once Kafka finished deleting it)."""

    topic: str
    topic_znode: bool
    delete_marker: bool
    config_znode: bool
    replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    reassigning: bool = False
    partition_state_znodes: int = 0


@dataclass(frozen=True)
class TopicDirectory:
    """A directory of this topic found on a broker's disk (any kind)."""

    broker_id: int
    path: str
    partition: int
    kind: DirKind
    age_ms: int


@dataclass(frozen=True)
class BrokerDeletionFacts:
    """Per-broker settings that decide deletion (from server.properties), and liveness."""

    broker_id: int
    live: bool
    delete_topic_enable: bool = True
    delete_delay_ms: int = DEFAULT_DELETE_DELAY_MS


@dataclass(frozen=True)
class DeletionVerdict:
    topic: str
    verdict: Verdict
    causes: tuple[Cause, ...]
    evidence: tuple[str, ...]
    blocking_brokers: tuple[int, ...] = ()
    leftover_dirs: tuple[TopicDirectory, ...] = ()
    uninventoried_brokers: tuple[int, ...] = ()

    @property
    def coverage_partial(self) -> bool:
        return bool(self.uninventoried_brokers)

    def describe(self) -> str:
        text = f"{self.topic}: {self.verdict.name}"
        if self.causes:
            text += f" ({', '.join(c.value for c in self.causes)})"
        text += "; " + "; ".join(self.evidence)
        if self.coverage_partial:
            text += f"; coverage PARTIAL: brokers {list(self.uninventoried_brokers)} not inventoried"
        return text


def deletion_verdict(
    zk: TopicInZooKeeper,
    dirs: Iterable[TopicDirectory],
    brokers: Mapping[int, BrokerDeletionFacts],
    *,
    inventoried: Iterable[int],
    controller_live: bool = True,
    requested: bool = False,
) -> DeletionVerdict:
    """The verdict for one topic name; ``inventoried`` names the brokers whose disks were read.

    ``requested``: someone asked for this deletion (the operator was given the topic). Only then can
    a topic that still exists without a marker be IGNORED (Kafka dropped the request) rather than
    NOT_REQUESTED.
    """
    dirs = tuple(dirs)
    inventoried = frozenset(inventoried)
    # Any broker whose disk was not read, down or not: a stopped broker keeps its directories.
    missing = tuple(sorted(b for b in brokers if b not in inventoried))

    def verdict(v: Verdict, causes: Iterable[Cause], evidence: Iterable[str], **kw) -> DeletionVerdict:
        return DeletionVerdict(
            zk.topic, v, tuple(causes), tuple(evidence), uninventoried_brokers=missing, **kw
        )

    if zk.topic_znode:
        replica_brokers = sorted({b for replicas in zk.replicas.values() for b in replicas})
        if not zk.delete_marker:
            disabled = sorted(b for b, f in brokers.items() if not f.delete_topic_enable)
            if requested and disabled:
                return verdict(
                    Verdict.IGNORED,
                    [Cause.DELETION_DISABLED],
                    [
                        f"the topic exists and has no deletion marker; delete.topic.enable=false on brokers "
                        f"{disabled}: Kafka drops deletion requests and keeps the topic",
                        "set delete.topic.enable=true (rolling restart) and delete again",
                    ],
                    blocking_brokers=tuple(disabled),
                )
            return verdict(
                Verdict.NOT_REQUESTED,
                [],
                [
                    "the topic exists and /admin/delete_topics has no marker for it: "
                    + (
                        "the deletion request never reached ZooKeeper"
                        if requested
                        else "no deletion was requested"
                    )
                ],
            )
        if zk.reassigning:
            return verdict(
                Verdict.BLOCKED,
                [Cause.REASSIGNMENT_IN_PROGRESS],
                [
                    "marked for deletion, paused by the controller while a reassignment of the topic runs",
                    "deletion resumes by itself when the reassignment completes (or is cancelled)",
                ],
            )
        offline = [b for b in replica_brokers if not brokers.get(b, BrokerDeletionFacts(b, live=False)).live]
        if offline:
            return verdict(
                Verdict.BLOCKED,
                [Cause.REPLICA_BROKER_OFFLINE],
                [
                    f"marked for deletion, paused: replica broker(s) {offline} offline; replicas on live "
                    "brokers are already gone, ZooKeeper keeps the topic until every replica confirms",
                    f"bring broker(s) {offline} back (or reassign their replicas away) and deletion completes",
                ],
                blocking_brokers=tuple(offline),
            )
        if not controller_live:
            return verdict(
                Verdict.BLOCKED,
                [Cause.NO_CONTROLLER],
                ["marked for deletion, but no controller is registered in /controller to carry it out"],
            )
        return verdict(
            Verdict.IN_PROGRESS,
            [],
            [
                f"marked for deletion; the controller is deleting {len(zk.replicas)} partition(s), nothing blocks it"
            ],
        )

    # The topic znode is gone: ZooKeeper is (nearly) clean; the disks follow.
    if zk.delete_marker:
        return verdict(
            Verdict.IN_PROGRESS,
            [],
            ["the topic znode is gone and the controller is removing the last znodes (config, marker)"],
        )
    causes: list[Cause] = []
    evidence: list[str] = []
    leftovers: list[TopicDirectory] = []
    if zk.config_znode:
        causes.append(Cause.CONFIG_ZNODE_LEFT)
        evidence.append(f"/config/topics/{zk.topic} is left although the topic is gone")
    if zk.partition_state_znodes:
        causes.append(Cause.PARTITIONS_LEFT)
        evidence.append(f"{zk.partition_state_znodes} partition state znode(s) left without a topic znode")
    pending = []
    for d in dirs:
        if d.broker_id not in inventoried:
            continue
        delay = brokers.get(d.broker_id, BrokerDeletionFacts(d.broker_id, live=True)).delete_delay_ms
        if d.kind is DirKind.DELETE and d.age_ms <= delay:
            pending.append(d)
            continue
        leftovers.append(d)
    for kind, cause, what in (
        (DirKind.NORMAL, Cause.PARTITION_DIRS_LEFT, "partition directories"),
        (DirKind.DELETE, Cause.DELETE_DIRS_PAST_DELAY, "-delete directories past the broker's delete delay"),
        (DirKind.STRAY, Cause.STRAY_DIRS_LEFT, "-stray directories (never deleted automatically)"),
        (
            DirKind.FUTURE,
            Cause.FUTURE_DIRS_LEFT,
            "-future directories (an intra-broker move of a deleted topic)",
        ),
    ):
        found = [d for d in leftovers if d.kind is kind]
        if found:
            causes.append(cause)
            where = sorted({d.broker_id for d in found})
            evidence.append(f"{len(found)} {what} left on broker(s) {where}")
    if causes:
        return verdict(Verdict.INCOMPLETE, causes, evidence, leftover_dirs=tuple(leftovers))
    if pending:
        return verdict(
            Verdict.IN_PROGRESS,
            [],
            [
                f"{len(pending)} -delete directorie(s) waiting for the broker's delete delay on brokers "
                f"{sorted({d.broker_id for d in pending})}"
            ],
        )
    return verdict(
        Verdict.DELETED,
        [],
        [f"no znodes left and no directories on the {len(inventoried)} inventoried broker(s)"],
    )
