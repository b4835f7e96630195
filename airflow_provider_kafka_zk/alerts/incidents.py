"""What a run pages about: its incidents, each with a fingerprint that stays the same from one run to
the next, and whether it is new, worse or unchanged since what on-call was last told.

Pure (no Airflow, no I/O): the alert task feeds it the run's ``summary.json``, the deletion verdicts
and the failed tasks, and stores :func:`next_known` with the run's artefacts (``alert.json``) for the
next run. An incident is identified by its subject, never by its text: ``broker:3`` (the audit's
root cause), ``topic-id:clickstream``, ``deletion:old-logs`` (the audit's ``deletion-pending`` and the
``deletions`` task's verdict are one incident), ``task:inventory`` (a task that failed), else the
finding's check and subject.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_kafka_zk.kafka.findings import Severity, brokers_text

NEW, WORSE, UNCHANGED = "new", "worse", "unchanged"
AUDIT, DELETIONS, TASKS = "audit", "deletions", "tasks"
"""Where an incident comes from; a source that was not looked at in a run keeps its known incidents."""


@dataclass(frozen=True)
class Incident:
    """One thing a person must act on, as an alert shows it.

    :param key: its subject (``broker:3``, ``deletion:old-logs``, ``task:snapshot`` ...).
    :param source: :data:`AUDIT`, :data:`DELETIONS` or :data:`TASKS`.
    :param severity: ``critical`` ... ``info``.
    :param magnitude: how much it covers (findings it explains, brokers blocking, failed map
        indexes): more than last time is worse.
    :param link: a page that shows it (a failed task's log).
    """

    key: str
    source: str
    severity: str
    title: str
    summary: str
    action: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    commands: tuple[tuple[str, str], ...] = ()
    magnitude: int = 0
    link: str | None = None
    fingerprint: str = ""

    @property
    def rank(self) -> int:
        return int(Severity.parse(self.severity))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["facts"] = [{"label": k, "value": v} for k, v in self.facts]
        out["commands"] = [{"label": k, "command": v} for k, v in self.commands]
        return out


def fingerprint(cluster: str, key: str) -> str:
    """A stable id of an incident of a cluster (16 hex digits of a SHA-256)."""
    return hashlib.sha256(f"{cluster}\0{key}".encode()).hexdigest()[:16]


def _with_fingerprint(cluster: str, incident: Incident) -> Incident:
    return Incident(**{**incident.__dict__, "fingerprint": fingerprint(cluster, incident.key)})


def finding_key(item: Mapping[str, Any]) -> str:
    """The subject of a finding (a ``summary.json`` item): a pending deletion is ``deletion:<topic>``."""
    if item.get("check") == "deletion-pending" and item.get("topic"):
        return f"deletion:{item['topic']}"
    subject = [str(item[k]) for k in ("topic", "partition", "broker_id", "path") if item.get(k) is not None]
    return ":".join([str(item.get("check")), *subject])


def _subject(item: Mapping[str, Any]) -> tuple[Any, ...]:
    return (item.get("check"), item.get("topic"), item.get("partition"), item.get("broker_id"))


def audit_incidents(summary: Mapping[str, Any], threshold: str | Severity) -> list[Incident]:
    """The run's audit incidents at or above ``threshold``: every "act now" item (a root cause with
    what it explains), then each top finding that no root cause explains.

    :param summary: the audit's ``summary.json``.
    :param threshold: the gate's ``fail_on``.
    """
    floor = Severity.parse(threshold)
    out: dict[str, Incident] = {}
    carded = {_subject(item) for item in summary.get("act_now") or ()}
    for item in summary.get("act_now") or ():
        if Severity.parse(item["severity"]) < floor:
            continue
        key = item.get("incident") or finding_key(item)
        explains = list(item.get("explains") or ())
        facts = tuple((f["label"], str(f["value"])) for f in item.get("facts") or ())
        if explains:
            facts += (("explains", f"{len(explains)} other finding(s), which clear with it"),)
        out.setdefault(
            key,
            Incident(
                key=key,
                source=AUDIT,
                severity=item["severity"],
                title=item.get("title") or item["summary"],
                summary=item["summary"],
                action=item.get("action") or "",
                facts=facts,
                commands=tuple((c["label"], c["command"]) for c in item.get("commands") or ()),
                magnitude=len(explains),
            ),
        )
    for item in summary.get("top_findings") or ():
        if Severity.parse(item["severity"]) < floor or item.get("explained_by") or _subject(item) in carded:
            continue
        key = finding_key(item)
        out.setdefault(
            key,
            Incident(
                key=key,
                source=AUDIT,
                severity=item["severity"],
                title=f"{item['check']}: {item['summary']}",
                summary=item["summary"],
                action=item.get("action") or "",
            ),
        )
    return list(out.values())


def deletion_incidents(verdicts: Iterable[Mapping[str, Any]]) -> list[Incident]:
    """One incident per topic whose deletion is not done everywhere (the ``deletions`` task's verdicts).

    :param verdicts: the verdict dicts (``topic``, ``verdict``, ``causes``, ``evidence``,
        ``blocking_brokers``, ``leftover_dirs``).
    """
    out = []
    for v in verdicts:
        if v.get("verdict") == "DELETED":
            continue
        blocking = [int(b) for b in v.get("blocking_brokers") or ()]
        causes = [str(c) for c in v.get("causes") or ()]
        facts = [("verdict", str(v.get("verdict")))]
        if causes:
            facts.append(("cause", ", ".join(causes)))
        if blocking:
            facts.append(("blocked by", brokers_text(blocking)))
        leftovers = v.get("leftover_dirs") or ()
        if leftovers:
            facts.append(("leftover directories", str(len(leftovers))))
        out.append(
            Incident(
                key=f"deletion:{v['topic']}",
                source=DELETIONS,
                severity="error",
                title=f"Deletion of topic {v['topic']} is not done ({str(v.get('verdict')).lower()})",
                summary="; ".join(str(e) for e in v.get("evidence") or ()) or ", ".join(causes),
                facts=tuple(facts),
                magnitude=len(blocking),
            )
        )
    return out


def task_incidents(failed: Mapping[str, Sequence[int]], log_urls: Mapping[str, str]) -> list[Incident]:
    """One incident per task that failed (its mapped instances together).

    :param failed: task id -> the failed map indexes (``[-1]`` for an unmapped task).
    :param log_urls: task id -> the URL of its log in Airflow.
    """
    out = []
    for task_id, indexes in sorted(failed.items()):
        mapped = [i for i in indexes if i >= 0]
        what = f"{len(mapped)} mapped instance(s) of task {task_id}" if mapped else f"task {task_id}"
        out.append(
            Incident(
                key=f"task:{task_id}",
                source=TASKS,
                severity="error",
                title=f"{what} failed",
                summary=f"{what} failed after its retries; its log says why.",
                action="Open the task's log, fix the cause, then clear the task to run it again.",
                magnitude=len(mapped),
                link=log_urls.get(task_id),
            )
        )
    return out


def merge(cluster: str, *groups: Iterable[Incident]) -> list[Incident]:
    """Every incident once (the worst of one subject wins), fingerprinted, worst first; within a
    severity in the order given (the audit's triage order first: its "what to do" says "card above")."""
    by_key: dict[str, Incident] = {}
    for incident in (i for group in groups for i in group):
        held = by_key.get(incident.key)
        if held is None or (incident.rank, incident.magnitude) > (held.rank, held.magnitude):
            by_key[incident.key] = incident
    ordered = sorted(by_key.values(), key=lambda i: -i.rank)  # stable
    return [_with_fingerprint(cluster, i) for i in ordered]


@dataclass(frozen=True)
class Classified:
    """An incident and what it is to on-call: :data:`NEW`, :data:`WORSE` or :data:`UNCHANGED`."""

    incident: Incident
    status: str
    since: str | None = None  # when it was first told (unchanged and worse ones)


@dataclass
class Decision:
    """What a run's alert does."""

    classified: list[Classified]
    resolved: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pages(self) -> list[Classified]:
        return [c for c in self.classified if c.status in (NEW, WORSE)]


def classify(
    incidents: Sequence[Incident], known: Mapping[str, Mapping[str, Any]], observed: Iterable[str]
) -> Decision:
    """Each incident against ``known`` (what on-call was last told, per fingerprint); the known ones
    of an ``observed`` source that are gone now are ``resolved``.

    :param incidents: the run's incidents (:func:`merge`).
    :param known: the previous run's :func:`next_known`.
    :param observed: the sources this run looked at.
    """
    seen = set(observed)
    out = []
    for incident in incidents:
        before = known.get(incident.fingerprint)
        if before is None:
            out.append(Classified(incident, NEW))
        elif (incident.rank, incident.magnitude) > (int(before["rank"]), int(before.get("magnitude", 0))):
            out.append(Classified(incident, WORSE, before.get("since")))
        else:
            out.append(Classified(incident, UNCHANGED, before.get("since")))
    current = {i.fingerprint for i in incidents}
    resolved = [
        {"fingerprint": fp, **dict(entry)}
        for fp, entry in known.items()
        if fp not in current and entry.get("source") in seen
    ]
    return Decision(out, resolved)


def next_known(
    known: Mapping[str, Mapping[str, Any]],
    decision: Decision,
    observed: Iterable[str],
    *,
    delivered: bool,
    now: str,
) -> dict[str, dict[str, Any]]:
    """What on-call knows after this run, for the next run's :func:`classify`.

    Known incidents of a source this run did not look at are kept as they were (a failed audit does
    not resolve its incidents); an incident that was to page but was not delivered keeps its earlier
    state, so the next run pages it again.

    :param known: the previous run's.
    :param decision: this run's :func:`classify`.
    :param observed: the sources this run looked at.
    :param delivered: whether this run's page reached every channel.
    :param now: this run's time (ISO 8601), recorded as ``since`` of a new incident.
    """
    seen = set(observed)
    out = {fp: dict(entry) for fp, entry in known.items() if entry.get("source") not in seen}
    for c in decision.classified:
        i = c.incident
        if c.status in (NEW, WORSE) and not delivered:
            if i.fingerprint in known:
                out[i.fingerprint] = dict(known[i.fingerprint])
            continue
        out[i.fingerprint] = {
            "key": i.key,
            "source": i.source,
            "title": i.title,
            "severity": i.severity,
            "rank": i.rank,
            "magnitude": i.magnitude,
            "since": c.since or now,
        }
    return out
