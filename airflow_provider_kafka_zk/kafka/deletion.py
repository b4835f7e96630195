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
``-delete`` directories go when the broker's ``kafka-delete-logs`` task gets to them
(:func:`delete_dir_schedule`): until then the verdict is PENDING_DELETE_DELAY, not INCOMPLETE.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .logdir import DirKind

DEFAULT_DELETE_DELAY_MS = 60_000
"""``log.segment.delete.delay.ms`` (``KafkaConfig.Defaults.LogDeleteDelayMs``, 0.11 .. 3.9)."""
INITIAL_TASK_DELAY_MS = 30_000
"""``LogManager.InitialTaskDelayMs`` (0.11.0.0 .. 3.7): the first ``kafka-delete-logs`` run after a
broker starts; 3.8+ reads it from the internal ``log.initial.task.delay.ms`` (same default)."""
DEFAULT_DELETE_MARGIN_MS = 30_000
"""How late past Kafka's own schedule a ``-delete`` directory may still go before it is INCOMPLETE:
thread scheduling, a long queue of logs deleted one after another, and the clocks of the broker
host (the directory's ctime), ZooKeeper (the registration) and the checker differing."""


class Verdict(enum.Enum):
    DELETED = "deleted"
    IN_PROGRESS = "in_progress"
    PENDING_DELETE_DELAY = "pending_delete_delay"
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
    """Per-broker settings that decide deletion, and liveness.

    ``delete_delay_ms`` is the ``log.segment.delete.delay.ms`` the broker runs with (server.properties,
    or a dynamic broker config: :func:`kafka.broker_config.effective_setting`); ``running_for_ms`` is
    how long ago it registered in ``/brokers/ids`` (its start; None: unknown).
    """

    broker_id: int
    live: bool
    delete_topic_enable: bool = True
    delete_delay_ms: int = DEFAULT_DELETE_DELAY_MS
    running_for_ms: int | None = None
    initial_task_delay_ms: int = INITIAL_TASK_DELAY_MS


def running_for_ms(now_ms: int, registered_ms: int | None, znode_ctime_ms: int | None = None) -> int | None:
    """Milliseconds since a broker registered (its start), None when unknown.

    ``registered_ms`` is the registration's ``timestamp``, written by the broker from its own clock
    (``BrokerIdZNode.encode``: ``Time.SYSTEM.milliseconds``, 3.3.1) -- the clock its directories'
    ctimes come from, so it is preferred; ``znode_ctime_ms`` (ZooKeeper's clock) stands in without it.
    """
    started = registered_ms or znode_ctime_ms
    return None if not started else now_ms - started


@dataclass(frozen=True)
class DeleteDirSchedule:
    """When a broker's ``kafka-delete-logs`` task removes one ``-delete`` directory.

    ``due_in_ms``: until Kafka deletes it (negative: that long ago); None while its broker is not
    running. ``overdue``: later than that by more than the margin -- Kafka will not remove it now.
    """

    broker_id: int
    due_in_ms: int | None
    overdue: bool
    delay_ms: int
    initial_task_delay_ms: int


def delete_dir_schedule(
    age_ms: int, broker: BrokerDeletionFacts, margin_ms: int = DEFAULT_DELETE_MARGIN_MS
) -> DeleteDirSchedule:
    """When Kafka removes a ``-delete`` directory renamed ``age_ms`` ago on ``broker``.

    ``LogManager`` (``core/src/main/scala/kafka/log/LogManager.scala``):

    * 1.1.0 .. 3.9: ``asyncDelete`` renames the directory and queues the log with the time
      (``addLogToBeDeleted``); ``deleteLogs`` deletes every queued log whose time +
      ``currentDefaultConfig.fileDeleteDelayMs`` has passed and schedules itself again for the
      remaining time of the next one (``fileDeleteDelayMs`` when the queue is empty; 1.1 sleeps
      for it instead), first ``InitialTaskDelayMs`` (30 s) after the broker's start. So a log goes
      at max(queued + delay, start + 30 s), give or take the scheduler thread (a real 3.3.1 broker:
      20 ms after the delay).
    * 0.11.0 / 1.0.0: ``deleteLogs`` runs at a fixed rate of ``fileDeleteDelayMs`` from 30 s after
      the start and deletes *everything* queued, so a log goes at the first run after it was
      queued: never later than the same bound.
    * ``loadLogs`` queues every ``-delete`` directory found at start (``loadLog``:
      ``if (logDir.getName.endsWith(DeleteDirSuffix)) addLogToBeDeleted(log)``): one renamed before
      the broker's current start is queued then, not at its rename (its ctime). A stopped broker
      deletes nothing until it starts.

    With ``r`` = time since the broker's start (its registration, which follows ``LogManager.startup``)
    and ``a`` = age since the rename, the directory is due at max(delay - min(a, r), 30 s - r) from
    now, and overdue once that is more than ``margin_ms`` in the past. An unknown start counts as
    the rename (the latest start that leaves it queued at the rename).
    """
    delay, initial = broker.delete_delay_ms, broker.initial_task_delay_ms
    if not broker.live:
        return DeleteDirSchedule(broker.broker_id, None, False, delay, initial)
    running = age_ms if broker.running_for_ms is None else broker.running_for_ms
    due_in = max(delay - min(age_ms, running), initial - running)
    return DeleteDirSchedule(broker.broker_id, due_in, due_in < -margin_ms, delay, initial)


@dataclass(frozen=True)
class DeletionVerdict:
    topic: str
    verdict: Verdict
    causes: tuple[Cause, ...]
    evidence: tuple[str, ...]
    blocking_brokers: tuple[int, ...] = ()
    leftover_dirs: tuple[TopicDirectory, ...] = ()
    uninventoried_brokers: tuple[int, ...] = ()
    pending_dirs: tuple[TopicDirectory, ...] = ()  # -delete dirs Kafka removes by itself, not yet due

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
    margin_ms: int = DEFAULT_DELETE_MARGIN_MS,
) -> DeletionVerdict:
    """The verdict for one topic name; ``inventoried`` names the brokers whose disks were read.

    ``requested``: someone asked for this deletion (the operator was given the topic). Only then can
    a topic that still exists without a marker be IGNORED (Kafka dropped the request) rather than
    NOT_REQUESTED. ``margin_ms``: how far past Kafka's own schedule (:func:`delete_dir_schedule`) a
    ``-delete`` directory may still be before it is left over (INCOMPLETE) rather than pending.
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
            on_disk = _live_replicas_on_disk(
                dirs,
                [b for b in replica_brokers if b not in offline],
                offline,
                inventoried,
                brokers,
                margin_ms,
            )
            return verdict(
                Verdict.BLOCKED,
                [Cause.REPLICA_BROKER_OFFLINE],
                [
                    f"marked for deletion, paused: replica broker(s) {offline} offline; ZooKeeper keeps the topic "
                    "until every replica confirms",
                    on_disk,
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
    pending: list[tuple[TopicDirectory, DeleteDirSchedule]] = []
    for d in dirs:
        if d.broker_id not in inventoried:
            continue
        if d.kind is DirKind.DELETE:
            schedule = delete_dir_schedule(
                d.age_ms, brokers.get(d.broker_id, BrokerDeletionFacts(d.broker_id, live=True)), margin_ms
            )
            if not schedule.overdue:
                pending.append((d, schedule))
                continue
        leftovers.append(d)
    for kind, cause, what in (
        (DirKind.NORMAL, Cause.PARTITION_DIRS_LEFT, "partition directories"),
        (
            DirKind.DELETE,
            Cause.DELETE_DIRS_PAST_DELAY,
            "-delete directories that the broker's kafka-delete-logs task should have removed "
            f"(log.segment.delete.delay.ms after the rename, or after its start, + {margin_ms} ms)",
        ),
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
    waiting = tuple(d for d, _ in pending)
    if causes:
        if pending:
            evidence.append(_pending_text(pending))
        return verdict(
            Verdict.INCOMPLETE, causes, evidence, leftover_dirs=tuple(leftovers), pending_dirs=waiting
        )
    if pending:
        return verdict(
            Verdict.PENDING_DELETE_DELAY,
            [],
            ["no znodes left; " + _pending_text(pending)],
            blocking_brokers=tuple(sorted({s.broker_id for _, s in pending if s.due_in_ms is None})),
            pending_dirs=waiting,
        )
    return verdict(
        Verdict.DELETED,
        [],
        [f"no znodes left and no directories on the {len(inventoried)} inventoried broker(s)"],
    )


def _live_replicas_on_disk(
    dirs: Iterable[TopicDirectory],
    live: list[int],
    offline: list[int],
    inventoried: frozenset[int],
    brokers: Mapping[int, BrokerDeletionFacts],
    margin_ms: int,
) -> str:
    """What the disks that were read hold of a topic whose deletion an offline replica pauses: the
    controller has the live replicas renamed ``-delete`` at once (StopReplica with delete,
    ``TopicDeletionManager``, 3.3.1) and each broker's ``kafka-delete-logs`` task removes them after
    the delay -- until then they are on disk (a real 3.3.1 cluster: renamed within ~110 ms, removed
    60 s later)."""
    dirs = [d for d in dirs if d.broker_id in inventoried]
    parts, removed = [], []
    for broker_id in live:
        if broker_id not in inventoried:
            parts.append(f"broker {broker_id}: its disk was not read")
            continue
        mine = [d for d in dirs if d.broker_id == broker_id]
        renamed = [d for d in mine if d.kind is DirKind.DELETE]
        others = [d for d in mine if d.kind is not DirKind.DELETE]
        if not mine:
            removed.append(broker_id)
            continue
        facts = brokers.get(broker_id, BrokerDeletionFacts(broker_id, live=True))
        schedules = [(d, delete_dir_schedule(d.age_ms, facts, margin_ms)) for d in renamed]
        texts = []
        if schedules:
            texts.append(_pending_text(schedules).split(": ", 1)[1])
        if others:
            count = len(others)
            texts.append(
                f"{count} partition director{'y' if count == 1 else 'ies'} not renamed yet "
                f"({', '.join(sorted({d.kind.value for d in others}))})"
            )
        parts.append(f"broker {broker_id}: " + "; ".join(texts))
    if removed and not parts:
        parts.append(f"the live replica brokers {removed} hold no directory of it: removed")
    elif removed:
        parts.append(f"broker(s) {removed}: no directory of it: removed")
    for broker_id in offline:
        if broker_id in inventoried:
            held = len([d for d in dirs if d.broker_id == broker_id])
            parts.append(
                f"broker {broker_id} (offline) holds {held} director{'y' if held == 1 else 'ies'} of it"
            )
        else:
            parts.append(
                f"broker {broker_id} (offline, its disk not read) keeps its replicas until it starts"
            )
    return "on disk: " + "; ".join(parts)


def _pending_text(pending: Iterable[tuple[TopicDirectory, DeleteDirSchedule]]) -> str:
    """Per broker: how many ``-delete`` directories its kafka-delete-logs task removes, and when."""
    by_broker: dict[int, list[DeleteDirSchedule]] = {}
    for _, schedule in pending:
        by_broker.setdefault(schedule.broker_id, []).append(schedule)
    parts = []
    for broker_id, schedules in sorted(by_broker.items()):
        first = schedules[0]
        count = f"{len(schedules)} -delete director{'y' if len(schedules) == 1 else 'ies'}"
        if first.due_in_ms is None:
            parts.append(
                f"broker {broker_id} is not running: it deletes its {count} itself once it starts (queued as "
                f"its logs load, removed max(log.segment.delete.delay.ms={first.delay_ms}, "
                f"{first.initial_task_delay_ms}) ms later)"
            )
            continue
        latest = max(s.due_in_ms or 0 for s in schedules)
        when = f"due in {latest / 1000:.1f} s" if latest > 0 else f"due {-latest / 1000:.1f} s ago"
        parts.append(
            f"broker {broker_id}: {count} waiting for its kafka-delete-logs task ({when}: "
            f"log.segment.delete.delay.ms={first.delay_ms} after the rename, not before "
            f"{first.initial_task_delay_ms} ms after the broker's start)"
        )
    return "; ".join(parts)
