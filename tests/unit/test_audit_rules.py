"""The audit rules on the simulator's clusters, in-process (the same functions the Spark job runs)."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from airflow_provider_kafka_zk.kafka.audit import BrokerSettings, ClusterFacts, audit, gather_evidence
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.testing.simulator import healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows


def run(cluster, inventoried=None, previous_rows=None):
    rows = cluster_rows(cluster)
    state = ClusterState.from_snapshot(rows, cluster=cluster.spec.name)
    previous = ClusterState.from_snapshot(previous_rows) if previous_rows else None
    live = frozenset(cluster.online_broker_ids())
    inventoried = live if inventoried is None else frozenset(inventoried)
    facts = ClusterFacts(
        cluster=cluster.spec.name,
        now_ms=int(time.time() * 1000),
        live_brokers=live,
        inventoried=inventoried,
        settings={
            b: BrokerSettings(b, min_insync_replicas=cluster.spec.min_insync_replicas)
            for b in cluster.brokers
        },
        reassign_znode_partitions=frozenset((t, p) for t, p, _ in cluster.reassignment),
        ibp=str(cluster.spec.ibp),
    )
    dirs = [d for d in audit_dirs(cluster) if d.broker_id in inventoried]
    findings = audit(state, gather_evidence(state, dirs, previous), facts)
    by_check = defaultdict(list)
    for f in findings:
        by_check[f.check].append(f)
    return findings, by_check


@pytest.fixture(scope="module")
def incident():
    return run(incident_cluster())


def test_topic_id_mismatch_names_the_replicas(incident):
    _, by = incident
    (f,) = by["topic-id-mismatch"]
    assert (f.topic, f.severity) == ("clickstream", Severity.CRITICAL)
    replicas = f.evidence["replicas"]
    assert {r["broker_id"] for r in replicas} == {0, 1, 2, 5}  # the live, inventoried brokers
    assert all(r["topic_id"] != f.evidence["zookeeper_topic_id"] for r in replicas)
    assert all(r["path"].endswith(f"clickstream-{r['partition']}") for r in replicas)


def test_missing_topic_id_gives_the_id_found_on_disk(incident):
    _, by = incident
    (f,) = by["topic-id-missing-in-zookeeper"]
    cluster = incident_cluster()
    on_disk = {str(d.topic_id) for d in cluster.replica_dirs("inventory-updates")}
    assert (f.topic, f.severity, f.evidence["ids_on_disk"]) == (
        "inventory-updates",
        Severity.CRITICAL,
        sorted(on_disk),
    )


def test_stuck_deletions_with_their_causes(incident):
    _, by = incident
    pending = {f.topic: f for f in by["deletion-pending"]}
    assert pending["legacy-orders"].evidence["causes"] == ["replica_broker_offline"]
    assert pending["legacy-orders"].broker_id == 3
    assert pending["moving-topic"].evidence["causes"] == ["reassignment_in_progress"]
    assert {f.severity for f in pending.values()} == {Severity.ERROR}


def test_leftover_directories(incident):
    _, by = incident
    assert [(f.topic, f.broker_id) for f in by["orphan-partition-dirs"]] == [("old-logs", 5)]
    assert [(f.topic, f.broker_id, len(f.evidence["paths"])) for f in by["delete-dirs-past-delay"]] == [
        ("old-logs", 2, 2)
    ]


def test_rf1_exposure_per_broker(incident):
    _, by = incident
    per_broker = {f.broker_id: f for f in by["rf1-exposure-broker"]}
    assert per_broker[1].evidence["topics"] == {"metrics-rf1": [0, 2, 4]}
    assert per_broker[1].severity is Severity.WARNING
    assert per_broker[3].severity is Severity.ERROR  # broker 3 is down: its RF=1 partitions are offline
    assert per_broker[1].evidence["bytes"] > 0


def test_offline_partitions(incident):
    _, by = incident
    offline = {f.topic: f.evidence["partitions"] for f in by["offline-partitions"]}
    assert offline["audit-rf1"] == [0, 1]
    assert "legacy-orders" not in offline  # being deleted: reported as a stuck deletion instead
    assert all(f.severity is Severity.CRITICAL for f in by["offline-partitions"])


def test_health_and_cluster_rules(incident):
    _, by = incident
    assert by["under-replicated"] and by["under-min-isr"]
    assert not by["inventory-coverage-partial"]


def test_partial_coverage_is_said_and_names_the_broker():
    cluster = incident_cluster()
    _, by = run(cluster, inventoried={0, 1, 5})
    (f,) = by["inventory-coverage-partial"]
    assert f.evidence["missing"] == [2]
    assert not by["delete-dirs-past-delay"]  # broker 2 was not read: no disk claims about it


def test_healthy_cluster_has_nothing_critical():
    findings, by = run(healthy_cluster())
    assert not [f for f in findings if f.severity >= Severity.ERROR], [
        f.summary for f in findings if f.severity >= Severity.ERROR
    ]
    assert not by["topic-id-mismatch"]


def test_topic_id_change_since_previous_snapshot():
    cluster = incident_cluster()
    before = cluster_rows(cluster)
    cluster.old_client_adds_partitions("orders", 8)
    cluster.controller_failover()
    _, by = run(cluster, previous_rows=before)
    changed = {f.topic for f in by["topic-id-changed-since-previous"]}
    assert changed == {"orders"}  # inventory-updates had no id before: gaining one is not a change
    assert {f.topic for f in by["topic-id-mismatch"]} >= {"orders", "inventory-updates"}
