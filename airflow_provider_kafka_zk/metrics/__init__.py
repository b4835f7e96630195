"""The provider's metrics: the clusters' hygiene after each daily run and every maintenance run's
progress, for the dashboards the on-call already has open.

* :mod:`.definitions` -- every metric, defined once (name, type, help, labels): the README's list,
  the dashboard and the statsd_exporter mapping are made from it.
* :mod:`.figures` -- from what a run wrote (``summary.json``, plan steps, ``progress.json``,
  ``approval.json``, change logs) to samples (pure).
* :mod:`.publish` -- to Airflow's metrics layer (StatsD / OpenTelemetry) and a Prometheus
  Pushgateway; optional, off by default, never failing or holding up a task.
* :mod:`.runs` -- the one call each place makes (the daily alert, the step executor, the reassignment
  wait, the manual DAGs' alert).
* :mod:`.dashboard` -- the Grafana dashboard (``python -m airflow_provider_kafka_zk.metrics dashboard``).
"""
