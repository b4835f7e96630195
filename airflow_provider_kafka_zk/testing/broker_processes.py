"""Stand-ins for running Kafka broker processes: what the broker-host inventory finds in ``/proc``.

No Kafka runs here. A broker host's inventory (``hooks/_broker_inventory_remote.py``) finds a broker by
its command line -- the main class ``kafka.Kafka`` followed by its server.properties -- and reads its
release from the ``kafka_<scala>-<release>.jar`` on its classpath. A stand-in is a sleeping Python
process with that command line, so the inventory, the identity pin and the readiness read a "running
broker" exactly as they would on a real host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Self

KAFKA_MAIN = "kafka.Kafka"


def kafka_pids() -> set[int]:
    """Processes whose command line names Kafka's main class."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if KAFKA_MAIN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.add(int(pid))
        except OSError:
            continue
    return found


class StandInBrokers:
    """One stand-in broker process per server.properties; stopped (by PID) on exit.

    :param lifetime_s: how long each sleeps at most (they never outlive a stuck test by much).
    """

    def __init__(self, lifetime_s: float = 300.0) -> None:
        self.lifetime_s = lifetime_s
        self.processes: list[subprocess.Popen] = []

    def start(self, server_properties: Iterable[Path | str], release: str | None = None) -> None:
        """Start one per file, ``release`` in its classpath's ``kafka_2.13-<release>.jar`` (None: no jar),
        and wait until their command lines are in ``/proc``."""
        classpath = ["-cp", f"/opt/kafka/libs/zookeeper-3.8.4.jar:/opt/kafka/libs/kafka_2.13-{release}.jar"]
        started = []
        for path in server_properties:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"import time; time.sleep({self.lifetime_s})",
                    *(classpath if release else []),
                    KAFKA_MAIN,
                    str(path),
                ]
            )
            self.processes.append(process)
            started.append(process.pid)
        deadline = time.monotonic() + 15
        while not set(started) <= kafka_pids() and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
        self.processes.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
