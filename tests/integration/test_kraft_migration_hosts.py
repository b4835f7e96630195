"""The migration's host operations against a real sshd on loopback (files built under ``tmp_path``):
atomic config writes that keep the old file, refusals that leave the disk as it was, Kafka processes
found with their start time, renames aside. Each guard's test first shows the damage the obvious
way does on a twin of the layout."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.kraft_migration_hosts import NodeHostError, NodeHosts
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

ADDRESS = "127.0.0.13"
NODE = 3000
OLD = b"# controller\nprocess.roles=controller\nnode.id=3000\nzookeeper.metadata.migration.enable=true\n"
NEW = b"# controller\nprocess.roles=controller\nnode.id=3000\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer((ADDRESS,), work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


class Pinned:
    def __init__(self) -> None:
        self.asked: list[tuple[int, str]] = []

    def require_broker(self, broker_id: int, host: str) -> None:
        self.asked.append((broker_id, host))


@pytest.fixture(scope="module")
def ssh_hook(sshd) -> Iterator[BrokerHostHook]:
    fields = sshd.airflow_connection_fields(ADDRESS, conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_KRAFT_HOSTS_SSH", json.dumps(fields))
        yield BrokerHostHook(
            "kraft_hosts_ssh", None, broker_hosts={NODE: ADDRESS}, connect_timeout=5, connect_attempts=1
        )


@pytest.fixture
def hosts(ssh_hook) -> NodeHosts:
    return NodeHosts(ssh_hook, Pinned(), timeout=30)


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "etc" / "controller.properties"
    path.parent.mkdir()
    path.write_bytes(OLD)
    path.chmod(0o640)
    return path


def test_a_config_write_replaces_atomically_and_keeps_the_old_file(hosts, config) -> None:
    result = hosts.write_config(
        NODE,
        str(config),
        NEW,
        expected_sha256=sha(OLD),
        keep_as="controller.properties.kafka-zk-before-finalize-x",
        dry_run=False,
    )
    assert (
        result["status"] == "written"
        and result["kept_as"] == "controller.properties.kafka-zk-before-finalize-x"
    )
    assert config.read_bytes() == NEW
    assert (config.parent / "controller.properties.kafka-zk-before-finalize-x").read_bytes() == OLD
    assert config.stat().st_mode & 0o777 == 0o640  # the old file's mode
    assert sorted(p.name for p in config.parent.iterdir()) == [
        "controller.properties",
        "controller.properties.kafka-zk-before-finalize-x",
    ]  # no temporary file left
    again = hosts.write_config(
        NODE,
        str(config),
        NEW,
        expected_sha256=sha(OLD),
        keep_as="controller.properties.kafka-zk-before-finalize-x",
        dry_run=False,
    )
    assert again["status"] == "already"


def test_a_file_changed_since_the_plan_is_not_overwritten(hosts, config) -> None:
    config.write_bytes(OLD + b"# edited by hand after the plan\n")
    before = config.read_bytes()
    result = hosts.write_config(NODE, str(config), NEW, expected_sha256=sha(OLD), keep_as="k", dry_run=False)
    assert result["status"] == "changed"
    assert config.read_bytes() == before and not (config.parent / "k").exists()


def test_a_symlinked_config_is_refused_where_a_plain_write_would_overwrite_the_target(
    hosts, tmp_path
) -> None:
    victim = tmp_path / "victim.properties"
    victim.write_bytes(OLD)
    twin = tmp_path / "twin"
    twin.mkdir()
    (twin / "server.properties").symlink_to(victim)
    # the damage: writing by path follows the link and replaces another file's content
    with open(twin / "server.properties", "wb") as handle:
        handle.write(NEW)
    assert victim.read_bytes() == NEW
    victim.write_bytes(OLD)
    planted = tmp_path / "node"
    planted.mkdir()
    (planted / "server.properties").symlink_to(victim)
    with pytest.raises(NodeHostError, match="symlink"):
        hosts.write_config(
            NODE,
            str(planted / "server.properties"),
            NEW,
            expected_sha256=sha(OLD),
            keep_as="k",
            dry_run=False,
        )
    assert victim.read_bytes() == OLD and (planted / "server.properties").is_symlink()


def test_a_keep_name_holding_another_file_is_refused(hosts, config) -> None:
    (config.parent / "keep").write_bytes(b"something else\n")
    with pytest.raises(NodeHostError, match="already holds another file"):
        hosts.write_config(NODE, str(config), NEW, expected_sha256=sha(OLD), keep_as="keep", dry_run=False)
    assert config.read_bytes() == OLD


def test_a_dry_run_checks_everything_and_writes_nothing(hosts, config) -> None:
    result = hosts.write_config(
        NODE, str(config), NEW, expected_sha256=sha(OLD), keep_as="keep", dry_run=True
    )
    assert result["status"] == "would_write"
    assert config.read_bytes() == OLD and not (config.parent / "keep").exists()


def test_changes_need_the_session_gate(ssh_hook, config) -> None:
    with pytest.raises(PermissionError, match="outside a maintenance session"):
        NodeHosts(ssh_hook, None).write_config(
            NODE, str(config), NEW, expected_sha256=sha(OLD), keep_as="k", dry_run=False
        )
    gate = Pinned()
    NodeHosts(ssh_hook, gate).write_config(
        NODE, str(config), NEW, expected_sha256=sha(OLD), keep_as="k", dry_run=False
    )
    assert gate.asked == [(NODE, ADDRESS)]


def test_a_new_controller_file_creates_its_directory(hosts, tmp_path) -> None:
    path = tmp_path / "new" / "kraft" / "controller.properties"
    result = hosts.write_config(
        NODE, str(path), NEW, expected_sha256=None, keep_as="k", dry_run=False, create_dirs=True
    )
    assert result["status"] == "written" and path.read_bytes() == NEW and result["kept_as"] is None


def test_reads_tails_listings_and_renames(hosts, tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * 1000 + b"\nCompleted migration of metadata from ZooKeeper to KRaft.\n")
    (tail,) = hosts.read_files(NODE, [str(log)], max_bytes=80, tail=True)
    assert (
        tail.content.endswith(b"to KRaft.\n")
        and len(tail.content) == 80
        and tail.size == len(log.read_bytes())
    )
    data = tmp_path / "kraft" / "__cluster_metadata-0"
    data.mkdir(parents=True)
    (data / "00000000000000000000.log").write_bytes(b"abc")
    assert [e["name"] for e in hosts.list_dir(NODE, str(data))] == ["00000000000000000000.log"]
    assert hosts.list_dir(NODE, str(tmp_path / "missing")) is None
    result = hosts.rename_aside(NODE, str(tmp_path / "kraft"), "kraft.kafka-zk-retired-x", dry_run=False)
    assert (
        result["status"] == "renamed"
        and (tmp_path / "kraft.kafka-zk-retired-x" / "__cluster_metadata-0").is_dir()
    )
    assert (
        hosts.rename_aside(NODE, str(tmp_path / "kraft"), "kraft.kafka-zk-retired-x", dry_run=False)["status"]
        == "already"
    )


def test_kafka_processes_are_found_by_their_properties_path_with_their_start_time(hosts, tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_bytes(OLD)
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "kafka.Kafka", str(props)]
    )
    try:
        deadline = time.monotonic() + 10
        found: list = []
        while time.monotonic() < deadline and not found:
            found = hosts.processes(NODE, [str(props), str(tmp_path / "other.properties")])[str(props)]
        assert [p["pid"] for p in found] == [process.pid]
        assert abs(found[0]["started"] - time.time()) < 60
        assert (
            hosts.processes(NODE, [str(tmp_path / "other.properties")])[str(tmp_path / "other.properties")]
            == []
        )
    finally:
        process.kill()
        process.wait()
    os.utime(props)
