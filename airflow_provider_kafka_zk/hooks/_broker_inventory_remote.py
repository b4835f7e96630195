"""Broker-side half of the broker inventory: lists, stats and reads small files; never writes.

This file is not imported by the provider. ``BrokerHostHook`` sends its text over the SSH channel's
stdin to the broker host's ``python3`` (stdlib only, Python 3.6+ so RHEL 8's platform-python
works), which runs it. It parses no Kafka format: every file comes back raw and the Airflow side
parses it with the pure core, so each format has one implementation.

Protocol (one JSON object per line; bytes travel as ``bytes.decode("utf-8", "surrogateescape")``
strings, which JSON's ASCII escapes carry exactly, so any name or content round-trips):

stdin  1. ``{"server_properties": path|null, "main_classes": [...], "override_keys": [...],
          "log_dir_files": [...], "partition_files": [...], "partition_file_limit": n,
          "log_dir_file_limit": n}`` (which files to read comes from the Airflow side)
       2. after ``await_log_dirs``: ``{"log_dirs": [...]}`` (or ``{"log_dirs": null}`` to stop)
stdout ``hello``, one ``server_properties`` per candidate, ``await_log_dirs``, then per log dir a
       ``log_dir`` record followed by one ``dir`` record per child directory, then ``end``.
       ``fatal`` replaces the rest when the script cannot go on.
"""

import contextlib
import json
import os
import socket
import stat
import sys
import time

_OUT = sys.stdout.buffer
_IN = sys.stdin.buffer


_ENCODE = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode  # one encoder, not one per record


_PENDING = []
_PENDING_STATE = [0, time.monotonic()]  # bytes queued, when the last write went


def emit(record):
    """Queue one record; they leave in writes of about 256 KiB or at least once a second (a write
    per record was a fifth of the walk's system calls; a slow disk still shows progress well inside
    the Airflow side's idle timeout), and whenever the Airflow side must see them (``flush``)."""
    line = _ENCODE(record).encode("ascii") + b"\n"
    _PENDING.append(line)
    _PENDING_STATE[0] += len(line)
    if _PENDING_STATE[0] >= 1 << 18 or time.monotonic() - _PENDING_STATE[1] >= 1.0:
        flush()


def flush():
    if _PENDING:
        _OUT.write(b"".join(_PENDING))
        del _PENDING[:]
    _PENDING_STATE[0], _PENDING_STATE[1] = 0, time.monotonic()
    _OUT.flush()


def text(raw):
    """Bytes as a str that maps back to exactly these bytes (PEP 383)."""
    return raw.decode("utf-8", "surrogateescape")


def raw_path(value):
    return value.encode("utf-8", "surrogateescape")


def describe(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def type_char(mode):
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "o"


def symlink_component(path):
    """The first component of ``path`` (bytes) that is a symlink (lstat), as text, else None: the
    identity pin of a broker without cluster.id trusts only a server.properties reached directly."""
    current = b"/" if path.startswith(b"/") else b""
    for part in [p for p in path.split(b"/") if p]:
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return current.decode("utf-8", "surrogateescape")
        except OSError:
            return None  # absent or unreadable: read_small says so
    return None


def running_jars(main_classes, configured):
    """The Kafka jars of the one running broker started with ``configured`` (same real path), else
    None: its release tells the identity pin whether meta.properties should hold a cluster.id."""
    wanted = os.path.realpath(configured)
    running = [
        p for p in kafka_processes(main_classes, ()) if os.path.realpath(raw_path(p["path"])) == wanted
    ]
    return running[0]["kafka_jars"] if len(running) == 1 else None


def read_small(path, limit, known=None):
    """A regular file's bytes (following symlinks, as Kafka does); None when absent.

    ``known``: the file's ``[name, size, blocks, type, mtime]`` from this walk's listing (an lstat);
    a regular file there is what ``os.stat`` would say too (no symlink to follow), so it is not
    asked again.
    """
    if known is not None and known[3] == "f":
        size = known[1]
    else:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return {"error": describe(exc)}
        if not stat.S_ISREG(info.st_mode):
            kind = {"d": "a directory", "l": "a symlink", "o": "not a regular file"}[type_char(info.st_mode)]
            return {"error": "is " + kind, "size": info.st_size}
        size = info.st_size
    if size > limit:
        return {"error": f"larger than {limit} bytes, not read", "size": size}
    try:
        # O_NONBLOCK: a FIFO swapped in after the stat must not hang the inventory.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            chunks = []
            remaining = limit + 1
            # the size just seen (+1, to see growth) first: a 1 MiB buffer per 43-byte file costs
            # more than the read itself; a regular file's read returns less than asked only at its
            # end, so a short first read is the whole file (one read, not two, per small file)
            want = size + 1
            while remaining > 0:
                asked = min(remaining, want)
                chunk = os.read(fd, asked)
                want = 1 << 20
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
                if len(chunk) < asked:
                    break
        finally:
            os.close(fd)
    except OSError as exc:
        return {"error": describe(exc)}
    data = b"".join(chunks)
    if len(data) > limit:
        return {"error": f"grew past {limit} bytes while read", "size": len(data)}
    return {"size": len(data), "data": text(data)}


def kafka_processes(main_classes, override_keys):
    """Running brokers found in /proc: the properties file follows the main class on the command line."""
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    wanted = set(main_classes)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except OSError:
            continue
        if args and args[-1] == b"":
            args.pop()
        positions = [i for i, arg in enumerate(args) if text(arg) in wanted]
        if not positions or positions[0] + 1 >= len(args):
            continue
        main = positions[0]
        path = args[main + 1]
        if not path.startswith(b"/"):
            with contextlib.suppress(OSError):
                path = os.path.join(os.readlink(f"/proc/{pid}/cwd").encode(), path)
        overrides = []
        rest = [text(a) for a in args[main + 2 :]]
        for index, arg in enumerate(rest):
            value = None
            if arg == "--override" and index + 1 < len(rest):
                value = rest[index + 1]
            elif arg.startswith("--override="):
                value = arg[len("--override=") :]
            # Only the keys asked for leave the host: other overrides may hold passwords.
            if value is not None and value.split("=", 1)[0].strip() in override_keys:
                overrides.append(value)
        jars = []
        for index, arg in enumerate(args[:main]):
            if arg in (b"-cp", b"-classpath", b"--class-path") and index + 1 < main:
                for entry in args[index + 1].split(b":"):
                    name = os.path.basename(entry)
                    if name.startswith(b"kafka_") and name.endswith(b".jar"):
                        jars.append(text(name))
        found.append(
            {
                "pid": int(pid),
                "main_class": text(args[main]),
                "path": text(path),
                "overrides": overrides,
                "kafka_jars": jars,
            }
        )
    return found


def list_entries(path):
    """``[name, size, 512-byte blocks, type, mtime ms]`` of each child, not following symlinks.

    Runs for every entry of every partition directory (five per replica): locals and one type test
    for the common case, a regular file.
    """
    entries = []
    errors = []
    append = entries.append
    regular = stat.S_IFREG
    with os.scandir(path) as scan:
        for entry in scan:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as exc:  # removed while listed (e.g. Kafka finishing a -delete)
                errors.append(f"{text(entry.name)}: {describe(exc)}")
                continue
            mode = info.st_mode
            append(
                [
                    entry.name.decode("utf-8", "surrogateescape"),
                    info.st_size,
                    info.st_blocks,
                    "f" if stat.S_IFMT(mode) == regular else type_char(mode),
                    info.st_mtime_ns // 1000000,
                ]
            )
    return entries, errors


def walk_log_dir(index, log_dir, params):
    """One ``log_dir`` record, then one ``dir`` record per child directory (a partition, or not)."""
    base = raw_path(log_dir)
    record = {"t": "log_dir", "index": index, "path": log_dir}
    try:
        with os.scandir(base) as scan:
            children = sorted(scan, key=lambda entry: entry.name)
    except OSError as exc:
        record["error"] = describe(exc)
        record["exists"] = os.path.lexists(base)
        emit(record)
        return 0
    record["exists"] = True
    record["real_path"] = text(os.path.realpath(base))
    record["files"] = {
        name: read_small(os.path.join(base, raw_path(name)), params["log_dir_file_limit"])
        for name in params["log_dir_files"]
    }
    dirs = []
    others = []
    for entry in children:
        try:
            directory = entry.is_dir()  # Kafka loads every directory child, symlinks followed
        except OSError:
            directory = False
        if directory:
            dirs.append(entry.name)
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            others.append([text(entry.name), info.st_size, type_char(info.st_mode)])
        except OSError as exc:
            others.append([text(entry.name), None, "?", describe(exc)])
    record["other_entries"] = others
    record["child_dirs"] = len(dirs)
    emit(record)
    for name in dirs:
        emit(walk_partition_dir(index, base, name, params))
    return len(dirs)


def walk_partition_dir(index, base, name, params):
    path = base + b"/" + name  # os.path.join's checks cost more than the lstat (a name has no "/")
    record = {"t": "dir", "ld": index, "name": text(name)}
    try:
        entry = os.lstat(path)
        link = stat.S_ISLNK(entry.st_mode)
        info = os.stat(path) if link else entry
        record["mtime_ms"] = info.st_mtime_ns // 1000000
        # ctime (inode change time) of the entry itself: when Kafka renamed it (a rename leaves a
        # directory's mtime alone; a symlinked replica's rename changes the link, not its target)
        record["ctime_ms"] = entry.st_ctime_ns // 1000000
        record["symlink"] = link
        entries, errors = list_entries(path)
    except OSError as exc:
        record["error"] = describe(exc)
        return record
    record["entries"] = entries
    if errors:
        record["entry_errors"] = errors
    present = {entry[0]: entry for entry in entries}
    record["files"] = {
        name: read_small(path + b"/" + raw_path(name), params["partition_file_limit"], present[name])
        for name in params["partition_files"]
        if name in present
    }
    return record


def main():
    started = time.monotonic()
    params = json.loads(_IN.readline().decode("utf-8", "surrogateescape"))
    emit(
        {
            "t": "hello",
            "python": "{}.{}.{}".format(*sys.version_info[:3]),
            "hostname": socket.gethostname(),
            "uid": os.getuid(),
        }
    )
    configured = params.get("server_properties")
    limit = params["log_dir_file_limit"]
    if configured is not None:
        emit(
            {
                "t": "server_properties",
                "source": "configured",
                "path": configured,
                "file": read_small(raw_path(configured), limit),
                "symlink": symlink_component(raw_path(configured)),
                "running_kafka_jars": running_jars(params["main_classes"], raw_path(configured)),
            }
        )
    else:
        for process in kafka_processes(params["main_classes"], set(params["override_keys"])):
            process.update(
                {
                    "t": "server_properties",
                    "source": "process",
                    "file": read_small(raw_path(process["path"]), limit),
                }
            )
            emit(process)
    emit({"t": "await_log_dirs"})
    flush()
    answer = json.loads(_IN.readline().decode("utf-8", "surrogateescape") or "{}")
    log_dirs = answer.get("log_dirs")
    if log_dirs is None:
        emit({"t": "end", "stopped": True, "seconds": time.monotonic() - started})
        return
    dirs = 0
    for index, log_dir in enumerate(log_dirs):
        dirs += walk_log_dir(index, log_dir, params)
    emit({"t": "end", "log_dirs": len(log_dirs), "dirs": dirs, "seconds": time.monotonic() - started})


try:
    main()
except BrokenPipeError:
    pass
except Exception as exc:  # one line the Airflow side can show; the traceback goes to stderr
    emit({"t": "fatal", "kind": "remote_error", "detail": describe(exc)})
    raise
finally:
    with contextlib.suppress(BrokenPipeError):
        flush()
