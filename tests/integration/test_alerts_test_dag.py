"""``kafka_zk_test_alert`` proves the on-call path: a real SMTP server and a webhook endpoint on
loopback get the test alert; a channel that cannot be reached fails the run naming it. Also: the
manual DAGs' plan and report tasks carry the "Plan"/"Report" links and the report asset alias."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing._process import free_port
from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink, WebhookSink

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _test_alert(tmp_path: Path, connections: dict) -> subprocess.CompletedProcess[str]:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "kafka_zk_test_alert.py").write_text((REPO / "dags" / "kafka_zk_test_alert.py").read_text())
    (tmp_path / "clusters.toml").write_text(
        '[clusters.eu1]\nnotify = { channels = [ { kind = "smtp", to = ["oncall@example.com"], '
        'smtp_conn_id = "smtp_oncall" }, { kind = "slack", slack_webhook_conn_id = "slack_oncall" } ] }\n'
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__API__BASE_URL": "https://airflow.example.com",
        "KAFKA_ZK_CLUSTERS_FILE": str(tmp_path / "clusters.toml"),
        **{f"AIRFLOW_CONN_{k.upper()}": json.dumps(v) for k, v in connections.items()},
    }
    airflow = str(VENV_BIN / "airflow")
    assert (
        subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, timeout=900).returncode == 0
    )
    return subprocess.run(
        [airflow, "dags", "test", "kafka_zk_test_alert", "-c", '{"cluster": "eu1"}'],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_test_alert_reaches_every_channel(tmp_path):
    with SmtpSink() as smtp, WebhookSink() as slack:
        result = _test_alert(tmp_path, {"smtp_oncall": smtp.connection(), "slack_oncall": slack.connection()})
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        (mail,) = smtp.messages
        assert mail.message["Subject"] == "[kafka-zk] eu1: TEST alert (the on-call path works)"
        assert "Nothing is wrong with the cluster" in mail.html()
        assert 'href="https://airflow.example.com/dags/kafka_zk_test_alert/runs/' in mail.html()
        ((_path, body),) = slack.posts
        assert body["blocks"][0]["text"]["text"] == mail.message["Subject"]


def test_a_test_alert_that_cannot_reach_a_channel_fails_naming_it(tmp_path):
    down = SmtpSink()
    down.port = free_port("127.0.0.1")  # nothing listens there
    with WebhookSink(status=404) as slack:  # Slack's answer to a revoked webhook
        result = _test_alert(tmp_path, {"smtp_oncall": down.connection(), "slack_oncall": slack.connection()})
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert "Test alert NOT delivered: smtp:smtp_oncall: " in output
    assert "slack:slack_oncall: " in output


def test_manual_dags_link_their_plan_and_report_and_publish_the_report():
    from airflow_provider_kafka_zk.dags import create_all_dags
    from airflow_provider_kafka_zk.plugins.assets import REPORTS_ALIAS

    dags = create_all_dags()
    for dag_id in (
        "kafka_zk_pre_maintenance_drain",
        "kafka_zk_post_maintenance",
        "kafka_zk_topic_id_repair",
        "kafka_zk_deletion_cleanup",
    ):
        dag = dags[dag_id]
        assert [link.name for link in dag.get_task("plan").operator_extra_links] == ["Plan"], dag_id
        report = dag.get_task("report")
        assert [link.name for link in report.operator_extra_links] == ["Report", "Plan"], dag_id
        assert [getattr(o, "name", None) for o in report.outlets] == [REPORTS_ALIAS], dag_id
