"""What a broker restart would do to one partition's segments: index structure and the recovery walk.

Standard library only, no package imports, Python 3.6+: the broker-side scan sends this very file
over SSH (with a small driver), so the rules exist once and run where the bytes are. It reads
batch *headers* (seek past the records), never whole segments; memory stays flat however large the
segments are. The Airflow side turns the summaries into findings (:mod:`.log_scan_rules`).

Kafka's behaviour it follows (``core/src/main/scala/kafka/log/``: ``LogSegment.recover``, ``LogLoader``/``Log``
``loadSegmentFiles`` and ``recoverLog``, ``OffsetIndex.append``/``sanityCheck``, 0.11.0.2 .. 3.3.1):

* recovery walks the batches from position 0; every ``index.interval.bytes`` (4096) it appends an
  offset-index entry for the batch at that position -- ``baseOffset`` up to 1.1, ``lastOffset`` from
  2.0 -- and ``OffsetIndex.append`` throws ``InvalidOffsetException`` unless the offset is larger than
  the last one appended (the seed's broker that would not start);
* a batch that fails ``ensureValid`` (size, CRC) or a bad header ends the walk: the segment is
  truncated there, and after an unclean shutdown every later segment is deleted; a partial batch at
  the end is dropped quietly;
* an ``InvalidOffsetException`` during the unclean-shutdown recovery truncates the whole segment to
  its base offset; during the rebuild of a missing (or, before 2.3, corrupt) index at load time it is
  not caught: the broker does not start.
"""

import os
import struct

OFFSET_ENTRY = 8
TIME_ENTRY = 12
LOG_OVERHEAD = 12  # baseOffset int64 + length int32
V2_HEADER = 61
HEADER_UP_TO_MAGIC = 17
LEGACY_MIN_SIZE = 14
DEFAULT_INDEX_INTERVAL = 4096
EMPTY_INDEX_SUSPICIOUS_BYTES = 8 * 1024 * 1024
_READ = 1 << 20  # index files are read in 1 MiB chunks


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as v2 batches carry it; pure Python, used on few batches."""
    crc = 0xFFFFFFFF
    table = _CRC32C
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Budget:
    """Bytes the scan may read; ``None`` means unlimited. ``spent`` counts what was read."""

    def __init__(self, limit=None):
        self.limit = limit
        self.spent = 0

    def take(self, n):
        self.spent += n

    @property
    def exhausted(self):
        return self.limit is not None and self.spent >= self.limit


def problem(kind, file, detail, **where):
    out = {"kind": kind, "file": file, "detail": detail}
    out.update(where)
    return out


# ---------------------------------------------------------------------------------------------
# Indexes (structure only: no log content but the batch header an entry points at)
# ---------------------------------------------------------------------------------------------


class Zeros:
    """``count`` zero entries in a hole of a sparse file: Kafka's preallocated tail, never read."""

    def __init__(self, count):
        self.count = count


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
                if exc.errno == 6:  # ENXIO: only a hole from here to the end
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append((start, min(end, size)))
            position = end
    except OSError:
        return [(0, size)]
    return ranges


def _entries(path, size, entry_size, fmt, budget):
    """Entries of an index file in order (Kafka counts the zero tail as entries too); runs of whole
    entries inside holes of a sparse file come as one ``Zeros`` instead of being read."""
    usable = size - size % entry_size
    unpack = struct.Struct(fmt).iter_unpack
    chunk_bytes = _READ - _READ % entry_size
    with open(path, "rb", buffering=0) as f:
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


def _nonzero_entries(path, size, entry_size, fmt, budget, counted):
    """``(entry number, field 1, field 2, zero entries just before it)`` for every entry that is not
    all zero; ``counted`` tallies as Kafka does. Nothing valid is ever all zero (a batch at position 0
    is never indexed), so a zero entry is the preallocated tail -- or, followed by data, a gap."""
    i = -1
    run = 0
    for item in _entries(path, size, entry_size, fmt, budget):
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


def check_offset_index(path, log_path, base_offset, next_base, *, index_rule, active, budget):
    """Structure of one ``.index``: size, zero tail, monotonic entries, offsets within the segment,
    positions within the log and at batch boundaries whose offsets fit the broker's index rule."""
    name = os.path.basename(path)
    out = {"entries": 0, "zero_tail": 0, "problems": []}
    try:
        size = os.lstat(path).st_size
    except FileNotFoundError:
        out["missing"] = True
        return out
    out["size"] = size
    problems = out["problems"]
    if size % OFFSET_ENTRY:
        problems.append(problem("index_size", name, f"size {size} is not a multiple of {OFFSET_ENTRY}"))
    log_size = os.lstat(log_path).st_size if os.path.exists(log_path) else 0
    if size == 0:
        # one appended chunk (a follower's fetch, up to replica.fetch.max.bytes) gets no entry, so
        # only a log far larger than any chunk proves the index lost its entries
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
    with open(log_path, "rb") if log_size else open(os.devnull, "rb") as log:
        for i, rel, pos, zeros_before in _nonzero_entries(path, size, OFFSET_ENTRY, ">ii", budget, counted):
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
            if pos < 0 or pos >= log_size:
                problems.append(
                    problem(
                        "index_position_range",
                        name,
                        f"entry {i}: position {pos} beyond the log ({log_size} bytes)",
                        entry=i,
                        position=pos,
                    )
                )
            else:
                found = _header_at(log, pos, log_size)
                budget.take(V2_HEADER)
                if isinstance(found, str):
                    problems.append(
                        problem(
                            "index_position",
                            name,
                            f"entry {i}: position {pos} {found}",
                            entry=i,
                            position=pos,
                        )
                    )
                elif found[0] == 2:
                    _, first, last, _ = found
                    fits = offset == first if index_rule == "first" else first <= offset and last <= offset
                    if not fits:
                        want = (
                            f"its base offset {first}"
                            if index_rule == "first"
                            else f"at least its last offset {last}"
                        )
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
            last_rel, last_pos = rel, pos
            if len(problems) > 50:
                break
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


def check_time_index(path, base_offset, next_base, *, active, budget):
    """Structure of one ``.timeindex``: size, zero tail, non-decreasing timestamps and offsets within the
    segment. The offset each entry names is not compared with the log: leaders and followers legally
    differ there (each appends entries at its own batch boundaries, ``LogSegment.append`` at 3.3.1; seen
    on a real 3.3.1 cluster's leader and follower copies)."""
    name = os.path.basename(path)
    out = {"entries": 0, "zero_tail": 0, "problems": []}
    try:
        size = os.lstat(path).st_size
    except FileNotFoundError:
        out["missing"] = True
        return out
    out["size"] = size
    problems = out["problems"]
    if size % TIME_ENTRY:
        problems.append(problem("timeindex_size", name, f"size {size} is not a multiple of {TIME_ENTRY}"))
    last_ts = last_rel = None
    counted = EntryCount()
    for i, ts, rel, _ in _nonzero_entries(path, size, TIME_ENTRY, ">qi", budget, counted):
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
    out["entries"] = counted.total - counted.zero_tail
    out["zero_tail"] = counted.zero_tail
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


def walk_log(path, *, index_rule, index_interval=DEFAULT_INDEX_INTERVAL, verify_crc=False, budget=None):
    """What ``LogSegment.recover`` would do to this ``.log``, from batch headers.

    Returns ``{"batches", "first_offset", "last_offset", "valid_bytes", "size", "stop"}``: ``stop`` is
    None when the walk reached the end, else where and why recovery stops (``kind`` is
    ``invalid_offset`` -- the rebuilt index refuses an offset -- ``corrupt_batch``, ``torn_tail``,
    ``offsets_backwards`` when offsets go back between batches without reaching an index point,
    or ``budget``). The CRC of the last batch is always checked (a torn write is at the end); every
    batch's with ``verify_crc``.
    """
    budget = budget or Budget()
    name = os.path.basename(path)
    size = os.lstat(path).st_size
    out = {
        "size": size,
        "batches": 0,
        "first_offset": None,
        "last_offset": None,
        "valid_bytes": 0,
        "stop": None,
        "notes": [],
    }
    position = last_index_entry = 0
    last_indexed = None
    previous_last = None
    last_batch = None  # (position, batch size, v2?)
    with open(path, "rb") as log:
        while True:
            if budget.exhausted:
                out["stop"] = problem(
                    "budget", name, f"byte budget spent at position {position}", position=position
                )
                break
            if size - position < HEADER_UP_TO_MAGIC:
                if size > position:
                    out["stop"] = problem(
                        "torn_tail",
                        name,
                        f"{size - position} trailing bytes that are no whole batch",
                        position=position,
                        bytes=size - position,
                    )
                break
            log.seek(position)
            head = log.read(V2_HEADER)
            budget.take(len(head))
            base, length = struct.unpack_from(">qi", head, 0)
            magic = head[16]
            batch_size = length + LOG_OVERHEAD
            if length < LEGACY_MIN_SIZE or magic not in (0, 1, 2) or (magic == 2 and batch_size < V2_HEADER):
                out["stop"] = problem(
                    "corrupt_batch",
                    name,
                    f"bad batch header at position {position} (length {length}, magic {magic})",
                    position=position,
                    offset=base,
                    bytes=size - position,
                )
                break
            if position + batch_size > size:
                out["stop"] = problem(
                    "torn_tail",
                    name,
                    f"the last batch (offset {base}, {batch_size} bytes) is cut off after {size - position} bytes",
                    position=position,
                    offset=base,
                    bytes=size - position,
                )
                break
            if magic == 2:
                (delta,) = struct.unpack_from(">i", head, 23)
                last = base + delta
                if verify_crc and not _crc_ok(log, position, batch_size, head, budget):
                    out["stop"] = problem(
                        "corrupt_batch",
                        name,
                        f"CRC mismatch in the batch at position {position} (offset {base})",
                        position=position,
                        offset=base,
                        bytes=size - position,
                    )
                    break
            else:
                last = base
            # the index rebuild: OffsetIndex.append refuses an offset not above the last one
            if position - last_index_entry > index_interval:
                entry_offset = base if index_rule == "first" else last
                if last_indexed is not None and entry_offset <= last_indexed:
                    out["stop"] = problem(
                        "invalid_offset",
                        name,
                        f"batch at position {position} (offsets {base}..{last}): index entry {entry_offset} is not larger than the last indexed offset {last_indexed}",
                        position=position,
                        offset=base,
                        last_indexed=last_indexed,
                    )
                    break
                last_indexed = entry_offset
                last_index_entry = position
            if (
                previous_last is not None
                and base <= previous_last
                and not any(n["kind"] == "offsets_backwards" for n in out["notes"])
            ):
                out["notes"].append(
                    problem(
                        "offsets_backwards",
                        name,
                        f"batch at position {position} starts at offset {base}, not after {previous_last}",
                        position=position,
                        offset=base,
                    )
                )
            previous_last = last if previous_last is None else max(previous_last, last)
            if out["first_offset"] is None:
                out["first_offset"] = base
            out["last_offset"] = last
            out["batches"] += 1
            last_batch = (position, batch_size, magic == 2, head, base)
            position += batch_size
            out["valid_bytes"] = position
        if last_batch is not None and not verify_crc and last_batch[2] and out["stop"] is None:
            pos, batch_size, _, head, base = last_batch
            if not _crc_ok(log, pos, batch_size, head, budget):
                out["stop"] = problem(
                    "corrupt_batch",
                    name,
                    f"CRC mismatch in the last batch at position {pos} (offset {base}): a torn write",
                    position=pos,
                    offset=base,
                    bytes=size - pos,
                )
                out["valid_bytes"] = pos
                out["batches"] -= 1
    return out


def _crc_ok(log, position, batch_size, head, budget):
    (stored,) = struct.unpack_from(">I", head, 17)
    log.seek(position + 21)
    body = log.read(batch_size - 21)
    budget.take(len(body))
    return crc32c(body) == stored


# ---------------------------------------------------------------------------------------------
# One partition directory
# ---------------------------------------------------------------------------------------------


def segment_bases(directory):
    """Base offsets of the ``.log`` files in a partition directory (the segments), sorted."""
    bases = []
    for name in os.listdir(directory):
        if name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
            bases.append(int(name[:20]))
    return sorted(bases)


def scan_partition(
    directory,
    recovery_point,
    *,
    index_rule,
    verify_crc=False,
    walk_all=False,
    budget=None,
    index_interval=DEFAULT_INDEX_INTERVAL,
):
    """Every segment's index structure, and the recovery walk of the segments Kafka would recover
    after an unclean shutdown (those holding offsets at or above ``recovery_point``, the active one
    always; every segment with ``walk_all``). A symlinked segment file is reported, never followed."""
    budget = budget or Budget()
    bases = segment_bases(directory)
    segments = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        active = next_base is None
        stem = os.path.join(directory, f"{base:020d}")
        record = {"base_offset": base, "active": active}
        links = [s for s in (".log", ".index", ".timeindex") if os.path.islink(stem + s)]
        if links:
            record["symlinks"] = links
            record["problems"] = [
                problem("symlink", f"{base:020d}{s}", "a symlink: not followed") for s in links
            ]
            segments.append(record)
            continue
        record["log_size"] = os.lstat(stem + ".log").st_size
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
        recovered = active or recovery_point is None or next_base is None or next_base > recovery_point
        record["recovered_after_crash"] = bool(recovered)
        if recovered or walk_all or record["index"].get("missing") or record["index"]["problems"]:
            record["walk"] = walk_log(
                stem + ".log",
                index_rule=index_rule,
                index_interval=index_interval,
                verify_crc=verify_crc,
                budget=budget,
            )
        segments.append(record)
    return {"segments": segments, "bytes_read": budget.spent}
