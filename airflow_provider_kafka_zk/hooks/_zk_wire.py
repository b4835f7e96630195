"""Pipelined reads on sessions of their own: the snapshot walk on servers without multiRead.

Why: ZooKeeper 3.4/3.5 have no multiRead, so a walk is one request per znode (plus one listing per
znode with children). Through kazoo each request costs a request object, an async result, a
``select`` and a thread hand-over per reply: about 5,000 znodes/s on this project's machine, where
the server answers several times faster. Here a read is a few bytes appended to a buffer and a
reply a few ``struct`` calls in a loop over whatever one ``recv`` brought, on non-blocking sockets
served by one selector in the walker's thread (no extra threads, no GIL hand-overs), optionally
over several sessions at once.

Each session is opened exactly as kazoo opens one, from the walker's kazoo client
(:func:`._kazoo_protocol.wire_options`): the same hosts, chroot, TLS settings (kazoo's own
``create_tcp_connection``), digest credentials and SASL mechanism (pure-sasl, as kazoo drives it),
so whatever the hook's connection can read these sessions can read, and an ACL refusal is the same
NoAuth reply. Consistency: a session is opened with ``lastZxidSeen`` = the highest zxid the walk
has seen, and a server that has not applied that zxid refuses the session
(``ZooKeeperServer.processConnectRequest``, "Refusing session request for client ... as it has
seen zxid", release-3.5.10 and release-3.8.0), so every read sees at least the state the walk
started from, as on the walker's own session.

Only opcodes every release since 3.4 knows are sent: getData (4), getChildren (8), ping (11),
closeSession (-11), auth (100) and SASL (102).
"""

from __future__ import annotations

import contextlib
import errno
import random
import selectors
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import EXCEPTIONS, AuthFailedError, ConnectionLoss, NoAuthError, NoNodeError
from kazoo.handlers.utils import create_tcp_connection
from kazoo.protocol.serialization import SASL, Auth, Connect

GET_DATA = 4
GET_CHILDREN = 8
_PING = 11
_CLOSE_SESSION = -11
_AUTH_XID = -4
_PING_XID = -2
_WATCH_XID = -1

_INT = struct.Struct("!i")
_REPLY = struct.Struct("!iqi")  # ReplyHeader: xid, zxid, err
_REQUEST = struct.Struct("!iiii")  # length, xid, type, path length (GetData/GetChildren: path, watch)
_STAT = struct.Struct("!qqqqiiiqiiq")
_STAT_SIZE = _STAT.size
_RECV = 1 << 20

# errors that mean "this session (or its connection) is gone", not "this znode"
_SESSION_ERRORS = frozenset(
    {-4, -112, -118, -119}
)  # ConnectionLoss, SessionExpired, SessionMoved, NotReadOnly


class WireUnavailableError(ConnectionError):
    """No session of its own could be opened (the walk then uses kazoo's connection)."""


@dataclass(frozen=True)
class WireOptions:
    """How to open a session the way the walker's kazoo client opens its own (no secrets in repr)."""

    hosts: tuple[tuple[str, int], ...]
    chroot: str = ""
    session_timeout_ms: int = 30_000
    auth_data: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    sasl_options: dict[str, Any] | None = field(default=None, repr=False)
    use_ssl: bool = False
    ca: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = field(default=None, repr=False)
    verify_certs: bool = True
    check_hostname: bool = False
    prefer: tuple[str, int] | None = None
    """The server the kazoo client is connected to: tried first (it has served the walk's sync)."""


class WireBatch:
    """The replies to one batch of reads on one session, in order; :meth:`get` waits for them.

    Each result is ``(data, stat)`` for a getData, a list of child names for a getChildren, or a
    kazoo exception instance (``NoNodeError``, ``NoAuthError``...) for a read that failed; a
    dropped session fails the whole batch with ``ConnectionLoss`` (read it again elsewhere).
    """

    __slots__ = ("_pool", "error", "kinds", "paths", "results", "session")

    def __init__(self, pool: WirePool, session: _Session, kinds: list[int], paths: list[str]) -> None:
        self._pool = pool
        self.session = session
        self.kinds = kinds
        self.paths = paths
        self.results: list[Any] = []
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.error is not None or len(self.results) == len(self.kinds)

    def get(self, timeout: float | None = None) -> list[Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.session.fail(ConnectionLoss("no reply within the read timeout"))
                break
            self._pool.pump(left)
        if self.error is not None:
            raise self.error
        return self.results


class _Session:
    """One socket, one ZooKeeper session; replies come back in request order (ZooKeeper's FIFO
    client order), so each reply belongs to the oldest batch still waiting."""

    def __init__(self, pool: WirePool, options: WireOptions, last_zxid: int, timeout: float) -> None:
        self.pool = pool
        self.last_zxid = last_zxid
        self.out = bytearray()
        self.inbuf = bytearray()
        self.batches: deque[WireBatch] = deque()
        self.xid = 0
        self.expected_xid = 1
        self.alive = True
        self.sock, self.session_id, self.timeout_s = _open(options, last_zxid, timeout)
        self.sock.setblocking(False)
        self.last_send = time.monotonic()
        self.registered_write = False

    def send_reads(self, kinds: Sequence[int], paths: Sequence[str], chroot: str) -> None:
        out, pack, xid = self.out, _REQUEST.pack, self.xid
        for kind, path in zip(kinds, paths, strict=True):
            encoded = (chroot + path if path != "/" else chroot or "/").encode()
            xid += 1
            out += pack(13 + len(encoded), xid, kind, len(encoded))
            out += encoded
            out += b"\0"  # watch: false
        self.xid = xid

    def fail(self, exc: BaseException) -> None:
        """The session is gone: every batch still waiting on it fails with ``exc``."""
        if not self.alive:
            return
        self.alive = False
        self.pool.drop(self)
        for batch in self.batches:
            batch.error = exc
        self.batches.clear()
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self) -> None:
        """Say goodbye (closeSession: the server forgets the session now, not at its timeout)."""
        if not self.alive:
            return
        self.alive = False
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(1.0)
            self.xid += 1
            self.sock.sendall(_INT.pack(8) + struct.pack("!ii", self.xid, _CLOSE_SESSION))
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    # -------------------------------------------------------------- I/O (called by the pool)
    def write(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return
        except OSError as exc:
            self.fail(ConnectionLoss(f"sending to ZooKeeper failed: {exc}"))
            return
        del self.out[:sent]
        self.last_send = time.monotonic()

    def read(self) -> None:
        sock = self.sock
        try:
            while True:
                chunk = sock.recv(_RECV)
                if not chunk:
                    self.fail(ConnectionLoss("ZooKeeper closed the connection"))
                    return
                self.inbuf += chunk
                if len(chunk) < _RECV and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                    break
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except OSError as exc:
            self.fail(ConnectionLoss(f"reading from ZooKeeper failed: {exc}"))
            return
        self._parse()

    def _parse(self) -> None:
        """Decode every complete reply in the buffer into the waiting batches' results."""
        buf = self.inbuf
        size = len(buf)
        offset = 0
        unpack_int, unpack_reply, unpack_stat = _INT.unpack_from, _REPLY.unpack_from, _STAT.unpack_from
        batches = self.batches
        batch = batches[0] if batches else None
        while size - offset >= 4:
            (length,) = unpack_int(buf, offset)
            end = offset + 4 + length
            if end > size:
                break
            xid, zxid, err = unpack_reply(buf, offset + 4)
            if zxid > self.last_zxid:
                self.last_zxid = zxid
            if xid < 0:  # ping reply (or a watch event: none are set)
                offset = end
                continue
            if xid != self.expected_xid or batch is None:
                del buf[:offset]
                self.fail(ConnectionLoss(f"reply xid {xid} out of order (expected {self.expected_xid})"))
                return
            self.expected_xid = xid + 1
            results = batch.results
            position = offset + 20
            if err:
                if err in _SESSION_ERRORS:
                    del buf[:offset]
                    self.fail(EXCEPTIONS[err]())
                    return
                results.append(EXCEPTIONS[err]())
            elif batch.kinds[len(results)] == GET_DATA:
                (data_length,) = unpack_int(buf, position)
                position += 4
                if data_length < 0:
                    data = None
                else:
                    data = bytes(buf[position : position + data_length])
                    position += data_length
                results.append((data, unpack_stat(buf, position)))
            else:
                (count,) = unpack_int(buf, position)
                position += 4
                children = []
                for _ in range(count):
                    (name_length,) = unpack_int(buf, position)
                    position += 4
                    children.append(buf[position : position + name_length].decode())
                    position += name_length
                results.append(children)
            offset = end
            if len(results) == len(batch.kinds):
                batches.popleft()
                batch = batches[0] if batches else None
        del buf[:offset]


class WirePool:
    """``connections`` sessions of their own, reads sent round robin by batch, one selector.

    :param options: how to connect (:func:`._kazoo_protocol.wire_options`).
    :param connections: sessions to open.
    :param last_zxid: the highest zxid the walk has seen: no session on a server behind it.
    :param connect_timeout: seconds per session to connect and authenticate.
    """

    def __init__(
        self, options: WireOptions, *, connections: int = 2, last_zxid: int = 0, connect_timeout: float = 15.0
    ) -> None:
        if connections < 1:
            raise ValueError("wire connections must be >= 1")
        self.options = options
        self.connections = connections
        self.connect_timeout = connect_timeout
        self.last_zxid = last_zxid
        self.sessions: list[_Session] = []
        self.opened = 0
        self._selector = selectors.DefaultSelector()
        self._next = 0
        try:
            self.replenish()
        except BaseException:
            self.close()
            raise

    def replenish(self) -> None:
        """Open sessions up to ``connections``; WireUnavailableError if none is open afterwards."""
        error: BaseException | None = None
        while len(self.sessions) < self.connections:
            try:
                session = _Session(self, self.options, self.max_zxid(), self.connect_timeout)
            except (OSError, WireUnavailableError, AuthFailedError, ConnectionLoss) as exc:
                error = exc
                break
            self.sessions.append(session)
            self.opened += 1
            self._selector.register(session.sock, selectors.EVENT_READ, session)
        if not self.sessions:
            raise WireUnavailableError(f"no ZooKeeper session could be opened: {error!r}") from error

    def max_zxid(self) -> int:
        return max([self.last_zxid, *(s.last_zxid for s in self.sessions)])

    def submit(self, kinds: list[int], paths: list[str]) -> WireBatch:
        """Send one batch of reads on the next session (a failed batch if none is left)."""
        if not self.sessions:
            try:
                self.replenish()
            except WireUnavailableError as exc:
                dead = WireBatch(self, _DEAD, kinds, paths)
                dead.error = ConnectionLoss(str(exc))
                return dead
        self._next = (self._next + 1) % len(self.sessions)
        session = self.sessions[self._next]
        batch = WireBatch(self, session, kinds, paths)
        session.batches.append(batch)
        session.send_reads(kinds, paths, self.options.chroot)
        session.write()  # most of it goes at once; the rest when the socket takes it
        self._watch_writes(session)
        return batch

    def drop(self, session: _Session) -> None:
        if session in self.sessions:
            self.sessions.remove(session)
            self.last_zxid = max(self.last_zxid, session.last_zxid)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(session.sock)

    def _watch_writes(self, session: _Session) -> None:
        want = bool(session.out)
        if session.alive and want != session.registered_write:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self._selector.modify(session.sock, events, session)
            session.registered_write = want

    def pump(self, timeout: float | None) -> None:
        """Move bytes both ways once (waiting at most ``timeout`` for the sockets), keep idle
        sessions alive with pings."""
        now = time.monotonic()
        for session in list(self.sessions):
            if not session.out and now - session.last_send > session.timeout_s / 3:
                session.out += _INT.pack(8) + struct.pack("!ii", _PING_XID, _PING)
                session.write()
                self._watch_writes(session)
            if isinstance(session.sock, ssl.SSLSocket) and session.sock.pending():
                session.read()
                timeout = 0
        if not self.sessions:
            return
        wait = 1.0 if timeout is None else max(0.0, min(timeout, 1.0))
        for key, events in self._selector.select(wait):
            session = key.data
            if events & selectors.EVENT_WRITE and session.alive:
                session.write()
            if events & selectors.EVENT_READ and session.alive:
                session.read()
            if session.alive:
                self._watch_writes(session)

    def close(self) -> None:
        """Close every session (closeSession first) and the selector."""
        for session in list(self.sessions):
            self.drop(session)
            session.close()
        self._selector.close()


class _DeadSession:
    """Stands in for a session in a batch that could not be sent."""

    alive = False

    def fail(self, exc: BaseException) -> None:
        pass


_DEAD: Any = _DeadSession()


# ------------------------------------------------------------------------------ handshake
def _open(options: WireOptions, last_zxid: int, timeout: float) -> tuple[socket.socket, int, float]:
    """(socket, session id, negotiated timeout in s) of a new authenticated session on the first
    server that accepts one (kazoo's order: the preferred server, then the others shuffled)."""
    hosts = list(options.hosts)
    random.shuffle(hosts)
    if options.prefer in hosts:
        hosts.remove(options.prefer)
        hosts.insert(0, options.prefer)
    failure: BaseException | None = None
    for host, port in hosts:
        try:
            return _open_on(options, host, port, last_zxid, timeout)
        except (AuthFailedError, NoAuthError):
            raise
        except (OSError, ConnectionLoss, WireUnavailableError, struct.error) as exc:
            failure = exc
    raise WireUnavailableError(f"no server of {hosts} accepted a session: {failure!r}") from failure


def _open_on(
    options: WireOptions, host: str, port: int, last_zxid: int, timeout: float
) -> tuple[socket.socket, int, float]:
    sock = create_tcp_connection(
        socket,
        (host, port),
        hostname=host,
        timeout=timeout,
        use_ssl=options.use_ssl,
        ca=options.ca,
        certfile=options.certfile,
        keyfile=options.keyfile,
        keyfile_password=options.keyfile_password,
        verify_certs=options.verify_certs,
        check_hostname=options.check_hostname,
    )
    try:
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connect = Connect(0, last_zxid, options.session_timeout_ms, 0, b"\0" * 16, False)
        _send(sock, None, connect)
        reply = _frame(sock)
        answer, _ = Connect.deserialize(reply, 0)
        if answer.time_out <= 0:
            raise WireUnavailableError(f"{host}:{port} refused the session")
        if options.sasl_options is not None:
            _sasl(sock, dict(options.sasl_options), host)
        for scheme, credential in options.auth_data:
            _send(sock, _AUTH_XID, Auth(0, scheme, credential))
            _header_xid, _, err = _REPLY.unpack_from(_frame(sock), 0)
            if err:
                raise AuthFailedError(f"{scheme} authentication refused")
        return sock, answer.session_id, answer.time_out / 1000.0
    except BaseException:
        sock.close()
        raise


def _sasl(sock: socket.socket, sasl_options: dict[str, Any], host: str) -> None:
    """The SASL exchange as kazoo 2.11 drives it (``ConnectionHandler._authenticate_with_sasl``):
    SASL requests (type 102) until pure-sasl is complete; a dropped connection is a refusal."""
    import puresasl.client

    sasl_options.setdefault("service", "zookeeper")
    if sasl_options.get("mechanism") == "DIGEST-MD5":
        host = "zk-sasl-md5"  # ZooKeeper's fixed realm host for DIGEST-MD5 (kazoo does the same)
    client = puresasl.client.SASLClient(host=host, **sasl_options)
    challenge = None
    xid = 0
    try:
        while not client.complete:
            try:
                response = client.process(challenge=challenge)
            except Exception as exc:
                raise AuthFailedError(f"SASL {sasl_options.get('mechanism')} failed: {exc}") from exc
            if client.complete and not response:
                break
            xid += 1
            _send(sock, xid, SASL(response or b""))
            try:
                reply = _frame(sock)
            except ConnectionLoss as exc:
                raise AuthFailedError("the server dropped the connection during SASL") from exc
            _reply_xid, _, err = _REPLY.unpack_from(reply, 0)
            if err:
                raise AuthFailedError(f"SASL refused ({EXCEPTIONS[err].__name__})")
            challenge, _ = SASL.deserialize(reply, _REPLY.size)
    finally:
        client.dispose()


def _send(sock: socket.socket, xid: int | None, request: Any) -> None:
    body = bytearray()
    if xid is not None:
        body += _INT.pack(xid)
    if request.type is not None:
        body += _INT.pack(request.type)
    body += request.serialize()
    sock.sendall(_INT.pack(len(body)) + bytes(body))


def _frame(sock: socket.socket) -> bytes:
    (length,) = _INT.unpack(_exactly(sock, 4))
    return _exactly(sock, length)


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts = []
    while size:
        try:
            chunk = sock.recv(size)
        except TimeoutError as exc:
            raise ConnectionLoss("no answer from ZooKeeper") from exc
        except OSError as exc:
            if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                raise ConnectionLoss(str(exc)) from exc
            raise
        if not chunk:
            raise ConnectionLoss("ZooKeeper closed the connection")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


__all__ = [
    "GET_CHILDREN",
    "GET_DATA",
    "NoNodeError",
    "WireBatch",
    "WireOptions",
    "WirePool",
    "WireUnavailableError",
]
