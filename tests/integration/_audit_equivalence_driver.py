"""The daily audit's steps on deployed clusters, run by ``test_audit_equivalence.py`` twice: once with
this checkout's package, once with an older commit's (its tree first on ``PYTHONPATH``).

Only calls that exist unchanged at both commits: the ZooKeeper hook's snapshot written as the daily
DAG writes it, ``BrokerInventoryOperator`` per broker, ``InventoryCoverageOperator``, and the
in-process audit (``spark_jobs.audit.run_audit``) at a fixed ``now``. Reads one JSON job on stdin
(connections, clusters, the artefact base); prints the package's path last, so the test can check
which code ran.

    python _audit_equivalence_driver.py < job.json
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    job = json.load(sys.stdin)
    for conn_id, fields in job["connections"].items():
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(fields)

    import airflow_provider_kafka_zk
    from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerInventoryOperator,
        InventoryCoverageOperator,
    )
    from airflow_provider_kafka_zk.spark_jobs import audit as audit_job

    base = job["base"]
    for cluster in job["clusters"]:
        name = cluster["name"]
        with KafkaZooKeeperHook(cluster["zk_conn"]) as hook:
            write_snapshot(base, name, hook.snapshot(), source=hook.target_description())
        snapshot = os.path.join(base, name, "snapshots")
        snapshot = os.path.join(snapshot, sorted(os.listdir(snapshot))[-1])
        brokers = [int(b) for b in cluster["brokers"]]
        for broker_id in brokers:
            BrokerInventoryOperator(
                task_id=f"inventory_{broker_id}",
                broker_id=broker_id,
                cluster=name,
                base_path=base,
                ssh_conn_id=job["ssh_conn"],
                kafka_zookeeper_conn_id=cluster["zk_conn"],
                broker_hosts=cluster["hosts"],
                server_properties_path=cluster["server_properties"],
                inventory_ts=job["ts"],
                connect_timeout=10,
            ).execute({})
        InventoryCoverageOperator(
            task_id="coverage",
            cluster=name,
            base_path=base,
            expected_broker_ids=brokers,
            inventory_ts=job["ts"],
        ).execute({})
        audit_job.run_audit(
            base,
            name,
            snapshot=snapshot,
            previous="",
            inventory=os.path.join(base, name, "inventory", job["ts"]),
            out=os.path.join(base, name, "findings", job["ts"]),
            now_ms=job["now_ms"],
        )
    print(airflow_provider_kafka_zk.__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
