"""Phase detection and plans held to a real Apache Kafka 3.9.0 migration (tests/fixtures/
real-kafka-3.9-migration: every znode per phase, broker 0's and the controller's files, the logs).

Each golden phase is read back with the files the nodes ran on at that point; every signal must
agree on the phase the recording names, and the plans made from it must write the files the real
migration used, byte for byte."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.kraft_metadata import (
    MetadataImage,
    ZkMigrationState,
    decode_metadata_record,
    encode_metadata_record,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_config import (
    ControllerNode,
    NodeMode,
    Quorum,
    QuorumStyle,
    apply_edit,
    finalize_controller,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_phase import (
    ControllerDisk,
    NodeFile,
    Phase,
    ZnodeRead,
    detect_phase,
    zookeeper_phase,
    zookeeper_view,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_plan import (
    CommandTemplates,
    Direction,
    MigrationInputs,
    plan_migration,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_steps import (
    BrokerRoll,
    ControllerCommand,
    ControllerHandback,
    ControllerStorageFormat,
    ControllerStorageRetire,
    FinalizedRecord,
    FinalizeGuard,
    MigrationWait,
    MigrationZnodeDelete,
    NodeConfigWrite,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_traps import TrapInputs, TrapStatus
from airflow_provider_kafka_zk.kafka.logdir import parse_java_properties
from airflow_provider_kafka_zk.kafka.safety import KRAFT_FINALIZED_PATH, cluster_left_zookeeper
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.9-migration"
CLUSTER_ID = "ecaeyjd7TdSwxG-gXVrv4w"
CONTROLLER = ControllerNode(
    3000, "127.0.0.1", 49190, "<data>/controller-3000/controller.properties", "<data>/controller-3000/data"
)
QUORUM = Quorum((CONTROLLER,), QuorumStyle.BOOTSTRAP)
COMMANDS = CommandTemplates(
    broker_restart="sudo systemctl restart kafka",
    controller_start="sudo systemctl start kafka-controller",
    controller_stop="sudo systemctl stop kafka-controller",
    controller_restart="sudo systemctl restart kafka-controller",
    controller_format="/opt/kafka/bin/kafka-storage.sh format --config {config} --cluster-id {cluster_id}",
)


def _znodes(name: str) -> dict[str, ZnodeRead]:
    dump = json.loads((GOLDEN / "zookeeper" / name).read_text())
    root = dump["root"]
    out = {}
    for z in dump["znodes"]:
        data = z["data"]
        raw = (
            None
            if data is None
            else (base64.b64decode(data) if z.get("encoding") == "base64" else data.encode())
        )
        out[z["path"][len(root) :] or "/"] = ZnodeRead(
            raw, z["stat"]["version"], bool(z["stat"]["ephemeralOwner"])
        )
    return out


def _broker_text(kind: str, broker: int) -> str:
    """Broker 0's golden file made broker N's (id, rack, port, data folder)."""
    text = (GOLDEN / "config" / f"broker-0.{kind}.properties").read_text()
    text = re.sub(r"^(broker|node)\.id=0$", rf"\1.id={broker}", text, flags=re.M)
    return (
        text.replace("broker.rack=r0", f"broker.rack=r{broker}")
        .replace("4909" + "2", f"{49092 + broker}")
        .replace("broker-0/", f"broker-{broker}/")
    )


def _node(
    role: str, node_id: int, text: str | None, running: bool | None = True, path: str | None = None
) -> NodeFile:
    return NodeFile(
        node_id,
        role,
        "127.0.0.1",
        path
        or (f"<data>/broker-{node_id}/server.properties" if role == "broker" else CONTROLLER.config_path),
        None if text is None else parse_java_properties(text, "t"),
        text,
        None if text is None else hashlib.sha256(text.encode()).hexdigest(),
        running=running,
    )


def _image(state: ZkMigrationState | None, registrations: dict[int, bool]) -> MetadataImage:
    records = [("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21})]
    if state is not None:
        records.append(("ZkMigrationStateRecord", 0, {"ZkMigrationState": int(state)}))
    for broker, kraft in registrations.items():
        records.append(
            (
                "RegisterBrokerRecord",
                3,
                {
                    "BrokerId": broker,
                    "IsMigratingZkBroker": not kraft,
                    "IncarnationId": KafkaUuid(bytes(16)),
                    "BrokerEpoch": 100 + broker,
                    "EndPoints": [],
                    "Features": [],
                    "Rack": None,
                    "Fenced": False,
                },
            )
        )
    return MetadataImage.replay(
        decode_metadata_record(encode_metadata_record(n, v, f), "t", i) for i, (n, v, f) in enumerate(records)
    )


CONTROLLER_LOG = (GOLDEN / "logs" / "controller-migration-log-excerpt.txt").read_text().splitlines()

# what each golden dump's nodes ran on: broker file kind, controller file present/running, metadata log
PHASES = {
    "00-zk-mode.json": ("zk", None, None, None, Phase.ZOOKEEPER),
    "01-controller-provisioned.json": (
        "zk",
        True,
        ZkMigrationState.PRE_MIGRATION,
        {},
        Phase.CONTROLLERS_PROVISIONED,
    ),
    "02-brokers-in-migration-mode-dual-write.json": (
        "mig",
        True,
        ZkMigrationState.MIGRATION,
        {0: False, 1: False, 2: False},
        Phase.DUAL_WRITE_ZK_BROKERS,
    ),
    "03-brokers-in-kraft-mode-dual-write.json": (
        "kraft",
        True,
        ZkMigrationState.MIGRATION,
        {0: True, 1: True, 2: True},
        Phase.DUAL_WRITE_KRAFT_BROKERS,
    ),
    "04a-rollback-brokers-zk-migration-mode.json": (
        "zk-mig",
        True,
        ZkMigrationState.MIGRATION,
        {0: False, 1: False, 2: False},
        Phase.DUAL_WRITE_ZK_BROKERS,
    ),
    "04b-rollback-controller-deprovisioned-zk-controller-elected.json": (
        "zk-mig",
        False,
        ZkMigrationState.MIGRATION,
        {0: False, 1: False, 2: False},
        Phase.REVERTING,
    ),
    "04c-rollback-complete-zk-mode.json": (
        "zk-final",
        False,
        ZkMigrationState.MIGRATION,
        {0: False},
        Phase.ZOOKEEPER,
    ),
}


def _state(name: str, *, zk: dict | None = None):
    kind, controller_running, state, registrations, expected = PHASES[name]
    view = zookeeper_view(zk if zk is not None else _znodes(name), CLUSTER_ID)
    brokers = {b: _node("broker", b, _broker_text(kind, b)) for b in (0, 1, 2)}
    controller_text = (GOLDEN / "config" / "controller-3000.properties").read_text()
    if controller_running is None:
        controllers = {3000: _node("controller", 3000, None, running=False)}
        disks = {3000: ControllerDisk(3000)}
    else:
        controllers = {3000: _node("controller", 3000, controller_text, running=controller_running)}
        disks = {
            3000: ControllerDisk(
                3000,
                meta_cluster_id=CLUSTER_ID,
                meta_node_id=3000,
                meta_version=1,
                image=_image(state, registrations or {}),
                log_lines=tuple(CONTROLLER_LOG)
                if state is not ZkMigrationState.PRE_MIGRATION
                else tuple(CONTROLLER_LOG[:5]),
                quorum_leader=3000,
                quorum_epoch=1,
            )
        }
    return view, brokers, controllers, disks, expected


def _inputs(
    name: str, *, kept: dict | None = None, traps: TrapInputs | None = None, **overrides
) -> MigrationInputs:
    view, brokers, controllers, disks, _ = _state(name)
    view = overrides.pop("view", view)
    brokers = overrides.pop("brokers", brokers)
    disks = overrides.pop("disks", disks)
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    return MigrationInputs(
        cluster="k39",
        reading=reading,
        zookeeper=view,
        quorum=QUORUM,
        commands=COMMANDS,
        brokers=brokers,
        controllers=controllers,
        disks=disks,
        traps=traps
        or TrapInputs(
            KafkaVersion.parse("3.9.0"),
            stale_migration=reading.stale_migration,
            migration_null=view.migration == b"",
        ),
        run_key="20261129T015500-abcdef01",
        kept=kept or {},
        inter_broker_protocol_version="3.9",
    )


@pytest.mark.parametrize("name", sorted(PHASES))
def test_every_golden_phase_is_read_as_the_recording_names_it(name: str) -> None:
    view, brokers, controllers, disks, expected = _state(name)
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is expected, reading.text()
    assert reading.refusal is None


@pytest.mark.parametrize("name", sorted(PHASES))
def test_zookeeper_and_the_brokers_files_alone_give_the_same_phase(name: str) -> None:
    """The one phase rule: what the daily audit, the readiness report and a writer's refusal see (ZooKeeper
    and the brokers' files, not the controllers) gives the phase every signal gives, on every golden phase --
    presumed where the controllers were not read, and said so."""
    view, brokers, _, _, expected = _state(name)
    reading = zookeeper_phase(view, {b: f.mode for b, f in brokers.items()}, brokers=brokers)
    assert reading.phase is expected, reading.text()
    assert expected in reading.possible
    assert (reading.presumed is None) == (len(reading.possible) == 1)


def test_without_the_brokers_files_the_registrations_pick_the_dual_write_phase() -> None:
    """/brokers/ids stands in for unread files: all registered -> ZooKeeper-mode brokers; none -> KRaft."""
    zk_brokers, _, _, _, _ = _state("02-brokers-in-migration-mode-dual-write.json")
    kraft, _, _, _, _ = _state("03-brokers-in-kraft-mode-dual-write.json")
    assert zookeeper_phase(zk_brokers, brokers=(0, 1, 2)).phase is Phase.DUAL_WRITE_ZK_BROKERS
    read = zookeeper_phase(kraft, brokers=(0, 1, 2))
    assert read.phase is Phase.DUAL_WRITE_KRAFT_BROKERS and "presumed among" in read.presumed
    assert Phase.REVERTING in read.possible  # a stopped KRaft controller still named in /controller


def test_zookeeper_readings_that_contradict_give_no_phase() -> None:
    """A persistent /controller without a KRaft epoch (neither a ZooKeeper-mode broker nor a KRaft controller
    writes one) next to /migration: no phase; the signal says why."""
    znodes = _znodes("01-controller-provisioned.json")
    znodes["/controller"] = ZnodeRead(znodes["/controller"].data, 0, False)
    reading = zookeeper_phase(zookeeper_view(znodes, CLUSTER_ID))
    assert reading.phase is None and "not written by Kafka" in reading.refusal


def test_controllers_started_on_a_migration_znode_without_data_hang_and_only_back_helps() -> None:
    """KAFKA-19480 as Kafka 3.9.0 behaves: zookeeper-security-migration created /migration with null data;
    the controllers run but their migration driver cannot parse it and never starts. The phase is
    controllers-provisioned (hung), forward refuses naming the issue, back stops them and deletes it."""
    znodes = _znodes("01-controller-provisioned.json")
    znodes["/migration"] = ZnodeRead(None, 0)
    view, brokers, controllers, disks, _ = _state("01-controller-provisioned.json", zk=znodes)
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is Phase.CONTROLLERS_PROVISIONED, reading.text()
    assert "KAFKA-19480" in reading.stale_migration and "retries forever" in reading.stale_migration
    inputs = _inputs("01-controller-provisioned.json", view=view)
    forward = plan_migration(replace(inputs, reading=reading), Direction.FORWARD)
    assert forward.refused and "KAFKA-19480" in forward.refusals[-1] and "back" in forward.refusals[-1]
    back = plan_migration(replace(inputs, reading=reading), Direction.BACK)
    assert not back.refused, back.refusals
    kinds = [type(s).__name__ for s in back.steps]
    assert kinds.index("ControllerCommand") < kinds.index("MigrationZnodeDelete"), kinds
    # what the daily audit sees (no controllers read): ZooKeeper mode with the left-over, not a migration
    assert (
        zookeeper_phase(view, {b: f.mode for b, f in brokers.items()}, brokers=brokers).phase
        is Phase.ZOOKEEPER
    )


def test_the_left_over_migration_znode_after_the_docs_rollback_is_named() -> None:
    view, brokers, controllers, disks, _ = _state("04c-rollback-complete-zk-mode.json")
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.stale_migration is not None and "KAFKA-17146" in reading.stale_migration


def test_disagreeing_signals_refuse_naming_each() -> None:
    """Dual-write in ZooKeeper (golden 02) while the broker files say plain ZooKeeper mode."""
    view, _, controllers, disks, _ = _state("02-brokers-in-migration-mode-dual-write.json")
    brokers = {b: _node("broker", b, _broker_text("zk", b)) for b in (0, 1, 2)}
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is None
    assert "disagree" in reading.refusal
    for name in ("/migration", "/controller", "brokers' server.properties", "metadata log"):
        assert name in reading.refusal


def test_an_unreadable_broker_file_refuses_the_phase() -> None:
    view, brokers, controllers, disks, _ = _state("01-controller-provisioned.json")
    brokers[2] = NodeFile(
        2, "broker", "127.0.0.1", "/etc/kafka/server.properties", None, problem="host unreachable"
    )
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is None and "host unreachable" in reading.refusal


def test_a_controller_formatted_for_another_cluster_refuses() -> None:
    view, brokers, controllers, disks, _ = _state("01-controller-provisioned.json")
    disks[3000] = ControllerDisk(
        3000, meta_cluster_id="AAAAAAAAAAAAAAAAAAAAAA", meta_node_id=3000, meta_version=1
    )
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is None and "AAAAAAAAAAAAAAAAAAAAAA" in reading.refusal


def test_a_half_rolled_cluster_is_hybrid() -> None:
    view, brokers, controllers, disks, _ = _state("01-controller-provisioned.json")
    brokers[0] = _node("broker", 0, _broker_text("mig", 0))
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is Phase.BROKERS_IN_MIGRATION_MODE


FINALIZED_RECORD = b'{"finalized": true, "recorded_at": "2026-11-29T12:00:00Z", "run": "manual__1"}'


def _finalized_znodes(name: str) -> dict[str, ZnodeRead]:
    """A golden dump plus the migration DAG's record of the finalization (kafka.safety.KRAFT_FINALIZED_PATH)."""
    return {**_znodes(name), KRAFT_FINALIZED_PATH: ZnodeRead(FINALIZED_RECORD, 0)}


@pytest.mark.parametrize(
    "name", ["02-brokers-in-migration-mode-dual-write.json", "03-brokers-in-kraft-mode-dual-write.json"]
)
def test_the_finalization_record_is_a_signal_of_the_phase_reader(name: str) -> None:
    """After the finalization ZooKeeper still looks like the dual-write (Kafka leaves /controller and
    /migration as its last write did): the migration DAG's record is one signal of the one phase rule, so
    the audit, the readiness report and every writer read finalized -- with the text every writer refuses
    with -- where ZooKeeper's znodes alone presume a dual-write."""
    plain = zookeeper_phase(zookeeper_view(_znodes(name), CLUSTER_ID), brokers=(0, 1, 2))
    assert plain.phase in (Phase.DUAL_WRITE_ZK_BROKERS, Phase.DUAL_WRITE_KRAFT_BROKERS)
    assert plain.left_zookeeper is None
    view = zookeeper_view(_finalized_znodes(name), CLUSTER_ID)
    assert view.finalized_record == FINALIZED_RECORD
    reading = zookeeper_phase(view, brokers=(0, 1, 2))
    assert reading.phase is Phase.FINALIZED and reading.presumed is None, reading.text()
    assert reading.possible == {Phase.FINALIZED}
    assert KRAFT_FINALIZED_PATH in {s.name for s in reading.signals}
    assert reading.left_zookeeper == cluster_left_zookeeper(FINALIZED_RECORD)
    assert "manual__1" in reading.left_zookeeper and "no way back" in reading.left_zookeeper


def test_after_the_finalization_zookeepers_migration_znodes_do_not_contradict_it() -> None:
    """Nothing of Kafka reads or writes ZooKeeper once finalized: /controller and /migration deleted since
    (a tidy-up) still read finalized, as do the brokers' KRaft files; brokers' files in ZooKeeper mode do
    contradict the record (ZooKeeper-mode brokers cannot join a KRaft cluster)."""
    znodes = _finalized_znodes("03-brokers-in-kraft-mode-dual-write.json")
    del znodes["/controller"], znodes["/migration"]
    tidied = zookeeper_view(znodes, CLUSTER_ID)
    assert zookeeper_phase(tidied, brokers=(0, 1, 2)).phase is Phase.FINALIZED
    view, brokers, _, _, _ = _state("03-brokers-in-kraft-mode-dual-write.json")
    view = replace(view, finalized_record=FINALIZED_RECORD)
    modes = {b: f.mode for b, f in brokers.items()}
    assert zookeeper_phase(view, modes, brokers=brokers).phase is Phase.FINALIZED
    reading = zookeeper_phase(view, dict.fromkeys(brokers, NodeMode.ZOOKEEPER), brokers=brokers)
    assert reading.phase is None and reading.left_zookeeper is None
    assert "disagree" in reading.refusal and KRAFT_FINALIZED_PATH in reading.refusal


def test_the_migration_dag_reads_the_finalization_record_as_one_more_signal() -> None:
    """detect_phase: the record agrees with controllers run without the migration flag and a metadata log
    at POST_MIGRATION; beside controllers still in migration mode it is a disagreement, named."""
    view, brokers, controllers, disks, _ = _state("03-brokers-in-kraft-mode-dual-write.json")
    view = replace(view, finalized_record=FINALIZED_RECORD)
    reading = detect_phase(view, list(brokers.values()), list(controllers.values()), disks)
    assert reading.phase is None and "disagree" in reading.refusal
    assert (
        KRAFT_FINALIZED_PATH in reading.refusal
        and "controllers says running in migration mode" in reading.refusal
    )
    controller = controllers[3000]
    text = apply_edit(controller.text or "", finalize_controller(controller.properties or {}))
    finalized = {3000: _node("controller", 3000, text)}
    disks = {
        3000: replace(disks[3000], image=_image(ZkMigrationState.POST_MIGRATION, {0: True, 1: True, 2: True}))
    }
    reading = detect_phase(view, list(brokers.values()), list(finalized.values()), disks)
    assert reading.phase is Phase.FINALIZED, reading.text()
    assert reading.left_zookeeper == cluster_left_zookeeper(FINALIZED_RECORD)
    without = detect_phase(
        replace(view, finalized_record=None), list(brokers.values()), list(finalized.values()), disks
    )
    assert without.phase is Phase.FINALIZED and without.left_zookeeper is None  # not recorded yet


# --------------------------------------------------------------------------------------------- plans


def _writes(plan) -> dict[int, str]:
    return {
        s.node_id: s.new_text for s in plan.steps if isinstance(s, NodeConfigWrite) and s.role == "broker"
    }


def test_provision_plan_writes_formats_starts_and_waits() -> None:
    plan = plan_migration(_inputs("00-zk-mode.json"), Direction.FORWARD)
    assert not plan.refused, plan.summary()
    kinds = [type(s) for s in plan.steps]
    assert kinds == [NodeConfigWrite, ControllerStorageFormat, ControllerCommand, MigrationWait]
    written = plan.steps[0].new_text
    props = parse_java_properties(written, "t")
    # the docs' sample plus what it lacks: the protocol map with the brokers' listener, log.dirs
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert props["log.dirs"] == CONTROLLER.log_dir
    assert props["zookeeper.connect"] == "127.0.0.1:42181/k39"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:49190"
    assert plan.steps[1].cluster_id == CLUSTER_ID
    assert plan.to_phase is Phase.CONTROLLERS_PROVISIONED


def test_entering_migration_mode_writes_the_real_files_and_rolls_the_controller_last() -> None:
    plan = plan_migration(_inputs("01-controller-provisioned.json"), Direction.FORWARD)
    assert not plan.refused, plan.summary()
    assert _writes(plan)[0] == (GOLDEN / "config" / "broker-0.mig.properties").read_text()
    rolls = [s for s in plan.steps if isinstance(s, BrokerRoll)]
    assert [r.broker_id for r in rolls] == [1, 2, 0]  # broker 0 holds /controller (golden 01)
    assert rolls[-1].is_controller and all(r.expect == "zookeeper" for r in rolls)
    assert isinstance(plan.steps[-1], MigrationWait) and plan.steps[-1].until == "migrated"


def test_to_kraft_waits_for_the_migration_first_and_writes_the_real_kraft_file() -> None:
    plan = plan_migration(_inputs("02-brokers-in-migration-mode-dual-write.json"), Direction.FORWARD)
    assert not plan.refused, plan.summary()
    assert isinstance(plan.steps[0], MigrationWait) and plan.steps[0].until == "migrated"
    assert _writes(plan)[0] == (GOLDEN / "config" / "broker-0.kraft.properties").read_text()
    assert [s.expect for s in plan.steps if isinstance(s, BrokerRoll)] == ["kraft"] * 3


def test_revert_roll_1_restores_the_kept_file() -> None:
    kept = {("broker", b): _broker_text("mig", b) for b in (0, 1, 2)}
    plan = plan_migration(_inputs("03-brokers-in-kraft-mode-dual-write.json", kept=kept), Direction.BACK)
    assert not plan.refused, plan.summary()
    assert _writes(plan)[0] == (GOLDEN / "config" / "broker-0.zk-mig.properties").read_text()
    assert plan.to_phase is Phase.DUAL_WRITE_ZK_BROKERS
    assert not any(isinstance(s, ControllerCommand) for s in plan.steps)  # the controllers keep running


def test_revert_roll_1_without_a_kept_file_rebuilds_it_and_says_so() -> None:
    plan = plan_migration(_inputs("03-brokers-in-kraft-mode-dual-write.json"), Direction.BACK)
    assert not plan.refused, plan.summary()
    props = parse_java_properties(_writes(plan)[0], "t")
    assert props["broker.id"] == "0" and "process.roles" not in props and "node.id" not in props
    assert props["zookeeper.metadata.migration.enable"] == "true"
    assert (
        props["zookeeper.connect"] == "127.0.0.1:42181/k39"
        and props["inter.broker.protocol.version"] == "3.9"
    )
    assert any("rebuilt" in n for n in plan.notes)


def test_revert_from_dual_write_stops_hands_back_rolls_and_retires() -> None:
    plan = plan_migration(_inputs("04a-rollback-brokers-zk-migration-mode.json"), Direction.BACK)
    assert not plan.refused, plan.summary()
    kinds = [type(s) for s in plan.steps]
    assert kinds[:2] == [ControllerCommand, ControllerHandback]
    assert plan.steps[0].action == "stop"
    handback = plan.steps[1]
    assert (
        handback.delete_migration and handback.raise_epoch_to is None
    )  # /controller_epoch 4 > KRaft epoch 1
    assert _writes(plan)[0] == (GOLDEN / "config" / "broker-0.zk-final.properties").read_text()
    assert isinstance(plan.steps[-1], ControllerStorageRetire)
    assert plan.to_phase is Phase.ZOOKEEPER
    assert {t.issue: t.status for t in plan.traps}["KAFKA-20488"] is TrapStatus.CLEAR


def test_revert_continues_after_the_docs_rmr_step() -> None:
    """Golden 04b: the controller stopped and /controller handed back by hand; /migration left."""
    plan = plan_migration(
        _inputs("04b-rollback-controller-deprovisioned-zk-controller-elected.json"), Direction.BACK
    )
    assert not plan.refused, plan.summary()
    kinds = [type(s) for s in plan.steps]
    assert ControllerCommand not in kinds and ControllerHandback not in kinds
    assert kinds[0] is MigrationZnodeDelete
    assert _writes(plan)[0] == (GOLDEN / "config" / "broker-0.zk-final.properties").read_text()


def test_after_the_docs_rollback_forward_refuses_on_the_old_controller_log_and_back_clears_it() -> None:
    forward = plan_migration(_inputs("04c-rollback-complete-zk-mode.json"), Direction.FORWARD)
    assert forward.refused
    assert any("KAFKA-17146" in r and "controller 3000" in r for r in forward.refusals), forward.summary()
    back = plan_migration(_inputs("04c-rollback-complete-zk-mode.json"), Direction.BACK)
    assert not back.refused, back.summary()
    assert [type(s) for s in back.steps] == [MigrationZnodeDelete, ControllerStorageRetire]


def test_finalize_checks_every_broker_then_restarts_the_controllers() -> None:
    plan = plan_migration(_inputs("03-brokers-in-kraft-mode-dual-write.json"), Direction.FORWARD)
    assert not plan.refused, plan.summary()
    assert isinstance(plan.steps[0], FinalizeGuard)
    write = next(s for s in plan.steps if isinstance(s, NodeConfigWrite))
    props = parse_java_properties(write.new_text, "t")
    assert "zookeeper.metadata.migration.enable" not in props and "zookeeper.connect" not in props
    assert [s.action for s in plan.steps if isinstance(s, ControllerCommand)] == ["restart"]
    assert plan.steps[-2].until == "finalized"
    assert isinstance(plan.steps[-1], FinalizedRecord) and plan.steps[-1].controllers == (3000,)


def test_finalize_refused_while_one_broker_is_not_registered_as_a_kraft_broker() -> None:
    """KAFKA-20960: broker 2 restarted with a KRaft file, but its registration still says ZooKeeper broker."""
    disk = _state("03-brokers-in-kraft-mode-dual-write.json")[3][3000]
    disks = {
        3000: ControllerDisk(
            **{**disk.__dict__, "image": _image(ZkMigrationState.MIGRATION, {0: True, 1: True, 2: False})}
        )
    }
    plan = plan_migration(_inputs("03-brokers-in-kraft-mode-dual-write.json", disks=disks), Direction.FORWARD)
    assert plan.refused
    assert any("KAFKA-20960" in r and "broker 2" in r for r in plan.refusals), plan.summary()


def test_steps_have_stable_content_ids_and_round_trip() -> None:
    from airflow_provider_kafka_zk.kafka.steps import steps_from_dicts

    one = plan_migration(_inputs("01-controller-provisioned.json"), Direction.FORWARD)
    two = plan_migration(_inputs("01-controller-provisioned.json"), Direction.FORWARD)
    assert [s.id for s in one.steps] == [s.id for s in two.steps]
    assert steps_from_dicts([s.to_dict() for s in one.steps]) == list(one.steps)


def test_broker_modes_of_the_golden_files() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_config import node_mode

    modes = {
        kind: node_mode(
            parse_java_properties((GOLDEN / "config" / f"broker-0.{kind}.properties").read_text(), kind)
        )
        for kind in ("zk", "mig", "kraft", "zk-mig", "zk-final")
    }
    assert modes == {
        "zk": NodeMode.ZOOKEEPER,
        "mig": NodeMode.MIGRATION,
        "kraft": NodeMode.KRAFT_BROKER,
        "zk-mig": NodeMode.MIGRATION,
        "zk-final": NodeMode.ZOOKEEPER,
    }


# --------------------------------------------------------------------------------------------- dual-write checks


def _golden_state(name: str):
    from airflow_provider_kafka_zk.kafka.model import ClusterState
    from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

    dump = json.loads((GOLDEN / "zookeeper" / name).read_text())
    rows = []
    for z in dump["znodes"]:
        st = z["stat"]
        data = z["data"]
        raw = (
            None
            if data is None
            else (base64.b64decode(data) if z.get("encoding") == "base64" else data.encode())
        )
        rows.append(
            ZnodeRow(
                z["path"][len(dump["root"]) :] or "/",
                raw,
                st["czxid"],
                st["mzxid"],
                st["pzxid"],
                st["ctime"],
                st["mtime"],
                st["version"],
                st["cversion"],
                st["aversion"],
                st["ephemeralOwner"],
                st["dataLength"],
                st["numChildren"],
            )
        )
    return ClusterState.from_snapshot(rows)


def _kraft_image_of(
    state, *, drop_topic: str | None = None, extra_config: dict | None = None
) -> MetadataImage:
    """What the KRaft controller's log holds when the dual-write kept ZooKeeper in step."""
    records = []
    for topic in state.topics.values():
        if topic.name in state.pending_deletions or topic.name == drop_topic:
            continue
        records.append(("TopicRecord", 0, {"Name": topic.name, "TopicId": topic.topic_id}))
        for p, info in topic.partitions.items():
            records.append(
                (
                    "PartitionRecord",
                    0,
                    {
                        "PartitionId": p,
                        "TopicId": topic.topic_id,
                        "Replicas": list(info.target_replicas or info.replicas),
                        "Isr": list(info.isr),
                        "Leader": info.leader,
                        "LeaderEpoch": 0,
                        "PartitionEpoch": 0,
                    },
                )
            )
        for key, value in {**topic.config, **((extra_config or {}) if topic.name == "mig-a" else {})}.items():
            records.append(
                (
                    "ConfigRecord",
                    0,
                    {"ResourceType": 2, "ResourceName": topic.name, "Name": key, "Value": value},
                )
            )
    for entity, config in state.configs.brokers.items():
        for key, value in config.items():
            records.append(
                (
                    "ConfigRecord",
                    0,
                    {
                        "ResourceType": 4,
                        "ResourceName": "" if entity == "<default>" else entity,
                        "Name": key,
                        "Value": value,
                    },
                )
            )
    for name, config in state.configs.clients.items():
        for key, value in config.items():
            records.append(
                (
                    "ClientQuotaRecord",
                    0,
                    {
                        "Entity": [{"EntityType": "client-id", "EntityName": name}],
                        "Key": key,
                        "Value": float(value),
                        "Remove": False,
                    },
                )
            )
    return MetadataImage.replay(
        decode_metadata_record(encode_metadata_record(n, v, f), "t", i) for i, (n, v, f) in enumerate(records)
    )


def test_dual_write_checks_on_the_real_dual_write_tree() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_checks import CheckStatus, ZooKeeperSecurity, compare

    state = _golden_state("03-brokers-in-kraft-mode-dual-write.json")
    assert "mig-kraft" in state.topics  # made in KRaft mode, dual-written
    checks = compare(state, _kraft_image_of(state), ZooKeeperSecurity(), KafkaVersion.parse("3.9.0"))
    assert {c.what: c.status for c in checks} == {
        "topics and their ids": CheckStatus.SAME,
        "partitions and their replicas": CheckStatus.SAME,
        "topic configs": CheckStatus.SAME,
        "broker configs": CheckStatus.SAME,
        "client quotas": CheckStatus.SAME,
        "ACLs": CheckStatus.SAME,
        "SCRAM users": CheckStatus.SAME,
        "delegation tokens": CheckStatus.SAME,
    }
    # a topic only ZooKeeper has (written beside the KRaft controller) and a config only KRaft has
    checks = {
        c.what: c
        for c in compare(
            state,
            _kraft_image_of(state, drop_topic="mig-b", extra_config={"retention.ms": "1"}),
            ZooKeeperSecurity(),
            KafkaVersion.parse("3.9.0"),
        )
    }
    assert checks["topics and their ids"].zookeeper_only == ("mig-b",)
    assert "mig-b-0" in checks["partitions and their replicas"].zookeeper_only
    assert checks["topic configs"].differing == ("mig-a",)


def test_the_approval_page_of_a_migration_plan_shows_every_diff_and_the_way_back() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_plan import approval_summary

    plan = plan_migration(_inputs("01-controller-provisioned.json"), Direction.FORWARD)
    record = {
        **plan.to_dict(),
        "signals": plan_migration(_inputs("01-controller-provisioned.json"), Direction.FORWARD).to_dict(),
    }
    summary = approval_summary(
        record,
        {"way_back": "trigger kafka_zk_kraft_migration with direction=back"},
        plan_dir="/p",
        gate_timeout_s=900,
    )
    text = summary.text()
    assert summary.headline.startswith("KRaft migration of k39: roll the brokers into migration mode")
    assert "+zookeeper.metadata.migration.enable=true" in text
    assert "restart broker 0 on 127.0.0.1 (the active ZooKeeper-mode controller, last)" in text
    assert "direction=back" in text and "900s" in text


def test_no_migration_step_field_shadows_a_step_method() -> None:
    """A field named like a :class:`Step` method (``brokers``, ``znodes`` ...) replaces the method on the
    instance: the executor's preflight then calls a tuple (the finalize guard did, so no finalization ran)."""
    import dataclasses

    from airflow_provider_kafka_zk.kafka.kraft_migration_steps import MIGRATION_STEPS
    from airflow_provider_kafka_zk.kafka.steps import Step

    methods = {name for name in dir(Step) if callable(getattr(Step, name)) and not name.startswith("_")}
    for kind in MIGRATION_STEPS:
        assert not {f.name for f in dataclasses.fields(kind)} & methods, kind.__name__


def test_the_approval_page_of_a_finalization_lists_its_zookeeper_record_among_the_writes() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_plan import approval_summary

    plan = plan_migration(_inputs("03-brokers-in-kraft-mode-dual-write.json"), Direction.FORWARD)
    summary = approval_summary(plan.to_dict(), {"way_back": "none"}, plan_dir="/p")
    writes = dict(summary.sections)["ZooKeeper writes"]
    assert len(writes) == 1 and "/kafka_zk_maintenance/kraft_finalized" in writes[0]
    assert "way back: NONE" in plan.summary()
