"""``demo.sh --keep-running`` prints shell lines that point one's own ``airflow`` at the running demo;
its connection commands store working connections in a metadata DB, as users keep them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing.demo import try_it_yourself

pytestmark = pytest.mark.integration

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def test_printed_connection_commands_store_the_demo_connections(tmp_path):
    conns = {
        "AIRFLOW_CONN_KAFKA_ZK_DEMO": json.dumps(
            {"conn_type": "kafka_zookeeper", "host": "127.0.0.1:2181", "extra": {"chroot": "/kafka demo's"}}
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    env = {
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
        "KAFKA_ZK_CLUSTERS_FILE": str(tmp_path / "clusters.toml"),
        "KAFKA_ZK_ARTEFACTS_BASE": str(tmp_path / "artefacts"),
        "PYSPARK_PYTHON": sys.executable,
        **conns,
    }
    lines = try_it_yourself(env).splitlines()
    shell_env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    shell_env["AIRFLOW_HOME"] = env["AIRFLOW_HOME"]
    shell_env["PATH"] = f"{Path(AIRFLOW).parent}{os.pathsep}{shell_env.get('PATH', '')}"
    script = "\n".join(
        [
            "set -e",
            *[line for line in lines if line.startswith(("export", "airflow db", "airflow connections"))],
        ]
    )
    result = subprocess.run(
        ["bash", "-c", script], env=shell_env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = subprocess.run(
        [AIRFLOW, "connections", "get", "kafka_zk_demo", "-o", "json"],
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (stored,) = json.loads(got.stdout)
    assert stored["conn_type"] == "kafka_zookeeper" and stored["host"] == "127.0.0.1:2181"
    assert stored["extra_dejson"] == {"chroot": "/kafka demo's"}  # quoted for the shell, stored intact
    assert any(line.startswith("airflow dags test kafka_zk_daily_hygiene_demo") for line in lines)
    drain = [line for line in lines if "kafka_zk_pre_maintenance_drain" in line]
    assert json.loads(shlex.split(drain[0])[5])["dry_run"] is True
