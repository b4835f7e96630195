"""The KRaft migration readiness rules (kafka/kraft_readiness.py) and the migration's phase
(kafka/kraft_migration.py), on simulated clusters without I/O: each rule per release as Kafka's
source at that tag says, the order of the topicId repairs, and the daily audit's view of a migration.
The same rules on a real ZooKeeper and sshd: tests/integration/test_kraft_readiness.py."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from airflow_provider_kafka_zk.kafka import audit as rules
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.kraft_migration import BrokerMode, migration_state
from airflow_provider_kafka_zk.kafka.kraft_migration_phase import Phase
from airflow_provider_kafka_zk.kafka.kraft_readiness import (
    BrokerConfig,
    ReadinessInputs,
    Status,
    ZooKeeperExtras,
    assess,
)
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.topic_id_repair import diagnose
from airflow_provider_kafka_zk.kafka.uuid import ONE_UUID
from airflow_provider_kafka_zk.spark_jobs.audit import cluster_facts
from airflow_provider_kafka_zk.testing.in_process import audit_and_assess
from airflow_provider_kafka_zk.testing.simulator import SimulationError
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows, inventory_summaries
from airflow_provider_kafka_zk.testing.simulator.scenarios import (
    kraft_ready_cluster,
    mid_migration_cluster,
    topic_id_repair_cluster,
)

CLUSTER = "kraft"


def _summaries(cluster, jars: dict[int, str] | None = None) -> dict[int, dict]:
    """Each broker's inventory summary as the inventory makes it: its server.properties parsed."""
    return inventory_summaries(cluster, jars)


def _report(
    cluster, *, jars=None, users=None, controller_ids=(3000, 3001, 3002), kafka_version=None, rows=None
):
    users = (
        users
        if users is not None
        else {
            u: {k: "[redacted]" if k.startswith("SCRAM") else v for k, v in c.items()}
            for u, c in cluster.user_configs.items()
        }
    )
    _, _, report = audit_and_assess(
        CLUSTER,
        rows if rows is not None else cluster_rows(cluster),
        _summaries(cluster, jars),
        audit_dirs(cluster),
        user_configs=users,
        controller_node_ids=controller_ids,
        kafka_version=kafka_version,
    )
    return report


def _blockers(report) -> list[str]:
    return [c.check for c in report.blockers]


def test_a_ready_cluster_passes_and_its_verdict_says_so():
    report = _report(kraft_ready_cluster(name=CLUSTER))
    assert report.verdict == "ready to migrate"
    assert {c.status for c in report.checks} == {Status.PASS}
    assert [c.check for c in report.checks][:3] == ["release", "inter-broker-protocol", "brokers-registered"]


@pytest.mark.parametrize(
    ("release", "status", "words"),
    [
        ("3.3.1", Status.BLOCKER, "has no ZooKeeper-to-KRaft migration"),
        ("3.5.2", Status.BLOCKER, "a missing KRaft feature"),
        ("3.6.2", Status.BLOCKER, "Early Access"),
        ("3.7.1", Status.BLOCKER, "Early Access"),
        ("3.8.1", Status.WARNING, "supported for production from 3.8"),
        ("3.9.0", Status.PASS, "the bridge release line"),
    ],
)
def test_the_release_rule_follows_each_tags_documentation(release, status, words):
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version=release)
    report = _report(cluster, jars=dict.fromkeys(cluster.brokers, release))
    check = report.check("release")
    assert check.status is status and words in check.evidence
    if release >= "3.4":  # before 3.4 the IBP (< 3.4-IV0) is a blocker of its own too
        assert _blockers(report) == (["release"] if status is Status.BLOCKER else [])


def test_mixed_or_unknown_releases_block():
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version="3.8.1")  # IBP 3.8, upgrade to 3.9.0 half done
    mixed = _report(cluster, jars={0: "3.9.0", 1: "3.9.0", 2: "3.8.1", 3: "3.9.0"})
    assert _blockers(mixed) == ["release"]
    assert "3.8.1 on broker 2; 3.9.0 on brokers 0, 1 and 3" in mixed.check("release").evidence
    # a broker without a running process beside ones whose jars say 3.9.0: IBP 3.9 says 3.9.x, the same
    ready = kraft_ready_cluster(name=CLUSTER)
    assert _blockers(_report(ready, jars={0: "3.9.0", 1: "3.9.0", 3: "3.9.0"})) == []
    assert _blockers(_report(ready, jars={0: "3.9.0", 1: "3.9.1"})) == ["release"]  # two releases known
    # IBP 3.8 on a broker with no running process: its release cannot be told (3.8 or 3.9)
    cluster = kraft_ready_cluster(name=CLUSTER)
    cluster.set_broker_properties(1, {"inter.broker.protocol.version": "3.8"})
    unknown = _report(cluster)
    assert (
        unknown.check("release").status is Status.BLOCKER
        and "broker 1 is unknown" in unknown.check("release").evidence
    )
    # the kafka_version param tells it; then only the unfinished IBP roll remains
    assert _blockers(_report(cluster, kafka_version="3.9.0")) == ["inter-broker-protocol"]


def test_an_ibp_below_the_release_line_or_below_3_4_blocks():
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version="3.9.0")
    for b in cluster.brokers:
        cluster.set_broker_properties(b, {"inter.broker.protocol.version": "3.8"})
    report = _report(cluster, kafka_version="3.9.0")
    assert _blockers(report) == ["inter-broker-protocol"]
    assert "Set inter.broker.protocol.version=3.9" in report.check("inter-broker-protocol").fix
    for b in cluster.brokers:
        cluster.set_broker_properties(b, {"inter.broker.protocol.version": "3.3"})
    old = _report(cluster, kafka_version="3.9.0").check("inter-broker-protocol")
    assert old.status is Status.BLOCKER and "below 3.4-IV0" in old.evidence


@pytest.mark.parametrize(
    ("release", "ibp", "status", "words"),
    [
        ("3.5.2", "3.5", Status.BLOCKER, "KRaft mode of Kafka 3.5 has no JBOD"),
        ("3.6.2", "3.6", Status.BLOCKER, "refuses migration mode with more than one log dir"),
        ("3.9.0", "3.7-IV1", Status.BLOCKER, "needs IBP >= 3.7-IV2"),
        ("3.9.0", "3.9", Status.WARNING, "Early Access"),
    ],
)
def test_jbod_follows_each_releases_config_check(release, ibp, status, words):
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version=release)
    brokers = tuple(replace(b, log_dir_count=2) if b.broker_id == 1 else b for b in cluster.spec.brokers)
    cluster = type(cluster)(replace(cluster.spec, brokers=brokers, inter_broker_protocol_version=ibp))
    check = _report(cluster, jars=dict.fromkeys(cluster.brokers, release)).check("kraft-features")
    assert check.status is status and words in check.evidence and "broker 1" in check.evidence


def test_an_authorizer_blocks_migration_mode_only_before_3_6():
    for release, status in (("3.5.2", Status.BLOCKER), ("3.9.0", Status.PASS)):
        cluster = kraft_ready_cluster(name=CLUSTER, kafka_version=release)
        cluster.set_broker_properties(0, {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
        check = _report(cluster, jars=dict.fromkeys(cluster.brokers, release)).check("kraft-features")
        assert check.status is status, (release, check.evidence)


def test_migration_mode_settings_are_checked_as_kafka_config_3_9_checks_them():
    cluster = kraft_ready_cluster(name=CLUSTER)
    cluster.enter_migration_mode([0, 1, 2, 3])
    assert _blockers(_report(cluster)) == []
    cluster.set_broker_properties(2, {"controller.listener.names": None})
    cluster.set_broker_properties(3, {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})
    check = _report(cluster).check("migration-config")
    assert check.status is Status.BLOCKER
    assert "controller.listener.names is empty" in check.evidence
    assert "controller listener CONTROLLER not in listener.security.protocol.map" in check.evidence


def test_a_generated_broker_id_above_reserved_max_needs_generation_off():
    spec = kraft_ready_cluster(name=CLUSTER).spec
    brokers = tuple(replace(b, broker_id=1001 + b.broker_id) for b in spec.brokers)
    cluster = type(kraft_ready_cluster())(replace(spec, brokers=brokers, topics=()))
    cluster.set_broker_properties(1002, {"broker.id": None})
    check = _report(cluster).check("migration-config")
    assert check.status is Status.BLOCKER
    assert "set broker.id=1002 and broker.id.generation.enable=false" in check.evidence
    # explicit ids above 1000 with generation on: KafkaConfig refuses them too
    assert "broker.id=1001 > reserved.broker.max.id=1000" in check.evidence


def test_controller_ids_collide_with_broker_ids_planned_or_configured():
    cluster = kraft_ready_cluster(name=CLUSTER)
    assert _report(cluster, controller_ids=(1, 3000)).check("controller-ids").status is Status.BLOCKER
    cluster.set_broker_properties(0, {"controller.quorum.voters": "2@127.0.1.1:9093"})
    check = _report(cluster).check("controller-ids")
    assert check.status is Status.BLOCKER and "controller.quorum.voters of broker 0" in check.evidence


def test_topic_id_fixes_come_in_an_order_no_controller_move_can_break():
    """The repair cluster: diverged (ZooKeeper X, replicas Y), precursor (no id, replicas agree), split
    (replicas disagree). write_back of both in ONE run (it moves the controller once, after both ids are
    written: separate runs would let the diverged topic's controller move mint a new id for the
    precursor); the split topic's file_reset in its own run."""
    cluster = topic_id_repair_cluster()
    check = _report(cluster, kafka_version="3.3.1").check("topic-ids")
    assert check.status is Status.BLOCKER
    confs = [run.conf for run in check.fix_runs]
    assert confs == [
        {"cluster": CLUSTER, "topics": ["diverged", "precursor"], "strategy": "write_back"},
        {"cluster": CLUSTER, "topics": ["split"], "strategy": "file_reset"},
    ]
    assert all(run.dag_id == "kafka_zk_topic_id_repair" for run in check.fix_runs)
    assert '"dry_run": true' in check.fix_runs[0].dry_run and '"dry_run": false' in check.fix_runs[0].run


def test_a_split_topic_without_an_id_is_reset_before_any_write_back():
    cluster = kraft_ready_cluster(name=CLUSTER)
    cluster.old_client_adds_partitions("payments", 6, client="2.7")  # precursor
    cluster.old_client_adds_partitions("orders", 8, client="2.7")
    minority = cluster.replica_dirs("orders", 0)[0]
    minority.topic_id = cluster._new_topic_id()  # one replica holds another id: split, no id in ZooKeeper
    check = _report(cluster).check("topic-ids")
    (reset, write_back) = check.fix_runs
    assert reset.conf["strategy"] == "file_reset" and reset.conf["topics"] == ["orders"]
    assert reset.conf["chosen_topic_id"] == str(cluster.topic("orders").controller_topic_id)  # the majority's
    assert write_back.conf == {"cluster": CLUSTER, "topics": ["payments"], "strategy": "write_back"}


@pytest.mark.parametrize(
    ("release", "scram", "check_status", "words"),
    [
        ("3.4.1", True, Status.BLOCKER, "reads them as quotas and aborts"),
        ("3.5.2", False, Status.WARNING, "delegation token(s) (copied from 3.6)"),
    ],
)
def test_what_a_release_does_not_carry(release, scram, check_status, words):
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version=release)
    if not scram:
        cluster.user_configs["app"].pop("SCRAM-SHA-512")
    check = _report(cluster, jars=dict.fromkeys(cluster.brokers, release)).check("metadata-copy")
    assert check.status is check_status and words in check.evidence


def test_user_configs_not_read_are_said_not_verified():
    unread = assess(replace(_inputs_of(kraft_ready_cluster(name=CLUSTER)), user_configs=None))
    assert unread.check("metadata-copy").status is Status.WARNING
    assert "/config/users was not read" in unread.check("metadata-copy").evidence


def _inputs_of(cluster) -> ReadinessInputs:
    rows = cluster_rows(cluster)
    state = ClusterState.from_snapshot(rows, cluster=CLUSTER)
    summaries = _summaries(cluster)
    return ReadinessInputs(
        cluster=CLUSTER,
        state=state,
        findings=[],
        brokers={b: BrokerConfig.from_inventory_summary(b, s) for b, s in summaries.items()},
        diagnoses=diagnose(state, audit_dirs(cluster), list(summaries)),
        extras=ZooKeeperExtras.from_rows(rows),
        user_configs={},
    )


def test_traces_of_zookeeper_writers_warn_and_name_what_wrote_them():
    cluster = kraft_ready_cluster(name=CLUSTER)
    cluster.old_consumer_commits("legacy-etl", "orders", 0, 42)
    check = _report(cluster).check("zookeeper-writers")
    assert check.status is Status.WARNING and "legacy-etl" in check.evidence
    assert "refuse while /migration exists" in check.fix


# ---------------------------------------------------------------------------------------------
# the migration's phases, as the 3.9 driver writes them
# ---------------------------------------------------------------------------------------------


def _state(cluster, drop: tuple[str, ...] = ()) -> ClusterState:
    return ClusterState.from_snapshot(
        [r for r in cluster_rows(cluster) if r.path not in drop], cluster=CLUSTER
    )


def test_each_phase_of_a_migration_is_named_from_zookeeper():
    cluster = kraft_ready_cluster(name=CLUSTER)
    assert migration_state(_state(cluster)) is None
    cluster.provision_kraft_controllers()
    waiting = migration_state(_state(cluster))
    assert waiting.phase is Phase.CONTROLLERS_PROVISIONED and waiting.kraft_controller_id == -1
    epoch = cluster.controller_epoch
    cluster.begin_kraft_migration(3000, 7, metadata_migrated=False)
    loading = migration_state(_state(cluster))
    assert loading.phase is Phase.BROKERS_IN_MIGRATION_MODE and loading.kraft_controller_active
    assert loading.stage == "KRaft controller claimed /controller; metadata being migrated"
    assert (loading.kraft_controller_id, loading.kraft_controller_epoch, loading.metadata_offset) == (
        3000,
        7,
        -1,
    )
    assert loading.zk_controller_epoch == epoch + 1  # tryRegisterKRaftControllerAsActiveController bumps it
    dual = migration_state(_state(mid_migration_cluster(name=CLUSTER)))
    assert dual.phase is Phase.DUAL_WRITE_ZK_BROKERS and dual.metadata_offset > 0 and dual.problem is None


def test_the_claim_and_the_dual_writes_are_what_the_3_9_controller_writes():
    cluster = mid_migration_cluster(name=CLUSTER)
    state = _state(cluster)
    controller = next(r for r in cluster_rows(cluster) if r.path == zk.CONTROLLER)
    assert controller.ephemeral_owner == 0 and state.controller.is_kraft_controller
    events = state.topic("events")  # created through the KRaft controller: v3 with id, KRaft epoch in states
    assert events.format_version == 3 and events.topic_id is not None
    assert {p.state.controller_epoch for p in events.partitions.values()} == {5}
    restarted = [p for p in state.partitions() if 1 in p.replicas and p.state.controller_epoch == 5]
    assert restarted  # the broker's restart: leader and ISR changes written by the KRaft controller
    assert cluster.metadata_log_brokers == {0, 1, 2, 3}
    with pytest.raises(SimulationError, match="no topic_id"):
        c = kraft_ready_cluster(name=CLUSTER)
        c.old_client_adds_partitions("payments", 6, client="2.7")
        c.begin_kraft_migration()


def test_the_daily_audit_reports_the_migration_not_incidents():
    cluster = mid_migration_cluster(name=CLUSTER)
    state = _state(cluster)
    summaries = _summaries(cluster)
    facts = cluster_facts(CLUSTER, state, summaries, list(summaries), int(time.time() * 1000))
    assert facts.controller_live  # KRaft controller 3000 is no registered broker, yet it acts
    findings = rules.audit(state, rules.gather_evidence(state, audit_dirs(cluster)), facts)
    assert [(f.check, f.severity) for f in findings] == [("kraft-migration", Severity.INFO)]
    assert "kafka_zk_kraft_migration_readiness" in findings[0].action


def test_a_persistent_controller_without_a_migration_stays_a_finding():
    cluster = mid_migration_cluster(name=CLUSTER)
    state = _state(cluster, drop=(zk.MIGRATION,))  # a half-done revert: /migration gone, /controller kept
    found = migration_state(state)
    assert (
        found.inconsistent and found.phase_name == "reverting"
    )  # /controller names a stopped KRaft controller
    facts = cluster_facts(CLUSTER, state, {}, [], int(time.time() * 1000))
    (finding,) = rules.kraft_migration_findings(state, facts)
    assert finding.check == "kraft-migration-inconsistent" and finding.severity is Severity.ERROR
    assert "no ZooKeeper-mode broker can become controller" in finding.summary
    assert "mints a NEW id" in finding.action  # the deletion of /controller is a controller move


@pytest.mark.parametrize("data", [None, b""], ids=["null", "empty"])
def test_a_migration_znode_without_data_is_zookeeper_mode_with_a_left_over_to_delete(data):
    """KAFKA-19480: zookeeper-security-migration leaves /migration without data. No migration runs (a
    ZooKeeper-mode broker is controller): phase zookeeper, a warning to delete it -- not the error a
    contradicting /controller gets."""
    cluster = kraft_ready_cluster(name=CLUSTER)
    rows = cluster_rows(cluster)
    template = next(r for r in rows if r.path == zk.CONTROLLER_EPOCH)
    rows.append(replace(template, path=zk.MIGRATION, data=data, version=0, ephemeral_owner=0))
    state = ClusterState.from_snapshot(rows, cluster=CLUSTER)
    found = migration_state(state)
    assert found.phase is Phase.ZOOKEEPER and not found.inconsistent and found.left_over
    assert found.stage == "ZooKeeper mode; /migration without data (KAFKA-19480)"
    facts = cluster_facts(CLUSTER, state, {}, [], int(time.time() * 1000))
    (finding,) = rules.kraft_migration_findings(state, facts)
    assert finding.check == "kraft-migration" and finding.severity is Severity.WARNING
    assert "deleteall /migration" in finding.action and "KAFKA-19480" in finding.action


def test_brokers_in_migration_mode_on_a_migration_znode_without_data_read_as_a_hung_migration():
    """KAFKA-19480 after the controllers started: brokers rolled into migration mode wait for a migration
    that never starts. Not 'inconsistent' (/controller is fine): the next step is the back run, then forward."""
    cluster = kraft_ready_cluster(name=CLUSTER)
    rows = cluster_rows(cluster)
    template = next(r for r in rows if r.path == zk.CONTROLLER_EPOCH)
    rows.append(replace(template, path=zk.MIGRATION, data=None, version=0, ephemeral_owner=0))
    state = ClusterState.from_snapshot(rows, cluster=CLUSTER)
    modes = {b: BrokerMode.MIGRATION for b in state.brokers}
    found = migration_state(state, modes)
    assert found.phase is Phase.BROKERS_IN_MIGRATION_MODE and found.hung and not found.inconsistent
    assert "KAFKA-19480" in found.stage and "direction back" in found.next_step
    assert not found.kraft_controller_active


def test_the_kraft_metadata_log_is_no_orphan_but_a_real_topic_of_that_name_is_audited():
    cluster = mid_migration_cluster(name=CLUSTER)
    log = rules.ReplicaDir(0, "/d", "__cluster_metadata-0", DirKind.NORMAL, "__cluster_metadata", 0, None)
    kraft_log = replace(log, topic_id=ONE_UUID, metadata_present=True)
    assert rules.is_kraft_metadata_log(rules.TopicEvidence("__cluster_metadata", None, dirs=(kraft_log,)))
    other = replace(kraft_log, topic_id=cluster.topic("orders").zk_topic_id)
    assert not rules.is_kraft_metadata_log(rules.TopicEvidence("__cluster_metadata", None, dirs=(other,)))
    assert not rules.is_kraft_metadata_log(
        rules.TopicEvidence("__cluster_metadata", None, config_znode=True, dirs=(kraft_log,))
    )


# ---------------------------------------------------------------------------------------------
# the optional stage of the daily audit
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def clusters_file(monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW__KAFKA_ZK__CLUSTERS_FILE", raising=False)
    file = tmp_path / "kafka_zk_clusters.toml"
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(file))
    return file


def test_the_daily_stage_is_off_by_default_and_reports_only(clusters_file):
    from airflow_provider_kafka_zk.clusters import ClusterFileError, load_clusters
    from airflow_provider_kafka_zk.dags.daily_hygiene import create_dags

    clusters_file.write_text(
        "[clusters.a]\n[clusters.b]\nkraft_readiness = true\nkraft_controller_node_ids = [9000, 9001, 9002]\n"
    )
    dags = create_dags()
    assert "kraft_readiness" not in dags["kafka_zk_daily_hygiene_a"].task_ids
    stage = dags["kafka_zk_daily_hygiene_b"].get_task("kraft_readiness")
    # never holds up the gate: only the run's final alert (a teardown after every task) follows it
    assert stage.upstream_task_ids == {"audit"} and stage.downstream_task_ids == {"alert"}
    assert "gate" not in stage.get_flat_relative_ids(upstream=False)
    assert stage.fail_on_blockers is False and stage.controller_node_ids == [9000, 9001, 9002]
    assert stage.findings.endswith("/b/findings/{{ ti.xcom_pull(task_ids='coverage')['inventory_ts'] }}")
    clusters_file.write_text('[clusters.c]\nkraft_readiness = "yes"\n')
    with pytest.raises(ClusterFileError, match=r"clusters\.c\.kraft_readiness must be true or false"):
        load_clusters()
    clusters_file.write_text("[clusters.c]\nkraft_controller_node_ids = []\n")
    with pytest.raises(ClusterFileError, match="kraft_controller_node_ids must be a list"):
        load_clusters()


def test_the_manual_dag_reads_snapshot_inventory_and_the_audit_before_the_checks(clusters_file):
    from airflow_provider_kafka_zk.dags import kraft_migration_readiness

    clusters_file.write_text("[clusters.a]\n")
    dag = kraft_migration_readiness.build_dag()
    assert dag.dag_id == kraft_migration_readiness.DAG_ID == rules.KRAFT_READINESS_DAG
    readiness = dag.get_task("readiness")
    assert readiness.upstream_task_ids == {"audit"}
    assert dag.get_task("audit").upstream_task_ids == {"inventory_coverage"}
    assert dag.params["controller_node_ids"] == [3000, 3001, 3002]
    assert dag.params["fail_on_blockers"] is True and dag.schedule is None


def test_an_unset_ibp_is_the_release_line_when_the_release_is_known():
    cluster = kraft_ready_cluster(name=CLUSTER)
    for b in cluster.brokers:
        cluster.set_broker_properties(b, {"inter.broker.protocol.version": None})
    assert _report(cluster).check("inter-broker-protocol").status is Status.BLOCKER  # nothing tells it
    check = _report(cluster, kafka_version="3.9.0").check("inter-broker-protocol")
    assert check.status is Status.PASS and "3.9 on brokers 0, 1, 2 and 3" in check.evidence


def test_a_finalized_migration_is_reported_as_the_cluster_having_left_zookeeper():
    """ZooKeeper alone looks the same after the finalization as in the dual-write (Kafka leaves /controller
    and /migration as its last write did); the migration DAG's record under the provider's znode tells."""
    from airflow_provider_kafka_zk.kafka.safety import KRAFT_FINALIZED_PATH

    cluster = mid_migration_cluster(name=CLUSTER)
    rows = list(cluster_rows(cluster))
    record = b'{"finalized": true, "recorded_at": "2026-11-29T12:00:00Z", "run": "manual__1"}'
    state = ClusterState.from_snapshot(
        [*rows, replace(rows[-1], path=KRAFT_FINALIZED_PATH, data=record)], cluster=CLUSTER
    )
    assert state.kraft_finalized == record and _state(cluster).kraft_finalized is None
    facts = cluster_facts(CLUSTER, state, {}, [], int(time.time() * 1000))
    (finding,) = rules.kraft_migration_findings(state, facts)
    assert finding.check == "kraft-migration-finalized" and finding.severity is Severity.INFO
    assert finding.summary.startswith("The cluster left ZooKeeper: its migration to KRaft was finalized")
    assert "manual__1" in finding.summary and "no way back" in finding.summary
    # the finding's evidence is the phase reader's answer, the record one of its signals
    assert finding.evidence["phase"] == "finalized" and finding.evidence["possible_phases"] == ["finalized"]
    assert migration_state(state).phase is Phase.FINALIZED
    assert migration_state(_state(cluster)).phase is Phase.DUAL_WRITE_ZK_BROKERS


def test_every_writer_refuses_a_finalized_cluster_by_the_phase_reader():
    """The maintenance session's refusal (``refusal`` of ``classify``) reads the record through the phase
    reader: the text every writer gives is the one the audit's finding says, also after ZooKeeper's
    migration znodes were tidied away (no sign of a migration left, only the record)."""
    from airflow_provider_kafka_zk.kafka.kraft_migration import classify, migration_evidence, refusal
    from airflow_provider_kafka_zk.kafka.safety import KraftMigrationEvidence, cluster_left_zookeeper

    record = b'{"finalized": true, "recorded_at": "2026-11-29T12:00:00Z", "run": "manual__1"}'
    state = _state(mid_migration_cluster(name=CLUSTER))
    evidence = replace(migration_evidence(state), finalized_record=record)
    found = classify(evidence, zk_brokers=state.brokers)
    assert found.phase is Phase.FINALIZED and not found.inconsistent
    assert refusal(found, evidence) == cluster_left_zookeeper(record) == found.reason
    tidied = KraftMigrationEvidence(None, None, None, record)
    found = classify(tidied, zk_brokers=())
    assert found is not None and found.phase is Phase.FINALIZED
    assert refusal(found, tidied) == cluster_left_zookeeper(record)
    assert classify(KraftMigrationEvidence(None, None, None), zk_brokers=()) is None


def test_a_finalization_record_beside_zookeeper_mode_brokers_says_which_to_check_first():
    """The migration DAG's record says the cluster left ZooKeeper; brokers' server.properties say
    ZooKeeper mode. Both cannot hold (a finalized migration has no way back), so the finding leads with
    that contradiction and the brokers and record it concerns -- not with the revert of a migration
    still under way (deleting /controller and /migration), which does not apply once finalized."""
    from airflow_provider_kafka_zk.kafka.safety import KRAFT_FINALIZED_PATH

    cluster = mid_migration_cluster(name=CLUSTER)
    rows = list(cluster_rows(cluster))
    record = (
        b'{"controllers": [3000, 3001, 3002], "finalized": true, "post_migration_offset": 90, '
        b'"recorded_at": "2026-11-29T12:00:00Z", "run": "manual__1"}'
    )
    state = ClusterState.from_snapshot(
        [*rows, replace(rows[-1], path=KRAFT_FINALIZED_PATH, data=record)], cluster=CLUSTER
    )
    facts = cluster_facts(CLUSTER, state, {}, [], int(time.time() * 1000))
    modes = {0: BrokerMode.ZOOKEEPER, 1: BrokerMode.MIGRATION, 2: BrokerMode.KRAFT}
    (finding,) = rules.kraft_migration_findings(state, replace(facts, broker_modes=modes))
    assert finding.check == "kraft-migration-inconsistent" and finding.severity is Severity.ERROR
    assert finding.path == KRAFT_FINALIZED_PATH
    assert finding.summary.startswith(f"{KRAFT_FINALIZED_PATH} says the migration to KRaft was finalized")
    assert "manual__1" in finding.summary
    assert (
        "brokers 0 and 1 have server.properties not in KRaft mode (0: zookeeper, 1: zookeeper-migration)"
        in (finding.summary)
    )
    assert "Nothing was changed" not in finding.summary  # a writer's refusal, not an audit's finding
    action = finding.action
    assert "deleteall" not in action and "Reverting to ZooKeeper mode" not in action
    assert "no way back" in action and "process.roles=broker" in action
    assert "kafka-metadata-quorum.sh --bootstrap-controller" in action and "3000, 3001, 3002" in action
    assert f"delete {KRAFT_FINALIZED_PATH}" in action
    # the evidence keeps every signal the phase reader weighed
    assert finding.evidence["phase"] == "inconsistent"
