"""``python -m airflow_provider_kafka_zk.metrics <command>``:

* ``dashboard`` -- the Grafana dashboard JSON (import it in Grafana: Dashboards > New > Import).
* ``list`` -- the metric list as the README shows it (Markdown).
* ``statsd-mapping [prefix]`` -- a statsd_exporter mapping for StatsD without tags (prefix: Airflow's
  ``[metrics] statsd_prefix``, default ``airflow``).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else ""
    if command == "dashboard":
        from airflow_provider_kafka_zk.metrics.dashboard import dashboard_text

        sys.stdout.write(dashboard_text())
    elif command == "list":
        from airflow_provider_kafka_zk.metrics.definitions import markdown_table

        print(markdown_table())
    elif command == "statsd-mapping":
        from airflow_provider_kafka_zk.metrics.definitions import statsd_mapping

        sys.stdout.write(statsd_mapping(args[1] if len(args) > 1 else "airflow"))
    else:
        sys.stderr.write(__doc__ or "")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
