"""The provider's Airflow plugin: the api-server app that serves run artefacts behind Airflow's auth
manager (:mod:`.app`) and the operator extra links that point at it (:mod:`.links`).

Registered through the ``airflow.plugins`` entry point of this distribution, which Airflow loads in
every component whatever ``[core] lazy_discover_providers`` says (a provider's ``plugins`` entry is
only read with lazy discovery off, and listing the plugin in both would register it twice). The app
is built on its first request, so workers, which load plugins for their macros, never import
FastAPI's security stack for it.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_kafka_zk.alerts.deadline import RecentRunsDeadline
from airflow_provider_kafka_zk.plugins.links import URL_PREFIX, PlanLink, ReportLink, RunReportLink


class _AppOnFirstRequest:
    """An ASGI app that builds :func:`~.app.create_app` when the api-server first routes to it."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_provider_kafka_zk.plugins.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class KafkaZkPlugin(AirflowPlugin):
    """Serves ``report.html`` and the other artefacts of a run at ``/kafka-zk/runs/...``."""

    name = "kafka_zk"
    fastapi_apps = [
        {"app": _AppOnFirstRequest(), "url_prefix": URL_PREFIX, "name": "Kafka ZooKeeper-mode artefacts"}
    ]
    operator_extra_links = [ReportLink(), RunReportLink(), PlanLink()]
    # the daily DAG's default deadline: the scheduler evaluates it when a run is created
    deadline_references = [RecentRunsDeadline]
