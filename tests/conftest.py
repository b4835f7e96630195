"""Shared fixtures: real local ZooKeeper and sshd from the package's own pytest plugin, and an
isolated Airflow home so no test touches ~/airflow (set before anything imports Airflow)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="kafka-zk-airflow-home-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))

pytest_plugins = ["airflow_provider_kafka_zk.testing.pytest_plugin"]


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The tests' Airflow home with a migrated SQLite metadata DB (about 5 s, once per session)."""
    marker = _AIRFLOW_HOME / ".migrated"
    if not marker.exists():
        subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
            env=os.environ.copy(),
            check=True,
            capture_output=True,
            timeout=600,
        )
        marker.touch()
    return _AIRFLOW_HOME
