"""KRaft migration readiness: can this ZooKeeper-mode cluster leave ZooKeeper now?

The DAG is built by ``airflow_provider_kafka_zk.dags.kraft_migration_readiness`` (shipped in the wheel): copy
this file into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.kraft_migration_readiness import create_dags

globals().update(create_dags())
