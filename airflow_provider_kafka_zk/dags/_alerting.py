"""The alert of a manually triggered DAG, added to a built DAG in one call (after every other task,
whatever the factory built, approval steps included), so the factories stay as they are."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG

ALERT_TASK_ID = "alert"


def _callbacks(value: Any) -> list[Any]:
    if not value:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def add_run_alert(dag: DAG) -> DAG:
    """Give ``dag`` its run alert: every task records the error it fails with
    (:func:`~airflow_provider_kafka_zk.alerts.operators.record_failure`), and a last task ``alert``
    (:class:`~airflow_provider_kafka_zk.alerts.operators.MaintenanceRunAlertOperator`), a teardown
    after all of them, pages a failed run once through the ``notify`` of the run's ``params.cluster``.

    :param dag: a built manual DAG (its tasks all defined).
    """
    from airflow_provider_kafka_zk.alerts.operators import MaintenanceRunAlertOperator, record_failure

    work = list(dag.tasks)
    for task in work:
        task.on_failure_callback = [*_callbacks(task.on_failure_callback), record_failure]
    alert = MaintenanceRunAlertOperator(
        task_id=ALERT_TASK_ID,
        retries=2,
        retry_delay=timedelta(seconds=30),
        dag=dag,
    ).as_teardown()
    work >> alert
    return dag
