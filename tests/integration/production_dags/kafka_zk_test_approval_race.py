"""A DAG the production harness parses beside the shipped ones (tests only, never installed): the real
approval step (``approval_step``, as every mutating DAG has it) between a plan and a write, and
nothing else, so ``test_production_approval_race.py`` can have many plans answered quickly.

``plan`` writes a drain-shaped ``plan.json`` and ``rollback.json`` to the cluster's artefact store,
``approve`` is :class:`~airflow_provider_kafka_zk.operators.approval.PlanApprovalOperator`, ``write``
stands for a writing step (it runs only after an approval and records the decision it was given), and
``report`` is the manual DAGs' report: a rejected plan fails the run saying who rejected it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_kafka_zk.dags._manual import MACROS, approval_step, final_report

DAG_ID = "kafka_zk_test_approval_race"

with DAG(
    DAG_ID,
    schedule=None,
    catchup=False,
    max_active_runs=16,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    tags=["kafka", "test"],
    # a busy machine can time out a task's call to the API server: retried, as the shipped DAGs' reads
    default_args={"retries": 2, "retry_delay": timedelta(seconds=5)},
    params={
        "cluster": Param("approval", type="string"),
        "dry_run": Param(False, type="boolean"),
    },
) as dag:

    @task(task_id="plan")
    def plan(params: dict[str, Any], dag_run: Any = None) -> dict[str, Any]:
        """A drain-shaped plan of one move, in ``<base>/<cluster>/approval-race/<run key>/``."""
        from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
        from airflow_provider_kafka_zk.clusters import cluster_setting
        from airflow_provider_kafka_zk.operators._run import run_key_of

        cluster = params["cluster"]
        base = artefacts_url(
            str(cluster_setting(params, "base_path")), cluster_setting(params, "artefacts_conn_id") or None
        )
        folder = f"{base.rstrip('/')}/{cluster}/approval-race/{run_key_of(dag_run)}"
        move = {"topic": "orders", "partition": 0, "current": [2], "target": [3], "size_bytes": 4096}
        content = {
            "format": "kafka-zk-drain-plan",
            "cluster": cluster,
            "run_id": dag_run.run_id,  # each run's plan has its own hash
            "request": {"brokers": [2], "scope": "rf1"},
            "batches": [[move]],
        }
        write_url_atomically(f"{folder}/rollback.json", json.dumps({"partitions": [move]}).encode())
        write_url_atomically(f"{folder}/plan.json", json.dumps(content, indent=1).encode())
        return {"plan_dir": folder}

    @task(task_id="write")
    def write(plan_result: dict[str, Any], ti: Any = None) -> str:
        """What a writing step does with the decision: it runs only after Approve."""
        from airflow_provider_kafka_zk.artefacts.files import write_url_atomically

        record = ti.xcom_pull(task_ids="approve", key="approval")
        if not isinstance(record, dict) or record.get("decision") != "approved":
            raise RuntimeError(f"write ran without an approval: {record!r}")
        text = f"written after approval by {record['decided_by']['name']} of {record['plan']['sha256']}\n"
        write_url_atomically(f"{plan_result['plan_dir']}/report.txt", text.encode())
        return text

    @task(task_id="report", trigger_rule="none_failed_min_one_success")
    def report(plan_result: dict[str, Any], params: dict[str, Any] | None = None) -> str:
        return final_report(plan_result["plan_dir"], params or {}, ("report.txt",))

    planned = plan()
    approve = approval_step("approval race test")
    written = write(planned)
    planned >> approve >> written >> report(planned)
