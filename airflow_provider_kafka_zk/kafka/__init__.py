"""Pure core: Kafka's ZooKeeper and on-disk formats, the cluster model, rules and planners.

Nothing here imports Airflow or does network I/O, so it runs in a notebook, a unit test or a
Spark executor (shipped as py_files) alike. Formats follow Kafka's own source at the release
tags named in each module (apache/kafka, e.g. ``core/src/main/scala/kafka/zk/ZkData.scala`` at
3.3.1) and the golden files of a real 3.3.1 cluster in ``tests/fixtures/real-kafka-3.3.1``.
"""
