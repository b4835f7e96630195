"""The drain plan's own read of ZooKeeper (issue 17), against a real ZooKeeper holding a simulated
cluster: it reads only what the plan needs yet feeds the same model and planner to the same plan
as the full snapshot, and the execute step refuses before any write when the run's safety
snapshot, or ZooKeeper, no longer shows the cluster the plan was read from. Each refusal test
first shows the damage the old per-batch checks would have let through."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import read_snapshot, write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain import DrainRequest
from airflow_provider_kafka_zk.kafka.drain_execution import (
    Action,
    next_step,
    partitions_on,
    plan_from_state,
    read_record,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState, ModelFindingKind
from airflow_provider_kafka_zk.operators.drain import DrainExecuteOperator, DrainPlanOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    PlanReadDisagreementError,
    load_plan,
    plan_batches,
)
from airflow_provider_kafka_zk.operators.drain_zookeeper import observe, planning_read
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "planning-read"
DRAINED = 1
ZK_CONN = "planning_read_zk"


def _spec() -> ClusterSpec:
    """Five brokers on two racks; broker 1 holds RF=1 partitions and RF=3 replicas, "elsewhere" none."""
    return ClusterSpec(
        "planning-read",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}") for b in range(5)),
        topics=(
            TopicSpec("single", 6, 1, assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)}),
            TopicSpec("lonely", 1, 1, assignment={0: (1,)}),
            TopicSpec("replicated", 4, 3),
            TopicSpec("elsewhere", 3, 2, assignment={0: (0, 2), 1: (2, 3), 2: (3, 4)}),
        ),
    )


@pytest.fixture
def live(zookeeper_server, tmp_path, monkeypatch, opt_out_of_approval):
    """A deployed simulated cluster and its connection; yields (client, base). The cluster opts out
    of approval (automation): these tests are about the plan-read checks of real runs, which the
    approval rule would otherwise refuse first."""
    chroot = zookeeper_server.new_chroot("/kafka_planning_read_")
    opt_out_of_approval(CLUSTER, ZK_CONN)
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, tmp_path / "hosts"
    ) as deployed:
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
        client = KazooClient(hosts=deployed.zookeeper_connect)
        client.start(timeout=15)
        try:
            yield client, tmp_path / "artefacts"
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


def _snapshot(base: Path) -> str:
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        walk = hook.snapshot()
        ref, _ = write_snapshot(str(base), CLUSTER, walk, source=hook.target_description())
    return ref.path


def _plan_from_zookeeper(base: Path) -> dict[str, Any]:
    return DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=[DRAINED],
        kafka_zookeeper_conn_id=ZK_CONN,
        inventory_ts="none",
        max_partitions_per_batch=2,
        drain_ts=f"t{time.time_ns()}",
    ).execute({})


def _execute(plan_dir: str, snapshot: str | None, dry_run: bool = False) -> dict[str, Any]:
    return DrainExecuteOperator(
        task_id="execute",
        plan_dir=plan_dir,
        kafka_zookeeper_conn_id=ZK_CONN,
        throttle_bytes_per_sec=1000,
        dry_run=dry_run,
        poll_interval=0.1,
        batch_timeout=30,
        snapshot_path=snapshot,
    ).execute({})


def _add_partition(client: KazooClient, topic: str, replicas: tuple[int, ...]) -> int:
    """What ``kafka-topics --alter --partitions`` leads to: one more partition in the topic znode,
    then (as the controller would) its state znode. Returns the new partition's number."""
    path = zk.topic_path(topic)
    current = zk.TopicAssignment.decode(client.get(path)[0], path)
    number = max(current.partitions) + 1
    grown = dataclasses.replace(current, partitions={**current.partitions, number: replicas})
    client.set(path, grown.encode())
    state = zk.PartitionState(topic, number, replicas[0], 0, 1, replicas)
    client.create(zk.partition_state_path(topic, number), state.encode(), makepath=True)
    return number


def _rf1_on_drained(client: KazooClient) -> set[tuple[str, int]]:
    out = set()
    for topic in client.get_children(zk.BROKER_TOPICS):
        decoded = zk.TopicAssignment.decode(client.get(zk.topic_path(topic))[0], zk.topic_path(topic))
        out |= {(topic, p) for p, r in decoded.partitions.items() if r == (DRAINED,)}
    return out


# ---------------------------------------------------------------------------------------------
# The read
# ---------------------------------------------------------------------------------------------


def test_planning_read_takes_only_what_the_plan_needs_and_plans_as_the_full_snapshot(live, tmp_path):
    _, base = live
    drained = frozenset({DRAINED})
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        read = planning_read(hook, drained, CLUSTER)
        full = ClusterState.from_snapshot(read_snapshot(_snapshot(base))[1], cluster=CLUSTER)
    state = read.state
    assert state.partial_read and not full.partial_read
    assert read.consistent and read.start_zxid <= read.end_zxid

    # far fewer znodes: no configs, no partition containers, only the drained brokers' states
    assert read.znodes < full.znode_count / 2
    on_drained = set(partitions_on(full, drained))
    assert {tp for tp in on_drained if full.partition(*tp).replicas == (DRAINED,)} == {
        ("single", 0),
        ("single", 1),
        ("single", 2),
        ("lonely", 0),
    }
    read_states = {(p.topic, p.partition) for p in state.partitions() if p.state is not None}
    assert read_states == on_drained  # exactly the partitions the drain can move, with their ISR
    for tp in on_drained:
        assert state.partition(*tp).state == full.partition(*tp).state
        assert state.partition(*tp).partition_epoch == full.partition(*tp).partition_epoch
    assert state.partition("elsewhere", 0) is None  # no replica on broker 1: its state not read, nor modelled
    assert not state.configs.topics  # no config znode read
    # not read is not missing: no finding the full model does not have
    kinds = {f.kind for f in state.findings}
    assert ModelFindingKind.MISSING_PARTITION_STATE not in kinds
    assert ModelFindingKind.MISSING_TOPIC_CONFIG not in kinds
    assert len(state.findings) <= len(full.findings)

    # the same identity, brokers, in-flight view as the full tree; the model holds the topics with
    # a replica on the drained broker (all of each), not "elsewhere": read, but left out
    assert state.cluster_id == full.cluster_id and state.cluster_id
    assert state.brokers == full.brokers and state.controller == full.controller
    assert set(state.topics) == {"lonely", "replicated", "single"} == set(full.topics) - {"elsewhere"}
    # each of them cut to its partitions with a replica on the drained broker (the rest cannot
    # move, nor change the in-flight view or the agreement record), as the full tree has them
    assert {n: t.assignment.partitions for n, t in state.topics.items()} == {
        n: {p: r for p, r in full.topics[n].assignment.partitions.items() if DRAINED in r}
        for n in state.topics
    }
    assert all(state.topics[n].czxid == full.topics[n].czxid for n in state.topics)
    assert state.reassign_partitions is None and state.pending_deletions == full.pending_deletions
    planned, whole = read_record(state, drained), read_record(full, drained)
    assert planned["topics"] == {n: v for n, v in whole["topics"].items() if n != "elsewhere"}
    assert planned["drained_topics"] == whole["drained_topics"] == ["lonely", "replicated", "single"]
    assert planned["last_zxid"] <= whole["last_zxid"] and read.znodes > len(state.topics) + 4

    # and the same planner makes the same plan from it, for either scope
    for scope in ("all", "rf1"):
        request = DrainRequest(brokers=drained, scope=scope, max_partitions_per_batch=2)
        from_read = plan_from_state(state, request, sizes={})
        from_full = plan_from_state(full, request, sizes={})
        assert from_read.batches == from_full.batches and from_read.moves
        assert from_read.rack_aware == from_full.rack_aware and from_read.complete

    # scope rf1 reads only the states the rf1 plan looks at (the planner's in_drain_scope rule)
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        rf1 = planning_read(hook, drained, CLUSTER, scope="rf1")
    rf1_states = {(p.topic, p.partition) for p in rf1.state.partitions() if p.state is not None}
    assert rf1_states == {("single", 0), ("single", 1), ("single", 2), ("lonely", 0)}
    assert rf1.record()["topics"] == read.record()["topics"]
    request = DrainRequest(brokers=drained, scope="rf1", max_partitions_per_batch=2)
    assert (
        plan_from_state(rf1.state, request, sizes={}).batches
        == plan_from_state(full, request, sizes={}).batches
    )


def test_plan_operator_from_a_planning_read_records_the_read_and_pins_the_cluster(live):
    client, base = live
    before = _tree(client)
    result = _plan_from_zookeeper(base)
    assert _tree(client) == before  # the planning read wrote nothing
    plan = load_plan(result["plan_dir"])
    assert plan["snapshot"] is None and plan["read"]["source"] == "zookeeper"
    cluster_id = zk.ClusterId.decode(client.get(zk.CLUSTER_ID)[0], zk.CLUSTER_ID).id
    assert plan["identity"]["cluster_id"] == cluster_id == plan["read"]["cluster_id"]
    assert plan["read"]["topics"]["single"] == [
        client.exists(zk.topic_path("single")).czxid,
        client.exists(zk.topic_path("single")).version,
    ]
    assert result["moves"] == 4 and Path(result["rollback"]).exists()


def test_plan_from_a_planning_read_refuses_a_reassignment_in_flight(live):
    client, base = live
    foreign = zk.ReassignPartitions((zk.ReassignmentEntry("replicated", 0, (3, 2, 0)),))
    client.create(zk.REASSIGN_PARTITIONS, foreign.encode())
    with pytest.raises(Exception, match="reassignment in flight") as caught:
        _plan_from_zookeeper(base)
    assert type(caught.value).__name__ == "ReassignmentInFlightError"
    assert not (base / CLUSTER / "drain").exists()


# ---------------------------------------------------------------------------------------------
# The agreement check before the first write
# ---------------------------------------------------------------------------------------------


def test_execute_refuses_a_topic_changed_between_the_plans_read_and_execution(live):
    client, base = live
    result = _plan_from_zookeeper(base)
    # After the plan's read, "single" gains a partition on the drained broker (RF=1).
    added = _add_partition(client, "single", (DRAINED,))
    snapshot = _snapshot(base)  # taken after the change: it agrees with ZooKeeper, not with the plan
    batches = plan_batches(load_plan(result["plan_dir"]))

    # The damage without the check: every batch still matches ZooKeeper, so the per-batch decision
    # submits it, and the run would "complete" with single-<added> still only on the broker that stops.
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        assert next_step(batches, 0, observe(hook, batches[0]), rate=1000).action is Action.SUBMIT
    assert ("single", added) not in {(m.topic, m.partition) for b in batches for m in b}

    before = _tree(client)
    with pytest.raises(PlanReadDisagreementError) as caught:
        _execute(result["plan_dir"], snapshot)
    message = str(caught.value)
    assert "/brokers/topics/single" in message and "rewritten" in message
    assert "the safety snapshot" in message and "ZooKeeper now" in message
    assert _tree(client) == before  # refused before any write: no throttle, no reassign znode
    assert ("single", added) in _rf1_on_drained(client)
    # a dry run says the same (it decides as a real run does)
    with pytest.raises(PlanReadDisagreementError):
        _execute(result["plan_dir"], snapshot, dry_run=True)


def test_execute_refuses_when_the_safety_snapshot_is_not_the_state_the_plan_read(live):
    client, base = live
    snapshot = _snapshot(base)
    # between the snapshot and the plan's read, a topic with an RF=1 partition on broker 1 appears
    client.create(zk.topic_path("late"), zk.TopicAssignment("late", {0: (DRAINED,)}).encode())
    client.create(
        zk.partition_state_path("late", 0),
        zk.PartitionState("late", 0, DRAINED, 0, 1, (DRAINED,)).encode(),
        makepath=True,
    )
    result = _plan_from_zookeeper(base)
    assert result["moves"] == 5  # the plan moves it; the snapshot (the rollback evidence) has no trace of it
    before = _tree(client)
    with pytest.raises(PlanReadDisagreementError) as caught:
        _execute(result["plan_dir"], snapshot)
    message = str(caught.value)
    assert f"the safety snapshot {snapshot} lacks topic znode /brokers/topics/late" in message
    assert "ZooKeeper now" not in message  # ZooKeeper still shows what the plan read
    assert _tree(client) == before


def test_execute_refuses_a_plan_from_a_read_without_a_safety_snapshot(live):
    client, base = live
    result = _plan_from_zookeeper(base)
    before = _tree(client)
    with pytest.raises(PlanReadDisagreementError, match="no safety snapshot"):
        _execute(result["plan_dir"], None)
    assert _tree(client) == before


def test_execute_goes_on_when_only_topics_off_the_drained_brokers_changed(live):
    client, base = live
    result = _plan_from_zookeeper(base)
    _add_partition(client, "elsewhere", (2, 4))  # no replica on broker 1 before or after
    client.create(zk.topic_path("unrelated"), zk.TopicAssignment("unrelated", {0: (0,)}).encode())
    snapshot = _snapshot(base)
    before = _tree(client)
    done = _execute(result["plan_dir"], snapshot, dry_run=True)  # no refusal: the check passed
    assert done["dry_run"] and done["batches"] == 2
    assert _tree(client) == before


def test_planning_read_leaves_out_only_topics_that_plainly_cannot_matter(live, tmp_path):
    """Topics with no replica on the drained broker stay out of the model only when they are
    plainly what Kafka writes: one with a reassignment in flight, or one the model's decoder must
    judge, is kept, so the plan refuses, or lists it as unplanned, exactly as from the full tree."""
    client, base = live
    drained = frozenset({DRAINED})
    odd = zk.topic_path("odd")  # names no broker 1, but is not a topic znode Kafka writes
    client.create(odd, b'{"version":3,"partitions":{"0":["0"]},"adding_replicas":{},"removing_replicas":{}}')
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        read = planning_read(hook, drained, CLUSTER)
    full = ClusterState.from_snapshot(read_snapshot(_snapshot(base))[1], cluster=CLUSTER)
    assert "elsewhere" not in read.state.topics
    request = DrainRequest(brokers=drained, scope="all", max_partitions_per_batch=2)
    from_read, from_full = (
        plan_from_state(read.state, request, sizes={}),
        plan_from_state(full, request, sizes={}),
    )
    assert (
        [t.topic for t in from_read.unplanned_topics]
        == [t.topic for t in from_full.unplanned_topics]
        == ["odd"]
    )
    assert from_read.batches == from_full.batches and from_read.complete == from_full.complete
    client.delete(odd)

    # a reassignment in flight on a topic off the drained broker: kept, and the plan refuses
    path = zk.topic_path("elsewhere")
    current = zk.TopicAssignment.decode(client.get(path)[0], path)
    moving = dataclasses.replace(
        current,
        partitions={**current.partitions, 0: (0, 2, 3)},
        adding_replicas={0: (3,)},
        removing_replicas={},
    )
    client.set(path, moving.encode())
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        read = planning_read(hook, drained, CLUSTER)
    assert "elsewhere" in read.state.topics and read.state.reassigning_partitions
    with pytest.raises(Exception, match="reassignment in flight"):
        _plan_from_zookeeper(base)


def test_scope_topics_keeps_every_topic_that_names_a_drained_broker():
    """The byte test is a superset: any array naming a drained broker (spaced, quoted) is kept."""
    from airflow_provider_kafka_zk.hooks.zookeeper_drain_read import scope_topics
    from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

    def row(name: str, data: bytes) -> tuple[str, ZnodeRow]:
        path = zk.topic_path(name)
        return path, ZnodeRow(path, data, 5, 6, 7, 0, 0, 0, 0, 0, 0, len(data), 1)

    rows = dict(
        [
            row("spaced", b'{"version":1,"partitions":{"0":[ 3 , 1 ]}}'),
            row("quoted", b'{"version":1,"partitions":{"0":["1"]}}'),
            row("far", b'{"version":1,"partitions":{"0":[11,21],"1":[10]}}'),
            row("bad-json", b"{"),
            row("v9", b'{"version":9,"partitions":{"0":[2]}}'),
            row(
                "moving",
                b'{"version":2,"partitions":{"0":[2]},"adding_replicas":{"0":[2]},"removing_replicas":{}}',
            ),
            row("idle", b'{"version":2,"partitions":{"0":[2]},"adding_replicas":{},"removing_replicas":{}}'),
            row(
                "mixed",
                b'{"version":3,"partitions":{"0":[2,1],"1":[2,3]},"topic_id":"sl9WbF3TSKKWnMaJXJgXbQ"}',
            ),
        ]
    )
    kept, wanted, dropped_zxid = scope_topics(rows, frozenset({1}), "all")
    names = {p.rsplit("/", 1)[1] for p in kept}
    assert names == {"spaced", "quoted", "bad-json", "v9", "moving", "mixed"}  # "far", "idle": left out
    assert sorted(wanted) == [("mixed", 0), ("spaced", 0)] and dropped_zxid == 7
    # a plain topic is cut to its partitions on the drained broker; anything unusual goes whole
    assert json.loads(kept[zk.topic_path("mixed")]) == {
        "version": 3,
        "partitions": {"0": [2, 1]},
        "topic_id": "sl9WbF3TSKKWnMaJXJgXbQ",
    }
    assert kept[zk.topic_path("quoted")] == rows[zk.topic_path("quoted")].data
