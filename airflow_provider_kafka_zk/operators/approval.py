"""Approve the exact plan (issue 25): the approval step of every mutating manual DAG, and the check
each execute step makes before any I/O on the cluster.

::

    plan >> PlanApprovalOperator(task_id="approve", plan_dir=PLAN_DIR, cluster=..., dry_run=...) >> execute

The approval step reads the plan folder, computes the plan hash (:mod:`..kafka.approval`: sha256
over ``plan.json``, ``rollback.json`` and the settings the writing tasks downstream render), and

* in a dry run says so and passes straight through (``approval.json``: ``not_needed``);
* when the cluster file sets ``require_approval = false``, records the hash and passes
  (``not_required``: automation with its own review);
* otherwise puts a human-in-the-loop request to Airflow (the standard provider's HITL request: the
  task's *Required Actions* page and ``.../hitlDetails`` over REST) with the root-cause-first
  summary and the hash, assigned to the cluster's ``approvers``, for ``approval_timeout_s``, and
  waits for the answer without a worker slot. Approve lets the run go on; Reject or a time-out skips
  the writing tasks (the report task then says why, and fails the run: nothing changed).

An answer given at any moment after the request exists is honoured. Airflow 3.3.2 alone does not
guarantee that (both seen on the production harness, ``tests/integration/test_production_approval_race.py``):

1. An answer resumes the waiting task into a second worker workload with the *same* try number. When
   the scheduler handles the executor's late "success" event of the workload that parked the task
   after it has queued the resumed one, it takes the task for killed externally ("finished with
   state success, but the task instance's state attribute is queued" -- or ``running``, and the
   running try is then terminated: "Server indicated the task shouldn't be running anymore") and
   fails it (``SchedulerJobRunner._process_executor_events``: only a SCHEDULED task with
   ``next_method`` counts as resumed, apache/airflow#66374; QUEUED is #67287, fixed after 3.3.2;
   RUNNING is #72716, open). The sooner the answer, the likelier; under load seconds after the pause.
2. An answer recorded while the task is still parking does not wake it: the response route
   (``core_api/routes/public/hitl.py`` ``update_hitl_detail``) decides whether to resume from the
   task state it read before it locked the row (``session.get(..., with_for_update=...)`` keeps
   the already-loaded, stale ``running``), and the park route checked for a response before that
   answer was committed, so the task waits with its answer until its time-out.

So the step waits by deferring to :class:`~airflow_provider_kafka_zk.triggers.approval.PlanAnswerTrigger`:
the triggerer reads the answer Airflow records and ends the task with the decision there (no
second workload: nothing to race, and an answer missed by the response route is found at the next
look). When Airflow's response route resumes the deferred task on a worker instead, and the
scheduler then fails that try (1.), the task's retry does not ask again -- that would erase the
answer -- but defers to the same trigger, which finds the answer already recorded. A decision given
to a plan stands for the run: a retry or a clear of the step reads it back; a new run asks again.
Under ``airflow dags test`` (no triggerer) the step parks in AWAITING_INPUT, where ``DAG.test``
waits for the answer.

The decision -- who, when, the comment, the hash shown -- goes to ``approval.json`` beside the plan,
to the run's change log (``changes-approve-<try>.json``) and to the task's XCom (``approval``),
which is what the execute steps trust. Each execute step hands ``approved_plan(self, context)``
(:mod:`.approved_plan`) to its mutation's maintenance session, which verifies it when it opens,
before it reads anything of the cluster, and the step executor again right before the first write
(:class:`~airflow_provider_kafka_zk.maintenance.approval.ApprovedPlan`): in a real run nothing is
written unless the plan was approved and the plan hash, recomputed then, is the approved one. The
cluster having changed since the plan is refused by the executor's preflight after that.

A new mutation plugs in the same way: list its operator and the fields that decide what it writes
in :data:`WRITERS`, put the approval task between its plan and it, and give its session
``approval=approved_plan(self, context)``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Param
from airflow.sdk.bases.skipmixin import SkipMixin
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import AirflowFailException, TaskAwaitingInput
from airflow.sdk.execution_time.hitl import upsert_hitl_detail

from airflow_provider_kafka_zk.artefacts.approval_record import write_decision
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.kafka.approval import (
    APPROVAL_FILE,
    APPROVAL_FORMAT,
    APPROVE,
    REJECT,
    Decision,
    PlanDigest,
    PlanSummary,
    reassignment_summary,
    repair_summary,
    resolve_approvers,
    same_wait,
    timed_out,
    with_answer,
)
from airflow_provider_kafka_zk.kafka.deletion_cleanup import PLAN_FORMAT as CLEANUP_PLAN_FORMAT
from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_summary
from airflow_provider_kafka_zk.maintenance import parse_safety_flags
from airflow_provider_kafka_zk.operators.approved_plan import (
    APPROVAL_TASK_ID,
    XCOM_KEY,
    PlanChangedSinceApprovalError,
    PlanNotApprovedError,
    approval_links,
    approved_plan,
    read_approval,
    read_artefact,
    read_plan_digest,
    writer_fields,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

_SHOWN_ONLY = ("batch_timeout", "health_timeout", "gate_timeout")
"""Fields of the writing tasks rendered for the summary only (how long, not what)."""


class ApproversError(AirflowFailException):
    """The cluster's ``approvers`` cannot be turned into Airflow users (a role nobody has ...)."""


# ---------------------------------------------------------------------------------------------
# Settings and reading the plan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApprovalSettings:
    """A cluster's approval settings (cluster file; defaults when the cluster is not in a file)."""

    require_approval: bool = True
    approvers: tuple[str, ...] = ()
    timeout_s: float = 86400.0

    @classmethod
    def of(cls, cluster: str) -> ApprovalSettings:
        from airflow_provider_kafka_zk.clusters import DEFAULTS, load_clusters

        settings = load_clusters().get(cluster) or DEFAULTS
        return cls(
            bool(settings.get("require_approval", True)),
            tuple(settings.get("approvers") or ()),
            float(settings.get("approval_timeout_s") or DEFAULTS["approval_timeout_s"]),
        )


def _json(data: bytes | None) -> Any:
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def users_by_role() -> dict[str, list[str]] | None:
    """Role (lower case) -> user names of Airflow's simple auth manager (``[core]
    simple_auth_manager_users``); None under another auth manager (its users cannot be listed here)."""
    from airflow.sdk.configuration import conf

    manager = str(conf.get("core", "auth_manager", fallback="") or "")
    if not manager.endswith("SimpleAuthManager"):
        return None
    out: dict[str, list[str]] = {}
    for entry in conf.getlist("core", "simple_auth_manager_users", fallback=[]) or []:
        parts = [p.strip() for p in str(entry).split(":")]
        if len(parts) >= 2 and parts[0]:
            out.setdefault(parts[1].lower(), []).append(parts[0])
    return out


def _writers_downstream(task: Any) -> list[Any]:
    """The tasks after ``task`` that write from its plan (their class is in :data:`WRITERS`)."""
    return sorted(
        (t for t in task.get_flat_relatives(upstream=False) if writer_fields(t) is not None),
        key=lambda t: t.task_id,
    )


def _render(task: Any, names: Sequence[str], context: Context) -> dict[str, Any]:
    """``task``'s fields as its templates render them in this run (what that task will be given)."""
    env = task.get_template_env()
    out = {}
    for name in names:
        if hasattr(task, name):
            out[name] = task.render_template(getattr(task, name), context, env)
    return out


# ---------------------------------------------------------------------------------------------
# The approval step
# ---------------------------------------------------------------------------------------------


class PlanApprovalOperator(HITLOperator, SkipMixin):
    """Between a plan and its first write: show the plan and its hash, wait for a person's decision.

    Options "Approve" / "Reject" and a free-text comment. See the module docstring for what each
    outcome does. XCom ``approval`` (and the return value) is the decision record, also written to
    ``approval.json`` beside the plan and to the run's change log.

    :param plan_dir: the plan folder (the plan task's ``plan_dir``).
    :param cluster: the cluster (its ``require_approval``, ``approvers``, ``approval_timeout_s``).
    :param dry_run: the run's ``dry_run`` (true/false): a dry run needs no approval.
    :param title: what the DAG does, for the subject ("Drain", "topicId repair" ...).
    :param artefacts_conn_id: the connection of a remote artefact store.
    """

    template_fields: Sequence[str] = ("plan_dir", "cluster", "dry_run", "artefacts_conn_id")
    inherits_from_skipmixin = True
    is_plan_approval = True  # what the execute steps' check looks for upstream
    ui_color = "#fff3cd"
    COMMENT: ClassVar[str] = "comment"

    def __init__(
        self,
        *,
        plan_dir: str,
        cluster: str,
        dry_run: bool | str,
        title: str = "change",
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("task_id", APPROVAL_TASK_ID)
        # A retry never asks again: it reads the answer Airflow recorded for this run's request (see
        # _wait_for_answer). What it is for: Airflow 3.3.2 failing a resumed try (module docstring).
        kwargs.setdefault("retries", 2)
        kwargs.setdefault("retry_delay", timedelta(seconds=5))
        params = ParamsDict(kwargs.pop("params", None) or {})  # the DAG's (dropped by HITLOperator) + ours
        params[self.COMMENT] = Param(
            "",
            type=["null", "string"],
            title="Comment",
            description="Why (recorded with the decision in approval.json and the run's change log)",
            source="task",
        )
        super().__init__(
            subject=f"Approve the {title} plan", options=[APPROVE, REJECT], params=params, **kwargs
        )
        self.plan_dir = plan_dir
        self.cluster = cluster
        self.dry_run = dry_run
        self.title = title
        self.artefacts_conn_id = artefacts_conn_id

    # ------------------------------------------------------------------ what is shown
    def _plan(self, context: Context) -> tuple[str, PlanDigest, PlanSummary, dict[str, Any]]:
        """(plan folder, digest, summary, rendered settings of the writing tasks)."""
        folder = artefacts_url(str(self.plan_dir), self.artefacts_conn_id or None)
        writers = _writers_downstream(context["task"]) if "task" in context else []
        hashed = {t.task_id: _render(t, writer_fields(t) or (), context) for t in writers}
        shown: dict[str, Any] = {}
        for t in writers:
            shown.update(_render(t, _SHOWN_ONLY, context))
            shown.update(hashed[t.task_id])
        digest = read_plan_digest(folder, hashed)
        plan = _json(read_artefact(folder, "plan.json"))
        if not isinstance(plan, dict):
            raise PlanNotApprovedError(f"{folder}/plan.json is missing or not JSON: nothing to approve")
        rollback = _json(read_artefact(folder, "rollback.json"))
        summary = self._summary(plan, rollback, folder, shown, self._undo_command(context))
        return folder, digest, summary, shown

    def _undo_command(self, context: Context) -> str | None:
        """The ``kafka_zk_undo`` trigger that undoes this run once it wrote (None outside a run)."""
        from airflow_provider_kafka_zk.kafka.undo import UNDO_DAG_ID, trigger_command, undo_conf

        ti = context.get("ti")
        if ti is None or getattr(ti, "dag_id", None) == UNDO_DAG_ID:
            return None
        return trigger_command(UNDO_DAG_ID, undo_conf(str(self.cluster), ti.run_id, ti.dag_id))

    @staticmethod
    def _summary(
        plan: Mapping[str, Any],
        rollback: Any,
        folder: str,
        shown: Mapping[str, Any],
        undo_command: str | None = None,
    ) -> PlanSummary:
        if plan.get("format") == "kafka-zk-kraft-migration-plan":
            from airflow_provider_kafka_zk.kafka.kraft_migration_plan import approval_summary

            return approval_summary(
                plan, rollback, plan_dir=folder, gate_timeout_s=_number(shown.get("gate_timeout"))
            )
        if plan.get("format") == CLEANUP_PLAN_FORMAT:
            return cleanup_summary(plan, rollback if isinstance(rollback, Mapping) else None, plan_dir=folder)
        if plan.get("format") == "kafka-zk-topic-id-repair-plan":
            return repair_summary(
                plan,
                rollback,
                plan_dir=folder,
                restart_command=shown.get("restart_command"),
                health_timeout_s=_number(shown.get("health_timeout")),
                gate_timeout_s=_number(shown.get("gate_timeout")),
                undo_command=undo_command,
            )
        identity = plan.get("identity") or {}
        zookeeper = ",".join(identity.get("zookeeper_hosts") or []) + str(identity.get("chroot") or "")
        rate = _number(shown.get("throttle_bytes_per_sec"))
        common = {
            "plan_dir": folder,
            "throttle_bytes_per_sec": None if rate is None else int(rate),
            "batch_timeout_s": _number(shown.get("batch_timeout")),
            "zookeeper": zookeeper or "?",
        }
        if plan.get("kind") == "undo":  # a drain-shaped plan whose other steps put things back
            from airflow_provider_kafka_zk.kafka.undo import undo_summary

            return undo_summary(plan, rollback, **common)
        return reassignment_summary(plan, rollback, **common, undo_command=undo_command)

    def _record(
        self, context: Context, folder: str, digest: PlanDigest, summary: PlanSummary, decision: Decision
    ) -> dict[str, Any]:
        ti = context["ti"]
        settings = ApprovalSettings.of(str(self.cluster))
        now = datetime.now(UTC).isoformat()
        return {
            "format": APPROVAL_FORMAT,
            "version": 1,
            "decision": decision.value,
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "task_id": ti.task_id,
            "try_number": ti.try_number,
            "cluster": str(self.cluster),
            "plan_dir": folder,
            "plan": digest.to_dict(),
            "summary": summary.text(),
            "requested_at": now,
            "asked_at": None,  # when the request was put to Airflow (the approval page exists)
            "notified": None,  # what each notify channel answered when the approvers were told
            "decided_at": None if decision is Decision.PENDING else now,
            "decided_by": None,
            "comment": None,
            "require_approval": settings.require_approval,
            "approvers": list(settings.approvers),
            "timeout_s": settings.timeout_s,
            **self._links(ti),
        }

    def _links(self, ti: Any) -> dict[str, str]:
        """The run's page, the approval page (the HITL operator's own ``generate_link_to_ui``, with
        ``[api] base_url``) and the REST calls that answer."""
        links = approval_links(ti.dag_id, ti.run_id, ti.task_id)
        with contextlib.suppress(ValueError):  # no [api] base_url: the plugin's default host
            links["approval_url"] = self.generate_link_to_ui(task_instance=ti)
        return links

    # ------------------------------------------------------------------ running
    def execute(self, context: Context) -> Any:
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        folder, digest, summary, _ = self._plan(context)
        settings = ApprovalSettings.of(str(self.cluster))
        if dry_run:
            record = self._record(context, folder, digest, summary, Decision.NOT_NEEDED)
            self.log.info(
                "Dry run: nothing will be written, so no approval is needed; passing straight through.\n%s"
                "A real run of this plan would ask for approval of plan sha256 %s",
                summary.text(),
                digest.sha256,
            )
            return self._finish(context, record)
        if not settings.require_approval:
            record = self._record(context, folder, digest, summary, Decision.NOT_REQUIRED)
            self.log.warning(
                "Cluster %s: require_approval = false in the cluster file: going ahead without a person's "
                "approval. Plan sha256 %s (the execute steps check it)\n%s",
                self.cluster,
                digest.sha256,
                summary.text(),
            )
            return self._finish(context, record)
        try:
            assigned = resolve_approvers(settings.approvers, users_by_role())
        except ValueError as exc:
            raise ApproversError(f"cluster {self.cluster}: {exc}") from None
        ti = context["ti"]
        earlier = _this_wait(folder, ti, digest)
        if earlier is not None:
            # This run already asked about this very plan (a retry after Airflow failed the resumed
            # try, or a clear): Airflow holds the request and any answer given to it. Asking again
            # would erase that answer (the HITL upsert resets a response), so read it instead.
            self.log.info(
                "This run asked for approval of plan sha256 %s at %s (try %s; decision so far: %s): "
                "not asking again; the decision is the answer Airflow recorded for that request",
                digest.sha256,
                earlier.get("asked_at"),
                earlier.get("try_number"),
                earlier.get("decision"),
            )
            self._wait_for_answer(context, {**earlier, "try_number": ti.try_number})
        record = self._record(context, folder, digest, summary, Decision.PENDING)
        self._write(folder, record)  # before the request exists: a retry never meets one it cannot tell
        self.subject = f"{self.title} on cluster {self.cluster}: approve plan sha256 {digest.sha256[:16]}…"
        self.body = summary.markdown(digest, folder)
        self.assigned_users = assigned or None
        self.response_timeout = timedelta(seconds=settings.timeout_s)
        upsert_hitl_detail(
            ti_id=ti.id,
            options=self.options,
            subject=self.subject,
            body=self.body,
            defaults=self.defaults,
            multiple=self.multiple,
            params=self.serialized_params,
            assigned_users=self.assigned_users,
        )  # the approval page exists from here on: an answer may come at any moment
        record["asked_at"] = datetime.now(UTC).isoformat()
        record["notified"] = self._notify(record, summary)
        self._write(folder, record)
        self.log.info(
            "Waiting for a person to approve plan sha256 %s (%s; %s; times out after %s s).\n"
            "Approve or reject at %s\nor over REST:\n  %s\n  %s\n%s",
            digest.sha256,
            "approvers: " + ", ".join(settings.approvers)
            if settings.approvers
            else "any user allowed on this DAG",
            folder,
            f"{settings.timeout_s:g}",
            record["approval_url"],
            record["approve"],
            record["reject"],
            summary.text(),
        )
        self._wait_for_answer(context, record)

    def _notify(self, record: Mapping[str, Any], summary: PlanSummary) -> dict[str, Any]:
        """Tell the approvers that the plan waits (the cluster's ``notify`` channels,
        :mod:`airflow_provider_kafka_zk.alerts.approval`); what each channel answered. Never fails
        the approval: a channel that is down is said here and in ``approval.json``."""
        from airflow_provider_kafka_zk.alerts.approval import notify_approvers

        try:
            notified = notify_approvers(record, headline=summary.headline, title=self.title)
        except Exception as exc:  # a notify table that does not parse, a template error
            self.log.warning(
                "The approvers could NOT be told that plan sha256 %s waits: %s: %s. The request waits "
                "all the same at %s",
                record["plan"]["sha256"],
                type(exc).__name__,
                exc,
                record["approval_url"],
            )
            return {
                "at": datetime.now(UTC).isoformat(),
                "error": f"{type(exc).__name__}: {exc}",
                "deliveries": {},
            }
        for name, result in notified["deliveries"].items():
            if result.get("ok"):
                self.log.info("Approvers told through %s: %s", name, result.get("result"))
            else:
                self.log.warning(
                    "Approvers NOT told through %s: %s. The request waits all the same at %s",
                    name,
                    result.get("error"),
                    record["approval_url"],
                )
        return notified

    def _wait_for_answer(self, context: Context, record: dict[str, Any]) -> NoReturn:
        """Wait for the answer to the request of ``record`` (asked by this try or an earlier one).

        On a deployment the task defers to :class:`PlanAnswerTrigger`: the triggerer reads the answer
        Airflow records and ends this task with the decision, no worker involved (an answer that
        Airflow hands straight back to a worker instead -- its response route resumes a deferred
        task at once -- comes to :meth:`execute_complete`). Under ``airflow dags test`` (no triggerer:
        the task runs in that command's process) it parks in AWAITING_INPUT, where ``DAG.test``
        waits for the answer.
        """
        from airflow_provider_kafka_zk.triggers.approval import PlanAnswerTrigger

        ti = context["ti"]
        requested = datetime.fromisoformat(str(record["requested_at"]))
        deadline = requested + timedelta(seconds=float(record["timeout_s"]))
        remaining = max(deadline - datetime.now(UTC), timedelta(0))
        self.hitl_summary_extra["timeout_datetime"] = deadline.isoformat()
        shown = {"plan": record["plan"], "requested_at": record["requested_at"]}
        if _runs_in_dags_test():
            raise TaskAwaitingInput(
                method_name="execute_complete", kwargs={"shown": shown}, timeout=remaining
            )
        skip = [t.task_id for t in context["task"].get_direct_relatives(upstream=False) if not t.is_teardown]
        self.defer(
            trigger=PlanAnswerTrigger(
                ti_id=str(ti.id),
                record=record,
                skip=sorted(skip),
                deadline=deadline.timestamp(),
                xcom_key=XCOM_KEY,
                comment_param=self.COMMENT,
            ),
            method_name="execute_complete",
            kwargs={"shown": shown},
        )

    def execute_complete(
        self, context: Context, event: dict[str, Any], shown: dict[str, Any] | None = None
    ) -> Any:
        """The answer Airflow handed back to a worker (its response route resumed the waiting task, or
        ``airflow dags test`` did), or the time-out of a wait parked in AWAITING_INPUT."""
        folder, _, summary, _ = self._plan(context)
        digest = PlanDigest.from_dict((shown or {})["plan"]) if shown else read_plan_digest(folder, {})
        ti = context["ti"]
        earlier = _this_wait(folder, ti, digest)
        if earlier is not None:
            record = {**earlier, "plan": digest.to_dict(), "try_number": ti.try_number}
        else:
            record = self._record(context, folder, digest, summary, Decision.PENDING)
            if shown:
                record["requested_at"] = shown.get("requested_at")
        now = datetime.now(UTC).isoformat()
        if "error" in event:
            if event.get("error_type") != "timeout":
                self.process_trigger_event_error(event)
            record = timed_out(record, now)
        else:
            chosen = list(event.get("chosen_options") or [])
            self.validate_chosen_options(chosen)
            responded_at = event.get("responded_at")
            decided_at = responded_at.isoformat() if hasattr(responded_at, "isoformat") else responded_at
            record = with_answer(
                record,
                chosen=chosen,
                by=event.get("responded_by_user"),
                at=decided_at or now,
                comment=(event.get("params_input") or {}).get(self.COMMENT),
            )
        return self._finish(context, record)

    def _finish(self, context: Context, record: dict[str, Any]) -> dict[str, Any]:
        """Record the decision everywhere; skip the writing tasks unless it lets them run."""
        folder = str(record["plan_dir"])
        self._write(folder, record)
        context["ti"].xcom_push(key=XCOM_KEY, value=record)
        decision = Decision(record["decision"])
        if decision in (Decision.APPROVED, Decision.REJECTED, Decision.TIMED_OUT):
            who = (record.get("decided_by") or {}).get("name") or "nobody (time-out)"
            self.log.info(
                "Decision: %s by %s at %s%s; plan sha256 %s (recorded in %s/%s)",
                decision.value.upper(),
                who,
                record["decided_at"],
                f" ({record['comment']})" if record.get("comment") else "",
                record["plan"]["sha256"],
                folder,
                APPROVAL_FILE,
            )
        if not decision.lets_writes_run and decision is not Decision.NOT_NEEDED:
            downstream = [
                t for t in context["task"].get_direct_relatives(upstream=False) if not t.is_teardown
            ]
            self.log.info(
                "Nothing will be changed: skipping %s; the report says why",
                ", ".join(t.task_id for t in downstream) or "nothing",
            )
            self.skip(ti=context["ti"], tasks=downstream)  # raises: the task succeeds, downstream skipped
        return record

    def _write(self, folder: str, record: Mapping[str, Any]) -> None:
        """``approval.json`` and, once decided, the change log (``changes-<task>-<try>.json``)."""
        write_decision(folder, record)


def _this_wait(folder: str, ti: Any, digest: PlanDigest) -> dict[str, Any] | None:
    """The plan folder's ``approval.json`` when it records a request this run's step already put to
    Airflow for this very plan (:func:`~airflow_provider_kafka_zk.kafka.approval.same_wait`)."""
    earlier = read_approval(folder)
    if earlier is None or not same_wait(
        earlier, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, plan_sha256=digest.sha256
    ):
        return None
    return earlier


def _runs_in_dags_test() -> bool:
    """Whether this task runs inside ``airflow dags test`` (``DAG.test`` runs it in its own process
    through Airflow's in-process supervisor, with no triggerer that could read a HITL answer)."""
    from airflow.sdk.execution_time import task_runner

    return type(getattr(task_runner, "SUPERVISOR_COMMS", None)).__name__ == "InProcessSupervisorComms"


def _number(value: Any) -> float | None:
    try:
        return None if value in (None, "", "None") else float(value)
    except (TypeError, ValueError):
        return None


__all__ = [
    "ApprovalSettings",
    "ApproversError",
    "PlanApprovalOperator",
    "PlanChangedSinceApprovalError",
    "PlanNotApprovedError",
    "approval_links",
    "approved_plan",
    "users_by_role",
]
