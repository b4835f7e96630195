"""Can a channel deliver, and delivering to it: SMTP through Airflow's smtp provider (``SmtpHook``),
Slack through the slack provider's incoming webhook (``SlackWebhookHook``), the task log.

:func:`channel_problems` is what the DAG file checks at parse time and the ``notify_check`` task at
run time: the provider importable, the connection present with what the hook needs to send (SMTP: a
host and a sender -- the connection's ``from_email`` extra or the channel's ``from_email``; the
SmtpHook refuses to send without one; Slack: the webhook token). :func:`deliver` raises
:class:`AlertDeliveryError` naming the channel and the cause; it never logs a secret.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_kafka_zk.alerts.render import render_email, render_text, slack_message
from airflow_provider_kafka_zk.alerts.settings import PROVIDERS, Channel, NotifySettings

log = logging.getLogger(__name__)


class AlertDeliveryError(RuntimeError):
    """An alert did not reach a channel; the message names the channel and why."""


class NotifyUnusableError(RuntimeError):
    """A cluster's ``notify`` cannot deliver (provider missing, connection missing or incomplete)."""


def provider_problem(channel: Channel) -> str | None:
    """Why ``channel``'s provider cannot be used here (None: importable)."""
    if channel.kind not in PROVIDERS:
        return None
    module, distribution = PROVIDERS[channel.kind]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return (
        f"notify kind {channel.kind!r} needs {distribution}, which is not installed on this host "
        f"(pip install {distribution}; this package's extra: airflow-provider-kafka-zk[{channel.kind}])"
    )


def _get_connection(conn_id: str) -> Any:
    """The connection, wherever the DAG file is parsed. In a task, the dag-processor or the
    triggerer (a supervised process) the Task SDK asks the API server; in a plain CLI process --
    ``airflow dags reserialize``, ``airflow dags list`` -- the SDK reaches no metadata DB, so a
    connection stored there would read as missing and the daily DAG file as an import error. There
    Airflow's own secrets chain (metastore included) is asked, with the test Airflow 3.3's
    ``airflow.models.connection.Connection.get_connection_from_secrets`` makes for the same choice."""
    if hasattr(sys.modules.get("airflow.sdk.execution_time.task_runner"), "SUPERVISOR_COMMS"):
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(conn_id)
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


def connection_problems(
    channel: Channel, get_connection: Callable[[str], Any] = _get_connection
) -> list[str]:
    """What ``channel``'s Airflow connection lacks for the hook to send (empty: usable).

    :param channel: an smtp or slack channel (others have no connection).
    :param get_connection: conn id -> connection (raises when it does not exist).
    """
    if channel.kind not in PROVIDERS or not channel.conn_id:
        return []
    try:
        conn = get_connection(channel.conn_id)
    except Exception as exc:  # AirflowNotFoundException; a secrets backend's own error
        reason = (
            "does not exist" if "isn't defined" in str(exc) or "NotFound" in type(exc).__name__ else str(exc)
        )
        return [f"{channel.kind} connection {channel.conn_id!r} {reason}"]
    problems = []
    if channel.kind == "smtp":
        if not conn.host:
            problems.append(f"smtp connection {channel.conn_id!r} has no host")
        extra = conn.extra_dejson or {}
        if not channel.from_email and not extra.get("from_email"):
            problems.append(
                f"smtp connection {channel.conn_id!r} has no from_email extra and the notify table names "
                "no from_email: the SMTP hook refuses to send without a sender"
            )
    elif channel.kind == "slack" and not (conn.password or "").strip():
        problems.append(
            f"slack connection {channel.conn_id!r} has no webhook token (its password: the part of the "
            "incoming webhook URL after /services/, or the whole URL)"
        )
    return problems


def channel_problems(
    channel: Channel, *, connections: bool = True, get_connection: Callable[[str], Any] = _get_connection
) -> list[str]:
    """Everything that stops ``channel`` from delivering (empty: it can).

    :param channel: the channel.
    :param connections: also look the connection up (a metadata DB or secrets backend request).
    :param get_connection: as :func:`connection_problems`.
    """
    missing = provider_problem(channel)
    if missing:
        return [missing]
    return connection_problems(channel, get_connection) if connections else []


def notify_problems(
    notify: NotifySettings,
    *,
    connections: bool = True,
    get_connection: Callable[[str], Any] = _get_connection,
) -> list[str]:
    """Every problem of every channel of ``notify`` (empty: all can deliver)."""
    return [
        p
        for channel in notify.channels
        for p in channel_problems(channel, connections=connections, get_connection=get_connection)
    ]


def deliver(channel: Channel, content: Mapping[str, Any]) -> str:
    """Send the alert ``content`` (:func:`~.render.alert_content`) to ``channel``; returns what was
    done (for the log and ``alert.json``). AlertDeliveryError when it did not get there."""
    problems = channel_problems(channel)
    if problems:
        raise AlertDeliveryError(f"{channel.name}: " + "; ".join(problems))
    try:
        if channel.kind == "smtp":
            return _send_smtp(channel, content)
        if channel.kind == "slack":
            return _send_slack(channel, content)
    except AlertDeliveryError:
        raise
    except Exception as exc:
        raise AlertDeliveryError(f"{channel.name}: {type(exc).__name__}: {exc}") from exc
    log.warning("kafka_zk alert (log channel only):\n%s", render_text(content))
    return "written to the task log"


def _send_smtp(channel: Channel, content: Mapping[str, Any]) -> str:
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    subject, html = render_email(content)
    with SmtpHook(smtp_conn_id=str(channel.conn_id)) as hook:
        hook.send_email_smtp(
            to=list(channel.to),
            cc=list(channel.cc) or None,
            subject=subject,
            html_content=html,
            from_email=channel.from_email,
        )
    return f"e-mail to {', '.join(channel.to + channel.cc)}"


def _send_slack(channel: Channel, content: Mapping[str, Any]) -> str:
    from airflow.providers.slack.hooks.slack_webhook import SlackWebhookHook

    SlackWebhookHook(slack_webhook_conn_id=str(channel.conn_id)).send_dict(slack_message(content))
    return "posted to the Slack webhook"
