"""Broker inventory as Airflow tasks: list the brokers, inventory each (mapped), report coverage.

::

    brokers = ListBrokerIdsOperator(task_id="brokers", kafka_zookeeper_conn_id="zk_prod")
    inventory = BrokerInventoryOperator.partial(
        task_id="inventory", cluster="prod", base_path="s3://kafka-artefacts",
        ssh_conn_id="kafka_hosts", kafka_zookeeper_conn_id="zk_prod", retries=2,
    ).expand(broker_id=brokers.output)
    coverage = InventoryCoverageOperator(
        task_id="coverage", cluster="prod", base_path="s3://kafka-artefacts", expected_broker_ids=brokers.output
    )
    brokers >> inventory >> coverage

Artefacts under ``<base>/<cluster>/inventory/<ts>/`` (``<ts>`` is the run's key, :func:`run_key`, e.g.
``20261122T061800.000000Z-3f2a9c1e``, unless given, so every mapped task of a run writes to the same place):

* ``broker=<id>/part-0.parquet``: one row per directory in the broker's log dirs; the broker's facts
  (server.properties settings, identity checks) as JSON in the schema metadata ``kafka_zk.inventory``.
  ``broker`` is a Hive-style partition column: pyarrow datasets and Spark find it in the directory
  name (:mod:`airflow_provider_kafka_zk.artefacts.inventory_layout` is the one reader; it also reads
  runs written before, as flat ``broker=<id>.parquet`` files);
* ``_logdirs/broker=<id>.parquet``: one row per log dir (meta.properties, clean-shutdown marker,
  checkpoints);
* ``_failures/broker=<id>.json``: why the last attempt for a broker failed (removed on success);
* ``_coverage.json``: which brokers the run covers, written by :class:`InventoryCoverageOperator`.

Names starting with ``_`` are skipped by Spark's file listing, so ``spark.read.parquet(<ts dir>)``
reads exactly the partition rows, with the ``broker`` column. Every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts import inventory_layout
from airflow_provider_kafka_zk.artefacts.files import write_atomically as write_file_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_fs
from airflow_provider_kafka_zk.hooks.broker_host import (
    DEFAULT_PYTHON_INTERPRETERS,
    BrokerHostError,
    BrokerHostHook,
    HostKeyPolicyError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.inventory import PARTITION_ROW_FIELDS, BrokerInventory, InventoryCoverage
from airflow_provider_kafka_zk.kafka.snapshot import gc_paused
from airflow_provider_kafka_zk.operators._run import TS_FORMAT, run_key, run_key_of  # noqa: F401 (re-exported)
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

SUMMARY_METADATA_KEY = b"kafka_zk.inventory"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TS = re.compile(r"[A-Za-z0-9][A-Za-z0-9T._:+-]*")
_FAILURE_FILE = re.compile(r"broker=(-?[0-9]+)\.json")

_FILE = pa.struct([("name", pa.string()), ("size", pa.int64()), ("kind", pa.string())])
PARTITION_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("inventory_ts", pa.string()),
        ("broker_id", pa.int32()),
        ("host", pa.string()),
        ("log_dir_index", pa.int32()),
        ("log_dir", pa.string()),
        ("dir_name", pa.string()),
        ("dir_name_bytes", pa.binary()),
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("unique_id", pa.string()),
        ("symlink", pa.bool_()),
        ("mtime", pa.timestamp("ms", tz="UTC")),
        # inode change time (a -delete directory's rename); absent in older files: unknown
        ("ctime", pa.timestamp("ms", tz="UTC")),
        ("partition_metadata_present", pa.bool_()),
        ("partition_metadata_raw", pa.binary()),
        ("topic_id", pa.string()),
        ("partition_metadata_version", pa.int32()),
        ("leader_epoch_checkpoint_raw", pa.binary()),
        ("leader_epochs", pa.list_(pa.struct([("epoch", pa.int32()), ("start_offset", pa.int64())]))),
        ("latest_leader_epoch", pa.int32()),
        ("segment_count", pa.int32()),
        ("log_bytes", pa.int64()),
        ("first_segment_base_offset", pa.int64()),
        ("last_segment_base_offset", pa.int64()),
        ("newest_index_bytes", pa.int64()),
        ("newest_timeindex_bytes", pa.int64()),
        ("last_modified", pa.timestamp("ms", tz="UTC")),
        (
            "segments",
            pa.list_(
                pa.struct(
                    [
                        ("base_offset", pa.int64()),
                        ("log_bytes", pa.int64()),
                        ("index_bytes", pa.int64()),
                        ("timeindex_bytes", pa.int64()),
                    ]
                )
            ),
        ),
        ("other_files", pa.list_(_FILE)),
        ("file_count", pa.int32()),
        ("total_bytes", pa.int64()),
        ("disk_bytes", pa.int64()),
        ("transient_files", pa.int32()),
        ("recovery_point", pa.int64()),
        ("high_watermark", pa.int64()),
        ("log_start_offset", pa.int64()),
        ("cleaner_offset", pa.int64()),
        ("errors", pa.list_(pa.string())),
    ]
)
LOG_DIR_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("inventory_ts", pa.string()),
        ("broker_id", pa.int32()),
        ("host", pa.string()),
        ("log_dir_index", pa.int32()),
        ("log_dir", pa.string()),
        ("real_path", pa.string()),
        ("exists", pa.bool_()),
        ("error", pa.string()),
        ("meta_properties_raw", pa.binary()),
        ("meta_version", pa.int32()),
        ("meta_broker_id", pa.int32()),
        ("meta_cluster_id", pa.string()),
        ("meta_directory_id", pa.string()),
        ("clean_shutdown_present", pa.bool_()),
        ("clean_shutdown_raw", pa.binary()),
        ("clean_shutdown_broker_epoch", pa.int64()),
        ("recovery_point_offset_checkpoint_raw", pa.binary()),
        ("replication_offset_checkpoint_raw", pa.binary()),
        ("log_start_offset_checkpoint_raw", pa.binary()),
        ("cleaner_offset_checkpoint_raw", pa.binary()),
        ("recovery_point_offset_checkpoint_entries", pa.int32()),
        ("replication_offset_checkpoint_entries", pa.int32()),
        ("log_start_offset_checkpoint_entries", pa.int32()),
        ("cleaner_offset_checkpoint_entries", pa.int32()),
        ("child_dirs", pa.int32()),
        ("other_entries", pa.list_(_FILE)),
        ("errors", pa.list_(pa.string())),
    ]
)


# ---------------------------------------------------------------------------------------------
# Artefact locations and atomic writes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InventoryLocation:
    """``<base>/<cluster>/inventory/<ts>/`` on a local path or any fsspec URL."""

    base_path: str
    cluster: str
    inventory_ts: str
    conn_id: str | None = None  # the artefact store's Airflow connection (object stores)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.cluster):
            raise ValueError(f"cluster must be a plain name ([A-Za-z0-9._-]), not {self.cluster!r}")
        if not _TS.fullmatch(self.inventory_ts):
            raise ValueError(f"inventory_ts must be a plain timestamp name, not {self.inventory_ts!r}")

    @property
    def fs_and_root(self) -> tuple[fsspec.AbstractFileSystem, str]:
        """The store's filesystem (from ``ObjectStoragePath``, with ``conn_id``) and the run's path."""
        fs, base, _ = artefacts_fs(self.base_path, self.conn_id)
        return fs, posixpath.join(base, self.cluster, "inventory", self.inventory_ts)

    @property
    def url(self) -> str:
        """The run's plain URL (no connection in it), for Airflow-free readers such as Spark."""
        _, _, base = artefacts_fs(self.base_path, self.conn_id)
        return "/".join([base.rstrip("/"), self.cluster, "inventory", self.inventory_ts])

    def broker_file(self, broker_id: int) -> str:
        return inventory_layout.broker_file(broker_id)

    def log_dirs_file(self, broker_id: int) -> str:
        return f"_logdirs/broker={broker_id}.parquet"

    def failure_file(self, broker_id: int) -> str:
        return f"_failures/broker={broker_id}.json"

    coverage_file = "_coverage.json"


def write_atomically(location: InventoryLocation, relative: str, data: bytes) -> str:
    """Write ``data`` under the location via a temporary name and a rename; returns the path."""
    fs, root = location.fs_and_root
    return write_file_atomically(fs, posixpath.join(root, relative), data)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


_TIME_COLUMNS = {"mtime": "mtime_ms", "ctime": "ctime_ms", "last_modified": "last_modified_ms"}
"""Timestamp columns of the Parquet file and the row fields holding them as epoch milliseconds."""


def inventory_tables(
    inventory: BrokerInventory, cluster: str, inventory_ts: str
) -> tuple[pa.Table, pa.Table]:
    """The partition-directory table (with the broker summary as metadata) and the log-dir table.

    The partition rows go into the table column by column (one ``zip`` over the rows' value tuples,
    one Arrow array per column, times straight from their milliseconds): a broker holds tens of
    thousands of directories.
    """
    common = {"cluster": cluster, "inventory_ts": inventory_ts, "host": inventory.host}
    with gc_paused():  # the row tuples and their lists are as many objects as the directories
        rows = [partition.row_values() for partition in inventory.partitions]
        columns = dict(zip(PARTITION_ROW_FIELDS, zip(*rows, strict=True), strict=True)) if rows else {}
        arrays = []
        for column in PARTITION_SCHEMA:
            if column.name in common:
                values: Any = [common[column.name]] * len(rows)
            else:
                values = columns.get(_TIME_COLUMNS.get(column.name, column.name), ())
            arrays.append(pa.array(values, type=column.type))
    summary = {"cluster": cluster, "inventory_ts": inventory_ts, **inventory.summary()}
    schema = PARTITION_SCHEMA.with_metadata({SUMMARY_METADATA_KEY: json.dumps(summary).encode()})
    partitions = pa.Table.from_arrays(arrays, schema=schema)
    log_dirs = pa.Table.from_pylist(
        [{**common, **d.to_row()} for d in inventory.log_dirs], schema=LOG_DIR_SCHEMA
    )
    return partitions, log_dirs


def read_inventory_summary(path: str) -> dict[str, Any]:
    """The broker-level JSON stored in a broker file's schema metadata (``broker=<id>/part-0.parquet``)."""
    fs, local = fsspec.core.url_to_fs(path)
    with fs.open(local, "rb") as handle:
        metadata = pq.read_schema(handle).metadata or {}
    return json.loads(metadata[SUMMARY_METADATA_KEY])


# ---------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------


class ListBrokerIdsOperator(BaseOperator):
    """Broker ids to inventory: registered brokers plus every broker named in a replica assignment.

    A stopped or crashed broker is not registered but still holds replicas on disk (it is often
    the one that matters), so assignments count too. Returns a sorted list for ``.expand()``.

    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection.
    :param include_assigned: also list brokers that only appear in replica assignments.
    :param extra_broker_ids: brokers to add whatever ZooKeeper says (e.g. ones about to be added).
    """

    template_fields: Sequence[str] = ("kafka_zookeeper_conn_id", "extra_broker_ids")

    def __init__(
        self,
        *,
        kafka_zookeeper_conn_id: str,
        include_assigned: bool = True,
        extra_broker_ids: Iterable[int] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.include_assigned = include_assigned
        self.extra_broker_ids = extra_broker_ids

    def execute(self, context: Context) -> list[int]:
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            registered = {int(b) for b in hook.get_children(znodes.BROKER_IDS)}
            assigned: set[int] = set()
            if self.include_assigned and hook.exists(znodes.BROKER_TOPICS):
                topics = hook.get_children(znodes.BROKER_TOPICS)
                for path, (data, _) in hook.get_many(znodes.topic_path(t) for t in topics).items():
                    try:
                        assignment = znodes.TopicAssignment.decode(data, path)
                    except Exception as exc:
                        log.warning("Skipping %s: %s", path, exc)
                        continue
                    for replicas in assignment.partitions.values():
                        assigned.update(replicas)
        brokers = sorted(registered | assigned | {int(b) for b in self.extra_broker_ids})
        log.info(
            "Brokers to inventory: %s (registered %s; only in assignments %s)",
            brokers,
            sorted(registered),
            sorted(assigned - registered),
        )
        return brokers


class BrokerInventoryOperator(BaseOperator):
    """Inventory brokers' disks over SSH and write ``broker=<id>/part-0.parquet`` each; made for
    ``.expand(broker_id=...)`` (a task per broker) or ``.expand(broker_ids=...)`` (a task per group of
    brokers, :class:`BrokerGroupsOperator`: a task process costs more than a broker's inventory).

    The brokers of a group are inventoried side by side (``max_parallel`` at once, one SSH
    connection each: while one broker's host walks its disks, another's stream is parsed). A broker
    that cannot be inventoried leaves ``_failures/broker=<id>.json`` for the coverage report and fails
    the task once every other broker of it is done (after its retries when the error can pass:
    unreachable host, broken stream); host-key, authentication and identity errors fail at once
    without a retry (retrying cannot help and must not hammer a host whose key changed).

    :param broker_id: the broker to inventory (returns its record).
    :param broker_ids: the brokers to inventory, instead of ``broker_id`` (returns their records).
    :param max_parallel: brokers of ``broker_ids`` inventoried at once.
    :param cluster: the cluster's name (its artefact directory).
    :param base_path: artefact base, local directory or fsspec URL.
    :param artefacts_conn_id: the Airflow connection of an object-store base (``s3://...``);
        default: ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param ssh_conn_id: Airflow ``ssh`` connection used for every broker host (its host is only a
        fallback: each broker's host comes from its registration or ``broker_hosts``).
    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection (broker
        registrations: host names, and which brokers exist).
    :param broker_hosts: ``{broker id: host}`` for brokers that are not registered (stopped).
    :param server_properties_path: ``server.properties`` on the hosts (``{broker_id}`` allowed);
        default: read from the running ``kafka.Kafka`` process.
    :param inventory_ts: the run's directory name (default: the run's :func:`run_key`, so every
        mapped task of a run writes to one directory).
    :param known_hosts: extra known_hosts files (host keys are always verified).
    :param connect_timeout: SSH connect timeout in seconds (default: the connection's).
    :param command_timeout: the remote command's limit in seconds.
    :param idle_timeout: seconds without output before the remote command counts as hung.
    :param python_interpreters: interpreters tried on the host, in order (the script is stdlib only).
    """

    template_fields: Sequence[str] = (
        "broker_id",
        "broker_ids",
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "inventory_ts",
        "ssh_conn_id",
        "kafka_zookeeper_conn_id",
        "broker_hosts",
        "server_properties_path",
    )
    ui_color = "#e6f2ff"

    def __init__(
        self,
        *,
        broker_id: int | str | None = None,
        broker_ids: Iterable[int | str] | None = None,
        max_parallel: int = 4,
        cluster: str,
        base_path: str,
        ssh_conn_id: str,
        kafka_zookeeper_conn_id: str | None = None,
        broker_hosts: Mapping[int | str, str] | None = None,
        server_properties_path: str | None = None,
        inventory_ts: str | None = None,
        known_hosts: Sequence[str] = (),
        connect_timeout: float | None = None,
        command_timeout: float = 900.0,
        idle_timeout: float = 300.0,
        python_interpreters: Sequence[str] = DEFAULT_PYTHON_INTERPRETERS,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (broker_id is None) == (broker_ids is None):
            raise ValueError("give broker_id (one broker) or broker_ids (a group of brokers), not both")
        self.artefacts_conn_id = artefacts_conn_id
        self.broker_id = broker_id
        self.broker_ids = broker_ids
        self.max_parallel = max(1, int(max_parallel))
        self.cluster = cluster
        self.base_path = base_path
        self.ssh_conn_id = ssh_conn_id
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.inventory_ts = inventory_ts
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.idle_timeout = idle_timeout
        self.python_interpreters = python_interpreters

    def hook(self) -> BrokerHostHook:
        return BrokerHostHook(
            self.ssh_conn_id,
            self.kafka_zookeeper_conn_id,
            broker_hosts=self.broker_hosts,
            server_properties_path=self.server_properties_path,
            known_hosts=self.known_hosts,
            connect_timeout=self.connect_timeout,
            command_timeout=self.command_timeout,
            idle_timeout=self.idle_timeout,
            python_interpreters=self.python_interpreters,
        )

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        location = InventoryLocation(
            self.base_path, self.cluster, _resolve_ts(self.inventory_ts, context), self.artefacts_conn_id
        )
        hook = self.hook()
        if self.broker_ids is None:
            return self.inventory_broker(hook, int(self.broker_id), location, context)
        brokers = [int(b) for b in self.broker_ids]
        log.info("Inventory of brokers %s, %d at a time", brokers, self.max_parallel)
        # on this thread: an Airflow task reaches its connections (DB-stored too) from here only
        hook.resolve_connections()
        failures: dict[int, BaseException] = {}

        def one(broker_id: int) -> dict[str, Any] | None:
            try:
                return self.inventory_broker(hook, broker_id, location, context)
            except Exception as exc:  # recorded; the task fails after the others are done
                failures[broker_id] = exc
                return None

        with ThreadPoolExecutor(max_workers=min(self.max_parallel, len(brokers) or 1)) as pool:
            done = [r for r in pool.map(one, brokers) if r is not None]
        if failures:
            final = all(isinstance(e, AirflowFailException) for e in failures.values())
            message = "; ".join(f"broker {b}: {e}" for b, e in sorted(failures.items()))
            log.error("%d of %d brokers not inventoried: %s", len(failures), len(brokers), message)
            if final:  # none of them can pass on a retry
                raise AirflowFailException(message)
            raise BrokerGroupInventoryError(message)
        return done

    def inventory_broker(
        self, hook: BrokerHostHook, broker_id: int, location: InventoryLocation, context: Context
    ) -> dict[str, Any]:
        """One broker: inventory over SSH, write its files, drop an earlier failure record."""
        try:
            inventory = hook.inventory(broker_id)
        except Exception as exc:
            record_failure(location, broker_id, exc, context)
            if isinstance(exc, HostKeyPolicyError) or (
                isinstance(exc, BrokerHostError) and not exc.retryable
            ):
                raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
            raise
        partitions, log_dirs = inventory_tables(inventory, self.cluster, location.inventory_ts)
        write_atomically(location, location.log_dirs_file(broker_id), _parquet_bytes(log_dirs))
        path = write_atomically(location, location.broker_file(broker_id), _parquet_bytes(partitions))
        _remove(location, location.failure_file(broker_id))
        _remove(location, f"broker={broker_id}.parquet")  # an earlier try's, in the layout before
        summary = inventory.summary()
        mismatches = [c for c in summary["identity"] if c["status"] == "mismatch"]
        for check in mismatches:
            log.warning("Broker %d identity check %s: %s", broker_id, check["check"], check["detail"])
        log.info("Wrote %s (%d partition directories)", path, partitions.num_rows)
        return {
            "broker_id": broker_id,
            "host": inventory.host,
            "path": "/".join([location.url, location.broker_file(broker_id)]),
            "log_dirs_path": "/".join([location.url, location.log_dirs_file(broker_id)]),
            "partition_dirs": partitions.num_rows,
            "dirs_with_errors": summary["dirs_with_errors"],
            "identity_mismatches": [c["check"] for c in mismatches],
        }


class BrokerGroupInventoryError(RuntimeError):
    """Brokers of a group could not be inventoried, and a retry may get them (each is named)."""


def broker_groups(broker_ids: Iterable[int], groups: int) -> list[list[int]]:
    """``broker_ids`` (sorted) in at most ``groups`` groups of nearly equal size, broker order kept
    (brokers 0-4, 5-9 ... for 50 brokers in 10): one inventory task each.

    :param broker_ids: the brokers to inventory.
    :param groups: the most groups (inventory tasks) wanted.
    """
    brokers = sorted({int(b) for b in broker_ids})
    count = max(1, min(int(groups), len(brokers)))
    size, extra = divmod(len(brokers), count)
    out, start = [], 0
    for number in range(count):
        end = start + size + (1 if number < extra else 0)
        out.append(brokers[start:end])
        start = end
    return [g for g in out if g]


def deployment_task_slots() -> int:
    """How many tasks of one DAG run can run at once here: Airflow's ``[core] parallelism`` (all
    running tasks of the deployment) and ``[core] max_active_tasks_per_dag``, the smaller."""
    from airflow.sdk.configuration import conf

    return max(1, min(conf.getint("core", "parallelism"), conf.getint("core", "max_active_tasks_per_dag")))


class BrokerGroupsOperator(ListBrokerIdsOperator):
    """The brokers to inventory (as :class:`ListBrokerIdsOperator` lists them) in groups, one inventory
    task each: ``BrokerInventoryOperator.partial(...).expand(broker_ids=groups.output)``.

    A task process of its own costs Airflow about a second of CPU (start, DAG file, API calls), more
    than inventorying a broker of a few thousand partitions; a task per group runs the brokers side
    by side inside it, and the groups side by side as the deployment's slots allow. It reads
    ZooKeeper itself, so the inventory need not wait for another task's list.

    :param groups: the most inventory tasks; default :func:`deployment_task_slots` less one (the run's
        tasks that can run at once, but the snapshot's: it runs beside the inventory, and one group
        more than the slots left waits for the snapshot's slot; its brokers, inventoried last, set
        the run's end -- measured at 50k partitions / 24 brokers with 8 slots: the eighth of 8 groups
        started 8 s after the others).
    :param kwargs: :class:`ListBrokerIdsOperator`'s (``kafka_zookeeper_conn_id`` ...).
    """

    template_fields: Sequence[str] = (*ListBrokerIdsOperator.template_fields, "groups")

    def __init__(self, *, groups: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.groups = groups

    def execute(self, context: Context) -> list[list[int]]:  # type: ignore[override]
        brokers = super().execute(context)
        wanted = int(self.groups) if self.groups not in (None, "", "None") else deployment_task_slots() - 1
        groups = broker_groups(brokers, wanted)
        log.info("%d inventory tasks: %s", len(groups), "; ".join(f"brokers {g}" for g in groups))
        return groups


def record_failure(
    location: InventoryLocation, broker_id: int, error: BaseException, context: Context | None
) -> None:
    """Leave ``_failures/broker=<id>.json`` saying why (error type and message; never credentials)."""
    ti = context.get("ti") if context else None
    record = {
        "broker_id": broker_id,
        "error_type": type(error).__name__,
        "message": str(error)[:2000],
        "host": getattr(error, "host", None),
        "port": getattr(error, "port", None),
        "retryable": bool(getattr(error, "retryable", True)) and not isinstance(error, HostKeyPolicyError),
        "try_number": getattr(ti, "try_number", None),
        "at": datetime.now(UTC).isoformat(),
    }
    try:
        write_atomically(location, location.failure_file(broker_id), json.dumps(record, indent=1).encode())
    except Exception as exc:  # the task fails with the original error either way
        log.warning("Could not record the failure of broker %d: %s", broker_id, exc)


def _remove(location: InventoryLocation, relative: str) -> None:
    fs, root = location.fs_and_root
    path = posixpath.join(root, relative)
    if fs.exists(path):
        fs.rm(path)


def inventory_coverage(location: InventoryLocation, expected_broker_ids: Iterable[int]) -> InventoryCoverage:
    """Coverage of one inventory run from what is on storage (inventories and failure records)."""
    fs, root = location.fs_and_root
    inventoried: set[int] = set()
    failures: dict[int, str] = {}
    if fs.exists(root):
        inventoried.update(inventory_layout.list_inventory(location.url, fs=fs).files)
        failures_dir = posixpath.join(root, "_failures")
        if fs.exists(failures_dir):
            for path in fs.ls(failures_dir, detail=False):
                match = _FAILURE_FILE.fullmatch(posixpath.basename(path))
                if not match:
                    continue
                try:
                    record = json.loads(fs.cat_file(path))
                    failures[int(match[1])] = f"{record['error_type']}: {record['message']}"
                except (ValueError, KeyError) as exc:
                    failures[int(match[1])] = f"unreadable failure record ({exc})"
    return InventoryCoverage.compute(expected_broker_ids, inventoried, failures)


class InventoryCoverageOperator(BaseOperator):
    """Say which brokers an inventory run covers; runs whatever the mapped tasks did (all_done).

    Writes ``_coverage.json`` and returns it. Anything short of every expected broker is reported
    "partial" with the missing brokers and why; coverage is never a health verdict ("clean").

    :param cluster: the cluster's name (its artefact directory).
    :param base_path: artefact base, local directory or fsspec URL.
    :param artefacts_conn_id: the Airflow connection of an object-store base (as the inventory's).
    :param expected_broker_ids: every broker the run should cover (usually the list task's output).
    :param inventory_ts: the run's directory name (default: the run's :func:`run_key`).
    :param fail_when_partial: fail this task too when a broker is missing.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "inventory_ts",
        "expected_broker_ids",
    )

    def __init__(
        self,
        *,
        cluster: str,
        base_path: str,
        expected_broker_ids: Iterable[int] | Any,
        inventory_ts: str | None = None,
        fail_when_partial: bool = False,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.base_path = base_path
        self.expected_broker_ids = expected_broker_ids
        self.inventory_ts = inventory_ts
        self.fail_when_partial = fail_when_partial

    def execute(self, context: Context) -> dict[str, Any]:
        location = InventoryLocation(
            self.base_path, self.cluster, _resolve_ts(self.inventory_ts, context), self.artefacts_conn_id
        )
        expected = [int(b) for b in (self.expected_broker_ids or ())]
        coverage = inventory_coverage(location, expected)
        record = {"cluster": self.cluster, "inventory_ts": location.inventory_ts, **coverage.to_dict()}
        write_atomically(location, location.coverage_file, json.dumps(record, indent=1).encode())
        if coverage.status == "complete":
            log.info("Inventory coverage %s", coverage.describe())
        else:
            log.warning("Inventory coverage %s", coverage.describe())
            if self.fail_when_partial:
                raise AirflowFailException(f"inventory coverage {coverage.describe()}")
        return record
