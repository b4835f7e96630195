"""What every manually triggered DAG file shares: the cluster choice, per-cluster settings rendered at
run time, the run's folder name, read retries, and the snapshot operator whose connection follows
the chosen cluster. One place, so the drain, repair, post-maintenance and pre-restart DAGs agree."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_provider_kafka_zk.clusters import cluster_setting, load_clusters

MACROS = {"cluster_setting": cluster_setting}
"""``user_defined_macros`` of a manual DAG: templates call ``cluster_setting(params, key)``."""

RUN_TS = "(ts_nodash or dag_run.run_after.strftime('%Y%m%dT%H%M%S'))"
"""A Jinja expression: the run's folder name (its logical date, or when it was triggered)."""

PLAN_DIR = "{{ (ti.xcom_pull(task_ids='plan') or {}).get('plan_dir') }}"
"""The ``plan`` task's artefact folder."""

READ_RETRIES: dict[str, Any] = {
    "retries": 2,
    "retry_delay": timedelta(seconds=20),
    "retry_exponential_backoff": 2.0,  # a multiplier in Airflow 3.3 (True would mean x1: no backoff)
    "max_retry_delay": timedelta(minutes=5),
}
"""Retries for the steps that only read (snapshots, inventories, verification)."""


def setting(key: str) -> str:
    """The template of one per-cluster setting of the run's ``params.cluster``."""
    return f"{{{{ cluster_setting(params, '{key}') }}}}"


def cluster_choices() -> list[str]:
    """The clusters a form offers: the cluster file's, else ``$KAFKA_ZK_CLUSTER`` (or "default")."""
    return sorted(load_clusters()) or [os.environ.get("KAFKA_ZK_CLUSTER", "default")]


def manual_dag(
    dag_id: str, *, doc_md: str | None, params: dict[str, Any], tags: list[str], one_at_a_time: bool = True
) -> DAG:
    """A manually triggered maintenance DAG: no schedule, Params rendered as native objects (a list
    stays a list), the ``cluster_setting`` macro.

    :param dag_id: the DAG id.
    :param doc_md: the DAG's documentation (its module docstring).
    :param params: the trigger form.
    :param tags: UI tags (``kafka`` and ``zookeeper`` are added).
    :param one_at_a_time: at most one active run (the mutating DAGs); else Airflow's default.
    """
    kwargs: dict[str, Any] = {"max_active_runs": 1} if one_at_a_time else {}
    return DAG(
        dag_id,
        schedule=None,
        catchup=False,
        render_template_as_native_obj=True,
        user_defined_macros=MACROS,
        tags=["kafka", "zookeeper", *tags],
        doc_md=doc_md,
        params=params,
        **kwargs,
    )
