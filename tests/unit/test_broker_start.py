"""Golden cases of a broker's start: the product's prediction (the header-walking scanner and the
one model of :mod:`airflow_provider_kafka_zk.kafka.broker_start`) against the simulator's start,
which applies Kafka's ``LogLoader``/``LogSegment.recover`` to the same files independently (full
record reader, real truncation and deletion), on the damage the simulator plants.

Each case quotes what Kafka logs. The 3.3.1 lines are what a real 3.3.1 broker printed
(killed with ``kill -9`` while producing, then started again; the lines as its server.log showed them):

* "Recovering unflushed segment 9766" -- an unflushed segment's damaged index rebuilt at start;
* "Found invalid offset during recovery ... Corruption found in segment 13188, truncating to offset
  13188", then segments 16564, 19940, 23316 and 26692 deleted;
* "InvalidOffsetException: Attempt to append an offset (657) ... no larger than the last offset
  appended (657)", then "Exiting Kafka due to fatal exception during startup".

The older lines' texts are read from the source at 0.11.0.0 and 2.0.0 (``Log.scala``), 3.9's from
3.9.0-rc3 (``LogLoader.scala``, ``storage/.../OffsetIndex.java``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.broker_start import (
    Fate,
    PartitionOnDisk,
    Scenario,
    Shutdown,
    predict_start,
    start_rules,
)
from airflow_provider_kafka_zk.kafka.log_scan import scan_partition
from airflow_provider_kafka_zk.kafka.log_scan_rules import Verdict, judge_broker, segment_rows
from airflow_provider_kafka_zk.kafka.logdir import OffsetCheckpoint
from airflow_provider_kafka_zk.kafka.records import iter_log_entries, parse_offset_index
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.testing.simulator import BrokerSpec, ClusterSpec, SimulatedCluster, TopicSpec
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.log_damage import LogDamage
from airflow_provider_kafka_zk.testing.simulator.log_damage import apply as apply_damage
from airflow_provider_kafka_zk.testing.simulator.log_damage import record as record_damage
from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_log_dirs

TOPIC = "events"


def _case(
    tmp_path: Path, version: str, damage: LogDamage | None, *, rf: int = 1, running: bool = False, clean=False
):
    """A cluster of 3 brokers whose broker 0 holds ``events-0`` in five or so 60 kB segments, damaged
    as asked; broker 0 crashed (or stopped cleanly, or runs). Returns (cluster, partition dir)."""
    replicas = (0, 1, 2)[:rf]
    spec = ClusterSpec(
        "restart",
        brokers=tuple(BrokerSpec(b, host=f"127.0.0.{b + 1}") for b in range(3)),
        topics=(
            TopicSpec(
                TOPIC,
                1,
                rf,
                config={"segment.bytes": "60000"},
                assignment={0: replicas},
                records_per_partition=2400,
            ),
        ),
        kafka_version=version,
        segment_bytes=60000,
    )
    cluster = SimulatedCluster(spec)
    if not running:
        cluster.stop_broker(0, clean=clean)
    root = tmp_path / "hosts"
    hosts = write_broker_hosts(cluster, root, "127.0.0.1:2181/kafka")
    if damage is not None:
        record_damage(cluster, damage)
        apply_damage(cluster, root, damage)
    return cluster, hosts[0].log_dirs[0] / f"{TOPIC}-0"


def _ident(directory: Path, version: str = "3.3.1") -> str:
    """The loader's ``logIdent`` before its lines: ``LogLoader`` from 3.0, ``Log`` 1.1-2.8, none before."""
    if version.startswith("0.") or version.startswith("1.0"):
        return ""
    name = "LogLoader" if version.startswith("3.") else "Log"
    return f"[{name} partition={directory.name}, dir={directory.parent}] "


def _as_original(lines, directory: Path, copy: Path) -> tuple[str, ...]:
    """The simulated start's lines (on a copy) with the copy's log dir named as the original's."""
    return tuple(line.replace(str(copy.parent), str(directory.parent)) for line in lines)


def _checkpoint(log_dir: Path, name: str) -> int | None:
    return OffsetCheckpoint.parse((log_dir / name).read_bytes(), name).offsets.get((TOPIC, 0))


def _predict(directory: Path, version: str, scenario: Scenario):
    rules = start_rules(KafkaVersion.parse(version))
    rp = _checkpoint(directory.parent, "recovery-point-offset-checkpoint")
    scan = scan_partition(str(directory), rp, index_rule=rules.index_entry, verify_crc=True)
    partition = PartitionOnDisk.from_scan(TOPIC, 0, str(directory), scan["segments"], recovery_point=rp)
    return predict_start(partition, rules, scenario)


def _simulated_start(directory: Path, version: str, tmp_path: Path):
    """Kafka's start applied to a copy of the broker's log dir (the original stays for the scan)."""
    copy = tmp_path / "started" / directory.parent.name
    shutil.copytree(directory.parent, copy)
    [started] = start_log_dirs([copy], KafkaVersion.parse(version))
    return started, copy / directory.name


def _bases(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


_FATES = {
    Fate.KEPT: "kept",
    Fate.RECOVERED: "recovered",
    Fate.REBUILT_AT_LOAD: "rebuilt_at_load",
    Fate.TRUNCATED: "truncated",
    Fate.EMPTIED: "emptied",
    Fate.DELETED: "deleted",
    Fate.FATAL: "fatal",
}


def _agree(predicted, outcome) -> None:
    """The prediction matches what the simulated start did, segment by segment and at the log end."""
    assert [
        (s.base_offset, _FATES.get(s.fate, s.fate.name))
        for s in predicted.segments
        if s.fate is not Fate.NOT_REACHED
    ] == [
        (s.base_offset, s.action)
        for s in outcome.segments
        if not (predicted.fatal and s.action == "kept" and s.base_offset > (predicted.fatal_segment or 0))
    ]
    assert (predicted.fatal is not None) == (outcome.fatal is not None)
    if predicted.fatal is None:
        assert predicted.log_end_before == outcome.log_end_before
        assert predicted.log_end_after == outcome.log_end_after


def _offsets(log: Path) -> list[tuple[int, int]]:
    return [
        (e.base_offset, e.last_offset) for e in iter_log_entries(log.read_bytes(), str(log), verify_crc=True)
    ]


# ---------------------------------------------------------------------------------------------
# 3.3.1: the lines of issue 26
# ---------------------------------------------------------------------------------------------


def test_an_invalid_batch_in_an_unflushed_segment_truncates_there_and_deletes_every_later_segment(tmp_path):
    """Killed while producing: a batch written again (repeated offsets) in segment 1, the recovery
    point still at segment 1's base. Kafka 3.3.1: "Found invalid offset during recovery. Deleting the
    corrupt segment and creating an empty one with starting offset <base>", "Corruption found in
    segment <base>, truncating to offset <base>", every later segment deleted: the log end falls to
    segment 1's base (not "that segment only", as the product said before)."""
    damage = LogDamage(0, TOPIC, 0, "repeated_offset", segment=1, unflushed_from=1)
    _, directory = _case(tmp_path, "3.3.1", damage)
    bases = _bases(directory)
    assert len(bases) >= 4
    predicted = _predict(directory, "3.3.1", Scenario(Shutdown.UNCLEAN))
    started, after = _simulated_start(directory, "3.3.1", tmp_path)
    outcome = started.partitions[f"{TOPIC}-0"]
    _agree(predicted, outcome)
    assert predicted.fate_of(bases[1]).fate is Fate.EMPTIED
    assert [s.base_offset for s in predicted.segments if s.fate is Fate.DELETED] == bases[2:]
    assert predicted.log_end_after == bases[1] and predicted.log_end_before == 2400
    [lost] = predicted.lost
    sizes = {b: (directory / f"{b:020d}.log").stat().st_size for b in bases}
    assert (lost.first, lost.end, lost.bytes) == (bases[1], 2400, sum(sizes[b] for b in bases[1:]))
    assert lost.deleted_segments == tuple(bases[2:])
    # Kafka's words, as the real 3.3.1 broker printed them
    logged = "\n".join(predicted.kafka_log)
    assert (
        f"INFO {_ident(directory)}Recovering unflushed segment {bases[1]}. 0/{len(bases) - 1} recovered for {TOPIC}-0."
        in logged
    )
    assert (
        "Found invalid offset during recovery. Deleting the corrupt segment and creating an empty one with "
        f"starting offset {bases[1]}" in logged
    )
    assert f"Corruption found in segment {bases[1]}, truncating to offset {bases[1]}" in logged
    assert (
        "Deleting segments as part of log recovery: "
        + ",".join(f"LogSegment(baseOffset={b}, size={sizes[b]}, ...)" for b in bases[2:])
        in logged
    )
    assert predicted.kafka_log == _as_original(outcome.lines, directory, after)
    # what the simulated start left: segment 0 whole, segment 1 empty, the rest renamed .deleted
    assert _bases(after) == bases[:2] and (after / f"{bases[1]:020d}.log").stat().st_size == 0
    assert sorted(p.name for p in after.glob("*.log.deleted")) == [f"{b:020d}.log.deleted" for b in bases[2:]]
    assert _offsets(after / f"{bases[0]:020d}.log")[-1][1] == bases[1] - 1


def test_the_verdict_states_the_offsets_bytes_and_whether_an_in_sync_replica_holds_them(tmp_path):
    damage = LogDamage(0, TOPIC, 0, "repeated_offset", segment=1, unflushed_from=1)
    _cluster, directory = _case(tmp_path, "3.3.1", damage, rf=2)
    bases = _bases(directory)
    rp = _checkpoint(directory.parent, "recovery-point-offset-checkpoint")
    hw = _checkpoint(directory.parent, "replication-offset-checkpoint")
    scan = scan_partition(str(directory), rp, index_rule="last")
    rows = segment_rows(
        0, str(directory.parent), TOPIC, 0, scan, recovery_point=rp, high_watermark=hw, clean_shutdown=False
    )
    lost_bytes = sum((directory / f"{b:020d}.log").stat().st_size for b in bases[1:])
    # broker 1 is in sync and its checkpointed high watermark covers the whole log: the loss is local
    judged = judge_broker(
        rows,
        version=KafkaVersion.parse("3.3.1"),
        running=False,
        isr={(TOPIC, 0): (1,)},
        leaders={(TOPIC, 0): 1},
        high_watermarks={(TOPIC, 0): {1: 2400}},
    )
    assert judged.verdict is Verdict.LOSES_DATA_IF_UNCLEAN
    [loss] = [f for f in judged.findings if f.kind == "recovery-loses-data"]
    assert (loss.lost_first, loss.lost_end, loss.bytes_at_risk, loss.held_elsewhere) == (
        bases[1],
        2400,
        lost_bytes,
        "held",
    )
    assert f"offsets {bases[1]}..2399 ({lost_bytes:,} bytes) lost on this replica" in loss.summary
    assert "deletes every later segment (" + ", ".join(map(str, bases[2:])) + ")" in loss.summary
    assert "the loss is only local" in loss.summary and loss.severity == "warning"
    assert judged.describe().startswith(
        f"broker 0: its start after an unclean shutdown loses data at {directory}/{bases[1]:020d}.log"
    )
    # the same replica alone in the ISR (RF=1, or the others fell out): the loss is real
    alone = judge_broker(rows, version=KafkaVersion.parse("3.3.1"), running=False, isr={(TOPIC, 0): (0,)})
    [loss] = [f for f in alone.findings if f.kind == "recovery-loses-data"]
    assert (
        loss.held_elsewhere == "not_held" and loss.severity == "error" and "the loss is real" in loss.summary
    )
    # high watermarks unknown: said so
    unknown = judge_broker(
        [r.__class__(**{**r.__dict__, "high_watermark": None}) for r in rows],
        version=KafkaVersion.parse("3.3.1"),
        running=False,
        isr={(TOPIC, 0): (1,)},
    )
    [loss] = [f for f in unknown.findings if f.kind == "recovery-loses-data"]
    assert loss.held_elsewhere == "unknown" and "whether the loss is only local is unknown" in loss.summary


def test_a_corrupt_batch_in_an_unflushed_segment_truncates_at_its_byte_and_deletes_every_later_segment(
    tmp_path,
):
    damage = LogDamage(0, TOPIC, 0, "corrupt_batch", segment=2, unflushed_from=1)
    _, directory = _case(tmp_path, "3.3.1", damage)
    bases = _bases(directory)
    predicted = _predict(directory, "3.3.1", Scenario(Shutdown.UNCLEAN))
    started, after = _simulated_start(directory, "3.3.1", tmp_path)
    outcome = started.partitions[f"{TOPIC}-0"]
    _agree(predicted, outcome)
    fate = predicted.fate_of(bases[2])
    assert predicted.fate_of(bases[1]).fate is Fate.RECOVERED
    assert (
        fate.fate is Fate.TRUNCATED
        and fate.position
        and fate.position < (directory / f"{bases[2]:020d}.log").stat().st_size
    )
    assert (after / f"{bases[2]:020d}.log").stat().st_size == fate.position
    kept = _offsets(after / f"{bases[2]:020d}.log")
    assert predicted.log_end_after == kept[-1][1] + 1 == fate.next_offset
    logged = "\n".join(predicted.kafka_log)
    assert (
        f"Found invalid messages in log segment {directory}/{bases[2]:020d}.log at byte offset {fate.position}"
        in logged
    )
    assert f"Corruption found in segment {bases[2]}, truncating to offset {fate.next_offset}" in logged


def test_a_damaged_index_in_an_unflushed_segment_is_rebuilt_at_start_not_an_error(tmp_path):
    """The real 3.3.1 broker: "Recovering unflushed segment 9766", and the index was monotonic again."""
    damage = LogDamage(0, TOPIC, 0, "index_not_monotonic", segment=1, unflushed_from=1)
    _, directory = _case(tmp_path, "3.3.1", damage)
    bases = _bases(directory)
    predicted = _predict(directory, "3.3.1", Scenario(Shutdown.UNCLEAN))
    started, after = _simulated_start(directory, "3.3.1", tmp_path)
    _agree(predicted, started.partitions[f"{TOPIC}-0"])
    assert predicted.fate_of(bases[1]).fate is Fate.RECOVERED and not predicted.lost
    assert f"Recovering unflushed segment {bases[1]}." in "\n".join(predicted.kafka_log)
    index = parse_offset_index((after / f"{bases[1]:020d}.index").read_bytes(), bases[1], "index")
    offsets = [e.offset for e in index.entries]
    assert offsets == sorted(set(offsets)) and len(offsets) > 2  # monotonic again
    # the verdict: information, rebuilt at start -- not "does not check this at startup"
    rp = _checkpoint(directory.parent, "recovery-point-offset-checkpoint")
    scan = scan_partition(str(directory), rp, index_rule="last")
    rows = segment_rows(0, str(directory.parent), TOPIC, 0, scan, recovery_point=rp, clean_shutdown=False)
    judged = judge_broker(rows, version=KafkaVersion.parse("3.3.1"), running=False)
    [finding] = [f for f in judged.findings if f.kind == "index-damaged"]
    assert finding.severity == "info" and "rebuilt at start" in finding.summary
    assert "does not check" not in finding.summary and judged.verdict is Verdict.REBUILDS_INDEXES


def test_a_damaged_index_below_the_recovery_point_stays_until_the_index_is_removed(tmp_path):
    damage = LogDamage(0, TOPIC, 0, "index_not_monotonic", segment=0, unflushed_from=2)
    _, directory = _case(tmp_path, "3.3.1", damage)
    bases = _bases(directory)
    before = (directory / f"{bases[0]:020d}.index").read_bytes()
    predicted = _predict(directory, "3.3.1", Scenario(Shutdown.UNCLEAN))
    started, after = _simulated_start(directory, "3.3.1", tmp_path)
    _agree(predicted, started.partitions[f"{TOPIC}-0"])
    assert predicted.fate_of(bases[0]).fate is Fate.KEPT and predicted.fate_of(bases[0]).index_damage_stays
    assert (after / f"{bases[0]:020d}.index").read_bytes() == before  # Kafka left it
    rp = _checkpoint(directory.parent, "recovery-point-offset-checkpoint")
    rows = segment_rows(
        0,
        str(directory.parent),
        TOPIC,
        0,
        scan_partition(str(directory), rp, index_rule="last"),
        recovery_point=rp,
        clean_shutdown=False,
    )
    [finding] = [
        f
        for f in judge_broker(rows, version=KafkaVersion.parse("3.3.1"), running=False).findings
        if f.kind == "index-damaged"
    ]
    assert finding.severity == "error" and "stays until the index is removed" in finding.summary
    [remedy] = finding.remedies
    assert (
        remedy.action == "remove_indexes" and f"rm -f {directory}/{bases[0]:020d}.index" in remedy.commands[0]
    )
    # applied to the started copy: Kafka rebuilds it at the next start, monotonic, and keeps the log
    for command in remedy.commands:
        for path in command.split()[2:]:
            Path(path.replace(str(directory), str(after))).unlink(missing_ok=True)
    [again] = start_log_dirs([after.parent], KafkaVersion.parse("3.3.1"))
    assert again.partitions[f"{TOPIC}-0"].action(bases[0]) == "rebuilt_at_load"
    index = parse_offset_index((after / f"{bases[0]:020d}.index").read_bytes(), bases[0], "index")
    assert [e.offset for e in index.entries] == sorted({e.offset for e in index.entries})
    [keeps] = remedy.keeps
    assert _offsets(after / f"{bases[0]:020d}.log")[0][0] == keeps.first_offset
    assert max(last for _, last in _offsets(after / f"{bases[0]:020d}.log")) == keeps.last_offset


def test_a_missing_index_and_a_repeated_offset_stop_the_broker_in_either_start(tmp_path):
    """Seed 003: "InvalidOffsetException: Attempt to append an offset (657) ... no larger than the last
    offset appended (657)", then "Exiting Kafka due to fatal exception during startup"."""
    damage = LogDamage(0, TOPIC, 0, "repeated_offset", segment=0, drop_index=True)
    _, directory = _case(tmp_path, "3.3.1", damage, clean=True)
    bases = _bases(directory)
    for scenario in (Scenario(Shutdown.CLEAN), Scenario(Shutdown.UNCLEAN)):
        predicted = _predict(directory, "3.3.1", scenario)
        assert predicted.fatal and predicted.fatal_segment == bases[0]
        assert re.search(
            r"InvalidOffsetException: Attempt to append an offset \((\d+)\) to position \d+ no larger than the last "
            r"offset appended \(\1\) to .*00000000000000000000\.index\.",
            predicted.fatal,
        )
        assert predicted.kafka_log[0].startswith(
            f"ERROR {_ident(directory)}Could not find offset index file corresponding to log file "
            f"{directory}/{bases[0]:020d}.log, recovering segment and rebuilding index files..."
        )
        # LogManager.loadLogs logs the cause, Kafka.main exits (3.3.1)
        assert predicted.kafka_log[-2] == (
            "ERROR There was an error in one of the threads during logs loading: "
            f"org.apache.kafka.common.errors.{predicted.fatal}"
        )
        assert predicted.kafka_log[-1] == "ERROR Exiting Kafka due to fatal exception during startup."
    started, after = _simulated_start(directory, "3.3.1", tmp_path)
    outcome = started.partitions[f"{TOPIC}-0"]
    assert outcome.fatal and outcome.fatal in "\n".join(outcome.lines)
    assert predicted.fatal == outcome.fatal.replace(
        str(after), str(directory)
    )  # the same exception, word for word


# ---------------------------------------------------------------------------------------------
# where the release lines differ
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "fate"),
    [
        # 2.0-2.2: the crashed broker's active .timeindex keeps its zero tail, whose last entry
        # (timestamp 0) is below the first: TimeIndex.sanityCheck fails at load, the segment is
        # rebuilt there, and the repeated offset is not caught: the broker exits (2.0.0 Log.scala)
        ("2.1.1", Fate.FATAL),
        # 0.11-1.1: the strict OffsetIndex.sanityCheck fails on the zero tail first (0.11.0.0)
        ("0.11.0.3", Fate.FATAL),
        # 2.3+: no index check at load; recovery catches the exception and empties the segment
        ("2.8.2", Fate.EMPTIED),
        ("3.3.1", Fate.EMPTIED),
        ("3.9.0", Fate.EMPTIED),
    ],
)
def test_a_repeated_offset_in_the_active_segment_after_a_crash_by_release_line(tmp_path, version, fate):
    damage = LogDamage(
        0, TOPIC, 0, "repeated_offset", segment=-1, index_rule="first" if version.startswith("0.") else "last"
    )
    _, directory = _case(tmp_path, version, damage)
    active = _bases(directory)[-1]
    predicted = _predict(directory, version, Scenario(Shutdown.UNCLEAN))
    started, _ = _simulated_start(directory, version, tmp_path)
    outcome = started.partitions[f"{TOPIC}-0"]
    assert (predicted.fatal_segment if predicted.fatal else predicted.fate_of(active).fate) in (active, fate)
    if fate is Fate.FATAL:
        assert predicted.fatal_segment == active and outcome.fatal
        logged = "\n".join(predicted.kafka_log)
        if version.startswith("2."):
            assert (
                f"WARN {_ident(directory, version)}Found a corrupted index file corresponding to log file "
                f"{directory}/{active:020d}.log due to "
                f"Corrupt time index found, time index file ({directory}/{active:020d}.timeindex) has non-zero size "
                "but the last timestamp is 0 which is less than the first timestamp" in logged
            )
            assert logged.endswith("ERROR Exiting Kafka due to fatal exception during startup.")
        else:
            assert (
                "WARN Found a corrupted index file due to requirement failed: Corrupt index found, index file "
                f"({directory}/{active:020d}.index) has non-zero size but the last offset is {active} which is no "
                "larger than the base offset" in logged
            )
            assert logged.endswith("FATAL Exiting Kafka.")
    else:
        _agree(predicted, outcome)
        assert predicted.fate_of(active).fate is Fate.EMPTIED
        line = next(line for line in predicted.kafka_log if "Recovering unflushed segment" in line)
        assert line == (
            f"INFO {_ident(directory, version)}Recovering unflushed segment {active}"
            if version.startswith("2.")
            else f"INFO {_ident(directory, version)}Recovering unflushed segment {active}. 0/1 recovered for {TOPIC}-0."
        )


def test_3_9_words_the_invalid_offset_as_its_java_index_does(tmp_path):
    damage = LogDamage(0, TOPIC, 0, "repeated_offset", segment=0, drop_index=True)
    _, directory = _case(tmp_path, "3.9.0", damage, clean=True)
    predicted = _predict(directory, "3.9.0", Scenario(Shutdown.CLEAN))
    # storage/src/main/java/org/apache/kafka/storage/internals/log/OffsetIndex.java (3.5+)
    assert re.search(
        r"Attempt to append an offset (\d+) to position \d+ no larger than the last offset appended \(\1\) to \S+\.index$",
        predicted.fatal,
    )
    started, after = _simulated_start(directory, "3.9.0", tmp_path)
    assert started.partitions[f"{TOPIC}-0"].fatal.replace(str(after), str(directory)) == predicted.fatal
    # the 3.7+ marker holds JSON; a clean start skips recovery all the same
    assert (directory.parent / ".kafka_cleanshutdown").read_bytes().startswith(b"{")
    assert started.clean_shutdown


def test_a_clean_restart_of_a_running_broker_recovers_nothing_and_keeps_damaged_indexes(tmp_path):
    """Recovery is skipped with the marker (``hadCleanShutdown``); the damage stays, and the verdict
    for a running broker says the clean and the unclean futures apart."""
    damage = LogDamage(0, TOPIC, 0, "index_not_monotonic", segment=-1)
    _, directory = _case(tmp_path, "3.3.1", damage, running=True)
    active = _bases(directory)[-1]
    clean = _predict(directory, "3.3.1", Scenario(Shutdown.CLEAN, from_running=True))
    unclean = _predict(directory, "3.3.1", Scenario(Shutdown.UNCLEAN, from_running=True))
    assert clean.fate_of(active).fate is Fate.KEPT and clean.fate_of(active).index_damage_stays
    assert unclean.fate_of(active).fate is Fate.RECOVERED
    rp = _checkpoint(directory.parent, "recovery-point-offset-checkpoint")
    rows = segment_rows(
        0,
        str(directory.parent),
        TOPIC,
        0,
        scan_partition(str(directory), rp, index_rule="last"),
        recovery_point=rp,
    )
    [finding] = [
        f
        for f in judge_broker(rows, version=KafkaVersion.parse("3.3.1"), running=True).findings
        if f.kind == "index-damaged"
    ]
    assert finding.severity == "warning"
    assert (
        "an unclean restart (kill -9, crash) rebuilds it" in finding.summary
        and "a clean restart keeps it" in finding.summary
    )
