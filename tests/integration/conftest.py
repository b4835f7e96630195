"""The production-shape deployment, once per session, for every ``test_production_*.py`` module.

The provider's wheel in a fresh virtualenv, PostgreSQL, LocalExecutor, and ``airflow api-server``,
``scheduler``, ``dag-processor`` and ``triggerer`` as four processes
(:mod:`airflow_provider_kafka_zk.testing.airflow_production`), with the simulated clusters in a
ZooKeeper and an sshd of their own:

* ``prod`` (healthy, RF=1 topics; its simulated controller carries out reassignments in a thread);
* ``incident`` (the demo's incident cluster);
* ``healthy`` (on a ZooKeeper of its own, stopped and started again in the outage test; its plans
  wait ``approval_timeout_s = 20`` for a decision: the time-out test);
* ``approval`` (RF=1 topics, no controller: plans that are rejected; its ``approvers`` name the admin).

Only what a test module asks for is started: modules that do not use ``production`` pay nothing.
``KAFKA_ZK_PRODUCTION_VENV=<dir>`` reuses a venv built before (for iterating on the tests, never in CI).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOSTS = tuple(f"127.0.0.{i}" for i in range(2, 8))  # the scenarios' brokers 0-5
HEALTHY_APPROVAL_TIMEOUT_S = 20


@dataclass
class Deployment:
    airflow: object  # AirflowProduction
    clusters: dict[str, object]  # name -> DeployedCluster
    outage_zookeeper: object  # ZooKeeperServer
    artefacts: Path
    prod_assignment: dict[tuple[str, int], tuple[int, ...]]
    timings: dict[str, float] = field(default_factory=dict)


def assignment_of(deployed) -> dict[tuple[str, int], tuple[int, ...]]:
    """Every partition's replicas in the simulated cluster's model."""
    return {
        (t, p): tuple(partition.replicas)
        for t, topic in deployed.cluster.topics.items()
        for p, partition in topic.partitions.items()
    }


def _cluster_table(name: str, deployed, artefacts: Path, **extra: str) -> str:
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


@pytest.fixture(scope="session")
def production(tmp_path_factory) -> Iterator[Deployment]:
    from airflow_provider_kafka_zk.testing.airflow_production import (
        AirflowProduction,
        PostgresServer,
        ProductionVenv,
    )
    from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster, incident_cluster
    from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
    from airflow_provider_kafka_zk.testing.simulator.scenarios import maintenance_cluster
    from airflow_provider_kafka_zk.testing.sshd import SshServer
    from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

    work = tmp_path_factory.mktemp("production")
    timings: dict[str, float] = {}
    started = time.monotonic()
    reuse = os.environ.get("KAFKA_ZK_PRODUCTION_VENV")
    venv = ProductionVenv(Path(reuse)) if reuse else ProductionVenv.build(work)
    timings["venv (wheel, venv, pip install)"] = time.monotonic() - started
    artefacts = work / "artefacts"
    with (
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
        ClusterRuntime(prod, restart_dir=work / "prod-restarts", reassignments=True),
    ):
        clusters = {"prod": prod, "incident": incident, "healthy": healthy, "approval": approval}
        clusters_file = work / "kafka_zk_clusters.toml"
        clusters_file.write_text(
            _cluster_table("prod", prod, artefacts, engine='"spark"')
            + _cluster_table("incident", incident, artefacts, engine='"in-process"')
            + _cluster_table(
                "healthy",
                healthy,
                artefacts,
                engine='"in-process"',
                approval_timeout_s=str(HEALTHY_APPROVAL_TIMEOUT_S),
            )
            + _cluster_table("approval", approval, artefacts, engine='"in-process"', approvers='["admin"]')
        )
        airflow = AirflowProduction(
            venv,
            postgres,
            work / "airflow-home",
            dags_folder=REPO / "dags",
            extra_env={
                "KAFKA_ZK_CLUSTERS_FILE": str(clusters_file),
                "PYSPARK_PYTHON": str(venv.python),
                "SPARK_LOCAL_IP": "127.0.0.1",
                # runs come from triggers only: no scheduled run of a daily DAG competes with them
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            },
        )
        started = time.monotonic()
        with airflow:
            timings["airflow start (migrate, reserialize, services healthy)"] = time.monotonic() - started
            timings.update({f"  {k}": v for k, v in airflow.started_s.items()})
            started = time.monotonic()
            for name, deployed in clusters.items():
                airflow.add_connection(
                    f"kafka_zk_{name}",
                    {
                        "conn_type": "kafkazookeeper",
                        "host": deployed.zookeeper_connect.rsplit("/", 1)[0],
                        "port": 2181,
                        "extra": {
                            "chroot": "/" + deployed.zookeeper_connect.rsplit("/", 1)[1],
                            "connect_timeout": 5,
                            "session_timeout": 10,
                        },
                    },
                )
            airflow.add_connection("kafka_zk_ssh", sshd.airflow_connection_fields(HOSTS[0], conn_timeout=5))
            airflow.add_connection("spark_default", {"conn_type": "spark", "host": "local[1]"})
            timings[f"connections add ({len(clusters) + 2})"] = time.monotonic() - started
            yield Deployment(airflow, clusters, outage_zookeeper, artefacts, assignment_of(prod), timings)


@pytest.fixture(scope="session")
def production_browser(production):
    """Headless Chromium logged in to the deployment's UI as its admin."""
    from airflow_provider_kafka_zk.testing.airflow_production import TriggerFormBrowser

    with TriggerFormBrowser(production.airflow) as browser:
        yield browser
