"""Real ZooKeeper servers secured the way production runs them: SASL DIGEST-MD5, TLS with client auth.

Why: production ZooKeeper-mode Kafka clusters are mostly secured (``zookeeper.set.acl=true`` with
SASL principals, often TLS on 3.5+), and the hook's SASL and TLS paths only mean something when a
real server has accepted (or refused) them. Both servers are :class:`ZooKeeperServer` subclasses
(loopback only, stopped by PID, data directory removed on ``close()``), configured as ZooKeeper's
admin guide says for 3.8:

* SASL: a JAAS ``Server`` section with ``DigestLoginModule`` users (``user_<name>="<password>"``),
  ``authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`` in zoo.cfg and
  ``-Djava.security.auth.login.config`` on the JVM. A client that authenticates as ``kafka`` gets
  the ZooKeeper id ``sasl:kafka`` (what Kafka's ``CREATOR_ALL_ACL`` expands to for its brokers).
* TLS: ``serverCnxnFactory=NettyServerCnxnFactory``, a ``secureClientPort`` on 127.0.0.1, PEM key
  and trust stores generated here with ``openssl`` (a throw-away CA, a server certificate for
  127.0.0.1/localhost, a client certificate, and a client certificate of *another* CA that the
  server must refuse) and ``ssl.clientAuth=need``. The plaintext ``clientPort`` stays open on
  loopback for readiness checks and test set-up, as many TLS migrations keep it.

Example::

    with SaslZooKeeperServer({"kafka": "kafka-secret"}) as zk:
        client = KazooClient(hosts=zk.connect_string, sasl_options={
            "mechanism": "DIGEST-MD5", "username": "kafka", "password": "kafka-secret"})
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_kafka_zk.testing._process import free_port
from airflow_provider_kafka_zk.testing.zookeeper import (
    DEFAULT_JVM_FLAGS,
    ZooKeeperNotAvailable,
    ZooKeeperServer,
)

__all__ = [
    "SaslZooKeeperServer",
    "TlsMaterial",
    "TlsZooKeeperServer",
    "generate_tls_material",
    "jaas_server_section",
    "kerberos_server_section",
]

SASL_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
NETTY_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"

# Debian's zookeeper.jar manifest names netty-buffer/common/handler/transport but not these, which
# the Netty factory needs as soon as a client connects (NoClassDefFoundError ByteToMessageDecoder).
_NETTY_EXTRA_JARS = (
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
)


def _jaas_quote(value: str) -> str:
    if '"' in value or "\\" in value or "\n" in value:
        raise ValueError("JAAS values in tests must not contain quotes, backslashes or newlines")
    return f'"{value}"'


def jaas_server_section(users: Mapping[str, str]) -> str:
    """The JAAS ``Server`` section ZooKeeper's DIGEST-MD5 SASL reads: one ``user_<name>`` per user.

    :param users: user name -> password.
    """
    if not users:
        raise ValueError("a SASL ZooKeeper needs at least one user")
    lines = [f"    user_{name}={_jaas_quote(password)}" for name, password in users.items()]
    return (
        "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        + "\n".join(lines)
        + ";\n};\n"
    )


def kerberos_server_section(keytab: str | os.PathLike[str], principal: str) -> str:
    """The JAAS ``Server`` section of a Kerberos (GSSAPI) ZooKeeper: its service key from ``keytab``.

    :param keytab: the keytab holding ``principal``'s key.
    :param principal: the server's principal, ``zookeeper/<host>@REALM``.
    """
    return (
        "Server {\n    com.sun.security.auth.module.Krb5LoginModule required\n"
        f"    useKeyTab=true keyTab={_jaas_quote(str(keytab))} storeKey=true useTicketCache=false\n"
        f"    principal={_jaas_quote(principal)};\n}};\n"
    )


class SaslZooKeeperServer(ZooKeeperServer):
    """A ZooKeeper that authenticates clients with SASL: DIGEST-MD5 against ``users``, or the JAAS
    section given (e.g. :func:`kerberos_server_section` with ``krb5_conf``, for GSSAPI).

    :param users: user name -> password of the JAAS ``Server`` section (DIGEST-MD5).
    :param jaas_section: a whole JAAS ``Server`` section instead (``users`` then unused).
    :param krb5_conf: the ``krb5.conf`` the JVM uses (``-Djava.security.krb5.conf``).
    :param require_sasl: also refuse every request of a session that did not authenticate with SASL
        (``enforce.auth.enabled``, ZooKeeper 3.7+); off by default, as on most Kafka ensembles.
    :param kwargs: passed to :class:`ZooKeeperServer` (``jvm_flags`` are added to, not replaced).
    """

    def __init__(
        self,
        users: Mapping[str, str] | None = None,
        *,
        jaas_section: str | None = None,
        krb5_conf: str | os.PathLike[str] | None = None,
        require_sasl: bool = False,
        **kwargs: Any,
    ) -> None:
        extra = dict(kwargs.pop("extra_config", None) or {})
        extra["authProvider.1"] = SASL_AUTH_PROVIDER
        if require_sasl:
            extra.update({"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"})
        flags = list(kwargs.pop("jvm_flags", DEFAULT_JVM_FLAGS))
        super().__init__(extra_config=extra, jvm_flags=flags, **kwargs)
        self.users = dict(users or {})
        self.jaas_path = self.data_dir / "jaas-server.conf"
        self.jaas_path.write_text(jaas_section or jaas_server_section(self.users))
        self.jvm_flags = (*self.jvm_flags, f"-Djava.security.auth.login.config={self.jaas_path}")
        if krb5_conf is not None:
            self.jvm_flags = (*self.jvm_flags, f"-Djava.security.krb5.conf={krb5_conf}")


@dataclass(frozen=True)
class TlsMaterial:
    """PEM files of a throw-away PKI for one TLS test server and its clients.

    ``server_pem`` holds the server's key and certificate (ZooKeeper's PEM key store format);
    ``client_cert``/``client_key`` are signed by ``ca_cert`` (accepted); ``rogue_cert``/``rogue_key``
    by another CA the server does not trust (refused under ``ssl.clientAuth=need``).
    """

    directory: Path
    ca_cert: Path
    server_pem: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    rogue_key: Path
    client_subject: str


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ZooKeeperNotAvailable("openssl not found; install it with: apt-get install openssl")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key.name, cwd=directory
    )
    _openssl(
        "req", "-x509", "-new", "-key", key.name, "-out", cert.name, "-days", "2",
        "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory,
    )  # fmt: skip
    return key, cert


def _leaf(
    directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: Sequence[str]
) -> tuple[Path, Path]:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.crt"
    ext = directory / f"{name}.ext"
    ext.write_text("".join(f"{line}\n" for line in extensions))
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key.name, cwd=directory
    )
    _openssl("req", "-new", "-key", key.name, "-out", csr.name, "-subj", subject, cwd=directory)
    _openssl(
        "x509", "-req", "-in", csr.name, "-CA", ca[1].name, "-CAkey", ca[0].name, "-CAcreateserial",
        "-out", cert.name, "-days", "2", "-extfile", ext.name, cwd=directory,
    )  # fmt: skip
    return key, cert


def generate_tls_material(
    directory: str | os.PathLike[str], *, hosts: Sequence[str] = ("127.0.0.1",)
) -> TlsMaterial:
    """Generate a CA, a server certificate for ``hosts`` (and localhost), a client certificate and a
    client certificate of an untrusted CA, as PEM files under ``directory`` (keys mode 0600).

    :param directory: where the files go (created if missing).
    :param hosts: the server's addresses, put in the certificate's subjectAltName.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca = _ca(out, "test-ca")
    rogue_ca = _ca(out, "rogue-ca")
    san = ",".join([*(f"IP:{h}" for h in hosts), "DNS:localhost"])
    server_key, server_cert = _leaf(
        out, "server", "/CN=zookeeper", ca,
        ["basicConstraints=CA:FALSE", f"subjectAltName={san}", "extendedKeyUsage=serverAuth,clientAuth"],
    )  # fmt: skip
    client_subject = "CN=kafka-zk-airflow,O=airflow-provider-kafka-zk"
    client_key, client_cert = _leaf(
        out, "client", "/O=airflow-provider-kafka-zk/CN=kafka-zk-airflow", ca,
        ["basicConstraints=CA:FALSE", "extendedKeyUsage=clientAuth"],
    )  # fmt: skip
    rogue_key, rogue_cert = _leaf(
        out, "rogue", "/CN=intruder", rogue_ca, ["basicConstraints=CA:FALSE", "extendedKeyUsage=clientAuth"]
    )
    server_pem = out / "server.pem"
    server_pem.write_bytes(server_key.read_bytes() + server_cert.read_bytes())
    for key in (server_key, client_key, rogue_key, server_pem, ca[0], rogue_ca[0]):
        key.chmod(0o600)
    return TlsMaterial(
        directory=out,
        ca_cert=ca[1],
        server_pem=server_pem,
        client_cert=client_cert,
        client_key=client_key,
        rogue_cert=rogue_cert,
        rogue_key=rogue_key,
        client_subject=client_subject,
    )


class TlsZooKeeperServer(ZooKeeperServer):
    """A ZooKeeper with a TLS ``secureClientPort`` (Netty) that requires a client certificate.

    ``secure_connect_string`` is the TLS address; ``connect_string`` stays the plaintext loopback
    port (readiness, set-up). Certificates are generated into the data directory.

    :param client_auth: ``ssl.clientAuth``: ``need`` (default), ``want`` or ``none``.
    :param kwargs: passed to :class:`ZooKeeperServer`.
    """

    def __init__(self, *, client_auth: str = "need", **kwargs: Any) -> None:
        extra = dict(kwargs.pop("extra_config", None) or {})
        classpath = [*kwargs.pop("extra_classpath", ()), *(j for j in _NETTY_EXTRA_JARS if os.path.isfile(j))]
        super().__init__(extra_config=extra, extra_classpath=classpath, **kwargs)
        self.secure_port = free_port(self.host)
        self.tls = generate_tls_material(self.data_dir / "tls", hosts=(self.host,))
        self.extra_config.update(
            {
                "serverCnxnFactory": NETTY_FACTORY,
                "secureClientPort": str(self.secure_port),
                "secureClientPortAddress": self.host,
                "ssl.keyStore.location": str(self.tls.server_pem),
                "ssl.keyStore.type": "PEM",
                "ssl.trustStore.location": str(self.tls.ca_cert),
                "ssl.trustStore.type": "PEM",
                "ssl.clientAuth": client_auth,
                "ssl.hostnameVerification": "false",  # client certificates name no host
            }
        )

    @property
    def secure_connect_string(self) -> str:
        """``host:securePort``: where a client must speak TLS."""
        return f"{self.host}:{self.secure_port}"
