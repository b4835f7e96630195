"""``approval.json`` and the change log of an approval decision, written where the decision is taken:
the approval step on a worker or, when Airflow could not resume it there, its trigger in the
triggerer (:mod:`airflow_provider_kafka_zk.triggers.approval`). One writer, so both leave the same
files. Light on imports: the triggerer loads it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.kafka.approval import APPROVAL_FILE, change_log_of


def write_decision(folder: str, record: Mapping[str, Any]) -> None:
    """``approval.json`` (the record) and, once decided, the change log
    ``changes-<task>-<try>.json`` in the plan folder ``folder`` (a URL bound to its store)."""
    base = folder.rstrip("/")
    write_url_atomically(f"{base}/{APPROVAL_FILE}", json.dumps(record, indent=1).encode())
    change_log = change_log_of(record)
    if change_log is not None:
        name, content = change_log
        write_url_atomically(f"{base}/{name}", json.dumps(content, indent=1).encode())
