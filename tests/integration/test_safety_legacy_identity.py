"""The identity pin of Kafka < 2.4 broker hosts (meta.properties version 0 without ``cluster.id``)
against real parts: simulated 2.3 (and 3.3) clusters in a real ZooKeeper, their broker hosts
behind a real sshd on loopback, the deletion cleanup's quarantine through the operator.

Before, every broker-file change on a 0.11-2.3 cluster refused (no cluster.id to compare). A
``broker.id``-only rule would have let another cluster's host through (the first test shows that
host passes every other guard). Now the host is pinned by its configured server.properties
(zookeeper.connect chroot and ensemble, broker.id) and its registration naming the host SSH
reached, for a release < 2.4 only; everything else refuses and changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.versions import MATRIX_RELEASES, KafkaVersion
from airflow_provider_kafka_zk.maintenance import BrokerIdentityPinError, MaintenanceSession, RunIdentity
from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator
from airflow_provider_kafka_zk.testing.broker_processes import StandInBrokers
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import check_deletions

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + n}" for n in range(6))
LIVE_HOSTS = {0: ADDRESSES[0], 1: ADDRESSES[1], 2: ADDRESSES[2]}
OTHER_HOSTS = {0: ADDRESSES[3], 1: ADDRESSES[4], 2: ADDRESSES[5]}  # another cluster, same broker ids
SSH_CONN = "legacy_identity_ssh"
TS = "20260102T030405"
DAY_MS = 86_400_000


def _cluster(name: str, hosts: dict[int, str], kafka_version: str, seed: int) -> SimulatedCluster:
    """Three running brokers; ``old-logs`` deleted, its two ``-delete`` directories left on broker 2
    (they may move under a running broker: Kafka closed them before the rename)."""
    spec = ClusterSpec(
        name=name,
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in hosts.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=30),
            TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
        ),
        kafka_version=kafka_version,
        seed=seed,
    )
    cluster = SimulatedCluster(spec)
    topic_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", 2, [0, 1], kind=DirKind.DELETE, age_ms=2 * DAY_MS, topic_id=topic_id
    )
    return cluster


def _zk_connection(zookeeper_server, chroot: str) -> str:
    return json.dumps(
        {
            "conn_type": "kafka_zookeeper",
            "host": zookeeper_server.connect_string,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
        }
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def ssh_connection(sshd):
    fields = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(f"AIRFLOW_CONN_{SSH_CONN.upper()}", json.dumps(fields))
        yield SSH_CONN


_numbers = iter(range(1_000_000))


@pytest.fixture
def deploy(zookeeper_server, tmp_path_factory, ssh_connection, deletion_clock, opt_out_of_approval):
    """``deploy(name, hosts, release)``: a cluster in its own chroot and host root, every broker
    running (registered); (deployed, its connection id). The -delete directories are past the delay.
    The cluster file names it ``name``, opted out of approval: the cleanups here are automation (a
    real cleanup of a cluster that requires approval refuses before any I/O, issue 31)."""
    deletion_clock(2 * DAY_MS)
    opened = []
    patch = pytest.MonkeyPatch()

    def _deploy(name: str, hosts: dict[int, str], release: str) -> tuple[DeployedCluster, str]:
        number = next(_numbers)
        chroot = zookeeper_server.new_chroot(f"/kafka_legacy_{name}_")
        cluster = _cluster(name, hosts, release, seed=40 + number)
        deployed = DeployedCluster(
            cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp(f"legacy{number}")
        )
        opened.append(deployed)
        conn_id = f"legacy_zk_{number}"
        patch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", _zk_connection(zookeeper_server, chroot))
        opt_out_of_approval(name, conn_id)
        return deployed, conn_id

    yield _deploy
    for deployed in opened:
        deployed.close()
    patch.undo()


def _server_properties(root: Path) -> str:
    return str(root / "broker-{broker_id}" / "config" / "server.properties")


def _operator(conn_id: str, root: Path | None, base: Path, hosts=LIVE_HOSTS) -> TopicDeletionVerifyOperator:
    return TopicDeletionVerifyOperator(
        task_id="verify",
        cluster="live",
        base_path=str(base),
        kafka_zookeeper_conn_id=conn_id,
        ssh_conn_id=SSH_CONN,
        server_properties_path=_server_properties(root) if root is not None else None,
        broker_hosts=hosts,
        topics=["old-logs"],
        cleanup=True,
        dry_run=False,
        connect_timeout=3,
        deferrable=False,
        wait_timeout=0,
        poll_interval=0.5,
    )


def _disk(root: Path) -> dict[str, tuple]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = ("l", os.readlink(path))
        elif path.is_dir():
            out[str(path.relative_to(root))] = ("d",)
        else:
            out[str(path.relative_to(root))] = ("f", hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def _zookeeper(deployed: DeployedCluster) -> dict[str, bytes]:
    client = KazooClient(hosts=deployed.zookeeper_hosts)
    client.start(timeout=15)
    try:
        out, pending = {}, [deployed.chroot]
        while pending:
            path = pending.pop()
            out[path] = client.get(path)[0]
            pending += [f"{path.rstrip('/')}/{c}" for c in client.get_children(path)]
        return out
    finally:
        client.stop()
        client.close()


def _state(*deployments: DeployedCluster) -> list:
    return [(_disk(d.root), _zookeeper(d)) for d in deployments]


def _leftovers(deployed: DeployedCluster) -> set[str]:
    return {
        str(p)
        for log_dir in deployed.hosts[2].log_dirs
        for p in log_dir.iterdir()
        if p.name.startswith("old-logs-")
    }


def _meta(deployed: DeployedCluster, broker: int) -> list[str]:
    return [(d / "meta.properties").read_text() for d in deployed.hosts[broker].log_dirs]


def _properties(text: str) -> list[str]:
    """A Java properties file's lines without its comments: Kafka writes ``Properties.store``'s
    ``#<date>`` line, and two clusters deployed a second apart differ there only."""
    return [line for line in text.splitlines() if not line.startswith("#")]


def _refused(operator: TopicDeletionVerifyOperator) -> str:
    with pytest.raises(BrokerIdentityPinError) as refused:
        operator.execute({"ts_nodash": TS})
    return str(refused.value)


@pytest.mark.parametrize("release", ["2.3.1", "0.11.0.3"])
def test_a_pre_2_4_cluster_is_pinned_by_server_properties_and_registration_and_the_quarantine_moves(
    release, deploy, tmp_path
):
    deployed, conn_id = deploy("live", LIVE_HOSTS, release)
    # what a pre-2.4 broker writes: version 0, broker.id, no cluster.id
    for text in _meta(deployed, 2):
        assert "version=0" in text and "broker.id=2" in text and "cluster.id" not in text
    leftovers = _leftovers(deployed)
    assert len(leftovers) == 2 and all(p.endswith("-delete") for p in leftovers)

    # The damage before: the strict rule refused every broker-file change on such a cluster; a
    # caller that gathers no other proof still gets that refusal.
    host_hook = BrokerHostHook(
        SSH_CONN, conn_id, broker_hosts=LIVE_HOSTS, server_properties_path=_server_properties(deployed.root)
    )
    inventory = host_hook.inventory(2)
    meta = [(d.path, d.meta.broker_id, d.meta.cluster_id) for d in inventory.log_dirs]
    assert {m[2] for m in meta} == {None}
    with KafkaZooKeeperHook(conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster="live",
            artefact_dir=str(tmp_path / "s"),
            run=RunIdentity("d", "r", "t", 1, "h"),
            dry_run=False,
        ).open()
        try:
            with pytest.raises(BrokerIdentityPinError, match="gathered no other proof"):
                session.pin_broker(2, inventory.host, meta, 2)
            evidence = inventory.remote["identity_evidence"]
            assert evidence["server_properties"]["zookeeper.connect"] == deployed.zookeeper_connect
            assert ADDRESSES[2] in evidence["reached_hosts"]
            session.pin_broker(2, inventory.host, meta, 2, host_evidence=evidence)  # now: pinned
        finally:
            session.close()

    base = tmp_path / "artefacts"
    result = _operator(conn_id, deployed.root, base).execute({"ts_nodash": TS})
    assert [(v["topic"], v["verdict"]) for v in result] == [("old-logs", "deleted")]
    assert _leftovers(deployed) == set()
    quarantine = {p.name for p in deployed.hosts[2].root.glob(f"data/kafka-quarantine/{TS}/old-logs-*")}
    assert quarantine == {Path(p).name for p in leftovers}
    identity = json.loads((base / "live" / "deletions" / TS / "identity.json").read_text())["identity"]
    assert identity["brokers"] == {"2": {"host": ADDRESSES[2], "cluster_id": deployed.cluster.cluster_id}}


def test_another_clusters_host_with_the_same_broker_ids_is_refused(deploy, tmp_path):
    live, live_conn = deploy("live", LIVE_HOSTS, "2.3.1")
    other, _ = deploy("other", OTHER_HOSTS, "2.3.1")
    # The damage a broker.id-only rule would do: through the live cluster's connection, the other
    # cluster's broker 2 (same topic names, its own -delete leftovers) has meta.properties exactly
    # like the live broker's -- broker.id=2, no cluster.id -- and the verifier finds "leftovers".
    assert _properties(_meta(other, 2)[0]) == _properties(_meta(live, 2)[0])
    with KafkaZooKeeperHook(live_conn) as hook:
        check = check_deletions(
            hook,
            BrokerHostHook(
                SSH_CONN,
                live_conn,
                broker_hosts=OTHER_HOSTS,
                server_properties_path=_server_properties(other.root),
            ),
            ["old-logs"],
        )
    assert {d.path for d in check.leftovers(check.verdicts[0])} == _leftovers(other)
    assert {m[1] for m in check.disks[2].meta} == {2}  # broker.id agrees: that rule would move them

    before = _state(live, other)
    message = _refused(_operator(live_conn, other.root, tmp_path, hosts=OTHER_HOSTS))
    assert "refusing to touch broker 2 on 127.0.0.7" in message
    assert f"chroot '{other.chroot}'" in message and f"the connection's is '{live.chroot}'" in message
    assert "server.properties" in message and "broker-2/config/server.properties" in message
    assert "/brokers/ids/2 names ['127.0.0.4']" in message and "another host answered" in message
    assert _state(live, other) == before


def test_a_wrong_chroot_in_server_properties_refuses(deploy, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "2.3.1")
    path = deployed.hosts[2].server_properties
    path.write_text(path.read_text().replace(deployed.chroot, "/kafka_staging"))
    before = _state(deployed)
    message = _refused(_operator(conn_id, deployed.root, tmp_path))
    assert (
        f"{path} has zookeeper.connect chroot '/kafka_staging', the connection's is '{deployed.chroot}'"
        in message
    )
    assert "registered" not in message  # the host itself is the registered one
    assert _state(deployed) == before


def test_a_symlinked_server_properties_refuses(deploy, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "2.3.1")
    config = deployed.hosts[2].server_properties.parent
    real = config.with_name("config-real")
    config.rename(real)
    config.symlink_to(real)
    message = _refused(_operator(conn_id, deployed.root, tmp_path))
    assert f"{config} is a symlink" in message and "set server_properties_path to the real file" in message
    assert len(_leftovers(deployed)) == 2


@pytest.fixture
def broker_processes(deploy):
    """Stand-ins for the running brokers (command line ``kafka.Kafka <server.properties>``), so the
    inventory finds server.properties without ``server_properties_path``."""
    with StandInBrokers(lifetime_s=120) as brokers:

        def _start(deployed: DeployedCluster, release: str | None = None) -> None:
            brokers.start((host.server_properties for host in deployed.hosts.values()), release)

        yield _start


def test_without_server_properties_path_the_pin_refuses(deploy, broker_processes, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "2.3.1")
    broker_processes(deployed)
    before = _state(deployed)
    message = _refused(_operator(conn_id, None, tmp_path))
    assert "refusing to touch broker 2 on 127.0.0.4" in message
    assert "set server_properties_path" in message
    assert _state(deployed) == before


def test_a_cluster_id_less_meta_properties_on_a_3_x_cluster_refuses(deploy, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "3.3.1")
    for log_dir in deployed.hosts[2].log_dirs:  # a tampered (or wrong) host: cluster.id removed
        meta = log_dir / "meta.properties"
        meta.write_text(re.sub(r"(?m)^cluster\.id=.*\n", "", meta.read_text()))
        assert "cluster.id" not in meta.read_text()
    before = _state(deployed)
    message = _refused(_operator(conn_id, deployed.root, tmp_path))
    assert "version 5 (Kafka >= 2.7), yet no cluster.id" in message
    assert _state(deployed) == before


def _drop_ibp(deployed: DeployedCluster) -> None:
    """server.properties without inter.broker.protocol.version (a cluster never upgraded)."""
    for host in deployed.hosts.values():
        text = host.server_properties.read_text()
        host.server_properties.write_text(re.sub(r"(?m)^inter\.broker\.protocol\.version=.*\n", "", text))


def test_without_an_ibp_the_running_brokers_release_decides(deploy, broker_processes, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "2.3.1")
    _drop_ibp(deployed)
    # no running broker and no IBP: nothing says the release is < 2.4
    before = _state(deployed)
    message = _refused(_operator(conn_id, deployed.root, tmp_path / "a"))
    assert "cannot tell the cluster's Kafka release" in message and "inter.broker.protocol.version" in message
    assert _state(deployed) == before
    # the brokers run from kafka_2.12-2.3.1.jar: their release is read from the process started
    # with the configured server.properties, and the quarantine moves
    broker_processes(deployed, "2.3.1")
    result = _operator(conn_id, deployed.root, tmp_path / "b").execute({"ts_nodash": TS})
    assert [(v["topic"], v["verdict"]) for v in result] == [("old-logs", "deleted")]
    assert _leftovers(deployed) == set()


def test_a_broker_running_2_4_without_cluster_id_refuses(deploy, broker_processes, tmp_path):
    deployed, conn_id = deploy("live", LIVE_HOSTS, "2.3.1")
    _drop_ibp(deployed)
    broker_processes(deployed, "2.4.1")  # a 2.4 broker would have written cluster.id at its start
    before = _state(deployed)
    message = _refused(_operator(conn_id, deployed.root, tmp_path))
    assert "the broker runs Kafka 2.4.1, which writes cluster.id, yet there is none" in message
    assert _state(deployed) == before


@pytest.mark.parametrize("line", list(MATRIX_RELEASES))
def test_every_release_line_of_the_matrix_pins_its_broker_hosts(line, deploy, tmp_path):
    """Before: every line up to 2.3 refused. Now each line's hosts are pinned, by cluster.id from
    2.4 and by server.properties + registration before; a cluster.id-less file never passes 2.4+."""
    release = MATRIX_RELEASES[line]
    deployed, conn_id = deploy("live", LIVE_HOSTS, release)
    legacy = not KafkaVersion.parse(release).at_least("2.4")
    host_hook = BrokerHostHook(
        SSH_CONN, conn_id, broker_hosts=LIVE_HOSTS, server_properties_path=_server_properties(deployed.root)
    )
    with KafkaZooKeeperHook(conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster="live",
            artefact_dir=str(tmp_path),
            run=RunIdentity("d", "r", "t", 1, "h"),
            dry_run=True,
        ).open()
        try:
            for broker in LIVE_HOSTS:
                inventory = host_hook.inventory(broker)
                meta = [(d.path, d.meta.broker_id, d.meta.cluster_id) for d in inventory.log_dirs]
                assert {m[2] for m in meta} == ({None} if legacy else {deployed.cluster.cluster_id})
                evidence = inventory.remote["identity_evidence"]
                session.pin_broker(broker, inventory.host, meta, broker, host_evidence=evidence)
                if not legacy:  # the same host with cluster.id stripped is no longer this broker
                    stripped = [(d, b, None) for d, b, _ in meta]
                    with pytest.raises(BrokerIdentityPinError, match=r"Kafka >= 2\.[47]"):
                        session.pin_broker(broker, inventory.host, stripped, broker, host_evidence=evidence)
        finally:
            session.close()
    pinned = json.loads((tmp_path / "identity.json").read_text())["identity"]["brokers"]
    assert pinned == {
        str(b): {"host": h, "cluster_id": deployed.cluster.cluster_id} for b, h in LIVE_HOSTS.items()
    }
