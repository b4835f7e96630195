"""Codecs for the znodes a ZooKeeper-mode Kafka cluster keeps.

Formats as ``core/src/main/scala/kafka/zk/ZkData.scala`` writes and reads them at each release
tag (0.11 ... 3.9), re-encoded byte for byte against the real 3.3.1 dump in
``tests/fixtures/real-kafka-3.3.1/zk_tree.json``.

One frozen dataclass per znode kind, each with ``decode(data, path)`` and ``encode()``:

* ``decode`` accepts what Kafka reads and raises :class:`ZnodeFormatError` naming the znode and
  what was expected for anything else (bad UTF-8, bad JSON, a missing key, a ``true`` where Kafka
  wants an ``Int``, a version Kafka rejects), never a bare ``KeyError``/``TypeError``.
* ``encode`` writes the exact bytes the named Kafka version writes (key order included, see
  :mod:`._jackson`), so an encoded znode compares equal to a real one.

:func:`decode_znode` picks the codec from the path. Paths are relative to Kafka's chroot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias

from . import _jackson
from .errors import KafkaFormatError, ZnodeFormatError, describe
from .uuid import KafkaUuid

# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------

ADMIN = "/admin"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONSUMERS = "/consumers"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
FEATURE = "/feature"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
MIGRATION = "/migration"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"

CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"

CONFIG_ENTITY_TYPES: tuple[str, ...] = ("topics", "clients", "users", "brokers", "ips")
"""``ConfigType.all``; ``ips`` exists from 2.8 (older brokers neither create nor read it)."""
DEFAULT_ENTITY_NAME = "<default>"
"""``ConfigEntityName.Default``: cluster-wide default for brokers, users, clients and ips."""

PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
)
"""``ZkData.PersistentZkPaths`` (2.8+): what every broker creates at startup when missing."""

NO_LEADER = -1
"""``leader`` of a partition state znode when no replica leads (``LeaderAndIsr.NoLeader``)."""

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class InvalidTopicNameError(ZnodeFormatError):
    """A topic name Kafka would refuse (``Topic.validate``)."""


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_MAX_TOPIC_NAME_LENGTH = 249


def validate_topic_name(name: object, source: str = "topic name") -> str:
    """Return ``name`` if Kafka accepts it as a topic name, else raise InvalidTopicNameError.

    Kafka's rule: 1..249 characters of ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``. Checked
    before a name goes into a path, so no ``/`` or ``..`` can ever escape ``/brokers/topics``.
    """
    if not isinstance(name, str):
        raise InvalidTopicNameError(source, "a topic name string", describe(name))
    if not name:
        raise InvalidTopicNameError(source, "a non-empty topic name", "''")
    if name in (".", ".."):
        raise InvalidTopicNameError(source, "a topic name other than '.' and '..'", repr(name))
    if len(name) > _MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicNameError(
            source, f"a topic name of at most {_MAX_TOPIC_NAME_LENGTH} characters", f"{len(name)} characters"
        )
    if not _TOPIC_NAME.fullmatch(name):
        raise InvalidTopicNameError(
            source, "a topic name of ASCII letters, digits, '.', '_', '-'", describe(name)
        )
    return name


def _require_id(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_require_id(broker_id, 'broker id')}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{validate_topic_name(topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{_require_id(partition, 'partition')}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{validate_topic_name(topic)}"


def config_entity_type_path(entity_type: str) -> str:
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ValueError(f"config entity type must be one of {CONFIG_ENTITY_TYPES}, not {entity_type!r}")
    return f"{CONFIG}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """``/config/<type>/<name>``; ``name`` is the sanitized name, e.g. ``alice/clients/c1`` for users."""
    _check_entity_name(entity_type, entity_name, "config entity")
    return f"{config_entity_type_path(entity_type)}/{entity_name}"


def config_change_path(sequence: int) -> str:
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}{sequence:010d}"


def isr_change_path(sequence: int) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}{sequence:010d}"


def log_dir_event_path(sequence: int) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence:010d}"


# --------------------------------------------------------------------------------------------
# Strict JSON reading (what Kafka's DecodeJson accepts: Int means a JSON integer, not true/1.0)
# --------------------------------------------------------------------------------------------


_DECIMAL = re.compile(r"-?[0-9]+")
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]{0,9}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_JSON = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every znode: ``json.loads`` with options builds a new decoder per call."""


def _load_json(data: bytes | None, path: str) -> Any:
    if data is None:
        raise ZnodeFormatError(path, "JSON data", "no data")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZnodeFormatError(path, "UTF-8 text", f"byte 0x{data[exc.start]:02x} at {exc.start}") from None
    try:
        return _JSON.decode(text)
    except json.JSONDecodeError as exc:
        raise ZnodeFormatError(path, "JSON", f"{exc.msg} at char {exc.pos} in {describe(text)}") from None
    except (ValueError, RecursionError) as exc:
        raise ZnodeFormatError(path, "JSON", str(exc)) from None


def _is_int32(value: object) -> bool:
    """A JSON integer in Int range; ``bool`` is an ``int`` in Python but never one for Kafka."""
    return isinstance(value, int) and not isinstance(value, bool) and _INT32[0] <= value <= _INT32[1]


def _check_int(value: object, path: str, what: str, bounds: tuple[int, int] = _INT32) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]:
        return value
    kind = "a 32-bit integer" if bounds == _INT32 else "a 64-bit integer"
    raise ZnodeFormatError(path, f"{what} as {kind}", describe(value))


def _check_str(value: object, path: str, what: str) -> str:
    if not isinstance(value, str):
        raise ZnodeFormatError(path, f"{what} as a JSON string", describe(value))
    return value


def _check_int_list(value: object, path: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZnodeFormatError(path, f"{what} as a JSON array of integers", describe(value))
    for item in value:
        if not _is_int32(item):
            raise ZnodeFormatError(path, f"{what} as a JSON array of integers", describe(value))
    return tuple(value)


def _check_decimal_string(value: object, path: str, what: str) -> int:
    """A JVM ``Long.toString`` written as a JSON string (timestamps, producer id blocks)."""
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        raise ZnodeFormatError(path, f"{what} as a string of decimal digits", describe(value))
    number = int(value)
    if not _INT64[0] <= number <= _INT64[1]:
        raise ZnodeFormatError(path, f"{what} within the 64-bit range", describe(value))
    return number


class _JsonObject:
    """A decoded JSON object plus the znode path, with typed getters that raise ZnodeFormatError."""

    __slots__ = ("path", "values", "where")

    def __init__(self, value: object, path: str, where: str = "the znode") -> None:
        if not isinstance(value, dict):
            raise ZnodeFormatError(path, f"{where} to be a JSON object", describe(value))
        self.values: dict[str, Any] = value
        self.path = path
        self.where = where

    def _label(self, key: str) -> str:
        return f"{key!r}" if self.where == "the znode" else f"{key!r} in {self.where}"

    def required(self, key: str) -> Any:
        if key not in self.values:
            raise ZnodeFormatError(self.path, f"key {self._label(key)}", f"keys {sorted(self.values)}")
        return self.values[key]

    def int32(self, key: str) -> int:
        return _check_int(self.required(key), self.path, self._label(key))

    def int64(self, key: str) -> int:
        return _check_int(self.required(key), self.path, self._label(key), _INT64)

    def string(self, key: str) -> str:
        return _check_str(self.required(key), self.path, self._label(key))

    def optional_int32(self, key: str) -> int | None:
        value = self.values.get(key)
        return None if value is None else _check_int(value, self.path, self._label(key))

    def optional_string(self, key: str) -> str | None:
        value = self.values.get(key)
        return None if value is None else _check_str(value, self.path, self._label(key))

    def int_list(self, key: str) -> tuple[int, ...]:
        return _check_int_list(self.required(key), self.path, self._label(key))

    def decimal_string(self, key: str) -> int:
        return _check_decimal_string(self.required(key), self.path, self._label(key))

    def object(self, key: str) -> _JsonObject:
        return _JsonObject(self.required(key), self.path, self._label(key))

    def only_keys(self, allowed: frozenset[str], consequence: str) -> None:
        extra = sorted(set(self.values) - allowed)
        if extra:
            raise ZnodeFormatError(
                self.path,
                f"only keys {sorted(allowed)} in {self.where} ({consequence})",
                f"extra keys {extra}",
            )


def _load_object(data: bytes | None, path: str) -> _JsonObject:
    return _JsonObject(_load_json(data, path), path)


def _match_path(pattern: re.Pattern[str], path: str, expected: str) -> re.Match[str]:
    match = pattern.fullmatch(path)
    if match is None:
        raise ZnodeFormatError(path, f"a znode path like {expected}", describe(path))
    return match


def _partition_number(text: str, path: str, what: str = "partition") -> int:
    if not _PARTITION_KEY.fullmatch(text) or int(text) > _INT32[1]:
        raise ZnodeFormatError(path, f"{what} as a non-negative decimal integer", describe(text))
    return int(text)


def _topic_from_path(topic: str, path: str) -> str:
    validate_topic_name(topic, source=path)
    return topic


# --------------------------------------------------------------------------------------------
# /brokers/ids/<id>
# --------------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)", re.DOTALL)
_DEFAULT_SECURITY_PROTOCOLS = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


class BrokerEndpoint(NamedTuple):
    """One advertised listener, parsed as ``EndPoint.createEndPoint`` does."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: str


class SupportedFeatureRange(NamedTuple):
    """A feature a broker supports (v5 ``features``): ``{"min_version":a,"max_version":b}``."""

    min_version: int
    max_version: int


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral): how a live broker is reached and what it supports.

    ``host``/``port`` are the first PLAINTEXT endpoint's (``None``/-1 without one); v1 (0.8) has
    no ``endpoints`` key, so :attr:`endpoints` is derived as ``PLAINTEXT://host:port``. The
    broker id comes from the path, the epoch (czxid) from the Stat; neither is in the data.
    """

    broker_id: int
    version: int
    host: str | None
    port: int
    endpoints: tuple[str, ...]
    jmx_port: int = -1
    timestamp_ms: int = 0
    rack: str | None = None
    listener_security_protocol_map: dict[str, str] | None = None
    features: dict[str, SupportedFeatureRange] | None = None

    PATH_PATTERN = re.compile(r"/brokers/ids/(-?[0-9]+)")

    @classmethod
    def for_listeners(
        cls,
        broker_id: int,
        endpoints: tuple[str, ...],
        listener_security_protocol_map: Mapping[str, str],
        *,
        timestamp_ms: int,
        version: int = 5,
        jmx_port: int = -1,
        rack: str | None = None,
        features: Mapping[str, SupportedFeatureRange] | None = None,
    ) -> BrokerRegistration:
        """What a broker with these advertised listeners registers (``BrokerInfo``/``Broker``).

        ``host``/``port`` come from the first PLAINTEXT endpoint; the written protocol map holds
        only the advertised listeners, in endpoint order, as Kafka derives it.
        """
        parsed = [_parse_endpoint(e, listener_security_protocol_map, "endpoints") for e in endpoints]
        plaintext = next((e for e in parsed if e.security_protocol == "PLAINTEXT"), None)
        host = plaintext.host if plaintext else None
        port = plaintext.port if plaintext else -1
        protocols = {e.listener_name: e.security_protocol for e in parsed}
        return cls(
            broker_id=broker_id,
            version=version,
            host=host,
            port=port,
            endpoints=tuple(endpoints),
            jmx_port=jmx_port,
            timestamp_ms=timestamp_ms,
            rack=rack,
            listener_security_protocol_map=protocols if version >= 4 else None,
            features=dict(features or {}) if version >= 5 else None,
        )

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> BrokerRegistration:
        broker_id = _check_int(
            int(_match_path(cls.PATH_PATTERN, path, "/brokers/ids/<id>")[1]), path, "broker id"
        )
        js = _load_object(data, path)
        version = js.int32("version")
        if version < 1:
            raise ZnodeFormatError(path, "a broker registration version >= 1", describe(version))
        jmx_port = js.int32("jmx_port")
        timestamp_ms = js.decimal_string("timestamp")
        protocol_map: dict[str, str] | None = None
        if version == 1:
            host: str | None = js.string("host")
            port = js.int32("port")
            endpoints: tuple[str, ...] = (f"PLAINTEXT://{host}:{port}",)
        else:
            host = js.required("host")
            if host is not None:
                host = _check_str(host, path, "'host'")
            port = js.int32("port")
            raw_endpoints = js.required("endpoints")
            if not isinstance(raw_endpoints, list) or not all(isinstance(e, str) for e in raw_endpoints):
                raise ZnodeFormatError(
                    path, "'endpoints' as a JSON array of strings", describe(raw_endpoints)
                )
            endpoints = tuple(raw_endpoints)
            if js.values.get("listener_security_protocol_map") is not None:
                protocols = js.object("listener_security_protocol_map")
                protocol_map = {name: protocols.string(name) for name in protocols.values}
                unknown = sorted(set(protocol_map.values()) - set(_DEFAULT_SECURITY_PROTOCOLS))
                if unknown:
                    raise ZnodeFormatError(
                        path,
                        f"security protocols in {sorted(_DEFAULT_SECURITY_PROTOCOLS)}",
                        describe(unknown),
                    )
            for endpoint in endpoints:
                _parse_endpoint(endpoint, protocol_map or _DEFAULT_SECURITY_PROTOCOLS, path)
        rack = js.optional_string("rack")
        features: dict[str, SupportedFeatureRange] | None = None
        if js.values.get("features") is not None:
            features = {}
            feature_map = js.object("features")
            for name in feature_map.values:
                versions = feature_map.object(name)
                features[name] = SupportedFeatureRange(
                    versions.int32("min_version"), versions.int32("max_version")
                )
        return cls(
            broker_id=broker_id,
            version=version,
            host=host,
            port=port,
            endpoints=endpoints,
            jmx_port=jmx_port,
            timestamp_ms=timestamp_ms,
            rack=rack,
            listener_security_protocol_map=protocol_map,
            features=features,
        )

    def encode(self) -> bytes:
        """As 3.x ``BrokerIdZNode.encode`` writes this version (v2, v4, v5; v3 likewise; v1 as 0.8)."""
        top: dict[str, Any] = {"version": self.version, "host": self.host, "port": self.port}
        if self.version >= 2:
            top["endpoints"] = list(self.endpoints)
        top["jmx_port"] = self.jmx_port
        top["timestamp"] = str(self.timestamp_ms)
        if self.version >= 3 and self.rack is not None:
            top["rack"] = self.rack
        if self.version >= 4:
            top["listener_security_protocol_map"] = _jackson.scala_immutable_map(
                self.listener_security_protocol_map or {}
            )
        if self.version >= 5:
            top["features"] = _jackson.java_hash_map(
                {
                    name: {"min_version": versions.min_version, "max_version": versions.max_version}
                    for name, versions in (self.features or {}).items()
                }
            )
        initial = _jackson.scala_mutable_map_literal_capacity(6 if self.version >= 2 else 5)
        return _jackson.dumps(_jackson.scala_mutable_map(top, initial))

    @property
    def parsed_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        protocols = self.listener_security_protocol_map or _DEFAULT_SECURITY_PROTOCOLS
        return tuple(_parse_endpoint(e, protocols, broker_path(self.broker_id)) for e in self.endpoints)


def _parse_endpoint(text: str, protocols: Mapping[str, str], source: str) -> BrokerEndpoint:
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ZnodeFormatError(source, "endpoints like LISTENER://host:port", describe(text))
    listener = match[1].upper()
    if listener not in protocols:
        raise ZnodeFormatError(
            source, f"listener {listener!r} in listener_security_protocol_map", describe(dict(protocols))
        )
    return BrokerEndpoint(listener, match[2] or None, int(match[3]), protocols[listener])


# --------------------------------------------------------------------------------------------
# /brokers/topics/<topic>
# --------------------------------------------------------------------------------------------

ReplicaMap: TypeAlias = dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: replica assignment, and in 2.8+ the topic id.

    ``topic_id`` is None exactly when the key is absent: 2.8+ writes ``"version":3`` with or
    without it, and Kafka never reads ``version``. Replica order is the preference order (first = preferred
    leader). ``adding_replicas``/``removing_replicas`` (2.4+) are non-empty while a reassignment
    runs; ``partitions`` then holds target ++ origin.
    """

    topic: str
    partitions: ReplicaMap
    topic_id: KafkaUuid | None = None
    adding_replicas: ReplicaMap = field(default_factory=dict)
    removing_replicas: ReplicaMap = field(default_factory=dict)
    version: int = 3

    PATH_PATTERN = re.compile(r"/brokers/topics/([^/]+)")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> TopicAssignment:
        topic = _topic_from_path(_match_path(cls.PATH_PATTERN, path, "/brokers/topics/<topic>")[1], path)
        js = _load_object(data, path)
        version = js.int32("version")
        partitions = _replica_map(js.object("partitions"))
        adding = _replica_map(js.object("adding_replicas")) if "adding_replicas" in js.values else {}
        removing = _replica_map(js.object("removing_replicas")) if "removing_replicas" in js.values else {}
        topic_id = None
        if "topic_id" in js.values:
            try:
                topic_id = KafkaUuid.parse(js.values["topic_id"], source="'topic_id'")
            except KafkaFormatError as exc:
                raise ZnodeFormatError(path, f"{exc.source} as {exc.expected}", exc.found) from None
        return cls(topic, partitions, topic_id, adding, removing, version)

    def encode(self) -> bytes:
        """Bytes as the writer of this ``version`` writes them (1: pre-2.4, 2: 2.4-2.7, else 2.8+)."""
        if self.version == 1:
            return self.encode_v1()
        if self.version == 2:
            return self.encode_v2()
        return self.encode_v3()

    def encode_v1(self) -> bytes:
        """Pre-2.4 writers (1.0 AdminUtils, old ``kafka-topics --zookeeper``): drops id and reassignment."""
        return _jackson.dumps({"version": 1, "partitions": _partitions_json(self.partitions)})

    def encode_v2(self) -> bytes:
        """2.4-2.7 ``TopicZNode.encode``: ``version`` 2, adding/removing always, never ``topic_id``."""
        return _jackson.dumps(
            {
                "version": 2,
                "partitions": _jackson.scala_mutable_map(_partitions_json(self.partitions)),
                "adding_replicas": _jackson.scala_mutable_map(_reassignment_json(self.adding_replicas)),
                "removing_replicas": _jackson.scala_mutable_map(_reassignment_json(self.removing_replicas)),
            }
        )

    def encode_v3(self) -> bytes:
        """2.8+ ``TopicZNode.encode``: ``version`` 3, ``topic_id`` only when known."""
        top: dict[str, Any] = {
            "version": 3,
            "partitions": _jackson.scala_mutable_map(_partitions_json(self.partitions)),
            "adding_replicas": _jackson.scala_mutable_map(_reassignment_json(self.adding_replicas)),
            "removing_replicas": _jackson.scala_mutable_map(_reassignment_json(self.removing_replicas)),
        }
        if self.topic_id is not None:
            top["topic_id"] = str(self.topic_id)
        return _jackson.dumps(_jackson.scala_mutable_map(top, _jackson.scala_mutable_map_literal_capacity(4)))

    @property
    def is_reassigning(self) -> bool:
        """True while a 2.4+ reassignment is in progress (API- or znode-initiated)."""
        return any(self.adding_replicas.values()) or any(self.removing_replicas.values())

    def target_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition is going: replicas minus ``removing_replicas``."""
        removing = set(self.removing_replicas.get(partition, ()))
        return tuple(r for r in self.partitions[partition] if r not in removing)

    def original_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition was before the reassignment: replicas minus ``adding_replicas``."""
        adding = set(self.adding_replicas.get(partition, ()))
        return tuple(r for r in self.partitions[partition] if r not in adding)


def _replica_map(js: _JsonObject) -> ReplicaMap:
    return {
        _partition_number(key, js.path, f"partition key {key!r} in {js.where}"): js.int_list(key)
        for key in js.values
    }


def _partitions_json(replicas: ReplicaMap) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in replicas.items()}


def _reassignment_json(replicas: ReplicaMap) -> dict[str, list[int]]:
    """``adding_replicas``/``removing_replicas``: Kafka writes only the non-empty lists."""
    return {str(p): list(r) for p, r in replicas.items() if r}


# --------------------------------------------------------------------------------------------
# /brokers/topics/<t>/partitions/<p>/state
# --------------------------------------------------------------------------------------------

RECOVERED = 0
RECOVERING = 1


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, ISR and epochs of one partition.

    The partition epoch is the znode's Stat version, not in the data. ``leader`` is
    :data:`NO_LEADER` (-1) when the partition is offline.
    """

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = RECOVERED
    version: int = 1

    PATH_PATTERN = re.compile(r"/brokers/topics/([^/]+)/partitions/([^/]+)/state")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> PartitionState:
        match = _match_path(cls.PATH_PATTERN, path, "/brokers/topics/<t>/partitions/<p>/state")
        topic = _topic_from_path(match[1], path)
        partition = _partition_number(match[2], path)
        js = _load_object(data, path)
        recovery = js.optional_int32("leader_recovery_state")
        if recovery is not None and recovery not in (RECOVERED, RECOVERING):
            raise ZnodeFormatError(path, "'leader_recovery_state' 0 or 1", describe(recovery))
        return cls(
            topic=topic,
            partition=partition,
            leader=js.int32("leader"),
            leader_epoch=js.int32("leader_epoch"),
            controller_epoch=js.int32("controller_epoch"),
            isr=js.int_list("isr"),
            leader_recovery_state=RECOVERED if recovery is None else recovery,
            version=js.int32("version"),
        )

    def encode(self) -> bytes:
        """As ``TopicPartitionStateZNode.encode``; ``leader_recovery_state`` only when RECOVERING (3.2+)."""
        state: dict[str, Any] = {
            "version": self.version,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != RECOVERED:
            state["leader_recovery_state"] = self.leader_recovery_state
        return _jackson.dumps(_jackson.scala_immutable_map(state))

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


# --------------------------------------------------------------------------------------------
# /controller, /controller_epoch
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller``: which broker is the active controller.

    v1 up to 3.3; v2 (3.4+) adds ``kraftControllerEpoch``, -1 from a ZK controller and the KRaft
    epoch when a KRaft controller holds it during migration (then the znode is persistent).
    """

    broker_id: int
    timestamp_ms: int
    version: int = 1
    kraft_controller_epoch: int | None = None

    @classmethod
    def decode(cls, data: bytes | None, path: str = CONTROLLER) -> ControllerRegistration:
        js = _load_object(data, path)
        return cls(
            broker_id=js.int32("brokerid"),
            timestamp_ms=js.decimal_string("timestamp"),
            version=js.int32("version"),
            kraft_controller_epoch=js.optional_int32("kraftControllerEpoch"),
        )

    def encode(self) -> bytes:
        registration: dict[str, Any] = {
            "version": self.version,
            "brokerid": self.broker_id,
            "timestamp": str(self.timestamp_ms),
        }
        if self.version >= 2:
            registration["kraftControllerEpoch"] = (
                -1 if self.kraft_controller_epoch is None else self.kraft_controller_epoch
            )
        return _jackson.dumps(registration)

    @property
    def is_kraft_controller(self) -> bool:
        return self.kraft_controller_epoch not in (None, -1)


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class ControllerEpoch:
    """``/controller_epoch``: a bare decimal integer (not JSON); its Stat version fences the controller."""

    epoch: int

    @classmethod
    def decode(cls, data: bytes | None, path: str = CONTROLLER_EPOCH) -> ControllerEpoch:
        if data is None:
            raise ZnodeFormatError(path, "a decimal controller epoch", "no data")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ZnodeFormatError(path, "UTF-8 text", describe(bytes(data))) from None
        if not _JAVA_INT.fullmatch(text) or not _INT32[0] <= int(text) <= _INT32[1]:
            raise ZnodeFormatError(path, "a 32-bit decimal integer (Integer.parseInt)", describe(text))
        return cls(int(text))

    def encode(self) -> bytes:
        return str(self.epoch).encode("ascii")


# --------------------------------------------------------------------------------------------
# /admin/...
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteTopicMarker:
    """``/admin/delete_topics/<topic>``: a deletion request; the topic is the path, data is unused."""

    topic: str

    PATH_PATTERN = re.compile(r"/admin/delete_topics/([^/]+)")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> DeleteTopicMarker:
        return cls(
            _topic_from_path(_match_path(cls.PATH_PATTERN, path, "/admin/delete_topics/<topic>")[1], path)
        )

    def encode(self) -> bytes:
        return b""

    @property
    def path(self) -> str:
        return delete_topic_path(self.topic)


class ReassignmentEntry(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


_REASSIGN_TOP_KEYS = frozenset({"version", "partitions"})
_REASSIGN_ENTRY_KEYS = frozenset({"topic", "partition", "replicas"})
_REASSIGN_IGNORED = (
    "Kafka 2.0+ controllers fail on unknown properties, log 'Ignoring partition reassignment due to "
    "invalid json' and leave the znode in place"
)


@dataclass(frozen=True)
class ReassignPartitions:
    """``/admin/reassign_partitions``: a one-shot ZK reassignment request.

    Decoded strictly like 2.0+ controllers (Jackson bean binding): an extra key anywhere, such
    as the tool's ``log_dirs``, makes Kafka ignore the whole znode, so it is an error here too.
    """

    partitions: tuple[ReassignmentEntry, ...]
    version: int = 1

    @classmethod
    def decode(cls, data: bytes | None, path: str = REASSIGN_PARTITIONS) -> ReassignPartitions:
        js = _load_object(data, path)
        js.only_keys(_REASSIGN_TOP_KEYS, _REASSIGN_IGNORED)
        version = js.int32("version")
        raw = js.required("partitions")
        if not isinstance(raw, list):
            raise ZnodeFormatError(path, "'partitions' as a JSON array", describe(raw))
        entries = []
        for i, item in enumerate(raw):
            entry = _JsonObject(item, path, f"partitions[{i}]")
            entry.only_keys(_REASSIGN_ENTRY_KEYS, _REASSIGN_IGNORED)
            entries.append(
                ReassignmentEntry(entry.string("topic"), entry.int32("partition"), entry.int_list("replicas"))
            )
        return cls(tuple(entries), version)

    def encode(self) -> bytes:
        return _jackson.dumps(
            {
                "version": self.version,
                "partitions": [
                    {"topic": e.topic, "partition": e.partition, "replicas": list(e.replicas)}
                    for e in self.partitions
                ],
            }
        )

    @property
    def targets(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Target replicas per partition (a later duplicate wins, as in Kafka's ``toMap``)."""
        return {TopicPartition(e.topic, e.partition): e.replicas for e in self.partitions}


def _decode_partition_list(js: _JsonObject) -> tuple[TopicPartition, ...]:
    raw = js.required("partitions")
    if not isinstance(raw, list):
        raise ZnodeFormatError(js.path, "'partitions' as a JSON array", describe(raw))
    result = []
    for i, item in enumerate(raw):
        entry = _JsonObject(item, js.path, f"partitions[{i}]")
        result.append(TopicPartition(entry.string("topic"), entry.int32("partition")))
    return tuple(result)


def _encode_partition_list(version: int, partitions: tuple[TopicPartition, ...]) -> bytes:
    return _jackson.dumps(
        {"version": version, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


@dataclass(frozen=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election``: partitions to move back to their preferred leader."""

    partitions: tuple[TopicPartition, ...]
    version: int = 1

    @classmethod
    def decode(cls, data: bytes | None, path: str = PREFERRED_REPLICA_ELECTION) -> PreferredReplicaElection:
        js = _load_object(data, path)
        return cls(_decode_partition_list(js), js.int32("version"))

    def encode(self) -> bytes:
        return _encode_partition_list(self.version, self.partitions)


# --------------------------------------------------------------------------------------------
# Sequential notifications
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IsrChangeNotification:
    """``/isr_change_notification/isr_change_<seq>``: written by leaders when IBP < 2.7-IV2."""

    sequence: int
    partitions: tuple[TopicPartition, ...]
    version: int = 1

    PATH_PATTERN = re.compile(r"/isr_change_notification/isr_change_(-?[0-9]+)")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> IsrChangeNotification:
        sequence = int(_match_path(cls.PATH_PATTERN, path, "/isr_change_notification/isr_change_<seq>")[1])
        js = _load_object(data, path)
        return cls(sequence, _decode_partition_list(js), js.int32("version"))

    def encode(self) -> bytes:
        return _encode_partition_list(self.version, self.partitions)

    @property
    def path(self) -> str:
        return isr_change_path(self.sequence)


LOG_DIR_FAILURE_EVENT = 1


@dataclass(frozen=True)
class LogDirEventNotification:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker lost a log dir (event 1)."""

    sequence: int
    broker_id: int
    event: int = LOG_DIR_FAILURE_EVENT
    version: int = 1

    PATH_PATTERN = re.compile(r"/log_dir_event_notification/log_dir_event_(-?[0-9]+)")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> LogDirEventNotification:
        sequence = int(
            _match_path(cls.PATH_PATTERN, path, "/log_dir_event_notification/log_dir_event_<seq>")[1]
        )
        js = _load_object(data, path)
        return cls(sequence, js.int32("broker"), js.int32("event"), js.int32("version"))

    def encode(self) -> bytes:
        return _jackson.dumps({"version": self.version, "broker": self.broker_id, "event": self.event})

    @property
    def path(self) -> str:
        return log_dir_event_path(self.sequence)


_V1_CHANGE_ENTITY_TYPES = ("topics", "clients")


@dataclass(frozen=True)
class ConfigChangeNotification:
    """``/config/changes/config_change_<seq>``: "re-read this entity's config".

    Version 2 carries ``entity_path`` (``<type>/<sanitized name>``); the legacy version 1
    carries ``entity_type`` (topics or clients) and ``entity_name``. Brokers reject any other.
    """

    sequence: int
    entity_type: str
    entity_name: str
    version: int = 2

    PATH_PATTERN = re.compile(r"/config/changes/config_change_(-?[0-9]+)")

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> ConfigChangeNotification:
        sequence = int(_match_path(cls.PATH_PATTERN, path, "/config/changes/config_change_<seq>")[1])
        js = _load_object(data, path)
        version = js.int32("version")
        if version == 1:
            entity_type = js.string("entity_type")
            if entity_type not in _V1_CHANGE_ENTITY_TYPES:
                raise ZnodeFormatError(
                    path, "'entity_type' 'topics' or 'clients' (version 1)", describe(entity_type)
                )
            return cls(sequence, entity_type, js.string("entity_name"), 1)
        if version == 2:
            entity_path = js.string("entity_path")
            entity_type, slash, entity_name = entity_path.partition("/")
            if not slash or entity_type not in CONFIG_ENTITY_TYPES:
                raise ZnodeFormatError(
                    path,
                    f"'entity_path' starting with one of {[t + '/' for t in CONFIG_ENTITY_TYPES]}",
                    describe(entity_path),
                )
            return cls(sequence, entity_type, entity_name, 2)
        raise ZnodeFormatError(path, "config change notification version 1 or 2", describe(version))

    def encode(self) -> bytes:
        if self.version == 1:
            return _jackson.dumps(
                {"version": 1, "entity_type": self.entity_type, "entity_name": self.entity_name}
            )
        return _jackson.dumps({"version": self.version, "entity_path": self.entity_path})

    @property
    def entity_path(self) -> str:
        return f"{self.entity_type}/{self.entity_name}"

    @property
    def path(self) -> str:
        return config_change_path(self.sequence)


# --------------------------------------------------------------------------------------------
# /config/<type>/<name>
# --------------------------------------------------------------------------------------------

_BROKER_ENTITY = re.compile(r"0|[1-9][0-9]*|-[1-9][0-9]*")
_ENTITY_PATH = re.compile(
    r"/config/(topics|clients|users|brokers|ips)/([^/]+)|/config/users/([^/]+)/clients/([^/]+)"
)


def _check_entity_name(entity_type: str, entity_name: str, source: str) -> None:
    if entity_type == "topics":
        validate_topic_name(entity_name, source)
    elif entity_type == "brokers":
        if entity_name != DEFAULT_ENTITY_NAME and not _BROKER_ENTITY.fullmatch(entity_name):
            raise ZnodeFormatError(source, "a broker id or '<default>'", describe(entity_name))
    elif entity_type == "users":
        user, slash, client = entity_name.partition("/clients/")
        if not user or "/" in user or (slash and (not client or "/" in client)):
            raise ZnodeFormatError(source, "'<user>' or '<user>/clients/<client>'", describe(entity_name))
    elif entity_type in CONFIG_ENTITY_TYPES:
        if not entity_name or "/" in entity_name:
            raise ZnodeFormatError(source, "a sanitized entity name without '/'", describe(entity_name))
    else:
        raise ZnodeFormatError(
            source, f"a config entity type in {CONFIG_ENTITY_TYPES}", describe(entity_type)
        )


@dataclass(frozen=True)
class ConfigEntity:
    """``/config/<type>/<name>``: dynamic config overrides; every value is a string.

    ``entity_name`` is the sanitized (URL-encoded) name as in the path; for a user's client
    quota it is ``<user>/clients/<client>`` under type ``users``, as Kafka passes it around.
    """

    entity_type: str
    entity_name: str
    config: dict[str, str]
    version: int = 1

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> ConfigEntity:
        match = _match_path(_ENTITY_PATH, path, "/config/<type>/<name>")
        if match[1] is not None:
            entity_type, entity_name = match[1], match[2]
        else:
            entity_type, entity_name = "users", f"{match[3]}/clients/{match[4]}"
        _check_entity_name(entity_type, entity_name, path)
        js = _load_object(data, path)
        config_js = js.object("config")
        config = {key: config_js.string(key) for key in config_js.values}
        return cls(entity_type, entity_name, config, js.int32("version"))

    def encode(self) -> bytes:
        """As ``ConfigEntityZNode.encode`` (the config is a java.util.Properties, Java 9+)."""
        return _jackson.dumps({"version": self.version, "config": _jackson.java_properties(self.config)})

    @property
    def path(self) -> str:
        return config_entity_path(self.entity_type, self.entity_name)


# --------------------------------------------------------------------------------------------
# /cluster/id, /feature, /migration, /latest_producer_id_block
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterId:
    """``/cluster/id``: ``{"version":"1","id":...}`` (the version is a JSON *string*)."""

    id: str
    version: str = "1"

    @classmethod
    def decode(cls, data: bytes | None, path: str = CLUSTER_ID) -> ClusterId:
        js = _load_object(data, path)
        return cls(js.string("id"), js.string("version"))

    def encode(self) -> bytes:
        return _jackson.dumps({"version": self.version, "id": self.id})


FEATURE_DISABLED = 0
FEATURE_ENABLED = 1


class FinalizedFeature(NamedTuple):
    """A cluster-wide finalized feature level; ``min_version_level`` exists only in /feature v1."""

    max_version_level: int
    min_version_level: int | None = None

    @property
    def min_level(self) -> int:
        """The v1 minimum; 3.3+ controllers finalize single levels and write min = max."""
        return self.max_version_level if self.min_version_level is None else self.min_version_level


@dataclass(frozen=True)
class FeatureZNode:
    """``/feature`` (2.7+, KIP-584): finalized features; status 1 = enabled, 0 = disabled.

    Kafka accepts only versions 1 and 2, requires ``status`` and ``features``, and v1 needs
    ``min_version_level`` (1 <= min <= max); v2 (IBP >= 3.3) has only ``max_version_level``.
    """

    version: int
    status: int
    features: dict[str, FinalizedFeature]

    @classmethod
    def decode(cls, data: bytes | None, path: str = FEATURE) -> FeatureZNode:
        js = _load_object(data, path)
        version = js.int32("version")
        if version not in (1, 2):
            raise ZnodeFormatError(path, "/feature version 1 or 2", describe(version))
        status = js.values.get("status")
        if status is None:
            raise ZnodeFormatError(path, "key 'status'", "none")
        status = _check_int(status, path, "'status'")
        if status not in (FEATURE_DISABLED, FEATURE_ENABLED):
            raise ZnodeFormatError(path, "'status' 0 (disabled) or 1 (enabled)", describe(status))
        if js.values.get("features") is None:
            raise ZnodeFormatError(path, "key 'features'", "none")
        feature_map = js.object("features")
        features = {}
        for name in feature_map.values:
            levels = feature_map.object(name)
            for key in levels.values:
                levels.int32(key)
            max_level = levels.int32("max_version_level")
            min_level = levels.int32("min_version_level") if version == 1 else None
            if (min_level is not None and not 1 <= min_level <= max_level) or max_level < 1:
                raise ZnodeFormatError(
                    path,
                    f"1 <= min_version_level <= max_version_level for feature {name!r}",
                    describe(levels.values),
                )
            features[name] = FinalizedFeature(max_level, min_level)
        return cls(version, status, features)

    def encode(self) -> bytes:
        """As a 3.3+ controller writes it (v1 when IBP < 3.3: ``max`` before ``min``)."""
        features = {}
        for name, feature in self.features.items():
            levels = {"max_version_level": feature.max_version_level}
            if self.version == 1:
                levels["min_version_level"] = feature.min_level
            features[name] = levels
        top = {
            "version": self.version,
            "status": self.status,
            "features": _jackson.scala_immutable_map(features),
        }
        return _jackson.dumps(_jackson.scala_mutable_map(top, _jackson.scala_mutable_map_literal_capacity(3)))

    def encode_kafka_2_7(self) -> bytes:
        """As a 2.7-3.2 controller writes it: always v1, features in a java.util.HashMap, ``min`` first."""
        features = _jackson.java_hash_map(
            {
                name: {
                    "min_version_level": feature.min_level,
                    "max_version_level": feature.max_version_level,
                }
                for name, feature in self.features.items()
            }
        )
        top = {"version": 1, "status": self.status, "features": features}
        return _jackson.dumps(_jackson.scala_mutable_map(top, _jackson.scala_mutable_map_literal_capacity(3)))


@dataclass(frozen=True)
class MigrationZNode:
    """``/migration`` (3.4+): the KRaft controller's migration state; only version 0 exists."""

    kraft_controller_id: int
    kraft_controller_epoch: int
    kraft_metadata_offset: int
    kraft_metadata_epoch: int
    version: int = 0

    @classmethod
    def decode(cls, data: bytes | None, path: str = MIGRATION) -> MigrationZNode:
        js = _load_object(data, path)
        version = js.int32("version")
        if version != 0:
            raise ZnodeFormatError(path, "/migration version 0", describe(version))
        return cls(
            kraft_controller_id=js.int32("kraft_controller_id"),
            kraft_controller_epoch=js.int32("kraft_controller_epoch"),
            kraft_metadata_offset=js.int64("kraft_metadata_offset"),
            kraft_metadata_epoch=js.int32("kraft_metadata_epoch"),
            version=version,
        )

    def encode(self) -> bytes:
        return _jackson.dumps(
            _jackson.scala_immutable_map(
                {
                    "version": self.version,
                    "kraft_controller_id": self.kraft_controller_id,
                    "kraft_controller_epoch": self.kraft_controller_epoch,
                    "kraft_metadata_offset": self.kraft_metadata_offset,
                    "kraft_metadata_epoch": self.kraft_metadata_epoch,
                }
            )
        )


@dataclass(frozen=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block of producer ids handed to a broker (strings)."""

    broker_id: int
    block_start: int
    block_end: int
    version: int = 1

    @classmethod
    def decode(cls, data: bytes | None, path: str = LATEST_PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        js = _load_object(data, path)
        block_start = js.decimal_string("block_start")
        block_end = js.decimal_string("block_end")
        if block_end < block_start:
            raise ZnodeFormatError(path, "block_end >= block_start", f"{block_start}..{block_end}")
        return cls(js.int32("broker"), block_start, block_end, js.int64("version"))

    def encode(self) -> bytes:
        return _jackson.dumps(
            {
                "version": self.version,
                "broker": self.broker_id,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1


# --------------------------------------------------------------------------------------------
# Dispatch by path
# --------------------------------------------------------------------------------------------

DecodedZnode: TypeAlias = (
    BrokerRegistration
    | TopicAssignment
    | PartitionState
    | ControllerRegistration
    | ControllerEpoch
    | DeleteTopicMarker
    | ReassignPartitions
    | PreferredReplicaElection
    | IsrChangeNotification
    | LogDirEventNotification
    | ConfigChangeNotification
    | ConfigEntity
    | ClusterId
    | FeatureZNode
    | MigrationZNode
    | ProducerIdBlock
)

_Decoder: TypeAlias = Callable[[bytes | None, str], DecodedZnode | None]

_CONTAINER_PATHS = frozenset(
    {
        "/",
        ADMIN,
        BROKERS,
        BROKER_IDS,
        BROKER_TOPICS,
        BROKER_SEQID,
        CLUSTER,
        CONFIG,
        CONFIG_CHANGES,
        CONSUMERS,
        DELETE_TOPICS,
        ISR_CHANGE_NOTIFICATION,
        LOG_DIR_EVENT_NOTIFICATION,
        *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
    }
)


def _decode_producer_id_block(data: bytes | None, path: str) -> ProducerIdBlock | None:
    """Brokers create the znode empty at startup; it gets data with the first block."""
    return None if not data else ProducerIdBlock.decode(data, path)


_FIXED_PATH_DECODERS: dict[str, _Decoder] = {
    CONTROLLER: ControllerRegistration.decode,
    CONTROLLER_EPOCH: ControllerEpoch.decode,
    REASSIGN_PARTITIONS: ReassignPartitions.decode,
    PREFERRED_REPLICA_ELECTION: PreferredReplicaElection.decode,
    CLUSTER_ID: ClusterId.decode,
    FEATURE: FeatureZNode.decode,
    MIGRATION: MigrationZNode.decode,
    LATEST_PRODUCER_ID_BLOCK: _decode_producer_id_block,
}


def _container(data: bytes | None, path: str) -> None:
    return None


# Ordered by how often each occurs in a big cluster (state znodes dominate). The child patterns
# are broad on purpose: a child Kafka cannot parse (``/brokers/ids/abc``) is a format error.
_PATTERN_DECODERS: tuple[tuple[str, re.Pattern[str], _Decoder], ...] = (
    (f"{BROKER_TOPICS}/", PartitionState.PATH_PATTERN, PartitionState.decode),
    (f"{BROKER_TOPICS}/", re.compile(r"/brokers/topics/[^/]+/partitions(?:/[^/]+)?"), _container),
    (f"{BROKER_TOPICS}/", TopicAssignment.PATH_PATTERN, TopicAssignment.decode),
    (f"{CONFIG_CHANGES}/", re.compile(r"/config/changes/[^/]+"), ConfigChangeNotification.decode),
    (f"{CONFIG}/", re.compile(r"/config/users/[^/]+/clients"), _container),
    (f"{CONFIG}/", _ENTITY_PATH, ConfigEntity.decode),
    (f"{BROKER_IDS}/", re.compile(r"/brokers/ids/[^/]+"), BrokerRegistration.decode),
    (f"{DELETE_TOPICS}/", DeleteTopicMarker.PATH_PATTERN, DeleteTopicMarker.decode),
    (
        f"{ISR_CHANGE_NOTIFICATION}/",
        re.compile(r"/isr_change_notification/[^/]+"),
        IsrChangeNotification.decode,
    ),
    (
        f"{LOG_DIR_EVENT_NOTIFICATION}/",
        re.compile(r"/log_dir_event_notification/[^/]+"),
        LogDirEventNotification.decode,
    ),
)


def decode_znode(path: str, data: bytes | None) -> DecodedZnode | bytes | None:
    """Decode a znode of a Kafka cluster by its path.

    Returns the codec's object; ``None`` for Kafka's data-less containers (``/brokers/ids``,
    ``/brokers/topics/<t>/partitions/<p>``, an empty ``/latest_producer_id_block``, ...); the raw
    ``data`` untouched for paths Kafka does not define here (ACLs, tokens, ``/zookeeper``,
    ``/consumers/...``). Raises ZnodeFormatError when a known znode holds malformed data.
    """
    fixed = _FIXED_PATH_DECODERS.get(path)
    if fixed is not None:
        return fixed(data, path)
    if path in _CONTAINER_PATHS:
        return None
    for prefix, pattern, decoder in _PATTERN_DECODERS:
        if path.startswith(prefix) and pattern.fullmatch(path):
            return decoder(data, path)
    return data
