"""ZooKeeper snapshots as files: ``<base>/<cluster>/snapshots/<ts>/{znodes.parquet,manifest.json}``.

``<base>`` is a local directory or any fsspec URL (``s3://...``, ``gs://...``, ``memory://...``).
A snapshot counts only once its ``manifest.json`` exists, and the manifest is written last, each
file first under a temporary name and then renamed: a run that crashes, or a walk that fails,
leaves at most a directory without a manifest, which every reader here ignores (and retention
removes once it is old). Readers verify the Parquet file's sha256 against the manifest.

The Parquet file has one row per znode in :data:`ZNODE_ROW_FIELDS` order, sorted by path; ``data``
is nullable binary (null: a znode created without data, as Kafka's containers are). It is written
:data:`ROW_GROUP_ROWS` rows at a time straight to its temporary name, hashed on the way: memory
holds one row group, not the file or the tree.

Credentials are not stored in clear unless asked (``write_snapshot(redact=False)``): the data of
every znode under :data:`~airflow_provider_kafka_zk.kafka.safety.REDACTED_PREFIXES` (SCRAM
credentials, delegation tokens) is replaced by ``b"redacted:sha256:<hex digest>"``; its Stat is
kept (``data_length`` is the original's), null and empty data stay as they are, and the manifest's
``redacted`` entry says how many rows were replaced.

Snapshots dated more than :data:`FUTURE_SKEW` after now (a skewed clock, a hand-made directory)
are never chosen as the latest or previous one and never deleted by retention; each is warned about.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_kafka_zk import __version__
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.errors import ZnodeFormatError
from airflow_provider_kafka_zk.kafka.safety import (
    REDACTED_DATA_PREFIX,
    REDACTED_PREFIXES,
    is_redaction_digest,
)
from airflow_provider_kafka_zk.kafka.snapshot import ZNODE_ROW_FIELDS, ZnodeRow, gc_paused, rows_from_columns
from airflow_provider_kafka_zk.kafka.snapshot_schema import PARQUET_SCHEMA

from .files import display_url, validate_cluster_name, write_atomically

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalk

log = logging.getLogger(__name__)

SNAPSHOTS_DIR = "snapshots"
ZNODES_FILE = "znodes.parquet"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "kafka-zk-snapshot"
MANIFEST_FORMAT_VERSION = 1
PACKAGE_NAME = "airflow-provider-kafka-zk"

FUTURE_SKEW = timedelta(minutes=5)
"""A snapshot dated later than now + this is "from the future": never latest, never deleted."""

"""What a redacted znode's data starts with; the hex sha256 of the original data follows."""
REDACTION_HOW = "data replaced by its sha256; Stat kept"

ROW_GROUP_ROWS = 65_536
"""Rows per Parquet row group: what ``write_snapshot`` holds as columns at a time."""

_TS_FORMAT = "%Y%m%dT%H%M%S.%fZ"
_TS_NAME = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}Z")


class SnapshotArtefactError(RuntimeError):
    """A snapshot artefact is missing, incomplete or not what its manifest says."""


class SnapshotNotFoundError(SnapshotArtefactError, FileNotFoundError):
    """No complete snapshot (a directory with a manifest) at the given place."""


class SnapshotIntegrityError(SnapshotArtefactError):
    """The files do not match the manifest (checksum, row count, format): do not trust them."""


@dataclass(frozen=True, order=True)
class SnapshotRef:
    """One complete snapshot directory; sorts by time. ``path`` is a local path or an fsspec URL."""

    taken_at: datetime
    name: str
    path: str


def snapshot_timestamp_name(when: datetime) -> str:
    """Directory name of a snapshot taken at ``when`` (UTC, sortable, no ':' for object stores)."""
    return when.astimezone(UTC).strftime(_TS_FORMAT)


def _parse_name(name: str) -> datetime | None:
    if not _TS_NAME.fullmatch(name):
        return None
    return datetime.strptime(name, _TS_FORMAT).replace(tzinfo=UTC)


def _fs(url: str, storage_options: Mapping[str, Any] | None) -> tuple[AbstractFileSystem, str]:
    fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    return fs, root.rstrip("/") or "/"


# ------------------------------------------------------------------------------ write
def _table(columns: Mapping[str, list[Any]]) -> pa.Table:
    # Table.from_arrays, not pa.table(dict): the latter imports pandas (seconds) to check for it
    arrays = [pa.array(columns[f.name], type=f.type) for f in PARQUET_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=PARQUET_SCHEMA)


def snapshot_table(walk: SnapshotWalk) -> pa.Table:
    """The walk's rows as an Arrow table in the snapshot schema, sorted by path (not redacted)."""
    return pa.concat_tables(walk.arrow_chunks(ROW_GROUP_ROWS))


def rows_table(rows: Sequence[ZnodeRow]) -> pa.Table:
    """Arrow table of ZnodeRows (any order in, sorted by path out)."""
    ordered = sorted(rows, key=lambda r: r.path)
    return _table({name: [getattr(r, name) for r in ordered] for name in ZNODE_ROW_FIELDS})


def redacted_data(data: bytes | None) -> bytes | None:
    """``b"redacted:sha256:<hex>"`` of ``data``; None and empty data are returned as they are."""
    if not data:
        return data
    return REDACTED_DATA_PREFIX + hashlib.sha256(data).hexdigest().encode("ascii")


def is_redacted_row(row: ZnodeRow) -> bool:
    """Whether ``row``'s data is a redaction digest, not the znode's real data.

    A loader must not write such data back as if it were a credential or a token.
    """
    return is_redaction_digest(row.path, row.data)


def path_prefix_mask(paths: pa.Array | pa.ChunkedArray, prefixes: Iterable[str]) -> Any | None:
    """Mask of the rows whose path starts with one of ``prefixes`` (one vectorised test each); None
    for no prefix.

    pyarrow.compute is imported in the functions that use it, not with this module: its import parses
    the docstring of every compute function (~0.13 s of CPU), which every task process parsing the
    daily DAG would pay.
    """
    import pyarrow.compute as pc

    mask = None
    for prefix in prefixes:
        hit = pc.starts_with(paths, prefix)
        mask = hit if mask is None else pc.or_(mask, hit)
    return mask


def _sensitive(paths: pa.Array | pa.ChunkedArray, data: pa.Array | pa.ChunkedArray) -> Any:
    """Mask (no nulls) of the rows whose data a snapshot redacts: under REDACTED_PREFIXES (what
    ``is_redacted_path`` tests), with data neither null nor empty.

    No Python scalars are given to the compute functions: pyarrow would import pandas to check them.
    """
    import pyarrow.compute as pc  # see path_prefix_mask

    under = path_prefix_mask(paths, REDACTED_PREFIXES)
    not_empty = pc.cast(pc.binary_length(data), pa.bool_())  # null for null data
    return pc.and_kleene(pc.and_kleene(under, pc.is_valid(data)), not_empty)


def _count(mask: Any) -> int:
    import pyarrow.compute as pc  # see path_prefix_mask

    return int(pc.sum(mask).as_py() or 0)


def _redact(table: pa.Table) -> tuple[pa.Table, int]:
    """``table`` with sensitive data replaced by digests (a new table), and how many rows were."""
    import pyarrow.compute as pc  # see path_prefix_mask

    if not _count(_sensitive(table.column("path"), table.column("data"))):
        return table, 0
    paths = table.column("path").combine_chunks()
    data = table.column("data").combine_chunks()
    mask = _sensitive(paths, data)
    rows = pc.indices_nonzero(mask).to_pylist()
    builder = pa.lib.StringBuilder()  # not pa.array(list): that imports pandas
    builder.append_values([redacted_data(data[i].as_py()) for i in rows])
    digests = builder.finish().view(pa.binary())
    field_index = PARQUET_SCHEMA.get_field_index("data")
    redacted = pc.replace_with_mask(data, mask, digests)
    return table.set_column(field_index, PARQUET_SCHEMA.field(field_index), redacted), len(rows)


def _cluster_id_from(walk: SnapshotWalk) -> str | None:
    entry = walk.table.get(znodes.CLUSTER_ID)
    if entry is None:
        return None
    try:
        return znodes.ClusterId.decode(entry[0], znodes.CLUSTER_ID).id
    except ZnodeFormatError:
        return None  # kept raw in the snapshot; the manifest just cannot name the id


class _HashingSink:
    """A write-only file object that hashes and counts what it passes on (for the manifest)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.size += view.nbytes
        self._handle.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self.closed = True  # the real file is closed by whoever opened it

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def write_snapshot(
    base: str,
    cluster: str,
    walk: SnapshotWalk,
    *,
    source: Mapping[str, Any] | None = None,
    cluster_id: str | None = None,
    redact: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[SnapshotRef, dict[str, Any]]:
    """Publish ``walk`` under ``<base>/<cluster>/snapshots/<ts>/``; returns its ref and manifest.

    ``source`` describes the ensemble without credentials (``{"hosts": [...], "chroot": ...}``,
    as ``KafkaZooKeeperHook.target_description()`` gives it). ``<ts>`` is when the walk started.
    ``redact`` (default) stores credentials and tokens as digests (see the module docstring);
    ``redact=False`` stores them in clear and the manifest says so. ``walk`` is not changed.
    """
    validate_cluster_name(cluster)
    fs, root = _fs(base, storage_options)
    name = snapshot_timestamp_name(walk.started_at)
    directory = f"{root}/{cluster}/{SNAPSHOTS_DIR}/{name}"
    if fs.exists(f"{directory}/{MANIFEST_FILE}"):
        raise FileExistsError(f"snapshot {display_url(fs, directory)} already exists")
    fs.makedirs(directory, exist_ok=True)

    # one row group at a time, straight into the file's temporary name, hashed on the way
    counted = {"replaced": 0, "in_clear": 0}

    sinks: list[_HashingSink] = []

    def write_parquet(handle: Any) -> None:
        sinks.append(_HashingSink(handle))
        with pq.ParquetWriter(
            pa.PythonFile(sinks[-1], mode="w"), PARQUET_SCHEMA, compression="zstd"
        ) as writer:
            for chunk in walk.arrow_chunks(ROW_GROUP_ROWS):
                if redact:
                    chunk, replaced = _redact(chunk)
                    counted["replaced"] += replaced
                else:
                    counted["in_clear"] += _count(_sensitive(chunk.column("path"), chunk.column("data")))
                writer.write_table(chunk)
                del chunk

    write_atomically(fs, f"{directory}/{ZNODES_FILE}", write_parquet)
    sink = sinks[-1]
    redacted: dict[str, Any]
    if redact:
        redacted = {
            "enabled": True,
            "count": counted["replaced"],
            "prefixes": list(REDACTED_PREFIXES),
            "how": REDACTION_HOW,
        }
    else:
        redacted = {
            "enabled": False,
            "count": 0,
            "prefixes": [],
            "how": "not redacted: credentials and tokens stored in clear (include_sensitive)",
            "in_clear": counted["in_clear"],
        }
    digest = sink.sha256.hexdigest()

    finished_at = walk.started_at + timedelta(seconds=walk.duration_s)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_FORMAT_VERSION,
        "cluster": cluster,
        "cluster_id": cluster_id if cluster_id is not None else _cluster_id_from(walk),
        "snapshot": name,
        "started_at": walk.started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "duration_s": round(walk.duration_s, 3),
        "consistent": walk.consistent,
        "consistency": "consistent" if walk.consistent else "fuzzy",
        "zxid": {
            "start": walk.start_zxid,
            "end": walk.end_zxid,
            "consistent_at": walk.consistent_zxid,
            "max_seen": walk.max_zxid_seen,
        },
        "znodes": walk.znodes,
        "data_bytes": walk.data_bytes,
        "gone": list(walk.gone),
        "reread": len(walk.reread),
        "missing_roots": list(walk.missing_roots),
        "redacted": redacted,
        "files": {ZNODES_FILE: {"bytes": sink.size, "sha256": digest, "rows": walk.znodes}},
        "source": {
            "hosts": list((source or {}).get("hosts", [])),
            "chroot": walk.chroot or "/",
        },
        "include": list(walk.include),
        "exclude": list(walk.exclude),
        "walk": {
            "method": walk.method,
            "requests": walk.requests,
            "reconnects": walk.reconnects,
            "session_expiries": walk.session_expiries,
        },
        "package": {"name": PACKAGE_NAME, "version": __version__},
    }
    write_atomically(fs, f"{directory}/{MANIFEST_FILE}", json.dumps(manifest, indent=2).encode("utf-8"))
    return SnapshotRef(walk.started_at.astimezone(UTC), name, display_url(fs, directory)), manifest


# ------------------------------------------------------------------------------ read
def read_manifest(path: str, *, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of the snapshot directory ``path``; SnapshotNotFoundError when it has none."""
    fs, directory = _fs(path, storage_options)
    manifest_path = f"{directory}/{MANIFEST_FILE}"
    try:
        raw = fs.cat_file(manifest_path)
    except FileNotFoundError:
        raise SnapshotNotFoundError(
            f"{display_url(fs, directory)} has no {MANIFEST_FILE}: not a complete snapshot (a crashed or running write)"
        ) from None
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise SnapshotIntegrityError(f"{display_url(fs, manifest_path)} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise SnapshotIntegrityError(f"{display_url(fs, manifest_path)} is not a {MANIFEST_FORMAT} manifest")
    if manifest.get("format_version") != MANIFEST_FORMAT_VERSION:
        raise SnapshotIntegrityError(
            f"{display_url(fs, manifest_path)} has format_version {manifest.get('format_version')!r}; "
            f"this package reads {MANIFEST_FORMAT_VERSION}"
        )
    return manifest


def read_snapshot_table(
    path: str, *, storage_options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], pa.Table]:
    """Manifest and Arrow table of a complete snapshot, after checking sha256 and row count."""
    manifest = read_manifest(path, storage_options=storage_options)
    fs, directory = _fs(path, storage_options)
    file_path = f"{directory}/{ZNODES_FILE}"
    expected = manifest.get("files", {}).get(ZNODES_FILE, {})
    try:
        payload = fs.cat_file(file_path)
    except FileNotFoundError:
        raise SnapshotIntegrityError(
            f"{display_url(fs, file_path)} is missing but the manifest lists it"
        ) from None
    digest = hashlib.sha256(payload).hexdigest()
    if digest != expected.get("sha256"):
        raise SnapshotIntegrityError(
            f"{display_url(fs, file_path)}: sha256 {digest} does not match the manifest's {expected.get('sha256')}"
        )
    table = pq.read_table(io.BytesIO(payload))
    if tuple(table.column_names) != ZNODE_ROW_FIELDS:
        raise SnapshotIntegrityError(
            f"{display_url(fs, file_path)}: columns {table.column_names} are not ZnodeRow's"
        )
    if table.num_rows != manifest.get("znodes"):
        raise SnapshotIntegrityError(
            f"{display_url(fs, file_path)}: {table.num_rows} rows, the manifest says {manifest.get('znodes')}"
        )
    return manifest, table


def read_snapshot(
    path: str, *, storage_options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[ZnodeRow]]:
    """Manifest and rows (sorted by path) of a complete, verified snapshot."""
    manifest, table = read_snapshot_table(path, storage_options=storage_options)
    with gc_paused():  # the column lists are as many objects as the rows
        return manifest, rows_from_columns([table.column(name).to_pylist() for name in ZNODE_ROW_FIELDS])


def read_snapshot_without_partitions(
    path: str, *, storage_options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[ZnodeRow]]:
    """Manifest and rows of a complete, verified snapshot, less the topics' ``partitions`` subtrees.

    What a check at topic level needs (cluster id, brokers, every topic znode, the admin and
    config znodes) without making a row for each of the partition containers and state znodes,
    which are almost all of a large cluster's tree (400k of 406k at 200k partitions): the filter
    runs on the Arrow column, so memory stays near the table's.
    """
    import pyarrow.compute as pc

    manifest, table = read_snapshot_table(path, storage_options=storage_options)
    keep = pc.invert(
        pc.match_substring_regex(table.column("path"), r"^/brokers/topics/[^/]+/partitions(/|$)")
    )
    table = table.filter(keep)
    with gc_paused():
        return manifest, rows_from_columns([table.column(name).to_pylist() for name in ZNODE_ROW_FIELDS])


# ------------------------------------------------------------------------------ lookup
def _snapshots_root(base: str, cluster: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    validate_cluster_name(cluster)
    fs, root = _fs(base, storage_options)
    return fs, f"{root}/{cluster}/{SNAPSHOTS_DIR}"


def _scan(fs: AbstractFileSystem, directory: str) -> tuple[list[SnapshotRef], list[tuple[datetime, str]]]:
    """(complete snapshots oldest first, incomplete timestamped directories)."""
    if not fs.exists(directory):
        return [], []
    complete: list[SnapshotRef] = []
    incomplete: list[tuple[datetime, str]] = []
    for entry in fs.ls(directory, detail=True):
        if entry.get("type") != "directory":
            continue
        full = entry["name"].rstrip("/")
        name = full.rsplit("/", 1)[-1]
        taken_at = _parse_name(name)
        if taken_at is None:
            continue
        if fs.exists(f"{full}/{MANIFEST_FILE}"):
            complete.append(SnapshotRef(taken_at, name, display_url(fs, full)))
        else:
            incomplete.append((taken_at, full))
    return sorted(complete), sorted(incomplete)


def list_snapshots(
    base: str, cluster: str, *, storage_options: Mapping[str, Any] | None = None
) -> list[SnapshotRef]:
    """Complete snapshots of ``cluster`` (those with a manifest), oldest first.

    Future-dated ones are listed too (this is an inventory); :func:`latest_snapshot`,
    :func:`previous_snapshot` and :func:`apply_retention` leave them out.
    """
    fs, directory = _snapshots_root(base, cluster, storage_options)
    return _scan(fs, directory)[0]


def split_future(
    snapshots: Sequence[SnapshotRef], now: datetime | None = None, skew: timedelta = FUTURE_SKEW
) -> tuple[list[SnapshotRef], list[SnapshotRef]]:
    """(snapshots dated at most ``skew`` after ``now``, those dated later), order kept."""
    horizon = (now or datetime.now(UTC)) + skew
    present = [s for s in snapshots if s.taken_at <= horizon]
    future = [s for s in snapshots if s.taken_at > horizon]
    return present, future


def _warn_future(future: Sequence[SnapshotRef], now: datetime | None, skew: timedelta, what: str) -> None:
    if future:
        log.warning(
            "%d snapshot(s) dated in the future (more than %s after %s), %s: %s. A clock is skewed or "
            "the directory was made by hand; move it away once understood",
            len(future),
            skew,
            (now or datetime.now(UTC)).isoformat(),
            what,
            ", ".join(s.path for s in future),
        )


def _present_snapshots(
    base: str,
    cluster: str,
    now: datetime | None,
    skew: timedelta,
    storage_options: Mapping[str, Any] | None,
) -> list[SnapshotRef]:
    present, future = split_future(list_snapshots(base, cluster, storage_options=storage_options), now, skew)
    _warn_future(future, now, skew, "ignored as a plan or comparison base")
    return present


def latest_snapshot(
    base: str,
    cluster: str,
    *,
    now: datetime | None = None,
    future_skew: timedelta = FUTURE_SKEW,
    storage_options: Mapping[str, Any] | None = None,
) -> SnapshotRef | None:
    """The newest complete snapshot not dated after ``now + future_skew`` (future ones: a warning)."""
    snapshots = _present_snapshots(base, cluster, now, future_skew, storage_options)
    return snapshots[-1] if snapshots else None


def previous_snapshot(
    base: str,
    cluster: str,
    before: SnapshotRef | str | None = None,
    *,
    now: datetime | None = None,
    future_skew: timedelta = FUTURE_SKEW,
    storage_options: Mapping[str, Any] | None = None,
) -> SnapshotRef | None:
    """The complete snapshot just before ``before`` (a ref or directory name; default: the latest).

    Future-dated snapshots (see :func:`latest_snapshot`) are never returned.
    """
    snapshots = _present_snapshots(base, cluster, now, future_skew, storage_options)
    if before is None:
        return snapshots[-2] if len(snapshots) >= 2 else None
    name = before.name if isinstance(before, SnapshotRef) else _name_of(str(before))
    earlier = [s for s in snapshots if s.name < name]
    return earlier[-1] if earlier else None


def _name_of(name_or_path: str) -> str:
    return name_or_path.rstrip("/").rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------ retention
def apply_retention(
    base: str,
    cluster: str,
    *,
    keep_last: int | None = None,
    keep_days: float | None = None,
    now: datetime | None = None,
    protect: Sequence[str] = (),
    future_skew: timedelta = FUTURE_SKEW,
    incomplete_grace: timedelta = timedelta(days=1),
    storage_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """Delete old snapshots; returns the deleted directories.

    A complete snapshot is kept when it is among the newest ``keep_last`` or younger than
    ``keep_days`` (either rule keeps it); with neither rule nothing complete is deleted. Never
    deleted: the newest complete snapshot not in the future, every snapshot named in ``protect``
    (directory names or paths: the operator passes the one it just wrote), and every snapshot or
    leftover dated more than ``future_skew`` after ``now`` -- those are warned about and do not
    count towards ``keep_last``. Directories without a manifest older than ``incomplete_grace``
    are leftovers of crashed writes and are deleted too. A snapshot's manifest is removed first,
    so a reader never sees a half-deleted snapshot as complete.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError("keep_last must be >= 1 (the newest complete snapshot is always kept)")
    if keep_days is not None and keep_days < 0:
        raise ValueError("keep_days must be >= 0")
    if isinstance(protect, str):
        protect = [protect]
    now = now or datetime.now(UTC)
    protected = {_name_of(p) for p in protect}
    fs, directory = _snapshots_root(base, cluster, storage_options)
    complete, incomplete = _scan(fs, directory)
    complete, future = split_future(complete, now, future_skew)
    _warn_future(future, now, future_skew, "kept and not counted by retention")
    deleted: list[str] = []
    if complete and (keep_last is not None or keep_days is not None):
        keep = {complete[-1].name} | protected
        if keep_last is not None:
            keep.update(s.name for s in complete[-keep_last:])
        if keep_days is not None:
            horizon = now - timedelta(days=keep_days)
            keep.update(s.name for s in complete if s.taken_at >= horizon)
        for ref in complete:
            if ref.name in keep:
                continue
            path = f"{directory}/{ref.name}"
            fs.rm(f"{path}/{MANIFEST_FILE}")
            fs.rm(path, recursive=True)
            deleted.append(ref.path)
    for taken_at, path in incomplete:
        if _name_of(path) in protected:
            continue
        if taken_at > now + future_skew:
            log.warning(
                "Incomplete snapshot directory %s is dated in the future; left alone", display_url(fs, path)
            )
        elif taken_at < now - incomplete_grace:
            fs.rm(path, recursive=True)
            deleted.append(display_url(fs, path))
    return deleted
