"""What a broker's start does to each partition's log, per release line, as Kafka's source says.

One model, used by every prediction of the pre-restart scan (and checked against the simulator's
broker start, which applies the same source rules to real files independently). Pure: it takes
the scan's facts about each segment (:mod:`.log_scan`: index structure and the recovery walk) and
returns, per segment, what the start does: kept as is, indexes rebuilt at load or at recovery,
truncated, emptied, deleted, or the broker exits -- with the offsets, bytes and log lines.

The start, by source (``core/src/main/scala/kafka/log/``):

* ``LogManager.loadLogs`` (0.11.0.0 ``Log.hasCleanShutdownFile``; 3.3.1 / 3.9.0-rc3
  ``LogManager.loadLogs``): a log dir holding ``.kafka_cleanshutdown`` had a clean shutdown
  (recovery is skipped); the marker is deleted at start. Its content (empty before 3.7, JSON
  ``{"version":0,"brokerEpoch":N}`` from 3.7: ``CleanShutdownFileHandler``) does not matter, only
  that it exists. The recovery point of a partition is its line in
  ``recovery-point-offset-checkpoint``, 0 when it has none or the file cannot be read.
* ``loadSegmentFiles`` (0.11.0.0 ``Log``; 2.0.0 / 2.8.0 ``Log``; 3.3.1 / 3.9.0-rc3 ``LogLoader``): every
  segment in name order. A missing ``.index`` makes Kafka recover the segment there
  (``recoverSegment``). Up to 2.2 every segment's indexes are sanity-checked too
  (``OffsetIndex.sanityCheck``: 0.11-1.1 ``lastOffset > baseOffset``, 2.0-2.2 only
  ``lastOffset < baseOffset`` fails; ``TimeIndex.sanityCheck``: last timestamp below the first, last
  offset below the base; sizes not a multiple of the entry size), and a failure is rebuilt the same
  way. From 2.3 (KAFKA-7283, lazy indexes) ``LogSegment.sanityCheck`` only looks for the ``.index``
  file and checks the ``.txnindex``. An ``InvalidOffsetException`` while recovering here is not
  caught: the log fails to load and the broker exits ("Exiting Kafka due to fatal exception during
  startup", ``Kafka.scala`` 3.3.1). A corrupt batch found here truncates that segment only: later
  segments stay.
* ``recoverLog`` (same files; 3.3.1 ``LogLoader.scala`` lines 411-448): after an unclean shutdown,
  every segment from the one holding the recovery point (``segments.values(recoveryPoint, MaxValue)``,
  which starts at the floor segment) is recovered: its indexes rebuilt from the log
  (``LogSegment.recover``). An ``InvalidOffsetException`` there is caught and the segment truncated to
  its base offset (emptied); whenever recovery truncated bytes, every later segment is deleted and
  recovery stops ("Corruption found in segment B, truncating to offset N").
* ``deleteSegmentsIfLogStartGreaterThanLogEnd`` (2.8.0 ``Log``, 3.3.1 ``LogLoader``): a log end below the
  ``log-start-offset-checkpoint`` entry deletes every segment.
* A clean shutdown of a running broker (``LogManager.shutdown``: ``log.flush(); log.close()``) moves the
  recovery point to the log end and trims the active segment's indexes; 3.6+ writes the marker only
  for a log dir that had one or whose logs all finished loading (``loadLogsCompletedFlags``).

What is not predicted, and said so: a segment whose offsets overflow its index
(``LogSegmentOffsetOverflowException``: Kafka splits it, 2.0+), ``.swap``/``.cleaned`` leftovers, the
``.txnindex`` check, and segments the scan did not read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .versions import KafkaVersion

__all__ = [
    "Fate",
    "LostRange",
    "PartitionOnDisk",
    "PartitionStart",
    "Scenario",
    "SegmentOnDisk",
    "SegmentStart",
    "Shutdown",
    "StartRules",
    "predict_start",
    "start_rules",
]


# ---------------------------------------------------------------------------------------------
# The release lines
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartRules:
    """How one release line starts its logs (each field cites the source it was read from).

    :param index_entry: which offset recovery indexes: the batch's ``first`` (0.11-1.1,
        ``LogSegment.recover`` appends ``batch.baseOffset``) or ``last`` (2.0+, ``batch.lastOffset``).
    :param load_sanity_check: ``strict`` (0.11-1.1), ``lenient`` (2.0-2.2) or ``none`` (2.3+): the
        startup check of offset and time indexes in ``loadSegmentFiles``.
    :param offset_range_check: recovery throws ``LogSegmentOffsetOverflowException`` for an offset the
        index cannot hold (2.0+, ``ensureOffsetInRange``).
    :param marker_json: ``.kafka_cleanshutdown`` holds JSON (3.7+).
    :param marker_needs_loaded_logs: a shutdown writes the marker only for a dir that had one or whose
        logs all loaded (3.5.2+, KAFKA-15375); before, also after a start that failed while loading
        logs, with ``recovery-point-offset-checkpoint`` rewritten for the loaded logs only.
    :param java_indexes: ``OffsetIndex``/``TimeIndex`` are the Java classes of ``storage/`` (3.5+),
        whose ``InvalidOffsetException`` texts differ (no parentheses round the offset, no final period).
    :param java_segment: ``LogSegment`` is Java (3.7+): "Found invalid messages ... at byte offset N."
    :param missing_index_logged_below_recovery_point_only: after an unclean shutdown a missing
        ``.index`` is logged only below the recovery point (3.2+: ``if (hadCleanShutdown ||
        segment.baseOffset < recoveryPointCheckpoint) error(...)``, ``LogLoader.loadSegmentFiles``).
    :param recovery_counts: "Recovering unflushed segment N. i/n recovered for t-p." (3.3+, KIP-831);
        before: "Recovering unflushed segment N".
    :param cause_in_invalid_messages: "Found invalid messages ... : <message>. <cause>" (2.4+; the
        cause of a ``CorruptRecordException`` is null); before, ": <message>." alone.
    """

    release: KafkaVersion
    line: str
    index_entry: str
    load_sanity_check: str
    offset_range_check: bool
    marker_json: bool
    marker_needs_loaded_logs: bool
    source: str
    java_indexes: bool = False
    java_segment: bool = False
    missing_index_logged_below_recovery_point_only: bool = False
    recovery_counts: bool = False
    cause_in_invalid_messages: bool = False

    @property
    def log_lines_of(self) -> str:
        """Which release's log texts the lines quote (0.11, 2.0, 3.3 or 3.9 wording)."""
        if not self.release.at_least("1.1"):
            return "0.11"
        if not self.release.at_least("3.0"):
            return "2.0"
        if not self.release.at_least("3.9"):
            return "3.3"
        return "3.9"


def start_rules(release: KafkaVersion) -> StartRules:
    """The start rules of ``release``'s line."""
    if not release.at_least("1.1"):
        line, source = (
            "0.11-1.0",
            "0.11.0.0 core/src/main/scala/kafka/log/Log.scala loadSegmentFiles/recoverLog",
        )
    elif not release.at_least("2.0"):
        line, source = "1.1", "1.1.0 core/src/main/scala/kafka/log/Log.scala loadSegmentFiles/recoverLog"
    elif not release.at_least("2.3"):
        line, source = "2.0-2.2", "2.0.0 core/src/main/scala/kafka/log/Log.scala loadSegmentFiles/recoverLog"
    elif not release.at_least("3.0"):
        line, source = "2.3-2.8", "2.8.0 core/src/main/scala/kafka/log/Log.scala loadSegmentFiles/recoverLog"
    elif not release.at_least("3.6"):
        line, source = (
            "3.0-3.5",
            "3.3.1 core/src/main/scala/kafka/log/LogLoader.scala loadSegmentFiles/recoverLog",
        )
    else:
        line, source = (
            "3.6-3.9",
            "3.9.0-rc3 core/src/main/scala/kafka/log/LogLoader.scala loadSegmentFiles/recoverLog",
        )
    if not release.at_least("2.0"):
        check = "strict"
    elif not release.at_least("2.3"):
        check = "lenient"
    else:
        check = "none"
    return StartRules(
        release=release,
        line=line,
        index_entry="last" if release.at_least("2.0") else "first",
        load_sanity_check=check,
        offset_range_check=release.at_least("2.0"),
        marker_json=release.at_least("3.7"),
        # KAFKA-15375 (3.5.2, 3.6.0): LogManager.shutdown writes the marker only for a log dir that had
        # one or whose logs all loaded (loadLogsCompletedFlags); 3.5.1 and earlier write it always
        marker_needs_loaded_logs=release.at_least("3.5.2"),
        source=source,
        java_indexes=release.at_least("3.5"),
        java_segment=release.at_least("3.7"),
        missing_index_logged_below_recovery_point_only=release.at_least("3.2"),
        recovery_counts=release.at_least("3.3"),
        cause_in_invalid_messages=release.at_least("2.4"),
    )


# ---------------------------------------------------------------------------------------------
# Inputs: what the scan saw
# ---------------------------------------------------------------------------------------------


class Shutdown(enum.Enum):
    CLEAN = "clean"  # .kafka_cleanshutdown present at start: recovery skipped
    UNCLEAN = "unclean"  # kill -9, crash, power loss: no marker


@dataclass(frozen=True)
class Scenario:
    """How the broker goes down before this start.

    :param from_running: the broker runs now; a clean shutdown first flushes (recovery point = log
        end) and trims the active segment's indexes (``LogManager.shutdown``, ``LogSegment.close``).
    """

    shutdown: Shutdown
    from_running: bool = False

    def describe(self) -> str:
        if self.shutdown is Shutdown.CLEAN:
            return "a clean restart" if self.from_running else "its start after a clean shutdown"
        return (
            "an unclean restart (kill -9, crash)"
            if self.from_running
            else "its start after an unclean shutdown"
        )


@dataclass(frozen=True)
class SegmentOnDisk:
    """One segment as the scan saw it (:func:`.log_scan.scan_partition`'s segment record).

    :param walk: the recovery walk (None: not read); :param skipped: why the scan did not read it.
    """

    base_offset: int
    log_bytes: int | None
    active: bool
    index: Mapping[str, Any] = field(default_factory=dict)
    timeindex: Mapping[str, Any] = field(default_factory=dict)
    walk: Mapping[str, Any] | None = None
    skipped: str | None = None

    @property
    def end_offset(self) -> int | None:
        """The segment's next offset as Kafka reads it now (``readNextOffset``: the last batch's)."""
        walk = self.walk
        if walk is None or not walk.get("complete", True):
            return None
        if "end_offset" in walk:  # readNextOffset: the last whole batch, CRC or not
            end = walk["end_offset"]
            return None if end is None else int(end)
        stop = walk.get("stop") or {}
        if stop.get("kind") == "corrupt_batch":
            # past a corrupt batch nothing can be read; only a failed last batch (a torn write) still
            # tells where the log ended
            if stop.get("is_last") and stop.get("last_offset") is not None:
                return int(stop["last_offset"]) + 1
            return None
        last = walk.get("last_offset")
        return self.base_offset if last is None else int(last) + 1


@dataclass(frozen=True)
class PartitionOnDisk:
    """One partition directory: its segments in offset order and its checkpointed offsets.

    :param recovery_point: its ``recovery-point-offset-checkpoint`` line (None: none -- 0 to Kafka).
    :param log_start_offset: its ``log-start-offset-checkpoint`` line (None: none).
    """

    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentOnDisk, ...]
    recovery_point: int | None = None
    log_start_offset: int | None = None

    @classmethod
    def from_scan(
        cls,
        topic: str,
        partition: int,
        directory: str,
        segments: Sequence[Mapping[str, Any]],
        *,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
    ) -> PartitionOnDisk:
        """From :func:`.log_scan.scan_partition`'s segment records (or rows carrying the same keys)."""
        return cls(
            topic,
            partition,
            directory,
            tuple(
                SegmentOnDisk(
                    int(s["base_offset"]),
                    None if s.get("log_size") is None else int(s["log_size"]),
                    bool(s.get("active")),
                    s.get("index") or {},
                    s.get("timeindex") or {},
                    s.get("walk"),
                    s.get("skipped"),
                )
                for s in sorted(segments, key=lambda s: int(s["base_offset"]))
            ),
            recovery_point,
            log_start_offset,
        )

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def path(self, base_offset: int, suffix: str) -> str:
        return f"{self.directory.rstrip('/')}/{base_offset:020d}{suffix}"


# ---------------------------------------------------------------------------------------------
# Outputs: what the start does
# ---------------------------------------------------------------------------------------------


class Fate(enum.Enum):
    KEPT = "kept as is"
    REBUILT_AT_LOAD = "indexes rebuilt at load"
    RECOVERED = "recovered: indexes rebuilt at start"
    TRUNCATED = "truncated"
    EMPTIED = "truncated to its base offset"
    DELETED = "deleted"
    FATAL = "the broker exits"
    NOT_REACHED = "not reached: the broker exited before"
    UNKNOWN = "not predicted"


@dataclass(frozen=True)
class SegmentStart:
    """What the start does to one segment.

    :param position: for TRUNCATED/EMPTIED, the byte the ``.log`` is cut at (bytes before it stay).
    :param next_offset: the segment's next offset after the start (None: unknown).
    :param index_damage_stays: its indexes are damaged and this start does not rebuild them.
    """

    base_offset: int
    fate: Fate
    why: str = ""
    position: int | None = None
    bytes_lost: int = 0
    next_offset: int | None = None
    at_load: bool = False
    index_damage_stays: bool = False


@dataclass(frozen=True)
class LostRange:
    """Offsets ``first .. end-1`` no longer on this replica after the start (``end`` None: up to a log
    end the scan could not read), ``bytes`` removed from ``.log`` files for them."""

    first: int
    end: int | None
    bytes: int
    segment: int
    deleted_segments: tuple[int, ...] = ()
    gap: bool = False  # a hole before later segments that stay (truncated at load)

    def describe(self) -> str:
        last = "the log end (not read)" if self.end is None else str(self.end - 1)
        return f"offsets {self.first}..{last} ({self.bytes:,} bytes)"


@dataclass(frozen=True)
class PartitionStart:
    """A start of one partition under one scenario."""

    partition: PartitionOnDisk
    scenario: Scenario
    rules: StartRules
    segments: tuple[SegmentStart, ...]
    fatal: str | None = None
    fatal_segment: int | None = None
    log_end_before: int | None = None
    log_end_after: int | None = None
    lost: tuple[LostRange, ...] = ()
    kafka_log: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def bytes_lost(self) -> int:
        return sum(r.bytes for r in self.lost)

    @property
    def loses_data(self) -> bool:
        """Whole batches are gone (a cut-off last batch is not: it was never complete)."""
        return any(r.end is None or r.end > r.first for r in self.lost)

    @property
    def rebuilt_indexes(self) -> int:
        """Segments whose indexes this start rebuilds from their whole log: every one rebuilt at load
        (a missing ``.index``, the pre-2.3 startup check) and every recovered one but the active
        segment (a crash always recovers that one: small)."""
        active = self.partition.segments[-1].base_offset if self.partition.segments else None
        return sum(
            1
            for s in self.segments
            if (s.at_load and s.fate in (Fate.REBUILT_AT_LOAD, Fate.RECOVERED))
            or (s.fate is Fate.RECOVERED and s.base_offset != active)
        )

    def fate_of(self, base_offset: int) -> SegmentStart:
        return next(s for s in self.segments if s.base_offset == base_offset)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


@dataclass
class _Recovery:
    """``LogSegment.recover`` on one segment: ``ok``, ``truncate`` (at ``position``),
    ``invalid_offset`` (the exception's text), ``overflow`` or ``unknown``. ``message``: the
    ``CorruptRecordException`` text a truncation logs ("Found invalid messages ..."); None when the
    iteration just ended (a cut-off last batch: no exception, no line)."""

    kind: str
    position: int | None = None
    bytes: int = 0
    next_offset: int | None = None
    detail: str = ""
    message: str | None = None


def _recover(segment: SegmentOnDisk, partition: PartitionOnDisk, rules: StartRules) -> _Recovery:
    walk = segment.walk
    if segment.skipped:
        return _Recovery("unknown", detail=f"not read ({segment.skipped})")
    if walk is None:
        return _Recovery("unknown", detail="its log was not walked")
    stop = walk.get("stop")
    if stop and stop["kind"] in ("budget", "time"):
        return _Recovery("unknown", detail=f"the scan stopped reading it ({stop.get('detail')})")
    if walk.get("crc", "all") != "all":
        # recover() calls batch.ensureValid() on every batch: a CRC not read is a truncation not seen
        return _Recovery(
            "unknown",
            detail="only its batch headers were read, not every batch's CRC that recovery checks "
            "(LogSegment.recover: batch.ensureValid())",
        )
    if not stop:
        return _Recovery("ok", next_offset=segment.end_offset)
    kind = stop["kind"]
    if kind == "offset_overflow":
        if rules.offset_range_check:
            return _Recovery(
                "overflow",
                detail=f"{stop.get('detail')}: Kafka splits the segment (splitOverflowedSegment), not predicted here",
            )
        return _Recovery("unknown", detail=f"{stop.get('detail')}: not modelled before 2.0")
    if kind == "invalid_offset":
        index = "index" if stop.get("index", "index") == "index" else "timeindex"
        path = partition.path(segment.base_offset, f".{index}")
        return _Recovery("invalid_offset", detail=_invalid_offset_text(rules, stop, path))
    position = int(stop["position"])
    next_offset = stop.get("next_offset")
    message = stop.get("kafka_message") if kind == "corrupt_batch" else None
    if kind == "corrupt_batch" and message is None:
        message = str(stop.get("detail", ""))  # a scan row from before the exception texts were read
    return _Recovery(
        "truncate",
        position=position,
        bytes=int(segment.log_bytes or 0) - position,
        next_offset=segment.base_offset if next_offset is None else int(next_offset),
        detail=str(stop.get("detail", "")),
        message=message,
    )


def _invalid_offset_text(rules: StartRules, stop: Mapping[str, Any], path: str) -> str:
    """The exception's message as this release words it (``OffsetIndex.append``/``TimeIndex.maybeAppend``)."""
    offset, last, slot = stop.get("offset"), stop.get("last_indexed"), stop.get("entries")
    where = slot if slot is not None else "?"
    end = "" if rules.java_indexes else "."
    if stop.get("index") == "timeindex":
        return (
            f"InvalidOffsetException: Attempt to append an offset ({offset}) to slot {where} no larger than the "
            f"last offset appended ({last}) to {path}{end}"
        )
    shown = offset if rules.java_indexes else f"({offset})"
    return (
        f"InvalidOffsetException: Attempt to append an offset {shown} to position {where} no larger than the "
        f"last offset appended ({last}) to {path}{end}"
    )


def _sanity_check_fails(
    segment: SegmentOnDisk, partition: PartitionOnDisk, rules: StartRules, trimmed: bool
) -> str | None:
    """The exception message of the pre-2.3 startup check of this segment's indexes (None: it passes
    or is not run), in the release's words.

    Kafka counts every 8/12 bytes as an entry, so the last entry it reads is the zero tail's when
    there is one: offset = base, timestamp 0 (``AbstractIndex`` open; ``OffsetIndex.sanityCheck`` and
    ``TimeIndex.sanityCheck`` at 0.11.0.0 -- ``require``, so IllegalArgumentException "requirement
    failed" --, 1.1.0 and 2.0.0 -- CorruptIndexException). ``trimmed``: the active segment's tail
    was trimmed at a clean shutdown."""
    if rules.load_sanity_check == "none":
        return None
    old = not rules.release.at_least("1.1")
    prefix = "requirement failed: " if old else ""
    base = segment.base_offset
    index, time = segment.index, segment.timeindex
    index_path, time_path = partition.path(base, ".index"), partition.path(base, ".timeindex")
    size = int(index.get("size") or 0)
    zero_tail = 0 if trimmed else int(index.get("zero_tail") or 0)
    slots = int(index.get("entries") or 0) + zero_tail
    last = base if zero_tail else index.get("last_offset")
    if slots and last is not None:
        if rules.load_sanity_check == "strict" and last <= base:
            words = "no larger than" if old else "no greater than"
            return (
                f"{prefix}Corrupt index found, index file ({index_path}) has non-zero size but the last offset is "
                f"{last} which is {words} the base offset {base}."
            )
        if last < base:
            return (
                f"Corrupt index found, index file ({index_path}) has non-zero size but the last offset is {last} "
                f"which is less than the base offset {base}."
            )
    if size % 8:
        words = "not positive or not a multiple of 8" if old else "neither positive nor a multiple of 8"
        return f"{prefix}Index file {index_path} is corrupt, found {size} bytes which is {words}."
    if time.get("missing"):
        return None  # created empty and resized to 0: passes
    time_size = int(time.get("size") or 0)
    time_zero_tail = 0 if trimmed else int(time.get("zero_tail") or 0)
    if int(time.get("entries") or 0) + time_zero_tail:
        first_ts = int(time.get("first_timestamp") or 0)
        last_ts = 0 if time_zero_tail else int(time.get("last_timestamp") or 0)
        last_offset = base if time_zero_tail else time.get("last_offset")
        if last_ts < first_ts:
            words = "no larger than" if old else "less than"
            return (
                f"{prefix}Corrupt time index found, time index file ({time_path}) has non-zero size but the last "
                f"timestamp is {last_ts} which is {words} the first timestamp {first_ts}"
            )
        if last_offset is not None and last_offset < base:
            words = "smaller than" if old else "less than"
            return (
                f"{prefix}Corrupt time index found, time index file ({time_path}) has non-zero size but the last "
                f"offset is {last_offset} which is {words} the first offset {base}"
            )
    if time_size % 12:
        words = "not positive or not a multiple of 12" if old else "neither positive nor a multiple of 12"
        return f"{prefix}Time index file {time_path} is corrupt, found {time_size} bytes which is {words}."
    return None


def _index_damaged(segment: SegmentOnDisk, trimmed: bool) -> bool:
    problems = list(segment.index.get("problems") or []) + list(segment.timeindex.get("problems") or [])
    problems = [p for p in problems if p.get("kind") != "skipped"]
    return bool(problems)


class _Log:
    """The log lines a start prints, in the words of the release's source, each as the broker's
    ``server.log`` shows it after the level (``Logging.msgWithLogIdent``: the logger's ``logIdent``
    first). ``LogLoader`` (3.0+) and ``Log`` (1.1-2.8) carry ``[LogLoader|Log partition=<t-p>,
    dir=<log dir>] ``; ``LogSegment``, ``LogManager`` and ``Kafka`` carry none."""

    def __init__(self, partition: PartitionOnDisk, rules: StartRules) -> None:
        self.partition = partition
        self.rules = rules
        self.style = rules.log_lines_of
        self.lines: list[str] = []
        log_dir = partition.directory.rstrip("/").rpartition("/")[0]
        if not rules.release.at_least("1.1"):
            self.ident = ""
        elif not rules.release.at_least("3.0"):
            self.ident = f"[Log partition={partition.name}, dir={log_dir}] "
        else:
            self.ident = f"[LogLoader partition={partition.name}, dir={log_dir}] "

    def _loader(self, level: str, text: str) -> None:
        self.lines.append(f"{level} {self.ident}{text}")

    def missing_index(self, base: int) -> None:
        path = self.partition.path(base, ".log")
        if self.style == "0.11":
            self._loader(
                "ERROR",
                f"Could not find offset index file corresponding to log file {path}, rebuilding index...",
            )
        else:
            self._loader(
                "ERROR",
                f"Could not find offset index file corresponding to log file {path}, "
                "recovering segment and rebuilding index files...",
            )

    def corrupt_index(self, base: int, why: str) -> None:
        path = self.partition.path(base, ".log")
        if self.style == "0.11":
            self._loader(
                "WARN",
                f"Found a corrupted index file due to {why}}}. deleting {self.partition.path(base, '.timeindex')}, "
                f"{self.partition.path(base, '.index')}, and {self.partition.path(base, '.txnindex')} and rebuilding index...",
            )
        else:
            self._loader(
                "WARN",
                f"Found a corrupted index file corresponding to log file {path} due to {why}}}, "
                "recovering segment and rebuilding index files...",
            )

    def recovering(self, base: int, done: int, total: int) -> None:
        if self.style == "0.11":
            self._loader("INFO", f"Recovering unflushed segment {base} in log {self.partition.name}.")
        elif self.rules.recovery_counts:
            self._loader(
                "INFO",
                f"Recovering unflushed segment {base}. {done}/{total} recovered for {self.partition.name}.",
            )
        else:
            self._loader("INFO", f"Recovering unflushed segment {base}")

    def invalid_messages(self, base: int, position: int, message: str) -> None:
        """``LogSegment.recover``'s catch of ``CorruptRecordException``: the exception's message (and,
        2.4+, its null cause); 3.7+ (Java) logs the exception itself on the next line."""
        path = self.partition.path(base, ".log")
        if self.rules.java_segment:
            self.lines.append(f"WARN Found invalid messages in log segment {path} at byte offset {position}.")
            self.lines.append(f"org.apache.kafka.common.errors.CorruptRecordException: {message}")
        elif self.rules.cause_in_invalid_messages:
            self.lines.append(
                f"WARN Found invalid messages in log segment {path} at byte offset {position}: {message}. null"
            )
        else:
            self.lines.append(
                f"WARN Found invalid messages in log segment {path} at byte offset {position}: {message}."
            )

    def invalid_offset(self, base: int) -> None:
        if self.style == "0.11":
            self._loader(
                "WARN",
                f"Found invalid offset during recovery for log {self.partition.name}. Deleting the corrupt segment "
                f"and creating an empty one with starting offset {base}",
            )
        else:
            self._loader(
                "WARN",
                "Found invalid offset during recovery. Deleting the corrupt segment and creating an empty one "
                f"with starting offset {base}",
            )

    def corruption(self, base: int, next_offset: int) -> None:
        if self.style == "0.11":
            self._loader(
                "WARN",
                f"Corruption found in segment {base} of log {self.partition.name}, truncating to offset {next_offset}.",
            )
        else:
            self._loader("WARN", f"Corruption found in segment {base}, truncating to offset {next_offset}")

    def deleting(self, segments: Sequence[tuple[int, int]]) -> None:
        if self.style in ("3.3", "3.9") and segments:
            listed = ",".join(f"LogSegment(baseOffset={b}, size={s}, ...)" for b, s in segments)
            self._loader("INFO", f"Deleting segments as part of log recovery: {listed}")

    def log_start_above_end(self, end: int, start: int) -> None:
        self._loader(
            "WARN",
            f"Deleting all segments because logEndOffset ({end}) is smaller than logStartOffset {start}. This "
            "could happen if segment files were deleted from the file system.",
        )

    def fatal(self, exception: str) -> None:
        """The log load threw: ``LogManager.loadLogs`` logs the cause (``e.getCause`` of the
        ExecutionException: the exception's class and message), then ``Kafka.main`` exits."""
        package = (
            "kafka.common" if not self.rules.release.at_least("2.0") else "org.apache.kafka.common.errors"
        )
        self.lines.append(
            f"ERROR There was an error in one of the threads during logs loading: {package}.{exception}"
        )
        if self.style == "0.11":
            self.lines.append("FATAL Exiting Kafka.")
        else:
            self.lines.append("ERROR Exiting Kafka due to fatal exception during startup.")


def predict_start(partition: PartitionOnDisk, rules: StartRules, scenario: Scenario) -> PartitionStart:
    """What a start of ``rules``' release does to ``partition`` after ``scenario``'s shutdown.

    Follows ``LogLoader.load`` at 3.3.1 (``loadSegmentFiles``, then ``recoverLog`` unless the shutdown
    was clean, then ``deleteSegmentsIfLogStartGreaterThanLogEnd``), with the older lines' differences
    named in :class:`StartRules`."""
    segments = partition.segments
    log = _Log(partition, rules)
    fates: dict[int, SegmentStart] = {}
    unknown: list[str] = []
    fatal = fatal_segment = None
    clean = scenario.shutdown is Shutdown.CLEAN
    last_base = segments[-1].base_offset if segments else None
    recovery_point = 0 if clean is False and partition.recovery_point is None else partition.recovery_point

    # 1. loadSegmentFiles: a missing .index (all lines) or a failed sanity check (up to 2.2) rebuilds
    for segment in segments:
        if segment.skipped and segment.index == {}:
            continue  # not read at all: step 2 says so
        trimmed = clean and scenario.from_running and segment.base_offset == last_base
        if segment.index.get("missing"):
            why = "its .index is missing"
            if (
                clean
                or not rules.missing_index_logged_below_recovery_point_only
                or segment.base_offset < (recovery_point or 0)
            ):
                log.missing_index(segment.base_offset)
        else:
            why = _sanity_check_fails(segment, partition, rules, trimmed)
            if why is None:
                continue
            log.corrupt_index(segment.base_offset, why)
            why = f"its indexes fail the startup check: {why}"
        result = _recover(segment, partition, rules)
        if result.kind == "invalid_offset":
            fatal, fatal_segment = result.detail, segment.base_offset
            log.fatal(result.detail)
            fates[segment.base_offset] = SegmentStart(
                segment.base_offset, Fate.FATAL, f"{why}; {result.detail}", at_load=True
            )
            break
        if result.kind == "truncate":
            if result.bytes > 0 and result.message is not None:
                log.invalid_messages(segment.base_offset, int(result.position or 0), result.message)
            fates[segment.base_offset] = SegmentStart(
                segment.base_offset,
                Fate.TRUNCATED if result.bytes > 0 else Fate.REBUILT_AT_LOAD,
                f"{why}; rebuilt at load, {result.detail}",
                position=result.position,
                bytes_lost=result.bytes,
                next_offset=result.next_offset,
                at_load=True,
            )
        elif result.kind == "ok":
            fates[segment.base_offset] = SegmentStart(
                segment.base_offset, Fate.REBUILT_AT_LOAD, why, next_offset=result.next_offset, at_load=True
            )
        else:
            unknown.append(f"segment {segment.base_offset}: {why}, rebuilt at load; {result.detail}")
            fates[segment.base_offset] = SegmentStart(
                segment.base_offset, Fate.UNKNOWN, f"{why}; {result.detail}", at_load=True
            )

    if fatal is not None:
        out = []
        for segment in segments:
            if segment.base_offset in fates:
                out.append(fates[segment.base_offset])
            elif segment.base_offset < (fatal_segment or 0):
                out.append(SegmentStart(segment.base_offset, Fate.KEPT, "loaded before the failing segment"))
            else:
                out.append(SegmentStart(segment.base_offset, Fate.NOT_REACHED))
        return PartitionStart(
            partition,
            scenario,
            rules,
            tuple(out),
            fatal=fatal,
            fatal_segment=fatal_segment,
            log_end_before=_log_end(segments),
            kafka_log=tuple(log.lines),
        )

    # 2. recoverLog, after an unclean shutdown only
    deleted: list[int] = []
    truncated_in_recovery: int | None = None
    if not clean and segments:
        rp = recovery_point or 0
        floors = [s.base_offset for s in segments if s.base_offset <= rp]
        floor = floors[-1] if floors else segments[0].base_offset
        unflushed = [s for s in segments if s.base_offset >= floor]
        for i, segment in enumerate(unflushed):
            log.recovering(segment.base_offset, i, len(unflushed))
            earlier = fates.get(segment.base_offset)
            if earlier is not None and earlier.fate in (Fate.TRUNCATED, Fate.REBUILT_AT_LOAD):
                # already recovered at load: recovering it again truncates nothing
                if earlier.fate is Fate.REBUILT_AT_LOAD:
                    fates[segment.base_offset] = SegmentStart(
                        segment.base_offset,
                        Fate.RECOVERED,
                        earlier.why,
                        next_offset=earlier.next_offset,
                        at_load=True,
                    )
                continue
            if earlier is not None and earlier.fate is Fate.UNKNOWN:
                _unknown_rest(
                    unflushed[i + 1 :], fates, unknown, "after a segment whose recovery is not known"
                )
                break
            result = _recover(segment, partition, rules)
            if result.kind == "ok":
                fates[segment.base_offset] = SegmentStart(
                    segment.base_offset,
                    Fate.RECOVERED,
                    "above the recovery point: recovered, its indexes rebuilt from the log",
                    next_offset=result.next_offset,
                )
                continue
            if result.kind == "invalid_offset":
                log.invalid_offset(segment.base_offset)
                truncated = int(segment.log_bytes or 0)
                fates[segment.base_offset] = SegmentStart(
                    segment.base_offset,
                    Fate.EMPTIED,
                    f"recovery met {result.detail}; the segment is truncated to its base offset",
                    position=0,
                    bytes_lost=truncated,
                    next_offset=segment.base_offset,
                )
                next_offset = segment.base_offset
            elif result.kind == "truncate":
                truncated = result.bytes
                if truncated > 0 and result.message is not None:
                    log.invalid_messages(segment.base_offset, int(result.position or 0), result.message)
                fates[segment.base_offset] = SegmentStart(
                    segment.base_offset,
                    Fate.TRUNCATED if truncated > 0 else Fate.RECOVERED,
                    f"recovery stops: {result.detail}",
                    position=result.position,
                    bytes_lost=truncated,
                    next_offset=result.next_offset,
                )
                next_offset = int(
                    result.next_offset if result.next_offset is not None else segment.base_offset
                )
            else:
                fates[segment.base_offset] = SegmentStart(segment.base_offset, Fate.UNKNOWN, result.detail)
                unknown.append(f"segment {segment.base_offset}: {result.detail}")
                _unknown_rest(
                    unflushed[i + 1 :], fates, unknown, "after a segment whose recovery is not known"
                )
                break
            if truncated > 0:
                log.corruption(segment.base_offset, next_offset)
                later = unflushed[i + 1 :]
                log.deleting([(s.base_offset, int(s.log_bytes or 0)) for s in later])
                for s in later:
                    fates[s.base_offset] = SegmentStart(
                        s.base_offset,
                        Fate.DELETED,
                        f"after the corruption in segment {segment.base_offset}, every later segment is deleted",
                        bytes_lost=int(s.log_bytes or 0),
                    )
                    deleted.append(s.base_offset)
                truncated_in_recovery = segment.base_offset
                break

    # 3. what is left as it was
    out: list[SegmentStart] = []
    for segment in segments:
        fate = fates.get(segment.base_offset)
        if fate is None:
            if segment.skipped:
                unknown.append(f"segment {segment.base_offset}: not read ({segment.skipped})")
                fate = SegmentStart(segment.base_offset, Fate.UNKNOWN, f"not read ({segment.skipped})")
            else:
                trimmed = clean and scenario.from_running and segment.base_offset == last_base
                stays = _index_damaged(segment, trimmed)
                fate = SegmentStart(
                    segment.base_offset,
                    Fate.KEPT,
                    "below the recovery point" if not clean else "recovery skipped after a clean shutdown",
                    next_offset=segment.end_offset,
                    index_damage_stays=stays,
                )
        out.append(fate)

    # 4. offsets and bytes lost
    before = _log_end(segments)
    lost: list[LostRange] = []
    for i, fate in enumerate(out):
        if fate.fate not in (Fate.TRUNCATED, Fate.EMPTIED) or fate.bytes_lost <= 0:
            continue
        first = fate.next_offset if fate.next_offset is not None else fate.base_offset
        if fate.base_offset == truncated_in_recovery:
            gone = tuple(deleted)
            end = before
            size = fate.bytes_lost + sum(f.bytes_lost for f in out if f.fate is Fate.DELETED)
            lost.append(LostRange(first, end, size, fate.base_offset, gone))
        else:  # truncated at load: later segments stay, so the loss is a hole up to the next one
            following = [s.base_offset for s in segments[i + 1 :]]
            end = following[0] if following else before
            lost.append(LostRange(first, end, fate.bytes_lost, fate.base_offset, gap=bool(following)))
    remaining = [f for f in out if f.fate not in (Fate.DELETED,)]
    after = None
    if remaining:
        tail = remaining[-1]
        if tail.fate in (Fate.TRUNCATED, Fate.EMPTIED):
            after = tail.next_offset
        elif tail.base_offset == (segments[-1].base_offset if segments else None):
            after = before
        else:
            after = tail.next_offset
    if (
        after is not None
        and partition.log_start_offset is not None
        and after < partition.log_start_offset
        and not unknown
    ):
        log.log_start_above_end(after, partition.log_start_offset)
        gone = [f.base_offset for f in out if f.fate is not Fate.DELETED]
        lost = [
            LostRange(
                segments[0].base_offset,
                after,
                sum(int(s.log_bytes or 0) for s in segments if s.base_offset in gone),
                segments[0].base_offset,
                tuple(gone),
            )
        ]
        out = [
            SegmentStart(
                f.base_offset,
                Fate.DELETED,
                "log end below the log start offset checkpoint",
                bytes_lost=f.bytes_lost,
            )
            for f in out
        ]
        after = partition.log_start_offset
    return PartitionStart(
        partition,
        scenario,
        rules,
        tuple(out),
        log_end_before=before,
        log_end_after=after,
        lost=tuple(lost),
        kafka_log=tuple(log.lines),
        unknown=tuple(unknown),
    )


def _unknown_rest(
    rest: Sequence[SegmentOnDisk], fates: dict[int, SegmentStart], unknown: list[str], why: str
) -> None:
    for s in rest:
        if s.base_offset not in fates:
            fates[s.base_offset] = SegmentStart(s.base_offset, Fate.UNKNOWN, why)
    if rest:
        unknown.append(f"segments {rest[0].base_offset}..{rest[-1].base_offset}: {why}")


def _log_end(segments: Sequence[SegmentOnDisk]) -> int | None:
    """The log end offset now: the last segment's next offset (``readNextOffset``); None: not read."""
    if not segments:
        return None
    return segments[-1].end_offset
