"""Drain planner at scale (issue 6): a 50-broker, 200,000-partition cluster, one broker holding 4,000
RF=1 partitions is drained. Prints planning time (target < 1 s) and balance (max/min bytes added
across destinations, target <= 1.10). Sizes are log-normal, like real topics (a few huge, many small).

    python benchmarks/drain_plan_benchmark.py [--brokers 50] [--partitions 200000] [--rf1-on-broker 4000]
"""

from __future__ import annotations

import argparse
import random
import time

from airflow_provider_kafka_zk.kafka.drain import BrokerInfo, DrainRequest, plan_drain


def build(brokers: int, partitions: int, rf1_on_drained: int, seed: int = 1):
    rng = random.Random(seed)
    info = {b: BrokerInfo(b, rack=f"r{b % 3}") for b in range(brokers)}
    assignment, sizes = {}, {}
    drained = 0
    for i in range(partitions):
        tp = (f"topic-{i // 100:05d}", i % 100)
        if i < rf1_on_drained:
            replicas = (drained,)
        elif i % 10 == 0:
            replicas = (1 + rng.randrange(brokers - 1),)  # RF=1 elsewhere: not in scope
        else:
            first = rng.randrange(brokers)
            replicas = (first, (first + 1) % brokers, (first + 2) % brokers)
        assignment[tp] = replicas
        sizes[tp] = int(rng.lognormvariate(18, 1.5))  # median ~65 MB, long tail
    return assignment, info, sizes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--rf1-on-broker", type=int, default=4_000)
    args = parser.parse_args()
    assignment, brokers, sizes = build(args.brokers, args.partitions, args.rf1_on_broker)
    request = DrainRequest(brokers=frozenset({0}), scope="rf1", max_partitions_per_batch=500)
    started = time.perf_counter()
    plan = plan_drain(assignment, brokers, request, sizes=sizes)
    elapsed = time.perf_counter() - started
    moved = len(plan.moves)
    print(
        f"cluster: {args.brokers} brokers, {len(assignment)} partitions; draining broker 0 ({moved} RF=1 moves)"
    )
    print(f"planning time: {elapsed:.3f} s (target < 1 s)")
    print(
        f"balance: max/min bytes added across {len([b for b in plan.added_partitions.values() if b])} "
        f"destinations = {plan.balance_ratio:.4f} (target <= 1.10)"
    )
    counts = [c for c in plan.added_partitions.values() if c]
    print(
        f"partitions added per destination: min {min(counts)} max {max(counts)}; batches: {len(plan.batches)}"
    )


if __name__ == "__main__":
    main()
