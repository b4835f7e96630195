"""The drain execute step's agreement check: how it reads the safety snapshot (issue 17).

Before its first write, the execute step compares the plan's own read of ZooKeeper with the run's
safety snapshot at topic level (cluster id, every topic znode's czxid and version, the in-flight
markers: ``kafka.drain_execution.read_record``). This builds a snapshot artefact of
``--topics`` x ``--partitions`` (RF=3 over 50 brokers: a topic znode, its ``partitions`` container,
and per partition a container and a state znode) and, each in a fresh process, reads it:

* product: ``artefacts.snapshots.read_snapshot_without_partitions`` (the ``partitions`` subtrees
  filtered out on the Arrow column) and the model of what is left (``partial_read``);
* baseline: ``read_snapshot`` (a row per znode) and the model of the whole tree, as the step did.

Both must give the same ``read_record`` (but ``last_zxid``, the newest row read). Prints time and peak RSS of each and the ratios.

    python benchmarks/agreement_check_benchmark.py [--topics 2000 --partitions 100]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime

BROKERS = 50


def build(base: str, topics: int, partitions: int) -> str:
    """A complete snapshot artefact under ``base``; returns its path."""
    from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import SnapshotWalk

    zxid = 100

    def stat(data: bytes | None = None, children: int = 0) -> tuple[int, ...]:
        nonlocal zxid
        zxid += 1
        # wire order: czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, length, children, pzxid
        return (
            zxid,
            zxid,
            1_700_000_000_000,
            1_700_000_000_000,
            0,
            0,
            0,
            0,
            len(data or b""),
            children,
            zxid,
        )

    cluster_id = b'{"version":"1","id":"Aq3vV0uFT7-3LgbUgPnNqg"}'
    table: dict[str, tuple[bytes | None, tuple[int, ...]]] = {
        "/cluster/id": (cluster_id, stat(cluster_id)),
        "/brokers/ids": (None, stat(children=0)),
    }
    for t in range(topics):
        name = f"topic-{t:05d}"
        assignment = {str(p): [(t + p + i) % BROKERS for i in range(3)] for p in range(partitions)}
        data = json.dumps(
            {"version": 3, "topic_id": "Aq3vV0uFT7-3LgbUgPnNqg", "partitions": assignment}
        ).encode()
        table[f"/brokers/topics/{name}"] = (data, stat(data, 1))
        table[f"/brokers/topics/{name}/partitions"] = (None, stat(children=partitions))
        for p in range(partitions):
            table[f"/brokers/topics/{name}/partitions/{p}"] = (None, stat(children=1))
            state = json.dumps(
                {
                    "controller_epoch": 1,
                    "leader": assignment[str(p)][0],
                    "version": 1,
                    "leader_epoch": 0,
                    "isr": assignment[str(p)],
                }
            ).encode()
            table[f"/brokers/topics/{name}/partitions/{p}/state"] = (state, stat(state))
    walk = SnapshotWalk(
        table=table,
        chroot="/bench",
        include=("/",),
        exclude=("/zookeeper",),
        start_zxid=zxid,
        end_zxid=zxid,
        consistent=True,
        consistent_zxid=zxid,
        max_zxid_seen=zxid,
        gone=(),
        reread=(),
        missing_roots=(),
        method="multi-read",
        requests=1,
        reconnects=0,
        session_expiries=0,
        started_at=datetime.now(UTC),
        duration_s=0.0,
        data_bytes=0,
    )
    ref, _ = write_snapshot(base, "bench", walk)
    return ref.path


def worker(path: str, mode: str) -> None:
    """One read in this fresh process; prints a JSON line (seconds, peak RSS, the record)."""
    from airflow_provider_kafka_zk.kafka.drain_execution import read_record
    from airflow_provider_kafka_zk.kafka.model import ClusterState

    if mode == "product":
        from airflow_provider_kafka_zk.artefacts.snapshots import read_snapshot_without_partitions

        start = time.perf_counter()
        _, rows = read_snapshot_without_partitions(path)
        state = ClusterState.from_snapshot(rows, partial_read=True)
    else:
        from airflow_provider_kafka_zk.artefacts.snapshots import read_snapshot

        start = time.perf_counter()
        _, rows = read_snapshot(path)
        state = ClusterState.from_snapshot(rows)
    record = read_record(state, frozenset({0}))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "rows": len(rows), "record": record}))


def run(path: str, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", mode, path], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[1], args.worker[0])
        return
    with tempfile.TemporaryDirectory(prefix="agreement-bench-") as base:
        path = build(base, args.topics, args.partitions)
        product, baseline = run(path, "product"), run(path, "baseline")
        # last_zxid is the newest row read (informational; read_disagreements never compares it):
        # without the partitions subtrees it is the newest topic-level znode's
        differ = sorted(k for k in baseline["record"] if product["record"].get(k) != baseline["record"][k])
        assert differ in ([], ["last_zxid"]), f"the two reads disagree on {differ}"
        znodes = baseline["rows"]
        print(f"safety snapshot of {znodes:,} znodes ({args.topics} topics x {args.partitions} partitions)")
        for label, r in (("product (topic level)", product), ("baseline (every row)", baseline)):
            print(f"  {label:22} {r['seconds']:6.2f} s  peak RSS {r['peak_mb']:5.0f} MB  rows {r['rows']:,}")
        print(
            f"  ratio: {baseline['seconds'] / product['seconds']:.1f}x faster, "
            f"{baseline['peak_mb'] / product['peak_mb']:.1f}x less peak memory; same read_record"
        )


if __name__ == "__main__":
    main()
