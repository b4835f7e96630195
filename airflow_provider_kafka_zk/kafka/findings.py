"""What every audit rule returns: a finding with a stable check id, a severity, a subject, the evidence
and what to do. Plain data, so Spark executors, Parquet files, reports and Airflow gates share it."""

from __future__ import annotations

import enum
import json
import shlex
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


class Severity(enum.IntEnum):
    INFO = 10
    WARNING = 20
    ERROR = 30
    CRITICAL = 40

    @classmethod
    def parse(cls, text: str | Severity) -> Severity:
        if isinstance(text, Severity):
            return text
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            raise ValueError(
                f"severity must be one of {[s.name.lower() for s in cls]}, not {text!r}"
            ) from None


@dataclass(frozen=True)
class Finding:
    """One thing an on-call engineer should know. ``check`` ids are stable (dashboards, silences)."""

    check: str
    severity: Severity
    cluster: str
    summary: str
    action: str = ""
    topic: str | None = None
    partition: int | None = None
    broker_id: int | None = None
    path: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """A flat dict for Parquet/JSON: severity by name, evidence as a JSON-able dict."""
        row = asdict(self)
        row["severity"] = self.severity.name.lower()
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Finding:
        return cls(
            **{
                **row,
                "severity": Severity.parse(row["severity"]),
                "evidence": dict(row.get("evidence") or {}),
            }
        )


def brokers_text(brokers: Iterable[int]) -> str:
    """``broker 3``, ``brokers 3 and 4``, ``brokers 1, 3 and 4`` (findings and reports name brokers alike)."""
    ids = [str(b) for b in sorted(set(brokers))]
    if len(ids) == 1:
        return f"broker {ids[0]}"
    return f"brokers {', '.join(ids[:-1])} and {ids[-1]}" if ids else "no broker"


APPROVAL_STEP = (
    "the real run waits in its approve task until a person approves the exact plan it shows (the run's "
    "Required Actions in the Airflow UI, or the REST API)"
)
"""What every "What to do" that prints a real run of a mutating DAG adds (issue 25)."""


def trigger_command(dag_id: str, conf: Mapping[str, Any]) -> str:
    """The ``airflow dags trigger`` command line for one of this provider's manual DAGs (conf shell-quoted)."""
    return f"airflow dags trigger {dag_id} --conf {shlex.quote(json.dumps(dict(conf)))}"


def count_by_check_and_severity(findings: Iterable[Finding]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {}
    for f in findings:
        counts.setdefault(f.check, Counter())[f.severity.name.lower()] += 1
    return {check: dict(c) for check, c in sorted(counts.items())}


BROKER_ROOT_CHECK = "broker-down"
TOPIC_ID_ROOT_CHECKS = frozenset({"topic-id-mismatch", "topic-id-missing-in-zookeeper"})
ROOT_CAUSE_CHECKS = frozenset({BROKER_ROOT_CHECK, *TOPIC_ID_ROOT_CHECKS})
"""Checks whose finding opens an incident that explains others: a stopped broker, a topic's topicId."""

TOPIC_ID_FOLLOWER_CHECKS = frozenset(
    {"topic-id-replicas-disagree", "topic-id-changed-since-previous", "topic-id-lost-since-previous"}
)
"""Topic-level symptoms of the same topicId incident: the topic's repair clears them."""

CHECK_URGENCY: tuple[str, ...] = (
    # broken now: nothing is elected, data is unreachable, producers fail
    "no-controller",
    "broker-down",
    "offline-partitions",
    "under-min-isr",
    # broken at the next leader/ISR change or controller failover (KAFKA-14190)
    "topic-id-mismatch",
    "topic-id-replicas-disagree",
    "topic-id-missing-in-zookeeper",
    "topic-id-lost-since-previous",
    "topic-id-changed-since-previous",
    "partition-metadata-unreadable",
    "znode-undecodable",
    # redundancy already lost, or lost at the next planned stop
    "rf1-exposure-broker",
    "under-replicated",
    "assigned-replica-missing-dir",
    "deletion-pending",
    "reassignment-stale",
    "inventory-coverage-partial",
    # hygiene
    "throttle-left-set",
    "preferred-leader-imbalance",
    "deletion-half-done",
    "orphan-partition-dirs",
    "delete-dirs-past-delay",
    "stray-dirs",
    "replica-dir-not-assigned",
    "partition-metadata-missing",
    "rf1-exposure",
    "topic-id-resolved-since-previous",
    "kraft-readiness",
)
_URGENCY = {check: rank for rank, check in enumerate(CHECK_URGENCY)}


def incident_of(finding: Finding) -> str | None:
    """The incident a root-cause finding opens (``broker:3``, ``topic-id:clickstream``), else None."""
    if finding.check == BROKER_ROOT_CHECK and finding.broker_id is not None:
        return f"broker:{finding.broker_id}"
    if finding.check in TOPIC_ID_ROOT_CHECKS and finding.topic:
        return f"topic-id:{finding.topic}"
    return None


def caused_by(finding: Finding) -> tuple[int, ...]:
    """The stopped/unregistered brokers whose return fixes this finding (empty: not explained by one).

    The rules write them into ``evidence["down_brokers"]``; nothing here parses a summary.
    """
    if finding.check in ROOT_CAUSE_CHECKS:
        return ()
    return tuple(int(b) for b in finding.evidence.get("down_brokers") or ())


def explained_by(finding: Finding, incidents: Collection[str] | None = None) -> tuple[str, ...]:
    """The incidents (:func:`incident_of`) whose fix clears this finding.

    ``incidents``: the ones the run has (a topic-level topicId symptom is only explained when the
    topic's root finding exists); None accepts every candidate.
    """
    if finding.check in ROOT_CAUSE_CHECKS:
        return ()
    keys = [f"broker:{b}" for b in caused_by(finding)]
    if finding.check in TOPIC_ID_FOLLOWER_CHECKS and finding.topic:
        keys.append(f"topic-id:{finding.topic}")
    return tuple(k for k in keys if incidents is None or k in incidents)


def triage_order(findings: Iterable[Finding]) -> list[Finding]:
    """The order an on-call engineer acts in (report, ``findings.parquet``, summary, the gate).

    1. Root causes first (a stopped broker, a topic's topicId incident), worst first: one action
       there (start the broker, write the id back) clears the rows it explains. A root cause another
       one must wait for (``evidence["act_after"]``) leads them all.
    2. Then by severity, worst first.
    3. Within a severity, findings no root cause of this run explains come before the ones one
       does: each of them needs an action of its own, while the explained ones go with theirs.
    4. Then by urgency (:data:`CHECK_URGENCY`): what is broken now (no controller, offline
       partitions, failing acks=all producers) before what breaks at the next leader change or
       controller failover (KAFKA-14190), before lost redundancy, before hygiene.
    5. Then by check, topic, partition and broker, so the order is stable run to run.
    """
    items = list(findings)
    incidents = {key for f in items if (key := incident_of(f)) is not None}
    # incidents another root cause must wait for (evidence["act_after"]): a broker holding replicas of
    # a topic whose topicId is wrong is started after that topic's repair, so the repair comes first
    first = {key for f in items for key in f.evidence.get("act_after") or () if key in incidents}
    return sorted(
        items,
        key=lambda f: (
            f.check not in ROOT_CAUSE_CHECKS,
            incident_of(f) not in first,
            -f.severity,
            bool(explained_by(f, incidents)),
            _URGENCY.get(f.check, len(_URGENCY)),
            f.check,
            f.topic or "",
            f.partition if f.partition is not None else -1,
            f.broker_id if f.broker_id is not None else -1,
        ),
    )
