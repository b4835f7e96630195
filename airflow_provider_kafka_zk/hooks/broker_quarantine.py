"""Move leftover partition directories into a quarantine directory on the same broker host.

Never a delete: each directory is renamed into ``<quarantine>/<ts>/<name>`` on the *same
filesystem* (checked by device number on the host, so the move is an atomic rename and cannot
half-copy), and a ``quarantine-listing.json`` beside them says what came from where. The default
quarantine is ``<log dir>/../kafka-quarantine`` -- outside the log dir, where Kafka would take any
directory for a partition and refuse to start on it.

One SSH command per broker host through :class:`BrokerHostHook` (strict host keys): a constant
``sh -c`` line built with ``shlex.quote``; the paths travel as JSON on stdin and never reach a shell.
A dry run performs every check on the host and moves nothing. Re-running is safe: a directory
already in the quarantine is reported ``already_moved``.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostCommandError, BrokerHostHook

log = logging.getLogger(__name__)

LISTING_FILE = "quarantine-listing.json"
QUARANTINE_DIR_NAME = "kafka-quarantine"

# Python 3.6+ stdlib only; reads {"dry_run", "ts", "moves": [...]} from stdin, one JSON line per move.
_REMOTE = r"""
import json, os, sys, time
req = json.loads(sys.stdin.read())
out = sys.stdout
def emit(rec):
    out.write(json.dumps(rec) + "\n"); out.flush()
def device(path):
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return os.stat(path).st_dev
listings = {}
for m in req["moves"]:
    name, log_dir = m["name"], m["log_dir"]
    rec = {"t": "move", "name": name, "log_dir": log_dir}
    if not name or "/" in name or name in (".", "..") or not os.path.isabs(log_dir):
        rec.update(status="refused", detail="not a plain directory name in an absolute log dir"); emit(rec); continue
    src = os.path.join(log_dir, name)
    qroot = m.get("quarantine") or os.path.join(os.path.dirname(os.path.normpath(log_dir)), "kafka-quarantine")
    ddir = os.path.join(qroot, req["ts"])
    dst = os.path.join(ddir, name)
    rec.update(source=src, destination=dst)
    if not os.path.lexists(src):
        rec.update(status="already_moved" if os.path.isdir(dst) else "gone",
                   detail="found in the quarantine" if os.path.isdir(dst) else "no longer on disk")
        emit(rec)
        if rec["status"] == "already_moved":
            listings.setdefault(ddir, [])
        continue
    if os.path.islink(src) or not os.path.isdir(src):
        rec.update(status="refused", detail="not a directory (or a symlink)"); emit(rec); continue
    if os.path.lexists(dst):
        rec.update(status="refused", detail="the destination already exists"); emit(rec); continue
    if device(ddir) != os.stat(src).st_dev:
        rec.update(status="refused", detail="the quarantine is on another filesystem: a move would copy"); emit(rec); continue
    size = 0
    files = []
    for base, _, names in os.walk(src):
        for f in names:
            try:
                size += os.lstat(os.path.join(base, f)).st_size
            except OSError:
                pass
            files.append(os.path.relpath(os.path.join(base, f), src))
    rec.update(bytes=size, files=len(files))
    if req["dry_run"]:
        rec.update(status="would_move"); emit(rec); continue
    try:
        os.makedirs(ddir, mode=0o750, exist_ok=True)
        if os.stat(ddir).st_dev != os.stat(src).st_dev:
            raise OSError("the quarantine is on another filesystem")
        os.rename(src, dst)
    except OSError as exc:
        rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc)); emit(rec); continue
    rec.update(status="moved", moved_at_ms=int(time.time() * 1000), file_names=sorted(files))
    listings.setdefault(ddir, []).append(rec)
    emit(rec)
for ddir, entries in listings.items():
    path = os.path.join(ddir, "quarantine-listing.json")
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    names = {e["name"] for e in entries}
    merged = [e for e in old if e["name"] not in names] + entries
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
        f.flush(); os.fsync(f.fileno())
    os.replace(tmp, path)
    emit({"t": "listing", "path": path, "entries": sorted(e["name"] for e in merged)})
emit({"t": "end"})
"""


@dataclass(frozen=True)
class QuarantineMove:
    """One directory to move: ``<log_dir>/<name>`` into ``<quarantine or default>/<ts>/<name>``."""

    log_dir: str
    name: str
    quarantine: str | None = None


def remote_command(interpreters: Sequence[str]) -> str:
    """The one shell command: constant for a given interpreter list (no paths, no caller data)."""
    candidates = " ".join(shlex.quote(p) for p in interpreters)
    inner = (
        f'for p in {candidates}; do if command -v "$p" >/dev/null 2>&1; then '
        f'exec "$p" -c {shlex.quote(_REMOTE)}; fi; done; echo "no python3 on this host" >&2; exit 127'
    )
    return "sh -c " + shlex.quote(inner)


def quarantine_directories(
    hook: BrokerHostHook,
    broker_id: int,
    moves: Sequence[QuarantineMove],
    *,
    ts: str,
    dry_run: bool = True,
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Check (dry run) or carry out ``moves`` on broker ``broker_id``'s host; one SSH command.

    Returns ``{"broker_id", "host", "dry_run", "results": [...], "listings": [...]}``; each result
    has a ``status``: would_move, moved, already_moved, gone, refused or failed.
    """
    if not ts or "/" in ts or ts in (".", ".."):
        raise ValueError(f"quarantine timestamp must be one path component, not {ts!r}")
    address = hook.resolve(broker_id)
    request = {
        "dry_run": bool(dry_run),
        "ts": ts,
        "moves": [{"log_dir": m.log_dir, "name": m.name, "quarantine": m.quarantine} for m in moves],
    }
    client = hook.connect(address)
    try:
        channel = client.get_transport().open_session(timeout=30)
        channel.settimeout(timeout)
        channel.exec_command(remote_command(hook.python_interpreters))
        channel.sendall(json.dumps(request).encode())
        channel.shutdown_write()
        started = time.monotonic()
        stdout, stderr = bytearray(), bytearray()
        while True:
            if channel.recv_stderr_ready():
                stderr += channel.recv_stderr(1 << 16)
            chunk = channel.recv(1 << 16)
            if not chunk:
                break
            stdout += chunk
            if time.monotonic() - started > timeout:
                raise BrokerHostCommandError(
                    broker_id, address.host, address.port, f"quarantine command ran past {timeout:g}s"
                )
        while channel.recv_stderr_ready():
            stderr += channel.recv_stderr(1 << 16)
        status = channel.recv_exit_status()
        channel.close()
    finally:
        client.close()
    records = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    if status != 0 or not records or records[-1].get("t") != "end":
        raise BrokerHostCommandError(
            broker_id,
            address.host,
            address.port,
            f"quarantine command failed (exit {status}): {bytes(stderr[-1000:]).decode('utf-8', 'replace')}",
        )
    results = [{k: v for k, v in r.items() if k != "t"} for r in records if r.get("t") == "move"]
    listings = [{k: v for k, v in r.items() if k != "t"} for r in records if r.get("t") == "listing"]
    for result in results:
        log.info(
            "Broker %d (%s): %s %s -> %s%s",
            broker_id,
            address.host,
            result["status"],
            result.get("source", result["name"]),
            result.get("destination", "-"),
            f" ({result['detail']})" if result.get("detail") else "",
        )
    return {
        "broker_id": broker_id,
        "host": address.host,
        "dry_run": bool(dry_run),
        "results": results,
        "listings": listings,
    }
