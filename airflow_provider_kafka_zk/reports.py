"""Summary and readable report of an audit run (no Airflow: the Spark driver writes them too).

``summary.json`` is for machines (the gate, dashboards); ``report.html`` is what an on-call engineer
opens at 3 a.m.: first an "Act now" section, one card per incident -- a stopped broker with the
offline, under-min-ISR and under-replicated rows it causes, a topic's topicId incident with the id
to write back and the repair DAG's command -- then every finding in the order to act on them
(:func:`~airflow_provider_kafka_zk.kafka.findings.triage_order`). Both are built from the findings'
data (``evidence``), never by parsing their text. The page is rendered from the package's Jinja2
template ``templates/report.html.j2`` with autoescaping on (topic names are data, not markup).
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

import jinja2

from airflow_provider_kafka_zk.kafka.findings import (
    Finding,
    Severity,
    brokers_text,
    count_by_check_and_severity,
    explained_by,
    incident_of,
    triage_order,
)

if TYPE_CHECKING:
    from airflow_provider_kafka_zk.kafka.audit import BrokerInfo

TEMPLATE = "report.html.j2"
TOP = 10
"""How many findings ``summary.json`` lists (``top``, ``top_findings``)."""


def _utc(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def coverage_text(
    coverage: Mapping[str, Any],
    *,
    live_brokers: Collection[int] | None = None,
    known_brokers: Collection[int] = (),
) -> str:
    """What the run really covered, true whether a broker's disk was unreadable, it is down, or both.

    e.g. ``6 of 6 brokers' disks read; brokers 3 and 4 not running (not registered in ZooKeeper)``.
    ``live_brokers`` None means registration is unknown (nothing is said about it).
    """
    inventoried = sorted({int(b) for b in coverage.get("inventoried") or ()})
    missing = sorted({int(b) for b in coverage.get("missing") or ()})
    known = sorted(
        {int(b) for b in coverage.get("expected") or ()}
        | set(inventoried)
        | set(missing)
        | {int(b) for b in known_brokers}
        | {int(b) for b in live_brokers or ()}
    )
    if not inventoried and coverage.get("status") == "empty" and not coverage.get("expected"):
        parts = ["no broker's disk read: nothing on the brokers' disks was checked"]
    else:
        parts = [f"{len(inventoried)} of {len(known)} brokers' disks read"]
    if missing:
        failed = coverage.get("failed") or {}
        reasons = [f"broker {b}: {failed[str(b)]}" for b in missing if str(b) in failed]
        one = len(missing) == 1
        whose = f"{brokers_text(missing)}'s disk" if one else f"the disks of {brokers_text(missing)}"
        parts.append(
            f"{whose} not read, nothing on {'it' if one else 'them'} was checked"
            + (f" ({'; '.join(reasons)})" if reasons else "")
        )
    if live_brokers is not None:
        down = sorted(set(known) - {int(b) for b in live_brokers})
        if down:
            parts.append(f"{brokers_text(down)} not running (not registered in ZooKeeper)")
    return "; ".join(parts)


def previous_text(path: str | None, taken_at: str | None, absent_reason: str | None = None) -> str:
    """The header's previous snapshot: when it was taken, or why nothing was compared."""
    if path:
        return _snapshot_text(path, taken_at)
    return "none: " + (absent_reason or "nothing was compared with an earlier snapshot")


def _snapshot_text(path: str | None, taken_at: str | None) -> str:
    name = posixpath.basename(str(path).rstrip("/")) if path else None
    if taken_at and name:
        return f"{taken_at} ({name})"
    return taken_at or name or "unknown"


# ---------------------------------------------------------------------------------------------
# Act now: one card per incident, built from the findings' evidence
# ---------------------------------------------------------------------------------------------


def _incident_title(f: Finding) -> str:
    e = f.evidence
    if f.check == "broker-down":
        host = f" ({e['host']})" if e.get("host") else ""
        return f"Broker {f.broker_id}{host} is down"
    if f.check == "topic-id-mismatch":
        return f"topicId mismatch on {f.topic} (KAFKA-14190)"
    if f.check == "topic-id-missing-in-zookeeper":
        return f"{f.topic} has no topic_id in ZooKeeper (KAFKA-14190 at the next controller failover)"
    return f"{f.check}" + (f": {_subject(f)}" if _subject(f) else "")


def _incident_facts(f: Finding) -> list[dict[str, str]]:
    """The concrete ids of an incident, one labelled line each (shown, not folded away)."""
    e = f.evidence
    facts: list[tuple[str, Any]] = []
    if f.check == "broker-down":
        how = {True: "shut down cleanly", False: "did NOT shut down cleanly (crash or kill)"}.get(
            e.get("clean_shutdown"), "unknown (its disk was not read)"
        )
        facts = [
            ("broker", f.broker_id),
            ("host", e.get("host") or "unknown"),
            ("how it stopped", how),
            ("replicas on it", e.get("replicas")),
            ("offline partitions", ", ".join(e.get("offline_partitions") or ()) or "none"),
        ]
    elif f.check in ("topic-id-mismatch", "topic-id-missing-in-zookeeper"):
        zk_id = e.get("zookeeper_topic_id")
        facts = [
            ("topic", f.topic),
            (
                "ZooKeeper's topic_id",
                zk_id if zk_id or f.check == "topic-id-mismatch" else f"none (no topic_id key in {f.path})",
            ),
            ("partition.metadata on the replicas", ", ".join(e.get("ids_on_disk") or ()) or None),
        ]
        if e.get("write_back_id"):
            facts.append(("id to write back", e["write_back_id"]))
        if e.get("log_line"):
            facts.append(("brokers' state-change.log", e["log_line"]))
    return [{"label": label, "value": str(value)} for label, value in facts if value is not None]


def _brief(f: Finding) -> dict[str, Any]:
    return {
        "check": f.check,
        "severity": f.severity.name.lower(),
        "topic": f.topic,
        "partition": f.partition,
        "broker_id": f.broker_id,
        "path": f.path,
        "summary": f.summary,
    }


def _act_now_entries(
    ordered: Sequence[Finding], incidents: Collection[str]
) -> list[tuple[Finding, str | None, list[Finding]]]:
    out = []
    for f in ordered:
        key = incident_of(f)
        if key is None and (f.severity < Severity.CRITICAL or explained_by(f, incidents)):
            continue
        explains = [g for g in ordered if key is not None and key in explained_by(g, incidents)]
        out.append((f, key, explains))
    return out


def _act_now_item(f: Finding, key: str | None, explains: Sequence[Finding]) -> dict[str, Any]:
    return {
        **_brief(f),
        "incident": key,
        "title": _incident_title(f),
        "action": f.action,
        "facts": _incident_facts(f),
        "commands": list(f.evidence.get("commands") or ()),
        "explains": [_brief(g) for g in explains],
    }


def act_now(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """The "Act now" items, in triage order: each root cause (``incident``) with the findings it
    explains, then each critical finding no root cause explains. JSON-able (``summary.json``)."""
    ordered = triage_order(findings)
    incidents = {key for f in ordered if (key := incident_of(f)) is not None}
    return [_act_now_item(*entry) for entry in _act_now_entries(ordered, incidents)]


def build_summary(
    findings: Sequence[Finding],
    *,
    cluster: str,
    coverage: Mapping[str, Any],
    snapshot: str | None,
    previous_snapshot: str | None,
    inventory: str | None,
    generated_at: str,
    engine: str,
    live_brokers: Collection[int] | None = None,
    brokers: Mapping[int, BrokerInfo] | None = None,
    snapshot_taken_ms: int | None = None,
    previous_taken_ms: int | None = None,
    previous_absent_reason: str | None = None,
) -> dict[str, Any]:
    """``summary.json``: counts, "act now" (:func:`act_now`), the triage-ordered top findings as data
    (``top_findings``, what the gate's message is built from) and as lines (``top``), coverage and
    broker registration.

    ``live_brokers`` (registered in ZooKeeper) and ``brokers`` (every known broker) make the
    coverage text say which brokers are not running; without them it speaks only of the disks read.
    ``previous_absent_reason`` says why there is no previous snapshot to compare with.
    """
    by_severity = Counter(f.severity.name.lower() for f in findings)
    ordered = triage_order(findings)
    incidents = {key for f in ordered if (key := incident_of(f)) is not None}
    known = sorted(brokers or {})
    live = None if live_brokers is None else sorted(int(b) for b in live_brokers)
    previous_taken = _utc(previous_taken_ms)
    return {
        "cluster": cluster,
        "generated_at": generated_at,
        "engine": engine,
        "snapshot": snapshot,
        "snapshot_taken_at": _utc(snapshot_taken_ms),
        "previous_snapshot": previous_snapshot,
        "previous_snapshot_taken_at": previous_taken,
        "previous_snapshot_text": previous_text(previous_snapshot, previous_taken, previous_absent_reason),
        "inventory": inventory,
        "coverage": dict(coverage),
        "coverage_text": coverage_text(coverage, live_brokers=live, known_brokers=known),
        "brokers": {
            "known": sorted(set(known) | set(live or ())),
            "registered": live,
            "not_registered": None if live is None else sorted(set(known) - set(live)),
        },
        "findings": len(findings),
        "by_severity": {s.name.lower(): by_severity.get(s.name.lower(), 0) for s in reversed(Severity)},
        "by_check": count_by_check_and_severity(findings),
        "act_now": act_now(ordered),
        "top_findings": [
            {**_brief(f), "action": f.action, "explained_by": list(explained_by(f, incidents))}
            for f in ordered[:TOP]
        ],
        "top": [f"[{f.severity.name}] {f.check}: {f.summary}" for f in ordered[:TOP]],
    }


def worst_severity(findings: Iterable[Finding]) -> Severity | None:
    return max((f.severity for f in findings), default=None)


def gate_message(summary: Mapping[str, Any], threshold: Severity, *, top: int = 5) -> str | None:
    """The findings gate's failure message (None: nothing at or above ``threshold``).

    Built from ``summary.json``'s data -- severities as fields, the act-now incidents with their
    first action and commands, the top findings -- never by parsing a line of text.
    """
    blocking = {
        name: count
        for name, count in summary["by_severity"].items()
        if count and Severity.parse(name) >= threshold
    }
    if not blocking:
        return None
    counts = ", ".join(f"{count} {name}" for name, count in blocking.items())
    parts = [
        f"Kafka audit of {summary['cluster']}: {counts} finding(s) at or above {threshold.name.lower()}; "
        f"coverage: {summary.get('coverage_text') or summary.get('coverage', {}).get('status')}."
    ]
    incidents = [i for i in summary.get("act_now") or () if Severity.parse(i["severity"]) >= threshold]
    shown: set[tuple[Any, ...]] = set()
    if incidents:
        lines = []
        for n, item in enumerate(incidents[:top], 1):
            explains = len(item.get("explains") or ())
            line = f"({n}) [{item['severity'].upper()}] {item['summary']}"
            if explains:
                line += f" [explains {explains} other finding(s)]"
            commands = item.get("commands") or ()
            line += " -> " + (
                "; ".join(f"{c['label']}: {c['command']}" for c in commands) if commands else item["action"]
            )
            lines.append(line)
            shown.add((item["check"], item.get("topic"), item.get("partition"), item.get("broker_id")))
        more = len(incidents) - top
        parts.append("ACT NOW: " + " ".join(lines) + (f" (+{more} more in the report)" if more > 0 else ""))
    rest = [
        f
        for f in summary.get("top_findings") or ()
        if Severity.parse(f["severity"]) >= threshold
        and not f.get("explained_by")
        and (f["check"], f.get("topic"), f.get("partition"), f.get("broker_id")) not in shown
    ][: max(0, top - len(incidents))]
    if rest:
        parts.append(
            "Also: " + " | ".join(f"[{f['severity'].upper()}] {f['check']}: {f['summary']}" for f in rest)
        )
    parts.append(f"Report: {summary.get('report')}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# report.html
# ---------------------------------------------------------------------------------------------

_COLOURS = {
    Severity.CRITICAL: "#b00020",
    Severity.ERROR: "#d35400",
    Severity.WARNING: "#b7950b",
    Severity.INFO: "#2e86c1",
}


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("airflow_provider_kafka_zk", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _subject(f: Finding) -> str:
    return ", ".join(
        part
        for part in (
            f"topic {f.topic}" if f.topic else "",
            f"partition {f.partition}" if f.partition is not None else "",
            f"broker {f.broker_id}" if f.broker_id is not None else "",
            f.path or "",
        )
        if part
    )


def _explained_text(keys: Sequence[str]) -> str:
    down = [int(k.split(":", 1)[1]) for k in keys if k.startswith("broker:")]
    topics = [k.split(":", 1)[1] for k in keys if k.startswith("topic-id:")]
    parts = [f"{brokers_text(down)} being down"] if down else []
    parts += [f"the topicId incident of {t}" for t in topics]
    return " and ".join(parts)


def render_html(findings: Sequence[Finding], summary: Mapping[str, Any]) -> str:
    """``report.html``: header and coverage, "Act now" (incidents with what they explain), then every
    finding in the order to act on them."""
    ordered = triage_order(findings)
    incidents = {key for f in ordered if (key := incident_of(f)) is not None}
    anchors = {id(f): f"f{i}" for i, f in enumerate(ordered)}
    rows = []
    for f in ordered:
        keys = explained_by(f, incidents)
        rows.append(
            {
                "anchor": anchors[id(f)],
                "severity": f.severity.name,
                "colour": _COLOURS[f.severity],
                "check": f.check,
                "subject": _subject(f),
                "summary": f.summary,
                "action": f.action,
                "explained_by": _explained_text(keys),
                "evidence": json.dumps(f.evidence, indent=1, sort_keys=True, default=str),
                "finding": f,
            }
        )
    by_id = {id(r["finding"]): r for r in rows}
    cards = [
        {
            **by_id[id(f)],
            **_act_now_item(f, key, explains),
            "severity": f.severity.name,
            "explained": [by_id[id(g)] for g in explains],
        }
        for f, key, explains in _act_now_entries(ordered, incidents)
    ]
    in_cards = {id(card["finding"]) for card in cards}
    coverage = summary.get("coverage", {})
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            cluster=summary.get("cluster", ""),
            generated_at=summary.get("generated_at", ""),
            engine=summary.get("engine", ""),
            snapshot=_snapshot_text(summary.get("snapshot"), summary.get("snapshot_taken_at")),
            previous=summary.get("previous_snapshot_text")
            or previous_text(summary.get("previous_snapshot"), summary.get("previous_snapshot_taken_at")),
            total=len(findings),
            counts=[
                {
                    "name": s.name.lower(),
                    "count": summary.get("by_severity", {}).get(s.name.lower(), 0),
                    "colour": _COLOURS[s],
                }
                for s in reversed(Severity)
            ],
            partial=bool(coverage.get("missing")),
            not_registered=(summary.get("brokers") or {}).get("not_registered") or [],
            coverage_text=summary.get("coverage_text") or coverage_text(coverage),
            cards=cards,
            rows=[r for r in rows if id(r["finding"]) not in in_cards],
        )
    )
