"""The alert of a failed maintenance run, end to end on real parts: a simulated cluster in a real
ZooKeeper with no controller running (so a reassignment the drain starts never completes), its broker
hosts behind a real sshd, ``airflow dags test`` of the shipped drain DAG, a real SMTP server on
loopback (aiosmtpd) and a local endpoint answering as Slack's incoming webhook.

A real drain moves partitions until its batch times out: the run fails part-way with the cluster
changed. One HTML e-mail and one Slack message say what failed and why (the task's error), where the
run stopped, what it had changed (its change logs, the lease it still holds, the throttles left set),
its rollback artefacts with links, and how to finish or undo it. Every failed maintenance run pages
(a second drain, refused at its plan, pages again: no dedupe across runs); a retry of the alert task
in the same run does not page twice; a run that succeeds pages nothing, and its alert task fails
loudly when a failed run could not have paged.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink, WebhookSink
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "maint"
BROKEN = "maint-nomail"  # the same cluster, alerting through an SMTP connection that does not exist
DRAIN = "kafka_zk_pre_maintenance_drain"
KRAFT = "kafka_zk_kraft_migration_readiness"
DRAINED = 1
BASE_URL = "http://airflow.example.com:8080"


def _spec() -> ClusterSpec:
    """Four brokers, one per sshd address (127.0.0.1-4); broker 1 holds RF=1 partitions."""
    return ClusterSpec(
        "maint",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single", 4, 1, assignment={0: (1,), 1: (1,), 2: (0,), 3: (2,)}, records_per_partition=20
            ),
            TopicSpec("replicated", 2, 3, records_per_partition=10),
        ),
    )


@pytest.fixture(scope="module")
def sinks():
    with SmtpSink() as smtp, WebhookSink() as slack:
        yield smtp, slack


@pytest.fixture(scope="module")
def env(zookeeper_server, ssh_server, sinks, airflow_home, tmp_path_factory):
    """A cluster file with the cluster twice (``maint`` pages by e-mail and Slack; ``maint-nomail``
    names an SMTP connection that does not exist) and the environment of every ``airflow`` command."""
    smtp, slack = sinks
    work = tmp_path_factory.mktemp("maintenance-alerts")
    chroot = zookeeper_server.new_chroot("/kafka_maint_alerts_")
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, work / "hosts"
    ) as deployed:
        base = work / "artefacts"
        common = (
            'kafka_zookeeper_conn_id = "maint_zk"\nssh_conn_id = "maint_ssh"\n'
            f'base_path = "{base}"\nengine = "in-process"\ndeletion_check = false\n'
            # the failing drain runs unattended: no approval step (the approval has its own tests)
            "require_approval = false\n"
            f'server_properties_path = "{work / "hosts" / "broker-{broker_id}" / "config" / "server.properties"}"\n'
        )
        (work / "clusters.toml").write_text(
            f"[clusters.{CLUSTER}]\n{common}"
            'notify = { channels = [ { kind = "smtp", to = ["oncall@example.com"], smtp_conn_id = "maint_smtp" },'
            ' { kind = "slack", slack_webhook_conn_id = "maint_slack" } ] }\n'
            f'[clusters."{BROKEN}"]\n{common}'
            'notify = { kind = "smtp", to = ["oncall@example.com"], smtp_conn_id = "no_such_smtp" }\n'
        )
        dags = work / "dags"
        dags.mkdir()
        for name in (DRAIN, KRAFT):  # only these files: the daily file would refuse the broken notify
            (dags / f"{name}.py").write_text(
                (Path(__file__).resolve().parents[2] / "dags" / f"{name}.py").read_text()
            )
        environment = {
            **os.environ,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__API__BASE_URL": BASE_URL,
            "KAFKA_ZK_CLUSTERS_FILE": str(work / "clusters.toml"),
            "AIRFLOW_CONN_MAINT_ZK": json.dumps(
                {
                    "conn_type": "kafkazookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
                }
            ),
            "AIRFLOW_CONN_MAINT_SMTP": json.dumps(smtp.connection()),
            "AIRFLOW_CONN_MAINT_SLACK": json.dumps(slack.connection()),
        }
        for name, value in ssh_server.airflow_connection("127.0.0.1", "maint_ssh", conn_timeout=5).items():
            environment[name] = value
        yield {"env": environment, "base": base, "deployed": deployed, "work": work}


def _airflow(env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        env=env["env"],
        cwd=env["work"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _records(env, dag_id: str, cluster: str = CLUSTER) -> list[dict]:
    root = env["base"] / cluster / "alerts" / dag_id
    return (
        [json.loads((d / "alert.json").read_text()) for d in sorted(root.iterdir())] if root.exists() else []
    )


DRAIN_CONF = {
    "cluster": CLUSTER,
    "brokers": [DRAINED],
    "dry_run": False,
    "restart_check": "never",
    "poll_interval_s": 0.5,
    "batch_timeout_s": 4,  # no controller: the batch never completes
}


@pytest.fixture(scope="module")
def failed_drain(env, sinks):
    smtp, slack = sinks
    done = _airflow(env, "dags", "test", DRAIN, "-c", json.dumps(DRAIN_CONF))
    (record,) = _records(env, DRAIN)
    return done, list(smtp.messages), list(slack.posts), record


def test_a_drain_that_fails_part_way_pages_once_by_email_and_slack(failed_drain):
    done, mails, posts, record = failed_drain
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]  # the run failed ...
    assert len(mails) == 1 and len(posts) == 1, output[-4000:]  # ... and paged once, on each channel
    assert record["paged"] is True and record["page_key"] == ["clear_throttles[-1]", "execute[-1]"]
    assert all(d["ok"] for d in record["deliveries"].values()) and len(record["deliveries"]) == 2
    subject = mails[0].message["Subject"]
    assert subject.startswith(
        f"[kafka-zk] {CLUSTER}: {DRAIN} on {CLUSTER} FAILED at execute, clear_throttles after "
    )
    assert subject.endswith(
        "ZooKeeper write(s) to the cluster; this run still holds the cluster's maintenance lease."
    )


def test_the_email_says_what_failed_where_it_stopped_what_changed_and_how_to_undo(failed_drain):
    _, mails, _, record = failed_drain
    html = mails[0].html()
    run_id = record["run_id"]
    # what failed, with the task's own error (recorded by its failure callback)
    assert re.search(r"<div>DrainError: batch 1 not complete after 4s: 0/2 partitions done", html), html
    # where it stopped, in DAG order
    for task, outcome in (
        ("plan", "done"),
        ("execute", "FAILED"),
        ("clear_throttles", "FAILED"),
        ("verify", "not run"),
    ):
        assert re.search(rf">{task}</td><td[^>]*>{outcome}", html), task
    # what it changed: the change logs by task and try, the writes (the lease apart), the lease
    assert "changes-execute-1.json" in html and "Create /admin/reassign_partitions" in html
    assert "SetData /config/topics/single" in html and "still held" in html
    # the rollback artefact and the run folder, as links served by the provider's plugin
    plan_folder = (
        f"{BASE_URL}/kafka-zk/runs/{DRAIN}/{urllib.parse.quote(run_id, safe='')}/plan/{CLUSTER}/drain/"
    )
    assert re.search(rf'href="{re.escape(plan_folder)}[^"/]+/rollback.json"', html), html
    assert re.search(rf'href="{re.escape(plan_folder)}[^"/]+/changes-execute-1.json"', html)
    # how to finish it or undo it: the post-maintenance DAG with this run, as a dry run first
    assert "clear the failed task" in html and "throttles.json" in html
    command = re.search(r"airflow dags trigger kafka_zk_post_maintenance --conf &#39;([^<]+)&#39;", html)
    assert json.loads(command[1].replace("&#34;", '"')) == {
        "cluster": CLUSTER,
        "drain_run": run_id,
        "dry_run": True,
    }
    assert f'href="{BASE_URL}/dags/{DRAIN}/runs/{urllib.parse.quote(run_id, safe="")}"' in html
    assert f"/runs/{urllib.parse.quote(run_id, safe='')}/tasks/execute" in html  # the failed task's log


def test_the_slack_message_has_the_same_content(failed_drain):
    _, _, posts, _ = failed_drain
    path, body = posts[0]
    assert path == "/services/T000/B000/XXXXXXXX"
    text = json.dumps(body)
    for expected in (
        "FAILED: execute",
        "Create /admin/reassign_partitions",
        "kafka_zk_post_maintenance",
        "Run folder",
    ):
        assert expected in text, expected


def test_a_retry_of_the_alert_pages_nothing_more(failed_drain, env, sinks):
    smtp, slack = sinks
    _, _, _, record = failed_drain
    before = (len(smtp.messages), len(slack.posts))
    params = json.dumps(DRAIN_CONF)  # `tasks test` validates the params anew
    done = _airflow(env, "tasks", "test", DRAIN, "alert", record["run_id"], "-t", params)
    assert "Channel smtp:maint_smtp" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    assert (len(smtp.messages), len(slack.posts)) == before
    (again,) = _records(env, DRAIN)
    assert all(d.get("skipped") == "reached by an earlier try" for d in again["deliveries"].values()), again


def test_every_failed_maintenance_run_pages(failed_drain, env, sinks):
    """A second drain of the same cluster fails too (the first one's reassignment is still in flight):
    a new run, a new page -- no fingerprint shared across runs -- saying it changed nothing."""
    smtp, _ = sinks
    before = len(smtp.messages)
    done = _airflow(env, "dags", "test", DRAIN, "-c", json.dumps(DRAIN_CONF))
    assert done.returncode == 1
    new = smtp.messages[before:]
    assert len(new) == 1, [m.message["Subject"] for m in new]
    subject = new[0].message["Subject"]
    assert " FAILED at " in subject and subject.endswith("before changing anything."), subject
    assert "Nothing was changed on the cluster" in new[0].html()
    assert len(_records(env, DRAIN)) == 2


def test_a_run_that_succeeds_pages_nothing_but_says_when_a_failure_could_not_page(failed_drain, env, sinks):
    smtp, slack = sinks
    before = (len(smtp.messages), len(slack.posts))
    conf = {"cluster": CLUSTER, "fail_on_blockers": False}
    done = _airflow(env, "dags", "test", KRAFT, "-c", json.dumps(conf))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert (len(smtp.messages), len(slack.posts)) == before
    (record,) = _records(env, KRAFT)
    assert record["paged"] is False and record["notify_problems"] == []
    # the same on a cluster whose SMTP connection does not exist: the run succeeds, its alert task fails
    done = _airflow(env, "dags", "test", KRAFT, "-c", json.dumps({**conf, "cluster": BROKEN}))
    output = done.stdout + done.stderr
    assert "a failed run of cluster maint-nomail would page nobody" in output, output[-4000:]
    assert "'no_such_smtp' does not exist" in output
    (broken,) = _records(env, KRAFT, BROKEN)
    assert broken["notify_problems"] and (len(smtp.messages), len(slack.posts)) == before


def test_the_email_renders_in_a_real_browser(failed_drain, env):
    """Headless Debian Chromium renders the e-mail as sent (its cards, the steps, the commands).
    The screenshot goes to $KAFKA_ZK_SCREENSHOTS (docs/screenshots refreshes the README's), else tmp."""
    chromium = Path("/usr/bin/chromium")
    assert chromium.is_file(), "apt-get install chromium"
    _, mails, _, _ = failed_drain
    shots = Path(os.environ.get("KAFKA_ZK_SCREENSHOTS") or env["work"] / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    page = env["work"] / "maintenance-alert-email.html"
    page.write_text(mails[0].html())
    shot = shots / "kafka-zk-maintenance-alert-email.png"
    shot.unlink(missing_ok=True)
    subprocess.run(
        [
            str(chromium),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1000,2000",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=180,
        check=True,
    )
    assert shot.stat().st_size > 20_000  # a rendered page, not an empty one
