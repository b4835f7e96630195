"""The step executor: every mutation's steps checked before the run's first write, then applied in
order inside a :class:`~airflow_provider_kafka_zk.maintenance.session.MaintenanceSession`.

A mutation hands :class:`StepExecutor` its plan's typed steps (:mod:`airflow_provider_kafka_zk.
kafka.steps`) and one :class:`StepHandler` per step kind. :meth:`StepExecutor.run`:

1. skips the steps ``progress.json`` records as completed (a retried task resumes after the last
   completed one);
2. **preflights every remaining step, in the dry run too**: the cluster is not migrating to KRaft
   (the session refuses), every znode a step expects is read and compared with the plan
   (:func:`~airflow_provider_kafka_zk.kafka.steps.znode_verdict`: version, bytes, incarnation --
   or already what the step writes, then it is done), every broker a step needs is registered, and
   each handler adds its own checks (files read on the broker without following symlinks, command
   templates rendered with every value they will get, the restart rules). Any refusal raises
   :class:`PreflightRefusedError` listing them all -- nothing is written;
3. a dry run stops there and logs each step it would run;
4. a real run given an approved plan verifies it once more (:meth:`~airflow_provider_kafka_zk.
   maintenance.session.MaintenanceSession.verify_approval`: approved, and the plan hash recomputed
   now is the approved one -- the session already checked it before reading the cluster), then
   applies the steps in order, consecutive steps of one ``GROUP`` in one call (the
   handler makes it one ZooKeeper multi), re-checking the session (same cluster, no migration,
   still its lease, not outlived) and **renewing the lease** before each; waits go through
   :meth:`StepContext.wait`, which renews it while polling, and blocking calls through
   ``session.heartbeat_during``; each completed step is recorded in ``progress.json`` at once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.kafka.steps import (
    ObservedZnode,
    PreflightReport,
    Refusal,
    Step,
    StepState,
    atomic_groups,
    remaining,
    znode_verdict,
)
from airflow_provider_kafka_zk.maintenance.session import (
    MaintenanceRefusedError,
    MaintenanceSession,
    PlanApproval,
    RollbackArtefactError,
    RunIdentity,
)

log = logging.getLogger(__name__)

PROGRESS_FILE = "progress.json"


class PreflightRefusedError(MaintenanceRefusedError):
    """The preflight found steps that cannot run as planned; nothing was written to the cluster.

    ``refusals`` holds every :class:`~airflow_provider_kafka_zk.kafka.steps.Refusal` found.
    """

    def __init__(self, what: str, refusals: Sequence[Refusal], *, dry_run: bool) -> None:
        self.what = what
        self.dry_run = dry_run
        self.refusals = tuple(refusals)
        rules = sorted({r.rule for r in self.refusals})
        head = (
            f"{what}: refused before any change{' (dry run)' if dry_run else ''}: {len(self.refusals)} "
            f"problem(s) ({', '.join(rules)}); nothing was written"
        )
        super().__init__(head + "\n" + "\n".join(f"- {r}" for r in self.refusals))


class StepTimeoutError(MaintenanceRefusedError):
    """A step waited past its limit; the run stops there (the message says how to resume)."""


class ProgressLog:
    """``progress.json`` of a run: the steps completed (with their outcomes, in completion order),
    records of steps started but not finished (``pending``), and the run's baseline.

    :param artefact_dir: the run's artefact folder (local path or fsspec URL).
    :param name: the file's name (a second mutation sharing the folder keeps its own record).
    """

    def __init__(self, artefact_dir: str, name: str = PROGRESS_FILE) -> None:
        self.url = f"{artefact_dir.rstrip('/')}/{name}"
        self.data: dict[str, Any] = self._read()
        # the run's metrics (metrics.runs.observe_progress): the plan's figures kept in the record at
        # each save, then published; None while the cluster's metrics are off
        self.figures_of: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
        self.after_save: Callable[[Mapping[str, Any]], None] | None = None

    def _read(self) -> dict[str, Any]:
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.url)
        if not fs.exists(path):
            return {}
        try:
            data = json.loads(fs.cat_file(path))
        except (OSError, ValueError) as exc:
            raise RollbackArtefactError(
                f"{self.url} cannot be read ({type(exc).__name__}: {exc}): refusing rather than repeating steps"
            ) from None
        if not isinstance(data, dict):
            raise RollbackArtefactError(
                f"{self.url} is not a progress record: refusing rather than repeating steps"
            )
        return data

    @property
    def completed(self) -> dict[str, Any]:
        return self.data.setdefault("completed", {})

    @property
    def baseline(self) -> dict[str, Any] | None:
        return self.data.get("baseline")

    def set_baseline(self, baseline: Mapping[str, Any]) -> None:
        self.data["baseline"] = dict(baseline)
        self.save()

    def pending(self, step_id: str) -> dict[str, Any] | None:
        """What a started but unfinished step recorded (e.g. the broker epoch before its restart)."""
        return self.data.setdefault("pending", {}).get(step_id)

    def set_pending(self, step_id: str, record: Mapping[str, Any]) -> None:
        self.data.setdefault("pending", {})[step_id] = dict(record)
        self.save()

    def clear_pending(self, step_id: str) -> None:
        """Forget a started step that changed nothing (its command failed before acting): a retry runs it anew."""
        if self.data.setdefault("pending", {}).pop(step_id, None) is not None:
            self.save()

    def complete(self, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        for step_id, outcome in outcomes.items():
            self.completed[step_id] = dict(outcome)
            self.data.setdefault("pending", {}).pop(step_id, None)
        self.save()

    def save(self) -> None:
        # insertion order is completion order: a report lists the steps as they ran
        if self.figures_of is not None:
            self.data["figures"] = self.figures_of(self.data)
        write_url_atomically(self.url, json.dumps(self.data, indent=1, default=str).encode())
        if self.after_save is not None:
            self.after_save(self.data)


@dataclass
class StepContext:
    """What every handler of one run works with. Mutations add their own fields in a subclass.

    :param plan_steps: every step of the plan (completed ones too): a handler may reason about
        what runs before its step (e.g. the restart rules about the writes and the controller move).
    """

    session: MaintenanceSession
    progress: ProgressLog
    plan_steps: Sequence[Step]
    poll_interval: float = 2.0
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def hook(self) -> KafkaZooKeeperHook:
        return self.session.hook

    @property
    def dry_run(self) -> bool:
        return self.session.dry_run

    def wait(
        self,
        what: str,
        check: Callable[[], list[str]],
        timeout: float,
        on_timeout: Callable[[list[str]], Exception],
    ) -> float:
        """Poll ``check`` until it returns no reasons, renewing the lease as it waits; logs progress;
        raises ``on_timeout(reasons)`` at the limit. Returns the seconds waited."""
        started = time.monotonic()
        last_logged = -1.0
        while True:
            reasons = check()
            waited = time.monotonic() - started
            if not reasons:
                log.info("%s: done after %.1fs", what, waited)
                return waited
            if waited >= timeout:
                raise on_timeout(reasons)
            if last_logged < 0 or waited - last_logged >= 10:
                log.info("%s: waiting (%.0fs of %.0fs): %s", what, waited, timeout, "; ".join(reasons[:5]))
                last_logged = waited
            self.session.heartbeat()
            time.sleep(self.poll_interval)


class StepHandler(Protocol):
    """What the executor needs for one step kind (a mutation provides one per kind it uses)."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        """The kind's own checks (beyond the step's znodes and brokers), read-only; refusals, or
        ``StepState.DONE`` when an earlier try already did the step."""

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        """Carry out ``steps`` (one, or a group applied together); the outcome per step id."""


@dataclass(frozen=True)
class ExecutionResult:
    """What one call of :meth:`StepExecutor.run` did."""

    dry_run: bool
    ran: tuple[str, ...]
    completed: tuple[str, ...]
    already_done: tuple[str, ...] = ()


class StepExecutor:
    """Preflight, then apply, one plan's steps inside one maintenance session (see the module doc).

    :param what: the mutation's name in messages (``topicId repair of cluster prod``).
    :param handlers: step kind -> its handler; a step without one is refused at the preflight.
    :param context: the run's context (session, progress, the plan's steps).
    :param before_first_step: called once in a real run after the preflight passed, before the
        first step (a mutation records its baseline there).
    """

    def __init__(
        self,
        what: str,
        handlers: Mapping[str, StepHandler],
        context: StepContext,
        *,
        before_first_step: Callable[[], None] | None = None,
    ) -> None:
        self.what = what
        self.handlers = dict(handlers)
        self.ctx = context
        self.before_first_step = before_first_step
        from airflow_provider_kafka_zk.metrics.runs import observe_progress

        observe_progress(
            context, rate=getattr(context, "rate", None)
        )  # the run's figures, when metrics are on

    @property
    def session(self) -> MaintenanceSession:
        return self.ctx.session

    # ------------------------------------------------------------------ preflight
    def preflight(self, steps: Sequence[Step]) -> PreflightReport:
        """Check every step without writing anything; see the module docstring."""
        self.session.refuse_if_migrating()
        refusals: list[Refusal] = []
        done: list[str] = []
        live = set(self.ctx.hook.live_broker_ids())
        for step in steps:
            handler = self.handlers.get(step.kind)
            if handler is None:
                refusals.append(
                    Refusal(
                        "no-handler",
                        f"no handler for step kind {step.kind!r} in {self.what}",
                        "This mutation cannot carry out such a step; nothing was written",
                        step.id,
                    )
                )
                continue
            states: list[StepState] = []
            for expected in step.znodes():
                verdict = znode_verdict(step.id, expected, self._observe(expected.path))
                if isinstance(verdict, Refusal):
                    refusals.append(verdict)
                else:
                    states.append(verdict)
            if states and all(s is StepState.DONE for s in states):
                done.append(step.id)
                continue
            missing = [b for b in step.brokers() if b not in live and not self._started(step)]
            if missing:
                refusals.append(
                    Refusal(
                        "broker-not-registered",
                        f"broker(s) {missing} needed by step {step.id} are not registered in /brokers/ids (down?)",
                        "Start them (or plan without them) and run again; nothing was written",
                        step.id,
                        tuple(f"broker {b}" for b in missing),
                    )
                )
                continue
            own = handler.preflight(step, self.ctx)
            if own is StepState.DONE:
                done.append(step.id)
            elif isinstance(own, StepState):
                pass
            else:
                refusals.extend(own)
        report = PreflightReport(tuple(refusals), tuple(done), tuple(s.id for s in steps))
        for refusal in report.refusals:
            log.error("Preflight refusal: %s", refusal)
        if report.passed:
            log.info(
                "Preflight of %s: %d step(s) checked, %d already done, no refusal%s",
                self.what,
                len(steps),
                len(done),
                " (dry run)" if self.session.dry_run else "",
            )
        return report

    def _started(self, step: Step) -> bool:
        """A step an earlier try started (a restart whose broker may be down now): its handler decides."""
        return self.ctx.progress.pending(step.id) is not None

    def _observe(self, path: str) -> ObservedZnode | None:
        try:
            data, stat = self.ctx.hook.get_znode(path)
        except ZnodeNotFoundError:
            return None
        return ObservedZnode(data, stat.version, stat.czxid)

    # ------------------------------------------------------------------ run
    def run(self, steps: Sequence[Step]) -> ExecutionResult:
        """Preflight every remaining step, then (real runs) apply them in order; see the module doc.

        :raises PreflightRefusedError: a check failed (nothing written).
        """
        progress = self.ctx.progress
        todo = remaining(steps, progress.completed)
        if len(todo) < len(steps):
            log.info(
                "Resuming: %d step(s) already completed: %s",
                len(steps) - len(todo),
                ", ".join(progress.completed),
            )
        if not todo:
            log.info("Every step of %s is completed", self.what)
            return ExecutionResult(self.session.dry_run, (), tuple(progress.completed))
        report = self.preflight(todo)
        if not report.passed:
            raise PreflightRefusedError(self.what, report.refusals, dry_run=self.session.dry_run)
        if self.session.dry_run:
            for step in todo:
                state = " (already done)" if step.id in report.done else ""
                log.info("DRY RUN: would %s%s", step.describe(), state)
            return ExecutionResult(True, tuple(s.id for s in todo), tuple(progress.completed), report.done)
        self.session.verify_approval()  # the approved plan, unchanged, right before the first write
        if self.before_first_step is not None:
            self.before_first_step()
        ran: list[str] = []
        for group in atomic_groups(todo):
            ids = [s.id for s in group]
            if all(i in report.done for i in ids):
                log.info("Already done by an earlier try: %s", ", ".join(ids))
                progress.complete({i: {"already": True} for i in ids})
                continue
            self.session.recheck()
            if any(s.MUTATES for s in group) and not self.session.holds_lease:
                self.session.take_lease()
            self.session.renew_lease()
            log.info("Step %s (%s)", ", ".join(ids), group[0].kind)
            outcomes = self.handlers[group[0].kind].apply(group, self.ctx)
            progress.complete({i: outcomes.get(i, {}) for i in ids})
            ran.extend(ids)
        return ExecutionResult(False, tuple(ran), tuple(progress.completed), report.done)


class ResolvesHosts(Protocol):
    """An SSH host hook that looks the brokers' hosts up (in ZooKeeper) before its first command."""

    def resolve_connections(self) -> Any: ...


def execute_plan_in_session(
    location: str,
    plan: Mapping[str, Any],
    steps: Sequence[Step],
    *,
    hook: KafkaZooKeeperHook,
    what: str,
    handlers: Mapping[str, StepHandler],
    context: Callable[[MaintenanceSession, ProgressLog], StepContext],
    baseline: Callable[[Any], Mapping[str, Any]],
    run: RunIdentity,
    dry_run: bool,
    expected: Any,
    approval: PlanApproval | None = None,
    lease_ttl_s: float | None = None,
    hosts: ResolvesHosts | None = None,
    kraft_migration: bool = False,
) -> ExecutionResult:
    """Carry out an approved plan's ``steps`` on the step executor inside one maintenance session for
    the plan (one step at a time), the shape every plan executor shares: the session pins the identity
    the plan was made for and verifies the run's approval first; only then are broker hosts looked up
    in ZooKeeper; the baseline is recorded once, before the first write (a resumed run keeps the first
    try's). The caller owns (and closes) ``hook`` and ``hosts``.

    :param location: the plan's folder (``progress.json`` and the rollback artefacts go there).
    :param plan: ``plan.json``'s content (its ``cluster``).
    :param what: the run's name in messages (``topicId repair of cluster prod``).
    :param context: the run's :class:`StepContext` from the session and the progress log.
    :param baseline: what the run records before its first write, from that context.
    :param expected: the cluster identity the plan was made for.
    :param approval: the run's approved plan (a real run after an approval step).
    :param hosts: the SSH host hook, resolved after the approval was verified.
    :param kraft_migration: the run is the ZooKeeper-to-KRaft migration's own (it writes during one).
    """
    progress = ProgressLog(location)
    with MaintenanceSession(
        hook,
        cluster=str(plan["cluster"]),
        artefact_dir=location,
        run=run,
        dry_run=dry_run,
        expected=expected,
        single_step=True,
        lease_ttl_s=lease_ttl_s,
        approval=approval,
        kraft_migration=kraft_migration,
    ) as session:
        if hosts is not None:
            hosts.resolve_connections()  # reads ZooKeeper: after the approval was verified
        ctx = context(session, progress)

        def record_baseline() -> None:
            if progress.baseline is None:  # a resumed run keeps the first try's
                progress.set_baseline(dict(baseline(ctx)))

        return StepExecutor(what, handlers, ctx, before_first_step=record_baseline).run(steps)
