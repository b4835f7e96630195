"""KafkaZooKeeperHook against a real ZooKeeper holding the incident cluster: typed reads through the
core codecs, and writes that exist only as guarded operations (refused on read-only connections)."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.zookeeper import (
    CheckVersionOp,
    CreateOp,
    DeleteOp,
    KafkaZooKeeperHook,
    MultiOpError,
    SetDataOp,
    WriteOutsideSessionError,
    ZnodeNotFoundError,
    ZnodeVersionConflictError,
    ZooKeeperWriteRefusedError,
)
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.maintenance import ScratchLoadGate
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster

pytestmark = pytest.mark.integration


def _connection(monkeypatch, conn_id, server, chroot, **extra):
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": server.connect_string,
                "extra": {"chroot": chroot, **extra},
            }
        ),
    )
    return conn_id


@pytest.fixture
def cluster(zookeeper_server, zk_chroot, tmp_path, monkeypatch):
    with DeployedCluster(
        incident_cluster(), zookeeper_server.connect_string, zk_chroot, tmp_path
    ) as deployed:
        client = KazooClient(hosts=zookeeper_server.connect_string + zk_chroot)
        client.start()
        rw = _connection(monkeypatch, "zk_rw", zookeeper_server, zk_chroot)
        ro = _connection(monkeypatch, "zk_ro", zookeeper_server, zk_chroot, read_only=True)
        try:
            yield deployed, client, rw, ro
        finally:
            client.stop()
            client.close()


def test_typed_reads_decode_through_the_core_codecs(cluster):
    deployed, client, _, ro = cluster
    model = deployed.cluster
    with KafkaZooKeeperHook(ro) as hook:
        assert hook.cluster_id() == model.cluster_id
        assert hook.live_broker_ids() == [0, 1, 2, 5]  # 3 and 4 are stopped
        assert "inventory-updates" in hook.list_topics()
        assignment, stat = hook.get_topic_assignment("inventory-updates")
        assert assignment.topic_id is None and len(assignment.partitions) == 5  # the KAFKA-14190 precursor
        assert stat.version == model.topic("inventory-updates").znode_version
        orders, _ = hook.get_topic_assignment("orders")
        assert orders.topic_id == model.topic("orders").zk_topic_id
        state, stat = hook.get_partition_state("audit-rf1", 0)
        assert state.leader == zk.NO_LEADER and state.isr == (3,)  # RF=1 on the stopped broker
        assert stat.version == model.topic("audit-rf1").partitions[0].state_version  # partition epoch
        broker, stat = hook.get_broker(0)
        assert broker.broker_id == 0 and broker.rack == "r1"
        assert stat.ephemeralOwner == deployed.writer.session_id(0)
        controller, _ = hook.get_controller()
        assert controller.broker_id == model.controller_id
        epoch, stat = hook.get_decoded(zk.CONTROLLER_EPOCH)
        assert epoch.epoch == model.controller_epoch and stat.version == model.controller_epoch_version
        with pytest.raises(ZnodeNotFoundError, match=r"/brokers/topics/nope \(chroot /kafka_test_"):
            hook.get_topic_assignment("nope")
        with pytest.raises(ZnodeNotFoundError):
            hook.get_broker(3)
    assert client.exists("/brokers/topics/nope") is None


def test_create_if_absent_never_overwrites(cluster):
    _, client, rw, _ = cluster
    with KafkaZooKeeperHook(rw) as hook:
        hook.bind_gate(ScratchLoadGate())  # guarded writes need a gate; the lease is tested in test_safety_*
        assert hook.create_if_absent("/scratch", None) is True
        assert hook.create_if_absent("/scratch", b"other") is False
        assert client.get("/scratch")[0] is None  # null data kept, not overwritten
        assert hook.create_if_absent("/deep/er/node", b"x", makepath=True) is True
        with pytest.raises(ZnodeNotFoundError, match="/no/parent"):
            hook.create_if_absent("/no/parent/here", b"x")


def test_set_if_version_refuses_a_stale_version(cluster):
    _, client, rw, _ = cluster
    path = zk.topic_path("orders")
    data, stat = client.get(path)
    with KafkaZooKeeperHook(rw) as hook:
        hook.bind_gate(ScratchLoadGate())  # guarded writes need a gate; the lease is tested in test_safety_*
        new_stat = hook.set_if_version(path, data, stat.version)
        assert new_stat.version == stat.version + 1
        with pytest.raises(
            ZnodeVersionConflictError, match=f"expected version {stat.version}, but it is at"
        ) as err:
            hook.set_if_version(path, b"stale write", stat.version)
        assert err.value.actual_version == stat.version + 1
        with pytest.raises(ZnodeVersionConflictError, match="it is gone"):
            hook.set_if_version("/missing", b"x", 0)
        with pytest.raises(ValueError, match="unversioned writes are not offered"):
            hook.set_if_version(path, data, -1)
    assert client.get(path)[0] == data


def test_multi_is_all_or_nothing_and_names_the_failing_op(cluster):
    _, client, rw, _ = cluster
    _, epoch_stat = client.get(zk.CONTROLLER_EPOCH)
    with KafkaZooKeeperHook(rw) as hook:
        hook.bind_gate(ScratchLoadGate())  # guarded writes need a gate; the lease is tested in test_safety_*
        with pytest.raises(
            MultiOpError, match=r"op 1 \(CheckVersionOp on /controller_epoch .*BadVersionError"
        ) as err:
            hook.multi(
                [
                    CreateOp("/fenced-write", b"1"),
                    CheckVersionOp(zk.CONTROLLER_EPOCH, epoch_stat.version + 7),
                ]
            )
        assert err.value.index == 1 and err.value.path == zk.CONTROLLER_EPOCH
        assert client.exists("/fenced-write") is None  # rolled back
        results = hook.multi(
            [
                CheckVersionOp(zk.CONTROLLER_EPOCH, epoch_stat.version),
                CreateOp("/fenced-write", None),
                SetDataOp("/fenced-write", b"2", 0),
                CreateOp("/fenced-write/child", b""),
                DeleteOp("/fenced-write/child", 0),
            ]
        )
        assert len(results) == 5
        data, stat = client.get("/fenced-write")
        assert data == b"2" and stat.version == 1 and stat.numChildren == 0
        applied = hook.multi_batches([[CreateOp(f"/bulk-{i}", b"")] for i in range(20)], window=4)
        assert applied == 20 and len([c for c in client.get_children("/") if c.startswith("bulk-")]) == 20
        with pytest.raises(MultiOpError, match="NodeExistsError") as err:
            hook.multi_batches([[CreateOp("/bulk-x", b"")], [CreateOp("/bulk-0", b"")]])
        assert err.value.committed_before == 1


def test_writes_outside_a_maintenance_session_are_refused(cluster):
    _, client, rw, _ = cluster
    path = zk.topic_path("orders")
    data, stat = client.get(path)
    with KafkaZooKeeperHook(rw) as hook:
        attempts = [
            lambda: hook.create_if_absent("/scratch", b"x"),
            lambda: hook.create_sequential("/scratch-", b"x"),
            lambda: hook.set_if_version(path, b"x", stat.version),
            lambda: hook.multi([CreateOp("/scratch", b"x")]),
            lambda: hook.multi_batches([[CreateOp("/scratch", b"x")]]),
        ]
        for attempt in attempts:
            with pytest.raises(WriteOutsideSessionError, match="only inside a maintenance session"):
                attempt()
    assert client.exists("/scratch") is None
    assert client.get(path) == (data, stat)


def test_read_only_connection_refuses_every_write(cluster):
    _, client, _, ro = cluster
    path = zk.topic_path("orders")
    data, stat = client.get(path)
    with KafkaZooKeeperHook(ro) as hook:
        attempts = [
            lambda: hook.create_if_absent("/scratch", b"x"),
            lambda: hook.set_if_version(path, b"x", stat.version),
            lambda: hook.multi([CreateOp("/scratch", b"x")]),
            lambda: hook.multi_batches([[CreateOp("/scratch", b"x")]]),
            lambda: hook.load_snapshot_rows([]),
        ]
        for attempt in attempts:
            with pytest.raises(ZooKeeperWriteRefusedError, match="'zk_ro' is read-only"):
                attempt()
    assert client.exists("/scratch") is None
    assert client.get(path) == (data, stat)


def test_secrets_never_reach_the_logs(zookeeper_server, zk_chroot, monkeypatch, caplog):
    monkeypatch.setenv(
        "AIRFLOW_CONN_ZK_SECRET",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "login": "kafka",
                "password": "pw-never-logged",
                "extra": {"chroot": zk_chroot},
            }
        ),
    )
    caplog.set_level("DEBUG")
    with KafkaZooKeeperHook("zk_secret") as hook:
        hook.bind_gate(ScratchLoadGate())
        hook.create_if_absent("/credentials", b"scram-secret-value")
        walk = hook.snapshot()
    assert any(r.data == b"scram-secret-value" for r in walk.rows)
    assert "pw-never-logged" not in caplog.text
    assert "scram-secret-value" not in caplog.text  # kazoo's DEBUG payload lines are dropped
