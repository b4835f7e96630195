"""Pure core: Kafka's ZooKeeper and on-disk formats, the cluster model, rules and planners.

Nothing here imports Airflow or does network I/O, so it runs in a notebook, a unit test or a
Spark executor (shipped as py_files) alike. Formats follow KAFKA_FORMATS.md (source-checked).
"""
