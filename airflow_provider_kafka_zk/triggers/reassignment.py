"""Trigger that waits for a ZooKeeper-mode partition reassignment to finish, off the worker.

Completion is Kafka's rule (:func:`~airflow_provider_kafka_zk.kafka.reassignment.progress`): a
partition is done when it left ``/admin/reassign_partitions``, its topic znode holds exactly the
target with no adding/removing replicas, and its ISR is within the target. The reads are kazoo calls
on the trigger run's own thread and ZooKeeper session (:class:`~._session.TriggerSession`), so the
triggerer's event loop never blocks; the module imports nothing heavy (the triggerer imports it on
its loop).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kafka_zk.triggers._session import TriggerSession

if TYPE_CHECKING:
    from airflow_provider_kafka_zk.kafka.reassignment import Progress, TopicPartition

CLASSPATH = "airflow_provider_kafka_zk.triggers.reassignment.ReassignmentTrigger"


def read_progress(
    hook: Any,
    targets: Mapping[TopicPartition, Sequence[int]],
    sizes: Mapping[TopicPartition, int] | None = None,
) -> Progress:
    """One look at ZooKeeper: topic znodes, state znodes and the reassign znode of ``targets``."""
    with hook.auth_errors("the reassigned topics' znodes and /admin/reassign_partitions"):
        return _read_progress(hook, targets, sizes)


def _read_progress(
    hook: Any,
    targets: Mapping[TopicPartition, Sequence[int]],
    sizes: Mapping[TopicPartition, int] | None,
) -> Progress:
    from kazoo.exceptions import NoNodeError

    from airflow_provider_kafka_zk.kafka import znodes
    from airflow_provider_kafka_zk.kafka.reassignment import progress

    client = hook.get_conn()
    topic_reads = {t: client.get_async(znodes.topic_path(t)) for t in sorted({tp[0] for tp in targets})}
    state_reads = {tp: client.get_async(znodes.partition_state_path(*tp)) for tp in targets}
    reassign_read = client.get_async(znodes.REASSIGN_PARTITIONS)
    topics = {}
    for topic, result in topic_reads.items():
        try:
            data, _ = result.get()
        except NoNodeError:
            continue  # a deleted topic never completes: it stays "moving" and is named at timeout
        topics[topic] = znodes.TopicAssignment.decode(data, znodes.topic_path(topic))
    states = {}
    for tp, result in state_reads.items():
        try:
            data, _ = result.get()
        except NoNodeError:
            continue
        states[tp] = znodes.PartitionState.decode(data, znodes.partition_state_path(*tp))
    try:
        data, _ = reassign_read.get()
        reassign = znodes.ReassignPartitions.decode(data)
    except NoNodeError:
        reassign = None
    return progress(targets, topics, states, reassign, sizes)


def encode_targets(targets: Mapping[TopicPartition, Sequence[int]]) -> list[list[Any]]:
    """JSON-safe form of ``{(topic, partition): replicas}`` for trigger kwargs and XCom."""
    return [[t, p, list(r)] for (t, p), r in sorted(targets.items())]


def decode_targets(encoded: Sequence[Sequence[Any]]) -> dict[TopicPartition, tuple[int, ...]]:
    return {(str(t), int(p)): tuple(int(b) for b in r) for t, p, r in encoded}


class ReassignmentTrigger(BaseTrigger):
    """Poll ZooKeeper until every partition in ``targets`` completed, or ``deadline`` (epoch s) passes.

    Fires once: ``{"status": "complete" | "timeout" | "error", "done": n, "total": n,
    "moving": ["t-p", ...], "bytes_done": n, "bytes_total": n, "message": str}``. The deadline is
    checked here rather than through Airflow's trigger timeout, so the event can name the
    partitions still moving.

    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection.
    :param targets: ``[[topic, partition, [replicas]], ...]``: the target assignment.
    :param sizes: ``[[topic, partition, bytes], ...]`` for progress in bytes.
    :param poll_interval: seconds between checks.
    :param deadline: epoch seconds after which a ``timeout`` event fires (None: no deadline).
    :param label: what the log lines call this wait (e.g. ``batch 2/5``).
    :param echo: handed back unchanged in every event (e.g. which batch this was).
    :param metrics: where to publish the partitions and bytes left while the batch moves
        (:func:`~airflow_provider_kafka_zk.metrics.runs.reassignment_wait_metrics`; None: nowhere).
    """

    def __init__(
        self,
        *,
        kafka_zookeeper_conn_id: str,
        targets: Sequence[Sequence[Any]],
        sizes: Sequence[Sequence[Any]] = (),
        poll_interval: float = 10.0,
        deadline: float | None = None,
        label: str = "reassignment",
        echo: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.targets = [list(t) for t in targets]
        self.sizes = [list(s) for s in sizes]
        self.poll_interval = float(poll_interval)
        self.deadline = deadline
        self.label = label
        self.echo = dict(echo or {})  # handed back in every event (e.g. which batch this was)
        self.metrics = dict(metrics) if metrics else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "kafka_zookeeper_conn_id": self.kafka_zookeeper_conn_id,
                "targets": self.targets,
                "sizes": self.sizes,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "label": self.label,
                "echo": self.echo,
                "metrics": self.metrics,
            },
        )

    def _check(self, session: TriggerSession) -> Progress:
        """One look, on the session's thread and ZooKeeper session."""
        sizes = {(str(t), int(p)): int(b) for t, p, b in self.sizes}
        return read_progress(
            session.zookeeper(self.kafka_zookeeper_conn_id), decode_targets(self.targets), sizes
        )

    def _publish(self, found: Progress) -> None:
        from airflow_provider_kafka_zk.metrics.runs import publish_reassignment_wait

        try:
            publish_reassignment_wait(
                self.metrics or {},
                moving=len(found.moving),
                bytes_done=found.bytes_done,
                bytes_total=found.bytes_total,
            )
        except Exception as exc:  # a metric never ends the wait
            self.log.warning("Progress metrics not published: %s: %s", type(exc).__name__, exc)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        session = TriggerSession("reassignment")
        last = None
        try:
            while True:
                try:
                    found = await session.call(self._check, session)
                except Exception as exc:
                    yield TriggerEvent(
                        {"status": "error", "message": f"{type(exc).__name__}: {exc}", "echo": self.echo}
                    )
                    return
                described = found.describe()
                if described != last:
                    self.log.info("%s: %s", self.label, described)
                    last = described
                    if self.metrics:  # on the session's thread: a slow Pushgateway never blocks the loop
                        await session.call(self._publish, found)
                payload = {
                    "done": len(found.done),
                    "total": found.total,
                    "moving": [f"{t}-{p}" for t, p in found.moving],
                    "bytes_done": found.bytes_done,
                    "bytes_total": found.bytes_total,
                    "message": described,
                    "echo": self.echo,
                }
                if found.complete:
                    yield TriggerEvent({"status": "complete", **payload})
                    return
                if self.deadline is not None and time.time() >= self.deadline:
                    yield TriggerEvent({"status": "timeout", **payload})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await session.aclose()  # also when cancelled: the session's thread closes the client
