"""Alerts and report links of the daily DAG, end to end, on real parts: a real ZooKeeper and sshd
with the simulated incident cluster, ``airflow dags test`` in an Airflow home of its own (SQLite), a
real SMTP server on loopback (aiosmtpd) and a local HTTP endpoint answering as Slack's incoming
webhook, then ``airflow api-server`` on the same home serving the report the e-mail links to.

What is asserted is what issue 24 asks: one HTML e-mail (and one Slack message) per failed run with
the root causes and working links; a second run with the same incidents (a deletion still blocked,
the same broker down) pages nothing but still records them; the plugin serves the report behind
Airflow's auth manager and nothing outside the folder the task published.
"""

from __future__ import annotations

import http.client
import importlib.metadata
import json
import os
import re
import secrets
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from airflow_provider_kafka_zk.alerts.record import stamp
from airflow_provider_kafka_zk.testing._process import free_port, pdeathsig_prefix, terminate
from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink, WebhookSink
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
HOSTS = {str(b): a for b, a in enumerate(ADDRESSES)}
ADMIN = "admin"
CLUSTER = "incident"
DAG_ID = f"kafka_zk_daily_hygiene_{CLUSTER}"


def plugin_registered_by_entry_point() -> bool:
    return any(ep.name == "kafka_zk" for ep in importlib.metadata.entry_points(group="airflow.plugins"))


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def incident(zookeeper_server, tmp_path_factory):
    with DeployedCluster(
        incident_cluster(name=CLUSTER),
        zookeeper_server.connect_string,
        zookeeper_server.new_chroot("/kafka_alerts_"),
        tmp_path_factory.mktemp("alert-hosts"),
    ) as deployed:
        yield deployed


@pytest.fixture(scope="module")
def sinks():
    with SmtpSink() as smtp, WebhookSink() as slack:
        yield smtp, slack


@pytest.fixture(scope="module")
def home(sshd, incident, zookeeper_server, sinks, tmp_path_factory):
    """An Airflow home of its own: DAGs folder with the daily DAG file, the plugin, a cluster file
    whose incident cluster alerts by e-mail and Slack, and the environment of every command."""
    smtp, slack = sinks
    work = tmp_path_factory.mktemp("alerts-home")
    dags = work / "dags"
    dags.mkdir()
    (dags / "kafka_zk_daily_hygiene.py").write_text((REPO / "dags" / "kafka_zk_daily_hygiene.py").read_text())
    plugins = work / "plugins"
    plugins.mkdir()
    if not plugin_registered_by_entry_point():  # an editable install made before the entry point
        (plugins / "kafka_zk_plugin.py").write_text(
            "from airflow_provider_kafka_zk.plugins import KafkaZkPlugin\n"
        )
    base = work / "artefacts"
    port = free_port("127.0.0.1")
    password = secrets.token_urlsafe(16)
    (work / "passwords.json").write_text(json.dumps({ADMIN: password}))
    lines = [
        f'[clusters."{CLUSTER}"]',
        'kafka_zookeeper_conn_id = "zk_alerts"',
        'ssh_conn_id = "alerts_ssh"',
        'engine = "in-process"',
        f'base_path = "{base}"',
        "retries = 0",
        "connect_timeout = 3",
        f'server_properties_path = "{incident.root}/broker-{{broker_id}}/config/server.properties"',
        "broker_hosts = { " + ", ".join(f'"{b}" = "{h}"' for b, h in HOSTS.items()) + " }",
        'notify = { channels = [ { kind = "smtp", to = ["oncall@example.com"], smtp_conn_id = "smtp_oncall" },'
        ' { kind = "slack", slack_webhook_conn_id = "slack_oncall" } ] }',
    ]
    (work / "clusters.toml").write_text("\n".join(lines) + "\n")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(work),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{work / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(work / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "KAFKA_ZK_CLUSTERS_FILE": str(work / "clusters.toml"),
        "AIRFLOW_CONN_ZK_ALERTS": json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": incident.chroot},
            }
        ),
        "AIRFLOW_CONN_ALERTS_SSH": json.dumps(sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)),
        "AIRFLOW_CONN_SMTP_ONCALL": json.dumps(smtp.connection()),
        "AIRFLOW_CONN_SLACK_ONCALL": json.dumps(slack.connection()),
    }
    env.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", None)
    done = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"env": env, "work": work, "base": base, "port": port, "password": password}


def dags_test(home) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID],
        env=home["env"],
        cwd=home["work"],
        capture_output=True,
        text=True,
        timeout=900,
    )


def alert_records(home) -> list[dict]:
    root = home["base"] / CLUSTER / "alerts" / DAG_ID
    return (
        [json.loads((d / "alert.json").read_text()) for d in sorted(root.iterdir())] if root.exists() else []
    )


@pytest.fixture(scope="module")
def first_run(home, sinks):
    smtp, slack = sinks
    result = dags_test(home)
    return result, list(smtp.messages), list(slack.posts)


@pytest.fixture(scope="module")
def second_run(first_run, home, sinks):
    smtp, slack = sinks
    before = (len(smtp.messages), len(slack.posts))
    # a run's record folder is its run_after second: this run starts in a later one than the first's
    newest = max(p.name for p in (home["base"] / CLUSTER / "alerts" / DAG_ID).iterdir())
    while stamp(datetime.now(UTC)) <= newest:
        time.sleep(0.05)
    result = dags_test(home)
    return result, smtp.messages[before[0] :], slack.posts[before[1] :]


def test_one_html_email_and_one_slack_message_per_failed_run(first_run, home):
    result, mails, posts = first_run
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]  # the gate and the deletions fail: the run fails
    assert len(mails) == 1, f"{len(mails)} e-mails:\n{output[-4000:]}"
    (mail,) = mails
    assert mail.rcpt_tos == ["oncall@example.com"] and mail.mail_from == "kafka-zk@example.com"
    html = mail.html()
    assert html.lstrip().startswith("<!doctype html>") and "<table" in html
    assert mail.message["Subject"].startswith(f"[kafka-zk] {CLUSTER}: CRITICAL")
    # root causes first, with their ids and commands
    assert "topicId mismatch on clickstream (KAFKA-14190)" in html
    assert "Broker 3" in html and "is down" in html
    # each root cause once, in the report's triage order (its "what to do" says "card above")
    cards = re.findall(r'<div style="font-size:16px;font-weight:bold;margin:4px 0">([^<]+)</div>', html)
    assert cards[:3] == [
        "topicId mismatch on clickstream (KAFKA-14190)",
        "Broker 3 (127.0.0.5) is down",
        "Broker 4 (127.0.0.6) is down",
    ]
    assert len(cards) == len(set(cards))
    assert "Deletion of topic" in html  # the deletions task's verdicts, one incident per topic
    assert "kafka_zk_topic_id_repair" in html  # the repair command of the report's card
    links = re.findall(r'href="([^"]+)"', html)
    run_link = next(link for link in links if "/runs/" in link and "/kafka-zk/" not in link)
    assert run_link.startswith(f"http://127.0.0.1:{home['port']}/dags/{DAG_ID}/runs/")
    report_link = next(link for link in links if "/kafka-zk/runs/" in link)
    assert report_link.endswith("/report.html")
    assert len(posts) == 1
    path, body = posts[0]
    assert path == "/services/T000/B000/XXXXXXXX"
    text = json.dumps(body)
    assert "topicId mismatch on clickstream" in text and "Deletion of topic" in text
    assert report_link.replace("&", "&amp;") in text or report_link in text


def test_the_record_holds_fingerprints_and_deliveries(first_run, home):
    (record,) = alert_records(home)
    assert record["paged"] is True
    assert set(record["deliveries"]) == {"smtp:smtp_oncall", "slack:slack_oncall"}
    assert all(d["ok"] for d in record["deliveries"].values())
    statuses = {i["key"]: i["status"] for i in record["incidents"]}
    assert statuses["topic-id:clickstream"] == "new" and statuses["broker:3"] == "new"
    assert any(k.startswith("deletion:") for k in statuses)
    assert all(re.fullmatch(r"[0-9a-f]{16}", i["fingerprint"]) for i in record["incidents"])
    assert set(record["known"]) == {i["fingerprint"] for i in record["incidents"]}


def test_a_blocked_deletion_pages_once_not_daily(second_run, home):
    result, mails, posts = second_run
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]  # still failed: the cluster is still unhealthy
    assert mails == [] and posts == [], output[-3000:]
    first, second = alert_records(home)
    assert second["previous"] is not None and second["paged"] is False and second["deliveries"] == {}
    assert {i["key"] for i in second["incidents"]} == {i["key"] for i in first["incidents"]}
    assert {i["status"] for i in second["incidents"]} == {"unchanged"}
    deletions = [i for i in second["incidents"] if i["key"].startswith("deletion:")]
    assert deletions and all(i["since"] == first["written_at"] for i in deletions)
    assert "none new or worse" in output


# ---------------------------------------------------------------------------------------------------
# The report behind the api-server plugin
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_server(first_run, home):
    log_path = home["work"] / "api-server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                *pdeathsig_prefix(),
                str(VENV_BIN / "airflow"),
                "api-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(home["port"]),
                "--workers",
                "1",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home["work"],
            env=home["env"],
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-4000:]
            try:
                if request(home, "GET", "/api/v2/monitor/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(1)
        status, body, _ = request(
            home, "POST", "/auth/token", {"username": ADMIN, "password": home["password"]}
        )
        assert status in (200, 201), body
        yield json.loads(body)["access_token"]
    finally:
        terminate(process, os.getpid(), grace=30, descendants=True)


def request(
    home,
    method: str,
    path: str,
    body: dict | None = None,
    token: str | None = None,
    cookie: str | None = None,
):
    connection = http.client.HTTPConnection("127.0.0.1", home["port"], timeout=120)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = f"_token={cookie}"
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def _report_path(first_run) -> str:
    html = first_run[1][0].html()
    link = next(link for link in re.findall(r'href="([^"]+)"', html) if "/kafka-zk/runs/" in link)
    return urlsplit(link.replace("&amp;", "&")).path


def test_the_report_link_of_the_email_opens_the_report(api_server, first_run, home):
    path = _report_path(first_run)
    status, body, headers = request(home, "GET", path, token=api_server)
    assert status == 200, body[:500]
    assert b"Kafka cluster audit: incident" in body and b"topic-id-mismatch" in body
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert headers["x-content-type-options"] == "nosniff"
    # the UI's session cookie works the same (a click in the browser)
    assert request(home, "GET", path, cookie=api_server)[0] == 200
    # the folder's index lists the run's artefacts
    status, body, _ = request(home, "GET", path.rsplit("/", 1)[0] + "/", token=api_server)
    assert status == 200 and b"summary.json" in body and b"findings.parquet" in body


def test_the_report_needs_airflow_login(api_server, first_run, home):
    status, _, _ = request(home, "GET", _report_path(first_run))
    assert status in (401, 403)
    status, _, _ = request(home, "GET", _report_path(first_run), token="not-a-token")
    assert status in (401, 403)


def test_nothing_outside_the_published_folder_is_served(api_server, first_run, home):
    path = _report_path(first_run)
    prefix, _, relative = path.partition(f"/{CLUSTER}/")
    secret = home["work"] / "passwords.json"  # what a traversal would be after
    folder = relative.rsplit("/", 1)[0]
    attempts = [
        f"{prefix}/{CLUSTER}/{folder}/..%2F..%2F..%2Fclusters.toml",
        f"{prefix}/{CLUSTER}/{folder}/%2E%2E/%2E%2E/%2E%2E/%2E%2E/passwords.json",
        f"{prefix}/{CLUSTER}/{folder}/..%5C..%5Cpasswords.json",
        f"{prefix}/{CLUSTER}/{quote(str(secret), safe='')}",
        f"{prefix}/{CLUSTER}//{secret}",
        f"{prefix}/{CLUSTER}/snapshots/",  # the store, but not what this task published
        f"{prefix}/{CLUSTER}/{folder}/../../snapshots/",
        f"{prefix}/..%2F..%2F/{folder}/report.html",  # another "cluster"
        path.replace("/audit/", "/snapshot/"),  # a task that published no such folder
    ]
    for attempt in attempts:
        status, body, _ = request(home, "GET", attempt, token=api_server)
        assert status == 404, (attempt, status, body[:300])
        assert b"password" not in body.lower() and b"[clusters" not in body
    # a symlink inside the published folder that leads out of it is refused too
    link = home["base"] / CLUSTER / folder / "escape.json"
    link.symlink_to(secret)
    try:
        status, body, _ = request(home, "GET", f"{prefix}/{CLUSTER}/{folder}/escape.json", token=api_server)
        assert status == 404 and secret.read_bytes() not in body
    finally:
        link.unlink()


def test_the_gate_and_audit_report_links_in_the_ui_open_the_report(api_server, first_run, home):
    run_id = alert_records(home)[0]["run_id"]
    for task_id in ("audit", "gate"):
        status, body, _ = request(
            home,
            "GET",
            f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/links",
            token=api_server,
        )
        assert status == 200, body[:300]
        link = json.loads(body)["extra_links"]["Report"]
        assert link.startswith(f"http://127.0.0.1:{home['port']}/kafka-zk/runs/{DAG_ID}/") and link.endswith(
            "/report.html"
        )
        status, page, _ = request(home, "GET", urlsplit(link).path, token=api_server)
        assert status == 200 and b"Kafka cluster audit: incident" in page


def test_findings_and_report_are_published_as_assets_naming_the_run_folder(api_server, first_run, home):
    status, body, _ = request(
        home, "GET", f"/api/v2/assets/events?source_dag_id={DAG_ID}&limit=100", token=api_server
    )
    assert status == 200, body[:300]
    events = {e["uri"]: e for e in json.loads(body)["asset_events"]}
    findings, report = events[f"kafka-zk://{CLUSTER}/findings"], events[f"kafka-zk://{CLUSTER}/reports"]
    folder = Path(findings["extra"]["folder"])
    assert folder.parent == home["base"] / CLUSTER / "findings" and (folder / "summary.json").exists()
    assert report["extra"]["report"] == str(folder / "report.html")
    assert report["extra"]["report_url"].endswith("/report.html") and report["source_task_id"] == "audit"


def test_the_report_and_the_email_in_a_real_browser(api_server, first_run, home):
    """Headless Debian Chromium: the UI's session cookie opens the report through the plugin (no
    script runs there: the page's CSP), and the alert e-mail renders as cards with its buttons.
    Screenshots go to $KAFKA_ZK_SCREENSHOTS (docs/screenshots refreshes the README's), else tmp."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
    assert chromium.is_file() and chromedriver.is_file(), "apt-get install chromium chromium-driver"
    shots = Path(os.environ.get("KAFKA_ZK_SCREENSHOTS") or home["work"] / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1300,1400",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(chromedriver)))
    driver.set_page_load_timeout(180)
    try:
        base = f"http://127.0.0.1:{home['port']}"
        driver.get(f"{base}/api/v2/monitor/health")  # the origin, to set the UI's cookie on
        driver.add_cookie({"name": "_token", "value": api_server, "path": "/"})
        driver.get(base + _report_path(first_run))
        assert driver.title == f"Kafka audit: {CLUSTER}"
        assert "topicId mismatch on clickstream" in driver.find_element("id", "act-now").text
        assert driver.save_screenshot(str(shots / "kafka-zk-report-via-plugin.png"))
        email = home["work"] / "alert-email.html"
        email.write_text(first_run[1][0].html())
        driver.get(email.as_uri())
        assert "Open the Airflow run" in driver.page_source and "Open the report" in driver.page_source
        assert driver.save_screenshot(str(shots / "kafka-zk-alert-email.png"))
    finally:
        driver.quit()
