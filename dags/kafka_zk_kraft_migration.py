"""ZooKeeper to KRaft, one phase forward or back per run, planned, approved, gated and reversible.

The DAG is built by ``airflow_provider_kafka_zk.dags.kraft_migration`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.kraft_migration import create_dags

globals().update(create_dags())
