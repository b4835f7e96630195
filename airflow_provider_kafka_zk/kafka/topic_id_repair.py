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
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .logdir import DirKind
from .model import ClusterState, PartitionInfo, TopicState
from .uuid import KafkaUuid
from .znodes import CONTROLLER, TopicAssignment

PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PLAN_FORMAT = "kafka-zk-topic-id-repair-plan"


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


@dataclass(frozen=True)
class FileToReset:
    """One file removed on a broker (its bytes go to the rollback artefact first)."""

    broker_id: int
    topic: str
    partition: int
    log_dir: str
    dir_name: str
    name: str
    topic_id_on_disk: str | None
    target_id: str  # what the replica adopts at restart (ZooKeeper's id once the plan's writes ran)

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}/{self.name}"


@dataclass
class RepairPlan:
    """Ordered steps; each has a stable ``id`` so a retried run skips what already completed."""

    strategy: str
    topics: dict[str, dict[str, Any]]  # topic -> diagnosis + chosen strategy, target id, why
    steps: list[dict[str, Any]] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    untouched: dict[str, str] = field(default_factory=dict)

    @property
    def actionable(self) -> bool:
        return bool(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "strategy": self.strategy,
            "topics": self.topics,
            "steps": self.steps,
            "refused": self.refused,
            "untouched": self.untouched,
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
) -> RepairPlan:
    """The steps that repair ``diagnoses``; pure.

    :param znodes: topic -> (current topic znode bytes, zkVersion): the write is versioned against it.
    :param chosen_id: for ``file_reset``: the id the replicas must end with (default ZooKeeper's);
        another id is written into the topic znode first and must be one some replica holds.
    :param reset_leader_epoch_checkpoint: also remove the reset replicas' ``leader-epoch-checkpoint``.
    :param controller_id: the active controller (restarted last; moved when ZooKeeper's id changes).
    :param live_brokers: registered brokers; a reset on a broker that is not running is refused.
    :param others: the diagnoses of the cluster's other topics. A controller move (or a restart of
        the controller) is refused while another topic is a precursor -- the new controller would
        mint it a new id, which is KAFKA-14190 itself -- and a broker restart while another topic's
        replicas on that broker disagree with ZooKeeper (the restarted broker would skip them and
        leave their ISR).
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
    writes: list[dict[str, Any]] = []
    move_for: list[str] = []
    resets: dict[int, list[FileToReset]] = defaultdict(list)
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
        if chosen is Strategy.WRITE_BACK:
            target = d.disk_id
        else:
            target = chosen_id or d.zookeeper_id
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
        entry["target_id"] = target
        if target != d.zookeeper_id:
            writes.append(
                {
                    "kind": "write_topic_id",
                    "id": f"write-topic-id:{d.topic}",
                    "topic": d.topic,
                    "path": d.znode_path,
                    "expected_version": version,
                    "old_topic_id": d.zookeeper_id,
                    "topic_id": target,
                    "old_data_b64": base64.b64encode(data).decode(),
                    "new_data_b64": base64.b64encode(
                        topic_znode_with_id(data, d.znode_path, target)
                    ).decode(),
                }
            )
            if d.zookeeper_id is not None:
                move_for.append(d.topic)  # the running controller holds the old id in memory
        if chosen is Strategy.FILE_RESET:
            for r in d.replicas:
                if r.topic_id is None or r.topic_id == target:
                    continue
                names = [PARTITION_METADATA] + (
                    [LEADER_EPOCH_CHECKPOINT] if reset_leader_epoch_checkpoint else []
                )
                for name in names:
                    resets[r.broker_id].append(
                        FileToReset(
                            r.broker_id, d.topic, r.partition, r.log_dir, r.dir_name, name, r.topic_id, target
                        )
                    )
    stopped = sorted(b for b in resets if b not in live)
    if stopped:
        for topic in sorted({f.topic for b in stopped for f in resets[b]}):
            plan.refused[topic] = (
                f"refused: brokers {stopped} hold replicas to reset but are not running; a restart of a "
                "stopped broker is not this repair's decision: start it (it will skip the topic) and plan again"
            )
            plan.topics[topic]["strategy"] = None
        refused_topics = set(plan.refused)
        writes = [w for w in writes if w["topic"] not in refused_topics]
        move_for = [t for t in move_for if t not in refused_topics]
        resets = defaultdict(
            list, {b: [f for f in fs if f.topic not in refused_topics] for b, fs in resets.items()}
        )
        resets = defaultdict(list, {b: fs for b, fs in resets.items() if fs})
    _refuse_collateral(plan, writes, move_for, resets, others, controller_id)
    refused_topics = set(plan.refused)
    writes = [w for w in writes if w["topic"] not in refused_topics]
    move_for = [t for t in move_for if t not in refused_topics]
    resets = defaultdict(
        list, {b: [f for f in fs if f.topic not in refused_topics] for b, fs in resets.items()}
    )
    resets = defaultdict(list, {b: fs for b, fs in resets.items() if fs})
    plan.steps.extend(writes)
    written_topics = sorted(w["topic"] for w in writes)
    if move_for:
        plan.steps.append(
            {
                "kind": "move_controller",
                "id": "move-controller",
                "path": CONTROLLER,
                "controller_at_plan": controller_id,
                "topics": sorted(move_for),
            }
        )
    if written_topics:
        plan.steps.append(
            {"kind": "wait_healthy", "id": "wait-healthy:after-write", "topics": written_topics}
        )
    order = sorted(resets, key=lambda b: (b == controller_id, b))  # the controller last
    for broker in order:
        files = sorted(resets[broker], key=lambda f: (f.topic, f.partition, f.name))
        plan.steps.append(
            {
                "kind": "reset_files",
                "id": f"reset-files:{broker}",
                "broker_id": broker,
                "files": [dataclasses.asdict(f) | {"path": f.path} for f in files],
            }
        )
        plan.steps.append(
            {
                "kind": "restart_broker",
                "id": f"restart-broker:{broker}",
                "broker_id": broker,
                "is_controller": broker == controller_id,
                "topics": sorted({f.topic for f in files}),
            }
        )
    return plan


def _refuse_collateral(
    plan: RepairPlan,
    writes: Sequence[Mapping[str, Any]],
    move_for: Sequence[str],
    resets: Mapping[int, Sequence[FileToReset]],
    others: Sequence[TopicIdDiagnosis],
    controller_id: int | None,
) -> None:
    """Refuse the topics whose repair would break another topic (see :func:`plan_repair`)."""
    fixed = {w["topic"] for w in writes} | {f.topic for fs in resets.values() for f in fs}
    unfixed = [o for o in others if o.topic not in fixed]
    precursors = sorted(o.topic for o in unfixed if o.case is TopicIdCase.PRECURSOR)
    moves_controller = bool(move_for) or (controller_id is not None and controller_id in resets)
    if moves_controller and precursors:
        movers = set(move_for) | (
            {f.topic for f in resets[controller_id]} if controller_id in resets else set()
        )
        for topic in sorted(movers):
            plan.refused[topic] = (
                f"refused: its repair moves the controller, and the new controller would mint a new id for "
                f"precursor topic(s) {precursors} (KAFKA-14190 itself): include them in this run"
            )
            plan.topics[topic]["strategy"] = None
    for broker, files in sorted(resets.items()):
        skipped = sorted(
            o.topic
            for o in unfixed
            if o.zookeeper_id is not None
            and any(r.broker_id == broker and r.topic_id not in (None, o.zookeeper_id) for r in o.replicas)
        )
        if not skipped:
            continue
        for topic in sorted({f.topic for f in files}):
            plan.refused.setdefault(
                topic,
                f"refused: restarting broker {broker} would take its replicas of {skipped} out of the ISR "
                "(their ids disagree with ZooKeeper, so the broker skips them): repair those in this run",
            )
            plan.topics[topic]["strategy"] = None


def remaining_steps(steps: Sequence[Mapping[str, Any]], completed: Iterable[str]) -> list[Mapping[str, Any]]:
    """The steps still to run, in order: a retried run continues after the last completed one."""
    done = set(completed)
    return [s for s in steps if s["id"] not in done]


# ---------------------------------------------------------------------------------------------
# Gates
# ---------------------------------------------------------------------------------------------

PartitionKey = tuple[str, int]


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
) -> list[str]:
    """Why broker ``broker_id``'s restart has not passed its gate yet (empty: passed).

    Passed when the broker registered again (a new broker epoch: the registration's czxid), every
    partition it replicates that has a leader holds it in the ISR, and the cluster's under-replicated
    partition count is back at (or below) the count before the run.
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
    return waiting
