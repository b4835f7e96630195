"""ZooKeeper snapshot walk (issues 3, 17, 27): the snapshot vs kazoo's async API, same
tree, same run; and the snapshot's peak memory as the tree grows.

Builds a Kafka tree with the simulator (default 113,000 partitions in topics of 100 = ~230k znodes;
``--partitions 200000`` gives ~406k) in a real, throw-away ZooKeeper, loaded with thousand-op
transactions, then runs, each in a fresh Python process (so the peak RSS is the walk's own):

* baseline: kazoo's async API (``get_async`` per znode, ``get_children_async`` per znode with
  children, 1,000 requests in flight: ``fallback_snapshot_benchmark.kazoo_async_walk``), the
  anchor of every snapshot ratio (the plain sequential walk the README once used is slower still
  and flattered the ratio);
* reference: the walker's pipelined mode (``get_async``/``get_children_async``, what ZooKeeper
  servers without multiRead get);
* snapshot: the walker as ``KafkaZooKeeperHook.snapshot`` runs it (multiRead), then the Parquet +
  manifest artefact written to a temporary directory.

Prints znodes/s, the ratio to the baseline and peak RSS (VmHWM of the worker process: the walk
and the artefact write together). ``--partitions`` takes a comma-separated list: each size gets its
own ZooKeeper and tree, and a last table shows how the snapshot's peak RSS grows with the tree (the
walk streams rows to a spill file and the writer streams row groups, so it should stay nearly flat;
issue 17's target: <= 250 MB at ~400k znodes, where holding the tree in memory took 603 MB). No
assertions: numbers only.

    python benchmarks/snapshot_benchmark.py [--partitions 113000] [--skip-baseline] [--skip-pipelined]
    python benchmarks/snapshot_benchmark.py --partitions 50000,100000,200000 --skip-pipelined
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time


def peak_rss_mb() -> float:
    """Peak RSS of this process. VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork+exec,
    so a worker would report its parent's (the tree builder's) peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------ workers
def worker(kind: str, hosts: str, chroot: str, repeat: int) -> None:
    """One measurement in this (fresh) process; prints one JSON line per run."""
    from kazoo.client import KazooClient

    start_rss = peak_rss_mb()
    client = KazooClient(hosts=hosts + chroot, timeout=30)
    client.start()
    try:
        for _ in range(repeat):
            result: dict = {"kind": kind}
            if kind == "baseline":
                from fallback_snapshot_benchmark import kazoo_async_walk  # the one anchor

                started = time.perf_counter()
                znodes = len(kazoo_async_walk(client, 1000))
                result.update(znodes=znodes, seconds=time.perf_counter() - started)
            else:
                # imported before the clock starts, as in the operator's process
                import airflow_provider_kafka_zk.artefacts.snapshots  # noqa: F401
                from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import ZnodeTreeWalker

                method = "pipelined" if kind == "pipelined" else "multi-read"
                started = time.perf_counter()
                walk = ZnodeTreeWalker(client, method=method).run()
                result.update(
                    znodes=walk.znodes,
                    seconds=time.perf_counter() - started,
                    requests=walk.requests,
                    consistent=walk.consistent,
                    method=walk.method,
                    held=walk.rows_held_peak,
                    walk_rss_mb=peak_rss_mb(),
                )
                if kind == "snapshot":
                    from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot

                    with tempfile.TemporaryDirectory() as base:
                        written = time.perf_counter()
                        _, manifest = write_snapshot(base, "bench", walk, source={"hosts": [hosts]})
                        result.update(
                            write_seconds=time.perf_counter() - written,
                            parquet_bytes=manifest["files"]["znodes.parquet"]["bytes"],
                        )
                del walk
            result.update(rss_mb=peak_rss_mb(), start_rss_mb=start_rss)
            print(json.dumps(result), flush=True)
    finally:
        client.stop()
        client.close()


def _run_worker(kind: str, hosts: str, chroot: str, repeat: int = 1) -> list[dict]:
    """``repeat`` runs, each in its own process: VmHWM is then that run's peak, not the worst so far."""
    return [run for _ in range(repeat) for run in _run_worker_once(kind, hosts, chroot)]


def _run_worker_once(kind: str, hosts: str, chroot: str) -> list[dict]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            kind,
            "--hosts",
            hosts,
            "--chroot",
            chroot,
            "--repeat",
            "1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ------------------------------------------------------------------------------ tree
def build_tree(hosts: str, chroot: str, partitions: int, per_topic: int, brokers: int):
    from airflow_provider_kafka_zk.testing.simulator import (
        BrokerSpec,
        ClusterSpec,
        SimulatedCluster,
        TopicSpec,
    )
    from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
    from airflow_provider_kafka_zk.testing.zk_bulk import BulkLoadedTree

    spec = ClusterSpec(
        name="bench",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3}") for b in range(brokers)),
        topics=tuple(
            TopicSpec(
                f"topic-{t:05d}",
                partitions=min(per_topic, partitions - t * per_topic),
                replication_factor=3,
                records_per_partition=0,
            )
            for t in range((partitions + per_topic - 1) // per_topic)
        ),
    )
    records = render_zookeeper(SimulatedCluster(spec))
    started = time.perf_counter()
    tree = BulkLoadedTree(hosts, chroot, records)
    print(
        f"tree: {partitions:,} partitions in {len(spec.topics):,} topics, {brokers} brokers -> "
        f"{len(records) + 1:,} znodes under {chroot} (loaded in {time.perf_counter() - started:.1f} s)"
    )
    return tree


def _sizes(value: str) -> list[int]:
    sizes = [int(v.replace("_", "")) for v in value.split(",") if v.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("--partitions: one or more positive integers, comma-separated")
    return sizes


def measure(args: argparse.Namespace, partitions: int) -> tuple[dict[str, dict], list[dict]]:
    """Build one tree of ``partitions`` partitions in a fresh ZooKeeper and run the workers on it."""
    from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

    with ZooKeeperServer() as zk:
        chroot = "/bench"
        with build_tree(zk.connect_string, chroot, partitions, args.per_topic, args.brokers):
            results: dict[str, dict] = {}
            if not args.skip_baseline:
                [results["baseline"]] = _run_worker("baseline", zk.connect_string, chroot)
            if not args.skip_pipelined:
                [results["pipelined"]] = _run_worker("pipelined", zk.connect_string, chroot)
            runs = _run_worker("snapshot", zk.connect_string, chroot, args.repeat)
            results["snapshot"] = min(runs, key=lambda r: r["seconds"])
    return results, runs


def report(results: dict[str, dict], runs: list[dict]) -> None:
    def rate(r: dict) -> float:
        return r["znodes"] / r["seconds"]

    print(f"{'walk':<44} {'znodes':>9} {'seconds':>8} {'znodes/s':>10} {'peak RSS':>9}")
    labels = {
        "baseline": "baseline: kazoo async (window 1000)",
        "pipelined": "walker, pipelined get_async (no multiRead)",
        "snapshot": "snapshot: walker, multiRead",
    }
    for kind, r in results.items():
        print(
            f"{labels[kind]:<44} {r['znodes']:>9,} {r['seconds']:>8.2f} {rate(r):>10,.0f} {r['rss_mb']:>6.0f} MB"
        )
    snap = results["snapshot"]
    times = ", ".join(f"{r['seconds']:.2f}s" for r in runs)
    print(
        f"snapshot runs: {times}; {snap['requests']} multiRead requests; consistent={snap['consistent']}; "
        f"at most {snap['held']:,} rows held in Python; "
        f"artefact write {snap['write_seconds']:.2f} s, Parquet {snap['parquet_bytes'] / 1e6:.1f} MB; "
        f"peak RSS: {snap['start_rss_mb']:.0f} MB before the walk, {snap['walk_rss_mb']:.0f} MB after it, "
        f"{snap['rss_mb']:.0f} MB after writing the artefact"
    )
    if "baseline" in results:
        print(f"ratio snapshot / kazoo async: {rate(snap) / rate(results['baseline']):.1f}x")
    if "pipelined" in results:
        print(
            f"ratio pipelined / baseline: {rate(results['pipelined']) / rate(results.get('baseline', snap)):.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--partitions",
        type=_sizes,
        default=[113_000],
        help="tree size(s): one number or a comma-separated list (one tree and ZooKeeper each)",
    )
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="snapshot runs (the best is compared)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--skip-pipelined", action="store_true")
    parser.add_argument("--worker", choices=["baseline", "pipelined", "snapshot"], help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--chroot", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.hosts, args.chroot, args.repeat)
        return

    curve: list[dict] = []
    for partitions in args.partitions:
        results, runs = measure(args, partitions)
        report(results, runs)
        baseline = results.get("baseline")
        curve.append(
            {
                "partitions": partitions,
                "znodes": results["snapshot"]["znodes"],
                "walk_s": min(r["seconds"] for r in runs),
                "total_s": min(r["seconds"] + r["write_seconds"] for r in runs),
                "walk_rss_mb": max(r["walk_rss_mb"] for r in runs),
                "rss_mb": max(r["rss_mb"] for r in runs),
                "baseline_s": baseline["seconds"] if baseline else None,
                "baseline_rss_mb": baseline["rss_mb"] if baseline else None,
            }
        )
        print(flush=True)
    if len(curve) > 1:
        print(
            "snapshot by tree size (best walk and walk + write times, worst peak RSS of the runs; "
            "baseline: kazoo async, ratio: its seconds / the snapshot walk's)"
        )
        print(
            f"{'partitions':>10} {'znodes':>9} {'walk s':>7} {'+write s':>8} {'walk RSS':>9} "
            f"{'peak RSS':>9} {'MB/100k more':>12} {'baseline s':>10} {'base RSS':>9} {'ratio':>6}"
        )
        first = curve[0]
        for row in curve:
            growth = ""
            if row is not first:
                extra = (row["rss_mb"] - first["rss_mb"]) / max(row["znodes"] - first["znodes"], 1)
                growth = f"{extra * 100_000:+.1f}"
            base = "-" if row["baseline_s"] is None else f"{row['baseline_s']:.1f}"
            base_rss = "-" if row["baseline_rss_mb"] is None else f"{row['baseline_rss_mb']:.0f} MB"
            ratio = "-" if row["baseline_s"] is None else f"{row['baseline_s'] / row['walk_s']:.0f}x"
            print(
                f"{row['partitions']:>10,} {row['znodes']:>9,} {row['walk_s']:>7.2f} {row['total_s']:>8.2f} "
                f"{row['walk_rss_mb']:>6.0f} MB {row['rss_mb']:>6.0f} MB {growth:>12} {base:>10} "
                f"{base_rss:>9} {ratio:>6}"
            )


if __name__ == "__main__":
    main()
