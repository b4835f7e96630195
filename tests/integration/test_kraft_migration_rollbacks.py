"""The migration's runs the first module leaves out, on the same real parts (a real ZooKeeper, the
broker and controller hosts behind a real sshd, the simulator answering the cluster file's commands;
see test_kraft_migration_runs.py, whose ``migration`` fixture this module shares):

* the rollback from the PARTIAL rolls -- the roll into migration mode stopped after one broker (the
  others in plain ZooKeeper mode), and the roll to KRaft stopped after one broker (the others
  ZooKeeper-mode brokers in migration mode) -- each stopped the way a real roll stops: a restart
  command that fails on the next broker (``systemctl`` refusing, exit 1, the broker untouched). The
  phase is named from the signals, the back runs return the cluster to ZooKeeper mode with no partition
  offline and ``/migration`` gone; a retry of the stopped run runs the failed restart again;
* a successful finalization end to end and what comes after it: no way back, no forward, and no writer
  of the provider writes the ZooKeeper the cluster left (its refusal says so);
* the traps bound to a release, each planted alone in the recorded cluster run at a release that has
  the bug (the brokers' release read from their processes' jars by the inventory, as the DAG reads
  it), refused before any change and named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_kraft_migration_runs as runs  # the shared fixture and helpers (tests/integration is on sys.path)

from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.logdir import parse_java_properties
from airflow_provider_kafka_zk.kafka.safety import KRAFT_FINALIZED_PATH
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.operators.kraft_migration import (
    KraftMigrationPlanOperator,
    KraftMigrationRefusedError,
)
from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster

pytestmark = pytest.mark.integration

migration = runs.migration  # the fixture, shared
BROKERS, CLUSTER, ZK_CONN, SSH_CONN = runs.BROKERS, runs.CLUSTER, runs.ZK_CONN, runs.SSH_CONN
Migration, _phase, _rollback_to_zookeeper = runs.Migration, runs._phase, runs._rollback_to_zookeeper


def _plan(m: Migration, direction: str) -> Path:
    m.runs += 1
    plan = KraftMigrationPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        direction=direction,
        base_path=str(m.base),
        plan_ts=f"run{m.runs:02d}",
    ).execute({})
    return Path(plan["plan_dir"])


def _plan_record(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "plan.json").read_text())


def _modes(m: Migration) -> dict[int, str]:
    """Each broker's mode as its server.properties says it."""
    out = {}
    for broker in BROKERS:
        props = m.broker_file(broker)
        if props.get("process.roles") == "broker":
            out[broker] = "kraft"
        elif props.get("zookeeper.metadata.migration.enable") == "true":
            out[broker] = "migration"
        else:
            out[broker] = "zookeeper"
    return out


@pytest.mark.timeout(1200)
def test_a_roll_into_migration_mode_stopped_after_one_broker_is_named_and_rolled_back(migration):
    """Hybrid: the roll into migration mode restarts broker 1, then broker 2's restart command fails
    (twice: the stopped run and its retry); broker 0, the ZooKeeper-mode controller and last in the
    order, is untouched. The phase read is brokers-in-migration-mode and one back run returns the
    cluster to ZooKeeper mode (deprovisioned, /migration gone, no partition offline)."""
    m = migration(failing_restarts={2: 2})
    assert _phase(m.run("forward")) == "controllers-provisioned"
    folder = _plan(m, "forward")
    rolls = [s["broker_id"] for s in _plan_record(folder)["steps"] if s["kind"] == "roll_broker"]
    assert rolls == [1, 2, 0]  # the ZooKeeper-mode controller (broker 0) last
    stopped = r"Broker 2 was not restarted .* brokers not restarted yet: \[0\]"
    with pytest.raises(Exception, match=r"(?s)Interactive authentication required.*" + stopped):
        m.execute(folder)
    assert _modes(m) == {0: "zookeeper", 1: "migration", 2: "migration"}  # 2: written, not restarted
    # a retry (clear the task) runs broker 2's restart again instead of gating one that never happened
    with pytest.raises(Exception, match=stopped):
        m.execute(folder)
    assert m.runtime.restart_requests.count(2) == 2 and m.runtime.restart_requests.count(0) == 0
    assert m.offline_partitions() == []

    back = _plan(m, "back")
    plan = _plan_record(back)
    assert plan["from_phase"] == "brokers-in-migration-mode", plan["signals"]
    notes = " ".join(plan["signals"]["notes"])
    assert "broker 2" in notes and "restart pending" in notes
    kinds = [(s["kind"], s.get("node_id", s.get("broker_id"))) for s in plan["steps"]]
    assert ("roll_broker", 0) not in kinds  # broker 0 never left plain ZooKeeper mode
    assert ("roll_broker", 1) in kinds and ("roll_broker", 2) in kinds
    m.execute(back)
    assert m.offline_partitions() == []
    _assert_zookeeper_mode(m)


@pytest.mark.timeout(1500)
def test_a_roll_to_kraft_stopped_after_one_broker_is_named_and_rolled_back(migration):
    """The roll to KRaft restarts broker 0 as a KRaft broker, then broker 1's restart command fails:
    broker 0 KRaft, 1 and 2 ZooKeeper-mode brokers in migration mode (1's file already says KRaft).
    The phase read is rolling-brokers-to-kraft; back runs: roll 1 (broker 0 and broker 1's file back),
    then the revert to ZooKeeper mode."""
    m = migration()
    assert _phase(m.run("forward")) == "controllers-provisioned"
    assert _phase(m.run("forward")) == "dual-write-zk-brokers"
    m.runtime.failing_restarts[1] = 1
    folder = _plan(m, "forward")
    with pytest.raises(Exception, match=r"Broker 1 was not restarted .* brokers not restarted yet: \[2\]"):
        m.execute(folder)
    assert _modes(m) == {0: "kraft", 1: "kraft", 2: "migration"}  # 1: written, not restarted
    assert m.offline_partitions() == []

    back = _plan(m, "back")
    plan = _plan_record(back)
    assert plan["from_phase"] == "rolling-brokers-to-kraft", plan["signals"]
    assert plan["to_phase"] == "dual-write-zk-brokers"
    registrations = plan["signals"]["kraft_registrations"]
    assert registrations["0"] is True and registrations["1"] is False and registrations["2"] is False
    writes = [s["node_id"] for s in plan["steps"] if s["kind"] == "write_node_config"]
    assert writes == [0, 1]  # the files the forward run kept (migration mode)
    m.execute(back)
    assert m.offline_partitions() == []
    assert _modes(m) == {0: "migration", 1: "migration", 2: "migration"}
    assert _rollback_to_zookeeper(m, 1) == ["zookeeper"]
    _assert_zookeeper_mode(m)


def _assert_zookeeper_mode(m: Migration) -> None:
    assert _modes(m) == dict.fromkeys(BROKERS, "zookeeper")
    assert m.znode("/migration") is None and m.offline_partitions() == []
    controller = json.loads(m.znode("/controller"))
    assert controller["brokerid"] in BROKERS and controller["kraftControllerEpoch"] == -1
    assert not Path(m.controller.log_dir).exists()  # the controller's storage renamed aside


@pytest.mark.timeout(1800)
def test_finalization_end_to_end_then_no_way_back_and_no_writer_touches_zookeeper(
    migration, zookeeper_server, tmp_path
):
    """Forward to dual-write with KRaft brokers, then the finalization: the controller's
    zookeeper.metadata.migration.enable and zookeeper.connect removed (docs/ops.html 3.9 "Finalizing the
    migration"), the controller restarted behind its gate, POST_MIGRATION in the metadata log, the
    finalization recorded under the provider's znode. Then: a back run refused (no way back), a forward
    run refused, and a writer of the provider refused before any write, saying the cluster left
    ZooKeeper; the audit writes nothing and raises no incident."""
    m = migration()
    for expected in ("controllers-provisioned", "dual-write-zk-brokers", "dual-write-kraft-brokers"):
        assert _phase(m.run("forward")) == expected
    before = parse_java_properties(Path(m.controller.config_path).read_bytes(), "controller")
    assert before["zookeeper.metadata.migration.enable"] == "true" and before["zookeeper.connect"]
    final = m.run("forward")
    plan = _plan_record(final["folder"])
    assert plan["to_phase"] == "finalized"
    assert [s["kind"] for s in plan["steps"]] == [
        "check_finalize",
        "write_node_config",
        "controller_command",
        "wait_for_migration",
        "record_finalized",
    ]
    assert {t["issue"]: t["status"] for t in plan["traps"]}["KAFKA-20960"] == "clear"
    assert _phase(final) == "finalized"
    after = parse_java_properties(Path(m.controller.config_path).read_bytes(), "controller")
    assert not [k for k in after if k.startswith("zookeeper.")]
    assert {k: v for k, v in after.items() if not k.startswith("zookeeper.")} == {
        k: v for k, v in before.items() if not k.startswith("zookeeper.")
    }
    log = (Path(m.controller.log_dir).parent / "logs" / "server.log").read_text()
    assert "Completing the ZK migration since this controller was configured with" in log
    record = json.loads(m.znode(KRAFT_FINALIZED_PATH))
    assert record["finalized"] is True and record["controllers"] == [3000]
    assert m.offline_partitions() == []
    # ZooKeeper as the last dual write left it: the KRaft controller's /controller, /migration, no broker
    assert json.loads(m.znode("/controller"))["brokerid"] == 3000
    assert json.loads(m.znode("/migration"))["kraft_metadata_offset"] > 0

    tree = zookeeper_server.tree(m.chroot)
    with pytest.raises(KraftMigrationRefusedError, match=r"finalized: it cannot be reverted"):
        m.run("back")
    with pytest.raises(KraftMigrationRefusedError, match=r"finalized: nothing to move forward"):
        m.run("forward")

    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
    from airflow_provider_kafka_zk.maintenance import MaintenanceSession, RunIdentity
    from airflow_provider_kafka_zk.maintenance.session import KraftMigrationInProgressError

    with KafkaZooKeeperHook(ZK_CONN) as hook:
        session = MaintenanceSession(
            hook,
            cluster=CLUSTER,
            artefact_dir=str(tmp_path / "writer"),
            run=RunIdentity("kafka_zk_pre_maintenance_drain", "r", "execute", 1, "h"),
            dry_run=False,
        )
        with pytest.raises(KraftMigrationInProgressError) as refused:
            session.open()
    text = str(refused.value)
    assert "the cluster left ZooKeeper" in text and "no way back" in text and "Nothing was changed" in text

    from airflow_provider_kafka_zk.spark_jobs import audit as audit_job

    audit = m.verify_with_audit(final["folder"])
    assert audit["phase"] == "finalized"
    findings = audit_job.read_findings(str(final["folder"] / "audit-after"))
    (left,) = [f for f in findings if f.check.startswith("kraft-migration")]
    assert left.check == "kraft-migration-finalized" and "The cluster left ZooKeeper" in left.summary
    assert not [f for f in findings if f.severity >= Severity.ERROR], [(f.check, f.summary) for f in findings]
    assert (
        zookeeper_server.tree(m.chroot) == tree
    )  # nothing written by the refused runs, the writer or the audit


def _user_quota(name: str) -> Any:
    def plant(c: SimulatedCluster) -> None:
        c.set_quota("users", name, "producer_byte_rate", "1048576")

    return plant


def _reassigning(c: SimulatedCluster) -> None:
    """``kafka-reassign-partitions --execute`` (mig-b-1 from [1, 2] to [1, 0]) whose new replica on broker 0
    has not caught up yet: the topic znode's adding/removing replicas say it runs."""
    c.start_reassignment({("mig-b", 1): (1, 0)}, through_admin_api=True)


# Each trap of kafka/kraft_migration_traps.py bound to a release, on a release that has the bug: the first
# release tags containing each fix in apache/kafka (git tag --contains <fix commit>):
#   KAFKA-16120 7486223d9e39 (3.6.2), 4280df481619 (3.7.0)
#   KAFKA-16222 c74a9832df47 (3.6.2), 81d5084ca9fe (3.7.1), 34d365fd8a8e (3.8.0)
#   KAFKA-16411 fbff947d2595 (3.6.2), fedf8cfa7a2c (3.7.1), 8d914b543d5d (3.8.0)
#   KAFKA-15009 82dae82de3df (3.5.0)
#   KAFKA-14970 56f732dbaf7c (3.5.0)
RELEASE_TRAPS = {
    "KAFKA-16120": ("3.6.1", _reassigning, "mig-b-1"),
    "KAFKA-16222": ("3.7.0", _user_quota("alice%40example.com"), "users/alice%40example.com"),
    "KAFKA-16411": ("3.6.1", _user_quota("<default>"), "users/<default>"),
    "KAFKA-15009": ("3.4.1", lambda c: c.add_acl("Topic", "mig-a", "User:alice", "Read"), "1 ACL entries"),
    "KAFKA-14970": ("3.4.1", lambda c: c.add_scram_credential("alice"), "1 SCRAM credentials"),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("issue", sorted(RELEASE_TRAPS))
def test_a_release_bound_trap_planted_alone_is_refused_naming_it(migration, issue):
    release, plant, evidence = RELEASE_TRAPS[issue]
    m = migration(kafka_version=release)
    m.runtime.change(plant)
    inventory = m.inventory("inventory")
    files = {p: p.read_bytes() for p in m.deployed.root.rglob("*.properties")}
    with pytest.raises(KraftMigrationRefusedError, match=rf"\[{issue} refused\].*{release}") as refused:
        m.run("forward", inventory=inventory)
    assert evidence in str(refused.value)
    (folder,) = sorted((m.base / CLUSTER / "kraft-migration").iterdir())
    plan = _plan_record(folder)
    # from the brokers' jars (the IBP alone would leave it unknown)
    assert KafkaVersion.parse(plan["release"]) == KafkaVersion.parse(release)
    refused_traps = [t["issue"] for t in plan["traps"] if t["status"] == "refused"]
    assert refused_traps == [issue], plan["traps"]  # planted alone: no other trap fires
    assert plan["refusals"] and all(issue in r for r in plan["refusals"]), plan["refusals"]
    # nothing changed: no controller file, no /migration, the brokers' files as they were
    assert not Path(m.controller.config_path).exists() and m.znode("/migration") is None
    assert {p: p.read_bytes() for p in m.deployed.root.rglob("*.properties")} == files
