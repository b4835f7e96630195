"""Each running simulated broker's ``kafka-delete-logs`` task: ``-delete`` directories removed when
Kafka's ``LogManager`` would remove them, on the wall clock (the one the directories' ctimes and the
deletion verifier use).

``LogManager`` (``core/src/main/scala/kafka/log/LogManager.scala``):

* ``asyncDelete`` renames a deleted replica's directory ``<topic>-<p>.<uuid>-delete``, queues it with
  the time (``addLogToBeDeleted``) and logs "Log for partition <tp> is renamed to <path> and is
  scheduled for deletion"; ``loadLogs`` queues every ``-delete`` directory found at start the same way.
* 1.1.0 .. 3.9: ``deleteLogs`` first runs ``InitialTaskDelayMs`` (30 s; 3.8+: the internal
  ``log.initial.task.delay.ms``) after the start, deletes every queued log whose queue time +
  ``currentDefaultConfig.fileDeleteDelayMs`` has passed ("Deleted log for partition <tp> in <path>."),
  and schedules itself again for the remaining time of the next one (``fileDeleteDelayMs`` when none
  is queued; 3.9: at least 1 ms).
* 0.11.0 / 1.0.0: ``deleteLogs`` runs at a fixed rate of ``fileDeleteDelayMs`` from 30 s after the
  start and deletes everything queued.
* A failed delete (``KafkaStorageException``) logs "Exception while deleting <log> in dir <dir>." and
  the log leaves the queue: the directory stays until the next start queues it again.

The delay is the broker's ``log.segment.delete.delay.ms`` as it runs with it: the simulated
server.properties, or a dynamic broker config the model holds (``kafka.broker_config``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.broker_config import LOG_SEGMENT_DELETE_DELAY_MS, effective_setting
from airflow_provider_kafka_zk.kafka.deletion import INITIAL_TASK_DELAY_MS
from airflow_provider_kafka_zk.kafka.errors import ZnodeFormatError
from airflow_provider_kafka_zk.kafka.logdir import DirKind, format_partition_dir_name
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion, caps_suffixed_dir_names

from .cluster import ReplicaDir, SimulatedCluster
from .deploy import DeployedCluster
from .disk_writer import broker_host

#: ``deleteLogs`` deletes each log at its own due time from 1.1.0; 0.11 / 1.0 run on a fixed rate.
PER_LOG_DUE_TIME_SINCE = KafkaVersion(1, 1)
_NOT_QUEUED = 2**62  # a failed delete leaves the queue until the broker's next start


@dataclass
class _Started:
    czxid: int
    at_ms: int
    next_fixed_run_ms: int  # 0.11 / 1.0 only


class DeleteLogsTask:
    """The ``kafka-delete-logs`` task of every running broker of ``deployed``'s model.

    Call :meth:`step` periodically (the cluster runtime does, with ``delete_logs=True``); it returns
    True when it removed directories from the model (the caller syncs the disks). The broker's start
    is its registration in ``/brokers/ids/<id>`` (which follows ``LogManager.startup``): its timestamp,
    else the znode's ctime;
    a directory is queued at its rename (its ctime) or at that start, whichever is later. ``log``
    keeps the lines Kafka's LogManager writes, for tests.

    :param deployed: the cluster (its model, host roots, and ZooKeeper for the registrations).
    :param now_ms: the wall clock in ms (tests may pass their own).
    :param initial_task_delay_ms: ``InitialTaskDelayMs`` (30 s).
    :param registration: broker id -> (czxid, start ms) of its registration, None when unregistered
        (default: read from the deployed cluster's ZooKeeper).
    """

    def __init__(
        self,
        deployed: DeployedCluster,
        *,
        now_ms: Callable[[], int] | None = None,
        initial_task_delay_ms: int = INITIAL_TASK_DELAY_MS,
        registration: Callable[[int], tuple[int, int] | None] | None = None,
    ) -> None:
        self.deployed = deployed
        self._registration = registration or self._zookeeper_registration
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.initial_task_delay_ms = initial_task_delay_ms
        self.log: list[str] = []
        self._started: dict[int, _Started] = {}
        self._queued: dict[tuple[int, str], int] = {}  # (broker, unique id) -> queue time

    @property
    def cluster(self) -> SimulatedCluster:
        return self.deployed.cluster

    # ------------------------------------------------------------------ inputs
    def _zookeeper_registration(self, broker_id: int) -> tuple[int, int] | None:
        """(czxid, start): a new czxid is a new start; the start is the registration's timestamp (the
        broker's clock, as the deletion verdict reads it), else the znode's ctime."""
        try:
            data, stat = self.deployed.writer.admin.get(zk.broker_path(broker_id))
        except NoNodeError:
            return None
        try:
            stamp = zk.BrokerRegistration.decode(data, zk.broker_path(broker_id)).timestamp_ms
        except ZnodeFormatError:
            stamp = 0
        return stat.czxid, stamp or stat.ctime

    def _delay_ms(self, broker_id: int) -> int:
        cluster = self.cluster
        return int(
            effective_setting(
                LOG_SEGMENT_DELETE_DELAY_MS,
                broker_id=broker_id,
                static_value=cluster.spec.log_segment_delete_delay_ms,
                dynamic_broker=cluster.broker_configs.get(str(broker_id)),
                dynamic_default=cluster.broker_configs.get("<default>"),
                release=cluster.spec.release,
            ).value
        )

    def _path(self, d: ReplicaDir) -> str:
        cluster = self.cluster
        host = broker_host(cluster, d.broker_id, self.deployed.root)
        name = format_partition_dir_name(
            d.topic,
            d.partition,
            d.kind,
            d.unique_id,
            cap_length=caps_suffixed_dir_names(cluster.spec.release),
        )
        return str(host.log_dirs[d.log_dir_index] / name)

    def _queue(self, d: ReplicaDir, started_ms: int, now_ms: int) -> None:
        """Queue ``d`` at its rename (the directory's ctime once on disk; now if not written yet) or at
        the broker's start, whichever is later (``asyncDelete`` / ``loadLog``)."""
        path = self._path(d)
        try:
            renamed = os.stat(path).st_ctime_ns // 1_000_000
        except OSError:
            renamed = now_ms
        self._queued[(d.broker_id, str(d.unique_id))] = max(started_ms, renamed)
        if renamed > started_ms:  # renamed by the running broker (StopReplica with delete)
            self.log.append(
                f"Log for partition {d.topic}-{d.partition} is renamed to {path} and is scheduled for deletion"
            )

    # ------------------------------------------------------------------ one round
    def step(self) -> bool:
        """Queue what is new, delete what is due; True when the model changed."""
        now = self.now_ms()
        cluster = self.cluster
        per_log = cluster.spec.release >= PER_LOG_DUE_TIME_SINCE
        due: list[ReplicaDir] = []
        for broker_id, broker in sorted(cluster.brokers.items()):
            dirs = cluster.replica_dirs(broker_id=broker_id, kind=DirKind.DELETE)
            if not broker.online:
                self._started.pop(broker_id, None)  # nothing runs; its next start queues them again
                continue
            registration = self._registration(broker_id)
            if registration is None:
                continue  # not registered yet: LogManager has not started either
            started = self._started.get(broker_id)
            if started is None or started.czxid != registration[0]:
                # a (re)start: loadLogs queues every -delete directory it finds as the logs load
                first_run = registration[1] + self.initial_task_delay_ms
                started = self._started[broker_id] = _Started(registration[0], registration[1], first_run)
                for d in dirs:
                    self._queue(d, registration[1], now)
            delay = self._delay_ms(broker_id)
            for d in dirs:
                if (broker_id, str(d.unique_id)) not in self._queued:
                    self._queue(d, registration[1], now)
            if now < started.at_ms + self.initial_task_delay_ms:
                continue  # deleteLogs has not run yet since the start
            queued = {d.unique_id: self._queued[(broker_id, str(d.unique_id))] for d in dirs}
            if per_log:
                due += [d for d in dirs if queued[d.unique_id] + delay <= now]
            elif now >= started.next_fixed_run_ms:
                while started.next_fixed_run_ms <= now:  # the fixed-rate runs that passed
                    started.next_fixed_run_ms += max(delay, 1)
                due += [d for d in dirs if queued[d.unique_id] < _NOT_QUEUED]
        removed = []
        for d in due:
            key = (d.broker_id, str(d.unique_id))
            path = self._path(d)
            if d.delete_fails:
                self.log.append(
                    f"Exception while deleting {d.topic}-{d.partition} in dir {path.rsplit('/', 1)[0]}."
                )
                self._queued[key] = _NOT_QUEUED  # out of the queue until the next start
                continue
            removed.append(d)
            self._queued.pop(key, None)
            self.log.append(f"Deleted log for partition {d.topic}-{d.partition} in {path}.")
        if removed:
            gone = {id(d) for d in removed}
            cluster.dirs = [d for d in cluster.dirs if id(d) not in gone]
            cluster.history.append(f"kafka-delete-logs removed {len(removed)} -delete director(ies)")
        return bool(removed)
