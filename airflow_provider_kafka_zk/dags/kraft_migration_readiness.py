"""KRaft migration readiness: can this ZooKeeper-mode cluster leave ZooKeeper now?

Triggered by hand; reads only. A snapshot, the inventory of every broker (its disk and its
server.properties over SSH), the audit's rules on both (in-process), then the readiness checks: the
brokers' release and ``inter.broker.protocol.version``, topic ids in ZooKeeper and in every replica,
nothing pending (reassignment, deletion, preferred election, throttles, offline or under-min-ISR
partitions, this provider's maintenance lease), features the release's migration or KRaft mode lacks
(JBOD before it is supported), the migration's broker settings and controller ids, what the migration
will copy and what it leaves behind, and traces of clients writing ZooKeeper directly. Each check is
PASS, BLOCKER or WARNING with its evidence, its fix -- the provider's DAG run with its exact conf
where it has one, e.g. the topicId repair's write-back -- and the Kafka source the rule comes from.
One verdict: "ready to migrate", "N blockers", or the phase of a migration already running. The run
fails while blockers remain (``fail_on_blockers``). Artefacts: ``<base>/<cluster>/kraft-readiness/<ts>/``
(``readiness.json``, ``report.txt``, the audit's findings in ``audit/``).

Clusters and their connections come from the cluster file (see the drain DAG). The same checks run
as an optional stage of the daily audit (cluster file: ``kraft_readiness = true``).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from airflow_provider_kafka_zk.dags._alerting import add_run_alert
from airflow_provider_kafka_zk.dags._manual import (
    READ_RETRIES,
    RUN_TS,
    artefact_url,
    brokers_inventory_and_coverage,
    cluster_audit,
    cluster_choices,
    cluster_snapshot,
    manual_dag,
    setting,
)
from airflow_provider_kafka_zk.operators.kraft_readiness import READINESS_DIR, KraftReadinessOperator

DAG_ID = "kafka_zk_kraft_migration_readiness"

_TS = "{{ " + RUN_TS + " }}"


def build_dag() -> DAG:
    """The ``kafka_zk_kraft_migration_readiness`` DAG; its cluster choice is the cluster file's at parse time."""
    clusters = cluster_choices()
    with manual_dag(
        DAG_ID,
        tags=["kraft", "migration", "readiness"],
        doc_md=__doc__,
        one_at_a_time=False,
        params={
            "cluster": Param(
                clusters[0], type="string", enum=clusters, description="Cluster to check", title="Cluster"
            ),
            "controller_node_ids": Param(
                [3000, 3001, 3002],
                type="array",
                items={"type": "integer", "minimum": 0},
                minItems=1,
                title="KRaft controller node ids",
                description="The node.id values planned for the KRaft controllers: they must not be broker ids",
            ),
            "kafka_version": Param(
                None,
                type=["null", "string"],
                pattern="^[0-9]+[.][0-9]+([.][0-9]+){0,2}$",
                title="Kafka release",
                description="The brokers' release when the inventory cannot tell (it reads the running broker's jars)",
            ),
            "fail_on_blockers": Param(
                True,
                type="boolean",
                title="Fail while blockers remain",
                description="Fail the run while a check is a blocker (the report is written either way)",
            ),
        },
    ) as dag:
        snapshot = cluster_snapshot("snapshot", READ_RETRIES)
        brokers, inventory, coverage = brokers_inventory_and_coverage(inventory_ts=_TS)
        findings = artefact_url(READINESS_DIR, RUN_TS, "audit")
        audit = cluster_audit("audit", "snapshot", artefact_url("inventory", RUN_TS), findings)
        readiness = KraftReadinessOperator(
            task_id="readiness",
            cluster="{{ params.cluster }}",
            base_path=setting("base_path"),
            artefacts_conn_id=setting("artefacts_conn_id"),
            kafka_zookeeper_conn_id=setting("kafka_zookeeper_conn_id"),
            snapshot="{{ ti.xcom_pull(task_ids='snapshot')['path'] }}",
            inventory=artefact_url("inventory", RUN_TS),
            findings=findings,
            controller_node_ids="{{ params.controller_node_ids }}",
            kafka_version="{{ params.kafka_version }}",
            fail_on_blockers="{{ params.fail_on_blockers }}",
            readiness_ts=_TS,
        )
        snapshot >> brokers >> inventory >> coverage >> audit >> readiness
    return add_run_alert(dag)  # a failed run pages


def create_dags() -> dict[str, DAG]:
    """``{dag_id: dag}`` for a DAG file's ``globals().update(...)``."""
    dag = build_dag()
    return {dag.dag_id: dag}
