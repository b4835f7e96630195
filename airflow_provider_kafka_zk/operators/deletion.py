"""Topic-deletion verification: did the deletion really happen everywhere, and if not, why.

``kafka-topics --delete`` answers "marked for deletion" and nothing may happen for days. This
operator gives every topic a verdict from the one shared rule (:mod:`kafka.deletion`) over
ZooKeeper and every broker's disk, waits (deferrable) until each verdict is settled, and fails at
the timeout with the verdicts, so Airflow's retries and alerts apply::

    verify = TopicDeletionVerifyOperator(
        task_id="verify_deletions", cluster="prod", base_path="s3://kafka-artefacts",
        kafka_zookeeper_conn_id="zk_prod", ssh_conn_id="kafka_hosts",
        topics=["old-logs"],            # or None: every topic with a /admin/delete_topics marker
        cleanup=True, dry_run=True,     # dry_run=False moves leftovers into a quarantine
    )

Artefact: ``<base>/<cluster>/deletions/<ts>/verdicts.json`` (atomic), and before any znode is
removed ``rollback/znodes-<try>-<uuid>.json`` with the znodes' data and versions.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.hooks.broker_host import DEFAULT_PYTHON_INTERPRETERS
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
from airflow_provider_kafka_zk.triggers.deletion import (
    DeletionCheck,
    TopicDeletionTrigger,
    host_hook_from_kwargs,
    pending_deletion_topics,
    run_check,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TS = re.compile(r"[A-Za-z0-9][A-Za-z0-9T._:+-]*")
VERDICTS_FILE = "verdicts.json"


class TopicDeletionNotSettledError(AirflowException):
    """At the timeout some deletion was still blocked or in progress (retryable: Kafka may finish)."""


class TopicDeletionUnsuccessfulError(AirflowFailException):
    """Every verdict is settled, but not every topic is deleted everywhere (a person must act)."""


def validate_topics(topics: Iterable[Any] | str) -> list[str]:
    """Kafka-valid topic names, deduplicated in order (a comma-separated string is accepted)."""
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    return list(dict.fromkeys(znodes.validate_topic_name(t, "topics") for t in topics))


class TopicDeletionVerifyOperator(BaseOperator):
    """Verdict per topic (DELETED / IN_PROGRESS / BLOCKED / IGNORED / NOT_REQUESTED / INCOMPLETE + why).

    Waits (deferrable by default, every ``poll_interval`` s) until each topic is deleted everywhere
    or has a finished non-success verdict, for at most ``wait_timeout``. Brokers whose disks could
    not be read are named; a topic is never "deleted everywhere" without every expected broker
    (registered, assigned, in ``broker_hosts`` or ``expected_broker_ids``). Outcome:

    * every topic deleted everywhere: success, XCom = the verdicts;
    * settled, but some topic IGNORED / NOT_REQUESTED / INCOMPLETE: fails without retry
      (``fail_when_unsuccessful``), after the optional cleanup;
    * still BLOCKED / IN_PROGRESS (or coverage partial) at the timeout: fails, retryable.

    ``cleanup=True`` handles INCOMPLETE topics' leftovers: directories are moved into a quarantine
    on the same broker host, ``/config/topics/<t>`` is removed when the topic and its marker are
    gone (content saved first). Only a dry run unless ``dry_run=False``.
    """

    template_fields: Sequence[str] = (
        "topics",
        "cluster",
        "base_path",
        "run_ts",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "expected_broker_ids",
        "quarantine_dir",
    )
    ui_color = "#fde8e8"

    def __init__(
        self,
        *,
        cluster: str,
        base_path: str,
        kafka_zookeeper_conn_id: str,
        ssh_conn_id: str,
        topics: Sequence[str] | str | None = None,
        expected_broker_ids: Iterable[int] = (),
        broker_hosts: Mapping[int | str, str] | None = None,
        server_properties_path: str | None = None,
        known_hosts: Sequence[str] = (),
        connect_timeout: float | None = None,
        command_timeout: float = 900.0,
        python_interpreters: Sequence[str] = DEFAULT_PYTHON_INTERPRETERS,
        poll_interval: float = 30.0,
        wait_timeout: float | timedelta = timedelta(hours=1),
        deferrable: bool = True,
        cleanup: bool = False,
        dry_run: bool = True,
        quarantine_dir: str | None = None,
        fail_when_unsuccessful: bool = True,
        run_ts: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.base_path = base_path
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.topics = topics
        self.expected_broker_ids = expected_broker_ids
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.python_interpreters = python_interpreters
        self.poll_interval = float(poll_interval)
        self.wait_timeout = wait_timeout
        self.deferrable = deferrable
        self.cleanup = cleanup
        self.dry_run = dry_run
        self.quarantine_dir = quarantine_dir
        self.fail_when_unsuccessful = fail_when_unsuccessful
        self.run_ts = run_ts

    # ------------------------------------------------------------------ settings and paths
    def _settings(self, requested: bool = True) -> dict[str, Any]:
        """JSON-safe settings for a check (the trigger carries them; no secrets: only conn ids)."""
        return {
            "kafka_zookeeper_conn_id": self.kafka_zookeeper_conn_id,
            "ssh_conn_id": self.ssh_conn_id,
            "broker_hosts": {str(b): str(h) for b, h in (self.broker_hosts or {}).items()},
            "server_properties_path": self.server_properties_path,
            "known_hosts": list(self.known_hosts),
            "connect_timeout": self.connect_timeout,
            "command_timeout": self.command_timeout,
            "python_interpreters": list(self.python_interpreters),
            "expected_broker_ids": sorted({int(b) for b in (self.expected_broker_ids or ())}),
            "requested": requested,
        }

    def _ts(self, context: Context) -> str:
        value = self.run_ts or context.get("ts_nodash")
        if not value and context.get("dag_run") is not None:
            value = context["dag_run"].run_after.strftime("%Y%m%dT%H%M%S")
        value = str(value or datetime.now(UTC).strftime("%Y%m%dT%H%M%S"))
        if not _TS.fullmatch(value):
            raise ValueError(f"run_ts must be a plain timestamp name, not {value!r}")
        return value

    def _artefact_dir(self, ts: str) -> str:
        if not _NAME.fullmatch(self.cluster) or ".." in self.cluster:
            raise ValueError(f"cluster must be a plain name ([A-Za-z0-9._-]), not {self.cluster!r}")
        return "/".join([self.base_path.rstrip("/"), self.cluster, "deletions", ts])

    def _timeout_s(self) -> float:
        t = self.wait_timeout
        return t.total_seconds() if isinstance(t, timedelta) else float(t)

    # ------------------------------------------------------------------ execution
    def _resolve_topics(self) -> list[str]:
        if self.topics:
            return validate_topics(self.topics)
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            return pending_deletion_topics(hook)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        topics = self._resolve_topics()
        # A marker is proof that someone asked, so marker topics count as requested too.
        settings = self._settings(requested=True)
        if not topics:
            self.log.info("No topic to verify: none given and /admin/delete_topics holds no marker")
            return self._conclude(context, [], settings, None, completed_by="nothing_to_check")
        self.log.info("Verifying the deletion of %d topic(s): %s", len(topics), ", ".join(topics))
        deadline = time.time() + self._timeout_s()
        check = run_check(settings, topics)
        self._log_check(check)
        if check.all_settled:
            return self._conclude(context, topics, settings, check, completed_by="first_check")
        if self.deferrable:
            self.defer(
                trigger=TopicDeletionTrigger(
                    settings=settings, topics=topics, poll_interval=self.poll_interval, deadline=deadline
                ),
                method_name="execute_complete",
            )
        while not check.all_settled and time.time() < deadline:
            time.sleep(self.poll_interval)
            check = run_check(settings, topics)
            self._log_check(check)
        return self._conclude(context, topics, settings, check, completed_by="poll")

    def execute_complete(self, context: Context, event: dict[str, Any]) -> list[dict[str, Any]]:
        if event.get("status") == "error":
            raise TopicDeletionNotSettledError(f"could not check the deletions: {event.get('message')}")
        topics = [v["topic"] for v in event.get("verdicts", ())]
        self.log.info("Trigger fired (%s): %s", event.get("status"), event.get("message"))
        # Conclude on a fresh look: a cleanup must act on the state as it is now.
        settings = self._settings(requested=True)
        check = run_check(settings, topics)
        self._log_check(check)
        return self._conclude(context, topics, settings, check, completed_by=f"trigger:{event.get('status')}")

    def _log_check(self, check: DeletionCheck) -> None:
        for verdict in check.verdicts:
            level = logging.INFO if check.deleted_everywhere(verdict) else logging.WARNING
            self.log.log(level, "%s", check.describe(verdict))
        if check.not_inventoried:
            self.log.warning(
                "Coverage %s: broker disks not read: %s",
                check.coverage()["status"],
                "; ".join(f"broker {b}: {r}" for b, r in sorted(check.not_inventoried.items())),
            )

    # ------------------------------------------------------------------ conclusion
    def _conclude(
        self,
        context: Context,
        topics: Sequence[str],
        settings: Mapping[str, Any],
        check: DeletionCheck | None,
        *,
        completed_by: str,
    ) -> list[dict[str, Any]]:
        ts = self._ts(context)
        directory = self._artefact_dir(ts)
        verdicts = check.to_dicts() if check is not None else []
        record: dict[str, Any] = {
            "cluster": self.cluster,
            "ts": ts,
            "checked_at": datetime.now(UTC).isoformat(),
            "topics": list(topics),
            "completed_by": completed_by,
            "coverage": check.coverage() if check is not None else None,
            "verdicts": verdicts,
        }
        final = check
        if self.cleanup and check is not None:
            record["cleanup"] = self._cleanup(context, check, settings, ts, directory)
            if not self.dry_run and record["cleanup"]["actions_taken"]:
                final = run_check(settings, topics)
                record["verdicts_after_cleanup"] = final.to_dicts()
                self._log_check(final)
        outcome, message = self._outcome(final)
        record["outcome"] = outcome
        path = write_url_atomically(f"{directory}/{VERDICTS_FILE}", json.dumps(record, indent=1).encode())
        self.log.info("Wrote %s (outcome %s)", path, outcome)
        result = final.to_dicts() if final is not None else []
        if outcome != "deleted":
            ti = context.get("ti")
            if ti is not None:
                ti.xcom_push(key="verdicts", value=result)
        if outcome == "not_settled":
            raise TopicDeletionNotSettledError(message)
        if outcome == "unsuccessful" and self.fail_when_unsuccessful:
            raise TopicDeletionUnsuccessfulError(message)
        return result

    def _outcome(self, check: DeletionCheck | None) -> tuple[str, str]:
        if check is None or not check.verdicts:
            return "deleted", "nothing to verify"
        lines = "\n".join(check.describe(v) for v in check.verdicts)
        if not check.all_settled:
            return "not_settled", f"deletions not settled after {self._timeout_s():g}s:\n{lines}"
        if all(check.deleted_everywhere(v) for v in check.verdicts):
            return "deleted", lines
        return "unsuccessful", f"not every topic is deleted everywhere:\n{lines}"

    # ------------------------------------------------------------------ cleanup
    def _cleanup(
        self,
        context: Context,
        check: DeletionCheck,
        settings: Mapping[str, Any],
        ts: str,
        directory: str,
    ) -> dict[str, Any]:
        """Quarantine leftover dirs and remove leftover config znodes of INCOMPLETE topics."""
        from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove, quarantine_directories

        mode = "dry run" if self.dry_run else "ACTING"
        incomplete = [v for v in check.verdicts if v.verdict is Verdict.INCOMPLETE]
        report: dict[str, Any] = {
            "dry_run": self.dry_run,
            "directories": [],
            "znodes": [],
            "actions_taken": 0,
        }
        by_broker: dict[int, list[QuarantineMove]] = {}
        reappeared = self._topics_back_in_zookeeper([v.topic for v in incomplete])
        for verdict in incomplete:
            if verdict.topic in reappeared:
                # Re-created (or marked again) since the check: its directories may be live replicas now.
                self.log.warning("Cleanup refused for %s: %s", verdict.topic, reappeared[verdict.topic])
                report["directories"].extend(
                    {
                        "broker_id": d.broker_id,
                        "source": d.path,
                        "status": "refused",
                        "detail": reappeared[verdict.topic],
                    }
                    for d in check.leftovers(verdict)
                )
                continue
            for leftover in check.leftovers(verdict):
                by_broker.setdefault(leftover.broker_id, []).append(
                    QuarantineMove(leftover.log_dir, leftover.name, self.quarantine_dir)
                )
        host_hook = host_hook_from_kwargs(settings)
        for broker_id, moves in sorted(by_broker.items()):
            self.log.info(
                "Cleanup (%s): broker %d, %d director(ies) to quarantine", mode, broker_id, len(moves)
            )
            try:
                done = quarantine_directories(host_hook, broker_id, moves, ts=ts, dry_run=self.dry_run)
            except Exception as exc:
                self.log.error("Cleanup of broker %d failed: %s: %s", broker_id, type(exc).__name__, exc)
                report["directories"].append(
                    {"broker_id": broker_id, "status": "failed", "detail": f"{type(exc).__name__}: {exc}"}
                )
                continue
            for result in done["results"]:
                report["directories"].append({"broker_id": broker_id, "host": done["host"], **result})
                report["actions_taken"] += result["status"] == "moved"
            report.setdefault("listings", []).extend(
                {"broker_id": broker_id, "host": done["host"], **listing} for listing in done["listings"]
            )
        config_topics = [v.topic for v in incomplete if Cause.CONFIG_ZNODE_LEFT in v.causes]
        if config_topics:
            report["znodes"] = self._remove_config_znodes(context, config_topics, directory, report)
        return report

    def _topics_back_in_zookeeper(self, topics: Sequence[str]) -> dict[str, str]:
        """Topics whose znode or marker exists again right before a cleanup acts (topic -> why)."""
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        if not topics:
            return {}
        found = {}
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            client = hook.get_conn()
            for topic in topics:
                for path in (znodes.topic_path(topic), znodes.delete_topic_path(topic)):
                    if client.exists(path):
                        found[topic] = f"{path} exists again: the cluster is not in the state the verdict saw"
                        break
        return found

    def _remove_config_znodes(
        self, context: Context, topics: Sequence[str], directory: str, report: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """``/config/topics/<t>`` of topics gone from /brokers/topics without a marker: saved, then versioned delete."""
        from airflow_provider_kafka_zk.hooks.zookeeper import (
            DeleteOp,
            KafkaZooKeeperHook,
            ZnodeNotFoundError,
        )

        actions: list[dict[str, Any]] = []
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            client = hook.get_conn()
            saved: list[dict[str, Any]] = []
            for topic in topics:
                path = znodes.config_entity_path("topics", topic)
                if client.exists(znodes.topic_path(topic)) or client.exists(znodes.delete_topic_path(topic)):
                    actions.append(
                        {"path": path, "status": "refused", "detail": "the topic or its marker exists again"}
                    )
                    continue
                try:
                    data, stat = hook.get_znode(path)
                except ZnodeNotFoundError:
                    actions.append({"path": path, "status": "gone", "detail": "already removed"})
                    continue
                if stat.numChildren:
                    actions.append({"path": path, "status": "refused", "detail": "it has children"})
                    continue
                saved.append(
                    {
                        "path": path,
                        "topic": topic,
                        "data_base64": None if data is None else base64.b64encode(data).decode(),
                        "version": stat.version,
                        "ctime_ms": stat.ctime,
                        "mtime_ms": stat.mtime,
                    }
                )
            if not saved:
                return actions
            if self.dry_run:
                for entry in saved:
                    self.log.info(
                        "Cleanup (dry run): would delete %s at version %d", entry["path"], entry["version"]
                    )
                    actions.append(
                        {"path": entry["path"], "status": "would_delete", "version": entry["version"]}
                    )
                return actions
            ti = context.get("ti")
            try_number = getattr(ti, "try_number", None) or 0
            rollback = f"{directory}/rollback/znodes-{try_number}-{uuid.uuid4().hex[:8]}.json"
            write_url_atomically(
                rollback,
                json.dumps(
                    {
                        "target": hook.target_description(),
                        "saved_at": datetime.now(UTC).isoformat(),
                        "restore": "create each path with base64-decoded data_base64 (persistent)",
                        "znodes": saved,
                    },
                    indent=1,
                ).encode(),
            )
            report["rollback"] = rollback
            self.log.info("Saved %d znode(s) to %s before deleting them", len(saved), rollback)
            for entry in saved:
                try:
                    hook.multi([DeleteOp(entry["path"], entry["version"])])
                except Exception as exc:
                    self.log.error("Not deleted %s: %s", entry["path"], exc)
                    actions.append({"path": entry["path"], "status": "failed", "detail": str(exc)})
                    continue
                self.log.info("Deleted %s (was version %d)", entry["path"], entry["version"])
                actions.append({"path": entry["path"], "status": "deleted", "version": entry["version"]})
                report["actions_taken"] += 1
        return actions
