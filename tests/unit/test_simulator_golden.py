"""The simulator writes what a real Kafka 3.3.1 cluster wrote, byte for byte (golden files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from znode_shapes import kind_of, shape, shapes, znode_shape

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.testing.simulator import BrokerSpec, ClusterSpec, SimulatedCluster, TopicSpec
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1"


@pytest.fixture(scope="module")
def golden_tree() -> dict[str, dict]:
    return {z["path"]: z for z in json.loads((GOLDEN / "zk_tree.json").read_text())["znodes"]}


def _topic_specs(tree: dict[str, dict]) -> tuple[TopicSpec, ...]:
    specs = []
    for path, znode in sorted(tree.items()):
        match = re.fullmatch(r"/brokers/topics/([^/]+)", path)
        if not match:
            continue
        topic = zk.TopicAssignment.decode(znode["data"].encode(), path)
        config = zk.ConfigEntity.decode(
            tree[f"/config/topics/{topic.topic}"]["data"].encode(), f"/config/topics/{topic.topic}"
        )
        specs.append(
            TopicSpec(
                topic.topic,
                partitions=len(topic.partitions),
                replication_factor=len(topic.partitions[0]),
                config=config.config,
                assignment=dict(topic.partitions),
                topic_id=str(topic.topic_id),
                records_per_partition=0,
            )
        )
    return tuple(specs)


@pytest.fixture(scope="module")
def golden_like_cluster(golden_tree) -> SimulatedCluster:
    """The real cluster's declared shape (brokers, topics, assignments, ids), simulated."""
    cluster_id = json.loads(golden_tree["/cluster/id"]["data"])["id"]
    spec = ClusterSpec(
        "golden",
        kafka_version="3.3.1",
        brokers=tuple(BrokerSpec(i, host="127.0.0.1", port=25192 + i) for i in range(3)),
        topics=_topic_specs(golden_tree),
        cluster_id=cluster_id,
        controller=1,
        start_time_ms=1_795_322_031_000,
    )
    return SimulatedCluster(spec)


_TIMESTAMP = re.compile(rb'"timestamp":"[0-9]+"')


def _comparable(data: bytes | None) -> bytes | None:
    return None if data is None else _TIMESTAMP.sub(b'"timestamp":"T"', data)


def test_same_znodes_same_bytes_same_versions(golden_tree, golden_like_cluster):
    simulated = {r.path: r for r in render_zookeeper(golden_like_cluster)}
    real = {
        p: z
        for p, z in golden_tree.items()
        if p not in ("/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota")
    }
    assert len(real) == 162
    assert sorted(simulated) == sorted(real)
    for path, znode in real.items():
        record = simulated[path]
        expected = None if znode["data"] is None else znode["data"].encode()
        assert _comparable(record.data) == _comparable(expected), path
        assert (record.owner_broker is not None) == (znode["stat"]["ephemeralOwner"] != 0), path
        assert record.version == znode["stat"]["version"], path


def test_partition_dirs_hold_the_real_small_files(tmp_path, golden_like_cluster):
    hosts = write_broker_hosts(golden_like_cluster, tmp_path, "127.0.0.1:25181")
    for broker_id, host in hosts.items():
        real_dir = GOLDEN / f"broker{broker_id}" / "running"
        simulated_dir = host.log_dirs[0]
        real_meta = (real_dir / "meta.properties").read_bytes()
        simulated_meta = (simulated_dir / "meta.properties").read_bytes()
        # identical except the #<Date> comment line, which records when the broker first started
        assert real_meta.split(b"\n")[2:] == simulated_meta.split(b"\n")[2:]
        assert (simulated_dir / "cleaner-offset-checkpoint").read_bytes() == b""
        assert (simulated_dir / "log-start-offset-checkpoint").read_bytes() == (
            real_dir / "log-start-offset-checkpoint"
        ).read_bytes()
        for real_partition in (p for p in real_dir.iterdir() if p.is_dir()):
            simulated_partition = simulated_dir / real_partition.name
            for name in ("partition.metadata", "leader-epoch-checkpoint"):
                assert (simulated_partition / name).read_bytes() == (real_partition / name).read_bytes(), (
                    broker_id,
                    real_partition.name,
                    name,
                )


# ---------------------------------------------------------------------------------------------
# the incidents' znodes: every znode an incident scenario leaves has a layout the real cluster wrote
# ---------------------------------------------------------------------------------------------


def test_the_incidents_znodes_have_the_layouts_the_real_cluster_wrote(golden_tree):
    """The incident scenarios (KAFKA-14190 and its precursor, offline RF=1 partitions, stuck and
    disabled deletions, a restart, the topicId repair's and the rolling reset's clusters) at 3.3.1:
    every znode they leave is a kind the real 3.3.1 cluster had, in its layout, or a shape it showed
    when the incidents were reproduced on it (KAFKA_FORMATS §8): the old client's topic znode
    ``{"version":1,"partitions":{...}}`` without ``topic_id``, an offline partition's state with leader
    -1 keeping the dead broker in its ISR, a deletion marker without data."""
    from airflow_provider_kafka_zk.testing.simulator.scenarios import (
        deletion_disabled_cluster,
        incident_cluster,
        rolling_reset_cluster,
        topic_id_repair_cluster,
    )

    real = {
        p: (z["data"].encode() if z["data"] is not None else None, z["stat"]["ephemeralOwner"] != 0)
        for p, z in golden_tree.items()
        if p not in ("/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota")
    }
    allowed = shapes(real)
    # a registration with broker.rack set: the recorded 3.9.0 cluster's (same v5 format as 3.3.1's)
    recorded = json.loads(
        (GOLDEN.parent / "real-kafka-3.9-migration" / "zookeeper" / "00-zk-mode.json").read_text()
    )
    allowed |= shapes(
        {
            z["path"][4:]: (z["data"].encode(), True)
            for z in recorded["znodes"]
            if z["path"].startswith("/k39/brokers/ids/")
        }
    )
    state = json.loads(golden_tree["/brokers/topics/golden-rf1/partitions/0/state"]["data"])
    allowed |= {
        ("topic", False, shape({"version": 1, "partitions": {"0": [1, 2]}})),
        # a 2.4-2.7 client's rewrite (AdminZkClient/TopicZNode.encode, 2.7.0: v2, never a topic_id): from the
        # source, the reproduction used a 1.0-style tool
        (
            "topic",
            False,
            shape(
                {"version": 2, "partitions": {"0": [1, 2]}, "adding_replicas": {}, "removing_replicas": {}}
            ),
        ),
        # a reassignment in flight: adding/removing replicas in the topic znode (observed, §8)
        (
            "topic",
            False,
            shape(
                {
                    **json.loads(golden_tree["/brokers/topics/golden-rf1"]["data"]),
                    "adding_replicas": {"0": [2]},
                    "removing_replicas": {"0": [1]},
                }
            ),
        ),
        ("state", False, shape({**state, "leader": -1})),
        ("delete-marker", False, None),
    }
    seen: dict[tuple[str, bool, object], str] = {}
    for build in (
        incident_cluster,
        topic_id_repair_cluster,
        deletion_disabled_cluster,
        rolling_reset_cluster,
    ):
        cluster = build()
        assert cluster.spec.kafka_version == "3.3.1"
        for record in render_zookeeper(cluster):
            if record.path == "/admin/reassign_partitions":
                continue  # not on the real cluster's tree; its codec is source-checked (test_znodes)
            key = (kind_of(record.path), record.owner_broker is not None, znode_shape(record.data))
            seen.setdefault(key, f"{build.__name__}: {record.path}")
    unknown = {where: key for key, where in seen.items() if key not in allowed}
    assert not unknown, unknown
    # and the incidents' own shapes were all met (the test would pass vacuously otherwise)
    assert ("topic", False, shape({"version": 1, "partitions": {"0": [1, 2]}})) in seen
    assert ("state", False, shape({**state, "leader": -1})) in seen
    assert ("delete-marker", False, None) in seen
