"""The pre-restart scan's core: the scanner (the very code the broker host runs) on real Kafka 3.3.1
golden log dirs and on simulated brokers (nothing to report), on hand-built damage (each found with
its segment, offsets and bytes), and the version rules that turn it into a verdict."""

from __future__ import annotations

import os
import shutil
import struct
import threading
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.log_scan import (
    Budget,
    Skipped,
    crc32c,
    open_regular,
    scan_partition,
    select_crc,
    walk_log,
)
from airflow_provider_kafka_zk.kafka.log_scan_rules import (
    SegmentRow,
    Verdict,
    index_rule,
    judge_broker,
    segment_rows,
)
from airflow_provider_kafka_zk.kafka.records import LogSegmentWriter, Record, encode_record_batch
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.testing.simulator import healthy_cluster
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts

GOLDEN = Path(__file__).parents[1] / "fixtures" / "real-kafka-3.3.1"
V331 = KafkaVersion.parse("3.3.1")
V011 = KafkaVersion.parse("0.11.0.2")


def _partition_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("*.log") if p.parent.name.rsplit("-", 1)[-1].isdigit())


def _rows(
    directory: Path, broker_id: int = 0, recovery_point=None, rule="last", clean_shutdown=None, **kwargs
) -> list[SegmentRow]:
    topic, partition = directory.name.rsplit("-", 1)
    scan = scan_partition(str(directory), recovery_point, index_rule=rule, **kwargs)
    return segment_rows(
        broker_id,
        str(directory.parent),
        topic,
        int(partition),
        scan,
        recovery_point=recovery_point,
        clean_shutdown=clean_shutdown,
    )


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value


@pytest.mark.parametrize("name", ["crc32c module", "libext2fs", "python"])
def test_every_crc_implementation_the_host_may_use_agrees_with_the_crc32c_package(name):
    """The broker host runs the fastest it has (the ``crc32c`` package, libext2fs through ctypes,
    else the vectorised pure-Python one): each must give the package's value on every length and
    offset, or a sound batch would read as corrupt."""
    import crc32c as package

    chosen, function = select_crc(name)
    if chosen != name:
        pytest.skip(f"{name} is not on this machine")
    for size in (0, 1, 7, 8, 9, 61, 63, 64, 65, 100, 4097, 16_384, 100_003):
        data = os.urandom(size + 10)
        assert function(data, 5, 5 + size) == package.crc32c(data[5 : 5 + size]), (name, size)


def test_nothing_reported_on_the_real_kafka_3_3_1_log_dirs():
    dirs = _partition_dirs(GOLDEN)
    assert len(dirs) >= 30
    for directory in dirs:
        rows = _rows(directory, verify_crc=True, walk_all=True)
        judged = judge_broker(rows, version=V331, running=True)
        assert judged.findings == [], (directory, judged.findings)
        assert all(r.walk and r.walk["stop"] is None for r in rows)


@pytest.mark.parametrize("version", ["2.8.2", "3.3.1"])
def test_nothing_reported_on_healthy_simulated_brokers(tmp_path, version):
    cluster = healthy_cluster(kafka_version=version)
    hosts = write_broker_hosts(cluster, tmp_path, "127.0.0.1:2181")
    for broker_id, host in hosts.items():
        rows = [
            r for d in _partition_dirs(host.root) for r in _rows(d, broker_id, verify_crc=True, walk_all=True)
        ]
        assert rows
        judged = judge_broker(rows, version=KafkaVersion.parse(version), running=True)
        assert judged.findings == [] and judged.verdict is Verdict.RESTARTS_CLEAN, judged.findings


def test_a_non_monotonic_index_below_the_recovery_point_stays_on_3_3_and_is_rebuilt_at_load_on_2_2(tmp_path):
    closed, _active = _two_segments(tmp_path / "payments-0")
    index = closed.with_suffix(".index")
    entries = index.read_bytes()
    index.write_bytes(entries[8:16] + entries[:8] + entries[16:])  # entries 0 and 1 swapped
    rows = _rows(tmp_path / "payments-0", 0, recovery_point=400)
    problems = [p for r in rows for p in r.index["problems"]]
    assert problems and problems[0]["kind"] == "index_not_monotonic" and problems[0]["entry"] == 1
    assert problems[0]["file"] == "00000000000000000000.index"
    judged = judge_broker(rows, version=V331, running=True)
    [finding] = [f for f in judged.findings if f.kind == "index-damaged"]
    assert (
        finding.severity == "error" and "does not check offset or time indexes at startup" in finding.summary
    )
    assert "stays until the index is removed" in finding.summary
    assert finding.file.endswith("payments-0/00000000000000000000.index")
    assert [r.action for r in finding.remedies] == ["remove_indexes"]
    # 2.2: its sanity check reads only the last entry and the size -- a swap in the middle passes, so
    # the damage stays there too (OffsetIndex.sanityCheck, 2.0.0)
    older = judge_broker(rows, version=KafkaVersion.parse("2.2.1"), running=True)
    assert {f.severity for f in older.findings if f.kind == "index-damaged"} == {"error"}
    # an index whose last offset is below its base fails 2.2's check: rebuilt at load, information
    broken = bytearray(index.read_bytes())
    broken[-8:-4] = struct.pack(">i", -5)
    index.write_bytes(bytes(broken))
    rows = _rows(tmp_path / "payments-0", 0, recovery_point=400)
    older = judge_broker(rows, version=KafkaVersion.parse("2.2.1"), running=True)
    assert {f.severity for f in older.findings if f.kind == "index-damaged"} == {"info"}


# ---------------------------------------------------------------------------------------------
# hand-built damage: the seed's repeated offset, a torn tail, a corrupt batch
# ---------------------------------------------------------------------------------------------


def _batch(base: int, count: int = 40, size: int = 120) -> bytes:
    records = [Record(o, 1_700_000_000_000 + o, b"k", b"v" * size) for o in range(base, base + count)]
    return encode_record_batch(records, partition_leader_epoch=0)


def _segment(
    directory: Path, batches: list[bytes], *, index: bool = True, preallocated: bool = False
) -> None:
    """A segment as a broker wrote it (indexes by the live-append rule); ``preallocated``: the
    active segment's indexes of a running or crashed broker (zero tail)."""
    directory.mkdir(parents=True, exist_ok=True)
    writer = LogSegmentWriter(0)
    for b in batches:
        writer.append(b)
    if not preallocated:
        writer.close()
    (directory / "00000000000000000000.log").write_bytes(writer.log_bytes())
    if index:
        (directory / "00000000000000000000.index").write_bytes(
            writer.offset_index_bytes(preallocate=preallocated)
        )
    (directory / "00000000000000000000.timeindex").write_bytes(
        writer.time_index_bytes(preallocate=preallocated)
    )


def _repeat_last_batch(directory: Path, times: int = 2) -> int:
    """The seed's case: after an unclean shutdown the log holds a batch again (same offsets).
    Returns the byte where the first copy starts."""
    log = directory / "00000000000000000000.log"
    data = log.read_bytes()
    pos, last = 0, 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        last, pos = pos, pos + size
    log.write_bytes(data + data[last:] * times)
    return len(data)


def test_the_walk_names_the_exception_offset_and_where_a_remedy_cuts(tmp_path):
    directory = tmp_path / "orders-0"
    _segment(directory, [_batch(i * 40) for i in range(12)])
    first_copy = _repeat_last_batch(directory)
    walk = walk_log(str(directory / "00000000000000000000.log"), index_rule="last")
    stop = walk["stop"]
    # OffsetIndex.append(batch.lastOffset): "Attempt to append an offset (479) ... (479)"
    assert (stop["kind"], stop["offset"], stop["last_indexed"], stop["batch_offset"]) == (
        "invalid_offset",
        479,
        479,
        440,
    )
    # the walk went on past it: the whole segment is known
    assert (
        walk["complete"]
        and walk["batches"] == 14
        and walk["last_offset"] == 479
        and walk["max_offset"] == 479
    )
    assert walk["first_bad"] == {
        "kind": "offsets_backwards",
        "position": first_copy,
        "offset": 440,
        "last_offset": 479,
        "previous_max": 479,
    }
    assert walk["kept"] == {
        "batches": 12,
        "records": 480,
        "min_offset": 0,
        "max_offset": 479,
        "last_offset": 479,
        "bytes": first_copy,
    }
    assert walk["dropped"]["batches"] == 2 and walk["dropped"]["min_offset"] == 440
    assert walk["dropped"]["bytes"] == walk["size"] - first_copy


def test_the_seeds_repeated_offset_empties_the_segment_after_a_crash_and_is_fatal_without_its_index(tmp_path):
    directory = tmp_path / "orders-0"
    _segment(directory, [_batch(i * 40) for i in range(12)], preallocated=True)
    first_copy = _repeat_last_batch(directory)
    size = (directory / "00000000000000000000.log").stat().st_size
    # the index is there: a clean restart keeps the segment as it is; after a crash recovery empties
    # it (3.3.1: InvalidOffsetException caught in LogLoader.recoverLog, segment.truncateTo(base))
    rows = _rows(directory, 1, recovery_point=0, clean_shutdown=False)
    judged = judge_broker(
        rows, version=V331, running=False, isr={("orders", 0): (1, 2)}, leaders={("orders", 0): 2}
    )
    assert judged.verdict is Verdict.LOSES_DATA_IF_UNCLEAN
    [finding] = [f for f in judged.findings if f.kind == "recovery-loses-data"]
    assert (finding.lost_first, finding.lost_end, finding.bytes_at_risk) == (0, 480, size)
    assert "offsets 0..479" in finding.summary and "truncates segment 0 to its base offset" in finding.summary
    assert [r.action for r in finding.remedies] == ["refetch", "truncate"]
    assert "re-fetches orders-0 from the leader (broker 2" in finding.remedies[0].summary
    [cut] = [r for r in finding.remedies if r.action == "truncate"]
    assert cut.commands[0] == f"truncate -s {first_copy} {directory}/00000000000000000000.log"
    assert (cut.keeps[0].first_offset, cut.keeps[0].last_offset, cut.keeps[0].end_byte) == (
        0,
        479,
        first_copy,
    )
    assert cut.log_end_after == 480
    # without its .index the rebuild happens at load, where the exception is not caught
    (directory / "00000000000000000000.index").unlink()
    judged = judge_broker(
        _rows(directory, 1, recovery_point=10**9, clean_shutdown=True),
        version=V331,
        running=False,
        isr={("orders", 0): (1,)},
    )
    assert judged.verdict is Verdict.FAILS_RECOVERY
    assert judged.describe().startswith("broker 1 will fail recovery at ")
    assert judged.failing_segment.endswith("orders-0/00000000000000000000.log")
    [finding] = [f for f in judged.findings if f.kind == "recovery-fails"]
    assert finding.severity == "critical" and [r.action for r in finding.remedies] == ["truncate"]  # RF=1
    assert finding.remedies[0].commands[0] == f"truncate -s {first_copy} {directory}/00000000000000000000.log"
    assert "Exiting Kafka due to fatal exception during startup." in finding.kafka_log[-1]


def test_0_11_rules_a_crash_rebuilds_the_zero_tailed_active_index_at_load_so_the_repeat_is_fatal(tmp_path):
    directory = tmp_path / "orders-0"
    _segment(directory, [_batch(i * 40) for i in range(12)], preallocated=True)
    _repeat_last_batch(directory)
    rows = _rows(directory, 3, recovery_point=10**9, rule=index_rule(V011))
    assert index_rule(V011) == "first" and index_rule(V331) == "last"
    judged = judge_broker(rows, version=V011, running=True, isr={("orders", 0): (3, 4)})
    assert judged.verdict is Verdict.FAILS_RECOVERY and "an unclean restart" in judged.describe()
    # the same bytes on a 2.3+ broker: only an unclean restart loses data, and only that segment's
    assert judge_broker(_rows(directory, 3, recovery_point=0), version=V331, running=True).verdict is (
        Verdict.LOSES_DATA_IF_UNCLEAN
    )


def test_torn_and_corrupt_tails_name_the_byte_and_the_loss(tmp_path):
    directory = tmp_path / "events-0"
    batches = [_batch(i * 40) for i in range(6)]
    _segment(directory, batches, preallocated=True)
    log = directory / "00000000000000000000.log"
    whole = log.read_bytes()
    log.write_bytes(whole[:-50])  # the last batch cut off
    walk = walk_log(str(log), index_rule="last")
    assert walk["stop"]["kind"] == "torn_tail" and walk["stop"]["position"] == len(whole) - len(batches[-1])
    judged = judge_broker(
        _rows(directory, 0, recovery_point=0, clean_shutdown=False), version=V331, running=False
    )
    [finding] = [f for f in judged.findings if f.kind == "recovery-truncates-tail"]
    assert (
        finding.position == len(whole) - len(batches[-1]) and finding.bytes_at_risk == len(batches[-1]) - 50
    )
    assert "no offset is lost" in finding.summary
    # while the broker runs, the active segment's last batch may be a write in flight
    running = judge_broker(_rows(directory, 0, recovery_point=0), version=V331, running=True)
    assert [f.kind for f in running.findings] == ["active-segment-in-flight"]
    # a torn write with the length intact: zeroed record bytes, caught by the last batch's CRC; the
    # whole last batch is lost after a crash (offsets 200..239)
    broken = bytearray(whole)
    broken[-40:] = bytes(40)
    log.write_bytes(bytes(broken))
    walk = walk_log(str(log), index_rule="last")
    assert walk["stop"]["kind"] == "corrupt_batch" and walk["stop"]["is_last"]
    judged = judge_broker(
        _rows(directory, 0, recovery_point=0, clean_shutdown=False), version=V331, running=False
    )
    [finding] = [f for f in judged.findings if f.kind == "recovery-loses-data"]
    assert (finding.lost_first, finding.lost_end, finding.bytes_at_risk) == (200, 240, len(batches[-1]))


def test_the_byte_budget_stops_the_scan_and_says_so(tmp_path):
    directory = tmp_path / "big-0"
    _segment(directory, [_batch(i * 40) for i in range(30)])
    budget = Budget(2000)
    scan = scan_partition(str(directory), 0, index_rule="last", budget=budget)
    segment = scan["segments"][0]
    stop = (segment.get("walk") or {}).get("stop") or {}
    assert stop.get("kind") == "budget" or "byte budget" in (segment.get("skipped") or "")
    assert budget.exhausted
    rows = segment_rows(0, str(tmp_path), "big", 0, scan, recovery_point=0, clean_shutdown=False)
    judged = judge_broker(rows, version=V331, running=False)
    assert judged.partial or any(f.kind == "prediction-unknown" for f in judged.findings)


def test_symlinked_segment_files_are_reported_not_followed(tmp_path):
    directory = tmp_path / "orders-1"
    _segment(directory, [_batch(i * 40) for i in range(3)])
    target = tmp_path / "elsewhere.log"
    shutil.move(directory / "00000000000000000000.log", target)
    os.symlink(target, directory / "00000000000000000000.log")
    rows = _rows(directory)
    assert rows[0].problems[0]["kind"] == "symlink" and rows[0].walk is None
    assert "symlink" in rows[0].skipped


# ---------------------------------------------------------------------------------------------
# the scanner opens regular files only and never blocks (issue 23)
# ---------------------------------------------------------------------------------------------


def _in_thread(fn, timeout: float = 20.0):
    """Run ``fn`` in a thread; the test fails (instead of hanging) if it does not return in time."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the scan blocked"
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_a_fifo_named_like_a_time_index_is_skipped_without_blocking(tmp_path):
    _closed, active = _two_segments(tmp_path / "orders-2")
    timeindex = active.with_suffix(".timeindex")
    timeindex.unlink()
    os.mkfifo(timeindex)
    # the damage without the guard: a plain open() waits for a writer (the scan's old 1800 s stall)
    blocked = threading.Thread(target=lambda: open(timeindex, "rb").close(), daemon=True)
    blocked.start()
    blocked.join(1.0)
    assert blocked.is_alive()
    os.close(os.open(timeindex, os.O_WRONLY | os.O_NONBLOCK))  # let it go
    blocked.join(5.0)
    scan = _in_thread(lambda: scan_partition(str(tmp_path / "orders-2"), 0, index_rule="last", walk_all=True))
    assert {"file": timeindex.name, "reason": "a FIFO: not read"} in scan["skipped"]
    record = scan["segments"][-1]
    assert record["timeindex"]["skipped"] == "a FIFO: not read" and record["walk"]["stop"] is None
    rows = segment_rows(0, str(tmp_path), "orders", 2, scan, recovery_point=0, clean_shutdown=False)
    judged = judge_broker(rows, version=V331, running=False)
    [finding] = [f for f in judged.findings if f.kind == "not-read"]
    assert timeindex.name in finding.summary and judged.partial


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink_to_fifo", "char_device"])
def test_files_that_are_not_regular_are_never_opened_for_reading(tmp_path, kind):
    path = tmp_path / "00000000000000000000.index"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink_to_fifo":
        os.mkfifo(tmp_path / "pipe")
        os.symlink(tmp_path / "pipe", path)
    else:
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("mknod needs root")
    with pytest.raises(Skipped) as refused:
        _in_thread(lambda: open_regular(str(path)))
    assert "not read" in str(refused.value)


def test_each_file_and_the_whole_scan_are_bounded_in_time(tmp_path):
    directory = tmp_path / "slow-0"
    _segment(directory, [_batch(i * 40) for i in range(200)])
    now = [0.0]

    def clock() -> float:  # every look at the clock costs a second
        now[0] += 1.0
        return now[0]

    budget = Budget(file_seconds=3, clock=clock)
    walk = walk_log(str(directory / "00000000000000000000.log"), index_rule="last", budget=budget)
    assert walk["stop"]["kind"] == "time" and not walk["complete"]
    assert "per-file time limit of 3s" in walk["stop"]["detail"]
    # the whole scan's limit: the segments after it are reported as not read, with the reason
    _two_segments(tmp_path / "more-0")
    now[0] = 0.0
    scan = scan_partition(
        str(tmp_path / "more-0"), 0, index_rule="last", budget=Budget(deadline=1.5, clock=clock)
    )
    first, second = scan["segments"]
    assert first["walk"]["stop"] is None and "skipped" not in first
    assert second["skipped"] == "the scan's time limit was reached" and "walk" not in second
    assert scan["stopped"] == "the scan's time limit was reached"
    rows = segment_rows(0, str(tmp_path), "more", 0, scan, recovery_point=0, clean_shutdown=False)
    judged = judge_broker(rows, version=V331, running=False)
    assert judged.partial and any(f.kind == "not-read" for f in judged.findings)


def _two_segments(directory: Path) -> tuple[Path, Path]:
    """A closed segment (trimmed indexes) and an active one, as a 2.0+ broker leaves them."""
    directory.mkdir(parents=True)
    stems = []
    offset = 0
    for _ in range(2):
        writer = LogSegmentWriter(offset)
        for _ in range(10):
            writer.append(_batch(offset))
            offset += 40
        writer.close()
        stem = directory / f"{writer.base_offset:020d}"
        stem.with_suffix(".log").write_bytes(writer.log_bytes())
        stem.with_suffix(".index").write_bytes(writer.offset_index_bytes())
        stem.with_suffix(".timeindex").write_bytes(writer.time_index_bytes())
        stems.append(stem)
    return stems[0], stems[1]


def test_untrimmed_odd_sized_and_emptied_indexes(tmp_path):
    closed, _active = _two_segments(tmp_path / "t-0")
    index = closed.with_suffix(".index")
    # an inactive segment's index left at its preallocated size (never trimmed after a crash)
    os.truncate(index, 10485760)
    rows = _rows(tmp_path / "t-0", recovery_point=400)
    assert rows[0].index["zero_tail"] > 0 and [p["kind"] for p in rows[0].index["problems"]] == [
        "index_untrimmed"
    ]
    assert judge_broker(rows, version=V331, running=True).findings[0].severity == "warning"
    # a size that is not a multiple of the entry size: 0.11-2.2 rebuild it at load, 2.3+ never check
    trimmed = index.read_bytes()[: 8 * 3] + b"\x00\x01\x02"
    index.write_bytes(trimmed)
    rows = _rows(tmp_path / "t-0", recovery_point=400)
    assert "index_size" in [p["kind"] for p in rows[0].index["problems"]]
    assert {
        f.severity for f in judge_broker(rows, version=KafkaVersion.parse("2.2.1"), running=True).findings
    } == {"info"}
    assert "error" in {f.severity for f in judge_broker(rows, version=V331, running=True).findings}
    # an index emptied while its log holds far more than one appended chunk
    big = tmp_path / "big-0"
    big.mkdir()
    writer = LogSegmentWriter(0)
    offset = 0
    while len(writer.log) < 9 * 1024 * 1024:
        writer.append(_batch(offset, count=100, size=1000))
        offset += 100
    writer.close()
    (big / "00000000000000000000.log").write_bytes(writer.log_bytes())
    (big / "00000000000000000000.index").write_bytes(b"")
    (big / "00000000000000000000.timeindex").write_bytes(writer.time_index_bytes())
    [row] = _rows(big, recovery_point=10**9)
    assert [p["kind"] for p in row.index["problems"]] == ["index_empty"]
    # a missing .index instead: the next start rebuilds it (the log is sound): nothing to report
    (big / "00000000000000000000.index").unlink()
    assert judge_broker(_rows(big, recovery_point=10**9), version=V331, running=True).findings == []
    # the same log cut short after a crash: the recovery truncates it, naming the bytes
    log = big / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-777])
    judged = judge_broker(_rows(big, recovery_point=0, clean_shutdown=False), version=V331, running=False)
    [finding] = [f for f in judged.findings if f.kind == "recovery-truncates-tail"]
    assert finding.bytes_at_risk and finding.position
