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

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.hooks.broker_host import DEFAULT_PYTHON_INTERPRETERS
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.deletion import DEFAULT_DELETE_MARGIN_MS
from airflow_provider_kafka_zk.maintenance import (
    ClusterIdentityError,
    MaintenanceRefusedError,
    parse_safety_flags,
    pin_zookeeper_identity,
)
from airflow_provider_kafka_zk.maintenance.deletion_cleanup import QuarantineRefusedError
from airflow_provider_kafka_zk.operators._run import run_key_of
from airflow_provider_kafka_zk.triggers.deletion import TopicDeletionTrigger
from airflow_provider_kafka_zk.triggers.deletion_check import (
    DeletionCheck,
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
    """Verdict per topic (DELETED / IN_PROGRESS / PENDING_DELETE_DELAY / BLOCKED / IGNORED / NOT_REQUESTED /
    INCOMPLETE + why).

    Waits (in the triggerer when ``deferrable``, every ``poll_interval`` s) until each topic is deleted everywhere
    or has a finished non-success verdict, for at most ``wait_timeout``. Brokers whose disks could
    not be read are named; a topic is never "deleted everywhere" without every expected broker
    (registered, assigned, in ``broker_hosts`` or ``expected_broker_ids``). Outcome:

    * every topic deleted everywhere: success, XCom = the verdicts;
    * settled, but some topic IGNORED / NOT_REQUESTED / INCOMPLETE: fails without retry
      (``fail_when_unsuccessful``), after the optional cleanup;
    * still BLOCKED / IN_PROGRESS / PENDING_DELETE_DELAY (``-delete`` directories the brokers have not
      reached on their own deletion schedule yet) or coverage partial at the timeout: fails, retryable.

    The connection must lead to a Kafka cluster (``/brokers/ids`` and ``/cluster/id``, as every
    mutation pins it): a chroot without one refuses (ClusterIdentityError) before any verdict.

    ``cleanup=True`` handles INCOMPLETE topics' leftovers: directories are moved into a quarantine
    on the same broker host, ``/config/topics/<t>`` is removed when the topic and its marker are
    gone (content saved first). Only a dry run unless ``dry_run=False``. The cleanup runs in a
    maintenance session: the cluster and every broker host it touches are pinned first (ZooKeeper
    ``/cluster/id`` against each meta.properties), the lease is taken, the list of moves is written
    and read back. A live-named (orphan) directory moves only when its broker is not running, unless
    ``allow_running_broker_orphans``. ``cleanup``, ``dry_run`` and ``allow_running_broker_orphans``
    accept only booleans or true/false text.

    :param cluster: the cluster's name (its artefact directory).
    :param base_path: artefact base, local directory or fsspec URL.
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param ssh_conn_id: Airflow ``ssh`` connection used for every broker host (its host is only a
        fallback: each broker's host comes from its registration or ``broker_hosts``).
    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection (broker
        registrations, deletion markers, topic znodes).
    :param broker_hosts: ``{broker id: host}`` for brokers that are not registered (stopped).
    :param server_properties_path: ``server.properties`` on the hosts (``{broker_id}`` allowed);
        default: read from the running ``kafka.Kafka`` process.
    :param topics: topics to verify (list or comma-separated text); default: every
        ``/admin/delete_topics`` marker.
    :param expected_broker_ids: brokers that must be read before a topic counts as deleted
        everywhere (pass the list task's output so stopped brokers count).
    :param known_hosts: extra known_hosts files (host keys are always verified).
    :param connect_timeout: SSH connect timeout in seconds (default: the connection's).
    :param command_timeout: each remote command's limit in seconds.
    :param python_interpreters: interpreters tried on the hosts, in order.
    :param poll_interval: seconds between checks while waiting.
    :param wait_timeout: how long to wait for settled verdicts (seconds or a timedelta).
    :param delete_dir_margin: how far past its broker's own deletion schedule (``log.segment.delete.delay.ms``
        after the rename, not before 30 s after the broker's start) a ``-delete`` directory is still
        PENDING_DELETE_DELAY rather than left over (INCOMPLETE); seconds or a timedelta.
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
    :param cleanup: quarantine INCOMPLETE topics' leftovers (needs ``dry_run=False`` to act, and a
        cluster the cluster file opts out of approval: this task plans and acts in one step, so a
        person approves a cleanup in the ``kafka_zk_deletion_cleanup`` DAG instead).
    :param dry_run: plan the cleanup and log it, change nothing (default).
    :param quarantine_dir: absolute quarantine directory on the hosts (default
        ``<log dir>/../kafka-quarantine/<ts>``); never inside a log dir, no symlink on the way.
    :param allow_running_broker_orphans: also move orphan directories of a running broker.
    :param fail_when_unsuccessful: fail (no retry) when a topic settled on a non-success verdict.
    :param run_ts: the run's artefact folder name (default: from the run).
    """

    template_fields: Sequence[str] = (
        "topics",
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "run_ts",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "expected_broker_ids",
        "quarantine_dir",
        "cleanup",
        "dry_run",
        "allow_running_broker_orphans",
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
        delete_dir_margin: float | timedelta = timedelta(milliseconds=DEFAULT_DELETE_MARGIN_MS),
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        cleanup: bool | str = False,
        dry_run: bool | str = True,
        quarantine_dir: str | None = None,
        allow_running_broker_orphans: bool | str = False,
        fail_when_unsuccessful: bool = True,
        run_ts: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
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
        self.delete_dir_margin = delete_dir_margin
        self.deferrable = deferrable
        self.cleanup = cleanup
        self.dry_run = dry_run
        self.quarantine_dir = quarantine_dir
        self.allow_running_broker_orphans = allow_running_broker_orphans
        self._flags: dict[str, bool] | None = None  # parsed at execute time (templates rendered)
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
            "delete_margin_ms": self._margin_ms(),
        }

    def _margin_ms(self) -> int:
        margin = self.delete_dir_margin
        seconds = margin.total_seconds() if isinstance(margin, timedelta) else float(margin)
        if not seconds >= 0:
            raise ValueError(f"delete_dir_margin must be >= 0 seconds, not {margin!r}")
        return int(seconds * 1000)

    def _ts(self, context: Context) -> str:
        # the run's key (run_after + run id), never its logical date: REST/CLI runs have none
        dag_run = context.get("dag_run")
        value = self.run_ts or (run_key_of(dag_run) if dag_run is not None else context.get("ts_nodash"))
        value = str(value or datetime.now(UTC).strftime("%Y%m%dT%H%M%S"))
        if not _TS.fullmatch(value):
            raise ValueError(f"run_ts must be a plain timestamp name, not {value!r}")
        return value

    def _artefact_dir(self, ts: str) -> str:
        if not _NAME.fullmatch(self.cluster) or ".." in self.cluster:
            raise ValueError(f"cluster must be a plain name ([A-Za-z0-9._-]), not {self.cluster!r}")
        base = artefacts_url(self.base_path, self.artefacts_conn_id)  # also after a deferral
        return "/".join([base.rstrip("/"), self.cluster, "deletions", ts])

    def _timeout_s(self) -> float:
        t = self.wait_timeout
        return t.total_seconds() if isinstance(t, timedelta) else float(t)

    # ------------------------------------------------------------------ execution
    def _resolve_topics(self) -> list[str]:
        if self.topics:
            return validate_topics(self.topics)
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            # a chroot without a Kafka cluster has no markers either: refuse it, never "nothing to verify"
            pin_zookeeper_identity(hook)
            return pending_deletion_topics(hook)

    def _flag(self, name: str) -> bool:
        if self._flags is None:
            self._flags = self._parsed_flags()
        return self._flags[name]

    def _parsed_flags(self) -> dict[str, bool]:
        """The safety switches parsed strictly (a real boolean or true/false text), else refuse."""
        return parse_safety_flags(
            cleanup=self.cleanup,
            dry_run=self.dry_run,
            allow_running_broker_orphans=self.allow_running_broker_orphans,
        )

    def _refuse_an_unapproved_cleanup(self, context: Context) -> None:
        """A real cleanup moves broker directories and deletes znodes: the one approval rule of every
        write (:class:`~airflow_provider_kafka_zk.maintenance.approval.WriteApprovalRule`), as far as
        it goes without cluster I/O, before the verdicts read anything -- its maintenance session
        applies it in full later. This task plans and acts in one step and writes no plan to approve,
        so it writes only to a cluster the cluster file opts out of approval (automation); a person
        approves a cleanup in the ``kafka_zk_deletion_cleanup`` DAG."""
        if not self._flag("cleanup") or self._flag("dry_run"):
            return
        from airflow_provider_kafka_zk.maintenance import RunIdentity
        from airflow_provider_kafka_zk.maintenance.approval import (
            ApprovalRequiredError,
            refuse_unapproved_write_before_io,
        )
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        try:
            refuse_unapproved_write_before_io(
                kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
                cluster=self.cluster,
                run=RunIdentity.from_context(
                    context, fallback_run_id=f"{self.cluster}/deletions/{self._ts(context)}"
                ),
                approval=approved_plan(self, context),
            )
        except ApprovalRequiredError as exc:
            from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_advice

            topics = validate_topics(self.topics) if self.topics else ["<topic>"]
            raise ApprovalRequiredError(
                f"{exc}. This task plans and acts in one step, so no approval step can show its plan: "
                + cleanup_advice(self.cluster, topics)
            ) from None

    def execute(self, context: Context) -> list[dict[str, Any]]:
        self._flags = self._parsed_flags()  # before any I/O: a typo in a safety switch refuses here
        self._refuse_an_unapproved_cleanup(context)
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
        # every later look must be at the cluster this one pinned (a re-pointed connection refuses)
        settings["cluster_id"] = check.cluster_id
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
        self._flags = self._parsed_flags()
        if event.get("status") == "error":
            if event.get("refused"):  # the cluster behind the connection is not the one pinned
                raise ClusterIdentityError(str(event.get("message")))
            raise TopicDeletionNotSettledError(f"could not check the deletions: {event.get('message')}")
        topics = [v["topic"] for v in event.get("verdicts", ())]
        self.log.info("Trigger fired (%s): %s", event.get("status"), event.get("message"))
        # Conclude on a fresh look: a cleanup must act on the state as it is now.
        settings = self._settings(requested=True)
        settings["cluster_id"] = event.get("cluster_id")
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
        refused: MaintenanceRefusedError | None = None
        if self._flag("cleanup") and check is not None:
            try:
                record["cleanup"] = self._cleanup(context, check, settings, ts, directory)
            except MaintenanceRefusedError as exc:
                # Nothing was changed: the verdicts are still worth keeping, with why cleanup refused.
                refused = exc
                record["cleanup"] = {
                    "refused": str(exc),
                    "actions_taken": 0,
                    "dry_run": self._flag("dry_run"),
                }
                self.log.error("Cleanup refused, nothing changed: %s", exc)
            if not self._flag("dry_run") and record["cleanup"]["actions_taken"]:
                final = run_check(settings, topics)
                record["verdicts_after_cleanup"] = final.to_dicts()
                self._log_check(final)
        outcome, message = self._outcome(final)
        record["outcome"] = outcome
        cleanable = self._cleanable(final) if final is not None else []
        if cleanable:
            from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_commands

            dry, real = cleanup_commands(self.cluster, cleanable)
            record["cleanup_dag"] = {"topics": cleanable, "dry_run": dry, "run": real}
        try:
            path = write_url_atomically(f"{directory}/{VERDICTS_FILE}", json.dumps(record, indent=1).encode())
        except OSError as exc:
            if refused is None:
                raise
            # the store is what refused the cleanup: say that, not the second failure
            self.log.error("Could not write %s/%s either: %s", directory, VERDICTS_FILE, exc)
            raise refused from exc
        self.log.info("Wrote %s (outcome %s)", path, outcome)
        if refused is not None:
            raise refused
        not_done = [
            d
            for d in (record.get("cleanup") or {}).get("directories", ())
            if d["status"] in ("refused", "failed")
        ]
        if not_done and not self._flag("dry_run"):
            # The safe part is done and recorded; what a broker host refused is a refusal, said as one.
            raise QuarantineRefusedError(
                f"{len(not_done)} director(ies) were not quarantined (see {path}): "
                + "; ".join(
                    f"broker {d['broker_id']} {d.get('source', '')}: {d['status']} ({d.get('detail', '')})"
                    for d in not_done[:10]
                )
            )
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
        advice = ""
        incomplete = self._cleanable(check)
        if incomplete:
            from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_advice

            advice = f"\n{', '.join(incomplete)}: INCOMPLETE. {cleanup_advice(self.cluster, incomplete)}"
        return "unsuccessful", f"not every topic is deleted everywhere:\n{lines}{advice}"

    @staticmethod
    def _cleanable(check: DeletionCheck) -> list[str]:
        """The topics whose deletion left leftovers a cleanup removes (INCOMPLETE)."""
        from airflow_provider_kafka_zk.kafka.deletion import Verdict

        return sorted({v.topic for v in check.verdicts if v.verdict is Verdict.INCOMPLETE})

    # ------------------------------------------------------------------ cleanup
    def _cleanup(
        self,
        context: Context,
        check: DeletionCheck,
        settings: Mapping[str, Any],
        ts: str,
        directory: str,
    ) -> dict[str, Any]:
        """Quarantine leftover dirs and remove leftover config znodes of INCOMPLETE topics, through the
        step executor (:func:`~airflow_provider_kafka_zk.maintenance.deletion_cleanup.run_cleanup`):
        one maintenance session, every broker host to be touched pinned, every step checked before the
        first move (the host's own checks run as a dry run), the list of moves written and read back
        first."""
        from airflow_provider_kafka_zk.maintenance import RunIdentity
        from airflow_provider_kafka_zk.maintenance.deletion_cleanup import run_cleanup
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        return run_cleanup(
            check,
            cluster=self.cluster,
            kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
            host_hook=host_hook_from_kwargs(settings),
            artefact_dir=directory,
            ts=ts,
            run=RunIdentity.from_context(context, fallback_run_id=f"{self.cluster}/deletions/{ts}"),
            dry_run=self._flag("dry_run"),
            quarantine_dir=self.quarantine_dir,
            allow_running_broker_orphans=self._flag("allow_running_broker_orphans"),
            approval=approved_plan(self, context),  # after an approval step: that plan, or nothing
        )
