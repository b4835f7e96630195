"""topicId repair (KAFKA-14190): heal topics whose ZooKeeper ``topic_id`` and replicas disagree.

Triggered by hand with a validated form; dry run by default. A fresh safety snapshot and an
inventory of every broker disk feed the diagnosis (precursor / diverged / split / unknown per
topic) and the plan (``plan.json``, ``rollback.json`` written first, ``summary.txt``). The execute
step then, for ``write_back``, writes the replicas' id back into the topic znode (versioned, same
partitions) and moves the controller when ZooKeeper held another id -- no file touched, no restart;
for ``file_reset``, copies then removes ``partition.metadata`` (and, if asked,
``leader-epoch-checkpoint``) only on the replicas that disagree, and restarts those brokers one at a
time through ``restart_command``, the controller last, each gated on its re-registration, its ISR
membership and the under-replicated count. A dry run checks every precondition and logs each step.
A real run ends with a fresh snapshot, inventory and audit of the repaired topics. Clearing the
execute task resumes after the last completed step; a restart that passed its gate is never
repeated. Artefacts: ``<base>/<cluster>/topic-id-repair/<ts>/``.

Clusters and their connections come from the cluster file (see the drain DAG).
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
    final_report,
    inventory_settings,
    manual_dag,
    setting,
)
from airflow_provider_kafka_zk.operators.inventory import (
    BrokerInventoryOperator,
)
from airflow_provider_kafka_zk.operators.topic_id_repair import (
    REPORT_FILE,
    SUMMARY_FILE,
    TopicIdRepairExecuteOperator,
    TopicIdRepairPlanOperator,
    TopicIdRepairVerifyOperator,
)
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets

DAG_ID = "kafka_zk_topic_id_repair"


def _inventory_url(suffix: str = "") -> str:
    return (
        "{{ cluster_setting(params, 'base_path') ~ '/' ~ params.cluster ~ '/inventory/' ~ "
        + RUN_TS
        + (f" ~ '{suffix}'" if suffix else "")
        + " }}"
    )


def build_dag() -> DAG:
    """The ``kafka_zk_topic_id_repair`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["maintenance", "repair"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string", enum=clusters, description="Cluster to repair (choose one)", title="Cluster"
            ),
            "topics": Param(
                [],
                type=["null", "array"],  # may be empty: the form must not mark it required
                items={"type": "string", "minLength": 1},
                description="Topics to repair; empty: every topic whose ids disagree in the fresh snapshot and inventory",
                title="Topics to repair",
            ),
            "strategy": Param(
                "auto",
                type="string",
                enum=["auto", "write_back", "file_reset"],
                description="auto: write_back when every replica agrees (no file touched, no restart), "
                "file_reset when they disagree",
                title="Strategy",
            ),
            "chosen_topic_id": Param(
                None,
                type=["null", "string"],
                pattern="^[A-Za-z0-9_-]{22}$",
                description="file_reset only: the id the replicas keep (default: ZooKeeper's); must be on some replica",
                title="Topic id to keep (file_reset)",
            ),
            "reset_leader_epoch_checkpoint": Param(
                False,
                type="boolean",
                description="file_reset only: also remove leader-epoch-checkpoint. Costs: until new epochs are "
                "written the broker truncates by high watermark, so a later unclean failover may lose records",
                title="Also remove leader-epoch-checkpoint",
            ),
            "restart_command": Param(
                "sudo systemctl restart kafka",
                type="string",
                minLength=1,
                description="file_reset only: run over SSH on each broker host; {broker_id} and {host} are replaced",
                title="Broker restart command",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                description="Plan and check only; nothing is changed. Unticked, the run shows its plan and waits "
                "in task approve until a person approves it (unless the cluster file sets require_approval = false)",
                title="Dry run",
            ),
            "health_timeout_s": Param(
                120,
                type="number",
                exclusiveMinimum=0,
                title="Health wait (s)",
                description="write_back: seconds to wait for every partition to have a leader and a full ISR after the controller move",
            ),
            "gate_timeout_s": Param(
                900,
                type="number",
                exclusiveMinimum=0,
                title="Restart gate timeout (s)",
                description="file_reset: seconds a restarted broker has to register again with its partitions back in the ISR; past it the run stops before the next restart",
            ),
            "poll_interval_s": Param(
                2.0,
                type="number",
                exclusiveMinimum=0,
                title="Poll interval (s)",
                description="Seconds between checks of ZooKeeper while waiting",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("safety_snapshot")
        _ts = "{{ " + RUN_TS + " }}"
        brokers, inventory, coverage = brokers_inventory_and_coverage(inventory_ts=_ts)
        plan = TopicIdRepairPlanOperator(
            task_id="plan",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            snapshot_path="{{ ti.xcom_pull(task_ids='safety_snapshot')['path'] }}",
            inventory_path=_inventory_url(),
            topics="{{ params.topics }}",
            strategy="{{ params.strategy }}",
            chosen_id="{{ params.chosen_topic_id }}",
            reset_leader_epoch_checkpoint="{{ params.reset_leader_epoch_checkpoint }}",
        )
        approve = approval_step("topicId repair")
        execute = TopicIdRepairExecuteOperator(
            task_id="execute",
            plan_dir=PLAN_DIR,
            artefacts_conn_id=setting("artefacts_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            ssh_conn_id=setting("ssh_conn_id"),
            broker_hosts=setting("broker_hosts"),
            server_properties_path=setting("server_properties_path"),
            restart_command="{{ params.restart_command }}",
            dry_run="{{ params.dry_run }}",
            health_timeout="{{ params.health_timeout_s }}",
            gate_timeout="{{ params.gate_timeout_s }}",
            poll_interval="{{ params.poll_interval_s }}",
        )
        stop_if_dry_run = ShortCircuitOperator(
            task_id="stop_if_dry_run",
            python_callable=lambda params, **_: not params["dry_run"],
            ignore_downstream_trigger_rules=False,  # the report still runs after a dry run
        )
        _after_ts = "{{ " + RUN_TS + " ~ '-after' }}"
        snapshot_after = cluster_snapshot("snapshot_after")
        inventory_after = BrokerInventoryOperator.partial(
            task_id="inventory_after", inventory_ts=_after_ts, **inventory_settings()
        ).expand(broker_id=brokers.output)
        verify = TopicIdRepairVerifyOperator(
            task_id="verify",
            plan_dir=PLAN_DIR,
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            snapshot_path="{{ ti.xcom_pull(task_ids='snapshot_after')['path'] }}",
            inventory_path=_inventory_url("-after"),
            **READ_RETRIES,
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
            """The plan (dry run) or the verification report, in this task's log too; a plan that was
            not approved: that report, and the task fails (nothing was changed)."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE, SUMMARY_FILE))

        snapshot >> brokers >> inventory >> coverage >> plan >> approve >> execute >> stop_if_dry_run
        stop_if_dry_run >> snapshot_after >> inventory_after >> verify
        final = report(plan.output)
        execute >> final
        verify >> final
    return add_run_alert(add_links_and_assets(dag))  # Plan/Report links, the report asset; the alert


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
