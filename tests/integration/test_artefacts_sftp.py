"""Artefacts on a real remote store: ``sftp://127.0.0.1/<dir>`` served by a real sshd, reached through
Airflow's ObjectStoragePath with a connection stored in the metadata DB (``airflow connections add``;
the filesystem is apache-airflow-providers-sftp's, sshfs over asyncssh).

The daily hygiene DAG runs with ``airflow dags test`` against the simulator's healthy cluster (real
ZooKeeper, a second real sshd for the broker hosts): the snapshot, the inventories and the findings
must land on the store's disk (manifest last, no temporary file left), and each task must read back
what the one before wrote -- in-process, and on Spark, where the job gets the connection's options as
a private file. The worker checks the store's host key against ``~/.ssh/known_hosts`` (asyncssh's
default; the provider's filesystem reads no host-key extra): an unknown host key is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
BROKER_ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
STORE = "127.0.0.1"
CONN_ID = "kafka_zk_test_sftp_artefacts"


@pytest.fixture(scope="module")
def broker_sshd(tmp_path_factory):
    with SshServer(BROKER_ADDRESSES, work_dir=tmp_path_factory.mktemp("broker-sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def store_sshd(tmp_path_factory):
    """The artefact store: its own sshd on 127.0.0.1 (a different host key than the brokers')."""
    with SshServer((STORE,), work_dir=tmp_path_factory.mktemp("store-sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(zookeeper_server, tmp_path_factory):
    with DeployedCluster(
        healthy_cluster(name="sftp"),
        zookeeper_server.connect_string,
        zookeeper_server.new_chroot("/kafka_sftp_artefacts_"),
        tmp_path_factory.mktemp("sftp-hosts"),
    ) as deployed:
        yield deployed


def _home_with_known_hosts(directory: Path, *lines: str) -> Path:
    (directory / ".ssh").mkdir(parents=True, exist_ok=True)
    (directory / ".ssh" / "known_hosts").write_text("".join(f"{line}\n" for line in lines))
    return directory


@pytest.fixture(scope="module")
def environment(broker_sshd, store_sshd, cluster, zookeeper_server, airflow_home, tmp_path_factory):
    """A cluster file whose artefacts base is the sftp store, and the store's connection in the DB."""
    work = tmp_path_factory.mktemp("sftp-dag")
    store_dir = work / "store"  # the sshd's disk: what a remote reader of the store would see
    store_dir.mkdir()
    home = _home_with_known_hosts(work / "home", store_sshd.known_hosts_line(STORE))
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_SFTP_BROKERS_SSH": json.dumps(
            broker_sshd.airflow_connection_fields(BROKER_ADDRESSES[0])
        ),
        "AIRFLOW_CONN_SFTP_ZK": json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": cluster.chroot},
            }
        ),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "KAFKA_ZK_CLUSTERS_FILE": str(work / "clusters.toml"),
    }
    env.pop(f"AIRFLOW_CONN_{CONN_ID.upper()}", None)
    hosts = "{ " + ", ".join(f'"{b}" = "{h}"' for b, h in enumerate(BROKER_ADDRESSES)) + " }"
    entries = []
    for name, engine in (("sftp-in-process", "in-process"), ("sftp-spark", "spark")):
        entries += [
            f'[clusters."{name}"]',
            'kafka_zookeeper_conn_id = "sftp_zk"',
            'ssh_conn_id = "sftp_brokers_ssh"',
            f'base_path = "sftp://{STORE}{store_dir}"',
            f'artefacts_conn_id = "{CONN_ID}"',
            f'engine = "{engine}"',
            f'server_properties_path = "{cluster.root}/broker-{{broker_id}}/config/server.properties"',
            f"broker_hosts = {hosts}",
            "retries = 0",
            "connect_timeout = 3",
        ]
    (work / "clusters.toml").write_text("\n".join(entries) + "\n")
    # the store's connection lives in the metadata DB, as an operator would add it (sftp type: the
    # sftp provider's filesystem reads host, port, login and the key_file extra)
    fields = {
        "conn_type": "sftp",
        "host": STORE,
        "port": store_sshd.port,
        "login": store_sshd.user,
        "extra": {"key_file": str(store_sshd.client_private_key_path)},
    }
    airflow = str(VENV_BIN / "airflow")
    subprocess.run([airflow, "connections", "delete", CONN_ID], env=env, capture_output=True, timeout=120)
    added = subprocess.run(
        [airflow, "connections", "add", CONN_ID, "--conn-json", json.dumps(fields)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr[-3000:]
    # scripts outside a task read connections from the environment, not the metadata DB
    direct = {**env, f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(fields)}
    yield {"env": env, "direct_env": direct, "store": store_dir, "home": home}
    subprocess.run([airflow, "connections", "delete", CONN_ID], env=env, capture_output=True, timeout=120)


def _dags_test(environment, cluster: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", f"kafka_zk_daily_hygiene_{cluster}"],
        env=environment["env"],
        capture_output=True,
        text=True,
        timeout=900,
    )


def _assert_run_landed_on_the_store(
    environment, cluster: str, result: subprocess.CompletedProcess[str]
) -> dict:
    log = f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert result.returncode == 0, log
    root = environment["store"] / cluster
    snapshots = sorted((root / "snapshots").iterdir())
    assert len(snapshots) == 1, log
    files = {p.name: p for p in snapshots[0].iterdir()}
    assert "manifest.json" in files and "znodes.parquet" in files, sorted(files)
    # the manifest is written last: once it exists, every file it lists is complete
    manifest_written = files["manifest.json"].stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns <= manifest_written for p in files.values())
    manifest = json.loads(files["manifest.json"].read_text())
    assert set(manifest["files"]) <= set(files)
    inventory_runs = sorted((root / "inventory").iterdir())
    assert len(inventory_runs) == 1
    brokers = sorted(p.name for p in inventory_runs[0].iterdir() if p.name.startswith("broker="))
    assert brokers == [f"broker={b}" for b in range(6)]
    # the audit read the snapshot and the inventory back from the store, and the gate its summary
    findings_runs = sorted((root / "findings").iterdir())
    assert len(findings_runs) == 1
    summary = json.loads((findings_runs[0] / "summary.json").read_text())
    assert summary["snapshot"] == f"sftp://{STORE}{snapshots[0]}"
    assert summary["coverage"]["status"] == "complete", summary["coverage"]
    assert summary["report"] == f"sftp://{STORE}{findings_runs[0]}/report.html"
    assert (findings_runs[0] / "report.html").stat().st_size > 0
    assert (findings_runs[0] / "findings.parquet").stat().st_size > 0
    leftovers = [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers, leftovers  # every write went through a temporary name and a rename
    return summary


def test_the_daily_dag_keeps_its_artefacts_on_an_sftp_store_with_a_connection(environment):
    result = _dags_test(environment, "sftp-in-process")
    summary = _assert_run_landed_on_the_store(environment, "sftp-in-process", result)
    assert summary["engine"] == "in-process"


def test_the_spark_audit_reaches_the_sftp_store_without_airflow_and_without_the_secret_in_its_log(
    environment,
):
    result = _dags_test(environment, "sftp-spark")
    summary = _assert_run_landed_on_the_store(environment, "sftp-spark", result)
    assert summary["engine"] == "spark"
    log = result.stdout + result.stderr
    assert "artefacts-store.json (mode 0600)" in log  # the job was handed the binding as a file
    assert "client_keys" not in log  # and the binding's options never reach the log


def test_a_store_presenting_another_host_key_is_refused(environment, broker_sshd, store_sshd, tmp_path):
    """known_hosts names the store's address with another server's key: nothing is written."""
    script = f"""
import sys
from airflow_provider_kafka_zk.artefacts.object_storage import resolve_artefacts
from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
try:
    store = resolve_artefacts("sftp://{STORE}{environment["store"]}/refused", "{CONN_ID}")
    write_url_atomically(store.url + "/probe.json", b"{{}}")
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
    sys.exit(3)
sys.exit(0)
"""
    wrong = f"[{STORE}]:{store_sshd.port} {broker_sshd.host_public_key}"
    env = {**environment["direct_env"], "HOME": str(_home_with_known_hosts(tmp_path, wrong))}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    assert "REFUSED HostKeyNotVerifiable" in result.stdout, result.stdout[-3000:]
    assert not (environment["store"] / "refused").exists()


def test_on_sftp_a_file_appears_whole_by_rename_and_a_failed_write_leaves_nothing(environment):
    """SFTP writes land in place (no uncommitted upload as on S3): the writer uses a temporary name
    and posix-rename, so a reader never sees half a file, and a failed write leaves none."""
    script = f"""
import sys
from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import resolve_artefacts
store = resolve_artefacts("sftp://{STORE}{environment["store"]}/writes", "{CONN_ID}")
seen = []
def streaming(handle):
    handle.write(b"rows")
    seen.extend(store.fs.ls(store.root, detail=False))
write_atomically(store.fs, store.root + "/part-0.parquet", streaming)
print("SEEN", sorted(p.rsplit("/", 1)[1] for p in seen))
def failing(handle):
    handle.write(b"half")
    raise RuntimeError("boom")
try:
    write_atomically(store.fs, store.root + "/other.parquet", failing)
except RuntimeError:
    print("FAILED AS EXPECTED")
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=environment["direct_env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = environment["store"] / "writes"
    assert (written / "part-0.parquet").read_bytes() == b"rows"
    seen = next(line for line in result.stdout.splitlines() if line.startswith("SEEN"))
    assert "part-0.parquet'" not in seen and ".tmp" in seen  # during the write: only the temporary name
    assert "FAILED AS EXPECTED" in result.stdout
    assert sorted(p.name for p in written.iterdir()) == ["part-0.parquet"]


def test_a_store_connection_that_turns_host_key_checks_off_is_refused(environment, store_sshd):
    fields = {
        "conn_type": "sftp",
        "host": STORE,
        "port": store_sshd.port,
        "login": store_sshd.user,
        "extra": {"key_file": str(store_sshd.client_private_key_path), "no_host_key_check": "true"},
    }
    script = f"""
from airflow_provider_kafka_zk.artefacts.object_storage import ArtefactsStoreBindingError, resolve_artefacts
try:
    resolve_artefacts("sftp://{STORE}{environment["store"]}/unchecked", "sftp_unchecked")
except ArtefactsStoreBindingError as exc:
    print("REFUSED", exc)
"""
    env = {**environment["direct_env"], "AIRFLOW_CONN_SFTP_UNCHECKED": json.dumps(fields)}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert "REFUSED" in result.stdout and "no_host_key_check" in result.stdout, result.stderr[-3000:]
    assert not (environment["store"] / "unchecked").exists()
