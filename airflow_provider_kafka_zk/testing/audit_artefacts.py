"""Audit input artefacts written straight from simulated data (no ZooKeeper, no SSH).

For unit tests of the audit job and for the audit benchmark: a snapshot directory in the layout of
:mod:`airflow_provider_kafka_zk.artefacts.snapshots` from :class:`ZnodeRow` objects, and an
inventory run directory (``broker=<id>/part-0.parquet`` with the broker facts in the schema metadata,
``_coverage.json``) from :class:`ReplicaDir` objects, with the columns the audit reads.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_kafka_zk.artefacts.inventory_layout import broker_file
from airflow_provider_kafka_zk.artefacts.snapshots import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MANIFEST_FORMAT_VERSION,
    ZNODES_FILE,
    rows_table,
    snapshot_timestamp_name,
)
from airflow_provider_kafka_zk.kafka.audit import ReplicaDir
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

INVENTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("inventory_ts", pa.string()),
        ("broker_id", pa.int32()),
        ("host", pa.string()),
        ("log_dir", pa.string()),
        ("dir_name", pa.string()),
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("mtime", pa.timestamp("ms", tz="UTC")),
        ("partition_metadata_present", pa.bool_()),
        ("topic_id", pa.string()),
        ("log_bytes", pa.int64()),
        ("total_bytes", pa.int64()),
        ("errors", pa.list_(pa.string())),
    ]
)


def write_snapshot_rows(base: Path, cluster: str, rows: Sequence[ZnodeRow], taken_at: datetime) -> Path:
    """A complete snapshot directory (Parquet + manifest) holding ``rows``."""
    name = snapshot_timestamp_name(taken_at)
    directory = Path(base) / cluster / "snapshots" / name
    directory.mkdir(parents=True)
    sink = io.BytesIO()
    pq.write_table(rows_table(sorted(rows, key=lambda r: r.path)), sink, compression="zstd")
    payload = sink.getvalue()
    (directory / ZNODES_FILE).write_bytes(payload)
    manifest = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_FORMAT_VERSION,
        "cluster": cluster,
        "snapshot": name,
        "started_at": taken_at.astimezone(UTC).isoformat(),
        "znodes": len(rows),
        "files": {ZNODES_FILE: {"bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}},
    }
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest))
    return directory


def _kind(kind: DirKind | str) -> str:
    return kind.name.lower() if isinstance(kind, DirKind) else str(kind)


def write_inventory_dirs(
    base: Path,
    cluster: str,
    ts: str,
    dirs: Iterable[ReplicaDir],
    *,
    broker_facts: Mapping[int, Mapping[str, Any]],
    expected: Iterable[int] | None = None,
    broker_summaries: Mapping[int, Mapping[str, Any]] | None = None,
) -> Path:
    """An inventory run directory: one Parquet file per broker in ``broker_facts`` plus ``_coverage.json``.

    ``broker_summaries`` adds to a broker's summary what a real inventory records besides its facts
    (``host``, ``log_dirs`` with ``clean_shutdown``).
    """
    directory = Path(base) / cluster / "inventory" / ts
    directory.mkdir(parents=True)
    by_broker: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for d in dirs:
        if d.broker_id not in broker_facts:
            continue
        by_broker[d.broker_id].append(
            {
                "cluster": cluster,
                "inventory_ts": ts,
                "broker_id": d.broker_id,
                "host": f"broker-{d.broker_id}",
                "log_dir": d.log_dir,
                "dir_name": d.name,
                "kind": _kind(d.kind),
                "topic": d.topic,
                "partition": d.partition,
                "mtime": datetime.fromtimestamp(d.mtime_ms / 1000, UTC) if d.mtime_ms is not None else None,
                "partition_metadata_present": d.metadata_present,
                "topic_id": str(d.topic_id) if d.topic_id is not None else None,
                "log_bytes": d.size_bytes,
                "total_bytes": d.size_bytes,
                "errors": [],
            }
        )
    for broker_id, facts in sorted(broker_facts.items()):
        summary = {
            "cluster": cluster,
            "inventory_ts": ts,
            "broker_id": broker_id,
            **(broker_summaries or {}).get(broker_id, {}),
            "facts": dict(facts),
        }
        schema = INVENTORY_SCHEMA.with_metadata({b"kafka_zk.inventory": json.dumps(summary).encode()})
        table = pa.Table.from_pylist(by_broker.get(broker_id, []), schema=schema)
        (directory / broker_file(broker_id)).parent.mkdir(parents=True)
        pq.write_table(table, directory / broker_file(broker_id), compression="zstd")
    wanted = sorted(set(expected) if expected is not None else set(broker_facts))
    done = sorted(b for b in broker_facts if b in wanted)
    missing = [b for b in wanted if b not in broker_facts]
    coverage = {
        "cluster": cluster,
        "inventory_ts": ts,
        "status": "complete" if not missing else ("partial" if done else "empty"),
        "expected": wanted,
        "inventoried": done,
        "not_inventoried": missing,
        "failed": {},
        "missing": missing,
        "unexpected": [],
        "description": f"{len(done)} of {len(wanted)} brokers inventoried",
    }
    (directory / "_coverage.json").write_text(json.dumps(coverage))
    return directory
