"""What the daily audit must find on a simulated cluster, derived from the model alone.

The planted incidents (``SimulatedCluster.incidents``) name what a step broke on purpose; a few
findings follow from them by Kafka's own rules (a stopped broker leaves partitions
under-replicated; an RF=1 partition goes offline with its broker). :func:`expected_findings`
lists both, per check, as ``(topic, broker_id)`` subjects, so a test can assert that an audit
found exactly these and nothing else. :func:`found` puts real findings in the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_kafka_zk.kafka.findings import Finding
from airflow_provider_kafka_zk.kafka.logdir import DirKind

from .cluster import SimulatedCluster

Subject = tuple[str | None, int | None]

TOPIC_LEVEL_CHECKS = frozenset({"under-replicated", "under-min-isr", "topic-id-mismatch"})
"""Checks compared by topic only (which broker a finding names depends on wording, not on data)."""

OPTIONAL_CHECKS = frozenset({"delete-dirs-past-delay"})
"""Findings that depend on wall-clock age: a ``-delete`` directory's age runs from its ctime, the
deploy time on a real file system, so it may not be past the delay yet when the audit runs."""


def expected_findings(
    cluster: SimulatedCluster, inventoried: Iterable[int] | None = None
) -> dict[str, set[Subject]]:
    """The audit findings the cluster's state calls for, per check.

    :param cluster: the simulated cluster as deployed.
    :param inventoried: the brokers whose disks the audit read (default: every broker).
    """
    read = set(cluster.brokers) if inventoried is None else set(inventoried)
    out: dict[str, set[Subject]] = {}

    def add(check: str, topic: str | None, broker: int | None) -> None:
        out.setdefault(check, set()).add((topic, broker))

    stopped = {b for b, m in cluster.brokers.items() if not m.online}
    for b in stopped:
        add("broker-down", None, b)
    for i in cluster.incidents:
        if i.kind == "offline_partitions":
            add("offline-partitions", i.topic, i.broker_id)
        elif i.kind == "deletion_stuck":
            add("deletion-pending", i.topic, i.broker_id)
        elif i.kind == "leftover_dirs" and i.broker_id in read:
            add(
                "orphan-partition-dirs" if i.detail == "normal" else "delete-dirs-past-delay",
                i.topic,
                i.broker_id,
            )
        elif i.kind == "leader_imbalance":
            add("preferred-leader-imbalance", None, i.broker_id)
        elif i.kind == "topic_id_mismatch":
            add("topic-id-mismatch", i.topic, None)
        elif i.kind == "topic_id_missing_in_zookeeper":
            add("topic-id-missing-in-zookeeper", i.topic, None)

    default_min_isr = cluster.spec.min_insync_replicas
    for topic in cluster.topics.values():
        if topic.name in cluster.delete_markers:
            continue  # its rules are the deletion's
        min_isr = int(topic.config.get("min.insync.replicas", default_min_isr))
        for part in topic.partitions.values():
            target = [r for r in part.replicas if r not in part.removing]
            if len(part.isr) < len(target):
                add("under-replicated", topic.name, None)
            if len(target) < min_isr or (part.leader != -1 and len(part.isr) < min_isr):
                add("under-min-isr", topic.name, None)
            if len(part.replicas) == 1:
                add("rf1-exposure", topic.name, part.replicas[0])
                add("rf1-exposure-broker", None, part.replicas[0])

    if cluster.uses_topic_ids:
        missing_files = False
        for topic in cluster.topics.values():
            dirs = [d for d in cluster.replica_dirs(topic.name) if d.broker_id in read]
            ids = {d.topic_id for d in dirs if d.topic_id is not None}
            if len(ids) > 1:
                add("topic-id-replicas-disagree", topic.name, None)
            if any(d.topic_id is None for d in dirs):
                add("partition-metadata-missing", topic.name, None)
                missing_files = True
        if any(t.zk_topic_id is None for t in cluster.topics.values()):
            add("kraft-readiness", "topic_id", None)
        if missing_files:
            add("kraft-readiness", "partition.metadata", None)
    return out


def found(findings: Iterable[Finding]) -> dict[str, set[Subject]]:
    """Findings in the shape of :func:`expected_findings` (topic-level checks without their broker)."""
    out: dict[str, set[Subject]] = {}
    for f in findings:
        if f.check == "kraft-readiness":
            subject: Subject = ("topic_id" if "topic_id" in f.summary else "partition.metadata", None)
        elif f.check in TOPIC_LEVEL_CHECKS:
            subject = (f.topic, None)
        else:
            subject = (f.topic, f.broker_id)
        out.setdefault(f.check, set()).add(subject)
    return out


def unexpected(expected: dict[str, set[Subject]], actual: dict[str, set[Subject]]) -> dict[str, object]:
    """The differences, per check (empty when the audit found exactly what was planted)."""
    diff: dict[str, object] = {}
    for check in sorted(set(expected) | set(actual)):
        want, got = expected.get(check, set()), actual.get(check, set())
        if check in OPTIONAL_CHECKS and not got:
            continue
        if want != got:
            diff[check] = {"missing": sorted(want - got, key=str), "unexpected": sorted(got - want, key=str)}
    return diff


def dirs_of_kind(cluster: SimulatedCluster, kind: DirKind) -> list[tuple[int, str, int]]:
    """(broker, topic, partition) of every directory of ``kind`` (for tests of the disk side)."""
    return sorted((d.broker_id, d.topic, d.partition) for d in cluster.dirs if d.kind is kind)
