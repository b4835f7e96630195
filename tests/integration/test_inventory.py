"""Broker inventory against real parts: the incident cluster in a real ZooKeeper, its broker hosts
served by a real sshd on 127.0.0.2-7 (one address per broker, as its registration advertises),
Airflow's SSH connection and a real Airflow DAG run. What the inventory reports is compared with
what the simulator wrote (its model and the local reference reader)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.broker_host import (
    BrokerHostAuthenticationError,
    BrokerHostHook,
    BrokerHostKeyMismatchError,
    BrokerHostKeyUnknownError,
    BrokerHostNotFoundError,
    BrokerHostTimeoutError,
    BrokerHostUnreachableError,
    BrokerIdentityError,
    HostKeyPolicyError,
    RemotePythonMissingError,
    ServerPropertiesNotFoundError,
)
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
from airflow_provider_kafka_zk.kafka.inventory import raw_bytes
from airflow_provider_kafka_zk.kafka.logdir import format_partition_dir_name
from airflow_provider_kafka_zk.operators.inventory import inventory_tables, read_inventory_summary
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.readback import read_broker
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import check_deletions

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))  # the incident cluster's hosts
UNREACHABLE = "127.0.0.9"  # no sshd listens there
STOPPED = {3: "127.0.0.5", 4: "127.0.0.6"}  # not registered in ZooKeeper: hosts must be given
SECRETS = ("conn-password-never-logged", "key-passphrase-never-logged")


def _keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def _connection(sshd: SshServer, **extra: object) -> str:
    fields = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    fields["extra"].update(extra)
    fields["extra"] = {k: v for k, v in fields["extra"].items() if v is not None}
    return json.dumps(fields)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def keys(tmp_path_factory, sshd):
    """A stranger host key, an unauthorised client key, and an authorised passphrase-protected key."""
    work = tmp_path_factory.mktemp("keys")
    other_host = _keygen(work / "other_host_key")
    stranger = _keygen(work / "stranger_client_key")
    protected = _keygen(work / "protected_client_key", SECRETS[1])
    with sshd.authorized_keys_path.open("a") as handle:
        handle.write(protected.with_suffix(".pub").read_text())
    other_host_public = " ".join(other_host.with_suffix(".pub").read_text().split()[:2])
    return {"other_host": other_host_public, "stranger": stranger, "protected": protected}


@pytest.fixture(scope="module")
def deployed(zookeeper_server, tmp_path_factory):
    chroot = zookeeper_server.new_chroot("/kafka_inventory_")
    cluster = incident_cluster()
    assert tuple(b.spec.host for b in cluster.brokers.values()) == ADDRESSES
    with DeployedCluster(
        cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("hosts")
    ) as d:
        yield d


@pytest.fixture(scope="module")
def connections(sshd, keys, deployed, zookeeper_server, tmp_path_factory):
    """Airflow connections as AIRFLOW_CONN_* variables: the SSH template variants and ZooKeeper."""
    work = tmp_path_factory.mktemp("known_hosts")
    good_known_hosts = work / "good"
    good_known_hosts.write_text(sshd.known_hosts_path.read_text())
    dag_known_hosts = work / "dag"  # broker 3's host (127.0.0.5) has someone else's key
    dag_known_hosts.write_text(
        "".join(
            (sshd.known_hosts_line(a) if a != STOPPED[3] else f"[{a}]:{sshd.port} {keys['other_host']}")
            + "\n"
            for a in ADDRESSES
        )
    )
    silent = socket.socket()  # accepts TCP, never says anything: a hung sshd
    silent.bind(("127.0.0.8", 0))
    silent.listen(8)
    silent_fields = json.loads(_connection(sshd))
    silent_fields["port"] = silent.getsockname()[1]
    env = {
        "AIRFLOW_CONN_BROKERS_SSH": _connection(sshd),
        "AIRFLOW_CONN_BROKERS_SSH_KNOWN_HOSTS": _connection(
            sshd, host_key=None, known_hosts=str(good_known_hosts)
        ),
        "AIRFLOW_CONN_BROKERS_SSH_NO_KEY": _connection(sshd, host_key=None),
        "AIRFLOW_CONN_BROKERS_SSH_WRONG_KEY": _connection(sshd, host_key=keys["other_host"]),
        "AIRFLOW_CONN_BROKERS_SSH_NO_CHECK": _connection(sshd, host_key=None, no_host_key_check=True),
        "AIRFLOW_CONN_BROKERS_SSH_STRANGER": _connection(sshd, key_file=str(keys["stranger"])),
        "AIRFLOW_CONN_BROKERS_SSH_SILENT": json.dumps(silent_fields),
        "AIRFLOW_CONN_BROKERS_SSH_DAG": json.dumps(
            {
                **json.loads(_connection(sshd, host_key=None, known_hosts=str(dag_known_hosts))),
                "password": "dag-conn-password-never-logged",
            }
        ),
        "AIRFLOW_CONN_INVENTORY_INCIDENT_ZK": json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": deployed.chroot},
            }
        ),
    }
    secret_fields = json.loads(_connection(sshd, key_file=None, private_key=keys["protected"].read_text()))
    secret_fields["password"] = SECRETS[0]
    secret_fields["extra"]["private_key_passphrase"] = SECRETS[1]
    env["AIRFLOW_CONN_BROKERS_SSH_SECRET"] = json.dumps(secret_fields)
    secret_fields["extra"]["host_key"] = keys["other_host"]
    env["AIRFLOW_CONN_BROKERS_SSH_SECRET_WRONG_KEY"] = json.dumps(secret_fields)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield {"dag_known_hosts": dag_known_hosts}
    silent.close()


def _server_properties(deployed) -> str:
    return str(deployed.root / "broker-{broker_id}" / "config" / "server.properties")


def _hook(deployed, conn_id: str = "brokers_ssh", **kwargs) -> BrokerHostHook:
    kwargs.setdefault("broker_hosts", STOPPED)
    kwargs.setdefault("server_properties_path", _server_properties(deployed))
    kwargs.setdefault("connect_attempts", 1)
    kwargs.setdefault("connect_timeout", 5)
    return BrokerHostHook(conn_id, "inventory_incident_zk", **kwargs)


@pytest.fixture(scope="module")
def inventories(deployed, connections):
    hook = _hook(deployed)
    return {broker: hook.inventory(broker) for broker in sorted(deployed.hosts)}


# ---------------------------------------------------------------------------------------------
# What every broker holds, against what the simulator wrote
# ---------------------------------------------------------------------------------------------


def test_hosts_come_from_zookeeper_registrations_unless_mapped(deployed, connections):
    hook = _hook(deployed)
    for broker in (0, 1, 2, 5):
        address = hook.resolve(broker)
        assert (address.host, address.source) == (ADDRESSES[broker], "zookeeper")
    assert hook.resolve(3).source == "broker_hosts"
    with pytest.raises(BrokerHostNotFoundError, match=r"broker 4: is not registered in ZooKeeper"):
        _hook(deployed, broker_hosts={}).resolve(4)


def test_every_broker_matches_what_the_simulator_wrote(deployed, inventories):
    cluster = deployed.cluster
    for broker, inventory in inventories.items():
        host = deployed.hosts[broker]
        disk = read_broker(broker, host.server_properties)  # the reference reader, local files
        assert inventory.host == ADDRESSES[broker]
        assert [d.path for d in inventory.log_dirs] == [str(p) for p in host.log_dirs]
        for found, expected in zip(inventory.log_dirs, disk.log_dirs, strict=True):
            assert found.meta == expected.meta
            assert found.clean_shutdown == expected.clean_shutdown
            assert dict(found.checkpoints) == expected.checkpoints
            assert found.errors == ()
        by_name = {p.name: p for p in inventory.partitions}
        assert set(by_name) == {r.path.name for r in disk.replicas}
        for replica in disk.replicas:
            row = by_name[replica.path.name]
            assert (row.topic, row.partition, row.kind) == (
                replica.name.topic,
                replica.name.partition,
                replica.name.kind.name.lower(),
            )
            assert (row.partition_metadata.topic_id if row.partition_metadata else None) == replica.topic_id
            assert row.leader_epochs == replica.leader_epochs.entries
            assert len(row.segments) == replica.segments
            assert sum(s.log_bytes for s in row.segments) == replica.log_bytes
            assert row.mtime_ms == int(replica.path.stat().st_mtime * 1000)
            assert row.errors == ()
        # ... and against the model the simulator wrote from
        model = cluster.replica_dirs(broker_id=broker, kind=None)
        assert {format_partition_dir_name(d.topic, d.partition, d.kind, d.unique_id) for d in model} == set(
            by_name
        )
        for replica in model:
            row = by_name[
                format_partition_dir_name(replica.topic, replica.partition, replica.kind, replica.unique_id)
            ]
            assert row.topic_id == (str(replica.topic_id) if replica.topic_id else None)
            assert [(e.epoch, e.start_offset) for e in row.leader_epochs] == [
                tuple(e) for e in replica.leader_epochs
            ]
        # offsets joined from the log dir's checkpoints
        log_dir = inventory.log_dirs[0]
        for row in (r for r in inventory.partitions if r.kind == "normal"):
            key = (row.topic, row.partition)
            assert row.high_watermark == log_dir.offsets("replication-offset-checkpoint").get(key)
            assert row.recovery_point == log_dir.offsets("recovery-point-offset-checkpoint").get(key)


def test_broker_facts_and_identity(deployed, inventories):
    spec = deployed.cluster.spec
    for broker, inventory in inventories.items():
        facts = inventory.facts
        assert facts.server_properties_path == str(deployed.hosts[broker].server_properties)
        assert (facts.broker_id, facts.source, facts.log_dirs_key) == (broker, "configured", "log.dirs")
        assert facts.inter_broker_protocol_version == str(spec.ibp)
        assert facts.delete_topic_enable is spec.delete_topic_enable
        assert facts.min_insync_replicas == spec.min_insync_replicas
        assert facts.log_segment_delete_delay_ms == spec.log_segment_delete_delay_ms
        assert (facts.auto_leader_rebalance_enable, facts.unclean_leader_election_enable) == (True, False)
        assert facts.leader_imbalance_per_broker_percentage == 10
        # the simulator's server.properties sets every key but the rebalance check interval (Kafka's 300 s)
        assert facts.defaulted == ("leader.imbalance.check.interval.seconds",) and facts.problems == ()
        checks = {c.check.split(" ")[0]: c for c in inventory.identity}
        assert checks["server.properties"].status == "ok"
        assert checks["meta.properties"].status == "ok"
        assert checks["cluster.id"].status == "ok"
        if broker in STOPPED:
            assert checks["zookeeper"].status == "unknown"
            assert "not registered" in checks["zookeeper"].detail
        else:
            assert checks["zookeeper"].status == "ok", checks["zookeeper"]


def test_identity_error_when_the_host_holds_another_broker(deployed, connections):
    hook = _hook(
        deployed,
        broker_hosts={1: ADDRESSES[2]},
        server_properties_path=str(deployed.hosts[2].server_properties),
    )
    with pytest.raises(BrokerIdentityError, match=r"broker 1 on 127\.0\.0\.4:\d+: the host holds broker 2"):
        hook.inventory(1)


def test_incident_replicas_are_in_the_inventory(deployed, inventories):
    cluster = deployed.cluster
    client = KazooClient(hosts=deployed.zookeeper_connect)
    client.start()
    try:
        data, _ = client.get(zk.topic_path("clickstream"))
    finally:
        client.stop()
        client.close()
    zk_id = str(zk.TopicAssignment.decode(data, zk.topic_path("clickstream")).topic_id)
    # (a) every planted mismatch: the replica holds the old id on disk, ZooKeeper the new one
    mismatches = [i for i in cluster.incidents if i.kind == "topic_id_mismatch"]
    assert mismatches
    for incident in mismatches:
        assert incident.detail == f"zookeeper={zk_id}"
        rows = {
            p.partition: p for p in inventories[incident.broker_id].partitions if p.topic == "clickstream"
        }
        model = {d.partition: d for d in cluster.replica_dirs("clickstream", incident.broker_id)}
        for partition in incident.partitions:
            assert rows[partition].topic_id == str(model[partition].topic_id) != zk_id
    # (c) -delete leftovers of old-logs on broker 2, with the deleted topic's id
    leftovers = next(i for i in cluster.incidents if i.kind == "leftover_dirs" and i.detail == "delete")
    deletes = [p for p in inventories[2].partitions if p.kind == "delete"]
    assert sorted((p.topic, p.partition) for p in deletes) == [("old-logs", p) for p in leftovers.partitions]
    for row in deletes:
        assert row.unique_id is not None and len(row.unique_id) == 32
        assert row.name.endswith(f".{row.unique_id}-delete")
        assert row.topic_id == str(cluster.replica_dirs("old-logs", 2, kind=None)[0].topic_id)
        assert row.high_watermark is None  # a -delete dir is no longer in the checkpoints
    # (d) broker 4 crashed: no clean-shutdown marker; broker 3 stopped cleanly: marker (empty in 3.3)
    assert [d.clean_shutdown_present for d in inventories[4].log_dirs] == [False]
    assert [d.clean_shutdown_file.data for d in inventories[3].log_dirs] == [b""]
    assert all(not d.clean_shutdown_present for b in (0, 1, 2, 5) for d in inventories[b].log_dirs)
    # (d) the corrupt-index segment's files, as they are on disk
    corrupt = next(i for i in cluster.incidents if i.kind == "corrupt_offset_index")
    disk = read_broker(4, deployed.hosts[4].server_properties)
    replica = next(r for r in disk.replicas if (r.name.topic, r.name.partition) == ("sensor-readings", 0))
    assert any(p.corrupt for p in replica.index_problems)
    row = next(p for p in inventories[4].partitions if (p.topic, p.partition) == (corrupt.topic, 0))
    assert row.segments
    for segment in row.segments:
        base = replica.path / f"{segment.base_offset:020d}"
        assert segment.log_bytes == base.with_suffix(".log").stat().st_size
        assert segment.index_bytes == base.with_suffix(".index").stat().st_size
        assert segment.timeindex_bytes == base.with_suffix(".timeindex").stat().st_size
    # a crashed broker's active segment keeps its preallocated (sparse) indexes
    assert row.newest_segment.index_bytes == 10485760
    assert row.disk_bytes < row.total_bytes


# ---------------------------------------------------------------------------------------------
# Failures: each a typed error naming the broker and the host
# ---------------------------------------------------------------------------------------------


def test_unreachable_host(deployed, connections):
    hook = _hook(deployed, broker_hosts={4: UNREACHABLE})
    with pytest.raises(
        BrokerHostUnreachableError, match=rf"broker 4 on {UNREACHABLE}:\d+: connection refused"
    ):
        hook.inventory(4)


def test_silent_host_times_out(deployed, connections):
    hook = _hook(deployed, "brokers_ssh_silent", broker_hosts={0: "127.0.0.8"}, connect_timeout=1)
    with pytest.raises(
        BrokerHostUnreachableError, match=r"broker 0 on 127\.0\.0\.8:\d+: no SSH handshake within 1s"
    ):
        hook.inventory(0)


def test_wrong_host_key_is_a_mismatch(deployed, connections, sshd):
    hook = _hook(deployed, "brokers_ssh_wrong_key")
    with pytest.raises(
        BrokerHostKeyMismatchError, match=r"broker 1 on 127\.0\.0\.3:\d+: host key mismatch"
    ) as info:
        hook.inventory(1)
    assert "ssh-ed25519 SHA256:" in str(info.value)


def test_unknown_host_key_is_rejected_with_its_fingerprint(deployed, connections):
    with pytest.raises(
        BrokerHostKeyUnknownError, match=r"broker 2 on 127\.0\.0\.4:\d+: no trusted host key"
    ) as info:
        _hook(deployed, "brokers_ssh_no_key").inventory(2)
    assert "offered ssh-ed25519 SHA256:" in str(info.value)


def test_known_hosts_file_extra_is_trusted(deployed, connections):
    inventory = _hook(deployed, "brokers_ssh_known_hosts").inventory(5)
    assert inventory.partitions


def test_disabling_host_key_checks_is_refused(deployed, connections):
    with pytest.raises(HostKeyPolicyError, match="always verified"):
        _hook(deployed, "brokers_ssh_no_check").inventory(0)


def test_authentication_failure(deployed, connections):
    with pytest.raises(
        BrokerHostAuthenticationError, match=r"broker 0 on 127\.0\.0\.2:\d+: SSH authentication failed"
    ):
        _hook(deployed, "brokers_ssh_stranger").inventory(0)


def test_host_without_python3_gives_a_clear_error(deployed, connections, tmp_path):
    marker = tmp_path / "not-run"
    hook = _hook(deployed, python_interpreters=(f"python3-missing $(touch {marker})", "/nonexistent/python3"))
    with pytest.raises(
        RemotePythonMissingError, match=r"broker 0 on 127\.0\.0\.2:\d+: no Python 3 on the host"
    ):
        hook.inventory(0)
    assert not marker.exists()  # the interpreter names were quoted, never run


def test_old_python_gives_a_clear_error(deployed, connections, tmp_path):
    fake = tmp_path / "python3.5"  # stands in for an old interpreter: reports 3.5 to the bootstrap
    fake.write_text(
        "#!/bin/sh\n"
        'shift; boot="$1"; shift\n'
        'exec python3 -c "import sys; sys.version_info = (3, 5, 10); sys.version = \'3.5.10\'\n$boot" "$@"\n'
    )
    fake.chmod(0o755)
    with pytest.raises(
        RemotePythonMissingError, match=r"broker 0 on 127\.0\.0\.2:\d+: the host's Python is 3\.5\.10"
    ):
        _hook(deployed, python_interpreters=(str(fake),)).inventory(0)


def test_silent_remote_command_times_out(deployed, connections, tmp_path):
    slow = tmp_path / "slow-python3"  # an interpreter that hangs before saying anything
    slow.write_text('#!/bin/sh\nsleep 5\nexec python3 "$@"\n')
    slow.chmod(0o755)
    hook = _hook(deployed, python_interpreters=(str(slow),), idle_timeout=1)
    with pytest.raises(
        BrokerHostTimeoutError, match=r"broker 0 on 127\.0\.0\.2:\d+: .*exceeded idle_timeout \(1s\)"
    ):
        hook.inventory(0)


def test_server_properties_not_found(deployed, connections):
    hook = _hook(deployed, server_properties_path="/nonexistent/{broker_id}/server.properties")
    with pytest.raises(
        ServerPropertiesNotFoundError,
        match=r"broker 0 on 127\.0\.0\.2:\d+: cannot read server.properties /nonexistent/0/",
    ):
        hook.inventory(0)


def test_secrets_never_reach_logs_or_errors(deployed, connections, caplog):
    caplog.set_level(logging.DEBUG)
    inventory = _hook(deployed, "brokers_ssh_secret").inventory(0)  # key with passphrase: it works
    assert inventory.partitions
    with pytest.raises(BrokerHostKeyMismatchError) as info:
        _hook(deployed, "brokers_ssh_secret_wrong_key").inventory(1)
    assert "Inventory of broker 0 on 127.0.0.2" in caplog.text  # the log was captured, DEBUG included
    assert "Authentication (publickey) successful" in caplog.text
    texts = [caplog.text, str(info.value), repr(inventory.facts), json.dumps(inventory.summary())]
    for secret in SECRETS:
        assert all(secret not in text for text in texts)
    connection = json.loads(os.environ["AIRFLOW_CONN_BROKERS_SSH_SECRET"])
    key_material = connection["extra"]["private_key"].splitlines()[1]
    assert all(key_material not in text for text in texts)


# ---------------------------------------------------------------------------------------------
# server.properties from the running broker's command line
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def fake_brokers(deployed):
    """Processes whose command lines look like running brokers 1 and 2 (relative path, overrides)."""
    processes = []
    for broker in (1, 2):
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import time; time.sleep(300)",
                    "-Xmx1G",
                    "-cp",
                    "/opt/kafka/bin/../libs/kafka-clients-3.3.1.jar:/opt/kafka/bin/../libs/kafka_2.13-3.3.1.jar",
                    "kafka.Kafka",
                    "config/server.properties",
                    "--override",
                    "min.insync.replicas=3",
                    "--override",
                    "ssl.keystore.password=override-secret-never-sent",
                ],
                cwd=deployed.hosts[broker].root,
            )
        )
    yield processes
    for process in processes:
        process.kill()
        process.wait()


def test_server_properties_found_from_the_kafka_process(deployed, connections, fake_brokers, caplog):
    caplog.set_level(logging.DEBUG)
    hook = _hook(deployed, server_properties_path=None)
    for broker, process in zip((1, 2), fake_brokers, strict=True):
        facts = hook.inventory(broker).facts
        assert (facts.source, facts.pid, facts.broker_id) == ("process", process.pid, broker)
        assert facts.server_properties_path == str(deployed.hosts[broker].server_properties)
        assert facts.kafka_version == "3.3.1"
        assert facts.min_insync_replicas == 3 and facts.overridden == ("min.insync.replicas",)
        assert "override-secret-never-sent" not in repr(facts)
    assert "override-secret-never-sent" not in caplog.text
    with pytest.raises(
        ServerPropertiesNotFoundError,
        match=r"broker 0 on 127\.0\.0\.2:\d+: no running Kafka process has broker.id=0",
    ):
        hook.inventory(0)


# ---------------------------------------------------------------------------------------------
# Hostile names and unreadable files on a hand-built broker host
# ---------------------------------------------------------------------------------------------

HOSTILE_DIRS = [
    "evil $(touch PWNED_A)-0",
    "quote'single\"double-1",
    "new\nline-2",
    "back`touch PWNED_B`tick-3",
    "semi;colon&amp|pipe-4",
    " leading space-5",
    "glob*?[ab]-6",
    "dollar${HOME}$USER-7",
    os.fsdecode(b"latin1-\xff\xfe-8"),
    "x$(touch${IFS}PWNED_C)-0.0123456789abcdef0123456789abcdef-delete",
    "no dash at all $(touch PWNED_D)",
]


@pytest.fixture(scope="module")
def weird_broker(deployed, tmp_path_factory):
    """Broker 7 on 127.0.0.2 with hostile paths everywhere and files that cannot be read."""
    root = tmp_path_factory.mktemp("weird") / "host $(touch PWNED_ROOT) 'q' \"dq\" `x`"
    log_dir = root / "logs $(touch PWNED_LOGDIR) ;|&"
    shutil.copytree(deployed.hosts[0].log_dirs[0], log_dir, symlinks=True)
    (log_dir / "meta.properties").write_text(
        (log_dir / "meta.properties").read_text().replace("broker.id=0", "broker.id=7")
    )
    template = min(p for p in log_dir.iterdir() if p.name.startswith("orders-"))
    for name in HOSTILE_DIRS:
        shutil.copytree(template, log_dir / name)
    (log_dir / HOSTILE_DIRS[0] / "$(touch PWNED_FILE)").write_bytes(b"x")
    broken = {
        "trunc-0": {"partition.metadata": b"version: 0\ntopic_id: 70qWqd"},
        "nonutf8-0": {"partition.metadata": b"version: 0\ntopic_id: \xff\xfe\xfd"},
        "badepoch-0": {"leader-epoch-checkpoint": b"0\n2\n0 0\n"},
    }
    for name, files in broken.items():
        shutil.copytree(template, log_dir / name)
        for file, data in files.items():
            (log_dir / name / file).write_bytes(data)
    shutil.copytree(template, log_dir / "isdir-0")
    (log_dir / "isdir-0" / "partition.metadata").unlink()
    (log_dir / "isdir-0" / "partition.metadata").mkdir()
    shutil.copytree(template, log_dir / "fifo-0")
    (log_dir / "fifo-0" / "partition.metadata").unlink()
    os.mkfifo(log_dir / "fifo-0" / "partition.metadata")
    (log_dir / "linked-0").symlink_to(template)
    second = root / "second"
    second.mkdir()
    (second / "meta.properties").mkdir()  # a directory where a file is expected
    config = root / "conf $(touch PWNED_CONF)" / "server.properties"
    config.parent.mkdir(parents=True)
    config.write_text(f"broker.id=7\nlog.dirs={log_dir},{root / 'missing'},{second}\n")
    return {"root": root, "log_dir": log_dir, "config": config, "template": template}


def _pwned(root: Path) -> list[Path]:
    """What a hostile name run by a shell would have created: anywhere under the broker's own folder,
    or in a shell's working directory (a home, /tmp, this process's). Only our own folder is walked
    deep: other people's folders under /tmp and the home come and go while a walk reads them."""
    found = list(root.parent.rglob("PWNED*"))
    for place in (Path.home(), Path("/tmp"), Path.cwd()):
        found += place.glob("PWNED*")
    return sorted(found)


@pytest.fixture(scope="module")
def weird_inventory(weird_broker, connections):
    hook = BrokerHostHook(
        "brokers_ssh",
        broker_hosts={7: ADDRESSES[0]},
        server_properties_path=str(weird_broker["config"]),
        connect_attempts=1,
    )
    return hook.inventory(7)


def test_hostile_names_come_back_exactly_and_never_reach_a_shell(weird_broker, weird_inventory):
    log_dir = weird_broker["log_dir"]
    assert weird_inventory.facts.log_dirs[0] == str(log_dir)
    on_disk = {os.fsencode(p.name) for p in log_dir.iterdir() if p.is_dir()}
    found = {raw_bytes(p.name) for p in weird_inventory.partitions if p.log_dir_index == 0}
    assert found == on_disk
    rows = {p.name: p for p in weird_inventory.partitions}
    for name in HOSTILE_DIRS:
        assert name in rows, name
        row = rows[name]
        assert row.to_row()["dir_name_bytes"] == os.fsencode(name)
    assert (rows["new\nline-2"].topic, rows["new\nline-2"].partition) == ("new\nline", 2)
    assert rows[HOSTILE_DIRS[0]].topic == "evil $(touch PWNED_A)"
    assert rows[HOSTILE_DIRS[0]].topic_id == rows[weird_broker["template"].name].topic_id is not None
    delete = rows["x$(touch${IFS}PWNED_C)-0.0123456789abcdef0123456789abcdef-delete"]
    assert (delete.kind, delete.topic, delete.unique_id) == (
        "delete",
        "x$(touch${IFS}PWNED_C)",
        "0123456789abcdef0123456789abcdef",
    )
    assert rows["no dash at all $(touch PWNED_D)"].kind == "unparseable"
    latin = rows[os.fsdecode(b"latin1-\xff\xfe-8")]
    assert latin.to_row()["dir_name"] == "latin1-\\xff\\xfe-8"  # readable text; bytes kept exactly
    assert "$(touch PWNED_FILE)" in {f.name for f in rows[HOSTILE_DIRS[0]].other_files}
    assert _pwned(weird_broker["root"]) == []


def test_unreadable_files_are_per_directory_errors(weird_broker, weird_inventory):
    rows = {p.name: p for p in weird_inventory.partitions}
    expected_errors = {
        "trunc-0": "partition.metadata",
        "nonutf8-0": "UTF-8",
        "badepoch-0": "entries (the count line)",
        "isdir-0": "is a directory",
        "fifo-0": "is not a regular file",
    }
    for name, fragment in expected_errors.items():
        assert any(fragment in e for e in rows[name].errors), (name, rows[name].errors)
    for name in ("trunc-0", "nonutf8-0", "isdir-0", "fifo-0"):
        assert rows[name].topic_id is None
        assert rows[name].segments  # everything else about the directory is still there
    assert rows["badepoch-0"].leader_epochs is None and rows["badepoch-0"].topic_id is not None
    assert (
        rows["linked-0"].symlink and rows["linked-0"].topic_id == rows[weird_broker["template"].name].topic_id
    )
    healthy = [p for p in weird_inventory.partitions if p.name.startswith("orders-")]
    assert healthy and all(not p.errors for p in healthy)
    first, missing, second = weird_inventory.log_dirs
    assert first.exists and not first.errors
    assert (missing.exists, missing.error) == (False, "FileNotFoundError: No such file or directory")
    assert second.exists and second.meta is None
    assert any("is a directory" in e for e in second.errors)
    checks = {c.check: c.status for c in weird_inventory.identity}
    assert checks[f"meta.properties {first.path}"] == "ok"
    assert checks[f"meta.properties {missing.path}"] == "unknown"


# ---------------------------------------------------------------------------------------------
# A -delete directory's age runs from the broker's rename (ctime), not from its mtime
# ---------------------------------------------------------------------------------------------

RENAMED_BROKER = 8
DAY_MS = 86_400_000
DELAY_MS = 60_000
RENAMED_TOPIC = "renamed-topic"
RENAMED_DIR = f"{RENAMED_TOPIC}-0.0123456789abcdef0123456789abcdef-delete"


@pytest.fixture
def renamed_broker(deployed):
    """Broker 8 on 127.0.0.2, beside the incident's brokers (so the server.properties template fits
    it): one partition directory last written two days ago, renamed to ``-delete`` just now -- what
    the broker does when a topic is deleted, and what a Kafka 3.3.1 cluster's audit flagged as past
    ``log.segment.delete.delay.ms`` (a rename changes the directory's ctime, not its mtime)."""
    root = deployed.root / f"broker-{RENAMED_BROKER}"
    log_dir = root / "data" / "kafka-logs-0"
    log_dir.mkdir(parents=True)
    template_dir = deployed.hosts[0].log_dirs[0]
    (log_dir / "meta.properties").write_text(
        (template_dir / "meta.properties").read_text().replace("broker.id=0", f"broker.id={RENAMED_BROKER}")
    )
    template = min(p for p in template_dir.iterdir() if p.name.startswith("orders-"))
    partition = log_dir / f"{RENAMED_TOPIC}-0"
    shutil.copytree(template, partition)
    written_ns = (time.time_ns() // 1_000_000 - 2 * DAY_MS) * 1_000_000
    for item in [*partition.iterdir(), partition]:
        os.utime(item, ns=(written_ns, written_ns))
    renamed = partition.rename(log_dir / RENAMED_DIR)
    config = root / "config" / "server.properties"
    config.parent.mkdir()
    config.write_text(
        re.sub(
            r"(?m)^(broker\.id|log\.dirs|log\.segment\.delete\.delay\.ms)=.*$",
            lambda m: {
                "broker.id": f"broker.id={RENAMED_BROKER}",
                "log.dirs": f"log.dirs={log_dir}",
                "log.segment.delete.delay.ms": f"log.segment.delete.delay.ms={DELAY_MS}",
            }[m[1]],
            deployed.hosts[0].server_properties.read_text(),
        )
    )
    yield {"path": renamed, "written_ms": written_ns // 1_000_000}
    shutil.rmtree(root)


def test_a_just_renamed_delete_directory_is_young_whatever_its_mtime(
    deployed, connections, renamed_broker, tmp_path
):
    path, written_ms = (renamed_broker[k] for k in ("path", "written_ms"))
    hosts = {**STOPPED, RENAMED_BROKER: ADDRESSES[0]}
    inventory = _hook(deployed, broker_hosts=hosts).inventory(RENAMED_BROKER)
    assert inventory.facts.log_segment_delete_delay_ms == DELAY_MS
    [row] = inventory.partitions
    assert (row.name, row.kind, row.topic, row.partition) == (RENAMED_DIR, "delete", RENAMED_TOPIC, 0)
    stat = path.stat()
    assert (row.mtime_ms, row.ctime_ms) == (stat.st_mtime_ns // 1_000_000, stat.st_ctime_ns // 1_000_000)
    assert row.mtime_ms == written_ms  # the rename kept the two days old mtime ...
    assert row.ctime_ms - written_ms > DAY_MS  # ... and set the ctime (the stat above: exactly)
    assert row.age_reference_ms == row.ctime_ms

    # The deletion check: waiting for the broker's delete delay, not a leftover past it. Broker 8 runs
    # (registered, as broker 0 registered when the cluster was deployed: its timestamp is the start).
    # "now" is a second after the rename, by the ctime the host stamped: young whatever the machine's speed
    now_ms = row.ctime_ms + 1_000
    client = KazooClient(hosts=deployed.zookeeper_connect)
    client.start(timeout=15)
    try:
        registration, _ = client.get(zk.broker_path(0))
        client.create(zk.broker_path(RENAMED_BROKER), registration, ephemeral=True)
        with KafkaZooKeeperHook("inventory_incident_zk") as zk_hook:
            young = check_deletions(
                zk_hook, _hook(deployed, broker_hosts=hosts), [RENAMED_TOPIC], now_ms=now_ms
            )
            # ctime cannot be backdated: "renamed two days ago" is the same directory seen two days later
            old = check_deletions(
                zk_hook, _hook(deployed, broker_hosts=hosts), [RENAMED_TOPIC], now_ms=now_ms + 2 * DAY_MS
            )
        client.delete(zk.broker_path(RENAMED_BROKER))  # stopped: it deletes nothing until it starts
        with KafkaZooKeeperHook("inventory_incident_zk") as zk_hook:
            stopped = check_deletions(
                zk_hook, _hook(deployed, broker_hosts=hosts), [RENAMED_TOPIC], now_ms=now_ms + 2 * DAY_MS
            )
    finally:
        client.stop()
        client.close()
    assert RENAMED_BROKER in young.inventoried and RENAMED_BROKER in old.inventoried
    [verdict] = young.verdicts
    assert verdict.verdict is Verdict.PENDING_DELETE_DELAY and verdict.causes == ()
    assert "broker 8: 1 -delete directory waiting for its kafka-delete-logs task" in " ".join(
        verdict.evidence
    )
    assert young.dirs[(RENAMED_BROKER, str(path))].age_ms < DELAY_MS
    [verdict] = old.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE and verdict.causes == (Cause.DELETE_DIRS_PAST_DELAY,)
    assert [(d.broker_id, d.path) for d in verdict.leftover_dirs] == [(RENAMED_BROKER, str(path))]
    assert 2 * DAY_MS - DELAY_MS < old.dirs[(RENAMED_BROKER, str(path))].age_ms < 2 * DAY_MS + DELAY_MS
    [verdict] = stopped.verdicts
    assert verdict.verdict is Verdict.PENDING_DELETE_DELAY and verdict.blocking_brokers == (RENAMED_BROKER,)
    assert "broker 8 is not running: it deletes its 1 -delete directory itself once it starts" in (
        " ".join(verdict.evidence)
    )

    # The Parquet file and the audit's input read from it: ctime recorded, the age counted from it
    partitions, _ = inventory_tables(inventory, "incident", "20261124T000000.000000Z")
    file = tmp_path / f"broker={RENAMED_BROKER}.parquet"
    pq.write_table(partitions, file)
    on_disk = pq.read_table(file, columns=["mtime", "ctime"])
    assert [on_disk.column(c).cast(pa.int64()).to_pylist() for c in ("mtime", "ctime")] == [
        [row.mtime_ms],
        [row.ctime_ms],
    ]
    [audit_row], _, _ = audit_job.read_inventory_rows([str(file)])
    assert (audit_row["mtime_ms"], audit_row["ctime_ms"]) == (row.mtime_ms, row.ctime_ms)
    assert now_ms - audit_row["age_reference_ms"] < DELAY_MS  # not past the delay ...
    assert now_ms - audit_row["mtime_ms"] > DELAY_MS  # ... which the mtime would have claimed
    assert now_ms + 2 * DAY_MS - audit_row["age_reference_ms"] > DELAY_MS  # two days on: past it


# ---------------------------------------------------------------------------------------------
# The operator, mapped over the brokers in a real Airflow DAG run
# ---------------------------------------------------------------------------------------------

DAG_FILE = textwrap.dedent(
    """
    import json
    import os
    from datetime import timedelta

    from airflow.sdk import DAG

    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerInventoryOperator,
        InventoryCoverageOperator,
        ListBrokerIdsOperator,
    )

    config = json.loads(os.environ["KAFKA_ZK_INVENTORY_TEST_DAG"])
    with DAG(
        "broker_inventory_test",
        schedule=None,
        default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
    ) as dag:
        brokers = ListBrokerIdsOperator(task_id="brokers", kafka_zookeeper_conn_id="inventory_incident_zk")
        inventory = BrokerInventoryOperator.partial(
            task_id="inventory",
            cluster="incident",
            base_path=config["base_path"],
            ssh_conn_id="brokers_ssh_dag",
            kafka_zookeeper_conn_id="inventory_incident_zk",
            broker_hosts=config["broker_hosts"],
            server_properties_path=config["server_properties"],
            connect_timeout=3,
        ).expand(broker_id=brokers.output)
        coverage = InventoryCoverageOperator(
            task_id="coverage",
            cluster="incident",
            base_path=config["base_path"],
            expected_broker_ids=brokers.output,
        )
        inventory >> coverage
    """
)


def test_operator_mapped_over_brokers_in_a_dag_run(
    deployed, connections, airflow_home, tmp_path, monkeypatch, capfd
):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "broker_inventory_test_dag.py").write_text(DAG_FILE)
    base = tmp_path / "artefacts"
    bundle = {
        "name": "inventory-test-dags",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
    }
    monkeypatch.setenv(
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        json.dumps([{**bundle, "kwargs": {"path": str(dags)}}]),
    )
    monkeypatch.setenv(
        "KAFKA_ZK_INVENTORY_TEST_DAG",
        json.dumps(
            {
                "base_path": str(base),
                # broker 3's host has the wrong key in the connection's known_hosts; broker 4 is down
                "broker_hosts": {"3": STOPPED[3], "4": UNREACHABLE},
                "server_properties": _server_properties(deployed),
            }
        ),
    )
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(dags)).get_dag("broker_inventory_test")
    run = dag.test()
    states = {(ti.task_id, ti.map_index): (ti.state, ti.try_number) for ti in run.get_task_instances()}
    assert states[("brokers", -1)][0] == "success"
    assert states[("coverage", -1)][0] == "success"
    mapped = {index: state for (task, index), state in states.items() if task == "inventory"}
    assert sorted(mapped) == [0, 1, 2, 3, 4, 5]  # broker ids 0..5 in order
    assert {i: s[0] for i, s in mapped.items()} == {
        0: "success",
        1: "success",
        2: "success",
        3: "failed",
        4: "failed",
        5: "success",
    }
    assert mapped[4][1] == 2  # unreachable: failed after its retry
    assert mapped[3][1] == 1  # host key mismatch: failed at once, no retry

    [ts_dir] = (base / "incident" / "inventory").iterdir()
    # the run key: when the run was due (run_after) and 8 hex of its run id, as every run folder
    assert re.fullmatch(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[0-9a-f]{8}", ts_dir.name)
    for broker in (0, 1, 2, 5):
        table = pq.read_table(ts_dir / f"broker={broker}" / "part-0.parquet")
        disk = read_broker(broker, deployed.hosts[broker].server_properties)
        assert table.num_rows == len(disk.replicas)
        assert set(table.column("dir_name").to_pylist()) == {r.path.name for r in disk.replicas}
        ids = dict(
            zip(table.column("dir_name").to_pylist(), table.column("topic_id").to_pylist(), strict=True)
        )
        assert ids == {r.path.name: (str(r.topic_id) if r.topic_id else None) for r in disk.replicas}
        summary = read_inventory_summary(str(ts_dir / f"broker={broker}" / "part-0.parquet"))
        assert summary["broker_id"] == broker and summary["facts"]["broker.id"] == broker
        log_dirs = pq.read_table(ts_dir / "_logdirs" / f"broker={broker}.parquet")
        assert log_dirs.column("meta_broker_id").to_pylist() == [broker]
    assert not (ts_dir / "broker=3").exists() and not (ts_dir / "broker=4").exists()
    names = (str(p.relative_to(ts_dir)) for p in ts_dir.rglob("*"))
    assert sorted(n for n in names if not n.startswith("_")) == [
        name for b in (0, 1, 2, 5) for name in (f"broker={b}", f"broker={b}/part-0.parquet")
    ]  # no temporary files left behind
    # Hive-style: a pyarrow dataset over the run finds the broker in the directory name
    dataset = ds.dataset(ts_dir, format="parquet", partitioning="hive")
    rows = dataset.to_table(columns=["broker", "broker_id"]).to_pylist()
    assert {r["broker"] for r in rows} == {0, 1, 2, 5} and all(r["broker"] == r["broker_id"] for r in rows)
    coverage = json.loads((ts_dir / "_coverage.json").read_text())
    assert coverage["status"] == "partial"
    assert coverage["inventoried"] == [0, 1, 2, 5] and coverage["not_inventoried"] == [3, 4]
    assert coverage["failed"]["3"].startswith("BrokerHostKeyMismatchError: broker 3 on 127.0.0.5:")
    assert coverage["failed"]["4"].startswith("BrokerHostUnreachableError: broker 4 on 127.0.0.9:")
    assert "clean" not in json.dumps(coverage).lower()
    # what the tasks logged (dag.test runs them in-process) never shows the connection's secrets
    captured = capfd.readouterr()
    logs = captured.out + captured.err
    assert "BrokerHostUnreachableError: broker 4 on 127.0.0.9" in logs
    connection = json.loads(os.environ["AIRFLOW_CONN_BROKERS_SSH_DAG"])
    assert connection["password"] not in logs
    assert Path(connection["extra"]["key_file"]).read_text().splitlines()[1] not in logs
