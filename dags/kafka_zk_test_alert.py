"""Test alert: prove a cluster's on-call path (its notify channels) before an incident needs it.

The DAG is built by ``airflow_provider_kafka_zk.dags.test_alert`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.test_alert import create_dags

globals().update(create_dags())
