"""The typed steps of a ZooKeeper-to-KRaft migration run (pure), as the planner
(:mod:`.kraft_migration_plan`) makes them and the step executor carries them out
(:mod:`airflow_provider_kafka_zk.maintenance.kraft_migration`).

Every step says what it changes and on which host, so the approved plan is the whole change:
a config file written as a diff (the old file kept beside it and in the run's artefacts), a
controller's storage formatted with ZooKeeper's cluster id, a node started, stopped or restarted
through the cluster's command templates -- one at a time, each followed by its health gate -- a
ZooKeeper znode handed back, a wait for the migration to reach a state. Each has a stable id (its
content's hash), so a retried run resumes after the last completed step and a changed plan gets
other ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from .steps import STEP_TYPES, Step, content_id


@dataclass(frozen=True)
class _PlainStep(Step):
    """A step whose fields are plain values (str, int, bool, None, tuples of them): its record is
    its fields, and back."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        values = {}
        for f in dataclasses.fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            default = f.default if f.default is not dataclasses.MISSING else None
            values[f.name] = _tuples(value) if isinstance(default, tuple) else value
        return cls(**values)  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


# ---------------------------------------------------------------------------------------------
# Files and storage on the nodes' hosts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeConfigWrite(_PlainStep):
    """Write one node's server.properties: the new text replaces the file atomically (a new file
    in the same directory, renamed over it), the old one is kept as ``keep_as`` beside it and in the
    run's artefacts (read back) before. The file must still hold what the plan read (``old_sha256``;
    None: no file yet); found already holding ``new_text``, the step is done.

    :param diff: the unified diff the plan shows (every line changed).
    :param purpose: why (``enter migration mode`` ...).
    """

    KIND: ClassVar[str] = "write_node_config"
    role: str = "broker"
    node_id: int = -1
    host: str = ""
    path: str = ""
    old_sha256: str | None = None
    new_text: str = ""
    new_sha256: str = ""
    keep_as: str = ""
    diff: tuple[str, ...] = ()
    purpose: str = ""

    def describe(self) -> str:
        changed = sum(1 for line in self.diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        kept = f"; the old file kept as {self.keep_as}" if self.old_sha256 else " (a new file)"
        return f"{self.role} {self.node_id} on {self.host}: write {self.path} ({changed} line(s) changed{kept}) -- {self.purpose}"


@dataclass(frozen=True)
class ControllerStorageFormat(_PlainStep):
    """``kafka-storage format`` of one controller with ZooKeeper's cluster id, through the cluster's
    ``kraft_format_command``; afterwards its ``meta.properties`` must say version 1, its node id and
    that cluster id. Found so already: done. Found formatted for another cluster or node: refused."""

    KIND: ClassVar[str] = "format_controller_storage"
    node_id: int = -1
    host: str = ""
    config_path: str = ""
    log_dir: str = ""
    cluster_id: str = ""
    command: str = ""  # the template; rendered (shell-quoted values) at the preflight and when run

    def describe(self) -> str:
        return (
            f"controller {self.node_id} on {self.host}: format {self.log_dir} with cluster id {self.cluster_id} "
            f"({self.command})"
        )


@dataclass(frozen=True)
class ControllerStorageRetire(_PlainStep):
    """After a revert: rename a stopped controller's log dir (and its config file) aside
    (``<path>.kafka-zk-retired-<ts>``, same filesystem, never deleted), so a later attempt formats a
    fresh quorum instead of starting on a metadata log that says the migration ran (its controller
    would dual-write stale metadata over ZooKeeper)."""

    KIND: ClassVar[str] = "retire_controller_storage"
    node_id: int = -1
    host: str = ""
    paths: tuple[str, ...] = ()
    suffix: str = ""

    def describe(self) -> str:
        return (
            f"controller {self.node_id} on {self.host}: rename {', '.join(self.paths)} to <path>{self.suffix}"
        )


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerCommand(_PlainStep):
    """Start, stop or restart one controller through the cluster's command template, then wait:
    started -- its process runs and it is in the quorum (its log moves, a leader is known); stopped --
    no process runs with its file."""

    KIND: ClassVar[str] = "controller_command"
    node_id: int = -1
    host: str = ""
    action: str = "start"  # start | stop | restart
    config_path: str = ""
    command: str = ""  # the template
    template_name: str = ""

    def describe(self) -> str:
        return (
            f"controller {self.node_id} on {self.host}: {self.action} ({self.template_name}: {self.command})"
        )


@dataclass(frozen=True)
class BrokerRoll(_PlainStep):
    """Restart one broker through ``broker_restart_command`` and gate it before the next one.

    The gate (``expect``): ``zookeeper`` -- registered again in ``/brokers/ids`` with a new session;
    ``kraft`` -- gone from ``/brokers/ids`` and registered in the KRaft quorum as a KRaft broker
    (a ``RegisterBrokerRecord`` newer than the restart, not a migrating ZooKeeper broker, unfenced);
    then, either way: no partition offline, none under ``min.insync.replicas`` and the broker back
    in the ISR of its partitions (ZooKeeper's partition states: the KRaft controller dual-writes them),
    compared with the run's baseline. Before the restart: the broker is up (a down broker is not
    restarted) and stopping it takes no partition offline or under min ISR.
    """

    KIND: ClassVar[str] = "roll_broker"
    broker_id: int = -1
    host: str = ""
    expect: str = "zookeeper"  # zookeeper | kraft
    is_controller: bool = False
    command: str = ""

    def describe(self) -> str:
        gate = (
            "registered again in ZooKeeper"
            if self.expect == "zookeeper"
            else "registered in the KRaft quorum as a KRaft broker (and gone from /brokers/ids)"
        )
        last = " (the active ZooKeeper-mode controller, last)" if self.is_controller else ""
        return (
            f"restart broker {self.broker_id} on {self.host}{last} and wait: {gate}, no partition offline, none under "
            "min.insync.replicas, its replicas back in the ISR"
        )


# ---------------------------------------------------------------------------------------------
# ZooKeeper and waits
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigrationZnodeDelete(_PlainStep):
    """Delete ``/migration`` (its bytes and version saved first; versioned delete).

    Before provisioning: a left-over one (KAFKA-17146: a new attempt would skip the initial load) or
    one without data (KAFKA-19480: the migration would hang). In a revert after the controllers
    stopped: so a later attempt loads everything again. ``expected``: what the plan read (``stale``,
    ``null`` ...); the handler refuses when a KRaft controller of the cluster file runs.
    """

    KIND: ClassVar[str] = "delete_migration_znode"
    expected: str = ""
    reason: str = ""

    def describe(self) -> str:
        return f"delete /migration ({self.reason}; its bytes saved first, versioned)"


@dataclass(frozen=True)
class ControllerHandback(_PlainStep):
    """Hand ``/controller`` back to the ZooKeeper-mode brokers after the KRaft controllers stopped
    (the docs' ``rmr /controller``, which ZooKeeper 3.5+'s shell does not have: ``deleteall``).

    One ZooKeeper multi, conditional on what was read right before it: ``/controller_epoch`` raised
    when needed (KAFKA-20488: a ZooKeeper-mode controller whose epoch is not above every partition
    state's ``controller_epoch`` -- the KRaft epoch the dual-write wrote -- aborts those partitions'
    elections and leaves them offline), the KRaft controller's persistent ``/controller`` deleted,
    and ``/migration`` deleted (KAFKA-17146). Then it waits for a ZooKeeper-mode broker to be elected.
    """

    KIND: ClassVar[str] = "hand_back_controller"
    kraft_controller_id: int = -1
    kraft_controller_epoch: int = -1
    zk_controller_epoch: int = -1
    raise_epoch_to: int | None = None
    delete_migration: bool = True

    def describe(self) -> str:
        epoch = (
            f"raise /controller_epoch {self.zk_controller_epoch} -> {self.raise_epoch_to} (KAFKA-20488), "
            if self.raise_epoch_to is not None
            else ""
        )
        migration = " and /migration" if self.delete_migration else ""
        return (
            f"in one ZooKeeper multi: {epoch}delete KRaft controller {self.kraft_controller_id}'s /controller"
            f"{migration} (saved first); then wait for a ZooKeeper-mode broker to become controller"
        )


@dataclass(frozen=True)
class MigrationWait(_PlainStep):
    """Wait for the migration to reach ``until`` (reads only):

    * ``provisioned`` -- the quorum runs in migration mode: ``/migration`` created, the metadata
      log at PRE_MIGRATION;
    * ``migrated`` -- the initial load completed: ``/migration`` offset > 0, ``/controller`` held by
      the KRaft controller, the metadata log at MIGRATION (and its log line, when the log is read).
      What a KRaft broker needs before it starts;
    * ``finalized`` -- the metadata log at POST_MIGRATION.
    """

    KIND: ClassVar[str] = "wait_for_migration"
    MUTATES: ClassVar[bool] = False
    until: str = "migrated"

    def describe(self) -> str:
        return {
            "provisioned": "wait until the quorum runs in migration mode (/migration created, PRE_MIGRATION)",
            "migrated": "wait until the controller completed the migration of the metadata (/migration offset > 0, "
            "MIGRATION, 'Completed migration of metadata from ZooKeeper to KRaft')",
            "finalized": "wait until the metadata log says POST_MIGRATION",
        }[self.until]


@dataclass(frozen=True)
class FinalizeGuard(_PlainStep):
    """Before the first controller loses its migration flag: every broker registered in the KRaft
    quorum as a KRaft broker and unfenced (KAFKA-20960: a controller finalizes without checking),
    ``/brokers/ids`` empty, every broker's file a KRaft broker's, and no ZooKeeper-only feature in use
    (AclAuthorizer, a ``zookeeper.*`` setting on a broker). Reads only."""

    KIND: ClassVar[str] = "check_finalize"
    MUTATES: ClassVar[bool] = False
    # not ``brokers``: that is Step.brokers(), the brokers the executor requires registered in ZooKeeper --
    # none here (KRaft brokers leave /brokers/ids)
    broker_ids: tuple[int, ...] = ()

    def describe(self) -> str:
        return (
            f"check that brokers {list(self.broker_ids)} are all registered as KRaft brokers (KAFKA-20960), none is in "
            "/brokers/ids, and no ZooKeeper-only feature is in use"
        )


@dataclass(frozen=True)
class FinalizedRecord(_PlainStep):
    """After the finalization took effect (the metadata log at POST_MIGRATION): record it in ZooKeeper
    under this provider's own znode (``/kafka_zk_maintenance/kraft_finalized``; Kafka ignores it), the
    only way a later reader of ZooKeeper -- the daily audit, every writer of this provider -- can tell
    a cluster that left ZooKeeper from one still dual-writing: Kafka leaves ``/controller`` and
    ``/migration`` as its last dual write did."""

    KIND: ClassVar[str] = "record_finalized"
    controllers: tuple[int, ...] = ()

    def describe(self) -> str:
        return (
            "once POST_MIGRATION is in the metadata log: record the finalization in "
            "/kafka_zk_maintenance/kraft_finalized (this provider's znode; every later run then says the cluster "
            "left ZooKeeper and writes nothing there)"
        )


MIGRATION_STEPS: tuple[type[Step], ...] = (
    NodeConfigWrite,
    ControllerStorageFormat,
    ControllerStorageRetire,
    ControllerCommand,
    BrokerRoll,
    MigrationZnodeDelete,
    ControllerHandback,
    MigrationWait,
    FinalizeGuard,
    FinalizedRecord,
)


STEP_TYPES.update({t.KIND: t for t in MIGRATION_STEPS})  # plan.json records of a migration read back by kind


def with_id(step: _PlainStep, prefix: str) -> _PlainStep:
    """``step`` with its content-derived id (every field but the id)."""
    content = {k: v for k, v in step.to_dict().items() if k != "id"}
    return dataclasses.replace(step, id=content_id(prefix, content))


def step_ids_unique(steps: Sequence[Step]) -> bool:
    ids = [s.id for s in steps]
    return len(ids) == len(set(ids))
