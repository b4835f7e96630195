"""The drain plan's own read of ZooKeeper: only the znodes the decision needs, not the whole tree.

A drain's safety snapshot reads every znode (430k at 200k partitions: 3 s of walking, plus the
artefact round trip) because it is rollback and audit evidence. The plan needs far less: the
cluster's identity (``/cluster/id``), the registered brokers and their racks, the controller,
every topic znode (the assignment, and the in-flight check must see all of them),
``/admin/reassign_partitions`` and ``/admin/delete_topics``, and the partition state znodes
(leader, ISR) of the partitions it must move (a replica on a drained broker; for scope ``rf1``
the single-replica ones only: ~1k of 200k on one of 50 brokers). Two walks of the snapshot walker (:class:`.zookeeper_snapshot.ZnodeTreeWalker`,
multiRead, the same Stat, reconnects and zxid bookkeeping) read them: the first the roots above
without the topics' ``partitions`` subtrees, the second the state znodes its topics call for. The
rows feed the same :class:`~airflow_provider_kafka_zk.kafka.model.ClusterState` build as a
snapshot's (``partial_read``: absent state and config znodes are not findings) and the same
planner. What the plan read is recorded (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.read_record`),
so the execute step can refuse when the safety snapshot, or ZooKeeper before the first write,
disagrees with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain_execution import partitions_on, read_record
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

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
    topics_only = ClusterState.from_snapshot(rows.values(), cluster=cluster, partial_read=True)
    wanted = [zk.partition_state_path(t, p) for t, p in partitions_on(topics_only, drained, scope)]
    del topics_only
    consistent, end_zxid = first.consistent, first.end_zxid
    if wanted:
        second = walk(wanted, DEFAULT_EXCLUDE)
        states = _rows(second)
        rows.update((row.path, row) for row in states)  # a path read twice: the later read
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
    return DrainRead(
        state=state,
        brokers=drained,
        start_zxid=first.start_zxid,
        end_zxid=end_zxid,
        consistent=consistent,
        znodes=len(rows),
        duration_s=time.monotonic() - started,
    )


__all__ = ["PLANNING_ROOTS", "DrainRead", "read_for_drain"]
