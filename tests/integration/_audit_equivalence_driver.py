"""The daily audit's inventory on deployed clusters, run by ``test_audit_equivalence.py`` twice: once
with this checkout's package, once with an older commit's (its tree first on ``PYTHONPATH``).

Only calls that exist unchanged at both commits: ``BrokerInventoryOperator`` per broker and
``InventoryCoverageOperator``. Reads one JSON job on stdin (connections, clusters, the artefact base);
prints the package's path last, so the test can check which code ran.

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
    from airflow_provider_kafka_zk.operators.inventory import (
        BrokerInventoryOperator,
        InventoryCoverageOperator,
    )

    base = job["base"]
    for cluster in job["clusters"]:
        name = cluster["name"]
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
    print(airflow_provider_kafka_zk.__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
