"""The Grafana dashboard on the provider's metrics (pure: the JSON is built here from
:mod:`.definitions`; ``grafana_dashboard.json`` beside this module is its output, shipped in the wheel).

Three rows: the fleet (every cluster at a glance), one cluster over time (variable ``cluster``), and
a maintenance run live (variables ``cluster`` and ``dag_id``: the latest run of that DAG on that
cluster). Every query names only metrics of :data:`~.definitions.METRICS` (a test checks it, and runs
every query against a real Prometheus after real runs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

from airflow_provider_kafka_zk.metrics.definitions import BY_NAME

UID = "kafka-zk-hygiene"
FILE = "grafana_dashboard.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
C = 'cluster="$cluster"'
M = 'cluster="$cluster", dag_id=~"$dag_id"'

# (title, kind, unit, [(expr, legend)], width)
ROWS: tuple[tuple[str, tuple[tuple[str, str, str, tuple[tuple[str, str], ...], int], ...]], ...] = (
    (
        "Fleet",
        (
            ("Findings by severity", "bargauge", "short",
             (("sum by (cluster, severity) (kafka_zk_findings)", "{{cluster}} {{severity}}"),), 8),
            ("RF=1 exposure per cluster", "bargauge", "bytes",
             (("sum by (cluster) (kafka_zk_rf1_exposure_bytes)", "{{cluster}}"),), 8),
            ("Last daily run", "table", "short",
             (("kafka_zk_daily_last_run_success", "success {{cluster}}"),
              ("time() - kafka_zk_daily_last_run_timestamp_seconds", "age {{cluster}}")), 8),
            ("Brokers down", "stat", "short", (("kafka_zk_brokers_down", "{{cluster}}"),), 6),
            ("Topics with topic-id trouble", "stat", "short",
             (("kafka_zk_topic_id_trouble_topics", "{{cluster}}"),), 6),
            ("Pending deletions", "stat", "short", (("kafka_zk_pending_deletions", "{{cluster}}"),), 6),
            ("Oldest pending deletion", "stat", "s",
             (("kafka_zk_pending_deletion_oldest_age_seconds", "{{cluster}}"),), 6),
        ),
    ),
    (
        "Cluster $cluster over time",
        (
            ("RF=1 bytes per broker", "timeseries", "bytes",
             ((f"kafka_zk_rf1_exposure_bytes{{{C}}}", "broker {{broker}}"),), 12),
            ("RF=1 partitions per broker", "timeseries", "short",
             ((f"kafka_zk_rf1_exposure_partitions{{{C}}}", "broker {{broker}}"),), 12),
            ("Findings by check", "timeseries", "short",
             ((f"sum by (check) (kafka_zk_findings{{{C}}})", "{{check}}"),), 12),
            ("Leftover bytes per broker", "timeseries", "bytes",
             ((f"kafka_zk_leftover_bytes{{{C}}}", "broker {{broker}}"),), 12),
            ("Daily run stages", "timeseries", "s",
             ((f"kafka_zk_daily_stage_duration_seconds{{{C}}}", "{{stage}}"),
              (f"kafka_zk_daily_last_run_duration_seconds{{{C}}}", "whole run")), 12),
            ("Deletions and topic ids", "timeseries", "short",
             ((f"kafka_zk_pending_deletions{{{C}}}", "pending deletions"),
              (f"kafka_zk_topic_id_trouble_topics{{{C}}}", "topic-id trouble"),
              (f"kafka_zk_brokers_down{{{C}}}", "brokers down")), 12),
        ),
    ),
    (
        "Maintenance run live ($dag_id on $cluster)",
        (
            ("Partitions left", "timeseries", "short",
             ((f"kafka_zk_maintenance_partitions_left{{{M}}}", "left {{dag_id}}"),
              (f"kafka_zk_maintenance_partitions{{{M}}}", "planned {{dag_id}}")), 12),
            ("Bytes left", "timeseries", "bytes",
             ((f"kafka_zk_maintenance_bytes_left{{{M}}}", "left {{dag_id}}"),
              (f"kafka_zk_maintenance_bytes{{{M}}}", "planned {{dag_id}}")), 12),
            ("Batch", "stat", "short",
             ((f"kafka_zk_maintenance_batch{{{M}}}", "batch"),
              (f"kafka_zk_maintenance_batches{{{M}}}", "of")), 6),
            ("Steps done", "stat", "short",
             ((f"kafka_zk_maintenance_steps_done{{{M}}}", "done"),
              (f"kafka_zk_maintenance_steps{{{M}}}", "of")), 6),
            ("Throttle", "stat", "Bps",
             ((f"kafka_zk_maintenance_throttle_bytes_per_second{{{M}}}", "{{dag_id}}"),), 6),
            ("Estimated time left", "stat", "s",
             ((f"kafka_zk_maintenance_estimated_remaining_seconds{{{M}}}", "{{dag_id}}"),), 6),
            ("Waited for approval", "stat", "s",
             ((f"kafka_zk_maintenance_approval_wait_seconds{{{M}}}", "{{dag_id}}"),), 6),
            ("Cluster writes", "stat", "short",
             ((f"kafka_zk_maintenance_cluster_writes{{{M}}}", "{{dag_id}}"),), 6),
            ("Result", "stat", "short",
             ((f"kafka_zk_maintenance_result{{{M}}} == 1", "{{result}}"),
              (f"kafka_zk_maintenance_dry_run{{{M}}}", "dry run")), 6),
            ("Last update", "stat", "dateTimeFromNow",
             ((f"kafka_zk_maintenance_last_update_timestamp_seconds{{{M}}} * 1000", "{{dag_id}}"),), 6),
        ),
    ),
)  # fmt: skip


def _panel(
    pid: int, title: str, kind: str, unit: str, targets: Any, x: int, y: int, w: int
) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": DS,
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }
    if kind == "stat":
        panel["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"}
    if kind == "table":
        panel["targets"] = [{**t, "instant": True, "format": "table"} for t in panel["targets"]]
    return panel


def _variable(name: str, label: str, query: str, *, include_all: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "refresh": 2,
        "multi": False,
        "includeAll": include_all,
        "definition": query,
        "query": {"query": query, "refId": name},
    }
    if include_all:
        out["allValue"] = ".*"
    return out


def dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (import: Dashboards > New > Import)."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row_title, row in ROWS:
        panels.append({"id": pid, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})  # fmt: skip
        pid, y, x = pid + 1, y + 1, 0
        for title, kind, unit, targets, width in row:
            if x + width > 24:
                x, y = 0, y + 8
            panels.append(_panel(pid, title, kind, unit, targets, x, y, width))
            pid, x = pid + 1, x + width
        y += 8
    return {
        "uid": UID,
        "title": "Kafka ZooKeeper-mode hygiene (airflow-provider-kafka-zk)",
        "description": "Daily hygiene of every cluster and maintenance runs live; metrics of airflow-provider-kafka-zk.",
        "tags": ["kafka", "zookeeper", "airflow"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-30d", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [
                {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
                _variable(
                    "cluster", "Cluster", "label_values(kafka_zk_daily_last_run_timestamp_seconds, cluster)"
                ),
                _variable(
                    "dag_id",
                    "Maintenance DAG",
                    'label_values(kafka_zk_maintenance_last_update_timestamp_seconds{cluster="$cluster"}, dag_id)',
                    include_all=True,
                ),
            ]
        },
        "panels": panels,
    }


def dashboard_text() -> str:
    """The dashboard as the shipped file holds it."""
    return json.dumps(dashboard(), indent=1, sort_keys=True) + "\n"


def shipped_dashboard() -> str:
    """``grafana_dashboard.json`` as the wheel ships it."""
    return resources.files("airflow_provider_kafka_zk.metrics").joinpath(FILE).read_text()


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel."""
    for panel in board["panels"]:
        for target in panel.get("targets") or ():
            yield panel["title"], target["expr"]


_METRIC = re.compile(r"\bkafka_zk_[a-z0-9_]+")


def unknown_metrics(board: dict[str, Any]) -> list[str]:
    """Names of metrics the dashboard queries that :data:`~.definitions.METRICS` does not define."""
    named = {m for _, expr in queries(board) for m in _METRIC.findall(expr)}
    for variable in board["templating"]["list"]:
        named.update(_METRIC.findall(str(variable.get("definition", ""))))
    return sorted(n for n in named if n not in BY_NAME)
