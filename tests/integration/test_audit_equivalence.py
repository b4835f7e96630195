"""The faster inventory (issue 35) finds exactly what the inventory before it found: the demo's clusters
(incident and maintenance, Kafka 3.3.1) and the incident cluster of every release line of the version
matrix, deployed side by side in a real ZooKeeper and behind a real sshd, are inventoried twice -- with
the package of commit ``BEFORE`` (``git archive``, first on ``PYTHONPATH``: the inventory before issue
35) and with this checkout's -- into the same artefact paths, and each inventory is audited by this
checkout's audit on the same snapshot at the same ``now``. Every inventory file's rows and broker
facts, every log-dir file and every ``findings.parquet`` must be the same, byte for byte where a file
holds nothing of the moment it was made (the broker summary's ``remote.seconds``, a wall-clock time,
is the only such field: it is compared with the rest of the summary after it is dropped).

Only the inventory differs between the two runs, so the test keeps holding while the audit's rules
change; a change that means to change the inventory's rows moves ``BEFORE`` to its own parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.versions import MATRIX_RELEASES
from airflow_provider_kafka_zk.operators.inventory import SUMMARY_METADATA_KEY
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.scenarios import maintenance_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("_audit_equivalence_driver.py")
BEFORE = "8f9a414"
"""main before issue 35: the inventory that parsed with a regex per integer, row dicts into Arrow."""
ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
HOSTS = {str(b): a for b, a in enumerate(ADDRESSES)}
SSH_CONN = "equivalence_ssh"
NOW_MS = 1_795_000_000_000
TS = "20261122T000000.000000Z-equivalence"


def _clusters():
    yield "demo", incident_cluster(name="demo")
    yield "demo-maintenance", maintenance_cluster(name="demo-maintenance")
    for line, release in MATRIX_RELEASES.items():
        yield f"matrix-{line.replace('.', '-')}", incident_cluster(name="matrix", kafka_version=release)


@pytest.fixture(scope="module")
def before_tree(tmp_path_factory) -> Path:
    """The package as it was at ``BEFORE``, exported from this checkout's git history."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the earlier commit's code is not at hand")
    root = tmp_path_factory.mktemp(f"before-{BEFORE}")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", BEFORE, "airflow_provider_kafka_zk"],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, f"commit {BEFORE} is not in this clone's history: {archive.stderr!r}"
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


def _run(job: dict, pythonpath: Path | None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "PYTHONPATH"))}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, str(DRIVER)],
        input=json.dumps(job),
        env=env,
        cwd=str(DRIVER.parent),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done.stdout.strip().splitlines()[-1]


def _snapshot(root: Path, cluster: dict) -> str:
    """The cluster's ZooKeeper snapshot, once, outside the artefact base: both audits read it."""
    with KafkaZooKeeperHook(cluster["zk_conn"]) as hook:
        ref, _ = write_snapshot(str(root), cluster["name"], hook.snapshot(), source=hook.target_description())
    return ref.path


def _audit(base: Path, clusters: list[dict], snapshots: dict[str, str]) -> None:
    """This checkout's in-process audit of each cluster's inventory, at the fixed ``NOW_MS``."""
    for cluster in clusters:
        name = cluster["name"]
        audit_job.run_audit(
            str(base),
            name,
            snapshot=snapshots[name],
            previous="",
            inventory=str(base / name / "inventory" / TS),
            out=str(base / name / "findings" / TS),
            now_ms=NOW_MS,
        )


def _summary(path: Path) -> dict:
    summary = json.loads(pq.read_schema(path).metadata[SUMMARY_METADATA_KEY])
    summary["remote"].pop("seconds")  # the remote walk's wall time: the one field of the moment
    return summary


def test_the_demo_and_every_matrix_release_give_the_same_inventory_and_findings_as_before(
    zookeeper_server, before_tree, tmp_path
):
    base = tmp_path / "artefacts"
    with (
        SshServer(ADDRESSES, work_dir=tmp_path / "sshd") as sshd,
        contextlib.ExitStack() as stack,
    ):
        connections = {SSH_CONN: sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=10)}
        clusters = []
        for name, cluster in _clusters():
            entry = f"{name}-{cluster.spec.kafka_version}".replace(".", "-")
            deployed = stack.enter_context(
                DeployedCluster(
                    cluster,
                    zookeeper_server.connect_string,
                    zookeeper_server.new_chroot("/kafka_equivalence_"),
                    tmp_path / "hosts" / entry,
                )
            )
            zk_conn = f"zk_{entry.replace('-', '_')}"
            connections[zk_conn] = {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": deployed.chroot},
            }
            clusters.append(
                {
                    "name": entry,
                    "zk_conn": zk_conn,
                    "brokers": sorted(cluster.brokers),
                    "hosts": HOSTS,
                    "server_properties": str(
                        deployed.root / "broker-{broker_id}" / "config" / "server.properties"
                    ),
                }
            )
        job = {
            "connections": connections,
            "ssh_conn": SSH_CONN,
            "clusters": clusters,
            "base": str(base),
            "ts": TS,
            "now_ms": NOW_MS,
        }
        with pytest.MonkeyPatch.context() as patch:
            for conn_id, fields in connections.items():
                patch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
            snapshots = {c["name"]: _snapshot(tmp_path / "snapshots", c) for c in clusters}
        ran_before = _run(job, before_tree)
        _audit(base, clusters, snapshots)
        shutil.move(base, tmp_path / "before")
        ran_now = _run(job, None)
        _audit(base, clusters, snapshots)
    assert ran_before.startswith(str(before_tree)), ran_before
    assert ran_now.startswith(str(REPO)), ran_now

    before, now = tmp_path / "before", base
    compared = 0
    for cluster in clusters:
        name = cluster["name"]
        inventory = Path(name) / "inventory" / TS
        for broker in cluster["brokers"]:
            rows = inventory / f"broker={broker}" / "part-0.parquet"
            assert pq.read_table(now / rows).equals(pq.read_table(before / rows)), (name, broker)
            assert _summary(now / rows) == _summary(before / rows), (name, broker)
            log_dirs = inventory / "_logdirs" / f"broker={broker}.parquet"
            assert (now / log_dirs).read_bytes() == (before / log_dirs).read_bytes(), (name, broker)
            compared += 1
        coverage = inventory / "_coverage.json"
        assert json.loads((now / coverage).read_text()) == json.loads((before / coverage).read_text())
        findings = Path(name) / "findings" / TS / "findings.parquet"
        assert (now / findings).read_bytes() == (before / findings).read_bytes(), name
        assert pq.read_table(now / findings).num_rows > 0, name
    assert compared == sum(len(c["brokers"]) for c in clusters)
