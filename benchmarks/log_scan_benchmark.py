"""Pre-restart log scan throughput vs a per-record Python reader, on one simulated broker's segments.

    .venv/bin/python benchmarks/log_scan_benchmark.py [--gib 2] [--workdir DIR] [--baseline-mib 512]

Builds a broker log dir with ``--gib`` GiB of Kafka segments (v2 batches of 100 records, 512 MiB
segments, offset and time indexes by the 2.0+ index-interval rule; the active segment's indexes
preallocated and sparse, as Kafka leaves them), then times in the same run, with the files in the
page cache:

* plain read: every ``.log``/``.index``/``.timeindex`` byte read in 1 MiB chunks (the speed the
  disk side allows);
* index checks: ``log_scan.check_offset_index`` + ``check_time_index`` on every segment;
* batch-header walk: ``log_scan.walk_log`` on every segment (what recovery would do, headers only),
  without and with the time limits the operator passes (a per-file and a whole-scan deadline);
* with ``--compare-ref REF`` (e.g. ``main``): the same walk by the scanner as it was at that git ref,
  loaded from ``git show`` into the same process (before/after on the same files);
* baseline: a plain per-record reader (the core's ``iter_log_entries`` + ``decode_records``, every
  record decoded) over the first ``--baseline-mib`` MiB of segments, as MB/s.

Then runs the broker-side scan script itself (``python3 -c``, as over SSH, ``walk_all``) on a
quarter of the data and on all of it, printing its peak RSS each time (must stay flat). Prints
MB/s and the ratios. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEGMENT_BYTES = 512 * 1024 * 1024
RECORDS_PER_BATCH = 100
VALUE_BYTES = 150
MIB = 1024 * 1024


def build(log_dir: Path, total_bytes: int) -> list[Path]:
    """Partition directories ``bench-<n>`` of 512 MiB segments; returns them."""
    from airflow_provider_kafka_zk.kafka.records import Record, encode_record_batch, segment_file_name

    template = bytearray(
        encode_record_batch(
            [
                Record(o, 1_700_000_000_000 + o, b"key-%06d" % o, b"v" * VALUE_BYTES)
                for o in range(RECORDS_PER_BATCH)
            ],
            partition_leader_epoch=0,
        )
    )
    batch_size = len(template)
    dirs = []
    written = 0
    partition = 0
    while written < total_bytes:
        directory = log_dir / f"bench-{partition}"
        directory.mkdir(parents=True)
        dirs.append(directory)
        offset = 0
        # two segments per partition: the first closed (trimmed indexes), the second active
        for number in range(2):
            if written >= total_bytes:
                break
            base = offset
            size = min(SEGMENT_BYTES, total_bytes - written)
            batches = max(1, size // batch_size)
            index, timeindex = bytearray(), bytearray()
            last_entry_position = 0
            with open(directory / segment_file_name(base, ".log"), "wb") as log:
                chunk = bytearray()
                for i in range(batches):
                    position = i * batch_size
                    if position - last_entry_position > 4096:
                        # 2.0+: the appended chunk's last offset, at the chunk's position
                        index += struct.pack(">ii", offset + RECORDS_PER_BATCH - 1 - base, position)
                        last_entry_position = position
                    struct.pack_into(">q", template, 0, offset)
                    chunk += template
                    offset += RECORDS_PER_BATCH
                    if len(chunk) >= 8 * MIB:
                        log.write(chunk)
                        chunk = bytearray()
                log.write(chunk)
            timeindex += struct.pack(">qi", 1_700_000_000_000 + RECORDS_PER_BATCH - 1, offset - 1 - base)
            active = number == 1 or written + batches * batch_size >= total_bytes
            (directory / segment_file_name(base, ".index")).write_bytes(index)
            (directory / segment_file_name(base, ".timeindex")).write_bytes(timeindex)
            if active:  # preallocated like Kafka's active index: zero tail, sparse on disk
                os.truncate(directory / segment_file_name(base, ".index"), 10485760)
                os.truncate(directory / segment_file_name(base, ".timeindex"), 10485756)
            written += batches * batch_size
        partition += 1
    return dirs


def segments(dirs: list[Path]) -> list[tuple[Path, int, int | None, bool]]:
    out = []
    for d in dirs:
        bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            out.append((d / f"{base:020d}", base, nxt, nxt is None))
    return out


def plain_read(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(MIB):
                total += len(chunk)
    return total


def per_record_reader(stems: list[Path], limit: int) -> tuple[int, int]:
    """Bytes and records read by decoding every record (the core's own decoder)."""
    from airflow_provider_kafka_zk.kafka.records import decode_records, iter_log_entries

    done = records = 0
    for stem in stems:
        if done >= limit:
            break
        data = (stem.with_suffix(".log")).read_bytes()
        for entry in iter_log_entries(data, str(stem), verify_crc=False):
            records += len(decode_records(data, entry, str(stem)))
        done += len(data)
    return done, records


def remote_peak_rss(dirs: list[Path]) -> tuple[float, int, float]:
    """(seconds, bytes read, peak RSS MiB) of the broker-side script, run as over SSH."""
    from airflow_provider_kafka_zk.hooks.broker_log_scan import _SCAN_REMOTE

    script = _SCAN_REMOTE.replace(
        "\nmain()\n",
        # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's across exec)
        "\nmain()\nsys.stderr.write('PEAK_RSS_KB %s\\n' % [l.split()[1] for l in open('/proc/self/status') "
        "if l.startswith('VmHWM')][0])\n",
    )
    request = {
        "limit_s": 3600,
        "nice": 10,
        "budget_bytes": None,
        "index_rule": "last",
        "verify_crc": False,
        "walk_all": True,
        "scan_limit_s": 3000,
        "file_limit_s": 300,
        "partitions": [{"log_dir": str(d.parent), "dir_name": d.name, "recovery_point": 0} for d in dirs],
    }
    started = time.perf_counter()
    done = subprocess.run(
        ["python3", "-c", script], input=json.dumps(request).encode(), capture_output=True, check=True
    )
    seconds = time.perf_counter() - started
    end = json.loads(done.stdout.splitlines()[-1])
    peak = int(done.stderr.decode().split("PEAK_RSS_KB ")[1].split()[0]) / 1024
    return seconds, end["bytes_read"], peak


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--baseline-mib", type=int, default=512)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--compare-ref", default=None, help="time the walk of log_scan.py at this git ref too"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from airflow_provider_kafka_zk.kafka.log_scan import (
        Budget,
        check_offset_index,
        check_time_index,
        walk_log,
    )

    work = args.workdir or Path(tempfile.mkdtemp(prefix="kafka-zk-logscan-bench-"))
    old_walk = None
    if args.compare_ref:
        import importlib.util

        source = subprocess.run(
            ["git", "show", f"{args.compare_ref}:airflow_provider_kafka_zk/kafka/log_scan.py"],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        copy = work / "log_scan_at_ref.py"  # removed with the work directory
        copy.write_text(source)
        spec = importlib.util.spec_from_file_location("log_scan_at_ref", copy)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        old_walk = old.walk_log
    log_dir = work / "kafka-logs-0"
    shutil.rmtree(log_dir, ignore_errors=True)
    started = time.perf_counter()
    dirs = build(log_dir, int(args.gib * 1024 * MIB))
    stems = segments(dirs)
    log_bytes = sum(s[0].with_suffix(".log").stat().st_size for s in stems)
    print(
        f"built {log_bytes / MIB:.0f} MiB of segments in {len(dirs)} partition(s), {len(stems)} segment(s) "
        f"({time.perf_counter() - started:.1f}s) under {log_dir}"
    )

    files = [s[0].with_suffix(x) for s in stems for x in (".log", ".index", ".timeindex")]
    plain_read(files)  # warm the page cache
    t = time.perf_counter()
    read = plain_read(files)
    plain_s = time.perf_counter() - t
    index_files = [f for f in files if f.suffix != ".log"]
    t = time.perf_counter()
    index_read = plain_read(index_files)
    plain_index_s = time.perf_counter() - t

    budget = Budget()
    t = time.perf_counter()
    problems = 0
    for stem, base, nxt, active in stems:
        a = check_offset_index(
            str(stem.with_suffix(".index")),
            str(stem.with_suffix(".log")),
            base,
            nxt,
            index_rule="last",
            active=active,
            budget=budget,
        )
        b = check_time_index(str(stem.with_suffix(".timeindex")), base, nxt, active=active, budget=budget)
        problems += len(a["problems"]) + len(b["problems"])
    index_s = time.perf_counter() - t

    t = time.perf_counter()
    batches = 0
    for stem, *_ in stems:
        walk = walk_log(str(stem.with_suffix(".log")), index_rule="last")
        batches += walk["batches"]
        problems += walk["stop"] is not None
    walk_s = time.perf_counter() - t

    t = time.perf_counter()
    for stem, *_ in stems:
        bounded = Budget(deadline=time.monotonic() + 3600, file_seconds=300)
        walk_log(str(stem.with_suffix(".log")), index_rule="last", budget=bounded)
    bounded_s = time.perf_counter() - t
    old_s = None
    if old_walk is not None:
        t = time.perf_counter()
        for stem, *_ in stems:
            old_walk(str(stem.with_suffix(".log")), index_rule="last")
        old_s = time.perf_counter() - t

    t = time.perf_counter()
    baseline_bytes, records = per_record_reader([s[0] for s in stems], args.baseline_mib * MIB)
    baseline_s = time.perf_counter() - t

    mb = log_bytes / 1e6
    print(
        f"plain read of every file: {read / 1e6 / plain_s:,.0f} MB/s ({plain_s:.2f}s); "
        f"of the index files alone ({index_read / 1e6:.1f} MB, sparse tails as holes): {plain_index_s:.3f}s"
    )
    print(
        f"index checks, every segment:   {index_s:.3f}s = {mb / index_s:,.0f} MB of log covered per second; "
        f"{index_s / max(plain_index_s, 1e-9):.1f}x the plain read of the index files; problems found: {problems}"
    )
    print(f"batch-header walk, every batch: {walk_s:.2f}s = {mb / walk_s:,.0f} MB/s ({batches} batches)")
    print(f"  with per-file and whole-scan time limits: {bounded_s:.2f}s = {mb / bounded_s:,.0f} MB/s")
    if old_s is not None:
        print(
            f"  the walk at {args.compare_ref}: {old_s:.2f}s = {mb / old_s:,.0f} MB/s "
            f"(this one / that one: {old_s / walk_s:.2f}x the speed)"
        )
    base_rate = baseline_bytes / 1e6 / baseline_s
    print(
        f"baseline per-record reader:    {base_rate:,.1f} MB/s ({records} records in {baseline_bytes / MIB:.0f} MiB, {baseline_s:.1f}s)"
    )
    print(f"ratio walk / per-record reader: {mb / walk_s / base_rate:,.0f}x (target >= 20x)")

    quarter = dirs[: max(1, len(dirs) // 4)]
    for label, subset in (("a quarter", quarter), ("all", dirs)):
        seconds, bytes_read, peak = remote_peak_rss(subset)
        print(
            f"broker-side script on {label} of the data: {seconds:.2f}s, {bytes_read / MIB:.1f} MiB read, "
            f"peak RSS {peak:.1f} MiB"
        )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
