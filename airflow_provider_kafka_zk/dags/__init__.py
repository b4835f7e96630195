"""The provider's DAGs as factories, so an installed wheel carries them.

A DAG file in your DAGs folder only calls one (the files in this repository's ``dags/`` do)::

    from airflow_provider_kafka_zk.dags.daily_hygiene import create_dags

    globals().update(create_dags())

:func:`create_all_dags` returns every one of them. The daily hygiene DAGs exist only for the
clusters the cluster file names (:mod:`airflow_provider_kafka_zk.clusters`); the manual ones
(drain, post-maintenance, topicId repair, deletion cleanup, pre-restart check, KRaft migration readiness,
KRaft migration, test alert, undo) always exist
and offer those clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import DAG

FACTORIES = (
    "daily_hygiene",
    "pre_maintenance_drain",
    "post_maintenance",
    "topic_id_repair",
    "deletion_cleanup",
    "pre_restart_check",
    "kraft_migration_readiness",
    "kraft_migration",
    "test_alert",
    "undo",
)


def create_all_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` of every DAG of the provider (for a single DAG file)."""
    from importlib import import_module

    dags: dict[str, DAG] = {}
    for name in FACTORIES:
        dags.update(import_module(f"{__name__}.{name}").create_dags())
    return dags
