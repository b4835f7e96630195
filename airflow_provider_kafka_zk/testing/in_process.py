"""The daily audit and the KRaft readiness report in this process, from snapshot rows and inventory
summaries (no ZooKeeper, no SSH): what the DAGs' tasks compute, for unit tests on simulated or recorded
clusters."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_kafka_zk.kafka import audit as rules
from airflow_provider_kafka_zk.kafka.findings import Finding
from airflow_provider_kafka_zk.kafka.kraft_readiness import (
    BrokerConfig,
    ReadinessInputs,
    ReadinessReport,
    ZooKeeperExtras,
    assess,
)
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.topic_id_repair import diagnose
from airflow_provider_kafka_zk.spark_jobs.audit import cluster_facts


def audit_and_assess(
    cluster: str,
    rows: Sequence[ZnodeRow],
    summaries: Mapping[int, Mapping[str, Any]],
    dirs: Iterable[rules.ReplicaDir],
    *,
    user_configs: Mapping[str, Mapping[str, str]] | None = None,
    controller_node_ids: Sequence[int] = (3000, 3001, 3002),
    kafka_version: str | None = None,
) -> tuple[ClusterState, list[Finding], ReadinessReport]:
    """The snapshot's model, the audit's findings (inventoried brokers: those in ``summaries``, their
    ``dirs``) and the readiness report on them, as the readiness DAG's tasks compute them."""
    state = ClusterState.from_snapshot(rows, cluster=cluster)
    inventoried = [d for d in dirs if d.broker_id in summaries]
    facts = cluster_facts(cluster, state, summaries, list(summaries), int(time.time() * 1000))
    findings = rules.audit(state, rules.gather_evidence(state, inventoried), facts)
    report = assess(
        ReadinessInputs(
            cluster=cluster,
            state=state,
            findings=findings,
            brokers={b: BrokerConfig.from_inventory_summary(b, s) for b, s in summaries.items()},
            diagnoses=diagnose(state, inventoried, facts.inventoried),
            extras=ZooKeeperExtras.from_rows(rows),
            user_configs=user_configs if user_configs is not None else {},
            controller_node_ids=tuple(controller_node_ids),
            kafka_version=kafka_version,
        )
    )
    return state, findings, report
