"""The metrics end to end on real parts: Debian's Prometheus scraping Debian's Pushgateway, after a real
daily run of the simulator's incident cluster and a real drain of a maintenance cluster (real
ZooKeeper and sshd, ``airflow dags test`` in an Airflow home of its own), with Airflow's StatsD output
received by a UDP listener on loopback.

Asserted: the figures the incident cluster has (RF=1 exposure per broker, topic-id trouble, pending
deletions, leftover bytes, brokers down) reach Prometheus with the values the audit found; the drain
published while it ran (``result="running"``, partitions left) and when it ended; the daily run's
StatsD lines carry the same figures as tags; and every query of every panel of the shipped Grafana
dashboard returns data from Prometheus' HTTP API. ``KAFKA_ZK_SCREENSHOTS=docs/screenshots`` also
refreshes the screenshot of Prometheus' graph page.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.metrics.dashboard import ROWS, shipped_dashboard
from airflow_provider_kafka_zk.testing.prometheus import PrometheusServer, PushgatewayServer
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import maintenance_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
DAILY = "kafka_zk_daily_hygiene_incident"
DRAIN = "kafka_zk_pre_maintenance_drain"
DRAINED = 2
SCREENSHOT = "kafka-zk-metrics-prometheus.png"


class StatsdListener:
    """UDP on loopback keeping every StatsD line it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.lines += self.sock.recv(65536).decode().splitlines()
            except TimeoutError:
                continue

    def __enter__(self) -> StatsdListener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


class GatewayWatch:
    """Reads the Pushgateway while a run goes on: what the maintenance group showed, in order."""

    def __init__(self, gateway: PushgatewayServer) -> None:
        self.gateway = gateway
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            try:
                text = self.gateway.metrics_text()
            except OSError:
                continue
            self.seen += [
                line
                for line in text.splitlines()
                if line.startswith(("kafka_zk_maintenance_result{", "kafka_zk_maintenance_partitions_left{"))
            ]

    def __enter__(self) -> GatewayWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def stack(zookeeper_server, tmp_path_factory):
    """Pushgateway + Prometheus, sshd, the two deployed clusters (the maintenance one with its
    controller carrying out reassignments), a StatsD listener and an Airflow home whose ``[kafka_zk]``
    section turns the metrics on."""
    work = tmp_path_factory.mktemp("metrics")
    with (
        PushgatewayServer(work) as gateway,
        PrometheusServer(work, gateway.address) as prometheus,
        SshServer(ADDRESSES, work_dir=work / "sshd") as sshd,
        DeployedCluster(
            incident_cluster(name="incident"),
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_metrics_incident_"),
            work / "incident-hosts",
        ) as incident,
        DeployedCluster(
            maintenance_cluster(name="maint"),
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_metrics_maint_"),
            work / "maint-hosts",
        ) as maint,
        ClusterRuntime(maint, restart_dir=work / "restarts", reassignments=True),
        StatsdListener() as statsd,
    ):
        dags = work / "dags"
        dags.mkdir()
        for name in ("kafka_zk_daily_hygiene.py", "kafka_zk_pre_maintenance_drain.py"):
            shutil.copy(REPO / "dags" / name, dags / name)
        base = work / "artefacts"
        hosts = "{ " + ", ".join(f'"{b}" = "{a}"' for b, a in enumerate(ADDRESSES)) + " }"
        tables = []
        for name, deployed in (("incident", incident), ("maint", maint)):
            tables += [
                f"[clusters.{name}]",
                f'kafka_zookeeper_conn_id = "zk_{name}"',
                'ssh_conn_id = "metrics_ssh"',
                'engine = "in-process"',
                f'base_path = "{base}"',
                "retries = 0",
                "connect_timeout = 3",
                "require_approval = false",
                f'server_properties_path = "{deployed.root}/broker-{{broker_id}}/config/server.properties"',
                f"broker_hosts = {hosts}",
            ]
        (work / "clusters.toml").write_text("\n".join(tables) + "\n")
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(work),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{work / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "KAFKA_ZK_CLUSTERS_FILE": str(work / "clusters.toml"),
            # README "Dashboards and deadlines": the section turns them on for every cluster
            "AIRFLOW__KAFKA_ZK__METRICS_PUSHGATEWAY_URL": gateway.url,
            "AIRFLOW__KAFKA_ZK__METRICS_AIRFLOW": "True",
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port),
            "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
            "AIRFLOW_CONN_METRICS_SSH": json.dumps(
                sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
            ),
        }
        for name, deployed in (("incident", incident), ("maint", maint)):
            env[f"AIRFLOW_CONN_ZK_{name.upper()}"] = json.dumps(
                {
                    "conn_type": "kafkazookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": deployed.chroot, "connect_timeout": 5, "session_timeout": 10},
                }
            )
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
        yield {
            "env": env,
            "work": work,
            "gateway": gateway,
            "prometheus": prometheus,
            "statsd": statsd,
            "base": base,
        }


def _dags_test(stack, dag_id: str, conf: dict | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(VENV_BIN / "airflow"), "dags", "test", dag_id]
    if conf is not None:
        command += ["-c", json.dumps(conf)]
    return subprocess.run(
        command, env=stack["env"], cwd=stack["work"], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def runs(stack):
    """The daily run of the incident cluster (it fails at its gate, as intended), then a real drain of
    the maintenance cluster's broker 2, watched on the Pushgateway while it runs."""
    daily = _dags_test(stack, DAILY)
    assert daily.returncode == 1, (daily.stdout + daily.stderr)[-4000:]  # the gate fails: incidents
    with GatewayWatch(stack["gateway"]) as watch:
        drain = _dags_test(
            stack,
            DRAIN,
            {"cluster": "maint", "brokers": [DRAINED], "dry_run": False, "throttle_mb_per_sec": 1,
             "poll_interval_s": 0.5, "max_partitions_per_batch": 1},
        )  # fmt: skip
        time.sleep(1)
    assert drain.returncode == 0, (drain.stdout + drain.stderr)[-4000:]
    return {"daily": daily, "drain": drain, "seen": watch.seen}


def _value(series: list[dict]) -> dict[str, float]:
    return {s["metric"].get("broker", s["metric"].get("result", "")): float(s["value"][1]) for s in series}


def test_daily_figures_reach_prometheus_with_the_audits_values(stack, runs) -> None:
    prometheus = stack["prometheus"]
    prometheus.wait_for('kafka_zk_daily_last_run_timestamp_seconds{cluster="incident"}')
    # the newest run's summary (run folders are named by their run key, which starts with its time):
    # the Pushgateway holds the last push
    newest = sorted((stack["base"] / "incident" / "findings").glob("*/summary.json"))[-1]
    summary = json.loads(newest.read_text())
    figures = summary["figures"]
    exposure = _value(prometheus.query('kafka_zk_rf1_exposure_partitions{cluster="incident"}'))
    assert exposure == {b: float(f["partitions"]) for b, f in figures["rf1_exposure"].items()}
    assert "1" in exposure and "3" in exposure  # metrics-rf1 on broker 1, audit-rf1 on stopped broker 3
    assert _value(prometheus.query('kafka_zk_leftover_bytes{cluster="incident"}')) == {
        b: float(v) for b, v in figures["leftover_bytes"].items()
    }
    # old-logs' orphan directory on broker 5; its -delete dirs on broker 2 count once the delete delay
    # since the deployment has passed (ctime cannot be backdated), which depends on how long set-up took
    assert "5" in figures["leftover_bytes"] and set(figures["leftover_bytes"]) <= {"2", "5"}
    assert figures["leftover_bytes"]["5"] > 0
    assert float(prometheus.query('kafka_zk_topic_id_trouble_topics{cluster="incident"}')[0]["value"][1]) == 2
    assert float(prometheus.query('kafka_zk_brokers_down{cluster="incident"}')[0]["value"][1]) == 2
    assert float(prometheus.query('kafka_zk_pending_deletions{cluster="incident"}')[0]["value"][1]) >= 2
    assert float(prometheus.query('kafka_zk_daily_last_run_success{cluster="incident"}')[0]["value"][1]) == 0
    stages = {
        s["metric"]["stage"]
        for s in prometheus.query('kafka_zk_daily_stage_duration_seconds{cluster="incident"}')
    }
    assert stages == {"snapshot", "inventory", "audit"}
    findings = prometheus.query('sum(kafka_zk_findings{cluster="incident"})')
    assert float(findings[0]["value"][1]) == summary["findings"]
    # exactly this run's figures: one series per (check, severity) the audit counted
    pairs = sum(len(severities) for severities in summary["by_check"].values())
    assert len(prometheus.query('kafka_zk_findings{cluster="incident"}')) == pairs


def test_the_drain_published_while_it_ran_and_when_it_ended(stack, runs) -> None:
    seen = runs["seen"]
    running = [line for line in seen if 'result="running"' in line and line.endswith(" 1")]
    assert running, seen[-20:]  # the step executor published during the run
    lefts = [
        float(line.rsplit(" ", 1)[1])
        for line in seen
        if line.startswith("kafka_zk_maintenance_partitions_left{")
    ]
    assert lefts and max(lefts) > 0 and lefts[-1] == 0, lefts  # counted down to nothing
    prometheus = stack["prometheus"]
    labels = f'cluster="maint", dag_id="{DRAIN}"'
    prometheus.wait_for(f'kafka_zk_maintenance_result{{{labels}, result="succeeded"}} == 1')
    assert float(prometheus.query(f"kafka_zk_maintenance_partitions{{{labels}}}")[0]["value"][1]) > 0
    assert float(prometheus.query(f"kafka_zk_maintenance_bytes_left{{{labels}}}")[0]["value"][1]) == 0
    assert (
        float(prometheus.query(f"kafka_zk_maintenance_throttle_bytes_per_second{{{labels}}}")[0]["value"][1])
        == 1024 * 1024
    )
    assert float(prometheus.query(f"kafka_zk_maintenance_cluster_writes{{{labels}}}")[0]["value"][1]) > 0
    assert float(prometheus.query(f"kafka_zk_maintenance_dry_run{{{labels}}}")[0]["value"][1]) == 0


def test_daily_run_sent_its_figures_through_airflows_statsd(stack, runs) -> None:
    lines = stack["statsd"].lines
    ours = [line for line in lines if line.startswith("airflow.kafka_zk_")]
    assert any(
        line.startswith("airflow.kafka_zk_rf1_exposure_partitions,cluster=incident,broker=1:")
        for line in ours
    ), ours[:20]
    assert any(line.startswith("airflow.kafka_zk_brokers_down,cluster=incident:2") for line in ours)
    assert any("airflow.kafka_zk_maintenance_result,cluster=maint" in line for line in ours)


def test_every_dashboard_query_returns_data(stack, runs) -> None:
    prometheus = stack["prometheus"]
    prometheus.wait_for(f'kafka_zk_maintenance_last_update_timestamp_seconds{{dag_id="{DRAIN}"}}')
    assert json.loads(shipped_dashboard())["panels"]
    # the fleet row names no cluster; the cluster row is the incident cluster's, the maintenance row
    # the drained cluster's (one dashboard, its variables set per row here)
    clusters = {0: "incident", 1: "incident", 2: "maint"}
    empty = []
    for row, (_, panels) in enumerate(ROWS):
        for title, _kind, _unit, targets, _width in panels:
            for expr, _legend in targets:
                query = expr.replace("$cluster", clusters[row]).replace("$dag_id", DRAIN)
                if not prometheus.query(query):
                    empty.append(f"{title}: {query}")
    assert not empty, empty


def test_screenshot_of_prometheus_graph_page(stack, runs, tmp_path) -> None:
    """Prometheus' own graph page on the runs' metrics, in headless Chromium (Grafana cannot be
    installed here): RF=1 exposure per broker, findings by severity, the drain's partitions left."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from airflow_provider_kafka_zk.testing.airflow_production import CHROMEDRIVER, CHROMIUM

    queries = [
        'kafka_zk_rf1_exposure_bytes{cluster="incident"}',
        'sum by (severity) (kafka_zk_findings{cluster="incident"})',
        f'kafka_zk_maintenance_partitions_left{{cluster="maint", dag_id="{DRAIN}"}}',
    ]
    params = {}
    for i, q in enumerate(queries):
        params.update({f"g{i}.expr": q, f"g{i}.tab": "0", f"g{i}.range_input": "5m", f"g{i}.stacked": "0"})
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,2500", "--hide-scrollbars", "--lang=en-US"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    out = tmp_path / SCREENSHOT
    try:
        driver.get(f"{stack['prometheus'].url}/graph?{urllib.parse.urlencode(params)}")
        wait = WebDriverWait(driver, 120)
        # Debian's build serves Prometheus' classic (Rickshaw) graph page
        legend = (By.CSS_SELECTOR, ".rickshaw_legend")
        wait.until(lambda d: sum(1 for e in d.find_elements(*legend) if e.text.strip()) == len(queries))
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".rickshaw_graph svg")))
        time.sleep(1)  # the charts' last paint
        driver.execute_script(
            "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);"
        )
        legends = " ".join(e.text for e in driver.find_elements(*legend))
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
    assert 'broker="1"' in legends and 'severity="critical"' in legends and f'dag_id="{DRAIN}"' in legends
    assert out.stat().st_size > 20_000
    target = os.environ.get("KAFKA_ZK_SCREENSHOTS")
    if target:
        shutil.copy(out, Path(target) / SCREENSHOT)
