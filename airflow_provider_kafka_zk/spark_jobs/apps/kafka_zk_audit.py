"""PySpark entry point of the cluster audit (launched by SparkSubmitOperator in the daily hygiene DAG).

    spark-submit --py-files airflow_provider_kafka_zk.zip airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py \
        --base /data/kafka-artefacts --cluster prod --inventory <base>/prod/inventory/<ts> \
        --out <base>/prod/findings/<ts> [--snapshot DIR] [--previous DIR|""] [--engine spark]

Everything happens in :func:`airflow_provider_kafka_zk.spark_jobs.audit.run_audit`; the package comes
from the ``--py-files`` zip, and no Airflow is needed on the driver or the executors. Prints the
summary as one JSON line (``KAFKA_ZK_AUDIT_SUMMARY {...}``) for the task log.
"""

from __future__ import annotations

import argparse
import json
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="artefact base path or fsspec URL")
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--snapshot", default=None, help="snapshot directory (default: the latest)")
    parser.add_argument(
        "--previous", default=None, help='previous snapshot directory (default: the one before; "" for none)'
    )
    parser.add_argument("--inventory", default=None, help="inventory run directory")
    parser.add_argument(
        "--out", default=None, help="findings directory (default: <base>/<cluster>/findings/<now>)"
    )
    parser.add_argument("--engine", choices=("spark", "in-process"), default="spark")
    parser.add_argument("--now-ms", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from airflow_provider_kafka_zk.artefacts.object_storage import bind_from_environment

    bind_from_environment()  # a remote store's connection, handed over as a private file
    from airflow_provider_kafka_zk.spark_jobs.audit import run_audit

    spark = None
    if args.engine == "spark":
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"kafka_zk_audit_{args.cluster}").getOrCreate()
    try:
        summary = run_audit(
            args.base,
            args.cluster,
            snapshot=args.snapshot or None,
            previous=args.previous,
            inventory=args.inventory or None,
            out=args.out or None,
            engine=args.engine,
            spark=spark,
            now_ms=args.now_ms,
        )
    finally:
        if spark is not None:
            spark.stop()
    print(
        "KAFKA_ZK_AUDIT_SUMMARY " + json.dumps({k: summary[k] for k in ("findings", "by_severity", "report")})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
