"""Pre-maintenance drain: plan, execute (throttled, batch by batch), clear throttles, verify.

Thin shells around the pure core (:mod:`~airflow_provider_kafka_zk.kafka.drain`,
:mod:`~airflow_provider_kafka_zk.kafka.reassignment`); they do exactly what Kafka's ZooKeeper
tooling does (``ReassignPartitionsCommand.scala``, ``AdminZkClient.scala``, 3.3.1): throttles by read-modify-versioned-write of
``/config/<type>/<name>`` plus a ``config_change_`` notification, the reassignment by *creating*
``/admin/reassign_partitions`` (never overwriting it, never with ``log_dirs``). Artefacts go to
``<base>/<cluster>/drain/<ts>/``: ``rollback.json`` (written first), ``reassignment.json``,
``plan.json``, ``summary.txt``, ``throttles.json`` (what this run set, so only that is removed),
``throttles_cleared.json``, ``verify.json`` and ``report.txt``. Everything is dry-run by default.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow.parquet as pq
from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.snapshots import (
    latest_snapshot,
    read_snapshot,
    validate_cluster_name,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    KafkaZooKeeperHook,
    ZnodeNotFoundError,
    ZnodeVersionConflictError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.drain import (
    BrokerInfo,
    DrainRequest,
    UnplannedTopic,
    dumps_tool_json,
    plan_drain,
    unreadable_topics,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.reassignment import (
    ThrottlePlan,
    TopicPartition,
    config_without_our_values,
    merged_config,
    plan_throttles,
    progress,
    reassignments_in_flight,
    same_request,
    throttle_cleanup_commands,
)
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.maintenance import (
    MaintenanceRefusedError,
    MaintenanceSession,
    RollbackArtefactError,
    RunIdentity,
    lease_held_by,
    parse_safety_flags,
)
from airflow_provider_kafka_zk.operators.inventory import _resolve_ts
from airflow_provider_kafka_zk.operators.snapshot import default_artefacts_base
from airflow_provider_kafka_zk.triggers.reassignment import ReassignmentTrigger, encode_targets

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

PLAN_FORMAT = "kafka-zk-drain-plan"
ROLLBACK_FILE = "rollback.json"
REASSIGNMENT_FILE = "reassignment.json"
PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.txt"
THROTTLES_FILE = "throttles.json"
THROTTLES_CLEARED_FILE = "throttles_cleared.json"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"


# ---------------------------------------------------------------------------------------------
# Typed errors: each says which znode / partition and what to do; none is worth a retry
# ---------------------------------------------------------------------------------------------


class DrainError(AirflowFailException):
    """A drain step refused or failed for a reason a retry cannot change."""


class IncompletePlanError(DrainError):
    """Some partitions in scope cannot be moved; the run stops unless ``allow_partial`` is true."""


class ReassignmentInFlightError(DrainError):
    """Another reassignment is running (the znode or adding/removing replicas in a topic znode)."""


class PlanOutdatedError(DrainError):
    """ZooKeeper no longer shows the assignment the plan was made from."""


class ThrottlesStillNeededError(DrainError):
    """Partitions of this plan are still moving: removing the throttles now would unthrottle them."""


class DrainVerificationError(DrainError):
    """After the drain, ZooKeeper (or the disks) do not show what the plan promised."""


class DrainPlanError(DrainError):
    """A drain folder's file (``plan.json``, ``throttles.json``, ...) is missing or malformed.

    The message names the file by its full URL and says what is wrong with it.
    """


class DrainFileMissingError(DrainPlanError, FileNotFoundError):
    """The file is not there (still a FileNotFoundError for callers that handle that)."""


class DrainFileUnreadableError(DrainPlanError, ValueError):
    """The file is not UTF-8 JSON (still a ValueError for callers that handle that)."""


class DrainInventoryError(DrainError):
    """A file of the inventory folder is misnamed or unreadable; the message names the file."""


# ---------------------------------------------------------------------------------------------
# Artefacts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainLocation:
    """``<base>/<cluster>/drain/<ts>/`` on a local path or any fsspec URL."""

    url: str

    @classmethod
    def of(cls, base: str, cluster: str, ts: str) -> DrainLocation:
        validate_cluster_name(cluster)
        return cls("/".join([base.rstrip("/"), cluster, "drain", ts]))

    def _fs(self) -> tuple[Any, str]:
        fs, root = fsspec.core.url_to_fs(self.url)
        return fs, root.rstrip("/")

    def exists(self, name: str) -> bool:
        fs, root = self._fs()
        return fs.exists(f"{root}/{name}")

    def path(self, name: str) -> str:
        return f"{self.url.rstrip('/')}/{name}"

    def write(self, name: str, payload: bytes | str) -> str:
        """Write via a temporary name and a rename, so a reader never sees half a file."""
        data = payload.encode("utf-8") if isinstance(payload, str) else payload
        fs, root = self._fs()
        write_atomically(fs, f"{root}/{name}", data)
        return self.path(name)

    def read_json(self, name: str) -> Any:
        """The file's JSON; DrainFileMissingError / DrainFileUnreadableError naming its URL."""
        text = self.read_text(name)
        try:
            return json.loads(text)
        except ValueError as exc:
            raise DrainFileUnreadableError(f"{self.path(name)} is not JSON ({exc})") from None

    def read_text(self, name: str) -> str:
        """The file's UTF-8 text; DrainFileMissingError / DrainFileUnreadableError naming its URL."""
        fs, root = self._fs()
        try:
            data = fs.cat_file(f"{root}/{name}")
        except FileNotFoundError:
            raise DrainFileMissingError(f"{self.path(name)} is missing") from None
        except IsADirectoryError:
            raise DrainFileUnreadableError(f"{self.path(name)} is a directory, not a file") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DrainFileUnreadableError(f"{self.path(name)} is not UTF-8 text ({exc})") from None


def _as_list(value: Any) -> list[Any]:
    """Params render as text unless the DAG renders native objects: accept both."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        return list(json.loads(text)) if text.startswith("[") else [v.strip() for v in text.split(",") if v]
    return list(value)


def _positive_int(value: Any, name: str) -> int:
    """A positive integer parameter, checked before any I/O."""
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or number <= 0:
        raise DrainError(f"{name} must be a positive whole number, not {value!r}")
    return number


def _snapshot_identity(manifest: Mapping[str, Any], where: str) -> ClusterIdentity:
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


def plan_identity(plan: Mapping[str, Any], where: str) -> ClusterIdentity:
    """The cluster identity the plan was made for (from its safety snapshot); refuses plans without one."""
    record = plan.get("identity")
    if not record or not record.get("cluster_id"):
        raise DrainPlanError(
            f"{where}/{PLAN_FILE} pins no cluster identity (made by an older version, or from a snapshot "
            "without /cluster/id): make a new plan"
        )
    try:
        return ClusterIdentity.from_dict(record, f"{where}/{PLAN_FILE}")
    except ValueError as exc:
        raise DrainPlanError(str(exc)) from None


def _check_rollback(plan_dir: str, batches: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    """Before the first change: rollback.json is there, readable, and undoes every planned move."""
    location = DrainLocation(plan_dir)
    where = location.path(ROLLBACK_FILE)
    try:
        rollback = location.read_json(ROLLBACK_FILE)
        saved = {(e["topic"], int(e["partition"])): list(e["replicas"]) for e in rollback["partitions"]}
    except FileNotFoundError:
        raise RollbackArtefactError(f"{where} is missing: refusing to change anything without it") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise RollbackArtefactError(
            f"{where} is unreadable ({type(exc).__name__}: {exc}): refusing"
        ) from None
    missing = [
        f"{m['topic']}-{m['partition']}"
        for batch in batches
        for m in batch
        if saved.get((m["topic"], int(m["partition"]))) != list(m["current"])
    ]
    if missing:
        raise RollbackArtefactError(
            f"{where} does not restore {len(missing)} planned move(s) ({', '.join(missing[:10])}): refusing"
        )


def _bootstrap(hook: KafkaZooKeeperHook | None) -> str:
    """host:port of a registered broker's first endpoint, for commands a person can paste."""
    if hook is None:
        return "<broker-host:port>"
    try:
        for broker in hook.live_broker_ids():
            registration, _ = hook.get_broker(broker)
            for endpoint in registration.endpoints:
                _, _, address = endpoint.partition("://")
                if address:
                    return address
    except Exception as exc:  # advice only: never hide the real error behind a lookup failure
        log.debug("No broker endpoint for the advice: %s", exc)
    return "<broker-host:port>"


def _throttle_advice(plan_dir: str | None, hook: KafkaZooKeeperHook | None = None) -> str:
    """What a person runs to remove this run's throttles by hand (empty when it set none)."""
    if _no_plan(plan_dir):
        return ""
    location = DrainLocation(str(plan_dir))
    try:
        if not location.exists(THROTTLES_FILE):
            return ""
        entities = load_throttle_record(location)["entities"]
    except Exception as exc:
        return f"(throttles record {location.path(THROTTLES_FILE)} unreadable: {exc})"
    commands = throttle_cleanup_commands(entities, _bootstrap(hook))
    if not commands:
        return ""
    return (
        "Throttles this run set are still in place (" + location.path(THROTTLES_FILE) + "); once nothing "
        "of the plan moves, re-run the clear_throttles task, or remove them by hand: " + " ; ".join(commands)
    )


def _optional_int(value: Any) -> int | None:
    return None if value in (None, "", "None") else int(value)


def _inventory_files(url: str, columns: Sequence[str]) -> Iterable[tuple[int, str, list[tuple[Any, ...]]]]:
    """(broker id, file URL, rows of ``columns``) per ``broker=<id>.parquet`` of an inventory run.

    DrainInventoryError naming the file when its name carries no broker id, it is no readable
    Parquet file, or it lacks a column. Other names (``_logdirs/``, temporary files) are skipped.
    """
    fs, root = fsspec.core.url_to_fs(url)
    if not fs.exists(root):
        return
    for path in sorted(fs.ls(root, detail=False)):
        name = posixpath.basename(path.rstrip("/"))
        if not (name.startswith("broker=") and name.endswith(".parquet")):
            continue
        where = f"{url.rstrip('/')}/{name}"
        number = name[len("broker=") : -len(".parquet")]
        digits = number[1:] if number.startswith("-") else number
        if not (digits.isascii() and digits.isdigit()):
            raise DrainInventoryError(
                f"{where}: inventory file name carries no broker id ({number!r} is not a whole number)"
            )
        try:
            with fs.open(path, "rb") as handle:
                table = pq.read_table(handle, columns=list(columns))
            rows = list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, KeyError... : name the file
            raise DrainInventoryError(
                f"{where} is not a readable inventory Parquet file with columns {list(columns)} "
                f"({type(exc).__name__}: {exc})"
            ) from None
        yield int(number), where, rows


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
# ZooKeeper I/O shared by the steps
# ---------------------------------------------------------------------------------------------


def _read_all_topics(hook: KafkaZooKeeperHook) -> dict[str, znodes.TopicAssignment]:
    """Every topic znode (the in-flight check must look at all of them); deleted meanwhile: left out."""
    names = []
    for name in hook.get_children(znodes.BROKER_TOPICS):
        try:
            names.append(znodes.validate_topic_name(name, f"{znodes.BROKER_TOPICS}/{name}"))
        except znodes.InvalidTopicNameError as exc:
            # never planned (the plan lists it as unplanned); Kafka itself cannot serve it either
            log.warning("Skipping topic znode %r: %s", name, exc)
    found = hook.get_many(znodes.topic_path(t) for t in names)
    return {
        t: znodes.TopicAssignment.decode(found[path][0], path)
        for t in names
        if (path := znodes.topic_path(t)) in found
    }


def _read_states(
    hook: KafkaZooKeeperHook, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, znodes.PartitionState]:
    paths = {tp: znodes.partition_state_path(*tp) for tp in partitions}
    found = hook.get_many(paths.values())
    return {tp: znodes.PartitionState.decode(found[p][0], p) for tp, p in paths.items() if p in found}


def _read_reassign(hook: KafkaZooKeeperHook) -> tuple[znodes.ReassignPartitions | None, int | None]:
    """The reassign znode and its czxid (None, None when there is none)."""
    try:
        data, stat = hook.get_znode(znodes.REASSIGN_PARTITIONS)
    except ZnodeNotFoundError:
        return None, None
    return znodes.ReassignPartitions.decode(data), stat.czxid


def notify_config_change(hook: KafkaZooKeeperHook, entity_type: str, entity_name: str) -> str:
    """``/config/changes/config_change_<seq>`` (sequential, version 2 ``entity_path``), as Kafka writes it."""
    note = znodes.ConfigChangeNotification(0, entity_type, entity_name)
    return hook.create_sequential(f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}", note.encode())


def update_config(
    hook: KafkaZooKeeperHook,
    entity_type: str,
    entity_name: str,
    *,
    set_values: Mapping[str, str] | None = None,
    remove_values: Mapping[str, str] | None = None,
    create_if_missing: bool = False,
    attempts: int = 5,
) -> tuple[dict[str, str], list[str], bool]:
    """kafka-configs' ZooKeeper path: read the whole map, change our keys, versioned write, notify.

    ``remove_values`` removes a key only while it still holds our value. Returns (previous config,
    keys someone else changed, whether anything was written). A concurrent writer makes us re-read.
    """
    path = znodes.config_entity_path(entity_type, entity_name)
    last_version = 0
    for _ in range(attempts):
        try:
            data, stat = hook.get_znode(path)
        except ZnodeNotFoundError:
            if not create_if_missing or not set_values:
                if set_values:
                    raise
                return {}, [], False
            entity = znodes.ConfigEntity(entity_type, entity_name, dict(set_values))
            if hook.create_if_absent(path, entity.encode()):
                notify_config_change(hook, entity_type, entity_name)
                return {}, [], True
            continue  # created by someone meanwhile: read it and merge
        last_version = stat.version
        entity = znodes.ConfigEntity.decode(data, path)
        current = dict(entity.config)
        others: list[str] = []
        new = merged_config(current, set_values or {})
        if remove_values:
            new, others = config_without_our_values(new, remove_values)
        if new == current:
            return current, others, False
        encoded = znodes.ConfigEntity(entity_type, entity_name, new, entity.version).encode()
        try:
            hook.set_if_version(path, encoded, stat.version)
        except ZnodeVersionConflictError:
            continue
        notify_config_change(hook, entity_type, entity_name)
        return current, others, True
    raise ZnodeVersionConflictError(
        path, f"{path} (changed by someone else {attempts} times while we wrote it)", last_version, None
    )


# ---------------------------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: Any, minimum: int | None = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum)


def _broker_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_int(b, 0) for b in value)


class _PlanCheck:
    """Structure checks of one plan or throttles file; every failure names the file (full URL)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, what: str) -> DrainPlanError:
        return DrainPlanError(f"{self.where}: {what}")

    def object(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{what} must be a JSON object, not {_shown(value)}")
        return value

    def key(self, record: Mapping[str, Any], key: str, what: str) -> Any:
        if key not in record:
            raise self.fail(f"{what} has no {key!r}")
        return record[key]

    def list(self, value: Any, what: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{what} must be a JSON list, not {_shown(value)}")
        return value

    def topic(self, value: Any, what: str) -> str:
        try:
            return znodes.validate_topic_name(value, source=what)
        except ValueError as exc:
            raise self.fail(str(exc)) from None  # names ``what`` as its source

    def partition(self, record: Mapping[str, Any], what: str) -> TopicPartition:
        topic = self.topic(self.key(record, "topic", what), f"{what} 'topic'")
        partition = self.key(record, "partition", what)
        if not _is_int(partition, 0):
            raise self.fail(
                f"{what} ({topic}): 'partition' must be a whole number >= 0, not {_shown(partition)}"
            )
        return topic, partition

    def brokers(self, record: Mapping[str, Any], key: str, what: str) -> list[int]:
        value = self.key(record, key, what)
        if not _broker_list(value):
            raise self.fail(f"{what}: {key!r} must be a non-empty list of broker ids, not {_shown(value)}")
        if len(set(value)) != len(value):
            raise self.fail(f"{what}: {key!r} names a broker twice ({value})")
        return value


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
    return plan


def _throttle_entities(check: _PlanCheck, value: Any, what: str) -> dict[str, dict[str, str]]:
    for key, values in check.object(value, what).items():
        entity_type, _, name = key.partition("/")
        if entity_type == "topics":
            check.topic(name, f"{what} entity {key!r}")
        elif entity_type != "brokers" or not (name.isascii() and name.isdigit()):
            raise check.fail(f"{what} entity {key!r} is not 'topics/<name>' or 'brokers/<id>'")
        config = check.object(values, f"{what} entity {key!r}")
        if not all(isinstance(v, str) for v in config.values()):
            raise check.fail(f"{what} entity {key!r} holds non-text values: {_shown(config)}")
    return value


def load_throttle_record(location: DrainLocation) -> dict[str, Any]:
    """``throttles.json`` validated: ``{"entities": {"topics/<t>"|"brokers/<id>": {key: value}}, "previous": {...}}``.

    DrainPlanError naming the file (full URL) when it is missing, not JSON, or of another shape.
    ``previous`` (the values this run replaced) is optional and defaults to an empty map.
    """
    check = _PlanCheck(location.path(THROTTLES_FILE))
    record = check.object(location.read_json(THROTTLES_FILE), "the document")
    _throttle_entities(check, check.key(record, "entities", "the document"), "'entities'")
    _throttle_entities(check, record.setdefault("previous", {}), "'previous'")
    return record


def batch_targets(batch: Sequence[Mapping[str, Any]]) -> dict[TopicPartition, tuple[int, ...]]:
    return {(m["topic"], int(m["partition"])): tuple(m["target"]) for m in batch}


def _unplanned(items: Iterable[Any]) -> list[dict[str, Any]]:
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


def _no_plan(plan_dir: Any) -> bool:
    return plan_dir in (None, "", "None")


class ReplicaOneDrainPlanOperator(BaseOperator):
    """Plan moving the in-scope replicas off ``brokers`` from the safety snapshot and inventory sizes.

    Writes ``rollback.json`` first (the current assignment of every partition it moves), then
    ``reassignment.json``, ``plan.json`` and ``summary.txt``. Refuses (fails) when a reassignment is
    in flight in the snapshot, or when partitions in scope cannot be moved unless ``allow_partial``;
    a topic znode the model cannot read (a name Kafka refuses, undecodable data) is listed under
    ``unplanned`` and counts as such when it may have a partition in scope on a drained broker.
    ``rack_aware_effective``/``rack_aware_reason`` say whether placement really was rack-aware.
    Reads the snapshot and the inventory only: never ZooKeeper.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "brokers",
        "snapshot_path",
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
        inventory_ts: str | None = None,
        scope: str = "rf1",
        excluded_topics: Sequence[str] | str = (),
        max_partitions_per_batch: int | str = 500,
        max_bytes_per_batch: int | str | None = None,
        rack_aware: bool = True,
        allow_partial: bool | str = False,
        drain_ts: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.brokers = brokers
        self.base_path = base_path
        self.snapshot_path = snapshot_path
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
        base = self.base_path or default_artefacts_base()
        snapshot = self.snapshot_path
        if _no_plan(snapshot):
            ref = latest_snapshot(base, self.cluster)
            if ref is None:
                raise DrainError(f"no complete snapshot of cluster {self.cluster!r} under {base}")
            snapshot = ref.path
        manifest, rows = read_snapshot(str(snapshot))
        identity = _snapshot_identity(manifest, str(snapshot))
        state = ClusterState.from_snapshot(rows, cluster=self.cluster)
        in_flight = reassignments_in_flight(
            (t.assignment for t in state.topics.values()), state.reassign_partitions
        )
        if in_flight.any:
            raise ReassignmentInFlightError(
                f"the safety snapshot {snapshot} shows a reassignment in flight ({in_flight.describe()}): "
                "refusing to plan a drain now; wait for it to finish (or cancel it) and run again"
            )
        sizes, inventory_url = inventory_sizes(base, self.cluster, _resolve_ts(self.inventory_ts, context))
        if inventory_url is None:
            self.log.warning("No inventory for this run: partition sizes unknown, counted as 0 bytes")

        assignment = {(p.topic, p.partition): p.replicas for p in state.partitions()}
        brokers = {b: BrokerInfo(b, live.rack, True) for b, live in state.brokers.items()}
        for replicas in assignment.values():
            for b in replicas:
                brokers.setdefault(b, BrokerInfo(b, None, live=False))
        isr = {(p.topic, p.partition): p.isr for p in state.partitions() if p.state is not None}
        try:
            request = DrainRequest(
                brokers=frozenset(int(b) for b in _as_list(self.brokers)),
                scope=self.scope,  # type: ignore[arg-type]
                excluded_topics=frozenset(str(t) for t in _as_list(self.excluded_topics)),
                max_partitions_per_batch=int(self.max_partitions_per_batch),
                max_bytes_per_batch=_optional_int(self.max_bytes_per_batch),
                rack_aware=self.rack_aware,
            )
            plan = plan_drain(
                assignment,
                brokers,
                request,
                sizes=sizes,
                isr=isr,
                # topic znodes the model left out (invalid name, undecodable): listed, never dropped
                unreadable_topics=unreadable_topics(state.findings),
            )
        except ValueError as exc:
            raise DrainError(f"cannot plan the drain: {exc}") from exc

        location = DrainLocation.of(base, self.cluster, self.drain_ts or _resolve_ts(None, context))
        # The rollback plan exists before anything else does, let alone before anything changes.
        rollback = location.write(ROLLBACK_FILE, dumps_tool_json(plan.rollback_json()))
        reassignment = location.write(REASSIGNMENT_FILE, dumps_tool_json(plan.reassignment_json()))
        summary = plan.summary()
        document = {
            "format": PLAN_FORMAT,
            "version": 1,
            "cluster": self.cluster,
            "created_at": datetime.now(UTC).isoformat(),
            # the Airflow run that made it: what kafka_zk_post_maintenance's drain_run can name
            "run_id": context.get("run_id"),
            "snapshot": str(snapshot),
            "snapshot_last_zxid": state.last_zxid,
            # the cluster this plan is for: every mutating step refuses another one
            "identity": identity.to_dict(),
            "inventory": inventory_url,
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
            "batches": [
                [
                    {
                        "topic": m.topic,
                        "partition": m.partition,
                        "current": list(m.current),
                        "target": list(m.target),
                        "size_bytes": m.size_bytes,
                    }
                    for m in batch
                ]
                for batch in plan.batches
            ],
            "unmovable": _unplanned(plan.unmovable),
            "unsatisfiable": _unplanned(plan.unsatisfiable),
            "excluded": _unplanned(plan.excluded),
            "unplanned": _unplanned_topics(plan.unplanned_topics),
            "added_bytes": {str(b): v for b, v in plan.added_bytes.items()},
            "added_partitions": {str(b): v for b, v in plan.added_partitions.items()},
            "unknown_sizes": plan.unknown_sizes,
        }
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


# ---------------------------------------------------------------------------------------------
# Execute
# ---------------------------------------------------------------------------------------------


class ReplicaOneDrainExecuteOperator(BaseOperator):
    """Carry out the plan batch by batch as Kafka's ZooKeeper tooling does, waiting in a trigger.

    Per batch: refuse if a foreign reassignment is in flight (the znode, or adding/removing in any
    topic znode) or ZooKeeper no longer shows the planned assignment; set the throttles
    (``plan_throttles``) recording them in ``throttles.json`` first; *create*
    ``/admin/reassign_partitions`` without ``log_dirs``; defer until Kafka's completion rule holds.
    Idempotent under retries: finished batches are skipped, and finding our own batch's znode
    means waiting for it, never submitting again. ``dry_run`` (default) only says what it would do.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "throttle_bytes_per_sec",
        "dry_run",
        "kafka_zookeeper_conn_id",
        "poll_interval",
        "batch_timeout",
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.throttle_bytes_per_sec = throttle_bytes_per_sec
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.dry_run = dry_run
        self.poll_interval = poll_interval
        self.batch_timeout = batch_timeout

    def execute(self, context: Context) -> dict[str, Any]:
        if _no_plan(self.plan_dir):
            raise DrainError("no plan to execute (the plan task produced none)")
        return self._run_from(context, 0)

    def execute_complete(
        self, context: Context, event: dict[str, Any], batch: int | None = None
    ) -> dict[str, Any]:
        index = int(event.get("echo", {}).get("batch", batch if batch is not None else 0))
        status = event.get("status")
        if status == "timeout":
            raise DrainError(
                f"batch {index + 1} not complete after {float(self.batch_timeout):g}s: {event.get('message')}; "
                "the reassignment keeps running, throttled, and the maintenance lease stays with this run. "
                "Re-run this task to keep waiting; the clear_throttles step removes this run's throttles "
                "once nothing of the plan moves. " + _throttle_advice(self.plan_dir)
            )
        if status != "complete":
            raise DrainError(
                f"could not follow batch {index + 1}: {event.get('message')}. "
                + _throttle_advice(self.plan_dir)
            )
        self.log.info("Batch %d complete: %s", index + 1, event.get("message"))
        return self._run_from(context, index + 1)

    def _session(
        self, context: Context, hook: KafkaZooKeeperHook, plan: Mapping[str, Any], dry_run: bool
    ) -> MaintenanceSession:
        return MaintenanceSession(
            hook,
            cluster=str(plan["cluster"]),
            artefact_dir=str(self.plan_dir),
            run=RunIdentity.from_context(context, fallback_run_id=str(self.plan_dir)),
            dry_run=dry_run,
            expected=plan_identity(plan, str(self.plan_dir)),
        )

    def _run_from(self, context: Context, start: int) -> dict[str, Any]:
        # Flags and numbers first: a typo must refuse before anything is read or written.
        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        rate = _positive_int(self.throttle_bytes_per_sec, "throttle_bytes_per_sec")
        plan = load_plan(str(self.plan_dir))
        batches = plan["batches"]
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            session = self._session(context, hook, plan, dry_run)
            with session:
                if not dry_run:
                    _check_rollback(str(self.plan_dir), batches)
                try:
                    for index in range(start, len(batches)):
                        session.recheck()
                        action = self._start_batch(hook, plan, index, rate, dry_run)
                        if action == "wait":
                            batch = batches[index]
                            self.defer(
                                trigger=ReassignmentTrigger(
                                    kafka_zookeeper_conn_id=self.kafka_zookeeper_conn_id,
                                    targets=encode_targets(batch_targets(batch)),
                                    sizes=[[m["topic"], m["partition"], m["size_bytes"]] for m in batch],
                                    poll_interval=float(self.poll_interval),
                                    deadline=time.time() + float(self.batch_timeout),
                                    label=f"drain batch {index + 1}/{len(batches)}",
                                    echo={"batch": index},
                                ),
                                method_name="execute_complete",
                            )
                except MaintenanceRefusedError as exc:
                    if not dry_run and session.changed_anything:
                        advice = _throttle_advice(str(self.plan_dir), hook)
                        raise type(exc)(f"{exc}. {advice}") from exc
                    raise
                except DrainError as exc:
                    if not dry_run and session.changed_anything:
                        raise DrainError(f"{exc}. {_throttle_advice(str(self.plan_dir))}") from exc
                    raise
        done = sum(len(b) for b in batches)
        if dry_run:
            self.log.info(
                "DRY RUN: nothing was written to ZooKeeper (%d batch(es) described above)", len(batches)
            )
        else:
            self.log.info("All %d batch(es) complete: %d partition(s) moved", len(batches), done)
        return {"plan_dir": self.plan_dir, "batches": len(batches), "partitions": done, "dry_run": dry_run}

    def _start_batch(
        self, hook: KafkaZooKeeperHook, plan: Mapping[str, Any], index: int, rate: int, dry_run: bool
    ) -> str:
        """Returns "done" (nothing to do), "wait" (our znode exists now) or "dry" (dry run)."""
        batches = plan["batches"]
        label = f"batch {index + 1}/{len(batches)}"
        targets = batch_targets(batches[index])
        topics = _read_all_topics(hook)
        reassign, czxid = _read_reassign(hook)
        states = _read_states(hook, targets)
        found = progress(targets, topics, states, reassign)
        if found.complete:
            self.log.info("%s: already complete (%d partitions), skipping", label, found.total)
            return "done"
        where = hook.describe_path(znodes.REASSIGN_PARTITIONS)
        in_flight = reassignments_in_flight(topics.values(), reassign)
        if reassign is not None:
            if same_request(reassign, targets):
                self.log.info(
                    "%s: %s (czxid 0x%x) is this batch's own request (a retry): waiting for it, not submitting again",
                    label,
                    where,
                    czxid or 0,
                )
                return "wait"
            raise ReassignmentInFlightError(
                f"{where} holds a reassignment that is not this plan's {label} ({in_flight.describe()}): "
                "refusing to start; wait for it to finish (or cancel it) and run again"
            )
        ours_moving = [
            tp
            for tp in in_flight.topic_znode_partitions
            if tp in targets and topics[tp[0]].target_replicas(tp[1]) == targets[tp]
        ]
        foreign = [tp for tp in in_flight.topic_znode_partitions if tp not in ours_moving]
        if foreign:
            names = ", ".join(f"{t}-{p}" for t, p in foreign[:10])
            raise ReassignmentInFlightError(
                f"topic znodes show adding/removing replicas for {names} (a reassignment started through "
                "the Admin API or by another tool): refusing to start"
            )
        if ours_moving:
            self.log.info("%s: already moving (adding/removing replicas are ours): waiting", label)
            return "wait"

        remaining = {tp: t for tp, t in targets.items() if tp in found.moving}
        outdated = []
        for move in batches[index]:
            tp = (move["topic"], int(move["partition"]))
            if tp not in remaining:
                continue
            topic = topics.get(tp[0])
            now = None if topic is None else topic.partitions.get(tp[1])
            if now is None or list(now) != list(move["current"]):
                outdated.append(
                    f"{tp[0]}-{tp[1]} planned from {move['current']}, now {None if now is None else list(now)}"
                )
        if outdated:
            raise PlanOutdatedError(
                f"{label}: ZooKeeper no longer shows the assignment the plan was made from: "
                + "; ".join(outdated[:10])
                + ". Make a new plan."
            )
        throttles = plan_throttles(remaining, topics, rate)
        request = znodes.ReassignPartitions(
            tuple(znodes.ReassignmentEntry(t, p, tuple(r)) for (t, p), r in sorted(remaining.items()))
        )
        if dry_run:
            self._describe(label, throttles, request, where)
            return "dry"
        self._set_throttles(hook, throttles)
        created = hook.create_if_absent(znodes.REASSIGN_PARTITIONS, request.encode())
        if not created:
            again, _ = _read_reassign(hook)
            if again is not None and same_request(again, targets):
                self.log.info("%s: %s appeared meanwhile and is ours: waiting", label, where)
                return "wait"
            raise ReassignmentInFlightError(
                f"{where} was created by someone else between our check and our create: refusing to continue"
            )
        self.log.info(
            "%s: created %s for %d partition(s), %s total, throttled at %d B/s",
            label,
            where,
            len(remaining),
            _human(sum(m["size_bytes"] for m in batches[index] if (m["topic"], m["partition"]) in remaining)),
            rate,
        )
        return "wait"

    def _describe(
        self, label: str, throttles: ThrottlePlan, request: znodes.ReassignPartitions, where: str
    ) -> None:
        for topic, config in throttles.topic_configs().items():
            self.log.info(
                "DRY RUN %s: would set on /config/topics/%s: %s (+ notification)", label, topic, config
            )
        for broker, config in throttles.broker_configs().items():
            self.log.info(
                "DRY RUN %s: would set on /config/brokers/%s: %s (+ notification)", label, broker, config
            )
        self.log.info("DRY RUN %s: would create %s with %s", label, where, request.encode().decode())

    def _set_throttles(self, hook: KafkaZooKeeperHook, throttles: ThrottlePlan) -> None:
        location = DrainLocation(self.plan_dir)
        record = (
            load_throttle_record(location)
            if location.exists(THROTTLES_FILE)
            else {
                "entities": {},
                "previous": {},
            }
        )
        wanted: list[tuple[str, str, dict[str, str]]] = [
            ("topics", t, c) for t, c in throttles.topic_configs().items()
        ] + [("brokers", str(b), c) for b, c in throttles.broker_configs().items()]
        for entity_type, name, config in wanted:
            key = f"{entity_type}/{name}"
            ours_before = dict(record["entities"].get(key, {}))  # an earlier batch of this run
            # recorded before the write: clearing later removes a key only if it still holds our value
            record["entities"].setdefault(key, {}).update(config)
            location.write(THROTTLES_FILE, json.dumps(record, indent=1, sort_keys=True))
            previous, _, written = update_config(
                hook, entity_type, name, set_values=config, create_if_missing=entity_type == "brokers"
            )
            overwritten = {
                k: previous[k]
                for k in config
                if k in previous and previous[k] != config[k] and previous[k] != ours_before.get(k)
            }
            if overwritten and key not in record["previous"]:
                self.log.warning("%s had throttle values set by someone else; replaced: %s", key, overwritten)
                record["previous"][key] = overwritten
                location.write(THROTTLES_FILE, json.dumps(record, indent=1, sort_keys=True))
            if written:
                self.log.info("Throttle set on /config/%s: %s", key, config)


# ---------------------------------------------------------------------------------------------
# Clear throttles (finally step)
# ---------------------------------------------------------------------------------------------


class ClearReplicationThrottlesOperator(BaseOperator):
    """Remove exactly the throttle values this run set (``throttles.json``), with notifications.

    Runs whatever happened upstream (trigger rule ``all_done``). A value someone changed since is
    left alone with a warning. While a partition of this plan is still moving, the throttles stay
    (removing them would unthrottle it) and the task fails saying so, unless ``force``.
    """

    template_fields: Sequence[str] = ("plan_dir", "dry_run", "kafka_zookeeper_conn_id")
    ui_color = "#d5f5e3"

    def _release_lease_if_ours(
        self, context: Context, hook: KafkaZooKeeperHook, plan: Mapping[str, Any]
    ) -> None:
        """An execute step that refused after taking the lease leaves it to this final step."""
        run = RunIdentity.from_context(context, fallback_run_id=str(self.plan_dir))
        if not lease_held_by(hook, run):
            return
        with MaintenanceSession(
            hook,
            cluster=str(plan["cluster"]),
            artefact_dir=str(self.plan_dir),
            run=run,
            dry_run=False,
            expected=plan_identity(plan, str(self.plan_dir)),
        ) as session:
            session.release_lease()

    def __init__(
        self,
        *,
        plan_dir: str | None,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        dry_run: bool | str = True,
        force: bool | str = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.dry_run = dry_run
        self.force = force

    def execute(self, context: Context) -> dict[str, Any]:
        flags = parse_safety_flags(dry_run=self.dry_run, force=self.force)
        dry_run, force = flags["dry_run"], flags["force"]
        if _no_plan(self.plan_dir):
            self.log.info("No plan was made: no throttles to clear")
            return {"cleared": {}, "changed_by_others": {}}
        location = DrainLocation(str(self.plan_dir))
        plan = load_plan(location.url)
        targets = {tp: t for batch in plan["batches"] for tp, t in batch_targets(batch).items()}
        record = load_throttle_record(location) if location.exists(THROTTLES_FILE) else None
        cleared: dict[str, list[str]] = {}
        others: dict[str, list[str]] = {}
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            if record is None:
                self.log.info(
                    "This run set no throttles (%s absent): nothing to clear", location.path(THROTTLES_FILE)
                )
                if not dry_run:
                    self._release_lease_if_ours(context, hook, plan)
                return {"cleared": {}, "changed_by_others": {}}
            session = MaintenanceSession(
                hook,
                cluster=str(plan["cluster"]),
                artefact_dir=location.url,
                run=RunIdentity.from_context(context, fallback_run_id=location.url),
                dry_run=dry_run,
                expected=plan_identity(plan, location.url),
            )
            with session:
                topics = _read_all_topics(hook)
                reassign, _ = _read_reassign(hook)
                in_flight = reassignments_in_flight(topics.values(), reassign)
                moving = [
                    tp
                    for tp in in_flight.znode_partitions + in_flight.topic_znode_partitions
                    if tp in targets
                ]
                if moving and not force:
                    names = ", ".join(sorted({f"{t}-{p}" for t, p in moving}))
                    raise ThrottlesStillNeededError(
                        f"partitions of this drain are still moving ({names}): throttles left in place and the "
                        "maintenance lease kept. Re-run this task once they finished (or set force). "
                        + _throttle_advice(location.url, hook)
                    )
                for key, ours in sorted(record["entities"].items()):
                    entity_type, name = key.split("/", 1)
                    if dry_run:
                        self.log.info(
                            "DRY RUN: would remove %s from /config/%s (where still ours)", sorted(ours), key
                        )
                        continue
                    session.recheck()
                    previous, changed, written = update_config(hook, entity_type, name, remove_values=ours)
                    if changed:
                        others[key] = changed
                        self.log.warning(
                            "/config/%s: %s changed by someone else since this run set them; left in place",
                            key,
                            changed,
                        )
                    removed = [k for k in ours if k in previous and k not in changed]
                    if written:
                        cleared[key] = removed
                        self.log.info("Removed %s from /config/%s", removed, key)
                if not dry_run:
                    session.release_lease()
        result = {"cleared": cleared, "changed_by_others": others, "dry_run": dry_run}
        if not dry_run:
            location.write(THROTTLES_CLEARED_FILE, json.dumps(result, indent=1, sort_keys=True))
        return result


# ---------------------------------------------------------------------------------------------
# Verify
# ---------------------------------------------------------------------------------------------


class ReplicaOneDrainVerifyOperator(BaseOperator):
    """Check the result from ZooKeeper (and, given a post-drain inventory, the disks); write a report.

    Fails when a drained broker still holds a partition in scope that the plan did not list as
    unmovable/unsatisfiable/excluded, when a moved partition lacks a leader or a full ISR, or when
    the inventory shows a moved partition's data still on a drained broker or missing on its target.
    """

    template_fields: Sequence[str] = ("plan_dir", "kafka_zookeeper_conn_id", "inventory_path")
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        plan_dir: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        inventory_path: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.inventory_path = inventory_path

    def execute(self, context: Context) -> dict[str, Any]:
        location = DrainLocation(self.plan_dir)
        plan = load_plan(self.plan_dir)
        request = plan["request"]
        drained = set(request["brokers"])
        excluded = set(request["excluded_topics"])
        known_left = {
            (u["topic"], int(u["partition"])): u["reason"]
            for kind in ("unmovable", "unsatisfiable", "excluded")
            for u in plan[kind]
        }
        moves = [m for batch in plan["batches"] for m in batch]
        problems: list[str] = []
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            topics = _read_all_topics(hook)
            states = _read_states(hook, [(m["topic"], int(m["partition"])) for m in moves])
            throttles_left = {}
            if location.exists(THROTTLES_FILE):
                for key, ours in load_throttle_record(location)["entities"].items():
                    try:
                        current = znodes.ConfigEntity.decode(
                            hook.get_znode(f"/config/{key}")[0], f"/config/{key}"
                        ).config
                    except ZnodeNotFoundError:
                        continue
                    still = sorted(k for k, v in ours.items() if current.get(k) == v)
                    if still:
                        throttles_left[key] = still
        remaining = []
        for topic in topics.values():
            if topic.topic in excluded:
                continue
            for p, replicas in topic.partitions.items():
                if drained.isdisjoint(replicas) or (request["scope"] == "rf1" and len(replicas) != 1):
                    continue
                remaining.append((topic.topic, p))
        unexpected = [tp for tp in remaining if tp not in known_left]
        for t, p in unexpected:
            problems.append(
                f"{t}-{p} is still on drained broker(s) {sorted(drained & set(topics[t].partitions[p]))}"
            )
        checked = []
        for m in moves:
            tp = (m["topic"], int(m["partition"]))
            target = list(m["target"])
            topic = topics.get(tp[0])
            now = None if topic is None else topic.partitions.get(tp[1])
            state = states.get(tp)
            entry = {"partition": f"{tp[0]}-{tp[1]}", "target": target, "replicas": now}
            if now is None or list(now) != target:
                problems.append(f"{tp[0]}-{tp[1]}: replicas {now}, planned {target}")
            elif state is None or state.leader == znodes.NO_LEADER or state.leader not in target:
                problems.append(
                    f"{tp[0]}-{tp[1]}: no leader among {target} ({None if state is None else state.leader})"
                )
            elif set(state.isr) != set(target):
                problems.append(
                    f"{tp[0]}-{tp[1]}: ISR {list(state.isr)} is not the full replica set {target}"
                )
            if state is not None:
                entry.update(leader=state.leader, isr=list(state.isr))
            checked.append(entry)
        disk: dict[str, Any] = {"checked": False}
        if not _no_plan(self.inventory_path):
            dirs = inventory_dirs(str(self.inventory_path))
            disk = {"checked": True, "inventory": self.inventory_path, "brokers": sorted(dirs)}
            for m in moves:
                tp = (m["topic"], int(m["partition"]))
                for b in set(m["current"]) - set(m["target"]):
                    if b in dirs and tp in dirs[b]:
                        problems.append(f"{tp[0]}-{tp[1]}: data directory still on broker {b}")
                for b in set(m["target"]) - set(m["current"]):
                    if b not in dirs:
                        problems.append(f"{tp[0]}-{tp[1]}: broker {b} was not inventoried after the drain")
                    elif tp not in dirs[b]:
                        problems.append(f"{tp[0]}-{tp[1]}: no data directory on target broker {b}")
        if throttles_left:
            problems.append(f"throttles this run set are still in place: {throttles_left}")
        result = {
            "plan_dir": self.plan_dir,
            "verified_at": datetime.now(UTC).isoformat(),
            "ok": not problems,
            "problems": problems,
            "moved": checked,
            "left_on_drained_brokers": [
                {"partition": f"{t}-{p}", "reason": known_left.get((t, p), "not in the plan")}
                for t, p in remaining
            ],
            "disk": disk,
            "throttles_left": throttles_left,
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1))
        report = self._report(plan, location, result)
        location.write(REPORT_FILE, report)
        self.log.info("%s", report)
        if problems:
            raise DrainVerificationError(
                f"drain not verified ({len(problems)} problem(s)): " + "; ".join(problems[:10])
            )
        return {"ok": True, "report": location.path(REPORT_FILE), "verify": location.path(VERIFY_FILE)}

    @staticmethod
    def _report(plan: Mapping[str, Any], location: DrainLocation, result: Mapping[str, Any]) -> str:
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


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


__all__ = [
    "ClearReplicationThrottlesOperator",
    "DrainError",
    "DrainFileMissingError",
    "DrainFileUnreadableError",
    "DrainInventoryError",
    "DrainLocation",
    "DrainPlanError",
    "DrainVerificationError",
    "IncompletePlanError",
    "PlanOutdatedError",
    "ReassignmentInFlightError",
    "ReplicaOneDrainExecuteOperator",
    "ReplicaOneDrainPlanOperator",
    "ReplicaOneDrainVerifyOperator",
    "ThrottlesStillNeededError",
    "inventory_dirs",
    "inventory_sizes",
    "load_plan",
    "load_throttle_record",
    "notify_config_change",
    "update_config",
]
