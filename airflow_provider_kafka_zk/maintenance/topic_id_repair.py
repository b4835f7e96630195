"""The KAFKA-14190 repair carried out by the step executor: one handler per step kind.

The plan (:func:`airflow_provider_kafka_zk.kafka.topic_id_repair.plan_repair`) is a list of typed
steps; :func:`execute_repair_plan` opens a maintenance session on the plan's cluster and hands
them to :class:`~airflow_provider_kafka_zk.maintenance.executor.StepExecutor` with the handlers
below. What each handler checks before the run's first write (the dry run runs all of it) and what
it then does:

* ``write_topic_id`` -- the znode still at the planned version with the planned bytes (the
  executor's generic check); all writes of the run go in **one multi-op**: a version check per
  znode, ``/controller_epoch``'s version as read at the preflight (a controller change since, a
  KRaft controller's takeover included, fails it) and the session's lease check. A race changes
  nothing. Each znode's bytes, version and a restore command are written (and read back) first.
* ``move_controller`` -- ``/controller_epoch`` readable; deletes ``/controller`` once and waits for
  a new controller (the lease renewed while waiting).
* ``wait_healthy`` -- waits until the written topics have leaders and full ISRs.
* ``reset_files`` -- the broker pinned (its meta.properties), each planned file read over SSH
  without following a symlink and still holding the id the plan read; then copied into the run's
  artefacts, read back, and removed (all or none on that broker).
* ``restart_broker`` -- ``restart_command`` rendered for that broker (a bad placeholder refuses,
  naming it), the restart rules (:mod:`airflow_provider_kafka_zk.kafka.restart_rules`) judged on
  the live partition states, the plan's disk facts and a fresh read of the brokers this run
  touches; then the command runs (lease heartbeat while it runs) and the gate waits: registered
  again, back in the ISR, under-replicated count and leaderless partitions back to the baseline.
"""

from __future__ import annotations

import base64
import json
import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostError, BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_partition_files import (
    RESTART_FIELDS,
    PartitionFile,
    read_partition_files,
    remove_partition_files,
    run_restart_command,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    CheckVersionOp,
    DeleteOp,
    KafkaZooKeeperHook,
    MultiOpError,
    SetDataOp,
    ZnodeNotFoundError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.audit import ReplicaDir
from airflow_provider_kafka_zk.kafka.inventory import BrokerInventory, effective_broker_id
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.model import ClusterState, PartitionInfo
from airflow_provider_kafka_zk.kafka.restart_rules import (
    after_resets,
    ids_the_controller_sends,
    leaderless_partitions,
    restart_risks,
)
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import (
    BrokerRestart,
    ControllerMove,
    FileRemoval,
    HealthWait,
    Refusal,
    ReplicaDisk,
    Step,
    StepState,
    TopicIdWrite,
    partition_file_verdict,
    template_refusals,
)
from airflow_provider_kafka_zk.kafka.topic_id_repair import (
    PARTITION_METADATA,
    restart_gate,
    topics_healthy,
    under_replicated,
    zookeeper_shell_command,
)
from airflow_provider_kafka_zk.kafka.undo import BY_HAND, undo_pointer
from airflow_provider_kafka_zk.maintenance.executor import (
    ExecutionResult,
    StepContext,
    execute_plan_in_session,
)
from airflow_provider_kafka_zk.maintenance.session import (
    MaintenanceRefusedError,
    PlanApproval,
    RunIdentity,
)

log = logging.getLogger(__name__)

ROLLBACK_FILE = "rollback.json"
ROLLBACK_FILES_FILE = "rollback-files.json"


class TopicIdRepairError(MaintenanceRefusedError):
    """The repair cannot go on; the message names the topic / znode / broker and what to do."""


class TopicIdRepairRefusedError(TopicIdRepairError):
    """A requested topic cannot be repaired safely as asked (coverage partial, replicas split...)."""


class ClusterStateChangedError(TopicIdRepairError):
    """The cluster is no longer in the state the plan was made for: plan again."""


class RestartGateError(TopicIdRepairError):
    """A restarted broker did not pass its gate in time: the run stops, the next broker is untouched."""


@dataclass(frozen=True)
class RepairSettings:
    """How one execute try reaches the cluster and how long it waits (parsed by the operator).

    :param restart_command: ``file_reset``: the restart command template (``{broker_id}``, ``{host}``).
    """

    kafka_zookeeper_conn_id: str
    ssh_conn_id: str | None = None
    broker_hosts: Mapping[int | str, str] | None = None
    server_properties_path: str | None = None
    restart_command: str | None = None
    health_timeout: float = 120.0
    restart_timeout: float = 600.0
    gate_timeout: float = 900.0
    poll_interval: float = 2.0
    lease_ttl_s: float | None = None


def read_health(
    hook: KafkaZooKeeperHook,
) -> tuple[dict[int, int], dict[tuple[str, int], PartitionInfo], ClusterState]:
    """Live broker epochs and every partition's replicas/leader/ISR, from one walk of ``/brokers``."""
    walk = hook.snapshot(include=("/brokers", znodes.CONTROLLER), progress_every=3600)
    state = ClusterState.from_snapshot(walk.rows)
    epochs = {b: live.epoch for b, live in state.brokers.items()}
    partitions = {(p.topic, p.partition): p for p in state.partitions()}
    return epochs, partitions, state


def controller_epoch(hook: KafkaZooKeeperHook) -> tuple[int, int] | None:
    """``/controller_epoch``'s (value, zkVersion), None when it is missing."""
    try:
        data, stat = hook.get_znode(znodes.CONTROLLER_EPOCH)
    except ZnodeNotFoundError:
        return None
    return znodes.ControllerEpoch.decode(data, znodes.CONTROLLER_EPOCH).epoch, stat.version


@dataclass
class RepairContext(StepContext):
    """The executor's context plus what the repair's handlers share within one try."""

    host_hook: BrokerHostHook | None = None
    location: str = ""
    settings: RepairSettings | None = None
    inventories: dict[int, BrokerInventory] = field(default_factory=dict)

    @property
    def config(self) -> RepairSettings:
        assert self.settings is not None
        return self.settings

    def artefact(self, name: str) -> str:
        return f"{self.location.rstrip('/')}/{name}"

    def health(
        self, *, fresh: bool = False
    ) -> tuple[dict[int, int], dict[tuple[str, int], PartitionInfo], ClusterState]:
        """The live state (cached for the preflight; ``fresh`` reads again)."""
        if fresh or "health" not in self.cache:
            self.cache["health"] = read_health(self.hook)
        return self.cache["health"]

    def inventory(self, broker: int) -> BrokerInventory:
        """The broker's disks read over SSH once per try, and its host pinned to this cluster."""
        if broker not in self.inventories:
            if self.host_hook is None:
                raise TopicIdRepairError(f"broker {broker}: the plan touches broker disks: give ssh_conn_id")
            inventory = self.host_hook.inventory(broker)
            meta = [
                (d.path, d.meta.broker_id if d.meta else None, d.meta.cluster_id if d.meta else None)
                for d in inventory.log_dirs
            ]
            self.session.pin_broker(
                broker,
                inventory.host,
                meta,
                effective_broker_id(inventory.facts, inventory.log_dirs),
                host_evidence=inventory.remote.get("identity_evidence"),
            )
            self.inventories[broker] = inventory
        return self.inventories[broker]

    def disk(self, broker: int) -> list[ReplicaDisk]:
        """The broker's live replica directories as read now."""
        out = []
        for p in self.inventory(broker).partitions:
            d = ReplicaDir.from_inventory_row(p.to_row())
            if d.kind is not DirKind.NORMAL or d.topic is None or d.partition is None:
                continue
            out.append(
                ReplicaDisk(
                    d.broker_id,
                    d.topic,
                    int(d.partition),
                    d.log_dir,
                    str(d.topic_id) if d.topic_id is not None else None,
                    d.metadata_error,
                )
            )
        return out

    def identity(self) -> ClusterIdentity:
        identity = self.session.identity
        assert identity is not None
        return identity


def _refusal_from(exc: Exception, step: Step, rule: str, action: str) -> Refusal:
    return Refusal(rule, f"{type(exc).__name__}: {exc}", action, step.id)


# ---------------------------------------------------------------------------------------------
# Handlers
# ---------------------------------------------------------------------------------------------


class TopicIdWriteHandler:
    """All topic-id writes of the run in one multi-op (see the module docstring)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        if "controller_epoch" not in ctx.cache:
            ctx.cache["controller_epoch"] = controller_epoch(ctx.hook)
        if ctx.cache["controller_epoch"] is None:
            return [
                Refusal(
                    "znode-gone",
                    f"{ctx.hook.describe_path(znodes.CONTROLLER_EPOCH)} is missing: is this a Kafka cluster?",
                    "Nothing was written; check the connection's chroot",
                    step.id,
                )
            ]
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, RepairContext)
        writes = [s for s in steps if isinstance(s, TopicIdWrite)]
        outcomes: dict[str, dict[str, Any]] = {}
        todo: list[TopicIdWrite] = []
        for w in writes:
            try:
                data, stat = ctx.hook.get_znode(w.path)
            except ZnodeNotFoundError:
                raise ClusterStateChangedError(
                    f"{ctx.hook.describe_path(w.path)} is gone since the preflight: nothing of the repair was "
                    "written; plan again"
                ) from None
            if data == w.new_data:
                outcomes[w.id] = {"version": stat.version, "already": True}
                continue
            if data != w.old_data or stat.version != w.expected_version:
                raise ClusterStateChangedError(
                    f"{ctx.hook.describe_path(w.path)} changed since the preflight (version {stat.version}, plan "
                    f"{w.expected_version}): nothing of the repair was written; plan again"
                )
            todo.append(w)
        if not todo:
            return outcomes
        identity = ctx.identity()
        for w in todo:
            ctx.session.write_rollback(
                f"rollback-znode-{w.topic}.json",
                json.dumps(
                    {
                        "path": w.path,
                        "version_before": w.expected_version,
                        "data_b64": base64.b64encode(w.old_data).decode(),
                        "data": w.old_data.decode("utf-8", "replace"),
                        "undo": undo_pointer(
                            ctx.session.cluster, ctx.session.run.run_id, ctx.session.run.dag_id
                        ),
                        "by_hand": f"restore, then then: {BY_HAND}",
                        "restore": zookeeper_shell_command(
                            identity.hosts, identity.chroot, "set", w.path, w.old_data
                        ),
                        "then": zookeeper_shell_command(
                            identity.hosts, identity.chroot, "delete", znodes.CONTROLLER
                        ),
                    },
                    indent=1,
                ),
            )
        epoch = ctx.cache.get("controller_epoch") or controller_epoch(ctx.hook)
        if epoch is None:
            raise ClusterStateChangedError(
                "/controller_epoch is gone: is this a Kafka cluster? Nothing was written"
            )
        ops = [CheckVersionOp(znodes.CONTROLLER_EPOCH, epoch[1])]
        ops += [SetDataOp(w.path, w.new_data, w.expected_version) for w in todo]
        try:
            results = ctx.hook.multi(ops)
        except MultiOpError as exc:
            what = (
                "the controller changed (a ZooKeeper election, or a KRaft controller taking over)"
                if exc.path == znodes.CONTROLLER_EPOCH
                else f"{ctx.hook.describe_path(exc.path)} changed"
            )
            raise ClusterStateChangedError(
                f"{what} between the preflight and the write ({exc.reason}): the multi-op was rolled back, nothing "
                f"of the repair was written ({', '.join(w.path for w in todo)}); plan again"
            ) from None
        for w, stat in zip(todo, results[1:], strict=True):
            log.info(
                "Wrote topic_id %s into %s (version %d -> %d; was %s)",
                w.topic_id,
                w.path,
                w.expected_version,
                stat.version,
                w.old_topic_id or "no id",
            )
            outcomes[w.id] = {"version": stat.version}
        return outcomes


class ControllerMoveHandler:
    """Delete ``/controller`` once, wait for a new controller (resumes when it already moved)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        pending = ctx.progress.pending(step.id)
        epoch = controller_epoch(ctx.hook)
        if epoch is None:
            return [
                Refusal(
                    "znode-gone",
                    f"{ctx.hook.describe_path(znodes.CONTROLLER_EPOCH)} cannot be read: is this a Kafka cluster?",
                    "Nothing was written",
                    step.id,
                )
            ]
        if pending is not None and epoch[0] > int(pending["epoch_before"]):
            return StepState.DONE
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, RepairContext)
        (step,) = steps
        pending = ctx.progress.pending(step.id)
        now = controller_epoch(ctx.hook)
        if now is None:
            raise ClusterStateChangedError("/controller_epoch cannot be read: is this a Kafka cluster?")
        epoch_now = now[0]
        if pending is not None and epoch_now > int(pending["epoch_before"]):
            log.info("The controller already moved (epoch %s -> %s)", pending["epoch_before"], epoch_now)
            return {
                step.id: {"epoch_before": pending["epoch_before"], "epoch_after": epoch_now, "already": True}
            }
        ctx.progress.set_pending(step.id, {"epoch_before": epoch_now})
        current = ctx.hook.get_controller()
        if current is not None:
            registration, stat = current
            log.info("Deleting /controller (broker %d, epoch %d)", registration.broker_id, epoch_now)
            ctx.hook.multi([DeleteOp(znodes.CONTROLLER, stat.version)])

        def elected() -> list[str]:
            epoch = controller_epoch(ctx.hook)
            if ctx.hook.get_controller() is None or epoch is None or epoch[0] <= epoch_now:
                return [f"no new controller yet (epoch {epoch[0] if epoch else None})"]
            return []

        timeout = ctx.config.health_timeout
        ctx.wait(
            "controller election",
            elected,
            timeout,
            lambda why: TopicIdRepairError(
                f"no new controller within {timeout:g}s after deleting /controller ({'; '.join(why)}); "
                "the brokers elect one themselves: check their logs, then clear this task to resume"
            ),
        )
        new_controller = ctx.hook.get_controller()
        after = controller_epoch(ctx.hook)
        return {
            step.id: {
                "epoch_before": epoch_now,
                "epoch_after": after[0] if after else None,
                "controller": new_controller[0].broker_id if new_controller else None,
            }
        }


class HealthWaitHandler:
    """Wait until the written topics are healthy (leaders, full ISRs)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        return StepState.PENDING

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, RepairContext)
        (step,) = steps
        assert isinstance(step, HealthWait)
        topics = list(step.topics)

        def check() -> list[str]:
            _, partitions, state = ctx.health(fresh=True)
            return topics_healthy(partitions, topics, state.live_broker_ids)

        timeout = ctx.config.health_timeout
        waited = ctx.wait(
            f"health of {', '.join(topics)}",
            check,
            timeout,
            lambda why: TopicIdRepairError(
                f"{', '.join(topics)} not healthy {timeout:g}s after the repair: {'; '.join(why[:10])}. "
                f"The id was written (rollback: {ctx.artefact(ROLLBACK_FILE)}); check the brokers' "
                "state-change logs for 'Topic ID in memory', then clear this task to wait again"
            ),
        )
        return {step.id: {"waited_s": round(waited, 1)}}


def _partition_files(step: FileRemoval) -> list[PartitionFile]:
    return [PartitionFile(f.log_dir, f.dir_name, f.name) for f in step.files]


class FileRemovalHandler:
    """Copy, read back, then remove the planned files on one broker (all or none)."""

    def _read(self, step: FileRemoval, ctx: RepairContext) -> list[dict[str, Any]]:
        inventory = ctx.inventory(step.broker_id)
        assert ctx.host_hook is not None
        return read_partition_files(
            ctx.host_hook,
            step.broker_id,
            _partition_files(step),
            log_dirs=[d.path for d in inventory.log_dirs],
        )

    def _verdicts(
        self, step: FileRemoval, found: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Refusal], list[tuple[Any, Mapping[str, Any], bytes]]]:
        refusals: list[Refusal] = []
        to_remove = []
        for planned, record in zip(step.files, found, strict=True):
            content = base64.b64decode(record["content_b64"]) if record.get("content_b64") else None
            if planned.name == PARTITION_METADATA:
                verdict = partition_file_verdict(
                    step.id,
                    step.broker_id,
                    planned.path,
                    planned.topic_id_on_disk,
                    planned.target_id,
                    record["status"],
                    content,
                    record.get("detail"),
                )
            elif record["status"] == "refused":
                verdict = Refusal(
                    "file-refused",
                    f"broker {step.broker_id}: {planned.path} cannot be read safely ({record.get('detail')})",
                    "Look at the file on the host; nothing was removed",
                    step.id,
                )
            else:
                verdict = StepState.PENDING if content is not None else StepState.DONE
            if isinstance(verdict, Refusal):
                refusals.append(verdict)
            elif verdict is StepState.PENDING and content is not None:
                to_remove.append((planned, record, content))
        return refusals, to_remove

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, RepairContext) and isinstance(step, FileRemoval)
        try:
            found = self._read(step, ctx)
        except (BrokerHostError, OSError, ValueError) as exc:
            return [
                _refusal_from(exc, step, "broker-host", "Fix the broker host's access; nothing was removed")
            ]
        refusals, to_remove = self._verdicts(step, found)
        if refusals:
            return refusals
        return StepState.PENDING if to_remove else StepState.DONE

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, RepairContext)
        (step,) = steps
        assert isinstance(step, FileRemoval) and ctx.host_hook is not None
        broker = step.broker_id
        inventory = ctx.inventory(broker)
        refusals, copies = self._verdicts(step, self._read(step, ctx))
        if refusals:
            raise ClusterStateChangedError("; ".join(str(r) for r in refusals))
        if not copies:
            return {step.id: {"removed": [], "already": True}}
        backups = []
        for planned, record, content in copies:
            relative = f"files/broker-{broker}{planned.path}"
            ctx.session.write_rollback(relative, content)
            backups.append(
                {
                    "broker_id": broker,
                    "host": inventory.host,
                    "path": planned.path,
                    "sha256": record["sha256"],
                    "copy": ctx.artefact(relative),
                    "restore": file_restore_command(inventory.host, planned.path, content),
                }
            )
        url = ctx.artefact(ROLLBACK_FILES_FILE)
        so_far = _read_json(url) or {
            "format": "kafka-zk-topic-id-repair-file-rollback",
            "undo": undo_pointer(ctx.session.cluster, ctx.session.run.run_id, ctx.session.run.dag_id),
            "by_hand": f"each file's restore, with its broker stopped: {BY_HAND}",
            "files": [],
        }
        known = {(b["broker_id"], b["path"]) for b in so_far["files"]}
        so_far["files"].extend(b for b in backups if (b["broker_id"], b["path"]) not in known)
        ctx.session.write_rollback(ROLLBACK_FILES_FILE, json.dumps(so_far, indent=1))
        with ctx.session.heartbeat_during(f"removing files on broker {broker}"):
            results = remove_partition_files(
                ctx.host_hook,
                broker,
                [(PartitionFile(p.log_dir, p.dir_name, p.name), r["sha256"]) for p, r, _ in copies],
                log_dirs=[d.path for d in inventory.log_dirs],
                dry_run=False,
                session=ctx.session,
            )
        bad = [r for r in results if r["status"] not in ("removed", "already_absent")]
        if bad:
            raise TopicIdRepairRefusedError(
                f"broker {broker}: files not removed: "
                + "; ".join(f"{r['path']}: {r['status']} {r.get('detail') or ''}" for r in bad)
            )
        for r in results:
            log.info("Broker %d: %s %s", broker, r["status"], r["path"])
        return {
            step.id: {
                "removed": [r["path"] for r in results if r["status"] == "removed"],
                "host": inventory.host,
            }
        }


class BrokerRestartHandler:
    """Restart one broker with the restart command, then gate (see the module docstring)."""

    def _touched(self, ctx: RepairContext) -> list[int]:
        return sorted({s.broker_id for s in ctx.plan_steps if isinstance(s, FileRemoval | BrokerRestart)})

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(ctx, RepairContext) and isinstance(step, BrokerRestart)
        broker = step.broker_id
        refusals: list[Refusal] = []
        template = ctx.config.restart_command
        if not (template or "").strip():
            return [
                Refusal(
                    "command-template",
                    "the plan restarts brokers but no restart_command was given",
                    "Give restart_command (e.g. 'sudo systemctl restart kafka'); nothing was run",
                    step.id,
                    ("restart_command",),
                )
            ]
        assert ctx.host_hook is not None
        try:
            host = ctx.host_hook.resolve(broker).host
        except BrokerHostError as exc:
            return [_refusal_from(exc, step, "broker-host", "Give broker_hosts for it; nothing was run")]
        refusals += template_refusals(
            "restart_command", template, RESTART_FIELDS, [(step.id, {"broker_id": str(broker), "host": host})]
        )
        epochs, partitions, state = ctx.health()
        pending = ctx.progress.pending(step.id)
        if pending is not None and epochs.get(broker) not in (None, pending["epoch_before"]):
            return refusals or StepState.PENDING  # restarted by an earlier try: only its gate is left
        try:
            fresh = {b: ctx.disk(b) for b in self._touched(ctx)}
        except (BrokerHostError, OSError, ValueError) as exc:
            return [
                *refusals,
                _refusal_from(exc, step, "broker-host", "Fix the broker host's access; nothing was run"),
            ]
        except MaintenanceRefusedError as exc:
            return [
                *refusals,
                _refusal_from(exc, step, "broker-identity", "Fix the broker host; nothing was run"),
            ]
        disk = [d for d in step.disk if d.broker_id not in fresh] + [d for ds in fresh.values() for d in ds]
        ids = [s.id for s in ctx.plan_steps]
        adopted = {
            (f.broker_id, f.topic, f.partition): f.target_id
            for s in ctx.plan_steps[: ids.index(step.id)]
            if isinstance(s, FileRemoval)
            for f in s.files
            if f.name == PARTITION_METADATA and s.broker_id != broker
        }
        disk = after_resets(disk, adopted)
        risks = restart_risks(
            broker,
            partitions,
            set(epochs),
            disk,
            self._sent_ids(step, ctx, state),
            resets=step.resets,
        )
        refusals += risks.refusals(step.id)
        return refusals or StepState.PENDING

    def _sent_ids(self, step: BrokerRestart, ctx: RepairContext, state: ClusterState) -> dict[str, str]:
        """What the controller sends the broker after its restart (see ``ids_the_controller_sends``)."""
        written = {
            s.topic: s.topic_id
            for s in ctx.plan_steps
            if isinstance(s, TopicIdWrite) and s.id not in ctx.progress.completed
        }
        moves = any(isinstance(s, ControllerMove) for s in ctx.plan_steps)
        zk_ids = {
            t: (str(ts.topic_id) if ts.topic_id is not None else None) for t, ts in state.topics.items()
        }
        return ids_the_controller_sends(
            zk_ids, new_controller=moves or state.controller_id == step.broker_id, written=written
        )

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, RepairContext)
        (step,) = steps
        assert isinstance(step, BrokerRestart) and ctx.host_hook is not None
        broker = step.broker_id
        epochs, partitions, _ = ctx.health(fresh=True)
        baseline = ctx.progress.baseline or {}
        baseline_urp = int(baseline.get("under_replicated", len(under_replicated(partitions))))
        baseline_leaderless = [tuple(k) for k in baseline.get("leaderless", [])]
        pending = ctx.progress.pending(step.id)
        if pending is not None and epochs.get(broker) not in (None, pending["epoch_before"]):
            log.info(
                "Broker %d already restarted (epoch %s -> %s): gating only",
                broker,
                pending["epoch_before"],
                epochs[broker],
            )
            epoch_before = pending["epoch_before"]
        else:
            epoch_before = epochs.get(broker)
            if epoch_before is None:
                raise RestartGateError(
                    f"broker {broker} is not registered before its restart: it is down; refusing to restart it. "
                    "Start it, then clear this task to resume"
                )
            ctx.progress.set_pending(step.id, {"epoch_before": epoch_before})
            ctx.session.require_broker(broker, ctx.host_hook.resolve(broker).host)
            timeout = ctx.config.restart_timeout
            with ctx.session.heartbeat_during(f"the restart command of broker {broker}"):
                outcome = run_restart_command(
                    ctx.host_hook,
                    broker,
                    str(ctx.config.restart_command),
                    timeout=timeout,
                    session=ctx.session,
                )
            log.info("Broker %d: restart command finished in %.1fs", broker, outcome["seconds"])
        ids = [s.id for s in ctx.plan_steps]
        later = [
            s.broker_id for s in ctx.plan_steps[ids.index(step.id) + 1 :] if isinstance(s, BrokerRestart)
        ]

        def gate() -> list[str]:
            epochs_now, partitions_now, _ = ctx.health(fresh=True)
            return restart_gate(
                broker, epoch_before, epochs_now, partitions_now, baseline_urp, baseline_leaderless
            )

        timeout = ctx.config.gate_timeout
        rollback = ctx.artefact(ROLLBACK_FILES_FILE) if _exists(ctx.artefact(ROLLBACK_FILES_FILE)) else None
        waited = ctx.wait(
            f"restart gate of broker {broker}",
            gate,
            timeout,
            lambda why: RestartGateError(
                f"broker {broker} did not pass its restart gate within {timeout:g}s: {'; '.join(why)}. "
                f"The run stops here; brokers not restarted yet: {later or 'none'}. Fix broker {broker} "
                "(its server.log says why), then clear this task: the run resumes at this gate and does not "
                f"restart broker {broker} again once it is registered with a new epoch."
                + (f" Rollback: {rollback}" if rollback else "")
            ),
        )
        epochs_after, _, _ = ctx.health(fresh=True)
        return {
            step.id: {
                "epoch_before": epoch_before,
                "epoch_after": epochs_after.get(broker),
                "gate_s": round(waited, 1),
            }
        }


HANDLERS = {
    TopicIdWrite.KIND: TopicIdWriteHandler(),
    ControllerMove.KIND: ControllerMoveHandler(),
    HealthWait.KIND: HealthWaitHandler(),
    FileRemoval.KIND: FileRemovalHandler(),
    BrokerRestart.KIND: BrokerRestartHandler(),
}


def file_restore_command(host: str, path: str, content: bytes) -> str:
    """The command that puts a removed file back, as written (run it with the broker stopped)."""
    b64 = base64.b64encode(content).decode()
    inner = (
        f"echo {b64} | base64 -d > {shlex.quote(path + '.restore')} && "
        f"mv {shlex.quote(path + '.restore')} {shlex.quote(path)}"
    )
    return f"ssh {shlex.quote(host)} {shlex.quote(inner)}  # with the broker stopped"


def _read_json(url: str) -> Any:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return None
    return json.loads(fs.cat_file(path))


def _exists(url: str) -> bool:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return bool(fs.exists(path))


def _repair_baseline(ctx: RepairContext) -> dict[str, Any]:
    """The cluster's health before the first write: what the restarts' gates compare with."""
    epochs, partitions, state = ctx.health(fresh=True)
    return {
        "under_replicated": len(under_replicated(partitions)),
        "leaderless": sorted(leaderless_partitions(partitions, state.live_broker_ids)),
        "broker_epochs": {str(b): e for b, e in epochs.items()},
    }


def execute_repair_plan(
    location: str,
    plan: Mapping[str, Any],
    steps: Sequence[Step],
    settings: RepairSettings,
    *,
    run: RunIdentity,
    dry_run: bool,
    expected: ClusterIdentity,
    approval: PlanApproval | None = None,
) -> ExecutionResult:
    """Carry out a repair plan's ``steps`` through the step executor inside one maintenance session.

    :param location: the plan's folder (``plan.json``; ``progress.json`` and rollback artefacts go there).
    :param plan: ``plan.json``'s content (cluster name).
    :param expected: the identity the plan was made for.
    :param approval: the run's approved plan (a real run after an approval step): the session
        verifies it before reading the cluster (the broker hosts are looked up in ZooKeeper after
        it), the executor again before the first write.
    """
    needs_hosts = any(isinstance(s, FileRemoval | BrokerRestart) for s in steps)
    if needs_hosts and not settings.ssh_conn_id:
        raise TopicIdRepairError("the plan resets broker files: give ssh_conn_id")
    hook = KafkaZooKeeperHook(settings.kafka_zookeeper_conn_id)
    host_hook = None
    if needs_hosts:
        host_hook = BrokerHostHook(
            str(settings.ssh_conn_id),
            settings.kafka_zookeeper_conn_id,
            broker_hosts=settings.broker_hosts or None,
            server_properties_path=settings.server_properties_path or None,
        )
    try:
        return execute_plan_in_session(
            location,
            plan,
            steps,
            hook=hook,
            what=f"topicId repair of cluster {plan['cluster']}",
            handlers=HANDLERS,
            context=lambda session, progress: RepairContext(
                session=session,
                progress=progress,
                plan_steps=list(steps),
                poll_interval=settings.poll_interval,
                host_hook=host_hook,
                location=location,
                settings=settings,
            ),
            baseline=_repair_baseline,
            run=run,
            dry_run=dry_run,
            expected=expected,
            approval=approval,
            lease_ttl_s=settings.lease_ttl_s,
            hosts=host_hook,
        )
    finally:
        hook.close()
