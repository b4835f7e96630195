"""What every manually triggered DAG file shares: the cluster choice, per-cluster settings rendered at
run time, the run's folder name, read retries, and the first steps of a maintenance run (a snapshot
of the chosen cluster, its brokers, their inventory and its coverage). One place, so the drain,
repair, post-maintenance and pre-restart DAGs agree."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_provider_kafka_zk.clusters import cluster_setting, load_clusters
from airflow_provider_kafka_zk.operators._run import run_key_of

MACROS = {"cluster_setting": cluster_setting, "run_key": run_key_of}
"""``user_defined_macros`` of a manual DAG: templates call ``cluster_setting(params, key)`` and
``run_key(dag_run)``."""

RUN_TS = "run_key(dag_run)"
"""A Jinja expression: the run's folder name, from what every run has (``run_after`` and the run
id: :func:`~airflow_provider_kafka_zk.operators._run.run_key`), the same name the operators
use by default. Never a macro derived from the run's date interval: a run triggered by ``airflow dags
trigger`` or ``POST /api/v2/dags/{id}/dagRuns`` has none, and those macros are undefined
(StrictUndefined: the template fails)."""

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


def run_folder(plan_dir: str, params: dict[str, Any]) -> Any:
    """The run folder (``DrainLocation``) a report task reads, on the cluster's artefact store, bound
    with its ``artefacts_conn_id`` first (a remote store is reachable only then).

    :param plan_dir: the plan task's folder.
    :param params: the run's params (``cluster`` is read).
    """
    from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
    from airflow_provider_kafka_zk.operators.drain_artefacts import DrainLocation

    conn_id = cluster_setting(params, "artefacts_conn_id") if params.get("cluster") else None
    return DrainLocation(artefacts_url(plan_dir, conn_id or None))


def approval_step(title: str) -> Any:
    """The ``approve`` task between a plan and its first write: shows the plan (root cause first) and
    its sha256 and waits for a person's decision in a real run (dry run: passes straight through;
    ``require_approval = false`` in the cluster file: records the hash and passes). Reject or a
    time-out skip the writing tasks after it; the execute steps refuse a plan that differs from the
    approved one (:mod:`airflow_provider_kafka_zk.operators.approval`).

    :param title: what the DAG does, for the approval's subject ("Drain" ...).
    """
    from airflow_provider_kafka_zk.operators.approval import PlanApprovalOperator

    return PlanApprovalOperator(
        task_id="approve",
        plan_dir=PLAN_DIR,
        cluster=CLUSTER,
        dry_run="{{ params.dry_run }}",
        title=title,
        artefacts_conn_id=setting("artefacts_conn_id"),
    )


def final_report(plan_dir: str, params: dict[str, Any], names: tuple[str, ...]) -> str:
    """What a manual DAG's ``report`` task prints and returns: the first of ``names`` the run wrote,
    after the approval (who approved which plan hash; written into ``report.txt`` too). A plan that was
    rejected or timed out gets the not-approved report instead, and the task fails saying why (nothing
    was changed).

    :param plan_dir: the plan task's folder.
    :param params: the run's params (``cluster`` is read).
    :param names: the report files in order of preference (``report.txt``, ``summary.txt``).
    """
    from airflow_provider_kafka_zk.operators.approved_plan import report_with_approval

    location = run_folder(plan_dir, params)
    name = next((n for n in names if location.exists(n)), names[0])
    original = {}

    def read() -> str:
        original["text"] = location.read_text(name)
        return original["text"]

    text = report_with_approval(location.url, read)
    if (
        name == "report.txt"
        and text != original.get("text")
        and not original["text"].startswith(text.split("\n", 1)[0])
    ):
        location.write(name, text)  # the report a person opens says who approved which plan
    print(text)
    return location.path(name)


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


CLUSTER = "{{ params.cluster }}"
"""The run's cluster (a Params field of every manual DAG)."""


_CLUSTER_FOLDER = "cluster_setting(params, 'base_path').rstrip('/') ~ '/' ~ params.cluster"


def artefact_url(*parts: str, suffix: str = "") -> str:
    """A folder of the run's cluster in its artefact store, as a template: ``<base>/<cluster>/<parts>``;
    a part that is :data:`RUN_TS` stands for the run's key (``artefact_url("inventory", RUN_TS)``),
    ``suffix`` is appended to the last part (``-after``)."""
    path = "".join(f" ~ '/{p}'" if p != RUN_TS else f" ~ '/' ~ {RUN_TS}" for p in parts)
    return "{{ " + _CLUSTER_FOLDER + path + (f" ~ '{suffix}'" if suffix else "") + " }}"


def cluster_audit(task_id: str, snapshot_task: str, inventory: str, out: str) -> Any:
    """The audit's rules (in-process) on the snapshot task ``snapshot_task`` returned and the
    inventory folder ``inventory``, findings written to ``out`` (both templates); no previous run."""
    from airflow_provider_kafka_zk.operators.audit import ClusterAuditOperator

    return ClusterAuditOperator(
        task_id=task_id,
        cluster=CLUSTER,
        base_path=setting("base_path"),
        artefacts_conn_id=setting("artefacts_conn_id"),
        snapshot=snapshot_path(snapshot_task),
        previous="",
        inventory=inventory,
        out=out,
        **READ_RETRIES,
    )


def stop_if_dry_run() -> Any:
    """Task ``stop_if_dry_run``: the after-run reads and the verify step are skipped after a dry run;
    the report still runs."""
    from airflow.providers.standard.operators.python import ShortCircuitOperator

    return ShortCircuitOperator(
        task_id="stop_if_dry_run",
        python_callable=lambda params, **_: not params["dry_run"],
        ignore_downstream_trigger_rules=False,  # the report still runs after a dry run
    )


def after_run_reads(brokers: Any) -> tuple[Any, Any]:
    """Tasks ``snapshot_after`` and ``inventory_after`` (one per broker ``brokers`` lists): the cluster
    as the run left it, the inventory under ``<run key>-after``."""
    from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator

    snapshot = cluster_snapshot("snapshot_after")
    inventory = BrokerInventoryOperator.partial(
        task_id="inventory_after", inventory_ts="{{ " + RUN_TS + " ~ '-after' }}", **inventory_settings()
    ).expand(broker_id=brokers.output)
    return snapshot, inventory


def snapshot_path(task_id: str) -> str:
    """The template of the snapshot path the snapshot task ``task_id`` returned."""
    return f"{{{{ ti.xcom_pull(task_ids='{task_id}')['path'] }}}}"


def cluster_snapshot(task_id: str, retries: dict[str, Any] = READ_RETRIES) -> Any:
    """A snapshot of the run's cluster. No outlet Asset: the cluster is only known at run time. A
    connection whose chroot holds no Kafka cluster fails it at once (no retry), before any slow step.

    :param task_id: the task id (``safety_snapshot``, ``snapshot_after`` ...).
    :param retries: the retry arguments (default :data:`READ_RETRIES`).
    """
    from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

    return ZooKeeperSnapshotOperator(
        task_id=task_id,
        cluster=CLUSTER,
        kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
        base_path=setting("base_path"),
        artefacts_conn_id=setting("artefacts_conn_id"),
        outlets=[],
        require_kafka_cluster=True,
        **retries,
    )


def inventory_settings(retries: dict[str, Any] = READ_RETRIES) -> dict[str, Any]:
    """The arguments every broker inventory of the run's cluster takes (all but broker and folder).

    :param retries: the retry arguments (default :data:`READ_RETRIES`).
    """
    return {
        "cluster": CLUSTER,
        "base_path": setting("base_path"),
        "artefacts_conn_id": setting("artefacts_conn_id"),
        "ssh_conn_id": setting("ssh_conn_id"),
        "kafka_zookeeper_conn_id": setting("kafka_zookeeper_conn_id"),
        "server_properties_path": setting("server_properties_path"),
        "broker_hosts": setting("broker_hosts"),
        **retries,
    }


def brokers_inventory_and_coverage(inventory_ts: str | None = None) -> tuple[Any, Any, Any]:
    """``brokers`` (registered and assigned) -> ``inventory`` (one mapped task per broker) and
    ``inventory_coverage`` (which brokers' disks were read): the run's view of every broker.

    :param inventory_ts: the inventory's folder name (default: the inventory operator's own).
    """
    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerInventoryOperator,
        InventoryCoverageOperator,
        ListBrokerIdsOperator,
    )

    brokers = ListBrokerIdsOperator(
        task_id="brokers", kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"), **READ_RETRIES
    )
    folder = {} if inventory_ts is None else {"inventory_ts": inventory_ts}
    inventory = BrokerInventoryOperator.partial(task_id="inventory", **folder, **inventory_settings()).expand(
        broker_id=brokers.output
    )
    coverage = InventoryCoverageOperator(
        task_id="inventory_coverage",
        cluster=CLUSTER,
        base_path=setting("base_path"),
        artefacts_conn_id=setting("artefacts_conn_id"),
        **folder,
        expected_broker_ids=brokers.output,
    )
    return brokers, inventory, coverage


def execution_and_throttle_clearing(task_id: str, snapshot_task: str | None = None) -> tuple[Any, Any]:
    """The ``plan`` task's batches carried out (``task_id``), then ``clear_throttles``; both read the
    form's ``throttle_mb_per_sec``, ``poll_interval_s``, ``batch_timeout_s`` and ``dry_run``.

    :param task_id: the execution task's id (``execute``, ``move_back``).
    :param snapshot_task: the task whose snapshot a plan from a planning read must agree with
        before the first write (the drain's ``safety_snapshot``; None: the plan came from a snapshot).
    """
    from airflow_provider_kafka_zk.operators.drain import (
        ClearReplicationThrottlesOperator,
        DrainExecuteOperator,
    )

    execute = DrainExecuteOperator(
        task_id=task_id,
        plan_dir=PLAN_DIR,
        kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
        throttle_bytes_per_sec="{{ params.throttle_mb_per_sec * 1024 * 1024 }}",
        dry_run="{{ params.dry_run }}",
        poll_interval="{{ params.poll_interval_s }}",
        batch_timeout="{{ params.batch_timeout_s }}",
        snapshot_path=None if snapshot_task is None else snapshot_path(snapshot_task),
        artefacts_conn_id=setting("artefacts_conn_id"),
        retries=1,
        retry_delay=timedelta(seconds=30),
    )
    clear_throttles = ClearReplicationThrottlesOperator(
        task_id="clear_throttles",
        plan_dir=PLAN_DIR,
        kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
        artefacts_conn_id=setting("artefacts_conn_id"),
        dry_run="{{ params.dry_run }}",
        **READ_RETRIES,
    )
    return execute, clear_throttles
