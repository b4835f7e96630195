"""The figures a dashboard follows, from one audit: pure (no Airflow, no I/O).

The audit's findings already carry every number (each rule wrote it into its evidence); this module
adds them up per broker and per cluster so a trend can be drawn: RF=1 exposure per broker, topics
with topic-id trouble, pending deletions and the oldest one's age, leftover bytes on disk, brokers
down. The audit writes the result into ``summary.json`` (``figures``) for the daily run's metrics
(:mod:`airflow_provider_kafka_zk.metrics`) to publish.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from .findings import Finding

TOPIC_ID_TROUBLE_CHECKS = frozenset(
    {
        "topic-id-mismatch",
        "topic-id-missing-in-zookeeper",
        "topic-id-replicas-disagree",
        "topic-id-changed-since-previous",
        "topic-id-lost-since-previous",
        "partition-metadata-missing",
        "partition-metadata-unreadable",
    }
)
"""Checks that mean a topic's id is in trouble (KAFKA-14190 and its precursors)."""

LEFTOVER_CHECKS = frozenset({"delete-dirs-past-delay", "orphan-partition-dirs", "stray-dirs"})
"""Checks of directories on a broker's disk that hold no live replica (their ``bytes`` evidence)."""


def audit_figures(
    findings: Iterable[Finding],
    *,
    pending_deletions: Iterable[str],
    deletion_marker_ctimes: Mapping[str, int],
    now_ms: int,
) -> dict[str, Any]:
    """What the daily metrics publish about one audit (JSON-safe; broker ids as text keys).

    :param findings: the audit's findings.
    :param pending_deletions: topics with a ``/admin/delete_topics`` marker.
    :param deletion_marker_ctimes: topic -> its marker's ctime (ms), for the oldest deletion's age.
    :param now_ms: the audit's clock (the snapshot's time), in ms.
    """
    rf1: dict[str, dict[str, int | None]] = {}
    trouble: set[str] = set()
    leftover: dict[str, int] = defaultdict(int)
    down: set[int] = set()
    for f in findings:
        if f.check == "rf1-exposure-broker" and f.broker_id is not None:
            size = f.evidence.get("bytes")
            rf1[str(f.broker_id)] = {
                "partitions": int(f.evidence.get("partitions") or 0),
                "bytes": None if size is None else int(size),
            }
        elif f.check in TOPIC_ID_TROUBLE_CHECKS and f.topic:
            trouble.add(f.topic)
        elif f.check in LEFTOVER_CHECKS and f.broker_id is not None:
            leftover[str(f.broker_id)] += int(f.evidence.get("bytes") or 0)
        elif f.check == "broker-down" and f.broker_id is not None:
            down.add(f.broker_id)
    pending = sorted(set(pending_deletions))
    ages = [max(0, now_ms - deletion_marker_ctimes[t]) for t in pending if t in deletion_marker_ctimes]
    return {
        "rf1_exposure": dict(sorted(rf1.items(), key=lambda kv: int(kv[0]))),
        "topic_id_trouble_topics": len(trouble),
        "pending_deletions": len(pending),
        "oldest_pending_deletion_age_s": max(ages) / 1000 if ages else 0.0,
        "leftover_bytes": dict(sorted(leftover.items(), key=lambda kv: int(kv[0]))),
        "brokers_down": len(down),
    }
