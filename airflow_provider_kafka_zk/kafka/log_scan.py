"""What a broker restart would find in one partition's segments: index structure and the recovery walk.

Standard library only, no package imports, Python 3.6+: the broker-side scan sends this very file
over SSH (with a small driver), so the rules exist once and run where the bytes are. It reads what
Kafka reads at the next start (:func:`scan_partition`): every segment's indexes, and every byte of
each segment a start recovers, every batch's CRC checked -- in 1 MiB ``pread`` windows, so memory
stays flat however large the segments are; other segments' batch headers only when asked
(``walk_all``). The CRC-32C is the fastest the host offers (:func:`select_crc`). What Kafka then
does with these facts (per release) is :mod:`.broker_start`'s.

Safety on the broker host: every file is opened only if it is a regular file (``lstat``, then
``O_NOFOLLOW | O_NONBLOCK``, then ``fstat`` of the opened descriptor must be the same regular file),
so a FIFO, device, directory or symlink named like a segment file is reported as skipped with the
reason, never opened for reading (a FIFO would block ``open()`` until a writer comes). Reading is
bounded in bytes and time: :class:`Budget` stops the whole scan at its deadline and each file at its
own, and what was not read is reported, never silently taken as clean.

The walk follows ``LogSegment.recover`` (``core/src/main/scala/kafka/log/LogSegment.scala`` at
0.11.0.0, 2.0.0 and 3.3.1; ``storage/.../LogSegment.java`` at 3.9.0-rc3) and
``FileLogInputStream.nextBatch`` (``clients/.../record/FileLogInputStream.java``):

* batches are read from position 0; iteration ends quietly when 17 or fewer bytes remain or the next
  batch would run past the end (a torn tail: recovery truncates it, no exception); a size below 14 is
  a ``CorruptRecordException``, a v2 batch under 61 bytes or with a bad CRC (CRC-32C from the
  attributes on; a legacy message's CRC-32 from its magic byte on) fails ``batch.ensureValid()``
  (``DefaultRecordBatch``/``LegacyRecord``, 3.3.1): recovery truncates the segment at that batch and
  logs the exception's message, which the walk records as Kafka builds it;
* every ``index.interval.bytes`` (4096) recovery appends an offset-index entry for the batch at that
  position -- ``baseOffset`` up to 1.1, ``lastOffset`` from 2.0 -- and ``OffsetIndex.append`` throws
  ``InvalidOffsetException`` unless the offset is larger than the last one appended; with it
  ``TimeIndex.maybeAppend`` throws the same when the offset of the max timestamp so far goes back;
* from 2.0 ``ensureOffsetInRange(batch.lastOffset)`` throws ``LogSegmentOffsetOverflowException`` for
  an offset below the segment's base or more than 2^31-1 above it.

The walk keeps going after an exception that leaves the structure readable, so the result also says
what lies after it (the offsets and bytes a remedy keeps or drops), and where the offsets first go
back (``first_bad``: where a remedy that keeps the most must cut).
"""

import errno
import os
import stat
import struct
import time
import zlib

OFFSET_ENTRY = 8
TIME_ENTRY = 12
LOG_OVERHEAD = 12  # baseOffset int64 + length int32
V2_HEADER = 61
HEADER_UP_TO_MAGIC = 17
LEGACY_MIN_SIZE = 14
LEGACY_V1_MIN_SIZE = 22
DEFAULT_INDEX_INTERVAL = 4096
EMPTY_INDEX_SUSPICIOUS_BYTES = 8 * 1024 * 1024
MAX_RELATIVE_OFFSET = 2**31 - 1
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_READ = 1 << 20  # index files are read in 1 MiB chunks
_CHECK_EVERY = 64  # batches or index entries between two looks at the clock
_PREFIX = struct.Struct(">qi")  # baseOffset, length
_V2_FIELDS = struct.Struct(">qi4xB4x2xi8xq")  # base, length, magic, lastOffsetDelta, maxTimestamp
_LEGACY_FIELDS = struct.Struct(">qi4xBxq")  # offset, size, magic, timestamp (magic 1)
_O_SAFE = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def _crc32c_register(state, data):
    """The CRC-32C register after ``data`` from ``state`` (no final inversion), byte by byte."""
    table = _CRC32C
    for b in data:
        state = table[(state ^ b) & 0xFF] ^ (state >> 8)
    return state


# --- pure Python, vectorised: the register is linear in the data (GF(2)), so every 8-byte chunk's
# contribution comes from byte-wise tables applied with ``bytes.translate`` (C speed), and pairs of
# chunk contributions are folded with "feed N zero bytes" tables, halving the data each round.


def _byte_planes(values):
    """Four ``translate`` tables: byte q of each of 256 register values."""
    return [bytes((v >> (8 * q)) & 0xFF for v in values) for q in range(4)]


def _lane_table(images):
    """The 256 register values of a byte lane whose 8 bits map to ``images`` (linear)."""
    out = [0] * 256
    for v in range(1, 256):
        low = v & -v
        out[v] = out[v ^ low] ^ images[low.bit_length() - 1]
    return out


def _apply(matrix, state):
    out, i = 0, 0
    while state:
        if state & 1:
            out ^= matrix[i]
        state >>= 1
        i += 1
    return out


_ZERO_BYTES = [[_crc32c_register(1 << i, b"\0") for i in range(32)]]  # [k]: feeding 2**k zero bytes


def _feed_zeros(k):
    """The register's linear map for 2**k zero bytes (its 32 column images)."""
    while len(_ZERO_BYTES) <= k:
        m = _ZERO_BYTES[-1]
        _ZERO_BYTES.append([_apply(m, m[i]) for i in range(32)])
    return _ZERO_BYTES[k]


_CHUNK_TABLES = None  # [position in an 8-byte chunk][output byte] -> translate table
_FOLD_TABLES = {}  # k -> [input byte][output byte]: the register after 2**k zero bytes


def _chunk_tables():
    global _CHUNK_TABLES
    if _CHUNK_TABLES is None:
        tables = []
        for p in range(8):
            # the register after the chunk (from 0) as a function of its byte p: linear, 8 images
            images = [_crc32c_register(0, bytes(p) + bytes([1 << bit]) + bytes(7 - p)) for bit in range(8)]
            tables.append(_byte_planes(_lane_table(images)))
        _CHUNK_TABLES = tables
    return _CHUNK_TABLES


def _fold_tables(k):
    tables = _FOLD_TABLES.get(k)
    if tables is None:
        matrix = _feed_zeros(k)
        tables = [_byte_planes(_lane_table(matrix[8 * q : 8 * q + 8])) for q in range(4)]
        _FOLD_TABLES[k] = tables
    return tables


def _register_of(data):
    """The register after ``data`` from 0 (``len(data)`` a multiple of 8)."""
    chunks = len(data) // 8
    planes = []
    cols = [data[p::8] for p in range(8)]
    tables = _chunk_tables()
    for q in range(4):
        acc = 0
        for p in range(8):
            acc ^= int.from_bytes(cols[p].translate(tables[p][q]), "little")
        planes.append(acc.to_bytes(chunks, "little"))
    k = 3  # each value stands for 2**k bytes
    while chunks > 1:
        if chunks & 1:  # a leading zero chunk changes nothing (the register starts at 0)
            planes = [b"\0" + plane for plane in planes]
            chunks += 1
        fold = _fold_tables(k)
        even = [plane[0::2] for plane in planes]
        chunks //= 2
        folded = []
        for q in range(4):
            acc = int.from_bytes(planes[q][1::2], "little")
            for qq in range(4):
                acc ^= int.from_bytes(even[qq].translate(fold[qq][q]), "little")
            folded.append(acc.to_bytes(chunks, "little"))
        planes = folded
        k += 1
    return planes[0][0] | planes[1][0] << 8 | planes[2][0] << 16 | planes[3][0] << 24


def _crc32c_python(data, start=0, end=None):
    """CRC-32C (Castagnoli) of ``data[start:end]`` in pure Python (~60 MB/s on 16 KiB and more)."""
    data = bytes(data[start:end])
    if len(data) < 64:
        return _crc32c_register(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    # the initial register folds into the first 4 bytes; zeros in front change nothing
    head = (int.from_bytes(data[:4], "little") ^ 0xFFFFFFFF).to_bytes(4, "little")
    return _register_of(bytes(-len(data) % 8) + head + data[4:]) ^ 0xFFFFFFFF


def _crc32c_module():
    """The ``crc32c`` package (C, hardware CRC) where the host has it."""
    import crc32c as module

    def crc(data, start=0, end=None):
        return module.crc32c(memoryview(data)[start:end])

    return crc


def _crc32c_ext2fs():
    """``ext2fs_crc32c_le`` of e2fsprogs' libext2fs (on nearly every Linux host: Debian priority
    required), through ctypes: ~1 GB/s, no copy of the data. Raw register in and out."""
    import ctypes

    lib = ctypes.CDLL("libext2fs.so.2")
    function = lib.ext2fs_crc32c_le
    function.restype = ctypes.c_uint32
    function.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)

    def crc(data, start=0, end=None):
        if not isinstance(data, bytes):
            data = bytes(data)
        end = len(data) if end is None else end
        base = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
        return function(0xFFFFFFFF, base + start, end - start) ^ 0xFFFFFFFF

    return crc


CRC_IMPLEMENTATIONS = (("crc32c module", _crc32c_module), ("libext2fs", _crc32c_ext2fs))
CRC_CHECK = (b"123456789", 0xE3069283)  # the standard check value of CRC-32C


def select_crc(name=None):
    """``(name, function)`` of the fastest CRC-32C the host offers that gives the check value:
    the ``crc32c`` package, libext2fs, else pure Python. ``name`` forces one (``python``: the
    fallback). ``function(data, start=0, end=None)`` takes bytes."""
    for candidate, make in CRC_IMPLEMENTATIONS:
        if name not in (None, candidate):
            continue
        sample = b"x" + CRC_CHECK[0] + b"y"
        try:
            function = make()
            works = function(sample, 1, 10) == CRC_CHECK[1] and function(CRC_CHECK[0]) == CRC_CHECK[1]
        except Exception:  # not on this host (no package, no library): the next one
            works = False
        if works:
            return candidate, function
    return "python", _crc32c_python


CRC_IMPL, _crc = select_crc()


def crc32c(data, start=0, end=None):
    """CRC-32C (Castagnoli) of ``data[start:end]``, as v2 batches carry it (:data:`CRC_IMPL`)."""
    return _crc(data, start, end)


class Budget:
    """What the scan may spend: bytes (``limit``, None: unlimited), the whole scan's time
    (``deadline``, a ``time.monotonic()`` value) and each file's (``file_seconds``).
    ``spent`` counts the bytes read."""

    def __init__(self, limit=None, deadline=None, file_seconds=None, clock=time.monotonic):
        self.limit = limit
        self.deadline = deadline
        self.file_seconds = file_seconds
        self.clock = clock
        self.spent = 0
        self.file_deadline = None

    def take(self, n):
        self.spent += n

    @property
    def exhausted(self):
        return self.limit is not None and self.spent >= self.limit

    def start_file(self):
        """A new file: its own time limit starts now."""
        self.file_deadline = None if self.file_seconds is None else self.clock() + self.file_seconds

    def stop_reason(self, clock=True):
        """None, or why reading must stop now: ``(kind, detail)``, kind ``budget`` or ``time``.
        ``clock=False`` looks at the bytes only (cheap enough for every batch)."""
        if self.exhausted:
            return ("budget", f"byte budget of {self.limit} bytes spent")
        if not clock or (self.deadline is None and self.file_deadline is None):
            return None
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            return ("time", "the scan's time limit was reached")
        if self.file_deadline is not None and now >= self.file_deadline:
            return ("time", f"the per-file time limit of {self.file_seconds}s was reached")
        return None


def problem(kind, file, detail, **where):
    out = {"kind": kind, "file": file, "detail": detail}
    out.update(where)
    return out


# ---------------------------------------------------------------------------------------------
# Opening files: regular files only, never following a link, never blocking
# ---------------------------------------------------------------------------------------------


class Skipped(Exception):
    """A file the scan does not read; ``str()`` says why."""


def file_kind(mode):
    """What a non-regular file is, in words."""
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path, budget=None):
    """``(raw file object, fstat)`` of ``path`` if it is a regular file; :class:`Skipped` otherwise.

    ``lstat`` first (a FIFO or device is never opened), then ``O_NOFOLLOW | O_NONBLOCK`` (a swap to a
    symlink after the ``lstat`` is not followed; a swap to a FIFO does not block), then the opened
    descriptor must be the ``lstat``-ed regular file. Starts the file's time limit."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise Skipped(f"{file_kind(st.st_mode)}: not read")
    try:
        fd = os.open(path, _O_SAFE)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise Skipped("replaced by a symlink while being opened: not followed") from None
        raise
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise Skipped(f"changed while being opened (now {file_kind(opened.st_mode)}): not read")
        handle = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    if budget is not None:
        budget.start_file()
    return handle, opened


# ---------------------------------------------------------------------------------------------
# Indexes (structure only: no log content but the batch header an entry points at)
# ---------------------------------------------------------------------------------------------


class Zeros:
    """``count`` zero entries in a hole of a sparse file: Kafka's preallocated tail, never read."""

    def __init__(self, count):
        self.count = count


class TimeUp(Exception):
    """The byte budget or a time limit stopped reading a file (``args``: kind, detail)."""


def _data_ranges(fd, size):
    """The (start, end) byte ranges of ``fd`` that hold data; holes read as zeros. Without
    SEEK_DATA support the whole file is one range."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    ranges, position = [], 0
    try:
        while position < size:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole from here to the end
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append((start, min(end, size)))
            position = end
    except OSError:
        return [(0, size)]
    return ranges


def _entries(f, size, entry_size, fmt, budget):
    """Entries of an open index file in order (Kafka counts the zero tail as entries too); runs of
    whole entries inside holes of a sparse file come as one ``Zeros`` instead of being read.
    Raises :class:`TimeUp` when the budget or a time limit stops the reading."""
    usable = size - size % entry_size
    unpack = struct.Struct(fmt).iter_unpack
    chunk_bytes = _READ - _READ % entry_size
    position = 0
    for start, end in [*_data_ranges(f.fileno(), usable), (usable, usable)]:
        # entries wholly inside the hole before this data range are zeros
        first_data_entry = start // entry_size
        if first_data_entry > position // entry_size:
            yield Zeros(first_data_entry - position // entry_size)
            position = first_data_entry * entry_size
        end = min(usable, -(-end // entry_size) * entry_size)
        f.seek(position)
        while position < end:
            reason = budget.stop_reason()
            if reason:
                raise TimeUp(*reason)
            data = f.read(min(chunk_bytes, end - position))
            if not data:
                return
            budget.take(len(data))
            position += len(data)
            yield from unpack(data[: len(data) - len(data) % entry_size])


class EntryCount:
    """How many entries Kafka counts in an index (size / entry size) and how many of the last are zero."""

    def __init__(self):
        self.total = 0
        self.zero_tail = 0


def _nonzero_entries(f, size, entry_size, fmt, budget, counted):
    """``(entry number, field 1, field 2, zero entries just before it)`` for every entry that is not
    all zero; ``counted`` tallies as Kafka does. Nothing valid is ever all zero (a batch at position 0
    is never indexed), so a zero entry is the preallocated tail -- or, followed by data, a gap."""
    i = -1
    run = 0
    for item in _entries(f, size, entry_size, fmt, budget):
        if isinstance(item, Zeros):
            counted.total += item.count
            run += item.count
            i += item.count
            continue
        i += 1
        counted.total += 1
        first, second = item
        if first == 0 and second == 0:
            run += 1
            continue
        counted.zero_tail = 0
        yield i, first, second, run
        run = 0
    counted.zero_tail = run


def _header_at(log, position, log_size):
    """(magic, base_offset, last_offset, batch_size) of the batch starting at ``position``, or a reason."""
    if position + HEADER_UP_TO_MAGIC > log_size:
        return "past the end of the log"
    log.seek(position)
    head = log.read(V2_HEADER)
    if len(head) < HEADER_UP_TO_MAGIC:
        return "past the end of the log"
    base, size = struct.unpack_from(">qi", head, 0)
    magic = head[16]
    if size < LEGACY_MIN_SIZE or magic not in (0, 1, 2):
        return f"not at a batch boundary (length {size}, magic {magic})"
    if magic == 2:
        if len(head) < V2_HEADER or size + LOG_OVERHEAD < V2_HEADER:
            return f"not at a batch boundary (v2 batch of {size + LOG_OVERHEAD} bytes)"
        (delta,) = struct.unpack_from(">i", head, 23)
        return (magic, base, base + delta, size + LOG_OVERHEAD)
    return (magic, base, base, size + LOG_OVERHEAD)  # legacy: the entry offset is the (last) offset


def _skipped_index(out, name, reason):
    out["skipped"] = reason
    out["problems"].append(problem("skipped", name, reason))
    return out


def check_offset_index(path, log_path, base_offset, next_base, *, index_rule, active, budget):
    """Structure of one ``.index``: size, zero tail, monotonic entries, offsets within the segment,
    positions within the log and at batch boundaries whose offsets fit the broker's index rule.

    ``entries`` and ``zero_tail`` count as Kafka does (size / 8, the all-zero last entries);
    ``last_offset`` is the last non-zero entry's offset. ``skipped`` says why the file was not read
    (not a regular file, time limit); ``missing`` that there is none."""
    name = os.path.basename(path)
    out = {"entries": 0, "zero_tail": 0, "problems": []}
    try:
        f, st = open_regular(path, budget)
    except FileNotFoundError:
        out["missing"] = True
        return out
    except Skipped as exc:
        return _skipped_index(out, name, str(exc))
    with f:
        size = st.st_size
        out["size"] = size
        problems = out["problems"]
        if size % OFFSET_ENTRY:
            problems.append(problem("index_size", name, f"size {size} is not a multiple of {OFFSET_ENTRY}"))
        log = None
        log_size = 0
        try:
            log, log_st = open_regular(log_path)
            log_size = log_st.st_size
        except (FileNotFoundError, Skipped):
            pass
        try:
            if size == 0:
                # one appended chunk (a follower's fetch, up to replica.fetch.max.bytes) gets no entry,
                # so only a log far larger than any chunk proves the index lost its entries
                if log_size > EMPTY_INDEX_SUSPICIOUS_BYTES:
                    problems.append(
                        problem(
                            "index_empty",
                            name,
                            f"empty while the log holds {log_size} bytes: every read scans from 0",
                        )
                    )
                return out
            last_rel = last_pos = None
            counted = EntryCount()
            try:
                for i, rel, pos, zeros_before in _nonzero_entries(
                    f, size, OFFSET_ENTRY, ">ii", budget, counted
                ):
                    _check_offset_entry(
                        problems,
                        name,
                        log,
                        log_size,
                        base_offset,
                        next_base,
                        index_rule,
                        budget,
                        i,
                        rel,
                        pos,
                        zeros_before,
                        last_rel,
                        last_pos,
                    )
                    last_rel, last_pos = rel, pos
                    if len(problems) > 50:
                        break
            except TimeUp as exc:
                return _skipped_index(out, name, f"{exc.args[1]} after {counted.total} entries")
            out["entries"] = counted.total - counted.zero_tail
            out["zero_tail"] = counted.zero_tail
            if counted.zero_tail and not active:
                problems.append(
                    problem(
                        "index_untrimmed",
                        name,
                        f"inactive segment's index keeps a {counted.zero_tail}-entry zero tail (never trimmed)",
                    )
                )
            out["last_offset"] = None if last_rel is None else base_offset + last_rel
            return out
        finally:
            if log is not None:
                log.close()


def _check_offset_entry(
    problems,
    name,
    log,
    log_size,
    base_offset,
    next_base,
    index_rule,
    budget,
    i,
    rel,
    pos,
    zeros_before,
    last_rel,
    last_pos,
):
    if zeros_before:
        problems.append(
            problem(
                "index_zero_gap",
                name,
                f"{zeros_before} zero entries before entry {i}: the index was not written in order",
                entry=i,
            )
        )
    offset = base_offset + rel
    if rel < 0 or (next_base is not None and offset >= next_base):
        problems.append(
            problem(
                "index_offset_range",
                name,
                f"entry {i}: offset {offset} outside the segment",
                entry=i,
                offset=offset,
            )
        )
    if last_rel is not None and rel <= last_rel:
        problems.append(
            problem(
                "index_not_monotonic",
                name,
                f"entry {i}: offset {offset} not greater than the previous entry's {base_offset + last_rel}",
                entry=i,
                offset=offset,
            )
        )
    if last_pos is not None and pos <= last_pos:
        problems.append(
            problem(
                "index_not_monotonic",
                name,
                f"entry {i}: position {pos} after {last_pos}",
                entry=i,
                position=pos,
            )
        )
    if pos < 0 or pos >= log_size or log is None:
        problems.append(
            problem(
                "index_position_range",
                name,
                f"entry {i}: position {pos} beyond the log ({log_size} bytes)",
                entry=i,
                position=pos,
            )
        )
        return
    found = _header_at(log, pos, log_size)
    budget.take(V2_HEADER)
    if isinstance(found, str):
        problems.append(
            problem("index_position", name, f"entry {i}: position {pos} {found}", entry=i, position=pos)
        )
    elif found[0] == 2:
        _, first, last, _ = found
        fits = offset == first if index_rule == "first" else first <= offset and last <= offset
        if not fits:
            want = f"its base offset {first}" if index_rule == "first" else f"at least its last offset {last}"
            problems.append(
                problem(
                    "index_entry_mismatch",
                    name,
                    f"entry {i}: offset {offset} at position {pos}, where the batch {first}..{last} starts (want {want})",
                    entry=i,
                    offset=offset,
                    position=pos,
                )
            )


def check_time_index(path, base_offset, next_base, *, active, budget):
    """Structure of one ``.timeindex``: size, zero tail, non-decreasing timestamps and offsets within the
    segment. The offset each entry names is not compared with the log: leaders and followers legally
    differ there (each appends entries at its own batch boundaries, ``LogSegment.append`` at 3.3.1; seen
    on a real 3.3.1 cluster's leader and follower copies).

    Also what the pre-2.3 startup check (``TimeIndex.sanityCheck``) compares: ``first_timestamp`` (of
    entry 0 as Kafka reads it, 0 when that slot is zero) and the last non-zero entry's
    ``last_timestamp``/``last_offset``."""
    name = os.path.basename(path)
    out = {"entries": 0, "zero_tail": 0, "problems": []}
    try:
        f, st = open_regular(path, budget)
    except FileNotFoundError:
        out["missing"] = True
        return out
    except Skipped as exc:
        return _skipped_index(out, name, str(exc))
    with f:
        size = st.st_size
        out["size"] = size
        problems = out["problems"]
        if size % TIME_ENTRY:
            problems.append(problem("timeindex_size", name, f"size {size} is not a multiple of {TIME_ENTRY}"))
        last_ts = last_rel = None
        counted = EntryCount()
        first_timestamp = 0
        try:
            for i, ts, rel, _ in _nonzero_entries(f, size, TIME_ENTRY, ">qi", budget, counted):
                if i == 0:
                    first_timestamp = ts
                offset = base_offset + rel
                if rel < 0 or (next_base is not None and offset >= next_base):
                    problems.append(
                        problem(
                            "timeindex_offset_range",
                            name,
                            f"entry {i}: offset {offset} outside the segment",
                            entry=i,
                            offset=offset,
                        )
                    )
                if last_ts is not None and (ts < last_ts or rel < last_rel):
                    problems.append(
                        problem(
                            "timeindex_not_monotonic",
                            name,
                            f"entry {i}: ({ts}, offset {offset}) after ({last_ts}, offset {base_offset + last_rel})",
                            entry=i,
                            offset=offset,
                        )
                    )
                last_ts, last_rel = ts, rel
                if len(problems) > 50:
                    break
        except TimeUp as exc:
            return _skipped_index(out, name, f"{exc.args[1]} after {counted.total} entries")
        out["entries"] = counted.total - counted.zero_tail
        out["zero_tail"] = counted.zero_tail
        out["first_timestamp"] = first_timestamp
        out["last_timestamp"] = last_ts
        out["last_offset"] = None if last_rel is None else base_offset + last_rel
        if counted.zero_tail and not active:
            problems.append(
                problem(
                    "timeindex_untrimmed",
                    name,
                    f"inactive segment's time index keeps a {counted.zero_tail}-entry zero tail",
                )
            )
        return out


# ---------------------------------------------------------------------------------------------
# The recovery walk
# ---------------------------------------------------------------------------------------------


class _Span:
    """Whole batches in a byte range: count, records (None: a compressed legacy entry's are not known
    without decompressing it), lowest base offset, highest last offset."""

    def __init__(self):
        self.batches = 0
        self.records = 0
        self.min_offset = None
        self.max_offset = None
        self.last_offset = None

    def add(self, base, last, records):
        self.batches += 1
        self.records = None if records is None or self.records is None else self.records + records
        self.min_offset = base if self.min_offset is None else min(self.min_offset, base)
        self.max_offset = last if self.max_offset is None else max(self.max_offset, last)
        self.last_offset = last

    def to_dict(self, **extra):
        out = {
            "batches": self.batches,
            "records": self.records,
            "min_offset": self.min_offset,
            "max_offset": self.max_offset,
            "last_offset": self.last_offset,
        }
        out.update(extra)
        return out


class _Window:
    """Positional reads of one open file: ``get(position, n)`` gives ``(buffer, offset)`` with the
    ``n`` bytes at ``buffer[offset:offset + n]`` (fewer at the end of the file). Reading every byte,
    it reads ahead in ``chunk``-byte ``pread`` calls (a batch larger than that is read whole); header
    by header, one ``pread`` each. Counts what it reads in the budget."""

    def __init__(self, fd, size, budget, chunk):
        self.fd, self.size, self.budget, self.chunk = fd, size, budget, chunk
        self.buffer, self.start = b"", 0

    def get(self, position, n):
        offset = position - self.start
        if offset < 0 or offset + n > len(self.buffer):
            want = max(n, self.chunk)
            self.buffer = os.pread(self.fd, min(want, self.size - position), position)
            self.start, offset = position, 0
            self.budget.take(len(self.buffer))
        return self.buffer, offset


_READ_AHEAD = 1 << 20  # bytes per pread when every byte of a segment is read
_CLOCK_EVERY_BYTES = 8 << 20  # ... and a look at the clock at least this often


def _corrupt_record(stored, computed):
    """``CorruptRecordException`` of a failed CRC (``DefaultRecordBatch``/``LegacyRecord.ensureValid``,
    3.3.1): both values as unsigned decimals."""
    return f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"


def walk_log(
    path,
    *,
    index_rule,
    index_interval=DEFAULT_INDEX_INTERVAL,
    verify_crc=False,
    budget=None,
    base_offset=None,
    offset_range_check=True,
    crc=None,
):
    """What ``LogSegment.recover`` would do to this ``.log``.

    :param index_rule: ``first`` (0.11-1.1: recovery indexes ``batch.baseOffset``) or ``last``.
    :param verify_crc: read every byte and check every batch's CRC as ``batch.ensureValid()`` does
        (CRC-32C from the attributes to the end of a v2 batch, CRC-32 of a legacy entry's message);
        without it only batch headers are read and the last batch's CRC checked (a torn write).
    :param offset_range_check: 2.0+'s ``ensureOffsetInRange`` (an offset the segment's index cannot
        hold throws ``LogSegmentOffsetOverflowException``).
    :param base_offset: the segment's base offset (default: from the file name).
    :param crc: the CRC-32C function (default :func:`crc32c`).

    Returns a dict:

    * ``size``, ``batches`` (whole batches walked), ``first_offset``, ``last_offset`` (of the last whole
      batch), ``max_offset``, ``end_offset`` (the segment's next offset as ``readNextOffset`` reads it
      before recovery: the last whole batch's, CRC or not; None when the structure could not be
      followed to the end); ``valid_bytes``: the end of the last whole batch;
    * ``stop``: None when recovery runs to the end, else where and why it stops: ``invalid_offset``
      (``index`` says which index refused ``offset``: ``InvalidOffsetException``), ``offset_overflow``,
      ``corrupt_batch`` (``kafka_message``: the ``CorruptRecordException`` text Kafka logs, with
      ``stored_crc``/``computed_crc`` for a CRC), ``torn_tail`` (the file ends inside a batch or
      header: the iteration ends quietly, no exception) -- both truncated there --, or
      ``budget``/``time`` (the scan stopped reading: nothing is known past ``position``).
      ``next_offset`` is the segment's next offset if it were truncated at ``position``;
    * ``complete``: the walk saw every byte Kafka's recovery would (False after ``budget``/``time``);
    * ``first_bad``: the first batch whose offsets go back (``offsets_backwards``), or the corrupt or
      torn one: where a truncation that keeps every sound batch must cut; ``kept``/``dropped``: the
      whole batches before and from there (count, records, offsets; ``dropped`` also ``bytes`` to
      the end of the file and ``unparsed_bytes``, what is no whole batch);
    * ``crc``: ``all`` (every batch's CRC checked) or ``last``; ``crc_bytes``: bytes CRC-checked.

    Past an exception the walk follows the batch lengths on (no more CRCs), so it also says what
    lies after it: the batches and offsets a truncation there drops.
    """
    budget = budget or Budget()
    crc = crc or crc32c
    name = os.path.basename(path)
    if base_offset is None:
        base_offset = int(name[:20]) if name[:20].isdigit() else 0
    log, st = open_regular(path, budget)
    size = st.st_size
    out = {
        "size": size,
        "batches": 0,
        "first_offset": None,
        "last_offset": None,
        "max_offset": None,
        "end_offset": base_offset,
        "valid_bytes": 0,
        "stop": None,
        "complete": True,
        "first_bad": None,
        "kept": None,
        "dropped": None,
        "crc": "all" if verify_crc else "last",
        "crc_bytes": 0,
        "notes": [],
    }
    position = last_index_entry = 0
    last_indexed = None  # the rebuilt offset index's last offset
    indexed_entries = 0  # its entry count (InvalidOffsetException names the slot)
    time_last_ts, time_last_offset, time_entries = -1, None, 0  # the rebuilt time index's last entry
    max_ts, offset_of_max_ts = -1, None
    kept = _Span()  # whole batches before first_bad
    dropped = _Span()  # whole batches from first_bad on
    span = kept
    previous_max = None
    recovering = True  # recovery has not thrown yet: it still builds indexes
    n = 0
    limit = budget.limit
    timed = budget.deadline is not None or budget.file_seconds is not None
    clock_at = _CLOCK_EVERY_BYTES
    unpack_prefix = _PREFIX.unpack_from
    unpack_v2 = _V2_FIELDS.unpack_from
    unparsed = 0
    with log:
        window = _Window(log.fileno(), size, budget, _READ_AHEAD if verify_crc else V2_HEADER)
        while True:
            n += 1
            if (limit is not None and budget.spent >= limit) or (
                timed and (n % _CHECK_EVERY == 0 or budget.spent >= clock_at)
            ):
                clock_at = budget.spent + _CLOCK_EVERY_BYTES
                reason = budget.stop_reason()
                if reason:
                    out["stop"] = problem(
                        reason[0], name, f"{reason[1]} at position {position}", position=position
                    )
                    out["complete"] = False
                    out["end_offset"] = None
                    break
            remaining = size - position
            if remaining <= HEADER_UP_TO_MAGIC:
                # FileLogInputStream.nextBatch: null (the iteration ends, no exception)
                if remaining > 0:
                    unparsed = remaining
                    if recovering:
                        _stop(
                            out,
                            "torn_tail",
                            name,
                            f"{remaining} trailing bytes that are no whole batch",
                            position,
                            None,
                            size,
                        )
                break
            buffer, at = window.get(position, min(V2_HEADER, remaining))
            base, length = unpack_prefix(buffer, at)
            magic = buffer[at + 16]
            batch_size = length + LOG_OVERHEAD
            if length < LEGACY_MIN_SIZE:
                unparsed = remaining
                if recovering:
                    _stop(
                        out,
                        "corrupt_batch",
                        name,
                        f"batch at position {position}: size {length} is below the minimum of 14",
                        position,
                        base,
                        size,
                        kafka_message=(
                            f"Found record size {length} smaller than minimum record overhead (14) in file {path}."
                        ),
                    )
                else:
                    out["end_offset"] = None  # the structure is lost before the end
                break
            if batch_size > remaining:
                unparsed = remaining
                if recovering:
                    _stop(
                        out,
                        "torn_tail",
                        name,
                        f"the last batch (offset {base}, {batch_size} bytes) is cut off after {remaining} bytes",
                        position,
                        base,
                        size,
                    )
                break
            if magic >= 128:
                magic -= 256  # a signed byte: below 2 is a legacy entry to Kafka
            if not recovering and magic not in (0, 1, 2):
                # past the stop nothing more is checked: a header this odd means the lengths no
                # longer lead from batch to batch (a flipped length byte is not under the CRC)
                unparsed = remaining
                out["end_offset"] = None
                break
            records = None
            if magic >= 2:
                if batch_size < V2_HEADER:
                    unparsed = remaining
                    if recovering:
                        _stop(
                            out,
                            "corrupt_batch",
                            name,
                            f"v2 batch at position {position} is {batch_size} bytes, under the 61-byte header",
                            position,
                            base,
                            size,
                            kafka_message=(
                                f"Record batch is corrupt (the size {batch_size} is smaller than the minimum "
                                "allowed overhead 61)"
                            ),
                        )
                    else:
                        out["end_offset"] = None
                    break
                _, _, _, delta, batch_max_ts = unpack_v2(buffer, at)
                (records,) = struct.unpack_from(">i", buffer, at + 57)
                last = base + delta
            else:
                last = base  # a legacy entry's offset is its (last) offset
                batch_max_ts = (
                    _LEGACY_FIELDS.unpack_from(buffer, at)[3] if magic == 1 and length >= 22 else -1
                )
                if buffer[at + 17] & 0x07 == 0:
                    records = 1  # uncompressed: one message; a compressed wrapper's are not counted
            is_last = remaining - batch_size <= HEADER_UP_TO_MAGIC
            if recovering and (magic not in (0, 1, 2) and not verify_crc):
                _stop(
                    out,
                    "corrupt_batch",
                    name,
                    f"bad batch header at position {position} (length {length}, magic {magic}): CRC not read",
                    position,
                    base,
                    size,
                )
                recovering = False
            elif recovering and (verify_crc or is_last):
                buffer, at = window.get(position, batch_size)
                if magic >= 2:
                    (stored,) = struct.unpack_from(">I", buffer, at + 17)
                    computed = crc(buffer, at + 21, at + batch_size)
                else:  # LegacyRecord: CRC-32 from the magic byte to the end of the message
                    (stored,) = struct.unpack_from(">I", buffer, at + 12)
                    computed = zlib.crc32(buffer[at + 16 : at + batch_size]) & 0xFFFFFFFF
                out["crc_bytes"] += batch_size
                if stored != computed:
                    _stop(
                        out,
                        "corrupt_batch",
                        name,
                        f"CRC mismatch in the batch at position {position} (offset {base})"
                        + (": a torn write" if is_last else ""),
                        position,
                        base,
                        size,
                        kafka_message=_corrupt_record(stored, computed),
                        stored_crc=stored,
                        computed_crc=computed,
                        last_offset=last,
                        is_last=is_last,
                    )
                    recovering = False
            if recovering:
                if offset_range_check and not 0 <= last - base_offset <= MAX_RELATIVE_OFFSET:
                    out["stop"] = problem(
                        "offset_overflow",
                        name,
                        f"batch at position {position} (offsets {base}..{last}) does not fit the index of segment {base_offset} (LogSegmentOffsetOverflowException)",
                        position=position,
                        offset=base,
                        last_offset=last,
                    )
                    recovering = False
                else:
                    if batch_max_ts > max_ts:
                        max_ts, offset_of_max_ts = batch_max_ts, last
                    if position - last_index_entry > index_interval:
                        entry = base if index_rule == "first" else last
                        if last_indexed is not None and entry <= last_indexed:
                            out["stop"] = problem(
                                "invalid_offset",
                                name,
                                f"batch at position {position} (offsets {base}..{last}): index entry {entry} is not larger than the last indexed offset {last_indexed}",
                                position=position,
                                offset=entry,
                                batch_offset=base,
                                last_indexed=last_indexed,
                                index="index",
                                entries=indexed_entries,
                            )
                            recovering = False
                        elif time_entries and offset_of_max_ts < time_last_offset:
                            out["stop"] = problem(
                                "invalid_offset",
                                name,
                                f"batch at position {position}: time-index offset {offset_of_max_ts} goes back from {time_last_offset}",
                                position=position,
                                offset=offset_of_max_ts,
                                batch_offset=base,
                                last_indexed=time_last_offset,
                                index="timeindex",
                            )
                            recovering = False
                        else:
                            last_indexed = entry
                            if max_ts > time_last_ts:
                                time_last_ts, time_last_offset = max_ts, offset_of_max_ts
                                time_entries += 1
                            last_index_entry = position
                            indexed_entries += 1
            if out["first_bad"] is None and previous_max is not None and base <= previous_max:
                out["first_bad"] = {
                    "kind": "offsets_backwards",
                    "position": position,
                    "offset": base,
                    "last_offset": last,
                    "previous_max": previous_max,
                }
                out["notes"].append(
                    problem(
                        "offsets_backwards",
                        name,
                        f"batch at position {position} starts at offset {base}, not after {previous_max}",
                        position=position,
                        offset=base,
                    )
                )
            if span is kept and out["first_bad"] is not None:
                span = dropped
            span.add(base, last, records)
            previous_max = last if previous_max is None else max(previous_max, last)
            if out["first_offset"] is None:
                out["first_offset"] = base
            out["last_offset"] = last
            out["end_offset"] = last + 1
            out["max_offset"] = previous_max
            out["batches"] += 1
            position += batch_size
            out["valid_bytes"] = position
    if (
        recovering
        and out["stop"] is None
        and time_entries
        and offset_of_max_ts is not None
        and offset_of_max_ts < time_last_offset
    ):
        # the final TimeIndex.maybeAppend(skipFullCheck = true) after the loop (recover, 3.3.1)
        out["stop"] = problem(
            "invalid_offset",
            name,
            f"the closing time-index entry's offset {offset_of_max_ts} goes back from {time_last_offset}",
            position=size,
            offset=offset_of_max_ts,
            last_indexed=time_last_offset,
            index="timeindex",
        )
    if out["first_bad"] is not None:
        first = out["first_bad"]["position"]
        out["kept"] = kept.to_dict(bytes=first)
        out["dropped"] = dropped.to_dict(bytes=size - first, unparsed_bytes=unparsed)
    return out


def _stop(out, kind, name, detail, position, offset, size, **extra):
    """Recovery truncates at ``position``: record where, what follows and where a remedy cuts."""
    out["stop"] = problem(
        kind,
        name,
        detail,
        position=position,
        offset=offset,
        bytes=size - position,
        next_offset=None if out["last_offset"] is None else out["last_offset"] + 1,
        **extra,
    )
    if out["first_bad"] is None:
        out["first_bad"] = {"kind": kind, "position": position, "offset": offset, "last_offset": None}


# ---------------------------------------------------------------------------------------------
# One partition directory
# ---------------------------------------------------------------------------------------------


def segment_files(directory):
    """``({base: {suffix: lstat mode}}, skipped)`` of the files named like segment files
    (``<20 digits><suffix>``). Listing reads no file; ``lstat`` modes tell regular files from
    the rest."""
    found = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            stem, _dot, suffix = name.partition(".")
            if len(stem) != 20 or not stem.isdigit() or ("." + suffix) not in SEGMENT_SUFFIXES:
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            found.setdefault(int(stem), {})["." + suffix] = mode
    return found


def segment_bases(directory):
    """Base offsets of the ``.log`` files in a partition directory (the segments), sorted."""
    return sorted(b for b, files in segment_files(directory).items() if ".log" in files)


def scan_partition(
    directory,
    recovery_point,
    *,
    index_rule,
    clean_shutdown=None,
    verify_crc=False,
    walk_all=False,
    budget=None,
    index_interval=DEFAULT_INDEX_INTERVAL,
    offset_range_check=None,
    crc_impl=None,
):
    """Every segment's index structure, and every byte -- every batch's CRC -- of each segment a
    start may recover, as ``LogSegment.recover`` reads it (``batch.ensureValid()``, 3.3.1):

    * after an unclean shutdown, those from the one holding ``recovery_point`` on (Kafka's
      ``segments.values(recoveryPoint, Long.MaxValue)`` begins at the floor segment; ``None`` -- not
      in the checkpoint -- is 0 to Kafka): ``LogLoader.recoverLog``. Not when ``clean_shutdown`` says
      the log dir holds ``.kafka_cleanshutdown`` (a stopped broker whose next start skips recovery);
    * in any start, a segment whose ``.index`` is missing (``loadSegmentFiles`` recovers it at load);
    * a segment whose indexes look damaged: up to 2.2 the startup check rebuilds it at load, and the
      remedy (remove the index) makes any release recover it.

    ``walk_all`` also walks the headers of every other segment; ``verify_crc`` reads every other
    segment whole too, every batch's CRC checked (damage no start notices). Each segment record says
    what was read and why (``read``: ``how`` -- ``crc``, ``headers``, ``index`` (its indexes only) or
    ``skipped`` -- and ``why``); ``read`` of the result totals it, with the CRC-32C implementation
    used (``crc_impl``: :func:`select_crc`'s choice, or the one named).

    Only regular files are read: a ``.log`` that is a symlink is a segment to Kafka (``isFile``
    follows links) but is reported and not followed; one that is a FIFO, device or directory is no
    segment to Kafka and is listed in ``skipped``; index files that are not regular are skipped with
    the reason. Once the budget or the scan's time limit stops the scan, the remaining segments are
    listed with ``skipped`` set and no content.
    """
    budget = budget or Budget()
    if offset_range_check is None:
        offset_range_check = index_rule == "last"
    crc_name, crc = (CRC_IMPL, _crc) if crc_impl is None else select_crc(crc_impl)
    files = segment_files(directory)
    skipped = []
    bases = []
    for base in sorted(files):
        mode = files[base].get(".log")
        if mode is None:
            continue
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            bases.append(base)
        else:
            skipped.append(
                {"file": f"{base:020d}.log", "reason": f"{file_kind(mode)}: no segment to Kafka, not read"}
            )
    segments = []
    floor = None
    if recovery_point is not None:
        below = [b for b in bases if b <= recovery_point]
        floor = below[-1] if below else None
    point = 0 if recovery_point is None else recovery_point
    read = {
        "crc_segments": 0,
        "crc_segment_bytes": 0,
        "crc_bytes": 0,
        "header_segments": 0,
        "header_segment_bytes": 0,
        "not_read_segments": 0,
        "not_read_bytes": 0,
        "skipped_segments": 0,
        "crc_impl": crc_name,
    }
    stopped = None
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        active = next_base is None
        stem = os.path.join(directory, f"{base:020d}")
        record = {"base_offset": base, "active": active}
        recovered = recovery_point is None or floor is None or base >= floor
        record["recovered_after_crash"] = bool(recovered)
        segments.append(record)
        links = [s for s in SEGMENT_SUFFIXES if stat.S_ISLNK(files[base].get(s, 0))]
        if links:
            record["symlinks"] = links
            record["problems"] = [
                problem("symlink", f"{base:020d}{s}", "a symlink: not followed") for s in links
            ]
            if ".log" in links:
                record["skipped"] = "the .log is a symlink: not followed"
                record["read"] = {"how": "skipped", "why": record["skipped"]}
                read["skipped_segments"] += 1
                continue
        for suffix in (".index", ".timeindex", ".txnindex"):
            mode = files[base].get(suffix)
            if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
                skipped.append({"file": f"{base:020d}{suffix}", "reason": f"{file_kind(mode)}: not read"})
        if stopped is None:
            reason = budget.stop_reason()
            if reason:
                stopped = reason[1]
        if stopped is not None:
            record["skipped"] = stopped
            record["read"] = {"how": "skipped", "why": stopped}
            read["skipped_segments"] += 1
            continue
        try:
            log_file, log_st = open_regular(stem + ".log")
            log_file.close()
        except Skipped as exc:
            record["skipped"] = f"the .log: {exc}"
            record["read"] = {"how": "skipped", "why": record["skipped"]}
            read["skipped_segments"] += 1
            continue
        record["log_size"] = log_st.st_size
        record["index"] = check_offset_index(
            stem + ".index",
            stem + ".log",
            base,
            next_base,
            index_rule=index_rule,
            active=active,
            budget=budget,
        )
        record["timeindex"] = check_time_index(
            stem + ".timeindex", base, next_base, active=active, budget=budget
        )
        why = _why_read(record, recovered, clean_shutdown, point, verify_crc, walk_all)
        how = "index" if why is None else ("headers" if why == WALK_ALL else "crc")
        if why is None:
            why = (
                "the log dir was shut down cleanly (.kafka_cleanshutdown): Kafka recovers nothing at start"
                if recovered and clean_shutdown
                else f"below the recovery point {point}: Kafka does not read it at start"
            )
        record["read"] = {"how": how, "why": why}
        if how == "index":
            read["not_read_segments"] += 1
            read["not_read_bytes"] += log_st.st_size
            continue
        try:
            record["walk"] = walk_log(
                stem + ".log",
                index_rule=index_rule,
                index_interval=index_interval,
                verify_crc=how == "crc",
                budget=budget,
                base_offset=base,
                offset_range_check=offset_range_check,
                crc=crc,
            )
        except Skipped as exc:
            record["skipped"] = f"the .log: {exc}"
            record["read"] = {"how": "skipped", "why": record["skipped"]}
            read["skipped_segments"] += 1
            continue
        prefix = "crc" if how == "crc" else "header"
        read[prefix + "_segments"] += 1
        read[prefix + "_segment_bytes"] += log_st.st_size
        read["crc_bytes"] += record["walk"]["crc_bytes"]
    out = {"segments": segments, "bytes_read": budget.spent, "read": read}
    if skipped:
        out["skipped"] = skipped
    if stopped is not None:
        out["stopped"] = stopped
    return out


WALK_ALL = "walk_all: every segment's batch headers"


def _why_read(record, recovered, clean_shutdown, point, verify_crc, walk_all):
    """Why a segment's log is read (every batch's CRC, or with ``walk_all`` its headers); None: not."""
    index, timeindex = record["index"], record["timeindex"]
    if index.get("missing"):
        return "its .index is missing: Kafka recovers it at load, in any start"
    if recovered and not clean_shutdown:
        return f"Kafka recovers it after an unclean shutdown (from the recovery point {point})"
    if index["problems"] or index.get("zero_tail") or timeindex["problems"] or timeindex.get("zero_tail"):
        return "its indexes look damaged: a rebuild (the startup check up to 2.2, or the remedy) recovers it"
    if verify_crc:
        return "verify_crc: every segment's every batch"
    if walk_all:
        return WALK_ALL
    return None
