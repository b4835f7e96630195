"""An immutable model of a ZooKeeper-mode Kafka cluster, built from one snapshot of its znodes.

:meth:`ClusterState.from_snapshot` reads :class:`~.snapshot.ZnodeRow` objects once, decodes each
through :func:`.znodes.decode_znode` and joins what belongs together (a topic's assignment, its
partition states, its config, its deletion marker). It never raises on bad data: whatever Kafka
could not read either (malformed JSON, wrong types, an invalid topic name in a path) or whatever
does not fit together (a state znode for a partition the assignment does not have, a topic config
whose topic is gone) becomes a :class:`ModelFinding` naming the znode, with its raw bytes.

The model holds facts only. Judgements ("offline", "under-replicated", "deletion stuck") are audit
rules: separate functions over this model. Pure: no Airflow, no network, no files, so a Spark
executor or a notebook can build it. Treat every mapping in it as read-only.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import compress, groupby, islice, repeat
from operator import attrgetter, itemgetter, lt, mul, not_
from typing import Final, Literal, TypeAlias

from . import _bulk
from . import znodes as zk
from .errors import KafkaFormatError, describe
from .safety import KRAFT_FINALIZED_PATH, is_redaction_digest
from .snapshot import ZnodeRow, gc_paused
from .uuid import KafkaUuid

# --------------------------------------------------------------------------------------------
# Findings: what the snapshot holds that the model cannot take at face value
# --------------------------------------------------------------------------------------------


class ModelFindingKind(StrEnum):
    """Why a znode (or a missing one) became a finding instead of part of the model."""

    MALFORMED_ZNODE = "malformed_znode"
    """The data is not what Kafka writes there (bad UTF-8/JSON, missing key, wrong type)."""
    INVALID_TOPIC_NAME = "invalid_topic_name"
    """The path carries a topic name Kafka would refuse."""
    DECODER_FAILURE = "decoder_failure"
    """The codec raised something other than a format error: a bug here, not in the cluster."""
    DUPLICATE_ZNODE = "duplicate_znode"
    """The snapshot lists the same path twice; the first row is used."""
    MISSING_PARTITION_STATE = "missing_partition_state"
    """The topic znode assigns a partition that has no ``.../partitions/<p>/state`` znode."""
    ORPHAN_PARTITION_STATE = "orphan_partition_state"
    """A state znode for a partition the topic znode does not assign (or whose topic znode is gone)."""
    MISSING_TOPIC_CONFIG = "missing_topic_config"
    """A topic without ``/config/topics/<t>`` (Kafka creates it with the topic, even when empty)."""
    ORPHAN_TOPIC_CONFIG = "orphan_topic_config"
    """``/config/topics/<t>`` for a topic that has no topic znode."""
    MALFORMED_CONFIG_VALUE = "malformed_config_value"
    """A config value a broker would reject (e.g. a throttled-replicas list that does not parse)."""


@dataclass(frozen=True, slots=True)
class ModelFinding:
    """A znode the model could not use as is; ``data`` keeps its raw bytes for the report."""

    path: str
    kind: ModelFindingKind
    message: str
    data: bytes | None = None

    def __repr__(self) -> str:
        return f"ModelFinding({self.path!r}, {self.kind.value}, {self.message!r})"


# --------------------------------------------------------------------------------------------
# Brokers, partitions, topics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A broker registered in ``/brokers/ids``: its registration, broker epoch and session.

    ``epoch`` is the registration znode's czxid, which Kafka 2.2+ uses as the broker epoch (it
    changes whenever the broker re-registers, i.e. restarts). ``session_id`` is the owning ZooKeeper
    session (0 would mean a persistent znode, which no broker writes).
    """

    registration: zk.BrokerRegistration
    epoch: int
    session_id: int
    ctime_ms: int | None = (
        None  # the registration znode's ctime: ZooKeeper's clock when the broker registered
    )

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    @property
    def rack(self) -> str | None:
        return self.registration.rack


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: its assignment from the topic znode and its state znode (if there is one).

    ``replicas`` is the znode's list (target ++ origin while a 2.4+ reassignment runs);
    ``target_replicas``/``original_replicas`` strip ``removing``/``adding`` from it. ``state`` is
    None when the state znode is missing or undecodable (see the findings). ``partition_epoch`` is
    the state znode's zkVersion, the epoch the controller's conditional updates check.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    original_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    state: zk.PartitionState | None
    partition_epoch: int | None

    @property
    def topic_partition(self) -> zk.TopicPartition:
        return zk.TopicPartition(self.topic, self.partition)

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def preferred_leader(self) -> int | None:
        """The first replica: where a preferred-leader election puts leadership."""
        return self.replicas[0] if self.replicas else None

    @property
    def leader(self) -> int | None:
        """The state znode's leader (-1: none); None when there is no state to read it from."""
        return None if self.state is None else self.state.leader

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr

    @property
    def state_path(self) -> str:
        return zk.partition_state_path(self.topic, self.partition)

    def is_offline(self, live: Collection[int]) -> bool:
        """No live leader: no (readable) state znode, leader -1, or a leader that is not registered."""
        leader = self.leader
        return self.state is None or leader is None or leader == -1 or leader not in live

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than target replicas (a reassignment's extra replicas do not count)."""
        return len(self.isr) < len(self.target_replicas or self.replicas)


@dataclass(frozen=True, slots=True)
class TopicState:
    """A topic as ZooKeeper has it: assignment znode (with its Stat), partitions, config, marker.

    ``topic_id`` is None exactly when the topic znode has no ``topic_id`` key, whatever its format
    version says (2.8+ writes version 3 with or without it: ``TopicZNode.encode`` in ZkData.scala,
    3.3.1, adds the key only when it has an id). ``czxid``
    identifies this incarnation of the topic znode: a topic deleted and created again gets a new one.
    """

    name: str
    assignment: zk.TopicAssignment
    zk_version: int
    czxid: int
    ctime_ms: int
    partitions: dict[int, PartitionInfo]
    config: dict[str, str]
    has_delete_marker: bool

    @property
    def topic_id(self) -> KafkaUuid | None:
        return self.assignment.topic_id

    @property
    def format_version(self) -> int:
        """The ``version`` field of the topic znode (1, 2 or 3): who wrote it last, not whether it has an id."""
        return self.assignment.version

    @property
    def path(self) -> str:
        return zk.topic_path(self.name)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def is_reassigning(self) -> bool:
        return any(p.is_reassigning for p in self.partitions.values())


# --------------------------------------------------------------------------------------------
# Config entities and replication throttles
# --------------------------------------------------------------------------------------------

LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"

ALL_REPLICAS: Final = "*"
ThrottledReplicas: TypeAlias = frozenset[tuple[int, int]] | Literal["*"]
"""``{(partition, broker), ...}`` from ``"p:b,p:b"``, or ``"*"`` for every replica of the topic."""

_NO_REPLICAS: ThrottledReplicas = frozenset()
_THROTTLED_REPLICA = re.compile(r"([0-9]+):([0-9]+)")
_RATE = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class ConfigEntities:
    """Dynamic config overrides by entity type, keyed by the (sanitized) entity name of the path.

    ``brokers`` is keyed by the path's name too: ``"1"`` for broker 1, ``"<default>"`` for the
    cluster-wide default. A user's client quota is under ``users`` as ``<user>/clients/<client>``.
    """

    topics: dict[str, dict[str, str]]
    brokers: dict[str, dict[str, str]]
    clients: dict[str, dict[str, str]]
    users: dict[str, dict[str, str]]
    ips: dict[str, dict[str, str]]

    def of_type(self, entity_type: str) -> dict[str, dict[str, str]]:
        if entity_type not in zk.CONFIG_ENTITY_TYPES:
            raise ValueError(
                f"config entity type must be one of {zk.CONFIG_ENTITY_TYPES}, not {entity_type!r}"
            )
        return getattr(self, entity_type)

    def broker(self, broker_id: int) -> dict[str, str]:
        """Broker ``broker_id``'s own overrides (not merged with ``<default>``)."""
        return self.brokers.get(str(broker_id), {})

    @property
    def broker_default(self) -> dict[str, str]:
        return self.brokers.get(zk.DEFAULT_ENTITY_NAME, {})


@dataclass(frozen=True, slots=True)
class ThrottleRates:
    """Replication throttle rates in bytes/s; None = not set (Kafka then uses Long.MAX_VALUE)."""

    leader: int | None = None
    follower: int | None = None

    @property
    def is_set(self) -> bool:
        return self.leader is not None or self.follower is not None


@dataclass(frozen=True, slots=True)
class TopicThrottledReplicas:
    """A topic's ``leader/follower.replication.throttled.replicas``, parsed."""

    leader: ThrottledReplicas = _NO_REPLICAS
    follower: ThrottledReplicas = _NO_REPLICAS


@dataclass(frozen=True, slots=True)
class ReplicationThrottles:
    """Every replication throttle in the cluster's dynamic config (left-over ones included).

    ``broker_rates`` holds the entities that set a rate (``"<default>"`` or a broker id string),
    ``topic_replicas`` the topics that set a throttled-replicas list.
    """

    broker_rates: dict[str, ThrottleRates]
    topic_replicas: dict[str, TopicThrottledReplicas]

    def rates_for(self, broker_id: int) -> ThrottleRates:
        """The rates broker ``broker_id`` applies: its own value per key, else ``<default>``'s."""
        own = self.broker_rates.get(str(broker_id), ThrottleRates())
        default = self.broker_rates.get(zk.DEFAULT_ENTITY_NAME, ThrottleRates())
        return ThrottleRates(
            own.leader if own.leader is not None else default.leader,
            own.follower if own.follower is not None else default.follower,
        )

    @property
    def is_empty(self) -> bool:
        return not self.broker_rates and not self.topic_replicas


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Everything a ZooKeeper snapshot says about one Kafka cluster, decoded and joined.

    ``brokers`` are the registrations present (live brokers). ``controller_epoch_zk_version`` is
    the zkVersion of ``/controller_epoch``, the token that fences the controller, which is not
    the epoch value. ``pending_deletions`` holds every ``/admin/delete_topics`` marker, also those
    whose topic is gone. ``reassigning_partitions`` come from the topic znodes (non-empty
    adding/removing replicas, which API reassignments also write); ``reassign_partitions`` is the
    ``/admin/reassign_partitions`` request znode, if any. ``last_zxid`` is the newest zxid seen.
    ``partial_read``: built from a drain's planning read (every topic znode, the partition state
    znodes of some partitions only, no config znodes), so an absent state or config znode is no
    finding there; such a model serves the drain planner, never an audit.
    """

    cluster: str
    taken_at_ms: int | None
    cluster_id: str | None
    brokers: dict[int, LiveBroker]
    controller: zk.ControllerRegistration | None
    controller_session_id: int | None
    controller_epoch: int | None
    controller_epoch_zk_version: int | None
    feature: zk.FeatureZNode | None
    topics: dict[str, TopicState]
    pending_deletions: frozenset[str]
    reassign_partitions: zk.ReassignPartitions | None
    reassigning_partitions: tuple[zk.TopicPartition, ...]
    preferred_replica_election: zk.PreferredReplicaElection | None
    configs: ConfigEntities
    replication_throttles: ReplicationThrottles
    config_change_notifications: tuple[zk.ConfigChangeNotification, ...]
    isr_change_notifications: tuple[zk.IsrChangeNotification, ...]
    log_dir_event_notifications: tuple[zk.LogDirEventNotification, ...]
    migration: zk.MigrationZNode | None
    producer_id_block: zk.ProducerIdBlock | None
    findings: tuple[ModelFinding, ...]
    znode_count: int
    last_zxid: int
    partial_read: bool = False
    deletion_marker_ctimes: tuple[tuple[str, int], ...] = ()
    """(topic, ctime in ms) of every ``/admin/delete_topics`` marker: since when a deletion is pending."""
    kraft_finalized: bytes | None = None
    """kafka_zk_kraft_migration's record that the cluster's migration to KRaft was finalized (the provider's
    znode, ``kafka.safety.KRAFT_FINALIZED_PATH``): the cluster left this ZooKeeper. None: no record."""

    @classmethod
    def from_snapshot(
        cls,
        rows: Iterable[ZnodeRow],
        *,
        cluster: str = "",
        taken_at_ms: int | None = None,
        partial_read: bool = False,
    ) -> ClusterState:
        """Build the model in one pass over ``rows`` (paths relative to the Kafka chroot).

        Never raises on bad znode data: see ``findings``.

        :param rows: the znodes, paths relative to the Kafka chroot.
        :param cluster: the cluster's name.
        :param taken_at_ms: when the rows were read.
        :param partial_read: the rows are a planning read (see :attr:`partial_read`): a partition
            without its state znode, a topic without its config znode, is not a finding.
        """
        builder = _BulkBuilder()
        builder.partial_read = partial_read
        with gc_paused():
            builder.add_all(rows)
            return builder.build(cluster, taken_at_ms)

    # ------------------------------------------------------------------ small helpers
    @property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self.brokers)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    @property
    def controller_id(self) -> int | None:
        return None if self.controller is None else self.controller.broker_id

    def topic(self, name: str) -> TopicState | None:
        """The topic named ``name``, or None when ZooKeeper has no (decodable) topic znode for it."""
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        found = self.topics.get(topic)
        return None if found is None else found.partitions.get(partition)

    def partitions(self) -> Iterator[PartitionInfo]:
        """Every assigned partition, by topic name then partition number."""
        for topic in self.topics.values():
            yield from topic.partitions.values()

    @property
    def deletion_markers_without_topic(self) -> frozenset[str]:
        """Markers whose topic znode is gone (Kafka removes such markers; one left over is stuck)."""
        return frozenset(t for t in self.pending_deletions if t not in self.topics)

    def findings_at(self, path: str) -> tuple[ModelFinding, ...]:
        """Findings for ``path`` itself or any znode below it."""
        prefix = path.rstrip("/") + "/"
        return tuple(f for f in self.findings if f.path == path or f.path.startswith(prefix))


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------

_TOPIC_CONFIG_PATH = re.compile(r"/config/topics/([^/]+)")


class _Builder:
    """Mutable accumulator for one pass over the rows; ``build`` freezes it into a ClusterState."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.findings: list[ModelFinding] = []
        self.cluster_id: str | None = None
        self.brokers: dict[int, LiveBroker] = {}
        self.controller: zk.ControllerRegistration | None = None
        self.controller_session_id: int | None = None
        self.controller_epoch: int | None = None
        self.controller_epoch_zk_version: int | None = None
        self.feature: zk.FeatureZNode | None = None
        self.assignments: dict[str, tuple[zk.TopicAssignment, ZnodeRow]] = {}
        self.states: dict[tuple[str, int], tuple[zk.PartitionState, ZnodeRow]] = {}
        self.markers: set[str] = set()
        self.marker_ctimes: dict[str, int] = {}
        self.reassign: zk.ReassignPartitions | None = None
        self.preferred: zk.PreferredReplicaElection | None = None
        self.configs: dict[str, dict[str, dict[str, str]]] = {t: {} for t in zk.CONFIG_ENTITY_TYPES}
        self.config_changes: list[zk.ConfigChangeNotification] = []
        self.isr_changes: list[zk.IsrChangeNotification] = []
        self.log_dir_events: list[zk.LogDirEventNotification] = []
        self.migration: zk.MigrationZNode | None = None
        self.kraft_finalized: bytes | None = None
        self.producer_id_block: zk.ProducerIdBlock | None = None
        # Znodes that exist but did not decode: their absence from the model is already a finding.
        self.unreadable_topics: set[str] = set()
        self.unreadable_states: set[tuple[str, str]] = set()
        self.unreadable_topic_configs: set[str] = set()
        self.last_zxid = 0
        self.partial_read = False  # a planning read: absent state and config znodes were not read

    def add(self, row: ZnodeRow) -> None:
        path = row.path
        if path in self.seen:
            self._finding(row, ModelFindingKind.DUPLICATE_ZNODE, "listed more than once in the snapshot")
            return
        self.seen.add(path)
        self.last_zxid = max(self.last_zxid, row.czxid, row.mzxid, row.pzxid)
        self._decode(row)

    def _decode(self, row: ZnodeRow) -> None:
        """Decode one row (already counted in ``seen`` and ``last_zxid``) into the builder."""
        path = row.path
        if is_redaction_digest(path, row.data):
            return  # a snapshot kept only the digest of this credential or token: nothing to decode
        if path == KRAFT_FINALIZED_PATH:
            self.kraft_finalized = row.data or b""
            return
        try:
            decoded = zk.decode_znode(path, row.data)
        except zk.InvalidTopicNameError as exc:
            self._finding(row, ModelFindingKind.INVALID_TOPIC_NAME, str(exc))
            return
        except KafkaFormatError as exc:
            self._unreadable(path)
            self._finding(row, ModelFindingKind.MALFORMED_ZNODE, str(exc))
            return
        except Exception as exc:  # a codec bug must not abort the audit of 230k other znodes
            self._unreadable(path)
            self._finding(row, ModelFindingKind.DECODER_FAILURE, f"{type(exc).__name__}: {exc}")
            return
        handler = _HANDLERS.get(type(decoded))
        if handler is not None:
            handler(self, row, decoded)

    def _finding(self, row: ZnodeRow, kind: ModelFindingKind, message: str) -> None:
        self.findings.append(ModelFinding(row.path, kind, message, row.data))

    def _unreadable(self, path: str) -> None:
        if match := zk.PartitionState.PATH_PATTERN.fullmatch(path):
            self.unreadable_states.add((match[1], match[2]))
        elif match := zk.TopicAssignment.PATH_PATTERN.fullmatch(path):
            self.unreadable_topics.add(match[1])
        elif match := _TOPIC_CONFIG_PATH.fullmatch(path):
            self.unreadable_topic_configs.add(match[1])

    # ------------------------------------------------------------------ one handler per codec
    def _broker(self, row: ZnodeRow, reg: zk.BrokerRegistration) -> None:
        self.brokers[reg.broker_id] = LiveBroker(reg, row.czxid, row.ephemeral_owner, row.ctime)

    def _topic(self, row: ZnodeRow, assignment: zk.TopicAssignment) -> None:
        self.assignments[assignment.topic] = (assignment, row)

    def _state(self, row: ZnodeRow, state: zk.PartitionState) -> None:
        self.states[(state.topic, state.partition)] = (state, row)

    def _controller(self, row: ZnodeRow, controller: zk.ControllerRegistration) -> None:
        self.controller = controller
        self.controller_session_id = row.ephemeral_owner

    def _controller_epoch(self, row: ZnodeRow, epoch: zk.ControllerEpoch) -> None:
        self.controller_epoch = epoch.epoch
        self.controller_epoch_zk_version = row.version

    def _marker(self, row: ZnodeRow, marker: zk.DeleteTopicMarker) -> None:
        self.markers.add(marker.topic)
        self.marker_ctimes[marker.topic] = row.ctime

    def _reassign(self, row: ZnodeRow, reassign: zk.ReassignPartitions) -> None:
        self.reassign = reassign

    def _preferred(self, row: ZnodeRow, election: zk.PreferredReplicaElection) -> None:
        self.preferred = election

    def _isr_change(self, row: ZnodeRow, note: zk.IsrChangeNotification) -> None:
        self.isr_changes.append(note)

    def _log_dir_event(self, row: ZnodeRow, note: zk.LogDirEventNotification) -> None:
        self.log_dir_events.append(note)

    def _config_change(self, row: ZnodeRow, note: zk.ConfigChangeNotification) -> None:
        self.config_changes.append(note)

    def _config(self, row: ZnodeRow, entity: zk.ConfigEntity) -> None:
        self.configs[entity.entity_type][entity.entity_name] = entity.config

    def _cluster_id(self, row: ZnodeRow, cluster_id: zk.ClusterId) -> None:
        self.cluster_id = cluster_id.id

    def _feature(self, row: ZnodeRow, feature: zk.FeatureZNode) -> None:
        self.feature = feature

    def _migration(self, row: ZnodeRow, migration: zk.MigrationZNode) -> None:
        self.migration = migration

    def _producer_id_block(self, row: ZnodeRow, block: zk.ProducerIdBlock) -> None:
        self.producer_id_block = block

    # ------------------------------------------------------------------ joining
    def build(self, cluster: str, taken_at_ms: int | None) -> ClusterState:
        topic_configs = self.configs["topics"]
        topics: dict[str, TopicState] = {}
        for name in sorted(self.assignments):
            assignment, row = self.assignments[name]
            config = topic_configs.get(name)
            if config is None:
                config = {}
                if name not in self.unreadable_topic_configs and not self.partial_read:
                    self.findings.append(
                        ModelFinding(
                            zk.config_entity_path("topics", name),
                            ModelFindingKind.MISSING_TOPIC_CONFIG,
                            f"topic {name!r} has no config znode (Kafka creates one with every topic)",
                        )
                    )
            topics[name] = TopicState(
                name=name,
                assignment=assignment,
                zk_version=row.version,
                czxid=row.czxid,
                ctime_ms=row.ctime,
                partitions=self._partitions(assignment),
                config=config,
                has_delete_marker=name in self.markers,
            )
        self._orphan_states()
        for name in sorted(set(topic_configs) - set(self.assignments) - self.unreadable_topics):
            marker = " (its deletion marker is still there)" if name in self.markers else ""
            self.findings.append(
                ModelFinding(
                    zk.config_entity_path("topics", name),
                    ModelFindingKind.ORPHAN_TOPIC_CONFIG,
                    f"config of topic {name!r}, which has no topic znode{marker}",
                )
            )
        configs = ConfigEntities(**self.configs)
        return ClusterState(
            cluster=cluster,
            taken_at_ms=taken_at_ms,
            cluster_id=self.cluster_id,
            brokers=dict(sorted(self.brokers.items())),
            controller=self.controller,
            controller_session_id=self.controller_session_id,
            controller_epoch=self.controller_epoch,
            controller_epoch_zk_version=self.controller_epoch_zk_version,
            feature=self.feature,
            topics=topics,
            pending_deletions=frozenset(self.markers),
            reassign_partitions=self.reassign,
            reassigning_partitions=self._reassigning(topics),
            preferred_replica_election=self.preferred,
            configs=configs,
            replication_throttles=self._throttles(configs),
            config_change_notifications=tuple(sorted(self.config_changes, key=lambda n: n.sequence)),
            isr_change_notifications=tuple(sorted(self.isr_changes, key=lambda n: n.sequence)),
            log_dir_event_notifications=tuple(sorted(self.log_dir_events, key=lambda n: n.sequence)),
            migration=self.migration,
            producer_id_block=self.producer_id_block,
            findings=tuple(self.findings),
            znode_count=self._znode_count(),
            last_zxid=self.last_zxid,
            partial_read=self.partial_read,
            deletion_marker_ctimes=tuple(sorted(self.marker_ctimes.items())),
            kraft_finalized=self.kraft_finalized,
        )

    def _znode_count(self) -> int:
        return len(self.seen)

    def _reassigning(self, topics: dict[str, TopicState]) -> tuple[zk.TopicPartition, ...]:
        return tuple(
            p.topic_partition for t in topics.values() for p in t.partitions.values() if p.is_reassigning
        )

    def _partitions(self, assignment: zk.TopicAssignment) -> dict[int, PartitionInfo]:
        name = assignment.topic
        partitions = {}
        for p in sorted(assignment.partitions):
            replicas = assignment.partitions[p]
            adding = assignment.adding_replicas.get(p, ())
            removing = assignment.removing_replicas.get(p, ())
            found = self.states.pop((name, p), None)
            if found is None and (name, str(p)) not in self.unreadable_states and not self.partial_read:
                self.findings.append(
                    ModelFinding(
                        zk.partition_state_path(name, p),
                        ModelFindingKind.MISSING_PARTITION_STATE,
                        f"partition {p} of {name!r} is assigned to {list(replicas)} but has no state znode",
                    )
                )
            partitions[p] = PartitionInfo(
                topic=name,
                partition=p,
                replicas=replicas,
                target_replicas=tuple(r for r in replicas if r not in removing) if removing else replicas,
                original_replicas=tuple(r for r in replicas if r not in adding) if adding else replicas,
                adding_replicas=adding,
                removing_replicas=removing,
                state=None if found is None else found[0],
                partition_epoch=None if found is None else found[1].version,
            )
        return partitions

    def _orphan_states(self) -> None:
        """State znodes left after every assigned partition took its own."""
        for (topic, p), (_, row) in sorted(self.states.items()):
            if topic in self.unreadable_topics:
                continue  # the undecodable topic znode is the finding
            if topic in self.assignments:
                assigned = sorted(self.assignments[topic][0].partitions)
                why = f"partition {p} is not in the assignment of {topic!r} (partitions {describe(assigned)})"
            else:
                why = f"topic {topic!r} has no topic znode"
            self.findings.append(
                ModelFinding(row.path, ModelFindingKind.ORPHAN_PARTITION_STATE, why, row.data)
            )

    def _throttles(self, configs: ConfigEntities) -> ReplicationThrottles:
        rates = {}
        for entity, config in configs.brokers.items():
            path = zk.config_entity_path("brokers", entity)
            found = ThrottleRates(
                self._rate(config, LEADER_THROTTLED_RATE, path),
                self._rate(config, FOLLOWER_THROTTLED_RATE, path),
            )
            if found.is_set:
                rates[entity] = found
        replicas = {}
        for topic, config in configs.topics.items():
            if LEADER_THROTTLED_REPLICAS in config or FOLLOWER_THROTTLED_REPLICAS in config:
                path = zk.config_entity_path("topics", topic)
                replicas[topic] = TopicThrottledReplicas(
                    self._throttled_replicas(config, LEADER_THROTTLED_REPLICAS, path),
                    self._throttled_replicas(config, FOLLOWER_THROTTLED_REPLICAS, path),
                )
        return ReplicationThrottles(rates, replicas)

    def _rate(self, config: dict[str, str], key: str, path: str) -> int | None:
        value = config.get(key)
        if value is None:
            return None
        if not _RATE.fullmatch(value.strip()):
            self._config_value_finding(path, key, value, "a non-negative number of bytes per second")
            return None
        return int(value)

    def _throttled_replicas(self, config: dict[str, str], key: str, path: str) -> ThrottledReplicas:
        """Parse as ``ThrottledReplicaListValidator`` + ``ConfigHandler.parseThrottledPartitions``."""
        value = config.get(key, "").strip()
        if value == ALL_REPLICAS:
            return ALL_REPLICAS
        pairs = set()
        for item in (i.strip() for i in value.split(",")):
            if not item:
                continue
            match = _THROTTLED_REPLICA.fullmatch(item)
            if match is None:
                self._config_value_finding(path, key, value, "'*' or a list of <partition>:<broker>")
                return _NO_REPLICAS
            pairs.add((int(match[1]), int(match[2])))
        return frozenset(pairs)

    def _config_value_finding(self, path: str, key: str, value: str, expected: str) -> None:
        self.findings.append(
            ModelFinding(
                path,
                ModelFindingKind.MALFORMED_CONFIG_VALUE,
                f"{path}: expected {key} as {expected}, found {describe(value)}",
            )
        )


_HANDLERS = {
    zk.PartitionState: _Builder._state,
    zk.TopicAssignment: _Builder._topic,
    zk.ConfigEntity: _Builder._config,
    zk.BrokerRegistration: _Builder._broker,
    zk.DeleteTopicMarker: _Builder._marker,
    zk.ConfigChangeNotification: _Builder._config_change,
    zk.IsrChangeNotification: _Builder._isr_change,
    zk.LogDirEventNotification: _Builder._log_dir_event,
    zk.ControllerRegistration: _Builder._controller,
    zk.ControllerEpoch: _Builder._controller_epoch,
    zk.ReassignPartitions: _Builder._reassign,
    zk.PreferredReplicaElection: _Builder._preferred,
    zk.ClusterId: _Builder._cluster_id,
    zk.FeatureZNode: _Builder._feature,
    zk.MigrationZNode: _Builder._migration,
    zk.ProducerIdBlock: _Builder._producer_id_block,
}
"""Codec type -> where its decoded znode goes (containers and foreign znodes go nowhere)."""


# --------------------------------------------------------------------------------------------
# The bulk build (what from_snapshot uses) and the per-row reference it must equal
# --------------------------------------------------------------------------------------------

_TOPICS_PREFIX = zk.BROKER_TOPICS + "/"
_HOT_KINDS = frozenset({3, 4, 5, 6})
_GROUPS = re.Match.groups
_PATH = attrgetter("path")
_DATA = attrgetter("data")
_VERSION = attrgetter("version")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_new_partition_infos = _bulk.column_builder(PartitionInfo)


class _BulkBuilder(_Builder):
    """:class:`_Builder` fed all rows at once: topic and partition state znodes decoded in bulk.

    The rest of the rows, and any hot-kind row the bulk decoder does not take as is
    (:mod:`._bulk` answers None), go through :meth:`_Builder._decode` in row order, so findings
    come out as the per-row build makes them. A snapshot listing a path twice is built per row.
    """

    def __init__(self) -> None:
        super().__init__()
        # topic -> runs of (partition numbers, their states, their rows), as add_all met them
        self.fast_states: dict[str, list[tuple[list[int], list[zk.PartitionState], list[ZnodeRow]]]] = {}
        self.slow_state_topics: set[str] = set()
        self.row_count = 0

    def add_all(self, rows: Iterable[ZnodeRow]) -> None:
        rows = rows if type(rows) is list else list(rows)
        paths = list(map(_PATH, rows))
        # a snapshot file lists its paths sorted, hence unique: no need to hash them all
        unique = all(map(lt, paths, islice(paths, 1, None))) or len(set(paths)) == len(paths)
        if not unique or self.seen or self.row_count:
            for row in rows:
                self.add(row)
            self.slow_state_topics = {topic for topic, _ in self.states}
            return
        self.row_count = len(paths)
        if rows:
            self.last_zxid = max(
                self.last_zxid,
                max(map(attrgetter("czxid"), rows)),
                max(map(attrgetter("mzxid"), rows)),
                max(map(attrgetter("pzxid"), rows)),
            )
        # A row's kind: its number of "/" when under /brokers/topics/, else 0. Kinds 3 (a topic)
        # and 6 (a partition state) are decoded in bulk; 4 and 5 (.../partitions[/<p>]) are
        # Kafka's data-less containers, and whatever else has 4 or 5 slashes there is a path no
        # codec takes: decode_znode returns None or the raw data for all of them, which the
        # per-row build ignores too. Everything else is decoded per row.
        kinds = list(
            map(mul, map(str.startswith, paths, repeat(_TOPICS_PREFIX)), map(str.count, paths, repeat("/")))
        )
        positions = range(len(kinds))
        slow = list(compress(positions, map(not_, map(_HOT_KINDS.__contains__, kinds))))
        groups = {kind: list(compress(positions, map(kind.__eq__, kinds))) for kind in (3, 6)}
        cache = _bulk.Cache()
        indexes, matches = _matching(paths, groups[6], zk.PartitionState.PATH_PATTERN, slow)
        topics, partitions = zip(*map(_GROUPS, matches), strict=True) if matches else ((), ())
        self._add_states(rows, indexes, topics, partitions, cache, slow)
        indexes, matches = _matching(paths, groups[3], zk.TopicAssignment.PATH_PATTERN, slow)
        self._add_topics(rows, indexes, [m[1] for m in matches], cache, slow)
        slow.sort()
        for index in slow:
            self._decode(rows[index])
        self.slow_state_topics = {topic for topic, _ in self.states}  # a codec took what bulk did not

    def _add_states(
        self,
        rows: list[ZnodeRow],
        indexes: list[int],
        topics: Sequence[str],
        partitions: Sequence[str],
        cache: _bulk.Cache,
        slow: list[int],
    ) -> None:
        """Partition state znodes (path shape checked): decoded once per distinct data.

        Kept by topic in ``fast_states`` until ``build`` joins them to the topic znodes.
        """
        state_rows = list(map(rows.__getitem__, indexes))
        datas = list(map(_DATA, state_rows))
        try:
            decoded = _bulk.partition_states(dict.fromkeys(datas))
        except TypeError:  # data that is not bytes (unhashable): the codecs read such rows
            slow.extend(indexes)
            return
        numbers = cache.partition_numbers(partitions)
        if None in map(decoded.__getitem__, datas) or None in numbers or not cache.topics_ok(topics):
            keep = [
                decoded[d] is not None and n is not None and cache.topic_ok(t)
                for d, n, t in zip(datas, numbers, topics, strict=True)
            ]
            slow.extend(compress(indexes, map(not_, keep)))
            topics, numbers, state_rows, datas = (
                list(compress(column, keep)) for column in (topics, numbers, state_rows, datas)
            )
        states = _bulk.partition_state_objects(topics, numbers, datas, decoded)
        fast = self.fast_states
        # rows come sorted by path from a snapshot, so a topic's states are one run (else several)
        for topic, run in groupby(range(len(states)), topics.__getitem__):
            run = list(run)
            first, last = run[0], run[-1] + 1
            fast.setdefault(topic, []).append(
                (numbers[first:last], states[first:last], state_rows[first:last])
            )

    def _add_topics(
        self,
        rows: list[ZnodeRow],
        indexes: list[int],
        names: Sequence[str],
        cache: _bulk.Cache,
        slow: list[int],
    ) -> None:
        for index, name in zip(indexes, names, strict=True):
            row = rows[index]
            assignment = _bulk.topic_assignment(name, row.data, cache) if cache.topic_ok(name) else None
            if assignment is None:
                slow.append(index)
            else:
                self.assignments[name] = (assignment, row)

    def _reassigning(self, topics: dict[str, TopicState]) -> tuple[zk.TopicPartition, ...]:
        return tuple(
            p.topic_partition
            for t in topics.values()
            if t.assignment.adding_replicas or t.assignment.removing_replicas
            for p in t.partitions.values()
            if p.is_reassigning
        )

    def _znode_count(self) -> int:
        return self.row_count + len(self.seen)

    def _merge_fast_states(self, topic: str | None = None) -> None:
        """Hand the bulk-decoded states (of ``topic``, or all) to ``states``, as ``add`` keeps them."""
        for name in [topic] if topic is not None else list(self.fast_states):
            for numbers, states, rows in self.fast_states.pop(name, ()):
                for number, state, row in zip(numbers, states, rows, strict=True):
                    self.states[(name, number)] = (state, row)

    def _orphan_states(self) -> None:
        self._merge_fast_states()
        super()._orphan_states()

    def _partitions(self, assignment: zk.TopicAssignment) -> dict[int, PartitionInfo]:
        name = assignment.topic
        if assignment.adding_replicas or assignment.removing_replicas or name in self.slow_state_topics:
            self._merge_fast_states(name)
            return super()._partitions(assignment)
        numbers = sorted(assignment.partitions)
        runs = self.fast_states.pop(name, [])
        if len(runs) == 1 and len(runs[0][0]) == len(numbers):
            # the usual case: one state per assigned partition, nothing missing, no orphan
            run_numbers, run_states, run_rows = runs[0]
            order = sorted(range(len(run_numbers)), key=run_numbers.__getitem__)
            if list(map(run_numbers.__getitem__, order)) == numbers:
                states = list(map(run_states.__getitem__, order))
                epochs = list(map(_VERSION, map(run_rows.__getitem__, order)))
                return self._partition_infos(assignment, numbers, states, epochs)
        by_partition: dict[int, tuple[zk.PartitionState, ZnodeRow]] = {}
        for run_numbers, run_states, run_rows in runs:
            by_partition.update(zip(run_numbers, zip(run_states, run_rows, strict=True), strict=True))
        found = list(map(by_partition.pop, numbers, repeat(None)))
        for number, orphan in by_partition.items():  # not assigned: orphans, found at the end
            self.states[(name, number)] = orphan
        if None in found:
            if not self.partial_read:  # a planning read: a state not read is not missing
                for p, state in zip(numbers, found, strict=True):
                    if state is None and (name, str(p)) not in self.unreadable_states:
                        self.findings.append(
                            ModelFinding(
                                zk.partition_state_path(name, p),
                                ModelFindingKind.MISSING_PARTITION_STATE,
                                f"partition {p} of {name!r} is assigned to "
                                f"{list(assignment.partitions[p])} but has no state znode",
                            )
                        )
            states = [None if f is None else f[0] for f in found]
            epochs = [None if f is None else f[1].version for f in found]
        else:
            states = list(map(_FIRST, found))
            epochs = list(map(_VERSION, map(_SECOND, found)))
        return self._partition_infos(assignment, numbers, states, epochs)

    @staticmethod
    def _partition_infos(
        assignment: zk.TopicAssignment,
        numbers: list[int],
        states: list[zk.PartitionState | None],
        epochs: list[int | None],
    ) -> dict[int, PartitionInfo]:
        """PartitionInfo of a topic without a reassignment (replicas = target = original)."""
        replicas = list(map(assignment.partitions.__getitem__, numbers))
        infos = _new_partition_infos(
            len(numbers),
            [
                repeat(assignment.topic),
                numbers,
                replicas,
                replicas,
                replicas,
                repeat(()),
                repeat(()),
                states,
                epochs,
            ],
        )
        return dict(zip(numbers, infos, strict=True))


def _matching(
    paths: list[str], indexes: list[int], pattern: re.Pattern[str], slow: list[int]
) -> tuple[list[int], list[re.Match[str]]]:
    """The ``indexes`` whose path ``pattern`` fully matches, with the matches; the others go to ``slow``."""
    matches = list(map(pattern.fullmatch, map(paths.__getitem__, indexes)))
    if None not in matches:
        return indexes, matches
    keep = list(map(bool, matches))
    slow.extend(compress(indexes, map(not_, keep)))
    return list(compress(indexes, keep)), list(compress(matches, keep))


def _from_snapshot_reference(
    rows: Iterable[ZnodeRow], *, cluster: str = "", taken_at_ms: int | None = None
) -> ClusterState:
    """The per-row build (one :func:`.znodes.decode_znode` per row), as ``from_snapshot`` was.

    Kept as the reference the bulk build is tested and benchmarked against: equal results.
    """
    builder = _Builder()
    for row in rows:
        builder.add(row)
    return builder.build(cluster, taken_at_ms)
