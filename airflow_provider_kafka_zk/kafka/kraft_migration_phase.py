"""Where a ZooKeeper-to-KRaft migration stands, from every signal the cluster gives (pure).

The one phase rule of the provider: :func:`detect_phase` (the migration DAG, its planner and its
executor: every signal, exactly one phase or a refusal) and :func:`zookeeper_phase` (the daily audit,
the readiness report and every writer's refusal, through :mod:`.kraft_migration`'s view: ZooKeeper and
the brokers' files only, a presumed phase where several fit) intersect the same signals.

A migration leaves traces in several places, each written by a different process at a different
moment; read alone, any of them can mislead (a ``/migration`` left behind by a rollback done as the
docs say, a controller log that rotated, a broker whose file changed but which was not restarted).
:func:`detect_phase` reads them all and names the one phase they agree on -- or refuses, naming
every signal and what it says, when they disagree or when one it needs could not be read. The
signals and what each writes (Apache Kafka 3.9.0, tag 3.9.0-rc3; the golden data of a real 3.9.0
migration in tests/fixtures/real-kafka-3.9-migration):

* ``/migration`` -- created by the active KRaft controller when it starts in migration mode
  (``KRaftMigrationDriver`` ``RecoverMigrationStateFromZKEvent`` -> ``KafkaZkClient.
  getOrCreateMigrationState``, -1 everywhere); ``kraft_metadata_offset`` > 0 once the initial load
  completed; nobody removes it (the docs' revert forgets it in one row: KAFKA-17146);
* ``/controller`` -- a ZooKeeper-mode broker's *ephemeral* registration (``kraftControllerEpoch``
  -1), or, once a KRaft controller claimed it (``tryRegisterKRaftControllerAsActiveController``), a
  *persistent* one carrying its KRaft epoch; ``/controller_epoch`` is incremented by every claim;
* ``/brokers/ids`` -- ZooKeeper-mode brokers (with or without the flag); empty once they run in KRaft;
* each broker's and controller's server.properties (:func:`.kraft_migration_config.node_mode`),
  whether its process runs, and whether the file changed after the process started;
* each controller's ``meta.properties`` (v1, ZooKeeper's cluster id: ``kafka-storage format``);
* the controllers' metadata log (:mod:`.kraft_metadata`): the last ``ZkMigrationStateRecord``
  (PRE_MIGRATION at activation, MIGRATION when the load completed, POST_MIGRATION once finalized)
  and each broker's registration (as a ZooKeeper broker in migration mode, or as a KRaft broker);
* the active controller's log: "Completed migration of metadata from ZooKeeper to KRaft" -- spelled
  so by ``KRaftMigrationDriver`` at 3.9.0-rc3 (the docs quote "Zookeeper"; both spellings match here);
* this provider's record of the finalization (:data:`.safety.KRAFT_FINALIZED_PATH`), written by the
  migration DAG once the metadata log said POST_MIGRATION: ZooKeeper alone cannot tell a finalized
  cluster from a dual-write (Kafka leaves ``/controller`` and ``/migration`` as its last write did), so
  the record is the signal that does -- for both readers, so the migration DAG, the audit and every
  writer agree (:attr:`PhaseReading.left_zookeeper`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .kraft_metadata import MetadataImage, ZkMigrationState
from .kraft_migration_config import NodeMode
from .safety import KRAFT_FINALIZED_PATH, cluster_left_zookeeper
from .znodes import ControllerRegistration, MigrationZNode


class Phase(enum.StrEnum):
    """The phases of a migration, in forward order, and the states between them a run can stop in."""

    ZOOKEEPER = "zookeeper"
    """ZooKeeper mode: no KRaft controller provisioned."""
    CONTROLLERS_PROVISIONED = "controllers-provisioned"
    """Pre-migration: the KRaft quorum runs in migration mode (``/migration`` at -1), brokers in ZooKeeper mode."""
    BROKERS_IN_MIGRATION_MODE = "brokers-in-migration-mode"
    """Hybrid: brokers being rolled into migration mode, or all of them, and the metadata not migrated yet."""
    DUAL_WRITE_ZK_BROKERS = "dual-write-zk-brokers"
    """The metadata is in KRaft; the KRaft controller leads ZooKeeper-mode brokers and dual-writes."""
    ROLLING_TO_KRAFT = "rolling-brokers-to-kraft"
    """Some brokers run in KRaft mode, some still in ZooKeeper migration mode (dual-write)."""
    DUAL_WRITE_KRAFT_BROKERS = "dual-write-kraft-brokers"
    """Every broker runs in KRaft mode; the controller still writes ZooKeeper (not finalized)."""
    FINALIZING = "finalizing"
    """Some controllers restarted without the migration flag."""
    FINALIZED = "finalized"
    """Every controller without the flag; the metadata log says POST_MIGRATION: no way back."""
    REVERTING = "reverting"
    """A revert to ZooKeeper mode is under way: the KRaft controllers are stopped and brokers still
    carry migration settings (or ``/controller`` still names a stopped KRaft controller)."""


ORDER: tuple[Phase, ...] = (
    Phase.ZOOKEEPER,
    Phase.CONTROLLERS_PROVISIONED,
    Phase.BROKERS_IN_MIGRATION_MODE,
    Phase.DUAL_WRITE_ZK_BROKERS,
    Phase.ROLLING_TO_KRAFT,
    Phase.DUAL_WRITE_KRAFT_BROKERS,
    Phase.FINALIZING,
    Phase.FINALIZED,
)
ALL = frozenset(Phase)
DUAL_WRITE = frozenset({Phase.DUAL_WRITE_ZK_BROKERS, Phase.ROLLING_TO_KRAFT, Phase.DUAL_WRITE_KRAFT_BROKERS})
"""The phases in which the metadata is in KRaft and the KRaft controller dual-writes ZooKeeper."""
_ANY_MIGRATED = frozenset(
    {
        Phase.DUAL_WRITE_ZK_BROKERS,
        Phase.ROLLING_TO_KRAFT,
        Phase.DUAL_WRITE_KRAFT_BROKERS,
        Phase.FINALIZING,
        Phase.FINALIZED,
    }
)
_CONTROLLERS_RUN = frozenset(
    {
        Phase.CONTROLLERS_PROVISIONED,
        Phase.BROKERS_IN_MIGRATION_MODE,
        Phase.DUAL_WRITE_ZK_BROKERS,
        Phase.ROLLING_TO_KRAFT,
        Phase.DUAL_WRITE_KRAFT_BROKERS,
    }
)

COMPLETED_LINE = re.compile(r"Completed migration of metadata from Zoo[Kk]eeper to KRaft")
"""``KRaftMigrationDriver.MigrateMetadataEvent`` at 3.9.0-rc3 logs "...from ZooKeeper to KRaft";
docs/ops.html (3.4-3.9) quotes "Zookeeper": a case-sensitive wait on the documented text never ends."""
PRE_MIGRATION_LINE = "Putting the controller into pre-migration mode"
"""``QuorumController`` activation in migration mode (3.9.0-rc3, golden log 01)."""
DRIVER_STATE_LINE = re.compile(
    r"\[KRaftMigrationDriver id=(\d+)\] \d+ transitioning from (\w+) to (\w+) state"
)


# ---------------------------------------------------------------------------------------------
# The signals as read
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooKeeperMigrationView:
    """What ZooKeeper shows of a migration (read in one pass by the operator).

    :param migration: ``/migration``'s bytes (None: absent; ``b""``: present without data).
    :param migration_version: its zkVersion (every dual write increments it).
    :param controller: ``/controller``'s bytes (None: absent).
    :param controller_ephemeral: whether ``/controller`` is ephemeral (a broker's session holds it).
    :param controller_version: its zkVersion.
    :param controller_epoch: ``/controller_epoch``'s value and zkVersion.
    :param registered: broker ids in ``/brokers/ids``.
    :param partition_controller_epochs: the highest ``controller_epoch`` among partition state
        znodes (KAFKA-20488) and how many partitions carry a value above ``/controller_epoch``.
    :param cluster_id: ``/cluster/id``.
    :param finalized_record: :data:`.safety.KRAFT_FINALIZED_PATH`'s bytes (``b""``: present without
        data; None: absent): the migration DAG recorded the finalization.
    """

    migration: bytes | None
    migration_version: int
    controller: bytes | None
    controller_ephemeral: bool
    controller_version: int
    controller_epoch: int | None
    controller_epoch_version: int
    registered: frozenset[int]
    cluster_id: str
    max_partition_controller_epoch: int = -1
    partitions_above_zk_epoch: tuple[str, ...] = ()
    finalized_record: bytes | None = None

    def migration_znode(self) -> MigrationZNode | None:
        if not self.migration:
            return None
        return MigrationZNode.decode(self.migration)

    def controller_registration(self) -> ControllerRegistration | None:
        if self.controller is None:
            return None
        return ControllerRegistration.decode(self.controller)


@dataclass(frozen=True)
class NodeFile:
    """One node's server.properties as read on its host, and its process.

    :param properties: the parsed file (None: it does not exist).
    :param text: the file as written (for edits and diffs).
    :param problem: why it could not be read (host unreachable, a symlink ...).
    :param running: a Kafka process started with this file runs (None: unknown).
    :param restart_pending: the file changed after that process started.
    """

    node_id: int
    role: str  # "broker" | "controller"
    host: str | None
    path: str | None
    properties: Mapping[str, str] | None
    text: str | None = None
    sha256: str | None = None
    problem: str | None = None
    running: bool | None = None
    restart_pending: bool = False

    @property
    def mode(self) -> NodeMode | None:
        from .kraft_migration_config import node_mode

        return None if self.properties is None else node_mode(self.properties)

    @property
    def where(self) -> str:
        return f"{self.role} {self.node_id} ({self.host or '?'}:{self.path or '?'})"


@dataclass(frozen=True)
class ControllerDisk:
    """What a controller's log dir holds: meta.properties and the metadata log's image.

    :param meta_cluster_id: ``cluster.id`` of its ``meta.properties`` (None: no file).
    :param meta_node_id: ``node.id`` in it.
    :param meta_version: its ``version``.
    :param image: the replayed metadata log (None: none or unread).
    :param log_lines: the migration lines of its log file (None: not read).
    """

    node_id: int
    meta_cluster_id: str | None = None
    meta_node_id: int | None = None
    meta_version: int | None = None
    meta_problem: str | None = None
    image: MetadataImage | None = None
    image_problem: str | None = None
    log_lines: tuple[str, ...] | None = None
    quorum_leader: int | None = None
    quorum_epoch: int | None = None

    @property
    def formatted(self) -> bool:
        return self.meta_cluster_id is not None


@dataclass(frozen=True)
class Signal:
    """One signal: its name, what it says, and the phases it allows."""

    name: str
    says: str
    phases: frozenset[Phase]

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.name, "says": self.says, "phases": sorted(p.value for p in self.phases)}


@dataclass(frozen=True)
class PhaseReading:
    """:func:`detect_phase`'s answer: the phase (None when refused), every signal, and why not.

    :param notes: facts a person should know that do not change the phase (a stale ``/migration``,
        a restart pending, a node down).
    :param stale_migration: ``/migration`` is left over (KAFKA-17146) or null (KAFKA-19480).
    :param possible: every phase the signals allow (one when they agree; several when a signal was
        not read, see :func:`zookeeper_phase`; none when they disagree).
    :param presumed: why :attr:`phase` is presumed among several possible ones (None: decided).
    :param left_zookeeper: finalized by the migration DAG's record: why nothing writes this ZooKeeper any
        more (:func:`.safety.cluster_left_zookeeper`; every writer's refusal, the audit's finding), else None.
    """

    phase: Phase | None
    signals: tuple[Signal, ...]
    refusal: str | None = None
    possible: frozenset[Phase] = frozenset()
    presumed: str | None = None
    notes: tuple[str, ...] = ()
    stale_migration: str | None = None
    broker_modes: Mapping[int, NodeMode | None] = field(default_factory=dict)
    controller_modes: Mapping[int, NodeMode | None] = field(default_factory=dict)
    migration_state: ZkMigrationState | None = None
    kraft_registrations: Mapping[int, bool] = field(
        default_factory=dict
    )  # broker -> registered as KRaft broker
    migration_completed_logged: bool | None = None
    left_zookeeper: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value if self.phase else None,
            "possible_phases": [p.value for p in (*ORDER, Phase.REVERTING) if p in self.possible],
            "presumed": self.presumed,
            "refusal": self.refusal,
            "signals": [s.to_dict() for s in self.signals],
            "notes": list(self.notes),
            "stale_migration": self.stale_migration,
            "broker_modes": {str(b): (m.value if m else None) for b, m in sorted(self.broker_modes.items())},
            "controller_modes": {
                str(c): (m.value if m else None) for c, m in sorted(self.controller_modes.items())
            },
            "zk_migration_state": self.migration_state.name if self.migration_state else None,
            "kraft_registrations": {str(b): v for b, v in sorted(self.kraft_registrations.items())},
        }

    def text(self) -> str:
        head = f"phase: {self.phase.value}" if self.phase else f"phase unknown: {self.refusal}"
        lines = [head, "signals:"]
        lines += [f"  - {s.name}: {s.says}" for s in self.signals]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


class PhaseRefusedError(ValueError):
    """The signals disagree, or one the phase depends on could not be read (the message names them)."""

    def __init__(self, reading: PhaseReading) -> None:
        self.reading = reading
        super().__init__(reading.refusal or "phase unknown")


# ---------------------------------------------------------------------------------------------
# Each signal's phases
# ---------------------------------------------------------------------------------------------


def _zookeeper_signals(
    zk: ZooKeeperMigrationView, controller_ids: frozenset[int] | None
) -> tuple[list[Signal], str | None]:
    """``/migration``, ``/controller`` and the finalization record (both readers read ZooKeeper so).

    Once the record says the migration was finalized, no Kafka process reads or writes this ZooKeeper:
    ``/migration`` and ``/controller`` are whatever the last dual write (or a tidy-up since) left, so they
    allow the finalized phase too; the record allows nothing else."""
    migration, stale = _migration_signal(zk, controller_ids)
    signals = [migration, _controller_signal(zk, controller_ids)]
    if zk.finalized_record is None:
        return signals, stale
    frozen = " (frozen since the finalization: no Kafka process writes it)"
    signals = [Signal(s.name, s.says + frozen, s.phases | {Phase.FINALIZED}) for s in signals]
    signals.append(
        Signal(
            KRAFT_FINALIZED_PATH,
            "written by kafka_zk_kraft_migration once the metadata log said POST_MIGRATION: the cluster left "
            "ZooKeeper",
            frozenset({Phase.FINALIZED}),
        )
    )
    return signals, None


def _migration_signal(
    zk: ZooKeeperMigrationView, controller_ids: frozenset[int] | None
) -> tuple[Signal, str | None]:
    if zk.migration is None:
        return Signal("/migration", "absent", frozenset({Phase.ZOOKEEPER, Phase.REVERTING})), None
    if zk.migration == b"":
        # zookeeper-security-migration (3.4+: /migration is in ZkData.SecureRootPaths) without
        # --enable.path.check creates every missing secure root path with null data
        # (ZkSecurityMigrator.run -> KafkaZkClient.makeSurePersistentPathExists -> createRecursive(path,
        # data = null), tag 3.9.0-rc3; /controller is skipped since 2.5.0, KAFKA-9267). A KRaft controller
        # in migration mode then fails in RecoverMigrationStateFromZKEvent: getOrCreateMigrationState
        # creates /migration only on NONODE and MigrationZNode.decode cannot read null or empty data
        # (KafkaZkClient.scala / ZkData.scala, 3.9.0-rc3); its driver stays UNINITIALIZED and retries at
        # every poll: the controllers run, the migration never starts (KAFKA-19480; apache/kafka#20627,
        # merged 2025-10-07, recreates such a /migration instead; Kafka's documented workaround deletes it)
        stale = (
            "/migration exists without data (zookeeper-security-migration without --enable.path.check creates "
            "every missing root znode so): a KRaft controller in migration mode cannot parse it and retries "
            "forever -- the migration never starts (KAFKA-19480); it must be deleted while no KRaft controller runs"
        )
        return (
            Signal(
                "/migration",
                "present without data (KAFKA-19480: any KRaft controller started on it hangs)",
                frozenset({Phase.ZOOKEEPER, Phase.CONTROLLERS_PROVISIONED, Phase.BROKERS_IN_MIGRATION_MODE}),
            ),
            stale,
        )
    try:
        state = zk.migration_znode()
    except ValueError as exc:
        return Signal("/migration", f"unreadable ({exc})", frozenset()), None
    assert state is not None
    described = (
        f"KRaft controller {state.kraft_controller_id} epoch {state.kraft_controller_epoch}, metadata offset "
        f"{state.kraft_metadata_offset} (zkVersion {zk.migration_version})"
    )
    if state.kraft_metadata_offset > 0:  # ZkMigrationLeadershipState.initialZkMigrationComplete
        phases = _ANY_MIGRATED | {Phase.REVERTING, Phase.ZOOKEEPER}
        says = f"metadata migrated: {described}"
    else:
        phases = frozenset(
            {Phase.CONTROLLERS_PROVISIONED, Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING, Phase.ZOOKEEPER}
        )
        says = f"not migrated yet: {described}"
    if controller_ids is not None and state.kraft_controller_id not in (-1, *controller_ids):
        return (
            Signal(
                "/migration",
                f"{says}; names KRaft controller {state.kraft_controller_id}, which the cluster file does not list",
                frozenset(),
            ),
            None,
        )
    return Signal("/migration", says, phases), None


def _controller_signal(zk: ZooKeeperMigrationView, controller_ids: frozenset[int] | None) -> Signal:
    if zk.controller is None:
        return Signal(
            "/controller",
            "absent (an election is under way: no controller right now)",
            frozenset(
                {
                    Phase.ZOOKEEPER,
                    Phase.CONTROLLERS_PROVISIONED,
                    Phase.BROKERS_IN_MIGRATION_MODE,
                    Phase.REVERTING,
                }
            ),
        )
    try:
        registration = zk.controller_registration()
    except ValueError as exc:
        return Signal("/controller", f"unreadable ({exc})", frozenset())
    assert registration is not None
    epoch = f"/controller_epoch {zk.controller_epoch}"
    if registration.is_kraft_controller:
        if zk.controller_ephemeral:
            return Signal(
                "/controller", "a KRaft controller's but ephemeral (Kafka writes it persistent)", frozenset()
            )
        if controller_ids is not None and registration.broker_id not in controller_ids:
            return Signal(
                "/controller",
                f"held by KRaft controller {registration.broker_id}, which the cluster file does not list",
                frozenset(),
            )
        return Signal(
            "/controller",
            f"held by KRaft controller {registration.broker_id} (kraftControllerEpoch "
            f"{registration.kraft_controller_epoch}, persistent; {epoch})",
            _ANY_MIGRATED | {Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING},
        )
    if not zk.controller_ephemeral:
        return Signal(
            "/controller",
            f"persistent but names broker {registration.broker_id} without a KRaft epoch: not written by Kafka "
            "(a ZooKeeper-mode broker's is ephemeral, a KRaft controller's carries its epoch; "
            "zookeeper-security-migration skips a missing /controller since 2.5.0, KAFKA-9267); no broker can "
            "become controller",
            frozenset(),
        )
    return Signal(
        "/controller",
        f"broker {registration.broker_id}'s (ZooKeeper-mode controller, ephemeral; {epoch})",
        frozenset(
            {Phase.ZOOKEEPER, Phase.CONTROLLERS_PROVISIONED, Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING}
        ),
    )


_BROKER_MODE_PHASES: dict[frozenset[NodeMode], frozenset[Phase]] = {
    frozenset({NodeMode.ZOOKEEPER}): frozenset({Phase.ZOOKEEPER, Phase.CONTROLLERS_PROVISIONED}),
    frozenset({NodeMode.ZOOKEEPER, NodeMode.MIGRATION}): frozenset(
        {Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING}
    ),
    frozenset({NodeMode.MIGRATION}): frozenset(
        {Phase.BROKERS_IN_MIGRATION_MODE, Phase.DUAL_WRITE_ZK_BROKERS, Phase.REVERTING}
    ),
    frozenset({NodeMode.MIGRATION, NodeMode.KRAFT_BROKER}): frozenset({Phase.ROLLING_TO_KRAFT}),
    frozenset({NodeMode.KRAFT_BROKER}): frozenset(
        {Phase.DUAL_WRITE_KRAFT_BROKERS, Phase.FINALIZING, Phase.FINALIZED}
    ),
}


def _brokers_signal(brokers: Sequence[NodeFile]) -> tuple[Signal, list[str]]:
    problems = [f"{b.where}: {b.problem}" for b in brokers if b.problem]
    missing = [b.where for b in brokers if b.problem is None and b.properties is None]
    if problems or missing:
        return (
            Signal(
                "brokers' server.properties",
                "not read: " + "; ".join(problems + [f"{m}: no such file" for m in missing]),
                frozenset(),
            ),
            [],
        )
    by_mode: dict[NodeMode, list[int]] = {}
    for b in brokers:
        assert b.mode is not None
        by_mode.setdefault(b.mode, []).append(b.node_id)
    says = "; ".join(f"{mode.value}: {sorted(ids)}" for mode, ids in sorted(by_mode.items()))
    notes = [
        f"{b.where}: the file changed after the running process started (restart pending)"
        for b in brokers
        if b.restart_pending
    ]
    phases = _BROKER_MODE_PHASES.get(frozenset(by_mode), frozenset())
    if not phases:
        says += " (no phase of a migration has brokers in these modes together)"
    return Signal("brokers' server.properties", says, phases), notes


def _controllers_signal(controllers: Sequence[NodeFile], disks: Mapping[int, ControllerDisk]) -> Signal:
    problems = [f"{c.where}: {c.problem}" for c in controllers if c.problem]
    if problems:
        return Signal("controllers' server.properties", "not read: " + "; ".join(problems), frozenset())
    if not controllers:
        return Signal("controllers", "none in the cluster file", frozenset({Phase.ZOOKEEPER}))
    running = [c for c in controllers if c.running]
    provisioned = [
        c
        for c in controllers
        if c.properties is not None or (disks.get(c.node_id) and disks[c.node_id].formatted)
    ]
    modes = {c.node_id: c.mode for c in controllers}
    shown = ", ".join(
        f"{c.node_id}: {modes[c.node_id].value if modes[c.node_id] else 'no file'}"
        f"{', running' if c.running else (', stopped' if c.running is False else '')}"
        for c in controllers
    )
    if not running:
        if not provisioned:
            return Signal("controllers", f"not provisioned ({shown})", frozenset({Phase.ZOOKEEPER}))
        return Signal(
            "controllers",
            f"none running ({shown})",
            frozenset({Phase.ZOOKEEPER, Phase.REVERTING}),
        )
    bad = [c for c in running if modes[c.node_id] not in (NodeMode.CONTROLLER_MIGRATING, NodeMode.CONTROLLER)]
    if bad:
        return Signal(
            "controllers",
            f"running with a file that is not a KRaft controller's: {[c.node_id for c in bad]} ({shown})",
            frozenset(),
        )
    finalized = [c for c in running if modes[c.node_id] is NodeMode.CONTROLLER]
    if len(finalized) == len(controllers):
        return Signal(
            "controllers", f"all without the migration flag ({shown})", frozenset({Phase.FINALIZED})
        )
    if finalized:
        return Signal(
            "controllers", f"some without the migration flag ({shown})", frozenset({Phase.FINALIZING})
        )
    phases = _CONTROLLERS_RUN
    if len(running) < len(controllers):
        shown += f"; only {len(running)} of {len(controllers)} running"
    return Signal("controllers", f"running in migration mode ({shown})", phases)


def _meta_signal(
    controllers: Sequence[NodeFile], disks: Mapping[int, ControllerDisk], cluster_id: str
) -> Signal | None:
    found = [disks[c.node_id] for c in controllers if c.node_id in disks]
    if not found:
        return None
    problems = [f"controller {d.node_id}: {d.meta_problem}" for d in found if d.meta_problem]
    wrong = [
        f"controller {d.node_id}: cluster.id {d.meta_cluster_id} (ZooKeeper's /cluster/id is {cluster_id})"
        for d in found
        if d.meta_cluster_id is not None and d.meta_cluster_id != cluster_id
    ]
    wrong += [
        f"controller {d.node_id}: node.id {d.meta_node_id} in meta.properties"
        for d in found
        if d.meta_node_id is not None and d.meta_node_id != d.node_id
    ]
    if problems or wrong:
        return Signal("controllers' meta.properties", "; ".join(problems + wrong), frozenset())
    formatted = sorted(d.node_id for d in found if d.formatted)
    if not formatted:
        return Signal("controllers' meta.properties", "absent (not formatted)", frozenset({Phase.ZOOKEEPER}))
    return Signal(
        "controllers' meta.properties",
        f"formatted with ZooKeeper's cluster id {cluster_id}: {formatted}",
        ALL,
    )


_STATE_PHASES = {
    ZkMigrationState.NONE: frozenset({Phase.ZOOKEEPER}),
    ZkMigrationState.PRE_MIGRATION: frozenset(
        {Phase.ZOOKEEPER, Phase.CONTROLLERS_PROVISIONED, Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING}
    ),
    ZkMigrationState.MIGRATION: frozenset(
        {
            Phase.DUAL_WRITE_ZK_BROKERS,
            Phase.ROLLING_TO_KRAFT,
            Phase.DUAL_WRITE_KRAFT_BROKERS,
            Phase.FINALIZING,
            Phase.REVERTING,
            Phase.ZOOKEEPER,
        }
    ),
    ZkMigrationState.POST_MIGRATION: frozenset({Phase.FINALIZING, Phase.FINALIZED}),
}


def _metadata_log_signal(
    disks: Mapping[int, ControllerDisk],
) -> tuple[Signal | None, ZkMigrationState | None, dict[int, bool]]:
    images = {n: d.image for n, d in disks.items() if d.image is not None}
    problems = [f"controller {n}: {d.image_problem}" for n, d in sorted(disks.items()) if d.image_problem]
    if problems and not images:
        return Signal("metadata log", "not read: " + "; ".join(problems), frozenset()), None, {}
    if not images:
        return None, None, {}
    # the most advanced log: the one replayed furthest (a follower may lag the leader)
    node, image = max(images.items(), key=lambda kv: kv[1].last_offset)
    state = image.zk_migration_state
    registrations = {b: r.kraft_broker for b, r in image.brokers.items()}
    shown = ", ".join(
        f"{b}: {'KRaft broker' if kraft else 'ZooKeeper broker in migration mode'}"
        for b, kraft in sorted(registrations.items())
    )
    says = (
        f"controller {node}'s log up to offset {image.last_offset}: ZkMigrationState "
        f"{state.name if state is not None else 'none yet'}; brokers registered: {shown or 'none'}"
    )
    phases = _STATE_PHASES[state] if state is not None else frozenset({Phase.ZOOKEEPER})
    if state is ZkMigrationState.MIGRATION and registrations:
        kinds = set(registrations.values())
        if kinds == {True}:
            phases = phases & {Phase.DUAL_WRITE_KRAFT_BROKERS, Phase.FINALIZING, Phase.ROLLING_TO_KRAFT}
        elif kinds == {False}:
            phases = phases & {
                Phase.DUAL_WRITE_ZK_BROKERS,
                Phase.REVERTING,
                Phase.ZOOKEEPER,
                Phase.ROLLING_TO_KRAFT,
            }
        else:
            phases = phases & {
                Phase.ROLLING_TO_KRAFT,
                Phase.DUAL_WRITE_ZK_BROKERS,
                Phase.DUAL_WRITE_KRAFT_BROKERS,
            }
    return Signal("metadata log", says, phases), state, registrations


def _log_line_signal(disks: Mapping[int, ControllerDisk]) -> tuple[Signal | None, bool | None]:
    read = {n: d.log_lines for n, d in disks.items() if d.log_lines is not None}
    if not read:
        return None, None
    completed = [n for n, lines in read.items() if any(COMPLETED_LINE.search(line) for line in lines)]
    if not completed:
        return None, False  # rotated, or not there yet: says nothing either way
    return (
        Signal(
            "controller log",
            f'controller(s) {sorted(completed)} logged "Completed migration of metadata from ZooKeeper to KRaft"',
            _ANY_MIGRATED | {Phase.REVERTING, Phase.ZOOKEEPER},
        ),
        True,
    )


# ---------------------------------------------------------------------------------------------
# The phase
# ---------------------------------------------------------------------------------------------


def detect_phase(
    zk: ZooKeeperMigrationView,
    brokers: Sequence[NodeFile],
    controllers: Sequence[NodeFile],
    disks: Mapping[int, ControllerDisk],
) -> PhaseReading:
    """The one phase every signal allows, or a refusal naming each signal (see the module doc).

    :param zk: what ZooKeeper shows.
    :param brokers: every broker's server.properties (the cluster's brokers: registered, assigned, or
        in the cluster file's ``broker_hosts``).
    :param controllers: every controller of the cluster file, its file and process.
    :param disks: what each controller's log dir holds (meta.properties, metadata log, log lines).
    """
    controller_ids = frozenset(c.node_id for c in controllers)
    signals, stale = _zookeeper_signals(zk, controller_ids)
    broker_signal, notes = _brokers_signal(brokers)
    signals.append(broker_signal)
    signals.append(_controllers_signal(controllers, disks))
    meta = _meta_signal(controllers, disks, zk.cluster_id)
    if meta is not None:
        signals.append(meta)
    log_signal, state, registrations = _metadata_log_signal(disks)
    if log_signal is not None:
        signals.append(log_signal)
    line_signal, completed = _log_line_signal(disks)
    if line_signal is not None:
        signals.append(line_signal)
    notes += _registration_notes(zk, brokers)
    common = {
        "broker_modes": {b.node_id: b.mode for b in brokers},
        "controller_modes": {c.node_id: c.mode for c in controllers},
        "migration_state": state,
        "kraft_registrations": registrations,
        "migration_completed_logged": completed,
    }
    return _decide(zk, signals, notes, stale, presume=False, **common)


def _decide(
    zk: ZooKeeperMigrationView,
    signals: Sequence[Signal],
    notes: list[str],
    stale: str | None,
    *,
    presume: bool,
    prefer: frozenset[Phase] = ALL,
    **common: Any,
) -> PhaseReading:
    """The phase every signal allows (the one rule both readers share); with ``presume``, the first of
    :data:`PRESUMPTION` among several (among ``prefer`` when any of them is possible), else a refusal
    naming the signals."""
    phases = frozenset(ALL)
    for signal in signals:
        phases &= signal.phases
    common["signals"] = tuple(signals)
    common["possible"] = phases
    unreadable = [s for s in signals if not s.phases]
    if unreadable or not phases or (len(phases) > 1 and not presume):
        if unreadable:
            why = "; ".join(f"{s.name}: {s.says}" for s in unreadable)
            refusal = f"the migration's phase cannot be told: {why}"
        elif not phases:
            refusal = "the signals disagree: " + "; ".join(f"{s.name} says {s.says}" for s in signals)
        else:
            refusal = (
                f"the signals leave {len(phases)} phases possible ({', '.join(sorted(p.value for p in phases))}): "
                + "; ".join(f"{s.name} says {s.says}" for s in signals)
            )
        return PhaseReading(None, refusal=refusal + ". Nothing was changed", notes=tuple(notes), **common)
    phase = next(p for p in PRESUMPTION if p in (phases & prefer or phases))
    presumed = None
    if len(phases) > 1:
        presumed = (
            f"{phase.value} presumed among {', '.join(p.value for p in PRESUMPTION if p in phases)}: the "
            "controllers' files, processes and metadata log were not read"
            + (
                ""
                if "brokers' server.properties" in {s.name for s in signals}
                else ", nor the brokers' files"
            )
        )
    if phase is Phase.ZOOKEEPER and zk.migration is not None and stale is None:
        stale = (
            "/migration is left over from an earlier attempt (no KRaft controller runs, a ZooKeeper-mode broker "
            "is controller): a new attempt would skip the initial metadata load and delete topics created since "
            "(KAFKA-17146; the docs' revert for 'Migrating brokers to KRaft' never removes it)"
        )
    if stale is not None:
        notes.append(stale)
    if phase is Phase.FINALIZED and zk.finalized_record is not None:
        common["left_zookeeper"] = cluster_left_zookeeper(zk.finalized_record)
    return PhaseReading(phase, notes=tuple(notes), stale_migration=stale, presumed=presumed, **common)


PRESUMPTION: tuple[Phase, ...] = (*ORDER[1:], Phase.REVERTING, Phase.ZOOKEEPER)
"""When a reader saw only ZooKeeper (and perhaps the brokers' files), several phases can remain: it
presumes the earliest phase of a migration going forward, a revert only when nothing forward fits,
ZooKeeper mode (a ``/migration`` left over) only when nothing else does. So a KRaft controller that
holds ``/controller`` is presumed running (dual-write, not a revert that stopped it), and provisioned
controllers are presumed running while ``/migration`` waits at -1. Brokers not read are presumed from
``/brokers/ids`` first (:func:`_registration_hint`)."""


def zookeeper_phase(
    zk: ZooKeeperMigrationView,
    broker_modes: Mapping[int, NodeMode] | None = None,
    *,
    brokers: Iterable[int] = (),
) -> PhaseReading:
    """The phase by the same signals as :func:`detect_phase`, from what ZooKeeper shows (the finalization
    record included) and, when the inventory read them, the brokers' server.properties -- for the daily
    audit, the readiness report and every writer's refusal, which do not read the controllers. Several
    phases may remain possible: :data:`PRESUMPTION` picks one and :attr:`PhaseReading.presumed` says so;
    signals that contradict each other give no phase (the refusal names them).

    :param zk: what ZooKeeper shows (:func:`zookeeper_view`, or a snapshot's).
    :param broker_modes: each broker's mode as its server.properties says (missing: not read).
    :param brokers: every broker of the cluster (registered, assigned, inventoried): one whose mode was
        not read leaves every mode possible for it.
    """
    modes = dict(broker_modes or {})
    unread = set(brokers) - set(modes)
    signals, stale = _zookeeper_signals(zk, None)
    if modes:
        signals.append(_modes_signal(modes, complete=not unread))
    # a /migration without data is what zookeeper-security-migration leaves, not a sign of controllers
    prefer = frozenset({Phase.ZOOKEEPER}) if zk.migration == b"" else _registration_hint(zk, modes, unread)
    return _decide(zk, signals, [], stale, presume=True, prefer=prefer, broker_modes=modes)


def _registration_hint(
    zk: ZooKeeperMigrationView, modes: Mapping[int, NodeMode], unread: set[int]
) -> frozenset[Phase]:
    """Brokers whose files were not read, presumed from ``/brokers/ids``: a registered one runs in
    ZooKeeper mode, a known one missing from it in KRaft mode, and no broker registered at all means all
    of them run in KRaft mode (a KRaft broker registers with the quorum only; a stopped broker looks
    the same, hence only a presumption)."""
    if modes and not unread:
        return ALL
    if not zk.registered and not any(m in (NodeMode.ZOOKEEPER, NodeMode.MIGRATION) for m in modes.values()):
        return frozenset({Phase.DUAL_WRITE_KRAFT_BROKERS, Phase.FINALIZING, Phase.FINALIZED})
    if unread - zk.registered:
        return frozenset({Phase.ROLLING_TO_KRAFT})
    return ALL - {Phase.ROLLING_TO_KRAFT, Phase.DUAL_WRITE_KRAFT_BROKERS, Phase.FINALIZING, Phase.FINALIZED}


def _modes_signal(modes: Mapping[int, NodeMode], *, complete: bool) -> Signal:
    """The brokers' modes as a signal; with some brokers not read, every phase whose brokers' modes
    include the ones seen."""
    seen = frozenset(modes.values())
    by_mode = "; ".join(
        f"{mode.value}: {sorted(b for b, m in modes.items() if m is mode)}" for mode in sorted(seen)
    )
    if complete:
        phases = _BROKER_MODE_PHASES.get(seen, frozenset())
    else:
        phases = frozenset().union(*(p for key, p in _BROKER_MODE_PHASES.items() if seen <= key))
        by_mode += " (the other brokers' files not read)"
    return Signal("brokers' server.properties", by_mode, phases)


def _registration_notes(zk: ZooKeeperMigrationView, brokers: Iterable[NodeFile]) -> list[str]:
    notes = []
    for b in brokers:
        registered = b.node_id in zk.registered
        if b.mode is NodeMode.KRAFT_BROKER and registered:
            notes.append(
                f"broker {b.node_id}'s file says KRaft but it is registered in /brokers/ids: restart pending "
                "(or another process with its id)"
            )
        elif b.mode in (NodeMode.ZOOKEEPER, NodeMode.MIGRATION) and not registered:
            notes.append(
                f"broker {b.node_id} runs in ZooKeeper mode by its file but is not registered: down?"
            )
    return notes


@dataclass(frozen=True)
class ZnodeRead:
    """One znode as read: its bytes (None: no data), zkVersion and whether it is ephemeral."""

    data: bytes | None
    version: int
    ephemeral: bool = False


_STATE_PATH = re.compile(r"/brokers/topics/([^/]+)/partitions/([0-9]+)/state\Z")


def zookeeper_view(znodes: Mapping[str, ZnodeRead], cluster_id: str) -> ZooKeeperMigrationView:
    """The view :func:`detect_phase` needs, from znodes read under the Kafka chroot (paths relative
    to it): ``/migration``, ``/controller``, ``/controller_epoch``, ``/brokers/ids/*``, every
    partition state (for KAFKA-20488's highest ``controller_epoch``) and the finalization record."""
    from .znodes import ControllerEpoch, PartitionState

    migration = znodes.get("/migration")
    controller = znodes.get("/controller")
    finalized = znodes.get(KRAFT_FINALIZED_PATH)
    epoch_read = znodes.get("/controller_epoch")
    epoch = None
    if epoch_read is not None:
        try:
            epoch = ControllerEpoch.decode(epoch_read.data).epoch
        except ValueError:
            epoch = None
    registered = frozenset(
        int(path.rsplit("/", 1)[1])
        for path in znodes
        if path.startswith("/brokers/ids/") and path.rsplit("/", 1)[1].isdigit()
    )
    highest = -1
    above: list[str] = []
    for path, read in znodes.items():
        match = _STATE_PATH.match(path)
        if match is None or read.data is None:
            continue
        try:
            state = PartitionState.decode(read.data, path)
        except ValueError:
            continue
        highest = max(highest, state.controller_epoch)
        if epoch is not None and state.controller_epoch > epoch:
            above.append(f"{match[1]}-{match[2]} (controller_epoch {state.controller_epoch})")
    return ZooKeeperMigrationView(
        migration=None if migration is None else (migration.data if migration.data is not None else b""),
        migration_version=migration.version if migration is not None else -1,
        controller=None if controller is None else (controller.data or b""),
        controller_ephemeral=bool(controller and controller.ephemeral),
        controller_version=controller.version if controller is not None else -1,
        controller_epoch=epoch,
        controller_epoch_version=epoch_read.version if epoch_read is not None else -1,
        registered=registered,
        cluster_id=cluster_id,
        max_partition_controller_epoch=highest,
        partitions_above_zk_epoch=tuple(sorted(above)),
        finalized_record=None if finalized is None else (finalized.data or b""),
    )


def phase_index(phase: Phase) -> int:
    """The phase's place in forward order (REVERTING counts as before the first)."""
    return ORDER.index(phase) if phase in ORDER else -1
