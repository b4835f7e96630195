"""The cleanup of deleted topics' leftovers, planned without I/O: what moves, what is left, and why.

A topic whose deletion settled INCOMPLETE (:mod:`.deletion`) left partition directories on broker
disks and/or its ``/config/topics/<t>`` znode. The cleanup moves the directories into a quarantine
on the same broker host (:class:`~.steps.QuarantineMove`, one step per broker) and, once every one
of a topic's directories is out, deletes the config znode (:class:`~.steps.ConfigZnodeDelete`).
Decided here, before anything is touched:

* a topic whose znode or deletion marker exists again is not touched at all (its directories may be
  a new topic's live replicas);
* a live-named (``normal``/``future``) orphan directory of a registered broker is left, unless the
  caller allows it (``allow_running_broker_orphans``): a running broker may hold it open;
  ``-delete``/``-stray`` directories, which Kafka closed before renaming, may move;
* a config znode stays while any of its topic's directories stays; one with children is refused.
"""

from __future__ import annotations

import base64
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .approval import PlanSummary
from .findings import APPROVAL_STEP, brokers_text, trigger_command
from .steps import ConfigZnodeDelete, QuarantineDir, QuarantineMove, Step

# kinds a running broker closed before renaming (LogManager closes -delete and -stray logs)
SAFE_UNDER_RUNNING_BROKER = ("delete", "stray")


@dataclass(frozen=True)
class Leftover:
    """One leftover directory of a deleted topic on one broker."""

    broker_id: int
    topic: str
    log_dir: str
    name: str
    kind: str

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"


@dataclass(frozen=True)
class ConfigZnode:
    """A leftover ``/config/topics/<t>`` as read before the plan (None for the topic: already gone)."""

    version: int
    data: bytes | None
    children: int = 0


@dataclass(frozen=True)
class CleanupPlan:
    """The steps, and what the plan leaves alone (report entries, with why)."""

    steps: tuple[Step, ...]
    left_dirs: tuple[dict[str, Any], ...]
    left_znodes: tuple[dict[str, Any], ...]

    @property
    def moves(self) -> tuple[QuarantineMove, ...]:
        return tuple(s for s in self.steps if isinstance(s, QuarantineMove))

    @property
    def deletes(self) -> tuple[ConfigZnodeDelete, ...]:
        return tuple(s for s in self.steps if isinstance(s, ConfigZnodeDelete))


def plan_cleanup(
    leftovers: Iterable[Leftover],
    config_znodes: Mapping[str, ConfigZnode | None],
    *,
    reappeared: Mapping[str, str],
    running: Collection[int],
    ts: str,
    quarantine_dir: str | None = None,
    allow_running_broker_orphans: bool = False,
) -> CleanupPlan:
    """The cleanup of ``leftovers`` and of the ``config_znodes`` of INCOMPLETE topics.

    :param leftovers: every leftover directory of the topics to clean.
    :param config_znodes: topic -> its leftover config znode as read now (None: gone meanwhile).
    :param reappeared: topic -> why it is back in ZooKeeper (its znode or marker exists again).
    :param running: the brokers registered in ``/brokers/ids`` (running).
    :param ts: the run's folder name (the quarantine's subfolder).
    :param quarantine_dir: the quarantine root (None: ``<log dir>/../kafka-quarantine``).
    :param allow_running_broker_orphans: move live-named orphans of a running broker too.
    """
    by_broker: dict[int, list[QuarantineDir]] = {}
    left_dirs: list[dict[str, Any]] = []
    unfinished: set[str] = set()
    for d in sorted(leftovers, key=lambda x: (x.broker_id, x.path)):
        why = reappeared.get(d.topic)
        orphan_of_running = d.broker_id in running and d.kind not in SAFE_UNDER_RUNNING_BROKER
        if why is None and orphan_of_running and not allow_running_broker_orphans:
            why = (
                f"broker {d.broker_id} is running (registered in /brokers/ids): a {d.kind} directory it may "
                "hold open moves only while the broker is stopped (or with allow_running_broker_orphans)"
            )
        if why is not None:
            left_dirs.append({"broker_id": d.broker_id, "source": d.path, "status": "refused", "detail": why})
            unfinished.add(d.topic)
            continue
        by_broker.setdefault(d.broker_id, []).append(QuarantineDir(d.log_dir, d.name, d.kind, d.topic))
    steps: list[Step] = [
        QuarantineMove(
            id=f"quarantine:broker-{broker}",
            broker_id=broker,
            dirs=tuple(dirs),
            quarantine_dir=quarantine_dir,
            ts=ts,
            broker_running=broker in running,
            allow_running_broker_orphans=allow_running_broker_orphans,
        )
        for broker, dirs in sorted(by_broker.items())
    ]
    left_znodes: list[dict[str, Any]] = []
    for topic, znode in sorted(config_znodes.items()):
        path = f"/config/topics/{topic}"
        if topic in reappeared:
            left_znodes.append(
                {"path": path, "status": "refused", "detail": "the topic or its marker exists again"}
            )
        elif topic in unfinished:
            left_znodes.append(
                {
                    "path": path,
                    "status": "kept",
                    "detail": "some of the topic's directories were not quarantined",
                }
            )
        elif znode is None:
            left_znodes.append({"path": path, "status": "gone", "detail": "already removed"})
        elif znode.children:
            left_znodes.append({"path": path, "status": "refused", "detail": "it has children"})
        else:
            steps.append(
                ConfigZnodeDelete(
                    id=f"delete-config:{topic}", topic=topic, expected_version=znode.version, data=znode.data
                )
            )
    return CleanupPlan(tuple(steps), tuple(left_dirs), tuple(left_znodes))


# ---------------------------------------------------------------------------------------------
# The stored plan of the kafka_zk_deletion_cleanup DAG: what a person approves, what is executed
# ---------------------------------------------------------------------------------------------

PLAN_FORMAT = "kafka-zk-deletion-cleanup-plan"
ROLLBACK_FORMAT = "kafka-zk-deletion-cleanup-rollback"

_KIND_WHY = {
    "delete": "a -delete directory past its broker's own deletion schedule (log.segment.delete.delay.ms after "
    "the rename, plus the margin): the broker's own delete of it did not happen",
    "stray": "a -stray directory: a log the broker set aside because it does not host it",
    "future": "a -future directory (an unfinished move between log dirs) of the deleted topic",
    "normal": "a live-named directory of a topic ZooKeeper no longer knows",
}


def _dir_why(d: QuarantineDir, move: QuarantineMove, cluster_ids: Sequence[str]) -> str:
    """Why moving ``d`` is safe (shown to the approver, one line)."""
    if not move.broker_running:
        running = f"broker {move.broker_id} is stopped: no broker process holds it open"
    elif d.kind in SAFE_UNDER_RUNNING_BROKER:
        running = f"broker {move.broker_id} runs; a {d.kind} directory is no log it serves"
    else:
        running = f"broker {move.broker_id} runs; moved because allow_running_broker_orphans is set"
    pinned = (
        f"its meta.properties carry cluster.id {', '.join(cluster_ids)}, pinned against ZooKeeper again before the move"
        if cluster_ids
        else "its host is pinned to this cluster before the move (server.properties and its registration)"
    )
    return (
        f"topic {d.topic} is deleted (no /brokers/topics/{d.topic}, no /admin/delete_topics/{d.topic}: read again "
        f"right before the move); {_KIND_WHY.get(d.kind, d.kind)}; {running}; {pinned}; renamed into the quarantine "
        "on the same filesystem, never deleted"
    )


def _znode_why(step: ConfigZnodeDelete) -> str:
    return (
        f"topic {step.topic} is deleted (no topic znode, no deletion marker: read again right before the delete); "
        f"deleted only once every directory of {step.topic} in this plan is out of the log dirs (else kept), only at "
        f"version {step.expected_version} with the bytes read for this plan, which rollback.json keeps"
    )


CLEANUP_DAG = "kafka_zk_deletion_cleanup"


def cleanup_commands(cluster: str, topics: Sequence[str]) -> tuple[str, str]:
    """The ``airflow dags trigger`` commands that clean ``topics``' leftovers: the dry run, then the
    real run (which waits for a person's approval of the plan it shows)."""
    conf = {"cluster": cluster, "topics": sorted(set(topics))}
    return (
        trigger_command(CLEANUP_DAG, {**conf, "dry_run": True}),
        trigger_command(CLEANUP_DAG, {**conf, "dry_run": False}),
    )


def cleanup_advice(cluster: str, topics: Sequence[str]) -> str:
    """One sentence for a finding: how to clean ``topics``' leftovers as an approved change."""
    dry, real = cleanup_commands(cluster, topics)
    return (
        f"Clean up their leftovers with the DAG {CLEANUP_DAG} (it moves the directories into a quarantine on "
        f"their broker hosts, never deletes them, and deletes the config znodes after saving them): dry run "
        f"{dry}, then {real} ({APPROVAL_STEP})"
    )


def cleanup_documents(
    plan: CleanupPlan,
    *,
    cluster: str,
    identity: Mapping[str, Any],
    topics: Sequence[str],
    verdicts: Sequence[Mapping[str, Any]],
    coverage: Mapping[str, Any],
    live_brokers: Sequence[int],
    hosts: Mapping[int, str],
    meta_cluster_ids: Mapping[int, Sequence[str]],
    host_checks: Mapping[str, Mapping[str, Any]],
    ts: str,
    quarantine_dir: str | None,
    allow_running_broker_orphans: bool,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``plan.json``, ``rollback.json`` and ``summary.txt`` of a deletion cleanup: every directory and
    znode it removes or quarantines, per broker, with the cluster identity and why each is safe, and
    what it leaves alone and why.

    :param plan: the planned steps (:func:`plan_cleanup`).
    :param identity: the pinned cluster identity (``ClusterIdentity.to_dict()``).
    :param verdicts: the deletion verdicts the plan was made from.
    :param hosts: broker -> the host its disk was read on.
    :param meta_cluster_ids: broker -> the ``cluster.id`` values its meta.properties carry.
    :param host_checks: quarantine step id -> the host's dry run of it (``results`` with each
        ``source`` and ``destination``).
    :param ts: the run's key (the quarantine subfolder).
    """
    directories: list[dict[str, Any]] = []
    moves_undo: list[dict[str, Any]] = []
    brokers: dict[str, dict[str, Any]] = {}
    for move in plan.moves:
        found = {
            r.get("source"): r for r in (host_checks.get(move.id) or {}).get("results", ()) if r.get("source")
        }
        host = str((host_checks.get(move.id) or {}).get("host") or hosts.get(move.broker_id) or "?")
        ids = list(meta_cluster_ids.get(move.broker_id) or ())
        brokers[str(move.broker_id)] = {
            "host": host,
            "running": bool(move.broker_running),
            "meta_cluster_ids": ids,
        }
        for d in move.dirs:
            destination = found.get(d.path, {}).get("destination")
            directories.append(
                {
                    "broker_id": move.broker_id,
                    "host": host,
                    "topic": d.topic,
                    "kind": d.kind,
                    "source": d.path,
                    "destination": destination,
                    "why": _dir_why(d, move, ids),
                }
            )
            moves_undo.append(
                {"broker_id": move.broker_id, "host": host, "source": d.path, "destination": destination}
            )
    znodes = [
        {"path": s.path, "topic": s.topic, "version": s.expected_version, "why": _znode_why(s)}
        for s in plan.deletes
    ]
    left_alone = [
        {"broker_id": e["broker_id"], "source": e["source"], "why": e["detail"]} for e in plan.left_dirs
    ] + [{"path": e["path"], "status": e["status"], "why": e["detail"]} for e in plan.left_znodes]
    document = {
        "format": PLAN_FORMAT,
        "version": 1,
        "cluster": cluster,
        "identity": dict(identity),
        "topics": list(topics),
        "ts": ts,
        "quarantine_dir": quarantine_dir,
        "allow_running_broker_orphans": allow_running_broker_orphans,
        "verdicts": [dict(v) for v in verdicts],
        "coverage": dict(coverage),
        "live_brokers": sorted(int(b) for b in live_brokers),
        "brokers": brokers,
        "steps": [s.to_dict() for s in plan.steps],
        "directories": directories,
        "znodes": znodes,
        "left_alone": left_alone,
    }
    zk = ",".join(identity.get("zookeeper_hosts") or ()) + str(identity.get("chroot") or "")
    rollback = {
        "format": ROLLBACK_FORMAT,
        "version": 1,
        "cluster": cluster,
        "identity": dict(identity),
        "ts": ts,
        "moves": moves_undo,
        "undo_moves": "with the broker stopped, on its host: mv <destination> <source> for each move below (a "
        "quarantine-listing*.json beside the moved directories lists them too)",
        "znodes": [
            {
                "path": s.path,
                "topic": s.topic,
                "version": s.expected_version,
                "data_base64": None if s.data is None else base64.b64encode(s.data).decode(),
            }
            for s in plan.deletes
        ],
        "undo_znodes": f"create each path again as a persistent znode with its base64-decoded data_base64, in "
        f"ZooKeeper {zk or '?'}",
    }
    return document, rollback, cleanup_summary(document, rollback, plan_dir="(this run's folder)").text()


def planned_steps(plan: Mapping[str, Any]) -> list[Step]:
    """The steps of a stored cleanup plan (a typed error for anything else).

    :raises ValueError: not a cleanup plan, or its steps are unreadable.
    """
    from .steps import steps_from_dicts

    if plan.get("format") != PLAN_FORMAT:
        raise ValueError(
            f"not a deletion cleanup plan (format {plan.get('format')!r}, expected {PLAN_FORMAT})"
        )
    steps = steps_from_dicts(plan.get("steps") or ())
    if any(not isinstance(s, QuarantineMove | ConfigZnodeDelete) for s in steps):
        raise ValueError("a deletion cleanup plan holds only quarantine moves and config znode deletions")
    return steps


def changes_since_plan(
    plan: Mapping[str, Any],
    *,
    completed: Collection[str],
    verdicts: Mapping[str, str],
    leftovers: Collection[tuple[int, str, str]],
    running: Collection[int],
    meta_cluster_ids: Mapping[int, Sequence[str]],
) -> list[str]:
    """What differs between the cluster a stored cleanup plan saw and the one seen now (empty: the
    plan still holds). The executor's preflight checks every step's znodes and the host's own checks
    after this; here the verdicts' view: every planned topic still INCOMPLETE (a topic cleaned by
    this run's earlier try: DELETED is fine), every directory of a step still to run a leftover of
    the same kind, its broker running or stopped as planned and pinned to the same cluster id, and no
    leftover of a planned topic that the plan neither moves nor leaves alone with a reason.

    :param plan: ``plan.json``.
    :param completed: step ids this run already completed (their directories are out).
    :param verdicts: topic -> verdict value now.
    :param leftovers: (broker, path, kind) of every leftover directory of the planned topics now.
    :param running: brokers registered now.
    :param meta_cluster_ids: broker -> cluster ids in its meta.properties now.
    """
    problems: list[str] = []
    steps = planned_steps(plan)
    todo = [s for s in steps if isinstance(s, QuarantineMove) and s.id not in completed]
    done_moves = [s for s in steps if isinstance(s, QuarantineMove) and s.id in completed]
    out_already = {(m.broker_id, d.path) for m in done_moves for d in m.dirs}
    for topic in plan.get("topics") or ():
        now = verdicts.get(topic)
        if now != "incomplete" and not (now == "deleted" and (done_moves or completed)):
            problems.append(f"topic {topic} is {now or 'not checked'} now, the plan saw it INCOMPLETE")
    now_dirs = {(b, p): k for b, p, k in leftovers}
    planned = set()
    for move in todo:
        if bool(move.broker_running) != (move.broker_id in running):
            problems.append(
                f"broker {move.broker_id} is {'running' if move.broker_id in running else 'stopped'} now, the plan "
                f"saw it {'running' if move.broker_running else 'stopped'}"
            )
        pinned = list((plan.get("brokers") or {}).get(str(move.broker_id), {}).get("meta_cluster_ids") or ())
        seen = list(meta_cluster_ids.get(move.broker_id) or ())
        if pinned != seen:
            problems.append(
                f"broker {move.broker_id}'s meta.properties carry cluster.id {seen}, the plan saw {pinned}"
            )
        for d in move.dirs:
            planned.add((move.broker_id, d.path))
            kind = now_dirs.get((move.broker_id, d.path))
            if kind is None:
                problems.append(
                    f"broker {move.broker_id} {d.path} is no leftover any more (moved or gone since the plan)"
                )
            elif kind != d.kind:
                problems.append(
                    f"broker {move.broker_id} {d.path} is a {kind} directory now, the plan saw {d.kind}"
                )
    known = (
        planned
        | out_already
        | {(int(e["broker_id"]), str(e["source"])) for e in plan.get("left_alone") or () if "source" in e}
    )
    for broker, path in sorted(set(now_dirs) - known):
        problems.append(f"broker {broker} {path} is a leftover the plan does not know (new since the plan)")
    return problems


def cleanup_summary(
    plan: Mapping[str, Any], rollback: Mapping[str, Any] | None, *, plan_dir: str
) -> PlanSummary:
    """The approval summary of a deletion cleanup plan: root cause (the verdicts) first, then every
    znode deleted and every directory moved, per broker, why each is safe, what is left alone, and the undo.

    :param plan: ``plan.json``.
    :param rollback: ``rollback.json`` (None: missing).
    :param plan_dir: the plan's folder.
    """
    identity = plan.get("identity") or {}
    where = (
        f"cluster {plan.get('cluster')} (/cluster/id {identity.get('cluster_id')}, ZooKeeper "
        f"{','.join(identity.get('zookeeper_hosts') or ())} chroot {identity.get('chroot') or '/'})"
    )
    dirs = list(plan.get("directories") or ())
    znodes = list(plan.get("znodes") or ())
    brokers = sorted({int(d["broker_id"]) for d in dirs})
    topics = list(plan.get("topics") or ())
    if dirs or znodes:
        headline = (
            f"Clean up the leftovers of deleted topic(s) {', '.join(topics)} on {where}: {len(dirs)} director(ies) "
            f"into quarantine on {brokers_text(brokers)}, {len(znodes)} config znode(s) deleted"
        )
    else:
        headline = f"Deletion cleanup of {', '.join(topics)} on {where}: nothing to clean"
    cause = [
        f"{v.get('topic')}: {str(v.get('verdict', '?')).upper()}"
        + (f" ({', '.join(v.get('causes') or [])})" if v.get("causes") else "")
        + (f": {v.get('description')}" if v.get("description") else "")
        for v in plan.get("verdicts") or ()
    ]
    writes = [f"delete {z['path']} at version {z['version']}: {z['why']}" for z in znodes]
    files = [
        f"broker {d['broker_id']} ({d['host']}): {d['source']} -> {d.get('destination') or '(quarantine)'}: {d['why']}"
        for d in dirs
    ]
    left = [
        f"{'broker ' + str(e['broker_id']) + ' ' + e['source'] if 'source' in e else e.get('path')}: {e['why']}"
        for e in plan.get("left_alone") or ()
    ]
    undo = [
        f"{plan_dir.rstrip('/')}/rollback.json: {len((rollback or {}).get('moves') or ())} move(s) and "
        f"{len((rollback or {}).get('znodes') or ())} znode(s) (data and version) to put back"
        if rollback is not None
        else "rollback.json is MISSING"
    ]
    if dirs:
        undo.append("a moved directory goes back with mv <destination> <source> while its broker is stopped")
    if znodes:
        undo.append("a deleted config znode is created again with its saved data (rollback.json)")
    return PlanSummary(
        "deletion-cleanup",
        headline,
        (
            ("What will change (root cause first)", tuple(cause)),
            ("ZooKeeper writes, in order", tuple(writes) or ("none",)),
            ("Broker directories moved into quarantine (never deleted)", tuple(files) or ("none",)),
            ("Left alone, and why", tuple(left) or ("nothing",)),
            ("Expected duration", ("seconds: one command per broker host and one ZooKeeper multi-op",)),
            ("Rollback and how to undo", tuple(undo)),
        ),
    )


def cleanup_report(
    plan: Mapping[str, Any],
    cleanup: Mapping[str, Any] | None,
    verdicts_after: Sequence[Mapping[str, Any]],
    problems: Sequence[str],
) -> str:
    """``report.txt`` of a deletion cleanup run: the outcome first, then what moved and was deleted,
    the verdicts now, and where the rollback is.

    :param plan: ``plan.json``.
    :param cleanup: the execute step's record (``cleanup.json``; None: it did not run).
    :param verdicts_after: the verdicts of the plan's topics after the cleanup.
    :param problems: what the verification found wrong (empty: every topic deleted everywhere).
    """
    lines = [
        f"Deletion cleanup of {', '.join(plan.get('topics') or ())} on cluster {plan.get('cluster')} "
        f"(/cluster/id {(plan.get('identity') or {}).get('cluster_id')}): "
        + (
            "Verification: OK, every topic is deleted everywhere"
            if not problems
            else f"NOT DONE: {len(problems)} problem(s)"
        )
    ]
    lines += [f"  - {p}" for p in problems]
    record = cleanup or {}
    moved = [d for d in record.get("directories") or () if d.get("status") in ("moved", "already_moved")]
    lines.append(f"Directories moved into quarantine: {len(moved)}")
    lines += [f"  - broker {d.get('broker_id')}: {d.get('source')} -> {d.get('destination')}" for d in moved]
    other = [d for d in record.get("directories") or () if d.get("status") not in ("moved", "already_moved")]
    lines += [
        f"  - not moved: broker {d.get('broker_id')} {d.get('source', '')}: {d.get('status')} ({d.get('detail', '')})"
        for d in other
    ]
    deleted = [z for z in record.get("znodes") or () if z.get("status") == "deleted"]
    lines.append(f"Config znodes deleted: {len(deleted)}")
    lines += [f"  - {z.get('path')} (was version {z.get('version')})" for z in deleted]
    lines.append("Verdicts now:")
    lines += [f"  - {v.get('description') or v.get('topic')}" for v in verdicts_after]
    lines.append(
        "Rollback: rollback.json (every move and every znode's data), rollback/ (written before each change)"
    )
    return "\n".join(lines) + "\n"


__all__ = [
    "CLEANUP_DAG",
    "PLAN_FORMAT",
    "ROLLBACK_FORMAT",
    "SAFE_UNDER_RUNNING_BROKER",
    "CleanupPlan",
    "ConfigZnode",
    "Leftover",
    "changes_since_plan",
    "cleanup_advice",
    "cleanup_commands",
    "cleanup_documents",
    "cleanup_report",
    "cleanup_summary",
    "plan_cleanup",
    "planned_steps",
]
