"""ClusterState build time (issue 17): the per-row reference build vs the bulk build, same rows, same run.

Generates snapshot rows the way the snapshot benchmark builds its ZooKeeper tree (the simulator:
``--brokers`` brokers on 3 racks, topics of ``--per-topic`` partitions, RF 3), then times
``_from_snapshot_reference`` (one ``decode_znode`` per row: the build before issue 17) and
``ClusterState.from_snapshot`` on the same list, alternating, best of ``--repeat``, checks both
models are equal, and prints both times, the ratio and the RSS growth of each build (the model
plus what the allocator kept). The rows go through Parquet first, as ``read_snapshot`` gives them.

The simulator writes the same state bytes for many partitions (``leader_epoch`` 0 everywhere),
which the bulk build decodes once each; ``--distinct-states`` rewrites every partition state with
its own epochs, so every state znode is distinct (the bulk build's worst case).

    python benchmarks/model_benchmark.py [--sizes 50000,100000,200000] [--brokers 50] [--distinct-states]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import os
import random
import time

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.model import ClusterState, _from_snapshot_reference
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def build_rows(partitions: int, brokers: int, per_topic: int, distinct_states: bool) -> list[ZnodeRow]:
    from airflow_provider_kafka_zk.testing.simulator import (
        BrokerSpec,
        ClusterSpec,
        SimulatedCluster,
        TopicSpec,
    )
    from airflow_provider_kafka_zk.testing.simulator.rows import cluster_rows

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
    rows = cluster_rows(SimulatedCluster(spec))
    if distinct_states:
        rng = random.Random(partitions)
        for index, row in enumerate(rows):
            if zk.PartitionState.PATH_PATTERN.fullmatch(row.path):
                state = zk.PartitionState.decode(row.data, row.path)
                state = dataclasses.replace(
                    state, leader_epoch=rng.randrange(1 << 20), controller_epoch=rng.randrange(1, 1 << 10)
                )
                rows[index] = dataclasses.replace(row, data=state.encode())
    return through_parquet(rows)


def through_parquet(rows: list[ZnodeRow]) -> list[ZnodeRow]:
    """The rows as ``read_snapshot`` hands them to the model: written to Parquet, read back."""
    import pyarrow.parquet as pq

    from airflow_provider_kafka_zk.artefacts.snapshots import rows_table
    from airflow_provider_kafka_zk.kafka.snapshot import ZNODE_ROW_FIELDS

    sink = io.BytesIO()
    pq.write_table(rows_table(rows), sink, compression="zstd")
    del rows
    table = pq.read_table(io.BytesIO(sink.getvalue()))
    columns = [table.column(name).to_pylist() for name in ZNODE_ROW_FIELDS]
    return [ZnodeRow(*values) for values in zip(*columns, strict=True)]


def timed(build, rows: list[ZnodeRow]) -> tuple[float, float, ClusterState]:
    """(seconds, MB of RSS the model keeps, model); garbage of earlier runs collected first."""
    gc.collect()
    before = _rss_mb()
    started = time.perf_counter()
    state = build(rows)
    return time.perf_counter() - started, _rss_mb() - before, state


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="50000,100000,200000", help="partition counts, comma-separated")
    parser.add_argument("--brokers", type=int, default=50)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each build (the best is compared)")
    parser.add_argument("--distinct-states", action="store_true", help="every partition state znode distinct")
    args = parser.parse_args()

    print(
        f"{'partitions':>10} {'znodes':>8} {'distinct':>8} {'reference s':>11} {'bulk s':>7} "
        f"{'ratio':>6} {'ref MB':>7} {'bulk MB':>7}"
    )
    for partitions in (int(s) for s in args.sizes.split(",")):
        rows = build_rows(partitions, args.brokers, args.per_topic, args.distinct_states)
        distinct = len({r.data for r in rows if zk.PartitionState.PATH_PATTERN.fullmatch(r.path)})
        best = {"reference": (float("inf"), 0.0), "bulk": (float("inf"), 0.0)}
        for run in range(args.repeat):  # alternate, so both see the same machine load
            for name, build in (
                ("reference", _from_snapshot_reference),
                ("bulk", ClusterState.from_snapshot),
            ):
                seconds, kept_mb, model = timed(build, rows)
                best[name] = min(best[name], (seconds, kept_mb))
                if run == 0 and name == "reference":
                    reference = model
                elif run == 0:
                    assert model == reference, "the bulk build differs from the reference"
                    del reference
                del model
        (ref_s, ref_mb), (bulk_s, bulk_mb) = best["reference"], best["bulk"]
        print(
            f"{partitions:>10,} {len(rows):>8,} {distinct:>8,} {ref_s:>11.2f} {bulk_s:>7.2f} "
            f"{ref_s / bulk_s:>5.1f}x {ref_mb:>7.0f} {bulk_mb:>7.0f}",
            flush=True,
        )
        del rows


if __name__ == "__main__":
    main()
