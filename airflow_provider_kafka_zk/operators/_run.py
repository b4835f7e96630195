"""Where a task's artefacts go and under which run name: light helpers every operator needs.

Kept apart from the operator modules (which import pyarrow, paramiko...) so that a task that only
needs these, such as the drain plan, does not import what its neighbours use.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_zk.clusters import default_artefacts_base  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from airflow.sdk import Context

TS_FORMAT = "%Y%m%dT%H%M%S.%fZ"  # as the snapshots' directory names


def run_key(run_id: str, run_after: datetime) -> str:
    """A run's artefact folder name: ``<run_after UTC>-<8 hex of the run id>``, e.g.
    ``20261122T061800.123456Z-3f2a9c1e``.

    Built from what every run has. A run triggered by ``airflow dags trigger`` or the REST API has
    no logical date (``ts``, ``ds``, ``logical_date`` are undefined in Airflow 3), so a name from
    the logical date would fail there. ``run_after`` never changes for a run (clearing keeps it), so
    retries and cleared tasks find their run's folder again; it sorts the folders by time. The run
    id's digest tells apart two runs given the same ``run_after`` (the REST API accepts one).
    No ``:`` or ``+`` (object stores, shells).

    :param run_id: the Airflow run id.
    :param run_after: the run's ``run_after`` (aware, or naive UTC).
    """
    moment = run_after if run_after.tzinfo is not None else run_after.replace(tzinfo=UTC)
    digest = hashlib.sha256(str(run_id).encode()).hexdigest()[:8]
    return f"{moment.astimezone(UTC).strftime(TS_FORMAT)}-{digest}"


def run_key_of(dag_run: Any) -> str:
    """:func:`run_key` of a DAG run (the ``dag_run`` of a task's context; a template macro too)."""
    return run_key(dag_run.run_id, dag_run.run_after)


def resolve_ts(value: str | None, context: Context) -> str:
    """The given name, else the run's :func:`run_key`, so every mapped task of a run writes to one
    directory; never the logical date, which runs triggered over REST or the CLI do not have."""
    if value:
        return str(value)
    return run_key_of(context["dag_run"])
