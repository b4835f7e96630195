"""The pre-restart check's cost: the default now vs the default before (issue 32), over SSH, and the walk.

    .venv/bin/python benchmarks/log_scan_benchmark.py [--partitions 24] [--segments 6] [--segment-mib 16]
        [--repeat 3] [--baseline-ref main] [--workdir DIR]
    .venv/bin/python benchmarks/log_scan_benchmark.py --walk-throughput [--gib 2] [--baseline-mib 512]

**Default: what the default check costs on a broker with many segments, next to the default it
replaces**, both run as the product runs them: the scanner sent over SSH to a real sshd on loopback
(:class:`~airflow_provider_kafka_zk.testing.sshd.SshServer`, the hook's own ``run_remote``), on one
broker log dir the benchmark builds: ``--partitions`` partitions of ``--segments`` segments of
``--segment-mib`` MiB (v2 batches of 100 records, the 2.0+ index rule), every segment rolled but the
active one (half full, its indexes preallocated and sparse), the recovery point at the active segment's
base -- a broker killed with default flush settings (``LogManager`` flushes a segment when it rolls).
Kafka's next start after a crash recovers exactly the active segments (``LogLoader.recoverLog``, 3.3.1).

* ``before``: the scanner at ``--baseline-ref`` (default ``main``; its ``_SCAN_REMOTE`` built from
  that tree): every segment's indexes, the recovered segments' batch headers, the last batch's CRC;
* ``now``: this tree's scanner: every segment's indexes, the recovered segments read whole with every
  batch's CRC (the CRC-32C the host offers: the ``crc32c`` package, libext2fs, else pure Python);
* ``now, pure-Python CRC``: the same with the fallback forced (a host without either);
* ``now, verify_crc``: every segment read whole (what reading the whole log costs, for scale).

Each is run ``--repeat`` times with the files in the page cache (a warm-up read first); the best and
the median seconds are printed with the bytes each read (the scanner's own count: ``.log`` and index
bytes), and the ratios ``now / before``. Not a test: nothing here asserts.

``--walk-throughput``: the earlier numbers of the batch-header walk in process (plain read, index
checks, walk with and without time limits, vs a per-record Python reader, the broker-side script's
peak RSS), on ``--gib`` GiB of 512 MiB segments.
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


def _template() -> bytearray:
    """One v2 batch of ``RECORDS_PER_BATCH`` records; its base offset is stamped per copy."""
    from airflow_provider_kafka_zk.kafka.records import Record, encode_record_batch

    return bytearray(
        encode_record_batch(
            [
                Record(o, 1_700_000_000_000 + o, b"key-%06d" % o, b"v" * VALUE_BYTES)
                for o in range(RECORDS_PER_BATCH)
            ],
            partition_leader_epoch=0,
        )
    )


def write_segment(directory: Path, template: bytearray, base: int, batches: int, *, active: bool) -> int:
    """A segment of ``batches`` copies of ``template`` from offset ``base``, its offset index on the
    2.0+ rule (the chunk's last offset every 4096 bytes) and its closing time-index entry; an active
    segment's indexes preallocated (zero tail, sparse on disk). Returns the next offset."""
    from airflow_provider_kafka_zk.kafka.records import segment_file_name

    batch_size = len(template)
    offset = base
    index, last_entry_position = bytearray(), 0
    with open(directory / segment_file_name(base, ".log"), "wb") as log:
        chunk = bytearray()
        for i in range(batches):
            position = i * batch_size
            if position - last_entry_position > 4096:
                index += struct.pack(">ii", offset + RECORDS_PER_BATCH - 1 - base, position)
                last_entry_position = position
            struct.pack_into(">q", template, 0, offset)
            chunk += template
            offset += RECORDS_PER_BATCH
            if len(chunk) >= 8 * MIB:
                log.write(chunk)
                chunk = bytearray()
        log.write(chunk)
    (directory / segment_file_name(base, ".index")).write_bytes(index)
    (directory / segment_file_name(base, ".timeindex")).write_bytes(
        struct.pack(">qi", 1_700_000_000_000 + RECORDS_PER_BATCH - 1, offset - 1 - base)
    )
    if active:
        os.truncate(directory / segment_file_name(base, ".index"), 10485760)
        os.truncate(directory / segment_file_name(base, ".timeindex"), 10485756)
    return offset


def build(log_dir: Path, total_bytes: int) -> list[Path]:
    """Partition directories ``bench-<n>`` of 512 MiB segments; returns them."""
    template = _template()
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
            batches = max(1, min(SEGMENT_BYTES, total_bytes - written) // batch_size)
            active = number == 1 or written + batches * batch_size >= total_bytes
            offset = write_segment(directory, template, offset, batches, active=active)
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


def walk_throughput(args: argparse.Namespace) -> None:
    """The batch-header walk in process (the benchmark's earlier numbers)."""
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
        batches += walk["batches"]  # headers only (no verify_crc): the walk's own speed
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


# ---------------------------------------------------------------------------------------------
# the default check over SSH: now vs before
# ---------------------------------------------------------------------------------------------


def build_crashed_broker(log_dir: Path, partitions: int, segments: int, segment_bytes: int) -> list[dict]:
    """``partitions`` partition directories of ``segments`` segments each (the last half full and
    active: indexes preallocated, sparse) and a recovery-point-offset-checkpoint at each active
    segment's base, no clean-shutdown marker: a broker killed while producing. Returns the scan
    request's partitions."""
    from airflow_provider_kafka_zk.kafka.logdir import OffsetCheckpoint

    template = _template()
    log_dir.mkdir(parents=True)
    points, request = {}, []
    for partition in range(partitions):
        directory = log_dir / f"bench-{partition}"
        directory.mkdir()
        offset = 0
        for number in range(segments):
            active = number == segments - 1
            if active:
                points[("bench", partition)] = offset
            batches = max(1, (segment_bytes // (2 if active else 1)) // len(template))
            offset = write_segment(directory, template, offset, batches, active=active)
        request.append(
            {
                "log_dir": str(log_dir),
                "dir_name": directory.name,
                "recovery_point": points[("bench", partition)],
            }
        )
    (log_dir / "recovery-point-offset-checkpoint").write_bytes(OffsetCheckpoint.from_offsets(points).encode())
    return request


def scanner_at(ref: str, work: Path) -> str:
    """The broker-side scan script (``_SCAN_REMOTE``) as the tree at ``ref`` builds it."""
    tree = work / f"tree-{ref.replace('/', '_')}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "archive", ref, "airflow_provider_kafka_zk"], cwd=root, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import airflow_provider_kafka_zk.hooks.broker_log_scan as m; "
        "assert m.__file__.startswith(sys.argv[1]), m.__file__; sys.stdout.write(m._SCAN_REMOTE)"
    )
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tree)], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


def ssh_defaults(args: argparse.Namespace) -> None:
    import logging
    import statistics

    from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
    from airflow_provider_kafka_zk.hooks.broker_log_scan import _SCAN_REMOTE, read_totals
    from airflow_provider_kafka_zk.hooks.broker_quarantine import run_remote
    from airflow_provider_kafka_zk.testing.sshd import SshServer

    work = args.workdir or Path(tempfile.mkdtemp(prefix="kafka-zk-logscan-bench-"))
    os.environ.setdefault("AIRFLOW_HOME", str(work / "airflow"))
    log_dir = work / "host" / "kafka-logs-0"
    shutil.rmtree(log_dir.parent, ignore_errors=True)
    started = time.perf_counter()
    partitions = build_crashed_broker(log_dir, args.partitions, args.segments, args.segment_mib * MIB)
    logs = sorted(log_dir.glob("*/*.log"))
    total = sum(p.stat().st_size for p in logs)
    active = sum(sorted(d.glob("*.log"))[-1].stat().st_size for d in log_dir.iterdir() if d.is_dir())
    print(
        f"built a crashed broker's log dir: {args.partitions} partitions x {args.segments} segments, "
        f"{len(logs)} segments, {total / MIB:,.0f} MiB of .log ({active / MIB:,.0f} MiB in the active segments "
        f"Kafka recovers at the next start) in {time.perf_counter() - started:.1f}s under {log_dir}"
    )
    before_script = scanner_at(args.baseline_ref, work)
    plain_read(sorted(log_dir.glob("*/*")))  # warm the page cache: every run reads from memory

    base_request = {
        "limit_s": 3600,
        "scan_limit_s": 3000,
        "file_limit_s": 600,
        "nice": 0,
        "budget_bytes": None,
        "index_rule": "last",
        "verify_crc": False,
        "walk_all": False,
        "partitions": [{**p, "clean_shutdown": False} for p in partitions],
    }
    runs = [
        (f"before ({args.baseline_ref}'s default)", before_script, {}),
        ("now (default)", _SCAN_REMOTE, {}),
        ("now, pure-Python CRC", _SCAN_REMOTE, {"crc_impl": "python"}),
        ("now, verify_crc (whole log)", _SCAN_REMOTE, {"verify_crc": True}),
    ]
    results = {}
    with SshServer(("127.0.0.1",), work_dir=work / "sshd") as sshd:
        os.environ.update(sshd.airflow_connection("127.0.0.1", "log_scan_bench_ssh", conn_timeout=30))
        for name in ("paramiko", "airflow_provider_kafka_zk"):
            logging.getLogger(name).setLevel(logging.WARNING)
        hook = BrokerHostHook("log_scan_bench_ssh", broker_hosts={0: "127.0.0.1"})
        address = hook.resolve(0)
        for label, script, extra in runs:
            times, end, records = [], {}, []
            for _ in range(args.repeat):
                t = time.perf_counter()
                records = run_remote(
                    hook,
                    address,
                    {**base_request, **extra},
                    3600,
                    script=script,
                    what="log scan",
                    done_status="",
                )
                times.append(time.perf_counter() - t)
                end = records[-1]
            read = read_totals([r for r in records if r.get("t") == "partition"])
            results[label] = (min(times), statistics.median(times), end["bytes_read"], read)
            crc = f"; CRC-32C by {read['crc_impl']}" if read.get("crc_impl") else ""
            print(
                f"{label:32} best {min(times):7.2f}s  median {statistics.median(times):7.2f}s  "
                f"{end['bytes_read'] / MIB:9,.1f} MiB read{crc}"
            )
            if read.get("crc_segments") is not None and read.get("crc_impl"):
                print(
                    f"{'':32} read whole, every CRC: {read['crc_segments']} segments "
                    f"({read['crc_segment_bytes'] / MIB:,.1f} MiB); not read: {read['not_read_segments']} segments "
                    f"({read['not_read_bytes'] / MIB:,.1f} MiB)"
                )
    before = results[runs[0][0]]
    for label, _, _ in runs[1:]:
        now = results[label]
        print(
            f"{label} / before: {now[0] / before[0]:,.1f}x the seconds (best), "
            f"{now[2] / max(before[2], 1):,.1f}x the bytes read"
        )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--segments", type=int, default=6)
    parser.add_argument("--segment-mib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-ref", default="main", help="the git ref whose default is 'before'")
    parser.add_argument("--walk-throughput", action="store_true", help="the in-process walk numbers instead")
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--baseline-mib", type=int, default=512)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--compare-ref", default=None, help="time the walk of log_scan.py at this git ref too"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.walk_throughput:
        walk_throughput(args)
    else:
        ssh_defaults(args)


if __name__ == "__main__":
    main()
