"""Undo a change: put back what one run of this provider changed -- a pre-maintenance drain (and its
throttles), a post-maintenance move-back, a topicId repair, a deletion cleanup.

Triggered by hand with a validated form; dry run by default. Give the cluster and the Airflow run id
of the run to undo (its DAG id is found from the run id when left empty). The ``plan`` task finds
that run's folder, reads its rollback artefacts and change logs and the cluster now, and plans the
way back as typed steps: partitions moved back through a throttled reassignment (the drain's own
batches), throttles of the run removed, topic znodes and deleted config znodes written back with
version checks, removed ``partition.metadata`` files and quarantined directories put back. It
refuses, naming the znode / file / directory / broker / partition, when the run left nothing to undo
from, is still running or holds the cluster's maintenance lease, was made on another cluster, or
when anything changed since the run wrote it; what is already back counts as done, so undoing the
same run twice plans nothing the second time and says so. A real run waits in task ``approve``
until a person approves the plan, then ``execute`` carries it out on the step executor (every step
checked before the first write; the dry run is the real run minus the writes), ``clear_throttles``
removes the undo's own throttles and gives the lease back, and ``verify`` reads everything back.
A preferred leader election and broker restarts are not undone (said in the plan). Artefacts:
``<base>/<cluster>/undo/<run key>/``.

Clusters and their connections come from the cluster file (see the drain DAG).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.python import ShortCircuitOperator
from airflow.sdk import DAG, Param, task

from airflow_provider_kafka_zk.dags._alerting import add_run_alert
from airflow_provider_kafka_zk.dags._manual import (
    CLUSTER,
    PLAN_DIR,
    READ_RETRIES,
    approval_step,
    cluster_choices,
    final_report,
    manual_dag,
    setting,
)
from airflow_provider_kafka_zk.kafka.undo import DAG_KINDS, UNDO_DAG_ID
from airflow_provider_kafka_zk.operators.drain import ClearReplicationThrottlesOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import REPORT_FILE, SUMMARY_FILE
from airflow_provider_kafka_zk.operators.undo import UndoExecuteOperator, UndoPlanOperator, UndoVerifyOperator
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets

DAG_ID = UNDO_DAG_ID


def _something_to_do(ti: Any, **_: Any) -> bool:
    return not (ti.xcom_pull(task_ids="plan") or {}).get("nothing_to_do")


def build_dag() -> DAG:
    """The ``kafka_zk_undo`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    hosts = {
        "ssh_conn_id": setting("ssh_conn_id"),
        "broker_hosts": setting("broker_hosts"),
        "server_properties_path": setting("server_properties_path"),
    }
    with manual_dag(
        DAG_ID,
        tags=["maintenance", "undo"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string",
                enum=clusters,
                title="Cluster",
                description="The cluster the run changed (choose one)",
            ),
            "run_id": Param(
                type="string",
                minLength=1,
                title="Run to undo",
                description="The Airflow run id of the drain, move-back, topicId repair or deletion cleanup run to undo "
                "(a kafka_zk_kraft_migration run is undone by that DAG's back run: the plan task says how)",
            ),
            "dag_id": Param(
                None,
                type=["null", "string"],
                title="DAG of that run",
                description="Optional: " + ", ".join(sorted(DAG_KINDS)) + " (empty: found from the run id)",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                title="Dry run",
                description="Plan and check only; nothing is written. Unticked, the run shows its plan and waits in "
                "task approve until a person approves it (unless the cluster file sets require_approval = false)",
            ),
            "throttle_mb_per_sec": Param(
                50,
                type="integer",
                exclusiveMinimum=0,
                title="Replication throttle (MB/s)",
                description="Throttle of the partitions moving back, per broker, in MB/s",
            ),
            "max_partitions_per_batch": Param(
                100,
                type="integer",
                minimum=1,
                title="Partitions per batch",
                description="At most this many partitions move back in one reassignment",
            ),
            "max_mb_per_batch": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Data per batch (MB)",
                description="At most this much data moves back in one reassignment (empty: no limit)",
            ),
            "allow_running_broker_orphans": Param(
                False,
                type="boolean",
                title="Restore live-named directories under a running broker",
                description="Deletion cleanup only: also move a live-named (not -delete) directory back while its "
                "broker runs (a running broker asked to host that partition would take it for its log)",
            ),
            "poll_interval_s": Param(
                10.0,
                type="number",
                exclusiveMinimum=0,
                title="Poll interval (s)",
                description="Seconds between checks of a running reassignment or controller election",
            ),
            "batch_timeout_s": Param(
                6 * 3600,
                type="number",
                exclusiveMinimum=0,
                title="Batch timeout (s)",
                description="Seconds one batch moving back may take before the run stops (21600 = 6 h); a rerun resumes",
            ),
            "health_timeout_s": Param(
                120,
                type="number",
                exclusiveMinimum=0,
                title="Health wait (s)",
                description="topicId repair only: seconds to wait for every partition to have a leader and a full "
                "ISR after the controller move",
            ),
        },
    ) as dag:
        plan = UndoPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            original_run_id="{{ params.run_id }}",
            original_dag_id="{{ params.dag_id }}",
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            max_partitions_per_batch="{{ params.max_partitions_per_batch }}",
            max_bytes_per_batch="{{ params.max_mb_per_batch * 1024 * 1024 if params.max_mb_per_batch else None }}",
            allow_running_broker_orphans="{{ params.allow_running_broker_orphans }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            **hosts,
            retries=1,
        )
        stop_if_nothing_to_do = ShortCircuitOperator(
            task_id="stop_if_nothing_to_do",
            python_callable=_something_to_do,
            ignore_downstream_trigger_rules=False,  # the report still says why nothing was done
        )
        approve = approval_step("Undo")
        execute = UndoExecuteOperator(
            task_id="execute",
            plan_dir=PLAN_DIR,
            throttle_bytes_per_sec="{{ params.throttle_mb_per_sec * 1024 * 1024 }}",
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            dry_run="{{ params.dry_run }}",
            poll_interval="{{ params.poll_interval_s }}",
            batch_timeout="{{ params.batch_timeout_s }}",
            health_timeout="{{ params.health_timeout_s }}",
            artefacts_conn_id=setting("artefacts_conn_id"),
            **hosts,
        )
        clear_throttles = ClearReplicationThrottlesOperator(
            task_id="clear_throttles",
            plan_dir=PLAN_DIR,
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            dry_run="{{ params.dry_run }}",
            **READ_RETRIES,
        )
        stop_if_dry_run = ShortCircuitOperator(
            task_id="stop_if_dry_run",
            python_callable=lambda params, **_: not params["dry_run"],
            ignore_downstream_trigger_rules=False,  # the report still runs after a dry run
        )
        verify = UndoVerifyOperator(
            task_id="verify",
            plan_dir=PLAN_DIR,
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            **hosts,
            **READ_RETRIES,
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
            """The verification (a real run), the plan (a dry run) or why there is nothing to undo, in this
            task's log too; a plan that was not approved: that report, and the task fails."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE, SUMMARY_FILE))

        plan >> stop_if_nothing_to_do >> approve >> execute >> clear_throttles >> stop_if_dry_run >> verify
        execute >> verify  # a failed execute is not verified (the run fails, its alert says where it stopped)
        final = report(plan.output)
        execute >> final
        verify >> final
    return add_run_alert(add_links_and_assets(dag))  # Plan/Report links, the report asset; the alert


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
