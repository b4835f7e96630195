"""Trigger that waits, off the worker, until Kafka's controller processed a preferred leader election.

The controller deletes ``/admin/preferred_replica_election`` when it is done with it, whatever it
could move (``KafkaController.removePartitionsFromPreferredReplicaElection``, 3.3.1); the znode is
ours while its czxid is the one we created. The reads run on the trigger run's own thread and
ZooKeeper session (:class:`~._session.TriggerSession`), so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kafka_zk.triggers._session import TriggerSession

CLASSPATH = "airflow_provider_kafka_zk.triggers.leader_election.PreferredElectionTrigger"


class PreferredElectionTrigger(BaseTrigger):
    """Fires ``{"status": "complete" | "timeout" | "error", "message": str}`` once.

    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param czxid: the czxid of the znode this run created.
    :param poll_interval: seconds between looks.
    :param deadline: epoch seconds after which it gives up (the znode stays).
    """

    def __init__(
        self,
        *,
        kafka_zookeeper_conn_id: str,
        czxid: int,
        poll_interval: float = 5.0,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.czxid = int(czxid)
        self.poll_interval = float(poll_interval)
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "kafka_zookeeper_conn_id": self.kafka_zookeeper_conn_id,
                "czxid": self.czxid,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
            },
        )

    def _processed(self, session: TriggerSession) -> bool:
        """One look, on the session's thread and ZooKeeper session."""
        from airflow_provider_kafka_zk.kafka import znodes

        stat = session.zookeeper(self.kafka_zookeeper_conn_id).exists(znodes.PREFERRED_REPLICA_ELECTION)
        return stat is None or stat.czxid != self.czxid

    async def run(self) -> AsyncIterator[TriggerEvent]:
        session = TriggerSession("election")
        try:
            while True:
                try:
                    done = await session.call(self._processed, session)
                except Exception as exc:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                if done:
                    yield TriggerEvent(
                        {"status": "complete", "message": "the controller processed the election"}
                    )
                    return
                if self.deadline is not None and time.time() >= self.deadline:
                    yield TriggerEvent(
                        {
                            "status": "timeout",
                            "message": "the controller has not processed /admin/preferred_replica_election "
                            "by the deadline: is a controller running (/controller)?",
                        }
                    )
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await session.aclose()  # also when cancelled: the session's thread closes the client
