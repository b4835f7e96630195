"""The ZooKeeper-to-KRaft migration as Airflow tasks: plan one phase forward or back, execute the
approved plan on the step executor, verify where the cluster stands afterwards.

Thin shells. The phase, the plan, its steps, its traps and the checks are pure
(:mod:`airflow_provider_kafka_zk.kafka.kraft_migration_phase`, ``..._plan``, ``..._traps``,
``..._checks``); reading every signal and carrying the steps out is
:mod:`airflow_provider_kafka_zk.maintenance.kraft_migration`. Artefacts in
``<base>/<cluster>/kraft-migration/<ts>/``: ``signals.json`` (what each signal said), ``rollback.json``
(the way back and what this run will replace), ``plan.json``, ``summary.txt``; while executing
``progress.json``, ``files/<role>-<id>/<path>`` (every file replaced, read back first),
``kept-files.json``, ``znodes-*.json`` (znodes saved before a delete), the session's change log;
``verify.json`` and ``report.txt`` at the end. Dry run by default.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation, plan_identity
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.clusters import default_artefacts_base, load_clusters
from airflow_provider_kafka_zk.kafka.kraft_migration_checks import ZooKeeperSecurity, compare, differences
from airflow_provider_kafka_zk.kafka.kraft_migration_config import ControllerNode, Quorum, QuorumStyle
from airflow_provider_kafka_zk.kafka.kraft_migration_phase import DUAL_WRITE, Phase, detect_phase
from airflow_provider_kafka_zk.kafka.kraft_migration_plan import (
    MIGRATION_FOLDER,
    SIGNALS_FILE,
    CommandTemplates,
    Direction,
    MigrationInputs,
    MigrationPlan,
    plan_migration,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_steps import MIGRATION_STEPS  # noqa: F401 - registers the kinds
from airflow_provider_kafka_zk.kafka.kraft_migration_traps import TrapInputs
from airflow_provider_kafka_zk.kafka.steps import steps_from_dicts
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.maintenance.executor import PROGRESS_FILE
from airflow_provider_kafka_zk.maintenance.kraft_migration import (
    ClusterSignals,
    KraftMigrationError,
    MigrationSettings,
    execute_migration_plan,
    host_hook,
    read_signals,
    wait_seconds,
)
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

log = logging.getLogger(__name__)

MIGRATION_DIR = MIGRATION_FOLDER
PLAN_FILE = "plan.json"
ROLLBACK_FILE = "rollback.json"
SUMMARY_FILE = "summary.txt"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"
_KEPT = re.compile(
    r"(?P<name>.+)\.kafka-zk-before-(?P<kind>migration-mode|kraft|finalize|provision|revert)-(?P<run>.+)\Z"
)


class KraftMigrationRefusedError(AirflowFailException):
    """The plan refuses (the message and ``summary.txt`` name why); nothing was changed."""


class KraftMigrationVerificationError(AirflowFailException):
    """After the run the cluster is not where the plan said it would be, or ZooKeeper and KRaft differ."""


def migration_location(base: str, cluster: str, ts: str) -> DrainLocation:
    """``<base>/<cluster>/kraft-migration/<ts>/``."""
    return DrainLocation("/".join([base.rstrip("/"), cluster, MIGRATION_DIR, ts]))


def migration_settings(cluster: str, **overrides: Any) -> MigrationSettings:
    """The cluster file's entry as the migration needs it; refuses (naming the key) what it lacks."""
    settings = load_clusters().get(cluster)
    if settings is None:
        raise KraftMigrationError(
            f"cluster {cluster!r} is not in the cluster file: the migration needs its kraft_controllers, "
            "server_properties_path and command templates (dags/kafka_zk_clusters.toml)"
        )
    controllers = settings.get("kraft_controllers") or []
    if not controllers:
        raise KraftMigrationError(
            f"clusters.{cluster}.kraft_controllers is empty: name the KRaft controllers to provision"
        )
    path = settings.get("server_properties_path")
    if not path:
        raise KraftMigrationError(
            f"clusters.{cluster}.server_properties_path is not set: the migration writes each broker's file there"
        )
    nodes = tuple(
        ControllerNode(
            int(c["node_id"]),
            str(c["host"]),
            int(c.get("port", 9093)),
            str(c["config_path"]),
            str(c["log_dir"]),
            c.get("advertised_host"),
        )
        for c in controllers
    )
    quorum = Quorum(
        nodes,
        QuorumStyle(settings.get("kraft_quorum", "voters")),
        str(settings.get("kraft_controller_listener", "CONTROLLER")),
        str(settings.get("kraft_controller_security_protocol", "PLAINTEXT")),
        {
            str(k): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in (settings.get("kraft_controller_properties") or {}).items()
        },
    )
    commands = CommandTemplates(
        broker_restart=settings.get("broker_restart_command"),
        controller_start=settings.get("kraft_controller_start_command"),
        controller_stop=settings.get("kraft_controller_stop_command"),
        controller_restart=settings.get("kraft_controller_restart_command"),
        controller_format=settings.get("kraft_format_command"),
    )
    return MigrationSettings(
        cluster=cluster,
        kafka_zookeeper_conn_id=str(settings["kafka_zookeeper_conn_id"]),
        ssh_conn_id=str(settings["ssh_conn_id"]),
        server_properties_path=str(path),
        quorum=quorum,
        commands=commands,
        broker_hosts={int(b): str(h) for b, h in (settings.get("broker_hosts") or {}).items()},
        controller_logs={int(c["node_id"]): str(c["log_file"]) for c in controllers if c.get("log_file")},
        **overrides,
    )


def _kept_files(
    signals: ClusterSignals, hosts: Any, phase: Phase, direction: Direction
) -> dict[tuple[str, int], str]:
    """Files kept by earlier forward runs that a back run restores (the newest of the kind it needs)."""
    kind = {
        Phase.DUAL_WRITE_KRAFT_BROKERS: "kraft",
        Phase.ROLLING_TO_KRAFT: "kraft",
        Phase.FINALIZING: "finalize",
    }.get(phase, "migration-mode")
    if direction is not Direction.BACK:
        return {}
    out: dict[tuple[str, int], str] = {}
    nodes = [("broker", b, f.path) for b, f in signals.brokers.items()] + [
        ("controller", c, f.path) for c, f in signals.controllers.items()
    ]
    for role, node, path in nodes:
        if not path or (role == "broker" and signals.brokers[node].problem):
            continue
        directory, _, name = path.rpartition("/")
        try:
            listing = hosts.list_dir(node, directory or "/") or []
        except Exception as exc:
            log.warning("%s %d: kept files not listed (%s)", role, node, exc)
            continue
        candidates = sorted(
            e["name"]
            for e in listing
            if (m := _KEPT.match(e["name"]))
            and m["name"] == name
            and m["kind"] == kind
            and e.get("kind") == "file"
        )
        if candidates:
            (read,) = hosts.read_files(node, [f"{directory}/{candidates[-1]}"])
            if read.text is not None:
                out[(role, node)] = read.text
                log.info(
                    "%s %d: the file kept by an earlier run: %s/%s", role, node, directory, candidates[-1]
                )
    return out


def _release(signals: ClusterSignals, inventory_versions: Mapping[int, str]) -> KafkaVersion | None:
    known = []
    for text in inventory_versions.values():
        try:
            known.append(KafkaVersion.parse(text))
        except ValueError:
            continue
    if known:
        return min(known)
    ibps = {(f.properties or {}).get("inter.broker.protocol.version", "") for f in signals.brokers.values()}
    if ibps and all(i.startswith("3.9") for i in ibps):
        return KafkaVersion(
            3, 9, 0
        )  # no ZooKeeper-mode release after 3.9 (an IBP above the release is refused)
    return None


def _security(hook: KafkaZooKeeperHook) -> ZooKeeperSecurity:
    from airflow_provider_kafka_zk.operators.kraft_readiness import read_user_configs

    walk = hook.snapshot(
        include=("/kafka-acl", "/kafka-acl-extended", "/delegation_token"),
        progress_every=3600,
        in_memory=True,
    )
    return ZooKeeperSecurity.from_rows(((r.path, r.data) for r in walk.rows), read_user_configs(hook))


def _inventory_versions(inventory: str | None) -> dict[int, str]:
    """Each broker's release from the run's inventory (its running process's jars)."""
    if not inventory:
        return {}
    try:
        from airflow_provider_kafka_zk.spark_jobs import audit as audit_job

        files, _ = audit_job.inventory_files(inventory)
        _, summaries, _ = audit_job.read_inventory_rows(files, rows=False)
    except Exception as exc:  # the release then comes from the IBP, said in the plan
        log.warning("The inventory %s could not be read for the brokers' release: %s", inventory, exc)
        return {}
    return {
        int(b): str((s.get("facts") or {}).get("kafka_version"))
        for b, s in summaries.items()
        if (s.get("facts") or {}).get("kafka_version")
    }


def _readiness_blockers(readiness: Any) -> tuple[str, ...]:
    if not isinstance(readiness, Mapping):
        return ()
    report = readiness.get("report") or readiness.get("readiness")
    blockers = [str(b) for b in readiness.get("blockers") or ()]
    return tuple(f"{b} (see {report})" for b in blockers)


class KraftMigrationPlanOperator(BaseOperator):
    """Read every signal, name the phase, and plan one move forward or back.

    Reads only (ZooKeeper; each node's files, processes and the controllers' metadata log over SSH).
    Writes ``signals.json``, ``rollback.json``, ``plan.json`` and ``summary.txt``, then fails -- after
    writing them, so the dry run shows why -- when the signals disagree or the plan refuses.

    :param cluster: the cluster (its entry in the cluster file gives controllers and templates).
    :param direction: ``forward`` or ``back``.
    :param readiness: the readiness task's result (its blockers refuse a forward run from ZooKeeper mode).
    :param inventory_path: the run's inventory (the brokers' release, from their jars).
    :param plan_ts: the run's folder name (default: the run's key).
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote artefact store.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "direction",
        "base_path",
        "artefacts_conn_id",
        "readiness",
        "inventory_path",
        "plan_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        direction: str = "forward",
        base_path: str | None = None,
        artefacts_conn_id: str | None = None,
        readiness: Any = None,
        inventory_path: str | None = None,
        plan_ts: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.direction = direction
        self.base_path = base_path
        self.artefacts_conn_id = artefacts_conn_id
        self.readiness = readiness
        self.inventory_path = inventory_path
        self.plan_ts = plan_ts

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.hooks.kraft_migration_hosts import NodeHosts
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
        from airflow_provider_kafka_zk.maintenance.session import pin_zookeeper_identity

        try:
            direction = Direction(str(self.direction).strip().lower())
        except ValueError:
            raise KraftMigrationError(
                f"direction must be 'forward' or 'back', not {self.direction!r}"
            ) from None
        settings = migration_settings(str(self.cluster))
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        location = migration_location(base, str(self.cluster), _resolve_ts(self.plan_ts, context))
        with (
            KafkaZooKeeperHook(settings.kafka_zookeeper_conn_id) as hook,
            NodeHosts(host_hook(settings, settings.broker_hosts, hook)) as hosts,
        ):
            identity = pin_zookeeper_identity(hook)
            signals = read_signals(hook, hosts, settings, settings.broker_hosts)
            reading = detect_phase(
                signals.view,
                list(signals.brokers.values()),
                list(signals.controllers.values()),
                signals.disks,
            )
            location.write(SIGNALS_FILE, json.dumps(reading.to_dict(), indent=1))
            for line in reading.text().splitlines():
                log.info("%s", line)
            kept = _kept_files(signals, hosts, reading.phase, direction) if reading.phase is not None else {}
            security = _security(hook)
        state = signals.state
        release = _release(signals, _inventory_versions(self.inventory_path))
        traps = TrapInputs(
            release=release,
            pending_deletions=tuple(sorted(state.pending_deletions)),
            reassigning=tuple(f"{tp.topic}-{tp.partition}" for tp in state.reassigning_partitions),
            quota_entities=tuple(
                [
                    f"users/{n}"
                    for n in (security.users or state.configs.users)
                    if _has_quota(security.users.get(n) or state.configs.users.get(n) or {})
                ]
                + [f"clients/{n}" for n in state.configs.clients]
            ),
            acl_entries=len(security.acls),
            scram_credentials=sum(1 for c in security.users.values() for k in c if k.startswith("SCRAM-")),
            stale_migration=reading.stale_migration,
            migration_null=signals.view.migration == b"",
        )
        ibp = next(
            (
                f.properties.get("inter.broker.protocol.version")
                for f in signals.brokers.values()
                if f.properties and f.properties.get("inter.broker.protocol.version")
            ),
            None,
        ) or (f"{release.major}.{release.minor}" if release else None)
        from airflow_provider_kafka_zk.kafka.kraft_migration_health import zookeeper_only_features

        inputs = MigrationInputs(
            cluster=str(self.cluster),
            reading=reading,
            zookeeper=signals.view,
            quorum=settings.quorum,
            commands=settings.commands,
            brokers=signals.brokers,
            controllers=signals.controllers,
            disks=signals.disks,
            traps=traps,
            run_key=location.url.rstrip("/").rsplit("/", 1)[1],
            kept=kept,
            inter_broker_protocol_version=ibp,
            readiness_blockers=_readiness_blockers(self.readiness),
            zookeeper_only=zookeeper_only_features(
                {("broker", b): dict(f.properties or {}) for b, f in signals.brokers.items()}
                | {("controller", c): dict(f.properties or {}) for c, f in signals.controllers.items()}
            ),
        )
        plan = plan_migration(inputs, direction)
        record = {
            **plan.to_dict(),
            "identity": identity.to_dict(),
            "broker_hosts": {str(b): h for b, h in sorted(signals.broker_hosts.items())},
            "controllers": [c.__dict__ for c in settings.quorum.controllers],
            "signals": reading.to_dict(),
            "release": str(release) if release else None,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        location.write(ROLLBACK_FILE, json.dumps(rollback_record(plan, signals), indent=1))
        location.write(PLAN_FILE, json.dumps(record, indent=1, default=str))
        summary = reading.text() + "\n\n" + plan.summary()
        location.write(SUMMARY_FILE, summary)
        for line in plan.summary().splitlines():
            log.info("%s", line)
        if plan.refused:
            raise KraftMigrationRefusedError(
                f"{self.cluster}: {plan.title}: refused: "
                + "; ".join(plan.refusals)
                + f" (plan: {location.path(SUMMARY_FILE)})"
            )
        return {
            "plan_dir": location.url,
            "from_phase": plan.from_phase.value if plan.from_phase else None,
            "to_phase": plan.to_phase.value if plan.to_phase else None,
            "steps": len(plan.steps),
            "title": plan.title,
        }


def _has_quota(config: Mapping[str, str]) -> bool:
    return any(not k.startswith("SCRAM-") for k in config)


def rollback_record(plan: MigrationPlan, signals: ClusterSignals) -> dict[str, Any]:
    """How to undo this run: the opposite run of this DAG, the files it replaces (kept beside them
    and copied into this folder), the znodes it deletes (saved before)."""
    from airflow_provider_kafka_zk.kafka.kraft_migration_steps import (
        ControllerHandback,
        MigrationZnodeDelete,
        NodeConfigWrite,
    )

    files = [
        {
            "role": s.role,
            "node_id": s.node_id,
            "host": s.host,
            "path": s.path,
            "kept_as": s.keep_as if s.old_sha256 else None,
            "old_sha256": s.old_sha256,
        }
        for s in plan.steps
        if isinstance(s, NodeConfigWrite)
    ]
    znodes_deleted = [
        s.describe() for s in plan.steps if isinstance(s, MigrationZnodeDelete | ControllerHandback)
    ]
    opposite = "back" if plan.direction is Direction.FORWARD else "forward"
    return {
        "format": "kafka-zk-kraft-migration-rollback",
        "cluster": plan.cluster,
        "from_phase": plan.from_phase.value if plan.from_phase else None,
        "to_phase": plan.to_phase.value if plan.to_phase else None,
        "way_back": (
            "none: a finalized migration cannot be reverted"
            if plan.to_phase is Phase.FINALIZED
            else f"trigger kafka_zk_kraft_migration with direction={opposite} for cluster {plan.cluster}"
        ),
        "files_replaced": files,
        "znodes_deleted": znodes_deleted,
        "migration_znode_now": None
        if signals.view.migration is None
        else signals.view.migration.decode("utf-8", "replace"),
        "controller_znode_now": None
        if signals.view.controller is None
        else signals.view.controller.decode("utf-8", "replace"),
    }


class KraftMigrationExecuteOperator(BaseOperator):
    """Hand the plan's steps to the step executor inside a maintenance session (the migration's own
    writer); resume after the last completed step. Every step is checked before the run's first
    write -- in the dry run too, which is the real run minus the writes.

    :param plan_dir: the plan's folder.
    :param cluster: the cluster (its entry in the cluster file).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection (must be the cluster file's).
    :param ssh_conn_id: the SSH connection of its hosts.
    :param dry_run: when true (default) check every step and log it; change nothing.
    :param command_timeout: seconds a command template may run.
    :param gate_timeout: seconds a node has to pass its gate before the run stops.
    :param wait_timeout: seconds to wait for the migration to reach a state.
    :param poll_interval: seconds between checks while waiting.
    :param artefacts_conn_id: the Airflow connection of a remote artefact store (as the plan's).
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "cluster",
        "artefacts_conn_id",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "dry_run",
        "command_timeout",
        "gate_timeout",
        "wait_timeout",
        "poll_interval",
    )
    ui_color = "#f5b7b1"

    def __init__(
        self,
        *,
        plan_dir: str,
        cluster: str,
        kafka_zookeeper_conn_id: str,
        ssh_conn_id: str,
        dry_run: bool | str = True,
        command_timeout: float | str = 600.0,
        gate_timeout: float | str = 900.0,
        wait_timeout: float | str = 600.0,
        poll_interval: float | str = 2.0,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.cluster = cluster
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.dry_run = dry_run
        self.command_timeout = command_timeout
        self.gate_timeout = gate_timeout
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        timing = {
            "command_timeout": wait_seconds(self.command_timeout, "command_timeout"),
            "gate_timeout": wait_seconds(self.gate_timeout, "gate_timeout"),
            "wait_timeout": wait_seconds(self.wait_timeout, "wait_timeout"),
            "poll_interval": wait_seconds(self.poll_interval, "poll_interval"),
        }
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = location.read_json(PLAN_FILE)
        if plan.get("cluster") != self.cluster:
            raise KraftMigrationError(
                f"{location.path(PLAN_FILE)} is a plan for {plan.get('cluster')!r}, not {self.cluster!r}"
            )
        settings = migration_settings(str(self.cluster), **timing)
        if (settings.kafka_zookeeper_conn_id, settings.ssh_conn_id) != (
            self.kafka_zookeeper_conn_id,
            self.ssh_conn_id,
        ):
            raise KraftMigrationError(
                f"the connections given ({self.kafka_zookeeper_conn_id}, {self.ssh_conn_id}) are not the cluster file's for "
                f"{self.cluster} ({settings.kafka_zookeeper_conn_id}, {settings.ssh_conn_id}): refusing"
            )
        if plan.get("refusals"):
            raise KraftMigrationRefusedError(f"the plan refuses: {'; '.join(plan['refusals'])}")
        steps = steps_from_dicts(plan.get("steps") or [])
        result = execute_migration_plan(
            location.url,
            plan,
            steps,
            settings,
            run=RunIdentity.from_context(context, fallback_run_id=location.url),
            dry_run=dry_run,
            expected=plan_identity(plan, location.url),
            approval=approved_plan(self, context),
        )
        return {
            "plan_dir": location.url,
            "dry_run": dry_run,
            "completed": list(result.completed),
            "ran": list(result.ran),
            "already_done": list(result.already_done),
        }


class KraftMigrationVerifyOperator(BaseOperator):
    """After a real run: every signal read again -- the phase must be the plan's target -- and, while
    dual-writing, ZooKeeper compared with the KRaft metadata; stray partition directories named from
    the audit of a fresh snapshot and inventory. Writes ``verify.json`` and ``report.txt``.

    :param plan_dir: the plan's folder.
    :param cluster: the cluster.
    :param findings: the audit's findings of the snapshot and inventory taken after the run.
    :param artefacts_conn_id: the Airflow connection of a remote artefact store.
    """

    template_fields: Sequence[str] = ("plan_dir", "cluster", "artefacts_conn_id", "findings")
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        plan_dir: str,
        cluster: str,
        findings: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.cluster = cluster
        self.findings = findings
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.hooks.kraft_migration_hosts import NodeHosts
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = location.read_json(PLAN_FILE)
        settings = migration_settings(str(self.cluster))
        hosts_by_broker = {int(b): h for b, h in (plan.get("broker_hosts") or {}).items()}
        with KafkaZooKeeperHook(settings.kafka_zookeeper_conn_id) as hook:
            with NodeHosts(host_hook(settings, hosts_by_broker, hook)) as hosts:
                signals = read_signals(hook, hosts, settings, hosts_by_broker)
            security = _security(hook)
        reading = detect_phase(
            signals.view, list(signals.brokers.values()), list(signals.controllers.values()), signals.disks
        )
        image = signals.image()
        checks = []
        if reading.phase in DUAL_WRITE and image:
            release = KafkaVersion.parse(plan["release"]) if plan.get("release") else None
            checks = compare(signals.state, image, security, release)
        stray, findings_unread = _stray_findings(self.findings)
        progress = location.read_json(PROGRESS_FILE) if location.exists(PROGRESS_FILE) else {}
        expected = plan.get("to_phase")
        result = {
            "expected_phase": expected,
            "phase": reading.phase.value if reading.phase else None,
            "refusal": reading.refusal,
            "signals": reading.to_dict(),
            "dual_write_checks": [c.to_dict() for c in checks],
            "stray_directories": stray,
            "findings_unread": findings_unread,
            "steps_completed": list(progress.get("completed") or {}),
            "migration_znode": None
            if signals.view.migration is None
            else signals.view.migration.decode("utf-8", "replace"),
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1, default=str))
        report = _report(plan, result, location)
        location.write(REPORT_FILE, report)
        for line in report.splitlines():
            log.info("%s", line)
        problems = []
        if result["phase"] != expected:
            problems.append(
                f"phase {result['phase'] or 'unknown'} ({reading.refusal or ''}), the plan's target is {expected}"
            )
        problems += [f"{c.what}: {c.evidence}" for c in differences(checks)]
        if expected == Phase.ZOOKEEPER.value and signals.view.migration is not None:
            problems.append("/migration is still there after a revert (KAFKA-17146)")
        if problems:
            raise KraftMigrationVerificationError(
                f"after the run: {'; '.join(problems)} (see {location.path(REPORT_FILE)})"
            )
        return {"plan_dir": location.url, "report": location.path(REPORT_FILE), "phase": result["phase"]}


STRAY_CHECKS = ("stray-dirs", "orphan-partition-dirs", "replica-dir-not-assigned")
"""The audit's checks whose findings the verify step names as stray partition directories."""


def _stray_findings(findings: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """The audit's stray-directory findings in ``findings`` (a findings folder) and, when the folder
    could not be read, why (the report says so rather than "none")."""
    if not findings:
        return [], None
    try:
        from airflow_provider_kafka_zk.spark_jobs import audit as audit_job

        rows = audit_job.read_findings(findings)
    except Exception as exc:  # the verify step still reports the phase and the dual-write checks
        log.warning("Findings %s not read: %s", findings, exc)
        return [], f"{findings} not read: {exc}"
    return [
        {
            "check": f.check,
            "broker_id": f.broker_id,
            "topic": f.topic,
            "partition": f.partition,
            "path": f.path,
            "summary": f.summary,
        }
        for f in rows
        if f.check in STRAY_CHECKS
    ], None


def _report(plan: Mapping[str, Any], result: Mapping[str, Any], location: DrainLocation) -> str:
    lines = [
        f"KRaft migration of {plan['cluster']}: {plan.get('title')} ({plan.get('direction')})",
        f"phase before: {plan.get('from_phase')}; expected after: {result['expected_phase']}; now: {result['phase'] or 'unknown'}",
        f"steps completed: {len(result['steps_completed'])} of {len(plan.get('steps') or [])}",
    ]
    if result["refusal"]:
        lines.append(f"signals: {result['refusal']}")
    for check in result["dual_write_checks"]:
        lines.append(f"ZooKeeper vs KRaft, {check['what']}: {check['status']}: {check['evidence']}")
    for finding in result["stray_directories"]:
        lines.append(f"stray partition directories ({finding['check']}): {finding['summary']}")
    if result.get("findings_unread"):
        lines.append(
            f"stray partition directories: unknown, the audit's findings {result['findings_unread']}"
        )
    if result["expected_phase"] == Phase.ZOOKEEPER.value:
        lines.append(
            "/migration: "
            + (
                "gone (a later attempt loads everything again)"
                if result["migration_znode"] is None
                else f"STILL THERE: {result['migration_znode']}"
            )
        )
    lines.append(f"artefacts: {location.url}")
    return "\n".join(lines) + "\n"
