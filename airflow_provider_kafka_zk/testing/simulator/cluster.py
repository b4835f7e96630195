"""In-memory model of a ZooKeeper-mode Kafka cluster and the incident steps that change it.

Each step changes ZooKeeper and the brokers' disks the way Kafka itself would (its controller and
broker code at the simulated release, and what a real 3.3.1 cluster did), and records the incident it leaves behind in
``incidents`` so tests can check that later code finds exactly what was planted. Nothing here
does I/O: ``zk_writer`` and ``disk_writer`` put the model into a real ZooKeeper and onto disk.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from airflow_provider_kafka_zk.kafka.kraft_migration import BrokerMode
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
from airflow_provider_kafka_zk.kafka.versions import (
    KafkaVersion,
    has_stray_dirs,
    ibp_sends_topic_ids,
    ibp_uses_topic_ids,
    supports_directory_ids,
    supports_kraft_migration,
    topic_znode_version,
    writes_partition_metadata_on_create,
)
from airflow_provider_kafka_zk.kafka.znodes import MigrationZNode, validate_topic_name

from .assignment import assign_replicas
from .spec import BrokerSpec, ClusterSpec, TopicSpec

KRAFT_CONTROLLER_PORT = 9093
"""The KRaft controllers' listener port (docs/ops.html's samples)."""

METADATA_MAX_IDLE_INTERVAL_MS = 500
"""``metadata.max.idle.interval.ms``' default (``KRaftConfigs``, 3.9.0-rc3): a KRaft controller's NoOpRecord period."""

PRODUCER_ID_BLOCK_SIZE = 1000
"""``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`` (3.9.0-rc3; 1000 in every release with the znode)."""


class SimulationError(ValueError):
    """A step asked for something the simulated cluster cannot do (unknown topic, broker offline...)."""


@dataclass
class PartitionModel:
    replicas: list[int]
    leader: int
    isr: list[int]
    controller_epoch: int = 1  # epoch of the controller that last wrote the state znode
    leader_epoch: int = 0
    state_version: int = 0  # zkVersion of the state znode = the partition epoch
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    # Brokers that skipped the LeaderAndIsr making them leader or follower at the current epoch
    # (INCONSISTENT_TOPIC_ID): ZooKeeper names them, but they do not serve the partition.
    rejected: set[int] = field(default_factory=set)


@dataclass
class TopicModel:
    spec: TopicSpec
    partitions: dict[int, PartitionModel]
    config: dict[str, str]
    zk_topic_id: KafkaUuid | None  # what /brokers/topics/<t> holds
    controller_topic_id: KafkaUuid | None  # what the active controller holds in memory
    znode_format: int  # format version of the last write of the topic znode (1, 2 or 3)
    znode_version: int = 0  # zkVersion of the topic znode
    # brokers whose replicas of this topic carry DirectoryId.MIGRATING in the KRaft metadata (every
    # replica of a topic migrated from ZooKeeper, until its broker starts in KRaft mode)
    migrating_directories: set[int] = field(default_factory=set)
    # /config/topics/<t> exists (a KRaft controller deletes it when the topic's last override goes)
    config_znode: bool = True

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class ReplicaDir:
    """One partition directory on one broker's disk."""

    broker_id: int
    log_dir_index: int
    topic: str
    partition: int
    topic_id: KafkaUuid | None  # content of partition.metadata; None = no file
    records: int
    record_value_bytes: int
    records_per_batch: int
    segment_bytes: int
    leader_epochs: list[tuple[int, int]]
    mtime_ms: int
    kind: DirKind = DirKind.NORMAL
    unique_id: str | None = None
    corrupt_offset_index: bool = False
    # Whether the files are on disk. ``topic_id`` is the broker's in-memory id (what the file held
    # when the log was loaded): a running broker keeps it when someone removes the file.
    metadata_file: bool = True
    epoch_file: bool = True
    # A -delete directory Kafka fails to remove (read-only or failing disk): kafka-delete-logs logs
    # "Exception while deleting ..." and drops it from its queue (LogManager.deleteLogs, 3.3.1).
    delete_fails: bool = False
    # partition.metadata damaged on disk: the broker keeps its in-memory id while it runs; at its
    # next start Kafka takes the whole log dir offline (PartitionMetadataFile.read, 3.3.1)
    metadata_unreadable: bool = False
    # the replica's log dir went offline at the broker's last start: it serves nothing
    offline: bool = False


@dataclass
class BrokerModel:
    spec: BrokerSpec
    online: bool = True
    clean_shutdown: bool = False  # .kafka_cleanshutdown present (only ever on a stopped broker)
    registered_at_ms: int = 0
    # server.properties keys set (or, with None, removed) on top of the spec's: what an operator changed
    properties: dict[str, str | None] = field(default_factory=dict)
    # runs as ``process.roles=broker`` (a migration's KRaft broker): registers with the KRaft quorum
    # only, never in /brokers/ids (``BrokerServer``, 3.9.0-rc3)
    kraft_mode: bool = False
    # meta.properties' directory.id per log dir: given at the first start with the migration on, kept
    # from then on, also in KRaft mode and after a rollback (``KafkaServer.startup``, 3.9.0-rc3)
    directory_ids: tuple[KafkaUuid, ...] = ()
    # server.properties as someone wrote it on the host (a migration DAG), kept byte for byte; None: the
    # simulator renders it from the spec and ``properties``
    server_properties_text: str | None = None

    @property
    def broker_id(self) -> int:
        return self.spec.broker_id


@dataclass(frozen=True)
class KraftMigration:
    """A KRaft controller quorum migrating this cluster (3.4+): what ``/migration`` and ``/controller`` hold.

    The fields are what the active controller last wrote into ``/migration``
    (``ZkMigrationLeadershipState``: -1 everywhere until it wrote its own, ``kraft_metadata_offset``
    -1 until the initial metadata load finished). ``claimed``: the KRaft controller holds
    ``/controller`` (persistent); before that a ZooKeeper-mode broker still does.
    """

    kraft_controller_id: int
    kraft_controller_epoch: int
    kraft_metadata_offset: int
    kraft_metadata_epoch: int
    zk_version: int = 0  # each migration write is a conditional SetData on /migration
    claimed: bool = True
    controller_node_ids: tuple[int, ...] = ()
    # the KRaft controllers run (False once stopped for a rollback: /controller may still name one)
    controllers_running: bool = True
    # finalized (POST_MIGRATION): the controllers run without the migration flag and no longer write
    # ZooKeeper -- /controller, /controller_epoch and /migration stay as the last dual write left them
    finalized: bool = False

    @property
    def metadata_migrated(self) -> bool:
        """``ZkMigrationLeadershipState.initialZkMigrationComplete`` (3.9.0-rc3): offset > 0."""
        return self.kraft_metadata_offset > 0

    def encode(self) -> bytes:
        return MigrationZNode(
            self.kraft_controller_id,
            self.kraft_controller_epoch,
            self.kraft_metadata_offset,
            self.kraft_metadata_epoch,
        ).encode()


@dataclass(frozen=True)
class Incident:
    """Ground truth for tests: what a step planted and where."""

    kind: str
    topic: str | None = None
    broker_id: int | None = None
    partitions: tuple[int, ...] = ()
    detail: str = ""


class SimulatedCluster:
    """A cluster built from a ClusterSpec, then changed by incident steps (methods below)."""

    def __init__(self, spec: ClusterSpec) -> None:
        if spec.start_time_ms is None:
            spec = replace(spec, start_time_ms=(int(time.time()) - 3600) * 1000)
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.clock_ms: int = spec.start_time_ms
        self.cluster_id = spec.cluster_id or str(KafkaUuid(self.rng.randbytes(16)))
        self.brokers: dict[int, BrokerModel] = {
            b.broker_id: BrokerModel(b, registered_at_ms=self.clock_ms) for b in spec.brokers
        }
        if len(self.brokers) != len(spec.brokers):
            raise SimulationError("broker ids must be unique")
        self.controller_id = spec.controller if spec.controller is not None else min(self.brokers)
        self.controller_epoch = 1
        self.controller_epoch_version = 1  # created with 0, then incremented by the first election
        self.controller_elected_at_ms = self.clock_ms
        self.topics: dict[str, TopicModel] = {}
        self.dirs: list[ReplicaDir] = []
        self.delete_markers: set[str] = set()
        self._deletions_leaving_delete_dirs: set[str] = set()  # paused deletions asked with leave_delete_dirs
        self.reassignment: list[tuple[str, int, tuple[int, ...]]] = []
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.config_changes: list[str] = []  # entity paths, in notification order
        self.config_versions: dict[str, int] = {}  # entity path ("topics/t") -> its znode's zkVersion
        # /latest_producer_id_block: (allocating broker, or -1 for a KRaft controller's write; first id)
        # and its zkVersion; None: one block per broker at start (the render's default)
        self.producer_id_block: tuple[int, int] | None = None
        self.producer_id_block_version = 0
        self._kraft_next_producer_id = 0  # the KRaft controller's next id (ProducerIdControlManager)
        self.incidents: list[Incident] = []
        self.controller_log: list[str] = []  # lines the controller's controller.log shows (some steps)
        self.kraft_migration: KraftMigration | None = None
        # security metadata a migration copies (or not), as Kafka's tools and authorizer keep it
        self.acls: dict[tuple[str, str, str], list[dict[str, str]]] = {}  # (pattern, type, name) -> entries
        self.user_configs: dict[str, dict[str, str]] = {}  # sanitized user (or <user>/clients/<id>)
        self.client_configs: dict[str, dict[str, str]] = {}
        self.delegation_tokens: dict[str, dict[str, object]] = {}
        self.zk_consumer_offsets: dict[tuple[str, str, int], int] = {}  # (group, topic, partition)
        # brokers started in migration mode: they keep the KRaft metadata log in their first log dir
        self.metadata_log_brokers: set[int] = set()
        self.preferred_election_request: list[tuple[str, int]] = []  # /admin/preferred_replica_election
        self.maintenance_lease: bytes | None = None  # this provider's /kafka_zk_maintenance/lease
        self.history: list[str] = [
            f"cluster {spec.name}: Kafka {spec.kafka_version}, IBP {spec.ibp}, "
            f"brokers {sorted(self.brokers)}, controller {self.controller_id}"
        ]
        for topic in spec.topics:
            self.create_topic(topic)

    # ------------------------------------------------------------------ helpers
    @property
    def uses_topic_ids(self) -> bool:
        return ibp_uses_topic_ids(self.spec.ibp)

    def tick(self, ms: int = 1_000) -> int:
        self.clock_ms += ms
        return self.clock_ms

    def online_broker_ids(self) -> list[int]:
        return sorted(b for b, m in self.brokers.items() if m.online)

    def broker_mode(self, broker_id: int) -> BrokerMode:
        """How broker ``broker_id`` is configured to run (:func:`~airflow_provider_kafka_zk.kafka.
        kraft_migration.broker_mode` of its settings)."""
        broker = self.broker(broker_id)
        if broker.kraft_mode:
            return BrokerMode.KRAFT
        flag = broker.properties.get("zookeeper.metadata.migration.enable")
        return BrokerMode.MIGRATION if (flag or "").strip().lower() == "true" else BrokerMode.ZOOKEEPER

    def zookeeper_broker_ids(self) -> list[int]:
        """Running brokers in ZooKeeper mode: registered in ``/brokers/ids``, candidates in an election
        (a migration's KRaft brokers run but register with the KRaft quorum only)."""
        return sorted(b for b, m in self.brokers.items() if m.online and not m.kraft_mode)

    def topic(self, name: str) -> TopicModel:
        try:
            return self.topics[name]
        except KeyError:
            raise SimulationError(f"no topic {name!r} in the simulated cluster") from None

    def broker(self, broker_id: int) -> BrokerModel:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise SimulationError(f"no broker {broker_id} in the simulated cluster") from None

    def replica_dirs(
        self, topic: str | None = None, broker_id: int | None = None, kind: DirKind | None = DirKind.NORMAL
    ) -> list[ReplicaDir]:
        return [
            d
            for d in self.dirs
            if (topic is None or d.topic == topic)
            and (broker_id is None or d.broker_id == broker_id)
            and (kind is None or d.kind is kind)
        ]

    def _new_topic_id(self) -> KafkaUuid:
        while True:
            candidate = KafkaUuid(self.rng.randbytes(16))
            if not candidate.is_reserved and not str(candidate).startswith("-"):
                return candidate

    def _new_replica_dir(self, topic: TopicModel, partition: int, broker_id: int, records: int) -> ReplicaDir:
        spec = topic.spec
        log_dirs = self.brokers[broker_id].spec.log_dir_count
        return ReplicaDir(
            broker_id=broker_id,
            log_dir_index=(hash_partition(topic.name, partition) % log_dirs),
            topic=topic.name,
            partition=partition,
            topic_id=None,
            records=records,
            record_value_bytes=spec.record_value_bytes,
            records_per_batch=spec.records_per_batch,
            segment_bytes=int(spec.config.get("segment.bytes", self.spec.segment_bytes)),
            leader_epochs=[(0, 0)],
            mtime_ms=self.clock_ms,
        )

    def _bump_state(self, partition: PartitionModel, *, leader: int, isr: list[int]) -> None:
        partition.leader = leader
        partition.isr = isr
        partition.leader_epoch += 1
        partition.state_version += 1
        partition.controller_epoch = self._writing_controller_epoch()
        self._dual_write()

    def _leader_epoch_started(self, topic: str, partition: int, leader: int, epoch: int) -> None:
        """A new leader appends (epoch, log end offset) to its leader-epoch-checkpoint."""
        for d in self.replica_dirs(topic, leader):
            if d.partition == partition:
                d.leader_epochs.append((epoch, d.records))

    # ------------------------------------------------------------------ topic creation
    def create_topic(self, spec: TopicSpec) -> TopicModel:
        """``kafka-topics --create``: topic znode (with a fresh id when IBP >= 2.8), config, states, dirs."""
        validate_topic_name(spec.name)
        if spec.name in self.topics:
            raise SimulationError(f"topic {spec.name!r} already exists")
        live = self.online_broker_ids()
        if spec.replication_factor > len(live):
            raise SimulationError(
                f"topic {spec.name!r}: replication factor {spec.replication_factor} > {len(live)} live brokers"
            )
        assignment = spec.assignment or assign_replicas(
            {b: self.brokers[b].spec.rack for b in live},
            spec.partitions,
            spec.replication_factor,
            self.rng,
        )
        topic_id = None
        if self.uses_topic_ids:
            topic_id = KafkaUuid.parse(spec.topic_id) if spec.topic_id else self._new_topic_id()
        topic = TopicModel(
            spec=spec,
            partitions={
                p: PartitionModel(
                    replicas=list(r), leader=r[0], isr=list(r), controller_epoch=self.controller_epoch
                )
                for p, r in assignment.items()
            },
            config=dict(spec.config),
            zk_topic_id=topic_id,
            controller_topic_id=topic_id,
            znode_format=topic_znode_version(self.spec.release),
        )
        self.topics[spec.name] = topic
        on_disk_id = topic_id if writes_partition_metadata_on_create(self.spec.release) else None
        for p, replicas in assignment.items():
            for b in replicas:
                replica = self._new_replica_dir(topic, p, b, spec.records_per_partition)
                replica.topic_id = on_disk_id
                self.dirs.append(replica)
        self.tick()
        return topic

    # ------------------------------------------------------------------ KAFKA-14190
    def old_client_adds_partitions(
        self, topic_name: str, new_partition_count: int, client: str = "1.0"
    ) -> None:
        """An old (< 2.8) client rewrites the topic znode without topic_id to add partitions.

        The running 2.8+ controller creates the new partitions with the id it holds in memory
        (3.x replicas write it to partition.metadata at once, 2.8.x ones only on a later
        LeaderAndIsr) but never writes the id back to ZooKeeper (observed on a real 3.3.1 cluster).
        """
        topic = self.topic(topic_name)
        old_count = len(topic.partitions)
        if new_partition_count <= old_count:
            raise SimulationError(f"{topic_name}: already has {old_count} partitions")
        live = {b: self.brokers[b].spec.rack for b in self.online_broker_ids()}
        rf = len(topic.partitions[0].replicas)
        added = assign_replicas(
            live, new_partition_count - old_count, rf, self.rng, start_partition=old_count
        )
        for p, replicas in added.items():
            topic.partitions[p] = PartitionModel(
                replicas=list(replicas),
                leader=replicas[0],
                isr=list(replicas),
                controller_epoch=self.controller_epoch,
            )
        topic.zk_topic_id = None
        topic.znode_format = 1 if client.startswith(("0.", "1.", "2.0", "2.1", "2.2", "2.3")) else 2
        topic.znode_version += 1
        in_memory = topic.controller_topic_id
        writes_now = writes_partition_metadata_on_create(self.spec.release)
        for p, replicas in added.items():
            for b in replicas:
                replica = self._new_replica_dir(topic, p, b, topic.spec.records_per_partition // 2)
                replica.topic_id = in_memory if writes_now else None
                self.dirs.append(replica)
        self.history.append(
            f"{topic_name}: a {client} client added partitions {old_count}..{new_partition_count - 1} through "
            f"ZooKeeper; the topic znode is now format v{topic.znode_format} without topic_id"
        )
        if self.uses_topic_ids and in_memory is not None:
            self.incidents.append(
                Incident(
                    "topic_id_missing_in_zookeeper",
                    topic=topic_name,
                    partitions=tuple(added),
                    detail=str(in_memory),
                )
            )
        self.tick()

    def old_tool_rewrites_topic_znode(
        self, topic_name: str, tool: str = "a 2.3 AdminUtils-based tool"
    ) -> None:
        """A tool that writes the topic znode as format v1/v2 (any client before 2.8, or a
        third-party tool) rewrites it with the same partitions: ``topic_id`` is gone from ZooKeeper
        while the running controller keeps its in-memory id (``processPartitionModifications`` does
        not reload ids, 3.3.1), as :meth:`old_client_adds_partitions` without the new partitions."""
        topic = self.topic(topic_name)
        topic.zk_topic_id = None
        topic.znode_format = 1
        topic.znode_version += 1
        self.history.append(f"{topic_name}: {tool} rewrote the topic znode as v1, without topic_id")
        if self.uses_topic_ids and topic.controller_topic_id is not None:
            self.incidents.append(
                Incident(
                    "topic_id_missing_in_zookeeper", topic=topic_name, detail=str(topic.controller_topic_id)
                )
            )
        self.tick()

    def restore_replica_dirs(self, topic_name: str, broker_id: int, topic_id: KafkaUuid) -> None:
        """Broker ``broker_id``'s directories of ``topic_name`` are restored from a backup of a former
        incarnation of the topic (same name, id ``topic_id``) while the broker runs: their
        partition.metadata hold that id. Its replicas fetch with it from leaders holding another one
        (INCONSISTENT_TOPIC_ID on Fetch v13, IBP >= 3.1) and drop out of the ISR."""
        topic = self.topic(topic_name)
        for d in self.replica_dirs(topic_name, broker_id):
            d.topic_id = topic_id
            d.metadata_file = True
            part = topic.partitions[d.partition]
            if part.leader != broker_id and broker_id in part.isr:
                self._bump_state(part, leader=part.leader, isr=[r for r in part.isr if r != broker_id])
        self.history.append(
            f"{topic_name}: broker {broker_id}'s directories restored from an incarnation with id {topic_id}"
        )
        self.tick()

    def controller_failover(self, new_controller: int | None = None) -> None:
        """The controller moves: epoch +1, every topic without topic_id gets a NEW random id.

        Replicas that already hold an id keep it (the file is never overwritten), so they now
        disagree with ZooKeeper (INCONSISTENT_TOPIC_ID, KAFKA-14190); replicas without the file
        adopt the new id from the LeaderAndIsr.
        """
        online = self.zookeeper_broker_ids()
        if new_controller is None:
            new_controller = next(b for b in online if b != self.controller_id)
        self._become_controller(new_controller)

    def elect_controller(self, broker_id: int | None = None) -> int:
        """What follows a deletion of ``/controller``: every live broker races to create it
        (``KafkaController.elect``, 3.3.1); the simulator lets the lowest online id win (it may be
        the previous controller). The winner initialises its context like any new controller."""
        online = self.zookeeper_broker_ids()
        if not online:
            raise SimulationError("no broker online to become controller")
        winner = broker_id if broker_id is not None else online[0]
        self._become_controller(winner)
        return winner

    def _become_controller(self, new_controller: int) -> None:
        online = self.zookeeper_broker_ids()
        if new_controller not in online:
            raise SimulationError(f"broker {new_controller} is not online and cannot become controller")
        previous = self.controller_id
        self.controller_id = new_controller
        self.controller_epoch += 1
        self.controller_epoch_version += 1
        self.controller_elected_at_ms = self.tick()
        self.history.append(
            f"controller failover {previous} -> {new_controller} (epoch {self.controller_epoch})"
        )
        if not self.uses_topic_ids:
            return
        for topic in self.topics.values():
            if topic.zk_topic_id is None:
                old = topic.controller_topic_id
                topic.zk_topic_id = self._new_topic_id()
                topic.znode_format = 3
                topic.znode_version += 1
                self.history.append(
                    f"{topic.name}: new controller minted topic_id {topic.zk_topic_id} (was {old})"
                )
                self.incidents = [
                    i
                    for i in self.incidents
                    if not (i.kind == "topic_id_missing_in_zookeeper" and i.topic == topic.name)
                ]
            topic.controller_topic_id = topic.zk_topic_id
        if ibp_sends_topic_ids(self.spec.ibp):
            self._send_leader_and_isr_everywhere()

    def _send_leader_and_isr_everywhere(self) -> None:
        self._send_leader_and_isr(self.online_broker_ids())

    def _send_leader_and_isr(self, brokers: Iterable[int]) -> None:
        """LeaderAndIsr to ``brokers`` for their replicas, with the controller's in-memory ids.

        A replica without an id adopts the request's (file written); one with another id skips the
        partition (``ReplicaManager.hasConsistentTopicId``, 3.3.1): it neither leads nor follows, so
        it stays out of the ISR. A consistent follower on a running broker catches up and rejoins
        the ISR. A partition without a leader whose ISR holds the broker gets it as leader again
        (``onBrokerStartup`` -> ``triggerOnlinePartitionStateChange``: the election looks at
        liveness and the ISR, not at ids), so a broker that then skips the request is leader in
        ZooKeeper and serves nothing (``rejected``; the controller ignores INCONSISTENT_TOPIC_ID in
        the response). A replica in a log dir that went offline at start answers
        KAFKA_STORAGE_ERROR: the controller marks it offline and elects nobody on it.
        """
        targets = set(brokers)
        sends_ids = ibp_sends_topic_ids(self.spec.ibp)
        mismatched: dict[tuple[str, int], set[int]] = {}
        accepted: list[ReplicaDir] = []
        for d in self.dirs:  # first every broker answers (ids checked, elections of skipped replicas)
            if (
                d.kind is not DirKind.NORMAL
                or d.broker_id not in targets
                or not self.brokers[d.broker_id].online
                or d.topic not in self.topics
                or d.offline
            ):
                continue
            topic = self.topics[d.topic]
            part = topic.partitions.get(d.partition)
            request_id = topic.controller_topic_id if sends_ids else None
            if request_id is not None:
                if d.topic_id is None:
                    d.topic_id = request_id
                    d.metadata_file = True
                elif d.topic_id != request_id:
                    mismatched.setdefault((d.topic, d.broker_id), set()).add(d.partition)
                    if part is not None and part.leader == -1 and d.broker_id in part.isr:
                        # elected (the election does not look at ids), then the request is skipped
                        self._bump_state(part, leader=d.broker_id, isr=part.isr)
                        part.rejected.add(d.broker_id)
                    continue
            if part is None or d.broker_id not in part.replicas or d.broker_id in part.adding:
                continue  # (a reassignment's new replica joins the ISR when it has caught up)
            part.rejected.discard(d.broker_id)
            accepted.append(d)
        for d in accepted:  # then leaders lead and followers of a serving leader catch up
            part = self.topics[d.topic].partitions[d.partition]
            if part.leader == -1 and d.broker_id in part.isr:
                self._bump_state(part, leader=d.broker_id, isr=part.isr)
                self._leader_epoch_started(d.topic, d.partition, d.broker_id, part.leader_epoch)
            elif part.leader != -1 and d.broker_id not in part.isr and part.leader not in part.rejected:
                self._bump_state(part, leader=part.leader, isr=[*part.isr, d.broker_id])
        self._refresh_topic_id_incidents()
        for (topic, broker_id), partitions in sorted(mismatched.items()):
            known = any(
                i.kind == "topic_id_mismatch" and i.topic == topic and i.broker_id == broker_id
                for i in self.incidents
            )
            if not known:
                self.incidents.append(
                    Incident(
                        "topic_id_mismatch",
                        topic=topic,
                        broker_id=broker_id,
                        partitions=tuple(sorted(partitions)),
                        detail=f"zookeeper={self.topics[topic].zk_topic_id}",
                    )
                )

    def _rejects(self, broker_id: int, topic_name: str, partition: int) -> bool:
        """Whether ``broker_id`` would skip a LeaderAndIsr for this partition (another id, or offline)."""
        topic = self.topics[topic_name]
        request_id = topic.controller_topic_id if ibp_sends_topic_ids(self.spec.ibp) else None
        for d in self.replica_dirs(topic_name, broker_id):
            if d.partition == partition:
                if d.offline:
                    return True
                return request_id is not None and d.topic_id is not None and d.topic_id != request_id
        return False

    def serving_leader(self, topic_name: str, partition: int) -> int | None:
        """The broker actually serving the partition as leader, None when nobody does: no leader in
        ZooKeeper, a stopped one, or one that skipped the LeaderAndIsr naming it (ground truth for
        tests: ZooKeeper may name a leader that serves nothing)."""
        part = self.topic(topic_name).partitions[partition]
        leader = part.leader
        if leader < 0 or not self.brokers[leader].online or leader in part.rejected:
            return None
        if any(d.partition == partition and d.offline for d in self.replica_dirs(topic_name, leader)):
            return None
        return leader

    def unserved_partitions(self) -> list[tuple[str, int]]:
        """Every partition nobody serves as leader right now (see :meth:`serving_leader`)."""
        return [
            (name, p)
            for name, topic in sorted(self.topics.items())
            for p in sorted(topic.partitions)
            if self.serving_leader(name, p) is None
        ]

    def _refresh_topic_id_incidents(self) -> None:
        """Drop the topic-id incidents that no longer hold (a repair healed them)."""

        def holds(i: Incident) -> bool:
            if i.kind not in ("topic_id_missing_in_zookeeper", "topic_id_mismatch"):
                return True
            topic = self.topics.get(i.topic or "")
            if topic is None:
                return False
            if i.kind == "topic_id_missing_in_zookeeper":
                return topic.zk_topic_id is None
            if i.kind == "topic_id_mismatch":
                return any(
                    d.topic_id is not None and d.topic_id != topic.zk_topic_id
                    for d in self.replica_dirs(i.topic, i.broker_id)
                )
            return True

        self.incidents = [i for i in self.incidents if holds(i)]

    def adopt_topic_znode(self, topic_name: str, *, topic_id: KafkaUuid | None, format_version: int) -> None:
        """A tool rewrote ``/brokers/topics/<t>`` with the same partitions (e.g. a topicId repair).

        The running controller's PartitionModifications handler does not reload topic ids
        (``KafkaController.processPartitionModifications``, 3.3.1): only ZooKeeper changes until the
        controller moves.
        """
        topic = self.topic(topic_name)
        topic.zk_topic_id = topic_id
        topic.znode_format = format_version
        topic.znode_version += 1
        self.history.append(
            f"{topic_name}: the topic znode was rewritten from outside (format v{format_version}, "
            f"topic_id {topic_id or 'none'}); the controller keeps {topic.controller_topic_id} in memory"
        )
        self._refresh_topic_id_incidents()
        self.tick()

    # ------------------------------------------------------------------ brokers
    def start_broker(self, broker_id: int) -> None:
        """A stopped broker starts: loads its logs, registers, and the controller sends it LeaderAndIsr.

        At load a log without partition.metadata has no id, and a missing leader-epoch-checkpoint
        is created empty (``UnifiedLog``/``LeaderEpochFileCache``, 3.3.1). An unreadable
        partition.metadata takes its whole log dir offline (``PartitionMetadataFile.read`` ->
        ``maybeAddOfflineLogDir``): the replicas there serve nothing; with every log dir offline
        the broker shuts down instead of registering (``LogManager``: "all log dirs ... have failed").
        """
        broker = self.broker(broker_id)
        if broker.online:
            raise SimulationError(f"broker {broker_id} is already running")
        mine = self.replica_dirs(broker_id=broker_id, kind=None)
        offline_dirs = {d.log_dir_index for d in mine if d.metadata_unreadable}
        for d in mine:
            d.offline = d.log_dir_index in offline_dirs
            if not d.metadata_file:
                d.topic_id = None
            if not d.epoch_file:
                d.leader_epochs = []
                d.epoch_file = True
        if offline_dirs and len(offline_dirs) >= broker.spec.log_dir_count:
            self.tick()
            self.history.append(
                f"broker {broker_id} did not start: every log dir went offline (unreadable partition.metadata)"
            )
            self.incidents.append(
                Incident("broker_failed_start", broker_id=broker_id, detail="all log dirs offline")
            )
            return
        broker.online = True
        broker.clean_shutdown = False
        # the registration's timestamp is the broker's own clock at its start (BrokerIdZNode.encode:
        # Time.SYSTEM.milliseconds, 3.3.1): the wall clock, however far the model's clock lags
        broker.registered_at_ms = max(self.tick(), int(time.time() * 1000))
        self.history.append(
            f"broker {broker_id} started and registered"
            + (
                f"; log dir(s) {sorted(offline_dirs)} offline (unreadable partition.metadata)"
                if offline_dirs
                else ""
            )
        )
        self.incidents = [
            i for i in self.incidents if not (i.broker_id == broker_id and i.kind == "unclean_shutdown")
        ]
        if self.no_controller_acts:
            return  # nobody sends it LeaderAndIsr: it serves nothing until a controller acts
        self._send_leader_and_isr([broker_id])
        self.incidents = [
            i for i in self.incidents if not (i.kind == "offline_partitions" and i.broker_id == broker_id)
        ]
        for topic in self.topics.values():
            offline = tuple(
                sorted(
                    p
                    for p, part in topic.partitions.items()
                    if broker_id in part.replicas and self.serving_leader(topic.name, p) is None
                )
            )
            if offline:
                self.incidents.append(
                    Incident("offline_partitions", topic=topic.name, broker_id=broker_id, partitions=offline)
                )
        self._resume_topic_deletions(broker_id)

    def damage_partition_metadata(self, broker_id: int, topic_name: str, partition: int) -> None:
        """One replica's partition.metadata becomes unreadable on disk (a torn write, a bad sector).

        The running broker keeps the id it loaded; its next start takes that log dir offline."""
        for d in self.replica_dirs(topic_name, broker_id):
            if d.partition == partition:
                d.metadata_unreadable = True
                self.incidents.append(
                    Incident(
                        "partition_metadata_unreadable",
                        topic=topic_name,
                        broker_id=broker_id,
                        partitions=(partition,),
                    )
                )
                self.history.append(
                    f"{topic_name}-{partition} on broker {broker_id}: partition.metadata damaged"
                )
                return
        raise SimulationError(f"broker {broker_id} holds no replica of {topic_name}-{partition}")

    def restart_broker(self, broker_id: int) -> None:
        """``systemctl restart kafka``: a controlled shutdown, then a start."""
        self.stop_broker(broker_id, clean=True)
        self.start_broker(broker_id)

    def stop_broker(self, broker_id: int, *, clean: bool = True) -> None:
        """Broker stops (clean: controlled shutdown, marker written; unclean: crash, no marker).

        The controller moves leadership to another in-sync replica; a partition whose only
        in-sync replica was this broker (every RF=1 partition) goes offline with leader -1 and
        keeps the dead broker in its ISR, as a real 3.3.1 cluster showed.
        """
        broker = self.broker(broker_id)
        if not broker.online:
            raise SimulationError(f"broker {broker_id} is already stopped")
        broker.online = False
        broker.clean_shutdown = clean
        self.tick()
        if self.no_controller_acts:
            # /controller names a stopped KRaft controller: nobody elects, ZooKeeper keeps this broker as
            # leader of partitions it no longer serves
            self.history.append(
                f"broker {broker_id} stopped; no controller acts (/controller names a stopped KRaft controller)"
            )
            if not clean:
                self.incidents.append(Incident("unclean_shutdown", broker_id=broker_id))
            return
        offline: dict[str, list[int]] = {}
        for topic in self.topics.values():
            for p, part in topic.partitions.items():
                if broker_id not in part.replicas:
                    continue
                if part.leader == broker_id:
                    # the first live in-sync replica in assignment order (Controlled/Offline
                    # PartitionLeaderElectionStrategy, 3.3.1)
                    successor = next(
                        (
                            r
                            for r in part.replicas
                            if r != broker_id and r in part.isr and self.brokers[r].online
                        ),
                        None,
                    )
                    if successor is None:
                        self._bump_state(part, leader=-1, isr=part.isr)
                        offline.setdefault(topic.name, []).append(p)
                    else:
                        # ControlledShutdownPartitionLeaderElectionStrategy: the successor gets a
                        # LeaderAndIsr with the controller's id; one holding another id skips it
                        self._bump_state(part, leader=successor, isr=[r for r in part.isr if r != broker_id])
                        if self._rejects(successor, topic.name, p):
                            part.rejected.add(successor)
                        else:
                            part.rejected.discard(successor)
                            self._leader_epoch_started(topic.name, p, successor, part.leader_epoch)
                elif broker_id in part.isr and part.leader != -1:
                    self._bump_state(part, leader=part.leader, isr=[r for r in part.isr if r != broker_id])
        how = "cleanly (controlled shutdown)" if clean else "uncleanly (crash, no clean-shutdown marker)"
        self.history.append(f"broker {broker_id} stopped {how}")
        for topic_name, partitions in sorted(offline.items()):
            self.incidents.append(
                Incident(
                    "offline_partitions", topic=topic_name, broker_id=broker_id, partitions=tuple(partitions)
                )
            )
        if not clean:
            self.incidents.append(Incident("unclean_shutdown", broker_id=broker_id))
        if self.controller_id == broker_id and not self.kraft_controller_active:
            self.controller_failover()

    # ------------------------------------------------------------------ leadership
    def preferred_replica_election(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str]:
        """What the controller does with ``/admin/preferred_replica_election`` (``KafkaController.
        processReplicaLeaderElection`` with ``PreferredReplicaPartitionLeaderElectionStrategy``, 3.3.1).

        Unknown partitions and topics queued for deletion are skipped; a partition already led by its
        first replica needs no election; otherwise it moves only when that replica is alive and in
        the ISR: leader epoch +1, ISR unchanged. Returns each partition's outcome (``elected``,
        ``not_needed``, ``unknown``, ``deleting``, ``preferred_unavailable``); the caller deletes the
        znode whatever the outcome, as Kafka does.
        """
        outcome: dict[tuple[str, int], str] = {}
        for topic_name, p in partitions:
            topic = self.topics.get(topic_name)
            part = None if topic is None else topic.partitions.get(p)
            if part is None:
                outcome[(topic_name, p)] = "unknown"
            elif topic_name in self.delete_markers:
                outcome[(topic_name, p)] = "deleting"
            elif part.leader == part.replicas[0]:
                outcome[(topic_name, p)] = "not_needed"
            elif self.brokers[part.replicas[0]].online and part.replicas[0] in part.isr:
                preferred = part.replicas[0]
                self._bump_state(part, leader=preferred, isr=part.isr)
                self._leader_epoch_started(topic_name, p, preferred, part.leader_epoch)
                outcome[(topic_name, p)] = "elected"
            else:
                outcome[(topic_name, p)] = "preferred_unavailable"
        self.incidents = [
            i
            for i in self.incidents
            if not (i.kind == "leader_imbalance" and self._leads_its_preferred(i.broker_id))
        ]
        elected = sum(1 for v in outcome.values() if v == "elected")
        self.history.append(f"preferred replica election: {elected} of {len(outcome)} partition(s) moved")
        self.tick()
        return outcome

    def auto_leader_rebalance(self, imbalance_percent: int = 10) -> list[tuple[str, int]]:
        """One run of the controller's automatic rebalance (``KafkaController.
        checkAndTriggerAutoLeaderRebalance``, 3.3.1; every ``leader.imbalance.check.interval.seconds``
        while ``auto.leader.rebalance.enable`` is on -- the caller decides when it runs).

        Partitions of topics not queued for deletion are grouped by their preferred (first) replica;
        for a broker whose share not led by it is above ``imbalance_percent``/100, the partitions with
        no reassignment in flight anywhere and whose preferred replica is alive and in the ISR
        (``canPreferredReplicaBeLeader``) get it as leader (epoch +1, ISR unchanged). Returns the
        partitions elected; ``controller_log`` gets the lines Kafka's controller.log shows.
        """
        self.controller_log.append("Processing automatic preferred replica leader election")
        groups: dict[int, list[tuple[str, int]]] = {}
        for topic in self.topics.values():
            if topic.name in self.delete_markers:
                continue
            for p, part in topic.partitions.items():
                if part.replicas:
                    groups.setdefault(part.replicas[0], []).append((topic.name, p))
        reassigning = bool(self.reassignment) or any(
            part.adding or part.removing for t in self.topics.values() for part in t.partitions.values()
        )
        elected: list[tuple[str, int]] = []
        for broker_id, keys in sorted(groups.items()):
            not_leading = [(t, p) for t, p in keys if self.topics[t].partitions[p].leader != broker_id]
            if not len(not_leading) / len(keys) > imbalance_percent / 100:
                continue
            candidates = [
                (t, p)
                for t, p in not_leading
                if not reassigning
                and self.brokers[broker_id].online
                and broker_id in self.topics[t].partitions[p].isr
            ]
            self.controller_log.append(
                "Starting replica leader election (PREFERRED) for partitions "
                f"{','.join(f'{t}-{p}' for t, p in candidates)} triggered by AutoTriggered"
            )
            for t, p in candidates:
                part = self.topics[t].partitions[p]
                self._bump_state(part, leader=broker_id, isr=part.isr)
                self._leader_epoch_started(t, p, broker_id, part.leader_epoch)
                elected.append((t, p))
        self.incidents = [
            i
            for i in self.incidents
            if not (i.kind == "leader_imbalance" and self._leads_its_preferred(i.broker_id))
        ]
        self.history.append(f"automatic preferred leader election: {len(elected)} partition(s) moved")
        self.tick()
        return elected

    def _leads_its_preferred(self, broker_id: int | None) -> bool:
        return all(
            part.leader == broker_id
            for topic in self.topics.values()
            for part in topic.partitions.values()
            if part.replicas and part.replicas[0] == broker_id
        )

    # ------------------------------------------------------------------ deletion
    def delete_topic(self, topic_name: str, *, leave_delete_dirs: bool = False) -> None:
        """``kafka-topics --delete``: the marker, then whatever Kafka's controller does with it."""
        topic = self.topic(topic_name)
        self.tick()
        if not self.spec.delete_topic_enable:
            self.history.append(
                f"{topic_name}: deletion requested through ZooKeeper; delete.topic.enable=false so the "
                "controller removed the marker and kept the topic"
            )
            self.incidents.append(
                Incident("deletion_ignored", topic=topic_name, detail="delete.topic.enable=false")
            )
            return
        self.delete_markers.add(topic_name)
        if leave_delete_dirs:
            self._deletions_leaving_delete_dirs.add(topic_name)
        offline_replicas = sorted(
            {r for part in topic.partitions.values() for r in part.replicas if not self.brokers[r].online}
        )
        reassigning = any(part.adding or part.removing for part in topic.partitions.values()) or any(
            t == topic_name for t, _, _ in self.reassignment
        )
        if reassigning:
            self.history.append(f"{topic_name}: marked for deletion; paused: a reassignment is in progress")
            self.incidents.append(
                Incident("deletion_stuck", topic=topic_name, detail="reassignment_in_progress")
            )
            return
        if offline_replicas:
            for part in topic.partitions.values():
                self._bump_state(part, leader=-1, isr=part.isr)
            self._delete_live_replicas(topic_name, leave_delete_dirs)
            self.history.append(
                f"{topic_name}: marked for deletion; paused: replica broker(s) {offline_replicas} offline; "
                "live replicas deleted, znodes kept"
            )
            self.incidents.append(
                Incident(
                    "deletion_stuck",
                    topic=topic_name,
                    broker_id=offline_replicas[0],
                    detail="replica_broker_offline",
                )
            )
            return
        self._complete_deletion(topic_name, leave_delete_dirs)

    def _complete_deletion(self, topic_name: str, leave_delete_dirs: bool) -> None:
        """Every replica confirmed StopReplica(delete): the controller's ``completeDeleteTopic`` removes
        the topic tree, then ``/config/topics/<t>``, then the marker (TopicDeletionManager, 3.3.1)."""
        self._delete_live_replicas(topic_name, leave_delete_dirs)
        del self.topics[topic_name]
        self.delete_markers.discard(topic_name)
        self._deletions_leaving_delete_dirs.discard(topic_name)
        self.incidents = [
            i for i in self.incidents if not (i.kind == "deletion_stuck" and i.topic == topic_name)
        ]
        self.history.append(
            f"{topic_name}: deleted (znodes removed; {'-delete dirs pending' if leave_delete_dirs else 'dirs removed'})"
        )

    def _resume_topic_deletions(self, broker_id: int) -> list[str]:
        """A broker holding replicas of topics queued for deletion started: the controller resumes them.

        ``KafkaController.onBrokerStartup`` (3.3.1): "Some replicas ... for topics scheduled for
        deletion ... are on the newly restarted brokers ... Signaling restart of topic deletion for
        these topics" -> ``TopicDeletionManager.resumeDeletionForTopics``. A topic still has to be
        eligible: no other replica broker offline, no reassignment of it. Its replicas then get
        StopReplica(delete) and, all confirmed, ZooKeeper is cleaned (on a real 3.3.1 cluster 1.6 s
        after the broker registered; its ``-delete`` directories went 60 s later).
        """
        resumed = []
        for name in sorted(self.delete_markers):
            topic = self.topics.get(name)
            if topic is None or not any(broker_id in p.replicas for p in topic.partitions.values()):
                continue
            if any(not self.brokers[r].online for p in topic.partitions.values() for r in p.replicas):
                continue
            if any(p.adding or p.removing for p in topic.partitions.values()) or any(
                t == name for t, _, _ in self.reassignment
            ):
                continue
            self.history.append(f"{name}: deletion resumed: broker {broker_id} holding its replicas started")
            self._complete_deletion(name, name in self._deletions_leaving_delete_dirs)
            resumed.append(name)
        return resumed

    def _delete_live_replicas(self, topic_name: str, leave_delete_dirs: bool) -> None:
        self._delete_dirs(
            lambda d: d.topic == topic_name and d.kind is DirKind.NORMAL and self.brokers[d.broker_id].online,
            leave_delete_dirs,
        )

    def _delete_dirs(self, selected: Callable[[ReplicaDir], bool], leave_delete_dirs: bool) -> None:
        """StopReplica(delete): the broker renames the dir ``<t>-<p>.<32hex>-delete``, removed after the delay."""
        kept: list[ReplicaDir] = []
        for d in self.dirs:
            if not selected(d):
                kept.append(d)
            elif leave_delete_dirs:
                kept.append(
                    replace(
                        d, kind=DirKind.DELETE, unique_id=self.rng.randbytes(16).hex(), mtime_ms=self.clock_ms
                    )
                )
        self.dirs = kept

    def leave_leftover_dirs(
        self,
        topic_name: str,
        broker_id: int,
        partitions: Iterable[int],
        *,
        kind: DirKind,
        age_ms: int,
        topic_id: KafkaUuid | None = None,
    ) -> None:
        """Directories of a topic ZooKeeper no longer knows, left on a broker (restored disk, failed delete)."""
        if topic_name in self.topics:
            raise SimulationError(f"{topic_name} still exists; leftovers are for deleted topics")
        if kind is DirKind.STRAY and not has_stray_dirs(self.spec.release):
            raise SimulationError(f"Kafka {self.spec.release} has no -stray directories (3.6.1+)")
        broker = self.broker(broker_id)
        partitions = tuple(partitions)
        for p in partitions:
            self.dirs.append(
                ReplicaDir(
                    broker_id=broker_id,
                    log_dir_index=hash_partition(topic_name, p) % broker.spec.log_dir_count,
                    topic=topic_name,
                    partition=p,
                    topic_id=topic_id,
                    records=50,
                    record_value_bytes=100,
                    records_per_batch=10,
                    segment_bytes=self.spec.segment_bytes,
                    leader_epochs=[(0, 0)],
                    mtime_ms=self.clock_ms - age_ms,
                    kind=kind,
                    unique_id=self.rng.randbytes(16).hex() if kind is not DirKind.NORMAL else None,
                    delete_fails=kind is DirKind.DELETE,  # a leftover: Kafka's own delete failed
                )
            )
        self.incidents.append(
            Incident(
                "leftover_dirs",
                topic=topic_name,
                broker_id=broker_id,
                partitions=partitions,
                detail=kind.name.lower(),
            )
        )
        self.history.append(f"{topic_name}: {kind.name.lower()} directories left on broker {broker_id}")

    # ------------------------------------------------------------------ reassignment
    def start_reassignment(
        self, moves: dict[tuple[str, int], tuple[int, ...]], *, through_admin_api: bool = False
    ) -> None:
        """Create /admin/reassign_partitions; the 2.4+ controller writes adding/removing replicas first (U1).

        ``through_admin_api``: ``kafka-reassign-partitions`` of 2.4+ (``alterPartitionReassignments``;
        the only way through a KRaft controller) writes no ``/admin/reassign_partitions``: the topic
        znode's adding/removing replicas are all ZooKeeper shows."""
        for (topic_name, p), target in moves.items():
            part = self.topic(topic_name).partitions[p]
            origin = list(part.replicas)
            full = list(dict.fromkeys([*target, *origin]))
            part.adding = [r for r in full if r not in origin]
            part.removing = [r for r in full if r not in target]
            part.replicas = full
            self._bump_state(part, leader=part.leader, isr=part.isr)
            topic = self.topics[topic_name]
            topic.znode_version += 1
            for b in part.adding:
                replica = self._new_replica_dir(topic, p, b, 0)
                replica.topic_id = topic.controller_topic_id if self.uses_topic_ids else None
                self.dirs.append(replica)
            if not through_admin_api:
                self.reassignment.append((topic_name, p, tuple(target)))
        self.history.append(f"reassignment started for {len(moves)} partition(s)")
        self.tick()

    def catch_up_reassignment(self, topic_name: str, partition: int) -> bool:
        """The adding replicas fetch the data and join the ISR (only those on live brokers)."""
        topic = self.topic(topic_name)
        part = topic.partitions[partition]
        source = next(
            (d for d in self.replica_dirs(topic_name, part.leader) if d.partition == partition), None
        )
        joined = False
        for broker_id in part.adding:
            if not self.brokers[broker_id].online or broker_id in part.isr:
                continue
            for d in self.replica_dirs(topic_name, broker_id):
                if d.partition == partition and source is not None:
                    d.records = source.records
                    d.leader_epochs = list(source.leader_epochs)
                    d.mtime_ms = self.tick(10)
            self._bump_state(part, leader=part.leader, isr=[*part.isr, broker_id])
            joined = True
        return joined

    def complete_reassignment(
        self, topic_name: str, partition: int, *, keep_delete_dirs: bool = False
    ) -> bool:
        """Finish one partition as Kafka's controller does once every target replica is in the ISR.

        Leader moved if it is not a live target replica; removed replicas leave the ISR and their
        directories are renamed ``-delete`` (removed after the delete delay); the topic znode gets
        the target with empty adding/removing; the entry leaves /admin/reassign_partitions.
        Returns False (and changes nothing) while a target replica is not in the ISR yet.
        """
        topic = self.topic(topic_name)
        part = topic.partitions[partition]
        target = [r for r in part.replicas if r not in part.removing]
        if not set(target) <= set(part.isr):
            return False
        isr = [r for r in part.isr if r in target]
        previous_leader = leader = part.leader
        if leader not in target or not self.brokers[leader].online:
            leader = next((r for r in target if r in isr and self.brokers[r].online), -1)
        self._bump_state(part, leader=leader, isr=isr)
        if leader not in (-1, previous_leader):
            self._leader_epoch_started(topic_name, partition, leader, part.leader_epoch)
        removed = set(part.removing)
        self._delete_dirs(
            lambda d: (
                d.topic == topic_name
                and d.partition == partition
                and d.kind is DirKind.NORMAL
                and d.broker_id in removed
            ),
            keep_delete_dirs,
        )
        part.replicas = target
        part.adding, part.removing = [], []
        topic.znode_version += 1
        self.reassignment = [e for e in self.reassignment if (e[0], e[1]) != (topic_name, partition)]
        self.history.append(f"{topic_name}-{partition}: reassignment to {target} completed")
        self.tick()
        return True

    # ------------------------------------------------------------------ disks
    def corrupt_offset_index(self, broker_id: int, topic_name: str, partition: int) -> None:
        """Make one replica's offset index non-monotonic: the broker will not restart cleanly on it."""
        for d in self.replica_dirs(topic_name, broker_id):
            if d.partition == partition:
                d.corrupt_offset_index = True
                self.incidents.append(
                    Incident(
                        "corrupt_offset_index", topic=topic_name, broker_id=broker_id, partitions=(partition,)
                    )
                )
                self.history.append(
                    f"{topic_name}-{partition} on broker {broker_id}: offset index made non-monotonic"
                )
                return
        raise SimulationError(f"broker {broker_id} holds no replica of {topic_name}-{partition}")

    # ------------------------------------------------------------------ KRaft migration
    # Kafka 3.9.0-rc3 sources for what follows: metadata/.../migration/KRaftMigrationDriver.java (the
    # driver's states and each write it makes), core/src/main/scala/kafka/zk/KafkaZkClient.scala
    # (getOrCreateMigrationState, tryRegisterKRaftControllerAsActiveController, updateMigrationState,
    # retryMigrationRequestsUntilConnected), core/src/main/scala/kafka/zk/migration/
    # ZkTopicMigrationClient.scala (the dual-writes of topics and partition states), docs/ops.html
    # ("ZooKeeper to KRaft Migration": broker settings, rollback).

    @property
    def kraft_controller_active(self) -> bool:
        """A KRaft controller holds ``/controller``: it, not a ZooKeeper-mode broker, writes the metadata."""
        return self.kraft_migration is not None and self.kraft_migration.claimed

    @property
    def no_controller_acts(self) -> bool:
        """``/controller`` names a KRaft controller that is stopped (a rollback between "Deprovision the
        KRaft controller quorum" and the deletion of ``/controller``): nothing elects or writes."""
        migration = self.kraft_migration
        return migration is not None and migration.claimed and not migration.controllers_running

    def _writing_controller_epoch(self) -> int:
        """The ``controller_epoch`` a partition state write carries: the ZooKeeper controller's epoch,
        or while a KRaft controller migrates, its KRaft epoch (``ZkTopicMigrationClient.
        partitionStatePathAndData`` passes ``state.kraftControllerEpoch()``)."""
        migration = self.kraft_migration
        if migration is not None and migration.claimed:
            return migration.kraft_controller_epoch
        return self.controller_epoch

    def _dual_write(self, records: int = 1) -> None:
        """One KRaft metadata delta written to ZooKeeper during the dual-write: the writes go as a multi
        that sets ``/migration`` conditionally (``retryMigrationRequestsUntilConnected``), then the driver
        records the new offset there ("Updated ZK migration state after delta"): two versions."""
        migration = self.kraft_migration
        if (
            migration is None
            or not migration.claimed
            or not migration.metadata_migrated
            or migration.finalized
        ):
            return
        self.kraft_migration = replace(
            migration,
            kraft_metadata_offset=migration.kraft_metadata_offset + records,
            zk_version=migration.zk_version + 2,
        )

    def kraft_controller_idles(self, seconds: float) -> int:
        """Time passes with nothing to migrate: the active KRaft controller still appends a NoOpRecord every
        ``metadata.max.idle.interval.ms`` (500 ms, ``QuorumController.maybeScheduleNextWriteNoOpRecord``),
        and in dual-write every metadata delta it loads ends with "Updated ZK migration state after delta"
        (``KRaftMigrationDriver``, 3.9.0-rc3): ``/migration``'s offset and zkVersion grow about twice a
        second while nothing else in ZooKeeper changes (the recording: +7 in the ~4 s between the last
        rollback roll's snapshot and the controller's stop). Returns the number of deltas."""
        migration = self.kraft_migration
        if migration is None or not migration.claimed or not migration.controllers_running:
            return 0
        if migration.finalized:  # POST_MIGRATION: the controllers no longer write ZooKeeper
            self.tick(int(seconds * 1000))
            return 0
        deltas = int(seconds * 1000) // METADATA_MAX_IDLE_INTERVAL_MS
        if migration.metadata_migrated and deltas:
            self.kraft_migration = replace(
                migration,
                kraft_metadata_offset=migration.kraft_metadata_offset + deltas,
                zk_version=migration.zk_version + deltas,
            )
        self.tick(int(seconds * 1000))
        return deltas

    def _require_migration_support(self) -> None:
        if not supports_kraft_migration(self.spec.release):
            raise SimulationError(f"Kafka {self.spec.release} cannot migrate to KRaft (3.4+)")
        if self.spec.ibp < KafkaVersion(3, 4):
            raise SimulationError(
                f"IBP {self.spec.ibp}: a migration needs inter.broker.protocol.version >= 3.4"
            )

    def set_broker_properties(self, broker_id: int, changes: Mapping[str, str | None]) -> None:
        """Change broker ``broker_id``'s server.properties (None removes the key), as an operator edits
        the file before a restart."""
        broker = self.broker(broker_id)
        broker.properties.update(changes)
        broker.server_properties_text = None
        self.history.append(f"broker {broker_id}: server.properties {sorted(changes)} changed")

    def kraft_controller_address(self, node_id: int, port: int = KRAFT_CONTROLLER_PORT) -> str:
        """Where KRaft controller ``node_id`` listens: the i-th of the quorum on loopback host
        127.0.1.<i+1> (one host each, as the brokers' 127.0.0.x)."""
        migration = self.kraft_migration
        nodes = (
            migration.controller_node_ids if migration is not None and migration.controller_node_ids else ()
        )
        index = nodes.index(node_id) if node_id in nodes else 0
        return f"127.0.1.{index + 1}:{port}"

    def migration_properties(
        self, controller_node_ids: Iterable[int], port: int = KRAFT_CONTROLLER_PORT
    ) -> dict[str, str]:
        """What "Enter Migration Mode on the Brokers" (docs/ops.html, 3.9) adds to a ZK broker's
        server.properties, as the recorded 3.9.0 migration wrote it (tests/fixtures/real-kafka-3.9-migration/
        config/broker-0.mig.properties): the controller listener in the security protocol map, the
        quorum's bootstrap servers (3.9's dynamic quorum, ``kafka-storage format --standalone``), the
        controller listener name and the migration flag."""
        bootstrap = ",".join(f"127.0.1.{i + 1}:{port}" for i, _ in enumerate(controller_node_ids))
        return {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": bootstrap,
            "controller.listener.names": "CONTROLLER",
            "zookeeper.metadata.migration.enable": "true",
        }

    @staticmethod
    def kraft_broker_properties(broker_id: int) -> dict[str, str | None]:
        """What "Migrating brokers to KRaft" (docs/ops.html, 3.9) changes on top of the migration-mode
        file, as the recorded migration did (config/broker-0.kraft.properties): ``process.roles=broker``
        and ``node.id`` in, ``broker.id``, the IBP and every ``zookeeper.*`` setting out (None removes);
        the quorum settings stay."""
        return {
            "process.roles": "broker",
            "node.id": str(broker_id),
            "broker.id": None,
            "inter.broker.protocol.version": None,
            "zookeeper.connect": None,
            "zookeeper.connection.timeout.ms": None,
            "zookeeper.metadata.migration.enable": None,
        }

    def provision_kraft_controllers(self, controller_node_ids: Iterable[int] = (3000, 3001, 3002)) -> None:
        """Phase "controllers provisioned": a KRaft quorum formatted with ZooKeeper's cluster id and
        started with ``zookeeper.metadata.migration.enable=true`` (docs/ops.html, "Provisioning the KRaft
        controller quorum"). Its migration driver creates ``/migration`` holding
        ``ZkMigrationLeadershipState.EMPTY`` -- -1 everywhere, zkVersion 0 -- (``RecoverMigrationStateFromZKEvent``
        -> ``getOrCreateMigrationState``; the driver's own "Became active migration driver" state is not
        written) and then waits for every broker to register in migration mode (``WAIT_FOR_BROKERS``); the
        ZooKeeper-mode controller keeps ``/controller`` meanwhile. As the recorded 3.9.0 migration showed
        (zookeeper/01-controller-provisioned.json: one new znode)."""
        self._require_migration_support()
        if self.kraft_migration is not None:
            raise SimulationError("a KRaft quorum already migrates this cluster")
        ids = tuple(controller_node_ids)
        clash = sorted(set(ids) & set(self.brokers))
        if clash:
            raise SimulationError(f"KRaft node ids {clash} are broker ids (docs: they must differ)")
        self.kraft_migration = KraftMigration(
            -1, -1, -1, -1, zk_version=0, claimed=False, controller_node_ids=ids
        )
        self.history.append(f"KRaft controllers {list(ids)} provisioned for migration: /migration created")
        self.tick()

    def kraft_controller_directory_id(self, node_id: int) -> KafkaUuid:
        """The ``directory.id`` ``kafka-storage format`` gave KRaft controller ``node_id``'s metadata log dir
        (random, never reserved; a stream of its own so the cluster's other random values stay)."""
        rng = random.Random(f"{self.spec.seed}/controller-directory/{node_id}")
        while True:
            candidate = KafkaUuid(rng.randbytes(16))
            if not candidate.is_reserved:
                return candidate

    def _directory_ids(self, broker: BrokerModel) -> tuple[KafkaUuid, ...]:
        """Fresh ``directory.id`` values for a broker's log dirs (``MetaPropertiesEnsemble.Copier.
        generateValidDirectoryId``: random, never a reserved one), drawn from a stream of their own so
        the cluster's other random values stay what they were."""
        rng = random.Random(f"{self.spec.seed}/directory/{broker.broker_id}")
        out: list[KafkaUuid] = []
        while len(out) < broker.spec.log_dir_count:
            candidate = KafkaUuid(rng.randbytes(16))
            if not candidate.is_reserved:
                out.append(candidate)
        return tuple(out)

    def roll_broker_into_migration_mode(self, broker_id: int, *, claim: bool = True) -> None:
        """One broker of "Enter Migration Mode on the Brokers": a controlled shutdown, server.properties
        gains :meth:`migration_properties`, then a start in ZooKeeper mode with the migration on.

        At that start ``KafkaServer.startup`` (3.9.0-rc3) gives each log dir's meta.properties a
        ``directory.id`` (kept ``version=0``; kept from then on) and runs a ``KafkaRaftManager`` whose log
        is ``__cluster_metadata-0`` in the first log dir. The broker registers in ``/brokers/ids`` as
        before (same registration format). With ``claim`` and a provisioned quorum waiting, the last
        broker's registration lets the KRaft controller take over (:meth:`begin_kraft_migration`, about
        a second later on the recorded cluster)."""
        broker = self.broker(broker_id)
        migration = self.kraft_migration
        nodes = (
            migration.controller_node_ids
            if migration is not None and migration.controller_node_ids
            else (3000,)
        )
        if broker.kraft_mode:
            raise SimulationError(f"broker {broker_id} runs in KRaft mode: use roll_broker_back_to_zookeeper")
        broker.server_properties_text = None
        if broker.online:
            self.stop_broker(broker_id, clean=True)
        broker.properties.update(self.migration_properties(nodes))
        if not broker.directory_ids and supports_directory_ids(self.spec.release):
            broker.directory_ids = self._directory_ids(broker)
        self.start_broker(broker_id)
        if broker.online:
            self.metadata_log_brokers.add(broker_id)
        self.history.append(f"broker {broker_id} restarted in migration mode")
        if claim:
            self._kraft_controller_claims_when_ready()

    def enter_migration_mode(self, broker_ids: Iterable[int] | None = None, *, claim: bool = True) -> None:
        """Phase "brokers in migration mode": the rolling restart of "Enter Migration Mode on the
        Brokers", one broker at a time (:meth:`roll_broker_into_migration_mode`); leadership moves as
        each broker restarts (no rebalance is simulated afterwards). A broker that is stopped only gets
        the new settings, for its next start. With ``claim`` and a provisioned quorum, the KRaft
        controller takes over once every running broker is in migration mode (the recorded migration's
        zookeeper/02-brokers-in-migration-mode-dual-write.json)."""
        for broker_id in sorted(self.brokers) if broker_ids is None else list(broker_ids):
            broker = self.broker(broker_id)
            if broker.online:
                self.roll_broker_into_migration_mode(broker_id, claim=claim)
            else:
                migration = self.kraft_migration
                nodes = (
                    migration.controller_node_ids
                    if migration is not None and migration.controller_node_ids
                    else (3000,)
                )
                broker.properties.update(self.migration_properties(nodes))
        self.tick()

    def _kraft_controller_claims_when_ready(self) -> None:
        """``KRaftMigrationDriver`` in ``WAIT_FOR_BROKERS`` goes on once every broker registered in
        ZooKeeper is registered with the quorum in migration mode (``areZkBrokersReadyForMigration``,
        3.9.0-rc3): then it claims ``/controller`` and migrates the metadata."""
        migration = self.kraft_migration
        if migration is None or migration.claimed or not migration.controllers_running:
            return
        registered = self.zookeeper_broker_ids()
        if registered and all(
            self.brokers[b].properties.get("zookeeper.metadata.migration.enable") == "true"
            for b in registered
        ):
            nodes = migration.controller_node_ids or (3000,)
            self.begin_kraft_migration(nodes[0], 1)

    def begin_kraft_migration(
        self,
        kraft_controller_id: int = 3000,
        kraft_controller_epoch: int = 1,
        *,
        metadata_migrated: bool = True,
    ) -> None:
        """The active KRaft controller takes over ZooKeeper to migrate (3.4+, KIP-866).

        ``BecomeZkControllerEvent``: ``tryRegisterKRaftControllerAsActiveController`` increments
        ``/controller_epoch`` (SetData, conditional on its version), deletes the ZooKeeper controller's
        ``/controller`` and creates a *persistent* one (v2, ``kraftControllerEpoch`` = its epoch) in one
        multi, so no ZooKeeper broker can win an election; then an unconditional SetData of
        ``/migration`` with its id and epoch. With ``metadata_migrated`` the initial load follows
        (``MigrateMetadataEvent``: every topic, its id included, broker configs, quotas, producer id,
        ACLs, tokens) and ``/migration`` gets the KRaft metadata offset and epoch, then once more after
        the SYNC_KRAFT_TO_ZK snapshot, which also writes every client quota and SCRAM user back
        (``KRaftMigrationZkWriter.handleClientQuotasSnapshot`` takes each entity of the image as changed:
        same data, zkVersion +1, a change notification each); from then on the KRaft controller
        dual-writes its changes into ZooKeeper (:meth:`_dual_write`). Controllers and brokers not
        prepared yet are prepared first (without restarts).
        """
        self._require_migration_support()
        if self.kraft_migration is None:
            self.provision_kraft_controllers((kraft_controller_id,))
        migration = self.kraft_migration
        assert migration is not None
        if migration.claimed:
            raise SimulationError("a KRaft controller already holds /controller")
        if not migration.controllers_running:
            raise SimulationError("the KRaft controllers are stopped")
        for broker in self.brokers.values():
            if broker.properties.get("zookeeper.metadata.migration.enable") != "true":
                broker.properties.update(self.migration_properties(migration.controller_node_ids or (3000,)))
                if broker.online:
                    self.metadata_log_brokers.add(broker.broker_id)
                    if not broker.directory_ids and supports_directory_ids(self.spec.release):
                        broker.directory_ids = self._directory_ids(broker)
        missing = [t.name for t in self.topics.values() if t.zk_topic_id is None]
        if metadata_migrated and missing:
            # ZkTopicMigrationClient.iterateTopics: visitor.visitTopic(topic, topicIdOpt.get, ...) throws
            raise SimulationError(f"topics {missing} have no topic_id: the metadata load would abort")
        self.controller_epoch += 1
        self.controller_epoch_version += 1
        self.controller_elected_at_ms = self.tick()
        zk_version = migration.zk_version + 1  # "Updated migration state": unconditional SetData
        migration = replace(
            migration,
            kraft_controller_id=kraft_controller_id,
            kraft_controller_epoch=kraft_controller_epoch,
            zk_version=zk_version,
            claimed=True,
        )
        self.history.append(
            f"KRaft controller {kraft_controller_id} (epoch {kraft_controller_epoch}) took over /controller "
            f"(ZooKeeper controller epoch now {self.controller_epoch})"
        )
        if metadata_migrated:
            records = sum(1 + len(t.partitions) + len(t.config) for t in self.topics.values())
            # "Finished initial migration of ZK metadata to KRaft", then the SYNC_KRAFT_TO_ZK state write
            migration = replace(
                migration,
                kraft_metadata_offset=records + 1,
                kraft_metadata_epoch=kraft_controller_epoch,
                zk_version=zk_version + 2,
            )
            for topic in self.topics.values():
                # migrated PartitionRecords carry no directories: DirectoryId.MIGRATING for every replica
                # (PartitionRegistration.defaultToMigrating, 3.9.0-rc3)
                topic.migrating_directories = {r for part in topic.partitions.values() for r in part.replicas}
            _, start, _ = self.latest_producer_id_block()
            self._kraft_next_producer_id = start + PRODUCER_ID_BLOCK_SIZE
            self.history.append(f"metadata migrated to KRaft: {records} records, dual-write on")
        self.kraft_migration = migration
        if metadata_migrated:
            for name in sorted(self.client_configs):
                self._write_config_znode("clients", name, self.client_configs[name])
            for name in sorted(self.user_configs):
                self._write_config_znode("users", name, self.user_configs[name])

    def kraft_controller_creates_topic(self, spec: TopicSpec) -> TopicModel:
        """A topic created through the KRaft controller during the dual-write: ``ZkTopicMigrationClient.
        createTopic`` writes the topic znode (v3 with the KRaft topic id), an empty
        ``/config/topics/<t>``, and state znodes carrying the KRaft controller epoch; the topic's
        configs follow in the same delta (``handleConfigsDelta`` -> ``writeConfigs``: SetData, zkVersion
        1, and a change notification), as ``mig-hybrid`` and ``mig-kraft`` of the recorded migration."""
        if not self.kraft_controller_active:
            raise SimulationError("no KRaft controller holds /controller")
        topic = self.create_topic(spec)
        if topic.zk_topic_id is None:  # a migrating cluster's IBP >= 3.4 always has ids; be explicit
            topic.zk_topic_id = topic.controller_topic_id = self._new_topic_id()
        topic.znode_format = 3
        for part in topic.partitions.values():
            part.controller_epoch = self._writing_controller_epoch()
        for d in self.replica_dirs(spec.name):
            d.topic_id = topic.zk_topic_id
        self._dual_write(1 + len(topic.partitions))
        if topic.config:
            self._write_config_znode("topics", spec.name, topic.config)
        return topic

    def roll_broker_to_kraft(self, broker_id: int) -> None:
        """One broker of "Migrating brokers to KRaft" (docs/ops.html, 3.9): a controlled shutdown through
        the KRaft controller, server.properties changed by :meth:`kraft_broker_properties`, a start as a
        KRaft broker. As the recorded migration showed (zookeeper/03-brokers-in-kraft-mode-dual-write.json):

        * its ``/brokers/ids/<id>`` is gone for good: a KRaft broker registers with the quorum only, so
          once every broker is rolled ``/brokers/ids`` is empty while all of them serve;
        * leader and ISR changes of the roll are dual-written with the KRaft epoch;
        * each topic migrated from ZooKeeper with a replica there has its topic znode written again, same
          data: the broker assigns its log dir to replicas that carried ``DirectoryId.MIGRATING``, and
          ``PartitionRegistration.hasSameAssignment`` compares directories, so
          ``KRaftMigrationZkWriter.handleTopicsDelta`` updates the topic (3.9.0-rc3);
        * meta.properties stays ``version=0`` with its ``directory.id``.
        """
        migration = self.kraft_migration
        if migration is None or not migration.claimed or not migration.metadata_migrated:
            raise SimulationError(
                "brokers go to KRaft mode after the KRaft controller migrated the metadata (dual-write)"
            )
        if not migration.controllers_running:
            raise SimulationError("the KRaft controllers are stopped")
        broker = self.broker(broker_id)
        if broker.kraft_mode:
            raise SimulationError(f"broker {broker_id} already runs in KRaft mode")
        broker.server_properties_text = None
        if broker.online:
            self.stop_broker(broker_id, clean=True)
        broker.properties.update(self.kraft_broker_properties(broker_id))
        broker.kraft_mode = True
        if not broker.directory_ids and supports_directory_ids(self.spec.release):
            broker.directory_ids = self._directory_ids(broker)
        self.start_broker(broker_id)
        self.metadata_log_brokers.add(broker_id)
        for topic in self.topics.values():
            if broker_id in topic.migrating_directories:
                topic.migrating_directories.discard(broker_id)
                topic.znode_version += 1
                self._dual_write()
        self.history.append(f"broker {broker_id} restarted in KRaft mode (process.roles=broker)")

    def roll_brokers_to_kraft(self, broker_ids: Iterable[int] | None = None) -> None:
        """Phase "dual-write with KRaft brokers": :meth:`roll_broker_to_kraft` for each broker in turn."""
        for broker_id in sorted(self.brokers) if broker_ids is None else list(broker_ids):
            self.roll_broker_to_kraft(broker_id)
        self.tick()

    def roll_broker_back_to_zookeeper(self, broker_id: int) -> None:
        """Rollback, first roll (docs/ops.html 3.9, "Reverting to ZooKeeper mode During the Migration",
        row "Migrating brokers to KRaft"): a KRaft broker restarted with its ZooKeeper-mode settings and
        the migration flag still on (the recording's config/broker-0.zk-mig.properties equals the
        migration-mode file). It registers in ``/brokers/ids`` again; the KRaft controller keeps
        ``/controller`` and dual-writes (zookeeper/04a-rollback-brokers-zk-migration-mode.json)."""
        broker = self.broker(broker_id)
        if not broker.kraft_mode:
            raise SimulationError(f"broker {broker_id} is not in KRaft mode")
        broker.server_properties_text = None
        if broker.online:
            self.stop_broker(broker_id, clean=True)
        for key in self.kraft_broker_properties(broker_id):
            broker.properties.pop(key, None)
        migration = self.kraft_migration
        nodes = (
            migration.controller_node_ids
            if migration is not None and migration.controller_node_ids
            else (3000,)
        )
        broker.properties.update(self.migration_properties(nodes))
        broker.kraft_mode = False
        self.start_broker(broker_id)
        self.history.append(f"broker {broker_id} restarted in ZooKeeper mode (migration flag still on)")

    def finalize_kraft_migration(self) -> None:
        """``Finalizing the migration`` (docs/ops.html, 3.9): the active KRaft controller activated without
        ``zookeeper.metadata.migration.enable`` while the log said MIGRATION and wrote POST_MIGRATION
        (``ActivationRecordsGenerator.recordsForNonEmptyLog``, 3.9.0-rc3: "Completing the ZK migration since
        this controller was configured with 'zookeeper.metadata.migration.enable' set to 'false'"). Without
        the flag no ``KRaftMigrationDriver`` runs: ZooKeeper is not written any more -- the persistent
        ``/controller``, ``/controller_epoch`` and ``/migration`` stay as the last dual write left them, and
        ``/brokers/ids`` stays empty. There is no way back (the docs' revert table)."""
        migration = self.kraft_migration
        if migration is None or not migration.claimed or not migration.metadata_migrated:
            raise SimulationError("only a migration in dual-write can be finalized")
        if any(b.online and not b.kraft_mode for b in self.brokers.values()):
            # KAFKA-20960 (open): the controller does not check; the simulator lets it happen too
            self.history.append("finalized while ZooKeeper-mode brokers still run (KAFKA-20960)")
        self.kraft_migration = replace(migration, finalized=True)
        self.history.append("KRaft migration finalized (POST_MIGRATION): ZooKeeper no longer written")
        self.tick()

    def stop_kraft_controllers(self) -> None:
        """Rollback, "Deprovision the KRaft controller quorum": the controllers stop. ``/controller``
        keeps naming the KRaft controller until someone deletes it, so no ZooKeeper-mode broker becomes
        controller and nothing acts as controller meanwhile: a broker stopping now leaves its leaderships
        unserved (the recorded brokers kept following controller 3000, which was down)."""
        migration = self.kraft_migration
        if migration is None:
            raise SimulationError("no KRaft quorum is provisioned")
        self.kraft_migration = replace(migration, controllers_running=False)
        self.history.append(f"KRaft controllers {list(migration.controller_node_ids)} stopped")
        self.tick()

    def delete_controller_znode(self, command: str = "deleteall") -> tuple[int, str]:
        """The operator's ``zookeeper-shell.sh <connect>/<chroot> <command> /controller``; returns its exit
        status and output as ZooKeeper 3.8's shell (Kafka 3.9's ``zookeeper-shell.sh``) gives them.

        ``rmr`` -- what docs/ops.html (3.9) says -- no longer exists (ZooKeeper 3.5 renamed it
        ``deleteall``): "Command not found rmr", exit 127, nothing deleted (recorded, logs/04-rollback.txt).
        ``deleteall`` (or ``delete``) removes it; every running ZooKeeper-mode broker races to create an
        ephemeral one (``KafkaController.elect``): the winner's epoch is ``/controller_epoch`` + 1, and
        five seconds later its automatic leader rebalance runs (``onControllerFailover`` ->
        ``scheduleAutoLeaderRebalanceTask``, 3.9.0-rc3; the recording's zookeeper/04b-... shows broker 0
        elected with epoch 5, preferred leaders back). ``/migration`` is left as it was.
        """
        verb = command.strip().split()[0] if command.strip() else ""
        if verb not in ("deleteall", "delete", "rmr"):
            raise SimulationError(f"unsupported zookeeper-shell command {command!r}")
        if verb == "rmr":
            return 127, "Command not found: Command not found rmr"
        migration = self.kraft_migration
        if migration is not None and migration.claimed and migration.controllers_running:
            raise SimulationError(
                "deleting /controller while the KRaft controller runs is not simulated (it would claim it again); "
                "stop the KRaft controllers first (stop_kraft_controllers)"
            )
        if migration is not None:
            self.kraft_migration = replace(migration, claimed=False)
        self.elect_controller()
        self.tick(5_000)
        self.auto_leader_rebalance()
        return 0, ""

    def roll_broker_out_of_migration_mode(self, broker_id: int) -> None:
        """Rollback, last roll (docs/ops.html 3.9, "Enter Migration Mode on the Brokers" reverted): the
        migration flag and the controller settings removed (the recording's config/broker-0.zk-final.properties
        equals its ZooKeeper-mode file), a restart in plain ZooKeeper mode; meta.properties keeps its
        ``directory.id``. ``/migration`` stays: the documented revert never deletes it
        (zookeeper/04c-rollback-complete-zk-mode.json; a later migration would skip its initial load,
        KAFKA-17146): :meth:`delete_migration_znode`."""
        broker = self.broker(broker_id)
        if broker.kraft_mode:
            raise SimulationError(f"broker {broker_id} runs in KRaft mode: roll it back to ZooKeeper first")
        broker.server_properties_text = None
        if broker.online:
            self.stop_broker(broker_id, clean=True)
        for key in self.migration_properties(()):
            broker.properties.pop(key, None)
        self.metadata_log_brokers.discard(broker_id)
        self.start_broker(broker_id)
        self.history.append(f"broker {broker_id} restarted in ZooKeeper mode, migration off")

    def delete_migration_znode(self) -> None:
        """``deleteall /migration``: what the documented revert leaves out. Only once no KRaft controller
        holds ``/controller`` (a stale ``/migration`` makes a later migration skip its initial load and
        delete the topics created meanwhile, KAFKA-17146)."""
        migration = self.kraft_migration
        if migration is None:
            raise SimulationError("there is no /migration")
        if migration.claimed:
            raise SimulationError("a KRaft controller still holds /controller")
        self.kraft_migration = None
        self.history.append("/migration deleted")
        self.tick()

    def end_kraft_migration_rollback(self) -> None:
        """The documented rollback: delete ``/controller`` and ``/migration``; a ZK broker is elected."""
        if self.kraft_migration is None:
            raise SimulationError("no KRaft migration in progress")
        self.kraft_migration = None
        self.elect_controller()

    # ------------------------------------------------------------------ configs and producer ids
    def alter_config(self, entity_type: str, name: str, changes: Mapping[str, str | None]) -> None:
        """``kafka-configs --alter`` (None deletes a key) on a ``topics``, ``brokers``, ``clients`` or
        ``users`` entity (``brokers/<default>`` is ``"<default>"``).

        In ZooKeeper mode ``AdminZkClient.changeEntityConfig`` writes the whole config (creating the znode
        at the first change, ``{}`` when nothing is left) and a change notification. During the dual-write
        the KRaft controller records the change -- for a broker even when nothing changes (KAFKA-14136,
        ``ConfigurationControlManager.incrementalAlterConfigResource``, 3.9.0-rc3), for other entities
        only when something does -- and writes it into ZooKeeper (:meth:`_write_config_znode`: a broker
        left with no setting loses its znode). ``kafka-reassign-partitions --verify`` clearing throttles
        is such a change: on the recorded cluster it created empty ``/config/brokers/0`` and ``/2`` in
        ZooKeeper mode and deleted them in KRaft mode."""
        store = self._config_store(entity_type, name)
        existed = entity_type == "topics" or name in store
        before = dict(store.get(name, {})) if entity_type != "topics" else dict(self.topic(name).config)
        config = dict(before)
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if entity_type == "topics":
            self.topic(name).config = config
        else:
            store[name] = config
        migration = self.kraft_migration
        if self.kraft_controller_active and migration is not None and migration.metadata_migrated:
            if config != before or entity_type == "brokers":
                self._write_config_znode(entity_type, name, config, existed=existed)
        else:
            path = f"{entity_type}/{name}"
            if path in self.config_versions or (entity_type == "topics"):
                self.config_versions[path] = self.config_versions.get(path, 0) + 1
            else:
                self.config_versions[path] = 0
            self.config_changes.append(path)
        self.tick()

    def _config_store(self, entity_type: str, name: str) -> dict[str, dict[str, str]]:
        stores = {
            "brokers": self.broker_configs,
            "clients": self.client_configs,
            "users": self.user_configs,
            "topics": {},
        }
        if entity_type not in stores:
            raise SimulationError(f"unknown config entity type {entity_type!r}")
        if entity_type == "topics":
            self.topic(name)
        return stores[entity_type]

    def _write_config_znode(
        self, entity_type: str, name: str, config: Mapping[str, str], *, existed: bool = True
    ) -> None:
        """The KRaft controller writes a config entity into ZooKeeper: SetData (a Create when absent) and a
        change notification; a broker or topic entity left with no setting is deleted instead, with its
        notification, or nothing when there was no znode (``ZkConfigMigrationClient.writeConfigs``/
        ``writeClientQuotas``/``deleteConfigs``, ``tryWriteEntityConfig``, 3.9.0-rc3). Each is one dual-write."""
        path = f"{entity_type}/{name}"
        if not config and entity_type in ("brokers", "topics"):
            if entity_type == "brokers":
                self.broker_configs.pop(name, None)
            else:
                existed = existed and self.topics[name].config_znode
                self.topics[name].config_znode = False
            self.config_versions.pop(path, None)
            if not existed:
                return  # deleteConfigs: NONODE, no notification
        else:
            if entity_type == "topics":
                existed = self.topics[name].config_znode
                self.topics[name].config_znode = True
            # SetData on an existing znode, else a Create (zkVersion 0)
            self.config_versions[path] = self.config_versions.get(path, 0) + 1 if existed else 0
        self.config_changes.append(path)
        self._dual_write()

    def latest_producer_id_block(self) -> tuple[int, int, int]:
        """``/latest_producer_id_block`` as (broker, first id, zkVersion). By default every broker took one
        block at its start, the highest id last (the golden 3.3.1 cluster's)."""
        if self.producer_id_block is None:
            count = len(self.brokers)
            return max(self.brokers), PRODUCER_ID_BLOCK_SIZE * (count - 1), count
        broker, start = self.producer_id_block
        return broker, start, self.producer_id_block_version

    def allocate_producer_ids(self, broker_id: int) -> None:
        """Broker ``broker_id`` takes a block of 1000 producer ids (an idempotent or transactional
        producer needs one). In ZooKeeper mode the block follows the one in ``/latest_producer_id_block``,
        which then names the broker (``ZkProducerIdManager.getNewProducerIdBlock``); during the
        dual-write the KRaft controller hands it out and writes ``ProducerIdsBlock(-1, <its next id>,
        1000)`` there (``ZkMigrationClient.writeProducerId``, 3.9.0-rc3): broker -1, first id = the next
        block's."""
        self.broker(broker_id)
        _, start, version = self.latest_producer_id_block()
        migration = self.kraft_migration
        if self.kraft_controller_active and migration is not None and migration.metadata_migrated:
            self._kraft_next_producer_id += PRODUCER_ID_BLOCK_SIZE
            self.producer_id_block = (-1, self._kraft_next_producer_id)
            self._dual_write()
        else:
            self.producer_id_block = (broker_id, start + PRODUCER_ID_BLOCK_SIZE)
        self.producer_id_block_version = version + 1
        self.tick()

    # ------------------------------------------------------------------ what a readiness check must find
    def request_topic_deletion(self, topic_name: str) -> None:
        """``/admin/delete_topics/<t>`` written, not yet carried out by the controller (a snapshot taken
        in between, or a controller that did not get to it): the topic and its replicas are all there."""
        self.topic(topic_name)
        self.delete_markers.add(topic_name)
        self.history.append(f"{topic_name}: deletion requested, not carried out yet")
        self.tick()

    def request_preferred_election(self, partitions: Iterable[tuple[str, int]]) -> None:
        """``/admin/preferred_replica_election`` written by a ZooKeeper-form tool, not processed yet
        (the controller deletes it when it has carried it out: :meth:`preferred_replica_election`)."""
        self.preferred_election_request = [(t, p) for t, p in partitions]
        self.tick()

    def followers_fall_behind(self, topic_name: str, partition: int, brokers: Iterable[int]) -> None:
        """Followers on running brokers drop out of the ISR (replica.lag.time.max.ms exceeded): the leader
        shrinks the ISR through AlterPartition and the controller writes the state znode (IBP >= 2.7-IV2)."""
        part = self.topic(topic_name).partitions[partition]
        behind = set(brokers)
        if part.leader in behind:
            raise SimulationError(
                f"broker {part.leader} leads {topic_name}-{partition}: a leader does not fall behind"
            )
        self._bump_state(part, leader=part.leader, isr=[r for r in part.isr if r not in behind])
        self.history.append(f"{topic_name}-{partition}: brokers {sorted(behind)} fell out of the ISR")
        self.tick()

    # ------------------------------------------------------------------ security metadata
    def add_acl(
        self,
        resource_type: str,
        name: str,
        principal: str,
        operation: str,
        *,
        permission: str = "Allow",
        host: str = "*",
        pattern: str = "LITERAL",
    ) -> None:
        """``kafka-acls --add`` through AclAuthorizer: an entry in ``/kafka-acl/<Type>/<name>`` (literal)
        or ``/kafka-acl-extended/<pattern>/<Type>/<name>`` (``ZkAclStore``, ``ResourceZNode``, 3.9)."""
        entry = {"principal": principal, "permissionType": permission, "operation": operation, "host": host}
        self.acls.setdefault((pattern.lower(), resource_type, name), []).append(entry)
        self.tick()

    def add_scram_credential(
        self, user: str, mechanism: str = "SCRAM-SHA-256", iterations: int = 4096
    ) -> None:
        """``kafka-configs --alter --add-config '<mechanism>=[iterations=N,password=...]' --entity-type
        users``: the credential string in ``/config/users/<user>`` (``ScramCredentialUtils.
        credentialToString``)."""
        salt, stored, server = (self.rng.randbytes(n) for n in (16, 32, 32))
        value = (
            f"salt={base64.b64encode(salt).decode()},stored_key={base64.b64encode(stored).decode()},"
            f"server_key={base64.b64encode(server).decode()},iterations={iterations}"
        )
        self.user_configs.setdefault(user, {})[mechanism] = value
        self.tick()

    def set_quota(self, entity_type: str, name: str, key: str, value: str) -> None:
        """A client quota (``users``, ``clients`` or ``users`` with ``<user>/clients/<client>``)."""
        configs = {"users": self.user_configs, "clients": self.client_configs}[entity_type]
        configs.setdefault(name, {})[key] = value
        self.tick()

    def add_delegation_token(self, owner: str) -> str:
        """A delegation token (``DelegationTokenManagerZk``: ``/delegation_token/tokens/<id>``)."""
        token_id = self.rng.randbytes(11).hex()[:22]
        now = self.tick()
        self.delegation_tokens[token_id] = {
            "owner": owner,
            "issueTimestamp": now,
            "maxTimestamp": now + 7 * 86_400_000,
            "expiryTimestamp": now + 86_400_000,
        }
        return token_id

    def old_consumer_commits(self, group: str, topic: str, partition: int, offset: int) -> None:
        """A ZooKeeper-based (0.8 Scala) consumer commits its offset into
        ``/consumers/<group>/offsets/<topic>/<partition>`` -- a client writing ZooKeeper directly."""
        self.zk_consumer_offsets[(group, topic, partition)] = offset
        self.tick()

    # ------------------------------------------------------------------ views
    def rf1_partitions_by_broker(self) -> dict[int, list[tuple[str, int]]]:
        out: dict[int, list[tuple[str, int]]] = {}
        for topic in self.topics.values():
            for p, part in topic.partitions.items():
                if len(part.replicas) == 1:
                    out.setdefault(part.replicas[0], []).append((topic.name, p))
        return out


def hash_partition(topic: str, partition: int) -> int:
    """Stable spread of partitions over a broker's log dirs (Python's hash() is salted per process)."""
    value = partition
    for ch in topic:
        value = (value * 31 + ord(ch)) & 0xFFFFFFFF
    return value
