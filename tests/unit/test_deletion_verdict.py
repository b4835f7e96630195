"""Deletion verdicts name the cause the way Kafka's controller decides it."""

from __future__ import annotations

from airflow_provider_kafka_zk.kafka.deletion import (
    DEFAULT_DELETE_MARGIN_MS,
    BrokerDeletionFacts,
    Cause,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
    delete_dir_schedule,
    deletion_verdict,
)
from airflow_provider_kafka_zk.kafka.logdir import DirKind

BROKERS = {b: BrokerDeletionFacts(b, live=True) for b in range(3)}


def zk(**kw):
    defaults = dict(
        topic="t", topic_znode=True, delete_marker=True, config_znode=True, replicas={0: (0, 1), 1: (1, 2)}
    )
    return TopicInZooKeeper(**{**defaults, **kw})


def gone(**kw):
    return zk(**{"topic_znode": False, "delete_marker": False, "config_znode": False, "replicas": {}, **kw})


def d(broker, kind=DirKind.NORMAL, age_ms=0, partition=0):
    return TopicDirectory(broker, f"/data/t-{partition}", partition, kind, age_ms)


def verdict(z, dirs=(), brokers=BROKERS, inventoried=(0, 1, 2), **kw):
    return deletion_verdict(z, dirs, brokers, inventoried=inventoried, **kw)


def test_marker_with_offline_replica_broker_is_blocked_naming_the_broker():
    brokers = {**BROKERS, 2: BrokerDeletionFacts(2, live=False)}
    v = verdict(zk(), brokers=brokers, inventoried=(0, 1))
    assert (v.verdict, v.causes, v.blocking_brokers) == (
        Verdict.BLOCKED,
        (Cause.REPLICA_BROKER_OFFLINE,),
        (2,),
    )
    assert v.uninventoried_brokers == (2,)  # down, so its disk was not read


def test_marker_during_reassignment_is_blocked():
    v = verdict(zk(reassigning=True))
    assert (v.verdict, v.causes) == (Verdict.BLOCKED, (Cause.REASSIGNMENT_IN_PROGRESS,))


def test_marker_with_nothing_in_the_way_is_in_progress():
    assert verdict(zk()).verdict is Verdict.IN_PROGRESS
    assert verdict(zk(), controller_live=False).causes == (Cause.NO_CONTROLLER,)


def test_requested_deletion_with_deletion_disabled_is_ignored():
    brokers = {b: BrokerDeletionFacts(b, live=True, delete_topic_enable=False) for b in range(3)}
    v = verdict(zk(delete_marker=False), brokers=brokers, requested=True)
    assert (v.verdict, v.causes) == (Verdict.IGNORED, (Cause.DELETION_DISABLED,))
    assert verdict(zk(delete_marker=False), brokers=brokers).verdict is Verdict.NOT_REQUESTED
    assert verdict(zk(delete_marker=False), requested=True).verdict is Verdict.NOT_REQUESTED


def test_gone_everywhere_is_deleted_and_partial_coverage_is_said():
    assert verdict(gone()).verdict is Verdict.DELETED
    partial = verdict(gone(), inventoried=(0, 1))
    assert partial.verdict is Verdict.DELETED and partial.uninventoried_brokers == (2,)
    assert "PARTIAL" in partial.describe()


def test_leftovers_make_it_incomplete():
    dirs = [
        d(1),
        d(2, DirKind.DELETE, age_ms=3_600_000),
        d(0, DirKind.DELETE, age_ms=10),
        d(0, DirKind.STRAY),
    ]
    v = verdict(gone(config_znode=True), dirs)
    assert v.verdict is Verdict.INCOMPLETE
    assert set(v.causes) == {
        Cause.CONFIG_ZNODE_LEFT,
        Cause.PARTITION_DIRS_LEFT,
        Cause.DELETE_DIRS_PAST_DELAY,
        Cause.STRAY_DIRS_LEFT,
    }
    assert sorted(x.broker_id for x in v.leftover_dirs) == [
        0,
        1,
        2,
    ]  # the young -delete dir is not a leftover


def test_young_delete_dirs_are_pending_the_delay_and_the_delay_is_per_broker():
    young = [d(1, DirKind.DELETE, age_ms=30_000)]
    pending = verdict(gone(), young)
    assert pending.verdict is Verdict.PENDING_DELETE_DELAY and not pending.verdict.finished
    assert pending.pending_dirs == tuple(young) and not pending.leftover_dirs
    # the same age on a broker running with a 1 s delay for an hour: past its schedule + the margin
    quick = {**BROKERS, 1: BrokerDeletionFacts(1, live=True, delete_delay_ms=1_000, running_for_ms=3_600_000)}
    assert verdict(gone(), young, brokers=quick, margin_ms=0).verdict is Verdict.INCOMPLETE
    assert verdict(gone(), young, brokers=quick, margin_ms=28_999).verdict is Verdict.INCOMPLETE
    assert verdict(gone(), young, brokers=quick, margin_ms=29_000).verdict is Verdict.PENDING_DELETE_DELAY


# ---------------------------------------------------------------------------------------------
# Golden cases: when a broker's kafka-delete-logs task removes a -delete directory
# (core/src/main/scala/kafka/log/LogManager.scala deleteLogs / loadLog / InitialTaskDelayMs, 3.3.1)
# ---------------------------------------------------------------------------------------------

DELAY = 60_000  # log.segment.delete.delay.ms, Kafka's default


def test_golden_3_3_1_a_check_20_ms_before_kafka_deleted_them_is_pending_not_incomplete():
    """The real 3.3.1 cluster of issue 26: a topic deleted while broker 2 was down; broker 2 came back,
    ZooKeeper was cleaned 1.6 s after it registered, and its -delete directories went 60 s later.
    The product looked at age 60,032 ms and said INCOMPLETE (delete_dirs_past_delay); Kafka's
    server.log 20 ms later:

      INFO Deleted log for partition retired-0 in /data/kafka-logs/retired-0.<uuid>-delete. (kafka.log.LogManager)
    """
    running = 1_600 + 60_032  # registered 1.6 s before the rename
    broker2 = {**BROKERS, 2: BrokerDeletionFacts(2, live=True, delete_delay_ms=DELAY, running_for_ms=running)}
    dirs = [d(2, DirKind.DELETE, age_ms=60_032, partition=p) for p in (0, 1)]
    at_check = verdict(gone(), dirs, brokers=broker2)
    assert at_check.verdict is Verdict.PENDING_DELETE_DELAY  # due 32 ms ago: well within the margin
    assert at_check.causes == () and not at_check.leftover_dirs
    assert "broker 2: 2 -delete directories waiting for its kafka-delete-logs task (due 0.0 s ago" in (
        at_check.describe()
    )
    # 20 ms later the broker deleted them: nothing left anywhere
    assert verdict(gone(), [], brokers=broker2).verdict is Verdict.DELETED
    # had Kafka not deleted them (a failing disk), the verdict turns INCOMPLETE once the margin is past
    late = DELAY + DEFAULT_DELETE_MARGIN_MS + 1
    stuck = {**BROKERS, 2: BrokerDeletionFacts(2, live=True, running_for_ms=1_600 + late)}
    left = verdict(gone(), [d(2, DirKind.DELETE, age_ms=late)], brokers=stuck)
    assert (left.verdict, left.causes) == (Verdict.INCOMPLETE, (Cause.DELETE_DIRS_PAST_DELAY,))


def test_golden_a_directory_renamed_before_the_broker_restarted_is_queued_at_its_start():
    """``loadLog``: ``if (logDir.getName.endsWith(DeleteDirSuffix)) addLogToBeDeleted(log)`` -- queued
    when the logs load, whatever its ctime says: renamed 2 h ago, the broker started 10 s ago, so
    Kafka deletes it 60 s after the start, not "2 h late"."""
    restarted = {**BROKERS, 1: BrokerDeletionFacts(1, live=True, running_for_ms=10_000)}
    old = d(1, DirKind.DELETE, age_ms=7_200_000)
    schedule = delete_dir_schedule(old.age_ms, restarted[1])
    assert (schedule.due_in_ms, schedule.overdue) == (50_000, False)
    assert verdict(gone(), [old], brokers=restarted).verdict is Verdict.PENDING_DELETE_DELAY


def test_golden_nothing_is_deleted_before_the_first_run_30_s_after_the_start():
    """``scheduler.schedule("kafka-delete-logs", deleteLogs _, delay = InitialTaskDelayMs)``: with a
    1 s delay a directory renamed 4 s after the start still waits for the run at 30 s."""
    quick = BrokerDeletionFacts(1, live=True, delete_delay_ms=1_000, running_for_ms=5_000)
    schedule = delete_dir_schedule(1_000 + 3_000, quick, margin_ms=0)
    assert (schedule.due_in_ms, schedule.overdue) == (25_000, False)
    # without the initial delay the rule would have called it overdue 3 s ago
    assert delete_dir_schedule(
        4_000, BrokerDeletionFacts(1, live=True, delete_delay_ms=1_000, running_for_ms=600_000), margin_ms=0
    ).overdue


def test_golden_0_11_and_1_0_delete_everything_queued_at_a_fixed_rate_within_the_same_bound():
    """0.11.0.0 / 1.0.0 ``deleteLogs`` runs every ``fileDeleteDelayMs`` (fixed rate from 30 s after the
    start) and deletes every queued log: a directory goes at the first run after its rename, never
    later than rename + delay -- the bound the rule uses for every release."""
    broker = BrokerDeletionFacts(0, live=True, running_for_ms=3_600_000)
    for age in (0, 59_999, 60_000):
        assert not delete_dir_schedule(age, broker, margin_ms=0).overdue
    assert delete_dir_schedule(60_001, broker, margin_ms=0).overdue


def test_a_stopped_brokers_delete_dirs_wait_for_its_start_and_name_it():
    """A stopped broker deletes nothing; at its start it queues them as its logs load."""
    stopped = {**BROKERS, 2: BrokerDeletionFacts(2, live=False)}
    v = verdict(gone(), [d(2, DirKind.DELETE, age_ms=86_400_000)], brokers=stopped)
    assert (v.verdict, v.blocking_brokers) == (Verdict.PENDING_DELETE_DELAY, (2,))
    assert "broker 2 is not running: it deletes its 1 -delete directory itself once it starts" in v.describe()


def test_pending_delete_dirs_beside_a_real_leftover_are_not_listed_as_leftovers():
    v = verdict(gone(), [d(1), d(2, DirKind.DELETE, age_ms=1_000)])
    assert (v.verdict, v.causes) == (Verdict.INCOMPLETE, (Cause.PARTITION_DIRS_LEFT,))
    assert [x.broker_id for x in v.leftover_dirs] == [1] and [x.broker_id for x in v.pending_dirs] == [2]
    assert "waiting for its kafka-delete-logs task" in v.describe()


def test_dirs_on_brokers_not_inventoried_are_not_evidence():
    assert verdict(gone(), [d(2)], inventoried=(0, 1)).verdict is Verdict.DELETED


def test_final_znode_cleanup_is_in_progress():
    assert verdict(zk(topic_znode=False, replicas={})).verdict is Verdict.IN_PROGRESS


def test_future_dirs_of_a_deleted_topic_are_leftovers():
    v = verdict(gone(), [d(1, DirKind.FUTURE, age_ms=5)])
    assert (v.verdict, v.causes) == (Verdict.INCOMPLETE, (Cause.FUTURE_DIRS_LEFT,))


def test_a_stopped_broker_whose_disk_was_not_read_makes_coverage_partial():
    brokers = {**BROKERS, 2: BrokerDeletionFacts(2, live=False)}
    v = verdict(gone(), brokers=brokers, inventoried=(0, 1))
    assert v.verdict is Verdict.DELETED and v.uninventoried_brokers == (2,)


def test_blocked_by_an_offline_broker_says_what_the_live_brokers_disks_hold():
    """Issue 32, item 5 (a real 3.3.1 cluster): with broker 2 down, the live replicas were renamed
    ``-delete`` at once and removed 60 s later; a verdict in between said "replicas on live brokers are
    already gone" while their ``-delete`` directories still existed. It names what the disks hold."""
    brokers = {**BROKERS, 2: BrokerDeletionFacts(2, live=False)}
    dirs = [
        d(0, DirKind.DELETE, age_ms=4_600, partition=0),
        d(1, DirKind.DELETE, age_ms=4_600, partition=0),
        d(1, DirKind.DELETE, age_ms=4_600, partition=1),
    ]
    v = verdict(zk(), dirs, brokers=brokers, inventoried=(0, 1))
    assert v.verdict is Verdict.BLOCKED and v.blocking_brokers == (2,)
    text = "; ".join(v.evidence)
    assert "already gone" not in text
    assert "broker 0: 1 -delete directory waiting for its kafka-delete-logs task (due in 55.4 s" in text
    assert "broker 1: 2 -delete directories waiting for its kafka-delete-logs task (due in 55.4 s" in text
    assert "broker 2 (offline, its disk not read)" in text

    # once Kafka removed them: said so from the disks read, not assumed
    v = verdict(zk(), (), brokers=brokers, inventoried=(0, 1))
    assert "the live replica brokers [0, 1] hold no directory of it: removed" in "; ".join(v.evidence)
    # a replica not renamed yet (the controller's StopReplica still on its way), a disk not read
    v = verdict(zk(), [d(0, DirKind.NORMAL)], brokers=brokers, inventoried=(0,))
    text = "; ".join(v.evidence)
    assert "broker 0: 1 partition directory not renamed yet" in text
    assert "broker 1: its disk was not read" in text
