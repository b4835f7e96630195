"""KAFKA-14190 repair: plan from a fresh snapshot and inventory, execute step by step, verify.

Thin shells around :mod:`~airflow_provider_kafka_zk.kafka.topic_id_repair` (diagnosis, plan, gates).
Artefacts in ``<base>/<cluster>/topic-id-repair/<ts>/``: ``plan.json``, ``rollback.json`` (every
znode's original bytes and version and the command that puts them back), ``summary.txt``; while
executing, ``progress.json`` (the steps completed, so a retry continues after the last one and never
repeats a restart that passed its gate), ``files/broker-<id>/...`` (each broker file, copied and read
back before it is removed) with ``rollback-files.json``, and the session's change log; ``verify.json``
and ``report.txt`` at the end. Every mutation goes through a
:class:`~airflow_provider_kafka_zk.maintenance.MaintenanceSession`: pinned cluster and broker
identities, the maintenance lease, versioned writes, rollback first. Dry run by default.
"""

from __future__ import annotations

import base64
import json
import logging
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import latest_snapshot, read_snapshot
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_partition_files import (
    PartitionFile,
    read_partition_files,
    remove_partition_files,
    run_restart_command,
)
from airflow_provider_kafka_zk.hooks.zookeeper import DeleteOp, KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.audit import ReplicaDir
from airflow_provider_kafka_zk.kafka.inventory import effective_broker_id
from airflow_provider_kafka_zk.kafka.model import ClusterState, PartitionInfo
from airflow_provider_kafka_zk.kafka.topic_id_repair import (
    PLAN_FORMAT,
    RepairPlanError,
    Strategy,
    TopicIdCase,
    diagnose,
    offline_for_stopped_brokers,
    plan_repair,
    remaining_steps,
    restart_gate,
    topics_healthy,
    under_replicated,
)
from airflow_provider_kafka_zk.maintenance import (
    MaintenanceSession,
    RunIdentity,
    parse_safety_flags,
)
from airflow_provider_kafka_zk.operators.approved_plan import require_approved_plan
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    DrainLocation,
    RunVerifyOperator,
    plan_identity,
    snapshot_identity,
)
from airflow_provider_kafka_zk.operators.inventory import _resolve_ts
from airflow_provider_kafka_zk.operators.snapshot import default_artefacts_base
from airflow_provider_kafka_zk.spark_jobs.audit import load_inputs, run_in_process

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
ROLLBACK_FILE = "rollback.json"
ROLLBACK_FILES_FILE = "rollback-files.json"
SUMMARY_FILE = "summary.txt"
PROGRESS_FILE = "progress.json"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"
TOPIC_ID_CHECKS = (
    "topic-id-mismatch",
    "topic-id-missing-in-zookeeper",
    "topic-id-replicas-disagree",
)


class TopicIdRepairError(AirflowFailException):
    """The repair cannot go on; the message names the topic / znode / broker and what to do."""


class TopicIdRepairRefusedError(TopicIdRepairError):
    """A requested topic cannot be repaired safely as asked (coverage partial, replicas split...)."""


class ClusterStateChangedError(TopicIdRepairError):
    """The cluster is no longer in the state the plan was made for: plan again."""


class RestartGateError(TopicIdRepairError):
    """A restarted broker did not pass its gate in time: the run stops, the next broker is untouched."""


class RepairVerificationError(TopicIdRepairError):
    """After the repair the audit still reports the topic, or its partitions are not healthy."""


def repair_location(base: str, cluster: str, ts: str) -> DrainLocation:
    """``<base>/<cluster>/topic-id-repair/<ts>/``."""
    return DrainLocation("/".join([base.rstrip("/"), cluster, "topic-id-repair", ts]))


def _topic_list(value: Any) -> list[str] | None:
    """None for "all found"; a list of names otherwise (rendered text or a list)."""
    if value is None or value == "" or value == [] or value == "all" or value == ["all"]:
        return None
    if isinstance(value, str):
        text = value.strip()
        value = (
            json.loads(text) if text.startswith("[") else [t.strip() for t in text.split(",") if t.strip()]
        )
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) and t for t in value):
        raise TopicIdRepairError(
            f"topics must be a list of topic names (or empty for all found), not {value!r}"
        )
    return list(value)


def read_health(
    hook: KafkaZooKeeperHook,
) -> tuple[dict[int, int], dict[tuple[str, int], PartitionInfo], ClusterState]:
    """Live broker epochs and every partition's replicas/leader/ISR, from one walk of ``/brokers``."""
    walk = hook.snapshot(include=("/brokers", znodes.CONTROLLER), progress_every=3600)
    state = ClusterState.from_snapshot(walk.rows)
    epochs = {b: live.epoch for b, live in state.brokers.items()}
    partitions = {(p.topic, p.partition): p for p in state.partitions()}
    return epochs, partitions, state


def _wait(
    what: str,
    check: Callable[[], list[str]],
    timeout: float,
    poll: float,
    on_timeout: Callable[[list[str]], Exception],
) -> float:
    """Poll ``check`` until it returns no reasons; log progress; raise ``on_timeout(reasons)`` at the limit."""
    started = time.monotonic()
    last_logged = 0.0
    while True:
        reasons = check()
        waited = time.monotonic() - started
        if not reasons:
            log.info("%s: done after %.1fs", what, waited)
            return waited
        if waited >= timeout:
            raise on_timeout(reasons)
        if waited - last_logged >= 10 or last_logged == 0.0:
            log.info("%s: waiting (%.0fs of %.0fs): %s", what, waited, timeout, "; ".join(reasons[:5]))
            last_logged = waited or 0.001
        time.sleep(poll)


def _restore_znode_command(hook_description: str, path: str, data: bytes) -> str:
    return f"zookeeper-shell.sh {shlex.quote(hook_description)} set {shlex.quote(path)} {shlex.quote(data.decode())}"


class TopicIdRepairPlanOperator(BaseOperator):
    """Diagnose topics (ZooKeeper id vs every replica's ``partition.metadata``) and plan the repair.

    Reads the safety snapshot and the inventory only (never ZooKeeper or a broker). Writes
    ``rollback.json`` first, then ``plan.json`` and ``summary.txt``. Fails -- after writing them, so the
    dry run shows why -- when a requested topic cannot be repaired as asked (``unknown`` coverage, a
    split topic under ``write_back``...); with ``topics`` empty it plans every topic that needs it and
    fails only when one of those is refused.

    :param cluster: cluster name (artefact folder).
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param snapshot_path: the safety snapshot (default: the latest of the cluster).
    :param inventory_path: the inventory run directory taken right after it.
    :param topics: topic names, or empty / ``"all"`` for every topic whose ids disagree.
    :param strategy: ``auto`` | ``write_back`` | ``file_reset``.
    :param chosen_id: ``file_reset`` only: the id the replicas keep (default ZooKeeper's).
    :param reset_leader_epoch_checkpoint: ``file_reset`` also removes the reset replicas'
        ``leader-epoch-checkpoint`` (the broker rebuilds it empty: until new leader epochs are written,
        a follower truncates to its high watermark instead of the leader's epoch boundary, so records
        above it that the leader lacks may be lost in an unclean failover).
    :param repair_ts: the run's folder name (default: the run's timestamp).
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "snapshot_path",
        "inventory_path",
        "topics",
        "strategy",
        "chosen_id",
        "reset_leader_epoch_checkpoint",
        "repair_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        base_path: str | None = None,
        snapshot_path: str | None = None,
        inventory_path: str | None = None,
        topics: Sequence[str] | str | None = None,
        strategy: str = "auto",
        chosen_id: str | None = None,
        reset_leader_epoch_checkpoint: bool | str = False,
        repair_ts: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.base_path = base_path
        self.snapshot_path = snapshot_path
        self.inventory_path = inventory_path
        self.topics = topics
        self.strategy = strategy
        self.chosen_id = chosen_id
        self.reset_leader_epoch_checkpoint = reset_leader_epoch_checkpoint
        self.repair_ts = repair_ts

    def execute(self, context: Context) -> dict[str, Any]:
        flags = parse_safety_flags(reset_leader_epoch_checkpoint=self.reset_leader_epoch_checkpoint)
        try:
            strategy = Strategy(str(self.strategy))
        except ValueError:
            raise TopicIdRepairError(
                f"strategy must be one of {[s.value for s in Strategy]}, not {self.strategy!r}"
            ) from None
        requested = _topic_list(self.topics)
        chosen = None if self.chosen_id in (None, "", "None") else str(self.chosen_id).strip()
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        snapshot = self.snapshot_path
        if snapshot in (None, "", "None"):
            ref = latest_snapshot(base, self.cluster)
            if ref is None:
                raise TopicIdRepairError(f"no complete snapshot of cluster {self.cluster!r} under {base}")
            snapshot = ref.path
        manifest, rows = read_snapshot(str(snapshot))
        identity = snapshot_identity(manifest, str(snapshot))
        inputs = load_inputs(
            base, self.cluster, snapshot=str(snapshot), previous="", inventory=self.inventory_path
        )
        state = inputs.state
        inventoried = set(inputs.coverage.get("inventoried") or [])
        dirs = [ReplicaDir.from_inventory_row(r) for r in inputs.dir_rows]
        everything = diagnose(state, dirs, inventoried, sorted(set(state.topics) | set(requested or ())))
        if requested is None:
            diagnoses = [d for d in everything if d.case not in (TopicIdCase.CONSISTENT, TopicIdCase.UNKNOWN)]
        else:
            diagnoses = [d for d in everything if d.topic in requested]
        others = [d for d in everything if d not in diagnoses]
        raw = {r.path: (r.data, r.version) for r in rows if r.path.startswith("/brokers/topics/")}
        znode_bytes = {
            d.topic: raw[d.znode_path] for d in diagnoses if raw.get(d.znode_path, (None,))[0] is not None
        }
        try:
            plan = plan_repair(
                diagnoses,
                znode_bytes,
                strategy=strategy,
                chosen_id=chosen,
                reset_leader_epoch_checkpoint=flags["reset_leader_epoch_checkpoint"],
                controller_id=state.controller_id,
                live_brokers=state.live_broker_ids,
                others=others,
            )
        except (RepairPlanError, ValueError) as exc:
            raise TopicIdRepairError(f"cannot plan the repair: {exc}") from None
        ts = _resolve_ts(self.repair_ts, context)
        location = repair_location(base, self.cluster, ts)
        record = {
            **plan.to_dict(),
            "cluster": self.cluster,
            "identity": identity.to_dict(),
            "snapshot": str(snapshot),
            "inventory": self.inventory_path,
            "coverage": inputs.coverage,
            "unknown": {d.topic: d.reason for d in others if d.case is TopicIdCase.UNKNOWN},
            "controller_at_plan": state.controller_id,
            "live_brokers_at_plan": sorted(state.live_broker_ids),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        zookeeper = ",".join(identity.hosts) + identity.chroot
        location.write(ROLLBACK_FILE, json.dumps(_rollback_record(plan.steps, zookeeper), indent=1))
        location.write(PLAN_FILE, json.dumps(record, indent=1))
        summary = describe_plan(record)
        location.write(SUMMARY_FILE, summary)
        for line in summary.splitlines():
            log.info("%s", line)
        result = {
            "plan_dir": location.url,
            "actionable": plan.actionable,
            "steps": len(plan.steps),
            "refused": dict(plan.refused),
            "cases": {t: v["case"] for t, v in plan.topics.items()},
        }
        refused = "; ".join(f"{t}: {why}" for t, why in sorted(plan.refused.items()))
        if plan.refused and (requested is not None or not plan.actionable):
            raise TopicIdRepairRefusedError(f"{refused} (plan: {location.path(SUMMARY_FILE)})")
        if plan.refused:  # "all found": repair what can be, name what this run leaves alone
            log.warning("Not repaired by this run: %s", refused)
        return result


def _rollback_record(steps: Sequence[Mapping[str, Any]], target: str) -> dict[str, Any]:
    """What puts each planned ZooKeeper write back (file copies are recorded when taken)."""
    entries = []
    for step in steps:
        if step["kind"] != "write_topic_id":
            continue
        old = base64.b64decode(step["old_data_b64"])
        entries.append(
            {
                "path": step["path"],
                "version_before": step["expected_version"],
                "data_b64": step["old_data_b64"],
                "data": old.decode("utf-8", "replace"),
                "restore": _restore_znode_command(target, step["path"], old)
                + "  # then delete /controller so a new controller loads it",
            }
        )
    return {"format": "kafka-zk-topic-id-repair-rollback", "target": target, "znodes": entries}


def describe_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a person reads it at 3 a.m.: per topic what is wrong, then every step."""
    lines = [f"topicId repair plan for {plan['cluster']} ({plan['strategy']}); snapshot {plan['snapshot']}"]
    for topic, entry in sorted(plan["topics"].items()):
        lines.append(f"- {topic}: {entry['case'].upper()}: {entry['reason']}")
        lines.append(f"  -> {entry['strategy'] or 'no action'}: {entry['why']}")
        if entry.get("ids_on_disk"):
            for topic_id, replicas in entry["ids_on_disk"].items():
                lines.append(f"     id {topic_id} on {len(replicas)} replica(s): {', '.join(replicas[:12])}")
        if entry.get("without_partition_metadata"):
            lines.append(
                f"     without partition.metadata: {', '.join(entry['without_partition_metadata'][:6])}"
            )
    for topic, why in sorted((plan.get("unknown") or {}).items()):
        lines.append(f"- {topic}: UNKNOWN, not planned: {why}")
    if not plan["steps"]:
        lines.append("Nothing to do.")
    for n, step in enumerate(plan["steps"], 1):
        kind = step["kind"]
        if kind == "write_topic_id":
            lines.append(
                f"{n}. write topic_id {step['topic_id']} into {step['path']} (versioned, expected version "
                f"{step['expected_version']}; was {step['old_topic_id'] or 'no id'}); partitions unchanged"
            )
        elif kind == "move_controller":
            lines.append(
                f"{n}. delete /controller (controller now: broker {step['controller_at_plan']}) so a new "
                f"controller loads the restored id of {', '.join(step['topics'])}; "
                "partitions keep serving while it moves"
            )
        elif kind == "wait_healthy":
            lines.append(
                f"{n}. wait until every partition of {', '.join(step['topics'])} has a leader and full ISR"
            )
        elif kind == "reset_files":
            lines.append(
                f"{n}. broker {step['broker_id']}: copy then remove {len(step['files'])} file(s) "
                f"(the broker keeps running on them until restarted):"
            )
            lines.extend(f"     {f['path']} (holds {f['topic_id_on_disk']})" for f in step["files"][:20])
        elif kind == "restart_broker":
            lines.append(
                f"{n}. restart broker {step['broker_id']}{' (the controller, last)' if step['is_controller'] else ''}"
                f" and wait: registered again, back in the ISR of {', '.join(step['topics'])}, "
                "under-replicated count back to the pre-run baseline"
            )
    return "\n".join(lines) + "\n"


@dataclass
class _RepairRun:
    """What every step of one execute try works with; ``progress`` is ``progress.json``'s content."""

    hook: KafkaZooKeeperHook
    host_hook: BrokerHostHook | None
    session: MaintenanceSession
    location: DrainLocation
    progress: dict[str, Any]
    dry_run: bool

    @property
    def completed(self) -> dict[str, Any]:
        return self.progress.setdefault("completed", {})

    def pending(self, step_id: str) -> dict[str, Any] | None:
        """What a started but unfinished step recorded (e.g. the broker epoch before its restart)."""
        return self.progress.setdefault("pending", {}).get(step_id)

    def set_pending(self, step_id: str, record: dict[str, Any]) -> None:
        self.progress.setdefault("pending", {})[step_id] = record
        self.save()

    def complete(self, step_id: str, outcome: dict[str, Any]) -> None:
        self.completed[step_id] = outcome
        self.progress.setdefault("pending", {}).pop(step_id, None)
        self.save()

    def save(self) -> None:
        # insertion order is completion order: the report lists steps as they ran
        self.location.write(PROGRESS_FILE, json.dumps(self.progress, indent=1))


class TopicIdRepairExecuteOperator(BaseOperator):
    """Carry out a repair plan step by step inside a maintenance session; resume after the last done.

    :param plan_dir: the plan's folder (``TopicIdRepairPlanOperator``'s ``plan_dir``).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: SSH connection for the broker hosts (``file_reset`` only).
    :param broker_hosts: broker id -> host overrides.
    :param server_properties_path: where server.properties is on a broker host.
    :param restart_command: ``file_reset``: the command that restarts the broker on its host, e.g.
        ``sudo systemctl restart kafka``; ``{broker_id}`` and ``{host}`` are replaced (shell-quoted).
    :param dry_run: when true (default) check every precondition and log each step; change nothing.
    :param health_timeout: seconds to wait for healthy partitions after the write / controller move.
    :param restart_timeout: seconds the restart command may run.
    :param gate_timeout: seconds a restarted broker has to pass its gate before the run stops.
    :param poll_interval: seconds between ZooKeeper checks while waiting.
    :param artefacts_conn_id: the Airflow connection of a remote store (as the plan's).
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "artefacts_conn_id",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "restart_command",
        "dry_run",
        "health_timeout",
        "restart_timeout",
        "gate_timeout",
        "poll_interval",
    )
    ui_color = "#f5b7b1"

    def __init__(
        self,
        *,
        plan_dir: str,
        kafka_zookeeper_conn_id: str = "kafka_zookeeper_default",
        ssh_conn_id: str | None = None,
        broker_hosts: Mapping[int | str, str] | str | None = None,
        server_properties_path: str | None = None,
        restart_command: str | None = None,
        dry_run: bool | str = True,
        health_timeout: float | str = 120.0,
        restart_timeout: float | str = 600.0,
        gate_timeout: float | str = 900.0,
        poll_interval: float | str = 2.0,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.restart_command = restart_command
        self.dry_run = dry_run
        self.health_timeout = health_timeout
        self.restart_timeout = restart_timeout
        self.gate_timeout = gate_timeout
        self.poll_interval = poll_interval

    # ------------------------------------------------------------------ driver
    def execute(self, context: Context) -> dict[str, Any]:
        require_approved_plan(self, context)  # a real run: the approved plan, unchanged, or nothing
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        for name in ("health_timeout", "restart_timeout", "gate_timeout", "poll_interval"):
            setattr(self, name, _positive_seconds(getattr(self, name), name))
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = location.read_json(PLAN_FILE)
        if plan.get("format") != PLAN_FORMAT:
            raise TopicIdRepairError(f"{location.path(PLAN_FILE)} is not a topicId repair plan")
        identity = plan_identity(plan, location.url)
        steps = plan["steps"]
        needs_hosts = any(s["kind"] in ("reset_files", "restart_broker") for s in steps)
        if needs_hosts and not self.ssh_conn_id:
            raise TopicIdRepairError("the plan resets broker files: give ssh_conn_id")
        if any(s["kind"] == "restart_broker" for s in steps) and not (self.restart_command or "").strip():
            raise TopicIdRepairError(
                "the plan restarts brokers: give restart_command (e.g. 'sudo systemctl restart kafka')"
            )
        progress = location.read_json(PROGRESS_FILE) if location.exists(PROGRESS_FILE) else {}
        completed: dict[str, Any] = dict(progress.get("completed") or {})
        todo = remaining_steps(steps, completed)
        if completed:
            log.info("Resuming: %d step(s) already completed: %s", len(completed), ", ".join(completed))
        if not todo:
            log.info("Every step of %s is completed", location.url)
            return {"plan_dir": location.url, "dry_run": dry_run, "completed": list(completed), "ran": []}
        hook = KafkaZooKeeperHook(self.kafka_zookeeper_conn_id)
        run = RunIdentity.from_context(context, fallback_run_id=location.url)
        host_hook = self._host_hook() if needs_hosts else None
        if host_hook is not None:
            host_hook.resolve_connections()
        ran: list[str] = []
        try:
            with MaintenanceSession(
                hook,
                cluster=str(plan["cluster"]),
                artefact_dir=location.url,
                run=run,
                dry_run=dry_run,
                expected=identity,
                single_step=True,
            ) as session:
                state = _RepairRun(hook, host_hook, session, location, progress, dry_run)
                if not dry_run and "baseline" not in progress:
                    epochs, partitions, _ = read_health(hook)
                    progress["baseline"] = {
                        "under_replicated": len(under_replicated(partitions)),
                        "broker_epochs": {str(b): e for b, e in epochs.items()},
                    }
                    state.save()
                for step in todo:
                    session.recheck()
                    log.info("Step %s (%s)%s", step["id"], step["kind"], " [DRY RUN]" if dry_run else "")
                    outcome = getattr(self, f"_step_{step['kind']}")(step, state)
                    if not dry_run:
                        state.complete(step["id"], outcome)
                    ran.append(step["id"])
        finally:
            hook.close()
        done = list(progress.get("completed") or {})
        return {"plan_dir": location.url, "dry_run": dry_run, "completed": done, "ran": ran}

    def _host_hook(self) -> BrokerHostHook:
        hosts = self.broker_hosts
        if isinstance(hosts, str):
            hosts = json.loads(hosts) if hosts.strip() not in ("", "None") else None
        return BrokerHostHook(
            str(self.ssh_conn_id),
            self.kafka_zookeeper_conn_id,
            broker_hosts=hosts or None,
            server_properties_path=self.server_properties_path or None,
        )

    # ------------------------------------------------------------------ steps
    def _step_write_topic_id(self, step: Mapping[str, Any], run: _RepairRun) -> dict[str, Any]:
        path = step["path"]
        old = base64.b64decode(step["old_data_b64"])
        new = base64.b64decode(step["new_data_b64"])
        try:
            data, stat = run.hook.get_znode(path)
        except ZnodeNotFoundError:
            raise ClusterStateChangedError(
                f"{run.hook.describe_path(path)} is gone since the plan: plan again"
            ) from None
        if data == new:
            log.info("%s already holds topic_id %s (an earlier try wrote it)", path, step["topic_id"])
            return {"version": stat.version, "already": True}
        if data != old or stat.version != step["expected_version"]:
            raise ClusterStateChangedError(
                f"{run.hook.describe_path(path)} changed since the plan (version {stat.version}, plan "
                f"{step['expected_version']}; data {'same' if data == old else 'different'}): nothing written, plan again"
            )
        if run.dry_run:
            log.info("DRY RUN: would set %s to %s (version %d)", path, new.decode(), stat.version)
            return {}
        run.session.write_rollback(
            f"rollback-znode-{step['topic']}.json",
            json.dumps(
                {
                    "path": path,
                    "version_before": stat.version,
                    "data_b64": base64.b64encode(old).decode(),
                    "restore": _restore_znode_command(run.hook.describe_path("/"), path, old),
                },
                indent=1,
            ),
        )
        new_stat = run.hook.set_if_version(path, new, stat.version)
        log.info(
            "Wrote topic_id %s into %s (version %d -> %d; was %s)",
            step["topic_id"],
            path,
            stat.version,
            new_stat.version,
            step["old_topic_id"] or "no id",
        )
        return {"version": new_stat.version}

    def _step_move_controller(self, step: Mapping[str, Any], run: _RepairRun) -> dict[str, Any]:
        pending = run.pending(step["id"])
        current = run.hook.get_controller()
        epoch_now = _controller_epoch(run.hook)
        if pending is not None and epoch_now is not None and epoch_now > pending["epoch_before"]:
            log.info("The controller already moved (epoch %s -> %s)", pending["epoch_before"], epoch_now)
            return {"epoch_before": pending["epoch_before"], "epoch_after": epoch_now, "already": True}
        if run.dry_run:
            who = current[0].broker_id if current else "none"
            log.info(
                "DRY RUN: would delete /controller (broker %s, epoch %s) to force an election", who, epoch_now
            )
            return {}
        if epoch_now is None:
            raise ClusterStateChangedError("/controller_epoch cannot be read: is this a Kafka cluster?")
        run.set_pending(step["id"], {"epoch_before": epoch_now})
        if current is not None:
            registration, stat = current
            log.info("Deleting /controller (broker %d, epoch %d)", registration.broker_id, epoch_now)
            run.session.take_lease()
            run.hook.multi([DeleteOp(znodes.CONTROLLER, stat.version)])

        def elected() -> list[str]:
            epoch = _controller_epoch(run.hook)
            if run.hook.get_controller() is None or epoch is None or epoch <= epoch_now:
                return [f"no new controller yet (epoch {epoch})"]
            return []

        _wait(
            "controller election",
            elected,
            float(self.health_timeout),
            float(self.poll_interval),
            lambda why: TopicIdRepairError(
                f"no new controller within {self.health_timeout}s after deleting /controller ({'; '.join(why)}); "
                "the brokers elect one themselves: check their logs, then clear this task to resume"
            ),
        )
        new_controller = run.hook.get_controller()
        return {
            "epoch_before": epoch_now,
            "epoch_after": _controller_epoch(run.hook),
            "controller": new_controller[0].broker_id if new_controller else None,
        }

    def _step_wait_healthy(self, step: Mapping[str, Any], run: _RepairRun) -> dict[str, Any]:
        topics = step["topics"]
        if run.dry_run:
            _, partitions, state = read_health(run.hook)
            waiting = topics_healthy(partitions, topics, state.live_broker_ids)
            log.info("DRY RUN: health of %s now: %s", ", ".join(topics), "; ".join(waiting) or "healthy")
            return {}

        def check() -> list[str]:
            _, partitions, state = read_health(run.hook)
            return topics_healthy(partitions, topics, state.live_broker_ids)

        waited = _wait(
            f"health of {', '.join(topics)}",
            check,
            float(self.health_timeout),
            float(self.poll_interval),
            lambda why: TopicIdRepairError(
                f"{', '.join(topics)} not healthy {self.health_timeout}s after the repair: {'; '.join(why[:10])}. "
                f"The id was written (rollback: {run.location.path(ROLLBACK_FILE)}); check the brokers' "
                "state-change logs for 'Topic ID in memory', then clear this task to wait again"
            ),
        )
        return {"waited_s": round(waited, 1)}

    def _step_reset_files(self, step: Mapping[str, Any], run: _RepairRun) -> dict[str, Any]:
        broker = int(step["broker_id"])
        assert run.host_hook is not None
        inventory = run.host_hook.inventory(broker)
        log_dirs = [d.path for d in inventory.log_dirs]
        meta = [
            (d.path, d.meta.broker_id if d.meta else None, d.meta.cluster_id if d.meta else None)
            for d in inventory.log_dirs
        ]
        run.session.pin_broker(
            broker,
            inventory.host,
            meta,
            effective_broker_id(inventory.facts, inventory.log_dirs),
            host_evidence=inventory.remote.get("identity_evidence"),
        )
        files = [PartitionFile(f["log_dir"], f["dir_name"], f["name"]) for f in step["files"]]
        found = read_partition_files(run.host_hook, broker, files, log_dirs=log_dirs)
        by_path = {r["path"]: r for r in found}
        to_remove: list[tuple[PartitionFile, str]] = []
        copies = []
        for f, planned in zip(files, step["files"], strict=True):
            record = by_path.get(f.path) or {"status": "absent"}
            if record["status"] == "refused":
                raise TopicIdRepairRefusedError(
                    f"broker {broker}: {f.path}: {record.get('detail')}; nothing removed"
                )
            if record["status"] == "absent":
                log.info("Broker %d: %s is already gone", broker, f.path)
                continue
            content = base64.b64decode(record["content_b64"])
            if f.name == "partition.metadata":
                text = content.decode("utf-8", "replace")
                if text.endswith(f"topic_id: {planned['target_id']}"):
                    log.info(
                        "Broker %d: %s already holds %s: left alone", broker, f.path, planned["target_id"]
                    )
                    continue
                if not text.endswith(f"topic_id: {planned['topic_id_on_disk']}"):
                    raise ClusterStateChangedError(
                        f"broker {broker}: {f.path} no longer holds {planned['topic_id_on_disk']} ({text!r}): "
                        "nothing removed, plan again"
                    )
            copies.append((f, record, content))
            to_remove.append((f, record["sha256"]))
        if run.dry_run:
            for f, record, _ in copies:
                log.info(
                    "DRY RUN: broker %d: would copy and remove %s (%d bytes)", broker, f.path, record["size"]
                )
            remove_partition_files(run.host_hook, broker, to_remove, log_dirs=log_dirs, dry_run=True)
            return {}
        run.session.take_lease()
        backups = []
        for f, record, content in copies:
            relative = f"files/broker-{broker}{f.path}"
            run.session.write_rollback(relative, content)
            b64 = base64.b64encode(content).decode()
            backups.append(
                {
                    "broker_id": broker,
                    "host": inventory.host,
                    "path": f.path,
                    "sha256": record["sha256"],
                    "copy": run.location.path(relative),
                    "restore": "ssh {} {}".format(
                        shlex.quote(inventory.host),
                        shlex.quote(
                            f"echo {b64} | base64 -d > {shlex.quote(f.path + '.restore')} && "
                            f"mv {shlex.quote(f.path + '.restore')} {shlex.quote(f.path)}"
                        ),
                    )
                    + "  # with the broker stopped",
                }
            )
        record_so_far = (
            run.location.read_json(ROLLBACK_FILES_FILE)
            if run.location.exists(ROLLBACK_FILES_FILE)
            else {"files": []}
        )
        known = {(b["broker_id"], b["path"]) for b in record_so_far["files"]}
        record_so_far["files"].extend(b for b in backups if (b["broker_id"], b["path"]) not in known)
        run.session.write_rollback(ROLLBACK_FILES_FILE, json.dumps(record_so_far, indent=1))
        results = remove_partition_files(
            run.host_hook, broker, to_remove, log_dirs=log_dirs, dry_run=False, session=run.session
        )
        bad = [r for r in results if r["status"] not in ("removed", "already_absent")]
        if bad:
            raise TopicIdRepairRefusedError(
                f"broker {broker}: files not removed: "
                + "; ".join(f"{r['path']}: {r['status']} {r.get('detail') or ''}" for r in bad)
            )
        for r in results:
            log.info("Broker %d: %s %s", broker, r["status"], r["path"])
        return {"removed": [r["path"] for r in results if r["status"] == "removed"], "host": inventory.host}

    def _step_restart_broker(self, step: Mapping[str, Any], run: _RepairRun) -> dict[str, Any]:
        broker = int(step["broker_id"])
        assert run.host_hook is not None
        epochs, partitions, _state = read_health(run.hook)
        baseline = int(
            (run.progress.get("baseline") or {}).get("under_replicated", len(under_replicated(partitions)))
        )
        pending = run.pending(step["id"])
        if run.dry_run:
            log.info(
                "DRY RUN: would run %r on broker %d, then wait until it re-registers, rejoins the ISR of %s and "
                "the under-replicated count is back to %d",
                self.restart_command,
                broker,
                ", ".join(step["topics"]),
                baseline,
            )
            return {}
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
            run.set_pending(step["id"], {"epoch_before": epoch_before})
            run.session.require_broker(broker, run.host_hook.resolve(broker).host)
            run.session.take_lease()
            outcome = run_restart_command(
                run.host_hook,
                broker,
                str(self.restart_command),
                timeout=float(self.restart_timeout),
                session=run.session,
            )
            log.info("Broker %d: restart command finished in %.1fs", broker, outcome["seconds"])
        later = [
            s["broker_id"] for s in _steps_after(run.location, step["id"]) if s["kind"] == "restart_broker"
        ]

        def gate() -> list[str]:
            epochs_now, partitions_now, _ = read_health(run.hook)
            return restart_gate(broker, epoch_before, epochs_now, partitions_now, baseline)

        waited = _wait(
            f"restart gate of broker {broker}",
            gate,
            float(self.gate_timeout),
            float(self.poll_interval),
            lambda why: RestartGateError(
                f"broker {broker} did not pass its restart gate within {self.gate_timeout}s: {'; '.join(why)}. "
                f"The run stops here; brokers not restarted yet: {later or 'none'}. Fix broker {broker} "
                "(its server.log says why), then clear this task: the run resumes at this gate and does not "
                f"restart broker {broker} again once it is registered with a new epoch. Rollback: "
                f"{run.location.path(ROLLBACK_FILES_FILE)}"
            ),
        )
        epochs_after, _, _ = read_health(run.hook)
        return {
            "epoch_before": epoch_before,
            "epoch_after": epochs_after.get(broker),
            "gate_s": round(waited, 1),
        }


def _positive_seconds(value: Any, name: str) -> float:
    """A number of seconds > 0 (rendered text accepted); anything else fails before any I/O."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf") or isinstance(value, bool):
        raise TopicIdRepairError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


def _steps_after(location: DrainLocation, step_id: str) -> list[Mapping[str, Any]]:
    steps = location.read_json(PLAN_FILE)["steps"]
    ids = [s["id"] for s in steps]
    return steps[ids.index(step_id) + 1 :] if step_id in ids else []


def _controller_epoch(hook: KafkaZooKeeperHook) -> int | None:
    try:
        data, _ = hook.get_znode(znodes.CONTROLLER_EPOCH)
    except ZnodeNotFoundError:
        return None
    return znodes.ControllerEpoch.decode(data, znodes.CONTROLLER_EPOCH).epoch


class TopicIdRepairVerifyOperator(RunVerifyOperator):
    """After the repair: the audit on a fresh snapshot and inventory reports no topic-id finding for the
    planned topics, and their partitions have leaders and full ISRs; writes ``verify.json`` and ``report.txt``.

    :param plan_dir: the plan's folder.
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote store (default ``[kafka_zk] artefacts_conn_id``).
    :param snapshot_path: the snapshot taken after the repair.
    :param inventory_path: the inventory taken after the repair.
    """

    def execute(self, context: Context) -> dict[str, Any]:
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = location.read_json(PLAN_FILE)
        topics = sorted(t for t, e in plan["topics"].items() if e.get("strategy"))
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        inputs = load_inputs(
            base,
            str(plan["cluster"]),
            snapshot=self.snapshot_path,
            previous="",
            inventory=self.inventory_path,
        )
        findings = [f for f in run_in_process(inputs) if f.topic in topics and f.check in TOPIC_ID_CHECKS]
        dirs = [ReplicaDir.from_inventory_row(r) for r in inputs.dir_rows]
        after = diagnose(inputs.state, dirs, set(inputs.coverage.get("inventoried") or []), topics)
        partitions = {(p.topic, p.partition): p for p in inputs.state.partitions()}
        unhealthy = topics_healthy(partitions, topics, inputs.state.live_broker_ids)
        offline = offline_for_stopped_brokers(partitions, topics, inputs.state.live_broker_ids)
        progress = location.read_json(PROGRESS_FILE) if location.exists(PROGRESS_FILE) else {}
        result = {
            "topics": topics,
            "cases_before": {t: plan["topics"][t]["case"] for t in topics},
            "cases_after": {d.topic: d.case.value for d in after},
            "findings": [f.to_row() for f in findings],
            "unhealthy": unhealthy,
            "offline_with_their_brokers": offline,
            "steps_completed": list(progress.get("completed") or {}),
            "snapshot": inputs.snapshot,
            "inventory": inputs.inventory,
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1, default=str))
        report = _report(plan, result, location)
        location.write(REPORT_FILE, report)
        for line in report.splitlines():
            log.info("%s", line)
        not_fixed = [t for t in topics if result["cases_after"].get(t) != TopicIdCase.CONSISTENT.value]
        if findings or unhealthy or not_fixed:
            raise RepairVerificationError(
                f"after the repair: {len(findings)} topic-id finding(s), not consistent: {not_fixed}, "
                f"unhealthy: {unhealthy[:5]} (see {location.path(REPORT_FILE)})"
            )
        return {"plan_dir": location.url, "report": location.path(REPORT_FILE), **result}


def _report(plan: Mapping[str, Any], result: Mapping[str, Any], location: DrainLocation) -> str:
    lines = [f"topicId repair of {plan['cluster']}: {location.url}"]
    for topic in result["topics"]:
        lines.append(
            f"- {topic}: {result['cases_before'][topic]} -> {result['cases_after'].get(topic, '?')} "
            f"({plan['topics'][topic]['strategy']})"
        )
    lines.append(f"steps completed: {', '.join(result['steps_completed']) or 'none'}")
    if result["findings"]:
        lines.append("audit still reports:")
        lines.extend(f"  {f['check']}: {f['summary']}" for f in result["findings"])
    if result["unhealthy"]:
        lines.append("not healthy yet: " + "; ".join(result["unhealthy"][:10]))
    if not result["findings"] and not result["unhealthy"]:
        lines.append(
            "audit: no topic-id finding for these topics; every partition with a running replica has a leader "
            "and every running replica is in the ISR"
        )
    if result["offline_with_their_brokers"]:
        lines.append(
            "offline until their brokers start (not this repair's doing): "
            + "; ".join(result["offline_with_their_brokers"][:10])
        )
    lines.append(f"rollback: {location.path(ROLLBACK_FILE)}" + (f", {location.path(ROLLBACK_FILES_FILE)}"))
    return "\n".join(lines) + "\n"
