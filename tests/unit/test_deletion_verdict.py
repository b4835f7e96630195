"""Deletion verdicts name the cause the way Kafka's controller decides it."""

from __future__ import annotations

from airflow_provider_kafka_zk.kafka.deletion import (
    BrokerDeletionFacts,
    Cause,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
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


def test_young_delete_dirs_are_still_in_progress_and_the_delay_is_per_broker():
    young = [d(1, DirKind.DELETE, age_ms=30_000)]
    assert verdict(gone(), young).verdict is Verdict.IN_PROGRESS
    quick = {**BROKERS, 1: BrokerDeletionFacts(1, live=True, delete_delay_ms=1_000)}
    assert verdict(gone(), young, brokers=quick).verdict is Verdict.INCOMPLETE


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
