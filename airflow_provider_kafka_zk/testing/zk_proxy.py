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
import itertools
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


_CHUNK = 1 << 20


def _complete_frames(buffer: bytes | bytearray, start: int = 0) -> list[int]:
    """Offsets where each complete frame in ``buffer`` (from ``start``) begins, then where the last
    one ends."""
    offsets = [start]
    size = len(buffer)
    while size - offsets[-1] >= 4:
        (length,) = _LENGTH.unpack_from(buffer, offsets[-1])
        if length < 0:
            raise OSError("negative frame length")
        end = offsets[-1] + 4 + length
        if end > size:
            break
        offsets.append(end)
    return offsets


class ZooKeeperProxy:
    """Forward ZooKeeper connections from a loopback port to ``upstream``, refusing ``refuse`` opcodes.

    :param upstream: ``"host:port"`` of the real server.
    :param refuse: opcodes answered as an older server answers an unknown one (default: those 3.6
        added, :data:`OPCODES_UNKNOWN_TO_3_5`).
    :param answer_unknown: send the UNIMPLEMENTED reply before closing (3.4/3.5); False: close only.
    :param stalled: hold every reply (a server that stopped answering: the client's requests, its
        connect and pings too, wait for ever); :attr:`stall` can be set and cleared later.
    """

    def __init__(
        self,
        upstream: str,
        *,
        refuse: Iterable[int] = OPCODES_UNKNOWN_TO_3_5,
        answer_unknown: bool = True,
        host: str = "127.0.0.1",
        stalled: bool = False,
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
        self.stall = threading.Event()
        if stalled:
            self.stall.set()

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
        """Forward whole frames as they come, many per ``sendall`` (a walk pipelines thousands of
        small requests: a frame at a time would make the proxy, not the server, the limit)."""
        buffer = bytearray()
        first = True  # ConnectRequest: no request header
        try:
            while not link.closed.is_set():
                chunk = link.client.recv(_CHUNK)
                if not chunk:
                    return
                buffer += chunk
                offsets = _complete_frames(buffer)
                if len(offsets) == 1:
                    continue
                forward_to = offsets[-1]
                for start, end in itertools.pairwise(offsets):
                    if first:
                        first = False
                        continue
                    if end - start >= 12:  # length, xid, type
                        xid, opcode = _REQUEST_HEADER.unpack_from(buffer, start + 4)
                        if opcode in self.refuse:
                            if start:
                                link.upstream.sendall(buffer[:start])
                            self._refuse(link, xid, opcode)
                            return
                link.upstream.sendall(buffer[:forward_to])
                del buffer[:forward_to]
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
        """Forward replies in runs of whole frames, so a refusal's reply lands between two frames."""
        buffer = bytearray()
        try:
            while not link.closed.is_set():
                chunk = link.upstream.recv(_CHUNK)
                if not chunk:
                    return
                buffer += chunk
                end = _complete_frames(buffer)[-1]
                if end and not self.stall.is_set():
                    with link.client_lock:
                        link.client.sendall(buffer[:end])
                    del buffer[:end]
        except OSError:
            return
        finally:
            self._drop(link)

    def _drop(self, link: _Link) -> None:
        link.close()
        with self._lock:
            self._links.discard(link)


def main(argv: list[str] | None = None) -> None:
    """``python -m airflow_provider_kafka_zk.testing.zk_proxy HOST:PORT``: serve in this process
    (benchmarks run the proxy apart from the client they measure); prints ``host:port`` and
    stops when its standard input closes."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m airflow_provider_kafka_zk.testing.zk_proxy UPSTREAM_HOST:PORT")
    with ZooKeeperProxy(args[0]) as proxy:
        print(proxy.connect_string, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
