"""ZooKeeper requests kazoo 2.11 does not expose, sent through kazoo's own connection.

* :class:`MultiRead` (opcode 22, ZooKeeper 3.6+): many getData/getChildren in one request. The
  Python client, not the server, limits how fast a tree can be read (one request object, one
  async result and one callback per znode); batching hundreds of reads into one request is what
  makes a 230k-znode walk take seconds instead of minutes (benchmarks/snapshot_benchmark.py).
* :func:`submit_transaction`: a multi-op built from raw ops, because kazoo's ``TransactionRequest``
  refuses ``None`` data, and Kafka's container znodes have null data (not ``b""``);
  :func:`multi_request_size` is its size on the wire, what the server checks against
  ``jute.maxbuffer``.

Both go through ``KazooClient._call`` (kazoo's request queue), so sessions, reconnects, auth and
TLS stay kazoo's. That, the negotiated session timeout and the connection thread are kazoo's
private API: this module is the only place that touches them, and it refuses to load with a kazoo
outside :data:`SUPPORTED_KAZOO` (the versions the tests ran with; setup.cfg pins the same range), so
a new kazoo fails loudly here instead of misbehaving mid-walk.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import kazoo.version
from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import Transaction

if TYPE_CHECKING:
    from kazoo.interfaces import IAsyncResult

    from ._zk_wire import WireOptions

SUPPORTED_KAZOO = ((2, 10), (2, 11))
"""kazoo ``(major, minor)`` releases whose private request queue this module was tested against."""


class UnsupportedKazooError(ImportError):
    """The installed kazoo is not one this provider's ZooKeeper access was tested with."""


def check_kazoo_version(version: str) -> None:
    """Refuse a kazoo outside :data:`SUPPORTED_KAZOO`, naming the supported range.

    :param version: kazoo's version string, e.g. ``"2.11.0"``.
    """
    parts = version.split(".")
    try:
        release = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        release = None
    if release not in SUPPORTED_KAZOO:
        low, high = SUPPORTED_KAZOO[0], SUPPORTED_KAZOO[-1]
        raise UnsupportedKazooError(
            f"kazoo {version} is installed, but airflow-provider-kafka-zk uses kazoo's request queue "
            f"and was tested with kazoo {low[0]}.{low[1]} to {high[0]}.{high[1]} only: "
            f"pip install 'kazoo>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}'"
        )


check_kazoo_version(kazoo.version.__version__)
for _private in ("_call",):
    if not callable(getattr(KazooClient, _private, None)):
        raise UnsupportedKazooError(f"kazoo {kazoo.version.__version__} has no KazooClient.{_private}")

GET_DATA = 4
GET_CHILDREN = 8
MULTI_READ = 22

_HEADER = struct.Struct("!iBi")  # MultiHeader: type, done, err
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_STAT_SIZE = _STAT.size
_END = _HEADER.pack(-1, True, -1)

StatTuple = tuple[int, int, int, int, int, int, int, int, int, int, int]
"""ZooKeeper's Stat in wire order: czxid, mzxid, ctime, mtime, version, cversion, aversion,
ephemeralOwner, dataLength, numChildren, pzxid (the order of ``kazoo.protocol.states.ZnodeStat``)."""


def server_path(client: KazooClient, path: str) -> str:
    """``path`` (relative to the client's chroot) as the server sees it."""
    chroot = client.chroot or ""
    if path == "/":
        return chroot or "/"
    return chroot + path


class MultiRead:
    """One multiRead request: ``ops`` are ``(GET_DATA | GET_CHILDREN, server_path)`` pairs.

    The reply is one entry per op, in order: ``(data, stat)`` for a getData, a list of child names
    for a getChildren, or a kazoo exception instance (``NoNodeError``, ``NoAuthError``...) for an op
    that failed; a failed op does not fail the others.
    """

    type = MULTI_READ
    __slots__ = ("ops",)

    def __init__(self, ops: Sequence[tuple[int, str]]) -> None:
        self.ops = ops

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        for kind, path in self.ops:
            encoded = path.encode("utf-8")
            parts.append(_HEADER.pack(kind, False, -1))
            parts.append(_INT.pack(len(encoded)))
            parts.append(encoded)
            parts.append(b"\0")  # watch: false
        parts.append(_END)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[Any]:
        header = _HEADER.unpack_from
        integer = _INT.unpack_from
        stat = _STAT.unpack_from
        results: list[Any] = []
        append = results.append
        while True:
            kind, done, _err = header(buffer, offset)
            offset += 9
            if done:
                return results
            if kind == GET_DATA:
                (length,) = integer(buffer, offset)
                offset += 4
                if length < 0:
                    data = None
                else:
                    data = buffer[offset : offset + length]
                    offset += length
                append((data, stat(buffer, offset)))
                offset += _STAT_SIZE
            elif kind == GET_CHILDREN:
                (count,) = integer(buffer, offset)
                offset += 4
                children = []
                for _ in range(max(count, 0)):
                    (length,) = integer(buffer, offset)
                    offset += 4
                    children.append(buffer[offset : offset + length].decode("utf-8"))
                    offset += length
                append(children)
            elif kind == -1:
                (code,) = integer(buffer, offset)
                offset += 4
                append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead reply holds an op of type {kind}, expected 4, 8 or -1")

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG: paths only, never data
        return f"MultiRead({len(self.ops)} ops)"


def session_timeout_s(client: KazooClient) -> float:
    """The session timeout in seconds: the one the server granted once connected, else the asked one."""
    return client._session_timeout / 1000.0


def connection_thread_alive(client: KazooClient) -> bool:
    """Whether kazoo's connection thread still runs: a client in state LOST whose thread ended has
    given up for good (its retry policy is exhausted); one still retrying has a live thread."""
    connection = getattr(client, "_connection", None)
    thread = getattr(connection, "_connection_routine", None)
    return thread is not None and thread.is_alive()


def wire_options(client: KazooClient) -> WireOptions:
    """How the walker's own sessions (:mod:`._zk_wire`) must connect to read what ``client`` reads:
    its hosts, chroot, session timeout, TLS settings, digest credentials and SASL options (kazoo
    keeps the last on its connection handler), and the server it is connected to now."""
    from ._zk_wire import WireOptions

    connection = getattr(client, "_connection", None)
    sasl = getattr(connection, "sasl_options", None)
    prefer = None
    sock = getattr(connection, "_socket", None)
    if sock is not None:
        try:
            peer = sock.getpeername()
            prefer = next(
                (h for h in client.hosts if h[1] == peer[1] and h[0] in (peer[0], "localhost")), None
            )
        except (OSError, IndexError):
            prefer = None
    return WireOptions(
        hosts=tuple((str(h), int(p)) for h, p in client.hosts),
        chroot=client.chroot or "",
        session_timeout_ms=int(client._session_timeout),
        auth_data=tuple(client.auth_data),
        sasl_options=dict(sasl) if sasl else None,
        use_ssl=bool(client.use_ssl),
        ca=client.ca,
        certfile=client.certfile,
        keyfile=client.keyfile,
        keyfile_password=client.keyfile_password,
        verify_certs=bool(client.verify_certs),
        check_hostname=bool(client.check_hostname),
        prefer=prefer,
    )


def submit_multi_read(client: KazooClient, ops: Sequence[tuple[int, str]]) -> IAsyncResult:
    """Queue one :class:`MultiRead` on kazoo's connection (ZooKeeper 3.6+)."""
    result = client.handler.async_result()
    client._call(MultiRead(ops), result)
    return result


_REQUEST_HEADER_SIZE = 8  # RequestHeader: xid, type (after the 4-byte length prefix)


def multi_op_size(op: Any) -> int:
    """Bytes one raw op (``Create``, ``SetData``, ``Delete``, ``CheckVersion``) adds to a multi-op:
    its MultiHeader plus its jute record (path, data, ACL list, flags or version), as kazoo sends it."""
    return _HEADER.size + len(op.serialize())


def multi_request_size(ops: Sequence[Any]) -> int:
    """The length ZooKeeper compares with ``jute.maxbuffer`` for a multi-op of ``ops``: the request
    header, every op and the closing MultiHeader (the 4-byte length prefix itself is not counted:
    ``len > maxBuffer`` in NIOServerCnxn.readLength / NettyServerCnxn.receiveMessage, release-3.8.0)."""
    return _REQUEST_HEADER_SIZE + sum(multi_op_size(op) for op in ops) + _HEADER.size


def submit_transaction(client: KazooClient, ops: Sequence[Any]) -> IAsyncResult:
    """Queue a multi-op of raw kazoo ops (``Create``, ``SetData``, ``Delete``, ``CheckVersion``).

    The paths in ``ops`` must already be server paths (:func:`server_path`). The result is kazoo's
    per-op list: on failure every entry is an exception (``RolledBackError`` before the failing op).
    """
    result = client.handler.async_result()
    client._call(Transaction(list(ops)), result)
    return result
