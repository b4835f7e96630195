"""Undo a change: put back what one drain, move-back, topicId repair or deletion cleanup run changed.

The DAG is built by ``airflow_provider_kafka_zk.dags.undo`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.undo import create_dags

globals().update(create_dags())
