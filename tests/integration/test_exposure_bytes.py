"""RF=1 exposure bytes: the audit and the drain plan count the same ``.log`` bytes for the same data.

Issue 26: on a real 3.3.1 cluster the audit said "42,414,632 bytes" for 471,600 bytes of data: it
fell back to a directory's total size when its ``.log`` bytes were 0, and an empty partition's
active segment holds Kafka's preallocated sparse indexes -- ``.index`` 10,485,760 bytes and
``.timeindex`` 10,485,756 bytes of apparent size (``log.index.size.max.bytes`` = 10 MiB rounded
down to whole entries: ``AbstractIndex.resize``/``roundDownToExactMultiple``, 3.3.1). Two empty
partitions: 471,600 + 2 x 20,971,516 = 42,414,632. Against real parts: a simulated cluster in a
real ZooKeeper, its broker hosts behind a real sshd (127.0.0.1-4), the inventory operator, the
audit and the drain plan operator.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.operators.drain import DrainPlanOperator
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "exposure"
ZK_CONN = "exposure_zk"
SSH_CONN = "exposure_ssh"
EXPOSED = 1
PREALLOCATED_INDEXES = 10_485_760 + 10_485_756  # .index + .timeindex of an empty active segment


def _spec() -> ClusterSpec:
    return ClusterSpec(
        CLUSTER,
        brokers=tuple(BrokerSpec(b, host=f"127.0.0.{b + 1}") for b in range(3)),
        topics=(
            TopicSpec(
                "metrics-rf1",
                3,
                1,
                assignment={0: (EXPOSED,), 1: (EXPOSED,), 2: (0,)},
                records_per_partition=900,
            ),
            TopicSpec("empty-rf1", 2, 1, assignment={0: (EXPOSED,), 1: (EXPOSED,)}, records_per_partition=0),
            TopicSpec("replicated", 2, 3, records_per_partition=50),
        ),
    )


@pytest.fixture
def inventoried(zookeeper_server, ssh_server, tmp_path, monkeypatch):
    """The cluster deployed, a snapshot and an inventory of every broker in the artefact store."""
    chroot = zookeeper_server.new_chroot("/kafka_exposure_")
    hosts = tmp_path / "hosts"
    base = tmp_path / "artefacts"
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, hosts
    ) as deployed:
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{ZK_CONN.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot},
                }
            ),
        )
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        with KafkaZooKeeperHook(ZK_CONN) as hook:
            ref, _ = write_snapshot(str(base), CLUSTER, hook.snapshot(), source=hook.target_description())
        for broker_id in range(3):
            BrokerInventoryOperator(
                task_id=f"inventory_{broker_id}",
                broker_id=broker_id,
                cluster=CLUSTER,
                base_path=str(base),
                ssh_conn_id=SSH_CONN,
                kafka_zookeeper_conn_id=ZK_CONN,
                server_properties_path=str(hosts / "broker-{broker_id}" / "config" / "server.properties"),
                inventory_ts="inv",
                connect_timeout=5,
            ).execute({})
        yield deployed, base, ref.path


def test_audit_exposure_bytes_are_the_log_bytes_the_drain_plan_moves(inventoried):
    deployed, base, snapshot = inventoried
    rf1 = [("metrics-rf1", 0), ("metrics-rf1", 1), ("empty-rf1", 0), ("empty-rf1", 1)]
    [log_dir] = deployed.hosts[EXPOSED].log_dirs
    on_disk = {
        tp: {p.suffix: p.stat().st_size for p in (log_dir / f"{tp[0]}-{tp[1]}").iterdir()} for tp in rf1
    }
    log_bytes = sum(size for files in on_disk.values() for suffix, size in files.items() if suffix == ".log")
    assert log_bytes > 0
    for tp in [("empty-rf1", 0), ("empty-rf1", 1)]:  # no record, but Kafka's preallocated active indexes
        assert on_disk[tp][".log"] == 0
        assert on_disk[tp][".index"] + on_disk[tp][".timeindex"] == PREALLOCATED_INDEXES

    inputs = audit_job.load_inputs(
        str(base), CLUSTER, snapshot=snapshot, inventory=str(base / CLUSTER / "inventory" / "inv")
    )
    findings = audit_job.run_in_process(inputs)
    [exposure] = [f for f in findings if f.check == "rf1-exposure-broker" and f.broker_id == EXPOSED]
    assert exposure.evidence["partitions"] == 4
    audit_bytes = exposure.evidence["bytes"]

    plan = DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=[EXPOSED],
        snapshot_path=snapshot,
        inventory_ts="inv",
        scope="rf1",
        drain_ts="t1",
    ).execute({"run_id": "manual__exposure"})
    moves = [
        m
        for batch in json.loads((base / CLUSTER / "drain" / "t1" / "plan.json").read_text())["batches"]
        for m in batch
    ]
    assert sorted((m["topic"], m["partition"]) for m in moves) == sorted(rf1)
    plan_bytes = sum(m["size_bytes"] for m in moves)
    assert plan["moves"] == 4

    # one count: the .log bytes, in the audit as in the plan (the old fallback added 2 x 20,971,516)
    assert audit_bytes == plan_bytes == log_bytes
    assert f"{log_bytes} bytes" in exposure.summary
