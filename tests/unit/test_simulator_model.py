"""The simulator's model follows Kafka's rules (pure: no ZooKeeper, no disk)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.testing.simulator.assignment import assign_replicas
from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster, SimulationError
from airflow_provider_kafka_zk.testing.simulator.scenarios import (
    deletion_disabled_cluster,
    healthy_cluster,
    incident_cluster,
)
from airflow_provider_kafka_zk.testing.simulator.spec import BrokerSpec, ClusterSpec, TopicSpec


def test_rack_unaware_assignment_is_kafkas_round_robin():
    out = assign_replicas({0: None, 1: None, 2: None}, 6, 2, random.Random(3))
    leaders = Counter(r[0] for r in out.values())
    assert leaders == {0: 2, 1: 2, 2: 2}  # leaders spread evenly
    assert all(len(set(r)) == 2 for r in out.values())


def test_rack_aware_assignment_puts_replicas_in_distinct_racks():
    brokers = {i: f"r{i % 3}" for i in range(6)}
    out = assign_replicas(brokers, 12, 3, random.Random(5))
    for replicas in out.values():
        assert len({brokers[b] for b in replicas}) == 3


def test_replication_factor_above_broker_count_is_refused():
    with pytest.raises(ValueError):
        assign_replicas({0: None}, 1, 2, random.Random(1))


def test_new_topics_get_ids_on_ibp_2_8_and_partition_metadata_only_from_3_0():
    def build(version, ibp=None):
        spec = ClusterSpec(
            "c",
            brokers=(BrokerSpec(0), BrokerSpec(1)),
            kafka_version=version,
            inter_broker_protocol_version=ibp,
            topics=(TopicSpec("t", 2, 2),),
        )
        return SimulatedCluster(spec)

    c33 = build("3.3.1")
    assert c33.topic("t").zk_topic_id is not None
    assert {d.topic_id for d in c33.dirs} == {c33.topic("t").zk_topic_id}
    c28 = build("2.8.2")
    assert c28.topic("t").zk_topic_id is not None
    assert {d.topic_id for d in c28.dirs} == {None}  # written only on a later LeaderAndIsr
    old_ibp = build("3.3.1", ibp="2.7")
    assert old_ibp.topic("t").zk_topic_id is None
    assert {d.topic_id for d in old_ibp.dirs} == {None}


@pytest.mark.parametrize("version", ["3.3.1", "2.8.2"])
def test_kafka_14190_old_client_add_then_failover(version):
    spec = ClusterSpec(
        "c",
        brokers=tuple(BrokerSpec(i) for i in range(3)),
        kafka_version=version,
        topics=(TopicSpec("t", 2, 2),),
    )
    cluster = SimulatedCluster(spec)
    if version.startswith("2.8"):
        cluster.controller_failover(1)  # a LeaderAndIsr gives 2.8 replicas their file
    original = cluster.topic("t").zk_topic_id
    assert {d.topic_id for d in cluster.dirs} == {original}
    cluster.old_client_adds_partitions("t", 4, client="1.0")
    assert cluster.topic("t").zk_topic_id is None and cluster.topic("t").znode_format == 1
    assert [i.kind for i in cluster.incidents] == ["topic_id_missing_in_zookeeper"]
    cluster.controller_failover()
    minted = cluster.topic("t").zk_topic_id
    assert minted not in (None, original)
    new_partition_ids = {d.topic_id for d in cluster.dirs if d.partition >= 2}
    old_partition_ids = {d.topic_id for d in cluster.dirs if d.partition < 2}
    assert old_partition_ids == {original}
    if version.startswith("3."):
        assert new_partition_ids == {original}  # 3.x: every replica keeps the original id
    else:
        assert new_partition_ids == {minted}  # 2.8.x: new partitions adopt the minted id
    kinds = {i.kind for i in cluster.incidents}
    assert kinds == {"topic_id_mismatch"}


def test_stopping_a_broker_takes_its_rf1_partitions_offline_keeping_it_in_isr():
    spec = ClusterSpec(
        "c",
        brokers=tuple(BrokerSpec(i) for i in range(3)),
        topics=(
            TopicSpec("rf1", 2, 1, assignment={0: (1,), 1: (2,)}),
            TopicSpec("rf3", 1, 3, assignment={0: (1, 0, 2)}),
        ),
    )
    cluster = SimulatedCluster(spec)
    cluster.stop_broker(1)
    rf1 = cluster.topic("rf1").partitions
    assert (rf1[0].leader, rf1[0].isr, rf1[0].leader_epoch) == (-1, [1], 1)
    assert rf1[1].leader == 2
    rf3 = cluster.topic("rf3").partitions[0]
    assert (rf3.leader, rf3.isr) == (0, [0, 2])
    assert cluster.replica_dirs("rf3", 0)[0].leader_epochs == [(0, 0), (1, 200)]
    with pytest.raises(SimulationError):
        cluster.stop_broker(1)


def test_stopping_the_controller_elects_another():
    cluster = healthy_cluster()
    assert cluster.controller_id == 0
    cluster.stop_broker(0)
    assert cluster.controller_id == 1 and cluster.controller_epoch == 2


def test_incident_cluster_ground_truth():
    cluster = incident_cluster()
    by_kind = {}
    for incident in cluster.incidents:
        by_kind.setdefault(incident.kind, []).append(incident)
    assert {i.topic for i in by_kind["topic_id_mismatch"]} == {"clickstream"}
    assert [i.topic for i in by_kind["topic_id_missing_in_zookeeper"]] == ["inventory-updates"]
    offline = {(i.topic, i.broker_id) for i in by_kind["offline_partitions"]}
    assert ("audit-rf1", 3) in offline
    stuck = {i.topic: i.detail for i in by_kind["deletion_stuck"]}
    assert stuck == {"legacy-orders": "replica_broker_offline", "moving-topic": "reassignment_in_progress"}
    assert {(i.broker_id, i.detail) for i in by_kind["leftover_dirs"]} == {(2, "delete"), (5, "normal")}
    assert [(i.broker_id, i.topic) for i in by_kind["corrupt_offset_index"]] == [(4, "sensor-readings")]
    assert [i.broker_id for i in by_kind["unclean_shutdown"]] == [4]
    # ZooKeeper view of the same facts
    assert cluster.topic("inventory-updates").zk_topic_id is None
    assert cluster.topic("audit-rf1").partitions[0].leader == -1
    assert "old-logs" not in cluster.topics
    assert cluster.delete_markers == {"legacy-orders", "moving-topic"}
    assert cluster.replica_dirs("legacy-orders", 0) == []  # live replicas deleted, znodes kept
    assert cluster.replica_dirs("legacy-orders", 3)  # the stopped broker still has its replica
    assert len(cluster.replica_dirs("old-logs", 2, kind=DirKind.DELETE)) == 2
    assert cluster.rf1_partitions_by_broker()[1] == [
        ("metrics-rf1", 0),
        ("metrics-rf1", 2),
        ("metrics-rf1", 4),
    ]


def test_deletion_disabled_keeps_the_topic_and_drops_the_marker():
    cluster = deletion_disabled_cluster()
    assert "keep-me" in cluster.topics and not cluster.delete_markers
    assert [i.kind for i in cluster.incidents] == ["deletion_ignored"]


def test_scenarios_are_deterministic():
    a, b = incident_cluster(), incident_cluster()
    assert a.cluster_id == b.cluster_id
    assert {t: m.zk_topic_id for t, m in a.topics.items()} == {t: m.zk_topic_id for t, m in b.topics.items()}
