"""ClusterState built from ZooKeeper snapshots: a real 3.3.1 dump, simulated incident clusters, bad data."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.model import (
    ALL_REPLICAS,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    ClusterState,
    ModelFindingKind,
    ThrottleRates,
)
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
from airflow_provider_kafka_zk.testing.simulator import SimulatedCluster, healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
from airflow_provider_kafka_zk.testing.simulator.rows import (
    cluster_rows,
    rows_from_records,
    rows_from_zk_dump,
)
from airflow_provider_kafka_zk.testing.simulator.zk_writer import ZnodeRecord

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1" / "zk_tree.json"


@cache
def golden_dump() -> dict:
    return json.loads(GOLDEN.read_text())


def golden_znode(path: str) -> dict:
    return next(z for z in golden_dump()["znodes"] if z["path"] == path)


@pytest.fixture(scope="module")
def golden() -> ClusterState:
    return ClusterState.from_snapshot(rows_from_zk_dump(golden_dump()), cluster="golden")


@pytest.fixture(scope="module")
def incident() -> SimulatedCluster:
    return incident_cluster()


@pytest.fixture(scope="module")
def incident_state(incident: SimulatedCluster) -> ClusterState:
    return ClusterState.from_snapshot(cluster_rows(incident), cluster="demo")


def build(rows: Iterable[ZnodeRow]) -> ClusterState:
    return ClusterState.from_snapshot(rows)


def with_data(rows: list[ZnodeRow], path: str, data: bytes | None, **stat: int) -> list[ZnodeRow]:
    """The rows with ``path``'s data (and optionally Stat fields) replaced; the path must exist."""
    assert any(r.path == path for r in rows), path
    return [dataclasses.replace(r, data=data, **stat) if r.path == path else r for r in rows]


def without(rows: list[ZnodeRow], path: str) -> list[ZnodeRow]:
    assert any(r.path == path for r in rows), path
    return [r for r in rows if r.path != path]


def plus(cluster: SimulatedCluster, *extra: ZnodeRecord) -> list[ZnodeRow]:
    """The cluster's snapshot rows with extra znodes (their parents must be in the tree)."""
    return rows_from_records([*render_zookeeper(cluster), *extra])


# --------------------------------------------------------------------------------------------
# The real Kafka 3.3.1 dump
# --------------------------------------------------------------------------------------------


def test_golden_dump_builds_completely_without_findings(golden: ClusterState) -> None:
    assert golden.findings == ()
    assert golden.znode_count == golden_dump()["count"]
    assert golden.cluster == "golden"
    assert golden.cluster_id == json.loads(golden_znode("/cluster/id")["data"])["id"]
    assert golden.last_zxid == max(
        max(z["stat"]["czxid"], z["stat"]["mzxid"], z["stat"]["pzxid"]) for z in golden_dump()["znodes"]
    )


def test_golden_brokers_are_live_with_their_czxid_as_broker_epoch(golden: ClusterState) -> None:
    assert golden.live_broker_ids == {0, 1, 2}
    for broker_id, broker in golden.brokers.items():
        znode = golden_znode(f"/brokers/ids/{broker_id}")
        registered = json.loads(znode["data"])
        assert broker.broker_id == broker_id
        assert broker.epoch == znode["stat"]["czxid"]
        assert broker.session_id == znode["stat"]["ephemeralOwner"] != 0
        assert (broker.registration.host, broker.registration.port) == (
            registered["host"],
            registered["port"],
        )
    assert len({b.epoch for b in golden.brokers.values()}) == 3
    assert golden.is_live(2) and not golden.is_live(3)


def test_golden_controller_epoch_value_and_fencing_version(golden: ClusterState) -> None:
    assert golden.controller_id == 1
    assert golden.controller_epoch == 1
    assert golden.controller_epoch_zk_version == golden_znode("/controller_epoch")["stat"]["version"]
    # /controller is owned by the controller broker's own session.
    assert golden.controller_session_id == golden.brokers[1].session_id


def test_golden_topics_with_ids_partitions_states_and_configs(golden: ClusterState) -> None:
    topic_znodes = {
        z["path"].rsplit("/", 1)[1]: z
        for z in golden_dump()["znodes"]
        if z["path"].count("/") == 3 and z["path"].startswith("/brokers/topics/")
    }
    assert set(golden.topics) == set(topic_znodes)
    assert len(golden.topics) == 5
    for name, topic in golden.topics.items():
        raw = json.loads(topic_znodes[name]["data"])
        assert topic.topic_id == KafkaUuid.parse(raw["topic_id"])
        assert topic.format_version == raw["version"] == 3
        assert topic.zk_version == topic_znodes[name]["stat"]["version"]
        assert topic.czxid == topic_znodes[name]["stat"]["czxid"]
        assert {p: list(info.replicas) for p, info in topic.partitions.items()} == {
            int(p): r for p, r in raw["partitions"].items()
        }
        assert not topic.has_delete_marker and not topic.is_reassigning
        for p, info in topic.partitions.items():
            state_znode = golden_znode(f"/brokers/topics/{name}/partitions/{p}/state")
            assert info.state is not None
            assert info.leader == json.loads(state_znode["data"])["leader"]
            assert info.partition_epoch == state_znode["stat"]["version"]
        assert topic.config == json.loads(golden_znode(f"/config/topics/{name}")["data"])["config"]

    offsets = golden.topics["__consumer_offsets"]
    assert offsets.partition_count == 50
    assert {len(p.replicas) for p in offsets.partitions.values()} == {1}
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in offsets.partitions.values())
    assert golden.topics["golden-config"].config["min.insync.replicas"] == "2"
    assert golden.topics["golden-rf1"].config == {}


def test_golden_cluster_level_znodes(golden: ClusterState) -> None:
    assert golden.pending_deletions == frozenset()
    assert golden.reassign_partitions is None and golden.reassigning_partitions == ()
    assert golden.preferred_replica_election is None and golden.migration is None
    assert golden.feature is not None and (golden.feature.version, golden.feature.status) == (2, 1)
    assert golden.producer_id_block is not None
    assert (
        golden.producer_id_block.broker_id
        == json.loads(golden_znode("/latest_producer_id_block")["data"])["broker"]
    )
    assert golden.replication_throttles.is_empty
    assert golden.config_change_notifications == golden.isr_change_notifications == ()
    assert golden.configs.brokers == {} and set(golden.configs.topics) == set(golden.topics)


def test_helpers_over_the_golden_state(golden: ClusterState) -> None:
    partitions = list(golden.partitions())
    assert len(partitions) == sum(t.partition_count for t in golden.topics.values())
    assert [p.topic_partition for p in partitions] == sorted(p.topic_partition for p in partitions)
    assert golden.topic("golden-rf3") is golden.topics["golden-rf3"]
    assert golden.topic("no-such-topic") is None
    assert golden.partition("golden-rf3", 2) is golden.topics["golden-rf3"].partitions[2]
    assert golden.partition("golden-rf3", 3) is None
    assert golden.partition("golden-rf3", 0).state_path == "/brokers/topics/golden-rf3/partitions/0/state"


def test_the_state_survives_pickling_for_spark(golden: ClusterState) -> None:
    assert pickle.loads(pickle.dumps(golden)) == golden  # noqa: S301 (our own bytes)


# --------------------------------------------------------------------------------------------
# The simulated incident cluster (ground truth: the simulator's own model and incidents)
# --------------------------------------------------------------------------------------------


def test_simulated_clusters_build_without_findings(incident_state: ClusterState) -> None:
    assert incident_state.findings == ()
    assert build(cluster_rows(healthy_cluster())).findings == ()


def test_inventory_updates_has_no_topic_id_although_the_controller_holds_one(
    incident: SimulatedCluster, incident_state: ClusterState
) -> None:
    topic = incident_state.topics["inventory-updates"]
    assert topic.topic_id is None
    assert incident.topic("inventory-updates").controller_topic_id is not None
    assert topic.format_version == incident.topic("inventory-updates").znode_format
    assert topic.partition_count == len(incident.topic("inventory-updates").partitions)
    precursor = [i for i in incident.incidents if i.kind == "topic_id_missing_in_zookeeper"]
    assert {i.topic for i in precursor} == {
        t.name for t in incident_state.topics.values() if t.topic_id is None
    }


def test_clickstream_carries_the_id_minted_at_failover(
    incident: SimulatedCluster, incident_state: ClusterState
) -> None:
    minted = incident.topic("clickstream").zk_topic_id
    assert incident_state.topics["clickstream"].topic_id == minted
    on_disk = {d.topic_id for d in incident.replica_dirs("clickstream")}
    assert on_disk - {minted}, "the replicas still hold the original id: the KAFKA-14190 mismatch"
    assert incident_state.topics["clickstream"].format_version == 3


def test_pending_deletions_and_their_topics(incident: SimulatedCluster, incident_state: ClusterState) -> None:
    assert (
        incident_state.pending_deletions
        == frozenset(incident.delete_markers)
        == {"legacy-orders", "moving-topic"}
    )
    assert {
        t.name for t in incident_state.topics.values() if t.has_delete_marker
    } == incident_state.pending_deletions
    assert "old-logs" not in incident_state.topics
    assert incident_state.deletion_markers_without_topic == frozenset()


def test_moving_topic_is_reassigning(incident: SimulatedCluster, incident_state: ClusterState) -> None:
    (moving, partition, target) = incident.reassignment[0]
    assert incident_state.reassigning_partitions == (zk.TopicPartition(moving, partition),)
    info = incident_state.partition(moving, partition)
    simulated = incident.topic(moving).partitions[partition]
    assert info.is_reassigning and incident_state.topics[moving].is_reassigning
    assert info.target_replicas == target
    assert info.adding_replicas == tuple(simulated.adding)
    assert info.removing_replicas == tuple(simulated.removing)
    assert set(info.original_replicas) == set(info.replicas) - set(simulated.adding)
    assert incident_state.reassign_partitions is not None
    assert incident_state.reassign_partitions.targets == {zk.TopicPartition(moving, partition): target}


def test_audit_rf1_partitions_on_the_stopped_broker_are_offline(
    incident: SimulatedCluster, incident_state: ClusterState
) -> None:
    planted = next(i for i in incident.incidents if i.kind == "offline_partitions" and i.topic == "audit-rf1")
    topic = incident_state.topics["audit-rf1"]
    offline = tuple(p for p, info in topic.partitions.items() if info.leader == zk.NO_LEADER)
    assert offline == planted.partitions
    for p in offline:
        assert topic.partitions[p].isr == (planted.broker_id,)  # Kafka keeps the dead broker in the ISR
        assert not incident_state.is_live(planted.broker_id)


def test_broker_epoch_is_the_creation_zxid_not_the_last_write(incident: SimulatedCluster) -> None:
    rows = {r.path: r for r in cluster_rows(incident)}
    state = build(rows.values())
    for broker_id, broker in state.brokers.items():
        row = rows[zk.broker_path(broker_id)]
        assert row.mzxid != row.czxid  # the simulated registration was rewritten once
        assert broker.epoch == row.czxid and broker.session_id == row.ephemeral_owner


def test_brokers_and_controller_follow_the_simulation(
    incident: SimulatedCluster, incident_state: ClusterState
) -> None:
    assert incident_state.live_broker_ids == set(incident.online_broker_ids())
    assert not incident_state.is_live(3) and not incident_state.is_live(4)
    assert incident_state.controller_id == incident.controller_id
    assert incident_state.controller_epoch == incident.controller_epoch
    assert incident_state.controller_epoch_zk_version == incident.controller_epoch_version
    assert incident_state.controller_session_id == incident_state.brokers[incident.controller_id].session_id


def test_partition_epochs_are_the_state_znode_versions(
    incident: SimulatedCluster, incident_state: ClusterState
) -> None:
    for info in incident_state.partitions():
        simulated = incident.topic(info.topic).partitions[info.partition]
        assert info.partition_epoch == simulated.state_version
        assert info.state.leader_epoch == simulated.leader_epoch


# --------------------------------------------------------------------------------------------
# Bad data becomes findings, never an exception
# --------------------------------------------------------------------------------------------

BAD_JSON = b'{"version":1,"partitions":{"0":[1,2]'


@pytest.mark.parametrize(
    "path",
    [
        "/brokers/topics/golden-rf3",
        "/brokers/topics/golden-rf3/partitions/1/state",
        "/config/topics/golden-rf3",
    ],
)
def test_malformed_json_is_one_finding_naming_the_znode(golden: ClusterState, path: str) -> None:
    state = build(with_data(rows_from_zk_dump(golden_dump()), path, BAD_JSON))
    assert [(f.path, f.kind) for f in state.findings] == [(path, ModelFindingKind.MALFORMED_ZNODE)]
    finding = state.findings[0]
    assert finding.data == BAD_JSON
    assert path in finding.message and "JSON" in finding.message
    under_topic = path.startswith("/brokers/topics/golden-rf3")
    assert state.findings_at("/brokers/topics/golden-rf3") == (state.findings if under_topic else ())
    assert state.findings_at("/brokers/topics/golden-rf") == ()  # a path prefix, not a parent
    # Everything else is exactly as in the intact snapshot.
    assert {n: t for n, t in state.topics.items() if n != "golden-rf3"} == {
        n: t for n, t in golden.topics.items() if n != "golden-rf3"
    }
    assert state.brokers == golden.brokers and state.controller == golden.controller


def test_what_remains_of_a_topic_with_a_malformed_znode(golden: ClusterState) -> None:
    rows = rows_from_zk_dump(golden_dump())
    no_topic = build(with_data(rows, "/brokers/topics/golden-rf3", BAD_JSON))
    assert "golden-rf3" not in no_topic.topics  # its states and config are not reported again
    no_state = build(with_data(rows, "/brokers/topics/golden-rf3/partitions/1/state", BAD_JSON))
    info = no_state.partition("golden-rf3", 1)
    assert info.state is None and info.partition_epoch is None and info.leader is None and info.isr == ()
    assert info.replicas == golden.partition("golden-rf3", 1).replicas
    no_config = build(with_data(rows, "/config/topics/golden-rf3", BAD_JSON))
    assert no_config.topics["golden-rf3"].config == {}


@cache
def _decodable_golden_paths() -> tuple[str, ...]:
    return tuple(
        z["path"]
        for z in golden_dump()["znodes"]
        if not isinstance(
            zk.decode_znode(z["path"], None if z["data"] is None else z["data"].encode()), (bytes, type(None))
        )
    )


def test_any_corrupted_znode_is_exactly_one_finding_and_never_an_exception() -> None:
    rows = rows_from_zk_dump(golden_dump())
    assert len(_decodable_golden_paths()) > 70
    for path in _decodable_golden_paths():
        state = build(with_data(rows, path, b"\xff not json"))
        assert [(f.path, f.kind) for f in state.findings] == [(path, ModelFindingKind.MALFORMED_ZNODE)], path


@pytest.mark.parametrize(
    ("path", "data", "expected"),
    [
        (
            "/brokers/topics/golden-rf3/partitions/0/state",
            b'{"controller_epoch":1,"leader":"0","version":1,"leader_epoch":0,"isr":[0,1,2]}',
            "'leader' as a 32-bit integer",
        ),
        ("/brokers/ids/1", b'{"version":5,"host":"h","port":true,"jmx_port":-1,"timestamp":"1"}', "'port'"),
        ("/controller_epoch", b"{}", "decimal integer"),
        ("/config/topics/golden-config", b'{"version":1,"config":{"min.insync.replicas":2}}', "JSON string"),
    ],
)
def test_wrong_types_are_findings(path: str, data: bytes, expected: str) -> None:
    state = build(with_data(rows_from_zk_dump(golden_dump()), path, data))
    assert [(f.path, f.kind) for f in state.findings] == [(path, ModelFindingKind.MALFORMED_ZNODE)]
    assert expected in state.findings[0].message


def test_a_broker_with_a_malformed_registration_is_not_counted_live() -> None:
    rows = with_data(rows_from_zk_dump(golden_dump()), "/brokers/ids/1", b"{")
    state = build(rows)
    assert state.live_broker_ids == {0, 2}
    assert state.controller_id == 1  # the controller znode itself is fine


def test_bad_topic_name_in_a_path() -> None:
    cluster = healthy_cluster()
    topic = zk.TopicAssignment("x", {0: (0, 1)}).encode()
    state = build(plus(cluster, ZnodeRecord("/brokers/topics/bad name!", topic)))
    assert [(f.path, f.kind) for f in state.findings] == [
        ("/brokers/topics/bad name!", ModelFindingKind.INVALID_TOPIC_NAME)
    ]
    assert set(state.topics) == set(cluster.topics)


def test_state_znodes_that_do_not_fit_the_assignment() -> None:
    cluster = healthy_cluster()
    state_data = zk.PartitionState("orders", 99, 0, 0, 1, (0,)).encode()
    rows = plus(
        cluster,
        ZnodeRecord("/brokers/topics/orders/partitions/99", None),
        ZnodeRecord("/brokers/topics/orders/partitions/99/state", state_data),
        ZnodeRecord("/brokers/topics/ghost", None),  # a topic znode without data...
        ZnodeRecord("/brokers/topics/ghost/partitions", None),
        ZnodeRecord("/brokers/topics/ghost/partitions/0", None),
        ZnodeRecord("/brokers/topics/ghost/partitions/0/state", state_data),
        ZnodeRecord("/brokers/topics/lost-state/partitions", None),
        ZnodeRecord("/brokers/topics/lost-state/partitions/0", None),
        ZnodeRecord("/brokers/topics/lost-state/partitions/0/state", state_data),
    )
    rows = without(rows, "/brokers/topics/orders/partitions/2/state")
    state = build(rows)
    kinds = {(f.path, f.kind) for f in state.findings}
    assert kinds == {
        ("/brokers/topics/orders/partitions/99/state", ModelFindingKind.ORPHAN_PARTITION_STATE),
        ("/brokers/topics/orders/partitions/2/state", ModelFindingKind.MISSING_PARTITION_STATE),
        ("/brokers/topics/ghost", ModelFindingKind.MALFORMED_ZNODE),  # ...whose states are not reported again
        ("/brokers/topics/lost-state/partitions/0/state", ModelFindingKind.ORPHAN_PARTITION_STATE),
    }
    orphan = next(f for f in state.findings if f.path.endswith("/99/state"))
    assert orphan.data == state_data and "not in the assignment" in orphan.message
    assert "no topic znode" in next(f.message for f in state.findings if "lost-state" in f.path)
    assert state.partition("orders", 99) is None
    assert state.partition("orders", 2).state is None
    assert state.topics["orders"].partition_count == len(cluster.topic("orders").partitions)


def test_topic_configs_without_topic_and_topics_without_config() -> None:
    cluster = healthy_cluster()
    ghost_config = zk.ConfigEntity("topics", "ghost", {"retention.ms": "1"}).encode()
    rows = without(plus(cluster, ZnodeRecord("/config/topics/ghost", ghost_config)), "/config/topics/orders")
    state = build(rows)
    assert {(f.path, f.kind) for f in state.findings} == {
        ("/config/topics/ghost", ModelFindingKind.ORPHAN_TOPIC_CONFIG),
        ("/config/topics/orders", ModelFindingKind.MISSING_TOPIC_CONFIG),
    }
    assert state.topics["orders"].config == {}
    assert state.configs.topics["ghost"] == {"retention.ms": "1"}  # still readable


def test_a_deletion_marker_for_a_gone_topic_explains_its_config() -> None:
    cluster = healthy_cluster()
    rows = plus(
        cluster,
        ZnodeRecord("/config/topics/gone", zk.ConfigEntity("topics", "gone", {}).encode()),
        ZnodeRecord("/admin/delete_topics/gone", None),
    )
    state = build(rows)
    assert state.pending_deletions == {"gone"} == state.deletion_markers_without_topic
    (finding,) = state.findings
    assert finding.kind is ModelFindingKind.ORPHAN_TOPIC_CONFIG and "deletion marker" in finding.message


def test_a_duplicated_path_keeps_the_first_row() -> None:
    rows = rows_from_zk_dump(golden_dump())
    first = next(r for r in rows if r.path == "/brokers/topics/golden-rf1")
    second = dataclasses.replace(first, data=zk.TopicAssignment("golden-rf1", {0: (0,)}).encode())
    state = build([*rows, second])
    assert [(f.path, f.kind) for f in state.findings] == [
        ("/brokers/topics/golden-rf1", ModelFindingKind.DUPLICATE_ZNODE)
    ]
    assert state.topics["golden-rf1"].partition_count == 4


# --------------------------------------------------------------------------------------------
# Facts the model must not get wrong
# --------------------------------------------------------------------------------------------


def test_topic_id_is_the_key_never_the_version() -> None:
    rows = rows_from_zk_dump(golden_dump())
    v3_without = b'{"version":3,"partitions":{"0":[0],"1":[1],"2":[2],"3":[0]},"adding_replicas":{},"removing_replicas":{}}'
    v1_with = (
        b'{"version":1,"partitions":{"0":[0],"1":[1],"2":[2],"3":[0]},"topic_id":"gEeS5vb_TN6AyZNqyRmEPQ"}'
    )
    assert (
        build(with_data(rows, "/brokers/topics/golden-rf1", v3_without)).topics["golden-rf1"].topic_id is None
    )
    old_format = build(with_data(rows, "/brokers/topics/golden-rf1", v1_with)).topics["golden-rf1"]
    assert old_format.topic_id == KafkaUuid.parse("gEeS5vb_TN6AyZNqyRmEPQ")
    assert old_format.format_version == 1


def test_controller_epoch_value_and_zk_version_are_different_things() -> None:
    rows = with_data(rows_from_zk_dump(golden_dump()), "/controller_epoch", b"3", version=7)
    state = build(rows)
    assert (state.controller_epoch, state.controller_epoch_zk_version) == (3, 7)


def test_a_persistent_controller_znode_and_migration_state() -> None:
    cluster = healthy_cluster()
    migration = zk.MigrationZNode(3000, 5, 1234, 5)
    records = [r for r in render_zookeeper(cluster) if r.path != zk.CONTROLLER]
    records += [
        ZnodeRecord(zk.CONTROLLER, zk.ControllerRegistration(3000, 1, 2, kraft_controller_epoch=5).encode()),
        ZnodeRecord(zk.MIGRATION, migration.encode()),
    ]
    state = build(rows_from_records(records))
    assert state.controller_id == 3000 and state.controller_session_id == 0
    assert state.controller.is_kraft_controller
    assert state.migration == migration


def test_a_restarted_broker_gets_a_new_epoch_and_session() -> None:
    cluster = healthy_cluster()
    before_rows = cluster_rows(cluster)
    cluster.brokers[2].registered_at_ms += 60_000  # broker 2 registered again
    after = build(cluster_rows(cluster, previous=before_rows))
    before = build(before_rows)
    assert after.brokers[2].epoch > before.brokers[2].epoch
    assert after.brokers[2].session_id != before.brokers[2].session_id
    assert {b: after.brokers[b].epoch for b in (0, 1, 3)} == {b: before.brokers[b].epoch for b in (0, 1, 3)}


def test_notifications_and_admin_requests() -> None:
    cluster = healthy_cluster()
    cluster.config_changes += ["topics/orders", "brokers/<default>"]
    isr = zk.IsrChangeNotification(7, (zk.TopicPartition("orders", 1),))
    log_dir = zk.LogDirEventNotification(3, broker_id=4)
    election = zk.PreferredReplicaElection((zk.TopicPartition("orders", 0),))
    state = build(
        plus(
            cluster,
            ZnodeRecord(isr.path, isr.encode()),
            ZnodeRecord(zk.isr_change_path(2), zk.IsrChangeNotification(2, ()).encode()),
            ZnodeRecord(log_dir.path, log_dir.encode()),
            ZnodeRecord(zk.PREFERRED_REPLICA_ELECTION, election.encode()),
        )
    )
    assert state.findings == ()
    assert [(n.entity_type, n.entity_name) for n in state.config_change_notifications] == [
        ("topics", "orders"),
        ("brokers", "<default>"),
    ]
    assert [n.sequence for n in state.isr_change_notifications] == [2, 7]
    assert state.isr_change_notifications[1] == isr
    assert state.log_dir_event_notifications == (log_dir,)
    assert state.preferred_replica_election == election


def test_a_reassign_znode_kafka_ignores_is_a_finding() -> None:
    cluster = healthy_cluster()
    bad = b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}'
    state = build(plus(cluster, ZnodeRecord(zk.REASSIGN_PARTITIONS, bad)))
    (finding,) = state.findings
    assert finding.path == zk.REASSIGN_PARTITIONS and "log_dirs" in finding.message
    assert state.reassign_partitions is None


# --------------------------------------------------------------------------------------------
# Config entities and replication throttles
# --------------------------------------------------------------------------------------------


def test_replication_throttles_are_parsed_and_resolved_per_broker() -> None:
    cluster = healthy_cluster()
    cluster.broker_configs["1"] = {LEADER_THROTTLED_RATE: "1000", FOLLOWER_THROTTLED_RATE: "2000"}
    cluster.broker_configs["<default>"] = {LEADER_THROTTLED_RATE: "500", "log.cleaner.threads": "2"}
    cluster.broker_configs["4"] = {"log.cleaner.threads": "4"}
    cluster.topic("orders").config.update(
        {LEADER_THROTTLED_REPLICAS: "0:1, 1:2,3:0", FOLLOWER_THROTTLED_REPLICAS: "*"}
    )
    cluster.topic("payments.v1-events").config[FOLLOWER_THROTTLED_REPLICAS] = ""
    state = build(cluster_rows(cluster))
    assert state.findings == ()
    throttles = state.replication_throttles
    assert set(throttles.broker_rates) == {"1", "<default>"}
    assert throttles.rates_for(1) == ThrottleRates(1000, 2000)
    assert throttles.rates_for(2) == ThrottleRates(500, None)
    assert throttles.rates_for(4) == ThrottleRates(500, None)
    orders = throttles.topic_replicas["orders"]
    assert orders.leader == {(0, 1), (1, 2), (3, 0)}
    assert orders.follower == ALL_REPLICAS
    assert throttles.topic_replicas["payments.v1-events"].follower == frozenset()
    assert "__consumer_offsets" not in throttles.topic_replicas
    assert state.configs.broker(4) == {"log.cleaner.threads": "4"}
    assert state.configs.broker(0) == {}
    assert state.configs.broker_default["log.cleaner.threads"] == "2"
    assert state.configs.of_type("brokers") is state.configs.brokers


@pytest.mark.parametrize(
    ("entity", "key", "value"),
    [
        ("topics/orders", LEADER_THROTTLED_REPLICAS, "0-1,1:2"),
        ("topics/orders", FOLLOWER_THROTTLED_REPLICAS, "*,0:1"),
        ("brokers/1", LEADER_THROTTLED_RATE, "10MB"),
    ],
)
def test_throttle_values_a_broker_would_reject_are_findings(entity: str, key: str, value: str) -> None:
    cluster = healthy_cluster()
    entity_type, name = entity.split("/")
    if entity_type == "topics":
        cluster.topic(name).config[key] = value
    else:
        cluster.broker_configs[name] = {key: value}
    state = build(cluster_rows(cluster))
    (finding,) = state.findings
    assert (finding.path, finding.kind) == (f"/config/{entity}", ModelFindingKind.MALFORMED_CONFIG_VALUE)
    assert key in finding.message and value in finding.message


def test_other_config_entity_types() -> None:
    cluster = healthy_cluster()
    quota = {"producer_byte_rate": "1024"}
    state = build(
        plus(
            cluster,
            ZnodeRecord("/config/users/alice", zk.ConfigEntity("users", "alice", quota).encode()),
            ZnodeRecord("/config/users/alice/clients", None),
            ZnodeRecord(
                "/config/users/alice/clients/app",
                zk.ConfigEntity("users", "alice/clients/app", quota).encode(),
            ),
            ZnodeRecord("/config/clients/<default>", zk.ConfigEntity("clients", "<default>", quota).encode()),
            ZnodeRecord(
                "/config/ips/10.0.0.1",
                zk.ConfigEntity("ips", "10.0.0.1", {"connection_creation_rate": "5"}).encode(),
            ),
        )
    )
    assert state.findings == ()
    assert state.configs.users == {"alice": quota, "alice/clients/app": quota}
    assert state.configs.clients == {"<default>": quota}
    assert state.configs.ips["10.0.0.1"] == {"connection_creation_rate": "5"}
    with pytest.raises(ValueError, match="entity type"):
        state.configs.of_type("groups")


# --------------------------------------------------------------------------------------------
# The rows helper (synthetic Stat for simulated clusters)
# --------------------------------------------------------------------------------------------


def test_synthetic_stat_is_plausible() -> None:
    cluster = incident_cluster()
    records = render_zookeeper(cluster)
    rows = rows_from_records(records)
    by_path = {r.path: r for r in rows}
    assert [r.path for r in rows] == [r.path for r in records]
    assert len({r.czxid for r in rows}) == len(rows)
    for record in records:
        row = by_path[record.path]
        assert row.data == record.data and row.version == record.version
        assert row.mzxid >= row.czxid and row.mtime >= row.ctime
        assert (row.ephemeral_owner != 0) == (record.owner_broker is not None)
        parent = record.path.rsplit("/", 1)[0]
        if parent in by_path:
            assert by_path[parent].czxid < row.czxid
            assert by_path[parent].pzxid >= row.czxid
    children = {p: sum(1 for q in by_path if q.rsplit("/", 1)[0] == p) for p in by_path}
    assert all(by_path[p].num_children == n for p, n in children.items())


def test_rows_carry_the_stat_of_an_earlier_snapshot_over() -> None:
    cluster = healthy_cluster()
    before = {r.path: r for r in cluster_rows(cluster)}
    cluster.topic("orders").config["retention.ms"] = "1000"
    cluster.controller_failover(new_controller=3)
    after = {r.path: r for r in cluster_rows(cluster, previous=before.values())}
    assert after["/brokers/topics/orders"] == before["/brokers/topics/orders"]
    changed = after["/config/topics/orders"]
    assert changed.czxid == before["/config/topics/orders"].czxid
    assert changed.mzxid > max(r.mzxid for r in before.values())
    assert after["/controller"].czxid > before["/controller"].czxid  # a new ephemeral
    assert after["/controller"].ephemeral_owner == after["/brokers/ids/3"].ephemeral_owner
    assert after["/controller_epoch"].version == before["/controller_epoch"].version + 1
