"""An answer given the moment the approval page exists is honoured (issue 31), through the production-shape
deployment (PostgreSQL, api-server, scheduler, dag-processor, triggerer; tests/integration/conftest.py)
with both cores kept busy by CPU hogs, as a loaded CI machine or a busy Airflow host is.

Ten runs of ``kafka_zk_test_approval_race`` (the real approval step between a plan and a write,
tests/integration/production_dags/) are triggered at once and answered over REST, Approve and Reject
mixed, at one of two moments: as soon as the request can be read there (``page``: often before the
task has even begun to wait) or as soon as the task waits for it (``waiting``: the moment the UI's
form can be used). Every approved run must go on to its write and succeed; every rejected one must
end as rejected (write skipped, the report failing with who rejected it), never failed by Airflow
and never left waiting. The approvers are told once per run, by e-mail, with the plan's hash and the
approval page.

Why these two moments: Airflow 3.3.2 alone fails a waiting task that an answer resumes on a worker
when the scheduler handles the executor's late event of the workload that parked it after queuing
the resumed one (``waiting``; seen here 7 times in 10 runs), and leaves an answer given while the
task parks unread until its time-out (``page``; seen here once in 10 runs). See
:mod:`airflow_provider_kafka_zk.operators.approval` for both and for the fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.operators._run import run_key

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

DAG = "kafka_zk_test_approval_race"
CLUSTER = "approval"  # the deployment's cluster whose approver is the admin, told by e-mail
APPROVERS = "kafka-approvers@example.com"
ANSWERS = [("Approve" if i % 2 == 0 else "Reject", "page" if i < 5 else "waiting") for i in range(10)]
"""(option, moment) of the ten runs: five of each option, five at each moment."""
RUN_TIMEOUT = 900
WAITING = ("deferred", "awaiting_input")


@dataclass
class Answered:
    run_id: str
    option: str
    moment: str  # page | waiting
    asked_state: str = ""  # the approve task's state when the answer went out
    answered_after_s: float = 0.0  # from the trigger
    outcome: str = ""
    approve_try: int = 0  # the try the approval ended in (2: Airflow failed the first, see above)


@pytest.fixture
def cpu_hogs() -> Iterator[list[int]]:
    """One busy loop per core beside the deployment; stopped by PID."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(30)


def _folder(deployment, run_id: str) -> Path:
    run = deployment.airflow.run(DAG, run_id)
    key = run_key(run_id, datetime.fromisoformat(run["run_after"].replace("Z", "+00:00")))
    return deployment.artefacts / CLUSTER / "approval-race" / key


def test_an_answer_the_moment_the_approval_page_exists_is_honoured(deployment, cpu_hogs):
    airflow = deployment.airflow
    airflow.unpause(DAG)
    started = time.monotonic()
    runs = {}
    for option, moment in ANSWERS:
        run_id = airflow.trigger_rest(DAG, {"cluster": CLUSTER})
        runs[run_id] = Answered(run_id, option, moment)
    deadline = started + RUN_TIMEOUT
    while any(not r.asked_state for r in runs.values()):
        assert time.monotonic() < deadline, {r.run_id: r.asked_state for r in runs.values()}
        ended = {r["dag_run_id"] for r in airflow.runs(DAG) if r["state"] in ("success", "failed")}
        unasked = [r.run_id for r in runs.values() if not r.asked_state and r.run_id in ended]
        assert not unasked, "ended before asking: " + "".join(
            airflow.describe(DAG, u, logs=True) for u in unasked
        )
        for request in airflow.unanswered_approvals(DAG):
            answer = runs.get(request["task_instance"]["dag_run_id"])
            state = request["task_instance"]["state"]
            if answer is None or answer.asked_state or (answer.moment == "waiting" and state not in WAITING):
                continue
            answer.asked_state = state
            airflow.respond(DAG, answer.run_id, "approve", answer.option, f"{answer.option} at once")
            answer.answered_after_s = time.monotonic() - started
    for answer in runs.values():
        expected = "success" if answer.option == "Approve" else "failed"
        try:
            airflow.wait_for_run(DAG, answer.run_id, state=expected, timeout=RUN_TIMEOUT)
            answer.outcome = expected
        except AssertionError as exc:
            answer.outcome = f"WRONG: {exc}"
        [approve] = [ti for ti in airflow.task_instances(DAG, answer.run_id) if ti["task_id"] == "approve"]
        answer.approve_try = int(approve["try_number"])
    lines = [
        f"  {a.option:7} at {a.moment:7} (approve {a.asked_state:9}) {a.answered_after_s:5.1f} s after the "
        f"trigger; approve ended in try {a.approve_try}; run {a.outcome[:600]}"
        for a in runs.values()
    ]
    print(
        f"\n{len(runs)} runs answered at once, {len(cpu_hogs)} CPU hogs, {time.monotonic() - started:.0f} s:"
    )
    print("\n".join(lines))
    assert all(not a.outcome.startswith("WRONG") for a in runs.values()), "\n".join(lines)

    for answer in runs.values():
        states = {
            ti["task_id"]: ti["state"]
            for ti in airflow.task_instances(DAG, answer.run_id)
            if ti["map_index"] == -1
        }
        folder = _folder(deployment, answer.run_id)
        record = json.loads((folder / "approval.json").read_text())
        assert (record["decided_by"]["name"], record["comment"]) == ("admin", f"{answer.option} at once"), (
            record
        )
        change_log = json.loads((folder / f"changes-approve-{record['try_number']}.json").read_text())
        assert [c["decision"] for c in change_log["changes"]] == [record["decision"]]
        report = (folder / "report.txt").read_text()
        if answer.option == "Approve":
            assert set(states.values()) == {"success"}, states
            assert record["decision"] == "approved"
            assert report.startswith("Approved by admin at ") and "written after approval by admin" in report
        else:
            assert states == {"plan": "success", "approve": "success", "write": "skipped", "report": "failed"}
            assert record["decision"] == "rejected"
            assert report.startswith(f"{DAG} on cluster {CLUSTER}: the plan was REJECTED by admin at ")
            assert "Nothing was changed" in report
        # the approvers were told once, with this plan's hash and its approval page
        sha = record["plan"]["sha256"]
        [told] = [m for m in deployment.smtp.messages if answer.run_id in m.html()]
        assert told.rcpt_tos == [APPROVERS] and sha[:16] in told.message["Subject"]
        assert sha in told.html() and record["approval_url"] in told.html().replace("&amp;", "&")
        assert record["notified"]["deliveries"]["smtp:smtp_oncall"]["ok"] is True
