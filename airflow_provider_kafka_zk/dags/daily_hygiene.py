"""Daily hygiene of ZooKeeper-mode Kafka clusters: one DAG per cluster in the cluster file.

    snapshot ZooKeeper -> list brokers ------------------------------------------> coverage (all_done)
    group the brokers -> inventory each group (mapped, retried; beside the snapshot) --^
    coverage -> audit (Spark: the packaged kafka_zk_audit.py with the package as --py-files, or
      in-process) -> gate   [+ optional pre-restart log scan of every broker -> verdicts]
    list brokers -> deletions (every topic marked for deletion: deleted everywhere, or why not)
    inventory -> notify_check (all_done) -> alert (teardown, after every task)

DAG ids: ``kafka_zk_daily_hygiene_<cluster>``. The cluster file is found as
:func:`airflow_provider_kafka_zk.clusters.clusters_file` says (``$KAFKA_ZK_CLUSTERS_FILE``,
``[kafka_zk] clusters_file``, ``kafka_zk_clusters.toml`` in the DAGs folder); the example in this
repository's ``dags/`` documents every key. No cluster named, no DAG. Every task retries with
exponential backoff; the gate fails when findings at or above ``fail_on`` (default critical) exist,
naming the worst ones and the report. The run ends with one alert (task ``alert``): the new and worse
incidents are paged once through the cluster's ``notify`` (``notify_check`` fails the run when that
cannot deliver); the audit and the gate link to the report ("Report").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_provider_kafka_zk.clusters import load_clusters

log = logging.getLogger(__name__)

DAG_ID = "kafka_zk_daily_hygiene"


def artefacts_base(settings: Mapping[str, Any]) -> str:
    if settings.get("base_path"):
        return str(settings["base_path"])
    from airflow_provider_kafka_zk.clusters import default_artefacts_base

    return default_artefacts_base()


def _alert_stage(dag: DAG, cluster: str, settings: Mapping[str, Any], base: str, after: Any) -> None:
    """One alert per run (:mod:`airflow_provider_kafka_zk.alerts`): ``notify_check`` fails the run when
    the cluster's alerts cannot be delivered; ``alert`` runs last, after every task whatever its
    outcome, as a teardown (its state is not the run's: the gate's and the others' are), and pages the
    new and worse incidents once.

    ``notify_check`` runs once ``after`` (the inventory) is done, whatever its outcome: a task process
    costs about a second of CPU, and at the run's start it slowed the groups' listing, which every
    inventory waits for (three task processes starting on two cores); beside the audit a core is free.
    It still ends before the alert, so the run's outcome is the same."""
    from airflow_provider_kafka_zk.alerts.operators import NotifyCheckOperator, RunAlertOperator

    upstream = list(dag.tasks)
    notify = dict(settings.get("notify") or {})
    check = NotifyCheckOperator(
        task_id="notify_check", cluster=cluster, notify=notify, retries=0, trigger_rule="all_done", dag=dag
    )
    after >> check
    alert = RunAlertOperator(
        task_id="alert",
        cluster=cluster,
        notify=notify,
        base_path=base,
        artefacts_conn_id=artefacts_conn_id(settings),
        fail_on=settings["fail_on"],
        trigger_rule="all_done",
        dag=dag,
    ).as_teardown()
    [*upstream, check] >> alert


def _links_and_assets(cluster: str, audit: Any, gate: Any) -> None:
    """ "Report" on the audit and the gate (the plugin's page of the run's report.html); the audit
    publishes the assets ``kafka-zk://<cluster>/findings`` and ``.../reports`` (extra: the folder)."""
    from airflow_provider_kafka_zk.plugins.assets import audit_outlets, publish_audit_events
    from airflow_provider_kafka_zk.plugins.links import ReportLink

    audit.operator_extra_links = (ReportLink(cluster=cluster),)
    gate.operator_extra_links = (ReportLink(cluster=cluster),)
    audit.outlets = [*audit.outlets, *audit_outlets(cluster)]
    audit._post_execute_hook = publish_audit_events(cluster)


def artefacts_conn_id(settings: Mapping[str, Any]) -> str | None:
    """The cluster file's ``artefacts_conn_id`` (a remote base's connection); None: the operators'
    default, ``[kafka_zk] artefacts_conn_id``."""
    return str(settings["artefacts_conn_id"]) if settings.get("artefacts_conn_id") else None


def spark_conf(settings: Mapping[str, Any]) -> dict[str, str]:
    """The cluster's extra Spark properties (``spark_conf`` in the cluster file) as strings."""
    return {str(k): str(v) for k, v in (settings.get("spark_conf") or {}).items()}


def build_dag(cluster: str, settings: Mapping[str, Any]) -> DAG:
    """One cluster's daily hygiene DAG."""
    from airflow_provider_kafka_zk.alerts.deadline import deadline_alert, record_start
    from airflow_provider_kafka_zk.dags._engine import audit_engine
    from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator, FindingsGateOperator
    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerGroupsOperator,
        BrokerInventoryOperator,
        InventoryCoverageOperator,
        ListBrokerIdsOperator,
    )
    from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

    base = artefacts_base(settings)
    store = artefacts_conn_id(settings)
    engine, engine_warning = audit_engine(cluster, settings)  # in-process when no spark-submit here
    dag_id = f"{DAG_ID}_{cluster}"
    default_args = {
        "retries": int(settings["retries"]),
        "retry_delay": timedelta(seconds=float(settings["retry_delay_s"])),
        "retry_exponential_backoff": float(settings["retry_exponential_backoff"]),
        "max_retry_delay": timedelta(seconds=float(settings["max_retry_delay_s"])),
        "on_execute_callback": [record_start],  # since when each task runs: a late run's page says
    }
    run_ts = "{{ ti.xcom_pull(task_ids='coverage')['inventory_ts'] }}"
    inventory_dir = f"{base.rstrip('/')}/{cluster}/inventory/{run_ts}"
    findings_dir = f"{base.rstrip('/')}/{cluster}/findings/{run_ts}"
    snapshot_dir = "{{ ti.xcom_pull(task_ids='snapshot')['path'] }}"
    with DAG(
        dag_id,
        description=f"Kafka (ZooKeeper mode) hygiene audit of {cluster}"
        + (f" -- {engine_warning}" if engine_warning else ""),
        schedule=settings["schedule"],
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        default_args=default_args,
        tags=["kafka", "zookeeper", "audit", cluster],
        doc_md=(f"**{engine_warning}**\n\n" if engine_warning else "") + (__doc__ or ""),
        deadline=deadline_alert(cluster, settings),  # a run still going past it pages once
    ) as dag:
        snapshot = ZooKeeperSnapshotOperator(
            task_id="snapshot",
            cluster=cluster,
            kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
            base_path=base,
            artefacts_conn_id=store,
        )
        brokers = ListBrokerIdsOperator(
            task_id="brokers", kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"]
        )
        # a task per group of brokers, as many as the deployment runs beside the snapshot (inventory_tasks); the
        # groups are listed from ZooKeeper at the start: the inventory runs beside the snapshot
        groups = BrokerGroupsOperator(
            task_id="inventory_groups",
            kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
            groups=settings.get("inventory_tasks"),
        )
        inventory = BrokerInventoryOperator.partial(
            task_id="inventory",
            map_index_template="brokers {{ task.broker_ids | join(', ') }}",
            cluster=cluster,
            base_path=base,
            artefacts_conn_id=store,
            ssh_conn_id=settings["ssh_conn_id"],
            kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
            broker_hosts=settings.get("broker_hosts"),
            server_properties_path=settings.get("server_properties_path"),
            connect_timeout=settings.get("connect_timeout"),
        ).expand(broker_ids=groups.output)
        coverage = InventoryCoverageOperator(
            task_id="coverage",
            cluster=cluster,
            base_path=base,
            artefacts_conn_id=store,
            expected_broker_ids=brokers.output,
        )
        if engine == "spark":
            from airflow_provider_kafka_zk.operators.spark import ProviderSparkSubmitOperator

            audit = ProviderSparkSubmitOperator(
                task_id="audit",
                app="kafka_zk_audit.py",
                conn_id=settings["spark_conn_id"],
                conf=spark_conf(settings),
                name=f"kafka_zk_audit_{cluster}",
                artefacts_base=base,
                artefacts_conn_id=store,
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
                **(
                    {"application": settings["spark_application"]}
                    if settings.get("spark_application")
                    else {}
                ),
            )
            coverage >> audit
        else:
            audit = ClusterAuditOperator(
                task_id="audit",
                cluster=cluster,
                base_path=base,
                artefacts_conn_id=store,
                snapshot=snapshot_dir,
                inventory=inventory_dir,
                out=findings_dir,
            )
            coverage >> audit
        gate = FindingsGateOperator(
            task_id="gate", findings_path=findings_dir, fail_on=settings["fail_on"], artefacts_conn_id=store
        )
        snapshot >> brokers
        inventory >> coverage
        snapshot >> audit >> gate
        if settings["deletion_check"]:
            _deletion_stage(cluster, settings, base, brokers)
        if settings["log_scan"]:
            _log_scan_stage(
                cluster,
                {**settings, "engine": engine},
                base,
                brokers,
                coverage,
                snapshot,
                run_ts,
                snapshot_dir,
            )
        if settings.get("kraft_readiness"):
            _kraft_readiness_stage(
                cluster, settings, base, audit, (snapshot_dir, inventory_dir, findings_dir), run_ts
            )
        _links_and_assets(cluster, audit, gate)
        _alert_stage(dag, cluster, settings, base, after=inventory)
    return dag


def _deletion_stage(cluster: str, settings: Mapping[str, Any], base: str, brokers: Any) -> None:
    """Every topic marked for deletion gets a verdict (deleted everywhere, in progress, blocked by a
    reassignment or a stopped broker, ignored because ``delete.topic.enable=false``...), read from
    ZooKeeper and each broker's disk. Report only: no cleanup from a scheduled run. A deletion that
    is not settled after ``deletion_wait_s`` fails the task (the alert), without a retry: the next
    day's run is the next look."""
    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    wait_s = float(settings["deletion_wait_s"])
    optional = {"deferrable": False} if wait_s <= 0 else {}
    deletions = TopicDeletionVerifyOperator(
        task_id="deletions",
        cluster=cluster,
        base_path=base,
        artefacts_conn_id=artefacts_conn_id(settings),
        kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
        ssh_conn_id=settings["ssh_conn_id"],
        broker_hosts=settings.get("broker_hosts"),
        server_properties_path=settings.get("server_properties_path"),
        connect_timeout=settings.get("connect_timeout"),
        expected_broker_ids=brokers.output,
        wait_timeout=wait_s,
        retries=0,
        **optional,
    )
    brokers >> deletions


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
        artefacts_conn_id=artefacts_conn_id(settings),
        ssh_conn_id=settings["ssh_conn_id"],
        kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
        broker_hosts=settings.get("broker_hosts"),
        inventory_ts=run_ts,
        scan_ts=run_ts,
        budget_mb=settings["log_scan_budget_mb"],
    ).expand(broker_id=brokers.output)
    scan_dir = f"{base.rstrip('/')}/{cluster}/log-scan/{run_ts}"
    if settings["engine"] == "spark":
        from airflow_provider_kafka_zk.operators.spark import ProviderSparkSubmitOperator

        verdict = ProviderSparkSubmitOperator(
            task_id="log_scan_verdict",
            app="kafka_zk_log_scan.py",
            conn_id=settings["spark_conn_id"],
            conf=spark_conf(settings),
            name=f"kafka_zk_log_scan_{cluster}",
            artefacts_base=base,
            artefacts_conn_id=artefacts_conn_id(settings),
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
    else:
        verdict = LogScanVerdictOperator(
            task_id="log_scan_verdict",
            cluster=cluster,
            base_path=base,
            artefacts_conn_id=artefacts_conn_id(settings),
            scan_ts=run_ts,
            snapshot_path=snapshot_dir,
            fail_on=settings["log_scan_fail_on"],
        )
    coverage >> scan >> verdict
    snapshot >> verdict


def _kraft_readiness_stage(
    cluster: str,
    settings: Mapping[str, Any],
    base: str,
    audit: Any,
    folders: tuple[str, str, str],
    run_ts: str,
) -> None:
    """The optional KRaft migration readiness checks on the run's snapshot, inventory and findings
    (``kafka_zk_kraft_migration_readiness``'s checks): report only, the daily run never fails on them."""
    from airflow_provider_kafka_zk.operators.kraft_readiness import KraftReadinessOperator

    snapshot_dir, inventory_dir, findings_dir = folders
    readiness = KraftReadinessOperator(
        task_id="kraft_readiness",
        cluster=cluster,
        base_path=base,
        artefacts_conn_id=artefacts_conn_id(settings),
        kafka_zookeeper_conn_id=settings["kafka_zookeeper_conn_id"],
        snapshot=snapshot_dir,
        inventory=inventory_dir,
        findings=findings_dir,
        controller_node_ids=list(settings["kraft_controller_node_ids"]),
        readiness_ts=run_ts,
        fail_on_blockers=False,
    )
    audit >> readiness


def create_dags(clusters: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, DAG]:
    """``{dag_id: dag}``, one daily hygiene DAG per configured cluster (none without a cluster file).

    :param clusters: cluster name -> settings; default: the cluster file's (:func:`load_clusters`).
    """
    from airflow_provider_kafka_zk.alerts import check_at_parse

    configured = load_clusters() if clusters is None else clusters
    check_at_parse(configured)  # an unusable notify: an import error of this file, not lost alerts
    dags = (build_dag(cluster, settings) for cluster, settings in configured.items())
    return {dag.dag_id: dag for dag in dags}
