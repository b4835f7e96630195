"""Putting the cluster back after maintenance, against real parts: a simulated cluster in a real
ZooKeeper, its broker hosts behind a real sshd (127.0.0.1-4), Kafka's controller (reassignments and
preferred-replica elections) and broker restarts played by the simulator's runtime in a thread, and
the DAGs run by ``airflow dags test``.

End to end as the issue asks: drain broker 1 for real, stop and restart it, then
``kafka_zk_post_maintenance`` with the drain's Airflow run id puts the partitions back, leaders are
preferred, throttles gone, and the audit shows no imbalance for broker 1. Then the refusals: an
election already in flight, a partition moved elsewhere since the drain, a failing health gate.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.reassignment import BROKER_THROTTLE_KEYS, TOPIC_THROTTLE_KEYS
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator
from airflow_provider_kafka_zk.operators.post_maintenance import (
    ElectionInFlightError,
    HealthGateError,
    PostMaintenanceError,
    PostMaintenancePlanOperator,
    PostMaintenanceVerifyOperator,
    PreferredLeaderElectionOperator,
)
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime

pytestmark = pytest.mark.integration

CLUSTER = "post-test"
RETURNING = 1
ZK_CONN = "post_zk"
SSH_CONN = "post_ssh"


def _spec() -> ClusterSpec:
    """Four brokers on the sshd's addresses; broker 1 holds three RF=1 partitions and is the preferred
    leader of two RF=3 partitions."""
    return ClusterSpec(
        "post",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single",
                4,
                1,
                assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,)},
                records_per_partition=40,
            ),
            TopicSpec(
                "replicated",
                4,
                3,
                assignment={0: (1, 2, 3), 1: (1, 3, 0), 2: (0, 1, 2), 3: (2, 3, 1)},
                records_per_partition=10,
            ),
        ),
    )


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    """The cluster deployed; the ZooKeeper connection stored in the Airflow metadata DB (``airflow
    connections add``), the SSH one in an env var; a cluster file."""
    chroot = zookeeper_server.new_chroot("/kafka_post_")
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
            # automation with its own review: the real runs here do not wait for a person (issue 25)
            "require_approval = false\n"
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        airflow = str(Path(sys.executable).parent / "airflow")
        subprocess.run(
            [airflow, "connections", "delete", ZK_CONN], capture_output=True, env=os.environ.copy()
        )
        conn = json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
            }
        )
        added = subprocess.run(
            [airflow, "connections", "add", ZK_CONN, "--conn-json", conn],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        assert added.returncode == 0, added.stderr
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        client = KazooClient(hosts=deployed.zookeeper_connect)
        client.start(timeout=15)
        in_process = {
            f"AIRFLOW_CONN_{ZK_CONN.upper()}": conn
        }  # operators run in this process (no API server)
        try:
            yield deployed, client, base, tmp_path, in_process
        finally:
            client.stop()
            client.close()


def _dags_test(dag_id: str, conf: dict) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run(
        [
            airflow,
            "dags",
            "test",
            dag_id,
            "-c",
            json.dumps({"cluster": CLUSTER, "poll_interval_s": 0.3, **conf}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=400,
    )


def _assignment(client: KazooClient) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {}
    for topic in client.get_children(zk.BROKER_TOPICS):
        decoded = zk.TopicAssignment.decode(client.get(zk.topic_path(topic))[0], zk.topic_path(topic))
        out.update({(topic, p): r for p, r in decoded.partitions.items()})
    return out


def _leaders(client: KazooClient) -> dict[tuple[str, int], int]:
    return {
        tp: zk.PartitionState.decode(
            client.get(zk.partition_state_path(*tp))[0], zk.partition_state_path(*tp)
        ).leader
        for tp in _assignment(client)
    }


def _throttles(client: KazooClient) -> list[str]:
    found = []
    for entity_type, keys in (("topics", TOPIC_THROTTLE_KEYS), ("brokers", BROKER_THROTTLE_KEYS)):
        path = f"{zk.CONFIG}/{entity_type}"
        for name in client.get_children(path):
            config = zk.ConfigEntity.decode(client.get(f"{path}/{name}")[0], f"{path}/{name}").config
            found += [f"{entity_type}/{name}: {k}" for k in set(config) & set(keys)]
    return found


def _maintenance(deployed: DeployedCluster) -> None:
    """The maintenance window: broker 1 stops (controlled shutdown) and starts again."""
    deployed.cluster.stop_broker(RETURNING, clean=True)
    deployed.sync()
    deployed.cluster.start_broker(RETURNING)
    deployed.sync()


def test_drain_maintenance_then_post_maintenance_puts_everything_back(live):
    deployed, client, base, tmp_path, _ = live
    before = _assignment(client)
    leaders_before = _leaders(client)
    preferred_of_1 = {tp for tp, r in before.items() if r[0] == RETURNING and len(r) > 1}
    assert preferred_of_1 == {("replicated", 0), ("replicated", 1)}
    assert all(leaders_before[tp] == RETURNING for tp in preferred_of_1)

    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts", reassignments=True):
        drain = _dags_test(
            "kafka_zk_pre_maintenance_drain",
            {"brokers": [RETURNING], "dry_run": False, "throttle_mb_per_sec": 1},
        )
        assert drain.returncode == 0, (drain.stdout + drain.stderr)[-5000:]
    drained = _assignment(client)
    assert not [tp for tp, r in drained.items() if r == (RETURNING,)]
    [drain_dir] = (base / CLUSTER / "drain").iterdir()
    drain_run_id = json.loads((drain_dir / "plan.json").read_text())["run_id"]
    assert drain_run_id

    _maintenance(deployed)
    leaders = _leaders(client)
    assert all(leaders[tp] != RETURNING for tp in preferred_of_1)  # back, but leading nothing

    # a dry run first: the gate passes, the plan says what it would do, nothing is written
    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts", reassignments=True):
        dry = _dags_test("kafka_zk_post_maintenance", {"drain_run": drain_run_id})
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-5000:]
        assert _assignment(client) == drained and _leaders(client) == leaders
        assert "DRY RUN: would create" in dry.stdout + dry.stderr

        run = _dags_test("kafka_zk_post_maintenance", {"drain_run": drain_run_id, "dry_run": False})
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]

    assert _assignment(client) == before  # the partitions are back where they were
    after = _leaders(client)
    assert all(after[tp] == RETURNING for tp in preferred_of_1)  # preferred leaders again
    assert all(after[tp] == r[0] for tp, r in before.items())  # every partition on its preferred leader
    assert _throttles(client) == []
    assert client.exists(zk.PREFERRED_REPLICA_ELECTION) is None
    assert client.exists(zk.REASSIGN_PARTITIONS) is None

    runs = sorted((base / CLUSTER / "post-maintenance").iterdir())
    real = runs[-1]
    plan = json.loads((real / "plan.json").read_text())
    assert plan["restores"] == str(drain_dir) and plan["restores_run_id"] == drain_run_id
    # the drain planned from its own read; its execute step recorded the safety snapshot it checked
    # the plan against, and the gate's under-replicated baseline comes from that snapshot
    checked = json.loads((drain_dir / "safety_snapshot.json").read_text())["snapshot"]
    assert Path(checked, "manifest.json").is_file()
    assert plan["gate"]["baseline_from"] == f"the drain's safety snapshot {checked}"
    assert sorted((m["topic"], m["partition"]) for b in plan["batches"] for m in b) == [
        ("single", 0),
        ("single", 1),
        ("single", 2),
    ]
    rollback = json.loads((real / "rollback.json").read_text())  # the drained placement, to go back to it
    assert {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in rollback["partitions"]} == {
        tp: drained[tp] for tp in [("single", 0), ("single", 1), ("single", 2)]
    }
    election = json.loads((real / "election.json").read_text())
    assert {"replicated-0", "replicated-1"} <= set(election["elected"]) and not election["not_moved"]
    verify = json.loads((real / "verify.json").read_text())
    assert not verify["problems"] and not verify["imbalance"] and not verify["throttles_left"]
    report = (real / "report.txt").read_text()
    assert f"restores drain run {drain_dir}" in report and "verified:" in report


def _in_process(monkeypatch: pytest.MonkeyPatch, conn: dict[str, str]) -> None:
    for name, value in conn.items():
        monkeypatch.setenv(name, value)


def _hook_snapshot(base: Path) -> str:
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        walk = hook.snapshot()
        ref, _ = write_snapshot(str(base), CLUSTER, walk, source=hook.target_description())
        return ref.path


def _plan(base: Path, **kwargs) -> dict:
    snapshot = _hook_snapshot(base)
    return PostMaintenancePlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        snapshot_path=snapshot,
        inventory_ts="none",
        run_ts=f"t{time.time_ns()}",
        **kwargs,
    ).execute({"run_id": "manual__test"})


def test_the_report_says_kafkas_auto_rebalance_already_elected_the_preferred_leaders(live, monkeypatch):
    """Issue 26: on a real 3.3.1 cluster post-maintenance reported "elected: 0" because the controller's
    auto.leader.rebalance.enable had already elected the preferred leaders (controller.log: "Starting
    replica leader election (PREFERRED) for partitions replicated-0,replicated-1 triggered by
    AutoTriggered"). The report now says so, with the controller's settings as its server.properties
    holds them."""
    deployed, _, base, tmp_path, conn = live
    _in_process(monkeypatch, conn)
    _maintenance(deployed)  # broker 1 is back, leading none of the partitions it is preferred for
    plan = _plan(base, brokers=[RETURNING])
    plan_dir = plan["plan_dir"]
    assert plan["electable_now"] == 2
    # the controller's auto-leader-rebalance task runs between the plan and this run's election
    assert deployed.cluster.auto_leader_rebalance() == [("replicated", 0), ("replicated", 1)]
    assert deployed.cluster.controller_log[-1] == (
        "Starting replica leader election (PREFERRED) for partitions replicated-0,replicated-1 triggered by AutoTriggered"
    )
    deployed.sync()
    with ClusterRuntime(deployed, restart_dir=base / "restarts"):
        elected = PreferredLeaderElectionOperator(
            task_id="elect",
            cluster=CLUSTER,
            kafka_zookeeper_conn_id=ZK_CONN,
            brokers=[RETURNING],
            artefact_dir=plan_dir,
            plan_dir=plan_dir,
            dry_run=False,
            timeout=10,
            poll_interval=0.2,
        ).execute({"run_id": "manual__test"})
    assert elected["elected"] == 0 and elected["not_electable"] == 0  # nothing left for this run to do
    snapshot = _hook_snapshot(base)
    for broker_id in range(4):
        BrokerInventoryOperator(
            task_id=f"inventory_{broker_id}",
            broker_id=broker_id,
            cluster=CLUSTER,
            base_path=str(base),
            ssh_conn_id=SSH_CONN,
            kafka_zookeeper_conn_id=ZK_CONN,
            server_properties_path=str(
                tmp_path / "hosts" / "broker-{broker_id}" / "config" / "server.properties"
            ),
            inventory_ts="after",
            connect_timeout=5,
        ).execute({})
    verified = PostMaintenanceVerifyOperator(
        task_id="verify",
        plan_dir=plan_dir,
        base_path=str(base),
        snapshot_path=snapshot,
        inventory_path=str(base / CLUSTER / "inventory" / "after"),
    ).execute({})
    assert verified["elected"] == [] and not verified["problems"]
    assert verified["elected_before_this_run"] == ["replicated-0", "replicated-1"]
    assert verified["elected_before_this_run_by"] == "Kafka's auto leader rebalance"
    report = (Path(plan_dir) / "report.txt").read_text()
    assert (
        "preferred leaders elected: 0, because Kafka's auto leader rebalance already elected 2 (replicated-0, "
        "replicated-1) before this run's election; auto.leader.rebalance.enable=true on controller 0 (its "
        "server.properties): every leader.imbalance.check.interval.seconds=300 s"
    ) in report


def test_election_refuses_while_another_is_in_flight(live, monkeypatch):
    deployed, client, base, _, conn = live
    _in_process(monkeypatch, conn)
    _maintenance(deployed)  # broker 1 leads nothing: an election has work to do
    foreign = zk.PreferredReplicaElection((zk.TopicPartition("replicated", 3),))
    client.create(zk.PREFERRED_REPLICA_ELECTION, foreign.encode())
    _, stat = client.get(zk.PREFERRED_REPLICA_ELECTION)
    leaders = _leaders(client)
    election = PreferredLeaderElectionOperator(
        task_id="elect",
        cluster=CLUSTER,
        kafka_zookeeper_conn_id=ZK_CONN,
        brokers=[RETURNING],
        base_path=str(base),
        artefact_dir=str(base / "election"),
        dry_run=False,
        timeout=5,
        poll_interval=0.2,
    )
    with pytest.raises(ElectionInFlightError, match=r"/admin/preferred_replica_election .*replicated-3"):
        election.execute({"run_id": "manual__test"})
    data, stat_after = client.get(zk.PREFERRED_REPLICA_ELECTION)
    assert (data, stat_after.czxid, stat_after.version) == (foreign.encode(), stat.czxid, stat.version)
    assert _leaders(client) == leaders

    # once the controller processed it, the same operator elects broker 1's partitions
    client.delete(zk.PREFERRED_REPLICA_ELECTION)
    with ClusterRuntime(deployed, restart_dir=base / "restarts"):
        result = election.execute({"run_id": "manual__test"})
    assert result["elected"] == 2 and result["not_moved"] == 0
    assert _leaders(client)[("replicated", 0)] == RETURNING
    # a retry finds nothing left to do and writes nothing
    tree_before = client.get(zk.partition_state_path("replicated", 0))[1].version
    again = election.execute({"run_id": "manual__test"})
    assert (
        again["elected"] == 2
        and client.get(zk.partition_state_path("replicated", 0))[1].version == tree_before
    )


def test_election_reports_partitions_it_cannot_move_and_why(live, monkeypatch):
    deployed, _, base, _, conn = live
    _in_process(monkeypatch, conn)
    _maintenance(deployed)
    # broker 1 falls out of replicated-1's ISR: the election cannot make it leader there
    part = deployed.cluster.topics["replicated"].partitions[1]
    deployed.cluster._bump_state(part, leader=part.leader, isr=[b for b in part.isr if b != RETURNING])
    deployed.sync()
    with ClusterRuntime(deployed, restart_dir=base / "restarts"):
        result = PreferredLeaderElectionOperator(
            task_id="elect",
            cluster=CLUSTER,
            kafka_zookeeper_conn_id=ZK_CONN,
            brokers=[RETURNING],
            artefact_dir=str(base / "election"),
            dry_run=False,
            timeout=10,
            poll_interval=0.2,
        ).execute({"run_id": "manual__test"})
    assert result["elected"] == 1 and result["not_electable"] == 1
    record = json.loads((base / "election" / "election.json").read_text())
    assert record["elected"] == ["replicated-0"]
    assert record["requested"] == [["replicated", 0]]  # never asked for what cannot move
    assert any("replicated-1" in n and "not in the ISR" in n for n in record["not_electable"])


def test_move_back_leaves_a_partition_moved_elsewhere_since_the_drain(live, monkeypatch):
    deployed, client, base, tmp_path, conn = live
    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts", reassignments=True):
        drain = _dags_test(
            "kafka_zk_pre_maintenance_drain",
            {"brokers": [RETURNING], "dry_run": False, "throttle_mb_per_sec": 1},
        )
        assert drain.returncode == 0, (drain.stdout + drain.stderr)[-5000:]
    [drain_dir] = (base / CLUSTER / "drain").iterdir()
    drained = _assignment(client)
    # someone moves single-0 again after the drain
    elsewhere = next(b for b in (0, 2, 3) if (b,) != drained[("single", 0)])
    deployed.cluster.start_reassignment({("single", 0): (elsewhere,)})
    while deployed.cluster.reassignment:
        deployed.cluster.catch_up_reassignment("single", 0)
        deployed.cluster.complete_reassignment("single", 0)
    deployed.sync()
    _maintenance(deployed)

    _in_process(monkeypatch, conn)
    plan = _plan(base, drain_run=drain_dir.name)
    document = json.loads((Path(plan["plan_dir"]) / "plan.json").read_text())
    moved = [(m["topic"], m["partition"]) for b in document["batches"] for m in b]
    assert moved == [("single", 1), ("single", 2)]
    [untouched] = document["move_back"]["untouched"]
    assert untouched.startswith("single-0: moved since the drain") and f"[{elsewhere}]" in untouched
    summary = (Path(plan["plan_dir"]) / "summary.txt").read_text()
    assert "left alone" in summary and "single-0" in summary


def test_health_gate_refuses_while_the_broker_is_down_and_writes_nothing(live, monkeypatch):
    deployed, client, base, _, conn = live
    _in_process(monkeypatch, conn)
    deployed.cluster.stop_broker(RETURNING, clean=True)  # never came back
    deployed.sync()
    tree = {p: client.get(p)[1].mzxid for p in ("/brokers/topics/single", "/brokers/topics/replicated")}
    with pytest.raises(HealthGateError, match=r"broker\(s\) \[1\] not registered.*without a live leader"):
        _plan(base, brokers=[RETURNING])
    assert {p: client.get(p)[1].mzxid for p in tree} == tree
    assert client.exists(zk.PREFERRED_REPLICA_ELECTION) is None
    [run] = (base / CLUSTER / "post-maintenance").iterdir()
    summary = (run / "summary.txt").read_text()
    assert "health gate: FAILED" in summary and "single-0" in summary


def test_flags_and_numbers_refuse_before_any_io(live):
    for kwargs, message in (
        ({"move_back": "yes please"}, "move_back"),
        ({"max_under_replicated": "-3"}, "max_under_replicated"),
        ({"brokers": ["one"]}, "brokers"),
    ):
        with pytest.raises(Exception, match=message):
            PostMaintenancePlanOperator(
                task_id="plan", cluster=CLUSTER, base_path="/nonexistent/never", **kwargs
            ).execute({"run_id": "manual__test"})
    for kwargs, message in (({"dry_run": "maybe"}, "dry_run"), ({"timeout": "soon"}, "timeout")):
        with pytest.raises(Exception, match=message):
            PreferredLeaderElectionOperator(
                task_id="elect",
                cluster=CLUSTER,
                kafka_zookeeper_conn_id="no_such_connection",
                artefact_dir="/nonexistent/never",
                **kwargs,
            ).execute({"run_id": "manual__test"})


def test_deferrable_election_waits_in_the_trigger_and_resumes(live, monkeypatch):
    deployed, client, base, _, conn = live
    _in_process(monkeypatch, conn)
    _maintenance(deployed)

    def operator() -> PreferredLeaderElectionOperator:
        return PreferredLeaderElectionOperator(
            task_id="elect",
            cluster=CLUSTER,
            kafka_zookeeper_conn_id=ZK_CONN,
            brokers=[RETURNING],
            artefact_dir=str(base / "deferred"),
            dry_run=False,
            poll_interval=0.2,
            timeout=0.5,
            max_partitions_per_batch=1,
            deferrable=True,
        )

    with pytest.raises(TaskDeferred) as deferred:
        operator().execute({"run_id": "manual__test"})
    data, stat = client.get(zk.PREFERRED_REPLICA_ELECTION)
    assert zk.PreferredReplicaElection.decode(data).partitions == (("replicated", 0),)  # batch 1 of 2
    # no controller processes it: the trigger gives up at the deadline and the znode stays
    timeout = _first_event(deferred.value.trigger)
    assert timeout["status"] == "timeout" and "/controller" in timeout["message"]
    with pytest.raises(PostMaintenanceError, match="stays for the controller"):
        operator().execute_complete({"run_id": "manual__test"}, timeout)
    assert client.get(zk.PREFERRED_REPLICA_ELECTION)[1].czxid == stat.czxid
    # a retry while it is still there waits for it again rather than asking twice
    with pytest.raises(TaskDeferred) as again:
        operator().execute({"run_id": "manual__test"})
    assert again.value.trigger.serialize()[1]["czxid"] == stat.czxid
    with ClusterRuntime(deployed, restart_dir=base / "restarts"):
        trigger = again.value.trigger
        result = None
        while result is None:
            event = _first_event(trigger)
            if event["status"] == "timeout":
                continue  # the runtime thread has not stepped yet
            assert event["status"] == "complete", event
            try:
                result = operator().execute_complete({"run_id": "manual__test"}, event)
            except TaskDeferred as next_batch:
                trigger = next_batch.trigger
    assert result["elected"] == 2
    record = json.loads((base / "deferred" / "election.json").read_text())
    assert record["batches"] == [[["replicated", 0]], [["replicated", 1]]]


def _first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())
