"""The simulator writes what a real Kafka 3.3.1 cluster wrote, byte for byte (golden files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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
