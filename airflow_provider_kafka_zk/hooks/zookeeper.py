"""Hook for the ZooKeeper ensemble a ZooKeeper-mode Kafka cluster keeps its metadata in."""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_kafka_zk.kafka import znodes

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger(__name__)

DEFAULT_PORT = 2181


class ZooKeeperConnectionError(ConnectionError):
    """The ensemble could not be reached, or the chroot holds no Kafka cluster."""


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
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    session_timeout: float = 30.0
    connect_timeout: float = 15.0
    read_only: bool = False

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
        if scheme != "none" and not login:
            raise ValueError(f"kafka_zookeeper auth_scheme {scheme!r} needs a login")
        return cls(
            hosts=hosts,
            chroot=chroot,
            auth_scheme=scheme,
            login=login or None,
            password=password or None,
            sasl_mechanism=extra.get("sasl_mechanism") or "DIGEST-MD5",
            use_ssl=_as_bool(extra.get("use_ssl"), False),
            verify_certs=_as_bool(extra.get("verify_certs"), True),
            ca_file=extra.get("ca_file") or None,
            cert_file=extra.get("cert_file") or None,
            key_file=extra.get("key_file") or None,
            key_password=extra.get("key_password") or None,
            session_timeout=float(extra.get("session_timeout") or 30.0),
            connect_timeout=float(extra.get("connect_timeout") or 15.0),
            read_only=_as_bool(extra.get("read_only"), False),
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
        elif self.auth_scheme == "sasl":
            kwargs["sasl_options"] = {
                "mechanism": self.sasl_mechanism,
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
        return kwargs


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


class KafkaZooKeeperHook(BaseHook):
    """ZooKeeper of one Kafka cluster, through kazoo, rooted at the cluster's chroot.

    Reads are plain; writes (added by the operators that need them) go only through guarded
    operations (create-if-absent, versioned set, multi-op) and are refused when the connection is
    marked read-only.
    """

    conn_name_attr = "kafka_zookeeper_conn_id"
    default_conn_name = "kafka_zookeeper_default"
    conn_type = "kafka_zookeeper"
    hook_name = "Kafka ZooKeeper"

    def __init__(self, kafka_zookeeper_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self._config: ZooKeeperConnectionConfig | None = None
        self._client: KazooClient | None = None

    @property
    def config(self) -> ZooKeeperConnectionConfig:
        if self._config is None:
            conn = self.get_connection(self.kafka_zookeeper_conn_id)
            extra = conn.extra_dejson if conn.extra else {}
            self._config = ZooKeeperConnectionConfig.from_connection(
                conn.host, conn.port, conn.login, conn.password, extra
            )
        return self._config

    def get_conn(self) -> KazooClient:
        """A started kazoo client (one per hook); raises ZooKeeperConnectionError if unreachable."""
        if self._client is None:
            from kazoo.client import KazooClient
            from kazoo.handlers.threading import KazooTimeoutError

            config = self.config
            client = KazooClient(**config.kazoo_kwargs())
            log.info("Connecting to ZooKeeper %s (chroot %r)", ",".join(config.hosts), config.chroot or "/")
            try:
                client.start(timeout=config.connect_timeout)
            except KazooTimeoutError:
                client.close()
                raise ZooKeeperConnectionError(
                    f"ZooKeeper {','.join(config.hosts)} did not answer within {config.connect_timeout:g}s "
                    f"(connection {self.kafka_zookeeper_conn_id!r})"
                ) from None
            self._client = client
        return self._client

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

    def cluster_id(self) -> str | None:
        """The cluster id from ``/cluster/id``, or None when no broker ever started here."""
        client = self.get_conn()
        if not client.exists(znodes.CLUSTER_ID):
            return None
        data, _ = client.get(znodes.CLUSTER_ID)
        return znodes.ClusterId.decode(data, znodes.CLUSTER_ID).id

    def test_connection(self) -> tuple[bool, str]:
        """Connect and check that the chroot really holds a Kafka cluster (a wrong chroot is the usual mistake)."""
        try:
            client = self.get_conn()
            if not client.exists(znodes.BROKER_IDS):
                return False, (
                    f"Connected, but {self.config.chroot or '/'} holds no Kafka cluster "
                    f"({znodes.BROKER_IDS} is missing): check the chroot"
                )
            brokers = sorted(int(b) for b in client.get_children(znodes.BROKER_IDS))
            return True, json.dumps({"cluster_id": self.cluster_id(), "live_brokers": brokers})
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            self.close()
