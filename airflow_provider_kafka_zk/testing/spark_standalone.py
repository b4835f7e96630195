"""A Spark standalone cluster (one master, one worker) on loopback, from the pyspark installation.

For the test and benchmark that show the audit runs unchanged on a real cluster manager, not only
in local mode. Both daemons are started with ``spark-class`` (which execs the JVM, so the PID is the
JVM's), bound to 127.0.0.1 on free ports, and stopped by PID.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

import pyspark

from ._process import free_port, terminate, terminate_at_exit


class SparkStandaloneError(RuntimeError):
    """A daemon did not start; the message carries the end of its log."""


def spark_home() -> Path:
    return Path(pyspark.__file__).resolve().parent


class SparkStandaloneCluster:
    """``with SparkStandaloneCluster() as spark: spark.master_url`` -> ``spark://127.0.0.1:<port>``."""

    def __init__(
        self,
        work_dir: Path | None = None,
        *,
        worker_memory: str = "1g",
        worker_cores: int = 2,
        workers: int = 1,
    ) -> None:
        """:param workers: worker daemons to start, each with ``worker_cores`` and ``worker_memory``."""
        if workers < 1:
            raise ValueError("a standalone cluster needs at least one worker")
        self.workers = workers
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="spark-standalone-"))
        self.worker_memory = worker_memory
        self.worker_cores = worker_cores
        self.port = free_port("127.0.0.1")
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._processes: list = []
        self._finalizers: list = []

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "SPARK_WORKER_DIR": str(self.work_dir / "worker"),
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
            "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        }

    def _spawn(self, name: str, *args: str) -> Path:
        log = self.work_dir / f"{name}.log"
        command = [str(spark_home() / "bin" / "spark-class"), *args]
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,  # a Ctrl-C reaches the test run, whose teardown stops us
            )
        self._processes.append(process)
        self._finalizers.append(terminate_at_exit(self, process, os.getpid(), 10.0))
        return log

    def _wait_for(self, log: Path, pattern: str, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            if re.search(pattern, text):
                return
            if any(p.poll() is not None for p in self._processes):
                break
            time.sleep(0.2)
        tail = "\n".join((log.read_text(errors="replace") if log.exists() else "").splitlines()[-30:])
        self.stop()
        raise SparkStandaloneError(f"Spark {what} did not start within {timeout:.0f}s:\n{tail}")

    def start(self, timeout: float = 60.0) -> Self:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master_log = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--webui-port", str(free_port("127.0.0.1")),
        )  # fmt: skip
        self._wait_for(master_log, r"I have been elected leader", "master", timeout)
        for n in range(self.workers):
            self._spawn(
                "worker" if n == 0 else f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1",
                "--webui-port", str(free_port("127.0.0.1")),
                "--cores", str(self.worker_cores),
                "--memory", self.worker_memory,
                "--work-dir", str(self.work_dir / ("worker" if n == 0 else f"worker-{n}")),
                self.master_url,
            )  # fmt: skip
            self._wait_for(master_log, rf"(?s)(Registering worker.*){{{n + 1}}}", f"worker {n + 1}", timeout)
        return self

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.poll() is None]

    def stop(self) -> None:
        """Worker first, then master; by PID (SIGTERM, SIGKILL after 10 s)."""
        for process, finalizer in reversed(list(zip(self._processes, self._finalizers, strict=True))):
            finalizer.detach()
            terminate(process, os.getpid(), 10.0)
        self._processes.clear()
        self._finalizers.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
