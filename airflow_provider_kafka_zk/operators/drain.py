"""Pre-maintenance drain: plan, execute (throttled, batch by batch), clear throttles, verify.

Thin Airflow shells. The decisions are pure functions of
:mod:`~airflow_provider_kafka_zk.kafka.drain_execution` (the plan from the snapshot's model, the
plan's typed steps, each batch's next step, the wait's outcome, whether throttles may go, the
verification); carrying the steps out -- every step checked before the first write, throttles,
the reassign znode, the waits, progress -- is :mod:`~airflow_provider_kafka_zk.maintenance.drain` on
the step executor; the run folder's files and the typed errors are in :mod:`.drain_artefacts`.
They do exactly what Kafka's ZooKeeper tooling does (``ReassignPartitionsCommand.scala``,
``AdminZkClient.scala``, 3.3.1): throttles by read-modify-versioned-write of ``/config/<type>/<name>``
plus a ``config_change_`` notification, the reassignment by *creating* ``/admin/reassign_partitions``
(never overwriting it, never with ``log_dirs``). Artefacts go to ``<base>/<cluster>/drain/<ts>/``:
``rollback.json`` (written first), ``reassignment.json``, ``plan.json``, ``summary.txt``,
``throttles.json`` (what this run set, so only that is removed), ``progress.json``,
``throttles_cleared.json``, ``verify.json`` and ``report.txt``. The operators work for either scope
(``rf1``: single-replica partitions only, ``all``). Everything is dry-run by default.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, TriggerRule

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.drain import DrainRequest, dumps_tool_json
from airflow_provider_kafka_zk.kafka.drain_execution import (
    Action,
    Batch,
    after_wait,
    plan_from_state,
    read_disagreements,
    read_record,
    targets_of,
    verify_outcome,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.reassignment import reassignments_in_flight
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    PLAN_FILE,
    REASSIGNMENT_FILE,
    REPORT_FILE,
    ROLLBACK_FILE,
    SAFETY_SNAPSHOT_FILE,
    SUMMARY_FILE,
    THROTTLES_CLEARED_FILE,
    THROTTLES_FILE,
    VERIFY_FILE,
    DrainError,
    DrainLocation,
    DrainVerificationError,
    IncompletePlanError,
    PlanReadDisagreementError,
    ReassignmentInFlightError,
    as_list,
    inventory_dirs,
    inventory_sizes,
    is_unset,
    left_behind,
    load_plan,
    load_throttle_record,
    optional_int,
    plan_batches,
    plan_document,
    plan_identity,
    positive_int,
    refusal_error,
    report_text,
    snapshot_identity,
    topic_incarnations,
)
from airflow_provider_kafka_zk.operators.drain_zookeeper import (
    planning_read,
    read_all_topics,
    read_states,
    throttles_still_set,
)
from airflow_provider_kafka_zk.triggers.reassignment import ReassignmentTrigger, encode_targets

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity


# ---------------------------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------------------------


def topic_level_state(snapshot_path: str) -> ClusterState:
    """The model of a safety snapshot at topic level (see :func:`read_snapshot_without_partitions`):
    what :func:`read_record` compares, without a row per partition znode."""
    from airflow_provider_kafka_zk.artefacts.snapshots import read_snapshot_without_partitions  # pyarrow

    _, rows = read_snapshot_without_partitions(snapshot_path)
    return ClusterState.from_snapshot(rows, partial_read=True)


class DrainPlanOperator(BaseOperator):
    """Plan moving the in-scope replicas off ``brokers`` from ZooKeeper (or a snapshot) and inventory sizes.

    With ``kafka_zookeeper_conn_id`` (and no ``snapshot_path``), as the drain DAG runs it, the plan
    does not wait for the full safety snapshot: a planning read
    (:func:`~airflow_provider_kafka_zk.hooks.zookeeper_drain_read.read_for_drain`) takes the
    cluster id, brokers, controller, every topic znode, the in-flight znodes and the state znodes of
    the partitions on the drained brokers, builds the same model and runs the same planner;
    ``plan.json`` records what it read (``read``), and the execute step refuses to write when the
    run's safety snapshot, or ZooKeeper, disagrees with it. Otherwise the plan is made from the
    snapshot ``snapshot_path`` (default: the cluster's latest complete one).

    Writes ``rollback.json`` first (the current assignment of every partition it moves), then
    ``reassignment.json``, ``plan.json`` and ``summary.txt``. Refuses (fails) when a reassignment is
    in flight in the snapshot, or when partitions in scope cannot be moved unless ``allow_partial``;
    a topic znode the model cannot read (a name Kafka refuses, undecodable data) is listed under
    ``unplanned`` and counts as such when it may have a partition in scope on a drained broker.
    ``rack_aware_effective``/``rack_aware_reason`` say whether placement really was rack-aware.
    Never writes to ZooKeeper.

    :param cluster: the cluster's name (its artefact folder).
    :param brokers: the broker ids to drain (a list, or its JSON / comma-separated text).
    :param base_path: the artefact store (default: the provider's configured base).
    :param snapshot_path: the safety snapshot to plan from (default: the cluster's latest complete one,
        unless ``kafka_zookeeper_conn_id`` is set).
    :param kafka_zookeeper_conn_id: plan from a planning read of this connection's cluster instead
        of a snapshot (when ``snapshot_path`` is unset).
    :param inventory_ts: the inventory run whose sizes weigh the batches (default: this run's ts).
    :param scope: ``rf1`` (single-replica partitions only) or ``all`` (every replica on the brokers).
    :param excluded_topics: topics to leave where they are (a list, or its JSON / comma-separated text).
    :param max_partitions_per_batch: at most this many partitions move at once.
    :param max_bytes_per_batch: at most this many bytes move at once (unset: no byte limit).
    :param rack_aware: keep the replicas of a partition on distinct racks where the racks allow.
    :param allow_partial: plan what can move when some partitions in scope cannot (else fail).
    :param drain_ts: the run folder's name (default: this run's ts).
    :param artefacts_conn_id: the Airflow connection of a remote store (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "brokers",
        "snapshot_path",
        "kafka_zookeeper_conn_id",
        "inventory_ts",
        "scope",
        "excluded_topics",
        "max_partitions_per_batch",
        "max_bytes_per_batch",
        "allow_partial",
        "drain_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        brokers: Sequence[int] | str,
        base_path: str | None = None,
        snapshot_path: str | None = None,
        kafka_zookeeper_conn_id: str | None = None,
        inventory_ts: str | None = None,
        scope: str = "rf1",
        excluded_topics: Sequence[str] | str = (),
        max_partitions_per_batch: int | str = 500,
        max_bytes_per_batch: int | str | None = None,
        rack_aware: bool = True,
        allow_partial: bool | str = False,
        drain_ts: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.brokers = brokers
        self.base_path = base_path
        self.snapshot_path = snapshot_path
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.inventory_ts = inventory_ts
        self.scope = scope
        self.excluded_topics = excluded_topics
        self.max_partitions_per_batch = max_partitions_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.rack_aware = rack_aware
        self.allow_partial = allow_partial
        self.drain_ts = drain_ts

    def execute(self, context: Context) -> dict[str, Any]:
        allow_partial = parse_safety_flags(allow_partial=self.allow_partial)["allow_partial"]
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        try:
            drained = frozenset(int(b) for b in as_list(self.brokers))
        except (TypeError, ValueError) as exc:
            raise DrainError(f"cannot plan the drain: brokers {self.brokers!r}: {exc}") from exc
        snapshot = self.snapshot_path
        read: dict[str, Any] | None = None
        if is_unset(snapshot) and not is_unset(self.kafka_zookeeper_conn_id):
            state, identity, read, source = self._planning_read(drained)
            snapshot = None
        else:
            from airflow_provider_kafka_zk.artefacts.snapshots import (  # pyarrow
                latest_snapshot,
                read_snapshot,
            )

            if is_unset(snapshot):
                ref = latest_snapshot(base, self.cluster)
                if ref is None:
                    raise DrainError(f"no complete snapshot of cluster {self.cluster!r} under {base}")
                snapshot = ref.path
            manifest, rows = read_snapshot(str(snapshot))
            identity = snapshot_identity(manifest, str(snapshot))
            state = ClusterState.from_snapshot(rows, cluster=self.cluster)
            del rows
            source = f"the safety snapshot {snapshot}"
        in_flight = reassignments_in_flight(
            (t.assignment for t in state.topics.values()), state.reassign_partitions
        )
        if in_flight.any:
            from airflow_provider_kafka_zk.maintenance.drain import reassignment_owner

            topics = [t.assignment for t in state.topics.values()]
            cluster_root = "/".join([base.rstrip("/"), self.cluster])
            if is_unset(self.kafka_zookeeper_conn_id):
                owner = reassignment_owner(cluster_root, topics, state.reassign_partitions, None)
            else:
                with KafkaZooKeeperHook(str(self.kafka_zookeeper_conn_id)) as hook:
                    owner = reassignment_owner(cluster_root, topics, state.reassign_partitions, hook)
            raise ReassignmentInFlightError(
                f"{source} shows a reassignment in flight ({in_flight.describe()}): refusing to plan a drain "
                f"now. {owner}"
            )
        sizes, inventory_url = inventory_sizes(base, self.cluster, _resolve_ts(self.inventory_ts, context))
        if inventory_url is None:
            self.log.warning("No inventory for this run: partition sizes unknown, counted as 0 bytes")
        try:
            request = DrainRequest(
                brokers=drained,
                scope=self.scope,  # type: ignore[arg-type]
                excluded_topics=frozenset(str(t) for t in as_list(self.excluded_topics)),
                max_partitions_per_batch=int(self.max_partitions_per_batch),
                max_bytes_per_batch=optional_int(self.max_bytes_per_batch),
                rack_aware=self.rack_aware,
            )
            plan = plan_from_state(state, request, sizes=sizes)
        except ValueError as exc:
            raise DrainError(f"cannot plan the drain: {exc}") from exc

        location = DrainLocation.of(base, self.cluster, self.drain_ts or _resolve_ts(None, context))
        # The rollback plan exists before anything else does, let alone before anything changes.
        rollback = location.write(ROLLBACK_FILE, dumps_tool_json(plan.rollback_json()))
        reassignment = location.write(REASSIGNMENT_FILE, dumps_tool_json(plan.reassignment_json()))
        summary = plan.summary()
        document = plan_document(
            plan,
            cluster=self.cluster,
            run_id=context.get("run_id"),
            snapshot=None if snapshot is None else str(snapshot),
            snapshot_last_zxid=state.last_zxid,
            identity=identity,
            inventory=inventory_url,
            allow_partial=allow_partial,
            created_at=datetime.now(UTC).isoformat(),
            read=read,
            topics=topic_incarnations(state, (m.topic for m in plan.moves)),
        )
        plan_path = location.write(PLAN_FILE, json.dumps(document, indent=1))
        location.write(SUMMARY_FILE, summary + "\n")
        self.log.info("Drain plan %s\n%s", location.url, summary)
        result = {
            "plan_dir": location.url,
            "plan": plan_path,
            "reassignment": reassignment,
            "rollback": rollback,
            "summary": location.path(SUMMARY_FILE),
            "moves": len(plan.moves),
            "batches": len(plan.batches),
            "bytes": sum(m.size_bytes for m in plan.moves),
            "unmovable": len(plan.unmovable),
            "unsatisfiable": len(plan.unsatisfiable),
            "excluded": len(plan.excluded),
            "unplanned": len(plan.unplanned_topics),
            "rack_aware": plan.rack_aware,
            "complete": plan.complete,
        }
        if not plan.rack_aware and request.rack_aware:
            self.log.warning("Rack awareness was requested but is off: %s", plan.rack_aware_reason)
        if not plan.complete and not allow_partial:
            blocking = [t.topic_repr for t in plan.unplanned_topics if t.blocks_completion]
            unread = (
                f" and {len(blocking)} topic znode(s) that cannot be read may hold partitions on the drained "
                f"brokers ({', '.join(blocking[:10])}{', ...' if len(blocking) > 10 else ''})"
                if blocking
                else ""
            )
            raise IncompletePlanError(
                f"{len(plan.unmovable)} partition(s) cannot be moved and {len(plan.unsatisfiable)} have no "
                f"valid destination{unread} (see {location.path(SUMMARY_FILE)}); set allow_partial to drain "
                "the rest"
            )
        return result

    def _planning_read(
        self, drained: frozenset[int]
    ) -> tuple[ClusterState, ClusterIdentity, dict[str, Any], str]:
        """(model, identity, ``plan.json``'s ``read``, how messages name it) from a planning read."""
        with KafkaZooKeeperHook(str(self.kafka_zookeeper_conn_id)) as hook:
            found = planning_read(hook, drained, self.cluster, str(self.scope))
            where = f"ZooKeeper ({hook.describe_path('/')}, planning read)"
            identity = snapshot_identity(
                {"cluster_id": found.state.cluster_id, "source": hook.target_description()}, where
            )
        self.log.info(
            "Planning read of %s: %d znodes in %.2fs, zxid 0x%x..0x%x, %s",
            where,
            found.znodes,
            found.duration_s,
            found.start_zxid,
            found.end_zxid,
            "consistent" if found.consistent else "fuzzy",
        )
        return found.state, identity, found.record(), where


# ---------------------------------------------------------------------------------------------
# Execute
# ---------------------------------------------------------------------------------------------


class BatchWaitMixin:
    """A batch's wait handed to the triggerer (:class:`ReassignmentTrigger`) and the resume after it,
    for the operators that carry out drain-shaped batches (the drain and move-back, the undo). The
    operator has ``kafka_zookeeper_conn_id``, ``poll_interval``, ``batch_timeout``, ``plan_dir``."""

    WAIT_LABEL = "drain"

    def execute_complete(
        self, context: Context, event: dict[str, Any], batch: int | None = None
    ) -> dict[str, Any]:
        """The resume after a batch's wait: the operator's own ``_run`` with the wait's outcome."""
        return self._run(context, waited=self._waited(event, batch))  # type: ignore[attr-defined]

    def _waited(self, event: dict[str, Any], batch: int | None) -> tuple[int, str]:
        """(batch index, message) of a wait that ended with the batch complete; else its typed error
        (with the commands that remove the run's throttles)."""
        step = after_wait(event, batch_timeout=float(self.batch_timeout), batch=batch)  # type: ignore[attr-defined]
        if step.action is Action.REFUSE:
            from airflow_provider_kafka_zk.maintenance.drain import throttle_advice

            raise refusal_error(step, throttle_advice(self.plan_dir))  # type: ignore[attr-defined]
        self.log.info("%s", step.message)  # type: ignore[attr-defined]
        return step.batch or 0, step.message

    def _defer_until_done(self, batches: Sequence[Batch], index: int, cluster: str, rate: int) -> None:
        """Hand the wait to the trigger; ``execute_complete`` resumes after it. The trigger publishes
        the run's progress (partitions and bytes left, estimated time to finish) as it polls."""
        from airflow_provider_kafka_zk.metrics.runs import reassignment_wait_metrics

        batch = batches[index]
        self.defer(  # type: ignore[attr-defined]
            trigger=ReassignmentTrigger(
                kafka_zookeeper_conn_id=str(self.kafka_zookeeper_conn_id),  # type: ignore[attr-defined]
                targets=encode_targets(targets_of(batch)),
                sizes=[[m.topic, m.partition, m.size_bytes] for m in batch],
                poll_interval=float(self.poll_interval),  # type: ignore[attr-defined]
                deadline=time.time() + float(self.batch_timeout),  # type: ignore[attr-defined]
                label=f"{self.WAIT_LABEL} batch {index + 1}/{len(batches)}",
                echo={"batch": index},
                metrics=reassignment_wait_metrics(cluster, self.dag_id, batches, index, rate),  # type: ignore[attr-defined]
            ),
            method_name="execute_complete",
        )


class DrainExecuteOperator(BatchWaitMixin, BaseOperator):
    """Carry out the plan batch by batch as Kafka's ZooKeeper tooling does, waiting in a trigger.

    A thin shell: it parses its inputs and hands the plan to the step executor
    (:func:`~airflow_provider_kafka_zk.maintenance.drain.execute_drain`). The plan's batches become
    typed steps -- per batch, its throttles (recorded in ``throttles.json`` before each write), then
    the batch: *create* ``/admin/reassign_partitions`` without ``log_dirs``, then defer until Kafka's
    completion rule holds; the resumed task continues from ``progress.json``. Every remaining step is
    checked before the try's first write (the dry run, the default, runs every check and writes
    nothing): every target broker registered, every moved topic the incarnation the plan read, its
    partitions where the plan found them, no reassignment in flight that is not this plan's (named,
    with whose it is), and a retry never submits twice. Also carries out a post-maintenance move-back
    (written as a drain plan).

    A plan made from a planning read of ZooKeeper (``plan.json`` has ``read``) is first checked,
    before any batch is decided: the run's safety snapshot (``snapshot_path``, the rollback and audit
    evidence) must show the cluster the plan read, and, while this run has written nothing yet,
    so must ZooKeeper: same cluster id, no reassignment in flight, and every topic with a replica
    on a drained broker (in either read) with the same topic znode (czxid, version) and deletion
    marker (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.read_disagreements`). Any
    difference refuses with :class:`~.drain_artefacts.PlanReadDisagreementError`, dry run or not.

    :param plan_dir: the drain run's folder (the plan task's ``plan_dir``).
    :param throttle_bytes_per_sec: the replication throttle, in bytes per second (positive).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param dry_run: only check and log what would be written (the default).
    :param poll_interval: seconds between the trigger's looks at a batch's progress.
    :param batch_timeout: seconds a batch may take before the task fails (the batch keeps running).
    :param snapshot_path: the run's safety snapshot, which a plan from a planning read must agree with
        (required for such a plan; unused for a plan made from a snapshot).
    :param artefacts_conn_id: the Airflow connection of a remote store (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "throttle_bytes_per_sec",
        "dry_run",
        "kafka_zookeeper_conn_id",
        "poll_interval",
        "batch_timeout",
        "snapshot_path",
        "artefacts_conn_id",
    )
    ui_color = "#fadbd8"

    def __init__(
        self,
        *,
        plan_dir: str,
        throttle_bytes_per_sec: int | str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        dry_run: bool | str = True,
        poll_interval: float | str = 10.0,
        batch_timeout: float | str = 6 * 3600,
        snapshot_path: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.plan_dir = plan_dir
        self.throttle_bytes_per_sec = throttle_bytes_per_sec
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.dry_run = dry_run
        self.poll_interval = poll_interval
        self.batch_timeout = batch_timeout
        self.snapshot_path = snapshot_path

    def execute(self, context: Context) -> dict[str, Any]:
        if is_unset(self.plan_dir):
            raise DrainError("no plan to execute (the plan task produced none)")
        return self._run(context, waited=None)

    def _run(self, context: Context, waited: tuple[int, str] | None) -> dict[str, Any]:
        from airflow_provider_kafka_zk.maintenance.drain import execute_drain
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        # Flags and numbers first: a typo must refuse before anything is read or written.
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        rate = positive_int(self.throttle_bytes_per_sec, "throttle_bytes_per_sec")
        artefacts_url(str(self.plan_dir), self.artefacts_conn_id)  # bind the store (also after a deferral)
        plan = load_plan(str(self.plan_dir))
        batches = plan_batches(plan)
        resumed = waited is not None
        check = (
            None if resumed or not plan.get("read") else (lambda hook: self._check_read_agreement(hook, plan))
        )
        execute_drain(
            str(self.plan_dir),
            plan,
            batches,
            kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
            rate=rate,
            run=RunIdentity.from_context(context, fallback_run_id=str(self.plan_dir)),
            dry_run=dry_run,
            expected=plan_identity(plan, str(self.plan_dir)),
            poll_interval=float(self.poll_interval),
            batch_timeout=float(self.batch_timeout),
            defer_wait=lambda step: self._defer_until_done(batches, step.batch, str(plan["cluster"]), rate),
            waited=waited,
            before_steps=check,
            approval=approved_plan(self, context),  # a real run: the approved plan, unchanged, or nothing
        )
        done = sum(len(b) for b in batches)
        if dry_run:
            self.log.info(
                "DRY RUN: nothing was written to ZooKeeper (%d batch(es) checked and described above)",
                len(batches),
            )
        else:
            self.log.info("All %d batch(es) complete: %d partition(s) moved", len(batches), done)
        return {"plan_dir": self.plan_dir, "batches": len(batches), "partitions": done, "dry_run": dry_run}

    def _check_read_agreement(self, hook: KafkaZooKeeperHook, plan: Mapping[str, Any]) -> None:
        """Refuse unless the safety snapshot, and ZooKeeper while this run has written nothing, show
        the cluster the plan read (see the class docstring)."""
        planned = plan["read"]
        drained = frozenset(int(b) for b in plan["request"]["brokers"])
        if is_unset(self.snapshot_path):
            raise PlanReadDisagreementError(
                f"{self.plan_dir}/{PLAN_FILE} was made from a planning read of ZooKeeper, and this step was "
                "given no safety snapshot (snapshot_path) to check it against: refusing to change a cluster "
                "without rollback evidence of the state the plan was made from"
            )
        evidence = read_record(topic_level_state(str(self.snapshot_path)), drained)
        problems = read_disagreements(planned, evidence, f"the safety snapshot {self.snapshot_path}")
        if not DrainLocation(str(self.plan_dir)).exists(THROTTLES_FILE):
            # nothing written by this run yet: ZooKeeper must still be what the plan read
            now = planning_read(hook, drained, scope=str(plan["request"]["scope"])).record()
            problems += read_disagreements(planned, now, f"ZooKeeper now ({hook.describe_path('/')})")
        if problems:
            raise PlanReadDisagreementError(
                f"the plan {self.plan_dir}/{PLAN_FILE} was made from a read of ZooKeeper (zxid "
                f"{planned.get('start_zxid', 0):#x}..{planned.get('end_zxid', 0):#x}) that "
                f"{len(problems)} later look(s) contradict: "
                + "; ".join(problems[:10])
                + ": refusing before any write; make a new plan (run the DAG again)"
            )
        self.log.info(
            "The safety snapshot %s and ZooKeeper agree with the plan's read on every topic that matters "
            "to the drain",
            self.snapshot_path,
        )
        # the post-maintenance run finds the drain's safety snapshot here (plan.json has none)
        DrainLocation(str(self.plan_dir)).write(
            SAFETY_SNAPSHOT_FILE,
            json.dumps({"snapshot": str(self.snapshot_path), "checked_at": datetime.now(UTC).isoformat()}),
        )


# ---------------------------------------------------------------------------------------------
# Clear throttles (finally step)
# ---------------------------------------------------------------------------------------------


class ClearReplicationThrottlesOperator(BaseOperator):
    """Remove exactly the throttle values this run set (``throttles.json``), with notifications.

    Runs whatever happened upstream (trigger rule ``all_done``). A thin shell around
    :func:`~airflow_provider_kafka_zk.maintenance.drain.clear_throttles` (one step per entity on the
    step executor, checked before the first write). A value someone changed since is left alone
    with a warning. While a partition of this plan is still moving, the throttles stay (removing
    them would unthrottle it) and the task fails saying so, unless ``force``
    (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.clear_step` decides). Gives the run's
    maintenance lease back.

    :param plan_dir: the drain run's folder (unset: no plan was made, nothing to clear).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param dry_run: only log what would be removed (the default).
    :param force: remove the throttles even while partitions of the plan still move.
    :param artefacts_conn_id: the Airflow connection of a remote store (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = ("plan_dir", "dry_run", "kafka_zookeeper_conn_id", "artefacts_conn_id")
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        plan_dir: str | None,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        dry_run: bool | str = True,
        force: bool | str = False,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.dry_run = dry_run
        self.force = force

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.maintenance.drain import clear_throttles, release_lease_if_ours
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        flags = parse_safety_flags(dry_run=self.dry_run, force=self.force)
        dry_run, force = flags["dry_run"], flags["force"]
        if is_unset(self.plan_dir):
            self.log.info("No plan was made: no throttles to clear")
            return {"cleared": {}, "changed_by_others": {}}
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = load_plan(location.url)
        run = RunIdentity.from_context(context, fallback_run_id=location.url)
        expected = plan_identity(plan, location.url)
        if not location.exists(THROTTLES_FILE):
            self.log.info(
                "This run set no throttles (%s absent): nothing to clear", location.path(THROTTLES_FILE)
            )
            if not dry_run:
                release_lease_if_ours(
                    location.url,
                    plan,
                    kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
                    run=run,
                    expected=expected,
                )
            return {"cleared": {}, "changed_by_others": {}}
        result = clear_throttles(
            location.url,
            plan,
            plan_batches(plan),
            load_throttle_record(location),
            kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
            run=run,
            dry_run=dry_run,
            force=force,
            expected=expected,
            approval=approved_plan(self, context),  # a real run: the drain's approved plan, or nothing
        )
        if not dry_run:
            location.write(THROTTLES_CLEARED_FILE, json.dumps(result, indent=1, sort_keys=True))
        return result


# ---------------------------------------------------------------------------------------------
# Verify
# ---------------------------------------------------------------------------------------------


class DrainVerifyOperator(BaseOperator):
    """Check the result from ZooKeeper (and, given a post-drain inventory, the disks); write a report.

    Fails when a drained broker still holds a partition in scope that the plan did not list as
    unmovable/unsatisfiable/excluded, when a moved partition lacks a leader or a full ISR, or when
    the inventory shows a moved partition's data still on a drained broker or missing on its target
    (:func:`~airflow_provider_kafka_zk.kafka.drain_execution.verify_outcome` decides).

    :param plan_dir: the drain run's folder.
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param inventory_path: an inventory run taken after the drain (unset: disks are not checked).
    :param artefacts_conn_id: the Airflow connection of a remote store (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "kafka_zookeeper_conn_id",
        "inventory_path",
        "artefacts_conn_id",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        plan_dir: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        inventory_path: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.inventory_path = inventory_path

    def execute(self, context: Context) -> dict[str, Any]:
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = load_plan(location.url)
        batches = plan_batches(plan)
        request = plan["request"]
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            topics = read_all_topics(hook)
            states = read_states(hook, [(m.topic, m.partition) for batch in batches for m in batch])
            throttles_left = {}
            if location.exists(THROTTLES_FILE):
                throttles_left = throttles_still_set(hook, load_throttle_record(location)["entities"])
        inventory = None if is_unset(self.inventory_path) else inventory_dirs(str(self.inventory_path))
        outcome = verify_outcome(
            batches,
            drained=frozenset(request["brokers"]),
            scope=request["scope"],
            excluded_topics=frozenset(request["excluded_topics"]),
            known_left=left_behind(plan),
            topics=topics,
            states=states,
            inventory=inventory,
            throttles_left=throttles_left,
        )
        disk: dict[str, Any] = {"checked": False}
        if inventory is not None:
            disk = {"checked": True, "inventory": self.inventory_path, "brokers": sorted(inventory)}
        result = {
            "plan_dir": self.plan_dir,
            "verified_at": datetime.now(UTC).isoformat(),
            "ok": outcome.ok,
            "problems": list(outcome.problems),
            "moved": list(outcome.moved),
            "left_on_drained_brokers": list(outcome.left_on_drained),
            "disk": disk,
            "throttles_left": throttles_left,
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1))
        report = report_text(plan, location, result)
        location.write(REPORT_FILE, report)
        self.log.info("%s", report)
        if outcome.problems:
            raise DrainVerificationError(
                f"drain not verified ({len(outcome.problems)} problem(s)): "
                + "; ".join(outcome.problems[:10])
            )
        return {"ok": True, "report": location.path(REPORT_FILE), "verify": location.path(VERIFY_FILE)}


__all__ = [
    "ClearReplicationThrottlesOperator",
    "DrainExecuteOperator",
    "DrainPlanOperator",
    "DrainVerifyOperator",
]
