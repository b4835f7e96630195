"""The provider as users install it: a wheel built from this tree, installed apart from the checkout,
carries the DAG factories and the Spark applications, schedules nothing without a cluster file, and
registers its ``[kafka_zk]`` config section."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
_IGNORED = shutil.ignore_patterns(
    ".git", ".venv", ".demo", ".airflow", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*_cache"
)

PROBE = textwrap.dedent(
    """
    import json, sys, zipfile
    import airflow_provider_kafka_zk
    from airflow.dag_processing.dagbag import DagBag
    from airflow_provider_kafka_zk.spark_jobs.package import application_path, build_package_zip

    out = {"package": airflow_provider_kafka_zk.__file__}
    out["apps"] = [application_path(n) for n in ("kafka_zk_audit.py", "kafka_zk_log_scan.py")]
    out["zip"] = sorted(zipfile.ZipFile(build_package_zip(sys.argv[1])).namelist())
    bag = DagBag(dag_folder=sys.argv[2])
    out["errors"] = {k: str(v) for k, v in bag.import_errors.items()}
    out["dags"] = {d: str(bag.dags[d].schedule) for d in sorted(bag.dags)}
    print("PROBE " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a clean copy of this tree, installed with ``pip --target`` (no deps)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=_IGNORED)
    subprocess.run(
        [str(VENV_BIN / "pip"), "wheel", "--no-deps", "-q", str(source), "-w", str(work / "dist")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = (work / "dist").glob("airflow_provider_kafka_zk-*.whl")
    target = work / "site"
    subprocess.run(
        [str(VENV_BIN / "pip"), "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return target


def _run(installed: Path, tmp_path: Path, dags: Path, extra_env: dict[str, str] | None = None) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(installed),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        **(extra_env or {}),
    }
    env.pop("KAFKA_ZK_CLUSTERS_FILE", None)
    (tmp_path / "probe.py").write_text(PROBE)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "zip"), str(dags)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("PROBE ")]
    return json.loads(line.removeprefix("PROBE "))


def test_the_wheel_holds_the_dags_and_the_spark_apps_and_runs_without_the_checkout(installed, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    for name in ("kafka_zk_daily_hygiene.py", "kafka_zk_pre_maintenance_drain.py"):
        shutil.copy(REPO / "dags" / name, dags / name)  # the thin files users copy
    probe = _run(installed, tmp_path, dags)
    assert Path(probe["package"]).is_relative_to(installed)
    assert all(Path(app).is_relative_to(installed) and Path(app).is_file() for app in probe["apps"])
    assert "airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py" in probe["zip"]
    assert "airflow_provider_kafka_zk/kafka/model.py" in probe["zip"]
    assert not [n for n in probe["zip"] if "/dags/" in n or "/operators/" in n or "/testing/" in n]
    assert probe["errors"] == {}
    # no cluster file: the manual drain exists (unscheduled), no daily DAG, no demo cluster
    assert probe["dags"] == {"kafka_zk_pre_maintenance_drain": "None"}

    (dags / "kafka_zk_clusters.toml").write_text('[clusters.eu1]\nschedule = "@hourly"\n')
    probe = _run(installed, tmp_path, dags)
    assert probe["errors"] == {}
    assert probe["dags"] == {
        "kafka_zk_daily_hygiene_eu1": "@hourly",
        "kafka_zk_pre_maintenance_drain": "None",
    }


def test_one_file_with_every_factory_and_a_configured_cluster_file(installed, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "kafka_zk.py").write_text(
        "from airflow_provider_kafka_zk.dags import create_all_dags\n\nglobals().update(create_all_dags())\n"
    )
    clusters = tmp_path / "elsewhere.toml"
    clusters.write_text("[clusters.prod]\n")
    probe = _run(installed, tmp_path, dags, {"AIRFLOW__KAFKA_ZK__CLUSTERS_FILE": str(clusters)})
    assert probe["errors"] == {}
    assert set(probe["dags"]) == {
        "kafka_zk_daily_hygiene_prod",
        "kafka_zk_pre_maintenance_drain",
        "kafka_zk_post_maintenance",
        "kafka_zk_topic_id_repair",
        "kafka_zk_deletion_cleanup",
        "kafka_zk_pre_restart_check",
        "kafka_zk_kraft_migration_readiness",
        "kafka_zk_kraft_migration",
        "kafka_zk_test_alert",
        "kafka_zk_undo",
    }


def test_airflow_config_lists_the_provider_section(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(installed), "AIRFLOW_HOME": str(tmp_path)}
    listed = subprocess.run(
        [str(VENV_BIN / "airflow"), "config", "list", "--section", "kafka_zk", "--include-descriptions"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    for option in (
        "clusters_file",
        "artefacts_base",
        "artefacts_conn_id",
        "default_kafka_zookeeper_conn_id",
        "default_ssh_conn_id",
        "default_fail_on",
    ):
        assert f"{option} =" in listed.stdout
    value = subprocess.run(
        [str(VENV_BIN / "airflow"), "config", "get-value", "kafka_zk", "default_fail_on"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert value.stdout.strip() == "critical"


def test_the_wheel_carries_no_tests_and_no_checkout_paths(installed):
    files = [p.relative_to(installed).as_posix() for p in installed.rglob("*.py")]
    assert not [f for f in files if f.startswith("tests/") or f.startswith("dags/")]
    sources = "\n".join(
        (installed / f).read_text() for f in files if f.startswith("airflow_provider_kafka_zk/")
    )
    assert 'parents[1] / "dags"' not in sources and "spark_apps" not in sources


@pytest.fixture(scope="module")
def deployed_demo(zookeeper_server, tmp_path_factory):
    """The demo's incident cluster (six brokers, broker 3 stopped, clickstream's ids diverged)."""
    from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
    from airflow_provider_kafka_zk.testing.sshd import SshServer

    addresses = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
    with (
        SshServer(addresses, work_dir=tmp_path_factory.mktemp("wheel-sshd")) as sshd,
        DeployedCluster(
            incident_cluster(name="demo"),
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_wheel_demo_"),
            tmp_path_factory.mktemp("wheel-hosts"),
        ) as deployed,
    ):
        yield deployed, sshd, addresses


def test_the_installed_wheel_runs_the_daily_audit_on_spark(
    installed, deployed_demo, zookeeper_server, airflow_home, tmp_path
):
    deployed, sshd, addresses = deployed_demo
    env = {
        **os.environ,
        "PYTHONPATH": str(installed),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_KAFKA_ZK_DEMO": json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": deployed.chroot},
            }
        ),
        "AIRFLOW_CONN_KAFKA_ZK_DEMO_SSH": json.dumps(
            sshd.airflow_connection_fields(addresses[0], conn_timeout=5)
        ),
    }
    env.pop("KAFKA_ZK_CLUSTERS_FILE", None)
    providers = subprocess.run(
        [str(VENV_BIN / "airflow"), "providers", "list", "-o", "json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert providers.returncode == 0, providers.stderr[-3000:]
    assert "airflow-provider-kafka-zk" in {p["package_name"] for p in json.loads(providers.stdout)}

    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(REPO / "dags" / "kafka_zk_daily_hygiene.py", dags)  # the thin file, as documented
    base = tmp_path / "artefacts"
    hosts = ", ".join(f'"{b}" = "{a}"' for b, a in enumerate(addresses))
    (dags / "kafka_zk_clusters.toml").write_text(
        "[clusters.demo]\n"
        f'base_path = "{base}"\n'
        f'server_properties_path = "{deployed.root}/broker-{{broker_id}}/config/server.properties"\n'
        f"broker_hosts = {{ {hosts} }}\n"
        "retries = 0\n"
    )
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", "kafka_zk_daily_hygiene_demo"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    (run,) = sorted((base / "demo" / "findings").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["engine"] == "spark", output[-3000:]
    assert (
        str(installed / "airflow_provider_kafka_zk" / "spark_jobs" / "apps" / "kafka_zk_audit.py") in output
    )
    assert "topic-id-mismatch" in summary["by_check"]
    assert (run / "report.html").is_file()
    assert result.returncode == 1  # the gate fails on the incident cluster, as the demo shows


def test_the_wheel_registers_the_plugin_and_carries_the_alert_templates(installed, tmp_path):
    (dist,) = installed.glob("airflow_provider_kafka_zk-*.dist-info")
    entry_points = (dist / "entry_points.txt").read_text()
    assert "[airflow.plugins]" in entry_points
    assert "kafka_zk = airflow_provider_kafka_zk.plugins:KafkaZkPlugin" in entry_points
    templates = installed / "airflow_provider_kafka_zk" / "templates"
    assert {"alert.html.j2", "alert.txt.j2", "report.html.j2"} <= {p.name for p in templates.iterdir()}
    # the Grafana dashboard, as `python -m airflow_provider_kafka_zk.metrics dashboard` prints it
    assert (installed / "airflow_provider_kafka_zk" / "metrics" / "grafana_dashboard.json").is_file()
    env = {**os.environ, "PYTHONPATH": str(installed), "AIRFLOW_HOME": str(tmp_path)}
    listed = subprocess.run(
        [str(VENV_BIN / "airflow"), "plugins", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    text = listed.stdout
    plugins = {
        p["name"]: p for p in json.loads(text if text.startswith("[") else text[text.index("\n[") + 1 :])
    }
    assert "/kafka-zk" in json.dumps(plugins["kafka_zk"]["fastapi_apps"])
