"""The quarantine's guards against real damage: a real sshd on loopback runs the remote script on
this machine's filesystem, the broker host's log dirs are built by hand under ``tmp_path``.

Each guard's test names the damage the old script did (relative quarantine: looped forever on
the host; quarantine inside a log dir or through a symlink: followed; a planted listing symlink:
written through; an orphan live-named directory: renamed under a running broker), then shows the
refusal and that nothing on disk changed: a recursive listing of the whole tree (path, type,
symlink target, size, sha256) before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kafka_zk.hooks import broker_quarantine
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook, BrokerHostTimeoutError
from airflow_provider_kafka_zk.hooks.broker_quarantine import (
    SCRIPT_MARKER,
    QuarantineMove,
    QuarantineOutsideSessionError,
    QuarantinePathError,
    quarantine_directories,
    run_remote,
)
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

ADDRESS = "127.0.0.11"
BROKER = 1
TS = "20260101T000000"
DELETE_NAME = "old-logs-1.0123456789abcdef0123456789abcdef-delete"
KAFKA_MAIN = "kafka.Kafka"


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
        patch.setenv("AIRFLOW_CONN_QUARANTINE_SSH", json.dumps(fields))
        yield BrokerHostHook(
            "quarantine_ssh", None, broker_hosts={BROKER: ADDRESS}, connect_timeout=5, connect_attempts=1
        )


@dataclass
class Host:
    root: Path  # everything the tests compare lives under here
    data: Path
    log_dirs: tuple[str, ...]
    outside: Path  # where a planted symlink points: must never change

    def move(self, name: str, log_dir: int = 0, **kwargs: Any) -> QuarantineMove:
        kind = kwargs.pop("kind", _kind(name))
        return QuarantineMove(self.log_dirs[log_dir], name, kind=kind, **kwargs)

    @property
    def quarantine(self) -> Path:
        return self.data / "kafka-quarantine"


def _kind(name: str) -> str:
    return "delete" if name.endswith("-delete") else "normal"


@pytest.fixture
def host(tmp_path) -> Host:
    data = tmp_path / "host" / "data"
    log_dirs = (data / "kafka-logs-0", data / "kafka-logs-1")
    for log_dir in log_dirs:
        log_dir.mkdir(parents=True)
        (log_dir / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=abc\n")
    for log_dir, name in (
        (log_dirs[0], "old-logs-0"),
        (log_dirs[0], DELETE_NAME),
        (log_dirs[1], "old-logs-2"),
    ):
        (log_dir / name).mkdir()
        (log_dir / name / "00000000000000000000.log").write_bytes(name.encode() * 10)
        (log_dir / name / "00000000000000000000.index").write_bytes(b"\0" * 8)
    (log_dirs[0] / "live-0").mkdir()  # a live partition: never named in a move
    (log_dirs[0] / "live-0" / "00000000000000000000.log").write_bytes(b"live")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.json").write_text("precious, not a listing\n")
    return Host(tmp_path, data, tuple(str(d) for d in log_dirs), outside)


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
            else:
                out[rel] = ("file", st.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


class PinnedBroker:
    """The part of a MaintenanceSession the move checks: broker ``BROKER`` at ``ADDRESS`` was pinned.

    The session's own pinning (meta.properties vs /cluster/id) is tested end to end in
    test_safety_deletion.py; here the host-side guards are under test.
    """

    def __init__(self) -> None:
        self.asked: list[tuple[int, str]] = []

    def require_broker(self, broker_id: int, host: str) -> None:
        self.asked.append((broker_id, host))
        assert (broker_id, host) == (BROKER, ADDRESS)


def run(hook: BrokerHostHook, host: Host, moves: list[QuarantineMove], **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("session", PinnedBroker())
    kwargs.setdefault("log_dirs", host.log_dirs)
    kwargs.setdefault("ts", TS)
    kwargs.setdefault("dry_run", False)
    kwargs.setdefault("timeout", 30)
    kwargs.setdefault("broker_running", False)
    return quarantine_directories(hook, BROKER, moves, **kwargs)


def raw(hook: BrokerHostHook, request: dict[str, Any], limit_s: int = 20) -> list[dict[str, Any]]:
    """The script's answer to a request that skipped the Airflow-side checks (defence in depth)."""
    request = {"dry_run": False, "ts": TS, "limit_s": limit_s, "broker_running": False, **request}
    records = run_remote(hook, hook.resolve(BROKER), request, limit_s)
    assert records[-1] == {"t": "end"}
    return [r for r in records if r["t"] == "move"]


def statuses(done: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["status"] for r in done["results"]}


def details(done: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r.get("detail", "") for r in done["results"]}


def kafka_pids() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if KAFKA_MAIN.encode() in args:
            found.append(int(pid))
    return found


def marker_pids() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if SCRIPT_MARKER.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
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


def start_kafka_process(properties: Path, log_dirs: Iterable[str] | None) -> subprocess.Popen[bytes]:
    """A process whose command line is a broker's (``kafka.Kafka <server.properties>``); with
    ``log_dirs`` the file is written first (None: the path is left as it is)."""
    if log_dirs is not None:
        properties.parent.mkdir(parents=True, exist_ok=True)
        properties.write_text(f"broker.id={BROKER}\nlog.dirs={','.join(log_dirs)}\n")
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", KAFKA_MAIN, str(properties)]
    )
    assert wait_for(lambda: process.pid in kafka_pids(), 10)
    return process


@pytest.fixture
def kafka_process() -> Iterator[Callable[[Path, Iterable[str] | None], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(properties: Path, log_dirs: Iterable[str] | None) -> subprocess.Popen[bytes]:
        started.append(start_kafka_process(properties, log_dirs))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def fake_broker(host, kafka_process) -> subprocess.Popen[bytes]:
    """This host's broker running: a ``kafka.Kafka`` process whose server.properties names its log dirs."""
    return kafka_process(host.root / "config" / "server.properties", host.log_dirs)


def host_broker_pids(host: Host) -> list[int]:
    """Kafka processes that may be this host's broker (their config names its log dirs or cannot be read)."""
    found = []
    for pid in kafka_pids():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            path = Path(os.fsdecode(args[args.index(KAFKA_MAIN.encode()) + 1]))
            text = (path if path.is_absolute() else Path(os.readlink(f"/proc/{pid}/cwd")) / path).read_text()
        except (OSError, IndexError, ValueError):
            found.append(pid)
            continue
        if any(d in text for d in host.log_dirs):
            found.append(pid)
    return found


@pytest.fixture
def no_broker_process(host) -> None:
    """Tests that need "this broker does not run" cannot pass while a process that may be it lives
    (another cluster's broker on this machine does not count)."""
    if not wait_for(lambda: not host_broker_pids(host), 15):
        pytest.skip(f"a {KAFKA_MAIN} process that may be this host's broker runs: {host_broker_pids(host)}")


# ---------------------------------------------------------------------------------------------
# Paths: refused before connecting, and again by the script on the host
# ---------------------------------------------------------------------------------------------

# (what is bad, builder of (move kwargs, log_dirs override) from the host, rule in the message)
BAD_PATHS = {
    # the old script looped forever in device() ('' is its own dirname): 99 % CPU, then a timeout
    "relative quarantine": (lambda h: {"quarantine": "kafka-quarantine"}, "must be absolute"),
    "dot-dot in quarantine": (
        lambda h: {"quarantine": f"{h.data}/kafka-logs-0/../kafka-quarantine"},
        "must not contain . or ..",
    ),
    "trailing slash": (lambda h: {"quarantine": f"{h.data}/kafka-quarantine/"}, "must not end with a slash"),
    "empty component": (lambda h: {"quarantine": f"{h.data}//kafka-quarantine"}, "empty component"),
    # the old script moved the directory into the log dir, where Kafka takes it for a partition
    "quarantine inside the log dir": (
        lambda h: {"quarantine": f"{h.log_dirs[0]}/quarantine"},
        "lies inside log dir",
    ),
    "quarantine inside another log dir of the broker": (
        lambda h: {"quarantine": f"{h.log_dirs[1]}/quarantine"},
        "lies inside log dir",
    ),
    "quarantine containing a log dir": (lambda h: {"quarantine": str(h.data)}, "contains log dir"),
    "quarantine is the root": (lambda h: {"quarantine": "/"}, "contains log dir"),
    "quarantine is a log dir": (lambda h: {"quarantine": h.log_dirs[1]}, "lies inside log dir"),
    "dot-dot in log dir": (
        lambda h: {"log_dir": f"{h.data}/kafka-logs-1/../kafka-logs-0"},
        "must not contain . or ..",
    ),
    "relative log dir": (lambda h: {"log_dir": "kafka-logs-0"}, "must be absolute"),
    "name escaping the log dir": (lambda h: {"name": "../kafka-logs-1"}, "one plain path component"),
}


@pytest.mark.parametrize("case", list(BAD_PATHS))
def test_bad_paths_are_refused_before_connecting_and_by_the_script(case, host, hook, monkeypatch):
    build, rule = BAD_PATHS[case]
    fields = {"log_dir": host.log_dirs[0], "name": "old-logs-0", "quarantine": None, **build(host)}
    log_dirs = list(host.log_dirs)
    if fields["log_dir"] not in log_dirs:
        log_dirs.append(fields["log_dir"])  # as a confused caller would pass it
    before = snapshot(host.root)

    def no_connection(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("connected although a path was bad")

    with monkeypatch.context() as patch:
        patch.setattr(hook, "connect", no_connection)
        patch.setattr(hook, "resolve", no_connection)
        with pytest.raises(QuarantinePathError, match=rule) as error:
            run(hook, host, [QuarantineMove(**fields)], log_dirs=log_dirs)
    assert isinstance(error.value, ValueError) and error.value.rule in str(error.value)

    # Defence in depth: the same request sent straight to the host is refused there (an answer, not
    # the time limit's error).
    [record] = raw(hook, {"log_dirs": log_dirs, "moves": [{**fields, "kind": "normal"}]})
    assert record["status"] == "refused" and rule in record["detail"], record
    assert snapshot(host.root) == before


def test_every_log_dir_of_the_broker_is_required(host, hook):
    with pytest.raises(QuarantinePathError, match="every log dir"):
        run(hook, host, [host.move("old-logs-0")], log_dirs=[])
    with pytest.raises(QuarantinePathError, match="not one of the broker's log dirs"):
        run(hook, host, [host.move("old-logs-0")], log_dirs=host.log_dirs[1:])


# ---------------------------------------------------------------------------------------------
# Symlinks: never followed, wherever they are
# ---------------------------------------------------------------------------------------------


def _plant(host: Host, case: str) -> tuple[list[QuarantineMove], tuple[str, ...], str]:
    """Plant the symlink for ``case``; return the moves, the log dirs and the refused component."""
    moves = [host.move("old-logs-0"), host.move(DELETE_NAME)]
    log_dirs = host.log_dirs
    if case == "kafka-quarantine folder":  # old: makedirs followed it, the dirs landed in outside/
        host.quarantine.symlink_to(host.outside)
        return moves, log_dirs, str(host.quarantine)
    if case == "ts dir":  # old: renamed into outside/ through the link
        host.quarantine.mkdir()
        (host.quarantine / TS).symlink_to(host.outside)
        return moves, log_dirs, str(host.quarantine / TS)
    if case == "listing file":  # old: read through it; its .tmp twin was written through
        (host.quarantine / TS).mkdir(parents=True)
        (host.quarantine / TS / "quarantine-listing.json").symlink_to(host.outside / "victim.json")
        return moves, log_dirs, str(host.quarantine / TS / "quarantine-listing.json")
    if case == "dangling next listing":
        (host.quarantine / TS).mkdir(parents=True)
        (host.quarantine / TS / "quarantine-listing.1.json").symlink_to(host.outside / "created.json")
        return moves, log_dirs, str(host.quarantine / TS / "quarantine-listing.1.json")
    if case == "log dir component":  # old: followed, and the default quarantine went through it too
        link = host.root / "host" / "link"
        link.symlink_to(host.data)
        log_dirs = tuple(str(link / Path(d).name) for d in host.log_dirs)
        moves = [QuarantineMove(log_dirs[0], m.name, kind=m.kind) for m in moves]
        return moves, log_dirs, str(link)
    if case == "log dir itself":
        link = host.data / "kafka-logs-9"
        link.symlink_to(host.data / "kafka-logs-0")
        log_dirs = (*host.log_dirs, str(link))
        moves = [QuarantineMove(str(link), m.name, kind=m.kind) for m in moves]
        return moves, log_dirs, str(link)
    raise AssertionError(case)


SYMLINK_CASES = [
    "kafka-quarantine folder",
    "ts dir",
    "listing file",
    "dangling next listing",
    "log dir component",
    "log dir itself",
]


@pytest.mark.parametrize("case", SYMLINK_CASES)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_symlink_anywhere_is_refused_and_nothing_changes(case, dry_run, host, hook):
    moves, log_dirs, component = _plant(host, case)
    before = snapshot(host.root)
    done = run(hook, host, moves, log_dirs=log_dirs, dry_run=dry_run)
    assert set(statuses(done).values()) == {"refused"}, done["results"]
    for detail in details(done).values():
        assert component in detail and ("symlink" in detail), detail
    assert done["listings"] == []
    assert snapshot(host.root) == before
    assert (host.outside / "victim.json").read_text() == "precious, not a listing\n"
    assert not (host.outside / "created.json").exists()


def test_a_symlinked_source_directory_is_refused(host, hook):
    (host.outside / "elsewhere-0").mkdir()
    (Path(host.log_dirs[0]) / "linked-0").symlink_to(host.outside / "elsewhere-0")
    before = snapshot(host.root)
    done = run(hook, host, [host.move("linked-0")])
    assert statuses(done) == {"linked-0": "refused"}
    assert details(done) == {"linked-0": "not a directory (or a symlink)"}
    assert snapshot(host.root) == before


def test_a_quarantine_on_another_filesystem_is_refused(host, hook):
    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == host.root.stat().st_dev:
        pytest.skip("no second filesystem (/dev/shm) to test with")
    quarantine = other / f"kafka-zk-quarantine-test-{uuid.uuid4().hex}"
    before = snapshot(host.root)
    try:
        done = run(hook, host, [host.move(DELETE_NAME, quarantine=str(quarantine))])
        assert statuses(done) == {DELETE_NAME: "refused"}
        assert "another filesystem" in details(done)[DELETE_NAME]
        assert not quarantine.exists()  # checked before anything was created
    finally:
        if quarantine.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(quarantine)], check=False)
    assert snapshot(host.root) == before


# ---------------------------------------------------------------------------------------------
# Orphan live-named directories and a running broker
# ---------------------------------------------------------------------------------------------


def test_orphan_normal_dir_is_refused_while_a_broker_process_runs(host, hook, fake_broker):
    normal = Path(host.log_dirs[0]) / "old-logs-0"
    normal_before = snapshot(normal)
    # The caller believes the broker is stopped; the host shows a broker process: refused.
    done = run(hook, host, [host.move("old-logs-0"), host.move(DELETE_NAME)], broker_running=False)
    assert statuses(done) == {"old-logs-0": "refused", DELETE_NAME: "moved"}
    assert (
        f"this broker's Kafka process runs on this host (pid {fake_broker.pid})"
        in details(done)["old-logs-0"]
    )
    assert "allow_running_broker_orphans" in details(done)["old-logs-0"]
    assert snapshot(normal) == normal_before  # untouched, in place
    assert (host.quarantine / TS / DELETE_NAME / "00000000000000000000.log").is_file()
    # A name that says "normal" cannot pass for a -delete directory.
    lying = run(hook, host, [host.move("old-logs-0", kind="delete")])
    assert statuses(lying) == {"old-logs-0": "refused"}
    assert "the name says kind normal, the caller said delete" in details(lying)["old-logs-0"]
    # The explicit opt-in moves it anyway.
    forced = run(
        hook, host, [host.move("old-logs-0")], broker_running=True, allow_running_broker_orphans=True
    )
    assert statuses(forced) == {"old-logs-0": "moved"}
    assert snapshot(host.quarantine / TS / "old-logs-0") == normal_before


@pytest.mark.parametrize(
    ("broker_running", "why"),
    [(True, "the caller says the broker is running"), (None, "the caller cannot tell")],
)
def test_orphan_normal_dir_is_refused_when_the_caller_says_running_or_cannot_tell(
    broker_running, why, host, hook
):
    before = snapshot(host.root)
    done = run(
        hook, host, [host.move("old-logs-0"), host.move("old-logs-2", 1)], broker_running=broker_running
    )
    assert statuses(done) == {"old-logs-0": "refused", "old-logs-2": "refused"}
    assert all(why in d for d in details(done).values())
    assert snapshot(host.root) == before


def test_another_clusters_broker_on_the_host_does_not_hold_the_move_but_an_unreadable_one_does(
    host, hook, kafka_process, tmp_path
):
    """Only this broker's process counts: another broker on the machine (its own log dirs) is not
    it; a Kafka process whose configuration cannot be read might be, so it holds the move."""
    other = kafka_process(tmp_path / "other" / "server.properties", [str(tmp_path / "other" / "kafka-logs")])
    done = run(hook, host, [host.move("old-logs-0")], broker_running=False)
    assert statuses(done) == {"old-logs-0": "moved"}, details(done)
    assert other.poll() is None  # it ran all along
    unreadable = kafka_process(tmp_path / "nowhere" / "server.properties", None)
    held = run(hook, host, [host.move("old-logs-2", 1)], broker_running=False)
    assert statuses(held) == {"old-logs-2": "refused"}
    assert (
        f"a Kafka process on this host may be this broker's (pid {unreadable.pid}:"
        in details(held)["old-logs-2"]
    )
    assert "cannot be read" in details(held)["old-logs-2"]


def test_orphan_normal_dir_moves_when_the_broker_is_stopped(host, hook, no_broker_process):
    normal_before = snapshot(Path(host.log_dirs[0]) / "old-logs-0")
    done = run(hook, host, [host.move("old-logs-0"), host.move("old-logs-2", 1)], broker_running=False)
    assert statuses(done) == {"old-logs-0": "moved", "old-logs-2": "moved"}
    assert snapshot(host.quarantine / TS / "old-logs-0") == normal_before
    assert not (Path(host.log_dirs[0]) / "old-logs-0").exists()
    assert (Path(host.log_dirs[0]) / "live-0").is_dir()
    [listing] = done["listings"]
    assert listing["path"] == str(host.quarantine / TS / "quarantine-listing.json")
    entries = json.loads(Path(listing["path"]).read_text())
    assert {e["name"]: (e["source"], e["destination"], e["bytes"], e["file_names"]) for e in entries} == {
        "old-logs-0": (
            f"{host.log_dirs[0]}/old-logs-0",
            str(host.quarantine / TS / "old-logs-0"),
            108,  # 10 x the name in the .log, 8 bytes of .index
            ["00000000000000000000.index", "00000000000000000000.log"],
        ),
        "old-logs-2": (
            f"{host.log_dirs[1]}/old-logs-2",
            str(host.quarantine / TS / "old-logs-2"),
            108,  # 10 x the name in the .log, 8 bytes of .index
            ["00000000000000000000.index", "00000000000000000000.log"],
        ),
    }
    assert all(e["moved_at"].endswith("Z") and e["moved_at_ms"] > 0 for e in entries)
    assert stat.S_IMODE((host.quarantine / TS).stat().st_mode) == 0o750


# ---------------------------------------------------------------------------------------------
# Retry, dry run
# ---------------------------------------------------------------------------------------------


def test_a_real_move_needs_a_session_that_pinned_the_broker(host, hook):
    before = snapshot(host.root)
    moves = [QuarantineMove(host.log_dirs[0], "old-logs-0", None, "normal")]
    with pytest.raises(QuarantineOutsideSessionError, match="outside a maintenance session"):
        run(hook, host, moves, session=None)
    assert snapshot(host.root) == before
    gate = PinnedBroker()
    done = run(hook, host, moves, session=gate)
    assert gate.asked == [(BROKER, ADDRESS)] and statuses(done) == {"old-logs-0": "moved"}


def test_a_dry_run_checks_everything_and_creates_nothing(host, hook):
    before = snapshot(host.root)
    done = run(hook, host, [host.move(DELETE_NAME), host.move("gone-0")], dry_run=True)
    assert statuses(done) == {DELETE_NAME: "would_move", "gone-0": "gone"}
    assert done["results"][0]["bytes"] == 10 * len(DELETE_NAME) + 8
    assert done["listings"] == []
    assert snapshot(host.root) == before


def test_a_retry_reports_already_moved_and_writes_the_next_listing_exclusively(host, hook):
    moves = [host.move(DELETE_NAME)]
    first = run(hook, host, moves)
    assert statuses(first) == {DELETE_NAME: "moved"}
    listing = host.quarantine / TS / "quarantine-listing.json"
    assert [x["path"] for x in first["listings"]] == [str(listing)]
    written = listing.read_bytes()
    after_first = snapshot(host.root)

    dry = run(hook, host, moves, dry_run=True)
    assert statuses(dry) == {DELETE_NAME: "already_moved"} and dry["listings"] == []
    assert snapshot(host.root) == after_first

    again = run(hook, host, moves)
    assert statuses(again) == {DELETE_NAME: "already_moved"}
    second = host.quarantine / TS / "quarantine-listing.1.json"
    assert [x["path"] for x in again["listings"]] == [str(second)]
    assert listing.read_bytes() == written  # never overwritten
    [entry] = json.loads(second.read_text())
    assert entry["status"] == "already_moved" and entry["source"] == f"{host.log_dirs[0]}/{DELETE_NAME}"
    assert entry["bytes"] == 10 * len(DELETE_NAME) + 8

    third = run(hook, host, moves)
    assert [x["path"] for x in third["listings"]] == [str(host.quarantine / TS / "quarantine-listing.2.json")]
    # a clash: the same name appears again in the log dir; the quarantined copy is kept
    (Path(host.log_dirs[0]) / DELETE_NAME).mkdir()
    clash = run(hook, host, moves)
    assert details(clash) == {DELETE_NAME: "the destination already exists"}


# ---------------------------------------------------------------------------------------------
# The time limit: enforced on the host and here, no process left behind
# ---------------------------------------------------------------------------------------------


def test_the_time_limit_stops_the_script_on_the_host_and_leaves_no_process(host, hook):
    before = snapshot(host.root)
    outcome: dict[str, BaseException] = {}

    def call() -> None:
        try:
            # _test_sleep_s: the script sleeps before its first move, far past the limit
            run(hook, host, [host.move(DELETE_NAME)], timeout=2, _test_sleep_s=60)
        except BaseException as exc:
            outcome["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=call)
    worker.start()
    # while it runs, the script's marker is in /proc: the check below can see such a process
    assert wait_for(lambda: bool(marker_pids()), 60), "the remote script never showed in /proc"
    worker.join(30)
    elapsed = time.monotonic() - started
    error = outcome.get("error")
    assert isinstance(error, BrokerHostTimeoutError), error
    assert 2 <= elapsed < 60  # stopped at its limit, long before the script's own sleep would end
    message = str(error)
    assert f"broker {BROKER} on {ADDRESS}" in message and "time limit of 2s" in message
    assert "the host's alarm stopped the script" in message and "nothing was moved" in message
    assert wait_for(lambda: not marker_pids(), 20), f"left behind: {marker_pids()}"
    assert snapshot(host.root) == before


def test_the_read_loop_enforces_the_limit_when_the_host_does_not(host, hook, monkeypatch):
    argv = [b"sleep", b"7.3125"]  # stands in for a host that never answers

    def sleepers() -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == argv:
                    found.append(int(pid))
            except OSError:
                continue
        return found

    monkeypatch.setattr(broker_quarantine, "remote_command", lambda interpreters: "exec sleep 7.3125")
    monkeypatch.setattr(broker_quarantine, "_GRACE_S", 0.5)
    started = time.monotonic()
    try:
        with pytest.raises(
            BrokerHostTimeoutError, match=r"time limit of 1s \(no answer from the host in time"
        ):
            run(hook, host, [host.move(DELETE_NAME)], timeout=1)
        assert 1 <= time.monotonic() - started < 7.3125  # cut short: the host's sleep never ended
    finally:
        for pid in sleepers():  # only the sleep this test started
            os.kill(pid, 9)
