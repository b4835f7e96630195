"""Multi-op writes stay under the server's ``jute.maxbuffer``, on a real ZooKeeper started with 64 KiB.

A request longer than ``jute.maxbuffer`` makes ZooKeeper close the connection ("Len error"): kazoo
reports a lost connection and the caller cannot tell whether anything was written. The hook sizes
each multi-op as jute encodes it; bulk changes are split into several atomic multi-ops that each
fit, and a single atomic multi-op that cannot fit is refused before anything is sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from airflow_provider_kafka_zk.hooks._kazoo_protocol import multi_request_size, submit_transaction
from airflow_provider_kafka_zk.hooks.zookeeper import (
    CheckVersionOp,
    CreateOp,
    KafkaZooKeeperHook,
    MultiOpError,
    MultiOpTooLargeError,
)
from airflow_provider_kafka_zk.maintenance import ScratchLoadGate
from airflow_provider_kafka_zk.testing.zookeeper import DEFAULT_JVM_FLAGS, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def small_buffer_server() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(jvm_flags=(*DEFAULT_JVM_FLAGS, f"-Djute.maxbuffer={LIMIT}"))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def client(small_buffer_server) -> Iterator[KazooClient]:
    client = KazooClient(hosts=small_buffer_server.connect_string, timeout=10.0)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _reconnected(client: KazooClient) -> None:
    """Wait (bounded) for kazoo to reconnect after the server closed the connection."""
    deadline = time.monotonic() + 30
    while not client.connected:
        if time.monotonic() > deadline:
            raise TimeoutError("kazoo did not reconnect within 30 s")
        time.sleep(0.05)


def _connection(monkeypatch, server, chroot: str, **extra) -> str:
    conn = {
        "conn_type": "kafka_zookeeper",
        "host": server.connect_string,
        "extra": {"chroot": chroot, **extra},
    }
    monkeypatch.setenv("AIRFLOW_CONN_ZK_SMALL", json.dumps(conn))
    return "zk_small"


def test_the_size_the_hook_computes_is_the_size_the_server_checks(small_buffer_server, client):
    chroot = small_buffer_server.new_chroot()

    def create(name: str, total: int) -> Create:
        """A create whose whole multi-op request is exactly ``total`` bytes."""
        op = Create(f"{chroot}/{name}", b"", list(OPEN_ACL_UNSAFE), 0)
        return Create(op.path, b"x" * (total - multi_request_size([op])), op.acl, 0)

    at_limit = create("at-limit", LIMIT)
    assert multi_request_size([at_limit]) == LIMIT
    assert submit_transaction(client, [at_limit]).get(timeout=30) == [at_limit.path]

    over = create("over", LIMIT + 1)
    with pytest.raises(ConnectionLoss):  # the server closed the connection: "Len error"
        submit_transaction(client, [over]).get(timeout=30)
    _reconnected(client)  # kazoo reconnects the same session; the write did not happen
    assert client.exists(over.path) is None
    assert len(client.get(at_limit.path)[0]) == len(at_limit.data)
    assert "length is greater than jute.maxbuffer=65536" in small_buffer_server.log_tail(200)


def test_a_large_change_is_split_into_multi_ops_that_each_fit(small_buffer_server, client, monkeypatch):
    chroot = small_buffer_server.new_chroot()
    client.create(chroot + "/fence", b"")
    ops = [CreateOp(f"/topics-{i:03d}", bytes([65 + i % 26]) * 3000) for i in range(100)]  # ~300 KB

    class FencedGate(ScratchLoadGate):
        """A scratch gate with a fence op, as a maintenance session's lease check adds one."""

        def fence_ops(self):
            return [CheckVersionOp("/fence", 0)]

    conn_id = _connection(monkeypatch, small_buffer_server, chroot, jute_maxbuffer=LIMIT)
    with KafkaZooKeeperHook(conn_id) as hook:
        hook.bind_gate(FencedGate())
        # The damage without the guard: the same change as one multi-op is refused by the server
        # (the connection drops, kazoo says only ConnectionLoss) -- here sent by plain kazoo.
        unsplit = [Create(f"{chroot}{op.path}", op.data, list(OPEN_ACL_UNSAFE), 0) for op in ops]
        assert multi_request_size(unsplit) > LIMIT
        with pytest.raises(ConnectionLoss):
            submit_transaction(client, unsplit).get(timeout=30)
        _reconnected(client)
        assert client.get_children(chroot) == ["fence"]  # nothing of it was applied

        # The hook refuses the same atomic multi-op before sending anything ...
        with pytest.raises(MultiOpTooLargeError) as excinfo:
            hook.multi(ops)
        assert excinfo.value.limit == LIMIT and excinfo.value.size > LIMIT
        assert "jute.maxbuffer" in str(excinfo.value) and f"(chroot {chroot})" in str(excinfo.value)
        assert client.get_children(chroot) == ["fence"]

        # ... and splits it as a bulk change: several multi-ops, each atomic and each under the limit.
        assert hook.multi_split(ops) == len(ops)
    created = {
        name: client.get(f"{chroot}/{name}") for name in client.get_children(chroot) if name != "fence"
    }
    assert {f"/{n}": d for n, (d, _) in created.items()} == {op.path: op.data for op in ops}
    multi_ops = {stat.czxid for _, stat in created.values()}  # one zxid per committed multi-op
    assert len(multi_ops) >= 100 * 3000 // LIMIT + 1 > 1
    # what was committed together is contiguous in path order (batches go in order)
    zxids = [created[f"topics-{i:03d}"][1].czxid for i in range(100)]
    assert zxids == sorted(zxids)

    # Re-running the same ops cannot apply one twice: the first batch fails on its first create.
    with KafkaZooKeeperHook(conn_id) as hook:
        hook.bind_gate(FencedGate())
        with pytest.raises(MultiOpError) as excinfo:
            hook.multi_split(ops)
    assert excinfo.value.path == "/topics-000" and excinfo.value.reason == "NodeExistsError"
    assert excinfo.value.committed_ops == 0


def test_one_op_over_the_limit_is_refused_before_sending(small_buffer_server, client, monkeypatch):
    chroot = small_buffer_server.new_chroot()
    conn_id = _connection(monkeypatch, small_buffer_server, chroot, jute_maxbuffer=LIMIT)
    with KafkaZooKeeperHook(conn_id) as hook:
        hook.bind_gate(ScratchLoadGate())
        with pytest.raises(MultiOpTooLargeError) as excinfo:
            hook.create_if_absent("/admin/reassign_partitions", b"{" + b" " * LIMIT + b"}", makepath=True)
        assert "/admin/reassign_partitions" in str(excinfo.value)
        with pytest.raises(MultiOpTooLargeError):
            hook.multi_split([CreateOp("/small", b""), CreateOp("/huge", b"x" * LIMIT)])
    assert client.exists(chroot + "/admin/reassign_partitions") is None


def test_scratch_load_of_a_large_snapshot_fits_the_servers_buffer(small_buffer_server, client, monkeypatch):
    """load_snapshot_rows (the forensics load) creates and replays versions in size-bounded batches."""
    source = small_buffer_server.new_chroot()
    for i in range(60):
        path = f"{source}/brokers/topics/t{i:02d}"
        client.create(path, b"v0" + b"." * 2500, makepath=True)
        for version in range(3):
            client.set(path, f"v{version + 1}".encode() + b"." * 2500)
    source_conn = _connection(monkeypatch, small_buffer_server, source)
    with KafkaZooKeeperHook(source_conn) as hook:
        rows = hook.snapshot().rows
    target = small_buffer_server.new_chroot()
    conn_id = _connection(monkeypatch, small_buffer_server, target, jute_maxbuffer=LIMIT)
    with KafkaZooKeeperHook(conn_id) as hook:
        hook.bind_gate(ScratchLoadGate())
        report = hook.load_snapshot_rows(rows)
    assert report.created == len(rows) - 1 and report.versions_replayed == 180
    for row in rows:
        if row.path == "/":
            continue
        data, stat = client.get(target + row.path)
        assert (data, stat.version) == (row.data, row.version), row.path
    topics = [client.get(f"{target}/brokers/topics/t{i:02d}")[1].czxid for i in range(60)]
    assert len(set(topics)) > 1  # ~150 KB of creates did not go as one request


def test_the_limit_comes_from_kafka_zk_config_when_the_connection_does_not_say(
    small_buffer_server, client, monkeypatch
):
    chroot = small_buffer_server.new_chroot()
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__JUTE_MAXBUFFER", str(LIMIT))
    conn_id = _connection(monkeypatch, small_buffer_server, chroot)  # no jute_maxbuffer extra
    with KafkaZooKeeperHook(conn_id) as hook:
        assert hook.config.jute_maxbuffer == LIMIT
        hook.bind_gate(ScratchLoadGate())
        assert hook.multi_split([CreateOp(f"/n{i}", b"x" * 20_000) for i in range(8)]) == 8
    stats = [client.exists(f"{chroot}/n{i}") for i in range(8)]
    assert len({s.czxid for s in stats}) >= 3  # 160 KB in multi-ops of at most 64 KiB
    monkeypatch.delenv("AIRFLOW__KAFKA_ZK__JUTE_MAXBUFFER")
    with KafkaZooKeeperHook(conn_id) as hook:
        assert hook.config.jute_maxbuffer == 0xFFFFF  # ZooKeeper's default
