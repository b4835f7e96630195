"""Move leftover partition directories into a quarantine directory on the same broker host.

Never a delete: each directory is renamed into ``<quarantine>/<ts>/<name>`` on the *same
filesystem* (device numbers of the open source and destination directories compared on the host,
so the move is an atomic rename and cannot half-copy), and a listing file beside them says what
came from where. The default quarantine is ``<log dir>/../kafka-quarantine`` -- outside the log
dir, where Kafka would take any directory for a partition and refuse to start on it.

One SSH command per broker host through :class:`BrokerHostHook` (strict host keys): a constant
``sh -c`` line built with ``shlex.quote``; the paths travel as JSON on stdin and never reach a shell.
A dry run performs every check on the host and moves nothing. Re-running is safe: a directory
already in the quarantine is reported ``already_moved``.

Guards, each enforced twice (here before connecting, raising :class:`QuarantinePathError`, and
again by the script on the host, answering ``refused``):

* paths: the log dir and the quarantine root are absolute and already normalised (no ``.``/``..``,
  no empty component, no trailing slash); the quarantine root lies outside every log dir of the
  broker and contains none; a directory name is one plain component.
* no symlink anywhere: every component of the log dir, the quarantine root, ``<ts>`` and the
  listing is checked with ``lstat`` and opened ``O_NOFOLLOW|O_DIRECTORY`` relative to its parent's
  file descriptor; the move is ``rename(name, name, src_dir_fd, dst_dir_fd)`` between those
  descriptors, so a symlink swapped in after the check is not followed either. Missing quarantine
  directories are created one component at a time (``mkdir(name, 0o750, dir_fd=parent)``).
* same filesystem: ``st_dev`` of the source and destination directory descriptors must match.
* listings are created ``O_CREAT|O_EXCL|O_NOFOLLOW`` (never followed, never overwritten): a retry
  writes ``quarantine-listing.<n>.json``, the next free name.
* a hard time limit on the host (``signal.alarm`` and ``RLIMIT_CPU`` from the request): the script
  prints ``{"t": "fatal", "kind": "timeout"}`` and exits, and this side raises
  :class:`BrokerHostTimeoutError`; the read loop here enforces the limit too and closes the channel.
* an orphan live-named directory (``normal``/``future``: one a running broker may hold open) moves
  only when the broker is not running: the caller says so (``broker_running=False``) and the host
  shows no process of *this* broker in ``/proc`` -- a Kafka process started with this broker's
  server.properties or whose log dirs include one of this broker's (a process whose configuration
  cannot be read counts as possibly this broker's; another cluster's broker on the host does not);
  ``allow_running_broker_orphans=True`` overrides.
  ``-delete`` (and ``-stray``) directories, which Kafka closed before renaming, may move under a
  running broker.

What other host scripts share with this one lives here, written once: the path rules (``_RULES``,
also exec'd on this side by :func:`load_rules`), the host-side helpers (``_HOST_COMMON``: output,
refusals, directories opened one checked component at a time, the time limit), the command
(:func:`remote_command`) and the read loop (:func:`run_remote`); ``broker_partition_files.py``
builds its scripts on them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_kafka_zk.hooks.broker_host import (
    BrokerAddress,
    BrokerHostCommandError,
    BrokerHostHook,
    BrokerHostTimeoutError,
    RemotePythonMissingError,
)
from airflow_provider_kafka_zk.kafka.inventory import DEFAULT_LOG_DIR, KAFKA_MAIN_CLASSES

log = logging.getLogger(__name__)

LISTING_FILE = "quarantine-listing.json"
QUARANTINE_DIR_NAME = "kafka-quarantine"
KINDS = ("delete", "normal", "future", "stray")
# Kinds a running broker has closed before renaming (LogManager closes -delete and -stray logs).
KINDS_SAFE_UNDER_RUNNING_BROKER = ("delete", "stray")
# In the script's text, hence in /proc/<pid>/cmdline of the remote python3 while it runs.
SCRIPT_MARKER = "kafka-zk-quarantine-remote"
DEFAULT_TIMEOUT_S = 300.0
_GRACE_S = 10.0  # the host's own alarm fires first; this side gives up this much later
_STDERR_KEEP = 16 << 10

# The path rules, written once: the host script runs them, and this module execs the same text for
# the Airflow-side check (Python 3.6+ stdlib only, needs ``os``).
_RULES = r"""
def path_rule(path):
    if not isinstance(path, str) or not path:
        return "must be a non-empty string"
    if "\0" in path:
        return "must not contain a NUL byte"
    if not path.startswith("/"):
        return "must be absolute"
    if path != "/" and path.endswith("/"):
        return "must not end with a slash"
    if "//" in path:
        return "must not contain an empty component"
    if any(c in (".", "..") for c in path.split("/")):
        return "must not contain . or .. components"
    if os.path.normpath(path) != path:
        return "must be normalised"
    return None


def name_rule(name):
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
        return "must be one plain path component"
    return None


def within(child, parent):
    return parent == "/" or child == parent or child.startswith(parent + "/")
"""

# What every host script shares, written once (Python 3.6+ stdlib only): its output, its refusals,
# the path rules, directories opened one checked component at a time, and the time limit. The
# partition-file scripts (broker_partition_files.py) are built from the same text.
_HOST_COMMON = (
    r"""
import errno, json, os, signal, stat, sys, time

STATE = {"fatal": False, "orphaned": False, "limit": 60}
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def emit(rec):
    if STATE["orphaned"]:
        return
    try:
        sys.stdout.write(json.dumps(rec, sort_keys=True) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        STATE["orphaned"] = True  # the reader is gone: nothing more is changed


class Refused(Exception):
    pass


"""
    + _RULES
    + r"""

def join(parent, name):
    return parent.rstrip("/") + "/" + name


def close_all(fds):
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def open_child(parent_fd, name, shown, create, fds):
    # lstat first (a clear refusal), then O_NOFOLLOW|O_DIRECTORY (a swap after the lstat is not
    # followed either), then the opened inode must be the lstat'ed one.
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.mkdir(name, 0o750, dir_fd=parent_fd)
        except FileExistsError:
            pass
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise Refused("%s is a symlink" % shown)
    if not stat.S_ISDIR(st.st_mode):
        raise Refused("%s is not a directory" % shown)
    try:
        fd = os.open(name, O_DIR, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused("%s was replaced by a symlink or a non-directory" % shown)
        raise
    fds.append(fd)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        raise Refused("%s changed while it was being opened" % shown)
    return fd


def open_path(path, fds):
    # (fd of the deepest existing directory, its path, components still missing); each checked.
    fd = os.open("/", O_DIR)
    fds.append(fd)
    shown = ""
    components = [c for c in path.split("/") if c]
    for i, component in enumerate(components):
        child = open_child(fd, component, shown + "/" + component, False, fds)
        if child is None:
            return fd, shown or "/", components[i:]
        fd, shown = child, shown + "/" + component
    return fd, shown or "/", []


def read_request(on_limit, default_limit, cpu_limit=True):
    # The JSON request on stdin (under a first alarm of 60 s), then the request's own limit_s:
    # signal.alarm and, unless cpu_limit is False, RLIMIT_CPU (children inherit it: a script that
    # starts other programs passes False). None, after a bad_request record, when it is unusable.
    signal.signal(signal.SIGALRM, on_limit)
    signal.alarm(60)  # until the request names the limit
    try:
        req = json.loads(sys.stdin.read())
        limit = int(req.get("limit_s") or default_limit)
        if limit < 1:
            raise ValueError("limit_s must be at least 1")
    except (ValueError, TypeError, AttributeError) as exc:
        emit({"t": "fatal", "kind": "bad_request", "detail": "%s: %s" % (type(exc).__name__, exc)})
        return None
    STATE["limit"] = limit
    signal.alarm(limit)
    if not cpu_limit:
        return req
    if hasattr(signal, "SIGXCPU"):
        signal.signal(signal.SIGXCPU, on_limit)
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        new_soft, new_hard = limit + 1, limit + 3
        if hard != resource.RLIM_INFINITY:
            new_soft, new_hard = min(new_soft, hard), min(new_hard, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (new_soft, new_hard))
    except (ImportError, ValueError, OSError):
        pass
    return req
"""
)

# Python 3.6+ stdlib only. Reads one JSON request from stdin:
#   {"dry_run", "ts", "limit_s", "log_dirs", "broker_running", "allow_running_broker_orphans",
#    "main_classes", "moves": [{"log_dir", "name", "quarantine", "kind"}],
#    "_test_sleep_s" (tests only: sleep that long before the first move)}
# and writes one JSON line per move, one per listing, then {"t": "end"}; or {"t": "fatal", ...}.
_REMOTE = (
    r"""
# kafka-zk-quarantine-remote: moves leftover Kafka partition directories into a quarantine.
"""
    + _HOST_COMMON
    + r"""
import re

STATE["groups"] = {}
O_LISTING = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
LISTING = "quarantine-listing.json"
SUFFIXED = [(k, re.compile(r"\S+-\S+\.\S+-" + k + r"\Z", re.ASCII)) for k in ("delete", "future", "stray")]
SAFE_KINDS = ("delete", "stray")


def kind_of(name):
    for kind, pattern in SUFFIXED:
        if pattern.match(name):
            return kind
    return "normal"


def create_path(fd, shown, missing, fds):
    # mkdir(name, 0o750, dir_fd=parent) one component at a time, each opened as it is checked
    for component in missing:
        shown = join(shown, component)
        fd = open_child(fd, component, shown, True, fds)
    return fd


def tree(dir_fd):
    size, names = 0, []
    for top, _, files, top_fd in os.fwalk(".", dir_fd=dir_fd):  # never follows symlinks
        for f in files:
            try:
                size += os.stat(f, dir_fd=top_fd, follow_symlinks=False).st_size
            except OSError:
                pass
            names.append(os.path.normpath(os.path.join(top, f)))
    return size, sorted(names)


def listing_symlinks(ts_fd, shown):
    for entry in os.listdir(ts_fd):
        if entry.startswith("quarantine-listing"):
            st = os.stat(entry, dir_fd=ts_fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                raise Refused("%s is a symlink or not a regular file" % join(shown, entry))


def process_config(pid, args, main):
    # (path of the properties file the process was started with, log dirs from its --override
    # arguments or None); the path is resolved against the process's cwd, as the JVM resolved it
    if main + 1 >= len(args):
        return None, None
    raw = args[main + 1]
    if not raw.startswith(b"/"):
        try:
            raw = os.path.join(os.readlink("/proc/%s/cwd" % pid).encode("utf-8", "surrogateescape"), raw)
        except OSError:
            return None, None
    dirs = None
    rest = args[main + 2:]
    for i, arg in enumerate(rest):
        value = rest[i + 1] if arg == b"--override" and i + 1 < len(rest) else None
        if value is not None and value.split(b"=", 1)[0].strip() in (b"log.dirs", b"log.dir"):
            dirs = value.split(b"=", 1)[1]
    return raw, dirs


def config_log_dirs(path, overridden, default):
    # the log dirs a broker started with that properties file uses (log.dirs, else log.dir, else
    # Kafka's default, from the request); None when the file cannot be read
    text = overridden
    if text is None:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        except OSError:
            return None
        found = {}
        for line in data.splitlines():
            line = line.strip()
            if not line or line[:1] in (b"#", b"!"):
                continue
            key, sep, value = line.partition(b"=")
            if not sep:
                key, sep, value = line.partition(b":")
            found[key.strip()] = value.strip()
        text = found.get(b"log.dirs", found.get(b"log.dir", default.encode()))
    return [d.strip() for d in text.split(b",") if d.strip()]


def broker_processes(main_classes, log_dirs, server_properties, default_log_dir):
    # (this broker's pids, pids that cannot be told apart, None), or (None, None, why it cannot
    # tell). A Kafka process is this broker's when it was started with this broker's
    # server.properties, or its log dirs include one of this broker's; unrelated brokers on the
    # host (another cluster's, a test's) are left out. Exact argv match, as the inventory does.
    me = os.getpid()
    wanted = set(c.encode() for c in main_classes)
    mine = set(os.path.realpath(d.encode()) for d in log_dirs or ())
    configured = os.path.realpath(server_properties.encode()) if server_properties else None
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError as exc:
        return None, None, "cannot list /proc (%s)" % exc
    if "1" not in pids:
        return None, None, "/proc hides other users' processes"
    ours, unknown = [], []
    for pid in pids:
        if int(pid) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ESRCH):
                continue  # exited meanwhile
            return None, None, "cannot read /proc/%s/cmdline (%s)" % (pid, exc)
        if args and args[-1] == b"":
            args.pop()
        positions = [i for i, a in enumerate(args) if a in wanted]
        if not positions:
            continue
        path, overridden = process_config(pid, args, positions[0])
        if path is None:
            unknown.append((int(pid), "no properties file on its command line"))
            continue
        if configured is not None and os.path.realpath(path) == configured:
            ours.append(int(pid))
            continue
        dirs = config_log_dirs(path, overridden, default_log_dir)
        if dirs is None:
            unknown.append((int(pid), "%s cannot be read" % path.decode("utf-8", "replace")))
        elif mine.intersection(os.path.realpath(d) for d in dirs):
            ours.append(int(pid))
    return ours, unknown, None


LIVENESS = {}


def running_broker_refusal(req):
    # None when an orphan live-named directory may move; else why not.
    if "why" not in LIVENESS:
        why = []
        caller = req.get("broker_running")
        if caller is True:
            why.append("the caller says the broker is running")
        elif caller is not False:
            why.append("the caller cannot tell whether the broker is running")
        ours, unknown, cannot = broker_processes(
            req.get("main_classes") or ["kafka" + ".Kafka"],
            req.get("log_dirs"),
            req.get("server_properties"),
            req.get("default_log_dir") or "",
        )
        if cannot:
            why.append("cannot tell whether a Kafka broker runs on this host: " + cannot)
        else:
            if ours:
                why.append("this broker's Kafka process runs on this host (pid %s)" % ", ".join(map(str, ours)))
            if unknown:
                why.append("a Kafka process on this host may be this broker's (%s)" % "; ".join(
                    "pid %d: %s" % u for u in unknown))
        LIVENESS["why"] = "; ".join(why) or None
    return LIVENESS["why"]


def write_listing(group):
    data = (json.dumps(group["entries"], indent=1, sort_keys=True) + "\n").encode()
    for n in range(1000):
        name = LISTING if n == 0 else "quarantine-listing.%d.json" % n
        try:
            fd = os.open(name, O_LISTING, 0o640, dir_fd=group["fd"])
        except FileExistsError:
            continue  # never overwrite, never follow: the next free name
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.fsync(group["fd"])
        return join(group["path"], name)
    raise OSError("no free listing name in %s" % group["path"])


def flush_listings():
    for key in sorted(STATE["groups"]):
        group = STATE["groups"][key]
        if group["written"] or not group["entries"]:
            continue
        group["written"] = True
        rec = {"t": "listing", "ts": group["ts"], "entries": sorted(e["name"] for e in group["entries"])}
        try:
            rec["path"] = write_listing(group)
        except OSError as exc:
            rec.update(path=join(group["path"], LISTING), error="%s: %s" % (type(exc).__name__, exc))
        emit(rec)


def on_limit(signum, frame):
    if STATE["fatal"]:
        os._exit(124)
    STATE["fatal"] = True
    signal.alarm(5)  # the last listings must not hang either
    try:
        flush_listings()  # what already moved stays documented
    except BaseException:
        pass
    emit({"t": "fatal", "kind": "timeout", "limit_s": STATE["limit"], "signal": signum,
          "detail": "the quarantine script ran past its limit of %ss and stopped" % STATE["limit"]})
    os._exit(124)


def group_for(ts_fd, ddir, ts):
    group = STATE["groups"].get(ddir)
    if group is None:
        group = STATE["groups"][ddir] = {"fd": os.dup(ts_fd), "path": ddir, "ts": ts, "entries": [],
                                         "written": False}
    return group


def quarantine_root(req, log_dir, m):
    if m.get("quarantine"):
        return m["quarantine"]
    return join(os.path.dirname(log_dir), "kafka-quarantine")


def check_move(req, m, log_dirs):
    # (rec, None) when the request is acceptable, else (rec, why refused); no I/O.
    name, log_dir = m.get("name"), m.get("log_dir")
    rec = {"t": "move", "name": name, "log_dir": log_dir}
    why = name_rule(name)
    if why:
        return rec, "directory name %r %s" % (name, why)
    why = path_rule(log_dir)
    if why:
        return rec, "log dir %r %s" % (log_dir, why)
    if log_dir not in log_dirs:
        return rec, "log dir %s is not one of the broker's log dirs" % log_dir
    kind = kind_of(name)
    rec["kind"] = kind
    if m.get("kind") is not None and m.get("kind") != kind:
        return rec, "the name says kind %s, the caller said %s" % (kind, m.get("kind"))
    root = quarantine_root(req, log_dir, m)
    rec["quarantine"] = root
    why = path_rule(root)
    if why:
        return rec, "quarantine %r %s" % (root, why)
    for other in log_dirs:
        if within(root, other):
            return rec, "quarantine %s lies inside log dir %s" % (root, other)
        if within(other, root):
            return rec, "quarantine %s contains log dir %s" % (root, other)
    ddir = join(root, req["ts"])
    rec.update(source=join(log_dir, name), destination=join(ddir, name))
    return rec, None


def move_one(req, m, log_dirs):
    rec, why = check_move(req, m, log_dirs)
    if why:
        rec.update(status="refused", detail=why)
        return rec
    name, log_dir, ts = rec["name"], rec["log_dir"], req["ts"]
    root = rec["quarantine"]
    ddir = join(root, ts)
    fds = []
    try:
        log_fd, _, missing = open_path(log_dir, fds)
        src_st = None
        if not missing:
            try:
                src_st = os.stat(name, dir_fd=log_fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
        if src_st is None:
            root_fd, _, missing = open_path(root, fds)
            ts_fd = None if missing else open_child(root_fd, ts, ddir, False, fds)
            dst_fd = None if ts_fd is None else open_child(ts_fd, name, rec["destination"], False, fds)
            if dst_fd is None:
                rec.update(status="gone", detail="no longer on disk")
                return rec
            size, files = tree(dst_fd)
            rec.update(status="already_moved", detail="found in the quarantine", bytes=size, files=len(files))
            if not req["dry_run"]:
                group_for(ts_fd, ddir, ts)["entries"].append(
                    dict(rec, file_names=files, moved_at=None, moved_at_ms=None))
            return rec
        if stat.S_ISLNK(src_st.st_mode) or not stat.S_ISDIR(src_st.st_mode):
            rec.update(status="refused", detail="not a directory (or a symlink)")
            return rec
        if rec["kind"] not in SAFE_KINDS and not req.get("allow_running_broker_orphans"):
            why = running_broker_refusal(req)
            if why:
                rec.update(status="refused", detail="%s: a live-named (%s) directory may still be open "
                           "in the broker; stop the broker first, or pass allow_running_broker_orphans"
                           % (why, rec["kind"]))
                return rec
        src_fd = open_child(log_fd, name, rec["source"], False, fds)
        if src_fd is None:
            rec.update(status="gone", detail="no longer on disk")
            return rec
        src_dev = os.fstat(src_fd).st_dev
        if src_dev != os.fstat(log_fd).st_dev:
            rec.update(status="refused", detail="the directory is a mount point: a move would copy")
            return rec
        # Everything is checked against what exists before anything is created.
        root_fd, root_shown, missing = open_path(root, fds)
        ts_fd = None if missing else open_child(root_fd, ts, ddir, False, fds)
        dest_fd = root_fd if ts_fd is None else ts_fd
        if os.fstat(dest_fd).st_dev != src_dev:
            rec.update(status="refused", detail="the quarantine is on another filesystem: a move would copy")
            return rec
        if ts_fd is not None:
            listing_symlinks(ts_fd, ddir)
            try:
                os.stat(name, dir_fd=ts_fd, follow_symlinks=False)
                rec.update(status="refused", detail="the destination already exists")
                return rec
            except FileNotFoundError:
                pass
        size, files = tree(src_fd)
        rec.update(bytes=size, files=len(files))
        if req["dry_run"]:
            rec.update(status="would_move")
            return rec
        if STATE["orphaned"]:
            rec.update(status="refused", detail="the caller went away")
            return rec
        if ts_fd is None:
            ts_fd = create_path(root_fd, root_shown, missing + [ts], fds)
            if os.fstat(ts_fd).st_dev != src_dev:
                rec.update(status="refused", detail="the quarantine is on another filesystem: a move would copy")
                return rec
        now = os.stat(name, dir_fd=log_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (src_st.st_dev, src_st.st_ino) or stat.S_ISLNK(now.st_mode):
            rec.update(status="refused", detail="the directory changed while it was checked")
            return rec
        # Between descriptors: a symlink swapped into either path since the checks is not followed.
        # (rename(2) could still replace an *empty* directory created at the destination meanwhile.)
        os.rename(name, name, src_dir_fd=log_fd, dst_dir_fd=ts_fd)
        moved_at = time.time()
        for fd in (log_fd, ts_fd):
            try:
                os.fsync(fd)
            except OSError:
                pass
        rec.update(status="moved", moved_at_ms=int(moved_at * 1000),
                   moved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moved_at)))
        group_for(ts_fd, ddir, ts)["entries"].append(dict(rec, file_names=files))
        return rec
    except Refused as exc:
        rec.update(status="refused", detail=str(exc))
        return rec
    except OSError as exc:
        rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
        return rec
    finally:
        close_all(fds)


def restore_one(req, m, log_dirs):
    # The reverse of move_one: <quarantine>/<ts>/<name> back to <log_dir>/<name>, one rename on the
    # same filesystem; never over something at the original place, never through a symlink.
    rec, why = check_move(req, m, log_dirs)
    rec["t"] = "restore"
    if why:
        rec.update(status="refused", detail=why)
        return rec
    name, log_dir, ts = rec["name"], rec["log_dir"], req["ts"]
    root = rec["quarantine"]
    ddir = join(root, ts)
    fds = []
    try:
        log_fd, _, missing = open_path(log_dir, fds)
        if missing:
            rec.update(status="refused", detail="log dir %s does not exist" % log_dir)
            return rec
        root_fd, _, missing = open_path(root, fds)
        ts_fd = None if missing else open_child(root_fd, ts, ddir, False, fds)
        try:
            at_source = os.stat(name, dir_fd=log_fd, follow_symlinks=False)
        except FileNotFoundError:
            at_source = None
        quarantined = None
        if ts_fd is not None:
            try:
                quarantined = os.stat(name, dir_fd=ts_fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
        if quarantined is None:
            if at_source is not None and stat.S_ISDIR(at_source.st_mode) and not stat.S_ISLNK(at_source.st_mode):
                rec.update(status="already_restored", detail="back in its log dir, not in the quarantine")
            else:
                rec.update(status="missing", detail="not in the quarantine (%s) and not at its place"
                           % rec["destination"])
            return rec
        if stat.S_ISLNK(quarantined.st_mode) or not stat.S_ISDIR(quarantined.st_mode):
            rec.update(status="refused", detail="%s is not a directory (or a symlink)" % rec["destination"])
            return rec
        if at_source is not None:
            rec.update(status="occupied", detail="%s exists (%s) while the quarantined copy is still in %s"
                       % (rec["source"], "a directory" if stat.S_ISDIR(at_source.st_mode) else "not a directory",
                          ddir))
            return rec
        if rec["kind"] not in SAFE_KINDS and not req.get("allow_running_broker_orphans"):
            why = running_broker_refusal(req)
            if why:
                rec.update(status="refused", detail="%s: a running broker asked to host this partition would take "
                           "a live-named (%s) directory for its log; stop the broker first, or pass "
                           "allow_running_broker_orphans" % (why, rec["kind"]))
                return rec
        q_fd = open_child(ts_fd, name, rec["destination"], False, fds)
        if q_fd is None:
            rec.update(status="missing", detail="left the quarantine while it was checked")
            return rec
        if os.fstat(q_fd).st_dev != os.fstat(log_fd).st_dev or os.fstat(ts_fd).st_dev != os.fstat(log_fd).st_dev:
            rec.update(status="refused", detail="the quarantine is on another filesystem than the log dir: a move "
                       "would copy")
            return rec
        size, files = tree(q_fd)
        rec.update(bytes=size, files=len(files))
        if req["dry_run"]:
            rec.update(status="would_restore")
            return rec
        if STATE["orphaned"]:
            rec.update(status="refused", detail="the caller went away")
            return rec
        now = os.stat(name, dir_fd=ts_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (quarantined.st_dev, quarantined.st_ino) or stat.S_ISLNK(now.st_mode):
            rec.update(status="refused", detail="the quarantined directory changed while it was checked")
            return rec
        try:
            os.stat(name, dir_fd=log_fd, follow_symlinks=False)
            rec.update(status="occupied", detail="%s appeared while it was checked" % rec["source"])
            return rec
        except FileNotFoundError:
            pass
        # Between descriptors, as the quarantine's own move (rename(2) could still replace an *empty*
        # directory created at the original place in the microseconds since the check above).
        os.rename(name, name, src_dir_fd=ts_fd, dst_dir_fd=log_fd)
        restored_at = time.time()
        for fd in (log_fd, ts_fd):
            try:
                os.fsync(fd)
            except OSError:
                pass
        rec.update(status="restored", restored_at_ms=int(restored_at * 1000),
                   restored_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(restored_at)))
        return rec
    except Refused as exc:
        rec.update(status="refused", detail=str(exc))
        return rec
    except OSError as exc:
        rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
        return rec
    finally:
        close_all(fds)


def main():
    req = read_request(on_limit, 300)
    if req is None:
        return 2
    restoring = bool(req.get("restore"))
    ts = req.get("ts")
    moves = req.get("moves") or []
    request_why = name_rule(ts)
    request_why = "quarantine timestamp %r %s" % (ts, request_why) if request_why else None
    log_dirs = req.get("log_dirs")
    if not isinstance(log_dirs, list) or not log_dirs:
        # an older caller: at least every move's own log dir counts
        log_dirs = [m.get("log_dir") for m in moves if isinstance(m, dict)]
    for d in log_dirs:
        why = path_rule(d)
        if why and not request_why:
            request_why = "log dir %r %s" % (d, why)
    if req.get("_test_sleep_s"):
        time.sleep(float(req["_test_sleep_s"]))  # tests only: exercises the time limit
    for m in moves:
        if not isinstance(m, dict):
            m = {}
        if request_why:
            rec, _ = check_move({"ts": "-"}, m, [])
            rec.update(status="refused", detail=request_why)
            if restoring:
                rec["t"] = "restore"
        elif restoring:
            rec = restore_one(req, m, log_dirs)
        else:
            rec = move_one(req, m, log_dirs)
        emit(rec)
    flush_listings()
    signal.alarm(0)
    emit({"t": "end"})
    return 0


sys.exit(main())
"""
)


class QuarantinePathError(ValueError):
    """A path (or name) given for a quarantine move breaks a rule: raised before connecting."""

    def __init__(self, what: str, path: Any, rule: str) -> None:
        self.what = what
        self.path = path
        self.rule = rule
        super().__init__(f"{what} {path!r} refused: {rule}")


class BrokerGate(Protocol):
    """What a maintenance session proves before a broker host's files change (see maintenance/)."""

    def require_broker(self, broker_id: int, host: str) -> None:
        """Raise unless ``broker_id`` at ``host`` was pinned to this cluster by this session."""


class QuarantineOutsideSessionError(PermissionError):
    """A real move was attempted without a maintenance session (a programming error)."""


@dataclass(frozen=True)
class QuarantineMove:
    """One directory to move: ``<log_dir>/<name>`` into ``<quarantine or default>/<ts>/<name>``.

    ``kind`` is what the directory's name says (``LeftoverDirectory.kind``): delete, normal, future
    or stray; the host checks it against the name and refuses on a mismatch.
    """

    log_dir: str
    name: str
    quarantine: str | None = None
    kind: str = "normal"


def remote_command(interpreters: Sequence[str], script: str | None = None) -> str:
    """The one shell command: constant for a given interpreter list and script (no caller data).

    :param interpreters: the Python interpreters to try on the host, first found wins.
    :param script: the host script to exec (default: the quarantine's); the caller's data travels
        on stdin as JSON, never in this command.
    """
    source = _REMOTE if script is None else script
    candidates = " ".join(shlex.quote(p) for p in interpreters)
    inner = (
        f'for p in {candidates}; do if command -v "$p" >/dev/null 2>&1; then '
        f'exec "$p" -c {shlex.quote(source)}; fi; done; echo "no python3 on this host" >&2; exit 127'
    )
    return "sh -c " + shlex.quote(inner)


# ---------------------------------------------------------------------------------------------
# Validation on the Airflow side (the script repeats it on the host)
# ---------------------------------------------------------------------------------------------


def load_rules(text: str = _RULES, name: str = "<quarantine path rules>", **modules: Any) -> dict[str, Any]:
    """Exec host-side rule text (a constant of this provider) here, so both sides run the same rules.

    :param text: the rules' source (``_RULES``, or rules built on it).
    :param name: the name shown in tracebacks.
    :param modules: modules the text uses besides ``os`` (e.g. ``re=re``).
    """
    namespace: dict[str, Any] = {"os": os, **modules}
    exec(compile(text, name, "exec"), namespace)  # noqa: S102 - our own constant
    return namespace


_RULE_FUNCTIONS = load_rules()
path_rule = _RULE_FUNCTIONS["path_rule"]
"""Why ``path`` is not an absolute, already-normalised path; None when it is (the host's own rule)."""
_name_rule = _RULE_FUNCTIONS["name_rule"]
_within = _RULE_FUNCTIONS["within"]


def default_quarantine(log_dir: str) -> str:
    """``<log dir>/../kafka-quarantine``."""
    return os.path.dirname(log_dir).rstrip("/") + "/" + QUARANTINE_DIR_NAME


def validate_request(moves: Sequence[QuarantineMove], log_dirs: Sequence[str], ts: str) -> None:
    """Raise :class:`QuarantinePathError` for the first rule a move breaks; no I/O."""
    why = _name_rule(ts)
    if why:
        raise QuarantinePathError("quarantine timestamp", ts, why)
    if isinstance(log_dirs, str) or not log_dirs:
        raise QuarantinePathError("log_dirs", log_dirs, "must list every log dir of the broker")
    for log_dir in log_dirs:
        why = path_rule(log_dir)
        if why:
            raise QuarantinePathError("log dir", log_dir, why)
    for move in moves:
        why = _name_rule(move.name)
        if why:
            raise QuarantinePathError("directory name", move.name, why)
        why = path_rule(move.log_dir)
        if why:
            raise QuarantinePathError("log dir", move.log_dir, why)
        if move.log_dir not in log_dirs:
            raise QuarantinePathError("log dir", move.log_dir, "is not one of the broker's log dirs")
        if move.kind not in KINDS:
            raise QuarantinePathError("kind", move.kind, f"must be one of {list(KINDS)}")
        root = move.quarantine or default_quarantine(move.log_dir)
        why = path_rule(root)
        if why:
            raise QuarantinePathError("quarantine", root, why)
        for log_dir in log_dirs:
            if _within(root, log_dir):
                raise QuarantinePathError("quarantine", root, f"lies inside log dir {log_dir}")
            if _within(log_dir, root):
                raise QuarantinePathError("quarantine", root, f"contains log dir {log_dir}")


# ---------------------------------------------------------------------------------------------
# The call
# ---------------------------------------------------------------------------------------------


def quarantine_directories(
    hook: BrokerHostHook,
    broker_id: int,
    moves: Sequence[QuarantineMove],
    *,
    log_dirs: Sequence[str],
    ts: str,
    dry_run: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
    broker_running: bool | None = None,
    allow_running_broker_orphans: bool = False,
    session: BrokerGate | None = None,
    _test_sleep_s: float | None = None,
) -> dict[str, Any]:
    """Check (dry run) or carry out ``moves`` on broker ``broker_id``'s host; one SSH command.

    :param log_dirs: every log dir of the broker (the quarantine must lie outside all of them).
    :param timeout: hard limit (s) for the command, enforced on the host (alarm and CPU limit) and
        here; past it :class:`BrokerHostTimeoutError` is raised.
    :param broker_running: whether the broker is running (registered), None when unknown. Orphan
        live-named directories move only when this is False and the host shows no broker process.
    :param allow_running_broker_orphans: move those anyway (explicit opt-in).
    :param session: the maintenance session that pinned this broker host (required unless
        ``dry_run``): moves on a host whose ``meta.properties`` were not checked never happen.
    :param _test_sleep_s: tests only: the script sleeps this long before the first move.
    :raises QuarantinePathError: a path breaks a rule (before any connection).

    Returns ``{"broker_id", "host", "dry_run", "results": [...], "listings": [...]}``; each result
    has a ``status``: would_move, moved, already_moved, gone, refused or failed.
    """
    return _run_script(
        hook,
        broker_id,
        moves,
        log_dirs=log_dirs,
        ts=ts,
        dry_run=dry_run,
        timeout=timeout,
        broker_running=broker_running,
        allow_running_broker_orphans=allow_running_broker_orphans,
        session=session,
        restore=False,
        _test_sleep_s=_test_sleep_s,
    )


def restore_directories(
    hook: BrokerHostHook,
    broker_id: int,
    moves: Sequence[QuarantineMove],
    *,
    log_dirs: Sequence[str],
    ts: str,
    dry_run: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
    broker_running: bool | None = None,
    allow_running_broker_orphans: bool = False,
    session: BrokerGate | None = None,
) -> dict[str, Any]:
    """Check (dry run) or carry out putting quarantined directories back: each ``<quarantine>/<ts>/<name>``
    of ``moves`` (the moves :func:`quarantine_directories` made) renamed back to ``<log_dir>/<name>``.

    The same script, rules and guards as the quarantine (paths, no symlink anywhere, one rename on
    the same filesystem, a live-named directory only while the broker is not running unless
    ``allow_running_broker_orphans``, the time limit), plus: nothing goes back over something that
    is at the original place now. One SSH command.

    Returns ``{"broker_id", "host", "dry_run", "results": [...]}``; each result has a ``status``:
    would_restore, restored, already_restored (back in its log dir, not in the quarantine), occupied
    (something is at the original place), missing (in neither place), refused or failed.
    """
    found = _run_script(
        hook,
        broker_id,
        moves,
        log_dirs=log_dirs,
        ts=ts,
        dry_run=dry_run,
        timeout=timeout,
        broker_running=broker_running,
        allow_running_broker_orphans=allow_running_broker_orphans,
        session=session,
        restore=True,
    )
    found.pop("listings", None)
    return found


def _run_script(
    hook: BrokerHostHook,
    broker_id: int,
    moves: Sequence[QuarantineMove],
    *,
    log_dirs: Sequence[str],
    ts: str,
    dry_run: bool,
    timeout: float,
    broker_running: bool | None,
    allow_running_broker_orphans: bool,
    session: BrokerGate | None,
    restore: bool,
    _test_sleep_s: float | None = None,
) -> dict[str, Any]:
    validate_request(moves, log_dirs, ts)
    if broker_running is not None and not isinstance(broker_running, bool):
        raise TypeError(f"broker_running must be True, False or None, not {broker_running!r}")
    limit_s = max(1, math.ceil(float(timeout)))
    request: dict[str, Any] = {
        "dry_run": bool(dry_run),
        "restore": restore,
        "ts": ts,
        "limit_s": limit_s,
        "log_dirs": list(log_dirs),
        "broker_running": broker_running,
        "allow_running_broker_orphans": bool(allow_running_broker_orphans),
        "main_classes": list(KAFKA_MAIN_CLASSES),
        "default_log_dir": DEFAULT_LOG_DIR,
        "server_properties": hook.server_properties_path.replace("{broker_id}", str(broker_id))
        if hook.server_properties_path
        else None,
        "moves": [
            {"log_dir": m.log_dir, "name": m.name, "quarantine": m.quarantine, "kind": m.kind} for m in moves
        ],
    }
    if _test_sleep_s is not None:
        request["_test_sleep_s"] = float(_test_sleep_s)
    address = hook.resolve(broker_id)
    what = "restore" if restore else "move"
    if not dry_run:
        if session is None:
            raise QuarantineOutsideSessionError(
                f"refusing to {what} directories on broker {broker_id} ({address.host}) outside a maintenance "
                "session: the host's identity must be pinned first (MaintenanceSession.pin_broker)"
            )
        session.require_broker(broker_id, address.host)
    records = run_remote(
        hook,
        address,
        request,
        limit_s,
        what="quarantine restore" if restore else "quarantine",
        done_status="restored" if restore else "moved",
    )
    results = [{k: v for k, v in r.items() if k != "t"} for r in records if r.get("t") == what]
    listings = [{k: v for k, v in r.items() if k != "t"} for r in records if r.get("t") == "listing"]
    for result in results:
        log.info(
            "Broker %d (%s): %s %s -> %s%s",
            broker_id,
            address.host,
            result["status"],
            result.get("destination", result["name"]) if restore else result.get("source", result["name"]),
            result.get("source", "-") if restore else result.get("destination", "-"),
            f" ({result['detail']})" if result.get("detail") else "",
        )
    for listing in listings:
        if listing.get("error"):
            log.error(
                "Broker %d (%s): listing %s not written: %s",
                broker_id,
                address.host,
                listing["path"],
                listing["error"],
            )
    return {
        "broker_id": broker_id,
        "host": address.host,
        "dry_run": bool(dry_run),
        "results": results,
        "listings": listings,
    }


def run_remote(
    hook: BrokerHostHook,
    address: BrokerAddress,
    request: dict[str, Any],
    limit_s: int,
    *,
    script: str | None = None,
    what: str = "quarantine",
    done_status: str = "moved",
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Send ``request`` to the script on the host and return its records (``end`` included).

    The read loop enforces ``limit_s`` (plus a grace for the host's own alarm to report first)
    with channel timeouts, and always closes the channel and the connection.

    :param script: the host script (built on ``_HOST_COMMON``); default: the quarantine's.
    :param what: names the command in errors ("quarantine", "partition files", ...).
    :param done_status: the record status meaning "changed on the host" ("moved", "removed"):
        a timeout error lists those records, or says nothing was changed.
    :param on_record: called with each record as it arrives (progress in the task log).
    :raises BrokerHostTimeoutError: past the limit (``.records``: what arrived before it).
    :raises RemotePythonMissingError: no Python 3 on the host.
    :raises BrokerHostCommandError: the script refused the request, broke the protocol or failed.
    """
    broker_id = address.broker_id
    where = (broker_id, address.host, address.port)
    started = time.monotonic()
    deadline = started + limit_s + _GRACE_S
    records: list[dict[str, Any]] = []
    stderr = bytearray()
    buffer = b""
    status: int | None = None
    client = hook.connect(address)
    channel = None
    try:
        transport = client.get_transport()
        if transport is None:
            raise BrokerHostCommandError(*where, "SSH transport closed")
        channel = transport.open_session(timeout=max(1.0, min(30.0, float(limit_s))))
        channel.settimeout(max(1.0, float(limit_s)))
        # The one-argument form is the quarantine's own command (and what its tests substitute).
        if script is None:
            command = remote_command(hook.python_interpreters)
        else:
            command = remote_command(hook.python_interpreters, script)
        channel.exec_command(command)
        channel.sendall(json.dumps(request).encode())
        channel.shutdown_write()
        channel.settimeout(0.5)
        while True:
            while channel.recv_stderr_ready():
                stderr += channel.recv_stderr(1 << 16)
                del stderr[:-_STDERR_KEEP]
            if time.monotonic() > deadline:
                raise _timeout(
                    address,
                    limit_s,
                    records,
                    "no answer from the host in time; channel closed",
                    what,
                    done_status,
                )
            try:
                chunk = channel.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"{"):
                    records.append(_record(line, where, what))
                    if on_record is not None:
                        on_record(records[-1])
        while not channel.exit_status_ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        if channel.exit_status_ready():
            status = channel.recv_exit_status()
        while channel.recv_stderr_ready():
            stderr += channel.recv_stderr(1 << 16)
    finally:
        if channel is not None:
            channel.close()
        client.close()
    if buffer.startswith(b"{"):
        records.append(_record(buffer, where, what))
    fatal = next((r for r in records if r.get("t") == "fatal"), None)
    if fatal is not None and fatal.get("kind") == "timeout":
        raise _timeout(address, limit_s, records, "the host's alarm stopped the script", what, done_status)
    tail = bytes(stderr[-1000:]).decode("utf-8", "replace").strip()
    if status == 127 and not records:
        raise RemotePythonMissingError(
            *where, f"no Python 3 on the host (tried {list(hook.python_interpreters)}): {tail}"
        )
    if fatal is not None:
        raise BrokerHostCommandError(*where, f"{what} script refused the request: {fatal.get('detail')}")
    if status != 0 or not records or records[-1].get("t") != "end":
        if time.monotonic() - started >= limit_s:
            raise _timeout(
                address,
                limit_s,
                records,
                f"the script ended without finishing (exit {status})",
                what,
                done_status,
            )
        raise BrokerHostCommandError(*where, f"{what} command failed (exit {status}): {tail}")
    return records


def _record(line: bytes, where: tuple[int, str, int], what: str = "quarantine") -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        raise BrokerHostCommandError(
            *where, f"not a {what} record: {line[:80].decode('utf-8', 'replace')!r}"
        ) from None
    if not isinstance(record, dict):
        raise BrokerHostCommandError(*where, f"not a {what} record: {line[:80]!r}")
    return record


def _timeout(
    address: BrokerAddress,
    limit_s: int,
    records: Sequence[dict[str, Any]],
    how: str,
    what: str = "quarantine",
    done_status: str = "moved",
) -> BrokerHostTimeoutError:
    done = [
        r.get("source") or r.get("path") or r.get("name") for r in records if r.get("status") == done_status
    ]
    error = BrokerHostTimeoutError(
        address.broker_id,
        address.host,
        address.port,
        f"the {what} command on host {address.host} ran past its time limit of {limit_s}s ({how}); "
        + (
            f"{done_status} before the limit: {', '.join(map(str, done))}"
            if done
            else f"nothing was {done_status}"
        ),
    )
    error.records = list(records)  # type: ignore[attr-defined]
    return error
