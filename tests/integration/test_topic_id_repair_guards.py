"""The topicId repair's guards (issue 23), one test per way it damaged a cluster, on real parts: the
simulated cluster in a real ZooKeeper, its broker hosts behind a real sshd (127.0.0.1-4), Kafka's
controller and broker restarts played by the simulator's runtime, the operators run in-process
(snapshot, inventory of every broker, plan, execute) as the DAG runs them.

Where a rule refuses, the exact state is compared: every znode (data, version) of the chroot and
every file (kind, size, sha256) under every broker host root (:mod:`airflow_provider_kafka_zk.
testing.cluster_state`).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LeaseHolder
from airflow_provider_kafka_zk.maintenance import MaintenanceRefusedError
from airflow_provider_kafka_zk.operators.inventory import BrokerInventoryOperator, InventoryCoverageOperator
from airflow_provider_kafka_zk.operators.topic_id_repair import (
    TopicIdRepairExecuteOperator,
    TopicIdRepairPlanOperator,
    TopicIdRepairRefusedError,
)
from airflow_provider_kafka_zk.testing.cluster_state import capture, differences
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, SimulatedCluster
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import (
    rolling_reset_cluster,
    topic_id_repair_cluster,
)

pytestmark = pytest.mark.integration

CLUSTER = "guards"
SSH_CONN = "guards_ssh"
_numbers = itertools.count()


class World:
    """One deployed cluster, its connections, and the repair's operators run in-process."""

    def __init__(
        self, zookeeper_server: Any, ssh_server: Any, tmp: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.server = zookeeper_server
        self.tmp = tmp
        self.patch = monkeypatch
        self.base = tmp / "artefacts"
        self.deployed: DeployedCluster | None = None
        self.conn_id = ""
        self.opt_out: Any = None  # the cluster file's entry of the deployed cluster (no approval step here)
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        self.client = KazooClient(hosts=zookeeper_server.connect_string)
        self.client.start(timeout=15)

    def deploy(self, cluster: SimulatedCluster) -> DeployedCluster:
        number = next(_numbers)
        chroot = self.server.new_chroot(f"/kafka_guards_{number}_")
        self.deployed = DeployedCluster(
            cluster, self.server.connect_string, chroot, self.tmp / f"hosts-{number}"
        )
        self.conn_id = f"guards_zk_{number}"
        self.patch.setenv(
            f"AIRFLOW_CONN_{self.conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": self.server.connect_string,
                    "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
                }
            ),
        )
        if self.opt_out is not None:
            self.opt_out(CLUSTER, self.conn_id)
        return self.deployed

    def close(self) -> None:
        if self.deployed is not None:
            self.deployed.close()
        self.client.stop()
        self.client.close()

    @property
    def hosts(self) -> dict[str, str]:
        assert self.deployed is not None
        return {str(b): f"127.0.0.{b + 1}" for b in self.deployed.cluster.brokers}

    @property
    def server_properties(self) -> str:
        assert self.deployed is not None
        return str(self.deployed.root / "broker-{broker_id}" / "config" / "server.properties")

    def state(self):
        assert self.deployed is not None
        return capture(self.client, [self.deployed.chroot], [self.deployed.root])

    def plan(self, name: str, **kw: Any) -> dict[str, Any]:
        """Safety snapshot, inventory of every broker, plan: as the DAG's first tasks."""
        assert self.deployed is not None
        with KafkaZooKeeperHook(self.conn_id) as hook:
            ref, _ = write_snapshot(
                str(self.base), CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        brokers = sorted(self.deployed.cluster.brokers)
        for broker_id in brokers:
            BrokerInventoryOperator(
                task_id=f"inventory_{broker_id}",
                broker_id=broker_id,
                cluster=CLUSTER,
                base_path=str(self.base),
                ssh_conn_id=SSH_CONN,
                kafka_zookeeper_conn_id=self.conn_id,
                broker_hosts=self.hosts,
                server_properties_path=self.server_properties,
                inventory_ts=name,
                connect_timeout=5,
            ).execute({})
        InventoryCoverageOperator(
            task_id="coverage",
            cluster=CLUSTER,
            base_path=str(self.base),
            expected_broker_ids=brokers,
            inventory_ts=name,
        ).execute({})
        return TopicIdRepairPlanOperator(
            task_id="plan",
            cluster=CLUSTER,
            base_path=str(self.base),
            snapshot_path=ref.path,
            inventory_path=str(self.base / CLUSTER / "inventory" / name),
            repair_ts=name,
            **kw,
        ).execute({})

    def execute(
        self, plan_dir: str, *, dry_run: bool, run_id: str = "guard-run", **kw: Any
    ) -> dict[str, Any]:
        kw.setdefault("poll_interval", 0.3)
        kw.setdefault("gate_timeout", 60)
        return TopicIdRepairExecuteOperator(
            task_id="execute",
            plan_dir=plan_dir,
            kafka_zookeeper_conn_id=self.conn_id,
            ssh_conn_id=SSH_CONN,
            broker_hosts=self.hosts,
            server_properties_path=self.server_properties,
            dry_run=dry_run,
            **kw,
        ).execute({"run_id": run_id})


@pytest.fixture
def world(zookeeper_server, ssh_server, tmp_path, monkeypatch, opt_out_of_approval) -> Iterator[World]:
    w = World(zookeeper_server, ssh_server, tmp_path, monkeypatch)
    w.opt_out = opt_out_of_approval
    try:
        yield w
    finally:
        w.close()


def _runtime(deployed: DeployedCluster, **kw: Any) -> ClusterRuntime:
    return ClusterRuntime(deployed, restart_dir=deployed.root.parent / f"restarts-{next(_numbers)}", **kw)


def _zk_id(client: KazooClient, chroot: str, topic: str) -> str | None:
    path = zk.topic_path(topic)
    decoded = zk.TopicAssignment.decode(client.get(chroot + path)[0], path)
    return str(decoded.topic_id) if decoded.topic_id else None


# ---------------------------------------------------------------------------------------------
# 1. A two-topic repair whose second znode changed after the plan writes nothing at all
# ---------------------------------------------------------------------------------------------


def test_a_second_topic_changed_after_the_plan_refuses_before_the_first_write(world):
    deployed = world.deploy(topic_id_repair_cluster())
    plan = world.plan("race", topics=["diverged", "precursor"])
    kinds = [s["kind"] for s in json.loads(Path(plan["plan_dir"], "plan.json").read_text())["steps"]]
    assert kinds == ["write_topic_id", "write_topic_id", "move_controller", "wait_healthy"]
    # an old client adds a partition to the second topic after the plan (its znode: new version, no id)
    deployed.cluster.old_client_adds_partitions("precursor", 5, client="2.7")
    deployed.sync()
    before = world.state()
    with _runtime(deployed), pytest.raises(MaintenanceRefusedError) as refused:
        world.execute(plan["plan_dir"], dry_run=False)
    assert "[znode-changed]" in str(refused.value) and "/brokers/topics/precursor" in str(refused.value)
    assert "nothing was written" in str(refused.value)
    assert differences(before, world.state()) == []  # diverged untouched, no controller move, no lease


def test_a_race_between_the_preflight_and_the_write_changes_nothing(world, monkeypatch):
    """The writes of one repair are one multi-op: a znode changed after the preflight fails all of them."""
    deployed = world.deploy(topic_id_repair_cluster())
    plan = world.plan("race2", topics=["diverged", "precursor"])
    chroot = deployed.chroot
    original_multi = KafkaZooKeeperHook.multi
    raced: list[str] = []

    def racing_multi(self, ops):
        if not raced and any(getattr(op, "path", "") == "/brokers/topics/precursor" for op in ops):
            data, stat = world.client.get(chroot + "/brokers/topics/precursor")
            world.client.set(chroot + "/brokers/topics/precursor", data, version=stat.version)  # someone else
            raced.append("precursor")
        return original_multi(self, ops)

    monkeypatch.setattr(KafkaZooKeeperHook, "multi", racing_multi)
    before = world.state()
    with (
        _runtime(deployed),
        pytest.raises(MaintenanceRefusedError, match="rolled back, nothing of the repair was written"),
    ):
        world.execute(plan["plan_dir"], dry_run=False)
    assert raced
    after = world.state()
    changed = differences(before, after)
    # only the racing writer's own change (a new version of precursor); diverged keeps its bytes
    assert len(changed) == 1 and "/brokers/topics/precursor" in changed[0], changed
    assert after.zk[chroot]["/brokers/topics/diverged"] == before.zk[chroot]["/brokers/topics/diverged"]


# ---------------------------------------------------------------------------------------------
# 2. A restart_command typo: the dry run refuses, the real run removes nothing
# ---------------------------------------------------------------------------------------------


def test_a_restart_command_typo_is_refused_by_the_dry_run_and_the_real_run_removes_nothing(world):
    deployed = world.deploy(rolling_reset_cluster())
    plan = world.plan("typo", topics=[])
    steps = json.loads(Path(plan["plan_dir"], "plan.json").read_text())["steps"]
    assert {s["kind"] for s in steps} >= {"reset_files", "restart_broker"}
    before = world.state()
    with _runtime(deployed) as runtime:
        typo = runtime.restart_command_template().replace("{broker_id}", "{broker}")
        for dry_run in (True, False):
            with pytest.raises(MaintenanceRefusedError) as refused:
                world.execute(plan["plan_dir"], dry_run=dry_run, restart_command=typo)
            text = str(refused.value)
            assert "[command-template]" in text and "restart_command template" in text
            assert "unknown placeholder {broker}" in text
        assert runtime.restarted == []
    assert differences(before, world.state()) == []  # no partition.metadata removed, no lease


# ---------------------------------------------------------------------------------------------
# 3. A cluster a KRaft controller is migrating: refused naming the migration, nothing written
# ---------------------------------------------------------------------------------------------


def test_a_kraft_migration_refuses_the_repair_and_every_other_mutation(world):
    deployed = world.deploy(topic_id_repair_cluster(kafka_version="3.6.2"))
    plan = world.plan("kraft", topics=["diverged", "precursor"])
    # the KRaft controller claims ZooKeeper; its metadata load then aborts on the precursor topic
    # (ZkTopicMigrationClient.iterateTopics, 3.9.0-rc3): ZooKeeper stays under its control all the same
    deployed.cluster.begin_kraft_migration(
        kraft_controller_id=3000, kraft_controller_epoch=4, metadata_migrated=False
    )
    deployed.sync()
    controller, stat = world.client.get(deployed.chroot + zk.CONTROLLER)
    assert stat.ephemeralOwner == 0 and b'"kraftControllerEpoch":4' in controller
    before = world.state()
    with _runtime(deployed):
        for dry_run in (True, False):
            with pytest.raises(MaintenanceRefusedError) as refused:
                world.execute(plan["plan_dir"], dry_run=dry_run)
            text = str(refused.value)
            assert "ZooKeeper-to-KRaft migration is in progress" in text
            assert "/migration exists (KRaft controller 3000" in text and "persistent znode" in text
    assert differences(before, world.state()) == []  # /controller not deleted, no topic znode written

    # the refusal is the session's: a drain, a cleanup, an election open one too
    from airflow_provider_kafka_zk.maintenance import MaintenanceSession, RunIdentity
    from airflow_provider_kafka_zk.maintenance.session import KraftMigrationInProgressError

    with KafkaZooKeeperHook(world.conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster=CLUSTER,
            artefact_dir=str(world.tmp / "other-run"),
            run=RunIdentity("kafka_zk_pre_maintenance_drain", "r", "execute", 1, "h"),
            dry_run=False,
        )
        with pytest.raises(KraftMigrationInProgressError, match="/migration exists"):
            session.open()
    assert differences(before, world.state()) == []


# ---------------------------------------------------------------------------------------------
# 4. A restart that would leave another topic's RF=1 partitions without a serving leader
# ---------------------------------------------------------------------------------------------


def test_a_restart_leaving_another_topics_rf1_partitions_leaderless_is_refused_naming_them(world):
    deployed = world.deploy(rolling_reset_cluster())
    assert deployed.cluster.unserved_partitions() == []
    before = world.state()
    with pytest.raises(TopicIdRepairRefusedError) as refused:
        world.plan("solo", topics=["split"])
    text = str(refused.value)
    assert "[restart-partitions-leaderless]" in text and "[restart-replicas-not-served]" in text
    assert "solo-0 (broker 0 is its only in-sync replica" in text and "solo-1 (broker 0" in text
    plan = json.loads(Path(world.base, CLUSTER, "topic-id-repair", "solo", "plan.json").read_text())
    assert plan["steps"] == []
    assert differences(before, world.state()) == []
    # repairing solo in the same run (its id written, the controller moved first) makes it safe
    with _runtime(deployed) as runtime:
        result = world.plan("solo-too", topics=["split", "solo"])
        world.execute(
            result["plan_dir"],
            dry_run=False,
            run_id="solo-too",
            restart_command=runtime.restart_command_template(),
        )
        assert runtime.restarted == [0, 2]
        with runtime._lock:
            assert deployed.cluster.unserved_partitions() == []


def test_the_restart_gate_waits_while_a_partition_has_no_leader(world):
    """A log dir that goes offline at the restart (its partition.metadata damaged after the
    preflight) leaves an RF=1 partition without a leader: no ISR or URP count shows it, the gate
    does and stops the run before the next broker."""
    deployed = world.deploy(rolling_reset_cluster())
    plan = world.plan("gate", topics=[])
    solo_dir = next(d for d in deployed.cluster.replica_dirs("solo", 0) if d.partition == 0)
    neighbour = next(
        d
        for d in deployed.cluster.replica_dirs(broker_id=0)
        if d.log_dir_index == solo_dir.log_dir_index and d.topic != "solo"
    )

    class DamageAtRestart(ClusterRuntime):
        def _restart_requested(self) -> None:
            if any(self.restart_dir.glob("0.*.request")) and not neighbour.metadata_unreadable:
                self.deployed.cluster.damage_partition_metadata(0, neighbour.topic, neighbour.partition)
            super()._restart_requested()

    restart_dir = deployed.root.parent / "restarts-gate"
    with DamageAtRestart(deployed, restart_dir=restart_dir) as runtime:
        with pytest.raises(MaintenanceRefusedError) as stopped:
            world.execute(
                plan["plan_dir"],
                dry_run=False,
                restart_command=runtime.restart_command_template(),
                gate_timeout=8,
            )
        text = str(stopped.value)
        assert "broker 0 did not pass its restart gate" in text
        assert "partitions without a leader (they had one before the run): " in text and "solo-0" in text
        assert "brokers not restarted yet: [2]" in text
        assert runtime.restarted == [0]  # broker 2 untouched


# ---------------------------------------------------------------------------------------------
# 5. A restart planned on a broker with an unreadable partition.metadata
# ---------------------------------------------------------------------------------------------


def test_a_restart_of_a_broker_with_an_unreadable_partition_metadata_is_refused(world):
    deployed = world.deploy(rolling_reset_cluster())
    plan = world.plan("unreadable", topics=[])  # a safe plan: brokers 0 and 2 restart
    victim = next(d for d in deployed.cluster.replica_dirs("healthy", 0))
    deployed.cluster.damage_partition_metadata(0, "healthy", victim.partition)
    deployed.sync()
    before = world.state()
    with _runtime(deployed) as runtime:
        for dry_run in (True, False):
            with pytest.raises(MaintenanceRefusedError) as refused:
                world.execute(
                    plan["plan_dir"], dry_run=dry_run, restart_command=runtime.restart_command_template()
                )
            text = str(refused.value)
            assert "[restart-replicas-not-served]" in text and f"healthy-{victim.partition}" in text
            assert "its partition.metadata is unreadable" in text and "offline" in text
        assert runtime.restarted == []
    assert differences(before, world.state()) == []
    # planned afresh, the plan itself refuses (the inventory read the damaged file)
    with pytest.raises(TopicIdRepairRefusedError, match=r"partition\.metadata is unreadable"):
        world.plan("unreadable-again", topics=["split", "solo"])


# ---------------------------------------------------------------------------------------------
# 6. The lease is renewed during a long file_reset; a run that lost it stops before its next write
# ---------------------------------------------------------------------------------------------


def _lease(world: World) -> LeaseHolder | None:
    assert world.deployed is not None
    node = world.client.exists(world.deployed.chroot + LEASE_PATH)
    if node is None:
        return None
    return LeaseHolder.decode(world.client.get(world.deployed.chroot + LEASE_PATH)[0])


def test_the_lease_is_renewed_during_a_long_restart_and_another_run_cannot_take_it(world):
    deployed = world.deploy(rolling_reset_cluster())
    plan = world.plan("lease", topics=[])
    outcome: dict[str, Any] = {}
    with _runtime(deployed) as runtime:
        slow = "sleep 14; " + runtime.restart_command_template()  # a restart longer than the lease's TTL
        worker = threading.Thread(
            target=lambda: outcome.update(
                result=_catch(
                    lambda: world.execute(
                        plan["plan_dir"],
                        dry_run=False,
                        restart_command=slow,
                        lease_ttl_s=10,
                        run_id="long-run",
                    )
                )
            )
        )
        worker.start()
        deadline = time.monotonic() + 60
        while _lease(world) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        first = _lease(world)
        assert first is not None and first.run_id == "long-run"
        time.sleep(12)  # past the first expiry: renewed meanwhile, while the restart command runs
        later = _lease(world)
        assert later is not None and later.expires_ms > first.expires_ms and later.since_ms == first.since_ms
        from airflow_provider_kafka_zk.maintenance import MaintenanceSession, RunIdentity
        from airflow_provider_kafka_zk.maintenance.session import MaintenanceLeaseHeldError

        with KafkaZooKeeperHook(world.conn_id) as hook:
            other = MaintenanceSession(
                hook,
                cluster=CLUSTER,
                artefact_dir=str(world.tmp / "drain-run"),
                run=RunIdentity("kafka_zk_pre_maintenance_drain", "drain-run", "execute", 1, "h"),
                dry_run=False,
            )
            with pytest.raises(MaintenanceLeaseHeldError, match="long-run"):
                other.open()
        worker.join(timeout=240)
        assert not worker.is_alive()
    result = outcome["result"]
    assert not isinstance(result, BaseException), result
    assert runtime.restarted == [0, 2] and _lease(world) is None  # given back at the end


def test_a_run_that_lost_its_lease_stops_before_its_next_write(world):
    deployed = world.deploy(rolling_reset_cluster())
    plan = world.plan("lost", topics=[])
    before_two = _broker_files(world, 2)
    outcome: dict[str, Any] = {}
    with _runtime(deployed) as runtime:
        slow = "sleep 6; " + runtime.restart_command_template()
        worker = threading.Thread(
            target=lambda: outcome.update(
                result=_catch(
                    lambda: world.execute(
                        plan["plan_dir"],
                        dry_run=False,
                        restart_command=slow,
                        lease_ttl_s=30,
                        run_id="losing-run",
                    )
                )
            )
        )
        worker.start()
        deadline = time.monotonic() + 60
        while not _files_removed(world, 0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _lease(world) is not None and _lease(world).run_id == "losing-run"
        # while broker 0 restarts, someone takes the cluster (another run, an operator by hand)
        path = deployed.chroot + LEASE_PATH
        data, stat = world.client.get(path)
        thief = json.loads(data)
        thief.update(dag_id="someone_else", run_id="theirs", expires_ms=thief["expires_ms"] + 3_600_000)
        world.client.set(path, json.dumps(thief).encode(), version=stat.version)
        worker.join(timeout=240)
        assert not worker.is_alive()
    result = outcome["result"]
    assert isinstance(result, MaintenanceRefusedError), result
    assert "is now held by DAG 'someone_else'" in str(result) and "stopping before the next change" in str(
        result
    )
    assert runtime.restarted == [0]  # broker 2 was not restarted ...
    assert _broker_files(world, 2) == before_two  # ... nor any of its files removed
    assert _lease(world).run_id == "theirs"  # and the other holder's lease is left alone


def _broker_files(world: World, broker: int) -> dict[str, Any]:
    """The broker's partition.metadata files (what a reset removes)."""
    assert world.deployed is not None
    files = world.state().disk[str(world.deployed.root)]
    return {
        k: v
        for k, v in files.items()
        if k.startswith(f"broker-{broker}/") and k.endswith("/partition.metadata")
    }


def _files_removed(world: World, broker: int) -> bool:
    assert world.deployed is not None
    progress = world.base / CLUSTER / "topic-id-repair" / "lost" / "progress.json"
    return progress.exists() and f"reset-files:{broker}" in json.loads(progress.read_text()).get(
        "completed", {}
    )


def _catch(call):
    try:
        return call()
    except BaseException as exc:  # handed to the test's thread
        return exc
