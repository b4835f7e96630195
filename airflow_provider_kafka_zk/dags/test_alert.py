"""Test alert: send a test alert through every ``notify`` channel of a cluster, so the on-call path
is proven before an incident needs it.

Triggered by hand; the form offers the clusters of the cluster file. The message is the real alert's
template (HTML e-mail, Slack message) saying who asked for the test and that nothing is wrong. The
run fails, naming each channel and why, when a channel could not be reached or the cluster has no
channel but the log.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from airflow_provider_kafka_zk.alerts.operators import TestAlertOperator
from airflow_provider_kafka_zk.dags._manual import cluster_choices, manual_dag

DAG_ID = "kafka_zk_test_alert"


def build_dag() -> DAG:
    """The ``kafka_zk_test_alert`` DAG."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["alerts"],
        doc_md=__doc__,
        one_at_a_time=False,
        params={
            "cluster": Param(
                clusters[0],
                type="string",
                enum=clusters,
                title="Cluster",
                description="The cluster whose notify channels get the test alert (from the cluster file)",
            ),
        },
    ) as dag:
        TestAlertOperator(task_id="send_test_alert", cluster="{{ params.cluster }}", retries=0)
    return dag


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
