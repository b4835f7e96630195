"""The pre-restart scan's core: the scanner (the very code the broker host runs) on real Kafka 3.3.1
golden log dirs and on simulated brokers (nothing to report), on hand-built damage (each found with
its segment, offsets and bytes), and the version rules that turn it into a verdict."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.log_scan import Budget, crc32c, scan_partition, walk_log
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
    directory: Path, broker_id: int = 0, recovery_point=None, rule="last", **kwargs
) -> list[SegmentRow]:
    topic, partition = directory.name.rsplit("-", 1)
    scan = scan_partition(str(directory), recovery_point, index_rule=rule, **kwargs)
    return segment_rows(broker_id, str(directory.parent), topic, int(partition), scan)


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value


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


def test_a_non_monotonic_index_is_found_with_its_entry_and_survives_restarts_on_3_3(tmp_path):
    cluster = healthy_cluster()
    d = next(d for d in cluster.replica_dirs("payments.v1-events", 0) if d.partition == 0)
    cluster.corrupt_offset_index(0, "payments.v1-events", d.partition)
    hosts = write_broker_hosts(cluster, tmp_path, "127.0.0.1:2181")
    directory = next(p for p in _partition_dirs(hosts[0].root) if p.name == "payments.v1-events-0")
    rows = _rows(directory, 0, recovery_point=10**9)
    problems = [p for r in rows for p in r.index["problems"]]
    assert problems and problems[0]["kind"] in ("index_not_monotonic", "index_entry_mismatch")
    assert problems[0]["file"] == "00000000000000000000.index" and "entry" in problems[0]
    judged = judge_broker(rows, version=V331, running=True)
    [finding] = [f for f in judged.findings if f.kind == "index-damaged"]
    assert finding.severity == "error" and "does not check this at startup" in finding.summary
    assert finding.file.endswith("payments.v1-events-0/00000000000000000000.index")
    assert "remove" in finding.remedy and "rebuilds a missing index" in finding.remedy
    # on 2.2 the startup check would rebuild it instead: information only
    older = judge_broker(rows, version=KafkaVersion.parse("2.2.1"), running=True)
    assert {f.severity for f in older.findings if f.kind == "index-damaged"} == {"info"}


# ---------------------------------------------------------------------------------------------
# hand-built damage: the seed's repeated offset, a torn tail, a corrupt batch
# ---------------------------------------------------------------------------------------------


def _batch(base: int, count: int = 40, size: int = 120) -> bytes:
    records = [Record(o, 1_700_000_000_000 + o, b"k", b"v" * size) for o in range(base, base + count)]
    return encode_record_batch(records, partition_leader_epoch=0)


def _segment(directory: Path, batches: list[bytes], rule: str = "last", *, index: bool = True) -> None:
    """A segment as a broker wrote it (indexes by the live-append rule), then raw extra batches."""
    directory.mkdir(parents=True, exist_ok=True)
    writer = LogSegmentWriter(0)
    for b in batches:
        writer.append(b)
    writer.close()
    (directory / "00000000000000000000.log").write_bytes(writer.log_bytes())
    if index:
        (directory / "00000000000000000000.index").write_bytes(writer.offset_index_bytes())
    (directory / "00000000000000000000.timeindex").write_bytes(writer.time_index_bytes())


def _repeat_last_batch(directory: Path, times: int = 2) -> None:
    """The seed's case: after an unclean shutdown the log holds a batch again (same offsets)."""
    log = directory / "00000000000000000000.log"
    data = log.read_bytes()
    # the last batch: walk from the start
    pos, last = 0, 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        last, pos = pos, pos + size
    log.write_bytes(data + data[last:] * times)


def test_the_seeds_repeated_offset_stops_the_rebuild_and_the_verdict_says_the_broker_will_not_start(tmp_path):
    directory = tmp_path / "orders-0"
    _segment(directory, [_batch(i * 40) for i in range(12)])
    _repeat_last_batch(directory)
    walk = walk_log(str(directory / "00000000000000000000.log"), index_rule="last")
    assert walk["stop"]["kind"] == "invalid_offset" and walk["stop"]["offset"] == 440
    # the index is there: a clean restart does not rebuild it; after a crash recovery truncates the
    # whole segment to its base offset (3.3.1: caught in recoverLog)
    rows = _rows(directory, 1, recovery_point=0)
    judged = judge_broker(
        rows, version=V331, running=False, isr={("orders", 0): (1, 2)}, leaders={("orders", 0): 2}
    )
    assert judged.verdict is Verdict.LOSES_DATA_IF_UNCLEAN
    [finding] = [f for f in judged.findings if f.kind == "recovery-truncates-segment"]
    assert "offsets 0..479 lost" in finding.summary and finding.offset == 440
    assert "re-fetches orders-0 from the leader (broker 2" in finding.remedy
    # without its .index the rebuild happens at load, where the exception is not caught
    (directory / "00000000000000000000.index").unlink()
    judged = judge_broker(
        _rows(directory, 1, recovery_point=10**9), version=V331, running=False, isr={("orders", 0): (1,)}
    )
    assert judged.verdict is Verdict.FAILS_RECOVERY
    assert judged.describe().startswith(
        "broker 1 will fail recovery at "
    ) and judged.failing_segment.endswith("orders-0/00000000000000000000.log")
    [finding] = [f for f in judged.findings if f.kind == "recovery-fails"]
    assert finding.severity == "critical" and "truncate -s" in finding.remedy  # RF=1: no replica to copy


def test_0_11_rules_a_crash_always_rebuilds_the_active_index_so_the_repeat_is_fatal(tmp_path):
    directory = tmp_path / "orders-0"
    _segment(directory, [_batch(i * 40) for i in range(12)])
    _repeat_last_batch(directory)
    rows = _rows(directory, 3, recovery_point=10**9, rule=index_rule(V011))
    assert index_rule(V011) == "first" and index_rule(V331) == "last"
    judged = judge_broker(rows, version=V011, running=True, isr={("orders", 0): (3, 4)})
    assert judged.verdict is Verdict.FAILS_RECOVERY
    # the same bytes on a 2.0+ broker that keeps its index: only an unclean restart loses data
    assert judge_broker(_rows(directory, 3, recovery_point=0), version=V331, running=True).verdict is (
        Verdict.LOSES_DATA_IF_UNCLEAN
    )


def test_torn_and_corrupt_tails_name_the_byte_and_the_loss(tmp_path):
    directory = tmp_path / "events-0"
    batches = [_batch(i * 40) for i in range(6)]
    _segment(directory, batches)
    log = directory / "00000000000000000000.log"
    whole = log.read_bytes()
    log.write_bytes(whole[:-50])  # the last batch cut off
    walk = walk_log(str(log), index_rule="last")
    assert walk["stop"]["kind"] == "torn_tail" and walk["stop"]["position"] == len(whole) - len(batches[-1])
    judged = judge_broker(_rows(directory, 0, recovery_point=0), version=V331, running=False)
    [finding] = [f for f in judged.findings if f.kind == "recovery-truncates"]
    assert (
        finding.position == len(whole) - len(batches[-1]) and finding.bytes_at_risk == len(batches[-1]) - 50
    )
    # while the broker runs, the active segment's last batch may be a write in flight
    running = judge_broker(_rows(directory, 0, recovery_point=0), version=V331, running=True)
    assert [f.kind for f in running.findings] == ["active-segment-in-flight"]
    # a torn write with the length intact: zeroed record bytes, caught by the last batch's CRC
    broken = bytearray(whole)
    broken[-40:] = bytes(40)
    log.write_bytes(bytes(broken))
    assert walk_log(str(log), index_rule="last")["stop"]["kind"] == "corrupt_batch"


def test_the_byte_budget_stops_the_walk_and_says_so(tmp_path):
    directory = tmp_path / "big-0"
    _segment(directory, [_batch(i * 40) for i in range(30)])
    budget = Budget(2000)
    scan = scan_partition(str(directory), 0, index_rule="last", budget=budget)
    stop = scan["segments"][0]["walk"]["stop"]
    assert stop["kind"] == "budget" and budget.exhausted


def test_symlinked_segment_files_are_reported_not_followed(tmp_path):
    directory = tmp_path / "orders-1"
    _segment(directory, [_batch(i * 40) for i in range(3)])
    target = tmp_path / "elsewhere.log"
    shutil.move(directory / "00000000000000000000.log", target)
    os.symlink(target, directory / "00000000000000000000.log")
    rows = _rows(directory)
    assert rows[0].problems[0]["kind"] == "symlink" and rows[0].walk is None


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
    rows = _rows(tmp_path / "t-0", recovery_point=10**9)
    assert rows[0].index["zero_tail"] > 0 and [p["kind"] for p in rows[0].index["problems"]] == [
        "index_untrimmed"
    ]
    assert judge_broker(rows, version=V331, running=True).findings[0].severity == "warning"
    # a size that is not a multiple of the entry size: 0.11-2.2 rebuild it at load, 2.3+ never check
    trimmed = index.read_bytes()[: 8 * 3] + b"\x00\x01\x02"
    index.write_bytes(trimmed)
    rows = _rows(tmp_path / "t-0", recovery_point=10**9)
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
    # a missing .index instead: the next start rebuilds it (the log is sound): indexes to rebuild
    (big / "00000000000000000000.index").unlink()
    assert judge_broker(_rows(big, recovery_point=10**9), version=V331, running=True).findings == []
    # the same log cut short after a crash: the recovery truncates it, naming the bytes
    log = big / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-777])
    judged = judge_broker(_rows(big, recovery_point=0), version=V331, running=False)
    [finding] = [f for f in judged.findings if f.kind == "recovery-truncates"]
    assert finding.bytes_at_risk and finding.position and finding.offset is not None
