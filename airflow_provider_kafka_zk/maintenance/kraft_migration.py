"""A ZooKeeper-to-KRaft migration run carried out by the step executor: reading every signal of the
cluster, and one handler per step kind (:mod:`airflow_provider_kafka_zk.kafka.kraft_migration_steps`).

The plan and its steps are pure (:mod:`airflow_provider_kafka_zk.kafka.kraft_migration_plan`);
:func:`execute_migration_plan` opens a maintenance session (the cluster pinned by ZooKeeper's
``/cluster/id`` and chroot, the approved plan verified, the lease, the rollback artefacts) that
allows the migration's own writes -- the one writer a migration may have -- and hands the steps to
:class:`~airflow_provider_kafka_zk.maintenance.executor.StepExecutor`. Every step is preflighted
before the first write (the dry run is the real run minus the writes): files read on their hosts
and matched with the plan, templates rendered, controllers and brokers in the state the step needs
(counting what earlier steps of the plan will do), KAFKA-20488 and KAFKA-20960 checked again. Then,
one at a time:

* ``write_node_config`` -- the old file copied into the run's artefacts and read back, then the new
  one written atomically on the host with the old one kept beside it;
* ``format_controller_storage`` / ``controller_command`` -- the cluster's template rendered with
  shell-quoted values and run under a time limit on the host, which this session pinned (its host
  key, and once formatted its ``meta.properties`` with ZooKeeper's cluster id); then its gate;
* ``roll_broker`` -- the broker's restart, then its gate (:func:`~airflow_provider_kafka_zk.kafka.
  kraft_migration_health.roll_gate`); a failed gate stops the run before the next broker;
* ``hand_back_controller`` / ``delete_migration_znode`` -- one ZooKeeper multi, conditional on the
  versions read right before it (the bytes saved first);
* ``wait_for_migration`` / ``check_finalize`` -- reads only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import (
    BrokerHostCommandError,
    BrokerHostError,
    BrokerHostHook,
    BrokerHostTimeoutError,
    _registration_hosts,
)
from airflow_provider_kafka_zk.hooks.broker_partition_files import run_host_command
from airflow_provider_kafka_zk.hooks.kraft_migration_hosts import (
    METADATA_READ_LIMIT,
    FileRead,
    NodeHosts,
    ReusingHostHook,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    CreateOp,
    DeleteOp,
    KafkaZooKeeperHook,
    MultiOpError,
    SetDataOp,
    ZnodeNotFoundError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.kraft_metadata import (
    METADATA_PARTITION_DIR,
    QUORUM_STATE_FILE,
    MetadataImage,
    MetadataLogFile,
    QuorumState,
    ZkMigrationState,
    metadata_log_reads,
    read_metadata_files,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_config import ControllerNode, NodeMode, Quorum
from airflow_provider_kafka_zk.kafka.kraft_migration_health import (
    Health,
    controller_gate,
    health,
    live_brokers,
    min_isr,
    roll_gate,
    stop_risks,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_phase import (
    COMPLETED_LINE,
    DRIVER_STATE_LINE,
    PRE_MIGRATION_LINE,
    ControllerDisk,
    NodeFile,
    ZnodeRead,
    ZooKeeperMigrationView,
    zookeeper_view,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_plan import (
    BROKER_FIELDS,
    CONTROLLER_FIELDS,
    FORMAT_FIELDS,
    CommandTemplates,
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
from airflow_provider_kafka_zk.kafka.kraft_migration_traps import (
    FinalizeFacts,
    TrapStatus,
    epoch_trap,
    finalize_traps,
)
from airflow_provider_kafka_zk.kafka.logdir import MetaProperties, parse_java_properties
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.safety import KRAFT_FINALIZED_PATH, LEASE_ROOT
from airflow_provider_kafka_zk.kafka.steps import Refusal, Step, StepState, render_command, template_refusals
from airflow_provider_kafka_zk.maintenance.executor import (
    ExecutionResult,
    ProgressLog,
    StepContext,
    execute_plan_in_session,
)
from airflow_provider_kafka_zk.maintenance.session import (
    MaintenanceRefusedError,
    MaintenanceSession,
    PlanApproval,
    RunIdentity,
)

log = logging.getLogger(__name__)

ZK_INCLUDE = (
    "/brokers",
    znodes.CONTROLLER,
    znodes.CONTROLLER_EPOCH,
    znodes.MIGRATION,
    "/admin",
    "/config/topics",
    "/config/brokers",
    "/config/clients",
    "/config/users",
    "/config/ips",
    KRAFT_FINALIZED_PATH,
)
"""What the migration reads of ZooKeeper: the migration's znodes, partitions and their states, pending
admin requests, the config entities the dual-write checks compare, and its own record of a finalization
(a signal of the phase reader)."""
LOG_TAIL_BYTES = 4 << 20


class KraftMigrationError(MaintenanceRefusedError):
    """The migration run cannot go on; the message names the node, the znode or the gate, and what to do."""


class MigrationGateError(KraftMigrationError):
    """A node did not pass its gate in time: the run stops before the next node (the message says how to resume)."""


@dataclass(frozen=True)
class MigrationSettings:
    """How a run reaches the cluster (from the cluster file) and how long it waits.

    :param server_properties_path: the brokers' server.properties (``{broker_id}`` allowed).
    :param broker_hosts: broker id -> host (registrations are gone once brokers run in KRaft).
    :param controller_logs: controller -> the log file holding its migration lines (optional).
    """

    cluster: str
    kafka_zookeeper_conn_id: str
    ssh_conn_id: str
    server_properties_path: str
    quorum: Quorum
    commands: CommandTemplates
    broker_hosts: Mapping[int, str] = field(default_factory=dict)
    controller_logs: Mapping[int, str] = field(default_factory=dict)
    command_timeout: float = 600.0
    gate_timeout: float = 900.0
    wait_timeout: float = 600.0
    poll_interval: float = 2.0
    lease_ttl_s: float | None = None
    metadata_read_budget: int = METADATA_READ_LIMIT

    def broker_config_path(self, broker: int) -> str:
        return self.server_properties_path.replace("{broker_id}", str(broker))

    @property
    def controllers(self) -> dict[int, ControllerNode]:
        return {c.node_id: c for c in self.quorum.controllers}

    def all_hosts(self, brokers: Mapping[int, str]) -> dict[int, str]:
        return {**dict(brokers), **{c.node_id: c.host for c in self.quorum.controllers}}


# ---------------------------------------------------------------------------------------------
# Reading every signal
# ---------------------------------------------------------------------------------------------


@dataclass
class ClusterSignals:
    """What one read of the cluster found (see :func:`read_signals`)."""

    view: ZooKeeperMigrationView
    state: ClusterState
    brokers: dict[int, NodeFile]
    controllers: dict[int, NodeFile]
    disks: dict[int, ControllerDisk]
    broker_hosts: dict[int, str]
    zk_epochs: dict[int, int]

    def image(self) -> MetadataImage | None:
        images = [d.image for d in self.disks.values() if d.image is not None]
        return max(images, key=lambda i: i.last_offset) if images else None


def read_zookeeper(hook: KafkaZooKeeperHook) -> tuple[ZooKeeperMigrationView, ClusterState, dict[int, int]]:
    """One walk of what the migration reads in ZooKeeper: the view, the model (partitions and
    configs) and each registered broker's epoch (its registration's czxid)."""
    walk = hook.snapshot(include=ZK_INCLUDE, progress_every=3600, in_memory=True)
    rows = list(walk.rows)
    reads = {r.path: ZnodeRead(r.data, r.version, r.is_ephemeral) for r in rows}
    state = ClusterState.from_snapshot(rows)
    cluster_id = hook.cluster_id() or ""
    epochs = {
        int(r.path.rsplit("/", 1)[1]): r.czxid
        for r in rows
        if r.path.startswith("/brokers/ids/") and r.path.rsplit("/", 1)[1].isdigit()
    }
    return zookeeper_view(reads, cluster_id), state, epochs


def cluster_brokers(
    state: ClusterState, broker_hosts: Mapping[int, str], image: MetadataImage | None = None
) -> list[int]:
    """The cluster's brokers: registered, assigned a replica, named in ``broker_hosts``, or known to
    the KRaft quorum."""
    assigned = {b for p in state.partitions() for b in p.replicas}
    kraft = set(image.brokers) if image is not None else set()
    return sorted(set(state.brokers) | assigned | set(broker_hosts) | kraft)


def _node_file(
    role: str,
    node: int,
    host: str | None,
    path: str,
    read: FileRead | None,
    problem: str | None,
    processes: list[dict[str, Any]] | None,
) -> NodeFile:
    if problem is not None or read is None:
        return NodeFile(node, role, host, path, None, problem=problem or "not read")
    if read.status == "absent":
        running = bool(processes) if processes is not None else None
        return NodeFile(node, role, host, path, None, running=running)
    if read.status != "present" or read.content is None:
        return NodeFile(node, role, host, path, None, problem=f"{path}: {read.status} ({read.detail})")
    text = read.text or ""
    started = [p.get("started") for p in processes or () if p.get("started") is not None]
    pending = bool(started) and read.mtime is not None and read.mtime > max(started) + 1.0
    return NodeFile(
        node,
        role,
        host,
        path,
        parse_java_properties(text, f"{host}:{path}"),
        text,
        read.sha256,
        running=bool(processes) if processes is not None else None,
        restart_pending=pending,
    )


def read_controller_disk(
    hosts: NodeHosts,
    node: ControllerNode,
    log_file: str | None,
    budget: int,
    *,
    config: bool = False,
) -> ControllerDisk | tuple[ControllerDisk, FileRead, list[dict[str, Any]]]:
    """meta.properties, the metadata log (newest snapshot and the log after it), quorum-state and the
    migration lines of the controller's log file, read over SSH (never following a symlink) in two
    commands. With ``config``, also its server.properties and its process (returned beside the disk)."""
    meta_path = f"{node.log_dir.rstrip('/')}/meta.properties"
    partition_dir = f"{node.log_dir.rstrip('/')}/{METADATA_PARTITION_DIR}"
    values: dict[str, Any] = {}
    paths = [meta_path, f"{partition_dir}/{QUORUM_STATE_FILE}"] + ([node.config_path] if config else [])
    try:
        reads, processes, listed = hosts.read_with_processes(
            node.node_id, paths, [node.config_path] if config else [], [partition_dir]
        )
    except (BrokerHostError, OSError) as exc:
        disk = ControllerDisk(node.node_id, meta_problem=f"{type(exc).__name__}: {exc}")
        if config:
            raise
        return disk
    meta_read, quorum_read = reads[0], reads[1]
    if meta_read.status == "present" and meta_read.content is not None:
        try:
            meta = MetaProperties.parse(meta_read.content, f"{node.host}:{meta_path}")
            values.update(
                meta_cluster_id=meta.cluster_id, meta_node_id=meta.node_id, meta_version=meta.version
            )
        except ValueError as exc:
            values["meta_problem"] = str(exc)
    elif meta_read.status not in ("absent",):
        values["meta_problem"] = f"{meta_path}: {meta_read.status} ({meta_read.detail})"
    if quorum_read.status == "present" and quorum_read.content:
        try:
            quorum = QuorumState.parse(quorum_read.content, quorum_read.path)
            values.update(quorum_leader=quorum.leader_id, quorum_epoch=quorum.leader_epoch)
        except ValueError as exc:
            values["image_problem"] = str(exc)
    listing = listed.get(partition_dir)
    extra: list[str] = [log_file] if log_file else []
    wanted: list[str] = []
    if values.get("meta_cluster_id") is not None and listing is not None:
        try:
            files = [MetadataLogFile(e["name"], int(e["size"])) for e in listing if e.get("kind") == "file"]
            wanted = metadata_log_reads(files, budget)
        except ValueError as exc:
            values["image_problem"] = f"{type(exc).__name__}: {exc}"
    if wanted or extra:
        try:
            ops = [{"op": "read", "path": f"{partition_dir}/{n}", "max_bytes": budget} for n in wanted]
            ops += [{"op": "read", "path": p, "max_bytes": LOG_TAIL_BYTES, "tail": True} for p in extra]
            results = hosts.run(node.node_id, ops)
            file_reads = [_file_read_of(r) for r in results]
            logs = file_reads[len(wanted) :]
            if wanted:
                read_files = [
                    MetadataLogFile(n, int(r.size or 0), r.content)
                    for n, r in zip(wanted, file_reads[: len(wanted)], strict=True)
                    if r.content is not None
                ]
                values["image"] = MetadataImage.replay(
                    read_metadata_files(read_files, f"{node.host}:{partition_dir}")
                )
            for tail in logs:
                if tail.status == "present" and tail.content is not None:
                    lines = tail.content.decode("utf-8", "replace").splitlines()
                    values["log_lines"] = tuple(
                        line
                        for line in lines
                        if "KRaftMigrationDriver" in line
                        or PRE_MIGRATION_LINE in line
                        or COMPLETED_LINE.search(line)
                    )
        except (BrokerHostError, OSError, ValueError) as exc:
            values["image_problem"] = f"{type(exc).__name__}: {exc}"
    disk = ControllerDisk(node.node_id, **values)
    if config:
        return disk, reads[2], processes.get(node.config_path, [])
    return disk


def _file_read_of(record: Mapping[str, Any]) -> FileRead:
    from airflow_provider_kafka_zk.hooks.kraft_migration_hosts import _file_read

    return _file_read(str(record.get("path")), record)


def _disk(hosts: NodeHosts, node: ControllerNode, log_file: str | None, budget: int) -> ControllerDisk:
    disk = read_controller_disk(hosts, node, log_file, budget)
    assert isinstance(disk, ControllerDisk)
    return disk


def read_signals(
    hook: KafkaZooKeeperHook,
    hosts: NodeHosts,
    settings: MigrationSettings,
    broker_hosts: Mapping[int, str],
) -> ClusterSignals:
    """Every signal :func:`~airflow_provider_kafka_zk.kafka.kraft_migration_phase.detect_phase` reads,
    in one pass: ZooKeeper, then each controller's host, then each broker's (reads only)."""
    view, state, epochs = read_zookeeper(hook)
    disks: dict[int, ControllerDisk] = {}
    controllers: dict[int, NodeFile] = {}
    for node_id, node in sorted(settings.controllers.items()):
        try:
            result = read_controller_disk(
                hosts, node, settings.controller_logs.get(node_id), settings.metadata_read_budget, config=True
            )
            assert isinstance(result, tuple)
            disk, read, processes = result
            disks[node_id] = disk
            controllers[node_id] = _node_file(
                "controller", node_id, node.host, node.config_path, read, None, processes
            )
        except (BrokerHostError, OSError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            disks[node_id] = ControllerDisk(node_id, meta_problem=problem)
            controllers[node_id] = _node_file(
                "controller", node_id, node.host, node.config_path, None, problem, None
            )
    images = [d.image for d in disks.values() if d.image is not None]
    image = max(images, key=lambda i: i.last_offset) if images else None
    registered_hosts = {
        b: hosts_of[0]
        for b, live in state.brokers.items()
        if (hosts_of := _registration_hosts(live.registration))
    }
    hosts_by_broker = {**registered_hosts, **dict(broker_hosts)}
    brokers: dict[int, NodeFile] = {}
    for broker in cluster_brokers(state, broker_hosts, image):
        host = hosts_by_broker.get(broker)
        path = settings.broker_config_path(broker)
        if host is None:
            brokers[broker] = NodeFile(
                broker, "broker", None, path, None, problem="no host known: give broker_hosts"
            )
            continue
        try:
            (read,), processes, _ = hosts.read_with_processes(broker, [path], [path])
            brokers[broker] = _node_file("broker", broker, host, path, read, None, processes.get(path, []))
        except (BrokerHostError, OSError) as exc:
            brokers[broker] = _node_file(
                "broker", broker, host, path, None, f"{type(exc).__name__}: {exc}", None
            )
    return ClusterSignals(view, state, brokers, controllers, disks, hosts_by_broker, epochs)


# ---------------------------------------------------------------------------------------------
# The session's gate for controller hosts
# ---------------------------------------------------------------------------------------------


class NodeGate:
    """Who may be changed: brokers pinned by the session (their meta.properties), controllers pinned
    here -- by their ``meta.properties`` (ZooKeeper's cluster id, their node id) once formatted, before
    that by the host key the SSH connection checked and the cluster file naming that host."""

    def __init__(self, session: MaintenanceSession, controllers: Mapping[int, ControllerNode]) -> None:
        self.session = session
        self.controllers = dict(controllers)
        self.pinned: dict[int, str] = {}

    def pin_controller(self, node_id: int, host: str, disk: ControllerDisk, cluster_id: str) -> None:
        node = self.controllers.get(node_id)
        if node is None or node.host != host:
            raise KraftMigrationError(f"controller {node_id} at {host} is not in the cluster file")
        if disk.meta_cluster_id is not None and (
            disk.meta_cluster_id != cluster_id or disk.meta_node_id != node_id
        ):
            raise KraftMigrationError(
                f"controller {node_id} on {host}: meta.properties says cluster {disk.meta_cluster_id} node "
                f"{disk.meta_node_id}, not cluster {cluster_id} node {node_id}: refusing to touch it"
            )
        self.pinned[node_id] = host
        log.info(
            "Controller %d on %s pinned (%s)",
            node_id,
            host,
            "meta.properties with ZooKeeper's cluster id"
            if disk.meta_cluster_id
            else "not formatted yet: by its host key",
        )

    def require_broker(self, broker_id: int, host: str) -> None:
        if broker_id in self.controllers:
            if self.pinned.get(broker_id) != host:
                raise KraftMigrationError(
                    f"controller {broker_id} at {host} was not pinned in this run: refusing"
                )
            if self.session.dry_run:
                raise KraftMigrationError("a dry-run session cannot authorise changes on a host")
            return
        self.session.require_broker(broker_id, host)


# ---------------------------------------------------------------------------------------------
# The run's context
# ---------------------------------------------------------------------------------------------


@dataclass
class MigrationContext(StepContext):
    """The executor's context plus the migration's reads and hosts."""

    settings: MigrationSettings | None = None
    hosts: NodeHosts | None = None
    host_hook: Any = None  # the task's ReusingHostHook (one SSH connection per host)
    gate: NodeGate | None = None
    location: str = ""
    plan: Mapping[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> MigrationSettings:
        assert self.settings is not None
        return self.settings

    @property
    def node_hosts(self) -> NodeHosts:
        assert self.hosts is not None
        return self.hosts

    def signals(self, *, fresh: bool = False) -> ClusterSignals:
        if fresh or "signals" not in self.cache:
            self.cache["signals"] = read_signals(self.hook, self.node_hosts, self.config, self.plan_hosts())
        return self.cache["signals"]

    def plan_hosts(self) -> dict[int, str]:
        return {int(b): h for b, h in (self.plan.get("broker_hosts") or {}).items()}

    def image(self, *, fresh: bool = True) -> MetadataImage | None:
        """The furthest-replayed metadata log of the controllers (read now)."""
        images = []
        for node in self.config.controllers.values():
            disk = _disk(self.node_hosts, node, None, self.config.metadata_read_budget)
            if disk.image is not None:
                images.append(disk.image)
        return max(images, key=lambda i: i.last_offset) if images else None

    def before(self, step: Step) -> list[Step]:
        ids = [s.id for s in self.plan_steps]
        return list(self.plan_steps[: ids.index(step.id)])

    def artefact(self, name: str) -> str:
        return f"{self.location.rstrip('/')}/{name}"


def _refusal(step: Step, rule: str, cause: str, action: str) -> Refusal:
    return Refusal(rule, cause, action, step.id)


def _running(ctx: MigrationContext, node_id: int, path: str) -> bool:
    return bool(ctx.node_hosts.processes(node_id, [path]).get(path))


def _stopped_by_earlier_steps(ctx: MigrationContext, step: Step) -> set[int]:
    return {s.node_id for s in ctx.before(step) if isinstance(s, ControllerCommand) and s.action == "stop"}


def _controllers_running(ctx: MigrationContext) -> list[int]:
    return [n for n, c in sorted(ctx.config.controllers.items()) if _running(ctx, n, c.config_path)]


def _running_refusals(ctx: MigrationContext, step: Step, nodes: Sequence[int] | None = None) -> list[Refusal]:
    """A refusal when a KRaft controller (of ``nodes``, default all) still runs at this step, counting
    the ones earlier steps of the plan stop."""
    stopped = _stopped_by_earlier_steps(ctx, step)
    candidates = [n for n in _controllers_running(ctx) if nodes is None or n in nodes]
    running = [n for n in candidates if n not in stopped]
    if not running:
        return []
    return [
        _refusal(
            step,
            "kraft-controller-running",
            f"KRaft controller(s) {running} run at this step and the plan does not stop them before it",
            "Stop them first (this DAG's back run does); nothing was changed",
        )
    ]


# ---------------------------------------------------------------------------------------------
# Handlers
# ---------------------------------------------------------------------------------------------


class NodeConfigWriteHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, NodeConfigWrite)
        try:
            (read,) = ctx.node_hosts.read_files(step.node_id, [step.path])
        except (BrokerHostError, OSError) as exc:
            return [
                _refusal(
                    step,
                    "broker-host",
                    f"{step.role} {step.node_id} on {step.host}: {exc}",
                    "Fix the host's access; nothing was written",
                )
            ]
        if read.status == "present" and read.sha256 == step.new_sha256:
            return StepState.DONE
        if read.status not in ("present", "absent"):
            return [
                _refusal(
                    step,
                    "file-refused",
                    f"{step.host}:{step.path}: {read.status} ({read.detail})",
                    "Look at the file; nothing was written",
                )
            ]
        found = read.sha256 if read.status == "present" else None
        if found != step.old_sha256:
            return [
                _refusal(
                    step,
                    "file-changed",
                    f"{step.role} {step.node_id}: {step.host}:{step.path} changed since the plan (sha256 {found}, the plan read "
                    f"{step.old_sha256})",
                    "Nothing was written; plan again from the file as it is now",
                )
            ]
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, NodeConfigWrite)
        _pin(ctx, step.role, step.node_id, step.host)
        (read,) = ctx.node_hosts.read_files(step.node_id, [step.path])
        if read.status == "present" and read.sha256 == step.new_sha256:
            return {step.id: {"already": True}}
        if read.status == "present" and read.content is not None:
            ctx.session.write_rollback(f"files/{step.role}-{step.node_id}{step.path}", read.content)
        result = ctx.node_hosts.write_config(
            step.node_id,
            step.path,
            step.new_text.encode("latin-1"),
            expected_sha256=step.old_sha256,
            keep_as=step.keep_as,
            dry_run=False,
            create_dirs=step.role == "controller",
        )
        if result["status"] not in ("written", "already"):
            raise KraftMigrationError(
                f"{step.role} {step.node_id}: {step.host}:{step.path} not written: {result['status']} ({result.get('detail')}); "
                "nothing of it was changed. Plan again"
            )
        log.info(
            "%s %d on %s: wrote %s (%s)",
            step.role,
            step.node_id,
            step.host,
            step.path,
            "; ".join(step.diff[2:8]),
        )
        _record_kept(ctx, step)
        return {
            step.id: {
                "status": result["status"],
                "kept_as": result.get("kept_as"),
                "sha256": result.get("sha256"),
            }
        }


def _record_kept(ctx: MigrationContext, step: NodeConfigWrite) -> None:
    """``kept-files.json``: every file this run replaced and where its old content is (host and artefact)."""
    url = ctx.artefact("kept-files.json")
    record = _read_json(url) or {"format": "kafka-zk-kraft-migration-kept-files", "files": []}
    record["files"].append(
        {
            "role": step.role,
            "node_id": step.node_id,
            "host": step.host,
            "path": step.path,
            "kept_as": step.keep_as if step.old_sha256 else None,
            "old_sha256": step.old_sha256,
            "new_sha256": step.new_sha256,
            "copy": ctx.artefact(f"files/{step.role}-{step.node_id}{step.path}") if step.old_sha256 else None,
        }
    )
    ctx.session.write_rollback("kept-files.json", json.dumps(record, indent=1))


def _pin(ctx: MigrationContext, role: str, node_id: int, host: str) -> None:
    """Pin a node's host before its first change: a broker by its meta.properties (the session's
    rule), a controller by :class:`NodeGate`."""
    assert ctx.gate is not None
    if role == "controller":
        if node_id in ctx.gate.pinned:
            return
        node = ctx.config.controllers[node_id]
        disk = _disk(ctx.node_hosts, node, None, 1 << 20)
        identity = ctx.session.identity
        assert identity is not None
        ctx.gate.pin_controller(node_id, host, disk, identity.cluster_id)
        return
    identity = ctx.session.identity
    assert identity is not None
    if node_id in identity.brokers:
        return
    path = ctx.config.broker_config_path(node_id)
    (read,) = ctx.node_hosts.read_files(node_id, [path])
    props = parse_java_properties(read.content or b"", f"{host}:{path}") if read.content is not None else {}
    dirs = [d.strip() for d in (props.get("log.dirs") or props.get("log.dir") or "").split(",") if d.strip()]
    metas = (
        ctx.node_hosts.read_files(node_id, [f"{d.rstrip('/')}/meta.properties" for d in dirs]) if dirs else []
    )
    entries = []
    for d, m in zip(dirs, metas, strict=True):
        if m.content is None:
            entries.append((d, None, None))
            continue
        meta = MetaProperties.parse(m.content, f"{host}:{m.path}")
        entries.append((d, meta.id, meta.cluster_id))
    configured = props.get("broker.id") or props.get("node.id")
    ctx.session.pin_broker(node_id, host, entries, int(configured) if configured is not None else None)


class ControllerStorageFormatHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, ControllerStorageFormat)
        refusals = template_refusals(
            "kraft_format_command", step.command, FORMAT_FIELDS, [(step.id, _format_values(step))]
        )
        node = ctx.config.controllers[step.node_id]
        disk = _disk(ctx.node_hosts, node, None, 1 << 20)
        if disk.meta_problem:
            return [
                *refusals,
                _refusal(
                    step,
                    "controller-storage",
                    f"controller {step.node_id}: {disk.meta_problem}",
                    "Look at its log dir",
                ),
            ]
        if disk.meta_cluster_id is not None:
            if disk.meta_cluster_id == step.cluster_id and disk.meta_node_id == step.node_id:
                return refusals or StepState.DONE
            return [
                *refusals,
                _refusal(
                    step,
                    "controller-storage",
                    f"controller {step.node_id} on {step.host}: {step.log_dir} is formatted for cluster {disk.meta_cluster_id} "
                    f"node {disk.meta_node_id}",
                    "A controller formatted for another cluster is not reformatted by this DAG; nothing was changed",
                ),
            ]
        return refusals or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, ControllerStorageFormat)
        _pin(ctx, "controller", step.node_id, step.host)
        command = render_command("kraft_format_command", step.command, _format_values(step), FORMAT_FIELDS)
        assert ctx.gate is not None and ctx.host_hook is not None
        ctx.gate.require_broker(step.node_id, step.host)
        with ctx.session.heartbeat_during(f"formatting controller {step.node_id}"):
            outcome = run_host_command(
                ctx.host_hook,
                ctx.host_hook.resolve(step.node_id),
                command,
                timeout=ctx.config.command_timeout,
                what="kraft_format_command",
            )
        disk = _disk(ctx.node_hosts, ctx.config.controllers[step.node_id], None, 1 << 20)
        if (
            disk.meta_cluster_id != step.cluster_id
            or disk.meta_node_id != step.node_id
            or disk.meta_version != 1
        ):
            raise KraftMigrationError(
                f"controller {step.node_id}: after {command!r}, {step.log_dir}/meta.properties says cluster "
                f"{disk.meta_cluster_id} node {disk.meta_node_id} version {disk.meta_version}, not cluster {step.cluster_id} "
                f"node {step.node_id} version 1: the run stops here"
            )
        ctx.gate.pin_controller(step.node_id, step.host, disk, step.cluster_id)
        return {step.id: {"seconds": outcome["seconds"], "command": command}}


def _format_values(step: ControllerStorageFormat) -> dict[str, str]:
    return {
        "node_id": str(step.node_id),
        "host": step.host,
        "config": step.config_path,
        "cluster_id": step.cluster_id,
        "log_dir": step.log_dir,
    }


class ControllerCommandHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, ControllerCommand)
        values = {"node_id": str(step.node_id), "host": step.host, "config": step.config_path}
        refusals = template_refusals(step.template_name, step.command, CONTROLLER_FIELDS, [(step.id, values)])
        if ctx.progress.pending(step.id) is not None:
            return refusals or StepState.PENDING
        try:
            running = _running(ctx, step.node_id, step.config_path)
        except (BrokerHostError, OSError) as exc:
            return [
                *refusals,
                _refusal(
                    step,
                    "broker-host",
                    f"controller {step.node_id} on {step.host}: {exc}",
                    "Fix the host's access",
                ),
            ]
        if step.action == "stop" and not running:
            return refusals or StepState.DONE
        if step.action == "start" and running:
            return refusals or StepState.DONE
        return refusals or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, ControllerCommand)
        _pin(ctx, "controller", step.node_id, step.host)
        hosts = ctx.node_hosts
        baseline = Health.from_dict((ctx.progress.baseline or {}).get("health") or {})
        before = hosts.processes(step.node_id, [step.config_path]).get(step.config_path, [])
        pending = ctx.progress.pending(step.id)
        if pending is None:
            ctx.progress.set_pending(step.id, {"pids_before": [p["pid"] for p in before]})
            values = {"node_id": str(step.node_id), "host": step.host, "config": step.config_path}
            command = render_command(step.template_name, step.command, values, CONTROLLER_FIELDS)
            assert ctx.gate is not None and ctx.host_hook is not None
            ctx.gate.require_broker(step.node_id, step.host)
            with ctx.session.heartbeat_during(f"{step.action} of controller {step.node_id}"):
                run_host_command(
                    ctx.host_hook,
                    ctx.host_hook.resolve(step.node_id),
                    command,
                    timeout=ctx.config.command_timeout,
                    what=step.template_name,
                )
            pids_before = {p["pid"] for p in before}
        else:
            pids_before = set(pending.get("pids_before") or ())

        def gate() -> list[str]:
            now = {
                p["pid"] for p in hosts.processes(step.node_id, [step.config_path]).get(step.config_path, [])
            }
            if step.action == "stop":
                return [f"controller {step.node_id} still runs (pid {sorted(now)})"] if now else []
            if not now:
                return [f"no process of controller {step.node_id} runs with {step.config_path}"]
            if step.action == "restart" and now <= pids_before:
                return [f"controller {step.node_id} has not restarted yet (pid {sorted(now)})"]
            return _controller_health(ctx, step, baseline)

        waited = ctx.wait(
            f"{step.action} of controller {step.node_id}",
            gate,
            ctx.config.gate_timeout,
            lambda why: MigrationGateError(
                f"controller {step.node_id} on {step.host}: {step.action} did not take effect within "
                f"{ctx.config.gate_timeout:g}s: {'; '.join(why)}. The run stops here; its log says why. Clear this task to "
                "resume at this gate"
            ),
        )
        return {step.id: {"action": step.action, "gate_s": round(waited, 1)}}


def _controller_health(ctx: MigrationContext, step: ControllerCommand, baseline: Health) -> list[str]:
    """The gate after a controller's start or restart once its process runs
    (:func:`~airflow_provider_kafka_zk.kafka.kraft_migration_health.controller_gate`): every controller's
    quorum-state and metadata log read once, ZooKeeper once."""
    disks = {
        n: _disk(ctx.node_hosts, node, None, ctx.config.metadata_read_budget)
        for n, node in ctx.config.controllers.items()
    }
    images = [d.image for d in disks.values() if d.image is not None]
    image = max(images, key=lambda i: i.last_offset) if images else None
    _, state, _ = read_zookeeper(ctx.hook)
    partitions = {(p.topic, p.partition): p for p in state.partitions()}
    now = health(partitions, live_brokers(state, image), min_isr(state))
    return controller_gate(
        step.node_id,
        step.action,
        quorum_leaders={n: d.quorum_leader for n, d in disks.items()},
        now=now,
        baseline=baseline,
    )


class BrokerRollHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, BrokerRoll)
        refusals = template_refusals(
            "broker_restart_command",
            step.command,
            BROKER_FIELDS,
            [(step.id, {"broker_id": str(step.broker_id), "host": step.host})],
        )
        if ctx.progress.pending(step.id) is not None:
            return refusals or StepState.PENDING  # restarted by an earlier try: only its gate is left
        signals = ctx.signals()
        path = ctx.config.broker_config_path(step.broker_id)
        try:
            running = _running(ctx, step.broker_id, path)
        except (BrokerHostError, OSError) as exc:
            return [
                *refusals,
                _refusal(
                    step,
                    "broker-host",
                    f"broker {step.broker_id} on {step.host}: {exc}",
                    "Fix the host's access",
                ),
            ]
        if not running and step.broker_id not in signals.zk_epochs:
            refusals.append(
                _refusal(
                    step,
                    "broker-down",
                    f"broker {step.broker_id} on {step.host} is not running: a rolling restart does not start a broker that is down",
                    "Start it (it comes up in the mode its file says), then run again; nothing was changed",
                )
            )
            return refusals
        if not any(isinstance(s, BrokerRoll) for s in ctx.before(step)):
            live = live_brokers(signals.state, signals.image())
            partitions = {(p.topic, p.partition): p for p in signals.state.partitions()}
            risks = stop_risks(step.broker_id, partitions, live, min_isr(signals.state))
            refusals += [_refusal(step, "restart-risk", r, "Nothing was changed") for r in risks]
        return refusals or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, BrokerRoll)
        broker = step.broker_id
        baseline = Health.from_dict((ctx.progress.baseline or {}).get("health") or {})
        pending = ctx.progress.pending(step.id)
        need_image = step.expect == "kraft" or any(
            f.mode is NodeMode.KRAFT_BROKER for f in ctx.signals().brokers.values()
        )
        if pending is None:

            def risks_now() -> list[str]:
                state, _, image = _health_now(ctx, need_image)
                partitions = {(p.topic, p.partition): p for p in state.partitions()}
                return stop_risks(broker, partitions, live_brokers(state, image), min_isr(state))

            if risks_now():  # wait for the ISR to heal after the previous restart before stopping this one
                ctx.wait(
                    f"broker {broker} safe to stop",
                    risks_now,
                    ctx.config.gate_timeout,
                    lambda why: MigrationGateError(
                        f"broker {broker} cannot be restarted safely: {'; '.join(why)}"
                    ),
                )
            _, epochs, image = _health_now(ctx, True)
            record = {
                "epoch_before": epochs.get(broker),
                "kraft_offset_before": image.last_offset if image else -1,
            }
            ctx.progress.set_pending(step.id, record)
            _pin(ctx, "broker", broker, step.host)
            command = render_command(
                "broker_restart_command",
                step.command,
                {"broker_id": str(broker), "host": step.host},
                BROKER_FIELDS,
            )
            assert ctx.gate is not None and ctx.host_hook is not None
            ctx.gate.require_broker(broker, step.host)
            try:
                with ctx.session.heartbeat_during(f"the restart of broker {broker}"):
                    outcome = run_host_command(
                        ctx.host_hook,
                        ctx.host_hook.resolve(broker),
                        command,
                        timeout=ctx.config.command_timeout,
                        what="broker_restart_command",
                    )
            except BrokerHostCommandError as exc:
                raise _restart_failed(ctx, step, record, exc, _later_rolls(ctx, step)) from exc
            log.info("Broker %d: restart command finished in %.1fs", broker, outcome["seconds"])
        else:
            record = pending
            log.info("Broker %d was restarted by an earlier try: gating only", broker)
        later = _later_rolls(ctx, step)

        def gate() -> list[str]:
            state, epochs, image = _health_now(ctx, need_image)
            live = live_brokers(state, image)
            partitions = {(p.topic, p.partition): p for p in state.partitions()}
            now = health(partitions, live, min_isr(state))
            return roll_gate(
                broker,
                step.expect,
                zk_epochs=epochs,
                epoch_before=record.get("epoch_before"),
                kraft_offset_before=int(record.get("kraft_offset_before", -1)),
                image=image,
                now=now,
                baseline=baseline,
            )

        waited = ctx.wait(
            f"restart gate of broker {broker}",
            gate,
            ctx.config.gate_timeout,
            lambda why: MigrationGateError(
                f"broker {broker} did not pass its restart gate within {ctx.config.gate_timeout:g}s: {'; '.join(why)}. The run "
                f"stops here; brokers not restarted yet: {later or 'none'}. Fix broker {broker} (its server.log says why), then "
                "clear this task: the run resumes at this gate. To go back instead, trigger the DAG with direction=back"
            ),
        )
        return {step.id: {"expect": step.expect, "gate_s": round(waited, 1)}}


def _later_rolls(ctx: MigrationContext, step: BrokerRoll) -> list[int]:
    """The brokers the plan restarts after ``step`` (what a stop at ``step`` leaves untouched)."""
    ids = [x.id for x in ctx.plan_steps]
    return [s.broker_id for s in ctx.plan_steps[ids.index(step.id) + 1 :] if isinstance(s, BrokerRoll)]


def _restart_failed(
    ctx: MigrationContext,
    step: BrokerRoll,
    record: Mapping[str, Any],
    exc: BrokerHostCommandError,
    later: Sequence[int],
) -> MigrationGateError:
    """The error of a restart command that failed. When the broker still holds the ZooKeeper
    registration it had before (same session: it never stopped) the step changed nothing: its pending
    record goes, so clearing the task runs the restart again instead of gating a restart that never
    happened. Otherwise (a time-out, or the broker went away) the record stays and a retry gates what
    happened."""
    broker = step.broker_id
    before = record.get("epoch_before")
    now: int | None = None
    if not isinstance(exc, BrokerHostTimeoutError) and before is not None:
        _, epochs, _ = _health_now(ctx, False)
        now = epochs.get(broker)
    failed = str(exc).rstrip(". ")
    stop = f"the roll stops here -- brokers not restarted yet: {list(later) or 'none'}"
    back = "To go back instead, trigger the DAG with direction=back"
    if now is not None and now == before:
        ctx.progress.clear_pending(step.id)
        return MigrationGateError(
            f"{failed}. Broker {broker} was not restarted (it still holds its ZooKeeper registration of before, "
            f"epoch {before}); {stop}. Fix the restart command, then clear this task: the run resumes with broker "
            f"{broker}'s restart. {back}"
        )
    return MigrationGateError(
        f"{failed}. Broker {broker} may have stopped or restarted; {stop}. Clear this task to gate its restart "
        f"(registered again, partitions back), or start it by hand first. {back}"
    )


def _health_now(
    ctx: MigrationContext, need_image: bool
) -> tuple[ClusterState, dict[int, int], MetadataImage | None]:
    """What a gate polls: ZooKeeper (one walk, no SSH) and, once brokers run in KRaft mode, the
    controllers' metadata log (the only place a KRaft broker is registered)."""
    _, state, epochs = read_zookeeper(ctx.hook)
    return state, epochs, ctx.image() if need_image else None


def _save_znode(ctx: MigrationContext, name: str, paths: Sequence[str]) -> dict[str, Any]:
    saved: dict[str, Any] = {}
    for path in paths:
        try:
            data, stat = ctx.hook.get_znode(path)
        except ZnodeNotFoundError:
            saved[path] = None
            continue
        saved[path] = {
            "version": stat.version,
            "ephemeral_owner": stat.ephemeralOwner,
            "data": None if data is None else data.decode("utf-8", "replace"),
        }
    ctx.session.write_rollback(
        name, json.dumps({"format": "kafka-zk-kraft-migration-znodes", "znodes": saved}, indent=1)
    )
    return saved


class MigrationZnodeDeleteHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, MigrationZnodeDelete)
        if ctx.hook.exists(znodes.MIGRATION) is None:
            return StepState.DONE
        return _running_refusals(ctx, step) or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        running = _controllers_running(ctx)
        if running:
            raise KraftMigrationError(
                f"KRaft controller(s) {running} run: /migration not deleted; nothing was changed"
            )
        saved = _save_znode(ctx, "znodes-migration.json", [znodes.MIGRATION])
        entry = saved.get(znodes.MIGRATION)
        if entry is None:
            return {step.id: {"already": True}}
        try:
            ctx.hook.multi([DeleteOp(znodes.MIGRATION, entry["version"])])
        except MultiOpError as exc:
            raise KraftMigrationError(
                f"/migration changed while it was being deleted ({exc.reason}): nothing was deleted"
            ) from None
        log.info("Deleted /migration (version %d): %s", entry["version"], entry["data"])
        return {step.id: {"deleted": entry}}


def _partition_epochs(ctx: MigrationContext) -> tuple[int, tuple[str, ...], int | None, int]:
    view, _, _ = read_zookeeper(ctx.hook)
    return (
        view.max_partition_controller_epoch,
        view.partitions_above_zk_epoch,
        view.controller_epoch,
        view.controller_epoch_version,
    )


class ControllerHandbackHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, ControllerHandback)
        try:
            registration = ctx.hook.get_controller()
        except ValueError as exc:
            return [
                _refusal(step, "znode-unreadable", f"/controller: {exc}", "Look at it; nothing was changed")
            ]
        migration = ctx.hook.exists(znodes.MIGRATION)
        if registration is not None and not registration[0].is_kraft_controller:
            return StepState.DONE if migration is None or not step.delete_migration else StepState.PENDING
        if registration is None:
            return StepState.PENDING
        controller, _ = registration
        if controller.broker_id != step.kraft_controller_id:
            return [
                _refusal(
                    step,
                    "znode-changed",
                    f"/controller is held by KRaft controller {controller.broker_id}, the plan read {step.kraft_controller_id}",
                    "Nothing was changed; plan again",
                )
            ]
        refusals = _running_refusals(ctx, step)
        if refusals:
            return refusals
        highest, above, zk_epoch, _ = _partition_epochs(ctx)
        if zk_epoch is None:
            return [
                _refusal(step, "znode-unreadable", "/controller_epoch cannot be read", "Nothing was changed")
            ]
        _, needed = epoch_trap(zk_epoch, step.kraft_controller_epoch, highest, above)
        if needed is not None and (step.raise_epoch_to is None or step.raise_epoch_to < needed):
            return [
                _refusal(
                    step,
                    "KAFKA-20488",
                    f"/controller_epoch {zk_epoch} must be raised to {needed} (KRaft / partition state epochs grew since the plan)",
                    "Nothing was changed; plan again",
                )
            ]
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, ControllerHandback)
        running = _controllers_running(ctx)
        if running:
            raise KraftMigrationError(
                f"KRaft controller(s) {running} still run: /controller not handed back; nothing was changed"
            )
        saved = _save_znode(
            ctx, "znodes-handback.json", [znodes.CONTROLLER, znodes.MIGRATION, znodes.CONTROLLER_EPOCH]
        )
        controller = saved.get(znodes.CONTROLLER)
        highest, above, zk_epoch, epoch_version = _partition_epochs(ctx)
        assert zk_epoch is not None
        trap, needed = epoch_trap(zk_epoch, step.kraft_controller_epoch, highest, above)
        ops: list[Any] = []
        raise_to = max(needed or -1, step.raise_epoch_to or -1)
        if raise_to > zk_epoch:
            ops.append(SetDataOp(znodes.CONTROLLER_EPOCH, str(raise_to).encode(), epoch_version))
            log.warning(
                "KAFKA-20488: %s", trap.action or f"raising /controller_epoch {zk_epoch} -> {raise_to}"
            )
        kraft_held = controller is not None and controller["ephemeral_owner"] == 0
        if kraft_held:
            ops.append(DeleteOp(znodes.CONTROLLER, controller["version"]))
        migration = saved.get(znodes.MIGRATION)
        if step.delete_migration and migration is not None:
            ops.append(DeleteOp(znodes.MIGRATION, migration["version"]))
        if ops:
            try:
                ctx.hook.multi(ops)
            except MultiOpError as exc:
                raise KraftMigrationError(
                    f"{exc.path} changed between the read and the hand-back ({exc.reason}): the multi was rolled back, nothing "
                    "was changed; run again"
                ) from None
        log.info(
            "Handed /controller back (deleted KRaft controller %d's registration%s)",
            step.kraft_controller_id,
            " and /migration" if step.delete_migration else "",
        )
        epoch_floor = raise_to if raise_to > zk_epoch else zk_epoch

        def elected() -> list[str]:
            registration = ctx.hook.get_controller()
            if registration is None:
                return ["no broker has been elected controller yet"]
            data, stat = registration
            if data.is_kraft_controller or stat.ephemeralOwner == 0:
                return [f"/controller still names {data.broker_id} (persistent)"]
            epoch = ctx.hook.get_znode(znodes.CONTROLLER_EPOCH)[0]
            value = znodes.ControllerEpoch.decode(epoch).epoch
            if value <= epoch_floor:
                return [f"/controller_epoch {value} not incremented yet"]
            return []

        waited = ctx.wait(
            "a ZooKeeper-mode broker elected controller",
            elected,
            ctx.config.gate_timeout,
            lambda why: MigrationGateError(
                f"no ZooKeeper-mode broker became controller within {ctx.config.gate_timeout:g}s after the hand-back: "
                f"{'; '.join(why)}. The cluster has no controller: look at the brokers' controller.log now"
            ),
        )
        registration = ctx.hook.get_controller()
        return {
            step.id: {
                "raised_controller_epoch_to": raise_to if raise_to > zk_epoch else None,
                "new_controller": registration[0].broker_id if registration else None,
                "waited_s": round(waited, 1),
            }
        }


class MigrationWaitHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, MigrationWait)

        def check() -> list[str]:
            return migration_reasons(ctx, step.until)

        waited = ctx.wait(
            f"migration {step.until}",
            check,
            ctx.config.wait_timeout,
            lambda why: MigrationGateError(
                f"the migration did not reach '{step.until}' within {ctx.config.wait_timeout:g}s: {'; '.join(why)}. "
                + _hang_hint(ctx, step.until)
            ),
        )
        return {step.id: {"until": step.until, "waited_s": round(waited, 1)}}


def migration_reasons(ctx: MigrationContext, until: str) -> list[str]:
    """Why the migration has not reached ``until`` yet (empty: it has)."""
    reasons = []
    try:
        data, _ = ctx.hook.get_znode(znodes.MIGRATION)
    except ZnodeNotFoundError:
        data = None
    state = None
    if data:
        try:
            state = znodes.MigrationZNode.decode(data)
        except ValueError as exc:
            reasons.append(f"/migration unreadable ({exc})")
    image = ctx.image()
    kraft_state = image.zk_migration_state if image is not None else None
    if until == "provisioned":
        if data is None:
            reasons.append("/migration not created yet (no active KRaft controller in migration mode)")
        if kraft_state not in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION):
            reasons.append(
                f"the metadata log's ZkMigrationState is {kraft_state.name if kraft_state else 'none yet'}"
            )
    elif until == "migrated":
        if state is None or state.kraft_metadata_offset <= 0:
            reasons.append(
                "/migration does not record a completed migration yet (kraft_metadata_offset <= 0)"
            )
        registration = ctx.hook.get_controller()
        if registration is None or not registration[0].is_kraft_controller:
            reasons.append("/controller is not held by the KRaft controller yet")
        if (
            kraft_state is not ZkMigrationState.MIGRATION
            and kraft_state is not ZkMigrationState.POST_MIGRATION
        ):
            reasons.append(
                f"the metadata log's ZkMigrationState is {kraft_state.name if kraft_state else 'none'}"
            )
        logs = [
            _disk(ctx.node_hosts, node, path, 1 << 20).log_lines
            for node_id, path in ctx.config.controller_logs.items()
            if (node := ctx.config.controllers.get(node_id)) is not None
        ]
        read = [lines for lines in logs if lines is not None]
        if read and not any(COMPLETED_LINE.search(line) for lines in read for line in lines):
            reasons.append(
                'no controller logged "Completed migration of metadata from ZooKeeper to KRaft" yet'
            )
    elif until == "finalized" and kraft_state is not ZkMigrationState.POST_MIGRATION:
        reasons.append(
            f"the metadata log's ZkMigrationState is {kraft_state.name if kraft_state else 'none'}, not POST_MIGRATION"
        )
    return reasons


def _hang_hint(ctx: MigrationContext, until: str) -> str:
    """What a migration that does not complete usually means (the known hangs)."""
    hints = []
    try:
        data, _ = ctx.hook.get_znode(znodes.MIGRATION)
        if not data:
            hints.append(
                "/migration has no data: KAFKA-19480 (zookeeper-security-migration ran): run back, then forward"
            )
    except ZnodeNotFoundError:
        pass
    image = ctx.image()
    if until == "migrated" and image is not None:
        signals = ctx.signals(fresh=True)
        missing = [b for b in signals.brokers if b not in image.brokers]
        if missing:
            hints.append(
                f"brokers {missing} have not registered with the KRaft quorum (their migration settings?)"
            )
    lines = [
        line
        for node_id, path in ctx.config.controller_logs.items()
        if (node := ctx.config.controllers.get(node_id)) is not None
        for line in (_disk(ctx.node_hosts, node, path, 1 << 20).log_lines or ())[-3:]
    ]
    states = [m.group(3) for line in lines if (m := DRIVER_STATE_LINE.search(line))]
    if states:
        hints.append(f"the migration driver's last state: {states[-1]}")
    head = ("Likely: " + "; ".join(hints) + ". ") if hints else ""
    return head + "Nothing after this step ran; clear the task to wait again"


class FinalizeGuardHandler:
    def _problems(self, ctx: MigrationContext) -> list[str]:
        signals = ctx.signals(fresh=True)
        image = ctx.image()
        registrations = {b: (r.kraft_broker, r.fenced) for b, r in image.brokers.items()} if image else {}
        from airflow_provider_kafka_zk.kafka.kraft_migration_health import zookeeper_only_features

        files = {("broker", b): dict(f.properties or {}) for b, f in signals.brokers.items()} | {
            ("controller", c): dict(f.properties or {}) for c, f in signals.controllers.items()
        }
        facts = FinalizeFacts(
            brokers=tuple(sorted(signals.brokers)),
            kraft_registrations=registrations,
            zookeeper_registered=tuple(sorted(signals.zk_epochs)),
            broker_modes={b: (f.mode.value if f.mode else None) for b, f in signals.brokers.items()},
            zookeeper_only=zookeeper_only_features(files),
        )
        return [str(t) for t in finalize_traps(facts) if t.status is TrapStatus.REFUSED]

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext)
        return [
            _refusal(step, "finalize", p, "Nothing was changed") for p in self._problems(ctx)
        ] or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        problems = self._problems(ctx)
        if problems:
            raise KraftMigrationError("finalization refused right before it: " + "; ".join(problems))
        return {step.id: {"checked": True}}


class FinalizedRecordHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext)
        return StepState.DONE if ctx.hook.exists(KRAFT_FINALIZED_PATH) is not None else StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, FinalizedRecord)
        image = ctx.image()
        if image is None or image.zk_migration_state is not ZkMigrationState.POST_MIGRATION:
            raise KraftMigrationError(
                "the finalization is not in the metadata log (no POST_MIGRATION): not recorded in ZooKeeper"
            )
        record = {
            "finalized": True,
            "controllers": list(step.controllers),
            "post_migration_offset": image.last_offset,
            "run": ctx.session.run.run_id,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        ctx.hook.create_if_absent(LEASE_ROOT, None)
        try:
            ctx.hook.multi([CreateOp(KRAFT_FINALIZED_PATH, json.dumps(record, sort_keys=True).encode())])
        except MultiOpError:
            if ctx.hook.exists(KRAFT_FINALIZED_PATH) is None:
                raise
        log.info("Recorded the finalization in %s: %s", ctx.hook.describe_path(KRAFT_FINALIZED_PATH), record)
        return {step.id: record}


class ControllerStorageRetireHandler:
    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, MigrationContext) and isinstance(step, ControllerStorageRetire)
        return _running_refusals(ctx, step, [step.node_id]) or StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, MigrationContext)
        (step,) = steps
        assert isinstance(step, ControllerStorageRetire)
        node = ctx.config.controllers[step.node_id]
        if _running(ctx, step.node_id, node.config_path):
            raise KraftMigrationError(f"controller {step.node_id} runs: its storage is not renamed")
        _pin(ctx, "controller", step.node_id, step.host)
        assert ctx.gate is not None
        ctx.gate.require_broker(step.node_id, step.host)
        renamed = {}
        for path in step.paths:
            target = path.rstrip("/").rsplit("/", 1)[1] + step.suffix
            result = ctx.node_hosts.rename_aside(step.node_id, path.rstrip("/"), target, dry_run=False)
            renamed[path] = result["status"]
            log.info("Controller %d: %s -> %s (%s)", step.node_id, path, target, result["status"])
        return {step.id: {"renamed": renamed}}


HANDLERS = {
    NodeConfigWrite.KIND: NodeConfigWriteHandler(),
    ControllerStorageFormat.KIND: ControllerStorageFormatHandler(),
    ControllerStorageRetire.KIND: ControllerStorageRetireHandler(),
    ControllerCommand.KIND: ControllerCommandHandler(),
    BrokerRoll.KIND: BrokerRollHandler(),
    MigrationZnodeDelete.KIND: MigrationZnodeDeleteHandler(),
    ControllerHandback.KIND: ControllerHandbackHandler(),
    MigrationWait.KIND: MigrationWaitHandler(),
    FinalizeGuard.KIND: FinalizeGuardHandler(),
    FinalizedRecord.KIND: FinalizedRecordHandler(),
}


def _read_json(url: str) -> Any:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return None
    return json.loads(fs.cat_file(path))


def host_hook(
    settings: MigrationSettings, broker_hosts: Mapping[int, str], zookeeper: KafkaZooKeeperHook | None = None
) -> BrokerHostHook:
    """The SSH hook for every node of the run: brokers at the hosts given, controllers at theirs."""
    return BrokerHostHook(
        settings.ssh_conn_id,
        settings.kafka_zookeeper_conn_id,
        broker_hosts=settings.all_hosts(broker_hosts),
        zookeeper=zookeeper,
        command_timeout=settings.command_timeout,
    )


def _migration_baseline(ctx: MigrationContext) -> dict[str, Any]:
    """The cluster's health and each broker's ZooKeeper epoch before the first write (the gates compare)."""
    signals = ctx.signals(fresh=True)
    partitions = {(p.topic, p.partition): p for p in signals.state.partitions()}
    now = health(partitions, live_brokers(signals.state, signals.image()), min_isr(signals.state))
    return {"health": now.to_dict(), "zk_epochs": {str(b): e for b, e in signals.zk_epochs.items()}}


def execute_migration_plan(
    location: str,
    plan: Mapping[str, Any],
    steps: Sequence[Step],
    settings: MigrationSettings,
    *,
    run: RunIdentity,
    dry_run: bool,
    expected: Any,
    approval: PlanApproval | None = None,
) -> ExecutionResult:
    """Carry out a migration plan's steps through the step executor inside one maintenance session.

    :param location: the plan's folder (``progress.json``, rollback artefacts and kept files go there).
    :param plan: ``plan.json`` (cluster, brokers' hosts pinned at plan time).
    :param expected: the cluster identity the plan was made for.
    """
    hook = KafkaZooKeeperHook(settings.kafka_zookeeper_conn_id)
    broker_hosts = {int(b): h for b, h in (plan.get("broker_hosts") or {}).items()}
    ssh = ReusingHostHook(host_hook(settings, broker_hosts, hook))

    def context(session: MaintenanceSession, progress: ProgressLog) -> MigrationContext:
        gate = NodeGate(session, settings.controllers)
        return MigrationContext(
            session=session,
            progress=progress,
            plan_steps=list(steps),
            poll_interval=settings.poll_interval,
            settings=settings,
            hosts=NodeHosts(ssh, gate, timeout=max(60.0, min(settings.command_timeout, 600.0))),
            host_hook=ssh,
            gate=gate,
            location=location,
            plan=plan,
        )

    try:
        return execute_plan_in_session(
            location,
            plan,
            steps,
            hook=hook,
            what=f"KRaft migration of cluster {plan['cluster']} ({plan.get('title')})",
            handlers=HANDLERS,
            context=context,
            baseline=_migration_baseline,
            run=run,
            dry_run=dry_run,
            expected=expected,
            approval=approval,
            lease_ttl_s=settings.lease_ttl_s,
            hosts=ssh,
            kraft_migration=True,
        )
    finally:
        ssh.close()
        hook.close()


def wait_seconds(value: Any, name: str) -> float:
    """A positive number of seconds (rendered text accepted); anything else refuses before any I/O."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not seconds > 0 or seconds == float("inf"):
        raise KraftMigrationError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


__all__ = [
    "HANDLERS",
    "ClusterSignals",
    "KraftMigrationError",
    "MigrationContext",
    "MigrationGateError",
    "MigrationSettings",
    "NodeGate",
    "execute_migration_plan",
    "host_hook",
    "read_signals",
    "read_zookeeper",
]
