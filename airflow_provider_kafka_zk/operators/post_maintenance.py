"""After maintenance: health gate, move-back of a drain's partitions, preferred leader election, verify.

Thin shells around :mod:`~airflow_provider_kafka_zk.kafka.post_maintenance` (gate, move-back plan)
and :mod:`~airflow_provider_kafka_zk.kafka.leadership` (Kafka's imbalance and election rules).
The move-back is written as a drain plan (``plan.json`` in the drain's format, ``rollback.json``
first), so it runs through the drain's own throttled, locked, batched execution and throttle
clearing. Artefacts: ``<base>/<cluster>/post-maintenance/<ts>/``: ``rollback.json``,
``reassignment.json``, ``plan.json``, ``summary.txt``, then the drain execution's files,
``election.json``, ``verify.json`` and ``report.txt``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import fsspec
from airflow.sdk import BaseOperator

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import (
    latest_snapshot,
    read_snapshot,
    read_snapshot_without_partitions,
    validate_cluster_name,
)
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.audit import controller_rebalance_rule
from airflow_provider_kafka_zk.kafka.drain import batches_json, dumps_tool_json
from airflow_provider_kafka_zk.kafka.leadership import (
    DEFAULT_MAX_ELECTION_BYTES,
    DEFAULT_MAX_ELECTION_PARTITIONS,
    AutoRebalance,
    ElectedBeforeUs,
    ElectionScope,
    choose_election,
    elected_before_us,
    election_report_line,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.post_maintenance import (
    DrainedMove,
    batch_moves,
    count_under_replicated,
    health_gate,
    move_back_from_state,
    plan_summary,
    report_text,
)
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.maintenance.leader_election import (
    ELECTION_FILE,
    ElectionInFlightError,
    PostMaintenanceError,
    read_leadership,
    run_election,
)
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.operators.approved_plan import approved_plan
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    PLAN_FILE,
    PLAN_FORMAT,
    REASSIGNMENT_FILE,
    REPORT_FILE,
    ROLLBACK_FILE,
    SAFETY_SNAPSHOT_FILE,
    SUMMARY_FILE,
    VERIFY_FILE,
    DrainLocation,
    RunVerifyOperator,
    as_list,
    inventory_sizes,
    is_unset,
    load_plan,
    plan_identity,
    positive_int,
    snapshot_identity,
    topic_incarnations,
)
from airflow_provider_kafka_zk.spark_jobs.audit import load_inputs, run_in_process

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

IMBALANCE_CHECK = "preferred-leader-imbalance"
THROTTLE_CHECK = "throttle-left-set"


class DrainRunNotFoundError(PostMaintenanceError):
    pass


class HealthGateError(PostMaintenanceError):
    """The cluster is not back in shape: nothing is moved or elected until it is."""


class PostMaintenanceVerificationError(PostMaintenanceError):
    pass


def _optional_int(value: Any, name: str) -> int | None:
    if value is None or value == "" or value == "None":
        return None
    if isinstance(value, bool):
        raise PostMaintenanceError(f"{name} must be a whole number >= 0, not {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise PostMaintenanceError(f"{name} must be a whole number >= 0, not {value!r}")
    return number


def _brokers(value: Any, name: str) -> list[int]:
    items = as_list(value)
    if not all(
        (isinstance(b, int) and not isinstance(b, bool)) or (isinstance(b, str) and b.isdigit())
        for b in items
    ):
        raise PostMaintenanceError(f"{name} must list broker ids, not {value!r}")
    return sorted({int(b) for b in items})


def find_drain_run(base: str, cluster: str, drain_run: str) -> DrainLocation:
    """The drain run's folder from its folder name, its full path/URL, or its Airflow run id.

    DrainRunNotFoundError listing the drain runs that exist when nothing matches.
    """
    validate_cluster_name(cluster)
    text = str(drain_run).strip()
    if "/" in text:
        location = DrainLocation(text.rstrip("/"))
        if not location.exists(PLAN_FILE):
            raise DrainRunNotFoundError(f"{location.path(PLAN_FILE)} does not exist: not a drain run folder")
        return location
    root = "/".join([base.rstrip("/"), cluster, "drain"])
    fs, path = fsspec.core.url_to_fs(root)
    names = (
        sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)) if fs.exists(path) else []
    )
    if text in names:
        return DrainLocation(f"{root}/{text}")
    for name in reversed(names):
        location = DrainLocation(f"{root}/{name}")
        if location.exists(PLAN_FILE) and location.read_json(PLAN_FILE).get("run_id") == text:
            return location
    raise DrainRunNotFoundError(
        f"no drain run {text!r} of cluster {cluster} under {root} (by folder name or Airflow run id); "
        f"drain runs there: {', '.join(names[-10:]) or 'none'}"
    )


def drained_moves(
    location: DrainLocation, *, identify: bool = True
) -> tuple[list[DrainedMove], dict[str, Any]]:
    """The drain's moves (its plan) with where each partition was before (its rollback.json) and
    which topic the drain moved (:func:`drained_incarnations`; ``identify`` false: not looked up,
    for a run that moves nothing back)."""
    plan = load_plan(location.url)
    rollback = location.read_json(ROLLBACK_FILE)
    try:
        before = {(e["topic"], int(e["partition"])): tuple(e["replicas"]) for e in rollback["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise PostMaintenanceError(f"{location.path(ROLLBACK_FILE)} is unreadable ({exc})") from None
    if not plan.get("snapshot") and location.exists(SAFETY_SNAPSHOT_FILE):
        # a plan from a planning read names no snapshot: the one its execute step checked it against
        plan = {**plan, "snapshot": location.read_json(SAFETY_SNAPSHOT_FILE).get("snapshot")}
    incarnations = drained_incarnations(location, plan) if identify else {}
    moves = []
    for batch in plan["batches"]:
        for m in batch:
            key = (m["topic"], int(m["partition"]))
            original = before.get(key)
            if original is None or list(original) != list(m["current"]):
                raise PostMaintenanceError(
                    f"{location.path(ROLLBACK_FILE)} does not hold {key[0]}-{key[1]} as the plan moved it "
                    f"(plan: from {m['current']}, rollback: {None if original is None else list(original)})"
                )
            topic_id, czxid = incarnations.get(key[0], (None, None))
            moves.append(
                DrainedMove(
                    key[0], key[1], tuple(original), tuple(m["target"]), int(m["size_bytes"]), topic_id, czxid
                )
            )
    return moves, plan


def drained_incarnations(
    location: DrainLocation, plan: Mapping[str, Any]
) -> dict[str, tuple[str | None, int]]:
    """Each topic the drain moved, as the drain read it: (topic id, znode czxid).

    From ``plan.json``'s ``topics`` (plans record them); for a plan made before that, from what the
    drain planned from -- its planning read's czxids (``read``) or its safety snapshot -- which is
    the same information. A drain whose records hold neither refuses the move-back: a topic deleted
    and created again under the same name could not be told from the one the drain moved.
    """
    moved = sorted({str(m["topic"]) for batch in plan["batches"] for m in batch})
    recorded = plan.get("topics") or {}
    if all(t in recorded for t in moved):
        return {t: (recorded[t].get("topic_id"), int(recorded[t]["czxid"])) for t in moved}
    read = (plan.get("read") or {}).get("topics") or {}
    if all(t in read for t in moved):
        return {t: (None, int(read[t][0])) for t in moved}  # czxids: the incarnation, ids not read
    snapshot = plan.get("snapshot")
    problem = "it names no snapshot"
    if snapshot:
        try:
            _, rows = read_snapshot_without_partitions(str(snapshot))
            state = ClusterState.from_snapshot(rows, partial_read=True)
        except Exception as exc:  # named in the refusal below
            problem = f"its snapshot {snapshot} is unreadable ({type(exc).__name__}: {exc})"
        else:
            found = topic_incarnations(state, moved)
            if all(t in found for t in moved):
                log.info(
                    "The drain's topics identified from its snapshot %s (plan.json predates them)", snapshot
                )
                return {t: (found[t]["topic_id"], int(found[t]["czxid"])) for t in moved}
            problem = f"its snapshot {snapshot} lacks {sorted(set(moved) - set(found))}"
    raise PostMaintenanceError(
        f"the drain run {location.url} records neither its topics' ids nor their znodes' creation zxids "
        f"({location.path(PLAN_FILE)} was made by an older version, and {problem}): a topic deleted and "
        "created again under the same name could not be told from the one the drain moved, so nothing is "
        "moved back by name. Run with move_back=false (the gate and the election still run) and put the "
        f"partitions back by hand from {location.path(ROLLBACK_FILE)} after checking each topic"
    )


class PostMaintenancePlanOperator(BaseOperator):
    """Gate the cluster's health, then plan moving a drain's partitions back and which leaders to elect.

    Fails (HealthGateError) unless the returning brokers are registered, no partition lacks a live
    leader and under-replicated partitions are back at the pre-maintenance count (the drain's safety
    snapshot, or ``max_under_replicated``). The drain's partitions are recognised by their topic's id
    and znode czxid, not by name (:func:`drained_incarnations`): partitions moved since the drain,
    gone, moving now, of a topic deleted and created again since, or whose original brokers are not
    all registered now are reported, never moved. Writes ``rollback.json`` first, then the move-back
    as a drain plan (with the topics' incarnations, which its execution pins).

    :param cluster: the cluster's name.
    :param brokers: the brokers the maintenance stopped (default: the drain's brokers).
    :param drain_run: the drain run to undo: its folder name, path/URL or Airflow run id ("" = none).
    :param snapshot_path: the fresh snapshot (default: the latest).
    :param inventory_ts: this run's inventory folder name (partition sizes).
    :param max_under_replicated: the URP count the gate accepts (default: the drain's snapshot, else 0).
    :param move_back: plan the move-back (true/false).
    :param max_partitions_per_batch: move-back batch size (default: the drain's).
    :param max_bytes_per_batch: move-back batch bytes (default: the drain's).
    :param run_ts: this run's folder name (default: from the run).
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "brokers",
        "drain_run",
        "snapshot_path",
        "inventory_ts",
        "max_under_replicated",
        "move_back",
        "max_partitions_per_batch",
        "max_bytes_per_batch",
        "run_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        brokers: Sequence[int] | str = (),
        drain_run: str | None = None,
        base_path: str | None = None,
        snapshot_path: str | None = None,
        inventory_ts: str | None = None,
        max_under_replicated: int | str | None = None,
        move_back: bool | str = True,
        max_partitions_per_batch: int | str | None = None,
        max_bytes_per_batch: int | str | None = None,
        run_ts: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.brokers = brokers
        self.drain_run = drain_run
        self.base_path = base_path
        self.snapshot_path = snapshot_path
        self.inventory_ts = inventory_ts
        self.max_under_replicated = max_under_replicated
        self.move_back = move_back
        self.max_partitions_per_batch = max_partitions_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.run_ts = run_ts

    def execute(self, context: Context) -> dict[str, Any]:
        # flags and numbers first: a typo refuses before anything is read
        move_back = parse_safety_flags(move_back=self.move_back)["move_back"]
        brokers = _brokers(self.brokers, "brokers")
        baseline_given = _optional_int(self.max_under_replicated, "max_under_replicated")
        max_partitions = _optional_int(self.max_partitions_per_batch, "max_partitions_per_batch")
        max_bytes = _optional_int(self.max_bytes_per_batch, "max_bytes_per_batch")
        if max_partitions == 0 or max_bytes == 0:
            raise PostMaintenanceError("batch limits must be positive")
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        validate_cluster_name(self.cluster)

        drain = None if is_unset(self.drain_run) else find_drain_run(base, self.cluster, str(self.drain_run))
        drained, drain_plan = drained_moves(drain, identify=move_back) if drain is not None else ([], None)
        if not brokers and drain_plan is not None:
            brokers = list(drain_plan["request"]["brokers"])
        if not brokers:
            raise PostMaintenanceError(
                "name the brokers the maintenance stopped (brokers) or the drain run that moved their "
                "partitions (drain_run): the gate and the election need them"
            )

        snapshot = self.snapshot_path
        if is_unset(snapshot):
            ref = latest_snapshot(base, self.cluster)
            if ref is None:
                raise PostMaintenanceError(f"no complete snapshot of cluster {self.cluster!r} under {base}")
            snapshot = ref.path
        manifest, rows = read_snapshot(str(snapshot))
        identity = snapshot_identity(manifest, str(snapshot))
        state = ClusterState.from_snapshot(rows, cluster=self.cluster)
        if drain_plan is not None and drain_plan.get("identity", {}).get("cluster_id") != identity.cluster_id:
            raise PostMaintenanceError(
                f"the drain run {drain.url} was made on cluster id "
                f"{drain_plan.get('identity', {}).get('cluster_id')}, this cluster is {identity.cluster_id}"
            )

        baseline, baseline_from = self._baseline(baseline_given, drain_plan)
        gate = health_gate(state, brokers, baseline)
        location = DrainLocation(
            "/".join(
                [
                    base.rstrip("/"),
                    self.cluster,
                    "post-maintenance",
                    self.run_ts or _resolve_ts(None, context),
                ]
            )
        )

        sizes, _ = inventory_sizes(base, self.cluster, _resolve_ts(self.inventory_ts, context))
        back = move_back_from_state(drained if move_back else [], state, sizes=sizes)
        request = dict(drain_plan["request"]) if drain_plan is not None else {"scope": "all"}
        limit = max_partitions or int(request.get("max_partitions_per_batch") or 100)
        byte_limit = max_bytes if max_bytes is not None else request.get("max_bytes_per_batch")
        batches = batch_moves(back.moves, max_partitions=limit, max_bytes=byte_limit)
        choice = choose_election(state, ElectionScope(brokers=frozenset(brokers)))

        # The rollback artefact exists before anything else does: the assignment it changes from.
        location.write(
            ROLLBACK_FILE,
            dumps_tool_json(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": m.topic, "partition": m.partition, "replicas": list(m.current)}
                        for m in back.moves
                    ],
                }
            ),
        )
        location.write(
            REASSIGNMENT_FILE,
            dumps_tool_json(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": m.topic, "partition": m.partition, "replicas": list(m.target)}
                        for m in back.moves
                    ],
                }
            ),
        )
        document = {
            # a drain plan, so the drain's execution and throttle clearing carry it out as they are
            "format": PLAN_FORMAT,
            "version": 1,
            "kind": "post-maintenance",
            "cluster": self.cluster,
            "created_at": datetime.now(UTC).isoformat(),
            "run_id": context.get("run_id"),
            "snapshot": str(snapshot),
            "snapshot_last_zxid": state.last_zxid,
            "identity": identity.to_dict(),
            "restores": None if drain is None else drain.url,
            "restores_run_id": None if drain_plan is None else drain_plan.get("run_id"),
            "returning_brokers": brokers,
            "request": {
                "brokers": brokers,
                "scope": request.get("scope", "all"),
                "excluded_topics": [],
                "max_partitions_per_batch": limit,
                "max_bytes_per_batch": byte_limit,
                "rack_aware": False,
                "allow_partial": True,
            },
            "complete": True,
            "batches": batches_json(batches),
            "topics": topic_incarnations(state, (m.topic for m in back.moves)),
            "unmovable": [],
            "unsatisfiable": [],
            "excluded": [],
            "unplanned": [],
            "gate": {
                "passed": gate.passed,
                "problems": gate.problems,
                "baseline_under_replicated": baseline,
                "baseline_from": baseline_from,
                "under_replicated": [f"{t}-{p}" for t, p in gate.under_replicated],
            },
            "move_back": {
                "requested": move_back,
                "already_back": [f"{t}-{p}" for t, p in back.already_back],
                "untouched": [u.describe() for u in back.untouched],
            },
            "election_preview": {
                "brokers": brokers,
                "electable_now": [f"{t}-{p}" for t, p in choice.electable],
                "not_electable_now": [n.describe() for n in choice.not_electable],
            },
        }
        location.write(PLAN_FILE, json.dumps(document, indent=1))
        summary = plan_summary(document, len(back.moves))
        location.write(SUMMARY_FILE, summary + "\n")
        self.log.info("Post-maintenance plan %s\n%s", location.url, summary)
        if not gate.passed:
            raise HealthGateError(
                f"cluster {self.cluster} is not back in shape, nothing will be moved or elected: "
                + "; ".join(gate.problems)
                + ". Bring the brokers back (or wait for the ISRs to fill) and trigger this DAG again."
            )
        return {
            "plan_dir": location.url,
            "moves": len(back.moves),
            "batches": len(batches),
            "untouched": len(back.untouched),
            "brokers": brokers,
            "electable_now": len(choice.electable),
        }

    def _baseline(self, given: int | None, drain_plan: Mapping[str, Any] | None) -> tuple[int, str]:
        if given is not None:
            return given, "max_under_replicated"
        if drain_plan is not None and drain_plan.get("snapshot"):
            try:
                _, rows = read_snapshot(str(drain_plan["snapshot"]))
            except Exception as exc:  # the count is advisory: say why it is not used
                self.log.warning(
                    "The drain's snapshot %s is unreadable (%s): baseline 0", drain_plan["snapshot"], exc
                )
                return 0, f"0 (the drain's snapshot {drain_plan['snapshot']} is unreadable)"
            before = ClusterState.from_snapshot(rows)
            return count_under_replicated(before), f"the drain's safety snapshot {drain_plan['snapshot']}"
        return 0, "default (no drain run named)"


# ---------------------------------------------------------------------------------------------
# Preferred leader election
# ---------------------------------------------------------------------------------------------


class PreferredLeaderElectionOperator(BaseOperator):
    """Elect preferred leaders through ``/admin/preferred_replica_election``, as Kafka's ZooKeeper tool did.

    A thin shell around :func:`~airflow_provider_kafka_zk.maintenance.leader_election.run_election`
    (the step executor: every request checked before the first write). Creates the znode (never
    overwrites: one in flight that is not this run's refuses), in batches bounded by partitions and
    bytes, each after the last was processed (the controller deletes the znode); waits deferrably
    (``deferrable``) or in the task. Only partitions an election can move (preferred replica alive and
    in the ISR) are requested; the rest are reported with the reason. A retried task continues with
    the same requests and never requests a partition twice. Writes ``election.json`` (what was
    requested, what moved, what did not and why). Dry run by default.

    :param cluster: the cluster's name (artefact folder).
    :param kafka_zookeeper_conn_id: the ZooKeeper connection of the cluster (with its chroot).
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param brokers: only partitions whose preferred replica is one of these (default: any).
    :param topics: only partitions of these topics (default: any).
    :param artefact_dir: where ``election.json`` goes (default ``<base>/<cluster>/leader-election/<ts>``).
    :param plan_dir: a post-maintenance plan to pin the cluster identity to (optional).
    :param dry_run: only say what would be elected (true/false).
    :param max_partitions_per_batch: partitions per znode.
    :param max_bytes_per_batch: bytes per znode (under ZooKeeper's ``jute.maxbuffer``).
    :param poll_interval: seconds between checks while the controller works.
    :param timeout: seconds to wait for the controller per batch.
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = (
        "cluster",
        "kafka_zookeeper_conn_id",
        "brokers",
        "topics",
        "base_path",
        "artefacts_conn_id",
        "artefact_dir",
        "plan_dir",
        "dry_run",
        "max_partitions_per_batch",
        "max_bytes_per_batch",
        "poll_interval",
        "timeout",
    )
    ui_color = "#fadbd8"

    def __init__(
        self,
        *,
        cluster: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        brokers: Sequence[int] | str | None = None,
        topics: Sequence[str] | str | None = None,
        base_path: str | None = None,
        artefact_dir: str | None = None,
        plan_dir: str | None = None,
        dry_run: bool | str = True,
        max_partitions_per_batch: int | str = DEFAULT_MAX_ELECTION_PARTITIONS,
        max_bytes_per_batch: int | str = DEFAULT_MAX_ELECTION_BYTES,
        poll_interval: float | str = 5.0,
        timeout: float | str = 600.0,
        deferrable: bool | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        if deferrable is None:
            from airflow.configuration import conf

            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.cluster = cluster
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.brokers = brokers
        self.topics = topics
        self.base_path = base_path
        self.artefact_dir = artefact_dir
        self.plan_dir = plan_dir
        self.dry_run = dry_run
        self.max_partitions_per_batch = max_partitions_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.deferrable = deferrable

    # ------------------------------------------------------------------ inputs
    def _scope(self) -> ElectionScope:
        brokers = None if self.brokers in (None, "", "None") else frozenset(_brokers(self.brokers, "brokers"))
        topics = None
        if self.topics not in (None, "", "None"):
            names = as_list(self.topics)
            if not all(isinstance(t, str) and t for t in names):
                raise PostMaintenanceError(f"topics must list topic names, not {self.topics!r}")
            topics = frozenset(names)
        return ElectionScope(brokers=brokers or None, topics=topics or None)

    def _numbers(self) -> tuple[int, int, float, float]:
        partitions = positive_int(self.max_partitions_per_batch, "max_partitions_per_batch")
        size = positive_int(self.max_bytes_per_batch, "max_bytes_per_batch")
        try:
            poll, timeout = float(self.poll_interval), float(self.timeout)
        except (TypeError, ValueError):
            poll = timeout = -1.0
        if not (poll > 0 and timeout > 0):
            raise PostMaintenanceError(
                f"poll_interval and timeout must be positive seconds, not {self.poll_interval!r}, {self.timeout!r}"
            )
        return partitions, size, poll, timeout

    def _location(self, context: Context) -> DrainLocation:
        if not is_unset(self.artefact_dir):
            return DrainLocation(artefacts_url(str(self.artefact_dir), self.artefacts_conn_id))
        validate_cluster_name(self.cluster)
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        return DrainLocation(
            "/".join([base.rstrip("/"), self.cluster, "leader-election", _resolve_ts(None, context)])
        )

    # ------------------------------------------------------------------ run
    def execute(self, context: Context) -> dict[str, Any]:
        return self._run(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "complete":
            raise PostMaintenanceError(
                f"preferred leader election: {event.get('message')}. The znode "
                f"{znodes.PREFERRED_REPLICA_ELECTION} stays for the controller to process; clear this task "
                "to keep waiting (nothing is requested twice)"
            )
        return self._run(context)

    def _run(self, context: Context) -> dict[str, Any]:
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        scope = self._scope()
        max_partitions, max_bytes, poll, timeout = self._numbers()
        location = self._location(context)
        expected = None
        if not is_unset(self.plan_dir):
            plan_dir = artefacts_url(str(self.plan_dir), self.artefacts_conn_id)
            expected = plan_identity(DrainLocation(plan_dir).read_json(PLAN_FILE), plan_dir)
        return run_election(
            location,
            cluster=self.cluster,
            kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
            scope=scope,
            max_partitions=max_partitions,
            max_bytes=max_bytes,
            poll_interval=poll,
            timeout=timeout,
            run=RunIdentity.from_context(context, fallback_run_id=location.url),
            dry_run=dry_run,
            expected=expected,
            defer_wait=(lambda czxid: self._defer(czxid, poll, timeout)) if self.deferrable else None,
            approval=approved_plan(self, context),  # a real run: the approved plan, unchanged, or nothing
        )

    def _defer(self, czxid: int, poll: float, timeout: float) -> None:
        """Hand the wait for our znode (``czxid``) to the triggerer; :meth:`execute_complete` resumes."""
        from airflow_provider_kafka_zk.triggers.leader_election import PreferredElectionTrigger

        self.defer(
            trigger=PreferredElectionTrigger(
                kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
                czxid=czxid,
                poll_interval=poll,
                deadline=time.time() + timeout,
            ),
            method_name="execute_complete",
        )


# ---------------------------------------------------------------------------------------------
# Verify
# ---------------------------------------------------------------------------------------------


class PostMaintenanceVerifyOperator(RunVerifyOperator):
    """The cluster after the run, judged by the audit's own rules on a fresh snapshot.

    Fails unless every moved-back partition is where it was before the drain with a live leader and
    a full ISR, no returning broker is over Kafka's leader-imbalance threshold, and no replication
    throttle is left set. Writes ``verify.json`` and ``report.txt`` (which names the drain run).

    :param plan_dir: the post-maintenance plan's folder.
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote store (default ``[kafka_zk] artefacts_conn_id``).
    :param snapshot_path: the snapshot taken after the run.
    :param inventory_path: this run's inventory (the brokers' settings: the imbalance threshold).
    """

    def execute(self, context: Context) -> dict[str, Any]:
        if is_unset(self.plan_dir):
            raise PostMaintenanceError("no plan to verify (the plan task produced none)")
        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = load_plan(location.url)
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        inputs = load_inputs(
            base,
            str(plan["cluster"]),
            snapshot=self.snapshot_path,
            previous="",
            inventory=None if is_unset(self.inventory_path) else self.inventory_path,
        )
        state = inputs.state
        live = state.live_broker_ids
        returning = set(plan.get("returning_brokers") or plan["request"]["brokers"])
        problems: list[str] = []
        not_back = []
        for batch in plan["batches"]:
            for m in batch:
                topic = state.topic(m["topic"])
                info = None if topic is None else topic.partitions.get(int(m["partition"]))
                name = f"{m['topic']}-{m['partition']}"
                if info is None:
                    not_back.append(f"{name}: gone")
                elif list(info.replicas) != list(m["target"]):
                    not_back.append(f"{name}: on {list(info.replicas)}, expected {m['target']}")
                elif info.is_offline(live) or info.under_replicated:
                    not_back.append(f"{name}: leader {info.leader}, ISR {list(info.isr)}")
        if not_back:
            problems.append("moved-back partitions not in place and healthy: " + "; ".join(not_back[:10]))
        findings = run_in_process(inputs)
        imbalance = [f for f in findings if f.check == IMBALANCE_CHECK and f.broker_id in returning]
        throttles = [f for f in findings if f.check == THROTTLE_CHECK]
        problems += [f"{f.summary}. {f.action}" for f in imbalance]
        problems += [f"{f.summary}. {f.action}" for f in throttles]
        election = location.read_json(ELECTION_FILE) if location.exists(ELECTION_FILE) else {}
        rule = controller_rebalance_rule(state, inputs.facts)
        before_us = self._elected_before_us(plan, state, returning, election, rule)
        result = {
            "plan_dir": location.url,
            "restores": plan.get("restores"),
            "restores_run_id": plan.get("restores_run_id"),
            "returning_brokers": sorted(returning),
            "moved_back": sum(len(b) for b in plan["batches"]),
            "not_back": not_back,
            "untouched": plan.get("move_back", {}).get("untouched", []),
            "elected": election.get("elected", []),
            "elected_before_this_run": [f"{t}-{p}" for t, p in before_us.partitions],
            "elected_before_this_run_by": before_us.by if before_us.partitions else None,
            "auto_leader_rebalance": rule.describe(),
            "election_line": election_report_line(len(election.get("elected", [])), before_us),
            "not_moved": election.get("not_moved", []),
            "imbalance": [f.to_row() for f in imbalance],
            "throttles_left": [f.to_row() for f in throttles],
            "snapshot": inputs.snapshot,
            "problems": problems,
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1, default=str))
        report = report_text(result)
        location.write(REPORT_FILE, report)
        for line in report.splitlines():
            self.log.info("%s", line)
        if problems:
            raise PostMaintenanceVerificationError(
                "the cluster is not back in shape: "
                + " | ".join(problems)
                + f" (report: {location.path(REPORT_FILE)})"
            )
        return result

    def _elected_before_us(
        self,
        plan: Mapping[str, Any],
        state: ClusterState,
        returning: set[int],
        election: Mapping[str, Any],
        rule: AutoRebalance,
    ) -> ElectedBeforeUs:
        """Preferred leaders of the returning brokers that someone else -- Kafka's auto leader rebalance,
        when the controller runs it -- elected between the plan's snapshot and now."""
        nothing = ElectedBeforeUs((), rule)
        if not plan.get("snapshot"):
            return nothing
        try:
            _, rows = read_snapshot(str(plan["snapshot"]))
        except Exception as exc:  # the line is advisory: say why it is missing, never fail on it
            self.log.warning(
                "The plan's snapshot %s is unreadable (%s): not said who elected", plan["snapshot"], exc
            )
            return nothing
        moved = [(m["topic"], int(m["partition"])) for batch in plan["batches"] for m in batch]
        return elected_before_us(
            ClusterState.from_snapshot(rows),
            state,
            ElectionScope(brokers=frozenset(returning)),
            rule,
            requested=[(t, int(p)) for t, p in election.get("requested", [])],
            moved=moved,
        )


__all__ = [
    "ELECTION_FILE",
    "DrainRunNotFoundError",
    "ElectionInFlightError",
    "HealthGateError",
    "PostMaintenanceError",
    "PostMaintenancePlanOperator",
    "PostMaintenanceVerifyOperator",
    "PreferredLeaderElectionOperator",
    "read_leadership",
]
