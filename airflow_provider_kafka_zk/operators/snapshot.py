"""Operators that snapshot a Kafka cluster's ZooKeeper to files, and load a snapshot into a scratch chroot.

Thin shells: the walk is :meth:`KafkaZooKeeperHook.snapshot`, the files are
:mod:`airflow_provider_kafka_zk.artefacts.snapshots`. Each snapshot run updates the Asset
``kafka-zk://<cluster>/snapshots``, so downstream DAGs (audits, drift reports) can be scheduled on it.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import (
    apply_retention,
    is_redacted_row,
    latest_snapshot,
    read_snapshot,
    validate_cluster_name,
    write_snapshot,
)
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, WalkProgress
from airflow_provider_kafka_zk.kafka.safety import strict_flag
from airflow_provider_kafka_zk.maintenance import ScratchLoadGate, parse_safety_flags

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

ASSET_SCHEME = "kafka-zk"


def snapshot_asset(cluster: str) -> Asset:
    """The Asset a cluster's snapshots update: ``kafka-zk://<cluster>/snapshots``."""
    return Asset(f"{ASSET_SCHEME}://{validate_cluster_name(cluster)}/snapshots")


def _paths(value: str | Sequence[str]) -> tuple[str, ...]:
    """A templated include/exclude may render to ``"/a,/b"``; a list stays a list."""
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return tuple(value)


class ZooKeeperSnapshotOperator(BaseOperator):
    """Snapshot every znode of a Kafka chroot to ``<base>/<cluster>/snapshots/<ts>/``.

    Pushes (as its return value) a summary: ``path``, ``znodes``, ``zxid_start``/``zxid_end``,
    ``consistent``, ``duration_s``, ``cluster_id``, ``sha256``. A failed walk publishes nothing.
    ``keep_last``/``keep_days`` apply retention after a successful snapshot (the one just written is
    never deleted, nor is one dated in the future). SCRAM credentials and delegation tokens are
    stored as sha256 digests unless ``include_sensitive=True`` (then in clear, with a warning; the
    manifest's ``redacted`` says which). The outlet Asset is ``kafka-zk://<cluster>/snapshots``
    unless ``outlets`` are given (a templated ``cluster`` cannot name an Asset at parse time: pass
    ``outlets`` then).

    :param cluster: the cluster's name (the artefact folder; letters, digits, ``._-``).
    :param kafka_zookeeper_conn_id: the ZooKeeper connection of the cluster, with its chroot.
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param include: znode subtrees to walk (a list, or comma-separated text).
    :param exclude: znode subtrees to skip (a list, or comma-separated text).
    :param keep_last: after a successful snapshot, keep at most this many (default: keep all).
    :param keep_days: after a successful snapshot, delete those older than this (default: keep all).
    :param storage_options: fsspec options of the artefact store (credentials stay out of logs).
    :param reconnect_timeout: seconds the walk waits for a lost ZooKeeper session to come back.
    :param progress_every: seconds between progress lines in the task log.
    :param include_sensitive: store SCRAM credentials and delegation tokens in clear (true/false).
    :param require_kafka_cluster: refuse at once (``ClusterIdentityError``, no retry) unless the
        connection's chroot holds a Kafka cluster (``/brokers/ids`` and ``/cluster/id``, the pin every
        mutation makes): a manual DAG's first read, so a wrong chroot stops the run before any slow
        step, naming the chroot and what it holds.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "kafka_zookeeper_conn_id",
        "base_path",
        "artefacts_conn_id",
        "include",
        "exclude",
        "include_sensitive",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        cluster: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        base_path: str | None = None,
        include: str | Sequence[str] = DEFAULT_INCLUDE,
        exclude: str | Sequence[str] = DEFAULT_EXCLUDE,
        keep_last: int | None = None,
        keep_days: float | None = None,
        storage_options: Mapping[str, Any] | None = None,
        reconnect_timeout: float = 60.0,
        progress_every: float = 30.0,
        include_sensitive: bool | str = False,
        artefacts_conn_id: str | None = None,
        require_kafka_cluster: bool = False,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs and "{{" not in cluster:
            kwargs["outlets"] = [snapshot_asset(cluster)]
        super().__init__(**kwargs)
        self.cluster = cluster
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.base_path = base_path
        self.include = include
        self.exclude = exclude
        self.keep_last = keep_last
        self.keep_days = keep_days
        self.storage_options = dict(storage_options or {})
        self.reconnect_timeout = reconnect_timeout
        self.progress_every = progress_every
        self.include_sensitive = include_sensitive
        self.artefacts_conn_id = artefacts_conn_id
        self.require_kafka_cluster = require_kafka_cluster

    def _log_progress(self, progress: WalkProgress) -> None:
        self.log.info(
            "Snapshot walk of %s: %d znodes read in %.0fs, at %s (%d requests, %d reads queued, %d reconnects)",
            self.cluster,
            progress.znodes,
            progress.elapsed_s,
            progress.position or "the end",
            progress.requests,
            progress.queued,
            progress.reconnects,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        validate_cluster_name(self.cluster)
        include_sensitive = strict_flag(self.include_sensitive, "include_sensitive")
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        hook = KafkaZooKeeperHook(self.kafka_zookeeper_conn_id)
        try:
            if self.require_kafka_cluster:
                from airflow_provider_kafka_zk.maintenance import pin_zookeeper_identity

                identity = pin_zookeeper_identity(hook)  # ClusterIdentityError: a task failure, no retry
                self.log.info("Cluster %s in chroot %s", identity.cluster_id, identity.chroot or "/")
            walk = hook.snapshot(
                _paths(self.include),
                _paths(self.exclude),
                reconnect_timeout=self.reconnect_timeout,
                progress=self._log_progress,
                progress_every=self.progress_every,
            )
            source = hook.target_description()
        finally:
            hook.close()
        try:
            ref, manifest = write_snapshot(
                base,
                self.cluster,
                walk,
                source=source,
                redact=not include_sensitive,
                storage_options=self.storage_options,
            )
        finally:
            walk.close()  # the walk's rows wait in a temporary spill file until published
        if include_sensitive:
            self.log.warning(
                "include_sensitive=True: %d credential/token znode(s) stored IN CLEAR in %s; "
                "protect that directory like the credentials themselves",
                manifest["redacted"]["in_clear"],
                ref.path,
            )
        elif manifest["redacted"]["count"]:
            self.log.info(
                "%d credential/token znode(s) stored as sha256 digests (Stat kept)",
                manifest["redacted"]["count"],
            )
        self.log.info(
            "Published snapshot %s: %d znodes, zxid 0x%x..0x%x, %s",
            ref.path,
            walk.znodes,
            walk.start_zxid,
            walk.end_zxid,
            manifest["consistency"],
        )
        deleted: list[str] = []
        if self.keep_last is not None or self.keep_days is not None:
            deleted = apply_retention(
                base,
                self.cluster,
                keep_last=self.keep_last,
                keep_days=self.keep_days,
                protect=[ref.name],
                storage_options=self.storage_options,
            )
            if deleted:
                self.log.info("Retention removed %d old snapshot(s)", len(deleted))
        summary = {
            "cluster": self.cluster,
            "cluster_id": manifest["cluster_id"],
            "path": ref.path,
            "snapshot": ref.name,
            "znodes": walk.znodes,
            "zxid_start": walk.start_zxid,
            "zxid_end": walk.end_zxid,
            "consistent": walk.consistent,
            "gone": len(walk.gone),
            "duration_s": round(walk.duration_s, 3),
            "sha256": manifest["files"]["znodes.parquet"]["sha256"],
            "retention_deleted": len(deleted),
            "redacted": manifest["redacted"]["count"],
        }
        outlet_events = context.get("outlet_events")
        if outlet_events is not None:
            for outlet in self.outlets:
                if isinstance(outlet, Asset):
                    outlet_events[outlet].extra = {
                        k: summary[k] for k in ("path", "znodes", "zxid_end", "consistent")
                    }
        return summary


class SourceClusterGuardError(RuntimeError):
    """The load target is (inside) the ZooKeeper chroot the snapshot was taken from."""


class ZooKeeperSnapshotLoadOperator(BaseOperator):
    """Load a snapshot into an EMPTY scratch chroot, for forensics on a copy.

    ``kafka_zookeeper_conn_id`` is the scratch ensemble's connection; ``target_chroot`` overrides
    its chroot. The snapshot is ``snapshot_path``, or the latest one of ``cluster`` under
    ``base_path``. Never connects to the source cluster; refuses a target that is non-empty, the
    ZooKeeper root, or (on a shared host) the snapshot's own chroot or a chroot inside it.
    Ephemerals are created persistent; the report (return value) lists them and what was not
    reproduced (zxids, times, cversion, ACLs).

    :param target_chroot: the empty scratch chroot to load into (overrides the connection's).
    :param kafka_zookeeper_conn_id: the scratch ZooKeeper's connection (never the source cluster's).
    :param snapshot_path: the snapshot folder to load (default: the latest of ``cluster``).
    :param cluster: the cluster whose latest snapshot is loaded when ``snapshot_path`` is not given.
    :param base_path: artefact store root (default ``[kafka_zk] artefacts_base``).
    :param replay_versions: set data again until each znode's ``dataVersion`` matches (true/false).
    :param storage_options: fsspec options of the artefact store.
    :param artefacts_conn_id: the Airflow connection of a remote store (as the snapshot operator's).
    """

    template_fields: Sequence[str] = (
        "snapshot_path",
        "cluster",
        "kafka_zookeeper_conn_id",
        "base_path",
        "artefacts_conn_id",
        "target_chroot",
    )
    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        target_chroot: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        snapshot_path: str | None = None,
        cluster: str | None = None,
        base_path: str | None = None,
        replay_versions: bool | str = True,
        storage_options: Mapping[str, Any] | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if snapshot_path is None and cluster is None:
            raise ValueError("give snapshot_path, or cluster (the latest snapshot of it is loaded)")
        self.target_chroot = target_chroot
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.snapshot_path = snapshot_path
        self.cluster = cluster
        self.base_path = base_path
        self.replay_versions = replay_versions
        self.storage_options = dict(storage_options or {})
        self.artefacts_conn_id = artefacts_conn_id

    def _snapshot_path(self) -> str:
        if self.snapshot_path:
            return artefacts_url(self.snapshot_path, self.artefacts_conn_id)
        assert self.cluster is not None
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        ref = latest_snapshot(base, self.cluster, storage_options=self.storage_options)
        if ref is None:
            raise FileNotFoundError(f"no complete snapshot of cluster {self.cluster!r} under {base}")
        return ref.path

    def execute(self, context: Context) -> dict[str, Any]:
        replay_versions = parse_safety_flags(replay_versions=self.replay_versions)["replay_versions"]
        path = self._snapshot_path()
        manifest, rows = read_snapshot(path, storage_options=self.storage_options)
        hook = KafkaZooKeeperHook(self.kafka_zookeeper_conn_id, chroot=self.target_chroot)
        gate = ScratchLoadGate()  # the target is a scratch chroot: no cluster to pin, no lease
        try:
            _refuse_source(manifest, hook.target_description())
            hook.bind_gate(gate)
            # Credentials/tokens stored as digests are not loaded: a scratch copy must not carry fake secrets.
            redacted = sorted(r.path for r in rows if is_redacted_row(r))
            loadable = [r for r in rows if not is_redacted_row(r)]
            report = hook.load_snapshot_rows(loadable, replay_versions=replay_versions)
        finally:
            hook.unbind_gate(gate)
            hook.close()
        result = {
            "snapshot": path,
            "cluster": manifest.get("cluster"),
            **report.to_dict(),
            "redacted_not_loaded": redacted,
        }
        self.log.info(
            "Loaded %d znodes of %s into %s; %d ephemeral znodes were created persistent",
            report.created,
            path,
            report.target,
            len(report.ephemerals_as_persistent),
        )
        return result


def _refuse_source(manifest: Mapping[str, Any], target: Mapping[str, Any]) -> None:
    source = manifest.get("source", {})
    shared = set(source.get("hosts", ())) & set(target.get("hosts", ()))
    source_chroot = source.get("chroot") or "/"
    target_chroot = target.get("chroot") or "/"
    inside = source_chroot == "/" or posixpath.commonpath([source_chroot, target_chroot]) == source_chroot
    if shared and inside:
        raise SourceClusterGuardError(
            f"refusing to load into {target_chroot} on {sorted(shared)}: that is the snapshot's source "
            f"chroot {source_chroot} (or inside it); give a separate scratch chroot"
        )
