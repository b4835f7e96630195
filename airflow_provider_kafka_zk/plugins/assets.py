"""The assets a run publishes besides the snapshot: a cluster's findings and reports.

The daily audit updates ``kafka-zk://<cluster>/findings`` and ``kafka-zk://<cluster>/reports``; a
manual DAG's report task updates ``kafka-zk://<cluster>/reports/<dag id>`` through the alias
``kafka-zk-reports`` (its cluster is only known at run time). Each event's extra names the run folder
(``folder``, on the artefact store) and the report's page (``report_url``, the plugin), so a DAG
scheduled on the asset, or a person reading the asset's events, goes straight to the run.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from airflow.sdk import Asset, AssetAlias

from airflow_provider_kafka_zk.operators.snapshot import ASSET_SCHEME
from airflow_provider_kafka_zk.plugins.links import ReportLink, RunReportLink, published

REPORTS_ALIAS = "kafka-zk-reports"


def findings_asset(cluster: str) -> Asset:
    return Asset(f"{ASSET_SCHEME}://{cluster}/findings")


def report_asset(cluster: str, dag_id: str | None = None) -> Asset:
    return Asset(f"{ASSET_SCHEME}://{cluster}/reports" + (f"/{dag_id}" if dag_id else ""))


def audit_outlets(cluster: str) -> list[Asset]:
    """The daily audit's outlets."""
    return [findings_asset(cluster), report_asset(cluster)]


def reports_alias() -> AssetAlias:
    """The outlet of a manual DAG's report task (its asset is named at run time)."""
    return AssetAlias(REPORTS_ALIAS)


def _extra(context: Any, link: Any, cluster: str | None) -> tuple[str, dict[str, Any]] | None:
    task, ti = context["task"], context["ti"]
    found = published(task, ti, cluster)
    if found is None:
        return None
    cluster, folder, _ = found
    return cluster, {
        "folder": folder,
        "run_id": ti.run_id,
        "dag_id": ti.dag_id,
        "report_url": link.get_link(task, ti_key=ti) or None,
    }


def publish_audit_events(cluster: str) -> Callable[[Any, Any], None]:
    """A ``post_execute`` hook of the audit: the findings and report events with the run folder."""

    def publish(context: Any, result: Any = None) -> None:
        found = _extra(context, ReportLink(cluster=cluster), cluster)
        if found is None:
            return
        _, extra = found
        if isinstance(result, dict) and "by_severity" in result:
            extra["by_severity"] = result["by_severity"]
        events = context["outlet_events"]
        events[findings_asset(cluster)].extra = {
            **extra,
            "findings": posixpath.join(extra["folder"], "findings.parquet"),
        }
        events[report_asset(cluster)].extra = {
            **extra,
            "report": posixpath.join(extra["folder"], "report.html"),
        }

    return publish


def publish_run_report(context: Any, result: Any = None) -> None:
    """A ``post_execute`` hook of a manual DAG's report task: ``kafka-zk://<cluster>/reports/<dag>``."""
    found = _extra(context, RunReportLink(), None)
    if found is None:
        return
    cluster, extra = found
    if isinstance(result, str):
        extra["report"] = result
    context["outlet_events"][reports_alias()].add(report_asset(cluster, context["ti"].dag_id), extra=extra)
