"""Post-maintenance in the pure core: Kafka's leader-imbalance rule, who an election can move and why
not, election batches under the znode size limit, the move-back plan and the health gate; and the
simulated controller's preferred election (the behaviour the DAG test relies on)."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from airflow_provider_kafka_zk.kafka.audit import BrokerSettings, ClusterFacts, audit_cluster
from airflow_provider_kafka_zk.kafka.drain import Move
from airflow_provider_kafka_zk.kafka.leadership import (
    ElectionScope,
    auto_rebalance,
    choose_election,
    elected_before_us,
    election_batches,
    election_outcome,
    election_report_line,
    leader_imbalance,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.post_maintenance import (
    DrainedMove,
    batch_moves,
    count_under_replicated,
    health_gate,
    plan_move_back,
)
from airflow_provider_kafka_zk.kafka.znodes import PreferredReplicaElection, TopicPartition
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.rows import cluster_rows


def _cluster() -> SimulatedCluster:
    return SimulatedCluster(
        ClusterSpec(
            "lead",
            brokers=tuple(BrokerSpec(b, rack=None, host=f"10.0.0.{b}") for b in range(3)),
            topics=(
                TopicSpec(
                    "r3",
                    6,
                    3,
                    assignment={
                        0: (1, 0, 2),
                        1: (1, 2, 0),
                        2: (0, 1, 2),
                        3: (2, 0, 1),
                        4: (1, 0, 2),
                        5: (0, 2, 1),
                    },
                    records_per_partition=5,
                ),
                TopicSpec("one", 2, 1, assignment={0: (1,), 1: (2,)}, records_per_partition=5),
            ),
        )
    )


def _state(cluster: SimulatedCluster) -> ClusterState:
    return ClusterState.from_snapshot(cluster_rows(cluster), cluster="lead")


def _restarted() -> SimulatedCluster:
    """Broker 1 went through a controlled shutdown and came back: it leads nothing it replicates
    with others (its RF=1 partition it leads again: nobody else could)."""
    cluster = _cluster()
    cluster.stop_broker(1, clean=True)
    cluster.start_broker(1)
    return cluster


def _facts(cluster: SimulatedCluster, **settings) -> ClusterFacts:
    live = frozenset(cluster.online_broker_ids())
    return ClusterFacts(
        cluster="lead",
        now_ms=int(time.time() * 1000),
        live_brokers=live,
        inventoried=live,
        settings={b: BrokerSettings(b, **settings) for b in cluster.brokers},
    )


def test_kafka_imbalance_rule_after_a_restart():
    state = _state(_restarted())
    imbalance = leader_imbalance(state)
    one = imbalance[1]
    # broker 1 is first replica of r3-0, r3-1, r3-4 and one-0; it leads only one-0 again
    assert one.preferred == 4 and sorted(one.not_leading) == [("r3", 0), ("r3", 1), ("r3", 4)]
    assert one.ratio == 0.75 and one.over_threshold
    assert not imbalance[0].not_leading and not imbalance[0].over_threshold
    # the threshold is Kafka's strict ">": 75 % is not over a 75 % setting
    assert not leader_imbalance(state, threshold_percent=75)[1].over_threshold
    assert leader_imbalance(state, threshold_percent=74)[1].over_threshold


def test_audit_finding_uses_the_controllers_settings_and_says_what_fixes_it():
    cluster = _restarted()
    state = _state(cluster)
    auto_on = [f for f in audit_cluster(state, _facts(cluster)) if f.check == "preferred-leader-imbalance"]
    [finding] = auto_on
    assert finding.broker_id == 1 and "r3-0, r3-1, r3-4" in finding.summary
    assert "auto.leader.rebalance.enable is on" in finding.action
    off = _facts(cluster, auto_leader_rebalance_enable=False)
    [finding] = [f for f in audit_cluster(state, off) if f.check == "preferred-leader-imbalance"]
    assert "Kafka will not move leadership back by itself" in finding.action
    assert (
        """airflow dags trigger kafka_zk_post_maintenance --conf '{"cluster": "lead", "brokers": [1], "dry_run": false}'"""
        in finding.action
    )
    # the controller's threshold counts, not the imbalanced broker's own setting
    controller = state.controller.broker_id
    lenient = _facts(cluster)
    lenient = ClusterFacts(
        **{
            **lenient.__dict__,
            "settings": {
                **lenient.settings,
                controller: BrokerSettings(controller, leader_imbalance_per_broker_percentage=80),
            },
        }
    )
    assert not [f for f in audit_cluster(state, lenient) if f.check == "preferred-leader-imbalance"]


def test_election_choice_says_why_a_partition_cannot_move():
    cluster = _restarted()
    part = cluster.topics["r3"].partitions[1]
    cluster._bump_state(part, leader=part.leader, isr=[b for b in part.isr if b != 1])
    state = _state(cluster)
    choice = choose_election(state, ElectionScope(brokers=frozenset({1})))
    assert choice.electable == (("r3", 0), ("r3", 4))
    [stuck] = choice.not_electable
    assert (stuck.topic, stuck.partition) == ("r3", 1) and "not in the ISR" in stuck.reason
    assert choice.already_preferred == 1  # one-0
    # a stopped preferred replica cannot lead; topics limit the scope
    cluster.stop_broker(2, clean=True)
    state = _state(cluster)
    choice = choose_election(state, ElectionScope(topics=frozenset({"r3"})))
    assert ("r3", 3) in {(n.topic, n.partition) for n in choice.not_electable}
    assert any("preferred replica 2 is offline" in n.reason for n in choice.not_electable)


def test_election_batches_stay_under_the_byte_and_partition_limits():
    partitions = [TopicPartition(f"topic-{i:04d}", i % 7) for i in range(500)]
    batches = election_batches(partitions, max_partitions=10_000, max_bytes=4096)
    assert [tp for b in batches for tp in b] == partitions and len(batches) > 1
    for batch in batches:
        encoded = PreferredReplicaElection(batch).encode()
        assert len(encoded) <= 4096
        assert json.loads(encoded)["partitions"][0] == {
            "topic": batch[0].topic,
            "partition": batch[0].partition,
        }
    # the estimate is exact: each batch is as full as the limit allows
    for batch, following in itertools.pairwise(batches):
        assert len(PreferredReplicaElection((*batch, following[0])).encode()) > 4096
    assert [len(b) for b in election_batches(partitions[:25], max_partitions=10)] == [10, 10, 5]
    with pytest.raises(ValueError, match="alone does not fit"):
        election_batches([TopicPartition("x" * 200, 0)], max_bytes=100)


def test_simulated_controller_elects_only_electable_partitions_and_outcome_matches():
    cluster = _restarted()
    part = cluster.topics["r3"].partitions[1]
    cluster._bump_state(part, leader=part.leader, isr=[b for b in part.isr if b != 1])
    epoch_before = cluster.topics["r3"].partitions[0].leader_epoch
    requested = [("r3", 0), ("r3", 1), ("r3", 4), ("gone", 0)]
    outcome = cluster.preferred_replica_election(requested)
    assert outcome == {
        ("r3", 0): "elected",
        ("r3", 1): "preferred_unavailable",
        ("r3", 4): "elected",
        ("gone", 0): "unknown",
    }
    assert cluster.topics["r3"].partitions[0].leader == 1
    assert cluster.topics["r3"].partitions[0].leader_epoch == epoch_before + 1
    result = election_outcome(_state(cluster), [TopicPartition(t, p) for t, p in requested])
    assert set(result.elected) == {("r3", 0), ("r3", 4)}
    reasons = {(n.topic, n.partition): n.reason for n in result.not_moved}
    assert set(reasons) == {("r3", 1), ("gone", 0)}
    assert reasons[("r3", 1)].startswith("preferred replica 1 is not in the ISR")
    assert reasons[("gone", 0)] == "the partition no longer exists"


def test_move_back_touches_only_partitions_still_where_the_drain_put_them():
    drained = [
        DrainedMove("a", 0, (1,), (2,), 100),  # still on 2: goes back
        DrainedMove("a", 1, (1,), (2,), 100),  # moved on to 3 since: left alone
        DrainedMove("a", 2, (1,), (0,), 100),  # already back on 1
        DrainedMove("a", 3, (1,), (2,), 100),  # moving now: left alone
        DrainedMove("b", 0, (1,), (2,), 100),  # topic deleted since
    ]
    current = {("a", 0): (2,), ("a", 1): (3,), ("a", 2): (1,), ("a", 3): (2,)}
    plan = plan_move_back(drained, current, reassigning={("a", 3)}, sizes={("a", 0): 555})
    assert plan.moves == (Move("a", 0, (2,), (1,), 555),)
    assert plan.already_back == (("a", 2),)
    reasons = {(u.topic, u.partition): u.reason for u in plan.untouched}
    assert reasons[("a", 1)].startswith("moved since the drain: the drain put it on [2], it is on [3]")
    assert "in flight" in reasons[("a", 3)] and "no longer exists" in reasons[("b", 0)]
    moves = [Move("t", p, (2,), (1,), 40) for p in range(5)]
    assert [len(b) for b in batch_moves(moves, max_partitions=2)] == [2, 2, 1]
    assert [len(b) for b in batch_moves(moves, max_partitions=10, max_bytes=100)] == [2, 2, 1]


def test_move_back_recognises_the_drains_topic_by_its_incarnation_not_its_name():
    drained = [
        DrainedMove("same", 0, (1,), (2,), 10, "AAAAAAAAAAAAAAAAAAAAAg", 0x100),
        DrainedMove("recreated", 0, (1,), (2,), 10, "AAAAAAAAAAAAAAAAAAAAAw", 0x200),
        DrainedMove("old-kafka", 0, (1,), (2,), 10, None, 0x300),  # no id: its czxid alone
        DrainedMove("id-rewritten", 0, (1,), (2,), 10, "AAAAAAAAAAAAAAAAAAAABA", 0x400),
    ]
    current = {(d.topic, 0): (2,) for d in drained}  # every one where the drain put it
    now = {
        "same": ("AAAAAAAAAAAAAAAAAAAAAg", 0x100),
        "recreated": ("AAAAAAAAAAAAAAAAAAAABQ", 0x900),  # deleted and created again, same layout
        "old-kafka": (None, 0x301),
        "id-rewritten": ("AAAAAAAAAAAAAAAAAAAABg", 0x400),
    }
    # by name only (the old rule), every one of them would go back
    assert len(plan_move_back(drained, current).moves) == 4
    plan = plan_move_back(drained, current, topics=now)
    assert plan.moves == (Move("same", 0, (2,), (1,), 10),)
    reasons = {u.topic: u.reason for u in plan.untouched}
    assert "deleted and created again since the drain (znode czxid 0x200 -> 0x900" in reasons["recreated"]
    assert "AAAAAAAAAAAAAAAAAAAAAw -> AAAAAAAAAAAAAAAAAAAABQ" in reasons["recreated"]
    assert "czxid 0x300 -> 0x301" in reasons["old-kafka"]
    assert (
        "id changed since the drain" in reasons["id-rewritten"]
        and "topicId repair" in reasons["id-rewritten"]
    )


def test_move_back_never_targets_a_broker_that_is_not_registered():
    drained = [DrainedMove("a", 0, (1,), (0,), 10), DrainedMove("a", 1, (2,), (0,), 10)]
    current = {("a", 0): (0,), ("a", 1): (0,)}
    assert len(plan_move_back(drained, current).moves) == 2  # without the rule: onto broker 2 as well
    plan = plan_move_back(drained, current, registered={0, 1, 3})
    assert plan.moves == (Move("a", 0, (0,), (1,), 10),)
    [left] = plan.untouched
    assert (left.topic, left.partition) == ("a", 1)
    assert left.reason.startswith("broker(s) [2] not registered in /brokers/ids (still down?)")


def test_health_gate_names_missing_brokers_offline_partitions_and_urp_over_baseline():
    cluster = _cluster()
    assert health_gate(_state(cluster), [1], 0).passed
    cluster.stop_broker(1, clean=True)
    state = _state(cluster)
    gate = health_gate(state, [1], 0)
    assert gate.missing_brokers == (1,) and gate.offline == (("one", 0),)
    assert len(gate.under_replicated) == 6  # every r3 partition lost broker 1 from its ISR
    problems = " | ".join(gate.problems)
    assert (
        "broker(s) [1] not registered" in problems
        and "one-0" in problems
        and "6 under-replicated" in problems
    )
    # a baseline that already had those URPs accepts them (but never the missing broker)
    assert count_under_replicated(state) == 6
    assert [p for p in health_gate(state, [1], 6).problems if "under-replicated" in p] == []
    cluster.start_broker(1)
    assert health_gate(_state(cluster), [1], 0).passed


# ---------------------------------------------------------------------------------------------
# Kafka's own automatic rebalance (issue 26): its settings, and saying when it already elected
# ---------------------------------------------------------------------------------------------


def test_golden_3_3_1_the_controllers_auto_rebalance_elects_an_imbalanced_brokers_leaders():
    """``KafkaController.checkAndTriggerAutoLeaderRebalance`` (3.3.1): broker 1's imbalance is 3/4 > 10 %;
    its preferred leaders in the ISR move back. controller.log:

      INFO [Controller id=0] Processing automatic preferred replica leader election
      INFO [Controller id=0] Starting replica leader election (PREFERRED) for partitions r3-0,r3-1,r3-4
      triggered by AutoTriggered
    """
    cluster = _restarted()
    assert cluster.auto_leader_rebalance() == [("r3", 0), ("r3", 1), ("r3", 4)]
    assert cluster.controller_log == [
        "Processing automatic preferred replica leader election",
        "Starting replica leader election (PREFERRED) for partitions r3-0,r3-1,r3-4 triggered by AutoTriggered",
    ]
    assert not leader_imbalance(_state(cluster))[1].not_leading
    # the strict ">": with a threshold of 75 % broker 1 (75 %) is not rebalanced; nor while a reassignment runs
    assert _restarted().auto_leader_rebalance(imbalance_percent=75) == []
    moving = _restarted()
    moving.start_reassignment({("one", 1): (0,)})
    assert moving.auto_leader_rebalance() == []
    assert moving.controller_log[-1].endswith("for partitions  triggered by AutoTriggered")


def test_auto_rebalance_settings_come_from_the_controllers_server_properties_only():
    """Static KafkaConfig vals (defaults true / 10 / 300): a value under /config/brokers is ignored
    by the broker ("Non-dynamic configs configured in ZooKeeper will be ignored", DynamicBrokerConfig)."""
    default = auto_rebalance(0, None)
    assert (default.enabled, default.imbalance_percent, default.check_interval_s) == (True, 10, 300)
    assert "its server.properties was not read: Kafka's defaults" in default.describe()
    rule = auto_rebalance(
        0,
        {
            "auto.leader.rebalance.enable": False,
            "leader.imbalance.per.broker.percentage": 25,
            "leader.imbalance.check.interval.seconds": 60,
        },
        broker_configs={
            "<default>": {"auto.leader.rebalance.enable": "true"},
            "0": {"leader.imbalance.per.broker.percentage": "1"},
        },
        release="3.3.1",
    )
    assert (rule.enabled, rule.imbalance_percent, rule.check_interval_s) == (False, 25, 60)
    text = rule.describe()
    assert text.startswith("auto.leader.rebalance.enable=false on controller 0 (its server.properties)")
    assert (
        "/config/brokers/<default> sets auto.leader.rebalance.enable=true, which the broker ignores" in text
    )
    assert "/config/brokers/0 sets leader.imbalance.per.broker.percentage=1, which the broker ignores" in text


def test_post_maintenance_says_kafka_already_elected_the_preferred_leaders():
    """The 3.3.1 run of issue 26: the report said "elected: 0" because Kafka's auto rebalance had
    already moved them; it now says so, and names the partitions."""
    cluster = _restarted()
    before = _state(cluster)
    cluster.auto_leader_rebalance()  # the controller's check ran between the plan and the election
    now = _state(cluster)
    rule = auto_rebalance(0, {"auto.leader.rebalance.enable": True})
    scope = ElectionScope(brokers=frozenset({1}))
    found = elected_before_us(before, now, scope, rule)
    assert found.partitions == (("r3", 0), ("r3", 1), ("r3", 4))
    assert election_report_line(0, found).startswith(
        "preferred leaders elected: 0, because Kafka's auto leader rebalance already elected 3 (r3-0, r3-1, "
        "r3-4) before this run's election; auto.leader.rebalance.enable=true on controller 0"
    )
    # what this run requested (or moved back) is not someone else's election
    assert elected_before_us(
        before, now, scope, rule, requested=[("r3", 0)], moved=[("r3", 1)]
    ).partitions == (("r3", 4),)
    # with the rebalance off on the controller, another election did it
    off = elected_before_us(before, now, scope, auto_rebalance(0, {"auto.leader.rebalance.enable": False}))
    assert election_report_line(2, off).startswith(
        "preferred leaders elected: 2, and another election (not Kafka's own: auto.leader.rebalance.enable=false)"
    )
    assert (
        election_report_line(3, elected_before_us(before, before, scope, rule))
        == "preferred leaders elected: 3"
    )


def test_the_election_as_steps_never_requests_a_partition_twice():
    from airflow_provider_kafka_zk.kafka.post_maintenance import election_steps

    electable = [TopicPartition("t", p) for p in range(5)]
    preferred = {("t", p): p % 3 for p in range(5)}
    steps = election_steps(
        electable, preferred, requested=[("t", 1)], max_partitions=2, max_bytes=10_000, first=3
    )
    assert [s.id for s in steps] == ["election-3", "election-4"]
    assert [s.partitions for s in steps] == [(("t", 0, 0), ("t", 2, 2)), (("t", 3, 0), ("t", 4, 1))]
    assert (
        election_steps(electable[:1], preferred, requested=[("t", 0)], max_partitions=2, max_bytes=10_000)
        == []
    )
