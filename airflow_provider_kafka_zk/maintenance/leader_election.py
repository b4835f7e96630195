"""The preferred leader election carried out by the step executor, as Kafka's ZooKeeper tool did it.

:func:`run_election` opens a maintenance session, computes the election from ZooKeeper
(:func:`~airflow_provider_kafka_zk.kafka.leadership.choose_election`: only partitions whose
preferred replica is registered and in the ISR; the rest reported with why) as
:class:`~airflow_provider_kafka_zk.kafka.steps.ElectionRequest` steps bounded by partitions and bytes
(under ``jute.maxbuffer``), and hands them to the executor. The steps are kept in ``election.json``
before the first write, so a retried or resumed task continues with the same ones (progress in
``progress-election.json``); once all are done it looks again and requests what became electable
meanwhile, never a partition twice.

Checked for every remaining step before the first write (the dry run runs the same checks):
``/admin/preferred_replica_election`` is absent, or holds this run's own request (a retry waits
for it); one in flight that is not this run's refuses (``election-in-flight``), never overwritten
or added to. Each step then re-reads the partitions and requests only those still electable,
records them before the create, *creates* the znode and waits until the controller deleted it --
in the triggerer (the operator's deferral) or here, renewing the lease while it polls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.leadership import (
    ElectionChoice,
    ElectionScope,
    choose_election,
    election_outcome,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.post_maintenance import election_steps
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import ElectionRequest, Refusal, Step, StepState, remaining
from airflow_provider_kafka_zk.maintenance.executor import (
    PreflightRefusedError,
    ProgressLog,
    StepContext,
    StepExecutor,
)
from airflow_provider_kafka_zk.maintenance.session import MaintenanceSession, PlanApproval, RunIdentity

log = logging.getLogger(__name__)

ELECTION_FILE = "election.json"
ELECTION_PROGRESS_FILE = "progress-election.json"
ELECTION_IN_FLIGHT = "election-in-flight"


class PostMaintenanceError(AirflowFailException):
    """The step cannot go on; the message names the run, broker, partition or znode and what to do."""


class ElectionInFlightError(PostMaintenanceError):
    """``/admin/preferred_replica_election`` exists and is not this run's."""


class ElectionInFlightRefusedError(PreflightRefusedError, ElectionInFlightError):
    """The preflight found an election in flight that is not this run's; nothing was written."""


def read_leadership(hook: KafkaZooKeeperHook) -> ClusterState:
    """Brokers, topics, partition states and the admin znodes, from one walk (the election's view)."""
    walk = hook.snapshot(include=("/brokers", "/admin", znodes.CONTROLLER), progress_every=3600)
    return ClusterState.from_snapshot(walk.rows)


def _foreign_message(hook: KafkaZooKeeperHook, znode: znodes.PreferredReplicaElection) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in znode.partitions[:10])
    return (
        f"{hook.describe_path(znodes.PREFERRED_REPLICA_ELECTION)} exists and is not this run's "
        f"({len(znode.partitions)} partition(s): {shown}): a preferred leader election is in flight; "
        "refusing to add to it"
    )


FOREIGN_ACTION = (
    "Wait until the controller deletes it (if no controller runs, it stays forever: check /controller) "
    "and run again; nothing was written"
)


@dataclass
class ElectionContext(StepContext):
    """The executor's context plus the election's record and settings.

    :param defer_wait: hands the wait for a created znode (its czxid) to the triggerer (raises
        ``TaskDeferred``); None: the wait polls here.
    """

    location: DrainLocation | None = None
    record: dict[str, Any] = field(default_factory=dict)
    scope: ElectionScope = field(default_factory=ElectionScope)
    timeout: float = 600.0
    defer_wait: Callable[[int], None] | None = None

    def save(self) -> None:
        assert self.location is not None
        self.location.write(ELECTION_FILE, json.dumps(self.record, indent=1))

    def znode(self) -> tuple[znodes.PreferredReplicaElection | None, int | None]:
        """The election znode and its czxid, as read now (None, None: there is none)."""
        try:
            data, stat = self.hook.get_znode(znodes.PREFERRED_REPLICA_ELECTION)
        except ZnodeNotFoundError:
            return None, None
        return znodes.PreferredReplicaElection.decode(data), stat.czxid

    def ours(self, znode: znodes.PreferredReplicaElection, czxid: int | None) -> bool:
        """Whether the znode is a request of this run (recorded before its create)."""
        found = {tuple(tp) for tp in znode.partitions}
        for step in self.plan_steps:
            pending = self.progress.pending(step.id) or {}
            if pending.get("czxid") is not None and pending["czxid"] == czxid:
                return True
            if pending.get("partitions") and {tuple(tp) for tp in pending["partitions"]} == found:
                return True
        return False


class ElectionRequestHandler:
    """Request one batch of preferred leader elections and wait until the controller processed it."""

    def preflight(self, step: Step, ctx: StepContext) -> Sequence[Refusal] | StepState:
        assert isinstance(step, ElectionRequest) and isinstance(ctx, ElectionContext)
        if "znode" not in ctx.cache:
            ctx.cache["znode"] = ctx.znode()
        znode, czxid = ctx.cache["znode"]
        pending = ctx.progress.pending(step.id) or {}
        if znode is None:
            return StepState.DONE if pending.get("czxid") is not None else StepState.PENDING
        if ctx.ours(znode, czxid):
            if pending.get("czxid") is not None and pending["czxid"] != czxid:
                return StepState.DONE  # ours was processed; this one is a later request of the run
            return StepState.PENDING
        if ctx.cache.get("foreign_said"):
            return StepState.PENDING  # one refusal for the run
        ctx.cache["foreign_said"] = True
        return [
            Refusal(
                ELECTION_IN_FLIGHT,
                _foreign_message(ctx.hook, znode),
                FOREIGN_ACTION,
                step.id,
                (znodes.PREFERRED_REPLICA_ELECTION,),
            )
        ]

    def apply(self, steps: Sequence[Step], ctx: StepContext) -> Mapping[str, Mapping[str, Any]]:
        assert isinstance(ctx, ElectionContext)
        (step,) = steps
        assert isinstance(step, ElectionRequest)
        hook = ctx.hook
        pending = ctx.progress.pending(step.id) or {}
        znode, czxid = ctx.znode()
        if pending.get("czxid") is not None:
            if znode is not None and czxid == pending["czxid"]:
                return self._wait(step, ctx, czxid)
            return {step.id: {"requested": pending.get("partitions", []), "czxid": pending["czxid"]}}
        if znode is not None:
            if not ctx.ours(znode, czxid):
                raise ElectionInFlightError(f"{_foreign_message(hook, znode)}. {FOREIGN_ACTION}")
            assert czxid is not None
            ctx.progress.set_pending(step.id, {**pending, "czxid": czxid})
            return self._wait(step, ctx, czxid)
        choice = choose_election(read_leadership(hook), ctx.scope)
        electable = {tuple(tp) for tp in choice.electable}
        batch = [znodes.TopicPartition(t, p) for t, p, _ in step.partitions if (t, p) in electable]
        gone = [f"{t}-{p}" for t, p, _ in step.partitions if (t, p) not in electable]
        if gone:
            log.info("No longer electable, not requested: %s", ", ".join(gone))
        if not batch:
            return {step.id: {"requested": [], "no_longer_electable": gone}}
        # recorded before the create: a retry recognises the znode as this run's
        record = ctx.record
        record["in_flight"] = [list(tp) for tp in batch]
        # a request recorded by a try that stopped before its create is not listed twice
        record["requested"] += [list(tp) for tp in batch if list(tp) not in record["requested"]]
        record["batches"].append([list(tp) for tp in batch])
        ctx.save()
        ctx.progress.set_pending(step.id, {"partitions": [list(tp) for tp in batch]})
        where = hook.describe_path(znodes.PREFERRED_REPLICA_ELECTION)
        if not hook.create_if_absent(
            znodes.PREFERRED_REPLICA_ELECTION, znodes.PreferredReplicaElection(tuple(batch)).encode()
        ):
            znode, czxid = ctx.znode()
            if znode is not None and not ctx.ours(znode, czxid):
                raise ElectionInFlightError(
                    f"{where} was created by someone else between our check and our create. {FOREIGN_ACTION}"
                )
        else:
            log.info("Created %s for %d partition(s) (batch %d)", where, len(batch), len(record["batches"]))
            znode, czxid = ctx.znode()
        if czxid is None:  # the controller was quicker than our look
            return {step.id: {"requested": [list(tp) for tp in batch], "czxid": None}}
        ctx.progress.set_pending(step.id, {"partitions": [list(tp) for tp in batch], "czxid": czxid})
        return self._wait(step, ctx, czxid)

    def _wait(
        self, step: ElectionRequest, ctx: ElectionContext, czxid: int
    ) -> Mapping[str, Mapping[str, Any]]:
        """Until the controller deleted our znode: in the triggerer when deferrable, else here."""
        if ctx.defer_wait is not None:
            ctx.defer_wait(czxid)
            raise RuntimeError("defer_wait returned instead of deferring")  # pragma: no cover
        hook, timeout = ctx.hook, ctx.timeout
        path = hook.describe_path(znodes.PREFERRED_REPLICA_ELECTION)

        def still_there() -> list[str]:
            stat = hook.exists(znodes.PREFERRED_REPLICA_ELECTION)
            return [f"{path} not processed yet"] if stat is not None and stat.czxid == czxid else []

        waited = ctx.wait(
            f"preferred leader election ({step.id})",
            still_there,
            timeout,
            lambda why: PostMaintenanceError(
                f"the controller has not processed {path} in {timeout:g}s: is a controller running "
                "(/controller)? The znode stays; clear this task to keep waiting (nothing is requested twice)"
            ),
        )
        ctx.record["in_flight"] = None
        ctx.save()
        pending = ctx.progress.pending(step.id) or {}
        return {
            step.id: {
                "requested": pending.get("partitions", []),
                "czxid": czxid,
                "waited_s": round(waited, 1),
            }
        }


HANDLERS = {ElectionRequest.KIND: ElectionRequestHandler()}


def load_record(location: DrainLocation) -> dict[str, Any]:
    """``election.json`` of an earlier try, or a fresh record."""
    if location.exists(ELECTION_FILE):
        record = dict(location.read_json(ELECTION_FILE))
        record.setdefault("requested", [])
        record.setdefault("batches", [])
        return record
    return {"requested": [], "batches": [], "in_flight": None}


def run_election(
    location: DrainLocation,
    *,
    cluster: str,
    kafka_zookeeper_conn_id: str,
    scope: ElectionScope,
    max_partitions: int,
    max_bytes: int,
    poll_interval: float,
    timeout: float,
    run: RunIdentity,
    dry_run: bool,
    expected: ClusterIdentity | None,
    defer_wait: Callable[[int], None] | None = None,
    approval: PlanApproval | None = None,
) -> dict[str, Any]:
    """Elect the preferred leaders of ``scope`` (see the module docstring); ``election.json`` says
    what was requested, elected, not moved and why.

    :param approval: the run's approved plan (a real run after an approval step): the session
        verifies it before reading the cluster, the executor again before the first write.

    :raises ElectionInFlightRefusedError: an election that is not this run's is in flight (nothing written).
    """
    record = load_record(location)
    progress = ProgressLog(location.url, ELECTION_PROGRESS_FILE)
    choice: ElectionChoice | None = None
    with KafkaZooKeeperHook(kafka_zookeeper_conn_id) as hook:
        session = MaintenanceSession(
            hook,
            cluster=cluster,
            artefact_dir=location.url,
            run=run,
            dry_run=dry_run,
            expected=expected,
            single_step=True,
            approval=approval,
        )
        with session:
            while True:
                steps: list[Step] = [ElectionRequest.from_dict(d) for d in record.get("steps") or ()]
                if not remaining(steps, progress.completed):
                    state = read_leadership(hook)
                    choice = choose_election(state, scope)
                    if not record["batches"]:
                        log.info(
                            "Scope %s: %d partition(s) already led by their preferred replica, %d electable, "
                            "%d not electable%s",
                            scope.describe(),
                            choice.already_preferred,
                            len(choice.electable),
                            len(choice.not_electable),
                            "".join(f"\n  - {n.describe()}" for n in choice.not_electable[:20]),
                        )
                    preferred = {(p.topic, p.partition): p.preferred_leader for p in state.partitions()}
                    new = election_steps(
                        choice.electable,
                        preferred,  # type: ignore[arg-type]
                        requested=[tuple(tp) for tp in record["requested"]],  # type: ignore[misc]
                        max_partitions=max_partitions,
                        max_bytes=max_bytes,
                        first=len(steps) + 1,
                    )
                    if not new:
                        break
                    steps += new
                ctx = ElectionContext(
                    session=session,
                    progress=progress,
                    plan_steps=steps,
                    poll_interval=poll_interval,
                    location=location,
                    record=record,
                    scope=scope,
                    timeout=timeout,
                    defer_wait=defer_wait,
                )

                def keep_steps(steps: list[Step] = steps) -> None:
                    record["steps"] = [s.to_dict() for s in steps]  # a retry continues with these
                    location.write(ELECTION_FILE, json.dumps(record, indent=1))

                executor = StepExecutor(
                    f"preferred leader election of cluster {cluster}",
                    HANDLERS,
                    ctx,
                    before_first_step=keep_steps,
                )
                try:
                    executor.run(steps)
                except PreflightRefusedError as exc:
                    if any(r.rule == ELECTION_IN_FLIGHT for r in exc.refusals):
                        raise ElectionInFlightRefusedError(
                            exc.what, exc.refusals, dry_run=exc.dry_run
                        ) from None
                    raise
                if dry_run:
                    todo = [
                        [t, p]
                        for s in remaining(steps, progress.completed)
                        for t, p, _ in s.partitions  # type: ignore[attr-defined]
                    ]
                    record.update(dry_run=True, would_elect=todo)
                    location.write(ELECTION_FILE, json.dumps(record, indent=1))
                    return {
                        "dry_run": True,
                        "would_elect": len(todo),
                        "election": location.path(ELECTION_FILE),
                    }
            requested = [znodes.TopicPartition(t, int(p)) for t, p in record["requested"]]
            outcome = election_outcome(read_leadership(hook), requested)
    assert choice is not None
    record.update(
        in_flight=None,
        dry_run=dry_run,
        elected=[f"{t}-{p}" for t, p in outcome.elected],
        not_moved=[n.describe() for n in outcome.not_moved],
        not_electable=[n.describe() for n in choice.not_electable],
    )
    location.write(ELECTION_FILE, json.dumps(record, indent=1))
    log.info("Preferred leader election done: %s", outcome.summary())
    return {
        "dry_run": dry_run,
        "elected": len(outcome.elected),
        "not_moved": len(outcome.not_moved),
        "not_electable": len(choice.not_electable),
        "election": location.path(ELECTION_FILE),
    }


__all__ = [
    "ELECTION_FILE",
    "ElectionInFlightError",
    "ElectionInFlightRefusedError",
    "PostMaintenanceError",
    "read_leadership",
    "run_election",
]
