"""Where a ZooKeeper-to-KRaft migration stands, and what to do next (pure).

Whether one runs at all is :func:`.safety.kraft_migration_in_progress`'s answer (the one rule: a
``/migration`` znode, a ``/controller`` held by a KRaft controller, or a persistent ``/controller``).
The phase itself is decided once, by :mod:`.kraft_migration_phase` (its vocabulary, its signals; a
finalized migration too, by the migration DAG's record in ZooKeeper):
this module is the view of it for readers that see ZooKeeper and perhaps the brokers' files but not the
controllers (the daily audit, the readiness report, every writer's refusal) -- the phase named as an
operator knows it, what it means and what to do next. Background, from what Kafka 3.9's
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

from .errors import ZnodeFormatError
from .kraft_migration_config import NODE_MODES, BrokerMode, broker_mode
from .kraft_migration_phase import DUAL_WRITE, Phase, PhaseReading, ZooKeeperMigrationView, zookeeper_phase
from .model import ClusterState, ModelFindingKind
from .safety import KraftMigrationEvidence, kraft_migration_in_progress, kraft_migration_signs
from .znodes import CONTROLLER, MIGRATION, ControllerRegistration, MigrationZNode

DOCS_39 = "docs/ops.html 'ZooKeeper to KRaft Migration' (3.9)"


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
    """A migration as ZooKeeper (and, when known, each broker's server.properties) shows it: the phase
    :func:`.kraft_migration_phase.zookeeper_phase` decides, and what an operator reads about it.

    :param reading: the phase reader's answer (its phase, every phase the signals leave, the signals).
    :param reason: why writes are refused: the phase reader's "the cluster left ZooKeeper" once finalized,
        else :func:`.safety.kraft_migration_in_progress`'s text.
    :param kraft_controller_id: the active KRaft controller (``/controller`` when it holds it, else
        ``/migration``'s, -1 until it wrote one).
    :param kraft_controller_epoch: its KRaft epoch, likewise.
    :param metadata_offset: ``/migration``'s ``kraft_metadata_offset`` (-1: nothing migrated yet).
    :param metadata_epoch: ``/migration``'s ``kraft_metadata_epoch``.
    :param zk_controller_epoch: ``/controller_epoch`` (the KRaft controller increments it when it claims).
    :param zk_brokers: brokers registered in ``/brokers/ids`` (in ZooKeeper mode).
    :param kraft_held: a KRaft controller holds ``/controller`` (persistent, its KRaft epoch in it).
    :param migration_absent: there is no ``/migration`` (only a persistent ``/controller`` says migration).
    :param problem: what contradicts, or what is left behind, else None.
    :param broker_modes: each inventoried broker's :class:`BrokerMode` (empty: none was read).
    :param known_brokers: every broker ZooKeeper names (registered or in an assignment) or inventoried.
    """

    reading: PhaseReading
    reason: str
    kraft_controller_id: int | None
    kraft_controller_epoch: int | None
    metadata_offset: int | None
    metadata_epoch: int | None
    zk_controller_epoch: int | None
    zk_brokers: tuple[int, ...]
    kraft_held: bool = False
    migration_absent: bool = False
    problem: str | None = None
    broker_modes: Mapping[int, BrokerMode] = field(default_factory=dict)
    known_brokers: tuple[int, ...] = ()

    @property
    def phase(self) -> Phase | None:
        """The phase (:class:`.kraft_migration_phase.Phase`); None when the signals contradict each other."""
        return self.reading.phase

    @property
    def phase_name(self) -> str:
        return self.phase.value if self.phase is not None else "inconsistent"

    @property
    def left_zookeeper(self) -> bool:
        """Finalized, as the migration DAG recorded: ZooKeeper's migration znodes are a frozen copy."""
        return self.reading.left_zookeeper is not None

    @property
    def inconsistent(self) -> bool:
        """No phase, or a persistent ``/controller`` without ``/migration``: no ZooKeeper-mode broker can
        become controller while it stays."""
        return self.phase is None or (self.migration_absent and not self.left_zookeeper)

    @property
    def hung(self) -> bool:
        """KRaft controllers may run on a ``/migration`` without data: their migration never starts
        (KAFKA-19480)."""
        return (
            self.metadata_offset is None
            and not self.migration_absent
            and not self.left_over
            and not self.left_zookeeper
        )

    @property
    def waiting_for_brokers(self) -> bool:
        """The KRaft controllers are provisioned and no KRaft controller holds ``/controller`` yet: the
        brokers are (being) rolled into migration mode (KRaftMigrationDriver WAIT_FOR_BROKERS)."""
        return self.phase is Phase.CONTROLLERS_PROVISIONED or (
            self.phase is Phase.BROKERS_IN_MIGRATION_MODE and not self.kraft_held
        )

    @property
    def left_over(self) -> bool:
        """ZooKeeper mode again, ``/migration`` still there (the documented revert leaves it; KAFKA-19480's
        has no data)."""
        return self.phase is Phase.ZOOKEEPER

    @property
    def description(self) -> str:
        phase = self.phase
        if self.inconsistent:
            return "ZooKeeper's migration znodes contradict each other"
        if self.waiting_for_brokers:
            return (
                "the KRaft controllers are provisioned and wait for every broker to register in migration mode "
                "(KRaftMigrationDriver WAIT_FOR_BROKERS); the ZooKeeper-mode controller still acts"
            )
        if phase is Phase.BROKERS_IN_MIGRATION_MODE:
            return (
                "the KRaft controller holds /controller and copies the metadata from ZooKeeper (ZK_MIGRATION)"
            )
        if phase in DUAL_WRITE:
            return (
                "the metadata is in KRaft; the KRaft controller writes every change into ZooKeeper too (dual-write) "
                "until the migration is finalized"
            )
        if phase in (Phase.FINALIZING, Phase.FINALIZED):
            return "the KRaft controllers run without the migration flag: ZooKeeper is no longer written"
        if phase is Phase.REVERTING:
            return (
                "/migration holds a migrated state but a ZooKeeper-mode broker is controller again: a rollback in "
                "progress, or one finished with /migration left behind (Kafka's documented revert never deletes it)"
            )
        return (
            "ZooKeeper mode, but /migration is still there: left behind by a rollback (Kafka's documented revert "
            "never deletes it) or written without data (KAFKA-19480)"
        )

    @property
    def kraft_controller_active(self) -> bool:
        """A KRaft controller, not a ZooKeeper-mode broker, acts as the cluster's controller: it holds
        ``/controller`` beside a readable ``/migration`` (whether its process still runs, ZooKeeper cannot
        say: a revert that stopped it reads ``reverting`` once the brokers' files show it)."""
        return self.kraft_held and not self.inconsistent

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
        phase = self.phase
        if self.inconsistent:
            return "inconsistent"
        if self.hung:
            return "controllers provisioned; migration hung on a /migration without data (KAFKA-19480)"
        if self.waiting_for_brokers:
            rolled = self.brokers_in(BrokerMode.MIGRATION)
            if rolled and len(rolled) < len(self.known_brokers):
                return f"controllers provisioned; brokers rolling into migration mode ({_ids(rolled)} done)"
            return "controllers provisioned; brokers in ZooKeeper mode"
        if phase is Phase.BROKERS_IN_MIGRATION_MODE:
            return "KRaft controller claimed /controller; metadata being migrated"
        if phase in DUAL_WRITE:
            kraft, zookeeper = self.kraft_brokers, self.zk_brokers
            if kraft and not zookeeper:
                return "dual-write; every broker in KRaft mode (not finalized)"
            if kraft:
                return f"dual-write; brokers rolling to KRaft mode (KRaft: {_ids(kraft)}; ZooKeeper: {_ids(zookeeper)})"
            if self.unknown_mode:
                return f"dual-write; brokers {_ids(self.unknown_mode)} not in ZooKeeper (KRaft mode or down: not inventoried)"
            return "dual-write; brokers in ZooKeeper mode (migration mode)"
        if self.left_zookeeper:
            return "finalized: the cluster left ZooKeeper"
        if phase in (Phase.FINALIZING, Phase.FINALIZED):
            return "finalizing or finalized"
        if phase is Phase.REVERTING:
            flagged = self.brokers_in(BrokerMode.MIGRATION) + self.kraft_brokers
            if flagged:
                return f"rollback; ZooKeeper controller back, brokers {_ids(flagged)} still in migration mode"
            return "rollback; ZooKeeper controller back (brokers' settings not read)"
        if self.metadata_offset is None:
            return "ZooKeeper mode; /migration without data (KAFKA-19480)"
        if self.metadata_offset > 0:
            return "rolled back to ZooKeeper mode; /migration left behind"
        return "ZooKeeper mode; /migration left behind"

    @property
    def next_step(self) -> str:
        """What an operator does next, forward and back, with what Kafka's docs get wrong corrected."""
        phase = self.phase
        if self.inconsistent:
            return (
                "If a KRaft quorum still runs with zookeeper.metadata.migration.enable, it owns /controller: look at "
                "its controllers first. If the migration was rolled back, the revert deletes /controller (deleteall) "
                "so a broker is elected again"
            )
        if self.hung:
            return (
                "The KRaft controllers cannot start the migration on a /migration without data (KAFKA-19480): "
                "trigger kafka_zk_kraft_migration with direction back (it stops them and deletes /migration), "
                "then forward again"
            )
        if self.waiting_for_brokers:
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
        if phase is Phase.BROKERS_IN_MIGRATION_MODE:
            return (
                "Wait for the KRaft controller's log line 'Completed migration of metadata from ZooKeeper to KRaft' "
                "(ZooKeeper with a capital K; the docs quote 'Zookeeper'): /migration's kraft_metadata_offset then "
                "turns positive. Nothing to do in ZooKeeper"
            )
        if phase in DUAL_WRITE:
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
        if self.left_zookeeper:
            return (
                "Nothing to do in ZooKeeper: use Kafka's Admin API against the KRaft cluster; deprovision this "
                "ZooKeeper (or its chroot) once nothing else uses it"
            )
        if phase in (Phase.FINALIZING, Phase.FINALIZED):
            return "Read the controllers' files: once every controller runs without the migration flag there is no way back"
        delete = f"Delete /migration: {DELETE_MIGRATION}. The documented revert leaves it: {STALE_MIGRATION}"
        if phase is Phase.REVERTING:
            flagged = self.brokers_in(BrokerMode.MIGRATION) + self.kraft_brokers
            finish = (
                f"Finish the rollback: roll brokers {_ids(flagged)} without zookeeper.metadata.migration.enable, "
                "controller.quorum.* and controller.listener.names (and CONTROLLER out of "
                "listener.security.protocol.map), one at a time; then delete /migration"
            )
            if flagged:
                return f"{finish} ({DELETE_MIGRATION}): {STALE_MIGRATION}"
            return f"{finish} if any broker still has the migration settings (they were not read). Then: {delete}"
        if self.reading.stale_migration and "KAFKA-19480" in self.reading.stale_migration:
            return f"Delete /migration: {DELETE_MIGRATION}. {self.reading.stale_migration}"
        return delete

    def to_dict(self) -> dict[str, object]:
        return {
            "phase": self.phase_name,
            "possible_phases": self.reading.to_dict()["possible_phases"],
            "presumed": self.reading.presumed,
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
    if found.left_zookeeper:
        return found.reason
    if found.kraft_controller_active:
        why = (
            f"KRaft controller {found.kraft_controller_id} owns the metadata and writes ZooKeeper itself: a write "
            "beside it changes metadata its log does not know, and its next dual-write may undo it"
        )
    elif found.waiting_for_brokers and not found.inconsistent:
        why = (
            "the KRaft quorum takes ZooKeeper over as soon as every broker is in migration mode and reads it once "
            "for its initial load: a write racing that load may not be migrated"
        )
    elif found.phase in (Phase.REVERTING, Phase.ZOOKEEPER) and not found.inconsistent:
        why = (
            "a ZooKeeper-mode controller acts again, but /migration is still there: a KRaft controller started "
            "again would resume from it instead of loading ZooKeeper anew (KAFKA-17146)"
            if (found.metadata_offset or -1) > 0
            else "a ZooKeeper-mode controller acts, but /migration is still there"
            + (f" ({found.reading.stale_migration})" if found.reading.stale_migration else "")
        )
    else:
        why = found.problem or "ZooKeeper's migration znodes contradict each other"
    return (
        f"a ZooKeeper-to-KRaft migration is in progress, phase {found.phase_name} ({found.stage}): "
        f"{'; '.join(kraft_migration_signs(evidence))}. {why[0].upper()}{why[1:]}. Next: {found.next_step}"
    )


def _ids(brokers: Iterable[int]) -> str:
    return ", ".join(str(b) for b in brokers)


def migration_evidence(state: ClusterState) -> KraftMigrationEvidence:
    """The safety rule's and the phase reader's evidence from a snapshot's model (an undecodable znode keeps
    its raw bytes; the finalization record as :attr:`.model.ClusterState.kraft_finalized` read it)."""

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
    return KraftMigrationEvidence(migration, controller, state.controller_session_id, state.kraft_finalized)


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
    """The migration as ``/migration``, ``/controller``, ``/brokers/ids`` and the finalization record show
    it (None: no trace of one) and, when the inventory read them, each broker's mode: the phase by
    :func:`.kraft_migration_phase.zookeeper_phase` (the one phase rule; finalized included), the rest for
    the reports.

    The one view behind :func:`migration_state` (a snapshot), the maintenance session's refusal and the
    readiness report."""
    signs = kraft_migration_in_progress(evidence)
    if signs is None and evidence.finalized_record is None:
        return None  # nothing of a migration in ZooKeeper: ZooKeeper mode
    migration, controller = _decoded(evidence)
    registered = tuple(sorted(set(zk_brokers)))
    modes = dict(broker_modes or {})
    known = tuple(sorted(set(registered) | set(known_brokers) | set(modes)))
    view = ZooKeeperMigrationView(
        migration=evidence.migration_data,
        migration_version=-1,
        controller=evidence.controller_data,
        controller_ephemeral=evidence.controller_ephemeral_owner not in (None, 0),
        controller_version=-1,
        controller_epoch=zk_controller_epoch,
        controller_epoch_version=-1,
        registered=frozenset(registered),
        cluster_id="",
        finalized_record=evidence.finalized_record,
    )
    reading = zookeeper_phase(view, {b: NODE_MODES[m] for b, m in modes.items()}, brokers=known)
    reason = reading.left_zookeeper or signs or reading.refusal or ""
    kraft_held = controller is not None and (
        controller.is_kraft_controller or evidence.controller_ephemeral_owner == 0
    )
    problem = None
    if reading.left_zookeeper is not None:
        pass  # finalized: ZooKeeper's migration znodes are what the last dual write (or a tidy-up) left
    elif evidence.finalized_record is not None and reading.phase is None:
        problem = reading.refusal  # the record and another signal disagree (the refusal names both)
    elif migration is None:
        if evidence.migration_data:
            problem = "/migration exists but cannot be read: Kafka's migration driver cannot read it either"
        elif evidence.migration_data is not None:
            problem = reading.stale_migration
        else:
            problem = (
                "/controller is held by a KRaft controller or is persistent, but there is no /migration: no "
                "ZooKeeper-mode broker can become controller while it stays (outside a migration a broker's "
                "/controller is ephemeral)"
            )
    elif reading.phase is None:
        problem = reading.refusal
    elif kraft_held:
        assert controller is not None
        if (controller.broker_id, controller.kraft_controller_epoch) != (
            migration.kraft_controller_id,
            migration.kraft_controller_epoch,
        ):
            problem = (
                f"/controller names KRaft controller {controller.broker_id} (epoch {controller.kraft_controller_epoch}) "
                f"but /migration {migration.kraft_controller_id} (epoch {migration.kraft_controller_epoch}): a new "
                "KRaft leader between its two writes, or one that failed after claiming /controller"
            )
    elif migration.kraft_metadata_offset > 0:  # ZkMigrationLeadershipState.initialZkMigrationComplete
        problem = (
            f"/migration holds KRaft metadata offset {migration.kraft_metadata_offset} while broker "
            f"{controller.broker_id if controller else '(none)'} holds /controller"
        )
    if controller is not None and (kraft_held or evidence.migration_data is None):
        kraft_id, kraft_epoch = controller.broker_id, controller.kraft_controller_epoch
    elif migration is not None:
        kraft_id, kraft_epoch = migration.kraft_controller_id, migration.kraft_controller_epoch
    else:
        kraft_id = kraft_epoch = None
    return MigrationState(
        reading,
        reason=reason,
        kraft_controller_id=kraft_id,
        kraft_controller_epoch=kraft_epoch,
        metadata_offset=migration.kraft_metadata_offset if migration is not None else None,
        metadata_epoch=migration.kraft_metadata_epoch if migration is not None else None,
        zk_controller_epoch=zk_controller_epoch,
        zk_brokers=registered,
        kraft_held=kraft_held,
        migration_absent=evidence.migration_data is None,
        problem=problem,
        broker_modes=modes,
        known_brokers=known,
    )


def migration_state(
    state: ClusterState, broker_modes: Mapping[int, BrokerMode] | None = None
) -> MigrationState | None:
    """The migration's phase in a snapshot, or None when ZooKeeper shows no trace of one (:func:`classify`);
    ``broker_modes`` (from the inventory, :func:`broker_mode`) names the stage and the next step."""
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
