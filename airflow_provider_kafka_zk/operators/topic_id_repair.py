"""KAFKA-14190 repair: plan from a fresh snapshot and inventory, execute through the step executor, verify.

Thin shells: the diagnosis, the plan and its steps are pure (:mod:`~airflow_provider_kafka_zk.kafka.
topic_id_repair`, :mod:`~airflow_provider_kafka_zk.kafka.steps`); carrying the steps out -- every
step preflighted before the first write, the topic-id writes in one multi-op, file copies and
removals, gated restarts, the lease renewed, progress recorded -- is
:mod:`~airflow_provider_kafka_zk.maintenance.topic_id_repair` on the step executor. Artefacts in
``<base>/<cluster>/topic-id-repair/<ts>/``: ``plan.json``, ``rollback.json`` (every znode's original
bytes and version and the command that puts them back), ``summary.txt``; while executing,
``progress.json``, ``files/broker-<id>/...`` with ``rollback-files.json`` (``file_reset`` only), the
session's change log; ``verify.json`` and ``report.txt`` at the end. Dry run by default.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import latest_snapshot, read_snapshot
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.kafka.steps import steps_from_dicts
from airflow_provider_kafka_zk.kafka.topic_id_repair import (
    PLAN_FORMAT,
    RepairPlanError,
    Strategy,
    TopicIdCase,
    describe_plan,
    diagnose,
    offline_for_stopped_brokers,
    plan_repair,
    rollback_record,
    topics_healthy,
)
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.maintenance.executor import PROGRESS_FILE
from airflow_provider_kafka_zk.maintenance.session import lease_ttl_seconds
from airflow_provider_kafka_zk.maintenance.topic_id_repair import (
    ROLLBACK_FILE,
    ROLLBACK_FILES_FILE,
    ClusterStateChangedError,
    RepairSettings,
    RestartGateError,
    TopicIdRepairError,
    TopicIdRepairRefusedError,
    execute_repair_plan,
    read_health,
)
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.operators.approved_plan import approved_plan
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    DrainLocation,
    RunVerifyOperator,
    plan_identity,
    snapshot_identity,
)
from airflow_provider_kafka_zk.spark_jobs.audit import load_inputs, run_in_process

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

__all__ = [
    "ClusterStateChangedError",
    "RepairVerificationError",
    "RestartGateError",
    "TopicIdRepairError",
    "TopicIdRepairExecuteOperator",
    "TopicIdRepairPlanOperator",
    "TopicIdRepairRefusedError",
    "TopicIdRepairVerifyOperator",
    "describe_plan",
    "read_health",
    "repair_location",
]

PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.txt"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"
TOPIC_ID_CHECKS = (
    "topic-id-mismatch",
    "topic-id-missing-in-zookeeper",
    "topic-id-replicas-disagree",
)


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
        everything = diagnose(
            state, inputs.dirs, inventoried, sorted(set(state.topics) | set(requested or ()))
        )
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
                partitions={(p.topic, p.partition): p for p in state.partitions()},
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
        from airflow_provider_kafka_zk.kafka.undo import undo_record

        undo = undo_record(self.cluster, context.get("run_id"), getattr(context.get("ti"), "dag_id", None))
        location.write(
            ROLLBACK_FILE,
            json.dumps(rollback_record(plan.steps, identity.hosts, identity.chroot, undo), indent=1),
        )
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


class TopicIdRepairExecuteOperator(BaseOperator):
    """Hand a repair plan's steps to the step executor inside a maintenance session; resume after
    the last completed step. Every step is checked before the run's first write -- in the dry run
    too, which is the real run minus the writes.

    :param plan_dir: the plan's folder (``TopicIdRepairPlanOperator``'s ``plan_dir``).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: SSH connection for the broker hosts (``file_reset`` only).
    :param broker_hosts: broker id -> host overrides.
    :param server_properties_path: where server.properties is on a broker host.
    :param restart_command: ``file_reset``: the command that restarts the broker on its host, e.g.
        ``sudo systemctl restart kafka``; ``{broker_id}`` and ``{host}`` are replaced (shell-quoted).
        Rendered for every broker at the preflight: another placeholder refuses the run.
    :param dry_run: when true (default) check every step and log it; change nothing.
    :param health_timeout: seconds to wait for healthy partitions after the write / controller move.
    :param restart_timeout: seconds the restart command may run.
    :param gate_timeout: seconds a restarted broker has to pass its gate before the run stops.
    :param poll_interval: seconds between ZooKeeper checks while waiting.
    :param lease_ttl_s: how long the maintenance lease counts without renewal (default
        ``[kafka_zk] lease_ttl_s``, else 12 h); it is renewed at every step and while waiting.
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
        "lease_ttl_s",
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
        lease_ttl_s: float | str | None = None,
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
        self.lease_ttl_s = lease_ttl_s

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        seconds = {
            name: _positive_seconds(getattr(self, name), name)
            for name in ("health_timeout", "restart_timeout", "gate_timeout", "poll_interval")
        }
        ttl = None if self.lease_ttl_s in (None, "", "None") else lease_ttl_seconds(self.lease_ttl_s)
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = location.read_json(PLAN_FILE)
        if plan.get("format") != PLAN_FORMAT:
            raise TopicIdRepairError(f"{location.path(PLAN_FILE)} is not a topicId repair plan")
        try:
            steps = steps_from_dicts(plan["steps"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TopicIdRepairError(
                f"{location.path(PLAN_FILE)}: unreadable steps ({exc}): make a new plan"
            ) from None
        hosts = self.broker_hosts
        if isinstance(hosts, str):
            hosts = json.loads(hosts) if hosts.strip() not in ("", "None") else None
        settings = RepairSettings(
            kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
            ssh_conn_id=self.ssh_conn_id or None,
            broker_hosts=hosts or None,
            server_properties_path=self.server_properties_path or None,
            restart_command=self.restart_command,
            lease_ttl_s=ttl,
            **seconds,
        )
        result = execute_repair_plan(
            location.url,
            plan,
            steps,
            settings,
            run=RunIdentity.from_context(context, fallback_run_id=location.url),
            dry_run=dry_run,
            expected=plan_identity(plan, location.url),
            approval=approved_plan(self, context),  # a real run: the approved plan, unchanged, or nothing
        )
        return {
            "plan_dir": location.url,
            "dry_run": dry_run,
            "completed": list(result.completed),
            "ran": list(result.ran),
            "already_done": list(result.already_done),
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
        after = diagnose(inputs.state, inputs.dirs, set(inputs.coverage.get("inventoried") or []), topics)
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
    written = [name for name in (ROLLBACK_FILE, ROLLBACK_FILES_FILE) if location.exists(name)]
    if written:
        lines.append("rollback: " + ", ".join(location.path(name) for name in written))
    return "\n".join(lines) + "\n"
