"""A fleet-sized cluster for the test harness (issue 35): 64 simulated brokers, each on its own loopback
address behind ``testing/sshd.py`` (one OpenSSH process serves at most 16 listen addresses: four
processes here), every broker inventoried over SSH and found to hold exactly what the simulator wrote;
and the one clear error when a listen address cannot be served.

Few partitions (two topics of 96, RF 3: nine replica directories per broker on average), so the module
stays quick; the benchmark (``benchmarks/fleet_benchmark.py``) runs the sizes that take minutes.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.operators.inventory import (
    BrokerGroupsOperator,
    BrokerInventoryOperator,
    InventoryCoverageOperator,
)
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster
from airflow_provider_kafka_zk.testing.simulator.spec import BrokerSpec, ClusterSpec, TopicSpec
from airflow_provider_kafka_zk.testing.sshd import MAX_LISTEN_ADDRESSES, SshServer, SshServerStartError

pytestmark = pytest.mark.integration

BROKERS = 64
ADDRESSES = tuple(f"127.64.{b // 200}.{b % 200 + 1}" for b in range(BROKERS))
SSH_CONN = "fleet_ssh"
ZK_CONN = "fleet_zk"
CLUSTER = "fleet"
TS = "20261122T000000.000000Z-fleet"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def deployed(zookeeper_server, tmp_path_factory):
    spec = ClusterSpec(
        name=CLUSTER,
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 4 + 1}", host=ADDRESSES[b]) for b in range(BROKERS)),
        topics=(
            TopicSpec("orders", partitions=96, replication_factor=3, records_per_partition=20),
            TopicSpec("payments", partitions=96, replication_factor=3, records_per_partition=20),
        ),
        min_insync_replicas=2,
    )
    with DeployedCluster(
        SimulatedCluster(spec),
        zookeeper_server.connect_string,
        zookeeper_server.new_chroot("/kafka_fleet_"),
        tmp_path_factory.mktemp("fleet-hosts"),
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def connections(sshd, deployed, zookeeper_server):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            f"AIRFLOW_CONN_{SSH_CONN.upper()}",
            json.dumps(sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=10)),
        )
        patch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            json.dumps(
                {
                    "conn_type": "kafkazookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": deployed.chroot},
                }
            ),
        )
        yield


def test_one_sshd_process_per_sixteen_hosts_each_host_answers(sshd):
    assert len(sshd.pids) == BROKERS // MAX_LISTEN_ADDRESSES == 4
    assert [len(group) for group in sshd.address_groups] == [16, 16, 16, 16]
    assert sshd.known_hosts_path.read_text().count(f"]:{sshd.port} ssh-ed25519 ") == BROKERS
    for address in ADDRESSES:
        with socket.create_connection((address, sshd.port), timeout=5) as sock:
            assert sock.recv(256).startswith(b"SSH-2.0-")


def test_every_one_of_64_brokers_is_inventoried_over_ssh_with_what_the_simulator_wrote(
    deployed, connections, tmp_path
):
    cluster = deployed.cluster
    assert {b.spec.host for b in cluster.brokers.values()} == set(ADDRESSES)
    base = tmp_path / "artefacts"
    # as the daily DAG does it: the brokers listed from ZooKeeper in groups, a task per group
    groups = BrokerGroupsOperator(
        task_id="inventory_groups", kafka_zookeeper_conn_id=ZK_CONN, groups=8
    ).execute({})
    assert groups == [list(range(g, g + 8)) for g in range(0, BROKERS, 8)]
    written = []
    for group in groups:
        written += BrokerInventoryOperator(
            task_id="inventory",
            broker_ids=group,
            cluster=CLUSTER,
            base_path=str(base),
            ssh_conn_id=SSH_CONN,
            kafka_zookeeper_conn_id=ZK_CONN,
            server_properties_path=str(deployed.root / "broker-{broker_id}" / "config" / "server.properties"),
            inventory_ts=TS,
        ).execute({})
    assert [w["broker_id"] for w in written] == list(range(BROKERS))
    coverage = InventoryCoverageOperator(
        task_id="coverage",
        cluster=CLUSTER,
        base_path=str(base),
        expected_broker_ids=sorted(cluster.brokers),
        inventory_ts=TS,
    ).execute({})
    assert coverage["status"] == "complete" and coverage["inventoried"] == list(range(BROKERS))
    run = base / CLUSTER / "inventory" / TS
    for broker in range(BROKERS):
        rows = pq.read_table(run / f"broker={broker}" / "part-0.parquet").to_pylist()
        expected = {(d.topic, d.partition): str(d.topic_id) for d in cluster.replica_dirs(broker_id=broker)}
        assert {(r["topic"], r["partition"]): r["topic_id"] for r in rows} == expected, broker
        assert all(r["host"] == ADDRESSES[broker] and not r["errors"] for r in rows)
    assert sum(len(cluster.replica_dirs(broker_id=b)) for b in range(BROKERS)) == 2 * 96 * 3


def test_a_host_address_that_cannot_be_served_is_one_clear_error(tmp_path):
    addresses = [f"127.65.0.{n}" for n in range(1, 41)]  # three sshd processes: 16 + 16 + 8
    server = SshServer(addresses, work_dir=tmp_path / "sshd", start_timeout=3)
    taken = addresses[35]  # in the third process's group
    with socket.socket() as blocker:
        blocker.bind((taken, server.port))  # bound, not listening: connections are refused
        with pytest.raises(SshServerStartError) as error:
            server.start()
    message = str(error.value)
    assert taken in message and f"port {server.port}" in message
    assert not server.is_running and server.pids == ()
    log = Path(server.log_path).read_text()
    assert f"Bind to port {server.port} on {taken} failed" in log
    server.close()


def test_a_group_with_an_unreachable_broker_writes_the_others_and_fails_for_a_retry(
    deployed, connections, tmp_path
):
    from airflow_provider_kafka_zk.operators.inventory import BrokerGroupInventoryError

    base = tmp_path / "artefacts"
    hosts = {b: ADDRESSES[b] for b in range(4)}
    hosts[2] = "127.64.9.9"  # nothing listens there
    operator = BrokerInventoryOperator(
        task_id="inventory",
        broker_ids=[0, 1, 2, 3],
        cluster=CLUSTER,
        base_path=str(base),
        ssh_conn_id=SSH_CONN,
        kafka_zookeeper_conn_id=ZK_CONN,
        broker_hosts=hosts,
        server_properties_path=str(deployed.root / "broker-{broker_id}" / "config" / "server.properties"),
        inventory_ts=TS,
        connect_timeout=2,
    )
    with pytest.raises(BrokerGroupInventoryError, match=r"broker 2: broker 2 on 127\.64\.9\.9"):
        operator.execute({})
    run = base / CLUSTER / "inventory" / TS
    assert sorted(p.name for p in run.glob("broker=*")) == ["broker=0", "broker=1", "broker=3"]
    failure = json.loads((run / "_failures" / "broker=2.json").read_text())
    assert failure["error_type"] == "BrokerHostUnreachableError" and failure["retryable"] is True
    coverage = InventoryCoverageOperator(
        task_id="coverage",
        cluster=CLUSTER,
        base_path=str(base),
        expected_broker_ids=[0, 1, 2, 3],
        inventory_ts=TS,
    ).execute({})
    assert coverage["status"] == "partial" and coverage["not_inventoried"] == [2]
