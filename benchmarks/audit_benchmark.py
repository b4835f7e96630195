"""Cluster audit at scale (issue 27): in-process vs Spark ``local[2]`` vs a Spark standalone cluster
of two workers, over a sweep of cluster sizes, whole processes, on the same artefacts.

    python benchmarks/audit_benchmark.py                                   # 50k..333k partitions
    python benchmarks/audit_benchmark.py --partitions 333334 --repeat 2    # 1M replicas only
    python benchmarks/audit_benchmark.py --skip-spark                      # in-process sweep only

The cluster is simulated (RF=3, topics of 100, one broker stopped so the health rules have work),
its snapshot rows come from ``testing/simulator/rows`` and its inventory from the simulator's
replica directories written as inventory Parquet: no ZooKeeper or SSH. Every run is a fresh
process: the in-process audit (``spark_jobs.audit.run_audit``, what the audit task runs for small
clusters) and whole ``spark-submit`` runs (JVM start included) on ``local[2]`` and on a standalone
cluster (``testing.spark_standalone``: master + 2 workers of 1 core each on loopback, started once,
stopped by PID). Engines alternate run by run; the 1-minute load average is printed with every
run. "audit" is the job's own load + rules + publish time from its summary. Findings of every
run must be identical (the run stops otherwise). Printed: per size the best wall time and the
spread of each engine, the in-process time per million replicas at each size and the least-squares
slope (linear: a flat per-million column), and the size from which Spark beats in-process on this
machine -- or that it never does at the sizes run, with the fitted lines' crossing if they have
one. Target: 1M replicas in process <= 20 s. No assertion on time: numbers only.
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


def in_process(artefacts: dict[str, str], out: Path) -> tuple[float, float]:
    """(whole process s, the audit's own s): the in-process engine in a fresh interpreter."""
    code = (
        "import json, sys; from airflow_provider_kafka_zk.spark_jobs import audit as a; "
        "s = a.run_audit(sys.argv[1], 'bench', snapshot=sys.argv[2], inventory=sys.argv[3], out=sys.argv[4], "
        f"now_ms={NOW_MS}); print(json.dumps({{'duration_s': s['duration_s']}}))"
    )
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            artefacts["base"],
            artefacts["snapshot"],
            artefacts["inventory"],
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    return wall, json.loads(done.stdout.strip().splitlines()[-1])["duration_s"]


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def _spread(values: list[float]) -> str:
    return f"{min(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="50000,100000,200000,333334", help="comma-separated sizes")
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each engine per size")
    parser.add_argument("--skip-spark", action="store_true", help="the in-process sweep only")
    parser.add_argument("--skip-standalone", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(v) for v in args.partitions.split(",") if v]

    engines = ["in-process"] + ([] if args.skip_spark else ["local[2]"])
    if not args.skip_spark and not args.skip_standalone:
        engines.append("standalone")
    table: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        work = Path(tmp)
        package = build_package_zip(work / "package")
        standalone = None
        if "standalone" in engines:
            standalone = SparkStandaloneCluster(
                work / "spark", worker_memory="2g", worker_cores=1, workers=2
            ).start()
            print(
                f"standalone: {standalone.master_url}, 2 workers x 1 core (pids {standalone.pids})",
                flush=True,
            )
        try:
            for partitions in sizes:
                artefacts = build_artefacts(work / f"artefacts-{partitions}", partitions, args.brokers)
                runs: dict[str, list[tuple[float, float, float]]] = {e: [] for e in engines}
                expected = None
                for n in range(args.repeat):
                    for engine in engines:
                        out = work / f"out-{partitions}-{engine.replace('[2]', '')}-{n}"
                        load = os.getloadavg()[0]
                        if engine == "in-process":
                            wall, own = in_process(artefacts, out)
                        else:
                            master = "local[2]" if engine == "local[2]" else standalone.master_url  # type: ignore[union-attr]
                            wall = spark_submit(master, artefacts, out, package)
                            own = json.loads((out / "summary.json").read_text())["duration_s"]
                        rows = [f.to_row() for f in audit_job.read_findings(str(out))]
                        if expected is None:
                            expected = rows
                        elif rows != expected:
                            raise SystemExit(
                                f"{engine} at {partitions:,}: findings differ from the first run"
                            )
                        runs[engine].append((wall, own, load))
                        print(
                            f"  {partitions:>9,} partitions {engine:<11} wall {wall:7.1f} s, audit {own:7.1f} s, "
                            f"load {load:.1f}",
                            flush=True,
                        )
                table.append(
                    {
                        "partitions": partitions,
                        "replicas": partitions * 3,
                        "runs": runs,
                        "findings": len(expected or []),
                    }
                )
        finally:
            if standalone is not None:
                standalone.stop()

    print()
    header = (
        "| partitions | replicas | findings | "
        + " | ".join(f"{e} wall s" for e in engines)
        + " | in-process audit s | in-process s per 1M replicas | 1-min load at the runs |"
    )
    print(header)
    print("|" + "---:|" * (header.count("|") - 2) + "---|")
    for row in table:
        runs = row["runs"]
        cells = [_spread([w for w, _, _ in runs[e]]) for e in engines]
        own = min(o for _, o, _ in runs["in-process"])
        loads = ", ".join(f"{load:.1f}" for e in engines for _, _, load in runs[e])
        print(
            f"| {row['partitions']:,} | {row['replicas']:,} | {row['findings']:,} | "
            + " | ".join(cells)
            + f" | {own:.1f} | {own / row['replicas'] * 1e6:.1f} | {loads} |"
        )
    xs = [float(r["replicas"]) for r in table]
    if len(xs) > 1:
        fits = {}
        for e in engines:
            fits[e] = _fit(xs, [min(w for w, _, _ in r["runs"][e]) for r in table])
        a, b = _fit(xs, [min(o for _, o, _ in r["runs"]["in-process"]) for r in table])
        print(
            f"\nin-process audit, least squares over the sizes: {a:.2f} s + {b * 1e6:.2f} s per 1M replicas "
            f"(whole process: {fits['in-process'][0]:.2f} s + {fits['in-process'][1] * 1e6:.2f} s per 1M)"
        )
        for e in engines[1:]:
            ae, be = fits[e]
            ai, bi = fits["in-process"]
            beats = [
                r["partitions"]
                for r in table
                if min(w for w, _, _ in r["runs"][e]) < min(w for w, _, _ in r["runs"]["in-process"])
            ]
            crossing = (ae - ai) / (bi - be) if bi > be else None
            print(
                f"{e}: {ae:.1f} s + {be * 1e6:.2f} s per 1M replicas; beats in-process "
                + (f"from {beats[0]:,} partitions" if beats else "at none of these sizes")
                + (
                    f"; the fitted lines cross at {crossing / 1e6:.1f}M replicas"
                    if crossing and crossing > 0
                    else "; the fitted lines do not cross (Spark's per-replica cost is not lower here)"
                )
            )
    target = [r for r in table if r["replicas"] >= 1_000_000]
    if target:
        best = min(o for _, o, _ in target[0]["runs"]["in-process"])
        wall = min(w for w, _, _ in target[0]["runs"]["in-process"])
        print(
            f"1M replicas in process: audit {best:.1f} s, whole process {wall:.1f} s (target <= 20 s: "
            f"{'met' if wall <= 20 else 'NOT met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
