"""What the pre-restart check reads by default, and the lines it quotes, against Kafka 3.3.1 (issue 32).

The partitions are built the way a 3.3.1 leader writes them (:class:`~airflow_provider_kafka_zk.kafka.
records.LogSegmentWriter`: one ``LogSegment.append`` per produce request, the offset index on the
``index.interval.bytes`` rule, the leader's time index; the active segment's indexes preallocated and
zero-tailed as a ``kill -9`` leaves them), then damaged as the real cluster's disk was, and checked
three ways: the product's default scan and prediction, Kafka's start as the simulator applies it to a
copy of the files (``testing.simulator.log_recovery``, an independent full-record reader), and the
numbers the test computed while building the bytes.

The case of issue 32's first item, measured on a real 3.3.1 broker killed with ``kill -9`` while
producing: a batch in the middle of the active segment has one flipped byte (its length intact, its
CRC-32C wrong). At the next start Kafka logged "Found invalid messages in log segment ... Record is
corrupt", truncated the segment there and lost 384 records (119,034 bytes). The default check said
nothing: it read batch headers only and the last batch's CRC, never the others'.

What Kafka logs, from the source at 3.3.1:

* ``LogSegment.recover`` (``core/src/main/scala/kafka/log/LogSegment.scala``): ``warn("Found invalid
  messages in log segment %s at byte offset %d: %s. %s".format(log.file.getAbsolutePath, validBytes,
  e.getMessage, e.getCause))`` -- no log ident, the cause of a ``CorruptRecordException`` is null;
* ``DefaultRecordBatch.ensureValid`` (``clients/.../record/DefaultRecordBatch.java``): ``"Record is
  corrupt (stored crc = " + checksum() + ", computed crc = " + computeChecksum() + ")"``, both
  unsigned decimals;
* ``LogLoader.recoverLog`` (``core/src/main/scala/kafka/log/LogLoader.scala``), with the loader's
  ``logIdent = s"[LogLoader partition=$topicPartition, dir=${dir.getParent}] "``: "Recovering unflushed
  segment N. i/n recovered for t-p." and "Corruption found in segment N, truncating to offset M".
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import crc32c as crc32c_lib

from airflow_provider_kafka_zk.kafka.broker_start import (
    Fate,
    PartitionOnDisk,
    Scenario,
    Shutdown,
    predict_start,
)
from airflow_provider_kafka_zk.kafka.broker_start import start_rules as rules_of
from airflow_provider_kafka_zk.kafka.log_scan import scan_partition
from airflow_provider_kafka_zk.kafka.log_scan_rules import Verdict, judge_broker, segment_rows
from airflow_provider_kafka_zk.kafka.logdir import OffsetCheckpoint
from airflow_provider_kafka_zk.kafka.records import (
    LogSegmentWriter,
    Record,
    TimeIndexOffsetRule,
    encode_record_batch,
    iter_log_entries,
)
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_log_dirs

V331 = KafkaVersion.parse("3.3.1")
TOPIC = "events"
START_MS = 1_795_322_106_000  # the golden cluster's clock


def _batch(base: int, records: int, size: int, producer_seq: int) -> bytes:
    """A v2 batch as kafka-python 3.0.12 produced on the real cluster (idempotent: producer id 0,
    keys ``k%06d``, ~290-byte values), exactly ``size`` bytes: the last record's value takes up the
    difference (record and value lengths stay 2-byte varints)."""

    def build(last_value: int) -> bytes:
        out = []
        for i in range(records):
            offset = base + i
            value = 290 if i < records - 1 else last_value
            out.append(
                Record(offset, START_MS + offset * 3, b"k%06d" % offset, (b"v%06d-" % offset * 200)[:value])
            )
        return encode_record_batch(
            out, partition_leader_epoch=0, producer_id=0, producer_epoch=0, base_sequence=producer_seq
        )

    first = build(290)
    exact = build(290 + size - len(first))
    assert len(exact) == size, (len(exact), size)
    return exact


@dataclass
class Built:
    """A partition as a 3.3.1 broker left it, with what the test knows about its bytes."""

    directory: Path
    bases: list[int]
    batches: dict[int, list[tuple[int, int, int, int]]] = field(
        default_factory=dict
    )  # pos, size, first, last

    def log(self, base: int) -> Path:
        return self.directory / f"{base:020d}.log"


def build_partition(
    log_dir: Path,
    segments: list[list[tuple[int, int]]],
    *,
    recovery_point: int,
    clean_shutdown: bool = False,
    topic: str = TOPIC,
) -> Built:
    """``<topic>-0`` in ``log_dir``: one segment per item of ``segments``, each a list of (records,
    bytes) batches, one produce request each; every segment but the last rolled (trimmed indexes, the
    closing time-index entry), the last active as a crash leaves it (indexes preallocated to 10 MiB,
    zero tail). ``recovery_point`` goes to ``recovery-point-offset-checkpoint``; ``.kafka_cleanshutdown``
    only with ``clean_shutdown``."""
    directory = log_dir / f"{topic}-0"
    directory.mkdir(parents=True)
    built = Built(directory, [])
    offset = seq = 0
    for number, batches in enumerate(segments):
        writer = LogSegmentWriter(offset, time_index_offsets=TimeIndexOffsetRule.MAX_TIMESTAMP_RECORD)
        built.bases.append(offset)
        rows = built.batches.setdefault(offset, [])
        for records, size in batches:
            data = _batch(offset, records, size, seq)
            rows.append((len(writer.log), size, offset, offset + records - 1))
            writer.append(data)
            offset += records
            seq += records
        active = number == len(segments) - 1
        if not active:
            writer.close()
        for name, data in writer.files(preallocate=active).items():
            (directory / name).write_bytes(data)
    (directory / "partition.metadata").write_bytes(b"version: 0\ntopic_id: ZDYmQnAtSGK0rYmJCDTtfA")
    (directory / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0\n")
    for name, value in (
        ("recovery-point-offset-checkpoint", recovery_point),
        ("replication-offset-checkpoint", offset),
    ):
        checkpoint = log_dir / name
        offsets = OffsetCheckpoint.parse(checkpoint.read_bytes(), name).offsets if checkpoint.exists() else {}
        checkpoint.write_bytes(OffsetCheckpoint.from_offsets({**offsets, (topic, 0): value}).encode())
    (log_dir / "log-start-offset-checkpoint").write_bytes(OffsetCheckpoint.from_offsets({}).encode())
    if clean_shutdown:
        (log_dir / ".kafka_cleanshutdown").write_bytes(b"")
    return built


def flip_record_byte(log: Path, position: int, size: int) -> tuple[int, int]:
    """A bit flip on disk inside the batch at ``position`` (a record byte near its end: the length
    and header stay intact). Returns (stored, computed) CRC-32C as Kafka prints them."""
    data = bytearray(log.read_bytes())
    data[position + size - 40] ^= 0x20
    log.write_bytes(bytes(data))
    (stored,) = struct.unpack_from(">I", data, position + 17)
    computed = crc32c_lib.crc32c(bytes(data[position + 21 : position + size]))
    assert stored != computed
    return stored, computed


# The real cluster's active segment: 6 sound batches (346,362 bytes), then the corrupt one and one
# more: 2 batches of 192 records, 119,034 bytes.
REAL_ACTIVE = [(186, 57_727)] * 6 + [(192, 59_517)] * 2
REAL_ROLLED = [(200, 61_950)] * 15  # a rolled 1 MB-ish segment below the recovery point: offsets 0..2999


def _real_case(tmp_path: Path) -> tuple[Built, int, int]:
    built = build_partition(tmp_path / "kafka-logs-0", [REAL_ROLLED, REAL_ACTIVE], recovery_point=3000)
    active = built.bases[-1]
    position, size, first, last = built.batches[active][6]
    assert (position, first, last) == (346_362, 4116, 4307)
    stored, computed = flip_record_byte(built.log(active), position, size)
    return built, stored, computed


def _default_scan(built: Built, *, clean_shutdown: bool | None = False):
    """The pre-restart check's default on this partition: what the operator asks the host for."""
    log_dir = built.directory.parent
    rp = OffsetCheckpoint.parse(
        (log_dir / "recovery-point-offset-checkpoint").read_bytes(), "rp"
    ).offsets.get((TOPIC, 0))
    scan = scan_partition(str(built.directory), rp, index_rule="last", clean_shutdown=clean_shutdown)
    rows = segment_rows(
        0, str(log_dir), TOPIC, 0, scan, recovery_point=rp, high_watermark=4500, clean_shutdown=clean_shutdown
    )
    return scan, rows


def _kafka_start(built: Built, tmp_path: Path):
    """Kafka 3.3.1's start applied to a copy (the simulator's LogLoader, full record reader)."""
    copy = tmp_path / "started" / built.directory.parent.name
    shutil.copytree(built.directory.parent, copy)
    [started] = start_log_dirs([copy], V331)
    return started.partitions[f"{TOPIC}-0"], copy / built.directory.name


def _as_original(lines, built: Built, copy: Path) -> tuple[str, ...]:
    """The simulated start's lines with the copy's log dir named as the original's."""
    return tuple(line.replace(str(copy.parent), str(built.directory.parent)) for line in lines)


def test_a_corrupt_batch_that_is_not_the_last_of_the_active_segment_is_found_by_the_default_check(tmp_path):
    """Issue 32, item 1: after a kill -9 the default check reads every batch of every segment Kafka
    recovers, with its CRC, and predicts the truncation and the loss Kafka then made."""
    built, stored, computed = _real_case(tmp_path)
    active = built.bases[-1]
    path = built.log(active)
    scan, rows = _default_scan(built)

    judged = judge_broker(rows, version=V331, running=False, isr={(TOPIC, 0): (0,)}, leaders={(TOPIC, 0): 0})
    assert judged.verdict is Verdict.LOSES_DATA_IF_UNCLEAN
    [loss] = [f for f in judged.findings if f.kind == "recovery-loses-data"]
    assert (loss.lost_first, loss.lost_end, loss.bytes_at_risk, loss.position) == (
        4116,
        4500,
        119_034,
        346_362,
    )
    assert "offsets 4116..4499 (119,034 bytes) lost on this replica" in loss.summary
    assert "the log end falls from 4500 to 4116" in loss.summary
    # the line Kafka 3.3.1 logged, values filled as Kafka fills them
    assert loss.kafka_log == (
        f"INFO [LogLoader partition={TOPIC}-0, dir={built.directory.parent}] Recovering unflushed segment "
        f"{active}. 0/1 recovered for {TOPIC}-0.",
        f"WARN Found invalid messages in log segment {path} at byte offset 346362: Record is corrupt "
        f"(stored crc = {stored}, computed crc = {computed}). null",
        f"WARN [LogLoader partition={TOPIC}-0, dir={built.directory.parent}] Corruption found in segment "
        f"{active}, truncating to offset 4116",
    )
    # the remedy's text counts the whole batches it drops: the corrupt one and the one after it
    assert (
        f"Drops bytes 346362..465395 (119,034 bytes) of {path}: offsets 4116..4499, 2 batches (384 records)"
        in loss.remedy
    )

    # Kafka's start does exactly that
    outcome, after = _kafka_start(built, tmp_path)
    assert outcome.fatal is None and outcome.log_end_before == 4500 and outcome.log_end_after == 4116
    assert [s.action for s in outcome.segments] == ["kept", "truncated"]
    assert (after / path.name).stat().st_size == 346_362
    assert [e.last_offset for e in iter_log_entries((after / path.name).read_bytes(), "kept")][-1] == 4115
    assert _as_original(outcome.lines, built, after) == loss.kafka_log

    # what was read: every byte of the segment Kafka recovers, every batch's CRC; the rolled segment
    # below the recovery point is not read (Kafka does not read it either)
    [rolled, recovered] = scan["segments"]
    assert recovered["walk"]["crc"] == "all" and recovered["read"]["how"] == "crc"
    assert rolled.get("walk") is None and rolled["read"]["how"] == "index"
    assert "below the recovery point" in rolled["read"]["why"]
    assert scan["read"]["crc_segments"] == 1 and scan["read"]["crc_segment_bytes"] == path.stat().st_size
    # CRCs checked up to the corrupt batch, which fails -- where Kafka's recovery stops too
    assert scan["read"]["crc_bytes"] == 346_362 + 59_517
    assert scan["read"]["not_read_bytes"] == built.log(0).stat().st_size


def test_the_prediction_does_not_depend_on_an_option(tmp_path):
    """Same bytes, the check asked to read more (``verify_crc``, ``walk_all``): the same prediction."""
    built, _, _ = _real_case(tmp_path)
    rp = 3000
    partition = PartitionOnDisk.from_scan
    predictions = []
    for options in ({}, {"verify_crc": True}, {"walk_all": True}, {"verify_crc": True, "walk_all": True}):
        scan = scan_partition(str(built.directory), rp, index_rule="last", clean_shutdown=False, **options)
        start = predict_start(
            partition(TOPIC, 0, str(built.directory), scan["segments"], recovery_point=rp),
            rules_of(V331),
            Scenario(Shutdown.UNCLEAN),
        )
        predictions.append(
            ([(s.base_offset, s.fate, s.position, s.bytes_lost) for s in start.segments], start.kafka_log)
        )
    assert all(p == predictions[0] for p in predictions)
    assert predictions[0][0][1][1] is Fate.TRUNCATED


# ---------------------------------------------------------------------------------------------
# item 2: the lines and texts
# ---------------------------------------------------------------------------------------------


def test_a_cut_off_last_batch_truncates_without_the_invalid_messages_line(tmp_path):
    """A torn write (the file ends inside the last batch): ``FileLogInputStream.nextBatch`` returns
    null, the iteration just ends -- no ``CorruptRecordException``, so no "Found invalid messages"
    line; ``recoverLog`` still logs "Corruption found" for the truncated bytes (3.3.1)."""
    built = build_partition(tmp_path / "kafka-logs-0", [REAL_ROLLED, REAL_ACTIVE], recovery_point=3000)
    active = built.log(built.bases[-1])
    position, batch, _, _ = built.batches[built.bases[-1]][-1]
    size = position + batch // 2
    with open(active, "r+b") as f:
        f.truncate(size)
    _, rows = _default_scan(built)
    judged = judge_broker(
        rows, version=V331, running=False, isr={(TOPIC, 0): (0, 1)}, leaders={(TOPIC, 0): 1}
    )
    # the cut-off batch never counted: the log end is 4308 before and after, no offset is lost
    [torn] = [f for f in judged.findings if f.kind == "recovery-truncates-tail"]
    assert (torn.position, torn.bytes_at_risk) == (position, size - position)
    assert not any("Found invalid messages" in line for line in torn.kafka_log)
    assert torn.kafka_log[-1].endswith(
        f"Corruption found in segment {built.bases[-1]}, truncating to offset 4308"
    )
    outcome, after = _kafka_start(built, tmp_path)
    assert _as_original(outcome.lines, built, after) == torn.kafka_log
    assert outcome.log_end_before == outcome.log_end_after == 4308


def test_the_verdicts_header_names_the_start_its_prediction_is_for(tmp_path):
    """Issue 32, item 2: after the remedy (the segment cut, its indexes removed) of a broker stopped
    cleanly, the header said "will rebuild 1 index(es) after an unclean shutdown" while the prediction
    was for "its start after a clean shutdown" -- which was right: a missing .index is rebuilt at load
    in any start (``LogLoader.loadSegmentFiles``, 3.3.1), here the clean one."""
    built = build_partition(
        tmp_path / "kafka-logs-0", [REAL_ROLLED, REAL_ACTIVE], recovery_point=4500, clean_shutdown=True
    )
    # bit rot in the rolled segment: no start reads it, so only verify_crc finds it
    rolled = built.log(0)
    position, size, first, _ = built.batches[0][9]
    flip_record_byte(rolled, position, size)
    _, rows = _default_scan(built, clean_shutdown=True)
    assert judge_broker(rows, version=V331, running=False).describe() == "broker 0 restarts clean"
    scan = scan_partition(str(built.directory), 4500, index_rule="last", clean_shutdown=True, verify_crc=True)
    rows = segment_rows(
        0, str(built.directory.parent), TOPIC, 0, scan, recovery_point=4500, clean_shutdown=True
    )
    judged = judge_broker(rows, version=V331, running=False, isr={(TOPIC, 0): (0,)})
    [kept] = [f for f in judged.findings if f.kind == "corrupt-batch-kept"]
    assert kept.scenario == "its start after a clean shutdown" and kept.position == position
    assert "Record is corrupt (stored crc = " in kept.summary and "CorruptRecordException" in kept.summary
    [cut] = [r for r in kept.remedies if r.action == "truncate"]
    assert f"offsets {first}..2999, 6 batches (1,200 records)" in cut.describe()

    # the remedy, as its commands say
    with open(rolled, "r+b") as f:
        f.truncate(position)
    (built.directory / "00000000000000000000.index").unlink()
    (built.directory / "00000000000000000000.timeindex").unlink()
    _, rows = _default_scan(built, clean_shutdown=True)
    judged = judge_broker(rows, version=V331, running=False, isr={(TOPIC, 0): (0,)})
    assert judged.scenarios == ("its start after a clean shutdown",)
    assert judged.verdict is Verdict.REBUILDS_INDEXES
    assert judged.describe() == (
        "broker 0 will rebuild 1 index(es) in its start after a clean shutdown (slow start, minutes)"
    )
    outcome, after = _kafka_start(built, tmp_path)
    assert outcome.fatal is None and [s.action for s in outcome.segments] == ["rebuilt_at_load", "kept"]
    assert outcome.lines[0].startswith(
        f"ERROR [LogLoader partition={TOPIC}-0, dir={after.parent}] Could not find"
    )


# ---------------------------------------------------------------------------------------------
# item 3: after the seed case (the broker exits while loading logs)
# ---------------------------------------------------------------------------------------------


def _seed_case(log_dir: Path) -> Built:
    """Issue 26's seed case in ``aaa-0``, which the start loads first: after a crash the active
    segment holds its last batch again, three times, and its ``.index`` is gone -- the rebuild at
    load appends an offset no larger than the last and the broker exits."""
    built = build_partition(log_dir, [REAL_ROLLED, [(186, 57_727)] * 4], recovery_point=3000, topic="aaa")
    active = built.log(built.bases[-1])
    data = active.read_bytes()
    position = built.batches[built.bases[-1]][-1][0]
    active.write_bytes(data + data[position:] * 3)
    (built.directory / f"{built.bases[-1]:020d}.index").unlink()
    return built


def _run(commands: list[str], original: Path, copy: Path) -> None:
    """A remedy's commands, as an operator types them, on the copy."""
    for command in commands:
        words = [w.replace(str(original), str(copy)) for w in shlex.split(command)]
        if words[0] == "truncate":
            os.truncate(words[3], int(words[2]))
        elif words[:2] == ["rm", "-f"]:
            for path in words[2:]:
                Path(path).unlink(missing_ok=True)
        else:
            raise AssertionError(command)


def test_after_the_seed_case_kafka_marks_the_log_dir_clean_and_the_check_says_what_that_skips(tmp_path):
    """Issue 32, item 3. Kafka 3.3.1, ``KafkaServer.startup``: ``catch { case e: Throwable => fatal(...);
    shutdown(); throw e }``; ``shutdown()`` runs ``LogManager.shutdown``, which for every live log dir
    checkpoints the recovery points of the logs it *loaded* (``checkpointRecoveryOffsetsInDir(dir,
    logs)``) and creates ``.kafka_cleanshutdown`` -- no check that every log loaded (that came with
    KAFKA-15375 in 3.5.2). So the start after it skips recovery: ``events-0``, never loaded, keeps the
    corrupt batch its unclean start would have cut. The check's "will not start" finding says so, with
    what to do; following it, the start recovers ``events-0`` as predicted."""
    log_dir = tmp_path / "kafka-logs-0"
    seed = _seed_case(log_dir)
    built, _, _ = _real_case(tmp_path)
    assert built.directory.parent == log_dir and not (log_dir / ".kafka_cleanshutdown").exists()
    rows = []
    for part in (seed, built):
        topic = part.directory.name.rsplit("-", 1)[0]
        scan = scan_partition(str(part.directory), 3000, index_rule="last", clean_shutdown=False)
        rows += segment_rows(0, str(log_dir), topic, 0, scan, recovery_point=3000, clean_shutdown=False)
    judged = judge_broker(rows, version=V331, running=False, isr={("aaa", 0): (0,), (TOPIC, 0): (0,)})
    assert judged.verdict is Verdict.FAILS_RECOVERY
    [fatal] = [f for f in judged.findings if f.kind == "recovery-fails"]
    marker = log_dir / ".kafka_cleanshutdown"
    assert "writes .kafka_cleanshutdown in every log dir" in fatal.summary
    assert (
        f"rewrites {log_dir}/recovery-point-offset-checkpoint with only the logs it had loaded"
        in fatal.summary
    )
    assert f"in {log_dir}: {TOPIC}-0 (1 segment(s), 465,396 bytes)" in fatal.summary
    assert (
        f"`rm -f {marker}`" in fatal.summary and "recovery-point-offset-checkpoint || echo" in fatal.summary
    )

    # Kafka 3.3.1's start on a copy: aaa-0 throws, nothing loaded; the exit marks the dir clean
    copy = tmp_path / "started" / log_dir.name
    shutil.copytree(log_dir, copy)
    [started] = start_log_dirs([copy], V331)
    assert started.fatal and started.loaded == [] and started.marker_written
    assert (copy / ".kafka_cleanshutdown").exists()
    assert (
        OffsetCheckpoint.parse((copy / "recovery-point-offset-checkpoint").read_bytes(), "rp").offsets == {}
    )
    index = copy / "aaa-0" / f"{seed.bases[-1]:020d}.index"
    assert index.stat().st_size == 10_485_760  # recover() created it; nothing closed the failed log
    # the re-scan of that state names it
    rescan = []
    for name, topic in (("aaa-0", "aaa"), (f"{TOPIC}-0", TOPIC)):
        scan = scan_partition(str(copy / name), None, index_rule="last", clean_shutdown=True)
        rescan += segment_rows(0, str(copy), topic, 0, scan, recovery_point=None, clean_shutdown=True)
    [signature] = [
        f
        for f in judge_broker(rescan, version=V331, running=False).findings
        if f.kind == "marked-clean-after-failed-start"
    ]
    assert f"2 partition(s) are missing from its recovery-point-offset-checkpoint (aaa-0, {TOPIC}-0)" in (
        signature.summary
    )
    assert f"rm -f {copy}/.kafka_cleanshutdown" in signature.remedy

    # the remedy of aaa-0 alone, then a start: clean -- events-0 keeps its corrupt batch
    [cut] = [r for r in fatal.remedies if r.action == "truncate"]
    plain = tmp_path / "plain" / log_dir.name
    shutil.copytree(copy, plain)
    _run(list(cut.commands), log_dir, plain)
    [again] = start_log_dirs([plain], V331)
    assert again.fatal is None and again.clean_shutdown
    assert again.partitions[f"{TOPIC}-0"].segments[-1].action == "kept"
    assert (plain / f"{TOPIC}-0" / built.log(3000).name).stat().st_size == 465_396  # still corrupt

    # the remedy and the marker removed, as the finding says: events-0 is recovered as predicted
    advised = tmp_path / "advised" / log_dir.name
    shutil.copytree(copy, advised)
    _run([*cut.commands, f"rm -f {marker}"], log_dir, advised)
    [recovered] = start_log_dirs([advised], V331)
    outcome = recovered.partitions[f"{TOPIC}-0"]
    assert recovered.fatal is None and not recovered.clean_shutdown
    assert (outcome.log_end_before, outcome.log_end_after) == (4500, 4116)
    assert (advised / f"{TOPIC}-0" / built.log(3000).name).stat().st_size == 346_362
    [loss] = [f for f in judged.findings if f.kind == "recovery-loses-data" and f.topic == TOPIC]
    assert (loss.lost_first, loss.lost_end, loss.bytes_at_risk) == (4116, 4500, 119_034)
