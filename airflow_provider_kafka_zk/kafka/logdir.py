"""Text files and directory names in a ZooKeeper-mode broker's log dir.

As Kafka reads and writes them (3.3.1): ``kafka/server/PartitionMetadataFile.scala``,
``kafka/server/BrokerMetadataCheckpoint.scala`` (meta.properties),
``server-common/.../CheckpointFile.java`` and ``kafka/server/checkpoints/*`` (offset and
leader-epoch checkpoints), ``kafka/log/UnifiedLog.scala``/``LogManager.scala`` (directory names:
``<topic>-<p>``, ``.<uuid>-delete``, ``-future``, ``-stray``).

Every parser takes the file's bytes (or text) plus ``source``, the path or label used in error
messages, and reads the way the broker does: what Kafka accepts is accepted and what Kafka
rejects raises :class:`LogDirFormatError`, never a bare ValueError/IndexError. Every encoder
writes exactly the bytes Kafka writes, so a repaired file cannot be told apart from a
broker-written one. No file I/O happens here.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
import re
import uuid as _stdlib_uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._jackson import java_properties_order
from .errors import KafkaFormatError, LogDirFormatError, describe
from .uuid import KafkaUuid

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "PARTITION_METADATA",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CleanShutdownMarker",
    "DirKind",
    "EpochEntry",
    "LeaderEpochCheckpoint",
    "MetaProperties",
    "OffsetCheckpoint",
    "OffsetCheckpointEntry",
    "PartitionDirName",
    "PartitionMetadata",
    "encode_java_properties",
    "format_partition_dir_name",
    "java_date_string",
    "parse_java_int",
    "parse_java_properties",
    "parse_partition_dir_name",
]

PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Java's Integer/Long.parseInt: optional sign, then digits (Character.digit accepts any Nd digit).
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# BufferedReader.readLine line terminators; Python's str.splitlines() splits on far more.
_JAVA_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# java.util.regex "\s" is ASCII-only: [ \t\n\x0B\f\r].
_JAVA_WHITESPACES = re.compile(r"[ \t\n\x0b\f\r]+")
_COLON_WHITESPACES = re.compile(r":[ \t\n\x0b\f\r]+")


def parse_java_int(text: str, source: str, what: str, *, bits: int = 32) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: no surrounding whitespace, no '_', range-checked.

    Python's ``int()`` accepts ``" 1"`` and ``"1_0"``; Kafka does not, so neither do we.
    """
    low, high = _INT32 if bits == 32 else _INT64
    # plain ASCII digits (what Kafka writes) need no regex; anything else goes through Java's grammar
    if not (text.isdigit() and text.isascii()) and not _JAVA_INTEGER.fullmatch(text):
        raise LogDirFormatError(source, f"{what} as a {bits}-bit decimal integer", describe(text))
    value = int(text)
    if not low <= value <= high:
        raise LogDirFormatError(source, f"{what} within the int{bits} range", text)
    return value


def _decode_utf8(data: bytes | str, source: str) -> str:
    """Kafka reads these files through a UTF-8 decoder that reports malformed input (IOException)."""
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogDirFormatError(source, "UTF-8 text", f"undecodable byte at {exc.start}") from None


def _java_read_lines(text: str) -> list[str]:
    """The lines ``BufferedReader.readLine`` returns, in order, until it returns null."""
    if not text:
        return []
    lines = text.split("\n") if "\r" not in text else _JAVA_LINE_BREAK.split(text)
    if lines[-1] == "":  # a terminator at the very end does not start another line
        lines.pop()
    return lines


def _java_split(pattern: re.Pattern[str], text: str) -> list[str]:
    """``Pattern.split(text)``: trailing empty strings are dropped, a leading one is kept."""
    parts = pattern.split(text)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


# ---------------------------------------------------------------------------------------------
# Partition directory names
# ---------------------------------------------------------------------------------------------


class DirKind(enum.Enum):
    """What a partition directory's name says about it."""

    NORMAL = ""
    DELETE = "-delete"  # pending asynchronous deletion (all versions)
    FUTURE = "-future"  # intra-broker move target (1.1+, KIP-113)
    STRAY = "-stray"  # set aside, never deleted automatically (3.7+)


_SUFFIXED_KINDS = (DirKind.DELETE, DirKind.FUTURE, DirKind.STRAY)
# LocalLog's DeleteDirPattern/FutureDirPattern/StrayDirPattern; \S is ASCII-only in Java.
_SUFFIX_PATTERNS = {
    kind: re.compile(r"(\S+)-(\S+)\.(\S+)" + re.escape(kind.value), re.ASCII) for kind in _SUFFIXED_KINDS
}
_SUFFIXES = tuple(kind.value for kind in _SUFFIXED_KINDS)
_MAX_CAPPED_DIR_NAME = 255
_HEX32 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class PartitionDirName:
    """A parsed ``<topic>-<partition>[.<uniqueId>-delete|-future|-stray]`` directory name.

    ``topic`` is what the broker derives from the name: for a capped ``-delete``/``-stray`` name
    (2.3+) it may be a truncated prefix of the real topic (see ``topic_possibly_truncated``).
    ``unique_id`` is the text between the last '.' and the suffix; Kafka writes 32 lowercase hex
    digits but accepts any non-blank text there.
    """

    topic: str
    partition: int
    kind: DirKind = DirKind.NORMAL
    unique_id: str | None = None

    @property
    def name(self) -> str:
        """The directory name (re-encoded without truncation, since ``topic`` is already as found)."""
        return format_partition_dir_name(
            self.topic, self.partition, self.kind, self.unique_id, cap_length=False
        )

    @property
    def topic_possibly_truncated(self) -> bool:
        """A capped name exactly at 255 chars may carry only a prefix of the topic (2.3+)."""
        return self.kind in (DirKind.DELETE, DirKind.STRAY) and len(self.name) == _MAX_CAPPED_DIR_NAME

    @property
    def has_standard_unique_id(self) -> bool:
        """True when the unique id is 32 lowercase hex digits, as Kafka generates it."""
        return self.unique_id is not None and _HEX32.fullmatch(self.unique_id) is not None


def parse_partition_dir_name(name: str, source: str | None = None) -> PartitionDirName:
    """Parse a log-dir child name as ``LocalLog.parseTopicPartitionName`` (3.9) does.

    Strip from the last '.' when the name ends in a suffix, then split on the last '-' (topic
    names contain '-' and '.'). Raises :class:`LogDirFormatError` for names the broker rejects,
    e.g. one without '-' (which in 3.9 aborts LogManager startup). ``-stray`` is a 3.7+ suffix;
    an older broker rejects such a name, and a 1.0 broker rejects ``-future``.
    """
    where = source or name

    def rejected(why: str) -> LogDirFormatError:
        return LogDirFormatError(
            where,
            "a directory name of the form topic-partition or topic-partition.uniqueId-delete|-future|-stray",
            f"{describe(name)} ({why})",
        )

    if not isinstance(name, str) or not name or "-" not in name:
        raise rejected("no '-'")
    kind = DirKind.NORMAL
    if name.endswith(_SUFFIXES):  # one test for the common case, a plain topic-partition
        kind = next(k for k in _SUFFIXED_KINDS if name.endswith(k.value))
    unique_id: str | None = None
    base = name
    if kind is not DirKind.NORMAL:
        if not _SUFFIX_PATTERNS[kind].fullmatch(name):
            raise rejected(f"does not match topic-partition.uniqueId{kind.value}")
        dot = name.rindex(".")
        base = name[:dot]
        unique_id = name[dot + 1 : -len(kind.value)]
    dash = base.rfind("-")
    if dash < 0:
        raise rejected("no '-' before the unique id")
    topic, partition_text = base[:dash], base[dash + 1 :]
    if not topic or not partition_text:
        raise rejected("empty topic or partition")
    try:
        partition = parse_java_int(partition_text, where, "partition")
    except LogDirFormatError:
        raise rejected(f"partition {partition_text!r} is not an int") from None
    return PartitionDirName(topic, partition, kind, unique_id)


def format_partition_dir_name(
    topic: str,
    partition: int,
    kind: DirKind = DirKind.NORMAL,
    unique_id: str | None = None,
    *,
    cap_length: bool = True,
) -> str:
    """The directory name a broker gives a partition, the inverse of :func:`parse_partition_dir_name`.

    For ``-delete`` (2.3+) and ``-stray`` (3.7+) the topic is cut so the name stays <= 255 chars
    (``LocalLog.logDirNameWithSuffixCappedLength``); pass ``cap_length=False`` for a pre-2.3
    ``-delete`` name. ``-future`` is never capped. A missing ``unique_id`` gets a fresh one, as
    ``UUID.randomUUID`` without dashes.
    """
    if kind is DirKind.NORMAL:
        if unique_id is not None:
            raise ValueError("a normal partition directory has no unique id")
        return f"{topic}-{partition}"
    if unique_id is None:
        unique_id = _stdlib_uuid.uuid4().hex
    suffix = f"-{partition}.{unique_id}{kind.value}"
    if cap_length and kind in (DirKind.DELETE, DirKind.STRAY):
        topic = topic[: max(0, min(len(topic), _MAX_CAPPED_DIR_NAME - len(suffix)))]
    return f"{topic}{suffix}"


# ---------------------------------------------------------------------------------------------
# partition.metadata
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionMetadata:
    """``partition.metadata``: ``version: 0\\ntopic_id: <22-char id>``, no trailing newline (43 bytes)."""

    topic_id: KafkaUuid
    version: int = 0

    @classmethod
    def parse(cls, data: bytes | str, source: str, *, strict: bool = False) -> PartitionMetadata:
        """Read as ``PartitionMetadataReadBuffer`` does.

        Each of the first two lines is split on a colon followed by whitespace into exactly two
        parts; the key text is not checked and anything after line 2 is ignored (Kafka reads two
        lines only). The ZERO id is rejected. Version must be >= 0 (3.7+); brokers 2.8-3.6 also
        require it to be 0, so the version is kept for the caller to judge. ``strict=True`` also
        rejects anything that is not byte-for-byte what Kafka writes (e.g. a trailing newline).
        """
        text = _decode_utf8(data, source)
        lines = _java_read_lines(text)
        if not lines:
            raise LogDirFormatError(source, "'version: 0' on line 1", "an empty file")
        version_parts = _java_split(_COLON_WHITESPACES, lines[0])
        if len(version_parts) != 2:
            raise LogDirFormatError(source, "line 1 as 'version: <int>'", describe(lines[0]))
        version = parse_java_int(version_parts[1], source, "the version on line 1")
        if version < 0:
            raise LogDirFormatError(source, "a version >= 0", str(version))
        if len(lines) < 2:
            raise LogDirFormatError(source, "line 2 as 'topic_id: <id>'", "end of file")
        id_parts = _java_split(_COLON_WHITESPACES, lines[1])
        if len(id_parts) != 2:
            raise LogDirFormatError(source, "line 2 as 'topic_id: <id>'", describe(lines[1]))
        try:
            topic_id = KafkaUuid.parse(id_parts[1], source)
        except KafkaFormatError as exc:
            raise LogDirFormatError(source, f"a topic id on line 2 ({exc.expected})", exc.found) from None
        if topic_id.is_zero:
            raise LogDirFormatError(source, "a topic id other than ZERO (AAAAAAAAAAAAAAAAAAAAAA)", "ZERO")
        parsed = cls(topic_id, version)
        if strict and text != parsed.encode().decode("utf-8"):
            raise LogDirFormatError(
                source, "exactly 'version: N\\ntopic_id: <id>' with no trailing newline", describe(text)
            )
        return parsed

    def encode(self) -> bytes:
        """The bytes ``PartitionMetadata.encode`` writes."""
        return f"version: {self.version}\ntopic_id: {self.topic_id}".encode()


# ---------------------------------------------------------------------------------------------
# Checkpoint files (offset checkpoints, leader-epoch-checkpoint)
# ---------------------------------------------------------------------------------------------


def _parse_checkpoint_lines(data: bytes | str, source: str) -> list[str]:
    """``CheckpointFile.CheckpointReadBuffer``: version 0, count, entries; count must equal entries.

    A 0-byte file, or one holding only the version line, means "no entries".
    """
    lines = _java_read_lines(_decode_utf8(data, source))
    if not lines:
        return []
    version = parse_java_int(lines[0], source, "the version line")
    if version != 0:
        raise LogDirFormatError(source, "checkpoint version 0", str(version))
    if len(lines) == 1:
        return []
    count = parse_java_int(lines[1], source, "the entry count line")
    if count < 0:
        raise LogDirFormatError(source, "a non-negative entry count", str(count))
    entries = lines[2:]
    if len(entries) != count:
        raise LogDirFormatError(source, f"{count} entries (the count line)", f"{len(entries)}")
    return entries


def _encode_checkpoint(lines: list[str]) -> bytes:
    """What ``CheckpointFile.write`` produces: BufferedWriter.newLine is '\\n' on Linux."""
    return "".join(f"{line}\n" for line in ["0", str(len(lines)), *lines]).encode()


@dataclass(frozen=True)
class OffsetCheckpointEntry:
    """One ``topic partition offset`` line."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class OffsetCheckpoint:
    """An offset checkpoint (recovery point, replication = high watermark, log start, cleaner).

    ``entries`` keeps file order (Kafka writes them unordered); ``offsets`` is the map the broker
    builds, where a repeated partition's last line wins.
    """

    entries: tuple[OffsetCheckpointEntry, ...] = ()

    @classmethod
    def parse(cls, data: bytes | str, source: str) -> OffsetCheckpoint:
        """Fields are split on whitespace; leading whitespace or a blank line is malformed."""
        entries = []
        for number, line in enumerate(_parse_checkpoint_lines(data, source), start=3):
            fields = line.split(" ")
            # Single spaces between three non-empty fields in a printable line (no tab, CR, LF, VT
            # or FF: not printable) split the same as Java's "\s+": only other lines need the regex
            if len(fields) != 3 or not (fields[0] and fields[1] and fields[2]) or not line.isprintable():
                fields = _java_split(_JAVA_WHITESPACES, line)
            if len(fields) != 3:
                raise LogDirFormatError(source, f"line {number} as 'topic partition offset'", describe(line))
            topic, partition, offset = fields
            # up to 9 and 18 ASCII digits are always within int32 / int64: no range check needed
            if (
                0 < len(partition) < 10
                and 0 < len(offset) < 19
                and (partition + offset).isdigit()
                and line.isascii()
            ):
                entries.append(OffsetCheckpointEntry(topic, int(partition), int(offset)))
                continue
            entries.append(
                OffsetCheckpointEntry(
                    topic,
                    parse_java_int(partition, source, f"the partition on line {number}"),
                    parse_java_int(offset, source, f"the offset on line {number}", bits=64),
                )
            )
        return cls(tuple(entries))

    @classmethod
    def from_offsets(cls, offsets: Mapping[tuple[str, int], int]) -> OffsetCheckpoint:
        return cls(tuple(OffsetCheckpointEntry(t, p, o) for (t, p), o in offsets.items()))

    @property
    def offsets(self) -> dict[tuple[str, int], int]:
        return {(e.topic, e.partition): e.offset for e in self.entries}

    def encode(self) -> bytes:
        return _encode_checkpoint([f"{e.topic} {e.partition} {e.offset}" for e in self.entries])


@dataclass(frozen=True)
class EpochEntry:
    """One ``epoch startOffset`` line of a leader-epoch-checkpoint."""

    epoch: int
    start_offset: int


@dataclass(frozen=True)
class LeaderEpochCheckpoint:
    """``leader-epoch-checkpoint`` in a partition dir (message format v2 only)."""

    entries: tuple[EpochEntry, ...] = ()

    @classmethod
    def parse(cls, data: bytes | str, source: str) -> LeaderEpochCheckpoint:
        entries = []
        for number, line in enumerate(_parse_checkpoint_lines(data, source), start=3):
            fields = _java_split(_JAVA_WHITESPACES, line)
            if len(fields) != 2:
                raise LogDirFormatError(source, f"line {number} as 'epoch startOffset'", describe(line))
            entries.append(
                EpochEntry(
                    parse_java_int(fields[0], source, f"the epoch on line {number}"),
                    parse_java_int(fields[1], source, f"the start offset on line {number}", bits=64),
                )
            )
        return cls(tuple(entries))

    def encode(self) -> bytes:
        return _encode_checkpoint([f"{e.epoch} {e.start_offset}" for e in self.entries])


# ---------------------------------------------------------------------------------------------
# Java .properties (meta.properties, server.properties)
# ---------------------------------------------------------------------------------------------

_PROPS_BLANK = " \t\f"
_PROPS_SEPARATORS = "=: \t\f"
_UNESCAPE = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _properties_logical_lines(text: str) -> Iterable[str]:
    """``Properties.LineReader``: skip blank/comment lines, join backslash continuations."""
    natural = _JAVA_LINE_BREAK.split(text)
    pending: str | None = None
    for raw in natural:
        line = raw.lstrip(_PROPS_BLANK)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes continues the logical line
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:  # a continuation at end of input: the backslash is dropped
        yield pending


def _properties_unescape(text: str, source: str) -> str:
    """``Properties.loadConvert``: \\uXXXX, \\t \\r \\n \\f, and '\\x' -> 'x' for anything else."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        i += 1
        if char != "\\" or i >= len(text):
            if char != "\\":
                out.append(char)
            continue
        char = text[i]
        i += 1
        if char == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise LogDirFormatError(source, "a \\uXXXX escape with 4 hex digits", describe(digits))
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_UNESCAPE.get(char, char))
    return "".join(out)


def _split_property(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped '=', ':' or blank; one '='/':' may follow the blanks."""
    key_end = len(line)
    value_start = len(line)
    escaped = False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
            continue
        if char == "\\":
            escaped = True
            continue
        if char in _PROPS_SEPARATORS:
            key_end = index
            value_start = index + 1
            if char in _PROPS_BLANK:
                while value_start < len(line) and line[value_start] in _PROPS_BLANK:
                    value_start += 1
                if value_start < len(line) and line[value_start] in "=:":
                    value_start += 1
            break
    while value_start < len(line) and line[value_start] in _PROPS_BLANK:
        value_start += 1
    return line[:key_end], line[value_start:]


def parse_java_properties(text: bytes | str, source: str) -> dict[str, str]:
    """``java.util.Properties.load``: the key/value pairs, in first-seen order, the last value winning.

    Bytes are decoded as ISO-8859-1, as ``Properties.load(InputStream)`` (and so Kafka's
    ``Utils.loadProps``) does. Comments start with '#' or '!'; separators are '=', ':' or
    blanks; a trailing odd backslash continues the line. The only input Java rejects is a
    malformed ``\\uXXXX`` escape.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("latin-1")
    properties: dict[str, str] = {}
    for line in _properties_logical_lines(text):
        raw_key, raw_value = _split_property(line)
        properties[_properties_unescape(raw_key, source)] = _properties_unescape(raw_value, source)
    return properties


def _properties_escape(text: str, *, is_key: bool, escape_unicode: bool) -> str:
    """``Properties.saveConvert``."""
    out: list[str] = []
    for index, char in enumerate(text):
        if char == " " and (is_key or index == 0):
            out.append("\\ ")
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif escape_unicode and (ord(char) < 0x20 or ord(char) > 0x7E):
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(char))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]


_JAVA_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_JAVA_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(moment: _dt.datetime | None = None) -> str:
    """``java.util.Date.toString()``: ``EEE MMM dd HH:mm:ss zzz yyyy``, e.g. ``Sun Nov 22 04:33:54 UTC 2026``.

    A naive datetime is taken as UTC. The zone is printed as its abbreviation (``UTC`` for UTC).
    """
    moment = moment or _dt.datetime.now(_dt.UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    zone = moment.tzname() or "UTC"
    return (
        f"{_JAVA_DAYS[moment.weekday()]} {_JAVA_MONTHS[moment.month - 1]} {moment.day:02d} "
        f"{moment:%H:%M:%S} {zone} {moment.year}"
    )


def encode_java_properties(
    properties: Mapping[str, str],
    *,
    comment: str | None = "",
    date_line: str | None = None,
    escape_unicode: bool = True,
) -> bytes:
    """``Properties.store`` output as a Java 9+ JVM writes it on Linux.

    ``properties`` is taken in insertion order (Kafka's ``setProperty`` order) and written in
    the JVM's hash order. ``comment=""`` gives the bare ``#`` line Kafka writes; ``date_line``
    is the text after the second '#' (default: now, see :func:`java_date_string`).
    ``escape_unicode=True`` is ``store(OutputStream)`` (Kafka <= 3.6: Latin-1 with \\uXXXX);
    ``False`` is ``store(Writer)`` (3.7+ ``PropertiesUtils``: raw UTF-8).
    """
    lines: list[str] = []
    if comment is not None:
        lines.append("#" + comment)
    lines.append("#" + (date_line if date_line is not None else java_date_string()))
    for key in java_properties_order(properties):
        escaped_key = _properties_escape(key, is_key=True, escape_unicode=escape_unicode)
        escaped_value = _properties_escape(properties[key], is_key=False, escape_unicode=escape_unicode)
        lines.append(f"{escaped_key}={escaped_value}")
    text = "".join(f"{line}\n" for line in lines)
    return text.encode("latin-1" if escape_unicode else "utf-8")


# ---------------------------------------------------------------------------------------------
# meta.properties
# ---------------------------------------------------------------------------------------------

_META_KEYS_V0 = frozenset({"version", "broker.id", "cluster.id", "directory.id"})
_META_KEYS_V1 = frozenset({"version", "node.id", "cluster.id", "directory.id"})
# Java's String.trim(): every char <= ' '.
_JAVA_TRIM = "".join(map(chr, range(0x21)))
_STORE_HEADER = re.compile(r"#[^\r\n]*(?:\r\n|\r|\n)#([^\r\n]*)(?:\r\n|\r|\n)")


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties`` in each log dir.

    v0 (ZooKeeper mode) carries ``broker.id`` (optional to the parser, as in Kafka); v1 (KRaft)
    requires ``node.id``. ``cluster.id`` is written from 2.4; ``directory.id`` from 3.7 (in ZK
    mode only while migrating). A missing ``version`` key means 0, as in Kafka. ``date_line`` is
    the ``#<Date.toString>`` comment text kept so that :meth:`encode` reproduces the file;
    ``other`` keeps keys Kafka does not read, in file order.
    """

    version: int
    cluster_id: str | None
    broker_id: int | None = None
    node_id: int | None = None
    directory_id: KafkaUuid | None = None
    other: tuple[tuple[str, str], ...] = ()
    date_line: str | None = field(default=None, compare=False)

    @property
    def id(self) -> int | None:
        """The broker (v0) or node (v1) id."""
        return self.broker_id if self.version == 0 else self.node_id

    @classmethod
    def parse(cls, data: bytes | str, source: str) -> MetaProperties:
        """Read as Kafka's ``MetaProperties.Builder(Properties)`` (3.7+) / ``RawMetaProperties`` do.

        A ZK broker that is not migrating also needs version 0 and a matching ``broker.id`` and
        ``cluster.id``; those are cluster-level checks left to the caller.
        """
        text = data if isinstance(data, str) else bytes(data).decode("latin-1")
        props = parse_java_properties(text, source)
        header = _STORE_HEADER.match(text)
        version_text = props.get("version", "0")
        version = parse_java_int(version_text.strip(_JAVA_TRIM), source, "version")
        if version not in (0, 1):
            raise LogDirFormatError(source, "meta.properties version 0 or 1", str(version))
        broker_id = node_id = None
        if version == 0:
            if "broker.id" in props:
                broker_id = parse_java_int(props["broker.id"], source, "broker.id")
        else:
            if "node.id" not in props:
                raise LogDirFormatError(source, "node.id in a version 1 meta.properties", "none")
            node_id = parse_java_int(props["node.id"], source, "node.id")
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = KafkaUuid.parse(props["directory.id"], source)
            except KafkaFormatError as exc:
                raise LogDirFormatError(
                    source, f"directory.id as a Uuid ({exc.expected})", exc.found
                ) from None
        known = _META_KEYS_V0 if version == 0 else _META_KEYS_V1
        other = tuple((k, v) for k, v in props.items() if k not in known)
        return cls(
            version=version,
            cluster_id=props.get("cluster.id"),
            broker_id=broker_id,
            node_id=node_id,
            directory_id=directory_id,
            other=other,
            date_line=header.group(1) if header else None,
        )

    def to_properties(self) -> dict[str, str]:
        """Keys in the order Kafka calls ``setProperty`` (3.3 ZkMetaProperties / 3.9 MetaProperties)."""
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.version == 0 and self.broker_id is not None:
            props["broker.id"] = str(self.broker_id)
        if self.version == 1 and self.node_id is not None:
            props["node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = str(self.directory_id)
        props.update(self.other)
        return props

    def encode(self, date_line: str | None = None, *, escape_unicode: bool = True) -> bytes:
        """``Properties.store(out, "")``: ``#``, ``#<date>``, then keys in JVM hash order.

        ``date_line`` defaults to the parsed one, else now. ZK-mode v0 gives the 88-byte
        ``#\\n#<date>\\nbroker.id=N\\nversion=0\\ncluster.id=<id>\\n`` a 3.3 broker writes.
        """
        return encode_java_properties(
            self.to_properties(),
            comment="",
            date_line=date_line if date_line is not None else self.date_line,
            escape_unicode=escape_unicode,
        )


# ---------------------------------------------------------------------------------------------
# .kafka_cleanshutdown
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CleanShutdownMarker:
    """``.kafka_cleanshutdown``: empty up to 3.6; 3.7+ ``{"version":0,"brokerEpoch":N}`` (ZK: -1).

    Its existence is what tells the broker to skip recovery; 3.7+ ignores unreadable content
    (the epoch is then unknown), so a parse error here means "not what Kafka writes", not
    "the broker will recover".
    """

    broker_epoch: int | None = None
    version: int | None = None

    @classmethod
    def parse(cls, data: bytes | str, source: str) -> CleanShutdownMarker:
        text = _decode_utf8(data, source)
        if text == "":
            return cls()
        try:
            content = json.loads(text)
        except ValueError:
            raise LogDirFormatError(
                source, 'empty or {"version":0,"brokerEpoch":N}', describe(text)
            ) from None
        if not isinstance(content, dict):
            raise LogDirFormatError(source, "a JSON object", describe(text))
        version, epoch = content.get("version"), content.get("brokerEpoch")
        if type(version) is not int or (epoch is not None and type(epoch) is not int):
            raise LogDirFormatError(source, "integer version and brokerEpoch", describe(text))
        return cls(broker_epoch=epoch, version=version)

    def encode(self) -> bytes:
        """Empty for the pre-3.7 marker, else Jackson's compact JSON without a newline."""
        if self.version is None:
            return b""
        epoch = "null" if self.broker_epoch is None else str(self.broker_epoch)
        return f'{{"version":{self.version},"brokerEpoch":{epoch}}}'.encode()
