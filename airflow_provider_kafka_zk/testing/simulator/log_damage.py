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
* ``index_not_multiple`` -- a ``.index`` whose size is not a multiple of 8.

``index_rule="first"`` rewrites the planted segment's offset index as a 0.11-1.1 broker writes it
(each entry holds the first offset of the batch at its position), for tests with those rules.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kafka_zk.kafka.logdir import DirKind, format_partition_dir_name
from airflow_provider_kafka_zk.kafka.records import DEFAULT_MAX_INDEX_SIZE

from .cluster import Incident, SimulatedCluster, SimulationError
from .disk_writer import broker_host, first_offset_index

KINDS = (
    "repeated_offset",
    "truncated_segment",
    "torn_last_batch",
    "zero_length_index",
    "oversized_index",
    "index_not_multiple",
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


def apply(cluster: SimulatedCluster, root: Path, damage: LogDamage) -> None:
    """Put the damage on the freshly written host root (called after each sync)."""
    stem = segment_stem(cluster, root, damage)
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
