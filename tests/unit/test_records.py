"""Segments and indexes: every golden .log/.index/.timeindex from a real Kafka 3.3.1 cluster,
index rebuilds byte-for-byte (leader and follower rules), and corruption that must be caught."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import struct
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.errors import RecordFormatError
from airflow_provider_kafka_zk.kafka.records import (
    BatchHeader,
    Compression,
    Header,
    IndexProblemKind,
    LegacyEntryHeader,
    LogSegmentWriter,
    OffsetIndex,
    OffsetIndexEntry,
    Record,
    TimeIndex,
    TimeIndexEntry,
    TimeIndexOffsetRule,
    TimestampType,
    _read_varint,
    _write_varint,
    check_offset_index,
    check_time_index,
    decode_legacy_message,
    decode_records,
    encode_legacy_entry,
    encode_offset_index,
    encode_record_batch,
    encode_time_index,
    iter_log_entries,
    parse_offset_index,
    parse_segment_file_name,
    parse_time_index,
    rebuild_indexes,
    scan_log,
    segment_file_name,
)

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1"
RF3_0 = GOLDEN / "broker0/after-clean-stop/golden-rf3-0"
OFFSET_INDEX_SIZE = 10485760
TIME_INDEX_SIZE = 10485756


@cache
def read(path: Path) -> bytes:
    return path.read_bytes()


@cache
def manifest(log_dir: Path) -> dict[str, tuple[int, str]]:
    """relpath -> (apparent size of the original, sha256 of the original)."""
    with (log_dir / "MANIFEST.tsv").open(newline="") as handle:
        return {
            row["relpath"]: (int(row["apparent_size"]), row["sha256_of_original"])
            for row in csv.DictReader(handle, delimiter="\t")
        }


def original(path: Path) -> bytes:
    """The file as it was on the broker: running/ stores preallocated indexes trimmed."""
    log_dir = path.parent.parent
    size, _ = manifest(log_dir)[path.relative_to(log_dir).as_posix()]
    data = read(path)
    return data + bytes(size - len(data))


@cache
def leaders() -> dict[tuple[str, int], int]:
    znodes = json.loads(read(GOLDEN / "zk_tree.json"))["znodes"]
    found = {}
    for znode in znodes:
        parts = znode["path"].split("/")
        if len(parts) == 7 and parts[1:3] == ["brokers", "topics"] and parts[6] == "state":
            found[(parts[3], int(parts[5]))] = json.loads(znode["data"])["leader"]
    return found


def segments() -> list[Path]:
    logs = sorted(GOLDEN.glob("broker*/*/*/*.log"))
    assert len(logs) == 42
    return logs


def segment_id(path: Path) -> str:
    return path.relative_to(GOLDEN).as_posix()


def is_leader(log: Path) -> bool:
    topic, partition = log.parent.name.rsplit("-", 1)
    return leaders()[(topic, int(partition))] == int(log.parent.parent.parent.name.removeprefix("broker"))


def is_active(log: Path) -> bool:
    return log.name == max(p.name for p in log.parent.glob("*.log"))


# --------------------------------------------------------------------------------------------
# golden logs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", segments(), ids=segment_id)
def test_golden_segment_batches_pass_crc_and_indexes_pass_checks(log: Path) -> None:
    base, suffix = parse_segment_file_name(log.name)
    assert suffix == ".log"
    scan = scan_log(read(log), str(log))
    assert scan.error is None and scan.trailing_bytes == 0
    assert scan.entries and all(e.crc_valid for e in scan.entries)
    assert scan.valid_bytes == scan.end_position == len(read(log))
    assert all(isinstance(e, BatchHeader) and e.magic == 2 for e in scan.entries)
    assert [e.base_offset for e in scan.entries[1:]] == [e.last_offset + 1 for e in scan.entries[:-1]]
    assert scan.entries[0].base_offset == base
    offset_index = parse_offset_index(original(log.with_suffix(".index")), base, "index")
    time_index = parse_time_index(original(log.with_suffix(".timeindex")), base, "timeindex")
    assert check_offset_index(offset_index, scan, "index") == []
    assert check_time_index(time_index, scan, "timeindex") == []
    assert not offset_index.tail_nonzero and not time_index.tail_nonzero


@pytest.mark.parametrize("log", segments(), ids=segment_id)
def test_golden_indexes_rebuild_byte_exact(log: Path) -> None:
    """Followers index each batch's last offset; the leader (broker 0 for golden-rf3-0) indexes
    the max-timestamp record of an uncompressed batch. Running active segments have no final
    time-index entry yet, and their preallocated files match the originals' sha256."""
    base, _ = parse_segment_file_name(log.name)
    rule = (
        TimeIndexOffsetRule.MAX_TIMESTAMP_RECORD if is_leader(log) else TimeIndexOffsetRule.BATCH_LAST_OFFSET
    )
    running_active = log.parent.parent.name == "running" and is_active(log)
    writer = rebuild_indexes(read(log), base, str(log), time_index_offsets=rule, close=not running_active)
    assert writer.log_bytes() == read(log)
    assert writer.offset_index_bytes() == read(log.with_suffix(".index"))
    assert writer.time_index_bytes() == read(log.with_suffix(".timeindex"))
    if running_active and log.parent.parent.parent.name == "broker0":  # sha256 of 10 MiB: a few suffice
        log_dir = log.parent.parent
        for suffix, padded in (
            (".index", writer.offset_index_bytes),
            (".timeindex", writer.time_index_bytes),
        ):
            size, digest = manifest(log_dir)[log.with_suffix(suffix).relative_to(log_dir).as_posix()]
            data = padded(preallocate=True)
            assert len(data) == size == (OFFSET_INDEX_SIZE if suffix == ".index" else TIME_INDEX_SIZE)
            assert hashlib.sha256(data).hexdigest() == digest


def test_golden_batch_headers_match_kafka_dump_log() -> None:
    scan = scan_log(read(RF3_0 / "00000000000000000000.log"), "rf3")
    first, gzip_batch, last = scan.entries[0], scan.entries[12], scan.entries[-1]
    assert (first.base_offset, first.last_offset, first.record_count, first.size) == (0, 205, 206, 65299)
    assert (first.crc, first.max_timestamp, first.producer_id, first.producer_epoch) == (
        2694681727,
        1795322105230,
        0,
        0,
    )
    assert (first.base_sequence, first.last_sequence, first.partition_leader_epoch) == (0, 205, 0)
    assert first.compression is Compression.NONE and first.timestamp_type is TimestampType.CREATE_TIME
    assert not (first.is_transactional or first.is_control or first.has_delete_horizon)
    assert (gzip_batch.position, gzip_batch.base_offset, gzip_batch.record_count) == (725328, 2287, 413)
    assert (gzip_batch.crc, gzip_batch.producer_id, gzip_batch.compression) == (
        3422967865,
        1000,
        Compression.GZIP,
    )
    assert (len(scan.entries), last.last_offset) == (19, 3997)
    lz4 = [e for e in scan_log(read(RF3_0 / "00000000000000003998.log"), "s").entries if e.compression == 3]
    assert lz4 and lz4[0].compression is Compression.LZ4


def test_golden_records_decode_and_reencode_byte_exact() -> None:
    data = read(RF3_0 / "00000000000000000000.log")
    scan = scan_log(data, "rf3")
    first = decode_records(data, scan.entries[0], "rf3")
    assert len(first) == 206 and [r.offset for r in first] == list(range(206))
    assert (first[0].key, first[0].timestamp, first[0].headers) == (b"k000001", 1795322105202, ())
    assert first[0].value is not None and first[0].value.startswith(b"golden-golden-rf3-000001-")
    assert len(first[0].value) == 300
    headers = []
    for batch in scan.entries:
        records = decode_records(data, batch, "rf3")
        assert [r.offset for r in records] == list(range(batch.base_offset, batch.last_offset + 1))
        assert max(r.timestamp for r in records) == batch.max_timestamp
        headers += [r.headers for r in records if r.headers]
        if batch.compression is Compression.NONE:
            rebuilt = encode_record_batch(
                records,
                partition_leader_epoch=batch.partition_leader_epoch,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
            )
            assert rebuilt == data[batch.position : batch.next_position]
    assert headers and all(h == (Header("h", b"golden"),) for h in headers)


def test_lz4_batches_are_reported_not_decoded() -> None:
    data = read(RF3_0 / "00000000000000003998.log")
    lz4 = next(e for e in scan_log(data, "s").entries if e.compression is Compression.LZ4)
    with pytest.raises(RecordFormatError, match="uncompressed or gzip") as caught:
        decode_records(data, lz4, "seg")
    assert caught.value.position == lz4.position


def test_leader_time_index_differs_from_follower_rule_and_is_not_corruption() -> None:
    """Real 3.3.1 files: the leader's .timeindex points at the max-timestamp record, not the batch's last offset."""
    log = RF3_0 / "00000000000000000000.log"
    leader_file = read(log.with_suffix(".timeindex"))
    as_follower = rebuild_indexes(read(log), 0, "rf3").time_index_bytes()
    assert as_follower != leader_file
    assert as_follower == read(
        GOLDEN / "broker1/after-clean-stop/golden-rf3-0/00000000000000000000.timeindex"
    )
    leader_index = parse_time_index(leader_file, 0, "leader")
    assert leader_index.entries[0] == TimeIndexEntry(1795322105351, 405)  # batch 206..411
    assert check_time_index(leader_index, scan_log(read(log), "rf3"), "leader") == []


def test_zero_tail_of_preallocated_indexes() -> None:
    running = GOLDEN / "broker0/running/golden-rf3-0/00000000000000003998"
    trimmed = parse_offset_index(read(running.with_suffix(".index")), 3998, "i")
    padded = parse_offset_index(original(running.with_suffix(".index")), 3998, "i")
    assert padded.entries == trimmed.entries and len(trimmed.entries) == 8
    assert (padded.tail_entries, padded.tail_nonzero, padded.size_in_bytes) == (
        1310712,
        False,
        OFFSET_INDEX_SIZE,
    )
    assert padded.entries[0] == OffsetIndexEntry(4491, 28933)
    time_padded = parse_time_index(original(running.with_suffix(".timeindex")), 3998, "t")
    assert len(time_padded.entries) == 8 and time_padded.tail_entries == TIME_INDEX_SIZE // 12 - 8
    # an empty preallocated index (active segment with no entries yet) has no entries
    empty = GOLDEN / "broker1/running/__consumer_offsets-49/00000000000000000000"
    assert parse_offset_index(original(empty.with_suffix(".index")), 0, "i").entries == ()
    assert parse_time_index(original(empty.with_suffix(".timeindex")), 0, "t").entries == ()
    # bytes after the apparent end: DumpLogSegments would stop, but the file is not a clean tail
    dirty = bytearray(original(running.with_suffix(".index")))
    dirty[4096] = 1
    index = parse_offset_index(bytes(dirty), 3998, "i")
    assert len(index.entries) == 8 and index.tail_nonzero
    scan = scan_log(read(running.with_suffix(".log")), "log")
    assert [p.kind for p in check_offset_index(index, scan, "i")] == [IndexProblemKind.NONZERO_TAIL]


@pytest.mark.parametrize(("size", "parse"), [(12, parse_offset_index), (20, parse_time_index)])
def test_index_length_must_be_a_multiple_of_the_entry_size(size: int, parse: Callable[..., object]) -> None:
    with pytest.raises(RecordFormatError, match="multiple of") as caught:
        parse(bytes(size), 0, "/data/t-0/00000000000000000000.index")
    assert caught.value.source == "/data/t-0/00000000000000000000.index"


def test_index_encoders_round_trip_and_preallocate() -> None:
    entries = [OffsetIndexEntry(411, 65299), OffsetIndexEntry(617, 130720)]
    data = encode_offset_index(entries, 0)
    assert data == struct.pack(">iiii", 411, 65299, 617, 130720)
    assert parse_offset_index(data, 0, "i") == OffsetIndex(0, tuple(entries))
    assert len(encode_offset_index(entries, 0, preallocate_to=OFFSET_INDEX_SIZE)) == OFFSET_INDEX_SIZE
    times = [TimeIndexEntry(1795322105351, 4005), TimeIndexEntry(1795322105409, 4010)]
    data = encode_time_index(times, 3998)
    assert parse_time_index(data, 3998, "t") == TimeIndex(3998, tuple(times))
    assert len(encode_time_index(times, 3998, preallocate_to=OFFSET_INDEX_SIZE)) == TIME_INDEX_SIZE


def test_segment_file_names() -> None:
    assert segment_file_name(3998) == "00000000000000003998.log"
    assert segment_file_name(6641, ".snapshot") == "00000000000000006641.snapshot"
    assert parse_segment_file_name("00000000000000000000.index.swap") == (0, ".index.swap")
    assert parse_segment_file_name(segment_file_name(2**63 - 1, ".timeindex")) == (2**63 - 1, ".timeindex")
    for bad in ("3998.log", "0000000000000000399x.log", "leader-epoch-checkpoint"):
        with pytest.raises(RecordFormatError):
            parse_segment_file_name(bad)


# --------------------------------------------------------------------------------------------
# corruption in logs
# --------------------------------------------------------------------------------------------


def small_log() -> tuple[bytes, list[BatchHeader]]:
    batches = [
        encode_record_batch(
            [Record(base + i, 1_000 + base + i, f"k{base + i}".encode(), b"v" * 50) for i in range(3)],
            partition_leader_epoch=2,
        )
        for base in (0, 3, 6)
    ]
    data = b"".join(batches)
    return data, [e for e in scan_log(data, "s").entries if isinstance(e, BatchHeader)]


def test_flipping_one_byte_breaks_the_crc() -> None:
    data, batches = small_log()
    for flip_at in (batches[1].position + 21, batches[1].position + 70, batches[1].next_position - 1):
        corrupt = bytearray(data)
        corrupt[flip_at] ^= 0x01
        scan = scan_log(bytes(corrupt), "seg")
        assert [e.crc_valid for e in scan.entries] == [True, False, True]
        assert scan.valid_bytes == batches[1].position  # where recovery would truncate
        assert scan.first_invalid is not None and scan.first_invalid.position == batches[1].position
        with pytest.raises(RecordFormatError, match="CRC-32C") as caught:
            list(iter_log_entries(bytes(corrupt), "/data/t-0/00000000000000000000.log", strict=True))
        assert caught.value.position == batches[1].position
        assert "@ byte" in str(caught.value)


def test_leader_epoch_is_outside_the_crc() -> None:
    data, batches = small_log()
    restamped = bytearray(data)
    struct.pack_into(">i", restamped, batches[1].position + 12, 7)
    scan = scan_log(bytes(restamped), "seg")
    assert all(e.crc_valid for e in scan.entries)
    assert scan.entries[1].partition_leader_epoch == 7


def test_truncated_tail_stops_quietly_but_is_reported() -> None:
    data, batches = small_log()
    cut = data[: batches[2].position + 40]
    assert [e.position for e in iter_log_entries(cut, "s")] == [0, batches[1].position]
    scan = scan_log(cut, "s")
    assert (scan.trailing_bytes, scan.truncated_entry_size) == (40, batches[2].size)
    assert scan.valid_bytes == batches[2].position
    short = scan_log(data + b"\0" * 17, "s")  # <= 17 bytes left: FileLogInputStream stops
    assert (len(short.entries), short.trailing_bytes, short.truncated_entry_size) == (3, 17, 12)
    assert short.trailing_zero and not scan.trailing_zero
    assert scan_log(data, "s").trailing_bytes == 0
    assert scan_log(b"", "s").entries == ()


def test_corrupt_sizes_and_magic_raise_with_position() -> None:
    data, batches = small_log()
    for size, magic, expected in ((13, 2, "at least 14"), (100, 3, "magic"), (0, 2, "at least 14")):
        corrupt = bytearray(data)
        struct.pack_into(">i", corrupt, batches[1].position + 8, size)
        corrupt[batches[1].position + 16] = magic
        with pytest.raises(RecordFormatError, match=expected) as caught:
            list(iter_log_entries(bytes(corrupt), "seg"))
        assert caught.value.position == batches[1].position
        scan = scan_log(bytes(corrupt), "seg")
        assert scan.error is not None and scan.valid_bytes == batches[1].position


def test_v2_batch_below_61_bytes_is_never_valid() -> None:
    tiny = struct.pack(">qiib", 0, 40, 0, 2) + bytes(40 - 5)
    assert [e.crc_valid for e in iter_log_entries(tiny, "s")] == [False]
    with pytest.raises(RecordFormatError, match="at least 61"):
        list(iter_log_entries(tiny, "s", strict=True))


def test_malformed_records_raise_record_format_error() -> None:
    data, batches = small_log()
    lying = dataclasses.replace(batches[0], record_count=4)
    with pytest.raises(RecordFormatError, match="4 well-formed records"):
        decode_records(data, lying, "s")
    short = dataclasses.replace(batches[0], record_count=2)
    with pytest.raises(RecordFormatError, match="no bytes after the last record"):
        decode_records(data, short, "s")


# --------------------------------------------------------------------------------------------
# records and batches
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 1, 63, -64, 64, 300, 2**31 - 1, -(2**31)])
def test_zigzag_varints(value: int) -> None:
    out = bytearray()
    _write_varint(value, out)
    assert _read_varint(bytes(out), 0, 5) == (value, len(out))
    if value == -1:
        assert bytes(out) == b"\x01"
    if value == 64:
        assert bytes(out) == b"\x80\x01"


def test_zigzag_varlongs_and_overlong_varint() -> None:
    for value in (2**63 - 1, -(2**63), 2**40):
        out = bytearray()
        _write_varint(value, out, 64)
        assert _read_varint(bytes(out), 0, 10) == (value, len(out))
    with pytest.raises(ValueError, match="longer than 5"):
        _read_varint(b"\xff" * 6, 0, 5)


def test_record_batch_round_trip_with_nulls_headers_and_flags() -> None:
    records = [
        Record(100, 5_000, None, b"value", (Header("h", b"x"), Header("empty", None))),
        Record(101, 4_000, b"key", None),
        Record(103, 6_000, b"", b""),
    ]
    data = encode_record_batch(
        records,
        producer_id=42,
        producer_epoch=1,
        base_sequence=7,
        is_transactional=True,
        partition_leader_epoch=3,
    )
    (batch,) = iter_log_entries(data, "s", strict=True)
    assert isinstance(batch, BatchHeader)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (100, 103, 3)
    assert (batch.base_timestamp, batch.max_timestamp) == (5_000, 6_000)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (
        42,
        1,
        7,
        10,
    )
    assert batch.is_transactional and not batch.is_control and batch.partition_leader_epoch == 3
    assert decode_records(data, batch, "s") == records
    gzipped = encode_record_batch(records, compression=Compression.GZIP)
    (gz,) = iter_log_entries(gzipped, "s", strict=True)
    assert gz.compression is Compression.GZIP and decode_records(gzipped, gz, "s") == records


def test_log_append_time_control_and_empty_batches() -> None:
    records = [Record(0, 1, b"a", b"b"), Record(1, 2, b"c", b"d")]
    data = encode_record_batch(
        records, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=99, is_control=True
    )
    (batch,) = iter_log_entries(data, "s", strict=True)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME and batch.is_control
    assert [r.timestamp for r in decode_records(data, batch, "s")] == [99, 99]
    empty = encode_record_batch([], base_offset=50, last_offset_delta=4, producer_id=9)
    (batch,) = iter_log_entries(empty, "s", strict=True)
    assert (batch.record_count, batch.last_offset, batch.base_timestamp, batch.max_timestamp) == (
        0,
        54,
        -1,
        -1,
    )
    assert batch.size == 61 and decode_records(empty, batch, "s") == []
    with pytest.raises(ValueError, match="base_offset"):
        encode_record_batch([])


# --------------------------------------------------------------------------------------------
# legacy messages
# --------------------------------------------------------------------------------------------


def test_legacy_messages_round_trip_and_crc() -> None:
    v0 = encode_legacy_entry(0, None, None, magic=0)
    assert len(v0) == 12 + 14  # the minimum v0 message
    v1 = encode_legacy_entry(1, b"k", b"value", magic=1, timestamp=1234)
    assert len(v1) == 12 + 22 + 1 + 5
    v2 = encode_record_batch([Record(2, 5, b"k", b"v")])
    data = v0 + v1 + v2
    entries = list(iter_log_entries(data, "mixed", strict=True))
    assert [type(e) for e in entries] == [LegacyEntryHeader, LegacyEntryHeader, BatchHeader]
    assert [(e.magic, e.last_offset, e.max_timestamp) for e in entries] == [
        (0, 0, -1),
        (1, 1, 1234),
        (2, 2, 5),
    ]
    message = decode_legacy_message(data, len(v0), "mixed")
    assert (message.key, message.value, message.timestamp, message.compression) == (b"k", b"value", 1234, 0)
    assert message.crc == zlib.crc32(v1[16:])
    assert decode_legacy_message(data, 0, "mixed").key is None
    corrupt = bytearray(data)
    corrupt[len(v0) + 30] ^= 0xFF
    assert [e.crc_valid for e in iter_log_entries(bytes(corrupt), "m")] == [True, False, True]
    with pytest.raises(RecordFormatError, match="CRC-32") as caught:
        decode_legacy_message(bytes(corrupt), len(v0), "m")
    assert caught.value.position == len(v0)


def test_legacy_v1_below_22_bytes_is_invalid() -> None:
    undersized = bytearray(encode_legacy_entry(0, None, None, magic=0))
    undersized[16] = 1  # claims magic 1 but has no room for the timestamp
    assert [e.crc_valid for e in iter_log_entries(bytes(undersized), "s")] == [False]
    with pytest.raises(RecordFormatError, match="22"):
        decode_legacy_message(bytes(undersized), 0, "s")


# --------------------------------------------------------------------------------------------
# index integrity
# --------------------------------------------------------------------------------------------


def golden_index() -> tuple[OffsetIndex, TimeIndex, object]:
    log = RF3_0 / "00000000000000000000.log"
    scan = scan_log(read(log), "rf3")
    return (
        parse_offset_index(read(log.with_suffix(".index")), 0, "i"),
        parse_time_index(read(log.with_suffix(".timeindex")), 0, "t"),
        scan,
    )


def kinds(problems: list) -> list[IndexProblemKind]:
    return [p.kind for p in problems]


def test_non_monotonic_offset_index_is_reported_as_corrupt() -> None:
    index, _, scan = golden_index()
    swapped = list(index.entries)
    swapped[3], swapped[4] = swapped[4], swapped[3]
    data = encode_offset_index(swapped, 0)
    problems = check_offset_index(parse_offset_index(data, 0, "i"), scan, "/data/golden-rf3-0/0.index")
    assert kinds(problems) == [
        IndexProblemKind.OFFSET_NOT_INCREASING,
        IndexProblemKind.POSITION_NOT_INCREASING,
    ]
    assert all(p.corrupt for p in problems) and problems[0].entry == 4
    assert "not greater than the previous" in str(problems[0]) and "/data/golden-rf3-0/0.index" in str(
        problems[0]
    )


def test_offset_index_entries_must_point_at_their_batch() -> None:
    index, _, scan = golden_index()
    base_entry = index.entries[0]  # offset 411 at 65299 (batch 206..411)
    cases = {
        OffsetIndexEntry(411, 65300): IndexProblemKind.POSITION_NOT_AT_BATCH,
        OffsetIndexEntry(205, 65299): IndexProblemKind.OFFSET_BEFORE_BATCH,
        OffsetIndexEntry(206, 65299): IndexProblemKind.OFFSET_INSIDE_BATCH,  # a 0.11-1.1 broker's entry
        OffsetIndexEntry(617, 65299): IndexProblemKind.MULTI_BATCH_APPEND,
        OffsetIndexEntry(412, 65299): IndexProblemKind.OFFSET_INSIDE_BATCH,
        OffsetIndexEntry(411, 1021883): IndexProblemKind.POSITION_PAST_END,
    }
    for entry, kind in cases.items():
        problems = check_offset_index(OffsetIndex(0, (entry,)), scan, "i")
        assert kinds(problems) == [kind], entry
    assert not kinds(check_offset_index(OffsetIndex(0, (base_entry,)), scan, "i"))
    assert kinds(check_offset_index(OffsetIndex(10, (OffsetIndexEntry(9, 65299),)), scan, "i"))[0] is (
        IndexProblemKind.OFFSET_BELOW_BASE
    )
    assert IndexProblemKind.OFFSET_PAST_LOG_END in kinds(
        check_offset_index(OffsetIndex(0, (OffsetIndexEntry(5000, 65299),)), scan, "i")
    )
    assert not IndexProblemKind.MULTI_BATCH_APPEND.corrupt and IndexProblemKind.OFFSET_BEFORE_BATCH.corrupt


def test_time_index_problems() -> None:
    _, time_index, scan = golden_index()
    entries = list(time_index.entries)
    equal = [*entries[:2], dataclasses.replace(entries[2], timestamp=entries[1].timestamp), *entries[3:]]
    assert kinds(check_time_index(TimeIndex(0, tuple(equal)), scan, "t")) == [
        IndexProblemKind.TIMESTAMP_NOT_INCREASING,
        IndexProblemKind.TIMESTAMP_MISMATCH,
    ]
    backwards = [entries[0], dataclasses.replace(entries[1], offset=300), *entries[2:]]
    assert IndexProblemKind.TIME_OFFSET_DECREASING in kinds(
        check_time_index(TimeIndex(0, tuple(backwards)), scan, "t")
    )
    outside = [*entries, TimeIndexEntry(entries[-1].timestamp + 1, 10_000)]
    assert kinds(check_time_index(TimeIndex(0, tuple(outside)), scan, "t")) == [
        IndexProblemKind.TIME_OFFSET_NOT_IN_LOG
    ]


# --------------------------------------------------------------------------------------------
# LogSegmentWriter
# --------------------------------------------------------------------------------------------


def batch_of(base: int, count: int, timestamp: int, value_size: int = 1000) -> bytes:
    return encode_record_batch(
        [Record(base + i, timestamp + (i % 2), f"k{i}".encode(), bytes(value_size)) for i in range(count)]
    )


def test_writer_indexes_like_a_broker() -> None:
    writer = LogSegmentWriter(base_offset=100)
    writer.append(batch_of(100, 3, 10))  # ~3 KB at position 0: never indexed
    writer.append(batch_of(103, 3, 20))  # 3 KB since the last entry: not > 4096, no entry
    first_indexed = len(writer.log)
    writer.append(batch_of(106, 3, 15))  # 6 KB since: indexed; time entry for max so far (21 @ 104)
    writer.append(batch_of(109, 2, 30, value_size=100))  # 3 KB since: no entry
    writer.append(batch_of(111, 5, 40))  # 3.3 KB since: no entry
    assert writer.offset_entries == [OffsetIndexEntry(108, first_indexed)]
    assert writer.time_entries == [TimeIndexEntry(21, 105)]
    writer.close()  # roll/close: the final entry for the max timestamp so far (41 @ 115)
    assert writer.time_entries[-1] == TimeIndexEntry(41, 115)
    files = writer.files()
    assert set(files) == {
        "00000000000000000100.log",
        "00000000000000000100.index",
        "00000000000000000100.timeindex",
    }
    assert files["00000000000000000100.index"] == encode_offset_index(writer.offset_entries, 100)
    scan = scan_log(files["00000000000000000100.log"], "w")
    assert not check_offset_index(
        parse_offset_index(files["00000000000000000100.index"], 100, "i"), scan, "i"
    )
    assert not check_time_index(
        parse_time_index(files["00000000000000000100.timeindex"], 100, "t"), scan, "t"
    )


def test_writer_leader_rule_and_preallocation() -> None:
    writer = LogSegmentWriter(0, time_index_offsets=TimeIndexOffsetRule.MAX_TIMESTAMP_RECORD)
    writer.append(batch_of(0, 5, 10))
    writer.append(batch_of(5, 5, 20))  # timestamps 20,21,20,21,20: first max at offset 6
    assert writer.time_entries == [TimeIndexEntry(21, 6)]
    files = writer.files()  # open segment: preallocated
    assert len(files["00000000000000000000.index"]) == OFFSET_INDEX_SIZE
    assert len(files["00000000000000000000.timeindex"]) == TIME_INDEX_SIZE
    assert parse_time_index(files["00000000000000000000.timeindex"], 0, "t").entries == (
        TimeIndexEntry(21, 6),
    )


def test_writer_multi_batch_follower_append_and_rejections() -> None:
    writer = LogSegmentWriter(0)
    writer.append(batch_of(0, 5, 10))
    chunk = batch_of(5, 2, 20) + batch_of(7, 2, 30)  # one fetch response, two batches
    writer.append(chunk)
    assert writer.offset_entries == [OffsetIndexEntry(8, len(batch_of(0, 5, 10)))]  # chunk's last offset
    scan = scan_log(writer.log_bytes(), "w")
    problems = check_offset_index(OffsetIndex(0, tuple(writer.offset_entries)), scan, "i")
    assert kinds(problems) == [IndexProblemKind.MULTI_BATCH_APPEND]
    with pytest.raises(RecordFormatError, match="whole batches"):
        writer.append(batch_of(9, 2, 40)[:-1])
    with pytest.raises(RecordFormatError, match="int32"):
        writer.append(encode_record_batch([Record(2**31 + 1, 1, None, b"x")]))
    writer.append(batch_of(9, 5, 40))
    writer.append(batch_of(14, 5, 50))
    with pytest.raises(RecordFormatError, match="InvalidOffsetException"):
        writer.append(batch_of(3, 5, 60))
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.append(batch_of(30, 1, 70))


def test_rebuild_stops_where_recovery_truncates() -> None:
    data, batches = small_log()
    corrupt = bytearray(data)
    corrupt[batches[2].position + 30] ^= 0xFF
    writer = rebuild_indexes(bytes(corrupt), 0, "s", index_interval_bytes=100)
    assert len(writer.log) == batches[2].position
    assert writer.offset_entries == [OffsetIndexEntry(5, batches[1].position)]
    struct.pack_into(">i", corrupt, batches[2].position + 8, 3)  # a corrupt size instead
    assert len(rebuild_indexes(bytes(corrupt), 0, "s").log) == batches[2].position
    unchecked = scan_log(data, "s", verify_crc=False)
    assert [e.crc_valid for e in unchecked.entries] == [None, None, None]


def test_full_index_without_zero_tail() -> None:
    entries = [OffsetIndexEntry(i + 1, 100 * (i + 1)) for i in range(5_000)]
    index = parse_offset_index(encode_offset_index(entries, 0), 0, "i")
    assert len(index.entries) == 5_000 and index.tail_entries == 0
    times = [TimeIndexEntry(1000 + i, i) for i in range(3)]
    assert parse_time_index(encode_time_index(times, 0), 0, "t").entries == tuple(
        times
    )  # offset 0 at i=0 kept
