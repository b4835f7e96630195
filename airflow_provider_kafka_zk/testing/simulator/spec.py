"""Declarative description of a simulated Kafka cluster: what exists before any incident."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_kafka_zk.kafka.versions import KafkaVersion


@dataclass(frozen=True)
class BrokerSpec:
    """One broker: its id, rack, and the loopback address its host is reachable on (one sshd per host)."""

    broker_id: int
    rack: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None  # listener port in the registration; default 9092 + broker_id
    log_dir_count: int = 1

    @property
    def listener_port(self) -> int:
        return self.port if self.port is not None else 9092 + self.broker_id


@dataclass(frozen=True)
class TopicSpec:
    """A topic as created by ``kafka-topics --create`` (Kafka's own replica placement unless given)."""

    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)
    records_per_partition: int = 200
    record_value_bytes: int = 100
    records_per_batch: int = 20
    assignment: dict[int, tuple[int, ...]] | None = None
    topic_id: str | None = None  # reproduce a known cluster; default: a fresh random id


@dataclass(frozen=True)
class ClusterSpec:
    """A ZooKeeper-mode cluster: release, IBP, brokers, topics, broker-level settings."""

    name: str
    brokers: tuple[BrokerSpec, ...]
    topics: tuple[TopicSpec, ...] = ()
    kafka_version: str = "3.3.1"
    inter_broker_protocol_version: str | None = None  # default: the release's own line
    delete_topic_enable: bool = True
    min_insync_replicas: int = 1
    log_segment_delete_delay_ms: int = 60_000
    segment_bytes: int = 1_073_741_824
    seed: int = 1
    start_time_ms: int | None = None  # None: an hour before now, so ages look like a live cluster's
    cluster_id: str | None = None
    controller: int | None = None  # broker that won the first election; default: the lowest id

    @property
    def release(self) -> KafkaVersion:
        return KafkaVersion.parse(self.kafka_version)

    @property
    def ibp(self) -> KafkaVersion:
        if self.inter_broker_protocol_version:
            return KafkaVersion.parse(self.inter_broker_protocol_version)
        return KafkaVersion(self.release.major, self.release.minor)
