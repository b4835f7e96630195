"""Pre-restart check: will this broker come back after a restart, and what would recovery cost?

Triggered by hand for one broker; reads only. A snapshot (ISR and leaders for the remedies), the
broker's inventory (which partition directories, their recovery points, its Kafka release), then
the log and index scan on the broker host (low priority, under a byte budget and a time limit: every
segment a start recovers read whole, every batch's CRC checked as Kafka does; the others' indexes) and
the verdict: "restarts clean" / "will rebuild N indexes (slow start)" / "an unclean restart loses
data at <segment>" / "will fail recovery at <segment>", with each finding's segment, offsets, byte
positions and the remedy that loses least. The run fails when the verdict reaches ``fail_on``.
Artefacts: ``<base>/<cluster>/log-scan/<ts>/``.

Clusters and their connections come from the cluster file (see the drain DAG).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_provider_kafka_zk.dags._alerting import add_run_alert
from airflow_provider_kafka_zk.dags._manual import (
    RUN_TS,
    cluster_choices,
    cluster_snapshot,
    inventory_settings,
    manual_dag,
    setting,
)
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator
from airflow_provider_kafka_zk.operators.log_scan import BrokerLogScanOperator, LogScanVerdictOperator

DAG_ID = "kafka_zk_pre_restart_check"


_TS = "{{ " + RUN_TS + " }}"
_RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=20)}


def build_dag() -> DAG:
    """The ``kafka_zk_pre_restart_check`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["maintenance"],
        doc_md=__doc__,
        one_at_a_time=False,
        params={
            "cluster": Param(
                type="string",
                enum=clusters,
                description="Cluster of the broker (choose one)",
                title="Cluster",
            ),
            "broker": Param(
                type="integer", minimum=0, title="Broker id", description="The broker about to restart"
            ),
            "budget_mb": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Byte budget (MiB)",
                description="Stop reading after this much on the broker (empty: no limit); the report says what was left",
            ),
            "walk_all": Param(
                False,
                type="boolean",
                description="Also walk the batch headers of every segment no start recovers (those a start "
                "recovers are always read whole, every batch's CRC checked)",
                title="Walk every segment",
            ),
            "verify_crc": Param(
                False,
                type="boolean",
                description="Also read every segment no start recovers, every batch's CRC-32C checked: damage "
                "Kafka would not notice (reads the whole log)",
                title="Verify every segment's CRCs",
            ),
            "kafka_version": Param(
                None,
                type=["null", "string"],
                pattern="^[0-9]+[.][0-9]+([.][0-9]+){0,2}$",
                title="Kafka release",
                description="The broker's release when the inventory cannot tell (it reads the jars, else the IBP)",
            ),
            "fail_on": Param(
                "fails_recovery",
                type="string",
                enum=["fails_recovery", "loses_data_if_unclean", "rebuilds_indexes", "never"],
                description="Fail the run when the verdict is this bad or worse",
                title="Fail at verdict",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("snapshot", _RETRIES)
        inventory = BrokerInventoryOperator(
            task_id="inventory",
            broker_id="{{ params.broker }}",
            inventory_ts=_TS,
            **inventory_settings(_RETRIES),
        )
        scan = BrokerLogScanOperator(
            task_id="log_scan",
            broker_id="{{ params.broker }}",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            ssh_conn_id=setting("ssh_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            broker_hosts=setting("broker_hosts"),
            inventory_ts=_TS,
            scan_ts=_TS,
            budget_mb="{{ params.budget_mb }}",
            walk_all="{{ params.walk_all }}",
            verify_crc="{{ params.verify_crc }}",
            kafka_version="{{ params.kafka_version }}",
            **_RETRIES,
        )
        verdict = LogScanVerdictOperator(
            task_id="verdict",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            scan_ts=_TS,
            snapshot_path="{{ ti.xcom_pull(task_ids='snapshot')['path'] }}",
            fail_on="{{ params.fail_on }}",
        )
        snapshot >> inventory >> scan >> verdict
    return add_run_alert(dag)  # a failed run pages


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
