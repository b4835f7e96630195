"""Where a ZooKeeper-to-KRaft migration stands, and what to do next (pure).

Whether one runs at all is :func:`.safety.kraft_migration_in_progress`'s answer (the one rule: a
``/migration`` znode, a ``/controller`` held by a KRaft controller, or a persistent ``/controller``).
This module names the phase for reports, the daily audit and every refusal, from what Kafka 3.9's
migration driver writes (``metadata/src/main/java/org/apache/kafka/metadata/migration/KRaftMigrationDriver.java``
and ``ZkMigrationLeadershipState.java``, ``core/src/main/scala/kafka/zk/KafkaZkClient.scala``, tag
3.9.0-rc3) and what a real 3.9.0 migration showed at each phase (tests/fixtures/real-kafka-3.9-migration):

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
  written into ZooKeeper too (dual-write), until the migration is finalized;
* brokers rolled to KRaft mode (``process.roles=broker``) register with the quorum only: once every
  broker is rolled, ``/brokers/ids`` is EMPTY while all of them serve (the recording's phase 03);
* the documented rollback (docs/ops.html 3.9, "Reverting to ZooKeeper mode During the Migration")
  rolls the brokers back, stops the controllers, deletes ``/controller`` (with ``rmr``, which
  ZooKeeper 3.5+ no longer has: ``deleteall``) and rolls the brokers out of migration mode; it never
  deletes ``/migration``, which then stays with the migrated state (the recording's phase 04c; a later
  attempt skips its initial load, KAFKA-17146).

ZooKeeper alone cannot tell a broker in KRaft mode from a stopped one: each broker's server.properties
(the inventory's :func:`broker_mode`) does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .errors import ZnodeFormatError
from .model import ClusterState, ModelFindingKind
from .safety import KraftMigrationEvidence, kraft_migration_in_progress, kraft_migration_signs
from .znodes import CONTROLLER, MIGRATION, ControllerRegistration, MigrationZNode

DOCS_39 = "docs/ops.html 'ZooKeeper to KRaft Migration' (3.9)"


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
    a rollback in progress, or finished with ``/migration`` left behind (the documented revert never
    deletes it)."""
    INCONSISTENT = "inconsistent"
    """The signs contradict each other (a persistent ``/controller`` without ``/migration``, an
    unreadable ``/migration``): no ZooKeeper-mode broker may be able to become controller."""


class BrokerMode(StrEnum):
    """How a broker runs, from its server.properties (:func:`broker_mode`)."""

    ZOOKEEPER = "zookeeper"
    """ZooKeeper mode, migration off."""
    MIGRATION = "zookeeper-migration"
    """ZooKeeper mode with ``zookeeper.metadata.migration.enable=true``: registers in ``/brokers/ids``
    and with the KRaft quorum."""
    KRAFT = "kraft"
    """``process.roles=broker``: a migration's KRaft broker, registered with the quorum only."""


def broker_mode(settings: Mapping[str, str]) -> BrokerMode:
    """A broker's mode from its server.properties' migration settings (``KafkaConfig``, 3.9.0-rc3:
    ``process.roles`` makes a KRaft node; ``zookeeper.metadata.migration.enable`` is a boolean, which
    ``ConfigDef`` reads trimmed and case-insensitively)."""
    roles = {r.strip() for r in settings.get("process.roles", "").split(",") if r.strip()}
    if "broker" in roles:
        return BrokerMode.KRAFT
    if settings.get("zookeeper.metadata.migration.enable", "").strip().lower() == "true":
        return BrokerMode.MIGRATION
    return BrokerMode.ZOOKEEPER


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
        "/migration holds a migrated state but a ZooKeeper-mode broker is controller again: a rollback in "
        "progress, or one finished with /migration left behind (Kafka's documented revert never deletes it)"
    ),
    MigrationPhase.INCONSISTENT: "ZooKeeper's migration znodes contradict each other",
}

DELETE_MIGRATION = (
    "zookeeper-shell.sh <zookeeper.connect with its chroot> deleteall /migration (ZooKeeper 3.5+ has no rmr, "
    "the command Kafka's docs name)"
)
STALE_MIGRATION = (
    "a stale /migration makes the next migration attempt skip its initial metadata load and delete the topics "
    "created since (KAFKA-17146)"
)
BACK_FROM_DUAL_WRITE = (
    f"Back ({DOCS_39}, 'Reverting to ZooKeeper mode During the Migration'): brokers in KRaft mode first go back "
    "to ZooKeeper mode with the migration flag, one at a time; then stop every KRaft controller, delete "
    "/controller (deleteall -- rmr no longer exists -- and only once the controllers are down: until then the "
    "brokers follow a stopped controller), roll the brokers without zookeeper.metadata.migration.enable and "
    f"the controller.* settings, and delete /migration: {STALE_MIGRATION}"
)


@dataclass(frozen=True)
class MigrationState:
    """A migration as ZooKeeper (and, when known, each broker's server.properties) shows it.

    :param phase: see :class:`MigrationPhase`.
    :param reason: :func:`.safety.kraft_migration_in_progress`'s text (why writes are refused).
    :param kraft_controller_id: the active KRaft controller (``/controller`` when it holds it, else
        ``/migration``'s, -1 until it wrote one).
    :param kraft_controller_epoch: its KRaft epoch, likewise.
    :param metadata_offset: ``/migration``'s ``kraft_metadata_offset`` (-1: nothing migrated yet).
    :param metadata_epoch: ``/migration``'s ``kraft_metadata_epoch``.
    :param zk_controller_epoch: ``/controller_epoch`` (the KRaft controller increments it when it claims).
    :param zk_brokers: brokers registered in ``/brokers/ids`` (in ZooKeeper mode).
    :param problem: what contradicts (``INCONSISTENT``/``REVERTING``), else None.
    :param broker_modes: each inventoried broker's :class:`BrokerMode` (empty: none was read).
    :param known_brokers: every broker ZooKeeper names (registered or in an assignment) or inventoried.
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
    broker_modes: Mapping[int, BrokerMode] = field(default_factory=dict)
    known_brokers: tuple[int, ...] = ()

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self.phase]

    @property
    def kraft_controller_active(self) -> bool:
        """A KRaft controller, not a ZooKeeper-mode broker, acts as the cluster's controller."""
        return self.phase in (MigrationPhase.METADATA_MIGRATION, MigrationPhase.DUAL_WRITE)

    def brokers_in(self, mode: BrokerMode) -> tuple[int, ...]:
        return tuple(sorted(b for b, m in self.broker_modes.items() if m is mode))

    @property
    def kraft_brokers(self) -> tuple[int, ...]:
        """Brokers whose server.properties makes them KRaft brokers (``process.roles=broker``)."""
        return self.brokers_in(BrokerMode.KRAFT)

    @property
    def unregistered(self) -> tuple[int, ...]:
        """Known brokers not in ``/brokers/ids``."""
        return tuple(b for b in self.known_brokers if b not in self.zk_brokers)

    @property
    def serving_outside_zookeeper(self) -> frozenset[int]:
        """Brokers that serve though ``/brokers/ids`` lacks them: KRaft-mode brokers while a KRaft controller
        acts (they register with its quorum only). Not while a ZooKeeper-mode controller acts: it cannot
        lead them, a rollback must bring them back to ZooKeeper mode first."""
        if not self.kraft_controller_active:
            return frozenset()
        return frozenset(b for b in self.kraft_brokers if b not in self.zk_brokers)

    @property
    def unknown_mode(self) -> tuple[int, ...]:
        """Unregistered brokers whose mode nobody read (not inventoried): ZooKeeper cannot tell a KRaft-mode
        broker from a stopped one."""
        return tuple(b for b in self.unregistered if b not in self.broker_modes)

    @property
    def stage(self) -> str:
        """The phase, named as an operator knows it (Kafka's docs' steps)."""
        if self.phase is MigrationPhase.WAITING_FOR_BROKERS:
            rolled = self.brokers_in(BrokerMode.MIGRATION)
            if rolled and len(rolled) < len(self.known_brokers):
                return f"controllers provisioned; brokers rolling into migration mode ({_ids(rolled)} done)"
            return "controllers provisioned; brokers in ZooKeeper mode"
        if self.phase is MigrationPhase.METADATA_MIGRATION:
            return "KRaft controller claimed /controller; metadata being migrated"
        if self.phase is MigrationPhase.DUAL_WRITE:
            kraft, zookeeper = self.kraft_brokers, self.zk_brokers
            if kraft and not zookeeper:
                return "dual-write; every broker in KRaft mode (not finalized)"
            if kraft:
                return f"dual-write; brokers rolling to KRaft mode (KRaft: {_ids(kraft)}; ZooKeeper: {_ids(zookeeper)})"
            if self.unknown_mode:
                return f"dual-write; brokers {_ids(self.unknown_mode)} not in ZooKeeper (KRaft mode or down: not inventoried)"
            return "dual-write; brokers in ZooKeeper mode (migration mode)"
        if self.phase is MigrationPhase.REVERTING:
            flagged = self.brokers_in(BrokerMode.MIGRATION) + self.kraft_brokers
            if flagged:
                return f"rollback; ZooKeeper controller back, brokers {_ids(flagged)} still in migration mode"
            if self.broker_modes:
                return "rolled back to ZooKeeper mode; /migration left behind"
            return "rollback; ZooKeeper controller back (brokers' settings not read)"
        return "inconsistent"

    @property
    def next_step(self) -> str:
        """What an operator does next, forward and back, with what Kafka's docs get wrong corrected."""
        if self.phase is MigrationPhase.WAITING_FOR_BROKERS:
            pending = [b for b in self.known_brokers if self.broker_modes.get(b) is not BrokerMode.MIGRATION]
            return (
                f"Forward ({DOCS_39}, 'Enter Migration Mode on the Brokers'): roll "
                + (f"brokers {_ids(pending)}" if pending and self.broker_modes else "every broker")
                + " into migration mode one at a time (zookeeper.metadata.migration.enable=true, "
                "controller.quorum.bootstrap.servers or controller.quorum.voters, controller.listener.names, the "
                "controller listener in listener.security.protocol.map -- not 'listener.security.property.map' "
                "as the docs spell it); about a second after the last one registers the KRaft controller claims "
                "/controller and migrates. Back: stop the KRaft controllers and delete /migration "
                f"({DELETE_MIGRATION}); nothing was migrated yet"
            )
        if self.phase is MigrationPhase.METADATA_MIGRATION:
            return (
                "Wait for the KRaft controller's log line 'Completed migration of metadata from ZooKeeper to KRaft' "
                "(ZooKeeper with a capital K; the docs quote 'Zookeeper'): /migration's kraft_metadata_offset then "
                "turns positive. Nothing to do in ZooKeeper"
            )
        if self.phase is MigrationPhase.DUAL_WRITE:
            zookeeper = [
                b for b in self.known_brokers if b not in self.kraft_brokers and b in self.zk_brokers
            ]
            forward = (
                f"Forward ({DOCS_39}, 'Migrating brokers to KRaft'): roll "
                + (f"brokers {_ids(zookeeper)}" if zookeeper else "the brokers")
                + " to KRaft mode one at a time (process.roles=broker, node.id = its broker.id; broker.id, "
                "zookeeper.connect, the other zookeeper.* settings and inter.broker.protocol.version removed); "
                "each leaves /brokers/ids for good"
            )
            if self.kraft_brokers and not zookeeper and not self.unknown_mode:
                forward = (
                    f"Forward ({DOCS_39}, 'Finalizing the migration'): once every broker serves in KRaft mode, "
                    "remove zookeeper.metadata.migration.enable and zookeeper.connect from every KRaft controller "
                    "and restart them one at a time -- after that there is no way back to ZooKeeper"
                )
            check = (
                f" Brokers {_ids(self.unknown_mode)} are not in /brokers/ids and were not inventoried: KRaft-mode "
                "brokers register with the quorum only, so ZooKeeper cannot tell them from stopped ones; "
                "kafka-metadata-quorum.sh --bootstrap-controller <controller> describe --replication lists them"
                if self.unknown_mode
                else ""
            )
            return f"{forward}. {BACK_FROM_DUAL_WRITE}.{check}"
        if self.phase is MigrationPhase.REVERTING:
            flagged = self.brokers_in(BrokerMode.MIGRATION) + self.kraft_brokers
            finish = (
                f"Finish the rollback: roll brokers {_ids(flagged)} without zookeeper.metadata.migration.enable, "
                "controller.quorum.* and controller.listener.names (and CONTROLLER out of "
                "listener.security.protocol.map), one at a time; then delete /migration"
            )
            delete = (
                f"Delete /migration: {DELETE_MIGRATION}. The documented revert leaves it: {STALE_MIGRATION}"
            )
            if flagged:
                return f"{finish} ({DELETE_MIGRATION}): {STALE_MIGRATION}"
            if self.broker_modes:
                return delete
            return f"{finish} if any broker still has the migration settings (they were not read). Then: {delete}"
        return (
            "If a KRaft quorum still runs with zookeeper.metadata.migration.enable, it owns /controller: look at its "
            "controllers first. If the migration was rolled back, the revert deletes /controller (deleteall) so a "
            "broker is elected again"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "phase": self.phase.value,
            "stage": self.stage,
            "description": self.description,
            "next_step": self.next_step,
            "kraft_controller_id": self.kraft_controller_id,
            "kraft_controller_epoch": self.kraft_controller_epoch,
            "kraft_metadata_offset": self.metadata_offset,
            "kraft_metadata_epoch": self.metadata_epoch,
            "zookeeper_controller_epoch": self.zk_controller_epoch,
            "zookeeper_mode_brokers": list(self.zk_brokers),
            "kraft_mode_brokers": list(self.kraft_brokers),
            "broker_modes": {str(b): m.value for b, m in sorted(self.broker_modes.items())},
            "not_registered_mode_unknown": list(self.unknown_mode),
            "problem": self.problem,
            "why_writes_are_refused": self.reason,
        }


def refusal(found: MigrationState, evidence: KraftMigrationEvidence) -> str:
    """Why a writer of this provider refuses at this phase, and what to do next (the maintenance session's
    ``KraftMigrationInProgressError``)."""
    if found.kraft_controller_active:
        why = (
            f"KRaft controller {found.kraft_controller_id} owns the metadata and writes ZooKeeper itself: a write "
            "beside it changes metadata its log does not know, and its next dual-write may undo it"
        )
    elif found.phase is MigrationPhase.WAITING_FOR_BROKERS:
        why = (
            "the KRaft quorum takes ZooKeeper over as soon as every broker is in migration mode and reads it once "
            "for its initial load: a write racing that load may not be migrated"
        )
    elif found.phase is MigrationPhase.REVERTING:
        why = (
            "a ZooKeeper-mode controller acts again, but /migration still says the metadata was migrated: a KRaft "
            "controller started again would resume from it instead of loading ZooKeeper anew (KAFKA-17146)"
        )
    else:
        why = found.problem or "ZooKeeper's migration znodes contradict each other"
    return (
        f"a ZooKeeper-to-KRaft migration is in progress, phase {found.phase.value} ({found.stage}): "
        f"{'; '.join(kraft_migration_signs(evidence))}. {why[0].upper()}{why[1:]}. Next: {found.next_step}"
    )


def _ids(brokers: Iterable[int]) -> str:
    return ", ".join(str(b) for b in brokers)


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


def _decoded(evidence: KraftMigrationEvidence) -> tuple[MigrationZNode | None, ControllerRegistration | None]:
    migration = controller = None
    if evidence.migration_data is not None:
        try:
            migration = MigrationZNode.decode(evidence.migration_data)
        except ZnodeFormatError:
            migration = None
    if evidence.controller_data is not None:
        try:
            controller = ControllerRegistration.decode(evidence.controller_data)
        except ZnodeFormatError:
            controller = None
    return migration, controller


def classify(
    evidence: KraftMigrationEvidence,
    *,
    zk_brokers: Iterable[int],
    zk_controller_epoch: int | None = None,
    known_brokers: Iterable[int] = (),
    broker_modes: Mapping[int, BrokerMode] | None = None,
) -> MigrationState | None:
    """The migration's phase from ``/migration`` and ``/controller`` as read (None: no migration), with the
    brokers registered in ``/brokers/ids`` and, when the inventory read them, each broker's mode.

    The one implementation behind :func:`migration_state` (a snapshot), the maintenance session's refusal
    and the readiness report."""
    reason = kraft_migration_in_progress(evidence)
    if reason is None:
        return None
    migration, controller = _decoded(evidence)
    kraft_held = controller is not None and (
        controller.is_kraft_controller or evidence.controller_ephemeral_owner == 0
    )
    registered = tuple(sorted(set(zk_brokers)))
    modes = dict(broker_modes or {})
    base = {
        "reason": reason,
        "zk_controller_epoch": zk_controller_epoch,
        "zk_brokers": registered,
        "broker_modes": modes,
        "known_brokers": tuple(sorted(set(registered) | set(known_brokers) | set(modes))),
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


def migration_state(
    state: ClusterState, broker_modes: Mapping[int, BrokerMode] | None = None
) -> MigrationState | None:
    """The migration's phase in a snapshot, or None when :func:`.safety.kraft_migration_in_progress` sees
    none; ``broker_modes`` (from the inventory, :func:`broker_mode`) names the stage and the next step."""
    assigned = {b for p in state.partitions() for b in p.replicas}
    return classify(
        migration_evidence(state),
        zk_brokers=state.brokers,
        zk_controller_epoch=state.controller_epoch,
        known_brokers=assigned,
        broker_modes=broker_modes,
    )


def kraft_controller_active(state: ClusterState) -> bool:
    """Whether a KRaft controller acts as controller (so an unregistered ``/controller`` id is no fault)."""
    found = migration_state(state)
    return found is not None and found.kraft_controller_active


def broker_modes_from_settings(settings: Mapping[int, Mapping[str, str]]) -> dict[int, BrokerMode]:
    """Each inventoried broker's mode from its migration settings (``BrokerFacts.migration_settings``)."""
    return {b: broker_mode(s) for b, s in settings.items()}
