"""Read, back up and remove ``partition.metadata`` / ``leader-epoch-checkpoint`` files on a broker
host, and run the broker's restart command: the file-level part of a KAFKA-14190 topicId repair.

These are changes to a live broker's data, made as carefully as the quarantine's moves
(``broker_quarantine.py``, whose host-side helpers, path rules and SSH read loop are shared: one
constant ``sh -c`` command per call, the request as JSON on stdin, never in a shell). Each guard and
the damage it prevents:

* the rules (checked here before connecting, raising :class:`PartitionFilePathError`, and again on
  the host, answering ``refused``): the log dir is absolute, normalised and one of the broker's
  ``log_dirs`` -- a typo or a ``..`` cannot reach another directory; the partition directory is
  one plain component naming a *live* partition (``<topic>-<partition>``, never ``-delete``,
  ``-future`` or ``-stray``) -- a file of a directory Kafka is deleting or moving is not what the
  repair means; the file name is one of :data:`PARTITION_FILE_NAMES` -- nothing else is touched.
* no symlink anywhere: each log dir component and the partition directory are opened
  ``O_NOFOLLOW|O_DIRECTORY`` relative to their parent's descriptor, the file ``O_NOFOLLOW`` relative
  to the partition directory's -- a planted link cannot make the backup read, or the removal
  unlink, another directory's file. Only regular files of at most 1 MiB are read (a FIFO would
  block the read, a huge file is not one of these).
* the backup is the contract: a removal names the sha256 the caller backed up; the host hashes
  *every* file of the request first and removes nothing on the broker unless all of them still
  match (``changed``) -- a file rewritten after the backup is never lost. Right before unlinking it
  checks again that the name still holds the inode it hashed, with the same content, and unlinks
  with ``unlink(name, dir_fd=<partition dir>)``. (A rename onto the name in the microseconds between
  that check and the unlink is the one window left: stop the broker first when it may write them.)
* a retry is safe: a file already gone is ``already_absent``.
* real changes (removals, restart commands) need the maintenance session that pinned the broker's
  host (``session.require_broker``), else :class:`PartitionFilesOutsideSessionError` is raised
  before connecting; a dry run checks everything on the host and removes nothing.
* hard time limits on the host (``signal.alarm``; for the reads and removals also ``RLIMIT_CPU``)
  and in the read loop here: past the limit :class:`BrokerHostTimeoutError`.
* the restart command: only ``{broker_id}`` and ``{host}`` may appear in the template, substituted
  ``shlex``-quoted and never inside the template's own quotes -- a host name cannot inject shell.
  The command runs under a small supervisor on the host in its own process group: past the limit
  the whole group gets SIGTERM, then SIGKILL -- closing an SSH channel does not stop a command
  (OpenSSH keeps a command without a terminal running), so without it a hung restart would go on.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_zk.hooks.broker_host import (
    PARTITION_FILE_LIMIT,
    BrokerAddress,
    BrokerHostCommandError,
    BrokerHostHook,
    BrokerHostTimeoutError,
)
from airflow_provider_kafka_zk.hooks.broker_quarantine import (
    _HOST_COMMON,
    _RULES,
    BrokerGate,
    load_rules,
    run_remote,
)
from airflow_provider_kafka_zk.kafka.steps import command_template_parts, render_command

log = logging.getLogger(__name__)

PARTITION_FILE_NAMES: tuple[str, ...] = ("partition.metadata", "leader-epoch-checkpoint")
SCRIPT_MARKER = "kafka-zk-partition-files-remote"
RESTART_MARKER = "kafka-zk-restart-remote"
DEFAULT_TIMEOUT_S = 60.0
RESTART_KILL_GRACE_S = 5  # SIGTERM to the command's process group, then this long until SIGKILL
RESTART_TAIL_CHARS = 4000
RESTART_FIELDS = ("broker_id", "host")
RESTART_TEMPLATE_NAME = "restart_command"

# The partition-file rules, written once on top of the path rules (``_RULES``, which the host script
# already has): the host script runs them and this module execs the same text (Python 3.6+ stdlib
# only, needs ``os`` and ``re``).
_PARTITION_RULES = (
    f"\nFILE_NAMES = {PARTITION_FILE_NAMES!r}\nFILE_LIMIT = {int(PARTITION_FILE_LIMIT)}\n"
    + r"""
LIVE_DIR = re.compile(r"[A-Za-z0-9._-]+-(0|[1-9][0-9]*)\Z", re.ASCII)
SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z", re.ASCII)


def partition_dir_rule(name):
    why = name_rule(name)
    if why:
        return why
    for suffix in ("-delete", "-future", "-stray"):
        if name.endswith(suffix):
            return "is a %s directory, not a live partition directory" % suffix
    if not LIVE_DIR.match(name):
        return "must name a live partition directory (<topic>-<partition>)"
    return None


def log_dirs_rule(log_dirs):
    # None, or (what, value, why)
    if not isinstance(log_dirs, list) or not log_dirs:
        return ("log_dirs", log_dirs, "must list every log dir of the broker")
    for d in log_dirs:
        why = path_rule(d)
        if why:
            return ("log dir", d, why)
    return None


def partition_file_rule(f, log_dirs):
    # None, or (what, value, why) for the first rule the file breaks; no I/O
    if not isinstance(f, dict):
        return ("file", f, "must be an object with log_dir, dir_name and name")
    log_dir, dir_name, name = f.get("log_dir"), f.get("dir_name"), f.get("name")
    why = path_rule(log_dir)
    if why:
        return ("log dir", log_dir, why)
    if log_dir not in log_dirs:
        return ("log dir", log_dir, "is not one of the broker's log dirs")
    why = partition_dir_rule(dir_name)
    if why:
        return ("partition directory", dir_name, why)
    if name not in FILE_NAMES:
        return ("file name", name, "must be one of " + ", ".join(FILE_NAMES))
    return None


def sha256_rule(value):
    if not isinstance(value, str) or not SHA256_HEX.match(value):
        return "must be a sha256 (64 lowercase hex digits)"
    return None
"""
)

# Python 3.6+ stdlib only. Reads one JSON request from stdin:
#   {"mode": "read" | "remove", "dry_run", "limit_s", "log_dirs",
#    "files": [{"log_dir", "dir_name", "name", "sha256" (remove only)}],
#    "_test_pause_s" (tests only: pause that long between the checks and the removal)}
# and writes one {"t": "file", "i": <index in files>, ...} per file, then {"t": "end"}; or
# {"t": "fatal", ...}. Removed files are reported as soon as they are gone.
_PARTITION_REMOTE = (
    r"""
# kafka-zk-partition-files-remote: reads, or removes after checking every one, partition files.
"""
    + _HOST_COMMON
    + r"""
import base64, hashlib, re
"""
    + _PARTITION_RULES
    + r"""
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
BLOCKING = ("refused", "changed", "failed")


def on_limit(signum, frame):
    if STATE["fatal"]:
        os._exit(124)
    STATE["fatal"] = True
    emit({"t": "fatal", "kind": "timeout", "limit_s": STATE["limit"], "signal": signum,
          "detail": "the partition files script ran past its limit of %ss and stopped" % STATE["limit"]})
    os._exit(124)


def new_record(i, f, mode):
    f = f if isinstance(f, dict) else {}
    rec = {"t": "file", "i": i, "log_dir": f.get("log_dir"), "dir_name": f.get("dir_name"),
           "name": f.get("name"), "path": None, "status": None, "size": None, "sha256": None,
           "mode": None, "detail": None}
    if mode == "read":
        rec["content_b64"] = None
    else:
        rec["expected_sha256"] = f.get("sha256")
    if all(isinstance(rec[k], str) for k in ("log_dir", "dir_name", "name")):
        rec["path"] = join(join(rec["log_dir"], rec["dir_name"]), rec["name"])
    return rec


def read_fd(fd, shown):
    # (bytes, sha256 hex) of the whole file from offset 0; Refused past FILE_LIMIT
    chunks, total = [], 0
    while True:
        chunk = os.pread(fd, 1 << 16, total)
        if not chunk:
            break
        total += len(chunk)
        chunks.append(chunk)
        if total > FILE_LIMIT:
            raise Refused("%s is larger than %d bytes" % (shown, FILE_LIMIT))
    data = b"".join(chunks)
    return data, hashlib.sha256(data).hexdigest()


def open_file(rec, fds):
    # (partition dir fd, file fd, fstat) of the file, or None when it is absent (rec["detail"] says
    # why); Refused on a symlink anywhere, a non-regular file or one over FILE_LIMIT.
    log_fd, shown, missing = open_path(rec["log_dir"], fds)
    if missing:
        raise Refused("log dir %s does not exist (%s has no %s)" % (rec["log_dir"], shown, missing[0]))
    pdir = join(rec["log_dir"], rec["dir_name"])
    pfd = open_child(log_fd, rec["dir_name"], pdir, False, fds)
    if pfd is None:
        rec["detail"] = "no partition directory %s" % pdir
        return None
    name, path = rec["name"], rec["path"]
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        rec["detail"] = "no such file"
        return None
    if stat.S_ISLNK(st.st_mode):
        raise Refused("%s is a symlink" % path)
    if not stat.S_ISREG(st.st_mode):
        raise Refused("%s is not a regular file" % path)
    if st.st_size > FILE_LIMIT:
        raise Refused("%s is larger than %d bytes" % (path, FILE_LIMIT))
    try:
        fd = os.open(name, O_FILE, dir_fd=pfd)
    except FileNotFoundError:
        rec["detail"] = "no such file"
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("%s was replaced by a symlink" % path)
        raise
    fds.append(fd)
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        raise Refused("%s changed while it was being opened" % path)
    return pfd, fd, opened


def request_refusal(req):
    # (what, value, why) for a request that no file of it may pass, else None
    log_dirs = req.get("log_dirs")
    return log_dirs_rule(log_dirs)


def read_one(rec, f, log_dirs):
    bad = partition_file_rule(f, log_dirs)
    if bad:
        rec.update(status="refused", detail="%s %r %s" % bad)
        return
    fds = []
    try:
        opened = open_file(rec, fds)
        if opened is None:
            rec["status"] = "absent"
            return
        _, fd, st = opened
        data, digest = read_fd(fd, rec["path"])
        rec.update(status="present", size=len(data), sha256=digest, mode=stat.S_IMODE(st.st_mode),
                   content_b64=base64.b64encode(data).decode("ascii"))
    except Refused as exc:
        rec.update(status="refused", detail=str(exc))
    except OSError as exc:
        rec.update(status="refused", detail="%s: %s" % (type(exc).__name__, exc))
    finally:
        close_all(fds)


def check_removal(rec, f, log_dirs, seen, fds):
    # The file as it is now: None when it may not be removed (rec says why), else what to unlink.
    bad = partition_file_rule(f, log_dirs)
    if not bad and sha256_rule(f.get("sha256")):
        bad = ("backup sha256", f.get("sha256"), sha256_rule(f.get("sha256")))
    if not bad and rec["path"] in seen:
        bad = ("file", rec["path"], "is named twice in the request")
    if bad:
        rec.update(status="refused", detail="%s %r %s" % bad)
        return None
    seen.add(rec["path"])
    try:
        opened = open_file(rec, fds)
        if opened is None:
            rec["status"] = "already_absent"
            return None
        pfd, fd, st = opened
        data, digest = read_fd(fd, rec["path"])
    except Refused as exc:
        rec.update(status="refused", detail=str(exc))
        return None
    except OSError as exc:
        rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
        return None
    rec.update(size=len(data), sha256=digest, mode=stat.S_IMODE(st.st_mode))
    if digest != f["sha256"]:
        rec.update(status="changed", detail="the content differs from the backup (sha256 %s, backup %s)"
                   % (digest, f["sha256"]))
        return None
    return {"rec": rec, "pfd": pfd, "fd": fd, "st": st, "sha256": digest}


def still_same(c):
    # None when the name still holds the inode that was hashed, with the same content; else why not
    rec = c["rec"]
    try:
        now = os.stat(rec["name"], dir_fd=c["pfd"], follow_symlinks=False)
    except FileNotFoundError:
        return "it disappeared after the check"
    if stat.S_ISLNK(now.st_mode) or (now.st_dev, now.st_ino) != (c["st"].st_dev, c["st"].st_ino):
        return "it was replaced after the check (another inode)"
    try:
        _, digest = read_fd(c["fd"], rec["path"])
    except Refused as exc:
        return str(exc)
    if digest != c["sha256"]:
        return "its content changed after the check (sha256 %s)" % digest
    return None


def hold_back(candidates, records, dry_run, verb="removed"):
    blockers = [r for r in records if r["status"] in BLOCKING]
    why = "nothing is %s on this broker%s: %s" % (
        verb,
        " (dry run)" if dry_run else "",
        "; ".join("%s %s" % (r["path"] or r["name"], r["status"]) for r in blockers))
    for c in candidates:
        c["rec"].update(status="refused", detail=why)


def remove_all(req, files, log_dirs):
    records, candidates, seen, fds = [], [], set(), []
    try:
        for i, f in enumerate(files):
            rec = new_record(i, f, "remove")
            records.append(rec)
            c = check_removal(rec, f if isinstance(f, dict) else {}, log_dirs, seen, fds)
            if c is not None:
                candidates.append(c)
        if any(r["status"] in BLOCKING for r in records):
            hold_back(candidates, records, bool(req.get("dry_run")))
        elif req.get("dry_run"):
            for c in candidates:
                c["rec"]["status"] = "would_remove"
        else:
            if req.get("_test_pause_s"):
                time.sleep(float(req["_test_pause_s"]))  # tests only: a change meets the re-check
            for c in candidates:
                why = still_same(c)
                if why:
                    c["rec"].update(status="changed", detail=why)
            if any(r["status"] in BLOCKING for r in records):
                hold_back([c for c in candidates if c["rec"]["status"] is None], records, False)
            else:
                unlink_all(candidates)
    finally:
        close_all(fds)
    for rec in records:
        if rec["status"] != "removed":  # removed ones were reported as they went
            emit(rec)


def unlink_all(candidates):
    synced = set()
    for c in candidates:
        rec = c["rec"]
        try:
            os.unlink(rec["name"], dir_fd=c["pfd"])
        except FileNotFoundError:
            rec.update(status="already_absent", detail="removed by someone else after the check")
            continue
        except OSError as exc:
            rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
            continue
        if c["pfd"] not in synced:
            synced.add(c["pfd"])
            try:
                os.fsync(c["pfd"])
            except OSError:
                pass
        rec["status"] = "removed"
        emit(rec)


O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
TMP_PREFIX = ".kafka-zk-restore."


def check_restore(rec, f, log_dirs, seen, fds):
    # The file as it is now, for a restore: None when it may not be written (rec says why), else
    # what to replace. Expected: absent (expected_sha256 None) or holding expected_sha256.
    bad = partition_file_rule(f, log_dirs)
    expected = f.get("expected_sha256")
    if not bad and expected is not None and sha256_rule(expected):
        bad = ("expected sha256", expected, sha256_rule(expected))
    content = None
    if not bad:
        try:
            content = base64.b64decode(f.get("content_b64") or "", validate=True)
        except (ValueError, TypeError):
            bad = ("content", "content_b64", "must be base64")
    if not bad and len(content) > FILE_LIMIT:
        bad = ("content", rec["path"], "is larger than %d bytes" % FILE_LIMIT)
    if not bad and rec["path"] in seen:
        bad = ("file", rec["path"], "is named twice in the request")
    if bad:
        rec.update(status="refused", detail="%s %r %s" % bad)
        return None
    seen.add(rec["path"])
    rec["expected_sha256"] = expected
    wanted = hashlib.sha256(content).hexdigest()
    try:
        log_fd, shown, missing = open_path(rec["log_dir"], fds)
        if missing:
            raise Refused("log dir %s does not exist" % rec["log_dir"])
        pdir = join(rec["log_dir"], rec["dir_name"])
        pfd = open_child(log_fd, rec["dir_name"], pdir, False, fds)
        if pfd is None:
            raise Refused("no partition directory %s (the replica is gone from this broker)" % pdir)
        opened = open_file(rec, fds)
        if opened is None:
            st = None
            if expected is not None:
                rec.update(status="changed", detail="absent now; the plan found it with sha256 %s" % expected)
                return None
        else:
            _, fd, st = opened
            data, digest = read_fd(fd, rec["path"])
            rec.update(size=len(data), sha256=digest, mode=stat.S_IMODE(st.st_mode))
            if digest == wanted:
                rec.update(status="already_restored", detail="holds the content to restore")
                return None
            if digest != expected:
                rec.update(status="changed", detail="holds sha256 %s, the plan found %s" % (digest, expected))
                return None
    except Refused as exc:
        rec.update(status="refused", detail=str(exc))
        return None
    except OSError as exc:
        rec.update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
        return None
    return {"rec": rec, "pfd": pfd, "st": st, "content": content, "sha256": expected}


def still_as_checked(c):
    # None when the name still holds what was checked (the same inode, or still nothing); else why not
    rec = c["rec"]
    try:
        now = os.stat(rec["name"], dir_fd=c["pfd"], follow_symlinks=False)
    except FileNotFoundError:
        return None if c["st"] is None else "it disappeared after the check"
    if c["st"] is None:
        return "it appeared after the check"
    if stat.S_ISLNK(now.st_mode) or (now.st_dev, now.st_ino) != (c["st"].st_dev, c["st"].st_ino):
        return "it was replaced after the check (another inode)"
    return None


def write_back(c):
    # a temporary file beside it (never followed, never over anything but our own leftover), fsync'ed,
    # given the replaced file's owner and mode, then renamed over the name in the same directory
    rec, pfd = c["rec"], c["pfd"]
    tmp = TMP_PREFIX + rec["name"]
    try:
        st = os.stat(tmp, dir_fd=pfd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("%s exists and is not a regular file" % join(join(rec["log_dir"], rec["dir_name"]), tmp))
        os.unlink(tmp, dir_fd=pfd)  # a leftover of an interrupted restore
    except FileNotFoundError:
        pass
    mode = stat.S_IMODE(c["st"].st_mode) if c["st"] is not None else 0o644
    fd = os.open(tmp, O_NEW, mode, dir_fd=pfd)
    try:
        view = memoryview(c["content"])
        while view:
            view = view[os.write(fd, view):]
        if c["st"] is not None:
            try:
                os.fchown(fd, c["st"].st_uid, c["st"].st_gid)
            except OSError:
                pass  # not ours to change: the file keeps this user's ownership
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    why = still_as_checked(c)
    if why:
        os.unlink(tmp, dir_fd=pfd)
        rec.update(status="changed", detail=why)
        return
    os.rename(tmp, rec["name"], src_dir_fd=pfd, dst_dir_fd=pfd)
    try:
        os.fsync(pfd)
    except OSError:
        pass
    rec.update(status="restored", size=len(c["content"]), sha256=hashlib.sha256(c["content"]).hexdigest())
    emit(rec)


def restore_all(req, files, log_dirs):
    records, candidates, seen, fds = [], [], set(), []
    try:
        for i, f in enumerate(files):
            rec = new_record(i, f, "restore")
            records.append(rec)
            c = check_restore(rec, f if isinstance(f, dict) else {}, log_dirs, seen, fds)
            if c is not None:
                candidates.append(c)
        if any(r["status"] in BLOCKING for r in records):
            hold_back(candidates, records, bool(req.get("dry_run")), "written")
        elif req.get("dry_run"):
            for c in candidates:
                c["rec"]["status"] = "would_restore"
        else:
            for c in candidates:
                try:
                    write_back(c)
                except Refused as exc:
                    c["rec"].update(status="refused", detail=str(exc))
                except OSError as exc:
                    c["rec"].update(status="failed", detail="%s: %s" % (type(exc).__name__, exc))
    finally:
        close_all(fds)
    for rec in records:
        if rec["status"] != "restored":  # restored ones were reported as they went
            emit(rec)


def main():
    req = read_request(on_limit, 60)
    if req is None:
        return 2
    files = req.get("files")
    mode = req.get("mode")
    if not isinstance(files, list) or mode not in ("read", "remove", "restore"):
        emit({"t": "fatal", "kind": "bad_request", "detail": "needs mode read, remove or restore and a files list"})
        return 2
    log_dirs = req.get("log_dirs")
    bad = request_refusal(req)
    if bad:
        for i, f in enumerate(files):
            rec = new_record(i, f, mode)
            rec.update(status="refused", detail="%s %r %s" % bad)
            emit(rec)
    elif mode == "read":
        for i, f in enumerate(files):
            rec = new_record(i, f, mode)
            read_one(rec, f, log_dirs)
            emit(rec)
    elif mode == "restore":
        restore_all(req, files, log_dirs)
    else:
        remove_all(req, files, log_dirs)
    signal.alarm(0)
    emit({"t": "end"})
    return 0


sys.exit(main())
"""
)

# Python 3.6+ stdlib only. Reads {"limit_s", "command", "command_limit_s", "kill_grace_s",
# "tail_chars"} from stdin, runs ``/bin/sh -c <command>`` in a new session (its own process group)
# with stdin from /dev/null and stdout/stderr into unlinked temporary files (a daemon it starts
# cannot hold the SSH channel open), waits at most command_limit_s, then SIGTERMs the group,
# waits kill_grace_s and SIGKILLs what is left. Writes {"t": "restart", ...} then {"t": "end"}.
# No RLIMIT_CPU here: the command (and a broker it starts) would inherit it.
_RESTART_REMOTE = (
    r"""
# kafka-zk-restart-remote: runs a broker's restart command under a time limit, in its own process group.
"""
    + _HOST_COMMON
    + r"""
import subprocess, tempfile

CHILD = {}


def kill_group(sig):
    pid = CHILD.get("pid")
    if pid:
        try:
            os.killpg(pid, sig)
        except OSError:
            pass  # the group is gone


def on_limit(signum, frame):
    # a backstop only: the wait below stops the command first
    if STATE["fatal"]:
        os._exit(124)
    STATE["fatal"] = True
    kill_group(signal.SIGKILL)
    emit({"t": "fatal", "kind": "timeout", "limit_s": STATE["limit"], "signal": signum,
          "detail": "the restart supervisor ran past its limit of %ss; the command's group was killed"
          % STATE["limit"]})
    os._exit(124)


def tail(f, keep):
    f.flush()
    size = f.seek(0, 2)
    f.seek(max(0, size - keep))
    return f.read().decode("utf-8", "replace")


def main():
    req = read_request(on_limit, 60, cpu_limit=False)
    if req is None:
        return 2
    command = req.get("command")
    try:
        limit = float(req.get("command_limit_s"))
        grace = float(req.get("kill_grace_s") or 5)
        keep = int(req.get("tail_chars") or 4000)
    except (TypeError, ValueError) as exc:
        emit({"t": "fatal", "kind": "bad_request", "detail": "%s: %s" % (type(exc).__name__, exc)})
        return 2
    if not isinstance(command, str) or not command.strip() or "\0" in command or not limit > 0:
        emit({"t": "fatal", "kind": "bad_request", "detail": "needs a command and a positive command_limit_s"})
        return 2
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, close_fds=True, start_new_session=True)
        CHILD["pid"] = proc.pid
        timed_out = False
        try:
            status = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(signal.SIGTERM)
            try:
                status = proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                status = None
            kill_group(signal.SIGKILL)  # whatever is left of the group, the shell included
            if status is None:
                status = proc.wait()
        emit({"t": "restart", "exit_status": status, "timed_out": timed_out, "pid": proc.pid,
              "seconds": round(time.monotonic() - started, 3),
              "stdout_tail": tail(out, keep), "stderr_tail": tail(err, keep)})
    signal.alarm(0)
    emit({"t": "end"})
    return 0


sys.exit(main())
"""
)


# ---------------------------------------------------------------------------------------------
# Errors, the request's parts, the Airflow-side rules
# ---------------------------------------------------------------------------------------------


class PartitionFilePathError(ValueError):
    """A partition file (or the broker's log dirs) breaks a rule: raised before connecting."""

    def __init__(self, what: str, path: Any, rule: str) -> None:
        self.what = what
        self.path = path
        self.rule = rule
        super().__init__(f"{what} {path!r} refused: {rule}")


class PartitionFilesOutsideSessionError(PermissionError):
    """A removal or a restart was attempted without a maintenance session (a programming error)."""


@dataclass(frozen=True)
class PartitionFile:
    """One file of one replica directory: ``<log_dir>/<dir_name>/<name>`` on the broker's host.

    :param log_dir: one of the broker's log dirs (absolute, normalised).
    :param dir_name: the live partition directory, ``<topic>-<partition>``.
    :param name: one of :data:`PARTITION_FILE_NAMES`.
    """

    log_dir: str
    dir_name: str
    name: str

    @property
    def path(self) -> str:
        """The file's full path, as the host script spells it."""
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}/{self.name}"

    def as_request(self) -> dict[str, str]:
        return {"log_dir": self.log_dir, "dir_name": self.dir_name, "name": self.name}


_RULE_FUNCTIONS = load_rules(_RULES + _PARTITION_RULES, "<partition file rules>", re=re)
_partition_file_rule = _RULE_FUNCTIONS["partition_file_rule"]
_log_dirs_rule = _RULE_FUNCTIONS["log_dirs_rule"]
_sha256_rule = _RULE_FUNCTIONS["sha256_rule"]
partition_dir_rule = _RULE_FUNCTIONS["partition_dir_rule"]
"""Why ``name`` is not a live partition directory's name; None when it is (the host's own rule)."""


def validate_partition_files(files: Sequence[PartitionFile], log_dirs: Sequence[str]) -> None:
    """Raise :class:`PartitionFilePathError` for the first rule a file breaks; no I/O.

    :param files: the files a read or a removal names.
    :param log_dirs: every log dir of the broker.
    """
    if isinstance(log_dirs, str):
        raise PartitionFilePathError("log_dirs", log_dirs, "must list every log dir of the broker")
    dirs = list(log_dirs)
    bad = _log_dirs_rule(dirs)
    if bad:
        raise PartitionFilePathError(*bad)
    for file in files:
        if not isinstance(file, PartitionFile):
            raise TypeError(f"expected a PartitionFile, not {file!r}")
        bad = _partition_file_rule(file.as_request(), dirs)
        if bad:
            raise PartitionFilePathError(*bad)


def _limit(timeout: float) -> int:
    value = float(timeout)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return max(1, math.ceil(value))


def _run_partition_files(
    hook: BrokerHostHook,
    address: BrokerAddress,
    request: dict[str, Any],
    limit_s: float,
    expected: int,
    broker_id: int,
) -> list[dict[str, Any]]:
    """One run of the partition-files script on a broker host; one result per requested file."""
    records = run_remote(
        hook,
        address,
        request,
        limit_s,
        script=_PARTITION_REMOTE,
        what="partition files",
        done_status="removed",
    )
    return _file_results(records, expected, (broker_id, address.host, address.port))


def _file_results(
    records: Sequence[dict[str, Any]], expected: int, where: tuple[int, str, int]
) -> list[dict[str, Any]]:
    files = sorted((r for r in records if r.get("t") == "file"), key=lambda r: r.get("i", -1))
    if [r.get("i") for r in files] != list(range(expected)):
        raise BrokerHostCommandError(
            *where, f"the partition files script answered for {len(files)} of {expected} files"
        )
    return [{k: v for k, v in r.items() if k not in ("t", "i")} for r in files]


def _gate(session: BrokerGate | None, broker_id: int, doing: str) -> BrokerGate:
    if session is None:
        raise PartitionFilesOutsideSessionError(
            f"refusing to {doing} on broker {broker_id} outside a maintenance session: the host's "
            "identity must be pinned first (MaintenanceSession.pin_broker)"
        )
    return session


# ---------------------------------------------------------------------------------------------
# The calls
# ---------------------------------------------------------------------------------------------


def read_partition_files(
    hook: BrokerHostHook,
    broker_id: int,
    files: Sequence[PartitionFile],
    *,
    log_dirs: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Read ``files`` on broker ``broker_id``'s host (the backup before a removal); one SSH command.

    Read-only. Each file is read through descriptors that never follow a symlink; symlinks (in the
    log dir's components, as the partition directory or as the file), non-regular files and files
    over 1 MiB are refused.

    :param hook: the cluster's broker host hook (strict host keys).
    :param broker_id: the broker whose host is read.
    :param files: the files to read, in the order the results come back.
    :param log_dirs: every log dir of the broker (each file's log dir must be one of them).
    :param timeout: hard limit (s) for the command, on the host and here.
    :raises PartitionFilePathError: a file breaks a rule (before any connection).
    :raises BrokerHostTimeoutError: past ``timeout``.
    :raises BrokerHostCommandError: the host command failed or broke the protocol.

    Returns one dict per file, in order: ``{"path", "log_dir", "dir_name", "name", "status",
    "size", "sha256", "content_b64", "mode", "detail"}``; ``status`` is ``present`` (size, sha256
    of the content, the content base64-encoded, permission bits as an int), ``absent`` (no such
    file or no such partition directory; detail says which) or ``refused`` (detail says why).
    """
    validate_partition_files(files, log_dirs)
    limit_s = _limit(timeout)
    if not files:
        return []
    address = hook.resolve(broker_id)
    request = {
        "mode": "read",
        "limit_s": limit_s,
        "log_dirs": list(log_dirs),
        "files": [f.as_request() for f in files],
    }
    results = _run_partition_files(hook, address, request, limit_s, len(files), broker_id)
    for result in results:
        log.info(
            "Broker %d (%s): read %s: %s%s",
            broker_id,
            address.host,
            result["path"] or result["name"],
            result["status"],
            f" ({result['size']} bytes, sha256 {result['sha256']})"
            if result["status"] == "present"
            else f" ({result['detail']})",
        )
    return results


def remove_partition_files(
    hook: BrokerHostHook,
    broker_id: int,
    removals: Sequence[tuple[PartitionFile, str]],
    *,
    log_dirs: Sequence[str],
    dry_run: bool = True,
    session: BrokerGate | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    _test_pause_s: float | None = None,
) -> list[dict[str, Any]]:
    """Remove backed-up files on broker ``broker_id``'s host, all or none; one SSH command.

    The host first checks every file (a regular file, no symlink anywhere, its sha256 equal to the
    backup's); only when all pass does it re-check each (same inode, same content) and unlink it
    relative to its partition directory's descriptor. Any file ``changed``, ``refused`` or
    ``failed`` in the checks holds back every other file of the request (``refused``, the detail
    names the cause): nothing is removed on this broker.

    :param hook: the cluster's broker host hook (strict host keys).
    :param broker_id: the broker whose files are removed.
    :param removals: ``(file, sha256 of the backed-up content)`` pairs, each file at most once.
    :param log_dirs: every log dir of the broker.
    :param dry_run: check everything on the host, remove nothing (the default).
    :param session: the maintenance session that pinned this broker's host; required unless
        ``dry_run`` (``session.require_broker(broker_id, host)`` is called before connecting).
    :param timeout: hard limit (s) for the command, on the host and here.
    :param _test_pause_s: tests only: the host pauses this long between the checks and the
        re-check before unlinking.
    :raises PartitionFilePathError: a file or a sha256 breaks a rule, or a file is named twice.
    :raises PartitionFilesOutsideSessionError: a real removal without a session (before connecting).
    :raises BrokerHostTimeoutError: past ``timeout`` (the message lists what was removed by then).
    :raises BrokerHostCommandError: the host command failed or broke the protocol.

    Returns one dict per removal, in order: ``{"path", "log_dir", "dir_name", "name", "status",
    "expected_sha256", "sha256", "size", "mode", "detail"}``; ``status``: ``would_remove`` (dry
    run), ``removed``, ``already_absent`` (a retry: nothing to do), ``changed`` (the content is not
    the backup's: nothing is removed on this broker), ``refused`` or ``failed`` (an OS error).
    """
    for _, digest in removals:
        why = _sha256_rule(digest)
        if why:
            raise PartitionFilePathError("backup sha256", digest, why)
    return _change_files(
        hook,
        broker_id,
        "remove",
        [(file, {"sha256": digest}) for file, digest in removals],
        log_dirs=log_dirs,
        dry_run=dry_run,
        session=session,
        timeout=timeout,
        fine=("would_remove", "removed", "already_absent"),
        extra={} if _test_pause_s is None else {"_test_pause_s": float(_test_pause_s)},
    )


def restore_partition_files(
    hook: BrokerHostHook,
    broker_id: int,
    restores: Sequence[tuple[PartitionFile, bytes, str | None]],
    *,
    log_dirs: Sequence[str],
    dry_run: bool = True,
    session: BrokerGate | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Write removed files back on broker ``broker_id``'s host (an undo), all or none; one SSH command.

    The host first checks every file: the partition directory is there (no symlink anywhere), and
    the file is absent where ``expected_sha256`` is None, or a regular file with exactly that sha256
    (what was there when the undo was planned: the broker's own rewrite); a file already holding the
    content is ``already_restored``. Any file ``changed``, ``refused`` or ``failed`` holds back every
    other: nothing is written on this broker. Then each content goes to a temporary file beside it
    (``O_EXCL|O_NOFOLLOW``, fsync'ed, the replaced file's owner and mode), is checked once more
    against what was checked, and is renamed over the name within the partition directory.

    :param restores: ``(file, content, expected sha256 now or None for absent)``, each file once.
    :param log_dirs: every log dir of the broker.
    :param dry_run: check everything on the host, write nothing (the default).
    :param session: the maintenance session that pinned this broker's host; required unless ``dry_run``.
    :raises PartitionFilePathError: a file or a sha256 breaks a rule, or a file is named twice.
    :raises PartitionFilesOutsideSessionError: a real restore without a session (before connecting).

    Returns one dict per file, in order, with ``status``: ``would_restore`` (dry run), ``restored``,
    ``already_restored``, ``changed`` (not what the undo planned against: nothing written on this
    broker), ``refused`` or ``failed``.
    """
    import base64

    for file, content, digest in restores:
        if digest is not None and _sha256_rule(digest):
            raise PartitionFilePathError("expected sha256", digest, _sha256_rule(digest))
        if len(content) > PARTITION_FILE_LIMIT:
            raise PartitionFilePathError("content", file.path, f"is larger than {PARTITION_FILE_LIMIT} bytes")
    return _change_files(
        hook,
        broker_id,
        "restore",
        [
            (file, {"content_b64": base64.b64encode(content).decode(), "expected_sha256": digest})
            for file, content, digest in restores
        ],
        log_dirs=log_dirs,
        dry_run=dry_run,
        session=session,
        timeout=timeout,
        fine=("would_restore", "restored", "already_restored"),
    )


def _change_files(
    hook: BrokerHostHook,
    broker_id: int,
    mode: str,
    entries: Sequence[tuple[PartitionFile, dict[str, Any]]],
    *,
    log_dirs: Sequence[str],
    dry_run: bool,
    session: BrokerGate | None,
    timeout: float,
    fine: tuple[str, ...],
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One ``remove`` or ``restore`` request on the broker's host: the rules checked before connecting
    (each file once), a real change only through the session that pinned the host; the results logged."""
    files = [file for file, _ in entries]
    validate_partition_files(files, log_dirs)
    seen: set[str] = set()
    for file in files:
        if file.path in seen:
            raise PartitionFilePathError("file", file.path, "is named twice in the request")
        seen.add(file.path)
    limit_s = _limit(timeout)
    doing = f"{mode} partition files"
    if not dry_run:
        _gate(session, broker_id, doing)
    if not entries:
        return []
    address = hook.resolve(broker_id)
    if not dry_run:
        _gate(session, broker_id, doing).require_broker(broker_id, address.host)
    request: dict[str, Any] = {
        "mode": mode,
        "dry_run": bool(dry_run),
        "limit_s": limit_s,
        "log_dirs": list(log_dirs),
        "files": [{**file.as_request(), **fields} for file, fields in entries],
        **(extra or {}),
    }
    records = run_remote(
        hook,
        address,
        request,
        limit_s,
        script=_PARTITION_REMOTE,
        what="partition files",
        done_status={"remove": "removed", "restore": "restored"}[mode],
    )
    results = _file_results(records, len(entries), (broker_id, address.host, address.port))
    for result in results:
        log.log(
            logging.INFO if result["status"] in fine else logging.WARNING,
            "Broker %d (%s): %s %s%s",
            broker_id,
            address.host,
            result["status"],
            result["path"] or result["name"],
            f" ({result['detail']})" if result.get("detail") else "",
        )
    return results


def render_restart_command(template: str, broker_id: int, host: str) -> str:
    """The restart command for one broker: ``{broker_id}`` and ``{host}`` substituted shlex-quoted.

    Nothing else may appear in braces (``{{``/``}}`` are literal braces): another field, a format
    spec or a conversion is refused, and so is a placeholder inside the template's own quotes or
    right after a backslash (the quoting added here would not hold there). The rules are the pure
    core's (:func:`airflow_provider_kafka_zk.kafka.steps.render_command`), which the step
    executor's preflight applies to every broker before anything runs.

    :param template: e.g. ``sudo systemctl restart kafka`` or
        ``/opt/kafka/bin/restart-broker.sh --id {broker_id} --host {host}``.
    :raises CommandTemplateError: (a ValueError) naming ``restart_command`` and the placeholder.
    """
    return render_command(
        RESTART_TEMPLATE_NAME, template, {"broker_id": str(int(broker_id)), "host": str(host)}, RESTART_FIELDS
    )


def _restart_fields(template: str) -> list[tuple[str, str | None]]:
    return command_template_parts(RESTART_TEMPLATE_NAME, template, RESTART_FIELDS)


def run_restart_command(
    hook: BrokerHostHook,
    broker_id: int,
    command_template: str,
    *,
    timeout: float,
    session: BrokerGate | None,
) -> dict[str, Any]:
    """Run the user-configured restart command on broker ``broker_id``'s host over SSH.

    The command runs as ``/bin/sh -c <command>`` under a supervisor on the host (stdlib Python),
    in its own process group with stdin from /dev/null; at ``timeout`` the group gets SIGTERM and,
    ``RESTART_KILL_GRACE_S`` later, SIGKILL -- a broker it started inside the group within the
    limit is killed too, so a restart command should leave the broker to systemd or daemonise it.

    :param hook: the cluster's broker host hook (strict host keys).
    :param broker_id: the broker to restart.
    :param command_template: the command; ``{broker_id}`` and ``{host}`` are substituted
        shell-quoted (see :func:`render_restart_command`).
    :param timeout: the limit (s) for the command.
    :param session: the maintenance session that pinned this broker's host (required).
    :raises CommandTemplateError: a bad template (a ValueError naming it and the placeholder), before connecting.
    :raises ValueError: a bad timeout (before connecting).
    :raises PartitionFilesOutsideSessionError: no session (before connecting).
    :raises BrokerHostTimeoutError: the command ran past ``timeout`` (stopped on the host); the
        message names broker, host, command and limit.
    :raises BrokerHostCommandError: a non-zero exit status (``.exit_status``, ``.result``; the
        message has the stderr tail), or the host command failed.

    Returns ``{"broker_id", "host", "command", "exit_status", "stdout_tail", "stderr_tail",
    "seconds"}`` (tails: the last ``RESTART_TAIL_CHARS`` characters).
    """
    if isinstance(broker_id, bool) or not isinstance(broker_id, int):
        raise TypeError(f"broker_id must be an int, not {broker_id!r}")
    _restart_fields(command_template)  # a bad template is refused before anything else
    _limit(float(timeout))  # a bad timeout is refused before anything else
    gate = _gate(session, broker_id, "run the restart command")
    address = hook.resolve(broker_id)
    gate.require_broker(broker_id, address.host)
    command = render_restart_command(command_template, broker_id, address.host)
    result = run_host_command(hook, address, command, timeout=timeout, what="restart command")
    return {"broker_id": broker_id, **result}


def run_host_command(
    hook: BrokerHostHook, address: BrokerAddress, command: str, *, timeout: float, what: str
) -> dict[str, Any]:
    """Run an already rendered command on ``address``'s host under the supervisor (see
    :func:`run_restart_command`: its own process group, SIGTERM then SIGKILL at the limit). The
    caller has checked its session gate and rendered the template.

    :param what: the command's name in logs and errors (``restart command``, ``kraft_format_command`` ...).
    :raises BrokerHostTimeoutError: past ``timeout`` (``.command``, ``.result``).
    :raises BrokerHostCommandError: a non-zero exit status (``.exit_status``, ``.result``).

    Returns ``{"host", "command", "exit_status", "stdout_tail", "stderr_tail", "seconds"}``.
    """
    node = address.broker_id
    command_limit = float(timeout)
    limit_s = _limit(command_limit) + RESTART_KILL_GRACE_S + 5  # the host's backstop alarm
    where = (node, address.host, address.port)
    request = {
        "limit_s": limit_s,
        "command": command,
        "command_limit_s": command_limit,
        "kill_grace_s": RESTART_KILL_GRACE_S,
        "tail_chars": RESTART_TAIL_CHARS,
    }
    log.info("Node %d (%s): running %s %s (limit %gs)", node, address.host, what, command, command_limit)
    started = time.monotonic()
    try:
        records = run_remote(
            hook, address, request, limit_s, script=_RESTART_REMOTE, what="restart", done_status="restarted"
        )
    except BrokerHostTimeoutError as exc:
        log.error("Node %d (%s): %s %s: no answer in time", node, address.host, what, command)
        error = BrokerHostTimeoutError(
            *where,
            f"{what} {command!r} ran past its time limit of {command_limit:g}s and the host did not "
            f"answer within {limit_s}s (its supervisor stops the command's process group at the limit)",
        )
        error.command = command  # type: ignore[attr-defined]
        raise error from exc
    done = next((r for r in records if r.get("t") == "restart"), None)
    if done is None:
        raise BrokerHostCommandError(*where, f"the command supervisor gave no result for {command!r}")
    result = {
        "host": address.host,
        "command": command,
        "exit_status": done.get("exit_status"),
        "stdout_tail": done.get("stdout_tail") or "",
        "stderr_tail": done.get("stderr_tail") or "",
        "seconds": done.get("seconds", round(time.monotonic() - started, 3)),
    }
    if done.get("timed_out"):
        log.error(
            "Node %d (%s): %s %s ran past %gs; its process group was stopped",
            node,
            address.host,
            what,
            command,
            command_limit,
        )
        error = BrokerHostTimeoutError(
            *where,
            f"{what} {command!r} ran past its time limit of {command_limit:g}s and was stopped "
            f"on the host (SIGTERM to its process group, SIGKILL after {RESTART_KILL_GRACE_S}s)",
        )
        error.command = command  # type: ignore[attr-defined]
        error.result = result  # type: ignore[attr-defined]
        raise error
    status = result["exit_status"]
    if status != 0:
        tail = result["stderr_tail"][-1000:].strip()
        log.error("Node %d (%s): %s %s failed with exit status %s", node, address.host, what, command, status)
        error = BrokerHostCommandError(
            *where,
            f"{what} {command!r} failed with exit status {status}"
            + (" (killed by a signal)" if isinstance(status, int) and status < 0 else "")
            + (f": {tail}" if tail else ""),
        )
        error.exit_status = status  # type: ignore[attr-defined]
        error.result = result  # type: ignore[attr-defined]
        raise error
    log.info("Node %d (%s): %s %s exited 0 after %.1fs", node, address.host, what, command, result["seconds"])
    return result
