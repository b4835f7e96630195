"""The undo planners (kafka/undo.py): every kind of run undone, every refusal, idempotence, and the
plan as the run folder keeps it (a drain plan the drain's execution accepts, its rollback)."""

from __future__ import annotations

import hashlib
import json

import pytest

from airflow_provider_kafka_zk.kafka.post_maintenance import DrainedMove
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity, LeaseHolder
from airflow_provider_kafka_zk.kafka.steps import (
    ConfigZnodeRestore,
    ControllerMove,
    HealthWait,
    ObservedZnode,
    PartitionFileRestore,
    QuarantineDir,
    QuarantineRestore,
    RestoredFile,
    StepState,
    ThrottleClear,
    TopicIdWrite,
    step_from_dict,
    znode_verdict,
)
from airflow_provider_kafka_zk.kafka.undo import (
    BY_HAND,
    DeletedConfig,
    FileNow,
    MigrationRunRecord,
    MovedDir,
    MovesNow,
    OriginalRun,
    RemovedFile,
    RepairWrite,
    RunKind,
    UndoPlan,
    describe,
    kind_of_folder,
    migration_run_refusal,
    plan_cleanup_undo,
    plan_document,
    plan_moves_undo,
    plan_repair_undo,
    rollback_document,
    run_refusals,
    trigger_command,
    undo_conf,
    undo_record,
    undo_steps,
    undo_summary,
)

IDENTITY = ClusterIdentity("clusterAAAAAAAAAAAAAAA", ("zk1:2181",), "/kafka")
OTHER = ClusterIdentity("clusterBBBBBBBBBBBBBBB", ("zk1:2181",), "/kafka")
CZXID, ID = 0x100, "AAAAAAAAAAAAAAAAAAAAAA"


def _original(kind: RunKind = RunKind.DRAIN, writes: int = 5, **kwargs) -> OriginalRun:
    dag = {
        RunKind.DRAIN: "kafka_zk_pre_maintenance_drain",
        RunKind.MOVE_BACK: "kafka_zk_post_maintenance",
        RunKind.REPAIR: "kafka_zk_topic_id_repair",
        RunKind.CLEANUP: "kafka_zk_deletion_cleanup",
    }[kind]
    values = {"dag_id": dag, "run_id": "manual__1", "folder": f"/a/prod/{kind.value}/k", "identity": IDENTITY}
    values.update(kwargs)
    return OriginalRun(kind, writes=writes, **values)


def _moved(topic: str = "t", partition: int = 0, before=(1,), after=(2,), czxid: int = CZXID) -> DrainedMove:
    return DrainedMove(topic, partition, tuple(before), tuple(after), 1000, ID, czxid)


def _now(assignment, *, reassigning=(), registered=(0, 1, 2, 3), throttles=None, czxid=CZXID) -> MovesNow:
    topics = {t: (ID, czxid) for t, _ in assignment}
    return MovesNow(assignment, set(reassigning), topics, set(registered), throttles or {})


# ---------------------------------------------------------------------------------------------
# drain and move-back
# ---------------------------------------------------------------------------------------------


def test_a_drain_is_undone_by_moving_its_partitions_back_and_removing_the_throttles_it_left():
    moved = [_moved("t", 0, (1,), (2,)), _moved("t", 1, (1,), (3,)), _moved("u", 0, (1, 0), (2, 0))]
    ours = {
        "topics/t": {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "0:2",
        },
        "brokers/1": {"leader.replication.throttled.rate": "52428800"},
        "brokers/2": {"follower.replication.throttled.rate": "52428800"},
    }
    now = _now(
        {("t", 0): (2,), ("t", 1): (3,), ("u", 0): (2, 0)},
        throttles={
            # still ours / changed by someone else / gone
            "topics/t": dict(ours["topics/t"]),
            "brokers/1": {"leader.replication.throttled.rate": "1000"},
            "brokers/2": None,
        },
    )
    plan = plan_moves_undo(_original(), moved, ours, now)
    assert not plan.refusals
    assert [(m.topic, m.partition, m.current, m.target) for m in plan.moves] == [
        ("t", 0, (2,), (1,)),
        ("t", 1, (3,), (1,)),
        ("u", 0, (2, 0), (1, 0)),
    ]
    (clear,) = plan.steps  # only the values still the run's: someone else's rate is left alone
    assert (
        isinstance(clear, ThrottleClear)
        and clear.entity_key == "topics/t"
        and dict(clear.keys) == ours["topics/t"]
    )
    assert any("brokers/2" in a for a in plan.already) and any("brokers/1" in a for a in plan.already)
    assert plan.incarnations == {"t": (ID, CZXID), "u": (ID, CZXID)}
    assert plan.verdict().startswith(
        "Undo of kafka_zk_pre_maintenance_drain run manual__1: move 3 partition(s)"
    )


def test_a_second_undo_of_the_same_drain_plans_nothing_and_says_so():
    moved = [_moved("t", 0, (1,), (2,))]
    plan = plan_moves_undo(
        _original(), moved, {"brokers/1": {"x": "1"}}, _now({("t", 0): (1,)}, throttles={"brokers/1": None})
    )
    assert plan.nothing_to_do and not plan.refusals
    assert plan.verdict().startswith(
        "Nothing to undo: everything kafka_zk_pre_maintenance_drain run manual__1 changed"
    )
    assert "t-0 is where it was before the run" in plan.already


def test_a_run_that_changed_nothing_has_nothing_to_undo():
    plan = plan_moves_undo(_original(writes=0), [_moved()], {}, _now({("t", 0): (1,)}))
    assert plan.nothing_to_do and "changed nothing on the cluster" in plan.verdict()


@pytest.mark.parametrize(
    ("now", "rule"),
    [
        (_now({("t", 0): (3,)}), "partition-moved-since"),
        (_now({("t", 0): (2,)}, czxid=0x999), "topic-recreated"),
        (_now({("t", 0): (2,)}, reassigning=[("t", 0)]), "reassignment-in-flight"),
        (_now({("t", 0): (2,)}, registered=(0, 2, 3)), "broker-not-registered"),
        (_now({("t", 1): (2,)}), "partition-gone"),
        (_now({("t", 0): (2, 3)}), "partition-moved-since"),
    ],
)
def test_a_drain_undo_refuses_a_partition_changed_since(now, rule):
    plan = plan_moves_undo(_original(), [_moved("t", 0, (1,), (2,))], {}, now)
    (refusal,) = plan.refusals
    assert refusal.rule == rule and refusal.subjects == ("t-0",) and "t-0" in refusal.cause
    assert refusal.action.startswith("Nothing was planned")
    assert plan.verdict().startswith(
        f"Undo of kafka_zk_pre_maintenance_drain run manual__1 refused: 1 problem(s) ({rule})"
    )


def test_a_move_back_is_undone_back_to_the_drained_placement_and_its_election_is_said_not_undone():
    # the move-back moved t-0 from [2] (where the drain had put it) back to [1]
    moved = [DrainedMove("t", 0, (2,), (1,), 10, ID, CZXID)]
    plan = plan_moves_undo(_original(RunKind.MOVE_BACK), moved, {}, _now({("t", 0): (1,)}), election=True)
    assert [(m.current, m.target) for m in plan.moves] == [((1,), (2,))]
    assert any("preferred leader election is not undone" in n for n in plan.not_undone)


# ---------------------------------------------------------------------------------------------
# topicId repair
# ---------------------------------------------------------------------------------------------

BEFORE = b'{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}'
AFTER = (
    b'{"version":3,"topic_id":"'
    + ID.encode()
    + b'","partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}'
)


def _repair_write(topic: str = "t", old_id=None, new_id=ID) -> TopicIdWrite:
    return TopicIdWrite(
        id=f"write-topic-id:{topic}",
        topic=topic,
        path=f"/brokers/topics/{topic}",
        expected_version=4,
        old_data=BEFORE,
        new_data=AFTER,
        old_topic_id=old_id,
        topic_id=new_id,
    )


def _repair(**kwargs) -> UndoPlan:
    values = {
        "writes": [RepairWrite(_repair_write(), 5)],
        "controller_moved": False,
        "cases": {"t": "precursor"},
        "removed": [],
        "restarted": [],
        "znodes_now": {"/brokers/topics/t": ObservedZnode(AFTER, 5, CZXID)},
    }
    values.update(kwargs)
    return plan_repair_undo(_original(RunKind.REPAIR), **values)


def test_a_repair_is_undone_by_writing_each_znode_back_expecting_exactly_what_the_repair_left():
    plan = _repair()
    assert not plan.refusals
    (write,) = plan.steps
    assert isinstance(write, TopicIdWrite)
    assert (write.expected_version, write.old_data, write.new_data) == (5, AFTER, BEFORE)
    assert write.old_topic_id == ID and write.topic_id == ""
    assert "back without topic_id" in write.describe()
    # the executor's own check: still what the repair left -> pending; already the old bytes -> done
    (expected,) = write.znodes()
    assert znode_verdict(write.id, expected, ObservedZnode(AFTER, 5)) is StepState.PENDING
    assert znode_verdict(write.id, expected, ObservedZnode(BEFORE, 6)) is StepState.DONE
    assert any("KAFKA-14190 precursor returns" in n for n in plan.notes)
    assert any("did not move the controller" in n for n in plan.notes)


def test_a_repair_that_moved_the_controller_is_undone_with_a_controller_move_and_a_health_wait():
    plan = _repair(
        controller_moved=True,
        cases={"t": "diverged"},
        writes=[RepairWrite(_repair_write(old_id="B" * 22), 5)],
    )
    kinds = [type(s) for s in plan.steps]
    assert kinds == [TopicIdWrite, ControllerMove, HealthWait]
    assert plan.steps[1].topics == ("t",)
    assert any("DIVERGED again" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("observed", "rule"),
    [
        (ObservedZnode(AFTER, 6, CZXID), "znode-changed"),  # written again since (a reassignment?)
        (
            ObservedZnode(b'{"version":3,"topic_id":"CCCCCCCCCCCCCCCCCCCCCC","partitions":{}}', 5),
            "znode-changed",
        ),
        (None, "znode-gone"),
    ],
)
def test_a_repair_undo_refuses_a_znode_changed_since_the_repair_wrote_it(observed, rule):
    plan = _repair(znodes_now={"/brokers/topics/t": observed}, controller_moved=True)
    (refusal,) = plan.refusals
    assert refusal.rule == rule and refusal.subjects == ("/brokers/topics/t",)
    assert "the repair left it at version 5" in refusal.cause
    assert not plan.steps  # no controller move without a write to undo


def test_a_repair_undone_already_plans_nothing():
    plan = _repair(znodes_now={"/brokers/topics/t": ObservedZnode(BEFORE, 6, CZXID)}, controller_moved=True)
    assert plan.nothing_to_do and not plan.refusals
    assert plan.already == ("/brokers/topics/t holds its bytes from before the repair again",)


OLD_META = b"version: 0\ntopic_id: BBBBBBBBBBBBBBBBBBBBBB"
NEW_META = b"version: 0\ntopic_id: " + ID.encode()


def _removed(name: str = "partition.metadata", content: bytes | None = OLD_META) -> RemovedFile:
    return RemovedFile(
        2, "h2", "t", 0, "/d", "t-0", name, content, hashlib.sha256(content or b"").hexdigest(), ID
    )


@pytest.mark.parametrize("found", [FileNow("absent"), FileNow("present", NEW_META)])
def test_a_file_reset_is_undone_by_writing_the_copies_back(found):
    plan = _repair(removed=[_removed()], restarted=[2], files_now={(2, "/d/t-0/partition.metadata"): found})
    assert not plan.refusals
    restore = plan.steps[-1]
    assert isinstance(restore, PartitionFileRestore) and restore.broker_id == 2
    (f,) = restore.files
    assert (f.path, f.content, f.found_sha256) == ("/d/t-0/partition.metadata", OLD_META, found.sha256)
    assert "broker 2 was restarted by the repair: a restart is not undone" in plan.not_undone
    assert any("read at its broker's next start" in n for n in plan.notes)


def test_a_file_undo_refuses_changed_files_and_never_restores_a_leader_epoch_checkpoint():
    changed = FileNow("present", b"version: 0\ntopic_id: CCCCCCCCCCCCCCCCCCCCCC")
    plan = _repair(
        removed=[_removed(), _removed("leader-epoch-checkpoint", b"0\n1\n0 0\n")],
        files_now={(2, "/d/t-0/partition.metadata"): changed},
    )
    (refusal,) = plan.refusals
    assert refusal.rule == "file-changed" and refusal.subjects == ("broker 2:/d/t-0/partition.metadata",)
    assert any("leader-epoch-checkpoint is not written back" in n for n in plan.not_undone)
    done = _repair(
        removed=[_removed()], files_now={(2, "/d/t-0/partition.metadata"): FileNow("present", OLD_META)}
    )
    assert not any(isinstance(s, PartitionFileRestore) for s in done.steps)
    assert "broker 2: /d/t-0/partition.metadata holds the repair's copy again" in done.already
    lost = _repair(removed=[_removed(content=None)])
    assert [r.rule for r in lost.refusals] == ["no-artefacts"]


# ---------------------------------------------------------------------------------------------
# deletion cleanup
# ---------------------------------------------------------------------------------------------


def _dir(
    broker: int = 2, name: str = "old-0.abc-delete", kind: str = "delete", topic: str = "old"
) -> MovedDir:
    return MovedDir(
        broker, f"h{broker}", "/d", name, kind, topic, "/kafka-quarantine", "20260101T000000.0Z-x"
    )


CONFIG = DeletedConfig("old", b'{"version":1,"config":{"retention.ms":"1"}}', 3)


def _cleanup(**kwargs) -> UndoPlan:
    values = {
        "moved": [_dir(), _dir(1, "old-1", "normal")],
        "deleted": [CONFIG],
        "topics_back": {},
        "configs_now": {CONFIG.path: None},
        "dirs_now": None,
        "running": {0, 2},
    }
    values.update(kwargs)
    return plan_cleanup_undo(_original(RunKind.CLEANUP), **values)


def test_a_cleanup_is_undone_by_moving_the_directories_back_and_creating_the_config_znodes_again():
    plan = _cleanup()
    assert not plan.refusals
    one, two, config = plan.steps
    assert isinstance(one, QuarantineRestore) and one.broker_id == 1 and one.broker_running is False
    assert [d.path for d in one.dirs] == ["/d/old-1"] and (one.quarantine_dir, one.ts) == (
        "/kafka-quarantine",
        "20260101T000000.0Z-x",
    )
    assert (
        isinstance(two, QuarantineRestore) and two.broker_id == 2 and [d.kind for d in two.dirs] == ["delete"]
    )
    assert isinstance(config, ConfigZnodeRestore) and config.data == CONFIG.data
    assert [e.path for e in one.znodes()] == ["/brokers/topics/old", "/admin/delete_topics/old"]
    assert any("LogManager.loadLogs" in n for n in plan.notes)


def test_a_cleanup_undo_refuses_a_recreated_topic_naming_its_directories_and_config():
    plan = _cleanup(topics_back={"old": "/kafka/brokers/topics/old exists"})
    (refusal,) = plan.refusals
    assert refusal.rule == "topic-recreated"
    assert set(refusal.subjects) == {
        "topic old",
        "broker 2:/d/old-0.abc-delete",
        "broker 1:/d/old-1",
        CONFIG.path,
    }
    assert not plan.steps


@pytest.mark.parametrize(
    ("status", "rule"),
    [
        ("occupied", "quarantine-original-occupied"),
        ("missing", "quarantine-missing"),
        ("refused", "quarantine-refused"),
    ],
)
def test_a_cleanup_undo_refuses_what_the_host_finds_changed(status, rule):
    plan = _cleanup(
        dirs_now={(2, "/d/old-0.abc-delete"): (status, "why"), (1, "/d/old-1"): ("would_restore", None)}
    )
    (refusal,) = plan.refusals
    assert refusal.rule == rule and refusal.subjects == ("broker 2:/d/old-0.abc-delete",)
    assert "why" in refusal.cause


def test_a_live_named_directory_goes_back_under_a_running_broker_only_when_allowed():
    running = _cleanup(moved=[_dir(2, "old-1", "normal")])
    (refusal,) = running.refusals
    assert refusal.rule == "broker-running" and "LogManager.getOrCreateLog" in refusal.cause
    allowed = _cleanup(moved=[_dir(2, "old-1", "normal")], allow_running_broker_orphans=True)
    assert not allowed.refusals and allowed.steps[0].allow_running_broker_orphans
    # a -delete directory goes back under a running broker: it ignores it until its next start
    assert not _cleanup(moved=[_dir(2)]).refusals


def test_a_cleanup_undo_keeps_a_config_created_since_and_counts_what_is_back():
    other = ObservedZnode(b'{"version":1,"config":{}}', 0)
    plan = _cleanup(moved=[], configs_now={CONFIG.path: other})
    (refusal,) = plan.refusals
    assert refusal.rule == "znode-exists" and refusal.subjects == (CONFIG.path,)
    back = _cleanup(
        dirs_now={
            (2, "/d/old-0.abc-delete"): ("already_restored", None),
            (1, "/d/old-1"): ("already_restored", None),
        },
        configs_now={CONFIG.path: ObservedZnode(CONFIG.data, 0)},
    )
    assert back.nothing_to_do and not back.refusals and len(back.already) == 3


# ---------------------------------------------------------------------------------------------
# every kind
# ---------------------------------------------------------------------------------------------


def _holder(run_id: str, dag_id: str = "kafka_zk_pre_maintenance_drain") -> LeaseHolder:
    return LeaseHolder(dag_id, run_id, "execute", "h:1", 0, 10**13, IDENTITY.cluster_id)


def test_refusals_every_kind_shares():
    original = _original()
    assert run_refusals(original, identity_now=IDENTITY, lease=None, run_state="success") == []
    assert run_refusals(original, identity_now=IDENTITY, lease=_holder("other"), run_state="failed") == []
    rules = {
        r.rule
        for r in run_refusals(original, identity_now=OTHER, lease=_holder("manual__1"), run_state="running")
    }
    assert rules == {"another-cluster", "lease-held-by-run", "run-in-flight"}
    (no_identity,) = run_refusals(_original(identity=None), identity_now=IDENTITY, lease=None, run_state=None)
    assert no_identity.rule == "no-artefacts" and "identity.json" in no_identity.cause
    (other,) = run_refusals(original, identity_now=OTHER, lease=None, run_state=None)
    assert "clusterBBBBBBBBBBBBBBB" in other.cause and "clusterAAAAAAAAAAAAAAA" in other.cause
    assert not run_refusals(
        _original(writes=0, identity=None), identity_now=IDENTITY, lease=None, run_state=None
    )


def test_run_kinds_and_their_folders():
    assert (
        kind_of_folder("deletions") is RunKind.CLEANUP
        and kind_of_folder("deletion-cleanup") is RunKind.CLEANUP
    )
    assert kind_of_folder("drain") is RunKind.DRAIN and kind_of_folder("undo") is None


def test_rollback_records_name_the_undo_dag_with_the_exact_conf():
    record = undo_record("prod", "manual__2026-01-01T00:00:00+00:00", "kafka_zk_topic_id_repair")
    assert record["dag_id"] == "kafka_zk_undo"
    assert record["conf"] == {
        "cluster": "prod",
        "run_id": "manual__2026-01-01T00:00:00+00:00",
        "dag_id": "kafka_zk_topic_id_repair",
        "dry_run": False,
    }
    conf = json.loads(record["dry_run_command"].split("--conf ", 1)[1].strip("'"))
    assert conf == {**record["conf"], "dry_run": True}
    assert (
        trigger_command("d", {"run_id": "it's"})
        == """airflow dags trigger d --conf '{"run_id": "it'\\''s"}'"""
    )
    assert undo_conf("c", "r") == {"cluster": "c", "run_id": "r", "dry_run": True}
    assert "note" in undo_record("c", None, None) and "conf" not in undo_record("c", None, None)
    assert "TLS/SASL" in BY_HAND


def test_the_plan_is_a_drain_plan_the_drains_execution_accepts_with_its_rollback(tmp_path):
    from airflow_provider_kafka_zk.kafka.post_maintenance import batch_moves
    from airflow_provider_kafka_zk.operators.drain_artefacts import load_plan, plan_batches

    plan = plan_moves_undo(
        _original(),
        [_moved("t", 0, (1,), (2,)), _moved("t", 1, (1,), (3,))],
        {"topics/t": {"a": "1"}},
        _now({("t", 0): (2,), ("t", 1): (3,)}, throttles={"topics/t": {"a": "1"}}),
    )
    batches = batch_moves(plan.moves, max_partitions=1)
    document = plan_document(
        plan,
        cluster="prod",
        run_id="manual__undo",
        identity=IDENTITY,
        batches=batches,
        max_partitions_per_batch=1,
        max_bytes_per_batch=None,
        created_at="now",
    )
    (tmp_path / "plan.json").write_text(json.dumps(document))
    loaded = load_plan(str(tmp_path))  # the drain's validation
    assert [[(m.topic, m.partition, m.target) for m in b] for b in plan_batches(loaded)] == [
        [("t", 0, (1,))],
        [("t", 1, (1,))],
    ]
    assert loaded["kind"] == "undo" and loaded["topics"] == {"t": {"topic_id": ID, "czxid": CZXID}}
    assert [s.kind for s in undo_steps(loaded)] == ["throttle_clear"]
    rollback = rollback_document(plan, cluster="prod")
    assert rollback["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [2]},
        {"topic": "t", "partition": 1, "replicas": [3]},
    ]
    assert rollback["undoes"]["run_id"] == "manual__1" and rollback["throttles"][0]["entity"] == "topics/t"
    text = describe(document)
    assert text.startswith("Undo of kafka_zk_pre_maintenance_drain run manual__1: move 2 partition(s)")
    assert "t-0: [2] -> [1]" in text and "remove exactly the throttles this undo set" in text
    summary = undo_summary(
        document,
        rollback,
        plan_dir="/u",
        throttle_bytes_per_sec=1024,
        batch_timeout_s=60,
        zookeeper="zk/kafka",
    )
    body = summary.text()
    assert summary.kind == "undo" and "create /admin/reassign_partitions with 1 partition(s)" in body
    assert "trigger kafka_zk_pre_maintenance_drain again" in body


def test_new_step_kinds_round_trip_through_plan_json():
    steps = [
        QuarantineRestore(
            id="q",
            broker_id=2,
            dirs=(QuarantineDir("/d", "old-0.abc-delete", "delete", "old"),),
            quarantine_dir="/q",
            ts="ts",
            broker_running=True,
        ),
        ConfigZnodeRestore(id="c", topic="old", data=b"{}"),
        PartitionFileRestore(
            id="f",
            broker_id=1,
            files=(RestoredFile("/d", "t-0", "partition.metadata", OLD_META, "t", 0, "ab" * 32, ID),),
        ),
    ]
    for step in steps:
        assert step_from_dict(json.loads(json.dumps(step.to_dict()))) == step
    config = steps[1]
    assert [e.path for e in config.znodes()] == [
        "/brokers/topics/old",
        "/admin/delete_topics/old",
        "/config/topics/old",
    ]
    expected = config.znodes()[2]
    assert znode_verdict("c", expected, None) is StepState.PENDING
    assert znode_verdict("c", expected, ObservedZnode(b"{}", 0)) is StepState.DONE
    assert znode_verdict("c", expected, ObservedZnode(b"other", 0)).rule == "znode-exists"
    assert steps[2].brokers() == (1,)


# ---------------------------------------------------------------------------------------------
# a ZooKeeper-to-KRaft migration run: its own back run undoes it
# ---------------------------------------------------------------------------------------------


def _migration_folder(
    tmp_path, run_id: str, *, direction="forward", done=3, verify_phase="dual-write-zk-brokers"
):
    from datetime import UTC, datetime

    from airflow_provider_kafka_zk.operators._run import run_key

    folder = tmp_path / "k1" / "kraft-migration" / run_key(run_id, datetime(2026, 11, 29, 3, 0, tzinfo=UTC))
    folder.mkdir(parents=True)
    steps = [{"id": f"s{n}"} for n in range(3)]
    plan = {
        "direction": direction,
        "from_phase": "brokers-in-migration-mode",
        "to_phase": "dual-write-zk-brokers",
    }
    (folder / "plan.json").write_text(json.dumps({**plan, "steps": steps}))
    (folder / "progress.json").write_text(json.dumps({"completed": {f"s{n}": {} for n in range(done)}}))
    if verify_phase is not None:
        (folder / "verify.json").write_text(json.dumps({"phase": verify_phase}))
    return folder


def test_an_undo_of_a_migration_run_points_at_the_migration_dags_back_run(tmp_path):
    """Not "no-artefacts": the way back, the exact trigger, and the phase the run's verify step read."""
    from airflow_provider_kafka_zk.maintenance.undo import UndoRefusedError
    from airflow_provider_kafka_zk.operators.undo import find_original_run

    folder = _migration_folder(tmp_path, "manual__2026-11-29T03:00:00+00:00")
    for dag_id in ("kafka_zk_kraft_migration", None):  # named, or found by its run id alone
        with pytest.raises(UndoRefusedError) as refused:
            find_original_run(str(tmp_path), "k1", "manual__2026-11-29T03:00:00+00:00", dag_id)
        (refusal,) = refused.value.refusals
        assert refusal.rule == "migration-run", refusal
        assert "the migration DAG's back run does" in refusal.cause and str(folder) in refusal.cause
        assert (
            "phase by that run's artefacts: dual-write-zk-brokers (read by the run's verify step"
            in refusal.cause
        )
        dry = trigger_command(
            "kafka_zk_kraft_migration", {"cluster": "k1", "direction": "back", "dry_run": True}
        )
        assert dry in refusal.action and '"dry_run": false' in refusal.action
        assert "kafka_zk_undo" not in refusal.action


def test_an_undo_of_a_stopped_or_reverting_migration_run_says_what_it_knows(tmp_path):
    from airflow_provider_kafka_zk.operators.undo import _migration_run

    _migration_folder(tmp_path, "r1", done=1, verify_phase=None)
    stopped = migration_run_refusal("k1", "r1", _migration_run(str(tmp_path), "k1", "r1"))
    assert "not known from that run's artefacts (the run stopped after 1 of 3 steps" in stopped.cause
    assert "between brokers-in-migration-mode and dual-write-zk-brokers" in stopped.cause
    _migration_folder(tmp_path, "r2", direction="back", verify_phase="zookeeper")
    back = migration_run_refusal("k1", "r2", _migration_run(str(tmp_path), "k1", "r2"))
    assert '"direction": "forward"' in back.action and "That run went back" in back.action
    finalized = migration_run_refusal(
        "k1", "r3", MigrationRunRecord("/x", "forward", "finalizing", "finalized", "finalized", True)
    )
    assert "no way back to ZooKeeper" in finalized.action
    unknown = migration_run_refusal("k1", "r4", None)
    assert "No folder of that run" in unknown.cause and '"direction": "back"' in unknown.action
