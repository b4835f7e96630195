"""Audit summary and HTML report."""

from __future__ import annotations

from airflow_provider_kafka_zk.kafka.findings import Finding, Severity
from airflow_provider_kafka_zk.reports import build_summary, render_html, worst_severity


def findings():
    return [
        Finding("rf1-exposure-broker", Severity.WARNING, "c", "broker 1: 3 RF=1 partitions", broker_id=1),
        Finding(
            "topic-id-mismatch",
            Severity.CRITICAL,
            "c",
            "<script>x</script> disagree",
            topic="t",
            evidence={"replicas": [{"broker_id": 1}]},
        ),
    ]


def summary(items, missing=()):
    return build_summary(
        items,
        cluster="c",
        coverage={"inventoried": [0, 1], "missing": list(missing)},
        snapshot="s",
        previous_snapshot=None,
        inventory="i",
        generated_at="2026-11-22T00:00:00Z",
        engine="in-process",
    )


def test_summary_counts_and_top_findings_worst_first():
    s = summary(findings())
    assert s["by_severity"] == {"critical": 1, "error": 0, "warning": 1, "info": 0}
    assert s["by_check"]["topic-id-mismatch"] == {"critical": 1}
    assert s["top"][0].startswith("[CRITICAL] topic-id-mismatch")
    assert worst_severity(findings()) is Severity.CRITICAL and worst_severity([]) is None


def test_html_escapes_and_says_partial_coverage():
    page = render_html(findings(), summary(findings(), missing=[2]))
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page
    assert "Coverage PARTIAL" in page and "[2]" in page
    assert page.index("topic-id-mismatch") < page.index("rf1-exposure-broker")
    assert "No findings." in render_html([], summary([]))
