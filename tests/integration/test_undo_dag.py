"""``kafka_zk_undo`` on real parts: simulated clusters in a real ZooKeeper (and a SASL one), their
broker hosts behind a real sshd (127.0.0.1-4), the simulator's controller carrying out
reassignments and elections in a thread of this process, and the undo DAG run by ``airflow dags
test`` -- one real undo approved over the REST API of a real ``airflow api-server``.

The runs undone are real mutations of this provider, made for the setup on clusters whose cluster
file says ``require_approval = false`` (automation): a drain (its plan from a planning read and its
execution on the step executor; its ``clear_throttles`` never ran, so its throttles and its lease
stay), a topicId write-back with a controller move and one without (the repair's executor and
handlers on steps made from the cluster's own bytes and ids; its diagnosis is the repair DAG's,
tested in test_topic_id_repair_dag.py) and a deletion cleanup (``TopicDeletionVerifyOperator(cleanup=
True, dry_run=False)`` in a team's own DAG: quarantine moves on the broker host and a config znode
deleted). Each undo is shown doing what it promises -- partitions where they were, throttles gone,
znodes holding their bytes from before, directories back in their log dirs -- and refusing, naming
what, when the run still holds the lease, a znode changed since, or a quarantined directory's
original place is occupied; undoing the same run twice plans nothing the second time and says so.
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind, PartitionMetadata
from airflow_provider_kafka_zk.kafka.steps import ControllerMove, HealthWait, TopicIdWrite
from airflow_provider_kafka_zk.kafka.topic_id_repair import rollback_record, topic_znode_with_id
from airflow_provider_kafka_zk.kafka.undo import undo_record
from airflow_provider_kafka_zk.maintenance import RunIdentity
from airflow_provider_kafka_zk.maintenance.drain import execute_drain, release_lease_if_ours
from airflow_provider_kafka_zk.maintenance.session import pin_zookeeper_identity
from airflow_provider_kafka_zk.maintenance.topic_id_repair import RepairSettings, execute_repair_plan
from airflow_provider_kafka_zk.maintenance.undo import UndoRefusedError
from airflow_provider_kafka_zk.operators._run import run_key
from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator
from airflow_provider_kafka_zk.operators.drain import DrainPlanOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import load_plan, plan_batches, plan_identity
from airflow_provider_kafka_zk.operators.undo import UndoPlanOperator
from airflow_provider_kafka_zk.testing.airflow_production import LocalApiServer
from airflow_provider_kafka_zk.testing.secure_zk import apply_kafka_secure_acls
from airflow_provider_kafka_zk.testing.secure_zk_server import SaslZooKeeperServer
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import topic_id_repair_cluster

pytestmark = pytest.mark.integration

CLUSTER = "undo-test"
ZK_CONN, SSH_CONN = "undo_zk", "undo_ssh"
UNDO = "kafka_zk_undo"
DRAIN = "kafka_zk_pre_maintenance_drain"
REPAIR = "kafka_zk_topic_id_repair"
MIB = 1024 * 1024
DAY_MS = 86_400_000
KAFKA = ("kafka", "kafka-secret")  # the brokers' SASL principal


# ---------------------------------------------------------------------------------------------
# Deployments
# ---------------------------------------------------------------------------------------------


@dataclass
class Live:
    deployed: DeployedCluster
    client: KazooClient
    base: Path
    clusters: Path
    work: Path

    def settings(self, **extra: str) -> None:
        """(Re)write the cluster file: the cluster's connections and store, plus ``extra`` keys."""
        hosts = self.deployed.root / "broker-{broker_id}" / "config" / "server.properties"
        lines = [
            f"[clusters.{CLUSTER}]",
            f'kafka_zookeeper_conn_id = "{ZK_CONN}"',
            f'ssh_conn_id = "{SSH_CONN}"',
            f'base_path = "{self.base}"',
            f'server_properties_path = "{hosts}"',
            *(f"{k} = {v}" for k, v in extra.items()),
        ]
        self.clusters.write_text("\n".join(lines) + "\n")

    def folder(self, kind: str) -> Path:
        """The one run folder of ``kind`` a DAG run wrote (the in-process plans' are ``inproc-*``)."""
        [run] = [p for p in (self.base / CLUSTER / kind).iterdir() if not p.name.startswith("inproc-")]
        return run


def _zk_connection(connect: str, chroot: str, **extra: Any) -> str:
    conn: dict[str, Any] = {
        "conn_type": "kafkazookeeper",
        "host": connect,
        "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5, **extra.pop("extra", {})},
    }
    conn.update(extra)
    return json.dumps(conn)


@contextmanager
def _live(
    cluster: SimulatedCluster, zookeeper_server, ssh_server, work: Path, monkeypatch, **settings: str
) -> Iterator[Live]:
    chroot = zookeeper_server.new_chroot("/kafka_undo_")
    with DeployedCluster(cluster, zookeeper_server.connect_string, chroot, work / "hosts") as deployed:
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}", _zk_connection(zookeeper_server.connect_string, chroot)
        )
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        live = Live(
            deployed, KazooClient(hosts=deployed.zookeeper_connect), work / "artefacts", work / "c.toml", work
        )
        live.settings(require_approval="false", **settings)  # the setup's mutations: automation
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(live.clusters))
        live.client.start(timeout=15)
        try:
            yield live
        finally:
            live.client.stop()
            live.client.close()


def _airflow() -> str:
    return str(Path(sys.executable).parent / "airflow")


def _dags_test(conf: dict[str, Any], timeout: float = 500) -> tuple[int, str]:
    done = subprocess.run(
        [
            _airflow(),
            "dags",
            "test",
            UNDO,
            "-c",
            json.dumps({"cluster": CLUSTER, "poll_interval_s": 0.3, **conf}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr


def _plan_in_process(live: Live, run_id: str, name: str) -> dict[str, Any]:
    """The undo's plan task run here (what a dry run's first task does), its folder named ``name``."""
    return UndoPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        original_run_id=run_id,
        kafka_zookeeper_conn_id=ZK_CONN,
        ssh_conn_id=SSH_CONN,
        server_properties_path=str(
            live.deployed.root / "broker-{broker_id}" / "config" / "server.properties"
        ),
        base_path=str(live.base),
        undo_ts=f"inproc-{name}",
    ).execute({"run_id": f"manual__{name}"})


def _refusals(live: Live, run_id: str, name: str) -> dict[str, tuple[str, ...]]:
    with pytest.raises(UndoRefusedError) as refused:
        _plan_in_process(live, run_id, name)
    return {r.rule: r.subjects for r in refused.value.refusals}


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int]]:
    out, pending = {}, ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid)
        pending.extend(posixpath.join(path, c) for c in client.get_children(path))
    return out


def _throttles(client: KazooClient) -> dict[str, dict[str, str]]:
    """Every replication throttle key set anywhere in the cluster's config znodes."""
    out = {}
    for entity_type in ("topics", "brokers"):
        if not client.exists(f"/config/{entity_type}"):
            continue
        for name in client.get_children(f"/config/{entity_type}"):
            config = json.loads(client.get(f"/config/{entity_type}/{name}")[0] or b"{}").get("config") or {}
            keys = {k: v for k, v in config.items() if "replication.throttled" in k}
            if keys:
                out[f"{entity_type}/{name}"] = keys
    return out


def _assignment(client: KazooClient, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    out = {}
    for topic in topics:
        path = zk.topic_path(topic)
        for p, replicas in zk.TopicAssignment.decode(client.get(path)[0], path).partitions.items():
            out[(topic, p)] = list(replicas)
    return out


# ---------------------------------------------------------------------------------------------
# A drain, undone after a person approved the undo over REST
# ---------------------------------------------------------------------------------------------


def _drain_cluster() -> SimulatedCluster:
    """Four brokers on 127.0.0.1-4; broker 1 holds four RF=1 partitions."""
    return SimulatedCluster(
        ClusterSpec(
            "undo-drain",
            brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
            topics=(
                TopicSpec("single", 6, 1, assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)}),
                TopicSpec("lonely", 1, 1, assignment={0: (1,)}, records_per_partition=10),
                TopicSpec("replicated", 2, 3, records_per_partition=10),
            ),
        )
    )


def _drain(live: Live, run_id: str) -> Path:
    """A real drain of broker 1 (planning read, then its batches on the step executor, throttled at
    50 MiB/s, the DAG's default); its clear_throttles step never ran: its throttles and lease stay."""
    key = run_key(run_id, datetime.now(UTC))
    DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        brokers=[1],
        base_path=str(live.base),
        kafka_zookeeper_conn_id=ZK_CONN,
        inventory_ts="none",
        max_partitions_per_batch=3,
        drain_ts=key,
    ).execute({"run_id": run_id})
    folder = live.base / CLUSTER / "drain" / key
    plan = load_plan(str(folder))
    execute_drain(
        str(folder),
        plan,
        plan_batches(plan),
        kafka_zookeeper_conn_id=ZK_CONN,
        rate=50 * MIB,
        run=RunIdentity(DRAIN, run_id, "execute", 1, "setup"),
        dry_run=False,
        expected=plan_identity(plan, str(folder)),
        poll_interval=0.2,
        batch_timeout=120,
    )
    return folder


@pytest.fixture(scope="module")
def api(airflow_home) -> Iterator[LocalApiServer]:
    """An api-server on the tests' Airflow home (the SQLite ``dags test`` writes): admin approves."""
    with LocalApiServer(os.environ.copy(), users={"admin": "admin"}) as server:
        yield server


def test_a_drain_is_undone_partitions_back_and_every_throttle_gone_after_a_rest_approval(
    zookeeper_server, ssh_server, tmp_path, monkeypatch, api
):
    with _live(_drain_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch) as live:
        before = _assignment(live.client, ["single", "lonely"])
        run_id = "manual__2026-05-01T10:00:00+00:00"
        with ClusterRuntime(live.deployed, restart_dir=tmp_path / "r", reassignments=True) as runtime:
            drain = _drain(live, run_id)
            drained = _assignment(live.client, ["single", "lonely"])
            assert {k for k, r in before.items() if r == [1]} == {
                k for k, r in before.items() if drained[k] != r
            }
            left = _throttles(live.client)
            assert left["brokers/1"]["leader.replication.throttled.rate"] == str(50 * MIB)  # never cleared

            # refused while the drain holds the cluster's maintenance lease: it is part-way through
            assert set(_refusals(live, run_id, "held")) == {"lease-held-by-run"}
            # (its lease expires, or a person releases it; its throttles stay behind)
            plan = load_plan(str(drain))
            assert release_lease_if_ours(
                str(drain),
                plan,
                kafka_zookeeper_conn_id=ZK_CONN,
                run=RunIdentity(DRAIN, run_id, "clear_throttles", 1, "setup"),
                expected=plan_identity(plan, str(drain)),
            )

            # the undo of a real run waits for a person (the cluster requires approval now)
            live.settings(approvers='["admin"]', approval_timeout_s="900")
            log = (tmp_path / "undo.log").open("w")
            process = subprocess.Popen(
                [
                    _airflow(),
                    "dags",
                    "test",
                    UNDO,
                    "-c",
                    json.dumps(
                        {"cluster": CLUSTER, "run_id": run_id, "dry_run": False, "poll_interval_s": 0.3}
                    ),
                ],
                env=os.environ.copy(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                request = api.wait_for_approval_request(
                    UNDO, timeout=400, alive=lambda: process.poll() is None
                )
                body = request["body"]
                assert f"Undo of {DRAIN} run {run_id}: move 4 partition(s)" in body, body
                assert (
                    "remove ['follower.replication.throttled.rate', 'leader.replication.throttled.rate'] from "
                    in body
                )
                assert _assignment(live.client, ["single", "lonely"]) == drained  # waiting: nothing moved
                api.respond(
                    UNDO, request["task_instance"]["dag_run_id"], "approve", "Approve", "undo reviewed"
                )
                code = process.wait(timeout=400)
            finally:
                if process.poll() is None:
                    process.kill()
                log.close()
            output = (tmp_path / "undo.log").read_text(errors="replace")
            assert code == 0, output[-8000:]
            with runtime._lock:
                assert _assignment(live.client, ["single", "lonely"]) == before  # every partition back
        assert _throttles(live.client) == {}  # the drain's leftovers and the undo's own
        assert not live.client.exists("/kafka_zk_maintenance")  # the lease given back
        undo = live.folder("undo")
        assert json.loads((undo / "approval.json").read_text())["decision"] == "approved"
        assert json.loads((undo / "verify.json").read_text())["ok"] is True
        assert (undo / "report.txt").read_text().startswith("Approved by admin")
        progress = json.loads((undo / "progress.json").read_text())["completed"]
        # the drain's leftovers cleared first; then the undo set its own (the same values: never taken
        # for "already set") and moved the partitions back; then clear_throttles removed its own
        order = list(progress)
        first_set = next(i for i, k in enumerate(order) if k.startswith("batch-1:throttle:"))
        assert order[:first_set] and all(
            k.startswith("undo:clear-run-throttles:") for k in order[:first_set]
        ), order
        assert progress["batch-1:throttle:brokers/1"]["written"] is True
        assert order.index("batch-1") < order.index(
            next(k for k in order if k.startswith("clear-throttles:"))
        )
        ours = json.loads((undo / "throttles.json").read_text())["entities"]
        assert ours["brokers/1"]["follower.replication.throttled.rate"] == str(
            50 * MIB
        )  # set again by the undo
        rollback = json.loads((undo / "rollback.json").read_text())
        assert {(p["topic"], p["partition"]): p["replicas"] for p in rollback["partitions"]} == {
            k: drained[k] for k in drained if drained[k] != before[k]
        }

        # a second undo of the same drain plans nothing and says so (the DAG then asks nobody: its
        # approval and writes are skipped, see the production campaign's CLI run)
        again = _plan_in_process(live, run_id, "again")
        assert again["nothing_to_do"], again
        assert again["verdict"].startswith(
            f"Nothing to undo: everything {DRAIN} run {run_id} changed is already as it was before it"
        )


# ---------------------------------------------------------------------------------------------
# topicId repairs: znodes back, the controller moved again; changed since: refused
# ---------------------------------------------------------------------------------------------


def _disk_id(deployed: DeployedCluster, topic: str) -> str:
    """The id every replica of ``topic`` holds on disk (the scenario's topics agree on disk)."""
    ids = set()
    for host in deployed.hosts.values():
        for log_dir in host.log_dirs:
            for d in log_dir.glob(f"{topic}-*"):
                f = d / "partition.metadata"
                if d.name[len(topic) + 1 :].isdigit() and f.exists():
                    ids.add(str(PartitionMetadata.parse(f.read_bytes(), str(f)).topic_id))
    (found,) = ids
    return found


def _write_back(
    live_base: Path, run_id: str, topic: str, topic_id: str, *, case: str, controller: bool
) -> Path:
    """The repair's write_back of ``topic_id`` into ``topic``'s znode on the repair's executor (its
    handlers: one multi-op with version checks, rollback-znode artefacts, then the controller move
    and the health wait), with the plan and rollback.json the repair's plan task writes."""
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        identity = pin_zookeeper_identity(hook)
        path = zk.topic_path(topic)
        data, stat = hook.get_znode(path)
        old = zk.TopicAssignment.decode(data, path).topic_id
    steps = [
        TopicIdWrite(
            id=f"write-topic-id:{topic}",
            topic=topic,
            path=path,
            expected_version=stat.version,
            old_data=data,
            new_data=topic_znode_with_id(data, path, topic_id),
            old_topic_id=None if old is None else str(old),
            topic_id=topic_id,
        )
    ]
    if controller:
        steps += [
            ControllerMove(id="move-controller", topics=(topic,)),
            HealthWait(id="wait-healthy", topics=(topic,)),
        ]
    folder = live_base / CLUSTER / "topic-id-repair" / run_key(run_id, datetime.now(UTC))
    folder.mkdir(parents=True)
    plan = {
        "format": "kafka-zk-topic-id-repair-plan",
        "cluster": CLUSTER,
        "strategy": "write_back",
        "identity": identity.to_dict(),
        "topics": {topic: {"case": case, "strategy": "write_back"}},
        "steps": [s.to_dict() for s in steps],
    }
    (folder / "plan.json").write_text(json.dumps(plan))
    record = rollback_record(steps, identity.hosts, identity.chroot, undo_record(CLUSTER, run_id, REPAIR))
    (folder / "rollback.json").write_text(json.dumps(record))
    execute_repair_plan(
        str(folder),
        plan,
        steps,
        RepairSettings(ZK_CONN, health_timeout=60, poll_interval=0.3),
        run=RunIdentity(REPAIR, run_id, "execute", 1, "setup"),
        dry_run=False,
        expected=identity,
    )
    return folder


def test_a_topic_id_repair_is_undone_znodes_back_and_the_controller_moved_again(
    zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home
):
    with _live(topic_id_repair_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch) as live:
        client = live.client
        original = {t: client.get(zk.topic_path(t))[0] for t in ("diverged", "precursor")}
        with ClusterRuntime(live.deployed, restart_dir=tmp_path / "r") as runtime:
            # the precursor first: once a controller moves, it mints an id for a topic without one
            _write_back(
                live.base,
                "manual__repair_b",
                "precursor",
                _disk_id(live.deployed, "precursor"),
                case="precursor",
                controller=False,
            )
            diverged = _write_back(
                live.base,
                "manual__repair_a",
                "diverged",
                _disk_id(live.deployed, "diverged"),
                case="diverged",
                controller=True,
            )
            repaired = client.get(zk.topic_path("diverged"))[0]
            assert repaired != original["diverged"] and len(runtime.elections) == 1
            rollback = json.loads((diverged / "rollback.json").read_text())
            assert rollback["undo"]["conf"] == {
                "cluster": CLUSTER,
                "run_id": "manual__repair_a",
                "dag_id": REPAIR,
                "dry_run": False,
            }
            assert "by hand only if the kafka_zk_undo DAG cannot run" in rollback["by_hand"]

            # someone rewrote precursor's znode after the repair: its undo refuses, naming it
            path = zk.topic_path("precursor")
            client.set(path, client.get(path)[0])
            assert _refusals(live, "manual__repair_b", "changed") == {"znode-changed": (path,)}

            code, output = _dags_test({"run_id": "manual__repair_a", "dry_run": False})
            assert code == 0, output[-8000:]
            assert "write /brokers/topics/diverged" in output or "Wrote topic_id" in output
            assert client.get(zk.topic_path("diverged"))[0] == original["diverged"]  # the bytes before
            assert len(runtime.elections) == 2  # the brokers load the restored id again
        undo = live.folder("undo")
        verify = json.loads((undo / "verify.json").read_text())
        assert (
            verify["ok"]
            and "/brokers/topics/diverged holds its bytes from before the run" in verify["checked"][0]
        )
        plan = json.loads((undo / "plan.json").read_text())
        assert any("DIVERGED again" in n for n in plan["undo"]["notes"])
        # the undo's own per-znode rollback (read back before its write) says how to redo the repair
        record = json.loads((undo / "rollback-znode-diverged.json").read_text())
        assert record["undo"]["note"].startswith("this run is an undo")
        assert not client.exists("/kafka_zk_maintenance")
        # undone already: a second undo plans nothing
        again = _plan_in_process(live, "manual__repair_a", "again")
        assert again["nothing_to_do"] and again["verdict"].startswith("Nothing to undo")


# ---------------------------------------------------------------------------------------------
# A deletion cleanup: directories back from the quarantine, the config znode back
# ---------------------------------------------------------------------------------------------

CONFIG_LEFT = b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"delete"}}'


def _cleanup_cluster() -> SimulatedCluster:
    """Three brokers on 127.0.0.1-3: ``events`` live; ``old-logs`` deleted, its two ``-delete``
    directories left on broker 2 (renamed two days ago)."""
    cluster = SimulatedCluster(
        ClusterSpec(
            "undo-cleanup",
            brokers=tuple(BrokerSpec(b, host=f"127.0.0.{b + 1}") for b in range(3)),
            topics=(
                TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=20),
                TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
            ),
            seed=41,
        )
    )
    topic_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", 2, [0, 1], kind=DirKind.DELETE, age_ms=2 * DAY_MS, topic_id=topic_id
    )
    return cluster


def _cleanup(live: Live, run_id: str) -> Path:
    """A real cleanup run in a team's own DAG (``team_deletions``), as automation with its own review."""
    key = run_key(run_id, datetime.now(UTC))
    ti = SimpleNamespace(
        dag_id="team_deletions",
        run_id=run_id,
        task_id="verify_deletions",
        try_number=1,
        xcom_push=lambda **_: None,
    )
    TopicDeletionVerifyOperator(
        task_id="verify_deletions",
        cluster=CLUSTER,
        base_path=str(live.base),
        kafka_zookeeper_conn_id=ZK_CONN,
        ssh_conn_id=SSH_CONN,
        server_properties_path=str(
            live.deployed.root / "broker-{broker_id}" / "config" / "server.properties"
        ),
        topics=["old-logs"],
        cleanup=True,
        dry_run=False,
        deferrable=False,
        wait_timeout=0,
        run_ts=key,
    ).execute({"run_id": run_id, "ti": ti})
    return live.base / CLUSTER / "deletions" / key


def test_a_deletion_cleanup_is_undone_directories_and_config_znode_back(
    zookeeper_server, ssh_server, tmp_path, monkeypatch, deletion_clock, airflow_home
):
    deletion_clock(2 * DAY_MS)  # the -delete directories are past the broker's delay: leftovers
    with _live(_cleanup_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch) as live:
        client = live.client
        client.create("/config/topics/old-logs", CONFIG_LEFT)
        [log_dir] = live.deployed.hosts[2].log_dirs
        leftovers = sorted(d.name for d in log_dir.iterdir() if d.name.startswith("old-logs-"))
        contents = {n: sorted(p.name for p in (log_dir / n).iterdir()) for n in leftovers}
        assert len(leftovers) == 2
        run_id = "manual__cleanup_1"
        cleanup = _cleanup(live, run_id)
        assert not [d for d in log_dir.iterdir() if d.name.startswith("old-logs-")]  # quarantined
        assert not client.exists("/config/topics/old-logs")
        # the first try's record: rollback/quarantine-<try number>.json
        record = json.loads((cleanup / "rollback" / "quarantine-1.json").read_text())
        assert record["undo"]["conf"] == {
            "cluster": CLUSTER,
            "run_id": run_id,
            "dag_id": "team_deletions",
            "dry_run": False,
        }
        [quarantined] = (log_dir.parent / "kafka-quarantine").iterdir()

        # the cluster changed since: something sits where a quarantined directory was -- refused
        blocker = log_dir / leftovers[0]
        blocker.mkdir()
        tree = _tree(client)
        with pytest.raises(UndoRefusedError) as refused:
            _plan_in_process(live, run_id, "occupied")  # the undo's plan task, as a dry run starts
        (refusal,) = refused.value.refusals
        assert refusal.rule == "quarantine-original-occupied" and refusal.subjects == (f"broker 2:{blocker}",)
        assert f"-> {blocker}: {blocker} exists" in refusal.cause and refusal.action.startswith(
            "Nothing was moved"
        )
        assert (
            _tree(client) == tree and sorted(p.name for p in quarantined.iterdir() if p.is_dir()) == leftovers
        )
        blocker.rmdir()

        code, output = _dags_test({"run_id": run_id, "dry_run": False})
        assert code == 0, output[-8000:]
        assert sorted(d.name for d in log_dir.iterdir() if d.name.startswith("old-logs-")) == leftovers
        assert {n: sorted(p.name for p in (log_dir / n).iterdir()) for n in leftovers} == contents
        assert not [p for p in quarantined.iterdir() if p.is_dir()]  # out of the quarantine
        assert client.get("/config/topics/old-logs")[0] == CONFIG_LEFT
        assert client.get_acls("/config/topics/old-logs")[0] == client.get_acls("/config/topics")[0]
        [undo] = [
            p for p in (live.base / CLUSTER / "undo").iterdir() if (p / "verify.json").exists()
        ]  # not the refused one
        verify = json.loads((undo / "verify.json").read_text())
        assert verify["ok"] and len(verify["checked"]) == 3
        assert not client.exists("/kafka_zk_maintenance")


# ---------------------------------------------------------------------------------------------
# A secured ensemble: the undo reaches it through the connection (SASL DIGEST-MD5)
# ---------------------------------------------------------------------------------------------


def test_a_migration_run_is_pointed_at_the_migration_dags_back_run(
    zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home
):
    """``kafka_zk_undo`` for a ``kafka_zk_kraft_migration`` run, as a person triggers it: the plan task refuses
    with the migration DAG's back run to trigger (its exact conf), not "no-artefacts"; nothing is written."""
    with _live(_cleanup_cluster(), zookeeper_server, ssh_server, tmp_path, monkeypatch) as live:
        before = _tree(live.client)
        code, output = _dags_test(
            {"run_id": "manual__2026-11-29T03:00:00+00:00", "dag_id": "kafka_zk_kraft_migration"}
        )
        assert code != 0, output[-4000:]
        assert "[migration-run]" in output and "no-artefacts" not in output, output[-4000:]
        back = json.dumps({"cluster": CLUSTER, "direction": "back", "dry_run": True}, separators=(", ", ": "))
        assert f"airflow dags trigger kafka_zk_kraft_migration --conf '{back}'" in output, output[-4000:]
        assert _tree(live.client) == before


@pytest.fixture(scope="module")
def sasl_server() -> Iterator[SaslZooKeeperServer]:
    server = SaslZooKeeperServer(dict([KAFKA]))
    try:
        server.start()
        yield server
    finally:
        server.close()


def test_a_repair_on_a_sasl_ensemble_is_undone_through_the_providers_connection(
    sasl_server, tmp_path, monkeypatch, airflow_home
):
    """Kafka's secure ACLs (``zookeeper.set.acl=true``, SASL principal ``kafka``): nobody but the
    brokers' principal may write the topic znodes, so a plain ``zookeeper-shell`` restore is refused;
    the undo, through the cluster's connection (SASL), writes the znode back."""
    chroot = sasl_server.new_chroot()
    with ExitStack() as stack:
        deployed = stack.enter_context(
            DeployedCluster(topic_id_repair_cluster(), sasl_server.connect_string, chroot, tmp_path / "hosts")
        )
        sasl = {"sasl_options": {"mechanism": "DIGEST-MD5", "username": KAFKA[0], "password": KAFKA[1]}}
        kafka_zk = KazooClient(hosts=sasl_server.connect_string, timeout=10.0, **sasl)
        kafka_zk.start(timeout=15)
        stack.callback(kafka_zk.close)
        stack.callback(kafka_zk.stop)
        apply_kafka_secure_acls(kafka_zk, chroot, KAFKA, scheme="sasl")
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            _zk_connection(
                sasl_server.connect_string,
                chroot,
                login=KAFKA[0],
                password=KAFKA[1],
                extra={"auth_scheme": "sasl", "sasl_mechanism": "DIGEST-MD5"},
            ),
        )
        live = Live(deployed, kafka_zk, tmp_path / "artefacts", tmp_path / "c.toml", tmp_path)
        live.settings(require_approval="false")
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(live.clusters))
        path = chroot + zk.topic_path("precursor")
        original = kafka_zk.get(path)[0]
        _write_back(
            live.base,
            "manual__sasl",
            "precursor",
            _disk_id(deployed, "precursor"),
            case="precursor",
            controller=False,
        )
        assert kafka_zk.get(path)[0] != original
        anonymous = KazooClient(hosts=sasl_server.connect_string + chroot, timeout=10.0)
        anonymous.start(timeout=15)
        try:
            from kazoo.exceptions import NoAuthError

            with pytest.raises(NoAuthError):  # what the rollback's zookeeper-shell command meets
                anonymous.set(zk.topic_path("precursor"), original)
        finally:
            anonymous.stop()
            anonymous.close()
        code, output = _dags_test({"run_id": "manual__sasl", "dry_run": False})
        assert code == 0, output[-8000:]
        assert kafka_zk.get(path)[0] == original
        assert json.loads((live.folder("undo") / "verify.json").read_text())["ok"]
        assert not kafka_zk.exists(chroot + "/kafka_zk_maintenance")
    as_kafka = KazooClient(hosts=sasl_server.connect_string, timeout=10.0, **sasl)
    as_kafka.start(timeout=15)
    try:  # as Kafka: creator-only inside
        as_kafka.delete(chroot, recursive=True)
    finally:
        as_kafka.stop()
        as_kafka.close()
