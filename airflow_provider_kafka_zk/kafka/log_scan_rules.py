"""What a restart would do to a broker, from its log scan: findings with segment, offsets and bytes,
the remedy that loses least, and one verdict per broker.

The scan (:mod:`.log_scan`, run on the broker) reports structure and the recovery walk; the version
rules here decide what that broker's Kafka would do with it (``core/src/main/scala/kafka/log/``
``Log.scala``/``LogLoader.scala`` ``loadSegmentFiles``, ``LogSegment.recover`` and
``OffsetIndex.sanityCheck`` at the tags 0.11.0.2, 2.0.1, 2.3.0 and 3.3.1; the 2.3 change is KAFKA-7283):

* at load, a segment whose ``.index`` is missing -- or, before 2.3, fails ``sanityCheck`` (0.11-1.1:
  strictly, so the zero tail a crash leaves on the active index fails it; 2.0-2.2: size and
  offsets below the base only) -- is rebuilt, and an offset the rebuild refuses stops the broker;
* after an unclean shutdown the segments from the recovery point on are recovered: a refused offset
  truncates the whole segment to its base, a corrupt batch truncates there and deletes every later
  segment;
* from 2.3 offset and time indexes are not checked at startup: a damaged index below the recovery
  point survives restarts and serves wrong positions until someone removes it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .versions import KafkaVersion

SCAN_CHECK = "log-scan"


def index_rule(version: KafkaVersion) -> str:
    """Which offset an index entry holds: the batch's first (0.11-1.1) or last (2.0+) offset."""
    return "last" if version.at_least("2.0") else "first"


class Verdict(enum.IntEnum):
    RESTARTS_CLEAN = 0
    REBUILDS_INDEXES = 1
    LOSES_DATA_IF_UNCLEAN = 2
    FAILS_RECOVERY = 3


@dataclass(frozen=True)
class SegmentRow:
    """One segment of one replica, as the scan rows carry it (Parquet: ``log_scan/<ts>/broker=<id>``)."""

    broker_id: int
    log_dir: str
    topic: str
    partition: int
    base_offset: int
    active: bool
    log_size: int
    index: Mapping[str, Any]
    timeindex: Mapping[str, Any]
    recovered_after_crash: bool
    walk: Mapping[str, Any] | None
    problems: Sequence[Mapping[str, Any]] = ()

    @property
    def directory(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.topic}-{self.partition}"

    def path(self, suffix: str) -> str:
        return f"{self.directory}/{self.base_offset:020d}{suffix}"

    def to_row(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "log_dir": self.log_dir,
            "topic": self.topic,
            "partition": self.partition,
            "base_offset": self.base_offset,
            "active": self.active,
            "log_size": self.log_size,
            "recovered_after_crash": self.recovered_after_crash,
            "index_json": json.dumps(dict(self.index), sort_keys=True),
            "timeindex_json": json.dumps(dict(self.timeindex), sort_keys=True),
            "walk_json": None if self.walk is None else json.dumps(dict(self.walk), sort_keys=True),
            "problems_json": json.dumps(list(self.problems)),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SegmentRow:
        return cls(
            int(row["broker_id"]),
            str(row["log_dir"]),
            str(row["topic"]),
            int(row["partition"]),
            int(row["base_offset"]),
            bool(row["active"]),
            int(row["log_size"]),
            json.loads(row["index_json"]),
            json.loads(row["timeindex_json"]),
            bool(row["recovered_after_crash"]),
            None if row.get("walk_json") in (None, "") else json.loads(row["walk_json"]),
            json.loads(row.get("problems_json") or "[]"),
        )


def segment_rows(
    broker_id: int, log_dir: str, topic: str, partition: int, scan: Mapping[str, Any]
) -> list[SegmentRow]:
    """The rows of one partition directory's scan (``log_scan.scan_partition``'s result)."""
    return [
        SegmentRow(
            broker_id,
            log_dir,
            topic,
            partition,
            int(s["base_offset"]),
            bool(s["active"]),
            int(s.get("log_size", 0)),
            s.get("index") or {},
            s.get("timeindex") or {},
            bool(s.get("recovered_after_crash", False)),
            s.get("walk"),
            s.get("problems") or (),
        )
        for s in scan["segments"]
    ]


@dataclass(frozen=True)
class ScanFinding:
    broker_id: int
    topic: str
    partition: int
    severity: str  # critical | error | warning | info
    kind: str
    summary: str
    remedy: str
    file: str
    offset: int | None = None
    position: int | None = None
    bytes_at_risk: int | None = None
    verdict: Verdict = Verdict.RESTARTS_CLEAN

    def to_row(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "topic": self.topic,
            "partition": self.partition,
            "severity": self.severity,
            "kind": self.kind,
            "summary": self.summary,
            "remedy": self.remedy,
            "file": self.file,
            "offset": self.offset,
            "position": self.position,
            "bytes_at_risk": self.bytes_at_risk,
            "verdict": self.verdict.name,
        }


@dataclass
class BrokerVerdict:
    broker_id: int
    verdict: Verdict = Verdict.RESTARTS_CLEAN
    rebuilt_indexes: int = 0
    failing_segment: str | None = None
    findings: list[ScanFinding] = field(default_factory=list)

    def describe(self) -> str:
        if self.verdict is Verdict.FAILS_RECOVERY:
            return f"broker {self.broker_id} will fail recovery at {self.failing_segment}"
        if self.verdict is Verdict.LOSES_DATA_IF_UNCLEAN:
            return f"broker {self.broker_id}: an unclean restart loses data at {self.failing_segment}"
        if self.verdict is Verdict.REBUILDS_INDEXES:
            return (
                f"broker {self.broker_id} will rebuild {self.rebuilt_indexes} index(es) after an unclean "
                "shutdown (slow start, minutes)"
            )
        serious = sum(1 for f in self.findings if f.severity in ("critical", "error"))
        return f"broker {self.broker_id} restarts clean" + (
            f" ({serious} finding(s) to act on: damage a restart does not repair)" if serious else ""
        )


def _strict_sanity_fails(row: SegmentRow, version: KafkaVersion) -> bool:
    """Would ``loadSegmentFiles`` rebuild this segment's indexes (before 2.3)?"""
    if version.at_least("2.3"):
        return False
    index, time = row.index, row.timeindex
    if index.get("size", 0) % 8 or time.get("size", 0) % 12:
        return True
    if any(
        p["kind"] in ("index_offset_range", "timeindex_offset_range", "timeindex_not_monotonic")
        for p in index.get("problems", []) + time.get("problems", [])
    ):
        return True
    if not version.at_least("2.0"):
        # 0.11-1.1: entries == 0 || lastOffset > baseOffset; Kafka's last entry is the zero tail's, if any
        return bool(index.get("zero_tail")) or (
            index.get("entries", 0) > 0
            and index.get("last_offset") is not None
            and index["last_offset"] <= row.base_offset
        )
    return False


def _remedy(
    row: SegmentRow, stop: Mapping[str, Any], in_sync_elsewhere: Sequence[int], leader: int | None
) -> str:
    position = stop.get("position")
    if in_sync_elsewhere:
        return (
            f"Let an in-sync replica's copy win: stop broker {row.broker_id}, `mv {row.directory} "
            f"{row.directory}.bad` (keep it until the partition is back in sync), start it: it re-fetches "
            f"{row.topic}-{row.partition} from the leader (broker {leader if leader is not None else in_sync_elsewhere[0]}; "
            f"in sync: {list(in_sync_elsewhere)})"
        )
    lost = row.log_size - position if position is not None else row.log_size
    return (
        f"No other in-sync replica ({row.topic}-{row.partition} has RF=1 or an ISR of this broker only): with "
        f"broker {row.broker_id} stopped, `truncate -s {position} {row.path('.log')}` and remove "
        f"{row.path('.index')} and {row.path('.timeindex')} (rebuilt at start), losing {lost} bytes from offset "
        f"{stop.get('offset')} on; or `mv` the segment's three files aside, losing offsets "
        f"{row.base_offset}..{(row.walk or {}).get('last_offset')}"
    )


def judge_broker(
    rows: Iterable[SegmentRow],
    *,
    version: KafkaVersion,
    running: bool,
    isr: Mapping[tuple[str, int], Sequence[int]] | None = None,
    leaders: Mapping[tuple[str, int], int] | None = None,
    broker_id: int | None = None,
) -> BrokerVerdict:
    """The findings and the verdict for one broker's scan rows.

    :param version: the broker's Kafka release (its rules decide what it rebuilds and refuses).
    :param running: the broker is up: its active segments may be being written (a cut-off last batch
        there is a write in flight, not damage).
    :param isr: each partition's in-sync replicas (from ZooKeeper), for the remedy that loses least.
    :param leaders: each partition's leader.
    """
    rows = list(rows)
    verdict = BrokerVerdict(broker_id if broker_id is not None else (rows[0].broker_id if rows else -1))
    isr = isr or {}
    leaders = leaders or {}
    rebuilt = 0
    for row in rows:
        key = (row.topic, row.partition)
        others = [b for b in isr.get(key, ()) if b != row.broker_id]
        index_missing = bool(row.index.get("missing"))
        loaded_rebuild = index_missing or _strict_sanity_fails(row, version)
        if row.active and running and not version.at_least("2.0"):
            loaded_rebuild = True  # a crash leaves the active index's zero tail: the strict check fails
        if (loaded_rebuild or row.recovered_after_crash) and not row.active:
            rebuilt += 1  # an active segment is recovered on every unclean start: small and expected
        walk = row.walk or {}
        stop = walk.get("stop")
        notes = list(walk.get("notes", []))
        first_bad = stop
        if stop and stop["kind"] == "invalid_offset":
            # cut where the offsets first went back, not only where the rebuild noticed
            earlier = [n for n in notes if n.get("position", stop["position"]) < stop["position"]]
            first_bad = min(earlier, key=lambda n: n["position"]) if earlier else stop
            notes = []  # the finding below covers them
        for p in row.problems:
            verdict.findings.append(
                _finding(
                    row,
                    "warning",
                    p["kind"],
                    p["detail"],
                    "Check who made it a symlink; Kafka does not",
                    p["file"],
                )
            )
        if stop and stop["kind"] == "invalid_offset":
            if loaded_rebuild:
                why = (
                    "its .index is missing"
                    if index_missing
                    else "its indexes fail the startup check of this version"
                )
                verdict.findings.append(
                    _finding(
                        row,
                        "critical",
                        "recovery-fails",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: the broker will not start: {why} and "
                        f"stops at {stop['detail']} (InvalidOffsetException, not caught at load)",
                        _remedy(row, first_bad, others, leaders.get(key)),
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                        row.log_size,
                        Verdict.FAILS_RECOVERY,
                    )
                )
            elif row.recovered_after_crash:
                verdict.findings.append(
                    _finding(
                        row,
                        "error",
                        "recovery-truncates-segment",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: after an unclean shutdown recovery stops at "
                        f"{stop['detail']} and truncates the whole segment to offset {row.base_offset} "
                        f"({row.log_size} bytes, offsets {row.base_offset}..{walk.get('last_offset')} lost)",
                        _remedy(row, first_bad, others, leaders.get(key)),
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                        row.log_size,
                        Verdict.LOSES_DATA_IF_UNCLEAN,
                    )
                )
            else:
                verdict.findings.append(
                    _finding(
                        row,
                        "warning",
                        "offsets-out-of-order",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: {stop['detail']}; a rebuild of this "
                        "segment's index (if it goes missing) would stop the broker",
                        "Keep its .index; " + _remedy(row, first_bad, others, leaders.get(key)),
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                        None,
                        Verdict.RESTARTS_CLEAN,
                    )
                )
        elif stop and stop["kind"] in ("corrupt_batch", "torn_tail"):
            in_flight = row.active and running
            if in_flight:
                verdict.findings.append(
                    _finding(
                        row,
                        "info",
                        "active-segment-in-flight",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: the active segment ends in a batch "
                        f"being written ({stop['detail']}); scan again to confirm",
                        "None while the broker runs",
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                    )
                )
            elif row.recovered_after_crash or loaded_rebuild:
                lost = int(stop.get("bytes") or 0)
                later = [r for r in rows if (r.topic, r.partition) == key and r.base_offset > row.base_offset]
                tail = (
                    f" and every later segment ({len(later)}) is deleted"
                    if later and stop["kind"] == "corrupt_batch"
                    else ""
                )
                severity = "warning" if stop["kind"] == "torn_tail" and not later else "error"
                verdict.findings.append(
                    _finding(
                        row,
                        severity,
                        "recovery-truncates",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: {stop['detail']}; recovery truncates "
                        f"{row.path('.log')} at byte {stop.get('position')} ({lost} bytes from offset {stop.get('offset')}){tail}",
                        _remedy(row, stop, others, leaders.get(key)),
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                        lost,
                        Verdict.LOSES_DATA_IF_UNCLEAN if severity == "error" else Verdict.REBUILDS_INDEXES,
                    )
                )
            else:
                verdict.findings.append(
                    _finding(
                        row,
                        "error",
                        "corrupt-batch",
                        f"{row.topic}-{row.partition} on broker {row.broker_id}: {stop['detail']} below the recovery point: "
                        "consumers and followers reading it fail",
                        _remedy(row, stop, others, leaders.get(key)),
                        row.path(".log"),
                        stop.get("offset"),
                        stop.get("position"),
                        row.log_size - int(stop.get("position") or 0),
                    )
                )
        for note in notes:
            verdict.findings.append(
                _finding(
                    row,
                    "warning",
                    "offsets-out-of-order",
                    f"{row.topic}-{row.partition} on broker {row.broker_id}: {note['detail']}",
                    "Consumers may see these offsets twice; " + _remedy(row, note, others, leaders.get(key)),
                    row.path(".log"),
                    note.get("offset"),
                    note.get("position"),
                )
            )
        index_problems = list(row.index.get("problems", [])) + list(row.timeindex.get("problems", []))
        if index_problems:
            walked_clean = bool(walk) and not stop and not walk.get("notes")
            survives = version.at_least("2.3") and not loaded_rebuild
            files = sorted({p["file"] for p in index_problems})
            detail = "; ".join(p["detail"] for p in index_problems[:3])
            if survives:
                remedy = (
                    f"With broker {row.broker_id} stopped, remove {', '.join(f'{row.directory}/{f}' for f in files)}: "
                    "Kafka rebuilds a missing index at start"
                    + (
                        ""
                        if walked_clean
                        else " -- only after the log itself was checked (walk_all), since a rebuild that meets a bad offset stops the broker"
                    )
                )
                severity = (
                    "warning"
                    if all(
                        p["kind"] in ("index_untrimmed", "timeindex_untrimmed", "index_empty")
                        for p in index_problems
                    )
                    else "error"
                )
                summary = f"{row.topic}-{row.partition} on broker {row.broker_id}: {detail}; Kafka {version} does not check this at startup, so it stays"
            else:
                remedy = (
                    "None needed if the log is sound: the next start rebuilds it (slow for large segments)"
                )
                severity = "info"
                summary = f"{row.topic}-{row.partition} on broker {row.broker_id}: {detail}; rebuilt at the next start"
            verdict.findings.append(
                _finding(row, severity, "index-damaged", summary, remedy, f"{row.directory}/{files[0]}")
            )
    verdict.rebuilt_indexes = rebuilt
    worst = max((f.verdict for f in verdict.findings), default=Verdict.RESTARTS_CLEAN)
    if worst < Verdict.REBUILDS_INDEXES and rebuilt:
        worst = Verdict.REBUILDS_INDEXES
    verdict.verdict = worst
    failing = [f for f in verdict.findings if f.verdict == worst and worst >= Verdict.LOSES_DATA_IF_UNCLEAN]
    verdict.failing_segment = failing[0].file if failing else None
    return verdict


def _finding(
    row: SegmentRow,
    severity: str,
    kind: str,
    summary: str,
    remedy: str,
    file: str,
    offset: int | None = None,
    position: int | None = None,
    bytes_at_risk: int | None = None,
    verdict: Verdict = Verdict.RESTARTS_CLEAN,
) -> ScanFinding:
    return ScanFinding(
        row.broker_id,
        row.topic,
        row.partition,
        severity,
        kind,
        summary,
        remedy,
        file,
        offset,
        position,
        bytes_at_risk,
        verdict,
    )
