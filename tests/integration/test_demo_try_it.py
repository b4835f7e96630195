"""``demo.sh --keep-running`` prints shell lines that point one's own ``airflow`` at the running demo:
its connection commands store working connections in a metadata DB, as users keep them, and the
printed drain, run as printed, moves the RF=1 partitions off the drained broker for real."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.testing.airflow_production import ApiClient
from airflow_provider_kafka_zk.testing.demo import try_it_yourself

pytestmark = pytest.mark.integration

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def _user_shell_env(home: str) -> dict[str, str]:
    """A user's shell: none of the test process's connections, the venv's ``airflow`` on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__"))}
    env.pop("KAFKA_ZK_CLUSTERS_FILE", None)
    env["AIRFLOW_HOME"] = home
    env["PATH"] = f"{Path(AIRFLOW).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_printed_connection_commands_store_the_demo_connections(tmp_path):
    conns = {
        "AIRFLOW_CONN_KAFKA_ZK_DEMO": json.dumps(
            {"conn_type": "kafka_zookeeper", "host": "127.0.0.1:2181", "extra": {"chroot": "/kafka demo's"}}
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    env = {
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
        "KAFKA_ZK_CLUSTERS_FILE": str(tmp_path / "clusters.toml"),
        "KAFKA_ZK_ARTEFACTS_BASE": str(tmp_path / "artefacts"),
        "PYSPARK_PYTHON": sys.executable,
        **conns,
    }
    lines = try_it_yourself(env).splitlines()
    shell_env = _user_shell_env(env["AIRFLOW_HOME"])
    script = "\n".join(
        [
            "set -e",
            *[line for line in lines if line.startswith(("export", "airflow db", "airflow connections"))],
        ]
    )
    result = subprocess.run(
        ["bash", "-c", script], env=shell_env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = subprocess.run(
        [AIRFLOW, "connections", "get", "kafka_zk_demo", "-o", "json"],
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (stored,) = json.loads(got.stdout)
    assert stored["conn_type"] == "kafka_zookeeper" and stored["host"] == "127.0.0.1:2181"
    assert stored["extra_dejson"] == {"chroot": "/kafka demo's"}  # quoted for the shell, stored intact
    assert any(line.startswith("airflow dags test kafka_zk_daily_hygiene_demo") for line in lines)
    drain = [line for line in lines if "kafka_zk_pre_maintenance_drain" in line]
    assert json.loads(shlex.split(drain[0])[5])["dry_run"] is True
    assert len(drain) == 1  # no drainable cluster named: no real drain offered


def _rf1_on(client: KazooClient, broker: int) -> list[str]:
    """The RF=1 partitions ZooKeeper assigns to ``broker``."""
    out = []
    for topic in client.get_children(zk.BROKER_TOPICS):
        path = zk.topic_path(topic)
        assignment = zk.TopicAssignment.decode(client.get(path)[0], path)
        out += [f"{topic}-{p}" for p, r in assignment.partitions.items() if tuple(r) == (broker,)]
    return sorted(out)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(1200)  # the real drain now also waits for its approval (an api-server starts)
def test_keep_running_leaves_a_cluster_the_printed_drain_drains_and_the_printed_pid_stops(tmp_path):
    """What ``scripts/demo.sh --keep-running`` execs (without its ``--run-dag``, whose DAG runs other
    tests cover): wait for the printed lines, run the printed exports, connections and real drain in
    a user's shell, read ZooKeeper, then stop everything with the printed ``kill``."""
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--keep-running",
            "--workdir",
            str(tmp_path / "demo"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []
    try:
        for line in demo.stdout:
            printed.append(line.rstrip("\n"))
            if line.startswith("Services and broker sessions stay up"):
                break
        assert printed and printed[-1].startswith("Services"), "\n".join(printed[-50:])
        lines = printed[printed.index("To use the running demo from another shell:") :]
        drains = [
            line
            for line in lines
            if line.startswith("airflow dags test kafka_zk_pre_maintenance_drain")
            and '"dry_run": false' in line
        ]
        assert len(drains) == 1, lines
        conf = json.loads(shlex.split(drains[0])[5])
        assert conf["cluster"] == "demo_maintenance" and conf["dry_run"] is False
        (broker,) = conf["brokers"]
        assert any(
            line.startswith("# or, with a scheduler running") and "airflow dags trigger" in line
            for line in lines
        )
        zk_conn = next(
            line for line in lines if line.startswith("airflow connections add kafka_zk_demo_maintenance")
        )
        fields = json.loads(shlex.split(zk_conn)[5])
        client = KazooClient(hosts=fields["host"] + fields["extra"]["chroot"])
        client.start(timeout=15)
        try:
            before = _rf1_on(client, broker)
            assert before  # something to drain

            home = next(line for line in lines if line.startswith("export AIRFLOW_HOME="))
            script = "\n".join(
                [
                    "set -e",
                    *[x for x in lines if x.startswith(("export", "airflow db", "airflow connections"))],
                    drains[0],
                ]
            )
            # the real drain waits in its approve task: the person approves it at the printed api-server
            where = next(line for line in lines if "in the UI at http://127.0.0.1:" in line)
            url, password = re.search(r"in the UI at (\S+) \(user admin, password (\S+);", where).groups()
            api = ApiClient(url, {"admin": password})
            shell_log = tmp_path / "user-shell.log"  # a file: a pipe nobody reads would block the run
            user_shell = subprocess.Popen(
                ["bash", "-c", script],
                env=_user_shell_env(shlex.split(home)[1].split("=", 1)[1]),
                stdout=shell_log.open("w"),
                stderr=subprocess.STDOUT,
            )
            try:
                request = api.wait_for_approval_request(
                    "kafka_zk_pre_maintenance_drain", timeout=900, alive=lambda: user_shell.poll() is None
                )
                assert client.exists(zk.REASSIGN_PARTITIONS) is None and _rf1_on(client, broker) == before
                ti = request["task_instance"]
                api.respond(ti["dag_id"], ti["dag_run_id"], "approve", "Approve", "tried it")
                user_shell.wait(timeout=1200)
            finally:
                if user_shell.poll() is None:
                    user_shell.kill()
                    user_shell.wait()
            assert user_shell.returncode == 0, shell_log.read_text()[-6000:]
            assert _rf1_on(client, broker) == []  # moved off the drained broker, in ZooKeeper
            assert set(before) <= {p for b in range(6) if b != broker for p in _rf1_on(client, b)}
            assert not client.exists(zk.REASSIGN_PARTITIONS)  # the controller finished it
        finally:
            client.stop()
            client.close()
        reports = list((tmp_path / "demo" / "artefacts" / "demo_maintenance" / "drain").glob("*/report.txt"))
        assert len(reports) == 1 and "Verification: OK" in reports[0].read_text()

        stop = printed[-1]
        demo_pid, *service_pids = (int(p) for p in re.findall(r"\d{2,}", stop.split("or kill", 1)[1]))
        assert demo_pid == demo.pid and len(set(service_pids)) == 3  # the api-server, sshd, ZooKeeper
        assert all(_alive(p) for p in service_pids)
        os.kill(demo_pid, signal.SIGTERM)  # the printed "kill <pid>"
        assert demo.wait(timeout=120) == 0
        for pid in set(service_pids):  # ZooKeeper and sshd stopped (and reaped) by the demo
            assert not _alive(pid), pid
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
