"""Every remedy the pre-restart scan proposes, applied to a copy of the damaged log: what it keeps and
drops is read back with the product's own record reader (:mod:`airflow_provider_kafka_zk.kafka.records`,
full CRC check) and must be exactly what the verdict stated; then the simulated broker starts on the
remedied copy (:mod:`airflow_provider_kafka_zk.testing.simulator.log_recovery`, Kafka's
``LogLoader`` at the release) and must come up with the log end the remedy named.

The cases are issue 26's: a repeated offset followed by new offsets (the remedy text said "from
offset 236" and "offsets 0..657" where the cut and the kept range were elsewhere), a repeated offset
in an unflushed segment before later segments, a corrupt batch, index damage below the recovery point.
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.errors import RecordFormatError
from airflow_provider_kafka_zk.kafka.log_scan import scan_partition
from airflow_provider_kafka_zk.kafka.log_scan_rules import Remedy, ScanFinding, judge_broker, segment_rows
from airflow_provider_kafka_zk.kafka.records import (
    LogSegmentWriter,
    Record,
    encode_record_batch,
    iter_log_entries,
)
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_partition

V331 = KafkaVersion.parse("3.3.1")


def _batch(base: int, count: int = 40, size: int = 120) -> bytes:
    return encode_record_batch(
        [Record(o, 1_700_000_000_000 + o, b"k", b"v" * size) for o in range(base, base + count)],
        partition_leader_epoch=0,
    )


def _write_segments(directory: Path, segments: list[list[bytes]]) -> list[int]:
    """Segments of whole batches as a 2.0+ broker left them: the ``.log`` holds every batch given
    (damage included), the indexes what the broker appended before the damage (a batch whose
    offsets go back, or whose CRC fails, came from outside the append path); the last segment is
    open, its indexes preallocated as a crashed broker leaves them. Returns the base offsets."""
    directory.mkdir(parents=True)
    bases = []
    for number, batches in enumerate(segments):
        base = struct.unpack_from(">q", batches[0], 0)[0]
        writer = LogSegmentWriter(base)
        for batch in batches:
            try:
                writer.append(batch)
            except RecordFormatError:
                break  # the damage: the broker never indexed it
        last = number == len(segments) - 1
        if not last:
            writer.close()
        files = writer.files(preallocate=last)
        files[f"{base:020d}.log"] = b"".join(batches)
        for name, data in files.items():
            (directory / name).write_bytes(data)
        bases.append(base)
    return bases


def _entries(data: bytes, *, strict: bool = True) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch, CRC checked (strict: a bad one raises; not
    strict: by their lengths, as the dropped range holds the corrupt batch itself)."""
    return [
        (e.position, e.base_offset, e.last_offset)
        for e in iter_log_entries(data, "read back", strict=strict, verify_crc=strict)
    ]


def _judge(
    directory: Path, broker: int, *, rp: int | None, clean: bool | None, isr=(), hw=None
) -> list[ScanFinding]:
    topic, partition = directory.name.rsplit("-", 1)
    scan = scan_partition(str(directory), rp, index_rule="last", verify_crc=True)
    rows = segment_rows(
        broker, str(directory.parent), topic, int(partition), scan, recovery_point=rp, clean_shutdown=clean
    )
    judged = judge_broker(
        rows,
        version=V331,
        running=False,
        isr={(topic, int(partition)): tuple(isr)},
        leaders={(topic, int(partition)): isr[0]} if isr else {},
        high_watermarks={(topic, int(partition)): {b: hw for b in isr if b != broker}}
        if hw is not None
        else None,
    )
    return judged.findings


def _apply(remedy: Remedy, original: Path, copy: Path) -> None:
    """Run the remedy's commands on the copy (the same words an operator types, paths moved over)."""
    for command in remedy.commands:
        words = [w.replace(str(original), str(copy)) for w in shlex.split(command)]
        if words[0] == "truncate":
            assert words[1] == "-s"
            os.truncate(words[3], int(words[2]))
        elif words[:2] == ["rm", "-f"]:
            for path in words[2:]:
                Path(path).unlink(missing_ok=True)
        elif words[0] == "mv":
            Path(words[1]).rename(words[2])
        else:
            raise AssertionError(f"a remedy command the test cannot run: {command}")


def _check_remedy(remedy: Remedy, directory: Path, tmp_path: Path, *, clean: bool, rp: int | None) -> Path:
    """Apply it to a copy, read back keeps and drops, start the copy; returns the copy."""
    copy = tmp_path / f"copy-{remedy.action}" / directory.name
    if copy.parent.exists():
        shutil.rmtree(copy.parent)
    shutil.copytree(directory, copy)
    _apply(remedy, directory, copy)
    for kept in remedy.keeps:
        data = Path(kept.file.replace(str(directory), str(copy))).read_bytes()
        assert len(data) == kept.end_byte  # the bytes kept, exactly
        batches = _entries(data[kept.first_byte : kept.end_byte])
        assert len(batches) == kept.batches
        if batches:
            assert min(b for _, b, _ in batches) == kept.first_offset
            assert max(last for _, _, last in batches) == kept.last_offset
    for dropped in remedy.drops:
        source = Path(dropped.file)
        if source.is_dir():  # the whole replica moved aside: its offsets are those the span names
            assert not copy.exists() and copy.with_name(copy.name + ".bad").is_dir()
            logs = sorted(source.glob("*.log"))
            first = _entries(logs[0].read_bytes())[0][1]
            last = max(x for _, _, x in _entries(logs[-1].read_bytes()))
            assert (dropped.first_offset, dropped.last_offset) == (first, last)
            assert dropped.end_byte == sum(p.stat().st_size for p in logs)
            continue
        gone = source.read_bytes()[dropped.first_byte : dropped.end_byte]
        assert len(gone) == dropped.end_byte - dropped.first_byte
        if dropped.batches:
            batches = _entries(gone, strict=False)
            assert len(batches) == dropped.batches
            assert min(b for _, b, _ in batches) == dropped.first_offset
            assert max(x for _, _, x in batches) == dropped.last_offset
    if copy.exists():  # Kafka starts on the remedied log, and its log end is the one stated
        outcome = start_partition(copy, release=V331, clean_shutdown=clean, recovery_point=rp)
        assert outcome.fatal is None, outcome.lines
        if remedy.log_end_after is not None:
            assert outcome.log_end_after == remedy.log_end_after
    return copy


def test_a_repeat_followed_by_new_offsets_the_cut_keeps_what_it_says_and_the_broker_starts(tmp_path):
    """Issue 26's seed case: the broker refused to start (missing index + a repeated offset). The cut
    is where the offsets first go back; it keeps every batch before it and drops the copies and the
    new offsets after them -- the remedy says both, by offset and byte."""
    batches = [_batch(i * 40) for i in range(12)]  # offsets 0..479
    repeated = [batches[5], batches[6], batches[7]]  # offsets 200..319, again
    later = [_batch(480 + i * 40) for i in range(6)]  # offsets 480..719, new
    directory = tmp_path / "orders-0"
    _write_segments(directory, [batches + repeated + later])
    (directory / "00000000000000000000.index").unlink()
    findings = _judge(directory, 1, rp=10**9, clean=True)
    [fatal] = [f for f in findings if f.kind == "recovery-fails"]
    [cut] = fatal.remedies  # RF=1: the cut is the only way
    first_copy = sum(len(b) for b in batches)
    assert cut.commands[0] == f"truncate -s {first_copy} {directory}/00000000000000000000.log"
    assert (cut.keeps[0].first_offset, cut.keeps[0].last_offset, cut.keeps[0].batches) == (0, 479, 12)
    assert (cut.drops[0].first_offset, cut.drops[0].last_offset, cut.drops[0].batches) == (200, 719, 9)
    assert "dropped offsets up to 479 are copies of kept ones" in cut.summary
    assert cut.log_end_after == 480
    # the finding names the first bad batch, not where the rebuild noticed
    assert (fatal.offset, fatal.position) == (200, first_copy)
    _check_remedy(cut, directory, tmp_path, clean=True, rp=10**9)


def test_a_repeat_in_an_unflushed_segment_the_cut_keeps_the_later_segments_kafka_would_delete(tmp_path):
    segments = [[_batch(s * 400 + i * 40) for i in range(10)] for s in range(4)]
    segments[1] = segments[1] + [segments[1][-1]] * 3  # the last batch of segment 1 again, three times
    directory = tmp_path / "orders-1"
    bases = _write_segments(directory, segments)
    size = {b: (directory / f"{b:020d}.log").stat().st_size for b in bases}
    findings = _judge(directory, 1, rp=bases[1], clean=False, isr=(1,))
    [loss] = [f for f in findings if f.kind == "recovery-loses-data"]
    # Kafka's own start: segment 400 emptied, 800 and 1200 deleted: offsets 400..1599 gone
    assert (loss.lost_first, loss.lost_end) == (400, 1600)
    assert loss.bytes_at_risk == size[400] + size[800] + size[1200]
    [cut] = [r for r in loss.remedies if r.action == "truncate"]
    assert [r.action for r in loss.remedies] == ["truncate"]  # nobody else holds them
    assert cut.keeps[0].end_byte == size[400] - 3 * len(segments[1][-1])
    assert (cut.keeps[0].first_offset, cut.keeps[0].last_offset) == (400, 799)
    assert (cut.drops[0].first_offset, cut.drops[0].last_offset, cut.drops[0].batches) == (760, 799, 3)
    assert cut.log_end_after == 1600  # later segments stay
    copy = _check_remedy(cut, directory, tmp_path, clean=False, rp=bases[1])
    assert sorted(p.name for p in copy.glob("*.log")) == [f"{b:020d}.log" for b in bases]


def test_a_loss_in_sync_replicas_hold_kafka_recovers_and_the_broker_refetches(tmp_path):
    segments = [[_batch(s * 400 + i * 40) for i in range(10)] for s in range(3)]
    raw = bytearray(segments[1][4])
    raw[-5] ^= 0xFF  # a flipped record byte: the CRC-32C fails
    segments[1][4] = bytes(raw)
    directory = tmp_path / "orders-2"
    bases = _write_segments(directory, segments)
    findings = _judge(directory, 1, rp=bases[1], clean=False, isr=(1, 2), hw=1200)
    [loss] = [f for f in findings if f.kind == "recovery-loses-data"]
    cut_at = sum(len(b) for b in segments[1][:4])
    assert (loss.lost_first, loss.lost_end, loss.position) == (560, 1200, cut_at)
    assert loss.held_elsewhere == "held" and loss.severity == "warning"
    assert [r.action for r in loss.remedies] == ["let_kafka_recover", "refetch", "truncate"]
    let_kafka, refetch, cut = loss.remedies
    assert (let_kafka.drops[0].first_byte, let_kafka.drops[0].first_offset, let_kafka.log_end_after) == (
        cut_at,
        560,
        560,
    )
    for remedy in loss.remedies:
        _check_remedy(remedy, directory, tmp_path, clean=False, rp=bases[1])
    # the "let Kafka do it" start: what it dropped is what the remedy said
    copy = tmp_path / "copy-let_kafka_recover" / directory.name
    assert (copy / f"{bases[1]:020d}.log").stat().st_size == cut_at
    assert not (copy / f"{bases[2]:020d}.log").exists()
    assert cut.log_end_after == 1200 and refetch.drops[0].first_offset == 0


def test_index_damage_below_the_recovery_point_removing_the_index_keeps_the_whole_log(tmp_path):
    segments = [[_batch(s * 400 + i * 40) for i in range(10)] for s in range(2)]
    directory = tmp_path / "orders-3"
    bases = _write_segments(directory, segments)
    index = directory / f"{bases[0]:020d}.index"
    entries = index.read_bytes()
    index.write_bytes(entries[8:16] + entries[:8] + entries[16:])
    findings = _judge(directory, 1, rp=bases[1], clean=False, isr=(1,))
    [damaged] = [f for f in findings if f.kind == "index-damaged"]
    [remedy] = damaged.remedies
    assert remedy.action == "remove_indexes" and not remedy.drops
    assert (remedy.keeps[0].first_offset, remedy.keeps[0].last_offset, remedy.keeps[0].batches) == (
        0,
        399,
        10,
    )
    copy = _check_remedy(remedy, directory, tmp_path, clean=False, rp=bases[1])
    rebuilt = (copy / f"{bases[0]:020d}.index").read_bytes()
    offsets = [struct.unpack_from(">i", rebuilt, i)[0] for i in range(0, len(rebuilt), 8)]
    assert offsets == sorted(offsets) and rebuilt != index.read_bytes()


@pytest.mark.parametrize("held", [True, False])
def test_every_remedy_of_every_finding_is_applied_and_read_back(tmp_path, held):
    """All together: the damage above on one broker, every remedy of every finding applied."""
    segments = [[_batch(s * 400 + i * 40) for i in range(10)] for s in range(4)]
    segments[2] = (
        segments[2][:5] + segments[2][2:4] + segments[2][5:]
    )  # a repeat mid-segment, new offsets after
    directory = tmp_path / "orders-4"
    bases = _write_segments(directory, segments)
    findings = _judge(
        directory, 1, rp=bases[1], clean=False, isr=(1, 2) if held else (1,), hw=1600 if held else None
    )
    remedies = [r for f in findings for r in f.remedies]
    assert remedies and {f.kind for f in findings} & {"recovery-loses-data", "offsets-out-of-order"}
    for remedy in remedies:
        _check_remedy(remedy, directory, tmp_path, clean=False, rp=bases[1])
