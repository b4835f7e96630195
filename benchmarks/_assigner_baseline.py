"""kafka-assigner (PyPI ``kafka-tools``) as the drain benchmark's baseline, in a scratch venv.

``kafka-tools`` 0.1.9 (2018, the last release) declares Python 2.7 and 3.5 only; it runs on 3.11
with the pins below (checked here: the current kazoo 2.11 works, no old one is needed; it imports
``six`` without declaring it and ``pkg_resources``, gone from setuptools 81). It must not meet the
product's environment (its own ``kafka`` namespace package), hence a venv of its own.

What ``kafka-assigner ... --generate remove -b N`` does (read in its source, 0.1.9):

* start-up checks only that ``<--tools-path>/kafka-reassign-partitions.sh`` and
  ``$JAVA_HOME/bin/java`` are regular, executable files (``utilities.get_tools_path``,
  ``check_java_home``): a stub script and the machine's Java satisfy them;
* reads ZooKeeper with one kazoo client, plain synchronous calls (``Cluster.create_from_zookeeper``):
  ``get_children("/brokers/ids")`` and a ``get`` per broker, ``get_children("/brokers/topics")``
  and, per topic, a ``get`` of the topic znode and of ``/config/topics/<topic>`` (retention), then
  ``stop``/``close``. It never reads the partition state znodes, and never writes;
* ``remove`` walks the drained broker's replicas, skips the ``--exclude-topics`` (a list, checked
  per replica), and gives each replica to the next broker of a round robin over all other brokers
  that does not hold one yet: no racks, no sizes, no ISR;
* with ``--generate`` the run is a dry run: each batch's reassignment JSON is logged ("Executing
  partition reassignment i/n: {...}") and ``kafka-reassign-partitions.sh`` is never started.
  ``--skip-ple`` leaves out the preferred-leader elections it would log after the moves (the product
  plans none either).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

KAFKA_TOOLS = "kafka-tools==0.1.9"  # the last release (2018)
# What was installed and run here (Python 3.11.7); six: imported, not declared; setuptools < 81:
# pkg_resources; JPype1, pex: declared by kafka-tools, not used by kafka-assigner.
PINS = {"kafka-tools": "0.1.9", "kazoo": "2.11.0", "six": "1.17.0", "JPype1": "1.7.1", "pex": "2.105.2"}
REQUIREMENTS = (*(f"{name}=={v}" for name, v in PINS.items()), "setuptools<81")
DEFAULT_VENV = Path(tempfile.gettempdir()) / "kafka-assigner-venv"
_BATCH_LINE = re.compile(r"Executing partition reassignment \d+/\d+: (\{.*\})\s*$")

TopicPartition = tuple[str, int]


def ensure_venv(venv: Path = DEFAULT_VENV) -> Path:
    """The ``kafka-assigner`` executable, installing the pinned ``kafka-tools`` into ``venv`` if needed."""
    executable = venv / "bin" / "kafka-assigner"
    python = venv / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import importlib.metadata as m, sys, kafka.tools.assigner.__main__; "
        f"sys.exit(any(m.version(n) != v for n, v in {PINS!r}.items()))",
    ]
    if executable.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return executable
    print(f"installing {', '.join(REQUIREMENTS)} into {venv} ...", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS], check=True)
    subprocess.run(probe, check=True)
    return executable


def version(venv: Path = DEFAULT_VENV) -> str:
    """What runs, as reported next to the numbers: kafka-tools, kazoo and Python versions."""
    code = (
        "import importlib.metadata as m, platform; "
        "print(f\"kafka-tools {m.version('kafka-tools')}, kazoo {m.version('kazoo')}, "
        'Python {platform.python_version()}")'
    )
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def stub_tools(directory: Path) -> tuple[Path, dict[str, str]]:
    """(``--tools-path``, environment) that pass kafka-assigner's start-up checks.

    The script stub exits 1 so that, were it ever called, it could not pass for a real run. JAVA_HOME
    is the machine's Java when there is one, else a stub with the same behaviour.
    """
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "kafka-reassign-partitions.sh"
    script.write_text("#!/bin/sh\necho 'benchmark stub: never executed with --generate' >&2\nexit 1\n")
    script.chmod(0o755)
    java = shutil.which("java")
    if java:
        java_home = str(Path(os.path.realpath(java)).parent.parent)
    else:
        (directory / "jre" / "bin").mkdir(parents=True, exist_ok=True)
        stub_java = directory / "jre" / "bin" / "java"
        stub_java.write_text("#!/bin/sh\nexit 1\n")
        stub_java.chmod(0o755)
        java_home = str(directory / "jre")
    return directory, {**os.environ, "JAVA_HOME": java_home}


def command(
    executable: Path,
    zookeeper: str,
    tools_path: Path,
    drained: Sequence[int],
    excluded_topics: Sequence[str],
    moves_per_batch: int = 500,
) -> list[str]:
    """``kafka-assigner ... --generate remove -b N``: plan only, excluded topics left in place."""
    args = [
        str(executable),
        "--zookeeper",
        zookeeper,
        "--tools-path",
        str(tools_path),
        "--generate",
        "--skip-ple",
        "--moves",
        str(moves_per_batch),
    ]
    if excluded_topics:
        args += ["--exclude-topics", ",".join(excluded_topics)]
    return [*args, "remove", "--brokers", *(str(b) for b in drained)]


def parse_targets(log: str) -> dict[TopicPartition, tuple[int, ...]]:
    """Target replicas per moved partition, from the reassignment JSON it logs per batch."""
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for line in log.splitlines():
        match = _BATCH_LINE.search(line)
        if match:
            for entry in json.loads(match[1])["partitions"]:
                targets[(entry["topic"], int(entry["partition"]))] = tuple(entry["replicas"])
    return targets
