"""KAFKA-14190 repair, decided without I/O: diagnose each topic's ids, plan the least invasive fix,
and judge the gates a repair waits on.

Kafka's rules behind it (3.3.1): a broker never overwrites an existing ``partition.metadata``
(``UnifiedLog.assignTopicId``), skips a partition whose LeaderAndIsr carries another id
(``ReplicaManager.hasConsistentTopicId``), and only a *new* controller loads topic ids from
ZooKeeper (``KafkaController.initializeControllerContext`` -> ``processTopicIds``), minting one for a
topic znode without. So there are two repairs:

* ``write_back`` -- when every replica holds the same id: put that id into the topic znode (format
  version 3, partitions and adding/removing replicas unchanged, ``TopicZNode.encode``'s bytes), then,
  if ZooKeeper held another id, move the controller so the new one sends the restored id. No broker
  file is touched and nothing restarts. On a real 3.3.1 cluster full ISRs came back within ~10 s
  (tests/fixtures/real-kafka-3.3.1/README.md). For the precursor (no id in ZooKeeper) the write alone
  prevents the incident: the next controller then loads the id instead of minting one.
* ``file_reset`` -- when the replicas disagree (or the user asks): remove ``partition.metadata`` only
  on the replicas whose id differs from the chosen one, then restart those brokers one at a time,
  the controller last; at load a log without the file takes the id of the next LeaderAndIsr.
  ``auto`` chooses the id every partition's leader holds, so only followers are reset.

Every restart the plan makes is judged by :mod:`.restart_rules` (replicas Kafka would not serve
afterwards, partitions left without a serving leader) before it is planned, and the plan is a list
of typed steps (:mod:`.steps`) the step executor checks again before the run's first write.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import shlex
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .logdir import DirKind
from .model import ClusterState, PartitionInfo, TopicState
from .restart_rules import after_resets, ids_the_controller_sends, leaderless_partitions, restart_risks
from .steps import (
    BrokerRestart,
    ControllerMove,
    FileRemoval,
    HealthWait,
    PlannedFile,
    ReplicaDisk,
    Step,
    TopicIdWrite,
    remaining,
)
from .uuid import KafkaUuid
from .znodes import TopicAssignment

PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PLAN_FORMAT = "kafka-zk-topic-id-repair-plan"
PartitionKey = tuple[str, int]


class TopicIdCase(enum.StrEnum):
    """What a topic's ids say, as far as the inventory covers it."""

    CONSISTENT = "consistent"  # ZooKeeper and every replica agree (or nothing holds an id yet)
    PRECURSOR = "precursor"  # ZooKeeper has no id, every replica holds the same one
    DIVERGED = "diverged"  # ZooKeeper has X, every replica holds the same Y != X
    SPLIT = "split"  # the replicas disagree among themselves
    UNKNOWN = "unknown"  # not every replica could be read: refuse to act


class Strategy(enum.StrEnum):
    AUTO = "auto"
    WRITE_BACK = "write_back"
    FILE_RESET = "file_reset"


class RepairPlanError(ValueError):
    """The plan cannot be made as asked (bad strategy, unknown id, nothing to act on)."""


@dataclass(frozen=True)
class ReplicaId:
    """One live partition directory of the topic and the id its ``partition.metadata`` holds."""

    broker_id: int
    partition: int
    log_dir: str
    dir_name: str
    topic_id: str | None  # None: no file
    error: str | None = None  # the file exists but cannot be read

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}"

    @property
    def where(self) -> str:
        return f"broker {self.broker_id}:{self.path}"


@dataclass(frozen=True)
class TopicIdDiagnosis:
    """Per topic: ZooKeeper's id, every replica's, what is missing and what the evidence does not cover."""

    topic: str
    case: TopicIdCase
    reason: str
    zookeeper_id: str | None
    znode_path: str
    znode_version: int | None
    znode_format: int | None
    replicas: tuple[ReplicaId, ...]
    uncovered_brokers: tuple[int, ...] = ()  # hold a replica but were not inventoried
    missing_dirs: tuple[tuple[int, int], ...] = ()  # (broker, partition) assigned but no directory
    disk_id: str | None = None  # the one id every replica holds (precursor, diverged, consistent)

    @property
    def ids_on_disk(self) -> dict[str, list[str]]:
        """Each id found on disk -> the ``broker:partition`` replicas holding it."""
        out: dict[str, list[str]] = defaultdict(list)
        for r in self.replicas:
            if r.topic_id is not None:
                out[r.topic_id].append(f"{r.broker_id}:{r.partition}")
        return {k: sorted(v, key=_replica_key) for k, v in sorted(out.items())}

    @property
    def without_file(self) -> tuple[ReplicaId, ...]:
        return tuple(r for r in self.replicas if r.topic_id is None and r.error is None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "case": self.case.value,
            "reason": self.reason,
            "zookeeper_id": self.zookeeper_id,
            "znode_path": self.znode_path,
            "znode_version": self.znode_version,
            "znode_format": self.znode_format,
            "disk_id": self.disk_id,
            "ids_on_disk": self.ids_on_disk,
            "replicas": [dataclasses.asdict(r) | {"path": r.path} for r in self.replicas],
            "without_partition_metadata": [f"broker {r.broker_id}:{r.path}" for r in self.without_file],
            "missing_dirs": [{"broker_id": b, "partition": p} for b, p in self.missing_dirs],
            "uncovered_brokers": list(self.uncovered_brokers),
        }


def _replica_key(text: str) -> tuple[int, int]:
    broker, partition = text.split(":")
    return int(broker), int(partition)


def diagnose_topic(
    state: TopicState | None,
    topic: str,
    dirs: Iterable[Any],
    inventoried: Iterable[int],
    *,
    znode_version: int | None = None,
) -> TopicIdDiagnosis:
    """Classify one topic from ZooKeeper's record and the inventory's directories.

    :param dirs: the inventory's directories (``kafka.audit.ReplicaDir``); other topics' and
        non-live (``-delete``, ``-future``, ``-stray``) directories are ignored.
    :param inventoried: brokers whose disks were read in full.
    """
    covered = set(inventoried)
    path = f"/brokers/topics/{topic}"
    if state is None:
        return TopicIdDiagnosis(
            topic, TopicIdCase.UNKNOWN, "no readable topic znode in ZooKeeper", None, path, None, None, ()
        )
    replicas = tuple(
        sorted(
            (
                ReplicaId(
                    d.broker_id,
                    int(d.partition),
                    d.log_dir,
                    d.name,
                    str(d.topic_id) if d.topic_id is not None else None,
                    d.metadata_error,
                )
                for d in dirs
                if d.topic == topic and d.kind is DirKind.NORMAL and d.partition is not None
            ),
            key=lambda r: (r.broker_id, r.partition, r.log_dir),
        )
    )
    zk_id = str(state.topic_id) if state.topic_id is not None else None
    assigned = {(b, p) for p, info in state.partitions.items() for b in info.replicas}
    present = {(r.broker_id, r.partition) for r in replicas}
    uncovered = tuple(sorted({b for b, _ in assigned if b not in covered}))
    missing = tuple(sorted((b, p) for b, p in assigned - present if b in covered))
    version = znode_version if znode_version is not None else state.zk_version
    base = dict(
        topic=topic,
        zookeeper_id=zk_id,
        znode_path=state.path,
        znode_version=version,
        znode_format=state.format_version,
        replicas=replicas,
        uncovered_brokers=uncovered,
        missing_dirs=missing,
    )
    unreadable = [r for r in replicas if r.error]
    if unreadable:
        return TopicIdDiagnosis(
            case=TopicIdCase.UNKNOWN,
            reason="partition.metadata unreadable at "
            + ", ".join(r.where for r in unreadable)
            + " (Kafka takes that log dir offline): fix the file first",
            **base,
        )
    if uncovered:
        return TopicIdDiagnosis(
            case=TopicIdCase.UNKNOWN,
            reason=f"brokers {list(uncovered)} hold replicas of {topic} but their disks were not read: "
            "their ids are unknown, refusing to act",
            **base,
        )
    ids = sorted({r.topic_id for r in replicas if r.topic_id is not None})
    if len(ids) > 1:
        return TopicIdDiagnosis(
            case=TopicIdCase.SPLIT,
            reason=f"replicas hold {len(ids)} different ids ({', '.join(ids)}); ZooKeeper has {zk_id or 'none'}",
            **base,
        )
    if not ids:
        return TopicIdDiagnosis(
            case=TopicIdCase.CONSISTENT,
            reason="no replica holds an id yet: they adopt ZooKeeper's on the next LeaderAndIsr",
            **base,
        )
    disk = ids[0]
    if zk_id is None:
        return TopicIdDiagnosis(
            case=TopicIdCase.PRECURSOR,
            reason=f"the topic znode has no topic_id while every replica holds {disk}: the next controller "
            "failover would mint a new id and every replica would reject it",
            disk_id=disk,
            **base,
        )
    if zk_id != disk:
        return TopicIdDiagnosis(
            case=TopicIdCase.DIVERGED,
            reason=f"ZooKeeper has {zk_id}, every replica holds {disk}: brokers skip this topic's "
            'LeaderAndIsr ("Topic ID in memory ... does not match")',
            disk_id=disk,
            **base,
        )
    return TopicIdDiagnosis(
        case=TopicIdCase.CONSISTENT, reason="ZooKeeper and every replica agree", disk_id=disk, **base
    )


def diagnose(
    state: ClusterState, dirs: Sequence[Any], inventoried: Iterable[int], topics: Iterable[str] | None = None
) -> list[TopicIdDiagnosis]:
    """Diagnose ``topics`` (default: every topic in ZooKeeper), sorted by name."""
    covered = frozenset(inventoried)
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for d in dirs:
        if d.topic is not None:
            by_topic[d.topic].append(d)
    names = sorted(set(topics) if topics is not None else state.topics)
    return [diagnose_topic(state.topics.get(t), t, by_topic.get(t, ()), covered) for t in names]


# ---------------------------------------------------------------------------------------------
# Strategy and plan
# ---------------------------------------------------------------------------------------------


def choose_strategy(diagnosis: TopicIdDiagnosis, requested: Strategy) -> tuple[Strategy | None, str]:
    """(strategy, why) for one topic; None means nothing is done to it (the why says if it is refused)."""
    case = diagnosis.case
    if case is TopicIdCase.CONSISTENT:
        return None, "nothing to repair: " + diagnosis.reason
    if case is TopicIdCase.UNKNOWN:
        return None, "refused: " + diagnosis.reason
    if requested is Strategy.AUTO:
        if case is TopicIdCase.SPLIT:
            return (
                Strategy.FILE_RESET,
                "replicas disagree: only resetting the odd ones out can make them agree",
            )
        return Strategy.WRITE_BACK, "every replica agrees: write their id back, no file touched, no restart"
    if requested is Strategy.WRITE_BACK and case is TopicIdCase.SPLIT:
        return (
            None,
            "refused: write_back needs every replica to hold the same id; these disagree (use file_reset)",
        )
    if requested is Strategy.FILE_RESET and case is TopicIdCase.PRECURSOR:
        return None, (
            "refused: ZooKeeper has no id to reset the replicas to; write_back fixes a precursor without restarts"
        )
    return requested, f"{requested.value} as requested"


FileToReset = PlannedFile  # one file removed on a broker (its bytes go to the rollback artefact first)


@dataclass
class RepairPlan:
    """Ordered typed steps; each has a stable ``id`` so a retried run skips what already completed.

    ``warnings`` name what the run will do to the repaired topics on its way (a partition without a
    serving leader until the next broker of the run restarts), for the plan's summary.
    """

    strategy: str
    topics: dict[str, dict[str, Any]]  # topic -> diagnosis + chosen strategy, target id, why
    steps: list[Step] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    untouched: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def actionable(self) -> bool:
        return bool(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "strategy": self.strategy,
            "topics": self.topics,
            "steps": [s.to_dict() for s in self.steps],
            "refused": self.refused,
            "untouched": self.untouched,
            "warnings": self.warnings,
        }


def topic_znode_with_id(data: bytes, path: str, topic_id: str) -> bytes:
    """The topic znode as a 2.8+ controller writes it with ``topic_id`` (``TopicZNode.encode``, v3).

    Partitions, adding and removing replicas are kept; only the id (and the format version) change.
    """
    current = TopicAssignment.decode(data, path)
    new = dataclasses.replace(current, topic_id=KafkaUuid.parse(topic_id), version=3)
    encoded = new.encode()
    again = TopicAssignment.decode(encoded, path)
    if (again.partitions, again.adding_replicas, again.removing_replicas) != (
        current.partitions,
        current.adding_replicas,
        current.removing_replicas,
    ):  # the codec is exact; this guards the one write this repair makes
        raise RepairPlanError(f"{path}: re-encoding with the id would change the assignment; refusing")
    return encoded


def write_back_effect(topics: Sequence[str], moved: Iterable[str]) -> str:
    """What one ``write_back`` run of ``topics`` does, as :func:`plan_repair` builds it: a
    :class:`TopicIdWrite` per topic (the id every replica holds, into its znode: format v3, partitions
    unchanged), then ONE :class:`ControllerMove` only when a topic's ZooKeeper id was another one
    (``moved``: the running controller holds that old id); a topic without an id in ZooKeeper (the
    KAFKA-14190 precursor) needs no move -- the next controller loads the id instead of minting one. No
    broker file is touched, no broker restarts."""
    names = ", ".join(topics)
    moved = sorted(moved)
    if moved:
        move = (
            f", then moves the controller once, after every write (a new controller sends the restored id of "
            f"{', '.join(moved)}, whose ZooKeeper id was another)"
        )
    else:
        move = (
            "; no controller move (a topic without an id in ZooKeeper only needs it written: the next controller "
            "loads it instead of minting a new one)"
        )
    return (
        f"write_back writes the id every replica holds into the topic znode of {names} (format v3, partitions "
        f"unchanged){move}; no broker file is touched, no broker restarts"
    )


def replica_disk(diagnoses: Iterable[TopicIdDiagnosis]) -> list[ReplicaDisk]:
    """Every live replica directory the diagnoses saw, as the restart rules read them."""
    return [
        ReplicaDisk(r.broker_id, d.topic, r.partition, r.log_dir, r.topic_id, r.error)
        for d in diagnoses
        for r in d.replicas
    ]


def plan_repair(
    diagnoses: Sequence[TopicIdDiagnosis],
    znodes: Mapping[str, tuple[bytes, int]],
    *,
    strategy: Strategy | str = Strategy.AUTO,
    chosen_id: str | None = None,
    reset_leader_epoch_checkpoint: bool = False,
    controller_id: int | None = None,
    live_brokers: Iterable[int] = (),
    others: Sequence[TopicIdDiagnosis] = (),
    partitions: Mapping[PartitionKey, PartitionInfo] | None = None,
) -> RepairPlan:
    """The steps that repair ``diagnoses``; pure.

    :param znodes: topic -> (current topic znode bytes, zkVersion): the write is versioned against it.
    :param chosen_id: for ``file_reset``: the id the replicas must end with (default ZooKeeper's);
        another id is written into the topic znode first and must be one some replica holds.
    :param reset_leader_epoch_checkpoint: also remove the reset replicas' ``leader-epoch-checkpoint``.
    :param controller_id: the active controller (restarted last; moved when ZooKeeper's id changes).
    :param live_brokers: registered brokers; a reset on a broker that is not running is refused.
    :param others: the diagnoses of the cluster's other topics (every topic, for the restart rules).
        A controller move (or a restart of the controller) is refused while another topic is a
        precursor -- the new controller would mint it a new id, which is KAFKA-14190 itself.
    :param partitions: every partition's assignment, leader and ISR; needed as soon as the plan
        restarts a broker: a restart is planned only when :func:`~.restart_rules.restart_risks`
        finds no replica on it that Kafka would not serve afterwards and no partition left without
        a serving leader (other topics') -- else the topics needing it are refused, naming them.
    """
    try:
        requested = Strategy(strategy)
    except ValueError:
        raise RepairPlanError(
            f"strategy must be one of {[s.value for s in Strategy]}, not {strategy!r}"
        ) from None
    if chosen_id is not None:
        KafkaUuid.parse(chosen_id)  # a typo fails here, before any plan
    live = set(live_brokers)
    plan = RepairPlan(strategy=requested.value, topics={})
    writes: dict[str, TopicIdWrite] = {}
    move_for: list[str] = []
    resets: dict[int, list[PlannedFile]] = defaultdict(list)
    for d in diagnoses:
        chosen, why = choose_strategy(d, requested)
        entry = {**d.to_dict(), "strategy": chosen.value if chosen else None, "why": why}
        plan.topics[d.topic] = entry
        if chosen is None:
            (plan.refused if why.startswith("refused") else plan.untouched)[d.topic] = why
            continue
        if d.topic not in znodes:
            plan.refused[d.topic] = "refused: the topic znode could not be read for the versioned write"
            entry["strategy"] = None
            continue
        data, version = znodes[d.topic]
        leaders_id = _leaders_id(d, partitions, live) if requested is Strategy.AUTO else None
        if chosen is Strategy.WRITE_BACK:
            target = d.disk_id
        else:
            target = chosen_id or leaders_id or d.zookeeper_id
            if target is None:
                plan.refused[d.topic] = (
                    f"refused: ZooKeeper has no id for {d.topic}; name the id the replicas must keep (chosen_id)"
                )
                entry["strategy"] = None
                continue
            if target not in d.ids_on_disk and chosen_id is not None:
                plan.refused[d.topic] = f"refused: no replica of {d.topic} holds the chosen id {chosen_id}"
                entry["strategy"] = None
                continue
        assert target is not None
        entry["target_id"] = target
        if target != d.zookeeper_id:
            writes[d.topic] = TopicIdWrite(
                id=f"write-topic-id:{d.topic}",
                topic=d.topic,
                path=d.znode_path,
                expected_version=version,
                old_data=data,
                new_data=topic_znode_with_id(data, d.znode_path, target),
                old_topic_id=d.zookeeper_id,
                topic_id=target,
            )
            if d.zookeeper_id is not None:
                move_for.append(d.topic)  # the running controller holds the old id in memory
        if chosen is Strategy.FILE_RESET:
            names = [PARTITION_METADATA] + (
                [LEADER_EPOCH_CHECKPOINT] if reset_leader_epoch_checkpoint else []
            )
            for r in d.replicas:
                if r.topic_id is None or r.topic_id == target:
                    continue
                for name in names:
                    resets[r.broker_id].append(
                        PlannedFile(
                            r.broker_id, d.topic, r.partition, r.log_dir, r.dir_name, name, r.topic_id, target
                        )
                    )
    stopped = sorted(b for b in resets if b not in live)
    if stopped:
        for topic in sorted({f.topic for b in stopped for f in resets[b]}):
            _refuse(
                plan,
                topic,
                f"refused: brokers {stopped} hold replicas to reset but are not running; a restart of a "
                "stopped broker is not this repair's decision: start it (it will skip the topic) and plan again",
            )
    disk = replica_disk([*diagnoses, *others])
    zookeeper_ids = {d.topic: d.zookeeper_id for d in [*diagnoses, *others]}
    restart_facts: dict[int, tuple[ReplicaDisk, ...]] = {}
    for _ in range(len(plan.topics) + 1):  # a refusal drops steps, which may change another verdict
        writes, move_for, resets = _without_refused(plan, writes, move_for, resets)
        moves = _controller_moves(writes, move_for, resets)
        if _refuse_precursor_collateral(plan, writes, moves, resets, others, controller_id):
            continue
        if not resets:
            break
        if partitions is None:
            raise RepairPlanError("the plan restarts brokers: the restart rules need every partition's state")
        if not _refuse_unsafe_restarts(
            plan, writes, moves, resets, partitions, live, disk, zookeeper_ids, controller_id, restart_facts
        ):
            break
    writes, move_for, resets = _without_refused(plan, writes, move_for, resets)
    moves = _controller_moves(writes, move_for, resets)
    plan.steps.extend(writes[t] for t in sorted(writes))
    if moves:
        plan.steps.append(
            ControllerMove(
                id="move-controller", topics=tuple(sorted(moves)), controller_at_plan=controller_id
            )
        )
    # the written topics whose replicas all agree then; a reset topic's odd replicas rejoin at their restarts
    settled = sorted(set(writes) - {f.topic for fs in resets.values() for f in fs})
    if settled:
        plan.steps.append(HealthWait(id="wait-healthy:after-write", topics=tuple(settled)))
    order = sorted(resets, key=lambda b: (b == controller_id, b))  # the controller last
    for broker in order:
        files = tuple(sorted(resets[broker], key=lambda f: (f.topic, f.partition, f.name)))
        plan.steps.append(FileRemoval(id=f"reset-files:{broker}", broker_id=broker, files=files))
        plan.steps.append(
            BrokerRestart(
                id=f"restart-broker:{broker}",
                broker_id=broker,
                is_controller=broker == controller_id,
                topics=tuple(sorted({f.topic for f in files})),
                resets=_reset_keys(files),
                disk=restart_facts.get(broker, ()),
            )
        )
    return plan


def _leaders_id(
    d: TopicIdDiagnosis, partitions: Mapping[PartitionKey, PartitionInfo] | None, live: Collection[int]
) -> str | None:
    """The one id the replicas of every serving leader of the topic hold, else None.

    ``auto`` resets a split topic to it: only followers lose their file, so no restart of the run
    moves the topic's leadership onto a replica the controller's id would be rejected by, and each
    reset follower fetches from a leader holding the same id (Fetch v13 checks it, IBP >= 3.1).
    """
    if partitions is None:
        return None
    by_replica = {(r.broker_id, r.partition): r.topic_id for r in d.replicas}
    ids = set()
    for (topic, p), info in partitions.items():
        if topic != d.topic or info.leader is None or info.leader < 0 or info.leader not in live:
            continue
        held = by_replica.get((info.leader, p))
        if held is not None:
            ids.add(held)
    return ids.pop() if len(ids) == 1 else None


def _controller_moves(
    writes: Mapping[str, TopicIdWrite], move_for: Sequence[str], resets: Mapping[int, Sequence[PlannedFile]]
) -> list[str]:
    """The topics a controller move is for. Besides the writes over another id (the running
    controller holds that id), a run that writes ids *and* restarts brokers moves the controller
    after its writes: the running controller's in-memory id of a topic ZooKeeper showed none for is
    unknown, and a restarted broker takes what the controller sends."""
    if move_for or not (writes and resets):
        return list(move_for)
    return sorted(writes)


def _reset_keys(files: Iterable[PlannedFile]) -> tuple[PartitionKey, ...]:
    return tuple(sorted({(f.topic, f.partition) for f in files if f.name == PARTITION_METADATA}))


def _refuse(plan: RepairPlan, topic: str, why: str) -> None:
    plan.refused.setdefault(topic, why)
    if topic in plan.topics:
        plan.topics[topic]["strategy"] = None


def _without_refused(
    plan: RepairPlan,
    writes: Mapping[str, TopicIdWrite],
    move_for: Sequence[str],
    resets: Mapping[int, Sequence[PlannedFile]],
) -> tuple[dict[str, TopicIdWrite], list[str], dict[int, list[PlannedFile]]]:
    refused = set(plan.refused)
    kept: dict[int, list[PlannedFile]] = defaultdict(list)
    for b, fs in resets.items():
        mine = [f for f in fs if f.topic not in refused]
        if mine:
            kept[b] = mine
    return (
        {t: w for t, w in writes.items() if t not in refused},
        [t for t in move_for if t not in refused],
        kept,
    )


def _refuse_precursor_collateral(
    plan: RepairPlan,
    writes: Mapping[str, TopicIdWrite],
    move_for: Sequence[str],
    resets: Mapping[int, Sequence[PlannedFile]],
    others: Sequence[TopicIdDiagnosis],
    controller_id: int | None,
) -> bool:
    """Refuse the topics whose repair moves the controller while another topic is a precursor
    (True when one was refused)."""
    fixed = set(writes) | {f.topic for fs in resets.values() for f in fs}
    precursors = sorted(o.topic for o in others if o.topic not in fixed and o.case is TopicIdCase.PRECURSOR)
    moves_controller = bool(move_for) or (controller_id is not None and controller_id in resets)
    if not (moves_controller and precursors):
        return False
    movers = set(move_for) | ({f.topic for f in resets[controller_id]} if controller_id in resets else set())
    if not movers - set(plan.refused):
        return False
    for topic in sorted(movers):
        _refuse(
            plan,
            topic,
            f"refused: its repair moves the controller, and the new controller would mint a new id for "
            f"precursor topic(s) {precursors} (KAFKA-14190 itself): include them in this run",
        )
    return True


def _refuse_unsafe_restarts(
    plan: RepairPlan,
    writes: Mapping[str, TopicIdWrite],
    move_for: Sequence[str],
    resets: Mapping[int, Sequence[PlannedFile]],
    partitions: Mapping[PartitionKey, PartitionInfo],
    live: set[int],
    disk: Sequence[ReplicaDisk],
    zookeeper_ids: Mapping[str, str | None],
    controller_id: int | None,
    restart_facts: dict[int, tuple[ReplicaDisk, ...]],
) -> bool:
    """Judge every planned restart with :func:`restart_risks`; refuse the topics needing an unsafe
    one. True when something was refused (the caller plans again without those topics)."""
    written = {t: w.topic_id for t, w in writes.items()}
    refused_any = False
    plan.warnings.clear()
    adopted: dict[tuple[int, str, int], str] = {}  # replicas reset by the restarts before this one
    for broker in sorted(resets, key=lambda b: (b == controller_id, b)):
        mine = {(t, p) for (t, p), info in partitions.items() if broker in info.replicas}
        facts = tuple(d for d in disk if (d.topic, d.partition) in mine)
        restart_facts[broker] = facts
        sent = ids_the_controller_sends(
            zookeeper_ids, new_controller=bool(move_for) or broker == controller_id, written=written
        )
        risks = restart_risks(
            broker, partitions, live, after_resets(facts, adopted), sent, resets=_reset_keys(resets[broker])
        )
        adopted.update(
            {
                (f.broker_id, f.topic, f.partition): f.target_id
                for f in resets[broker]
                if f.name == PARTITION_METADATA
            }
        )
        if risks.safe:
            continue
        why = "refused: " + "; ".join(str(r) for r in risks.refusals())
        for topic in sorted({f.topic for f in resets[broker]}):
            if topic not in plan.refused:
                _refuse(plan, topic, why)
                refused_any = True
    return refused_any


def zookeeper_shell_command(
    hosts: Sequence[str], chroot: str, verb: str, path: str, data: bytes | None = None
) -> str:
    """A ``zookeeper-shell.sh`` command that runs as written against the cluster's chroot.

    ZooKeeper's client takes the chroot as a suffix of the connect string
    (``host1:2181,host2:2181/kafka``); paths after it are chroot-relative, as Kafka's are.
    Every argument is shell-quoted (the data is one argument, so ``ZooKeeperMain`` stores it as is).
    """
    connect = ",".join(hosts) + (chroot if chroot not in ("", "/") else "")
    parts = ["zookeeper-shell.sh", connect, verb, path]
    if data is not None:
        parts.append(data.decode("utf-8"))
    return " ".join(shlex.quote(p) for p in parts)


def rollback_record(
    steps: Sequence[Step], hosts: Sequence[str], chroot: str, undo: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``rollback.json``: what puts each planned ZooKeeper write back (file copies are recorded when
    taken, in ``rollback-files.json``). ``undo`` first: the ``kafka_zk_undo`` DAG with the exact conf
    (:func:`~.undo.undo_record`), which checks each znode's version and bytes and reaches secured
    ensembles; each entry's ``restore`` then ``then`` (a controller move that makes a new controller
    load the old bytes) run as written, by hand, as the fallback (no TLS/SASL options)."""
    entries = []
    for step in steps:
        if not isinstance(step, TopicIdWrite):
            continue
        entries.append(
            {
                "path": step.path,
                "version_before": step.expected_version,
                "data_b64": base64.b64encode(step.old_data).decode(),
                "data": step.old_data.decode("utf-8", "replace"),
                "restore": zookeeper_shell_command(hosts, chroot, "set", step.path, step.old_data),
                "then": zookeeper_shell_command(hosts, chroot, "delete", "/controller"),
            }
        )
    from .undo import BY_HAND

    connect = ",".join(hosts) + (chroot if chroot not in ("", "/") else "")
    return {
        "format": "kafka-zk-topic-id-repair-rollback",
        "target": connect,
        **({"undo": dict(undo)} if undo else {}),
        "by_hand": f"each entry's restore, then its then: {BY_HAND}",
        "znodes": entries,
    }


def describe_plan(plan: Mapping[str, Any]) -> str:
    """The plan (``plan.json``'s content) as a person reads it at 3 a.m.: per topic what is wrong,
    then every step."""
    from .steps import step_from_dict

    lines = [f"topicId repair plan for {plan['cluster']} ({plan['strategy']}); snapshot {plan['snapshot']}"]
    for topic, entry in sorted(plan["topics"].items()):
        lines.append(f"- {topic}: {entry['case'].upper()}: {entry['reason']}")
        lines.append(f"  -> {entry['strategy'] or 'no action'}: {entry['why']}")
        if entry.get("ids_on_disk"):
            for topic_id, replicas in entry["ids_on_disk"].items():
                lines.append(f"     id {topic_id} on {len(replicas)} replica(s): {', '.join(replicas[:12])}")
        if entry.get("without_partition_metadata"):
            lines.append(
                f"     without partition.metadata: {', '.join(entry['without_partition_metadata'][:6])}"
            )
    for topic, why in sorted((plan.get("unknown") or {}).items()):
        lines.append(f"- {topic}: UNKNOWN, not planned: {why}")
    if not plan["steps"]:
        lines.append("Nothing to do.")
    for n, record in enumerate(plan["steps"], 1):
        step = step_from_dict(record)
        lines.append(f"{n}. {step.describe()}")
        if isinstance(step, FileRemoval):
            lines.extend(f"     {f.path} (holds {f.topic_id_on_disk})" for f in step.files[:20])
    for warning in plan.get("warnings") or ():
        lines.append(f"note: {warning}")
    return "\n".join(lines) + "\n"


def remaining_steps(steps: Sequence[Step], completed: Iterable[str]) -> list[Step]:
    """The steps still to run, in order: a retried run continues after the last completed one."""
    return remaining(steps, completed)


# ---------------------------------------------------------------------------------------------
# Gates
# ---------------------------------------------------------------------------------------------


def under_replicated(partitions: Mapping[PartitionKey, PartitionInfo]) -> set[PartitionKey]:
    """The partitions the model calls under-replicated (:attr:`PartitionInfo.under_replicated`)."""
    return {k for k, info in partitions.items() if info.under_replicated}


def topics_healthy(
    partitions: Mapping[PartitionKey, PartitionInfo], topics: Iterable[str], live: Iterable[int]
) -> list[str]:
    """Why the topics are not healthy yet (empty: healthy): every partition with a replica on a
    running broker has a leader, and every such replica is in the ISR. Replicas on stopped brokers
    are not waited for (:func:`offline_for_stopped_brokers` names those partitions)."""
    wanted = set(topics)
    alive = set(live)
    waiting = []
    for (topic, p), h in sorted(partitions.items()):
        if topic not in wanted or not alive.intersection(h.replicas):
            continue
        if h.leader is None or h.leader < 0:
            waiting.append(f"{topic}-{p} has no leader")
            continue
        out = [b for b in h.replicas if b in alive and b not in h.isr]
        if out:
            waiting.append(f"{topic}-{p}: brokers {out} not in the ISR {list(h.isr)}")
    return waiting


def offline_for_stopped_brokers(
    partitions: Mapping[PartitionKey, PartitionInfo], topics: Iterable[str], live: Iterable[int]
) -> list[str]:
    """Partitions of ``topics`` whose every replica is on a stopped broker: no repair can bring them
    back; they return with their brokers."""
    wanted, alive = set(topics), set(live)
    return [
        f"{t}-{p} (replicas {list(h.replicas)} all stopped)"
        for (t, p), h in sorted(partitions.items())
        if t in wanted and not alive.intersection(h.replicas)
    ]


def restart_gate(
    broker_id: int,
    epoch_before: int | None,
    live_epochs: Mapping[int, int],
    partitions: Mapping[PartitionKey, PartitionInfo],
    baseline_urp: int,
    baseline_leaderless: Iterable[PartitionKey] = (),
) -> list[str]:
    """Why broker ``broker_id``'s restart has not passed its gate yet (empty: passed).

    Passed when the broker registered again (a new broker epoch: the registration's czxid), every
    partition it replicates that has a leader holds it in the ISR, the cluster's under-replicated
    partition count is back at (or below) the count before the run, and no partition is without a
    live leader except those that already were before the run (``baseline_leaderless``: e.g. the
    partitions of a broker that was down). A restart that leaves a partition leaderless -- a log dir
    Kafka took offline, a broker that did not come back -- holds the gate.
    """
    waiting = []
    epoch = live_epochs.get(broker_id)
    if epoch is None:
        waiting.append(f"broker {broker_id} is not registered in /brokers/ids")
    elif epoch_before is not None and epoch == epoch_before:
        waiting.append(
            f"broker {broker_id} still has its old registration (epoch {epoch}): not restarted yet"
        )
    else:
        out = [
            f"{t}-{p}"
            for (t, p), h in sorted(partitions.items())
            if broker_id in h.replicas and h.leader is not None and h.leader >= 0 and broker_id not in h.isr
        ]
        if out:
            shown = ", ".join(out[:10]) + (f" and {len(out) - 10} more" if len(out) > 10 else "")
            waiting.append(f"broker {broker_id} not back in the ISR of {shown}")
    urp = len(under_replicated(partitions))
    if urp > baseline_urp:
        waiting.append(f"{urp} under-replicated partitions, {baseline_urp} before the run")
    leaderless = sorted(leaderless_partitions(partitions, live_epochs) - set(baseline_leaderless))
    if leaderless:
        shown = ", ".join(f"{t}-{p}" for t, p in leaderless[:10])
        more = f" and {len(leaderless) - 10} more" if len(leaderless) > 10 else ""
        waiting.append(f"partitions without a leader (they had one before the run): {shown}{more}")
    return waiting
