"""The pure core of approving the exact plan (issue 25): the plan hash and what it covers, what the
person is shown, the decision texts, approvers, and the cluster file's settings."""

from __future__ import annotations

import hashlib
import json

import pytest

from airflow_provider_kafka_zk.clusters import ClusterFileError, load_clusters
from airflow_provider_kafka_zk.kafka.approval import (
    Decision,
    batch_seconds_at_rate,
    batch_throttles,
    digest_differences,
    not_approved_text,
    plan_digest,
    reassignment_summary,
    repair_summary,
    resolve_approvers,
    respond_commands,
)
from airflow_provider_kafka_zk.kafka.reassignment import plan_throttles
from airflow_provider_kafka_zk.kafka.znodes import TopicAssignment

PLAN = json.dumps({"format": "kafka-zk-drain-plan", "batches": [[{"topic": "a", "partition": 0}]]}).encode()
ROLLBACK = b'{"version":1,"partitions":[]}'
SETTINGS = {"execute": {"throttle_bytes_per_sec": 52428800, "kafka_zookeeper_conn_id": "zk"}}


def test_the_plan_hash_covers_every_byte_of_the_plan_and_rollback_and_the_writing_settings():
    base = plan_digest({"plan.json": PLAN, "rollback.json": ROLLBACK}, SETTINGS)
    assert base.files == {
        "plan.json": hashlib.sha256(PLAN).hexdigest(),
        "rollback.json": hashlib.sha256(ROLLBACK).hexdigest(),
    }
    # the same inputs, however a template rendered a number or an empty value: the same hash
    same = plan_digest(
        {"plan.json": PLAN, "rollback.json": ROLLBACK},
        {"execute": {"throttle_bytes_per_sec": 52428800.0, "kafka_zookeeper_conn_id": " zk "}},
    )
    assert same.sha256 == base.sha256
    changed = [
        plan_digest({"plan.json": PLAN + b" ", "rollback.json": ROLLBACK}, SETTINGS),
        plan_digest({"plan.json": PLAN, "rollback.json": ROLLBACK.replace(b"[]", b"[ ]")}, SETTINGS),
        plan_digest({"plan.json": PLAN, "rollback.json": None}, SETTINGS),
        plan_digest(
            {"plan.json": PLAN, "rollback.json": ROLLBACK},
            {"execute": {**SETTINGS["execute"], "throttle_bytes_per_sec": 1048576}},
        ),
        plan_digest({"plan.json": PLAN, "rollback.json": ROLLBACK}, {}),
    ]
    assert len({base.sha256, *(d.sha256 for d in changed)}) == 6


def test_differences_name_the_file_or_setting_that_changed():
    approved = plan_digest({"plan.json": PLAN, "rollback.json": ROLLBACK}, SETTINGS)
    assert digest_differences(approved, approved) == []
    edited = plan_digest({"plan.json": PLAN + b"\n", "rollback.json": None}, SETTINGS)
    problems = digest_differences(approved, edited)
    assert problems[0] == (
        f"plan.json changed: approved sha256 {approved.files['plan.json']}, now {edited.files['plan.json']}"
    )
    assert problems[1].startswith("rollback.json is gone")
    faster = plan_digest(
        {"plan.json": PLAN, "rollback.json": ROLLBACK},
        {"execute": {**SETTINGS["execute"], "throttle_bytes_per_sec": "104857600"}},
    )
    assert digest_differences(approved, faster, task_id="execute") == [
        "task execute's throttle_bytes_per_sec is '104857600', the approved plan had 52428800"
    ]
    assert digest_differences(approved, faster, task_id="move_back") == []  # another task's setting


def _move(topic: str, partition: int, current: list[int], target: list[int], size: int) -> dict:
    return {"topic": topic, "partition": partition, "current": current, "target": target, "size_bytes": size}


DRAIN = {
    "format": "kafka-zk-drain-plan",
    "cluster": "prod",
    "identity": {"cluster_id": "c", "zookeeper_hosts": ["zk1:2181"], "chroot": "/kafka"},
    "request": {"brokers": [2], "scope": "rf1"},
    "batches": [
        [_move("orders", 0, [2], [0], 100 * 2**20), _move("orders", 3, [2], [1], 50 * 2**20)],
        [_move("logs", 1, [2], [0], 10 * 2**20)],
    ],
    "unmovable": [],
    "unsatisfiable": [],
}


def test_the_drain_summary_says_what_changes_every_write_the_throttles_how_long_and_the_undo():
    summary = reassignment_summary(
        DRAIN,
        {"partitions": [{}, {}, {}]},
        plan_dir="/a/prod/drain/run1",
        throttle_bytes_per_sec=10 * 2**20,
        batch_timeout_s=21600,
        zookeeper="zk1:2181/kafka",
    )
    assert summary.headline.startswith(
        "Drain brokers [2] of cluster prod before they stop: 3 partition(s) of 2 topic(s)"
    )
    sections = dict(summary.sections)
    assert sections["What will change"][0] == "orders-0: replicas [2] -> [0] (100.0 MiB)"
    writes = sections["ZooKeeper writes, in order"]
    assert writes[0].startswith(
        "batch 1/2: set /config/topics/orders and /config/brokers/0, /config/brokers/1, /config/brokers/2"
    )
    assert "create /admin/reassign_partitions with 2 partition(s)" in writes[0]
    assert sections["Brokers restarted"] == ("none: this run restarts no broker",)
    assert (
        "batch 1: /config/topics/orders: leader.replication.throttled.replicas=0:2,3:2, "
        in sections["Throttles"][0]
    )
    # at 10 MiB/s the busiest broker of batch 1 sends 150 MiB (15 s), of batch 2 10 MiB (1 s)
    assert sections["Expected duration"][0].startswith("at least 16 s of copying at 10.0 MiB/s per broker")
    assert (
        "kafka-reassign-partitions --bootstrap-server BROKER_HOST:9092 --execute"
        in sections["Rollback and how to undo"][1]
    )
    body = summary.markdown(plan_digest({"plan.json": b"{}"}), "/a/prod/drain/run1")
    assert body.startswith("**Drain brokers [2]") and "### Plan hash\n- sha256 `" in body


def test_the_summary_names_the_undo_dag_first_and_the_hand_commands_as_the_fallback():
    command = (
        'airflow dags trigger kafka_zk_undo --conf \'{"cluster": "prod", "run_id": "r", "dry_run": true}\''
    )
    summary = reassignment_summary(
        DRAIN,
        {"version": 1, "partitions": []},
        plan_dir="/a/prod/drain/run1",
        throttle_bytes_per_sec=10 * 1024 * 1024,
        batch_timeout_s=None,
        zookeeper="zk1:2181/kafka",
        undo_command=command,
    )
    undo = dict(summary.sections)["Rollback and how to undo"]
    assert undo[1] == f"undo: {command} (dry run first; it checks every partition and waits for approval)"
    assert undo[2].startswith("by hand, only if the undo DAG cannot run (no TLS/SASL client options)")


def test_the_summary_throttles_are_the_executions_own_rule():
    batch = DRAIN["batches"][0]
    topics, brokers = batch_throttles(batch, 1000)
    execution = plan_throttles(
        {("orders", 0): [0], ("orders", 3): [1]},
        {"orders": TopicAssignment("orders", {0: (2,), 3: (2,)})},
        1000,
    )
    assert (topics, brokers) == (execution.topic_configs(), list(execution.broker_rates))
    assert batch_seconds_at_rate(batch, 2**20) == 150.0


def test_the_repair_summary_lists_root_causes_writes_files_and_restarts_in_order():
    plan = {
        "cluster": "prod",
        "topics": {
            "clicks": {
                "case": "split",
                "reason": "replicas hold two ids",
                "why": "file_reset",
                "strategy": "file_reset",
            },
            "ok": {"case": "consistent", "reason": "agree", "why": "nothing to do", "strategy": None},
        },
        "refused": {},
        "steps": [
            {
                "kind": "write_topic_id",
                "path": "/brokers/topics/clicks",
                "old_topic_id": "X",
                "topic_id": "Y",
                "expected_version": 3,
            },
            {
                "kind": "reset_files",
                "broker_id": 4,
                "files": [{"path": "/d/clicks-0/partition.metadata", "topic_id_on_disk": "Z"}],
            },
            {"kind": "restart_broker", "broker_id": 4, "is_controller": False, "topics": ["clicks"]},
            {"kind": "restart_broker", "broker_id": 1, "is_controller": True, "topics": ["clicks"]},
        ],
    }
    summary = repair_summary(
        plan,
        {"znodes": [{"restore": "zookeeper-shell.sh zk set /brokers/topics/clicks '{...}'"}]},
        plan_dir="/a/prod/topic-id-repair/r",
        restart_command="sudo systemctl restart kafka",
        health_timeout_s=120,
        gate_timeout_s=900,
    )
    assert (
        summary.headline
        == "Repair the topic ids of 1 topic(s) on cluster prod (KAFKA-14190): clicks (split -> file_reset)"
    )
    sections = dict(summary.sections)
    assert (
        sections["What will change (root cause first)"][0]
        == "clicks: SPLIT: replicas hold two ids; file_reset"
    )
    assert sections["ZooKeeper writes, in order"] == (
        "set /brokers/topics/clicks: topic_id X -> Y (versioned, expected version 3; partitions unchanged)",
    )
    assert sections["Broker files removed"][0].startswith(
        "broker 4: /d/clicks-0/partition.metadata (holds Z;"
    )
    restarts = sections["Brokers restarted, in this order"]
    assert restarts[0].startswith("1. broker 4: sudo systemctl restart kafka;")
    assert restarts[1].startswith("2. broker 1 (the controller, last): sudo systemctl restart kafka;")
    assert "up to 15 min per restarted broker (2: up to 30 min)" in sections["Expected duration"][0]
    assert "zookeeper-shell.sh zk set /brokers/topics/clicks" in sections["Rollback and how to undo"][1]


def test_not_approved_texts_say_who_when_why_and_that_nothing_changed():
    record = {
        "dag_id": "kafka_zk_pre_maintenance_drain",
        "cluster": "prod",
        "decision": "rejected",
        "decided_by": {"id": "alice", "name": "alice"},
        "decided_at": "2026-11-26T10:00:00+00:00",
        "comment": "not during the sale",
        "plan": {"sha256": "ab" * 32},
        "plan_dir": "/a/prod/drain/r",
        "run_url": "http://airflow/dags/d/runs/r",
    }
    text = not_approved_text(record)
    assert text.splitlines()[:3] == [
        "kafka_zk_pre_maintenance_drain on cluster prod: the plan was REJECTED by alice at 2026-11-26T10:00:00+00:00.",
        "Nothing was changed: no task after the approval wrote to ZooKeeper or to a broker.",
        "Comment: not during the sale",
    ]
    timed_out = not_approved_text(
        {**record, "decision": "timed_out", "decided_by": None, "comment": None, "timeout_s": 60}
    )
    assert "NOT APPROVED IN TIME: nobody decided within 60 s" in timed_out
    assert [d for d in Decision if d.lets_writes_run] == [Decision.APPROVED, Decision.NOT_REQUIRED]


def test_approvers_are_users_or_every_user_of_a_role():
    roles = {"op": ["bob", "carol"], "admin": ["alice"]}
    assert resolve_approvers(["alice", "role:OP", "bob"], roles) == [
        {"id": "alice", "name": "alice"},
        {"id": "bob", "name": "bob"},
        {"id": "carol", "name": "carol"},
    ]
    with pytest.raises(ValueError, match="no user has role 'viewer'"):
        resolve_approvers(["role:viewer"], roles)
    with pytest.raises(ValueError, match="cannot be listed by role"):
        resolve_approvers(["role:op"], None)
    assert resolve_approvers([], None) == []


def test_the_rest_calls_are_quoted_for_a_shell():
    calls = respond_commands(
        "http://af:8080/", "kafka_zk_pre_maintenance_drain", "manual__2026-11-26T10:00:00+00:00", "approve"
    )
    assert calls["approve"].startswith(
        "curl -X PATCH http://af:8080/api/v2/dags/kafka_zk_pre_maintenance_drain/dagRuns/"
        "manual__2026-11-26T10%3A00%3A00%2B00%3A00/taskInstances/approve/-1/hitlDetails"
    )
    assert '"chosen_options": ["Reject"]' in calls["reject"]


def test_the_cluster_file_approval_settings(tmp_path, monkeypatch):
    path = tmp_path / "clusters.toml"
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(path))
    path.write_text(
        '[clusters.a]\n[clusters.b]\nrequire_approval = false\napprovers = ["alice", "role:op"]\napproval_timeout_s = 600\n'
    )
    clusters = load_clusters()
    assert (
        clusters["a"]["require_approval"],
        clusters["a"]["approvers"],
        clusters["a"]["approval_timeout_s"],
    ) == (True, [], 86400)
    assert (
        clusters["b"]["require_approval"],
        clusters["b"]["approvers"],
        clusters["b"]["approval_timeout_s"],
    ) == (
        False,
        ["alice", "role:op"],
        600,
    )
    for bad, message in (
        ('require_approval = "no"', "require_approval must be true or false"),
        ("approvers = [1]", "approvers must be a list"),
        ('approvers = ["role:"]', "names no role"),
        ("approval_timeout_s = 0", "approval_timeout_s must be a number of seconds > 0"),
    ):
        path.write_text(f"[clusters.a]\n{bad}\n")
        with pytest.raises(ClusterFileError, match=message):
            load_clusters()
