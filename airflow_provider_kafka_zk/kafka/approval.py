"""Approving the exact plan: what a person is shown, what the approval binds, and the decision record.

A real run of a mutating DAG stops between its plan and its first write until a person approves
(issue 25). What they approve is one hash, the **plan hash**: sha256 over a small canonical
manifest (:func:`plan_digest`) of

* the bytes of the plan artefacts the execute steps act on -- :data:`PLAN_INPUTS`, ``plan.json``
  (the batches / steps the execution carries out, the cluster identity it pins, the read it checks)
  and ``rollback.json`` (what the drain's execution checks before its first write, and the undo the
  approval shows for every plan kind) -- each by its own sha256;
* the execution settings that decide what those steps write but live outside the files (the
  throttle rate, the restart command, the connection of the cluster ...): per writing task, the
  values its templates render to in that run.

Not in it: what only describes (``summary.txt``, ``reassignment.json``), and what the execution
writes itself (``throttles.json``, ``progress.json``, change logs), so a resumed execute step still
matches. The execute step recomputes the manifest before any I/O on the cluster and refuses when it
differs from the approved one, naming what changed.

Pure: no Airflow, no I/O. The Airflow side is :mod:`airflow_provider_kafka_zk.operators.approval`.
"""

from __future__ import annotations

import enum
import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .drain import human_bytes
from .reassignment import FOLLOWER_REPLICAS, LEADER_REPLICAS, plan_throttles
from .znodes import TopicAssignment

APPROVAL_FILE = "approval.json"
"""The decision record, beside the plan."""
APPROVAL_FORMAT = "kafka-zk-plan-approval"
MANIFEST_FORMAT = "kafka-zk-plan-manifest"
CHANGE_LOG_FORMAT = "kafka-zk-change-log"
"""The format of ``changes-<task>-<try>.json`` (the maintenance session's change log)."""
PLAN_INPUTS: tuple[str, ...] = ("plan.json", "rollback.json")
"""The plan artefacts the plan hash covers (see the module docstring for why these)."""

APPROVE = "Approve"
REJECT = "Reject"


class Decision(enum.StrEnum):
    """What the approval step decided (``approval.json``'s ``decision``)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed_out"
    NOT_NEEDED = "not_needed"  # a dry run: nothing will be written
    NOT_REQUIRED = "not_required"  # the cluster file says require_approval = false

    @property
    def lets_writes_run(self) -> bool:
        """Whether a real run may write after this decision."""
        return self in (Decision.APPROVED, Decision.NOT_REQUIRED)


# ---------------------------------------------------------------------------------------------
# The plan hash
# ---------------------------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
    """A setting as the manifest holds it: numbers by value (52428800 == 52428800.0), empty
    template renderings (``""``, ``"None"``) as None, containers recursively, the rest as text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        number = float(value)
        return int(number) if number.is_integer() else number
    if isinstance(value, str):
        text = value.strip()
        return None if text in ("", "None") else text
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_canonical(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    return str(value)


@dataclass(frozen=True)
class PlanDigest:
    """The plan hash and what it is made of.

    :param sha256: the plan hash (hex).
    :param files: artefact name -> sha256 of its bytes (None: the artefact does not exist).
    :param settings: writing task id -> {setting: canonical value}.
    """

    sha256: str
    files: Mapping[str, str | None]
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "sha256": self.sha256,
            "files": dict(self.files),
            "settings": {t: dict(s) for t, s in self.settings.items()},
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> PlanDigest:
        return cls(str(record["sha256"]), dict(record["files"]), dict(record.get("settings") or {}))


def plan_digest(
    files: Mapping[str, bytes | None], settings: Mapping[str, Mapping[str, Any]] | None = None
) -> PlanDigest:
    """The plan hash of the plan artefacts' bytes and the writing tasks' settings.

    :param files: artefact name -> its bytes (None: missing; a missing artefact is part of the hash).
    :param settings: writing task id -> {setting name: rendered value}.
    """
    per_file = {
        name: None if data is None else hashlib.sha256(data).hexdigest() for name, data in files.items()
    }
    canonical = {str(t): _canonical(dict(s)) for t, s in (settings or {}).items()}
    manifest = {"format": MANIFEST_FORMAT, "version": 1, "files": per_file, "settings": canonical}
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return PlanDigest(hashlib.sha256(text.encode()).hexdigest(), per_file, canonical)


def digest_differences(approved: PlanDigest, now: PlanDigest, task_id: str | None = None) -> list[str]:
    """What differs between the approved manifest and the one computed now (empty: the same plan).

    :param approved: the digest the person approved.
    :param now: the digest of the artefacts and settings as the execute step sees them.
    :param task_id: compare only this writing task's settings (None: every task's).
    """
    problems = []
    for name in sorted(set(approved.files) | set(now.files)):
        before, after = approved.files.get(name), now.files.get(name)
        if before != after:
            if after is None:
                problems.append(f"{name} is gone (approved sha256 {before})")
            elif before is None:
                problems.append(f"{name} appeared after the approval (sha256 {after})")
            else:
                problems.append(f"{name} changed: approved sha256 {before}, now {after}")
    tasks = [task_id] if task_id is not None else sorted(set(approved.settings) | set(now.settings))
    for task in tasks:
        before_s, after_s = dict(approved.settings.get(task) or {}), dict(now.settings.get(task) or {})
        for key in sorted(set(before_s) | set(after_s)):
            if _canonical(before_s.get(key)) != _canonical(after_s.get(key)):
                problems.append(
                    f"task {task}'s {key} is {after_s.get(key)!r}, the approved plan had {before_s.get(key)!r}"
                )
    if not problems and task_id is None and approved.sha256 != now.sha256:
        problems.append(f"the plan hash is {now.sha256}, the approved one {approved.sha256}")
    return problems


# ---------------------------------------------------------------------------------------------
# What the person is shown
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanSummary:
    """The approval's text: a headline (root cause first) and Markdown sections, in reading order.

    :param kind: ``drain`` | ``post-maintenance`` | ``topic-id-repair`` | ``deletion-cleanup``.
    :param headline: one line: what will change and why.
    :param sections: (title, lines) in order: what changes, ZooKeeper writes, broker files, broker
        restarts, throttles, expected duration, rollback and undo.
    """

    kind: str
    headline: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]

    def markdown(self, digest: PlanDigest, plan_dir: str, *, decision_note: str = "") -> str:
        """The approval page's body: the summary, then the plan hash and what it covers."""
        out = [f"**{self.headline}**", ""]
        if decision_note:
            out += [decision_note, ""]
        for title, lines in self.sections:
            out.append(f"### {title}")
            out += [f"- {line}" for line in lines] or ["- none"]
            out.append("")
        out.append("### Plan hash")
        out.append(f"- sha256 `{digest.sha256}`")
        for name, sha in digest.files.items():
            out.append(f"- `{name}`: {'missing' if sha is None else sha}")
        for task, values in digest.settings.items():
            shown = ", ".join(f"{k}={v!r}" for k, v in values.items()) or "none"
            out.append(f"- task `{task}` settings: {shown}")
        out.append(f"- plan folder: `{plan_dir}`")
        out.append("")
        out.append(
            "The execute step recomputes this hash before it touches the cluster and refuses if anything "
            "differs; its own checks refuse if the cluster changed since the plan."
        )
        return "\n".join(out) + "\n"

    def text(self) -> str:
        """The same summary as plain text (logs, ``report.txt``)."""
        out = [self.headline]
        for title, lines in self.sections:
            out.append(f"{title}:")
            out += [f"  - {line}" for line in lines] or ["  - none"]
        return "\n".join(out) + "\n"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _moves(batches: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    return [m for batch in batches for m in batch]


def batch_throttles(
    batch: Sequence[Mapping[str, Any]], rate: int
) -> tuple[dict[str, dict[str, str]], list[int]]:
    """(topic -> throttle config, brokers given the rate) that submitting ``batch`` writes, computed
    by the execution's own rule (:func:`~.reassignment.plan_throttles`) from the plan's current
    replicas (the execute step computes them from the topic znodes it reads then, which must match
    the plan or it refuses)."""
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    targets = {}
    for m in batch:
        topics.setdefault(str(m["topic"]), {})[int(m["partition"])] = tuple(int(b) for b in m["current"])
        targets[(str(m["topic"]), int(m["partition"]))] = [int(b) for b in m["target"]]
    assignments = {t: TopicAssignment(t, p) for t, p in topics.items()}  # type: ignore[arg-type]
    plan = plan_throttles(targets, assignments, rate)
    return plan.topic_configs(), list(plan.broker_rates)


def batch_seconds_at_rate(batch: Sequence[Mapping[str, Any]], rate: int) -> float:
    """A lower bound of one batch's copy time: the bytes the busiest broker must receive (each new
    replica is fetched by its destination under the follower throttle) or send (its current leader,
    the first replica, serves them under the leader throttle), at ``rate`` bytes/s per broker."""
    received: dict[int, int] = {}
    sent: dict[int, int] = {}
    for m in batch:
        size = int(m.get("size_bytes") or 0)
        current = [int(b) for b in m["current"]]
        new = [int(b) for b in m["target"] if int(b) not in current]
        for b in new:
            received[b] = received.get(b, 0) + size
        if new and current:
            sent[current[0]] = sent.get(current[0], 0) + size * len(new)
    busiest = max([*received.values(), *sent.values(), 0])
    return busiest / rate if rate > 0 else 0.0


def reassignment_summary(
    plan: Mapping[str, Any],
    rollback: Mapping[str, Any] | None,
    *,
    plan_dir: str,
    throttle_bytes_per_sec: int | None,
    batch_timeout_s: float | None,
    zookeeper: str,
    undo_command: str | None = None,
) -> PlanSummary:
    """The approval summary of a drain plan or a post-maintenance move-back (a drain-shaped plan).

    :param plan: ``plan.json``.
    :param rollback: ``rollback.json`` (None: missing -- said, and the execute step refuses).
    :param plan_dir: the plan's folder (the rollback path is named under it).
    :param throttle_bytes_per_sec: the execution's throttle (None: unknown).
    :param batch_timeout_s: how long a batch may take before the run stops.
    :param zookeeper: the cluster's ZooKeeper as commands name it (``host:port/chroot``).
    :param undo_command: the ``kafka_zk_undo`` trigger that undoes this run (None: not known).
    """
    post = plan.get("kind") == "post-maintenance"
    batches = [list(b) for b in plan.get("batches") or []]
    moves = _moves(batches)
    brokers = list(plan.get("request", {}).get("brokers") or [])
    size = sum(int(m.get("size_bytes") or 0) for m in moves)
    topics = sorted({str(m["topic"]) for m in moves})
    rate = int(throttle_bytes_per_sec or 0)
    if post:
        restores = plan.get("restores_run_id") or plan.get("restores") or "no drain run"
        headline = (
            f"Put cluster {plan['cluster']} back after maintenance of brokers {brokers}: move {len(moves)} "
            f"partition(s) of {len(topics)} topic(s) back where drain {restores} took them from, then elect "
            "their preferred leaders"
        )
    else:
        rf1 = plan.get("request", {}).get("scope") == "rf1"
        why = (
            "they go offline when the broker stops (replication factor 1)"
            if rf1
            else "every replica moves off"
        )
        headline = (
            f"Drain brokers {brokers} of cluster {plan['cluster']} before they stop: {len(moves)} partition(s) "
            f"of {len(topics)} topic(s), {human_bytes(size)}, move to other brokers ({why})"
        )
    change = [
        f"{m['topic']}-{m['partition']}: replicas {list(m['current'])} -> {list(m['target'])} "
        f"({human_bytes(int(m.get('size_bytes') or 0))})"
        for m in moves[:60]
    ]
    if len(moves) > 60:
        change.append(f"... and {len(moves) - 60} more (plan.json lists every move)")
    for key, label in (
        ("unmovable", "left where it is (cannot move)"),
        ("unsatisfiable", "left (no destination)"),
    ):
        for item in (plan.get(key) or [])[:10]:
            change.append(f"{label}: {item.get('topic')}-{item.get('partition')}: {item.get('reason')}")
    if post:
        back = plan.get("move_back") or {}
        for u in (back.get("untouched") or [])[:10]:
            change.append(f"left alone (moved since the drain): {u}")
        preview = plan.get("election_preview") or {}
        change.append(
            f"preferred leader election for brokers {preview.get('brokers', brokers)}: "
            f"{len(preview.get('electable_now') or [])} partition(s) electable now (recomputed after the move-back)"
        )
    writes: list[str] = []
    throttles: list[str] = []
    total_s = 0.0
    for n, batch in enumerate(batches, 1):
        topic_configs, rated = batch_throttles(batch, rate) if rate > 0 else ({}, [])
        writes.append(
            f"batch {n}/{len(batches)}: set {', '.join(f'/config/topics/{t}' for t in topic_configs) or 'no topic config'}"
            f" and {', '.join(f'/config/brokers/{b}' for b in rated) or 'no broker config'} "
            f"(each a versioned write plus a /config/changes/config_change_ notification), then create "
            f"/admin/reassign_partitions with {len(batch)} partition(s)"
        )
        for topic, config in topic_configs.items():
            throttles.append(
                f"batch {n}: /config/topics/{topic}: {LEADER_REPLICAS}={config.get(LEADER_REPLICAS, '')}, "
                f"{FOLLOWER_REPLICAS}={config.get(FOLLOWER_REPLICAS, '')}"
            )
        if rated:
            throttles.append(
                f"batch {n}: brokers {rated}: leader and follower replication throttle {human_bytes(rate)}/s"
            )
        total_s += batch_seconds_at_rate(batch, rate)
    if batches:
        writes.append(
            "after the last batch: remove exactly the throttle values this run set (throttles.json)"
        )
    if post:
        writes.append(
            "after the move-back: create /admin/preferred_replica_election for the returning brokers' "
            "partitions whose preferred replica can lead (the controller deletes it)"
        )
    if rate <= 0:
        throttles.append("throttle rate unknown")
    duration = [
        f"{'at least ' if total_s >= 1 else ''}{_duration(total_s)} of copying at {human_bytes(rate)}/s per broker "
        f"({human_bytes(size)} in {len(batches)} batch(es); the busiest broker of each batch sets its pace)"
        if rate > 0
        else "unknown (no throttle rate)",
    ]
    if plan.get("unknown_sizes"):
        duration.append(
            f"{plan['unknown_sizes']} partition(s) have no size in the inventory: counted as 0 bytes"
        )
    if batch_timeout_s:
        duration.append(
            f"a batch running longer than {_duration(float(batch_timeout_s))} stops the run (it resumes)"
        )
    undo = [
        f"{plan_dir.rstrip('/')}/rollback.json holds every moved partition's replicas before this run "
        f"({len((rollback or {}).get('partitions') or [])} partition(s))"
        if rollback is not None
        else "rollback.json is MISSING: the execute step will refuse",
        *(
            [f"undo: {undo_command} (dry run first; it checks every partition and waits for approval)"]
            if undo_command
            else []
        ),
        "by hand, only if the undo DAG cannot run (no TLS/SASL client options): kafka-reassign-partitions "
        "--bootstrap-server BROKER_HOST:9092 --execute --reassignment-json-file rollback.json (then remove its "
        f"throttles: kafka-configs --delete-config {LEADER_REPLICAS},{FOLLOWER_REPLICAS} per topic, the rates per broker)",
        f"ZooKeeper: {zookeeper}; the run's changes-*.json list every write it made",
    ]
    if post:
        undo.append(
            "a preferred leader election is not undone; a later election or failover moves leadership again"
        )
    return PlanSummary(
        "post-maintenance" if post else "drain",
        headline,
        (
            ("What will change", tuple(change)),
            ("ZooKeeper writes, in order", tuple(writes)),
            ("Broker files removed", ("none: Kafka moves the replicas' data itself",)),
            ("Brokers restarted", ("none: this run restarts no broker",)),
            ("Throttles", tuple(throttles)),
            ("Expected duration", tuple(duration)),
            ("Rollback and how to undo", tuple(undo)),
        ),
    )


def repair_summary(
    plan: Mapping[str, Any],
    rollback: Mapping[str, Any] | None,
    *,
    plan_dir: str,
    restart_command: str | None,
    health_timeout_s: float | None,
    gate_timeout_s: float | None,
    undo_command: str | None = None,
) -> PlanSummary:
    """The approval summary of a topicId repair plan: per topic what is wrong (the root cause), then
    every znode write, every file removal, the restarts in their order, how long, and the undo.

    :param plan: ``plan.json`` (its ``topics`` and ``steps``).
    :param rollback: ``rollback.json`` (None: missing).
    :param plan_dir: the plan's folder.
    :param restart_command: the command each restart runs (``{broker_id}``/``{host}`` filled in per broker).
    :param health_timeout_s: the wait for a healthy cluster after a controller move.
    :param gate_timeout_s: each restarted broker's gate.
    :param undo_command: the ``kafka_zk_undo`` trigger that undoes this run (None: not known).
    """
    steps = list(plan.get("steps") or [])
    topics = plan.get("topics") or {}
    acted = sorted(t for t, e in topics.items() if e.get("strategy"))
    headline = (
        f"Repair the topic ids of {len(acted)} topic(s) on cluster {plan['cluster']} (KAFKA-14190): "
        + ", ".join(f"{t} ({topics[t].get('case', '?')} -> {topics[t].get('strategy')})" for t in acted)
        if acted
        else f"topicId repair on cluster {plan['cluster']}: nothing to change"
    )
    change = [
        f"{t}: {str(e.get('case', '?')).upper()}: {e.get('reason', '')}; {e.get('why', '')}"
        for t, e in sorted(topics.items())
    ]
    for topic, why in sorted((plan.get("refused") or {}).items()):
        change.append(f"not repaired by this run: {topic}: {why}")
    writes: list[str] = []
    files: list[str] = []
    restarts: list[str] = []
    duration: list[str] = []
    for step in steps:
        kind = step.get("kind")
        if kind == "write_topic_id":
            writes.append(
                f"set {step.get('path')}: topic_id {step.get('old_topic_id') or '(none)'} -> {step.get('topic_id')} "
                f"(versioned, expected version {step.get('expected_version')}; partitions unchanged)"
            )
        elif kind == "move_controller":
            writes.append(
                f"delete /controller (broker {step.get('controller_at_plan')} now) so a new controller loads the "
                f"id of {', '.join(step.get('topics') or [])}"
            )
            if health_timeout_s:
                duration.append(
                    f"up to {_duration(float(health_timeout_s))} for every partition to have a leader and full ISR"
                )
        elif kind == "reset_files":
            for f in step.get("files") or []:
                files.append(
                    f"broker {step.get('broker_id')}: {f.get('path') or f.get('name')} (holds "
                    f"{f.get('topic_id_on_disk')}; copied to files/broker-{step.get('broker_id')}/ and read back first)"
                )
        elif kind == "restart_broker":
            command = (restart_command or "").strip() or "(no restart_command: the execute step refuses)"
            restarts.append(
                f"{len(restarts) + 1}. broker {step.get('broker_id')}"
                + (" (the controller, last)" if step.get("is_controller") else "")
                + f": {command}; then wait until it is registered again, back in the ISR of "
                f"{', '.join(step.get('topics') or [])} and the under-replicated count is at the baseline"
            )
        elif kind not in ("wait_healthy",):
            writes.append(f"step {step.get('id')}: {kind}")
    if restarts and gate_timeout_s:
        duration.append(
            f"up to {_duration(float(gate_timeout_s))} per restarted broker ({len(restarts)}: up to "
            f"{_duration(float(gate_timeout_s) * len(restarts))}); past it the run stops before the next restart"
        )
    if not duration:
        duration.append("seconds: ZooKeeper writes only" if writes else "nothing to do")
    entries = list((rollback or {}).get("znodes") or [])
    undo = [
        f"{plan_dir.rstrip('/')}/rollback.json: {len(entries)} znode(s) with their bytes and version before this run"
        if rollback is not None
        else "rollback.json is MISSING"
    ]
    if undo_command:
        undo.append(f"undo: {undo_command} (dry run first; it checks each znode's version and bytes)")
    undo += [
        f"by hand, only if the undo DAG cannot run: {e.get('restore')}"
        for e in entries[:10]
        if e.get("restore")
    ]
    if files:
        undo.append(
            "every removed file is copied to files/broker-<id>/ and listed with the command that puts it back in "
            "rollback-files.json (run it with the broker stopped)"
        )
    return PlanSummary(
        "topic-id-repair",
        headline,
        (
            ("What will change (root cause first)", tuple(change)),
            ("ZooKeeper writes, in order", tuple(writes)),
            ("Broker files removed", tuple(files) or ("none",)),
            ("Brokers restarted, in this order", tuple(restarts) or ("none",)),
            ("Throttles", ("none: a topicId repair moves no data",)),
            ("Expected duration", tuple(duration)),
            ("Rollback and how to undo", tuple(undo)),
        ),
    )


# ---------------------------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------------------------


def respond_commands(base_url: str, dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
    """The REST calls that approve or reject (``PATCH .../hitlDetails``), as a person copies them
    (a token from ``POST /auth/token`` first)."""
    from urllib.parse import quote

    path = (
        f"{base_url.rstrip('/')}/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
        f"/taskInstances/{quote(task_id, safe='')}/-1/hitlDetails"
    )

    def call(option: str) -> str:
        body = json.dumps({"chosen_options": [option], "params_input": {"comment": "<why>"}})
        return (
            f'curl -X PATCH {shlex.quote(path)} -H "Authorization: Bearer $TOKEN" '
            f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
        )

    return {"approve": call(APPROVE), "reject": call(REJECT)}


def not_approved_text(record: Mapping[str, Any]) -> str:
    """``report.txt`` of a run whose plan was not approved: who decided what, when, and that nothing changed."""
    decision = Decision(record["decision"])
    plan = record.get("plan") or {}
    if decision is Decision.REJECTED:
        who = (record.get("decided_by") or {}).get("name") or "someone"
        what = f"REJECTED by {who} at {record.get('decided_at')}"
    elif decision is Decision.TIMED_OUT:
        what = (
            f"NOT APPROVED IN TIME: nobody decided within {record.get('timeout_s')} s "
            f"(asked at {record.get('requested_at')}, timed out at {record.get('decided_at')})"
        )
    else:
        what = f"not approved ({decision.value})"
    lines = [
        f"{record.get('dag_id')} on cluster {record.get('cluster')}: the plan was {what}.",
        "Nothing was changed: no task after the approval wrote to ZooKeeper or to a broker.",
    ]
    if record.get("comment"):
        lines.append(f"Comment: {record['comment']}")
    lines += [
        f"Plan shown: sha256 {plan.get('sha256')} ({record.get('plan_dir')})",
        f"Decision record: {record.get('plan_dir', '').rstrip('/')}/{APPROVAL_FILE}",
        f"Run: {record.get('run_url')}",
        "What to do: fix what the comment names (or the plan), then trigger the DAG again; a new run plans "
        "again from the cluster as it is then.",
    ]
    summary = record.get("summary")
    if summary:
        lines += ["", "The plan that was not approved:", summary.rstrip()]
    return "\n".join(lines) + "\n"


def approved_lines(record: Mapping[str, Any]) -> list[str]:
    """The report's opening lines for a run that went ahead: who approved which plan hash, when."""
    decision = Decision(record["decision"])
    plan = record.get("plan") or {}
    if decision is Decision.APPROVED:
        who = (record.get("decided_by") or {}).get("name") or "?"
        first = f"Approved by {who} at {record.get('decided_at')}"
        if record.get("comment"):
            first += f" ({record['comment']})"
    elif decision is Decision.NOT_REQUIRED:
        first = "Not approved by a person: the cluster file sets require_approval = false"
    else:
        first = "Dry run: no approval needed"
    return [f"{first}; plan sha256 {plan.get('sha256')}; {APPROVAL_FILE} beside the plan"]


def change_log_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The decision as an entry of the run's change log (``changes-<approval task>-<try>.json``)."""
    return {
        "at": record.get("decided_at") or record.get("requested_at"),
        "op": "approval",
        "path": None,
        "decision": record["decision"],
        "by": record.get("decided_by"),
        "comment": record.get("comment"),
        "plan_sha256": (record.get("plan") or {}).get("sha256"),
    }


def resolve_approvers(
    approvers: Iterable[str], users_by_role: Mapping[str, Sequence[str]] | None
) -> list[dict[str, str]]:
    """HITL ``assigned_users`` ({id, name}) for a cluster's ``approvers``: a plain entry is a user id
    (as the auth manager names users), ``role:<name>`` every user of that role.

    :param approvers: the cluster file's list.
    :param users_by_role: role (lower case) -> user ids, when the auth manager's users can be listed;
        None: they cannot (a role entry is then refused).
    :raises ValueError: a role that cannot be resolved, or one with no user.
    """
    out: dict[str, dict[str, str]] = {}
    for entry in approvers:
        text = str(entry).strip()
        if text.lower().startswith("role:"):
            role = text.split(":", 1)[1].strip().lower()
            if users_by_role is None:
                raise ValueError(
                    f"approver {text!r}: this auth manager's users cannot be listed by role here; name the "
                    'users instead (approvers = ["alice", "bob"])'
                )
            users = list(users_by_role.get(role) or [])
            if not users:
                raise ValueError(f"approver {text!r}: no user has role {role!r}: nobody could approve")
            for user in users:
                out[user] = {"id": user, "name": user}
        elif text:
            out[text] = {"id": text, "name": text}
    return list(out.values())


__all__ = [
    "APPROVAL_FILE",
    "APPROVE",
    "PLAN_INPUTS",
    "REJECT",
    "Decision",
    "PlanDigest",
    "PlanSummary",
    "approved_lines",
    "batch_seconds_at_rate",
    "batch_throttles",
    "change_log_entry",
    "digest_differences",
    "not_approved_text",
    "plan_digest",
    "reassignment_summary",
    "repair_summary",
    "resolve_approvers",
    "respond_commands",
]
