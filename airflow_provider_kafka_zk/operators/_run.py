"""Where a task's artefacts go and under which run name: light helpers every operator needs.

Kept apart from the operator modules (which import pyarrow, paramiko...) so that a task that only
needs these, such as the drain plan, does not import what its neighbours use.
"""

from __future__ import annotations

import os
from datetime import UTC
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import Context

TS_FORMAT = "%Y%m%dT%H%M%S.%fZ"  # as the snapshots' directory names


def default_artefacts_base() -> str:
    """Where artefacts go when a task names no base: ``$KAFKA_ZK_ARTEFACTS_BASE``, else
    ``[kafka_zk] artefacts_base`` from the Airflow config, else ``$AIRFLOW_HOME/kafka-zk-artefacts``.

    The one resolution every DAG (at parse time) and every operator (at run time) uses, so a task
    never writes where the next one does not read.
    """
    if os.environ.get("KAFKA_ZK_ARTEFACTS_BASE"):
        return os.environ["KAFKA_ZK_ARTEFACTS_BASE"]
    from airflow.sdk.configuration import conf

    configured = conf.get("kafka_zk", "artefacts_base", fallback=None)
    if configured:
        return configured
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return os.path.join(home, "kafka-zk-artefacts")


def resolve_ts(value: str | None, context: Context) -> str:
    """The given name, else the run's logical date (or run_after) as ``20261122T061800.000000Z``.

    Taken from the run, not the clock, so every mapped task of a run writes to one directory; the
    format is the snapshots' (UTC, sortable, no ':' for object stores).
    """
    if value:
        return str(value)
    moment = context.get("logical_date") or context["dag_run"].run_after
    return moment.astimezone(UTC).strftime(TS_FORMAT)
