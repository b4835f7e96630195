"""The verdicts of a pre-restart log scan, without Airflow: in this process or on Spark.

Reads ``<base>/<cluster>/log-scan/<ts>/broker=<id>.parquet`` (segment rows) with their
``_summary/broker=<id>.json``, and a snapshot (ISR and leaders for the remedies; which brokers
run) and the high watermarks every broker of the scan's inventory run checkpointed (is a loss only
local?); judges each broker with :func:`~airflow_provider_kafka_zk.kafka.log_scan_rules.judge_broker`
-- on Spark, one task per broker on the executors (``airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_log_scan.py``) -- and writes
``findings.parquet``, ``verdicts.json`` and ``report.txt`` next to the rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.inventory_layout import InventoryLayoutError, read_broker_tables
from airflow_provider_kafka_zk.artefacts.object_storage import is_bound
from airflow_provider_kafka_zk.artefacts.snapshots import latest_snapshot, read_snapshot
from airflow_provider_kafka_zk.kafka.log_scan_rules import SegmentRow, judge_broker
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion

FINDING_SCHEMA = pa.schema(
    [
        ("broker_id", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("severity", pa.string()),
        ("kind", pa.string()),
        ("summary", pa.string()),
        ("remedy", pa.string()),
        ("file", pa.string()),
        ("offset", pa.int64()),
        ("position", pa.int64()),
        ("bytes_at_risk", pa.int64()),
        ("verdict", pa.string()),
        ("scenario", pa.string()),
        ("lost_first", pa.int64()),
        ("lost_end", pa.int64()),
        ("held_elsewhere", pa.string()),
        ("remedies_json", pa.string()),
        ("kafka_log_json", pa.string()),
    ]
)
_SEVERITY_ORDER = {"critical": 0, "error": 1, "warning": 2, "info": 3}


class LogScanInputError(ValueError):
    """The scan folder or the snapshot cannot be read; the message names it."""


def _judge(
    broker_id: int,
    rows: Iterable[Mapping[str, Any]],
    summary: Mapping[str, Any],
    facts: Mapping[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One broker: its verdict record and its finding rows (runs on an executor under Spark)."""
    judged = judge_broker(
        [SegmentRow.from_row(r) for r in rows],
        version=KafkaVersion.parse(summary["kafka_version"]),
        running=broker_id in facts["live"],
        isr=facts["isr"],
        leaders=facts["leaders"],
        broker_id=broker_id,
        high_watermarks=facts.get("high_watermarks"),
    )
    skipped_files = list(summary.get("skipped_files") or ())
    partial = bool(summary["skipped"] or summary["errors"] or skipped_files or judged.partial)
    why = (
        "not every partition was scanned"
        if summary["skipped"] or summary["errors"]
        else "some files were not read"
    )
    verdict = {
        "broker_id": broker_id,
        "verdict": judged.verdict.name.lower(),
        "describe": judged.describe() + (f" (PARTIAL: {why})" if partial else ""),
        "failing_segment": judged.failing_segment,
        "rebuilt_indexes": judged.rebuilt_indexes,
        "scenarios": list(judged.scenarios),
        "partial": partial,
        "skipped": list(summary["skipped"]),
        "skipped_files": skipped_files,
        "stopped": summary.get("stopped"),
        "errors": list(summary["errors"]),
        "bytes_read": summary["bytes_read"],
        "read": dict(summary.get("read") or {}),
        "seconds": summary.get("seconds"),
        "kafka_version": summary["kafka_version"],
    }
    return verdict, [f.to_row() for f in judged.findings]


def judge_scan(
    base: str, cluster: str, scan_dir: str, *, snapshot: str | None = None, spark: Any = None
) -> dict[str, Any]:
    """Judge every broker scanned under ``scan_dir`` and write the results there; returns them.

    :param base: artefact store root (for the latest snapshot when ``snapshot`` is not given).
    :param cluster: the cluster's name.
    :param scan_dir: the scan's folder (``<base>/<cluster>/log-scan/<ts>``).
    :param snapshot: the snapshot folder to take ISR and live brokers from.
    :param spark: a SparkSession: judge the brokers on the executors.
    """
    if snapshot in (None, "", "None"):
        ref = latest_snapshot(base, cluster)
        if ref is None:
            raise LogScanInputError(f"no snapshot of {cluster} under {base}")
        snapshot = ref.path
    _, snapshot_rows = read_snapshot(str(snapshot))
    state = ClusterState.from_snapshot(snapshot_rows, cluster=cluster)
    facts = {
        "live": set(state.live_broker_ids),
        "isr": {(p.topic, p.partition): tuple(p.isr) for p in state.partitions()},
        "leaders": {
            (p.topic, p.partition): p.leader
            for p in state.partitions()
            if p.leader is not None and p.leader >= 0
        },
    }
    fs, root = fsspec.core.url_to_fs(scan_dir)
    if not fs.exists(root):
        raise LogScanInputError(f"no log scan under {scan_dir}")
    files = {}
    for name in sorted(fs.ls(root, detail=False)):
        file = name.rstrip("/").rsplit("/", 1)[-1]
        if file.startswith("broker=") and file.endswith(".parquet"):
            files[int(file[len("broker=") : -len(".parquet")])] = name
    if not files:
        raise LogScanInputError(f"no broker scan under {scan_dir}: nothing to judge")
    summaries = {}
    for broker_id in files:
        with fs.open(f"{root}/_summary/broker={broker_id}.json", "rb") as handle:
            summaries[broker_id] = json.loads(handle.read())

    facts["high_watermarks"] = _high_watermarks(s.get("inventory") for s in summaries.values())

    if spark is not None:
        verdicts, findings = _judge_on_spark(spark, scan_dir, files, summaries, facts)
    else:
        verdicts, findings = [], []
        for broker_id, name in files.items():
            with fs.open(name, "rb") as handle:
                rows = pq.read_table(handle).to_pylist()
            verdict, rows_out = _judge(broker_id, rows, summaries[broker_id], facts)
            verdicts.append(verdict)
            findings += rows_out
    verdicts.sort(key=lambda v: v["broker_id"])
    findings.sort(
        key=lambda f: (_SEVERITY_ORDER.get(f["severity"], 9), f["broker_id"], f["topic"], f["partition"])
    )
    report = render_report(verdicts, findings)
    for relative, payload in (
        ("findings.parquet", parquet_bytes(pa.Table.from_pylist(findings, schema=FINDING_SCHEMA))),
        ("verdicts.json", json.dumps(verdicts, indent=1).encode()),
        ("report.txt", report.encode()),
    ):
        write_atomically(fs, f"{root}/{relative}", payload)
    return {"scan_dir": scan_dir, "verdicts": verdicts, "findings": len(findings), "report_text": report}


def _high_watermarks(inventories: Iterable[str | None]) -> dict[tuple[str, int], dict[int, int]]:
    """Each partition's ``replication-offset-checkpoint`` line per broker, from the inventory runs the
    scans used (every broker the run inventoried, not only the scanned ones). A run that cannot be read
    gives nothing: the verdict then says the other replicas' high watermarks are unknown."""
    out: dict[tuple[str, int], dict[int, int]] = {}
    for url in sorted({u for u in inventories if u}):
        try:
            tables = list(read_broker_tables(url, ["kind", "topic", "partition", "high_watermark"]))
        except (OSError, InventoryLayoutError, pa.ArrowException, KeyError):
            continue
        for broker_id, _, table in tables:
            for row in table.to_pylist():
                if row["kind"] == "normal" and row["high_watermark"] is not None and row["topic"] is not None:
                    out.setdefault((row["topic"], int(row["partition"])), {})[broker_id] = int(
                        row["high_watermark"]
                    )
    return out


def _judge_on_spark(
    spark: Any,
    scan_dir: str,
    files: Mapping[int, str],
    summaries: Mapping[int, Mapping[str, Any]],
    facts: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One group per broker, judged on the executors; the (small) results come back to the driver."""
    shared = spark.sparkContext.broadcast({"summaries": dict(summaries), "facts": dict(facts)})
    # the broker files only (a re-run leaves findings.parquet beside them)
    urls = [f"{scan_dir.rstrip('/')}/broker={b}.parquet" for b in sorted(files)]
    if is_bound(scan_dir):  # a store bound from a connection: fsspec only, read on the driver
        tables = []
        for url in urls:
            fs, path = fsspec.core.url_to_fs(url)
            with fs.open(path, "rb") as handle:
                tables.append(pq.read_table(handle).replace_schema_metadata(None))
        frame = spark.createDataFrame(pa.concat_tables(tables, promote_options="default"))
    else:
        frame = spark.read.parquet(*urls)

    def judge_group(item: tuple[int, Iterable[Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        broker_id, rows = item
        value = shared.value
        return _judge(
            int(broker_id), [r.asDict() for r in rows], value["summaries"][int(broker_id)], value["facts"]
        )

    results = frame.rdd.map(lambda r: (r["broker_id"], r)).groupByKey().map(judge_group).collect()
    verdicts = [v for v, _ in results]
    judged = {v["broker_id"] for v in verdicts}
    for broker_id in files:  # a broker with no segment row has nothing Spark can group
        if broker_id not in judged:
            verdict, _ = _judge(broker_id, [], summaries[broker_id], facts)
            verdicts.append(verdict)
    return verdicts, [f for _, rows in results for f in rows]


def describe_read(read: Mapping[str, Any]) -> str:
    """What a broker's scan read and what it did not, in one sentence (a scan's ``read`` totals)."""
    if not read:
        return "what was read is not recorded"

    def segs(n: int) -> str:
        return f"{n} segment{'' if n == 1 else 's'}"

    parts = [
        f"read whole, every batch's CRC checked: {segs(read.get('crc_segments', 0))} "
        f"({read.get('crc_segment_bytes', 0):,} bytes of .log) -- those a start recovers (after an unclean "
        "shutdown: from the recovery point; in any start: a missing .index) and those with damaged indexes"
    ]
    if read.get("header_segments"):
        parts.append(
            f"batch headers only (walk_all): {segs(read['header_segments'])} "
            f"({read.get('header_segment_bytes', 0):,} bytes of .log)"
        )
    parts.append(
        f"not read (indexes only): {segs(read.get('not_read_segments', 0))} "
        f"({read.get('not_read_bytes', 0):,} bytes of .log) -- no start reads them either"
    )
    if read.get("skipped_segments"):
        parts.append(f"not read at all: {segs(read['skipped_segments'])} (see 'not read' below)")
    if read.get("crc_impl"):
        parts.append(f"CRC-32C by {read['crc_impl']}")
    return "; ".join(parts)


def render_report(verdicts: Sequence[Mapping[str, Any]], findings: Sequence[Mapping[str, Any]]) -> str:
    """The report a person reads first: each broker's verdict and what its scan read, then the
    findings, worst first."""
    lines = ["Pre-restart log and index scan"]
    for v in verdicts:
        seconds = f" in {v['seconds']} s" if v.get("seconds") is not None else ""
        lines.append(
            f"  {v['describe']}  [{v['bytes_read']} bytes read{seconds}; Kafka {v['kafka_version']} rules]"
        )
        lines.append(f"    {describe_read(v.get('read') or {})}")
        if v.get("scenarios"):
            lines.append(f"    predicted for: {'; '.join(v['scenarios'])}")
        lines += [f"    not scanned: {s}" for s in v["skipped"][:5]]
        lines += [f"    not read: {s}" for s in (v.get("skipped_files") or [])[:10]]
        lines += [f"    error: {e}" for e in v["errors"][:5]]
    for f in findings:
        lines.append(f"[{f['severity'].upper()}] {f['summary']}")
        lines.append(f"    file: {f['file']}")
        kafka_log = json.loads(f.get("kafka_log_json") or "[]")
        if kafka_log:
            lines.append("    Kafka will log:")
            lines += [f"      {line}" for line in kafka_log[:8]]
        lines.append(f"    remedy: {f['remedy']}")
    if not findings:
        lines.append("No finding: every scanned segment and index is as Kafka would leave it.")
    return "\n".join(lines) + "\n"


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet file bytes (written atomically by the caller)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()
