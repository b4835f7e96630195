"""Snapshot rows (:class:`ZnodeRow`) for a simulated cluster, and for a JSON dump of a real ZooKeeper.

``render_zookeeper`` gives each znode's path, bytes, owner and data version; a snapshot also needs
the rest of the Stat. :func:`rows_from_records` makes it up the way ZooKeeper would have: zxids
that increase in creation order (parents first), ``mzxid`` after ``version`` rewrites, one session
per broker owning its registration and, for the controller, ``/controller``. Given the rows of an
earlier snapshot as ``previous``, unchanged znodes keep their Stat and changed ones keep their
czxid, so two snapshots of the same simulated cluster compare as a real cluster's would.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

from .cluster import SimulatedCluster
from .render import render_zookeeper
from .zk_writer import ZnodeRecord

FIRST_ZXID = 0x1_0000_0001
"""ZooKeeper's first transaction of leader epoch 1."""
BASE_TIME_MS = 1_700_000_000_000
_SESSION_BASE = 1 << 56  # ZooKeeper session ids carry the server id in the top byte
_MS_PER_ZXID = 10


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _time_ms(zxid: int, base_time_ms: int) -> int:
    return base_time_ms + (zxid - FIRST_ZXID) * _MS_PER_ZXID


def rows_from_records(
    records: Iterable[ZnodeRecord],
    *,
    previous: Iterable[ZnodeRow] | None = None,
    base_time_ms: int = BASE_TIME_MS,
) -> list[ZnodeRow]:
    """ZnodeRows with a plausible Stat for ``records``; ``previous`` carries an earlier snapshot's Stat over.

    A znode in ``previous`` keeps its czxid/ctime (and its whole Stat when data and version are
    unchanged); an ephemeral znode whose data or owner changed counts as re-created (new czxid,
    new session), like a restarted broker or a new controller.
    """
    records = list(records)
    by_path = {record.path: record for record in records}
    before = {row.path: row for row in previous or ()}
    zxid = max([FIRST_ZXID - 1, *(max(r.czxid, r.mzxid, r.pzxid) for r in before.values())])

    def next_zxid() -> int:
        nonlocal zxid
        zxid += 1
        return zxid

    sessions: dict[int, int] = {}
    for record in records:
        owner = record.owner_broker
        if owner is None or owner in sessions:
            continue
        registration = zk.broker_path(owner)
        old, new = before.get(registration), by_path.get(registration)
        if old is not None and new is not None and old.data == new.data and old.ephemeral_owner:
            sessions[owner] = old.ephemeral_owner
        else:
            sessions[owner] = _SESSION_BASE + next_zxid()

    stats: dict[str, tuple[int, int, int]] = {}  # path -> (czxid, mzxid, version)
    kept: dict[str, ZnodeRow] = {}
    for record in sorted(records, key=lambda r: r.path.count("/")):  # parents before children
        session = 0 if record.owner_broker is None else sessions[record.owner_broker]
        old = before.get(record.path)
        same_znode = old is not None and old.ephemeral_owner == session
        if same_znode and session and old.data != record.data:
            same_znode = False  # an ephemeral is never rewritten by its owner here: re-registered
        if same_znode and old.data == record.data and old.version == record.version:
            kept[record.path] = old
            stats[record.path] = (old.czxid, old.mzxid, old.version)
        elif same_znode:
            stats[record.path] = (old.czxid, next_zxid(), record.version)
        else:
            czxid = next_zxid()
            mzxid = czxid
            for _ in range(record.version):
                mzxid = next_zxid()
            stats[record.path] = (czxid, mzxid, record.version)

    children: dict[str, list[int]] = {}
    for path, (czxid, _, _) in stats.items():
        children.setdefault(_parent(path), []).append(czxid)

    rows = []
    for record in records:
        czxid, mzxid, version = stats[record.path]
        own_children = children.get(record.path, [])
        old = kept.get(record.path)
        if old is not None and old.num_children == len(own_children):
            rows.append(old)
            continue
        rows.append(
            ZnodeRow(
                path=record.path,
                data=record.data,
                czxid=czxid,
                mzxid=mzxid,
                pzxid=max([czxid, *own_children]),
                ctime=_time_ms(czxid, base_time_ms),
                mtime=_time_ms(mzxid, base_time_ms),
                version=version,
                cversion=len(own_children),
                aversion=0,
                ephemeral_owner=0 if record.owner_broker is None else sessions[record.owner_broker],
                data_length=len(record.data or b""),
                num_children=len(own_children),
            )
        )
    return rows


def cluster_rows(cluster: SimulatedCluster, previous: Iterable[ZnodeRow] | None = None) -> list[ZnodeRow]:
    """The snapshot rows of a simulated cluster as it is now (see :func:`rows_from_records`)."""
    return rows_from_records(render_zookeeper(cluster), previous=previous)


def rows_from_zk_dump(dump: Mapping[str, Any]) -> list[ZnodeRow]:
    """Rows from a ZooKeeper tree dumped as JSON (the golden ``zk_tree.json`` format).

    Each znode is ``{"path", "data", "encoding", "stat": {czxid, mzxid, ..., ephemeralOwner}}``;
    ``data`` is text for ``utf-8``, base64 for ``base64``, and null for a znode without data.
    """
    rows = []
    for znode in dump["znodes"]:
        text, encoding = znode["data"], znode.get("encoding")
        if text is None:
            data = None
        elif encoding == "base64":
            data = base64.b64decode(text)
        else:
            data = text.encode("utf-8")
        stat = znode["stat"]
        rows.append(
            ZnodeRow(
                path=znode["path"],
                data=data,
                czxid=stat["czxid"],
                mzxid=stat["mzxid"],
                pzxid=stat["pzxid"],
                ctime=stat["ctime"],
                mtime=stat["mtime"],
                version=stat["version"],
                cversion=stat["cversion"],
                aversion=stat["aversion"],
                ephemeral_owner=stat["ephemeralOwner"],
                data_length=stat["dataLength"],
                num_children=stat["numChildren"],
            )
        )
    return rows


def audit_dirs(cluster: SimulatedCluster, root: str = "/sim") -> list:
    """The directories the broker inventory would report for a simulated cluster (for in-process audits).

    Only inventoried-able brokers matter to the audit; every broker's dirs are returned, the caller
    decides which brokers count as inventoried.
    """
    from airflow_provider_kafka_zk.kafka.audit import ReplicaDir
    from airflow_provider_kafka_zk.kafka.logdir import format_partition_dir_name

    return [
        ReplicaDir(
            broker_id=d.broker_id,
            log_dir=f"{root}/broker-{d.broker_id}/data/kafka-logs-{d.log_dir_index}",
            name=format_partition_dir_name(d.topic, d.partition, d.kind, d.unique_id),
            kind=d.kind,
            topic=d.topic,
            partition=d.partition,
            topic_id=None if d.metadata_unreadable else d.topic_id,
            metadata_present=d.topic_id is not None or d.metadata_unreadable,
            metadata_error="partition.metadata: invalid topic_id (torn write)"
            if d.metadata_unreadable
            else None,
            size_bytes=d.records * (d.record_value_bytes + 20),
            mtime_ms=d.mtime_ms,
        )
        for d in cluster.dirs
    ]


def inventory_summaries(
    cluster: SimulatedCluster,
    releases: Mapping[int, str | None] | str | None = None,
    *,
    root: str = "/sim",
    zookeeper_connect: str = "127.0.0.1:2181/kafka",
) -> dict[int, dict[str, Any]]:
    """Each broker's inventory summary (for in-process audits and readiness reports) as the inventory reads
    a configured server.properties -- the simulator's file for that broker -- with the release of the broker
    process running on it: ``releases`` is one release for every broker, one per broker, or None (no
    process: the release stays unknown)."""
    from airflow_provider_kafka_zk.kafka.inventory import ServerPropertiesCandidate

    from .disk_writer import broker_host, server_properties

    out = {}
    for b, broker in cluster.brokers.items():
        host = broker_host(cluster, b, Path(root))
        text = broker.server_properties_text or server_properties(cluster, broker, host, zookeeper_connect)
        release = releases.get(b) if isinstance(releases, Mapping) else releases
        record = {
            "source": "configured",
            "path": str(host.server_properties),
            "file": {"data": text, "size": len(text)},
            "running_kafka_jars": [f"kafka_2.13-{release}.jar"] if release else None,
        }
        facts = ServerPropertiesCandidate.from_record(record).facts()
        out[b] = {"broker_id": b, "host": broker.spec.host, "facts": facts.to_dict()}
    return out
