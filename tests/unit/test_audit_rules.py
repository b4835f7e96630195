"""The audit rules on the simulator's clusters, in-process (the same functions the Spark job runs)."""

from __future__ import annotations

import copy
import json
import shlex
import time
from collections import defaultdict

import pytest

from airflow_provider_kafka_zk.kafka.audit import (
    BrokerSettings,
    ClusterFacts,
    ReplicaDir,
    TopicEvidence,
    audit,
    broker_infos,
    check_dir_kinds,
    gather_evidence,
)
from airflow_provider_kafka_zk.kafka.findings import Severity, triage_order
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
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


# ---------------------------------------------------------------------------------------------
# root causes and concrete advice (issue 14): broker 3 stopped cleanly, broker 4 crashed
# ---------------------------------------------------------------------------------------------


def test_the_stopped_broker_is_the_first_finding_and_adds_up_what_it_causes(incident):
    findings, by = incident
    ordered = triage_order(findings)
    # clickstream's topicId repair leads: broker 3 holds its replicas and would reject them if started first
    assert (ordered[0].check, ordered[0].topic) == ("topic-id-mismatch", "clickstream")
    assert ordered[1].evidence["act_after"] == ["topic-id:clickstream"]
    first = ordered[1]
    assert (first.check, first.broker_id, first.severity) == ("broker-down", 3, Severity.CRITICAL)
    assert first.summary.startswith("broker 3 is down: not registered in /brokers/ids")
    assert first.evidence["offline_partitions"] == ["audit-rf1-0", "audit-rf1-1"]
    assert "2 partition(s) offline (audit-rf1-0, audit-rf1-1)" in first.summary
    assert "deletion of legacy-orders blocked" in first.summary
    assert first.evidence["consequences"]["offline-partitions"] == 1
    assert first.evidence["consequences"]["under-min-isr"] >= 1
    # broker 4 crashed later and holds clickstream-2's last in-sync replica: its own root cause
    root_causes = {f.broker_id: f for f in by["broker-down"]}
    assert sorted(root_causes) == [3, 4]
    assert root_causes[4].evidence["offline_partitions"] == ["clickstream-2"]
    assert "clickstream-2" not in first.summary  # starting broker 3 does not bring it back


def test_consequence_rows_name_the_down_broker_instead_of_generic_advice(incident):
    findings, by = incident
    assert not [f for f in findings if "Restore the missing replicas" in f.action]
    offline = {f.topic: f for f in by["offline-partitions"]}
    assert offline["audit-rf1"].summary.startswith(
        "broker 3 is down: 2 partitions of audit-rf1 have no leader"
    )
    assert offline["audit-rf1"].evidence["down_brokers"] == [3]
    assert offline["audit-rf1"].action.startswith("Start broker 3")
    assert offline["clickstream"].evidence["down_brokers"] == [4]  # ISR [4]: broker 3 left it cleanly
    explained = [f for f in by["under-min-isr"] + by["under-replicated"] if f.evidence["down_brokers"]]
    assert explained and all(
        f.summary.startswith(("broker 3 is down", "broker 4 is down", "brokers 3 and 4 are down"))
        for f in explained
    )
    assert {b for f in explained for b in f.evidence["down_brokers"]} == {3, 4}
    legacy = next(f for f in by["deletion-pending"] if f.topic == "legacy-orders")
    assert legacy.summary.startswith("broker 3 is down:") and legacy.evidence["down_brokers"] == [3]
    # the RF=1 topics' under-min-ISR is their configuration, not a stopped broker: said so
    rf_rows = {f.topic: f for f in by["under-min-isr"] if f.evidence["cause"] == "replication-factor"}
    assert set(rf_rows) == {"metrics-rf1", "audit-rf1"}
    assert rf_rows["metrics-rf1"].summary.startswith("replication factor 1 < min.insync.replicas=2")
    assert rf_rows["metrics-rf1"].evidence["down_brokers"] == []


def test_topic_id_mismatch_names_both_ids_the_repair_command_and_the_log_line(incident):
    _, by = incident
    (f,) = by["topic-id-mismatch"]
    zk_id = f.evidence["zookeeper_topic_id"]
    (disk_id,) = f.evidence["ids_on_disk"]
    assert zk_id in f.summary and disk_id in f.summary and zk_id != disk_id
    assert f"write {disk_id} back into /brokers/topics/clickstream" in f.summary
    assert f.evidence["write_back_id"] == disk_id
    # one run for both topics whose ids can be written back: clickstream's write-back moves the
    # controller, which would mint a NEW id for inventory-updates were its id not written in the same run
    conf = '{"cluster": "demo", "topics": ["clickstream", "inventory-updates"], "strategy": "write_back", "dry_run": '
    dry = f"airflow dags trigger kafka_zk_topic_id_repair --conf '{conf}true}}'"
    real = f"airflow dags trigger kafka_zk_topic_id_repair --conf '{conf}false}}'"
    assert f.action.index(dry) < f.action.index(real)
    assert [c["command"] for c in f.evidence["commands"]] == [dry, real]
    assert "write_back" in f.action and f"into {f.path}" in f.action
    assert f"Topic ID in memory: {disk_id} does not match the topic ID for partition clickstream-" in f.action
    assert f"received: {zk_id}." in f.action
    assert "INCONSISTENT_TOPIC_ID" not in f.summary + f.action  # never in a broker log
    assert "does not rejoin the ISR" in f.action  # what a restart does (3.3.1), not a load failure
    (precursor,) = by["topic-id-missing-in-zookeeper"]
    (kept,) = precursor.evidence["ids_on_disk"]
    assert f"write {kept} back" in precursor.summary and precursor.evidence["write_back_id"] == kept
    assert precursor.evidence["commands"] == f.evidence["commands"]
    assert "One run repairs clickstream and inventory-updates" in precursor.action
    assert (
        "(format v3, same partitions) before the run's one controller move, so the next controller loads the id"
        in precursor.action
    )


def test_a_lone_write_back_names_only_its_topic():
    cluster = healthy_cluster()
    cluster.old_client_adds_partitions("orders", 8)
    cluster.controller_failover()  # orders: ZooKeeper's new id differs from every replica
    _, by = run(cluster)
    (f,) = by["topic-id-mismatch"]
    assert not by["topic-id-missing-in-zookeeper"]
    assert f.evidence["repair_conf"] == {"cluster": "healthy", "topics": ["orders"], "strategy": "write_back"}
    assert "One run repairs" not in f.action
    # a lone precursor: its write-back moves no controller
    cluster = healthy_cluster()
    cluster.old_client_adds_partitions("orders", 8)
    _, by = run(cluster)
    (alone,) = by["topic-id-missing-in-zookeeper"]
    assert "(format v3, same partitions); no controller move, no restart: the next controller" in alone.action


def test_the_repair_commands_are_valid_runs_of_the_repair_dag(incident, monkeypatch, tmp_path):
    """The conf the findings print passes the kafka_zk_topic_id_repair DAG's own Params validation."""
    from airflow_provider_kafka_zk.dags import topic_id_repair
    from airflow_provider_kafka_zk.kafka.audit import TOPIC_ID_REPAIR_DAG

    clusters = tmp_path / "clusters.toml"
    clusters.write_text('[clusters.demo]\nkafka_zookeeper_conn_id = "zk"\nbase_path = "/tmp/x"\n')
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
    dag = topic_id_repair.build_dag()
    assert TOPIC_ID_REPAIR_DAG == topic_id_repair.DAG_ID == dag.dag_id
    _, by = incident
    commands = [
        c["command"]
        for f in by["topic-id-mismatch"] + by["topic-id-missing-in-zookeeper"]
        for c in f.evidence["commands"]
    ]
    assert len(commands) == 4
    for command in commands:
        conf = json.loads(shlex.split(command)[-1])
        assert shlex.split(command)[:5] == ["airflow", "dags", "trigger", dag.dag_id, "--conf"]
        params = copy.deepcopy(dag.params)
        params.update(conf)
        params.validate()
        assert set(conf) <= set(dag.params)


def test_the_log_line_is_the_one_the_brokers_version_writes():
    from airflow_provider_kafka_zk.kafka.audit import topic_id_log_line

    new = topic_id_log_line(["3.3.1", "3.3.1"], "t-0", "A", "B")
    assert new == '"Topic ID in memory: A does not match the topic ID for partition t-0 received: B."'
    old = topic_id_log_line(["2.8.2"], "t-0", "A", "B")
    assert old == (
        '"Topic Id in memory: A does not match the topic Id for partition t-0 provided in the request: B."'
    )
    both = topic_id_log_line([None, "3.3.1"], "t-0", "A", "B")
    assert new in both and "provided in the request: B." in both


def test_a_topic_id_change_towards_the_replicas_is_a_resolved_incident():
    """After a correct write-back repair ZooKeeper's id changed since the previous snapshot -- to the
    one every replica holds. That is the incident's end, not a new critical one (3.3.1 false alarm)."""
    cluster = incident_cluster()
    before = cluster_rows(cluster)  # clickstream: ZooKeeper's id differs from every replica
    topic = cluster.topics["clickstream"]
    (disk_id,) = {d.topic_id for d in cluster.replica_dirs("clickstream") if d.topic_id is not None}
    assert topic.zk_topic_id != disk_id
    topic.zk_topic_id = topic.controller_topic_id = disk_id  # what write_back does
    everyone = set(cluster.brokers)
    _, by = run(cluster, inventoried=everyone, previous_rows=before)
    assert not [f for f in by["topic-id-mismatch"] if f.topic == "clickstream"]
    assert not [f for f in by["topic-id-changed-since-previous"] if f.topic == "clickstream"]
    (resolved,) = by["topic-id-resolved-since-previous"]
    assert (resolved.topic, resolved.severity) == ("clickstream", Severity.INFO)
    assert resolved.summary.startswith(
        "clickstream: topicId incident resolved: ZooKeeper's topic_id changed from"
    )
    assert f"to {disk_id}, the id every replica read holds" in resolved.summary
    # read from the live brokers only: resolved as far as seen, the unread replicas named
    _, partial = run(cluster, previous_rows=before)
    (seen,) = partial["topic-id-resolved-since-previous"]
    assert seen.severity is Severity.WARNING and "brokers 3 and 4 not read" in seen.summary
    # a change away from the replicas stays critical
    topic.zk_topic_id = before_id = KafkaUuid.parse("AAAAAAAAAAAAAAAAAAAAAg")
    _, away = run(cluster, inventoried=everyone, previous_rows=before)
    (changed,) = [f for f in away["topic-id-changed-since-previous"] if f.topic == "clickstream"]
    assert changed.severity is Severity.CRITICAL and f"now {before_id}" in changed.summary
    assert not away["topic-id-resolved-since-previous"]


def test_delete_directory_age_counts_from_its_rename():
    """A -delete directory renamed a second ago keeps its segments' week-old mtime: not past the delay."""
    now = 1_795_000_000_000
    week_old = now - 7 * 86_400_000

    def dirs(ctime_ms):
        return (
            ReplicaDir(
                2,
                "/d",
                "t-0.0123456789abcdef0123456789abcdef-delete",
                DirKind.DELETE,
                "t",
                0,
                None,
                mtime_ms=week_old,
                ctime_ms=ctime_ms,
            ),
        )

    facts = ClusterFacts(cluster="c", now_ms=now, live_brokers=frozenset({2}), inventoried=frozenset({2}))
    fresh = check_dir_kinds(TopicEvidence("t", None, dirs=dirs(now - 1_000)), facts)
    assert fresh == []
    (old,) = check_dir_kinds(TopicEvidence("t", None, dirs=dirs(now - 2 * 3_600_000)), facts)
    assert "oldest 2.0 h" in old.summary and old.evidence["dirs"][0]["age_from"] == "ctime"
    (unknown,) = check_dir_kinds(TopicEvidence("t", None, dirs=dirs(None)), facts)  # an old inventory
    assert "oldest 168.0 h" in unknown.summary and unknown.evidence["dirs"][0]["age_from"] == "mtime"


def test_rf1_advice_depends_on_whether_the_broker_runs(incident):
    _, by = incident
    per_broker = {f.broker_id: f for f in by["rf1-exposure-broker"]}
    running, stopped = per_broker[1], per_broker[3]
    drain = (
        "airflow dags trigger kafka_zk_pre_maintenance_drain --conf "
        '\'{"cluster": "demo", "brokers": [1], "scope": "rf1", "dry_run": true}\''
    )
    assert running.action.startswith("Before stopping broker 1, drain them: dry run " + drain)
    assert "metrics-rf1-0, metrics-rf1-2, metrics-rf1-4" in running.summary
    assert "drain them" not in stopped.action and "before stopping" not in stopped.action.lower()
    assert stopped.summary.startswith("broker 3 is down: its 2 RF=1 partition(s) (audit-rf1-0, audit-rf1-1")
    assert "offline now" in stopped.action and "only copy" in stopped.action
    assert "Start broker 3" in stopped.action and "drain cannot move them" in stopped.action
    per_topic = {(f.topic, f.broker_id): f for f in by["rf1-exposure"]}
    assert "kafka_zk_pre_maintenance_drain" in per_topic[("metrics-rf1", 1)].action
    assert "Start broker 3" in per_topic[("audit-rf1", 3)].action


def test_root_cause_names_host_last_seen_and_how_the_broker_stopped():
    cluster = incident_cluster()
    rows = cluster_rows(cluster)
    state = ClusterState.from_snapshot(rows, cluster="demo")
    seen_ms = 1_795_000_000_000  # 2026-11-18 11:06:40 UTC
    previous = ClusterState.from_snapshot(cluster_rows(healthy_cluster(name="demo")), taken_at_ms=seen_ms)
    summaries = {
        3: {"host": "kafka-3.example", "log_dirs": [{"path": "/d0", "exists": True, "clean_shutdown": True}]},
        4: {
            "host": "kafka-4.example",
            "log_dirs": [{"path": "/d0", "exists": True, "clean_shutdown": False}],
        },
    }
    live = frozenset(cluster.online_broker_ids())
    facts = ClusterFacts(
        cluster="demo",
        now_ms=seen_ms + 86_400_000,
        live_brokers=live,
        inventoried=live | {3, 4},
        brokers=broker_infos(state, previous, summaries),
        ibp=str(cluster.spec.ibp),
    )
    findings = audit(state, gather_evidence(state, audit_dirs(cluster), None), facts)
    roots = {f.broker_id: f for f in findings if f.check == "broker-down"}
    assert "host 127.0.0.5" in roots[3].summary  # its registration in the previous snapshot
    assert "last seen registered in the snapshot of 2026-11-18 11:06 UTC" in roots[3].summary
    assert "shut down cleanly" in roots[3].summary
    assert roots[3].action.startswith("First repair the topicId of clickstream")
    assert "Then: Start broker 3 on 127.0.0.5" in roots[3].action
    assert "NOT shut down cleanly" in roots[4].summary
    check = 'airflow dags trigger kafka_zk_pre_restart_check --conf \'{"cluster": "demo", "broker": 4}\''
    assert check in roots[4].action and roots[4].action.index(check) < roots[4].action.index("then start it")
    stopped = next(f for f in findings if f.check == "rf1-exposure-broker" and f.broker_id == 3)
    assert "bytes" in stopped.summary and "size unknown" not in stopped.summary  # its disk was read


def test_no_root_cause_when_every_broker_runs():
    findings, by = run(healthy_cluster())
    assert not by["broker-down"]
    assert not [f for f in findings if f.evidence.get("down_brokers")]


# ---------------------------------------------------------------------------------------------
# Advice never recommends the action that causes the incident (issue 23)
# ---------------------------------------------------------------------------------------------


def test_kraft_readiness_advises_the_write_back_never_a_controller_failover(incident):
    """``inventory-updates`` has no topic_id in ZooKeeper while its replicas hold one: the old advice
    "give them ids (IBP >= 2.8 controller failover)" is the failover that mints a new id every replica
    rejects (KAFKA-14190, the 3.3.1 cluster: "Topic ID in memory: <old> does not match the topic ID for
    partition ... received: <new>"). The advice is the repair DAG's write-back, with its trigger conf."""
    _, by = incident
    (precursor,) = by["topic-id-missing-in-zookeeper"]
    [readiness] = [f for f in by["kraft-readiness"] if "inventory-updates" in f.evidence.get("topics", ())]
    conf = readiness.evidence["repair_conf"]
    assert conf == precursor.evidence["repair_conf"]  # the one combined run (clickstream too)
    assert conf["strategy"] == "write_back" and "inventory-updates" in conf["topics"]
    run = "airflow dags trigger kafka_zk_topic_id_repair --conf " + shlex.quote(
        json.dumps({**conf, "dry_run": False})
    )
    assert run in readiness.action
    assert readiness.evidence["write_back_ids"] == {"inventory-updates": precursor.evidence["write_back_id"]}
    assert "Do not give them ids by a controller failover" in readiness.action
    assert "IBP >= 2.8 controller failover" not in readiness.action
    assert not any("Give them ids" in f.action for f in by["kraft-readiness"])


def _without_ids(cluster, *topics):
    """Rewrite topics as an old client does (no topic_id in ZooKeeper, partition.metadata gone)."""
    for name in topics:
        topic = cluster.topics[name]
        topic.zk_topic_id = None
        topic.znode_format = 1
        for d in cluster.replica_dirs(name):
            d.topic_id = None
            d.metadata_file = False
    return cluster


def test_kraft_readiness_a_controller_move_only_where_no_replica_holds_an_id_and_after_the_repairs():
    cluster = _without_ids(incident_cluster(), "metrics-rf1")  # replicas on brokers 0, 1, 2 and 5 only
    _, by = run(cluster)
    [fresh] = [f for f in by["kraft-readiness"] if f.evidence.get("topics") == ["metrics-rf1"]]
    assert "no replica holds one" in fresh.summary
    assert fresh.action.startswith("The next controller move gives each a new id that its replicas adopt")
    assert "only after the 1 topic(s) above are repaired" in fresh.action  # inventory-updates first
    [metadata] = [f for f in by["kraft-readiness"] if "partition.metadata" in f.summary]
    assert "no controller move before inventory-updates has its topic_id back" in metadata.action
    # a replica on a broker that was not read may hold an id: inventory it first, no controller move
    _, partial = run(cluster, inventoried=[0, 1, 2])
    [blind] = [f for f in partial["kraft-readiness"] if "metrics-rf1" in f.evidence.get("topics", ())]
    assert blind.evidence["unread_brokers"] == [5] and blind.action.startswith("Inventory broker 5 first")


def test_no_leader_changing_advice_for_a_topic_whose_replicas_disagree_with_zookeeper():
    """A preferred election (or a move) of a topicId-mismatched topic is a leader change its brokers
    reject: the 3.3.1 cluster kept serving "until the next leader or ISR change", then produce failed."""
    cluster = incident_cluster()
    part = cluster.topics["clickstream"].partitions[0]
    preferred = part.replicas[0]
    other = next(b for b in part.isr if b != preferred)
    cluster._bump_state(part, leader=other, isr=part.isr)  # its preferred replica lost the leadership
    _, by = run(cluster)
    [imbalance] = [f for f in by["preferred-leader-imbalance"] if f.broker_id == preferred]
    assert imbalance.action.startswith("First repair the topicId of clickstream (its topic-id-mismatch card)")
    assert "topic-id:clickstream" in imbalance.evidence["act_after"]


def test_leftover_findings_link_to_the_deletion_cleanup_dag_with_the_exact_conf(incident):
    from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_commands
    from airflow_provider_kafka_zk.kafka.findings import APPROVAL_STEP

    _, by = incident
    [orphan] = by["orphan-partition-dirs"]
    dry, real = cleanup_commands(orphan.cluster, ["old-logs"])
    assert dry in orphan.action and real in orphan.action and APPROVAL_STEP in orphan.action


def test_moving_a_live_named_dir_is_advised_only_while_its_broker_is_stopped(incident):
    """``old-logs-*`` on running broker 5 is a loaded log: moving it under the broker takes the log dir
    offline, the action the cleanup refuses (allow_running_broker_orphans)."""
    _, by = incident
    [orphan] = by["orphan-partition-dirs"]
    assert orphan.broker_id == 5
    assert "while broker 5 is stopped" in orphan.action and "takes the whole log dir offline" in orphan.action
