"""Pre-restart log and index scan of one broker's partitions, run on the broker host over SSH.

Read-only and one command, like the inventory: the host runs Python 3.6+ (stdlib) with this
module's script -- the project's own :mod:`~airflow_provider_kafka_zk.kafka.log_scan` (the rules
exist once) plus a driver -- at low CPU priority (``nice``), under a byte budget and a hard time
limit (``signal.alarm`` and ``RLIMIT_CPU``). It sends one compact summary per partition (index
structure, the recovery walk's outcome), never index or log contents. A partition directory that
is a symlink is reported and not entered; segment files that are symlinks are not followed.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostCommandError, BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_quarantine import _HOST_COMMON, run_remote
from airflow_provider_kafka_zk.kafka import log_scan

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
DEFAULT_NICE = 10
# the scanner's own source, docstring dropped: what runs on the host is what the tests run here
_SCANNER = inspect.getsource(log_scan).split('"""', 2)[2]

# Python 3.6+ stdlib only. Reads one JSON request from stdin:
#   {"limit_s", "nice", "budget_bytes", "index_rule", "verify_crc", "walk_all", "index_interval",
#    "partitions": [{"log_dir", "dir_name", "recovery_point"}]}
# and writes {"t": "partition", "i", "result" | "skipped" | "error"} per partition, then
# {"t": "end", "bytes_read", "budget_exhausted"}; or {"t": "fatal", ...}.
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
    req = read_request(on_limit, 1800)
    if req is None:
        return
    try:
        os.nice(int(req.get("nice") or 0))
    except OSError:
        pass
    budget = Budget(req.get("budget_bytes"))
    for i, part in enumerate(req.get("partitions") or []):
        if budget.exhausted:
            emit({"t": "partition", "i": i, "skipped": "byte budget spent"})
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
                                    verify_crc=bool(req.get("verify_crc")), walk_all=bool(req.get("walk_all")),
                                    budget=budget, index_interval=int(req.get("index_interval") or 4096))
        except OSError as exc:
            emit({"t": "partition", "i": i, "error": "%s: %s" % (path, exc)})
            continue
        emit({"t": "partition", "i": i, "result": result, "bytes_read": budget.spent})
    emit({"t": "end", "bytes_read": budget.spent, "budget_exhausted": budget.exhausted})


main()
"""
)


@dataclass(frozen=True)
class PartitionToScan:
    log_dir: str
    dir_name: str
    topic: str
    partition: int
    recovery_point: int | None = None

    def as_request(self) -> dict[str, Any]:
        return {"log_dir": self.log_dir, "dir_name": self.dir_name, "recovery_point": self.recovery_point}


def scan_broker_logs(
    hook: BrokerHostHook,
    broker_id: int,
    partitions: Sequence[PartitionToScan],
    *,
    index_rule: str,
    verify_crc: bool = False,
    walk_all: bool = False,
    budget_bytes: int | None = None,
    nice: int = DEFAULT_NICE,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Scan ``partitions`` on broker ``broker_id``'s host; one SSH command.

    :param hook: the cluster's broker host hook (strict host keys).
    :param broker_id: the broker whose host is read.
    :param partitions: the partition directories to scan (from the inventory), in order.
    :param index_rule: ``first`` (0.11-1.1) or ``last`` (2.0+): which offset an index entry holds.
    :param verify_crc: check every batch's CRC in the walk (slow; the last batch's is always checked).
    :param walk_all: walk every segment, not only those recovered after an unclean shutdown.
    :param budget_bytes: stop reading after this many bytes (the rest is reported as skipped).
    :param nice: CPU niceness of the scan on the host.
    :param timeout: hard limit (s), on the host and here.
    :param on_progress: called with (partitions done, partitions total, bytes read) as results arrive.
    :raises BrokerHostTimeoutError: past ``timeout``.
    :raises BrokerHostCommandError: the host command failed or broke the protocol.

    Returns (one dict per partition in order: ``{"result"}``, ``{"skipped"}`` or ``{"error"}``; the
    end record ``{"bytes_read", "budget_exhausted"}``).
    """
    if index_rule not in ("first", "last"):
        raise ValueError(f"index_rule must be 'first' or 'last', not {index_rule!r}")
    limit_s = max(1, math.ceil(float(timeout)))
    address = hook.resolve(broker_id)
    request = {
        "limit_s": limit_s,
        "nice": int(nice),
        "budget_bytes": budget_bytes,
        "index_rule": index_rule,
        "verify_crc": bool(verify_crc),
        "walk_all": bool(walk_all),
        "partitions": [p.as_request() for p in partitions],
    }
    total = len(partitions)

    def progress(record: dict[str, Any]) -> None:
        if record.get("t") == "partition" and on_progress is not None:
            on_progress(int(record.get("i", 0)) + 1, total, int(record.get("bytes_read") or 0))

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
    results: list[dict[str, Any] | None] = [None] * total
    for record in records:
        if record.get("t") == "partition":
            i = record.get("i")
            if not isinstance(i, int) or not 0 <= i < total:
                raise BrokerHostCommandError(
                    broker_id, address.host, address.port, f"log scan record for no partition: {i!r}"
                )
            results[i] = {k: v for k, v in record.items() if k not in ("t", "i")}
    missing = [partitions[i].dir_name for i, r in enumerate(results) if r is None]
    if missing:
        raise BrokerHostCommandError(
            broker_id, address.host, address.port, f"log scan sent no result for {missing[:5]}"
        )
    return [r for r in results if r is not None], records[-1]
