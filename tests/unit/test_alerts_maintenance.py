"""The alert of a failed maintenance run, its pure parts: where the run stopped, what its change logs
say it changed, what to do next, the rendered e-mail / text / Slack message; and the wiring: every
manual DAG (drain, post-maintenance, topicId repair, pre-restart check, KRaft readiness) ends with
the alert teardown after every other task, and every task records its error for it."""

from __future__ import annotations

import importlib
import json
import re

import pytest

from airflow_provider_kafka_zk.alerts import incidents as inc
from airflow_provider_kafka_zk.alerts import maintenance as mt
from airflow_provider_kafka_zk.alerts.render import alert_content, render_email, render_text, slack_message
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT

ORDER = [
    "safety_snapshot",
    "brokers",
    "inventory",
    "plan",
    "stop_if_dry_run",
    "execute",
    "clear_throttles",
    "verify",
]
STATES = {
    "safety_snapshot": {-1: "success"},
    "brokers": {-1: "success"},
    "inventory": {0: "success", 1: "success", 2: "success"},
    "plan": {-1: "success"},
    "stop_if_dry_run": {-1: "success"},
    "execute": {-1: "failed"},
    "clear_throttles": {-1: "success"},
    "verify": {-1: "upstream_failed"},
}


def _log(task: str, changes: list[dict]) -> dict:
    return {"format": "kafka-zk-change-log", "run": {"task_id": task}, "changes": changes}


LOGS = {
    "changes-execute-1.json": _log(
        "execute",
        [
            {"at": "2026-11-26T10:00:00", "op": "CreateOp", "path": LEASE_ROOT},
            {"at": "2026-11-26T10:00:01", "op": "CreateOp", "path": LEASE_PATH},
            {
                "at": "2026-11-26T10:00:02",
                "op": "SetDataOp",
                "path": "/config/topics/orders",
                "expected_version": 0,
                "new_version": 1,
            },
            {
                "at": "2026-11-26T10:00:03",
                "op": "CreateOp",
                "path": "/admin/reassign_partitions",
                "bytes": 90,
            },
            {"at": "2026-11-26T10:00:03", "op": "CheckVersionOp", "path": LEASE_PATH, "expected_version": 0},
        ],
    ),
    "changes-clear_throttles-1.json": _log(
        "clear_throttles",
        [
            {
                "at": "2026-11-26T10:05:00",
                "op": "SetDataOp",
                "path": "/config/topics/orders",
                "expected_version": 1,
            }
        ],
    ),
}


def test_steps_say_where_the_run_stopped_in_dag_order():
    steps = mt.steps(ORDER, STATES)
    assert [(s["task_id"], s["outcome"]) for s in steps] == [
        ("safety_snapshot", mt.DONE),
        ("brokers", mt.DONE),
        ("inventory", mt.DONE),
        ("plan", mt.DONE),
        ("stop_if_dry_run", mt.DONE),
        ("execute", mt.FAILED),
        ("clear_throttles", mt.DONE),
        ("verify", mt.NOT_RUN),
    ]
    assert steps[2]["count"] == "3 mapped"
    assert mt.stopped_at(steps) == ["execute"]
    partly = mt.steps(["inventory", "report"], {"inventory": {0: "success", 1: "failed", 2: "failed"}})
    assert partly[0] == {"task_id": "inventory", "outcome": mt.FAILED, "count": "2 of 3"}
    assert partly[1]["outcome"] == mt.NOT_RUN


def test_change_logs_count_the_cluster_writes_and_see_the_lease():
    changes = mt.change_logs(LOGS)
    # the lease's own znodes are not changes to the cluster
    assert changes["writes"] == 3 and changes["lease"] == "held"
    first, second = changes["logs"]
    assert (first["name"], first["task"], first["try"], first["writes"]) == (
        "changes-clear_throttles-1.json",
        "clear_throttles",
        1,
        1,
    )
    assert second["changes"] == [
        "SetData /config/topics/orders (version 0 -> 1)",
        "Create /admin/reassign_partitions",
    ]
    released = {
        **LOGS,
        "changes-verify-1.json": _log(
            "verify", [{"at": "2026-11-26T10:09:00", "op": "DeleteOp", "path": LEASE_PATH}]
        ),
    }
    assert mt.change_logs(released)["lease"] == "released"
    many = {
        "changes-execute-2.json": _log("execute", [{"op": "SetDataOp", "path": f"/x/{i}"} for i in range(40)])
    }
    (log,) = mt.change_logs(many)["logs"]
    assert len(log["changes"]) == mt.MAX_CHANGES_SHOWN and log["more"] == 40 - mt.MAX_CHANGES_SHOWN
    assert mt.change_logs({}) == {"logs": [], "writes": 0, "lease": None}


def test_next_steps_finish_or_undo_with_the_runs_own_artefacts():
    text, commands = mt.next_steps(
        mt.DRAIN,
        cluster="eu1",
        run_id="manual__2026-11-26T10:00:00+00:00",
        changed=True,
        dry_run=False,
        throttles_cleared=False,
        rollback_artefacts=["rollback.json"],
        lease="held",
    )
    joined = " ".join(text)
    assert "clear the failed task" in joined and "only while the drained brokers are still up" in joined
    assert "still holds the cluster's maintenance lease" in joined and "throttles.json" in joined
    undo, move_back = commands
    # the undo DAG with the exact conf first (a dry run), no hand-written zookeeper-shell/kafka-* command
    assert undo["command"].startswith("airflow dags trigger kafka_zk_undo --conf ")
    conf = json.loads(undo["command"].split("--conf ", 1)[1].strip("'"))
    assert conf == {
        "cluster": "eu1",
        "run_id": "manual__2026-11-26T10:00:00+00:00",
        "dag_id": "kafka_zk_pre_maintenance_drain",
        "dry_run": True,
    }
    assert "kafka-reassign-partitions" not in joined and "zookeeper-shell" not in joined
    assert move_back["command"].startswith("airflow dags trigger kafka_zk_post_maintenance --conf ")
    conf = json.loads(move_back["command"].split("--conf ", 1)[1].strip("'"))
    assert conf == {"cluster": "eu1", "drain_run": "manual__2026-11-26T10:00:00+00:00", "dry_run": True}
    for dag_id in (mt.POST_MAINTENANCE, mt.TOPIC_ID_REPAIR):
        text, commands = mt.next_steps(
            dag_id,
            cluster="eu1",
            run_id="r1",
            changed=True,
            dry_run=False,
            throttles_cleared=None,
            rollback_artefacts=["rollback.json"],
        )
        (undo,) = commands
        conf = json.loads(undo["command"].split("--conf ", 1)[1].strip("'"))
        assert conf == {"cluster": "eu1", "run_id": "r1", "dag_id": dag_id, "dry_run": True}
        assert "kafka-reassign-partitions" not in " ".join(text)
    # nothing written: nothing to undo, never a move-back
    for kwargs in ({"changed": False, "dry_run": False}, {"changed": True, "dry_run": True}):
        text, commands = mt.next_steps(
            mt.DRAIN, cluster="eu1", run_id="r", throttles_cleared=None, rollback_artefacts=[], **kwargs
        )
        assert commands == [] and "Nothing was changed" in text[0]
    text, commands = mt.next_steps(
        mt.PRE_RESTART_CHECK,
        cluster="eu1",
        run_id="r",
        changed=False,
        dry_run=None,
        throttles_cleared=None,
        rollback_artefacts=[],
    )
    assert commands == [] and "only reads" in text[0]


def test_headline_and_incidents():
    assert mt.headline(
        dag_id=mt.DRAIN,
        cluster="eu1",
        failed=["execute"],
        changed=True,
        writes=3,
        lease="held",
        dry_run=False,
    ) == (
        "kafka_zk_pre_maintenance_drain on eu1 FAILED at execute after 3 ZooKeeper write(s) to the cluster; "
        "this run still holds the cluster's maintenance lease."
    )
    assert "before changing anything" in mt.headline(
        dag_id=mt.DRAIN, cluster="eu1", failed=["plan"], changed=False, writes=0, lease=None, dry_run=False
    )
    assert "only reads" in mt.headline(
        dag_id=mt.KRAFT_READINESS,
        cluster="eu1",
        failed=["readiness"],
        changed=False,
        writes=0,
        lease=None,
        dry_run=None,
    )
    (execute, inventory) = mt.failed_task_incidents(
        {"execute": [-1], "inventory": [1, 2]},
        {"execute": {-1: "DrainError: batch 1/2 timed out"}, "inventory": {1: "SSHException: x"}},
        {"execute": "http://a/log"},
        changed=True,
    )
    assert execute.severity == "critical" and execute.summary == "DrainError: batch 1/2 timed out"
    assert execute.link == "http://a/log"
    assert inventory.title == "2 mapped instance(s) of task inventory failed"
    assert inventory.facts == (("map index 1", "SSHException: x"),)


def test_failure_record_is_the_exception_as_the_log_shows_it_and_bounded():
    assert mt.failure_record(ValueError("bad <input>"), 2) == {
        "error": "ValueError: bad <input>",
        "try_number": 2,
    }
    long = mt.failure_record(RuntimeError("x" * 10_000))
    assert len(long["error"]) == mt.MAX_ERROR_CHARS
    assert "marked failed" in mt.failure_record(None)["error"]


def _maintenance_content() -> dict:
    steps = mt.steps(ORDER, STATES)
    changes = mt.change_logs(LOGS)
    text, commands = mt.next_steps(
        mt.DRAIN,
        cluster="eu1",
        run_id="manual__1",
        changed=True,
        dry_run=False,
        throttles_cleared=True,
        rollback_artefacts=["rollback.json"],
        lease=changes["lease"],
    )
    folder_url = "http://af/kafka-zk/runs/kafka_zk_pre_maintenance_drain/manual__1/plan/eu1/drain/k/"
    incidents = inc.merge(
        "eu1",
        mt.failed_task_incidents(
            {"execute": [-1]}, {"execute": {-1: "DrainError: <b>batch</b> timed out"}}, {}, changed=True
        ),
    )
    return alert_content(
        cluster="eu1",
        dag_id=mt.DRAIN,
        run_id="manual__1",
        run_url="http://af/dags/kafka_zk_pre_maintenance_drain/runs/manual__1",
        report_url=None,
        classified=[inc.Classified(i, inc.NEW) for i in incidents],
        failed_tasks=["execute"],
        maintenance={
            "headline": mt.headline(
                dag_id=mt.DRAIN,
                cluster="eu1",
                failed=["execute"],
                changed=True,
                writes=changes["writes"],
                lease=changes["lease"],
                dry_run=False,
            ),
            "triggered_by": "alice",
            "dry_run": False,
            "params": json.dumps({"cluster": "eu1", "brokers": [2], "dry_run": False}),
            "steps": steps,
            "stopped_at": ["execute"],
            "read_only": False,
            "writes": changes["writes"],
            "lease": changes["lease"],
            "change_logs": [{**log, "url": folder_url + log["name"]} for log in changes["logs"]],
            "rollback": [{"name": "rollback.json", "url": folder_url + "rollback.json"}],
            "folder": "/srv/kafka/eu1/drain/k",
            "folder_url": folder_url,
            "next_steps": text,
            "commands": commands,
            "notes": [],
        },
    )


def test_the_maintenance_email_says_what_failed_where_it_stopped_what_changed_and_how_to_undo():
    content = _maintenance_content()
    subject, html = render_email(content)
    assert subject == (
        "[kafka-zk] eu1: kafka_zk_pre_maintenance_drain on eu1 FAILED at execute after 3 ZooKeeper write(s) "
        "to the cluster; this run still holds the cluster's maintenance lease."
    )
    assert "DrainError: &lt;b&gt;batch&lt;/b&gt; timed out" in html and "<b>batch</b>" not in html  # escaped
    assert "Where it stopped" in html and "What it changed so far" in html and "What to do next" in html
    assert re.search(r"execute</td><td[^>]*>FAILED", html) and re.search(r"verify</td><td[^>]*>not run", html)
    assert "Create /admin/reassign_partitions" in html and "still held" in html
    assert (
        'href="http://af/kafka-zk/runs/kafka_zk_pre_maintenance_drain/manual__1/plan/eu1/drain/k/rollback.json"'
        in html
    )
    assert "Open the run's folder" in html and "Open the Airflow run" in html
    assert "kafka_zk_post_maintenance" in html and "manual__1" in html
    assert "every failed maintenance run pages once" in html
    text = render_text(content)
    assert "Where it stopped:" in text and "FAILED: execute" in text and "rollback.json" in text
    assert "airflow dags trigger kafka_zk_post_maintenance" in text
    message = slack_message(content)
    body = json.dumps(message)
    assert "FAILED: execute" in body and "Create /admin/reassign_partitions" in body
    assert "&lt;b&gt;batch" in body and "kafka_zk_post_maintenance" in body
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in message["blocks"])


def test_the_daily_alert_is_unchanged_by_the_maintenance_parts():
    content = alert_content(
        cluster="eu1", dag_id="d", run_id="r", run_url=None, report_url=None, classified=[]
    )
    assert content["maintenance"] is None
    _, html = render_email(content)
    assert "Where it stopped" not in html and "Unchanged incidents do not page again" in html


MANUAL = {
    "pre_maintenance_drain": mt.DRAIN,
    "post_maintenance": mt.POST_MAINTENANCE,
    "topic_id_repair": mt.TOPIC_ID_REPAIR,
    "pre_restart_check": mt.PRE_RESTART_CHECK,
    "kraft_migration_readiness": mt.KRAFT_READINESS,
    "undo": mt.UNDO,
}


@pytest.mark.parametrize("module", sorted(MANUAL))
def test_every_manual_dag_ends_with_the_alert_teardown(module, monkeypatch, tmp_path):
    from airflow_provider_kafka_zk.alerts.operators import MaintenanceRunAlertOperator, record_failure

    clusters = tmp_path / "clusters.toml"
    clusters.write_text('[clusters.eu1]\nnotify = { kind = "log" }\n')
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
    dag = importlib.import_module(f"airflow_provider_kafka_zk.dags.{module}").build_dag()
    assert dag.dag_id == MANUAL[module] and dag.dag_id in mt.ARTEFACT_KIND
    alert = dag.task_dict["alert"]
    assert isinstance(alert, MaintenanceRunAlertOperator) and alert.is_teardown
    assert (
        alert.trigger_rule == "all_done_setup_success"
    )  # all_done: no setups and alert.cluster == "{{ params.cluster }}"
    others = {t for t in dag.task_dict if t != "alert"}
    assert set(alert.upstream_task_ids) == others and not alert.downstream_task_ids
    for task_id in others:
        assert record_failure in dag.task_dict[task_id].on_failure_callback, task_id


def test_a_plan_a_person_rejected_pages_nobody_but_a_time_out_or_any_write_pages():
    rejected = {
        "decision": "rejected",
        "decided_by": {"name": "alice"},
        "decided_at": "2026-11-26T20:00:00+00:00",
        "comment": "not during the freeze",
    }
    only_report = {"report": [-1]}
    reason = mt.declined_by_a_person(only_report, report_task_id="report", writes=0, approval=rejected)
    assert reason == (
        'not paged: the plan was rejected by alice at 2026-11-26T20:00:00+00:00 ("not during the freeze"); '
        "nothing was changed"
    )
    timed_out = {**rejected, "decision": "timed_out", "decided_by": None}
    assert mt.declined_by_a_person(only_report, report_task_id="report", writes=0, approval=timed_out) is None
    # anything more than the report failed, or the run wrote: it pages as any failed run
    both = {"execute": [-1], "report": [-1]}
    assert mt.declined_by_a_person(both, report_task_id="report", writes=0, approval=rejected) is None
    assert mt.declined_by_a_person(only_report, report_task_id="report", writes=1, approval=rejected) is None
    assert mt.declined_by_a_person(only_report, report_task_id="report", writes=0, approval=None) is None


def test_the_approval_decision_in_a_change_log_is_no_cluster_write():
    decision = {"at": "2026-11-26T20:07:19+00:00", "op": "approval", "path": None, "decision": "rejected"}
    logs = {"changes-approve-1.json": {"changes": [decision], "run": {"task_id": "approve"}}}
    assert mt.change_logs(logs)["writes"] == 0
