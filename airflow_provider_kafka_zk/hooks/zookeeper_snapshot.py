"""Read every znode of a Kafka chroot, with data and full Stat, fast and with an honest zxid range.

Speed: the walk sends ZooKeeper 3.6+ multiRead requests (hundreds of getData/getChildren each,
several in flight) through kazoo's connection, so Python handles one request per few hundred
znodes instead of one or two per znode. Servers without multiRead (3.4/3.5) get single reads
pipelined on sessions of the walker's own (:mod:`._zk_wire`: raw frames, no per-request objects),
kazoo's async API only when none opens. On every path a listing that Kafka's layout predicts
(:func:`guess_children`) is answered by reading the predicted children, taken only when their
Stat proves them the whole child list as of ``start_zxid`` (see :class:`ZnodeTreeWalker`).

Consistency (what ``SnapshotWalk.consistent`` means): before the first read the walker syncs and
takes the session's last zxid as ``start_zxid``; every later read on the session sees at least
that state. A row whose ``mzxid`` and ``pzxid`` are both <= ``start_zxid`` was not changed (data,
or child list) between ``start_zxid`` and the moment it was read, so it is exactly the znode as of
``start_zxid``. If that holds for every row, every listed child was found (none deleted during
the walk) and every child list matched its parent's ``numChildren``, the snapshot *is* the tree as
of ``start_zxid`` (``consistent=True``). Otherwise the znodes that changed are re-read once after
the walk (new children walked, deleted ones dropped and listed in ``gone``) and the snapshot is
*fuzzy*: each row is its znode at some zxid in ``[start_zxid, end_zxid]``.

Reconnects: a dropped connection fails the in-flight requests; their reads are queued again and
the walk resumes once kazoo has reconnected (same session: ZooKeeper refuses to serve it from a
server behind what it has seen; new session after expiry: the walker syncs first). If no
connection comes back within ``reconnect_timeout`` the walk raises SnapshotConnectionLostError.
The walker owns no ephemeral znodes, so a session expiry loses nothing of the cluster's.

Memory (flat in the tree's size; a 406k-znode tree once took 603 MB held as Python rows): reads
are sent roughly in path order (a heap of sorted groups, the smallest next path first), so the walk
goes depth-first through the tree in the order of the snapshot file, ``window * batch_ops`` reads
wide; listings wait while the known-but-unread frontier is over :data:`FRONTIER_ZNODES` (a level of
thousands of topics is not queued whole). A row leaves Python as soon as no read still to come can
produce a smaller path (a row also waits for its own child listing; a listing that finds the znode
deleted drops it): rows go out sorted, ``flush_rows`` at a time, as record batches into a
temporary Arrow IPC file (:class:`ZnodeStore`), which the artefact writer turns into Parquet row
group by row group. What the re-read after a fuzzy walk changes (new data, deleted subtrees,
children created meanwhile) is kept in memory and merged into a new sorted file; the znodes to
re-read and the children they had are found in the store, so no per-znode state outlives the walk
of its subtree.
"""

from __future__ import annotations

import array
import heapq
import itertools
import logging
import os
import posixpath
import shutil
import tempfile
import time
import weakref
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    MarshallingError,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow, rows_from_columns

from ._kazoo_protocol import (
    GET_CHILDREN,
    GET_DATA,
    StatTuple,
    connection_thread_alive,
    session_timeout_s,
    submit_multi_read,
    wire_options,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from kazoo.client import KazooClient

    from ._zk_wire import WirePool

log = logging.getLogger(__name__)

DEFAULT_INCLUDE: tuple[str, ...] = ("/",)
DEFAULT_EXCLUDE: tuple[str, ...] = ("/zookeeper",)
"""ZooKeeper's own subtree (quotas, config) exists only at the real root; it is not Kafka's."""

_DISCONNECTED = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)
"""A reply that will not come on this connection: send the read again after reconnecting."""
_METHODS = ("auto", "multi-read", "pipelined", "pipelined-kazoo")

# Stat tuple indexes (wire order)
_CZXID, _MZXID, _NUM_CHILDREN, _PZXID = 0, 1, 9, 10

_GUESS = -GET_DATA
"""A getData of a child the walker expects from Kafka's layout, before (instead of) listing its
parent: sent as a getData; see :func:`guess_children`."""

PIPELINED_SESSIONS = 4
"""Sessions of its own a walk without multiRead reads on. The server answers sessions in parallel
and wastes less per request when more arrive at once: measured at 203k znodes through the 3.5
proxy on 2 cores (benchmarks/fallback_snapshot_benchmark.py), 4 sessions walk in 4.2-4.9 s
against 6.2-6.6 s with 2 (the server's CPU 4.9-6.5 s against 8.6-9.5 s), 8 gain nothing more."""

FLUSH_ROWS = 16_384
"""Rows per record batch of a walk's spill file: what the walker holds as Python rows before
writing them out (plus the rows that must wait for a smaller path still being read)."""

FRONTIER_ZNODES = 50_000
"""Reads known but not sent yet, plus the children the listings in flight will add (their
``numChildren``), above which the walker sends no further listing: a wide level (thousands of
topics of hundreds of partitions each) is then walked a part at a time instead of queued whole."""

_EMIT_EVERY = 2_048
"""Sort the waiting rows and pass the ready ones on once this many are waiting (or twice as many
as waited the last time, so rows held back by a slow subtree are not re-sorted on every reply)."""

Row = tuple[str, "bytes | None", StatTuple]
_path_of, _data_of, _stat_of = itemgetter(0), itemgetter(1), itemgetter(2)


class SnapshotWalkError(RuntimeError):
    """The walk could not produce a complete snapshot; nothing partial is returned."""


class SnapshotConnectionLostError(SnapshotWalkError):
    """ZooKeeper stayed unreachable longer than the walk's reconnect timeout."""


class ZnodeRowError(ValueError):
    """A row given to the snapshot (a hand-made table) is not a znode's path, data and Stat."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(f"znode {path}: {reason}")


class SnapshotAccessError(SnapshotWalkError):
    """A znode could not be read (ACL): the snapshot would silently miss it, so the walk stops."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(
            f"znode {path}: {reason}; grant the snapshot's ZooKeeper user read access or exclude it"
        )


@dataclass(frozen=True)
class WalkProgress:
    """Passed to the progress callback between requests (for logs of long walks)."""

    znodes: int
    requests: int
    queued: int
    in_flight: int
    elapsed_s: float
    reconnects: int
    position: str | None = None
    """The smallest path still to be read: the walk goes in path order, so this is where it is."""


@dataclass(frozen=True)
class SnapshotWalk:
    """Every znode under the included subtrees, with data and full Stat.

    ``consistent``: the rows are the tree exactly as of ``consistent_zxid`` (== ``start_zxid``);
    otherwise fuzzy: each row is its znode at some zxid in ``[start_zxid, end_zxid]``.
    ``gone``: znodes found in a child list but deleted before they could be read (not errors).
    ``missing_roots``: included paths that do not exist. ``max_zxid_seen``: highest czxid, mzxid
    or pzxid in the rows. ``table`` maps path -> (data, Stat in wire order): a walker's walk gives
    a :class:`ZnodeStore` (sorted rows in a temporary file, read back a record batch at a time), a
    hand-made walk may give a dict. :attr:`rows` builds the whole :class:`ZnodeRow` list on first
    use; writers use :meth:`arrow_chunks` and hold one chunk at a time. ``rows_held_peak``: the
    most rows the walker held in Python at once, waiting for a smaller path (stays near
    ``window * batch_ops`` whatever the tree's size: the walk streams).
    """

    table: Mapping[str, tuple[bytes | None, StatTuple]] = field(repr=False)
    chroot: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    start_zxid: int
    end_zxid: int
    consistent: bool
    consistent_zxid: int | None
    max_zxid_seen: int
    gone: tuple[str, ...]
    reread: tuple[str, ...]
    missing_roots: tuple[str, ...]
    method: str
    requests: int
    reconnects: int
    session_expiries: int
    started_at: datetime
    duration_s: float
    data_bytes: int
    rows_held_peak: int = 0

    @property
    def znodes(self) -> int:
        return len(self.table)

    @property
    def rate(self) -> float:
        """Znodes per second of wall time."""
        return len(self.table) / self.duration_s if self.duration_s > 0 else float("inf")

    @cached_property
    def paths(self) -> list[str]:
        """Every path, sorted (the row order of the snapshot file)."""
        if isinstance(self.table, ZnodeStore):
            return list(self.table)  # stored sorted
        return sorted(self.table)

    @cached_property
    def rows(self) -> list[ZnodeRow]:
        """The snapshot as ZnodeRow objects, sorted by path (all of them in memory)."""
        if isinstance(self.table, ZnodeStore):
            return [row for chunk in self.table.record_batches() for row in _znode_rows(chunk)]
        table = self.table
        rows = []
        for path in self.paths:
            data, s = table[path]
            rows.append(
                ZnodeRow(path, data, s[0], s[1], s[10], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9])
            )
        return rows

    def arrow_chunks(self, rows: int) -> Iterator[pa.Table]:
        """The rows as Arrow tables of exactly ``rows`` rows (the last one fewer), sorted by path,
        in the snapshot schema; at least one, maybe empty. Nothing is redacted here."""
        if rows < 1:
            raise ValueError("arrow chunks need at least 1 row each")
        if isinstance(self.table, ZnodeStore):
            yield from self.table.record_batches(rows)
            return
        import pyarrow as pa

        schema = znode_arrow_schema()
        table, paths = self.table, self.paths
        for start in range(0, max(len(paths), 1), rows):
            chunk = paths[start : start + rows]
            entries = [table[p] for p in chunk]
            check_rows(zip(chunk, entries, strict=True))
            batch, _ = _arrow_batch(chunk, [e[0] for e in entries], [e[1] for e in entries], schema)
            yield pa.Table.from_batches([batch], schema=schema)

    def close(self) -> None:
        """Remove the walk's spill file now (it goes anyway once the walk is garbage-collected)."""
        if isinstance(self.table, ZnodeStore):
            self.table.close()


def _znode_rows(chunk: pa.Table) -> list[ZnodeRow]:
    return rows_from_columns([column.to_pylist() for column in chunk.columns])


_WIRE_INDEX: dict[str, int] = {
    "czxid": 0,
    "mzxid": 1,
    "pzxid": 10,
    "ctime": 2,
    "mtime": 3,
    "version": 4,
    "cversion": 5,
    "aversion": 6,
    "ephemeral_owner": 7,
    "data_length": 8,
    "num_children": 9,
}
"""ZnodeRow field -> index in ZooKeeper's wire-order Stat."""

_COLUMN_OF_WIRE: tuple[int, ...] = tuple(
    2 + list(_WIRE_INDEX).index(name) for name in sorted(_WIRE_INDEX, key=_WIRE_INDEX.__getitem__)
)
"""Wire-order Stat index -> column of the snapshot schema (path and data come first)."""


def znode_arrow_schema() -> pa.Schema:
    """The snapshot's Arrow schema (ZnodeRow field order, :mod:`~airflow_provider_kafka_zk.kafka.
    snapshot_schema`); imported when a walk starts, so importing the hook does not import pyarrow."""
    from airflow_provider_kafka_zk.kafka.snapshot_schema import PARQUET_SCHEMA

    return PARQUET_SCHEMA


# pyarrow note: ``pa.array`` on Python lists, and compute functions given Python scalars, import
# pandas (~40 MB, over a second) to check for pandas objects. The walk builds its arrays from
# buffers and passes no Python scalars to compute functions, so a snapshot never loads pandas.
def _string_array(values: Iterable[Any], binary: bool = False) -> pa.Array:
    """str/bytes/None values as a string (or binary) array, through pyarrow's string builder."""
    import pyarrow as pa

    builder = pa.lib.StringBuilder()
    builder.append_values(values)
    array = builder.finish()
    return array.view(pa.binary()) if binary else array


def _arrow_batch(
    paths: Sequence[str], datas: Sequence[bytes | None], stats: Sequence[StatTuple], schema: pa.Schema
) -> tuple[pa.RecordBatch, list[tuple[int, ...]]]:
    """Rows as a record batch in ``schema``, and the Stat values column by column (wire order).

    Integer columns go through ``array.array`` buffers: no numpy (not a dependency), no pandas.
    """
    import pyarrow as pa

    n = len(paths)
    by_wire: list[tuple[int, ...]] = list(zip(*stats, strict=True)) if n else [()] * 11
    arrays: list[Any] = [_string_array(paths), _string_array(datas, binary=True)] + [None] * 11
    for wire, column in enumerate(_COLUMN_OF_WIRE):
        kind = schema.field(column).type
        values = array.array("q" if kind == pa.int64() else "i", by_wire[wire])
        arrays[column] = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(values)])
    return pa.RecordBatch.from_arrays(arrays, schema=schema), by_wire


_INT32_STAT = frozenset({4, 5, 6, 8, 9})  # version, cversion, aversion, dataLength, numChildren
"""Wire-order Stat indexes that ZooKeeper sends (and the snapshot stores) as 32-bit ints."""


def check_rows(entries: Iterable[tuple[Any, Any]]) -> None:
    """Raise :class:`ZnodeRowError` naming the first ``(path, (data, Stat))`` entry a snapshot
    cannot hold.

    For hand-made tables (a walker's rows come from ZooKeeper and are valid by construction):
    Arrow would reject them without naming the znode, or take a ``str`` for ``bytes``.
    """
    for path, entry in entries:
        if type(path) is not str or not path.startswith("/"):
            raise ZnodeRowError(repr(path), "the path must be an absolute znode path (str)")
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ZnodeRowError(path, f"must map to (data, Stat), not {type(entry).__name__}")
        data, stat = entry
        if data is not None and not isinstance(data, bytes):
            raise ZnodeRowError(path, f"data must be bytes or None, not {type(data).__name__}")
        if not isinstance(stat, tuple) or len(stat) != 11:
            raise ZnodeRowError(path, "the Stat must be a tuple of 11 ints in ZooKeeper's wire order")
        for wire, value in enumerate(stat):
            limit = 2**31 if wire in _INT32_STAT else 2**63
            if type(value) is not int or not -limit <= value < limit:
                raise ZnodeRowError(
                    path,
                    f"Stat field {wire} must be a {'32' if limit == 2**31 else '64'}-bit int, not {value!r}",
                )


# ------------------------------------------------------------------------------ spill
def _next_in_order(last_path: str | None, rows: list[Row]) -> str:
    """The last path of ``rows`` (sorted by path), which must all come after ``last_path``."""
    if last_path is not None and rows[0][0] <= last_path:
        raise AssertionError(f"snapshot rows out of order: {rows[0][0]!r} after {last_path!r}")
    return rows[-1][0]


class _RowSpill:
    """Rows, arriving sorted by path, written ``flush_rows`` at a time to a temporary Arrow IPC
    file (lz4-compressed record batches).

    Also accumulates what the walk reports about them (count, data bytes, highest zxid) and the
    first and last path of every record batch (the store's index for lookups).
    """

    def __init__(self, directory: str | None, flush_rows: int) -> None:
        import pyarrow as pa
        import pyarrow.ipc

        self.schema = znode_arrow_schema()
        self.flush_rows = flush_rows
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix="kafka-zk-snapshot-", dir=directory)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)
        self.path = os.path.join(self.directory, "znodes.arrow")
        self._sink = pa.OSFile(self.path, "wb")
        # lz4: a third of the disk for a few ms per batch (paths and JSON compress well)
        codec = "lz4" if pa.Codec.is_available("lz4") else None
        options = pyarrow.ipc.IpcWriteOptions(compression=codec)
        self._writer = pyarrow.ipc.new_file(self._sink, self.schema, options=options)
        self._paths: list[str] = []
        self._datas: list[bytes | None] = []
        self._stats: list[StatTuple] = []
        self.firsts: list[str] = []
        self.lasts: list[str] = []
        self.count = 0
        self.data_bytes = 0
        self.max_zxid = 0
        self.last_path: str | None = None

    def add(self, rows: list[Row]) -> None:
        """Take rows sorted by path, all after the ones taken before."""
        if not rows:
            return
        self.last_path = _next_in_order(self.last_path, rows)
        self._paths.extend(map(_path_of, rows))
        self._datas.extend(map(_data_of, rows))
        self._stats.extend(map(_stat_of, rows))
        while len(self._paths) >= self.flush_rows:
            self._flush(self.flush_rows)

    def _flush(self, n: int) -> None:
        paths, self._paths = self._paths[:n], self._paths[n:]
        datas, self._datas = self._datas[:n], self._datas[n:]
        stats, self._stats = self._stats[:n], self._stats[n:]
        batch, by_wire = _arrow_batch(paths, datas, stats, self.schema)
        self.data_bytes += sum(map(len, filter(None, datas)))
        self.max_zxid = max(self.max_zxid, max(by_wire[0]), max(by_wire[_MZXID]), max(by_wire[_PZXID]))
        self._write(batch, paths[0], paths[-1])

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Take a record batch sorted by path, after every row taken before (the re-read merge)."""
        import pyarrow.compute as pc

        if not batch.num_rows:
            return
        if self._paths:
            self._flush(len(self._paths))
        paths = batch.column(0)
        first, last = paths[0].as_py(), paths[-1].as_py()
        if self.last_path is not None and first <= self.last_path:
            raise AssertionError(f"snapshot rows out of order: {first!r} after {self.last_path!r}")
        self.last_path = last
        self.data_bytes += pc.sum(pc.binary_length(batch.column(1))).as_py() or 0
        for name in ("czxid", "mzxid", "pzxid"):
            self.max_zxid = max(self.max_zxid, pc.max(batch.column(name)).as_py())
        self._write(batch, first, last)

    def _write(self, batch: pa.RecordBatch, first: str, last: str) -> None:
        self._writer.write_batch(batch)
        self.firsts.append(first)
        self.lasts.append(last)
        self.count += batch.num_rows

    def close(self) -> ZnodeStore:
        """Write what is left; the store takes the file over (and its removal)."""
        if self._paths:
            self._flush(len(self._paths))
        self._writer.close()
        self._sink.close()
        self._cleanup.detach()
        return ZnodeStore(
            self.path,
            self.directory,
            firsts=self.firsts,
            lasts=self.lasts,
            count=self.count,
            data_bytes=self.data_bytes,
            max_zxid=self.max_zxid,
        )

    def discard(self) -> None:
        """Drop the file (a failed walk)."""
        try:
            self._writer.close()
            self._sink.close()
        except Exception:  # noqa: S110 - the directory goes either way
            pass
        self._cleanup()


class ZnodeStore(Mapping[str, tuple[bytes | None, StatTuple]]):
    """A walk's rows, sorted by path, in a temporary Arrow IPC file (one record batch at a time).

    A read-only Mapping path -> (data, wire-order Stat) like the dict it replaces: iterating gives
    the paths in order, a lookup reads one record batch. The file is removed by :meth:`close`, or
    when the store is garbage-collected.
    """

    def __init__(
        self,
        path: str,
        directory: str,
        *,
        firsts: list[str],
        lasts: list[str],
        count: int,
        data_bytes: int,
        max_zxid: int,
    ) -> None:
        """:param path: the IPC file. :param directory: removed with it (the store owns it).
        :param firsts: first path of each record batch. :param lasts: last path of each.
        :param count: rows. :param data_bytes: total data length. :param max_zxid: highest
        czxid/mzxid/pzxid."""
        self.path = path
        self.directory = directory
        self.firsts = firsts
        self.lasts = lasts
        self.count = count
        self.data_bytes = data_bytes
        self.max_zxid = max_zxid
        self._cleanup = weakref.finalize(self, shutil.rmtree, directory, True)
        self._cached: tuple[int, list[list[Any]]] | None = None

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        for batch in self.batches():
            yield from batch.column(0).to_pylist()

    def __getitem__(self, path: str) -> tuple[bytes | None, StatTuple]:
        if not isinstance(path, str):
            raise KeyError(path)
        index = bisect_right(self.firsts, path) - 1
        if index < 0 or path > self.lasts[index]:
            raise KeyError(path)
        columns = self._columns(index)
        paths = columns[0]
        row = bisect_left(paths, path)
        if row == len(paths) or paths[row] != path:
            raise KeyError(path)
        return columns[1][row], tuple(columns[column][row] for column in _COLUMN_OF_WIRE)

    def close(self) -> None:
        """Remove the file now."""
        self._cached = None
        self._cleanup()

    def _columns(self, index: int) -> list[list[Any]]:
        """Record batch ``index`` as Python column lists; the last one read stays cached, so
        lookups in path order (``items()``, a writer's) convert each batch once."""
        if self._cached is None or self._cached[0] != index:
            self._cached = None
            [batch] = self.batches([index])
            self._cached = (index, [column.to_pylist() for column in batch.columns])
        return self._cached[1]

    def batches(self, indexes: Iterable[int] | None = None) -> Iterator[pa.RecordBatch]:
        """The record batches in order (or those at ``indexes``), read one at a time.

        :param indexes: batch numbers to read (default: all)
        """
        import pyarrow as pa
        import pyarrow.ipc

        if not self.firsts:
            return
        with pa.OSFile(self.path, "rb") as source:
            reader = pyarrow.ipc.open_file(source)
            for index in range(reader.num_record_batches) if indexes is None else indexes:
                yield reader.get_batch(index)

    def record_batches(self, rows: int = FLUSH_ROWS) -> Iterator[pa.Table]:
        """The rows as tables of exactly ``rows`` rows (the last one fewer; at least one table).

        Each table is one contiguous chunk: the Parquet writer's pages then do not depend on how
        the rows were spilled, so a tree gives the same file bytes (and sha256) as the in-memory
        write, whatever ``flush_rows`` or a re-read merge did to the batches.

        :param rows: rows per table
        """
        import pyarrow as pa

        pending: list[pa.RecordBatch] = []
        held = 0
        produced = False
        for batch in self.batches():
            while batch.num_rows:
                take = min(rows - held, batch.num_rows)
                pending.append(batch.slice(0, take))
                held += take
                batch = batch.slice(take)
                if held == rows:
                    yield pa.Table.from_batches(pending, schema=batch.schema).combine_chunks()
                    pending, held, produced = [], 0, True
        if pending or not produced:
            yield pa.Table.from_batches(pending, schema=znode_arrow_schema()).combine_chunks()

    def _batches_over(self, low: str, high: str | None) -> list[int]:
        """Batch numbers that may hold paths in ``[low, high)`` (``high`` None: no upper end)."""
        start = max(bisect_right(self.firsts, low) - 1, 0)
        stop = len(self.firsts) if high is None else bisect_left(self.firsts, high)
        return [i for i in range(start, stop) if self.lasts[i] >= low]

    def present(self, paths: Iterable[str]) -> set[str]:
        """Which of ``paths`` have a row (one read per record batch they fall in).

        :param paths: paths to look up
        """
        import pyarrow.compute as pc

        wanted: dict[int, list[str]] = {}
        for path in paths:
            index = bisect_right(self.firsts, path) - 1
            if index >= 0 and path <= self.lasts[index]:
                wanted.setdefault(index, []).append(path)
        found: set[str] = set()
        for index, batch in zip(sorted(wanted), self.batches(sorted(wanted)), strict=True):
            candidates = _string_array(wanted[index])
            found.update(pc.filter(candidates, pc.is_in(candidates, value_set=batch.column(0))).to_pylist())
        return found

    def children(self, path: str) -> set[str]:
        """Names of ``path``'s children that have rows (read from the batches of its subtree).

        :param path: the parent znode
        """
        import pyarrow.compute as pc

        prefix = "/" if path == "/" else path + "/"
        high = None if path == "/" else path + "0"  # "0" follows "/": the end of the subtree
        names: set[str] = set()
        for batch in self.batches(self._batches_over(prefix, high)):
            paths = batch.column(0)
            under = pc.filter(paths, pc.starts_with(paths, prefix))
            if not len(under):
                continue
            rest = pc.utf8_slice_codeunits(under, len(prefix))  # code points, as len() counts
            first = pc.replace_substring_regex(rest, pattern="(?s)/.*", replacement="")
            names.update(pc.unique(first).to_pylist())
        names.discard("")
        return names

    def merged(
        self,
        overlay: Mapping[str, tuple[bytes | None, StatTuple]],
        dropped: Iterable[str],
        spill_dir: str | None,
        flush_rows: int,
    ) -> ZnodeStore:
        """A new store: these rows minus the ``dropped`` subtrees, with ``overlay`` rows replacing
        or added (the re-read after a fuzzy walk); this store is closed.

        :param overlay: path -> (data, Stat) read again or found new
        :param dropped: znodes deleted during the walk (each with its whole subtree)
        :param spill_dir: where the new file goes
        :param flush_rows: rows per record batch of the new file (for the overlay's rows)
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        gone = sorted(dropped)
        everything = "/" in gone
        extra = sorted(overlay)
        out = _RowSpill(spill_dir, flush_rows)
        try:
            taken = 0
            for index, batch in enumerate(self.batches()):
                low, high = self.firsts[index], self.lasts[index]
                # overlay rows up to the next batch's first path belong with this batch
                upto = (
                    len(extra)
                    if index + 1 == len(self.firsts)
                    else bisect_left(extra, self.firsts[index + 1])
                )
                adding, taken = extra[taken:upto], upto
                paths = batch.column(0)
                replaced = [p for p in adding if low <= p <= high]
                keep = None
                if everything:
                    batch = batch.slice(0, 0)
                elif replaced or gone:
                    # a dropped znode's subtree spans [root, root + "0"): "0" follows "/"
                    roots = [p for p in gone if p <= high and p + "0" > low]
                    mask = pc.is_in(paths, value_set=_string_array(roots + replaced))
                    for root in roots:
                        mask = pc.or_(mask, pc.starts_with(paths, root + "/"))
                    keep = pc.invert(mask)
                if keep is not None:
                    batch = batch.filter(keep)
                if adding:
                    datas = [overlay[p][0] for p in adding]
                    extra_batch, _ = _arrow_batch(
                        adding, datas, [overlay[p][1] for p in adding], batch.schema
                    )
                    table = pa.Table.from_batches([batch, extra_batch])
                    table = table.take(pc.sort_indices(table.column(0)))
                    for part in table.combine_chunks().to_batches():
                        out.add_batch(part)
                else:
                    out.add_batch(batch)
            if not self.firsts and extra:
                out.add([(p, *overlay[p]) for p in extra])  # nothing walked, all of it new
            merged = out.close()
        except BaseException:
            out.discard()
            raise
        self.close()
        return merged


class _MemorySpill:
    """:class:`_RowSpill`'s stand-in for small walks (a planning read's few thousand znodes): the
    rows stay in a dict, so the walk needs no pyarrow (and no temporary file)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[bytes | None, StatTuple]] = {}
        self.last_path: str | None = None

    def add(self, rows: list[Row]) -> None:
        if not rows:
            return
        self.last_path = _next_in_order(self.last_path, rows)
        self.rows.update((path, (data, stat)) for path, data, stat in rows)

    def close(self) -> MemoryStore:
        return MemoryStore(self.rows)

    def discard(self) -> None:
        self.rows = {}


class MemoryStore(dict):  # type: ignore[type-arg]
    """A walk's rows in memory (path -> (data, wire-order Stat), in path order): the
    :class:`ZnodeStore` interface the walker's re-read needs, for ``in_memory`` walks."""

    @property
    def count(self) -> int:
        return len(self)

    @property
    def data_bytes(self) -> int:
        return sum(len(data) for data, _ in self.values() if data)

    @property
    def max_zxid(self) -> int:
        return max((max(s[_CZXID], s[_MZXID], s[_PZXID]) for _, s in self.values()), default=0)

    def present(self, paths: Iterable[str]) -> set[str]:
        return {p for p in paths if p in self}

    def children(self, path: str) -> set[str]:
        prefix = "/" if path == "/" else path + "/"
        return {p[len(prefix) :].split("/", 1)[0] for p in self if p.startswith(prefix) and p != prefix}

    def merged(
        self, overlay: Mapping[str, tuple[bytes | None, StatTuple]], dropped: Iterable[str], *_: Any
    ) -> MemoryStore:
        """A new store: these rows minus the ``dropped`` subtrees, with ``overlay`` added or replacing."""
        gone = set(dropped)
        rows = {p: v for p, v in self.items() if not _in_or_under(p, gone)}
        rows.update(overlay)
        return MemoryStore(sorted(rows.items()))

    def close(self) -> None:
        """Nothing to remove."""


def normalise_subtrees(paths: Iterable[str], what: str) -> tuple[str, ...]:
    """Absolute, normalised, de-duplicated paths (a path under another one is dropped)."""
    out: list[str] = []
    for raw in paths:
        if not isinstance(raw, str) or not raw.startswith("/"):
            raise ValueError(f"snapshot {what} paths must be absolute znode paths, not {raw!r}")
        path = posixpath.normpath(raw)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        if ".." in path.split("/"):
            raise ValueError(f"snapshot {what} path {raw!r} must not contain '..'")
        out.append(path)
    kept = set(out)
    if "/" in kept:
        return ("/",)
    # a lookup per ancestor, not per other path: a planning read names thousands of znodes
    return tuple(sorted(p for p in kept if not _in_or_under(posixpath.dirname(p), kept)))


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def _in_or_under(path: str, roots: set[str]) -> bool:
    """Whether ``path`` or one of its ancestors is in ``roots`` (a lookup per level, not per root)."""
    if not roots:
        return False
    while True:
        if path in roots:
            return True
        if path == "/":
            return False
        path = posixpath.dirname(path)


def guess_children(path: str, num_children: int) -> list[str] | None:
    """The children Kafka's layout puts under ``path`` (relative to the cluster's chroot), when
    its Stat says it has ``num_children``: ``/brokers/topics/<t>`` has ``partitions``, its
    ``partitions`` znode has ``0`` .. ``n-1`` (``TopicPartitionsZNode``/``TopicPartitionZNode``,
    ``ZkData.scala``), each of those has ``state``. None: no guess.

    Nearly every znode with children in a Kafka tree is one of these: reading the guessed children
    at once saves a listing per znode (a third of the requests of a walk without multiRead). A
    guess is only taken when it proves the listing (see :class:`ZnodeTreeWalker`); a wrong one
    costs the listing it tried to save.
    """
    if not path.startswith("/brokers/topics/"):
        return None
    parts = path.split("/")  # "", "brokers", "topics", topic, ["partitions", [partition]]
    depth = len(parts)
    if depth == 4:
        return ["partitions"] if num_children == 1 else None
    if parts[4] != "partitions":
        return None
    if depth == 5:
        return [str(i) for i in range(num_children)]
    if depth == 6:
        return ["state"] if num_children == 1 else None
    return None


class ZnodeTreeWalker:
    """One snapshot walk over a started kazoo client (chrooted at the Kafka cluster).

    ``method``: ``"auto"`` (multiRead, falling back to pipelined reads when the server lacks it),
    ``"multi-read"``, ``"pipelined"`` (single reads pipelined on ``connections`` sessions of the
    walker's own, :mod:`._zk_wire`, opened with the client's hosts, TLS and credentials; kazoo's
    connection when none can be opened) or ``"pipelined-kazoo"`` (single reads through kazoo's
    async API). ``batch_ops`` reads per request (per batch when pipelined), ``window`` requests
    (batches) in flight. ``restart_client`` is called when kazoo has given up reconnecting (its retry policy is
    exhausted) and must start a new session on the same client. ``spill_dir`` is where the rows
    go while walking (a temporary directory under it; default: the system's temporary directory),
    ``flush_rows`` rows at a time (default :data:`FLUSH_ROWS`); ``in_memory``: keep the rows in a
    dict instead (small walks: no pyarrow, no file). ``connections``: the walker's own sessions for
    pipelined reads. ``guess``: answer listings Kafka's layout predicts by reading the predicted
    children (:func:`guess_children`); each guess is proven before it stands for a listing: the
    parent's ``pzxid`` and every guessed child's ``czxid`` are no newer than ``start_zxid`` and
    all of them exist, so the parent had exactly them as of ``start_zxid``.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        include: Iterable[str] = DEFAULT_INCLUDE,
        exclude: Iterable[str] = DEFAULT_EXCLUDE,
        method: str = "auto",
        batch_ops: int = 500,
        window: int = 8,
        reconnect_timeout: float = 60.0,
        restart_client: Callable[[], None] | None = None,
        progress: Callable[[WalkProgress], None] | None = None,
        progress_every: float = 10.0,
        spill_dir: str | None = None,
        flush_rows: int | None = None,
        connections: int = PIPELINED_SESSIONS,
        guess: bool = True,
        in_memory: bool = False,
    ) -> None:
        if method not in _METHODS:
            raise ValueError(f"snapshot method must be one of {', '.join(_METHODS)}, not {method!r}")
        if batch_ops < 1 or window < 1 or connections < 1:
            raise ValueError("snapshot batch_ops, window and connections must be >= 1")
        flush_rows = FLUSH_ROWS if flush_rows is None else flush_rows
        if flush_rows < 1:
            raise ValueError("snapshot flush_rows must be >= 1")
        self.client = client
        self.include = normalise_subtrees(include, "include")
        self.exclude = normalise_subtrees(exclude, "exclude")
        if not self.include:
            raise ValueError("snapshot include must name at least one subtree")
        self.method = "multi-read" if method == "auto" else method
        self.connections = connections
        self.guess = guess
        self.in_memory = in_memory
        self._wire: WirePool | None = None
        self._may_fall_back = method == "auto"
        self._multi_read_ok = False
        self.batch_ops = batch_ops
        self.window = window
        self.reconnect_timeout = reconnect_timeout
        self.restart_client = restart_client
        self.progress = progress
        self.progress_every = progress_every
        self.spill_dir = spill_dir
        self.flush_rows = flush_rows
        self._roots = set(self.include)
        self._exclude_set = set(self.exclude)
        # reads to send: a heap of (next path, group number, [kind, sorted paths, next index])
        self._pending: list[tuple[str, int, list[Any]]] = []
        self._groups = itertools.count()
        self._new_data: list[str] = []
        self._new_children: list[str] = []
        # in flight: (ops, handle, smallest path of the ops, children its listings will add)
        self._in_flight: deque[tuple[list[tuple[int, str]], Any, str, int]] = deque()
        self._queued_data = 0  # data reads in the heap
        self._expecting = 0  # children the listings in flight will add
        # main walk: rows read but not yet passed on (a smaller path may still come)
        self._waiting: list[Row] = []
        self._emit_at = _EMIT_EVERY
        self._held_peak = 0  # most rows waiting at once (what "flat" means, checked by the tests)
        self._listing: dict[str, int] = {}  # path -> numChildren, while its listing is pending
        # listings that may be answered by reading the guessed children (guess_children) instead
        self._guesses: dict[str, list[str]] = {}
        # guesses in flight: parent -> [reads left, all found and as old as start_zxid, found rows]
        self._speculating: dict[str, list[Any]] = {}
        self.guessed = 0  # listings answered by guessed reads
        self._deleted_waiting: set[str] = set()
        self._spill: _RowSpill | _MemorySpill | None = None
        self._start_zxid = 0
        self._changed: set[str] = set()
        self._mismatch: set[str] = set()
        self._gone: set[str] = set()
        self._missing_roots: set[str] = set()
        # re-read after a fuzzy walk: what it changes, merged into the store at the end
        self._store: ZnodeStore | MemoryStore | None = None
        self._rereading: set[str] | None = None
        self._overlay: dict[str, tuple[bytes | None, StatTuple]] = {}
        self._dropped: set[str] = set()
        self._read = 0
        self._requests = 0
        self._reconnects = 0
        self._session_expiries = 0
        self._session_id: int | None = None
        self._t0 = 0.0
        self._last_progress = 0.0

    # ------------------------------------------------------------------ public
    def run(self) -> SnapshotWalk:
        """Walk, check, re-read what changed; raises SnapshotWalkError rather than return less."""
        started_at = datetime.now(UTC)
        self._t0 = time.monotonic()
        self._session_id = self._current_session()
        start_zxid = self._start_zxid = self._zxid_now()
        try:
            return self._run(started_at, start_zxid)
        finally:
            if self._wire is not None:
                self._wire.close()
                self._wire = None

    def _run(self, started_at: datetime, start_zxid: int) -> SnapshotWalk:
        if self.method == "pipelined":
            self._open_wire()
        self._spill = _MemorySpill() if self.in_memory else _RowSpill(self.spill_dir, self.flush_rows)
        try:
            self._push(GET_DATA, [r for r in self.include if not self._excluded(r)])
            self._pump()
            self._emit(None)
            store = self._store = self._spill.close()
        except BaseException:
            self._spill.discard()
            raise
        self._spill = None
        consistent = not self._changed and not self._gone and not self._mismatch
        reread: set[str] = set()
        try:
            if not consistent:
                parents_of_gone = {posixpath.dirname(p) for p in self._gone}
                candidates = (self._changed | self._mismatch | parents_of_gone) - self._gone
                reread = store.present(p for p in candidates if not self._under_gone(p))
                log.info("%d znodes changed during the walk; re-reading them", len(reread))
                self._rereading = reread
                self._push(GET_DATA, list(reread))
                self._pump()
                if self._overlay or self._dropped:
                    store = self._store = store.merged(
                        self._overlay, self._dropped, self.spill_dir, self.flush_rows
                    )
                self._overlay = {}
            end_zxid = self._zxid_now()
        except BaseException:
            store.close()
            raise
        return SnapshotWalk(
            table=store,
            chroot=self.client.chroot or "",
            include=self.include,
            exclude=self.exclude,
            start_zxid=start_zxid,
            end_zxid=end_zxid,
            consistent=consistent,
            consistent_zxid=start_zxid if consistent else None,
            max_zxid_seen=store.max_zxid,
            gone=tuple(sorted(self._gone)),
            reread=tuple(sorted(reread)),
            missing_roots=tuple(sorted(self._missing_roots)),
            method=self.method,
            requests=self._requests,
            reconnects=self._reconnects,
            session_expiries=self._session_expiries,
            started_at=started_at,
            duration_s=time.monotonic() - self._t0,
            data_bytes=store.data_bytes,
            rows_held_peak=self._held_peak,
        )

    # ------------------------------------------------------------------ queue
    def _push(self, kind: int, paths: list[str]) -> None:
        """Queue reads of ``paths`` as one sorted group (the heap orders groups by next path)."""
        if paths:
            paths.sort()
            if kind == GET_DATA:
                self._queued_data += len(paths)
            heapq.heappush(self._pending, (paths[0], next(self._groups), [kind, paths, 0]))

    def _push_new(self) -> None:
        """Queue what the replies just handled found."""
        data, children = self._new_data, self._new_children
        self._new_data, self._new_children = [], []
        self._push(GET_DATA, data)
        self._push(GET_CHILDREN, children)

    def _queued(self) -> int:
        return sum(len(paths) - index for _, _, (_, paths, index) in self._pending)

    # ------------------------------------------------------------------ emission
    def _maybe_emit(self) -> None:
        held = len(self._waiting)
        if held > self._held_peak:
            self._held_peak = held
        if held >= self._emit_at:
            self._emit(self._lowest_pending())

    def _lowest_pending(self) -> str | None:
        """The smallest path a read still to come can produce a row at (None: nothing pending)."""
        low = self._pending[0][0] if self._pending else None
        for _, _, smallest, _ in self._in_flight:
            if low is None or smallest < low:
                low = smallest
        if self._speculating:  # a parent whose guess may still fail waits for its listing
            parent = min(self._speculating)
            if low is None or parent < low:
                low = parent
        return low

    def _emit(self, bound: str | None) -> None:
        """Pass every waiting row with a path below ``bound`` (None: all) to the spill, in order.

        Only called when every read is queued or in flight: a reply being handled, or a read
        failed and not yet queued again, would not count towards ``bound``.
        """
        waiting = self._waiting
        self._held_peak = max(self._held_peak, len(waiting))
        waiting.sort(key=_path_of)
        ready = len(waiting) if bound is None else bisect_left(waiting, bound, key=_path_of)
        out = waiting[:ready]
        self._waiting = waiting[ready:]
        if self._deleted_waiting:
            out = [row for row in out if row[0] not in self._deleted_waiting]
        assert self._spill is not None
        self._spill.add(out)
        self._emit_at = max(_EMIT_EVERY, 2 * len(self._waiting))

    # ------------------------------------------------------------------ pipeline
    def _pump(self) -> None:
        """Send reads until every queue is empty and every reply is handled."""
        while self._pending or self._in_flight:
            if self._rereading is None:
                self._maybe_emit()
            while self._pending and len(self._in_flight) < self.window and self._submit():
                pass
            ops, handle, _, expected = self._in_flight.popleft()
            self._expecting -= expected
            try:
                answered, failed = self._collect(ops, handle, self._reply_timeout())
            except (UnimplementedError, MarshallingError) as exc:
                self._fall_back_or_raise(ops, exc)
                continue
            self._handle(answered)
            if failed:
                self._requeue(failed)
                if self.method == "multi-read" and not self._multi_read_ok and self._reconnects >= 2:
                    # a server that closes the connection on an unknown opcode instead of answering
                    self._fall_back_or_raise([], ConnectionLoss("connection dropped on every multiRead"))
                self._recover()
                continue
            if self.method == "multi-read":
                self._multi_read_ok = True
            self._report_progress()

    def _fall_back_or_raise(self, ops: Sequence[tuple[int, str]], exc: Exception) -> None:
        if not (self._may_fall_back and self.method == "multi-read" and not self._multi_read_ok):
            raise SnapshotWalkError(f"ZooKeeper refused the snapshot's read requests: {exc!r}") from exc
        log.warning("ZooKeeper does not support multiRead (3.6+): falling back to pipelined reads")
        self.method = "pipelined"
        self._may_fall_back = False
        self._requeue(ops)
        self._open_wire()

    def _open_wire(self) -> None:
        """Open the walker's own sessions for pipelined reads; kazoo's connection if none opens."""
        from ._zk_wire import WirePool, WireUnavailableError

        try:
            self._wire = WirePool(
                wire_options(self.client),
                connections=self.connections,
                last_zxid=max(self._start_zxid, int(self.client.last_zxid or 0)),
            )
        except WireUnavailableError as exc:
            log.warning("Pipelined reads go through kazoo's connection (slower): %s", exc)
            self.method = "pipelined-kazoo"

    def _submit(self) -> bool:
        """Send the next ``batch_ops`` reads; False if none could go (the frontier is full).

        Reads go in path order, group by group (the group with the smallest next path first), so
        the walk moves through the tree as the file is sorted and rows wait only for the reads in
        flight ahead of them. Listings wait while the frontier is full (:data:`FRONTIER_ZNODES`); data reads never
        do, so the frontier drains and a blocked listing always goes eventually.
        """
        ops: list[tuple[int, str]] = []
        pending, listing, guesses = self._pending, self._listing, self._guesses
        held: list[tuple[str, int, list[Any]]] = []
        expected = 0
        smallest: str | None = None
        while len(ops) < self.batch_ops and pending:
            head, number, group = heapq.heappop(pending)
            kind, paths, start = group
            stop = limit = min(len(paths), start + self.batch_ops - len(ops))
            if kind == GET_DATA:
                self._queued_data -= stop - start
                ops.extend([(kind, p) for p in paths[start:stop]])
            else:
                stop = start
                frontier = self._queued_data + self._expecting + expected
                while stop < limit:
                    path = paths[stop]
                    children = listing.get(path, 1)
                    busy = ops or self._in_flight or stop > start  # else this read must go
                    if frontier and busy and frontier + children > FRONTIER_ZNODES:
                        break
                    frontier += children
                    expected += children
                    stop += 1
                    names = guesses.pop(path, None) if guesses else None
                    if names is None:
                        ops.append((GET_CHILDREN, path))
                    else:
                        prefix = "/" if path == "/" else path + "/"
                        ops.extend([(_GUESS, prefix + name) for name in names])
                        self._speculating[path] = [len(names), True, []]
                    if len(ops) >= self.batch_ops:
                        limit = stop  # the batch is full: the rest goes back to the heap
                        break
            if stop > start and (smallest is None or head < smallest):
                smallest = head
            if stop < len(paths):
                group[2] = stop
                entry = (paths[stop], number, group)
                if stop < limit:  # a listing held back by the frontier
                    held.append(entry)
                else:
                    heapq.heappush(pending, entry)
        for entry in held:
            heapq.heappush(pending, entry)
        if smallest is None:
            return False
        if self.method == "multi-read":
            chroot = self.client.chroot or ""
            root = chroot or "/"
            wire = [(GET_DATA if k == _GUESS else k, chroot + p if p != "/" else root) for k, p in ops]
            handle: Any = submit_multi_read(self.client, wire)
            self._requests += 1
        elif self._wire is not None:
            handle = self._wire.submit([GET_DATA if k == _GUESS else k for k, _ in ops], [p for _, p in ops])
            self._requests += len(ops)
        else:
            handle = [
                self.client.get_children_async(p) if k == GET_CHILDREN else self.client.get_async(p)
                for k, p in ops
            ]
            self._requests += len(ops)
        self._in_flight.append((ops, handle, smallest, expected))
        self._expecting += expected
        return True

    def _reply_timeout(self) -> float:
        return max(session_timeout_s(self.client), 10.0) * 2

    def _collect(
        self, ops: list[tuple[int, str]], handle: Any, timeout: float
    ) -> tuple[list[tuple[tuple[int, str], Any]], list[tuple[int, str]]]:
        """Replies of one in-flight entry: (answered (op, result) pairs, ops to send again)."""
        if not isinstance(handle, list):
            try:
                return list(zip(ops, handle.get(timeout=timeout), strict=True)), []
            except _DISCONNECTED:
                return [], list(ops)
            except (UnimplementedError, MarshallingError):
                raise
            except Exception as exc:
                raise self._failed(ops, exc) from exc
        answered: list[tuple[tuple[int, str], Any]] = []
        failed: list[tuple[int, str]] = []
        for op, item in zip(ops, handle, strict=True):  # wait for all: none left running when requeued
            try:
                answered.append((op, item.get(timeout=timeout)))
            except (NoNodeError, NoAuthError) as exc:
                answered.append((op, exc))
            except _DISCONNECTED:
                failed.append(op)
            except Exception as exc:
                raise self._failed([op], exc) from exc
        return answered, failed

    @staticmethod
    def _failed(ops: Sequence[tuple[int, str]], exc: Exception) -> SnapshotWalkError:
        what = "listing" if ops[0][0] == GET_CHILDREN else "reading"
        more = f" and {len(ops) - 1} more znodes" if len(ops) > 1 else ""
        return SnapshotWalkError(f"{what} znode {ops[0][1]}{more} failed: {exc!r}")

    def _handle(self, answered: list[tuple[tuple[int, str], Any]]) -> None:
        rereading = self._rereading is not None
        for (kind, path), result in answered:
            if kind == _GUESS:
                self._on_guess(path, result)
            elif kind == GET_DATA:
                if rereading:
                    self._on_data_again(path, result)
                else:
                    self._on_data(path, result)
            else:
                self._on_children(path, result)
        self._push_new()

    def _requeue(self, ops: Sequence[tuple[int, str]]) -> None:
        self._push(GET_DATA, [p for k, p in ops if k == GET_DATA])
        self._push(GET_CHILDREN, [p for k, p in ops if k == GET_CHILDREN])
        for parent in {posixpath.dirname(p) for k, p in ops if k == _GUESS}:
            if self._speculating.pop(parent, None) is not None:
                self._push(GET_CHILDREN, [parent])  # give the guess up: list it

    # ------------------------------------------------------------------ replies
    def _on_data(self, path: str, result: Any) -> None:
        """A row of the main walk: it waits (sorted out later) until no smaller path can come."""
        if type(result) is not tuple:
            self._on_data_error(path, result)
            return
        data, stat = result
        self._read += 1
        self._waiting.append((path, data, stat))
        if stat[_MZXID] > self._start_zxid or stat[_PZXID] > self._start_zxid:
            self._changed.add(path)
        if stat[_NUM_CHILDREN] > 0:
            self._listing[path] = stat[_NUM_CHILDREN]
            self._new_children.append(path)
            if self.guess and stat[_PZXID] <= self._start_zxid:
                names = guess_children(path, stat[_NUM_CHILDREN])
                if names is not None:
                    prefix = path + "/"
                    excluded = self._exclude_set
                    if not excluded or not any(prefix + name in excluded for name in names):
                        self._guesses[path] = names

    def _on_guess(self, path: str, result: Any) -> None:
        """A guessed child's read. When every guessed child of the parent exists and was created
        no later than ``start_zxid``, they are its whole child list as of ``start_zxid`` (the parent
        had exactly that many children then, and each of them existed then), and stand for the
        listing; otherwise the parent is listed after all."""
        parent = posixpath.dirname(path)
        entry = self._speculating.get(parent)
        if entry is None:  # given up (a read of it failed with the connection)
            return
        entry[0] -= 1
        if type(result) is tuple and result[1][_CZXID] <= self._start_zxid:
            entry[2].append((path, result))
        else:  # absent (NoNode), newer, or not readable: the listing says what is there
            entry[1] = False
        if entry[0]:
            return
        del self._speculating[parent]
        if entry[1]:
            self.guessed += 1
            self._listing.pop(parent, None)
            for child, found in entry[2]:
                self._on_data(child, found)
        else:
            self._new_children.append(parent)  # listed as any other (no second guess)

    def _on_data_again(self, path: str, result: Any) -> None:
        """A row read again after a fuzzy walk, or a znode created during it: kept in the overlay."""
        if self._under_dropped(path):
            return
        if type(result) is not tuple:
            self._on_data_error(path, result)
            return
        data, stat = result
        self._read += 1
        self._overlay[path] = (data, stat)
        assert self._rereading is not None
        if stat[_NUM_CHILDREN] > 0:
            self._new_children.append(path)
        elif path in self._rereading:
            self._on_children(path, [])  # had children when walked: all gone now

    def _on_data_error(self, path: str, result: Any) -> None:
        if isinstance(result, NoNodeError):
            if path in self._roots and self._rereading is None:
                self._missing_roots.add(path)  # absent from the start, not deleted during the walk
            else:
                self._gone.add(path)
                self._drop(path)
            return
        if isinstance(result, NoAuthError):
            raise SnapshotAccessError(path, "not readable (NoAuth)")
        raise SnapshotWalkError(f"znode {path}: read failed with {result!r}")

    def _on_children(self, path: str, result: Any) -> None:
        if type(result) is not list:
            if isinstance(result, NoNodeError):
                self._gone.add(path)
                self._drop(path)
                return
            if isinstance(result, NoAuthError):
                raise SnapshotAccessError(path, "children not listable (NoAuth)")
            raise SnapshotWalkError(f"znode {path}: listing children failed with {result!r}")
        prefix = "/" if path == "/" else path + "/"
        excluded, need = self._exclude_set, self._new_data
        if self._rereading is None:
            num_children = self._listing.pop(path, None)
            if num_children is None:  # deleted and dropped meanwhile
                return
            if len(result) != num_children:
                self._mismatch.add(path)  # a child came or went between the two reads
            # a child of a walked znode can only be excluded by being an excluded root itself
            need.extend([prefix + child for child in result if prefix + child not in excluded])
            return
        row = self._overlay.get(path)
        if row is None or self._under_dropped(path):  # deleted and dropped meanwhile
            return
        if len(result) != row[1][_NUM_CHILDREN]:
            self._mismatch.add(path)
        old: set[str] = set()
        if path in self._rereading:
            assert self._store is not None
            old = self._store.children(path)
        new = set(result)
        for child in sorted(old - new):
            self._gone.add(prefix + child)
            self._drop(prefix + child)
        overlay = self._overlay
        for child in result:
            child_path = prefix + child
            if child not in old and child_path not in excluded and child_path not in overlay:
                need.append(child_path)

    def _drop(self, path: str) -> None:
        """Remove a deleted znode and everything found under it."""
        if self._rereading is None:
            # only a listing can find a read znode deleted: its row still waits for that listing
            self._listing.pop(path, None)
            self._deleted_waiting.add(path)
            return
        self._dropped.add(path)
        prefix = "/" if path == "/" else path + "/"
        for found in [p for p in self._overlay if p == path or p.startswith(prefix)]:
            del self._overlay[found]

    def _under_dropped(self, path: str) -> bool:
        return _in_or_under(path, self._dropped)

    def _under_gone(self, path: str) -> bool:
        return _in_or_under(path, self._gone)

    def _excluded(self, path: str) -> bool:
        return any(_under(path, e) for e in self.exclude)

    # ------------------------------------------------------------------ sessions
    def _current_session(self) -> int | None:
        client_id = self.client.client_id
        return client_id[0] if client_id else None

    def _zxid_now(self) -> int:
        """Sync, then the session's last zxid: every later read sees at least this state."""
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                self.client.sync("/")
                return int(self.client.last_zxid or 0)
            except _DISCONNECTED:
                if time.monotonic() > deadline:
                    raise self._lost() from None
                self._recover()

    def _recover(self) -> None:
        """Wait for kazoo to reconnect (restart the client if it gave up), then sync."""
        self._reconnects += 1
        deadline = time.monotonic() + self.reconnect_timeout
        # every other in-flight request fails with the connection (or was answered before it)
        while self._in_flight:
            ops, handle, _, expected = self._in_flight.popleft()
            self._expecting -= expected
            try:
                answered, failed = self._collect(ops, handle, 1.0)
            except Exception:
                answered, failed = [], list(ops)
            self._handle(answered)
            self._requeue(failed)
        log.warning("ZooKeeper connection lost during the snapshot walk; waiting for it to come back")
        while True:
            if self.client.state == KazooState.CONNECTED:
                try:
                    self.client.sync("/")
                    break
                except _DISCONNECTED:
                    pass
            elif self._client_gave_up() and self.restart_client is not None:
                try:
                    self.restart_client()
                    continue
                except Exception as exc:
                    log.warning("Restarting the ZooKeeper client failed: %s", type(exc).__name__)
            if time.monotonic() > deadline:
                raise self._lost()
            time.sleep(0.1)
        if self._wire is not None:
            self._reopen_wire(deadline)
        session = self._current_session()
        if session != self._session_id:
            self._session_expiries += 1
            log.warning(
                "The snapshot walk continues on a new ZooKeeper session (the old one expired or was given up)"
            )
            self._session_id = session
        log.info("ZooKeeper connection back; resuming the snapshot walk")

    def _reopen_wire(self, deadline: float) -> None:
        """Replace the walker's sessions that were lost (at least one must come back)."""
        from ._zk_wire import WireUnavailableError

        assert self._wire is not None
        self._wire.last_zxid = max(self._wire.last_zxid, int(self.client.last_zxid or 0))
        while True:
            try:
                self._wire.replenish()
                return
            except WireUnavailableError:
                if time.monotonic() > deadline:
                    raise self._lost() from None
                time.sleep(0.1)

    def _client_gave_up(self) -> bool:
        # kazoo closes the client (state LOST, connection thread ended) once its retry policy is
        # exhausted; a client that is still retrying has a live connection thread.
        return self.client.state == KazooState.LOST and not connection_thread_alive(self.client)

    def _lost(self) -> SnapshotConnectionLostError:
        return SnapshotConnectionLostError(
            f"ZooKeeper unreachable for more than {self.reconnect_timeout:g}s during the snapshot walk "
            f"({self._read} znodes read); nothing was published. Retry when the ensemble is back."
        )

    def _report_progress(self) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if now - self._last_progress < self.progress_every:
            return
        self._last_progress = now
        self.progress(
            WalkProgress(
                znodes=self._read,
                requests=self._requests,
                queued=self._queued(),
                in_flight=len(self._in_flight),
                elapsed_s=now - self._t0,
                reconnects=self._reconnects,
                position=self._lowest_pending(),
            )
        )
