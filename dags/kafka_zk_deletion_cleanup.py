"""Deletion cleanup: move deleted topics' leftovers into a quarantine and delete their config znodes,
as an approved change (plan, approve, execute, verify).

The DAG is built by ``airflow_provider_kafka_zk.dags.deletion_cleanup`` (shipped in the wheel): copy this
file into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.deletion_cleanup import create_dags

globals().update(create_dags())
