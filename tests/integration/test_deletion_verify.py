"""Topic-deletion verification against real parts: the simulator's deletion scenarios in a real
ZooKeeper, broker hosts served by a real sshd on 127.0.0.2-7 (one address per broker), Airflow's
SSH and kafka_zookeeper connections, and a real Airflow DAG run whose wait is deferred."""

from __future__ import annotations

import json
import os
import re
import textwrap
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove as HostMove
from airflow_provider_kafka_zk.hooks.broker_quarantine import quarantine_directories
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
from airflow_provider_kafka_zk.maintenance import MaintenanceRefusedError
from airflow_provider_kafka_zk.operators.deletion import (
    TopicDeletionNotSettledError,
    TopicDeletionUnsuccessfulError,
    TopicDeletionVerifyOperator,
)
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
    deletion_disabled_cluster,
    incident_cluster,
)
from airflow_provider_kafka_zk.testing.simulator.disk_writer import write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import check_deletions

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
STOPPED = {3: "127.0.0.5", 4: "127.0.0.6"}  # incident cluster: stopped, so not registered
UNREACHABLE = "127.0.0.9"
CONFIG_LEFT = b'{"version":1,"config":{"retention.ms":"86400000"}}'
DAY_MS = 86_400_000
# The incident's old-logs -delete directories were "renamed two days ago": ages run from ctime,
# which is the deploy time, so the checks that need them past the delay look from two days later.
RENAMED_AGO_MS = 2 * DAY_MS


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def ssh_connection(sshd):
    fields = sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_DELETION_SSH", json.dumps(fields))
        yield "deletion_ssh"


_deployments = iter(range(1_000_000))


@pytest.fixture
def deploy(zookeeper_server, tmp_path_factory, ssh_connection, opt_out_of_approval):
    """Deploy a simulated cluster in its own chroot and host root, with its own ZooKeeper connection;
    the cluster file names it ``test``, opted out of approval (the real cleanups here are automation)."""
    opened = []
    patch = pytest.MonkeyPatch()

    def _deploy(cluster: SimulatedCluster) -> tuple[DeployedCluster, str]:
        number = next(_deployments)
        chroot = zookeeper_server.new_chroot("/kafka_deletion_")
        deployed = DeployedCluster(
            cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp(f"hosts{number}")
        )
        opened.append(deployed)
        conn_id = f"deletion_zk_{number}"
        patch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot},
                }
            ),
        )
        opt_out_of_approval("test", conn_id)
        return deployed, conn_id

    yield _deploy
    for deployed in opened:
        deployed.close()
    patch.undo()


def _server_properties(deployed: DeployedCluster) -> str:
    return str(deployed.root / "broker-{broker_id}" / "config" / "server.properties")


def _check(deployed, conn_id, topics, broker_hosts=STOPPED, **kwargs):
    host_hook = BrokerHostHook(
        "deletion_ssh",
        conn_id,
        broker_hosts=broker_hosts,
        server_properties_path=_server_properties(deployed),
        connect_timeout=3,
        connect_attempts=1,
    )
    with KafkaZooKeeperHook(conn_id) as zk_hook:
        return check_deletions(zk_hook, host_hook, topics, **kwargs)


def _operator(deployed, conn_id, base: Path, **kwargs) -> TopicDeletionVerifyOperator:
    kwargs.setdefault("broker_hosts", STOPPED)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("wait_timeout", 0)
    kwargs.setdefault("poll_interval", 0.5)
    return TopicDeletionVerifyOperator(
        task_id=kwargs.pop("task_id", "verify"),
        cluster="test",
        base_path=str(base),
        kafka_zookeeper_conn_id=conn_id,
        ssh_conn_id="deletion_ssh",
        server_properties_path=_server_properties(deployed),
        connect_timeout=3,
        **kwargs,
    )


def _disk(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every path under the host roots with kind, size and mtime."""
    out = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        out[str(path.relative_to(root))] = ("d" if path.is_dir() else "f", stat.st_size, stat.st_mtime_ns)
    return out


def _zookeeper(hosts: str, chroot: str) -> dict[str, tuple[bytes, int]]:
    client = KazooClient(hosts=hosts + chroot)
    client.start(timeout=15)
    try:
        out = {}
        pending = ["/"]
        while pending:
            path = pending.pop()
            data, stat = client.get(path)
            out[path] = (data, stat.version)
            pending += [f"{path.rstrip('/')}/{c}" for c in client.get_children(path)]
        return out
    finally:
        client.stop()
        client.close()


def _plant_config_znode(deployed: DeployedCluster, topic: str) -> None:
    client = KazooClient(hosts=deployed.zookeeper_connect)
    client.start(timeout=15)
    try:
        client.create(f"/config/topics/{topic}", CONFIG_LEFT)
    finally:
        client.stop()
        client.close()


# ---------------------------------------------------------------------------------------------
# Verdicts on the simulator's scenarios
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def incident(zookeeper_server, tmp_path_factory, ssh_connection):
    chroot = zookeeper_server.new_chroot("/kafka_deletion_incident_")
    cluster = incident_cluster()
    with (
        DeployedCluster(
            cluster, zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("incident")
        ) as deployed,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv(
            "AIRFLOW_CONN_DELETION_INCIDENT_ZK",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": zookeeper_server.connect_string,
                    "extra": {"chroot": chroot},
                }
            ),
        )
        yield deployed, "deletion_incident_zk"


def test_replica_broker_offline_blocks_and_names_the_broker(incident):
    deployed, conn_id = incident
    check = _check(deployed, conn_id, ["legacy-orders"])
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.BLOCKED
    assert verdict.causes == (Cause.REPLICA_BROKER_OFFLINE,)
    assert verdict.blocking_brokers == (3,)
    assert check.coverage()["status"] == "complete"  # stopped brokers read through broker_hosts
    assert not check.settled(verdict)


def test_reassignment_in_progress_blocks(incident):
    deployed, conn_id = incident
    [verdict] = _check(deployed, conn_id, ["moving-topic"]).verdicts
    assert verdict.verdict is Verdict.BLOCKED
    assert verdict.causes == (Cause.REASSIGNMENT_IN_PROGRESS,)


def test_leftovers_on_disk_are_incomplete_with_the_dirs(incident):
    deployed, conn_id = incident
    now_ms = int(time.time() * 1000)
    # just renamed (ctime = deploy time), though their mtimes are two days old: not past the delay
    [young] = _check(deployed, conn_id, ["old-logs"]).verdicts
    assert young.verdict is Verdict.INCOMPLETE and young.causes == (Cause.PARTITION_DIRS_LEFT,)
    assert [d.kind.name for d in young.leftover_dirs] == ["NORMAL"]
    check = _check(deployed, conn_id, ["old-logs"], now_ms=now_ms + RENAMED_AGO_MS)
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE
    assert set(verdict.causes) == {Cause.DELETE_DIRS_PAST_DELAY, Cause.PARTITION_DIRS_LEFT}
    on_disk = {
        (b, str(p))
        for b in (2, 5)
        for log_dir in deployed.hosts[b].log_dirs
        for p in log_dir.iterdir()
        if p.name.startswith("old-logs-")
    }
    assert {(d.broker_id, d.path) for d in verdict.leftover_dirs} == on_disk
    assert sorted((d.broker_id, d.kind.name) for d in verdict.leftover_dirs) == [
        (2, "DELETE"),
        (2, "DELETE"),
        (5, "NORMAL"),
    ]
    described = check.verdict_dict(verdict)
    assert described["settled"] and not described["deleted_everywhere"]
    assert {d["name"] for d in described["leftover_dirs"]} == {Path(p).name for _, p in on_disk}


def test_unreachable_broker_makes_coverage_partial_never_deleted(incident, tmp_path):
    deployed, conn_id = incident
    hosts = {**STOPPED, 4: UNREACHABLE}
    check = _check(deployed, conn_id, ["never-existed"], broker_hosts=hosts)
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.DELETED  # the shared rule: nothing on the disks it read
    assert not check.deleted_everywhere(verdict) and not check.settled(verdict)
    assert check.coverage()["status"] == "partial"
    assert list(check.not_inventoried) == [4]
    assert "BrokerHostUnreachableError: broker 4 on 127.0.0.9" in check.not_inventoried[4]
    assert "brokers [4] not read" in check.describe(verdict)
    operator = _operator(deployed, conn_id, tmp_path, topics=["never-existed"], broker_hosts=hosts)
    with pytest.raises(
        TopicDeletionNotSettledError, match=r"(?s)never-existed: DELETED.*brokers \[4\] not read"
    ):
        operator.execute({"ts_nodash": "20260101T000000"})
    record = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    assert record["outcome"] == "not_settled" and record["coverage"]["not_inventoried"].keys() == {"4"}


def test_invalid_topic_names_are_refused_before_any_read(incident, tmp_path):
    deployed, conn_id = incident
    operator = _operator(deployed, conn_id, tmp_path, topics=["../brokers/ids"])
    with pytest.raises(ValueError, match="topic"):
        operator.execute({"ts_nodash": "20260101T000000"})


def test_deletion_disabled_is_ignored(deploy, tmp_path):
    deployed, conn_id = deploy(deletion_disabled_cluster())
    check = _check(deployed, conn_id, ["keep-me"], broker_hosts={})
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.IGNORED
    assert verdict.causes == (Cause.DELETION_DISABLED,)
    assert verdict.blocking_brokers == (0, 1, 2)
    operator = _operator(deployed, conn_id, tmp_path, topics="keep-me", broker_hosts={})
    with pytest.raises(TopicDeletionUnsuccessfulError, match="keep-me: IGNORED"):
        operator.execute({"ts_nodash": "20260101T000000"})


def test_pending_markers_are_checked_when_no_topic_is_given(incident, tmp_path):
    deployed, conn_id = incident
    operator = _operator(deployed, conn_id, tmp_path)
    with pytest.raises(TopicDeletionNotSettledError):
        operator.execute({"ts_nodash": "20260101T000001"})
    record = json.loads((tmp_path / "test/deletions/20260101T000001/verdicts.json").read_text())
    assert record["topics"] == ["legacy-orders", "moving-topic"]
    assert [v["verdict"] for v in record["verdicts"]] == ["blocked", "blocked"]


# ---------------------------------------------------------------------------------------------
# Cleanup: dry run changes nothing; a real one moves exactly the leftovers, and only once
# ---------------------------------------------------------------------------------------------


def test_dry_run_cleanup_changes_nothing(deploy, tmp_path, deletion_clock):
    deployed, conn_id = deploy(incident_cluster())
    deletion_clock(RENAMED_AGO_MS)
    _plant_config_znode(deployed, "old-logs")
    disk_before = _disk(deployed.root)
    zk_before = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    operator = _operator(deployed, conn_id, tmp_path, topics=["old-logs"], cleanup=True)
    with pytest.raises(TopicDeletionUnsuccessfulError, match="old-logs: INCOMPLETE"):
        operator.execute({"ts_nodash": "20260101T000000"})
    assert _disk(deployed.root) == disk_before
    assert _zookeeper(deployed.zookeeper_hosts, deployed.chroot) == zk_before
    record = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    cleanup = record["cleanup"]
    assert cleanup["dry_run"] and cleanup["actions_taken"] == 0
    leftovers = {d["path"] for d in record["verdicts"][0]["leftover_dirs"]}
    assert len(leftovers) == 3
    assert {d["source"] for d in cleanup["directories"]} == leftovers
    # a live-named (orphan) directory never moves under its running broker without the opt-in
    statuses = {d["source"].rsplit("/", 1)[1]: d["status"] for d in cleanup["directories"]}
    assert {s for n, s in statuses.items() if "-delete" in n} == {"would_move"}
    assert {s for n, s in statuses.items() if "-delete" not in n} == {"refused"}
    refused = [d for d in cleanup["directories"] if d["status"] == "refused"]
    assert all("running" in d["detail"] for d in refused)
    # the topic keeps its config znode while one of its directories stays: nothing half-done
    assert [(z["path"], z["status"]) for z in cleanup["znodes"]] == [("/config/topics/old-logs", "kept")]
    assert "rollback" not in cleanup and not (tmp_path / "test/deletions/20260101T000000/rollback").exists()


def test_real_cleanup_moves_exactly_the_leftovers_and_is_idempotent(deploy, tmp_path, deletion_clock):
    deployed, conn_id = deploy(incident_cluster())
    deletion_clock(RENAMED_AGO_MS)
    _plant_config_znode(deployed, "old-logs")
    root = deployed.root
    disk_before = _disk(root)
    zk_before = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    leftovers = sorted(
        str(p.relative_to(root))
        for b in (2, 5)
        for log_dir in deployed.hosts[b].log_dirs
        for p in log_dir.iterdir()
        if p.name.startswith("old-logs-")
    )
    operator = _operator(
        deployed,
        conn_id,
        tmp_path,
        topics=["old-logs"],
        cleanup=True,
        dry_run=False,
        allow_running_broker_orphans=True,  # the orphan dir is on a running broker: explicit opt-in
    )
    result = operator.execute({"ts_nodash": "20260101T000000"})
    assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in result] == [
        ("old-logs", "deleted", True)
    ]

    # exactly the leftovers moved, into the quarantine beside the log dir, nothing else touched
    def quarantined(rel: str) -> str:
        broker_dir, data, _, name = rel.split("/", 3)
        return f"{broker_dir}/{data}/kafka-quarantine/20260101T000000/{name}"

    disk_after = _disk(root)
    moved_before = {
        p: v for p, v in disk_before.items() if any(p == m or p.startswith(m + "/") for m in leftovers)
    }
    untouched = {p: v for p, v in disk_before.items() if p not in moved_before}

    def without_dir_mtimes(listing):  # a rename out of a directory changes that directory's mtime
        return {p: v if v[0] == "f" else v[:2] for p, v in listing.items()}

    assert without_dir_mtimes({p: v for p, v in disk_after.items() if "kafka-quarantine" not in p}) == (
        without_dir_mtimes(untouched)
    )
    for rel, value in moved_before.items():
        top = next(m for m in leftovers if rel == m or rel.startswith(m + "/"))
        assert disk_after[quarantined(top) + rel[len(top) :]][:2] == value[:2]
    quarantine_files = {p for p in disk_after if "kafka-quarantine" in p}
    listings = {p for p in quarantine_files if p.endswith("quarantine-listing.json")}
    assert {p.split("/")[0] for p in listings} == {"broker-2", "broker-5"}
    for listing in listings:
        entries = json.loads((root / listing).read_text())
        broker_dir = listing.split("/")[0]
        assert sorted(e["source"] for e in entries) == sorted(
            str(root / m) for m in leftovers if m.startswith(broker_dir + "/")
        )
    # the config znode was saved, then removed; nothing else in ZooKeeper changed
    zk_after = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    assert zk_after == {p: v for p, v in zk_before.items() if p != "/config/topics/old-logs"}
    record = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    rollbacks = sorted((tmp_path / "test/deletions/20260101T000000/rollback").iterdir())
    assert [p.name.split("-")[0] for p in rollbacks] == ["quarantine", "znodes"]
    planned = json.loads(rollbacks[0].read_text())
    assert sorted(m["name"] for ms in planned["moves"].values() for m in ms) == sorted(
        Path(m).name for m in leftovers
    )
    rollback = rollbacks[1]
    saved = json.loads(rollback.read_text())["znodes"]
    assert [(z["path"], z["version"]) for z in saved] == [("/config/topics/old-logs", 0)]
    import base64

    assert base64.b64decode(saved[0]["data_base64"]) == CONFIG_LEFT
    cleanup = record["cleanup"]
    assert sorted(d["status"] for d in cleanup["directories"]) == ["moved"] * 3
    assert cleanup["znodes"] == [{"path": "/config/topics/old-logs", "status": "deleted", "version": 0}]
    assert record["verdicts"][0]["verdict"] == "incomplete"
    assert record["verdicts_after_cleanup"][0]["verdict"] == "deleted"
    assert {entry for listing in cleanup["listings"] for entry in listing["entries"]} == {
        Path(m).name for m in leftovers
    }

    # a retry of the same run finds nothing left to move and changes nothing
    again = operator.execute({"ts_nodash": "20260101T000000"})
    assert again == result
    assert _disk(root) == disk_after
    second = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    assert second["cleanup"]["directories"] == [] and second["cleanup"]["actions_taken"] == 0
    assert len(list((tmp_path / "test/deletions/20260101T000000/rollback").iterdir())) == 2


def test_cleanup_refuses_when_the_topic_came_back_since_the_check(deploy, tmp_path, deletion_clock):
    deployed, conn_id = deploy(incident_cluster())
    deletion_clock(RENAMED_AGO_MS)
    _plant_config_znode(deployed, "old-logs")
    operator = _operator(deployed, conn_id, tmp_path, topics=["old-logs"], cleanup=True, dry_run=False)
    settings = operator._settings()
    check = _check(deployed, conn_id, ["old-logs"])
    assert check.verdicts[0].verdict is Verdict.INCOMPLETE
    client = KazooClient(hosts=deployed.zookeeper_connect)  # someone re-creates the topic meanwhile
    client.start(timeout=15)
    try:
        client.create("/brokers/topics/old-logs", b'{"version":3,"partitions":{"0":[2,5]}}')
    finally:
        client.stop()
        client.close()
    disk_before = _disk(deployed.root)
    zk_before = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    report = operator._cleanup({}, check, settings, "20260101T000000", str(tmp_path / "artefact"))
    assert {d["status"] for d in report["directories"]} == {"refused"} and len(report["directories"]) == 3
    assert "/brokers/topics/old-logs exists again" in report["directories"][0]["detail"]
    assert report["znodes"][0]["status"] == "refused" and report["actions_taken"] == 0
    assert _disk(deployed.root) == disk_before
    assert _zookeeper(deployed.zookeeper_hosts, deployed.chroot) == zk_before


def test_a_cleanup_the_host_would_refuse_anywhere_moves_nothing_anywhere(deploy, tmp_path, deletion_clock):
    """Every step is checked before the first move (the host's own checks as a dry run): one broker
    whose quarantine is a symlink refuses the whole cleanup, naming it; the other broker's leftovers
    stay too, and so does the topic's config znode."""
    deployed, conn_id = deploy(incident_cluster())
    deletion_clock(RENAMED_AGO_MS)
    _plant_config_znode(deployed, "old-logs")
    [log_dir] = deployed.hosts[5].log_dirs
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (log_dir.parent / "kafka-quarantine").symlink_to(elsewhere)
    check = _check(deployed, conn_id, ["old-logs"])
    [verdict] = check.verdicts
    assert verdict.verdict is Verdict.INCOMPLETE
    # the damage: the host accepts broker 2's moves and refuses only broker 5's, so a cleanup that
    # asked each host in turn moved broker 2's directories and then refused: half done
    host_hook = BrokerHostHook(
        "deletion_ssh", conn_id, broker_hosts=STOPPED, server_properties_path=_server_properties(deployed)
    )
    by_broker: dict[int, list[HostMove]] = {}
    for d in check.leftovers(verdict):
        by_broker.setdefault(d.broker_id, []).append(HostMove(d.log_dir, d.name, kind=d.kind))
    statuses = {
        b: {
            r["status"]
            for r in quarantine_directories(
                host_hook,
                b,
                moves,
                log_dirs=check.disks[b].log_dirs,
                ts="20260101T000000",
                dry_run=True,
                broker_running=False,
                allow_running_broker_orphans=True,
            )["results"]
        }
        for b, moves in by_broker.items()
    }
    assert statuses == {2: {"would_move"}, 5: {"refused"}}

    disk_before = _disk(deployed.root)
    zk_before = _zookeeper(deployed.zookeeper_hosts, deployed.chroot)
    operator = _operator(
        deployed,
        conn_id,
        tmp_path,
        topics=["old-logs"],
        cleanup=True,
        dry_run=False,
        allow_running_broker_orphans=True,
    )
    with pytest.raises(MaintenanceRefusedError) as refused:
        operator.execute({"ts_nodash": "20260101T000000"})
    text = str(refused.value)
    assert "[quarantine-refused]" in text and "broker 5" in text and "symlink" in text
    assert "broker 2" not in text  # only what is wrong is named
    assert _disk(deployed.root) == disk_before
    assert _zookeeper(deployed.zookeeper_hosts, deployed.chroot) == zk_before  # config znode, no lease
    record = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    assert record["cleanup"]["actions_taken"] == 0 and "quarantine-refused" in record["cleanup"]["refused"]
    assert not (tmp_path / "test/deletions/20260101T000000/rollback").exists()


# ---------------------------------------------------------------------------------------------
# A real Airflow DAG run: the wait is deferred and the deletion completes during it
# ---------------------------------------------------------------------------------------------


def _retiring_cluster() -> SimulatedCluster:
    """Three brokers; ``retiring`` marked for deletion while a reassignment of it runs."""
    spec = ClusterSpec(
        name="retire",
        brokers=tuple(BrokerSpec(broker_id=i, host=ADDRESSES[i]) for i in range(3)),
        topics=(
            TopicSpec("retiring", partitions=2, replication_factor=2, assignment={0: (0, 1), 1: (1, 2)}),
            TopicSpec("stays", partitions=1, replication_factor=2),
        ),
        seed=3,
    )
    cluster = SimulatedCluster(spec)
    cluster.start_reassignment({("retiring", 0): (0, 2)})
    cluster.delete_topic("retiring")
    return cluster


DAG_FILE = textwrap.dedent(
    """
    import json
    import os

    from airflow.sdk import DAG

    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    config = json.loads(os.environ["KAFKA_ZK_DELETION_TEST_DAG"])
    with DAG("kafka_zk_deletion_verify_test", schedule=None, params={"topics": "retiring"}) as dag:
        TopicDeletionVerifyOperator(
            task_id="verify_deletions",
            cluster="test",
            base_path=config["base_path"],
            kafka_zookeeper_conn_id=config["zk_conn_id"],
            ssh_conn_id="deletion_ssh",
            server_properties_path=config["server_properties"],
            topics="{{ params.topics }}",
            connect_timeout=3,
            deferrable=True,
            poll_interval=1,
            wait_timeout=120,
        )
    """
)


def test_deletion_completing_during_a_deferred_wait_ends_deleted(
    deploy, sshd, airflow_home, tmp_path, monkeypatch, capfd, caplog
):
    from airflow.dag_processing.dagbag import DagBag

    cluster = _retiring_cluster()
    deployed, conn_id = deploy(cluster)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "deletion_verify_test_dag.py").write_text(DAG_FILE)
    bundle = {
        "name": "deletion-test-dags",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
    }
    monkeypatch.setenv(
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        json.dumps([{**bundle, "kwargs": {"path": str(dags)}}]),
    )
    monkeypatch.setenv(
        "KAFKA_ZK_DELETION_TEST_DAG",
        json.dumps(
            {
                "base_path": str(tmp_path / "artefacts"),
                "zk_conn_id": conn_id,
                "server_properties": _server_properties(deployed),
            }
        ),
    )
    dag = DagBag(dag_folder=str(dags)).get_dag("kafka_zk_deletion_verify_test")

    def accepted_logins() -> int:
        return sshd.log_path.read_text(errors="replace").count("Accepted publickey")

    logins_before = accepted_logins()

    def finish_the_deletion() -> None:
        # The first check reads ZooKeeper, then inventories the 3 brokers over SSH: once their
        # logins show in sshd's log, it has seen the deletion blocked, and the task defers.
        deadline = time.monotonic() + 90
        while accepted_logins() < logins_before + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        assert cluster.catch_up_reassignment("retiring", 0)
        assert cluster.complete_reassignment("retiring", 0)
        cluster.delete_topic("retiring")  # the controller resumes the paused deletion
        # disks first, then ZooKeeper, as Kafka does (replicas go before the znodes)
        write_broker_hosts(cluster, deployed.root, deployed.zookeeper_connect)
        deployed.writer.apply(render_zookeeper(cluster))
        finished.set()

    finished = threading.Event()
    worker = threading.Thread(target=finish_the_deletion, daemon=True)
    worker.start()
    run = dag.test()
    worker.join(timeout=30)
    assert finished.is_set()
    [ti] = run.get_task_instances()
    assert ti.state == "success"
    [ts_dir] = (tmp_path / "artefacts" / "test" / "deletions").iterdir()
    record = json.loads((ts_dir / "verdicts.json").read_text())
    assert record["completed_by"] == "trigger:settled"  # the wait ran in the trigger
    assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in record["verdicts"]] == [
        ("retiring", "deleted", True)
    ]
    assert record["coverage"]["status"] == "complete" and record["coverage"]["inventoried"] == [0, 1, 2]
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        [xcom] = (
            session.query(XComModel).filter_by(dag_id=dag.dag_id, run_id=run.run_id, key="return_value").all()
        )
        value = xcom.value if not isinstance(xcom.value, str) else json.loads(xcom.value)
    assert value == record["verdicts"]  # the verdicts as plain dicts
    output = capfd.readouterr()
    logs = output.out + output.err + caplog.text
    assert "running trigger in line" in logs
    assert "reassignment_in_progress" in logs  # what the first check found, before the deferral
    key = Path(json.loads(os.environ["AIRFLOW_CONN_DELETION_SSH"])["extra"]["key_file"]).read_text()
    assert key.splitlines()[1] not in logs


# ---------------------------------------------------------------------------------------------
# Issue 26: the broker that held a replica comes back; Kafka removes its -delete dirs on its own
# schedule, and the verifier waits for that instead of calling them left over
# ---------------------------------------------------------------------------------------------

RETURNING_DELAY_MS = 3_000  # log.segment.delete.delay.ms of the test cluster (Kafka's default: 60 s)


def _returning_broker_cluster() -> SimulatedCluster:
    """Three brokers; ``retired`` deleted while broker 2, which holds a replica of each partition, is down."""
    spec = ClusterSpec(
        name="returning",
        brokers=tuple(BrokerSpec(broker_id=i, host=ADDRESSES[i]) for i in range(3)),
        topics=(
            TopicSpec("retired", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
            TopicSpec("stays", partitions=1, replication_factor=2, assignment={0: (0, 1)}),
        ),
        log_segment_delete_delay_ms=RETURNING_DELAY_MS,
        seed=5,
    )
    cluster = SimulatedCluster(spec)
    cluster.stop_broker(2, clean=True)
    cluster.delete_topic("retired", leave_delete_dirs=True)
    return cluster


def _synced_without(deployed: DeployedCluster, brokers, prefix: str) -> bool:
    """The brokers' host roots are written (``stays`` is there) and hold no directory named ``prefix``*."""
    try:
        names = {b: [p.name for d in deployed.hosts[b].log_dirs for p in d.iterdir()] for b in brokers}
    except OSError:  # being rewritten right now
        return False
    return all(
        "stays-0" in listed and not any(n.startswith(prefix) for n in listed) for listed in names.values()
    )


def test_deletion_settles_deleted_after_the_offline_broker_returns_and_kafka_removes_its_dirs(
    deploy, tmp_path, capfd, caplog
):
    """What a real 3.3.1 cluster did (its controller and broker logs, quoted below): the deletion is BLOCKED while broker 2
    is down; when it returns the controller resumes it ("Some replicas ... for topics scheduled for
    deletion ... are on the newly restarted brokers 2. Signaling restart of topic deletion"), ZooKeeper
    is clean within seconds, broker 2 renames its replicas ("Log for partition retired-0 is renamed to
    .../retired-0.<uuid>-delete and is scheduled for deletion") and its kafka-delete-logs task removes
    them -- not before its first run 30 s after the start ("Deleted log for partition retired-0 in
    .../retired-0.<uuid>-delete."). The old rule (age > log.segment.delete.delay.ms: INCOMPLETE, final)
    ended the verification 3 s after the rename; the verifier now waits and settles DELETED."""
    from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime

    cluster = _returning_broker_cluster()
    deployed, conn_id = deploy(cluster)
    [blocked] = _check(deployed, conn_id, ["retired"], broker_hosts={2: ADDRESSES[2]}).verdicts
    assert (blocked.verdict, blocked.causes, blocked.blocking_brokers) == (
        Verdict.BLOCKED,
        (Cause.REPLICA_BROKER_OFFLINE,),
        (2,),
    )

    cluster.start_broker(2)  # the controller resumes the deletion as broker 2 registers
    deployed.sync()
    started = time.monotonic()
    on_broker_2 = [
        p for d in deployed.hosts[2].log_dirs for p in d.iterdir() if p.name.startswith("retired-")
    ]
    assert len(on_broker_2) == 2 and all(p.name.endswith("-delete") for p in on_broker_2)

    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts", delete_logs=True) as runtime:
        # brokers 0 and 1, up for an hour, delete theirs 3 s after the rename; broker 2 waits for its
        # first kafka-delete-logs run, 30 s after its start
        deadline = time.monotonic() + 60
        while not (
            sum(line.startswith("Deleted log") for line in runtime.delete_logs.log) == 2
            and _synced_without(deployed, (0, 1), "retired-")
        ):
            assert time.monotonic() < deadline, runtime.delete_logs.log
            time.sleep(0.1)
        early = _check(deployed, conn_id, ["retired"], broker_hosts={}, margin_ms=0)
        if time.monotonic() - started < 20:  # a very slow machine could be near the first run already
            [pending] = early.verdicts
            assert pending.verdict is Verdict.PENDING_DELETE_DELAY and not early.settled(pending)
            assert {d.broker_id for d in pending.pending_dirs} == {2}
            due = re.search(
                r"broker 2: 2 -delete directories waiting for its kafka-delete-logs task \(due in ([0-9.]+) s",
                pending.describe(),
            )
            assert due and float(due[1]) > 10  # only the 30 s after the start makes it wait that long
            assert "not before 30000 ms after the broker's start" in pending.describe()
        operator = _operator(
            deployed,
            conn_id,
            tmp_path,
            topics=["retired"],
            broker_hosts={},
            wait_timeout=180,
            poll_interval=1,
            delete_dir_margin=10,
        )
        result = operator.execute({"ts_nodash": "20260101T000000"})
        kafka_log = list(runtime.delete_logs.log)
    assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in result] == [
        ("retired", "deleted", True)
    ]
    record = json.loads((tmp_path / "test/deletions/20260101T000000/verdicts.json").read_text())
    assert record["completed_by"] == "poll" and record["coverage"]["status"] == "complete"
    output = capfd.readouterr()
    logs = output.out + output.err + caplog.text
    assert "retired: PENDING_DELETE_DELAY" in logs and "INCOMPLETE" not in logs
    for path in on_broker_2:
        partition = path.name.split(".", 1)[0]
        assert f"Deleted log for partition {partition} in {path}." in kafka_log
        assert not path.exists()
    assert not [
        p for b in (0, 1, 2) for d in deployed.hosts[b].log_dirs for p in d.iterdir() if "retired" in p.name
    ]


def test_read_only_verification_refuses_a_chroot_without_a_kafka_cluster(
    zookeeper_server, tmp_path, monkeypatch
):
    """Issue 26: verification against a chroot holding no Kafka cluster said "DELETED" (nothing there to
    find). It now refuses the identity as every mutation does (``pin_zookeeper_identity``)."""
    from airflow_provider_kafka_zk.maintenance import ClusterIdentityError

    chroot = zookeeper_server.new_chroot("/not_kafka_")
    monkeypatch.setenv(
        "AIRFLOW_CONN_DELETION_EMPTY_ZK",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": chroot},
            }
        ),
    )
    for topics in (["old-logs"], None):  # given topics, or every marker (there are none either)
        operator = TopicDeletionVerifyOperator(
            task_id="verify",
            cluster="test",
            base_path=str(tmp_path),
            kafka_zookeeper_conn_id="deletion_empty_zk",
            ssh_conn_id="deletion_ssh",
            topics=topics,
            wait_timeout=0,
            deferrable=False,
        )
        with pytest.raises(ClusterIdentityError, match=r"holds no Kafka cluster \(/brokers/ids is missing\)"):
            operator.execute({"ts_nodash": "20260101T000000"})
    assert not (tmp_path / "test").exists()  # no verdicts written: there was nothing to judge
    # a chroot with brokers but no /cluster/id cannot prove which cluster it is either
    client = KazooClient(hosts=zookeeper_server.connect_string + chroot)
    client.start(timeout=15)
    try:
        client.create("/brokers/ids", makepath=True)
    finally:
        client.stop()
        client.close()
    with pytest.raises(ClusterIdentityError, match="has no /cluster/id"):
        operator.execute({"ts_nodash": "20260101T000000"})
