"""ZooKeeper snapshots against a real ZooKeeper holding the simulator's Kafka trees: completeness,
byte-identical data and Stat, consistency verdicts, restarts, session expiry, artefacts, loads."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from airflow_provider_kafka_zk.artefacts.snapshots import (
    MANIFEST_FILE,
    ZNODES_FILE,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    KafkaZooKeeperHook,
    SnapshotLoadReport,
    TargetNotEmptyError,
)
from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import (
    SnapshotConnectionLostError,
    SnapshotWalk,
    ZnodeStore,
    ZnodeTreeWalker,
)
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.operators.snapshot import (
    SourceClusterGuardError,
    ZooKeeperSnapshotLoadOperator,
    ZooKeeperSnapshotOperator,
)
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
    incident_cluster,
)
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
from airflow_provider_kafka_zk.testing.zk_bulk import BulkLoadedTree

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------------------- helpers
def plain_walk(client: KazooClient, root: str = "/") -> dict[str, tuple[bytes | None, tuple]]:
    """The baseline: one get and one get_children per znode, sequentially."""
    out = {}
    pending = [root]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, tuple(stat))
        prefix = "/" if path == "/" else path + "/"
        pending.extend(prefix + child for child in client.get_children(path))
    return out


def as_plain(rows: list[ZnodeRow]) -> dict[str, tuple[bytes | None, tuple]]:
    """Rows in the baseline's shape (kazoo ZnodeStat field order)."""
    return {
        r.path: (
            r.data,
            (
                r.czxid,
                r.mzxid,
                r.ctime,
                r.mtime,
                r.version,
                r.cversion,
                r.aversion,
                r.ephemeral_owner,
                r.data_length,
                r.num_children,
                r.pzxid,
            ),
        )
        for r in rows
    }


def set_connection(monkeypatch, conn_id: str, server, chroot: str, **extra) -> str:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": server.connect_string,
                "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5, **extra},
            }
        ),
    )
    return conn_id


@pytest.fixture
def incident(zookeeper_server, zk_chroot, tmp_path, monkeypatch):
    """The incident cluster in a fresh chroot, a connection to it, and a plain client."""
    cluster = incident_cluster()
    with DeployedCluster(cluster, zookeeper_server.connect_string, zk_chroot, tmp_path / "hosts") as deployed:
        client = KazooClient(hosts=zookeeper_server.connect_string + zk_chroot)
        client.start()
        conn_id = set_connection(monkeypatch, "incident_zk", zookeeper_server, zk_chroot)
        try:
            yield deployed, client, conn_id
        finally:
            client.stop()
            client.close()


def big_cluster(partitions: int) -> SimulatedCluster:
    per_topic = 100
    spec = ClusterSpec(
        name="big",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3}") for b in range(6)),
        topics=tuple(
            TopicSpec(
                f"topic-{t:04d}",
                partitions=min(per_topic, partitions - t * per_topic),
                replication_factor=3,
                records_per_partition=0,
            )
            for t in range((partitions + per_topic - 1) // per_topic)
        ),
    )
    return SimulatedCluster(spec)


@pytest.fixture
def big_tree(zookeeper_server, zk_chroot, monkeypatch):
    """About 20k znodes (10k partitions), loaded with transactions; live brokers hold sessions.

    Yields a plain client, the connection id and the tree as the simulator wrote it (path -> data):
    the oracle for trees too big to read back with the slow sequential walk in every test.
    """
    records = render_zookeeper(big_cluster(10_000))
    with BulkLoadedTree(zookeeper_server.connect_string, zk_chroot, records):
        client = KazooClient(hosts=zookeeper_server.connect_string + zk_chroot)
        client.start()
        conn_id = set_connection(monkeypatch, "big_zk", zookeeper_server, zk_chroot, connect_timeout=2)
        written = {r.path: r.data for r in records}
        written["/"] = client.get("/")[0]
        try:
            yield client, conn_id, written
        finally:
            client.stop()
            client.close()


def undisturbed(conn_id: str) -> dict[str, tuple[bytes | None, tuple]]:
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot()
    assert walk.consistent
    return as_plain(walk.rows)


# ---------------------------------------------------------------------------- completeness
def server_zxid(server) -> int:
    """What the server itself says (``srvr``): its last processed zxid."""
    line = next(line for line in server.four_letter("srvr").splitlines() if line.startswith("Zxid:"))
    return int(line.split()[1], 16)


def test_snapshot_holds_every_znode_with_identical_data_and_stat(incident, zookeeper_server):
    deployed, client, conn_id = incident
    with KafkaZooKeeperHook(conn_id) as hook:
        hook.get_conn()
        zxid_before = server_zxid(zookeeper_server)
        walk = hook.snapshot()
        zxid_after = server_zxid(zookeeper_server)
    expected = plain_walk(client)
    assert walk.znodes == len(expected) > 150
    assert as_plain(walk.rows) == expected  # every path, byte-identical data, full Stat
    assert [r.path for r in walk.rows] == sorted(expected)
    assert walk.method == "multi-read" and walk.requests < walk.znodes / 10
    assert walk.consistent and walk.consistent_zxid == walk.start_zxid
    assert walk.max_zxid_seen <= walk.start_zxid <= walk.end_zxid
    assert walk.start_zxid == zxid_before and walk.end_zxid == zxid_after  # nothing wrote meanwhile
    assert walk.gone == () and walk.reread == () and walk.reconnects == 0
    rows = {r.path: r for r in walk.rows}
    assert rows[zk.ADMIN].data is None  # a null-data container stays null, not b""
    assert rows[zk.broker_path(0)].ephemeral_owner == deployed.writer.session_id(0) != 0
    assert rows[zk.CONTROLLER_EPOCH].version == deployed.cluster.controller_epoch_version


def test_pipelined_fallback_reads_the_same_tree(incident):
    _, client, conn_id = incident
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot(method="pipelined", batch_ops=7, window=3)
    assert walk.method == "pipelined"
    assert as_plain(walk.rows) == plain_walk(client)
    assert walk.consistent


def test_include_and_exclude_choose_subtrees(incident):
    _, client, conn_id = incident
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot(
            include=("/brokers", "/cluster/id", "/brokers/topics/orders", "/no/such/path"),
            exclude=("/brokers/topics", "/brokers/seqid"),
        )
    paths = {r.path for r in walk.rows}
    expected = {
        p for p in plain_walk(client, "/brokers") if not p.startswith(("/brokers/topics", "/brokers/seqid"))
    }
    assert paths == expected | {"/cluster/id"}
    assert walk.missing_roots == ("/no/such/path",)
    assert walk.include == ("/brokers", "/cluster/id", "/no/such/path")  # nested include folded


def test_zookeeper_subtree_is_excluded_by_default_at_the_real_root(zookeeper_server, monkeypatch):
    conn_id = set_connection(monkeypatch, "root_zk", zookeeper_server, "/")
    with KafkaZooKeeperHook(conn_id) as hook:
        default = {r.path for r in hook.snapshot().rows}
        everything = {r.path for r in hook.snapshot(include=("/zookeeper",), exclude=()).rows}
    assert "/" in default and not any(p.startswith("/zookeeper") for p in default)
    assert "/zookeeper" in everything and "/zookeeper/quota" in everything


def test_malformed_topic_znode_is_kept_raw(incident, tmp_path):
    _, client, conn_id = incident
    broken = b'{"version":3,"partitions":{"0":[1,'
    client.set(zk.topic_path("orders"), broken)
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot()
    rows = {r.path: r for r in walk.rows}
    assert rows[zk.topic_path("orders")].data == broken
    ref, _ = write_snapshot(str(tmp_path), "incident", walk)
    _, read_back = read_snapshot(ref.path)
    assert {r.path: r for r in read_back}[zk.topic_path("orders")].data == broken
    from airflow_provider_kafka_zk.kafka.model import ClusterState, ModelFindingKind

    state = ClusterState.from_snapshot(read_back, cluster="incident")
    [finding] = state.findings_at(zk.topic_path("orders"))
    assert finding.kind is ModelFindingKind.MALFORMED_ZNODE and finding.data == broken


# ---------------------------------------------------------------------------- consistency
@pytest.mark.parametrize("method", ["auto", "pipelined"])
def test_changes_during_the_walk_make_it_fuzzy_and_are_reread(incident, method):
    _, client, conn_id = incident
    children = [f"/meddle/c{i:02d}" for i in range(40)]
    client.create("/meddle", b"parent")
    for path in children:
        client.create(path, b"leaf")
    changed_topic = b'{"version":3,"partitions":{"0":[0]}}'
    done: list[str] = []

    def meddle(progress):
        if not done:  # right after the root was read: nothing below it has been read yet
            client.set(zk.topic_path("orders"), changed_topic)
            client.create("/config/topics/new-topic", b'{"version":1,"config":{}}')
            done.append("early")
        elif len(done) == 1 and (progress.position or "").startswith("/meddle/"):
            # the walk goes in path order: /meddle is listed, none of its children is read yet
            for path in children:
                client.delete(path)
            done.append("late")

    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot(batch_ops=2, window=1, progress=meddle, progress_every=0, method=method)
    assert done == ["early", "late"] and walk.method == ("multi-read" if method == "auto" else method)
    assert not walk.consistent and walk.consistent_zxid is None
    assert walk.start_zxid < walk.end_zxid
    rows = {r.path: r for r in walk.rows}
    assert [r.path for r in walk.rows] == sorted(rows)
    assert rows[zk.topic_path("orders")].data == changed_topic
    assert "/config/topics/new-topic" in rows  # created under a znode read again: walked
    assert walk.gone == tuple(children)  # listed, deleted before they were read
    assert not set(walk.gone) & set(rows)  # a gone znode is recorded as gone, not as a row
    assert {zk.topic_path("orders"), "/config/topics", "/meddle"} <= set(walk.reread)
    assert rows["/meddle"].num_children == 0  # the parent as read again, after the deletions
    after = plain_walk(client)
    assert set(rows) == set(after)  # nothing else changed after the walk: the same znodes
    for path in walk.reread:  # what changed was read again after the walk
        assert rows[path].data == after[path][0] and rows[path].num_children == after[path][1][9]


def test_the_walk_streams_sorted_rows_through_a_spill_file(big_tree, tmp_path):
    """Issue 17: rows leave Python while the tree is walked (few held at once, whatever the tree's
    size), spilled in record batches; the artefact is the in-memory write's, byte for byte."""
    client, _, written = big_tree
    walker = ZnodeTreeWalker(client, batch_ops=100, window=4, flush_rows=1_000, spill_dir=str(tmp_path))
    walk = walker.run()
    store = walk.table
    assert isinstance(store, ZnodeStore) and walk.consistent
    assert walk.znodes == len(written) > 20_000
    assert {r.path: r.data for r in walk.rows} == written
    assert len(store.firsts) == -(-walk.znodes // 1_000)  # spilled 1,000 rows at a time
    assert walk.rows_held_peak < walk.znodes / 5  # streamed: not the whole tree held until the end
    assert os.listdir(tmp_path) == [os.path.basename(store.directory)]

    ref, manifest = write_snapshot(str(tmp_path / "streamed"), "big", walk)
    in_memory = SnapshotWalk(
        **{
            **{f.name: getattr(walk, f.name) for f in dataclasses.fields(walk)},
            "table": {r.path: (r.data, as_plain([r])[r.path][1]) for r in walk.rows},
        }
    )
    ref_memory, manifest_memory = write_snapshot(str(tmp_path / "in-memory"), "big", in_memory)
    assert manifest == manifest_memory  # same sha256, rows, zxids, data bytes, counts
    with open(f"{ref.path}/{ZNODES_FILE}", "rb") as a, open(f"{ref_memory.path}/{ZNODES_FILE}", "rb") as b:
        assert a.read() == b.read()
    walk.close()
    assert sorted(os.listdir(tmp_path)) == ["in-memory", "streamed"]  # the spill file is gone


# ---------------------------------------------------------------------------- failures
class _FaultySnapshotOperator(ZooKeeperSnapshotOperator):
    """The real operator; its progress log line is where the test breaks ZooKeeper mid-walk."""

    fault = staticmethod(lambda: None)

    def _log_progress(self, progress):
        super()._log_progress(progress)
        fault, self.fault = self.fault, (lambda: None)
        fault()


def test_zookeeper_restart_mid_walk_completes_or_fails_cleanly(big_tree, zookeeper_server, tmp_path):
    client, conn_id, written = big_tree
    expected = undisturbed(conn_id)
    assert {p: d for p, (d, _) in expected.items()} == written and len(written) > 20_000
    op = _FaultySnapshotOperator(
        task_id="snap",
        cluster="big",
        kafka_zookeeper_conn_id=conn_id,
        base_path=str(tmp_path),
        progress_every=0,
    )
    restarted = threading.Event()

    def restart_in_another_thread():
        threading.Thread(target=lambda: (zookeeper_server.restart(), restarted.set()), daemon=True).start()
        deadline = time.monotonic() + 30
        while client.state == KazooState.CONNECTED and time.monotonic() < deadline:
            time.sleep(0.01)  # hold the walk until the server is really gone

    op.fault = restart_in_another_thread
    try:
        summary = op.execute({})
    except Exception as exc:  # allowed: a clear typed error, and nothing published
        assert isinstance(exc, SnapshotConnectionLostError), repr(exc)
        assert list_snapshots(str(tmp_path), "big") == []
        return
    finally:
        assert restarted.wait(60)
    # the walk was held until the connection had dropped; kazoo may have queued the next reads
    # until it reconnected (then no request failed) or failed them (then the walker sent them again)
    _, rows = read_snapshot(summary["path"])
    assert as_plain(rows) == expected  # same paths, data and Stat as without the restart
    assert summary["znodes"] == len(written) and summary["consistent"]


def test_zookeeper_down_longer_than_the_timeout_fails_clearly_and_publishes_nothing(
    big_tree, zookeeper_server, tmp_path
):
    _, conn_id, _ = big_tree
    op = _FaultySnapshotOperator(
        task_id="snap",
        cluster="big",
        kafka_zookeeper_conn_id=conn_id,
        base_path=str(tmp_path),
        progress_every=0,
        reconnect_timeout=3,
    )
    op.fault = zookeeper_server.stop
    try:
        with pytest.raises(SnapshotConnectionLostError, match="nothing was published"):
            op.execute({})
    finally:
        zookeeper_server.start()
    assert list_snapshots(str(tmp_path), "big") == []
    assert not list(tmp_path.rglob(MANIFEST_FILE))


def test_session_expiry_mid_walk_resumes_on_a_new_session(big_tree, zookeeper_server):
    _, conn_id, written = big_tree
    expected = undisturbed(conn_id)
    assert {p: d for p, (d, _) in expected.items()} == written
    with KafkaZooKeeperHook(conn_id) as hook:
        expired: list[int] = []

        def expire(progress):
            if expired:
                return
            session_id, password = hook.get_conn().client_id
            # kazoo.testing's way: a second client takes the session over and closes it
            thief = KazooClient(hosts=zookeeper_server.connect_string, client_id=(session_id, password))
            thief.start()
            thief.stop()
            thief.close()
            expired.append(session_id)

        walk = hook.snapshot(batch_ops=200, window=2, progress=expire, progress_every=0)
        assert hook.get_conn().client_id[0] != expired[0]
    assert walk.session_expiries == 1 and walk.reconnects >= 1
    assert as_plain(walk.rows) == expected
    assert walk.consistent


def test_pipelined_walk_survives_a_zookeeper_restart_on_its_own_sessions(big_tree, zookeeper_server):
    """The walker's own sessions die with the server; their reads are sent again on new sessions
    (opened with the walk's zxid) once it is back, and the rows are those of an undisturbed walk."""
    _, conn_id, written = big_tree
    expected = undisturbed(conn_id)
    restarted: list[bool] = []

    def restart(progress):
        if not restarted and progress.znodes > 2_000:
            zookeeper_server.restart()
            restarted.append(True)

    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot(
            method="pipelined", batch_ops=200, window=4, connections=3, progress=restart, progress_every=0
        )
    assert restarted and walk.method == "pipelined" and walk.reconnects >= 1
    assert as_plain(walk.rows) == expected and len(expected) == len(written)
    assert walk.consistent


# ---------------------------------------------------------------------------- loading
def test_snapshot_loads_into_an_empty_scratch_chroot(incident, zookeeper_server, tmp_path):
    deployed, _, conn_id = incident
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot()
        source = hook.target_description()
    ref, _ = write_snapshot(str(tmp_path), "incident", walk, source=source)
    scratch = zookeeper_server.new_chroot("/scratch_")
    op = ZooKeeperSnapshotLoadOperator(
        task_id="load",
        kafka_zookeeper_conn_id=conn_id,
        target_chroot=scratch,
        cluster="incident",
        base_path=str(tmp_path),
    )
    report = op.execute({})
    assert report["snapshot"] == ref.path and report["created"] == walk.znodes - 1  # all but the root
    live = {zk.broker_path(b) for b in deployed.cluster.online_broker_ids()} | {zk.CONTROLLER}
    assert {e["path"] for e in report["ephemerals_as_persistent"]} == live
    copy = KazooClient(hosts=zookeeper_server.connect_string + scratch)
    copy.start()
    try:
        loaded = plain_walk(copy)
    finally:
        copy.stop()
        copy.close()
    source_rows = {r.path: r for r in walk.rows}
    assert set(loaded) == set(source_rows)
    for path, (data, stat) in loaded.items():
        if path == "/":
            continue
        assert data == source_rows[path].data, path  # null stays null
        assert stat[4] == source_rows[path].version, path  # partition epochs, fencing versions
        assert stat[7] == 0  # nothing ephemeral in the copy
    # a second load into the same (now full) chroot is refused
    with pytest.raises(TargetNotEmptyError, match="not empty"):
        op.execute({})


def test_load_refuses_the_source_chroot_and_the_root(incident, tmp_path, zookeeper_server):
    _, client, conn_id = incident
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot()
        source = hook.target_description()
    ref, _ = write_snapshot(str(tmp_path), "incident", walk, source=source)
    before = plain_walk(client)
    for target in (source["chroot"], source["chroot"] + "/scratch"):
        op = ZooKeeperSnapshotLoadOperator(
            task_id="load", kafka_zookeeper_conn_id=conn_id, target_chroot=target, snapshot_path=ref.path
        )
        with pytest.raises(SourceClusterGuardError, match="source"):
            op.execute({})
    with KafkaZooKeeperHook(conn_id, chroot="/") as hook, pytest.raises(TargetNotEmptyError, match="root"):
        hook.load_snapshot_rows(walk.rows)
    assert plain_walk(client) == before  # the source was never touched


def test_load_report_lists_what_is_not_reproduced():
    report = SnapshotLoadReport("zk:2181/s", 3, 2, (("/controller", 0x1A),), (("/x", 20_000),), 0.5)
    d = report.to_dict()
    assert d["ephemerals_as_persistent"] == [{"path": "/controller", "owner_session": "0x1a"}]
    assert d["versions_not_replayed"] == [{"path": "/x", "version": 20_000}]
    assert any("ACL" in line for line in d["not_reproduced"])


# ---------------------------------------------------------------------------- acceptance
def test_snapshot_diff_reports_the_topic_id_a_controller_failover_changed(incident, tmp_path):
    """Issue acceptance: inventory-updates lacks topic_id in the model; an old client's partition
    add plus a controller failover shows up in the diff as a changed topic_id."""
    from airflow_provider_kafka_zk.kafka.model import ClusterState
    from airflow_provider_kafka_zk.kafka.snapshot_diff import ChangeKind, diff_states

    deployed, _, conn_id = incident
    base = str(tmp_path)
    with KafkaZooKeeperHook(conn_id) as hook:
        first = hook.snapshot()
        write_snapshot(base, "incident", first)
        before_id = deployed.cluster.topic("orders").zk_topic_id
        deployed.cluster.old_client_adds_partitions("orders", 8, client="1.0")
        deployed.cluster.controller_failover()
        deployed.sync()
        second = hook.snapshot()
        write_snapshot(base, "incident", second)
    older, newer = list_snapshots(base, "incident")
    before = ClusterState.from_snapshot(read_snapshot(older.path)[1], cluster="incident")
    after = ClusterState.from_snapshot(read_snapshot(newer.path)[1], cluster="incident")
    assert before.topic("inventory-updates").topic_id is None
    diff = diff_states(before, after)
    [changed] = [c for c in diff.of_kind(ChangeKind.TOPIC_ID_CHANGED) if c.topic == "orders"]
    assert changed.before == before_id and changed.after == deployed.cluster.topic("orders").zk_topic_id
    assert changed.after != before_id
    minted = [c for c in diff.topic_id_changes if c.topic == "inventory-updates"]
    assert minted and minted[0].before is None and minted[0].after is not None


# ---------------------------------------------------------------------------- guessed children
def _walk_rows(client: KazooClient, **kwargs) -> tuple[list[tuple], ZnodeTreeWalker, SnapshotWalk]:
    walker = ZnodeTreeWalker(client, **kwargs)
    walk = walker.run()
    return [dataclasses.astuple(r) for r in walk.rows], walker, walk


@pytest.mark.parametrize("method", ["multi-read", "pipelined", "pipelined-kazoo"])
def test_guessed_children_give_the_rows_a_listing_gives_even_where_the_layout_lies(incident, method):
    """Listings answered by reading Kafka's expected children (``guess_children``) must give
    exactly the rows of a walk that lists every parent, all 11 Stat fields, also where the tree
    is not what Kafka writes: a partition missing from the numbering, a partition znode with an
    extra child or none, a non-numeric partition, a topic with a second child."""
    _, client, _ = incident
    topic = "/brokers/topics/orders"
    partitions = client.get_children(topic + "/partitions")
    client.delete(f"{topic}/partitions/{partitions[0]}", recursive=True)  # a gap in 0..n-1
    client.create(f"{topic}/partitions/{partitions[1]}/extra", b"x")  # two children: no guess
    client.delete(f"{topic}/partitions/{partitions[2]}/state")  # none: nothing to guess
    client.create(f"{topic}/partitions/not-a-number", None)
    client.create(f"{topic}/zz-second-child", b"{}")
    client.create("/brokers/topics/solo/partitions/7/state", b'{"leader":1}', makepath=True)  # 7, not 0

    listed, listing_walker, _ = _walk_rows(client, method=method, guess=False, batch_ops=9, window=2)
    guessed, walker, walk = _walk_rows(client, method=method, batch_ops=9, window=2)
    assert walk.method == method and walk.consistent
    assert guessed == listed and len(listed) > 100
    assert as_plain(walk.rows) == plain_walk(client)
    assert listing_walker.guessed == 0 and walker.guessed > 10  # the intact partitions were guessed
    assert walk.requests < listing_walker._requests or method == "multi-read"


def test_guess_children_follows_kafkas_layout_only():
    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import guess_children

    assert guess_children("/brokers/topics/t", 1) == ["partitions"]
    assert guess_children("/brokers/topics/t", 2) is None
    assert guess_children("/brokers/topics/t/partitions", 3) == ["0", "1", "2"]
    assert guess_children("/brokers/topics/t/partitions/0", 1) == ["state"]
    assert guess_children("/brokers/topics/t/partitions/0", 2) is None
    assert guess_children("/brokers/topics/t/other", 1) is None
    assert guess_children("/brokers/ids", 3) is None
    assert guess_children("/brokers/topics/t/partitions/0/state", 1) is None
