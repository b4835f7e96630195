"""Each release of the version matrix (0.11 to 3.9, ZooKeeper mode): the formats the simulator writes
for it, and the audit on its incident cluster finding exactly what was planted.

What each release writes was read from Kafka's source at the release tag (cited where the rule
lives: ``kafka/versions.py`` and the simulator); 3.3.1 is also checked byte for byte against a real
cluster (test_simulator_golden.py). Here every codec and parser of the project reads every release's
output, and each release-dependent fact is asserted on its own.
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.log_scan import scan_partition
from airflow_provider_kafka_zk.kafka.log_scan_rules import index_rule
from airflow_provider_kafka_zk.kafka.logdir import (
    CleanShutdownMarker,
    DirKind,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
    format_partition_dir_name,
    parse_partition_dir_name,
)
from airflow_provider_kafka_zk.kafka.versions import (
    MATRIX_RELEASES,
    KafkaVersion,
    caps_suffixed_dir_names,
    has_stray_dirs,
    matrix_release,
)
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    SimulatedCluster,
    SimulationError,
    TopicSpec,
    healthy_cluster,
    incident_cluster,
)
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.expectations import expected_findings, found, unexpected
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows

LINES = list(MATRIX_RELEASES)
TAKEN = datetime(2026, 11, 22, 6, 0, tzinfo=UTC)


def _v(line: str) -> KafkaVersion:
    return KafkaVersion.parse(line)


def _tree(cluster) -> dict[str, bytes | None]:
    return {r.path: r.data for r in render_zookeeper(cluster)}


def _owners(cluster) -> dict[str, int | None]:
    return {r.path: r.owner_broker for r in render_zookeeper(cluster)}


def test_matrix_lines_name_one_release_each_and_4x_is_refused():
    assert LINES == ["0.11", "1.1", "2.0", "2.3", "2.4", "2.7", "2.8", "3.0", "3.3", "3.6", "3.9"]
    assert matrix_release("2.3") == "2.3.1" and matrix_release("3.3") == "3.3.1"
    assert matrix_release("2.8.0") == "2.8.0"  # a full release stays as given
    with pytest.raises(KafkaFormatError, match="ZooKeeper-mode"):
        matrix_release("4.0")
    with pytest.raises(KafkaFormatError):
        matrix_release("three")


@pytest.fixture(scope="module", params=LINES)
def incident(request):
    line = request.param
    return line, incident_cluster(kafka_version=MATRIX_RELEASES[line])


def test_every_znode_decodes_with_the_project_codecs(incident):
    _, cluster = incident
    for path, data in _tree(cluster).items():
        zk.decode_znode(path, data)  # raises ZnodeFormatError on anything Kafka would not read


def test_topic_znode_version_keys_and_topic_id_follow_the_release(incident):
    line, cluster = incident
    v = _v(line)
    tree = _tree(cluster)
    orders = json.loads(tree[zk.topic_path("orders")])
    moving = json.loads(tree[zk.topic_path("moving-topic")])
    if v < _v("2.4"):  # TopicZNode.encode 1.1.0-2.3.0 (0.11 ZkUtils.replicaAssignmentZkData): v1
        assert set(orders) == {"version", "partitions"} and orders["version"] == 1
        # the pre-2.4 controller writes new ++ old replicas and nothing else while it moves
        assert set(moving) == {"version", "partitions"} and moving["partitions"]["0"] == [0, 5, 1]
    elif v < _v("2.8"):  # 2.4.0-2.7.x: v2, adding/removing always present, never topic_id
        assert set(orders) == {"version", "partitions", "adding_replicas", "removing_replicas"}
        assert orders["version"] == 2 and orders["adding_replicas"] == {}
        assert moving["adding_replicas"] == {"0": [5]} and moving["removing_replicas"] == {"0": [1]}
    else:  # 2.8.0+: v3 with topic_id when known
        assert orders["version"] == 3 and len(orders["topic_id"]) == 22
        precursor = json.loads(tree[zk.topic_path("inventory-updates")])
        assert "topic_id" not in precursor and precursor["version"] == 2  # the 2.7 client's write
    if v < _v("2.8"):
        assert not any(b'"topic_id"' in (data or b"") for data in tree.values())


def test_broker_registration_controller_feature_and_migration_znodes(incident):
    line, cluster = incident
    v = _v(line)
    tree, owners = _tree(cluster), _owners(cluster)
    registration = json.loads(tree[zk.broker_path(0)])
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert registration["rack"] == "r1" and registration["endpoints"] == ["PLAINTEXT://127.0.0.2:9092"]
    if v < _v("2.7"):  # BrokerInfo/Broker.toJson: v4 from IBP 0.10.0-IV1, v5 from 2.7-IV0
        assert registration["version"] == 4 and "features" not in registration
    else:
        assert registration["version"] == 5 and registration["features"] == {}  # createEmpty() in ZK mode
    controller = json.loads(tree[zk.CONTROLLER])
    assert owners[zk.CONTROLLER] == cluster.controller_id  # ephemeral, the controller's session
    if v < _v("3.4"):
        assert set(controller) == {"version", "brokerid", "timestamp"} and controller["version"] == 1
    else:
        assert controller["version"] == 2 and controller["kraftControllerEpoch"] == -1
    feature = tree.get(zk.FEATURE)
    if v < _v("2.7"):
        assert feature is None
    else:
        decoded = zk.FeatureZNode.decode(feature)
        assert decoded.status == zk.FEATURE_ENABLED and decoded.features == {}
        assert decoded.version == (2 if v >= _v("3.3") else 1)
    assert zk.MIGRATION not in tree  # only while a KRaft controller migrates the cluster


def test_persistent_paths_are_the_releases_own(incident):
    line, cluster = incident
    v = _v(line)
    tree = _tree(cluster)
    assert (zk.LOG_DIR_EVENT_NOTIFICATION in tree) is (v >= _v("1.0"))
    assert ("/config/users" in tree) is (v >= _v("1.1"))
    assert ("/config/brokers" in tree) is (v >= _v("1.1"))
    assert ("/config/ips" in tree) is (v >= _v("2.8"))
    assert {"/config/topics", "/config/clients", zk.CONFIG_CHANGES, zk.DELETE_TOPICS} <= set(tree)


def test_broker_disks_hold_the_releases_files(incident, tmp_path):
    line, cluster = incident
    v = _v(line)
    hosts = write_broker_hosts(cluster, tmp_path, "127.0.0.1:2181/kafka")
    for broker_id, host in hosts.items():
        (log_dir,) = host.log_dirs
        meta = MetaProperties.parse((log_dir / "meta.properties").read_bytes(), "meta.properties")
        assert meta.broker_id == broker_id
        assert (meta.cluster_id is not None) is (v >= _v("2.4"))  # cluster.id from 2.4
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
            OffsetCheckpoint.parse((log_dir / name).read_bytes(), name)  # 0.11+: both always there
        for replica in (d for d in log_dir.iterdir() if d.is_dir() and d.name.startswith("orders-")):
            LeaderEpochCheckpoint.parse((replica / "leader-epoch-checkpoint").read_bytes(), "epochs")
            metadata = replica / "partition.metadata"
            assert metadata.exists() is (v >= _v("2.8"))  # IBP < 2.8 keeps (deletes) no such file
            if metadata.exists():
                assert (
                    PartitionMetadata.parse(metadata.read_bytes(), "pm").topic_id
                    == cluster.topic("orders").zk_topic_id
                )
    marker = hosts[3].log_dirs[0] / ".kafka_cleanshutdown"  # broker 3 stopped cleanly
    content = CleanShutdownMarker.parse(marker.read_bytes(), "marker")
    assert (content.version is not None) is (v >= _v("3.7"))
    assert not (hosts[4].log_dirs[0] / ".kafka_cleanshutdown").exists()  # broker 4 crashed


def _batch_offsets(log: bytes) -> dict[int, tuple[int, int]]:
    out, pos = {}, 0
    while pos + 61 <= len(log):
        base, length = struct.unpack_from(">qi", log, pos)
        (delta,) = struct.unpack_from(">i", log, pos + 23)
        out[pos] = (base, base + delta)
        pos += length + 12
    return out


def test_offset_index_entries_hold_the_first_offset_before_2_0_and_the_last_from_2_0(incident, tmp_path):
    line, cluster = incident
    v = _v(line)
    hosts = write_broker_hosts(cluster, tmp_path, "127.0.0.1:2181/kafka")
    replica = hosts[0].log_dirs[0] / "sensor-readings-0"  # a healthy copy of the planted partition
    log = (replica / "00000000000000000000.log").read_bytes()
    index = (replica / "00000000000000000000.index").read_bytes()
    batches = _batch_offsets(log)
    entries = [struct.unpack_from(">ii", index, i) for i in range(0, len(index), 8)]
    entries = [e for e in entries if e != (0, 0)]  # the active segment's preallocated zero tail
    assert len(entries) > 10
    which = 1 if v >= _v("2.0") else 0
    assert all(rel == batches[pos][which] for rel, pos in entries)
    # the pre-restart scan with the release's rule finds nothing; the other release rule would
    scan = scan_partition(str(replica), None, index_rule=index_rule(v))
    assert not [p for s in scan["segments"] for p in s["index"]["problems"]]
    other = "first" if index_rule(v) == "last" else "last"
    wrong = scan_partition(str(replica), None, index_rule=other)
    assert [p for s in wrong["segments"] for p in s["index"]["problems"]]
    # broker 4's planted non-monotonic index is found with either release's rule
    planted = scan_partition(str(hosts[4].log_dirs[0] / "sensor-readings-0"), None, index_rule=index_rule(v))
    kinds = {p["kind"] for s in planted["segments"] for p in s["index"]["problems"]}
    assert kinds == {"index_not_monotonic"}


def _audit(cluster, tmp_path: Path, kafka_version: str | None = None) -> list:
    base = tmp_path / "artefacts"
    name = cluster.spec.name
    snapshot = write_snapshot_rows(base, name, cluster_rows(cluster), TAKEN)
    live = cluster.online_broker_ids()
    facts = {
        b: {
            "broker.id": b,
            "inter.broker.protocol.version": str(cluster.spec.ibp),
            "min.insync.replicas": cluster.spec.min_insync_replicas,
            "delete.topic.enable": True,
            **({"kafka_version": kafka_version} if kafka_version else {}),
        }
        for b in live
    }
    inventory = write_inventory_dirs(
        base,
        name,
        "20261122T060000",
        audit_dirs(cluster),
        broker_facts=facts,
        expected=sorted(cluster.brokers),
    )
    summary = audit_job.run_audit(
        str(base), name, snapshot=str(snapshot), previous=None, inventory=str(inventory), engine="in-process"
    )
    return audit_job.read_findings(summary.get("findings_path") or summary["out"])


def test_the_audit_finds_exactly_the_planted_incidents(incident, tmp_path):
    line, cluster = incident
    findings = _audit(cluster, tmp_path)
    actual = found(findings)
    assert unexpected(expected_findings(cluster, cluster.online_broker_ids()), actual) == {}
    assert actual["preferred-leader-imbalance"] == {(None, 5)}
    assert ("moving-topic", None) in actual["deletion-pending"]
    assert "reassignment-stale" not in actual  # a pre-2.4 move is read from the union of replicas
    topic_id_checks = {c for c in actual if c.startswith("topic-id") or c == "kraft-readiness"}
    if _v(line) < _v("2.8"):
        assert topic_id_checks == set()  # no topic ids exist: nothing to say about them
    else:
        assert {"topic-id-mismatch", "topic-id-missing-in-zookeeper"} <= topic_id_checks


def test_delete_dir_names_are_capped_from_2_3_only():
    topic = "t" * 249
    for line in LINES:
        name = format_partition_dir_name(
            topic, 7, DirKind.DELETE, "ab" * 16, cap_length=caps_suffixed_dir_names(_v(line))
        )
        if _v(line) >= _v("2.3"):
            assert len(name) == 255 and parse_partition_dir_name(name).partition == 7
        else:
            assert len(name) == 249 + len("-7.") + 32 + len("-delete")  # 1.0-2.2 could not rename it


def test_stray_dirs_exist_from_3_6_1_and_an_older_broker_holding_one_is_an_error(tmp_path):
    older = healthy_cluster(kafka_version="3.6.0")
    older.delete_topic("orders")
    with pytest.raises(SimulationError, match="-stray"):
        older.leave_leftover_dirs("orders", 0, [0], kind=DirKind.STRAY, age_ms=1000)
    assert [has_stray_dirs(KafkaVersion.parse(r)) for r in ("3.5.2", "3.6.0", "3.6.1", "3.7.0")] == [
        False,
        False,
        True,
        True,
    ]
    newer = healthy_cluster(kafka_version="3.6.2")  # KAFKA-15605 brought -stray into 3.6.1
    newer.delete_topic("orders")
    newer.leave_leftover_dirs("orders", 0, [0], kind=DirKind.STRAY, age_ms=1000)
    (stray,) = [f for f in _audit(newer, tmp_path / "new", "3.6.2") if f.check == "stray-dirs"]
    assert stray.severity is Severity.WARNING and stray.broker_id == 0
    # the same directory on a broker whose jars say 3.6.0 (copied from a newer one): it cannot start
    (old,) = [f for f in _audit(newer, tmp_path / "old", "3.6.0") if f.check == "stray-dirs"]
    assert old.severity is Severity.ERROR and "cannot parse" in old.summary


def test_a_kraft_migration_writes_migration_and_a_persistent_controller_from_3_4_only():
    with pytest.raises(SimulationError, match=r"3\.4"):
        healthy_cluster(kafka_version="3.3.1").begin_kraft_migration()
    cluster = healthy_cluster(kafka_version="3.6.2")
    cluster.begin_kraft_migration(kraft_controller_id=3000, kraft_controller_epoch=4)
    tree, owners = _tree(cluster), _owners(cluster)
    migration = zk.MigrationZNode.decode(tree[zk.MIGRATION])
    assert (migration.version, migration.kraft_controller_id, migration.kraft_controller_epoch) == (
        0,
        3000,
        4,
    )
    controller = zk.ControllerRegistration.decode(tree[zk.CONTROLLER])
    assert controller.is_kraft_controller and controller.broker_id == 3000
    assert owners[zk.CONTROLLER] is None  # persistent: no ZK broker can take it
    cluster.end_kraft_migration_rollback()  # the documented rollback deletes both
    tree, owners = _tree(cluster), _owners(cluster)
    assert zk.MIGRATION not in tree and owners[zk.CONTROLLER] == cluster.controller_id


@pytest.mark.parametrize(
    ("ibp", "registration", "feature_status", "ids"),
    [
        ("2.6", 4, zk.FEATURE_DISABLED, False),
        ("2.7", 5, zk.FEATURE_ENABLED, False),
        ("2.8", 5, zk.FEATURE_ENABLED, True),
    ],
)
def test_an_ibp_below_the_release_decides_registration_feature_and_topic_ids(
    ibp, registration, feature_status, ids, tmp_path
):
    """A 3.3.1 cluster mid-upgrade (IBP still old): the IBP, not the release, picks these formats."""
    spec = ClusterSpec(
        "upgrade",
        brokers=(BrokerSpec(0, rack="r1"), BrokerSpec(1, rack="r2")),
        kafka_version="3.3.1",
        inter_broker_protocol_version=ibp,
        topics=(TopicSpec("t", 2, 2),),
    )
    cluster = SimulatedCluster(spec)
    tree = _tree(cluster)
    assert json.loads(tree[zk.broker_path(0)])["version"] == registration
    feature = zk.FeatureZNode.decode(tree[zk.FEATURE])
    assert (feature.version, feature.status, feature.features) == (1, feature_status, {})  # v2 needs IBP 3.3
    topic = json.loads(tree[zk.topic_path("t")])
    assert topic["version"] == 3  # the release's writer, with or without an id
    assert ("topic_id" in topic) is ids
    assert {d.topic_id is not None for d in cluster.dirs} == {ids}  # IBP < 2.8 deletes partition.metadata
    findings = _audit(cluster, tmp_path)
    assert unexpected(expected_findings(cluster, cluster.online_broker_ids()), found(findings)) == {}
    assert not [f for f in findings if f.check.startswith("topic-id") or f.check == "kraft-readiness"]
