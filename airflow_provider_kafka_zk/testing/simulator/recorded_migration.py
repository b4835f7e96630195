"""The ZooKeeper-to-KRaft migration recorded on a real Kafka 3.9.0 cluster, replayed phase by phase.

The recording (tests/fixtures/real-kafka-3.9-migration/: every znode per phase, broker 0's
server.properties per phase, the tools' output and the controller's log) followed docs/ops.html
"ZooKeeper to KRaft Migration" of 3.9 on three brokers (0-2, racks r0-r2, IBP 3.9) and one KRaft
controller (3000), then the documented rollback. :class:`RecordedMigration` builds the same cluster
(topics, ids, assignments, configs, the reassignment) and plays each phase with the simulator's
migration steps -- what an operator did between two snapshots -- so tests can hold the simulator to
the recorded znodes and the provider's readers to each real phase.

The steps a phase is made of are :class:`~.cluster.SimulatedCluster` methods anyone can call on any
3.4+ cluster (see the README's simulator section for the list): provision the quorum, roll brokers
into migration mode (the KRaft controller claims after the last), roll them to KRaft, roll them back,
stop the quorum, delete ``/controller`` (``rmr`` fails as on ZooKeeper 3.8), roll them out of
migration mode, delete the ``/migration`` the documented rollback leaves behind.
"""

from __future__ import annotations

from enum import StrEnum

from .cluster import SimulatedCluster, SimulationError
from .spec import BrokerSpec, ClusterSpec, TopicSpec


class RecordedPhase(StrEnum):
    """The recording's snapshots, in order; the value is the fixture file's stem."""

    ZK_MODE = "00-zk-mode"
    CONTROLLER_PROVISIONED = "01-controller-provisioned"
    BROKERS_IN_MIGRATION_MODE = "02-brokers-in-migration-mode-dual-write"
    BROKERS_IN_KRAFT_MODE = "03-brokers-in-kraft-mode-dual-write"
    ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE = "04a-rollback-brokers-zk-migration-mode"
    ROLLBACK_CONTROLLER_DEPROVISIONED = "04b-rollback-controller-deprovisioned-zk-controller-elected"
    ROLLBACK_COMPLETE = "04c-rollback-complete-zk-mode"


PHASES: tuple[RecordedPhase, ...] = tuple(RecordedPhase)

CLUSTER_ID = "ecaeyjd7TdSwxG-gXVrv4w"
KRAFT_CONTROLLER = 3000
BROKERS = (0, 1, 2)

# __consumer_offsets as the group coordinator placed it on three racked brokers (the recording's topic znode)
_OFFSETS_PATTERN = ((0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (1, 0, 2), (2, 1, 0))

TOPICS_AT_START = (
    TopicSpec(
        "mig-a",
        partitions=3,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
        assignment={0: (1, 2, 0), 1: (2, 0, 1), 2: (0, 1, 2)},
        topic_id="Kxerhoh-TCK9GXC9ydbIhA",
        records_per_partition=20,
    ),
    TopicSpec(
        "mig-b",
        partitions=6,
        replication_factor=2,
        assignment={0: (0, 1), 1: (1, 2), 2: (2, 0), 3: (0, 2), 4: (1, 0), 5: (2, 1)},
        topic_id="JUCU9p3FSXq-SvNW7Qq7Yg",
        records_per_partition=20,
    ),
    TopicSpec(
        "mig-compact",
        partitions=2,
        replication_factor=3,
        config={"cleanup.policy": "compact"},
        assignment={0: (2, 0, 1), 1: (0, 1, 2)},
        topic_id="0EJfybjyQRimwggmuHdvoQ",
        records_per_partition=10,
    ),
    TopicSpec(
        "__consumer_offsets",
        partitions=50,
        replication_factor=3,
        config={"compression.type": "producer", "cleanup.policy": "compact", "segment.bytes": "104857600"},
        assignment={p: _OFFSETS_PATTERN[p % 6] for p in range(50)},
        topic_id="tL_bjkGtR06DITZR4Qr8QQ",
        records_per_partition=2,
    ),
)
MIG_HYBRID = TopicSpec(
    "mig-hybrid",
    partitions=2,
    replication_factor=3,
    config={"retention.ms": "3600000"},
    assignment={0: (0, 1, 2), 1: (1, 2, 0)},
    topic_id="pbC_cLL6T9u9__U7eXWedw",
    records_per_partition=10,
)
"""Created while the brokers ran in migration mode and the KRaft controller dual-wrote (phase 02)."""
MIG_KRAFT = TopicSpec(
    "mig-kraft",
    partitions=3,
    replication_factor=3,
    config={"cleanup.policy": "compact"},
    assignment={0: (2, 0, 1), 1: (0, 1, 2), 2: (1, 2, 0)},
    topic_id="Bkz9XMqMRVCSE3jy7OhIxg",
    records_per_partition=10,
)
"""Created with every broker in KRaft mode (phase 03)."""
MIG_AFTER_ROLLBACK = TopicSpec(
    "mig-after-rollback",
    partitions=1,
    replication_factor=3,
    assignment={0: (2, 1, 0)},
    topic_id="J3lW4T_9TqmtKe7wkRlxRw",
    records_per_partition=10,
)
"""Created by the ZooKeeper-mode controller after the rollback (phase 04c)."""

# What `kafka-reassign-partitions --verify` removes when a reassignment is done ("Clearing broker-level
# throttles on brokers 0,1,2" / "Clearing topic-level throttles on topic mig-b": ReassignPartitionsCommand
# .clearAllThrottles, 3.9.0-rc3), whether they were set or not.
BROKER_THROTTLES = {
    "leader.replication.throttled.rate": None,
    "follower.replication.throttled.rate": None,
    "replica.alter.log.dirs.io.max.bytes.per.second": None,
}
TOPIC_THROTTLES = {
    "leader.replication.throttled.replicas": None,
    "follower.replication.throttled.replicas": None,
}


def recorded_migration_cluster(
    name: str = "k39", seed: int = 39, kafka_version: str = "3.9.0"
) -> SimulatedCluster:
    """The recorded cluster in ZooKeeper mode (phase 00), as the recording's first step left it: three
    topics and ``__consumer_offsets`` with the recorded ids and placements, a topic config altered, a
    dynamic config on broker 1 and on the broker default, a client quota, broker 0's producer id block,
    and ``mig-b-0`` reassigned [0,1] -> [0,2] through the Admin API, whose ``--verify`` cleared the
    throttles (creating empty ``/config/brokers/0`` and ``/2``).

    :param kafka_version: the brokers' release (3.9.0 as recorded). Another 3.4+ release gives the same
        cluster as that release runs it -- its IBP (the release's line), its jars on the brokers' command
        lines, its files -- for what depends on the release before a migration starts (the traps bound
        to a release, :mod:`airflow_provider_kafka_zk.kafka.kraft_migration_traps`)."""
    spec = ClusterSpec(
        name,
        kafka_version=kafka_version,
        brokers=tuple(BrokerSpec(b, rack=f"r{b}", host=f"127.0.0.{b + 1}", port=49092 + b) for b in BROKERS),
        topics=TOPICS_AT_START,
        cluster_id=CLUSTER_ID,
        controller=0,
        seed=seed,
    )
    cluster = SimulatedCluster(spec)
    cluster.alter_config("topics", "mig-a", {"retention.ms": "86400000"})
    cluster.alter_config("brokers", "1", {"log.cleaner.threads": "2"})
    cluster.alter_config("brokers", "<default>", {"log.retention.ms": "604800000"})
    cluster.alter_config("clients", "prod-1", {"producer_byte_rate": "10485760"})
    # the producer of the first step got broker 0's block 0-999 (the znode's first write)
    cluster.producer_id_block, cluster.producer_id_block_version = (0, 0), 1
    reassign(cluster, "mig-b", 0, (0, 2), verify_brokers=(2, 1, 0))
    return cluster


def reassign(
    cluster: SimulatedCluster,
    topic: str,
    partition: int,
    target: tuple[int, ...],
    *,
    verify_brokers: tuple[int, ...] = BROKERS,
) -> None:
    """``kafka-reassign-partitions --execute`` (Admin API: no ``/admin/reassign_partitions``), the new
    replicas catching up, the controller finishing it, then ``--verify`` clearing every throttle of the
    brokers and the topic (:data:`BROKER_THROTTLES`, :data:`TOPIC_THROTTLES`)."""
    cluster.start_reassignment({(topic, partition): target}, through_admin_api=True)
    cluster.catch_up_reassignment(topic, partition)
    if not cluster.complete_reassignment(topic, partition):
        raise SimulationError(f"{topic}-{partition}: the reassignment did not complete")
    for broker_id in verify_brokers:
        cluster.alter_config("brokers", str(broker_id), BROKER_THROTTLES)
    cluster.alter_config("topics", topic, TOPIC_THROTTLES)


class RecordedMigration:
    """The recorded migration on a simulated cluster: :meth:`play_to` goes forward phase by phase.

    :param name: the cluster's name (the cluster file's, for tests).
    :param seed: the simulator's seed.
    :param kafka_version: the brokers' release (see :func:`recorded_migration_cluster`).
    """

    def __init__(self, name: str = "k39", seed: int = 39, kafka_version: str = "3.9.0") -> None:
        self.cluster = recorded_migration_cluster(name, seed, kafka_version)
        self.phase = RecordedPhase.ZK_MODE

    def play_to(self, phase: RecordedPhase | str) -> SimulatedCluster:
        """Play every step after the current phase up to ``phase`` (forward only); returns the cluster."""
        target = RecordedPhase(phase)
        if PHASES.index(target) < PHASES.index(self.phase):
            raise SimulationError(f"already at {self.phase.value}, past {target.value}: build a new one")
        while self.phase is not target:
            following = PHASES[PHASES.index(self.phase) + 1]
            getattr(self, "_" + following.name.lower())()
            self.phase = following
        return self.cluster

    # one method per phase: what the recording did to get there from the previous one (logs/NN-*.txt)
    def _controller_provisioned(self) -> None:
        self.cluster.provision_kraft_controllers((KRAFT_CONTROLLER,))

    def _brokers_in_migration_mode(self) -> None:
        c = self.cluster
        c.enter_migration_mode(BROKERS)  # the KRaft controller claims after broker 2, the last
        # two producer sessions got KRaft blocks; a topic created through the KRaft controller, its config
        # altered; 100 records produced to mig-a
        c.allocate_producer_ids(0)
        c.allocate_producer_ids(1)
        c.kraft_controller_creates_topic(MIG_HYBRID)
        c.kraft_controller_idles(30)  # the snapshot came ~30 s after the last broker's roll

    def _brokers_in_kraft_mode(self) -> None:
        c = self.cluster
        c.roll_brokers_to_kraft(BROKERS)
        c.kraft_controller_creates_topic(MIG_KRAFT)
        c.allocate_producer_ids(0)
        c.allocate_producer_ids(2)
        reassign(c, "mig-b", 1, (1, 0))
        c.kraft_controller_idles(10)

    def _rollback_brokers_in_zk_migration_mode(self) -> None:
        for broker_id in BROKERS:
            self.cluster.roll_broker_back_to_zookeeper(broker_id)
        self.cluster.kraft_controller_idles(10)

    def _rollback_controller_deprovisioned(self) -> None:
        c = self.cluster
        c.kraft_controller_idles(4)  # it ran ~4 s past the previous snapshot
        c.stop_kraft_controllers()
        status, output = c.delete_controller_znode("rmr /controller")  # as documented: fails
        assert status == 127, output
        c.delete_controller_znode("deleteall /controller")

    def _rollback_complete(self) -> None:
        c = self.cluster
        for broker_id in BROKERS:
            c.roll_broker_out_of_migration_mode(broker_id)
        c.create_topic(MIG_AFTER_ROLLBACK)
        c.allocate_producer_ids(1)
