"""The topicId repair's pure core: diagnosis of each case, the plan per strategy, and the gates."""

from __future__ import annotations

import base64
import dataclasses
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


def _partitions(state):
    return {(p.topic, p.partition): p for p in state.partitions()}


def _steps(plan):
    """The plan's steps as plan.json holds them."""
    return plan.to_dict()["steps"]


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
        dataclasses.replace(d, topic_id=KafkaUuid.parse(zk_id))
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
        partitions=_partitions(state),
    )
    resets = [s for s in _steps(plan) if s["kind"] == "reset_files"]
    touched = {f["broker_id"] for s in resets for f in s["files"]}
    # every replica that disagrees with ZooKeeper is reset; the odd broker already agrees
    assert odd_broker not in touched
    assert all(f["topic_id_on_disk"] != zk_id for s in resets for f in s["files"])
    assert all(f["name"] == "partition.metadata" for s in resets for f in s["files"])
    assert not [s for s in _steps(plan) if s["kind"] == "write_topic_id"]
    # write_back cannot make a split topic agree
    refused = plan_repair([d], znodes, strategy=Strategy.WRITE_BACK, live_brokers=state.live_broker_ids)
    assert not refused.steps and "clickstream" in refused.refused


def test_write_back_plan_keeps_the_assignment_and_moves_the_controller_only_when_needed(incident):
    cluster, state, dirs, znodes = incident
    diagnoses = diagnose(state, dirs, _all_brokers(cluster), ["clickstream", "inventory-updates"])
    plan = plan_repair(
        diagnoses, znodes, controller_id=state.controller_id, live_brokers=state.live_broker_ids
    )
    kinds = [s["kind"] for s in _steps(plan)]
    assert kinds == ["write_topic_id", "write_topic_id", "move_controller", "wait_healthy"]
    move = _steps(plan)[2]
    assert move["topics"] == ["clickstream"]  # the precursor needs no controller move
    for step in _steps(plan)[:2]:
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
    assert [s["kind"] for s in _steps(plan)] == ["write_topic_id", "move_controller", "wait_healthy"]
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


def _rolling(controller: int = 2):
    from airflow_provider_kafka_zk.testing.simulator.scenarios import rolling_reset_cluster

    cluster = rolling_reset_cluster(controller=controller)
    rows = cluster_rows(cluster)
    state = ClusterState.from_snapshot(rows)
    znodes = {
        r.path.rsplit("/", 1)[1]: (r.data, r.version)
        for r in rows
        if r.path.count("/") == 3 and r.path.startswith("/brokers/topics/")
    }
    return cluster, state, audit_dirs(cluster), znodes


def test_file_reset_restarts_the_controller_last_and_refuses_stopped_brokers():
    cluster, state, dirs, znodes = _rolling(controller=2)
    diagnoses = diagnose(state, dirs, _all_brokers(cluster), ["split", "solo"])
    plan = plan_repair(
        diagnoses,
        znodes,
        reset_leader_epoch_checkpoint=True,
        controller_id=2,
        live_brokers=state.live_broker_ids,
        partitions=_partitions(state),
    )
    assert plan.refused == {}
    restarts = [s["broker_id"] for s in _steps(plan) if s["kind"] == "restart_broker"]
    assert restarts == [0, 2]  # the followers holding the former id; the controller (2) last
    names = {f["name"] for s in _steps(plan) if s["kind"] == "reset_files" for f in s["files"]}
    assert names == {"partition.metadata", "leader-epoch-checkpoint"}
    stopped = plan_repair(
        diagnoses,
        znodes,
        controller_id=2,
        live_brokers=state.live_broker_ids - {2},
        partitions=_partitions(state),
    )
    assert "not running" in stopped.refused["split"]
    assert [s["kind"] for s in _steps(stopped)] == ["write_topic_id", "wait_healthy"]  # solo alone


def test_auto_resets_a_split_topic_to_the_id_its_leaders_hold():
    """Only followers lose their file: no restart of the run moves the topic's leadership onto a
    replica that would reject the controller's id (ControlledShutdownPartitionLeaderElection, 3.3.1)."""
    cluster, state, dirs, znodes = _rolling(controller=1)
    (split,) = diagnose(state, dirs, _all_brokers(cluster), ["split"])
    assert split.case is TopicIdCase.SPLIT
    leaders = {info.leader for (t, _), info in _partitions(state).items() if t == "split"}
    assert leaders == {1, 3}
    plan = plan_repair(
        diagnose(state, dirs, _all_brokers(cluster), ["split", "solo"]),
        znodes,
        controller_id=1,
        live_brokers=state.live_broker_ids,
        partitions=_partitions(state),
    )
    assert plan.topics["split"]["target_id"] == split.zookeeper_id  # what brokers 1 and 3 hold
    reset_brokers = {f["broker_id"] for s in _steps(plan) if s["kind"] == "reset_files" for f in s["files"]}
    assert reset_brokers == {0, 2}
    # writing solo's id and restarting brokers: the controller moves first, so what it sends is known
    assert [s["kind"] for s in _steps(plan)][:3] == ["write_topic_id", "move_controller", "wait_healthy"]


def test_a_restart_that_leaves_another_topics_rf1_partitions_leaderless_is_refused_naming_them():
    cluster, state, dirs, znodes = _rolling(controller=1)
    every = diagnose(state, dirs, _all_brokers(cluster))
    plan = plan_repair(
        [d for d in every if d.topic == "split"],
        znodes,
        controller_id=1,
        live_brokers=state.live_broker_ids,
        others=[d for d in every if d.topic != "split"],
        partitions=_partitions(state),
    )
    assert not plan.steps
    why = plan.refused["split"]
    assert "[restart-replicas-not-served]" in why and "[restart-partitions-leaderless]" in why
    assert "solo-0 (broker 0 is its only in-sync replica" in why and "solo-1" in why
    # the damage it prevents, played by the simulator (Kafka 3.3.1's controller and brokers)
    assert cluster.unserved_partitions() == []
    cluster.restart_broker(0)
    assert cluster.unserved_partitions() == [("solo", 0), ("solo", 1)]
    assert cluster.topic("solo").partitions[0].leader == 0  # ZooKeeper still names broker 0 leader


def test_a_restart_of_a_broker_with_an_unreadable_partition_metadata_is_refused():
    cluster, state, dirs, znodes = _rolling(controller=1)
    victim = next(d for d in cluster.replica_dirs("healthy", 0))  # another topic's replica on broker 0
    cluster.damage_partition_metadata(0, "healthy", victim.partition)
    dirs = audit_dirs(cluster)
    bad = next(
        d for d in dirs if d.broker_id == 0 and d.topic == "healthy" and d.partition == victim.partition
    )
    every = diagnose(state, dirs, _all_brokers(cluster))
    assert {d.topic: d.case for d in every}["healthy"] is TopicIdCase.UNKNOWN
    plan = plan_repair(
        [d for d in every if d.topic in ("split", "solo")],
        znodes,
        controller_id=1,
        live_brokers=state.live_broker_ids,
        others=[d for d in every if d.topic not in ("split", "solo")],
        partitions=_partitions(state),
    )
    why = plan.refused["split"]
    assert f"healthy-{victim.partition} (its partition.metadata is unreadable" in why
    assert f"Kafka takes log dir {bad.log_dir} offline" in why
    neighbours = [d for d in dirs if d.broker_id == 0 and d.log_dir == bad.log_dir and d is not bad]
    assert neighbours and all(
        f"{d.topic}-{d.partition} (log dir {bad.log_dir} goes offline" in why for d in neighbours
    )
    # the damage it prevents: the broker's next start takes that log dir offline
    cluster.restart_broker(0)
    assert (victim.topic, victim.partition) not in [
        (t, p) for t, p in cluster.unserved_partitions() if t != "healthy"
    ]
    assert all(
        d.offline for d in cluster.replica_dirs(broker_id=0) if d.log_dir_index == victim.log_dir_index
    )
    assert ("solo", 0) in cluster.unserved_partitions() or ("solo", 1) in cluster.unserved_partitions()


def test_remaining_steps_continue_after_the_last_completed():
    from airflow_provider_kafka_zk.kafka.steps import HealthWait

    steps = [HealthWait(id="a"), HealthWait(id="b"), HealthWait(id="c")]
    assert [s.id for s in remaining_steps(steps, {"a": {}})] == ["b", "c"]
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
    was_leaderless = {("u", 0)}  # u-0 had no leader before the run: not this restart's doing
    assert restart_gate(3, 100, {1: 1, 2: 2, 3: 100}, parts, 5, was_leaderless) == [
        "broker 3 still has its old registration (epoch 100): not restarted yet"
    ]
    assert restart_gate(3, 100, {1: 1, 2: 2}, parts, 5, was_leaderless) == [
        "broker 3 is not registered in /brokers/ids"
    ]
    healed = {**parts, ("t", 0): _partition("t", 0, (1, 2, 3), 1, (1, 2, 3))}
    assert restart_gate(3, 100, {1: 1, 2: 2, 3: 200}, healed, 0, was_leaderless) == []
    # a partition that lost its leader during the run holds the gate, whatever the ISR and URP say
    assert restart_gate(3, 100, {1: 1, 2: 2, 3: 200}, healed, baseline_urp=0) == [
        "partitions without a leader (they had one before the run): u-0"
    ]
    dead_leader = {**healed, ("t", 1): _partition("t", 1, (2, 3), 2, (2, 3))}
    assert "t-1" in restart_gate(3, 100, {1: 1, 3: 200}, dead_leader, 5, was_leaderless)[-1]


def test_restart_gate_counts_under_replication_as_the_audit_does():
    """One URP rule (the model's, Kafka's replicationFactor = replicas - removing): a replica being
    removed by a running reassignment and already out of the ISR is not under-replication, so a
    move running during the repair does not hold a restart's gate forever."""
    moving = {("t", 0): _partition("t", 0, (1, 2, 4), 1, (1, 2), target=(1, 2))}
    assert moving[("t", 0)].replicas == (1, 2, 4)
    assert restart_gate(2, 100, {1: 1, 2: 200, 4: 4}, moving, baseline_urp=0) == []
