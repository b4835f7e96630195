"""Plans of a ZooKeeper-to-KRaft migration: one phase forward or one phase back per run (pure).

:func:`plan_migration` takes the phase every signal agrees on (:mod:`.kraft_migration_phase`),
each node's file and process, what ZooKeeper shows, the cluster's controllers and command
templates, and returns the typed steps (:mod:`.kraft_migration_steps`) of the one move asked for,
with the traps checked (:mod:`.kraft_migration_traps`) and everything refused named.

Forward (docs/ops.html "ZooKeeper to KRaft Migration", 3.9.0-rc3):

* ZooKeeper mode -> controllers provisioned: each controller's file written, its storage formatted
  with ZooKeeper's cluster id, the controllers started; wait until the quorum runs in migration mode.
  A left-over or empty ``/migration`` is removed first (KAFKA-17146, KAFKA-19480).
* controllers provisioned (or hybrid) -> dual-write with ZooKeeper-mode brokers: each broker's file
  gets the migration settings and the broker restarts, one at a time, the ZooKeeper-mode
  controller last, each gated; then wait until the metadata was migrated.
* dual-write -> KRaft brokers: wait for the migration to be complete, then each broker to KRaft,
  one at a time, gated on its KRaft registration.
* KRaft brokers -> finalized: refused until every broker is registered as a KRaft broker and no
  ZooKeeper-only feature is in use (KAFKA-20960); then each controller without the flag, restarted
  one at a time, the quorum leader last; wait for POST_MIGRATION.

Back (the docs' revert table, with what it gets wrong fixed): from KRaft brokers, roll 1 (each
broker to ZooKeeper mode with the flag, the file kept by the forward run when there is one); from
dual-write / hybrid / provisioned, the controllers stopped, ``/controller`` handed back in one
multi with ``/migration`` (``deleteall``, not ``rmr``; ``/controller_epoch`` raised for
KAFKA-20488), roll 2 (flag, quorum settings and ``controller.listener.names`` removed), and the
controllers' storage renamed aside. Finalized: no way back.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .kraft_metadata import ZkMigrationState
from .kraft_migration_config import (
    ControllerNode,
    NodeMode,
    Quorum,
    apply_edit,
    config_diff,
    controller_file,
    finalize_controller,
    kraft_back_to_migration_mode,
    migration_back_to_zookeeper,
    to_kraft_broker,
    to_migration_mode,
    unfinalize_controller,
    zookeeper_settings,
)
from .kraft_migration_phase import ControllerDisk, NodeFile, Phase, PhaseReading, ZooKeeperMigrationView
from .kraft_migration_steps import (
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
    with_id,
)
from .kraft_migration_traps import (
    FinalizeFacts,
    Trap,
    TrapInputs,
    TrapStatus,
    epoch_trap,
    finalize_traps,
    release_traps,
    stale_migration_trap,
)
from .steps import Step, template_refusals

BROKER_FIELDS = ("broker_id", "host")
CONTROLLER_FIELDS = ("node_id", "host", "config")
FORMAT_FIELDS = ("node_id", "host", "config", "cluster_id", "log_dir")
PLAN_FORMAT = "kafka-zk-kraft-migration-plan"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


MIGRATION_DAG_ID = "kafka_zk_kraft_migration"
MIGRATION_FOLDER = "kraft-migration"
"""The ZooKeeper-to-KRaft migration's DAG and its runs' folder under ``<base>/<cluster>/``."""
SIGNALS_FILE = "signals.json"
"""A migration run's record of every signal its plan read (the phase it planned from)."""


class Direction(enum.StrEnum):
    FORWARD = "forward"
    BACK = "back"


@dataclass(frozen=True)
class CommandTemplates:
    """The cluster file's command templates (run over SSH on the node's host, values shell-quoted).

    ``broker_restart``: ``{broker_id}``, ``{host}``; the controller ones: ``{node_id}``, ``{host}``,
    ``{config}``; ``controller_format``: those plus ``{cluster_id}`` and ``{log_dir}``.
    """

    broker_restart: str | None = None
    controller_start: str | None = None
    controller_stop: str | None = None
    controller_restart: str | None = None
    controller_format: str | None = None


@dataclass(frozen=True)
class MigrationInputs:
    """Everything a plan is made from (read by the plan task).

    :param brokers: every broker's file (and host).
    :param controllers: every controller's file and process, by node id.
    :param kept: texts of files kept by an earlier forward run, by (role, node id): a revert restores them.
    :param inter_broker_protocol_version: the brokers' IBP (restored by a revert to ZooKeeper mode).
    :param readiness_blockers: the readiness check's blockers (a forward run from ZooKeeper mode refuses on any).
    :param partition_epochs: (max partition state ``controller_epoch``, partitions above ``/controller_epoch``).
    """

    cluster: str
    reading: PhaseReading
    zookeeper: ZooKeeperMigrationView
    quorum: Quorum
    commands: CommandTemplates
    brokers: Mapping[int, NodeFile]
    controllers: Mapping[int, NodeFile]
    disks: Mapping[int, ControllerDisk]
    traps: TrapInputs
    run_key: str
    kept: Mapping[tuple[str, int], str] = field(default_factory=dict)
    inter_broker_protocol_version: str | None = None
    readiness_blockers: tuple[str, ...] = ()
    zookeeper_only: tuple[str, ...] = ()

    @property
    def controller_nodes(self) -> dict[int, ControllerNode]:
        return {c.node_id: c for c in self.quorum.controllers}


@dataclass(frozen=True)
class MigrationPlan:
    """One run's move: from which phase to which, its steps, the traps and what refuses it."""

    cluster: str
    direction: Direction
    from_phase: Phase | None
    to_phase: Phase | None
    title: str
    steps: tuple[Step, ...] = ()
    traps: tuple[Trap, ...] = ()
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": 1,
            "cluster": self.cluster,
            "direction": self.direction.value,
            "from_phase": self.from_phase.value if self.from_phase else None,
            "to_phase": self.to_phase.value if self.to_phase else None,
            "title": self.title,
            "steps": [s.to_dict() for s in self.steps],
            "traps": [t.to_dict() for t in self.traps],
            "refusals": list(self.refusals),
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """What a person approves: the move, the refusals first, every step, every trap, how long."""
        head = f"KRaft migration of {self.cluster}: {self.title}"
        lines = [head, "=" * len(head)]
        if self.refusals:
            lines.append("REFUSED -- nothing will be changed:")
            lines += [f"  - {r}" for r in self.refusals]
        lines.append(
            f"phase now: {self.from_phase.value if self.from_phase else 'unknown'}; after this run: "
            f"{self.to_phase.value if self.to_phase else '-'} ({self.direction.value})"
        )
        if self.steps:
            lines.append(f"steps ({len(self.steps)}), in order:")
            for n, step in enumerate(self.steps, 1):
                lines.append(f"  {n}. {step.describe()}")
                for line in getattr(step, "diff", ()) or ():
                    lines.append(f"       {line}")
            lines.append(duration_hint(self.steps))
        lines.append("traps checked:")
        lines += [f"  - {t}" for t in self.traps]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(way_back(self))
        return "\n".join(lines) + "\n"


def duration_hint(steps: Sequence[Step]) -> str:
    rolls = sum(1 for s in steps if isinstance(s, BrokerRoll))
    commands = sum(1 for s in steps if isinstance(s, ControllerCommand))
    waits = sum(1 for s in steps if isinstance(s, MigrationWait))
    return (
        f"how long: {rolls} broker restart(s) and {commands} controller command(s), one at a time, each followed by "
        f"its gate; {waits} wait(s) for the migration. A broker restart takes its shutdown plus log loading (seconds "
        "after a clean shutdown, more after an unclean one) plus catching up the ISR; the whole run is bounded by the "
        "gate and wait timeouts of the run's form."
    )


def way_back(plan: MigrationPlan) -> str:
    if plan.direction is Direction.BACK or plan.refused:
        return "way back: trigger this DAG again with the direction you need; each run moves one phase."
    if plan.to_phase is Phase.FINALIZED:
        return "way back: NONE once a controller without the migration flag becomes active (finalized)."
    return (
        "way back: trigger kafka_zk_kraft_migration with direction=back: it reverts this phase (the old files are "
        "kept beside each changed one and in this run's folder)."
    )


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("latin-1", "replace")).hexdigest()


def _config_write(node: NodeFile, new_text: str, purpose: str, keep_suffix: str) -> NodeConfigWrite | None:
    old = node.text
    if old == new_text:
        return None
    return with_id(
        NodeConfigWrite(
            id="",
            role=node.role,
            node_id=node.node_id,
            host=node.host or "",
            path=node.path or "",
            old_sha256=node.sha256 if old is not None else None,
            new_text=new_text,
            new_sha256=_sha(new_text),
            keep_as=f"{node.path}.kafka-zk-{keep_suffix}",
            diff=tuple(config_diff(old, new_text, node.path or "server.properties")),
            purpose=purpose,
        ),
        f"config-{node.role}-{node.node_id}",
    )


def _roll_order(brokers: Sequence[int], zk_controller: int | None) -> list[int]:
    """Ascending ids, the active ZooKeeper-mode controller last (one controller move, not several)."""
    return sorted(brokers, key=lambda b: (b == zk_controller, b))


def _zk_controller(zk: ZooKeeperMigrationView) -> int | None:
    try:
        registration = zk.controller_registration()
    except ValueError:
        return None
    if registration is None or registration.is_kraft_controller:
        return None
    return registration.broker_id


def _kraft_controller(zk: ZooKeeperMigrationView) -> tuple[int, int] | None:
    try:
        registration = zk.controller_registration()
    except ValueError:
        return None
    if registration is None or not registration.is_kraft_controller:
        return None
    epoch = registration.kraft_controller_epoch
    return registration.broker_id, -1 if epoch is None else int(epoch)


def _template_refusals(
    name: str, template: str | None, fields: Sequence[str], uses: list[tuple[str, dict[str, str]]]
) -> list[str]:
    if not uses:
        return []
    if not (template or "").strip():
        return [
            f"the plan needs {name} but the cluster file sets none (kraft section of dags/kafka_zk_clusters.toml)"
        ]
    return [str(r) for r in template_refusals(name, template, fields, uses)]


def _broker_roll(inputs: MigrationInputs, broker: int, expect: str, zk_controller: int | None) -> BrokerRoll:
    node = inputs.brokers[broker]
    return with_id(
        BrokerRoll(
            id="",
            broker_id=broker,
            host=node.host or "",
            expect=expect,
            is_controller=broker == zk_controller,
            command=inputs.commands.broker_restart or "",
        ),
        f"roll-broker-{broker}",
    )


def _controller_command(inputs: MigrationInputs, node_id: int, action: str) -> ControllerCommand:
    node = inputs.controller_nodes[node_id]
    template = {
        "start": inputs.commands.controller_start,
        "stop": inputs.commands.controller_stop,
        "restart": inputs.commands.controller_restart,
    }[action]
    return with_id(
        ControllerCommand(
            id="",
            node_id=node_id,
            host=node.host,
            action=action,
            config_path=node.config_path,
            command=template or "",
            template_name=f"kraft_controller_{action}_command",
        ),
        f"{action}-controller-{node_id}",
    )


def _command_checks(inputs: MigrationInputs, steps: Sequence[Step]) -> list[str]:
    refusals: list[str] = []
    rolls = [s for s in steps if isinstance(s, BrokerRoll)]
    refusals += _template_refusals(
        "broker_restart_command",
        inputs.commands.broker_restart,
        BROKER_FIELDS,
        [(s.id, {"broker_id": str(s.broker_id), "host": s.host}) for s in rolls],
    )
    for action in ("start", "stop", "restart"):
        uses = [
            (s.id, {"node_id": str(s.node_id), "host": s.host, "config": s.config_path})
            for s in steps
            if isinstance(s, ControllerCommand) and s.action == action
        ]
        template = getattr(inputs.commands, f"controller_{action}")
        refusals += _template_refusals(
            f"kraft_controller_{action}_command", template, CONTROLLER_FIELDS, uses
        )
    formats = [s for s in steps if isinstance(s, ControllerStorageFormat)]
    refusals += _template_refusals(
        "kraft_format_command",
        inputs.commands.controller_format,
        FORMAT_FIELDS,
        [
            (
                s.id,
                {
                    "node_id": str(s.node_id),
                    "host": s.host,
                    "config": s.config_path,
                    "cluster_id": s.cluster_id,
                    "log_dir": s.log_dir,
                },
            )
            for s in formats
        ],
    )
    return refusals


def _broker_problems(inputs: MigrationInputs) -> list[str]:
    """Brokers the plan cannot touch safely: a file unread, a host unknown."""
    out = []
    for b, node in sorted(inputs.brokers.items()):
        if node.problem:
            out.append(f"{node.where}: {node.problem}")
        elif not node.host:
            out.append(f"broker {b}: no host known (not registered; give broker_hosts in the cluster file)")
    return out


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------


def _provision(inputs: MigrationInputs) -> MigrationPlan:
    zk = inputs.zookeeper
    refusals = [f"readiness blocker: {b}" for b in inputs.readiness_blockers]
    stale_logs = {
        node: f"its metadata log (formatted earlier) says {disk.image.zk_migration_state.name}"
        for node, disk in sorted(inputs.disks.items())
        if disk.image is not None
        and disk.image.zk_migration_state in (ZkMigrationState.MIGRATION, ZkMigrationState.POST_MIGRATION)
    }
    trap_inputs = replace(
        inputs.traps, stale_controller_logs={**inputs.traps.stale_controller_logs, **stale_logs}
    )
    traps = stale_migration_trap(trap_inputs, handled_by_plan=True) + release_traps(inputs.traps)
    steps: list[Step] = []
    if zk.migration is not None:
        steps.append(
            with_id(
                MigrationZnodeDelete(
                    id="",
                    expected="null" if zk.migration == b"" else "stale",
                    reason="KAFKA-19480: /migration without data"
                    if zk.migration == b""
                    else "KAFKA-17146: /migration left over from an earlier attempt",
                ),
                "delete-migration",
            )
        )
    brokers = list(inputs.brokers.values())
    reference = brokers[0].properties if brokers and brokers[0].properties else {}
    listener = reference.get("inter.broker.listener.name", "PLAINTEXT")
    protocols = {
        name.strip(): protocol.strip()
        for name, _, protocol in (
            item.partition(":")
            for item in reference.get("listener.security.protocol.map", "").split(",")
            if ":" in item
        )
    }
    protocol = protocols.get(listener) or (listener if listener in SECURITY_PROTOCOLS else "PLAINTEXT")
    zk_connect = reference.get("zookeeper.connect", "")
    if not zk_connect:
        refusals.append("the brokers' zookeeper.connect could not be read: the controllers need it")
    for node_id, node in sorted(inputs.controller_nodes.items()):
        current = inputs.controllers.get(node_id) or NodeFile(
            node_id, "controller", node.host, node.config_path, None
        )
        text = controller_file(
            node,
            inputs.quorum,
            zookeeper_connect=zk_connect,
            inter_broker_listener=listener,
            inter_broker_protocol=protocol,
            cluster=inputs.cluster,
        )
        write = _config_write(
            current, text, "provision the KRaft controller", f"before-provision-{inputs.run_key}"
        )
        if write is not None:
            steps.append(write)
    for node_id, node in sorted(inputs.controller_nodes.items()):
        disk = inputs.disks.get(node_id)
        if disk is not None and disk.formatted:
            continue
        steps.append(
            with_id(
                ControllerStorageFormat(
                    id="",
                    node_id=node_id,
                    host=node.host,
                    config_path=node.config_path,
                    log_dir=node.log_dir,
                    cluster_id=zk.cluster_id,
                    command=inputs.commands.controller_format or "",
                ),
                f"format-controller-{node_id}",
            )
        )
    for node_id in sorted(inputs.controller_nodes):
        current = inputs.controllers.get(node_id)
        if current is not None and current.running:
            continue
        steps.append(_controller_command(inputs, node_id, "start"))
    steps.append(with_id(MigrationWait(id="", until="provisioned"), "wait-provisioned"))
    return _finish(
        inputs,
        Direction.FORWARD,
        Phase.CONTROLLERS_PROVISIONED,
        "provision the KRaft controllers",
        steps,
        traps,
        refusals,
    )


def _roll(
    inputs: MigrationInputs,
    order: Sequence[int],
    *,
    source: NodeMode,
    target: NodeMode,
    edit: Any,
    purpose: str,
    keep: str,
    expect: str,
    zk_controller: int | None,
    refusals: list[str],
) -> list[Step]:
    """Each broker in ``source`` mode gets its file edited (``edit(node)``) and a gated restart; one
    already in ``target`` mode is restarted only when its file changed after its process started;
    any other mode is refused."""
    steps: list[Step] = []
    for broker in order:
        node = inputs.brokers[broker]
        if node.properties is None:
            continue
        if node.mode is source:
            new = apply_edit(node.text or "", edit(node))
            write = _config_write(node, new, purpose, f"{keep}-{inputs.run_key}")
            if write is not None:
                steps.append(write)
            steps.append(_broker_roll(inputs, broker, expect, zk_controller))
        elif node.mode is target and node.restart_pending:
            steps.append(_broker_roll(inputs, broker, expect, zk_controller))
        elif node.mode is not target:
            refusals.append(f"{node.where} is in {node.mode} mode: not a step of '{purpose}'")
    return steps


def _enter_migration_mode(inputs: MigrationInputs) -> MigrationPlan:
    refusals = _broker_problems(inputs)
    zk_controller = _zk_controller(inputs.zookeeper)
    steps = _roll(
        inputs,
        _roll_order(list(inputs.brokers), zk_controller),
        source=NodeMode.ZOOKEEPER,
        target=NodeMode.MIGRATION,
        edit=lambda node: to_migration_mode(node.properties, inputs.quorum),
        purpose="enter migration mode",
        keep="before-migration-mode",
        expect="zookeeper",
        zk_controller=zk_controller,
        refusals=refusals,
    )
    steps.append(with_id(MigrationWait(id="", until="migrated"), "wait-migrated"))
    traps = release_traps(inputs.traps)
    if inputs.zookeeper.migration == b"":
        # the controllers run on a /migration without data: their migration driver never leaves
        # UNINITIALIZED (KAFKA-19480, see kraft_migration_phase), so no broker roll can help
        traps = (
            stale_migration_trap(replace(inputs.traps, migration_null=True), handled_by_plan=False)[:1]
            + traps
        )
        refusals.append(
            "KAFKA-19480: /migration has no data while the KRaft controllers run: their migration cannot start. "
            "Run the DAG back (it stops the controllers and deletes /migration), then forward again"
        )
    return _finish(
        inputs,
        Direction.FORWARD,
        Phase.DUAL_WRITE_ZK_BROKERS,
        "roll the brokers into migration mode (the migration of the metadata follows)",
        steps,
        traps,
        refusals,
    )


def _to_kraft(inputs: MigrationInputs) -> MigrationPlan:
    refusals = _broker_problems(inputs)
    steps: list[Step] = [with_id(MigrationWait(id="", until="migrated"), "wait-migrated")]
    steps += _roll(
        inputs,
        sorted(inputs.brokers),
        source=NodeMode.MIGRATION,
        target=NodeMode.KRAFT_BROKER,
        edit=lambda node: to_kraft_broker(node.properties, node.node_id),
        purpose="run as a KRaft broker",
        keep="before-kraft",
        expect="kraft",
        zk_controller=None,
        refusals=refusals,
    )
    return _finish(
        inputs,
        Direction.FORWARD,
        Phase.DUAL_WRITE_KRAFT_BROKERS,
        "restart the brokers as KRaft brokers",
        steps,
        release_traps(inputs.traps),
        refusals,
    )


def finalize_facts(inputs: MigrationInputs) -> FinalizeFacts:
    reading = inputs.reading
    registrations: dict[int, tuple[bool, bool]] = {}
    images = [d.image for d in inputs.disks.values() if d.image is not None]
    if images:
        image = max(images, key=lambda i: i.last_offset)
        registrations = {b: (r.kraft_broker, r.fenced) for b, r in image.brokers.items()}
    return FinalizeFacts(
        brokers=tuple(sorted(inputs.brokers)),
        kraft_registrations=registrations,
        zookeeper_registered=tuple(sorted(inputs.zookeeper.registered)),
        broker_modes={b: (m.value if m else None) for b, m in reading.broker_modes.items()},
        zookeeper_only=inputs.zookeeper_only,
    )


def _finalize(inputs: MigrationInputs) -> MigrationPlan:
    traps = finalize_traps(finalize_facts(inputs))
    refusals: list[str] = []
    steps: list[Step] = [
        with_id(FinalizeGuard(id="", broker_ids=tuple(sorted(inputs.brokers))), "check-finalize")
    ]
    leader = next(
        (
            d.quorum_leader
            for d in inputs.disks.values()
            if d.quorum_leader is not None and d.quorum_leader >= 0
        ),
        None,
    )
    for node_id in sorted(inputs.controller_nodes, key=lambda n: (n == leader, n)):
        node = inputs.controllers.get(node_id)
        if node is None or node.properties is None:
            refusals.append(f"controller {node_id}: its file could not be read")
            continue
        if node.mode is NodeMode.CONTROLLER and not node.restart_pending:
            continue
        if node.mode is NodeMode.CONTROLLER_MIGRATING:
            new = apply_edit(node.text or "", finalize_controller(node.properties))
            write = _config_write(
                node, new, "finalize: out of migration mode", f"before-finalize-{inputs.run_key}"
            )
            if write is not None:
                steps.append(write)
        steps.append(_controller_command(inputs, node_id, "restart"))
    steps.append(with_id(MigrationWait(id="", until="finalized"), "wait-finalized"))
    steps.append(
        with_id(
            FinalizedRecord(id="", controllers=tuple(sorted(inputs.controller_nodes))), "record-finalized"
        )
    )
    return _finish(
        inputs,
        Direction.FORWARD,
        Phase.FINALIZED,
        "finalize the migration (no way back after it)",
        steps,
        traps,
        refusals,
    )


# ---------------------------------------------------------------------------------------------
# Back
# ---------------------------------------------------------------------------------------------


def _stop_controllers(inputs: MigrationInputs) -> list[Step]:
    return [
        _controller_command(inputs, node_id, "stop")
        for node_id in sorted(inputs.controller_nodes)
        if (inputs.controllers.get(node_id) is not None and inputs.controllers[node_id].running is not False)
    ]


def _retire(inputs: MigrationInputs) -> list[Step]:
    steps: list[Step] = []
    for node_id, node in sorted(inputs.controller_nodes.items()):
        disk = inputs.disks.get(node_id)
        current = inputs.controllers.get(node_id)
        paths = []
        if disk is not None and disk.formatted:
            paths.append(node.log_dir)
        if current is not None and current.properties is not None:
            paths.append(node.config_path)
        if paths:
            steps.append(
                with_id(
                    ControllerStorageRetire(
                        id="",
                        node_id=node_id,
                        host=node.host,
                        paths=tuple(paths),
                        suffix=f".kafka-zk-retired-{inputs.run_key}",
                    ),
                    f"retire-controller-{node_id}",
                )
            )
    return steps


def _revert_to_zookeeper(inputs: MigrationInputs, title: str) -> MigrationPlan:
    zk = inputs.zookeeper
    traps: list[Trap] = []
    refusals = _broker_problems(inputs)
    steps: list[Step] = _stop_controllers(inputs)
    kraft = _kraft_controller(zk)
    if kraft is not None:
        if zk.controller_epoch is None:
            refusals.append("/controller_epoch cannot be read: the KAFKA-20488 check needs it")
            raise_to = None
        else:
            trap, raise_to = epoch_trap(
                zk.controller_epoch, kraft[1], zk.max_partition_controller_epoch, zk.partitions_above_zk_epoch
            )
            traps.append(trap)
        steps.append(
            with_id(
                ControllerHandback(
                    id="",
                    kraft_controller_id=kraft[0],
                    kraft_controller_epoch=kraft[1],
                    zk_controller_epoch=zk.controller_epoch if zk.controller_epoch is not None else -1,
                    raise_epoch_to=raise_to,
                    delete_migration=zk.migration is not None,
                ),
                "hand-back-controller",
            )
        )
    elif zk.migration is not None:
        steps.append(
            with_id(
                MigrationZnodeDelete(
                    id="", expected="revert", reason="KAFKA-17146: a later attempt loads everything again"
                ),
                "delete-migration",
            )
        )
    traps.append(
        Trap(
            "KAFKA-17146",
            "/migration removed by the revert",
            TrapStatus.HANDLED if zk.migration is not None else TrapStatus.CLEAR,
            "the plan deletes /migration with the controllers stopped"
            if zk.migration is not None
            else "no /migration",
        )
    )
    zk_controller = None  # elected after the hand-back: unknown at plan time
    for broker in sorted(inputs.brokers):
        node = inputs.brokers[broker]
        if node.properties is None:
            continue
        if node.mode is NodeMode.MIGRATION or (
            node.mode is NodeMode.ZOOKEEPER and _has_controller_settings(node.properties)
        ):
            kept = inputs.kept.get(("broker", broker))
            new = (
                kept
                if kept is not None and _mode_of_text(kept) is NodeMode.ZOOKEEPER
                else apply_edit(
                    node.text or "", migration_back_to_zookeeper(node.properties, inputs.quorum.listener_name)
                )
            )
            write = _config_write(
                node, new, "back to plain ZooKeeper mode (rollback roll 2)", f"before-revert-{inputs.run_key}"
            )
            if write is not None:
                steps.append(write)
            steps.append(_broker_roll(inputs, broker, "zookeeper", zk_controller))
        elif node.mode is NodeMode.KRAFT_BROKER:
            refusals.append(
                f"{node.where} runs as a KRaft broker: run the revert from dual-write-kraft-brokers first"
            )
    steps += _retire(inputs)
    return _finish(inputs, Direction.BACK, Phase.ZOOKEEPER, title, steps, traps, refusals)


def _has_controller_settings(props: Mapping[str, str]) -> bool:
    return any(
        k in props
        for k in (
            "controller.listener.names",
            "controller.quorum.voters",
            "controller.quorum.bootstrap.servers",
        )
    )


def _mode_of_text(text: str) -> NodeMode:
    from .kraft_migration_config import node_mode
    from .logdir import parse_java_properties

    return node_mode(parse_java_properties(text, "kept file"))


def _kraft_back(inputs: MigrationInputs) -> MigrationPlan:
    refusals = _broker_problems(inputs)
    steps: list[Step] = []
    notes: list[str] = []
    reference_zk = _zookeeper_reference(inputs)
    ibp = inputs.inter_broker_protocol_version
    for broker in sorted(inputs.brokers):
        node = inputs.brokers[broker]
        if node.properties is None or node.mode is not NodeMode.KRAFT_BROKER:
            continue
        kept = inputs.kept.get(("broker", broker))
        if kept is not None and _mode_of_text(kept) is NodeMode.MIGRATION:
            new = kept
        else:
            if not reference_zk.get("zookeeper.connect") or not ibp:
                refusals.append(
                    f"broker {broker}: no file kept by the forward run, and the ZooKeeper settings / IBP to restore are "
                    "unknown"
                )
                continue
            new = apply_edit(
                node.text or "", kraft_back_to_migration_mode(node.properties, reference_zk, ibp)
            )
            notes.append(
                f"broker {broker}: no file kept by the forward run; its ZooKeeper-mode file is rebuilt from the "
                "controllers' zookeeper.connect and IBP " + ibp
            )
        write = _config_write(
            node,
            new,
            "rollback roll 1: ZooKeeper mode, migration flag kept",
            f"before-revert-{inputs.run_key}",
        )
        if write is not None:
            steps.append(write)
        steps.append(_broker_roll(inputs, broker, "zookeeper", None))
    plan = _finish(
        inputs,
        Direction.BACK,
        Phase.DUAL_WRITE_ZK_BROKERS,
        "rollback roll 1: the brokers back to ZooKeeper mode (migration flag kept; the controllers keep running)",
        steps,
        [],
        refusals,
    )
    return _with_notes(plan, notes)


def _zookeeper_reference(inputs: MigrationInputs) -> dict[str, str]:
    for kept in inputs.kept.values():
        from .logdir import parse_java_properties

        settings = zookeeper_settings(parse_java_properties(kept, "kept"))
        if settings.get("zookeeper.connect"):
            return settings
    for node in inputs.controllers.values():
        if node.properties and node.properties.get("zookeeper.connect"):
            return {"zookeeper.connect": node.properties["zookeeper.connect"]}
    return {}


def _unfinalize(inputs: MigrationInputs) -> MigrationPlan:
    refusals: list[str] = []
    if inputs.reading.migration_state is ZkMigrationState.POST_MIGRATION:
        return _refused(
            inputs,
            Direction.BACK,
            "the metadata log says POST_MIGRATION: the migration is finalized, no way back",
        )
    steps: list[Step] = []
    reference = _zookeeper_reference(inputs)
    for node_id in sorted(inputs.controller_nodes):
        node = inputs.controllers.get(node_id)
        if node is None or node.properties is None or node.mode is not NodeMode.CONTROLLER:
            continue
        kept = inputs.kept.get(("controller", node_id))
        new = kept if kept is not None else apply_edit(node.text or "", unfinalize_controller(reference))
        write = _config_write(
            node,
            new,
            "migration flag back (finalization not in effect yet)",
            f"before-revert-{inputs.run_key}",
        )
        if write is not None:
            steps.append(write)
        steps.append(_controller_command(inputs, node_id, "restart"))
    return _finish(
        inputs,
        Direction.BACK,
        Phase.DUAL_WRITE_KRAFT_BROKERS,
        "undo a finalization not yet in effect",
        steps,
        [],
        refusals,
    )


# ---------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------


def _refused(inputs: MigrationInputs, direction: Direction, why: str) -> MigrationPlan:
    return MigrationPlan(
        inputs.cluster,
        direction,
        inputs.reading.phase,
        None,
        why,
        refusals=(why,),
        notes=inputs.reading.notes,
    )


def _with_notes(plan: MigrationPlan, notes: Sequence[str]) -> MigrationPlan:
    return replace(plan, notes=plan.notes + tuple(notes))


def _finish(
    inputs: MigrationInputs,
    direction: Direction,
    to_phase: Phase,
    title: str,
    steps: list[Step],
    traps: Sequence[Trap],
    refusals: list[str],
) -> MigrationPlan:
    refusals = list(refusals) + _command_checks(inputs, steps)
    refusals += [str(t) for t in traps if t.status is TrapStatus.REFUSED]
    ids = [s.id for s in steps]
    if len(ids) != len(set(ids)):
        refusals.append(f"the plan repeats a step: {sorted({i for i in ids if ids.count(i) > 1})}")
    return MigrationPlan(
        inputs.cluster,
        direction,
        inputs.reading.phase,
        to_phase,
        title,
        tuple(steps),
        tuple(traps),
        tuple(dict.fromkeys(refusals)),
        inputs.reading.notes,
    )


FORWARD = {
    Phase.ZOOKEEPER: _provision,
    Phase.CONTROLLERS_PROVISIONED: _enter_migration_mode,
    Phase.BROKERS_IN_MIGRATION_MODE: _enter_migration_mode,
    Phase.DUAL_WRITE_ZK_BROKERS: _to_kraft,
    Phase.ROLLING_TO_KRAFT: _to_kraft,
    Phase.DUAL_WRITE_KRAFT_BROKERS: _finalize,
    Phase.FINALIZING: _finalize,
}


def plan_migration(inputs: MigrationInputs, direction: Direction | str) -> MigrationPlan:
    """The plan of one run: one phase forward or back from ``inputs.reading.phase``.

    A refused plan (``plan.refused``) lists why; its steps are empty or must not run.
    """
    direction = Direction(direction)
    reading = inputs.reading
    if reading.phase is None:
        return _refused(inputs, direction, reading.refusal or "the phase is unknown")
    phase = reading.phase
    if direction is Direction.FORWARD:
        if phase is Phase.FINALIZED:
            return _refused(
                inputs,
                direction,
                "the migration is finalized: nothing to move forward (ZooKeeper can be deprovisioned once nothing else "
                "uses it)",
            )
        if phase is Phase.REVERTING:
            return _refused(
                inputs, direction, "a revert to ZooKeeper mode is under way: finish it first (direction back)"
            )
        return FORWARD[phase](inputs)
    if phase is Phase.FINALIZED:
        return _refused(
            inputs, direction, "the migration is finalized: it cannot be reverted (docs/ops.html)"
        )
    if phase is Phase.FINALIZING:
        return _unfinalize(inputs)
    if phase in (Phase.DUAL_WRITE_KRAFT_BROKERS, Phase.ROLLING_TO_KRAFT):
        return _kraft_back(inputs)
    if phase in (Phase.DUAL_WRITE_ZK_BROKERS, Phase.BROKERS_IN_MIGRATION_MODE, Phase.REVERTING):
        return _revert_to_zookeeper(
            inputs, "revert to ZooKeeper mode (controllers stopped, /controller handed back)"
        )
    if phase is Phase.CONTROLLERS_PROVISIONED:
        return _revert_to_zookeeper(inputs, "deprovision the KRaft controllers")
    # ZooKeeper mode: only left-overs to clear
    plan = _revert_to_zookeeper(
        inputs, "clear what an earlier attempt left (a /migration, controller storage)"
    )
    if not plan.steps and not plan.refusals:
        return _refused(
            inputs, direction, "already in ZooKeeper mode with nothing left over: nothing to revert"
        )
    return plan


def approval_summary(
    plan: Mapping[str, Any],
    rollback: Mapping[str, Any] | None,
    *,
    plan_dir: str,
    gate_timeout_s: float | None = None,
) -> Any:
    """The approval page of a migration run (:class:`~.approval.PlanSummary`): the move and why first,
    then every file written per host as its diff, the ZooKeeper writes, the commands and restarts in
    order with the gate after each, how long, the traps, and the way back."""
    from .approval import PlanSummary

    steps = list(plan.get("steps") or [])
    direction = plan.get("direction")
    headline = (
        f"KRaft migration of {plan['cluster']}: {plan.get('title')} ({direction}: {plan.get('from_phase')} -> "
        f"{plan.get('to_phase')})"
    )
    signals = plan.get("signals") or {}
    change = [f"{s['signal']}: {s['says']}" for s in signals.get("signals") or []]
    change += [f"note: {n}" for n in plan.get("notes") or []]
    files: list[str] = []
    writes: list[str] = []
    commands: list[str] = []
    for n, step in enumerate(steps, 1):
        kind = step.get("kind")
        if kind == "write_node_config":
            kept = f"; old file kept as {step['keep_as']}" if step.get("old_sha256") else " (new file)"
            files.append(
                f"{n}. {step['role']} {step['node_id']} {step['host']}:{step['path']} ({step.get('purpose')}{kept})"
            )
            files += [f"    {line}" for line in step.get("diff") or []]
        elif kind in ("delete_migration_znode", "hand_back_controller", "record_finalized"):
            cls = {
                "delete_migration_znode": MigrationZnodeDelete,
                "hand_back_controller": ControllerHandback,
                "record_finalized": FinalizedRecord,
            }[kind]
            writes.append(f"{n}. {cls.from_dict(step).describe()}")
        else:
            from .steps import STEP_TYPES

            cls = STEP_TYPES.get(str(kind))
            commands.append(f"{n}. {cls.from_dict(step).describe() if cls is not None else kind}")
    rolls = sum(1 for s in steps if s.get("kind") in ("roll_broker", "controller_command"))
    duration = [
        f"{rolls} restart(s)/command(s), one at a time"
        + (f"; each gated for at most {gate_timeout_s:g}s" if gate_timeout_s else "")
        + "; a broker restart takes its shutdown, log loading and ISR catch-up"
    ]
    traps = [
        f"[{t['issue']} {t['status']}] {t['title']}: {t['evidence']}"
        + (f" {t['action']}" if t.get("action") else "")
        for t in plan.get("traps") or []
    ]
    back = [str((rollback or {}).get("way_back") or "see rollback.json")]
    back += [
        f"{f['role']} {f['node_id']} {f['host']}:{f['path']}: old file kept as {f['kept_as']} and in {plan_dir}/files/"
        for f in (rollback or {}).get("files_replaced") or []
        if f.get("kept_as")
    ]
    return PlanSummary(
        "kraft-migration",
        headline,
        (
            ("Where the cluster is (every signal)", tuple(change)),
            ("Config files written (diff per host)", tuple(files)),
            ("ZooKeeper writes", tuple(writes)),
            ("Commands, restarts and waits, in order (each gated before the next)", tuple(commands)),
            ("Traps checked", tuple(traps)),
            ("Expected duration", tuple(duration)),
            ("Rollback", tuple(back)),
        ),
    )
