"""Post-maintenance's move-back guards (issue 23), one test per way it damaged a cluster, on real parts:
a simulated cluster in a real ZooKeeper, Kafka's controller played by the simulator, the drain and
the post-maintenance operators run in-process as the DAGs run them (a real drain first).

* Move-back never targets a broker that is not registered: the plan leaves such partitions where
  they are, naming the broker; a broker gone between the plan and the execution refuses the whole
  move-back at the preflight, before its first write.
* Move-back recognises the drain's partitions by their topic's incarnation (topic id, znode czxid),
  not by name: a topic deleted and created again with the same layout is not moved as if the drain
  had moved it -- neither at the plan nor (re-created after the plan) at the execution.

Where a rule refuses, the exact state is compared: every znode (data, version) of the chroot and
every file under the broker host roots (:mod:`airflow_provider_kafka_zk.testing.cluster_state`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.hooks.zookeeper_drain import observe
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain_execution import Action, next_step
from airflow_provider_kafka_zk.kafka.post_maintenance import plan_move_back
from airflow_provider_kafka_zk.maintenance import MaintenanceRefusedError
from airflow_provider_kafka_zk.operators.drain import (
    ClearReplicationThrottlesOperator,
    DrainExecuteOperator,
    DrainPlanOperator,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    DrainLocation,
    PlanOutdatedError,
    load_plan,
    plan_batches,
)
from airflow_provider_kafka_zk.operators.post_maintenance import (
    PostMaintenanceError,
    PostMaintenancePlanOperator,
    drained_moves,
)
from airflow_provider_kafka_zk.testing.cluster_state import capture, differences
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController

pytestmark = pytest.mark.integration

CLUSTER = "post-guards"
_numbers = itertools.count()
# RF=1 partitions: single-0/1 on broker 1, single-2/3 on broker 2 (each drain moves its own)
SINGLE = {0: (1,), 1: (1,), 2: (2,), 3: (2,), 4: (0,), 5: (3,)}


def _spec() -> ClusterSpec:
    return ClusterSpec(
        "post-guards",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec("single", 6, 1, assignment=dict(SINGLE), records_per_partition=10),
            TopicSpec("replicated", 2, 3, records_per_partition=5),
        ),
    )


class World:
    """One deployed cluster, its connection, and the operators run in-process."""

    def __init__(self, zookeeper_server: Any, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        number = next(_numbers)
        chroot = zookeeper_server.new_chroot(f"/kafka_post_guards_{number}_")
        self.deployed = DeployedCluster(
            SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, tmp / "hosts"
        )
        self.cluster = self.deployed.cluster
        self.conn_id = f"post_guards_zk_{number}"
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{self.conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
                }
            ),
        )
        self.base = tmp / "artefacts"
        self.client = KazooClient(hosts=zookeeper_server.connect_string)
        self.client.start(timeout=15)

    def close(self) -> None:
        self.client.stop()
        self.client.close()
        self.deployed.close()

    def state(self):
        return capture(self.client, [self.deployed.chroot], [self.deployed.root])

    def assignment(self) -> dict[tuple[str, int], tuple[int, ...]]:
        out = {}
        chroot = self.deployed.chroot
        for topic in self.client.get_children(chroot + zk.BROKER_TOPICS):
            path = zk.topic_path(topic)
            decoded = zk.TopicAssignment.decode(self.client.get(chroot + path)[0], path)
            out.update({(topic, p): r for p, r in decoded.partitions.items()})
        return out

    def snapshot(self) -> str:
        with KafkaZooKeeperHook(self.conn_id) as hook:
            ref, _ = write_snapshot(
                str(self.base), CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        return ref.path

    def run_to_completion(self, operator: DrainExecuteOperator, context: dict[str, Any]) -> dict[str, Any]:
        """Execute, the controller carrying out each deferred batch, until the last batch is done."""
        controller = SimulatedController(self.deployed, partitions_per_step=10)
        try:
            try:
                return operator.execute(context)
            except TaskDeferred as deferred:
                trigger = deferred.trigger
            while True:
                controller.run_until_idle()
                event = _first_event(trigger)
                assert event["status"] == "complete", event
                try:
                    return operator.execute_complete(context, event)
                except TaskDeferred as again:
                    trigger = again.trigger
        finally:
            controller.stop()

    def execute(self, plan_dir: str, *, dry_run: bool = False, run_id: str = "run") -> DrainExecuteOperator:
        return DrainExecuteOperator(
            task_id="execute",
            plan_dir=plan_dir,
            kafka_zookeeper_conn_id=self.conn_id,
            throttle_bytes_per_sec=1_000_000,
            dry_run=dry_run,
            poll_interval=0.1,
            batch_timeout=30,
        )

    def drain(self, brokers: list[int]) -> DrainLocation:
        """A real drain of ``brokers``: plan from a safety snapshot, execute, clear the throttles."""
        result = DrainPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            base_path=str(self.base),
            brokers=brokers,
            snapshot_path=self.snapshot(),
            inventory_ts="none",
            drain_ts=f"drain-{next(_numbers)}",
        ).execute({"run_id": "manual__drain"})
        context = {"run_id": "manual__drain"}
        self.run_to_completion(self.execute(result["plan_dir"]), context)
        ClearReplicationThrottlesOperator(
            task_id="clear", plan_dir=result["plan_dir"], kafka_zookeeper_conn_id=self.conn_id, dry_run=False
        ).execute(context)
        return DrainLocation(result["plan_dir"])

    def plan_back(self, drain: DrainLocation, brokers: list[int], **kw: Any) -> dict[str, Any]:
        """The post-maintenance plan, from a fresh snapshot, as the DAG's plan task."""
        return PostMaintenancePlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            base_path=str(self.base),
            brokers=brokers,
            drain_run=drain.url,
            snapshot_path=self.snapshot(),
            inventory_ts="none",
            run_ts=f"post-{next(_numbers)}",
            **kw,
        ).execute({"run_id": "manual__post"})

    def stop(self, *brokers: int) -> None:
        for b in brokers:
            self.cluster.stop_broker(b, clean=True)
        self.deployed.sync()

    def start(self, *brokers: int) -> None:
        for b in brokers:
            self.cluster.start_broker(b)
        self.deployed.sync()

    def recreate(self, topic: str) -> None:
        """Delete ``topic`` and create it again, same name, same layout, as someone during the window."""
        layout = {p: tuple(m.replicas) for p, m in self.cluster.topic(topic).partitions.items()}
        self.cluster.delete_topic(topic)
        self.deployed.sync()  # the znodes go (a new topic znode, a new czxid, follows)
        assert self.client.exists(self.deployed.chroot + zk.topic_path(topic)) is None
        self.cluster.create_topic(
            TopicSpec(topic, len(layout), 1, assignment=layout, records_per_partition=3)
        )
        self.deployed.sync()


def _first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def _old_decision(world: World, plan_dir: str, topic: str, partition: int) -> Action:
    """What the execute step decided before the preflight, for the batch moving ``topic-partition``:
    :func:`next_step` on what ZooKeeper shows, by assignment alone."""
    batches = plan_batches(load_plan(plan_dir))
    index = next(
        i for i, b in enumerate(batches) if any((m.topic, m.partition) == (topic, partition) for m in b)
    )
    with KafkaZooKeeperHook(world.conn_id) as hook:
        return next_step(batches, index, observe(hook, batches[index]), rate=1_000_000).action


@pytest.fixture
def world(zookeeper_server, tmp_path, monkeypatch, opt_out_of_approval) -> Iterator[World]:
    w = World(zookeeper_server, tmp_path, monkeypatch)
    opt_out_of_approval(CLUSTER, w.conn_id)  # the writers here run behind no approval step
    try:
        yield w
    finally:
        w.close()


def _plan_document(result: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(result["plan_dir"], "plan.json").read_text())


# ---------------------------------------------------------------------------------------------
# 1. Move-back never targets a broker that is not registered
# ---------------------------------------------------------------------------------------------


def test_a_narrowed_move_back_leaves_the_partitions_of_a_broker_still_down_and_names_it(world):
    drain = world.drain([1, 2])
    drained = world.assignment()
    assert all(drained[("single", p)] not in ((1,), (2,)) for p in range(4))
    world.stop(1, 2)
    world.start(1)  # broker 2 is not back: the person narrows the returning brokers to [1]

    # the damage: by the old rule every drained partition still where the drain put it goes back --
    # single-2/3 onto broker 2, which is not registered: the move-back never completes, the run hangs
    # on its batch with the partitions' data reassigned to a dead broker
    moves, _ = drained_moves(drain)
    current = {tp: r for tp, r in world.assignment().items()}
    old = plan_move_back(moves, current)
    assert {(m.topic, m.partition): m.target for m in old.moves} == {
        ("single", 0): (1,),
        ("single", 1): (1,),
        ("single", 2): (2,),
        ("single", 3): (2,),
    }

    result = world.plan_back(drain, [1], max_under_replicated=100)  # RF=3 partitions lack broker 2
    plan = _plan_document(result)
    planned = {(m["topic"], m["partition"]): m["target"] for b in plan["batches"] for m in b}
    assert planned == {("single", 0): [1], ("single", 1): [1]}
    untouched = plan["move_back"]["untouched"]
    assert sorted(u.split(":")[0] for u in untouched) == ["single-2", "single-3"]
    assert all("broker(s) [2] not registered in /brokers/ids (still down?)" in u for u in untouched)
    assert "not registered" in Path(result["plan_dir"], "summary.txt").read_text()

    world.run_to_completion(world.execute(result["plan_dir"]), {"run_id": "manual__post"})
    after = world.assignment()
    assert after[("single", 0)] == (1,) and after[("single", 1)] == (1,)
    assert after[("single", 2)] == drained[("single", 2)] and after[("single", 3)] == drained[("single", 3)]


def test_a_broker_gone_after_the_plan_refuses_the_whole_move_back_before_its_first_write(world):
    drain = world.drain([1, 2])
    world.stop(1, 2)
    world.start(1, 2)
    result = world.plan_back(drain, [1, 2], max_under_replicated=100)
    assert len([m for b in _plan_document(result)["batches"] for m in b]) == 4
    world.stop(2)  # broker 2 goes down again between the plan and the move-back
    # the damage: the old execute decided each batch on the assignment alone (next_step), so it
    # submitted the batch that puts single-2/3 back onto broker 2, which never completes
    assert _old_decision(world, result["plan_dir"], "single", 2) is Action.SUBMIT

    before = world.state()
    for dry_run in (True, False):
        with pytest.raises(MaintenanceRefusedError) as refused:
            world.execute(result["plan_dir"], dry_run=dry_run).execute({"run_id": "manual__post"})
        text = str(refused.value)
        assert "[broker-not-registered]" in text and "broker(s) [2]" in text and "nothing was written" in text
    # nothing at all: broker 1's partitions are not moved either (every step checked before the first
    # write), no throttle, no reassignment, no lease
    assert differences(before, world.state()) == []


# ---------------------------------------------------------------------------------------------
# 2. Move-back identifies the drain's partitions by topic incarnation, not by name
# ---------------------------------------------------------------------------------------------


def test_a_topic_recreated_during_the_window_with_the_same_layout_is_not_moved_back(world):
    drain = world.drain([1])
    recorded = json.loads(Path(drain.url, "plan.json").read_text())["topics"]
    assert set(recorded) == {"single"} and recorded["single"]["czxid"] > 0 and recorded["single"]["topic_id"]
    drained = world.assignment()
    world.stop(1)
    world.recreate("single")  # same name, same layout as the drain left it: a new topic
    world.start(1)
    assert world.assignment() == drained

    # the damage: by name, single-0 and single-1 of the NEW topic are "still where the drain put
    # them" and would be moved onto broker 1 as if the drain had moved them
    moves, _ = drained_moves(drain, identify=False)
    old = plan_move_back(moves, world.assignment())
    assert sorted((m.topic, m.partition) for m in old.moves) == [("single", 0), ("single", 1)]

    result = world.plan_back(drain, [1])
    plan = _plan_document(result)
    assert plan["batches"] == []
    untouched = plan["move_back"]["untouched"]
    assert sorted(u.split(":")[0] for u in untouched) == ["single-0", "single-1"]
    assert all("was deleted and created again since the drain (znode czxid" in u for u in untouched)

    before = world.state()
    assert world.execute(result["plan_dir"]).execute({"run_id": "manual__post"})["partitions"] == 0
    assert differences(before, world.state()) == []  # nothing moved, no lease


def test_a_topic_recreated_after_the_move_back_plan_refuses_before_the_first_write(world):
    drain = world.drain([1])
    world.stop(1)
    world.start(1)
    result = world.plan_back(drain, [1])
    plan = _plan_document(result)
    assert sorted((m["topic"], m["partition"]) for b in plan["batches"] for m in b) == [
        ("single", 0),
        ("single", 1),
    ]
    assert plan["topics"]["single"]["czxid"] > 0  # the move-back pins the topic it planned
    world.recreate("single")  # between the plan and the execution
    # the damage: same name, same layout -- the old execute's decision submits the new topic's move
    assert _old_decision(world, result["plan_dir"], "single", 0) is Action.SUBMIT

    before = world.state()
    with pytest.raises(PlanOutdatedError) as refused:
        world.execute(result["plan_dir"]).execute({"run_id": "manual__post"})
    text = str(refused.value)
    assert "[znode-recreated]" in text and "/brokers/topics/single was deleted and created again" in text
    assert differences(before, world.state()) == []


def test_an_old_drain_plan_without_topic_incarnations_is_identified_from_its_snapshot_or_refused(world):
    drain = world.drain([1])
    world.stop(1)
    world.start(1)
    document = json.loads(Path(drain.url, "plan.json").read_text())
    del document["topics"]  # as a drain made before plans recorded them
    Path(drain.url, "plan.json").write_text(json.dumps(document))
    # its snapshot says which topic it moved: the move-back still recognises it
    result = world.plan_back(drain, [1])
    assert len([m for b in _plan_document(result)["batches"] for m in b]) == 2
    # without the snapshot nothing can tell: the move-back is refused, saying what to do
    document["snapshot"] = str(Path(world.base, "gone-snapshot"))
    Path(drain.url, "plan.json").write_text(json.dumps(document))
    with pytest.raises(
        PostMaintenanceError, match=r"nothing is moved back by name\. Run with move_back=false"
    ) as refused:
        world.plan_back(drain, [1])
    assert "gone-snapshot" in str(refused.value)
    # the gate and the election still run without a move-back
    assert world.plan_back(drain, [1], move_back=False)["moves"] == 0
