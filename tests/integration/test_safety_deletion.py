"""Safety of the deletion cleanup against real parts: a simulated cluster in a real ZooKeeper, its
broker hosts served by a real sshd on 127.0.0.2-7, Airflow connections, and a real
``airflow dags test``.

Each test first shows the damage the cleanup did before it ran inside a maintenance session (what
the verifier hands the cleanup), then that the cleanup now refuses, and that nothing changed: every
file under every broker host root (type, size, sha256) and every znode of the chroots involved
(data, version) are the same before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove, quarantine_directories
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT, ClusterIdentity
from airflow_provider_kafka_zk.maintenance import (
    ClusterIdentityError,
    MaintenanceLeaseHeldError,
    MaintenanceSession,
    RollbackArtefactError,
    RunIdentity,
    SafetyFlagError,
)
from airflow_provider_kafka_zk.maintenance.approval import ClusterEntryMismatchError
from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import check_deletions

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + n}" for n in range(6))
LIVE_HOSTS = {0: ADDRESSES[0], 1: ADDRESSES[1], 2: ADDRESSES[2]}  # cluster "live"
OTHER_HOSTS = {0: ADDRESSES[3], 1: ADDRESSES[4], 2: ADDRESSES[5]}  # cluster "other", same broker ids
UNREACHABLE = "127.0.0.9"
SSH_CONN = "safety_deletion_ssh"
TS = "20260102T030405"
DAY_MS = 86_400_000
# old-logs' -delete directories were "renamed two days ago" (their mtimes say so), but ages run from
# ctime, which is the deploy time: the checks that need them past the delay look from then.
RENAMED_AGO_MS = 2 * DAY_MS
PYTHON_BIN = Path(sys.executable).parent


# ---------------------------------------------------------------------------------------------
# The clusters
# ---------------------------------------------------------------------------------------------


def _live_cluster(seed: int = 21, stopped: int | None = None) -> SimulatedCluster:
    """Three brokers: ``events`` live; ``old-logs`` deleted with leftovers on brokers 1 (a plain
    partition directory) and 2 (two ``-delete`` directories past the delay); ``retired`` deleted
    cleanly (nothing left anywhere). ``stopped``: a broker stopped cleanly at the end."""
    spec = ClusterSpec(
        name="live",
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in LIVE_HOSTS.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=60),
            TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
            TopicSpec("retired", partitions=2, replication_factor=2, records_per_partition=40),
        ),
        seed=seed,
    )
    cluster = SimulatedCluster(spec)
    old_logs_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", 1, [0], kind=DirKind.NORMAL, age_ms=3 * DAY_MS, topic_id=old_logs_id
    )
    cluster.leave_leftover_dirs(
        "old-logs", 2, [0, 1], kind=DirKind.DELETE, age_ms=2 * DAY_MS, topic_id=old_logs_id
    )
    cluster.delete_topic("retired")
    if stopped is not None:
        cluster.stop_broker(stopped, clean=True)
    return cluster


def _other_cluster() -> SimulatedCluster:
    """Another cluster (own /cluster/id, own hosts, same broker ids) whose ``events`` was deleted."""
    spec = ClusterSpec(
        name="other",
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in OTHER_HOSTS.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=20),
            TopicSpec("billing", partitions=1, replication_factor=3, records_per_partition=20),
        ),
        seed=99,
    )
    cluster = SimulatedCluster(spec)
    cluster.delete_topic("events")  # every broker online: deleted everywhere, nothing left
    return cluster


def _zk_connection(zookeeper_server, chroot: str) -> str:
    return json.dumps(
        {
            "conn_type": "kafka_zookeeper",
            "host": zookeeper_server.connect_string,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
        }
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def ssh_connection(sshd):
    fields = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(f"AIRFLOW_CONN_{SSH_CONN.upper()}", json.dumps(fields))
        yield SSH_CONN


_numbers = iter(range(1_000_000))


@pytest.fixture
def deploy(zookeeper_server, tmp_path_factory, ssh_connection):
    """Deploy a simulated cluster in its own chroot and host root; (deployed, its connection id)."""
    opened = []
    patch = pytest.MonkeyPatch()

    def _deploy(cluster: SimulatedCluster) -> tuple[DeployedCluster, str]:
        number = next(_numbers)
        chroot = zookeeper_server.new_chroot(f"/kafka_safety_{cluster.spec.name}_")
        deployed = DeployedCluster(
            cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp(f"hosts{number}")
        )
        opened.append(deployed)
        conn_id = f"safety_zk_{number}"
        patch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", _zk_connection(zookeeper_server, chroot))
        return deployed, conn_id

    yield _deploy
    for deployed in opened:
        deployed.close()
    patch.undo()


@pytest.fixture(scope="module")
def live(zookeeper_server, tmp_path_factory, ssh_connection):
    """The healthy cluster the refusal tests only ever read: (deployed, its connection id)."""
    chroot = zookeeper_server.new_chroot("/kafka_safety_live_")
    with (
        DeployedCluster(
            _live_cluster(), zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("live")
        ) as deployed,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv("AIRFLOW_CONN_SAFETY_LIVE_ZK", _zk_connection(zookeeper_server, chroot))
        yield deployed, "safety_live_zk"


@pytest.fixture(autouse=True)
def live_opted_out(opt_out_of_approval):
    """The cluster file names the live cluster (by its connection) ``live`` and opts it out of
    approval: the cleanups here are automation (issue 31: the rule follows the connection)."""
    return opt_out_of_approval("live", "safety_live_zk")


# ---------------------------------------------------------------------------------------------
# Helpers: the check, the operator, and the full state of disks and ZooKeeper
# ---------------------------------------------------------------------------------------------


def _server_properties(root: Path) -> str:
    return str(root / "broker-{broker_id}" / "config" / "server.properties")


def _host_hook(conn_id: str, root: Path) -> BrokerHostHook:
    return BrokerHostHook(
        SSH_CONN,
        conn_id,
        broker_hosts=LIVE_HOSTS,
        server_properties_path=_server_properties(root),
        connect_timeout=3,
        connect_attempts=1,
    )


def _check(conn_id: str, root: Path, topics):
    """What the verifier hands the cleanup: ZooKeeper of ``conn_id``, disks under ``root``."""
    with KafkaZooKeeperHook(conn_id) as zk_hook:
        return check_deletions(zk_hook, _host_hook(conn_id, root), topics)


def _quarantine_dry_run(check, conn_id: str, root: Path) -> dict[tuple[int, str], str]:
    """(broker, source) -> status of a dry run of the host-side quarantine for every leftover of
    ``check``: every guard on the host checked, nothing moved. ``would_move`` = the old cleanup,
    which had no maintenance session, moved it."""
    host_hook = _host_hook(conn_id, root)
    by_broker: dict[int, list[QuarantineMove]] = {}
    for verdict in check.verdicts:
        for d in check.leftovers(verdict):
            by_broker.setdefault(d.broker_id, []).append(QuarantineMove(d.log_dir, d.name, kind=d.kind))
    out = {}
    for broker_id, moves in sorted(by_broker.items()):
        done = quarantine_directories(
            host_hook,
            broker_id,
            moves,
            log_dirs=check.disks[broker_id].log_dirs,
            ts=TS,
            dry_run=True,
            broker_running=broker_id in check.live_brokers,
        )
        out.update({(broker_id, r["source"]): r["status"] for r in done["results"]})
    return out


def _operator(conn_id: str, root: Path, base: Path, **kwargs) -> TopicDeletionVerifyOperator:
    kwargs.setdefault("broker_hosts", LIVE_HOSTS)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("wait_timeout", 0)
    kwargs.setdefault("poll_interval", 0.5)
    return TopicDeletionVerifyOperator(
        task_id="verify",
        cluster="live",
        base_path=str(base),
        kafka_zookeeper_conn_id=conn_id,
        ssh_conn_id=SSH_CONN,
        server_properties_path=_server_properties(root),
        connect_timeout=3,
        **kwargs,
    )


def _disk(root: Path) -> dict[str, tuple[str, int, str | None]]:
    """Every path under a host root: kind, size and (files) sha256 of the content."""
    out = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        if path.is_symlink():
            out[str(path.relative_to(root))] = ("l", stat.st_size, os.readlink(path))
        elif path.is_dir():
            out[str(path.relative_to(root))] = ("d", 0, None)
        else:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            out[str(path.relative_to(root))] = ("f", stat.st_size, digest)
    return out


def _zookeeper(hosts: str, chroot: str) -> dict[str, tuple[bytes, int]]:
    """Every znode under ``chroot``: data and version ({} when the chroot does not exist)."""
    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    try:
        if client.exists(chroot) is None:
            return {}
        out = {}
        pending = [chroot]
        while pending:
            path = pending.pop()
            data, stat = client.get(path)
            out[path[len(chroot) :] or "/"] = (data, stat.version)
            pending += [f"{path.rstrip('/')}/{c}" for c in client.get_children(path)]
        return out
    finally:
        client.stop()
        client.close()


def _state(*deployments: DeployedCluster) -> dict[str, dict]:
    """Disks of every broker host and the ZooKeeper chroot of every deployment given."""
    return {
        str(d.root): {"disk": _disk(d.root), "zk": _zookeeper(d.zookeeper_hosts, d.chroot)}
        for d in deployments
    }


def _dirs_of(deployed: DeployedCluster, prefix: str) -> set[tuple[int, str]]:
    return {
        (b, str(p))
        for b, host in deployed.hosts.items()
        for log_dir in host.log_dirs
        for p in log_dir.iterdir()
        if p.name.startswith(prefix)
    }


def _verdicts(base: Path, ts: str = TS) -> dict:
    return json.loads((base / "live" / "deletions" / ts / "verdicts.json").read_text())


@pytest.fixture
def other(zookeeper_server, tmp_path_factory, monkeypatch):
    """Cluster "other" in its own chroot of the same ZooKeeper, every broker shut down (so nothing
    but the cluster's identity tells the cleanup its hosts are not "other"'s): (deployed, conn id).

    Its brokers being stopped, the host-side quarantine's own guard (no live-named directory moves
    under a running broker) does not stand in the way: the maintenance session is the only guard.
    """
    chroot = zookeeper_server.new_chroot("/kafka_safety_other_")
    with DeployedCluster(
        _other_cluster(), zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("other")
    ) as deployed:
        pass  # close(): the brokers' sessions end, their registrations vanish
    monkeypatch.setenv("AIRFLOW_CONN_SAFETY_OTHER_ZK", _zk_connection(zookeeper_server, chroot))
    return deployed, "safety_other_zk"


def _refuse_in_other_cluster(other, live, tmp_path, opt_out):
    """Cleanup of ``events`` through the connection of ``other`` with the disks of ``live``, the
    cluster file's entry ``live`` pointing at ``other`` (a wrong connection in the cluster file: the
    approval rule, which follows the file, lets it through, so the broker pins are what refuse)."""
    deployed, _ = live
    other, other_conn = other
    opt_out("live", other_conn)
    before = _state(deployed, other)
    operator = _operator(other_conn, deployed.root, tmp_path, topics=["events"], cleanup=True, dry_run=False)
    with pytest.raises(ClusterIdentityError) as refused:
        operator.execute({"ts_nodash": TS})
    return other, before, refused.value


# ---------------------------------------------------------------------------------------------
# 1. The connection points at another cluster
# ---------------------------------------------------------------------------------------------


def test_wrong_cluster_connection_refuses_to_quarantine_the_live_replicas(
    live, other, tmp_path, opt_out_of_approval
):
    deployed, _ = live
    other, other_conn = other
    live_id, other_id = deployed.cluster.cluster_id, other.cluster.cluster_id
    assert live_id != other_id

    # The damage: through the other cluster's ZooKeeper, where ``events`` is deleted, every live
    # replica of ``events`` on the live cluster's disks is a "leftover" -- the old cleanup moved
    # them all into the quarantine and then reported the topic deleted.
    live_replicas = _dirs_of(deployed, "events-")
    assert len(live_replicas) == 6
    assert _zookeeper(deployed.zookeeper_hosts, deployed.chroot)["/brokers/topics/events"]  # alive there
    check = _check(other_conn, deployed.root, ["events"])
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE and verdict.causes == (Cause.PARTITION_DIRS_LEFT,)
    assert {(d.broker_id, d.path) for d in verdict.leftover_dirs} == live_replicas
    assert check.coverage()["status"] == "complete" and check.live_brokers == ()
    assert {m[2] for disk in check.disks.values() for m in disk.meta} == {live_id}
    # every guard on the hosts lets them through: only the cluster identity stands in the way
    assert _quarantine_dry_run(check, other_conn, deployed.root) == dict.fromkeys(live_replicas, "would_move")

    before = _state(deployed, other)
    operator = _operator(other_conn, deployed.root, tmp_path, topics=["events"], cleanup=True, dry_run=False)
    # The cluster file names live by its connection: the connection of another cluster refuses
    # before anything is read (issue 31), naming the entry and the chroot reached
    with pytest.raises(ClusterEntryMismatchError, match="cluster 'live' names the entry live") as refused:
        operator.execute({"ts_nodash": TS})
    assert other.chroot in str(refused.value)
    assert _state(deployed, other) == before and not (tmp_path / "live").exists()
    # A cluster file whose entry itself has the wrong connection: the broker pins refuse
    opt_out_of_approval("live", other_conn)
    with pytest.raises(ClusterIdentityError) as refused:
        operator.execute({"ts_nodash": TS})
    message = str(refused.value)
    assert live_id in message and other_id in message
    assert "refusing to touch broker 0 on 127.0.0.2" in message

    after = _state(deployed, other)
    assert after[str(deployed.root)] == before[str(deployed.root)]  # the live cluster: disks and ZooKeeper
    assert after[str(other.root)]["disk"] == before[str(other.root)]["disk"]
    # the other cluster's ZooKeeper too: the lease taken for the attempt went back with the refusal
    assert after[str(other.root)]["zk"] == before[str(other.root)]["zk"]
    assert _dirs_of(deployed, "events-") == live_replicas

    record = _verdicts(tmp_path)
    assert record["cleanup"]["refused"] == message and record["cleanup"]["actions_taken"] == 0
    assert record["verdicts"][0]["verdict"] == "incomplete" and "verdicts_after_cleanup" not in record
    assert record["outcome"] == "unsuccessful"  # never "deleted"
    artefacts = tmp_path / "live" / "deletions" / TS
    assert not (artefacts / "rollback").exists()  # refused before the list of moves was written


def test_refused_cleanup_leaves_no_maintenance_lease_behind(live, other, tmp_path, opt_out_of_approval):
    deployed, _ = live
    other, before, refused = _refuse_in_other_cluster(other, live, tmp_path, opt_out_of_approval)
    assert other.cluster.cluster_id in str(refused)
    after = _state(deployed, other)
    zk_other = after[str(other.root)]["zk"]
    assert LEASE_PATH not in zk_other, f"lease left behind: {zk_other.get(LEASE_PATH)}"
    assert LEASE_ROOT not in zk_other  # the release takes its parent too: the chroot is as Kafka left it
    assert after == before


# ---------------------------------------------------------------------------------------------
# 2. The connection's chroot holds no cluster
# ---------------------------------------------------------------------------------------------


def test_wrong_chroot_refuses_before_any_move(
    live, zookeeper_server, tmp_path, monkeypatch, opt_out_of_approval
):
    deployed, _ = live
    assert _zookeeper(zookeeper_server.connect_string, "/nope") == {}
    monkeypatch.setenv("AIRFLOW_CONN_SAFETY_NOPE_ZK", _zk_connection(zookeeper_server, "/nope"))

    # The damage, with the identity rule switched off: an empty chroot knows no topic, so every live
    # replica of ``events`` on the brokers given by broker_hosts is a leftover of a deleted topic.
    import airflow_provider_kafka_zk.maintenance as maintenance

    live_replicas = _dirs_of(deployed, "events-")
    with monkeypatch.context() as unpinned:
        unpinned.setattr(
            maintenance, "pin_zookeeper_identity", lambda hook: ClusterIdentity("?", (), "/nope")
        )
        check = _check("safety_nope_zk", deployed.root, ["events"])
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE
    assert {(d.broker_id, d.path) for d in verdict.leftover_dirs} == live_replicas
    assert check.live_brokers == ()  # no registration there: "no broker running" as far as it knows
    assert _quarantine_dry_run(check, "safety_nope_zk", deployed.root) == dict.fromkeys(
        live_replicas, "would_move"
    )

    # With it (issue 26: read-only verification pins the identity as mutations do): the check itself
    # refuses, so no verdict -- and no cleanup -- is ever made from that chroot.
    with pytest.raises(ClusterIdentityError, match=r"chroot /nope holds no Kafka cluster"):
        _check("safety_nope_zk", deployed.root, ["events"])
    opt_out_of_approval("live", "safety_nope_zk")  # the typo in the cluster file's own connection
    before = _state(deployed)
    operator = _operator(
        "safety_nope_zk", deployed.root, tmp_path, topics=["events"], cleanup=True, dry_run=False
    )
    with pytest.raises(
        ClusterIdentityError, match=r"chroot /nope holds no Kafka cluster \(/brokers/ids is missing\)"
    ):
        operator.execute({"ts_nodash": TS})
    assert _state(deployed) == before
    assert _zookeeper(zookeeper_server.connect_string, "/nope") == {}  # not even the chroot was created
    assert not (tmp_path / "live" / "deletions" / TS).exists()  # refused before any verdict


# ---------------------------------------------------------------------------------------------
# 3. Safety switches are parsed strictly, before any I/O
# ---------------------------------------------------------------------------------------------

# (flag, value, what the old truthiness test made of it)
BAD_FLAGS = [
    ("dry_run", "", "a REAL cleanup (empty text is falsy)"),
    ("dry_run", None, "a REAL cleanup (None is falsy)"),
    ("dry_run", "dry", "a dry run, by luck"),
    ("dry_run", "yes", "a dry run, by luck"),
    ("dry_run", "{{ params.dry_run }}", "a dry run although the param may say false"),
    ("cleanup", "yes", "a cleanup, guessed"),
]


@pytest.mark.parametrize(
    ("flag", "value", "old_meaning"), BAD_FLAGS, ids=[f"{f}={v!r}" for f, v, _ in BAD_FLAGS]
)
def test_unclear_safety_flag_refuses_before_any_io(
    flag, value, old_meaning, live, sshd, zookeeper_server, tmp_path, monkeypatch
):
    deployed, _ = live
    # The damage: the old code tested truthiness, so '' and None ran a REAL cleanup.
    assert bool(value) is ("REAL" not in old_meaning)
    # ZooKeeper unreachable: any read before the flag check would hang or fail with another error.
    monkeypatch.setenv(
        "AIRFLOW_CONN_SAFETY_DEAD_ZK",
        json.dumps(
            {"conn_type": "kafka_zookeeper", "host": f"{UNREACHABLE}:2181", "extra": {"connect_timeout": 3}}
        ),
    )
    flags = {"cleanup": True, "dry_run": False, flag: value}
    logins = sshd.log_path.read_text(errors="replace").count("Accepted publickey")
    before = _state(deployed)
    started = time.monotonic()
    with pytest.raises(SafetyFlagError) as refused:  # at construction or at execute, either is fine
        operator = _operator("safety_dead_zk", deployed.root, tmp_path / "base", topics=["old-logs"], **flags)
        operator.execute({"ts_nodash": TS})
    assert time.monotonic() - started < 2
    assert f"{flag} must be a boolean or the text 'true'/'false', not {value!r}" in str(refused.value)
    if isinstance(value, str) and "{{" in value:
        assert "unrendered template" in str(refused.value)
    assert not (tmp_path / "base").exists()  # no verdicts.json, no artefact folder
    assert sshd.log_path.read_text(errors="replace").count("Accepted publickey") == logins
    assert _state(deployed) == before


# ---------------------------------------------------------------------------------------------
# 4. The artefact store cannot be written
# ---------------------------------------------------------------------------------------------


def _unwritable_store_cleanup(live, tmp_path):
    """A real cleanup of ``old-logs`` whose artefact store lies under a regular file."""
    deployed, conn_id = live
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    base = blocker / "artefacts"  # nothing can be created under a regular file
    return blocker, _operator(conn_id, deployed.root, base, topics=["old-logs"], cleanup=True, dry_run=False)


def test_unwritable_artefact_store_refuses_before_any_move(live, tmp_path, caplog, capfd, deletion_clock):
    deployed, conn_id = live
    deletion_clock(RENAMED_AGO_MS)
    # The damage: three leftovers the old cleanup moved although no rollback record could be kept.
    leftovers = _dirs_of(deployed, "old-logs-")
    assert len(leftovers) == 3
    check = _check(conn_id, deployed.root, ["old-logs"])
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE
    assert {(d.broker_id, d.path) for d in verdict.leftover_dirs} == leftovers
    would = _quarantine_dry_run(check, conn_id, deployed.root)
    # broker 1 runs, so the host keeps its plain directory; broker 2's -delete directories would move
    assert {b: s for (b, _), s in would.items()} == {1: "refused", 2: "would_move"}
    assert list(would.values()).count("would_move") == 2

    blocker, operator = _unwritable_store_cleanup(live, tmp_path)
    before = _state(deployed)
    # The refusal reaches Airflow as itself (not as the OSError of the verdicts.json write that
    # fails after it, into the same store).
    with pytest.raises(RollbackArtefactError):
        operator.execute({"ts_nodash": TS})
    output = capfd.readouterr()
    logs = output.out + output.err + caplog.text
    assert "Cleanup refused, nothing changed: artefact store not usable" in logs
    assert _state(deployed) == before
    assert _dirs_of(deployed, "old-logs-") == leftovers
    assert blocker.read_text() == "not a directory\n"


def test_unwritable_artefact_store_is_reported_as_the_refusal(live, tmp_path, deletion_clock):
    deletion_clock(RENAMED_AGO_MS)
    _, operator = _unwritable_store_cleanup(live, tmp_path)
    with pytest.raises(RollbackArtefactError, match="artefact store not usable, refusing to change anything"):
        operator.execute({"ts_nodash": TS})


# ---------------------------------------------------------------------------------------------
# 5. Another run holds the maintenance lease; then the real cleanup
# ---------------------------------------------------------------------------------------------


def test_lease_held_by_another_run_refuses_then_the_real_cleanup_moves_exactly_the_leftovers(
    deploy, tmp_path, deletion_clock, opt_out_of_approval
):
    deletion_clock(RENAMED_AGO_MS)
    # broker 1 stopped: its plain leftover directory may move (never under a running broker)
    deployed, conn_id = deploy(_live_cluster(seed=23, stopped=1))
    opt_out_of_approval("live", conn_id)
    root = deployed.root
    leftovers = _dirs_of(deployed, "old-logs-")
    assert len(leftovers) == 3
    base = tmp_path / "artefacts"
    operator = _operator(conn_id, root, base, topics=["old-logs"], cleanup=True, dry_run=False)
    with KafkaZooKeeperHook(conn_id) as other_hook:
        other = MaintenanceSession(
            other_hook,
            cluster="live",
            artefact_dir=str(tmp_path / "other-run"),
            run=RunIdentity("other_dag", "other_run", "t", 1, "h"),
            dry_run=False,
        ).open()
        other.take_lease()
        try:
            # The damage: the old cleanup took no lease, so it moved directories while another run
            # (a drain, a repair) was changing the same cluster.
            assert _zookeeper(deployed.zookeeper_hosts, deployed.chroot)[LEASE_PATH][0]
            before = _state(deployed)
            with pytest.raises(MaintenanceLeaseHeldError, match=r"DAG 'other_dag' run 'other_run'"):
                operator.execute({"ts_nodash": TS})
            assert _state(deployed) == before
            refused = _verdicts(base)
            assert "other_dag" in refused["cleanup"]["refused"] and refused["cleanup"]["actions_taken"] == 0
            assert not (base / "live" / "deletions" / TS / "rollback").exists()
        finally:
            assert other.release_lease()
            other.close()

    # The other run is done: the cleanup runs, moving exactly the leftovers.
    disk_before = _disk(root)
    zk_before = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    result = operator.execute({"ts_nodash": TS})
    assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in result] == [
        ("old-logs", "deleted", True)
    ]
    assert _dirs_of(deployed, "old-logs-") == set()
    moved_tops = {str(Path(p).relative_to(root)) for _, p in leftovers}
    disk_after = _disk(root)

    def outside(listing: dict, tops: set[str]) -> dict:
        return {
            p: v
            for p, v in listing.items()
            if "kafka-quarantine" not in p and not any(p == t or p.startswith(t + "/") for t in tops)
        }

    assert outside(disk_after, set()) == outside(disk_before, moved_tops)  # nothing else touched
    for top in moved_tops:
        broker_dir, data, _, name = top.split("/", 3)
        target = f"{broker_dir}/{data}/kafka-quarantine/{TS}/{name}"
        moved = {p[len(top) :]: v for p, v in disk_before.items() if p == top or p.startswith(top + "/")}
        arrived = {
            p[len(target) :]: v for p, v in disk_after.items() if p == target or p.startswith(target + "/")
        }
        assert arrived == moved  # the same files, byte for byte
    zk_after = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    assert LEASE_PATH not in zk_after  # released after the cleanup
    assert zk_after == zk_before

    artefacts = base / "live" / "deletions" / TS
    plan = json.loads((artefacts / "rollback" / "quarantine-0.json").read_text())
    assert plan["format"] == "kafka-zk-quarantine-plan" and plan["dry_run"] is False
    planned = {(int(b), f"{m['log_dir']}/{m['name']}") for b, moves in plan["moves"].items() for m in moves}
    assert planned == leftovers
    assert plan["identity"]["cluster_id"] == deployed.cluster.cluster_id
    identity = json.loads((artefacts / "identity.json").read_text())["identity"]
    assert identity["cluster_id"] == deployed.cluster.cluster_id
    assert identity["chroot"] == deployed.chroot
    assert identity["brokers"] == {
        str(b): {"host": LIVE_HOSTS[b], "cluster_id": deployed.cluster.cluster_id} for b in (1, 2)
    }
    record = _verdicts(base)
    assert sorted(d["status"] for d in record["cleanup"]["directories"]) == ["moved"] * 3
    assert record["cleanup"]["plan"].endswith("rollback/quarantine-0.json")
    assert record["verdicts_after_cleanup"][0]["verdict"] == "deleted"


# ---------------------------------------------------------------------------------------------
# 6. Connections stored in the metadata DB, through a real `airflow dags test`
# ---------------------------------------------------------------------------------------------

DAG_FILE = textwrap.dedent(
    """
    import json
    import os

    from airflow.sdk import DAG

    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    config = json.loads(os.environ["KAFKA_ZK_SAFETY_DELETION_DAG"])
    with DAG(config["dag_id"], schedule=None) as dag:
        TopicDeletionVerifyOperator(
            task_id="verify_deletions",
            cluster="live",
            base_path=config["base_path"],
            kafka_zookeeper_conn_id=config["zk_conn_id"],
            ssh_conn_id=config["ssh_conn_id"],
            server_properties_path=config["server_properties"],
            topics=["retired"],
            connect_timeout=3,
            deferrable=False,
            wait_timeout=0,
        )
    """
)


def test_connections_in_the_metadata_db_cover_every_broker_in_a_real_dag_run(
    live, sshd, zookeeper_server, airflow_home, tmp_path
):
    deployed, _ = live
    suffix = uuid.uuid4().hex[:8]
    zk_conn, ssh_conn = f"db_zk_{suffix}", f"db_ssh_{suffix}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    airflow = str(PYTHON_BIN / "airflow")
    for conn_id, fields in (
        (
            zk_conn,
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": deployed.chroot},
            },
        ),
        (ssh_conn, sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)),
    ):
        added = subprocess.run(
            [airflow, "connections", "add", conn_id, "--conn-json", json.dumps(fields)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert added.returncode == 0, added.stdout + added.stderr
    # The precondition of the old failure: these connections exist only in the metadata DB.
    assert not any(
        k.upper() in (f"AIRFLOW_CONN_{zk_conn}".upper(), f"AIRFLOW_CONN_{ssh_conn}".upper()) for k in env
    )

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "safety_deletion_dag.py").write_text(DAG_FILE)
    dag_id = f"kafka_zk_safety_deletion_{suffix}"
    base = tmp_path / "artefacts"
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    env["KAFKA_ZK_SAFETY_DELETION_DAG"] = json.dumps(
        {
            "dag_id": dag_id,
            "base_path": str(base),
            "zk_conn_id": zk_conn,
            "ssh_conn_id": ssh_conn,
            "server_properties": _server_properties(deployed.root),
        }
    )
    before = _state(deployed)
    run = subprocess.run(
        [airflow, "dags", "test", dag_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = run.stdout + run.stderr
    runs = sorted((base / "live" / "deletions").glob("*/verdicts.json"))
    assert len(runs) == 1, output[-6000:]
    record = json.loads(runs[0].read_text())
    assert record["coverage"]["not_inventoried"] == {}, record["coverage"]
    assert record["coverage"]["status"] == "complete" and record["coverage"]["inventoried"] == [0, 1, 2]
    assert run.returncode == 0, output[-6000:]
    assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in record["verdicts"]] == [
        ("retired", "deleted", True)
    ]
    assert _state(deployed) == before
    key = Path(sshd.airflow_connection_fields(ADDRESSES[0])["extra"]["key_file"]).read_text()
    assert key.splitlines()[1] not in output
