"""Pre-restart check: will this broker come back after a restart, and what would recovery cost?

The DAG is built by ``airflow_provider_kafka_zk.dags.pre_restart_check`` (shipped in the wheel): copy this file
into your DAGs folder, or point ``dags_folder`` at this directory.
"""

from airflow_provider_kafka_zk.dags.pre_restart_check import create_dags

globals().update(create_dags())
