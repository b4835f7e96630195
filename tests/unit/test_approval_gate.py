"""Where a real run's approved plan is checked (issue 25 on the step executor): the maintenance
session, when it opens, before anything of the cluster is read -- for every mutation (drain and
move-back, election, topicId repair, deletion cleanup) -- and the executor again right before the
first write.

The cluster's ZooKeeper connection here names no Airflow connection at all: any look at the cluster
fails with another error than the approval's, so a refusal that is ``PlanNotApprovedError`` /
``PlanChangedSinceApprovalError`` happened before any I/O on the cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from airflow_provider_kafka_zk.kafka.approval import plan_digest
from airflow_provider_kafka_zk.kafka.leadership import ElectionScope
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import Step
from airflow_provider_kafka_zk.maintenance.approval import (
    ApprovedPlan,
    PlanChangedSinceApprovalError,
    PlanNotApprovedError,
)
from airflow_provider_kafka_zk.maintenance.executor import ProgressLog, StepContext, StepExecutor
from airflow_provider_kafka_zk.maintenance.session import RunIdentity

NO_CLUSTER = "kafka_zk_approval_gate_no_such_connection"
PLAN = {"format": "kafka-zk-drain-plan", "cluster": "c", "batches": []}
ROLLBACK = b'{"version":1,"partitions":[]}'
SETTINGS = {"execute": {"throttle_bytes_per_sec": 1000, "kafka_zookeeper_conn_id": NO_CLUSTER}}
RUN = RunIdentity("dag", "run", "execute", 1, "host")
IDENTITY = ClusterIdentity("cluster-id", ("127.0.0.1:2181",), "/kafka")


def _plan_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "plan"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps(PLAN))
    (folder / "rollback.json").write_bytes(ROLLBACK)
    return folder


def _approval(folder: Path, decision: str = "approved", task_id: str = "execute") -> ApprovedPlan:
    digest = plan_digest(
        {n: (folder / n).read_bytes() for n in ("plan.json", "rollback.json")},
        {"execute": SETTINGS["execute"]},
    )
    record = {
        "decision": decision,
        "dag_id": RUN.dag_id,
        "run_id": RUN.run_id,
        "task_id": "approve",
        "cluster": "c",
        "plan_dir": str(folder),
        "plan": digest.to_dict(),
        "decided_at": "2026-01-01T00:00:00+00:00",
        "decided_by": {"id": "alice", "name": "alice"},
    }
    settings = {task_id: SETTINGS["execute"]} if task_id == "execute" else {}
    return ApprovedPlan(task_id, "approve", record, str(folder), settings)


def test_the_check_passes_the_approved_plan_and_names_what_changed(tmp_path):
    folder = _plan_dir(tmp_path)
    assert _approval(folder).verify()["decision"] == "approved"
    assert _approval(folder, "not_required").verify()["decision"] == "not_required"
    for decision in ("rejected", "timed_out", "pending"):
        with pytest.raises(PlanNotApprovedError, match=f"not approved \\({decision}"):
            _approval(folder, decision).verify()
    with pytest.raises(PlanNotApprovedError, match="recorded no decision"):
        ApprovedPlan("execute", "approve", None, str(folder)).verify()
    approved = _approval(folder)
    (folder / "plan.json").write_text(json.dumps({**PLAN, "batches": [[{"topic": "t", "partition": 0}]]}))
    with pytest.raises(PlanChangedSinceApprovalError, match=r"plan\.json changed"):
        approved.verify()


def test_another_setting_than_the_approved_one_is_refused(tmp_path):
    folder = _plan_dir(tmp_path)
    approved = _approval(folder)
    faster = ApprovedPlan(
        "execute",
        "approve",
        approved.record,
        str(folder),
        {"execute": {**SETTINGS["execute"], "throttle_bytes_per_sec": 10**9}},
    )
    with pytest.raises(PlanChangedSinceApprovalError, match="throttle_bytes_per_sec"):
        faster.verify()


# ------------------------------------------------------------------ every mutation, before any I/O


def _drain(folder: Path, approval: ApprovedPlan | None, dry_run: bool = False) -> None:
    from airflow_provider_kafka_zk.maintenance.drain import execute_drain

    execute_drain(
        str(folder),
        PLAN,
        [],
        kafka_zookeeper_conn_id=NO_CLUSTER,
        rate=1000,
        run=RUN,
        dry_run=dry_run,
        expected=IDENTITY,
        approval=approval,
    )


def _election(folder: Path, approval: ApprovedPlan | None) -> None:
    from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation
    from airflow_provider_kafka_zk.maintenance.leader_election import run_election

    run_election(
        DrainLocation(str(folder)),
        cluster="c",
        kafka_zookeeper_conn_id=NO_CLUSTER,
        scope=ElectionScope(brokers=frozenset({1})),
        max_partitions=10,
        max_bytes=10**6,
        poll_interval=1.0,
        timeout=10.0,
        run=RUN,
        dry_run=False,
        expected=IDENTITY,
        approval=approval,
    )


def _repair(folder: Path, approval: ApprovedPlan | None) -> None:
    from airflow_provider_kafka_zk.maintenance.topic_id_repair import RepairSettings, execute_repair_plan

    execute_repair_plan(
        str(folder),
        {"cluster": "c"},
        [],
        RepairSettings(kafka_zookeeper_conn_id=NO_CLUSTER),
        run=RUN,
        dry_run=False,
        expected=IDENTITY,
        approval=approval,
    )


def _cleanup(folder: Path, approval: ApprovedPlan | None) -> None:
    from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
    from airflow_provider_kafka_zk.maintenance.deletion_cleanup import run_cleanup

    left = SimpleNamespace(topic="gone", verdict=Verdict.INCOMPLETE, causes=(Cause.CONFIG_ZNODE_LEFT,))
    check = SimpleNamespace(verdicts=[left], leftovers=lambda v: [], live_brokers=(), disks={})
    run_cleanup(
        check,  # type: ignore[arg-type]
        cluster="c",
        kafka_zookeeper_conn_id=NO_CLUSTER,
        host_hook=None,  # type: ignore[arg-type]
        artefact_dir=str(folder),
        ts="20260101T000000",
        run=RUN,
        dry_run=False,
        quarantine_dir=None,
        allow_running_broker_orphans=False,
        approval=approval,
    )


MUTATIONS = {"drain and move-back": _drain, "election": _election, "repair": _repair, "cleanup": _cleanup}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_every_mutation_refuses_a_plan_not_approved_before_it_looks_at_the_cluster(tmp_path, mutation):
    folder = _plan_dir(tmp_path)
    with pytest.raises(PlanNotApprovedError, match="rejected by alice"):
        MUTATIONS[mutation](folder, _approval(folder, "rejected"))
    assert not (folder / "identity.json").exists()  # the session pinned nothing


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_every_mutation_refuses_a_plan_changed_since_its_approval_before_it_looks_at_the_cluster(
    tmp_path, mutation
):
    folder = _plan_dir(tmp_path)
    approved = _approval(folder)
    (folder / "rollback.json").write_bytes(b'{"version":1,"partitions":[{"topic":"t"}]}')
    with pytest.raises(PlanChangedSinceApprovalError, match=r"rollback\.json changed"):
        MUTATIONS[mutation](folder, approved)


def test_without_the_check_the_same_call_goes_on_to_the_cluster(tmp_path):
    """The control: an approved, unchanged plan (or a dry run, which needs none) passes the check and
    the mutation goes on to read the cluster -- here a connection that does not exist."""
    folder = _plan_dir(tmp_path)
    for approval, dry_run in ((_approval(folder), False), (_approval(folder, "rejected"), True)):
        with pytest.raises(Exception) as caught:
            _drain(folder, approval, dry_run=dry_run)
        assert not isinstance(caught.value, PlanNotApprovedError | PlanChangedSinceApprovalError)
        assert NO_CLUSTER in str(caught.value)


# ------------------------------------------------------------------ the executor, before the first write


@dataclass(frozen=True)
class _Write(Step):
    KIND: ClassVar[str] = "test_write"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "id": self.id}


@dataclass
class _Session:
    """What the executor uses of a session (a real run; its cluster has no migration, no broker)."""

    approval: ApprovedPlan
    dry_run: bool = False
    holds_lease: bool = True
    hook: Any = field(default_factory=lambda: SimpleNamespace(live_broker_ids=list))

    def refuse_if_migrating(self) -> None:
        pass

    def verify_approval(self) -> None:
        self.approval.verify()

    def recheck(self) -> None:
        pass

    def renew_lease(self) -> None:
        pass


class _Handler:
    def __init__(self) -> None:
        self.applied: list[str] = []

    def preflight(self, step, ctx):
        return []

    def apply(self, steps, ctx):
        self.applied += [s.id for s in steps]
        return {s.id: {} for s in steps}


def _execute(approval: ApprovedPlan, steps: list[Step], progress: Path) -> _Handler:
    """Run ``steps`` through the executor in a real run's session given ``approval``; the handler."""
    progress.mkdir()
    handler = _Handler()
    ctx = StepContext(_Session(approval), ProgressLog(str(progress)), steps)  # type: ignore[arg-type]
    StepExecutor("test", {_Write.KIND: handler}, ctx).run(steps)
    return handler


def test_the_executor_checks_the_approved_plan_again_right_before_the_first_write(tmp_path):
    folder = _plan_dir(tmp_path)
    steps: list[Step] = [_Write("write-1"), _Write("write-2")]
    assert _execute(_approval(folder), steps, tmp_path / "p1").applied == ["write-1", "write-2"]
    # the plan folder edited after the session opened (e.g. while the preflight read the cluster)
    approved = _approval(folder)
    (folder / "plan.json").write_text(json.dumps({**PLAN, "cluster": "other"}))
    handler = _Handler()
    ctx = StepContext(_Session(approved), ProgressLog(str(folder)), steps)  # type: ignore[arg-type]
    with pytest.raises(PlanChangedSinceApprovalError, match=r"plan\.json changed"):
        StepExecutor("test", {_Write.KIND: handler}, ctx).run(steps)
    assert handler.applied == []
