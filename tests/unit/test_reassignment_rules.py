"""Kafka's reassignment rules: throttles as kafka-reassign-partitions sets them, completion, in-flight."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.kafka import reassignment as r
from airflow_provider_kafka_zk.kafka.safety import LeaseHolder
from airflow_provider_kafka_zk.kafka.znodes import (
    PartitionState,
    ReassignmentEntry,
    ReassignPartitions,
    TopicAssignment,
)


def topic(name, partitions, adding=None, removing=None):
    return TopicAssignment(name, partitions, None, adding or {}, removing or {})


def test_throttles_follow_kafkas_tool():
    topics = {
        "a": topic("a", {0: (1,), 1: (2,), 2: (5, 3), 10: (4,)}, adding={2: (5,)}, removing={2: (3,)}),
        "b": topic("b", {0: (1, 2)}),
    }
    plan = r.plan_throttles({("a", 0): (3,), ("a", 10): (4,), ("b", 0): (1, 3)}, topics, 1_000_000)
    # leader list: sources of moved partitions + origin of the ongoing reassignment of a-2; sorted as strings
    assert plan.leader_replicas == {"a": "0:1,2:3", "b": "0:1,0:2"}
    assert plan.follower_replicas == {"a": "0:3", "b": "0:3"}
    assert plan.broker_rates == (1, 2, 3)  # a-10 does not move: broker 4 is not involved
    assert plan.broker_configs()[3] == {r.LEADER_RATE: "1000000", r.FOLLOWER_RATE: "1000000"}
    assert plan.topic_configs()["a"] == {r.LEADER_REPLICAS: "0:1,2:3", r.FOLLOWER_REPLICAS: "0:3"}


def test_string_sort_like_a_java_treeset():
    topics = {"t": topic("t", {p: (p % 3,) for p in range(12)})}
    plan = r.plan_throttles({("t", p): (3,) for p in (2, 10)}, topics, 10)
    assert plan.leader_replicas["t"] == "10:1,2:2"


def test_rate_must_be_positive():
    with pytest.raises(ValueError):
        r.plan_throttles({}, {}, 0)


def test_clearing_removes_only_what_this_run_set():
    current = {"retention.ms": "1", r.LEADER_REPLICAS: "0:1", r.FOLLOWER_REPLICAS: "0:9"}
    kept, changed = r.config_without_our_values(
        current, {r.LEADER_REPLICAS: "0:1", r.FOLLOWER_REPLICAS: "0:3"}
    )
    assert kept == {"retention.ms": "1", r.FOLLOWER_REPLICAS: "0:9"}
    assert changed == [r.FOLLOWER_REPLICAS]
    assert r.merged_config({"a": "1"}, {"b": "2"}) == {"a": "1", "b": "2"}


def test_in_flight_from_the_znode_and_from_topic_znodes():
    topics = [topic("a", {0: (2, 1)}, adding={0: (2,)}, removing={0: (1,)}), topic("b", {0: (1,)})]
    znode = ReassignPartitions((ReassignmentEntry("c", 3, (1,)),))
    flight = r.reassignments_in_flight(topics, znode)
    assert flight.any
    assert flight.znode_partitions == (("c", 3),) and flight.topic_znode_partitions == (("a", 0),)
    assert "adding/removing" in flight.describe()
    assert not r.reassignments_in_flight([topics[1]], None).any


def state(isr):
    return PartitionState("t", 0, isr[0], 1, 1, tuple(isr))


def test_completion_is_kafkas_end_state():
    done = topic("t", {0: (3,)})
    assert r.partition_complete((3,), done, 0, state([3]), None)
    still_listed = ReassignPartitions((ReassignmentEntry("t", 0, (3,)),))
    assert not r.partition_complete((3,), done, 0, state([3]), still_listed)
    moving = topic("t", {0: (3, 1)}, adding={0: (3,)}, removing={0: (1,)})
    assert not r.partition_complete((3,), moving, 0, state([1, 3]), None)
    assert not r.partition_complete((3,), done, 0, state([3, 1]), None)  # ISR not within target yet


def test_progress_counts_partitions_and_bytes():
    topics = {"t": topic("t", {0: (3,), 1: (1, 3)}, adding={1: (3,)}, removing={1: (1,)})}
    states = {("t", 0): state([3]), ("t", 1): state([1])}
    p = r.progress(
        {("t", 0): (3,), ("t", 1): (3,)}, topics, states, None, sizes={("t", 0): 2**20, ("t", 1): 3 * 2**20}
    )
    assert (len(p.done), p.moving, p.bytes_done, p.bytes_total) == (1, (("t", 1),), 2**20, 4 * 2**20)
    assert "1/2 partitions done" in p.describe() and "t-1" in p.describe()


def test_a_retry_recognises_its_own_znode_by_content():
    targets = {("t", 0): (3,), ("t", 1): (2,)}
    partly_done = ReassignPartitions((ReassignmentEntry("t", 1, (2,)),))
    foreign = ReassignPartitions((ReassignmentEntry("t", 1, (4,)),))
    assert r.same_request(partly_done, targets)
    assert not r.same_request(foreign, targets)
    assert not r.same_request(ReassignPartitions(()), targets)


# ---------------------------------------------------------------------------------------------
# A reassignment in flight: whose it is (issue 26), never "cancel it"
# ---------------------------------------------------------------------------------------------

LEASE = LeaseHolder(
    dag_id="kafka_zk_pre_maintenance_drain",
    run_id="manual__first",
    task_id="execute",
    host="worker-1:42",
    since_ms=1_795_000_000_000,
    expires_ms=1_795_000_900_000,
    cluster_id="c1",
)
FIRST = r.PlannedRun(
    "/a/prod/drain/20261126T100000",
    "manual__first",
    "drain",
    ({("t", 0): (2, 3), ("t", 1): (3, 2)}, {("t", 2): (2,)}),
)


def test_the_run_whose_plan_holds_the_moves_is_named_with_its_lease():
    moving = r.in_flight_targets([], ReassignPartitions((ReassignmentEntry("t", 1, (3, 2)),)))
    advice = r.owner_advice(moving, [FIRST], LEASE)
    assert advice.startswith(
        "It belongs to drain run 'manual__first' (/a/prod/drain/20261126T100000/plan.json lists these moves, "
        "batch 1 of 2); it holds the cluster's maintenance lease. That run is moving data: wait for it"
    )
    assert "Do not cancel its reassignment" in advice and "(or cancel it)" not in advice


def test_a_partition_going_elsewhere_is_not_that_runs_and_the_lease_is_named():
    moving = {("t", 1): (4, 2)}  # same partition, another target: not the plan's move
    assert r.owning_runs(moving, [FIRST]) == []
    advice = r.owner_advice(moving, [FIRST], LEASE, searched="/a/prod")
    assert advice.startswith(
        "The cluster's maintenance lease is held by DAG 'kafka_zk_pre_maintenance_drain' run 'manual__first'"
    )
    assert "no plan under /a/prod lists these moves" in advice and "do not cancel" in advice


def test_no_owner_of_ours_says_someone_else_started_it_and_never_advises_cancelling():
    topic = TopicAssignment("t", {0: (4, 2, 3)}, None, adding_replicas={0: (4,)}, removing_replicas={0: (3,)})
    moving = r.in_flight_targets([topic], None)  # an Admin API reassignment: only the topic znode says so
    assert moving == {("t", 0): (4, 2)}
    advice = r.owner_advice(moving, [FIRST], None, searched="/a/prod")
    assert advice.startswith(
        "No run of this provider owns it (no maintenance lease is held and no plan under"
    )
    assert "cancel" not in advice
    unknown = r.owner_advice(moving, [], None, lease_read=False)
    assert (
        unknown.startswith("Its owner is unknown (the maintenance lease was not read)")
        and "cancel" not in unknown
    )
