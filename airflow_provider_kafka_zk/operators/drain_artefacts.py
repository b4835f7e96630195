"""A drain run's folder and its files: where they are, how they are read and checked.

``<base>/<cluster>/drain/<ts>/`` holds what the drain steps hand each other (``plan.json``,
``rollback.json``, ``throttles.json``, ...); the post-maintenance move-back and the topicId repair
use the same folder layout. Every file is validated whole before a step uses it, and every failure
names the file by its full URL, so a person can find and fix it. What the steps write is composed
here too (``plan.json``'s document, ``report.txt``), and the typed errors of the drain steps live
here, as the readers raise them and the core's refusals map to them. Also the parameter parsing the
drain and post-maintenance operators share (Airflow renders params as text unless told otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import fsspec
from airflow.sdk import BaseOperator

from airflow_provider_kafka_zk.artefacts.drain_folder import (
    PLAN_FILE,
    PLAN_FORMAT,
    REASSIGNMENT_FILE,
    REPORT_FILE,
    ROLLBACK_FILE,
    SAFETY_SNAPSHOT_FILE,
    SUMMARY_FILE,
    THROTTLES_CLEARED_FILE,
    THROTTLES_FILE,
    VERIFY_FILE,
    DrainError,
    DrainFileMissingError,
    DrainFileUnreadableError,
    DrainInventoryError,
    DrainLocation,
    DrainPlanError,
    DrainVerificationError,
    IncompletePlanError,
    PlanOutdatedError,
    PlanReadDisagreementError,
    ReassignmentInFlightError,
    ThrottlesStillNeededError,
    _is_int,
    _PlanCheck,
    _shown,
    load_throttle_record,
    plan_identity,
    refusal_error,
)
from airflow_provider_kafka_zk.kafka.drain import DrainPlan, Move, Unplanned, UnplannedTopic, batches_json
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.reassignment import TopicPartition
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity

# ---------------------------------------------------------------------------------------------
# Parameters as Airflow renders them
# ---------------------------------------------------------------------------------------------


def is_unset(value: Any) -> bool:
    """An optional parameter left empty: None, or as a template renders nothing (``""``, ``"None"``)."""
    return value in (None, "", "None")


def as_list(value: Any) -> list[Any]:
    """Params render as text unless the DAG renders native objects: accept both."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        return list(json.loads(text)) if text.startswith("[") else [v.strip() for v in text.split(",") if v]
    return list(value)


def positive_int(value: Any, name: str) -> int:
    """A positive integer parameter, checked before any I/O."""
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or number <= 0:
        raise DrainError(f"{name} must be a positive whole number, not {value!r}")
    return number


def optional_int(value: Any) -> int | None:
    """An optional whole-number parameter (None when unset, see :func:`is_unset`)."""
    return None if is_unset(value) else int(value)


# ---------------------------------------------------------------------------------------------
# Identity and rollback
# ---------------------------------------------------------------------------------------------


def snapshot_identity(manifest: Mapping[str, Any], where: str) -> ClusterIdentity:
    """The identity a safety snapshot was taken of (its manifest's cluster id and source)."""
    source = manifest.get("source") or {}
    if not manifest.get("cluster_id"):
        raise DrainError(
            f"the safety snapshot {where} has no /cluster/id: cannot pin which cluster a plan is for"
        )
    chroot = str(source.get("chroot") or "/")
    return ClusterIdentity(
        str(manifest["cluster_id"]),
        tuple(str(h) for h in source.get("hosts") or ()),
        "" if chroot == "/" else chroot,
    )


# ---------------------------------------------------------------------------------------------
# Inventory
# ---------------------------------------------------------------------------------------------


def _inventory_files(url: str, columns: Sequence[str]) -> Iterable[tuple[int, str, list[tuple[Any, ...]]]]:
    """(broker id, file URL, rows of ``columns``) per broker file of an inventory run (``broker=<id>/``).

    DrainInventoryError naming the file when its name carries no broker id, it is no readable
    Parquet file, or it lacks a column. Other names (``_logdirs/``, temporary files) are skipped.
    """
    import pyarrow.parquet as pq  # only when there is an inventory to read

    from airflow_provider_kafka_zk.artefacts.inventory_layout import InventoryLayoutError, list_inventory

    fs, _ = fsspec.core.url_to_fs(url)
    try:  # the one reader of the layout (broker=<id>/ partition directories, or earlier flat files)
        files = list_inventory(url).files
    except InventoryLayoutError as exc:
        raise DrainInventoryError(str(exc)) from None
    for broker, path in files.items():
        where = path
        try:
            with fs.open(fsspec.core.url_to_fs(path)[1], "rb") as handle:
                table = pq.read_table(handle, columns=list(columns))
            rows = list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, KeyError... : name the file
            raise DrainInventoryError(
                f"{where} is not a readable inventory Parquet file with columns {list(columns)} "
                f"({type(exc).__name__}: {exc})"
            ) from None
        yield broker, where, rows


def _inventory_partition(where: str, topic: Any, partition: Any) -> TopicPartition:
    if not isinstance(topic, str) or isinstance(partition, bool) or not isinstance(partition, int):
        raise DrainInventoryError(
            f"{where}: a 'normal' row holds topic {topic!r} / partition {partition!r}, "
            "not a topic name and a partition number"
        )
    return topic, partition


def inventory_sizes(
    base: str, cluster: str, inventory_ts: str
) -> tuple[dict[TopicPartition, int], str | None]:
    """``log_bytes`` per partition from this run's inventory (largest replica); empty when absent.

    DrainInventoryError naming the file for a misnamed or unreadable ``broker=<id>.parquet``.
    """
    url = "/".join([base.rstrip("/"), cluster, "inventory", inventory_ts])
    fs, root = fsspec.core.url_to_fs(url)
    if not fs.exists(root):
        return {}, None
    sizes: dict[TopicPartition, int] = {}
    for _, where, rows in _inventory_files(url, ("kind", "topic", "partition", "log_bytes")):
        for kind, topic, partition, log_bytes in rows:
            if kind != "normal" or topic is None or partition is None:
                continue
            key = _inventory_partition(where, topic, partition)
            if log_bytes is not None and (
                isinstance(log_bytes, bool) or not isinstance(log_bytes, int) or log_bytes < 0
            ):
                raise DrainInventoryError(f"{where}: {topic}-{partition} has log_bytes {log_bytes!r}")
            sizes[key] = max(sizes.get(key, 0), log_bytes or 0)
    return sizes, url


def inventory_dirs(url: str) -> dict[int, set[TopicPartition]]:
    """Normal partition directories per broker in an inventory run (for the post-drain check).

    DrainInventoryError naming the file for a misnamed or unreadable ``broker=<id>.parquet``.
    """
    out: dict[int, set[TopicPartition]] = {}
    for broker, where, rows in _inventory_files(url, ("kind", "topic", "partition")):
        out[broker] = {
            _inventory_partition(where, t, p)
            for k, t, p in rows
            if k == "normal" and t is not None and p is not None
        }
    return out


# ---------------------------------------------------------------------------------------------
# plan.json and throttles.json
# ---------------------------------------------------------------------------------------------


def load_plan(plan_dir: str) -> dict[str, Any]:
    """``plan.json`` read and validated once, whole, before any step uses it.

    DrainPlanError naming the file (full URL) and what is wrong: missing, not JSON, not a
    drain plan, a missing or mistyped key, a topic name Kafka refuses, a partition or broker id
    that is no whole number, a partition planned twice.
    """
    location = DrainLocation(plan_dir)
    check = _PlanCheck(location.path(PLAN_FILE))
    plan = check.object(location.read_json(PLAN_FILE), "the document")
    if plan.get("format") != PLAN_FORMAT:
        raise check.fail(f"not a {PLAN_FORMAT} document (format {_shown(plan.get('format'))})")
    if plan.get("version") != 1 or isinstance(plan.get("version"), bool):
        raise check.fail(f"plan format version {_shown(plan.get('version'))} is not supported (1 is)")
    cluster = check.key(plan, "cluster", "the plan")
    if not isinstance(cluster, str) or not cluster:
        raise check.fail(f"'cluster' must be a cluster name, not {_shown(cluster)}")
    if plan.get("identity") is not None:
        check.object(plan["identity"], "'identity'")
    if not isinstance(plan.get("complete", False), bool):
        raise check.fail(f"'complete' must be true or false, not {_shown(plan['complete'])}")
    request = check.object(check.key(plan, "request", "the plan"), "'request'")
    check.brokers(request, "brokers", "'request'")
    if request.get("scope") not in ("rf1", "all"):
        raise check.fail(f"'request' 'scope' must be 'rf1' or 'all', not {_shown(request.get('scope'))}")
    excluded = check.list(check.key(request, "excluded_topics", "'request'"), "'request' 'excluded_topics'")
    if not all(isinstance(t, str) for t in excluded):
        raise check.fail(f"'request' 'excluded_topics' must list topic names, not {_shown(excluded)}")
    for key, minimum, optional in (("max_partitions_per_batch", 1, False), ("max_bytes_per_batch", 1, True)):
        value = request.get(key)
        if not (_is_int(value, minimum) or (value is None and (optional or key not in request))):
            raise check.fail(f"'request' {key!r} must be a whole number >= {minimum}, not {_shown(value)}")
    for key in ("rack_aware", "allow_partial"):
        if not isinstance(request.get(key, False), bool):
            raise check.fail(f"'request' {key!r} must be true or false, not {_shown(request[key])}")

    seen: set[TopicPartition] = set()
    batches = check.list(check.key(plan, "batches", "the plan"), "'batches'")
    for b, batch in enumerate(batches, 1):
        if not check.list(batch, f"batch {b}"):
            raise check.fail(f"batch {b} is empty")
        for e, move in enumerate(batch, 1):
            what = f"batch {b} entry {e}"
            topic, partition = check.partition(check.object(move, what), what)
            what = f"{what} ({topic}-{partition})"
            if (topic, partition) in seen:
                raise check.fail(f"{what}: the partition is planned twice")
            seen.add((topic, partition))
            current = check.brokers(move, "current", what)
            target = check.brokers(move, "target", what)
            if len(target) != len(current):
                raise check.fail(
                    f"{what}: 'target' {target} does not keep the replica count of 'current' {current}"
                )
            size = check.key(move, "size_bytes", what)
            if not _is_int(size, 0):
                raise check.fail(f"{what}: 'size_bytes' must be a whole number >= 0, not {_shown(size)}")
    for kind in ("unmovable", "unsatisfiable", "excluded"):
        for e, item in enumerate(check.list(check.key(plan, kind, "the plan"), repr(kind)), 1):
            what = f"{kind!r} entry {e}"
            topic, partition = check.partition(check.object(item, what), what)
            replicas = check.key(item, "replicas", what)
            if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
                raise check.fail(
                    f"{what} ({topic}-{partition}): 'replicas' must list broker ids, not {_shown(replicas)}"
                )
            if not isinstance(check.key(item, "reason", what), str):
                raise check.fail(f"{what} ({topic}-{partition}): 'reason' must be text")
    for e, item in enumerate(check.list(plan.get("unplanned", []), "'unplanned'"), 1):
        what = f"'unplanned' entry {e}"
        check.object(item, what)
        for key in ("topic", "reason"):
            if not isinstance(check.key(item, key, what), str):
                raise check.fail(f"{what}: {key!r} must be text, not {_shown(item[key])}")
    for name, record in check.object(plan.get("topics") or {}, "'topics'").items():
        what = f"'topics' entry {name!r}"
        check.topic(name, what)
        check.object(record, what)
        if not _is_int(record.get("czxid"), 0):
            raise check.fail(f"{what}: 'czxid' must be a whole number, not {_shown(record.get('czxid'))}")
        if record.get("topic_id") is not None and not isinstance(record["topic_id"], str):
            raise check.fail(f"{what}: 'topic_id' must be text or null, not {_shown(record['topic_id'])}")
    return plan


def _unplanned(items: Iterable[Unplanned]) -> list[dict[str, Any]]:
    return [
        {"topic": u.topic, "partition": u.partition, "replicas": list(u.replicas), "reason": u.reason}
        for u in items
    ]


def _unplanned_topics(items: Iterable[UnplannedTopic]) -> list[dict[str, Any]]:
    """Whole topics the plan leaves out; the name repr-escaped (it is not a name Kafka accepts)."""
    return [
        {
            "topic": t.topic_repr,
            "reason": t.reason,
            "message": t.message,
            "touches_drained": t.touches_drained,
            "partitions_in_scope": None if t.partitions is None else list(t.partitions),
            "excluded": t.excluded,
            "blocks_completion": t.blocks_completion,
        }
        for t in items
    ]


def plan_document(
    plan: DrainPlan,
    *,
    cluster: str,
    run_id: str | None,
    snapshot: str,
    snapshot_last_zxid: int,
    identity: ClusterIdentity,
    inventory: str | None,
    allow_partial: bool,
    created_at: str,
    read: Mapping[str, Any] | None = None,
    topics: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``plan.json`` of ``plan``: what the later steps (and :func:`load_plan`) read.

    :param plan: the core's plan.
    :param cluster: the cluster's name.
    :param run_id: the Airflow run that made it (what a post-maintenance ``drain_run`` can name).
    :param snapshot: the safety snapshot it was made from.
    :param snapshot_last_zxid: that snapshot's newest zxid.
    :param identity: the cluster the plan is for: every mutating step refuses another one.
    :param inventory: the inventory folder the sizes came from (None: sizes unknown).
    :param allow_partial: whether the run may drain what can be moved when not everything can.
    :param created_at: when, as ISO 8601 text.
    :param read: a planning read's record (``DrainRead.record``): what the execute step checks the
        safety snapshot and ZooKeeper against before its first write (None: made from a snapshot).
    :param topics: every moved topic's incarnation as the plan read it (:func:`topic_incarnations`):
        the execute step refuses a topic created again since, and a post-maintenance move-back
        recognises the drain's partitions by it, not by name.
    """
    request = plan.request
    return {
        "format": PLAN_FORMAT,
        "version": 1,
        "cluster": cluster,
        "created_at": created_at,
        "run_id": run_id,
        "snapshot": snapshot,
        "snapshot_last_zxid": snapshot_last_zxid,
        "read": None if read is None else dict(read),
        "identity": identity.to_dict(),
        "inventory": inventory,
        "request": {
            "brokers": sorted(request.brokers),
            "scope": request.scope,
            "excluded_topics": sorted(request.excluded_topics),
            "max_partitions_per_batch": request.max_partitions_per_batch,
            "max_bytes_per_batch": request.max_bytes_per_batch,
            "rack_aware": request.rack_aware,
            "allow_partial": allow_partial,
        },
        "complete": plan.complete,
        # what placement really did (request.rack_aware is what was asked)
        "rack_aware_effective": plan.rack_aware,
        "rack_aware_reason": plan.rack_aware_reason,
        "batches": batches_json(plan.batches),
        "topics": {name: dict(record) for name, record in sorted((topics or {}).items())},
        "unmovable": _unplanned(plan.unmovable),
        "unsatisfiable": _unplanned(plan.unsatisfiable),
        "excluded": _unplanned(plan.excluded),
        "unplanned": _unplanned_topics(plan.unplanned_topics),
        "added_bytes": {str(b): v for b, v in plan.added_bytes.items()},
        "added_partitions": {str(b): v for b, v in plan.added_partitions.items()},
        "unknown_sizes": plan.unknown_sizes,
    }


def topic_incarnations(state: ClusterState, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``plan.json``'s ``topics``: for each named topic of ``state``, its id (None: the znode has none)
    and its znode's creation zxid -- what tells the topic from one deleted and created again under
    the same name (a new czxid, and a new id on 2.8+)."""
    out = {}
    for name in sorted(set(names)):
        topic = state.topics.get(name)
        if topic is not None:
            out[name] = {
                "topic_id": None if topic.topic_id is None else str(topic.topic_id),
                "czxid": int(topic.czxid),
            }
    return out


def plan_batches(plan: Mapping[str, Any]) -> tuple[tuple[Move, ...], ...]:
    """A validated plan's (:func:`load_plan`) batches as the core's moves, for its decisions."""
    return tuple(
        tuple(
            Move(
                m["topic"],
                int(m["partition"]),
                tuple(m["current"]),
                tuple(m["target"]),
                int(m["size_bytes"]),
            )
            for m in batch
        )
        for batch in plan["batches"]
    )


def left_behind(plan: Mapping[str, Any]) -> dict[TopicPartition, str]:
    """The partitions a validated plan leaves on the drained brokers (unmovable, ...), with why."""
    return {
        (u["topic"], int(u["partition"])): u["reason"]
        for kind in ("unmovable", "unsatisfiable", "excluded")
        for u in plan[kind]
    }


def report_text(plan: Mapping[str, Any], location: DrainLocation, result: Mapping[str, Any]) -> str:
    """``report.txt``: the plan's summary and the verification, for a person to read.

    :param plan: the validated plan.
    :param location: the drain run's folder (its ``summary.txt`` is quoted).
    :param result: what the verify step writes to ``verify.json``.
    """
    lines = [
        f"Pre-maintenance drain of brokers {plan['request']['brokers']} on cluster {plan['cluster']}",
        f"  artefacts: {location.url}",
        f"  rollback:  {location.path(ROLLBACK_FILE)} (apply it to undo the moves)",
        "",
        location.read_text(SUMMARY_FILE).rstrip(),
        "",
        f"Verification: {'OK' if result['ok'] else 'FAILED'}; {len(result['moved'])} moved partition(s) checked; "
        f"disks {'checked' if result['disk']['checked'] else 'not checked (no post-drain inventory)'}",
    ]
    lines += [f"  PROBLEM: {p}" for p in result["problems"]]
    left = result["left_on_drained_brokers"]
    if left:
        lines.append(f"  still on the drained brokers: {len(left)}")
        lines += [f"    {x['partition']}: {x['reason']}" for x in left[:50]]
    return "\n".join(lines) + "\n"


__all__ = [
    "PLAN_FILE",
    "PLAN_FORMAT",
    "REASSIGNMENT_FILE",
    "REPORT_FILE",
    "ROLLBACK_FILE",
    "SAFETY_SNAPSHOT_FILE",
    "SUMMARY_FILE",
    "THROTTLES_CLEARED_FILE",
    "THROTTLES_FILE",
    "VERIFY_FILE",
    "DrainError",
    "DrainFileMissingError",
    "DrainFileUnreadableError",
    "DrainInventoryError",
    "DrainLocation",
    "DrainPlanError",
    "DrainVerificationError",
    "IncompletePlanError",
    "PlanOutdatedError",
    "PlanReadDisagreementError",
    "ReassignmentInFlightError",
    "ThrottlesStillNeededError",
    "as_list",
    "inventory_dirs",
    "inventory_sizes",
    "is_unset",
    "left_behind",
    "load_plan",
    "load_throttle_record",
    "optional_int",
    "plan_batches",
    "plan_document",
    "plan_identity",
    "positive_int",
    "refusal_error",
    "report_text",
    "snapshot_identity",
    "topic_incarnations",
]


class RunVerifyOperator(BaseOperator):
    """Base of a run's last step: a run folder's plan judged against a fresh snapshot and inventory.

    :param plan_dir: the run's folder (its ``plan.json``).
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param snapshot_path: the snapshot taken after the run (default: the latest).
    :param inventory_path: the inventory taken after the run.
    :param artefacts_conn_id: the Airflow connection of a remote store (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "base_path",
        "artefacts_conn_id",
        "snapshot_path",
        "inventory_path",
    )
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        plan_dir: str,
        base_path: str | None = None,
        snapshot_path: str | None = None,
        inventory_path: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.plan_dir = plan_dir
        self.base_path = base_path
        self.snapshot_path = snapshot_path
        self.inventory_path = inventory_path
