"""What runs on Spark (or in the task's own process), with no Airflow import: the cluster audit
(:mod:`.audit`), the pre-restart log-scan verdicts (:mod:`.log_scan`), their ``spark-submit``
entry points (:mod:`.apps`), and the ``--py-files`` archive that ships the pure core (:mod:`.package`).
"""
