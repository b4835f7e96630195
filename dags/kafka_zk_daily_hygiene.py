"""Daily hygiene of ZooKeeper-mode Kafka clusters: one DAG per cluster in ``kafka_zk_clusters.toml``.

The DAG is built by ``airflow_provider_kafka_zk.dags.daily_hygiene`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.daily_hygiene import create_dags

globals().update(create_dags())
