"""The version matrix against real parts: for every release line from 0.11 to 3.9, that release's
incident cluster in a real ZooKeeper (one chroot each) with its broker hosts behind a real sshd
(127.0.0.2-7), then the daily audit's steps -- snapshot through the ZooKeeper hook, inventory of
every broker over SSH, the audit -- the deletion verdicts, and the drain plan, each asserted to
find the incidents planted for that release and nothing else.

The audit runs in-process for every release (the same rules as on Spark: test_audit_job.py
compares the engines); the 0.11 cluster, the one whose formats differ most from the 3.3.1 goldens,
is also audited on Spark (local mode) and must give identical findings. The 3.3.1 DAG run on Spark
is test_audit_dag.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
from airflow_provider_kafka_zk.kafka.versions import MATRIX_RELEASES
from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator
from airflow_provider_kafka_zk.operators.drain import DrainPlanOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import ReassignmentInFlightError
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator, InventoryCoverageOperator
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController
from airflow_provider_kafka_zk.testing.simulator.expectations import expected_findings, found, unexpected
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import check_deletions

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
HOSTS = {b: a for b, a in enumerate(ADDRESSES)}
SSH_CONN = "matrix_ssh"
ZK_CONN = "matrix_zk"
CLUSTER = "matrix"
SPARK_LINE = "0.11"
DRAINED = 1  # the incident cluster's broker "about to be stopped": metrics-rf1-0, -2, -4 live only there


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def ssh_connection(sshd):
    fields = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(f"AIRFLOW_CONN_{SSH_CONN.upper()}", json.dumps(fields))
        yield SSH_CONN


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("test_version_matrix")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    yield session
    session.stop()


def _snapshot(base: Path) -> str:
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        ref, _ = write_snapshot(str(base), CLUSTER, hook.snapshot(), source=hook.target_description())
    return ref.path


def _inventory(base: Path, deployed: DeployedCluster, ts: str) -> str:
    properties = str(deployed.root / "broker-{broker_id}" / "config" / "server.properties")
    brokers = sorted(deployed.cluster.brokers)
    for broker_id in brokers:  # stopped brokers' disks too, through broker_hosts (as the DAG does)
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
    return str(base / CLUSTER / "inventory" / ts)


def _plan(base: Path, snapshot: str, ts: str, name: str) -> dict:
    return DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=[DRAINED],
        snapshot_path=snapshot,
        inventory_ts=ts,
        drain_ts=name,
    ).execute({})


@pytest.mark.parametrize("line", list(MATRIX_RELEASES))
def test_each_release_audits_verdicts_and_plans_exactly_what_was_planted(
    line, zookeeper_server, ssh_connection, tmp_path, monkeypatch, request
):
    cluster = incident_cluster(name=CLUSTER, kafka_version=MATRIX_RELEASES[line])
    chroot = zookeeper_server.new_chroot("/kafka_matrix_")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{ZK_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": chroot},
            }
        ),
    )
    base = tmp_path / "artefacts"
    ts = f"t{time.time_ns()}"
    with DeployedCluster(cluster, zookeeper_server.connect_string, chroot, tmp_path / "hosts") as deployed:
        # -- the daily audit: snapshot, inventory of every broker, the rules -------------------------
        snapshot = _snapshot(base)
        inventory = _inventory(base, deployed, ts)
        summary = ClusterAuditOperator(
            task_id="audit",
            cluster=CLUSTER,
            base_path=str(base),
            snapshot=snapshot,
            previous="",
            inventory=inventory,
            out=str(base / CLUSTER / "findings" / "in-process"),
        ).execute({})
        assert summary["coverage"]["status"] == "complete"
        findings = audit_job.read_findings(str(base / CLUSTER / "findings" / "in-process"))
        actual = found(findings)
        assert unexpected(expected_findings(cluster), actual) == {}, line
        assert actual["preferred-leader-imbalance"] == {(None, 5)}
        assert actual["broker-down"] == {(None, 3), (None, 4)}
        if cluster.uses_topic_ids:
            assert actual["topic-id-mismatch"] == {("clickstream", None)}
            assert actual["topic-id-missing-in-zookeeper"] == {("inventory-updates", None)}
        else:
            assert not [c for c in actual if c.startswith("topic-id")]
        if line == SPARK_LINE:
            on_spark = audit_job.run_audit(
                str(base),
                CLUSTER,
                snapshot=snapshot,
                previous="",
                inventory=inventory,
                out=str(base / CLUSTER / "findings" / "spark"),
                engine="spark",
                spark=request.getfixturevalue("spark"),
                now_ms=None,
            )
            assert on_spark["engine"] == "spark"
            spark_findings = audit_job.read_findings(str(base / CLUSTER / "findings" / "spark"))
            assert found(spark_findings) == actual

        # -- the deletion verdicts ----------------------------------------------------------------
        host_hook = BrokerHostHook(
            SSH_CONN,
            ZK_CONN,
            broker_hosts=HOSTS,
            server_properties_path=str(deployed.root / "broker-{broker_id}" / "config" / "server.properties"),
            connect_timeout=5,
            connect_attempts=1,
        )
        with KafkaZooKeeperHook(ZK_CONN) as zk_hook:
            check = check_deletions(zk_hook, host_hook, ["legacy-orders", "moving-topic", "old-logs"])
        assert check.coverage()["status"] == "complete"
        verdicts = {v.topic: v for v in check.verdicts}
        assert (verdicts["legacy-orders"].verdict, verdicts["legacy-orders"].causes) == (
            Verdict.BLOCKED,
            (Cause.REPLICA_BROKER_OFFLINE,),
        )
        assert verdicts["legacy-orders"].blocking_brokers == (3,)
        assert (verdicts["moving-topic"].verdict, verdicts["moving-topic"].causes) == (
            Verdict.BLOCKED,
            (Cause.REASSIGNMENT_IN_PROGRESS,),
        )
        old_logs = verdicts["old-logs"]  # gone from ZooKeeper; its dirs were left on brokers 2 and 5
        assert old_logs.verdict is Verdict.INCOMPLETE and old_logs.causes == (Cause.PARTITION_DIRS_LEFT,)
        # broker 2's -delete dirs were renamed (ctime) at deploy: not past the delay yet, so not listed
        assert [(d.broker_id, d.kind.name) for d in old_logs.leftover_dirs] == [(5, "NORMAL")]

        # -- the drain plan: refused while the planted reassignment runs, then exactly broker 1's RF=1
        with pytest.raises(ReassignmentInFlightError, match=r"moving-topic-0"):
            _plan(base, snapshot, ts, "refused")
        controller = SimulatedController(deployed)
        try:
            controller.run_until_idle()
        finally:
            controller.stop()
        plan = _plan(base, _snapshot(base), ts, "planned")
        rollback = json.loads(Path(plan["rollback"]).read_text())
        assert sorted((e["topic"], e["partition"], e["replicas"]) for e in rollback["partitions"]) == [
            ("metrics-rf1", p, [DRAINED]) for p in (0, 2, 4)
        ]
        moves = json.loads(Path(plan["reassignment"]).read_text())["partitions"]
        assert all(DRAINED not in e["replicas"] and len(e["replicas"]) == 1 for e in moves)


@pytest.mark.parametrize(("line", "ids"), [("0.11", False), ("2.8", True)])
def test_the_demo_builds_any_release_line(line, ids, tmp_path):
    """``demo.sh --kafka-version <line>`` (here without the DAG runs): that release's incident cluster,
    read back from the real ZooKeeper and disks, with the incidents that release can have."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--workdir",
            str(tmp_path / "demo"),
            "--kafka-version",
            line,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    out = result.stdout
    assert f"Simulated Kafka {MATRIX_RELEASES[line]} cluster 'demo'" in out
    assert ("[a] KAFKA-14190 clickstream" in out) is ids
    assert ("NO topic_id" in out) is ids
    assert "[c] deletion of moving-topic pending: reassignment in progress" in out  # pre-2.4: from the znode
    assert "[e] broker 5 leads" in out
    assert "[d] broker 4:" in out and "offset not greater than the previous entry's" in out
