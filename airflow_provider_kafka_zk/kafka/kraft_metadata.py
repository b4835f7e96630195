"""A KRaft controller's metadata log, byte for byte: its records, and the image they build (pure).

During a ZooKeeper-to-KRaft migration the controllers' ``__cluster_metadata-0`` log is where the
migration's own state lives (``ZkMigrationStateRecord``), where each broker registers -- as a
ZooKeeper-mode broker in migration mode or as a KRaft broker (``RegisterBrokerRecord.
IsMigratingZkBroker``) -- and where the metadata the dual-write mirrors into ZooKeeper is. The
migration DAG reads it over SSH like the partition logs (the newest snapshot, then the log after
it) and decodes it here.

Formats, as Apache Kafka 3.9.0 writes them (tag 3.9.0-rc3):

* a log segment or snapshot file holds v2 record batches (:mod:`.records`); control batches
  (``LeaderChangeMessage``, ``SnapshotHeaderRecord``/``SnapshotFooterRecord``, ``KRaftVersionRecord``,
  ``VotersRecord``) carry the Raft layer's own records and are skipped;
* each data record's value is ``AbstractApiMessageSerde`` framing (``server-common/.../serialization/
  AbstractApiMessageSerde.java``): unsigned varints frame version (1), api key and record version,
  then the message in the generated "flexible" form of ``metadata/src/main/resources/common/
  metadata/*.json`` (compact strings, arrays and bytes; a tagged-field section after every struct);
* a snapshot is ``<end offset %020d>-<epoch %010d>.checkpoint`` (``Snapshots.filenameFromSnapshotId``):
  it holds the image up to, not including, its end offset; the log supplies the records after it;
* ``quorum-state`` is JSON (``FileQuorumStateStore``: ``leaderId``, ``leaderEpoch`` ... and
  ``data_version``).

The image replays the records the way ``MetadataDelta`` does for what the migration needs:
brokers (``BrokerRegistration``), controllers, the migration state, features, topics and
partitions (``PartitionRegistration.merge``: a leader change bumps the leader epoch, every change
the partition epoch), configs, client quotas, ACLs, SCRAM credentials and delegation tokens.
The encoder writes the same bytes (tests and the simulator write logs a controller would).
"""

from __future__ import annotations

import enum
import json
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import KafkaFormatError, RecordFormatError
from .records import BatchHeader, Record, decode_records, encode_record_batch, iter_log_entries
from .uuid import KafkaUuid

__all__ = [
    "METADATA_PARTITION_DIR",
    "MetadataImage",
    "MetadataLogFile",
    "MetadataRecord",
    "MetadataRecordError",
    "QuorumState",
    "ZkMigrationState",
    "decode_metadata_record",
    "encode_metadata_batch",
    "encode_metadata_record",
    "metadata_log_reads",
    "read_metadata_files",
    "snapshot_file_name",
]

METADATA_PARTITION_DIR = "__cluster_metadata-0"
"""The metadata log's partition directory in ``metadata.log.dir`` (default: the first of ``log.dirs``)."""
QUORUM_STATE_FILE = "quorum-state"
FRAME_VERSION = 1
_SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint\Z")
_SEGMENT_NAME = re.compile(r"(\d{20})\.log\Z")


class MetadataRecordError(RecordFormatError):
    """A metadata record (or file) that is not what Kafka writes; names the file and the position."""


class ZkMigrationState(enum.IntEnum):
    """``ZkMigrationStateRecord.ZkMigrationState`` values (``ZkMigrationState.java``, 3.5+ numbering:
    3.4 wrote PRE_MIGRATION as 1 but never a MIGRATION record)."""

    NONE = 0
    MIGRATION = 1
    PRE_MIGRATION = 2
    POST_MIGRATION = 3


# ---------------------------------------------------------------------------------------------
# Schemas (metadata/src/main/resources/common/metadata/*.json at 3.9.0-rc3; every version flexible)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class F:
    """One field: ``kind`` is a primitive name, ``[]<primitive>``, or a tuple of sub-fields (an
    array of structs). ``since``: first version with the field; ``tag``: a tagged field (written
    only when it differs from ``default``); ``nullable``: null allowed (arrays, strings)."""

    name: str
    kind: str | tuple[F, ...]
    since: int = 0
    tag: int | None = None
    nullable: bool = False
    default: Any = None


_ENDPOINT = (F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16"))
_FEATURE = (F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16"))

SCHEMAS: dict[int, tuple[str, tuple[F, ...]]] = {
    0: (
        "RegisterBrokerRecord",
        (
            F("BrokerId", "int32"),
            F("IsMigratingZkBroker", "bool", since=2, default=False),
            F("IncarnationId", "uuid"),
            F("BrokerEpoch", "int64"),
            F("EndPoints", _ENDPOINT),
            F("Features", _FEATURE),
            F("Rack", "string", nullable=True),
            F("Fenced", "bool", default=True),
            F("InControlledShutdown", "bool", since=1, default=False),
            F("LogDirs", "[]uuid", since=3, tag=0, default=()),
        ),
    ),
    1: ("UnregisterBrokerRecord", (F("BrokerId", "int32"), F("BrokerEpoch", "int64"))),
    2: ("TopicRecord", (F("Name", "string"), F("TopicId", "uuid"))),
    3: (
        "PartitionRecord",
        (
            F("PartitionId", "int32", default=-1),
            F("TopicId", "uuid"),
            F("Replicas", "[]int32"),
            F("Isr", "[]int32"),
            F("RemovingReplicas", "[]int32"),
            F("AddingReplicas", "[]int32"),
            F("Leader", "int32", default=-1),
            F("LeaderRecoveryState", "int8", tag=0, default=0),
            F("LeaderEpoch", "int32", default=-1),
            F("PartitionEpoch", "int32", default=-1),
            F("Directories", "[]uuid", since=1),
            F("EligibleLeaderReplicas", "[]int32", since=2, tag=1, nullable=True),
            F("LastKnownElr", "[]int32", since=2, tag=2, nullable=True),
        ),
    ),
    4: (
        "ConfigRecord",
        (
            F("ResourceType", "int8"),
            F("ResourceName", "string"),
            F("Name", "string"),
            F("Value", "string", nullable=True),
        ),
    ),
    5: (
        "PartitionChangeRecord",
        (
            F("PartitionId", "int32", default=-1),
            F("TopicId", "uuid"),
            F("Isr", "[]int32", tag=0, nullable=True),
            F("Leader", "int32", tag=1, default=-2),
            F("Replicas", "[]int32", tag=2, nullable=True),
            F("RemovingReplicas", "[]int32", tag=3, nullable=True),
            F("AddingReplicas", "[]int32", tag=4, nullable=True),
            F("LeaderRecoveryState", "int8", tag=5, default=-1),
            F("Directories", "[]uuid", since=1, tag=8, nullable=True),
            F("EligibleLeaderReplicas", "[]int32", since=2, tag=6, nullable=True),
            F("LastKnownElr", "[]int32", since=2, tag=7, nullable=True),
        ),
    ),
    7: ("FenceBrokerRecord", (F("Id", "int32"), F("Epoch", "int64"))),
    8: ("UnfenceBrokerRecord", (F("Id", "int32"), F("Epoch", "int64"))),
    9: ("RemoveTopicRecord", (F("TopicId", "uuid"),)),
    10: (
        "DelegationTokenRecord",
        (
            F("Owner", "string"),
            F("Requester", "string"),
            F("Renewers", "[]string"),
            F("IssueTimestamp", "int64"),
            F("MaxTimestamp", "int64"),
            F("ExpirationTimestamp", "int64"),
            F("TokenId", "string"),
        ),
    ),
    11: (
        "UserScramCredentialRecord",
        (
            F("Name", "string"),
            F("Mechanism", "int8"),
            F("Salt", "bytes"),
            F("StoredKey", "bytes"),
            F("ServerKey", "bytes"),
            F("Iterations", "int32"),
        ),
    ),
    12: ("FeatureLevelRecord", (F("Name", "string"), F("FeatureLevel", "int16"))),
    14: (
        "ClientQuotaRecord",
        (
            F("Entity", (F("EntityType", "string"), F("EntityName", "string", nullable=True))),
            F("Key", "string"),
            F("Value", "float64"),
            F("Remove", "bool"),
        ),
    ),
    15: (
        "ProducerIdsRecord",
        (F("BrokerId", "int32"), F("BrokerEpoch", "int64", default=-1), F("NextProducerId", "int64")),
    ),
    17: (
        "BrokerRegistrationChangeRecord",
        (
            F("BrokerId", "int32"),
            F("BrokerEpoch", "int64"),
            F("Fenced", "int8", tag=0, default=0),
            F("InControlledShutdown", "int8", since=1, tag=1, default=0),
            F("LogDirs", "[]uuid", since=2, tag=2, default=()),
        ),
    ),
    18: (
        "AccessControlEntryRecord",
        (
            F("Id", "uuid"),
            F("ResourceType", "int8"),
            F("ResourceName", "string"),
            F("PatternType", "int8"),
            F("Principal", "string"),
            F("Host", "string"),
            F("Operation", "int8"),
            F("PermissionType", "int8"),
        ),
    ),
    19: ("RemoveAccessControlEntryRecord", (F("Id", "uuid"),)),
    20: ("NoOpRecord", ()),
    21: ("ZkMigrationStateRecord", (F("ZkMigrationState", "int8"),)),
    22: ("RemoveUserScramCredentialRecord", (F("Name", "string"), F("Mechanism", "int8"))),
    23: ("BeginTransactionRecord", (F("Name", "string", nullable=True),)),
    24: ("EndTransactionRecord", ()),
    25: ("AbortTransactionRecord", (F("Reason", "string", nullable=True),)),
    26: ("RemoveDelegationTokenRecord", (F("TokenId", "string"),)),
    27: (
        "RegisterControllerRecord",
        (
            F("ControllerId", "int32"),
            F("IncarnationId", "uuid"),
            F("ZkMigrationReady", "bool"),
            F("EndPoints", _ENDPOINT),
            F("Features", _FEATURE),
        ),
    ),
}
API_KEYS: dict[str, int] = {name: key for key, (name, _) in SCHEMAS.items()}
_ZERO_UUID = KafkaUuid(bytes(16))


@dataclass(frozen=True)
class MetadataRecord:
    """One decoded metadata record: its name, api key, version, fields (by their JSON names) and,
    when it came from a file, its offset there."""

    api_key: int
    name: str
    version: int
    fields: Mapping[str, Any]
    offset: int = -1

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | memoryview, source: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.source = source

    def fail(self, expected: str, found: str | None = None) -> MetadataRecordError:
        return MetadataRecordError(self.source, expected, found, position=self.pos)

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{n} more byte(s)", f"{len(self.data) - self.pos} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.fail("an unsigned varint of at most 5 bytes")

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]


_PRIMITIVES = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "float64": ">d"}


def _read_value(reader: _Reader, kind: str, nullable: bool, what: str) -> Any:
    if kind.startswith("[]"):
        count = reader.uvarint() - 1
        if count < 0:
            if not nullable:
                raise reader.fail(f"a non-null array {what}", "null")
            return None
        return tuple(_read_value(reader, kind[2:], False, what) for _ in range(count))
    if kind in _PRIMITIVES:
        return reader.unpack(_PRIMITIVES[kind])
    if kind == "bool":
        byte = reader.take(1)[0]
        if byte not in (0, 1):
            raise reader.fail(f"a boolean {what}", str(byte))
        return bool(byte)
    if kind == "uuid":
        return KafkaUuid(bytes(reader.take(16)))
    if kind in ("string", "bytes"):
        length = reader.uvarint() - 1
        if length < 0:
            if not nullable:
                raise reader.fail(f"a non-null {kind} {what}", "null")
            return None
        raw = bytes(reader.take(length))
        if kind == "bytes":
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise reader.fail(f"UTF-8 {what}", repr(raw[:40])) from None
    raise AssertionError(f"unknown kind {kind}")


def _default(f: F) -> Any:
    if f.default is not None:
        return f.default
    if f.nullable:
        return None
    if isinstance(f.kind, tuple) or f.kind.startswith("[]"):
        return ()
    return {"bool": False, "uuid": _ZERO_UUID, "string": "", "bytes": b""}.get(f.kind, 0)  # type: ignore[arg-type]


def decode_metadata_record(value: bytes | memoryview, source: str, offset: int = -1) -> MetadataRecord:
    """One record value as ``MetadataRecordSerde.read`` decodes it.

    :param value: the record's value bytes.
    :param source: the file (and offset) for messages.
    :param offset: the record's offset in the log.
    :raises MetadataRecordError: an unknown frame version or api key, a record cut short, bytes left over.
    """
    reader = _Reader(value, source)
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise reader.fail(f"metadata record frame version {FRAME_VERSION}", str(frame))
    api_key = reader.uvarint()
    version = reader.uvarint()
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise reader.fail("a metadata record type Kafka 3.9 writes", f"api key {api_key}")
    name, fields = schema
    decoded = _decode_fields(reader, fields, version)
    if reader.pos != len(reader.data):
        raise reader.fail(f"no bytes after {name}", f"{len(reader.data) - reader.pos} byte(s)")
    return MetadataRecord(api_key, name, version, decoded, offset)


def _decode_fields(reader: _Reader, fields: Sequence[F], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged = {f.tag: f for f in fields if f.tag is not None and version >= f.since}
    for f in fields:
        if version < f.since or f.tag is not None:
            out[f.name] = _default(f)
        else:
            out[f.name] = _decode_value(reader, f, version)
    count = reader.uvarint()
    last = -1
    for _ in range(count):
        tag = reader.uvarint()
        size = reader.uvarint()
        if tag <= last:
            raise reader.fail("tagged fields in ascending order", f"tag {tag} after {last}")
        last = tag
        body = reader.take(size)
        f = tagged.get(tag)
        if f is None:
            continue  # a tag this reader does not know: Kafka keeps it as an unknown tagged field
        sub = _Reader(body, reader.source)
        out[f.name] = _decode_value(sub, f, version)
        if sub.pos != len(body):
            raise reader.fail(f"tagged field {f.name} of {size} bytes", f"{sub.pos} bytes read")
    return out


def _decode_value(reader: _Reader, f: F, version: int) -> Any:
    if isinstance(f.kind, tuple):
        count = reader.uvarint() - 1
        if count < 0:
            if not f.nullable:
                raise reader.fail(f"a non-null array {f.name}", "null")
            return None
        return tuple(_decode_fields(reader, f.kind, version) for _ in range(count))
    return _read_value(reader, f.kind, f.nullable, f.name)


# ---------------------------------------------------------------------------------------------
# Encoding (tests, the simulator)
# ---------------------------------------------------------------------------------------------


def _uvarint(value: int, out: bytearray) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_value(
    kind: str | tuple[F, ...], value: Any, nullable: bool, version: int, out: bytearray
) -> None:
    if isinstance(kind, tuple) or kind.startswith("[]"):
        if value is None:
            if not nullable:
                raise ValueError("null for a non-nullable array")
            _uvarint(0, out)
            return
        items = list(value)
        _uvarint(len(items) + 1, out)
        for item in items:
            if isinstance(kind, tuple):
                _encode_fields(kind, item, version, out)
            else:
                _encode_value(kind[2:], item, False, version, out)
        return
    if kind in _PRIMITIVES:
        out += struct.pack(_PRIMITIVES[kind], value)
    elif kind == "bool":
        out.append(1 if value else 0)
    elif kind == "uuid":
        uuid = value if isinstance(value, KafkaUuid) else KafkaUuid.parse(value)
        out += uuid.raw
    elif kind in ("string", "bytes"):
        if value is None:
            if not nullable:
                raise ValueError(f"null for a non-nullable {kind}")
            _uvarint(0, out)
            return
        raw = value.encode("utf-8") if kind == "string" else bytes(value)
        _uvarint(len(raw) + 1, out)
        out += raw
    else:
        raise AssertionError(f"unknown kind {kind}")


def _encode_fields(fields: Sequence[F], values: Mapping[str, Any], version: int, out: bytearray) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if version < f.since:
            continue
        value = values.get(f.name, _default(f))
        if f.tag is None:
            _encode_value(f.kind, value, f.nullable, version, out)
            continue
        default = _default(f)
        if value == default or (isinstance(default, tuple) and tuple(value or ()) == default):
            continue
        body = bytearray()
        _encode_value(f.kind, value, f.nullable, version, body)
        tagged.append((f.tag, bytes(body)))
    _uvarint(len(tagged), out)
    for tag, body in sorted(tagged):
        _uvarint(tag, out)
        _uvarint(len(body), out)
        out += body


def encode_metadata_record(name: str, version: int, fields: Mapping[str, Any]) -> bytes:
    """The value bytes of a metadata record, as ``MetadataRecordSerde.write`` frames it.

    :param name: the record's name (``RegisterBrokerRecord`` ...).
    :param version: its version.
    :param fields: its fields by JSON name (absent: the default).
    """
    api_key = API_KEYS[name]
    out = bytearray()
    _uvarint(FRAME_VERSION, out)
    _uvarint(api_key, out)
    _uvarint(version, out)
    _encode_fields(SCHEMAS[api_key][1], fields, version, out)
    return bytes(out)


def encode_metadata_batch(
    records: Sequence[tuple[str, int, Mapping[str, Any]]], base_offset: int, epoch: int, timestamp: int = 0
) -> bytes:
    """One uncompressed v2 batch of metadata records (the quorum leader's ``partition_leader_epoch``)."""
    return encode_record_batch(
        [
            Record(base_offset + i, timestamp, None, encode_metadata_record(name, version, values))
            for i, (name, version, values) in enumerate(records)
        ],
        partition_leader_epoch=epoch,
    )


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """``Snapshots.filenameFromSnapshotId``: ``%020d-%010d.checkpoint``."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataLogFile:
    """A file of ``__cluster_metadata-0`` as listed on the controller's host.

    :param data: its bytes when read (None: listed only); ``start``: the byte position the read began at.
    """

    name: str
    size: int
    data: bytes | None = None
    start: int = 0

    @property
    def snapshot_id(self) -> tuple[int, int] | None:
        match = _SNAPSHOT_NAME.match(self.name)
        return (int(match[1]), int(match[2])) if match else None

    @property
    def segment_base(self) -> int | None:
        match = _SEGMENT_NAME.match(self.name)
        return int(match[1]) if match else None


def metadata_log_reads(listing: Sequence[MetadataLogFile], budget_bytes: int) -> list[str]:
    """Which files to fetch: the newest snapshot and every segment that may hold records after it,
    newest first until ``budget_bytes`` (a segment older than the snapshot's end offset is skipped
    only when the next segment starts at or before that offset).

    :raises MetadataRecordError: the files needed exceed the budget (raise it, or read on the host).
    """
    snapshots = sorted(
        (f for f in listing if f.snapshot_id is not None), key=lambda f: f.snapshot_id or (0, 0)
    )
    end_offset = snapshots[-1].snapshot_id[0] if snapshots and snapshots[-1].snapshot_id else 0
    segments = sorted((f for f in listing if f.segment_base is not None), key=lambda f: f.segment_base or 0)
    wanted: list[str] = [snapshots[-1].name] if snapshots else []
    for i, f in enumerate(segments):
        next_base = segments[i + 1].segment_base if i + 1 < len(segments) else None
        if next_base is not None and next_base <= end_offset:
            continue  # every record of this segment is below the snapshot's end
        wanted.append(f.name)
    sizes = {f.name: f.size for f in listing}
    total = sum(sizes[n] for n in wanted)
    if total > budget_bytes:
        raise MetadataRecordError(
            METADATA_PARTITION_DIR,
            f"at most {budget_bytes} bytes of snapshot and log to read",
            f"{total} bytes ({', '.join(wanted)})",
        )
    return wanted


def iter_metadata_records(data: bytes, source: str, *, from_offset: int = 0) -> Iterator[MetadataRecord]:
    """Every data record of a segment or snapshot file, in order; control batches skipped.

    :raises MetadataRecordError: a batch that fails its CRC, a record Kafka would not write.
    """
    for entry in iter_log_entries(data, source, verify_crc=True):
        if not isinstance(entry, BatchHeader):
            raise MetadataRecordError(
                source, "v2 record batches", f"a magic {entry.magic} entry", position=entry.position
            )
        if entry.crc_valid is False:
            raise MetadataRecordError(
                source,
                f"a valid CRC for the batch at offset {entry.base_offset}",
                "a mismatch",
                position=entry.position,
            )
        if entry.is_control or entry.last_offset < from_offset:
            continue
        for record in decode_records(data, entry, source):
            if record.offset < from_offset or record.value is None:
                continue
            yield decode_metadata_record(record.value, f"{source} offset {record.offset}", record.offset)


def read_metadata_files(files: Iterable[MetadataLogFile], source: str) -> list[MetadataRecord]:
    """The records of the newest snapshot, then of the log after its end offset, in offset order.

    :param files: the files read (``data`` set); other files are ignored.
    :param source: the directory, for messages.
    """
    read = [f for f in files if f.data is not None]
    snapshots = sorted((f for f in read if f.snapshot_id is not None), key=lambda f: f.snapshot_id or (0, 0))
    segments = sorted((f for f in read if f.segment_base is not None), key=lambda f: f.segment_base or 0)
    out: list[MetadataRecord] = []
    end_offset = 0
    if snapshots:
        snapshot = snapshots[-1]
        end_offset = (snapshot.snapshot_id or (0, 0))[0]
        out.extend(iter_metadata_records(snapshot.data or b"", f"{source}/{snapshot.name}"))
    for segment in segments:
        out.extend(
            iter_metadata_records(segment.data or b"", f"{source}/{segment.name}", from_offset=end_offset)
        )
    return out


@dataclass(frozen=True)
class QuorumState:
    """``quorum-state``: the Raft leader and epoch this node last knew (-1: none)."""

    leader_id: int
    leader_epoch: int

    @classmethod
    def parse(cls, data: bytes | str, source: str) -> QuorumState:
        try:
            js = json.loads(data)
            return cls(int(js.get("leaderId", -1)), int(js.get("leaderEpoch", -1)))
        except (ValueError, TypeError, AttributeError) as exc:
            raise KafkaFormatError(
                source, "quorum-state JSON with leaderId and leaderEpoch", str(exc)
            ) from None


# ---------------------------------------------------------------------------------------------
# The image
# ---------------------------------------------------------------------------------------------

CONFIG_RESOURCE_TYPES = {2: "topic", 4: "broker", 8: "broker_logger", 16: "client_metrics", 32: "group"}
"""``ConfigResource.Type`` ids."""
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""``ScramMechanism`` types."""


@dataclass(frozen=True)
class BrokerRegistration:
    """A broker as the KRaft quorum knows it (``BrokerRegistration``): ``migrating_zk_broker`` is a
    ZooKeeper-mode broker in migration mode; a KRaft broker registers with it false."""

    broker_id: int
    epoch: int
    incarnation_id: str
    migrating_zk_broker: bool
    fenced: bool
    in_controlled_shutdown: bool
    rack: str | None
    endpoints: tuple[tuple[str, str, int], ...]
    offset: int

    @property
    def kraft_broker(self) -> bool:
        """Registered as a KRaft broker (what finalization needs of every broker, KAFKA-20960)."""
        return not self.migrating_zk_broker


@dataclass(frozen=True)
class PartitionImage:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()


@dataclass
class MetadataImage:
    """What the records replay into (see the module docstring). ``last_offset``: the highest
    offset replayed (-1: none)."""

    features: dict[str, int] = field(default_factory=dict)
    zk_migration_state: ZkMigrationState | None = None
    zk_migration_state_offset: int = -1
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controllers: dict[int, bool] = field(default_factory=dict)  # id -> ZkMigrationReady
    topics: dict[str, str] = field(default_factory=dict)  # name -> id
    partitions: dict[tuple[str, int], PartitionImage] = field(default_factory=dict)  # (topic id, p)
    configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    acls: dict[str, dict[str, Any]] = field(default_factory=dict)
    scram: dict[tuple[str, str], int] = field(default_factory=dict)  # (user, mechanism) -> iterations
    delegation_tokens: dict[str, str] = field(default_factory=dict)  # token id -> owner
    next_producer_id: int | None = None
    last_offset: int = -1

    @classmethod
    def replay(cls, records: Iterable[MetadataRecord]) -> MetadataImage:
        image = cls()
        for record in records:
            image.apply(record)
        return image

    @property
    def metadata_version(self) -> int | None:
        return self.features.get("metadata.version")

    def topic_names(self) -> dict[str, str]:
        """Topic id -> name."""
        return {i: n for n, i in self.topics.items()}

    def apply(self, record: MetadataRecord) -> None:
        f = record.fields
        name = record.name
        self.last_offset = max(self.last_offset, record.offset)
        if name == "FeatureLevelRecord":
            self.features[f["Name"]] = int(f["FeatureLevel"])
        elif name == "ZkMigrationStateRecord":
            try:
                self.zk_migration_state = ZkMigrationState(int(f["ZkMigrationState"]))
            except ValueError:
                raise MetadataRecordError(
                    f"offset {record.offset}", "a ZkMigrationState value 0-3", str(f["ZkMigrationState"])
                ) from None
            self.zk_migration_state_offset = record.offset
        elif name == "RegisterBrokerRecord":
            self.brokers[int(f["BrokerId"])] = BrokerRegistration(
                int(f["BrokerId"]),
                int(f["BrokerEpoch"]),
                str(f["IncarnationId"]),
                bool(f["IsMigratingZkBroker"]),
                bool(f["Fenced"]),
                bool(f["InControlledShutdown"]),
                f["Rack"],
                tuple((e["Name"], e["Host"], int(e["Port"])) for e in f["EndPoints"]),
                record.offset,
            )
        elif name == "UnregisterBrokerRecord":
            current = self.brokers.get(int(f["BrokerId"]))
            if current is not None and current.epoch == int(f["BrokerEpoch"]):
                del self.brokers[current.broker_id]
        elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            self._change_broker(int(f["Id"]), int(f["Epoch"]), fenced=name == "FenceBrokerRecord")
        elif name == "BrokerRegistrationChangeRecord":
            fenced = {-1: False, 0: None, 1: True}.get(int(f["Fenced"]))
            shutdown = True if int(f["InControlledShutdown"]) == 1 else None
            self._change_broker(int(f["BrokerId"]), int(f["BrokerEpoch"]), fenced=fenced, shutdown=shutdown)
        elif name == "RegisterControllerRecord":
            self.controllers[int(f["ControllerId"])] = bool(f["ZkMigrationReady"])
        elif name == "TopicRecord":
            self.topics[f["Name"]] = str(f["TopicId"])
        elif name == "RemoveTopicRecord":
            topic_id = str(f["TopicId"])
            self.topics = {n: i for n, i in self.topics.items() if i != topic_id}
            self.partitions = {k: v for k, v in self.partitions.items() if k[0] != topic_id}
            self.configs.pop(("topic", self._name_of(topic_id) or ""), None)
        elif name == "PartitionRecord":
            self.partitions[(str(f["TopicId"]), int(f["PartitionId"]))] = PartitionImage(
                tuple(f["Replicas"]),
                tuple(f["Isr"]),
                int(f["Leader"]),
                int(f["LeaderEpoch"]),
                int(f["PartitionEpoch"]),
                tuple(f["RemovingReplicas"]),
                tuple(f["AddingReplicas"]),
            )
        elif name == "PartitionChangeRecord":
            key = (str(f["TopicId"]), int(f["PartitionId"]))
            current_p = self.partitions.get(key)
            if current_p is None:
                raise MetadataRecordError(
                    f"offset {record.offset}", f"a PartitionRecord before this change of {key}", "none"
                )
            leader_changed = int(f["Leader"]) != -2
            self.partitions[key] = PartitionImage(
                current_p.replicas if f["Replicas"] is None else tuple(f["Replicas"]),
                current_p.isr if f["Isr"] is None else tuple(f["Isr"]),
                int(f["Leader"]) if leader_changed else current_p.leader,
                current_p.leader_epoch + 1 if leader_changed else current_p.leader_epoch,
                current_p.partition_epoch + 1,
                current_p.removing if f["RemovingReplicas"] is None else tuple(f["RemovingReplicas"]),
                current_p.adding if f["AddingReplicas"] is None else tuple(f["AddingReplicas"]),
            )
        elif name == "ConfigRecord":
            kind = CONFIG_RESOURCE_TYPES.get(int(f["ResourceType"]), str(f["ResourceType"]))
            entity = self.configs.setdefault((kind, f["ResourceName"]), {})
            if f["Value"] is None:
                entity.pop(f["Name"], None)
            else:
                entity[f["Name"]] = f["Value"]
        elif name == "ClientQuotaRecord":
            entity_key = tuple(sorted((e["EntityType"], e["EntityName"]) for e in f["Entity"]))
            quotas = self.client_quotas.setdefault(entity_key, {})
            if f["Remove"]:
                quotas.pop(f["Key"], None)
            else:
                quotas[f["Key"]] = float(f["Value"])
        elif name == "AccessControlEntryRecord":
            self.acls[str(f["Id"])] = {k: v for k, v in f.items() if k != "Id"}
        elif name == "RemoveAccessControlEntryRecord":
            self.acls.pop(str(f["Id"]), None)
        elif name == "UserScramCredentialRecord":
            mechanism = SCRAM_MECHANISMS.get(int(f["Mechanism"]), str(f["Mechanism"]))
            self.scram[(f["Name"], mechanism)] = int(f["Iterations"])
        elif name == "RemoveUserScramCredentialRecord":
            mechanism = SCRAM_MECHANISMS.get(int(f["Mechanism"]), str(f["Mechanism"]))
            self.scram.pop((f["Name"], mechanism), None)
        elif name == "DelegationTokenRecord":
            self.delegation_tokens[f["TokenId"]] = f["Owner"]
        elif name == "RemoveDelegationTokenRecord":
            self.delegation_tokens.pop(f["TokenId"], None)
        elif name == "ProducerIdsRecord":
            self.next_producer_id = int(f["NextProducerId"])

    def _name_of(self, topic_id: str) -> str | None:
        return next((n for n, i in self.topics.items() if i == topic_id), None)

    def _change_broker(
        self, broker_id: int, epoch: int, *, fenced: bool | None, shutdown: bool | None = None
    ) -> None:
        current = self.brokers.get(broker_id)
        if current is None or current.epoch != epoch:
            return  # a change for an older registration: ignored, as ClusterControlManager does
        from dataclasses import replace

        self.brokers[broker_id] = replace(
            current,
            fenced=current.fenced if fenced is None else fenced,
            in_controlled_shutdown=current.in_controlled_shutdown if shutdown is None else shutdown,
        )
