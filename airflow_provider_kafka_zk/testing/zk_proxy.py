"""A loopback TCP proxy that makes a real ZooKeeper 3.8 look like a 3.4/3.5 server to its clients.

Why: the snapshot walker's fallback for servers without multiRead (opcode 22, ZooKeeper 3.6+)
must be proven against a server, and no 3.4/3.5 server can be installed here (the registries this
project reaches carry 3.8+). The proxy forwards ZooKeeper's framing (4-byte length + payload)
both ways and answers the opcodes a 3.5 server does not know exactly as 3.5 does:

``ZooKeeperServer.submitRequest`` (release-3.5.10 and release-3.4.14) checks ``Request.isValid``
(whose list has no multiRead, getEphemerals, getAllChildrenNumber or addWatch) and hands an unknown
type to ``UnimplementedRequestProcessor``, which sends ``ReplyHeader(cxid, zxid=-1, err=-6
UNIMPLEMENTED)`` at once -- from the reading thread, not behind the requests still in the
processor pipeline -- and then ``sendCloseSession()``, which closes the *connection* after what is
queued has been written (NIOServerCnxn: ``closeConn``); the session itself lives on and the client
may reconnect to it. With ``answer_unknown=False`` the proxy only closes the connection (no
reply), as a server or middlebox that drops what it cannot parse would.

Bound to 127.0.0.1, threads only, stopped by ``stop()`` (or the context manager).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterable
from typing import Self

__all__ = ["OPCODES_UNKNOWN_TO_3_5", "ZooKeeperProxy"]

#: ZooDefs.OpCode values 3.6 added: multiRead, getEphemerals, getAllChildrenNumber, addWatch.
OPCODES_UNKNOWN_TO_3_5 = frozenset({22, 103, 104, 106})

UNIMPLEMENTED = -6
_LENGTH = struct.Struct("!i")
_REQUEST_HEADER = struct.Struct("!ii")  # xid, type
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, err


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.client_lock = threading.Lock()  # whole frames only, from either direction
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length < 0:
        return None
    body = _read_exact(sock, length)
    return None if body is None else head + body


class ZooKeeperProxy:
    """Forward ZooKeeper connections from a loopback port to ``upstream``, refusing ``refuse`` opcodes.

    :param upstream: ``"host:port"`` of the real server.
    :param refuse: opcodes answered as an older server answers an unknown one (default: those 3.6
        added, :data:`OPCODES_UNKNOWN_TO_3_5`).
    :param answer_unknown: send the UNIMPLEMENTED reply before closing (3.4/3.5); False: close only.
    """

    def __init__(
        self,
        upstream: str,
        *,
        refuse: Iterable[int] = OPCODES_UNKNOWN_TO_3_5,
        answer_unknown: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        upstream_host, _, upstream_port = upstream.rpartition(":")
        self.upstream = (upstream_host, int(upstream_port))
        self.refuse = frozenset(refuse)
        self.answer_unknown = answer_unknown
        self.host = host
        self.port = 0
        self.refused: list[int] = []  # opcodes refused, in order
        self.connections = 0
        self._listener: socket.socket | None = None
        self._links: set[_Link] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def connect_string(self) -> str:
        """``host:port`` clients connect to instead of the server's."""
        return f"{self.host}:{self.port}"

    def start(self) -> Self:
        listener = socket.create_server((self.host, 0))
        listener.settimeout(0.2)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop, "zk-proxy-accept")
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and wait for the proxy's threads."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = [t for t in self._threads if t.is_alive()]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _spawn(self, target, name: str, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while self._listener is not None:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._lock:
                self._links.add(link)
                self.connections += 1
            self._spawn(self._client_to_server, "zk-proxy-c2s", link)
            self._spawn(self._server_to_client, "zk-proxy-s2c", link)

    def _client_to_server(self, link: _Link) -> None:
        try:
            first = _read_frame(link.client)  # ConnectRequest: no request header
            if first is None:
                return
            link.upstream.sendall(first)
            while not link.closed.is_set():
                frame = _read_frame(link.client)
                if frame is None:
                    return
                if len(frame) >= 12:
                    xid, opcode = _REQUEST_HEADER.unpack_from(frame, 4)
                    if opcode in self.refuse:
                        self._refuse(link, xid, opcode)
                        return
                link.upstream.sendall(frame)
        except OSError:
            return
        finally:
            self._drop(link)

    def _refuse(self, link: _Link, xid: int, opcode: int) -> None:
        with self._lock:
            self.refused.append(opcode)
        if self.answer_unknown:
            reply = _REPLY_HEADER.pack(xid, -1, UNIMPLEMENTED)
            with link.client_lock:
                link.client.sendall(_LENGTH.pack(len(reply)) + reply)

    def _server_to_client(self, link: _Link) -> None:
        try:
            while not link.closed.is_set():
                frame = _read_frame(link.upstream)
                if frame is None:
                    return
                with link.client_lock:
                    link.client.sendall(frame)
        except OSError:
            return
        finally:
            self._drop(link)

    def _drop(self, link: _Link) -> None:
        link.close()
        with self._lock:
            self._links.discard(link)
