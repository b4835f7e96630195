"""A real OpenSSH server standing in for Kafka broker hosts in tests and demos.

Why real sshd: the provider reaches broker hosts through Airflow's SSHHook (paramiko), and what
matters there (host-key verification, key auth, remote commands, sftp) is only proven against the
real thing. sshd listens on the same free port on several loopback addresses (Linux routes all
of 127.0.0.0/8 to ``lo`` without set-up), so each address can play one broker host. One OpenSSH
process listens on at most 16 sockets (``MAX_LISTEN_SOCKS`` in sshd.c; it exits at start-up with
"Too many listen sockets" past that), so a server for more hosts runs one process per 16 addresses,
all with the same host key, port, log and authorised key: to a client it is one server.

Keys are generated per server: an ed25519 host key (checked strictly by clients, never auto-added)
and an ed25519 client key pair authorised for the current user. No Airflow import here: the
connection helpers return plain data for ``AIRFLOW_CONN_<ID>``.

A session starts as on a stock broker host, not with the developer's dotfiles: sshd runs every
command through the user's bash, which reads ``~/.bashrc`` when started by sshd (Debian builds bash
with ``SSH_SOURCE_BASHRC``). Debian's stock ``.bashrc`` returns at once for a non-interactive shell;
a developer's may not (this machine's runs ``pyenv init`` twice, ~0.1 s a session, and puts pyenv's
shim first as ``python3``, ~0.09 s more a start). So sessions get an empty ``HOME`` of the server's
own and sshd's default ``PATH`` (plus the directory of the real ``python3`` when the system has none
there): a broker-side cost measured here is the product's, not the test machine's shell start-up.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from airflow_provider_kafka_zk.testing._process import (
    NoFreePortError,
    ServerProcess,
    free_port,
    pdeathsig_prefix,
    spawn_logged,
    terminate_at_exit,
)

__all__ = ["SshServer", "SshServerStartError", "SshdNotAvailable"]

APT_PACKAGES = "openssh-server openssh-client"
_SFTP_SERVERS = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
)
_PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without it ("Missing privilege separation directory")
MAX_LISTEN_ADDRESSES = 16
"""Listen sockets one sshd process opens at most (OpenSSH's ``MAX_LISTEN_SOCKS``, sshd.c)."""


class SshdNotAvailable(RuntimeError):
    """sshd or ssh-keygen is missing: the message names the apt packages to install."""


class SshServerStartError(RuntimeError):
    """sshd died or did not show its banner in time; the message ends with the sshd log's tail."""


_SSHD_DEFAULT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The ``PATH`` Debian's sshd gives root's sessions (``SUPERUSER_PATH``); others' has no sbin."""


def _session_environment(home: Path) -> str:
    """sshd_config's ``SetEnv`` line: ``HOME``; ``PATH`` only when sshd's default has no ``python3``
    (then that default plus the directory of this interpreter's real file: not a venv's link, not a
    version manager's shim)."""
    assignments = [f"HOME={home}"]
    if not any(os.access(os.path.join(d, "python3"), os.X_OK) for d in ("/usr/local/bin", "/usr/bin")):
        real = os.path.dirname(os.path.realpath(sys.executable))
        assignments.append("PATH=" + ":".join([*_SSHD_DEFAULT_PATH, real]))
    return "SetEnv " + " ".join(f'"{a}"' for a in assignments)


def _find_tool(name: str, extra_dirs: Iterable[str] = ("/usr/sbin", "/usr/bin")) -> str:
    # sshd re-executes itself for every connection and insists on an absolute path.
    found = shutil.which(name) or next(
        (os.path.join(d, name) for d in extra_dirs if os.path.isfile(os.path.join(d, name))), None
    )
    if found is None:
        raise SshdNotAvailable(f"{name} not found; install it with: apt-get install {APT_PACKAGES}")
    return os.path.abspath(found)


class SshServer(ServerProcess):
    """sshd on one free port, listening on each of ``addresses`` (loopback, one per fake host).

    One sshd process per :data:`MAX_LISTEN_ADDRESSES` addresses (any number of hosts), all sharing
    the keys, the port and one log. ``pid`` is the first process's; ``pids`` lists them all.
    ``stop()`` also ends live connections and keeps the keys; ``close()`` also deletes a work
    directory this object created.
    """

    def __init__(
        self,
        addresses: Sequence[str] = ("127.0.0.1",),
        *,
        port: int | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 15.0,
        stop_grace: float = 5.0,
    ) -> None:
        """Generate keys and pick a port (nothing runs until ``start()``).

        A given ``work_dir`` keeps its keys across instances (same host identity); a temporary one
        is deleted by ``close()``.
        """
        if not addresses:
            raise ValueError("SshServer needs at least one listen address")
        self._addresses = tuple(addresses)
        try:  # one port free on every address at once: sshd must bind them all
            self._port = port if port is not None else free_port(*self._addresses)
        except NoFreePortError as error:
            raise SshServerStartError(str(error)) from None
        self._user = getpass.getuser()
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self._owner_pid = os.getpid()
        self._sshd = _find_tool("sshd")
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="sshd-test-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._cleanup_dir = (
            None
            if work_dir
            else weakref.finalize(self, shutil.rmtree, str(self.work_dir), ignore_errors=True)
        )
        self._generate_key(self.host_key_path, "test-sshd-host-key")
        self._generate_key(self.client_private_key_path, "test-sshd-client-key")
        shutil.copyfile(self.client_private_key_path.with_suffix(".pub"), self.authorized_keys_path)
        self.known_hosts_path.write_text("".join(self.known_hosts_line(a) + "\n" for a in self._addresses))
        self._process: subprocess.Popen[bytes] | None = None  # the first of _processes
        self._processes: list[subprocess.Popen[bytes]] = []
        self._stop_finalizer: weakref.finalize | None = None
        self._stop_finalizers: list[weakref.finalize] = []

    # -- identity and addresses ----------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def addresses(self) -> tuple[str, ...]:
        return self._addresses

    @property
    def user(self) -> str:
        """The login that the client key opens: the user running sshd (root here)."""
        return self._user

    @property
    def host_key_path(self) -> Path:
        return self.work_dir / "ssh_host_ed25519_key"

    @property
    def client_private_key_path(self) -> Path:
        return self.work_dir / "client_ed25519_key"

    @property
    def authorized_keys_path(self) -> Path:
        return self.work_dir / "authorized_keys"

    @property
    def known_hosts_path(self) -> Path:
        """A known_hosts file naming this server on every address, for ``load_host_keys``/``ssh -o``."""
        return self.work_dir / "known_hosts"

    @property
    def session_home(self) -> Path:
        """``HOME`` of every session: empty, so no dotfile of the current user runs (module docstring)."""
        return self.work_dir / "session-home"

    @property
    def config_path(self) -> Path:
        """The first process's configuration (``sshd_config.<n>`` for the n-th further one)."""
        return self.work_dir / "sshd_config"

    @property
    def address_groups(self) -> tuple[tuple[str, ...], ...]:
        """The addresses each sshd process listens on, in order (16 at most each)."""
        return tuple(
            self._addresses[i : i + MAX_LISTEN_ADDRESSES]
            for i in range(0, len(self._addresses), MAX_LISTEN_ADDRESSES)
        )

    @property
    def pids(self) -> tuple[int, ...]:
        """PIDs of the running sshd processes (one per address group); empty when stopped."""
        return tuple(p.pid for p in self._processes) if self.is_running else ()

    @property
    def is_running(self) -> bool:
        return bool(self._processes) and all(p.poll() is None for p in self._processes)

    @property
    def log_path(self) -> Path:
        return self.work_dir / "sshd.log"

    @property
    def client_private_key(self) -> str:
        """OpenSSH-format private key text (for a ``private_key`` extra or paramiko.from_private_key)."""
        return self.client_private_key_path.read_text()

    @property
    def client_public_key(self) -> str:
        return _key_type_and_data(self.client_private_key_path.with_suffix(".pub"))

    @property
    def host_public_key(self) -> str:
        """``"ssh-ed25519 AAAA..."``: with its type prefix, as Airflow's ``host_key`` extra needs."""
        return _key_type_and_data(self.host_key_path.with_suffix(".pub"))

    def known_hosts_line(self, address: str) -> str:
        """The known_hosts entry for ``address`` (``[addr]:port ...`` unless the port is 22)."""
        host = address if self._port == 22 else f"[{address}]:{self._port}"
        return f"{host} {self.host_public_key}"

    def airflow_connection_fields(self, address: str, *, conn_timeout: int = 10) -> dict[str, Any]:
        """Connection fields in Airflow's JSON form (what ``Connection.from_json`` reads).

        Strict host-key checking with the generated key; no agent or ~/.ssh key guessing.
        """
        self._check_address(address)
        return {
            "conn_type": "ssh",
            "host": address,
            "port": self._port,
            "login": self._user,
            "extra": {
                "key_file": str(self.client_private_key_path),
                "host_key": self.host_public_key,
                "no_host_key_check": False,
                "look_for_keys": False,
                "conn_timeout": conn_timeout,
            },
        }

    def airflow_connection(self, address: str, conn_id: str, *, conn_timeout: int = 10) -> dict[str, str]:
        """``{"AIRFLOW_CONN_<CONN_ID>": "<json>"}``, ready for ``os.environ``/``monkeypatch.setenv``."""
        fields = self.airflow_connection_fields(address, conn_timeout=conn_timeout)
        return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(fields)}

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        """Start one sshd per address group and return once every address shows the SSH banner.

        SshServerStartError (every process started so far stopped again) when one cannot start:
        it names the addresses of the process that failed and ends with the log's tail.
        """
        if self.is_running:
            return self
        self.stop()  # a process of a group that died since: start all of them anew
        if os.geteuid() == 0:
            os.makedirs(_PRIVSEP_DIR, mode=0o755, exist_ok=True)
        try:
            for number, addresses in enumerate(self.address_groups):
                config = self._config_path(number)
                self._write_config(config, addresses, number)
                command = [*pdeathsig_prefix(), self._sshd, "-D", "-e", "-f", str(config)]
                where = f"port {self._port} ({_describe(addresses)})"
                process = spawn_logged(command, self.log_path, f"sshd on {where}", cwd=self.work_dir)
                self._processes.append(process)
                # Connection processes (and the commands they run) outlive the listener: stop them too.
                self._stop_finalizers.append(
                    terminate_at_exit(self, process, self._owner_pid, self.stop_grace, descendants=True)
                )
            self._process = self._processes[0]
            self._stop_finalizer = self._stop_finalizers[0]
            self._wait_for_banners()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Every sshd process by PID (SIGTERM, SIGKILL after the grace period), their connections too."""
        finalizers, self._stop_finalizers = self._stop_finalizers, []
        for finalizer in finalizers:
            finalizer()
        self._processes = []
        self._stop_finalizer = None
        self._process = None

    def __repr__(self) -> str:
        state = f"pids={','.join(map(str, self.pids))}" if self.is_running else "stopped"
        return f"<SshServer {_describe(self._addresses)} port={self._port} {state}>"

    # -- internals -----------------------------------------------------------------------------

    def _check_address(self, address: str) -> None:
        if address not in self._addresses:
            raise ValueError(f"{address!r} is not one of this server's addresses {self._addresses}")

    def _generate_key(self, path: Path, comment: str) -> None:
        if path.exists():  # a reused work_dir keeps its identity; ssh-keygen would prompt otherwise
            return
        subprocess.run(
            [_find_tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )

    def _config_path(self, number: int) -> Path:
        return self.config_path if number == 0 else self.work_dir / f"sshd_config.{number}"

    def _write_config(self, path: Path, addresses: Sequence[str], number: int) -> None:
        self.session_home.mkdir(exist_ok=True)
        sftp = next((p for p in _SFTP_SERVERS if os.path.isfile(p)), "internal-sftp")
        lines = [
            *(f"ListenAddress {address}:{self._port}" for address in addresses),
            f"HostKey {self.host_key_path}",
            f"PidFile {self.work_dir / ('sshd.pid' if number == 0 else f'sshd.{number}.pid')}",
            f"AuthorizedKeysFile {self.authorized_keys_path}",
            f"AllowUsers {self._user}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",  # temp dirs and keys are not laid out like ~/.ssh
            "PermitRootLogin prohibit-password",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            # Parallel tests and SSHHook retries open many connections at once; the defaults
            # (MaxStartups 10:30:100, MaxSessions 10) would start dropping them.
            "MaxStartups 200:30:400",
            "MaxSessions 100",
            _session_environment(self.session_home),
            f"Subsystem sftp {sftp}",
        ]
        path.write_text("\n".join(lines) + "\n")
        # OpenSSH >= 9.8 delays sources that disconnect before authenticating, which readiness
        # probes and host-key-rejection tests do on purpose. Older sshd rejects the keyword.
        if self._sshd_accepts(path, "PerSourcePenalties no"):
            path.write_text("\n".join([*lines, "PerSourcePenalties no"]) + "\n")

    def _sshd_accepts(self, config: Path, option_line: str) -> bool:
        keyword, value = option_line.split(" ", 1)
        result = subprocess.run(
            [self._sshd, "-t", "-f", str(config), "-o", f"{keyword}={value}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def _wait_for_banners(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        waiting = list(self._addresses)
        while waiting:
            for process, addresses in zip(self._processes, self.address_groups, strict=True):
                if process.poll() is not None:
                    raise SshServerStartError(
                        f"sshd for {_describe(addresses)} exited with code {process.returncode} while "
                        f"starting on port {self._port}; log {self.log_path} ends with:\n{self.log_tail()}"
                    )
            waiting = [a for a in waiting if not _shows_ssh_banner(a, self._port)]
            if waiting and time.monotonic() > deadline:
                raise SshServerStartError(
                    f"sshd did not show its banner on {_describe(waiting)} port {self._port} within "
                    f"{self.start_timeout:.0f}s; log {self.log_path} ends with:\n{self.log_tail()}"
                )
            if waiting:
                time.sleep(0.05)


def _describe(addresses: Sequence[str]) -> str:
    """``127.0.0.2`` or ``127.0.0.2 .. 127.0.0.17 (16 addresses)`` for messages."""
    if len(addresses) == 1:
        return addresses[0]
    return f"{addresses[0]} .. {addresses[-1]} ({len(addresses)} addresses)"


def _shows_ssh_banner(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0) as sock:
            return sock.recv(256).startswith(b"SSH-")
    except OSError:
        return False


def _key_type_and_data(public_key_path: Path) -> str:
    """``"<type> <base64>"`` from a .pub file, without the comment."""
    key_type, data = public_key_path.read_text().split()[:2]
    return f"{key_type} {data}"
