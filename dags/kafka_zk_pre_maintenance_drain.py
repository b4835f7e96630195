"""Pre-maintenance drain: move the replication-factor-1 partitions off brokers before they stop.

The DAG is built by ``airflow_provider_kafka_zk.dags.pre_maintenance_drain`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.pre_maintenance_drain import create_dags

globals().update(create_dags())
