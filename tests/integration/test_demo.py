"""The README's demo command: real services, the incident cluster, and a report of every incident."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_demo_prints_every_incident(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "airflow_provider_kafka_zk.testing.demo", "--workdir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    out = result.stdout
    assert "Simulated Kafka 3.3.1 cluster 'demo'" in out
    assert "[a] KAFKA-14190 clickstream: ZooKeeper topic_id" in out
    assert "[a] precursor inventory-updates: topic znode has no topic_id" in out
    assert "[b] RF=1 on broker 3 (offline now): audit-rf1-0, audit-rf1-1" in out
    assert "[b] RF=1 on broker 1 (go offline if it stops): metrics-rf1-0, metrics-rf1-2, metrics-rf1-4" in out
    assert "[c] deletion of legacy-orders pending: replica broker(s) [3] offline" in out
    assert "[c] deletion of moving-topic pending: reassignment in progress" in out
    assert out.count("[c] leftover on broker") == 3
    assert "[d] broker 4:" in out and "offset not greater than the previous entry's" in out
    assert "STOPPED, no clean-shutdown marker (crashed)" in out
    # nothing left running: the demo stops its services by PID
    assert "pid" in out.splitlines()[0]
