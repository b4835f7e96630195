"""What a restart would do to a broker, from its log scan: findings with segment, offsets and bytes,
the remedies with the exact offsets and bytes each keeps and drops, and one verdict per broker.

Every prediction comes from one model, :func:`.broker_start.predict_start` (Kafka's
``LogLoader``/``Log`` start per release line, cited there), run for each way the broker can go down
before the start: a running broker has two futures (a clean restart: recovery skipped; an unclean
one: kill -9 or a crash, recovery from the recovery point); a stopped broker has the one its log
dirs' ``.kafka_cleanshutdown`` markers say (both when the inventory could not tell).

A loss is judged against the other replicas: ISR and leader from the snapshot, high watermarks
from the ``replication-offset-checkpoint`` files the inventory read (this broker's always; the
others' where their inventory is in the run). A loss every other in-sync replica holds is local
(the broker re-fetches it); one above the high watermark or without another in-sync replica is a
loss on the cluster.
"""

from __future__ import annotations

import enum
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .broker_start import (
    Fate,
    LostRange,
    PartitionOnDisk,
    PartitionStart,
    Scenario,
    Shutdown,
    StartRules,
    predict_start,
    start_rules,
)
from .versions import KafkaVersion

SCAN_CHECK = "log-scan"


def index_rule(version: KafkaVersion) -> str:
    """Which offset an index entry holds: the batch's first (0.11-1.1) or last (2.0+) offset."""
    return start_rules(version).index_entry


class Verdict(enum.IntEnum):
    RESTARTS_CLEAN = 0
    REBUILDS_INDEXES = 1
    LOSES_DATA_IF_UNCLEAN = 2
    FAILS_RECOVERY = 3


@dataclass(frozen=True)
class SegmentRow:
    """One segment of one replica, as the scan rows carry it (Parquet: ``log_scan/<ts>/broker=<id>``),
    with its partition's checkpointed offsets and its log dir's clean-shutdown marker."""

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
    recovery_point: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    clean_shutdown: bool | None = None
    skipped: str | None = None
    read: Mapping[str, Any] = field(default_factory=dict)  # how the scan read it, and why

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
            "recovery_point": self.recovery_point,
            "log_start_offset": self.log_start_offset,
            "high_watermark": self.high_watermark,
            "clean_shutdown": self.clean_shutdown,
            "skipped": self.skipped,
            "read_json": json.dumps(dict(self.read), sort_keys=True),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SegmentRow:
        def opt_int(key: str) -> int | None:
            value = row.get(key)
            return None if value is None else int(value)

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
            opt_int("recovery_point"),
            opt_int("log_start_offset"),
            opt_int("high_watermark"),
            None if row.get("clean_shutdown") is None else bool(row["clean_shutdown"]),
            row.get("skipped") or None,
            json.loads(row.get("read_json") or "{}"),
        )


def segment_rows(
    broker_id: int,
    log_dir: str,
    topic: str,
    partition: int,
    scan: Mapping[str, Any],
    *,
    recovery_point: int | None = None,
    log_start_offset: int | None = None,
    high_watermark: int | None = None,
    clean_shutdown: bool | None = None,
) -> list[SegmentRow]:
    """The rows of one partition directory's scan (``log_scan.scan_partition``'s result).

    :param recovery_point: the partition's ``recovery-point-offset-checkpoint`` line (None: none).
    :param log_start_offset: its ``log-start-offset-checkpoint`` line.
    :param high_watermark: its ``replication-offset-checkpoint`` line on this broker.
    :param clean_shutdown: its log dir holds ``.kafka_cleanshutdown`` (None: unknown).
    """
    return [
        SegmentRow(
            broker_id,
            log_dir,
            topic,
            partition,
            int(s["base_offset"]),
            bool(s["active"]),
            int(s.get("log_size") or 0),
            s.get("index") or {},
            s.get("timeindex") or {},
            bool(s.get("recovered_after_crash", False)),
            s.get("walk"),
            s.get("problems") or (),
            recovery_point,
            log_start_offset,
            high_watermark,
            clean_shutdown,
            s.get("skipped"),
            s.get("read") or {},
        )
        for s in scan["segments"]
    ]


# ---------------------------------------------------------------------------------------------
# Remedies: what each keeps and drops, exactly
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpan:
    """Bytes ``first_byte .. end_byte-1`` of ``file`` and the whole batches in them: ``batches``
    (None: not whole batches -- a corrupt or cut-off tail), ``records`` in them (None: not known),
    lowest base offset ``first_offset``, highest last offset ``last_offset``; ``unparsed_bytes`` at
    the end that are no whole batch."""

    file: str
    first_byte: int
    end_byte: int
    batches: int | None
    first_offset: int | None
    last_offset: int | None
    records: int | None = None
    unparsed_bytes: int = 0

    def describe(self) -> str:
        size = self.end_byte - self.first_byte
        where = f"bytes {self.first_byte}..{self.end_byte - 1} ({size:,} bytes)" if size > 0 else "no bytes"
        tail = f" and {self.unparsed_bytes:,} bytes that are no whole batch" if self.unparsed_bytes else ""
        if self.first_offset is not None:
            last = "?" if self.last_offset is None else self.last_offset
            count = f", {self.batches} batch{'es' if self.batches != 1 else ''}" if self.batches else ""
            if self.batches and self.records is not None:
                count += f" ({self.records:,} records)"
            return f"{where} of {self.file}: offsets {self.first_offset}..{last}{count}{tail}"
        return f"{where} of {self.file} ({'no whole batch' if self.batches == 0 else 'no readable batch'})"


@dataclass(frozen=True)
class Remedy:
    """One way out, with what it keeps and drops on this replica.

    :param action: ``truncate`` (cut a ``.log`` and remove its indexes, broker stopped), ``refetch``
        (move the partition directory aside: the broker copies it from the leader),
        ``remove_indexes`` (Kafka rebuilds a missing index at load), ``let_kafka_recover`` (no
        action: the start truncates and the broker re-fetches from the leader).
    :param log_end_after: this replica's log end after the remedy and a start.
    """

    action: str
    summary: str
    commands: tuple[str, ...] = ()
    keeps: tuple[OffsetSpan, ...] = ()
    drops: tuple[OffsetSpan, ...] = ()
    log_end_after: int | None = None

    def describe(self) -> str:
        text = self.summary
        if self.commands:
            text += " -- " + "; ".join(f"`{c}`" for c in self.commands)
        if self.keeps:
            text += ". Keeps " + "; ".join(s.describe() for s in self.keeps)
        if self.drops:
            text += ". Drops " + "; ".join(s.describe() for s in self.drops)
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Remedy:
        return cls(
            data["action"],
            data["summary"],
            tuple(data.get("commands") or ()),
            tuple(OffsetSpan(**s) for s in data.get("keeps") or ()),
            tuple(OffsetSpan(**s) for s in data.get("drops") or ()),
            data.get("log_end_after"),
        )


# ---------------------------------------------------------------------------------------------
# Findings and verdicts
# ---------------------------------------------------------------------------------------------


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
    remedies: tuple[Remedy, ...] = ()
    scenario: str = ""
    kafka_log: tuple[str, ...] = ()
    lost_first: int | None = None
    lost_end: int | None = None
    held_elsewhere: str | None = None  # held | partly | not_held | unknown (for losses)

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
            "scenario": self.scenario,
            "lost_first": self.lost_first,
            "lost_end": self.lost_end,
            "held_elsewhere": self.held_elsewhere,
            "remedies_json": json.dumps([r.to_dict() for r in self.remedies]),
            "kafka_log_json": json.dumps(list(self.kafka_log)),
        }


@dataclass
class BrokerVerdict:
    broker_id: int
    verdict: Verdict = Verdict.RESTARTS_CLEAN
    rebuilt_indexes: int = 0
    failing_segment: str | None = None
    findings: list[ScanFinding] = field(default_factory=list)
    scenarios: tuple[str, ...] = ()
    worst_summary: str | None = None
    partial: bool = False
    rebuild_scenarios: tuple[str, ...] = ()  # the starts that rebuild ``rebuilt_indexes`` indexes

    def describe(self) -> str:
        if self.verdict is Verdict.FAILS_RECOVERY:
            return f"broker {self.broker_id} will fail recovery at {self.failing_segment}" + (
                f" ({self.worst_summary})" if self.worst_summary else ""
            )
        if self.verdict is Verdict.LOSES_DATA_IF_UNCLEAN:
            return f"broker {self.broker_id}: {self.worst_summary or 'an unclean restart loses data'}"
        if self.verdict is Verdict.REBUILDS_INDEXES:
            when = " or ".join(self.rebuild_scenarios) or "its start"
            return (
                f"broker {self.broker_id} will rebuild {self.rebuilt_indexes} index(es) in {when} "
                "(slow start, minutes)"
            )
        serious = sum(1 for f in self.findings if f.severity in ("critical", "error"))
        return f"broker {self.broker_id} restarts clean" + (
            f" ({serious} finding(s) to act on: damage a restart does not repair)" if serious else ""
        )


@dataclass(frozen=True)
class ReplicaFacts:
    """What the cluster knows of a partition's other replicas (for "is the loss only local?").

    :param high_watermarks: broker id -> the partition's line in that broker's
        ``replication-offset-checkpoint`` (this broker's and, where inventoried, the others').
    """

    isr: tuple[int, ...] = ()
    leader: int | None = None
    high_watermarks: Mapping[int, int] = field(default_factory=dict)


def scenarios_for(running: bool, clean_shutdown: bool | None) -> tuple[Scenario, ...]:
    """The starts to predict: a running broker can go down either way; a stopped one went down the way
    its marker says (both when unknown)."""
    if running:
        return (Scenario(Shutdown.CLEAN, from_running=True), Scenario(Shutdown.UNCLEAN, from_running=True))
    if clean_shutdown is True:
        return (Scenario(Shutdown.CLEAN),)
    if clean_shutdown is False:
        return (Scenario(Shutdown.UNCLEAN),)
    return (Scenario(Shutdown.CLEAN), Scenario(Shutdown.UNCLEAN))


def judge_broker(
    rows: Iterable[SegmentRow],
    *,
    version: KafkaVersion,
    running: bool,
    isr: Mapping[tuple[str, int], Sequence[int]] | None = None,
    leaders: Mapping[tuple[str, int], int] | None = None,
    broker_id: int | None = None,
    high_watermarks: Mapping[tuple[str, int], Mapping[int, int]] | None = None,
) -> BrokerVerdict:
    """The findings and the verdict for one broker's scan rows.

    :param version: the broker's Kafka release (its line's start rules apply).
    :param running: the broker is up (two futures: a clean or an unclean restart; its active
        segments may be being written, so a cut-off last batch there is a write in flight).
    :param isr: each partition's in-sync replicas (from ZooKeeper).
    :param leaders: each partition's leader.
    :param high_watermarks: each partition's checkpointed high watermark per broker, from the other
        brokers' inventories (this broker's comes with its rows).
    """
    rows = list(rows)
    verdict = BrokerVerdict(broker_id if broker_id is not None else (rows[0].broker_id if rows else -1))
    rules = start_rules(version)
    partitions: dict[tuple[str, str, int], list[SegmentRow]] = {}
    for row in rows:
        partitions.setdefault((row.log_dir, row.topic, row.partition), []).append(row)
    rebuilt: dict[str, int] = {}  # scenario -> indexes its start rebuilds
    used: set[str] = set()
    unflushed = _unflushed_by_log_dir(partitions)
    for (_, topic, number), part_rows in sorted(partitions.items()):
        part_rows.sort(key=lambda r: r.base_offset)
        first = part_rows[0]
        partition = PartitionOnDisk.from_scan(
            topic,
            number,
            first.directory,
            [
                {
                    "base_offset": r.base_offset,
                    "log_size": None if r.skipped and not r.log_size else r.log_size,
                    "active": r.active,
                    "index": r.index,
                    "timeindex": r.timeindex,
                    "walk": r.walk,
                    "skipped": r.skipped,
                }
                for r in part_rows
            ],
            recovery_point=first.recovery_point,
            log_start_offset=first.log_start_offset,
        )
        key = (topic, number)
        hws = dict((high_watermarks or {}).get(key, {}))
        if first.high_watermark is not None:
            hws[verdict.broker_id] = first.high_watermark
        facts = ReplicaFacts(tuple((isr or {}).get(key, ())), (leaders or {}).get(key), hws)
        starts = [predict_start(partition, rules, s) for s in scenarios_for(running, first.clean_shutdown)]
        used.update(s.scenario.describe() for s in starts)
        for start in starts:
            described = start.scenario.describe()
            rebuilt[described] = rebuilt.get(described, 0) + start.rebuilt_indexes
        verdict.findings += _partition_findings(
            verdict.broker_id, partition, part_rows, starts, facts, running, rules, unflushed
        )
    verdict.findings += _marked_clean_by_a_failed_start(verdict.broker_id, partitions, rules)
    # the start that rebuilds most, named: the verdict's header says which start it is
    verdict.rebuilt_indexes = max(rebuilt.values(), default=0)
    if verdict.rebuilt_indexes:
        verdict.rebuild_scenarios = tuple(
            sorted(s for s, n in rebuilt.items() if n == verdict.rebuilt_indexes)
        )
    verdict.scenarios = tuple(sorted(used))
    verdict.partial = any(f.kind == "not-read" for f in verdict.findings)
    worst = max((f.verdict for f in verdict.findings), default=Verdict.RESTARTS_CLEAN)
    if worst < Verdict.REBUILDS_INDEXES and verdict.rebuilt_indexes:
        worst = Verdict.REBUILDS_INDEXES
    verdict.verdict = worst
    failing = [f for f in verdict.findings if f.verdict == worst and worst >= Verdict.LOSES_DATA_IF_UNCLEAN]
    failing.sort(key=lambda f: -(f.bytes_at_risk or 0))
    if failing:
        verdict.failing_segment = failing[0].file
        verdict.worst_summary = _worst_summary(failing, worst)
    return verdict


def _worst_summary(failing: Sequence[ScanFinding], worst: Verdict) -> str:
    top = failing[0]
    more = len({(f.topic, f.partition) for f in failing}) - 1
    tail = f"; and {more} more partition(s)" if more > 0 else ""
    if worst is Verdict.FAILS_RECOVERY:
        return f"{top.scenario}; {top.topic}-{top.partition}{tail}"
    lost = (
        f"offsets {top.lost_first}..{'the log end' if top.lost_end is None else top.lost_end - 1}"
        if top.lost_first is not None
        else "data"
    )
    return (
        f"{top.scenario} loses data at {top.file}: {top.topic}-{top.partition} {lost} "
        f"({top.bytes_at_risk or 0:,} bytes){tail}"
    )


# ---------------------------------------------------------------------------------------------
# One partition's findings
# ---------------------------------------------------------------------------------------------


def _unflushed_by_log_dir(
    partitions: Mapping[tuple[str, str, int], Sequence[SegmentRow]],
) -> dict[str, list[tuple[str, int, int]]]:
    """Per log dir, the partitions an unclean start recovers something of: (name, segments, bytes)."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for (log_dir, topic, number), rows in sorted(partitions.items()):
        recovered = [r for r in rows if r.recovered_after_crash]
        if recovered:
            out.setdefault(log_dir, []).append(
                (f"{topic}-{number}", len(recovered), sum(r.log_size for r in recovered))
            )
    return out


def _missing_from_checkpoint_command(log_dir: str) -> str:
    """Lists the partition directories of ``log_dir`` that ``recovery-point-offset-checkpoint`` lacks."""
    return (
        f"cd {_q(log_dir)} && for d in */; do d=${{d%/}}; case $d in *-delete|*-future|*-stray) continue;; esac; "
        'awk -v t="${d%-*}" -v p="${d##*-}" \'$1==t && $2==p {f=1} END {exit !f}\' '
        'recovery-point-offset-checkpoint || echo "$d"; done'
    )


def _after_failed_start(
    partition: PartitionOnDisk,
    row: SegmentRow,
    fatal: Sequence[PartitionStart],
    rules: StartRules,
    unflushed: Mapping[str, Sequence[tuple[str, int, int]]],
) -> str:
    """What the failed start leaves for the start after it (``KafkaServer.startup``'s catch calls
    ``shutdown()``; ``LogManager.shutdown`` at 3.3.1 flushes and closes the logs it loaded, rewrites
    every log dir's ``recovery-point-offset-checkpoint`` with those logs only and creates
    ``.kafka_cleanshutdown`` in every log dir -- from 3.5.2, KAFKA-15375, only where the dir had one
    or all its logs loaded; ``LogSegment.recover`` had reset and partly refilled the segment's
    indexes: ``OffsetIndex.reset`` creates a missing ``.index``), and what to do about it."""
    log_dir = row.log_dir.rstrip("/")
    marker = f"{log_dir}/.kafka_cleanshutdown"
    index = f"{row.path('.index')} (and .timeindex)"
    unclean = any(s.scenario.shutdown is Shutdown.UNCLEAN for s in fatal)
    clean = any(s.scenario.shutdown is Shutdown.CLEAN for s in fatal)
    if rules.marker_needs_loaded_logs:
        text = (
            f" Kafka {rules.release} then exits without marking {log_dir} clean (KAFKA-15375) unless it was: it "
            f"rewrites its recovery-point-offset-checkpoint with only the logs it had loaded, so the next start "
            "recovers the others from offset 0"
        )
        if clean:
            text += (
                f"; after a clean shutdown the marker is written again and the next start loads this segment with "
                f"the {index} the failed rebuild left (filled up to the bad batch): apply a remedy below first"
            )
        return text + "."
    text = (
        f" On its way out Kafka {rules.release} writes .kafka_cleanshutdown in every log dir and rewrites "
        f"{log_dir}/recovery-point-offset-checkpoint with only the logs it had loaded (LogManager.shutdown), and "
        f"the failed rebuild leaves {index}, filled up to the bad batch: the next start skips recovery and loads "
        "this segment as it is, bad batches and partial index included"
    )
    if unclean:
        others = [p for p in unflushed.get(row.log_dir, ()) if p[0] != partition.name]
        listed = ", ".join(f"{n} ({c} segment(s), {b:,} bytes)" for n, c, b in others[:10])
        more = f" and {len(others) - 10} more" if len(others) > 10 else ""
        text += (
            "; and as this follows an unclean shutdown, the partitions it had not loaded (it loads them one at a "
            "time, in directory-listing order: afterwards they are the ones missing from the checkpoint) lose their "
            "recovery: their unflushed segments' CRCs and indexes are never checked"
            + (f" -- in {log_dir}: {listed}{more}" if others else "")
            + f". Before the next start: apply a remedy below, then `rm -f {_q(marker)}` so that start recovers "
            "them (those missing from the checkpoint from offset 0: the whole log; list them with "
            f"`{_missing_from_checkpoint_command(log_dir)}`)"
        )
    else:
        text += ": apply a remedy below before the next start"
    return text + "."


def _marked_clean_by_a_failed_start(
    broker_id: int, partitions: Mapping[tuple[str, str, int], Sequence[SegmentRow]], rules: StartRules
) -> list[ScanFinding]:
    """A log dir holding ``.kafka_cleanshutdown`` while partitions of it are missing from its
    ``recovery-point-offset-checkpoint``: a clean shutdown checkpoints every log, so this is what a start
    that threw while loading logs leaves (up to 3.5.1, :func:`_after_failed_start`): the next start
    skips the recovery those partitions may still need."""
    if rules.marker_needs_loaded_logs:
        return []
    missing: dict[str, list[tuple[str, int, SegmentRow]]] = {}
    for (log_dir, topic, number), rows in sorted(partitions.items()):
        first = rows[0]
        if first.clean_shutdown is True and first.recovery_point is None:
            missing.setdefault(log_dir, []).append((f"{topic}-{number}", len(rows), first))
    out = []
    for log_dir, parts in sorted(missing.items()):
        _, _, row = parts[0]
        listed = ", ".join(p[0] for p in parts[:10]) + (
            f" and {len(parts) - 10} more" if len(parts) > 10 else ""
        )
        marker = f"{log_dir.rstrip('/')}/.kafka_cleanshutdown"
        out.append(
            ScanFinding(
                broker_id,
                row.topic,
                row.partition,
                "error",
                "marked-clean-after-failed-start",
                f"{log_dir} on broker {broker_id} holds .kafka_cleanshutdown, but {len(parts)} partition(s) are missing "
                f"from its recovery-point-offset-checkpoint ({listed}): a clean shutdown checkpoints every log, so "
                f"this is what a start that failed while loading logs leaves (Kafka {rules.release}: LogManager.shutdown "
                "on the way out checkpoints only the logs it loaded and writes the marker). The next start skips "
                "recovery: whatever those partitions had not flushed before the shutdown that preceded the failed "
                "start is never checked (CRCs, indexes)",
                f"Unless the broker was stopped cleanly before the failed start, `rm -f {_q(marker)}` before starting "
                "it: the start then recovers every log of the dir from its recovery point (the missing ones from "
                "offset 0), reading them whole; scan again after removing it to see what that start does",
                marker,
            )
        )
    return out


def _partition_findings(
    broker_id: int,
    partition: PartitionOnDisk,
    rows: Sequence[SegmentRow],
    starts: Sequence[PartitionStart],
    facts: ReplicaFacts,
    running: bool,
    rules: StartRules,
    unflushed: Mapping[str, Sequence[tuple[str, int, int]]] | None = None,
) -> list[ScanFinding]:
    out: list[ScanFinding] = []
    by_base = {r.base_offset: r for r in rows}
    name = partition.name
    where = f"{name} on broker {broker_id}"
    others = [b for b in facts.isr if b != broker_id]

    def finding(
        row: SegmentRow, severity: str, kind: str, summary: str, remedies: Sequence[Remedy], **extra: Any
    ):
        remedy_text = (
            " OR ".join(r.describe() for r in remedies) if remedies else extra.pop("remedy_text", "None")
        )
        return ScanFinding(
            broker_id,
            partition.topic,
            partition.partition,
            severity,
            kind,
            summary,
            remedy_text,
            extra.pop("file", row.path(".log")),
            remedies=tuple(remedies),
            **extra,
        )

    # files the scan did not read
    for row in rows:
        for p in row.problems:
            out.append(
                finding(
                    row,
                    "warning",
                    "symlink",
                    f"{where}: {p['detail']}",
                    (),
                    remedy_text="Check who made it a symlink; Kafka does not",
                    file=f"{row.directory}/{p['file']}",
                )
            )
        skipped = [row.skipped] if row.skipped else []
        skipped += [
            f"{p['file']}: {p['detail']}"
            for idx in (row.index, row.timeindex)
            for p in idx.get("problems") or ()
            if p.get("kind") == "skipped"
        ]
        for reason in skipped:
            out.append(
                finding(
                    row,
                    "warning",
                    "not-read",
                    f"{where}: segment {row.base_offset} not fully read ({reason}): its prediction is partial",
                    (),
                    remedy_text="Look at the file by hand; scan again with a larger budget or time limit",
                )
            )

    # a start that stops the broker
    fatal = [s for s in starts if s.fatal]
    if fatal:
        start = fatal[0]
        row = by_base[start.fatal_segment]
        walk = row.walk or {}
        scen = " and ".join(s.scenario.describe() for s in fatal)
        why = start.fate_of(start.fatal_segment).why
        out.append(
            finding(
                row,
                "critical",
                "recovery-fails",
                f"{where}: the broker will not start ({scen}): segment {row.base_offset} is rebuilt at load ({why}); "
                "the exception is not caught there: the log fails to load and the broker exits."
                + _after_failed_start(partition, row, fatal, rules, unflushed or {}),
                _repair_remedies(partition, row, walk, facts, broker_id, others),
                offset=(walk.get("first_bad") or walk.get("stop") or {}).get("offset"),
                position=(walk.get("first_bad") or walk.get("stop") or {}).get("position"),
                bytes_at_risk=row.log_size,
                verdict=Verdict.FAILS_RECOVERY,
                scenario=scen,
                kafka_log=start.kafka_log,
            )
        )

    # a start that loses whole batches
    for start in starts:
        if start.fatal or not start.lost:
            continue
        for lost in start.lost:
            row = by_base[lost.segment]
            fate = start.fate_of(lost.segment)
            walk = row.walk or {}
            if not start.loses_data:
                if running and row.active and start.scenario.shutdown is Shutdown.UNCLEAN:
                    out.append(
                        finding(
                            row,
                            "info",
                            "active-segment-in-flight",
                            f"{where}: the active segment ends in a batch being written ({fate.why}); scan again to confirm",
                            (),
                            remedy_text="None while the broker runs",
                            offset=(walk.get("stop") or {}).get("offset"),
                            position=fate.position,
                            scenario=start.scenario.describe(),
                        )
                    )
                    continue
                out.append(
                    finding(
                        row,
                        "warning",
                        "recovery-truncates-tail",
                        f"{where}: {start.scenario.describe()} cuts {row.path('.log')} at byte {fate.position}: "
                        f"{lost.bytes:,} bytes that are no whole batch ({fate.why}); no offset is lost",
                        (),
                        remedy_text="None needed: Kafka drops the partial batch at start",
                        position=fate.position,
                        bytes_at_risk=lost.bytes,
                        verdict=Verdict.REBUILDS_INDEXES,
                        scenario=start.scenario.describe(),
                        kafka_log=start.kafka_log,
                    )
                )
                continue
            held, held_text = _held_elsewhere(lost, facts, broker_id, others)
            how = (
                f"truncates segment {lost.segment} to its base offset"
                if fate.fate is Fate.EMPTIED
                else f"cuts {row.path('.log')} at byte {fate.position}"
            )
            if lost.deleted_segments:
                how += f" and deletes every later segment ({', '.join(map(str, lost.deleted_segments))})"
            elif lost.gap:
                how += " at load; later segments stay, so the log has a hole"
            log_end = (
                f"the log end falls from {start.log_end_before} to {start.log_end_after}"
                if start.log_end_before is not None
                else f"the log end falls to {start.log_end_after}"
            )
            summary = (
                f"{where}: {start.scenario.describe()} {how} ({fate.why}): {log_end}; {lost.describe()} lost on this "
                f"replica. {held_text}"
            )
            severity = "warning" if held == "held" else "error"
            out.append(
                finding(
                    row,
                    severity,
                    "recovery-loses-data",
                    summary,
                    _loss_remedies(partition, row, walk, start, lost, facts, held, broker_id, others),
                    offset=lost.first,
                    position=fate.position,
                    bytes_at_risk=lost.bytes,
                    verdict=Verdict.LOSES_DATA_IF_UNCLEAN,
                    scenario=start.scenario.describe(),
                    kafka_log=start.kafka_log,
                    lost_first=lost.first,
                    lost_end=lost.end,
                    held_elsewhere=held,
                )
            )

    # what could not be predicted
    for start in starts:
        for text in start.unknown:
            if "not read" in text:
                continue  # said above
            out.append(
                finding(
                    rows[0],
                    "warning",
                    "prediction-unknown",
                    f"{where}: {start.scenario.describe()}: {text}",
                    (),
                    remedy_text="Read the segment by hand (kafka-dump-log --deep-iteration) before restarting",
                    file=partition.directory,
                    scenario=start.scenario.describe(),
                )
            )

    # offsets that go back where no start notices
    for row in rows:
        walk = row.walk or {}
        bad = walk.get("first_bad")
        if not bad or bad.get("kind") != "offsets_backwards":
            continue
        noticed = any(
            s.fatal_segment == row.base_offset
            or s.fate_of(row.base_offset).fate in (Fate.EMPTIED, Fate.TRUNCATED, Fate.DELETED)
            for s in starts
        )
        if noticed:
            continue
        dropped = walk.get("dropped") or {}
        out.append(
            finding(
                row,
                "warning",
                "offsets-out-of-order",
                f"{where}: batch at byte {bad['position']} of {row.path('.log')} starts at offset {bad['offset']}, not "
                f"after {bad.get('previous_max')}: {dropped.get('batches')} batch(es) from there hold offsets "
                f"{dropped.get('min_offset')}..{dropped.get('max_offset')}, some again; no start notices it (no rebuilt "
                "index entry lands on them) -- consumers read those offsets twice, and a rebuild of this segment's "
                "index (if it goes missing) may stop the broker",
                _repair_remedies(partition, row, walk, facts, broker_id, others),
                offset=bad["offset"],
                position=bad["position"],
            )
        )

    # a batch whose CRC fails in a segment no start recovers (read with verify_crc): it stays
    for row in rows:
        walk = row.walk or {}
        stop = walk.get("stop") or {}
        if stop.get("kind") != "corrupt_batch" or walk.get("crc") != "all" or stop.get("position") is None:
            continue
        if any(
            s.fatal_segment == row.base_offset
            or s.fate_of(row.base_offset).fate in (Fate.EMPTIED, Fate.TRUNCATED, Fate.DELETED, Fate.FATAL)
            for s in starts
        ):
            continue  # a start reads it: the loss findings above cover it
        scen = " and ".join(s.scenario.describe() for s in starts)
        dropped = walk.get("dropped") or {}
        offsets = (
            f" (offsets {dropped.get('min_offset')}..{dropped.get('max_offset')} from there)"
            if dropped.get("batches")
            else ""
        )
        out.append(
            finding(
                row,
                "error",
                "corrupt-batch-kept",
                f"{where}: the batch at byte {stop['position']} of {row.path('.log')}{offsets} fails its CRC "
                f"({stop.get('kafka_message') or stop.get('detail')}); {scen} does not read this segment "
                f"({_why_no_start_reads(row, starts)}), so it stays: a consumer fetching it gets a CorruptRecordException "
                "(check.crcs, on by default) and a follower copying it from this broker rejects it "
                '(UnifiedLog.analyzeAndValidateRecords: "Record is corrupt (stored crc = ...)")',
                _repair_remedies(partition, row, walk, facts, broker_id, others),
                offset=stop.get("offset"),
                position=stop.get("position"),
                bytes_at_risk=row.log_size - int(stop["position"]),
                scenario=scen,
            )
        )

    # index damage: kept or rebuilt, per start
    for row in rows:
        problems = [
            p
            for p in list(row.index.get("problems") or []) + list(row.timeindex.get("problems") or [])
            if p.get("kind") != "skipped"
        ]
        if not problems:
            continue
        stays = [s for s in starts if _damage_stays(s, row.base_offset)]
        repaired = [s for s in starts if not _damage_stays(s, row.base_offset)]
        files = sorted({p["file"] for p in problems})
        detail = "; ".join(p["detail"] for p in problems[:3])
        minor = all(p["kind"] in ("index_untrimmed", "timeindex_untrimmed", "index_empty") for p in problems)
        walked_clean = (
            bool(row.walk) and not (row.walk or {}).get("stop") and not (row.walk or {}).get("first_bad")
        )
        if not stays:
            scen = " and ".join(s.scenario.describe() for s in repaired)
            why = repaired[0].fate_of(row.base_offset).why
            out.append(
                finding(
                    row,
                    "info",
                    "index-damaged",
                    f"{where}: {detail}; rebuilt at start ({scen}: {why})",
                    (),
                    remedy_text="None needed: the start rebuilds it from the log",
                    file=f"{row.directory}/{files[0]}",
                    scenario=scen,
                )
            )
            continue
        if rules.load_sanity_check == "none":
            kept = (
                f"Kafka {rules.release} does not check offset or time indexes at startup (LogSegment.sanityCheck, "
                "2.3+: only that the .index exists)"
            )
        else:
            kept = f"Kafka {rules.release}'s startup check (sanityCheck: size and last entry only) does not catch it"
        if repaired:
            kept = (
                f"{' and '.join(s.scenario.describe() for s in repaired)} rebuilds it (above the recovery point "
                f"{row.recovery_point or 0}), but {' and '.join(s.scenario.describe() for s in stays)} keeps it, and "
                f"from then on it stays: {kept}"
            )
        else:
            kept += ", so it stays until the index is removed"
        remedy = _remove_indexes_remedy(partition, row, broker_id, walked_clean)
        severity = "warning" if minor or repaired else "error"
        out.append(
            finding(
                row,
                severity,
                "index-damaged",
                f"{where}: {detail}; {kept}",
                (remedy,),
                file=f"{row.directory}/{files[0]}",
                scenario=" and ".join(s.scenario.describe() for s in stays),
            )
        )
    return out


def _why_no_start_reads(row: SegmentRow, starts: Sequence[PartitionStart]) -> str:
    """Why no start reads a segment: the reason of its fate in the first start."""
    return starts[0].fate_of(row.base_offset).why if starts else "no start predicted"


def _damage_stays(start: PartitionStart, base_offset: int) -> bool:
    fate = start.fate_of(base_offset)
    if start.fatal:
        return False  # the broker does not start: the fatal finding covers it
    return fate.fate in (Fate.KEPT, Fate.UNKNOWN, Fate.NOT_REACHED)


def _held_elsewhere(
    lost: LostRange, facts: ReplicaFacts, broker_id: int, others: Sequence[int]
) -> tuple[str, str]:
    """Do other in-sync replicas hold the offsets this replica loses? (status, sentence)"""
    if not others:
        isr = list(facts.isr) or "unknown"
        return (
            "not_held",
            f"No other in-sync replica (ISR {isr}): these offsets exist nowhere else; the loss is real.",
        )
    hws = {b: h for b, h in facts.high_watermarks.items() if h is not None}
    leader = f"broker {facts.leader}" if facts.leader is not None else "the leader"
    if not hws:
        return (
            "unknown",
            f"In-sync replicas {others} (ZooKeeper) hold them if they were in sync; no high watermark was read, so "
            "whether the loss is only local is unknown.",
        )
    best_broker, hw = max(hws.items(), key=lambda item: item[1])
    source = f"high watermark {hw} in broker {best_broker}'s replication-offset-checkpoint"
    if lost.end is not None and hw >= lost.end:
        return (
            "held",
            f"The in-sync replicas {others} hold them ({source}): the loss is only local; the broker re-fetches "
            f"them from {leader}.",
        )
    if hw > lost.first:
        return (
            "partly",
            f"Offsets {lost.first}..{hw - 1} are committed ({source}) and held by the in-sync replicas {others}; "
            f"offsets {hw}..{'the log end' if lost.end is None else lost.end - 1} are above it: never acknowledged "
            "to an acks=all producer, possibly on no other replica.",
        )
    return (
        "partly",
        f"All of them are at or above the {source}: never acknowledged to an acks=all producer, possibly on no "
        f"other replica (in-sync replicas: {others}).",
    )


def _q(text: str) -> str:
    return shlex.quote(text)


def _truncate_remedy(
    partition: PartitionOnDisk, row: SegmentRow, walk: Mapping[str, Any], broker_id: int
) -> Remedy | None:
    """Cut the segment where its offsets first go back (or its first bad batch) and let Kafka rebuild
    its indexes at load: keeps every sound batch before the cut and every other segment."""
    bad = walk.get("first_bad") or walk.get("stop")
    if not bad or bad.get("position") is None or not walk.get("complete", True):
        return None
    cut = int(bad["position"])
    kept = walk.get("kept") or {}
    dropped = walk.get("dropped") or {}
    # the walk follows the batch lengths past a corrupt batch: the dropped range's whole batches
    whole_dropped = int(dropped.get("batches") or 0)
    keeps = OffsetSpan(
        row.path(".log"),
        0,
        cut,
        int(kept.get("batches") or 0) if cut else 0,
        walk.get("first_offset") if cut else None,
        kept.get("max_offset") if cut else None,
        kept.get("records") if cut else None,
    )
    drops = OffsetSpan(
        row.path(".log"),
        cut,
        row.log_size,
        whole_dropped,
        dropped.get("min_offset") if whole_dropped else None,
        dropped.get("max_offset") if whole_dropped else None,
        dropped.get("records") if whole_dropped else None,
        int(dropped.get("unparsed_bytes") or 0) if whole_dropped else 0,
    )
    last = partition.segments[-1]
    if row.base_offset == last.base_offset:
        log_end = (
            (int(kept["last_offset"]) + 1) if cut and kept.get("last_offset") is not None else row.base_offset
        )
    else:
        log_end = last.end_offset
    duplicates = ""
    if (
        whole_dropped
        and kept.get("max_offset") is not None
        and dropped.get("min_offset") is not None
        and int(dropped["min_offset"]) <= int(kept["max_offset"])
    ):
        duplicates = f"; dropped offsets up to {kept['max_offset']} are copies of kept ones"
    return Remedy(
        "truncate",
        f"With broker {broker_id} stopped, cut segment {row.base_offset} at byte {cut}, where its first bad batch "
        f"starts{duplicates}, and remove its indexes: Kafka rebuilds them at load from the cut log; the other "
        "segments stay as they are",
        (
            f"truncate -s {cut} {_q(row.path('.log'))}",
            f"rm -f {_q(row.path('.index'))} {_q(row.path('.timeindex'))}",
        ),
        (keeps,),
        (drops,),
        log_end,
    )


def _refetch_remedy(
    partition: PartitionOnDisk, facts: ReplicaFacts, broker_id: int, others: Sequence[int]
) -> Remedy:
    leader = facts.leader if facts.leader is not None and facts.leader != broker_id else others[0]
    directory = partition.directory.rstrip("/")
    first = partition.segments[0]
    end = partition.segments[-1].end_offset
    return Remedy(
        "refetch",
        f"Let an in-sync replica's copy win: with broker {broker_id} stopped, move {directory} aside (keep it until "
        f"the partition is back in sync); at start the broker re-fetches {partition.name} from the leader "
        f"(broker {leader}; in sync: {list(others)})",
        (f"mv {_q(directory)} {_q(directory + '.bad')}",),
        (),
        (
            OffsetSpan(
                directory,
                0,
                sum(int(s.log_bytes or 0) for s in partition.segments),
                None,
                first.base_offset,
                None if end is None else end - 1,
            ),
        ),
        None,
    )


def _repair_remedies(
    partition: PartitionOnDisk,
    row: SegmentRow,
    walk: Mapping[str, Any],
    facts: ReplicaFacts,
    broker_id: int,
    others: Sequence[int],
) -> list[Remedy]:
    """The ways out of a bad batch, the one that loses least first."""
    remedies = []
    if others:
        remedies.append(_refetch_remedy(partition, facts, broker_id, others))
    cut = _truncate_remedy(partition, row, walk, broker_id)
    if cut is not None:
        remedies.append(cut)
    return remedies


def _loss_remedies(
    partition: PartitionOnDisk,
    row: SegmentRow,
    walk: Mapping[str, Any],
    start: PartitionStart,
    lost: LostRange,
    facts: ReplicaFacts,
    held: str,
    broker_id: int,
    others: Sequence[int],
) -> list[Remedy]:
    remedies = []
    if held == "held":
        remedies.append(
            Remedy(
                "let_kafka_recover",
                f"No action needed: the start drops {lost.describe()} and the broker re-fetches them from the leader",
                (),
                (),
                (
                    OffsetSpan(
                        row.path(".log"),
                        int(start.fate_of(lost.segment).position or 0),
                        row.log_size,
                        None,
                        lost.first,
                        None if lost.end is None else lost.end - 1,
                    ),
                ),
                start.log_end_after,
            )
        )
    remedies += _repair_remedies(partition, row, walk, facts, broker_id, others)
    return remedies


def _remove_indexes_remedy(
    partition: PartitionOnDisk, row: SegmentRow, broker_id: int, walked_clean: bool
) -> Remedy:
    walk = row.walk or {}
    keeps = (
        (
            OffsetSpan(
                row.path(".log"),
                0,
                row.log_size,
                int(walk.get("batches") or 0),
                walk.get("first_offset"),
                walk.get("max_offset"),
            ),
        )
        if walked_clean
        else ()
    )
    # the .index, always: only a missing .index makes Kafka recover the segment (and rebuild both); a
    # missing .timeindex alone is created empty and stays so (LogLoader.loadSegmentFiles, 3.3.1)
    paths = [row.path(".index"), row.path(".timeindex")]
    caveat = (
        ""
        if walked_clean
        else " -- only after the log itself was checked (walk_all), since a rebuild that meets a bad offset stops the broker"
    )
    return Remedy(
        "remove_indexes",
        f"With broker {broker_id} stopped, remove {', '.join(paths)}: Kafka rebuilds a missing index at load from the "
        f"log, which it keeps whole{caveat}",
        (f"rm -f {' '.join(_q(p) for p in paths)}",),
        keeps,
        (),
        partition.segments[-1].end_offset,
    )
