"""The topicId repair against real parts: the simulated repair cluster in a real ZooKeeper, its broker
hosts behind a real sshd (127.0.0.1-4), Kafka's controller and broker restarts played by the
simulator's runtime in a thread of this process, and the DAG run by ``airflow dags test``.

Every guard and promise of the issue is shown the way a user meets it: per strategy the DAG heals
the topic and nothing outside the targeted replicas changes (checksums of every file); a dry run
writes nothing; a split topic with partial coverage is refused; a failed restart gate stops the run
with the next broker untouched, and clearing the task resumes without repeating the restart; the
rollback artefacts put the original bytes back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import PartitionMetadata
from airflow_provider_kafka_zk.operators.topic_id_repair import TopicIdRepairExecuteOperator
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import (
    rolling_reset_cluster,
    topic_id_repair_cluster,
)

pytestmark = pytest.mark.integration

CLUSTER = "repair-test"
ZK_CONN = "repair_zk"
SSH_CONN = "repair_ssh"
DAG_ID = "kafka_zk_topic_id_repair"


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    """The repair cluster deployed; the ZooKeeper connection stored in the Airflow metadata DB (as
    ``airflow connections add`` leaves it), the SSH one in an env var; a cluster file."""
    yield from _live(topic_id_repair_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch)


@pytest.fixture
def live_rolling(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    """``rolling_reset_cluster`` (a split topic whose safe reset restarts brokers 0, then 2), deployed as ``live``."""
    yield from _live(rolling_reset_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch)


def _live(cluster, zookeeper_server, ssh_server, tmp_path, monkeypatch):
    chroot = zookeeper_server.new_chroot("/kafka_repair_")
    hosts = tmp_path / "hosts"
    with DeployedCluster(cluster, zookeeper_server.connect_string, chroot, hosts) as deployed:
        base = tmp_path / "artefacts"
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            # automation with its own review: the real runs here do not wait for a person (issue 25)
            "require_approval = false\n"
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        _store_zk_connection(zookeeper_server.connect_string, chroot)
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        client = KazooClient(hosts=deployed.zookeeper_connect)
        client.start(timeout=15)
        try:
            yield deployed, client, base
        finally:
            client.stop()
            client.close()


def _store_zk_connection(connect_string: str, chroot: str) -> None:
    """The cluster's ZooKeeper connection in the Airflow metadata DB, as ``airflow connections add``
    leaves it (replacing an earlier one)."""
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "connections", "delete", ZK_CONN], capture_output=True, env=os.environ.copy())
    conn = {
        "conn_type": "kafka_zookeeper",
        "host": connect_string,
        "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
    }
    added = subprocess.run(
        [airflow, "connections", "add", ZK_CONN, "--conn-json", json.dumps(conn)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    assert added.returncode == 0, added.stderr


def _dags_test(conf: dict) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run(
        [
            airflow,
            "dags",
            "test",
            DAG_ID,
            "-c",
            json.dumps({"cluster": CLUSTER, "poll_interval_s": 0.3, **conf}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=400,
    )


def _checksums(root: Path) -> dict[str, str]:
    """Every file under the broker host roots (partition data, indexes, metadata, checkpoints)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "/data/" in str(p) and p.parent.name != p.parents[1].name
    }


def _partition_files(root: Path) -> dict[str, str]:
    """Files inside partition directories only (broker-level checkpoints change on any restart)."""
    return {k: v for k, v in _checksums(root).items() if k.count("/") >= 4}


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int]]:
    out = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid)
        pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
    return out


def _zk_id(client: KazooClient, topic: str) -> str | None:
    path = zk.topic_path(topic)
    decoded = zk.TopicAssignment.decode(client.get(path)[0], path)
    return str(decoded.topic_id) if decoded.topic_id else None


def _disk_ids(deployed: DeployedCluster, topic: str) -> dict[tuple[int, int], str | None]:
    out = {}
    for broker, host in deployed.hosts.items():
        for log_dir in host.log_dirs:
            for d in log_dir.glob(f"{topic}-*"):
                if not d.name[len(topic) + 1 :].isdigit():
                    continue
                f = d / "partition.metadata"
                out[(broker, int(d.name.rsplit("-", 1)[1]))] = (
                    str(PartitionMetadata.parse(f.read_bytes(), str(f)).topic_id) if f.exists() else None
                )
    return out


def _healthy(client: KazooClient, topic: str) -> bool:
    live = {int(b) for b in client.get_children(zk.BROKER_IDS)}
    path = zk.topic_path(topic)
    assignment = zk.TopicAssignment.decode(client.get(path)[0], path)
    for p, replicas in assignment.partitions.items():
        state_path = zk.partition_state_path(topic, p)
        state = zk.PartitionState.decode(client.get(state_path)[0], state_path)
        if state.leader < 0 or {r for r in replicas if r in live} - set(state.isr):
            return False
    return True


def _repair_dir(base: Path) -> Path:
    [run] = (base / CLUSTER / "topic-id-repair").iterdir()
    return run


# ---------------------------------------------------------------------------------------------


def test_dry_run_plans_both_write_backs_and_changes_nothing(live):
    deployed, client, base = live
    tree, files = _tree(client), _checksums(deployed.root)
    with ClusterRuntime(deployed, restart_dir=deployed.root.parent / "restarts"):
        run = _dags_test({"topics": ["diverged", "precursor"]})
        output = run.stdout + run.stderr
        assert run.returncode == 0, output[-6000:]
    assert _tree(client) == tree and _checksums(deployed.root) == files  # ZooKeeper and every disk file
    plan = json.loads((_repair_dir(base) / "plan.json").read_text())
    assert {t: e["case"] for t, e in plan["topics"].items()} == {
        "diverged": "diverged",
        "precursor": "precursor",
    }
    assert [s["kind"] for s in plan["steps"]] == [
        "write_topic_id",
        "write_topic_id",
        "move_controller",
        "wait_healthy",
    ]
    assert "DRY RUN: would write topic_id" in output and "into /brokers/topics/diverged" in output
    summary = (_repair_dir(base) / "summary.txt").read_text()
    assert "DIVERGED" in summary and "PRECURSOR" in summary and "delete /controller" in summary


def test_write_back_heals_without_touching_a_file_and_the_rollback_restores_the_bytes(live):
    deployed, client, base = live
    original = {t: client.get(zk.topic_path(t))[0] for t in ("diverged", "precursor")}
    disk_ids = {t: set(_disk_ids(deployed, t).values()) for t in ("diverged", "precursor")}
    assert all(len(ids) == 1 for ids in disk_ids.values())
    assert _zk_id(client, "diverged") not in disk_ids["diverged"] and _zk_id(client, "precursor") is None
    epoch_before = int(client.get(zk.CONTROLLER_EPOCH)[0])
    partition_files = _partition_files(deployed.root)
    with ClusterRuntime(deployed, restart_dir=deployed.root.parent / "restarts"):
        # "all found" with write_back: the two topics whose replicas agree; the split one is left alone
        run = _dags_test({"topics": [], "strategy": "write_back", "dry_run": False})
        output = run.stdout + run.stderr
        assert run.returncode == 0, output[-8000:]
        for topic in ("diverged", "precursor"):
            assert {_zk_id(client, topic)} == disk_ids[topic]
            assert _healthy(client, topic)
        assert int(client.get(zk.CONTROLLER_EPOCH)[0]) == epoch_before + 1  # one controller move
        assert _partition_files(deployed.root) == partition_files  # not one partition file changed
    run_dir = _repair_dir(base)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert {t for t, e in plan["topics"].items() if e["strategy"]} == {"diverged", "precursor"}
    assert "write_back needs every replica to hold the same id" in plan["refused"]["split"]
    verify = json.loads((run_dir / "verify.json").read_text())
    assert verify["findings"] == [] and verify["cases_after"] == {
        "diverged": "consistent",
        "precursor": "consistent",
    }
    assert "no topic-id finding" in (run_dir / "report.txt").read_text()
    assert not client.exists("/kafka_zk_maintenance")  # the lease is given back
    rollback = json.loads((run_dir / "rollback.json").read_text())
    for entry in rollback["znodes"]:
        topic = entry["path"].rsplit("/", 1)[1]
        assert base64.b64decode(entry["data_b64"]) == original[topic]
        assert entry["restore"].startswith("zookeeper-shell.sh ")
        client.set(entry["path"], base64.b64decode(entry["data_b64"]))  # what the restore command does
        assert client.get(entry["path"])[0] == original[topic]


def _registration_epochs(client: KazooClient) -> dict[int, int]:
    return {int(b): client.exists(f"{zk.BROKER_IDS}/{b}").czxid for b in client.get_children(zk.BROKER_IDS)}


def test_file_reset_heals_the_split_topic_touching_only_the_disagreeing_replicas(live):
    deployed, client, base = live
    before_ids = _disk_ids(deployed, "split")
    before_files = _partition_files(deployed.root)
    restart_dir = deployed.root.parent / "restarts"
    with ClusterRuntime(deployed, restart_dir=restart_dir) as runtime:
        run = _dags_test(
            {
                "topics": [],
                "dry_run": False,
                "restart_command": runtime.restart_command_template(),
                "gate_timeout_s": 60,
            }
        )
        output = run.stdout + run.stderr
        assert run.returncode == 0, output[-8000:]
        run_dir = _repair_dir(base)
        plan = json.loads((run_dir / "plan.json").read_text())
        # auto keeps the id every leader of split holds (brokers 0-2's): only broker 3's followers reset
        target = plan["topics"]["split"]["target_id"]
        targeted = {k for k, v in before_ids.items() if v != target}
        assert targeted and {b for b, _ in targeted} == {3}
        assert runtime.restarted == [3]  # only the broker holding the odd replicas
        for topic in ("diverged", "split", "precursor", "healthy"):
            assert set(_disk_ids(deployed, topic).values()) == {_zk_id(client, topic)}, topic
            assert _healthy(client, topic), topic
        assert _zk_id(client, "split") == target
        with runtime._lock:
            assert deployed.cluster.unserved_partitions() == []
    after_files = _partition_files(deployed.root)
    changed = {k for k in before_files if after_files.get(k) != before_files[k]}
    metadata_changed = {k for k in changed if k.endswith("/partition.metadata")}
    assert metadata_changed == {
        f"broker-{b}/data/kafka-logs-0/split-{p}/partition.metadata" for b, p in targeted
    }
    # besides those, only leader-epoch-checkpoints of partitions whose leader moved during the restarts
    assert all(k.endswith("/leader-epoch-checkpoint") for k in changed - metadata_changed)
    assert not [k for k in changed if k.endswith((".log", ".index", ".timeindex"))]  # no record lost
    backups = json.loads((run_dir / "rollback-files.json").read_text())["files"]
    assert len(backups) == len(targeted)
    for entry in backups:
        copy = run_dir / "files" / f"broker-{entry['broker_id']}" / entry["path"].lstrip("/")
        assert (
            f"topic_id: {before_ids[(entry['broker_id'], int(entry['path'].split('/')[-2].rsplit('-', 1)[1]))]}"
            in copy.read_text()
        )
        assert entry["restore"].startswith(f"ssh 127.0.0.{entry['broker_id'] + 1} ")
    verify = json.loads((run_dir / "verify.json").read_text())
    assert verify["cases_after"] == {
        "diverged": "consistent",
        "precursor": "consistent",
        "split": "consistent",
    }
    assert (
        f"rollback: {run_dir / 'rollback.json'}, {run_dir / 'rollback-files.json'}"
        in (run_dir / "report.txt").read_text()
    )


def test_a_failed_restart_gate_stops_the_run_and_clearing_the_task_resumes_without_restarting_again(
    live_rolling, monkeypatch
):
    deployed, client, base = live_rolling
    restart_dir = deployed.root.parent / "restarts"
    with ClusterRuntime(deployed, restart_dir=restart_dir, fail_restart={0}) as runtime:
        epochs = _registration_epochs(client)
        run = _dags_test(
            {
                "topics": [],
                "dry_run": False,
                "restart_command": runtime.restart_command_template(),
                "gate_timeout_s": 4,
            }
        )
        output = run.stdout + run.stderr
        assert run.returncode != 0
        assert "broker 0 did not pass its restart gate within 4s" in output
        assert "brokers not restarted yet: [2]" in output
        now = _registration_epochs(client)
        assert 0 not in now  # the broker that did not come back
        assert now[2] == epochs[2]  # the next broker was not restarted
        split_ids = _disk_ids(deployed, "split")
        assert split_ids[(2, 1)] is not None and split_ids[(2, 0)] is not None  # nor its files touched
        run_dir = _repair_dir(base)
        progress = json.loads((run_dir / "progress.json").read_text())
        assert "reset-files:0" in progress["completed"] and "restart-broker:0" in progress["pending"]
        assert not client.exists("/kafka_zk_maintenance")  # the refused step gave the lease back

        # someone fixes broker 0 and starts it; then clears the execute task
        with runtime._lock:
            runtime.fail_restart.clear()
            deployed.cluster.start_broker(0)
            deployed.sync()
        monkeypatch.setenv(  # this process resolves it from the environment; the DAG used the metadata DB
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": deployed.zookeeper_hosts,
                    "extra": {"chroot": deployed.chroot, "session_timeout": 10, "connect_timeout": 5},
                }
            ),
        )
        hosts = {str(b): f"127.0.0.{b + 1}" for b in deployed.cluster.brokers}
        resumed = TopicIdRepairExecuteOperator(
            task_id="execute",
            plan_dir=str(run_dir),
            kafka_zookeeper_conn_id=ZK_CONN,
            ssh_conn_id=SSH_CONN,
            broker_hosts=hosts,
            server_properties_path=str(deployed.root / "broker-{broker_id}" / "config" / "server.properties"),
            restart_command=runtime.restart_command_template(),
            dry_run=False,
            gate_timeout=60,
            poll_interval=0.3,
        ).execute({})
        assert resumed["ran"][0] == "restart-broker:0"  # resumed at the gate ...
        assert runtime.restarted == [2]  # ... without restarting broker 0 again
        assert set(_disk_ids(deployed, "split").values()) == {_zk_id(client, "split")}
        assert _healthy(client, "split")


def test_a_wrong_chroot_is_refused_at_once_naming_the_chroot_and_what_it_holds(
    live, zookeeper_server, tmp_path
):
    """Issue 32, item 6: the connection's chroot mistyped onto another application's tree. Before,
    the snapshot of that tree passed, the broker list failed and was retried, and the run ended after
    123 s on a DrainError; now its first task refuses at once -- ClusterIdentityError, no retry --
    naming the chroot and what it holds, and nothing else runs (no inventory, no SSH, no plan)."""
    deployed, _, base = live
    wrong = deployed.chroot + "_typo"
    other = KazooClient(hosts=zookeeper_server.connect_string)
    other.start(timeout=15)
    try:
        for child in ("config", "consumers", "leases"):  # another application's znodes
            other.ensure_path(f"{wrong}/{child}")
    finally:
        other.stop()
        other.close()
    _store_zk_connection(zookeeper_server.connect_string, wrong)
    run = _dags_test({"topics": ["precursor"]})
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "ClusterIdentityError" in output and "DrainError" not in output
    assert (
        f"chroot {wrong} holds no Kafka cluster (/brokers/ids is missing): found there: /config, /consumers, /leases"
        in output
    )
    # nothing read after the first task: no snapshot, no broker inventoried (only the coverage task,
    # which runs whatever happened, says none was), no plan
    assert not (base / CLUSTER / "snapshots").exists()
    assert not list((base / CLUSTER).rglob("broker=*")) and not (base / CLUSTER / "topic-id-repair").exists()
    assert "up_for_retry" not in output.lower() and "Brokers to inventory" not in output
