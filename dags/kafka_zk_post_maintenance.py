"""After maintenance: put the cluster back -- move a drain's partitions back, re-elect preferred

The DAG is built by ``airflow_provider_kafka_zk.dags.post_maintenance`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.post_maintenance import create_dags

globals().update(create_dags())
