"""Audit summary, HTML report and the gate's message, on hand-made findings."""

from __future__ import annotations

import html
import re

from airflow_provider_kafka_zk.kafka.findings import Finding, Severity, explained_by, triage_order
from airflow_provider_kafka_zk.reports import (
    act_now,
    build_summary,
    coverage_text,
    gate_message,
    render_html,
    worst_severity,
)


def findings():
    return [
        Finding("rf1-exposure-broker", Severity.WARNING, "c", "broker 1: 3 RF=1 partitions", broker_id=1),
        Finding(
            "topic-id-mismatch",
            Severity.CRITICAL,
            "c",
            "<script>x</script> disagree",
            topic="t<script>alert(1)</script>",
            evidence={"replicas": [{"broker_id": 1}]},
        ),
    ]


def summary(items, missing=(), previous=None, previous_ms=None, live=None, absent=None):
    return build_summary(
        items,
        cluster="c",
        coverage={"inventoried": [0, 1], "missing": list(missing)},
        snapshot="/base/c/snapshots/20261122T060000.000000Z",
        previous_snapshot=previous,
        inventory="i",
        generated_at="2026-11-22T00:00:00Z",
        engine="in-process",
        live_brokers=live,
        snapshot_taken_ms=1_795_327_200_000,
        previous_taken_ms=previous_ms,
        previous_absent_reason=absent,
    )


def _visible(page: str) -> str:
    """The page's text without collapsed parts (<details>) and markup, as a reader sees it unexpanded."""
    text = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start : page.index("</section>", start)]


def test_summary_counts_and_top_findings_worst_first():
    s = summary(findings())
    assert s["by_severity"] == {"critical": 1, "error": 0, "warning": 1, "info": 0}
    assert s["by_check"]["topic-id-mismatch"] == {"critical": 1}
    assert s["top"][0].startswith("[CRITICAL] topic-id-mismatch")
    assert (
        s["top_findings"][0]["severity"] == "critical"
        and s["top_findings"][0]["check"] == "topic-id-mismatch"
    )
    assert worst_severity(findings()) is Severity.CRITICAL and worst_severity([]) is None


def test_html_is_autoescaped_and_says_partial_coverage():
    page = render_html(findings(), summary(findings(), missing=[2]))
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "t&lt;script&gt;alert(1)&lt;/script&gt;" in page  # a topic name is data, not markup
    visible = _visible(page)
    assert "Coverage PARTIAL" in visible
    assert "broker 2's disk not read, nothing on it was checked" in visible
    assert page.index("topic-id-mismatch") < page.index("rf1-exposure-broker")
    assert "No findings." in render_html([], summary([]))


def test_header_says_why_nothing_was_compared_or_when_the_previous_snapshot_was_taken():
    first = _visible(render_html(findings(), summary(findings())))
    assert "None" not in first
    assert "previous snapshot: none: nothing was compared with an earlier snapshot" in first
    assert "snapshot: 2026-11-22 06:00:00 UTC (20261122T060000.000000Z)" in first
    reason = "no complete snapshot of c is older than this one, so nothing was compared"
    assert f"previous snapshot: none: {reason}" in _visible(
        render_html(findings(), summary(findings(), absent=reason))
    )
    later = _visible(
        render_html(
            findings(),
            summary(
                findings(),
                previous="/base/c/snapshots/20261121T060000.000000Z",
                previous_ms=1_795_240_800_000,
            ),
        )
    )
    assert "previous snapshot: 2026-11-21 06:00:00 UTC (20261121T060000.000000Z)" in later


def test_coverage_text_is_true_when_a_broker_is_down():
    everyone = {
        "status": "complete",
        "expected": [0, 1, 2, 3, 4, 5],
        "inventoried": [0, 1, 2, 3, 4, 5],
        "missing": [],
    }
    # the demo's run: the stopped brokers' disks read over SSH, but brokers 3 and 4 are not running
    assert coverage_text(everyone, live_brokers=[0, 1, 2, 5]) == (
        "6 of 6 brokers' disks read; brokers 3 and 4 not running (not registered in ZooKeeper)"
    )
    five = {
        "status": "partial",
        "expected": [0, 1, 2, 3, 4, 5],
        "inventoried": [0, 1, 2, 4, 5],
        "missing": [3],
    }
    assert coverage_text(five, live_brokers=[0, 1, 2, 4, 5]) == (
        "5 of 6 brokers' disks read; broker 3's disk not read, nothing on it was checked; "
        "broker 3 not running (not registered in ZooKeeper)"
    )
    assert coverage_text(everyone, live_brokers=range(6)) == "6 of 6 brokers' disks read"
    unreachable = {**five, "failed": {"3": "BrokerHostUnreachableError: broker 3 on 10.0.0.3"}}
    assert "(broker 3: BrokerHostUnreachableError: broker 3 on 10.0.0.3)" in coverage_text(
        unreachable, live_brokers=range(6)
    )
    page = _visible(render_html([], summary([], live=[0])))
    assert "broker 1 not running (not registered in ZooKeeper)" in page
    assert "every live broker" not in page


def _incident():
    """Broker 3 down (explains an offline partition) and a topicId incident on u, plus hygiene."""
    down = Finding(
        "broker-down",
        Severity.CRITICAL,
        "c",
        "broker 3 is down: not registered",
        "Start broker 3 on kafka-3",
        broker_id=3,
        evidence={"host": "kafka-3", "offline_partitions": ["t-0"], "clean_shutdown": True, "replicas": 4},
    )
    explained = Finding(
        "offline-partitions",
        Severity.CRITICAL,
        "c",
        "broker 3 is down: 1 partition of t has no leader (t-0)",
        topic="t",
        partition=0,
        evidence={"down_brokers": [3]},
    )
    command = 'airflow dags trigger kafka_zk_topic_id_repair --conf \'{"topics": ["u"]}\''
    mismatch = Finding(
        "topic-id-mismatch",
        Severity.CRITICAL,
        "c",
        "ids differ on u",
        "write AAAAAAAAAAAAAAAAAAAAAQ back",
        topic="u",
        path="/brokers/topics/u",
        evidence={
            "zookeeper_topic_id": "zkzkzkzkzkzkzkzkzkzkzk",
            "ids_on_disk": ["diskdiskdiskdiskdiskdd"],
            "write_back_id": "diskdiskdiskdiskdiskdd",
            "commands": [{"label": "dry run (changes nothing)", "command": command}],
        },
    )
    changed = Finding(
        "topic-id-changed-since-previous", Severity.CRITICAL, "c", "u's topic_id changed", topic="u"
    )
    no_controller = Finding("no-controller", Severity.CRITICAL, "c", "no broker holds /controller")
    hygiene = Finding("stray-dirs", Severity.WARNING, "c", "stray", topic="v")
    return [hygiene, changed, explained, no_controller, mismatch, down]


def test_root_causes_come_first_then_what_needs_its_own_action():
    ordered = triage_order(_incident())
    assert [f.check for f in ordered] == [
        "broker-down",  # broken now, and one action clears what it explains
        "topic-id-mismatch",
        "no-controller",  # critical and explained by nothing: its own action
        "offline-partitions",  # explained by broker 3
        "topic-id-changed-since-previous",  # explained by u's topicId incident
        "stray-dirs",
    ]
    # a topicId symptom without the topic's root finding is not "explained": it needs its own action
    lone = Finding("topic-id-changed-since-previous", Severity.CRITICAL, "c", "x changed", topic="x")
    assert explained_by(lone) == ("topic-id:x",) and explained_by(lone, {"broker:3", "topic-id:u"}) == ()
    assert [i["check"] for i in act_now([lone])] == ["topic-id-changed-since-previous"]


def test_act_now_groups_each_incident_with_the_ids_and_commands_in_view():
    items = _incident()
    s = summary(items)
    act = s["act_now"]
    assert [(i["incident"], i["check"]) for i in act] == [
        ("broker:3", "broker-down"),
        ("topic-id:u", "topic-id-mismatch"),
        (None, "no-controller"),
    ]
    assert [e["check"] for e in act[0]["explains"]] == ["offline-partitions"]
    assert [e["check"] for e in act[1]["explains"]] == ["topic-id-changed-since-previous"]
    assert {"label": "id to write back", "value": "diskdiskdiskdiskdiskdd"} in act[1]["facts"]
    page = render_html(items, s)
    card_html = _section(page, "act-now")
    first = _visible(card_html)
    assert first.index("Broker 3 (kafka-3) is down") < first.index("topicId mismatch on u")
    assert "zkzkzkzkzkzkzkzkzkzkzk" in first and "diskdiskdiskdiskdiskdd" in first
    assert 'airflow dags trigger kafka_zk_topic_id_repair --conf \'{"topics": ["u"]}\'' in first
    assert "offline-partitions" in first and "stray" not in first
    rest = _visible(_section(page, "findings"))
    assert "clears with broker 3 being down" in rest
    assert "clears with the topicId incident of u" in rest
    assert "broker 3 is down: not registered" not in rest  # its card is the row


def test_act_now_says_so_when_nothing_is_urgent():
    hygiene = [Finding("stray-dirs", Severity.WARNING, "c", "stray", topic="v")]
    page = render_html(hygiene, summary(hygiene))
    assert "Nothing critical: no broker is down, no topicId incident" in _visible(_section(page, "act-now"))
    assert summary(hygiene)["act_now"] == []


def test_gate_message_comes_from_the_summary_data():
    s = {**summary(_incident()), "report": "/r/report.html"}
    message = gate_message(s, Severity.CRITICAL)
    assert message.startswith("Kafka audit of c: 5 critical finding(s) at or above critical")
    assert (
        "(1) [CRITICAL] broker 3 is down: not registered [explains 1 other finding(s)] -> Start broker 3"
        in message
    )
    assert (
        "(2) [CRITICAL] ids differ on u [explains 1 other finding(s)] -> dry run (changes nothing): "
        "airflow dags trigger kafka_zk_topic_id_repair" in message
    )
    assert "(3) [CRITICAL] no broker holds /controller" in message
    assert "offline-partitions" not in message  # explained: starting broker 3 clears it
    assert message.endswith("Report: /r/report.html")
    assert gate_message(s, Severity.CRITICAL) == gate_message(
        {**s, "top": ["[garbage] not a line anyone parses"]}, Severity.CRITICAL
    )
    hygiene = [Finding("stray-dirs", Severity.WARNING, "c", "stray dirs on 2", topic="v")]
    quiet = {**summary(hygiene), "report": "/r"}
    assert gate_message(quiet, Severity.CRITICAL) is None
    assert "Also: [WARNING] stray-dirs: stray dirs on 2" in gate_message(quiet, Severity.WARNING)
