"""A real Prometheus Pushgateway and a real Prometheus that scrapes it, for the metrics tests.

Debian 12's packages (``prometheus`` 2.42, ``prometheus-pushgateway`` 1.5.1), started as child
processes on loopback with free ports and a throw-away storage directory, stopped by PID (the same
lifecycle as the ZooKeeper and sshd servers: :mod:`._process`). Prometheus scrapes the Pushgateway
every second with ``honor_labels`` (as the README's set-up says), and :meth:`PrometheusServer.query`
asks its HTTP API.

Example::

    with PushgatewayServer(work) as gateway, PrometheusServer(work, gateway.address) as prometheus:
        ...  # push to gateway.url
        prometheus.wait_for("kafka_zk_brokers_down")
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self

from airflow_provider_kafka_zk.testing._process import (
    ServerProcess,
    free_port,
    pdeathsig_prefix,
    spawn_logged,
    terminate_at_exit,
)

__all__ = ["PrometheusServer", "PrometheusStartError", "PushgatewayServer"]

APT_PACKAGES = "prometheus prometheus-pushgateway"
SCRAPE_INTERVAL_S = 1


class PrometheusStartError(RuntimeError):
    """A server is missing, died or did not answer in time; the message ends with its log's tail."""


def _binary(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise PrometheusStartError(f"{name} is not installed (apt-get install {APT_PACKAGES})")
    return found


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback http)
        return response.read()


class _HttpServer(ServerProcess):
    name = ""

    def __init__(self, work: Path) -> None:
        self.dir = Path(work) / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self._process = None
        self._stop_finalizer = None
        self._cleanup_dir = None

    @property
    def log_path(self) -> Path:
        return self.dir / f"{self.name}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60) -> Self:
        import os

        self.port = free_port("127.0.0.1")
        self._process = spawn_logged(
            [*pdeathsig_prefix(), *self._command()], self.log_path, self.name, self.dir
        )
        self._stop_finalizer = terminate_at_exit(self, self._process, os.getpid(), grace=10)
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_exited(PrometheusStartError, self.name, self.address)
            try:
                _get(f"{self.url}/-/ready", timeout=2)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PrometheusStartError(
                        f"{self.name} not ready on {self.address} after {timeout:.0f} s; log:\n{self.log_tail()}"
                    ) from None
                time.sleep(0.2)


class PushgatewayServer(_HttpServer):
    """``prometheus-pushgateway`` on a free loopback port, in memory only (nothing persisted)."""

    name = "pushgateway"

    def _command(self) -> list[str]:
        # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: every instance
        # would load what an earlier one (another test run) left there. Empty: memory only.
        return [
            _binary("prometheus-pushgateway"),
            f"--web.listen-address={self.address}",
            "--persistence.file=",
        ]

    def metrics_text(self) -> str:
        """What Prometheus scrapes from it."""
        return _get(f"{self.url}/metrics").decode()


class PrometheusServer(_HttpServer):
    """``prometheus`` on a free loopback port scraping ``targets`` every second (``honor_labels``).

    :param work: a directory for its configuration and storage.
    :param targets: ``host:port`` of what it scrapes (the Pushgateway).
    """

    name = "prometheus"

    def __init__(self, work: Path, *targets: str) -> None:
        super().__init__(work)
        self.targets = targets

    def _command(self) -> list[str]:
        config = self.dir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
            f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
            "scrape_configs:\n"
            "  - job_name: pushgateway\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: {json.dumps(list(self.targets))}}}]\n"
        )
        return [
            _binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address={self.address}",
            "--web.console.templates=/etc/prometheus/consoles",
            "--web.console.libraries=/etc/prometheus/console_libraries",
            "--storage.tsdb.retention.time=1d",
        ]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar as one element) ``expr`` gives now, via ``/api/v1/query``."""
        answer = json.loads(_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"))
        if answer.get("status") != "success":
            raise AssertionError(f"Prometheus refused {expr!r}: {answer}")
        result = answer["data"]["result"]
        return result if isinstance(result, list) else [{"value": result}]

    def wait_for(self, expr: str, timeout: float = 60, check: Any = bool) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``check(result)`` holds (default: any series); AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if check(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{expr!r} gave {result} for {timeout:.0f} s")
            time.sleep(0.5)
