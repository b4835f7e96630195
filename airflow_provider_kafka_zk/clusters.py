"""The cluster file (``dags/kafka_zk_clusters.toml`` or ``$KAFKA_ZK_CLUSTERS_FILE``): which Kafka
clusters the DAG factories run for and how to reach them. One loader for every DAG, so the daily
hygiene and the pre-maintenance drain always agree on a cluster's connections and paths."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

DEMO_CLUSTER = "demo"
DEFAULT_FILE = Path(__file__).resolve().parents[1] / "dags" / "kafka_zk_clusters.toml"

DEFAULTS: dict[str, Any] = {
    "engine": "spark",
    "fail_on": "critical",
    "schedule": "@daily",
    "retries": 2,
    "retry_delay_s": 30,
    "max_retry_delay_s": 600,
    "retry_exponential_backoff": 2.0,
    "spark_conn_id": "spark_default",
    "spark_conf": {},
    "notify": {"kind": "log"},
    "enabled": True,
    "log_scan": False,
    "log_scan_budget_mb": 10240,
    "log_scan_fail_on": "fails_recovery",
}

LOG_SCAN_FAIL_ON = ("fails_recovery", "loses_data_if_unclean", "rebuilds_indexes", "never")

BUILT_IN_DEMO: dict[str, Any] = {
    "kafka_zookeeper_conn_id": "kafka_zk_demo",
    "ssh_conn_id": "kafka_zk_demo_ssh",
    "server_properties_path": "${KAFKA_ZK_DEMO_HOSTS}/broker-{broker_id}/config/server.properties",
    "broker_hosts": {str(b): f"127.0.0.{2 + b}" for b in range(6)},
}
"""The cluster testing/demo.py deploys (real ZooKeeper + sshd on 127.0.0.2-7)."""

_ALIASES = {"zookeeper_conn_id": "kafka_zookeeper_conn_id"}
_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ClusterFileError(ValueError):
    """The cluster file cannot be used; the message names the file and the key."""


def clusters_file(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or os.environ.get("KAFKA_ZK_CLUSTERS_FILE") or DEFAULT_FILE)


def _expand(value: Any) -> Any:
    """``${VAR}`` in strings (also inside tables and arrays) from the environment; unknown ones stay."""
    if isinstance(value, str):
        return _ENV_VAR.sub(lambda m: os.environ.get(m[1], m[0]), value)
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def load_clusters(
    path: str | os.PathLike[str] | None = None, *, builtin_demo: bool = True
) -> dict[str, dict[str, Any]]:
    """Enabled cluster name -> settings ([defaults] and DEFAULTS applied, ``${VAR}`` expanded).

    With no file, or a file listing no cluster, the built-in demo cluster (``builtin_demo``) or nothing.
    """
    file = clusters_file(path)
    document: dict[str, Any] = {}
    if file.is_file():
        try:
            document = tomllib.loads(file.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ClusterFileError(f"{file}: {exc}") from None
    defaults = {**DEFAULTS, **document.get("defaults", {})}
    clusters = document.get("clusters") or ({DEMO_CLUSTER: BUILT_IN_DEMO} if builtin_demo else {})
    out = {}
    for name, settings in clusters.items():
        if not isinstance(settings, dict):
            raise ClusterFileError(f"{file}: [clusters.{name}] must be a table")
        merged = _expand({_ALIASES.get(k, k): v for k, v in {**defaults, **settings}.items()})
        if merged.get("enabled", True) is False:
            continue
        merged.setdefault("kafka_zookeeper_conn_id", f"kafka_zk_{name}")
        merged.setdefault("ssh_conn_id", f"kafka_zk_{name}_ssh")
        if merged["engine"] not in ("spark", "in-process"):
            raise ClusterFileError(f"{file}: clusters.{name}.engine must be 'spark' or 'in-process'")
        if not isinstance(merged["log_scan"], bool):
            raise ClusterFileError(f"{file}: clusters.{name}.log_scan must be true or false")
        if merged["log_scan_fail_on"] not in LOG_SCAN_FAIL_ON:
            raise ClusterFileError(
                f"{file}: clusters.{name}.log_scan_fail_on must be one of {', '.join(LOG_SCAN_FAIL_ON)}"
            )
        out[name] = merged
    return out


def cluster_setting(params: dict[str, Any], key: str) -> Any:
    """A per-cluster setting at task run time (a DAG macro): the cluster file's value for the run's
    ``params.cluster``, else the ``KAFKA_ZK_*`` environment default for a file-less single cluster."""
    cluster = params["cluster"]
    configured = load_clusters(builtin_demo=False)
    value = configured.get(cluster, {}).get(key)
    if value:
        return value
    if key == "kafka_zookeeper_conn_id":
        return os.environ.get("KAFKA_ZK_ZOOKEEPER_CONN_ID") or (
            f"kafka_zk_{cluster}" if configured else "kafka_zookeeper_default"
        )
    if key == "ssh_conn_id":
        return os.environ.get("KAFKA_ZK_SSH_CONN_ID") or (
            f"kafka_zk_{cluster}_ssh" if configured else "ssh_default"
        )
    if key == "base_path":
        from airflow_provider_kafka_zk.operators.snapshot import default_artefacts_base

        return os.environ.get("KAFKA_ZK_ARTEFACTS_BASE") or default_artefacts_base()
    if key == "server_properties_path":
        return os.environ.get("KAFKA_ZK_SERVER_PROPERTIES_PATH") or None
    return None
