"""What a drain's execute and clear steps do next, decided without I/O (``kafka/drain_execution``).

Each test is one situation a run meets (a fresh run, a retry, a resume after a crash, someone
else's reassignment, a plan overtaken by events, a clear after a failure, a drain that did not do
what it promised) and pins the decision and the text the operator logs or refuses with.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_zk.kafka.drain import DrainRequest, Move
from airflow_provider_kafka_zk.kafka.drain_execution import (
    Action,
    Observed,
    Refusal,
    after_lost_create,
    after_wait,
    batch_of,
    batch_throttles,
    clear_step,
    drain_steps,
    next_step,
    partitions_on,
    plan_from_state,
    preflight_batch,
    read_disagreements,
    read_record,
    replaced_values,
    unrestored_moves,
    verify_outcome,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.reassignment import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.znodes import (
    PartitionState,
    ReassignmentEntry,
    ReassignPartitions,
    TopicAssignment,
)

RATE = 1_000_000

# Batch 1 moves two RF=1 partitions off broker 1, batch 2 one RF=3 partition (scope "all").
PLAN = (
    (Move("single", 0, (1,), (2,), 100), Move("single", 1, (1,), (3,), 50)),
    (Move("replicated", 0, (1, 2, 3), (0, 2, 3), 7),),
)


def topic(name, partitions, adding=None, removing=None):
    return TopicAssignment(name, partitions, None, adding or {}, removing or {})


def state(name, partition, isr):
    return PartitionState(name, partition, isr[0], 1, 1, tuple(isr))


def cluster(single=None, replicated=None, extra=()):
    """Every topic znode: as planned unless told otherwise."""
    topics = {
        "single": single or topic("single", {0: (1,), 1: (1,), 2: (0,)}),
        "replicated": replicated or topic("replicated", {0: (1, 2, 3), 1: (0, 2, 3)}),
    }
    topics.update({t.topic: t for t in extra})
    return topics


def states_of(topics):
    return {(t.topic, p): state(t.topic, p, r) for t in topics.values() for p, r in t.partitions.items()}


def seen(topics, reassign=None, czxid=None, where="/admin/reassign_partitions"):
    return Observed(topics, states_of(topics), reassign, czxid, where)


def znode(*entries):
    return ReassignPartitions(tuple(ReassignmentEntry(t, p, tuple(r)) for t, p, r in entries))


OUR_FIRST_BATCH = znode(("single", 0, (2,)), ("single", 1, (3,)))

# ---------------------------------------------------------------------------------------------
# next_step
# ---------------------------------------------------------------------------------------------


def test_a_fresh_run_submits_the_first_batch_throttled_as_kafkas_tool_would():
    step = next_step(PLAN, 0, seen(cluster()), rate=RATE)
    assert (step.action, step.batch, step.refusal) == (Action.SUBMIT, 0, None)
    submission = step.submission
    assert submission.request == OUR_FIRST_BATCH  # sorted, no log_dirs
    assert dict(submission.targets) == {("single", 0): (2,), ("single", 1): (3,)}
    assert submission.size_bytes == 150
    assert submission.throttles.rate == RATE
    assert submission.throttles.topic_configs() == {
        "single": {LEADER_REPLICAS: "0:1,1:1", FOLLOWER_REPLICAS: "0:2,1:3"}
    }
    assert submission.throttles.broker_configs() == {
        b: {LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)} for b in (1, 2, 3)
    }


def test_a_batch_whose_reassignment_completed_while_the_worker_was_down_is_skipped():
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    step = next_step(PLAN, 0, seen(done), rate=RATE)
    assert (step.action, step.batch) == (Action.SKIP, 0)
    assert step.message == "batch 1/2: already complete (2 partitions), skipping"


def test_a_finished_batch_is_skipped_even_while_someone_elses_reassignment_runs():
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    foreign = znode(("replicated", 1, (1, 2, 3)))
    assert next_step(PLAN, 0, seen(done, foreign), rate=RATE).action is Action.SKIP


def test_a_partition_at_its_target_with_the_old_broker_still_in_its_isr_is_not_skipped():
    # Kafka's completion rule wants the ISR within the target; nor is it submitted again
    moved = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    states = {**states_of(moved), ("single", 0): state("single", 0, (2, 1))}
    step = next_step(PLAN, 0, Observed(moved, states), rate=RATE)
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.PLAN_OUTDATED)
    assert "single-0 planned from [1], now [2]." in step.message


def test_a_partition_without_a_state_znode_is_not_done():
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    states = {tp: s for tp, s in states_of(done).items() if tp != ("single", 1)}
    step = next_step(PLAN, 0, Observed(done, states), rate=RATE)
    assert step.action is not Action.SKIP and "single-1 planned from [1], now [3]" in step.message


def test_a_resume_after_a_worker_crash_mid_batch_waits_for_its_own_znode_and_never_submits_again():
    step = next_step(PLAN, 0, seen(cluster(), OUR_FIRST_BATCH, czxid=0x2A), rate=RATE)
    assert (step.action, step.batch, step.submission) == (Action.WAIT, 0, None)
    assert step.message == (
        "batch 1/2: /admin/reassign_partitions (czxid 0x2a) is this batch's own request (a retry): "
        "waiting for it, not submitting again"
    )


def test_a_resume_finds_its_znode_with_the_finished_entries_removed_and_still_waits():
    # the controller removes each partition from the znode as it finishes: ours is a subset
    half = cluster(single=topic("single", {0: (2,), 1: (1,), 2: (0,)}))
    step = next_step(PLAN, 0, seen(half, znode(("single", 1, (3,))), czxid=7), rate=RATE)
    assert step.action is Action.WAIT and "czxid 0x7" in step.message


def test_a_retry_after_the_znode_went_waits_while_the_controller_still_moves_our_partitions():
    moving = topic("single", {0: (2, 1), 1: (3,), 2: (0,)}, adding={0: (2,)}, removing={0: (1,)})
    step = next_step(PLAN, 0, seen(cluster(single=moving)), rate=RATE)
    assert (step.action, step.batch) == (Action.WAIT, 0)
    assert step.message == "batch 1/2: already moving (adding/removing replicas are ours): waiting"


def test_someone_elses_reassignment_in_the_znode_is_refused_naming_it():
    foreign = znode(("replicated", 1, (1, 2, 3)))
    where = "/admin/reassign_partitions (chroot /kafka)"
    step = next_step(PLAN, 0, seen(cluster(), foreign, where=where), rate=RATE)
    assert (step.action, step.refusal, step.batch) == (Action.REFUSE, Refusal.FOREIGN_REASSIGNMENT, 0)
    assert step.message == (
        "/admin/reassign_partitions (chroot /kafka) holds a reassignment that is not this plan's batch 1/2 "
        "(/admin/reassign_partitions lists replicated-1): refusing to start; wait for whoever owns it to "
        "finish, then run again"
    )


def test_a_znode_moving_our_partition_somewhere_else_is_not_ours():
    elsewhere = znode(("single", 0, (3,)))
    step = next_step(PLAN, 0, seen(cluster(), elsewhere), rate=RATE)
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.FOREIGN_REASSIGNMENT)


def test_a_znode_of_another_batch_of_this_plan_is_not_this_batchs():
    second = znode(("replicated", 0, (0, 2, 3)))
    step = next_step(PLAN, 0, seen(cluster(), second), rate=RATE)
    assert step.refusal is Refusal.FOREIGN_REASSIGNMENT and "not this plan's batch 1/2" in step.message


def test_an_admin_api_reassignment_seen_only_in_a_topic_znode_is_refused():
    api = topic(
        "replicated", {0: (1, 2, 3), 1: (1, 0, 2, 3)}, adding={1: (1,)}, removing={1: (3,)}
    )  # started through the Admin API: no znode
    step = next_step(PLAN, 0, seen(cluster(replicated=api)), rate=RATE)
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.FOREIGN_REASSIGNMENT)
    assert step.message == (
        "topic znodes show adding/removing replicas for replicated-1 (a reassignment started through "
        "the Admin API or by another tool): refusing to start"
    )


def test_our_partition_moving_towards_another_target_in_a_topic_znode_is_refused():
    other = topic("single", {0: (3, 1), 1: (1,), 2: (0,)}, adding={0: (3,)}, removing={0: (1,)})
    step = next_step(PLAN, 0, seen(cluster(single=other)), rate=RATE)
    assert step.refusal is Refusal.FOREIGN_REASSIGNMENT and "single-0" in step.message


def test_a_plan_made_before_a_partition_moved_elsewhere_is_refused_as_outdated():
    moved = cluster(single=topic("single", {0: (1,), 1: (0,), 2: (0,)}))
    step = next_step(PLAN, 0, seen(moved), rate=RATE)
    assert (step.action, step.refusal, step.submission) == (Action.REFUSE, Refusal.PLAN_OUTDATED, None)
    assert step.message == (
        "batch 1/2: ZooKeeper no longer shows the assignment the plan was made from: "
        "single-1 planned from [1], now [0]. Make a new plan."
    )


def test_a_plan_whose_topic_was_deleted_since_is_refused_as_outdated():
    gone = {"replicated": cluster()["replicated"]}
    step = next_step(PLAN, 0, seen(gone), rate=RATE)
    assert step.refusal is Refusal.PLAN_OUTDATED
    assert "single-0 planned from [1], now None; single-1 planned from [1], now None" in step.message


def test_a_half_done_batch_submits_only_the_partitions_still_to_move():
    half = cluster(single=topic("single", {0: (2,), 1: (1,), 2: (0,)}))
    step = next_step(PLAN, 0, seen(half), rate=RATE)
    assert step.action is Action.SUBMIT
    assert step.submission.request == znode(("single", 1, (3,)))
    assert step.submission.size_bytes == 50
    assert step.submission.throttles.broker_rates == (1, 3)


def test_the_next_batch_after_a_wait_is_decided_on_its_own():
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    step = next_step(PLAN, 1, seen(done), rate=RATE)
    assert (step.action, step.batch) == (Action.SUBMIT, 1)
    assert step.submission.request == znode(("replicated", 0, (0, 2, 3)))
    assert step.submission.throttles.topic_configs() == {
        "replicated": {LEADER_REPLICAS: "0:1,0:2,0:3", FOLLOWER_REPLICAS: "0:0"}
    }


def test_past_the_last_batch_the_run_is_done_without_reading_anything():
    step = next_step(PLAN, 2, None, rate=RATE)
    assert (step.action, step.batch, step.refusal) == (Action.DONE, None, None)
    assert next_step((), 0, None, rate=RATE).action is Action.DONE


def test_a_batch_cannot_be_decided_without_what_zookeeper_shows():
    with pytest.raises(ValueError, match="batch 2/2 needs what ZooKeeper shows"):
        next_step(PLAN, 1, None, rate=RATE)


# ---------------------------------------------------------------------------------------------
# after_lost_create: someone created the znode between our check and our create
# ---------------------------------------------------------------------------------------------


def test_a_znode_that_appeared_meanwhile_and_is_ours_is_waited_for():
    step = after_lost_create(PLAN, 0, OUR_FIRST_BATCH, "/admin/reassign_partitions")
    assert (step.action, step.batch) == (Action.WAIT, 0)
    assert step.message == "batch 1/2: /admin/reassign_partitions appeared meanwhile and is ours: waiting"


@pytest.mark.parametrize("now", [znode(("replicated", 1, (1, 2, 3))), None], ids=["foreign", "gone-again"])
def test_a_znode_created_by_someone_else_meanwhile_stops_the_run(now):
    step = after_lost_create(PLAN, 0, now, "/admin/reassign_partitions")
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.FOREIGN_REASSIGNMENT)
    assert step.message == (
        "/admin/reassign_partitions was created by someone else between our check and our create: "
        "refusing to continue"
    )


# ---------------------------------------------------------------------------------------------
# after_wait: the trigger's event
# ---------------------------------------------------------------------------------------------


def test_a_completed_wait_continues_with_the_batch_after_the_echoed_one():
    step = after_wait({"status": "complete", "message": "2/2 done", "echo": {"batch": 1}}, batch_timeout=60)
    assert (step.action, step.batch, step.message) == (Action.CONTINUE, 1, "Batch 2 complete: 2/2 done")


def test_an_event_without_an_echo_falls_back_to_the_batch_given():
    assert after_wait({"status": "complete"}, batch_timeout=60, batch=3).batch == 3
    assert after_wait({"status": "complete"}, batch_timeout=60).batch == 0


def test_a_batch_past_its_deadline_fails_leaving_it_running_and_the_lease_with_the_run():
    event = {"status": "timeout", "message": "still moving: single-0", "echo": {"batch": 0}}
    step = after_wait(event, batch_timeout=21600.0)
    assert (step.action, step.refusal, step.batch) == (Action.REFUSE, Refusal.WAIT_TIMED_OUT, 0)
    assert step.message == (
        "batch 1 not complete after 21600s: still moving: single-0; the reassignment keeps running, "
        "throttled, and the maintenance lease stays with this run. Re-run this task to keep waiting; "
        "the clear_throttles step removes this run's throttles once nothing of the plan moves."
    )


def test_a_wait_that_could_not_follow_the_batch_fails():
    step = after_wait({"status": "error", "message": "ZooKeeper gone", "echo": {"batch": 1}}, batch_timeout=1)
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.WAIT_FAILED)
    assert step.message == "could not follow batch 2: ZooKeeper gone."


# ---------------------------------------------------------------------------------------------
# clear_step
# ---------------------------------------------------------------------------------------------


def test_clear_after_a_failed_wait_keeps_the_throttles_while_our_partitions_still_move():
    moving = topic("single", {0: (2, 1), 1: (1,), 2: (0,)}, adding={0: (2,)}, removing={0: (1,)})
    observed = seen(cluster(single=moving), znode(("single", 1, (3,)), ("single", 0, (2,))))
    step = clear_step(PLAN, observed)
    assert (step.action, step.refusal) == (Action.REFUSE, Refusal.STILL_MOVING)
    assert step.message == (
        "partitions of this drain are still moving (single-0, single-1): throttles left in place and the "
        "maintenance lease kept. Re-run this task once they finished (or set force)."
    )


def test_clear_with_force_removes_the_throttles_even_while_partitions_move():
    step = clear_step(PLAN, seen(cluster(), OUR_FIRST_BATCH), force=True)
    assert (step.action, step.refusal) == (Action.CLEAR, None)


def test_clear_after_a_refusal_for_someone_elses_reassignment_removes_ours():
    # the run refused; the foreign reassignment moves nothing of this plan: our throttles can go
    step = clear_step(PLAN, seen(cluster(), znode(("replicated", 1, (1, 2, 3)))))
    assert step.action is Action.CLEAR


def test_clear_after_the_drain_finished_removes_the_throttles():
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    assert clear_step(PLAN, seen(done)).action is Action.CLEAR


# ---------------------------------------------------------------------------------------------
# The plan as the step executor's steps, and the preflight of every batch before the first write
# ---------------------------------------------------------------------------------------------


def test_the_plans_throttles_are_kafkas_tools_values_for_the_planned_moves():
    fresh = next_step(PLAN, 0, seen(cluster()), rate=RATE).submission.throttles
    assert batch_throttles(PLAN[0], RATE) == fresh  # what a fresh submission sets, known before it


def test_a_plan_becomes_throttle_steps_then_the_batch_per_batch_with_stable_ids():
    steps = drain_steps(PLAN, RATE, {"single": ("AAAAAAAAAAAAAAAAAAAAAg", 0x20)})
    assert [s.id for s in steps] == [
        "batch-1:throttle:topics/single",
        "batch-1:throttle:brokers/1",
        "batch-1:throttle:brokers/2",
        "batch-1:throttle:brokers/3",
        "batch-1",
        "batch-2:throttle:topics/replicated",
        *(f"batch-2:throttle:brokers/{b}" for b in (0, 1, 2, 3)),
        "batch-2",
    ]
    first = steps[4]
    assert first.kind == "drain_batch" and first.batch == 0 and first.batches == 2
    assert [(m.topic, m.topic_id, m.topic_czxid) for m in first.moves] == [
        ("single", "AAAAAAAAAAAAAAAAAAAAAg", 0x20),
        ("single", "AAAAAAAAAAAAAAAAAAAAAg", 0x20),
    ]
    assert dict(steps[0].keys) == {LEADER_REPLICAS: "0:1,1:1", FOLLOWER_REPLICAS: "0:2,1:3"}
    assert all(s.batch_step == "batch-1" for s in steps[:4])
    assert steps[-1].id == "batch-2" and steps[-1].moves[0].topic_czxid is None  # not recorded: not pinned
    assert batch_of(steps[-1]) == PLAN[1]
    assert drain_steps(PLAN, RATE) == drain_steps(PLAN, RATE)  # a resumed run finds the same ids


def test_the_preflight_lets_a_later_batch_wait_behind_an_earlier_batch_of_the_same_plan():
    # a resumed run: batch 1's own request is in flight; batch 2 is judged on its own assumptions
    behind = preflight_batch(PLAN, 1, seen(cluster(), reassign=OUR_FIRST_BATCH))
    assert behind.action is Action.SUBMIT and behind.refusal is None
    # next_step, deciding batch 2's turn, would take the same znode for someone else's
    assert next_step(PLAN, 1, seen(cluster(), reassign=OUR_FIRST_BATCH), rate=RATE).action is Action.REFUSE
    assert preflight_batch(PLAN, 0, seen(cluster(), reassign=OUR_FIRST_BATCH)).action is Action.WAIT


def test_the_preflight_refuses_every_batch_for_a_foreign_reassignment_or_an_outdated_plan():
    foreign = znode(("replicated", 1, (3, 2, 0)))
    for position in (0, 1):
        step = preflight_batch(PLAN, position, seen(cluster(), reassign=foreign))
        assert step.refusal is Refusal.FOREIGN_REASSIGNMENT and "replicated-1" in step.message
    moved = cluster(replicated=topic("replicated", {0: (3, 2, 1), 1: (0, 2, 3)}))
    step = preflight_batch(PLAN, 1, seen(moved))
    assert (
        step.refusal is Refusal.PLAN_OUTDATED
        and "replicated-0 planned from [1, 2, 3], now [3, 2, 1]" in step.message
    )
    done = cluster(single=topic("single", {0: (2,), 1: (3,), 2: (0,)}))
    assert preflight_batch(PLAN, 0, seen(done)).action is Action.SKIP


# ---------------------------------------------------------------------------------------------
# Rollback and throttle bookkeeping
# ---------------------------------------------------------------------------------------------


def test_a_rollback_that_undoes_every_planned_move_leaves_nothing_unrestored():
    saved = {("single", 0): [1], ("single", 1): [1], ("replicated", 0): [1, 2, 3]}
    assert unrestored_moves(PLAN, saved) == []


def test_a_rollback_missing_or_misstating_a_move_names_it():
    saved = {("single", 0): [1], ("replicated", 0): [1, 3, 2]}
    assert unrestored_moves(PLAN, saved) == ["single-1", "replicated-0"]


def test_only_someone_elses_throttle_values_count_as_replaced():
    previous = {LEADER_RATE: "5", FOLLOWER_RATE: "9", "retention.ms": "1"}
    written = {LEADER_RATE: "10", FOLLOWER_RATE: "10"}
    assert replaced_values(previous, written, {}) == {LEADER_RATE: "5", FOLLOWER_RATE: "9"}
    # the value an earlier batch of this run set, or the same value again, replaces nobody's
    assert replaced_values(previous, written, {LEADER_RATE: "5"}) == {FOLLOWER_RATE: "9"}
    assert replaced_values({LEADER_RATE: "10"}, written, {}) == {}


# ---------------------------------------------------------------------------------------------
# plan_from_state: the plan from the safety snapshot's model
# ---------------------------------------------------------------------------------------------


def _row(path, data, owner=0):
    return ZnodeRow(path, data, 1, 1, 1, 0, 0, 0, 0, 0, owner, len(data or b""), 0)


def _snapshot(topics, brokers, isr=None):
    """The model of :func:`_snapshot_rows`."""
    return ClusterState.from_snapshot(_snapshot_rows(topics, brokers, isr), cluster="test")


def _snapshot_rows(topics, brokers, isr=None):
    """A snapshot's rows: registered ``brokers`` (id -> rack), ``topics`` (name -> {p: replicas})."""
    rows = []
    for b, rack in brokers.items():
        registration = {
            "version": 4,
            "host": f"b{b}",
            "port": 9092,
            "endpoints": [f"PLAINTEXT://b{b}:9092"],
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "jmx_port": -1,
            "timestamp": "1",
            "rack": rack,
        }
        rows.append(_row(f"/brokers/ids/{b}", json.dumps(registration).encode(), owner=0x100 + b))
    for name, partitions in topics.items():
        body = {"version": 3, "partitions": {str(p): r for p, r in partitions.items()}}
        rows.append(_row(f"/brokers/topics/{name}", json.dumps(body).encode()))
        for p, replicas in partitions.items():
            in_sync = (isr or {}).get((name, p), replicas)
            state = {
                "controller_epoch": 1,
                "leader": in_sync[0],
                "version": 1,
                "leader_epoch": 0,
                "isr": in_sync,
            }
            rows.append(_row(f"/brokers/topics/{name}/partitions/{p}/state", json.dumps(state).encode()))
    return rows


def test_the_plan_uses_registered_brokers_racks_and_never_places_on_a_broker_that_is_down():
    # broker 9 holds a replica but is not registered: down, so no destination and no rack
    state = _snapshot(
        {"single": {0: [1]}, "replicated": {0: [1, 2], 1: [9, 2]}},
        {1: "a", 2: "b", 3: "a", 4: "b"},
    )
    plan = plan_from_state(state, DrainRequest(frozenset({1}), scope="all"), sizes={("single", 0): 10})
    targets = {(m.topic, m.partition): m.target for m in plan.moves}
    assert set(targets) == {("single", 0), ("replicated", 0)}
    assert 9 not in {b for target in targets.values() for b in target}
    assert targets[("replicated", 0)][1] == 2 and targets[("replicated", 0)][0] == 3  # rack a, not b again
    assert plan.rack_aware and plan.complete
    assert sum(m.size_bytes for m in plan.moves) == 10  # a partition without a size counts as 0


def test_the_plan_lists_a_topic_znode_the_model_cannot_read():
    state = _snapshot({"good": {0: [1]}, "a b": {0: [1]}}, {1: None, 2: None})
    plan = plan_from_state(state, DrainRequest(frozenset({1})), sizes={})
    assert [m.topic for m in plan.moves] == ["good"]
    assert [(t.topic, t.reason) for t in plan.unplanned_topics] == [("a b", "invalid_topic_name")]
    assert not plan.complete


def test_a_request_naming_no_broker_is_refused_by_the_request_itself():
    with pytest.raises(ValueError, match="name at least one broker"):
        plan_from_state(_snapshot({}, {1: None}), DrainRequest(frozenset()), sizes={})


# ---------------------------------------------------------------------------------------------
# verify_outcome: did the drain do what its plan promised
# ---------------------------------------------------------------------------------------------

DRAINED = topic("single", {0: (2,), 1: (3,), 2: (0,)}), topic("replicated", {0: (0, 2, 3), 1: (0, 2, 3)})


def verify(topics=DRAINED, states=None, **kwargs):
    topics = {t.topic: t for t in topics}
    arguments = {
        "drained": frozenset({1}),
        "scope": "all",
        "excluded_topics": frozenset(),
        "known_left": {},
        "topics": topics,
        "states": states_of(topics) if states is None else states,
    }
    return verify_outcome(PLAN, **{**arguments, **kwargs})


def test_a_drain_that_did_what_it_promised_verifies():
    outcome = verify()
    assert outcome.ok and outcome.problems == () and outcome.left_on_drained == ()
    assert outcome.moved[2] == {
        "partition": "replicated-0",
        "target": [0, 2, 3],
        "replicas": (0, 2, 3),
        "leader": 0,
        "isr": [0, 2, 3],
    }


def test_a_partition_left_on_a_drained_broker_is_a_problem_unless_the_plan_said_why():
    left = (DRAINED[0], topic("replicated", {0: (0, 2, 3), 1: (1, 2, 3)}))
    outcome = verify(left)
    assert outcome.problems == ("replicated-1 is still on drained broker(s) [1]",)
    assert outcome.left_on_drained == ({"partition": "replicated-1", "reason": "not in the plan"},)
    known = verify(left, known_left={("replicated", 1): "no valid destination"})
    assert known.ok and known.left_on_drained == (
        {"partition": "replicated-1", "reason": "no valid destination"},
    )


def test_only_what_is_in_scope_counts_as_left_behind():
    left = (topic("single", {0: (2,), 1: (3,), 2: (1,)}), topic("replicated", {0: (0, 2, 3), 1: (1, 2, 3)}))
    # rf1: the replicated partition is out of scope (and replicated-0 still moved as planned)
    assert verify(left, scope="rf1").problems == ("single-2 is still on drained broker(s) [1]",)
    assert verify(left, excluded_topics=frozenset({"single", "replicated"})).ok


def test_a_moved_partition_off_target_without_leader_or_full_isr_is_named():
    off = (topic("single", {0: (3,), 1: (3,), 2: (0,)}), DRAINED[1])
    states = {
        **states_of({t.topic: t for t in off}),
        ("single", 1): PartitionState("single", 1, -1, 1, 1, (3,)),
        ("replicated", 0): state("replicated", 0, (0, 2)),
    }
    assert verify(off, states).problems == (
        "single-0: replicas (3,), planned [2]",
        "single-1: no leader among [3] (-1)",
        "replicated-0: ISR [0, 2] is not the full replica set [0, 2, 3]",
    )
    gone = verify((DRAINED[1],), states={})
    assert gone.problems[:2] == (
        "single-0: replicas None, planned [2]",
        "single-1: replicas None, planned [3]",
    )
    assert "leader" not in gone.moved[0]


def test_the_disks_show_data_left_behind_or_missing_at_its_target():
    disks = {1: {("single", 0)}, 2: set(), 3: {("single", 1)}}
    assert verify(inventory=disks).problems == (
        "single-0: data directory still on broker 1",
        "single-0: no data directory on target broker 2",
        "replicated-0: broker 0 was not inventoried after the drain",
    )
    assert verify(inventory={}).problems[0] == "single-0: broker 2 was not inventoried after the drain"
    assert verify(inventory=None).ok  # disks not checked


def test_throttles_this_run_left_set_are_a_problem():
    outcome = verify(throttles_left={"brokers/2": [LEADER_RATE]})
    assert outcome.problems == (
        f"throttles this run set are still in place: {{'brokers/2': ['{LEADER_RATE}']}}",
    )


# ---------------------------------------------------------------------------------------------
# A planning read: what it records, and what disagrees with it
# ---------------------------------------------------------------------------------------------

BROKERS = {1: "a", 2: "b", 3: "a"}
DRAINED_ONE = frozenset({1})


def _record(topics):
    return read_record(_snapshot(topics, BROKERS), DRAINED_ONE)


def test_a_model_of_a_partial_read_has_no_findings_for_the_znodes_it_did_not_read():
    rows = _snapshot_rows({"single": {0: [1], 1: [2]}}, BROKERS)
    partial_rows = [r for r in rows if r.path != "/brokers/topics/single/partitions/1/state"]
    complete = ClusterState.from_snapshot(partial_rows)
    partial = ClusterState.from_snapshot(partial_rows, partial_read=True)
    # the same rows as a snapshot: a missing state (and configs) are findings; as a planning read, not
    assert {f.kind.value for f in complete.findings} >= {"missing_partition_state", "missing_topic_config"}
    assert partial.findings == () and partial.partial_read and not complete.partial_read
    assert partial.partition("single", 0).isr == (1,) and partial.partition("single", 1).state is None
    assert partitions_on(partial, DRAINED_ONE) == [("single", 0)]


def test_reads_agree_when_only_topics_off_the_drained_brokers_differ():
    planned = _record({"single": {0: [1]}, "other": {0: [2]}})
    seen = _record({"single": {0: [1]}, "other": {0: [2], 1: [3]}, "new": {0: [3]}})
    seen["topics"]["other"] = [7, 9]  # rewritten, but it never touched broker 1
    assert read_disagreements(planned, seen, "the snapshot") == []


def test_reads_disagree_on_a_drained_topic_rewritten_created_or_gone_and_on_an_in_flight_move():
    planned = _record({"single": {0: [1]}, "gone": {0: [1]}})
    seen = _record({"single": {0: [1], 1: [1]}, "late": {0: [2, 1]}})
    seen["topics"]["single"] = [1, 2]  # the topic znode got a new version (a partition added)
    seen["reassign_partitions"] = True
    seen["cluster_id"] = "other"
    problems = read_disagreements(planned, seen, "ZooKeeper now")
    text = "\n".join(problems)
    assert "cluster id 'other'" in text and "reassignment in flight" in text
    assert "/brokers/topics/single rewritten (czxid 0x1 -> 0x1, version 0 -> 2)" in text
    assert "has topic znode /brokers/topics/late" in text
    assert "lacks topic znode /brokers/topics/gone" in text
    assert len(problems) == 5
