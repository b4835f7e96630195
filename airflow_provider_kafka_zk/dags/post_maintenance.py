"""After maintenance: put the cluster back -- move a drain's partitions back, re-elect preferred
leaders, confirm health.

Triggered by hand with a validated form; dry run by default. A fresh snapshot and an inventory of
every broker disk feed a health gate (the returning brokers registered, no partition without a live
leader, under-replicated partitions back at the count before the maintenance) and the plan: the
partitions the named drain run moved that are still where it put them go back (``rollback.json``
first; anything moved since is reported, never touched), through the drain's throttled, locked,
batched execution; the drain's throttle clearing removes exactly what this run set; then a preferred
leader election (``/admin/preferred_replica_election``, created, never overwritten) for the
partitions whose preferred replica is a returning broker; a fresh snapshot and the audit's own
leader-imbalance rule verify. A dry run checks the gate and logs every move and election it would
make. ``drain_run`` is the drain's artefact folder name, path or Airflow run id. Artefacts:
``<base>/<cluster>/post-maintenance/<ts>/``.

Clusters and their connections come from the cluster file (see the drain DAG).
"""

from __future__ import annotations

from datetime import timedelta
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
    manual_dag,
    setting,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import SUMMARY_FILE
from airflow_provider_kafka_zk.operators.post_maintenance import (
    REPORT_FILE,
    PostMaintenancePlanOperator,
    PostMaintenanceVerifyOperator,
    PreferredLeaderElectionOperator,
)
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets

DAG_ID = "kafka_zk_post_maintenance"


def build_dag() -> DAG:
    """The ``kafka_zk_post_maintenance`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["maintenance"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string", enum=clusters, description="Cluster to put back (choose one)", title="Cluster"
            ),
            "drain_run": Param(
                "",
                type=["null", "string"],  # may be empty: the form must not mark it required
                title="Drain run to undo",
                description="The pre-maintenance drain whose partitions go back: its Airflow run id or artefact "
                "folder name (empty: no move-back, only the gate and the election)",
            ),
            "brokers": Param(
                [],
                type=["null", "array"],  # may be empty: the form must not mark it required
                items={"type": "integer", "minimum": 0},
                title="Returning brokers",
                description="Brokers the maintenance stopped (empty: the drain run's brokers)",
            ),
            "move_back": Param(
                True,
                type="boolean",
                description="Move the drain's partitions back where they were",
                title="Move the drain's partitions back",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                description="Gate and plan only; nothing is written. Unticked, the run shows its plan and waits "
                "in task approve until a person approves it (unless the cluster file sets require_approval = false)",
                title="Dry run",
            ),
            "throttle_mb_per_sec": Param(
                50,
                type="integer",
                exclusiveMinimum=0,
                title="Replication throttle (MB/s)",
                description="Throttle of the move-back, per broker, in MB/s",
            ),
            "max_under_replicated": Param(
                None,
                type=["null", "integer"],
                minimum=0,
                description="Under-replicated partitions the gate accepts (empty: the count in the drain's safety "
                "snapshot, or 0)",
                title="Under-replicated partitions accepted",
            ),
            "poll_interval_s": Param(
                5.0,
                type="number",
                exclusiveMinimum=0,
                title="Poll interval (s)",
                description="Seconds between checks of a running reassignment or election",
            ),
            "batch_timeout_s": Param(
                6 * 3600,
                type="number",
                exclusiveMinimum=0,
                title="Move-back batch timeout (s)",
                description="Seconds one move-back batch may take before the run stops (21600 = 6 h); a rerun resumes",
            ),
            "election_timeout_s": Param(
                600,
                type="number",
                exclusiveMinimum=0,
                title="Election timeout (s)",
                description="Seconds the controller has to carry out one preferred leader election batch",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("safety_snapshot")
        _ts = "{{ " + RUN_TS + " }}"
        brokers, inventory, coverage = brokers_inventory_and_coverage(inventory_ts=_ts)
        plan = PostMaintenancePlanOperator(
            task_id="plan",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            brokers="{{ params.brokers }}",
            drain_run="{{ params.drain_run }}",
            snapshot_path="{{ ti.xcom_pull(task_ids='safety_snapshot')['path'] }}",
            inventory_ts=_ts,
            max_under_replicated="{{ params.max_under_replicated }}",
            move_back="{{ params.move_back }}",
            run_ts=_ts,
        )
        approve = approval_step("Post-maintenance move-back and election")
        move_back, clear_throttles = execution_and_throttle_clearing("move_back")
        elect = PreferredLeaderElectionOperator(
            task_id="elect_preferred_leaders",
            cluster="{{ params.cluster }}",
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            brokers="{{ ti.xcom_pull(task_ids='plan')['brokers'] }}",
            artefact_dir=PLAN_DIR,
            plan_dir=PLAN_DIR,
            artefacts_conn_id=setting("artefacts_conn_id"),
            dry_run="{{ params.dry_run }}",
            poll_interval="{{ params.poll_interval_s }}",
            timeout="{{ params.election_timeout_s }}",
            retries=1,
            retry_delay=timedelta(seconds=30),
        )
        stop_if_dry_run = ShortCircuitOperator(
            task_id="stop_if_dry_run",
            python_callable=lambda params, **_: not params["dry_run"],
            ignore_downstream_trigger_rules=False,  # the report still runs after a dry run
        )
        snapshot_after = cluster_snapshot("snapshot_after")
        verify = PostMaintenanceVerifyOperator(
            task_id="verify",
            plan_dir=PLAN_DIR,
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            snapshot_path="{{ ti.xcom_pull(task_ids='snapshot_after')['path'] }}",
            inventory_path="{{ cluster_setting(params, 'base_path') ~ '/' ~ params.cluster ~ '/inventory/' ~ "
            + RUN_TS
            + " }}",
            **READ_RETRIES,
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
            """The plan (dry run) or the verification report, in this task's log too; a plan that was
            not approved: that report, and the task fails (nothing was changed)."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE, SUMMARY_FILE))

        (
            snapshot
            >> brokers
            >> inventory
            >> coverage
            >> plan
            >> approve
            >> move_back
            >> clear_throttles
            >> elect
        )
        move_back >> elect  # a failed move-back clears its throttles, then the run stops before the election
        elect >> stop_if_dry_run >> snapshot_after >> verify
        final = report(plan.output)
        elect >> final
        verify >> final
    return add_run_alert(add_links_and_assets(dag))  # Plan/Report links, the report asset; the alert


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
