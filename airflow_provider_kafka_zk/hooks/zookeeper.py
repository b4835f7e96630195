"""Hook for the ZooKeeper ensemble a ZooKeeper-mode Kafka cluster keeps its metadata in.

Reads are typed (decoded by the core codecs, with the Stat that carries the epochs Kafka keeps
there); writes exist only as guarded operations -- create-if-absent, set-if-version, and an atomic
multi-op, never larger than the server's ``jute.maxbuffer`` -- and every one is refused on a
``read_only`` connection and outside a maintenance session
(:mod:`airflow_provider_kafka_zk.maintenance`): the session is bound to the hook as its *write
gate*, which fences every write with the cluster's maintenance lease (a CheckVersion op in the same
multi-op), gives created znodes the ACL Kafka uses there, and logs every change. Connections may
use digest, SASL (DIGEST-MD5, Kerberos) and TLS with client certificates; refused credentials and
certificates are typed errors. Nothing here logs znode data: the kazoo clients get a logger that
drops kazoo's DEBUG records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from airflow.sdk import BaseHook

from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import (
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    PIPELINED_SESSIONS,
    SnapshotWalk,
    WalkProgress,
    ZnodeTreeWalker,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

_KAZOO_LOG = logging.getLogger("airflow_provider_kafka_zk.kazoo")
_KAZOO_LOG.setLevel(logging.INFO)  # kazoo's DEBUG lines carry request and reply payloads

DEFAULT_PORT = 2181

DEFAULT_JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default ``jute.maxbuffer`` (1 MiB - 1): the largest request (after its 4-byte length
prefix) a server accepts; a bigger one makes it close the connection (``Len error``, NIOServerCnxn /
NettyServerCnxn at release-3.8.0). Set the server's value with the ``jute_maxbuffer`` extra or
``[kafka_zk] jute_maxbuffer`` when the ensemble runs with another ``-Djute.maxbuffer``."""


class ZooKeeperConnectionError(ConnectionError):
    """The ensemble could not be reached, or the chroot holds no Kafka cluster."""


class ZooKeeperTlsError(ZooKeeperConnectionError):
    """The TLS handshake with the ensemble failed (certificate refused or not trusted)."""


class ZooKeeperSaslUnavailableError(ZooKeeperConnectionError):
    """The connection asks for a SASL mechanism this Python environment cannot speak."""


@dataclass(frozen=True)
class ZooKeeperConnectionConfig:
    """Everything needed to open a kazoo session, parsed from an Airflow connection.

    Kept free of Airflow types so it is unit-testable and printable: ``__repr__`` never shows secrets.
    """

    hosts: tuple[str, ...]
    chroot: str = ""
    auth_scheme: str = "none"
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    sasl_mechanism: str = "DIGEST-MD5"
    use_ssl: bool = False
    verify_certs: bool = True
    check_hostname: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    sasl_service: str = "zookeeper"
    session_timeout: float = 30.0
    connect_timeout: float = 15.0
    read_only: bool = False
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER

    @property
    def identity(self) -> str:
        """Who this connection authenticates as, for error messages (never the password)."""
        if self.auth_scheme == "none":
            who = "an unauthenticated session (world:anyone)"
        elif self.auth_scheme == "sasl" and self.sasl_mechanism == "GSSAPI":
            who = (
                f"Kerberos (SASL GSSAPI) principal {self.login!r}"
                if self.login
                else "Kerberos (SASL GSSAPI) principal of the ticket cache"
            )
        elif self.auth_scheme == "sasl":
            who = f"SASL {self.sasl_mechanism} principal {self.login!r}"
        else:
            who = f"digest user {self.login!r}"
        if self.use_ssl and self.cert_file:
            who += f" with TLS client certificate {self.cert_file}"
        return who

    @property
    def authenticated(self) -> bool:
        """Whether the server gives this session an id besides world:anyone (digest, SASL, or the
        x509 id of a TLS client certificate): what ZooKeeper's ``auth`` ACL scheme expands to."""
        return self.auth_scheme != "none" or (self.use_ssl and bool(self.cert_file))

    @property
    def connect_string(self) -> str:
        """``h1:p1,h2:p2/chroot``: kazoo applies the chroot to every path."""
        return ",".join(self.hosts) + self.chroot

    @classmethod
    def from_connection(
        cls,
        host: str | None,
        port: int | None,
        login: str | None,
        password: str | None,
        extra: dict[str, Any],
    ) -> ZooKeeperConnectionConfig:
        if not host:
            raise ValueError("kafka_zookeeper connection has no host: give 'zk1:2181,zk2:2181,...'")
        default_port = int(port or DEFAULT_PORT)
        chroot_in_host = ""
        if "/" in host:
            host, chroot_in_host = host.split("/", 1)
            chroot_in_host = "/" + chroot_in_host
        hosts = tuple(_with_port(h.strip(), default_port) for h in host.split(",") if h.strip())
        chroot = _normalise_chroot(extra.get("chroot") or chroot_in_host)
        scheme = (extra.get("auth_scheme") or ("digest" if login else "none")).lower()
        if scheme not in ("none", "digest", "sasl"):
            raise ValueError(f"kafka_zookeeper auth_scheme must be none, digest or sasl, not {scheme!r}")
        mechanism = str(extra.get("sasl_mechanism") or "DIGEST-MD5").upper()
        if scheme == "sasl" and mechanism not in ("DIGEST-MD5", "GSSAPI"):
            raise ValueError(
                f"kafka_zookeeper sasl_mechanism must be DIGEST-MD5 or GSSAPI, not {mechanism!r}"
            )
        # GSSAPI takes its principal from the Kerberos ticket cache when no login names one
        if scheme != "none" and not login and not (scheme == "sasl" and mechanism == "GSSAPI"):
            raise ValueError(f"kafka_zookeeper auth_scheme {scheme!r} needs a login")
        jute_maxbuffer = int(extra.get("jute_maxbuffer") or DEFAULT_JUTE_MAXBUFFER)
        if jute_maxbuffer < 4096:
            raise ValueError(f"kafka_zookeeper jute_maxbuffer must be >= 4096 bytes, not {jute_maxbuffer}")
        return cls(
            hosts=hosts,
            chroot=chroot,
            auth_scheme=scheme,
            login=login or None,
            password=password or None,
            sasl_mechanism=mechanism,
            sasl_service=extra.get("sasl_service") or "zookeeper",
            use_ssl=_as_bool(extra.get("use_ssl"), False),
            verify_certs=_as_bool(extra.get("verify_certs"), True),
            check_hostname=_as_bool(extra.get("check_hostname"), False),
            ca_file=extra.get("ca_file") or None,
            cert_file=extra.get("cert_file") or None,
            key_file=extra.get("key_file") or None,
            key_password=extra.get("key_password") or None,
            session_timeout=float(extra.get("session_timeout") or 30.0),
            connect_timeout=float(extra.get("connect_timeout") or 15.0),
            read_only=_as_bool(extra.get("read_only"), False),
            jute_maxbuffer=jute_maxbuffer,
        )

    def kazoo_kwargs(self) -> dict[str, Any]:
        """Arguments for ``KazooClient``; secrets only ever travel here, never to a log line."""
        kwargs: dict[str, Any] = {
            "hosts": self.connect_string,
            "timeout": self.session_timeout,
            "connection_retry": {"max_tries": 3, "delay": 0.5, "backoff": 2, "max_delay": 5},
            "command_retry": {"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 5},
        }
        if self.auth_scheme == "digest":
            kwargs["auth_data"] = [("digest", f"{self.login}:{self.password or ''}")]
        elif self.auth_scheme == "sasl" and self.sasl_mechanism == "GSSAPI":
            # pure-sasl's GSSAPI: the server principal is <service>@<host of the connect string>
            kwargs["sasl_options"] = {"mechanism": "GSSAPI", "service": self.sasl_service}
            if self.login:
                kwargs["sasl_options"]["principal"] = self.login
        elif self.auth_scheme == "sasl":
            kwargs["sasl_options"] = {
                "mechanism": self.sasl_mechanism,
                "service": self.sasl_service,
                "username": self.login,
                "password": self.password,
            }
        if self.use_ssl:
            kwargs.update(
                use_ssl=True,
                verify_certs=self.verify_certs,
                ca=self.ca_file,
                certfile=self.cert_file,
                keyfile=self.key_file,
                keyfile_password=self.key_password,
            )
            if self.check_hostname:  # kazoo's default is off; passed only when asked for
                kwargs["check_hostname"] = True
        return kwargs


class _ConnectionFailures(logging.Logger):
    """kazoo's logger for one client: records go on to the shared kazoo logger, and the last
    connection failure kazoo logged (a refused TLS certificate, a reset) is kept for the error
    the hook raises when the client does not connect (kazoo itself only says "time-out")."""

    def __init__(self) -> None:
        super().__init__(_KAZOO_LOG.name, logging.INFO)
        self.parent = _KAZOO_LOG  # not registered with logging's manager: garbage-collected with the hook
        self.last_failure: str | None = None
        self.auth_failure: str | None = None  # the server refused the credentials, or the SASL client failed

    def handle(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:  # kazoo's connection thread died
            exc = record.exc_info[1]
            self.last_failure = f"{type(exc).__name__}: {exc}"
            frames = traceback.extract_tb(exc.__traceback__)
            if any(frame.name == "_authenticate_with_sasl" for frame in frames):
                self.auth_failure = self.last_failure
        elif record.levelno >= logging.WARNING:
            message = record.getMessage()
            if "Connection dropped" in message or "SSL" in message or "error" in message.lower():
                self.last_failure = message.removeprefix("Connection dropped: ")
            if message.startswith("AUTH_FAILED"):
                self.auth_failure = message
        super().handle(record)


def _certificate_subject(config: ZooKeeperConnectionConfig) -> str | None:
    """The ``x509:`` id ZooKeeper gives a session with this client certificate: its subject in RFC
    2253 form (X509AuthenticationProvider, ``getSubjectX500Principal().getName()``); None without one."""
    if not (config.use_ssl and config.cert_file):
        return None
    try:
        from cryptography import x509

        with open(config.cert_file, "rb") as pem:
            return x509.load_pem_x509_certificate(pem.read()).subject.rfc4514_string()
    except (ImportError, OSError, ValueError):
        return None  # the handshake will say what is wrong with the file


def _check_sasl_support(config: ZooKeeperConnectionConfig) -> None:
    """Fail before connecting when kazoo could not even start the SASL exchange (it would retry
    inside its connection thread until the connect timeout, and say only "time-out")."""
    try:
        import puresasl.mechanisms
    except ImportError:
        raise ZooKeeperSaslUnavailableError(
            "kafka_zookeeper auth_scheme 'sasl' needs the pure-sasl package (a dependency of "
            "airflow-provider-kafka-zk): pip install 'pure-sasl>=0.6.2'"
        ) from None
    if config.sasl_mechanism == "GSSAPI" and not puresasl.mechanisms.have_kerberos:
        raise ZooKeeperSaslUnavailableError(
            "kafka_zookeeper sasl_mechanism 'GSSAPI' (Kerberos) needs the 'kerberos' Python package "
            "beside pure-sasl (pip install kerberos; it builds against the MIT Kerberos headers, "
            "apt-get install libkrb5-dev) and a ticket for the worker (kinit, or KRB5CCNAME)"
        )


def _with_port(host: str, default_port: int) -> str:
    if host.startswith("["):  # [ipv6]:port
        return host if "]:" in host else f"{host}:{default_port}"
    return host if ":" in host else f"{host}:{default_port}"


def _normalise_chroot(chroot: str) -> str:
    if not chroot or chroot == "/":
        return ""
    if not chroot.startswith("/"):
        raise ValueError(f"kafka_zookeeper chroot must start with '/': {chroot!r}")
    normalised = posixpath.normpath(chroot)
    if normalised != chroot.rstrip("/") or "/./" in chroot or "/../" in chroot:
        raise ValueError(f"kafka_zookeeper chroot is not a plain absolute path: {chroot!r}")
    return normalised


def _as_bool(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class ZnodeNotFoundError(LookupError):
    """A znode the caller needs does not exist (the message names it, chroot included)."""

    def __init__(self, path: str, where: str) -> None:
        self.path = path
        super().__init__(f"znode {where} does not exist")


class ZooKeeperWriteRefusedError(PermissionError):
    """A write was attempted through a connection marked ``read_only``."""


class WriteOutsideSessionError(ZooKeeperWriteRefusedError):
    """A write was attempted without a maintenance session bound to the hook (a programming error)."""


class ZooKeeperAuthError(PermissionError):
    """ZooKeeper refused a request on ACL or authentication grounds; names the znode and the identity."""

    def __init__(self, path: str | None, where: str, identity: str, reason: str) -> None:
        self.path = path
        self.identity = identity
        target = f"znode {where}" if path else where
        super().__init__(
            f"ZooKeeper refused access to {target} for {identity} ({reason}): the credentials of the "
            "kafka_zookeeper connection lack the permission, or the ACL was set by another principal; "
            "check the connection's login/auth_scheme and `getAcl` of that path"
        )


class WriteGate(Protocol):
    """What a maintenance session provides to the hook for every write (see ``bind_gate``)."""

    def fence_ops(self) -> list[ZnodeOp]:
        """Ops prepended to every multi-op: the lease check that makes a stolen lease fail the write."""

    def acl_for(self, path: str) -> list[Any]:
        """kazoo ACL list for a znode about to be created at ``path``."""

    def after_write(self, changes: list[dict[str, Any]]) -> None:
        """Record what was just committed (the run's change log)."""

    def fence_failed(self, message: str) -> Exception:
        """The error to raise when the fence op failed (the lease is gone): nothing was applied."""


class ZnodeVersionConflictError(RuntimeError):
    """A versioned write found another version: someone else changed the znode since it was read."""

    def __init__(self, path: str, where: str, expected: int, actual: int | None) -> None:
        self.path = path
        self.expected_version = expected
        self.actual_version = actual
        found = "it is gone" if actual is None else f"it is at version {actual}"
        super().__init__(
            f"znode {where}: expected version {expected}, but {found}; re-read it and decide again"
        )


class MultiOpError(RuntimeError):
    """A multi-op was rolled back: ``index`` is the op that failed, nothing of it was applied."""

    def __init__(
        self,
        index: int,
        op: ZnodeOp,
        where: str,
        reason: str,
        committed_before: int = 0,
        committed_ops: int = 0,
    ) -> None:
        self.index = index
        self.op = op
        self.path = op.path
        self.reason = reason
        self.committed_before = committed_before
        self.committed_ops = committed_ops
        prefix = f"{committed_before} earlier multi-op(s) were committed; " if committed_before else ""
        super().__init__(
            f"{prefix}multi-op rolled back: op {index} ({type(op).__name__} on {where}) failed with {reason}"
        )


class MultiOpTooLargeError(ValueError):
    """A multi-op would exceed the server's ``jute.maxbuffer``: refused here, nothing of it was sent.

    Sent anyway, ZooKeeper would drop the connection ("Len error", nothing applied) and kazoo would
    report only a lost connection, leaving the caller unsure whether the write happened.
    """

    def __init__(self, path: str, where: str, size: int, limit: int, *, ops: int = 1) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        self.committed_before = 0
        self.committed_ops = 0
        what = (
            f"a multi-op of {ops} op(s) (largest on znode {where})"
            if ops > 1
            else f"the write of znode {where}"
        )
        super().__init__(
            f"{what} is {size} bytes on the wire, over ZooKeeper's jute.maxbuffer of {limit} bytes: "
            "nothing was sent; split the change (multi_split) or, if the servers run a larger "
            "-Djute.maxbuffer, set the connection's jute_maxbuffer extra (or [kafka_zk] jute_maxbuffer)"
        )


class _Unchrooted:
    """A transaction's async result with created paths made chroot-relative again (as kazoo does)."""

    def __init__(self, result: Any, chroot: str) -> None:
        self._result = result
        self._chroot = chroot

    def get(self) -> list[Any]:
        out = []
        for item in self._result.get():
            if isinstance(item, str) and item.startswith(self._chroot + "/"):
                item = item[len(self._chroot) :]
            out.append(item)
        return out


class TargetNotEmptyError(RuntimeError):
    """A snapshot load was pointed at a chroot that already holds znodes."""


def _check_version(expected_version: int, what: str) -> int:
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
        raise ValueError(
            f"{what} needs the version read before (an int >= 0), not {expected_version!r}: "
            "unversioned writes are not offered"
        )
    return expected_version


@dataclass(frozen=True)
class CreateOp:
    """Create ``path`` (persistent) with ``data``; fails the multi-op if it exists.

    ``sequential`` appends ZooKeeper's 10-digit sequence number (Kafka's notification znodes).
    """

    path: str
    data: bytes | None
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    """Set ``path`` to ``data`` only if its version is still ``expected_version`` (None: null data)."""

    path: str
    data: bytes | None
    expected_version: int

    def __post_init__(self) -> None:
        _check_version(self.expected_version, "SetDataOp")


@dataclass(frozen=True)
class DeleteOp:
    """Delete ``path`` only if its version is still ``expected_version`` (and it has no children)."""

    path: str
    expected_version: int

    def __post_init__(self) -> None:
        _check_version(self.expected_version, "DeleteOp")


@dataclass(frozen=True)
class CheckVersionOp:
    """Fail the multi-op unless ``path`` is at ``expected_version`` (a fence, as Kafka's controller uses)."""

    path: str
    expected_version: int

    def __post_init__(self) -> None:
        _check_version(self.expected_version, "CheckVersionOp")


ZnodeOp: TypeAlias = CreateOp | SetDataOp | DeleteOp | CheckVersionOp


@dataclass(frozen=True)
class SnapshotLoadReport:
    """What a snapshot load into a scratch chroot did, and what it could not reproduce."""

    target: str
    created: int
    versions_replayed: int
    ephemerals_as_persistent: tuple[tuple[str, int], ...]
    versions_not_replayed: tuple[tuple[str, int], ...]
    duration_s: float
    not_reproduced: tuple[str, ...] = (
        "czxid/mzxid/pzxid/ctime/mtime (assigned by the scratch ZooKeeper)",
        "cversion and aversion",
        "ACLs (everything is created world-readable/writable in the scratch chroot)",
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "created": self.created,
            "versions_replayed": self.versions_replayed,
            "ephemerals_as_persistent": [
                {"path": p, "owner_session": f"0x{o:x}"} for p, o in self.ephemerals_as_persistent
            ],
            "versions_not_replayed": [{"path": p, "version": v} for p, v in self.versions_not_replayed],
            "not_reproduced": list(self.not_reproduced),
            "duration_s": round(self.duration_s, 3),
        }


CONN_TYPE = "kafkazookeeper"
"""The connection type. No ``_``: a URI scheme may not hold one (RFC 3986 section 3.1), and Airflow 3.3's
``Connection.get_uri()`` -- called on every connection fetch to cache it -- logs "Connection schemes
(type: ...) shall not contain '_'" for a type that does (``airflow/models/connection.py``); no ``-``
either: Airflow reads ``-`` in a URI scheme back as ``_``. Airflow's own providers do the same
(``pydantic_ai`` became ``pydanticai``)."""
LEGACY_CONN_TYPE = "kafka_zookeeper"
"""The type's first name; connections saved with it still work (:class:`LegacyKafkaZooKeeperHook`)."""


class KafkaZooKeeperHook(BaseHook):
    """ZooKeeper of one Kafka cluster, through kazoo, rooted at the cluster's chroot.

    Reads are typed; writes go only through guarded operations (create-if-absent, versioned set,
    atomic multi-op) and are refused when the connection is marked read-only.

    :param kafka_zookeeper_conn_id: the Airflow connection (type ``kafka_zookeeper``).
    :param chroot: overrides the connection's chroot (a scratch chroot for forensics on the same
        ensemble).
    """

    conn_name_attr = "kafka_zookeeper_conn_id"
    default_conn_name = "kafka_zookeeper_default"
    conn_type = CONN_TYPE
    hook_name = "Kafka ZooKeeper"

    def __init__(
        self,
        kafka_zookeeper_conn_id: str = default_conn_name,
        *,
        chroot: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self._chroot_override = None if chroot is None else _normalise_chroot(chroot)
        self._config: ZooKeeperConnectionConfig | None = None
        self._client: KazooClient | None = None
        self._gate: WriteGate | None = None

    @property
    def config(self) -> ZooKeeperConnectionConfig:
        if self._config is None:
            conn = self.get_connection(self.kafka_zookeeper_conn_id)
            extra = dict(conn.extra_dejson) if conn.extra else {}
            if not extra.get("jute_maxbuffer"):
                from airflow.sdk.configuration import conf

                extra["jute_maxbuffer"] = conf.get("kafka_zk", "jute_maxbuffer", fallback=None)
            config = ZooKeeperConnectionConfig.from_connection(
                conn.host, conn.port, conn.login, conn.password, extra
            )
            if self._chroot_override is not None:
                config = dataclasses.replace(config, chroot=self._chroot_override)
            self._config = config
        return self._config

    def _new_client(self, config: ZooKeeperConnectionConfig) -> KazooClient:
        from kazoo.client import KazooClient

        if config.auth_scheme == "sasl":
            _check_sasl_support(config)
        self._kazoo_log = _ConnectionFailures()
        return KazooClient(**config.kazoo_kwargs(), logger=self._kazoo_log)

    def get_conn(self) -> KazooClient:
        """A started kazoo client (one per hook); raises ZooKeeperConnectionError if unreachable."""
        if self._client is None:
            config = self.config
            client = self._new_client(config)
            log.info("Connecting to ZooKeeper %s (chroot %r)", ",".join(config.hosts), config.chroot or "/")
            self._start(client, config)
            self._client = client
        return self._client

    def _start(self, client: KazooClient, config: ZooKeeperConnectionConfig) -> None:
        from kazoo.exceptions import AuthFailedError, ConnectionClosedError, ConnectionLoss
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            client.start(timeout=config.connect_timeout)
            if config.auth_scheme == "sasl":
                # kazoo reports CONNECTED before its SASL exchange ends; a refused exchange only
                # shows on the next request. One cheap read here makes the failure say so at once.
                client.exists("/")
        except (KazooTimeoutError, AuthFailedError, ConnectionLoss, ConnectionClosedError) as exc:
            client.stop()  # ends kazoo's retry loop, so close() can release the sockets
            client.close()
            # Which of these kazoo raises for refused credentials depends on when start() looks:
            # AuthFailedError, or a "time-out" / lost connection when the SASL step (the server's
            # AUTH_FAILED, or pure-sasl raising, e.g. GSSAPI without a ticket) ended kazoo's
            # connection thread first. What kazoo logged tells them apart.
            if isinstance(exc, AuthFailedError) or self._kazoo_log.auth_failure:
                raise self._sasl_refused(config) from None
            if isinstance(exc, KazooTimeoutError):
                raise self._unreachable(config) from None
            raise

    def _sasl_refused(self, config: ZooKeeperConnectionConfig) -> ZooKeeperAuthError:
        """The typed error for refused credentials, naming the chroot's root and the identity."""
        failure = self._kazoo_log.auth_failure or ""
        if not failure or failure.startswith("AUTH_FAILED"):
            reason = "authentication failed"
        else:
            hint = " (no Kerberos ticket? kinit, KRB5CCNAME)" if config.sasl_mechanism == "GSSAPI" else ""
            reason = f"SASL {config.sasl_mechanism} failed: {failure}{hint}"
        return ZooKeeperAuthError("/", self.describe_path("/"), config.identity, reason)

    def _unreachable(self, config: ZooKeeperConnectionConfig) -> ZooKeeperConnectionError:
        where = f"ZooKeeper {','.join(config.hosts)} (connection {self.kafka_zookeeper_conn_id!r})"
        last = getattr(self, "_kazoo_log", None)
        reason = last.last_failure if last is not None else None
        if config.use_ssl and reason and ("SSL" in reason or "certificate" in reason.lower()):
            return ZooKeeperTlsError(
                f"TLS handshake with {where} failed: {reason}; the server refused or could not "
                f"verify {config.identity} (client certificate {config.cert_file or 'none'}, CA "
                f"{config.ca_file or 'system default'}): check cert_file/key_file/ca_file and the "
                "server's ssl.trustStore / ssl.clientAuth"
            )
        detail = f"; last error: {reason}" if reason else ""
        return ZooKeeperConnectionError(f"{where} did not answer within {config.connect_timeout:g}s{detail}")

    def _restart_client(self) -> None:
        """New session on the same client once kazoo gave up reconnecting (used by long walks).

        Only ``start()``: a ``stop()`` first would queue a Close request that the new connection
        would send, closing the new session at once. On a timeout kazoo keeps retrying.
        """
        from kazoo.handlers.threading import KazooTimeoutError

        client = self.get_conn()
        try:
            client.start(timeout=self.config.connect_timeout)
        except KazooTimeoutError:
            raise self._unreachable(self.config) from None

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.stop()
            finally:
                self._client.close()
                self._client = None

    def __enter__(self) -> KafkaZooKeeperHook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe_path(self, path: str) -> str:
        """``path`` as an operator reads it in a log line: with the chroot it lives under."""
        chroot = self.config.chroot
        return f"{path} (chroot {chroot})" if chroot else path

    def target_description(self) -> dict[str, Any]:
        """Hosts and chroot, never credentials: what artefacts and logs may say about the target."""
        config = self.config
        return {"hosts": list(config.hosts), "chroot": config.chroot or "/"}

    # ------------------------------------------------------------------ typed reads
    def auth_error(self, path: str | None, exc: BaseException) -> ZooKeeperAuthError:
        """The typed error for kazoo's NoAuthError/AuthFailedError on ``path`` (None: the session)."""
        where = self.describe_path(path) if path else f"the ensemble {','.join(self.config.hosts)}"
        reason = "authentication failed" if type(exc).__name__ == "AuthFailedError" else "no permission"
        return ZooKeeperAuthError(path, where, self.config.identity, reason)

    @contextlib.contextmanager
    def auth_errors(self, what: str) -> Iterator[None]:
        """Turn kazoo's NoAuthError/AuthFailedError inside the block into ZooKeeperAuthError naming ``what``."""
        from kazoo.exceptions import AuthFailedError, NoAuthError

        try:
            yield
        except (NoAuthError, AuthFailedError) as exc:
            raise self.auth_error(what, exc) from None

    def _read(self, path: str, call: Callable[[], Any]) -> Any:
        from kazoo.exceptions import AuthFailedError, NoAuthError, NoNodeError

        try:
            return call()
        except NoNodeError:
            raise ZnodeNotFoundError(path, self.describe_path(path)) from None
        except (NoAuthError, AuthFailedError) as exc:
            raise self.auth_error(path, exc) from None

    def get_znode(self, path: str) -> tuple[bytes | None, ZnodeStat]:
        """Raw data and Stat of ``path`` (relative to the Kafka chroot)."""
        return self._read(path, lambda: self.get_conn().get(path))

    def exists(self, path: str) -> ZnodeStat | None:
        """The Stat of ``path``, or None when it does not exist."""
        return self._read(path, lambda: self.get_conn().exists(path))

    def get_acl(self, path: str) -> tuple[list[Any], ZnodeStat]:
        """``path``'s ACL (kazoo ``ACL`` entries) and Stat."""
        return self._read(path, lambda: self.get_conn().get_acls(path))

    def get_decoded(self, path: str) -> tuple[Any, ZnodeStat]:
        """``decode_znode`` of ``path`` with its Stat; raises ZnodeFormatError on malformed data."""
        data, stat = self.get_znode(path)
        return znodes.decode_znode(path, data), stat

    def get_many(
        self, paths: Iterable[str], *, window: int = 1000
    ) -> dict[str, tuple[bytes | None, ZnodeStat]]:
        """Pipelined reads, ``window`` requests in flight; znodes that do not exist (any more) are left out."""
        from kazoo.exceptions import AuthFailedError, NoAuthError, NoNodeError

        client = self.get_conn()
        paths = list(paths)
        out: dict[str, tuple[bytes | None, ZnodeStat]] = {}
        for start in range(0, len(paths), window):
            pending = [(p, client.get_async(p)) for p in paths[start : start + window]]
            for path, result in pending:
                try:
                    out[path] = result.get()
                except NoNodeError:
                    continue
                except (NoAuthError, AuthFailedError) as exc:
                    raise self.auth_error(path, exc) from None
        return out

    def get_children(self, path: str) -> list[str]:
        return sorted(self._read(path, lambda: self.get_conn().get_children(path)))

    def cluster_id(self) -> str | None:
        """The cluster id from ``/cluster/id``, or None when no broker ever started here."""
        try:
            data, _ = self.get_znode(znodes.CLUSTER_ID)
        except ZnodeNotFoundError:
            return None
        return znodes.ClusterId.decode(data, znodes.CLUSTER_ID).id

    def list_topics(self) -> list[str]:
        return self.get_children(znodes.BROKER_TOPICS)

    def get_topic_assignment(self, topic: str) -> tuple[znodes.TopicAssignment, ZnodeStat]:
        """``/brokers/topics/<topic>``: replicas and (2.8+) topic_id, with the znode's Stat."""
        path = znodes.topic_path(topic)
        data, stat = self.get_znode(path)
        return znodes.TopicAssignment.decode(data, path), stat

    def get_partition_state(self, topic: str, partition: int) -> tuple[znodes.PartitionState, ZnodeStat]:
        """Leader/ISR of one partition; ``stat.version`` is its partition epoch."""
        path = znodes.partition_state_path(topic, partition)
        data, stat = self.get_znode(path)
        return znodes.PartitionState.decode(data, path), stat

    def live_broker_ids(self) -> list[int]:
        """Brokers registered right now (ephemeral ``/brokers/ids/<id>``), ascending."""
        ids = []
        for child in self.get_children(znodes.BROKER_IDS):
            try:
                ids.append(int(child))
            except ValueError:
                raise znodes.ZnodeFormatError(
                    f"{znodes.BROKER_IDS}/{child}", "a numeric broker id", repr(child)
                ) from None
        return sorted(ids)

    def get_broker(self, broker_id: int) -> tuple[znodes.BrokerRegistration, ZnodeStat]:
        """A live broker's registration; ``stat.czxid`` is its broker epoch (2.2+)."""
        path = znodes.broker_path(broker_id)
        data, stat = self.get_znode(path)
        return znodes.BrokerRegistration.decode(data, path), stat

    def get_controller(self) -> tuple[znodes.ControllerRegistration, ZnodeStat] | None:
        """The active controller, or None while there is none (between elections)."""
        try:
            data, stat = self.get_znode(znodes.CONTROLLER)
        except ZnodeNotFoundError:
            return None
        return znodes.ControllerRegistration.decode(data, znodes.CONTROLLER), stat

    # ------------------------------------------------------------------ guarded writes
    def bind_gate(self, gate: WriteGate) -> None:
        """Let ``gate`` (a maintenance session) authorise, fence and record this hook's writes."""
        if self._gate is not None and self._gate is not gate:
            raise RuntimeError("another maintenance session is already bound to this hook")
        self._gate = gate

    def unbind_gate(self, gate: WriteGate) -> None:
        if self._gate is gate:
            self._gate = None

    def _require_writable(self, what: str) -> WriteGate:
        if self.config.read_only:
            raise ZooKeeperWriteRefusedError(
                f"connection {self.kafka_zookeeper_conn_id!r} is read-only: refusing to {what}"
            )
        if self._gate is None:
            raise WriteOutsideSessionError(
                f"refusing to {what}: writes happen only inside a maintenance session "
                "(airflow_provider_kafka_zk.maintenance), which pins the cluster and holds its lease"
            )
        return self._gate

    def create_if_absent(self, path: str, data: bytes | None, *, makepath: bool = False) -> bool:
        """Create ``path`` with ``data``; never overwrites. True if created, False if it existed.

        ``makepath`` creates missing parents first (each with the ACL Kafka uses there).
        """
        self._require_writable(f"create {self.describe_path(path)}")
        if makepath:
            missing = []
            parent = posixpath.dirname(path)
            while parent not in ("/", "") and self.exists(parent) is None:
                missing.append(parent)
                parent = posixpath.dirname(parent)
            for ancestor in reversed(missing):
                self._create_one(ancestor, None, allow_existing=True)
        return self._create_one(path, data, allow_existing=True) is not None

    def _create_one(
        self, path: str, data: bytes | None, *, allow_existing: bool, sequential: bool = False
    ) -> str | None:
        try:
            results = self.multi([CreateOp(path, data, sequential)])
        except MultiOpError as exc:
            if exc.path == path and exc.reason == "NodeExistsError" and allow_existing:
                return None
            if exc.path == path and exc.reason == "NoNodeError":
                parent = posixpath.dirname(path)
                raise ZnodeNotFoundError(parent, self.describe_path(parent)) from None
            raise
        return results[0]

    def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create ``<prefix><10-digit seq>`` (Kafka's notification znodes); returns the path created."""
        self._require_writable(f"create a sequential znode under {self.describe_path(prefix)}")
        created = self._create_one(prefix, data, allow_existing=False, sequential=True)
        assert created is not None
        return created

    def set_if_version(self, path: str, data: bytes, expected_version: int) -> ZnodeStat:
        """Set ``path``'s data only if nobody changed it since it was read at ``expected_version``."""
        _check_version(expected_version, "set_if_version")
        self._require_writable(f"set {self.describe_path(path)}")
        try:
            results = self.multi([SetDataOp(path, data, expected_version)])
        except MultiOpError as exc:
            if exc.path == path and exc.reason in ("BadVersionError", "NoNodeError"):
                current = self.exists(path)
                raise ZnodeVersionConflictError(
                    path, self.describe_path(path), expected_version, current.version if current else None
                ) from None
            raise
        return results[0]

    def multi(self, ops: Sequence[ZnodeOp]) -> list[Any]:
        """Apply ``ops`` atomically (all or nothing), fenced by the session's lease.

        Returns one result per op in ``ops`` (created path, new Stat, True); raises MultiOpError
        naming the failing op, MaintenanceLeaseLostError-like errors from the gate's fence, and
        MultiOpTooLargeError (nothing sent) when the request would exceed the server's
        ``jute.maxbuffer``: an atomic change is never split behind the caller's back.
        """
        gate = self._require_writable(f"run a multi-op of {len(ops)} op(s)")
        if not ops:
            return []
        fence = list(gate.fence_ops())
        all_ops = [*fence, *ops]
        raw = self._raw_ops(all_ops, gate)
        self._check_request_size(all_ops, raw, len(fence))
        results = self._submit_raw(raw).get()
        self._raise_if_failed(all_ops, results, gate, committed_before=0, fenced=len(fence))
        results = results[len(fence) :]
        gate.after_write(self._describe_ops(ops, results))
        return results

    def multi_batches(self, batches: Iterable[Sequence[ZnodeOp]], *, window: int = 8) -> int:
        """Commit several multi-ops in order, ``window`` in flight (bulk work); returns ops applied.

        Each batch is atomic on its own (and fenced), and refused whole (MultiOpTooLargeError,
        nothing of it sent) if it exceeds ``jute.maxbuffer``. On a failure the error says how many
        batches and ops before it were committed; batches sent after the failing one may have been
        committed too (ZooKeeper runs a connection's requests in order but a failed multi-op does
        not stop the next). :meth:`multi_split` makes the batches by size.
        """
        gate = self._require_writable("run multi-ops")
        return self._commit_batches(gate, ((list(b), None) for b in batches if b), window=window)

    def multi_split(self, ops: Sequence[ZnodeOp], *, max_ops: int = 1000, window: int = 8) -> int:
        """Apply ``ops`` in order as several multi-ops, each under ``jute.maxbuffer`` and ``max_ops``.

        For bulk changes whose ops stand on their own (a scratch load, a replay): the change is
        *not* atomic as a whole, each batch is (all or nothing, and fenced by the lease). Batches
        are cut by the request's serialized size as ZooKeeper's jute encodes it (path, data, ACL
        list and flags of each op, the multi headers, the lease fence), so no request is refused
        for its size. Every op is guarded (a create fails on an existing znode, a set or delete on
        another version), so re-running the same ops after a failure cannot apply one twice: the
        first op already applied fails its batch, and MultiOpError says how many batches and ops
        were committed before (``committed_before``, ``committed_ops``; with ``window`` > 1 a few
        later batches may have been committed too, so re-read before resuming after them).
        A single op larger than the limit raises MultiOpTooLargeError before anything is sent.

        :param ops: the ops, applied in this order.
        :param max_ops: most ops per multi-op (ZooKeeper has no count limit; this bounds the work
            one failed batch rolls back).
        :param window: multi-ops in flight at once.
        :returns: the number of ops applied.
        """
        if max_ops < 1:
            raise ValueError(f"multi_split max_ops must be >= 1, not {max_ops}")
        gate = self._require_writable(f"run {len(ops)} op(s) as multi-ops")
        return self._commit_batches(gate, self._split_by_size(ops, gate, max_ops), window=window)

    def _split_by_size(
        self, ops: Sequence[ZnodeOp], gate: WriteGate, max_ops: int
    ) -> Iterator[tuple[list[ZnodeOp], list[Any]]]:
        """``(ops, their raw records)`` per batch: the records are built (ACLs included) once."""
        from airflow_provider_kafka_zk.hooks._kazoo_protocol import multi_op_size, multi_request_size

        limit = self.config.jute_maxbuffer
        fence_raw = self._raw_ops(gate.fence_ops(), gate)
        budget = limit - multi_request_size(fence_raw)  # the empty multi plus this batch's fence
        batch: list[ZnodeOp] = []
        batch_raw: list[Any] = []
        used = 0
        for op, raw in zip(ops, self._raw_ops(ops, gate), strict=True):
            size = multi_op_size(raw)
            if size > budget:
                raise MultiOpTooLargeError(op.path, self.describe_path(op.path), size + limit - budget, limit)
            if batch and (used + size > budget or len(batch) >= max_ops):
                yield batch, batch_raw
                batch, batch_raw, used = [], [], 0
            batch.append(op)
            batch_raw.append(raw)
            used += size
        if batch:
            yield batch, batch_raw

    def _commit_batches(
        self, gate: WriteGate, batches: Iterable[tuple[list[ZnodeOp], list[Any] | None]], *, window: int
    ) -> int:
        """Send ``(ops, raw records or None)`` batches, each fenced, ``window`` in flight."""
        in_flight: deque[tuple[list[ZnodeOp], int, Any]] = deque()
        committed_batches = applied = 0

        def settle_one() -> None:
            nonlocal committed_batches, applied
            ops, fenced, result = in_flight.popleft()
            results = result.get()
            self._raise_if_failed(
                ops,
                results,
                gate,
                committed_before=committed_batches,
                fenced=fenced,
                committed_ops=applied,
            )
            committed_batches += 1
            applied += len(ops) - fenced
            gate.after_write(self._describe_ops(ops[fenced:], results[fenced:]))

        try:
            for batch, batch_raw in batches:
                self._require_writable("run multi-ops")
                fence = list(gate.fence_ops())
                ops = [*fence, *batch]
                raw = self._raw_ops(fence, gate) + (
                    batch_raw if batch_raw is not None else self._raw_ops(batch, gate)
                )
                self._check_request_size(ops, raw, len(fence))
                in_flight.append((ops, len(fence), self._submit_raw(raw)))
                if len(in_flight) >= window:
                    settle_one()
        except MultiOpTooLargeError as exc:
            while in_flight:  # what was sent before the refused batch still counts
                settle_one()
            exc.committed_before, exc.committed_ops = committed_batches, applied
            raise
        while in_flight:
            settle_one()
        if applied:
            log.info("Committed %d multi-op(s), %d op(s)", committed_batches, applied)
        return applied

    def _describe_ops(self, ops: Sequence[ZnodeOp], results: Sequence[Any]) -> list[dict[str, Any]]:
        out = []
        for op, result in zip(ops, results, strict=False):
            entry: dict[str, Any] = {"op": type(op).__name__, "path": op.path}
            if isinstance(op, CreateOp):
                entry["path"] = result if isinstance(result, str) else op.path
            if isinstance(op, SetDataOp | DeleteOp | CheckVersionOp):
                entry["expected_version"] = op.expected_version
            if isinstance(op, SetDataOp) and hasattr(result, "version"):
                entry["new_version"] = result.version
            if isinstance(op, CreateOp | SetDataOp):
                entry["bytes"] = None if op.data is None else len(op.data)
            if not isinstance(op, CheckVersionOp) and len(ops) <= 20:
                log.info("ZooKeeper write: %s %s", entry["op"], self.describe_path(entry["path"]))
            out.append(entry)
        if len(ops) > 20:
            log.info("ZooKeeper write: multi-op of %d op(s) committed", len(ops))
        return out

    def _raw_ops(self, ops: Sequence[ZnodeOp], gate: WriteGate) -> list[Any]:
        """kazoo's request records for ``ops``: server paths, and each create's ACL from the gate."""
        from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData

        from airflow_provider_kafka_zk.hooks._kazoo_protocol import server_path

        client = self.get_conn()
        raw: list[Any] = []
        for op in ops:
            # checked here: a malformed op would fail inside kazoo's connection thread instead
            if not isinstance(op.path, str) or not op.path.startswith("/"):
                raise ValueError(f"znode op path must be absolute, not {op.path!r}")
            if getattr(op, "data", None) is not None and not isinstance(op.data, bytes):
                raise TypeError(f"znode op data for {op.path} must be bytes or None")
            target = server_path(client, op.path)
            if isinstance(op, CreateOp):
                acl = self._with_creator(gate.acl_for(op.path))
                raw.append(Create(target, op.data, acl, 2 if op.sequential else 0))
            elif isinstance(op, SetDataOp):
                raw.append(SetData(target, op.data, op.expected_version))
            elif isinstance(op, DeleteOp):
                raw.append(Delete(target, op.expected_version))
            elif isinstance(op, CheckVersionOp):
                raw.append(CheckVersion(target, op.expected_version))
            else:
                raise TypeError(f"not a guarded znode op: {type(op).__name__}")
        return raw

    def _with_creator(self, acl: list[Any]) -> list[Any]:
        """The gate's ACL, with Kafka's ``CREATOR_ALL`` semantics for this session's own ids.

        ``auth`` (ZooKeeper expands it to every id the session authenticated as: ``sasl:<user>``,
        ``digest:<user>:<hash>``, the ``x509:<subject>`` of a TLS client certificate) is added when
        the ACL is not world-open and the session has such an id -- a TLS certificate counts too,
        so this product can undo its own write. An explicit entry for the session's own SASL or
        digest id with all permissions becomes that ``auth`` entry, in its place: ZooKeeper would
        otherwise store the id twice (PrepRequestProcessor.fixupACL at release-3.8.0
        de-duplicates before expanding ``auth``).
        """
        from kazoo.security import ACL, Id

        config = self.config
        if not config.authenticated or any(a.id.scheme == "world" and a.perms == 31 for a in acl):
            return acl
        own, creator = self._own_ids(), ACL(31, Id("auth", ""))
        out: list[Any] = []
        for entry in acl:  # in place, so the order stays Kafka's: CREATOR_ALL first, then READ
            if entry.perms == 31 and (entry.id.scheme, entry.id.id) in own:
                entry = creator
            if entry not in out:
                out.append(entry)
        if creator not in out:
            out.append(creator)
        return out

    def _own_ids(self) -> set[tuple[str, str]]:
        config = self.config
        ids = {("x509", subject)} if (subject := _certificate_subject(config)) else set()
        return ids | self._credential_ids()

    def _credential_ids(self) -> set[tuple[str, str]]:
        config = self.config
        if config.auth_scheme == "digest" and config.login:
            from kazoo.security import make_digest_acl_credential

            return {("digest", make_digest_acl_credential(config.login, config.password or ""))}
        if config.auth_scheme == "sasl" and config.sasl_mechanism == "DIGEST-MD5" and config.login:
            return {("sasl", config.login)}
        if config.auth_scheme == "sasl" and config.login:
            # Kerberos: the server keeps the whole principal, or strips the realm and/or the host
            # (kerberos.removeRealmFromPrincipal / removeHostFromPrincipal): one of these is ours
            primary_host = config.login.split("@", 1)[0]
            return {("sasl", config.login), ("sasl", primary_host), ("sasl", primary_host.split("/", 1)[0])}
        return set()  # a ticket cache's principal is not known here

    def _check_request_size(self, ops: Sequence[ZnodeOp], raw: Sequence[Any], fenced: int) -> None:
        from airflow_provider_kafka_zk.hooks._kazoo_protocol import multi_op_size, multi_request_size

        limit = self.config.jute_maxbuffer
        size = multi_request_size(raw)
        if size > limit:
            largest = max(range(fenced, len(ops)), key=lambda i: multi_op_size(raw[i]), default=0)
            path = ops[largest].path
            raise MultiOpTooLargeError(path, self.describe_path(path), size, limit, ops=len(ops) - fenced)

    def _submit_raw(self, raw: list[Any]) -> Any:
        from airflow_provider_kafka_zk.hooks._kazoo_protocol import submit_transaction

        client = self.get_conn()
        chroot = client.chroot or ""
        result = submit_transaction(client, raw)
        if not chroot:
            return result
        return _Unchrooted(result, chroot)

    def _raise_if_failed(
        self,
        ops: Sequence[ZnodeOp],
        results: list[Any],
        gate: WriteGate,
        *,
        committed_before: int,
        fenced: int = 0,
        committed_ops: int = 0,
    ) -> None:
        from kazoo.exceptions import AuthFailedError, NoAuthError, RolledBackError, RuntimeInconsistency

        if not any(isinstance(r, Exception) for r in results):
            return
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(
                result, RolledBackError | RuntimeInconsistency
            ):
                op = ops[index]
                if isinstance(result, NoAuthError | AuthFailedError):
                    raise self.auth_error(op.path, result)
                if index < fenced:
                    raise gate.fence_failed(
                        f"the maintenance lease {self.describe_path(op.path)} is no longer this run's "
                        f"({type(result).__name__}): another writer took it; nothing of this write was applied"
                    )
                raise MultiOpError(
                    index - fenced,
                    op,
                    self.describe_path(op.path),
                    type(result).__name__,
                    committed_before,
                    committed_ops,
                )
        raise MultiOpError(
            0, ops[0], self.describe_path(ops[0].path), "an unknown error", committed_before, committed_ops
        )

    # ------------------------------------------------------------------ snapshot
    def snapshot(
        self,
        include: Iterable[str] = DEFAULT_INCLUDE,
        exclude: Iterable[str] = DEFAULT_EXCLUDE,
        *,
        method: str = "auto",
        batch_ops: int = 500,
        window: int = 8,
        reconnect_timeout: float = 60.0,
        progress: Callable[[WalkProgress], None] | None = None,
        progress_every: float = 10.0,
        connections: int = PIPELINED_SESSIONS,
        in_memory: bool = False,
    ) -> SnapshotWalk:
        """Every znode under ``include`` (minus ``exclude``) with data and full Stat.

        See :mod:`.zookeeper_snapshot` for what ``consistent`` guarantees. Raises
        SnapshotWalkError (never returns a partial tree) when ZooKeeper stays away longer than
        ``reconnect_timeout``; ZooKeeperAuthError naming the znode and the identity when the ACL
        of a znode under ``include`` refuses the connection's credentials. ``connections``: the
        sessions of its own a pipelined walk (a server without multiRead) reads on. ``in_memory``:
        keep the rows in memory, not in a spill file (small walks; no pyarrow).
        """
        from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotAccessError

        client = self.get_conn()
        walker = ZnodeTreeWalker(
            client,
            include=include,
            exclude=exclude,
            method=method,
            batch_ops=batch_ops,
            window=window,
            reconnect_timeout=reconnect_timeout,
            restart_client=self._restart_client,
            progress=progress,
            progress_every=progress_every,
            connections=connections,
            in_memory=in_memory,
        )
        try:
            with self.auth_errors("the snapshot's subtrees " + ", ".join(walker.include)):
                walk = walker.run()
        except SnapshotAccessError as exc:  # the walker's own type for a NoAuth reply: name the znode
            raise self.auth_error(exc.path, exc) from exc
        log.info(
            "Snapshot of %s: %d znodes in %.1fs (%.0f/s), zxid 0x%x..0x%x, %s",
            self.config.chroot or "/",
            walk.znodes,
            walk.duration_s,
            walk.rate,
            walk.start_zxid,
            walk.end_zxid,
            "consistent" if walk.consistent else "fuzzy",
        )
        return walk

    # ------------------------------------------------------------------ scratch loads
    def load_snapshot_rows(
        self,
        rows: Sequence[ZnodeRow],
        *,
        replay_versions: bool = True,
        max_version_replay: int = 10_000,
        batch_ops: int = 1000,
    ) -> SnapshotLoadReport:
        """Recreate a snapshot's znodes under this hook's chroot, which must be empty.

        For forensics on a scratch chroot: ephemerals become persistent (listed in the report),
        data is byte-identical (null stays null), and each znode's data version is replayed with
        versioned sets up to ``max_version_replay`` so partition epochs and fencing versions read
        as in the source. Refuses the ZooKeeper root and any chroot that already has children.
        Creates and replays go as :meth:`multi_split` batches (at most ``batch_ops`` ops and
        ``jute_maxbuffer`` bytes each, each atomic): a load that fails part-way leaves a partial
        scratch chroot, which a new load refuses; delete it and load again.
        """
        started = time.monotonic()
        config = self.config
        if not config.chroot:
            raise TargetNotEmptyError(
                "refusing to load a snapshot into the ZooKeeper root: give a scratch chroot"
            )
        self._require_writable(f"load a snapshot into {config.chroot}")
        self._ensure_chroot()
        existing = self.get_children("/")
        if existing:
            raise TargetNotEmptyError(
                f"scratch chroot {config.chroot} is not empty (holds {', '.join(existing[:5])}"
                f"{', ...' if len(existing) > 5 else ''}): refusing to load a snapshot over it"
            )
        ordered = sorted((r for r in rows if r.path != "/"), key=lambda r: r.path)
        ops = [CreateOp(r.path, r.data) for r in ordered]
        created = self.multi_split(ops, max_ops=batch_ops)
        root = next((r for r in rows if r.path == "/"), None)
        if root is not None and root.data:
            self.set_if_version("/", root.data, 0)
        replay: list[ZnodeOp] = []
        skipped: list[tuple[str, int]] = []
        if replay_versions:
            for r in ordered:
                if r.version > max_version_replay:
                    skipped.append((r.path, r.version))
                    continue
                replay.extend(SetDataOp(r.path, r.data, v) for v in range(r.version))
        replayed = self.multi_split(replay, max_ops=batch_ops)
        ephemerals = tuple((r.path, r.ephemeral_owner) for r in ordered if r.ephemeral_owner)
        report = SnapshotLoadReport(
            target=f"{','.join(config.hosts)}{config.chroot}",
            created=created,
            versions_replayed=replayed,
            ephemerals_as_persistent=ephemerals,
            versions_not_replayed=tuple(skipped),
            duration_s=time.monotonic() - started,
        )
        log.info(
            "Loaded %d znodes into %s (%d version bumps, %d ephemerals made persistent)",
            created,
            config.chroot,
            replayed,
            len(ephemerals),
        )
        return report

    def _ensure_chroot(self) -> None:
        """Create the chroot path itself: a chrooted session cannot create its own root."""
        config = self.config
        client = self._new_client(dataclasses.replace(config, chroot=""))
        self._start(client, config)
        try:
            client.ensure_path(config.chroot)
        finally:
            client.stop()
            client.close()

    # ------------------------------------------------------------------ connection test
    def test_connection(self) -> tuple[bool, str]:
        """Connect and check that the chroot really holds a Kafka cluster (a wrong chroot is the usual
        mistake); the message names the cluster id, the ZooKeeper server's version and the live brokers.

        Airflow's UI shows the message as it is (a sentence, not JSON). ``airflow connections test``
        drops a successful test's message and prints only "Connection success!" (Airflow 3.3.2,
        ``airflow/cli/commands/connection_command.py``), and its console shows no INFO log: the
        sentence is printed too (in the API server, stdout is its log).
        """
        try:
            client = self.get_conn()
            if not client.exists(znodes.BROKER_IDS):
                return False, (
                    f"Connected, but {self.config.chroot or '/'} holds no Kafka cluster "
                    f"({znodes.BROKER_IDS} is missing): check the chroot"
                )
            brokers = sorted(int(b) for b in client.get_children(znodes.BROKER_IDS))
            message = connection_test_message(
                self.cluster_id(), zookeeper_server_version(client), brokers, self.config.chroot
            )
            print(message)  # the CLI's only way to show it (above)
            return True, message
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            self.close()


class LegacyKafkaZooKeeperHook(KafkaZooKeeperHook):
    """:class:`KafkaZooKeeperHook` under the connection type's first name, ``kafka_zookeeper``, so
    connections saved with it keep working. Airflow 3.3 logs the RFC 3986 warning each time it fetches
    one: change their type to ``kafkazookeeper`` (same fields)."""

    conn_type = LEGACY_CONN_TYPE
    hook_name = "Kafka ZooKeeper (old type name kafka_zookeeper)"


def zookeeper_server_version(client: KazooClient) -> str | None:
    """The connected server's version from the ``srvr`` four-letter word (in ZooKeeper's default
    ``4lw.commands.whitelist`` since 3.5; kazoo's ``server_version()`` asks ``envi``, which is not);
    None when the server does not answer it (not whitelisted, or a TLS-only port)."""
    try:
        reply = client.command(b"srvr")
    except Exception:  # a refused or unsupported four-letter word: the version is only informative
        return None
    for line in str(reply).splitlines():
        if line.lower().startswith("zookeeper version:"):
            return line.split(":", 1)[1].split(",", 1)[0].strip().split("-", 1)[0] or None
    return None


def connection_test_message(
    cluster_id: str | None, zookeeper_version: str | None, live_brokers: Sequence[int], chroot: str | None
) -> str:
    """The sentence a successful connection test shows: cluster id, ZooKeeper version, live brokers.

    :param cluster_id: ``/cluster/id`` (None: ZooKeeper holds none; its first controller writes it).
    :param zookeeper_version: the server's release, None when it did not say.
    :param live_brokers: the registered broker ids.
    :param chroot: the connection's chroot.
    """
    cluster = f"Kafka cluster {cluster_id}" if cluster_id else "Kafka cluster (no /cluster/id yet)"
    version = (
        f"ZooKeeper {zookeeper_version}"
        if zookeeper_version
        else "ZooKeeper (version not told: srvr refused)"
    )
    live = ", ".join(str(b) for b in live_brokers) or "none"
    return f"{cluster} in {chroot or '/'} on {version}; live brokers: {live} ({len(live_brokers)})"
