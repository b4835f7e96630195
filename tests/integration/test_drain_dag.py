"""The pre-maintenance drain against real parts: a simulated cluster in a real ZooKeeper, its broker
hosts behind a real sshd (127.0.0.1-4), Kafka's controller behaviour played by the simulated
controller in a thread of this process, and the DAG run by ``airflow dags test`` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.reassignment import BROKER_THROTTLE_KEYS, TOPIC_THROTTLE_KEYS
from airflow_provider_kafka_zk.operators.drain import (
    ClearReplicationThrottlesOperator,
    DrainExecuteOperator,
    DrainPlanOperator,
    DrainVerifyOperator,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import IncompletePlanError, ReassignmentInFlightError
from airflow_provider_kafka_zk.sensors.reassignment import ReassignmentSensor
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController

pytestmark = pytest.mark.integration

CLUSTER = "drain-test"
DRAINED = 1
ZK_CONN = "drain_zk"
SSH_CONN = "drain_ssh"


def _spec() -> ClusterSpec:
    """Four brokers, one per sshd address; broker 1 holds three RF=1 partitions and RF=3 replicas."""
    return ClusterSpec(
        "drain",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single",
                6,
                1,
                assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)},
                records_per_partition=40,
            ),
            TopicSpec("lonely", 1, 1, assignment={0: (1,)}, records_per_partition=10),
            TopicSpec("replicated", 2, 3, records_per_partition=10),
        ),
    )


class GatedController:
    """Runs the simulated controller in a thread, stepping only while a reassignment exists.

    Each step rewrites the broker host roots; doing that only while something moves keeps the
    disks still while the DAG inventories them over SSH (as a real cluster's files would be).
    """

    def __init__(self, deployed: DeployedCluster, interval: float = 0.2) -> None:
        self.controller = SimulatedController(deployed, partitions_per_step=10)
        self.deployed = deployed
        self.interval = interval
        self._client = KazooClient(hosts=deployed.zookeeper_connect)
        self._client.start(timeout=15)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self._client.exists(zk.REASSIGN_PARTITIONS) or self.deployed.cluster.reassignment:
                self.controller.step()

    def __enter__(self) -> GatedController:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.controller.stop()
        self._client.stop()
        self._client.close()


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch):
    """A fresh deployed cluster, connections and a cluster file; yields (deployed, client, base)."""
    chroot = zookeeper_server.new_chroot("/kafka_drain_")
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, tmp_path / "hosts"
    ) as deployed:
        base = tmp_path / "artefacts"
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\n'
            f'server_properties_path = "{tmp_path / "hosts" / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            # automation with its own review: the real runs here do not wait for a person (issue 25)
            "require_approval = false\n"
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
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


def _assignment(client: KazooClient) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {}
    for topic in client.get_children(zk.BROKER_TOPICS):
        decoded = zk.TopicAssignment.decode(client.get(zk.topic_path(topic))[0], zk.topic_path(topic))
        out.update({(topic, p): r for p, r in decoded.partitions.items()})
    return out


def _configs(client: KazooClient, entity_type: str) -> dict[str, dict[str, str]]:
    path = f"{zk.CONFIG}/{entity_type}"
    return {
        name: zk.ConfigEntity.decode(client.get(f"{path}/{name}")[0], f"{path}/{name}").config
        for name in client.get_children(path)
    }


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int, int, int]]:
    """Every znode with data, mzxid, version and cversion: any write changes one of them."""
    out = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid, stat.version, stat.cversion)
        pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
    return out


def _dags_test(conf: dict, airflow_home: Path) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run(
        [airflow, "dags", "test", "kafka_zk_pre_maintenance_drain", "-c", json.dumps(conf)],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _normal_dirs(deployed: DeployedCluster, broker: int) -> set[str]:
    return {p.name for d in deployed.hosts[broker].log_dirs for p in d.iterdir() if p.is_dir()}


# ---------------------------------------------------------------------------------------------
# End to end: airflow dags test
# ---------------------------------------------------------------------------------------------


def test_drain_dag_moves_rf1_partitions_off_the_broker_and_rollback_restores(live, airflow_home):
    deployed, client, base = live
    before = _assignment(client)
    notifications_before = len(client.get_children(zk.CONFIG_CHANGES))
    conf = {
        "cluster": CLUSTER,
        "brokers": [DRAINED],
        "dry_run": False,
        "throttle_mb_per_sec": 1,
        "max_partitions_per_batch": 2,
        "poll_interval_s": 0.3,
    }
    with GatedController(deployed):
        run = _dags_test(conf, airflow_home)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "drain batch 2/2: 2/2 partitions done" in output  # the trigger logged progress
    assert "set by someone else" not in output  # batch 2 replacing batch 1's values is ours
    key_file = json.loads(os.environ[f"AIRFLOW_CONN_{SSH_CONN.upper()}"])["extra"]["key_file"]
    assert Path(key_file).read_text().splitlines()[1] not in output  # no secret in any task log

    after = _assignment(client)
    moved = {tp for tp, r in before.items() if r == (DRAINED,)}
    assert moved == {("single", 0), ("single", 1), ("single", 2), ("lonely", 0)}
    for tp in moved:
        assert len(after[tp]) == 1 and after[tp][0] != DRAINED
    assert not [tp for tp, r in after.items() if len(r) == 1 and DRAINED in r]
    assert {tp: r for tp, r in after.items() if tp not in moved} == {
        tp: r for tp, r in before.items() if tp not in moved
    }  # nothing else touched (RF=3 replicas on broker 1 stay: scope rf1)
    # disks: the data directories moved with the replicas
    on_drained = _normal_dirs(deployed, DRAINED)
    for topic, p in moved:
        assert f"{topic}-{p}" not in on_drained
        assert f"{topic}-{p}" in _normal_dirs(deployed, after[(topic, p)][0])
    # throttles this run set are gone again, and each write was announced
    for config in _configs(client, "topics").values():
        assert not set(config) & set(TOPIC_THROTTLE_KEYS)
    for config in _configs(client, "brokers").values():
        assert not set(config) & set(BROKER_THROTTLE_KEYS)
    assert len(client.get_children(zk.CONFIG_CHANGES)) > notifications_before
    assert client.exists(zk.REASSIGN_PARTITIONS) is None

    [drain_dir] = (base / CLUSTER / "drain").iterdir()
    plan = json.loads((drain_dir / "plan.json").read_text())
    assert [len(b) for b in plan["batches"]] == [2, 2]
    # planned from its own read of ZooKeeper, checked against the safety snapshot before the first write
    assert plan["read"]["source"] == "zookeeper" and plan["snapshot"] is None
    assert "agree with the plan's read" in output
    throttles = json.loads((drain_dir / "throttles.json").read_text())
    assert "topics/single" in throttles["entities"] and f"brokers/{DRAINED}" in throttles["entities"]
    verify = json.loads((drain_dir / "verify.json").read_text())
    assert verify["ok"] and verify["disk"]["checked"] and not verify["problems"]
    assert "Verification: OK" in (drain_dir / "report.txt").read_text()

    # the rollback artefact, applied as the tool would (znode without log_dirs), restores the original
    rollback = json.loads((drain_dir / "rollback.json").read_text())
    assert {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in rollback["partitions"]} == {
        tp: before[tp] for tp in moved
    }
    request = zk.ReassignPartitions(
        tuple(
            zk.ReassignmentEntry(e["topic"], e["partition"], tuple(e["replicas"]))
            for e in rollback["partitions"]
        )
    )
    client.create(zk.REASSIGN_PARTITIONS, request.encode())
    controller = SimulatedController(deployed, partitions_per_step=10)
    try:
        controller.run_until_idle()
    finally:
        controller.stop()
    assert _assignment(client) == before


def test_dry_run_writes_nothing_to_zookeeper(live, airflow_home):
    _, client, base = live
    before = _tree(client)
    run = _dags_test({"cluster": CLUSTER, "brokers": [DRAINED]}, airflow_home)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert _tree(client) == before
    [drain_dir] = (base / CLUSTER / "drain").iterdir()
    assert {p.name for p in drain_dir.iterdir()} == {
        "approval.json",  # "not_needed": a dry run waits for nobody (issue 25)
        "plan.json",
        "reassignment.json",
        "rollback.json",
        "summary.txt",
    }
    assert "lonely-0" in output or "4 partition(s) to move" in output


def test_drain_dag_refuses_to_start_while_another_reassignment_is_in_flight(live, airflow_home):
    _, client, base = live
    foreign = zk.ReassignPartitions((zk.ReassignmentEntry("replicated", 0, (3, 2, 0)),))
    client.create(zk.REASSIGN_PARTITIONS, foreign.encode())
    before = _tree(client)
    run = _dags_test({"cluster": CLUSTER, "brokers": [DRAINED], "dry_run": False}, airflow_home)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-6000:]
    assert "ReassignmentInFlightError" in output and "replicated-0" in output
    assert _tree(client) == before  # nothing written: no throttle, no notification, znode untouched
    assert not (base / CLUSTER / "drain").exists()  # refused before planning


# ---------------------------------------------------------------------------------------------
# The operators on their own: refusals, retries, the sensor
# ---------------------------------------------------------------------------------------------


def _plan(
    deployed,
    base,
    max_per_batch: int = 2,
    brokers=(DRAINED,),
    allow_partial: bool = False,
    conn_id: str | None = None,
    context: dict | None = None,
) -> dict:
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        walk = hook.snapshot()
        ref, _ = write_snapshot(str(base), CLUSTER, walk, source=hook.target_description())
    operator = DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=list(brokers),
        snapshot_path=ref.path,
        allow_partial=allow_partial,
        inventory_ts="none",
        max_partitions_per_batch=max_per_batch,
        drain_ts=f"t{time.time_ns()}",
        kafka_zookeeper_conn_id=conn_id,
    )
    return operator.execute(context or {})


def _execute_operator(plan_dir: str) -> DrainExecuteOperator:
    return DrainExecuteOperator(
        task_id="execute",
        plan_dir=plan_dir,
        kafka_zookeeper_conn_id=ZK_CONN,
        throttle_bytes_per_sec=1000,
        dry_run=False,
        poll_interval=0.1,
        batch_timeout=30,
    )


def _first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def test_plan_refuses_partitions_it_cannot_move_unless_allow_partial(live):
    deployed, _, base = live
    deployed.cluster.stop_broker(DRAINED, clean=False)  # its RF=1 data is now offline: unmovable
    deployed.sync()
    with pytest.raises(IncompletePlanError, match="4 partition"):
        _plan(deployed, base, brokers=(DRAINED, 2))
    partial = _plan(deployed, base, brokers=(DRAINED, 2), allow_partial=True)
    assert (partial["moves"], partial["unmovable"], partial["complete"]) == (1, 4, False)
    summary = Path(partial["summary"]).read_text()
    assert "CANNOT MOVE" in summary and "lonely-0" in summary
    rollback = json.loads(Path(partial["rollback"]).read_text())
    assert [(e["topic"], e["partition"], e["replicas"]) for e in rollback["partitions"]] == [
        ("single", 4, [2])
    ]


def test_execute_refuses_while_a_foreign_reassignment_is_in_flight(live):
    deployed, client, base = live
    plan = _plan(deployed, base)
    foreign = zk.ReassignPartitions((zk.ReassignmentEntry("replicated", 0, (3, 2, 0)),))
    client.create(zk.REASSIGN_PARTITIONS, foreign.encode())
    topics_before = _configs(client, "topics")
    with pytest.raises(ReassignmentInFlightError, match=r"/admin/reassign_partitions .*replicated-0"):
        _execute_operator(plan["plan_dir"]).execute({})
    assert client.get(zk.REASSIGN_PARTITIONS)[0] == foreign.encode()  # untouched
    assert _configs(client, "topics") == topics_before  # no throttle was set
    assert not (Path(plan["plan_dir"]) / "throttles.json").exists()
    # ... and the plan itself refuses when its snapshot shows the reassignment
    with pytest.raises(ReassignmentInFlightError, match="refusing to plan"):
        _plan(deployed, base)


def test_a_second_drain_names_the_run_that_owns_the_reassignment_and_never_says_cancel(live):
    """Issue 26: two drains triggered seconds apart; the second refused with "wait for it to finish (or
    cancel it)", naming neither the run that owned the reassignment nor the lease. It now names the
    first run (its plan lists exactly those moves; it holds the maintenance lease) and advises waiting."""
    deployed, client, base = live
    first = _plan(deployed, base, context={"run_id": "manual__first"})
    with pytest.raises(TaskDeferred):  # batch 1 submitted: the first run holds the lease and waits
        _execute_operator(first["plan_dir"]).execute({"run_id": "manual__first"})
    assert client.exists(zk.REASSIGN_PARTITIONS) is not None
    before = _tree(client)
    with pytest.raises(ReassignmentInFlightError) as second:
        _plan(deployed, base, conn_id=ZK_CONN, context={"run_id": "manual__second"})
    message = str(second.value)
    assert "refusing to plan a drain now. It belongs to drain run 'manual__first' (" in message
    assert f"{first['plan_dir']}/plan.json lists these moves, batch 1 of " in message
    assert "it holds the cluster's maintenance lease" in message
    assert "wait for it to finish" in message and "Do not cancel its reassignment" in message
    assert "(or cancel it)" not in message
    assert _tree(client) == before  # the refusal changed nothing
    # a reassignment no run of ours planned (the first's znode replaced by a person's): said so
    client.delete(zk.REASSIGN_PARTITIONS)
    client.create(
        zk.REASSIGN_PARTITIONS,
        zk.ReassignPartitions((zk.ReassignmentEntry("replicated", 0, (3, 2, 0)),)).encode(),
    )
    with pytest.raises(ReassignmentInFlightError, match="No run of this provider owns it") as foreign:
        _execute_operator(first["plan_dir"]).execute({"run_id": "manual__first"})
    assert "cancel" not in str(foreign.value).split("No run of this provider owns it")[1]


def test_execute_refuses_an_api_reassignment_seen_only_in_a_topic_znode(live):
    deployed, client, base = live
    plan = _plan(deployed, base)
    path = zk.topic_path("replicated")
    topic = zk.TopicAssignment.decode(client.get(path)[0], path)
    replicas = topic.partitions[1]
    spare = next(b for b in range(4) if b not in replicas)
    moving = zk.TopicAssignment(
        topic.topic,
        {**topic.partitions, 1: (spare, *replicas)},
        topic.topic_id,
        adding_replicas={1: (spare,)},
        removing_replicas={1: (replicas[-1],)},
    )
    client.set(path, moving.encode())
    with pytest.raises(ReassignmentInFlightError, match="replicated-1"):
        _execute_operator(plan["plan_dir"]).execute({})
    assert client.exists(zk.REASSIGN_PARTITIONS) is None


def test_execute_retry_waits_for_its_own_znode_and_never_submits_twice(live):
    deployed, client, base = live
    plan = _plan(deployed, base)
    plan_dir = plan["plan_dir"]
    with pytest.raises(TaskDeferred) as first:
        _execute_operator(plan_dir).execute({})
    data, stat = client.get(zk.REASSIGN_PARTITIONS)
    assert b"log_dirs" not in data
    # a retry (fresh operator object, as a new try would have) finds its own znode and waits
    with pytest.raises(TaskDeferred) as retry:
        _execute_operator(plan_dir).execute({})
    data_again, stat_again = client.get(zk.REASSIGN_PARTITIONS)
    assert (data_again, stat_again.czxid, stat_again.version) == (data, stat.czxid, stat.version)
    waits = [{**d.value.trigger.serialize()[1], "deadline": None} for d in (first, retry)]
    assert waits[0] == waits[1] and waits[0]["echo"] == {"batch": 0}
    throttled = _configs(client, "topics")["single"]
    assert set(TOPIC_THROTTLE_KEYS) <= set(throttled)

    controller = SimulatedController(deployed, partitions_per_step=10)
    try:
        trigger = retry.value.trigger
        operator = _execute_operator(plan_dir)
        result = None
        while result is None:
            controller.run_until_idle()
            event = _first_event(trigger)
            assert event["status"] == "complete", event
            try:
                result = operator.execute_complete({}, event)
            except TaskDeferred as deferred:
                trigger = deferred.trigger
        assert result["batches"] == 2
        # a retry after everything finished does nothing at all
        tree = _tree(client)
        assert _execute_operator(plan_dir).execute({})["partitions"] == 4
        assert _tree(client) == tree
    finally:
        controller.stop()

    # someone else changes one of our values meanwhile: clearing must leave that one alone
    entity = zk.ConfigEntity.decode(client.get("/config/topics/single")[0], "/config/topics/single")
    client.set(
        "/config/topics/single",
        zk.ConfigEntity("topics", "single", {**entity.config, TOPIC_THROTTLE_KEYS[1]: "*"}).encode(),
    )

    cleared = ClearReplicationThrottlesOperator(
        task_id="clear", plan_dir=plan_dir, kafka_zookeeper_conn_id=ZK_CONN, dry_run=False
    ).execute({})
    assert cleared["cleared"]["topics/single"] == [TOPIC_THROTTLE_KEYS[0]]
    assert cleared["changed_by_others"] == {"topics/single": [TOPIC_THROTTLE_KEYS[1]]}
    topics = _configs(client, "topics")
    assert TOPIC_THROTTLE_KEYS[0] not in topics["single"] and topics["single"][TOPIC_THROTTLE_KEYS[1]] == "*"
    for config in _configs(client, "brokers").values():
        assert not set(config) & set(BROKER_THROTTLE_KEYS)
    verified = DrainVerifyOperator(task_id="verify", plan_dir=plan_dir, kafka_zookeeper_conn_id=ZK_CONN)
    assert verified.execute({})["ok"]
    assert not [
        d
        for d in deployed.cluster.replica_dirs(broker_id=DRAINED, kind=DirKind.NORMAL)
        if d.topic != "replicated"
    ]


def test_clear_refuses_while_the_drain_still_moves(live):
    deployed, client, base = live
    plan = _plan(deployed, base)
    with pytest.raises(TaskDeferred):
        _execute_operator(plan["plan_dir"]).execute({})
    clear = ClearReplicationThrottlesOperator(
        task_id="clear", plan_dir=plan["plan_dir"], kafka_zookeeper_conn_id=ZK_CONN, dry_run=False
    )
    with pytest.raises(Exception, match="still moving"):
        clear.execute({})
    assert set(TOPIC_THROTTLE_KEYS) <= set(_configs(client, "topics")["single"])


def test_sensor_times_out_naming_the_partitions_still_moving(live):
    deployed, client, _ = live
    request = zk.ReassignPartitions(
        (zk.ReassignmentEntry("single", 0, (2,)), zk.ReassignmentEntry("single", 3, (3,)))
    )
    client.create(zk.REASSIGN_PARTITIONS, request.encode())
    sensor = ReassignmentSensor(
        task_id="wait",
        kafka_zookeeper_conn_id=ZK_CONN,
        deferrable=True,
        poke_interval=0.1,
        timeout=0.5,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # targets read from the znode
    event = _first_event(deferred.value.trigger)
    assert event["status"] == "timeout" and event["moving"] == ["single-0", "single-3"]
    with pytest.raises(Exception, match=r"still moving: single-0, single-3"):
        sensor.execute_complete({}, event)
    controller = SimulatedController(deployed, partitions_per_step=10)
    try:
        controller.run_until_idle()
    finally:
        controller.stop()
    done = ReassignmentSensor(
        task_id="wait2",
        kafka_zookeeper_conn_id=ZK_CONN,
        targets=[["single", 0, [2]], ["single", 3, [3]]],
        deferrable=False,
        poke_interval=0.1,
        timeout=5,
    )
    assert done.poke({})
