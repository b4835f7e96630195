"""Which clusters the DAGs run for: the cluster file's location, defaults from ``[kafka_zk]``, no
built-in cluster, and the DAG factories that follow it."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.clusters import ClusterFileError, clusters_file, load_clusters
from airflow_provider_kafka_zk.dags import create_all_dags
from airflow_provider_kafka_zk.dags.daily_hygiene import create_dags as daily_dags

MANUAL_DAGS = {
    "kafka_zk_pre_maintenance_drain",
    "kafka_zk_post_maintenance",
    "kafka_zk_topic_id_repair",
    "kafka_zk_deletion_cleanup",
    "kafka_zk_pre_restart_check",
    "kafka_zk_kraft_migration_readiness",
    "kafka_zk_kraft_migration",
    "kafka_zk_test_alert",
    "kafka_zk_undo",
}


@pytest.fixture
def no_file_configured(monkeypatch, tmp_path):
    """No env override, no [kafka_zk] clusters_file, an empty DAGs folder."""
    monkeypatch.delenv("KAFKA_ZK_CLUSTERS_FILE", raising=False)
    monkeypatch.delenv("AIRFLOW__KAFKA_ZK__CLUSTERS_FILE", raising=False)
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(tmp_path / "dags"))
    (tmp_path / "dags").mkdir()
    return tmp_path / "dags"


def test_without_a_cluster_file_nothing_is_scheduled(no_file_configured):
    assert load_clusters() == {}
    assert daily_dags() == {}
    dags = create_all_dags()
    assert set(dags) == MANUAL_DAGS
    assert all(dag.schedule is None for dag in dags.values())


def test_the_file_is_found_in_the_dags_folder_then_the_config_then_the_environment(
    no_file_configured, monkeypatch, tmp_path
):
    in_dags = no_file_configured / "kafka_zk_clusters.toml"
    in_dags.write_text("[clusters.eu1]\n")
    assert clusters_file() == in_dags
    assert set(daily_dags()) == {"kafka_zk_daily_hygiene_eu1"}

    configured = tmp_path / "etc.toml"
    configured.write_text("[clusters.us1]\n")
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__CLUSTERS_FILE", str(configured))
    assert clusters_file() == configured
    assert set(load_clusters()) == {"us1"}

    override = tmp_path / "env.toml"
    override.write_text("[clusters.ap1]\n[clusters.ap2]\nenabled = false\n")
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(override))
    assert set(load_clusters()) == {"ap1"}
    assert create_all_dags()["kafka_zk_pre_maintenance_drain"].params.get_param("cluster").schema["enum"] == [
        "ap1"
    ]


def test_fail_on_defaults_to_the_config_then_the_file(no_file_configured, monkeypatch):
    file = no_file_configured / "kafka_zk_clusters.toml"
    file.write_text('[clusters.a]\n[clusters.b]\nfail_on = "warning"\n')
    assert {name: s["fail_on"] for name, s in load_clusters().items()} == {"a": "critical", "b": "warning"}
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__DEFAULT_FAIL_ON", "error")
    assert {name: s["fail_on"] for name, s in load_clusters().items()} == {"a": "error", "b": "warning"}
    gate = daily_dags()["kafka_zk_daily_hygiene_a"].get_task("gate")
    assert gate.fail_on == "error"
    file.write_text('[clusters.a]\nfail_on = "sometimes"\n')
    with pytest.raises(ClusterFileError, match=r"clusters\.a\.fail_on must be one of critical"):
        load_clusters()


def test_spark_engine_submits_the_packaged_app_and_builds_no_archive_upstream(no_file_configured):
    (no_file_configured / "kafka_zk_clusters.toml").write_text(
        '[clusters.c]\nlog_scan = true\nspark_conf = { "spark.executor.memory" = "2g" }\n'
    )
    dag = daily_dags()["kafka_zk_daily_hygiene_c"]
    assert "spark_package" not in dag.task_ids
    audit, verdict = dag.get_task("audit"), dag.get_task("log_scan_verdict")
    assert audit.application.endswith("airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py")
    assert verdict.application.endswith("airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_log_scan.py")
    assert audit.conf["spark.executor.memory"] == "2g" and audit.conf["spark.ui.enabled"] == "false"
    assert audit.py_files is None  # built by the submitting task itself, per run


def test_spark_submit_refuses_a_missing_connection_before_building_anything(monkeypatch, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kafka_zk.operators import spark
    from airflow_provider_kafka_zk.operators.spark import ProviderSparkSubmitOperator

    built = []
    monkeypatch.setattr(spark, "build_package_zip", built.append)
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_NOWHERE", raising=False)
    op = ProviderSparkSubmitOperator(task_id="audit", app="kafka_zk_audit.py", conn_id="spark_nowhere")
    with pytest.raises(
        AirflowFailException, match="'spark_nowhere' is not defined; without it spark-submit goes to YARN"
    ):
        op.execute({})
    assert built == []
    with pytest.raises(ValueError, match="unknown Spark application"):
        ProviderSparkSubmitOperator(task_id="x", app="nope.py")


def test_the_daily_dag_verifies_topics_marked_for_deletion_without_cleaning_up(no_file_configured):
    file = no_file_configured / "kafka_zk_clusters.toml"
    file.write_text(
        "[clusters.d]\n[clusters.e]\ndeletion_check = false\n[clusters.f]\ndeletion_wait_s = 900\n"
    )
    dags = daily_dags()
    deletions = dags["kafka_zk_daily_hygiene_d"].get_task("deletions")
    assert deletions.upstream_task_ids == {"brokers"}  # stopped brokers count as expected
    # its failure goes into the run's one alert (a teardown); it does not hold up the gate
    assert deletions.downstream_task_ids == {"alert"}
    assert deletions.topics is None  # every /admin/delete_topics marker
    assert (deletions.cleanup, deletions.dry_run, deletions.retries) == (False, True, 0)
    assert (deletions.wait_timeout, deletions.deferrable) == (0, False)
    assert "deletions" not in dags["kafka_zk_daily_hygiene_e"].task_ids
    assert dags["kafka_zk_daily_hygiene_f"].get_task("deletions").wait_timeout == 900
    file.write_text('[clusters.g]\ndeletion_wait_s = "an hour"\n')
    with pytest.raises(ClusterFileError, match=r"clusters\.g\.deletion_wait_s must be a number"):
        load_clusters()


def test_the_daily_dags_alert_check_runs_after_the_inventory_whatever_its_outcome(no_file_configured):
    """Not at the run's start, where its task process slowed the listing every inventory waits for;
    still before the alert, and still when the inventory failed."""
    (no_file_configured / "kafka_zk_clusters.toml").write_text("[clusters.d]\n")
    dag = daily_dags()["kafka_zk_daily_hygiene_d"]
    check = dag.get_task("notify_check")
    assert check.upstream_task_ids == {"inventory"}
    assert check.trigger_rule == "all_done"
    assert check.downstream_task_ids == {"alert"}
    starting = {t.task_id for t in dag.tasks if not t.upstream_task_ids}
    assert starting == {"snapshot", "inventory_groups"}


def test_every_dag_and_operator_resolves_the_artefacts_base_the_same_way(
    no_file_configured, monkeypatch, tmp_path
):
    """A task that names no base (an operator used directly) writes where the DAGs read: the cluster
    file's ``base_path``, else ``$KAFKA_ZK_ARTEFACTS_BASE``, else ``[kafka_zk] artefacts_base``."""
    from airflow_provider_kafka_zk.clusters import cluster_setting
    from airflow_provider_kafka_zk.dags.daily_hygiene import artefacts_base
    from airflow_provider_kafka_zk.operators.snapshot import default_artefacts_base

    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__ARTEFACTS_BASE", str(tmp_path / "configured"))
    monkeypatch.setenv("KAFKA_ZK_ARTEFACTS_BASE", str(tmp_path / "env"))
    (no_file_configured / "kafka_zk_clusters.toml").write_text(
        f'[clusters.a]\n[clusters.b]\nbase_path = "{tmp_path / "b"}"\n'
    )
    settings = load_clusters()
    assert default_artefacts_base() == str(tmp_path / "env")
    assert (
        artefacts_base(settings["a"])
        == cluster_setting({"cluster": "a"}, "base_path")
        == str(tmp_path / "env")
    )
    assert (
        artefacts_base(settings["b"]) == cluster_setting({"cluster": "b"}, "base_path") == str(tmp_path / "b")
    )
    monkeypatch.delenv("KAFKA_ZK_ARTEFACTS_BASE")
    assert default_artefacts_base() == artefacts_base(settings["a"]) == str(tmp_path / "configured")
