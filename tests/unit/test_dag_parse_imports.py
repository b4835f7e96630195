"""What parsing a shipped DAG file imports: every task process parses its DAG file before it runs
(Airflow 3's task runner), so a library the DAG's tasks import only when they run costs each of them
its import time. At 200k partitions the daily DAG runs ~16 task processes: paramiko with the SSH
provider costs ~0.08 s of CPU each, pyarrow.compute ~0.13 s (it parses every compute function's
docstring at import). Those load where a task uses them (``hooks/_strict_ssh.py``, the redaction).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
_PARSE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("dag_file", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(sys.modules)))
"""
CLUSTER_FILE = """
[clusters.prod]
kafka_zookeeper_conn_id = "kafka_zk_prod"
ssh_conn_id = "kafka_broker_ssh"
engine = "in-process"
log_scan = true
deletion_check = true
kraft_readiness = true
"""


@pytest.fixture(scope="module")
def modules_after_parsing(tmp_path_factory):
    """``parse(dag_file)`` -> the modules a fresh interpreter holds after loading it (one subprocess
    per file for the whole module: the daily DAG's two tests share one)."""
    clusters = tmp_path_factory.mktemp("clusters") / "clusters.toml"
    clusters.write_text(CLUSTER_FILE)
    parsed: dict[Path, set[str]] = {}

    def parse(dag_file: Path) -> set[str]:
        if dag_file not in parsed:
            done = subprocess.run(
                [sys.executable, "-c", _PARSE, str(dag_file)],
                env={**os.environ, "KAFKA_ZK_CLUSTERS_FILE": str(clusters)},
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            parsed[dag_file] = set(json.loads(done.stdout.strip().splitlines()[-1]))
        return parsed[dag_file]

    return parse


def test_the_daily_dag_parses_without_paramiko_the_ssh_provider_or_pyarrow_compute(modules_after_parsing):
    modules = modules_after_parsing(DAGS / "kafka_zk_daily_hygiene.py")
    assert "airflow_provider_kafka_zk.operators.inventory" in modules  # the file did build the DAG
    assert "airflow_provider_kafka_zk.hooks.broker_host" in modules
    heavy = {"paramiko", "airflow.providers.ssh.hooks.ssh", "pyarrow.compute"} & modules
    assert not heavy, f"imported at DAG-parse time: {sorted(heavy)}"


@pytest.mark.parametrize("dag_file", sorted(DAGS.glob("kafka_zk_*.py")), ids=lambda p: p.stem)
def test_no_shipped_dag_file_imports_paramiko_to_parse(dag_file: Path, modules_after_parsing):
    modules = modules_after_parsing(dag_file)
    assert not {"paramiko", "airflow.providers.ssh.hooks.ssh"} & modules
