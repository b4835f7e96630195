"""Approving the exact plan (issue 25) on real parts: a simulated cluster in a real ZooKeeper, its broker
hosts behind a real sshd, the drain DAG run by ``airflow dags test`` in a subprocess, and a person
answering its approval over the REST API of a real ``airflow api-server`` sharing that run's metadata
database (Airflow 3.3.2's ``dags test`` keeps a run whose task awaits input alive until such an
answer arrives).

The cluster file requires approval (the default) and names the approver. Each run waits in its
``approve`` task with ZooKeeper and every broker disk untouched; then:

* approved: the execute step carries out the plan whose hash the approval showed (and said so);
  a user who is not an approver is refused by Airflow;
* the plan altered after it was shown: the execute step refuses before the first write;
* the cluster changed after the plan was shown: the drain's own read check refuses before the first
  write.

The production-shape tests (``test_production_approval.py``) do the same through the scheduler and
the triggerer, with rejection and time-out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.approval import plan_digest
from airflow_provider_kafka_zk.operators.drain import DrainExecuteOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import load_plan, plan_batches
from airflow_provider_kafka_zk.testing._process import free_port
from airflow_provider_kafka_zk.testing.airflow_production import LocalApiServer
from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime

pytestmark = pytest.mark.integration

CLUSTER = "approval-test"
DAG = "kafka_zk_pre_maintenance_drain"
DRAINED = 1
ZK_CONN = "approval_zk"
SSH_CONN = "approval_ssh"
RF1_ON_DRAINED = {("single", 0), ("single", 1), ("single", 2), ("lonely", 0)}
APPROVERS_MAIL = "kafka-approvers@example.com"


def _spec() -> ClusterSpec:
    """Four brokers, one per sshd address; broker 1 holds four RF=1 partitions."""
    return ClusterSpec(
        "approval",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single",
                6,
                1,
                assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)},
                records_per_partition=20,
            ),
            TopicSpec("lonely", 1, 1, assignment={0: (1,)}, records_per_partition=10),
            TopicSpec("replicated", 2, 3, records_per_partition=10),
        ),
    )


@pytest.fixture(scope="module")
def api(airflow_home):
    """An api-server on the tests' Airflow home (its SQLite is what ``dags test`` writes): the admin
    (the cluster's approver) and an operator who is not one."""
    with LocalApiServer(os.environ.copy(), users={"admin": "admin", "oncall": "op"}) as server:
        yield server


@pytest.fixture(scope="module")
def mail():
    """The approvers' mail server (aiosmtpd on loopback)."""
    with SmtpSink() as smtp:
        yield smtp


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch, api, mail):
    chroot = zookeeper_server.new_chroot("/kafka_approval_")
    hosts = tmp_path / "hosts"
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, hosts
    ) as deployed:
        base = tmp_path / "artefacts"
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            'approvers = ["admin"]\napproval_timeout_s = 900\n'  # require_approval: the default (true)
            # the approvers' e-mail, and a mail server that is down (nothing listens on its port)
            f'notify = {{ channels = [ {{ kind = "smtp", to = ["{APPROVERS_MAIL}"], smtp_conn_id = "approval_smtp" }},'
            f' {{ kind = "smtp", to = ["{APPROVERS_MAIL}"], smtp_conn_id = "approval_smtp_down" }} ] }}\n'
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        monkeypatch.setenv("AIRFLOW_CONN_APPROVAL_SMTP", json.dumps(mail.connection()))
        monkeypatch.setenv(
            "AIRFLOW_CONN_APPROVAL_SMTP_DOWN",
            json.dumps({**mail.connection(), "port": free_port("127.0.0.1")}),
        )
        monkeypatch.setenv("AIRFLOW__API__BASE_URL", api.base_url)  # the links the run writes
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
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        client = KazooClient(hosts=deployed.zookeeper_connect)
        client.start(timeout=15)
        try:
            yield deployed, client, base
        finally:
            client.stop()
            client.close()


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int, int, int]]:
    """Every znode -> (data, mzxid, version, cversion): any write changes one of them."""
    out = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid, stat.version, stat.cversion)
        pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
    return out


def _disks(deployed: DeployedCluster) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under the broker hosts' roots -> (mode, bytes; None for a directory)."""
    root = Path(deployed.root)
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, None if p.is_dir() else p.read_bytes())
        for p in sorted(root.rglob("*"))
    }


class Run:
    """``airflow dags test`` of the drain in the background (its output in a file)."""

    def __init__(self, conf: dict, log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "airflow"), "dags", "test", DAG, "-c", json.dumps(conf)],
            env=os.environ.copy(),
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._out.close()
        return code, self.log.read_text(errors="replace")


def _waiting(api: LocalApiServer, run: Run) -> dict:
    request = api.wait_for_approval_request(DAG, timeout=300, alive=run.alive)
    assert request["task_instance"]["task_id"] == "approve"
    return request


def _plan_dir(base: Path) -> Path:
    [folder] = (base / CLUSTER / "drain").iterdir()
    return folder


def _shown_hash(request: dict) -> str:
    body = request["body"]
    return body.split("sha256 `", 1)[1].split("`", 1)[0]


# ---------------------------------------------------------------------------------------------


def test_a_real_drain_waits_and_carries_out_exactly_the_approved_plan(live, api, mail, tmp_path):
    deployed, client, base = live
    before, disks = _tree(client), _disks(deployed)
    run = Run(
        {"cluster": CLUSTER, "brokers": [DRAINED], "dry_run": False, "poll_interval_s": 0.3},
        tmp_path / "run.log",
    )
    request = _waiting(api, run)
    # waiting: nothing written anywhere yet
    assert _tree(client) == before and _disks(deployed) == disks
    # what the person sees: root cause first, every write, the undo and the hash of exactly these files
    body, folder = request["body"], _plan_dir(base)
    assert body.startswith(
        f"**Drain brokers [{DRAINED}] of cluster {CLUSTER} before they stop: 4 partition(s)"
    )
    for expected in (
        "/admin/reassign_partitions",
        "/config/topics/single",
        "Brokers restarted",
        "rollback.json",
    ):
        assert expected in body, expected
    shown = _shown_hash(request)
    recomputed = plan_digest(
        {n: (folder / n).read_bytes() for n in ("plan.json", "rollback.json")},
        {
            "execute": {"throttle_bytes_per_sec": 50 * 1024 * 1024, "kafka_zookeeper_conn_id": ZK_CONN},
            "clear_throttles": {"kafka_zookeeper_conn_id": ZK_CONN, "force": False},  # a writer too
        },
    )
    assert shown == recomputed.sha256
    assert [u["id"] for u in request["assigned_users"]] == ["admin"]
    run_id = request["task_instance"]["dag_run_id"]
    # the approvers were told, once, through the mail server that is up: the plan's headline, its
    # hash, the run and the approval page; the one that is down is said, and changes nothing
    [told] = [m for m in mail.messages if run_id in m.html()]
    assert told.rcpt_tos == [APPROVERS_MAIL]
    html = told.html()
    assert told.message["Subject"].startswith(
        f"[kafka-zk] {CLUSTER}: approval needed: Drain plan sha256 {shown[:16]}"
    )
    assert shown in html and run_id in html and body.splitlines()[0].strip("*") in html
    links = dict((label, href) for href, label in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', html))
    run_path = f"/dags/{DAG}/runs/{urllib.parse.quote(run_id, safe='')}"
    assert urllib.parse.unquote(links["Open the approval page"]) == urllib.parse.unquote(
        f"{api.base_url}{run_path}/tasks/approve/required_actions?map_index=-1"
    )  # the HITL operator's generate_link_to_ui puts the run id in the path unquoted
    assert links["Open the Airflow run"] == f"{api.base_url}{run_path}"
    # following them as the approver (the api-server's auth): the page is there, and the request it
    # shows over REST is this run's, with the same hash
    page = urllib.parse.urlsplit(links["Open the approval page"])
    status, html_page = api.http("GET", f"{page.path}?{page.query}")
    assert status == 200 and b"<html" in html_page.lower()
    [rest] = {
        h for h in re.findall(r'href="([^"]+)"', html) if h.endswith("/taskInstances/approve/-1/hitlDetails")
    }
    status, raw = api.http("GET", urllib.parse.urlsplit(rest).path)
    assert status == 200, raw[:2000]
    shown_over_rest = json.loads(raw)
    assert f"- sha256 `{shown}`" in shown_over_rest["body"] and shown_over_rest["response_received"] is False
    notified = json.loads((folder / "approval.json").read_text())["notified"]["deliveries"]
    assert notified["smtp:approval_smtp"]["ok"] is True
    assert notified["smtp:approval_smtp_down"]["ok"] is False
    assert "ConnectionRefusedError" in notified["smtp:approval_smtp_down"]["error"]
    # someone who is not an approver cannot decide
    api.respond(DAG, run_id, "approve", "Approve", "me too", user="oncall", expect=(403,))
    assert api.waiting_approvals(DAG, run_id)
    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts", reassignments=True):
        api.respond(DAG, run_id, "approve", "Approve", "change CHG-1 reviewed")
        code, output = run.wait()
    assert code == 0, output[-6000:]
    assert f"carrying out the approved plan sha256 {shown} (approved by admin)" in output
    assert "Approvers NOT told through smtp:approval_smtp_down" in output
    assert len([m for m in mail.messages if run_id in m.html()]) == 1  # once per run
    record = json.loads((folder / "approval.json").read_text())
    assert record["decision"] == "approved" and record["plan"]["sha256"] == shown
    assert (
        record["decided_by"] == {"id": "admin", "name": "admin"}
        and record["comment"] == "change CHG-1 reviewed"
    )
    changes = json.loads((folder / "changes-approve-1.json").read_text())["changes"]
    assert [(c["op"], c["decision"], c["plan_sha256"]) for c in changes] == [("approval", "approved", shown)]
    report = (folder / "report.txt").read_text()  # the verify step's report, the decision first
    assert report.startswith(
        f"Approved by admin at {record['decided_at']} (change CHG-1 reviewed); plan sha256 {shown}"
    )
    assert "Verification: OK" in report
    assert (
        f"Approved by admin at {record['decided_at']} (change CHG-1 reviewed); plan sha256 {shown}" in output
    )
    moved = {
        (t, p)
        for t in ("single", "lonely")
        for p, r in zk.TopicAssignment.decode(
            client.get(zk.topic_path(t))[0], zk.topic_path(t)
        ).partitions.items()
        if DRAINED not in r
    }
    assert moved >= RF1_ON_DRAINED


def test_a_plan_altered_after_it_was_shown_is_refused_before_the_first_write(live, api, tmp_path):
    deployed, client, base = live
    run = Run(
        {"cluster": CLUSTER, "brokers": [DRAINED], "dry_run": False, "batch_timeout_s": 60},
        tmp_path / "run.log",
    )
    request = _waiting(api, run)
    folder = _plan_dir(base)
    plan = json.loads((folder / "plan.json").read_text())
    first = plan["batches"][0][0]
    elsewhere = next(b for b in (0, 2, 3) if [b] != first["target"])
    first["target"] = [elsewhere]  # someone sends one partition to another broker than reviewed
    (folder / "plan.json").write_text(json.dumps(plan, indent=1))
    before, disks = _tree(client), _disks(deployed)
    # the damage without the check: the execute step accepts whatever plan.json holds (its dry run,
    # outside a DAG with an approval step, takes the altered batch as the one to submit)
    [snapshot] = (base / CLUSTER / "snapshots").iterdir()
    described = DrainExecuteOperator(
        task_id="execute",
        plan_dir=str(folder),
        kafka_zookeeper_conn_id=ZK_CONN,
        throttle_bytes_per_sec=1000,
        snapshot_path=str(snapshot),
    )
    assert described.execute({})["partitions"] == 4
    assert plan_batches(load_plan(str(folder)))[0][0].target == (elsewhere,)
    assert _tree(client) == before
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Approve")
    code, output = run.wait()
    assert code != 0, output[-6000:]
    assert "PlanChangedSinceApprovalError" in output
    approved_file = request["body"].split("`plan.json`: ", 1)[1].split("\n", 1)[0]
    now_file = hashlib.sha256((folder / "plan.json").read_bytes()).hexdigest()
    assert f"plan.json changed: approved sha256 {approved_file}, now {now_file}" in output
    assert _tree(client) == before and _disks(deployed) == disks  # nothing written, lease included
    assert not (folder / "throttles.json").exists()


def test_a_cluster_changed_after_the_plan_was_shown_is_refused_before_the_first_write(live, api, tmp_path):
    deployed, client, base = live
    run = Run(
        {"cluster": CLUSTER, "brokers": [DRAINED], "dry_run": False, "batch_timeout_s": 60},
        tmp_path / "run.log",
    )
    request = _waiting(api, run)
    # while the plan waits for a person, an old client adds a partition to a topic being drained
    deployed.cluster.old_client_adds_partitions("single", 8)
    deployed.sync()
    before, disks = _tree(client), _disks(deployed)
    api.respond(DAG, request["task_instance"]["dag_run_id"], "approve", "Approve", "looked fine an hour ago")
    code, output = run.wait()
    assert code != 0, output[-6000:]
    assert "PlanReadDisagreementError" in output and "refusing before any write" in output
    assert "carrying out the approved plan sha256" in output  # the approval check passed: same plan
    assert _tree(client) == before and _disks(deployed) == disks
    assert not (_plan_dir(base) / "throttles.json").exists()


def test_every_execute_step_of_the_shipped_dags_checks_the_approval_first():
    """Each writing task of a shipped manual DAG has the approval step upstream and is a known writer
    (its settings are part of the plan hash)."""
    from airflow_provider_kafka_zk.dags import create_all_dags
    from airflow_provider_kafka_zk.operators.approved_plan import writer_fields

    dags = create_all_dags()
    writers = {
        (dag_id, task.task_id)
        for dag_id, dag in dags.items()
        for task in dag.tasks
        if writer_fields(task) is not None
    }
    assert writers == {
        ("kafka_zk_pre_maintenance_drain", "execute"),
        ("kafka_zk_pre_maintenance_drain", "clear_throttles"),
        ("kafka_zk_post_maintenance", "move_back"),
        ("kafka_zk_post_maintenance", "clear_throttles"),
        ("kafka_zk_post_maintenance", "elect_preferred_leaders"),
        ("kafka_zk_topic_id_repair", "execute"),
        ("kafka_zk_deletion_cleanup", "execute"),
        ("kafka_zk_undo", "execute"),
        ("kafka_zk_undo", "clear_throttles"),
        ("kafka_zk_kraft_migration", "execute"),
    }
    for dag_id, task_id in writers:
        upstream = {t.task_id for t in dags[dag_id].task_dict[task_id].get_flat_relatives(upstream=True)}
        assert "approve" in upstream and "plan" in upstream, (dag_id, task_id)
