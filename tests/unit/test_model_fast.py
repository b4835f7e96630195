"""The bulk ClusterState build equals the per-row reference build, row for row, finding for finding.

``ClusterState.from_snapshot`` decodes topic and partition state znodes in bulk (:mod:`._bulk`)
and hands every row it does not take as is to the codecs; ``_from_snapshot_reference`` is the
per-row build it replaced. Both must give equal models on real, simulated and hostile snapshots.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
from functools import cache
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka import _bulk
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.model import (
    ClusterState,
    ModelFindingKind,
    PartitionInfo,
    _from_snapshot_reference,
)
from airflow_provider_kafka_zk.kafka.snapshot import ZNODE_ROW_FIELDS, ZnodeRow, rows_from_columns
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    SimulatedCluster,
    TopicSpec,
    incident_cluster,
)
from airflow_provider_kafka_zk.testing.simulator.rows import cluster_rows, rows_from_zk_dump

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1" / "zk_tree.json"


@cache
def incident_rows() -> tuple[ZnodeRow, ...]:
    return tuple(cluster_rows(incident_cluster()))


@cache
def large_rows() -> tuple[ZnodeRow, ...]:
    """A generated tree: 6 brokers, 40 topics x 75 partitions (RF 3), a few thousand znodes."""
    spec = ClusterSpec(
        name="large",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3}") for b in range(6)),
        topics=tuple(
            TopicSpec(f"topic-{t:03d}", partitions=75, replication_factor=3, records_per_partition=0)
            for t in range(40)
        ),
    )
    return tuple(cluster_rows(SimulatedCluster(spec)))


def assert_same_model(rows: list[ZnodeRow] | tuple[ZnodeRow, ...], **kwargs: object) -> ClusterState:
    fast = ClusterState.from_snapshot(list(rows), **kwargs)
    reference = _from_snapshot_reference(list(rows), **kwargs)
    assert list(fast.topics) == list(reference.topics)
    for name, topic in reference.topics.items():
        assert list(fast.topics[name].partitions.items()) == list(topic.partitions.items()), name
        assert fast.topics[name] == topic, name
    assert fast.brokers == reference.brokers
    assert [(f.path, f.kind, f.message, f.data) for f in fast.findings] == [
        (f.path, f.kind, f.message, f.data) for f in reference.findings
    ]
    assert fast.reassigning_partitions == reference.reassigning_partitions
    assert fast.znode_count == reference.znode_count
    assert fast.last_zxid == reference.last_zxid
    assert fast == reference
    return fast


def replace_data(rows: list[ZnodeRow], index: int, data: bytes | None) -> None:
    rows[index] = dataclasses.replace(rows[index], data=data)


def is_state(row: ZnodeRow) -> bool:
    return zk.PartitionState.PATH_PATTERN.fullmatch(row.path) is not None


def is_topic(row: ZnodeRow) -> bool:
    return zk.TopicAssignment.PATH_PATTERN.fullmatch(row.path) is not None


# ------------------------------------------------------------------------------ plain snapshots
def test_incident_cluster_same_model() -> None:
    state = assert_same_model(incident_rows(), cluster="demo", taken_at_ms=123)
    assert state.topics and state.brokers


def test_golden_dump_same_model() -> None:
    assert_same_model(rows_from_zk_dump(json.loads(GOLDEN.read_text())), cluster="golden")


def test_generated_large_tree_same_model() -> None:
    state = assert_same_model(large_rows())
    assert sum(t.partition_count for t in state.topics.values()) == 40 * 75
    assert state.findings == ()


def test_rows_in_any_order_and_from_a_generator() -> None:
    rows = list(incident_rows())
    random.Random(3).shuffle(rows)
    assert_same_model(rows)
    assert ClusterState.from_snapshot(r for r in rows) == _from_snapshot_reference(rows)


def test_empty_snapshot() -> None:
    assert_same_model([])


def test_gc_left_as_it_was() -> None:
    assert gc.isenabled()
    ClusterState.from_snapshot(list(incident_rows()))
    assert gc.isenabled()
    gc.disable()
    try:
        ClusterState.from_snapshot(list(incident_rows()))
        assert not gc.isenabled()
    finally:
        gc.enable()


# ------------------------------------------------------------------------------ hostile data
STATE_VARIANTS: list[bytes | None] = [
    None,
    b"",
    b" ",
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]} ',
    b' {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}{}',
    b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,true,3]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2.0,3]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2147483648]}',
    b'{"controller_epoch":1,"leader":-2147483649,"version":1,"leader_epoch":0,"isr":[]}',
    b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":"1,2"}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":1}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":2}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":null}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":true}',
    b'{"controller_epoch":NaN,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"extra":{"a":[1]}}',
    b'{"controller_epoch":1,"leader":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2]}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"x":"\xc3\xa9"}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"x":"\xff"}',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"x":"a\x01"}',
    b'[{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}]',
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1',
    b"2]}",
    b"1",
    b"null",
    b"[" * 5000 + b"]" * 5000,
    b"redacted:sha256:00",
]

TOPIC_VARIANTS: list[bytes | None] = [
    None,
    b"",
    b'{"version":3,"partitions":{"0":[1,2,3]}} ',
    b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}',
    b'{"version":3,"partitions":{"0":[1,2,3,4],"1":[2,3,1]},"adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]}}',
    b'{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[]},"removing_replicas":{}}',
    b'{"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":null}',
    b'{"version":3,"partitions":{"00":[1,2,3]}}',
    b'{"version":3,"partitions":{"-1":[1,2,3]}}',
    b'{"version":3,"partitions":{"2147483648":[1]}}',
    b'{"version":3,"partitions":{"0":[1,true]}}',
    b'{"version":3,"partitions":{"0":"1,2"}}',
    b'{"version":3,"partitions":[]}',
    b'{"version":true,"partitions":{"0":[1]}}',
    b'{"partitions":{"0":[1]}}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"not-a-uuid"}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":null}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"q1J3Y2X1Tj2mLw0m9d3m9w"}',
    b'{"version":3,"partitions":{"0":[1]},"unknown":1}',
    b'{"version":3,"partitions":{}}',
    b"{}",
]


@pytest.mark.parametrize("seed", range(6))
def test_hostile_state_and_topic_data_same_model(seed: int) -> None:
    rng = random.Random(seed)
    rows = list(incident_rows())
    states = [i for i, r in enumerate(rows) if is_state(r)]
    topics = [i for i, r in enumerate(rows) if is_topic(r)]
    for index in rng.sample(states, min(len(STATE_VARIANTS), len(states))):
        replace_data(rows, index, rng.choice(STATE_VARIANTS))
    for index in rng.sample(topics, min(len(TOPIC_VARIANTS) // 2, len(topics))):
        replace_data(rows, index, rng.choice(TOPIC_VARIANTS))
    for index in rng.sample(range(len(rows)), 8):  # flipped bytes anywhere
        data = rows[index].data
        if data:
            position = rng.randrange(len(data))
            replace_data(rows, index, data[:position] + bytes([rng.randrange(256)]) + data[position + 1 :])
    assert_same_model(rows)


def test_every_state_variant_on_a_large_tree() -> None:
    rows = list(large_rows())
    states = [i for i, r in enumerate(rows) if is_state(r)]
    for variant, index in zip(STATE_VARIANTS, states[::37], strict=False):
        replace_data(rows, index, variant)
    state = assert_same_model(rows)
    kinds = {f.kind for f in state.findings}
    assert ModelFindingKind.MALFORMED_ZNODE in kinds


def test_every_topic_variant() -> None:
    rows = list(large_rows())
    topics = [i for i, r in enumerate(rows) if is_topic(r)]
    for variant, index in zip(TOPIC_VARIANTS, topics, strict=False):
        replace_data(rows, index, variant)
    assert_same_model(rows)


def test_state_taken_by_the_codec_but_not_in_bulk_joins_its_topic() -> None:
    """Whitespace around the JSON: the bulk decoder passes, the codec accepts it."""
    rows = list(large_rows())
    index = next(i for i, r in enumerate(rows) if is_state(r))
    replace_data(rows, index, rows[index].data + b"\n")
    state = assert_same_model(rows)
    assert state.findings == ()


def test_odd_paths_same_model() -> None:
    rows = list(incident_rows())
    template = next(r for r in rows if is_state(r))
    topic_row = next(r for r in rows if is_topic(r))
    odd = [
        "/brokers/topics/bad name/partitions/0/state",
        "/brokers/topics/ok/partitions/01/state",
        "/brokers/topics/ok/partitions/-1/state",
        "/brokers/topics/ok/partitions/2147483648/state",
        "/brokers/topics/ok/partitions/0/statex",
        "/brokers/topics//partitions/0/state",
        "/brokers/topics/ok/partitions//state",
        "/brokers/topics/ok/partitionz/0/state",
        "/brokers/topics/ok/partitions/0",
        "/brokers/topics/ok/partitions",
        "/brokers/topics/ok/other",
        "/brokers/topics/ok/other/thing",
        "/brokers/topics/" + "x" * 250,
        "/brokers/topics/..",
        "/brokers/topics/",
        "/brokers/topics/orphan-topic/partitions/0/state",
    ]
    for path in odd:
        rows.append(dataclasses.replace(template, path=path))
    rows.append(dataclasses.replace(topic_row, path="/brokers/topics/bad name"))
    rows.append(dataclasses.replace(topic_row, path="/brokers/topics/no-config-topic"))
    assert_same_model(rows)


def test_duplicate_paths_same_model() -> None:
    rows = list(incident_rows())
    state = next(r for r in rows if is_state(r))
    rows.insert(0, dataclasses.replace(state, data=b"{}", czxid=1 << 60))
    fast = assert_same_model(rows)
    assert any(f.kind is ModelFindingKind.DUPLICATE_ZNODE for f in fast.findings)


def test_missing_and_orphan_states_same_model() -> None:
    rows = [r for i, r in enumerate(large_rows()) if not (is_state(r) and i % 11 == 0)]
    fast = assert_same_model(rows)
    assert any(f.kind is ModelFindingKind.MISSING_PARTITION_STATE for f in fast.findings)
    topics = [r for r in rows if is_topic(r)]
    rows = [r for r in rows if r not in topics[:3]]
    fast = assert_same_model(rows)
    assert any(f.kind is ModelFindingKind.ORPHAN_PARTITION_STATE for f in fast.findings)


def test_redacted_rows_skipped_as_before() -> None:
    rows = list(incident_rows())
    template = next(r for r in rows if r.path.startswith("/config/"))
    rows.append(dataclasses.replace(template, path="/config/users/alice", data=b"redacted:sha256:ab"))
    rows.append(dataclasses.replace(template, path="/config/topics/x", data=b"redacted:sha256:ab"))
    assert_same_model(rows)


# ------------------------------------------------------------------------------ building blocks
def test_column_builder_equals_the_constructor() -> None:
    state = zk.PartitionState("t", 3, 1, 2, 3, (1, 2), zk.RECOVERING, 1)
    built = _bulk.column_builder(zk.PartitionState)(1, [[v] for v in dataclasses.astuple(state)])
    assert built == [state] and hash(built[0]) == hash(state) and repr(built[0]) == repr(state)
    info = PartitionInfo("t", 3, (1, 2), (1,), (2,), (2,), (1,), state, 7)
    values = [getattr(info, f.name) for f in dataclasses.fields(PartitionInfo)]
    assert _bulk.column_builder(PartitionInfo)(1, [[v] for v in values]) == [info]
    with pytest.raises(ValueError):
        _bulk.column_builder(PartitionInfo)(1, [[1]])


def test_znode_rows_from_columns_equal_the_constructor_and_refuse_ragged_columns() -> None:
    rows = [ZnodeRow("/a", None, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 1), ZnodeRow("/a/b", b"x", *range(11))]
    columns = [[getattr(r, name) for r in rows] for name in ZNODE_ROW_FIELDS]
    built = rows_from_columns(columns)
    assert built == rows and [hash(r) for r in built] == [hash(r) for r in rows]
    assert rows_from_columns([[] for _ in ZNODE_ROW_FIELDS]) == []
    with pytest.raises(ValueError, match="columns of one length"):
        rows_from_columns([*columns[:-1], columns[-1][:1]])
    with pytest.raises(ValueError, match="columns of one length"):
        rows_from_columns(columns[:-1])


def test_column_builder_calls_classes_with_post_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    assert _bulk.column_builder(Checked)(2, [[1, 2]]) == [Checked(1), Checked(2)]
    with pytest.raises(ValueError):
        _bulk.column_builder(Checked)(1, [[-1]])


def test_partition_state_objects_equal_decoded() -> None:
    data = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":4,"isr":[2,1]}'
    decoded = _bulk.partition_states([data])
    [state] = _bulk.partition_state_objects(["t"], [5], [data], decoded)
    assert state == zk.PartitionState.decode(data, "/brokers/topics/t/partitions/5/state")
    assert vars(state) == vars(zk.PartitionState.decode(data, "/brokers/topics/t/partitions/5/state"))


# ------------------------------------------------------------------------------ chunked snapshot writes
_WIRE_ORDER = [
    "czxid",
    "mzxid",
    "ctime",
    "mtime",
    "version",
    "cversion",
    "aversion",
    "ephemeral_owner",
    "data_length",
    "num_children",
    "pzxid",
]


def _walk_of(rows: list[ZnodeRow], started_at):
    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalk

    table = {
        r.path: (
            r.data,
            tuple(getattr(r, name) for name in _WIRE_ORDER),
        )
        for r in rows
    }
    return SnapshotWalk(
        table=table,
        chroot="/kafka",
        include=("/",),
        exclude=("/zookeeper",),
        start_zxid=1,
        end_zxid=1,
        consistent=True,
        consistent_zxid=1,
        max_zxid_seen=1,
        gone=(),
        reread=(),
        missing_roots=(),
        method="multi-read",
        requests=1,
        reconnects=0,
        session_expiries=0,
        started_at=started_at,
        duration_s=0.1,
        data_bytes=0,
    )


@pytest.mark.parametrize("redact", [True, False])
def test_snapshot_written_in_row_groups_reads_back_the_same(tmp_path, monkeypatch, redact: bool) -> None:
    from datetime import UTC, datetime, timedelta

    import pyarrow.parquet as pq

    from airflow_provider_kafka_zk.artefacts import snapshots

    rows = list(incident_rows())
    template = rows[0]
    rows += [
        dataclasses.replace(template, path=f"/config/users/user-{i}", data=b'{"version":1,"config":{}}')
        for i in range(5)
    ]
    rows.append(dataclasses.replace(template, path="/delegation_token/tokens/t1", data=b"secret"))
    rows.append(dataclasses.replace(template, path="/config/users/empty", data=b""))
    walk_one = _walk_of(rows, datetime(2025, 1, 1, tzinfo=UTC))
    walk_many = _walk_of(rows, datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=1))

    ref_one, manifest_one = snapshots.write_snapshot(str(tmp_path), "c", walk_one, redact=redact)
    monkeypatch.setattr(snapshots, "ROW_GROUP_ROWS", 7)
    ref_many, manifest_many = snapshots.write_snapshot(str(tmp_path), "c", walk_many, redact=redact)

    assert pq.ParquetFile(f"{ref_many.path}/{snapshots.ZNODES_FILE}").num_row_groups == -(-len(rows) // 7)
    assert manifest_many["redacted"] == manifest_one["redacted"]
    assert manifest_many["redacted"]["count" if redact else "in_clear"] == 6
    assert manifest_many["znodes"] == manifest_one["znodes"] == len(rows)
    assert snapshots.read_snapshot(ref_many.path)[1] == snapshots.read_snapshot(ref_one.path)[1]


def test_empty_walk_still_writes_a_readable_snapshot(tmp_path) -> None:
    from datetime import UTC, datetime

    from airflow_provider_kafka_zk.artefacts import snapshots

    ref, manifest = snapshots.write_snapshot(
        str(tmp_path), "c", _walk_of([], datetime(2025, 1, 1, tzinfo=UTC))
    )
    assert manifest["znodes"] == 0 and snapshots.read_snapshot(ref.path)[1] == []


def test_bytearray_data_read_by_the_codecs() -> None:
    rows = list(large_rows())
    rows = [dataclasses.replace(r, data=bytearray(r.data)) if is_state(r) and r.data else r for r in rows]
    assert_same_model(rows)
