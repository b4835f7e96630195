"""The stored plan of the ``kafka_zk_deletion_cleanup`` DAG (pure parts, issue 31 point 3): what it
lists and why each item is safe, the undo, the summary a person approves, what "the cluster moved
since the plan" means, the report, and the findings that link to the DAG with the exact conf."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest

from airflow_provider_kafka_zk.kafka.deletion import Verdict
from airflow_provider_kafka_zk.kafka.deletion_cleanup import (
    CLEANUP_DAG,
    PLAN_FORMAT,
    ConfigZnode,
    Leftover,
    changes_since_plan,
    cleanup_commands,
    cleanup_documents,
    cleanup_report,
    plan_cleanup,
    planned_steps,
)
from airflow_provider_kafka_zk.kafka.steps import ThrottleClear

IDENTITY = {"cluster_id": "CID-1", "zookeeper_hosts": ["zk1:2181"], "chroot": "/prod", "brokers": {}}
LOG = "/data/kafka"


def _plan(running: frozenset[int] = frozenset({0}), allow: bool = False):
    leftovers = [
        Leftover(2, "old-logs", LOG, "old-logs-0", "normal"),  # stopped broker: moves
        Leftover(2, "old-logs", LOG, "old-logs-1.abc-delete", "delete"),
        Leftover(0, "gone", LOG, "gone-0", "normal"),  # running broker: left, unless allowed
        Leftover(0, "gone", LOG, "gone-1.abc-delete", "delete"),  # closed by Kafka: may move under it
    ]
    znodes = {"old-logs": ConfigZnode(3, b'{"version":1,"config":{}}'), "gone": ConfigZnode(0, b"{}")}
    return plan_cleanup(
        leftovers, znodes, reappeared={}, running=running, ts="RUNKEY", allow_running_broker_orphans=allow
    )


def _documents(plan, running=frozenset({0})):
    checks = {
        m.id: {
            "host": f"10.0.0.{m.broker_id}",
            "results": [
                {
                    "source": d.path,
                    "destination": f"/data/kafka-quarantine/RUNKEY/{d.name}",
                    "status": "would_move",
                }
                for d in m.dirs
            ],
        }
        for m in plan.moves
    }
    return cleanup_documents(
        plan,
        cluster="prod",
        identity=IDENTITY,
        topics=["gone", "old-logs"],
        verdicts=[
            {
                "topic": "old-logs",
                "verdict": "incomplete",
                "causes": ["partition_dirs_left"],
                "description": "d1",
            },
            {"topic": "gone", "verdict": "incomplete", "causes": ["config_znode_left"], "description": "d2"},
        ],
        coverage={"status": "complete"},
        live_brokers=sorted(running),
        hosts={0: "10.0.0.0", 2: "10.0.0.2"},
        meta_cluster_ids={0: ["CID-1"], 2: ["CID-1"]},
        host_checks=checks,
        ts="RUNKEY",
        quarantine_dir=None,
        allow_running_broker_orphans=False,
    )


def test_the_plan_lists_every_move_and_znode_with_the_identity_and_why_each_is_safe():
    document, rollback, summary = _documents(_plan())
    assert document["format"] == PLAN_FORMAT and document["identity"]["cluster_id"] == "CID-1"
    by_source = {d["source"]: d for d in document["directories"]}
    assert set(by_source) == {f"{LOG}/old-logs-0", f"{LOG}/old-logs-1.abc-delete", f"{LOG}/gone-1.abc-delete"}
    stopped = by_source[f"{LOG}/old-logs-0"]
    assert (
        stopped["destination"] == "/data/kafka-quarantine/RUNKEY/old-logs-0" and stopped["host"] == "10.0.0.2"
    )
    assert "topic old-logs is deleted" in stopped["why"] and "broker 2 is stopped" in stopped["why"]
    assert "cluster.id CID-1" in stopped["why"] and "never deleted" in stopped["why"]
    under_running = by_source[f"{LOG}/gone-1.abc-delete"]["why"]
    assert "broker 0 runs; a delete directory is no log it serves" in under_running
    # the live-named directory under running broker 0 stays, and so does gone's config znode
    assert (
        document["left_alone"][0]["source"] == f"{LOG}/gone-0"
        and "running" in document["left_alone"][0]["why"]
    )
    assert [z["path"] for z in document["znodes"]] == ["/config/topics/old-logs"]
    assert "at version 3" in document["znodes"][0]["why"] or "version 3" in document["znodes"][0]["why"]
    assert {"path": "/config/topics/gone", "status": "kept"}.items() <= document["left_alone"][1].items()
    # the undo: every move and the znode's bytes and version
    assert {(m["source"], m["destination"]) for m in rollback["moves"]} == {
        (d["source"], d["destination"]) for d in document["directories"]
    }
    [saved] = rollback["znodes"]
    assert (saved["path"], saved["version"], saved["data_base64"]) == (
        "/config/topics/old-logs",
        3,
        "eyJ2ZXJzaW9uIjoxLCJjb25maWciOnt9fQ==",
    )
    assert "zk1:2181/prod" in rollback["undo_znodes"]
    assert summary.startswith(
        "Clean up the leftovers of deleted topic(s) gone, old-logs on cluster prod (/cluster/id CID-1"
    )
    assert "3 director(ies) into quarantine on brokers 0 and 2, 1 config znode(s) deleted" in summary
    assert "old-logs: INCOMPLETE (partition_dirs_left): d1" in summary
    assert planned_steps(json.loads(json.dumps(document)))  # it reads back


def test_a_stored_plan_is_read_back_only_as_a_cleanup_plan():
    document, _, _ = _documents(_plan())
    with pytest.raises(ValueError, match="not a deletion cleanup plan"):
        planned_steps({**document, "format": "kafka-zk-drain-plan"})
    with pytest.raises(ValueError, match="only quarantine moves and config znode deletions"):
        planned_steps(
            {**document, "steps": [ThrottleClear(id="x", entity_type="topics", entity_name="t").to_dict()]}
        )


def _now(document, **changes):
    base = {
        "completed": set(),
        "verdicts": {"old-logs": "incomplete", "gone": "incomplete"},
        "leftovers": _leftovers(document),
        "running": {0},
        "meta_cluster_ids": {0: ["CID-1"], 2: ["CID-1"]},
    }
    return changes_since_plan(document, **{**base, **changes})


def test_the_cluster_as_the_plan_saw_it_passes_and_every_kind_of_change_is_named():
    document, _, _ = _documents(_plan())
    assert _now(document) == []
    assert _now(document, running={0, 2}) == ["broker 2 is running now, the plan saw it stopped"]
    assert _now(document, meta_cluster_ids={0: ["CID-1"], 2: ["CID-2"]}) == [
        "broker 2's meta.properties carry cluster.id ['CID-2'], the plan saw ['CID-1']"
    ]
    without = {t for t in _leftovers(document) if t[1] != f"{LOG}/old-logs-0"}
    assert _now(document, leftovers=without) == [
        f"broker 2 {LOG}/old-logs-0 is no leftover any more (moved or gone since the plan)"
    ]
    extra = _leftovers(document) | {(2, f"{LOG}/old-logs-7", "normal")}
    assert _now(document, leftovers=extra) == [
        f"broker 2 {LOG}/old-logs-7 is a leftover the plan does not know (new since the plan)"
    ]
    assert _now(document, verdicts={"old-logs": "deleted", "gone": "incomplete"})[0] == (
        "topic old-logs is deleted now, the plan saw it INCOMPLETE"
    )


def _leftovers(document):
    return {
        (d["broker_id"], d["source"], "delete" if d["source"].endswith("-delete") else "normal")
        for d in document["directories"]
    } | {(0, f"{LOG}/gone-0", "normal")}


def test_a_resumed_execute_expects_the_moved_directories_out():
    document, _, _ = _documents(_plan())
    done = next(s["id"] for s in document["steps"] if s.get("broker_id") == 2)
    rest = {t for t in _leftovers(document) if t[0] != 2}
    assert _now(document, completed={done}, leftovers=rest) == []
    assert (
        _now(
            document, completed={done}, leftovers=rest, verdicts={"old-logs": "deleted", "gone": "incomplete"}
        )
        == []
    )


def test_the_findings_link_to_the_cleanup_dag_with_the_exact_conf():
    dry, real = cleanup_commands("prod", ["old-logs", "gone", "old-logs"])
    for command, dry_run in ((dry, True), (real, False)):
        words = shlex.split(command)
        assert words[:4] == ["airflow", "dags", "trigger", CLEANUP_DAG]
        assert json.loads(words[5]) == {"cluster": "prod", "topics": ["gone", "old-logs"], "dry_run": dry_run}


def test_the_deletion_verifiers_finding_names_the_cleanup_dag():
    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    operator = TopicDeletionVerifyOperator(
        task_id="v", cluster="prod", base_path="/tmp", kafka_zookeeper_conn_id="z", ssh_conn_id="s"
    )
    incomplete = SimpleNamespace(topic="old-logs", verdict=Verdict.INCOMPLETE)
    check = SimpleNamespace(
        verdicts=[incomplete],
        all_settled=True,
        deleted_everywhere=lambda v: False,
        describe=lambda v: "old-logs: INCOMPLETE",
    )
    outcome, message = operator._outcome(check)  # type: ignore[arg-type]
    assert outcome == "unsuccessful" and cleanup_commands("prod", ["old-logs"])[1] in message


def test_the_report_says_the_outcome_first_then_what_moved_and_the_verdicts_now():
    document, _, _ = _documents(_plan())
    record = {
        "directories": [
            {"broker_id": 2, "source": f"{LOG}/old-logs-0", "destination": "/q/old-logs-0", "status": "moved"}
        ],
        "znodes": [{"path": "/config/topics/old-logs", "status": "deleted", "version": 3}],
    }
    ok = cleanup_report(document, record, [{"description": "old-logs: DELETED"}], [])
    assert ok.splitlines()[0].endswith("Verification: OK, every topic is deleted everywhere")
    assert (
        f"broker 2: {LOG}/old-logs-0 -> /q/old-logs-0" in ok
        and "/config/topics/old-logs (was version 3)" in ok
    )
    left = cleanup_report(document, record, [], ["gone: INCOMPLETE"])
    assert "NOT DONE: 1 problem(s)" in left.splitlines()[0] and "  - gone: INCOMPLETE" in left
