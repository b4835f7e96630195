"""The daily audit, the KRaft readiness report and every writer's refusal read each real phase of a
ZooKeeper-to-KRaft migration correctly: the znodes a real Kafka 3.9.0 cluster held at that phase
(tests/fixtures/real-kafka-3.9-migration), with each broker's server.properties and disk as the simulator
writes them for that phase (held to the same recording by test_simulator_golden_migration).

No false incident (brokers in KRaft mode missing from /brokers/ids are not "down", their partitions are
not "offline"; the persistent /controller is not a fault), the phase named as an operator knows it, and
what to do next -- with what Kafka's docs get wrong corrected (``deleteall``, the ``/migration`` the
documented rollback leaves). The same on a real ZooKeeper and sshd: tests/integration/test_migration_phases.py.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka import audit as rules
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.kraft_migration import (
    classify,
    migration_evidence,
    migration_state,
    refusal,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_phase import Phase
from airflow_provider_kafka_zk.kafka.kraft_readiness import (
    BrokerConfig,
    ReadinessInputs,
    ZooKeeperExtras,
    assess,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.spark_jobs.audit import cluster_facts
from airflow_provider_kafka_zk.testing.in_process import audit_and_assess
from airflow_provider_kafka_zk.testing.simulator.recorded_migration import (
    PHASES,
    RecordedMigration,
    RecordedPhase,
)
from airflow_provider_kafka_zk.testing.simulator.rows import (
    audit_dirs,
    inventory_summaries,
    rows_from_zk_dump,
)

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.9-migration"
CLUSTER = "k39"

# what each phase must be called, and words its next step must hold (forward and back)
EXPECTED = {
    RecordedPhase.ZK_MODE: (None, None, ()),
    RecordedPhase.CONTROLLER_PROVISIONED: (
        Phase.CONTROLLERS_PROVISIONED,
        "controllers provisioned; brokers in ZooKeeper mode",
        (
            "'Enter Migration Mode on the Brokers'",
            "deleteall /migration",
            "not 'listener.security.property.map'",
        ),
    ),
    RecordedPhase.BROKERS_IN_MIGRATION_MODE: (
        Phase.DUAL_WRITE_ZK_BROKERS,
        "dual-write; brokers in ZooKeeper mode (migration mode)",
        ("'Migrating brokers to KRaft'", "process.roles=broker", "deleteall", "KAFKA-17146"),
    ),
    RecordedPhase.BROKERS_IN_KRAFT_MODE: (
        Phase.DUAL_WRITE_KRAFT_BROKERS,
        "dual-write; every broker in KRaft mode (not finalized)",
        ("'Finalizing the migration'", "no way back", "back to ZooKeeper mode with the migration flag"),
    ),
    RecordedPhase.ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE: (
        Phase.DUAL_WRITE_ZK_BROKERS,
        "dual-write; brokers in ZooKeeper mode (migration mode)",
        ("stop every KRaft controller", "deleteall", "only once the controllers are down"),
    ),
    RecordedPhase.ROLLBACK_CONTROLLER_DEPROVISIONED: (
        Phase.REVERTING,
        "rollback; ZooKeeper controller back, brokers 0, 1, 2 still in migration mode",
        (
            "Finish the rollback",
            "without zookeeper.metadata.migration.enable",
            "deleteall /migration",
            "KAFKA-17146",
        ),
    ),
    RecordedPhase.ROLLBACK_COMPLETE: (
        Phase.ZOOKEEPER,
        "rolled back to ZooKeeper mode; /migration left behind",
        (
            "Delete /migration",
            "deleteall /migration",
            "no rmr",
            "KAFKA-17146",
            "refuse while /migration exists",
        ),
    ),
}


def real_rows(phase: RecordedPhase):
    dump = json.loads((GOLDEN / "zookeeper" / f"{phase.value}.json").read_text())
    for z in dump["znodes"]:
        z["path"] = z["path"][len(dump["root"]) :] or "/"
    return rows_from_zk_dump(dump)


def summaries(cluster) -> dict[int, dict]:
    """Each broker's inventory summary: its server.properties, its running process's release."""
    return inventory_summaries(cluster, "3.9.0", zookeeper_connect="127.0.0.1:42181/k39")


@pytest.fixture(scope="module")
def phases() -> dict[RecordedPhase, tuple[ClusterState, list, object, dict]]:
    """Per phase: the real znodes' model, the audit's findings, the readiness report, the summaries."""
    migration = RecordedMigration()
    out = {}
    for phase in PHASES:
        cluster = migration.play_to(phase)
        inventory = summaries(cluster)
        state, findings, report = audit_and_assess(
            CLUSTER,
            real_rows(phase),
            inventory,
            audit_dirs(cluster),
            user_configs={},
            controller_node_ids=(3000,),
        )
        out[phase] = (state, findings, report, inventory)
    return out


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_the_daily_audit_names_each_real_phase_and_raises_no_false_incident(phases, phase):
    _, findings, _, _ = phases[phase]
    expected_phase, stage, words = EXPECTED[phase]
    incidents = [
        (f.check, f.severity.name, f.summary[:160]) for f in findings if f.severity >= Severity.ERROR
    ]
    assert incidents == [], incidents
    assert not [f for f in findings if f.check in ("broker-down", "offline-partitions", "controller")]
    migration = [f for f in findings if f.check.startswith("kraft-migration")]
    if expected_phase is None:
        assert migration == []
        return
    (finding,) = migration
    assert finding.check == "kraft-migration"
    assert finding.evidence["phase"] == expected_phase.value and finding.evidence["stage"] == stage
    assert stage in finding.summary
    for word in words:
        assert word in finding.action, (word, finding.action)
    # /migration left behind is what a person must act on (writers refuse, KAFKA-17146), the rest is state
    assert finding.severity is (
        Severity.WARNING if expected_phase in (Phase.REVERTING, Phase.ZOOKEEPER) else Severity.INFO
    )


def test_brokers_in_kraft_mode_are_serving_not_down(phases):
    """Phase 03: /brokers/ids is empty while all three brokers serve in KRaft mode."""
    state, findings, _, inventory = phases[RecordedPhase.BROKERS_IN_KRAFT_MODE]
    assert state.brokers == {}
    facts = cluster_facts(CLUSTER, state, inventory, list(inventory), int(time.time() * 1000))
    assert facts.live_brokers == {0, 1, 2} and facts.controller_live
    (finding,) = [f for f in findings if f.check == "kraft-migration"]
    assert finding.evidence["kraft_mode_brokers"] == [0, 1, 2]
    assert "brokers in KRaft mode missing from /brokers/ids are how Kafka migrates" in finding.action
    # leadership moved by the rolls: the KRaft controller rebalances it, no ZooKeeper write helps
    imbalance = [f for f in findings if f.check == "preferred-leader-imbalance"]
    assert imbalance and all(f.severity is Severity.INFO for f in imbalance)
    assert all(
        "KRaft controller 3000" in f.action and "kafka-leader-election.sh" in f.action for f in imbalance
    )
    assert all("run kafka_zk_post_maintenance's election" not in f.action for f in imbalance)


def test_without_the_inventory_an_unregistered_broker_during_dual_write_is_said_to_be_unknowable(phases):
    """No server.properties read: ZooKeeper alone cannot tell a KRaft-mode broker from a stopped one, and
    the findings say so instead of pretending."""
    state, _, _, _ = phases[RecordedPhase.BROKERS_IN_KRAFT_MODE]
    found = migration_state(state)
    assert found.unknown_mode == (0, 1, 2)
    assert "not in ZooKeeper (KRaft mode or down: not inventoried)" in found.stage
    assert "kafka-metadata-quorum.sh" in found.next_step
    facts = cluster_facts(CLUSTER, state, {}, [], int(time.time() * 1000))
    findings = rules.audit(state, rules.gather_evidence(state, []), facts)
    down = [f for f in findings if f.check == "broker-down"]
    assert {f.broker_id for f in down} == {0, 1, 2}
    assert all("ZooKeeper cannot tell which" in f.summary for f in down)
    (migration,) = [f for f in findings if f.check == "kraft-migration"]
    assert migration.severity is Severity.WARNING


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_the_readiness_report_names_the_phase_and_the_next_step(phases, phase):
    _, _, report, _ = phases[phase]
    expected_phase, stage, words = EXPECTED[phase]
    assert report.blockers == (), [(c.check, c.evidence) for c in report.blockers]
    if expected_phase is None:
        assert report.verdict == "ready to migrate"
        return
    state = "/migration left over" if expected_phase is Phase.ZOOKEEPER else "migrating"
    assert report.verdict == f"{state} ({expected_phase.value})"
    text = report.text()
    assert f"phase {expected_phase.value} ({stage})" in text and "Next: " in text
    assert all(word in text for word in words)
    assert report.to_dict()["migration"]["stage"] == stage


def test_readiness_checks_a_kraft_mode_broker_by_kraft_rules(phases):
    """Phase 03: the brokers have no IBP and no broker.id (node.id stands for it) -- not blockers; a KRaft
    broker whose node.id is not its id is one."""
    state, findings, report, inventory = phases[RecordedPhase.BROKERS_IN_KRAFT_MODE]
    ibp = report.check("inter-broker-protocol")
    assert "in KRaft mode: no IBP" in ibp.evidence
    assert "brokers 0, 1 and 2 in KRaft mode" in report.check("migration-config").evidence
    wrong = copy.deepcopy(inventory)
    wrong[2]["facts"]["migration_settings"]["node.id"] = "7"
    brokers = {b: BrokerConfig.from_inventory_summary(b, s) for b, s in wrong.items()}
    inputs = ReadinessInputs(CLUSTER, state, findings, brokers, [], ZooKeeperExtras(), {}, (3000,))
    check = assess(inputs).check("migration-config")
    assert check.status.name == "BLOCKER" and "node.id=7, but the broker's id is 2" in check.evidence


@pytest.mark.parametrize("phase", PHASES[1:], ids=[p.value for p in PHASES[1:]])
def test_every_writer_refuses_naming_the_phase_and_what_to_do(phases, phase):
    """The maintenance session's refusal (``refusal`` of ``classify`` on ``/migration``, ``/controller`` and
    ``/brokers/ids``, as it reads them): at every phase, with the phase and the next step."""
    state, _, _, _ = phases[phase]
    evidence = migration_evidence(state)
    found = classify(evidence, zk_brokers=state.brokers)
    text = refusal(found, evidence)
    expected_phase = EXPECTED[phase][0]
    if phase is RecordedPhase.ROLLBACK_COMPLETE:
        # the brokers' files unread: whether they still carry the migration flag is unknown, so a revert
        expected_phase = Phase.REVERTING
        assert found.reading.presumed.startswith("reverting presumed among reverting, zookeeper")
        assert found.reading.possible == {Phase.ZOOKEEPER, Phase.REVERTING}
    assert text.startswith(f"a ZooKeeper-to-KRaft migration is in progress, phase {expected_phase.value} (")
    assert "Next: " in text
    dual_write = expected_phase in (Phase.DUAL_WRITE_ZK_BROKERS, Phase.DUAL_WRITE_KRAFT_BROKERS)
    if dual_write:
        assert "KRaft controller 3000 owns the metadata" in text
    if expected_phase in (Phase.REVERTING, Phase.ZOOKEEPER):
        assert "A ZooKeeper-mode controller acts again" in text and "deleteall /migration" in text
    assert "owns the metadata" not in text or dual_write
