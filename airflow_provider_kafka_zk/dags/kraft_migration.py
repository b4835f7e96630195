"""ZooKeeper to KRaft, one phase per run: ``kafka_zk_kraft_migration``.

Triggered by hand with a validated form; dry run by default. Each run reads every signal of the
cluster -- ``/migration``, ``/controller`` and its epoch, the broker registrations, every broker's and
controller's server.properties and process over SSH, the controllers' ``meta.properties``, metadata
log and log lines -- names the phase they agree on (or refuses, naming each signal), and plans one
move: ``forward`` (provision the KRaft controllers -> roll the brokers into migration mode -> roll them
to KRaft -> finalize) or ``back`` (the revert of the phase it is in). The plan (every config line
changed per host as a diff, every restart in order, every check between restarts, the traps checked)
waits in the ``approve`` task for a person in a real run; the execute step then carries out exactly
that plan on the step executor, one node at a time behind health gates, and the run ends with the
phase read again, ZooKeeper compared with the KRaft metadata while dual-writing, and the stray
partition directories named. Clearing the execute task resumes after the last completed step.
Artefacts: ``<base>/<cluster>/kraft-migration/<ts>/``.

The cluster file gives the controllers (``kraft_controllers``), ``server_properties_path``,
``broker_hosts`` and the command templates (see dags/kafka_zk_clusters.toml).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_kafka_zk.dags._alerting import add_run_alert
from airflow_provider_kafka_zk.dags._manual import (
    CLUSTER,
    PLAN_DIR,
    READ_RETRIES,
    RUN_TS,
    after_run_reads,
    approval_step,
    artefact_url,
    brokers_inventory_and_coverage,
    cluster_audit,
    cluster_choices,
    cluster_snapshot,
    final_report,
    manual_dag,
    setting,
    snapshot_path,
    stop_if_dry_run,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_plan import MIGRATION_DAG_ID
from airflow_provider_kafka_zk.operators.kraft_migration import (
    MIGRATION_DIR,
    REPORT_FILE,
    SUMMARY_FILE,
    KraftMigrationExecuteOperator,
    KraftMigrationPlanOperator,
    KraftMigrationVerifyOperator,
)
from airflow_provider_kafka_zk.operators.kraft_readiness import KraftReadinessOperator
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets

DAG_ID = MIGRATION_DAG_ID
_TS = "{{ " + RUN_TS + " }}"


def build_dag() -> DAG:
    """The ``kafka_zk_kraft_migration`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["kraft", "migration", "maintenance"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string", enum=clusters, title="Cluster", description="Cluster to migrate (choose one)"
            ),
            "direction": Param(
                "forward",
                type="string",
                enum=["forward", "back"],
                title="Direction",
                description="forward: the next phase of the migration; back: revert the phase the cluster is in "
                "(none once finalized)",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                title="Dry run",
                description="Plan and check every step; change nothing. Unticked, the run shows its plan and waits in "
                "task approve until a person approves it (unless the cluster file sets require_approval = false)",
            ),
            "gate_timeout_s": Param(
                900,
                type="number",
                exclusiveMinimum=0,
                title="Gate timeout (s)",
                description="Seconds a restarted broker or controller has to pass its gate; past it the run stops before the next one",
            ),
            "wait_timeout_s": Param(
                600,
                type="number",
                exclusiveMinimum=0,
                title="Migration wait (s)",
                description="Seconds to wait for the migration to reach a state (provisioned, metadata migrated, finalized)",
            ),
            "command_timeout_s": Param(
                600,
                type="number",
                exclusiveMinimum=0,
                title="Command timeout (s)",
                description="Seconds a command template (format, start, stop, restart) may run on its host",
            ),
            "poll_interval_s": Param(
                2.0,
                type="number",
                exclusiveMinimum=0,
                title="Poll interval (s)",
                description="Seconds between checks while waiting",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("safety_snapshot")
        brokers, inventory, coverage = brokers_inventory_and_coverage(inventory_ts=_TS)
        findings = artefact_url(MIGRATION_DIR, RUN_TS, "audit")
        audit = cluster_audit("audit", "safety_snapshot", artefact_url("inventory", RUN_TS), findings)
        readiness = KraftReadinessOperator(
            task_id="readiness",
            cluster=CLUSTER,
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            snapshot=snapshot_path("safety_snapshot"),
            inventory=artefact_url("inventory", RUN_TS),
            findings=findings,
            controller_node_ids=setting("kraft_controller_node_ids"),
            fail_on_blockers=False,  # the plan refuses a forward run from ZooKeeper mode on a blocker
            readiness_ts=_TS,
        )
        plan = KraftMigrationPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            direction="{{ params.direction }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            readiness="{{ ti.xcom_pull(task_ids='readiness') }}",
            inventory_path=artefact_url("inventory", RUN_TS),
            plan_ts=_TS,
        )
        approve = approval_step("KRaft migration")
        execute = KraftMigrationExecuteOperator(
            task_id="execute",
            plan_dir=PLAN_DIR,
            cluster=CLUSTER,
            artefacts_conn_id=setting("artefacts_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            ssh_conn_id=setting("ssh_conn_id"),
            dry_run="{{ params.dry_run }}",
            command_timeout="{{ params.command_timeout_s }}",
            gate_timeout="{{ params.gate_timeout_s }}",
            wait_timeout="{{ params.wait_timeout_s }}",
            poll_interval="{{ params.poll_interval_s }}",
        )
        stop_if_dry = stop_if_dry_run()
        snapshot_after, inventory_after = after_run_reads(brokers)
        findings_after = artefact_url(MIGRATION_DIR, RUN_TS, "audit-after")
        after_inventory = artefact_url("inventory", RUN_TS, suffix="-after")
        audit_after = cluster_audit("audit_after", "snapshot_after", after_inventory, findings_after)
        verify = KraftMigrationVerifyOperator(
            task_id="verify",
            plan_dir=PLAN_DIR,
            cluster=CLUSTER,
            artefacts_conn_id=setting("artefacts_conn_id"),
            findings=findings_after,
            **READ_RETRIES,
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
            """The plan (dry run) or the verification report, in this task's log too."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE, SUMMARY_FILE))

        (
            snapshot
            >> brokers
            >> inventory
            >> coverage
            >> audit
            >> readiness
            >> plan
            >> approve
            >> execute
            >> stop_if_dry
        )
        stop_if_dry >> snapshot_after >> inventory_after >> audit_after >> verify
        final = report(plan.output)
        execute >> final
        verify >> final
    return add_run_alert(add_links_and_assets(dag))


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
