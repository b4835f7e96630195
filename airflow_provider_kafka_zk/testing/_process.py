"""Process helpers shared by the real test servers (ZooKeeper, sshd).

Why one place: both servers are child processes of the test run that must never outlive it, and
the rules for that (parent-death signal, stop by PID with a grace period, reap, do nothing in forked
children) are subtle enough to get right once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Self

__all__ = [
    "NoFreePortError",
    "ServerProcess",
    "free_port",
    "pdeathsig_prefix",
    "spawn_logged",
    "terminate",
    "terminate_at_exit",
]


class NoFreePortError(RuntimeError):
    """No port was free on all the requested addresses; callers re-raise it as their start error."""


class ServerProcess:
    """Process state, log and lifecycle common to the test servers (a context manager).

    Why a base class: both servers are stopped, closed, watched while starting and asked for their
    PID and log the same way. Subclasses set ``_process`` (``spawn_logged``), ``_stop_finalizer``
    (``terminate_at_exit``) and ``_cleanup_dir`` (a finaliser deleting the directory they created,
    or None), and define ``start`` and ``log_path``.
    """

    _process: subprocess.Popen[bytes] | None
    _stop_finalizer: weakref.finalize | None
    _cleanup_dir: weakref.finalize | None
    _log_tail_bytes: int | None = None  # read only this much of the log's end (None: all of it)

    @property
    def log_path(self) -> Path:
        """Server log (stdout+stderr)."""
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        """PID of the running server process, or None when stopped."""
        return self._process.pid if self.is_running and self._process else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The log's last ``lines`` lines, for error messages; ``""`` if it cannot be read."""
        try:
            with self.log_path.open("rb") as log:
                if self._log_tail_bytes is not None:
                    log.seek(0, os.SEEK_END)
                    log.seek(max(0, log.tell() - self._log_tail_bytes))
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after the grace period; reaps the process. Its files are kept."""
        if self._stop_finalizer is not None:
            self._stop_finalizer()  # runs terminate once and detaches it from atexit
        self._stop_finalizer = None
        self._process = None

    def close(self) -> None:
        """Stop, and delete the server's directory if this object created it."""
        self.stop()
        if self._cleanup_dir is not None:
            self._cleanup_dir()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _raise_if_exited(self, error: type[Exception], what: str, where: str) -> None:
        """While starting: raise ``error`` with the exit code and the log's tail if the process died."""
        assert self._process is not None
        if self._process.poll() is not None:
            raise error(
                f"{what} exited with code {self._process.returncode} while starting on {where}; "
                f"log {self.log_path} ends with:\n{self.log_tail()}"
            )


def free_port(*addresses: str, attempts: int = 50) -> int:
    """A port the kernel just considered free on every one of ``addresses`` at once.

    Why several: one sshd binds the same port on several loopback addresses. The usual small race
    (another process binds the port before the server does) is accepted; servers retry or fail.
    """
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as first:
            first.bind((addresses[0], 0))
            port = int(first.getsockname()[1])
            others = []
            try:
                for address in addresses[1:]:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    others.append(sock)
                    sock.bind((address, port))
            except OSError:
                continue
            finally:
                for sock in others:
                    sock.close()
            return port
    raise NoFreePortError(f"no port free on all of {list(addresses)} after {attempts} tries")


def pdeathsig_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL`` so the server dies with us even if we are SIGKILLed.

    Linux delivers the parent-death signal when the *thread* that forked exits, so it is only safe
    from the main thread (a server started from a worker thread would die with that thread).
    """
    setpriv = shutil.which("setpriv")
    if setpriv and threading.current_thread() is threading.main_thread():
        return [setpriv, "--pdeathsig", "KILL", "--"]
    return []


def spawn_logged(command: list[str], log_path: Path, what: str, cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` with stdout+stderr appended to ``log_path`` after a ``--- starting`` line.

    Appending keeps the whole story across restarts. Own session: a Ctrl-C in the terminal reaches
    pytest, whose teardown then stops the server in order, instead of killing the server under a
    test that is still running.
    """
    with log_path.open("ab") as log:
        log.write(f"--- starting {what} at {time.ctime()}\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )


def terminate_at_exit(
    owner: object,
    process: subprocess.Popen[bytes],
    owner_pid: int,
    grace: float,
    *,
    descendants: bool = False,
) -> weakref.finalize:
    """Arrange ``terminate`` for when ``owner`` is collected or the interpreter exits.

    Calling the returned finaliser stops the process now, once, and detaches it from atexit. Only
    ``owner_pid`` may stop the server: forked children inherit atexit handlers.
    """
    return weakref.finalize(owner, terminate, process, owner_pid, grace, descendants=descendants)


def terminate(
    process: subprocess.Popen[bytes], owner_pid: int, grace: float, *, descendants: bool = False
) -> None:
    """SIGTERM by PID, then SIGKILL after ``grace`` seconds; always reaps. No-op in forked children.

    With ``descendants`` the processes below it (sshd's per-connection processes) are stopped too.
    """
    if os.getpid() != owner_pid:  # atexit handlers are inherited by fork(); the child must not stop us
        return
    below = _descendants(process.pid) if descendants and process.poll() is None else []
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    process.wait()
    if below:
        _terminate_pids(below, grace)


def _terminate_pids(pids: list[int], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, for processes that are not our children.

    They outlive their parent and cannot be reaped here: wait until they are gone or zombies.
    """
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (alive := [pid for pid in pids if _is_alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_all(alive, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """PIDs below ``pid``, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # comm may contain spaces/parens
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: Iterable[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _is_alive(pid: int) -> bool:
    """True unless ``pid`` is gone or a zombie (dead, waiting for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
