"""Alerts that reach a person: one per DAG run, paging only for what is new or worse.

* :mod:`.settings` -- the cluster file's ``notify`` table, validated (no Airflow).
* :mod:`.incidents` -- a run's incidents, their fingerprints, new / worse / unchanged (pure).
* :mod:`.render` -- the HTML e-mail, the text and the Slack message from one content (Jinja).
* :mod:`.channels` -- can a channel deliver; delivering (Airflow's smtp and slack providers).
* :mod:`.record` -- ``alert.json`` with the run's artefacts (the next run's comparison).
* :mod:`.operators` -- the ``notify_check``, ``alert`` and test-alert tasks.

:func:`check_at_parse` is what a DAG file runs: a ``notify`` that cannot deliver raises
:class:`~.channels.NotifyUnusableError`, an import error of the DAG file in Airflow's UI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARSE_CHECKS = ("connections", "providers", "off")


def parse_check_level() -> str:
    """``[kafka_zk] notify_parse_check``: ``connections`` (default), ``providers`` or ``off``."""
    from airflow_provider_kafka_zk.clusters import provider_option

    level = provider_option("notify_parse_check") or "connections"
    if level not in PARSE_CHECKS:
        raise ValueError(
            f"[kafka_zk] notify_parse_check must be one of {', '.join(PARSE_CHECKS)}, not {level!r}"
        )
    return level


def check_at_parse(clusters: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise NotifyUnusableError naming every cluster whose alerts cannot be delivered.

    At parse time: the provider of each channel must be importable, and (level ``connections``) its
    connection must exist with what the hook needs. A connection lookup at parse time is one request
    to the metadata DB or the secrets backend per channel per parse of the file (every
    ``[dag_processor] min_file_process_interval``); ``[secrets] use_cache`` makes it one per
    ``cache_ttl_seconds``, and level ``providers`` leaves connections to the run's ``notify_check``.

    :param clusters: cluster name -> settings (the cluster file's).
    """
    from airflow_provider_kafka_zk.alerts.channels import NotifyUnusableError, notify_problems
    from airflow_provider_kafka_zk.alerts.settings import parse_notify

    level = parse_check_level()
    if level == "off":
        return
    problems = []
    for cluster, settings in sorted(clusters.items()):
        notify = parse_notify(settings.get("notify"), f"clusters.{cluster}.notify")
        found = notify_problems(notify, connections=level == "connections")
        problems += [f"cluster {cluster}: {p}" for p in found]
    if problems:
        raise NotifyUnusableError(
            "kafka_zk alerts cannot be delivered (fix the notify table, the provider or the connection; "
            "until then this file's DAGs are not scheduled): " + "; ".join(problems)
        )
