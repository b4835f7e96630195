"""A server that cannot be used and says whether anything tried: a TCP port on loopback that takes
connections into its backlog and never answers.

Why: a safety check that must refuse *before any I/O* is proven by nobody having connected, not by
how fast it refused -- a time bound ("under a second: no connection attempt") fails on a busy
machine and passes a check that connects and gives up quickly.
"""

from __future__ import annotations

import socket
from typing import Self


class SilentListener:
    """``with SilentListener() as dead: ... dead.address ... assert dead.attempts() == 0``."""

    def __init__(self) -> None:
        self._socket: socket.socket | None = None
        self._attempts = 0

    def __enter__(self) -> Self:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)  # the kernel completes the handshakes; nobody reads or answers
        self._socket.setblocking(False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    @property
    def port(self) -> int:
        assert self._socket is not None, "use SilentListener in a with block"
        return int(self._socket.getsockname()[1])

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def attempts(self) -> int:
        """Connections made to this port so far (each taken off the backlog and closed)."""
        assert self._socket is not None, "use SilentListener in a with block"
        while True:
            try:
                connection, _ = self._socket.accept()
            except BlockingIOError:
                return self._attempts
            connection.close()
            self._attempts += 1


__all__ = ["SilentListener"]
