"""Pre-restart log and index scan of one broker's partitions, run on the broker host over SSH.

Read-only and one command, like the inventory: the host runs Python 3.6+ (stdlib) with this
module's script -- the project's own :mod:`~airflow_provider_kafka_zk.kafka.log_scan` (the rules
exist once) plus a driver -- at low CPU priority (``nice``), under a byte budget and three time
limits: each file's (``file_timeout``), the whole scan's (``scan_timeout``: what is left is reported
as skipped, with the reason) and the command's hard limit (``timeout``: ``signal.alarm`` and
``RLIMIT_CPU`` on the host, channel timeouts here). A verdict always comes back: when the hard limit
stops the command, the partitions already sent are kept and the rest reported as not scanned.

What it reads is what Kafka reads at the next start (:func:`~airflow_provider_kafka_zk.kafka.log_scan.
scan_partition`): every segment's indexes, and every byte of each segment a start recovers -- every
batch's CRC checked as ``LogSegment.recover`` does -- so a broker's scan reads its whole log only where
Kafka would (a log dir that holds ``.kafka_cleanshutdown`` is recovered by no start: only its
segments without an ``.index`` are read). The CRC-32C runs at C speed where the host offers it (the
``crc32c`` package, else e2fsprogs' libext2fs through ctypes), else in pure Python (about 60 MB/s);
the summary names which.

It sends one compact summary per partition (index structure, the recovery walk's outcome, what it
read and why), never index or log contents. Only regular files are opened (``lstat``, ``O_NOFOLLOW | O_NONBLOCK``,
``fstat``): a partition directory that is a symlink is reported and not entered; segment files that
are symlinks, FIFOs, devices or directories are reported as skipped, never read (a FIFO named like a
``.timeindex`` would otherwise block ``open()``).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import (
    BrokerHostCommandError,
    BrokerHostHook,
    BrokerHostTimeoutError,
)
from airflow_provider_kafka_zk.hooks.broker_quarantine import _HOST_COMMON, run_remote
from airflow_provider_kafka_zk.kafka import log_scan

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
DEFAULT_FILE_TIMEOUT_S = 300.0
DEFAULT_NICE = 10
_SOFT_MARGIN = 0.9  # the whole-scan limit, as a share of the hard one (results sent before the alarm)
# the scanner's own source, docstring dropped: what runs on the host is what the tests run here
_SCANNER = inspect.getsource(log_scan).split('"""', 2)[2]

# Python 3.6+ stdlib only. Reads one JSON request from stdin:
#   {"limit_s", "scan_limit_s", "file_limit_s", "nice", "budget_bytes", "index_rule", "verify_crc",
#    "walk_all", "index_interval", "crc_impl",
#    "partitions": [{"log_dir", "dir_name", "recovery_point", "clean_shutdown"}]}
# and writes {"t": "partition", "i", "result" | "skipped" | "error"} per partition, then
# {"t": "end", "bytes_read", "budget_exhausted", "stopped"}; or {"t": "fatal", ...}.
_SCAN_REMOTE = (
    r"""
# kafka-zk-log-scan-remote: reads segment headers and indexes; never writes.
"""
    + _HOST_COMMON
    + _SCANNER
    + r"""


def on_limit(signum, frame):
    if STATE["fatal"]:
        os._exit(124)
    STATE["fatal"] = True
    emit({"t": "fatal", "kind": "timeout", "limit_s": STATE["limit"], "signal": signum,
          "detail": "the log scan ran past its limit of %ss and stopped" % STATE["limit"]})
    os._exit(124)


def main():
    started = time.monotonic()
    req = read_request(on_limit, 1800)
    if req is None:
        return
    try:
        os.nice(int(req.get("nice") or 0))
    except OSError:
        pass
    scan_limit = req.get("scan_limit_s")
    budget = Budget(req.get("budget_bytes"),
                    deadline=None if scan_limit is None else started + float(scan_limit),
                    file_seconds=req.get("file_limit_s"))
    stopped = None
    for i, part in enumerate(req.get("partitions") or []):
        reason = budget.stop_reason()
        if reason:
            stopped = reason[1]
            emit({"t": "partition", "i": i, "skipped": reason[1]})
            continue
        path = join(part["log_dir"], part["dir_name"])
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                emit({"t": "partition", "i": i, "error": "%s is a symlink: not followed" % path})
                continue
            if not stat.S_ISDIR(st.st_mode):
                emit({"t": "partition", "i": i, "error": "%s is not a directory" % path})
                continue
            result = scan_partition(path, part.get("recovery_point"), index_rule=req["index_rule"],
                                    clean_shutdown=part.get("clean_shutdown"),
                                    verify_crc=bool(req.get("verify_crc")), walk_all=bool(req.get("walk_all")),
                                    budget=budget, index_interval=int(req.get("index_interval") or 4096),
                                    crc_impl=req.get("crc_impl"))
        except OSError as exc:
            emit({"t": "partition", "i": i, "error": "%s: %s" % (path, exc)})
            continue
        emit({"t": "partition", "i": i, "result": result, "bytes_read": budget.spent})
    emit({"t": "end", "bytes_read": budget.spent, "budget_exhausted": budget.exhausted, "stopped": stopped,
          "seconds": round(time.monotonic() - started, 3)})


main()
"""
)


@dataclass(frozen=True)
class PartitionToScan:
    """One partition directory to scan. ``recovery_point``: its ``recovery-point-offset-checkpoint``
    line (None: none -- 0 to Kafka); ``clean_shutdown``: its log dir holds ``.kafka_cleanshutdown``
    (True: the next start recovers nothing, so unflushed segments are not read; None: unknown)."""

    log_dir: str
    dir_name: str
    topic: str
    partition: int
    recovery_point: int | None = None
    clean_shutdown: bool | None = None

    def as_request(self) -> dict[str, Any]:
        return {
            "log_dir": self.log_dir,
            "dir_name": self.dir_name,
            "recovery_point": self.recovery_point,
            "clean_shutdown": self.clean_shutdown,
        }


READ_TOTALS = (
    "crc_segments",
    "crc_segment_bytes",
    "crc_bytes",
    "header_segments",
    "header_segment_bytes",
    "not_read_segments",
    "not_read_bytes",
    "skipped_segments",
)


def read_totals(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the scan read, summed over the partitions scanned (:func:`log_scan.scan_partition`'s
    ``read``), with the CRC-32C implementation the host used."""
    totals: dict[str, Any] = dict.fromkeys(READ_TOTALS, 0)
    impls = set()
    for item in results:
        read = (item.get("result") or {}).get("read") or {}
        for key in READ_TOTALS:
            totals[key] += int(read.get(key) or 0)
        if read.get("crc_impl"):
            impls.add(read["crc_impl"])
    totals["crc_impl"] = ", ".join(sorted(impls)) or None
    return totals


def scan_broker_logs(
    hook: BrokerHostHook,
    broker_id: int,
    partitions: Sequence[PartitionToScan],
    *,
    index_rule: str,
    verify_crc: bool = False,
    walk_all: bool = False,
    budget_bytes: int | None = None,
    crc_impl: str | None = None,
    nice: int = DEFAULT_NICE,
    timeout: float = DEFAULT_TIMEOUT_S,
    file_timeout: float | None = DEFAULT_FILE_TIMEOUT_S,
    scan_timeout: float | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Scan ``partitions`` on broker ``broker_id``'s host; one SSH command. Always returns.

    :param hook: the cluster's broker host hook (strict host keys).
    :param broker_id: the broker whose host is read.
    :param partitions: the partition directories to scan (from the inventory), in order.
    :param index_rule: ``first`` (0.11-1.1) or ``last`` (2.0+): which offset an index entry holds.
    :param verify_crc: also read every segment Kafka will not recover, every batch's CRC checked
        (damage no start notices; the segments a start recovers are always read so).
    :param walk_all: also walk the batch headers of every segment Kafka will not recover.
    :param budget_bytes: stop reading after this many bytes (the rest is reported as skipped).
    :param crc_impl: force a CRC-32C implementation on the host (``python``: the pure-Python one);
        default: the fastest the host offers.
    :param nice: CPU niceness of the scan on the host.
    :param timeout: hard limit (s) of the command, on the host and here.
    :param file_timeout: time limit (s) of reading one file (None: none); a file past it is skipped.
    :param scan_timeout: time limit (s) of the whole scan, after which the remaining partitions are
        reported as skipped (default: 90 % of ``timeout``, so the results arrive before the alarm).
    :param on_progress: called with (partitions done, partitions total, bytes read) as results arrive.
    :raises BrokerHostCommandError: the host command failed or broke the protocol (not for a timeout:
        then what arrived is returned and the rest is marked skipped).

    Returns (one dict per partition in order: ``{"result"}``, ``{"skipped": reason}`` or
    ``{"error"}``; the end record ``{"bytes_read", "budget_exhausted", "stopped", "seconds", "read"}``
    -- ``read``: :func:`read_totals` --, with ``"timed_out"`` when the hard limit stopped the command).
    """
    if index_rule not in ("first", "last"):
        raise ValueError(f"index_rule must be 'first' or 'last', not {index_rule!r}")
    limit_s = max(1, math.ceil(float(timeout)))
    soft = float(scan_timeout) if scan_timeout is not None else limit_s * _SOFT_MARGIN
    address = hook.resolve(broker_id)
    request = {
        "limit_s": limit_s,
        "scan_limit_s": max(0.0, min(soft, limit_s * _SOFT_MARGIN)),
        "file_limit_s": None if file_timeout is None else max(0.1, float(file_timeout)),
        "nice": int(nice),
        "budget_bytes": budget_bytes,
        "index_rule": index_rule,
        "verify_crc": bool(verify_crc),
        "walk_all": bool(walk_all),
        "crc_impl": crc_impl,
        "partitions": [p.as_request() for p in partitions],
    }
    total = len(partitions)

    def progress(record: dict[str, Any]) -> None:
        if record.get("t") == "partition" and on_progress is not None:
            on_progress(int(record.get("i", 0)) + 1, total, int(record.get("bytes_read") or 0))

    timed_out = None
    try:
        records = run_remote(
            hook,
            address,
            request,
            limit_s,
            script=_SCAN_REMOTE,
            what="log scan",
            done_status="",
            on_record=progress,
        )
    except BrokerHostTimeoutError as exc:
        records = [r for r in getattr(exc, "records", []) if r.get("t") == "partition"]
        timed_out = f"the log scan command ran past its hard limit of {limit_s}s: not scanned"
        log.warning("Broker %d: %s (%d of %d partitions scanned)", broker_id, exc, len(records), total)
    results: list[dict[str, Any] | None] = [None] * total
    bytes_read = 0
    for record in records:
        if record.get("t") == "partition":
            i = record.get("i")
            if not isinstance(i, int) or not 0 <= i < total:
                raise BrokerHostCommandError(
                    broker_id, address.host, address.port, f"log scan record for no partition: {i!r}"
                )
            results[i] = {k: v for k, v in record.items() if k not in ("t", "i")}
            bytes_read = max(bytes_read, int(record.get("bytes_read") or 0))
    if timed_out is not None:
        done = [r if r is not None else {"skipped": timed_out} for r in results]
        end = {
            "bytes_read": bytes_read,
            "budget_exhausted": False,
            "stopped": timed_out,
            "timed_out": True,
            "seconds": None,
            "read": read_totals(done),
        }
        return done, end
    missing = [partitions[i].dir_name for i, r in enumerate(results) if r is None]
    if missing:
        raise BrokerHostCommandError(
            broker_id, address.host, address.port, f"log scan sent no result for {missing[:5]}"
        )
    done = [r for r in results if r is not None]
    end = {k: v for k, v in records[-1].items() if k != "t"}
    end["read"] = read_totals(done)
    return done, end
