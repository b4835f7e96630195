"""topicId repair (KAFKA-14190): heal topics whose ZooKeeper ``topic_id`` and replicas disagree.

The DAG is built by ``airflow_provider_kafka_zk.dags.topic_id_repair`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.topic_id_repair import create_dags

globals().update(create_dags())
