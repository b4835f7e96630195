"""The alert's pure parts: the notify table, incidents and their fingerprints, what pages, the
rendered e-mail and Slack message, and the plugin's URLs and path checks."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.alerts import incidents as inc
from airflow_provider_kafka_zk.alerts.render import alert_content, render_email, render_text, slack_message
from airflow_provider_kafka_zk.alerts.settings import NotifyConfigError, parse_notify
from airflow_provider_kafka_zk.plugins.app import ArtefactPathError, safe_relative
from airflow_provider_kafka_zk.plugins.links import artefact_url, parse_artefact_url, relative_to_cluster

SUMMARY = {
    "act_now": [
        {
            "check": "topic-id-mismatch",
            "severity": "critical",
            "topic": "click<script>",
            "incident": "topic-id:click<script>",
            "title": "topicId mismatch on click<script> (KAFKA-14190)",
            "summary": "replicas disagree",
            "action": "Repair.",
            "facts": [],
            "commands": [{"label": "repair", "command": "airflow dags trigger kafka_zk_topic_id_repair"}],
            "explains": [],
        },
        {
            "check": "broker-down",
            "severity": "critical",
            "broker_id": 3,
            "incident": "broker:3",
            "title": "Broker 3 (kafka-3) is down",
            "summary": "broker 3 is down: not registered in /brokers/ids",
            "action": "Start broker 3.",
            "facts": [{"label": "broker", "value": "3"}],
            "commands": [],
            "explains": [{"check": "offline-partitions"}, {"check": "under-replicated"}],
        },
    ],
    "top_findings": [
        {
            "check": "broker-down",
            "severity": "critical",
            "broker_id": 3,
            "summary": "down",
            "explained_by": [],
        },
        {"check": "offline-partitions", "severity": "critical", "summary": "x", "explained_by": ["broker:3"]},
        {
            "check": "deletion-pending",
            "severity": "error",
            "topic": "old",
            "summary": "stuck",
            "explained_by": [],
        },
        {
            "check": "throttle-left-set",
            "severity": "warning",
            "topic": "t",
            "summary": "w",
            "explained_by": [],
        },
    ],
}
VERDICTS = [
    {
        "topic": "old",
        "verdict": "BLOCKED",
        "causes": ["broker_offline"],
        "evidence": ["broker 3 is down"],
        "blocking_brokers": [3],
        "leftover_dirs": [],
    },
    {
        "topic": "gone",
        "verdict": "DELETED",
        "causes": [],
        "evidence": [],
        "blocking_brokers": [],
        "leftover_dirs": [],
    },
]


# -- the notify table ----------------------------------------------------------------------------


def test_one_channel_several_channels_and_defaults():
    assert [c.name for c in parse_notify(None).channels] == ["log"]
    one = parse_notify({"kind": "smtp", "to": "oncall@example.com"})
    assert one.channels[0].to == ("oncall@example.com",) and one.channels[0].conn_id == "smtp_default"
    many = parse_notify(
        {
            "channels": [{"kind": "smtp", "to": ["a@x.io"]}, {"kind": "slack", "slack_conn_id": "hook"}],
            "page_on": "every_run",
        }
    )
    assert [c.name for c in many.channels] == [
        "smtp:smtp_default",
        "slack:hook",
    ] and many.page_on == "every_run"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"kind": "pager"}, r"notify\.kind must be one of log, smtp, slack"),
        ({"kind": "smtp"}, r"notify\.to is required"),
        ({"kind": "smtp", "to": ["not an address"]}, r"is not an e-mail address"),
        ({"kind": "slack", "channel": "#kafka"}, r"always posts to the channel it was created for"),
        ({"kind": "smtp", "to": "a@x.io", "smpt_conn_id": "x"}, r"unknown key\(s\) smpt_conn_id"),
        ({"kind": "log", "page_on": "sometimes"}, r"page_on must be one of new_or_worse, every_run"),
        ({"channels": []}, r"channels must be a non-empty list"),
        ("smtp", r"must be a table"),
    ],
)
def test_a_malformed_notify_names_its_key(value, message):
    with pytest.raises(NotifyConfigError, match=message):
        parse_notify(value, "clusters.eu1.notify")


# -- incidents -----------------------------------------------------------------------------------


def _run(known=None, *, verdicts=VERDICTS, summary=SUMMARY, failed=None):
    groups = []
    observed = [inc.TASKS]
    if summary is not None:
        observed.append(inc.AUDIT)
        groups.append(inc.audit_incidents(summary, "error"))
    if verdicts is not None:
        observed.append(inc.DELETIONS)
        groups.append(inc.deletion_incidents(verdicts))
    groups.append(inc.task_incidents(failed or {}, {}))
    incidents = inc.merge("eu1", *groups)
    return incidents, inc.classify(incidents, known or {}, observed), observed


def test_incidents_are_the_root_causes_and_what_no_root_cause_explains():
    incidents, _, _ = _run()
    keys = [i.key for i in incidents]
    # the act-now cards in their triage order, each once (broker-down is its card's finding), then
    # what no card explains; the warning is below "error", the explained finding is in its card
    assert keys == ["topic-id:click<script>", "broker:3", "deletion:old"]
    broker = incidents[1]
    assert broker.magnitude == 2 and ("explains", "2 other finding(s), which clear with it") in broker.facts
    # the audit's deletion-pending and the deletions task's verdict are one incident: the verdict's,
    # which names what blocks it
    (deletion,) = [i for i in incidents if i.key == "deletion:old"]
    assert deletion.source == inc.DELETIONS and ("blocked by", "broker 3") in deletion.facts


def test_fingerprints_depend_on_the_subject_not_the_text():
    a = inc.merge("eu1", [inc.Incident("broker:3", inc.AUDIT, "critical", "Broker 3 is down", "x")])
    b = inc.merge("eu1", [inc.Incident("broker:3", inc.AUDIT, "critical", "Broker 3 (h) is down", "y")])
    c = inc.merge("eu2", [inc.Incident("broker:3", inc.AUDIT, "critical", "Broker 3 is down", "x")])
    assert a[0].fingerprint == b[0].fingerprint != c[0].fingerprint


def test_a_blocked_deletion_pages_once_and_again_only_when_worse():
    now = "2026-01-01T00:00:00+00:00"
    _, first, observed = _run()
    assert {c.status for c in first.classified} == {inc.NEW} and len(first.pages) == 3
    known = inc.next_known({}, first, observed, delivered=True, now=now)
    _, second, observed = _run(known)
    assert second.pages == [] and {c.status for c in second.classified} == {inc.UNCHANGED}
    assert all(c.since == now for c in second.classified)
    known = inc.next_known(known, second, observed, delivered=True, now="later")
    worse = [{**VERDICTS[0], "blocking_brokers": [3, 4]}]
    _, third, _ = _run(known, verdicts=worse, summary=None)
    assert [(c.incident.key, c.status) for c in third.pages] == [("deletion:old", inc.WORSE)]


def test_an_undelivered_page_pages_again_and_an_unlooked_source_is_not_resolved():
    _, first, observed = _run()
    known = inc.next_known({}, first, observed, delivered=False, now="t0")
    assert known == {}
    _, again, observed = _run(known)
    assert len(again.pages) == 3
    known = inc.next_known(known, again, observed, delivered=True, now="t1")
    # the audit did not run (snapshot failed): its incidents are not "resolved", nothing re-pages later
    _, blind, observed = _run(known, summary=None, verdicts=None, failed={"snapshot": [-1]})
    assert blind.resolved == [] and [c.incident.key for c in blind.pages] == ["task:snapshot"]
    known = inc.next_known(known, blind, observed, delivered=True, now="t2")
    _, back, _ = _run(known)
    assert back.pages == [] and {r["key"] for r in back.resolved} == {"task:snapshot"}


# -- rendering -----------------------------------------------------------------------------------


def _content(**kwargs):
    _, decision, _ = _run()
    return alert_content(
        cluster="eu1",
        dag_id="kafka_zk_daily_hygiene_eu1",
        run_id="scheduled__2026-01-01T00:00:00+00:00",
        run_url="https://airflow.example.com/dags/d/runs/r",
        report_url="https://airflow.example.com/kafka-zk/runs/d/r/audit/eu1/findings/x/report.html",
        classified=decision.classified,
        **kwargs,
    )


def test_the_email_is_html_with_escaped_data_root_causes_first_and_links():
    subject, html = render_email(_content())
    assert subject.startswith("[kafka-zk] eu1: CRITICAL - 3 new or worse: topicId mismatch on click<script>")
    assert "<script>" not in html and "click&lt;script&gt;" in html  # a topic name is data
    assert html.index("Broker 3 (kafka-3) is down") < html.index("Deletion of topic old is not done")
    assert 'href="https://airflow.example.com/dags/d/runs/r"' in html
    assert 'href="https://airflow.example.com/kafka-zk/runs/d/r/audit/eu1/findings/x/report.html"' in html
    assert "airflow dags trigger kafka_zk_topic_id_repair" in html
    text = render_text(_content())
    assert "[CRITICAL] NEW: Broker 3 (kafka-3) is down" in text and "Report: https://" in text


def test_the_slack_message_has_the_same_content_escaped_for_slack():
    body = slack_message(_content())
    blocks = body["blocks"]
    assert blocks[0]["type"] == "header"
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert "<https://airflow.example.com/dags/d/runs/r|Airflow run>" in sections[0]
    assert any("topicId mismatch on click&lt;script&gt;" in s for s in sections)
    assert any("```airflow dags trigger kafka_zk_topic_id_repair```" in s for s in sections)
    assert all(len(s) <= 3000 for s in sections) and len(blocks) <= 50


def test_a_test_alert_says_nothing_is_wrong():
    content = alert_content(
        cluster="eu1",
        dag_id="kafka_zk_test_alert",
        run_id="manual__x",
        run_url=None,
        report_url=None,
        classified=[],
        test_by="alice",
    )
    subject, html = render_email(content)
    assert subject == "[kafka-zk] eu1: TEST alert (the on-call path works)"
    assert "asked for by <b>alice</b>" in html and "Nothing is wrong" in html


# -- the plugin's URLs and paths ------------------------------------------------------------------


def test_artefact_urls_round_trip_and_stay_relative_to_the_cluster(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/af/")
    url = artefact_url(
        "d", "scheduled__2026-01-01T00:00:00+00:00", "audit", "eu1", "findings/20260101T000000/report.html"
    )
    assert url.startswith(
        "https://airflow.example.com/af/kafka-zk/runs/d/scheduled__2026-01-01T00%3A00%3A00%2B00%3A00/"
    )
    assert parse_artefact_url(url) == (
        "d",
        "scheduled__2026-01-01T00:00:00+00:00",
        "audit",
        "eu1",
        "findings/20260101T000000/report.html",
    )
    assert relative_to_cluster("/srv/a/eu1/findings/x", "/srv/a/", "eu1") == "findings/x"
    assert relative_to_cluster("file:///srv/a/eu1/findings/x/", "/srv/a", "eu1") == "findings/x"
    assert relative_to_cluster("sftp://h/d/eu1/drain/t", "sftp://h/d", "eu1") == "drain/t"
    assert relative_to_cluster("/srv/a/eu10/findings/x", "/srv/a", "eu1") is None
    assert relative_to_cluster("/srv/a/eu1/../eu2/x", "/srv/a", "eu1") is None
    assert relative_to_cluster("/elsewhere/eu1/x", "/srv/a", "eu1") is None


@pytest.mark.parametrize(
    "path", ["..", "../x", "a/../../b", "/etc/passwd", "a//b", "a\\..\\b", "a/./b", "a\x00b", "./a"]
)
def test_a_path_that_could_leave_the_folder_is_refused(path):
    with pytest.raises(ArtefactPathError):
        safe_relative(path)


def test_clean_relative_paths_pass():
    assert safe_relative("findings/x/report.html") == "findings/x/report.html"
    assert safe_relative("drain/x/") == "drain/x"
    assert safe_relative("") == ""
