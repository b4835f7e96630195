"""PySpark entry point of the pre-restart scan's verdicts (SparkSubmitOperator in the daily hygiene DAG).

    spark-submit --py-files airflow_provider_kafka_zk.zip airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_log_scan.py \
        --base /data/kafka-artefacts --cluster prod --scan <base>/prod/log-scan/<ts> [--snapshot DIR] \
        [--fail-on fails_recovery|loses_data_if_unclean|rebuilds_indexes|never] [--engine spark]

Everything happens in :func:`airflow_provider_kafka_zk.spark_jobs.log_scan.judge_scan` (one broker per
task on the executors); prints the verdicts as one JSON line (``KAFKA_ZK_LOG_SCAN {...}``) and
exits 1 when a broker's verdict reaches ``--fail-on`` (the task fails, the DAG alerts).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--scan", required=True, help="the scan's folder")
    parser.add_argument("--snapshot", default=None)
    parser.add_argument(
        "--fail-on",
        default="fails_recovery",
        choices=("fails_recovery", "loses_data_if_unclean", "rebuilds_indexes", "never"),
    )
    parser.add_argument("--engine", choices=("spark", "in-process"), default="spark")
    args = parser.parse_args(argv)
    from airflow_provider_kafka_zk.artefacts.object_storage import bind_from_environment

    bind_from_environment()  # a remote store's connection, handed over as a private file
    from airflow_provider_kafka_zk.kafka.log_scan_rules import Verdict
    from airflow_provider_kafka_zk.spark_jobs.log_scan import judge_scan

    spark = None
    if args.engine == "spark":
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"kafka_zk_log_scan_{args.cluster}").getOrCreate()
    try:
        result = judge_scan(args.base, args.cluster, args.scan, snapshot=args.snapshot or None, spark=spark)
    finally:
        if spark is not None:
            spark.stop()
    print(result["report_text"])
    print(
        "KAFKA_ZK_LOG_SCAN "
        + json.dumps([{k: v[k] for k in ("broker_id", "verdict")} for v in result["verdicts"]])
    )
    if args.fail_on == "never":
        return 0
    threshold = Verdict[args.fail_on.upper()]
    bad = [v for v in result["verdicts"] if Verdict[v["verdict"].upper()] >= threshold]
    for v in bad:
        print(f"RESTART RISK: {v['describe']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
