"""The drain plan's own read of ZooKeeper: only the znodes the decision needs, not the whole tree.

A drain's safety snapshot reads every znode (430k at 200k partitions: 3 s of walking, plus the
artefact round trip) because it is rollback and audit evidence. The plan needs far less: the
cluster's identity (``/cluster/id``), the registered brokers and their racks, the controller,
every topic znode (the assignment, and the in-flight check must see all of them),
``/admin/reassign_partitions`` and ``/admin/delete_topics``, and the partition state znodes
(leader, ISR) of the partitions it must move (a replica on a drained broker; for scope ``rf1``
the single-replica ones only: ~1k of 200k on one of 50 brokers). Two walks of the snapshot walker (:class:`.zookeeper_snapshot.ZnodeTreeWalker`,
multiRead, the same Stat, reconnects and zxid bookkeeping) read them: the first the roots above
without the topics' ``partitions`` subtrees, the second the state znodes its topics call for.

What the model holds is bounded by the drained brokers' topics (:func:`scope_topics`): ZooKeeper
keeps replica placement only in the topic znodes (no znode lists a broker's partitions), so every
topic znode is read (cheap: a few bytes each, hundreds per multiRead request), but only those
with a replica on a drained broker, a reassignment marker, or anything the model's decoder might
not read as Kafka does are decoded into the model; the others cannot change the plan, the
in-flight check or the agreement record (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.read_disagreements`
compares only topics with a replica on a drained broker). The rows feed the same
:class:`~airflow_provider_kafka_zk.kafka.model.ClusterState` build as a snapshot's
(``partial_read``: absent state and config znodes are not findings), once, and the same planner. What the plan read is recorded (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.read_record`),
so the execute step can refuse when the safety snapshot, or ZooKeeper before the first write,
disagrees with it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain import in_drain_scope
from airflow_provider_kafka_zk.kafka.drain_execution import read_record
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

from .zookeeper_snapshot import DEFAULT_EXCLUDE, SnapshotWalk

PLANNING_ROOTS: tuple[str, ...] = (
    zk.CLUSTER_ID,
    zk.BROKER_IDS,
    zk.CONTROLLER,
    zk.CONTROLLER_EPOCH,
    zk.BROKER_TOPICS,
    zk.REASSIGN_PARTITIONS,
    zk.DELETE_TOPICS,
)
"""The subtrees of the first walk (absent ones, such as a reassign znode, are simply not there)."""

Walk = Callable[[Sequence[str], Sequence[str]], SnapshotWalk]
"""``(include, exclude) -> SnapshotWalk``: ``KafkaZooKeeperHook.snapshot``, or a walker in a script."""


@dataclass(frozen=True)
class DrainRead:
    """What a planning read found: the model (``partial_read``) and how the read went.

    :param state: the model of the rows read.
    :param brokers: the drained brokers the state znodes were chosen for (with the scope).
    :param start_zxid: the first walk's start (every row is at least this new).
    :param end_zxid: the second walk's end (no row is newer).
    :param consistent: both walks consistent and no state znode changed after the first began:
        the rows are the tree as of ``start_zxid``.
    :param znodes: rows read.
    :param duration_s: wall time of both walks.
    """

    state: ClusterState
    brokers: frozenset[int]
    start_zxid: int
    end_zxid: int
    consistent: bool
    znodes: int
    duration_s: float

    def record(self) -> dict[str, Any]:
        """``plan.json``'s ``read``: :func:`~airflow_provider_kafka_zk.kafka.drain_execution.read_record` plus the zxids."""
        return {
            "source": "zookeeper",
            "start_zxid": self.start_zxid,
            "end_zxid": self.end_zxid,
            "consistent": self.consistent,
            "znodes": self.znodes,
            **read_record(self.state, self.brokers),
        }


_TOPIC_KEYS = frozenset({"version", "partitions", "adding_replicas", "removing_replicas", "topic_id"})
_INFLIGHT = re.compile(rb'"(?:adding|removing)_replicas"\s*:\s*\{\s*[^\s}]')
"""A reassignment marker with something in it (Kafka 2.4+ writes both as ``{}`` when idle)."""


def _mentions(brokers: frozenset[int]) -> re.Pattern[bytes]:
    """Bytes of a JSON array element equal to one of ``brokers`` (quoted or not, any spacing): a
    superset of where a replica list can name them."""
    ids = "|".join(str(b) for b in sorted(brokers))
    return re.compile(rf'[\[,]\s*"?(?:{ids})"?\s*[\],]'.encode())


def _plain(name: str, data: bytes) -> dict[str, Any] | None:
    """The topic znode's JSON when it is one Kafka writes, read the way the model reads it, with
    no reassignment marker; None otherwise. Only such a znode may be left out of the model (when
    it names no drained broker) or cut to its drained brokers' partitions: anything unusual goes
    to the model whole, which decides and reports."""
    try:
        zk.validate_topic_name(name)
        doc = json.loads(data)
    except (ValueError, TypeError, zk.InvalidTopicNameError):
        return None
    if type(doc) is not dict or not doc.keys() <= _TOPIC_KEYS or doc.get("version") not in (1, 2, 3):
        return None
    if doc.get("adding_replicas", {}) != {} or doc.get("removing_replicas", {}) != {}:
        return None
    partitions = doc.get("partitions")
    if type(partitions) is not dict or not partitions:
        return None
    for key, replicas in partitions.items():
        if not key.isdigit() or type(replicas) is not list or not replicas:
            return None
        for broker in replicas:
            if type(broker) is not int or broker < 0:
                return None
    if "topic_id" in doc:
        try:
            KafkaUuid.parse(doc["topic_id"])
        except ValueError:
            return None
    return doc


def scope_topics(
    rows: Mapping[str, ZnodeRow], brokers: frozenset[int], scope: str
) -> tuple[dict[str, bytes | None], list[tuple[str, int]], int]:
    """(topic znode path -> the data the model gets, partitions whose state the plan needs,
    highest zxid of the topic znodes left out).

    Left out: a topic znode whose bytes name no drained broker in any array and that is plainly
    one Kafka writes (:func:`_plain`): none of its partitions has a replica on a drained broker,
    none is being reassigned. Cut: a plain one that does name one keeps only the partitions with
    a replica on a drained broker (its Stat, czxid and version unchanged): the planner, the
    in-flight check and the agreement record look at no other partition of it, so a model of a
    200k-partition cluster holds the drained brokers' partitions only. Anything else goes to the
    model as read. The partitions come from the replica lists and
    :func:`~airflow_provider_kafka_zk.kafka.drain.in_drain_scope` (the planner's rule); a topic
    whose JSON does not read is left to the model (it reports it; its states are not needed).

    :param rows: the first walk's rows by path.
    :param brokers: the drained brokers.
    :param scope: the drain's scope.
    """
    mentions = _mentions(brokers)
    prefix = zk.BROKER_TOPICS + "/"
    kept: dict[str, bytes | None] = {}
    wanted: list[tuple[str, int]] = []
    dropped_zxid = 0
    for path, row in rows.items():
        if not path.startswith(prefix) or "/" in path[len(prefix) :]:
            continue
        name, data = path[len(prefix) :], row.data or b""
        named = mentions.search(data) is not None
        doc = None if _INFLIGHT.search(data) else _plain(name, data)
        if doc is not None and not named:
            dropped_zxid = max(dropped_zxid, row.czxid, row.mzxid, row.pzxid)
            continue
        kept[path] = row.data
        if doc is not None:
            on_drained = {k: r for k, r in doc["partitions"].items() if not brokers.isdisjoint(r)}
            if on_drained and len(on_drained) < len(doc["partitions"]):
                kept[path] = json.dumps({**doc, "partitions": on_drained}, separators=(",", ":")).encode()
        try:
            partitions = json.loads(data)["partitions"]
            for key, replicas in partitions.items():
                if type(replicas) is list and in_drain_scope(replicas, brokers, scope):
                    wanted.append((name, int(key)))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # the model reports it; nothing of it is planned
    return kept, wanted, dropped_zxid


def _topic_of(path: str) -> str | None:
    """The topic znode a path is (or is under), None for a path outside ``/brokers/topics/<t>``."""
    parts = path.split("/", 4)
    return (
        "/".join(parts[:4]) if len(parts) >= 4 and parts[1:3] == ["brokers", "topics"] and parts[3] else None
    )


def _rows(walk: SnapshotWalk) -> list[ZnodeRow]:
    try:
        return walk.rows
    finally:
        walk.close()


def read_for_drain(
    walk: Walk,
    list_topics: Callable[[], Iterable[str]],
    brokers: Iterable[int],
    *,
    scope: str = "all",
    cluster: str = "",
) -> DrainRead:
    """Read what a drain of ``brokers`` needs and build its model.

    :param walk: runs one walk (``KafkaZooKeeperHook.snapshot`` in the operator).
    :param list_topics: the children of ``/brokers/topics`` (empty when absent): their
        ``partitions`` subtrees are left out of the first walk. A topic created after this
        listing is walked whole, which costs time, not correctness.
    :param brokers: the brokers to drain.
    :param scope: the drain's scope (``rf1``: only single-replica partitions' states are read).
    :param cluster: the cluster's name (the model's).
    """
    drained = frozenset(int(b) for b in brokers)
    started = time.monotonic()
    skip = [f"{zk.topic_path(t)}/partitions" for t in list_topics() if t not in (".", "..")]
    first = walk(PLANNING_ROOTS, [*DEFAULT_EXCLUDE, *skip])
    rows = {row.path: row for row in _rows(first)}
    kept, partitions, dropped_zxid = scope_topics(rows, drained, scope)
    read_paths = set(rows)
    rows = {p: r for p, r in rows.items() if p in kept or _topic_of(p) is None}
    for path, data in kept.items():
        if data is not rows[path].data:  # cut to the drained brokers' partitions
            rows[path] = dataclasses.replace(rows[path], data=data)
    wanted = [zk.partition_state_path(t, p) for t, p in partitions]
    consistent, end_zxid = first.consistent, first.end_zxid
    if wanted:
        second = walk(wanted, DEFAULT_EXCLUDE)
        states = _rows(second)
        rows.update((row.path, row) for row in states)  # a path read twice: the later read
        read_paths.update(row.path for row in states)
        end_zxid = second.end_zxid
        consistent = (
            consistent
            and second.consistent
            and all(r.mzxid <= first.start_zxid and r.pzxid <= first.start_zxid for r in states)
        )
    state = ClusterState.from_snapshot(
        [rows[p] for p in sorted(rows)],
        cluster=cluster,
        taken_at_ms=int(time.time() * 1000),
        partial_read=True,
    )
    if dropped_zxid > state.last_zxid:  # the topic znodes left out were read all the same
        state = dataclasses.replace(state, last_zxid=dropped_zxid)
    return DrainRead(
        state=state,
        brokers=drained,
        start_zxid=first.start_zxid,
        end_zxid=end_zxid,
        consistent=consistent,
        znodes=len(read_paths),
        duration_s=time.monotonic() - started,
    )


__all__ = ["PLANNING_ROOTS", "DrainRead", "read_for_drain"]
