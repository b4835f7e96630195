"""KRaft migration readiness against real parts: the simulated 3.9 cluster in a real ZooKeeper, its
broker hosts (127.0.0.1-4, server.properties included) behind a real sshd; the readiness DAG's steps
(snapshot through the ZooKeeper hook, inventory of every broker over SSH, the in-process audit, the
readiness operator) run in this process, and the DAG itself under ``airflow dags test``.

What the issue asks: a ready 3.9 cluster passes; each blocker, planted alone on it, is the only
blocker reported, with its fix; a KAFKA-14190 precursor blocks and the topicId repair DAG's write-back
(run by ``airflow dags test kafka_zk_topic_id_repair``, as the repair's own tests do) clears it; a
cluster mid-migration is reported as migrating by the readiness and by the daily audit, with no
false incident.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator, InventoryCoverageOperator
from airflow_provider_kafka_zk.operators.kraft_readiness import (
    KraftReadinessBlockedError,
    KraftReadinessOperator,
)
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.broker_processes import StandInBrokers
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.recorded_migration import (
    PHASES,
    RecordedMigration,
    RecordedPhase,
)
from airflow_provider_kafka_zk.testing.simulator.scenarios import (
    READINESS_BLOCKERS,
    kraft_ready_cluster,
    mid_migration_cluster,
)

pytestmark = pytest.mark.integration

CLUSTER = "kraft"
ZK_CONN = "kraft_zk"
SSH_CONN = "kraft_ssh"
HOSTS = {b: f"127.0.0.{b + 1}" for b in range(4)}


def _zookeeper_connection(monkeypatch, hosts: str, chroot: str) -> None:
    """The cluster's ZooKeeper connection (``ZK_CONN``) in an env var."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{ZK_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": hosts,
                "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
            }
        ),
    )


@pytest.fixture
def deploy(zookeeper_server, ssh_server, tmp_path, monkeypatch):
    """Deploys a simulated cluster in a fresh chroot; connections in env vars, a cluster file."""
    opened: list[DeployedCluster] = []
    for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
        monkeypatch.setenv(name, value)

    def _deploy(cluster) -> DeployedCluster:
        chroot = zookeeper_server.new_chroot("/kafka_kraft_")
        _zookeeper_connection(monkeypatch, zookeeper_server.connect_string, chroot)
        hosts = tmp_path / f"hosts-{len(opened)}"
        deployed = DeployedCluster(cluster, zookeeper_server.connect_string, chroot, hosts)
        opened.append(deployed)
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{tmp_path / "artefacts"}"\nengine = "in-process"\n'
            # the write-back runs under `airflow dags test`, where nobody answers an approval
            "require_approval = false\n"
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            + "broker_hosts = { "
            + ", ".join(f'"{b}" = "{h}"' for b, h in HOSTS.items())
            + " }\n"
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        return deployed

    yield _deploy
    for deployed in opened:
        deployed.close()


def _read(deployed: DeployedCluster, base: Path, ts: str) -> tuple[str, str, str]:
    """The DAG's first steps in this process: snapshot, inventory of every broker, coverage, audit."""
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        ref, _ = write_snapshot(str(base), CLUSTER, hook.snapshot(), source=hook.target_description())
    properties = str(deployed.root / "broker-{broker_id}" / "config" / "server.properties")
    brokers = sorted(deployed.cluster.brokers)
    for broker_id in brokers:
        BrokerInventoryOperator(
            task_id=f"inventory_{broker_id}",
            broker_id=broker_id,
            cluster=CLUSTER,
            base_path=str(base),
            ssh_conn_id=SSH_CONN,
            kafka_zookeeper_conn_id=ZK_CONN,
            broker_hosts=HOSTS,
            server_properties_path=properties,
            inventory_ts=ts,
            connect_timeout=5,
        ).execute({})
    coverage = InventoryCoverageOperator(
        task_id="coverage", cluster=CLUSTER, base_path=str(base), expected_broker_ids=brokers, inventory_ts=ts
    ).execute({})
    assert coverage["status"] == "complete"
    inventory = str(base / CLUSTER / "inventory" / ts)
    findings = str(base / CLUSTER / "kraft-readiness" / ts / "audit")
    ClusterAuditOperator(
        task_id="audit",
        cluster=CLUSTER,
        base_path=str(base),
        snapshot=ref.path,
        previous="",
        inventory=inventory,
        out=findings,
    ).execute({})
    return ref.path, inventory, findings


def _readiness(deployed: DeployedCluster, base: Path, **conf) -> dict:
    ts = f"t{time.time_ns()}"
    snapshot, inventory, findings = _read(deployed, base, ts)
    result = KraftReadinessOperator(
        task_id="readiness",
        cluster=CLUSTER,
        base_path=str(base),
        kafka_zookeeper_conn_id=ZK_CONN,
        snapshot=snapshot,
        inventory=inventory,
        findings=findings,
        readiness_ts=ts,
        fail_on_blockers=False,
        **conf,
    ).execute({})
    result["readiness_json"] = json.loads(Path(result["readiness"]).read_text())
    result["findings"] = audit_job.read_findings(findings)
    return result


def _status(report: dict) -> dict[str, str]:
    return {c["check"]: c["status"] for c in report["checks"]}


def test_a_ready_3_9_cluster_passes_every_check_and_counts_what_will_be_copied(deploy, tmp_path):
    deployed = deploy(kraft_ready_cluster(name=CLUSTER))
    result = _readiness(deployed, tmp_path / "artefacts")
    report = result["readiness_json"]
    assert result["verdict"] == "ready to migrate" and result["blockers"] == []
    assert report["ready"] is True and report["migration"] is None
    assert set(_status(report).values()) == {"pass"}, _status(report)
    release = next(c for c in report["checks"] if c["check"] == "release")
    # no running broker process: the release comes from IBP 3.9 (no ZooKeeper-mode release after 3.9)
    assert "3.9.x on brokers 0, 1, 2 and 3" in release["evidence"]
    counts = next(c for c in report["checks"] if c["check"] == "metadata-copy")["details"]["counts"]
    assert counts == {
        "topics": 3,
        "partitions": 14,
        "topic_configs": 1,
        "topic_config_keys": 3,
        "broker_configs": 0,
        "broker_config_keys": 0,
        "client_quota_entities": 2,
        "scram_credentials": 1,
        "acl_resources": 3,
        "acl_entries": 4,
        "delegation_tokens": 1,
        "producer_id_block": True,
    }
    text = Path(result["report"]).read_text()
    assert text.startswith("KRaft migration readiness of kraft: READY TO MIGRATE")
    assert "salt=" not in text and "salt=" not in Path(result["readiness"]).read_text()  # no SCRAM secret


@pytest.mark.parametrize("case", sorted(READINESS_BLOCKERS))
def test_each_blocker_planted_alone_is_the_only_blocker_with_its_fix(case, deploy, tmp_path):
    blocker = READINESS_BLOCKERS[case]
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version=blocker.kafka_version)
    blocker.plant(cluster)
    deployed = deploy(cluster)
    result = _readiness(deployed, tmp_path / "artefacts", **blocker.conf)
    report = result["readiness_json"]
    blockers = [c for c in report["checks"] if c["status"] == "blocker"]
    assert [c["check"] for c in blockers] == [blocker.check], _status(report)
    assert result["verdict"] == "1 blocker"
    assert report["checks"][0]["check"] == blocker.check  # blockers first
    (found,) = blockers
    assert found["fix"] and found["evidence"] and found["source"]
    text = Path(result["report"]).read_text()
    assert text.startswith("KRaft migration readiness of kraft: 1 BLOCKER")
    assert text.index(f"({blocker.check})") < text.index("[PASS]")


def test_the_readiness_operator_fails_while_blockers_remain(deploy, tmp_path):
    cluster = kraft_ready_cluster(name=CLUSTER)
    READINESS_BLOCKERS["throttle_left"].plant(cluster)
    deployed = deploy(cluster)
    base = tmp_path / "artefacts"
    snapshot, inventory, findings = _read(deployed, base, "t1")
    operator = KraftReadinessOperator(
        task_id="readiness",
        cluster=CLUSTER,
        base_path=str(base),
        kafka_zookeeper_conn_id=ZK_CONN,
        snapshot=snapshot,
        inventory=inventory,
        findings=findings,
        readiness_ts="t1",
    )
    with pytest.raises(KraftReadinessBlockedError, match=r"1 blocker: \[throttles\] broker 1 still has"):
        operator.execute({})
    assert (base / CLUSTER / "kraft-readiness" / "t1" / "report.txt").exists()  # written before failing


def _airflow(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run(
        [airflow, *args], env=os.environ.copy(), capture_output=True, text=True, timeout=timeout
    )


def _latest_report(base: Path) -> dict:
    runs = sorted((base / CLUSTER / "kraft-readiness").iterdir())
    return json.loads((runs[-1] / "readiness.json").read_text())


def test_a_kafka_14190_precursor_blocks_and_the_repair_dags_write_back_clears_it(
    deploy, tmp_path, airflow_home
):
    cluster = kraft_ready_cluster(name=CLUSTER)
    READINESS_BLOCKERS["topic_id_precursor"].plant(cluster)  # a 2.7 client added partitions to payments
    deployed = deploy(cluster)
    base = tmp_path / "artefacts"
    zk_client = KazooClient(hosts=deployed.zookeeper_connect)
    zk_client.start(timeout=15)
    try:
        # the readiness DAG under airflow dags test: it fails on the blocker and names the repair's run
        run = _airflow(
            "dags", "test", "kafka_zk_kraft_migration_readiness", "-c", json.dumps({"cluster": CLUSTER})
        )
        output = run.stdout + run.stderr
        assert run.returncode != 0, output[-4000:]
        assert "1 blocker: [topic-ids] payments: precursor" in output
        report = _latest_report(base)
        (ids,) = [c for c in report["checks"] if c["status"] == "blocker"]
        assert ids["check"] == "topic-ids"
        (fix,) = ids["fix_runs"]
        disk_id = str(deployed.cluster.topic("payments").controller_topic_id)
        assert fix["dag_id"] == "kafka_zk_topic_id_repair"
        assert fix["conf"] == {"cluster": CLUSTER, "topics": ["payments"], "strategy": "write_back"}
        assert fix["run"] == (
            "airflow dags trigger kafka_zk_topic_id_repair --conf "
            '\'{"cluster": "kraft", "topics": ["payments"], "strategy": "write_back", "dry_run": false}\''
        )
        assert f"holds {disk_id}" in ids["evidence"]
        # the write-back, as the report says (dags test of the same conf), then the readiness again
        repair = _airflow(
            "dags", "test", "kafka_zk_topic_id_repair", "-c", json.dumps({**fix["conf"], "dry_run": False})
        )
        assert repair.returncode == 0, (repair.stdout + repair.stderr)[-6000:]
        path = zk.topic_path("payments")
        assert str(zk.TopicAssignment.decode(zk_client.get(path)[0], path).topic_id) == disk_id
        again = _airflow(
            "dags", "test", "kafka_zk_kraft_migration_readiness", "-c", json.dumps({"cluster": CLUSTER})
        )
        assert again.returncode == 0, (again.stdout + again.stderr)[-6000:]
        report = _latest_report(base)
        assert report["verdict"] == "ready to migrate", _status(report)
        assert _status(report)["topic-ids"] == "pass"
    finally:
        zk_client.stop()
        zk_client.close()


def test_a_cluster_mid_migration_is_reported_as_migrating_with_no_false_incident(deploy, tmp_path):
    cluster = mid_migration_cluster(name=CLUSTER)
    deployed = deploy(cluster)
    result = _readiness(deployed, tmp_path / "artefacts")
    report = result["readiness_json"]
    assert result["verdict"] == "migrating (dual-write-zk-brokers)", _status(report)
    assert report["migration"]["kraft_controller_id"] == 3000
    assert report["migration"]["kraft_controller_epoch"] == 5
    assert report["migration"]["kraft_metadata_offset"] > 0
    assert result["blockers"] == []
    # the daily audit's rules on the same snapshot and inventory: the migration's state, nothing else
    findings = result["findings"]
    checks = {f.check for f in findings}
    (state,) = [f for f in findings if f.check == "kraft-migration"]
    assert state.severity.name == "INFO" and "phase dual-write" in state.summary
    assert "KRaft controller 3000 (KRaft epoch 5)" in state.summary
    # brokers in migration mode keep __cluster_metadata-0 (no orphan); the restarted broker leads
    # nothing until an election (the one the simulated KRaft controller ran): no imbalance left either
    assert checks == {"kraft-migration"}, [(f.check, f.summary) for f in findings]


def test_the_daily_dag_reports_the_migration_and_its_readiness_stage_without_failing(
    deploy, tmp_path, airflow_home
):
    """``kraft_readiness = true``: the daily DAG (in-process audit) on a cluster mid-migration, under
    ``airflow dags test``: the gate passes (the migration is INFO), the stage writes its report."""
    deployed = deploy(mid_migration_cluster(name=CLUSTER))
    clusters = Path(os.environ["KAFKA_ZK_CLUSTERS_FILE"])
    clusters.write_text(clusters.read_text() + "kraft_readiness = true\n")
    run = _airflow("dags", "test", f"kafka_zk_daily_hygiene_{CLUSTER}")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    base = tmp_path / "artefacts"
    report = _latest_report(base)
    assert report["verdict"] == "migrating (dual-write-zk-brokers)" and report["blockers"] == 0
    [findings_dir] = sorted((base / CLUSTER / "findings").iterdir())
    findings = audit_job.read_findings(str(findings_dir))
    assert [f.check for f in findings] == ["kraft-migration"], [(f.check, f.summary) for f in findings]
    assert deployed.cluster.kraft_controller_active


# ---------------------------------------------------------------------------------------------
# running brokers (issue 32, item 4) and every real phase of a migration (the recorded 3.9.0 one)
# ---------------------------------------------------------------------------------------------


def test_readiness_reads_the_release_and_ibp_of_running_brokers(deploy, tmp_path):
    """server_properties_path given and brokers running on those files (stand-in processes with
    Kafka's command line): the release comes from the running process's jars -- no kafka_version param --
    as it did for the identity check only before."""
    deployed = deploy(kraft_ready_cluster(name=CLUSTER))
    with StandInBrokers() as brokers:
        brokers.start((h.server_properties for h in deployed.hosts.values()), "3.9.0")
        result = _readiness(deployed, tmp_path / "artefacts")
    report = result["readiness_json"]
    release = next(c for c in report["checks"] if c["check"] == "release")
    assert "3.9.0 on brokers 0, 1, 2 and 3" in release["evidence"], release
    assert {b["from"] for b in release["details"]["brokers"].values()} == {
        "its running process's kafka_<scala>-<release>.jar"
    }
    assert result["verdict"] == "ready to migrate", _status(report)


GOLDEN_MIGRATION = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.9-migration"


def load_recorded_znodes(connect: str, chroot: str, phase: RecordedPhase) -> list[KazooClient]:
    """Every znode of the recorded phase under ``chroot``: persistent ones from one session, each
    ephemeral one from a session per owner, as the brokers' sessions held them. Returns the owners'
    sessions (close them and ZooKeeper removes their znodes)."""
    dump = json.loads((GOLDEN_MIGRATION / "zookeeper" / f"{phase.value}.json").read_text())
    admin = KazooClient(hosts=connect + chroot)
    admin.start(timeout=15)
    owners: dict[int, KazooClient] = {}
    try:
        for znode in sorted(dump["znodes"], key=lambda z: z["path"].count("/")):
            path = znode["path"][len(dump["root"]) :]
            if not path:
                continue
            data = b"" if znode["data"] is None else znode["data"].encode()
            owner = znode["stat"]["ephemeralOwner"]
            if owner:
                if owner not in owners:
                    owners[owner] = KazooClient(hosts=connect + chroot)
                    owners[owner].start(timeout=15)
                owners[owner].create(path, data, ephemeral=True)
            else:
                admin.create(path, None if znode["data"] is None else data)
    finally:
        admin.stop()
        admin.close()
    return list(owners.values())


@pytest.fixture
def recorded_phase(zookeeper_server, ssh_server, tmp_path, monkeypatch):
    """A recorded phase's real znodes in a fresh chroot of a real ZooKeeper, and the simulator's broker
    hosts for that phase (server.properties, meta.properties, disks) behind the real sshd, each broker
    "running" (a stand-in process on its server.properties, Kafka 3.9.0's jars)."""
    sessions: list[KazooClient] = []
    brokers = StandInBrokers()
    for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
        monkeypatch.setenv(name, value)

    def _load(phase: RecordedPhase):
        chroot = zookeeper_server.new_chroot("/k39_")
        sessions.extend(load_recorded_znodes(zookeeper_server.connect_string, chroot, phase))
        _zookeeper_connection(monkeypatch, zookeeper_server.connect_string, chroot)
        cluster = RecordedMigration(name=CLUSTER).play_to(phase)
        root = tmp_path / "hosts"
        hosts = write_broker_hosts(cluster, root, zookeeper_server.connect_string + chroot)
        brokers.start((h.server_properties for h in hosts.values()), "3.9.0")
        return SimpleNamespace(cluster=cluster, root=root, chroot=chroot, hosts=hosts)

    yield _load
    brokers.stop()
    for session in sessions:
        session.stop()
        session.close()


_STAGES = {
    RecordedPhase.CONTROLLER_PROVISIONED: (
        "controllers-provisioned",
        "controllers provisioned; brokers in ZooKeeper mode",
    ),
    RecordedPhase.BROKERS_IN_MIGRATION_MODE: (
        "dual-write-zk-brokers",
        "dual-write; brokers in ZooKeeper mode (migration mode)",
    ),
    RecordedPhase.BROKERS_IN_KRAFT_MODE: (
        "dual-write-kraft-brokers",
        "dual-write; every broker in KRaft mode (not finalized)",
    ),
    RecordedPhase.ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE: (
        "dual-write-zk-brokers",
        "dual-write; brokers in ZooKeeper mode (migration mode)",
    ),
    RecordedPhase.ROLLBACK_CONTROLLER_DEPROVISIONED: (
        "reverting",
        "rollback; ZooKeeper controller back, brokers 0, 1, 2 still in migration mode",
    ),
    RecordedPhase.ROLLBACK_COMPLETE: ("zookeeper", "rolled back to ZooKeeper mode; /migration left behind"),
}
# a writer's session reads ZooKeeper only, not the brokers' files: after the documented rollback it cannot
# tell whether a broker still carries the migration flag, so it names a revert
_REFUSED_AS = {RecordedPhase.ROLLBACK_COMPLETE: "reverting"}


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_each_recorded_phase_is_read_right_by_audit_readiness_and_every_writer(
    recorded_phase, phase, tmp_path, opt_out_of_approval, zookeeper_server
):
    """The recorded znodes of a real 3.9.0 migration in a real ZooKeeper, read through the snapshot hook,
    each broker inventoried over SSH: the audit raises no false incident and names the phase, the readiness
    report says where the migration is and what comes next, and a writer's session refuses naming both --
    without writing anything."""
    loaded = recorded_phase(phase)
    result = _readiness(loaded, tmp_path / "artefacts")
    report, findings = result["readiness_json"], result["findings"]
    incidents = [(f.check, f.summary[:200]) for f in findings if f.severity.name in ("CRITICAL", "ERROR")]
    assert incidents == []
    assert not {"broker-down", "offline-partitions", "controller"} & {f.check for f in findings}
    assert result["blockers"] == [], _status(report)
    release = next(c for c in report["checks"] if c["check"] == "release")
    assert "3.9.0 on brokers 0, 1 and 2" in release["evidence"]  # the running processes' jars
    before = zookeeper_server.tree(loaded.chroot)
    # The writer here runs behind no approval step: without the opt-out the approval rule refuses it
    # before it reads the cluster (issue 31), and the migration refusal under test is never reached.
    opt_out_of_approval(CLUSTER, ZK_CONN)
    from airflow_provider_kafka_zk.maintenance import MaintenanceSession, RunIdentity
    from airflow_provider_kafka_zk.maintenance.session import KraftMigrationInProgressError

    with KafkaZooKeeperHook(ZK_CONN) as hook:
        session = MaintenanceSession(
            hook,
            cluster=CLUSTER,
            artefact_dir=str(tmp_path / "writer"),
            run=RunIdentity("kafka_zk_pre_maintenance_drain", "r", "execute", 1, "h"),
            dry_run=False,
        )
        if phase is RecordedPhase.ZK_MODE:
            assert result["verdict"] == "ready to migrate"
            assert not [f for f in findings if f.check.startswith("kraft-migration")]
            return
        with pytest.raises(KraftMigrationInProgressError) as refused:
            session.open()
    name, stage = _STAGES[phase]
    state = "/migration left over" if name == "zookeeper" else "migrating"
    assert result["verdict"] == f"{state} ({name})"
    assert report["migration"]["stage"] == stage and report["migration"]["next_step"]
    (state,) = [f for f in findings if f.check == "kraft-migration"]
    assert stage in state.summary and "Next: " in state.action
    text = str(refused.value)
    assert (
        f"is in progress, phase {_REFUSED_AS.get(phase, name)} (" in text
        and "Next: " in text
        and "Nothing was changed" in text
    )
    assert zookeeper_server.tree(loaded.chroot) == before  # nothing written
