"""Planning a migration on real parts: a simulated 3.9 cluster in a real ZooKeeper, its broker hosts
and a KRaft controller's host behind a real sshd; the DAG's plan and execute tasks run in this
process (dry run: every step preflighted, nothing changed -- ZooKeeper and every host byte-identical).

Traps planted alone before provisioning: a stale ``/migration`` (KAFKA-17146) and one without data
(KAFKA-19480) are handled by the plan; a bad command template and a readiness blocker refuse it,
naming them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.operators.kraft_migration import (
    KraftMigrationExecuteOperator,
    KraftMigrationPlanOperator,
    KraftMigrationRefusedError,
)
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
from airflow_provider_kafka_zk.testing.simulator.scenarios import kraft_ready_cluster

pytestmark = pytest.mark.integration

CLUSTER = "kraftmig"
ZK_CONN = "kraftmig_zk"
SSH_CONN = "kraftmig_ssh"
HOSTS = {b: f"127.0.0.{b + 1}" for b in range(4)}
CONTROLLER_HOST = "127.0.0.4"  # shares broker 3's address (its own directories)
FORMAT = "/opt/kafka/bin/kafka-storage.sh format --config {config} --cluster-id {cluster_id}"


@pytest.fixture
def deploy(zookeeper_server, ssh_server, tmp_path, monkeypatch):
    opened: list[DeployedCluster] = []
    for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
        monkeypatch.setenv(name, value)

    def _deploy(*, format_command: str = FORMAT) -> tuple[DeployedCluster, str, Path]:
        chroot = zookeeper_server.new_chroot("/kafka_kraftmig_")
        for name, value in zookeeper_server.airflow_connection(ZK_CONN, chroot).items():
            monkeypatch.setenv(name, value)
        hosts = tmp_path / "hosts"
        deployed = DeployedCluster(
            kraft_ready_cluster(name=CLUSTER), zookeeper_server.connect_string, chroot, hosts
        )
        opened.append(deployed)
        controller = tmp_path / "controller-3000"
        (tmp_path / "clusters.toml").write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{tmp_path / "artefacts"}"\nengine = "in-process"\nrequire_approval = false\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            + "broker_hosts = { "
            + ", ".join(f'"{b}" = "{h}"' for b, h in HOSTS.items())
            + " }\n"
            'broker_restart_command = "sudo systemctl restart kafka"\n'
            f"kraft_format_command = {json.dumps(format_command)}\n"
            'kraft_controller_start_command = "sudo systemctl start kafka-kraft"\n'
            'kraft_controller_stop_command = "sudo systemctl stop kafka-kraft"\n'
            'kraft_controller_restart_command = "sudo systemctl restart kafka-kraft"\n'
            f'kraft_controllers = [ {{ node_id = 3000, host = "{CONTROLLER_HOST}", '
            f'config_path = "{controller / "config" / "controller.properties"}", log_dir = "{controller / "data"}" }} ]\n'
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(tmp_path / "clusters.toml"))
        return deployed, chroot, tmp_path

    yield _deploy
    for deployed in opened:
        deployed.close()


def _files(root: Path) -> dict[str, str]:
    out = {}
    for base, _, names in os.walk(root):
        for name in names:
            path = Path(base) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _plan(tmp_path: Path, direction: str = "forward", readiness=None) -> dict:
    return KraftMigrationPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        direction=direction,
        base_path=str(tmp_path / "artefacts"),
        readiness=readiness,
        plan_ts="t1",
    ).execute({})


def _plan_json(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "artefacts" / CLUSTER / "kraft-migration" / "t1" / "plan.json").read_text())


def test_provisioning_is_planned_from_zookeeper_mode_and_its_dry_run_changes_nothing(
    deploy, zookeeper_server, tmp_path
):
    deployed, chroot, _ = deploy()
    result = _plan(tmp_path)
    assert (result["from_phase"], result["to_phase"]) == ("zookeeper", "controllers-provisioned")
    plan = _plan_json(tmp_path)
    assert [s["kind"] for s in plan["steps"]] == [
        "write_node_config",
        "format_controller_storage",
        "controller_command",
        "wait_for_migration",
    ]
    written = plan["steps"][0]["new_text"]
    assert f"zookeeper.connect={deployed.zookeeper_connect}" in written  # the brokers' (with the chroot)
    assert "controller.quorum.voters=3000@127.0.0.4:9093" in written
    assert plan["steps"][1]["cluster_id"] == deployed.cluster.cluster_id
    signals = {s["signal"]: s["says"] for s in plan["signals"]["signals"]}
    assert signals["/migration"] == "absent" and "not provisioned" in signals["controllers"]
    summary = (tmp_path / "artefacts" / CLUSTER / "kraft-migration" / "t1" / "summary.txt").read_text()
    assert "+process.roles=controller" in summary and "KAFKA-17146" in summary
    zk_before, hosts_before = zookeeper_server.tree(chroot), _files(tmp_path / "hosts")
    result = KraftMigrationExecuteOperator(
        task_id="execute",
        plan_dir=result["plan_dir"],
        cluster=CLUSTER,
        kafka_zookeeper_conn_id=ZK_CONN,
        ssh_conn_id=SSH_CONN,
        dry_run=True,
    ).execute({})
    assert result["dry_run"] and len(result["ran"]) == 4 and not result["completed"]
    assert zookeeper_server.tree(chroot) == zk_before
    assert _files(tmp_path / "hosts") == hosts_before
    assert not (tmp_path / "controller-3000").exists()


@pytest.mark.parametrize(
    ("data", "issue"),
    [
        (
            b'{"version":0,"kraft_metadata_offset":1570,"kraft_controller_id":3000,"kraft_metadata_epoch":1,"kraft_controller_epoch":1}',
            "KAFKA-17146",
        ),
        (None, "KAFKA-19480"),
    ],
)
def test_a_left_over_or_empty_migration_znode_is_removed_first(
    deploy, zookeeper_server, tmp_path, data, issue
):
    _, chroot, _ = deploy()
    client = KazooClient(hosts=zookeeper_server.connect_string + chroot)
    client.start(timeout=10)
    try:
        client.create("/migration", data)
    finally:
        client.stop()
        client.close()
    _plan(tmp_path)
    plan = _plan_json(tmp_path)
    assert plan["steps"][0]["kind"] == "delete_migration_znode" and issue in plan["steps"][0]["reason"]
    traps = {t["issue"]: t["status"] for t in plan["traps"]}
    assert traps[issue] == "handled"


def test_a_template_with_an_unknown_placeholder_refuses_the_plan(deploy, tmp_path):
    deploy(format_command="kafka-storage.sh format --config {config} --id {uuid}")
    with pytest.raises(KraftMigrationRefusedError, match=r"kraft_format_command.*\{uuid\}"):
        _plan(tmp_path)
    plan = _plan_json(tmp_path)  # written before the refusal: the dry run shows why
    assert any("{uuid}" in r for r in plan["refusals"])


def test_a_readiness_blocker_refuses_provisioning(deploy, tmp_path):
    deploy()
    readiness = {"verdict": "1 blocker", "blockers": ["topic-ids"], "report": "/r/report.txt"}
    with pytest.raises(KraftMigrationRefusedError, match="readiness blocker: topic-ids"):
        _plan(tmp_path, readiness=readiness)


def test_going_back_from_zookeeper_mode_has_nothing_to_do(deploy, tmp_path):
    deploy()
    with pytest.raises(KraftMigrationRefusedError, match="nothing to revert"):
        _plan(tmp_path, direction="back")


def test_the_dag_plans_and_dry_runs_under_airflow_dags_test(deploy, zookeeper_server, tmp_path, airflow_home):
    """The whole DAG as a user runs it first: snapshot, inventory, audit, readiness, plan, approve (a dry
    run needs no decision), the dry run of every step, the report."""
    import subprocess
    import sys

    _, chroot, _ = deploy()
    before = zookeeper_server.tree(chroot)
    airflow = str(Path(sys.executable).parent / "airflow")
    run = subprocess.run(
        [
            airflow,
            "dags",
            "test",
            "kafka_zk_kraft_migration",
            "-c",
            json.dumps({"cluster": CLUSTER, "direction": "forward"}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "DRY RUN: would controller 3000 on 127.0.0.4: write" in output
    assert "KRaft migration of kraftmig: provision the KRaft controllers" in output
    assert zookeeper_server.tree(chroot) == before
    (folder,) = (tmp_path / "artefacts" / CLUSTER / "kraft-migration").iterdir()
    assert {"plan.json", "rollback.json", "signals.json", "summary.txt"} <= {p.name for p in folder.iterdir()}
