"""The drain's mutating steps behind the maintenance session, against a real ZooKeeper holding a
simulated cluster: strict safety flags, one drain per cluster (the lease), the cluster pinned by
the plan, the rollback artefact checked before the first write, and a stolen lease fencing the
next batch. Every test first shows what made the old code do damage, then that the refusal is
typed, names what matters, and leaves ZooKeeper (lease included) and the artefacts as they were."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import write_snapshot
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.drain_execution import targets_of
from airflow_provider_kafka_zk.kafka.reassignment import (
    BROKER_THROTTLE_KEYS,
    TOPIC_THROTTLE_KEYS,
    same_request,
)
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT, LeaseHolder
from airflow_provider_kafka_zk.maintenance import (
    ClusterIdentityError,
    MaintenanceLeaseHeldError,
    MaintenanceLeaseLostError,
    RollbackArtefactError,
    SafetyFlagError,
)
from airflow_provider_kafka_zk.maintenance.approval import ClusterEntryMismatchError
from airflow_provider_kafka_zk.operators.drain import (
    ClearReplicationThrottlesOperator,
    DrainExecuteOperator,
    DrainPlanOperator,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    ThrottlesStillNeededError,
    load_plan,
    plan_batches,
)
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController

pytestmark = pytest.mark.integration

CLUSTER = "safety-drain"
DRAINED = 1
DAG_ID = "kafka_zk_pre_maintenance_drain"
ZK_CONN = "safety_drain_zk"
OTHER_CONN = "safety_drain_other_zk"
UNREACHABLE_CONN = "safety_drain_unreachable_zk"
RF1_ON_DRAINED = {("single", 0), ("single", 1), ("single", 2), ("lonely", 0)}


def _spec(seed: int = 1) -> ClusterSpec:
    """Four brokers; broker 1 holds four RF=1 partitions (explicit, so every seed places them alike)."""
    return ClusterSpec(
        "safety-drain",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single",
                6,
                1,
                assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)},
                records_per_partition=5,
            ),
            TopicSpec("lonely", 1, 1, assignment={0: (1,)}, records_per_partition=5),
            TopicSpec("replicated", 2, 3, records_per_partition=5),
        ),
        seed=seed,
    )


def _set_connection(
    monkeypatch, conn_id: str, host: str, chroot: str | None, connect_timeout: int = 5
) -> None:
    extra: dict[str, Any] = {"session_timeout": 10, "connect_timeout": connect_timeout}
    if chroot is not None:
        extra["chroot"] = chroot
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kafka_zookeeper", "host": host, "extra": extra}),
    )


@pytest.fixture
def live(zookeeper_server, tmp_path, monkeypatch, opt_out_of_approval):
    """A fresh deployed cluster X and its connection; yields (deployed, client, base). The cluster file
    names X (by its connection) and opts it out of approval: these writers run behind no approval step."""
    chroot = zookeeper_server.new_chroot("/kafka_safety_drain_")
    with DeployedCluster(
        SimulatedCluster(_spec()), zookeeper_server.connect_string, chroot, tmp_path / "hosts"
    ) as deployed:
        _set_connection(monkeypatch, ZK_CONN, zookeeper_server.connect_string, chroot)
        opt_out_of_approval(CLUSTER, ZK_CONN)
        client = KazooClient(hosts=deployed.zookeeper_connect)
        client.start(timeout=15)
        try:
            yield deployed, client, tmp_path / "artefacts"
        finally:
            client.stop()
            client.close()


# ---------------------------------------------------------------------------------------------
# Helpers (small copies of tests/integration/test_drain_dag.py's)
# ---------------------------------------------------------------------------------------------


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int, int, int]]:
    """Every znode -> (data, mzxid, version, cversion): any write changes one of them."""
    out = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid, stat.version, stat.cversion)
        pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
    return out


def _files(directory: str | Path) -> dict[str, bytes | None]:
    """Every entry under ``directory`` -> its bytes (None for a directory)."""
    root = Path(directory)
    return {
        str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))
    }


def _configs(client: KazooClient, entity_type: str) -> dict[str, dict[str, str]]:
    path = f"{zk.CONFIG}/{entity_type}"
    return {
        name: zk.ConfigEntity.decode(client.get(f"{path}/{name}")[0], f"{path}/{name}").config
        for name in client.get_children(path)
    }


def _assignment(client: KazooClient) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {}
    for topic in client.get_children(zk.BROKER_TOPICS):
        decoded = zk.TopicAssignment.decode(client.get(zk.topic_path(topic))[0], zk.topic_path(topic))
        out.update({(topic, p): r for p, r in decoded.partitions.items()})
    return out


def _lease(client: KazooClient) -> LeaseHolder | None:
    if client.exists(LEASE_PATH) is None:
        return None
    return LeaseHolder.decode(client.get(LEASE_PATH)[0])


def _throttled(client: KazooClient) -> dict[str, list[str]]:
    """Entity -> throttle keys currently set (topics and brokers)."""
    out = {}
    for entity_type, keys in (("topics", TOPIC_THROTTLE_KEYS), ("brokers", BROKER_THROTTLE_KEYS)):
        for name, config in _configs(client, entity_type).items():
            found = sorted(set(config) & set(keys))
            if found:
                out[f"{entity_type}/{name}"] = found
    return out


def _snapshot(base: Path) -> str:
    with KafkaZooKeeperHook(ZK_CONN) as hook:
        walk = hook.snapshot()
        ref, _ = write_snapshot(str(base), CLUSTER, walk, source=hook.target_description())
    return ref.path


def _plan(base: Path, snapshot: str, *, max_per_batch: int = 2, ts: str | None = None) -> dict:
    operator = DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=[DRAINED],
        snapshot_path=snapshot,
        inventory_ts="none",
        max_partitions_per_batch=max_per_batch,
        drain_ts=ts or f"t{time.time_ns()}",
    )
    return operator.execute({})


def _execute_operator(plan_dir: str, *, dry_run: Any = False, conn_id: str = ZK_CONN) -> DrainExecuteOperator:
    return DrainExecuteOperator(
        task_id="execute",
        plan_dir=plan_dir,
        kafka_zookeeper_conn_id=conn_id,
        throttle_bytes_per_sec=1000,
        dry_run=dry_run,
        poll_interval=0.1,
        batch_timeout=30,
    )


def _clear_operator(
    plan_dir: str, *, dry_run: Any = False, force: Any = False, conn_id: str = ZK_CONN
) -> ClearReplicationThrottlesOperator:
    return ClearReplicationThrottlesOperator(
        task_id="clear_throttles",
        plan_dir=plan_dir,
        kafka_zookeeper_conn_id=conn_id,
        dry_run=dry_run,
        force=force,
    )


def _context(run_id: str, task_id: str) -> dict[str, Any]:
    """What RunIdentity.from_context reads of an Airflow task context."""
    ti = SimpleNamespace(dag_id=DAG_ID, task_id=task_id, run_id=run_id, try_number=1)
    return {"run_id": run_id, "ti": ti}


def _first_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def _run_controller(deployed: DeployedCluster) -> None:
    controller = SimulatedController(deployed, partitions_per_step=10)
    try:
        controller.run_until_idle()
    finally:
        controller.stop()


def _old_as_bool(value: Any) -> bool:
    """How the drain operators read dry_run/force before the safety layer (commit 0272763)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _reassign_targets(client: KazooClient) -> zk.ReassignPartitions:
    return zk.ReassignPartitions.decode(client.get(zk.REASSIGN_PARTITIONS)[0])


# ---------------------------------------------------------------------------------------------
# 1. Strict flags
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def unreachable(monkeypatch):
    """A connection to a port nobody listens on: any I/O would fail (slowly, with another error)."""
    _set_connection(monkeypatch, UNREACHABLE_CONN, "127.0.0.1:1", "/nowhere", connect_timeout=5)
    return UNREACHABLE_CONN


@pytest.mark.parametrize(
    ("value", "old_dry_run"),
    [
        ("", False),
        (None, False),
        ("dry", False),
        ("y", False),
        ("{{ params.dry_run }}", False),
        ("yes", True),  # the old parser took 'yes' as dry, but 'y' (above) as a real run
    ],
)
def test_execute_refuses_a_dry_run_flag_that_is_not_true_or_false_before_any_io(
    live, unreachable, value, old_dry_run
):
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    # the damage: the old parser read most of these as "not a dry run" and started the reassignment
    assert _old_as_bool(value) is old_dry_run
    tree, files = _tree(client), _files(plan["plan_dir"])

    operator = _execute_operator(plan["plan_dir"], dry_run=value, conn_id=unreachable)
    started = time.monotonic()
    with pytest.raises(SafetyFlagError) as refused:
        operator.execute(_context("flags", "execute"))
    took = time.monotonic() - started

    assert took < 1.0  # no connection attempt (connect_timeout is 5 s) and no plan read first
    message = str(refused.value)
    assert "dry_run" in message and repr(value) in message and "nothing was read or written" in message
    if "{{" in str(value):
        assert "unrendered template" in message
    assert _tree(client) == tree and _lease(client) is None
    assert _files(plan["plan_dir"]) == files


@pytest.mark.parametrize(
    ("flags", "name", "old"),
    [
        ({"dry_run": "yes"}, "dry_run", True),
        ({"dry_run": ""}, "dry_run", False),  # old: a real clearing
        ({"force": "maybe"}, "force", False),
        ({"force": "1"}, "force", True),  # old: forced removal while the drain still moves
    ],
)
def test_clear_refuses_flags_that_are_not_true_or_false_before_any_io(live, unreachable, flags, name, old):
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    assert _old_as_bool(flags[name]) is old
    tree, files = _tree(client), _files(plan["plan_dir"])
    kwargs = {"dry_run": False, "force": False, **flags}

    operator = _clear_operator(plan["plan_dir"], conn_id=unreachable, **kwargs)
    started = time.monotonic()
    with pytest.raises(SafetyFlagError, match=rf"^{name} must be a boolean") as refused:
        operator.execute(_context("flags", "clear_throttles"))
    assert time.monotonic() - started < 1.0
    assert repr(flags[name]) in str(refused.value)
    assert _tree(client) == tree and _lease(client) is None
    assert _files(plan["plan_dir"]) == files


@pytest.mark.parametrize("text", ["false", "FALSE", " False "])
def test_execute_takes_false_text_as_a_real_run(live, text):
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    with pytest.raises(TaskDeferred):
        _execute_operator(plan["plan_dir"], dry_run=text).execute(_context("real", "execute"))
    assert client.exists(zk.REASSIGN_PARTITIONS) is not None  # it ran for real
    holder = _lease(client)
    assert holder is not None and holder.run_id == "real"
    assert (Path(plan["plan_dir"]) / "throttles.json").exists()


@pytest.mark.parametrize("text", ["true", "TRUE", " True "])
def test_execute_takes_true_text_as_a_dry_run_that_writes_nothing(live, text):
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    tree, files = _tree(client), _files(plan["plan_dir"])
    result = _execute_operator(plan["plan_dir"], dry_run=text).execute(_context("dry", "execute"))
    assert result["dry_run"] is True and result["partitions"] == 4
    assert _tree(client) == tree and _lease(client) is None
    after = _files(plan["plan_dir"])
    # only the identity pin of the run (artefact store, not the cluster); no throttles record
    assert set(after) - set(files) <= {"identity.json"}
    assert {k: v for k, v in after.items() if k in files} == files


# ---------------------------------------------------------------------------------------------
# 2. Two drains at once
# ---------------------------------------------------------------------------------------------


def test_a_second_drain_cannot_start_or_clear_the_first_drains_throttles(live):
    deployed, client, base = live
    snapshot = _snapshot(base)
    plan_a = _plan(base, snapshot, max_per_batch=10, ts="run-a")
    plan_b = _plan(base, snapshot, max_per_batch=10, ts="run-b")
    dir_a, dir_b = plan_a["plan_dir"], plan_b["plan_dir"]
    ctx_a, ctx_b = _context("A", "execute"), _context("B", "execute")
    clear_a, clear_b = _context("A", "clear_throttles"), _context("B", "clear_throttles")

    with pytest.raises(TaskDeferred) as deferred:
        _execute_operator(dir_a).execute(ctx_a)
    throttled = _throttled(client)
    assert throttled["topics/single"] and throttled["topics/lonely"]
    assert {f"brokers/{b}" for b in range(4)} & set(throttled)
    holder = _lease(client)
    assert holder is not None and (holder.dag_id, holder.run_id) == (DAG_ID, "A")
    record_a = json.loads((Path(dir_a) / "throttles.json").read_text())

    # the damage: both plans are the same request, so the old execute of run B took run A's
    # in-flight znode for its own retry, went on, recorded run A's values as its own and its
    # clearing step removed them while A's partitions still moved
    plan_b_doc = load_plan(dir_b)
    assert same_request(_reassign_targets(client), targets_of(plan_batches(plan_b_doc)[0]))

    tree, files_b = _tree(client), _files(dir_b)
    with pytest.raises(MaintenanceLeaseHeldError) as held:
        _execute_operator(dir_b).execute(ctx_b)
    message = str(held.value)
    assert f"DAG '{DAG_ID}' run 'A'" in message and CLUSTER in message
    assert LEASE_PATH in message  # where to look if run A is dead
    assert _tree(client) == tree
    after_b = _files(dir_b)
    assert set(after_b) - set(files_b) <= {"identity.json"}  # no throttles.json: run B set nothing
    assert {k: v for k, v in after_b.items() if k in files_b} == files_b

    # run B's clearing step: nothing of its own to clear, succeeds, run A's throttles stay
    cleared_b = _clear_operator(dir_b).execute(clear_b)
    assert cleared_b["cleared"] == {} and cleared_b["changed_by_others"] == {}
    assert _tree(client) == tree
    assert _throttled(client) == throttled
    assert not (Path(dir_b) / "throttles.json").exists()

    # run A's clearing step while its partitions move: refuses, with the hand-made commands
    with pytest.raises(ThrottlesStillNeededError) as still:
        _clear_operator(dir_a).execute(clear_a)
    message = str(still.value)
    assert "still moving" in message and "lease kept" in message
    for key, values in record_a["entities"].items():
        entity_type, name = key.split("/", 1)
        assert (
            f"--alter --entity-type {entity_type} --entity-name {name} --delete-config {','.join(sorted(values))}"
            in message
        ), key
    assert message.count("kafka-configs.sh") == len(record_a["entities"])
    assert _tree(client) == tree
    assert _lease(client).run_id == "A"

    # the controller finishes run A's reassignment; run A completes and clears; the lease goes
    _run_controller(deployed)
    event = _first_event(deferred.value.trigger)
    assert event["status"] == "complete", event
    assert _execute_operator(dir_a).execute_complete(ctx_a, event)["partitions"] == 4
    cleared_a = _clear_operator(dir_a).execute(clear_a)
    assert set(cleared_a["cleared"]) == set(record_a["entities"])
    assert _throttled(client) == {}
    assert client.exists(LEASE_ROOT) is None
    assert not [tp for tp, r in _assignment(client).items() if tp in RF1_ON_DRAINED and DRAINED in r]


# ---------------------------------------------------------------------------------------------
# 3. Wrong cluster / wrong chroot
# ---------------------------------------------------------------------------------------------


def test_execute_refuses_another_cluster_behind_the_connection(live, zookeeper_server, tmp_path, monkeypatch):
    deployed_x, client_x, base = live
    plan = _plan(base, _snapshot(base))
    chroot_y = zookeeper_server.new_chroot("/kafka_safety_drain_other_")
    with DeployedCluster(
        SimulatedCluster(_spec(seed=2)), zookeeper_server.connect_string, chroot_y, tmp_path / "hosts-y"
    ) as deployed_y:
        _set_connection(monkeypatch, OTHER_CONN, zookeeper_server.connect_string, chroot_y)
        client_y = KazooClient(hosts=deployed_y.zookeeper_connect)
        client_y.start(timeout=15)
        try:
            id_x, id_y = deployed_x.cluster.cluster_id, deployed_y.cluster.cluster_id
            assert id_x != id_y
            assert client_y.get(zk.CLUSTER_ID)[0] != client_x.get(zk.CLUSTER_ID)[0]
            # the damage: cluster Y shows every partition where the plan expects it, so the old
            # execute (no identity check) would have drained Y's broker 1 with X's plan
            y_assignment = _assignment(client_y)
            for batch in load_plan(plan["plan_dir"])["batches"]:
                for move in batch:
                    assert list(y_assignment[(move["topic"], move["partition"])]) == move["current"]
            tree_x, tree_y, files = _tree(client_x), _tree(client_y), _files(plan["plan_dir"])

            for dry_run in (False, True):
                with pytest.raises(ClusterIdentityError) as refused:
                    _execute_operator(plan["plan_dir"], dry_run=dry_run, conn_id=OTHER_CONN).execute(
                        _context("wrong-cluster", "execute")
                    )
                message = str(refused.value)
                assert deployed_x.chroot in message and chroot_y in message  # the chroots differ
                assert "Refusing to change anything" in message
                if dry_run:  # the plan's pinned identity, read from Y
                    assert id_x in message and id_y in message, message
                else:  # a real run: the cluster file already says Y is not the plan's entry, before any I/O
                    assert isinstance(refused.value, ClusterEntryMismatchError), message
                    assert f"cluster '{CLUSTER}' names the entry {CLUSTER}" in message, message

            assert _tree(client_x) == tree_x and _tree(client_y) == tree_y
            assert _lease(client_x) is None and _lease(client_y) is None
            assert _files(plan["plan_dir"]) == files  # not even identity.json
        finally:
            client_y.stop()
            client_y.close()


@pytest.mark.filterwarnings("ignore:No chroot path exists:UserWarning")
@pytest.mark.parametrize("kind", ["missing chroot", "empty chroot"])
def test_execute_refuses_a_chroot_without_a_kafka_cluster(live, zookeeper_server, monkeypatch, kind):
    _, client_x, base = live
    plan = _plan(base, _snapshot(base))
    if kind == "missing chroot":
        chroot = f"/kafka_safety_drain_missing_{uuid.uuid4().hex}"
    else:
        chroot = zookeeper_server.new_chroot("/kafka_safety_drain_empty_")
    _set_connection(monkeypatch, OTHER_CONN, zookeeper_server.connect_string, chroot)
    root = KazooClient(hosts=zookeeper_server.connect_string)
    root.start(timeout=15)
    try:
        # the damage: the chroot is not the plan's cluster at all (a typo in the connection)
        assert (root.exists(chroot) is None) == (kind == "missing chroot")
        top, tree_x, files = sorted(root.get_children("/")), _tree(client_x), _files(plan["plan_dir"])
        chroot_before = root.exists(chroot)

        # a real run: the cluster file already says this chroot is not the plan's cluster (no I/O at
        # all); the dry run looks, and finds no Kafka cluster there
        with pytest.raises(ClusterEntryMismatchError, match=f"names the entry {CLUSTER}") as refused:
            _execute_operator(plan["plan_dir"], conn_id=OTHER_CONN).execute(_context("typo", "execute"))
        assert f"chroot {chroot}" in str(refused.value)
        with pytest.raises(ClusterIdentityError, match="holds no Kafka cluster") as refused:
            _execute_operator(plan["plan_dir"], conn_id=OTHER_CONN, dry_run=True).execute(
                _context("typo", "execute")
            )
        assert chroot in str(refused.value) and zk.BROKER_IDS in str(refused.value)

        assert sorted(root.get_children("/")) == top
        after = root.exists(chroot)
        assert (after is None) == (chroot_before is None)
        if after is not None:
            assert (after.version, after.cversion, after.numChildren) == (
                chroot_before.version,
                chroot_before.cversion,
                0,
            )
        assert _tree(client_x) == tree_x and _lease(client_x) is None
        assert _files(plan["plan_dir"]) == files
    finally:
        root.stop()
        root.close()


# ---------------------------------------------------------------------------------------------
# 4. Rollback first
# ---------------------------------------------------------------------------------------------


def _break_rollback(plan_dir: Path, how: str) -> None:
    rollback = plan_dir / "rollback.json"
    if how == "deleted":
        rollback.unlink()
    elif how == "corrupt":
        rollback.write_bytes(b'{"version": 1, "partitions": [{"topic": "single", "parti')
    elif how == "one partition missing":
        document = json.loads(rollback.read_text())
        document["partitions"] = [
            e for e in document["partitions"] if (e["topic"], e["partition"]) != ("single", 0)
        ]
        rollback.write_text(json.dumps(document))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("deleted", r"rollback\.json is missing: refusing to change anything"),
        ("corrupt", r"rollback\.json is unreadable \(.*\): refusing"),
        ("one partition missing", r"rollback\.json does not restore 1 planned move\(s\) \(single-0\)"),
    ],
)
def test_execute_refuses_before_the_first_write_without_a_usable_rollback(live, how, expected):
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    plan_dir = Path(plan["plan_dir"])
    _break_rollback(plan_dir, how)
    # the damage: the plan itself is fine, so the old execute went ahead without a way back
    assert sum(len(b) for b in load_plan(str(plan_dir))["batches"]) == 4
    tree, files = _tree(client), _files(plan_dir)

    with pytest.raises(RollbackArtefactError, match=expected):
        _execute_operator(str(plan_dir)).execute(_context("rollback", "execute"))

    assert _tree(client) == tree and _lease(client) is None
    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    after = _files(plan_dir)
    assert set(after) - set(files) <= {"identity.json"}  # the run's pin; no throttles.json
    assert {k: v for k, v in after.items() if k in files} == files


def _execute_with_identity_record_in_the_way(live) -> tuple[BaseException, bool]:
    """Execute (dry_run False) where ``identity.json`` cannot be written (a directory is in its
    place); returns the error and whether ZooKeeper, the lease and the plan folder stayed as they were."""
    _, client, base = live
    plan = _plan(base, _snapshot(base))
    plan_dir = Path(plan["plan_dir"])
    (plan_dir / "identity.json").mkdir()  # the store is writable, this one artefact is not
    # the damage: rollback.json and the plan are fine, nothing else would have stopped the run
    assert (plan_dir / "rollback.json").exists() and load_plan(str(plan_dir))["batches"]
    tree, files = _tree(client), _files(plan_dir)
    with pytest.raises(Exception) as raised:  # the class: asserted by the callers
        _execute_operator(str(plan_dir)).execute(_context("identity", "execute"))
    unchanged = (
        _tree(client) == tree
        and _lease(client) is None
        and client.exists(zk.REASSIGN_PARTITIONS) is None
        and _files(plan_dir) == files
    )
    return raised.value, unchanged


def test_execute_writes_nothing_when_the_run_cannot_write_its_identity_record(live):
    _, unchanged = _execute_with_identity_record_in_the_way(live)
    assert unchanged


def test_execute_refuses_when_the_run_cannot_write_its_identity_record(live):
    error, unchanged = _execute_with_identity_record_in_the_way(live)
    assert unchanged
    assert isinstance(error, RollbackArtefactError | ClusterIdentityError), repr(error)
    assert "identity.json" in str(error)


# ---------------------------------------------------------------------------------------------
# 5. The lease fences writes
# ---------------------------------------------------------------------------------------------


def _stolen_lease(client: KazooClient, run_id: str = "Z") -> LeaseHolder:
    """Another run's lease record written over ours (as a takeover would leave it)."""
    now = int(time.time() * 1000)
    thief = LeaseHolder(
        dag_id="other_dag",
        run_id=run_id,
        task_id="execute",
        host="elsewhere:1",
        since_ms=now,
        expires_ms=now + 3_600_000,
        cluster_id=json.loads(client.get(zk.CLUSTER_ID)[0])["id"],
    )
    client.set(LEASE_PATH, thief.encode())
    return thief


def test_a_taken_over_lease_stops_the_next_batch(live):
    deployed, client, base = live
    plan = _plan(base, _snapshot(base), max_per_batch=2)
    plan_dir = plan["plan_dir"]
    ctx_a = _context("A", "execute")
    batches = load_plan(plan_dir)["batches"]
    assert len(batches) == 2

    with pytest.raises(TaskDeferred) as deferred:
        _execute_operator(plan_dir).execute(ctx_a)
    assert _lease(client).run_id == "A"
    _run_controller(deployed)  # batch 1 done
    event = _first_event(deferred.value.trigger)
    assert event["status"] == "complete" and event["echo"] == {"batch": 0}

    _stolen_lease(client)
    # the damage: batch 2 is ready to start (nothing in flight, its partitions where planned), so
    # without the lease the old execute_complete created a second reassignment under the new holder
    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    now = _assignment(client)
    assert all(list(now[(m["topic"], m["partition"])]) == m["current"] for m in batches[1])
    tree, files = _tree(client), _files(plan_dir)

    with pytest.raises((MaintenanceLeaseLostError, MaintenanceLeaseHeldError)) as refused:
        _execute_operator(plan_dir).execute_complete(ctx_a, event)
    assert "run 'Z'" in str(refused.value) and "other_dag" in str(refused.value)

    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    assert _tree(client) == tree  # no throttle for batch 2, the thief's lease untouched
    assert _lease(client).run_id == "Z"
    assert _files(plan_dir) == files


def _takeover_in_the_middle_of_a_batch(live, monkeypatch) -> tuple[BaseException, KazooClient, str]:
    """Batch 1 done; batch 2 sets its throttles under run A's lease, then (right before
    /admin/reassign_partitions is created) another run takes the lease over."""
    deployed, client, base = live
    plan = _plan(base, _snapshot(base), max_per_batch=2)
    plan_dir = plan["plan_dir"]
    ctx_a = _context("A", "execute")
    with pytest.raises(TaskDeferred) as deferred:
        _execute_operator(plan_dir).execute(ctx_a)
    _run_controller(deployed)
    event = _first_event(deferred.value.trigger)
    assert event["status"] == "complete"
    assert client.exists(zk.REASSIGN_PARTITIONS) is None

    original = KafkaZooKeeperHook.create_if_absent

    def create_after_takeover(self, path, data, **kwargs):
        if path == zk.REASSIGN_PARTITIONS:
            _stolen_lease(client)
        return original(self, path, data, **kwargs)

    monkeypatch.setattr(KafkaZooKeeperHook, "create_if_absent", create_after_takeover)
    with pytest.raises(Exception) as raised:  # the class: asserted by the callers
        _execute_operator(plan_dir).execute_complete(ctx_a, event)
    return raised.value, client, plan_dir


def test_a_lease_taken_over_in_the_middle_of_a_batch_fences_the_create(live, monkeypatch):
    _, client, plan_dir = _takeover_in_the_middle_of_a_batch(live, monkeypatch)
    assert client.exists(zk.REASSIGN_PARTITIONS) is None  # the fenced create applied nothing
    assert _lease(client).run_id == "Z"  # the new holder's record untouched
    record = json.loads((Path(plan_dir) / "throttles.json").read_text())
    throttled = _throttled(client)
    assert throttled and set(throttled) <= set(record["entities"])  # whatever is set, clear can find


def test_a_lease_taken_over_in_the_middle_of_a_batch_fails_as_a_refusal(live, monkeypatch):
    error, client, _ = _takeover_in_the_middle_of_a_batch(live, monkeypatch)
    assert client.exists(zk.REASSIGN_PARTITIONS) is None
    assert isinstance(error, MaintenanceLeaseLostError | MaintenanceLeaseHeldError), repr(error)
    assert "kafka-configs.sh" in str(error)  # batch 2's throttles are set: say how to remove them
