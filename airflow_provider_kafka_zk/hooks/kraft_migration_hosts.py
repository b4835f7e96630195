"""The broker and controller hosts of a ZooKeeper-to-KRaft migration over SSH: their files read,
config files written atomically with the old one kept, storage renamed aside, processes found,
commands run under a time limit.

One constant ``sh -c`` command per call through :class:`~.broker_host.BrokerHostHook` (strict host
keys), the request as JSON on stdin (the quarantine's host helpers, ``broker_quarantine._HOST_COMMON``:
directories opened one checked component at a time, no symlink followed, a hard time limit on the
host). Guards, each there for a damage it prevents:

* **reads** never follow a symlink and stop at a byte limit (a planted link cannot make the plan
  show another file; a huge log is read from its tail only);
* **a config write** is all or nothing: the new text goes into a new file (``O_CREAT|O_EXCL|
  O_NOFOLLOW``) in the same directory, fsynced, with the old file's mode (and owner when the user may
  set it); the old file is hard-linked to ``keep_as`` (refused if that name holds anything else); the
  file must still hold the sha256 the plan read, checked right before the rename that replaces it;
  the directory is fsynced. A file already holding the new text is ``already`` (a retry). A dry run
  checks all of it and writes nothing;
* **a rename aside** (a controller's storage after a revert) stays in one directory (same
  filesystem: an atomic rename), never overwrites, never follows a symlink;
* **processes**: a Kafka process is one whose command line has a Kafka main class followed by the
  node's properties path (``/proc/<pid>/cmdline``); its start time (``/proc/<pid>/stat`` field 22
  and ``btime``) tells whether the file changed after it started (restart pending);
* **commands** (format, start, stop, restart) run under the supervisor of
  :func:`~.broker_partition_files.run_host_command`, only inside a maintenance session that pinned
  the host, the template rendered with shell-quoted values.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import BrokerAddress, BrokerHostCommandError, BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_quarantine import _HOST_COMMON, BrokerGate, run_remote
from airflow_provider_kafka_zk.kafka.inventory import KAFKA_MAIN_CLASSES

log = logging.getLogger(__name__)

SCRIPT_MARKER = "kafka-zk-kraft-migration-remote"
DEFAULT_TIMEOUT_S = 120.0
READ_LIMIT = 16 << 20  # a server.properties, meta.properties, quorum-state, a log's tail
METADATA_READ_LIMIT = 256 << 20  # snapshot + log of the metadata partition

# Python 3.6+ stdlib only. Request: {"limit_s", "dry_run", "ops": [...]}; one record per op
# ({"t": "op", "i": n, ...}) then {"t": "end"}.
_REMOTE = (
    r"""
# kafka-zk-kraft-migration-remote: reads, writes and renames on a migrating node's host.
"""
    + _HOST_COMMON
    + r"""
import base64, hashlib

O_FILE = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def on_limit(signum, frame):
    if STATE["fatal"]:
        os._exit(124)
    STATE["fatal"] = True
    emit({"t": "fatal", "kind": "timeout", "limit_s": STATE["limit"], "signal": signum,
          "detail": "the script ran past its limit of %ss" % STATE["limit"]})
    os._exit(124)


def parent(path, fds, create=False):
    rule = path_rule(path)
    if rule:
        raise Refused("%s %s" % (path, rule))
    head, name = path.rsplit("/", 1)
    fd, shown, missing = open_path(head or "/", fds)
    if missing:
        if not create:
            return None, name, "%s/%s is missing" % (shown.rstrip("/"), missing[0])
        for component in missing:
            fd = open_child(fd, component, shown.rstrip("/") + "/" + component, True, fds)
            shown = shown.rstrip("/") + "/" + component
    return fd, name, None


def lstat(dfd, name):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_file(dfd, name, limit, tail):
    st = lstat(dfd, name)
    if st is None:
        return None, None
    if stat.S_ISLNK(st.st_mode):
        raise Refused("%s is a symlink" % name)
    if not stat.S_ISREG(st.st_mode):
        raise Refused("%s is not a regular file" % name)
    fd = os.open(name, O_FILE, dir_fd=dfd)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise Refused("%s changed while it was being opened" % name)
        size = opened.st_size
        start = max(0, size - limit) if tail else 0
        os.lseek(fd, start, 0)
        chunks, left = [], min(limit, size - start)
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), {"size": size, "start": start, "mtime": opened.st_mtime, "mode": opened.st_mode & 0o7777,
                                  "uid": opened.st_uid, "gid": opened.st_gid}
    finally:
        os.close(fd)


def whole_sha(dfd, name):
    data, meta = read_file(dfd, name, 1 << 30, False)
    return None if data is None else hashlib.sha256(data).hexdigest()


def op_read(op, fds):
    dfd, name, missing = parent(op["path"], fds)
    if dfd is None:
        return {"status": "absent", "detail": missing}
    data, meta = read_file(dfd, name, int(op.get("max_bytes") or 16777216), bool(op.get("tail")))
    if data is None:
        return {"status": "absent"}
    out = {"status": "present", "content_b64": base64.b64encode(data).decode(), "sha256": hashlib.sha256(data).hexdigest()}
    out.update(meta)
    return out


def op_list(op, fds):
    dfd, name, missing = parent(op["path"], fds)
    if dfd is None:
        return {"status": "absent", "detail": missing}
    fd = open_child(dfd, name, op["path"], False, fds)
    if fd is None:
        return {"status": "absent"}
    entries = []
    for entry in sorted(os.listdir(fd)):
        st = lstat(fd, entry)
        if st is None:
            continue
        kind = "dir" if stat.S_ISDIR(st.st_mode) else ("file" if stat.S_ISREG(st.st_mode) else "other")
        entries.append({"name": entry, "size": st.st_size, "mtime": st.st_mtime, "kind": kind})
    return {"status": "present", "entries": entries}


def boot_time():
    with open("/proc/stat") as handle:
        for line in handle:
            if line.startswith("btime "):
                return int(line.split()[1])
    return None


def op_processes(op, fds):
    wanted = op["paths"]
    mains = set(op["main_classes"])
    found = {p: [] for p in wanted}
    btime = boot_time()
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                args = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        for i, arg in enumerate(args):
            if arg in mains and i + 1 < len(args) and args[i + 1] in found:
                started = None if btime is None else btime + int(fields[19]) / float(ticks)
                found[args[i + 1]].append({"pid": int(pid), "started": started})
    return {"status": "present", "processes": found}


def op_write(op, fds, dry_run):
    dfd, name, missing = parent(op["path"], fds, create=not dry_run and bool(op.get("create_dirs")))
    new = base64.b64decode(op["content_b64"])
    new_sha = hashlib.sha256(new).hexdigest()
    expected = op.get("expected_sha256")
    if dfd is None:
        if expected is not None:
            raise Refused("%s: %s" % (op["path"], missing))
        return {"status": "would_write", "detail": "directories created first: " + missing}
    current = whole_sha(dfd, name)
    if current == new_sha:
        return {"status": "already", "sha256": current}
    if current != expected:
        return {"status": "changed", "sha256": current,
                "detail": "holds sha256 %s, the plan read %s" % (current, expected)}
    keep = op.get("keep_as")
    if current is not None:
        if not keep or "/" in keep or keep in (".", ".."):
            raise Refused("keep_as must be a plain file name beside %s" % name)
        kept = whole_sha(dfd, keep)
        if kept is not None and kept != current:
            raise Refused("%s already holds another file" % keep)
    if dry_run:
        return {"status": "would_write", "sha256": current}
    st = lstat(dfd, name)
    mode = (st.st_mode & 0o7777) if st is not None else int(op.get("mode") or 0o644)
    temp = ".%s.kafka-zk-new-%d" % (name, os.getpid())
    try:
        os.unlink(temp, dir_fd=dfd)
    except FileNotFoundError:
        pass
    fd = os.open(temp, O_NEW, mode, dir_fd=dfd)
    try:
        view = memoryview(new)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        os.fsync(fd)
    finally:
        os.close(fd)
    if current is not None and lstat(dfd, keep) is None:
        os.link(name, keep, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    if whole_sha(dfd, name) != expected:
        os.unlink(temp, dir_fd=dfd)
        return {"status": "changed", "detail": "changed while being replaced"}
    os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    os.fsync(dfd)
    return {"status": "written", "sha256": new_sha, "kept_as": keep if current is not None else None}


def op_rename(op, fds, dry_run):
    dfd, name, missing = parent(op["path"], fds)
    target = op["to"]
    if "/" in target or target in (".", ".."):
        raise Refused("the new name must be a plain name beside %s" % name)
    if dfd is None:
        return {"status": "absent", "detail": missing}
    source, dest = lstat(dfd, name), lstat(dfd, target)
    if source is None:
        return {"status": "already" if dest is not None else "absent"}
    if stat.S_ISLNK(source.st_mode):
        raise Refused("%s is a symlink" % op["path"])
    if dest is not None:
        raise Refused("%s already exists beside %s" % (target, name))
    if dry_run:
        return {"status": "would_rename"}
    os.rename(name, target, src_dir_fd=dfd, dst_dir_fd=dfd)
    os.fsync(dfd)
    return {"status": "renamed"}


def main():
    req = read_request(on_limit, 120)
    if req is None:
        return 2
    dry_run = bool(req.get("dry_run", True))
    for i, op in enumerate(req.get("ops") or []):
        fds = []
        try:
            kind = op.get("op")
            if kind == "read":
                out = op_read(op, fds)
            elif kind == "list":
                out = op_list(op, fds)
            elif kind == "processes":
                out = op_processes(op, fds)
            elif kind == "write":
                out = op_write(op, fds, dry_run)
            elif kind == "rename":
                out = op_rename(op, fds, dry_run)
            else:
                out = {"status": "refused", "detail": "unknown op %r" % kind}
        except Refused as exc:
            out = {"status": "refused", "detail": str(exc)}
        except OSError as exc:
            out = {"status": "failed", "detail": "%s: %s" % (type(exc).__name__, exc)}
        finally:
            close_all(fds)
        out.update({"t": "op", "i": i, "op": op.get("op"), "path": op.get("path")})
        emit(out)
    signal.alarm(0)
    emit({"t": "end"})
    return 0


sys.exit(main())
"""
)

MUTATING_OPS = ("write", "rename")


class NodeHostError(BrokerHostCommandError):
    """A host operation of the migration was refused or failed; names node, host and path."""


@dataclass(frozen=True)
class FileRead:
    """A file as read on a node's host (``content``: the bytes read, the tail when asked)."""

    path: str
    status: str  # present | absent | refused | failed
    content: bytes | None = None
    sha256: str | None = None
    size: int | None = None
    mtime: float | None = None
    detail: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.content is None else self.content.decode("latin-1")


def _limit(timeout: float) -> int:
    value = float(timeout)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return max(1, math.ceil(value))


class _KeptOpen:
    """An SSH client the commands of one task share: ``close()`` by a command leaves it open."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def close(self) -> None:
        return None


class ReusingHostHook:
    """A :class:`BrokerHostHook` whose connection to each host is opened once and reused by every
    command of the task (strict host keys checked at that one connect); :meth:`close` ends them. A
    connection that broke is opened again at the next command."""

    def __init__(self, hook: BrokerHostHook) -> None:
        self._hook = hook
        self._clients: dict[tuple[str, int], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hook, name)

    def connect(self, address: BrokerAddress) -> Any:
        key = (address.host, address.port)
        client = self._clients.get(key)
        transport = client.get_transport() if client is not None else None
        if transport is None or not transport.is_active():
            if client is not None:
                client.close()
            client = self._hook.connect(address)
            self._clients[key] = client
        return _KeptOpen(client)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


class NodeHosts:
    """The migration's operations on node hosts through one :class:`BrokerHostHook`, one SSH
    connection per host for the whole task (:class:`ReusingHostHook`).

    :param hook: the cluster's broker host hook; controllers are reached through it too (their node
        ids, distinct from broker ids, map to their hosts in ``broker_hosts``).
    :param session: the maintenance session (its ``require_broker`` gate guards every change).
    """

    def __init__(
        self,
        hook: BrokerHostHook | ReusingHostHook,
        session: BrokerGate | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.hook = hook if isinstance(hook, ReusingHostHook) else ReusingHostHook(hook)
        self.session = session
        self.timeout = timeout

    def close(self) -> None:
        """End the task's SSH connections."""
        self.hook.close()

    def __enter__(self) -> NodeHosts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def address(self, node_id: int) -> BrokerAddress:
        return self.hook.resolve(node_id)

    def run(
        self, node_id: int, ops: Sequence[Mapping[str, Any]], *, dry_run: bool = True
    ) -> list[dict[str, Any]]:
        """Send ``ops`` to ``node_id``'s host in one SSH command; one result per op, in order.

        :raises PermissionError: a write or rename without a session that pinned the node's host.
        """
        address = self.address(node_id)
        if not dry_run and any(op.get("op") in MUTATING_OPS for op in ops):
            if self.session is None:
                raise PermissionError(
                    f"refusing to change node {node_id}'s files outside a maintenance session"
                )
            self.session.require_broker(node_id, address.host)
        limit_s = _limit(self.timeout)
        request = {"limit_s": limit_s, "dry_run": bool(dry_run), "ops": [dict(op) for op in ops]}
        records = run_remote(
            self.hook, address, request, limit_s, script=_REMOTE, what="migration host", done_status="written"
        )
        results = sorted((r for r in records if r.get("t") == "op"), key=lambda r: r.get("i", -1))
        if [r.get("i") for r in results] != list(range(len(ops))):
            raise NodeHostError(
                node_id, address.host, address.port, f"answered {len(results)} of {len(ops)} operations"
            )
        return results

    # -- reads ----------------------------------------------------------------------------------

    def read_with_processes(
        self, node_id: int, paths: Sequence[str], process_paths: Sequence[str], listings: Sequence[str] = ()
    ) -> tuple[list[FileRead], dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]] | None]]:
        """Files, the Kafka processes of ``process_paths`` and directory listings, in one SSH command."""
        ops: list[dict[str, Any]] = [{"op": "read", "path": p, "max_bytes": READ_LIMIT} for p in paths]
        ops.append(
            {"op": "processes", "paths": list(process_paths), "main_classes": list(KAFKA_MAIN_CLASSES)}
        )
        ops += [{"op": "list", "path": p} for p in listings]
        results = self.run(node_id, ops)
        reads = [_file_read(p, r) for p, r in zip(paths, results, strict=False)]
        processes = {k: list(v) for k, v in (results[len(paths)].get("processes") or {}).items()}
        listed: dict[str, list[dict[str, Any]] | None] = {}
        for p, r in zip(listings, results[len(paths) + 1 :], strict=True):
            listed[p] = list(r["entries"]) if r["status"] == "present" else None
        return reads, processes, listed

    def read_files(
        self, node_id: int, paths: Sequence[str], *, max_bytes: int = READ_LIMIT, tail: bool = False
    ) -> list[FileRead]:
        results = self.run(
            node_id, [{"op": "read", "path": p, "max_bytes": max_bytes, "tail": tail} for p in paths]
        )
        return [_file_read(p, r) for p, r in zip(paths, results, strict=True)]

    def list_dir(self, node_id: int, path: str) -> list[dict[str, Any]] | None:
        (result,) = self.run(node_id, [{"op": "list", "path": path}])
        if result["status"] == "absent":
            return None
        if result["status"] != "present":
            address = self.address(node_id)
            raise NodeHostError(node_id, address.host, address.port, f"{path}: {result.get('detail')}")
        return list(result["entries"])

    def processes(self, node_id: int, paths: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """Kafka processes started with each of ``paths`` (pid, start time in epoch seconds)."""
        (result,) = self.run(
            node_id, [{"op": "processes", "paths": list(paths), "main_classes": list(KAFKA_MAIN_CLASSES)}]
        )
        return {p: list(v) for p, v in (result.get("processes") or {}).items()}

    # -- changes --------------------------------------------------------------------------------

    def write_config(
        self,
        node_id: int,
        path: str,
        content: bytes,
        *,
        expected_sha256: str | None,
        keep_as: str,
        dry_run: bool,
        create_dirs: bool = False,
    ) -> dict[str, Any]:
        """Write one config file atomically (see the module doc); its result record."""
        op = {
            "op": "write",
            "path": path,
            "content_b64": base64.b64encode(content).decode(),
            "expected_sha256": expected_sha256,
            "keep_as": keep_as.rsplit("/", 1)[-1],
            "create_dirs": create_dirs,
        }
        (result,) = self.run(node_id, [op], dry_run=dry_run)
        if result["status"] in ("refused", "failed"):
            address = self.address(node_id)
            raise NodeHostError(
                node_id, address.host, address.port, f"{path}: {result['status']}: {result.get('detail')}"
            )
        return result

    def rename_aside(self, node_id: int, path: str, to_name: str, *, dry_run: bool) -> dict[str, Any]:
        (result,) = self.run(node_id, [{"op": "rename", "path": path, "to": to_name}], dry_run=dry_run)
        if result["status"] in ("refused", "failed"):
            address = self.address(node_id)
            raise NodeHostError(
                node_id, address.host, address.port, f"{path}: {result['status']}: {result.get('detail')}"
            )
        return result


def _file_read(path: str, record: Mapping[str, Any]) -> FileRead:
    content = (
        base64.b64decode(record["content_b64"])
        if record.get("content_b64")
        else (b"" if record.get("status") == "present" else None)
    )
    return FileRead(
        path,
        str(record.get("status")),
        content,
        record.get("sha256"),
        record.get("size"),
        record.get("mtime"),
        record.get("detail"),
    )


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("latin-1")).hexdigest()
