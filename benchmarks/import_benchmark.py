"""What importing the provider costs a task or a Spark job (issue 17): fresh Python processes, median
of ``--repeat`` runs each.

* baseline: a bare interpreter, and ``import airflow.sdk`` (Airflow's own cost, paid by every task
  whatever provider it uses);
* the pure core and the Spark jobs alone (they never import Airflow: what a Spark executor pays);
* each hook and operator module *after* ``airflow.sdk`` (the provider's own increment), and the
  third-party modules that increment pulled in (pyarrow, paramiko, kazoo, fsspec).

    python benchmarks/import_benchmark.py [--repeat 5]

No assertions: numbers only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CORE = (
    "airflow_provider_kafka_zk.kafka.model",
    "airflow_provider_kafka_zk.kafka.audit",
    "airflow_provider_kafka_zk.kafka.drain",
    "airflow_provider_kafka_zk.spark_jobs.audit",
)
PROVIDER = (
    "airflow_provider_kafka_zk.hooks.zookeeper",
    "airflow_provider_kafka_zk.hooks.broker_host",
    "airflow_provider_kafka_zk.operators.snapshot",
    "airflow_provider_kafka_zk.operators.inventory",
    "airflow_provider_kafka_zk.operators.drain",
    "airflow_provider_kafka_zk.operators.topic_id_repair",
    "airflow_provider_kafka_zk.dags.pre_maintenance_drain",
)
HEAVY = ("pyarrow", "paramiko", "kazoo", "fsspec", "pyspark", "airflow")

_PROBE = """
import sys, time, json
before = set(sys.modules)
pre = {pre!r}
if pre:
    __import__(pre)
loaded_before = set(sys.modules)
started = time.perf_counter()
__import__({module!r})
elapsed = time.perf_counter() - started
new = set(sys.modules) - loaded_before
heavy = sorted({{m.split('.')[0] for m in new}} & set({heavy!r}))
print(json.dumps({{"seconds": elapsed, "heavy": heavy, "modules": len(new)}}))
"""


def measure(module: str, pre: str, repeat: int) -> dict:
    """Median seconds to import ``module`` in a fresh process after ``pre`` was imported."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _PROBE.format(module=module, pre=pre, heavy=HEAVY)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "heavy": runs[0]["heavy"],
        "modules": runs[0]["modules"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"median of {args.repeat} fresh processes each\n")
    print(f"{'module':60} {'seconds':>8} {'modules':>8}  third-party pulled in")
    sdk = measure("airflow.sdk", "", args.repeat)
    print(
        f"{'airflow.sdk (Airflow itself, every task pays it)':60} {sdk['seconds']:8.3f} {sdk['modules']:8d}"
    )
    for module in CORE:
        r = measure(module, "", args.repeat)
        print(
            f"{module + ' (alone)':60} {r['seconds']:8.3f} {r['modules']:8d}  {', '.join(r['heavy']) or '-'}"
        )
    for module in PROVIDER:
        r = measure(module, "airflow.sdk", args.repeat)
        label = module + " (+ after sdk)"
        print(f"{label:60} {r['seconds']:8.3f} {r['modules']:8d}  {', '.join(r['heavy']) or '-'}")


if __name__ == "__main__":
    main()
