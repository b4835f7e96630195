"""The repair's Airflow shells without a cluster: the plan from snapshot + inventory artefacts
(refusals included), and the guards that act before any I/O."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_provider_kafka_zk.maintenance import SafetyFlagError
from airflow_provider_kafka_zk.operators.topic_id_repair import (
    TopicIdRepairError,
    TopicIdRepairExecuteOperator,
    TopicIdRepairPlanOperator,
    TopicIdRepairRefusedError,
)
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows
from airflow_provider_kafka_zk.testing.simulator.scenarios import topic_id_repair_cluster

CLUSTER = "repair"


@pytest.fixture
def artefacts(tmp_path):
    """(base, snapshot dir, inventory writer) for the repair cluster."""
    cluster = topic_id_repair_cluster()
    snapshot = write_snapshot_rows(tmp_path, CLUSTER, cluster_rows(cluster), datetime.now(UTC))
    manifest = json.loads((snapshot / "manifest.json").read_text())
    manifest.update(cluster_id=cluster.cluster_id, source={"hosts": ["127.0.0.1:2181"], "chroot": "/kafka"})
    (snapshot / "manifest.json").write_text(json.dumps(manifest))

    def inventory(ts: str, brokers: set[int]):
        return write_inventory_dirs(
            tmp_path,
            CLUSTER,
            ts,
            audit_dirs(cluster),
            broker_facts={b: {} for b in brokers},
            expected=set(cluster.brokers),
        )

    return tmp_path, snapshot, inventory, cluster


def _plan(base, snapshot, inventory, **kw):
    op = TopicIdRepairPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        base_path=str(base),
        snapshot_path=str(snapshot),
        inventory_path=str(inventory),
        repair_ts="t1",
        **kw,
    )
    return op.execute({})


def test_a_split_topic_with_partial_coverage_is_refused_and_nothing_planned_for_it(artefacts):
    base, snapshot, inventory, _ = artefacts
    partial = inventory("partial", {0, 1, 2})  # broker 3's disk could not be read
    with pytest.raises(TopicIdRepairRefusedError, match=r"split: refused: brokers \[3\] hold replicas"):
        _plan(base, snapshot, partial, topics=["split"], strategy="file_reset")
    plan = json.loads((base / CLUSTER / "topic-id-repair" / "t1" / "plan.json").read_text())
    assert plan["steps"] == [] and plan["topics"]["split"]["case"] == "unknown"
    assert "split: UNKNOWN" in (base / CLUSTER / "topic-id-repair" / "t1" / "summary.txt").read_text()


def test_all_found_repairs_what_it_can_and_names_the_rest(artefacts):
    base, snapshot, inventory, _ = artefacts
    result = _plan(base, snapshot, inventory("full", {0, 1, 2, 3}), topics=[], strategy="write_back")
    assert result["cases"] == {"diverged": "diverged", "precursor": "precursor", "split": "split"}
    assert list(result["refused"]) == ["split"]
    plan = json.loads((base / CLUSTER / "topic-id-repair" / "t1" / "plan.json").read_text())
    assert [s["kind"] for s in plan["steps"]] == [
        "write_topic_id",
        "write_topic_id",
        "move_controller",
        "wait_healthy",
    ]
    rollback = json.loads((base / CLUSTER / "topic-id-repair" / "t1" / "rollback.json").read_text())
    assert {e["path"] for e in rollback["znodes"]} == {
        "/brokers/topics/diverged",
        "/brokers/topics/precursor",
    }


def test_a_controller_move_is_refused_while_another_topic_is_a_precursor(artefacts):
    base, snapshot, inventory, _ = artefacts
    with pytest.raises(
        TopicIdRepairRefusedError, match=r"mint a new id for precursor topic\(s\) \['precursor'\]"
    ):
        _plan(base, snapshot, inventory("full", {0, 1, 2, 3}), topics=["diverged"])


def test_a_restart_that_would_skip_another_topic_is_refused(artefacts):
    base, snapshot, inventory, _ = artefacts
    # split alone: auto resets split to its leaders' id (broker 3's replicas differ); restarting
    # broker 3 would make it skip 'diverged' (its replicas there hold the old id)
    with pytest.raises(
        TopicIdRepairRefusedError,
        match=r"restart-replicas-not-served\] after a restart of broker 3 .*diverged-1 \(it holds",
    ):
        _plan(base, snapshot, inventory("full", {0, 1, 2, 3}), topics=["split", "precursor"])


@pytest.mark.parametrize("value", ["yes", "", None, "{{ params.dry_run }}", 1])
def test_execute_refuses_a_dry_run_that_is_not_a_boolean_before_any_io(value):
    op = TopicIdRepairExecuteOperator(task_id="x", plan_dir="/nonexistent/plan", dry_run=value)
    with pytest.raises(SafetyFlagError):
        op.execute({})


def test_execute_refuses_bad_timeouts_before_any_io():
    op = TopicIdRepairExecuteOperator(task_id="x", plan_dir="/nonexistent/plan", gate_timeout="soon")
    with pytest.raises(TopicIdRepairError, match="gate_timeout must be a positive number"):
        op.execute({})


def test_plan_refuses_an_unknown_strategy(artefacts):
    base, snapshot, inventory, _ = artefacts
    with pytest.raises(TopicIdRepairError, match="strategy must be one of"):
        _plan(base, snapshot, inventory("full", {0, 1, 2, 3}), strategy="rewrite")


def test_the_damage_the_collateral_guards_prevent():
    """What the two refusals above avoid, played by the simulator (Kafka 3.3.1's controller/brokers)."""
    cluster = topic_id_repair_cluster()
    precursor_disk = {d.topic_id for d in cluster.replica_dirs("precursor")}
    cluster.elect_controller(0)  # a controller move while 'precursor' has no id in ZooKeeper ...
    minted = cluster.topic("precursor").zk_topic_id
    assert minted is not None and minted not in precursor_disk  # ... mints a new one: KAFKA-14190 itself
    assert any(i.kind == "topic_id_mismatch" and i.topic == "precursor" for i in cluster.incidents)

    cluster = topic_id_repair_cluster()
    in_isr = {p for p, m in cluster.topic("diverged").partitions.items() if 0 in m.isr}
    cluster.restart_broker(0)  # a restart for 'split' alone ...
    after = {p for p, m in cluster.topic("diverged").partitions.items() if 0 in m.isr}
    assert in_isr and not after  # ... takes broker 0 out of every ISR of 'diverged'
