"""Snapshot artefacts on a local directory and on fsspec's memory:// filesystem: round trip,
atomic publication (no manifest, no snapshot), checksum verification, lookup and retention."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import (
    MANIFEST_FILE,
    ZNODES_FILE,
    SnapshotIntegrityError,
    SnapshotNotFoundError,
    apply_retention,
    latest_snapshot,
    list_snapshots,
    previous_snapshot,
    read_manifest,
    read_snapshot,
    snapshot_timestamp_name,
    write_snapshot,
)
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalk
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.snapshot import ZNODE_ROW_FIELDS

NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


def _stat(czxid, mzxid=None, pzxid=None, version=0, owner=0, data=b"", children=0):
    mzxid = czxid if mzxid is None else mzxid
    pzxid = czxid if pzxid is None else pzxid
    length = len(data) if data else 0
    # wire order: czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, length, children, pzxid
    return (
        czxid,
        mzxid,
        1_700_000_000_000 + czxid,
        1_700_000_000_000 + mzxid,
        version,
        children,
        0,
        owner,
        length,
        children,
        pzxid,
    )


def make_walk(started_at=NOW, extra: dict | None = None) -> SnapshotWalk:
    cluster_id = zk.ClusterId("Aq3vV0uFT7-3LgbUgPnNqg").encode()
    state = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    table = {
        "/": (b"", _stat(2, pzxid=9, children=3)),
        "/brokers": (None, _stat(3, pzxid=8, children=1)),
        "/brokers/ids": (None, _stat(4, pzxid=8, children=1)),
        "/brokers/ids/1": (b'{"version":5}', _stat(8, owner=0x1000A, data=b'{"version":5}')),
        "/cluster": (None, _stat(5, pzxid=6, children=1)),
        "/cluster/id": (cluster_id, _stat(6, data=cluster_id)),
        "/topic-state": (state, _stat(9, mzxid=12, version=3, data=state)),
        **(extra or {}),
    }
    return SnapshotWalk(
        table=table,
        chroot="/kafka",
        include=("/",),
        exclude=("/zookeeper",),
        start_zxid=20,
        end_zxid=20,
        consistent=True,
        consistent_zxid=20,
        max_zxid_seen=12,
        gone=(),
        reread=(),
        missing_roots=(),
        method="multi-read",
        requests=2,
        reconnects=0,
        session_expiries=0,
        started_at=started_at,
        duration_s=0.25,
        data_bytes=sum(len(d) for d, _ in table.values() if isinstance(d, bytes)),
    )


@pytest.fixture(params=["local", "memory"])
def base(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "artefacts")
        return
    url = f"memory://artefacts-{uuid.uuid4().hex}"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


def test_round_trip_keeps_every_row_and_describes_it(base):
    walk = make_walk()
    ref, manifest = write_snapshot(base, "prod-eu", walk, source={"hosts": ["zk1:2181", "zk2:2181"]})
    assert ref.name == snapshot_timestamp_name(NOW) == "20250310T120000.000000Z"
    assert ref.path.endswith("/prod-eu/snapshots/20250310T120000.000000Z")
    read_back_manifest, rows = read_snapshot(ref.path)
    assert read_back_manifest == manifest == read_manifest(ref.path)
    assert rows == walk.rows and [r.path for r in rows] == sorted(walk.table)
    by_path = {r.path: r for r in rows}
    assert by_path["/brokers"].data is None and by_path["/"].data == b""  # null vs empty kept apart
    assert by_path["/brokers/ids/1"].ephemeral_owner == 0x1000A
    assert by_path["/topic-state"].version == 3 and by_path["/topic-state"].mzxid == 12
    assert manifest["cluster"] == "prod-eu" and manifest["cluster_id"] == "Aq3vV0uFT7-3LgbUgPnNqg"
    assert manifest["zxid"] == {"start": 20, "end": 20, "consistent_at": 20, "max_seen": 12}
    assert manifest["consistent"] is True and manifest["consistency"] == "consistent"
    assert manifest["znodes"] == 7 and manifest["data_bytes"] == walk.data_bytes
    assert manifest["source"] == {"hosts": ["zk1:2181", "zk2:2181"], "chroot": "/kafka"}
    assert manifest["include"] == ["/"] and manifest["exclude"] == ["/zookeeper"]
    assert manifest["package"]["name"] == "airflow-provider-kafka-zk"
    assert manifest["duration_s"] == 0.25
    assert len(manifest["files"][ZNODES_FILE]["sha256"]) == 64


def test_parquet_file_has_the_znode_row_schema(tmp_path):
    ref, _ = write_snapshot(str(tmp_path), "c1", make_walk())
    table = pq.read_table(f"{ref.path}/{ZNODES_FILE}")
    assert tuple(table.column_names) == ZNODE_ROW_FIELDS
    assert str(table.schema.field("data").type) == "binary" and table.schema.field("data").nullable
    assert table.column("path").to_pylist() == sorted(make_walk().table)


def test_fuzzy_walk_is_said_so_in_the_manifest(base):
    walk = make_walk()
    fuzzy = SnapshotWalk(**{**walk.__dict__, "consistent": False, "consistent_zxid": None, "gone": ("/x",)})
    _, manifest = write_snapshot(base, "c1", fuzzy)
    assert manifest["consistency"] == "fuzzy" and manifest["zxid"]["consistent_at"] is None
    assert manifest["gone"] == ["/x"]


def test_a_failed_write_leaves_nothing_a_reader_accepts(base):
    bad = make_walk(extra={"/bad": (12345, _stat(30))})  # Arrow refuses an int as binary data
    with pytest.raises(pa.ArrowTypeError, match="Expected bytes"):
        write_snapshot(base, "c1", bad)
    assert list_snapshots(base, "c1") == [] and latest_snapshot(base, "c1") is None
    fs, root = fsspec.core.url_to_fs(base)
    leftovers = fs.find(root)
    assert not any(p.endswith((MANIFEST_FILE, ZNODES_FILE)) or p.endswith(".tmp") for p in leftovers)


def test_a_crash_between_the_data_file_and_the_manifest_is_ignored(base):
    ref, _ = write_snapshot(base, "c1", make_walk())
    fs, _ = fsspec.core.url_to_fs(base)
    # what a crash right after the parquet rename leaves: the data file, no manifest
    crashed = ref.path.replace("20250310T120000.000000Z", "20250311T120000.000000Z")
    _, crashed_path = fsspec.core.url_to_fs(crashed)
    fs.makedirs(crashed_path, exist_ok=True)
    fs.pipe_file(
        f"{crashed_path}/{ZNODES_FILE}", fs.cat_file(f"{fsspec.core.url_to_fs(ref.path)[1]}/{ZNODES_FILE}")
    )
    assert [s.name for s in list_snapshots(base, "c1")] == [ref.name]
    assert latest_snapshot(base, "c1") == ref
    with pytest.raises(SnapshotNotFoundError, match="not a complete snapshot"):
        read_snapshot(crashed)


def test_checksum_and_row_count_are_verified(base):
    ref, _ = write_snapshot(base, "c1", make_walk())
    fs, directory = fsspec.core.url_to_fs(ref.path)
    data_file = f"{directory}/{ZNODES_FILE}"
    original = fs.cat_file(data_file)
    tampered = bytearray(original)
    tampered[len(tampered) // 2] ^= 0xFF
    fs.pipe_file(data_file, bytes(tampered))
    with pytest.raises(SnapshotIntegrityError, match="sha256"):
        read_snapshot(ref.path)
    fs.pipe_file(data_file, original)
    manifest = json.loads(fs.cat_file(f"{directory}/{MANIFEST_FILE}"))
    manifest["znodes"] = 8
    fs.pipe_file(f"{directory}/{MANIFEST_FILE}", json.dumps(manifest).encode())
    with pytest.raises(SnapshotIntegrityError, match="7 rows, the manifest says 8"):
        read_snapshot(ref.path)
    fs.pipe_file(f"{directory}/{MANIFEST_FILE}", b"{not json")
    with pytest.raises(SnapshotIntegrityError, match="not JSON"):
        read_snapshot(ref.path)


def test_the_same_snapshot_is_never_published_twice(base):
    write_snapshot(base, "c1", make_walk())
    with pytest.raises(FileExistsError):
        write_snapshot(base, "c1", make_walk())


@pytest.mark.parametrize("name", ["", "..", "a/b", "../etc", "-x", "a b"])
def test_cluster_names_are_one_safe_path_component(base, name):
    with pytest.raises(ValueError, match="cluster name"):
        write_snapshot(base, name, make_walk())


def test_latest_and_previous(base):
    refs = [write_snapshot(base, "c1", make_walk(NOW + timedelta(hours=h)))[0] for h in (0, 5, 2)]
    oldest, newest, middle = refs
    assert list_snapshots(base, "c1") == [oldest, middle, newest]
    assert latest_snapshot(base, "c1") == newest
    assert previous_snapshot(base, "c1") == middle
    assert previous_snapshot(base, "c1", before=middle) == oldest
    assert previous_snapshot(base, "c1", before=oldest.name) is None
    assert list_snapshots(base, "other") == []


def test_retention_keeps_the_newest_and_what_the_rules_keep(base):
    days = [0, 1, 2, 3, 10]
    refs = [write_snapshot(base, "c1", make_walk(NOW - timedelta(days=d)))[0] for d in days]
    newest = refs[0]
    assert apply_retention(base, "c1", now=NOW) == []  # no rule: nothing complete deleted
    deleted = apply_retention(base, "c1", keep_last=3, now=NOW)
    assert sorted(deleted) == sorted([refs[3].path, refs[4].path])
    assert latest_snapshot(base, "c1") == newest
    # everything older than the horizon: only the newest complete one survives
    deleted = apply_retention(base, "c1", keep_days=0.5, now=NOW + timedelta(days=30))
    assert sorted(deleted) == sorted([refs[1].path, refs[2].path])
    assert list_snapshots(base, "c1") == [newest]


def test_retention_by_age_and_crash_leftovers(base):
    refs = [write_snapshot(base, "c1", make_walk(NOW - timedelta(days=d)))[0] for d in (0, 2, 9)]
    fs, root = fsspec.core.url_to_fs(base)
    old_crash = f"{root}/c1/snapshots/{snapshot_timestamp_name(NOW - timedelta(days=4))}"
    fresh_crash = f"{root}/c1/snapshots/{snapshot_timestamp_name(NOW - timedelta(minutes=5))}"
    for leftover in (old_crash, fresh_crash):
        fs.makedirs(leftover, exist_ok=True)
        fs.pipe_file(f"{leftover}/{ZNODES_FILE}", b"partial")
    deleted = apply_retention(base, "c1", keep_days=3, now=NOW)
    assert refs[2].path in deleted and not fs.exists(old_crash)
    assert fs.exists(fresh_crash)  # may be a write in progress
    assert list_snapshots(base, "c1") == [refs[1], refs[0]]
    with pytest.raises(ValueError, match="keep_last"):
        apply_retention(base, "c1", keep_last=0)
