"""The production-shape deployment the harness modules share, one per session
(``test_production_dags.py``: every DAG triggered three ways; ``test_production_scheduled_alerts.py``: alerts
from scheduled and manual runs, the triggerer's event loop).

The provider's wheel in a fresh virtualenv, PostgreSQL, LocalExecutor, and ``airflow api-server``,
``scheduler``, ``dag-processor`` and ``triggerer`` as four processes
(:mod:`airflow_provider_kafka_zk.testing.airflow_production`), with connections stored by ``airflow
connections add`` before the first parse. The simulated clusters live in a ZooKeeper and an sshd of
the session: ``prod`` (healthy, RF=1 topics, its simulated controller carrying out reassignments),
``incident`` (the demo's incident cluster, scheduled every minute, alerting by e-mail to an SMTP
server on loopback) and ``healthy`` (on a ZooKeeper of its own, stopped and started again in the
outage test; its plans wait ``approval_timeout_s = 20`` for a decision: the time-out test of
``test_production_approval.py``) and ``approval`` (RF=1 topics, no controller: plans that are
rejected; its ``approvers`` name the admin, told by e-mail that a plan waits). The DAGs folder holds
the shipped DAG files and the tests' own (``tests/integration/production_dags/``).

What runs besides the triggered runs starts in :func:`alert_scenarios`, which the campaign asks for
first, so it runs concurrently with it: the scheduler's runs of the failing ``incident`` daily DAG
(paused after the second) and a failing KRaft readiness run.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kafka_zk.testing.airflow_production import (
    AirflowProduction,
    PostgresServer,
    ProductionVenv,
    TriggerFormBrowser,
)
from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import kraft_ready_cluster, maintenance_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.testing.zk_proxy import ZooKeeperProxy
from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]
HOSTS = tuple(f"127.0.0.{i}" for i in range(2, 8))  # the scenarios' brokers 0-5
DAILY = "kafka_zk_daily_hygiene_{}"
KRAFT = "kafka_zk_kraft_migration_readiness"
ONCALL = "oncall@example.com"
APPROVERS = "kafka-approvers@example.com"
SCHEDULED_RUNS = 2
"""Scheduled runs of the incident cluster's daily DAG: the first pages, the second must not."""
NEVER = "0 0 29 2 *"
"""A cron whose last fire time (29 Feb 2024) is before the daily DAGs' start date (1 Jan 2026): with
catchup off, unpausing such a DAG schedules nothing before 2028, so the triggered runs of ``prod``
and ``healthy`` have no scheduled run competing with them (their DAGs allow one active run)."""
ALERT_TIMEOUT = 1500
HEALTHY_APPROVAL_TIMEOUT_S = 20
LATE = "late@example.com"
SLOW_DEADLINE_S = 20


@dataclass
class Deployment:
    airflow: AirflowProduction
    clusters: dict[str, DeployedCluster]
    outage_zookeeper: ZooKeeperServer
    artefacts: Path
    prod_assignment: dict[tuple[str, int], tuple[int, ...]]
    smtp: SmtpSink
    timings: dict[str, float] = field(default_factory=dict)

    def assignment(self, cluster: str) -> dict[tuple[str, int], tuple[int, ...]]:
        """The cluster's replica assignment now ((topic, partition) -> replicas)."""
        return assignment(self.clusters[cluster])


def cluster_table(name: str, deployed: DeployedCluster, artefacts: Path, **extra: str) -> str:
    hosts = ", ".join(f'"{b}" = "{HOSTS[b]}"' for b in sorted(deployed.cluster.brokers))
    lines = [
        f"[clusters.{name}]",
        f'kafka_zookeeper_conn_id = "kafka_zk_{name}"',
        'ssh_conn_id = "kafka_zk_ssh"',
        f'base_path = "{artefacts}"',
        f'server_properties_path = "{deployed.root}/broker-{{broker_id}}/config/server.properties"',
        f"broker_hosts = {{ {hosts} }}",
        "retry_delay_s = 5",
        *(f"{k} = {v}" for k, v in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def dags_folder(work: Path) -> Path:
    """The DAGs folder of the deployment: the shipped DAG files (``dags/``) and the tests' own DAGs
    (``tests/integration/production_dags/``: the approval race test's), copied side by side."""
    folder = work / "dags"
    shutil.copytree(REPO / "dags", folder)
    for path in sorted((REPO / "tests" / "integration" / "production_dags").glob("*.py")):
        shutil.copy(path, folder / path.name)
    return folder


def kraft_settings(work: Path) -> dict[str, str]:
    """The KRaft migration's keys of the ``kraft`` cluster (its controller host under ``work``)."""
    controller = work / "kraft-controller"
    return {
        "broker_restart_command": '"sudo systemctl restart kafka"',
        "kraft_format_command": '"/opt/kafka/bin/kafka-storage.sh format --config {config} --cluster-id {cluster_id}"',
        "kraft_controller_start_command": '"sudo systemctl start kafka-kraft"',
        "kraft_controller_stop_command": '"sudo systemctl stop kafka-kraft"',
        "kraft_controller_restart_command": '"sudo systemctl restart kafka-kraft"',
        "kraft_controllers": f'[{{ node_id = 3000, host = "{HOSTS[4]}", config_path = "{controller}/config/controller.properties", '
        f'log_dir = "{controller}/data" }}]',
    }


def slow_cluster_table(artefacts: Path) -> str:
    """Cluster ``slow`` (``test_production_deadline.py``): its ZooKeeper never answers, its daily run
    retries its first tasks for minutes, past its deadline, and the late run pages ``LATE``."""
    return "\n".join(
        [
            "[clusters.slow]",
            'kafka_zookeeper_conn_id = "kafka_zk_slow"',
            'ssh_conn_id = "kafka_zk_ssh"',
            f'base_path = "{artefacts}"',
            'engine = "in-process"',
            f'schedule = "{NEVER}"',
            "retries = 30",
            "retry_delay_s = 2",
            "max_retry_delay_s = 3",
            "deletion_check = false",
            # no deadline_s: the scheduler's RecentRunsDeadline, whose default holds until 3 runs succeeded
            f"deadline_default_s = {SLOW_DEADLINE_S}",
            f'notify = {{ kind = "smtp", to = ["{LATE}"], smtp_conn_id = "smtp_oncall" }}',
        ]
    )


def assignment(deployed: DeployedCluster) -> dict[tuple[str, int], tuple[int, ...]]:
    return {
        (t, p): tuple(partition.replicas)
        for t, topic in deployed.cluster.topics.items()
        for p, partition in topic.partitions.items()
    }


def _zookeeper_connection(deployed: DeployedCluster) -> dict[str, Any]:
    return {
        "conn_type": "kafkazookeeper",
        "host": deployed.zookeeper_connect.rsplit("/", 1)[0],
        "port": 2181,
        "extra": {
            "chroot": "/" + deployed.zookeeper_connect.rsplit("/", 1)[1],
            "connect_timeout": 5,
            "session_timeout": 10,
        },
    }


@pytest.fixture(scope="session")
def deployment(tmp_path_factory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("production")
    timings: dict[str, float] = {}
    started = time.monotonic()
    reuse = os.environ.get("KAFKA_ZK_PRODUCTION_VENV")
    venv = ProductionVenv(Path(reuse)) if reuse else ProductionVenv.build(work)
    timings["venv (wheel, venv, pip install)"] = time.monotonic() - started
    artefacts = work / "artefacts"
    with (
        SmtpSink() as smtp,
        ZooKeeperServer(work / "zookeeper") as zookeeper,
        ZooKeeperServer(work / "zookeeper-outage") as outage_zookeeper,
        SshServer(HOSTS, work_dir=work / "sshd") as sshd,
        PostgresServer() as postgres,
        DeployedCluster(
            maintenance_cluster(name="prod"), zookeeper.connect_string, "/kafka_prod", work / "prod-hosts"
        ) as prod,
        DeployedCluster(
            incident_cluster(name="incident"),
            zookeeper.connect_string,
            "/kafka_incident",
            work / "incident-hosts",
        ) as incident,
        DeployedCluster(
            healthy_cluster(name="healthy"),
            outage_zookeeper.connect_string,
            "/kafka_healthy",
            work / "healthy-hosts",
        ) as healthy,
        DeployedCluster(
            maintenance_cluster(name="approval"),
            zookeeper.connect_string,
            "/kafka_approval",
            work / "approval-hosts",
        ) as approval,
        DeployedCluster(
            kraft_ready_cluster(name="kraft"), zookeeper.connect_string, "/kafka_kraft", work / "kraft-hosts"
        ) as kraft,
        ClusterRuntime(prod, restart_dir=work / "prod-restarts", reassignments=True),
        # a ZooKeeper that stopped answering: the daily run of cluster "slow" retries past its deadline
        ZooKeeperProxy(zookeeper.connect_string, stalled=True) as stalled_zookeeper,
    ):
        clusters = {
            "prod": prod,
            "incident": incident,
            "healthy": healthy,
            "approval": approval,
            "kraft": kraft,
        }
        clusters_file = work / "kafka_zk_clusters.toml"
        clusters_file.write_text(
            cluster_table("prod", prod, artefacts, engine='"spark"', schedule=f'"{NEVER}"')
            # the failing daily run of issue 24: scheduled, paging by e-mail, its deletions check
            # waiting in the triggerer (45 s: two looks) before it names the blocked deletion
            + cluster_table(
                "incident",
                incident,
                artefacts,
                engine='"in-process"',
                schedule='"* * * * *"',
                deletion_wait_s="45",
                notify=f'{{ kind = "smtp", to = ["{ONCALL}"], smtp_conn_id = "smtp_oncall" }}',
            )
            + cluster_table(
                "healthy",
                healthy,
                artefacts,
                engine='"in-process"',
                schedule=f'"{NEVER}"',
                approval_timeout_s=str(HEALTHY_APPROVAL_TIMEOUT_S),
            )
            + cluster_table(
                "approval",
                approval,
                artefacts,
                engine='"in-process"',
                schedule=f'"{NEVER}"',
                approvers='["admin"]',
                # the approvers are told a plan waits (test_production_approval_race.py reads it)
                notify=f'{{ kind = "smtp", to = ["{APPROVERS}"], smtp_conn_id = "smtp_oncall" }}',
            )
            # the KRaft migration's runs (a 3.9 cluster ready to migrate; its controller on HOSTS[4])
            + cluster_table(
                "kraft",
                kraft,
                artefacts,
                engine='"in-process"',
                schedule=f'"{NEVER}"',
                **kraft_settings(work),
            )
            + slow_cluster_table(artefacts)
        )
        connections = {f"kafka_zk_{name}": _zookeeper_connection(d) for name, d in clusters.items()}
        connections["kafka_zk_slow"] = {
            "conn_type": "kafkazookeeper",
            "host": stalled_zookeeper.connect_string,
            "port": 2181,
            "extra": {"chroot": "/kafka_slow", "connect_timeout": 5, "session_timeout": 10},
        }
        connections["kafka_zk_ssh"] = sshd.airflow_connection_fields(HOSTS[0], conn_timeout=5)
        connections["spark_default"] = {"conn_type": "spark", "host": "local[1]"}
        connections["smtp_oncall"] = smtp.connection()
        airflow = AirflowProduction(
            venv,
            postgres,
            work / "airflow-home",
            dags_folder=dags_folder(work),
            extra_env={
                "KAFKA_ZK_CLUSTERS_FILE": str(clusters_file),
                "PYSPARK_PYTHON": str(venv.python),
                "SPARK_LOCAL_IP": "127.0.0.1",
                # as README "Deploying" sets it: the deletion check and the election wait in the triggerer
                "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            },
            connections=connections,
            niceness={"triggerer": -10},
        )
        started = time.monotonic()
        with airflow:
            timings["airflow start (migrate, connections, reserialize, services healthy)"] = (
                time.monotonic() - started
            )
            timings.update({f"  {k}": v for k, v in airflow.started_s.items()})
            yield Deployment(airflow, clusters, outage_zookeeper, artefacts, assignment(prod), smtp, timings)


@dataclass
class AlertScenarios:
    """The runs that page, started early: :attr:`scheduled` (the incident daily DAG's scheduled run
    ids, filled in as the scheduler makes them) and :attr:`maintenance_run` (a KRaft readiness run
    that fails while blockers remain)."""

    airflow: AirflowProduction
    scheduled_dag: str
    maintenance_run: str
    started: float
    scheduled: list[str] = field(default_factory=list)
    states_seen: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    error: str = ""
    _done: threading.Event = field(default_factory=threading.Event)

    def watch(self, stop: threading.Event) -> None:
        """Pause the scheduled DAG as soon as its :data:`SCHEDULED_RUNS`-th run ended (runs follow
        one another: one active run; a paused DAG's runs are not scheduled, so not sooner), and note
        the task states seen. A further run the scheduler may have queued meanwhile does not start."""
        try:
            while not stop.is_set():
                runs = self.airflow.runs(self.scheduled_dag, "scheduled")[:SCHEDULED_RUNS]
                for run in runs:
                    seen = self.states_seen.setdefault(run["dag_run_id"], {})
                    for ti in self.airflow.task_instances(self.scheduled_dag, run["dag_run_id"]):
                        seen.setdefault(ti["task_id"], set()).add(str(ti["state"]))
                ended = [r for r in runs if r["state"] in ("success", "failed")]
                if len(ended) == SCHEDULED_RUNS:
                    self.airflow.pause(self.scheduled_dag)
                    self.scheduled = [r["dag_run_id"] for r in runs]
                    return
                stop.wait(1)
        except Exception as exc:  # the tests report it
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def wait(self) -> list[dict[str, Any]]:
        """The scheduled runs once both ended (oldest first)."""
        assert self._done.wait(ALERT_TIMEOUT), (
            f"{self.scheduled_dag}: {SCHEDULED_RUNS} scheduled runs not done"
        )
        assert not self.error, self.error
        return [self.airflow.run(self.scheduled_dag, run_id) for run_id in self.scheduled]


@pytest.fixture(scope="session")
def alert_scenarios(deployment: Deployment) -> Iterator[AlertScenarios]:
    """Unpause the incident cluster's daily DAG (the scheduler runs it at once: its cron is every
    minute) and trigger a KRaft readiness run of that cluster that fails on its blockers."""
    airflow = deployment.airflow
    scheduled_dag = DAILY.format("incident")
    airflow.unpause(KRAFT)
    airflow.unpause(scheduled_dag)
    started = time.monotonic()
    run_id = airflow.trigger_rest(KRAFT, {"cluster": "incident", "fail_on_blockers": True})
    scenarios = AlertScenarios(airflow, scheduled_dag, run_id, started)
    stop = threading.Event()
    watcher = threading.Thread(target=scenarios.watch, args=(stop,), name="scheduled-runs", daemon=True)
    watcher.start()
    yield scenarios
    stop.set()
    watcher.join(30)


@pytest.fixture(scope="session")
def production_browser(deployment: Deployment) -> Iterator[TriggerFormBrowser]:
    """Headless Chromium logged in to the deployment's UI as its admin (the trigger forms of
    ``test_production_dags.py``, the approval page of ``test_production_approval.py``)."""
    with TriggerFormBrowser(deployment.airflow) as browser:
        yield browser


@pytest.fixture
def opt_out_of_approval(tmp_path_factory, monkeypatch):
    """``opt_out_of_approval(name, conn_id, **settings)``: a cluster file (``$KAFKA_ZK_CLUSTERS_FILE``)
    in which the cluster behind ``conn_id`` -- its ensemble and chroot, as the approval rule matches
    it (issue 31) -- is the entry ``name`` with ``require_approval = false``: automation with its own
    review, whose real writes go ahead without a person. Entries accumulate over the test; a
    ``settings`` value is written as TOML as given (``require_approval="true"`` makes one that
    requires approval). Returns the file."""
    clusters = tmp_path_factory.mktemp("clusters") / "clusters.toml"
    entries: dict[str, dict[str, str]] = {}

    def opt_out(name: str, conn_id: str | None = None, **settings: str) -> Path:
        entry = {"require_approval": "false", **settings}
        if conn_id is not None:
            entry["kafka_zookeeper_conn_id"] = f'"{conn_id}"'
        entries[name] = entry
        clusters.write_text(
            "".join(
                f"[clusters.{n}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items())
                for n, e in entries.items()
            )
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        return clusters

    return opt_out
