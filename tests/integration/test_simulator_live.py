"""The incident cluster, built in a real ZooKeeper and on disk, read back through the core codecs only:
every incident must be visible in the raw data a Kafka tool would read."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.records import IndexProblemKind
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.readback import read_broker, read_zookeeper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployed(zookeeper_server, tmp_path_factory):
    chroot = zookeeper_server.new_chroot("/kafka_incidents_")
    cluster = incident_cluster()
    with DeployedCluster(
        cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("hosts")
    ) as d:
        client = KazooClient(hosts=d.zookeeper_connect)
        client.start()
        try:
            yield d, client, read_zookeeper(client)
        finally:
            client.stop()
            client.close()


@pytest.fixture(scope="module")
def disks(deployed):
    d, _, _ = deployed
    return {b: read_broker(b, host.server_properties) for b, host in d.hosts.items()}


def _topic(tree, name) -> zk.TopicAssignment:
    return tree[zk.topic_path(name)].decoded


def _disk_ids(disks, topic, kind=DirKind.NORMAL):
    return {
        (r.broker_id, r.name.partition): r.topic_id
        for disk in disks.values()
        for r in disk.replicas
        if r.name.topic == topic and r.name.kind is kind
    }


def test_every_znode_decodes_and_stats_are_kafkas(deployed):
    d, client, tree = deployed
    assert len(tree) > 150
    live = sorted(int(b) for b in client.get_children(zk.BROKER_IDS))
    assert live == [0, 1, 2, 5]
    for broker_id in live:
        stat = tree[zk.broker_path(broker_id)].stat
        assert stat.ephemeralOwner == d.writer.session_id(broker_id) != 0
        assert stat.version == 1
    controller = tree[zk.CONTROLLER]
    assert controller.decoded.broker_id == 2 and controller.stat.ephemeralOwner == d.writer.session_id(2)
    epoch = tree[zk.CONTROLLER_EPOCH]
    assert epoch.data == b"2" and epoch.stat.version == 2  # created 0, bumped by two elections
    for name, topic in d.cluster.topics.items():
        for p, part in topic.partitions.items():
            state = tree[zk.partition_state_path(name, p)]
            assert state.stat.version == part.state_version  # the partition epoch
    assert tree[zk.ADMIN].data is None and tree[zk.DELETE_TOPICS].data is None


def test_kafka_14190_mismatch_is_in_the_raw_data(deployed, disks):
    _, _, tree = deployed
    topic = _topic(tree, "clickstream")
    assert topic.topic_id is not None and len(topic.partitions) == 8
    on_disk = _disk_ids(disks, "clickstream")
    live_replicas = {k: v for k, v in on_disk.items() if k[0] not in (3, 4)}
    assert live_replicas, "clickstream has replicas on live brokers"
    # 3.3.1: every replica, old partitions and new ones alike, kept the original id
    assert len(set(on_disk.values())) == 1
    assert topic.topic_id not in set(on_disk.values())


def test_precursor_topic_znode_lacks_topic_id_while_replicas_have_one(deployed, disks):
    _, _, tree = deployed
    raw = tree[zk.topic_path("inventory-updates")].data
    assert b"topic_id" not in raw and b'"version":2' in raw
    ids = set(_disk_ids(disks, "inventory-updates").values())
    assert len(ids) == 1 and None not in ids


def test_rf1_partitions_of_the_stopped_broker_are_offline(deployed, disks):
    _, _, tree = deployed
    for p in (0, 1):
        state = tree[zk.partition_state_path("audit-rf1", p)].decoded
        assert (state.leader, state.isr) == (zk.NO_LEADER, (3,))
    rf1_on_broker_1 = [p for p, r in _topic(tree, "metrics-rf1").partitions.items() if r == (1,)]
    assert rf1_on_broker_1 == [0, 2, 4]
    assert {r.name.partition for r in disks[1].replicas if r.name.topic == "metrics-rf1"} == {0, 2, 4}
    assert disks[3].log_dirs[0].clean_shutdown is not None  # stopped cleanly


def test_stuck_and_leftover_deletions(deployed, disks):
    _, _, tree = deployed
    markers = {p.rsplit("/", 1)[1] for p in tree if p.startswith(zk.DELETE_TOPICS + "/")}
    assert markers == {"legacy-orders", "moving-topic"}
    # replica broker offline: znodes kept, live replicas gone, the stopped broker's replica still there
    assert zk.topic_path("legacy-orders") in tree
    assert {b for b, _ in _disk_ids(disks, "legacy-orders")} == {3}
    # reassignment in progress: the reassign znode and adding_replicas in the topic znode
    reassign = tree[zk.REASSIGN_PARTITIONS].decoded
    assert [(e.topic, e.partition, e.replicas) for e in reassign.partitions] == [("moving-topic", 0, (0, 5))]
    assert _topic(tree, "moving-topic").is_reassigning
    # finished in ZooKeeper, directories left on disk
    assert zk.topic_path("old-logs") not in tree and zk.config_entity_path("topics", "old-logs") not in tree
    leftovers = [r for disk in disks.values() for r in disk.replicas if r.name.topic == "old-logs"]
    assert sorted((r.broker_id, r.name.partition, r.name.kind) for r in leftovers) == [
        (2, 0, DirKind.DELETE),
        (2, 2, DirKind.DELETE),
        (5, 1, DirKind.NORMAL),
    ]
    delay_s = 60
    assert all(time.time() - r.path.stat().st_mtime > delay_s for r in leftovers)


def test_crashed_broker_has_no_marker_and_a_non_monotonic_index(deployed, disks):
    broker = disks[4]
    assert broker.log_dirs[0].clean_shutdown is None
    problems = [
        (r.name.topic, r.name.partition, p.kind)
        for r in broker.replicas
        for p in r.index_problems
        if p.corrupt
    ]
    assert ("sensor-readings", 0, IndexProblemKind.OFFSET_NOT_INCREASING) in problems
    assert {t for t, _, _ in problems} == {"sensor-readings"}
    healthy = [
        p for disk in disks.values() if disk.broker_id != 4 for r in disk.replicas for p in r.index_problems
    ]
    assert not [p for p in healthy if p.corrupt]


def test_broker_files_agree_with_zookeeper(deployed, disks):
    _, _, tree = deployed
    cluster_id = tree[zk.CLUSTER_ID].decoded.id
    for broker_id, disk in disks.items():
        assert disk.server_properties["broker.id"] == str(broker_id)
        for log_dir in disk.log_dirs:
            assert (log_dir.meta.broker_id, log_dir.meta.cluster_id) == (broker_id, cluster_id)
            normal = {
                (r.name.topic, r.name.partition) for r in log_dir.replicas if r.name.kind is DirKind.NORMAL
            }
            assert set(log_dir.checkpoints["replication-offset-checkpoint"].offsets) == normal


def test_sync_applies_a_later_step(zookeeper_server, tmp_path):
    chroot = zookeeper_server.new_chroot("/kafka_sync_")
    cluster = incident_cluster()
    with DeployedCluster(cluster, zookeeper_server.connect_string, chroot, tmp_path) as d:
        client = KazooClient(hosts=d.zookeeper_connect)
        client.start()
        try:
            cluster.stop_broker(5, clean=True)
            d.sync()
            assert sorted(client.get_children(zk.BROKER_IDS)) == ["0", "1", "2"]
            assert (d.hosts[5].log_dirs[0] / ".kafka_cleanshutdown").exists()
            assert (
                zk.PartitionState.decode(*_get(client, zk.partition_state_path("metrics-rf1", 5))).leader
                == -1
            )
        finally:
            client.stop()
            client.close()
    # closing the deployment ends every broker session: registrations vanish like on a shutdown
    check = KazooClient(hosts=zookeeper_server.connect_string + chroot)
    check.start()
    try:
        assert check.get_children(zk.BROKER_IDS) == []
    finally:
        check.stop()
        check.close()


def _get(client, path):
    return client.get(path)[0], path


def test_2_8_cluster_new_partitions_adopt_the_minted_id(zookeeper_server, tmp_path):
    cluster = incident_cluster(name="demo28", kafka_version="2.8.2")
    with DeployedCluster(
        cluster, zookeeper_server.connect_string, zookeeper_server.new_chroot(), tmp_path
    ) as d:
        disks = {b: read_broker(b, h.server_properties) for b, h in d.hosts.items()}
        client = KazooClient(hosts=d.zookeeper_connect)
        client.start()
        try:
            zk_id = zk.TopicAssignment.decode(*_get(client, zk.topic_path("clickstream"))).topic_id
        finally:
            client.stop()
            client.close()
    ids = _disk_ids(disks, "clickstream")
    new = {v for (_, p), v in ids.items() if p >= 6}
    old = {v for (_, p), v in ids.items() if p < 6}
    # 2.8.x: the partitions added by the old client had no partition.metadata yet and adopted the
    # id the new controller minted; the older partitions keep the original id and now disagree.
    assert new == {zk_id}
    assert len(old) == 1 and zk_id not in old
    mismatched = {
        i.partitions for i in cluster.incidents if i.kind == "topic_id_mismatch" and i.topic == "clickstream"
    }
    assert all(p < 6 for ps in mismatched for p in ps)
