"""The pure decisions of the safety layer: strict flags, Kafka's ACL rule, identity, the lease."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.kafka.safety import (
    PERM_ALL,
    PERM_READ,
    WORLD_ALL,
    AclEntry,
    ClusterIdentity,
    LeaseHolder,
    UnsafeFlagError,
    acl_for_new_znode,
    broker_identity_problems,
    identity_differences,
    is_redacted_path,
    is_sensitive_path,
    lease_decision,
    strict_flag,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("true", True), ("False", False), (" TRUE ", True), ("false\n", False)],
)
def test_strict_flag_accepts_booleans_and_true_false_text(value, expected):
    assert strict_flag(value, "dry_run") is expected


@pytest.mark.parametrize(
    "value",
    ["", None, "dry", "yes", "no", "0", "1", 0, 1, "None", "{{ params.dry_run }}", [], {}, "t", 1.0],
)
def test_strict_flag_refuses_everything_else(value):
    # Before: bool(value) / `value in ("1","true","yes","on")` turned '', None, 'dry' and an
    # unrendered template into "not a dry run" -- a real reassignment.
    with pytest.raises(UnsafeFlagError, match="dry_run must be a boolean"):
        strict_flag(value, "dry_run")


def test_unrendered_template_is_named_in_the_error():
    with pytest.raises(UnsafeFlagError, match="unrendered template"):
        strict_flag("{{ params.dry_run }}", "dry_run")


def test_sensitive_and_redacted_paths_follow_kafka():
    assert is_sensitive_path("/config/users/alice")
    assert is_sensitive_path("/config/brokers/3")
    assert is_sensitive_path("/config/brokers")
    assert is_sensitive_path("/delegation_token/tokens/t1")
    assert not is_sensitive_path("/config/topics/orders")
    assert not is_sensitive_path("/admin/reassign_partitions")
    assert is_redacted_path("/config/users/alice")
    assert is_redacted_path("/delegation_token/tokens/t1")
    assert not is_redacted_path("/config/brokers/3")  # throttles live there: the audit reads them


KAFKA = AclEntry(PERM_ALL, "digest", "kafka:hash=")
WORLD_READ = AclEntry(PERM_READ, "world", "anyone")


def test_acl_of_an_open_cluster_stays_open():
    assert acl_for_new_znode("/admin/reassign_partitions", [WORLD_ALL], authenticated=True) == [WORLD_ALL]


def test_acl_copies_kafkas_principal_and_world_read_on_plain_paths():
    acl = acl_for_new_znode("/admin/reassign_partitions", [KAFKA, WORLD_READ], authenticated=True)
    assert acl == [KAFKA, WORLD_READ, AclEntry(PERM_ALL, "auth", "")]


def test_acl_drops_world_read_on_sensitive_paths():
    acl = acl_for_new_znode("/config/brokers/0", [KAFKA, WORLD_READ], authenticated=False)
    assert acl == [KAFKA]


def test_identity_differences_name_both_values():
    pinned = ClusterIdentity("AAAA", ("zk1:2181",), "/kafka")
    assert identity_differences(pinned, ClusterIdentity("AAAA", ("zk9:2181",), "/kafka")) == []
    problems = identity_differences(pinned, ClusterIdentity("BBBB", ("zk1:2181",), "/other"))
    assert any("'BBBB'" in p and "'AAAA'" in p for p in problems)
    assert any("/other" in p and "/kafka" in p for p in problems)
    round_trip = ClusterIdentity.from_dict(pinned.with_broker(1, "h1", "AAAA").to_dict(), "x")
    assert round_trip.brokers == {1: ("h1", "AAAA")}


def test_broker_identity_requires_every_meta_properties_to_agree():
    ok = [("/d1", 3, "AAAA"), ("/d2", 3, "AAAA")]
    assert broker_identity_problems(3, "h", "AAAA", ok, 3) == []
    other_cluster = broker_identity_problems(3, "h", "AAAA", [("/d1", 3, "BBBB")], 3)
    assert other_cluster and "'BBBB'" in other_cluster[0] and "'AAAA'" in other_cluster[0]
    assert broker_identity_problems(3, "h", "AAAA", [("/d1", None, None)], 3)
    assert broker_identity_problems(3, "h", "AAAA", [], 3)  # nothing read: doubt
    assert broker_identity_problems(3, "h", "AAAA", ok, 4)


def _holder(run="r1", expires=2_000):
    return LeaseHolder("drain", run, "execute", "host:1", 1_000, expires, "AAAA")


def test_lease_decisions():
    me = _holder()
    assert lease_decision(None, False, me, 1_500) == "create"
    assert lease_decision(_holder(), True, me, 1_500) == "renew"
    assert lease_decision(_holder("r2"), True, me, 1_500) == "refuse"
    assert lease_decision(_holder("r2", expires=1_000), True, me, 1_500) == "take_over"
    assert lease_decision(None, True, me, 1_500) == "refuse"  # unreadable record: a person looks
    assert LeaseHolder.decode(me.encode()) == me
    assert LeaseHolder.decode(b"not json") is None
    assert "run 'r1'" in me.describe()


# ------------------------------------------------------------------ KRaft migration in progress


def _migration_evidence(*, migration: bool, controller_epoch: int | None, persistent: bool):
    from airflow_provider_kafka_zk.kafka.safety import KraftMigrationEvidence
    from airflow_provider_kafka_zk.kafka.znodes import ControllerRegistration, MigrationZNode

    controller = ControllerRegistration(
        broker_id=3000 if controller_epoch not in (None, -1) else 1,
        timestamp_ms=1_700_000_000_000,
        version=2,
        kraft_controller_epoch=controller_epoch,
    )
    return KraftMigrationEvidence(
        migration_data=MigrationZNode(3000, 5, 1234, 2).encode() if migration else None,
        controller_data=controller.encode(),
        controller_ephemeral_owner=0 if persistent else 0x1000000AB,
    )


def test_a_zookeeper_mode_controller_is_no_migration():
    from airflow_provider_kafka_zk.kafka.safety import kraft_migration_in_progress

    assert (
        kraft_migration_in_progress(
            _migration_evidence(migration=False, controller_epoch=-1, persistent=False)
        )
        is None
    )


def test_a_migrating_kraft_controller_is_named_with_its_epoch():
    from airflow_provider_kafka_zk.kafka.safety import kraft_migration_in_progress

    why = kraft_migration_in_progress(
        _migration_evidence(migration=True, controller_epoch=5, persistent=True)
    )
    assert why is not None
    assert "/migration exists (KRaft controller 3000, epoch 5, metadata offset 1234)" in why
    assert "held by KRaft controller 3000 (kraftControllerEpoch 5)" in why
    assert "persistent" in why


@pytest.mark.parametrize(
    ("migration", "epoch", "persistent"),
    [(True, -1, False), (False, 7, False), (False, -1, True), (False, None, True)],
)
def test_each_sign_of_a_migration_alone_refuses(migration, epoch, persistent):
    from airflow_provider_kafka_zk.kafka.safety import kraft_migration_in_progress

    assert kraft_migration_in_progress(
        _migration_evidence(migration=migration, controller_epoch=epoch, persistent=persistent)
    )


def test_an_unreadable_migration_znode_counts_as_a_migration():
    from airflow_provider_kafka_zk.kafka.safety import KraftMigrationEvidence, kraft_migration_in_progress

    why = kraft_migration_in_progress(KraftMigrationEvidence(b"{not json", None, None))
    assert why is not None and "cannot be read" in why
