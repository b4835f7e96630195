"""Pre-maintenance drain: move the replication-factor-1 partitions off brokers before they stop.

Triggered by hand with a validated form. Dry-run by default: it inventories the broker disks for
partition sizes, writes the plan (rollback.json first) from its own read of ZooKeeper (the
cluster id, brokers, every topic znode, the in-flight znodes and the partition states on the
drained brokers: seconds, where the full tree of a large cluster takes far longer), and meanwhile
takes the full safety snapshot (rollback and audit evidence) and scans the drained brokers' logs
and indexes (read-only: will each restart cleanly? ``restart_check`` says when to stop), then
stops. With ``dry_run`` false it then checks that the snapshot, and ZooKeeper, still show what
the plan read (else it refuses before any write), moves the partitions batch by batch,
throttled, waiting for Kafka's completion rule in the triggerer; removes exactly the throttles
it set (even when a step failed); inventories again and verifies ZooKeeper and the disks.
Artefacts: ``<base>/<cluster>/drain/<ts>/``.

Clusters come from ``kafka_zk_clusters.toml`` beside this file (or ``$KAFKA_ZK_CLUSTERS_FILE``),
the file the daily hygiene DAG reads: ``[defaults]`` plus one ``[clusters.<name>]`` table per
cluster with ``kafka_zookeeper_conn_id`` (default ``kafka_zk_<name>``), ``ssh_conn_id`` (default
``kafka_zk_<name>_ssh``), ``base_path``, ``server_properties_path``, ``broker_hosts``, ``enabled``;
``${VAR}`` in a string is replaced by the environment variable. Without the file, the
``KAFKA_ZK_*`` environment variables below describe one cluster.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param, task

from airflow_provider_kafka_zk.dags._alerting import add_run_alert
from airflow_provider_kafka_zk.dags._manual import (
    PLAN_DIR,
    READ_RETRIES,
    RUN_TS,
    approval_step,
    brokers_inventory_and_coverage,
    cluster_choices,
    cluster_snapshot,
    execution_and_throttle_clearing,
    final_report,
    inventory_settings,
    manual_dag,
    setting,
    snapshot_path,
)
from airflow_provider_kafka_zk.operators.drain import (
    DrainPlanOperator,
    DrainVerifyOperator,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import REPORT_FILE
from airflow_provider_kafka_zk.operators.inventory import (
    BrokerInventoryOperator,
)
from airflow_provider_kafka_zk.operators.log_scan import BrokerLogScanOperator, LogScanVerdictOperator
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets

DAG_ID = "kafka_zk_pre_maintenance_drain"


def build_dag() -> DAG:
    """The ``kafka_zk_pre_maintenance_drain`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["maintenance"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string",
                enum=clusters,
                title="Cluster",
                description="The cluster to drain (from the cluster file; choose one)",
            ),
            "brokers": Param(
                type="array",
                items={"type": "integer", "minimum": 0},
                minItems=1,
                title="Brokers about to stop",
                description="Broker ids that will be stopped: their partitions in scope move elsewhere",
            ),
            "scope": Param(
                "rf1",
                type="string",
                enum=["rf1", "all"],
                title="Partitions to move",
                description="rf1: only single-replica partitions (they go offline when their broker stops); "
                "all: every replica on the brokers",
            ),
            "throttle_mb_per_sec": Param(
                50,
                type="integer",
                exclusiveMinimum=0,
                title="Replication throttle (MB/s)",
                description="Leader and follower throttle of the moving replicas, per broker, in MB/s",
            ),
            "max_partitions_per_batch": Param(
                100,
                type="integer",
                minimum=1,
                title="Partitions per batch",
                description="At most this many partitions move in one reassignment",
            ),
            "max_mb_per_batch": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Data per batch (MB)",
                description="At most this much data (the inventory's partition sizes) moves in one "
                "reassignment (empty: no limit)",
            ),
            "excluded_topics": Param(
                [],
                type=["null", "array"],  # may be empty: the form must not mark it required
                items={"type": "string"},
                title="Topics left alone",
                description="Topics never moved, even if in scope",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                title="Dry run",
                description="Plan only; nothing is written to ZooKeeper. Unticked, the run shows its plan and "
                "waits in task approve until a person approves it (unless the cluster file sets "
                "require_approval = false)",
            ),
            "allow_partial": Param(
                False,
                type="boolean",
                title="Allow a partial drain",
                description="Drain what can be moved even if some partitions cannot (they are listed)",
            ),
            "poll_interval_s": Param(
                10.0,
                type="number",
                exclusiveMinimum=0,
                title="Poll interval (s)",
                description="Seconds between checks of a running reassignment",
            ),
            "batch_timeout_s": Param(
                6 * 3600,
                type="number",
                exclusiveMinimum=0,
                title="Batch timeout (s)",
                description="Seconds one batch may take before the run stops (21600 = 6 h); a rerun resumes",
            ),
            "restart_check": Param(
                "fails_recovery",
                type="string",
                enum=["fails_recovery", "loses_data_if_unclean", "rebuilds_indexes", "never"],
                title="Pre-restart check",
                description="Before anything moves, scan the drained brokers' logs and indexes (read-only) and stop "
                "when a broker's restart verdict is this bad or worse (never: report only)",
            ),
            "restart_check_budget_mb": Param(
                10240,
                type="integer",
                minimum=1,
                title="Pre-restart check budget (MiB per broker)",
                description="Bytes of segments and indexes the scan may read on each broker, in MiB",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("safety_snapshot")
        brokers, inventory, coverage = brokers_inventory_and_coverage()

        @task(task_id="drained_brokers")
        def drained_brokers(params: dict[str, Any]) -> list[int]:
            """The brokers about to stop (the mapped scan's input)."""
            return [int(b) for b in params["brokers"]]

        log_scan = BrokerLogScanOperator.partial(
            task_id="log_scan",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            ssh_conn_id=setting("ssh_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            broker_hosts=setting("broker_hosts"),
            budget_mb="{{ params.restart_check_budget_mb }}",
            **READ_RETRIES,
        ).expand(broker_id=drained_brokers())
        restart_check = LogScanVerdictOperator(
            task_id="restart_check",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            snapshot_path=snapshot_path("safety_snapshot"),
            fail_on="{{ params.restart_check }}",
        )
        plan = DrainPlanOperator(
            task_id="plan",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            brokers="{{ params.brokers }}",
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),  # its own planning read
            scope="{{ params.scope }}",
            excluded_topics="{{ params.excluded_topics }}",
            max_partitions_per_batch="{{ params.max_partitions_per_batch }}",
            max_bytes_per_batch="{{ params.max_mb_per_batch * 1024 * 1024 if params.max_mb_per_batch else None }}",
            allow_partial="{{ params.allow_partial }}",
            retries=1,
        )
        approve = approval_step("Drain")
        stop_if_dry_run = ShortCircuitOperator(
            task_id="stop_if_dry_run",
            python_callable=lambda params, **_: not params["dry_run"],
        )
        execute, clear_throttles = execution_and_throttle_clearing("execute", snapshot_task="safety_snapshot")
        _after_ts = "{{ " + RUN_TS + " ~ '-after' }}"
        inventory_after = BrokerInventoryOperator.partial(
            task_id="inventory_after", inventory_ts=_after_ts, **inventory_settings()
        ).expand(broker_id=brokers.output)
        verify = DrainVerifyOperator(
            task_id="verify",
            plan_dir=PLAN_DIR,
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            inventory_path="{{ cluster_setting(params, 'base_path') ~ '/' ~ params.cluster ~ '/inventory/' ~ "
            + RUN_TS
            + " ~ '-after' }}",
            **READ_RETRIES,
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(
            plan_result: dict[str, Any],
            verify_result: dict[str, Any] | None,
            params: dict[str, Any] | None = None,
        ) -> str:
            """Put the final report in this task's log too (the artefact is ``report.txt``); a plan that
            was not approved: that report, and the task fails (nothing was changed)."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE,))

        # The plan does not wait for the full snapshot (its own read takes what it needs); nothing
        # moves before the snapshot, the restart check and the plan are all there, and (a real run)
        # a person approved the plan.
        brokers >> inventory >> coverage >> [plan, log_scan]  # the scan reads the inventory
        [snapshot, log_scan] >> restart_check >> approve
        plan >> approve >> stop_if_dry_run >> execute
        execute >> clear_throttles >> inventory_after >> verify
        execute >> [inventory_after, verify]  # a failed execute still clears throttles, then the run fails
        report(plan.output, verify.output)
    return add_run_alert(add_links_and_assets(dag))  # Plan/Report links, the report asset; the alert


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
