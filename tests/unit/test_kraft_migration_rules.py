"""The migration's traps by release, the epoch rule (KAFKA-20488), finalization (KAFKA-20960),
config edits that keep a file as its owner wrote it, command templates, and the cluster file's
KRaft section."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.clusters import ClusterFileError, load_clusters
from airflow_provider_kafka_zk.kafka.kraft_migration_config import (
    ConfigEdit,
    ControllerNode,
    Quorum,
    apply_edit,
    config_diff,
    migration_back_to_zookeeper,
    to_kraft_broker,
    to_migration_mode,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_traps import (
    FinalizeFacts,
    TrapInputs,
    TrapStatus,
    epoch_trap,
    finalize_traps,
    release_traps,
    stale_migration_trap,
)
from airflow_provider_kafka_zk.kafka.logdir import parse_java_properties
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion

QUORUM = Quorum((ControllerNode(3000, "kc1", 9093, "/etc/c.properties", "/var/kraft"),))


# --------------------------------------------------------------------------------------------- traps


def _by_issue(traps):
    return {t.issue: t for t in traps}


@pytest.mark.parametrize(
    ("release", "refused"),
    [
        ("3.4.1", {"KAFKA-15605", "KAFKA-16120", "KAFKA-16222", "KAFKA-16411", "KAFKA-15009", "KAFKA-14970"}),
        ("3.5.2", {"KAFKA-15605", "KAFKA-16120", "KAFKA-16222", "KAFKA-16411"}),
        ("3.6.1", {"KAFKA-16120", "KAFKA-16222", "KAFKA-16411"}),
        ("3.6.2", set()),
        ("3.7.0", {"KAFKA-16222", "KAFKA-16411"}),
        ("3.7.1", set()),
        ("3.9.0", set()),
    ],
)
def test_release_traps_refuse_only_where_the_fix_is_missing_and_the_feature_in_use(
    release: str, refused: set
) -> None:
    inputs = TrapInputs(
        KafkaVersion.parse(release),
        pending_deletions=("old-topic",),
        reassigning=("orders-3",),
        quota_entities=("users/alice%40corp", "clients/<default>"),
        acl_entries=4,
        scram_credentials=2,
    )
    traps = release_traps(inputs)
    assert {t.issue for t in traps if t.status is TrapStatus.REFUSED} == refused
    for trap in traps:
        if trap.status is TrapStatus.REFUSED:
            assert release in trap.evidence and "fixed in" in trap.evidence


def test_release_traps_pass_when_nothing_is_in_use_even_on_old_releases() -> None:
    traps = release_traps(TrapInputs(KafkaVersion.parse("3.4.0")))
    assert all(t.status is TrapStatus.CLEAR for t in traps)


def test_an_unknown_release_refuses_a_trap_whose_feature_is_in_use() -> None:
    traps = _by_issue(release_traps(TrapInputs(None, acl_entries=1)))
    assert traps["KAFKA-15009"].status is TrapStatus.REFUSED
    assert "unknown release" in traps["KAFKA-15009"].evidence


def test_null_and_stale_migration_are_handled_by_provisioning() -> None:
    traps = _by_issue(stale_migration_trap(TrapInputs(None, migration_null=True), handled_by_plan=True))
    assert traps["KAFKA-19480"].status is TrapStatus.HANDLED
    traps = _by_issue(
        stale_migration_trap(TrapInputs(None, stale_migration="left over"), handled_by_plan=True)
    )
    assert (
        traps["KAFKA-17146"].status is TrapStatus.HANDLED and traps["KAFKA-19480"].status is TrapStatus.CLEAR
    )


def test_epoch_rule_kafka_20488() -> None:
    # golden 04a: /controller_epoch 4, KRaft epoch 1: the next ZK controller gets 5 > 1
    trap, raise_to = epoch_trap(4, 1, 1, ())
    assert trap.status is TrapStatus.CLEAR and raise_to is None
    # KRaft leader epoch grew past ZooKeeper's: the partition states carry 9
    trap, raise_to = epoch_trap(4, 9, 9, ("mig-a-0 (controller_epoch 9)",))
    assert trap.status is TrapStatus.HANDLED and raise_to == 9
    assert "mig-a-0" in trap.evidence and "epoch 10" in trap.action
    # equal: the new controller's epoch 5 equals a state's 5 -- not above, elections of those abort? No:
    # Kafka aborts only when the state's epoch is *greater* than the controller's; 4 + 1 = 5 > 4 passes
    trap, raise_to = epoch_trap(4, 4, 4, ())
    assert trap.status is TrapStatus.CLEAR and raise_to is None
    trap, raise_to = epoch_trap(4, 5, 5, ())
    assert trap.status is TrapStatus.HANDLED and raise_to == 5


def test_finalize_needs_every_broker_registered_as_an_unfenced_kraft_broker() -> None:
    facts = FinalizeFacts(
        brokers=(0, 1, 2),
        kraft_registrations={0: (True, False), 1: (True, True), 2: (False, False)},
        zookeeper_registered=(2,),
        broker_modes={0: "kraft-broker", 1: "kraft-broker", 2: "zookeeper-migration"},
        zookeeper_only=("broker 0: authorizer.class.name=kafka.security.authorizer.AclAuthorizer",),
    )
    traps = _by_issue(finalize_traps(facts))
    assert traps["KAFKA-20960"].status is TrapStatus.REFUSED
    evidence = traps["KAFKA-20960"].evidence
    assert "broker 1" in evidence and "fenced" in evidence
    assert "broker 2 is registered as a ZooKeeper-mode broker" in evidence
    assert "/brokers/ids" in evidence
    assert traps["zookeeper-only"].status is TrapStatus.REFUSED
    ok = FinalizeFacts((0,), {0: (True, False)}, (), {0: "kraft-broker"})
    assert all(t.status is TrapStatus.CLEAR for t in finalize_traps(ok))


# --------------------------------------------------------------------------------------------- edits


def test_edits_keep_comments_order_and_untouched_lines() -> None:
    text = textwrap.dedent(
        """\
        # Broker 7 -- owned by the platform team
        broker.id = 7
        listeners=PLAINTEXT://:9092,\\
            SSL://:9093
        listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL
        ! legacy comment
        zookeeper.connect=zk1:2181,zk2:2181/kafka
        zookeeper.connect=zk1:2181/kafka
        inter.broker.protocol.version=3.9
        """
    )
    props = parse_java_properties(text, "t")
    migrated = apply_edit(text, to_migration_mode(props, QUORUM))
    after = parse_java_properties(migrated, "t")
    assert after["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"
    assert after["controller.quorum.voters"] == "3000@kc1:9093"
    assert after["zookeeper.metadata.migration.enable"] == "true"
    assert "# Broker 7 -- owned by the platform team" in migrated and "! legacy comment" in migrated
    assert "listeners=PLAINTEXT://:9092,\\\n    SSL://:9093" in migrated  # a continuation kept as written
    assert "broker.id = 7" in migrated
    kraft = apply_edit(migrated, to_kraft_broker(after, 7))
    kraft_props = parse_java_properties(kraft, "t")
    assert kraft_props["node.id"] == "7" and kraft_props["process.roles"] == "broker"
    assert not any(k.startswith("zookeeper.") for k in kraft_props)  # both zookeeper.connect lines go
    assert "inter.broker.protocol.version" not in kraft_props and "broker.id" not in kraft_props
    back = apply_edit(migrated, migration_back_to_zookeeper(after))
    assert parse_java_properties(back, "t") == props | {"zookeeper.connect": "zk1:2181/kafka"}


def test_kraft_broker_edit_drops_zookeeper_only_settings_and_switches_the_authorizer() -> None:
    text = "broker.id=1\ncontrol.plane.listener.name=CP\nauthorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
    props = parse_java_properties(text, "t")
    kraft = parse_java_properties(apply_edit(text, to_kraft_broker(props, 1)), "t")
    assert "control.plane.listener.name" not in kraft
    assert kraft["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def test_a_new_key_without_its_anchor_goes_at_the_end_and_the_diff_shows_it() -> None:
    text = "a=1\n"
    out = apply_edit(text, ConfigEdit(set=(("b", "2", ("missing",)),)))
    assert out == "a=1\nb=2\n"
    assert config_diff(text, out, "/etc/kafka/server.properties") == [
        "--- /etc/kafka/server.properties",
        "+++ /etc/kafka/server.properties",
        "@@ -1 +1,2 @@",
        " a=1",
        "+b=2",
    ]


# --------------------------------------------------------------------------------------------- cluster file


def _file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_cluster_file_kraft_section(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        """
        [clusters.prod]
        broker_restart_command = "sudo systemctl restart kafka"
        kraft_quorum = "bootstrap"
        kraft_controllers = [
          { node_id = 3001, host = "kc2", config_path = "/etc/kafka/c.properties", log_dir = "/var/kraft" },
          { node_id = 3000, host = "kc1", config_path = "/etc/kafka/c.properties", log_dir = "/var/kraft", port = 19093 },
        ]
        """,
    )
    prod = load_clusters(path)["prod"]
    assert prod["kraft_controller_node_ids"] == [3000, 3001]
    assert prod["kraft_controllers"][0]["port"] == 9093 and prod["kraft_controllers"][1]["port"] == 19093
    assert prod["kraft_quorum"] == "bootstrap"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ node_id = 3000, host = "kc1", config_path = "etc/c", log_dir = "/v" }', "absolute path"),
        ('{ node_id = -1, host = "kc1", config_path = "/c", log_dir = "/v" }', "node_id"),
        ('{ node_id = 3000, host = "", config_path = "/c", log_dir = "/v" }', "host"),
        ('{ node_id = 3000, host = "h", config_path = "/c", log_dir = "/v", port = 0 }', "port"),
        ('{ node_id = 3000, host = "h", config_path = "/c", log_dir = "/v", user = "x" }', "unknown key"),
    ],
)
def test_cluster_file_kraft_section_refuses_bad_entries(tmp_path: Path, entry: str, message: str) -> None:
    path = _file(tmp_path, f"[clusters.prod]\nkraft_controllers = [{entry}]\n")
    with pytest.raises(ClusterFileError, match=message):
        load_clusters(path)


# --------------------------------------------------------------------------------------------- health gates


def _partition(topic: str, p: int, replicas, isr, leader):
    from airflow_provider_kafka_zk.kafka.model import PartitionInfo
    from airflow_provider_kafka_zk.kafka.znodes import PartitionState

    return PartitionInfo(
        topic,
        p,
        tuple(replicas),
        tuple(replicas),
        tuple(replicas),
        (),
        (),
        PartitionState(topic, p, leader, 0, 1, tuple(isr)),
        0,
    )


def test_stop_risks_name_sole_replicas_and_min_isr() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_health import stop_risks

    partitions = {
        ("rf1", 0): _partition("rf1", 0, [0], [0], 0),
        ("mig-a", 0): _partition("mig-a", 0, [0, 1, 2], [0, 1], 0),
        ("mig-a", 1): _partition("mig-a", 1, [0, 1, 2], [0, 1, 2], 1),
    }
    risks = stop_risks(0, partitions, {0, 1, 2}, {"mig-a": 2})
    assert "only in-sync replica of rf1-0" in risks[0]
    assert "mig-a-0 fall under min.insync.replicas" in risks[1]
    assert stop_risks(2, partitions, {0, 1, 2}, {"mig-a": 2}) == []


def test_roll_gate_zookeeper_and_kraft() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_metadata import (
        MetadataImage,
        decode_metadata_record,
        encode_metadata_record,
    )
    from airflow_provider_kafka_zk.kafka.kraft_migration_health import Health, health, roll_gate
    from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

    clean = Health(frozenset(), frozenset(), frozenset())
    partitions = {("mig-a", 0): _partition("mig-a", 0, [0, 1, 2], [1, 2], 1)}
    now = health(partitions, {0, 1, 2}, {"mig-a": 2})
    waiting = roll_gate(
        0,
        "zookeeper",
        zk_epochs={0: 7, 1: 2, 2: 3},
        epoch_before=5,
        kraft_offset_before=-1,
        image=None,
        now=now,
        baseline=clean,
    )
    assert waiting == ["broker 0 not back in the ISR of mig-a-0"]
    assert roll_gate(
        0,
        "zookeeper",
        zk_epochs={0: 5},
        epoch_before=5,
        kraft_offset_before=-1,
        image=None,
        now=clean,
        baseline=clean,
    ) == ["broker 0 still has its registration from before the restart"]

    def image(migrating: bool, fenced: bool, offset: int) -> MetadataImage:
        record = encode_metadata_record(
            "RegisterBrokerRecord",
            3,
            {
                "BrokerId": 0,
                "IsMigratingZkBroker": migrating,
                "IncarnationId": KafkaUuid(bytes(16)),
                "BrokerEpoch": 9,
                "EndPoints": [],
                "Features": [],
                "Rack": None,
                "Fenced": fenced,
            },
        )
        return MetadataImage.replay([decode_metadata_record(record, "t", offset)])

    gate = dict(zk_epochs={}, epoch_before=None, kraft_offset_before=100, now=clean, baseline=clean)
    assert roll_gate(0, "kraft", image=image(False, False, 120), **gate) == []
    assert (
        "not registered in the KRaft quorum since"
        in roll_gate(0, "kraft", image=image(False, False, 90), **gate)[0]
    )
    assert "not as a KRaft broker" in roll_gate(0, "kraft", image=image(True, False, 120), **gate)[0]
    assert "still fenced" in roll_gate(0, "kraft", image=image(False, True, 120), **gate)[0]
    assert (
        "still registered in /brokers/ids"
        in roll_gate(0, "kraft", image=image(False, False, 120), **{**gate, "zk_epochs": {0: 1}})[0]
    )


def test_zookeeper_only_features() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_health import zookeeper_only_features

    found = zookeeper_only_features(
        {
            ("broker", 0): {
                "process.roles": "broker",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            },
            ("broker", 1): {"process.roles": "broker", "zookeeper.connect": "zk:2181"},
            ("broker", 2): {"process.roles": "broker"},
        }
    )
    assert len(found) == 2 and "AclAuthorizer" in found[0] and "zookeeper.connect" in found[1]


def test_verify_names_the_audits_stray_directories_and_says_when_it_could_not_read_them(
    tmp_path: Path,
) -> None:
    from airflow_provider_kafka_zk.kafka.findings import Finding, Severity
    from airflow_provider_kafka_zk.operators.kraft_migration import _stray_findings
    from airflow_provider_kafka_zk.spark_jobs.audit import write_findings

    out = str(tmp_path / "audit-after")
    write_findings(
        out,
        [
            Finding(
                "stray-dirs",
                Severity.WARNING,
                "c",
                "gone-0 on broker 1",
                topic="gone",
                partition=0,
                broker_id=1,
            ),
            Finding("offline-partitions", Severity.CRITICAL, "c", "not a directory"),
        ],
        {},
    )
    rows, unread = _stray_findings(out)
    assert unread is None
    assert [(r["check"], r["topic"], r["partition"], r["broker_id"]) for r in rows] == [
        ("stray-dirs", "gone", 0, 1)
    ]
    rows, unread = _stray_findings(str(tmp_path / "missing"))
    assert rows == [] and unread and "missing" in unread
    assert _stray_findings(None) == ([], None)


def test_controller_gate_waits_for_a_quorum_leader_and_no_new_offline_partition() -> None:
    from airflow_provider_kafka_zk.kafka.kraft_migration_health import Health, controller_gate

    clean = Health(frozenset(), frozenset(), frozenset())
    offline = Health(frozenset({("t", 0)}), frozenset(), frozenset())
    gate = {"now": clean, "baseline": clean}
    assert controller_gate(3000, "restart", quorum_leaders={3000: 3000}, **gate) == []
    (waiting,) = controller_gate(3000, "restart", quorum_leaders={3000: -1, 3001: None}, **gate)
    assert "no leader since controller 3000's restart" in waiting and "3000: -1, 3001: ?" in waiting
    (waiting,) = controller_gate(3000, "restart", quorum_leaders={3000: 3000}, now=offline, baseline=clean)
    assert "partitions offline" in waiting and "t-0" in waiting
    assert controller_gate(3000, "start", quorum_leaders={3000: 3000}, now=offline, baseline=offline) == []
