"""Pure parts of the deletion verification: topic validation, trigger serialization, and the
quarantine script run by a local ``sh`` exactly as the broker host runs it."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from airflow_provider_kafka_zk.hooks.broker_quarantine import remote_command
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.operators.deletion import validate_topics
from airflow_provider_kafka_zk.triggers.deletion import CLASSPATH, TopicDeletionTrigger


def test_topics_are_validated_and_deduplicated():
    assert validate_topics("a, b,a") == ["a", "b"]
    assert validate_topics(["old-logs", "x.y_z"]) == ["old-logs", "x.y_z"]
    for bad in (["../brokers"], ["a/b"], [""], ["."], ["x" * 250]):
        with pytest.raises((KafkaFormatError, ValueError)):
            validate_topics(bad)


def test_trigger_serializes_to_its_own_kwargs():
    trigger = TopicDeletionTrigger(
        settings={"kafka_zookeeper_conn_id": "zk", "ssh_conn_id": "ssh", "broker_hosts": {"3": "h3"}},
        topics=["t1", "t2"],
        poll_interval=5,
        deadline=123.0,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == CLASSPATH
    json.dumps(kwargs)  # what the triggerer stores must be plain JSON
    again = TopicDeletionTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs)


def _run(request: dict) -> list[dict]:
    argv = shlex.split(remote_command(("python3",)))  # what sshd's shell makes of the command
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3
    done = subprocess.run(argv, input=json.dumps(request).encode(), capture_output=True, check=True)
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_quarantine_script_moves_once_and_refuses_what_it_must(tmp_path):
    log_dir = tmp_path / "data" / "kafka-logs-0"
    (log_dir / "gone-0").mkdir(parents=True)
    (log_dir / "gone-0" / "00000000000000000000.log").write_bytes(b"x" * 10)
    (log_dir / "file-0").write_text("not a dir")
    (log_dir / "link-0").symlink_to(log_dir / "gone-0")
    names = ["gone-0", "file-0", "link-0", "../escape", "missing-0"]
    moves = [{"log_dir": str(log_dir), "name": n, "quarantine": None} for n in names]
    dry = {
        r["name"]: r["status"]
        for r in _run({"dry_run": True, "ts": "T1", "moves": moves, "broker_running": False})
        if r["t"] == "move"
    }
    assert dry == {
        "gone-0": "would_move",
        "file-0": "refused",
        "link-0": "refused",
        "../escape": "refused",
        "missing-0": "gone",
    }
    assert not (tmp_path / "data" / "kafka-quarantine").exists()
    records = _run({"dry_run": False, "ts": "T1", "moves": moves[:1], "broker_running": False})
    assert [r["status"] for r in records if r["t"] == "move"] == ["moved"]
    moved = tmp_path / "data" / "kafka-quarantine" / "T1" / "gone-0"
    assert (moved / "00000000000000000000.log").read_bytes() == b"x" * 10
    listing = json.loads((moved.parent / "quarantine-listing.json").read_text())
    assert [(e["name"], e["source"], e["bytes"]) for e in listing] == [
        ("gone-0", str(log_dir / "gone-0"), 10)
    ]
    again = _run({"dry_run": False, "ts": "T1", "moves": moves[:1], "broker_running": False})
    assert [r["status"] for r in again if r["t"] == "move"] == ["already_moved"]
    assert json.loads((moved.parent / "quarantine-listing.json").read_text()) == listing
    (log_dir / "gone-0").mkdir()  # same name again: the quarantined copy is never overwritten
    clash = _run({"dry_run": False, "ts": "T1", "moves": moves[:1], "broker_running": False})
    assert [(r["status"], r["detail"]) for r in clash if r["t"] == "move"] == [
        ("refused", "the destination already exists")
    ]


def test_remote_command_carries_no_caller_data():
    command = remote_command(("python3", "/usr/libexec/platform-python"))
    assert command.startswith("sh -c '") and "kafka-logs" not in command


def test_a_trigger_that_met_another_cluster_refuses_rather_than_retries():
    """A wait whose connection now leads elsewhere (or to no cluster) ends in the identity refusal,
    not in a retryable "not settled"; the settings carry the margin and the pinned cluster id."""
    from airflow_provider_kafka_zk.maintenance import ClusterIdentityError
    from airflow_provider_kafka_zk.operators.deletion import (
        TopicDeletionNotSettledError,
        TopicDeletionVerifyOperator,
    )

    operator = TopicDeletionVerifyOperator(
        task_id="verify",
        cluster="c",
        base_path="/tmp/unused",
        kafka_zookeeper_conn_id="zk",
        ssh_conn_id="ssh",
        topics=["t"],
        delete_dir_margin=12.5,
    )
    assert operator._settings()["delete_margin_ms"] == 12_500
    refused = {
        "status": "error",
        "refused": True,
        "message": "ClusterIdentityError: ... holds no Kafka cluster",
    }
    with pytest.raises(ClusterIdentityError, match="holds no Kafka cluster"):
        operator.execute_complete({}, refused)
    with pytest.raises(TopicDeletionNotSettledError, match="could not check"):
        operator.execute_complete({}, {"status": "error", "message": "ConnectionLoss"})
    with pytest.raises(ValueError, match="delete_dir_margin"):
        TopicDeletionVerifyOperator(
            task_id="v",
            cluster="c",
            base_path="/x",
            kafka_zookeeper_conn_id="zk",
            ssh_conn_id="s",
            delete_dir_margin=-1,
        )._settings()


def test_the_cleanup_plan_leaves_orphans_of_running_brokers_and_topics_that_came_back():
    from airflow_provider_kafka_zk.kafka.deletion_cleanup import ConfigZnode, Leftover, plan_cleanup

    leftovers = [
        Leftover(1, "gone", "/d1", "gone-0.abc-delete", "delete"),  # closed by Kafka: may move
        Leftover(1, "gone", "/d1", "gone-1", "normal"),  # a running broker may hold it open
        Leftover(2, "gone", "/d2", "gone-2", "normal"),  # broker 2 is stopped
        Leftover(2, "back", "/d2", "back-0", "normal"),  # the topic exists again
    ]
    znodes = {"gone": ConfigZnode(3, b"{}"), "back": ConfigZnode(0, b"{}"), "clean": ConfigZnode(1, b"x")}
    plan = plan_cleanup(
        leftovers, znodes, reappeared={"back": "/brokers/topics/back exists again"}, running={1}, ts="T"
    )
    assert [(m.broker_id, [d.name for d in m.dirs], m.broker_running) for m in plan.moves] == [
        (1, ["gone-0.abc-delete"], True),
        (2, ["gone-2"], False),
    ]
    left = {d["source"]: d["detail"] for d in plan.left_dirs}
    assert "broker 1 is running" in left["/d1/gone-1"] and "exists again" in left["/d2/back-0"]
    # gone keeps its znode (a directory stays), back is refused, clean (no directory left) goes
    assert {z["path"]: z["status"] for z in plan.left_znodes} == {
        "/config/topics/back": "refused",
        "/config/topics/gone": "kept",
    }
    [delete] = plan.deletes
    assert (delete.topic, delete.expected_version, delete.data) == ("clean", 1, b"x")
    allowed = plan_cleanup(
        leftovers, {}, reappeared={}, running={1}, ts="T", allow_running_broker_orphans=True
    )
    assert sum(len(m.dirs) for m in allowed.moves) == 4 and not allowed.left_dirs


PROD_CONN = "kafka_zk_unit_prod"
LAB_CONN = "kafka_zk_unit_lab"


class ClusterIO(Exception):
    """Raised by the first look at a cluster (the test's stand-in for ZooKeeper)."""


@pytest.fixture
def no_cluster_io(monkeypatch):
    """Two connections (prod, lab) that the approval rule can read, and no cluster behind them: the
    first ZooKeeper session a task opens raises :class:`ClusterIO`."""
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

    for conn_id, chroot in ((PROD_CONN, "/prod"), (LAB_CONN, "/lab")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {"conn_type": "kafka_zookeeper", "host": "zk1:2181,zk2:2181", "extra": {"chroot": chroot}}
            ),
        )

    def cluster_io(self):
        raise ClusterIO(f"connecting to {self.kafka_zookeeper_conn_id}")

    monkeypatch.setattr(KafkaZooKeeperHook, "get_conn", cluster_io)


def _cleanup_operator(tmp_path, cluster="prod", conn_id=PROD_CONN, **kwargs):
    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    return TopicDeletionVerifyOperator(
        task_id="verify",
        cluster=cluster,
        topics=["gone"],
        base_path=str(tmp_path / "artefacts"),
        kafka_zookeeper_conn_id=conn_id,
        ssh_conn_id="no_such_ssh",
        deferrable=False,
        wait_timeout=0,
        **kwargs,
    )


def _clusters(tmp_path, monkeypatch, text: str) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(text)
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))


CLUSTERS = (
    f'[clusters.prod]\nkafka_zookeeper_conn_id = "{PROD_CONN}"\n'
    f'[clusters.lab]\nkafka_zookeeper_conn_id = "{LAB_CONN}"\nrequire_approval = false\n'
)


def test_a_real_cleanup_on_a_cluster_that_requires_approval_refuses_before_any_io(
    tmp_path, monkeypatch, no_cluster_io
):
    from airflow_provider_kafka_zk.maintenance.approval import ApprovalRequiredError

    _clusters(tmp_path, monkeypatch, CLUSTERS)
    with pytest.raises(ApprovalRequiredError, match=r"needs a person's approval") as refused:
        _cleanup_operator(tmp_path, cleanup=True, dry_run=False).execute({})
    assert "PlanApprovalOperator" in str(refused.value) and "require_approval = false" in str(refused.value)
    assert not (tmp_path / "artefacts").exists()
    # a cluster in no entry of the file counts as requiring approval
    _clusters(
        tmp_path,
        monkeypatch,
        f'[clusters.lab]\nkafka_zookeeper_conn_id = "{LAB_CONN}"\nrequire_approval = false\n',
    )
    with pytest.raises(ApprovalRequiredError, match=r"in no entry of the cluster file"):
        _cleanup_operator(tmp_path, cluster="unlisted", cleanup=True, dry_run=False).execute({})
    # its dry run, a verification without cleanup, and a cluster whose entry opts out go on to the
    # cluster (the first ZooKeeper session)
    _clusters(tmp_path, monkeypatch, CLUSTERS)
    for kwargs in (
        {"cleanup": True, "dry_run": True},
        {"cleanup": False, "dry_run": False},
        {"cleanup": True, "dry_run": False, "cluster": "lab", "conn_id": LAB_CONN},
    ):
        with pytest.raises(ClusterIO):
            _cleanup_operator(tmp_path, **kwargs).execute({})


def test_a_real_cleanup_labelled_as_an_opted_out_cluster_refuses_before_any_io(
    tmp_path, monkeypatch, no_cluster_io
):
    """Issue 31: cluster="lab" (require_approval = false) with prod's connection moved prod's
    directories; the rule follows the connection, so the label refuses, naming both entries."""
    from airflow_provider_kafka_zk.maintenance.approval import ClusterEntryMismatchError

    _clusters(tmp_path, monkeypatch, CLUSTERS)
    with pytest.raises(ClusterEntryMismatchError) as refused:
        _cleanup_operator(tmp_path, cluster="lab", conn_id=PROD_CONN, cleanup=True, dry_run=False).execute({})
    message = str(refused.value)
    assert "cluster 'lab' names the entry lab" in message and "which is prod" in message, message
    assert not (tmp_path / "artefacts").exists()
