"""One approval rule for every real write, bound to the cluster written to (issue 31, points 1 and 2),
on real parts: simulated clusters in a real ZooKeeper, their broker hosts behind a real sshd, a team's
own DAG run by ``airflow dags test``, and a person approving over the REST API of a real
``airflow api-server``.

The cluster file: ``prod`` (a drain's RF=1 partitions on broker 1, leaders to re-elect after its
restart) and ``prod-logs`` (a deleted topic's leftover directories) require approval (the default);
``lab`` opts out (``require_approval = false``).

* A team's own DAG with ``DrainExecuteOperator(dry_run=False)`` and
  ``PreferredLeaderElectionOperator(cluster="prod", dry_run=False)`` and no approval step: before,
  ``/admin/reassign_partitions``, the throttles and ``/admin/preferred_replica_election`` were
  written (the approval was checked only when an approval step was found upstream); now both tasks
  refuse before any I/O on the cluster, saying how to add the approval step, and nothing changes.
* The same DAG with the approval step the refusal names: the run waits, a person approves the shown
  plan, both writers go ahead.
* ``TopicDeletionVerifyOperator(cluster="lab", kafka_zookeeper_conn_id=<prod-logs' connection>,
  cleanup=True, dry_run=False)``: before, prod-logs' partition directories went into quarantine (the
  rule followed the label ``lab``); now it refuses, naming both entries, and nothing changes.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.maintenance.approval import ClusterEntryMismatchError
from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator
from airflow_provider_kafka_zk.testing.airflow_production import DagsTestRun, LocalApiServer
from airflow_provider_kafka_zk.testing.cluster_state import State, capture, differences
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

DRAINED = 1
LOG_HOSTS = {0: "127.0.0.2", 1: "127.0.0.3", 2: "127.0.0.4"}
SSH_CONN = "rule_ssh"
CONNS = {"prod": "rule_prod_zk", "prod-logs": "rule_prod_logs_zk", "lab": "rule_lab_zk"}
DAY_MS = 86_400_000
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def _prod_spec() -> ClusterSpec:
    """Four brokers; broker 1 holds four RF=1 partitions and RF=3 replicas it is preferred for."""
    return ClusterSpec(
        "prod",
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
            TopicSpec("replicated", 4, 3, records_per_partition=10),
        ),
        seed=31,
    )


def _logs_cluster() -> SimulatedCluster:
    """``events`` live; ``old-logs`` deleted, its partition directory left on broker 2 (stopped)."""
    spec = ClusterSpec(
        "prod-logs",
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in LOG_HOSTS.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=30),
            TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
        ),
        seed=32,
    )
    cluster = SimulatedCluster(spec)
    topic_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs("old-logs", 2, [0], kind=DirKind.NORMAL, age_ms=3 * DAY_MS, topic_id=topic_id)
    cluster.stop_broker(2, clean=True)
    return cluster


def _lab_spec() -> ClusterSpec:
    return ClusterSpec(
        "lab",
        brokers=tuple(BrokerSpec(b, host=f"127.0.0.{b + 1}") for b in range(3)),
        topics=(TopicSpec("lab-events", 2, 2, records_per_partition=5),),
        seed=33,
    )


@dataclass
class World:
    clusters: dict[str, DeployedCluster]
    client: KazooClient
    base: Path
    clusters_file: Path
    env: dict[str, str]

    def state(self, *names: str) -> State:
        chosen = [self.clusters[n] for n in names]
        return capture(self.client, [d.chroot for d in chosen], [d.root for d in chosen])


def _zk_conn(server, chroot: str) -> str:
    return json.dumps(
        {
            "conn_type": "kafkazookeeper",
            "host": server.connect_string,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
        }
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory) -> Iterator[SshServer]:
    with SshServer(tuple(LOG_HOSTS.values()), work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def world(zookeeper_server, sshd, tmp_path_factory, airflow_home) -> Iterator[World]:
    work = tmp_path_factory.mktemp("rule")
    opened: dict[str, DeployedCluster] = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, cluster in (
            ("prod", SimulatedCluster(_prod_spec())),
            ("prod-logs", _logs_cluster()),
            ("lab", SimulatedCluster(_lab_spec())),
        ):
            chroot = zookeeper_server.new_chroot(f"/kafka_rule_{name.replace('-', '_')}_")
            opened[name] = DeployedCluster(
                cluster, zookeeper_server.connect_string, chroot, work / f"hosts-{name}"
            )
            patch.setenv(f"AIRFLOW_CONN_{CONNS[name].upper()}", _zk_conn(zookeeper_server, chroot))
        patch.setenv(
            f"AIRFLOW_CONN_{SSH_CONN.upper()}",
            json.dumps(sshd.airflow_connection_fields("127.0.0.2", conn_timeout=5)),
        )
        # prod's maintenance window: broker 1 stopped (controlled shutdown) and started again, so it
        # leads none of the partitions it is preferred for: an election has work to do
        prod = opened["prod"]
        prod.cluster.stop_broker(DRAINED, clean=True)
        prod.sync()
        prod.cluster.start_broker(DRAINED)
        prod.sync()
        clusters_file = work / "clusters.toml"
        clusters_file.write_text(
            f'[clusters.prod]\nkafka_zookeeper_conn_id = "{CONNS["prod"]}"\n'  # require_approval: the default
            f'[clusters.prod-logs]\nkafka_zookeeper_conn_id = "{CONNS["prod-logs"]}"\n'
            f'[clusters.lab]\nkafka_zookeeper_conn_id = "{CONNS["lab"]}"\nrequire_approval = false\n'
        )
        patch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters_file))
        client = KazooClient(hosts=zookeeper_server.connect_string)
        client.start(timeout=15)
        try:
            yield World(opened, client, work / "artefacts", clusters_file, os.environ.copy())
        finally:
            client.stop()
            client.close()
            for deployed in opened.values():
                deployed.close()


@pytest.fixture(scope="module")
def api(world) -> Iterator[LocalApiServer]:
    with LocalApiServer(world.env, users={"admin": "admin"}) as server:
        yield server


# ---------------------------------------------------------------------------------------------
# A team's own DAG
# ---------------------------------------------------------------------------------------------

TEAM_DAG = textwrap.dedent(
    '''
    """A platform team's own drain: the provider's operators in a DAG of theirs."""
    import json
    import os

    from airflow.sdk import DAG

    from airflow_provider_kafka_zk.operators.approval import PlanApprovalOperator
    from airflow_provider_kafka_zk.operators.drain import DrainExecuteOperator, DrainPlanOperator
    from airflow_provider_kafka_zk.operators.post_maintenance import PreferredLeaderElectionOperator

    cfg = json.loads(os.environ["KAFKA_ZK_TEAM_DAG"])
    PLAN_DIR = "{{ ti.xcom_pull(task_ids='plan')['plan_dir'] }}"

    with DAG(cfg["dag_id"], schedule=None, catchup=False) as dag:
        plan = DrainPlanOperator(
            task_id="plan",
            cluster="prod",
            base_path=cfg["base"],
            brokers=[1],
            snapshot_path=cfg["snapshot"],
            inventory_ts="none",
        )
        execute = DrainExecuteOperator(
            task_id="execute",
            plan_dir=PLAN_DIR,
            kafka_zookeeper_conn_id=cfg["conn"],
            throttle_bytes_per_sec=1048576,
            dry_run=False,
            poll_interval=0.3,
            batch_timeout=cfg["timeout"],
        )
        elect = PreferredLeaderElectionOperator(
            task_id="elect",
            cluster="prod",
            kafka_zookeeper_conn_id=cfg["conn"],
            base_path=cfg["base"],
            brokers=[1],
            dry_run=False,
            deferrable=False,
            poll_interval=0.3,
            timeout=cfg["timeout"],
        )
        if cfg["approval"]:
            # what the refusal says to add: the approval step between the plan and the writers
            approve = PlanApprovalOperator(task_id="approve", plan_dir=PLAN_DIR, cluster="prod", dry_run=False)
            plan >> approve >> [execute, elect]
        else:
            plan >> [execute, elect]
    '''
)


class TeamRun(DagsTestRun):
    """``airflow dags test`` of the team's DAG (a DAG folder of its own) in the background."""

    def __init__(self, world: World, tmp_path: Path, *, approval: bool, timeout: float) -> None:
        dags = tmp_path / "dags"
        dags.mkdir()
        (dags / "team_drain.py").write_text(TEAM_DAG)
        with KafkaZooKeeperHook(CONNS["prod"]) as hook:
            ref, _ = write_snapshot(
                str(world.base), "prod", hook.snapshot(), source=hook.target_description()
            )
        self.dag_id = f"team_drain_{uuid.uuid4().hex[:8]}"
        env = {
            **world.env,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "KAFKA_ZK_TEAM_DAG": json.dumps(
                {
                    "dag_id": self.dag_id,
                    "base": str(world.base),
                    "snapshot": ref.path,
                    "conn": CONNS["prod"],
                    "timeout": timeout,
                    "approval": approval,
                }
            ),
        }
        super().__init__(self.dag_id, None, tmp_path / "run.log", env)


def _partitions_on(client: KazooClient, chroot: str, broker: int) -> set[tuple[str, int]]:
    out = set()
    for topic in ("single", "lonely"):
        path = chroot + zk.topic_path(topic)
        assignment = zk.TopicAssignment.decode(client.get(path)[0], zk.topic_path(topic))
        out |= {(topic, p) for p, replicas in assignment.partitions.items() if list(replicas) == [broker]}
    return out


def test_a_teams_own_dag_without_an_approval_step_writes_nothing_to_a_cluster_that_requires_approval(
    world, tmp_path
):
    prod = world.clusters["prod"]
    before = world.state("prod")
    run = TeamRun(world, tmp_path, approval=False, timeout=5)
    code, output = run.wait()
    after = world.state("prod")
    # before issue 31: /admin/reassign_partitions and the throttles (execute), and
    # /admin/preferred_replica_election (elect) were written; the run then timed out waiting for a
    # controller. Now: both writing tasks refuse before any I/O on the cluster.
    assert after == before, "the team's DAG changed prod:\n  " + "\n  ".join(differences(before, after))
    assert code != 0, output[-6000:]
    assert output.count("ApprovalRequiredError") >= 2, output[-6000:]
    for task in ("execute", "elect"):
        assert f"{task}: a real write to ZooKeeper" in output, output[-6000:]
    assert "needs a person's approval of this run's plan" in output
    assert "PlanApprovalOperator(task_id=" in output and "require_approval = false" in output
    assert "nothing was read from or written to the cluster" in output
    assert world.client.exists(prod.chroot + zk.REASSIGN_PARTITIONS) is None
    assert world.client.exists(prod.chroot + zk.PREFERRED_REPLICA_ELECTION) is None


def test_the_same_dag_with_the_approval_step_waits_for_a_person_then_both_writers_go_ahead(
    world, api, tmp_path
):
    prod = world.clusters["prod"]
    on_drained = _partitions_on(world.client, prod.chroot, DRAINED)
    assert len(on_drained) == 4
    before = world.state("prod")
    run = TeamRun(world, tmp_path, approval=True, timeout=120)
    request = api.wait_for_approval_request(run.dag_id, timeout=300, alive=run.alive)
    assert world.state("prod") == before  # waiting: nothing written
    body = request["body"]
    assert "- task `execute` settings:" in body and "- task `elect` settings:" in body  # both writers covered
    assert [u["id"] for u in request["assigned_users"]] == []  # prod names no approvers: any user
    with ClusterRuntime(prod, restart_dir=tmp_path / "restarts", reassignments=True):
        api.respond(run.dag_id, request["task_instance"]["dag_run_id"], "approve", "Approve", "CHG-31")
        code, output = run.wait()
    assert code == 0, output[-6000:]
    assert output.count("carrying out the approved plan sha256") >= 2, output[-6000:]
    assert not _partitions_on(world.client, prod.chroot, DRAINED) & on_drained  # moved off broker 1
    election = [
        json.loads(p.read_text()) for p in (world.base / "prod" / "leader-election").glob("*/election.json")
    ]
    assert election and any(e.get("elected") for e in election), election


# ---------------------------------------------------------------------------------------------
# The rule follows the connection, not the label
# ---------------------------------------------------------------------------------------------


def test_a_cleanup_labelled_lab_with_prods_connection_moves_nothing(world, tmp_path, deletion_clock):
    deletion_clock(2 * DAY_MS)
    logs = world.clusters["prod-logs"]
    leftovers = sorted(
        str(p) for d in logs.hosts[2].log_dirs for p in Path(d).iterdir() if p.name.startswith("old-logs-")
    )
    assert len(leftovers) == 1
    before = world.state("prod-logs", "lab")
    operator = TopicDeletionVerifyOperator(
        task_id="verify",
        cluster="lab",  # require_approval = false ...
        kafka_zookeeper_conn_id=CONNS["prod-logs"],  # ... but this is prod-logs' connection
        ssh_conn_id=SSH_CONN,
        base_path=str(tmp_path / "artefacts"),
        broker_hosts=LOG_HOSTS,
        server_properties_path=str(logs.root / "broker-{broker_id}" / "config" / "server.properties"),
        topics=["old-logs"],
        cleanup=True,
        dry_run=False,
        deferrable=False,
        wait_timeout=0,
        connect_timeout=3,
    )
    # before issue 31 the cleanup followed the label: lab needs no approval, so prod-logs' leftover
    # directory was moved into quarantine and /config/topics/old-logs deleted
    with pytest.raises(ClusterEntryMismatchError) as refused:
        operator.execute({"ts_nodash": "20260102T030405"})
    message = str(refused.value)
    assert "cluster 'lab' names the entry lab" in message and "which is prod-logs" in message, message
    assert logs.chroot in message and world.clusters["lab"].chroot in message
    after = world.state("prod-logs", "lab")
    assert after == before, "\n  ".join(differences(before, after))
    assert (
        sorted(
            str(p)
            for d in logs.hosts[2].log_dirs
            for p in Path(d).iterdir()
            if p.name.startswith("old-logs-")
        )
        == leftovers
    )
    assert not (tmp_path / "artefacts").exists()  # refused before any verdict was read
