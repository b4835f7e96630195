"""The Spark audit application, unchanged, on a real Spark standalone cluster (master + worker on
loopback) via spark-submit with the package zip as --py-files: same findings as the in-process path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.spark_jobs.package import application_path, build_package_zip
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
from airflow_provider_kafka_zk.testing.simulator import incident_cluster
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows
from airflow_provider_kafka_zk.testing.spark_standalone import SparkStandaloneCluster

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
NOW_MS = 1_763_800_000_000


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory):
    base = tmp_path_factory.mktemp("artefacts")
    cluster = incident_cluster()
    snapshot = write_snapshot_rows(base, "demo", cluster_rows(cluster), datetime(2026, 11, 22, tzinfo=UTC))
    facts = {
        b: {"broker.id": b, "inter.broker.protocol.version": str(cluster.spec.ibp)} for b in cluster.brokers
    }
    inventory = write_inventory_dirs(base, "demo", "20261122T000000", audit_dirs(cluster), broker_facts=facts)
    return {"base": str(base), "snapshot": str(snapshot), "inventory": str(inventory)}


def test_audit_app_on_a_standalone_cluster_matches_in_process(artefacts, tmp_path):
    package = build_package_zip(tmp_path / "package")
    out = tmp_path / "findings-standalone"
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    # two workers of one core each: the job scales out over both (issue 27)
    with SparkStandaloneCluster(tmp_path / "spark", worker_memory="1g", worker_cores=1, workers=2) as spark:
        result = subprocess.run(
            [
                str(VENV_BIN / "spark-submit"),
                "--master",
                spark.master_url,
                "--py-files",
                package,
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                "--conf",
                "spark.executor.memory=512m",
                "--conf",
                "spark.cores.max=2",
                application_path("kafka_zk_audit.py"),
                "--base",
                artefacts["base"],
                "--cluster",
                "demo",
                "--snapshot",
                artefacts["snapshot"],
                "--inventory",
                artefacts["inventory"],
                "--out",
                str(out),
                "--now-ms",
                str(NOW_MS),
            ],
            env=env,
            cwd=tmp_path,  # not the repository: the application and the package come from the submit
            capture_output=True,
            text=True,
            timeout=240,
        )
        pids = spark.pids
        assert len(pids) == 3  # master + 2 workers
        # an executor ran on each worker (each work dir holds this app's executor logs)
        app_dirs = [list((tmp_path / "spark" / w).glob("app-*/*/stderr")) for w in ("worker", "worker-1")]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert all(app_dirs), f"not every worker ran an executor: {app_dirs}"
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)  # both daemons stopped by PID
    line = next(x for x in result.stdout.splitlines() if x.startswith("KAFKA_ZK_AUDIT_SUMMARY "))
    assert json.loads(line.split(" ", 1)[1])["by_severity"]["critical"] > 0
    on_cluster = audit_job.read_findings(str(out))
    in_process = audit_job.run_audit(
        artefacts["base"],
        "demo",
        snapshot=artefacts["snapshot"],
        inventory=artefacts["inventory"],
        out=str(tmp_path / "findings-in-process"),
        now_ms=NOW_MS,
    )
    assert json.loads((out / "summary.json").read_text())["engine"] == "spark"
    expected = audit_job.read_findings(in_process["out"])
    assert [f.to_row() for f in on_cluster] == [f.to_row() for f in expected]
