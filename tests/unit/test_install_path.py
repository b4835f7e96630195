"""The install path (issue 24): one pip command gives a working Spark engine, and without
``spark-submit`` the daily DAG falls back to the in-process audit and says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name.lower())] = version
    return pins


def test_pyspark_and_pyspark_client_are_pinned_to_one_release():
    """The Spark provider pulls pyspark-client, which ships the same Python files as pyspark; at one
    release those files are byte-identical (one source tree), so pip's install order cannot leave
    pyspark's jars under another release's Python files."""
    pins = _pins()
    assert pins["pyspark"] == pins["pyspark-client"], pins["pyspark"]


def test_the_postgres_provider_is_pinned_for_deploying():
    assert "apache-airflow-providers-postgres" in _pins()


def _clusters(tmp_path, monkeypatch, engine: str) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(f'[clusters.c]\nbase_path = "{tmp_path}"\nengine = "{engine}"\nlog_scan = true\n')
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(path))


def test_without_spark_submit_the_daily_dag_audits_in_process_and_says_so(tmp_path, monkeypatch):
    from airflow_provider_kafka_zk.dags import daily_hygiene
    from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator
    from airflow_provider_kafka_zk.operators.log_scan import LogScanVerdictOperator

    _clusters(tmp_path, monkeypatch, "spark")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no spark-submit anywhere
    with pytest.warns(UserWarning, match="no spark-submit"):
        dag = daily_hygiene.create_dags()["kafka_zk_daily_hygiene_c"]
    assert isinstance(dag.get_task("audit"), ClusterAuditOperator)
    assert isinstance(dag.get_task("log_scan_verdict"), LogScanVerdictOperator)
    assert "no spark-submit" in dag.description and "in-process" in dag.description
    assert "no spark-submit" in dag.doc_md


def test_with_spark_submit_the_daily_dag_submits_to_spark(tmp_path, monkeypatch):
    from airflow_provider_kafka_zk.dags import daily_hygiene
    from airflow_provider_kafka_zk.operators.spark import ProviderSparkSubmitOperator

    _clusters(tmp_path, monkeypatch, "spark")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "spark-submit").write_text("#!/bin/sh\n")
    (bin_dir / "spark-submit").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    dag = daily_hygiene.create_dags()["kafka_zk_daily_hygiene_c"]
    assert isinstance(dag.get_task("audit"), ProviderSparkSubmitOperator)
    assert "WARNING" not in dag.description
