"""Summary and readable report of an audit run (no Airflow: the Spark driver writes them too).

``summary.json`` is for machines (gates, dashboards); ``report.html`` is what an on-call engineer
opens: worst first, each finding with its subject, what to do and the evidence behind it.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_kafka_zk.kafka.findings import (
    Finding,
    Severity,
    count_by_check_and_severity,
    most_severe_first,
)


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
) -> dict[str, Any]:
    by_severity = Counter(f.severity.name.lower() for f in findings)
    return {
        "cluster": cluster,
        "generated_at": generated_at,
        "engine": engine,
        "snapshot": snapshot,
        "previous_snapshot": previous_snapshot,
        "inventory": inventory,
        "coverage": dict(coverage),
        "findings": len(findings),
        "by_severity": {s.name.lower(): by_severity.get(s.name.lower(), 0) for s in reversed(Severity)},
        "by_check": count_by_check_and_severity(findings),
        "top": [f"[{f.severity.name}] {f.check}: {f.summary}" for f in most_severe_first(findings)[:10]],
    }


def worst_severity(findings: Iterable[Finding]) -> Severity | None:
    return max((f.severity for f in findings), default=None)


_COLOURS = {
    Severity.CRITICAL: "#b00020",
    Severity.ERROR: "#d35400",
    Severity.WARNING: "#b7950b",
    Severity.INFO: "#2e86c1",
}


def render_html(findings: Sequence[Finding], summary: Mapping[str, Any]) -> str:
    esc = html.escape
    coverage = summary.get("coverage", {})
    partial = bool(coverage.get("missing"))
    rows = []
    for f in most_severe_first(findings):
        subject = ", ".join(
            part
            for part in (
                f"topic {f.topic}" if f.topic else "",
                f"partition {f.partition}" if f.partition is not None else "",
                f"broker {f.broker_id}" if f.broker_id is not None else "",
                f.path or "",
            )
            if part
        )
        evidence = json.dumps(f.evidence, indent=1, sort_keys=True, default=str)
        rows.append(
            "<tr>"
            f'<td style="color:{_COLOURS[f.severity]};font-weight:bold">{esc(f.severity.name)}</td>'
            f"<td><code>{esc(f.check)}</code></td>"
            f"<td>{esc(subject)}</td>"
            f"<td>{esc(f.summary)}<details><summary>evidence</summary><pre>{esc(evidence)}</pre></details></td>"
            f"<td>{esc(f.action)}</td>"
            "</tr>"
        )
    counts = " ".join(
        f'<span style="color:{_COLOURS[s]}">{esc(s.name.lower())}: {summary["by_severity"].get(s.name.lower(), 0)}</span>'
        for s in reversed(Severity)
    )
    coverage_line = (
        f'<p style="color:#b00020"><b>Coverage PARTIAL</b>: brokers {esc(str(coverage.get("missing")))} were not '
        f"inventoried; nothing on their disks was checked.</p>"
        if partial
        else f"<p>Coverage: every live broker inventoried ({esc(str(coverage.get('inventoried', [])))}).</p>"
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Kafka audit: {esc(summary["cluster"])}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;width:100%}}
td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}} pre{{white-space:pre-wrap}}</style>
</head><body>
<h1>Kafka cluster audit: {esc(summary["cluster"])}</h1>
<p>{esc(summary["generated_at"])} &middot; snapshot {esc(str(summary.get("snapshot")))} &middot;
previous {esc(str(summary.get("previous_snapshot")))} &middot; engine {esc(summary["engine"])}</p>
<p>{summary["findings"]} finding(s): {counts}</p>
{coverage_line}
<table><tr><th>severity</th><th>check</th><th>subject</th><th>finding</th><th>what to do</th></tr>
{"".join(rows) or '<tr><td colspan="5">No findings.</td></tr>'}
</table></body></html>
"""
