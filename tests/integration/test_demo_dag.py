"""The README's demo command with --run-dag (what scripts/demo.sh runs): the DAG on the demo cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_demo_runs_the_daily_hygiene_dag_then_plans_and_carries_out_the_topic_id_repair(tmp_path):
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--run-dag",
            "--repair",
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "Daily hygiene audit of 'demo' (engine spark" in out
    assert "coverage: complete: 6 of 6 brokers inventoried" in out
    assert "[CRITICAL] topic-id-mismatch: 16 replica(s) of clickstream" in out
    assert "[CRITICAL] topic-id-missing-in-zookeeper: inventory-updates" in out
    assert "The DAG run FAILED at its gate, as expected here" in out
    # the pre-restart check of the crashed broker 4 finds its damaged offset index, with the remedy
    check = out.split("Pre-restart check of broker 4", 1)[1].split("topicId repair", 1)[0]
    assert "[ERROR] sensor-readings-0 on broker 4: entry 33: offset 994 not greater" in check
    assert (
        "sensor-readings-0/00000000000000000000.index" in check and "Kafka rebuilds a missing index" in check
    )
    # then the repair plan for those two topics, as a dry run next to the audit
    assert "topicId repair, DRY RUN" in out and "nothing was changed; exit 0" in out
    assert "- clickstream: DIVERGED: ZooKeeper has " in out
    assert "- inventory-updates: PRECURSOR: the topic znode has no topic_id" in out
    assert "delete /controller (controller now: broker 2)" in out
    report = next(line.split("report: ", 1)[1] for line in out.splitlines() if "  report: " in line)
    assert Path(report).is_file() and Path(report).is_relative_to(workdir)
    # --repair: carried out against the simulated controller and brokers, verified by the audit rules
    repaired = out.split("topicId repair, carried out", 1)[1]
    assert "- clickstream: diverged -> consistent (write_back)" in repaired
    assert "- inventory-updates: precursor -> consistent (write_back)" in repaired
    assert "audit: no topic-id finding for these topics" in repaired
    assert (
        "steps completed: write-topic-id:clickstream, write-topic-id:inventory-updates, move-controller,"
        in repaired
    )


def test_demo_maintenance_window_drains_restarts_and_puts_the_cluster_back(tmp_path):
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--maintenance",
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "Verification: OK; 1 moved partition(s) checked" in out  # the drain of broker 2
    after = out.split("After maintenance", 1)[1]
    assert "restores drain run " in after and "(run id manual__" in after
    assert "moved back: 1 of 1 partition(s)" in after
    assert "verified: partitions back in place with full ISRs, no leader imbalance" in after
