"""Telling the approvers that a plan waits for them: the approval step's notice, through the cluster's
``notify`` channels (e-mail, Slack, the task log), with the same templates and delivery as every
other alert (:mod:`.render`, :func:`~.operators.deliver_once`).

The notice names the plan's headline (what will change and why), its hash, the run, who may decide
and until when, and links to the approval page (the task's *Required Actions* in the UI) and to the
same request over REST. It goes out once per request: the approval step sends it when it puts the
request to Airflow, never on a retry that finds the request already there. A channel that cannot be
reached never fails the approval: what each channel answered is logged and kept in ``approval.json``
(``notified``), and the request waits all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from airflow_provider_kafka_zk.alerts.render import alert_content
from airflow_provider_kafka_zk.alerts.settings import NotifySettings, parse_notify


def request_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The REST resource of the approval request (``GET`` shows it, ``PATCH`` answers it)."""
    from airflow_provider_kafka_zk.plugins.links import api_base_url

    return (
        f"{api_base_url()}/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
        f"/taskInstances/{quote(task_id, safe='')}/-1/hitlDetails"
    )


def notice_content(record: Mapping[str, Any], *, headline: str, title: str) -> dict[str, Any]:
    """The notice as alert content (:func:`~.render.alert_content` with an ``approval`` part).

    :param record: the waiting decision record (``approval.json``: run, plan hash, links, approvers,
        ``requested_at`` and ``timeout_s``).
    :param headline: the plan summary's headline.
    :param title: what the DAG does ("Drain" ...).
    """
    requested = datetime.fromisoformat(str(record["requested_at"]))
    expires = (requested + timedelta(seconds=float(record["timeout_s"]))).astimezone(UTC)
    sha = str(record["plan"]["sha256"])
    approval = {
        "title": title,
        "headline": headline,
        "plan_sha256": sha,
        "plan_dir": record.get("plan_dir"),
        "approval_url": record.get("approval_url"),
        "request_url": request_url(record["dag_id"], record["run_id"], record["task_id"]),
        "approvers": list(record.get("approvers") or []),
        "expires_at": expires.isoformat(timespec="seconds"),
        "commands": [
            {
                "label": "Approve over REST (a token from POST /auth/token first)",
                "command": record["approve"],
            },
            {"label": "Reject over REST", "command": record["reject"]},
        ],
    }
    return alert_content(
        cluster=str(record["cluster"]),
        dag_id=str(record["dag_id"]),
        run_id=str(record["run_id"]),
        run_url=record.get("run_url"),
        report_url=None,
        classified=[],
        approval=approval,
    )


def notify_approvers(record: Mapping[str, Any], *, headline: str, title: str) -> dict[str, Any]:
    """Send the notice of ``record``'s request to every channel of its cluster's ``notify``; what
    each channel answered (``{"at", "subject", "deliveries": {channel: {"ok", "result" | "error"}}}``).
    Never raises for a channel: an unreachable one is an ``ok: false`` delivery.

    :param record: the waiting decision record.
    :param headline: the plan summary's headline.
    :param title: what the DAG does.
    """
    from airflow_provider_kafka_zk.alerts.operators import deliver_once
    from airflow_provider_kafka_zk.clusters import load_clusters

    cluster = str(record["cluster"])
    configured = load_clusters().get(cluster)
    settings = (
        parse_notify(configured.get("notify"), f"clusters.{cluster}.notify")
        if configured is not None
        else NotifySettings()
    )
    content = notice_content(record, headline=headline, title=title)
    deliveries = deliver_once(settings, content, None, [f"approval:{record['plan']['sha256']}"])
    return {"at": datetime.now(UTC).isoformat(), "subject": content["subject"], "deliveries": deliveries}


__all__ = ["notice_content", "notify_approvers", "request_url"]
