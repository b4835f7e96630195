"""A stand-in for Kafka's ZooKeeper-mode controller, for the reassignment path only.

It watches a deployed simulated cluster's real ZooKeeper for ``/admin/reassign_partitions`` and
carries the request out as Kafka 2.4+ does (``KafkaController.scala``, 3.3.1): entries for unknown
partitions or topics queued for deletion are dropped at once; adding/removing replicas are written
into the topic znode first; the new replicas' directories appear on the destination broker hosts,
fetch the data and join the ISR; then each partition finishes (leader moved if needed, old replicas
deleted, target written, entry removed) and the znode is deleted when empty. Like a 1.1+
controller it reacts to the znode's creation only, and a znode that 2.0+ Kafka could not decode
(e.g. with ``log_dirs``) is ignored and left in place. ``partitions_per_step`` sets the pace.
"""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.errors import ZnodeFormatError

from .deploy import DeployedCluster

log = logging.getLogger(__name__)


class SimulatedController:
    def __init__(
        self,
        deployed: DeployedCluster,
        *,
        partitions_per_step: int = 5,
        step_interval: float = 0.2,
        keep_delete_dirs: bool = False,
    ) -> None:
        self.deployed = deployed
        self.partitions_per_step = partitions_per_step
        self.step_interval = step_interval
        self.keep_delete_dirs = keep_delete_dirs
        self._client = KazooClient(hosts=deployed.zookeeper_connect)
        self._client.start(timeout=15)
        self._seen_czxid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ignored: list[str] = []  # why a reassign znode was ignored, for tests
        self.completed: list[tuple[str, int]] = []

    def step(self) -> None:
        """One controller round: notice a newly created reassign znode, advance, write to ZooKeeper."""
        with self._lock:
            cluster = self.deployed.cluster
            self._adopt_new_request()
            budget = self.partitions_per_step
            for topic, partition, _ in list(cluster.reassignment):
                if budget <= 0:
                    break
                if cluster.complete_reassignment(topic, partition, keep_delete_dirs=self.keep_delete_dirs):
                    self.completed.append((topic, partition))
                    budget -= 1
                elif cluster.catch_up_reassignment(topic, partition):
                    budget -= 1
            self.deployed.sync()

    def _adopt_new_request(self) -> None:
        stat = self._client.exists(zk.REASSIGN_PARTITIONS)
        if stat is None or stat.czxid == self._seen_czxid:
            return
        self._seen_czxid = stat.czxid
        cluster = self.deployed.cluster
        if cluster.reassignment:
            return  # the znode is the one the model already carries out
        data, _ = self._client.get(zk.REASSIGN_PARTITIONS)
        try:
            request = zk.ReassignPartitions.decode(data)
        except ZnodeFormatError as exc:
            self.ignored.append(str(exc))
            log.warning("Ignoring partition reassignment due to invalid json: %s", exc)
            return
        moves = {}
        for entry in request.partitions:
            topic = cluster.topics.get(entry.topic)
            if (
                topic is None
                or entry.partition not in topic.partitions
                or entry.topic in cluster.delete_markers
            ):
                self.ignored.append(f"{entry.topic}-{entry.partition}: unknown or queued for deletion")
                continue
            moves[(entry.topic, entry.partition)] = tuple(entry.replicas)
        if moves:
            cluster.start_reassignment(moves)
        else:
            self._client.delete(zk.REASSIGN_PARTITIONS)

    def run_until_idle(self, max_steps: int = 1000) -> int:
        """Step until no reassignment is in flight (tests); returns the number of steps."""
        for steps in range(1, max_steps + 1):
            self.step()
            if not self.deployed.cluster.reassignment:
                return steps
        raise TimeoutError(f"reassignment still in flight after {max_steps} steps")

    def start(self) -> SimulatedController:
        self._thread = threading.Thread(target=self._loop, name="simulated-controller", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.step_interval):
            try:
                self.step()
            except Exception:  # keep the controller alive like Kafka's event loop; tests see the log
                log.exception("simulated controller step failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._client.stop()
        self._client.close()

    def __enter__(self) -> SimulatedController:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
