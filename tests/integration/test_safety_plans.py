"""Drain plans that must not lie, and plan folders that must not crash: a topic znode Kafka cannot
read is listed (and stops the plan), rack awareness is reported as applied, and every malformed
file of a drain or inventory folder gives a typed error naming the file. Real ZooKeeper, a
simulated cluster deployed into it, the snapshot and plan operators as a DAG runs them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.operators.drain import DrainPlanOperator, DrainVerifyOperator
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    DrainFileMissingError,
    DrainInventoryError,
    DrainLocation,
    DrainPlanError,
    IncompletePlanError,
    inventory_dirs,
    inventory_sizes,
    load_plan,
    load_throttle_record,
)
from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "plans-test"
DRAINED = 1
ZK_CONN = "safety_plans_zk"
BAD_TOPIC = "a b"


def _spec(racks: dict[int, str | None]) -> ClusterSpec:
    return ClusterSpec(
        "plans",
        brokers=tuple(BrokerSpec(b, rack=racks[b], host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single", 4, 1, assignment={0: (1,), 1: (1,), 2: (2,), 3: (3,)}, records_per_partition=5
            ),
            TopicSpec("replicated", 2, 3, records_per_partition=5),
        ),
    )


def _deploy(zookeeper_server, chroot: str, root: Path, monkeypatch, racks: dict[int, str | None]):
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{ZK_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_zookeeper",
                "host": zookeeper_server.connect_string,
                "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
            }
        ),
    )
    return DeployedCluster(SimulatedCluster(_spec(racks)), zookeeper_server.connect_string, chroot, root)


@pytest.fixture
def deployed(zookeeper_server, zk_chroot, tmp_path, monkeypatch):
    racks = {b: f"r{b % 2}" for b in range(4)}
    with _deploy(zookeeper_server, zk_chroot, tmp_path / "hosts", monkeypatch, racks) as cluster:
        yield cluster


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int, int, int, int]]:
    """Every znode with data, mzxid, version, cversion and pzxid: any write changes one of them."""
    out = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.mzxid, stat.version, stat.cversion, stat.pzxid)
        pending.extend(("" if path == "/" else path) + "/" + c for c in client.get_children(path))
    return out


def _snapshot(base: Path) -> str:
    summary = ZooKeeperSnapshotOperator(
        task_id="snapshot", cluster=CLUSTER, kafka_zookeeper_conn_id=ZK_CONN, base_path=str(base)
    ).execute(context={})
    return summary["path"]


def _plan_operator(base: Path, snapshot: str, ts: str, **kwargs) -> DrainPlanOperator:
    kwargs.setdefault("inventory_ts", "none")
    return DrainPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        brokers=[DRAINED],
        snapshot_path=snapshot,
        drain_ts=ts,
        **kwargs,
    )


def _invalid_topic(client: KazooClient, data: bytes) -> None:
    """``/brokers/topics/a b`` written straight into ZooKeeper (no Kafka tool would accept it)."""
    client.create(f"{zk.BROKER_TOPICS}/{BAD_TOPIC}", data)
    state = {"controller_epoch": 1, "leader": DRAINED, "version": 1, "leader_epoch": 0, "isr": [DRAINED]}
    client.create(
        f"{zk.BROKER_TOPICS}/{BAD_TOPIC}/partitions/0/state", json.dumps(state).encode(), makepath=True
    )


# ---------------------------------------------------------------------------------------------
# Topic znodes the model cannot take
# ---------------------------------------------------------------------------------------------


def test_an_invalid_topic_name_on_the_drained_broker_stops_the_plan_and_zookeeper_is_untouched(
    deployed, kazoo_client, tmp_path
):
    base = tmp_path / "artefacts"
    _invalid_topic(kazoo_client, json.dumps({"version": 1, "partitions": {"0": [DRAINED]}}).encode())
    before = _tree(kazoo_client)
    snapshot = _snapshot(base)
    with pytest.raises(IncompletePlanError, match=r"'a b'") as refused:
        _plan_operator(base, snapshot, "t1").execute({})
    assert _tree(kazoo_client) == before  # neither the snapshot nor the plan wrote ZooKeeper

    plan_dir = base / CLUSTER / "drain" / "t1"
    plan = json.loads((plan_dir / "plan.json").read_text())
    assert plan["complete"] is False
    assert plan["unplanned"] == [
        {
            "topic": "'a b'",
            "reason": "invalid_topic_name",
            "message": plan["unplanned"][0]["message"],
            "touches_drained": True,
            "partitions_in_scope": [0],
            "excluded": False,
            "blocks_completion": True,
        }
    ]
    assert "a b" in plan["unplanned"][0]["message"]
    # the valid RF=1 partitions on the drained broker are still planned
    assert sorted((m["topic"], m["partition"]) for b in plan["batches"] for m in b) == [
        ("single", 0),
        ("single", 1),
    ]
    summary = (plan_dir / "summary.txt").read_text()
    assert "NOT PLANNED" in summary and "'a b': invalid_topic_name" in summary
    assert "summary.txt" in str(refused.value)
    assert load_plan(str(plan_dir)) == plan  # what the plan step writes, the loader accepts

    # allow_partial drains the rest, still listing the topic
    partial = _plan_operator(base, snapshot, "t2", allow_partial=True).execute({})
    assert (partial["complete"], partial["unplanned"], partial["moves"]) == (False, 1, 2)
    assert _tree(kazoo_client) == before


def test_an_undecodable_topic_znode_stops_the_plan_as_nobody_can_tell_where_its_replicas_are(
    deployed, kazoo_client, tmp_path
):
    base = tmp_path / "artefacts"
    kazoo_client.create(f"{zk.BROKER_TOPICS}/garbled", b'{"version": 1, "partitions": {"0": [1]')
    before = _tree(kazoo_client)
    snapshot = _snapshot(base)
    with pytest.raises(IncompletePlanError, match="'garbled'"):
        _plan_operator(base, snapshot, "t1").execute({})
    assert _tree(kazoo_client) == before
    plan = json.loads((base / CLUSTER / "drain" / "t1" / "plan.json").read_text())
    (entry,) = plan["unplanned"]
    assert (entry["topic"], entry["reason"], entry["touches_drained"], entry["partitions_in_scope"]) == (
        "'garbled'",
        "undecodable_topic_znode",
        None,
        None,
    )
    assert entry["message"] and not plan["complete"]


def test_an_invalid_topic_elsewhere_is_listed_without_blocking(deployed, kazoo_client, tmp_path):
    base = tmp_path / "artefacts"
    _invalid_topic(kazoo_client, json.dumps({"version": 1, "partitions": {"0": [3]}}).encode())
    result = _plan_operator(base, _snapshot(base), "t1").execute({})
    assert result["complete"] and result["unplanned"] == 1
    plan = json.loads(Path(result["plan"]).read_text())
    assert plan["unplanned"][0]["touches_drained"] is False and not plan["unplanned"][0]["blocks_completion"]


# ---------------------------------------------------------------------------------------------
# Rack awareness as applied
# ---------------------------------------------------------------------------------------------


def test_plan_reports_rack_awareness_as_applied(deployed, tmp_path):
    base = tmp_path / "artefacts"
    result = _plan_operator(base, _snapshot(base), "t1").execute({})
    plan = json.loads(Path(result["plan"]).read_text())
    assert plan["request"]["rack_aware"] is True and plan["rack_aware_effective"] is True
    assert "rack-aware placement: yes" in Path(result["summary"]).read_text()


def test_a_destination_without_rack_switches_rack_awareness_off_and_the_plan_says_so(
    zookeeper_server, zk_chroot, tmp_path, monkeypatch
):
    racks = {0: "r0", 1: "r1", 2: None, 3: None}
    base = tmp_path / "artefacts"
    with _deploy(zookeeper_server, zk_chroot, tmp_path / "hosts", monkeypatch, racks):
        result = _plan_operator(base, _snapshot(base), "t1").execute({})
    plan = json.loads(Path(result["plan"]).read_text())
    assert plan["request"]["rack_aware"] is True  # what was asked
    assert plan["rack_aware_effective"] is False and result["rack_aware"] is False
    assert plan["rack_aware_reason"] == "brokers 2, 3 have no rack: placement is not rack-aware"
    assert "rack-aware placement: NO (requested, but off): brokers 2, 3 have no rack" in (
        Path(result["summary"]).read_text()
    )


# ---------------------------------------------------------------------------------------------
# Malformed plan, throttles and inventory folders
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def good_plan(deployed, tmp_path) -> Path:
    base = tmp_path / "artefacts"
    result = _plan_operator(base, _snapshot(base), "good").execute({})
    return Path(result["plan_dir"])


def _copy(good: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / "broken" / name
    shutil.copytree(good, target)
    return target


def _edit(plan: dict, change) -> dict:
    change(plan)
    return plan


PLAN_VARIANTS = {
    "missing": None,
    "not_json": "{not json",
    "not_utf8": b"\xff\xfe{}",
    "a_list": "[]",
    "wrong_format": lambda p: p.update(format="something-else"),
    "wrong_version": lambda p: p.update(version=7),
    "no_batches": lambda p: p.pop("batches"),
    "batches_not_a_list": lambda p: p.update(batches={"0": []}),
    "empty_batch": lambda p: p["batches"].append([]),
    "entry_without_target": lambda p: p["batches"][0][0].pop("target"),
    "target_of_strings": lambda p: p["batches"][0][0].update(target=["2"]),
    "target_repeats_a_broker": lambda p: p["batches"][0][0].update(target=[2, 2], current=[1, 3]),
    "partition_as_text": lambda p: p["batches"][0][0].update(partition="0"),
    "invalid_topic_name": lambda p: p["batches"][0][0].update(topic="a b"),
    "path_in_topic_name": lambda p: p["batches"][0][0].update(topic="../x"),
    "partition_twice": lambda p: p["batches"].append([dict(p["batches"][0][0])]),
    "no_size": lambda p: p["batches"][0][0].pop("size_bytes"),
    "no_request": lambda p: p.pop("request"),
    "request_brokers_text": lambda p: p["request"].update(brokers="1"),
    "bad_scope": lambda p: p["request"].update(scope="some"),
    "no_unmovable": lambda p: p.pop("unmovable"),
    "unmovable_entry_without_reason": lambda p: p["unmovable"].append(
        {"topic": "t", "partition": 0, "replicas": [1]}
    ),
}


@pytest.mark.parametrize("variant", sorted(PLAN_VARIANTS))
def test_a_malformed_plan_gives_a_typed_error_naming_the_file(good_plan, tmp_path, variant):
    plan_dir = _copy(good_plan, tmp_path, variant)
    path = plan_dir / "plan.json"
    change = PLAN_VARIANTS[variant]
    if change is None:
        path.unlink()
    elif isinstance(change, (str, bytes)):
        path.write_bytes(change.encode() if isinstance(change, str) else change)
    else:
        path.write_text(json.dumps(_edit(json.loads(path.read_text()), change)))
    with pytest.raises(DrainPlanError) as raised:
        load_plan(str(plan_dir))
    assert str(path) in str(raised.value)
    # the steps that read a plan refuse the same way, before touching ZooKeeper
    verify = DrainVerifyOperator(task_id="verify", plan_dir=str(plan_dir), kafka_zookeeper_conn_id=ZK_CONN)
    with pytest.raises(DrainPlanError, match=re.escape(str(path))):
        verify.execute({})


def test_a_missing_file_stays_a_file_not_found_error_for_callers_that_expect_one(good_plan, tmp_path):
    plan_dir = _copy(good_plan, tmp_path, "rollback")
    (plan_dir / "rollback.json").unlink()
    with pytest.raises(FileNotFoundError) as raised:
        DrainLocation(str(plan_dir)).read_json("rollback.json")
    assert isinstance(raised.value, DrainFileMissingError) and "rollback.json is missing" in str(raised.value)


THROTTLE_VARIANTS = {
    "not_json": "{",
    "a_list": "[]",
    "no_entities": json.dumps({"previous": {}}),
    "entities_a_list": json.dumps({"entities": [], "previous": {}}),
    "unknown_entity_type": json.dumps({"entities": {"users/alice": {"k": "v"}}, "previous": {}}),
    "invalid_topic": json.dumps({"entities": {"topics/a b": {"k": "v"}}, "previous": {}}),
    "broker_not_a_number": json.dumps({"entities": {"brokers/x": {"k": "v"}}, "previous": {}}),
    "value_not_text": json.dumps({"entities": {"brokers/1": {"k": 5}}, "previous": {}}),
    "config_not_a_map": json.dumps({"entities": {"brokers/1": "k=v"}, "previous": {}}),
    "previous_malformed": json.dumps({"entities": {}, "previous": {"topics/t": ["k"]}}),
}


@pytest.mark.parametrize("variant", sorted(THROTTLE_VARIANTS))
def test_a_malformed_throttles_record_gives_a_typed_error_naming_the_file(good_plan, tmp_path, variant):
    plan_dir = _copy(good_plan, tmp_path, variant)
    (plan_dir / "throttles.json").write_text(THROTTLE_VARIANTS[variant])
    with pytest.raises(DrainPlanError) as raised:
        load_throttle_record(DrainLocation(str(plan_dir)))
    assert str(plan_dir / "throttles.json") in str(raised.value)


def test_throttles_record_as_the_execute_step_writes_it_loads(good_plan, tmp_path):
    plan_dir = _copy(good_plan, tmp_path, "throttles")
    (plan_dir / "throttles.json").write_text(
        json.dumps({"entities": {"topics/single": {"leader.replication.throttled.replicas": "0:1"}}})
    )
    record = load_throttle_record(DrainLocation(str(plan_dir)))
    assert record["previous"] == {} and "topics/single" in record["entities"]
    (plan_dir / "throttles.json").unlink()
    with pytest.raises(DrainPlanError, match=r"throttles\.json is missing"):
        load_throttle_record(DrainLocation(str(plan_dir)))


@pytest.mark.parametrize(
    ("name", "payload"),
    [("broker=x.parquet", b"PAR1"), ("broker=1.parquet", b"this is not parquet")],
)
def test_a_malformed_inventory_file_gives_a_typed_error_naming_it(deployed, tmp_path, name, payload):
    base = tmp_path / "artefacts"
    folder = base / CLUSTER / "inventory" / "inv1"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(payload)
    with pytest.raises(DrainInventoryError) as sizes:
        inventory_sizes(str(base), CLUSTER, "inv1")
    assert str(folder / name) in str(sizes.value)
    with pytest.raises(DrainInventoryError, match=re.escape(name)):
        inventory_dirs(str(folder))
    # the plan step refuses with the same error, naming the file
    with pytest.raises(DrainInventoryError, match=re.escape(name)):
        _plan_operator(base, _snapshot(base), "t1", inventory_ts="inv1").execute({})
