"""Ready-made clusters: a healthy one, and one carrying every production incident the product exists for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.safety import LeaseHolder
from airflow_provider_kafka_zk.kafka.versions import writes_partition_metadata_on_create

from .cluster import Incident, SimulatedCluster
from .spec import BrokerSpec, ClusterSpec, TopicSpec

DAY_MS = 86_400_000

CONSUMER_OFFSETS = TopicSpec(
    "__consumer_offsets",
    partitions=10,
    replication_factor=3,
    records_per_partition=20,
    config={"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"},
)
"""The group coordinator's topic, with the configs a real broker gives it (golden 3.3.1 dump)."""


def _brokers(count: int, racks: int, first_address: int = 2, log_dirs: int = 1) -> tuple[BrokerSpec, ...]:
    """Brokers 0..count-1, one loopback host each (127.0.0.2, .3, ...), racks r1..rN round-robin."""
    return tuple(
        BrokerSpec(
            broker_id=i,
            rack=f"r{i % racks + 1}" if racks else None,
            host=f"127.0.0.{first_address + i}",
            log_dir_count=log_dirs,
        )
        for i in range(count)
    )


def healthy_cluster(name: str = "healthy", kafka_version: str = "3.3.1", seed: int = 7) -> SimulatedCluster:
    """Six brokers in three racks, replicated topics only, everything in sync: nothing critical to find."""
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=_brokers(6, racks=3),
        min_insync_replicas=2,
        seed=seed,
        topics=(
            TopicSpec("orders", partitions=6, replication_factor=3, config={"min.insync.replicas": "2"}),
            TopicSpec("payments.v1-events", partitions=4, replication_factor=3, records_per_partition=400),
            CONSUMER_OFFSETS,
        ),
    )
    return SimulatedCluster(spec)


def maintenance_cluster(name: str = "demo", kafka_version: str = "3.3.1", seed: int = 13) -> SimulatedCluster:
    """The healthy cluster plus RF=1 topics: a maintenance window to try the drain, a broker restart and
    ``kafka_zk_post_maintenance`` on (the incident cluster's in-flight reassignment refuses any drain)."""
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=_brokers(6, racks=3),
        min_insync_replicas=2,
        seed=seed,
        topics=(
            TopicSpec("orders", partitions=6, replication_factor=3, config={"min.insync.replicas": "2"}),
            TopicSpec("payments.v1-events", partitions=4, replication_factor=3, records_per_partition=400),
            TopicSpec("metrics-rf1", partitions=6, replication_factor=1, records_per_partition=200),
            CONSUMER_OFFSETS,
        ),
    )
    return SimulatedCluster(spec)


def incident_cluster(name: str = "demo", kafka_version: str = "3.3.1", seed: int = 11) -> SimulatedCluster:
    """The incidents this provider finds, each left exactly as Kafka would leave it.

    (a) KAFKA-14190: ``clickstream`` got partitions from an old client, then the controller failed
        over and minted a new topic_id; ``inventory-updates`` got partitions from an old client
        after that, so ZooKeeper lacks its topic_id (the precursor: the next failover breaks it).
    (b) RF=1: ``metrics-rf1`` has partitions on broker 1 (about to be stopped for maintenance);
        broker 3 was stopped cleanly and its ``audit-rf1`` partitions are offline (leader -1).
    (c) deletions: ``legacy-orders`` stuck (replica on stopped broker 3); ``moving-topic`` stuck
        (reassignment in progress); ``old-logs`` deleted in ZooKeeper but ``-delete`` directories
        (past the delete delay) on broker 2 and a plain partition directory on broker 5 remain.
    (d) broker 4 crashed (no clean-shutdown marker) and one of its offset indexes is not monotonic.
    (e) broker 5 was restarted: it leads none of the replicated partitions it is preferred leader for.

    Each release gets the incidents it can have: (a) needs topic ids (IBP >= 2.8); before that the
    two topics are plain healthy topics. Everything else happens on every release from 0.11, in
    that release's formats.
    """
    brokers = _brokers(6, racks=3)
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=brokers,
        min_insync_replicas=2,
        seed=seed,
        topics=(
            TopicSpec("orders", partitions=6, replication_factor=3, config={"min.insync.replicas": "2"}),
            TopicSpec("payments.v1-events", partitions=4, replication_factor=3, records_per_partition=400),
            TopicSpec("clickstream", partitions=6, replication_factor=2, records_per_partition=300),
            TopicSpec("inventory-updates", partitions=3, replication_factor=3),
            TopicSpec(
                "metrics-rf1",
                partitions=6,
                replication_factor=1,
                assignment={0: (1,), 1: (0,), 2: (1,), 3: (2,), 4: (1,), 5: (5,)},
            ),
            TopicSpec(
                "audit-rf1",
                partitions=4,
                replication_factor=1,
                assignment={0: (3,), 1: (3,), 2: (0,), 3: (5,)},
            ),
            TopicSpec(
                "legacy-orders",
                partitions=3,
                replication_factor=2,
                assignment={0: (3, 0), 1: (1, 3), 2: (2, 5)},
            ),
            TopicSpec("moving-topic", partitions=2, replication_factor=2, assignment={0: (0, 1), 1: (1, 2)}),
            TopicSpec(
                "old-logs", partitions=3, replication_factor=2, assignment={0: (2, 5), 1: (5, 0), 2: (0, 2)}
            ),
            TopicSpec(
                "sensor-readings",
                partitions=4,
                replication_factor=3,
                records_per_partition=2_000,
                record_value_bytes=120,
                records_per_batch=5,
                # three segments a replica: broker 4's damaged index (segment 0) sits below its
                # recovery point after the crash, where Kafka 3.3.1 does not recover it
                config={"segment.bytes": "131072"},
                assignment={p: (4, (p % 3), 5) for p in range(4)},
            ),
            CONSUMER_OFFSETS,
        ),
    )
    cluster = SimulatedCluster(spec)
    if not writes_partition_metadata_on_create(cluster.spec.release):
        # 2.8.x brokers write partition.metadata only on a LeaderAndIsr after the log exists: a
        # controller move (as after the rolling restart of an upgrade) gives existing logs theirs.
        cluster.controller_failover(new_controller=1)
    # (e) a rolling restart's last broker: its leaderships went to the other in-sync replicas.
    cluster.restart_broker(5)
    cluster.incidents.append(
        Incident(
            "leader_imbalance",
            broker_id=5,
            detail="restarted: leads none of its replicated preferred partitions until a preferred election",
        )
    )
    # (a) KAFKA-14190, then its precursor on another topic (only where topic ids exist).
    if cluster.uses_topic_ids:
        cluster.old_client_adds_partitions("clickstream", 8, client="1.0")
    cluster.controller_failover(new_controller=2)
    if cluster.uses_topic_ids:
        cluster.old_client_adds_partitions("inventory-updates", 5, client="2.7")
    # (b) broker 3 stopped for maintenance without draining its RF=1 partitions.
    cluster.stop_broker(3, clean=True)
    # (c) deletions.
    cluster.delete_topic("legacy-orders")
    cluster.start_reassignment({("moving-topic", 0): (0, 5)})
    cluster.delete_topic("moving-topic")
    old_logs_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", 2, [0, 2], kind=DirKind.DELETE, age_ms=2 * DAY_MS, topic_id=old_logs_id
    )
    cluster.leave_leftover_dirs(
        "old-logs", 5, [1], kind=DirKind.NORMAL, age_ms=3 * DAY_MS, topic_id=old_logs_id
    )
    # (d) broker 4 crashes with a corrupt offset index.
    cluster.corrupt_offset_index(4, "sensor-readings", 0)
    cluster.stop_broker(4, clean=False)
    return cluster


def deletion_disabled_cluster(name: str = "nodelete", seed: int = 5) -> SimulatedCluster:
    """delete.topic.enable=false on every broker: a deletion request is dropped and the topic stays."""
    spec = ClusterSpec(
        name=name,
        brokers=_brokers(3, racks=0),
        delete_topic_enable=False,
        seed=seed,
        topics=(TopicSpec("keep-me", partitions=3, replication_factor=2),),
    )
    cluster = SimulatedCluster(spec)
    cluster.delete_topic("keep-me")
    return cluster


def topic_id_repair_cluster(
    name: str = "repair", kafka_version: str = "3.3.1", seed: int = 23
) -> SimulatedCluster:
    """Four running brokers (0-3 on 127.0.0.1-4, two racks) and each KAFKA-14190 case to repair.

    ``diverged`` and ``split`` got a partition from a 1.0 client, then the controller failed over
    (0 -> 1) and minted new ids: every replica keeps the original. ``split`` then had the old
    recipe applied on broker 3 only (its partition.metadata files removed, broker restarted): broker
    3's replicas adopted ZooKeeper's new id -- and broker 3 now skips ``diverged`` (its replicas
    there hold the old id), so it is out of that topic's ISR. ``precursor`` got a partition from a
    2.7 client after the failover: ZooKeeper has no id, its replicas agree. ``healthy`` is untouched.
    """
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=_brokers(4, racks=2, first_address=1),
        seed=seed,
        topics=(
            TopicSpec("diverged", partitions=3, replication_factor=3, records_per_partition=40),
            TopicSpec("split", partitions=3, replication_factor=3, records_per_partition=40),
            TopicSpec("precursor", partitions=3, replication_factor=2, records_per_partition=40),
            TopicSpec("healthy", partitions=2, replication_factor=3, records_per_partition=40),
        ),
    )
    cluster = SimulatedCluster(spec)
    cluster.old_client_adds_partitions("diverged", 4, client="1.0")
    cluster.old_client_adds_partitions("split", 4, client="1.0")
    cluster.controller_failover(new_controller=1)
    cluster.old_client_adds_partitions("precursor", 4, client="2.7")
    for d in cluster.replica_dirs("split", 3):
        d.metadata_file = False
    cluster.restart_broker(3)
    return cluster


def kraft_ready_cluster(
    name: str = "kraft", kafka_version: str = "3.9.0", seed: int = 31
) -> SimulatedCluster:
    """A ZooKeeper-mode cluster a KRaft migration can start on (Kafka 3.9, IBP 3.9): four running
    brokers (0-3 on 127.0.0.1-4, two racks), every topic replicated with its id in ZooKeeper and in
    every replica, nothing pending, explicit broker ids; security metadata the migration copies:
    ACLs (literal and prefixed), a SCRAM credential, user and client quotas, a delegation token."""
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=_brokers(4, racks=2, first_address=1),
        min_insync_replicas=2,
        seed=seed,
        topics=(
            TopicSpec("orders", partitions=6, replication_factor=3, records_per_partition=60),
            TopicSpec("payments", partitions=4, replication_factor=3, records_per_partition=60),
            replace(CONSUMER_OFFSETS, partitions=4),
        ),
    )
    cluster = SimulatedCluster(spec)
    cluster.add_acl("Topic", "orders", "User:app", "Read")
    cluster.add_acl("Topic", "orders", "User:app", "Write")
    cluster.add_acl("Group", "app", "User:app", "Read")
    cluster.add_acl("Topic", "payments.", "User:billing", "Read", pattern="PREFIXED")
    cluster.add_scram_credential("app", "SCRAM-SHA-512")
    cluster.set_quota("users", "app", "producer_byte_rate", "1048576")
    cluster.set_quota("clients", "reporting", "consumer_byte_rate", "2097152")
    cluster.add_delegation_token("app")
    return cluster


def _reassign_one(cluster: SimulatedCluster) -> None:
    part = cluster.topic("payments").partitions[0]
    spare = next(b for b in sorted(cluster.brokers) if b not in part.replicas)
    cluster.start_reassignment({("payments", 0): (*part.replicas[:-1], spare)})


def _fall_behind(cluster: SimulatedCluster) -> None:
    part = cluster.topic("orders").partitions[0]
    cluster.followers_fall_behind("orders", 0, [r for r in part.replicas if r != part.leader])


def _drop_partition_metadata(cluster: SimulatedCluster) -> None:
    replica = cluster.replica_dirs("orders", 1)[0]
    replica.metadata_file = False  # removed on disk; the running broker keeps the id in memory


def _lease(cluster: SimulatedCluster) -> None:
    holder = LeaseHolder(
        "kafka_zk_pre_maintenance_drain",
        "manual__2026-11-30T10:00:00",
        "execute",
        "airflow-worker-1",
        cluster.clock_ms,
        cluster.clock_ms + 12 * 3_600_000,
        cluster.cluster_id,
    )
    cluster.maintenance_lease = holder.encode()


@dataclass(frozen=True)
class ReadinessBlocker:
    """One migration blocker, planted alone on :func:`kraft_ready_cluster` (tests: the only one reported).

    :param check: the readiness check it must trip.
    :param plant: the step that plants it.
    :param conf: the readiness DAG params the case needs.
    :param kafka_version: the cluster's release.
    """

    check: str
    plant: Callable[[SimulatedCluster], object]
    conf: Mapping[str, Any] = field(default_factory=dict)
    kafka_version: str = "3.9.0"


READINESS_BLOCKERS: dict[str, ReadinessBlocker] = {
    "release_early_access": ReadinessBlocker(
        "release", lambda c: None, {"kafka_version": "3.7.1"}, kafka_version="3.7.1"
    ),
    "ibp_roll_unfinished": ReadinessBlocker(
        "inter-broker-protocol",
        lambda c: c.set_broker_properties(2, {"inter.broker.protocol.version": "3.8"}),
        {"kafka_version": "3.9.0"},
    ),
    "broker_down": ReadinessBlocker("brokers-registered", lambda c: c.stop_broker(3, clean=True)),
    "topic_id_precursor": ReadinessBlocker(
        "topic-ids", lambda c: c.old_client_adds_partitions("payments", 6, client="2.7")
    ),
    "partition_metadata_missing": ReadinessBlocker("partition-metadata", _drop_partition_metadata),
    "reassignment_in_flight": ReadinessBlocker("reassignment", _reassign_one),
    "deletion_pending": ReadinessBlocker("topic-deletion", lambda c: c.request_topic_deletion("payments")),
    "preferred_election_pending": ReadinessBlocker(
        "preferred-election", lambda c: c.request_preferred_election([("orders", 0), ("orders", 1)])
    ),
    "throttle_left": ReadinessBlocker(
        "throttles",
        lambda c: c.broker_configs.update(
            {
                "1": {
                    "leader.replication.throttled.rate": "10485760",
                    "follower.replication.throttled.rate": "10485760",
                }
            }
        ),
    ),
    "under_min_isr": ReadinessBlocker("partition-health", _fall_behind),
    "maintenance_lease_held": ReadinessBlocker("maintenance-lease", _lease),
    "generated_broker_id": ReadinessBlocker(
        "migration-config", lambda c: c.set_broker_properties(2, {"broker.id": None})
    ),
    "controller_id_collision": ReadinessBlocker(
        "controller-ids", lambda c: None, {"controller_node_ids": [2, 3000, 3001]}
    ),
    "quota_not_a_number": ReadinessBlocker(
        "metadata-copy", lambda c: c.set_quota("clients", "batch", "producer_byte_rate", "unlimited")
    ),
}
"""Every blocker a 3.9 cluster can have alone (JBOD without IBP >= 3.7-IV2 also breaks the IBP rule)."""


def mid_migration_cluster(name: str = "kraft", seed: int = 31) -> SimulatedCluster:
    """:func:`kraft_ready_cluster` during its migration: three KRaft controllers (3000-3002) provisioned,
    every broker in migration mode, controller 3000 (KRaft epoch 5) holding /controller with the
    metadata migrated, then dual-writes: a topic created through KRaft and a broker's controlled
    restart whose leader and ISR changes the KRaft controller wrote into ZooKeeper."""
    cluster = kraft_ready_cluster(name=name, seed=seed)
    cluster.provision_kraft_controllers((3000, 3001, 3002))
    cluster.enter_migration_mode(claim=False)
    # the ZooKeeper controller's automatic rebalance after the roll: preferred leaders back
    cluster.preferred_replica_election(
        [(t, p) for t, topic in cluster.topics.items() for p in topic.partitions]
    )
    cluster.begin_kraft_migration(3000, 5)
    cluster.kraft_controller_creates_topic(
        TopicSpec("events", partitions=3, replication_factor=3, records_per_partition=30)
    )
    cluster.restart_broker(1)
    cluster.preferred_replica_election(
        [
            (t, p)
            for t, topic in cluster.topics.items()
            for p, part in topic.partitions.items()
            if part.replicas[0] == 1
        ]
    )
    return cluster


def rolling_reset_cluster(
    name: str = "rolling", kafka_version: str = "3.3.1", seed: int = 29, controller: int = 1
) -> SimulatedCluster:
    """Four running brokers (0-3 on 127.0.0.1-4, two log dirs each) where a rolling ``file_reset`` is
    safe for ``split`` and dangerous for ``solo``.

    ``split`` (RF=3) is led by brokers 1 and 3, whose replicas hold ZooKeeper's id; brokers 0 and 2
    -- followers only -- had their directories restored from a backup of a former incarnation (another
    id): they are out of the ISR, and resetting their partition.metadata and restarting them (0,
    then 2) moves no leadership. ``solo`` (RF=1, both partitions on broker 0) lost ``topic_id`` to an
    old tool, a controller failover (to ``controller``) minted a new id, and the tool rewrote the znode
    again: ZooKeeper has no id, the running controller holds the minted one, the replicas the first.
    A restart of broker 0 leaves both ``solo`` partitions without a serving leader (Kafka 3.3.1
    elects broker 0 again and broker 0 rejects the id) -- unless ``solo`` is repaired first.
    """
    spec = ClusterSpec(
        name=name,
        kafka_version=kafka_version,
        brokers=_brokers(4, racks=2, first_address=1, log_dirs=2),
        seed=seed,
        topics=(
            TopicSpec(
                "split",
                partitions=4,
                replication_factor=3,
                records_per_partition=40,
                assignment={0: (1, 0, 2), 1: (3, 2, 0), 2: (1, 2, 0), 3: (3, 0, 2)},
            ),
            TopicSpec(
                "solo",
                partitions=2,
                replication_factor=1,
                records_per_partition=40,
                assignment={0: (0,), 1: (0,)},
            ),
            TopicSpec("healthy", partitions=2, replication_factor=3, records_per_partition=20),
        ),
    )
    cluster = SimulatedCluster(spec)
    cluster.old_tool_rewrites_topic_znode("solo")
    cluster.controller_failover(new_controller=controller)
    cluster.old_tool_rewrites_topic_znode("solo")
    former = cluster._new_topic_id()
    for broker in (0, 2):
        cluster.restore_replica_dirs("split", broker, former)
    return cluster
