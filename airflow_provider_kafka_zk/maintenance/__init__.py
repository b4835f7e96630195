"""The safety layer every mutation of a Kafka cluster goes through: the session (:mod:`.session`)
and, beside it, the step executor (:mod:`.executor`)."""

from airflow_provider_kafka_zk.maintenance.session import (
    BrokerIdentityPinError,
    ClusterIdentityError,
    KraftMigrationInProgressError,
    MaintenanceLeaseHeldError,
    MaintenanceLeaseLostError,
    MaintenanceRefusedError,
    MaintenanceSession,
    RollbackArtefactError,
    RunIdentity,
    SafetyFlagError,
    ScratchLoadGate,
    lease_held_by,
    parse_safety_flags,
    pin_zookeeper_identity,
)

__all__ = [
    "BrokerIdentityPinError",
    "ClusterIdentityError",
    "KraftMigrationInProgressError",
    "MaintenanceLeaseHeldError",
    "MaintenanceLeaseLostError",
    "MaintenanceRefusedError",
    "MaintenanceSession",
    "RollbackArtefactError",
    "RunIdentity",
    "SafetyFlagError",
    "ScratchLoadGate",
    "lease_held_by",
    "parse_safety_flags",
    "pin_zookeeper_identity",
]
