"""The simulated cluster plays a ZooKeeper-to-KRaft migration driven from its hosts, as a migration DAG
would drive a real one: new server.properties written on each broker host, then the host's restart
command. The runtime's broker reads its file as it starts -- kept byte for byte -- and a change of mode is
the migration's roll (``SimulatedCluster.roll_broker_*``): into migration mode (the KRaft controller
claims ZooKeeper after the last one), to KRaft mode (gone from /brokers/ids), back, and out of migration
mode. Real ZooKeeper; the restart command run as a process, as over SSH.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import MetaProperties
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime

pytestmark = pytest.mark.integration

BROKERS = (0, 1, 2)


def _edit(text: str, set_: dict[str, str], remove: tuple[str, ...] = ()) -> str:
    """server.properties with keys set (in place, or appended) and removed, as an operator edits it."""
    lines = [line for line in text.splitlines() if line.split("=", 1)[0] not in remove]
    for key, value in set_.items():
        pattern = re.compile(rf"^{re.escape(key)}=")
        found = [i for i, line in enumerate(lines) if pattern.match(line)]
        if found:
            lines[found[0]] = f"{key}={value}"
        else:
            lines.append(f"{key}={value}")
    return "# written by the migration\n" + "\n".join(lines) + "\n"


MIGRATION_MODE = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.quorum.bootstrap.servers": "127.0.1.1:9093",
    "controller.listener.names": "CONTROLLER",
    "zookeeper.metadata.migration.enable": "true",
}
ZOOKEEPER_ONLY = (
    "broker.id",
    "inter.broker.protocol.version",
    "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
    "zookeeper.metadata.migration.enable",
)


@pytest.fixture
def world(zookeeper_server, tmp_path):
    """A small 3.9.0 cluster (the recorded one's brokers, one topic) with its KRaft controller provisioned."""
    cluster = SimulatedCluster(
        ClusterSpec(
            "k39",
            kafka_version="3.9.0",
            brokers=tuple(BrokerSpec(b, rack=f"r{b}", host=f"127.0.0.{b + 1}") for b in BROKERS),
            topics=(TopicSpec("mig-a", partitions=3, replication_factor=3, records_per_partition=20),),
        )
    )
    cluster.provision_kraft_controllers((3000,))
    chroot = zookeeper_server.new_chroot("/k39_runtime_")
    deployed = DeployedCluster(cluster, zookeeper_server.connect_string, chroot, tmp_path / "hosts")
    client = KazooClient(hosts=deployed.zookeeper_connect)
    client.start(timeout=15)
    runtime = ClusterRuntime(deployed, restart_dir=tmp_path / "restarts")
    with runtime:
        yield deployed, runtime, client
    client.stop()
    client.close()
    deployed.close()


def _roll(deployed: DeployedCluster, runtime: ClusterRuntime, broker: int, text: str) -> None:
    """Write the broker's new server.properties, then run its host's restart command."""
    deployed.hosts[broker].server_properties.write_text(text)
    command = runtime.restart_command_template().replace("{broker_id}", str(broker))
    done = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_migration_driven_through_the_hosts_plays_each_phase(world):
    deployed, runtime, client = world
    written = {}
    for broker in BROKERS:
        written[broker] = _edit(deployed.hosts[broker].server_properties.read_text(), MIGRATION_MODE)
        _roll(deployed, runtime, broker, written[broker])
        if broker != BROKERS[-1]:  # the KRaft controller waits for every broker
            assert client.exists(zk.CONTROLLER).ephemeralOwner != 0
    controller, stat = client.get(zk.CONTROLLER)
    assert stat.ephemeralOwner == 0 and json.loads(controller)["kraftControllerEpoch"] == 1
    assert json.loads(client.get(zk.MIGRATION)[0])["kraft_metadata_offset"] > 0
    assert sorted(client.get_children(zk.BROKER_IDS)) == ["0", "1", "2"]
    (controller_host,) = deployed.controller_hosts.values()  # what kafka-storage format left on its host
    controller_meta = MetaProperties.parse(
        (controller_host.metadata_log_dir / "meta.properties").read_bytes(), "meta.properties"
    )
    assert (controller_meta.version, controller_meta.node_id) == (1, 3000)
    assert controller_meta.cluster_id == deployed.cluster.cluster_id
    assert "process.roles=controller" in controller_host.server_properties.read_text()
    for broker in BROKERS:
        host = deployed.hosts[broker]
        assert host.server_properties.read_text() == written[broker]  # kept as written
        meta = MetaProperties.parse((host.log_dirs[0] / "meta.properties").read_bytes(), "meta.properties")
        assert meta.version == 0 and meta.directory_id is not None
        assert (host.log_dirs[0] / "__cluster_metadata-0").is_dir()

    for broker in BROKERS:  # "Migrating brokers to KRaft"
        text = _edit(written[broker], {"process.roles": "broker", "node.id": str(broker)}, ZOOKEEPER_ONLY)
        _roll(deployed, runtime, broker, text)
        assert str(broker) not in client.get_children(zk.BROKER_IDS)
    assert client.get_children(zk.BROKER_IDS) == []
    assert deployed.cluster.kraft_controller_active and all(
        b.online for b in deployed.cluster.brokers.values()
    )

    for broker in BROKERS:  # the rollback's first roll: ZooKeeper mode, migration flag kept
        _roll(deployed, runtime, broker, written[broker])
    assert sorted(client.get_children(zk.BROKER_IDS)) == ["0", "1", "2"]
    assert client.exists(zk.CONTROLLER).ephemeralOwner == 0  # the KRaft controller still holds it
    assert runtime.restarted == [*BROKERS, *BROKERS, *BROKERS]
