"""The pure half of the broker inventory: raw records -> typed rows with the core parsers, broker
facts with Kafka's defaults, identity checks and coverage arithmetic. The broker-side script is run
locally (plain ``python3``, no SSH) over real Kafka 3.3.1 log-dir files to produce real records."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.hooks.broker_host import REMOTE_SCRIPT_PATH, BrokerHostHook
from airflow_provider_kafka_zk.kafka.inventory import (
    LOG_DIR_FILES,
    OVERRIDE_KEYS,
    PARTITION_FILES,
    BrokerFacts,
    FileRead,
    InventoryAssembler,
    InventoryCoverage,
    InventoryRecordError,
    LogDirInventory,
    PartitionDirInventory,
    RemoteFatalError,
    ServerPropertiesCandidate,
    ServerPropertiesSelectionError,
    ZooKeeperView,
    age_reference_ms,
    choose_server_properties,
    identity_checks,
    kafka_version_from_jars,
    raw_bytes,
    readable_name,
)
from airflow_provider_kafka_zk.kafka.logdir import (
    CleanShutdownMarker,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
)

GOLDEN = (
    Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1" / "broker0" / "after-clean-stop"
)
TOPIC_ID = "_Tw9oRGRTQarYuqBjHjr0g"
PM = b"version: 0\ntopic_id: " + TOPIC_ID.encode()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _log_dir(**files: bytes | None) -> LogDirInventory:
    record = {
        "t": "log_dir",
        "index": 0,
        "path": "/data/kafka-logs",
        "exists": True,
        "files": {
            name: (
                {"size": len(files[name]), "data": _text(files[name])}
                if files.get(name) is not None
                else None
            )
            for name in LOG_DIR_FILES
        },
        "other_entries": [],
        "child_dirs": 1,
    }
    return LogDirInventory.from_record(1, record)


def _dir(name: str, entries=(), files=None, **extra) -> dict:
    return {
        "t": "dir",
        "ld": 0,
        "name": name,
        "mtime_ms": 1_700_000_000_000,
        "entries": list(entries),
        "files": files or {},
        **extra,
    }


def _read(data: bytes) -> dict:
    return {"size": len(data), "data": _text(data)}


# ---------------------------------------------------------------------------------------------
# The broker-side script and the wire encoding
# ---------------------------------------------------------------------------------------------


def test_remote_script_runs_on_python_36_with_the_stdlib_only():
    tree = ast.parse(REMOTE_SCRIPT_PATH.read_text(), feature_version=(3, 6))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names)
    assert "airflow_provider_kafka_zk" not in REMOTE_SCRIPT_PATH.read_text()


def test_wire_encoding_carries_any_bytes_exactly():
    samples = [bytes(range(256)), b"new\nline", b"\xed\xa0\x80 surrogate-looking", "é $(x) `y`".encode()]
    for sample in samples:
        wire = json.dumps({"d": _text(sample)}, ensure_ascii=True)
        assert wire.isascii()
        assert raw_bytes(json.loads(wire)["d"]) == sample
    assert readable_name(_text(b"bad-\xff-0")) == "bad-\\xff-0"


def _run_remote(log_dir: Path, server_properties: Path) -> list[dict]:
    """The broker-side script, run locally the way the hook runs it remotely (stdin protocol)."""
    params = {
        "server_properties": str(server_properties),
        "main_classes": [],
        "override_keys": list(OVERRIDE_KEYS),
        "log_dir_files": list(LOG_DIR_FILES),
        "partition_files": list(PARTITION_FILES),
        "partition_file_limit": 1 << 20,
        "log_dir_file_limit": 1 << 24,
    }
    script = REMOTE_SCRIPT_PATH.read_bytes()
    stdin = (
        script
        + (json.dumps(params) + "\n").encode()
        + (json.dumps({"log_dirs": [str(log_dir)]}) + "\n").encode()
    )
    hook = BrokerHostHook("unused", python_interpreters=("python3",))
    # what the login shell does with the command string: sh -c <command>
    result = subprocess.run(
        ["sh", "-c", hook.remote_command(len(script))], input=stdin, capture_output=True, check=True
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_golden_kafka_log_dir_read_through_the_script(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=0\nlog.dirs={GOLDEN}\n")
    records = _run_remote(GOLDEN, properties)
    assert [r["t"] for r in records[:3]] == ["hello", "server_properties", "await_log_dirs"]
    assembler = InventoryAssembler(0, "localhost")
    for record in records:
        assembler.feed(record)
        if assembler.awaiting_log_dirs:
            assert assembler.start_walk(choose_server_properties(assembler.candidates, 0)) == (str(GOLDEN),)
    inventory = assembler.result()
    [log_dir] = inventory.log_dirs
    assert log_dir.meta == MetaProperties.parse((GOLDEN / "meta.properties").read_bytes(), "m")
    assert log_dir.clean_shutdown == CleanShutdownMarker() and log_dir.clean_shutdown_file.data == b""
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        assert log_dir.checkpoints[name] == OffsetCheckpoint.parse((GOLDEN / name).read_bytes(), name)
    assert {o.name for o in log_dir.other_entries} >= {
        "meta.properties",
        "MANIFEST.tsv",
        ".kafka_cleanshutdown",
    }
    rows = {p.name: p for p in inventory.partitions}
    assert set(rows) == {p.name for p in GOLDEN.iterdir() if p.is_dir()}
    rf3 = rows["golden-rf3-0"]
    assert rf3.topic_id == str(
        PartitionMetadata.parse((GOLDEN / "golden-rf3-0/partition.metadata").read_bytes(), "p").topic_id
    )
    assert (
        rf3.leader_epochs
        == LeaderEpochCheckpoint.parse(
            (GOLDEN / "golden-rf3-0/leader-epoch-checkpoint").read_bytes(), "e"
        ).entries
    )
    assert [s.base_offset for s in rf3.segments] == [0, 3998]
    assert rf3.segments[0].log_bytes == (GOLDEN / "golden-rf3-0/00000000000000000000.log").stat().st_size
    assert (
        rf3.newest_segment.index_bytes == (GOLDEN / "golden-rf3-0/00000000000000003998.index").stat().st_size
    )
    assert {f.name for f in rf3.other_files} == {
        "00000000000000003998.snapshot",
        "00000000000000006641.snapshot",
        "leader-epoch-checkpoint",
        "partition.metadata",
    }
    assert (rf3.recovery_point, rf3.high_watermark, rf3.log_start_offset) == (6641, 6641, None)
    assert rows["golden.dots-and-dashes-1"].topic == "golden.dots-and-dashes"
    assert not inventory.errors
    row = rf3.to_row()
    assert (
        row["dir_name_bytes"] == b"golden-rf3-0"
        and row["segment_count"] == 2
        and row["first_segment_base_offset"] == 0
    )


def test_remote_command_carries_no_caller_data_into_the_shell(tmp_path):
    marker = tmp_path / "pwned"
    hook = BrokerHostHook("unused", python_interpreters=(f"py $(touch {marker})", f"`touch {marker}`"))
    command = hook.remote_command(123)
    assert shlex.split(command)[:2] == ["sh", "-c"]
    result = subprocess.run(["sh", "-c", command], input=b"", capture_output=True, check=False)
    assert result.returncode == 127
    assert json.loads(result.stdout)["kind"] == "no_python3"
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# Partition directories
# ---------------------------------------------------------------------------------------------


def test_segments_are_grouped_and_leftovers_counted():
    entries = [
        ["00000000000000000000.log", 100, 8, "f", 1],
        ["00000000000000000000.index", 16, 8, "f", 1],
        ["00000000000000000000.timeindex", 24, 8, "f", 1],
        ["00000000000000000050.log", 40, 8, "f", 5],
        ["00000000000000000050.index", 10485760, 8, "f", 5],
        ["00000000000000000050.log.swap", 40, 8, "f", 5],
        ["00000000000000000007.log.deleted", 40, 8, "f", 5],
        ["00000000000000000099.index", 8, 8, "f", 5],  # an index without its log
        ["partition.metadata", 43, 8, "f", 1],
        ["subdir", 4096, 8, "d", 1],
    ]
    row = PartitionDirInventory.from_record(
        1, _log_dir(), _dir("t-0", entries, {"partition.metadata": _read(PM)})
    )
    assert [(s.base_offset, s.log_bytes, s.index_bytes, s.timeindex_bytes) for s in row.segments] == [
        (0, 100, 16, 24),
        (50, 40, 10485760, None),
    ]
    assert row.newest_segment.log_mtime_ms == 5
    assert row.transient_files == 2
    assert {f.name for f in row.other_files} == {
        "00000000000000000050.log.swap",
        "00000000000000000007.log.deleted",
        "00000000000000000099.index",
        "partition.metadata",
        "subdir",
    }
    assert row.total_bytes == 100 + 16 + 24 + 40 + 10485760 + 40 + 40 + 8 + 43
    assert row.disk_bytes == 10 * 8 * 512
    assert row.topic_id == TOPIC_ID and row.errors == ()


@pytest.mark.parametrize(
    ("name", "kind", "topic", "partition"),
    [
        ("orders-3", "normal", "orders", 3),
        ("my.topic-with-dashes-12", "normal", "my.topic-with-dashes", 12),
        ("old-0.0123456789abcdef0123456789abcdef-delete", "delete", "old", 0),
        ("moving-1.0123456789abcdef0123456789abcdef-future", "future", "moving", 1),
        ("lost-2.0123456789abcdef0123456789abcdef-stray", "stray", "lost", 2),
        ("nodash", "unparseable", None, None),
        ("topic-notanumber", "unparseable", None, None),
        ("spaced name-0.0123456789abcdef0123456789abcdef-delete", "unparseable", None, None),
    ],
)
def test_directory_kinds(name, kind, topic, partition):
    row = PartitionDirInventory.from_record(1, _log_dir(), _dir(name))
    assert (row.kind, row.topic, row.partition) == (kind, topic, partition)
    assert bool(row.errors) == (kind == "unparseable")


DAY_MS = 86_400_000
DELETE_NAME = "old-0.0123456789abcdef0123456789abcdef-delete"


@pytest.mark.parametrize(
    ("name", "counted_from"),
    [
        (DELETE_NAME, "ctime"),
        ("orders-0", "mtime"),
        ("moving-1.0123456789abcdef0123456789abcdef-future", "mtime"),
        ("lost-2.0123456789abcdef0123456789abcdef-stray", "mtime"),
        ("nodash", "mtime"),
    ],
)
def test_only_a_delete_directorys_age_runs_from_its_ctime(name, counted_from):
    # last written two days ago, renamed (by the broker, for a -delete) just now: the rename moves
    # the ctime, never the mtime
    mtime, ctime = 1_700_000_000_000, 1_700_000_000_000 + 2 * DAY_MS
    row = PartitionDirInventory.from_record(1, _log_dir(), _dir(name, mtime_ms=mtime, ctime_ms=ctime))
    assert (row.mtime_ms, row.ctime_ms) == (mtime, ctime)
    assert row.age_reference_ms == {"ctime": ctime, "mtime": mtime}[counted_from]
    assert (row.to_row()["mtime_ms"], row.to_row()["ctime_ms"]) == (mtime, ctime)


def test_an_unknown_ctime_falls_back_to_mtime():
    mtime = 1_700_000_000_000
    old_record = PartitionDirInventory.from_record(1, _log_dir(), _dir(DELETE_NAME))  # no ctime_ms
    assert old_record.ctime_ms is None and old_record.age_reference_ms == mtime
    garbled = PartitionDirInventory.from_record(1, _log_dir(), _dir(DELETE_NAME, ctime_ms="soon"))
    assert garbled.ctime_ms is None and garbled.age_reference_ms == mtime
    assert age_reference_ms("delete", mtime, None) == mtime
    assert age_reference_ms("delete", None, None) is None
    assert age_reference_ms("delete", None, mtime) == mtime
    assert age_reference_ms("normal", None, mtime) is None  # only -delete directories use ctime
    unlisted = PartitionDirInventory.from_record(
        1, _log_dir(), {"t": "dir", "ld": 0, "name": DELETE_NAME, "error": "PermissionError: x"}
    )
    assert unlisted.age_reference_ms is None


def test_the_script_reports_the_ctime_of_a_renamed_directory(tmp_path):
    """The false alarm on a Kafka 3.3.1 cluster: a directory renamed to -delete seconds earlier
    kept its old mtime; its ctime is the rename."""
    log_dir = tmp_path / "kafka-logs"
    partition = log_dir / "old-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(b"")
    written_ms = time.time_ns() // 1_000_000 - 2 * DAY_MS
    os.utime(partition, ns=(written_ms * 1_000_000, written_ms * 1_000_000))
    renamed = partition.rename(log_dir / DELETE_NAME)
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=0\nlog.dirs={log_dir}\n")
    [record] = [r for r in _run_remote(log_dir, properties) if r["t"] == "dir"]
    stat = renamed.stat()
    assert (record["mtime_ms"], record["ctime_ms"]) == (
        stat.st_mtime_ns // 1_000_000,
        stat.st_ctime_ns // 1_000_000,
    )
    assert record["mtime_ms"] == written_ms  # two days old, and the rename set the ctime:
    assert record["ctime_ms"] - written_ms > DAY_MS
    row = PartitionDirInventory.from_record(0, _log_dir(), record)
    assert row.kind == "delete" and row.age_reference_ms == record["ctime_ms"]


def _until_the_clock_passes(path: Path) -> None:
    """Return once an inode changed now gets a later ctime than ``path``'s (the file system's clock
    ticks coarsely: two changes in a row can share one ctime)."""
    probe = path.parent / ".ctime-probe"
    while True:
        probe.touch()
        later = probe.stat().st_ctime_ns > path.stat().st_ctime_ns
        probe.unlink()
        if later:
            return


def test_a_symlinked_replica_is_renamed_when_its_link_is(tmp_path):
    log_dir = tmp_path / "kafka-logs"
    log_dir.mkdir()
    target = tmp_path / "elsewhere" / "old-0"
    target.mkdir(parents=True)
    written_ms = time.time_ns() // 1_000_000 - 2 * DAY_MS
    os.utime(target, ns=(written_ms * 1_000_000, written_ms * 1_000_000))
    _until_the_clock_passes(target)  # the link's rename comes later than the target's last inode change
    (log_dir / "old-0").symlink_to(target)
    link = (log_dir / "old-0").rename(log_dir / DELETE_NAME)
    assert link.lstat().st_ctime_ns > target.stat().st_ctime_ns
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=0\nlog.dirs={log_dir}\n")
    [record] = [r for r in _run_remote(log_dir, properties) if r["t"] == "dir"]
    assert record["symlink"] is True
    assert record["mtime_ms"] == written_ms  # the target's, as Kafka reads through the link
    assert record["ctime_ms"] == link.lstat().st_ctime_ns // 1_000_000  # the link's: its rename


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"partition.metadata": _read(b"version: 0\ntopic_id: _Tw9oRG")}, "16 decoded bytes"),
        ({"partition.metadata": _read(b"version: 0\ntopic_id: \xff\xfe")}, "UTF-8"),
        ({"partition.metadata": _read(b"")}, "an empty file"),
        ({"partition.metadata": _read(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")}, "ZERO"),
        ({"partition.metadata": {"error": "is a directory", "size": 4096}}, "is a directory"),
        ({"partition.metadata": {"error": "PermissionError: Permission denied"}}, "Permission denied"),
        ({"leader-epoch-checkpoint": _read(b"0\n2\n0 0\n")}, "2 entries (the count line)"),
        ({"leader-epoch-checkpoint": _read(b"1\n0\n")}, "checkpoint version 0"),
    ],
)
def test_bad_files_are_errors_of_their_directory(files, fragment):
    row = PartitionDirInventory.from_record(1, _log_dir(), _dir("orders-0", files=files))
    assert any(fragment in e for e in row.errors), row.errors
    assert row.kind == "normal" and row.topic == "orders"
    assert all("/data/kafka-logs/orders-0/" in e for e in row.errors)


def test_a_directory_that_cannot_be_listed_is_still_a_row():
    record = {"t": "dir", "ld": 0, "name": "orders-1", "error": "PermissionError: Permission denied"}
    row = PartitionDirInventory.from_record(1, _log_dir(), record)
    assert (row.topic, row.partition, row.segments) == ("orders", 1, ())
    assert row.errors == ("/data/kafka-logs/orders-1: PermissionError: Permission denied",)
    assert row.to_row()["partition_metadata_present"] is False


def test_checkpoint_offsets_are_joined_for_live_and_future_replicas():
    checkpoint = OffsetCheckpoint.from_offsets({("orders", 0): 42, ("moving", 1): 7}).encode()
    log_dir = _log_dir(**{"replication-offset-checkpoint": checkpoint})
    assert PartitionDirInventory.from_record(1, log_dir, _dir("orders-0")).high_watermark == 42
    future = "moving-1.0123456789abcdef0123456789abcdef-future"
    assert PartitionDirInventory.from_record(1, log_dir, _dir(future)).high_watermark == 7
    delete = "orders-0.0123456789abcdef0123456789abcdef-delete"
    assert PartitionDirInventory.from_record(1, log_dir, _dir(delete)).high_watermark is None


# ---------------------------------------------------------------------------------------------
# Log dirs
# ---------------------------------------------------------------------------------------------


def test_log_dir_files_are_parsed_and_bad_ones_reported():
    marker = CleanShutdownMarker(broker_epoch=-1, version=0).encode()
    log_dir = _log_dir(
        **{
            "meta.properties": (GOLDEN / "meta.properties").read_bytes(),
            ".kafka_cleanshutdown": marker,
            "recovery-point-offset-checkpoint": b"0\n3\nt 0 1\n",
        }
    )
    assert log_dir.meta.broker_id == 0 and log_dir.clean_shutdown.broker_epoch == -1
    assert log_dir.clean_shutdown_present
    assert log_dir.checkpoints["recovery-point-offset-checkpoint"] is None
    assert log_dir.errors == (
        "/data/kafka-logs/recovery-point-offset-checkpoint: expected 3 entries (the count line), found 1",
    )
    assert (
        log_dir.checkpoints["cleaner-offset-checkpoint"] is None
        and not log_dir.checkpoint_files["cleaner-offset-checkpoint"].present
    )
    row = log_dir.to_row()
    assert row["clean_shutdown_raw"] == marker and row["meta_broker_id"] == 0
    assert row["recovery_point_offset_checkpoint_entries"] is None


def test_missing_log_dir():
    record = {
        "t": "log_dir",
        "index": 1,
        "path": "/gone",
        "exists": False,
        "error": "FileNotFoundError: No such file or directory",
    }
    log_dir = LogDirInventory.from_record(1, record)
    assert (log_dir.exists, log_dir.meta, log_dir.clean_shutdown_present) == (False, None, False)
    assert log_dir.errors == ("/gone: FileNotFoundError: No such file or directory",)


# ---------------------------------------------------------------------------------------------
# server.properties -> facts
# ---------------------------------------------------------------------------------------------


def test_facts_with_kafkas_defaults():
    facts = BrokerFacts.from_properties(
        {"broker.id": "3", "log.dir": "/kafka"}, path="/etc/kafka/server.properties"
    )
    assert (facts.broker_id, facts.log_dirs, facts.log_dirs_key) == (3, ("/kafka",), "log.dir")
    assert facts.delete_topic_enable is True and facts.auto_leader_rebalance_enable is True
    assert facts.leader_imbalance_per_broker_percentage == 10 and facts.min_insync_replicas == 1
    assert facts.unclean_leader_election_enable is False and facts.log_segment_delete_delay_ms == 60_000
    assert facts.inter_broker_protocol_version is None  # the broker's own release, unknown here
    assert set(facts.defaulted) == {
        "delete.topic.enable",
        "inter.broker.protocol.version",
        "auto.leader.rebalance.enable",
        "leader.imbalance.per.broker.percentage",
        "leader.imbalance.check.interval.seconds",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "log.segment.delete.delay.ms",
    }
    notes = facts.default_notes()
    assert "release unknown" in notes["inter.broker.protocol.version"]
    assert facts.to_dict()["defaulted"] == notes


def test_defaults_that_depend_on_the_release():
    old = BrokerFacts.from_properties({"broker.id": "1"}, path="p", kafka_version="0.11.0")
    assert old.delete_topic_enable is False and old.inter_broker_protocol_version == "0.11"
    assert old.log_dirs == ("/tmp/kafka-logs",) and "log.dirs" in old.defaulted
    new = BrokerFacts.from_properties({"broker.id": "1"}, path="p", kafka_version="3.3.1")
    assert new.delete_topic_enable is True and new.inter_broker_protocol_version == "3.3"


def test_values_as_kafka_reads_them():
    facts = BrokerFacts.from_properties(
        {
            "broker.id": "-1",
            "log.dirs": " /a , /b,,/c ",
            "delete.topic.enable": " FALSE ",
            "min.insync.replicas": "two",
            "unclean.leader.election.enable": "yes",
            "log.segment.delete.delay.ms": "9999999999",
            "inter.broker.protocol.version": " 2.8-IV1 ",
        },
        path="p",
    )
    assert facts.broker_id is None  # -1: generated
    assert facts.log_dirs == ("/a", "/b", "/c")
    assert facts.delete_topic_enable is False
    assert (
        facts.log_segment_delete_delay_ms == 9_999_999_999
        and facts.inter_broker_protocol_version == "2.8-IV1"
    )
    assert facts.min_insync_replicas is None and facts.unclean_leader_election_enable is None
    assert len(facts.problems) == 2
    assert "broker.id" not in facts.defaulted


def test_command_line_overrides_win():
    facts = BrokerFacts.from_properties(
        {"broker.id": "1", "log.dirs": "/a"}, path="p", overrides=("broker.id=5", "log.dirs=/x,/y")
    )
    assert (facts.broker_id, facts.log_dirs, facts.overridden) == (5, ("/x", "/y"), ("broker.id", "log.dirs"))


def test_kafka_version_from_the_classpath():
    assert kafka_version_from_jars(["kafka-clients-3.3.1.jar", "kafka_2.13-3.3.1.jar"]) == "3.3.1"
    assert kafka_version_from_jars(["kafka_2.12-2.8.2.jar"]) == "2.8.2"
    assert kafka_version_from_jars(["kafka_2.11-0.11.0.3.jar"]) == "0.11"
    assert kafka_version_from_jars(["kafka_2.13-3.3.1-test.jar", "kafka_2.13-3.3.1.jar"]) == "3.3.1"
    assert kafka_version_from_jars(["kafka_2.13-7.3.0-ccs.jar"]) is None
    assert kafka_version_from_jars([]) is None


def _candidate(text: str, source: str = "process", pid: int | None = 10, **kw) -> ServerPropertiesCandidate:
    return ServerPropertiesCandidate(
        source, f"/etc/kafka/{pid}.properties", FileRead(True, text.encode()), pid, **kw
    )


def test_choosing_server_properties():
    assert choose_server_properties([_candidate("broker.id=1", "configured", None)], 9).broker_id == 1
    two = [_candidate("broker.id=1\nlog.dirs=/a", pid=10), _candidate("broker.id=2\nlog.dirs=/b", pid=11)]
    chosen = choose_server_properties(two, 2)
    assert (chosen.log_dirs, chosen.pid, chosen.source) == (("/b",), 11, "process")
    assert choose_server_properties([_candidate("log.dirs=/a")], 7).broker_id is None  # generated id
    with pytest.raises(
        ServerPropertiesSelectionError, match=r"no running Kafka process has broker.id=3 \(.*broker.id=1"
    ):
        choose_server_properties(two, 3)
    with pytest.raises(ServerPropertiesSelectionError, match=r"2 running Kafka processes claim broker\.id=1"):
        choose_server_properties([_candidate("broker.id=1", pid=1), _candidate("broker.id=1", pid=2)], 1)
    with pytest.raises(ServerPropertiesSelectionError, match="no running Kafka broker process"):
        choose_server_properties([], 1)
    unreadable = ServerPropertiesCandidate(
        "configured", "/x", FileRead(True, error="PermissionError: denied")
    )
    with pytest.raises(
        ServerPropertiesSelectionError, match=r"cannot read server\.properties /x: PermissionError"
    ):
        choose_server_properties([unreadable], 1)
    with pytest.raises(ServerPropertiesSelectionError, match="/x: not found"):
        choose_server_properties([ServerPropertiesCandidate("configured", "/x", FileRead(False))], 1)


# ---------------------------------------------------------------------------------------------
# Identity checks
# ---------------------------------------------------------------------------------------------


def _meta_dir(broker_id: int | None, cluster_id: str = "clusterA", index: int = 0) -> LogDirInventory:
    meta = MetaProperties(version=0, cluster_id=cluster_id, broker_id=broker_id).encode(date_line="d")
    return LogDirInventory.from_record(
        1, {"t": "log_dir", "index": index, "path": f"/d{index}", "files": {"meta.properties": _read(meta)}}
    )


def test_identity_checks():
    facts = BrokerFacts.from_properties({"broker.id": "1"}, path="/p")
    view = ZooKeeperView("clusterA", {1: ("h1",), 2: ("h2", "h2.internal")})
    checks = identity_checks(1, "h1", facts, [_meta_dir(1)], view)
    assert [(c.check, c.status) for c in checks] == [
        ("server.properties", "ok"),
        ("meta.properties /d0", "ok"),
        ("cluster.id", "ok"),
        ("zookeeper", "ok"),
    ]
    checks = {
        c.check: c
        for c in identity_checks(1, "h2.internal", facts, [_meta_dir(2), _meta_dir(1, "B", 1)], view)
    }
    assert (
        checks["meta.properties /d0"].status == "mismatch"
        and "InconsistentBrokerId" in checks["meta.properties /d0"].detail
    )
    assert checks["cluster.id"].status == "mismatch"
    assert (
        checks["zookeeper"].status == "mismatch"
        and "registered by broker(s) [2]" in checks["zookeeper"].detail
    )
    stopped = {c.check: c.status for c in identity_checks(3, "h3", facts, [], view)}
    assert stopped == {"server.properties": "mismatch", "zookeeper": "unknown"}
    generated = BrokerFacts.from_properties({}, path="/p")
    assert identity_checks(4, "h", generated, [_meta_dir(4)], None)[0].status == "ok"
    assert identity_checks(4, "h", generated, [], None)[0].status == "unknown"


# ---------------------------------------------------------------------------------------------
# The record stream
# ---------------------------------------------------------------------------------------------


def test_assembler_refuses_records_out_of_order():
    assembler = InventoryAssembler(1, "h")
    with pytest.raises(InventoryRecordError, match="before any log_dir"):
        assembler.feed({"t": "dir", "name": "x-0"})
    with pytest.raises(InventoryRecordError, match="before the log dirs were sent"):
        assembler.feed({"t": "log_dir", "index": 0, "path": "/d"})
    with pytest.raises(InventoryRecordError, match="unknown record type"):
        assembler.feed({"t": "surprise"})
    with pytest.raises(InventoryRecordError, match="ended before"):
        assembler.result()
    with pytest.raises(RemoteFatalError, match="no_python3: none of"):
        assembler.feed({"t": "fatal", "kind": "no_python3", "detail": "none of ['python3'] found"})


# ---------------------------------------------------------------------------------------------
# Coverage
# ---------------------------------------------------------------------------------------------


def test_coverage_arithmetic():
    complete = InventoryCoverage.compute([0, 1, 2], [2, 1, 0])
    assert (complete.status, complete.not_inventoried) == ("complete", ())
    partial = InventoryCoverage.compute(
        [0, 1, 2, 3], [0, 1, 7], {2: "BrokerHostUnreachableError: broker 2 ..."}
    )
    assert partial.status == "partial"
    assert partial.inventoried == (0, 1) and partial.unexpected == (7,)
    assert partial.failed == {2: "BrokerHostUnreachableError: broker 2 ..."} and partial.missing == (3,)
    assert partial.not_inventoried == (2, 3)
    text = partial.describe()
    assert text.startswith(
        "partial: 2 of 4 brokers inventoried; missing broker 2 (BrokerHostUnreachableError"
    )
    assert "broker 3 (no inventory and no failure record)" in text
    assert InventoryCoverage.compute([5], [], {5: "x"}).status == "empty"
    stale_failure = InventoryCoverage.compute([1], [1], {1: "failed on try 1"})  # a retry succeeded
    assert stale_failure.status == "complete" and not stale_failure.failed
    for coverage in (complete, partial):
        assert "clean" not in json.dumps(coverage.to_dict())
