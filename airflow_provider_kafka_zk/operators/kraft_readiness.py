"""ZooKeeper-to-KRaft migration readiness as an Airflow task: artefacts in, one verdict out.

``KraftReadinessOperator`` reads what the run's earlier tasks wrote -- the snapshot, the broker
inventory (server.properties of every broker included), the in-process audit's findings -- plus the
users' config keys (``/config/users`` is stored as a digest in a snapshot: SCRAM credentials), runs
the checks of :mod:`airflow_provider_kafka_zk.kafka.kraft_readiness` and writes
``<base>/<cluster>/kraft-readiness/<ts>/readiness.json`` and ``report.txt``. It reads ZooKeeper and
never writes it. With ``fail_on_blockers`` the task fails while blockers remain (the manual DAG);
the daily audit's optional stage only reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import fsspec
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import (
    path_prefix_mask,
    read_snapshot_table,
    validate_cluster_name,
)
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.kraft_readiness import (
    SCRAM_MECHANISMS,
    BrokerConfig,
    ReadinessInputs,
    ReadinessReport,
    ZooKeeperExtras,
    assess,
)
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.topic_id_repair import diagnose
from airflow_provider_kafka_zk.maintenance import parse_safety_flags
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

READINESS_DIR = "kraft-readiness"
REDACTED = "[redacted]"


class KraftReadinessBlockedError(AirflowFailException):
    """Blockers remain: the message is the verdict, each blocker and where the report is."""


# ---------------------------------------------------------------------------------------------
# Reading (no Airflow below this line until the operator)
# ---------------------------------------------------------------------------------------------


def read_user_configs(hook: KafkaZooKeeperHook) -> dict[str, dict[str, str]]:
    """``/config/users/<user>`` and ``/config/users/<user>/clients/<id>`` configs, read from ZooKeeper.

    A snapshot keeps these znodes only as a digest (SCRAM credentials); the readiness needs their keys
    (which SCRAM mechanisms, which quotas) and the quota values (the migration parses them as numbers).
    SCRAM credential values are replaced by :data:`REDACTED` at once: they never reach a log or artefact.
    A znode that does not decode is returned as ``{"<unreadable>": <reason>}``.
    """
    root = zk.config_entity_type_path("users")
    if hook.exists(root) is None:
        return {}
    out: dict[str, dict[str, str]] = {}

    def read(name: str) -> None:
        path = f"{root}/{name}"
        data, _ = hook.get_znode(path)
        if data is None:
            return  # a container Kafka created for a user's client quotas only
        try:
            entity = zk.ConfigEntity.decode(data, path)
        except KafkaFormatError as exc:
            out[name] = {"<unreadable>": str(exc.expected)}
            return
        out[name] = {k: (REDACTED if k in SCRAM_MECHANISMS else v) for k, v in entity.config.items()}

    for user in sorted(hook.get_children(root)):
        read(user)
        if hook.exists(f"{root}/{user}/clients") is not None:
            for client in sorted(hook.get_children(f"{root}/{user}/clients")):
                read(f"{user}/clients/{client}")
    return out


def _extras(snapshot: str) -> ZooKeeperExtras:
    """The ACL, token, old-consumer and lease znodes of a snapshot (its other rows are not decoded)."""
    _, table = read_snapshot_table(snapshot)
    keep = path_prefix_mask(table.column("path"), ZooKeeperExtras.PREFIXES)
    selected = table.filter(keep) if keep is not None else table.slice(0, 0)
    rows = (ZnodeRow(**r) for r in selected.to_pylist())
    return ZooKeeperExtras.from_rows(rows)


def build_report(
    base: str,
    cluster: str,
    *,
    snapshot: str,
    inventory: str,
    findings: str,
    user_configs: Mapping[str, Mapping[str, str]] | None,
    controller_node_ids: Sequence[int] = (3000, 3001, 3002),
    kafka_version: str | None = None,
) -> ReadinessReport:
    """The readiness of ``cluster`` from one run's artefacts.

    :param base: the artefact store (already bound to its connection).
    :param snapshot: the snapshot directory.
    :param inventory: the inventory run directory (every broker's server.properties and log dirs).
    :param findings: the audit's findings directory of the same snapshot and inventory.
    :param user_configs: :func:`read_user_configs`'s result (None: not read).
    :param controller_node_ids: the KRaft controllers' planned ``node.id`` values.
    :param kafka_version: the brokers' release when the inventory cannot tell.
    """
    inputs = audit_job.load_inputs(base, cluster, snapshot=snapshot, previous="", inventory=inventory)
    return assess(
        ReadinessInputs(
            cluster=cluster,
            state=inputs.state,
            findings=audit_job.read_findings(findings),
            brokers={
                b: BrokerConfig.from_inventory_summary(b, s)
                for b, s in sorted(inputs.broker_summaries.items())
            },
            diagnoses=diagnose(inputs.state, inputs.dirs, inputs.facts.inventoried),
            extras=_extras(inputs.snapshot),
            user_configs=user_configs,
            controller_node_ids=tuple(int(n) for n in controller_node_ids),
            kafka_version=kafka_version or None,
        )
    )


def write_report(out: str, report: ReadinessReport) -> dict[str, str]:
    """``readiness.json`` then ``report.txt`` under ``out``; returns their URLs."""
    fs, root = fsspec.core.url_to_fs(out)
    root = root.rstrip("/")
    write_atomically(fs, f"{root}/readiness.json", json.dumps(report.to_dict(), indent=1).encode())
    write_atomically(fs, f"{root}/report.txt", report.text().encode())
    return {"readiness": f"{out.rstrip('/')}/readiness.json", "report": f"{out.rstrip('/')}/report.txt"}


def _node_ids(value: Any) -> list[int]:
    """The planned controller ids as given (a list, or text such as ``"3000,3001"`` or ``"[3000]"``)."""
    if isinstance(value, str):
        text = value.strip().strip("[]")
        items: Iterable[Any] = [i for i in text.split(",") if i.strip()]
    else:
        items = value or ()
    try:
        return [int(str(i).strip()) for i in items]
    except ValueError:
        raise ValueError(f"controller_node_ids must be integers, not {value!r}") from None


# ---------------------------------------------------------------------------------------------
# The operator
# ---------------------------------------------------------------------------------------------


class KraftReadinessOperator(BaseOperator):
    """Check that a ZooKeeper-mode cluster can migrate to KRaft now; write the report.

    Reads only (artefacts and, for ``/config/users``, ZooKeeper). Returns the verdict, the blockers
    and the artefact URLs.

    :param cluster: the cluster's name.
    :param base_path: artefact store root.
    :param snapshot: the run's snapshot directory.
    :param inventory: the run's inventory directory.
    :param findings: the run's audit findings directory.
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection (``/config/users`` is read).
    :param controller_node_ids: the KRaft controllers' planned ``node.id`` values (list or "3000,3001").
    :param kafka_version: the brokers' release when the inventory cannot tell (empty: unknown).
    :param readiness_ts: the report's folder name (default: the run's).
    :param fail_on_blockers: fail the task while blockers remain (a real boolean or true/false text).
    :param artefacts_conn_id: the Airflow connection of a remote store base.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "snapshot",
        "inventory",
        "findings",
        "kafka_zookeeper_conn_id",
        "controller_node_ids",
        "kafka_version",
        "readiness_ts",
        "fail_on_blockers",
        "artefacts_conn_id",
    )
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        cluster: str,
        snapshot: str,
        inventory: str,
        findings: str,
        kafka_zookeeper_conn_id: str,
        base_path: str | None = None,
        controller_node_ids: Any = (3000, 3001, 3002),
        kafka_version: str | None = None,
        readiness_ts: str | None = None,
        fail_on_blockers: Any = True,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.base_path = base_path
        self.snapshot = snapshot
        self.inventory = inventory
        self.findings = findings
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.controller_node_ids = controller_node_ids
        self.kafka_version = kafka_version
        self.readiness_ts = readiness_ts
        self.fail_on_blockers = fail_on_blockers
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

        flags = parse_safety_flags(fail_on_blockers=self.fail_on_blockers)
        nodes = _node_ids(self.controller_node_ids)
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            users = read_user_configs(hook)
        report = build_report(
            base,
            self.cluster,
            snapshot=self.snapshot,
            inventory=self.inventory,
            findings=self.findings,
            user_configs=users,
            controller_node_ids=nodes,
            kafka_version=self.kafka_version or None,
        )
        out = "/".join(
            [
                base.rstrip("/"),
                validate_cluster_name(self.cluster),
                READINESS_DIR,
                _resolve_ts(self.readiness_ts, context),
            ]
        )
        paths = write_report(out, report)
        for line in report.text().splitlines():
            self.log.info("%s", line)
        result = {
            "cluster": self.cluster,
            "verdict": report.verdict,
            "blockers": [c.check for c in report.blockers],
            "warnings": [c.check for c in report.warnings],
            "migration": report.migration.phase_name if report.migration is not None else None,
            **paths,
        }
        if flags["fail_on_blockers"] and report.blockers:
            raise KraftReadinessBlockedError(
                f"{self.cluster}: {report.verdict}: "
                + "; ".join(f"[{c.check}] {c.evidence} -> {c.fix}" for c in report.blockers)
                + f". Report: {paths['report']}"
            )
        return result
