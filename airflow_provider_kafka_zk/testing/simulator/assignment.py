"""Kafka's own replica placement for new topics (AdminUtils.assignReplicasToBrokers), so simulated
clusters place replicas the way ``kafka-topics --create`` would: round-robin from a random start with
a shifting second replica, and rack-aware over a rack-alternated broker list when racks are known.
"""

from __future__ import annotations

import random


def assign_replicas(
    brokers: dict[int, str | None],
    partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    if replication_factor < 1 or replication_factor > len(brokers):
        raise ValueError(f"replication factor {replication_factor} needs 1..{len(brokers)} brokers")
    racks = {r for r in brokers.values()}
    if None not in racks and len(racks) > 1:
        return _rack_aware(brokers, partitions, replication_factor, rng, start_partition)
    return _rack_unaware(sorted(brokers), partitions, replication_factor, rng, start_partition)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_unaware(
    broker_list: list[int], partitions: int, rf: int, rng: random.Random, start_partition: int
) -> dict[int, tuple[int, ...]]:
    n = len(broker_list)
    start_index = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    for current in range(start_partition, start_partition + partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        replicas = [broker_list[first]]
        replicas += [broker_list[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out[current] = tuple(replicas)
    return out


def _rack_alternated(brokers: dict[int, str | None]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(brokers.items()):
        by_rack.setdefault(str(rack), []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        queue = queues[i % len(queues)]
        position = i // len(queues)
        if position < len(queue):
            out.append(queue[position])
        i += 1
    return out


def _rack_aware(
    brokers: dict[int, str | None], partitions: int, rf: int, rng: random.Random, start_partition: int
) -> dict[int, tuple[int, ...]]:
    arranged = _rack_alternated(brokers)
    n = len(arranged)
    num_racks = len(set(brokers.values()))
    start_index = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    for current in range(start_partition, start_partition + partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {brokers[leader]}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = brokers[broker]
                rack_ok = rack not in racks_used or len(racks_used) == num_racks
                broker_ok = broker not in replicas or len(replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        out[current] = tuple(replicas)
    return out
