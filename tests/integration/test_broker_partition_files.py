"""The partition-file repair's guards against real damage: a real sshd on loopback runs the host
scripts on this machine's filesystem; the broker host's log dirs are built by hand under ``tmp_path``.

Each guard's test first shows the damage the obvious implementation does (reading or unlinking
``<log dir>/<dir>/<file>`` by path; removing what was backed up without checking it again; closing
the SSH channel of a hung command), on a twin of the layout where that is destructive, then the
refusal and that nothing on disk changed: a recursive listing of the whole tree (path, type,
symlink target, size, sha256) before and after.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kafka_zk.hooks import broker_partition_files
from airflow_provider_kafka_zk.hooks.broker_host import (
    BrokerAddress,
    BrokerHostCommandError,
    BrokerHostHook,
    BrokerHostTimeoutError,
)
from airflow_provider_kafka_zk.hooks.broker_partition_files import (
    PARTITION_FILE_NAMES,
    PartitionFile,
    PartitionFilePathError,
    PartitionFilesOutsideSessionError,
    read_partition_files,
    remove_partition_files,
    render_restart_command,
    restore_partition_files,
    run_restart_command,
)
from airflow_provider_kafka_zk.hooks.broker_quarantine import run_remote
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

ADDRESS = "127.0.0.12"
BROKER = 1
DELETE_DIR = "orders-0.0123456789abcdef0123456789abcdef-delete"
METADATA = b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
METADATA_NEW = b"version: 0\ntopic_id: BBBBBBBBBBBBBBBBBBBBBB\n"
EPOCHS = b"0\n2\n0 0\n4 1200\n"
VICTIM = b"version: 0\ntopic_id: VVVVVVVVVVVVVVVVVVVVVV\n"  # another partition's file, outside


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# Fixtures: one sshd, one hook, a broker host laid out by hand
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer((ADDRESS,), work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def hook(sshd) -> Iterator[BrokerHostHook]:
    fields = sshd.airflow_connection_fields(ADDRESS, conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_PARTITION_FILES_SSH", json.dumps(fields))
        yield BrokerHostHook(
            "partition_files_ssh", None, broker_hosts={BROKER: ADDRESS}, connect_timeout=5, connect_attempts=1
        )


@dataclass
class Host:
    root: Path  # everything the tests compare lives under here
    data: Path
    log_dirs: tuple[str, ...]
    outside: Path  # another directory's partition files, where planted symlinks point

    def file(self, dir_name: str, name: str = "partition.metadata", log_dir: int = 0) -> PartitionFile:
        return PartitionFile(self.log_dirs[log_dir], dir_name, name)

    def on_disk(self, file: PartitionFile) -> Path:
        return Path(file.log_dir) / file.dir_name / file.name


def build_host(root: Path) -> Host:
    data = root / "host" / "data"
    log_dirs = (data / "kafka-logs-0", data / "kafka-logs-1")
    for log_dir in log_dirs:
        log_dir.mkdir(parents=True)
        (log_dir / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=abc\n")
    for log_dir, name in ((log_dirs[0], "orders-0"), (log_dirs[0], "orders-1"), (log_dirs[1], "payments-3")):
        (log_dir / name).mkdir()
        (log_dir / name / "00000000000000000000.log").write_bytes(name.encode() * 10)
        (log_dir / name / "partition.metadata").write_bytes(METADATA)
        (log_dir / name / "leader-epoch-checkpoint").write_bytes(EPOCHS)
    (log_dirs[0] / DELETE_DIR).mkdir()
    (log_dirs[0] / DELETE_DIR / "partition.metadata").write_bytes(METADATA)
    outside = root / "outside"
    (outside / "other-7").mkdir(parents=True)
    (outside / "other-7" / "partition.metadata").write_bytes(VICTIM)
    (outside / "other-7" / "leader-epoch-checkpoint").write_bytes(EPOCHS)
    return Host(root, data, tuple(str(d) for d in log_dirs), outside)


@pytest.fixture
def host(tmp_path) -> Host:
    return build_host(tmp_path / "broker")


@pytest.fixture
def twin(tmp_path) -> Host:
    """The same layout elsewhere: where the obvious implementation shows its damage."""
    return build_host(tmp_path / "twin")


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``root``: type, symlink target, size and sha256 (never following links)."""
    out: dict[str, tuple[Any, ...]] = {}
    for base, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(base) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("fifo",)
            else:
                out[rel] = ("file", st.st_size, sha(path.read_bytes()))
    return out


class PinnedBroker:
    """The part of a MaintenanceSession the removal checks: broker ``BROKER`` at ``ADDRESS`` was pinned.

    The session's own pinning (meta.properties vs /cluster/id) is tested end to end in
    test_safety_deletion.py; here the host-side guards are under test.
    """

    def __init__(self, host: str = ADDRESS) -> None:
        self.host = host
        self.asked: list[tuple[int, str]] = []

    def require_broker(self, broker_id: int, host: str) -> None:
        self.asked.append((broker_id, host))
        assert (broker_id, host) == (BROKER, self.host)


def read(hook: BrokerHostHook, host: Host, files: list[PartitionFile], **kwargs: Any) -> list[dict[str, Any]]:
    kwargs.setdefault("log_dirs", host.log_dirs)
    kwargs.setdefault("timeout", 30)
    return read_partition_files(hook, BROKER, files, **kwargs)


def remove(
    hook: BrokerHostHook, host: Host, removals: list[tuple[PartitionFile, str]], **kwargs: Any
) -> list[dict[str, Any]]:
    kwargs.setdefault("session", PinnedBroker())
    kwargs.setdefault("log_dirs", host.log_dirs)
    kwargs.setdefault("dry_run", False)
    kwargs.setdefault("timeout", 30)
    return remove_partition_files(hook, BROKER, removals, **kwargs)


def raw(hook: BrokerHostHook, request: dict[str, Any], limit_s: int = 20) -> list[dict[str, Any]]:
    """The host script's answer to a request that skipped the Airflow-side checks (defence in depth)."""
    request = {"limit_s": limit_s, **request}
    records = run_remote(
        hook,
        hook.resolve(BROKER),
        request,
        limit_s,
        script=broker_partition_files._PARTITION_REMOTE,
        what="partition files",
        done_status="removed",
    )
    assert records[-1] == {"t": "end"}
    return [r for r in records if r["t"] == "file"]


def statuses(results: list[dict[str, Any]]) -> list[str]:
    return [r["status"] for r in results]


def no_connection(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("connected although the request was refused")


def naive_read(file: PartitionFile) -> bytes:
    """The obvious backup: read the path (follows every symlink on the way)."""
    return (Path(file.log_dir) / file.dir_name / file.name).read_bytes()


def naive_remove(file: PartitionFile, backup_sha256: str) -> bool:
    """The obvious removal: hash the path, compare with the backup, unlink the path."""
    path = Path(file.log_dir) / file.dir_name / file.name
    if sha(path.read_bytes()) != backup_sha256:
        return False
    os.unlink(path)
    return True


def in_twin(host: Host, twin: Host, file: PartitionFile) -> PartitionFile:
    swap = {a: b for a, b in zip(host.log_dirs, twin.log_dirs, strict=True)}
    return dataclasses.replace(file, log_dir=swap.get(file.log_dir, file.log_dir))


# ---------------------------------------------------------------------------------------------
# Reading: exact bytes, no symlink, only small regular files
# ---------------------------------------------------------------------------------------------


def test_read_returns_the_exact_bytes_and_sha256_and_changes_nothing(host, hook):
    (Path(host.log_dirs[1]) / "payments-3" / "leader-epoch-checkpoint").chmod(0o640)
    files = [
        host.file("orders-0"),
        host.file("payments-3", "leader-epoch-checkpoint", log_dir=1),
        host.file("orders-9"),  # no such partition directory
    ]
    (Path(host.log_dirs[0]) / "orders-1" / "partition.metadata").unlink()
    files.append(host.file("orders-1"))  # the directory is there, the file is not
    before = snapshot(host.root)
    results = read(hook, host, files)
    assert statuses(results) == ["present", "present", "absent", "absent"]
    first, second, no_dir, no_file = results
    assert first == {
        "path": f"{host.log_dirs[0]}/orders-0/partition.metadata",
        "log_dir": host.log_dirs[0],
        "dir_name": "orders-0",
        "name": "partition.metadata",
        "status": "present",
        "size": len(METADATA),
        "sha256": sha(METADATA),
        "content_b64": base64.b64encode(METADATA).decode(),
        "mode": 0o644 & ~_umask(),
        "detail": None,
    }
    assert base64.b64decode(second["content_b64"]) == EPOCHS and second["sha256"] == sha(EPOCHS)
    assert second["mode"] == 0o640
    assert no_dir["detail"] == f"no partition directory {host.log_dirs[0]}/orders-9"
    assert no_file["detail"] == "no such file" and no_file["content_b64"] is None
    assert snapshot(host.root) == before


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _plant_read_link(host: Host, case: str) -> tuple[PartitionFile, tuple[str, ...], str]:
    """Plant the symlink for ``case``: (file to read, log dirs, the component refused)."""
    log_dirs = host.log_dirs
    if case == "file":
        path = Path(host.log_dirs[0]) / "orders-0" / "partition.metadata"
        path.unlink()
        path.symlink_to(host.outside / "other-7" / "partition.metadata")
        return host.file("orders-0"), log_dirs, str(path)
    if case == "partition dir":
        link = Path(host.log_dirs[0]) / "orders-5"
        link.symlink_to(host.outside / "other-7")
        return host.file("orders-5"), log_dirs, str(link)
    # another tree holding an orders-0 with another partition's file, reached through a link
    (host.outside / "kafka-logs-0" / "orders-0").mkdir(parents=True)
    (host.outside / "kafka-logs-0" / "orders-0" / "partition.metadata").write_bytes(VICTIM)
    if case == "log dir component":
        link = host.root / "host" / "link"
        link.symlink_to(host.outside)
        log_dirs = (str(link / "kafka-logs-0"), *host.log_dirs[1:])
        return PartitionFile(log_dirs[0], "orders-0", "partition.metadata"), log_dirs, str(link)
    if case == "log dir itself":
        link = host.data / "kafka-logs-9"
        link.symlink_to(host.outside / "kafka-logs-0")
        log_dirs = (*host.log_dirs, str(link))
        return PartitionFile(str(link), "orders-0", "partition.metadata"), log_dirs, str(link)
    raise AssertionError(case)


READ_LINK_CASES = ["file", "partition dir", "log dir component", "log dir itself"]


@pytest.mark.parametrize("case", READ_LINK_CASES)
def test_a_symlink_anywhere_is_refused_by_the_read(case, host, hook):
    file, log_dirs, component = _plant_read_link(host, case)
    # The damage: reading the path backs up another partition's file as if it were this one's.
    assert naive_read(file) == VICTIM
    before = snapshot(host.root)
    [result] = read(hook, host, [file], log_dirs=log_dirs)
    assert result["status"] == "refused", result
    assert component in result["detail"] and "symlink" in result["detail"], result["detail"]
    assert result["content_b64"] is None and result["sha256"] is None
    assert snapshot(host.root) == before


def test_the_read_refuses_non_regular_and_oversized_files(host, hook):
    fifo = Path(host.log_dirs[0]) / "orders-0" / "partition.metadata"
    fifo.unlink()
    os.mkfifo(fifo)
    big = Path(host.log_dirs[0]) / "orders-1" / "leader-epoch-checkpoint"
    big.write_bytes(b"0\n" * ((1 << 20) // 2 + 1))
    # The damage: open() on the FIFO blocks until a writer comes (a backup that hangs forever); the
    # big file would be shipped whole into XCom.
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and big.stat().st_size > 1 << 20
    exactly = Path(host.log_dirs[1]) / "payments-3" / "leader-epoch-checkpoint"
    exactly.write_bytes(b"x" * (1 << 20))  # the limit itself is fine
    before = snapshot(host.root)
    started = time.monotonic()
    results = read(
        hook,
        host,
        [
            host.file("orders-0"),
            host.file("orders-1", "leader-epoch-checkpoint"),
            host.file("payments-3", "leader-epoch-checkpoint", 1),
        ],
    )
    assert time.monotonic() - started < 10
    assert statuses(results) == ["refused", "refused", "present"]
    assert results[0]["detail"] == f"{fifo} is not a regular file"
    assert results[1]["detail"] == f"{big} is larger than {1 << 20} bytes"
    assert results[2]["size"] == 1 << 20
    assert snapshot(host.root) == before


# ---------------------------------------------------------------------------------------------
# The rules: refused before connecting, and again by the script on the host
# ---------------------------------------------------------------------------------------------

# case -> (file fields over the host's defaults, log dirs override or None, rule in the message)
BAD_FILES: dict[str, tuple[Any, Any, str]] = {
    # a directory Kafka is deleting or moving: its files are not the live replica's
    "a -delete directory": (lambda h: {"dir_name": DELETE_DIR}, None, "is a -delete directory"),
    "a -future directory": (
        lambda h: {"dir_name": "orders-0.0123456789abcdef0123456789abcdef-future"},
        None,
        "is a -future directory",
    ),
    "a -stray directory": (
        lambda h: {"dir_name": "orders-0.0123456789abcdef0123456789abcdef-stray"},
        None,
        "is a -stray directory",
    ),
    "not a partition directory": (
        lambda h: {"dir_name": "orders"},
        None,
        "must name a live partition directory",
    ),
    "a name escaping the log dir": (lambda h: {"dir_name": ".."}, None, "one plain path component"),
    "a path as the directory name": (
        lambda h: {"dir_name": "orders-0/../orders-1"},
        None,
        "one plain path component",
    ),
    # the broker's identity, a segment: never one of these files
    "meta.properties": (
        lambda h: {"dir_name": "orders-0", "name": "../meta.properties"},
        None,
        "must be one of",
    ),
    "a segment": (lambda h: {"name": "00000000000000000000.log"}, None, "must be one of"),
    "a log dir not of this broker": (
        lambda h: {"log_dir": str(h.outside)},
        "as given",
        "is not one of the broker's log dirs",
    ),
    "dot-dot in the log dir": (
        lambda h: {"log_dir": f"{h.log_dirs[1]}/../kafka-logs-0"},
        "add",
        "must not contain . or ..",
    ),
    "a relative log dir": (lambda h: {"log_dir": "kafka-logs-0"}, "add", "must be absolute"),
    "a trailing slash": (lambda h: {"log_dir": h.log_dirs[0] + "/"}, "add", "must not end with a slash"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_are_refused_before_connecting_and_by_the_script(case, host, hook, monkeypatch):
    build, log_dirs_mode, rule = BAD_FILES[case]
    fields = {
        "log_dir": host.log_dirs[0],
        "dir_name": "orders-0",
        "name": "partition.metadata",
        **build(host),
    }
    file = PartitionFile(**fields)
    log_dirs = list(host.log_dirs)
    if log_dirs_mode == "add":
        log_dirs.append(fields["log_dir"])  # as a confused caller would pass it
    target = Path(os.path.normpath(Path(host.log_dirs[0]) / file.log_dir / file.dir_name / file.name))
    backup = sha(target.read_bytes()) if target.is_file() else sha(b"")
    before = snapshot(host.root)

    with monkeypatch.context() as patch:
        patch.setattr(hook, "connect", no_connection)
        patch.setattr(hook, "resolve", no_connection)
        with pytest.raises(PartitionFilePathError, match=rule) as error:
            read(hook, host, [file], log_dirs=log_dirs)
        assert isinstance(error.value, ValueError) and error.value.rule in str(error.value)
        with pytest.raises(PartitionFilePathError, match=rule):
            remove(hook, host, [(file, backup)], log_dirs=log_dirs)

    # Defence in depth: the same request sent straight to the host is refused there.
    request_file = dict(fields)
    [read_record] = raw(hook, {"mode": "read", "log_dirs": log_dirs, "files": [request_file]})
    assert read_record["status"] == "refused" and rule in read_record["detail"], read_record
    [removal] = raw(
        hook,
        {
            "mode": "remove",
            "dry_run": False,
            "log_dirs": log_dirs,
            "files": [{**request_file, "sha256": backup}],
        },
    )
    assert removal["status"] == "refused" and rule in removal["detail"], removal
    assert snapshot(host.root) == before


def test_the_backup_sha256_and_the_log_dirs_are_checked(host, hook, monkeypatch):
    file = host.file("orders-0")
    monkeypatch.setattr(hook, "connect", no_connection)
    with pytest.raises(PartitionFilePathError, match="must be a sha256"):
        remove(hook, host, [(file, "not-a-sha")])
    with pytest.raises(PartitionFilePathError, match="must be a sha256"):
        remove(hook, host, [(file, sha(METADATA).upper())])
    with pytest.raises(PartitionFilePathError, match="is named twice"):
        remove(hook, host, [(file, sha(METADATA)), (file, sha(METADATA))])
    with pytest.raises(PartitionFilePathError, match="every log dir"):
        read(hook, host, [file], log_dirs=[])
    with pytest.raises(PartitionFilePathError, match="every log dir"):
        read(hook, host, [file], log_dirs=host.log_dirs[0])  # a string, not a list


# ---------------------------------------------------------------------------------------------
# Removing: symlinks, the backup's sha256, all or nothing, dry run, retry, session
# ---------------------------------------------------------------------------------------------


def _plant_remove_link(host: Host, case: str) -> tuple[PartitionFile, str]:
    """Plant the symlink for ``case`` in ``host``: (the file to remove, the component refused)."""
    if case == "partition dir":  # orders-5 -> another partition's directory
        link = Path(host.log_dirs[0]) / "orders-5"
        link.symlink_to(host.outside / "other-7")
        return host.file("orders-5"), str(link)
    if case == "file":
        path = Path(host.log_dirs[0]) / "orders-0" / "partition.metadata"
        path.unlink()
        path.symlink_to(host.outside / "other-7" / "partition.metadata")
        return host.file("orders-0"), str(path)
    if case == "log dir component":  # the whole data dir swapped for a link to another tree
        real = host.root / "host" / "data-real"
        host.data.rename(real)
        host.data.symlink_to(real)
        return host.file("orders-0"), str(host.data)
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["partition dir", "file", "log dir component"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_symlink_anywhere_is_refused_and_nothing_is_removed(case, dry_run, host, twin, hook):
    file, component = _plant_remove_link(host, case)
    twin_file, _ = _plant_remove_link(twin, case)
    backup = sha(naive_read(twin_file))  # the obvious backup read through the link, too
    if case == "partition dir":
        # The damage: the other partition's partition.metadata is gone.
        assert naive_remove(twin_file, backup)
        assert not (twin.outside / "other-7" / "partition.metadata").exists()
    good = host.file("orders-1")  # a file that passes every check: held back with the other
    before = snapshot(host.root)
    results = remove(hook, host, [(good, sha(METADATA)), (file, backup)], dry_run=dry_run)
    assert statuses(results) == ["refused", "refused"], results
    assert component in results[1]["detail"] and "symlink" in results[1]["detail"], results[1]
    if case == "log dir component":  # the good file's path goes through the link too
        assert component in results[0]["detail"] and "symlink" in results[0]["detail"], results[0]
    else:
        assert results[0]["detail"].startswith("nothing is removed on this broker")
        assert f"{file.path} refused" in results[0]["detail"]
    assert snapshot(host.root) == before
    assert (host.outside / "other-7" / "partition.metadata").read_bytes() == VICTIM


def test_a_file_changed_after_the_backup_means_nothing_is_removed_on_the_broker(host, twin, hook):
    files = [
        host.file("orders-0"),
        host.file("orders-1"),
        host.file("payments-3", "leader-epoch-checkpoint", 1),
    ]
    backups = read(hook, host, files)
    assert statuses(backups) == ["present"] * 3
    # Kafka rewrote one file after the backup (a new topic id, as after a controller change).
    half = build_host(host.root.parent / "half")
    for h in (host, twin, half):
        (Path(h.log_dirs[0]) / "orders-1" / "partition.metadata").write_bytes(METADATA_NEW)
    # The damage: removing what was backed up, unchecked, loses content no backup holds.
    for file in files:
        os.unlink(twin.on_disk(in_twin(host, twin, file)))
    assert sha(METADATA_NEW) not in {b["sha256"] for b in backups}
    # Checking each file on its own leaves a half-repaired broker: two removed, one not.
    assert [
        naive_remove(in_twin(host, half, f), b["sha256"]) for f, b in zip(files, backups, strict=True)
    ] == [
        True,
        False,
        True,
    ]

    before = snapshot(host.root)
    for dry_run in (True, False):
        results = remove(
            hook, host, [(f, b["sha256"]) for f, b in zip(files, backups, strict=True)], dry_run=dry_run
        )
        assert statuses(results) == ["refused", "changed", "refused"], results
        assert results[1]["sha256"] == sha(METADATA_NEW) and results[1]["expected_sha256"] == sha(METADATA)
        assert "differs from the backup" in results[1]["detail"]
        assert (
            f"{files[1].path} changed" in results[0]["detail"]
            and f"{files[1].path} changed" in results[2]["detail"]
        )
        assert snapshot(host.root) == before


def test_dry_run_removes_nothing_a_real_run_removes_and_a_retry_is_already_absent(host, hook):
    files = [
        host.file("orders-0"),
        host.file("orders-0", "leader-epoch-checkpoint"),
        host.file("payments-3", log_dir=1),
    ]
    backups = read(hook, host, files)
    removals = [(f, b["sha256"]) for f, b in zip(files, backups, strict=True)]
    before = snapshot(host.root)

    dry = remove(hook, host, removals, dry_run=True, session=None)  # a dry run needs no session
    assert statuses(dry) == ["would_remove"] * 3
    assert [r["sha256"] for r in dry] == [sha(METADATA), sha(EPOCHS), sha(METADATA)]
    assert snapshot(host.root) == before

    gate = PinnedBroker()
    done = remove(hook, host, removals, session=gate)
    assert gate.asked == [(BROKER, ADDRESS)]
    assert statuses(done) == ["removed"] * 3
    assert [r["path"] for r in done] == [f.path for f in files]
    after = snapshot(host.root)
    gone = {str(Path(f.path).relative_to(host.root)) for f in files}
    assert set(before) - set(after) == gone
    assert {k: v for k, v in before.items() if k not in gone} == after  # nothing else touched

    retry = remove(hook, host, removals)
    assert statuses(retry) == ["already_absent"] * 3
    assert snapshot(host.root) == after


def restore(
    hook: BrokerHostHook, host: Host, restores: list[tuple[PartitionFile, bytes, str | None]], **kwargs: Any
) -> list[dict[str, Any]]:
    kwargs.setdefault("session", PinnedBroker())
    kwargs.setdefault("log_dirs", host.log_dirs)
    kwargs.setdefault("dry_run", False)
    kwargs.setdefault("timeout", 30)
    return restore_partition_files(hook, BROKER, restores, **kwargs)


def test_an_undo_writes_a_removed_file_back_only_over_what_it_planned_against(host, hook):
    """The undo of a file_reset: the broker rewrote partition.metadata (the new id) after the repair
    removed it; the old copy goes back only over exactly that file (or where it is still absent), all
    or none per broker, through a temporary file and a rename; a retry finds it done."""
    rewritten, absent = host.file("orders-0"), host.file("payments-3", log_dir=1)
    host.on_disk(rewritten).write_bytes(METADATA_NEW)
    host.on_disk(absent).unlink()
    os.chmod(host.on_disk(rewritten), 0o640)
    planned = [(rewritten, METADATA, sha(METADATA_NEW)), (absent, METADATA, None)]
    before = snapshot(host.root)

    dry = restore(hook, host, planned, dry_run=True, session=None)
    assert statuses(dry) == ["would_restore", "would_restore"] and snapshot(host.root) == before

    # someone changed one of them since the plan: nothing is written on the broker, the other included
    host.on_disk(rewritten).write_bytes(VICTIM)
    held = restore(hook, host, planned)
    assert (
        statuses(held) == ["changed", "refused"] and "nothing is written on this broker" in held[1]["detail"]
    )
    assert not host.on_disk(absent).exists()
    host.on_disk(rewritten).write_bytes(METADATA_NEW)

    gate = PinnedBroker()
    done = restore(hook, host, planned, session=gate)
    assert gate.asked == [(BROKER, ADDRESS)] and statuses(done) == ["restored", "restored"]
    assert host.on_disk(rewritten).read_bytes() == METADATA == host.on_disk(absent).read_bytes()
    assert stat.S_IMODE(host.on_disk(rewritten).stat().st_mode) == 0o640  # the replaced file's mode
    after = snapshot(host.root)
    assert not [k for k in after if ".kafka-zk-restore." in k]  # no temporary file left
    assert {k for k in after if after[k] != before.get(k)} == {
        str(Path(f.path).relative_to(host.root)) for f, _, _ in planned
    }
    assert statuses(restore(hook, host, planned)) == ["already_restored", "already_restored"]
    assert snapshot(host.root) == after


def test_an_undo_never_writes_through_a_symlink_or_without_a_session(host, twin, hook, monkeypatch):
    metadata = host.file("orders-1")
    target = twin.on_disk(twin.file("orders-1"))
    host.on_disk(metadata).unlink()
    host.on_disk(metadata).symlink_to(target)  # a planted link: the write must not land in the twin
    before, twin_before = snapshot(host.root), snapshot(twin.root)
    (result,) = restore(hook, host, [(metadata, METADATA_NEW, sha(METADATA))])
    assert result["status"] == "refused" and "symlink" in result["detail"]
    assert snapshot(host.root) == before and snapshot(twin.root) == twin_before
    with monkeypatch.context() as patch:
        patch.setattr(hook, "connect", no_connection)
        with pytest.raises(PartitionFilesOutsideSessionError, match="outside a maintenance session"):
            restore(hook, host, [(host.file("orders-0"), METADATA, None)], session=None)


def test_a_real_removal_needs_a_session_and_is_refused_before_connecting(host, hook, monkeypatch):
    removals = [(host.file("orders-0"), sha(METADATA))]
    before = snapshot(host.root)
    with monkeypatch.context() as patch:
        patch.setattr(hook, "connect", no_connection)
        patch.setattr(hook, "resolve", no_connection)
        with pytest.raises(PartitionFilesOutsideSessionError, match="outside a maintenance session"):
            remove(hook, host, removals, session=None)
    assert isinstance(PartitionFilesOutsideSessionError("x"), PermissionError)
    # A session that pinned another host is asked, and its refusal stops the removal too.
    with pytest.raises(AssertionError):
        remove(hook, host, removals, session=PinnedBroker(host="127.0.0.99"))
    assert snapshot(host.root) == before


def _held_open_by_some_process(path: Path) -> bool:
    target = str(path)
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == target for fd in fd_dir.iterdir()):
                return True
        except OSError:  # the process ended, or is not ours
            continue
    return False


def test_a_file_replaced_between_the_check_and_the_unlink_is_kept(host, hook):
    metadata = host.file("orders-0")
    path = host.on_disk(metadata)
    # The damage: hash, then (Kafka rewrites the file: temp file + rename), then unlink by path --
    # the new file is removed, and it was never backed up.
    twin_dir = host.root.parent / "twin-replace"
    twin_dir.mkdir()
    (twin_dir / "partition.metadata").write_bytes(METADATA)
    hashed = sha((twin_dir / "partition.metadata").read_bytes())
    (twin_dir / "partition.metadata.tmp").write_bytes(METADATA_NEW)
    os.replace(twin_dir / "partition.metadata.tmp", twin_dir / "partition.metadata")
    assert hashed == sha(METADATA)
    os.unlink(twin_dir / "partition.metadata")  # what the obvious remover does next: new content lost

    def kafka_rewrites() -> None:
        # Right after the host opened the file for its check (whatever the machine's load), while
        # it pauses before the removal: the rename lands between the check and the unlink.
        deadline = time.monotonic() + 120
        while not _held_open_by_some_process(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        tmp = path.with_name("partition.metadata.tmp")
        tmp.write_bytes(METADATA_NEW)
        os.replace(tmp, path)

    writer = threading.Thread(target=kafka_rewrites)
    writer.start()
    try:
        results = remove(
            hook, host, [(host.file("orders-1"), sha(METADATA)), (metadata, sha(METADATA))], _test_pause_s=3
        )
    finally:
        writer.join()
    assert statuses(results) == ["refused", "changed"], results
    assert results[1]["detail"] == "it was replaced after the check (another inode)"
    assert path.read_bytes() == METADATA_NEW
    assert host.on_disk(host.file("orders-1")).read_bytes() == METADATA  # held back


def test_the_time_limit_stops_the_removal_on_the_host(host, hook):
    before = snapshot(host.root)
    started = time.monotonic()
    with pytest.raises(BrokerHostTimeoutError) as error:
        remove(hook, host, [(host.file("orders-0"), sha(METADATA))], timeout=1, _test_pause_s=30)
    assert time.monotonic() - started < 1 + 10
    message = str(error.value)
    assert f"broker {BROKER} on {ADDRESS}" in message and "partition files command" in message
    assert "time limit of 1s" in message and "nothing was removed" in message
    assert snapshot(host.root) == before


def test_partition_file_names_are_the_two_kafka_files():
    assert PARTITION_FILE_NAMES == ("partition.metadata", "leader-epoch-checkpoint")
    assert (
        PartitionFile("/d/kafka-logs", "t-0", "partition.metadata").path
        == "/d/kafka-logs/t-0/partition.metadata"
    )


# ---------------------------------------------------------------------------------------------
# The restart command
# ---------------------------------------------------------------------------------------------


def processes_with_argv(argv: list[bytes]) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[: len(argv)] == argv:
                found.append(int(pid))
        except OSError:
            continue
    return found


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_restart_runs_the_command_and_reports_how_it_ended(hook):
    gate = PinnedBroker()
    result = run_restart_command(
        hook, BROKER, "echo restarting broker {broker_id} on {host}; echo note >&2", timeout=20, session=gate
    )
    assert gate.asked == [(BROKER, ADDRESS)]
    assert result["command"] == f"echo restarting broker 1 on {ADDRESS}; echo note >&2"
    assert {k: result[k] for k in ("broker_id", "host", "exit_status", "stdout_tail", "stderr_tail")} == {
        "broker_id": BROKER,
        "host": ADDRESS,
        "exit_status": 0,
        "stdout_tail": f"restarting broker 1 on {ADDRESS}\n",
        "stderr_tail": "note\n",
    }
    assert 0 <= result["seconds"] < 20


def test_restart_values_are_quoted_and_cannot_inject_shell(hook, tmp_path, monkeypatch):
    pwned = tmp_path / "pwned"
    hostile = f"h$(touch {pwned})';touch {pwned};'`touch {pwned}`"
    template = "printf '%s|%s\\n' {broker_id} {host}"
    # The damage: str.format puts the host into the shell line as it is.
    subprocess.run(
        ["/bin/sh", "-c", template.format(broker_id=BROKER, host=hostile)], capture_output=True, check=False
    )
    assert pwned.exists()
    pwned.unlink()

    # A registration whose host is hostile; the connection still goes to the test sshd.
    real_connect = hook.connect
    monkeypatch.setattr(hook, "resolve", lambda broker_id: BrokerAddress(broker_id, hostile, 22, "zookeeper"))
    monkeypatch.setattr(
        hook, "connect", lambda address: real_connect(BrokerAddress(BROKER, ADDRESS, _port(hook), "x"))
    )
    result = run_restart_command(hook, BROKER, template, timeout=20, session=PinnedBroker(host=hostile))
    assert result["stdout_tail"] == f"1|{hostile}\n"
    assert result["command"] == render_restart_command(template, BROKER, hostile)
    assert not pwned.exists()


def _port(hook: BrokerHostHook) -> int:
    return hook._template_port()


@pytest.mark.parametrize(
    ("template", "rule"),
    [
        ("restart {port}", "unknown placeholder {port}"),
        ("restart {}", "unknown placeholder {}"),
        ("restart {0}", "unknown placeholder {0}"),
        ("restart {host.__class__}", "unknown placeholder"),
        ("restart {host!r}", "must be plain"),
        ("restart {broker_id:>5}", "must be plain"),
        ("restart '{host}'", "inside quotes"),
        ('ssh x "restart {host}"', "inside quotes"),
        ("restart \\{host}", "after a backslash"),
        ("restart {host", "expected '}'"),
        ("   ", "non-empty"),
    ],
)
def test_a_bad_restart_template_is_refused_before_connecting(template, rule, hook, monkeypatch):
    monkeypatch.setattr(hook, "connect", no_connection)
    monkeypatch.setattr(hook, "resolve", no_connection)
    with pytest.raises(ValueError, match=re.escape(rule)):
        run_restart_command(hook, BROKER, template, timeout=5, session=PinnedBroker())


def test_restart_outside_a_session_is_refused_before_connecting(hook, monkeypatch):
    monkeypatch.setattr(hook, "connect", no_connection)
    monkeypatch.setattr(hook, "resolve", no_connection)
    with pytest.raises(PartitionFilesOutsideSessionError, match="outside a maintenance session"):
        run_restart_command(hook, BROKER, "echo {host}", timeout=5, session=None)


def test_a_failing_restart_is_a_typed_error_with_the_exit_status_and_stderr(hook):
    with pytest.raises(BrokerHostCommandError) as error:
        run_restart_command(
            hook,
            BROKER,
            "echo stopping; echo 'kafka.service: no such unit' >&2; exit 3",
            timeout=20,
            session=PinnedBroker(),
        )
    assert not isinstance(error.value, BrokerHostTimeoutError)
    message = str(error.value)
    assert f"broker {BROKER} on {ADDRESS}" in message and "exit status 3" in message
    assert "kafka.service: no such unit" in message
    assert error.value.exit_status == 3 and error.value.result["stdout_tail"] == "stopping\n"


def test_a_hung_restart_is_stopped_on_the_host_and_leaves_no_process(hook):
    argv = [b"sleep", b"37.125"]
    # The damage: closing the SSH channel of a plain exec_command leaves the command running.
    client = hook.connect(hook.resolve(BROKER))
    try:
        channel = client.get_transport().open_session()
        channel.exec_command("sleep 37.125")
        assert wait_for(lambda: bool(processes_with_argv(argv)), 10)
        channel.close()
    finally:
        client.close()
    time.sleep(1.0)
    left = processes_with_argv(argv)
    assert left, "expected the plain command to outlive its channel"
    for pid in left:  # only the sleep this test started
        os.kill(pid, 9)
    assert wait_for(lambda: not processes_with_argv(argv), 5)

    started = time.monotonic()
    with pytest.raises(BrokerHostTimeoutError) as error:
        run_restart_command(hook, BROKER, "sleep 37.125", timeout=2, session=PinnedBroker())
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 2 + 5
    message = str(error.value)
    assert f"broker {BROKER} on {ADDRESS}" in message
    assert "restart command 'sleep 37.125'" in message and "time limit of 2s" in message
    assert wait_for(lambda: not processes_with_argv(argv), 2), processes_with_argv(argv)


def test_a_restart_ignoring_sigterm_is_killed_after_the_grace(hook):
    argv = [b"sleep", b"38.25"]
    started = time.monotonic()
    with pytest.raises(BrokerHostTimeoutError, match="time limit of 1s"):
        run_restart_command(
            hook, BROKER, "trap '' TERM; sleep 38.25; echo done", timeout=1, session=PinnedBroker()
        )
    elapsed = time.monotonic() - started
    assert (
        1 + broker_partition_files.RESTART_KILL_GRACE_S
        <= elapsed
        < 1 + broker_partition_files.RESTART_KILL_GRACE_S + 5
    )
    assert wait_for(lambda: not processes_with_argv(argv), 2), processes_with_argv(argv)


def test_a_restart_that_starts_a_daemon_returns_at_once(hook):
    argv = [b"sleep", b"39.5"]
    try:
        started = time.monotonic()
        result = run_restart_command(
            hook, BROKER, "sleep 39.5 & echo started", timeout=20, session=PinnedBroker()
        )
        assert time.monotonic() - started < 10  # the daemon does not hold the SSH channel open
        assert result["stdout_tail"] == "started\n" and result["exit_status"] == 0
        assert processes_with_argv(argv)  # and it was not killed when the command ended
    finally:
        for pid in processes_with_argv(argv):  # only the sleep this test started
            os.kill(pid, 9)
