"""What the approval step records while it waits and once a person answered (issue 31): the decision
from an answer, the time-out, the change log, when a try meets the request an earlier try put to
Airflow, the notice that tells the approvers, and how the trigger ends the task with the decision.
The waits themselves run on the production harness (tests/integration/test_production_approval_race.py)
and under ``airflow dags test`` (tests/integration/test_approval_dag.py)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.alerts.approval import notice_content
from airflow_provider_kafka_zk.alerts.render import render_email, render_text, slack_message
from airflow_provider_kafka_zk.kafka.approval import (
    change_log_of,
    same_wait,
    timed_out,
    with_answer,
)
from airflow_provider_kafka_zk.triggers.approval import SKIPMIXIN_KEY, PlanAnswerTrigger

SHA = "5e" * 32
RUN = "manual__2026-11-29T03:43:26.879457+00:00"
PENDING = {
    "format": "kafka-zk-plan-approval",
    "decision": "pending",
    "dag_id": "kafka_zk_pre_maintenance_drain",
    "run_id": RUN,
    "task_id": "approve",
    "try_number": 1,
    "cluster": "prod",
    "plan_dir": "/a/prod/drain/r1",
    "plan": {"sha256": SHA},
    "requested_at": "2026-11-29T03:43:40+00:00",
    "asked_at": "2026-11-29T03:43:41+00:00",
    "decided_at": None,
    "decided_by": None,
    "comment": None,
    "approvers": ["alice", "role:op"],
    "timeout_s": 3600.0,
    "run_url": f"http://af:8080/dags/kafka_zk_pre_maintenance_drain/runs/{RUN}",
    "approval_url": f"http://af:8080/dags/kafka_zk_pre_maintenance_drain/runs/{RUN}/tasks/approve/required_actions?map_index=-1",
    "approve": "curl -X PATCH ... Approve",
    "reject": "curl -X PATCH ... Reject",
}
ALICE = {"id": "alice", "name": "alice"}


def test_only_exactly_approve_approves_and_the_answer_is_recorded_as_given():
    approved = with_answer(
        PENDING, chosen=["Approve"], by=ALICE, at="2026-11-29T04:00:00+00:00", comment="ok"
    )
    assert (approved["decision"], approved["decided_by"], approved["decided_at"], approved["comment"]) == (
        "approved",
        ALICE,
        "2026-11-29T04:00:00+00:00",
        "ok",
    )
    assert approved["plan"] == PENDING["plan"] and PENDING["decision"] == "pending"  # a new record
    for chosen in (["Reject"], [], ["Approve", "Reject"]):
        assert with_answer(PENDING, chosen=chosen, by=ALICE, at="t", comment="")["decision"] == "rejected"
    assert with_answer(PENDING, chosen=["Reject"], by=ALICE, at="t", comment="")["comment"] is None
    late = timed_out(PENDING, "2026-11-29T04:43:40+00:00")
    assert (late["decision"], late["decided_by"], late["decided_at"]) == (
        "timed_out",
        None,
        "2026-11-29T04:43:40+00:00",
    )


def test_a_decision_is_logged_in_the_run_s_change_log_of_the_try_that_took_it():
    assert change_log_of(PENDING) is None
    assert change_log_of({**PENDING, "decision": "not_needed"}) is None
    name, log = change_log_of(
        {**with_answer(PENDING, chosen=["Reject"], by=ALICE, at="t", comment="no"), "try_number": 2}
    )
    assert name == "changes-approve-2.json"
    assert log["run"] == {"dag_id": PENDING["dag_id"], "run_id": RUN, "task_id": "approve"}
    assert [(c["op"], c["decision"], c["by"], c["plan_sha256"]) for c in log["changes"]] == [
        ("approval", "rejected", ALICE, SHA)
    ]


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({}, True),
        ({"decision": "approved"}, True),  # decided: the decision stands for this plan in this run
        ({"decision": "timed_out"}, True),
        ({"asked_at": None}, False),  # written before the request existed: ask
        ({"run_id": "manual__other"}, False),
        ({"task_id": "approve_again"}, False),
        ({"plan": {"sha256": "00" * 32}}, False),  # a new plan is a new question
        ({"decision": "not_required"}, False),
        ({"decision": "not_needed"}, False),
    ],
)
def test_a_try_meets_the_request_of_an_earlier_try_only_for_the_same_run_task_and_plan(change, same):
    where = {"dag_id": PENDING["dag_id"], "run_id": RUN, "task_id": "approve", "plan_sha256": SHA}
    assert same_wait({**PENDING, **change}, **where) is same
    assert same_wait(None, **where) is False and same_wait("garbage", **where) is False


def test_the_notice_names_the_plan_its_hash_the_run_who_decides_and_links_the_approval_page(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://af:8080")
    headline = "Drain brokers [2] of cluster prod before they stop: 3 partition(s) <of> 1 topic(s)"
    content = notice_content(PENDING, headline=headline, title="Drain")
    assert content["subject"].startswith(
        f"[kafka-zk] prod: approval needed: Drain plan sha256 {SHA[:16]}… - Drain"
    )
    approval = content["approval"]
    assert approval["expires_at"] == "2026-11-29T04:43:40+00:00"
    assert approval["request_url"] == (
        "http://af:8080/api/v2/dags/kafka_zk_pre_maintenance_drain/dagRuns/"
        "manual__2026-11-29T03%3A43%3A26.879457%2B00%3A00/taskInstances/approve/-1/hitlDetails"
    )
    text = render_text(content)
    for expected in (headline, SHA, RUN, PENDING["approval_url"], approval["request_url"], "alice, role:op"):
        assert expected in text, expected
    subject, html = render_email(content)
    assert subject == content["subject"]
    assert "&lt;of&gt;" in html and "<of>" not in html  # escaped like every alert
    assert f'href="{PENDING["approval_url"]}"' in html.replace("&amp;", "&")
    assert ">Open the approval page</a>" in html and SHA in html
    slack = slack_message(content)
    blocks = " ".join(str(b) for b in slack["blocks"])
    assert f"<{PENDING['approval_url']}|Approval page>" in blocks and SHA in blocks
    assert "curl -X PATCH ... Approve" in blocks and "&lt;of&gt;" in blocks


def test_the_trigger_ends_the_task_with_the_decision_and_skips_the_writes_unless_approved():
    trigger = PlanAnswerTrigger(
        ti_id="01a22566-8ab3-762f-b09b-68a0c3f5ccf9",
        record=PENDING,
        skip=["stop_if_dry_run"],
        deadline=0.0,
        xcom_key="approval",
    )
    classpath, kwargs = trigger.serialize()
    assert PlanAnswerTrigger(**kwargs).serialize() == (classpath, kwargs)
    approved = trigger._end(with_answer(PENDING, chosen=["Approve"], by=ALICE, at="t", comment=None))
    assert (approved.task_instance_state, approved.xcoms) == ("success", None)
    for decided in (
        with_answer(PENDING, chosen=["Reject"], by=ALICE, at="t", comment=None),
        timed_out(PENDING, "t"),
    ):
        end = trigger._end(decided)
        assert (end.task_instance_state, end.xcoms) == (
            "success",
            {SKIPMIXIN_KEY: {"skipped": ["stop_if_dry_run"]}},
        )
