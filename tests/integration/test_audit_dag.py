"""The daily hygiene DAG end to end: `airflow dags test` against real ZooKeeper, a real sshd (one
127.x address per broker host), real Spark (local mode) and the simulator's clusters.

One incident cluster and one healthy cluster are deployed for the module (different chroots and
host roots behind the same services); each test runs the DAG of one entry of a temporary cluster
file. Spark runs in one test; the others use the in-process engine, which gives the same findings
(tests/unit/test_audit_job.py checks that).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.spark_jobs.audit import read_findings
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
UNREACHABLE = "127.0.0.9"
HOSTS = {str(b): a for b, a in enumerate(ADDRESSES)}


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def clusters(zookeeper_server, tmp_path_factory):
    """The incident and the healthy cluster, deployed side by side (sessions held for the module)."""
    incident, healthy = incident_cluster(name="incident"), healthy_cluster(name="healthy")
    with (
        DeployedCluster(
            incident,
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_audit_incident_"),
            tmp_path_factory.mktemp("incident-hosts"),
        ) as deployed_incident,
        DeployedCluster(
            healthy,
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_audit_healthy_"),
            tmp_path_factory.mktemp("healthy-hosts"),
        ) as deployed_healthy,
    ):
        yield {"incident": deployed_incident, "healthy": deployed_healthy}


@pytest.fixture(scope="module")
def environment(sshd, clusters, zookeeper_server, airflow_home, tmp_path_factory):
    """AIRFLOW_CONN_* for ZooKeeper, SSH and Spark, a cluster file, and the PATH spark-submit needs."""
    work = tmp_path_factory.mktemp("audit-dag")
    base = work / "artefacts"
    ssh = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_AUDIT_SSH": json.dumps(ssh),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "KAFKA_ZK_CLUSTERS_FILE": str(work / "clusters.toml"),
    }
    lines = [
        "[defaults]",
        'ssh_conn_id = "audit_ssh"',
        f'base_path = "{base}"',
        "retries = 1",
        "retry_delay_s = 1",
        "max_retry_delay_s = 2",
        "connect_timeout = 3",
    ]
    for entry, deployed, engine, hosts in (
        ("incident", clusters["incident"], "spark", HOSTS),
        ("healthy", clusters["healthy"], "in-process", HOSTS),
        ("incident-unreachable", clusters["incident"], "in-process", {**HOSTS, "2": UNREACHABLE}),
        ("no-spark-conn", clusters["healthy"], "spark", HOSTS),
    ):
        conn_id = f"zk_{entry.replace('-', '_')}"
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": deployed.chroot},
            }
        )
        lines += [
            f'[clusters."{entry}"]',
            f'kafka_zookeeper_conn_id = "{conn_id}"',
            f'engine = "{engine}"',
            f'server_properties_path = "{deployed.root}/broker-{{broker_id}}/config/server.properties"',
            "broker_hosts = { " + ", ".join(f'"{b}" = "{h}"' for b, h in hosts.items()) + " }",
        ]
        if entry == "no-spark-conn":
            lines.append('spark_conn_id = "spark_not_defined"')
    (work / "clusters.toml").write_text("\n".join(lines) + "\n")
    return {"env": env, "base": base}


def dags_test(environment, cluster: str) -> tuple[subprocess.CompletedProcess[str], dict, list, float]:
    started = time.monotonic()
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", f"kafka_zk_daily_hygiene_{cluster}"],
        env=environment["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.monotonic() - started
    findings_root = environment["base"] / cluster / "findings"
    runs = sorted(findings_root.iterdir()) if findings_root.exists() else []
    assert runs, f"no findings for {cluster}:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    summary = json.loads((runs[-1] / "summary.json").read_text())
    return result, summary, read_findings(str(runs[-1])), seconds


def _by_check(findings) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.check, []).append(f)
    return out


@pytest.fixture(scope="module")
def incident_run(environment):
    return dags_test(environment, "incident")


def test_incident_cluster_on_spark_gate_fails_with_the_top_findings(incident_run):
    result, summary, _, _ = incident_run
    assert result.returncode == 1  # the gate fails: critical findings
    output = result.stdout + result.stderr
    assert "Kafka audit of incident:" in output and "at or above critical" in output
    # the gate's message is the summary's act-now data: the incidents, with their commands
    assert "ACT NOW: (1) [CRITICAL] topicId mismatch on clickstream" in output
    assert "broker 3 is down: not registered in /brokers/ids" in output
    assert '--conf \'{"cluster": "incident", "topics": ["clickstream", "inventory-updates"]' in output
    assert f"Report: {summary['report']}" in output
    assert summary["engine"] == "spark"
    assert summary["coverage"]["status"] == "complete"  # stopped brokers' disks read via broker_hosts
    assert Path(summary["report"]).exists()
    assert "topic-id-mismatch" in Path(summary["report"]).read_text()


def test_every_incident_with_its_check_severity_and_subject(incident_run, clusters):
    _, _, findings, _ = incident_run
    cluster = clusters["incident"].cluster
    by = _by_check(findings)
    planted = cluster.incidents

    (mismatch,) = by["topic-id-mismatch"]
    assert (mismatch.topic, mismatch.severity) == ("clickstream", Severity.CRITICAL)
    expected = {(i.broker_id, p) for i in planted if i.kind == "topic_id_mismatch" for p in i.partitions}
    assert {(r["broker_id"], r["partition"]) for r in mismatch.evidence["replicas"]} == expected
    root = clusters["incident"].root
    for replica in mismatch.evidence["replicas"]:
        assert replica["path"].startswith(f"{root}/broker-{replica['broker_id']}/")
        assert replica["path"].endswith(f"/clickstream-{replica['partition']}")

    (missing_id,) = by["topic-id-missing-in-zookeeper"]
    (planted_missing,) = [i for i in planted if i.kind == "topic_id_missing_in_zookeeper"]
    assert (missing_id.topic, missing_id.severity) == ("inventory-updates", Severity.CRITICAL)
    assert missing_id.evidence["ids_on_disk"] == [planted_missing.detail]

    pending = {f.topic: f for f in by["deletion-pending"]}
    for stuck in (i for i in planted if i.kind == "deletion_stuck"):
        assert pending[stuck.topic].evidence["causes"] == [stuck.detail]
        assert pending[stuck.topic].severity is Severity.ERROR
    assert pending["legacy-orders"].broker_id == 3

    assert [(f.topic, f.broker_id) for f in by["orphan-partition-dirs"]] == [("old-logs", 5)]
    # old-logs' two -delete directories on broker 2 carry two-day-old mtimes but were created (renamed,
    # to the file system) when the cluster was deployed: their age counts from that ctime, so they are
    # past log.segment.delete.delay.ms (60 s) only if the audit ran over a minute later, and never
    # by the two days an mtime would claim
    past = by.get("delete-dirs-past-delay", [])
    assert [(f.topic, f.broker_id, len(f.evidence["paths"])) for f in past] in ([], [("old-logs", 2, 2)])
    for f in past:
        assert all(d["age_from"] == "ctime" and d["age_ms"] < 3_600_000 for d in f.evidence["dirs"])

    per_broker = {f.broker_id: f for f in by["rf1-exposure-broker"]}
    assert per_broker[1].evidence["topics"] == {"metrics-rf1": [0, 2, 4]}
    assert per_broker[1].severity is Severity.WARNING
    assert per_broker[3].evidence["topics"]["audit-rf1"] == [0, 1]
    assert per_broker[3].severity is Severity.ERROR  # its broker is down: offline now

    offline = {f.topic: f.evidence["partitions"] for f in by["offline-partitions"]}
    for incident in (i for i in planted if i.kind == "offline_partitions"):
        assert set(incident.partitions) <= set(offline[incident.topic])
    assert all(f.severity is Severity.CRITICAL for f in by["offline-partitions"])
    assert "inventory-coverage-partial" not in by


def test_the_daily_run_gives_every_topic_marked_for_deletion_a_verdict(incident_run, environment, clusters):
    (run,) = sorted((environment["base"] / "incident" / "deletions").iterdir())
    record = json.loads((run / "verdicts.json").read_text())
    marked = {i.topic for i in clusters["incident"].cluster.incidents if i.kind == "deletion_stuck"}
    verdicts = {v["topic"]: v for v in record["verdicts"]}
    assert marked and marked <= set(verdicts)
    assert all(verdicts[topic]["verdict"] != "DELETED" for topic in marked)
    assert record["coverage"]["status"] == "complete"  # stopped brokers' disks read via broker_hosts
    output = incident_run[0].stdout + incident_run[0].stderr
    assert "TopicDeletionNotSettledError" in output  # the alert: not settled at the daily look


def test_healthy_cluster_has_nothing_critical_and_the_gate_passes(environment):
    result, summary, findings, _ = dags_test(environment, "healthy")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = sorted((environment["base"] / "healthy" / "deletions").iterdir())
    assert json.loads((run / "verdicts.json").read_text())["completed_by"] == "nothing_to_check"
    assert summary["by_severity"]["critical"] == 0
    assert not [f for f in findings if f.severity is Severity.CRITICAL]
    assert summary["coverage"]["status"] == "complete"
    assert summary["engine"] == "in-process"
    assert "Gate passed" in result.stdout + result.stderr


def test_unreachable_broker_run_completes_with_partial_coverage_naming_it(environment):
    result, summary, findings, _ = dags_test(environment, "incident-unreachable")
    assert result.returncode == 1  # its inventory task failed (and the gate: critical findings)
    coverage = summary["coverage"]
    assert coverage["status"] == "partial" and coverage["missing"] == [2]
    assert coverage["failed"]["2"].startswith("BrokerHostUnreachableError: broker 2 on 127.0.0.9")
    (partial,) = [f for f in findings if f.check == "inventory-coverage-partial"]
    assert partial.evidence["missing"] == [2] and "[2]" in partial.summary
    assert not [f for f in findings if f.check == "delete-dirs-past-delay"]  # broker 2's disk unread
    output = result.stdout + result.stderr
    assert "Kafka audit of incident-unreachable:" in output  # audit and gate still ran


def test_missing_spark_connection_is_refused_instead_of_submitting_to_yarn(environment):
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", "kafka_zk_daily_hygiene_no-spark-conn"],
        env=environment["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert (
        "Spark connection 'spark_not_defined' is not defined; without it spark-submit goes to YARN" in output
    )
    assert not (environment["base"] / "no-spark-conn" / "findings").exists()
