"""A throw-away MIT Kerberos KDC on loopback, for testing ZooKeeper SASL GSSAPI end to end.

Why: Kerberos is how many production ZooKeeper ensembles authenticate Kafka, and whether the hook's
GSSAPI path works (a ticket accepted, a missing ticket refused) only shows against a real KDC. This
one runs ``krb5kdc -n`` (Debian's ``krb5-kdc``) as a child process on a free 127.0.0.1 port with its
own database, ``krb5.conf`` and ``kdc.conf`` in a temporary directory (``KRB5_CONFIG`` and
``KRB5_KDC_PROFILE`` point the tools at them; nothing under /etc is read or changed), and is
stopped by PID. Principals are made with ``kadmin.local`` (``krb5-admin-server``), tickets with
``kinit`` (``krb5-user``). Needs: ``apt-get install krb5-kdc krb5-admin-server krb5-user``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Self

from airflow_provider_kafka_zk.testing._process import (
    ServerProcess,
    free_port,
    pdeathsig_prefix,
    spawn_logged,
    terminate_at_exit,
)

__all__ = ["KerberosKdc", "KerberosNotAvailable", "kerberos_tools_missing"]

APT_PACKAGES = "krb5-kdc krb5-admin-server krb5-user"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


class KerberosNotAvailable(RuntimeError):
    """The MIT Kerberos tools are not installed; the message names the apt packages."""


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.isfile(p)), None
    )


def kerberos_tools_missing() -> list[str]:
    """The MIT Kerberos programs this KDC needs that are not installed (empty: all there)."""
    return [t for t in _TOOLS if _tool(t) is None]


class KerberosKdc(ServerProcess):
    """One KDC for ``realm`` on a free loopback port; ``env`` is what a client process needs.

    :param realm: the realm (upper case by convention).
    :param host: the loopback address the KDC listens on.
    """

    def __init__(self, realm: str = "KAFKA-ZK.TEST", *, host: str = "127.0.0.1") -> None:
        missing = kerberos_tools_missing()
        if missing:
            raise KerberosNotAvailable(
                f"{', '.join(missing)} not found; install: apt-get install {APT_PACKAGES}"
            )
        self.realm = realm
        self.host = host
        self.port = free_port(host)
        self.directory = Path(tempfile.mkdtemp(prefix="kdc-test-"))
        self._cleanup_dir = weakref.finalize(self, shutil.rmtree, str(self.directory), ignore_errors=True)
        self._process: subprocess.Popen[bytes] | None = None
        self._stop_finalizer: weakref.finalize | None = None
        self._owner_pid = os.getpid()
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        self._write_config()
        self._run("kdb5_util", "create", "-s", "-r", realm, "-P", "kdc-master-password")

    @property
    def log_path(self) -> Path:
        return self.directory / "krb5kdc.log"

    @property
    def env(self) -> dict[str, str]:
        """``KRB5_CONFIG`` (and the KDC profile) pointing at this realm's files only."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _write_config(self) -> None:
        # TCP only (udp_preference_limit = 1) and no DNS: the JVM and libkrb5 both reach the KDC
        # on the loopback port, and "localhost" stays "localhost" in service principals.
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n  rdns = false\n"
            "  udp_preference_limit = 1\n  ticket_lifetime = 1h\n  forwardable = false\n"
            "[realms]\n"
            f"  {self.realm} = {{\n    kdc = {self.host}:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {self.realm}\n"
        )
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = {self.host}:{self.port}\n  kdc_tcp_listen = {self.host}:{self.port}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {self.directory}/principal\n"
            f"    key_stash_file = {self.directory}/stash\n"
            f"    acl_file = {self.directory}/kadm5.acl\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "    max_life = 1h\n  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.log_path}\n"
        )

    def _run(self, tool: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        path = _tool(tool)
        if path is None:
            raise KerberosNotAvailable(f"{tool} not found; install: apt-get install {APT_PACKAGES}")
        done = subprocess.run(
            [path, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **self.env, **(env or {})},
            cwd=self.directory,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(args[:2])} failed: {done.stderr.strip() or done.stdout.strip()}"
            )
        return done.stdout

    def start(self) -> Self:
        if self.is_running:
            return self
        settings = [f"{k}={v}" for k, v in self.env.items()]  # env(1) execs: the PID stays krb5kdc's
        command = [
            *pdeathsig_prefix(),
            "env",
            *settings,
            _tool("krb5kdc") or "krb5kdc",
            "-n",
            "-r",
            self.realm,
        ]
        self._process = spawn_logged(command, self.directory / "krb5kdc.out", "krb5kdc", cwd=self.directory)
        self._stop_finalizer = terminate_at_exit(self, self._process, self._owner_pid, 5.0)
        deadline = time.monotonic() + 20
        while True:
            self._raise_if_exited(RuntimeError, "krb5kdc", f"{self.host}:{self.port}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"krb5kdc did not listen on {self.host}:{self.port} within 20 s"
                    ) from None
                time.sleep(0.05)

    def principal(self, name: str) -> str:
        """``name@REALM``."""
        return f"{name}@{self.realm}"

    def add_principal(self, name: str, *, password: str | None = None, keytab: Path | None = None) -> str:
        """Create ``name`` (with ``password``, else a random key) and optionally export its keytab."""
        principal = self.principal(name)
        key = f"-pw {password}" if password is not None else "-randkey"
        self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc {key} {principal}")
        if keytab is not None:
            self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {keytab} {principal}")
        return principal

    def kinit(self, name: str, password: str, ccache: Path) -> None:
        """Get a ticket for ``name`` into the file cache ``ccache`` (what ``KRB5CCNAME`` names)."""
        self._run("kinit", self.principal(name), stdin=password + "\n", env={"KRB5CCNAME": f"FILE:{ccache}"})
