"""The topicId repair's pure core: diagnosis of each case, the plan per strategy, and the gates."""

from __future__ import annotations

import base64
import json

import pytest

from airflow_provider_kafka_zk.kafka.model import ClusterState, PartitionInfo
from airflow_provider_kafka_zk.kafka.topic_id_repair import (
    RepairPlanError,
    Strategy,
    TopicIdCase,
    diagnose,
    offline_for_stopped_brokers,
    plan_repair,
    remaining_steps,
    restart_gate,
    topic_znode_with_id,
    topics_healthy,
)
from airflow_provider_kafka_zk.kafka.znodes import PartitionState, TopicAssignment
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows
from airflow_provider_kafka_zk.testing.simulator.scenarios import incident_cluster


@pytest.fixture(scope="module")
def incident():
    cluster = incident_cluster()
    rows = cluster_rows(cluster)
    state = ClusterState.from_snapshot(rows, cluster="demo")
    znodes = {
        r.path.rsplit("/", 1)[1]: (r.data, r.version)
        for r in rows
        if r.path.count("/") == 3 and r.path.startswith("/brokers/topics/")
    }
    return cluster, state, audit_dirs(cluster), znodes


def _all_brokers(cluster):
    return set(cluster.brokers)


def test_diagnosis_names_each_case_of_the_incident_cluster(incident):
    cluster, state, dirs, _ = incident
    by_topic = {d.topic: d for d in diagnose(state, dirs, _all_brokers(cluster))}
    clickstream = by_topic["clickstream"]
    assert clickstream.case is TopicIdCase.DIVERGED
    original = str(cluster.topic("clickstream").controller_topic_id)
    # the replicas' id is the one the topic had before the failover minted a new one
    assert clickstream.disk_id != clickstream.zookeeper_id
    assert clickstream.zookeeper_id == str(cluster.topic("clickstream").zk_topic_id)
    assert list(clickstream.ids_on_disk) == [clickstream.disk_id]
    assert original == clickstream.zookeeper_id  # the controller now holds ZooKeeper's new id
    precursor = by_topic["inventory-updates"]
    assert precursor.case is TopicIdCase.PRECURSOR and precursor.zookeeper_id is None
    assert precursor.disk_id == str(cluster.topic("inventory-updates").controller_topic_id)
    assert by_topic["orders"].case is TopicIdCase.CONSISTENT


def test_a_broker_not_inventoried_makes_its_topics_unknown(incident):
    cluster, state, dirs, _ = incident
    holder = cluster.topic("clickstream").partitions[0].replicas[0]
    covered = _all_brokers(cluster) - {holder}
    (d,) = diagnose(state, [x for x in dirs if x.broker_id != holder], covered, ["clickstream"])
    assert d.case is TopicIdCase.UNKNOWN
    assert d.uncovered_brokers == (holder,)
    assert "refusing" in d.reason


def test_split_replicas_are_diagnosed_and_auto_resets_only_the_odd_ones(incident):
    cluster, state, dirs, znodes = incident
    zk_id = str(state.topics["clickstream"].topic_id)
    odd_broker = cluster.topic("clickstream").partitions[0].replicas[0]
    from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

    split_dirs = [
        d.__class__(**{**d.__dict__, "topic_id": KafkaUuid.parse(zk_id)})
        if d.topic == "clickstream" and d.broker_id == odd_broker
        else d
        for d in dirs
    ]
    (d,) = diagnose(state, split_dirs, _all_brokers(cluster), ["clickstream"])
    assert d.case is TopicIdCase.SPLIT
    plan = plan_repair(
        [d],
        znodes,
        strategy=Strategy.AUTO,
        controller_id=state.controller_id,
        live_brokers=state.live_broker_ids,
    )
    resets = [s for s in plan.steps if s["kind"] == "reset_files"]
    touched = {f["broker_id"] for s in resets for f in s["files"]}
    # every replica that disagrees with ZooKeeper is reset; the odd broker already agrees
    assert odd_broker not in touched
    assert all(f["topic_id_on_disk"] != zk_id for s in resets for f in s["files"])
    assert all(f["name"] == "partition.metadata" for s in resets for f in s["files"])
    assert not [s for s in plan.steps if s["kind"] == "write_topic_id"]
    # write_back cannot make a split topic agree
    refused = plan_repair([d], znodes, strategy=Strategy.WRITE_BACK, live_brokers=state.live_broker_ids)
    assert not refused.steps and "clickstream" in refused.refused


def test_write_back_plan_keeps_the_assignment_and_moves_the_controller_only_when_needed(incident):
    cluster, state, dirs, znodes = incident
    diagnoses = diagnose(state, dirs, _all_brokers(cluster), ["clickstream", "inventory-updates"])
    plan = plan_repair(
        diagnoses, znodes, controller_id=state.controller_id, live_brokers=state.live_broker_ids
    )
    kinds = [s["kind"] for s in plan.steps]
    assert kinds == ["write_topic_id", "write_topic_id", "move_controller", "wait_healthy"]
    move = plan.steps[2]
    assert move["topics"] == ["clickstream"]  # the precursor needs no controller move
    for step in plan.steps[:2]:
        old = TopicAssignment.decode(base64.b64decode(step["old_data_b64"]), step["path"])
        new = TopicAssignment.decode(base64.b64decode(step["new_data_b64"]), step["path"])
        assert str(new.topic_id) == step["topic_id"] == plan.topics[step["topic"]]["disk_id"]
        assert new.partitions == old.partitions and new.version == 3
        assert step["expected_version"] == znodes[step["topic"]][1]
    json.dumps(plan.to_dict())  # the plan is an artefact


def test_the_znode_is_encoded_as_a_3x_controller_writes_it():
    v1 = b'{"version":1,"partitions":{"0":[1,2],"1":[2,0]}}'
    out = topic_znode_with_id(v1, "/brokers/topics/t", "AAAAAAAAAAAAAAAAAAAAAg")
    expected = TopicAssignment("t", {0: [1, 2], 1: [2, 0]}, None).encode_v3()
    # same bytes as TopicZNode.encode with the id (key order of Kafka's Scala map) apart from the id
    assert json.loads(out) == {**json.loads(expected), "topic_id": "AAAAAAAAAAAAAAAAAAAAAg"}
    assert out.startswith(b"{") and b'"adding_replicas":{}' in out


def test_file_reset_with_a_chosen_id_writes_it_first_and_refuses_an_id_no_replica_holds(incident):
    cluster, state, dirs, znodes = incident
    (d,) = diagnose(state, dirs, _all_brokers(cluster), ["clickstream"])
    plan = plan_repair(
        [d],
        znodes,
        strategy="file_reset",
        chosen_id=d.disk_id,
        controller_id=state.controller_id,
        live_brokers=state.live_broker_ids,
    )
    assert [s["kind"] for s in plan.steps] == ["write_topic_id", "move_controller", "wait_healthy"]
    other = plan_repair(
        [d],
        znodes,
        strategy="file_reset",
        chosen_id="AAAAAAAAAAAAAAAAAAAAAg",
        live_brokers=state.live_broker_ids,
    )
    assert "clickstream" in other.refused and not other.steps
    with pytest.raises(RepairPlanError):
        plan_repair([d], znodes, strategy="rewrite")


def test_file_reset_restarts_the_controller_last_and_refuses_stopped_brokers(incident):
    cluster, state, dirs, znodes = incident
    (d,) = diagnose(state, dirs, _all_brokers(cluster), ["clickstream"])
    holders = sorted({r.broker_id for r in d.replicas})
    live = set(holders)
    controller = holders[0]
    plan = plan_repair(
        [d],
        znodes,
        strategy="file_reset",
        reset_leader_epoch_checkpoint=True,
        controller_id=controller,
        live_brokers=live,
    )
    restarts = [s["broker_id"] for s in plan.steps if s["kind"] == "restart_broker"]
    assert restarts[-1] == controller and sorted(restarts) == holders
    names = {f["name"] for s in plan.steps if s["kind"] == "reset_files" for f in s["files"]}
    assert names == {"partition.metadata", "leader-epoch-checkpoint"}
    stopped = plan_repair(
        [d], znodes, strategy="file_reset", controller_id=controller, live_brokers=live - {holders[1]}
    )
    assert not stopped.steps and "not running" in stopped.refused["clickstream"]


def test_remaining_steps_continue_after_the_last_completed():
    steps = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    assert [s["id"] for s in remaining_steps(steps, {"a": {}})] == ["b", "c"]
    assert remaining_steps(steps, ["a", "b", "c"]) == []


def _partition(
    topic: str,
    p: int,
    replicas: tuple[int, ...],
    leader: int,
    isr: tuple[int, ...],
    target: tuple[int, ...] = (),
) -> PartitionInfo:
    """A partition as the model has it; ``target``: a reassignment to these replicas is running."""
    target = target or replicas
    adding = tuple(b for b in target if b not in replicas)
    removing = tuple(b for b in replicas if b not in target)
    state = PartitionState(topic, p, leader, 1, 1, isr)
    return PartitionInfo(topic, p, target + removing, target, replicas, adding, removing, state, 1)


def test_gates():
    parts = {
        ("t", 0): _partition("t", 0, (1, 2, 3), 1, (1, 2)),
        ("t", 1): _partition("t", 1, (2, 3), 2, (2, 3)),
        ("u", 0): _partition("u", 0, (3,), -1, (3,)),
    }
    assert topics_healthy(parts, ["t"], {1, 2, 3}) == ["t-0: brokers [3] not in the ISR [1, 2]"]
    assert topics_healthy(parts, ["t"], {1, 2}) == []  # a stopped broker's replica is not waited for
    assert topics_healthy(parts, ["u"], {1, 2, 3}) == ["u-0 has no leader"]
    assert topics_healthy(parts, ["u"], {1, 2}) == []  # its only replica is stopped: not waited for
    assert offline_for_stopped_brokers(parts, ["t", "u"], {1, 2}) == ["u-0 (replicas [3] all stopped)"]
    # broker 3 restarted: new epoch, but not back in t-0's ISR, and URP above the baseline
    waiting = restart_gate(3, 100, {1: 1, 2: 2, 3: 200}, parts, baseline_urp=0)
    assert any("not back in the ISR of t-0" in w for w in waiting)
    assert any("under-replicated" in w for w in waiting)
    assert restart_gate(3, 100, {1: 1, 2: 2, 3: 100}, parts, 5) == [
        "broker 3 still has its old registration (epoch 100): not restarted yet"
    ]
    assert restart_gate(3, 100, {1: 1}, parts, 5) == ["broker 3 is not registered in /brokers/ids"]
    healed = {**parts, ("t", 0): _partition("t", 0, (1, 2, 3), 1, (1, 2, 3))}
    assert restart_gate(3, 100, {1: 1, 2: 2, 3: 200}, healed, baseline_urp=0) == []


def test_restart_gate_counts_under_replication_as_the_audit_does():
    """One URP rule (the model's, Kafka's replicationFactor = replicas - removing): a replica being
    removed by a running reassignment and already out of the ISR is not under-replication, so a
    move running during the repair does not hold a restart's gate forever."""
    moving = {("t", 0): _partition("t", 0, (1, 2, 4), 1, (1, 2), target=(1, 2))}
    assert moving[("t", 0)].replicas == (1, 2, 4)
    assert restart_gate(2, 100, {1: 1, 2: 200, 4: 4}, moving, baseline_urp=0) == []
