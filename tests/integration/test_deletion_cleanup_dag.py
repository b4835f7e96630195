"""The deletion cleanup as an approved change (issue 31, point 3): ``kafka_zk_deletion_cleanup`` run by
``airflow dags test`` against a simulated cluster in a real ZooKeeper, its broker hosts behind a real
sshd, a person answering its approval over the REST API of a real ``airflow api-server``.

The cluster: ``old-logs`` deleted, its two partition directories left on broker 2 (stopped) and its
``/config/topics/old-logs`` left in ZooKeeper; the cluster file requires approval (the default).

* a dry run plans (every directory and znode, why each is safe, the identity), changes nothing;
* a real run waits in ``approve`` with nothing changed, is approved, moves exactly the leftovers into
  the quarantine, deletes the config znode (saved first), and the verify step finds the topic
  deleted everywhere;
* rejected: nothing changes, the report says who rejected it;
* the plan altered after it was shown: the execute step refuses before the first change;
* the cluster changed after the plan (broker 2 started while the plan waited): refused before the
  first change -- without the check the live-named directories would move under a running broker.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.testing.airflow_production import DagsTestRun, LocalApiServer
from airflow_provider_kafka_zk.testing.cluster_state import capture, differences
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "cleanup-test"
DAG = "kafka_zk_deletion_cleanup"
ZK_CONN = "cleanup_dag_zk"
SSH_CONN = "cleanup_dag_ssh"
HOSTS = {0: "127.0.0.2", 1: "127.0.0.3", 2: "127.0.0.4"}
STOPPED = 2
CONFIG_LEFT = b'{"version":1,"config":{"retention.ms":"86400000"}}'
DAY_MS = 86_400_000
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def _cluster() -> SimulatedCluster:
    spec = ClusterSpec(
        CLUSTER,
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in HOSTS.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=20),
            TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
        ),
        seed=61,
    )
    cluster = SimulatedCluster(spec)
    topic_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", STOPPED, [0, 1], kind=DirKind.NORMAL, age_ms=3 * DAY_MS, topic_id=topic_id
    )
    cluster.stop_broker(STOPPED, clean=True)
    return cluster


@pytest.fixture(scope="module")
def api(airflow_home) -> Iterator[LocalApiServer]:
    with LocalApiServer(os.environ.copy(), users={"admin": "admin"}) as server:
        yield server


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    chroot = zookeeper_server.new_chroot("/kafka_cleanup_dag_")
    hosts = tmp_path / "hosts"
    with DeployedCluster(_cluster(), zookeeper_server.connect_string, chroot, hosts) as deployed:
        base = tmp_path / "artefacts"
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            + "broker_hosts = { "
            + ", ".join(f'"{b}" = "{h}"' for b, h in HOSTS.items())
            + " }\n"
            "approval_timeout_s = 900\n"  # require_approval: the default (true)
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            json.dumps(
                {
                    "conn_type": "kafkazookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
                }
            ),
        )
        for name, value in ssh_server.airflow_connection("127.0.0.2", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        client = KazooClient(hosts=zookeeper_server.connect_string)
        client.start(timeout=15)
        client.create(chroot + "/config/topics/old-logs", CONFIG_LEFT)
        try:
            yield deployed, client, base
        finally:
            client.stop()
            client.close()


def _state(deployed: DeployedCluster, client: KazooClient):
    return capture(client, [deployed.chroot], [deployed.root])


def _leftovers(deployed: DeployedCluster) -> list[Path]:
    return sorted(
        p
        for d in deployed.hosts[STOPPED].log_dirs
        for p in Path(d).iterdir()
        if p.name.startswith("old-logs-")
    )


def _start(conf: dict, log: Path) -> DagsTestRun:
    """``airflow dags test`` of the cleanup DAG with ``conf``, in the background."""
    return DagsTestRun(DAG, conf, log)


def _folder(base: Path) -> Path:
    [folder] = (base / CLUSTER / "deletion-cleanup").iterdir()
    return folder


CONF = {"cluster": CLUSTER, "topics": ["old-logs"]}


def test_a_dry_run_plans_every_move_and_znode_with_why_and_changes_nothing(live, tmp_path):
    deployed, client, base = live
    leftovers = _leftovers(deployed)
    assert len(leftovers) == 2
    before = _state(deployed, client)
    code, output = _start(CONF, tmp_path / "run.log").wait()
    assert code == 0, output[-6000:]
    after = _state(deployed, client)
    assert after == before, "\n  ".join(differences(before, after))
    folder = _folder(base)
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["identity"]["cluster_id"] == deployed.cluster.cluster_id
    assert {(d["broker_id"], d["source"]) for d in plan["directories"]} == {
        (STOPPED, str(p)) for p in leftovers
    }
    for d in plan["directories"]:
        assert d["destination"].endswith(f"/kafka-quarantine/{folder.name}/{Path(d['source']).name}"), d
        assert "topic old-logs is deleted" in d["why"] and "broker 2 is stopped" in d["why"], d["why"]
        assert deployed.cluster.cluster_id in d["why"]  # its meta.properties, pinned
    [znode] = plan["znodes"]
    assert (znode["path"], znode["version"]) == ("/config/topics/old-logs", 0)
    rollback = json.loads((folder / "rollback.json").read_text())
    assert [z["path"] for z in rollback["znodes"]] == ["/config/topics/old-logs"]
    assert {m["source"] for m in rollback["moves"]} == {str(p) for p in leftovers}
    summary = (folder / "summary.txt").read_text()
    assert summary.startswith(f"Clean up the leftovers of deleted topic(s) old-logs on cluster {CLUSTER}")
    assert "old-logs: INCOMPLETE" in summary
    assert summary in output  # the report task prints the plan of a dry run
    assert "DRY RUN: would quarantine" in output or "DRY RUN: would" in output
    assert not (folder / "cleanup.json").exists()


def test_a_real_run_waits_for_approval_then_cleans_exactly_the_plan(live, api, tmp_path):
    deployed, client, base = live
    leftovers = _leftovers(deployed)
    before = _state(deployed, client)
    run = _start({**CONF, "dry_run": False}, tmp_path / "run.log")
    request = api.wait_for_approval_request(DAG, timeout=300, alive=run.alive)
    assert _state(deployed, client) == before  # waiting: nothing moved, nothing deleted
    body = request["body"]
    assert body.startswith(f"**Clean up the leftovers of deleted topic(s) old-logs on cluster {CLUSTER}")
    assert "/config/topics/old-logs at version 0" in body and all(str(p) in body for p in leftovers)
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Approve", "CHG-31 reviewed")
    code, output = run.wait()
    assert code == 0, output[-6000:]
    assert "carrying out the approved plan sha256" in output
    folder = _folder(base)
    assert not _leftovers(deployed)
    for source in leftovers:  # moved, byte for byte, into the quarantine on the same host
        moved = Path(source).parent.parent / "kafka-quarantine" / folder.name / source.name
        assert moved.is_dir(), moved
    assert client.exists(deployed.chroot + "/config/topics/old-logs") is None
    saved = [json.loads(p.read_text()) for p in (folder / "rollback").glob("znodes-*.json")]
    assert [z["path"] for s in saved for z in s["znodes"]] == ["/config/topics/old-logs"]
    report = (folder / "report.txt").read_text()
    assert report.startswith("Approved by admin at ") and "Verification: OK" in report, report
    assert json.loads((folder / "verify.json").read_text())["ok"] is True


def test_a_rejected_cleanup_changes_nothing(live, api, tmp_path):
    deployed, client, base = live
    before = _state(deployed, client)
    run = _start({**CONF, "dry_run": False}, tmp_path / "run.log")
    request = api.wait_for_approval_request(DAG, timeout=300, alive=run.alive)
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Reject", "not this week")
    code, output = run.wait()
    assert code != 0, output[-6000:]  # the report fails the run: nothing was changed
    after = _state(deployed, client)
    assert after == before, "\n  ".join(differences(before, after))
    report = (_folder(base) / "report.txt").read_text()
    assert "REJECTED by admin" in report and "not this week" in report, report


def test_a_plan_altered_after_it_was_shown_is_refused_before_the_first_change(live, api, tmp_path):
    deployed, client, base = live
    run = _start({**CONF, "dry_run": False}, tmp_path / "run.log")
    request = api.wait_for_approval_request(DAG, timeout=300, alive=run.alive)
    folder = _folder(base)
    plan = json.loads((folder / "plan.json").read_text())
    plan["steps"] = [s for s in plan["steps"] if s["kind"] == "quarantine_move"]  # keep the znode after all
    (folder / "plan.json").write_text(json.dumps(plan, indent=1))
    before = _state(deployed, client)
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Approve")
    code, output = run.wait()
    assert code != 0, output[-6000:]
    assert "PlanChangedSinceApprovalError" in output and "plan.json changed" in output
    after = _state(deployed, client)
    assert after == before, "\n  ".join(differences(before, after))


def test_a_cluster_changed_since_the_plan_is_refused_before_the_first_change(live, api, tmp_path):
    deployed, client, _ = live
    run = _start({**CONF, "dry_run": False}, tmp_path / "run.log")
    request = api.wait_for_approval_request(DAG, timeout=300, alive=run.alive)
    # while the plan waits for a person, broker 2 starts again: its live-named old-logs directories
    # are under a running broker now (the plan moved them because it was stopped)
    deployed.cluster.start_broker(STOPPED)
    deployed.sync()
    leftovers = _leftovers(deployed)
    assert len(leftovers) == 2
    before = _state(deployed, client)
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Approve", "looked fine an hour ago")
    code, output = run.wait()
    assert code != 0, output[-6000:]
    assert "CleanupPlanOutdatedError" in output, output[-6000:]
    assert "broker 2 is running now, the plan saw it stopped" in output
    after = _state(deployed, client)
    assert after == before, "\n  ".join(differences(before, after))
    assert _leftovers(deployed) == leftovers
