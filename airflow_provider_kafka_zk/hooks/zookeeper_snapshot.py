"""Read every znode of a Kafka chroot, with data and full Stat, fast and with an honest zxid range.

Speed: the walk sends ZooKeeper 3.6+ multiRead requests (hundreds of getData/getChildren each,
several in flight) through kazoo's connection, so Python handles one request per few hundred
znodes instead of one or two per znode; servers without multiRead get pipelined single reads.

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
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
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

from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

from ._kazoo_protocol import GET_CHILDREN, GET_DATA, StatTuple, submit_multi_read

if TYPE_CHECKING:
    from kazoo.client import KazooClient

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
# Stat tuple indexes (wire order)
_MZXID, _NUM_CHILDREN, _PZXID = 1, 9, 10


class SnapshotWalkError(RuntimeError):
    """The walk could not produce a complete snapshot; nothing partial is returned."""


class SnapshotConnectionLostError(SnapshotWalkError):
    """ZooKeeper stayed unreachable longer than the walk's reconnect timeout."""


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


@dataclass(frozen=True)
class SnapshotWalk:
    """Every znode under the included subtrees, with data and full Stat.

    ``consistent``: the rows are the tree exactly as of ``consistent_zxid`` (== ``start_zxid``);
    otherwise fuzzy: each row is its znode at some zxid in ``[start_zxid, end_zxid]``.
    ``gone``: znodes found in a child list but deleted before they could be read (not errors).
    ``missing_roots``: included paths that do not exist. ``max_zxid_seen``: highest czxid, mzxid
    or pzxid in the rows. ``table`` maps path -> (data, Stat in wire order); :attr:`rows` builds
    the :class:`ZnodeRow` list on first use (writers use :meth:`columns` and never need it).
    """

    table: dict[str, tuple[bytes | None, StatTuple]] = field(repr=False)
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
        return sorted(self.table)

    @cached_property
    def rows(self) -> list[ZnodeRow]:
        """The snapshot as ZnodeRow objects, sorted by path."""
        table = self.table
        rows = []
        for path in self.paths:
            data, s = table[path]
            rows.append(
                ZnodeRow(path, data, s[0], s[1], s[10], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9])
            )
        return rows

    def columns(self) -> dict[str, list[Any]]:
        """Column lists in ZnodeRow field order, rows sorted by path (for a columnar writer)."""
        return _columns(self.table, self.paths)

    def column_chunks(self, rows: int) -> Iterator[dict[str, list[Any]]]:
        """:meth:`columns` ``rows`` rows at a time (at least one chunk, maybe empty).

        A writer that writes one chunk before asking for the next holds one chunk's copy of the
        data, not the whole tree's (the Parquet writer's row groups).
        """
        if rows < 1:
            raise ValueError("column chunks need at least 1 row each")
        paths = self.paths
        for start in range(0, max(len(paths), 1), rows):
            yield _columns(self.table, paths[start : start + rows])


def _columns(table: dict[str, tuple[bytes | None, StatTuple]], paths: list[str]) -> dict[str, list[Any]]:
    datas = [table[p][0] for p in paths]
    stats = [table[p][1] for p in paths]
    by_wire = list(zip(*stats, strict=True)) if stats else [()] * 11
    return {
        "path": paths,
        "data": datas,
        **{name: list(by_wire[index]) for name, index in _WIRE_INDEX.items()},
    }


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
    kept = sorted(set(out))
    return tuple(p for p in kept if not any(_under(p, q) for q in kept if q != p))


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def _join(parent: str, child: str) -> str:
    return "/" + child if parent == "/" else f"{parent}/{child}"


class ZnodeTreeWalker:
    """One snapshot walk over a started kazoo client (chrooted at the Kafka cluster).

    ``method``: ``"auto"`` (multiRead, falling back to pipelined reads when the server lacks it),
    ``"multi-read"`` or ``"pipelined"``. ``batch_ops`` reads per request, ``window`` requests in
    flight. ``restart_client`` is called when kazoo has given up reconnecting (its retry policy is
    exhausted) and must start a new session on the same client.
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
    ) -> None:
        if method not in ("auto", "multi-read", "pipelined"):
            raise ValueError(f"snapshot method must be auto, multi-read or pipelined, not {method!r}")
        if batch_ops < 1 or window < 1:
            raise ValueError("snapshot batch_ops and window must be >= 1")
        self.client = client
        self.include = normalise_subtrees(include, "include")
        self.exclude = normalise_subtrees(exclude, "exclude")
        if not self.include:
            raise ValueError("snapshot include must name at least one subtree")
        self.method = "multi-read" if method == "auto" else method
        self._may_fall_back = method == "auto"
        self._multi_read_ok = False
        self.batch_ops = batch_ops
        self.window = window
        self.reconnect_timeout = reconnect_timeout
        self.restart_client = restart_client
        self.progress = progress
        self.progress_every = progress_every
        self._roots = set(self.include)
        self._exclude_set = set(self.exclude)
        self._rows: dict[str, tuple[bytes | None, StatTuple]] = {}
        self._children: dict[str, list[str]] = {}
        self._need_data: deque[str] = deque()
        self._need_children: deque[str] = deque()
        self._in_flight: deque[tuple[list[tuple[int, str]], Any]] = deque()
        self._mismatch: set[str] = set()
        self._gone: set[str] = set()
        self._missing_roots: set[str] = set()
        self._rereading: set[str] = set()
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
        start_zxid = self._zxid_now()
        self._need_data.extend(r for r in self.include if not self._excluded(r))
        self._pump()
        changed = {
            p for p, (_, stat) in self._rows.items() if stat[_MZXID] > start_zxid or stat[_PZXID] > start_zxid
        }
        consistent = not changed and not self._gone and not self._mismatch
        reread: set[str] = set()
        if not consistent:
            parents_of_gone = {posixpath.dirname(p) for p in self._gone}
            reread = (changed | self._mismatch | parents_of_gone) & set(self._rows)
            log.info("%d znodes changed during the walk; re-reading them", len(reread))
            self._rereading = reread
            self._need_data.extend(sorted(reread))
            self._pump()
        end_zxid = self._zxid_now()
        table = self._rows
        self._children = {}
        return SnapshotWalk(
            table=table,
            chroot=self.client.chroot or "",
            include=self.include,
            exclude=self.exclude,
            start_zxid=start_zxid,
            end_zxid=end_zxid,
            consistent=consistent,
            consistent_zxid=start_zxid if consistent else None,
            max_zxid_seen=max((max(s[0], s[1], s[10]) for _, s in table.values()), default=0),
            gone=tuple(sorted(self._gone)),
            reread=tuple(sorted(reread)),
            missing_roots=tuple(sorted(self._missing_roots)),
            method=self.method,
            requests=self._requests,
            reconnects=self._reconnects,
            session_expiries=self._session_expiries,
            started_at=started_at,
            duration_s=time.monotonic() - self._t0,
            data_bytes=sum(len(d) for d, _ in table.values() if d),
        )

    # ------------------------------------------------------------------ pipeline
    def _pump(self) -> None:
        """Send reads until every queue is empty and every reply is handled."""
        while self._need_data or self._need_children or self._in_flight:
            while (self._need_data or self._need_children) and len(self._in_flight) < self.window:
                self._submit()
            ops, handle = self._in_flight.popleft()
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

    def _submit(self) -> None:
        ops: list[tuple[int, str]] = []
        while len(ops) < self.batch_ops and self._need_children:
            ops.append((GET_CHILDREN, self._need_children.popleft()))
        while len(ops) < self.batch_ops and self._need_data:
            ops.append((GET_DATA, self._need_data.popleft()))
        if self.method == "multi-read":
            chroot = self.client.chroot or ""
            root = chroot or "/"
            wire = [(k, chroot + p if p != "/" else root) for k, p in ops]
            handle: Any = submit_multi_read(self.client, wire)
            self._requests += 1
        else:
            handle = [
                self.client.get_async(p) if k == GET_DATA else self.client.get_children_async(p)
                for k, p in ops
            ]
            self._requests += len(ops)
        self._in_flight.append((ops, handle))

    def _reply_timeout(self) -> float:
        return max(self.client._session_timeout / 1000.0, 10.0) * 2

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
        what = "reading" if ops[0][0] == GET_DATA else "listing"
        more = f" and {len(ops) - 1} more znodes" if len(ops) > 1 else ""
        return SnapshotWalkError(f"{what} znode {ops[0][1]}{more} failed: {exc!r}")

    def _handle(self, answered: list[tuple[tuple[int, str], Any]]) -> None:
        for (kind, path), result in answered:
            if kind == GET_DATA:
                self._on_data(path, result)
            else:
                self._on_children(path, result)

    def _requeue(self, ops: Sequence[tuple[int, str]]) -> None:
        for kind, path in ops:
            (self._need_data if kind == GET_DATA else self._need_children).append(path)

    # ------------------------------------------------------------------ replies
    def _on_data(self, path: str, result: Any) -> None:
        if type(result) is not tuple:
            self._on_data_error(path, result)
            return
        data, stat = result
        self._rows[path] = (data, stat)
        if stat[_NUM_CHILDREN] > 0:
            if path not in self._children or path in self._rereading:
                self._need_children.append(path)
        elif self._children.get(path):
            self._on_children(path, [])  # had children when listed before: all gone now

    def _on_data_error(self, path: str, result: Any) -> None:
        if isinstance(result, NoNodeError):
            if path in self._roots and path not in self._rows:
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
        row = self._rows.get(path)
        if row is None:  # deleted and dropped meanwhile
            return
        if len(result) != row[1][_NUM_CHILDREN]:
            self._mismatch.add(path)  # a child came or went between the two reads
        old = self._children.get(path)
        self._children[path] = result
        prefix = "/" if path == "/" else path + "/"
        rows, excluded, need = self._rows, self._exclude_set, self._need_data
        if not old:
            for child in result:
                child_path = prefix + child
                # a child of a walked znode can only be excluded by being an excluded root itself
                if child_path not in excluded and child_path not in rows:
                    need.append(child_path)
            return
        new = set(result)
        for child in old:
            if child not in new:
                self._gone.add(prefix + child)
                self._drop(prefix + child)
        old_set = set(old)
        for child in result:
            child_path = prefix + child
            if child not in old_set and child_path not in excluded and child_path not in rows:
                need.append(child_path)

    def _drop(self, path: str) -> None:
        """Remove a deleted znode and everything found under it."""
        self._rows.pop(path, None)
        for child in self._children.pop(path, ()):
            self._drop(_join(path, child))

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
            ops, handle = self._in_flight.popleft()
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
        session = self._current_session()
        if session != self._session_id:
            self._session_expiries += 1
            log.warning(
                "The snapshot walk continues on a new ZooKeeper session (the old one expired or was given up)"
            )
            self._session_id = session
        log.info("ZooKeeper connection back; resuming the snapshot walk")

    def _client_gave_up(self) -> bool:
        # kazoo closes the client (state LOST, connection thread ended) once its retry policy is
        # exhausted; a client that is still retrying has a live connection thread.
        connection = getattr(self.client, "_connection", None)
        thread = getattr(connection, "_connection_routine", None)
        return self.client.state == KazooState.LOST and (thread is None or not thread.is_alive())

    def _lost(self) -> SnapshotConnectionLostError:
        return SnapshotConnectionLostError(
            f"ZooKeeper unreachable for more than {self.reconnect_timeout:g}s during the snapshot walk "
            f"({len(self._rows)} znodes read); nothing was published. Retry when the ensemble is back."
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
                znodes=len(self._rows),
                requests=self._requests,
                queued=len(self._need_data) + len(self._need_children),
                in_flight=len(self._in_flight),
                elapsed_s=now - self._t0,
                reconnects=self._reconnects,
            )
        )
