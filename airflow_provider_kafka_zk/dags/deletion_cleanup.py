"""Deletion cleanup: move the leftovers of deleted topics into a quarantine and delete their leftover
config znodes, as an approved change.

Triggered by hand with a validated form, for the topics the deletion verifier (or the daily
audit) found INCOMPLETE -- its finding prints this DAG's exact conf. Dry run by default. The plan
task takes a fresh verdict of each topic from ZooKeeper and every broker disk and plans every
directory to move into a quarantine on its broker host and every ``/config/topics/<t>`` to delete,
per broker, with the cluster identity and why each is safe, and what it leaves alone and why; it is
checked as the real run's first write would be (the cluster and every broker host pinned, every path
rule, the host script's own dry run on each broker) and stored (``rollback.json`` first,
``plan.json``, ``summary.txt``). With ``dry_run`` false the run then waits in ``approve`` until a
person approves that exact plan (unless the cluster file sets ``require_approval = false``); the
execute step refuses when the plan changed since or the cluster moved since the plan (a leftover
gone or new, a broker started or stopped, a topic back, a config znode changed), moves the
directories (renamed on the same filesystem, never deleted) and deletes the config znodes (saved
first, one versioned multi-op), then the verify step gives the verdicts again (``report.txt``).
Artefacts: ``<base>/<cluster>/deletion-cleanup/<run key>/``.

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
from airflow_provider_kafka_zk.operators.deletion_cleanup import (
    DAG_ID,
    REPORT_FILE,
    SUMMARY_FILE,
    DeletionCleanupExecuteOperator,
    DeletionCleanupPlanOperator,
    DeletionCleanupVerifyOperator,
)
from airflow_provider_kafka_zk.plugins.wiring import add_links_and_assets


def _reach() -> dict[str, str]:
    """How every task reaches the run's cluster and its broker hosts (the cluster file's settings)."""
    return {
        "kafka_zookeeper_conn_id": setting("kafka_zookeeper_conn_id"),
        "ssh_conn_id": setting("ssh_conn_id"),
        "broker_hosts": setting("broker_hosts"),
        "server_properties_path": setting("server_properties_path"),
        "artefacts_conn_id": setting("artefacts_conn_id"),
    }


def build_dag() -> DAG:
    """The ``kafka_zk_deletion_cleanup`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["maintenance", "deletion"],
        doc_md=__doc__,
        params={
            "cluster": Param(
                type="string",
                enum=clusters,
                title="Cluster",
                description="The cluster whose deleted topics left leftovers (from the cluster file)",
            ),
            "topics": Param(
                type="array",
                items={"type": "string", "minLength": 1},
                minItems=1,
                title="Deleted topics",
                description="Topics whose deletion the verifier found INCOMPLETE (leftover directories or "
                "/config/topics/<t>): their leftovers are moved into a quarantine, their config znodes deleted",
            ),
            "dry_run": Param(
                True,
                type="boolean",
                title="Dry run",
                description="Plan and check only; nothing is moved or deleted. Unticked, the run shows its plan "
                "and waits in task approve until a person approves it (unless the cluster file sets "
                "require_approval = false)",
            ),
            "quarantine_dir": Param(
                None,
                type=["null", "string"],
                title="Quarantine directory",
                description="Absolute directory on the broker hosts, outside every log dir, on the same "
                "filesystem (empty: <log dir>/../kafka-quarantine); the run's key is the subfolder",
            ),
            "allow_running_broker_orphans": Param(
                False,
                type="boolean",
                title="Move live-named directories under a running broker",
                description="Also move a live-named leftover directory while its broker runs (the broker may "
                "hold it open: moving it can take the log dir offline); by default they are left, saying why",
            ),
        },
    ) as dag:
        plan = DeletionCleanupPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            topics="{{ params.topics }}",
            base_path=setting("base_path"),
            quarantine_dir="{{ params.quarantine_dir }}",
            allow_running_broker_orphans="{{ params.allow_running_broker_orphans }}",
            **_reach(),
            **READ_RETRIES,
        )
        stop_if_nothing_to_clean = ShortCircuitOperator(
            task_id="stop_if_nothing_to_clean",
            python_callable=lambda ti, **_: not (ti.xcom_pull(task_ids="plan") or {}).get("nothing_to_clean"),
            ignore_downstream_trigger_rules=False,  # the report still runs
        )
        approve = approval_step("Deletion cleanup")
        execute = DeletionCleanupExecuteOperator(
            task_id="execute", plan_dir=PLAN_DIR, dry_run="{{ params.dry_run }}", **_reach()
        )
        stop_if_dry_run = ShortCircuitOperator(
            task_id="stop_if_dry_run",
            python_callable=lambda params, **_: not params["dry_run"],
            ignore_downstream_trigger_rules=False,  # the report still runs after a dry run
        )
        verify = DeletionCleanupVerifyOperator(
            task_id="verify", plan_dir=PLAN_DIR, **_reach(), **READ_RETRIES
        )

        @task(task_id="report", trigger_rule="none_failed_min_one_success")
        def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
            """The plan (dry run, nothing to clean) or the verification report, in this task's log too; a
            plan that was not approved: that report, and the task fails (nothing was changed)."""
            return final_report(plan_result["plan_dir"], params or {}, (REPORT_FILE, SUMMARY_FILE))

        plan >> stop_if_nothing_to_clean >> approve >> execute >> stop_if_dry_run >> verify
        final = report(plan.output)
        execute >> final
        verify >> final
    return add_run_alert(add_links_and_assets(dag))  # Plan/Report links, the report asset; the alert


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
