"""The simulator's brokers remove ``-delete`` directories when Kafka's LogManager would, and the
controller resumes a deletion paused by an offline broker when that broker starts.

Golden cases from ``core/src/main/scala/kafka/log/LogManager.scala`` (3.3.1: ``deleteLogs`` by due
time, first run ``InitialTaskDelayMs`` after the start; 1.0.0: a fixed-rate run deleting everything
queued) and ``KafkaController.onBrokerStartup`` (3.3.1), with the lines Kafka logs in each case.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_kafka_zk.kafka.deletion import (
    BrokerDeletionFacts,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
    deletion_verdict,
)
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.testing.simulator import BrokerSpec, ClusterSpec, SimulatedCluster, TopicSpec
from airflow_provider_kafka_zk.testing.simulator.log_deletion import DeleteLogsTask

DELAY = 60_000
START = 1_000_000_000_000  # the brokers' registration (ctime), ms


def _cluster(version: str = "3.3.1", delay: int = DELAY) -> SimulatedCluster:
    spec = ClusterSpec(
        "deleting",
        brokers=tuple(BrokerSpec(b) for b in range(3)),
        topics=(
            TopicSpec("retired", 2, 2, assignment={0: (1, 2), 1: (2, 0)}),
            TopicSpec("stays", 1, 2, assignment={0: (0, 1)}),
        ),
        kafka_version=version,
        log_segment_delete_delay_ms=delay,
    )
    return SimulatedCluster(spec)


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def _task(cluster: SimulatedCluster, tmp_path, clock: Clock, registrations: dict[int, tuple[int, int]]):
    deployed = SimpleNamespace(cluster=cluster, root=tmp_path)  # no disk: queued when first seen
    return DeleteLogsTask(deployed, now_ms=clock, registration=registrations.get)


def _delete_dirs(cluster: SimulatedCluster) -> list[tuple[int, str, int]]:
    return sorted((d.broker_id, d.topic, d.partition) for d in cluster.dirs if d.kind is DirKind.DELETE)


def test_a_deletion_paused_by_an_offline_broker_resumes_when_it_starts():
    """``onBrokerStartup``: "Some replicas ... for topics scheduled for deletion ... are on the newly
    restarted brokers 2. Signaling restart of topic deletion for these topics"; then
    "Deletion of topic retired successfully completed" (TopicDeletionManager.completeDeleteTopic)."""
    cluster = _cluster()
    cluster.stop_broker(2)
    cluster.delete_topic("retired", leave_delete_dirs=True)
    assert "retired" in cluster.topics and "retired" in cluster.delete_markers  # paused
    assert _delete_dirs(cluster) == [(0, "retired", 1), (1, "retired", 0)]  # live replicas renamed at once
    assert [(d.broker_id, d.partition) for d in cluster.replica_dirs("retired")] == [(2, 0), (2, 1)]
    cluster.start_broker(2)
    assert "retired" not in cluster.topics and "retired" not in cluster.delete_markers
    assert not any(i.kind == "deletion_stuck" for i in cluster.incidents)
    assert _delete_dirs(cluster) == [
        (0, "retired", 1),
        (1, "retired", 0),
        (2, "retired", 0),
        (2, "retired", 1),
    ]
    assert any("deletion resumed: broker 2" in h for h in cluster.history)


def test_a_deletion_still_paused_by_another_offline_broker_stays_paused():
    cluster = _cluster()
    cluster.stop_broker(1)
    cluster.stop_broker(2)
    cluster.delete_topic("retired")
    cluster.start_broker(2)  # broker 1 still holds retired-0 and is down
    assert "retired" in cluster.delete_markers


def test_golden_3_3_1_each_log_goes_delay_after_it_was_queued_not_before_30_s_after_the_start(tmp_path):
    """3.3.1: ``deleteLogs`` deletes a log at queue time + ``fileDeleteDelayMs`` ("Deleted log for
    partition retired-0 in <dir>/retired-0.<uuid>-delete."), the first run 30 s after the start."""
    cluster = _cluster()
    cluster.stop_broker(2)
    cluster.delete_topic("retired", leave_delete_dirs=True)
    clock = Clock(START + 3_600_000)  # brokers 0 and 1 have run for an hour
    registrations = {0: (10, START), 1: (11, START)}
    task = _task(cluster, tmp_path, clock, registrations)
    assert not task.step()  # queued now
    assert any(
        line.startswith("Log for partition retired-0 is renamed to ")
        and line.endswith("-delete and is scheduled for deletion")
        for line in task.log
    )
    clock.ms += DELAY - 1
    assert not task.step() and len(_delete_dirs(cluster)) == 2
    clock.ms += 1
    assert task.step() and _delete_dirs(cluster) == []
    assert sorted(line.split(" in ")[0] for line in task.log if line.startswith("Deleted log")) == [
        "Deleted log for partition retired-0",
        "Deleted log for partition retired-1",
    ]
    # broker 2 comes back: its replicas are renamed at its start, and wait for the first run
    cluster.start_broker(2)
    registrations[2] = (20, clock.ms)
    renamed_at = clock.ms
    task.step()
    assert _delete_dirs(cluster) == [(2, "retired", 0), (2, "retired", 1)]
    clock.ms = renamed_at + DELAY - 1
    assert not task.step()
    clock.ms = renamed_at + DELAY
    assert task.step() and _delete_dirs(cluster) == []


def test_golden_the_first_run_is_30_s_after_the_start_even_with_a_short_delay(tmp_path):
    cluster = _cluster(delay=1_000)
    cluster.delete_topic("retired", leave_delete_dirs=True)
    clock = Clock(START + 2_000)
    task = _task(cluster, tmp_path, clock, {b: (10 + b, START) for b in range(3)})
    task.step()
    clock.ms = START + 29_999
    assert not task.step() and len(_delete_dirs(cluster)) == 4
    clock.ms = START + 30_000
    assert task.step() and _delete_dirs(cluster) == []


def test_golden_1_0_deletes_everything_queued_at_each_fixed_rate_run(tmp_path):
    """1.0.0: ``scheduler.schedule("kafka-delete-logs", deleteLogs, delay = InitialTaskDelayMs, period =
    defaultConfig.fileDeleteDelayMs)`` and ``while (!logsToBeDeleted.isEmpty)`` delete: a log queued
    just before a run goes at that run, earlier than queue time + delay."""
    cluster = _cluster("1.0.0")
    clock = Clock(START + 30_000 + DELAY - 5_000)  # 5 s before the second run
    task = _task(cluster, tmp_path, clock, {b: (10 + b, START) for b in range(3)})
    task.step()
    cluster.delete_topic("retired", leave_delete_dirs=True)
    assert not task.step()
    clock.ms = START + 30_000 + DELAY
    assert task.step() and _delete_dirs(cluster) == []  # 5 s after they were queued


def test_a_failed_delete_stays_until_the_next_start(tmp_path):
    """``KafkaStorageException`` while deleting: "Exception while deleting ... in dir ..." and the log
    leaves the queue; the next start queues the directory again."""
    cluster = _cluster()
    cluster.delete_topic("retired")
    cluster.leave_leftover_dirs("retired", 1, [0], kind=DirKind.DELETE, age_ms=0)
    clock = Clock(START + 3_600_000)
    registrations = {b: (10 + b, START) for b in range(3)}
    task = _task(cluster, tmp_path, clock, registrations)
    task.step()
    clock.ms += DELAY
    assert not task.step() and _delete_dirs(cluster) == [(1, "retired", 0)]
    assert any(line.startswith("Exception while deleting retired-0 in dir ") for line in task.log)
    clock.ms += 10 * DELAY
    task.step()
    assert sum(line.startswith("Exception while deleting") for line in task.log) == 1  # not retried


@pytest.mark.parametrize("check_at_ms, expected", [(DELAY - 1, Verdict.PENDING_DELETE_DELAY), (DELAY, None)])
def test_the_verdict_agrees_with_the_simulated_broker(tmp_path, check_at_ms, expected):
    """The verdict rule and the simulated LogManager tell the same story at the same instant."""
    cluster = _cluster()
    cluster.delete_topic("retired", leave_delete_dirs=True)
    clock = Clock(START + 3_600_000)
    task = _task(cluster, tmp_path, clock, {b: (10 + b, START) for b in range(3)})
    task.step()
    renamed = clock.ms
    clock.ms = renamed + check_at_ms
    task.step()
    dirs = [
        TopicDirectory(d.broker_id, f"/d/{d.topic}-{d.partition}", d.partition, d.kind, clock.ms - renamed)
        for d in cluster.dirs
        if d.topic == "retired"
    ]
    facts = {b: BrokerDeletionFacts(b, live=True, running_for_ms=clock.ms - START) for b in range(3)}
    zk = TopicInZooKeeper("retired", topic_znode=False, delete_marker=False, config_znode=False)
    found = deletion_verdict(zk, dirs, facts, inventoried=range(3), margin_ms=0).verdict
    assert found is (expected or Verdict.DELETED)
