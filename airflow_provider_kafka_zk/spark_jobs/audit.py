"""The cluster audit as a job: artefacts in, findings out, with no Airflow import.

The Spark entry point (``airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py``) and the in-process path of the daily
hygiene DAG both call :func:`run_audit`. It loads a snapshot (and the one before it), one inventory
run (and its coverage), builds the :class:`ClusterState` and :class:`ClusterFacts`, runs the rules
of :mod:`airflow_provider_kafka_zk.kafka.audit` with one of two engines and publishes
``<base>/<cluster>/findings/<ts>/`` (``findings.parquet``, ``report.html``, ``summary.json`` last).

Engines: ``in-process`` calls :func:`kafka.audit.audit`; ``spark`` groups the inventory rows by
topic with the RDD API, joins them with the ZooKeeper side (broadcast), runs
:func:`kafka.audit.audit_topic` on the executors and :func:`kafka.audit.finish` on the driver. Both
see the same rows in the same order, so they return the same findings.
"""

from __future__ import annotations

import io
import json
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.inventory_layout import (
    InventoryLayoutError,
    is_legacy_file,
    list_inventory,
)
from airflow_provider_kafka_zk.artefacts.object_storage import is_bound
from airflow_provider_kafka_zk.artefacts.snapshots import (
    SnapshotNotFoundError,
    latest_snapshot,
    previous_snapshot,
    read_snapshot,
    validate_cluster_name,
)
from airflow_provider_kafka_zk.kafka import audit as rules
from airflow_provider_kafka_zk.kafka.audit import BrokerSettings, ClusterFacts, ReplicaDir, TopicEvidence
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.figures import audit_figures
from airflow_provider_kafka_zk.kafka.findings import Finding, triage_order
from airflow_provider_kafka_zk.kafka.inventory import age_reference_ms
from airflow_provider_kafka_zk.kafka.kraft_migration import broker_modes_from_settings, migration_state
from airflow_provider_kafka_zk.kafka.model import ClusterState, TopicState
from airflow_provider_kafka_zk.kafka.snapshot import gc_paused
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.reports import build_summary, render_html

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENGINES = ("in-process", "spark")
FINDINGS_DIR = "findings"
FINDINGS_FILE = "findings.parquet"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
INVENTORY_METADATA_KEY = b"kafka_zk.inventory"  # operators.inventory.SUMMARY_METADATA_KEY
COVERAGE_FILE = "_coverage.json"

# The inventory columns the rules read (ReplicaDir.from_inventory_columns), with mtime as epoch ms
# ``mtime_ms`` and ``ctime_ms`` (None when the file predates the ``ctime`` column); the rules age a
# directory from ReplicaDir.age_reference_ms (kafka.inventory.age_reference_ms: ctime for a -delete
# directory, which a rename does not touch the mtime of; mtime otherwise). The rows of
# read_inventory_rows also carry that value as ``age_reference_ms``, computed by the same function.
INVENTORY_COLUMNS = (
    "broker_id",
    "log_dir",
    "dir_name",
    "kind",
    "topic",
    "partition",
    "topic_id",
    "partition_metadata_present",
    "errors",
    "log_bytes",  # RF=1 exposure: .log bytes only, as the drain plan counts them
)

FINDINGS_SCHEMA = pa.schema(
    [
        ("check", pa.string()),
        ("severity", pa.string()),
        ("cluster", pa.string()),
        ("summary", pa.string()),
        ("action", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("broker_id", pa.int32()),
        ("path", pa.string()),
        ("evidence", pa.string()),  # JSON
    ]
)


class AuditInputError(RuntimeError):
    """An input artefact is missing or unusable; the message names it and what to run first."""


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditInputs:
    """Everything one audit run reads, loaded on the driver.

    ``dirs`` holds every inventoried directory as the rules read it (empty when the Spark engine reads
    them); ``replica_dirs`` counts the inventory's rows either way.
    """

    cluster: str
    state: ClusterState
    previous: ClusterState | None
    facts: ClusterFacts
    inventory_files: tuple[str, ...]
    coverage: dict[str, Any]
    snapshot: str
    previous_snapshot: str | None
    inventory: str | None
    replica_dirs: int = 0
    dirs: tuple[ReplicaDir, ...] = field(default=(), repr=False)
    previous_absent_reason: str | None = None  # why nothing was compared (the report's header says it)
    broker_summaries: Mapping[int, Mapping[str, Any]] = field(default_factory=dict, repr=False)

    @cached_property
    def dir_rows(self) -> list[dict[str, Any]]:
        """The directories as inventory rows (:func:`read_inventory_rows`), for readers of rows: read
        again from the files when first asked (the audit itself reads :attr:`dirs`)."""
        return read_inventory_rows(self.inventory_files)[0] if self.dirs else []


def _fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/") or "/"


def _url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


def inventory_files(inventory: str) -> tuple[list[str], dict[int, str]]:
    """The broker files of one inventory run (sorted by broker) and their broker ids (either layout:
    ``broker=<id>/part-0.parquet``, or the flat ``broker=<id>.parquet`` of earlier runs)."""
    fs, root = _fs(inventory)
    if not fs.exists(root):
        raise AuditInputError(f"inventory {inventory} does not exist: run the broker inventory first")
    try:
        by_broker = list_inventory(inventory).files
    except InventoryLayoutError as exc:
        raise AuditInputError(str(exc)) from None
    return list(by_broker.values()), by_broker


def _read_broker_files(
    files: Sequence[str], *, rows: bool
) -> Iterator[tuple[dict[str, list[Any]] | None, dict[bytes, bytes], int]]:
    """Per broker file: its rule columns (:func:`_rule_columns`; None when ``rows`` is false: only the
    Parquet footer is read), its schema metadata, its row count."""
    for path in files:
        fs, local = _fs(path)
        with fs.open(local, "rb") as handle:
            if rows:
                parquet = pq.ParquetFile(handle)
                times = [c for c in ("mtime", "ctime") if c in parquet.schema_arrow.names]
                table = parquet.read(columns=[*INVENTORY_COLUMNS, *times])
                yield _rule_columns(table), table.schema.metadata or {}, table.num_rows
            else:
                footer = pq.read_metadata(handle)
                yield None, footer.schema.to_arrow_schema().metadata or {}, footer.num_rows


def _rule_columns(table: pa.Table) -> dict[str, list[Any]]:
    """:data:`INVENTORY_COLUMNS` as lists, with ``mtime_ms`` and ``ctime_ms`` (None in every row of a
    file written before the ``ctime`` column existed: unknown)."""
    columns = {name: table.column(name).to_pylist() for name in INVENTORY_COLUMNS}
    columns["mtime_ms"] = table.column("mtime").cast(pa.int64()).to_pylist()
    columns["ctime_ms"] = (
        table.column("ctime").cast(pa.int64()).to_pylist()
        if "ctime" in table.column_names
        else [None] * table.num_rows
    )
    return columns


def _broker_summary(metadata: Mapping[bytes, bytes], summaries: dict[int, dict[str, Any]]) -> None:
    if INVENTORY_METADATA_KEY in metadata:
        summary = json.loads(metadata[INVENTORY_METADATA_KEY])
        summaries[int(summary["broker_id"])] = summary


def read_inventory_dirs(
    files: Sequence[str], *, rows: bool = True
) -> tuple[list[ReplicaDir], dict[int, dict[str, Any]], int]:
    """The run's directories as the rules read them (sorted by broker, log dir, name), each broker's
    facts JSON, the row count.

    Built from the files' columns (:meth:`ReplicaDir.from_inventory_columns`), no dict per row.
    ``rows=False`` reads only the Parquet footers (the Spark engine reads the rows on the executors).
    """
    run: dict[str, list[Any]] = {}  # the run's columns: every broker's topic ids parsed together
    broker_summaries: dict[int, dict[str, Any]] = {}
    count = 0
    with gc_paused():  # an object per directory: no collection walks them while they are made
        for columns, metadata, num_rows in _read_broker_files(files, rows=rows):
            count += num_rows
            _broker_summary(metadata, broker_summaries)
            for name, values in (columns or {}).items():
                run.setdefault(name, []).extend(values)
        dirs = ReplicaDir.from_inventory_columns(run) if run else []
        dirs.sort(key=_dir_order)
    return dirs, broker_summaries, count


def read_inventory_rows(
    files: Sequence[str], *, rows: bool = True
) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]], int]:
    """Directory rows (the columns the rules need, ``mtime_ms``/``ctime_ms``/``age_reference_ms`` as
    int), each broker's facts JSON, the row count.

    A dict per directory, for readers of rows: the audit reads :func:`read_inventory_dirs`.
    ``rows=False`` reads only the Parquet footers.
    """
    out: list[dict[str, Any]] = []
    broker_summaries: dict[int, dict[str, Any]] = {}
    count = 0
    for columns, metadata, num_rows in _read_broker_files(files, rows=rows):
        count += num_rows
        _broker_summary(metadata, broker_summaries)
        if columns is not None:
            columns["age_reference_ms"] = [
                age_reference_ms(kind, mtime, ctime)
                for kind, mtime, ctime in zip(
                    columns["kind"], columns["mtime_ms"], columns["ctime_ms"], strict=True
                )
            ]
            names = list(columns)
            with gc_paused():  # a dict per directory: no collection walks them while they are made
                out.extend(
                    dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)
                )
    return out, broker_summaries, count


def read_coverage(inventory: str, inventoried: Iterable[int]) -> dict[str, Any]:
    """``_coverage.json`` of the run, or one made up from the files when the coverage task did not write it.

    ``missing`` lists every broker without an inventory (failed or never run), which is what the
    report's "coverage partial" line needs; ``missing_unexplained`` keeps the coverage file's own
    meaning (no failure record either).
    """
    fs, root = _fs(inventory)
    path = f"{root}/{COVERAGE_FILE}"
    done = sorted(set(inventoried))
    if fs.exists(path):
        record = json.loads(fs.cat_file(path))
    else:
        record = {
            "status": "unknown",
            "expected": None,
            "inventoried": done,
            "not_inventoried": [],
            "failed": {},
            "missing": [],
            "description": f"no {COVERAGE_FILE}: {len(done)} broker file(s) found",
        }
    record["missing_unexplained"] = list(record.get("missing") or [])
    record["missing"] = list(record.get("not_inventoried") or [])
    return record


def broker_settings(broker_id: int, summary: Mapping[str, Any]) -> BrokerSettings:
    """The rules' view of a broker from its inventory summary (server.properties, Kafka defaults)."""
    facts = summary.get("facts") or {}
    defaults = BrokerSettings(broker_id)

    def pick(key: str, default: Any) -> Any:
        value = facts.get(key)
        return default if value is None else value

    return BrokerSettings(
        broker_id=broker_id,
        delete_topic_enable=bool(pick("delete.topic.enable", defaults.delete_topic_enable)),
        inter_broker_protocol_version=facts.get("inter.broker.protocol.version"),
        min_insync_replicas=int(pick("min.insync.replicas", defaults.min_insync_replicas)),
        leader_imbalance_per_broker_percentage=int(
            pick("leader.imbalance.per.broker.percentage", defaults.leader_imbalance_per_broker_percentage)
        ),
        auto_leader_rebalance_enable=bool(
            pick("auto.leader.rebalance.enable", defaults.auto_leader_rebalance_enable)
        ),
        log_segment_delete_delay_ms=int(
            pick("log.segment.delete.delay.ms", defaults.log_segment_delete_delay_ms)
        ),
        leader_imbalance_check_interval_seconds=int(
            pick("leader.imbalance.check.interval.seconds", defaults.leader_imbalance_check_interval_seconds)
        ),
        defaulted=tuple(sorted(facts.get("defaulted") or ())),
    )


def lowest_ibp(settings: Iterable[BrokerSettings]) -> str | None:
    """The lowest inter.broker.protocol.version among the brokers (None when no broker says)."""
    versions = []
    for s in settings:
        if s.inter_broker_protocol_version:
            try:
                parsed = KafkaVersion.parse(s.inter_broker_protocol_version)
            except (KafkaFormatError, ValueError):  # a value the broker refuses: the inventory lists it
                parsed = None
            if parsed is not None:
                versions.append((parsed, s.inter_broker_protocol_version))
    return min(versions)[1] if versions else None


def cluster_facts(
    cluster: str,
    state: ClusterState,
    summaries: Mapping[int, Mapping[str, Any]],
    inventoried: Iterable[int],
    now_ms: int,
    *,
    previous: ClusterState | None = None,
    expected: Iterable[int] = (),
) -> ClusterFacts:
    """ClusterFacts: live brokers from ZooKeeper, inventoried brokers and settings from the inventory;
    ``brokers`` names every known broker (host, when last seen) for the findings."""
    settings = {b: broker_settings(b, s) for b, s in sorted(summaries.items())}
    controller = state.controller
    reassign = state.reassign_partitions
    # each inventoried broker's migration mode (its server.properties): during a migration's dual-write a
    # broker in KRaft mode serves, registered with the quorum only (kafka.kraft_migration)
    modes = broker_modes_from_settings(
        {
            b: (s.get("facts") or {}).get("migration_settings") or {}
            for b, s in summaries.items()
            if s.get("facts")
        }
    )
    migration = migration_state(state, modes)
    return ClusterFacts(
        cluster=cluster,
        now_ms=now_ms,
        live_brokers=state.live_broker_ids
        | (migration.serving_outside_zookeeper if migration is not None else frozenset()),
        inventoried=frozenset(int(b) for b in inventoried),
        settings=settings,
        # a registered controller on a broker that is not registered cannot act; none at all is its own
        # finding; a migrating KRaft controller is no broker and does act (kafka.kraft_migration)
        controller_live=controller is None
        or controller.broker_id in state.live_broker_ids
        or (migration is not None and migration.kraft_controller_active),
        reassign_znode_partitions=frozenset((e.topic, e.partition) for e in reassign.partitions)
        if reassign is not None
        else frozenset(),
        ibp=lowest_ibp(settings.values()),
        brokers=rules.broker_infos(state, previous, summaries, expected),
        broker_configs={e: dict(c) for e, c in state.configs.brokers.items()},
        broker_modes=modes,
    )


def _snapshot_time_ms(manifest: Mapping[str, Any]) -> int | None:
    started = manifest.get("started_at")
    return int(datetime.fromisoformat(started).timestamp() * 1000) if started else None


def load_inputs(
    base: str,
    cluster: str,
    *,
    snapshot: str | None = None,
    previous: str | None = None,
    inventory: str | None = None,
    now_ms: int | None = None,
    read_rows: bool = True,
) -> AuditInputs:
    """Load the artefacts of one audit; ``snapshot`` defaults to the latest, ``previous`` to the one before it.

    ``previous=""`` means none. ``inventory`` is a run directory; without one, no disk is checked and
    coverage is empty. ``read_rows=False`` leaves the directory rows to Spark.
    """
    validate_cluster_name(cluster)
    if not snapshot:
        ref = latest_snapshot(base, cluster)
        if ref is None:
            raise AuditInputError(
                f"no complete snapshot of {cluster} under {base}: run the snapshot task first"
            )
        snapshot = ref.path
    absent_reason = None
    if previous is None:
        ref = previous_snapshot(base, cluster, before=snapshot)
        previous = ref.path if ref is not None else None
        absent_reason = (
            f"no complete snapshot of {cluster} is older than this one, so nothing was compared "
            "(topicId changes since the previous snapshot are not checked; the next run compares with this one)"
        )
    elif not previous:
        absent_reason = "the comparison was turned off (previous=''), so topicId changes were not checked"
    try:
        manifest, rows = read_snapshot(snapshot)
    except SnapshotNotFoundError as exc:
        raise AuditInputError(str(exc)) from exc
    state = ClusterState.from_snapshot(rows, cluster=cluster, taken_at_ms=_snapshot_time_ms(manifest))
    previous_state = None
    if previous:
        previous_manifest, previous_rows = read_snapshot(previous)
        previous_state = ClusterState.from_snapshot(
            previous_rows, cluster=cluster, taken_at_ms=_snapshot_time_ms(previous_manifest)
        )
    files: list[str] = []
    by_broker: dict[int, str] = {}
    dirs: list[ReplicaDir] = []
    replica_dirs = 0
    summaries: dict[int, dict[str, Any]] = {}
    coverage: dict[str, Any] = {
        "status": "empty",
        "inventoried": [],
        "missing": sorted(state.live_broker_ids),
    }
    if inventory:
        files, by_broker = inventory_files(inventory)
        dirs, summaries, replica_dirs = read_inventory_dirs(files, rows=read_rows)
        coverage = read_coverage(inventory, by_broker)
    facts = cluster_facts(
        cluster,
        state,
        summaries,
        by_broker,
        now_ms if now_ms is not None else int(time.time() * 1000),
        previous=previous_state,
        expected=coverage.get("expected") or (),
    )
    return AuditInputs(
        cluster=cluster,
        state=state,
        previous=previous_state,
        facts=facts,
        inventory_files=tuple(files),
        coverage=coverage,
        snapshot=snapshot,
        previous_snapshot=previous or None,
        inventory=inventory or None,
        replica_dirs=replica_dirs,
        dirs=tuple(dirs),
        previous_absent_reason=None if previous else absent_reason,
        broker_summaries=summaries,
    )


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------


# One order for a topic's directories in both engines (evidence lists follow it): broker, log dir, name.
_dir_order: Callable[[ReplicaDir], tuple[Any, ...]] = attrgetter("broker_id", "log_dir", "name")


def run_in_process(inputs: AuditInputs) -> list[Finding]:
    """The whole audit in this process (small clusters, tests, the baseline).

    With the cyclic GC paused: at a million replicas the run makes millions of small acyclic
    objects (directories, evidence, findings), and collections walking them took a third of it.
    """
    with gc_paused():
        evidence = rules.gather_evidence(inputs.state, inputs.dirs, inputs.previous)
        return rules.audit(inputs.state, evidence, inputs.facts)


@dataclass(frozen=True)
class _ZooKeeperSide:
    """The ZooKeeper half of a TopicEvidence, broadcast to the executors."""

    state: TopicState | None
    delete_marker: bool
    config_znode: bool
    previous_topic_id: KafkaUuid | None
    previously_known: bool


def zookeeper_side(state: ClusterState, previous: ClusterState | None) -> dict[str, _ZooKeeperSide]:
    """Every topic name ZooKeeper knows of, with its record (as gather_evidence builds it)."""
    evidence = rules.gather_evidence(state, (), previous)
    return {
        e.topic: _ZooKeeperSide(
            e.state, e.delete_marker, e.config_znode, e.previous_topic_id, e.previously_known
        )
        for e in evidence
    }


def _audit_group(
    topic: str,
    dirs: Iterable[ReplicaDir],
    zk_side: Mapping[str, _ZooKeeperSide],
    facts: ClusterFacts,
) -> tuple[str, list[dict[str, Any]]]:
    """Executor side: one topic's evidence -> its findings as rows (plain data for the collect)."""
    side = zk_side.get(topic) or _ZooKeeperSide(None, False, False, None, False)
    evidence = TopicEvidence(
        topic=topic,
        state=side.state,
        delete_marker=side.delete_marker,
        config_znode=side.config_znode,
        dirs=tuple(sorted(dirs, key=_dir_order)),
        previous_topic_id=side.previous_topic_id,
        previously_known=side.previously_known,
    )
    return topic, [f.to_row() for f in rules.audit_topic(evidence, facts)]


def inventory_dataframe(spark: SparkSession, files: Sequence[str], run: str | None = None) -> Any:
    """The inventory rows as a DataFrame with the columns the rules need, ``mtime_ms`` and ``ctime_ms``
    as epoch ms. A directory's age is not computed here: the executors' ``ReplicaDir.age_reference_ms``
    (kafka.inventory.age_reference_ms) is the one place that rule lives.

    :param files: the run's broker files (:func:`inventory_files`).
    :param run: the run directory: read whole, with Spark's partition discovery (``broker=<id>/``),
        unless ``files`` holds flat files of the earlier layout, which are read by name.

    A store bound from an Airflow connection (``sftp://`` ...) is reachable through fsspec only, not
    through Spark's Hadoop filesystems: its files are read on the driver and handed to Spark as Arrow.
    """
    from pyspark.sql import functions as F

    if any(is_bound(f) for f in files):
        tables = []
        for url in files:
            fs, path = _fs(url)
            with fs.open(path, "rb") as handle:
                parquet = pq.ParquetFile(handle)
                wanted = [
                    c for c in (*INVENTORY_COLUMNS, "mtime", "ctime") if c in parquet.schema_arrow.names
                ]
                tables.append(parquet.read(columns=wanted).replace_schema_metadata(None))
        frame = spark.createDataFrame(pa.concat_tables(tables, promote_options="default"))
    else:
        paths = [run] if run and not any(is_legacy_file(f) for f in files) else list(files)
        # mergeSchema: files written before the ctime column and after it may share a run
        frame = spark.read.option("mergeSchema", "true").parquet(*paths)
    ctime = F.unix_millis("ctime") if "ctime" in frame.columns else F.lit(None).cast("long")
    return frame.select(
        *INVENTORY_COLUMNS,
        F.unix_millis("mtime").alias("mtime_ms"),
        ctime.alias("ctime_ms"),
    ).where(F.col("topic").isNotNull())


_SPARK_RESULT_SCHEMA = "group_topic string, seq int, finding binary"


def _audit_arrow_group(
    table: pa.Table, zk_side: Mapping[str, _ZooKeeperSide], facts: ClusterFacts
) -> pa.Table:
    """Executor side of applyInArrow: one topic's rows (plus its ZooKeeper marker row) -> pickled findings."""
    import pyarrow.compute as pc  # here: DAG files importing this module parse without it (~0.13 s)

    topic = table.column("topic")[0].as_py()
    on_disk = table.filter(pc.invert(table.column("_zookeeper_only"))).drop_columns(["_zookeeper_only"])
    dirs = ReplicaDir.from_inventory_columns(on_disk.to_pydict())
    _, findings = _audit_group(topic, dirs, zk_side, facts)
    return pa.table(
        {
            "group_topic": pa.array([topic] * len(findings), pa.string()),
            "seq": pa.array(range(len(findings)), pa.int32()),
            "finding": pa.array([pickle.dumps(f) for f in findings], pa.binary()),
        }
    )


def run_spark(inputs: AuditInputs, spark: SparkSession, *, partitions: int | None = None) -> list[Finding]:
    """Group the inventory rows by topic, run ``audit_topic`` on the executors, ``finish`` on the driver.

    Rows travel as Arrow batches (``groupBy("topic").applyInArrow``); every topic ZooKeeper knows
    joins the groups through one marker row, so topics without directories are audited too. The
    ZooKeeper side and the cluster facts are broadcast.
    """
    from pyspark.sql import functions as F

    context = spark.sparkContext
    zk_side = zookeeper_side(inputs.state, inputs.previous)
    zk_broadcast = context.broadcast(zk_side)
    facts_broadcast = context.broadcast(inputs.facts)
    slices = partitions or max(2, context.defaultParallelism * 2)
    spark.conf.set("spark.sql.shuffle.partitions", str(slices))
    names = spark.createDataFrame([(name,) for name in sorted(zk_side)] or [("",)], "topic string")
    if not zk_side:
        names = names.where(F.lit(False))
    names = names.withColumn("_zookeeper_only", F.lit(True))
    if inputs.inventory_files:
        dirs = inventory_dataframe(spark, inputs.inventory_files, inputs.inventory).withColumn(
            "_zookeeper_only", F.lit(False)
        )
        evidence = dirs.unionByName(names, allowMissingColumns=True)
    else:
        evidence = names

    def audit_group(table: pa.Table) -> pa.Table:
        return _audit_arrow_group(table, zk_broadcast.value, facts_broadcast.value)

    results = evidence.groupBy("topic").applyInArrow(audit_group, _SPARK_RESULT_SCHEMA).collect()
    topic_findings = [
        Finding.from_row(pickle.loads(row["finding"]))  # noqa: S301 - our own executors' output, exact types
        for row in sorted(results, key=lambda r: (r["group_topic"], r["seq"]))
    ]
    zk_broadcast.unpersist()
    facts_broadcast.unpersist()
    return rules.finish(topic_findings, inputs.state, inputs.facts)


# ---------------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------------


def findings_table(findings: Sequence[Finding]) -> pa.Table:
    rows = []
    for f in findings:
        row = f.to_row()
        row["evidence"] = json.dumps(row["evidence"], sort_keys=True, default=str)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA)


def read_findings(path: str) -> list[Finding]:
    """Findings back from a ``findings.parquet`` (or its directory)."""
    fs, local = _fs(path)
    if not local.endswith(".parquet"):
        local = f"{local}/{FINDINGS_FILE}"
    with fs.open(local, "rb") as handle:
        table = pq.read_table(handle)
    return [Finding.from_row({**r, "evidence": json.loads(r["evidence"] or "{}")}) for r in table.to_pylist()]


def findings_dir(base: str, cluster: str, ts: str) -> str:
    return "/".join([base.rstrip("/"), validate_cluster_name(cluster), FINDINGS_DIR, ts])


def write_findings(out: str, findings: Sequence[Finding], summary: Mapping[str, Any]) -> dict[str, Any]:
    """Publish findings.parquet and report.html, then summary.json last (its presence means complete)."""
    fs, root = _fs(out)
    fs.makedirs(root, exist_ok=True)
    ordered = triage_order(findings)
    sink = io.BytesIO()
    pq.write_table(findings_table(ordered), sink, compression="zstd")
    paths = {
        "findings_file": _url(fs, f"{root}/{FINDINGS_FILE}"),
        "report": _url(fs, f"{root}/{REPORT_FILE}"),
        "summary_file": _url(fs, f"{root}/{SUMMARY_FILE}"),
        "out": _url(fs, root),
    }
    full = {**summary, **paths}
    write_atomically(fs, f"{root}/{FINDINGS_FILE}", sink.getvalue())
    write_atomically(fs, f"{root}/{REPORT_FILE}", render_html(ordered, full).encode("utf-8"))
    write_atomically(fs, f"{root}/{SUMMARY_FILE}", json.dumps(full, indent=1, default=str).encode("utf-8"))
    return full


def read_summary(out: str) -> dict[str, Any]:
    """``summary.json`` of a findings directory; AuditInputError when the run did not complete."""
    fs, root = _fs(out)
    try:
        return json.loads(fs.cat_file(f"{root}/{SUMMARY_FILE}"))
    except FileNotFoundError:
        raise AuditInputError(f"{out} has no {SUMMARY_FILE}: the audit did not complete") from None


def run_audit(
    base: str,
    cluster: str,
    *,
    snapshot: str | None = None,
    previous: str | None = None,
    inventory: str | None = None,
    out: str | None = None,
    engine: str = "in-process",
    spark: SparkSession | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Load, audit with ``engine``, publish; returns the summary (with the artefact paths)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    started = time.monotonic()
    inputs = load_inputs(
        base,
        cluster,
        snapshot=snapshot,
        previous=previous,
        inventory=inventory,
        now_ms=now_ms,
        read_rows=engine != "spark",
    )
    if engine == "spark":
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.appName(f"kafka_zk_audit_{cluster}").getOrCreate()
        findings = run_spark(inputs, spark)
    else:
        findings = run_in_process(inputs)
    generated_at = datetime.now(UTC)
    out = out or findings_dir(base, cluster, generated_at.strftime("%Y%m%dT%H%M%S"))
    summary = build_summary(
        findings,
        cluster=cluster,
        coverage=inputs.coverage,
        snapshot=inputs.snapshot,
        previous_snapshot=inputs.previous_snapshot,
        inventory=inputs.inventory,
        generated_at=generated_at.isoformat(),
        engine=engine,
        live_brokers=inputs.facts.live_brokers,
        brokers=inputs.facts.brokers,
        snapshot_taken_ms=inputs.state.taken_at_ms,
        previous_taken_ms=inputs.previous.taken_at_ms if inputs.previous is not None else None,
        previous_absent_reason=inputs.previous_absent_reason,
    )
    summary["duration_s"] = round(time.monotonic() - started, 3)
    summary["replica_dirs"] = inputs.replica_dirs
    summary["topics"] = len(inputs.state.topics)
    summary["figures"] = audit_figures(  # what the daily metrics publish (a dashboard's trend)
        findings,
        pending_deletions=inputs.state.pending_deletions,
        deletion_marker_ctimes=dict(inputs.state.deletion_marker_ctimes),
        now_ms=inputs.facts.now_ms,
    )
    return write_findings(out, findings, summary)
