"""Where a run's alert is recorded: ``<base>/<cluster>/alerts/<dag_id>/<stamp>/alert.json``, beside
the run's other artefacts and on the same store (fsspec only, written atomically).

``<stamp>`` is the run's ``run_after`` (every run has one; a run triggered without a logical date
too) in UTC, ``%Y%m%dT%H%M%S``, so folder names sort in run order and the previous run's record is
the last name before this run's. A retry of the alert task reads its own run's record to skip the
channels it already reached.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import fsspec

from airflow_provider_kafka_zk.artefacts.files import write_atomically

ALERT_FILE = "alert.json"
_STAMP = re.compile(r"\d{8}T\d{6}")


def stamp(run_after: datetime) -> str:
    """The folder name of a run's alert record."""
    return run_after.astimezone(UTC).strftime("%Y%m%dT%H%M%S")


def alerts_root(base_url: str, cluster: str, dag_id: str) -> str:
    return "/".join([base_url.rstrip("/"), cluster, "alerts", dag_id])


def read_record(folder_url: str) -> dict[str, Any] | None:
    """``alert.json`` of one run's folder (None when absent)."""
    fs, path = fsspec.core.url_to_fs(folder_url)
    try:
        return json.loads(fs.cat_file(posixpath.join(path, ALERT_FILE)))
    except FileNotFoundError:
        return None


def previous_record(root_url: str, current: str) -> tuple[str | None, dict[str, Any] | None]:
    """(folder name, record) of the last run before ``current`` that has a record."""
    fs, root = fsspec.core.url_to_fs(root_url)
    try:
        names = sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False))
    except FileNotFoundError:
        return None, None
    for name in reversed([n for n in names if _STAMP.fullmatch(n) and n < current]):
        record = read_record(f"{root_url.rstrip('/')}/{name}")
        if record is not None:
            return name, record
    return None, None


def write_record(folder_url: str, record: Mapping[str, Any]) -> str:
    """Write ``alert.json`` atomically; returns its path on the store."""
    fs, path = fsspec.core.url_to_fs(folder_url)
    return write_atomically(
        fs, posixpath.join(path, ALERT_FILE), json.dumps(record, indent=1, default=str).encode()
    )
