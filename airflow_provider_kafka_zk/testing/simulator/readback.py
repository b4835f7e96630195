"""Read a deployed cluster back from real ZooKeeper and real files, through the core codecs only.

Used by the demo and the simulator's integration tests to show that what was written is what a
Kafka tool would read (nothing here looks at the simulator's model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import (
    CleanShutdownMarker,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionDirName,
    PartitionMetadata,
    parse_java_properties,
    parse_partition_dir_name,
)
from airflow_provider_kafka_zk.kafka.records import (
    IndexProblem,
    check_offset_index,
    parse_offset_index,
    parse_segment_file_name,
    scan_log,
)
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid


@dataclass(frozen=True)
class ZnodeReading:
    path: str
    data: bytes | None
    stat: ZnodeStat
    decoded: object


def read_zookeeper(client: KazooClient, root: str = "/") -> dict[str, ZnodeReading]:
    """Every znode below ``root`` with its Stat, decoded by ``decode_znode`` (raises on bad data)."""
    out: dict[str, ZnodeReading] = {}
    pending = [root]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = ZnodeReading(path, data, stat, zk.decode_znode(path, data))
        prefix = path.rstrip("/")
        pending.extend(f"{prefix}/{child}" for child in client.get_children(path))
    return out


@dataclass(frozen=True)
class ReplicaOnDisk:
    broker_id: int
    path: Path
    name: PartitionDirName
    topic_id: KafkaUuid | None
    leader_epochs: LeaderEpochCheckpoint
    segments: int
    log_bytes: int
    index_problems: tuple[IndexProblem, ...]


@dataclass(frozen=True)
class LogDirOnDisk:
    path: Path
    meta: MetaProperties
    clean_shutdown: CleanShutdownMarker | None
    checkpoints: dict[str, OffsetCheckpoint]
    replicas: tuple[ReplicaOnDisk, ...]


@dataclass(frozen=True)
class BrokerOnDisk:
    broker_id: int
    server_properties: dict[str, str]
    log_dirs: tuple[LogDirOnDisk, ...]

    @property
    def replicas(self) -> list[ReplicaOnDisk]:
        return [r for d in self.log_dirs for r in d.replicas]


def read_broker(broker_id: int, server_properties: Path) -> BrokerOnDisk:
    """Parse a broker host's server.properties and every file of every log dir it names."""
    props = parse_java_properties(server_properties.read_bytes(), str(server_properties))
    log_dirs = []
    for log_dir in (Path(p) for p in props["log.dirs"].split(",")):
        marker_file = log_dir / ".kafka_cleanshutdown"
        checkpoints = {
            name: OffsetCheckpoint.parse((log_dir / name).read_bytes(), str(log_dir / name))
            for name in (
                "recovery-point-offset-checkpoint",
                "replication-offset-checkpoint",
                "log-start-offset-checkpoint",
                "cleaner-offset-checkpoint",
            )
        }
        replicas = tuple(
            _read_replica(broker_id, entry) for entry in sorted(log_dir.iterdir()) if entry.is_dir()
        )
        log_dirs.append(
            LogDirOnDisk(
                path=log_dir,
                meta=MetaProperties.parse(
                    (log_dir / "meta.properties").read_bytes(), str(log_dir / "meta.properties")
                ),
                clean_shutdown=CleanShutdownMarker.parse(marker_file.read_bytes(), str(marker_file))
                if marker_file.exists()
                else None,
                checkpoints=checkpoints,
                replicas=replicas,
            )
        )
    return BrokerOnDisk(broker_id, props, tuple(log_dirs))


def _read_replica(broker_id: int, path: Path) -> ReplicaOnDisk:
    name = parse_partition_dir_name(path.name, str(path))
    metadata = path / "partition.metadata"
    topic_id = (
        PartitionMetadata.parse(metadata.read_bytes(), str(metadata)).topic_id if metadata.exists() else None
    )
    epochs_file = path / "leader-epoch-checkpoint"
    problems: list[IndexProblem] = []
    segments = 0
    log_bytes = 0
    for log_file in sorted(path.glob("*.log")):
        base_offset, _ = parse_segment_file_name(log_file.name, str(log_file))
        data = log_file.read_bytes()
        segments += 1
        log_bytes += len(data)
        index_file = log_file.with_suffix(".index")
        scan = scan_log(data, str(log_file))
        index = parse_offset_index(index_file.read_bytes(), base_offset, str(index_file))
        problems += check_offset_index(index, scan, str(index_file))
    return ReplicaOnDisk(
        broker_id=broker_id,
        path=path,
        name=name,
        topic_id=topic_id,
        leader_epochs=LeaderEpochCheckpoint.parse(epochs_file.read_bytes(), str(epochs_file)),
        segments=segments,
        log_bytes=log_bytes,
        index_problems=tuple(problems),
    )
