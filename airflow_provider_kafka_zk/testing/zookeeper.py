"""A real, throw-away ZooKeeper server for tests and demos (in the spirit of ``kazoo.testing``).

Why a real server: the provider reads and writes Kafka's exact znode layout, and the behaviours
worth testing (sessions, watches, restarts in the middle of a read) only exist in ZooKeeper itself.
The server listens on loopback only, runs as a child process of this Python process and is
stopped by PID; it can never outlive the test run (atexit finaliser, plus a parent-death signal
when started from the main thread, so even a SIGKILLed pytest leaves no stray JVM).

Example::

    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.connect_string + zk.new_chroot())
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Self

from airflow_provider_kafka_zk.testing._process import (
    ServerProcess,
    free_port,
    pdeathsig_prefix,
    spawn_logged,
    terminate_at_exit,
)

__all__ = ["ZooKeeperNotAvailable", "ZooKeeperServer", "ZooKeeperStartError", "find_zookeeper_classpath"]

APT_PACKAGES = "zookeeper libslf4j-java openjdk-17-jre-headless"

# Debian/Ubuntu (`zookeeper` -> libzookeeper-java, `libslf4j-java`). zookeeper.jar's manifest
# Class-Path already names its other jars (netty, jute, slf4j-api, ...), so these two suffice.
_DEBIAN_ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar")
_DEBIAN_SLF4J_BINDINGS = ("/usr/share/java/slf4j-simple.jar",)
_DEBIAN_CONF_DIR = "/etc/zookeeper/conf"

# Fast start, small footprint: C1 only and the serial GC start a JVM in well under a second on
# two cores. 250k Kafka-sized znodes measured ~290 MB RSS, so 1 GiB of heap leaves ample room.
DEFAULT_JVM_FLAGS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx1g",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",  # no /tmp/hsperfdata_<user>/<pid> file left behind
    "-XX:+ExitOnOutOfMemoryError",  # a dead server is clearer than a wedged one
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)

_NOT_SERVING = "not currently serving requests"


class ZooKeeperNotAvailable(RuntimeError):
    """Java or the ZooKeeper jars are missing: the message names the apt packages to install."""


class ZooKeeperStartError(RuntimeError):
    """The server died or did not answer in time; the message ends with the server log's tail."""


def find_zookeeper_classpath() -> list[str]:
    """Locate the ZooKeeper server jars and an SLF4J binding, so the server runs without init scripts.

    Looks at ``$ZOOKEEPER_HOME/lib`` (upstream tarball, which bundles its own logging) first, then
    at Debian's package layout.
    """
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")))
        if any(os.path.basename(j).startswith("zookeeper-3") for j in jars):
            conf = os.path.join(home, "conf")
            return [conf, *jars] if os.path.isdir(conf) else jars
    zookeeper_jar = _first_existing(_DEBIAN_ZOOKEEPER_JARS) or _first_existing(
        sorted(glob.glob("/usr/share/java/zookeeper-3.*.jar"))
    )
    if zookeeper_jar is None:
        raise ZooKeeperNotAvailable(
            "ZooKeeper server jar not found (looked in $ZOOKEEPER_HOME/lib and /usr/share/java); "
            f"install it with: apt-get install {APT_PACKAGES}"
        )
    binding = _first_existing(_DEBIAN_SLF4J_BINDINGS)
    if binding is None:
        raise ZooKeeperNotAvailable(
            "SLF4J binding /usr/share/java/slf4j-simple.jar not found (without it the server log is "
            "empty); install it with: apt-get install libslf4j-java"
        )
    classpath = [zookeeper_jar, binding]
    return [_DEBIAN_CONF_DIR, *classpath] if os.path.isdir(_DEBIAN_CONF_DIR) else classpath


def _find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(java_home, "bin", "java")] if java_home else []
    candidates.append(shutil.which("java") or "")
    java = _first_existing(c for c in candidates if c)
    if java is None:
        raise ZooKeeperNotAvailable(f"java not found; install it with: apt-get install {APT_PACKAGES}")
    return java


def _first_existing(paths: Iterable[str]) -> str | None:
    return next((p for p in paths if os.path.isfile(p)), None)


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper on a free loopback port with its own data directory.

    ``stop()``/``start()``/``restart()`` keep the port and the data (tests restart ZooKeeper in the
    middle of an operation); ``close()`` also deletes a data directory this object created.
    """

    _log_tail_bytes = 64 * 1024  # the log grows across restarts; only its end explains a failure

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        max_client_cnxns: int = 1000,
        jvm_flags: Sequence[str] = DEFAULT_JVM_FLAGS,
        extra_config: Mapping[str, str] | None = None,
        extra_classpath: Sequence[str] = (),
        start_timeout: float = 30.0,
        stop_grace: float = 10.0,
    ) -> None:
        """Prepare (not start) a server; ``port=None`` picks a free one, kept across restarts.

        ``extra_config`` adds or overrides zoo.cfg lines (e.g. ``{"ssl.clientAuth": "need"}``);
        ``jute.maxbuffer`` is a JVM system property, not a zoo.cfg key: pass
        ``jvm_flags=(*DEFAULT_JVM_FLAGS, "-Djute.maxbuffer=65536")``. ``extra_classpath`` adds jars
        (Debian's zookeeper.jar does not name netty-codec, which the Netty/TLS factory needs).
        """
        self.host = host
        self._port_was_chosen = port is None
        self.port = port if port is not None else free_port(host)
        self.max_client_cnxns = max_client_cnxns
        self.jvm_flags = tuple(jvm_flags)
        self.extra_config = dict(extra_config or {})
        self.extra_classpath = tuple(extra_classpath)
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self._owner_pid = os.getpid()
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="zookeeper-test-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._cleanup_dir = (
            weakref.finalize(self, shutil.rmtree, str(self.data_dir), ignore_errors=True)
            if self._owns_data_dir
            else None
        )
        self._process: subprocess.Popen[bytes] | None = None
        self._stop_finalizer: weakref.finalize | None = None
        self._ever_started = False

    # -- addresses ---------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``KazooClient(hosts=...)``; append a chroot such as ``/kafka_test_3``."""
        return f"{self.host}:{self.port}"

    @property
    def hosts(self) -> str:
        """Same as ``connect_string``; the attribute name ``kazoo.testing`` harnesses use."""
        return self.connect_string

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        """Server log (stdout+stderr), appended across restarts so a test can read the whole story."""
        return self.data_dir / "zookeeper.log"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the JVM and return once ``ruok`` says ``imok`` and the data is loaded."""
        if self.is_running:
            return self
        for attempt in range(3):
            log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._start_once()
                break
            except ZooKeeperStartError:
                # Another process took our freshly chosen port before the JVM bound it: pick again.
                # Never after a first successful start: restarts must keep the port clients know.
                lost_port_race = "Address already in use" in _read_from(self.log_path, log_offset)
                if attempt == 2 or not (lost_port_race and self._port_was_chosen and not self._ever_started):
                    raise
                self.port = free_port(self.host)
        self._ever_started = True
        return self

    def kill(self) -> None:
        """SIGKILL by PID (a crash, not a shutdown); reaps the process. Data is kept."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        self.stop()

    def restart(self) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop()
        self.start()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running else "stopped"
        return f"<ZooKeeperServer {self.connect_string} {state} data_dir={self.data_dir}>"

    # -- talking to it -----------------------------------------------------------------------

    def four_letter(self, command: str, timeout: float = 5.0) -> str:
        """Send a four-letter word (``ruok``, ``srvr``, ``mntr``, ``cons``...) and return the reply."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def new_chroot(self, prefix: str = "/kafka_test_") -> str:
        """Create and return a fresh, empty chroot (e.g. ``/kafka_test_0000000007``).

        ZooKeeper's sequential znodes make the name unique even across processes (pytest-xdist) and
        across runs on a reused data directory, so many tests can share one server.
        """
        from kazoo.client import KazooClient  # deferred: importing this module stays cheap

        client = KazooClient(hosts=self.connect_string, timeout=10.0)
        client.start(timeout=15.0)
        try:
            return str(client.create(prefix, b"", sequence=True, makepath=True))
        finally:
            client.stop()
            client.close()

    def airflow_connection(self, conn_id: str, chroot: str) -> dict[str, str]:
        """``{"AIRFLOW_CONN_<CONN_ID>": "<json>"}``: a ``kafka_zookeeper`` connection to this server at
        ``chroot``, ready for ``monkeypatch.setenv`` (as :meth:`SshServer.airflow_connection`)."""
        import json

        fields = {
            "conn_type": "kafka_zookeeper",
            "host": self.connect_string,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
        }
        return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(fields)}

    def tree(self, chroot: str = "") -> dict[str, tuple[bytes | None, int]]:
        """Every znode under ``chroot`` (itself included, as ``/``): path -> (data, zkVersion). What a test
        compares before and after a run that must write nothing."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.connect_string + chroot, timeout=10.0)
        client.start(timeout=15.0)
        out: dict[str, tuple[bytes | None, int]] = {}

        def walk(path: str) -> None:
            data, stat = client.get(path)
            out[path] = (data, stat.version)
            for child in client.get_children(path):
                walk(f"{path.rstrip('/')}/{child}")

        try:
            walk("/")
        finally:
            client.stop()
            client.close()
        return out

    # -- internals ---------------------------------------------------------------------------

    def _write_config(self) -> None:
        config = {
            "tickTime": "2000",
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "maxClientCnxns": str(self.max_client_cnxns),
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            # Throw-away data needs no fsync per write (measured: disk writes drop ~20x; on a slow
            # CI disk that is most of a bulk set-up). Writes still reach the OS before the reply,
            # so kill() loses nothing a client was told is committed.
            "forceSync": "no",
            # Long demos write a lot: keep only recent snapshots and logs (hourly purge).
            "autopurge.snapRetainCount": "3",
            "autopurge.purgeInterval": "1",
            **self.extra_config,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))

    def _start_once(self) -> None:
        self._write_config()
        command = [
            *pdeathsig_prefix(),
            _find_java(),
            *self.jvm_flags,
            "-cp",
            os.pathsep.join([*find_zookeeper_classpath(), *self.extra_classpath]),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(self.config_path),
        ]
        what = f"ZooKeeper on {self.connect_string}"
        self._process = spawn_logged(command, self.log_path, what, cwd=self.data_dir)
        self._stop_finalizer = terminate_at_exit(self, self._process, self._owner_pid, self.stop_grace)
        try:
            self._wait_until_serving()
        except BaseException:
            self.kill()
            raise

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            self._raise_if_exited(ZooKeeperStartError, "ZooKeeper", self.connect_string)
            if self._is_serving():
                return
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper did not answer 'ruok' on {self.connect_string} within "
                    f"{self.start_timeout:.0f}s; log {self.log_path} ends with:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _is_serving(self) -> bool:
        # The listener opens before the snapshot and transaction log are loaded, and 'ruok' answers
        # 'imok' even then; 'srvr' tells whether requests are served yet (matters after restarts).
        try:
            if self.four_letter("ruok", 1.0) != "imok":
                return False
            return _NOT_SERVING not in self.four_letter("srvr", 1.0)
        except OSError:
            return False
