"""The paramiko half of ``broker_host``: Airflow's SSHHook with host keys always verified.

A module of its own so that paramiko and the SSH provider (~0.08 s of CPU to import) load when a
task first connects to a broker host, not in every task process that parses a DAG file importing
the operators.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from typing import Any

import paramiko
from airflow.providers.ssh.hooks.ssh import SSHHook

from airflow_provider_kafka_zk.hooks._host_key_policy import SYSTEM_KNOWN_HOSTS, HostKeyPolicyError

log = logging.getLogger(__name__)


class UnknownHostKeyError(paramiko.SSHException):
    """No key is trusted for the host: refused before authenticating, naming the key it offered."""

    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        self.hostname = hostname
        self.key = key
        super().__init__(f"no trusted host key for {hostname}")


class StrictSSHHook(SSHHook):
    """Airflow's SSHHook for one broker host, with host keys always verified.

    Everything is SSHHook's own, connecting included (its ``get_conn``, SSH provider 7.0.1: it trusts
    ``host_key`` and ``~/.ssh/known_hosts``, and with host-key checks on it keeps paramiko's default
    ``RejectPolicy``, which refuses any other host). This subclass only decides, as it connects,
    which key ``host_key`` is: the connection's own, else this host's entry in the known_hosts files
    given, else in the system files. With none trusted it does not connect at all, and names the key
    the host offers (read by a bare key exchange, before any authentication). A key for the host in
    ``~/.ssh/known_hosts`` is checked first (paramiko's "system" keys), as SSHHook has it.

    :param known_hosts: known_hosts files trusted besides the connection's ``host_key`` and the
        system files.
    :param connection: the Airflow connection already fetched on the task's thread (SSHHook would
        fetch it again, which fails in a worker thread for connections stored in the DB).
    :param args: SSHHook's (``ssh_conn_id``, ``remote_host`` ...); also ``kwargs``.
    """

    def __init__(
        self, *args: Any, known_hosts: Sequence[str] = (), connection: Any = None, **kwargs: Any
    ) -> None:
        # ``connection``: the Airflow connection already fetched on the task's own thread. SSHHook
        # would fetch it again in __init__, which fails in a worker thread of a running task (the
        # task's channel to the API server is not thread-safe) for connections stored in the DB.
        self._preloaded_connection = connection
        self._trusted_key: paramiko.PKey | None = None
        super().__init__(*args, **kwargs)
        if self.no_host_key_check or self.allow_host_key_change:
            raise HostKeyPolicyError(
                f"SSH connection {self.ssh_conn_id!r} disables host-key checking "
                "(no_host_key_check / allow_host_key_change); broker hosts are always verified: "
                "give host_key or a known_hosts file instead"
            )
        self.known_hosts_files = tuple(known_hosts)

    @property  # type: ignore[override]
    def host_key(self) -> paramiko.PKey | None:
        """The key SSHHook.get_conn trusts: the one chosen for this connect, else the connection's."""
        return self._trusted_key or self._connection_host_key

    @host_key.setter
    def host_key(self, value: paramiko.PKey | None) -> None:  # SSHHook.__init__ parses the extra
        self._connection_host_key = value

    def get_connection(self, conn_id: str) -> Any:  # type: ignore[override]
        preloaded = self._preloaded_connection
        if preloaded is not None and conn_id == self.ssh_conn_id:
            return preloaded
        return super().get_connection(conn_id)

    @property
    def known_hosts_name(self) -> str:
        """This host as known_hosts names it (``[host]:port`` off port 22)."""
        return self.remote_host if self.port == 22 else f"[{self.remote_host}]:{self.port}"

    def load_trusted_host_keys(self, keys: paramiko.HostKeys) -> None:
        """The known_hosts files given, then the system files, into ``keys`` (first entry wins).

        ``HostKeys.load`` records no file name: nothing is ever written back.
        """
        for path in self.known_hosts_files:
            expanded = os.path.expanduser(path)
            if not os.path.isfile(expanded):
                raise HostKeyPolicyError(f"known_hosts file {path!r} of {self.ssh_conn_id!r} does not exist")
            keys.load(expanded)
        for path in SYSTEM_KNOWN_HOSTS:
            expanded = os.path.expanduser(path)
            if os.path.isfile(expanded):
                try:
                    keys.load(expanded)
                except (OSError, paramiko.SSHException) as exc:
                    log.warning("Ignoring unreadable %s: %s", path, type(exc).__name__)

    def trusted_host_key(self) -> paramiko.PKey | None:
        """The connection's host_key, else the first key the known_hosts files hold for this host.

        paramiko asks the server for the trusted key's type first (``SSHClient.connect``).
        """
        if self._connection_host_key is not None:
            return self._connection_host_key
        keys = paramiko.HostKeys()
        self.load_trusted_host_keys(keys)
        entry = keys.lookup(self.known_hosts_name)
        return next(iter(entry.values()), None) if entry else None

    def offered_host_key(self) -> paramiko.PKey:
        """The key the host offers, by a key exchange alone (no authentication, nothing sent)."""
        sock = self.host_proxy or socket.create_connection(
            (self.remote_host, self.port), timeout=self.conn_timeout
        )
        transport = paramiko.Transport(sock)
        try:
            transport.start_client(timeout=self.conn_timeout)
            return transport.get_remote_server_key()
        finally:
            transport.close()

    def get_conn(self) -> paramiko.SSHClient:
        """SSHHook.get_conn with ``host_key`` set to the trusted key; refused before connecting when
        none is trusted (UnknownHostKeyError names the key offered). paramiko's exceptions propagate."""
        transport = self.client.get_transport() if self.client is not None else None
        if transport is None or not transport.is_active():
            trusted = self.trusted_host_key()
            if trusted is None:
                raise UnknownHostKeyError(self.known_hosts_name, self.offered_host_key())
            self._trusted_key = trusted
        return super().get_conn()
