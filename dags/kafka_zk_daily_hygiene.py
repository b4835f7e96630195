"""Daily hygiene of ZooKeeper-mode Kafka clusters: one DAG per cluster in ``kafka_zk_clusters.toml``.

    snapshot ZooKeeper -> list brokers -> inventory each broker (mapped, retried) -> coverage (all_done)
      -> audit (SparkSubmitOperator running spark_apps/kafka_zk_audit.py, or in-process) -> gate

DAG ids: ``kafka_zk_daily_hygiene`` for the cluster named ``demo`` (the built-in demo cluster, used
when the cluster file lists none), ``kafka_zk_daily_hygiene_<cluster>`` for every other cluster.
The cluster file is ``dags/kafka_zk_clusters.toml`` beside this file unless ``KAFKA_ZK_CLUSTERS_FILE``
names another; its header documents every key. Every task retries with exponential backoff; the
gate fails (and alerts through ``on_failure_callback``) when findings at or above ``fail_on``
(default critical) exist, naming the worst ones and the report.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_kafka_zk.clusters import DEMO_CLUSTER, load_clusters

log = logging.getLogger(__name__)

DAG_ID = "kafka_zk_daily_hygiene"
SPARK_APPLICATION = Path(__file__).resolve().parents[1] / "spark_apps" / "kafka_zk_audit.py"
LOG_SCAN_APPLICATION = SPARK_APPLICATION.with_name("kafka_zk_log_scan.py")
FAST_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def artefacts_base(settings: Mapping[str, Any]) -> str:
    if settings.get("base_path"):
        return str(settings["base_path"])
    if os.environ.get("KAFKA_ZK_ARTEFACTS_BASE"):
        return os.environ["KAFKA_ZK_ARTEFACTS_BASE"]
    from airflow_provider_kafka_zk.operators.snapshot import default_artefacts_base

    return default_artefacts_base()


def failure_callback(cluster: str, notify: Mapping[str, Any]) -> Callable[..., Any]:
    """The configured notifier (SMTP, Slack) when its provider is installed; else a callback that logs."""
    kind = str(notify.get("kind", "log")).lower()
    subject = f"[kafka-zk] {cluster}: {{{{ ti.dag_id }}}}.{{{{ ti.task_id }}}} failed"
    body = "{{ exception }}"
    try:
        if kind == "smtp":
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            return SmtpNotifier(
                to=notify["to"],
                smtp_conn_id=notify.get("smtp_conn_id", "smtp_default"),
                subject=subject,
                html_content=body,
            )
        if kind == "slack":
            from airflow.providers.slack.notifications.slack import SlackNotifier

            return SlackNotifier(
                slack_conn_id=notify.get("slack_conn_id", "slack_default"),
                channel=notify.get("channel", "#general"),
                text=f"{subject}: {body}",
            )
    except ImportError as exc:
        log.warning(
            "notify kind %r for %s needs a provider that is not installed (%s): logging instead",
            kind,
            cluster,
            exc,
        )

    def log_failure(context: Mapping[str, Any]) -> None:
        ti = context.get("ti") or context.get("task_instance")
        log.error(
            "kafka-zk %s: task %s failed: %s",
            cluster,
            getattr(ti, "task_id", "?"),
            context.get("exception"),
        )

    return log_failure


def _package_dir(base: str, cluster: str) -> str:
    """Where the --py-files zip goes: the artefact dir when it is local (spark-submit needs a local file)."""
    if "://" in base and not base.startswith("file://"):
        return os.path.join(tempfile.gettempdir(), "kafka-zk-spark", cluster)
    return os.path.join(base.removeprefix("file://"), cluster, "spark")


def build_dag(cluster: str, settings: Mapping[str, Any]) -> DAG:
    """One cluster's daily hygiene DAG."""
    from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator, FindingsGateOperator
    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerInventoryOperator,
        InventoryCoverageOperator,
        ListBrokerIdsOperator,
    )
    from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

    base = artefacts_base(settings)
    dag_id = DAG_ID if cluster == DEMO_CLUSTER else f"{DAG_ID}_{cluster}"
    default_args = {
        "retries": int(settings["retries"]),
        "retry_delay": timedelta(seconds=float(settings["retry_delay_s"])),
        "retry_exponential_backoff": float(settings["retry_exponential_backoff"]),
        "max_retry_delay": timedelta(seconds=float(settings["max_retry_delay_s"])),
        "on_failure_callback": failure_callback(cluster, settings.get("notify") or {}),
    }
    run_ts = "{{ ti.xcom_pull(task_ids='coverage')['inventory_ts'] }}"
    inventory_dir = f"{base.rstrip('/')}/{cluster}/inventory/{run_ts}"
    findings_dir = f"{base.rstrip('/')}/{cluster}/findings/{run_ts}"
    snapshot_dir = "{{ ti.xcom_pull(task_ids='snapshot')['path'] }}"
    with DAG(
        dag_id,
        description=f"Kafka (ZooKeeper mode) hygiene audit of {cluster}",
        schedule=settings["schedule"],
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        default_args=default_args,
        tags=["kafka", "zookeeper", "audit", cluster],
        doc_md=__doc__,
    ) as dag:
        snapshot = ZooKeeperSnapshotOperator(
            task_id="snapshot",
            cluster=cluster,
            kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
            base_path=base,
        )
        brokers = ListBrokerIdsOperator(
            task_id="brokers", kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"]
        )
        inventory = BrokerInventoryOperator.partial(
            task_id="inventory",
            cluster=cluster,
            base_path=base,
            ssh_conn_id=settings["ssh_conn_id"],
            kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
            broker_hosts=settings.get("broker_hosts"),
            server_properties_path=settings.get("server_properties_path"),
            connect_timeout=settings.get("connect_timeout"),
        ).expand(broker_id=brokers.output)
        coverage = InventoryCoverageOperator(
            task_id="coverage", cluster=cluster, base_path=base, expected_broker_ids=brokers.output
        )
        if settings["engine"] == "spark":
            from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

            package_dir = _package_dir(base, cluster)

            spark_conn_id = settings["spark_conn_id"]

            @task(task_id="spark_package")
            def spark_package() -> str:
                """Zip the package for --py-files (the executors need the rules, not Airflow).

                Also refuses a missing Spark connection: SparkSubmitHook would silently submit to YARN.
                """
                from airflow.sdk import BaseHook
                from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

                from airflow_provider_kafka_zk.audit_job import build_package_zip

                try:
                    BaseHook.get_connection(spark_conn_id)
                except AirflowNotFoundException:
                    raise AirflowFailException(
                        f"Spark connection {spark_conn_id!r} is not defined; without it spark-submit goes to YARN. "
                        f"Define it, e.g. AIRFLOW_CONN_{spark_conn_id.upper()}="
                        '\'{"conn_type":"spark","host":"local[*]"}\' (or set engine = in-process)'
                    ) from None
                return build_package_zip(package_dir)

            package = spark_package()
            conf = {
                "spark.ui.enabled": "false",
                "spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS,
                **{str(k): str(v) for k, v in (settings.get("spark_conf") or {}).items()},
            }
            audit = SparkSubmitOperator(
                task_id="audit",
                conn_id=settings["spark_conn_id"],
                application=str(settings.get("spark_application") or SPARK_APPLICATION),
                py_files=os.path.join(package_dir, "airflow_provider_kafka_zk.zip"),
                conf=conf,
                name=f"kafka_zk_audit_{cluster}",
                application_args=[
                    "--base",
                    base,
                    "--cluster",
                    cluster,
                    "--snapshot",
                    snapshot_dir,
                    "--inventory",
                    inventory_dir,
                    "--out",
                    findings_dir,
                    "--engine",
                    "spark",
                ],
            )
            coverage >> package >> audit
        else:
            audit = ClusterAuditOperator(
                task_id="audit",
                cluster=cluster,
                base_path=base,
                snapshot=snapshot_dir,
                inventory=inventory_dir,
                out=findings_dir,
            )
            coverage >> audit
        gate = FindingsGateOperator(task_id="gate", findings_path=findings_dir, fail_on=settings["fail_on"])
        snapshot >> brokers
        inventory >> coverage
        snapshot >> audit >> gate
        if settings["log_scan"]:
            _log_scan_stage(cluster, settings, base, brokers, coverage, snapshot, run_ts, snapshot_dir)
    return dag


def _log_scan_stage(
    cluster: str,
    settings: Mapping[str, Any],
    base: str,
    brokers: Any,
    coverage: Any,
    snapshot: Any,
    run_ts: str,
    snapshot_dir: str,
) -> None:
    """The optional pre-restart scan: one read-only task per broker, then the verdicts (on Spark with
    the spark engine); fails the run when a broker's verdict reaches ``log_scan_fail_on``."""
    from airflow_provider_kafka_zk.operators.log_scan import BrokerLogScanOperator, LogScanVerdictOperator

    scan = BrokerLogScanOperator.partial(
        task_id="log_scan",
        cluster=cluster,
        base_path=base,
        ssh_conn_id=settings["ssh_conn_id"],
        kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
        broker_hosts=settings.get("broker_hosts"),
        inventory_ts=run_ts,
        scan_ts=run_ts,
        budget_mb=settings["log_scan_budget_mb"],
    ).expand(broker_id=brokers.output)
    scan_dir = f"{base.rstrip('/')}/{cluster}/log-scan/{run_ts}"
    if settings["engine"] == "spark":
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        verdict = SparkSubmitOperator(
            task_id="log_scan_verdict",
            conn_id=settings["spark_conn_id"],
            application=str(LOG_SCAN_APPLICATION),
            py_files=os.path.join(_package_dir(base, cluster), "airflow_provider_kafka_zk.zip"),
            conf={
                "spark.ui.enabled": "false",
                "spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS,
                **{str(k): str(v) for k, v in (settings.get("spark_conf") or {}).items()},
            },
            name=f"kafka_zk_log_scan_{cluster}",
            application_args=[
                "--base",
                base,
                "--cluster",
                cluster,
                "--scan",
                scan_dir,
                "--snapshot",
                snapshot_dir,
                "--fail-on",
                settings["log_scan_fail_on"],
            ],
        )
        # the --py-files zip is built by the audit's spark_package task
        coverage.dag.get_task("spark_package") >> verdict
    else:
        verdict = LogScanVerdictOperator(
            task_id="log_scan_verdict",
            cluster=cluster,
            base_path=base,
            scan_ts=run_ts,
            snapshot_path=snapshot_dir,
            fail_on=settings["log_scan_fail_on"],
        )
    coverage >> scan >> verdict
    snapshot >> verdict


for _cluster, _settings in load_clusters().items():
    _dag = build_dag(_cluster, _settings)
    globals()[_dag.dag_id] = _dag
