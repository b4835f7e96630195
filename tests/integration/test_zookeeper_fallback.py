"""The snapshot walk on a server without multiRead (ZooKeeper 3.4/3.5), proven on a real server.

No 3.4/3.5 server can be installed here, so a real 3.8 server sits behind
:class:`~airflow_provider_kafka_zk.testing.zk_proxy.ZooKeeperProxy`, which answers multiRead
(opcode 22) as 3.5 answers any opcode it does not know (UNIMPLEMENTED, then the connection closed;
see the proxy's docstring for the 3.5 source) and forwards everything else. The walk through it
must take the pipelined fallback and give exactly the rows the fast path gives on the same tree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalkError
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.zk_proxy import ZooKeeperProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _connection(monkeypatch, conn_id: str, hosts: str, chroot: str) -> str:
    conn = {"conn_type": "kafka_zookeeper", "host": hosts, "extra": {"chroot": chroot, "connect_timeout": 5}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


def _rows(walk) -> list[tuple]:
    return [
        (r.path, r.data, r.czxid, r.mzxid, r.pzxid, r.version, r.cversion, r.ephemeral_owner, r.num_children)
        for r in walk.rows
    ]


@pytest.fixture
def cluster(zookeeper_server, zk_chroot, tmp_path) -> Iterator[str]:
    with DeployedCluster(incident_cluster(), zookeeper_server.connect_string, zk_chroot, tmp_path / "disks"):
        yield zk_chroot


@pytest.mark.parametrize("answer_unknown", [True, False], ids=["as-3.5-answers", "connection-closed-only"])
def test_walk_without_multiread_falls_back_and_reads_the_same_rows(
    zookeeper_server, cluster, monkeypatch, answer_unknown
):
    direct = _connection(monkeypatch, "zk_direct", zookeeper_server.connect_string, cluster)
    with KafkaZooKeeperHook(direct) as hook:
        fast = hook.snapshot()
    assert fast.method == "multi-read" and fast.consistent

    with ZooKeeperProxy(zookeeper_server.connect_string, answer_unknown=answer_unknown) as proxy:
        old = _connection(monkeypatch, "zk_old", proxy.connect_string, cluster)
        with KafkaZooKeeperHook(old) as hook:
            slow = hook.snapshot()  # method "auto", the default
        assert proxy.refused and set(proxy.refused) == {22}  # the walk did try multiRead first
        assert proxy.connections >= 2  # the refusal closed the connection; kazoo came back

    assert slow.method == "pipelined"
    assert _rows(slow) == _rows(fast) and len(_rows(fast)) > 100
    assert slow.consistent and slow.max_zxid_seen == fast.max_zxid_seen  # the same tree state


def test_forced_multiread_on_an_old_server_is_a_walk_error_not_a_hang(zookeeper_server, cluster, monkeypatch):
    with ZooKeeperProxy(zookeeper_server.connect_string) as proxy:
        old = _connection(monkeypatch, "zk_old", proxy.connect_string, cluster)
        with KafkaZooKeeperHook(old) as hook, pytest.raises(SnapshotWalkError, match="refused"):
            hook.snapshot(method="multi-read")
        assert proxy.refused == [22]


def test_the_proxy_forwards_everything_else(zookeeper_server, zk_chroot):
    from kazoo.client import KazooClient

    with ZooKeeperProxy(zookeeper_server.connect_string) as proxy:
        client = KazooClient(hosts=proxy.connect_string + zk_chroot, timeout=10.0)
        client.start(timeout=15.0)
        try:
            client.create("/a", b"1")
            transaction = client.transaction()  # multi (opcode 14) is 3.4+: forwarded
            transaction.create("/b", b"2")
            transaction.set_data("/a", b"3", version=0)
            assert transaction.commit() == ["/b", client.exists("/a")]
            assert client.get("/a")[0] == b"3" and sorted(client.get_children("/")) == ["a", "b"]
        finally:
            client.stop()
            client.close()
        assert proxy.refused == []
