"""Approving the exact plan (issue 25) through the production-shape deployment: PostgreSQL, api-server,
scheduler, dag-processor and triggerer as separate processes (the session's deployment,
tests/integration/conftest.py), runs triggered over REST without a logical date.

A real drain parks in its ``approve`` task (Airflow's AWAITING_INPUT state) with ZooKeeper and every
broker disk untouched, and the approval page in the UI shows the plan's summary and its hash
(screenshot). Then:

* rejected over REST: the run ends with nothing changed -- the ZooKeeper tree (every znode's data,
  mzxid, version, cversion) and every broker disk (listing, modes, bytes) are as before -- and the
  report says who rejected it, when and why;
* nobody decides within the cluster's ``approval_timeout_s``: the scheduler times it out, same
  outcome, and the report says so.

Approving through REST, with the executed plan's hash equal to the one shown, is asserted on the
real drain and move-back of ``test_production_dags.py`` (the same deployment).
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.operators._run import run_key

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

DRAIN = "kafka_zk_pre_maintenance_drain"
RUN_TIMEOUT = 1500
SCREENSHOT = "kafka-zk-approval-page.png"


def _tree(deployed) -> dict[str, tuple[bytes | None, int, int, int]]:
    """The cluster's whole ZooKeeper tree: znode -> (data, mzxid, version, cversion)."""
    client = KazooClient(hosts=deployed.zookeeper_connect)
    client.start(timeout=15)
    try:
        out = {}
        pending = ["/"]
        while pending:
            path = pending.pop()
            data, stat = client.get(path)
            out[path] = (data, stat.mzxid, stat.version, stat.cversion)
            pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
        return out
    finally:
        client.stop()
        client.close()


def _disks(deployed) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under the cluster's broker host roots -> (mode, bytes; None for a directory)."""
    root = Path(deployed.root)
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, None if p.is_dir() else p.read_bytes())
        for p in sorted(root.rglob("*"))
    }


def _folder(deployment, cluster: str, run_id: str) -> Path:
    dag_run = deployment.airflow.run(DRAIN, run_id)
    key = run_key(run_id, datetime.fromisoformat(dag_run["run_after"].replace("Z", "+00:00")))
    return deployment.artefacts / cluster / "drain" / key


def _alert(folder: Path) -> dict:
    """The run's alert record (``<base>/<cluster>/alerts/<dag>/<run key>/alert.json``) beside its folder."""
    cluster_root, key = folder.parent.parent, folder.name
    return json.loads((cluster_root / "alerts" / DRAIN / key / "alert.json").read_text())


def _states(deployment, run_id: str) -> dict[str, str]:
    return {
        ti["task_id"]: ti["state"]
        for ti in deployment.airflow.task_instances(DRAIN, run_id)
        if ti["map_index"] in (-1, 0)
    }


def _real_drain(deployment, cluster: str, broker: int) -> tuple[str, dict, float]:
    """Trigger a real drain over REST and wait until it asks for approval: (run id, request, seconds)."""
    airflow = deployment.airflow
    airflow.unpause(DRAIN)
    started = time.monotonic()
    run_id = airflow.trigger_rest(DRAIN, {"cluster": cluster, "brokers": [broker], "dry_run": False})
    request = airflow.wait_for_approval_request(
        DRAIN,
        run_id,
        timeout=RUN_TIMEOUT,
        alive=lambda: airflow.run(DRAIN, run_id)["state"] not in ("success", "failed"),
    )
    return run_id, request, time.monotonic() - started


def test_a_rejected_drain_changes_nothing_and_reports_who_and_why(deployment, production_browser):
    deployed = deployment.clusters["approval"]
    zookeeper, disks = _tree(deployed), _disks(deployed)
    run_id, request, waited = _real_drain(deployment, "approval", 2)
    # waiting (deferred: the triggerer reads the answer), assigned to the cluster's approver, nothing
    # written yet
    assert _states(deployment, run_id)["approve"] == "deferred"
    assert [u["id"] for u in request["assigned_users"]] == ["admin"]
    assert _tree(deployed) == zookeeper and _disks(deployed) == disks
    folder = _folder(deployment, "approval", run_id)
    pending = json.loads((folder / "approval.json").read_text())
    assert pending["decision"] == "pending"
    shown = pending["plan"]["sha256"]
    assert f"- sha256 `{shown}`" in request["body"]
    # the approval page a person opens (the run's Required Actions): the summary and the hash
    shots = Path(os.environ.get("KAFKA_ZK_SCREENSHOTS") or folder.parent / "screenshots")
    headline = request["body"].splitlines()[0].strip("*")
    page = production_browser.approval_page(
        DRAIN, run_id, [headline[:60], shown, "ZooKeeper writes, in order"], screenshot=shots / SCREENSHOT
    )
    assert "Rollback and how to undo" in page and "/admin/reassign_partitions" in page

    deployment.airflow.respond(DRAIN, run_id, "approve", "Reject", "not during the release freeze")
    deployment.airflow.wait_for_run(DRAIN, run_id, state="failed", timeout=RUN_TIMEOUT)
    states = _states(deployment, run_id)
    assert states["approve"] == "success" and states["report"] == "failed", states
    assert {states[t] for t in ("stop_if_dry_run", "execute", "inventory_after", "verify")} == {"skipped"}, (
        states
    )
    # nothing changed: the whole ZooKeeper tree and every broker disk, byte for byte
    assert _tree(deployed) == zookeeper
    assert _disks(deployed) == disks
    # and the run says who decided what, when and why, in its report, its record and its change log
    record = json.loads((folder / "approval.json").read_text())
    assert (record["decision"], record["decided_by"]["name"], record["comment"]) == (
        "rejected",
        "admin",
        "not during the release freeze",
    )
    report = (folder / "report.txt").read_text()
    assert report.startswith(
        f"{DRAIN} on cluster approval: the plan was REJECTED by admin at {record['decided_at']}."
    )
    assert "Nothing was changed" in report and "Comment: not during the release freeze" in report
    assert f"Plan shown: sha256 {shown}" in report
    changes = json.loads((folder / f"changes-approve-{record['try_number']}.json").read_text())["changes"]
    assert [(c["decision"], c["by"]["name"], c["plan_sha256"]) for c in changes] == [
        ("rejected", "admin", shown)
    ]
    log = deployment.airflow.task_log(DRAIN, run_id, "report", 1)
    assert "the plan was REJECTED by admin" in log and "Nothing was changed" in log
    # the person who rejected it is the one a page would tell: the run's alert pages nobody
    alert = _alert(folder)
    assert alert["failed_tasks"] == {"report": [-1]} and alert["paged"] is False, alert
    assert alert["not_paged_because"].startswith("not paged: the plan was rejected by admin")
    print(f"\nrejected drain: asked for approval {waited:.0f} s after the trigger")


def test_a_drain_nobody_approves_in_time_changes_nothing_and_reports_it(deployment):
    deployed = deployment.clusters["healthy"]
    zookeeper, disks = _tree(deployed), _disks(deployed)
    run_id, _, waited = _real_drain(deployment, "healthy", 1)
    asked = time.monotonic()
    deployment.airflow.wait_for_run(DRAIN, run_id, state="failed", timeout=RUN_TIMEOUT)
    timed_out_after = time.monotonic() - asked
    states = _states(deployment, run_id)
    assert states["approve"] == "success" and states["report"] == "failed", states
    assert states["execute"] == "skipped", states
    assert _tree(deployed) == zookeeper
    assert _disks(deployed) == disks
    folder = _folder(deployment, "healthy", run_id)
    record = json.loads((folder / "approval.json").read_text())
    assert record["decision"] == "timed_out" and record["decided_by"] is None
    assert record["timeout_s"] == 20
    report = (folder / "report.txt").read_text()
    assert "the plan was NOT APPROVED IN TIME: nobody decided within 20.0 s" in report
    assert "Nothing was changed" in report
    changes = json.loads((folder / f"changes-approve-{record['try_number']}.json").read_text())["changes"]
    assert [c["decision"] for c in changes] == ["timed_out"]
    # nobody decided: the one who triggered it may not know, so this one pages
    alert = _alert(folder)
    assert alert["paged"] is True and alert["not_paged_because"] is None, alert
    print(f"\ntimed-out drain: asked after {waited:.0f} s; the run ended {timed_out_after:.0f} s later")
