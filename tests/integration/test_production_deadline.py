"""A daily run that is late pages once, saying where it hangs: Airflow's deadline alert under the
production deployment (scheduler, triggerer, LocalExecutor, PostgreSQL; ``conftest.py``).

Cluster ``slow``'s ZooKeeper is a loopback proxy that never answers (``ZooKeeperProxy(stalled=True)``),
so its daily run keeps retrying its first tasks; its deadline is the provider's ``RecentRunsDeadline``
with ``deadline_default_s = 20`` (no run has succeeded yet), evaluated by the scheduler through the
plugin's registration. The scheduler marks the
deadline missed and queues the callback, the triggerer runs it, and the cluster's SMTP channel gets
one page naming the unfinished tasks and when their tries started. The test then fails the run over
REST (it would retry for minutes) and checks that nothing pages twice.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from datetime import datetime
from typing import Any

import pytest

from airflow_provider_kafka_zk.testing.airflow_production import AirflowProduction

pytestmark = pytest.mark.integration

DAG = "kafka_zk_daily_hygiene_slow"
LATE = "late@example.com"  # conftest.py's cluster "slow": its notify, its deadline_default_s
SLOW_DEADLINE_S = 20
PAGE_TIMEOUT = 300


def _pages(deployment: Any) -> list:
    return [m for m in deployment.smtp.messages if LATE in m.rcpt_tos]


def _wait_for_page(deployment: Any, airflow: AirflowProduction, run_id: str) -> list:
    deadline = time.monotonic() + PAGE_TIMEOUT
    while time.monotonic() < deadline:
        pages = _pages(deployment)
        if pages:
            return pages
        state = airflow.run(DAG, run_id)["state"]
        assert state in ("queued", "running"), f"the slow run ended ({state}) before it paged"
        time.sleep(2)
    states = {t["task_id"]: t["state"] for t in airflow.task_instances(DAG, run_id)}
    raise AssertionError(f"no late-run page after {PAGE_TIMEOUT} s; tasks: {states}")


def test_a_late_daily_run_pages_once_saying_where_it_hangs(deployment: Any) -> None:
    airflow = deployment.airflow
    airflow.unpause(DAG)
    started = time.monotonic()
    run_id = airflow.trigger_rest(DAG, {})
    try:
        pages = _wait_for_page(deployment, airflow, run_id)
        paged_after = time.monotonic() - started
        run = airflow.run(DAG, run_id)
        assert run["state"] == "running"  # the page came while the run was still going
    finally:
        airflow.api("PATCH", f"/api/v2/dags/{DAG}/dagRuns/{run_id}", {"state": "failed"})
        airflow.pause(DAG)
    assert paged_after >= SLOW_DEADLINE_S

    page = pages[0]
    subject = str(page.message["Subject"])
    html = page.html()
    assert "slow" in subject and "is late" in subject, subject
    assert f"Run {run_id} of {DAG} is still running" in html
    assert "its deadline was" in html
    assert "snapshot" in html  # the first task, retrying against the silent ZooKeeper
    assert "started" in html and "try" in html  # when its try started, which try, where
    assert f"/dags/{DAG}/runs/" in html  # the run's page

    # the record of the page, beside the run's other alerts, names where it hung
    records = list((deployment.artefacts / "slow" / "alerts" / DAG).glob("*/deadline.json"))
    assert len(records) == 1, records
    record = json.loads(records[0].read_text())
    assert record["run_id"] == run_id
    assert all(d["ok"] for d in record["deliveries"].values())
    assert any(task == "snapshot" for task, _ in record["where"])

    # the deadline the scheduler set: the provider's RecentRunsDeadline (no successful run yet: the
    # cluster's deadline_default_s after the run was queued), marked missed
    rows = airflow.api("GET", f"/ui/dags/{DAG}/dagRuns/{urllib.parse.quote(run_id, safe='')}/deadlines")
    (row,) = rows["deadlines"]
    assert row["missed"] is True and row["alert_name"] == "kafka_zk late daily run of slow"
    queued = datetime.fromisoformat(run["queued_at"])
    set_for = (datetime.fromisoformat(row["deadline_time"]) - queued).total_seconds()
    assert abs(set_for - SLOW_DEADLINE_S) < 5, (row, run["queued_at"])

    # the triggerer that ran the callback is still healthy (it stores the callback's answer)
    time.sleep(5)
    health = airflow.api("GET", "/api/v2/monitor/health")
    assert health["triggerer"]["status"] == "healthy", health
    assert "Exception when executing TriggerRunnerSupervisor" not in airflow.services_log("triggerer")

    # once: the scheduler marked the deadline missed; no second page for this run
    time.sleep(5)
    assert len(_pages(deployment)) == 1, [str(m.message["Subject"]) for m in _pages(deployment)]
