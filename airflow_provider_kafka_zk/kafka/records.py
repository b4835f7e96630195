"""Log segments and their indexes, byte for byte.

As in ``clients/.../record/DefaultRecordBatch.java`` and ``FileLogInputStream.java``,
``core/src/main/scala/kafka/log/LogSegment.scala``, ``OffsetIndex.scala``, ``TimeIndex.scala`` and
``LogValidator.scala`` (3.3.1), checked against the golden segments of a real 3.3.1 cluster.

Readers take a whole file's bytes plus ``source`` (its path, for messages) and never touch the
disk, so they run unchanged on a Spark executor. Writers produce what a 2.0+ broker produces.

* ``.log``: RecordBatch v2 (CRC-32C over [21, end)) and legacy magic 0/1 message sets
  (zlib CRC-32 over magic..end), walked the way ``FileLogInputStream`` walks them.
* ``.index`` (8-byte entries) and ``.timeindex`` (12-byte entries), with the zero-filled tail a
  preallocated (active or crashed) index has, plus integrity checks against the log.
* :class:`LogSegmentWriter`, which replays ``LogSegment.append`` / ``recover`` index rules.
"""

from __future__ import annotations

import array
import bisect
import enum
import gzip
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c

from .errors import RecordFormatError

__all__ = [
    "BATCH_HEADER_SIZE",
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_MAX_INDEX_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "Compression",
    "Header",
    "IndexProblem",
    "IndexProblemKind",
    "LegacyEntryHeader",
    "LegacyMessage",
    "LogEntry",
    "LogScan",
    "LogSegmentWriter",
    "OffsetIndex",
    "OffsetIndexEntry",
    "Record",
    "TimeIndex",
    "TimeIndexEntry",
    "TimeIndexOffsetRule",
    "TimestampType",
    "check_offset_index",
    "check_time_index",
    "decode_legacy_message",
    "decode_records",
    "encode_legacy_entry",
    "encode_offset_index",
    "encode_record_batch",
    "encode_time_index",
    "iter_log_entries",
    "parse_offset_index",
    "parse_segment_file_name",
    "parse_time_index",
    "rebuild_indexes",
    "scan_log",
    "segment_file_name",
]

LOG_OVERHEAD = 12  # baseOffset/offset int64 + length int32
HEADER_SIZE_UP_TO_MAGIC = 17  # FileLogInputStream stops when this many or fewer bytes remain
BATCH_HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
CRC_START = 21  # CRC-32C covers attributes .. end of batch
LEGACY_MIN_SIZE = {0: 14, 1: 22}  # LegacyRecord.RECORD_OVERHEAD_V0/V1 (crc .. value length)
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10485760  # segment.index.bytes / log.index.size.max.bytes
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
NO_TIMESTAMP = -1

_PREFIX = struct.Struct(">qi4xb")  # offset, size, (leader epoch | crc), magic: 17 bytes
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 header
_BATCH_CRC_FIELD = struct.Struct(">I")
_LEGACY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes (18 bytes)
_LEGACY_V1 = struct.Struct(">qiIbbq")  # ... + timestamp (26 bytes)
_INT32 = struct.Struct(">i")
_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_INT32_MAX = 2**31 - 1


class Compression(enum.IntEnum):
    """Attribute bits 0-2 (zstd needs 2.1+)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attribute bit 3 (v1 and v2 only)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _compression(attributes: int) -> Compression | int:
    """The codec, or the raw code when it is none Kafka knows (5-7)."""
    code = attributes & 0x07
    return Compression(code) if code <= Compression.ZSTD else code


# ---------------------------------------------------------------------------------------------
# Batch and message headers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of a v2 RecordBatch found at ``position`` in a ``.log``.

    ``crc_valid`` is None when the CRC was not checked. A v2 batch shorter than 61 bytes is
    never valid (``DefaultRecordBatch.ensureValid``).
    """

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    crc_valid: bool | None = None

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def next_position(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> Compression | int:
        return _compression(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        """Bit 6 (3.1+): ``base_timestamp`` is then the compaction delete horizon."""
        return bool(self.attributes & 0x40)

    @property
    def last_sequence(self) -> int:
        """``DefaultRecordBatch.lastSequence``: wraps at int32 max like Kafka's incrementSequence."""
        if self.base_sequence == -1:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)


@dataclass(frozen=True, slots=True)
class LegacyEntryHeader:
    """A magic 0/1 log entry (offset, size, message header) at ``position``.

    For a compressed wrapper, ``offset`` is the absolute offset of the last inner message (v1)
    or of the wrapper itself (v0, inner offsets absolute); the inner set is not decoded here.
    """

    position: int
    offset: int
    message_size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP (-1) for magic 0
    crc_valid: bool | None = None

    @property
    def size(self) -> int:
        return self.message_size + LOG_OVERHEAD

    @property
    def next_position(self) -> int:
        return self.position + self.size

    @property
    def base_offset(self) -> int:
        """Known without decompression only for uncompressed messages (== offset)."""
        return self.offset

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def compression(self) -> Compression | int:
        return _compression(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1) if self.magic == 1 else TimestampType.CREATE_TIME


LogEntry = BatchHeader | LegacyEntryHeader


def _corrupt(source: str, position: int, expected: str, found: str | None = None) -> RecordFormatError:
    return RecordFormatError(source, expected, found, position=position)


def iter_log_entries(
    data: bytes | bytearray | memoryview,
    source: str,
    *,
    verify_crc: bool = True,
    strict: bool = False,
    start: int = 0,
) -> Iterator[LogEntry]:
    """Yield every batch (v2) or legacy entry (v0/v1) of a ``.log``, in file order.

    Stops quietly, as ``FileLogInputStream.nextBatch`` does, when 17 or fewer bytes remain or
    the next batch would run past the end (use :func:`scan_log` to learn about such a tail).
    Raises :class:`RecordFormatError` with the byte position for a size below 14 (Kafka's
    CorruptRecordException) or an unknown magic. ``verify_crc`` fills ``crc_valid``; with
    ``strict=True`` a CRC mismatch or an undersized v2/legacy batch raises instead.
    """
    view = memoryview(data)
    end = len(view)
    position = start
    while position < end - HEADER_SIZE_UP_TO_MAGIC:
        _, size, magic = _PREFIX.unpack_from(view, position)
        if size < LEGACY_MIN_SIZE[0]:
            raise _corrupt(source, position, "an entry size of at least 14", str(size))
        if position > end - LOG_OVERHEAD - size:
            return
        entry_end = position + LOG_OVERHEAD + size
        if magic == 2:
            entry = _read_batch_header(view, position, size, source, verify_crc=verify_crc, strict=strict)
        elif magic in (0, 1):
            entry = _read_legacy_header(view, position, size, magic, source, verify_crc, strict)
        else:
            raise _corrupt(source, position, "magic 0, 1 or 2", str(magic))
        yield entry
        position = entry_end


def _read_batch_header(
    view: memoryview, position: int, size: int, source: str, *, verify_crc: bool, strict: bool
) -> BatchHeader:
    total = size + LOG_OVERHEAD
    if total < BATCH_HEADER_SIZE:
        if strict:
            raise _corrupt(source, position, "a v2 batch of at least 61 bytes", f"{total} bytes")
        header = bytes(view[position : position + total]).ljust(BATCH_HEADER_SIZE, b"\0")
        fields = _BATCH_HEADER.unpack(header)
        return BatchHeader(position, *fields, crc_valid=False if verify_crc else None)
    fields = _BATCH_HEADER.unpack_from(view, position)
    crc_valid = None
    if verify_crc:
        computed = crc32c.crc32c(view[position + CRC_START : position + total])
        crc_valid = computed == fields[4]
        if strict and not crc_valid:
            raise _corrupt(
                source, position, f"CRC-32C {fields[4]} of the batch at offset {fields[0]}", str(computed)
            )
    return BatchHeader(position, *fields, crc_valid=crc_valid)


def _read_legacy_header(
    view: memoryview, position: int, size: int, magic: int, source: str, verify_crc: bool, strict: bool
) -> LegacyEntryHeader:
    offset, message_size, crc, _, attributes = _LEGACY_V0.unpack_from(view, position)
    timestamp = NO_TIMESTAMP
    long_enough = size >= LEGACY_MIN_SIZE[magic]
    if magic == 1 and long_enough:
        timestamp = _LEGACY_V1.unpack_from(view, position)[5]
    crc_valid = None
    if verify_crc:
        computed = zlib.crc32(view[position + LOG_OVERHEAD + 4 : position + LOG_OVERHEAD + size])
        crc_valid = long_enough and computed == crc
        if strict and not crc_valid:
            raise _corrupt(source, position, f"a valid magic {magic} message (CRC-32 {crc})", str(computed))
    elif strict and not long_enough:
        raise _corrupt(
            source, position, f"a magic {magic} message of {LEGACY_MIN_SIZE[magic]}+ bytes", str(size)
        )
    return LegacyEntryHeader(position, offset, message_size, crc, magic, attributes, timestamp, crc_valid)


@dataclass(frozen=True)
class LogScan:
    """What a full walk of a ``.log`` found.

    ``entries`` stop where ``FileLogInputStream`` stops. ``valid_bytes`` is where
    ``LogSegment.recover`` would truncate: the start of the first entry that fails its size or
    CRC check, or of a corrupt header (``error``), else the end of the last whole entry.
    ``trailing_bytes`` counts bytes after the last whole entry that are not a whole entry (a
    truncated batch or a short tail); ``truncated_entry_size`` is the size that partial entry
    declares (size field + 12), when its header could be read; ``trailing_zero`` says the tail is
    all zero bytes (``log.preallocate``, or blocks a crash left unwritten) rather than a cut batch.
    """

    entries: tuple[LogEntry, ...]
    file_size: int
    valid_bytes: int
    trailing_bytes: int
    truncated_entry_size: int | None = None
    error: RecordFormatError | None = None
    trailing_zero: bool = False

    @property
    def end_position(self) -> int:
        """Where iteration stopped: end of the last whole entry."""
        return self.entries[-1].next_position if self.entries else 0

    @property
    def first_invalid(self) -> LogEntry | None:
        return next((e for e in self.entries if e.crc_valid is False), None)


def scan_log(data: bytes | bytearray | memoryview, source: str, *, verify_crc: bool = True) -> LogScan:
    """Walk a whole ``.log``, reporting CRC failures, corrupt headers and a truncated tail."""
    entries: list[LogEntry] = []
    error = None
    try:
        for entry in iter_log_entries(data, source, verify_crc=verify_crc):
            entries.append(entry)
    except RecordFormatError as exc:
        error = exc
    end = entries[-1].next_position if entries else 0
    invalid = next((e for e in entries if e.crc_valid is False), None)
    valid_bytes = invalid.position if invalid is not None else end
    file_size = len(data)
    trailing = 0
    declared = None
    trailing_zero = False
    if error is None and end < file_size:
        trailing = file_size - end
        if trailing >= LOG_OVERHEAD:
            declared = _INT32.unpack_from(data, end + 8)[0] + LOG_OVERHEAD
        trailing_zero = not any(memoryview(data)[end:])
    return LogScan(tuple(entries), file_size, valid_bytes, trailing, declared, error, trailing_zero)


# ---------------------------------------------------------------------------------------------
# Varints and records (v2)
# ---------------------------------------------------------------------------------------------


def _read_varint(data: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint (``ByteUtils.readVarint``/``readVarlong``): value, next position."""
    raw = 0
    shift = 0
    for count in range(max_bytes):
        byte = data[pos + count]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + count + 1
        shift += 7
    raise ValueError(f"varint longer than {max_bytes} bytes")


def _write_varint(value: int, out: bytearray, bits: int = 32) -> None:
    raw = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a v2 batch. ``offset`` and ``timestamp`` are absolute; the encoder derives
    the deltas from the batch's base offset and first timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


def decode_records(data: bytes | memoryview, header: BatchHeader, source: str) -> list[Record]:
    """Decode the records of the v2 batch ``header`` found in ``data`` (the whole ``.log``).

    Uncompressed and gzip batches are supported; other codecs raise RecordFormatError. In a
    LogAppendTime batch every record's timestamp is the batch's max timestamp, as in Kafka.
    """
    view = memoryview(data)
    start = header.position + BATCH_HEADER_SIZE
    body: bytes | memoryview = view[start : header.next_position]
    codec = header.compression
    if codec == Compression.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise _corrupt(source, header.position, "a gzip record block", str(exc)) from None
    elif codec != Compression.NONE:
        raise _corrupt(source, header.position, "an uncompressed or gzip batch", f"codec {codec!r}")
    log_append_time = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(header.record_count):
            length, pos = _read_varint(body, pos, 5)
            record_end = pos + length
            if length < 1 or record_end > len(body):
                raise ValueError(f"record length {length} runs past the batch")
            attributes = body[pos]
            timestamp_delta, pos = _read_varint(body, pos + 1, 10)
            offset_delta, pos = _read_varint(body, pos, 5)
            key, pos = _read_bytes(body, pos)
            value, pos = _read_bytes(body, pos)
            header_count, pos = _read_varint(body, pos, 5)
            if header_count < 0:
                raise ValueError(f"negative header count {header_count}")
            headers = []
            for _ in range(header_count):
                key_length, pos = _read_varint(body, pos, 5)
                if key_length < 0:
                    raise ValueError(f"negative header key size {key_length}")
                header_key = bytes(body[pos : pos + key_length]).decode("utf-8")
                header_value, pos = _read_bytes(body, pos + key_length)
                headers.append(Header(header_key, header_value))
            if pos != record_end:
                raise ValueError(f"record declares {length} bytes but holds {length + pos - record_end}")
            timestamp = (
                log_append_time if log_append_time is not None else header.base_timestamp + timestamp_delta
            )
            records.append(
                Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers), attributes)
            )
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise _corrupt(
            source, header.position, f"{header.record_count} well-formed records", str(exc)
        ) from None
    if pos != len(body):
        raise _corrupt(source, header.position, "no bytes after the last record", f"{len(body) - pos} bytes")
    return records


def _read_bytes(body: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(body, pos, 5)
    if length < 0:
        return None, pos
    if pos + length > len(body):
        raise ValueError(f"a {length}-byte field runs past the batch")
    return bytes(body[pos : pos + length]), pos + length


def _write_bytes(value: bytes | None, out: bytearray) -> None:
    if value is None:
        _write_varint(-1, out)
    else:
        _write_varint(len(value), out)
        out += value


def encode_record_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
) -> bytes:
    """A v2 RecordBatch as ``MemoryRecordsBuilder`` builds it, with a correct CRC-32C.

    ``base_offset`` defaults to the first record's offset. Base timestamp = the first record's,
    max timestamp = the largest (or ``log_append_time``); an empty batch (compaction leftover)
    has -1 for both and needs ``base_offset`` and ``last_offset_delta``. Gzip output is valid
    but not byte-identical to the JVM's.
    """
    if base_offset is None:
        if not records:
            raise ValueError("an empty batch needs base_offset")
        base_offset = records[0].offset
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = max(r.timestamp for r in records)
        if last_offset_delta is None:
            last_offset_delta = records[-1].offset - base_offset
    else:
        base_timestamp = max_timestamp = NO_TIMESTAMP
        if last_offset_delta is None:
            raise ValueError("an empty batch needs last_offset_delta")
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("a LogAppendTime batch needs log_append_time")
        max_timestamp = log_append_time
    body = bytearray()
    for record in records:
        encoded = bytearray([record.attributes])
        _write_varint(record.timestamp - base_timestamp, encoded, 64)
        _write_varint(record.offset - base_offset, encoded)
        _write_bytes(record.key, encoded)
        _write_bytes(record.value, encoded)
        _write_varint(len(record.headers), encoded)
        for header in record.headers:
            key = header.key.encode("utf-8")
            _write_varint(len(key), encoded)
            encoded += key
            _write_bytes(header.value, encoded)
        _write_varint(len(encoded), body)
        body += encoded
    if compression == Compression.GZIP:
        body = bytearray(gzip.compress(bytes(body), mtime=0))
    elif compression != Compression.NONE:
        raise ValueError(f"cannot encode {compression!r} batches")
    attributes = (
        int(compression)
        | (int(timestamp_type) << 3)
        | (0x10 if is_transactional else 0)
        | (0x20 if is_control else 0)
    )
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += body
    _BATCH_HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _BATCH_CRC_FIELD.pack_into(batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


# ---------------------------------------------------------------------------------------------
# Legacy messages (magic 0/1)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """A decoded magic 0/1 log entry (shallow: a compressed wrapper's value is the inner set)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int

    @property
    def compression(self) -> Compression | int:
        return _compression(self.attributes)


def decode_legacy_message(data: bytes | memoryview, position: int, source: str) -> LegacyMessage:
    """Decode the magic 0/1 entry at ``position``, checking sizes and the zlib CRC-32."""
    view = memoryview(data)
    if position + LOG_OVERHEAD + 6 > len(view):
        raise _corrupt(source, position, "a legacy log entry header", "end of file")
    offset, size, crc, magic, attributes = _LEGACY_V0.unpack_from(view, position)
    if magic not in (0, 1):
        raise _corrupt(source, position, "magic 0 or 1", str(magic))
    end = position + LOG_OVERHEAD + size
    if size < LEGACY_MIN_SIZE[magic] or end > len(view):
        raise _corrupt(
            source, position, f"a magic {magic} message of {LEGACY_MIN_SIZE[magic]}+ bytes", str(size)
        )
    computed = zlib.crc32(view[position + LOG_OVERHEAD + 4 : end])
    if computed != crc:
        raise _corrupt(source, position, f"CRC-32 {crc}", str(computed))
    pos = position + LOG_OVERHEAD + 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        timestamp = struct.unpack_from(">q", view, pos)[0]
        pos += 8
    fields: list[bytes | None] = []
    for what in ("key", "value"):
        if pos + 4 > end:
            raise _corrupt(source, position, f"a {what} length", "end of message")
        length = _INT32.unpack_from(view, pos)[0]
        pos += 4
        if length < 0:
            fields.append(None)
            continue
        if pos + length > end:
            raise _corrupt(source, position, f"a {length}-byte {what} inside the message", "end of message")
        fields.append(bytes(view[pos : pos + length]))
        pos += length
    if pos != end:
        raise _corrupt(source, position, "no bytes after the value", f"{end - pos} bytes")
    return LegacyMessage(offset, magic, attributes, timestamp, fields[0], fields[1], crc)


def encode_legacy_entry(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One magic 0/1 log entry: offset, size, crc (zlib CRC-32 of magic..end), message."""
    if magic not in (0, 1):
        raise ValueError("legacy magic is 0 or 1")
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field_value in (key, value):
        if field_value is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field_value)) + field_value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


# ---------------------------------------------------------------------------------------------
# Offset and time indexes
# ---------------------------------------------------------------------------------------------


def segment_file_name(base_offset: int, suffix: str = ".log") -> str:
    """``00000000000000003998.log``: 20-digit zero-padded offset, then the suffix(es)."""
    if base_offset < 0:
        raise ValueError("segment offsets are non-negative")
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str, source: str | None = None) -> tuple[int, str]:
    """``(offset, suffix)`` from e.g. ``00000000000000000000.index.swap`` -> ``(0, ".index.swap")``.

    Like ``LogFileUtils.offsetFromFileName``: the digits before the first '.'. For a
    ``.snapshot`` the offset is what the producer-state snapshot covers up to, not a base offset.
    """
    dot = name.find(".")
    digits = name[:dot] if dot >= 0 else name
    if not digits.isascii() or not digits.isdigit() or len(digits) != 20:
        raise RecordFormatError(source or name, "a 20-digit zero-padded offset before the first '.'", name)
    return int(digits), name[dot:] if dot >= 0 else ""


@dataclass(frozen=True, slots=True)
class OffsetIndexEntry:
    offset: int  # absolute (base offset + relative offset)
    position: int


@dataclass(frozen=True, slots=True)
class TimeIndexEntry:
    timestamp: int
    offset: int  # absolute


@dataclass(frozen=True)
class OffsetIndex:
    """A parsed ``.index``.

    ``entries`` end where DumpLogSegments (2.3+) stops: at the first entry i > 0 whose offset is
    the base offset. An all-zero first entry also starts the tail (an empty preallocated
    index); Kafka never indexes position 0, so this loses nothing. ``tail_entries`` counts the
    entries after that point; ``tail_nonzero`` says some of those bytes are not zero (entries
    written after an apparent hole: corruption, or a file that was never preallocated).
    """

    base_offset: int
    entries: tuple[OffsetIndexEntry, ...]
    tail_entries: int = 0
    tail_nonzero: bool = False

    @property
    def size_in_bytes(self) -> int:
        return (len(self.entries) + self.tail_entries) * OFFSET_INDEX_ENTRY_SIZE


@dataclass(frozen=True)
class TimeIndex:
    """A parsed ``.timeindex``; zero-tail handling as for :class:`OffsetIndex`."""

    base_offset: int
    entries: tuple[TimeIndexEntry, ...]
    tail_entries: int = 0
    tail_nonzero: bool = False

    @property
    def size_in_bytes(self) -> int:
        return (len(self.entries) + self.tail_entries) * TIME_INDEX_ENTRY_SIZE


def _split_zero_tail(
    data: bytes | memoryview, entry_size: int, offset_field: int, source: str, what: str
) -> tuple[int, int, bool]:
    """(real entry count, tail entry count, tail has non-zero bytes)."""
    if len(data) % entry_size:
        raise RecordFormatError(
            source, f"a {what} length that is a multiple of {entry_size}", f"{len(data)} bytes"
        )
    raw = data if isinstance(data, bytes | bytearray) else memoryview(data).tobytes()
    count = len(raw) // entry_size
    if count and not any(raw[:entry_size]):
        stop = 0
    else:
        stop = count
        # Zero is zero in either byte order, so native int32s find the first relative offset 0
        # at C speed; look at a short prefix first since real entries are usually few.
        for window in (min(count, 4096), count):
            words = array.array("i")
            words.frombytes(raw[: window * entry_size])
            try:
                stop = words[offset_field // 4 :: entry_size // 4].index(0, 1)
                break
            except ValueError:
                continue
    tail_start = stop * entry_size
    tail_nonzero = raw.count(0, tail_start) != len(raw) - tail_start
    return stop, count - stop, tail_nonzero


def parse_offset_index(data: bytes | memoryview, base_offset: int, source: str) -> OffsetIndex:
    """Read a ``.index`` (8-byte entries: int32 relative offset, int32 position)."""
    stop, tail, tail_nonzero = _split_zero_tail(data, OFFSET_INDEX_ENTRY_SIZE, 0, source, "offset index")
    entries = tuple(
        OffsetIndexEntry(base_offset + relative, position)
        for relative, position in _OFFSET_ENTRY.iter_unpack(
            memoryview(data)[: stop * OFFSET_INDEX_ENTRY_SIZE]
        )
    )
    return OffsetIndex(base_offset, entries, tail, tail_nonzero)


def parse_time_index(data: bytes | memoryview, base_offset: int, source: str) -> TimeIndex:
    """Read a ``.timeindex`` (12-byte entries: int64 timestamp, int32 relative offset)."""
    stop, tail, tail_nonzero = _split_zero_tail(data, TIME_INDEX_ENTRY_SIZE, 8, source, "time index")
    entries = tuple(
        TimeIndexEntry(timestamp, base_offset + relative)
        for timestamp, relative in _TIME_ENTRY.iter_unpack(memoryview(data)[: stop * TIME_INDEX_ENTRY_SIZE])
    )
    return TimeIndex(base_offset, entries, tail, tail_nonzero)


def _padded(data: bytes, entry_size: int, preallocate_to: int | None) -> bytes:
    if preallocate_to is None:
        return data
    size = preallocate_to // entry_size * entry_size
    if len(data) > size:
        raise ValueError(f"{len(data)} bytes of entries do not fit a {size}-byte index")
    return data + bytes(size - len(data))


def encode_offset_index(
    entries: Iterable[OffsetIndexEntry], base_offset: int, *, preallocate_to: int | None = None
) -> bytes:
    """Entries as Kafka writes them; ``preallocate_to`` (e.g. 10485760) zero-pads like an active segment."""
    data = b"".join(_OFFSET_ENTRY.pack(e.offset - base_offset, e.position) for e in entries)
    return _padded(data, OFFSET_INDEX_ENTRY_SIZE, preallocate_to)


def encode_time_index(
    entries: Iterable[TimeIndexEntry], base_offset: int, *, preallocate_to: int | None = None
) -> bytes:
    """Entries as Kafka writes them; ``preallocate_to=10485760`` gives the 10485756-byte active file."""
    data = b"".join(_TIME_ENTRY.pack(e.timestamp, e.offset - base_offset) for e in entries)
    return _padded(data, TIME_INDEX_ENTRY_SIZE, preallocate_to)


# ---------------------------------------------------------------------------------------------
# Index integrity against the log
# ---------------------------------------------------------------------------------------------


class IndexProblemKind(enum.Enum):
    """What is wrong with an index entry. ``corrupt`` kinds make Kafka lookups or appends fail."""

    # offset index
    OFFSET_NOT_INCREASING = ("corrupt", "offset not greater than the previous entry's")
    POSITION_NOT_INCREASING = ("corrupt", "position not greater than the previous entry's")
    OFFSET_BELOW_BASE = ("corrupt", "offset below the segment's base offset")
    POSITION_PAST_END = ("corrupt", "position at or past the end of the valid log")
    POSITION_NOT_AT_BATCH = ("corrupt", "position is not the start of a batch")
    OFFSET_BEFORE_BATCH = ("corrupt", "offset below the base offset of the batch it points at")
    OFFSET_PAST_LOG_END = ("corrupt", "offset beyond the last offset in the log")
    OFFSET_INSIDE_BATCH = ("warning", "offset inside, not at the end of, the batch it points at")
    MULTI_BATCH_APPEND = ("info", "offset is the last offset of a later batch (multi-batch append)")
    NONZERO_TAIL = ("corrupt", "non-zero bytes after the zero-filled tail")
    # time index
    TIMESTAMP_NOT_INCREASING = ("corrupt", "timestamp not greater than the previous entry's")
    TIME_OFFSET_DECREASING = ("corrupt", "offset smaller than the previous entry's")
    TIME_OFFSET_NOT_IN_LOG = ("corrupt", "offset not inside any batch of the log")
    TIMESTAMP_MISMATCH = (
        "warning",
        "timestamp differs from the max timestamp of the batch holding the offset",
    )

    def __init__(self, severity: str, description: str) -> None:
        self.severity = severity
        self.description = description

    @property
    def corrupt(self) -> bool:
        return self.severity == "corrupt"


@dataclass(frozen=True)
class IndexProblem:
    """One finding about entry number ``entry`` (0-based) of an index file."""

    source: str
    kind: IndexProblemKind
    entry: int
    offset: int | None = None
    position: int | None = None
    detail: str = ""

    @property
    def corrupt(self) -> bool:
        return self.kind.corrupt

    def __str__(self) -> str:
        where = f"{self.source} entry {self.entry}"
        extra = f" ({self.detail})" if self.detail else ""
        return f"{where}: {self.kind.description}{extra}"


def check_offset_index(index: OffsetIndex, log: LogScan, source: str) -> list[IndexProblem]:
    """Check a ``.index`` against its ``.log`` with 2.0+ semantics.

    Entries must increase strictly in offset and position (a non-monotonic index is the
    corruption that stops a broker restart), lie within the valid log, point at a batch start,
    and carry that batch's last offset (2.0+; a 0.11-1.1 broker wrote its base offset, reported
    as OFFSET_INSIDE_BATCH). A follower's multi-batch fetch append may index the last offset of
    a later batch of the same chunk: reported as info, since lookups stay correct. An offset
    below the batch's base offset makes lookups skip records and is corrupt.
    """
    problems: list[IndexProblem] = []
    batches = {e.position: e for e in log.entries}
    ordered = log.entries
    last_offsets = [e.last_offset for e in ordered]
    log_last_offset = last_offsets[-1] if last_offsets else index.base_offset - 1
    readable_end = log.end_position
    entries = index.entries
    for number, entry in enumerate(entries):
        found: list[tuple[IndexProblemKind, str]] = []
        if number:
            previous = entries[number - 1]
            if entry.offset <= previous.offset:
                found.append(
                    (IndexProblemKind.OFFSET_NOT_INCREASING, f"{entry.offset} after {previous.offset}")
                )
            if entry.position <= previous.position:
                found.append(
                    (IndexProblemKind.POSITION_NOT_INCREASING, f"{entry.position} after {previous.position}")
                )
        if entry.offset < index.base_offset:
            found.append((IndexProblemKind.OFFSET_BELOW_BASE, f"base offset {index.base_offset}"))
        if entry.offset > log_last_offset:
            found.append((IndexProblemKind.OFFSET_PAST_LOG_END, f"log ends at offset {log_last_offset}"))
        batch = batches.get(entry.position)
        if not 0 <= entry.position < readable_end:
            found.append((IndexProblemKind.POSITION_PAST_END, f"readable log is {readable_end} bytes"))
        elif batch is None:
            found.append((IndexProblemKind.POSITION_NOT_AT_BATCH, ""))
        elif entry.offset != batch.last_offset:
            span = f"batch {batch.base_offset}..{batch.last_offset}"
            if entry.offset < batch.base_offset:
                found.append((IndexProblemKind.OFFSET_BEFORE_BATCH, span))
            elif entry.offset < batch.last_offset:
                found.append((IndexProblemKind.OFFSET_INSIDE_BATCH, span))
            elif entry.offset <= log_last_offset:
                at = bisect.bisect_left(last_offsets, entry.offset)
                if at < len(ordered) and last_offsets[at] == entry.offset:
                    found.append(
                        (IndexProblemKind.MULTI_BATCH_APPEND, f"batch at byte {ordered[at].position}")
                    )
                else:
                    found.append((IndexProblemKind.OFFSET_INSIDE_BATCH, f"no batch ends at {entry.offset}"))
        problems.extend(
            IndexProblem(source, kind, number, entry.offset, entry.position, detail) for kind, detail in found
        )
    if index.tail_nonzero:
        problems.append(
            IndexProblem(
                source, IndexProblemKind.NONZERO_TAIL, len(entries), detail=f"{index.tail_entries} entries"
            )
        )
    return problems


def check_time_index(index: TimeIndex, log: LogScan, source: str) -> list[IndexProblem]:
    """Check a ``.timeindex`` against its ``.log``.

    Timestamps must increase strictly and offsets must not decrease (``TimeIndex.maybeAppend``
    never writes otherwise). Each offset must lie inside some batch, and that batch's max
    timestamp should equal the entry's. Deliberately *not* required: offset == the batch's last
    offset. A leader indexes the offset of the max-timestamp *record* of an uncompressed batch
    (``LogValidator``), followers and recovery the batch's last offset (seen in the real 3.3.1
    golden files: leader and follower ``.timeindex`` differ); both satisfy
    "inside the batch whose max timestamp this is", so DumpLogSegments' "not found in the log"
    complaint about leaders is not repeated here.
    """
    problems: list[IndexProblem] = []
    ordered = log.entries
    last_offsets = [e.last_offset for e in ordered]
    entries = index.entries
    for number, entry in enumerate(entries):
        found: list[tuple[IndexProblemKind, str]] = []
        if number:
            previous = entries[number - 1]
            if entry.timestamp <= previous.timestamp:
                found.append(
                    (
                        IndexProblemKind.TIMESTAMP_NOT_INCREASING,
                        f"{entry.timestamp} after {previous.timestamp}",
                    )
                )
            if entry.offset < previous.offset:
                found.append(
                    (IndexProblemKind.TIME_OFFSET_DECREASING, f"{entry.offset} after {previous.offset}")
                )
        at = bisect.bisect_left(last_offsets, entry.offset)
        batch = ordered[at] if at < len(ordered) else None
        if batch is None or entry.offset < batch.base_offset:
            found.append((IndexProblemKind.TIME_OFFSET_NOT_IN_LOG, ""))
        elif batch.max_timestamp != entry.timestamp:
            found.append((IndexProblemKind.TIMESTAMP_MISMATCH, f"batch max timestamp {batch.max_timestamp}"))
        problems.extend(
            IndexProblem(source, kind, number, entry.offset, None, detail) for kind, detail in found
        )
    if index.tail_nonzero:
        problems.append(
            IndexProblem(
                source, IndexProblemKind.NONZERO_TAIL, len(index.entries), detail=f"{index.tail_entries}"
            )
        )
    return problems


# ---------------------------------------------------------------------------------------------
# Building segments the way a broker does
# ---------------------------------------------------------------------------------------------


class TimeIndexOffsetRule(enum.Enum):
    """Which offset a time-index entry carries for a batch's max timestamp.

    BATCH_LAST_OFFSET: followers (``analyzeAndValidateRecords``), recovery, and any compressed
    or LogAppendTime batch. MAX_TIMESTAMP_RECORD: the leader's uncompressed CreateTime appends
    (``LogValidator.assignOffsetsNonCompressed``): the first record holding the max timestamp.
    """

    BATCH_LAST_OFFSET = "batch_last_offset"
    MAX_TIMESTAMP_RECORD = "max_timestamp_record"


@dataclass
class LogSegmentWriter:
    """Build a segment (``.log``, ``.index``, ``.timeindex``) as a 2.0+ broker's ``LogSegment`` does.

    :meth:`append` is one ``LogSegment.append`` call: a chunk of one or more whole batches (a
    producer request holds one per partition; a follower's fetch may hold several). Before
    adding the chunk, if more than ``index_interval_bytes`` were appended since the last entry,
    an offset-index entry (chunk's last offset, chunk's start position) is written together with
    a time-index entry for the segment's max timestamp so far (only when it grew). So the first
    chunk, at position 0, is never indexed. :meth:`close` (also roll and the end of recovery)
    forces the final time-index entry. The rule is the same for every 2.0+ version through 3.9.
    """

    base_offset: int
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    time_index_offsets: TimeIndexOffsetRule = TimeIndexOffsetRule.BATCH_LAST_OFFSET
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    source: str = "segment"
    log: bytearray = field(default_factory=bytearray)
    offset_entries: list[OffsetIndexEntry] = field(default_factory=list)
    time_entries: list[TimeIndexEntry] = field(default_factory=list)
    max_timestamp_so_far: int = NO_TIMESTAMP
    offset_of_max_timestamp: int | None = None
    bytes_since_last_index_entry: int = 0
    log_end_offset: int | None = None
    closed: bool = False

    def append(self, chunk: bytes) -> None:
        """Append one chunk of whole v2/legacy batches (CRC-checked) and maintain the indexes."""
        if self.closed:
            raise ValueError("segment is closed")
        if not chunk:
            return
        entries = list(iter_log_entries(chunk, self.source, strict=True))
        if not entries or entries[-1].next_position != len(chunk):
            raise RecordFormatError(self.source, "a chunk of whole batches", f"{len(chunk)} bytes")
        previous_last = self.log_end_offset - 1 if self.log_end_offset is not None else self.base_offset - 1
        for entry in entries:  # UnifiedLog's OffsetsOutOfOrder / UnexpectedAppendOffset checks
            if entry.last_offset <= previous_last or entry.base_offset <= previous_last:
                raise RecordFormatError(
                    self.source,
                    f"offsets above {previous_last} (out of order: InvalidOffsetException)",
                    f"batch {entry.base_offset}..{entry.last_offset}",
                )
            previous_last = entry.last_offset
        largest_offset = entries[-1].last_offset
        if not 0 <= largest_offset - self.base_offset <= _INT32_MAX:
            raise RecordFormatError(
                self.source, "offsets within int32 of the base offset", str(largest_offset)
            )
        chunk_max_timestamp, chunk_offset_of_max = NO_TIMESTAMP, largest_offset
        for entry in entries:
            if entry.max_timestamp > chunk_max_timestamp:
                chunk_max_timestamp = entry.max_timestamp
                chunk_offset_of_max = self._offset_of_max_timestamp(chunk, entry)
        position = len(self.log)
        self.log += chunk
        self.log_end_offset = largest_offset + 1
        if chunk_max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = chunk_max_timestamp
            self.offset_of_max_timestamp = chunk_offset_of_max
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self._append_offset_entry(largest_offset, position)
            self._maybe_append_time_entry(skip_full_check=False)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(chunk)

    def _offset_of_max_timestamp(self, chunk: bytes, entry: LogEntry) -> int:
        if (
            self.time_index_offsets is TimeIndexOffsetRule.MAX_TIMESTAMP_RECORD
            and isinstance(entry, BatchHeader)
            and entry.compression == Compression.NONE
            and entry.timestamp_type == TimestampType.CREATE_TIME
        ):
            best_offset, best_timestamp = entry.last_offset, NO_TIMESTAMP
            for record in decode_records(chunk, entry, self.source):
                if record.timestamp > best_timestamp:
                    best_offset, best_timestamp = record.offset, record.timestamp
            return best_offset
        return entry.last_offset

    def _append_offset_entry(self, offset: int, position: int) -> None:
        if len(self.offset_entries) >= self.max_index_size // OFFSET_INDEX_ENTRY_SIZE:
            raise ValueError("offset index is full: Kafka rolls the segment first")
        if self.offset_entries and offset <= self.offset_entries[-1].offset:
            raise RecordFormatError(
                self.source,
                f"an offset above {self.offset_entries[-1].offset} (InvalidOffsetException)",
                str(offset),
            )
        self.offset_entries.append(OffsetIndexEntry(offset, position))

    def _maybe_append_time_entry(self, *, skip_full_check: bool) -> None:
        """``TimeIndex.maybeAppend``: only when the timestamp is above the last entry's (or -1)."""
        if self.offset_of_max_timestamp is None:
            return
        if not skip_full_check and len(self.time_entries) >= self.max_index_size // TIME_INDEX_ENTRY_SIZE:
            raise ValueError("time index is full: Kafka rolls the segment first")
        last = self.time_entries[-1] if self.time_entries else TimeIndexEntry(NO_TIMESTAMP, self.base_offset)
        if self.time_entries and self.offset_of_max_timestamp < last.offset:
            raise RecordFormatError(
                self.source, f"a time-index offset >= {last.offset}", str(self.offset_of_max_timestamp)
            )
        if self.max_timestamp_so_far > last.timestamp:
            self.time_entries.append(TimeIndexEntry(self.max_timestamp_so_far, self.offset_of_max_timestamp))

    def close(self) -> None:
        """Roll or clean close: force the final time-index entry (``onBecomeInactiveSegment``)."""
        if not self.closed:
            self._maybe_append_time_entry(skip_full_check=True)
            self.closed = True

    def log_bytes(self) -> bytes:
        return bytes(self.log)

    def offset_index_bytes(self, *, preallocate: bool = False) -> bytes:
        """Trimmed as on disk after roll/close, or zero-padded like the active segment's file."""
        return encode_offset_index(
            self.offset_entries, self.base_offset, preallocate_to=self.max_index_size if preallocate else None
        )

    def time_index_bytes(self, *, preallocate: bool = False) -> bytes:
        return encode_time_index(
            self.time_entries, self.base_offset, preallocate_to=self.max_index_size if preallocate else None
        )

    def files(self, *, preallocate: bool | None = None) -> dict[str, bytes]:
        """``{file name: bytes}``; indexes are preallocated by default while the segment is open."""
        pad = (not self.closed) if preallocate is None else preallocate
        return {
            segment_file_name(self.base_offset, ".log"): self.log_bytes(),
            segment_file_name(self.base_offset, ".index"): self.offset_index_bytes(preallocate=pad),
            segment_file_name(self.base_offset, ".timeindex"): self.time_index_bytes(preallocate=pad),
        }


def rebuild_indexes(
    log_data: bytes,
    base_offset: int,
    source: str,
    *,
    time_index_offsets: TimeIndexOffsetRule = TimeIndexOffsetRule.BATCH_LAST_OFFSET,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    close: bool = True,
) -> LogSegmentWriter:
    """Replay a ``.log`` batch by batch, as ``LogSegment.recover`` (and a one-batch-per-append
    leader or follower) indexes it. Like recovery it stops at the first invalid batch or corrupt
    header, so ``len(writer.log)`` is where Kafka would truncate the segment.

    ``close=False`` leaves out the final time-index entry (a running broker's active segment).
    """
    writer = LogSegmentWriter(
        base_offset,
        index_interval_bytes=index_interval_bytes,
        time_index_offsets=time_index_offsets,
        source=source,
    )
    view = memoryview(log_data)
    try:
        for entry in iter_log_entries(log_data, source, verify_crc=True):
            if entry.crc_valid is False:
                break
            writer.append(bytes(view[entry.position : entry.next_position]))
    except RecordFormatError:
        pass  # a corrupt header: recovery truncates here too; len(writer.log) says where
    if close:
        writer.close()
    return writer
