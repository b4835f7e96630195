"""Broker inventory, the pure half: raw records from a broker host -> typed rows, facts, coverage.

The broker host only lists, stats and reads small files (``hooks/_broker_inventory_remote.py``);
everything it sends comes back raw and is parsed here with the core parsers (``logdir``,
``records``), so there is one implementation of each format and a Spark executor can turn stored
raw records into the same rows. No Airflow, no I/O.

Raw bytes travel as ``bytes.decode("utf-8", "surrogateescape")`` strings; :func:`raw_bytes` turns
them back into the exact bytes, so hostile or non-UTF-8 names survive untouched.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ._bulk import instance_maker
from .errors import KafkaFormatError, describe
from .logdir import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CleanShutdownMarker,
    DirKind,
    EpochEntry,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
    parse_java_int,
    parse_java_properties,
    parse_partition_dir_name,
)
from .records import parse_segment_file_name
from .versions import KafkaVersion

__all__ = [
    "BROKER_SETTINGS",
    "CHECKPOINT_FILES",
    "KAFKA_MAIN_CLASSES",
    "LOG_DIR_FILES",
    "OVERRIDE_KEYS",
    "PARTITION_FILES",
    "PARTITION_ROW_FIELDS",
    "BrokerFacts",
    "BrokerInventory",
    "FileEntry",
    "FileRead",
    "IdentityCheck",
    "InventoryAssembler",
    "InventoryCoverage",
    "InventoryRecordError",
    "LogDirInventory",
    "PartitionDirInventory",
    "RemoteFatalError",
    "SegmentFiles",
    "ServerPropertiesCandidate",
    "ServerPropertiesSelectionError",
    "ZooKeeperView",
    "age_reference_ms",
    "choose_server_properties",
    "effective_broker_id",
    "identity_checks",
    "kafka_version_from_jars",
    "raw_bytes",
]

CHECKPOINT_FILES = (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
LOG_DIR_FILES = (META_PROPERTIES, CLEAN_SHUTDOWN_FILE, *CHECKPOINT_FILES)
PARTITION_FILES = (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT)
# kafka-server-start.sh runs kafka.Kafka; Confluent Platform's wrapper class takes the same arguments.
KAFKA_MAIN_CLASSES = ("kafka.Kafka", "io.confluent.support.metrics.SupportedKafka")
DEFAULT_LOG_DIR = "/tmp/kafka-logs"  # noqa: S108 - Kafka's own default for log.dir
_JAVA_TRIM = "".join(map(chr, range(0x21)))  # String.trim(): every char <= ' '
_CSV_SPLIT = re.compile(r"\s*,\s*")  # CoreUtils.parseCsvList
_KAFKA_JAR = re.compile(r"kafka_\d+\.\d+-(.+)\.jar")
_PRE_1_0_RELEASE = re.compile(r"0\.\d+\.\d+\.\d+")
_TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")
_NO_OFFSETS: Mapping[tuple[str, int], int] = {}
_KIND_NAMES = {kind: kind.name.lower() for kind in DirKind}
_NAME_OF = operator.attrgetter("name")


class InventoryRecordError(ValueError):
    """A line from the broker host is not a record of the inventory protocol."""


class RemoteFatalError(RuntimeError):
    """The broker-side script stopped (``kind``: no_python3, python_too_old, remote_error)."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


class ServerPropertiesSelectionError(ValueError):
    """No (or more than one) server.properties on the host belongs to the requested broker."""


def raw_bytes(value: str) -> bytes:
    """The exact bytes a protocol string stands for (inverse of decode('utf-8', 'surrogateescape'))."""
    return value.encode("utf-8", "surrogateescape")


def readable_name(value: str) -> str:
    """A name as valid UTF-8 text for tables and messages; undecodable bytes shown as ``\\xNN``."""
    if value.isascii():  # no escaped byte in it (those are lone surrogates): already what it shows
        return value
    return raw_bytes(value).decode("utf-8", "backslashreplace")


def _get(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InventoryRecordError(f"{what}: expected {key!r} as {kind}, found {describe(value)}")
    return value


# ---------------------------------------------------------------------------------------------
# Files read on the broker host
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRead:
    """One small file as the host saw it: absent, read (``data``), or not readable (``error``)."""

    present: bool
    data: bytes | None = None
    size: int | None = None
    error: str | None = None

    @classmethod
    def from_record(cls, value: Any, what: str) -> FileRead:
        if value is None:
            return cls(present=False)
        if not isinstance(value, Mapping):
            raise InventoryRecordError(f"{what}: expected a file object, found {describe(value)}")
        data = value.get("data")
        size = value.get("size")
        return cls(
            present=True,
            data=raw_bytes(data) if isinstance(data, str) else None,
            size=size if isinstance(size, int) else None,
            error=str(value["error"]) if value.get("error") is not None else None,
        )

    @property
    def readable(self) -> bool:
        return self.present and self.data is not None


_ABSENT_READ = FileRead(present=False)


@dataclass(frozen=True)
class FileEntry:
    """One child of a partition or log directory (``kind``: f file, d dir, l symlink, o other)."""

    name: str
    size: int
    kind: str
    blocks: int = 0
    mtime_ms: int | None = None


# ---------------------------------------------------------------------------------------------
# server.properties -> the broker settings the audits need
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    key: str
    kind: str  # bool | int | long | string
    attribute: str


BROKER_SETTINGS: tuple[_Setting, ...] = (
    _Setting("delete.topic.enable", "bool", "delete_topic_enable"),
    _Setting("inter.broker.protocol.version", "string", "inter_broker_protocol_version"),
    _Setting("auto.leader.rebalance.enable", "bool", "auto_leader_rebalance_enable"),
    _Setting("leader.imbalance.per.broker.percentage", "int", "leader_imbalance_per_broker_percentage"),
    _Setting("leader.imbalance.check.interval.seconds", "long", "leader_imbalance_check_interval_seconds"),
    _Setting("min.insync.replicas", "int", "min_insync_replicas"),
    _Setting("unclean.leader.election.enable", "bool", "unclean_leader_election_enable"),
    _Setting("log.segment.delete.delay.ms", "long", "log_segment_delete_delay_ms"),
)
OVERRIDE_KEYS: tuple[str, ...] = ("broker.id", "log.dirs", "log.dir", *(s.key for s in BROKER_SETTINGS))

MIGRATION_KEYS: tuple[str, ...] = (
    "zookeeper.metadata.migration.enable",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "listener.security.protocol.map",
    "listeners",
    "advertised.listeners",
    "inter.broker.listener.name",
    "control.plane.listener.name",
    "process.roles",
    "node.id",
    "broker.id.generation.enable",
    "reserved.broker.max.id",
    "authorizer.class.name",
    "metadata.log.dir",
)
"""server.properties keys a ZooKeeper-to-KRaft migration depends on, kept as written (the readiness
rules parse them: ``kafka.kraft_readiness``); ``KafkaConfig`` validation at 3.4.0-3.9.0-rc3 and
docs/ops.html "Enter Migration Mode on the Brokers". None holds a secret."""


def _kafka_default(key: str, release: KafkaVersion | None) -> tuple[Any, str]:
    """Kafka's built-in default for ``key`` and a note saying where it came from."""
    if key == "delete.topic.enable":
        if release is None:
            return True, "Kafka default (true since 1.0; release unknown)"
        return release.at_least("1.0"), f"Kafka {release} default"
    if key == "inter.broker.protocol.version":
        if release is None:
            return None, "Kafka default (the broker's own release; release unknown)"
        return release.release_line, f"Kafka {release} default (its own release line)"
    defaults: dict[str, Any] = {
        "auto.leader.rebalance.enable": True,
        "leader.imbalance.per.broker.percentage": 10,
        "leader.imbalance.check.interval.seconds": 300,
        "min.insync.replicas": 1,
        "unclean.leader.election.enable": False,  # true before 0.11
        "log.segment.delete.delay.ms": 60_000,
    }
    return defaults[key], "Kafka default"


def _convert(value: str, kind: str, source: str, key: str) -> Any:
    """As ``ConfigDef.parseType``: trimmed; booleans true/false in any case; Java integers."""
    trimmed = value.strip(_JAVA_TRIM)
    if kind == "bool":
        if trimmed.lower() not in ("true", "false"):
            raise ValueError(f"{key}={describe(value)} is not true/false")
        return trimmed.lower() == "true"
    if kind in ("int", "long"):
        try:
            return parse_java_int(trimmed, source, key, bits=32 if kind == "int" else 64)
        except KafkaFormatError as exc:
            raise ValueError(f"{key}={describe(value)}: {exc.expected}") from None
    return trimmed


def kafka_version_from_jars(jars: Iterable[str]) -> str | None:
    """The release in ``kafka_<scala>-<release>.jar`` on the broker's classpath, if plain (e.g. 3.3.1)."""
    for jar in jars:
        match = _KAFKA_JAR.fullmatch(jar)
        if match:
            text = match[1]
            if _PRE_1_0_RELEASE.fullmatch(text):  # 0.11.0.3: four parts before 1.0
                text = text.rsplit(".", 1)[0]
            try:
                return str(KafkaVersion.parse(text))
            except KafkaFormatError:
                continue
    return None


def _apply_overrides(props: dict[str, str], overrides: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``--override key=value`` arguments win over the file (``Kafka.getPropsFromArgs``)."""
    merged = dict(props)
    keys = []
    for item in overrides:
        key, _, value = item.partition("=")
        merged[key.strip()] = value
        keys.append(key.strip())
    return merged, keys


@dataclass(frozen=True)
class BrokerFacts:
    """The settings of one broker that the audits rely on, from its server.properties.

    ``defaulted`` names the keys absent from the file (and overrides) whose value is Kafka's
    default; ``problems`` lists values the broker would refuse at startup. Only these settings
    are kept: server.properties also holds passwords, which never leave this object's input.
    """

    server_properties_path: str
    source: str  # "configured" or "process"
    broker_id: int | None  # None: broker.id not set (generated from /brokers/seqid)
    log_dirs: tuple[str, ...]
    log_dirs_key: str  # log.dirs, log.dir, or "default" (log.dir's default)
    delete_topic_enable: bool | None = None
    inter_broker_protocol_version: str | None = None
    auto_leader_rebalance_enable: bool | None = None
    leader_imbalance_per_broker_percentage: int | None = None
    leader_imbalance_check_interval_seconds: int | None = None
    min_insync_replicas: int | None = None
    unclean_leader_election_enable: bool | None = None
    log_segment_delete_delay_ms: int | None = None
    defaulted: tuple[str, ...] = ()
    overridden: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    kafka_version: str | None = None
    pid: int | None = None
    migration_settings: Mapping[str, str] = field(default_factory=dict)  # MIGRATION_KEYS present

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        *,
        path: str,
        source: str = "configured",
        overrides: Sequence[str] = (),
        kafka_version: str | None = None,
        pid: int | None = None,
    ) -> BrokerFacts:
        merged, overridden = _apply_overrides(dict(props), overrides)
        release = KafkaVersion.parse(kafka_version) if kafka_version else None
        problems: list[str] = []
        defaulted: list[str] = []
        broker_id: int | None = None
        # node.id stands for an absent broker.id (KafkaConfig.populateSynonyms, 3.1.0+): a migration's
        # KRaft broker names itself by node.id only
        id_key = (
            "node.id"
            if "broker.id" not in merged
            and "node.id" in merged
            and (release is None or release >= KafkaVersion(3, 1))
            else "broker.id"
        )
        if id_key in merged:
            try:
                broker_id = _convert(merged[id_key], "int", path, id_key)
            except ValueError as exc:
                problems.append(str(exc))
            if broker_id is not None and broker_id < 0:
                broker_id = None  # -1: generated
        else:
            defaulted.append("broker.id")
        if "log.dirs" in merged:
            log_dirs_key, log_dirs_text = "log.dirs", merged["log.dirs"]
        elif "log.dir" in merged:
            log_dirs_key, log_dirs_text = "log.dir", merged["log.dir"]
        else:
            log_dirs_key, log_dirs_text = "default", DEFAULT_LOG_DIR
            defaulted.append("log.dirs")
        log_dirs = tuple(d for d in _CSV_SPLIT.split(log_dirs_text.strip(_JAVA_TRIM)) if d)
        if not log_dirs:
            problems.append(f"{log_dirs_key} names no directory")
        values: dict[str, Any] = {}
        for setting in BROKER_SETTINGS:
            if setting.key in merged:
                try:
                    values[setting.attribute] = _convert(merged[setting.key], setting.kind, path, setting.key)
                except ValueError as exc:
                    problems.append(str(exc))
                    values[setting.attribute] = None
            else:
                values[setting.attribute], _ = _kafka_default(setting.key, release)
                defaulted.append(setting.key)
        return cls(
            server_properties_path=path,
            source=source,
            broker_id=broker_id,
            log_dirs=log_dirs,
            log_dirs_key=log_dirs_key,
            defaulted=tuple(defaulted),
            overridden=tuple(overridden),
            problems=tuple(problems),
            kafka_version=str(release) if release else None,
            pid=pid,
            migration_settings={k: merged[k].strip(_JAVA_TRIM) for k in MIGRATION_KEYS if k in merged},
            **values,
        )

    def default_notes(self) -> dict[str, str]:
        """For each defaulted key, where its value came from."""
        release = KafkaVersion.parse(self.kafka_version) if self.kafka_version else None
        notes = {}
        for key in self.defaulted:
            if key == "broker.id":
                notes[key] = "not set: generated from /brokers/seqid (broker.id.generation.enable)"
            elif key == "log.dirs":
                notes[key] = f"not set: log.dir default {DEFAULT_LOG_DIR}"
            else:
                notes[key] = _kafka_default(key, release)[1]
        return notes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server_properties_path": self.server_properties_path,
            "source": self.source,
            "pid": self.pid,
            "kafka_version": self.kafka_version,
            "broker.id": self.broker_id,
            "log.dirs": list(self.log_dirs),
            "log_dirs_key": self.log_dirs_key,
        }
        for setting in BROKER_SETTINGS:
            out[setting.key] = getattr(self, setting.attribute)
        out["migration_settings"] = dict(self.migration_settings)
        out["defaulted"] = self.default_notes()
        out["overridden"] = list(self.overridden)
        out["problems"] = list(self.problems)
        return out


@dataclass(frozen=True)
class ServerPropertiesCandidate:
    """A server.properties the host offered: the configured path, or one per running broker process."""

    source: str
    path: str
    file: FileRead
    pid: int | None = None
    overrides: tuple[str, ...] = ()
    kafka_jars: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ServerPropertiesCandidate:
        """A ``server_properties`` record. For the configured file the jars are those of the broker process
        started with it (``running_kafka_jars``: the one whose command line names the same real path), the
        evidence the identity pin reads too: its release is the broker's, for every rule."""
        path = _get(record, "path", str, "server_properties record")
        jars = record.get("kafka_jars") or record.get("running_kafka_jars") or ()
        return cls(
            source=str(record.get("source", "configured")),
            path=path,
            file=FileRead.from_record(record.get("file"), f"server_properties {readable_name(path)}"),
            pid=record.get("pid") if isinstance(record.get("pid"), int) else None,
            overrides=tuple(str(o) for o in record.get("overrides") or ()),
            kafka_jars=tuple(str(j) for j in jars if isinstance(j, str)),
        )

    @property
    def label(self) -> str:
        where = readable_name(self.path)
        return where if self.pid is None else f"{where} (pid {self.pid})"

    def facts(self) -> BrokerFacts:
        """Parse the file (ISO-8859-1, as Java's Properties.load) with the core parser."""
        if not self.file.readable:
            why = self.file.error or "not found"
            raise ServerPropertiesSelectionError(f"cannot read server.properties {self.label}: {why}")
        props = parse_java_properties(self.file.data or b"", readable_name(self.path))
        return BrokerFacts.from_properties(
            props,
            path=readable_name(self.path),
            source=self.source,
            overrides=self.overrides,
            kafka_version=kafka_version_from_jars(self.kafka_jars),
            pid=self.pid,
        )


def _another_clusters(
    candidate: ServerPropertiesCandidate, zookeeper_hosts: Sequence[str], chroot: str | None
) -> str | None:
    """Why a running broker's server.properties is another cluster's (its ``zookeeper.connect``
    names another chroot, or none of the connection's ZooKeeper hosts); None when it may be ours."""
    from .safety import parse_zookeeper_connect

    if not zookeeper_hosts or chroot is None or not candidate.file.readable:
        return None
    try:
        props = parse_java_properties(candidate.file.data or b"", readable_name(candidate.path))
    except KafkaFormatError:
        return None
    merged, _ = _apply_overrides(dict(props), candidate.overrides)
    text = merged.get("zookeeper.connect")
    if text is None:
        return None
    try:
        theirs, their_chroot = parse_zookeeper_connect(text)
        ours, _ = parse_zookeeper_connect(",".join(zookeeper_hosts))
    except ValueError:
        return None
    if their_chroot != (chroot or "").rstrip("/") or not theirs & ours:
        return f"{candidate.label}: zookeeper.connect={text} is another cluster's"
    return None


def choose_server_properties(
    candidates: Sequence[ServerPropertiesCandidate],
    broker_id: int,
    *,
    zookeeper_hosts: Sequence[str] = (),
    chroot: str | None = None,
) -> BrokerFacts:
    """The facts of the broker asked for among what the host offered.

    A configured path is taken as is (its broker.id is checked later). Among running processes,
    the one whose broker.id is ``broker_id`` wins; a single process without broker.id (generated
    id) is accepted and checked against meta.properties later. Given the cluster's ZooKeeper hosts
    and chroot, a process whose ``zookeeper.connect`` names another cluster is left out first
    (another cluster's broker on the same host, with the same broker.id, is not this one).
    """
    if not candidates:
        raise ServerPropertiesSelectionError(
            f"no running Kafka broker process ({' or '.join(KAFKA_MAIN_CLASSES)}) found and no "
            "server.properties path configured: give server_properties_path (a stopped broker has no process)"
        )
    configured = [c for c in candidates if c.source == "configured"]
    if configured:
        return configured[0].facts()
    others = [why for c in candidates if (why := _another_clusters(c, zookeeper_hosts, chroot))]
    candidates = [c for c in candidates if not _another_clusters(c, zookeeper_hosts, chroot)]
    parsed: list[tuple[ServerPropertiesCandidate, BrokerFacts]] = []
    unreadable: list[str] = []
    for candidate in candidates:
        try:
            parsed.append((candidate, candidate.facts()))
        except (ServerPropertiesSelectionError, KafkaFormatError) as exc:
            unreadable.append(str(exc))
    matching = [f for _, f in parsed if f.broker_id == broker_id]
    if len(matching) == 1:
        return matching[0]
    if not matching and len(parsed) == 1 and parsed[0][1].broker_id is None and not unreadable:
        return parsed[0][1]
    found = ", ".join(f"{c.label}: broker.id={f.broker_id}" for c, f in parsed) or "none readable"
    if unreadable:
        found += "; " + "; ".join(unreadable)
    if others:
        found += "; left out: " + "; ".join(others)
    if matching:
        raise ServerPropertiesSelectionError(
            f"{len(matching)} running Kafka processes claim broker.id={broker_id} ({found}): "
            "give server_properties_path"
        )
    raise ServerPropertiesSelectionError(
        f"no running Kafka process has broker.id={broker_id} ({found}): wrong host for this broker, "
        "or give server_properties_path"
    )


# ---------------------------------------------------------------------------------------------
# Log dirs and partition directories
# ---------------------------------------------------------------------------------------------


def _parse_file(read: FileRead, parser: Any, source: str, errors: list[str]) -> Any:
    """Parse a file read on the host with a core parser; problems become entries in ``errors``."""
    if not read.present:
        return None
    if read.error is not None:
        errors.append(f"{source}: {read.error}")
        return None
    try:
        return parser(read.data or b"", source)
    except KafkaFormatError as exc:
        errors.append(str(exc))
        return None


@lru_cache(maxsize=8192)
def _parsed_once(parser: Any, data: bytes) -> Any:
    """``parser(data)`` of a small per-partition file, once per distinct content: every partition of
    a topic holds the same partition.metadata, most replicas the same leader-epoch-checkpoint. The
    parsed values are immutable; only a success is cached (the source is only in error messages)."""
    return parser(data, "")


def _parse_small_file(
    read: FileRead, parser: Any, directory: Callable[[], str], name: str, errors: list[str]
) -> Any:
    """:func:`_parse_file` of a partition directory's file ``name``, each distinct content parsed
    once; ``directory()`` names the directory in a message."""
    if not read.present:
        return None
    if read.error is None:
        try:
            return _parsed_once(parser, read.data or b"")
        except KafkaFormatError:
            pass  # parsed again below, for the error naming this file
    return _parse_file(read, parser, f"{directory()}/{name}", errors)


def _file_read(value: Any, directory: Callable[[], str], name: str) -> FileRead:
    """:meth:`FileRead.from_record` of a partition directory's file, one object per distinct read
    (they are immutable: a topic's partitions share their partition.metadata's)."""
    if value is None:
        return _ABSENT_READ
    if isinstance(value, dict):
        data, size, error = value.get("data"), value.get("size"), value.get("error")
        if type(data) is str and type(size) is int and error is None:
            return _read_of(data, size)
    return FileRead.from_record(value, f"{directory()}/{name}")


@lru_cache(maxsize=8192)
def _read_of(data: str, size: int) -> FileRead:
    return FileRead(present=True, data=raw_bytes(data), size=size)


@dataclass(frozen=True)
class LogDirInventory:
    """One entry of log.dirs as found on the host, its files parsed with the core parsers."""

    broker_id: int
    index: int
    path: str
    exists: bool
    real_path: str | None = None
    error: str | None = None
    meta_properties: FileRead = field(default_factory=lambda: FileRead(False))
    meta: MetaProperties | None = None
    clean_shutdown_file: FileRead = field(default_factory=lambda: FileRead(False))
    clean_shutdown: CleanShutdownMarker | None = None
    checkpoint_files: Mapping[str, FileRead] = field(default_factory=dict)
    checkpoints: Mapping[str, OffsetCheckpoint | None] = field(default_factory=dict)
    checkpoint_offsets: Mapping[str, Mapping[tuple[str, int], int]] = field(default_factory=dict, repr=False)
    other_entries: tuple[FileEntry, ...] = ()
    child_dirs: int = 0
    errors: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, broker_id: int, record: Mapping[str, Any]) -> LogDirInventory:
        index = _get(record, "index", int, "log_dir record")
        path = _get(record, "path", str, "log_dir record")
        shown = readable_name(path)
        if record.get("error") is not None:
            return cls(
                broker_id,
                index,
                path,
                exists=bool(record.get("exists")),
                error=str(record["error"]),
                errors=(f"{shown}: {record['error']}",),
            )
        files = record.get("files") or {}
        reads = {name: FileRead.from_record(files.get(name), f"{shown}/{name}") for name in LOG_DIR_FILES}
        errors: list[str] = []
        meta = _parse_file(reads[META_PROPERTIES], MetaProperties.parse, f"{shown}/{META_PROPERTIES}", errors)
        marker_read = reads[CLEAN_SHUTDOWN_FILE]
        marker = _parse_file(marker_read, CleanShutdownMarker.parse, f"{shown}/{CLEAN_SHUTDOWN_FILE}", errors)
        checkpoints = {
            name: _parse_file(reads[name], OffsetCheckpoint.parse, f"{shown}/{name}", errors)
            for name in CHECKPOINT_FILES
        }
        others = tuple(
            FileEntry(str(e[0]), e[1] if isinstance(e[1], int) else -1, str(e[2]))
            for e in record.get("other_entries") or ()
        )
        return cls(
            broker_id=broker_id,
            index=index,
            path=path,
            exists=True,
            real_path=record.get("real_path"),
            meta_properties=reads[META_PROPERTIES],
            meta=meta,
            clean_shutdown_file=marker_read,
            clean_shutdown=marker,
            checkpoint_files={name: reads[name] for name in CHECKPOINT_FILES},
            checkpoints=checkpoints,
            checkpoint_offsets={n: cp.offsets if cp is not None else {} for n, cp in checkpoints.items()},
            other_entries=others,
            child_dirs=int(record.get("child_dirs") or 0),
            errors=tuple(errors),
        )

    @property
    def clean_shutdown_present(self) -> bool:
        """The marker file exists: Kafka skips log recovery at the next start."""
        return self.clean_shutdown_file.present

    def offsets(self, name: str) -> Mapping[tuple[str, int], int]:
        """(topic, partition) -> offset from one checkpoint file (built once per log dir)."""
        return self.checkpoint_offsets.get(name, {})

    def to_row(self) -> dict[str, Any]:
        meta = self.meta
        return {
            "broker_id": self.broker_id,
            "log_dir_index": self.index,
            "log_dir": readable_name(self.path),
            "real_path": readable_name(self.real_path) if self.real_path else None,
            "exists": self.exists,
            "error": self.error,
            "meta_properties_raw": self.meta_properties.data,
            "meta_version": meta.version if meta else None,
            "meta_broker_id": meta.broker_id if meta else None,
            "meta_cluster_id": meta.cluster_id if meta else None,
            "meta_directory_id": str(meta.directory_id) if meta and meta.directory_id else None,
            "clean_shutdown_present": self.clean_shutdown_present,
            "clean_shutdown_raw": self.clean_shutdown_file.data,
            "clean_shutdown_broker_epoch": self.clean_shutdown.broker_epoch if self.clean_shutdown else None,
            **{
                f"{name.replace('-', '_')}_raw": self.checkpoint_files[name].data
                if name in self.checkpoint_files
                else None
                for name in CHECKPOINT_FILES
            },
            **{
                f"{name.replace('-', '_')}_entries": len(cp.entries) if cp is not None else None
                for name, cp in ((n, self.checkpoints.get(n)) for n in CHECKPOINT_FILES)
            },
            "child_dirs": self.child_dirs,
            "other_entries": [
                {"name": readable_name(e.name), "size": e.size, "kind": e.kind} for e in self.other_entries
            ],
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class SegmentFiles:
    """One log segment as listed: ``<base>.log`` and its indexes' sizes (None: file missing)."""

    base_offset: int
    log_bytes: int
    index_bytes: int | None = None
    timeindex_bytes: int | None = None
    log_mtime_ms: int | None = None


def age_reference_ms(kind: str | None, mtime_ms: int | None, ctime_ms: int | None) -> int | None:
    """The time a directory's age is counted from: ctime for a ``-delete`` directory, else mtime.

    Kafka renames a deleted replica's directory to ``<topic>-<p>.<uuid>-delete``; a rename changes
    the directory's ctime (inode change time), not its mtime, so only ctime says when the broker's
    ``log.segment.delete.delay.ms`` started. An unknown ctime (an inventory from before it was
    recorded) falls back to mtime. ``kind`` is the inventory's lower-case kind name.
    """
    if kind == "delete" and ctime_ms is not None:
        return ctime_ms
    return mtime_ms


@dataclass(frozen=True)
class PartitionDirInventory:
    """One directory in a log dir: a partition replica (normal, -delete, -future, -stray) or not.

    ``kind`` is "unparseable" when Kafka would reject the name. ``errors`` holds every file that
    could not be read or parsed; the row still describes what could be seen. ``ctime_ms`` is the
    directory's inode change time (for a ``-delete`` directory: when the broker renamed it); ages
    come from :attr:`age_reference_ms`.
    """

    broker_id: int
    log_dir_index: int
    log_dir: str
    name: str  # exact (surrogate-escaped) name
    kind: str
    topic: str | None = None
    partition: int | None = None
    unique_id: str | None = None
    symlink: bool = False
    mtime_ms: int | None = None
    ctime_ms: int | None = None
    partition_metadata_file: FileRead = field(default_factory=lambda: FileRead(False))
    partition_metadata: PartitionMetadata | None = None
    leader_epoch_file: FileRead = field(default_factory=lambda: FileRead(False))
    leader_epochs: tuple[EpochEntry, ...] | None = None
    segments: tuple[SegmentFiles, ...] = ()
    other_files: tuple[FileEntry, ...] = ()
    file_count: int = 0
    total_bytes: int = 0
    disk_bytes: int = 0
    transient_files: int = 0
    recovery_point: int | None = None
    high_watermark: int | None = None
    log_start_offset: int | None = None
    cleaner_offset: int | None = None
    errors: tuple[str, ...] = ()

    @classmethod
    def from_record(
        cls, broker_id: int, log_dir: LogDirInventory, record: Mapping[str, Any]
    ) -> PartitionDirInventory:
        """One ``dir`` record of the host's stream, parsed (runs once per replica directory: the
        path shown in messages is only made when a message needs it)."""
        name = _get(record, "name", str, "dir record")

        def shown() -> str:
            return f"{readable_name(log_dir.path)}/{readable_name(name)}"

        errors: list[str] = []
        kind, topic, partition, unique_id = "unparseable", None, None, None
        try:
            parsed = parse_partition_dir_name(name)
            kind = _KIND_NAMES[parsed.kind]
            topic, partition, unique_id = parsed.topic, parsed.partition, parsed.unique_id
        except KafkaFormatError:
            try:
                parse_partition_dir_name(name, shown())  # again, for the message naming the path
            except KafkaFormatError as exc:
                errors.append(str(exc))
        mtime_ms, ctime_ms = record.get("mtime_ms"), record.get("ctime_ms")
        base = {
            "broker_id": broker_id,
            "log_dir_index": log_dir.index,
            "log_dir": log_dir.path,
            "name": name,
            "kind": kind,
            "topic": topic,
            "partition": partition,
            "unique_id": unique_id,
            "symlink": bool(record.get("symlink")),
            "mtime_ms": mtime_ms if isinstance(mtime_ms, int) else None,
            "ctime_ms": ctime_ms if isinstance(ctime_ms, int) else None,
        }
        if record.get("error") is not None:
            return cls(**base, errors=(*errors, f"{shown()}: {record['error']}"))
        entry_errors = record.get("entry_errors")
        if entry_errors:
            errors += [f"{shown()}/{e}" for e in entry_errors]
        raw_entries = record.get("entries") or ()
        files = record.get("files") or {}
        metadata_read = _file_read(files.get(PARTITION_METADATA), shown, PARTITION_METADATA)
        epochs_read = _file_read(files.get(LEADER_EPOCH_CHECKPOINT), shown, LEADER_EPOCH_CHECKPOINT)
        metadata = _parse_small_file(
            metadata_read, PartitionMetadata.parse, shown, PARTITION_METADATA, errors
        )
        epochs = _parse_small_file(
            epochs_read, LeaderEpochCheckpoint.parse, shown, LEADER_EPOCH_CHECKPOINT, errors
        )
        segments, others, transient, total_bytes, blocks = _segments_of_raw(raw_entries)
        recovery_point = high_watermark = log_start_offset = cleaner_offset = None
        if (kind == "normal" or kind == "future") and topic is not None and partition is not None:
            key = (topic, partition)
            offsets = log_dir.checkpoint_offsets
            recovery_point = offsets.get(RECOVERY_POINT_OFFSET_CHECKPOINT, _NO_OFFSETS).get(key)
            high_watermark = offsets.get(REPLICATION_OFFSET_CHECKPOINT, _NO_OFFSETS).get(key)
            log_start_offset = offsets.get(LOG_START_OFFSET_CHECKPOINT, _NO_OFFSETS).get(key)
            cleaner_offset = offsets.get(CLEANER_OFFSET_CHECKPOINT, _NO_OFFSETS).get(key)
        base.update(
            partition_metadata_file=metadata_read,
            partition_metadata=metadata,
            leader_epoch_file=epochs_read,
            leader_epochs=epochs.entries if epochs is not None else None,
            segments=segments,
            other_files=others,
            file_count=len(raw_entries),
            total_bytes=total_bytes,
            disk_bytes=blocks * 512,
            transient_files=transient,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
            log_start_offset=log_start_offset,
            cleaner_offset=cleaner_offset,
            errors=tuple(errors),
        )
        return _make_partition_dir(base)

    @property
    def topic_id(self) -> str | None:
        return str(self.partition_metadata.topic_id) if self.partition_metadata else None

    @property
    def newest_segment(self) -> SegmentFiles | None:
        return self.segments[-1] if self.segments else None

    @property
    def age_reference_ms(self) -> int | None:
        """ctime for a ``-delete`` directory (when it was renamed), mtime otherwise; None: unknown."""
        return age_reference_ms(self.kind, self.mtime_ms, self.ctime_ms)

    def to_row(self) -> dict[str, Any]:
        """The directory's row: :data:`PARTITION_ROW_FIELDS` -> :meth:`row_values`."""
        return dict(zip(PARTITION_ROW_FIELDS, self.row_values(), strict=True))

    def row_values(self) -> tuple[Any, ...]:
        """The row's values in :data:`PARTITION_ROW_FIELDS` order (a tuple: a broker's rows turn into
        columns with one ``zip``)."""
        segments = self.segments
        newest = segments[-1] if segments else None
        epochs = self.leader_epochs
        metadata = self.partition_metadata
        return (
            self.broker_id,
            self.log_dir_index,
            readable_name(self.log_dir),
            readable_name(self.name),
            raw_bytes(self.name),
            self.kind,
            readable_name(self.topic) if self.topic is not None else None,
            self.partition,
            readable_name(self.unique_id) if self.unique_id is not None else None,
            self.symlink,
            self.mtime_ms,
            self.ctime_ms,
            self.partition_metadata_file.present,
            self.partition_metadata_file.data,
            str(metadata.topic_id) if metadata else None,
            metadata.version if metadata else None,
            self.leader_epoch_file.data,
            [{"epoch": e.epoch, "start_offset": e.start_offset} for e in epochs]
            if epochs is not None
            else None,
            epochs[-1].epoch if epochs else None,
            len(segments),
            sum(s.log_bytes for s in segments),
            segments[0].base_offset if segments else None,
            newest.base_offset if newest else None,
            newest.index_bytes if newest else None,
            newest.timeindex_bytes if newest else None,
            newest.log_mtime_ms if newest else None,
            [
                {
                    "base_offset": s.base_offset,
                    "log_bytes": s.log_bytes,
                    "index_bytes": s.index_bytes,
                    "timeindex_bytes": s.timeindex_bytes,
                }
                for s in segments
            ],
            [{"name": readable_name(e.name), "size": e.size, "kind": e.kind} for e in self.other_files],
            self.file_count,
            self.total_bytes,
            self.disk_bytes,
            self.transient_files,
            self.recovery_point,
            self.high_watermark,
            self.log_start_offset,
            self.cleaner_offset,
            [readable_name(e) for e in self.errors],
        )


_make_partition_dir = instance_maker(PartitionDirInventory)
"""A directory's instance from its fields, without the frozen ``__init__``'s per-field ``object.__setattr__``
(2.5 of the 19 us its parse took; it runs for every replica directory of every broker)."""


PARTITION_ROW_FIELDS: tuple[str, ...] = (
    "broker_id",
    "log_dir_index",
    "log_dir",
    "dir_name",
    "dir_name_bytes",
    "kind",
    "topic",
    "partition",
    "unique_id",
    "symlink",
    "mtime_ms",
    "ctime_ms",
    "partition_metadata_present",
    "partition_metadata_raw",
    "topic_id",
    "partition_metadata_version",
    "leader_epoch_checkpoint_raw",
    "leader_epochs",
    "latest_leader_epoch",
    "segment_count",
    "log_bytes",
    "first_segment_base_offset",
    "last_segment_base_offset",
    "newest_index_bytes",
    "newest_timeindex_bytes",
    "last_modified_ms",
    "segments",
    "other_files",
    "file_count",
    "total_bytes",
    "disk_bytes",
    "transient_files",
    "recovery_point",
    "high_watermark",
    "log_start_offset",
    "cleaner_offset",
    "errors",
)
"""The keys of :meth:`PartitionDirInventory.to_row`, in order (times as ``*_ms`` integers)."""


@lru_cache(maxsize=1 << 16)
def _segment_file(name: str) -> tuple[int, str] | None:
    """:func:`.records.parse_segment_file_name` of a listed file, None when it is no segment file. The
    same names recur in every partition directory (``00000000000000000000.log`` ...): each distinct
    one is parsed once."""
    try:
        return parse_segment_file_name(name)
    except KafkaFormatError:
        return None


def _segments_of_raw(
    raw_entries: Sequence[Sequence[Any]],
) -> tuple[tuple[SegmentFiles, ...], tuple[FileEntry, ...], int, int, int]:
    """Group a ``dir`` record's ``[name, size, blocks, type, mtime ms]`` entries into segments:
    ``<base>.log/.index/.timeindex`` by base offset (``parse_segment_file_name``'s form: 20 ASCII
    digits before the first '.'); also the regular files' total size and every entry's 512-byte blocks.

    Everything else (``partition.metadata``, ``*.snapshot``, leftovers, an index without its log) is
    an "other" file, sorted by name; ``.deleted``/``.cleaned``/``.swap`` files (a deletion, clean or
    crash in progress) are counted. Segment files become no :class:`FileEntry` (a partition
    directory holds little else: this runs once per replica directory of every broker).
    """
    logs: dict[int, tuple[int, int | None]] = {}
    indexes: dict[str, dict[int, int]] = {".index": {}, ".timeindex": {}}
    others: list[FileEntry] = []
    transient = total_bytes = blocks = 0
    for e in raw_entries:
        name, size, used, kind, mtime = e[0], e[1], e[2], e[3], e[4]
        if type(name) is not str or type(size) is not int or type(used) is not int or type(kind) is not str:
            name, size, kind, used = str(name), int(size), str(kind), int(used)  # the stream's JSON types
        if not isinstance(mtime, int):
            mtime = None
        blocks += used
        if kind == "f":
            total_bytes += size
            segment = _segment_file(name)
            if segment is not None:
                offset, suffix = segment
                if suffix == ".log":
                    logs[offset] = (size, mtime)
                    continue
                sizes = indexes.get(suffix)
                if sizes is not None:
                    sizes[offset] = size
                    continue
                if suffix.endswith(_TRANSIENT_SUFFIXES):
                    transient += 1
        others.append(FileEntry(name, size, kind, used, mtime))
    offset_indexes, time_indexes = indexes[".index"], indexes[".timeindex"]
    segments = tuple(
        SegmentFiles(offset, size, offset_indexes.get(offset), time_indexes.get(offset), mtime)
        for offset, (size, mtime) in sorted(logs.items())
    )
    if not (offset_indexes.keys() <= logs.keys() and time_indexes.keys() <= logs.keys()):
        orphans = sorted(
            (offset, suffix, size)
            for suffix, sizes in indexes.items()
            for offset, size in sizes.items()
            if offset not in logs  # an index without its log
        )
        others += (FileEntry(f"{offset:020d}{suffix}", size, "f") for offset, suffix, size in orphans)
    if len(others) > 1:
        others.sort(key=_NAME_OF)
    return segments, tuple(others), transient, total_bytes, blocks


# ---------------------------------------------------------------------------------------------
# Identity: is this really the broker we were asked about?
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooKeeperView:
    """What ZooKeeper says: the cluster id and each registered broker's advertised hosts."""

    cluster_id: str | None
    registered_hosts: Mapping[int, tuple[str, ...]]

    def brokers_at(self, host: str) -> list[int]:
        wanted = host.lower()
        return sorted(b for b, hosts in self.registered_hosts.items() if wanted in (h.lower() for h in hosts))


@dataclass(frozen=True)
class IdentityCheck:
    """One cross-check of the broker id (``status``: ok, mismatch, unknown)."""

    check: str
    status: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "detail": self.detail}


def effective_broker_id(facts: BrokerFacts, log_dirs: Sequence[LogDirInventory]) -> int | None:
    """broker.id from server.properties, else the one every meta.properties agrees on."""
    if facts.broker_id is not None:
        return facts.broker_id
    ids = {d.meta.broker_id for d in log_dirs if d.meta is not None and d.meta.broker_id is not None}
    return ids.pop() if len(ids) == 1 else None


def identity_checks(
    requested: int,
    host: str,
    facts: BrokerFacts,
    log_dirs: Sequence[LogDirInventory],
    zookeeper: ZooKeeperView | None,
) -> tuple[IdentityCheck, ...]:
    """server.properties vs the requested id, each meta.properties vs that, and ZooKeeper vs the host."""
    checks: list[IdentityCheck] = []
    effective = effective_broker_id(facts, log_dirs)
    if facts.broker_id is not None:
        status = "ok" if facts.broker_id == requested else "mismatch"
        checks.append(
            IdentityCheck(
                "server.properties", status, f"broker.id={facts.broker_id} in {facts.server_properties_path}"
            )
        )
    else:
        checks.append(
            IdentityCheck(
                "server.properties",
                "unknown" if effective is None else ("ok" if effective == requested else "mismatch"),
                f"broker.id not set in {facts.server_properties_path} (generated id; meta.properties says {effective})",
            )
        )
    cluster_ids = set()
    for log_dir in log_dirs:
        label = f"meta.properties {readable_name(log_dir.path)}"
        if log_dir.meta is None:
            why = "missing" if not log_dir.meta_properties.present else "unreadable"
            if log_dir.error:
                why = f"log dir not readable ({log_dir.error})"
            checks.append(IdentityCheck(label, "unknown", why))
            continue
        meta_id = log_dir.meta.broker_id
        if log_dir.meta.cluster_id:
            cluster_ids.add(log_dir.meta.cluster_id)
        if meta_id == effective:
            checks.append(IdentityCheck(label, "ok", f"broker.id={meta_id}"))
        else:
            checks.append(
                IdentityCheck(
                    label,
                    "mismatch",
                    f"broker.id={meta_id}, server.properties says {effective}: Kafka refuses to start "
                    "(InconsistentBrokerIdException)",
                )
            )
    if len(cluster_ids) > 1:
        checks.append(IdentityCheck("cluster.id", "mismatch", f"log dirs disagree: {sorted(cluster_ids)}"))
    if zookeeper is not None:
        if zookeeper.cluster_id and cluster_ids and cluster_ids != {zookeeper.cluster_id}:
            checks.append(
                IdentityCheck(
                    "cluster.id",
                    "mismatch",
                    f"meta.properties {sorted(cluster_ids)} vs ZooKeeper /cluster/id {zookeeper.cluster_id}: "
                    "this broker belongs to another cluster (it refuses to start)",
                )
            )
        elif zookeeper.cluster_id and cluster_ids:
            checks.append(IdentityCheck("cluster.id", "ok", f"{zookeeper.cluster_id} as in ZooKeeper"))
        at_host = zookeeper.brokers_at(host)
        registered = requested in zookeeper.registered_hosts
        if requested in at_host:
            detail = f"broker {requested} is registered at {host}"
            extra = [b for b in at_host if b != requested]
            status = "ok" if not extra else "mismatch"
            if extra:
                detail += f"; so are brokers {extra}"
            checks.append(IdentityCheck("zookeeper", status, detail))
        elif at_host:
            checks.append(
                IdentityCheck(
                    "zookeeper",
                    "mismatch",
                    f"{host} is registered by broker(s) {at_host}, not broker {requested}",
                )
            )
        elif registered:
            hosts = ", ".join(zookeeper.registered_hosts[requested])
            checks.append(
                IdentityCheck(
                    "zookeeper", "mismatch", f"broker {requested} is registered at {hosts}, not {host}"
                )
            )
        else:
            checks.append(
                IdentityCheck(
                    "zookeeper", "unknown", f"broker {requested} is not registered (stopped or crashed)"
                )
            )
    return tuple(checks)


# ---------------------------------------------------------------------------------------------
# The stream of records -> one broker's inventory
# ---------------------------------------------------------------------------------------------


@dataclass
class BrokerInventory:
    """Everything one broker host holds on disk, parsed."""

    broker_id: int
    host: str
    facts: BrokerFacts
    log_dirs: list[LogDirInventory]
    partitions: list[PartitionDirInventory]
    identity: tuple[IdentityCheck, ...] = ()
    remote: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[str]:
        return [e for d in self.log_dirs for e in d.errors] + [e for p in self.partitions for e in p.errors]

    def summary(self) -> dict[str, Any]:
        """JSON-safe broker-level facts (no raw file contents, no secrets)."""
        kinds: dict[str, int] = {}
        for partition in self.partitions:
            kinds[partition.kind] = kinds.get(partition.kind, 0) + 1
        return {
            "broker_id": self.broker_id,
            "host": self.host,
            "facts": self.facts.to_dict(),
            "identity": [c.to_dict() for c in self.identity],
            "log_dirs": [
                {
                    "path": readable_name(d.path),
                    "exists": d.exists,
                    "error": d.error,
                    "clean_shutdown": d.clean_shutdown_present,
                    "partition_dirs": sum(1 for p in self.partitions if p.log_dir_index == d.index),
                    "errors": len(d.errors),
                }
                for d in self.log_dirs
            ],
            "partition_dirs": len(self.partitions),
            "dir_kinds": dict(sorted(kinds.items())),
            "dirs_with_errors": sum(1 for p in self.partitions if p.errors),
            "remote": {k: v for k, v in self.remote.items() if k in ("python", "hostname", "uid", "seconds")},
        }


class InventoryAssembler:
    """Turns the host's JSON records, in order, into a :class:`BrokerInventory`.

    The hook feeds every record; after ``await_log_dirs`` it picks the server.properties
    (:func:`choose_server_properties`), calls :meth:`start_walk` and sends the log dirs back.
    """

    def __init__(self, broker_id: int, host: str) -> None:
        self.broker_id = broker_id
        self.host = host
        self.remote: dict[str, Any] = {}
        self.candidates: list[ServerPropertiesCandidate] = []
        self.awaiting_log_dirs = False
        self.facts: BrokerFacts | None = None
        self.log_dirs: list[LogDirInventory] = []
        self.partitions: list[PartitionDirInventory] = []
        self.complete = False

    def feed(self, record: Mapping[str, Any]) -> None:
        if not isinstance(record, Mapping):
            raise InventoryRecordError(f"expected a JSON object, found {describe(record)}")
        kind = record.get("t")
        if kind == "dir":
            if not self.log_dirs:
                raise InventoryRecordError("a dir record before any log_dir record")
            self.partitions.append(
                PartitionDirInventory.from_record(self.broker_id, self.log_dirs[-1], record)
            )
        elif kind == "log_dir":
            if self.facts is None:
                raise InventoryRecordError("a log_dir record before the log dirs were sent")
            self.log_dirs.append(LogDirInventory.from_record(self.broker_id, record))
        elif kind == "hello":
            self.remote.update({k: v for k, v in record.items() if k != "t"})
        elif kind == "server_properties":
            self.candidates.append(ServerPropertiesCandidate.from_record(record))
        elif kind == "await_log_dirs":
            self.awaiting_log_dirs = True
        elif kind == "end":
            self.remote.update({k: v for k, v in record.items() if k != "t"})
            self.complete = True
        elif kind == "fatal":
            raise RemoteFatalError(str(record.get("kind")), str(record.get("detail", "")))
        else:
            raise InventoryRecordError(f"unknown record type {describe(kind)}")

    def start_walk(self, facts: BrokerFacts) -> tuple[str, ...]:
        """Remember the chosen broker's facts; returns the log dirs to walk."""
        self.facts = facts
        self.awaiting_log_dirs = False
        return facts.log_dirs

    def result(self, zookeeper: ZooKeeperView | None = None) -> BrokerInventory:
        if self.facts is None or not self.complete:
            raise InventoryRecordError("the record stream ended before the inventory was complete")
        return BrokerInventory(
            broker_id=self.broker_id,
            host=self.host,
            facts=self.facts,
            log_dirs=self.log_dirs,
            partitions=self.partitions,
            identity=identity_checks(self.broker_id, self.host, self.facts, self.log_dirs, zookeeper),
            remote=self.remote,
        )


# ---------------------------------------------------------------------------------------------
# Coverage: which brokers an inventory run really covers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InventoryCoverage:
    """Which expected brokers were inventoried; anything less than all of them is "partial".

    ``failed`` maps a broker to the recorded reason; ``missing`` are brokers with neither an
    inventory nor a failure record (task skipped, upstream failed, never ran). Coverage says
    nothing about health, so it is never "clean": "complete", "partial" or "empty".
    """

    expected: tuple[int, ...]
    inventoried: tuple[int, ...]
    failed: Mapping[int, str]
    missing: tuple[int, ...]
    unexpected: tuple[int, ...] = ()

    @classmethod
    def compute(
        cls, expected: Iterable[int], inventoried: Iterable[int], failures: Mapping[int, str] | None = None
    ) -> InventoryCoverage:
        wanted = sorted({int(b) for b in expected})
        done = sorted({int(b) for b in inventoried})
        failures = {int(b): str(r) for b, r in (failures or {}).items()}
        failed = {b: failures[b] for b in wanted if b not in done and b in failures}
        missing = tuple(b for b in wanted if b not in done and b not in failed)
        return cls(
            expected=tuple(wanted),
            inventoried=tuple(b for b in done if b in wanted),
            failed=failed,
            missing=missing,
            unexpected=tuple(b for b in done if b not in wanted),
        )

    @property
    def not_inventoried(self) -> tuple[int, ...]:
        return tuple(sorted({*self.failed, *self.missing}))

    @property
    def status(self) -> str:
        if not self.not_inventoried:
            return "complete"
        return "partial" if self.inventoried else "empty"

    def describe(self) -> str:
        text = f"{self.status}: {len(self.inventoried)} of {len(self.expected)} brokers inventoried"
        if self.not_inventoried:
            reasons = [f"broker {b} ({self.failed[b]})" for b in sorted(self.failed)]
            reasons += [f"broker {b} (no inventory and no failure record)" for b in self.missing]
            text += "; missing " + "; ".join(reasons)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "expected": list(self.expected),
            "inventoried": list(self.inventoried),
            "not_inventoried": list(self.not_inventoried),
            "failed": {str(b): r for b, r in sorted(self.failed.items())},
            "missing": list(self.missing),
            "unexpected": list(self.unexpected),
            "description": self.describe(),
        }
