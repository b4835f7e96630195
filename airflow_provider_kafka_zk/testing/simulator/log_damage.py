"""Damage a pre-restart scan must find, planted on a deployed cluster's broker disks.

Each kind leaves the bytes a real broker would have after that accident; the damage is kept by
:class:`~.deploy.DeployedCluster` and applied again after every sync (a sync rewrites the host
roots from the model), and an ``Incident("log_damage")`` records it in the model:

* ``repeated_offset`` -- the seed's case: after an unclean shutdown the segment's log holds its last
  batch again (three more times, so one copy lands where the index rebuild appends an entry); each
  copy is a valid, CRC-correct batch whose offsets go back. With ``drop_index`` the segment's
  ``.index`` is gone too, so the next start rebuilds it and meets the repeated offset;
* ``truncated_segment`` -- a torn write: the log ends part-way through its last batch;
* ``torn_last_batch`` -- the last batch's length is intact but its last bytes are zero (CRC fails);
* ``zero_length_index`` -- the ``.index`` is empty (its log must exceed any single appended chunk
  for that to be visible);
* ``oversized_index`` -- an inactive segment's ``.index`` left at its preallocated size, zero tail;
* ``index_not_multiple`` -- a ``.index`` whose size is not a multiple of 8;
* ``corrupt_batch`` -- a batch in the middle of the segment with one record byte flipped: its length
  is intact, its CRC-32C fails (a bit flip on disk, a bad block);
* ``index_not_monotonic`` -- two adjacent ``.index`` entries swapped (offsets go back), in any segment.

``unflushed_from`` (a segment number) sets the partition's line in ``recovery-point-offset-checkpoint``
to that segment's base offset: the broker was killed while producing and its last checkpoint (every
``log.flush.offset.checkpoint.interval.ms``, 60 s) lagged, so a start recovers every segment from there
(``LogLoader.recoverLog`` at 3.3.1).

A simulated start (:func:`.log_recovery.restart_broker`) records what it left on disk as a
:class:`RecordedPartition`, re-applied after every sync in place of the damage it recovered; a start
that failed also leaves each log dir's recovery-point checkpoint as its exit wrote it
(:class:`RecordedCheckpoint`).

``index_rule="first"`` rewrites the planted segment's offset index as a 0.11-1.1 broker writes it
(each entry holds the first offset of the batch at its position), for tests with those rules.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_provider_kafka_zk.kafka.logdir import DirKind, OffsetCheckpoint, format_partition_dir_name
from airflow_provider_kafka_zk.kafka.records import DEFAULT_MAX_INDEX_SIZE

from .cluster import Incident, SimulatedCluster, SimulationError

if TYPE_CHECKING:
    from .deploy import DeployedCluster
from .disk_writer import broker_host, first_offset_index

KINDS = (
    "repeated_offset",
    "truncated_segment",
    "torn_last_batch",
    "zero_length_index",
    "oversized_index",
    "index_not_multiple",
    "corrupt_batch",
    "index_not_monotonic",
)


@dataclass(frozen=True)
class LogDamage:
    broker_id: int
    topic: str
    partition: int
    kind: str
    segment: int = -1  # which segment (0 = first, -1 = the active one)
    drop_index: bool = False
    index_rule: str = "last"
    unflushed_from: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SimulationError(f"unknown log damage {self.kind!r}: one of {', '.join(KINDS)}")
        if self.index_rule not in ("first", "last"):
            raise SimulationError("index_rule must be 'first' (0.11-1.1) or 'last' (2.0+)")


def record(cluster: SimulatedCluster, damage: LogDamage) -> None:
    """The model's note of the damage (the disks get it at every sync)."""
    replicas = [
        d for d in cluster.replica_dirs(damage.topic, damage.broker_id) if d.partition == damage.partition
    ]
    if not replicas:
        raise SimulationError(
            f"broker {damage.broker_id} holds no replica of {damage.topic}-{damage.partition}"
        )
    cluster.incidents.append(
        Incident(
            "log_damage",
            topic=damage.topic,
            broker_id=damage.broker_id,
            partitions=(damage.partition,),
            detail=damage.kind,
        )
    )


def segment_stem(cluster: SimulatedCluster, root: Path, damage: LogDamage) -> Path:
    """``<partition dir>/<base offset>`` of the damaged segment."""
    [replica] = [
        d
        for d in cluster.replica_dirs(damage.topic, damage.broker_id)
        if d.partition == damage.partition and d.kind is DirKind.NORMAL
    ]
    host = broker_host(cluster, damage.broker_id, root)
    directory = host.log_dirs[replica.log_dir_index] / format_partition_dir_name(
        replica.topic, replica.partition, replica.kind, replica.unique_id
    )
    bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
    try:
        base = bases[damage.segment]
    except IndexError:
        raise SimulationError(
            f"{directory} has {len(bases)} segment(s), no segment {damage.segment}"
        ) from None
    if damage.kind == "oversized_index" and base == bases[-1]:
        raise SimulationError(
            "oversized_index needs an inactive segment (the active index is preallocated anyway)"
        )
    return directory / f"{base:020d}"


def _batches(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of every whole batch."""
    out, pos = [], 0
    while pos + 17 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = length + 12
        if pos + size > len(data):
            break
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, size, base, base + delta))
        pos += size
    return out


@dataclass(frozen=True)
class RecordedPartition:
    """A partition directory's files as a simulated start left them (and its recovery point), put
    back after each sync in place of the damage the start recovered: the start's truncations and
    deletions stay, as on a real disk."""

    broker_id: int
    topic: str
    partition: int
    relative_dir: str  # under the host root
    files: tuple[tuple[str, bytes], ...]
    recovery_point: int | None = None

    def restore(self, root: Path) -> None:
        directory = root / self.relative_dir
        if directory.exists():
            for item in directory.iterdir():
                if item.is_file() and item.name[:20].isdigit():
                    item.unlink()
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.files:
            (directory / name).write_bytes(data)
        if self.recovery_point is not None:
            _set_recovery_point(directory.parent, self.topic, self.partition, self.recovery_point)


@dataclass(frozen=True)
class RecordedCheckpoint:
    """A log dir's ``recovery-point-offset-checkpoint`` as a failed start's shutdown left it (only the
    logs that loaded: ``LogManager.shutdown``, 3.3.1), put back after each sync until the broker
    starts again (applied after the :class:`RecordedPartition` entries, which set their own lines)."""

    broker_id: int
    relative_path: str  # under the host root
    data: bytes

    def restore(self, root: Path) -> None:
        (root / self.relative_path).write_bytes(self.data)


def _set_recovery_point(log_dir: Path, topic: str, partition: int, offset: int) -> None:
    """Rewrite the partition's line of ``recovery-point-offset-checkpoint`` (the rest kept)."""
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    offsets = (
        OffsetCheckpoint.parse(checkpoint.read_bytes(), str(checkpoint)).offsets
        if checkpoint.exists()
        else {}
    )
    offsets[(topic, partition)] = offset
    checkpoint.write_bytes(OffsetCheckpoint.from_offsets(offsets).encode())


def apply(
    cluster: SimulatedCluster, root: Path, damage: LogDamage | RecordedPartition | RecordedCheckpoint
) -> None:
    """Put the damage on the freshly written host root (called after each sync)."""
    if isinstance(damage, (RecordedPartition, RecordedCheckpoint)):
        damage.restore(root)
        return
    stem = segment_stem(cluster, root, damage)
    if damage.unflushed_from is not None:
        bases = sorted(int(p.name[:20]) for p in stem.parent.glob("*.log"))
        _set_recovery_point(stem.parent.parent, damage.topic, damage.partition, bases[damage.unflushed_from])
    log, index = stem.with_suffix(".log"), stem.with_suffix(".index")
    data = log.read_bytes()
    batches = _batches(data)
    if len(batches) < 2:
        raise SimulationError(f"{log} has {len(batches)} batch(es): give the replica more data")
    if damage.index_rule == "first":
        preallocated = index.stat().st_size if index.exists() else 0
        index.write_bytes(first_offset_index(data, int(stem.name)))
        if preallocated > index.stat().st_size:
            os.truncate(index, preallocated)  # the active segment's preallocation stays
    last_pos, last_size, _, _ = batches[-1]
    if damage.kind == "repeated_offset":
        log.write_bytes(data + data[last_pos:] * 3)
        if damage.drop_index:
            index.unlink(missing_ok=True)
    elif damage.kind == "truncated_segment":
        log.write_bytes(data[: last_pos + last_size // 2])
    elif damage.kind == "torn_last_batch":
        log.write_bytes(
            data[: last_pos + last_size - min(64, last_size - 61)] + bytes(min(64, last_size - 61))
        )
    elif damage.kind == "zero_length_index":
        index.write_bytes(b"")
    elif damage.kind == "oversized_index":
        os.truncate(index, DEFAULT_MAX_INDEX_SIZE // 8 * 8)
    elif damage.kind == "index_not_multiple":
        with open(index, "ab") as f:
            f.write(b"\x00\x00\x01")
    elif damage.kind == "corrupt_batch":
        middle_pos, middle_size, _, _ = batches[len(batches) // 2]
        flipped = bytearray(data)
        flipped[middle_pos + middle_size - 3] ^= 0xFF  # a record byte: the CRC-32C no longer matches
        log.write_bytes(bytes(flipped))
    elif damage.kind == "index_not_monotonic":
        entries = index.read_bytes()
        count = next(
            (i for i in range(len(entries) // 8) if entries[i * 8 : i * 8 + 8] == bytes(8)), len(entries) // 8
        )
        if count < 2:
            raise SimulationError(f"{index} has {count} entries: give the segment more data")
        a = (count // 2 - 1) * 8
        swapped = entries[:a] + entries[a + 8 : a + 16] + entries[a : a + 8] + entries[a + 16 :]
        index.write_bytes(swapped)


def plant(deployed: DeployedCluster, damage: LogDamage) -> Path:
    """Record and apply ``damage`` on a deployed cluster, kept across syncs (what
    ``DeployedCluster.plant_log_damage`` does, for every field of :class:`LogDamage`). Returns the
    damaged segment's path without suffix."""
    record(deployed.cluster, damage)
    apply(deployed.cluster, deployed.root, damage)
    deployed.log_damage.append(damage)
    return segment_stem(deployed.cluster, deployed.root, damage)
