"""Snapshot artefacts on a local directory and on fsspec's memory:// filesystem: round trip,
atomic publication (no manifest, no snapshot), checksum verification, lookup and retention."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath
import uuid
from datetime import UTC, datetime, timedelta

import fsspec
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
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalk, ZnodeRowError
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
    bad = make_walk(extra={"/bad": (12345, _stat(30))})  # an int is not a znode's data
    with pytest.raises(ZnodeRowError, match="znode /bad: data must be bytes or None, not int"):
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


# ------------------------------------------------------------------------------ future-dated snapshots
def _future_snapshot(base, cluster, name="29990101T000000.000000Z"):
    """A hand-made (or clock-skewed) complete snapshot dated far in the future."""
    fs, root = fsspec.core.url_to_fs(base)
    ref, _ = write_snapshot(base, cluster, make_walk(NOW - timedelta(days=100)))
    source = f"{fsspec.core.url_to_fs(ref.path)[1]}"
    future = f"{root}/{cluster}/snapshots/{name}"
    fs.makedirs(future, exist_ok=True)
    for file in (ZNODES_FILE, MANIFEST_FILE):
        fs.pipe_file(f"{future}/{file}", fs.cat_file(f"{source}/{file}"))
    fs.rm(source, recursive=True)
    return future


def test_retention_never_deletes_the_snapshot_just_written_because_of_a_future_one(base, caplog):
    older = [write_snapshot(base, "c1", make_walk(NOW - timedelta(days=d)))[0] for d in (3, 2, 1)]
    future = _future_snapshot(base, "c1")
    just_written, _ = write_snapshot(base, "c1", make_walk(NOW))
    fs, _ = fsspec.core.url_to_fs(base)
    with caplog.at_level("WARNING", logger="airflow_provider_kafka_zk.artefacts.snapshots"):
        deleted = apply_retention(base, "c1", keep_last=1, now=NOW + timedelta(seconds=1))
    assert sorted(deleted) == sorted(r.path for r in older)  # older ones follow keep_last
    assert fs.exists(future) and fs.exists(f"{future}/{MANIFEST_FILE}")  # never deleted either
    assert [s.name for s in list_snapshots(base, "c1")] == [just_written.name, "29990101T000000.000000Z"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("29990101T000000.000000Z" in m and "future" in m for m in warnings), warnings


def test_retention_keep_last_counts_only_snapshots_not_in_the_future(base):
    refs = [write_snapshot(base, "c1", make_walk(NOW - timedelta(days=d)))[0] for d in (3, 2, 1, 0)]
    _future_snapshot(base, "c1")
    deleted = apply_retention(base, "c1", keep_last=2, now=NOW)
    assert sorted(deleted) == sorted([refs[0].path, refs[1].path])
    assert [s.name for s in list_snapshots(base, "c1")][:2] == [refs[2].name, refs[3].name]


def test_retention_tolerates_small_clock_skew(base):
    # a snapshot a minute "ahead" of now (another worker's clock) is a normal snapshot
    ahead, _ = write_snapshot(base, "c1", make_walk(NOW + timedelta(minutes=1)))
    old, _ = write_snapshot(base, "c1", make_walk(NOW - timedelta(days=1)))
    assert apply_retention(base, "c1", keep_last=1, now=NOW) == [old.path]
    assert latest_snapshot(base, "c1", now=NOW) == ahead


def test_retention_never_deletes_protected_snapshots(base):
    refs = [write_snapshot(base, "c1", make_walk(NOW - timedelta(days=d)))[0] for d in (5, 4, 0)]
    deleted = apply_retention(base, "c1", keep_last=1, now=NOW, protect=[refs[0].name])
    assert deleted == [refs[1].path]
    # a path is accepted as well as a name
    deleted = apply_retention(base, "c1", keep_days=0, now=NOW + timedelta(days=1), protect=[refs[0].path])
    assert deleted == []
    assert list_snapshots(base, "c1") == [refs[0], refs[2]]


def test_latest_and_previous_ignore_future_snapshots_with_a_warning(base, caplog):
    first, _ = write_snapshot(base, "c1", make_walk(NOW - timedelta(days=1)))
    second, _ = write_snapshot(base, "c1", make_walk(NOW))
    _future_snapshot(base, "c1")
    with caplog.at_level("WARNING", logger="airflow_provider_kafka_zk.artefacts.snapshots"):
        assert latest_snapshot(base, "c1", now=NOW) == second
        assert previous_snapshot(base, "c1", now=NOW) == first
        assert previous_snapshot(base, "c1", before="29990101T000000.000000Z", now=NOW) == second
    assert sum("29990101T000000.000000Z" in r.getMessage() for r in caplog.records) >= 3
    # without `now` the real clock is used: 2999 is still the future
    assert latest_snapshot(base, "c1") == second


def test_only_future_snapshots_means_no_latest(base):
    _future_snapshot(base, "c1")
    assert latest_snapshot(base, "c1", now=NOW) is None
    assert apply_retention(base, "c1", keep_last=1, now=NOW) == []


def test_hand_made_folder_without_microseconds_is_never_touched(base):
    fs, root = fsspec.core.url_to_fs(base)
    ref, _ = write_snapshot(base, "c1", make_walk(NOW))
    odd = f"{root}/c1/snapshots/29990101T000000Z"
    fs.makedirs(odd, exist_ok=True)
    fs.pipe_file(f"{odd}/{MANIFEST_FILE}", b"{}")
    assert apply_retention(base, "c1", keep_last=1, now=NOW) == []
    assert latest_snapshot(base, "c1", now=NOW) == ref and fs.exists(f"{odd}/{MANIFEST_FILE}")


# ------------------------------------------------------------------------------ redaction
SCRAM = (
    b'{"version":1,"config":{"SCRAM-SHA-512":"salt=c2VjcmV0LXNhbHQ=,stored_key=U1RPUkVELUtFWS1BTElDRQ==,'
    b'server_key=U0VSVkVSLUtFWS1BTElDRQ==,iterations=4096"}}'
)
TOKEN = b'{"version":1,"owner":"User:alice","hmac":"VE9LRU4tSE1BQy1TRUNSRVQ=","tokenId":"tok1"}'


def _sensitive_walk(started_at=NOW):
    return make_walk(
        started_at,
        extra={
            "/config": (None, _stat(13, children=1)),
            "/config/users": (None, _stat(14, children=1)),
            "/config/users/alice": (SCRAM, _stat(15, version=2, data=SCRAM)),
            "/delegation_token": (None, _stat(16, children=1)),
            "/delegation_token/tokens": (b"", _stat(17, children=1)),
            "/delegation_token/tokens/tok1": (TOKEN, _stat(18, data=TOKEN)),
            "/delegation_token/tokens/none": (None, _stat(19)),
        },
    )


def test_sensitive_znodes_are_redacted_by_default(base):
    from airflow_provider_kafka_zk.artefacts.snapshots import is_redacted_row
    from airflow_provider_kafka_zk.kafka.safety import REDACTED_PREFIXES

    walk = _sensitive_walk()
    ref, manifest = write_snapshot(base, "c1", walk)
    fs, directory = fsspec.core.url_to_fs(ref.path)
    raw = fs.cat_file(f"{directory}/{ZNODES_FILE}")
    assert b"c2VjcmV0LXNhbHQ" not in raw and b"VE9LRU4tSE1BQy1TRUNSRVQ" not in raw
    _, rows = read_snapshot(ref.path)
    by_path = {r.path: r for r in rows}
    original = {r.path: r for r in walk.rows}
    alice, tok = by_path["/config/users/alice"], by_path["/delegation_token/tokens/tok1"]
    assert alice.data == b"redacted:sha256:" + hashlib.sha256(SCRAM).hexdigest().encode()
    assert tok.data == b"redacted:sha256:" + hashlib.sha256(TOKEN).hexdigest().encode()
    for path in ("/config/users/alice", "/delegation_token/tokens/tok1"):
        stat_fields = [f for f in ZNODE_ROW_FIELDS if f not in ("path", "data")]
        assert [getattr(by_path[path], f) for f in stat_fields] == [
            getattr(original[path], f) for f in stat_fields
        ]
    assert alice.data_length == len(SCRAM)  # the Stat is the original's
    assert by_path["/delegation_token/tokens/none"].data is None  # None stays None
    assert by_path["/delegation_token/tokens"].data == b""  # nothing to hide in no data
    assert is_redacted_row(alice) and is_redacted_row(tok)
    assert not is_redacted_row(by_path["/delegation_token/tokens"])
    assert not is_redacted_row(by_path["/brokers/ids/1"])
    assert manifest["redacted"] == {
        "enabled": True,
        "count": 2,
        "prefixes": list(REDACTED_PREFIXES),
        "how": "data replaced by its sha256; Stat kept",
    }
    assert read_manifest(ref.path)["redacted"]["count"] == 2
    assert walk.table["/config/users/alice"][0] == SCRAM  # the walk itself is not changed


def test_manifest_records_redaction_when_nothing_was_redacted(base):
    _, manifest = write_snapshot(base, "c1", make_walk())
    assert manifest["redacted"]["enabled"] is True and manifest["redacted"]["count"] == 0


def test_sensitive_znodes_are_kept_in_clear_on_request(base):
    from airflow_provider_kafka_zk.artefacts.snapshots import is_redacted_row

    walk = _sensitive_walk()
    ref, manifest = write_snapshot(base, "c1", walk, redact=False)
    _, rows = read_snapshot(ref.path)
    assert rows == walk.rows
    assert not any(is_redacted_row(r) for r in rows)
    assert manifest["redacted"]["enabled"] is False and manifest["redacted"]["count"] == 0
    assert manifest["redacted"]["in_clear"] == 2


def test_the_model_does_not_report_redacted_credentials_as_malformed(base):
    from airflow_provider_kafka_zk.artefacts.snapshots import REDACTED_DATA_PREFIX
    from airflow_provider_kafka_zk.kafka import safety
    from airflow_provider_kafka_zk.kafka.model import ClusterState

    ref, _ = write_snapshot(base, "c1", _sensitive_walk())
    _, rows = read_snapshot(ref.path)
    state = ClusterState.from_snapshot(rows, cluster="c1")
    assert state.findings_at("/config/users") == () and state.findings_at("/delegation_token") == ()
    assert state.cluster_id == "Aq3vV0uFT7-3LgbUgPnNqg"
    # a real, malformed user config is still a finding
    bad = [r if r.path != "/config/users/alice" else dataclasses.replace(r, data=b"{broken") for r in rows]
    assert ClusterState.from_snapshot(bad, cluster="c1").findings_at("/config/users/alice")
    # the model skips exactly what is written: one prefix, defined in the pure core
    assert REDACTED_DATA_PREFIX is safety.REDACTED_DATA_PREFIX


# ------------------------------------------------------------------------------ artefact store checks
def test_store_check_on_a_writable_local_directory(tmp_path):
    from airflow_provider_kafka_zk.artefacts.store import check_store_writable

    target = tmp_path / "new" / "store"
    check = check_store_writable(str(target), min_free_bytes=1)
    assert target.is_dir() and list(target.iterdir()) == []  # created; the probe is gone
    assert check.url == str(target) and check.local and check.free_bytes is not None
    assert check.free_bytes >= 1 and check.probe_bytes > 0
    assert check.to_dict()["free_bytes"] == check.free_bytes


def test_store_check_refuses_a_file_where_a_directory_is_expected(tmp_path):
    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, check_store_writable

    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(ArtefactStoreError, match="not a directory") as info:
        check_store_writable(str(blocker / "artefacts"))
    assert isinstance(info.value, OSError) and str(blocker / "artefacts") in str(info.value)
    assert info.value.url == str(blocker / "artefacts")


def test_store_check_refuses_too_little_free_space(tmp_path):
    import shutil

    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, check_store_writable

    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ArtefactStoreError, match="free") as info:
        check_store_writable(str(tmp_path / "a"), min_free_bytes=free + 1024**4)
    assert info.value.reason == "no_space" and str(tmp_path / "a") in str(info.value)
    assert not any((tmp_path / "a").glob(".*probe*"))


def test_store_check_on_a_remote_store_says_free_space_is_unknown():
    from airflow_provider_kafka_zk.artefacts.store import check_store_writable

    url = f"memory://store-{uuid.uuid4().hex}/artefacts"
    check = check_store_writable(url, min_free_bytes=10 * 1024**5)  # not checkable: no failure
    assert not check.local and check.free_bytes is None and "unknown" in check.free_space
    fs, root = fsspec.core.url_to_fs(url)
    assert fs.exists(root) and fs.ls(root) == []


@pytest.mark.parametrize(
    ("error", "reason", "text"),
    [
        (PermissionError(13, "Permission denied"), "permission_denied", "permission denied"),
        (OSError(30, "Read-only file system"), "read_only", "read-only"),
        (OSError(28, "No space left on device"), "no_space", "no space"),
    ],
)
def test_store_check_names_why_a_write_fails(monkeypatch, error, reason, text):
    from fsspec.implementations.memory import MemoryFileSystem

    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, check_store_writable

    def refuse(self, path, mode="rb", **kwargs):
        raise error

    monkeypatch.setattr(MemoryFileSystem, "_open", refuse)
    url = f"memory://store-{uuid.uuid4().hex}"
    with pytest.raises(ArtefactStoreError, match=text) as info:
        check_store_writable(url)
    assert info.value.reason == reason and url in str(info.value)


def test_store_check_detects_a_read_back_mismatch(monkeypatch):
    from fsspec.implementations.memory import MemoryFileSystem

    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, check_store_writable

    real = MemoryFileSystem.cat_file

    def corrupt(self, path, *args, **kwargs):
        data = real(self, path, *args, **kwargs)
        return data[:-1] + bytes([data[-1] ^ 0xFF])  # always differs (the probe ends in a random byte)

    monkeypatch.setattr(MemoryFileSystem, "cat_file", corrupt)
    with pytest.raises(ArtefactStoreError, match="read back") as info:
        check_store_writable(f"memory://store-{uuid.uuid4().hex}")
    assert info.value.reason == "mismatch"


def test_write_and_verify(tmp_path, monkeypatch):
    from fsspec.implementations.memory import MemoryFileSystem

    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, write_and_verify

    target = tmp_path / "rollback" / "plan.json"
    assert write_and_verify(str(target), b'{"undo": []}') == str(target)
    assert target.read_bytes() == b'{"undo": []}' and list(target.parent.iterdir()) == [target]

    url = f"memory://store-{uuid.uuid4().hex}/rollback/plan.json"
    written = write_and_verify(url, b"payload")
    assert written.startswith("memory://") and written.endswith("/rollback/plan.json")
    fs, path = fsspec.core.url_to_fs(written)
    assert fs.cat_file(path) == b"payload" and fs.ls(posixpath.dirname(path), detail=False) == [path]
    real = MemoryFileSystem.cat_file
    monkeypatch.setattr(MemoryFileSystem, "cat_file", lambda self, p, *a, **k: real(self, p, *a, **k) + b"!")
    with pytest.raises(ArtefactStoreError, match="read back") as info:
        write_and_verify(url, b"payload 2")
    assert info.value.reason == "mismatch" and url in str(info.value)


def test_write_and_verify_names_a_failed_write(tmp_path):
    from airflow_provider_kafka_zk.artefacts.store import ArtefactStoreError, write_and_verify

    (tmp_path / "blocker").write_bytes(b"x")
    with pytest.raises(ArtefactStoreError, match="not a directory"):
        write_and_verify(str(tmp_path / "blocker" / "plan.json"), b"payload")
