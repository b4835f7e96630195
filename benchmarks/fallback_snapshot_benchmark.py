"""Snapshot walk on ZooKeeper without multiRead (3.4/3.5, issue 27) vs kazoo's async API.

Builds a simulated Kafka tree (default 100,000 partitions in topics of 100: 203,035 znodes) in a
real, throw-away ZooKeeper 3.8 and puts :mod:`airflow_provider_kafka_zk.testing.zk_proxy` in front
of it, in a process of its own: the proxy answers multiRead (and the other 3.6 opcodes) as 3.4.14 /
3.5.10 do, so a client sees an old server. Then, each run in a fresh process, tools alternating
run by run (both see the same machine load), through the proxy:

* kazoo async (the anchor): ``get_async`` per znode and ``get_children_async`` per znode with
  children (``numChildren`` > 0 in its Stat: leaves are not listed), ``--kazoo-window`` requests
  in flight, rows (path, data, Stat) collected and sorted by path at the end;
* product: ``ZnodeTreeWalker`` with its defaults, as ``KafkaZooKeeperHook.snapshot`` runs it:
  it tries multiRead first, takes the refusal (the proxy closes the connection as 3.5 does), and
  walks on with pipelined reads on sessions of its own (``--connections``; default the walker's,
  ``PIPELINED_SESSIONS``), rows spilled to the walk's Arrow file, as for a snapshot;
* reference (``--also-multiread``): the product straight to the server (multiRead).

Each worker prints the walk's seconds (client started before, stopped after: the walk alone) and
its process's time from launch (interpreter start, imports, session, walk, session closed) to the
rows in hand: kazoo's sorted in memory, the product's in its spill file, the form the snapshot
writes from. After that clock stops it reads the rows back and hashes every one -- path, data and
all 11 Stat fields -- so the table shows the two tools read the same tree (``same rows``); that
check, and the interpreter's exit, are on no tool's clock. Also printed: each worker's CPU seconds
(imports included) and what the ZooKeeper server's JVM and the proxy spent in the same run (all
share the machine's cores: once the client is fast, the server is what the walk waits for).
Printed: per tool the best walk, the spread (min-max) over ``--repeat`` runs, the 1-minute load average at each run,
and the ratio kazoo async / product (target >= 5x at 203k znodes). No assertions: numbers only.

The server's JVM: ``--server-jvm production`` (default: the JVM's own JIT and GC, 2 GB heap, as a
production ensemble runs) or ``test`` (the test fixtures' C1-only, serial-GC flags, which start fast
and serve slower).

    python benchmarks/fallback_snapshot_benchmark.py --repeat 3
    python benchmarks/fallback_snapshot_benchmark.py --partitions 200000 --repeat 2 --also-multiread
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections import deque

PRODUCTION_JVM = ("-Xms512m", "-Xmx2g", "-XX:-UsePerfData", "-XX:+ExitOnOutOfMemoryError")


def _digest(rows) -> str:
    """sha256 over every (path, data, 11 Stat fields in wire order) row, sorted by path."""
    h = hashlib.sha256()
    for path, data, stat in rows:
        h.update(path.encode())
        h.update(b"\0" if data is None else b"\1" + len(data).to_bytes(4, "big") + data)
        h.update(repr(tuple(stat)).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------ workers
def kazoo_async_walk(client, window: int) -> list[tuple]:
    """The anchor: kazoo's async API with a bounded window, listing only znodes with children."""
    rows: list[tuple] = []
    todo: deque[tuple[bool, str]] = deque([(True, "/")])
    in_flight: deque[tuple[bool, str, object]] = deque()
    while todo or in_flight:
        while todo and len(in_flight) < window:
            is_data, path = todo.popleft()
            result = client.get_async(path) if is_data else client.get_children_async(path)
            in_flight.append((is_data, path, result))
        is_data, path, result = in_flight.popleft()
        if is_data:
            data, stat = result.get()
            rows.append((path, data, tuple(stat)))
            if stat.numChildren:
                todo.append((False, path))
        else:
            prefix = "/" if path == "/" else path + "/"
            todo.extend((True, prefix + child) for child in result.get())
    rows.sort(key=lambda row: row[0])
    return rows


def worker(kind: str, hosts: str, chroot: str, window: int, connections: int) -> None:
    launched = float(os.environ.get("BENCH_LAUNCHED", "0"))
    from kazoo.client import KazooClient

    if kind != "kazoo":
        import airflow_provider_kafka_zk.artefacts.snapshots  # noqa: F401 - as in the operator
        from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import ZnodeTreeWalker
    client = KazooClient(hosts=hosts + chroot, timeout=30)
    client.start(timeout=30)
    try:
        started = time.perf_counter()
        if kind == "kazoo":
            rows = kazoo_async_walk(client, window)
            seconds = time.perf_counter() - started
            method, requests = "kazoo async", None
        else:
            walk = ZnodeTreeWalker(client, connections=connections).run()
            seconds = time.perf_counter() - started
            method, requests = walk.method, walk.requests
    finally:
        client.stop()
        client.close()
    # the tool's result in hand: kazoo's sorted rows in memory, the product's in its spill file
    process_s = time.perf_counter() - launched if launched else None
    cpu_s = time.process_time()  # this process's CPU (imports included) up to the rows in hand
    if kind != "kazoo":  # read back for the check only, off the clock
        rows = [(p, data, stat) for p, (data, stat) in walk.table.items()]
        walk.close()
    digest = _digest(rows)
    print(
        json.dumps(
            {
                "kind": kind,
                "znodes": len(rows),
                "seconds": seconds,
                "method": method,
                "requests": requests,
                "digest": digest,
                "process_s": process_s,
                "cpu_s": cpu_s,
            }
        ),
        flush=True,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    import psutil  # the parent's only: no worker pays for the import

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def run_worker(kind: str, hosts: str, chroot: str, args: argparse.Namespace, servers: dict[str, int]) -> dict:
    """One walk in a fresh process; also the CPU the server side (``servers``: name -> pid) spent."""
    cmd = [sys.executable, __file__, "--worker", kind, "--hosts", hosts, "--chroot", chroot]
    cmd += ["--kazoo-window", str(args.kazoo_window), "--connections", str(args.connections)]
    load = os.getloadavg()[0]
    before = {name: cpu_seconds(pid) for name, pid in servers.items()}
    launched = time.perf_counter()
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "BENCH_LAUNCHED": repr(launched)}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{done.stderr[-3000:]}")
    [result] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result["load"] = load
    result.update({f"{name}_cpu_s": cpu_seconds(pid) - before[name] for name, pid in servers.items()})
    return result


# ------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool, alternating")
    parser.add_argument("--kazoo-window", type=int, default=1000, help="kazoo async: requests in flight")
    parser.add_argument(
        "--connections", type=int, default=None, help="product: sessions of its own (default: the walker's)"
    )
    parser.add_argument("--server-jvm", choices=["production", "test"], default="production")
    parser.add_argument("--also-multiread", action="store_true", help="the product straight to the server")
    parser.add_argument("--worker", choices=["kazoo", "product", "multiread"], help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--chroot", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.hosts, args.chroot, args.kazoo_window, args.connections)
        return
    if args.connections is None:  # the walker's default, passed on to each worker as a number
        from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import PIPELINED_SESSIONS

        args.connections = PIPELINED_SESSIONS

    from snapshot_benchmark import build_tree  # benchmarks/ is sys.path[0] for a script

    from airflow_provider_kafka_zk.testing.zookeeper import DEFAULT_JVM_FLAGS, ZooKeeperServer

    flags = PRODUCTION_JVM if args.server_jvm == "production" else DEFAULT_JVM_FLAGS
    chroot = "/bench"
    runs: dict[str, list[dict]] = {"kazoo": [], "product": [], "multiread": []}
    with (
        ZooKeeperServer(jvm_flags=flags) as zk,
        build_tree(zk.connect_string, chroot, args.partitions, args.per_topic, args.brokers),
    ):
        proxy = subprocess.Popen(
            [sys.executable, "-m", "airflow_provider_kafka_zk.testing.zk_proxy", zk.connect_string],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stdout is not None
            old_server = proxy.stdout.readline().strip()
            print(
                f"server: ZooKeeper 3.8 ({args.server_jvm} JVM) behind a 3.4/3.5 proxy (its own process, "
                f"pid {proxy.pid}); {os.cpu_count()} CPUs; runs alternate tool by tool",
                flush=True,
            )
            for n in range(args.repeat):
                for kind in ("kazoo", "product", "multiread"):
                    if kind == "multiread" and not args.also_multiread:
                        continue
                    hosts = zk.connect_string if kind == "multiread" else old_server
                    servers = (
                        {"server": zk.pid} if kind == "multiread" else {"server": zk.pid, "proxy": proxy.pid}
                    )
                    result = run_worker(kind, hosts, chroot, args, servers)
                    runs[kind].append(result)
                    print(
                        f"  run {n + 1} {kind:<9} walk {result['seconds']:7.2f} s, process "
                        f"{result['process_s']:6.2f} s, {result['znodes']:,} znodes, {result['method']}, "
                        f"load {result['load']:.2f}; CPU s: client {result['cpu_s']:.2f}, server "
                        f"{result['server_cpu_s']:.2f}, proxy {result.get('proxy_cpu_s', 0):.2f}",
                        flush=True,
                    )
        finally:
            if proxy.stdin:
                proxy.stdin.close()
            proxy.wait(timeout=30)
    report(runs, args)


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(runs: dict[str, list[dict]], args: argparse.Namespace) -> None:
    digests = {r["digest"] for kind in runs for r in runs[kind]}
    counts = {r["znodes"] for kind in runs for r in runs[kind]}
    print()
    print(
        "| tool | znodes | walk s, best (min-max) | process s, best (min-max) | client CPU s, best | "
        "server (+ proxy) CPU s in that run | 1-min load at the runs |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    labels = {
        "kazoo": f"kazoo async (window {args.kazoo_window}), through the 3.5 proxy",
        "product": (
            f"product (multiRead refused -> pipelined, {args.connections} own sessions), through the proxy"
        ),
        "multiread": "product, multiRead, straight to the server (reference)",
    }
    for kind, results in runs.items():
        if not results:
            continue
        loads = ", ".join(f"{r['load']:.1f}" for r in results)
        fastest = min(results, key=lambda r: r["seconds"])
        print(
            f"| {labels[kind]} | {results[0]['znodes']:,} | {_spread([r['seconds'] for r in results])} | "
            f"{_spread([r['process_s'] for r in results])} | {min(r['cpu_s'] for r in results):.2f} | "
            f"{fastest['server_cpu_s']:.2f} (+ {fastest.get('proxy_cpu_s', 0):.2f}) | {loads} |"
        )
    kazoo = min(r["seconds"] for r in runs["kazoo"])
    product = min(r["seconds"] for r in runs["product"])
    worst = max(r["seconds"] for r in runs["product"])
    best_kazoo_process = min(r["process_s"] for r in runs["kazoo"])
    best_product_process = min(r["process_s"] for r in runs["product"])
    print(
        f"\nratio kazoo async / product, walk: {kazoo / product:.1f}x (best vs best; "
        f"{kazoo / worst:.1f}x against the product's slowest run); whole processes: "
        f"{best_kazoo_process / best_product_process:.1f}x; target >= 5x"
    )
    print(
        f"same rows (path, data, all 11 Stat fields, sha256 over {counts.pop() if len(counts) == 1 else counts} "
        f"rows) in every run of every tool: {'yes' if len(digests) == 1 else 'NO: ' + str(digests)}"
    )
    methods = {r["method"] for r in runs["product"]}
    print(f"product walk method(s): {', '.join(sorted(methods))}")


if __name__ == "__main__":
    main()
