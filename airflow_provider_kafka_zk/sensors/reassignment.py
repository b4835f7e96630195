"""Sensor that waits for a ZooKeeper-mode partition reassignment to complete (deferrable per Airflow's default).

Usable on its own, e.g. after someone started a reassignment with ``kafka-reassign-partitions``:
give the targets (the tool's JSON, a path to it, or ``[[topic, partition, [replicas]], ...]``), or
nothing to wait for whatever ``/admin/reassign_partitions`` holds when the sensor starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import fsspec
from airflow.sdk import BaseSensorOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowSensorTimeout

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.reassignment import TopicPartition
from airflow_provider_kafka_zk.triggers.reassignment import (
    ReassignmentTrigger,
    decode_targets,
    encode_targets,
    read_progress,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


class ReassignmentFailedError(RuntimeError):
    """The reassignment did not complete in time, or its progress could not be read."""


def parse_targets(value: Any) -> dict[TopicPartition, tuple[int, ...]]:
    """Targets from the tool's JSON (dict or text), a file path/URL to it, or encoded triples."""
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith(("{", "[")):
            fs, path = fsspec.core.url_to_fs(text)
            text = fs.cat_file(path).decode("utf-8")
        value = json.loads(text)
    if isinstance(value, Mapping):
        return {(str(e["topic"]), int(e["partition"])): tuple(e["replicas"]) for e in value["partitions"]}
    return decode_targets(value)


class ReassignmentSensor(BaseSensorOperator):
    """Wait until every target partition completed by Kafka's rule; log progress (done/total, bytes).

    Fails at ``timeout`` naming the partitions still moving.

    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection.
    :param targets: partition -> target replicas: Kafka's reassignment JSON (text, dict or a path to
        it), ``[[topic, partition, [replicas]], ...]``, or None to read ``/admin/reassign_partitions``.
    :param sizes: bytes per partition, for progress in bytes (optional).
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``); otherwise
        poke every ``poke_interval`` seconds.
    """

    template_fields: Sequence[str] = ("targets", "kafka_zookeeper_conn_id")

    def __init__(
        self,
        *,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        targets: Any = None,
        sizes: Mapping[TopicPartition, int] | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 10.0)
        kwargs.setdefault("timeout", 6 * 3600)
        super().__init__(**kwargs)
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.targets = targets
        self.sizes = dict(sizes or {})
        self.deferrable = deferrable
        self._resolved: dict[TopicPartition, tuple[int, ...]] | None = None
        self._last_message = ""

    def _targets(self) -> dict[TopicPartition, tuple[int, ...]]:
        if self._resolved is None:
            if self.targets:
                self._resolved = parse_targets(self.targets)
            else:
                with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
                    try:
                        data, _ = hook.get_znode(znodes.REASSIGN_PARTITIONS)
                    except ZnodeNotFoundError:
                        data = None
                self._resolved = {} if data is None else dict(znodes.ReassignPartitions.decode(data).targets)
        return self._resolved

    def poke(self, context: Context) -> bool:
        targets = self._targets()
        if not targets:
            self.log.info("No reassignment to wait for (%s does not exist)", znodes.REASSIGN_PARTITIONS)
            return True
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            found = read_progress(hook, targets, self.sizes)
        self._last_message = found.describe()
        self.log.info("Reassignment: %s", self._last_message)
        return found.complete

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout:
                raise AirflowSensorTimeout(
                    f"reassignment not complete after {self.timeout}s: {self._last_message}"
                ) from None
        if self.poke(context):
            return None
        timeout = self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else float(self.timeout)
        self.defer(
            trigger=ReassignmentTrigger(
                kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
                targets=encode_targets(self._targets()),
                sizes=[[t, p, b] for (t, p), b in sorted(self.sizes.items())],
                poll_interval=float(self.poke_interval),
                deadline=time.time() + timeout,
                label=f"{self.task_id}",
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        if event.get("status") == "complete":
            self.log.info("Reassignment complete: %s", event.get("message"))
            return
        if event.get("status") == "timeout":
            raise AirflowSensorTimeout(
                f"reassignment not complete after {self.timeout}s: {event.get('message')}"
            )
        raise ReassignmentFailedError(f"could not follow the reassignment: {event.get('message')}")
