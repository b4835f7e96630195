"""Cluster audit at scale: the in-process path (baseline) vs the Spark job on local[2] and on a Spark
standalone cluster (master + worker on loopback), on the same artefacts.

    python benchmarks/audit_benchmark.py [--partitions 200000] [--brokers 30] [--skip-standalone]

The cluster is simulated (RF=3, one broker stopped so the health rules have work), its snapshot rows
come from ``testing/simulator/rows`` and its inventory from the simulator's replica directories
written as inventory Parquet: no ZooKeeper or SSH. Spark wall times are whole ``spark-submit`` runs
(JVM start included); "audit" is the job's own load + rules + publish time from summary.json.
Findings of all three runs must be identical. No assertion on time: the ratios are the result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.spark_jobs.package import application_path, build_package_zip
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows
from airflow_provider_kafka_zk.testing.simulator.spec import BrokerSpec, ClusterSpec, TopicSpec
from airflow_provider_kafka_zk.testing.spark_standalone import SparkStandaloneCluster

VENV_BIN = Path(sys.executable).parent
NOW_MS = 1_763_800_000_000
PER_TOPIC = 100


def build_artefacts(base: Path, partitions: int, brokers: int) -> dict[str, str]:
    started = time.monotonic()
    spec = ClusterSpec(
        name="bench",
        brokers=tuple(BrokerSpec(i, rack=f"r{i % 3 + 1}") for i in range(brokers)),
        topics=tuple(
            TopicSpec(f"topic-{i:05d}", partitions=PER_TOPIC, replication_factor=3, records_per_partition=1)
            for i in range(max(1, partitions // PER_TOPIC))
        ),
        min_insync_replicas=2,
    )
    cluster = SimulatedCluster(spec)
    cluster.stop_broker(brokers // 2, clean=True)
    rows = cluster_rows(cluster)
    dirs = audit_dirs(cluster)
    snapshot = write_snapshot_rows(base, "bench", rows, datetime(2026, 11, 22, tzinfo=UTC))
    facts = {
        b: {"broker.id": b, "inter.broker.protocol.version": str(spec.ibp)}
        for b in cluster.online_broker_ids()
    }
    inventory = write_inventory_dirs(base, "bench", "20261122T000000", dirs, broker_facts=facts)
    print(
        f"simulated {len(cluster.brokers)} brokers, {sum(t.partitions for t in spec.topics)} partitions, "
        f"{len(dirs)} replica dirs ({sum(1 for d in dirs if d.broker_id in facts)} inventoried), "
        f"{len(rows)} znodes in {time.monotonic() - started:.1f}s",
        flush=True,
    )
    return {"base": str(base), "snapshot": str(snapshot), "inventory": str(inventory)}


def spark_submit(master: str, artefacts: dict[str, str], out: Path, package: str) -> float:
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    started = time.monotonic()
    subprocess.run(
        [
            str(VENV_BIN / "spark-submit"),
            "--master",
            master,
            "--py-files",
            package,
            "--driver-memory",
            "2g",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "--conf",
            "spark.executor.memory=1g",
            "--conf",
            "spark.cores.max=2",
            application_path("kafka_zk_audit.py"),
            "--base",
            artefacts["base"],
            "--cluster",
            "bench",
            "--snapshot",
            artefacts["snapshot"],
            "--inventory",
            artefacts["inventory"],
            "--out",
            str(out),
            "--now-ms",
            str(NOW_MS),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--skip-standalone", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        work = Path(tmp)
        artefacts = build_artefacts(work / "artefacts", args.partitions, args.brokers)
        package = build_package_zip(work / "package")

        started = time.monotonic()
        baseline = audit_job.run_audit(
            artefacts["base"],
            "bench",
            snapshot=artefacts["snapshot"],
            inventory=artefacts["inventory"],
            out=str(work / "in-process"),
            now_ms=NOW_MS,
        )
        in_process_s = time.monotonic() - started
        expected = [f.to_row() for f in audit_job.read_findings(baseline["out"])]
        results = [("in-process (baseline)", in_process_s, baseline["duration_s"])]

        runs = [("local[2]", "local[2]")]
        standalone = None
        if not args.skip_standalone:
            standalone = SparkStandaloneCluster(work / "spark", worker_memory="2g", worker_cores=2).start()
            runs.append(("standalone (1 worker, 2 cores)", standalone.master_url))
        try:
            for label, master in runs:
                out = work / label.split()[0].replace("[", "").replace("]", "")
                wall = spark_submit(master, artefacts, out, package)
                summary = json.loads((out / "summary.json").read_text())
                if [f.to_row() for f in audit_job.read_findings(str(out))] != expected:
                    raise SystemExit(f"{label}: findings differ from the in-process run")
                results.append((label, wall, summary["duration_s"]))
        finally:
            if standalone is not None:
                standalone.stop()

    print(f"\nfindings: {baseline['findings']} ({baseline['by_severity']}); identical on every engine")
    print(f"{'engine':34s} {'wall s':>8s} {'audit s':>8s} {'vs baseline':>12s}")
    for label, wall, audit_s in results:
        print(f"{label:34s} {wall:8.1f} {audit_s:8.1f} {wall / in_process_s:11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
