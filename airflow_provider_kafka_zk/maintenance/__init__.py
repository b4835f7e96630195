"""The safety layer every mutation of a Kafka cluster goes through (see :mod:`.session`)."""

from airflow_provider_kafka_zk.maintenance.session import (
    BrokerIdentityPinError,
    ClusterIdentityError,
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
