"""Alerts when the scheduler runs the DAGs (issue 24), on the session's production-shape deployment
(``conftest.py``): the wheel in a fresh venv, PostgreSQL, LocalExecutor, api-server, scheduler,
dag-processor and triggerer, and an SMTP server on loopback (aiosmtpd) as the on-call mailbox.

* The ``incident`` cluster's daily DAG is scheduled every minute and fails (a broker down, a topicId
  mismatch, a deletion blocked by the stopped broker). The *scheduler* makes two runs of it (then the
  DAG is paused): exactly one HTML e-mail reaches the mailbox, from the first run, with the root
  causes and links that work (the run in the API, the report through the provider's plugin); the
  second run, same incidents, pages nothing -- a blocked deletion pages once, not daily.
* A manual run that fails (KRaft readiness while blockers remain) pages once, from the worker, with
  what failed, its error and where it stopped.
* The triggerer: while the provider's triggers ran (the deletions checks of the scheduled runs; the
  drain's and the move-back's waits when the campaign ran too), its event-loop watchdog logged no
  "async thread was blocked" warning. The triggerer runs at nice -10, so on the shared 2-core machine
  the watchdog measures the triggerer's own loop, not the load of Spark, Chromium and the others.

These runs start before the campaign of ``test_production_dags.py`` and run concurrently with it.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from datetime import datetime
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.alerts.record import stamp
from airflow_provider_kafka_zk.operators._run import run_key

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

CLUSTER = "incident"
DAILY = f"kafka_zk_daily_hygiene_{CLUSTER}"
KRAFT = "kafka_zk_kraft_migration_readiness"
RUN_TIMEOUT = 1500
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")


def _when(dag_run: dict, key: str = "run_after") -> datetime:
    return datetime.fromisoformat(dag_run[key].replace("Z", "+00:00"))


def _mails_about(deployment, dag_id: str, run_id: str) -> list:
    """The e-mails whose "Open the Airflow run" button is that run."""
    link = f"{deployment.airflow.base_url}/dags/{dag_id}/runs/{urllib.parse.quote(run_id, safe='')}"
    return [m for m in deployment.smtp.messages if f'href="{link}"' in m.html()]


@pytest.fixture(scope="module")
def scheduled(alert_scenarios):
    return alert_scenarios.wait()


def test_the_scheduler_made_two_runs_of_the_failing_daily_dag(scheduled, alert_scenarios):
    assert len(scheduled) == 2
    for run in scheduled:
        assert run["run_type"] == "scheduled" and run["state"] == "failed", run
        states = alert_scenarios.states_seen[run["dag_run_id"]]
        assert "deferred" in states["deletions"], states  # its wait ran in the triggerer
    first, second = scheduled
    assert _when(first) < _when(second)


def test_one_html_email_per_failed_run_reaches_the_smtp_server(deployment, scheduled):
    airflow = deployment.airflow
    first, second = scheduled
    mails = _mails_about(deployment, DAILY, first["dag_run_id"])
    assert len(mails) == 1, [m.message["Subject"] for m in deployment.smtp.messages]
    (mail,) = mails
    assert mail.rcpt_tos == ["oncall@example.com"]
    assert mail.message["Subject"].startswith(f"[kafka-zk] {CLUSTER}: CRITICAL")
    html = mail.html()
    assert html.lstrip().startswith("<!doctype html>")
    # the root causes, with their ids, and the deletion the stopped broker blocks
    assert "topicId mismatch on clickstream (KAFKA-14190)" in html
    assert re.search(r"Broker 3 \([^)]*\) is down", html)
    assert "Deletion of topic legacy-orders is not done" in html
    # links that work: the run (it is in the API) and the report, through the plugin behind the login
    links = re.findall(r'href="([^"]+)"', html)
    report = next(link for link in links if "/kafka-zk/runs/" in link)
    status, body = airflow.http("GET", urllib.parse.urlsplit(report).path)
    assert status == 200 and b"<html" in body.lower() and CLUSTER.encode() in body, (status, body[:300])
    assert airflow.http("GET", urllib.parse.urlsplit(report).path, auth=False)[0] in (401, 403)
    assert airflow.run(DAILY, first["dag_run_id"])["state"] == "failed"
    # the second run, with the same incidents, sent nothing
    assert _mails_about(deployment, DAILY, second["dag_run_id"]) == []


def test_a_blocked_deletion_pages_once_not_daily(deployment, scheduled):
    root = deployment.artefacts / CLUSTER / "alerts" / DAILY
    first, second = (json.loads((root / stamp(_when(r)) / "alert.json").read_text()) for r in scheduled)
    assert first["paged"] is True and second["paged"] is False and second["deliveries"] == {}
    assert second["previous"] == stamp(_when(scheduled[0]))
    statuses = {i["key"]: (i["status"], i["since"]) for i in second["incidents"]}
    deletion = statuses["deletion:legacy-orders"]
    assert deletion == ("unchanged", first["written_at"]), statuses
    assert {s for s, _ in statuses.values()} == {"unchanged"}
    assert {i["key"] for i in first["incidents"] if i["status"] == "new"} == set(statuses)


def test_a_failed_maintenance_run_pages_once_from_the_worker(deployment, alert_scenarios):
    airflow = deployment.airflow
    run_id = alert_scenarios.maintenance_run
    deadline = time.monotonic() + RUN_TIMEOUT
    while airflow.run(KRAFT, run_id)["state"] not in ("success", "failed"):
        assert time.monotonic() < deadline, airflow.describe(KRAFT, run_id)
        time.sleep(2)
    dag_run = airflow.run(KRAFT, run_id)
    assert dag_run["state"] == "failed" and dag_run["logical_date"] is None
    states = {ti["task_id"]: ti["state"] for ti in airflow.task_instances(KRAFT, run_id)}
    assert states["readiness"] == "failed" and states["alert"] == "success", states
    (mail,) = _mails_about(deployment, KRAFT, run_id)
    assert mail.message["Subject"] == (
        f"[kafka-zk] {CLUSTER}: {KRAFT} on {CLUSTER} FAILED at readiness; it only reads, so nothing was changed."
    )
    html = mail.html()
    # the error the task failed with (recorded by its failure callback on the worker), where it stopped
    assert re.search(r"<div>[A-Za-z]*Error: [^<]*blocker", html), html[-4000:]
    assert re.search(r"readiness</td><td[^>]*>FAILED", html) and re.search(r"audit</td><td[^>]*>done", html)
    assert f"{airflow.base_url}/dags/{KRAFT}/runs/" in html and "/tasks/readiness" in html
    key = run_key(run_id, _when(dag_run))
    record = json.loads((deployment.artefacts / CLUSTER / "alerts" / KRAFT / key / "alert.json").read_text())
    assert record["paged"] is True and record["failed_tasks"] == {"readiness": [-1]}
    assert record["deliveries"]["smtp:smtp_oncall"]["ok"] is True


def _trigger_windows(home: Path) -> list[tuple[str, datetime, datetime]]:
    """(trigger name, started, completed) of every trigger run, from the task's trigger logs."""
    windows = []
    for path in (home / "logs").rglob("*.log.trigger.*.log"):
        start = end = None
        name = ""
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            event = str(record.get("event", ""))
            when = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
            if event.startswith("trigger ") and event.endswith(" starting"):
                start, name = when, event.removeprefix("trigger ").removesuffix(" starting")
            elif event == "trigger completed" and start is not None:
                end = when
                windows.append((name, start, end))
                start = None
    return windows


def test_the_scheduled_deletion_checks_waited_in_the_triggerer(deployment, scheduled):
    """Each scheduled run's deletions check deferred and waited in the real triggerer.

    That a trigger never blocks the triggerer's loop is tested deterministically in
    test_trigger_sessions (every blocking call on the run's own thread, nothing heavy imported on the
    loop). Airflow's watchdog ("async thread was blocked for > 0.2 s") is a timing signal: beside a
    busy loop per core it fired during a deletions check whose work ran off the loop (the loop thread
    was not scheduled for 0.2 s), so its count is printed here, never asserted."""
    home = deployment.airflow.home
    # the shipped DAGs' triggers; not the approval race test's DAG, which starts ten approval triggers
    # in the same second on purpose (to provoke Airflow's race)
    windows = [w for w in _trigger_windows(home) if not w[0].startswith("kafka_zk_test_approval_race/")]
    deletion_waits = [w for w in windows if w[0].startswith(f"{DAILY}/") and "/deletions/" in w[0]]
    assert len(deletion_waits) >= 2, windows  # each scheduled run's deletions check waited there
    blocked = []
    for line in deployment.airflow.services_log("triggerer").splitlines():
        match = _TIMESTAMP.match(line)
        if match and "async thread was blocked" in line:
            blocked.append((datetime.fromisoformat(match[1] + "+00:00"), line.split("]", 1)[0]))
    during = [
        (name, line)
        for when, line in blocked
        for name, start, end in windows
        if start.timestamp() <= when.timestamp() <= end.timestamp() + 0.5
    ]
    print(
        f"\ntrigger runs: {len(windows)}; watchdog warnings: {len(blocked)}, during our triggers: {len(during)}"
        " (a timing signal: not asserted)"
    )


def test_alert_timings(deployment, scheduled, alert_scenarios):
    """Not an assertion on time: what the alert scenarios took (they overlap the campaign)."""
    first, second = scheduled
    lines = [
        f"scheduled run {r['dag_run_id']}: {(_when(r, 'end_date') - _when(r, 'start_date')).total_seconds():.0f} s"
        for r in scheduled
    ]
    lines.append(
        f"both scheduled runs, from the first's start: {(_when(second, 'end_date') - _when(first, 'start_date')).total_seconds():.0f} s"
    )
    lines.append(
        f"alert scenarios, from their start to now: {time.monotonic() - alert_scenarios.started:.0f} s"
    )
    print("\n" + "\n".join(lines))
    with (deployment.airflow.home.parent / "timings.txt").open("a") as out:
        out.write("\n".join(lines) + "\n")
