"""Apache Airflow provider for ZooKeeper-mode Kafka clusters (Kafka 0.11 ... 3.9).

Layers, imports pointing down only: ``operators``/``sensors``/``triggers`` (thin Airflow shells) ->
``hooks`` (ZooKeeper through kazoo, broker hosts over SSH) -> ``kafka`` (pure core: formats, model,
rules, planners; no Airflow, no I/O). ``testing`` holds real local services and a cluster simulator.
"""

__version__ = "0.2.0"
