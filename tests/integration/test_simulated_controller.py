"""The simulated controller carries out /admin/reassign_partitions the way Kafka's controller does."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController

pytestmark = pytest.mark.integration


@pytest.fixture
def live(zookeeper_server, tmp_path):
    spec = ClusterSpec(
        "ctl",
        brokers=tuple(BrokerSpec(i, rack=f"r{i % 2}") for i in range(4)),
        topics=(
            TopicSpec("rf1", 4, 1, assignment={0: (0,), 1: (0,), 2: (1,), 3: (2,)}),
            TopicSpec("rf2", 2, 2),
        ),
    )
    cluster = SimulatedCluster(spec)
    with DeployedCluster(
        cluster, zookeeper_server.connect_string, zookeeper_server.new_chroot(), tmp_path
    ) as d:
        client = KazooClient(hosts=d.zookeeper_connect)
        client.start()
        controller = SimulatedController(d, partitions_per_step=1)
        try:
            yield d, client, controller
        finally:
            controller.stop()
            client.stop()
            client.close()


def _request(client, entries, **extra):
    body = {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": r, **extra} for t, p, r in entries],
    }
    client.create(zk.REASSIGN_PARTITIONS, json.dumps(body).encode())


def test_reassignment_goes_through_kafkas_observable_states(live):
    deployed, client, controller = live
    _request(client, [("rf1", 0, [3]), ("rf1", 1, [2])])
    controller.step()  # U1: adding/removing written first, new replica dirs appear
    topic = zk.TopicAssignment.decode(client.get(zk.topic_path("rf1"))[0], zk.topic_path("rf1"))
    assert topic.adding_replicas == {0: (3,), 1: (2,)} and topic.removing_replicas == {0: (0,), 1: (0,)}
    assert topic.partitions[0] == (3, 0)
    assert (deployed.hosts[3].log_dirs[0] / "rf1-0").is_dir()
    steps = controller.run_until_idle()
    assert steps >= 2
    assert client.exists(zk.REASSIGN_PARTITIONS) is None  # deleted when the last entry finished
    topic = zk.TopicAssignment.decode(client.get(zk.topic_path("rf1"))[0], zk.topic_path("rf1"))
    assert topic.partitions[0] == (3,) and topic.partitions[1] == (2,) and not topic.is_reassigning
    state = zk.PartitionState.decode(
        client.get(zk.partition_state_path("rf1", 0))[0], zk.partition_state_path("rf1", 0)
    )
    assert (state.leader, state.isr) == (3, (3,))
    assert not (deployed.hosts[0].log_dirs[0] / "rf1-0").exists()
    moved = deployed.hosts[3].log_dirs[0] / "rf1-0"
    assert (moved / "partition.metadata").read_bytes().endswith(str(topic.topic_id).encode())
    assert sorted(controller.completed) == [("rf1", 0), ("rf1", 1)]


def test_znode_with_log_dirs_is_ignored_and_left_in_place(live):
    deployed, client, controller = live
    _request(client, [("rf1", 0, [3])], log_dirs=["any"])
    controller.step()
    assert controller.ignored and "log_dirs" in controller.ignored[0]
    assert client.exists(zk.REASSIGN_PARTITIONS) is not None
    assert not deployed.cluster.reassignment


def test_entries_for_unknown_partitions_are_dropped(live):
    _, client, controller = live
    _request(client, [("nope", 0, [1])])
    controller.step()
    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    assert controller.ignored == ["nope-0: unknown or queued for deletion"]


def test_removed_replicas_can_stay_as_delete_dirs(zookeeper_server, tmp_path):
    spec = ClusterSpec(
        "k",
        brokers=tuple(BrokerSpec(i) for i in range(3)),
        topics=(TopicSpec("t", 1, 1, assignment={0: (0,)}),),
    )
    with DeployedCluster(
        SimulatedCluster(spec), zookeeper_server.connect_string, zookeeper_server.new_chroot(), tmp_path
    ) as d:
        controller = SimulatedController(d, keep_delete_dirs=True)
        client = KazooClient(hosts=d.zookeeper_connect)
        client.start()
        try:
            _request(client, [("t", 0, [1])])
            controller.run_until_idle()
        finally:
            controller.stop()
            client.stop()
            client.close()
        leftovers = [x.kind for x in d.cluster.replica_dirs("t", 0, kind=None)]
        assert leftovers == [DirKind.DELETE]
        assert any(p.name.endswith("-delete") for p in d.hosts[0].log_dirs[0].iterdir())
