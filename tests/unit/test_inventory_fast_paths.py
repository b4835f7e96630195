"""The inventory's fast paths (issue 35) give what the general code gives, input for input: integers
without a regex, offset-checkpoint lines split without one, line breaks, segment grouping straight
from the raw entries, rows into Arrow column by column; and how brokers are split into inventory tasks.

Each reference below is the code as it was before (8f9a414), kept here to compare with.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from airflow_provider_kafka_zk.kafka import logdir
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.inventory import (
    LOG_DIR_FILES,
    FileEntry,
    InventoryAssembler,
    SegmentFiles,
    _segments_of_raw,
)
from airflow_provider_kafka_zk.kafka.logdir import OffsetCheckpoint, parse_java_int
from airflow_provider_kafka_zk.kafka.records import parse_segment_file_name
from airflow_provider_kafka_zk.operators.inventory import (
    PARTITION_SCHEMA,
    BrokerInventoryOperator,
    _parquet_bytes,
    broker_groups,
    inventory_tables,
)

# ---------------------------------------------------------------------------------------------
# References: the code before the fast paths
# ---------------------------------------------------------------------------------------------

_JAVA_INTEGER = re.compile(r"[+-]?\d+")


def reference_int(text: str, bits: int = 32) -> int:
    low, high = (-(2**31), 2**31 - 1) if bits == 32 else (-(2**63), 2**63 - 1)
    if not _JAVA_INTEGER.fullmatch(text):
        raise logdir.LogDirFormatError("s", f"w as a {bits}-bit decimal integer", logdir.describe(text))
    value = int(text)
    if not low <= value <= high:
        raise logdir.LogDirFormatError("s", f"w within the int{bits} range", text)
    return value


def reference_checkpoint(data: bytes) -> list[tuple[str, int, int]]:
    text = data.decode("utf-8")
    lines = re.split(r"\r\n|\r|\n", text) if text else []
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    reference_int(lines[0])
    if len(lines) == 1:
        return []
    count = reference_int(lines[1])
    if count != len(lines) - 2:
        raise ValueError("count")
    out = []
    for line in lines[2:]:
        fields = re.split(r"[ \t\n\x0b\f\r]+", line)
        while len(fields) > 1 and fields[-1] == "":
            fields.pop()
        if len(fields) != 3:
            raise ValueError("fields")
        out.append((fields[0], reference_int(fields[1]), reference_int(fields[2], 64)))
    return out


def reference_segments(
    entries: list[FileEntry],
) -> tuple[tuple[SegmentFiles, ...], tuple[FileEntry, ...], int]:
    logs: dict[int, FileEntry] = {}
    indexes: dict[tuple[int, str], int] = {}
    others: list[FileEntry] = []
    transient = 0
    for entry in entries:
        if entry.kind != "f" or not entry.name[:1].isdigit():
            others.append(entry)
            continue
        try:
            offset, suffix = parse_segment_file_name(entry.name)
        except KafkaFormatError:
            others.append(entry)
            continue
        if suffix == ".log":
            logs[offset] = entry
        elif suffix in (".index", ".timeindex"):
            indexes[(offset, suffix)] = entry.size
        else:
            if suffix.endswith((".deleted", ".cleaned", ".swap")):
                transient += 1
            others.append(entry)
    segments = tuple(
        SegmentFiles(
            base_offset=offset,
            log_bytes=logs[offset].size,
            index_bytes=indexes.get((offset, ".index")),
            timeindex_bytes=indexes.get((offset, ".timeindex")),
            log_mtime_ms=logs[offset].mtime_ms,
        )
        for offset in sorted(logs)
    )
    for (offset, suffix), size in sorted(indexes.items()):
        if offset not in logs:
            others.append(FileEntry(f"{offset:020d}{suffix}", size, "f"))
    return segments, tuple(sorted(others, key=lambda e: e.name)), transient


def _entries(data: bytes) -> list[tuple[str, int, int]]:
    return [(e.topic, e.partition, e.offset) for e in OffsetCheckpoint.parse(data, "f").entries]


def _outcome(call):
    try:
        return ("ok", call())
    except (KafkaFormatError, ValueError) as exc:
        return ("error", type(exc).__name__)


# ---------------------------------------------------------------------------------------------
# Integers and checkpoint lines
# ---------------------------------------------------------------------------------------------

INTEGERS = [
    "0",
    "7",
    "007",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "+5",
    "-0",
    "9223372036854775807",
    "9223372036854775808",
    "",
    " 1",
    "1 ",
    "1_0",
    "\u0661\u0662",  # Arabic-Indic digits: Java's Character.digit takes them
    "\u00b2",  # a superscript: isdigit() says yes, Java does not
    "12a",
    "0x10",
    "\u0663" * 12,
]


@pytest.mark.parametrize("text", INTEGERS)
@pytest.mark.parametrize("bits", [32, 64])
def test_integers_parse_as_before(text, bits):
    new = _outcome(lambda: parse_java_int(text, "s", "w", bits=bits))
    old = _outcome(lambda: reference_int(text, bits))
    assert new[0] == old[0] and (new[0] == "error" or new[1] == old[1])


CHECKPOINT_LINES = [
    "orders 0 42",
    "orders\t0\t42",
    "orders  0 42",
    " orders 0 42",
    "orders 0 42 ",
    "orders 0 42\x0b",
    "orders 0",
    "orders 0 42 9",
    "orders \u0661 42",
    "orders 0 -1",
    "orders +1 42",
    "orders 2147483648 42",
    "orders 999999999 999999999999999999",
    "orders 0 9223372036854775808",
    "órders 0 42",
    "orders 0 00042",
    "orders\u00a00 42",
]


@pytest.mark.parametrize("line", CHECKPOINT_LINES)
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_offset_checkpoint_lines_parse_as_before(line, newline):
    data = newline.join(["0", "2", line, "other-topic 3 5"]).encode() + newline.encode()
    new = _outcome(lambda: _entries(data))
    old = _outcome(lambda: reference_checkpoint(data))
    assert new[0] == old[0], (new, old)
    if new[0] == "ok":
        assert new[1] == old[1]


def test_many_random_checkpoints_parse_as_before():
    rng = random.Random(35)
    alphabet = ["a", "b", "-", ".", "_", "0", "1", "9", " ", "  ", "\t", "\u0661", "+", "-"]
    for _ in range(2000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        data = f"0\n1\n{line}\n".encode()
        new = _outcome(lambda data=data: _entries(data))
        old = _outcome(lambda data=data: reference_checkpoint(data))
        assert new == old or (new[0] == old[0] == "error"), (line, new, old)


# ---------------------------------------------------------------------------------------------
# Segments straight from the raw entries
# ---------------------------------------------------------------------------------------------

NAMES = [
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000050.log",
    "00000000000000000050.index",
    "00000000000000000099.timeindex",
    "00000000000000000050.log.swap",
    "00000000000000000007.log.deleted",
    "00000000000000000007.index.cleaned",
    "00000000000000000012.snapshot",
    "00000000000000000013",
    "0000000000000000001.log",
    "000000000000000000001.log",
    "\u0660" * 20 + ".log",
    "partition.metadata",
    "leader-epoch-checkpoint",
    "subdir",
    "9.log",
]


def test_segment_grouping_is_as_before_for_any_listing():
    rng = random.Random(35)
    for _ in range(3000):
        raw = [
            [
                name,
                rng.randint(0, 10_000),
                rng.randint(0, 24),
                rng.choice("ffffdlo"),
                rng.choice([1, 7, None, "x"]),
            ]
            for name in rng.sample(NAMES, rng.randint(0, len(NAMES)))
        ]
        segments, others, transient, total, blocks = _segments_of_raw(raw)
        entries = [
            FileEntry(str(e[0]), int(e[1]), str(e[3]), int(e[2]), e[4] if isinstance(e[4], int) else None)
            for e in raw
        ]
        assert (segments, others, transient) == reference_segments(entries), raw
        assert total == sum(e.size for e in entries if e.kind == "f")
        assert blocks == sum(e.blocks for e in entries)


# ---------------------------------------------------------------------------------------------
# Rows into Arrow, column by column
# ---------------------------------------------------------------------------------------------


def _inventory():
    """A broker's inventory from records with every kind of directory and problem."""
    read = lambda data: {"size": len(data), "data": data.decode("utf-8", "surrogateescape")}  # noqa: E731
    pm = b"version: 0\ntopic_id: _Tw9oRGRTQarYuqBjHjr0g"
    checkpoint = OffsetCheckpoint.from_offsets({("orders", 0): 42, ("moving", 1): 7}).encode()
    assembler = InventoryAssembler(4, "broker4.example.com")
    assembler.feed({"t": "hello", "python": "3.11.7", "hostname": "b4", "uid": 0})
    assembler.feed(
        {
            "t": "server_properties",
            "source": "configured",
            "path": "/etc/kafka/server.properties",
            "file": read(b"broker.id=4\nlog.dirs=/data/a,/data/b\n"),
        }
    )
    assembler.feed({"t": "await_log_dirs"})
    from airflow_provider_kafka_zk.kafka.inventory import choose_server_properties

    assembler.start_walk(choose_server_properties(assembler.candidates, 4))
    files = {name: None for name in LOG_DIR_FILES}
    files["replication-offset-checkpoint"] = read(checkpoint)
    assembler.feed(
        {"t": "log_dir", "index": 0, "path": "/data/a", "exists": True, "files": files, "child_dirs": 5}
    )
    entries = [
        ["00000000000000000000.log", 100, 8, "f", 1_700_000_000_123],
        ["00000000000000000000.index", 10485760, 0, "f", 1],
        ["partition.metadata", 43, 8, "f", 1],
    ]
    dirs = [
        {"name": "orders-0", "entries": entries, "files": {"partition.metadata": read(pm)}},
        {"name": "moving-1.0123456789abcdef0123456789abcdef-future", "entries": entries[:1]},
        {"name": "old-0.0123456789abcdef0123456789abcdef-delete", "ctime_ms": 1_700_000_500_001},
        {"name": "no dash", "files": {"leader-epoch-checkpoint": read(b"0\n1\n0 0\n")}},
        {"name": "latin1-\udcff\udcfe-8", "files": {"partition.metadata": read(b"version: 0\ntopic_id: x")}},
        {"name": "gone-0", "error": "PermissionError: Permission denied"},
    ]
    for d in dirs:
        assembler.feed({"t": "dir", "ld": 0, "mtime_ms": 1_699_999_999_999, "symlink": False, **d})
    assembler.feed(
        {"t": "log_dir", "index": 1, "path": "/data/b", "error": "FileNotFoundError", "exists": False}
    )
    assembler.feed({"t": "end", "log_dirs": 2, "dirs": 6, "seconds": 0.1})
    return assembler.result(None)


def reference_tables(inventory, cluster: str, ts: str) -> pa.Table:
    """``inventory_tables``' partition table as it was made before: row dicts, datetimes, from_pylist."""

    def stamp(ms):
        return datetime.fromtimestamp(ms / 1000, UTC) if ms is not None else None

    common = {"cluster": cluster, "inventory_ts": ts, "host": inventory.host}
    rows = []
    for partition in inventory.partitions:
        row = partition.to_row()
        row["mtime"] = stamp(row.pop("mtime_ms"))
        row["ctime"] = stamp(row.pop("ctime_ms"))
        row["last_modified"] = stamp(row.pop("last_modified_ms"))
        rows.append({**common, **row})
    return pa.Table.from_pylist(rows, schema=PARTITION_SCHEMA)


def test_rows_go_into_arrow_exactly_as_row_dicts_did():
    inventory = _inventory()
    assert len(inventory.partitions) == 6 and any(p.errors for p in inventory.partitions)
    partitions, _ = inventory_tables(inventory, "prod", "20261122T000000")
    expected = reference_tables(inventory, "prod", "20261122T000000")
    assert partitions.equals(expected.replace_schema_metadata(partitions.schema.metadata))
    same_metadata = expected.replace_schema_metadata(partitions.schema.metadata)
    assert _parquet_bytes(partitions) == _parquet_bytes(same_metadata)
    empty = _inventory()
    empty.partitions.clear()
    assert inventory_tables(empty, "prod", "t")[0].num_rows == 0


# ---------------------------------------------------------------------------------------------
# Brokers in groups: one inventory task per group
# ---------------------------------------------------------------------------------------------


def test_brokers_are_split_into_nearly_equal_groups_in_order():
    assert broker_groups(range(50), 8) == [
        list(range(0, 7)),
        list(range(7, 14)),
        *[list(range(s, s + 6)) for s in range(14, 50, 6)],
    ]
    assert broker_groups([5, 3, 3, 1], 8) == [[1], [3], [5]]
    assert broker_groups(range(4), 1) == [[0, 1, 2, 3]]
    assert broker_groups([], 8) == []
    groups = broker_groups(range(1000), 16)
    assert sorted(b for g in groups for b in g) == list(range(1000))
    assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_an_inventory_task_takes_one_broker_or_one_group():
    common = {"cluster": "prod", "base_path": "/tmp/x", "ssh_conn_id": "ssh"}
    with pytest.raises(ValueError, match=r"broker_id .* or broker_ids"):
        BrokerInventoryOperator(task_id="a", **common)
    with pytest.raises(ValueError, match="not both"):
        BrokerInventoryOperator(task_id="b", broker_id=1, broker_ids=[1], **common)
    assert BrokerInventoryOperator(task_id="c", broker_ids=[1, 2], **common).max_parallel == 4


def test_directories_made_without_the_frozen_init_equal_constructed_ones():
    """``from_record`` fills the frozen dataclass's fields directly: the instances must be exactly
    what the constructor makes (every field, nothing else), still frozen and hashable alike."""
    from dataclasses import FrozenInstanceError, asdict, fields

    from airflow_provider_kafka_zk.kafka.inventory import PartitionDirInventory

    names = [f.name for f in fields(PartitionDirInventory)]
    partitions = _inventory().partitions
    assert len(partitions) == 6
    for made in partitions:
        assert sorted(vars(made)) == sorted(names)
        constructed = PartitionDirInventory(**{name: getattr(made, name) for name in names})
        assert made == constructed and asdict(made) == asdict(constructed)
        assert hash(made.segments) == hash(constructed.segments)
        with pytest.raises(FrozenInstanceError):
            made.kind = "normal"  # type: ignore[misc]


def test_the_default_groups_leave_the_snapshot_its_slot(monkeypatch):
    """The snapshot runs beside the inventory: with 8 task slots, 7 groups (an eighth would wait for
    the snapshot's slot and end the run last); an explicit number is kept."""
    from airflow_provider_kafka_zk.operators.inventory import BrokerGroupsOperator, ListBrokerIdsOperator

    monkeypatch.setattr(ListBrokerIdsOperator, "execute", lambda self, context: list(range(50)))
    monkeypatch.setenv("AIRFLOW__CORE__PARALLELISM", "8")
    monkeypatch.setenv("AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG", "16")
    groups = BrokerGroupsOperator(task_id="g", kafka_zookeeper_conn_id="zk").execute({})
    assert len(groups) == 7 and sorted(b for g in groups for b in g) == list(range(50))
    monkeypatch.setenv("AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG", "1")
    assert len(BrokerGroupsOperator(task_id="h", kafka_zookeeper_conn_id="zk").execute({})) == 1
    assert len(BrokerGroupsOperator(task_id="i", kafka_zookeeper_conn_id="zk", groups=8).execute({})) == 8
