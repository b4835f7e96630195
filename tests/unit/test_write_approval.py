"""The one approval rule of every real write (issue 31): which cluster-file entry a write goes to
(from the connection actually used and ``/cluster/id``, never a label), whether it needs a person,
and every mutation refusing before any cluster I/O when it does and no approval of this run covers it.

The cluster behind every connection here is a stand-in: its first ZooKeeper session raises
:class:`ClusterIO`, so a refusal of another type happened before any I/O on the cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kafka_zk.kafka.approval import plan_digest
from airflow_provider_kafka_zk.kafka.leadership import ElectionScope
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.write_approval import (
    ClusterEntry,
    WriteTarget,
    approval_requirement,
    ensemble_members,
    label_problem,
)
from airflow_provider_kafka_zk.maintenance.approval import (
    ApprovalRequiredError,
    ApprovedPlan,
    ClusterEntryMismatchError,
    PlanChangedSinceApprovalError,
    PlanNotApprovedError,
    WriteApprovalRule,
    cluster_entries,
)
from airflow_provider_kafka_zk.maintenance.session import RunIdentity

ZK = ensemble_members(["zk1:2181", "zk2:2181", "zk3:2181"])
OTHER_ZK = ensemble_members(["zk9:2181"])


def _entry(name: str, required: bool, *, hosts=ZK, chroot="/prod", cluster_id=None) -> ClusterEntry:
    return ClusterEntry(name, required, cluster_id, hosts, chroot, f"conn_{name}")


# ------------------------------------------------------------------ the pure rule


def test_an_entry_is_its_connections_chroot_on_any_shared_ensemble_member_or_its_pinned_id():
    prod = _entry("prod", True)
    target = WriteTarget(ensemble_members(["ZK2:2181"]), "/prod")  # one member, another spelling of case
    assert prod.matches(target) is True
    assert prod.matches(WriteTarget(ZK, "/lab")) is False  # another chroot: another cluster
    assert prod.matches(WriteTarget(ensemble_members(["zk2:2182"]), "/prod")) is False  # another port
    assert _entry("x", True, hosts=None).matches(target) is False  # connection not readable here
    pinned = _entry("pinned", True, hosts=OTHER_ZK, cluster_id="ID-1")
    assert pinned.matches(target) is None  # only /cluster/id tells
    assert pinned.matches(WriteTarget(ZK, "/prod", "ID-1")) is True  # whatever connection reaches it
    assert pinned.matches(WriteTarget(OTHER_ZK, "/prod", "ID-2")) is False  # its connection, another id


def test_the_strictest_matching_entry_wins_and_no_entry_means_approval():
    target = WriteTarget(ZK, "/prod", "ID-1")
    assert approval_requirement([_entry("prod", True)], target).required is True
    assert approval_requirement([_entry("prod", False)], target).required is False
    both = approval_requirement([_entry("a", False), _entry("b", True)], target)
    assert both.required is True and both.names == ("a", "b")
    nothing = approval_requirement([_entry("lab", False, chroot="/lab")], target)
    assert nothing.required is True and "in no entry" in nothing.why()
    assert approval_requirement([], target).required is True


def test_before_cluster_id_is_read_the_requirement_is_known_only_when_every_outcome_agrees():
    before = WriteTarget(ZK, "/prod")
    strict_pin = _entry("p", True, hosts=None, cluster_id="ID")
    lax_pin = _entry("l", False, hosts=None, cluster_id="ID")
    assert approval_requirement([strict_pin], before).required is True  # matches or not: approval
    assert approval_requirement([lax_pin], before).required is None  # opted out only if it is that one
    assert approval_requirement([_entry("prod", False), lax_pin], before).required is False
    assert approval_requirement([_entry("prod", False), strict_pin], before).required is None
    assert approval_requirement([_entry("prod", True), lax_pin], before).required is True


def test_the_cluster_argument_must_be_an_entry_the_connection_reaches():
    entries = [_entry("prod", True), _entry("lab", False, chroot="/lab")]
    prod = WriteTarget(ZK, "/prod", "ID")
    assert label_problem("prod", entries, prod) is None
    problem = label_problem("lab", entries, prod)
    assert problem and "names the entry lab" in problem and "which is prod" in problem
    problem = label_problem("typo", entries, prod)
    assert problem and "names no entry" in problem and "prod" in problem
    nowhere = WriteTarget(OTHER_ZK, "/x", "ID")
    assert label_problem("unlisted", entries, nowhere) is None  # in no entry, and names none
    assert "no entry of the cluster file" in (label_problem("lab", entries, nowhere) or "")
    pinned = [_entry("prod", True, hosts=None, cluster_id="ID")]
    assert label_problem("prod", pinned, WriteTarget(OTHER_ZK, "/x")) is None  # decided once the id is read
    assert label_problem("prod", pinned, WriteTarget(OTHER_ZK, "/x", "OTHER")) is not None


# ------------------------------------------------------------------ the rule with an approval

RUN = RunIdentity("dag", "run", "execute", 1, "host")


def _plan(tmp_path: Path) -> Path:
    folder = tmp_path / "plan"
    folder.mkdir(exist_ok=True)
    (folder / "plan.json").write_text(json.dumps({"format": "kafka-zk-drain-plan", "cluster": "prod"}))
    (folder / "rollback.json").write_text("{}")
    return folder


def _approved(folder: Path, decision: str = "approved", **record: Any) -> ApprovedPlan:
    settings = {"execute": {"kafka_zookeeper_conn_id": "conn_prod"}}
    digest = plan_digest({n: (folder / n).read_bytes() for n in ("plan.json", "rollback.json")}, settings)
    full = {
        "decision": decision,
        "dag_id": "dag",
        "run_id": "run",
        "task_id": "approve",
        "cluster": "prod",
        "plan_dir": str(folder),
        "plan": digest.to_dict(),
        "decided_at": "2026-01-01T00:00:00+00:00",
        "decided_by": {"id": "alice", "name": "alice"},
        **record,
    }
    return ApprovedPlan("execute", "approve", full, str(folder), settings)


def _rule(entries, approval=None, label="prod", run=RUN, hosts=("zk1:2181",), chroot="/prod"):
    return WriteApprovalRule(
        label=label, connection=lambda: (hosts, chroot), run=run, approval=approval, entries=lambda: entries
    )


def test_where_approval_is_required_only_an_approval_of_this_run_for_this_task_and_entry_counts(tmp_path):
    folder = _plan(tmp_path)
    entries = [_entry("prod", True), _entry("lab", False, chroot="/lab")]
    assert _rule(entries, _approved(folder)).check("ID").required is True
    with pytest.raises(ApprovalRequiredError, match="no approval step before this task"):
        _rule(entries).check()  # before any cluster I/O
    with pytest.raises(PlanNotApprovedError, match="of run 'other-run'"):
        _rule(entries, _approved(folder, run_id="other-run")).check()
    with pytest.raises(ApprovalRequiredError, match="not this one"):
        _rule(entries, _approved(folder), run=RunIdentity("dag", "run", "elect", 1, "h")).check()
    # the approval step of an opted-out entry let it through: not for a cluster that requires approval
    with pytest.raises(ApprovalRequiredError, match="not_required"):
        _rule(entries, _approved(folder, "not_required", cluster="lab")).check()
    with pytest.raises(ClusterEntryMismatchError, match="approved for cluster 'lab'"):
        _rule(entries, _approved(folder, cluster="lab")).check("ID")
    with pytest.raises(PlanNotApprovedError, match="rejected"):
        _rule(entries, _approved(folder, "rejected")).check()


def test_an_opted_out_entry_writes_without_approval_but_a_given_approval_is_still_checked(tmp_path):
    folder = _plan(tmp_path)
    entries = [_entry("prod", False)]
    assert _rule(entries).check().required is False
    assert _rule(entries, _approved(folder, "not_required")).check("ID").required is False
    approved = _approved(folder, "not_required")
    (folder / "plan.json").write_text("{}")  # edited after the decision
    with pytest.raises(PlanChangedSinceApprovalError, match=r"plan\.json changed"):
        _rule(entries, approved).check()


def test_an_id_pinned_entry_is_decided_once_cluster_id_is_read(tmp_path):
    entries = [_entry("prod", False, hosts=None, cluster_id="ID-PROD")]
    rule = _rule(entries, hosts=("10.0.0.1:2181",))
    assert rule.check().required is None  # nothing certain before the read: no refusal yet
    assert rule.check("ID-PROD").required is False
    with pytest.raises(ClusterEntryMismatchError, match="names the entry prod"):
        rule.check("ID-OTHER")
    with pytest.raises(ApprovalRequiredError, match="in no entry"):
        _rule(entries, label="unlisted", hosts=("10.0.0.1:2181",)).check("ID-OTHER")


def test_cluster_entries_come_from_the_cluster_file_and_each_entrys_own_connection(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_CONN_PROD",
        json.dumps({"conn_type": "kafka_zookeeper", "host": "ZK1:2181,zk2", "extra": {"chroot": "/prod"}}),
    )
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[clusters.prod]\nkafka_zookeeper_conn_id = "conn_prod"\nenabled = false\n'
        '[clusters.lab]\nrequire_approval = false\ncluster_id = " ID-LAB "\n'
    )
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
    lab, prod = cluster_entries()
    assert (prod.name, prod.require_approval, prod.hosts, prod.chroot) == (
        "prod",
        True,  # the default, and counted although the entry is disabled
        frozenset({"zk1:2181", "zk2:2181"}),
        "/prod",
    )
    assert (lab.name, lab.require_approval, lab.cluster_id, lab.hosts) == ("lab", False, "ID-LAB", None)
    assert "kafka_zk_lab" in (lab.unreadable or "")


def test_a_cluster_id_in_the_defaults_is_refused(tmp_path):
    from airflow_provider_kafka_zk.clusters import ClusterFileError, load_clusters

    clusters = tmp_path / "clusters.toml"
    clusters.write_text('[defaults]\ncluster_id = "x"\n[clusters.a]\n')
    with pytest.raises(ClusterFileError, match="cluster_id names one cluster"):
        load_clusters(clusters)
    clusters.write_text("[clusters.a]\ncluster_id = 5\n")
    with pytest.raises(ClusterFileError, match=r"clusters\.a\.cluster_id"):
        load_clusters(clusters)


# ------------------------------------------------------------------ every mutation, before any I/O

CONN = "kafka_zk_write_rule_prod"
IDENTITY = ClusterIdentity("cluster-id", ("zk1:2181",), "/prod")
PLAN = {"format": "kafka-zk-drain-plan", "cluster": "prod", "batches": []}


class ClusterIO(Exception):
    """The first ZooKeeper session of a hook (nothing may get this far)."""


@pytest.fixture
def prod_requires_approval(tmp_path, monkeypatch):
    """Cluster file: ``prod`` (this connection) requires approval, ``lab`` (another chroot) does not."""
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

    for conn_id, chroot in ((CONN, "/prod"), ("kafka_zk_write_rule_lab", "/lab")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps({"conn_type": "kafka_zookeeper", "host": "zk1:2181", "extra": {"chroot": chroot}}),
        )
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        f'[clusters.prod]\nkafka_zookeeper_conn_id = "{CONN}"\n'
        '[clusters.lab]\nkafka_zookeeper_conn_id = "kafka_zk_write_rule_lab"\nrequire_approval = false\n'
    )
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))

    def cluster_io(self):
        raise ClusterIO(self.kafka_zookeeper_conn_id)

    monkeypatch.setattr(KafkaZooKeeperHook, "get_conn", cluster_io)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps(PLAN))
    (folder / "rollback.json").write_text("{}")
    return folder


def _drain(folder: Path, cluster: str) -> None:
    from airflow_provider_kafka_zk.maintenance.drain import execute_drain

    execute_drain(
        str(folder),
        {**PLAN, "cluster": cluster},
        [],
        kafka_zookeeper_conn_id=CONN,
        rate=1000,
        run=RUN,
        dry_run=False,
        expected=IDENTITY,
    )


def _clear(folder: Path, cluster: str) -> None:
    from airflow_provider_kafka_zk.maintenance.drain import clear_throttles

    clear_throttles(
        str(folder),
        {**PLAN, "cluster": cluster},
        [],
        {"entities": {"topics/t": {"leader.replication.throttled.replicas": "0:1"}}},
        kafka_zookeeper_conn_id=CONN,
        run=RUN,
        dry_run=False,
        force=False,
        expected=IDENTITY,
    )


def _election(folder: Path, cluster: str) -> None:
    from airflow_provider_kafka_zk.artefacts.drain_folder import DrainLocation
    from airflow_provider_kafka_zk.maintenance.leader_election import run_election

    run_election(
        DrainLocation(str(folder)),
        cluster=cluster,
        kafka_zookeeper_conn_id=CONN,
        scope=ElectionScope(brokers=frozenset({1})),
        max_partitions=10,
        max_bytes=10**6,
        poll_interval=1.0,
        timeout=10.0,
        run=RUN,
        dry_run=False,
        expected=None,
    )


def _repair(folder: Path, cluster: str) -> None:
    from airflow_provider_kafka_zk.maintenance.topic_id_repair import RepairSettings, execute_repair_plan

    execute_repair_plan(
        str(folder),
        {"cluster": cluster},
        [],
        RepairSettings(kafka_zookeeper_conn_id=CONN),
        run=RUN,
        dry_run=False,
        expected=IDENTITY,
    )


def _cleanup(folder: Path, cluster: str) -> None:
    from airflow_provider_kafka_zk.kafka.deletion import Cause, Verdict
    from airflow_provider_kafka_zk.maintenance.deletion_cleanup import run_cleanup

    left = SimpleNamespace(topic="gone", verdict=Verdict.INCOMPLETE, causes=(Cause.CONFIG_ZNODE_LEFT,))
    check = SimpleNamespace(verdicts=[left], leftovers=lambda v: [], live_brokers=(), disks={})
    run_cleanup(
        check,  # type: ignore[arg-type]
        cluster=cluster,
        kafka_zookeeper_conn_id=CONN,
        host_hook=None,  # type: ignore[arg-type]
        artefact_dir=str(folder),
        ts="20260101T000000",
        run=RUN,
        dry_run=False,
        quarantine_dir=None,
        allow_running_broker_orphans=False,
    )


def _session(folder: Path, cluster: str) -> None:
    """A writer that does not exist yet: it opens a session and hands it no approval."""
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
    from airflow_provider_kafka_zk.maintenance import MaintenanceSession

    with KafkaZooKeeperHook(CONN) as hook:
        MaintenanceSession(hook, cluster=cluster, artefact_dir=str(folder), run=RUN, dry_run=False).open()


WRITERS = {
    "drain and move-back": _drain,
    "throttle clearing": _clear,
    "election": _election,
    "repair": _repair,
    "cleanup": _cleanup,
    "any later writer": _session,
}


@pytest.mark.usefixtures("prod_requires_approval")
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_without_an_approval_refuses_on_a_cluster_that_requires_it_before_any_io(
    tmp_path, writer
):
    folder = _folder(tmp_path)
    with pytest.raises(ApprovalRequiredError, match="no approval step before this task") as refused:
        WRITERS[writer](folder, "prod")
    assert "PlanApprovalOperator" in str(refused.value)
    assert not (folder / "identity.json").exists()  # nothing pinned: nothing of the cluster was read


@pytest.mark.usefixtures("prod_requires_approval")
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_labelled_as_another_entry_refuses_before_any_io(tmp_path, writer):
    folder = _folder(tmp_path)
    with pytest.raises(ClusterEntryMismatchError, match="cluster 'lab' names the entry lab"):
        WRITERS[writer](folder, "lab")
    assert not (folder / "identity.json").exists()


@pytest.mark.usefixtures("prod_requires_approval")
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_goes_on_to_the_cluster_where_its_entry_opts_out(tmp_path, monkeypatch, writer):
    """The control: the same call with prod opted out in the cluster file reaches the cluster."""
    clusters = tmp_path / "opted-out.toml"
    clusters.write_text(f'[clusters.prod]\nkafka_zookeeper_conn_id = "{CONN}"\nrequire_approval = false\n')
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
    with pytest.raises(ClusterIO):
        WRITERS[writer](_folder(tmp_path), "prod")
