"""Writes one broker host root per simulated broker: server.properties and real log dirs.

Layout of ``<root>/broker-<id>/``: ``config/server.properties`` and ``data/kafka-logs-<n>/`` (the
``log.dirs``), each holding what a broker of the simulated release keeps there (checked
against the real 3.3.1 files in tests/fixtures): meta.properties, the offset checkpoint files, the
clean-shutdown marker of a cleanly stopped broker, and partition directories with
partition.metadata, leader-epoch-checkpoint and real segments (v2 batches with valid CRC-32C,
indexes written by the index-interval rule; the active segment's indexes preallocated, sparse,
on a running or crashed broker and trimmed on a cleanly stopped one).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from airflow_provider_kafka_zk.kafka.logdir import (
    CleanShutdownMarker,
    DirKind,
    EpochEntry,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
    format_partition_dir_name,
    java_date_string,
)
from airflow_provider_kafka_zk.kafka.records import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_SIZE,
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    LogSegmentWriter,
    Record,
    encode_record_batch,
    segment_file_name,
)
from airflow_provider_kafka_zk.kafka.uuid import ONE_UUID
from airflow_provider_kafka_zk.kafka.versions import (
    caps_suffixed_dir_names,
    clean_shutdown_marker_has_json,
    meta_properties_has_cluster_id,
    offset_index_holds_last_offset,
)

from .cluster import BrokerModel, ReplicaDir, SimulatedCluster

SERVER_PROPERTIES = "config/server.properties"
CHECKPOINT_FILES = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


@dataclass(frozen=True)
class BrokerHost:
    """Where one simulated broker's files are (as its host would show them over SSH)."""

    broker_id: int
    address: str
    root: Path
    server_properties: Path
    log_dirs: tuple[Path, ...]


def broker_host(cluster: SimulatedCluster, broker_id: int, root: Path) -> BrokerHost:
    broker = cluster.brokers[broker_id]
    host_root = root / f"broker-{broker_id}"
    return BrokerHost(
        broker_id=broker_id,
        address=broker.spec.host,
        root=host_root,
        server_properties=host_root / SERVER_PROPERTIES,
        log_dirs=tuple(host_root / "data" / f"kafka-logs-{n}" for n in range(broker.spec.log_dir_count)),
    )


def write_broker_hosts(
    cluster: SimulatedCluster,
    root: Path,
    zookeeper_connect: str,
    *,
    prepare: Callable[[Path], object] | None = None,
) -> dict[int, BrokerHost]:
    """(Re)write every broker's host root under ``root``; returns where each broker's files are.

    A real broker's disk never vanishes while someone reads it, so the model's files are written
    into a staging root beside ``root`` first and then carried over file by file: each file replaces
    the old one atomically (``os.replace``), what the model no longer has is removed last. An SSH
    reader of a host root during a sync therefore sees either the old or the new file, never a
    missing ``server.properties``.
    (Every file is replaced, changed or not: comparing first costs more than writing, with the
    preallocated sparse indexes of active segments.)

    :param prepare: called with the staging root once every broker is written there, before
        anything moves (e.g. to damage segments again, which the model does not hold).
    """
    staging_root = root.parent / f".{root.name}.staging"
    if staging_root.exists():
        shutil.rmtree(staging_root)
    staged_hosts = {}
    hosts = {}
    # every replica directory once, grouped by (broker, log dir) in model order: one pass over the
    # cluster's replicas, not one per broker and log dir (linear in replicas at any broker count)
    replicas_at: dict[tuple[int, int], list[ReplicaDir]] = {}
    for replica in cluster.dirs:
        replicas_at.setdefault((replica.broker_id, replica.log_dir_index), []).append(replica)
    for broker_id, broker in sorted(cluster.brokers.items()):
        host = broker_host(cluster, broker_id, root)
        staged = broker_host(cluster, broker_id, staging_root)
        staged.server_properties.parent.mkdir(parents=True)
        # the content names the live paths (log.dirs): only where it is written differs; a file someone
        # wrote on the host is kept as written
        text = broker.server_properties_text
        staged.server_properties.write_text(
            text if text is not None else server_properties(cluster, broker, host, zookeeper_connect),
            encoding="latin-1" if text is not None else None,
        )
        for index, log_dir in enumerate(staged.log_dirs):
            _write_log_dir(cluster, broker, log_dir, index, replicas_at.get((broker_id, index), []))
        staged_hosts[broker_id], hosts[broker_id] = staged, host
    if prepare is not None:
        prepare(staging_root)
    for broker_id, host in hosts.items():
        if not os.path.lexists(host.root):
            # nothing there for a reader to lose: the whole staged host moves in one rename
            host.root.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staged_hosts[broker_id].root, host.root)
        else:
            _carry_over(staged_hosts[broker_id].root, host.root)
    shutil.rmtree(staging_root)
    return hosts


def _remove(path: Path) -> None:
    """Remove whatever ``path`` is (a symlink or FIFO too), never following a symlink."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _carry_over(staged: Path, live: Path) -> None:
    """Make the tree ``live`` hold exactly what ``staged`` holds, one atomic step per file."""
    if live.is_symlink() or (live.exists() and not live.is_dir()):
        _remove(live)
    live.mkdir(parents=True, exist_ok=True)
    wanted: set[Path] = {live}
    dir_times: list[tuple[Path, os.stat_result]] = []
    for folder, dirs, files in os.walk(staged):
        here = live / Path(folder).relative_to(staged)
        dir_times.append((here, Path(folder).stat()))  # before its files move out (that touches it)
        for name in dirs:
            target = here / name
            wanted.add(target)
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                _remove(target)
            target.mkdir(exist_ok=True)
        for name in files:
            source, target = Path(folder) / name, here / name
            wanted.add(target)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(source, target)
    for folder, dirs, files in os.walk(live, topdown=False):
        for name in [*files, *dirs]:
            path = Path(folder) / name
            if path not in wanted:
                _remove(path)
    for here, times in dir_times:  # entries added or removed above touched the folders' mtimes
        os.utime(here, ns=(times.st_atime_ns, times.st_mtime_ns))


def server_properties(
    cluster: SimulatedCluster, broker: BrokerModel, host: BrokerHost, zookeeper_connect: str
) -> str:
    spec = cluster.spec
    settings = {
        "broker.id": str(broker.broker_id),
        "listeners": f"PLAINTEXT://{broker.spec.host}:{broker.spec.listener_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
        "log.dirs": ",".join(str(d) for d in host.log_dirs),
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.connection.timeout.ms": "18000",
        "inter.broker.protocol.version": str(spec.ibp),
        "delete.topic.enable": str(spec.delete_topic_enable).lower(),
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.per.broker.percentage": "10",
        "min.insync.replicas": str(spec.min_insync_replicas),
        "unclean.leader.election.enable": "false",
        "log.segment.delete.delay.ms": str(spec.log_segment_delete_delay_ms),
        "log.segment.bytes": str(spec.segment_bytes),
    }
    if broker.spec.rack:
        settings["broker.rack"] = broker.spec.rack
    for key, value in broker.properties.items():  # what an operator changed (None: removed)
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = value
    header = f"# server.properties of simulated broker {broker.broker_id} ({spec.name}, Kafka {spec.kafka_version})"
    return "\n".join([header, *(f"{k}={v}" for k, v in settings.items())]) + "\n"


def meta_properties(cluster: SimulatedCluster, broker: BrokerModel, index: int) -> bytes:
    """Log dir ``index``'s meta.properties: ``version=0`` with ``broker.id`` and (2.4+) ``cluster.id``;
    once the broker started with the migration on (3.7+) a ``directory.id`` too, kept in KRaft mode and
    after a rollback (the recorded 3.9.0 migration's broker 0)."""
    started = dt.datetime.fromtimestamp(cluster.spec.start_time_ms / 1000, dt.UTC)
    # cluster.id is in meta.properties from 2.4 (``BrokerMetadataCheckpoint.write``, 2.3.0 vs 2.4.0)
    cluster_id = cluster.cluster_id if meta_properties_has_cluster_id(cluster.spec.release) else None
    directory_id = broker.directory_ids[index] if index < len(broker.directory_ids) else None
    meta = MetaProperties(
        version=0, cluster_id=cluster_id, broker_id=broker.broker_id, directory_id=directory_id
    )
    return meta.encode(date_line=java_date_string(started))


def _write_log_dir(
    cluster: SimulatedCluster, broker: BrokerModel, log_dir: Path, index: int, replicas: list[ReplicaDir]
) -> None:
    """One log dir with ``replicas`` (this broker's directories in it, any kind, model order)."""
    log_dir.mkdir(parents=True)
    (log_dir / ".lock").touch()
    (log_dir / "meta.properties").write_bytes(meta_properties(cluster, broker, index))
    stopped_cleanly = not broker.online and broker.clean_shutdown
    recovery_points, high_watermarks = {}, {}
    for replica in replicas:
        active_base = _write_partition_dir(cluster, broker, log_dir, replica)
        if replica.kind is DirKind.NORMAL:  # a live log: the checkpoints list it
            key = (replica.topic, replica.partition)
            recovery_points[key] = replica.records if stopped_cleanly else active_base
            high_watermarks[key] = replica.records
    (log_dir / "recovery-point-offset-checkpoint").write_bytes(
        OffsetCheckpoint.from_offsets(recovery_points).encode()
    )
    (log_dir / "replication-offset-checkpoint").write_bytes(
        OffsetCheckpoint.from_offsets(high_watermarks).encode()
    )
    if index == 0 and broker.broker_id in cluster.metadata_log_brokers:
        _write_partition_dir(cluster, broker, log_dir, metadata_log(cluster, broker.broker_id))
    (log_dir / "log-start-offset-checkpoint").write_bytes(OffsetCheckpoint.from_offsets({}).encode())
    (log_dir / "cleaner-offset-checkpoint").write_bytes(b"")
    if stopped_cleanly:
        marker = (
            CleanShutdownMarker(broker_epoch=-1, version=0)
            if clean_shutdown_marker_has_json(cluster.spec.release)
            else CleanShutdownMarker()
        )
        (log_dir / ".kafka_cleanshutdown").write_bytes(marker.encode())


METADATA_TOPIC = "__cluster_metadata"
"""``KafkaRaftServer.MetadataPartition``'s topic: the KRaft metadata log, never a ZooKeeper topic."""


def metadata_log(cluster: SimulatedCluster, broker_id: int) -> ReplicaDir:
    """A migrating ZK broker's copy of the KRaft metadata log, ``__cluster_metadata-0``: a UnifiedLog
    with topic id ``METADATA_TOPIC_ID`` whose partition.metadata is kept (``KafkaMetadataLog.apply``,
    3.9.0-rc3). It is not one of LogManager's logs, so no offset checkpoint lists it; its
    ``quorum-state`` file is not simulated."""
    return ReplicaDir(
        broker_id=broker_id,
        log_dir_index=0,
        topic=METADATA_TOPIC,
        partition=0,
        topic_id=ONE_UUID,
        records=40,
        record_value_bytes=60,
        records_per_batch=10,
        segment_bytes=1_073_741_824,
        leader_epochs=[(1, 0)],
        mtime_ms=cluster.clock_ms,
    )


#: What a damaged partition.metadata holds: the id line is not a Uuid (``Uuid.fromString`` fails,
#: an IOException to ``PartitionMetadataFile.read``, 3.3.1).
UNREADABLE_PARTITION_METADATA = b"version: 0\ntopic_id: \x00\x00torn-write"


def _write_partition_dir(
    cluster: SimulatedCluster, broker: BrokerModel, log_dir: Path, replica: ReplicaDir
) -> int:
    """Write one partition directory; returns the active segment's base offset.

    Plain ``os`` calls on ``str`` paths, each file's mtime set through its open descriptor: a
    fleet-sized cluster writes a million files here, and ``pathlib`` objects, path lookups and
    listings per file cost more than the writes themselves.
    """
    release = cluster.spec.release
    path = os.path.join(
        log_dir,
        format_partition_dir_name(
            replica.topic,
            replica.partition,
            replica.kind,
            replica.unique_id,
            cap_length=caps_suffixed_dir_names(release),
        ),
    )
    os.mkdir(path)
    path += "/"
    seconds = replica.mtime_ms / 1000
    if replica.metadata_unreadable:
        # damaged on disk (a torn write, a bad sector): Kafka's PartitionMetadataReadBuffer rejects it
        _write_file(path + "partition.metadata", UNREADABLE_PARTITION_METADATA, mtime_s=seconds)
    elif replica.topic_id is not None and replica.metadata_file:
        _write_file(
            path + "partition.metadata", PartitionMetadata(replica.topic_id).encode(), mtime_s=seconds
        )
    if replica.epoch_file:
        _write_file(
            path + "leader-epoch-checkpoint", _epochs_file(tuple(replica.leader_epochs)), mtime_s=seconds
        )
    segments = _segments(
        replica.records,
        replica.record_value_bytes,
        replica.records_per_batch,
        replica.segment_bytes,
        cluster.spec.start_time_ms,
        offset_index_holds_last_offset(release),
    )
    active_open = broker.online or not broker.clean_shutdown
    for number, (base_offset, log, offset_index, time_index) in enumerate(segments):
        is_active = number == len(segments) - 1
        if replica.corrupt_offset_index and number == 0:
            offset_index = _swap_middle_entries(offset_index)
        _write_file(path + segment_file_name(base_offset, ".log"), log, mtime_s=seconds)
        for suffix, data, entry_size in (
            (".index", offset_index, OFFSET_INDEX_ENTRY_SIZE),
            (".timeindex", time_index, TIME_INDEX_ENTRY_SIZE),
        ):
            # Preallocated like Kafka's active index: zero tail, sparse on disk.
            preallocated = (
                DEFAULT_MAX_INDEX_SIZE // entry_size * entry_size if is_active and active_open else None
            )
            _write_file(path + segment_file_name(base_offset, suffix), data, preallocated, mtime_s=seconds)
    os.utime(path, (seconds, seconds))  # last: each file created above touched the directory's mtime
    return segments[-1][0]


def _write_file(path: str, data: bytes, size: int | None = None, *, mtime_s: float | None = None) -> None:
    """A new file holding ``data`` (then truncated, i.e. extended sparse, to ``size`` when given), its
    access and modification times ``mtime_s`` when given (set last, through the descriptor)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if size is not None:
            os.ftruncate(fd, size)
        if mtime_s is not None:
            os.utime(fd, (mtime_s, mtime_s))
    finally:
        os.close(fd)


@lru_cache(maxsize=1024)
def _epochs_file(leader_epochs: tuple[tuple[int, int], ...]) -> bytes:
    """A leader-epoch-checkpoint's bytes (replicas with the same history share them)."""
    return LeaderEpochCheckpoint(tuple(EpochEntry(e, o) for e, o in leader_epochs)).encode()


def _swap_middle_entries(index: bytes) -> bytes:
    """Swap two adjacent entries so the offsets go backwards: a non-monotonic (corrupt) index."""
    count = len(index) // OFFSET_INDEX_ENTRY_SIZE
    if count < 2:
        raise ValueError("need at least two offset index entries to corrupt; give the replica more data")
    i = count // 2 - 1
    a, b = i * OFFSET_INDEX_ENTRY_SIZE, (i + 1) * OFFSET_INDEX_ENTRY_SIZE
    return (
        index[:a] + index[b : b + OFFSET_INDEX_ENTRY_SIZE] + index[a:b] + index[b + OFFSET_INDEX_ENTRY_SIZE :]
    )


def first_offset_index(log: bytes, base_offset: int) -> bytes:
    """The offset index a 0.11-1.1 broker writes for ``log``: on the same index-interval rule as 2.0+,
    but each entry holds the first offset of the batch at its position (``LogSegment.append`` indexes
    ``firstOffset`` in 1.1.0, ``largestOffset`` from 2.0.0; ``recover`` ``batch.baseOffset`` likewise)."""
    entries, last_entry, pos = bytearray(), 0, 0
    while pos + 17 <= len(log):
        first, length = struct.unpack_from(">qi", log, pos)
        if pos - last_entry > DEFAULT_INDEX_INTERVAL_BYTES:
            entries += struct.pack(">ii", first - base_offset, pos)
            last_entry = pos
        pos += length + 12
    return bytes(entries)


@lru_cache(maxsize=256)
def _segments(
    records: int,
    value_bytes: int,
    per_batch: int,
    segment_bytes: int,
    start_ms: int,
    last_offset_index: bool = True,
) -> tuple[tuple[int, bytes, bytes, bytes], ...]:
    """(base offset, .log, trimmed .index, trimmed .timeindex) per segment; replicas share the bytes.

    ``last_offset_index`` False: the offset index as 0.11-1.1 write it (:func:`first_offset_index`).
    """
    if not last_offset_index:
        return tuple(
            (base, log, first_offset_index(log, base), time_index)
            for base, log, _, time_index in _segments(
                records, value_bytes, per_batch, segment_bytes, start_ms
            )
        )
    out = []
    writer = LogSegmentWriter(0)
    for batch in _batches(records, value_bytes, per_batch, start_ms):
        if writer.log and len(writer.log) + len(batch.data) > segment_bytes:
            writer.close()
            out.append(
                (
                    writer.base_offset,
                    writer.log_bytes(),
                    writer.offset_index_bytes(),
                    writer.time_index_bytes(),
                )
            )
            writer = LogSegmentWriter(batch.base_offset)
        writer.append(batch.data)
    writer.close()
    out.append(
        (writer.base_offset, writer.log_bytes(), writer.offset_index_bytes(), writer.time_index_bytes())
    )
    return tuple(out)


@dataclass(frozen=True)
class _Batch:
    base_offset: int
    data: bytes


def _batches(records: int, value_bytes: int, per_batch: int, start_ms: int) -> Iterator[_Batch]:
    for base in range(0, records, per_batch):
        batch = [
            Record(
                offset=o,
                timestamp=start_ms + o * 10,
                key=f"k{o:06d}".encode(),
                value=(f"v{o:06d}-".encode() * (value_bytes // 8 + 1))[:value_bytes],
            )
            for o in range(base, min(records, base + per_batch))
        ]
        yield _Batch(base, encode_record_batch(batch, partition_leader_epoch=0))
