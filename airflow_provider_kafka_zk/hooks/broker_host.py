"""Broker hosts over SSH: what a broker really holds on disk, in one remote command per broker.

One Airflow SSH connection (``ssh`` type, used through ``SSHHook``/paramiko) is the template for
every broker of a cluster: login, key, port, timeouts and host keys come from it, the host comes
from the broker's registration in ZooKeeper unless ``broker_hosts`` names it. Host keys are
always checked: a connection asking for ``no_host_key_check`` or ``allow_host_key_change`` is
refused, and an unknown key is rejected (never auto-added). Trusted keys come from a
``known_hosts`` extra (a file path: one entry per broker host), ``~/.ssh/known_hosts``,
``/etc/ssh/ssh_known_hosts`` and the ``host_key`` extra, which is trusted for *every* broker host
(only right when they share one host key).

The inventory is one ``sh -c`` command with no caller data in it: the broker-side script
(``_broker_inventory_remote.py``) and its parameters travel on stdin, the log dirs to walk are
sent back on stdin after the Airflow side has parsed server.properties, and every file comes back
raw to be parsed by the pure core (``kafka/inventory.py``). The host needs a POSIX ``sh`` and
Python 3.6+ (``python3`` or RHEL's ``/usr/libexec/platform-python``); without one the command
stops at once with :class:`RemotePythonMissingError` naming the broker and host. Nothing is ever
written on a broker host.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_kafka_zk.hooks._host_key_policy import HostKeyPolicyError
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.inventory import (
    KAFKA_MAIN_CLASSES,
    LOG_DIR_FILES,
    OVERRIDE_KEYS,
    PARTITION_FILES,
    BrokerInventory,
    InventoryAssembler,
    InventoryRecordError,
    RemoteFatalError,
    ServerPropertiesSelectionError,
    ZooKeeperView,
    choose_server_properties,
    effective_broker_id,
    kafka_version_from_jars,
    readable_name,
)
from airflow_provider_kafka_zk.kafka.logdir import parse_java_properties
from airflow_provider_kafka_zk.kafka.snapshot import gc_paused

if TYPE_CHECKING:  # paramiko and the SSH provider load with the first connection, not the DAG file
    import paramiko

    from airflow_provider_kafka_zk.hooks._strict_ssh import StrictSSHHook

log = logging.getLogger(__name__)

REMOTE_SCRIPT_PATH = Path(__file__).with_name("_broker_inventory_remote.py")
DEFAULT_PYTHON_INTERPRETERS: tuple[str, ...] = ("python3", "/usr/libexec/platform-python")
PARTITION_FILE_LIMIT = 1 << 20  # partition.metadata is 43 bytes; an epoch file a few KB
LOG_DIR_FILE_LIMIT = 256 << 20  # a recovery-point checkpoint of 1M partitions is ~40 MB
_STDERR_KEEP = 64 << 10

# Runs before the script arrives: refuses Python < 3.6 (and Python 2) with one JSON line.
_BOOTSTRAP = (
    "import sys\n"
    "if sys.version_info < (3, 6):\n"
    '    sys.stdout.write(\'{"t":"fatal","kind":"python_too_old","detail":"%s"}\\n\''
    " % sys.version.split()[0])\n"
    "    sys.exit(3)\n"
    "exec(compile(sys.stdin.buffer.read(int(sys.argv[1])), '<kafka-broker-inventory>', 'exec'))\n"
)


# ---------------------------------------------------------------------------------------------
# Typed errors: every one names the broker and the host
# ---------------------------------------------------------------------------------------------


class BrokerHostError(Exception):
    """A broker host could not be inventoried. ``retryable`` says whether a retry can help."""

    retryable = True

    def __init__(self, broker_id: int, host: str | None, port: int | None, message: str) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        where = f"broker {broker_id}"
        if host:
            where += f" on {host}" + (f":{port}" if port else "")
        super().__init__(f"{where}: {message}")


class BrokerHostNotFoundError(BrokerHostError):
    """No host known for the broker: not registered in ZooKeeper and not in ``broker_hosts``."""

    retryable = False


class BrokerHostUnreachableError(BrokerHostError):
    """Nothing answered SSH at the host (refused, timed out, no route, unresolvable, no banner)."""


class BrokerHostKeyError(BrokerHostError):
    """The host key could not be verified; never retried, never auto-accepted."""

    retryable = False


class BrokerHostKeyUnknownError(BrokerHostKeyError):
    """No trusted key for this host (add it to the connection's host_key or known_hosts)."""


class BrokerHostKeyMismatchError(BrokerHostKeyError):
    """The host offered a key other than the trusted one: possibly a man-in-the-middle."""


class BrokerHostAuthenticationError(BrokerHostError):
    """The SSH server rejected the connection's credentials."""

    retryable = False


class BrokerHostCommandError(BrokerHostError):
    """The remote inventory command failed, broke the protocol or ended early."""


class BrokerHostTimeoutError(BrokerHostCommandError):
    """The remote command ran past ``command_timeout`` or was silent for ``idle_timeout``."""


class RemotePythonMissingError(BrokerHostCommandError):
    """No Python 3.6+ on the host: install python3 or name an interpreter in python_interpreters."""

    retryable = False


class ServerPropertiesNotFoundError(BrokerHostError):
    """The broker's server.properties was not found (or not readable) on the host."""

    retryable = False


class BrokerIdentityError(BrokerHostError):
    """The host holds another broker than the one asked for (wrong host map or registration)."""

    retryable = False


@dataclass(frozen=True)
class BrokerAddress:
    """Where a broker's host is reached (``source``: broker_hosts or zookeeper)."""

    broker_id: int
    host: str
    port: int
    source: str


# ---------------------------------------------------------------------------------------------
# The hook
# ---------------------------------------------------------------------------------------------


class BrokerHostHook(BaseHook):
    """SSH access to the broker hosts of one cluster, for read-only inventories.

    :param ssh_conn_id: the SSH connection used as template for every broker host.
    :param kafka_zookeeper_conn_id: the cluster's ``kafka_zookeeper`` connection: broker hosts
        come from the registrations, and the inventory cross-checks broker and cluster ids.
    :param broker_hosts: broker id -> host, overriding ZooKeeper (needed for stopped brokers).
    :param server_properties_path: the broker's server.properties on its host, may contain
        ``{broker_id}``; default: found from the running broker's command line (/proc).
    :param known_hosts: extra known_hosts files (the connection's ``known_hosts`` extra adds one).
    :param connect_timeout: TCP connect, SSH banner and authentication timeout (s).
    :param command_timeout: limit for the whole remote inventory (s).
    :param idle_timeout: limit for silence on the channel while the inventory runs (s).
    :param connect_attempts: attempts for an unreachable host before giving up (2 s apart).
    :param python_interpreters: interpreters tried on the host, first found wins.
    :param zookeeper: an open KafkaZooKeeperHook of that cluster to look the registrations up with
        (a trigger's session for the whole wait); default: a session of its own, closed after.
    """

    conn_name_attr = "ssh_conn_id"
    default_conn_name = "ssh_default"
    hook_name = "Kafka broker host (SSH)"

    def __init__(
        self,
        ssh_conn_id: str = default_conn_name,
        kafka_zookeeper_conn_id: str | None = None,
        *,
        broker_hosts: Mapping[int | str, str] | None = None,
        server_properties_path: str | None = None,
        known_hosts: Sequence[str] = (),
        connect_timeout: float | None = None,
        command_timeout: float = 900.0,
        idle_timeout: float = 300.0,
        connect_attempts: int = 2,
        python_interpreters: Sequence[str] = DEFAULT_PYTHON_INTERPRETERS,
        zookeeper: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._zookeeper = zookeeper
        self.ssh_conn_id = ssh_conn_id
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.broker_hosts = {int(b): str(h) for b, h in (broker_hosts or {}).items()}
        self.server_properties_path = server_properties_path
        self.known_hosts = tuple(known_hosts)
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.idle_timeout = idle_timeout
        self.connect_attempts = max(1, int(connect_attempts))
        self.python_interpreters = tuple(python_interpreters)
        if not self.python_interpreters:
            raise ValueError("python_interpreters must name at least one interpreter")

    # -- where each broker is -------------------------------------------------------------------

    @cached_property
    def _template(self) -> Any:
        """The SSH connection every broker host is reached with (its own host field is not used)."""
        return self.get_connection(self.ssh_conn_id)

    @cached_property
    def _ssh_extra(self) -> dict[str, Any]:
        return self._template.extra_dejson if self._template.extra else {}

    @cached_property
    def zookeeper_view(self) -> ZooKeeperView | None:
        """Registered brokers' hosts and the cluster id, read once (None without a ZK connection)."""
        if not self.kafka_zookeeper_conn_id:
            return None
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError

        hosts: dict[int, tuple[str, ...]] = {}
        shared = self._zookeeper
        with (
            KafkaZooKeeperHook(self.kafka_zookeeper_conn_id)
            if shared is None
            else contextlib.nullcontext(shared)
        ) as zookeeper:
            cluster_id = zookeeper.cluster_id()
            children = (
                zookeeper.get_children(znodes.BROKER_IDS) if zookeeper.exists(znodes.BROKER_IDS) else []
            )
            for child in children:
                path = f"{znodes.BROKER_IDS}/{child}"
                try:
                    data, _ = zookeeper.get_znode(path)
                    registration = znodes.BrokerRegistration.decode(data, path)
                except ZnodeNotFoundError:
                    continue  # the broker went away between the listing and the read
                except (znodes.ZnodeFormatError, ValueError) as exc:
                    log.warning("Skipping undecodable broker registration %s: %s", path, exc)
                    continue
                hosts[registration.broker_id] = _registration_hosts(registration)
        return ZooKeeperView(cluster_id=cluster_id, registered_hosts=hosts)

    @cached_property
    def _cluster_connect(self) -> dict[str, Any]:
        """The cluster's ZooKeeper hosts and chroot (from the connection, no I/O): a running broker
        whose zookeeper.connect names another cluster is not this cluster's broker. A shared hook
        (a trigger's session) is asked, not the connection again."""
        if not self.kafka_zookeeper_conn_id:
            return {}
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        config = (self._zookeeper or KafkaZooKeeperHook(self.kafka_zookeeper_conn_id)).config
        return {"zookeeper_hosts": tuple(config.hosts), "chroot": config.chroot}

    def resolve_connections(self) -> None:
        """Read the SSH template and the ZooKeeper view now, on this thread (before any worker pool)."""
        self._template  # noqa: B018 - cached_property: resolved once, here
        self._ssh_extra  # noqa: B018
        self.zookeeper_view  # noqa: B018
        self._cluster_connect  # noqa: B018

    def resolve(self, broker_id: int) -> BrokerAddress:
        """The broker's host: ``broker_hosts`` first, else its ZooKeeper registration."""
        port = int(self._template_port())
        if broker_id in self.broker_hosts:
            return BrokerAddress(broker_id, self.broker_hosts[broker_id], port, "broker_hosts")
        view = self.zookeeper_view
        if view is not None and view.registered_hosts.get(broker_id):
            return BrokerAddress(broker_id, view.registered_hosts[broker_id][0], port, "zookeeper")
        why = (
            "is not registered in ZooKeeper (stopped or crashed)"
            if view is not None
            else "has no ZooKeeper connection to look it up in"
        )
        raise BrokerHostNotFoundError(
            broker_id,
            None,
            None,
            f"{why} and broker_hosts has no entry for it: add broker_hosts={{{broker_id}: '<host>'}}",
        )

    def _template_port(self) -> int:
        return int(self._template.port or 22)

    # -- connecting -----------------------------------------------------------------------------

    def ssh_hook(self, address: BrokerAddress) -> StrictSSHHook:
        """An SSHHook for this broker's host, built from the template connection."""
        from airflow_provider_kafka_zk.hooks._strict_ssh import StrictSSHHook

        extra_known_hosts = self._ssh_extra.get("known_hosts")
        known_hosts = (*self.known_hosts, *([extra_known_hosts] if extra_known_hosts else []))
        timeout = self.connect_timeout
        if timeout is None:
            timeout = float(self._ssh_extra.get("conn_timeout") or 10)
        return StrictSSHHook(
            ssh_conn_id=self.ssh_conn_id,
            remote_host=address.host,
            port=address.port,
            conn_timeout=int(max(1, round(timeout))),
            banner_timeout=max(1.0, timeout),
            auth_timeout=int(max(1, round(timeout))),
            cmd_timeout=self.command_timeout,
            conn_retry_attempts=1,
            known_hosts=known_hosts,
            connection=self._template,
        )

    def connect(self, address: BrokerAddress) -> paramiko.SSHClient:
        """An authenticated SSH client, or a typed error naming broker and host."""
        hook = self.ssh_hook(address)
        for attempt in range(1, self.connect_attempts + 1):
            try:
                return hook.get_conn()
            except HostKeyPolicyError:
                raise
            except Exception as exc:
                error = _classify_connect_error(exc, address, hook.conn_timeout)
                if not isinstance(error, BrokerHostUnreachableError) or attempt == self.connect_attempts:
                    raise error from None
                log.info(
                    "Broker %d host %s unreachable (attempt %d), retrying",
                    address.broker_id,
                    address.host,
                    attempt,
                )
                time.sleep(2)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the inventory --------------------------------------------------------------------------

    def inventory(self, broker_id: int) -> BrokerInventory:
        """Everything broker ``broker_id`` holds on disk: one SSH connection, one remote command."""
        address = self.resolve(broker_id)
        view = self.zookeeper_view
        log.info(
            "Inventory of broker %d on %s:%d (host from %s)",
            broker_id,
            address.host,
            address.port,
            address.source,
        )
        started = time.monotonic()
        client = self.connect(address)
        # tens of thousands of parsed directories, no cycles among them: no cyclic GC walking them
        with gc_paused():
            try:
                assembler = InventoryAssembler(broker_id, address.host)
                self._run(client, address, assembler)
                peer = _peer_address(client)
            finally:
                client.close()
            inventory = assembler.result(view)
        inventory.remote[IDENTITY_EVIDENCE] = identity_evidence(assembler, address.host, peer)
        effective = effective_broker_id(inventory.facts, inventory.log_dirs)
        if effective is not None and effective != broker_id:
            raise BrokerIdentityError(
                broker_id,
                address.host,
                address.port,
                f"the host holds broker {effective} ({inventory.facts.server_properties_path}), "
                f"not broker {broker_id}: fix broker_hosts or the registration",
            )
        inventory.remote["seconds_total"] = round(time.monotonic() - started, 3)
        log.info(
            "Broker %d: %d log dirs, %d partition directories, %d with errors (%.1fs)",
            broker_id,
            len(inventory.log_dirs),
            len(inventory.partitions),
            sum(1 for p in inventory.partitions if p.errors),
            time.monotonic() - started,
        )
        return inventory

    def remote_command(self, script_length: int) -> str:
        """The one shell command run on the host: constant apart from the script's length."""
        candidates = " ".join(shlex.quote(p) for p in self.python_interpreters)
        missing = json.dumps(
            {
                "t": "fatal",
                "kind": "no_python3",
                "detail": f"none of {list(self.python_interpreters)} found on PATH",
            }
        )
        inner = (
            f"for p in {candidates}; do "
            f'if command -v "$p" >/dev/null 2>&1; then exec "$p" -c {shlex.quote(_BOOTSTRAP)} {int(script_length)}; fi; '
            f"done; printf '%s\\n' {shlex.quote(missing)}; exit 127"
        )
        return "sh -c " + shlex.quote(inner)

    def _params(self, broker_id: int) -> dict[str, Any]:
        path = self.server_properties_path
        return {
            "server_properties": path.replace("{broker_id}", str(broker_id)) if path else None,
            "main_classes": list(KAFKA_MAIN_CLASSES),
            "override_keys": list(OVERRIDE_KEYS),
            "log_dir_files": list(LOG_DIR_FILES),
            "partition_files": list(PARTITION_FILES),
            "partition_file_limit": PARTITION_FILE_LIMIT,
            "log_dir_file_limit": LOG_DIR_FILE_LIMIT,
        }

    def _run(self, client: paramiko.SSHClient, address: BrokerAddress, assembler: InventoryAssembler) -> None:
        broker_id = address.broker_id
        script = REMOTE_SCRIPT_PATH.read_bytes()
        transport = client.get_transport()
        if transport is None:
            raise BrokerHostUnreachableError(broker_id, address.host, address.port, "SSH transport closed")
        channel = transport.open_session(timeout=self.connect_timeout or 10)
        stderr = bytearray()
        try:
            channel.exec_command(self.remote_command(len(script)))
            _send(channel, script + _json_line(self._params(broker_id)))
            for record in self._records(channel, address, stderr):
                if record.get("t") == "server_properties" and record.get("source") == "configured":
                    assembler.remote[_CONFIGURED_SYMLINK] = record.get("symlink")
                    assembler.remote[_CONFIGURED_JARS] = record.get("running_kafka_jars")
                try:
                    assembler.feed(record)
                except RemoteFatalError as exc:
                    raise _fatal_error(exc, address, self.python_interpreters) from None
                except (InventoryRecordError, ValueError) as exc:
                    raise BrokerHostCommandError(
                        broker_id, address.host, address.port, f"bad inventory record: {exc}"
                    ) from None
                if assembler.awaiting_log_dirs:
                    try:
                        facts = choose_server_properties(
                            assembler.candidates, broker_id, **self._cluster_connect
                        )
                    except ServerPropertiesSelectionError as exc:
                        _send(channel, _json_line({"log_dirs": None}))
                        raise ServerPropertiesNotFoundError(
                            broker_id, address.host, address.port, str(exc)
                        ) from None
                    _send(channel, _json_line({"log_dirs": list(assembler.start_walk(facts))}))
                    channel.shutdown_write()
            status = channel.recv_exit_status() if channel.exit_status_ready() else None
            if not assembler.complete:
                tail = bytes(stderr[-2000:]).decode("utf-8", "replace").strip()
                raise BrokerHostCommandError(
                    broker_id,
                    address.host,
                    address.port,
                    f"the inventory stream ended early (exit status {status}){': ' + tail if tail else ''}",
                )
        finally:
            channel.close()

    def _records(
        self, channel: paramiko.Channel, address: BrokerAddress, stderr: bytearray
    ) -> Iterator[dict[str, Any]]:
        """JSON records as they arrive; lines before the first record (shell noise) are skipped."""
        channel.settimeout(1.0)
        started = last_data = time.monotonic()
        buffer = b""
        seen_record = False
        skipped = 0
        while True:
            while channel.recv_stderr_ready():
                stderr += channel.recv_stderr(1 << 16)
                del stderr[:-_STDERR_KEEP]
            try:
                chunk = channel.recv(1 << 20)
            except TimeoutError:
                now = time.monotonic()
                if now - started > self.command_timeout or now - last_data > self.idle_timeout:
                    limit = "command_timeout" if now - started > self.command_timeout else "idle_timeout"
                    raise BrokerHostTimeoutError(
                        address.broker_id,
                        address.host,
                        address.port,
                        f"the inventory command exceeded {limit} "
                        f"({self.command_timeout if limit == 'command_timeout' else self.idle_timeout:g}s)",
                    ) from None
                continue
            if not chunk:
                break
            last_data = time.monotonic()
            buffer += chunk
            lines = buffer.split(b"\n")
            buffer = lines.pop()
            if not seen_record:
                while lines and not lines[0].startswith(b'{"t":'):
                    del lines[0]
                    skipped += 1
                seen_record = bool(lines)
            yield from _decode_records(lines, address)
        if skipped:
            log.warning(
                "Broker %d: skipped %d non-record line(s) before the inventory", address.broker_id, skipped
            )
        while channel.recv_stderr_ready():
            stderr += channel.recv_stderr(1 << 16)


# ---------------------------------------------------------------------------------------------
# The identity evidence of a broker host whose meta.properties have no cluster.id (Kafka < 2.4)
# ---------------------------------------------------------------------------------------------

#: Key of :attr:`BrokerInventory.remote` holding :func:`identity_evidence`'s record.
IDENTITY_EVIDENCE = "identity_evidence"
_CONFIGURED_SYMLINK = "configured_server_properties_symlink"
_CONFIGURED_JARS = "configured_broker_kafka_jars"
#: The only server.properties keys the pin keeps (the file also holds passwords).
IDENTITY_KEYS = (
    "zookeeper.connect",
    "broker.id",
    "broker.id.generation.enable",
    "reserved.broker.max.id",
    "inter.broker.protocol.version",
)


def identity_evidence(assembler: InventoryAssembler, host: str, peer: str | None) -> dict[str, Any]:
    """JSON-safe record of what pins a host without cluster.id: the *configured* server.properties
    (read in the inventory's round trip; refused when any path component is a symlink), the names
    of the host SSH reached (as asked, its peer address, its own hostname) and the release of the
    broker process started with that file (its ``kafka_<scala>-<release>.jar``). The session
    adds ZooKeeper's side and decides (``kafka.safety.legacy_broker_problems``)."""
    configured = next((c for c in assembler.candidates if c.source == "configured"), None)
    props: dict[str, str] | None = None
    problem: str | None = None
    path = readable_name(configured.path) if configured is not None else None
    if configured is not None:
        link = assembler.remote.get(_CONFIGURED_SYMLINK)
        if link:
            problem = (
                f"{readable_name(str(link))} is a symlink: the pin reads server.properties only without "
                "following one (set server_properties_path to the real file)"
            )
        elif not configured.file.readable:
            problem = f"not readable ({configured.file.error or 'absent'})"
        else:
            try:
                parsed = parse_java_properties(configured.file.data or b"", path or "server.properties")
            except KafkaFormatError as exc:
                problem = f"not a properties file ({exc})"
            else:
                props = {k: parsed[k] for k in IDENTITY_KEYS if k in parsed}
    reached = [host, peer, assembler.remote.get("hostname")]
    jars = assembler.remote.get(_CONFIGURED_JARS)
    release = kafka_version_from_jars(str(j) for j in jars) if isinstance(jars, list) else None
    return {
        "server_properties_path": path,
        "server_properties": props,
        "server_properties_problem": problem,
        "reached_hosts": [
            h for i, h in enumerate(reached) if isinstance(h, str) and h and h not in reached[:i]
        ],
        # the running broker's release: from its classpath (configured path: the process started with it)
        "kafka_version": release or (assembler.facts.kafka_version if assembler.facts is not None else None),
    }


def _peer_address(client: paramiko.SSHClient) -> str | None:
    """The IP address the SSH connection really reached (None when the transport is gone)."""
    transport = client.get_transport()
    try:
        peer = transport.getpeername() if transport is not None else None
    except OSError:
        return None
    return str(peer[0]) if peer else None


def _decode_records(lines: list[bytes], address: BrokerAddress) -> list[dict[str, Any]]:
    """The JSON records of ``lines``, decoded in one call (a chunk holds hundreds); a line that is
    no JSON is named (BrokerHostCommandError)."""
    if not lines:
        return []
    try:
        records: list[dict[str, Any]] = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        pass
    else:
        if len(records) == len(lines):  # else a line held more (or less) than one value: say which
            return records
    records = []
    for line in lines:  # one of them is bad: which
        try:
            records.append(json.loads(line))
        except ValueError:
            raise BrokerHostCommandError(
                address.broker_id,
                address.host,
                address.port,
                f"not an inventory record: {line[:80].decode('utf-8', 'replace')!r}",
            ) from None
    return records


def _json_line(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def _send(channel: paramiko.Channel, data: bytes) -> None:
    """Write to the command's stdin; a command that already exited (no python3) is read, not raised."""
    with contextlib.suppress(OSError):
        channel.sendall(data)


def _registration_hosts(registration: znodes.BrokerRegistration) -> tuple[str, ...]:
    """The registration's host, then every advertised endpoint's host (no PLAINTEXT: host is null)."""
    hosts: list[str] = []
    if registration.host:
        hosts.append(registration.host)
    try:
        endpoints = registration.parsed_endpoints
    except (znodes.ZnodeFormatError, ValueError):
        endpoints = ()
    for endpoint in endpoints:
        if endpoint.host and endpoint.host not in hosts:
            hosts.append(endpoint.host)
    return tuple(hosts)


def _fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


def _classify_connect_error(
    exc: BaseException, address: BrokerAddress, timeout: float | None
) -> BrokerHostError:
    """paramiko/socket exceptions -> the typed error for this broker (never echoing credentials)."""
    import paramiko

    from airflow_provider_kafka_zk.hooks._strict_ssh import UnknownHostKeyError

    args = (address.broker_id, address.host, address.port)
    if isinstance(exc, BrokerHostError):
        return exc
    if isinstance(exc, UnknownHostKeyError):
        return BrokerHostKeyUnknownError(
            *args,
            f"no trusted host key for {exc.hostname}; the host offered {_fingerprint(exc.key)}. "
            "Verify it out of band, then add it to the connection's host_key extra or a known_hosts file",
        )
    if isinstance(exc, paramiko.BadHostKeyException):
        return BrokerHostKeyMismatchError(
            *args,
            f"host key mismatch: trusted {_fingerprint(exc.expected_key)}, offered {_fingerprint(exc.key)} "
            "(possible man-in-the-middle, or the host was rebuilt: verify before updating the key)",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return BrokerHostAuthenticationError(*args, f"SSH authentication failed ({type(exc).__name__})")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return BrokerHostUnreachableError(*args, "connection refused (no SSH server listening)")
    if isinstance(exc, socket.gaierror):
        return BrokerHostUnreachableError(*args, f"host name does not resolve ({exc.strerror})")
    if isinstance(exc, TimeoutError):
        return BrokerHostUnreachableError(*args, f"no answer within {timeout}s")
    if isinstance(exc, OSError):
        return BrokerHostUnreachableError(*args, f"{type(exc).__name__}: {exc.strerror or exc}")
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        if "banner" in text.lower() or "no existing session" in text.lower():
            # paramiko stops waiting after ``timeout``, then finds no session: nothing spoke SSH
            return BrokerHostUnreachableError(*args, f"no SSH handshake within {timeout}s")
        return BrokerHostUnreachableError(*args, f"SSH negotiation failed: {text[:200]}")
    if isinstance(exc, EOFError):
        return BrokerHostUnreachableError(*args, "the server closed the connection during the handshake")
    return BrokerHostError(*args, f"cannot connect: {type(exc).__name__}: {str(exc)[:200]}")


def _fatal_error(
    exc: RemoteFatalError, address: BrokerAddress, interpreters: Sequence[str]
) -> BrokerHostError:
    args = (address.broker_id, address.host, address.port)
    if exc.kind == "no_python3":
        return RemotePythonMissingError(
            *args,
            f"no Python 3 on the host ({exc.detail}); the inventory needs Python 3.6+ (stdlib only): "
            "install python3 or list its path in python_interpreters",
        )
    if exc.kind == "python_too_old":
        return RemotePythonMissingError(
            *args,
            f"the host's Python is {exc.detail}; the inventory needs Python 3.6+ (tried {list(interpreters)})",
        )
    return BrokerHostCommandError(*args, f"the inventory script failed on the host: {exc.detail}")
