"""Whether a broker may be restarted: every partition with a replica on it must keep a leader
elsewhere or be led by it again, and every replica on it must be served after the restart. Pure.

What Kafka 3.3.1 does with a restarted broker's replicas, from its source at that tag:

* At start each log is loaded; a ``partition.metadata`` that cannot be read raises an IOException,
  which ``PartitionMetadataFile.read`` turns into ``maybeAddOfflineLogDir``: the **whole log dir**
  goes offline (``core/src/main/scala/kafka/server/PartitionMetadataFile.scala``,
  ``LogManager.loadLogs``). Every replica in it answers ``KAFKA_STORAGE_ERROR`` to the controller,
  which marks it offline and elects leaders without it (``KafkaController.
  processLeaderAndIsrResponseReceived``/``onReplicasBecomeOffline``): an RF=1 partition there ends
  with ``leader -1``.
* A loaded log keeps the id of its file. A LeaderAndIsr carrying another id is answered
  ``INCONSISTENT_TOPIC_ID`` and the partition is skipped -- no leader, no follower
  (``ReplicaManager.becomeLeaderOrFollower``/``hasConsistentTopicId``). The controller ignores that
  error (only ``KAFKA_STORAGE_ERROR`` marks a replica offline), so ZooKeeper still names the broker
  leader of a partition it elected after the restart (``onBrokerStartup`` ->
  ``triggerOnlinePartitionStateChange``, ``OfflinePartitionLeaderElectionStrategy``: the first live
  replica in the ISR) while nobody serves it. No gate on ZooKeeper can see that: the plan must.
* A log without the file takes the id of the next LeaderAndIsr (``UnifiedLog.assignTopicId``).
* A controlled shutdown moves the leadership of partitions with more than one replica to the first
  live in-sync replica in assignment order (``ControlledShutdownPartitionLeaderElectionStrategy``);
  that broker must accept the controller's id, else the partition has no serving leader.
* A follower fetches with its topic id from IBP 3.1 (Fetch v13); a leader whose log holds another
  id answers ``INCONSISTENT_TOPIC_ID`` (``ReplicaManager.fetchMessages``), so a restarted replica
  that took the controller's id cannot rejoin the ISR of a leader still holding the old one.
* Which id the controller sends: a *new* controller (the restarted broker was the controller, or the
  plan moves the controller before the restart) loads every ``topic_id`` from ZooKeeper and mints a
  new one for a topic znode without (``KafkaController.initializeControllerContext`` ->
  ``processTopicIds``); the *running* controller sends what it holds in memory, which is ZooKeeper's
  id -- or, for a topic znode an old client rewrote without one, an id ZooKeeper no longer shows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from .model import PartitionInfo
from .steps import Refusal, ReplicaDisk

PartitionKey = tuple[str, int]

#: The id a new controller mints for a topic znode without one: no replica holding an id accepts it.
NEW_ID = "(a new id the next controller mints)"
#: The running controller's id of a topic whose znode has none: unknown, so no replica is proven to accept it.
UNKNOWN_ID = "(the running controller's id, which ZooKeeper does not show)"


def ids_the_controller_sends(
    zookeeper_ids: Mapping[str, str | None],
    *,
    new_controller: bool,
    written: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """topic -> the id in the LeaderAndIsr a broker gets after a restart.

    :param zookeeper_ids: each topic's ``topic_id`` in ZooKeeper now (None: the znode has none).
    :param new_controller: a new controller loads the ids (the controller itself restarts, or the
        plan moves the controller before the restart).
    :param written: ids the plan writes into topic znodes before the restart. A running controller
        does not reload a rewritten znode (``processPartitionModifications``): what it holds for a
        topic ZooKeeper showed no id for is unknown (an old client may have removed an id another
        controller had minted), written or not.
    """
    written = dict(written or {})
    out: dict[str, str] = {}
    for topic, zk_id in zookeeper_ids.items():
        after = written.get(topic, zk_id)
        if new_controller:
            out[topic] = after if after else NEW_ID
        else:
            out[topic] = zk_id if zk_id else UNKNOWN_ID
    return out


def _accepts(replica_id: str | None, sent: str) -> bool:
    return replica_id is None or replica_id == sent


def _rejection(replica_id: str | None, sent: str, topic: str) -> str:
    if sent == NEW_ID:
        return (
            f"it holds {replica_id}, and the new controller mints a new id for {topic} (its znode has none)"
        )
    if sent == UNKNOWN_ID:
        return (
            f"it holds {replica_id}, and {topic}'s znode has no topic_id: the running controller sends the id it "
            "holds in memory, which nothing here proves to be this one"
        )
    return f"it holds {replica_id}, the controller sends {sent} (INCONSISTENT_TOPIC_ID: skipped)"


@dataclass(frozen=True)
class RestartRisks:
    """What a restart of one broker would break: replicas Kafka would not serve, partitions left
    without a serving leader (each ``(partition, why)``)."""

    broker_id: int
    unserved: tuple[tuple[PartitionKey, str], ...] = ()
    leaderless: tuple[tuple[PartitionKey, str], ...] = ()

    @property
    def safe(self) -> bool:
        return not self.unserved and not self.leaderless

    def refusals(self, step_id: str | None = None, limit: int = 12) -> list[Refusal]:
        out = []
        b = self.broker_id
        if self.unserved:
            unreadable = any("unreadable" in why for _, why in self.unserved)
            rejected = any("unreadable" not in why for _, why in self.unserved)
            todo = []
            if rejected:
                todo.append("repair those topics in the same run (their ids are written first)")
            if unreadable:
                todo.append(
                    f"fix or move away the unreadable partition.metadata on broker {b} (with the broker stopped)"
                )
            out.append(
                Refusal(
                    "restart-replicas-not-served",
                    f"after a restart of broker {b} Kafka would not serve its replicas of "
                    + _listing(self.unserved, limit),
                    " and ".join(todo).capitalize() + ", then plan again; no broker was restarted",
                    step_id,
                    tuple(f"{t}-{p}" for (t, p), _ in self.unserved),
                )
            )
        if self.leaderless:
            out.append(
                Refusal(
                    "restart-partitions-leaderless",
                    f"a restart of broker {b} would leave without a serving leader "
                    + _listing(self.leaderless, limit),
                    "Repair those topics first (or move their replicas, e.g. with the pre-maintenance drain), then "
                    "plan again; no broker was restarted",
                    step_id,
                    tuple(f"{t}-{p}" for (t, p), _ in self.leaderless),
                )
            )
        return out


def _listing(items: tuple[tuple[PartitionKey, str], ...], limit: int) -> str:
    shown = "; ".join(f"{t}-{p} ({why})" for (t, p), why in items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def restart_risks(
    broker_id: int,
    partitions: Mapping[PartitionKey, PartitionInfo],
    live: Collection[int],
    disk: Iterable[ReplicaDisk],
    sent_ids: Mapping[str, str],
    *,
    resets: Collection[PartitionKey] = (),
) -> RestartRisks:
    """What restarting ``broker_id`` would break (see the module docstring for Kafka's rules).

    :param partitions: every partition's assignment, leader and ISR (the live state, or the plan's).
    :param live: registered brokers.
    :param disk: the live replica directories the inventory read on every broker holding a replica
        of a partition that has one on ``broker_id`` (more is fine).
    :param sent_ids: :func:`ids_the_controller_sends` (a topic missing counts as :data:`UNKNOWN_ID`).
    :param resets: partitions whose ``partition.metadata`` the plan removes on ``broker_id`` before
        the restart (they take the controller's id).
    """
    b = broker_id
    alive = set(live)
    reset = set(resets)
    on_disk = {(d.broker_id, d.topic, d.partition): d for d in disk}
    offline_dirs: dict[str, str] = {}
    for d in on_disk.values():
        if d.broker_id == b and d.error:
            offline_dirs.setdefault(d.log_dir, f"{d.log_dir}/{d.topic}-{d.partition}/partition.metadata")
    unserved: list[tuple[PartitionKey, str]] = []
    leaderless: list[tuple[PartitionKey, str]] = []
    for key, info in sorted(partitions.items()):
        if b not in info.replicas:
            continue
        topic, _ = key
        sent = sent_ids.get(topic, UNKNOWN_ID)
        mine = on_disk.get((b, *key))
        why_not_served = None
        if mine is not None:
            if mine.error:
                why_not_served = f"its partition.metadata is unreadable ({mine.error}): Kafka takes log dir {mine.log_dir} offline"
            elif mine.log_dir in offline_dirs:
                why_not_served = (
                    f"log dir {mine.log_dir} goes offline at start (unreadable {offline_dirs[mine.log_dir]})"
                )
            else:
                after = None if key in reset else mine.topic_id
                if not _accepts(after, sent):
                    why_not_served = _rejection(after, sent, topic)
        leader = info.leader
        if why_not_served is None and mine is not None and leader is not None and leader not in (b, -1):
            theirs = on_disk.get((leader, *key))
            if theirs is not None and theirs.topic_id is not None and not _accepts(theirs.topic_id, sent):
                # the leader keeps serving on its old state, but a follower fetching with the
                # controller's id is answered INCONSISTENT_TOPIC_ID (Fetch v13, IBP >= 3.1)
                why_not_served = (
                    f"its leader, broker {leader}, holds {theirs.topic_id} while the controller sends {sent}: "
                    f"broker {b} could not fetch from it and would stay out of the ISR"
                )
        if why_not_served is not None:
            unserved.append((key, why_not_served))
        if leader != b:
            continue  # led elsewhere (or already without a leader: not this restart's doing)
        others = [r for r in info.replicas if r != b and r in info.isr and r in alive]
        if others:
            successor = others[0]
            theirs = on_disk.get((successor, *key))
            if theirs is not None and (theirs.error or not _accepts(theirs.topic_id, sent)):
                why = (
                    "its partition.metadata is unreadable"
                    if theirs.error
                    else _rejection(theirs.topic_id, sent, topic)
                )
                leaderless.append(
                    (
                        key,
                        f"leadership moves to broker {successor} while broker {b} restarts, and there {why}",
                    )
                )
        elif why_not_served is not None:
            leaderless.append((key, f"broker {b} is its only in-sync replica and would not serve it"))
    return RestartRisks(b, tuple(unserved), tuple(leaderless))


def after_resets(
    disk: Iterable[ReplicaDisk], adopted: Mapping[tuple[int, str, int], str]
) -> list[ReplicaDisk]:
    """``disk`` once earlier restarts of the same run are done: each replica in ``adopted``
    ((broker, topic, partition) -> id) lost its file and took that id from the controller."""
    out = []
    for d in disk:
        target = adopted.get((d.broker_id, d.topic, d.partition))
        out.append(ReplicaDisk(d.broker_id, d.topic, d.partition, d.log_dir, target, None) if target else d)
    return out


def leaderless_partitions(
    partitions: Mapping[PartitionKey, PartitionInfo], live: Collection[int]
) -> set[PartitionKey]:
    """Partitions without a live leader in ZooKeeper (no state, leader -1, or a leader not registered)."""
    return {k for k, info in partitions.items() if info.is_offline(live)}
