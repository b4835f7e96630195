"""The cluster audit as a hand-run ``spark-submit`` entry point from a checkout.

The DAGs submit the copy shipped in the wheel
(``airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py``, found with
``airflow_provider_kafka_zk.spark_jobs.package.application_path``); this file only calls it.
"""

import sys

from airflow_provider_kafka_zk.spark_jobs.apps.kafka_zk_audit import main

if __name__ == "__main__":
    sys.exit(main())
