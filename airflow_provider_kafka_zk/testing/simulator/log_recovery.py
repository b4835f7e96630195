"""A simulated broker's start, applied to its log dirs on disk the way Kafka's source does it.

Independent of the product's prediction (:mod:`airflow_provider_kafka_zk.kafka.broker_start`,
fed by the header-walking scanner): this reads every batch with the product's record reader
(:mod:`airflow_provider_kafka_zk.kafka.records`, full CRC-32C), rebuilds indexes as
``LogSegment.recover`` does and changes the files -- truncation, emptied segments, later segments
renamed ``.deleted``, rebuilt ``.index``/``.timeindex``, the clean-shutdown marker removed -- so a
test can compare what the product said a start would do with what the start did.

Sources (read at each tag): ``LogManager.loadLogs`` / ``loadLog`` (3.3.1; 3.9.0-rc3
``CleanShutdownFileHandler``), ``LogLoader.loadSegmentFiles`` / ``recoverLog`` / ``recoverSegment``
(3.3.1, 3.9.0-rc3; ``Log`` of the same names at 0.11.0.0, 2.0.0, 2.8.0), ``LogSegment.recover`` /
``truncateTo`` / ``sanityCheck``, ``OffsetIndex.append`` / ``sanityCheck``, ``TimeIndex.maybeAppend`` /
``sanityCheck``, ``DefaultRecordBatch``/``LegacyRecord.ensureValid``, ``FileLogInputStream.nextBatch``.
The log lines are the 3.3.1 texts (``LogLoader`` with its ``logIdent``, ``LogSegment``, ``LogManager``,
``Kafka.scala``).

A start that throws while loading logs ends the way ``KafkaServer.startup`` ends it at 3.3.1: its
``shutdown()`` runs ``LogManager.shutdown``, which flushes the logs it loaded, rewrites each log dir's
``recovery-point-offset-checkpoint`` with those logs only and writes ``.kafka_cleanshutdown`` in every
log dir -- so the next start skips recovery everywhere, and the logs the failed start never loaded lose
their recovery point. From 3.5.2 (KAFKA-15375) the marker goes only to a log dir that had one or
whose logs all loaded.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c

from airflow_provider_kafka_zk.kafka.errors import RecordFormatError
from airflow_provider_kafka_zk.kafka.logdir import CleanShutdownMarker, OffsetCheckpoint
from airflow_provider_kafka_zk.kafka.records import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    OffsetIndexEntry,
    TimeIndexEntry,
    encode_offset_index,
    encode_time_index,
    iter_log_entries,
    parse_offset_index,
    parse_time_index,
)
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion, clean_shutdown_marker_has_json

from .disk_writer import broker_host
from .log_damage import RecordedCheckpoint, RecordedPartition

if TYPE_CHECKING:
    from .deploy import DeployedCluster

_INT32_MAX = 2**31 - 1


class _InvalidOffset(Exception):
    """``InvalidOffsetException`` from ``OffsetIndex.append`` or ``TimeIndex.maybeAppend``; ``partial``:
    the index entries appended before it (they stay in the mmap'd files)."""

    partial: _Rebuilt | None = None


class _Overflow(Exception):
    """``LogSegmentOffsetOverflowException`` (2.0+ ``ensureOffsetInRange``)."""


@dataclass
class SegmentOutcome:
    base_offset: int
    action: str  # kept | rebuilt_at_load | recovered | truncated | emptied | deleted | fatal
    truncated_bytes: int = 0


@dataclass
class PartitionOutcome:
    directory: Path
    fatal: str | None = None
    segments: list[SegmentOutcome] = field(default_factory=list)
    log_end_before: int | None = None
    log_end_after: int | None = None
    lines: list[str] = field(default_factory=list)

    def action(self, base_offset: int) -> str:
        return next(s.action for s in self.segments if s.base_offset == base_offset)


@dataclass
class _Rebuilt:
    valid_bytes: int
    offsets: list[OffsetIndexEntry]
    times: list[TimeIndexEntry]
    invalid: str | None = None  # the CorruptRecordException's message that stopped the walk


def _ident(directory: Path) -> str:
    """``LogLoader``'s ``logIdent`` (3.3.1): ``[LogLoader partition=$topicPartition, dir=${dir.getParent}] ``."""
    return f"[LogLoader partition={directory.name}, dir={directory.parent}] "


def _invalid_batch(data: bytes, position: int, source: str) -> str:
    """Why ``batch.ensureValid()`` throws for the batch at ``position`` (``DefaultRecordBatch`` and
    ``LegacyRecord.ensureValid``, 3.3.1): the ``CorruptRecordException`` message."""
    length = struct.unpack_from(">i", data, position + 8)[0]
    size = length + 12
    magic = struct.unpack_from(">b", data, position + 16)[0]
    if magic >= 2:
        if size < 61:
            return (
                f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead 61)"
            )
        stored = struct.unpack_from(">I", data, position + 17)[0]
        computed = crc32c.crc32c(data[position + 21 : position + size])
    else:
        stored = struct.unpack_from(">I", data, position + 12)[0]
        computed = zlib.crc32(data[position + 16 : position + size])
    return f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"


def _recover(data: bytes, base: int, release: KafkaVersion, source: str) -> _Rebuilt:
    """``LogSegment.recover``: walk every batch (CRC checked), rebuild both indexes; raises
    :class:`_InvalidOffset`/:class:`_Overflow` as Kafka throws; stops at the first invalid batch."""
    last_rule = release.at_least("2.0")
    java_index = release.at_least("3.5")  # storage/.../OffsetIndex.java, TimeIndex.java (no final period)
    end = "" if java_index else "."
    valid = last_index_entry = 0
    offsets: list[OffsetIndexEntry] = []
    times: list[TimeIndexEntry] = []
    max_ts, offset_of_max = NO_TIMESTAMP, None

    def time_append(timestamp: int, offset: int | None) -> None:
        if offset is None:
            return
        if times and offset < times[-1].offset:
            raise _InvalidOffset(
                f"Attempt to append an offset ({offset}) to slot {len(times)} no larger than the last offset "
                f"appended ({times[-1].offset}) to {source[:-4]}.timeindex{end}"
            )
        if timestamp > (times[-1].timestamp if times else NO_TIMESTAMP):
            times.append(TimeIndexEntry(timestamp, offset))

    invalid = None
    try:
        for entry in iter_log_entries(data, source, verify_crc=True):
            if entry.crc_valid is False:
                invalid = _invalid_batch(data, entry.position, source)
                break  # ensureValid: CorruptRecordException, caught in recover
            last = entry.last_offset
            if last_rule and not 0 <= last - base <= _INT32_MAX:
                raise _Overflow(f"offset {last} in segment {base}")
            if entry.max_timestamp > max_ts:
                max_ts, offset_of_max = entry.max_timestamp, last
            if valid - last_index_entry > DEFAULT_INDEX_INTERVAL_BYTES:
                offset = last if last_rule else entry.base_offset
                if offsets and offset <= offsets[-1].offset:
                    shown = f"{offset}" if java_index else f"({offset})"  # 3.9's OffsetIndex.java drops them
                    raise _InvalidOffset(
                        f"Attempt to append an offset {shown} to position {len(offsets)} no larger than the last "
                        f"offset appended ({offsets[-1].offset}) to {source[:-4]}.index{end}"
                    )
                offsets.append(OffsetIndexEntry(offset, valid))
                time_append(max_ts, offset_of_max)
                last_index_entry = valid
            valid += entry.size
    except _InvalidOffset as exc:
        exc.partial = _Rebuilt(valid, offsets, times)
        raise
    except RecordFormatError:
        # nextBatch: a size below 14 is a CorruptRecordException naming the file (caught in recover);
        # an unknown magic is read as a v2 batch (2+) or a legacy one and fails ensureValid
        length = struct.unpack_from(">i", data, valid + 8)[0]
        invalid = (
            f"Found record size {length} smaller than minimum record overhead (14) in file {source}."
            if length < 14
            else _invalid_batch(data, valid, source)
        )
    time_append(max_ts, offset_of_max)  # the closing entry (skipFullCheck = true)
    return _Rebuilt(valid, offsets, times, invalid)


def _next_offset(data: bytes, base: int, source: str) -> int:
    """``readNextOffset``: the last whole batch's next offset, or the base of an empty segment."""
    last = None
    try:
        for entry in iter_log_entries(data, source, verify_crc=False):
            last = entry.last_offset
    except RecordFormatError:
        pass
    return base if last is None else last + 1


def _sanity_fails(stem: Path, base: int, release: KafkaVersion) -> str | None:
    """The pre-2.3 ``OffsetIndex``/``TimeIndex.sanityCheck`` (0.11.0.0 strict, 2.0.0 lenient)."""
    if release.at_least("2.3"):
        return None
    index = stem.with_suffix(".index").read_bytes()
    if len(index) % 8:
        return "index size"
    parsed = parse_offset_index(index, base, str(stem))
    slots = len(parsed.entries) + parsed.tail_entries
    if slots:
        last = base if parsed.tail_entries else parsed.entries[-1].offset
        if (last <= base) if not release.at_least("2.0") else (last < base):
            return f"last offset {last}"
    time_file = stem.with_suffix(".timeindex")
    if not time_file.exists():
        return None
    data = time_file.read_bytes()
    if len(data) % 12:
        return "time index size"
    times = parse_time_index(data, base, str(time_file))
    if len(times.entries) + times.tail_entries:
        first = times.entries[0].timestamp if times.entries and data[:12] != bytes(12) else 0
        last_ts, last_offset = (
            (0, base) if times.tail_entries else (times.entries[-1].timestamp, times.entries[-1].offset)
        )
        if last_ts < first or last_offset < base:
            return f"time index last entry ({last_ts}, {last_offset})"
    return None


def _write_indexes(stem: Path, rebuilt: _Rebuilt, base: int, *, preallocated: bool = False) -> None:
    """The rebuilt indexes, trimmed (recovery ended) or ``preallocated`` (zero tail, sparse)."""
    stem.with_suffix(".index").write_bytes(encode_offset_index(rebuilt.offsets, base))
    stem.with_suffix(".timeindex").write_bytes(encode_time_index(rebuilt.times, base))
    if preallocated:
        for suffix, entry in ((".index", 8), (".timeindex", 12)):
            os.truncate(stem.with_suffix(suffix), DEFAULT_MAX_INDEX_SIZE // entry * entry)


def _invalid_messages_line(log_file: Path, rebuilt: _Rebuilt) -> str:
    """``LogSegment.recover``'s warning (3.3.1): ``"Found invalid messages in log segment %s at byte offset
    %d: %s. %s".format(path, validBytes, e.getMessage, e.getCause)`` -- the cause is null."""
    return (
        f"WARN Found invalid messages in log segment {log_file} at byte offset {rebuilt.valid_bytes}: "
        f"{rebuilt.invalid}. null"
    )


def _delete(stem: Path) -> None:
    """``deleteSegmentFiles(asyncDelete = true)``: files renamed ``.deleted`` (removed later)."""
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        file = Path(str(stem) + suffix)
        if file.exists():
            file.rename(str(file) + ".deleted")


def start_partition(
    directory: Path,
    *,
    release: KafkaVersion,
    clean_shutdown: bool,
    recovery_point: int | None,
    log_start_offset: int | None = None,
) -> PartitionOutcome:
    """Load one partition directory as a broker of ``release`` does at start, changing its files."""
    directory = Path(directory)
    name = directory.name
    ident = _ident(directory)
    out = PartitionOutcome(directory)
    bases = sorted(int(p.name[:20]) for p in directory.iterdir() if p.is_file() and p.name.endswith(".log"))
    stems = {b: directory / f"{b:020d}" for b in bases}
    if bases:
        active = stems[bases[-1]].with_suffix(".log")
        out.log_end_before = _next_offset(active.read_bytes(), bases[-1], str(active))
    actions: dict[int, SegmentOutcome] = {}
    # loadSegmentFiles
    for base in bases:
        stem = stems[base]
        log_file = stem.with_suffix(".log")
        index_missing = not stem.with_suffix(".index").exists()
        why = "missing" if index_missing else _sanity_fails(stem, base, release)
        if why is None:
            continue
        if index_missing:
            # 3.2+: logged only after a clean shutdown or below the recovery point
            if clean_shutdown or not release.at_least("3.2") or base < (recovery_point or 0):
                out.lines.append(
                    f"ERROR {ident}Could not find offset index file corresponding to log file {log_file}, "
                    "recovering segment and rebuilding index files..."
                )
        else:
            out.lines.append(
                f"WARN {ident}Found a corrupted index file corresponding to log file {log_file} due to {why}}}, "
                "recovering segment and rebuilding index files..."
            )
        data = log_file.read_bytes()
        try:
            rebuilt = _recover(data, base, release, str(log_file))
        except _InvalidOffset as exc:
            # recover() reset both indexes first (OffsetIndex.reset: the file created and preallocated
            # when missing) and appended up to the throw; nothing closes the failed log, so they stay
            # preallocated with a zero tail
            if exc.partial is not None:
                _write_indexes(stem, exc.partial, base, preallocated=True)
            out.fatal = f"InvalidOffsetException: {exc}"
            out.lines += [
                "ERROR There was an error in one of the threads during logs loading: "
                f"org.apache.kafka.common.errors.{out.fatal}",
                "ERROR Exiting Kafka due to fatal exception during startup.",
            ]
            actions[base] = SegmentOutcome(base, "fatal")
            out.segments = [actions.get(b, SegmentOutcome(b, "kept")) for b in bases]
            return out
        truncated = len(data) - rebuilt.valid_bytes
        if truncated:
            os.truncate(log_file, rebuilt.valid_bytes)
            if rebuilt.invalid is not None:
                out.lines.append(_invalid_messages_line(log_file, rebuilt))
        _write_indexes(stem, rebuilt, base)
        actions[base] = SegmentOutcome(base, "truncated" if truncated else "rebuilt_at_load", truncated)
    # recoverLog
    if not clean_shutdown and bases:
        rp = recovery_point or 0
        floor = max([b for b in bases if b <= rp], default=bases[0])
        unflushed = [b for b in bases if b >= floor]
        for i, base in enumerate(unflushed):
            out.lines.append(
                f"INFO {ident}Recovering unflushed segment {base}. {i}/{len(unflushed)} recovered for {name}."
            )
            stem = stems[base]
            log_file = stem.with_suffix(".log")
            data = log_file.read_bytes()
            try:
                rebuilt = _recover(data, base, release, str(log_file))
                truncated = len(data) - rebuilt.valid_bytes
                if truncated:
                    if rebuilt.invalid is not None:
                        out.lines.append(_invalid_messages_line(log_file, rebuilt))
                    os.truncate(log_file, rebuilt.valid_bytes)
                _write_indexes(stem, rebuilt, base)
                action = "truncated" if truncated else "recovered"
            except _InvalidOffset:
                out.lines.append(
                    f"WARN {ident}Found invalid offset during recovery. Deleting the corrupt segment and creating an "
                    f"empty one with starting offset {base}"
                )
                truncated = len(data)  # truncateTo(baseOffset): the first batch is at position 0
                os.truncate(log_file, 0)
                _write_indexes(stem, _Rebuilt(0, [], []), base)
                action = "emptied"
            if base in actions and actions[base].action in ("truncated", "rebuilt_at_load") and not truncated:
                action = actions[base].action if actions[base].action == "truncated" else "recovered"
            actions[base] = SegmentOutcome(
                base, action, truncated or (actions.get(base) or SegmentOutcome(base, "")).truncated_bytes
            )
            if truncated:
                next_offset = _next_offset(log_file.read_bytes(), base, str(log_file))
                out.lines.append(
                    f"WARN {ident}Corruption found in segment {base}, truncating to offset {next_offset}"
                )
                later = unflushed[i + 1 :]
                if later:
                    sizes = [stems[b].with_suffix(".log").stat().st_size for b in later]
                    out.lines.append(
                        f"INFO {ident}Deleting segments as part of log recovery: "
                        + ",".join(
                            f"LogSegment(baseOffset={b}, size={s}, ...)"
                            for b, s in zip(later, sizes, strict=True)
                        )
                    )
                for b in later:
                    _delete(stems[b])
                    actions[b] = SegmentOutcome(b, "deleted")
                break
    remaining = [b for b in bases if actions.get(b, SegmentOutcome(b, "kept")).action != "deleted"]
    if remaining:
        last = stems[remaining[-1]].with_suffix(".log")
        out.log_end_after = _next_offset(last.read_bytes(), remaining[-1], str(last))
        if log_start_offset is not None and out.log_end_after < log_start_offset:
            out.lines.append(
                f"WARN {ident}Deleting all segments because logEndOffset ({out.log_end_after}) is smaller than logStartOffset "
                f"{log_start_offset}. This could happen if segment files were deleted from the file system."
            )
            for b in remaining:
                _delete(stems[b])
                actions[b] = SegmentOutcome(b, "deleted")
            out.log_end_after = log_start_offset
        else:
            # the active segment's indexes are resized back to the maximum (LogLoader.load)
            active = stems[remaining[-1]]
            for suffix, entry in ((".index", 8), (".timeindex", 12)):
                file = active.with_suffix(suffix)
                if file.exists():
                    os.truncate(file, DEFAULT_MAX_INDEX_SIZE // entry * entry)
    out.segments = [actions.get(b, SegmentOutcome(b, "kept")) for b in bases]
    return out


@dataclass
class LogDirStart:
    log_dir: Path
    clean_shutdown: bool
    partitions: dict[str, PartitionOutcome] = field(default_factory=dict)
    # after a start that threw: what its shutdown left (LogManager.shutdown)
    marker_written: bool = False
    recovery_points_after: dict[tuple[str, int], int] | None = None

    @property
    def fatal(self) -> str | None:
        return next((p.fatal for p in self.partitions.values() if p.fatal), None)

    @property
    def loaded(self) -> list[str]:
        """The partition directories whose load completed."""
        return [name for name, p in self.partitions.items() if p.fatal is None]


def start_log_dirs(log_dirs: Iterable[Path], release: KafkaVersion) -> list[LogDirStart]:
    """``LogManager.loadLogs`` over a broker's log dirs: the marker decides clean or not (and is deleted),
    each partition's recovery point comes from ``recovery-point-offset-checkpoint`` (0 when absent or
    unreadable). Stops at the first partition whose load throws (the broker exits), after writing what
    the exit's ``LogManager.shutdown`` writes (:func:`_shut_down_after_failed_start`). One recovery
    thread per log dir (``num.recovery.threads.per.data.dir`` = 1) loads its partitions one by one;
    Kafka takes them in ``File.listFiles`` order, the simulator in name order."""
    log_dirs = [Path(d) for d in log_dirs]
    out = []
    for log_dir in log_dirs:
        marker = log_dir / ".kafka_cleanshutdown"
        clean = marker.exists()
        if clean:
            marker.unlink()  # KAFKA-10471: a crash while loading is an unclean shutdown next time
        started = LogDirStart(log_dir, clean)
        out.append(started)
        points = _checkpoint(log_dir / "recovery-point-offset-checkpoint")
        starts = _checkpoint(log_dir / "log-start-offset-checkpoint")
        for directory in sorted(p for p in log_dir.iterdir() if p.is_dir() and "-" in p.name):
            if directory.name.endswith(("-delete", "-future", "-stray")):
                continue
            topic, _, partition = directory.name.rpartition("-")
            key = (topic, int(partition))
            result = start_partition(
                directory,
                release=release,
                clean_shutdown=clean,
                recovery_point=points.get(key),
                log_start_offset=starts.get(key),
            )
            started.partitions[directory.name] = result
            if result.fatal:
                for other in log_dirs[len(out) :]:
                    out.append(LogDirStart(other, (other / ".kafka_cleanshutdown").exists()))
                _shut_down_after_failed_start(out, release)
                return out
    return out


def _shut_down_after_failed_start(starts: list[LogDirStart], release: KafkaVersion) -> None:
    """What ``KafkaServer.startup``'s catch does before ``Kafka.main`` exits (3.3.1): ``shutdown()`` ->
    ``LogManager.shutdown``: every loaded log flushed (``log.flush(true)``: its recovery point is its
    log end) and closed, then per log dir ``checkpointRecoveryOffsetsInDir(dir, logs)`` and
    ``checkpointLogStartOffsetsInDir`` with the *loaded* logs only, and ``.kafka_cleanshutdown``
    created -- for every live log dir at 3.3.1; from 3.5.2 only where the dir had the marker
    (``hadCleanShutdownFlags``) or every log of it loaded (``loadLogsCompletedFlags``)."""
    for started in starts:
        log_dir = started.log_dir
        points = {}
        for name, outcome in started.partitions.items():
            if outcome.fatal is None:
                topic, _, number = name.rpartition("-")
                points[(topic, int(number))] = outcome.log_end_after or 0
        (log_dir / "recovery-point-offset-checkpoint").write_bytes(
            OffsetCheckpoint.from_offsets(points).encode()
        )
        log_starts = _checkpoint(log_dir / "log-start-offset-checkpoint")
        (log_dir / "log-start-offset-checkpoint").write_bytes(
            OffsetCheckpoint.from_offsets({k: v for k, v in log_starts.items() if k in points}).encode()
        )
        started.recovery_points_after = points
        all_loaded = not started.fatal and len(started.partitions) == len(
            [
                p
                for p in log_dir.iterdir()
                if p.is_dir() and "-" in p.name and not p.name.endswith(("-delete", "-future", "-stray"))
            ]
        )
        if not release.at_least("3.5.2") or started.clean_shutdown or all_loaded:
            marker = (
                CleanShutdownMarker(broker_epoch=-1, version=0)
                if clean_shutdown_marker_has_json(release)
                else CleanShutdownMarker()
            )
            (log_dir / ".kafka_cleanshutdown").write_bytes(marker.encode())
            started.marker_written = True


def _checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        return dict(OffsetCheckpoint.parse(path.read_bytes(), str(path)).offsets)
    except (OSError, ValueError):
        return {}


def restart_broker(deployed: DeployedCluster, broker_id: int, *, clean: bool) -> list[LogDirStart]:
    """Stop a running deployed broker -- ``clean``: a controlled shutdown (``.kafka_cleanshutdown``
    written, recovery point at the log end); else a kill -9 (no marker; the recovery points stay where
    the last checkpoint left them) -- and start it again with :func:`start_broker`."""
    deployed.cluster.stop_broker(broker_id, clean=clean)
    deployed.sync()
    return start_broker(deployed, broker_id)


def start_broker(deployed: DeployedCluster, broker_id: int) -> list[LogDirStart]:
    """Start a stopped deployed broker the way Kafka does: its logs loaded on disk
    (:func:`load_broker_logs`), then -- unless that threw, as Kafka exits -- registered and synced."""
    starts = load_broker_logs(deployed, broker_id)
    if not any(s.fatal for s in starts):
        deployed.cluster.start_broker(broker_id)
    deployed.sync()
    return starts


def load_broker_logs(deployed: DeployedCluster, broker_id: int) -> list[LogDirStart]:
    """The log-loading part of a stopped deployed broker's start, on its disk (:func:`start_log_dirs`):
    recovery after an unclean shutdown, rebuilds at load, the clean-shutdown marker deleted. What the
    start left of each damaged partition replaces that damage in ``deployed.log_damage`` (a sync then
    brings back neither the damage nor the pristine log). When it throws, the broker must stay down
    (Kafka exits), and what the exit's shutdown wrote stays: the marker (the model's
    ``clean_shutdown``) and each log dir's ``recovery-point-offset-checkpoint`` holding only the logs
    that loaded (kept as a :class:`~.log_damage.RecordedCheckpoint` until the broker starts). The
    caller syncs."""
    cluster = deployed.cluster
    host = broker_host(cluster, broker_id, deployed.root)
    starts = start_log_dirs(host.log_dirs, cluster.spec.release)
    failed = any(s.fatal for s in starts)
    damaged = {
        (d.topic, d.partition)
        for d in deployed.log_damage
        if d.broker_id == broker_id and not isinstance(d, RecordedCheckpoint)
    }
    # a start rewrites the checkpoints (a failed one: below); the damage of other brokers stays
    kept = [d for d in deployed.log_damage if d.broker_id != broker_id]
    for started in starts:
        for outcome in started.partitions.values():
            topic, _, number = outcome.directory.name.rpartition("-")
            if (topic, int(number)) not in damaged:
                continue
            files = tuple(
                (p.name, p.read_bytes())
                for p in sorted(outcome.directory.iterdir())
                if p.is_file() and p.name[:20].isdigit()
            )
            remaining = [s.base_offset for s in outcome.segments if s.action != "deleted"]
            kept.append(
                RecordedPartition(
                    broker_id,
                    topic,
                    int(number),
                    str(outcome.directory.relative_to(deployed.root)),
                    files,
                    recovery_point=remaining[-1] if remaining and not failed else None,
                )
            )
    if failed:
        for started in starts:
            checkpoint = started.log_dir / "recovery-point-offset-checkpoint"
            kept.append(
                RecordedCheckpoint(
                    broker_id, str(checkpoint.relative_to(deployed.root)), checkpoint.read_bytes()
                )
            )
        # the exit's LogManager.shutdown: marked clean again (3.3.1; from 3.5.2 only where it had been)
        cluster.brokers[broker_id].clean_shutdown = any(s.marker_written for s in starts)
    deployed.log_damage[:] = kept
    return starts
