"""Links and assets of the manual DAGs, added to a built DAG in one call so the factories stay as
they are: the ``plan`` task gets "Plan" (its folder), the ``report`` task "Report" (the file it
returned) and "Plan", and publishes ``kafka-zk://<cluster>/reports/<dag id>`` through the alias
``kafka-zk-reports`` with the run folder in the event's extra."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_kafka_zk.plugins.assets import publish_run_report, reports_alias
from airflow_provider_kafka_zk.plugins.links import PlanLink, RunReportLink


def add_links_and_assets(dag: DAG, plan_task: str = "plan", report_task: str = "report") -> DAG:
    """Give ``dag``'s plan and report tasks their links, and the report task its asset (if present).

    :param dag: a built manual DAG.
    :param plan_task: the task that returns ``{"plan_dir": ...}``.
    :param report_task: the task that returns the report file's path.
    """
    if plan_task in dag.task_dict:
        dag.task_dict[plan_task].operator_extra_links = (PlanLink(),)
    if report_task in dag.task_dict:
        report = dag.task_dict[report_task]
        report.operator_extra_links = (RunReportLink(), PlanLink())
        report.outlets = [*report.outlets, reports_alias()]
        report._post_execute_hook = publish_run_report
    return dag
