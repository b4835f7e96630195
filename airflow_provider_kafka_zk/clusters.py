"""The cluster file: which Kafka clusters the DAG factories run for and how to reach them.

Found at ``$KAFKA_ZK_CLUSTERS_FILE``, else Airflow's ``[kafka_zk] clusters_file``, else
``kafka_zk_clusters.toml`` in the DAGs folder. One loader for every DAG, so the daily hygiene and the
manual DAGs always agree on a cluster's connections and paths. Nothing is scheduled unless the file
names a cluster: there is no built-in one (the demo writes its own file).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

FILE_NAME = "kafka_zk_clusters.toml"
FAIL_ON = ("critical", "error", "warning", "info")
LOG_SCAN_FAIL_ON = ("fails_recovery", "loses_data_if_unclean", "rebuilds_indexes", "never")

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
    "deletion_check": True,
    "deletion_wait_s": 0,
    "kraft_readiness": False,
    "kraft_controller_node_ids": [3000, 3001, 3002],
    "require_approval": True,
    "approvers": [],
    "approval_timeout_s": 86400,
    "kraft_controllers": [],
    "kraft_quorum": "voters",
    "kraft_controller_listener": "CONTROLLER",
    "kraft_controller_security_protocol": "PLAINTEXT",
    "kraft_controller_properties": {},
}
"""Per-cluster defaults; ``fail_on`` yields to ``[kafka_zk] default_fail_on``, the file's ``[defaults]`` to both."""

_ALIASES = {"zookeeper_conn_id": "kafka_zookeeper_conn_id"}
_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ClusterFileError(ValueError):
    """The cluster file cannot be used; the message names the file and the key."""


def provider_option(key: str) -> str:
    """One option of Airflow's ``[kafka_zk]`` config section ('' when unset).

    :param key: the option, e.g. ``clusters_file`` (documented in ``get_provider_info``).
    """
    from airflow.sdk.configuration import conf

    return str(conf.get("kafka_zk", key, fallback="") or "")


def clusters_file(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the cluster file is (it may not exist).

    :param path: an explicit file; else ``$KAFKA_ZK_CLUSTERS_FILE``, ``[kafka_zk] clusters_file``,
        then ``kafka_zk_clusters.toml`` in Airflow's DAGs folder.
    """
    chosen = path or os.environ.get("KAFKA_ZK_CLUSTERS_FILE") or provider_option("clusters_file")
    if chosen:
        return Path(chosen).expanduser()
    from airflow.sdk.configuration import conf

    return Path(conf.get("core", "dags_folder")).expanduser() / FILE_NAME


def default_artefacts_base() -> str:
    """Where artefacts go when a task names no base: ``$KAFKA_ZK_ARTEFACTS_BASE``, else
    ``[kafka_zk] artefacts_base`` from the Airflow config, else ``$AIRFLOW_HOME/kafka-zk-artefacts``.

    The one resolution every DAG (at parse time) and every operator (at run time) uses, so a task
    never writes where the next one does not read.
    """
    if os.environ.get("KAFKA_ZK_ARTEFACTS_BASE"):
        return os.environ["KAFKA_ZK_ARTEFACTS_BASE"]
    configured = provider_option("artefacts_base")
    if configured:
        return configured
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return os.path.join(home, "kafka-zk-artefacts")


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
    path: str | os.PathLike[str] | None = None, *, include_disabled: bool = False
) -> dict[str, dict[str, Any]]:
    """Enabled cluster name -> settings ([defaults] and DEFAULTS applied, ``${VAR}`` expanded).

    With no file, or a file listing no cluster, none: nothing is scheduled.

    :param path: the cluster file; default: :func:`clusters_file`.
    :param include_disabled: also the ``enabled = false`` entries (the approval rule counts them:
        a cluster is not opted out of approval by being left out of the schedule).
    """
    file = clusters_file(path)
    document: dict[str, Any] = {}
    if file.is_file():
        try:
            document = tomllib.loads(file.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ClusterFileError(f"{file}: {exc}") from None
    defaults = {**DEFAULTS, "fail_on": provider_option("default_fail_on") or DEFAULTS["fail_on"]}
    defaults.update(document.get("defaults", {}))
    if "cluster_id" in defaults:
        raise ClusterFileError(f"{file}: cluster_id names one cluster: put it in its [clusters.<name>] table")
    clusters = document.get("clusters") or {}
    out = {}
    for name, settings in clusters.items():
        if not isinstance(settings, dict):
            raise ClusterFileError(f"{file}: [clusters.{name}] must be a table")
        merged = _expand({_ALIASES.get(k, k): v for k, v in {**defaults, **settings}.items()})
        if merged.get("enabled", True) is False and not include_disabled:
            continue
        merged.setdefault("kafka_zookeeper_conn_id", f"kafka_zk_{name}")
        merged.setdefault("ssh_conn_id", f"kafka_zk_{name}_ssh")
        if merged["engine"] not in ("spark", "in-process"):
            raise ClusterFileError(f"{file}: clusters.{name}.engine must be 'spark' or 'in-process'")
        if merged["fail_on"] not in FAIL_ON:
            raise ClusterFileError(f"{file}: clusters.{name}.fail_on must be one of {', '.join(FAIL_ON)}")
        if not isinstance(merged["log_scan"], bool):
            raise ClusterFileError(f"{file}: clusters.{name}.log_scan must be true or false")
        if not isinstance(merged["deletion_check"], bool):
            raise ClusterFileError(f"{file}: clusters.{name}.deletion_check must be true or false")
        if not isinstance(merged["kraft_readiness"], bool):
            raise ClusterFileError(f"{file}: clusters.{name}.kraft_readiness must be true or false")
        nodes = merged["kraft_controller_node_ids"]
        if not isinstance(nodes, list) or not nodes or not all(type(n) is int and n >= 0 for n in nodes):
            raise ClusterFileError(
                f"{file}: clusters.{name}.kraft_controller_node_ids must be a list of node ids"
            )
        wait_s = merged["deletion_wait_s"]
        if isinstance(wait_s, bool) or not isinstance(wait_s, int | float) or wait_s < 0:
            raise ClusterFileError(
                f"{file}: clusters.{name}.deletion_wait_s must be a number of seconds >= 0"
            )
        _check_kraft(file, name, merged)
        tasks = merged.get("inventory_tasks")
        if tasks is not None and (type(tasks) is not int or tasks < 1):
            raise ClusterFileError(f"{file}: clusters.{name}.inventory_tasks must be a whole number >= 1")
        _check_notify(file, name, merged.get("notify"))
        _check_approval(file, name, merged)
        if merged["log_scan_fail_on"] not in LOG_SCAN_FAIL_ON:
            raise ClusterFileError(
                f"{file}: clusters.{name}.log_scan_fail_on must be one of {', '.join(LOG_SCAN_FAIL_ON)}"
            )
        out[name] = merged
    return out


def _check_approval(file: Path, name: str, settings: dict[str, Any]) -> None:
    """``require_approval`` (a boolean), ``cluster_id`` (optional: the ``/cluster/id`` the entry
    is), ``approvers`` (user ids or ``role:<name>``) and ``approval_timeout_s`` (seconds > 0): what
    a real write to the cluster waits for."""
    if not isinstance(settings["require_approval"], bool):
        raise ClusterFileError(f"{file}: clusters.{name}.require_approval must be true or false")
    pinned = settings.get("cluster_id")
    if pinned is not None and (not isinstance(pinned, str) or not pinned.strip()):
        raise ClusterFileError(
            f"{file}: clusters.{name}.cluster_id must be the cluster's /cluster/id text (e.g. from the "
            "connection test or identity.json of a run)"
        )
    approvers = settings["approvers"]
    if isinstance(approvers, str):
        approvers = [approvers]
    if not isinstance(approvers, list) or not all(isinstance(a, str) and a.strip() for a in approvers):
        raise ClusterFileError(
            f'{file}: clusters.{name}.approvers must be a list of Airflow user ids or "role:<role>" entries'
        )
    for entry in approvers:
        if entry.strip().lower().startswith("role:") and not entry.split(":", 1)[1].strip():
            raise ClusterFileError(f"{file}: clusters.{name}.approvers: {entry!r} names no role")
    settings["approvers"] = [a.strip() for a in approvers]
    timeout = settings["approval_timeout_s"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ClusterFileError(f"{file}: clusters.{name}.approval_timeout_s must be a number of seconds > 0")


KRAFT_COMMANDS = (
    "broker_restart_command",
    "kraft_format_command",
    "kraft_controller_start_command",
    "kraft_controller_stop_command",
    "kraft_controller_restart_command",
)
"""The command templates the KRaft migration DAG runs over SSH (rendered and checked at its preflight)."""


def _check_kraft(file: Path, name: str, settings: dict[str, Any]) -> None:
    """The KRaft controllers (``kraft_controllers``: node id, host, config path, log dir, port) and the
    migration's command templates; ``kraft_controller_node_ids`` follows the controllers given."""
    where = f"{file}: clusters.{name}"
    controllers = settings["kraft_controllers"]
    if not isinstance(controllers, list):
        raise ClusterFileError(f"{where}.kraft_controllers must be a list of tables")
    seen: set[int] = set()
    for i, entry in enumerate(controllers):
        at = f"{where}.kraft_controllers[{i}]"
        if not isinstance(entry, dict):
            raise ClusterFileError(f"{at} must be a table (node_id, host, config_path, log_dir, port)")
        unknown = sorted(
            set(entry) - {"node_id", "host", "config_path", "log_dir", "port", "advertised_host", "log_file"}
        )
        if unknown:
            raise ClusterFileError(f"{at}: unknown key(s) {unknown}")
        node = entry.get("node_id")
        if type(node) is not int or node < 0 or node in seen:
            raise ClusterFileError(f"{at}.node_id must be a distinct integer >= 0")
        seen.add(node)
        for key in ("host", "config_path", "log_dir"):
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ClusterFileError(f"{at}.{key} must be a non-empty string")
        for key in ("config_path", "log_dir"):
            if not entry[key].startswith("/"):
                raise ClusterFileError(f"{at}.{key} must be an absolute path")
        port = entry.setdefault("port", 9093)
        if type(port) is not int or not 0 < port < 65536:
            raise ClusterFileError(f"{at}.port must be a TCP port")
    if controllers:
        settings["kraft_controller_node_ids"] = sorted(seen)
    if settings["kraft_quorum"] not in ("voters", "bootstrap"):
        raise ClusterFileError(f'{where}.kraft_quorum must be "voters" or "bootstrap"')
    for key in ("kraft_controller_listener", "kraft_controller_security_protocol"):
        if not isinstance(settings[key], str) or not settings[key].strip():
            raise ClusterFileError(f"{where}.{key} must be a non-empty string")
    extra = settings["kraft_controller_properties"]
    if not isinstance(extra, dict) or not all(isinstance(v, str | int | bool) for v in extra.values()):
        raise ClusterFileError(f"{where}.kraft_controller_properties must be a table of key = value")
    for key in KRAFT_COMMANDS:
        value = settings.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ClusterFileError(f"{where}.{key} must be a command template (a non-empty string)")


def _check_notify(file: Path, name: str, notify: Any) -> None:
    """The ``notify`` table's shape (kinds, keys, addresses); whether it can deliver is checked by
    the daily DAG file (:func:`airflow_provider_kafka_zk.alerts.check_at_parse`)."""
    from airflow_provider_kafka_zk.alerts.settings import NotifyConfigError, parse_notify

    try:
        parse_notify(notify, f"clusters.{name}.notify")
    except NotifyConfigError as exc:
        raise ClusterFileError(f"{file}: {exc}") from None


def cluster_setting(params: dict[str, Any], key: str) -> Any:
    """A per-cluster setting at task run time (a DAG macro): the cluster file's value for the run's
    ``params.cluster``, else, for a file-less single cluster, the ``KAFKA_ZK_*`` environment variable
    or the ``[kafka_zk] default_*`` option.

    :param params: the run's params (``cluster`` is read).
    :param key: a cluster-file key, e.g. ``kafka_zookeeper_conn_id`` or ``base_path``.
    """
    cluster = params["cluster"]
    configured = load_clusters()
    value = configured.get(cluster, {}).get(key)
    if value:
        return value
    if key == "kafka_zookeeper_conn_id":
        return os.environ.get("KAFKA_ZK_ZOOKEEPER_CONN_ID") or (
            f"kafka_zk_{cluster}"
            if configured
            else provider_option("default_kafka_zookeeper_conn_id") or "kafka_zookeeper_default"
        )
    if key == "ssh_conn_id":
        return os.environ.get("KAFKA_ZK_SSH_CONN_ID") or (
            f"kafka_zk_{cluster}_ssh"
            if configured
            else provider_option("default_ssh_conn_id") or "ssh_default"
        )
    if key == "base_path":
        return default_artefacts_base()
    if key == "server_properties_path":
        return os.environ.get("KAFKA_ZK_SERVER_PROPERTIES_PATH") or None
    if key == "artefacts_conn_id":  # '' (never "None" in a template): the operators' default then
        return provider_option("artefacts_conn_id")
    return None
