"""The drain planner: only drained replicas move, in place, balanced, and nothing is dropped silently."""

from __future__ import annotations

import json
import random

import pytest

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain import (
    BrokerInfo,
    DrainRequest,
    UnreadableTopic,
    plan_drain,
    unreadable_topics,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow


def brokers(n, racks=None, down=()):
    return {
        b: BrokerInfo(b, rack=None if racks is None else f"r{b % racks}", live=b not in down)
        for b in range(n)
    }


def test_rf1_scope_moves_only_rf1_replicas_of_the_drained_broker():
    assignment = {("a", 0): (1,), ("a", 1): (2,), ("b", 0): (1, 2), ("c", 0): (3,)}
    plan = plan_drain(assignment, brokers(4), DrainRequest(frozenset({1})))
    assert [(m.topic, m.partition) for m in plan.moves] == [("a", 0)]
    (move,) = plan.moves
    assert move.target[0] not in (1,) and len(move.target) == 1
    assert plan.complete


def test_all_scope_replaces_the_drained_replica_in_its_position():
    assignment = {("t", p): (p % 4, 1, (p + 2) % 4) for p in range(4) if 1 not in (p % 4, (p + 2) % 4)}
    plan = plan_drain(assignment, brokers(5), DrainRequest(frozenset({1}), scope="all"))
    for move in plan.moves:
        assert move.current[0] == move.target[0] and move.current[2] == move.target[2]
        assert move.target[1] not in (1, *move.current)
        assert len(set(move.target)) == 3


def test_never_two_replicas_on_one_broker_and_too_few_brokers_is_reported():
    assignment = {("t", 0): (0, 1, 2)}
    plan = plan_drain(assignment, brokers(3), DrainRequest(frozenset({1}), scope="all"))
    assert plan.moves == ()
    assert plan.unsatisfiable[0].reason.startswith("too few brokers")
    assert not plan.complete


def test_racks_stay_distinct_or_the_partition_is_reported():
    info = {
        0: BrokerInfo(0, "a"),
        1: BrokerInfo(1, "b"),
        2: BrokerInfo(2, "c"),
        3: BrokerInfo(3, "a"),
        4: BrokerInfo(4, "b"),
    }
    ok = plan_drain({("t", 0): (0, 1)}, info, DrainRequest(frozenset({1}), scope="all"))
    assert info[ok.moves[0].target[1]].rack in ("b", "c")  # not rack a, which broker 0 already has
    assert ok.moves[0].target[1] in (2, 4)
    info_two_racks = {0: BrokerInfo(0, "a"), 1: BrokerInfo(1, "b"), 2: BrokerInfo(2, "a")}
    bad = plan_drain({("t", 0): (0, 1)}, info_two_racks, DrainRequest(frozenset({1}), scope="all"))
    assert bad.unsatisfiable[0].reason.startswith("too few racks")
    relaxed = plan_drain(
        {("t", 0): (0, 1)}, info_two_racks, DrainRequest(frozenset({1}), scope="all", rack_aware=False)
    )
    assert relaxed.moves[0].target == (0, 2)


def test_a_partition_whose_only_replica_is_on_a_dead_broker_is_unmovable():
    assignment = {("t", 0): (1,), ("t", 1): (1,)}
    plan = plan_drain(assignment, brokers(3, down=(1,)), DrainRequest(frozenset({1})))
    assert plan.moves == ()
    assert [u.partition for u in plan.unmovable] == [0, 1]
    assert "no live in-sync replica" in plan.unmovable[0].reason
    assert "CANNOT MOVE" in plan.summary()


def test_data_copied_from_a_live_isr_member_when_the_drained_broker_is_down():
    plan = plan_drain(
        {("t", 0): (1, 2)},
        brokers(4, down=(1,)),
        DrainRequest(frozenset({1}), scope="all"),
        isr={("t", 0): (2,)},
    )
    assert plan.moves[0].target[1] == 2 and plan.moves[0].target[0] in (0, 3)


def test_excluded_topics_are_listed_not_dropped():
    plan = plan_drain(
        {("skip", 0): (1,), ("go", 0): (1,)},
        brokers(3),
        DrainRequest(frozenset({1}), excluded_topics=frozenset({"skip"})),
    )
    assert [m.topic for m in plan.moves] == ["go"]
    assert [u.topic for u in plan.excluded] == ["skip"]


def test_balance_of_bytes_and_counts():
    rng = random.Random(3)
    assignment = {("t", p): (0,) for p in range(600)}
    sizes = {tp: int(rng.lognormvariate(15, 1.5)) for tp in assignment}
    plan = plan_drain(assignment, brokers(7), DrainRequest(frozenset({0})), sizes=sizes)
    assert plan.balance_ratio is not None and plan.balance_ratio <= 1.10
    counts = [c for b, c in plan.added_partitions.items() if b != 0]
    assert max(counts) - min(counts) <= 2
    assert sum(plan.added_bytes.values()) == sum(sizes.values())


def test_batches_respect_partition_and_byte_limits():
    assignment = {("t", p): (0,) for p in range(10)}
    sizes = {("t", p): 100 for p in range(10)}
    sizes[("t", 9)] = 10_000  # larger than a batch: goes alone
    plan = plan_drain(
        assignment,
        brokers(3),
        DrainRequest(frozenset({0}), max_partitions_per_batch=4, max_bytes_per_batch=300),
        sizes=sizes,
    )
    assert all(len(b) <= 4 for b in plan.batches)
    assert all(sum(m.size_bytes for m in b) <= 300 or len(b) == 1 for b in plan.batches)
    assert sorted(m.partition for b in plan.batches for m in b) == list(range(10))


def test_json_outputs_are_kafkas_formats_and_rollback_restores():
    assignment = {("t", 0): (1,), ("t", 1): (2,)}
    plan = plan_drain(assignment, brokers(3), DrainRequest(frozenset({1})))
    tool = plan.reassignment_json()
    assert tool["version"] == 1
    assert tool["partitions"][0]["log_dirs"] == ["any"]
    rollback = plan.rollback_json()
    assert rollback["partitions"] == [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]
    # the znode form (what a ZooKeeper-mode execution writes) drops log_dirs: Kafka 2.0+ is strict
    entries = tuple(
        zk.ReassignmentEntry(e["topic"], e["partition"], tuple(e["replicas"])) for e in tool["partitions"]
    )
    zk.ReassignPartitions.decode(zk.ReassignPartitions(entries).encode())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"brokers": frozenset()},
        {"brokers": frozenset({1}), "scope": "some"},
        {"brokers": frozenset({1}), "max_partitions_per_batch": 0},
    ],
)
def test_bad_requests_are_refused(kwargs):
    with pytest.raises(ValueError):
        DrainRequest(**kwargs)


def test_unknown_broker_is_refused():
    with pytest.raises(ValueError, match="not in the cluster"):
        plan_drain({("t", 0): (0,)}, brokers(2), DrainRequest(frozenset({9})))


def test_summary_lists_destinations_even_without_sizes():
    plan = plan_drain({("t", 0): (1,)}, brokers(3), DrainRequest(frozenset({1})))
    text = plan.summary()
    assert "destinations: 1 broker(s); no sizes known" in text and "+1 partitions" in text
    empty = plan_drain({("t", 0): (0,)}, brokers(3), DrainRequest(frozenset({1})))
    assert "destinations: none" in empty.summary()


# ---------------------------------------------------------------------------------------------
# Topic znodes the model cannot take, and rack awareness as applied
# ---------------------------------------------------------------------------------------------


def _row(path: str, data: bytes | None) -> ZnodeRow:
    return ZnodeRow(path, data, 1, 1, 1, 0, 0, 0, 0, 0, 0, len(data or b""), 0)


def _topic_json(partitions: dict[int, list[int]]) -> bytes:
    return json.dumps({"version": 3, "partitions": {str(p): r for p, r in partitions.items()}}).encode()


def test_invalid_and_undecodable_topic_znodes_are_unplanned_and_make_the_plan_incomplete():
    state = ClusterState.from_snapshot(
        [
            _row("/brokers/topics/good", _topic_json({0: [1]})),
            _row("/brokers/topics/a b", _topic_json({0: [1], 1: [2], 2: [1, 2]})),
            _row("/brokers/topics/broken", b'{"version": 3, "partitions": '),
        ]
    )
    unreadable = unreadable_topics(state.findings)
    assert [(t.topic, t.reason) for t in unreadable] == [
        ("a b", "invalid_topic_name"),
        ("broken", "undecodable_topic_znode"),
    ]
    assert unreadable[0].assignment == {0: (1,), 1: (2,), 2: (1, 2)}
    assert unreadable[1].assignment is None and unreadable[1].message  # the decoder's message

    plan = plan_drain(
        {("good", 0): (1,)}, brokers(3), DrainRequest(frozenset({1})), unreadable_topics=unreadable
    )
    assert [m.topic for m in plan.moves] == ["good"]
    by_name = {t.topic: t for t in plan.unplanned_topics}
    assert by_name["a b"].touches_drained is True and by_name["a b"].partitions == (0,)  # rf1 scope
    assert by_name["broken"].touches_drained is None and by_name["broken"].partitions is None
    assert all(t.blocks_completion for t in plan.unplanned_topics)
    assert not plan.complete
    summary = plan.summary()
    assert "NOT PLANNED" in summary and "'a b': invalid_topic_name" in summary
    assert "'broken': undecodable_topic_znode" in summary and "does not decode" in summary


def test_an_unreadable_topic_away_from_the_drained_brokers_does_not_block():
    unreadable = (UnreadableTopic("a b", "invalid_topic_name", "bad name", {0: (2,), 1: (0, 1)}),)
    plan = plan_drain(
        {("t", 0): (1,)}, brokers(3), DrainRequest(frozenset({1})), unreadable_topics=unreadable
    )
    (topic,) = plan.unplanned_topics
    assert topic.touches_drained is True and topic.partitions == ()  # RF=2 on broker 1: not in rf1 scope
    assert plan.complete
    in_all_scope = plan_drain(
        {("t", 0): (1,)}, brokers(3), DrainRequest(frozenset({1}), scope="all"), unreadable_topics=unreadable
    )
    assert in_all_scope.unplanned_topics[0].partitions == (1,) and not in_all_scope.complete
    excluded = plan_drain(
        {("t", 0): (1,)},
        brokers(3),
        DrainRequest(frozenset({1}), scope="all", excluded_topics=frozenset({"a b"})),
        unreadable_topics=unreadable,
    )
    assert excluded.unplanned_topics[0].excluded and excluded.complete


def test_rack_awareness_is_reported_off_with_the_reason_when_a_destination_has_no_rack():
    info = {
        0: BrokerInfo(0, "a"),
        1: BrokerInfo(1, "b"),
        2: BrokerInfo(2, "c"),
        4: BrokerInfo(4, None),
        5: BrokerInfo(5, None),
    }
    plan = plan_drain({("t", 0): (0, 1)}, info, DrainRequest(frozenset({1}), scope="all"))
    assert plan.request.rack_aware and not plan.rack_aware
    assert plan.rack_aware_reason == "brokers 4, 5 have no rack: placement is not rack-aware"
    assert "rack-aware placement: NO (requested, but off): brokers 4, 5 have no rack" in plan.summary()
    one = plan_drain(
        {("t", 0): (0, 1)}, {**info, 5: BrokerInfo(5, "a")}, DrainRequest(frozenset({1}), scope="all")
    )
    assert one.rack_aware_reason == "broker 4 has no rack: placement is not rack-aware"
    not_asked = plan_drain(
        {("t", 0): (0, 1)}, info, DrainRequest(frozenset({1}), scope="all", rack_aware=False)
    )
    assert not not_asked.rack_aware and not_asked.rack_aware_reason == "rack awareness not requested"
    no_racks = plan_drain({("t", 0): (1,)}, brokers(3), DrainRequest(frozenset({1})))
    assert not no_racks.rack_aware
    assert (
        no_racks.rack_aware_reason == "none of the 3 involved brokers has a rack: placement is not rack-aware"
    )


def test_rack_awareness_is_reported_on_when_every_involved_broker_has_a_rack():
    info = {b: BrokerInfo(b, f"r{b % 3}") for b in range(6)}
    info[9] = BrokerInfo(9, None, live=False)  # down, holds nothing of the drain: not involved
    plan = plan_drain({("t", 0): (0, 1), ("u", 0): (9, 2)}, info, DrainRequest(frozenset({1}), scope="all"))
    assert plan.rack_aware and plan.rack_aware_reason == "all 6 involved broker(s) have a rack"
    assert "rack-aware placement: yes" in plan.summary()
    assert info[plan.moves[0].target[1]].rack != info[0].rack
    # a replica that stays, on a broker that is down (no registration: no rack), is involved
    down = plan_drain({("t", 0): (9, 1)}, info, DrainRequest(frozenset({1}), scope="all"))
    assert (
        not down.rack_aware
        and "broker 9 has no rack (9 not registered: rack unknown)" in down.rack_aware_reason
    )
