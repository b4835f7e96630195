"""The migration run by run, on real parts: the recorded 3.9.0 cluster (3 brokers) simulated in a real
ZooKeeper, its broker hosts and a KRaft controller's host behind a real sshd, the commands of the
cluster file's templates answered by the simulator (:class:`MigrationRuntime`); each run's plan,
execute and verify tasks run in this process, as the DAG chains them (real runs: the cluster file
opts out of approval, which these in-process runs cannot give; the approval itself is held by the
plan-changed test below and by the approval module's tests).

What the issue asks: a full forward migration to dual-write with KRaft brokers, verified; a rollback
from each phase to ZooKeeper mode with no partition offline and ``/migration`` gone; each trap planted
alone, refused or handled and named; finalization refused while one broker is not registered as a
KRaft broker; a plan changed after its approval refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.kraft_migration_config import ControllerNode
from airflow_provider_kafka_zk.kafka.logdir import DirKind, parse_java_properties
from airflow_provider_kafka_zk.operators.kraft_migration import (
    KraftMigrationExecuteOperator,
    KraftMigrationPlanOperator,
    KraftMigrationRefusedError,
    KraftMigrationVerifyOperator,
)
from airflow_provider_kafka_zk.testing.simulator.migration_hosts import (
    MigrationRuntime,
    OperatorOwnedDeployment,
)
from airflow_provider_kafka_zk.testing.simulator.recorded_migration import RecordedMigration

pytestmark = pytest.mark.integration

CLUSTER = "k39"
ZK_CONN = "k39_zk"
SSH_CONN = "k39_ssh"
CONTROLLER_HOST = "127.0.0.4"
BROKERS = (0, 1, 2)


@dataclass
class Migration:
    deployed: OperatorOwnedDeployment
    runtime: MigrationRuntime
    base: Path
    chroot: str
    connect: str
    controller: ControllerNode
    runs: int = 0

    # -- one run of the DAG's writing path: plan -> (approve: opted out) -> execute -> verify ------
    def run(
        self, direction: str, *, dry_run: bool = False, verify: bool = True, inventory: str | None = None
    ) -> dict[str, Any]:
        self.runs += 1
        ts = f"run{self.runs:02d}"
        plan = KraftMigrationPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            direction=direction,
            base_path=str(self.base),
            plan_ts=ts,
            inventory_path=inventory,
        ).execute({})
        execute = self.execute(plan["plan_dir"], dry_run=dry_run)
        result = {"plan": plan, "execute": execute, "folder": Path(plan["plan_dir"])}
        if verify and not dry_run:
            result["verify"] = KraftMigrationVerifyOperator(
                task_id="verify", plan_dir=plan["plan_dir"], cluster=CLUSTER
            ).execute({})
        return result

    def execute(self, plan_dir: str | Path, *, dry_run: bool = False) -> dict[str, Any]:
        """The execute task of the run planned in ``plan_dir`` (called again: the task cleared and retried)."""
        return KraftMigrationExecuteOperator(
            task_id="execute",
            plan_dir=str(plan_dir),
            cluster=CLUSTER,
            kafka_zookeeper_conn_id=ZK_CONN,
            ssh_conn_id=SSH_CONN,
            dry_run=dry_run,
            gate_timeout=120,
            wait_timeout=120,
            command_timeout=120,
            poll_interval=0.3,
        ).execute({})

    def verify_with_audit(self, folder: Path) -> dict[str, Any]:
        """The DAG's after-run reads in this process -- snapshot, every broker's inventory over SSH,
        the audit -- and the verify step given the audit's findings (stray directories)."""
        from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
        from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator

        ts = f"audit{self.runs:02d}"
        with KafkaZooKeeperHook(ZK_CONN) as hook:
            ref, _ = write_snapshot(
                str(self.base), CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        findings = str(folder / "audit-after")
        ClusterAuditOperator(
            task_id="audit",
            cluster=CLUSTER,
            base_path=str(self.base),
            snapshot=ref.path,
            previous="",
            inventory=self.inventory(ts),
            out=findings,
        ).execute({})
        KraftMigrationVerifyOperator(
            task_id="verify", plan_dir=str(folder), cluster=CLUSTER, findings=findings
        ).execute({})
        return json.loads((folder / "verify.json").read_text())

    def inventory(self, ts: str) -> str:
        """Every broker's inventory over SSH, as the DAG's inventory tasks take it (the brokers' release
        from their running process's jars among it); returns the inventory's folder."""
        from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator

        for broker in BROKERS:
            BrokerInventoryOperator(
                task_id=f"inventory_{broker}",
                broker_id=broker,
                cluster=CLUSTER,
                base_path=str(self.base),
                ssh_conn_id=SSH_CONN,
                kafka_zookeeper_conn_id=ZK_CONN,
                broker_hosts={b: f"127.0.0.{b + 1}" for b in BROKERS},
                server_properties_path=str(
                    self.deployed.root / "broker-{broker_id}" / "config" / "server.properties"
                ),
                inventory_ts=ts,
                connect_timeout=5,
            ).execute({})
        return str(self.base / CLUSTER / "inventory" / ts)

    def zookeeper(self) -> KazooClient:
        client = KazooClient(hosts=self.connect + self.chroot)
        client.start(timeout=10)
        return client

    def offline_partitions(self) -> list[str]:
        client = self.zookeeper()
        try:
            live = {int(b) for b in client.get_children("/brokers/ids")}
            kraft = {b for b, m in self.deployed.cluster.brokers.items() if m.online and m.kraft_mode}
            out = []
            for topic in client.get_children("/brokers/topics"):
                for p in client.get_children(f"/brokers/topics/{topic}/partitions"):
                    state = json.loads(client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                    if state["leader"] not in live | kraft:
                        out.append(f"{topic}-{p}")
            return out
        finally:
            client.stop()
            client.close()

    def znode(self, path: str) -> bytes | None:
        client = self.zookeeper()
        try:
            return client.get(path)[0] if client.exists(path) else None
        finally:
            client.stop()
            client.close()

    def broker_file(self, broker: int) -> dict[str, str]:
        path = self.deployed.root / f"broker-{broker}" / "config" / "server.properties"
        return parse_java_properties(path.read_bytes(), str(path))


@pytest.fixture
def migration(zookeeper_server, ssh_server, tmp_path, monkeypatch) -> Iterator[Any]:
    opened: list[Any] = []
    for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
        monkeypatch.setenv(name, value)

    def _start(kafka_version: str = "3.9.0", **plants: Any) -> Migration:
        chroot = zookeeper_server.new_chroot("/k39_")
        for name, value in zookeeper_server.airflow_connection(ZK_CONN, chroot).items():
            monkeypatch.setenv(name, value)
        recorded = RecordedMigration(kafka_version=kafka_version)
        hosts = tmp_path / "hosts"
        deployed = OperatorOwnedDeployment(recorded.cluster, zookeeper_server.connect_string, chroot, hosts)
        controller_root = tmp_path / "controller-3000"
        controller = ControllerNode(
            3000,
            CONTROLLER_HOST,
            49190,
            str(controller_root / "config" / "controller.properties"),
            str(controller_root / "data"),
        )
        runtime = MigrationRuntime(
            deployed,
            controllers=[controller],
            command_dir=tmp_path / "commands",
            restart_dir=tmp_path / "restarts",
            **plants,
        )
        runtime.__enter__()
        opened.append((runtime, deployed))
        base = tmp_path / "artefacts"
        broker_hosts = ", ".join(f'"{b}" = "127.0.0.{b + 1}"' for b in BROKERS)
        (tmp_path / "clusters.toml").write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\nengine = "in-process"\nrequire_approval = false\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            f"broker_hosts = {{ {broker_hosts} }}\n"
            f"broker_restart_command = {json.dumps(runtime.command('restart-broker'))}\n"
            f"kraft_format_command = {json.dumps(runtime.command('format'))}\n"
            f"kraft_controller_start_command = {json.dumps(runtime.command('start'))}\n"
            f"kraft_controller_stop_command = {json.dumps(runtime.command('stop'))}\n"
            f"kraft_controller_restart_command = {json.dumps(runtime.command('restart'))}\n"
            f'kraft_quorum = "bootstrap"\n'
            f'kraft_controllers = [ {{ node_id = 3000, host = "{CONTROLLER_HOST}", port = 49190, '
            f'config_path = "{controller.config_path}", log_dir = "{controller.log_dir}", '
            f'log_file = "{controller_root / "logs" / "server.log"}" }} ]\n'
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(tmp_path / "clusters.toml"))
        return Migration(deployed, runtime, base, chroot, zookeeper_server.connect_string, controller)

    yield _start
    for runtime, deployed in opened:
        runtime.__exit__(None, None, None)
        deployed.close()


def _phase(result: dict[str, Any]) -> str:
    return result["verify"]["phase"]


DUAL_WRITE_CHECKS = {
    "topics and their ids": "same",
    "partitions and their replicas": "same",
    "topic configs": "same",
    "broker configs": "same",
    "client quotas": "same",
    "ACLs": "same",
    "SCRAM users": "same",
    "delegation tokens": "same",
}


def _rollback_to_zookeeper(m: Migration, runs: int) -> list[str]:
    """Back runs until ZooKeeper mode: no partition offline after any of them; then ``/migration`` gone,
    a ZooKeeper-mode broker controller, plain ZooKeeper-mode files, the controller's storage retired."""
    phases = []
    for _ in range(runs):
        phases.append(_phase(m.run("back")))
        assert m.offline_partitions() == [], phases
    assert phases[-1] == "zookeeper", phases
    assert m.znode("/migration") is None  # a later attempt loads everything again (KAFKA-17146)
    controller = json.loads(m.znode("/controller"))
    assert controller["brokerid"] in BROKERS and controller["kraftControllerEpoch"] == -1
    for broker in BROKERS:
        props = m.broker_file(broker)
        assert "zookeeper.metadata.migration.enable" not in props and "controller.listener.names" not in props
        assert "CONTROLLER" not in props["listener.security.protocol.map"]
    retired = [p.name for p in Path(m.controller.log_dir).parent.iterdir() if ".kafka-zk-retired-" in p.name]
    assert retired and not Path(m.controller.log_dir).exists()  # renamed aside, not deleted
    return phases


@pytest.mark.timeout(2400)
def test_forward_to_kraft_brokers_verified_finalize_refused_then_rolled_back(migration):
    """The full forward migration of the recorded 3-broker cluster to dual-write with KRaft brokers and
    its verification; finalization refused while broker 2's latest registration is a ZooKeeper
    broker's (KAFKA-20960); then the rollback from KRaft brokers: roll 1, then the revert."""
    m = migration()
    assert m.run("forward", dry_run=True, verify=False)["plan"]["to_phase"] == "controllers-provisioned"
    first = m.run("forward")
    assert _phase(first) == "controllers-provisioned"
    assert json.loads(m.znode("/migration"))["kraft_metadata_offset"] == -1
    second = m.run("forward")
    assert _phase(second) == "dual-write-zk-brokers"
    controller = json.loads(m.znode("/controller"))
    assert controller["brokerid"] == 3000 and controller["kraftControllerEpoch"] >= 1
    assert m.broker_file(0)["zookeeper.metadata.migration.enable"] == "true"
    kept = sorted(p.name for p in (m.deployed.root / "broker-0" / "config").iterdir())
    assert any(name.startswith("server.properties.kafka-zk-before-migration-mode-") for name in kept)
    third = m.run("forward")
    assert _phase(third) == "dual-write-kraft-brokers"
    assert m.broker_file(1)["process.roles"] == "broker" and "zookeeper.connect" not in m.broker_file(1)
    verify = json.loads((third["folder"] / "verify.json").read_text())
    assert {c["what"]: c["status"] for c in verify["dual_write_checks"]} == DUAL_WRITE_CHECKS
    assert m.offline_partitions() == []
    report = (third["folder"] / "report.txt").read_text()
    assert "expected after: dual-write-kraft-brokers; now: dual-write-kraft-brokers" in report
    # a stray partition directory on broker 1 (a topic deleted while the brokers rolled: KAFKA-15605)
    m.runtime.change(
        lambda c: c.leave_leftover_dirs(
            "deleted-while-migrating", 1, [0], kind=DirKind.NORMAL, age_ms=3_600_000
        )
    )
    stray = m.verify_with_audit(third["folder"])["stray_directories"]
    assert any(f["topic"] == "deleted-while-migrating" and f["broker_id"] == 1 for f in stray), stray
    assert "stray partition directories" in (third["folder"] / "report.txt").read_text()
    # KAFKA-20960: broker 2 registered again, as a ZooKeeper-mode broker in migration mode
    m.runtime.register_broker(2, kraft=False)
    with pytest.raises(
        KraftMigrationRefusedError, match=r"KAFKA-20960.*broker 2 is registered as a ZooKeeper-mode broker"
    ):
        m.run("forward")
    assert json.loads(m.znode("/controller"))["brokerid"] == 3000  # nothing changed: still dual-writing
    # roll 1 restores the files the forward run kept, then the revert
    assert _rollback_to_zookeeper(m, 2) == ["dual-write-zk-brokers", "zookeeper"]
    assert m.broker_file(0) == parse_java_properties(
        (
            m.deployed.root / "broker-0" / "config" / next(n for n in kept if "before-migration-mode" in n)
        ).read_bytes(),
        "kept",
    )


@pytest.mark.timeout(2400)
def test_rollback_from_provisioned_then_a_new_attempt_and_its_rollback_from_dual_write(migration):
    """Back from each earlier phase: deprovisioning, then (a new attempt on fresh storage and a fresh
    /migration, the KRaft epoch planted above ZooKeeper's: KAFKA-20488) the revert from dual-write."""
    m = migration(kraft_epoch=9)
    m.run("forward")
    assert _rollback_to_zookeeper(m, 1) == ["zookeeper"]
    assert _phase(m.run("forward")) == "controllers-provisioned"  # formatted again: the old log is aside
    assert json.loads(m.znode("/migration"))["kraft_metadata_offset"] == -1
    assert _phase(m.run("forward")) == "dual-write-zk-brokers"
    assert int(m.znode("/controller_epoch")) < 9  # the partition states carry the KRaft epoch 9
    back = m.run("back")
    plan = json.loads((back["folder"] / "plan.json").read_text())
    handback = next(s for s in plan["steps"] if s["kind"] == "hand_back_controller")
    assert handback["raise_epoch_to"] == 9
    assert {t["issue"]: t["status"] for t in plan["traps"]}["KAFKA-20488"] == "handled"
    assert int(m.znode("/controller_epoch")) >= 10
    assert _phase(back) == "zookeeper" and m.offline_partitions() == []
    assert m.znode("/migration") is None


def test_kafka_17146_a_stale_migration_znode_is_removed_before_provisioning(migration):
    m = migration()
    client = m.zookeeper()
    try:
        client.create(
            zk.MIGRATION,
            b'{"version":0,"kraft_metadata_offset":1570,"kraft_controller_id":3000,"kraft_metadata_epoch":1,"kraft_controller_epoch":1}',
        )
    finally:
        client.stop()
        client.close()
    first = m.run("forward")
    assert _phase(first) == "controllers-provisioned"
    assert json.loads(m.znode("/migration"))["kraft_metadata_offset"] == -1  # a fresh one: the load will run
    saved = json.loads((first["folder"] / "znodes-migration.json").read_text())
    assert "1570" in saved["znodes"]["/migration"]["data"]


def test_kafka_19480_a_migration_znode_without_data_is_removed_before_provisioning(migration):
    m = migration()
    client = m.zookeeper()
    try:
        client.create(zk.MIGRATION, None)
    finally:
        client.stop()
        client.close()
    assert _phase(m.run("forward")) == "controllers-provisioned"
    assert json.loads(m.znode("/migration"))["kraft_controller_id"] == -1


def test_a_plan_changed_after_its_approval_is_refused_before_any_change(migration):
    from airflow_provider_kafka_zk.artefacts.drain_folder import plan_identity
    from airflow_provider_kafka_zk.kafka.approval import plan_digest
    from airflow_provider_kafka_zk.kafka.steps import steps_from_dicts
    from airflow_provider_kafka_zk.maintenance import RunIdentity
    from airflow_provider_kafka_zk.maintenance.approval import ApprovedPlan, PlanChangedSinceApprovalError
    from airflow_provider_kafka_zk.maintenance.kraft_migration import execute_migration_plan
    from airflow_provider_kafka_zk.operators.kraft_migration import migration_settings

    m = migration()
    plan = KraftMigrationPlanOperator(
        task_id="plan", cluster=CLUSTER, direction="forward", base_path=str(m.base), plan_ts="p"
    ).execute({})
    folder = Path(plan["plan_dir"])
    settings = {"execute": {"cluster": CLUSTER, "kafka_zookeeper_conn_id": ZK_CONN, "ssh_conn_id": SSH_CONN}}
    digest = plan_digest({n: (folder / n).read_bytes() for n in ("plan.json", "rollback.json")}, settings)
    record = {
        "decision": "approved",
        "plan_dir": str(folder),
        "plan": digest.to_dict(),
        "decided_at": "2026-01-01T00:00:00+00:00",
        "decided_by": {"id": "alice", "name": "alice"},
    }
    approval = ApprovedPlan("execute", "approve", record, str(folder), settings)
    document = json.loads((folder / "plan.json").read_text())
    write = document["steps"][0]
    write["new_text"] = write["new_text"].replace(
        "zookeeper.metadata.migration.enable=true", "zookeeper.metadata.migration.enable=false"
    )
    (folder / "plan.json").write_text(json.dumps(document, indent=1))  # edited after the approval
    with pytest.raises(PlanChangedSinceApprovalError, match=r"plan\.json changed"):
        execute_migration_plan(
            str(folder),
            document,
            steps_from_dicts(document["steps"]),
            migration_settings(CLUSTER),
            run=RunIdentity.from_context({}, fallback_run_id="t"),
            dry_run=False,
            expected=plan_identity(document, str(folder)),
            approval=approval,
        )
    assert not Path(m.controller.config_path).exists() and m.znode("/migration") is None


def test_a_real_run_without_approval_is_refused_where_the_cluster_requires_it(migration):
    """The one approval rule (issue 31) holds for the migration's writes: the same real run the other
    tests make, on a cluster file that requires approval, with no approval step before it."""
    import os

    from airflow_provider_kafka_zk.maintenance.approval import ApprovalRequiredError

    m = migration()
    clusters = Path(os.environ["KAFKA_ZK_CLUSTERS_FILE"])
    clusters.write_text(clusters.read_text().replace("require_approval = false", "require_approval = true"))
    files = {p: p.read_bytes() for p in m.deployed.root.rglob("*.properties")}
    with pytest.raises(ApprovalRequiredError, match="needs a person's approval"):
        m.run("forward", verify=False)
    assert not Path(m.controller.config_path).exists() and m.znode("/migration") is None
    assert {p: p.read_bytes() for p in m.deployed.root.rglob("*.properties")} == files
