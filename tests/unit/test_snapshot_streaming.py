"""Snapshots with flat memory (issue 17): the walk's spill store and the streaming Parquet write.

The oracle is the old in-memory path, kept here: every row in a dict, sorted, converted with
``pa.array`` and written ``ROW_GROUP_ROWS`` rows per row group into a buffer. The streaming write
must give the same bytes from a dict-backed walk and from a spilled one, in more than one row group.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
from datetime import UTC, datetime

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import (
    PARQUET_SCHEMA,
    ROW_GROUP_ROWS,
    ZNODES_FILE,
    list_snapshots,
    read_snapshot,
    redacted_data,
    write_snapshot,
)
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import (
    SnapshotWalk,
    ZnodeRowError,
    ZnodeStore,
    _RowSpill,
    normalise_subtrees,
)
from airflow_provider_kafka_zk.kafka.safety import is_redacted_path

NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


def _stat(czxid, version=0, data=b"", children=0):
    """A Stat in wire order: czxid, mzxid, ctime, mtime, version, cversion, aversion, owner,
    dataLength, numChildren, pzxid."""
    length = len(data) if data else 0
    return (
        czxid,
        czxid,
        1_700_000_000_000 + czxid,
        1_700_000_000_000 + czxid,
        version,
        children,
        0,
        0,
        length,
        children,
        czxid,
    )


def _max_zxid(table) -> int:
    if isinstance(table, ZnodeStore):
        return table.max_zxid
    try:
        return max((max(s[0], s[1], s[10]) for _, s in table.values()), default=0)
    except (TypeError, ValueError, IndexError):
        return 0  # a table of bad rows, made to be refused


def _data_bytes(table) -> int:
    if isinstance(table, ZnodeStore):
        return table.data_bytes
    return sum(len(e[0]) for e in table.values() if isinstance(e, tuple) and isinstance(e[0], bytes))


def make_walk(table=None, **changes) -> SnapshotWalk:
    """A hand-made walk of ``table`` (default: a small tree), consistent at zxid 10**7."""
    table = {"/": (b"", _stat(1, children=1)), "/a": (b"x", _stat(2, data=b"x"))} if table is None else table
    fields = {
        "table": table,
        "chroot": "/kafka",
        "include": ("/",),
        "exclude": ("/zookeeper",),
        "start_zxid": 10**7,
        "end_zxid": 10**7,
        "consistent": True,
        "consistent_zxid": 10**7,
        "max_zxid_seen": _max_zxid(table),
        "gone": (),
        "reread": (),
        "missing_roots": (),
        "method": "multi-read",
        "requests": 1,
        "reconnects": 0,
        "session_expiries": 0,
        "started_at": NOW,
        "duration_s": 0.5,
        "data_bytes": _data_bytes(table),
    }
    return SnapshotWalk(**(fields | changes))


STATE = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1,3]}'
SCRAM = b'{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a2V5,iterations=4096"}}'


def known_tree(topics: int = 1400, partitions: int = 50) -> dict[str, tuple[bytes | None, tuple]]:
    """A Kafka-shaped tree bigger than two row groups, with the cases the file must keep apart:
    null and empty data, credentials to redact, siblings that sort around ``/`` (``a-b`` < ``a/``)."""
    table: dict[str, tuple[bytes | None, tuple]] = {
        "/": (b"", _stat(1, children=4)),
        "/brokers": (None, _stat(2, children=1)),
        "/brokers/topics": (None, _stat(3, children=topics)),
        "/config": (None, _stat(4, children=1)),
        "/config/users": (None, _stat(5, children=3)),
        "/config/users/alice": (SCRAM, _stat(6, version=2, data=SCRAM)),
        "/config/users/bob": (b"", _stat(7)),
        "/config/users/carol": (None, _stat(8)),
        "/a": (b"x", _stat(9, data=b"x", children=1)),
        "/a/b": (b"y", _stat(10, data=b"y")),
        "/a-b": (b"z", _stat(11, data=b"z")),
    }
    zxid = 100
    for t in range(topics):
        topic = f"/brokers/topics/t-{t:04d}"
        assignment = b'{"version":3,"partitions":{"0":[1,2,3]}}'
        table[topic] = (assignment, _stat(zxid, data=assignment, children=1))
        table[f"{topic}/partitions"] = (None, _stat(zxid + 1, children=partitions))
        zxid += 2
        for p in range(partitions):
            table[f"{topic}/partitions/{p}"] = (None, _stat(zxid, children=1))
            table[f"{topic}/partitions/{p}/state"] = (STATE, _stat(zxid + 1, version=p, data=STATE))
            zxid += 2
    return table


def spilled(table, tmp_path, flush_rows: int) -> ZnodeStore:
    """The rows as the walker leaves them: sorted, through the spill, in ``flush_rows`` batches."""
    spill = _RowSpill(str(tmp_path), flush_rows)
    rows = [(path, *table[path]) for path in sorted(table)]
    for start in range(0, len(rows), 777):  # arrives in pieces, as the walker passes rows on
        spill.add(rows[start : start + 777])
    return spill.close()


def in_memory_parquet(table, redact: bool = True) -> bytes:
    """The pre-streaming write: the whole tree as Python lists, one row group per chunk."""
    paths = sorted(table)
    names = PARQUET_SCHEMA.names
    wire = {"czxid": 0, "mzxid": 1, "pzxid": 10, "ctime": 2, "mtime": 3, "version": 4, "cversion": 5}
    wire |= {"aversion": 6, "ephemeral_owner": 7, "data_length": 8, "num_children": 9}
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, PARQUET_SCHEMA, compression="zstd") as writer:
        for start in range(0, len(paths), ROW_GROUP_ROWS):
            chunk = paths[start : start + ROW_GROUP_ROWS]
            data = [table[p][0] for p in chunk]
            if redact:
                data = [
                    redacted_data(d) if d and is_redacted_path(p) else d
                    for p, d in zip(chunk, data, strict=True)
                ]
            columns = {"path": chunk, "data": data}
            columns |= {name: [table[p][1][index] for p in chunk] for name, index in wire.items()}
            arrays = [pa.array(columns[n], type=PARQUET_SCHEMA.field(n).type) for n in names]
            writer.write_table(pa.Table.from_arrays(arrays, schema=PARQUET_SCHEMA))
    return sink.getvalue()


def written_bytes(ref) -> bytes:
    fs, directory = fsspec.core.url_to_fs(ref.path)
    return fs.cat_file(f"{directory}/{ZNODES_FILE}")


# ---------------------------------------------------------------------------- the streaming write
@pytest.fixture(scope="module")
def big_tree() -> dict[str, tuple[bytes | None, tuple]]:
    table = known_tree()
    assert len(table) > 2 * ROW_GROUP_ROWS
    return table


@pytest.mark.parametrize("redact", [True, False])
def test_streamed_file_is_byte_identical_to_the_in_memory_write_in_several_row_groups(
    tmp_path, big_tree, redact
):
    expected = in_memory_parquet(big_tree, redact=redact)
    store = spilled(big_tree, tmp_path / "spill", flush_rows=10_000)  # batches do not line up with row groups
    ref, manifest = write_snapshot(str(tmp_path / "b"), "c1", make_walk(store), redact=redact)

    assert written_bytes(ref) == expected
    meta = pq.ParquetFile(io.BytesIO(expected)).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, len(big_tree) - 2 * ROW_GROUP_ROWS]
    entry = manifest["files"][ZNODES_FILE]
    assert entry == {
        "bytes": len(expected),
        "sha256": hashlib.sha256(expected).hexdigest(),
        "rows": len(big_tree),
    }
    assert manifest["redacted"]["count" if redact else "in_clear"] == 1  # alice; bob's b"" is not data
    paths = pq.read_table(io.BytesIO(expected), columns=["path"]).column("path").to_pylist()
    assert paths == sorted(big_tree) and paths[:4] == ["/", "/a", "/a-b", "/a/b"]
    if redact:  # the dict-backed walk (hand-made, checked row by row) writes the same bytes
        ref_dict, manifest_dict = write_snapshot(str(tmp_path / "a"), "c1", make_walk(big_tree))
        assert written_bytes(ref_dict) == expected and manifest_dict == manifest


def test_a_failed_streamed_write_leaves_no_file_behind(tmp_path):
    table = known_tree(topics=20)
    table["/zz"] = ("text, not bytes", _stat(9_999_999))
    base = str(tmp_path / "artefacts")
    with pytest.raises(ZnodeRowError, match="znode /zz: data must be bytes or None, not str"):
        write_snapshot(base, "c1", make_walk(table))
    assert list_snapshots(base, "c1") == []
    assert [p.name for p in (tmp_path / "artefacts").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ((12345, _stat(30)), "znode /bad: data must be bytes or None, not int"),
        ((b"x", _stat(30)[:10]), "znode /bad: the Stat must be a tuple of 11 ints"),
        ((b"x", (*_stat(30)[:4], 2**31, *_stat(30)[5:])), "znode /bad: Stat field 4 must be a 32-bit int"),
        ((b"x", (*_stat(30)[:10], "9")), "znode /bad: Stat field 10 must be a 64-bit int"),
        (b"x", "znode /bad: must map to \\(data, Stat\\), not bytes"),
    ],
)
def test_bad_rows_are_refused_naming_the_znode(tmp_path, entry, message):
    with pytest.raises(ZnodeRowError, match=message) as caught:
        write_snapshot(str(tmp_path), "c1", make_walk({"/": (b"", _stat(1, children=1)), "/bad": entry}))
    assert caught.value.path == "/bad"


# ---------------------------------------------------------------------------- the spill store
def test_store_is_the_sorted_mapping_it_replaces(tmp_path):
    table = known_tree(topics=30, partitions=10)
    store = spilled(table, tmp_path, flush_rows=64)
    assert len(store.firsts) == -(-len(table) // 64) > 1
    assert len(store) == len(table) and list(store) == sorted(table)
    for path in ("/", "/a-b", "/brokers/topics/t-0007/partitions/3/state", sorted(table)[-1]):
        data, stat = store[path]
        assert data == table[path][0] and stat == table[path][1]
    assert "/a/c" not in store and "/0" not in store and store.get("/zzz") is None
    assert store.count == len(table)
    assert store.data_bytes == sum(len(d) for d, _ in table.values() if d)
    assert store.max_zxid == max(max(s[0], s[1], s[10]) for _, s in table.values())
    assert make_walk(store).rows == make_walk(table).rows


def test_store_children_and_presence(tmp_path):
    table = known_tree(topics=30, partitions=10)
    store = spilled(table, tmp_path, flush_rows=50)
    assert store.children("/a") == {"b"}  # not "/a-b", which sorts between "/a" and "/a/b"
    assert store.children("/") == {"a", "a-b", "brokers", "config"}
    assert store.children("/brokers/topics/t-0003/partitions") == {str(p) for p in range(10)}
    assert store.children("/config/users/alice") == set()
    assert store.present(["/a", "/a/b", "/a/c", "/config/users/bob", "/nope"]) == {
        "/a",
        "/a/b",
        "/config/users/bob",
    }


def test_merge_replaces_adds_and_drops_whole_subtrees_only(tmp_path):
    table = known_tree(topics=30, partitions=10)
    store = spilled(table, tmp_path, flush_rows=50)
    old_directory = store.directory
    overlay = {
        "/a": (b"new", _stat(500, data=b"new")),  # read again
        "/brokers/topics/t-0002/partitions/10": (None, _stat(501, children=0)),  # created meanwhile
        "/zz-new": (b"n", _stat(502, data=b"n")),  # after every stored row
    }
    dropped = {"/a/b", "/brokers/topics/t-0005"}
    merged = store.merged(overlay, dropped, str(tmp_path), flush_rows=50)
    expected = {p: v for p, v in table.items() if p != "/a/b" and not p.startswith("/brokers/topics/t-0005")}
    expected |= overlay
    assert list(merged) == sorted(expected)
    assert dict(merged.items()) == expected
    assert "/a-b" in merged and "/brokers/topics/t-0050" not in merged  # a sibling, not a child
    assert merged.max_zxid == max(max(s[0], s[1], s[10]) for _, s in expected.values())
    assert merged.count == len(expected) and merged.data_bytes == sum(
        len(d) for d, _ in expected.values() if d
    )
    assert not os.path.exists(old_directory)  # the old store was closed


def test_merge_dropping_the_root_keeps_only_the_overlay(tmp_path):
    store = spilled(known_tree(topics=3, partitions=2), tmp_path, flush_rows=5)
    merged = store.merged({"/": (b"", _stat(1))}, {"/"}, str(tmp_path), flush_rows=5)
    assert list(merged) == ["/"]


def test_store_file_goes_with_close_or_with_the_walk(tmp_path):
    store = spilled(known_tree(topics=2, partitions=2), tmp_path, flush_rows=4)
    directory = store.directory
    assert os.path.isdir(directory)
    walk = make_walk(store)
    walk.close()
    assert not os.path.exists(directory)
    store = spilled(known_tree(topics=2, partitions=2), tmp_path, flush_rows=4)
    directory = store.directory
    del store
    gc.collect()
    assert not os.path.exists(directory)


def test_rows_out_of_order_are_refused(tmp_path):
    spill = _RowSpill(str(tmp_path), 10)
    spill.add([("/b", None, _stat(1))])
    with pytest.raises(AssertionError, match="out of order"):
        spill.add([("/a", None, _stat(2))])
    spill.discard()
    assert list(tmp_path.iterdir()) == []


def test_an_empty_walk_writes_an_empty_file(tmp_path):
    store = _RowSpill(str(tmp_path / "spill"), 10).close()
    ref, manifest = write_snapshot(str(tmp_path), "c1", make_walk(store))
    assert manifest["znodes"] == 0 and manifest["files"][ZNODES_FILE]["rows"] == 0
    assert read_snapshot(ref.path)[1] == []
    assert pq.read_schema(io.BytesIO(written_bytes(ref))) == PARQUET_SCHEMA


def test_subtrees_drop_paths_under_another_and_keep_siblings_with_a_common_prefix():
    paths = ["/brokers/topics/a/partitions", "/brokers/topics/ab/partitions/0", "/brokers/topics/a/"]
    assert normalise_subtrees(paths, "exclude") == ("/brokers/topics/a", "/brokers/topics/ab/partitions/0")
    assert normalise_subtrees(["/x", "/", "/y/z"], "include") == ("/",)
    # a planning read names thousands of state znodes: all kept, sorted, none dropped
    states = [f"/brokers/topics/t{i}/partitions/{p}/state" for i in range(2_000) for p in range(5)]
    assert normalise_subtrees(reversed(states), "include") == tuple(sorted(states))
    with pytest.raises(ValueError, match="absolute"):
        normalise_subtrees(["brokers/ids"], "include")
