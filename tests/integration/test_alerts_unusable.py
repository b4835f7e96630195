"""A ``notify`` that cannot deliver is an error a person sees, never alerts lost (issue 24).

At parse time the daily DAG file raises, so Airflow records an import error for it (the UI's "Dag
Import Errors", ``/api/v2/importErrors``, ``airflow dags list-import-errors``: one table): here
``airflow dags reserialize`` parses the folder as the dag-processor does and writes that table.
At run time (parse check at level ``providers``, or a connection broken after the parse) the run's
``notify_check`` fails the run even on a clean cluster, and an SMTP server that cannot be reached
fails the ``alert`` task, naming the channel, while the channels that worked are recorded.

The slack provider is installed in the test environment; "not installed" is made real for the
processes of one test by a ``sitecustomize`` that makes ``import airflow.providers.slack.hooks``
fail as it does when the distribution is absent (``sys.modules[name] = None``: ModuleNotFoundError).
The distribution's metadata stays (Airflow's providers manager reads it), so this is the hook that
cannot be imported, which is what the check looks for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing.alert_sinks import SmtpSink, WebhookSink
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
HOSTS = {str(b): a for b, a in enumerate(ADDRESSES)}


def _home(tmp_path: Path, clusters: str, connections: dict, extra_env: dict | None = None) -> dict:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "kafka_zk_daily_hygiene.py").write_text((REPO / "dags" / "kafka_zk_daily_hygiene.py").read_text())
    (tmp_path / "clusters.toml").write_text(clusters)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "KAFKA_ZK_CLUSTERS_FILE": str(tmp_path / "clusters.toml"),
        **{f"AIRFLOW_CONN_{k.upper()}": json.dumps(v) for k, v in connections.items()},
        **(extra_env or {}),
    }
    done = _airflow(env, tmp_path, "db", "migrate")
    assert done.returncode == 0, done.stderr[-3000:]
    return {"env": env, "work": tmp_path}


def _airflow(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=900
    )


def _import_errors(home: dict) -> dict[str, str]:
    done = _airflow(home["env"], home["work"], "dags", "reserialize")
    assert done.returncode == 0, done.stderr[-3000:]
    listed = _airflow(home["env"], home["work"], "dags", "list-import-errors", "-o", "json")
    assert listed.returncode in (0, 1), listed.stderr[-3000:]
    text = (
        listed.stdout[listed.stdout.find("\n[") + 1 :]
        if not listed.stdout.startswith("[{")
        else listed.stdout
    )
    return {Path(e["filepath"]).name: e["error"] for e in json.loads(text or "[]")}


def _cluster(name: str, notify: str, base: Path) -> str:
    return f'[clusters."{name}"]\nengine = "in-process"\nbase_path = "{base}"\nnotify = {notify}\n'


def test_a_missing_slack_provider_is_an_import_error(tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['airflow.providers.slack.hooks'] = None\n"
    )
    with WebhookSink() as slack:
        home = _home(
            tmp_path,
            _cluster("eu1", '{ kind = "slack", slack_webhook_conn_id = "slack_oncall" }', tmp_path / "a"),
            {"slack_oncall": slack.connection()},
            {"PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])},
        )
        errors = _import_errors(home)
    message = errors["kafka_zk_daily_hygiene.py"]
    assert "NotifyUnusableError" in message
    assert (
        "cluster eu1: notify kind 'slack' needs apache-airflow-providers-slack, which is not installed"
        in message
    )
    listed = _airflow(home["env"], home["work"], "dags", "list", "-o", "json")
    assert "kafka_zk_daily_hygiene_eu1" not in listed.stdout  # not scheduled until fixed


def test_the_same_cluster_file_with_the_provider_imports_cleanly(tmp_path):
    with WebhookSink() as slack:
        home = _home(
            tmp_path,
            _cluster("eu1", '{ kind = "slack", slack_webhook_conn_id = "slack_oncall" }', tmp_path / "a"),
            {"slack_oncall": slack.connection()},
        )
        assert _import_errors(home) == {}


def test_a_connection_stored_in_the_metadata_db_is_seen_by_airflow_dags_reserialize(tmp_path):
    """``airflow connections add`` stores it in the DB; ``airflow dags reserialize`` (README
    "Deploying") parses in a plain CLI process, where the Task SDK reaches no DB: the check asks
    Airflow's own secrets chain there, so the file imports cleanly (and still fails once it is gone)."""
    with SmtpSink() as smtp:
        home = _home(
            tmp_path,
            _cluster(
                "eu1",
                '{ kind = "smtp", to = "oncall@example.com", smtp_conn_id = "smtp_db" }',
                tmp_path / "a",
            ),
            {},
        )
        fields = json.dumps(smtp.connection())
        added = _airflow(home["env"], home["work"], "connections", "add", "smtp_db", "--conn-json", fields)
        assert added.returncode == 0, added.stderr[-3000:]
        assert _import_errors(home) == {}
        listed = _airflow(home["env"], home["work"], "dags", "list", "-o", "json")
        assert "kafka_zk_daily_hygiene_eu1" in listed.stdout
        _airflow(home["env"], home["work"], "connections", "delete", "smtp_db")
        errors = _import_errors(home)
    assert "cluster eu1: smtp connection 'smtp_db' does not exist" in errors["kafka_zk_daily_hygiene.py"]


def test_an_smtp_connection_without_from_email_is_an_import_error(tmp_path):
    with SmtpSink() as smtp:
        home = _home(
            tmp_path,
            _cluster(
                "eu1",
                '{ kind = "smtp", to = "oncall@example.com", smtp_conn_id = "smtp_oncall" }',
                tmp_path / "a",
            )
            + _cluster(
                "eu2",
                '{ kind = "smtp", to = "oncall@example.com", smtp_conn_id = "smtp_gone" }',
                tmp_path / "b",
            ),
            {"smtp_oncall": smtp.connection(from_email=None)},
        )
        errors = _import_errors(home)
    message = errors["kafka_zk_daily_hygiene.py"]
    assert "cluster eu1: smtp connection 'smtp_oncall' has no from_email extra" in message
    assert "cluster eu2: smtp connection 'smtp_gone' does not exist" in message


def test_a_malformed_notify_names_the_key(tmp_path):
    home = _home(tmp_path, _cluster("eu1", '{ kind = "smtp" }', tmp_path / "a"), {})
    assert (
        "clusters.eu1.notify.to is required for kind 'smtp'"
        in _import_errors(home)["kafka_zk_daily_hygiene.py"]
    )


# ---------------------------------------------------------------------------------------------------
# At run time
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def deployed(zookeeper_server, tmp_path_factory):
    with (
        DeployedCluster(
            healthy_cluster(name="healthy"),
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_alerts_healthy_"),
            tmp_path_factory.mktemp("healthy-hosts"),
        ) as healthy,
        DeployedCluster(
            incident_cluster(name="incident"),
            zookeeper_server.connect_string,
            zookeeper_server.new_chroot("/kafka_alerts_incident_"),
            tmp_path_factory.mktemp("incident-hosts"),
        ) as incident,
    ):
        yield {"healthy": healthy, "incident": incident}


def _runtime_home(tmp_path, name, cluster, zookeeper_server, sshd, notify, connections, level="connections"):
    text = _cluster(name, notify, tmp_path / "artefacts") + "\n".join(
        [
            'kafka_zookeeper_conn_id = "zk_run"',
            'ssh_conn_id = "run_ssh"',
            "retries = 0",
            "connect_timeout = 3",
            f'server_properties_path = "{cluster.root}/broker-{{broker_id}}/config/server.properties"',
            "broker_hosts = { " + ", ".join(f'"{b}" = "{h}"' for b, h in HOSTS.items()) + " }",
        ]
    )
    return _home(
        tmp_path,
        text + "\n",
        {
            "zk_run": {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": cluster.chroot},
            },
            "run_ssh": sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5),
            **connections,
        },
        {"AIRFLOW__KAFKA_ZK__NOTIFY_PARSE_CHECK": level},
    )


def test_notify_check_fails_a_clean_run_whose_alerts_cannot_be_delivered(
    tmp_path, deployed, zookeeper_server, sshd
):
    with SmtpSink() as smtp:
        home = _runtime_home(
            tmp_path,
            "healthy",
            deployed["healthy"],
            zookeeper_server,
            sshd,
            '{ kind = "smtp", to = "oncall@example.com", smtp_conn_id = "smtp_oncall" }',
            {"smtp_oncall": smtp.connection(from_email=None)},
            level="providers",  # the file imports: the connection is checked by the run
        )
        result = _airflow(home["env"], home["work"], "dags", "test", "kafka_zk_daily_hygiene_healthy")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output[-3000:]
        assert "Alerts of cluster healthy cannot be delivered, so an incident would go unseen" in output
        assert "has no from_email extra" in output
        assert "Gate passed" in output  # the cluster itself is clean: only the alert path failed
        assert smtp.messages == []


def test_an_unreachable_smtp_server_fails_the_alert_and_the_next_run_pages_again(
    tmp_path, deployed, zookeeper_server, sshd
):
    from airflow_provider_kafka_zk.testing._process import free_port

    dead = SmtpSink()  # never started: nothing listens on its port
    dead.port = free_port("127.0.0.1")
    with WebhookSink() as slack:
        home = _runtime_home(
            tmp_path,
            "incident",
            deployed["incident"],
            zookeeper_server,
            sshd,
            '{ channels = [ { kind = "smtp", to = "oncall@example.com", smtp_conn_id = "smtp_dead" },'
            ' { kind = "slack", slack_webhook_conn_id = "slack_oncall" } ] }',
            {"smtp_dead": dead.connection(), "slack_oncall": slack.connection()},
        )
        result = _airflow(home["env"], home["work"], "dags", "test", "kafka_zk_daily_hygiene_incident")
        output = result.stdout + result.stderr
        assert result.returncode == 1
        assert "ALERT NOT DELIVERED to smtp:smtp_dead" in output
        assert len(slack.posts) == 1  # the channel that works got it
    root = tmp_path / "artefacts" / "incident" / "alerts" / "kafka_zk_daily_hygiene_incident"
    (folder,) = root.iterdir()
    record = json.loads((folder / "alert.json").read_text())
    assert record["deliveries"]["slack:slack_oncall"]["ok"] is True
    assert record["deliveries"]["smtp:smtp_dead"]["ok"] is False
    assert record["incidents"] and record["known"] == {}  # not delivered everywhere: the next run pages again
