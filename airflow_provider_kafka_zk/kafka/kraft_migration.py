"""Where a ZooKeeper-to-KRaft migration stands, read from ZooKeeper alone (pure).

Whether one runs at all is :func:`.safety.kraft_migration_in_progress`'s answer (the one rule: a
``/migration`` znode, a ``/controller`` held by a KRaft controller, or a persistent ``/controller``).
This module names the phase for reports and the daily audit, from what Kafka 3.9's migration
driver writes (``metadata/src/main/java/org/apache/kafka/metadata/migration/KRaftMigrationDriver.java``
and ``ZkMigrationLeadershipState.java``, ``core/src/main/scala/kafka/zk/KafkaZkClient.scala``, tag
3.9.0-rc3):

* the KRaft quorum's active controller creates ``/migration`` when it starts
  (``RecoverMigrationStateFromZKEvent`` -> ``getOrCreateMigrationState``, holding
  ``ZkMigrationLeadershipState.EMPTY``: -1 everywhere) and waits for every broker to register in
  migration mode; a ZooKeeper-mode broker stays controller meanwhile;
* ``BecomeZkControllerEvent``: it increments ``/controller_epoch`` and replaces ``/controller`` by a
  persistent znode whose ``kraftControllerEpoch`` is its KRaft epoch
  (``tryRegisterKRaftControllerAsActiveController``), then writes its id and epoch into
  ``/migration``;
* ``MigrateMetadataEvent``: the initial load; ``/migration`` gets the KRaft metadata offset, and
  ``initialZkMigrationComplete`` is ``kraft_metadata_offset > 0``; from then on every KRaft change is
  written into ZooKeeper too (dual-write), until the migration is finalized.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .model import ClusterState, ModelFindingKind
from .safety import KraftMigrationEvidence, kraft_migration_in_progress
from .znodes import CONTROLLER, MIGRATION


class MigrationPhase(StrEnum):
    """What ZooKeeper shows of a migration."""

    WAITING_FOR_BROKERS = "waiting-for-brokers"
    """``/migration`` exists, a ZooKeeper-mode broker still holds ``/controller``, nothing migrated."""
    METADATA_MIGRATION = "metadata-migration"
    """The KRaft controller holds ``/controller``; the initial metadata load has not finished."""
    DUAL_WRITE = "dual-write"
    """Metadata migrated; the KRaft controller writes its changes into ZooKeeper too."""
    REVERTING = "reverting"
    """``/migration`` says the metadata was migrated, yet a ZooKeeper-mode broker is controller again:
    a revert (docs/ops.html "Reverting to ZooKeeper mode During the Migration") not finished."""
    INCONSISTENT = "inconsistent"
    """The signs contradict each other (a persistent ``/controller`` without ``/migration``, an
    unreadable ``/migration``): no ZooKeeper-mode broker may be able to become controller."""


_DESCRIPTIONS = {
    MigrationPhase.WAITING_FOR_BROKERS: (
        "the KRaft controllers are provisioned and wait for every broker to register in migration mode "
        "(KRaftMigrationDriver WAIT_FOR_BROKERS); the ZooKeeper-mode controller still acts"
    ),
    MigrationPhase.METADATA_MIGRATION: (
        "the KRaft controller holds /controller and copies the metadata from ZooKeeper (ZK_MIGRATION)"
    ),
    MigrationPhase.DUAL_WRITE: (
        "the metadata is in KRaft; the KRaft controller writes every change into ZooKeeper too (dual-write) "
        "until the migration is finalized"
    ),
    MigrationPhase.REVERTING: (
        "/migration holds a migrated state but a ZooKeeper-mode broker is controller again: a revert "
        "that has not removed /migration yet (docs/ops.html: 'get /migration' then 'rmr /migration')"
    ),
    MigrationPhase.INCONSISTENT: "ZooKeeper's migration znodes contradict each other",
}


@dataclass(frozen=True)
class MigrationState:
    """A migration as ZooKeeper shows it.

    :param phase: see :class:`MigrationPhase`.
    :param reason: :func:`.safety.kraft_migration_in_progress`'s text (why writes are refused).
    :param kraft_controller_id: the active KRaft controller (``/controller`` when it holds it, else
        ``/migration``'s, -1 until it wrote one).
    :param kraft_controller_epoch: its KRaft epoch, likewise.
    :param metadata_offset: ``/migration``'s ``kraft_metadata_offset`` (-1: nothing migrated yet).
    :param metadata_epoch: ``/migration``'s ``kraft_metadata_epoch``.
    :param zk_controller_epoch: ``/controller_epoch`` (the KRaft controller increments it when it claims).
    :param zk_brokers: brokers registered in ``/brokers/ids`` (still in ZooKeeper mode).
    :param problem: what contradicts (``INCONSISTENT``/``REVERTING``), else None.
    """

    phase: MigrationPhase
    reason: str
    kraft_controller_id: int | None
    kraft_controller_epoch: int | None
    metadata_offset: int | None
    metadata_epoch: int | None
    zk_controller_epoch: int | None
    zk_brokers: tuple[int, ...]
    problem: str | None = None

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self.phase]

    @property
    def kraft_controller_active(self) -> bool:
        """A KRaft controller, not a ZooKeeper-mode broker, acts as the cluster's controller."""
        return self.phase in (MigrationPhase.METADATA_MIGRATION, MigrationPhase.DUAL_WRITE)

    def to_dict(self) -> dict[str, object]:
        return {
            "phase": self.phase.value,
            "description": self.description,
            "kraft_controller_id": self.kraft_controller_id,
            "kraft_controller_epoch": self.kraft_controller_epoch,
            "kraft_metadata_offset": self.metadata_offset,
            "kraft_metadata_epoch": self.metadata_epoch,
            "zookeeper_controller_epoch": self.zk_controller_epoch,
            "zookeeper_mode_brokers": list(self.zk_brokers),
            "problem": self.problem,
            "why_writes_are_refused": self.reason,
        }


def migration_evidence(state: ClusterState) -> KraftMigrationEvidence:
    """The safety rule's evidence from a snapshot's model (an undecodable znode keeps its raw bytes)."""

    def raw(path: str) -> bytes | None:
        for finding in state.findings_at(path):
            if finding.path == path and finding.kind in (
                ModelFindingKind.MALFORMED_ZNODE,
                ModelFindingKind.DECODER_FAILURE,
            ):
                return finding.data if finding.data is not None else b""
        return None

    migration = state.migration.encode() if state.migration is not None else raw(MIGRATION)
    controller = state.controller.encode() if state.controller is not None else raw(CONTROLLER)
    return KraftMigrationEvidence(migration, controller, state.controller_session_id)


def migration_state(state: ClusterState) -> MigrationState | None:
    """The migration's phase, or None when :func:`.safety.kraft_migration_in_progress` sees none."""
    evidence = migration_evidence(state)
    reason = kraft_migration_in_progress(evidence)
    if reason is None:
        return None
    controller = state.controller
    kraft_held = controller is not None and (
        controller.is_kraft_controller or state.controller_session_id == 0
    )
    migration = state.migration
    base = {
        "reason": reason,
        "zk_controller_epoch": state.controller_epoch,
        "zk_brokers": tuple(sorted(state.brokers)),
    }
    if migration is None:
        if evidence.migration_data is not None:
            problem = "/migration exists but cannot be read: Kafka's migration driver cannot read it either"
        else:
            problem = (
                "/controller is held by a KRaft controller or is persistent, but there is no /migration: no "
                "ZooKeeper-mode broker can become controller while it stays (outside a migration a broker's "
                "/controller is ephemeral)"
            )
        return MigrationState(
            MigrationPhase.INCONSISTENT,
            kraft_controller_id=controller.broker_id if controller is not None else None,
            kraft_controller_epoch=controller.kraft_controller_epoch if controller is not None else None,
            metadata_offset=None,
            metadata_epoch=None,
            problem=problem,
            **base,
        )
    migrated = migration.kraft_metadata_offset > 0  # ZkMigrationLeadershipState.initialZkMigrationComplete
    if kraft_held:
        assert controller is not None
        phase = MigrationPhase.DUAL_WRITE if migrated else MigrationPhase.METADATA_MIGRATION
        problem = None
        if (controller.broker_id, controller.kraft_controller_epoch) != (
            migration.kraft_controller_id,
            migration.kraft_controller_epoch,
        ):
            problem = (
                f"/controller names KRaft controller {controller.broker_id} (epoch {controller.kraft_controller_epoch}) "
                f"but /migration {migration.kraft_controller_id} (epoch {migration.kraft_controller_epoch}): a new "
                "KRaft leader between its two writes, or one that failed after claiming /controller"
            )
        return MigrationState(
            phase,
            kraft_controller_id=controller.broker_id,
            kraft_controller_epoch=controller.kraft_controller_epoch,
            metadata_offset=migration.kraft_metadata_offset,
            metadata_epoch=migration.kraft_metadata_epoch,
            problem=problem,
            **base,
        )
    return MigrationState(
        MigrationPhase.REVERTING if migrated else MigrationPhase.WAITING_FOR_BROKERS,
        kraft_controller_id=migration.kraft_controller_id,
        kraft_controller_epoch=migration.kraft_controller_epoch,
        metadata_offset=migration.kraft_metadata_offset,
        metadata_epoch=migration.kraft_metadata_epoch,
        problem=(
            f"/migration holds KRaft metadata offset {migration.kraft_metadata_offset} while broker "
            f"{controller.broker_id if controller else '(none)'} holds /controller"
            if migrated
            else None
        ),
        **base,
    )


def kraft_controller_active(state: ClusterState) -> bool:
    """Whether a KRaft controller acts as controller (so an unregistered ``/controller`` id is no fault)."""
    found = migration_state(state)
    return found is not None and found.kraft_controller_active
