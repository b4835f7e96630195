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


@pytest.fixture
def deletion_clock(monkeypatch):
    """``deletion_clock(ms)``: the deletion check (triggers.deletion_check) counts ages to ``now + ms``.

    A ``-delete`` directory's age runs from its ctime -- when the broker renamed it -- and ctime
    cannot be backdated: the simulator backdates mtimes only, so every ``-delete`` directory it
    writes was "renamed" when the cluster was deployed. A test that needs such a directory past
    ``log.segment.delete.delay.ms`` (a leftover "renamed two days ago") looks from that much later.
    """
    from airflow_provider_kafka_zk.triggers import deletion_check

    real = deletion_check._now_ms

    def forward(ms: int) -> None:
        monkeypatch.setattr(deletion_check, "_now_ms", lambda: real() + ms)

    return forward


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` (``scripts/test.sh``) a test module runs whole in one
    worker, as it would alone (its module fixtures set up once). The production modules share one
    deployment (``deployment``, a session fixture: PostgreSQL, scheduler, triggerer, api-server):
    marked ``production``, ``scripts/test.sh`` runs them after the others, in one process, with the
    machine to themselves as a deployment has it (under a loaded machine Airflow 3.3.2's scheduler
    can run a deferred task's resumption twice and fail it: seen here at a load of 27 on 2 cores)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        production = Path(module).name.startswith("test_production_")
        item.add_marker(pytest.mark.xdist_group("production" if production else module))
        if production:
            item.add_marker(pytest.mark.production)
