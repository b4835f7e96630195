"""The deletion cleanup as an approved change (the ``kafka_zk_deletion_cleanup`` DAG): plan, approve,
execute the stored plan, verify.

Thin shells around :mod:`airflow_provider_kafka_zk.maintenance.deletion_cleanup` (the session, the
step executor) and the pure :mod:`airflow_provider_kafka_zk.kafka.deletion_cleanup` (the plan, its
documents, the summary a person approves, the comparison with the cluster now)::

    plan = DeletionCleanupPlanOperator(task_id="plan", cluster="prod", topics=["old-logs"], ...)
    approve = PlanApprovalOperator(task_id="approve", plan_dir=PLAN_DIR, cluster="prod", dry_run=False)
    execute = DeletionCleanupExecuteOperator(task_id="execute", plan_dir=PLAN_DIR, dry_run=False, ...)
    verify = DeletionCleanupVerifyOperator(task_id="verify", plan_dir=PLAN_DIR, ...)
    plan >> approve >> execute >> verify

Artefacts in ``<base>/<cluster>/deletion-cleanup/<run key>/``: ``rollback.json`` (every move and every
config znode's bytes and version; written and read back first), ``plan.json``, ``summary.txt``;
while executing ``progress-cleanup.json``, ``rollback/`` (the list of moves and the znodes, each
written and read back before the change), the session's change log and ``cleanup.json``;
``verify.json`` and ``report.txt`` at the end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation
from airflow_provider_kafka_zk.artefacts.files import validate_cluster_name
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.store import write_and_verify
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.broker_host import DEFAULT_PYTHON_INTERPRETERS
from airflow_provider_kafka_zk.kafka.deletion import DEFAULT_DELETE_MARGIN_MS
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.operators._run import resolve_ts
from airflow_provider_kafka_zk.operators.deletion import validate_topics

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

DAG_ID = "kafka_zk_deletion_cleanup"
FOLDER = "deletion-cleanup"
PLAN_FILE = "plan.json"
ROLLBACK_FILE = "rollback.json"
SUMMARY_FILE = "summary.txt"
CLEANUP_FILE = "cleanup.json"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"


class DeletionCleanupError(AirflowFailException):
    """The cleanup's inputs or artefacts cannot be used (the message names which)."""


class DeletionCleanupNotDoneError(AirflowFailException):
    """After the cleanup, not every planned topic is deleted everywhere (``report.txt`` says what is left)."""


def _hosts(value: Any) -> dict[str, str] | None:
    """``broker_hosts`` as rendered (a mapping, JSON text, or empty)."""
    if value in (None, "", "None"):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise DeletionCleanupError(
                f"broker_hosts must be a {{broker id: host}} mapping, not {value!r}"
            ) from None
    if not isinstance(value, Mapping):
        raise DeletionCleanupError(f"broker_hosts must be a {{broker id: host}} mapping, not {value!r}")
    return {str(b): str(h) for b, h in value.items()}


class _CleanupTask(BaseOperator):
    """What every task of the cleanup shares: how it reaches the cluster and its broker hosts (the
    deletion check's settings) and the artefact store.

    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: the broker hosts' SSH connection.
    :param broker_hosts: ``{broker id: host}`` for brokers not registered (stopped).
    :param server_properties_path: ``server.properties`` on the hosts (``{broker_id}`` allowed).
    :param known_hosts: extra known_hosts files (host keys are always verified).
    :param connect_timeout: SSH connect timeout in seconds (default: the connection's).
    :param command_timeout: each remote command's limit in seconds.
    :param python_interpreters: interpreters tried on the hosts, in order.
    :param delete_dir_margin: how far past its broker's own deletion schedule a ``-delete`` directory
        still counts as pending rather than left over (as the deletion verifier's).
    :param artefacts_conn_id: the connection of a remote artefact store.
    """

    template_fields: Sequence[str] = (
        "artefacts_conn_id",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
    )

    def __init__(
        self,
        *,
        kafka_zookeeper_conn_id: str,
        ssh_conn_id: str,
        broker_hosts: Mapping[int | str, str] | str | None = None,
        server_properties_path: str | None = None,
        known_hosts: Sequence[str] = (),
        connect_timeout: float | None = None,
        command_timeout: float = 900.0,
        python_interpreters: Sequence[str] = DEFAULT_PYTHON_INTERPRETERS,
        delete_dir_margin: float | timedelta = timedelta(milliseconds=DEFAULT_DELETE_MARGIN_MS),
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.python_interpreters = python_interpreters
        self.delete_dir_margin = delete_dir_margin
        self.artefacts_conn_id = artefacts_conn_id

    def settings(self, expected_broker_ids: Any = ()) -> dict[str, Any]:
        """JSON-safe settings of one deletion check (connection ids only, no secrets)."""
        margin = self.delete_dir_margin
        seconds = margin.total_seconds() if isinstance(margin, timedelta) else float(margin)
        expected = expected_broker_ids
        if isinstance(expected, str):
            expected = json.loads(expected) if expected.strip() not in ("", "None") else ()
        return {
            "kafka_zookeeper_conn_id": self.kafka_zookeeper_conn_id,
            "ssh_conn_id": self.ssh_conn_id,
            "broker_hosts": _hosts(self.broker_hosts) or {},
            "server_properties_path": None
            if self.server_properties_path in (None, "", "None")
            else self.server_properties_path,
            "known_hosts": list(self.known_hosts),
            "connect_timeout": self.connect_timeout,
            "command_timeout": self.command_timeout,
            "python_interpreters": list(self.python_interpreters),
            "expected_broker_ids": sorted({int(b) for b in (expected or ())}),
            "requested": True,
            "delete_margin_ms": int(seconds * 1000),
        }

    def location(self, folder: str) -> DrainLocation:
        """The run's folder on the artefact store, bound to its connection."""
        return DrainLocation(artefacts_url(folder, self.artefacts_conn_id or None))


class DeletionCleanupPlanOperator(_CleanupTask):
    """Plan the cleanup of deleted topics' leftovers, checked as its dry run; store it for approval.

    A fresh deletion verdict of each topic (ZooKeeper and every broker disk); for the INCOMPLETE ones
    every leftover directory to move into a quarantine on its broker host and every leftover
    ``/config/topics/<t>`` to delete, per broker, with the cluster identity and why each is safe,
    and what is left alone and why (a live-named directory under a running broker, a topic that came
    back). Checked as the real run would before its first write: the cluster pinned, every broker
    host to be touched pinned by its ``meta.properties``, every path rule, and the host script's own
    dry run on each broker -- a directory a host would refuse fails the plan. Writes
    ``rollback.json`` (read back), ``plan.json`` and ``summary.txt``; nothing on the cluster. How it
    reaches the cluster: the parameters of the execute step (:class:`DeletionCleanupExecuteOperator`).

    :param cluster: the cluster's name (cluster file entry, artefact folder).
    :param topics: the deleted topics to clean up (list or comma-separated text; at least one).
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param quarantine_dir: absolute quarantine root on the hosts (default ``<log dir>/../kafka-quarantine``).
    :param allow_running_broker_orphans: also move live-named directories of a running broker.
    :param expected_broker_ids: brokers that must be read before a topic counts as deleted everywhere.
    :param run_ts: the run's folder name (default: the run key).
    """

    template_fields: Sequence[str] = (
        *_CleanupTask.template_fields,
        "cluster",
        "topics",
        "base_path",
        "quarantine_dir",
        "allow_running_broker_orphans",
        "expected_broker_ids",
        "run_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        topics: Sequence[str] | str,
        base_path: str | None = None,
        quarantine_dir: str | None = None,
        allow_running_broker_orphans: bool | str = False,
        expected_broker_ids: Iterable[int] | str = (),
        run_ts: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.topics = topics
        self.base_path = base_path
        self.quarantine_dir = quarantine_dir
        self.allow_running_broker_orphans = allow_running_broker_orphans
        self.expected_broker_ids = expected_broker_ids
        self.run_ts = run_ts

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.maintenance.deletion_cleanup import plan_deletion_cleanup

        allow = parse_safety_flags(allow_running_broker_orphans=self.allow_running_broker_orphans)[
            "allow_running_broker_orphans"
        ]
        topics = validate_topics(self.topics if self.topics not in (None, "None") else [])
        if not topics:
            raise DeletionCleanupError("topics: name at least one deleted topic whose leftovers to clean up")
        quarantine = None if self.quarantine_dir in (None, "", "None") else str(self.quarantine_dir)
        ts = resolve_ts(self.run_ts, context)
        validate_cluster_name(str(self.cluster))
        base = self.location(self.base_path or default_artefacts_base()).url
        location = DrainLocation("/".join([base.rstrip("/"), str(self.cluster), FOLDER, ts]))
        planned = plan_deletion_cleanup(
            self.settings(self.expected_broker_ids),
            topics,
            cluster=str(self.cluster),
            location=location.url,
            ts=ts,
            run=RunIdentity.from_context(context, fallback_run_id=location.url),
            quarantine_dir=quarantine,
            allow_running_broker_orphans=allow,
        )
        write_and_verify(location.path(ROLLBACK_FILE), json.dumps(planned.rollback, indent=1).encode())
        location.write(PLAN_FILE, json.dumps(planned.plan, indent=1))
        location.write(SUMMARY_FILE, planned.summary)
        for line in planned.summary.splitlines():
            log.info("%s", line)
        steps = len(planned.plan["steps"])
        return {"plan_dir": location.url, "steps": steps, "topics": topics, "nothing_to_clean": steps == 0}


class DeletionCleanupExecuteOperator(_CleanupTask):
    """Carry out the stored (and, where the cluster requires it, approved) cleanup plan on the step
    executor; a dry run checks every step and logs it. Refuses when the cluster moved since the plan
    (:class:`~airflow_provider_kafka_zk.maintenance.deletion_cleanup.CleanupPlanOutdatedError`), and
    -- through its maintenance session's approval rule -- when the plan was not approved, was changed
    since, or the connection reaches another cluster than the plan's. Resumes after the last completed
    step. Writes ``cleanup.json``.

    :param plan_dir: the plan's folder (``DeletionCleanupPlanOperator``'s ``plan_dir``).
    :param dry_run: check every step and change nothing (the default).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: the broker hosts' SSH connection.
    :param broker_hosts: ``{broker id: host}`` for brokers not registered (stopped).
    :param server_properties_path: ``server.properties`` on the hosts (``{broker_id}`` allowed).
    (The SSH limits and the artefact store: as the base's.)
    """

    template_fields: Sequence[str] = (*_CleanupTask.template_fields, "plan_dir", "dry_run")
    ui_color = "#fadbd8"

    def __init__(self, *, plan_dir: str, dry_run: bool | str = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.dry_run = dry_run

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.maintenance.deletion_cleanup import execute_deletion_cleanup
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        location = self.location(str(self.plan_dir))
        plan = location.read_json(PLAN_FILE)
        try:
            report = execute_deletion_cleanup(
                location.url,
                plan,
                self.settings(),
                run=RunIdentity.from_context(context, fallback_run_id=location.url),
                dry_run=dry_run,
                approval=approved_plan(self, context),  # a real run: the approved plan, unchanged, or nothing
            )
        except ValueError as exc:  # an unreadable plan.json
            raise DeletionCleanupError(f"{location.path(PLAN_FILE)}: {exc}: make a new plan") from None
        if not dry_run:
            location.write(CLEANUP_FILE, json.dumps(report, indent=1))
        moved = sum(1 for d in report["directories"] if d.get("status") == "moved")
        deleted = sum(1 for z in report["znodes"] if z.get("status") == "deleted")
        self.log.info(
            "%s: %d director(ies) moved, %d config znode(s) deleted",
            "DRY RUN (nothing changed)" if dry_run else "Cleanup done",
            moved,
            deleted,
        )
        failed = [d for d in report["directories"] if d.get("status") in ("failed", "refused")]
        if failed and not dry_run:
            raise DeletionCleanupNotDoneError(
                f"{len(failed)} director(ies) were not quarantined (see {location.path(CLEANUP_FILE)}): "
                + "; ".join(
                    f"broker {d['broker_id']} {d.get('source', '')}: {d['status']} ({d.get('detail', '')})"
                    for d in failed[:10]
                )
            )
        return {"plan_dir": location.url, "dry_run": dry_run, "moved": moved, "deleted": deleted}


class DeletionCleanupVerifyOperator(_CleanupTask):
    """The deletion verdicts of the plan's topics after the cleanup: every one must be deleted
    everywhere (every expected broker's disk read). Writes ``verify.json`` and ``report.txt``; fails
    naming what is left. How it reaches the cluster: as :class:`DeletionCleanupExecuteOperator`.

    :param plan_dir: the plan's folder.
    """

    template_fields: Sequence[str] = (*_CleanupTask.template_fields, "plan_dir")
    ui_color = "#d6eaf8"

    def __init__(self, *, plan_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_report
        from airflow_provider_kafka_zk.triggers.deletion_check import run_check

        location = self.location(str(self.plan_dir))
        plan = location.read_json(PLAN_FILE)
        settings = {**self.settings(), "cluster_id": (plan.get("identity") or {}).get("cluster_id")}
        check = run_check(settings, list(plan["topics"]))
        after = check.to_dicts()
        problems = [v["description"] for v in after if not v["deleted_everywhere"]]
        cleanup = location.read_json(CLEANUP_FILE) if location.exists(CLEANUP_FILE) else None
        location.write(
            VERIFY_FILE, json.dumps({"ok": not problems, "problems": problems, "verdicts": after}, indent=1)
        )
        report = cleanup_report(plan, cleanup, after, problems)
        location.write(REPORT_FILE, report)
        self.log.info("%s", report)
        if problems:
            raise DeletionCleanupNotDoneError(
                f"not every topic is deleted everywhere after the cleanup ({len(problems)}): "
                + "; ".join(problems[:10])
                + f" (report: {location.path(REPORT_FILE)})"
            )
        return {"ok": True, "report": location.path(REPORT_FILE), "verify": location.path(VERIFY_FILE)}


__all__ = [
    "DAG_ID",
    "DeletionCleanupError",
    "DeletionCleanupExecuteOperator",
    "DeletionCleanupNotDoneError",
    "DeletionCleanupPlanOperator",
    "DeletionCleanupVerifyOperator",
]
