"""Snapshot artefacts against a real ZooKeeper: credentials and delegation tokens are not stored in
clear (digest instead of data, the real Stat kept), and retention through the operator never deletes
the snapshot it just wrote because of a folder dated in the future."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import (
    MANIFEST_FILE,
    ZNODES_FILE,
    is_redacted_row,
    list_snapshots,
    read_manifest,
    read_snapshot,
)
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

pytestmark = pytest.mark.integration

CLUSTER = "safety"
CLUSTER_ID = "Aq3vV0uFT7-3LgbUgPnNqg"
SALT = b"c2FsdC1vZi1hbGljZS0xMjM0"
STORED_KEY = b"c3RvcmVkLWtleS1vZi1hbGljZQ=="
SERVER_KEY = b"c2VydmVyLWtleS1vZi1hbGljZQ=="
SCRAM = (
    b'{"version":1,"config":{"SCRAM-SHA-512":"salt='
    + SALT
    + b",stored_key="
    + STORED_KEY
    + b",server_key="
    + SERVER_KEY
    + b',iterations=4096"}}'
)
HMAC = b"dG9rZW4taG1hYy1zZWNyZXQtdG9rMQ=="
TOKEN = b'{"version":3,"owner":"User:alice","renewers":[],"issueTimestamp":1,"maxTimestamp":2,' + (
    b'"expiryTimestamp":2,"tokenId":"tok1","hmac":"' + HMAC + b'"}'
)
SECRETS = (SALT, STORED_KEY, SERVER_KEY, HMAC)


@pytest.fixture
def sensitive_tree(zookeeper_server, zk_chroot, kazoo_client, monkeypatch):
    """A small Kafka tree with one SCRAM user and one delegation token; its connection id."""
    broker = b'{"version":5,"host":"b1","port":9092,"endpoints":["PLAINTEXT://b1:9092"],"jmx_port":-1}'
    kazoo_client.create("/brokers/ids/1", broker, makepath=True)
    kazoo_client.create("/cluster/id", zk.ClusterId(CLUSTER_ID).encode(), makepath=True)
    kazoo_client.create("/config/users/alice", SCRAM, makepath=True)
    kazoo_client.create("/delegation_token/tokens/tok1", TOKEN, makepath=True)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SAFETY_ZK",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": zk_chroot, "session_timeout": 10, "connect_timeout": 5},
            }
        ),
    )
    return "safety_zk"


def _snapshot(conn_id: str, base: Path, **kwargs) -> dict:
    op = ZooKeeperSnapshotOperator(
        task_id="snapshot", cluster=CLUSTER, kafka_zookeeper_conn_id=conn_id, base_path=str(base), **kwargs
    )
    return op.execute(context={})


def _all_cell_bytes(path: str) -> bytes:
    """Every cell of the Parquet file, decompressed, as one byte string (paths and data)."""
    table = pq.read_table(f"{path}/{ZNODES_FILE}")
    out = bytearray()
    for name in table.column_names:
        for value in table.column(name).to_pylist():
            out += value if isinstance(value, bytes) else str(value).encode()
            out += b"\n"
    return bytes(out)


def test_credentials_and_tokens_are_stored_as_digests_with_the_real_stat(
    sensitive_tree, kazoo_client, tmp_path
):
    summary = _snapshot(sensitive_tree, tmp_path / "artefacts")
    assert summary["redacted"] == 2
    cells = _all_cell_bytes(summary["path"])
    raw = Path(summary["path"], ZNODES_FILE).read_bytes()
    for secret in SECRETS:
        assert secret not in cells and secret not in raw
        assert secret.decode() not in cells.decode("utf-8", "replace")
    assert b"/config/users/alice" in cells  # the znode is there, only its data is not

    manifest, rows = read_snapshot(summary["path"])
    by_path = {r.path: r for r in rows}
    for path, original in (("/config/users/alice", SCRAM), ("/delegation_token/tokens/tok1", TOKEN)):
        row = by_path[path]
        data, stat = kazoo_client.get(path)
        assert data == original
        assert row.data == b"redacted:sha256:" + hashlib.sha256(original).hexdigest().encode()
        assert is_redacted_row(row)
        assert (row.czxid, row.mzxid, row.pzxid, row.ctime, row.mtime) == (
            stat.czxid,
            stat.mzxid,
            stat.pzxid,
            stat.ctime,
            stat.mtime,
        )
        assert (row.version, row.cversion, row.aversion, row.ephemeral_owner) == (
            stat.version,
            stat.cversion,
            stat.aversion,
            stat.ephemeralOwner,
        )
        assert row.data_length == stat.dataLength == len(original)  # the original's length
    assert manifest["redacted"]["count"] == 2 and manifest["redacted"]["enabled"] is True
    assert manifest["redacted"]["how"] == "data replaced by its sha256; Stat kept"
    assert manifest["redacted"]["prefixes"] == ["/config/users/", "/delegation_token/"]
    # everything else is byte for byte what ZooKeeper holds
    assert by_path["/cluster/id"].data == kazoo_client.get("/cluster/id")[0]
    assert by_path["/brokers/ids/1"].data == kazoo_client.get("/brokers/ids/1")[0]
    assert not any(
        is_redacted_row(r)
        for p, r in by_path.items()
        if p not in ("/config/users/alice", "/delegation_token/tokens/tok1")
    )
    assert manifest["cluster_id"] == CLUSTER_ID


def test_include_sensitive_keeps_the_bytes_and_says_so(sensitive_tree, tmp_path):
    summary = _snapshot(sensitive_tree, tmp_path / "artefacts", include_sensitive=True)
    assert summary["redacted"] == 0
    manifest, rows = read_snapshot(summary["path"])
    by_path = {r.path: r for r in rows}
    assert by_path["/config/users/alice"].data == SCRAM
    assert by_path["/delegation_token/tokens/tok1"].data == TOKEN
    assert manifest["redacted"]["enabled"] is False and manifest["redacted"]["in_clear"] == 2
    assert all(secret in _all_cell_bytes(summary["path"]) for secret in SECRETS)


def test_a_templated_include_sensitive_is_read_strictly(sensitive_tree, tmp_path):
    from airflow_provider_kafka_zk.kafka.safety import UnsafeFlagError

    with pytest.raises(UnsafeFlagError, match="include_sensitive"):
        _snapshot(sensitive_tree, tmp_path / "artefacts", include_sensitive="{{ params.x }}")
    assert list_snapshots(str(tmp_path / "artefacts"), CLUSTER) == []
    summary = _snapshot(sensitive_tree, tmp_path / "artefacts", include_sensitive="false")
    assert summary["redacted"] == 2


def test_retention_through_the_operator_keeps_the_snapshot_it_just_wrote(sensitive_tree, tmp_path, caplog):
    base = tmp_path / "artefacts"
    first = _snapshot(sensitive_tree, base)
    snapshots = base / CLUSTER / "snapshots"
    # a snapshot "from the future" (a skewed clock, or made by hand) with a valid manifest
    future = snapshots / "29990101T000000.000000Z"
    shutil.copytree(first["path"], future)
    hand_made = snapshots / "29990101T000000Z"  # not even a snapshot name: never touched
    shutil.copytree(first["path"], hand_made)
    assert read_manifest(str(future))["znodes"] == first["znodes"]

    with caplog.at_level("WARNING", logger="airflow_provider_kafka_zk.artefacts.snapshots"):
        second = _snapshot(sensitive_tree, base, keep_last=1)
    assert second["retention_deleted"] == 1  # the first one, by keep_last
    assert Path(second["path"], MANIFEST_FILE).is_file()  # the just-written one survives
    assert not Path(first["path"]).exists()
    assert (future / MANIFEST_FILE).is_file() and (hand_made / MANIFEST_FILE).is_file()
    assert [s.name for s in list_snapshots(str(base), CLUSTER)] == [second["snapshot"], future.name]
    assert any(future.name in r.getMessage() and "future" in r.getMessage() for r in caplog.records)
    read_snapshot(second["path"])  # complete and verified
