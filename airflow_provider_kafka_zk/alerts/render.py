"""An alert as an e-mail (HTML from ``templates/alert.html.j2``, autoescaped), as plain text
(``templates/alert.txt.j2``: the task log, the Slack fallback) and as a Slack Block Kit message, all
from one :func:`alert_content`: the same incidents, links and words in each. No Airflow, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import jinja2

from airflow_provider_kafka_zk.alerts.incidents import NEW, WORSE, Classified

_COLOURS = {"critical": "#b00020", "error": "#d35400", "warning": "#b7950b", "info": "#2e86c1"}
SLACK_MAX_INCIDENTS = 20
"""Incidents a Slack message shows one by one (Slack takes at most 50 blocks); the rest are counted."""


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("airflow_provider_kafka_zk", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _item(c: Classified) -> dict[str, Any]:
    i = c.incident
    return {
        **i.to_dict(),
        "status": c.status,
        "since": c.since,
        "colour": _COLOURS.get(i.severity, "#555"),
        "severity_label": i.severity.upper(),
    }


def alert_content(
    *,
    cluster: str,
    dag_id: str,
    run_id: str,
    run_url: str | None,
    report_url: str | None,
    classified: Sequence[Classified],
    resolved: Sequence[Mapping[str, Any]] = (),
    coverage_text: str | None = None,
    failed_tasks: Sequence[str] = (),
    test_by: str | None = None,
    maintenance: Mapping[str, Any] | None = None,
    approval: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything an alert says, as data (also stored in ``alert.json``).

    :param cluster: the cluster's name.
    :param dag_id: the DAG that ran.
    :param run_id: the run.
    :param run_url: the run's page in Airflow (``[api] base_url``).
    :param report_url: the report's page (the provider's plugin), or None when there is no report.
    :param classified: the run's incidents with their status (:func:`~.incidents.classify`).
    :param resolved: incidents told before that this run no longer has.
    :param coverage_text: what the audit covered (its ``summary.json``), if it ran.
    :param failed_tasks: the ids of the run's failed tasks.
    :param test_by: set for a test alert: who asked for it.
    :param maintenance: set for a maintenance run's alert: its headline, steps, change logs,
        rollback artefacts and next steps (:mod:`~.maintenance`); every incident of it pages.
    :param approval: set for the notice that a plan waits for a person's decision: its headline,
        hash, approval page and REST links, approvers, expiry (:mod:`~.approval`).
    """
    items = [_item(c) for c in classified]
    paged = [i for i in items if i["status"] in (NEW, WORSE)]
    worst = items[0]["severity_label"] if items else None
    if test_by is not None:
        subject = f"[kafka-zk] {cluster}: TEST alert (the on-call path works)"
    elif maintenance is not None:
        subject = f"[kafka-zk] {cluster}: {maintenance['headline']}"
    elif approval is not None:
        subject = (
            f"[kafka-zk] {cluster}: approval needed: {approval['title']} plan sha256 "
            f"{str(approval['plan_sha256'])[:16]}… - {approval['headline']}"
        )
    elif paged:
        head = "; ".join(i["title"] for i in paged[:2]) + (
            f" (+{len(paged) - 2} more)" if len(paged) > 2 else ""
        )
        subject = f"[kafka-zk] {cluster}: {worst} - {len(paged)} new or worse: {head}"
    else:
        subject = f"[kafka-zk] {cluster}: {len(items)} incident(s), none new"
    return {
        "subject": subject[:250],
        "cluster": cluster,
        "dag_id": dag_id,
        "run_id": run_id,
        "run_url": run_url,
        "report_url": report_url,
        "coverage_text": coverage_text,
        "failed_tasks": list(failed_tasks),
        "incidents": items,
        "paged": len(paged),
        "unchanged": len(items) - len(paged),
        "resolved": [dict(r) for r in resolved],
        "worst": worst,
        "test_by": test_by,
        "maintenance": dict(maintenance) if maintenance is not None else None,
        "approval": dict(approval) if approval is not None else None,
    }


def render_email(content: Mapping[str, Any]) -> tuple[str, str]:
    """(subject, HTML body) of the alert e-mail."""
    return content["subject"], _environment().get_template("alert.html.j2").render(**content)


def render_text(content: Mapping[str, Any]) -> str:
    """The alert as plain text (the task log; Slack's notification text)."""
    return _environment().get_template("alert.txt.j2").render(**content)


def _slack_escape(text: Any) -> str:
    """Slack's three control characters (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_link(url: str | None, label: str) -> str:
    return f"<{_slack_escape(url)}|{_slack_escape(label)}>" if url else ""


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def slack_message(content: Mapping[str, Any]) -> dict[str, Any]:
    """The Slack incoming-webhook body (``text`` + ``blocks``) with the e-mail's content."""
    maintenance = content.get("maintenance")
    links = " | ".join(
        link
        for link in (
            _slack_link(content.get("run_url"), "Airflow run"),
            _slack_link(content.get("report_url"), "Report"),
            _slack_link((maintenance or {}).get("folder_url"), "Run folder"),
            _slack_link((content.get("approval") or {}).get("approval_url"), "Approval page"),
        )
        if link
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": content["subject"][:150]}},
    ]
    intro = []
    if content.get("test_by") is not None:
        intro.append(f"Test alert asked for by {_slack_escape(content['test_by'])}: nothing is wrong.")
    elif maintenance:
        intro += _slack_maintenance_intro(content, maintenance)
    elif content.get("approval"):
        intro += _slack_approval_intro(content, content["approval"])
    else:
        intro.append(
            f"*{content['paged']} new or worse*, {content['unchanged']} unchanged "
            f"(told before; still in the report) - DAG `{_slack_escape(content['dag_id'])}`"
        )
    if content.get("coverage_text"):
        intro.append(f"Coverage: {_slack_escape(content['coverage_text'])}")
    if links:
        intro.append(links)
    blocks.append(_section("\n".join(intro)))
    for command in (content.get("approval") or {}).get("commands") or ():
        blocks.append(
            _section(f"{_slack_escape(command['label'])}:\n```{_slack_escape(command['command'])}```")
        )
    shown = content["incidents"][:SLACK_MAX_INCIDENTS]
    for item in shown:
        status = "" if maintenance else f" {item['status'].upper()}"  # a maintenance run pages them all
        lines = [
            f"*[{item['severity_label']}]{status}* {_slack_escape(item['title'])}",
            _slack_escape(item["summary"]),
        ]
        lines += [f"• {_slack_escape(f['label'])}: `{_slack_escape(f['value'])}`" for f in item["facts"]]
        if item.get("action"):
            lines.append(f"*What to do:* {_slack_escape(item['action'])}")
        for command in item["commands"]:
            lines.append(f"{_slack_escape(command['label'])}:\n```{_slack_escape(command['command'])}```")
        if item.get("link"):
            lines.append(_slack_link(item["link"], "task log"))
        blocks.append({"type": "divider"})
        blocks.append(_section("\n".join(lines)))
    if maintenance:
        blocks += [{"type": "divider"}, _section(_slack_maintenance_changes(maintenance))]
    more = len(content["incidents"]) - len(shown)
    tail = []
    if more > 0:
        tail.append(f"+{more} more incident(s) in the report")
    if content.get("resolved"):
        tail.append(
            "Resolved since the last alert: "
            + "; ".join(_slack_escape(r["title"]) for r in content["resolved"])
        )
    if tail:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": t[:3000]} for t in tail]})
    return {"text": render_text(content)[:3000], "blocks": blocks}


def _slack_maintenance_intro(content: Mapping[str, Any], m: Mapping[str, Any]) -> list[str]:
    """The maintenance run, its parameters and where it stopped (one line per outcome)."""
    mode = {True: " (dry run)", False: " (*real run*)"}.get(m.get("dry_run"), "")
    by = f", triggered by {_slack_escape(m['triggered_by'])}" if m.get("triggered_by") else ""
    lines = [
        f"*{_slack_escape(m['headline'])}*",
        f"Run `{_slack_escape(content['run_id'])}`{by}{mode}; parameters `{_slack_escape(m['params'])}`",
    ]
    by_outcome: dict[str, list[str]] = {}
    for step in m["steps"]:
        label = step["task_id"] + (f" ({step['count']})" if step.get("count") else "")
        by_outcome.setdefault(step["outcome"], []).append(label)
    lines += [f"{outcome}: {_slack_escape(', '.join(tasks))}" for outcome, tasks in by_outcome.items()]
    return lines


def _slack_approval_intro(content: Mapping[str, Any], a: Mapping[str, Any]) -> list[str]:
    """The plan that waits: headline, hash, run, who decides until when, how to answer over REST."""
    who = ", ".join(a.get("approvers") or []) or "any user allowed on the DAG"
    lines = [
        f"*{_slack_escape(a['headline'])}*",
        f"Run `{_slack_escape(content['run_id'])}` of `{_slack_escape(content['dag_id'])}` waits in its "
        f"approval step. Plan sha256 `{_slack_escape(a['plan_sha256'])}`",
        f"Who decides: {_slack_escape(who)}; time-out at {_slack_escape(a['expires_at'])} (nothing changes then)",
        f"The request over REST: `{_slack_escape(a['request_url'])}`",
    ]
    return lines


def _slack_maintenance_changes(m: Mapping[str, Any]) -> str:
    """What the run changed, its rollback artefacts and what to do next."""
    lines = ["*What it changed so far*"]
    if m.get("read_only"):
        lines.append("Nothing: this DAG only reads.")
    elif not m.get("change_logs"):
        lines.append("Nothing: the run folder holds no change log.")
    else:
        lease = {"held": "; the maintenance lease is *still held* by this run", "released": ""}
        lines.append(f"{m['writes']} ZooKeeper write(s){lease.get(m.get('lease'), '')}")
        for log in m["change_logs"]:
            name = _slack_link(log.get("url"), log["name"]) or f"`{_slack_escape(log['name'])}`"
            lines.append(f"{name}: task {_slack_escape(log['task'])}, {log['writes']} write(s)")
            if log["changes"]:
                more = f"\n... and {log['more']} more" if log.get("more") else ""
                lines.append("```" + _slack_escape("\n".join(log["changes"])) + more + "```")
    if m.get("rollback"):
        lines.append(
            "Rollback artefacts: "
            + ", ".join(
                _slack_link(r.get("url"), r["name"]) or _slack_escape(r["name"]) for r in m["rollback"]
            )
        )
    lines.append("*What to do next*")
    lines += [_slack_escape(t) for t in m.get("next_steps") or ()]
    lines += [
        f"{_slack_escape(c['label'])}:\n```{_slack_escape(c['command'])}```" for c in m.get("commands") or ()
    ]
    lines += [f"NOTE: {_slack_escape(n)}" for n in m.get("notes") or ()]
    return "\n".join(lines)
