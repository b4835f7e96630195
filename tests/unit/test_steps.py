"""The step model's pure decisions: znode and file verdicts, command templates, groups, the restart rules."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.kafka.model import PartitionInfo
from airflow_provider_kafka_zk.kafka.restart_rules import (
    NEW_ID,
    UNKNOWN_ID,
    after_resets,
    ids_the_controller_sends,
    leaderless_partitions,
    restart_risks,
)
from airflow_provider_kafka_zk.kafka.steps import (
    BrokerRestart,
    CommandTemplateError,
    ConfigZnodeDelete,
    ControllerMove,
    DrainBatch,
    ElectionRequest,
    FileRemoval,
    HealthWait,
    ObservedZnode,
    PartitionMove,
    PlannedFile,
    QuarantineDir,
    QuarantineMove,
    Refusal,
    ReplicaDisk,
    StepState,
    ThrottleClear,
    ThrottleSet,
    TopicIdWrite,
    ZnodeExpectation,
    atomic_groups,
    content_id,
    partition_file_verdict,
    remaining,
    render_command,
    step_from_dict,
    steps_from_dicts,
    template_refusals,
    znode_verdict,
)
from airflow_provider_kafka_zk.kafka.znodes import PartitionState

OLD, NEW = b'{"version":1,"partitions":{"0":[1]}}', b'{"version":3,"topic_id":"x","partitions":{"0":[1]}}'


def _write(topic: str, version: int = 4) -> TopicIdWrite:
    return TopicIdWrite(
        id=f"write-topic-id:{topic}",
        topic=topic,
        path=f"/brokers/topics/{topic}",
        expected_version=version,
        old_data=OLD,
        new_data=NEW,
        old_topic_id=None,
        topic_id="AAAAAAAAAAAAAAAAAAAAAg",
    )


def test_a_znode_is_pending_as_planned_done_when_it_holds_the_write_and_refused_otherwise():
    (expected,) = _write("t").znodes()
    assert znode_verdict("s", expected, ObservedZnode(OLD, 4)) is StepState.PENDING
    assert znode_verdict("s", expected, ObservedZnode(NEW, 5)) is StepState.DONE  # an earlier try wrote it
    changed = znode_verdict("s", expected, ObservedZnode(OLD, 5))
    assert isinstance(changed, Refusal) and changed.rule == "znode-changed"
    assert "version 5 (the plan read 4), data the same" in changed.cause
    other = znode_verdict("s", expected, ObservedZnode(b"{}", 4))
    assert isinstance(other, Refusal) and "data different" in other.cause
    gone = znode_verdict("s", expected, None)
    assert isinstance(gone, Refusal) and gone.rule == "znode-gone" and gone.subjects == ("/brokers/topics/t",)
    assert "Nothing was written" in str(gone)


def test_absent_and_incarnation_expectations():
    absent = ZnodeExpectation("/admin/reassign_partitions", None)
    assert znode_verdict("b1", absent, None) is StepState.PENDING
    exists = znode_verdict("b1", absent, ObservedZnode(b"{}", 0))
    assert isinstance(exists, Refusal) and exists.rule == "znode-exists"
    incarnation = ZnodeExpectation("/brokers/topics/t", 2, czxid=0x10)
    recreated = znode_verdict("m", incarnation, ObservedZnode(b"{}", 2, czxid=0x99))
    assert isinstance(recreated, Refusal) and recreated.rule == "znode-recreated"


def test_partition_file_verdicts():
    path = "/d/t-0/partition.metadata"
    holds = b"version: 0\ntopic_id: OLDOLDOLDOLDOLDOLDOLDA"
    target = "NEWNEWNEWNEWNEWNEWNEWA"
    assert (
        partition_file_verdict("s", 1, path, "OLDOLDOLDOLDOLDOLDOLDA", target, "present", holds, None)
        is StepState.PENDING
    )
    done = b"version: 0\ntopic_id: " + target.encode()
    assert (
        partition_file_verdict("s", 1, path, "OLDOLDOLDOLDOLDOLDOLDA", target, "present", done, None)
        is StepState.DONE
    )
    assert (
        partition_file_verdict("s", 1, path, "OLDOLDOLDOLDOLDOLDOLDA", target, "absent", None, "gone")
        is StepState.DONE
    )
    changed = partition_file_verdict(
        "s", 1, path, "OLDOLDOLDOLDOLDOLDOLDA", target, "present", b"version: 0\ntopic_id: X", None
    )
    assert isinstance(changed, Refusal) and changed.rule == "file-changed" and "broker 1" in changed.cause
    refused = partition_file_verdict("s", 1, path, "O", target, "refused", None, "is a symlink")
    assert isinstance(refused, Refusal) and refused.rule == "file-refused" and "is a symlink" in refused.cause


def test_a_template_typo_is_a_typed_error_naming_the_template_and_the_placeholder():
    allowed = ("broker_id", "host")
    assert render_command(
        "restart_command", "restart --id {broker_id} --on {host}", {"broker_id": "3", "host": "h 1"}, allowed
    ) == ("restart --id 3 --on 'h 1'")
    with pytest.raises(CommandTemplateError) as caught:
        render_command(
            "restart_command", "systemctl restart kafka@{broker}", {"broker_id": "3", "host": "h"}, allowed
        )
    assert caught.value.template_name == "restart_command" and caught.value.placeholder == "broker"
    assert isinstance(caught.value, ValueError)  # typed, and still a ValueError for older callers
    for bad, placeholder in (
        ("x '{host}'", "host"),
        ("x {broker_id!r}", "broker_id"),
        ("x {", None),
        ("", None),
    ):
        with pytest.raises(CommandTemplateError) as caught:
            render_command("restart_command", bad, {"broker_id": "1", "host": "h"}, allowed)
        assert caught.value.placeholder == placeholder
    refusals = template_refusals(
        "restart_command",
        "restart {broker}",
        allowed,
        [
            ("restart-broker:0", {"broker_id": "0", "host": "a"}),
            ("restart-broker:2", {"broker_id": "2", "host": "b"}),
        ],
    )
    assert len(refusals) == 1 and refusals[0].rule == "command-template"  # one per distinct problem
    assert (
        refusals[0].subjects == ("restart_command", "{broker}") and refusals[0].step_id == "restart-broker:0"
    )


def test_steps_round_trip_through_plan_json_and_group_the_writes():
    planned = PlannedFile(1, "t", 0, "/d", "t-0", "partition.metadata", "OLD", "NEW")
    disk = ReplicaDisk(1, "t", 0, "/d", "OLD")
    steps = [
        _write("a"),
        _write("b"),
        ControllerMove(id="move-controller", topics=("a",), controller_at_plan=1),
        HealthWait(id="wait-healthy:after-write", topics=("a", "b")),
        FileRemoval(id="reset-files:1", broker_id=1, files=(planned,)),
        BrokerRestart(id="restart-broker:1", broker_id=1, topics=("t",), resets=(("t", 0),), disk=(disk,)),
    ]
    again = steps_from_dicts([s.to_dict() for s in steps])
    assert again == steps
    assert [[s.id for s in g] for g in atomic_groups(steps)] == [
        ["write-topic-id:a", "write-topic-id:b"],
        ["move-controller"],
        ["wait-healthy:after-write"],
        ["reset-files:1"],
        ["restart-broker:1"],
    ]
    assert (
        next(s.id for s in remaining(steps, {"write-topic-id:a": {}, "write-topic-id:b": {}}))
        == "move-controller"
    )
    assert steps[4].brokers() == (1,) and not HealthWait.MUTATES
    with pytest.raises(ValueError, match="repeat"):
        steps_from_dicts([steps[0].to_dict(), steps[0].to_dict()])
    with pytest.raises(ValueError, match="unknown step kind 'teleport'"):
        step_from_dict({"kind": "teleport", "id": "x"})


def test_the_ported_kinds_name_what_they_expect_and_round_trip():
    batch = DrainBatch(
        id="batch-1",
        batch=0,
        batches=2,
        moves=(
            PartitionMove("t", 0, (1,), (2,), topic_id="AAAAAAAAAAAAAAAAAAAAAg", topic_czxid=0x10),
            PartitionMove("u", 1, (1,), (3,)),
        ),
    )
    # the topic must still be the incarnation the plan read (any version: the reassignment rewrites
    # it); the reassign znode is the handler's (its own request in flight is no refusal)
    assert batch.znodes() == (ZnodeExpectation("/brokers/topics/t", -1, czxid=0x10, any_version=True),)
    assert batch.brokers() == (2, 3) and batch.label == "batch 1/2"
    throttle = ThrottleSet(
        id="batch-1:throttle:topics/t",
        entity_type="topics",
        entity_name="t",
        keys=(("leader.replication.throttled.replicas", "0:1"),),
        batch_step="batch-1",
    )
    assert throttle.entity_path == "/config/topics/t" and throttle.znodes() == () and throttle.GROUP
    clear = ThrottleClear(id="c", entity_type="brokers", entity_name="2", keys=(("k", "v"),))
    election = ElectionRequest(id="election-1", partitions=(("t", 0, 2),))
    assert election.znodes() == () and election.brokers() == ()
    move = QuarantineMove(
        id="q",
        broker_id=2,
        dirs=(QuarantineDir("/data/k", "old-0", "normal", "old"),),
        ts="20260101T000000",
        broker_running=False,
    )
    assert [z.path for z in move.znodes()] == ["/brokers/topics/old", "/admin/delete_topics/old"]
    assert all(z.version is None for z in move.znodes())
    config = ConfigZnodeDelete(id="d", topic="old", expected_version=3, data=b"{}")
    assert config.znodes()[-1] == ZnodeExpectation("/config/topics/old", 3, b"{}", done_absent=True)
    for step in (batch, throttle, clear, election, move, config):
        assert step_from_dict(step.to_dict()) == step, step.kind
    assert content_id("q", [1, 2]) == content_id("q", [1, 2]) != content_id("q", [1, 3])


def test_a_znode_any_version_and_a_deleted_znode_counted_as_done():
    topic = ZnodeExpectation("/brokers/topics/t", -1, czxid=5, any_version=True)
    assert znode_verdict("s", topic, ObservedZnode(b"x", 9, 5)) is StepState.PENDING
    recreated = znode_verdict("s", topic, ObservedZnode(b"x", 0, 6))
    assert isinstance(recreated, Refusal) and recreated.rule == "znode-recreated"
    assert znode_verdict("s", topic, None).rule == "znode-gone"
    deleted = ZnodeExpectation("/config/topics/t", 2, b"{}", done_absent=True)
    assert znode_verdict("s", deleted, None) is StepState.DONE
    assert znode_verdict("s", deleted, ObservedZnode(b"{}", 2)) is StepState.PENDING
    assert znode_verdict("s", deleted, ObservedZnode(b"{}", 3)).rule == "znode-changed"


# ---------------------------------------------------------------------------------------------
# The restart rules (kafka.restart_rules), on synthetic partitions
# ---------------------------------------------------------------------------------------------


def _partition(
    topic: str, p: int, replicas: tuple[int, ...], leader: int, isr: tuple[int, ...]
) -> PartitionInfo:
    return PartitionInfo(
        topic, p, replicas, replicas, replicas, (), (), PartitionState(topic, p, leader, 1, 1, isr), 1
    )


def test_which_id_the_controller_sends():
    zk = {"a": "A", "b": None}
    assert ids_the_controller_sends(zk, new_controller=False) == {"a": "A", "b": UNKNOWN_ID}
    assert ids_the_controller_sends(zk, new_controller=True) == {"a": "A", "b": NEW_ID}
    assert ids_the_controller_sends(zk, new_controller=True, written={"b": "B"}) == {"a": "A", "b": "B"}
    # written but the running controller keeps what it holds: still unknown
    assert ids_the_controller_sends(zk, new_controller=False, written={"b": "B"})["b"] == UNKNOWN_ID


def test_an_rf1_partition_the_broker_would_reject_is_named_unserved_and_leaderless():
    parts = {
        ("solo", 0): _partition("solo", 0, (0,), 0, (0,)),
        ("t", 0): _partition("t", 0, (0, 1), 1, (0, 1)),
    }
    disk = [
        ReplicaDisk(0, "solo", 0, "/d0", "A"),
        ReplicaDisk(0, "t", 0, "/d0", "T"),
        ReplicaDisk(1, "t", 0, "/d1", "T"),
    ]
    risks = restart_risks(0, parts, {0, 1}, disk, {"solo": UNKNOWN_ID, "t": "T"})
    assert [k for k, _ in risks.unserved] == [("solo", 0)] and [k for k, _ in risks.leaderless] == [
        ("solo", 0)
    ]
    assert {r.rule for r in risks.refusals("restart-broker:0")} == {
        "restart-replicas-not-served",
        "restart-partitions-leaderless",
    }
    # the run writes its id and moves the controller first: broker 0 takes it again
    assert restart_risks(0, parts, {0, 1}, disk, {"solo": "A", "t": "T"}).safe
    # or its file is removed before the restart: the replica adopts whatever the controller sends
    assert restart_risks(0, parts, {0, 1}, disk, {"solo": NEW_ID, "t": "T"}, resets=[("solo", 0)]).safe


def test_leadership_moving_to_a_replica_that_rejects_the_id_is_refused():
    parts = {("t", 0): _partition("t", 0, (0, 1, 2), 0, (0, 1, 2))}
    disk = [
        ReplicaDisk(0, "t", 0, "/d", "OLD"),
        ReplicaDisk(1, "t", 0, "/d", "OLD"),
        ReplicaDisk(2, "t", 0, "/d", "NEW"),
    ]
    risks = restart_risks(0, parts, {0, 1, 2}, disk, {"t": "NEW"}, resets=[("t", 0)])
    assert not risks.unserved  # broker 0's own file is reset
    ((key, why),) = risks.leaderless
    assert key == ("t", 0) and "leadership moves to broker 1" in why  # assignment order, not broker 2
    # once broker 1 was reset by an earlier restart of the same run, the move is safe
    later = after_resets(disk, {(1, "t", 0): "NEW"})
    assert restart_risks(0, parts, {0, 1, 2}, later, {"t": "NEW"}, resets=[("t", 0)]).safe


def test_a_follower_cannot_rejoin_a_leader_holding_another_id():
    parts = {("t", 0): _partition("t", 0, (1, 0), 1, (1, 0))}
    disk = [ReplicaDisk(0, "t", 0, "/d", "OLD"), ReplicaDisk(1, "t", 0, "/d", "OLD")]
    risks = restart_risks(0, parts, {0, 1}, disk, {"t": "NEW"}, resets=[("t", 0)])
    ((_key, why),) = risks.unserved
    assert "its leader, broker 1, holds OLD" in why and not risks.leaderless


def test_an_unreadable_partition_metadata_takes_its_whole_log_dir_offline():
    parts = {
        ("a", 0): _partition("a", 0, (0, 1), 1, (0, 1)),
        ("b", 0): _partition("b", 0, (0,), 0, (0,)),
        ("c", 0): _partition("c", 0, (0,), 0, (0,)),
    }
    disk = [
        ReplicaDisk(0, "a", 0, "/d0", None, error="invalid topic id"),
        ReplicaDisk(0, "b", 0, "/d0", "B"),
        ReplicaDisk(0, "c", 0, "/d1", "C"),
    ]
    risks = restart_risks(0, parts, {0, 1}, disk, {"a": "A", "b": "B", "c": "C"})
    unserved = dict(risks.unserved)
    assert "Kafka takes log dir /d0 offline" in unserved[("a", 0)]
    assert "log dir /d0 goes offline at start" in unserved[("b", 0)] and ("c", 0) not in unserved
    assert [k for k, _ in risks.leaderless] == [("b", 0)]


def test_leaderless_partitions():
    parts = {
        ("t", 0): _partition("t", 0, (1,), -1, (1,)),
        ("t", 1): _partition("t", 1, (2,), 2, (2,)),
        ("t", 2): _partition("t", 2, (3,), 3, (3,)),
    }
    assert leaderless_partitions(parts, {1, 3}) == {("t", 0), ("t", 1)}
