"""Snapshot diff: two snapshots of one simulated cluster, an incident step in between."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.model import ClusterState
from airflow_provider_kafka_zk.kafka.snapshot import ZnodeRow
from airflow_provider_kafka_zk.kafka.snapshot_diff import ChangeKind, SnapshotDiff, TopicIdChange, diff_states
from airflow_provider_kafka_zk.testing.simulator import SimulatedCluster, healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.rows import cluster_rows


def snapshots(
    cluster: SimulatedCluster, step: Callable[[SimulatedCluster], object]
) -> tuple[ClusterState, ClusterState, list[ZnodeRow], list[ZnodeRow]]:
    """States (and rows) of ``cluster`` before and after ``step``; the second carries Stat over."""
    before_rows = cluster_rows(cluster)
    step(cluster)
    after_rows = cluster_rows(cluster, previous=before_rows)
    return (
        ClusterState.from_snapshot(before_rows, cluster=cluster.spec.name),
        ClusterState.from_snapshot(after_rows, cluster=cluster.spec.name),
        before_rows,
        after_rows,
    )


def diff_after(cluster: SimulatedCluster, step: Callable[[SimulatedCluster], object]) -> SnapshotDiff:
    before, after, _, _ = snapshots(cluster, step)
    return diff_states(before, after)


def kinds(diff: SnapshotDiff) -> set[ChangeKind]:
    return {c.kind for c in diff.changes}


# --------------------------------------------------------------------------------------------
# The headline: topic ids
# --------------------------------------------------------------------------------------------


def test_identical_snapshots_have_no_changes() -> None:
    state = ClusterState.from_snapshot(cluster_rows(incident_cluster()), cluster="demo")
    diff = diff_states(state, state)
    assert diff.is_empty and diff.headline == ()
    assert set(diff.summary().values()) == {0}
    assert set(diff.summary()) >= {k.value for k in ChangeKind} | {"critical", "warning", "info", "total"}
    assert diff.describe() == "demo: no changes between the snapshots"


def test_failover_minting_an_id_for_inventory_updates_is_the_headline() -> None:
    cluster = incident_cluster()
    precursor = {i.topic for i in cluster.incidents if i.kind == "topic_id_missing_in_zookeeper"}
    held_in_memory = cluster.topic("inventory-updates").controller_topic_id
    diff = diff_after(cluster, lambda c: c.controller_failover())

    assert precursor == {"inventory-updates"}
    (change,) = diff.topic_id_changes
    assert isinstance(change, TopicIdChange)
    assert (change.kind, change.severity, change.topic) == (
        ChangeKind.TOPIC_ID_ADDED,
        Severity.CRITICAL,
        "inventory-updates",
    )
    assert change.before is None and change.after == cluster.topic("inventory-updates").zk_topic_id
    assert change.after != held_in_memory and not change.topic_recreated
    assert diff.headline == (change,)
    assert diff.changes[0] is change
    assert "KAFKA-14190" in change.message
    description = diff.describe().splitlines()
    assert description[1].startswith("CRITICAL topic_id_added") and "inventory-updates" in description[1]

    (controller,) = diff.controller_changes
    assert controller.broker_after == cluster.controller_id != controller.broker_before
    assert controller.epoch_after == controller.epoch_before + 1 == cluster.controller_epoch
    assert controller.severity is Severity.INFO


def test_an_old_client_adding_partitions_loses_the_topic_id() -> None:
    cluster = incident_cluster()
    original = cluster.topic("orders").zk_topic_id
    diff = diff_after(cluster, lambda c: c.old_client_adds_partitions("orders", 9, client="2.7"))

    (change,) = diff.headline
    assert isinstance(change, TopicIdChange)
    assert (change.kind, change.topic, change.before, change.after) == (
        ChangeKind.TOPIC_ID_LOST,
        "orders",
        original,
        None,
    )
    assert str(original) in change.message  # the id to write back
    (count,) = diff.partition_count_changes
    assert (count.topic, count.before, count.after, count.severity) == ("orders", 6, 9, Severity.INFO)
    assert diff.assignment_changes == ()  # existing partitions keep their replicas
    assert diff.describe().splitlines()[1].startswith("CRITICAL topic_id_lost")


def test_lost_then_reminted_between_snapshots_is_a_changed_id() -> None:
    cluster = incident_cluster()
    original = cluster.topic("orders").zk_topic_id

    def old_client_then_failover(c: SimulatedCluster) -> None:
        c.old_client_adds_partitions("orders", 8)
        c.controller_failover()

    diff = diff_after(cluster, old_client_then_failover)
    by_topic = {c.topic: c for c in diff.topic_id_changes}
    assert set(by_topic) == {"orders", "inventory-updates"}  # the failover also minted the precursor's
    change = by_topic["orders"]
    assert (change.kind, change.severity) == (ChangeKind.TOPIC_ID_CHANGED, Severity.CRITICAL)
    assert change.before == original and change.after == cluster.topic("orders").zk_topic_id != original
    assert by_topic["inventory-updates"].kind is ChangeKind.TOPIC_ID_ADDED
    assert set(diff.headline) == set(by_topic.values())


def test_a_re_created_topic_gets_a_new_id_without_alarm() -> None:
    cluster = healthy_cluster()
    spec = cluster.topic("orders").spec
    before, _, _, after_rows = snapshots(cluster, lambda c: (c.delete_topic("orders"), c.create_topic(spec)))
    # ZooKeeper gives a topic created again a new czxid; the rows helper only knows paths.
    newest = max(r.czxid for r in after_rows) + 1
    after_rows = [
        dataclasses.replace(r, czxid=newest) if r.path == "/brokers/topics/orders" else r for r in after_rows
    ]
    diff = diff_states(before, ClusterState.from_snapshot(after_rows))
    (change,) = diff.topic_id_changes
    assert change.kind is ChangeKind.TOPIC_ID_CHANGED and change.topic_recreated
    assert change.severity is Severity.WARNING and diff.headline == ()


def test_first_ids_after_an_ibp_upgrade_are_not_critical() -> None:
    cluster = incident_cluster()
    before_rows = cluster_rows(cluster)
    without_ids = [
        dataclasses.replace(r, data=zk.TopicAssignment.decode(r.data, r.path).encode_v2())
        if zk.TopicAssignment.PATH_PATTERN.fullmatch(r.path)
        else r
        for r in before_rows
    ]
    diff = diff_states(ClusterState.from_snapshot(without_ids), ClusterState.from_snapshot(before_rows))
    assert {c.kind for c in diff.topic_id_changes} == {ChangeKind.TOPIC_ID_ADDED}
    assert len(diff.topic_id_changes) == sum(1 for t in cluster.topics.values() if t.zk_topic_id is not None)
    assert {c.severity for c in diff.topic_id_changes} == {Severity.WARNING}


# --------------------------------------------------------------------------------------------
# Everything else
# --------------------------------------------------------------------------------------------


def test_broker_left() -> None:
    cluster = healthy_cluster()
    diff = diff_after(cluster, lambda c: c.stop_broker(5))
    (left,) = diff.broker_changes
    assert (left.kind, left.broker_id, left.severity) == (ChangeKind.BROKER_LEFT, 5, Severity.WARNING)
    assert left.epoch_before is not None and left.epoch_after is None
    assert diff.controller_changes == () and diff.topic_id_changes == ()


def test_broker_restarted_and_joined() -> None:
    cluster = healthy_cluster()

    def restart_2_and_stop_4(c: SimulatedCluster) -> None:
        c.brokers[2].registered_at_ms = c.tick()
        c.stop_broker(4)

    before, after, _, _ = snapshots(cluster, restart_2_and_stop_4)
    diff = diff_states(before, after)
    restarted = [c for c in diff.broker_changes if c.kind is ChangeKind.BROKER_RESTARTED]
    assert [(c.broker_id, c.epoch_before, c.epoch_after) for c in restarted] == [
        (2, before.brokers[2].epoch, after.brokers[2].epoch)
    ]
    reverse = diff_states(after, before)
    assert {(c.kind, c.broker_id) for c in reverse.broker_changes} == {
        (ChangeKind.BROKER_JOINED, 4),
        (ChangeKind.BROKER_RESTARTED, 2),
    }


def test_controller_moved() -> None:
    cluster = healthy_cluster()
    diff = diff_after(cluster, lambda c: c.controller_failover(new_controller=4))
    (moved,) = diff.controller_changes
    assert (moved.broker_before, moved.broker_after) == (0, 4)
    assert (moved.epoch_before, moved.epoch_after) == (1, 2)
    assert kinds(diff) == {ChangeKind.CONTROLLER_MOVED}  # all topics already had ids: nothing minted


def test_config_changes_for_topics_and_brokers() -> None:
    cluster = healthy_cluster()

    def reconfigure(c: SimulatedCluster) -> None:
        c.topic("orders").config["retention.ms"] = "1000"
        c.topic("orders").config["min.insync.replicas"] = "1"
        del c.topic("__consumer_offsets").config["segment.bytes"]
        c.broker_configs["1"] = {"leader.replication.throttled.rate": "1048576"}

    diff = diff_after(cluster, reconfigure)
    assert {(c.entity_type, c.entity_name, c.key, c.before, c.after) for c in diff.config_changes} == {
        ("topics", "orders", "retention.ms", None, "1000"),
        ("topics", "orders", "min.insync.replicas", "2", "1"),
        ("topics", "__consumer_offsets", "segment.bytes", "104857600", None),
        ("brokers", "1", "leader.replication.throttled.rate", None, "1048576"),
    }
    assert kinds(diff) == {ChangeKind.CONFIG_CHANGED}


def test_partition_added_by_a_current_client_keeps_the_id() -> None:
    cluster = healthy_cluster()
    before, _, _, after_rows = snapshots(cluster, lambda c: None)
    orders = before.topics["orders"]
    grown = zk.TopicAssignment(
        "orders", {**orders.assignment.partitions, 6: (0, 1, 2)}, orders.topic_id
    ).encode()
    after_rows = [dataclasses.replace(r, data=grown) if r.path == orders.path else r for r in after_rows]
    diff = diff_states(before, ClusterState.from_snapshot(after_rows))
    (count,) = diff.partition_count_changes
    assert (count.before, count.after) == (6, 7)
    assert diff.topic_id_changes == ()


def test_topic_deleted_and_marker_appeared() -> None:
    cluster = healthy_cluster()

    def delete_two(c: SimulatedCluster) -> None:
        c.delete_topic("orders")  # every replica online: completes at once
        c.stop_broker(5)
        c.delete_topic("payments.v1-events")  # replicas on broker 5: the marker stays

    stuck_partitions = sum(
        1 for p in cluster.topic("payments.v1-events").partitions.values() if 5 in p.replicas
    )
    diff = diff_after(cluster, delete_two)
    (removed,) = [c for c in diff.topic_changes if c.kind is ChangeKind.TOPIC_REMOVED]
    assert (removed.topic, removed.partition_count) == ("orders", 6)
    assert removed.topic_id is not None
    (marker,) = diff.deletion_marker_changes
    assert (marker.kind, marker.topic, marker.topic_exists_after) == (
        ChangeKind.DELETION_MARKER_APPEARED,
        "payments.v1-events",
        True,
    )
    assert stuck_partitions > 0
    assert not any(c.entity_name == "orders" for c in diff.config_changes)  # reported as the topic


def test_markers_cleared() -> None:
    cluster = healthy_cluster()
    cluster.stop_broker(5)
    cluster.delete_topic("payments.v1-events")
    cluster.delete_topic("orders")  # replicas on 5 too
    rows = cluster_rows(cluster)
    stuck = ClusterState.from_snapshot(rows)
    assert stuck.pending_deletions == {"orders", "payments.v1-events"}
    completed = [r for r in rows if "payments.v1-events" not in r.path]
    dropped = [r for r in completed if r.path != zk.delete_topic_path("orders")]
    diff = diff_states(stuck, ClusterState.from_snapshot(dropped))
    by_topic = {c.topic: c for c in diff.deletion_marker_changes}
    assert by_topic["payments.v1-events"].severity is Severity.INFO
    assert not by_topic["payments.v1-events"].topic_exists_after
    assert by_topic["orders"].topic_exists_after and by_topic["orders"].severity is Severity.WARNING
    (removed,) = diff.topic_changes
    assert removed.topic == "payments.v1-events" and "deletion completed" in removed.message


def test_reassignment_started_and_finished() -> None:
    cluster = healthy_cluster()
    current = tuple(cluster.topic("orders").partitions[0].replicas)
    target = (*current[1:], next(b for b in cluster.brokers if b not in current))
    before, after, _, _ = snapshots(cluster, lambda c: c.start_reassignment({("orders", 0): target}))
    diff = diff_states(before, after)
    (started,) = diff.reassignment_changes
    assert (started.kind, started.topic, started.partition) == (ChangeKind.REASSIGNMENT_STARTED, "orders", 0)
    assert started.replicas_before == current and set(started.replicas_after) == set(current) | set(target)
    (assignment,) = diff.assignment_changes
    assert assignment.before == current
    (finished,) = diff_states(after, before).reassignment_changes
    assert finished.kind is ChangeKind.REASSIGNMENT_FINISHED and finished.replicas_after == current


def test_an_unreadable_topic_is_not_reported_as_removed() -> None:
    cluster = healthy_cluster()
    rows = cluster_rows(cluster)
    broken = [dataclasses.replace(r, data=b"{") if r.path == "/brokers/topics/orders" else r for r in rows]
    diff = diff_states(ClusterState.from_snapshot(rows), ClusterState.from_snapshot(broken))
    (change,) = diff.topic_changes
    assert (change.kind, change.severity, change.topic) == (
        ChangeKind.TOPIC_UNREADABLE,
        Severity.CRITICAL,
        "orders",
    )
    assert diff.topic_id_changes == () and "/brokers/topics/orders" in change.message


def test_snapshots_of_different_clusters() -> None:
    one = ClusterState.from_snapshot(cluster_rows(healthy_cluster(seed=1)))
    other = ClusterState.from_snapshot(cluster_rows(healthy_cluster(seed=2)))
    diff = diff_states(one, other)
    assert diff.changes[0].kind is ChangeKind.CLUSTER_ID_CHANGED
    assert diff.changes[0].severity is Severity.CRITICAL


def test_swapped_snapshots_are_flagged() -> None:
    cluster = incident_cluster()
    before, after, _, _ = snapshots(cluster, lambda c: c.controller_failover())
    assert not diff_states(before, after).zxid_went_backwards
    swapped = diff_states(after, before)
    assert swapped.zxid_went_backwards
    assert "older" in swapped.describe().splitlines()[1]


# --------------------------------------------------------------------------------------------
# Summary and description
# --------------------------------------------------------------------------------------------


def test_summary_counts_match_the_records_and_describe_is_worst_first() -> None:
    cluster = incident_cluster()

    def busy_day(c: SimulatedCluster) -> None:
        c.topic("orders").config["retention.ms"] = "1000"
        c.stop_broker(5)
        c.controller_failover()

    diff = diff_after(cluster, busy_day)
    summary = diff.summary()
    for kind in ChangeKind:
        assert summary[kind.value] == len(diff.of_kind(kind))
    assert summary["total"] == len(diff.changes) == summary["critical"] + summary["warning"] + summary["info"]
    assert summary["topic_id_added"] == 1 and summary["broker_left"] == 1 and summary["config_changed"] == 1
    severities = [c.severity for c in diff.changes]
    assert severities == sorted(severities, reverse=True)
    lines = diff.describe().splitlines()
    assert lines[0].startswith(f"demo: {summary['total']} changes")
    assert [line.split()[0] for line in lines[1:4]] == ["CRITICAL", "WARNING", "INFO"]
    short = diff.describe(max_lines=1).splitlines()
    assert len(short) == 3 and short[2].startswith("... and ")


@pytest.mark.parametrize("max_lines", [0, 2])
def test_describe_never_drops_changes_silently(max_lines: int) -> None:
    cluster = incident_cluster()
    diff = diff_after(cluster, lambda c: (c.stop_broker(5), c.controller_failover()))
    text = diff.describe(max_lines=max_lines)
    listed = len(text.splitlines()) - 2
    rest = sum(int(part.split()[0]) for part in text.splitlines()[-1].removeprefix("... and ").split(", "))
    assert listed + rest == len(diff.changes)
