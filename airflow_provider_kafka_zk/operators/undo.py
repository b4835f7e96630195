"""Undo a change: plan the way back from a run's artefacts, execute it, verify it (``kafka_zk_undo``).

Thin Airflow shells. :class:`UndoPlanOperator` finds the run folder of the run to undo by its
Airflow run id (the run key's digest, else the run ids its records name), reads its artefacts and
the cluster now -- all ZooKeeper I/O through :class:`~airflow_provider_kafka_zk.hooks.zookeeper.
KafkaZooKeeperHook`, so TLS, SASL and Kerberos ensembles work as the connection says -- and hands
them to the planners of :mod:`airflow_provider_kafka_zk.kafka.undo`. It writes ``rollback.json``
(how the cluster is before the undo) first, then ``plan.json`` (a drain-shaped plan: its batches
are the partitions going back, ``undo.steps`` the other typed steps) and ``summary.txt``, and
refuses (:class:`~airflow_provider_kafka_zk.maintenance.undo.UndoRefusedError`, every problem
named) when the undo may not run. :class:`UndoExecuteOperator` hands the plan to
:func:`~airflow_provider_kafka_zk.maintenance.undo.execute_undo` (the step executor; a batch's wait
deferred to the triggerer); the drain's ``ClearReplicationThrottlesOperator`` removes the undo's own
throttles and gives the lease back; :class:`UndoVerifyOperator` reads everything back.
Artefacts: ``<base>/<cluster>/undo/<run key>/``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import fsspec
from airflow.sdk import BaseOperator

from airflow_provider_kafka_zk.artefacts.drain_folder import (
    PLAN_FILE,
    REPORT_FILE,
    ROLLBACK_FILE,
    SUMMARY_FILE,
    THROTTLES_FILE,
    VERIFY_FILE,
    DrainError,
    DrainLocation,
    load_throttle_record,
)
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import validate_cluster_name
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.kraft_migration_plan import SIGNALS_FILE
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity
from airflow_provider_kafka_zk.kafka.steps import (
    ConfigZnodeRestore,
    ObservedZnode,
    PartitionFileRestore,
    QuarantineMove,
    QuarantineRestore,
    Refusal,
    TopicIdWrite,
    steps_from_dicts,
)
from airflow_provider_kafka_zk.kafka.undo import (
    DAG_KINDS,
    MIGRATION_DAG_ID,
    MIGRATION_FOLDER,
    UNDO_DAG_ID,
    UNDO_FOLDER,
    DeletedConfig,
    FileNow,
    MigrationRunRecord,
    MovedDir,
    MovesNow,
    OriginalRun,
    RemovedFile,
    RepairWrite,
    RunKind,
    UndoPlan,
    describe,
    migration_run_refusal,
    plan_cleanup_undo,
    plan_document,
    plan_moves_undo,
    plan_repair_undo,
    rollback_document,
    run_refusals,
    undo_steps,
)
from airflow_provider_kafka_zk.maintenance import RunIdentity, parse_safety_flags
from airflow_provider_kafka_zk.maintenance.session import pin_zookeeper_identity, read_lease
from airflow_provider_kafka_zk.maintenance.undo import UndoRefusedError, UndoSettings
from airflow_provider_kafka_zk.operators._run import resolve_ts as _resolve_ts
from airflow_provider_kafka_zk.operators.drain import BatchWaitMixin
from airflow_provider_kafka_zk.operators.drain_artefacts import (
    is_unset,
    load_plan,
    plan_batches,
    positive_int,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

IDENTITY_FILE = "identity.json"
PROGRESS = "progress"
SEARCH_LIMIT = 2000
"""Run folders read, per kind, when a run is not found by its run key's digest (runs that named
their folder themselves): the newest first."""


def _digest(run_id: str) -> str:
    return hashlib.sha256(str(run_id).encode()).hexdigest()[:8]


def _ls(fs: Any, path: str) -> list[str]:
    if not fs.isdir(path):
        return []
    return sorted((p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)), reverse=True)


def _json_or_none(location: DrainLocation, name: str) -> Any:
    try:
        return location.read_json(name) if location.exists(name) else None
    except DrainError:
        return None


def _recorded_run(location: DrainLocation) -> tuple[str | None, str | None]:
    """(run id, DAG id) the folder's records name (``identity.json``, ``plan.json``, a change log);
    (None, None) when none names one."""
    identity = _json_or_none(location, IDENTITY_FILE)
    pinned = (identity.get("pinned_by") or {}) if isinstance(identity, dict) else {}
    if pinned.get("run_id"):
        return str(pinned["run_id"]), pinned.get("dag_id")
    plan = _json_or_none(location, PLAN_FILE)
    if isinstance(plan, dict) and plan.get("run_id"):
        return str(plan["run_id"]), None
    for name in _change_log_names(location):
        record = _json_or_none(location, name)
        run = (record.get("run") or {}) if isinstance(record, dict) else {}
        if run.get("run_id"):
            return str(run["run_id"]), run.get("dag_id")
    return None, None


def _change_log_names(location: DrainLocation) -> list[str]:
    fs, root = fsspec.core.url_to_fs(location.url)
    return [n for n in _ls(fs, root) if n.startswith("changes-") and n.endswith(".json")]


def find_original_run(
    base: str, cluster: str, run_id: str, dag_id: str | None = None
) -> tuple[RunKind, DrainLocation, str | None]:
    """The folder of run ``run_id`` of ``cluster``: (its kind, its folder, its DAG id as its records say).

    Looked for under every undoable kind's folder (only the DAG's, when ``dag_id`` is a shipped one):
    first the folders named by the run's key (``<run_after>-<8 hex of the run id>``), then, for runs
    that named their folder themselves, the newest :data:`SEARCH_LIMIT` folders' records.

    :raises UndoRefusedError: ``no-artefacts`` (nothing found, with what was searched),
        ``undo-of-an-undo``, or ``migration-run`` (a ``kafka_zk_kraft_migration`` run: its own back run
        undoes it; the refusal gives the command and the phase the run's artefacts know).
    """
    validate_cluster_name(cluster)
    if dag_id == MIGRATION_DAG_ID:
        raise _refused(run_id, migration_run_refusal(cluster, run_id, _migration_run(base, cluster, run_id)))
    if dag_id == UNDO_DAG_ID:
        raise _refused(
            run_id,
            Refusal(
                "undo-of-an-undo",
                f"{run_id} is a run of {UNDO_DAG_ID}: an undo is not undone by another undo",
                "To make the change again, trigger the DAG that made it in the first place (it plans from the cluster "
                "as it is now)",
            ),
        )
    kinds = [DAG_KINDS[dag_id]] if dag_id in DAG_KINDS else list(RunKind)
    root = f"{base.rstrip('/')}/{cluster}"
    fs, path = fsspec.core.url_to_fs(root)
    digest = _digest(run_id)
    searched = []
    for by_key in (True, False):
        for kind in kinds:
            for folder in kind.folders:
                names = _ls(fs, f"{path}/{folder}")
                searched.append(f"{root}/{folder}")
                candidates = (
                    [n for n in names if n.endswith("-" + digest)] if by_key else names[:SEARCH_LIMIT]
                )
                for name in candidates:
                    location = DrainLocation(f"{root}/{folder}/{name}")
                    recorded, recorded_dag = _recorded_run(location)
                    # by its run key: unless a record names another run; else: a record must name it
                    if recorded != run_id and (not by_key or recorded is not None):
                        continue
                    if dag_id and recorded_dag and recorded_dag != dag_id:
                        continue
                    return kind, location, recorded_dag or dag_id
    if dag_id is None and (migration := _migration_run(base, cluster, run_id)) is not None:
        raise _refused(run_id, migration_run_refusal(cluster, run_id, migration))
    undo_folder = f"{path}/{UNDO_FOLDER}"
    if any(n.endswith("-" + digest) for n in _ls(fs, undo_folder)):
        raise _refused(
            run_id,
            Refusal(
                "undo-of-an-undo",
                f"{run_id} is a run of {UNDO_DAG_ID} ({root}/{UNDO_FOLDER}): an undo is not undone by another undo",
                "To make the change again, trigger the DAG that made it in the first place",
            ),
        )
    raise _refused(
        run_id,
        Refusal(
            "no-artefacts",
            f"no run folder of run {run_id!r}{f' of {dag_id}' if dag_id else ''} under "
            f"{', '.join(sorted(set(searched)))}: no rollback artefacts or change logs to undo from",
            "Nothing was planned; check the run id (the DAG run's id in Airflow), the cluster and the artefact store "
            "(base_path) the run wrote to",
            None,
            (run_id,),
        ),
    )


def _migration_run(base: str, cluster: str, run_id: str) -> MigrationRunRecord | None:
    """What the folder of migration run ``run_id`` (``<base>/<cluster>/kraft-migration/<run key>/``) says;
    None when there is none."""
    root = f"{base.rstrip('/')}/{cluster}/{MIGRATION_FOLDER}"
    fs, path = fsspec.core.url_to_fs(root)
    for name in _ls(fs, path):
        if not name.endswith("-" + _digest(run_id)):
            continue
        location = DrainLocation(f"{root}/{name}")
        if _recorded_run(location)[0] not in (None, run_id):
            continue
        plan = _json_or_none(location, PLAN_FILE)
        plan = plan if isinstance(plan, dict) else {}
        signals = _json_or_none(location, SIGNALS_FILE)
        verify = _json_or_none(location, VERIFY_FILE)
        return MigrationRunRecord(
            folder=location.url,
            direction=plan.get("direction"),
            from_phase=plan.get("from_phase")
            or (signals.get("phase") if isinstance(signals, dict) else None),
            to_phase=plan.get("to_phase"),
            verified_phase=verify.get("phase") if isinstance(verify, dict) else None,
            verified=isinstance(verify, dict),
            steps_done=len(_progress(location)),
            steps_planned=len(plan.get("steps") or ()),
        )
    return None


def _refused(run_id: str, *refusals: Refusal) -> UndoRefusedError:
    return UndoRefusedError(f"undo of run {run_id}", refusals, dry_run=False)


def _writes(location: DrainLocation) -> tuple[int, tuple[str, ...]]:
    """The run's cluster writes (its change logs, the lease and the approval decision apart)."""
    from airflow_provider_kafka_zk.alerts.maintenance import change_logs

    names = _change_log_names(location)
    logs = {n: r for n in names if isinstance(r := _json_or_none(location, n), dict)}
    return int(change_logs(logs)["writes"]), tuple(names)


def load_original(kind: RunKind, location: DrainLocation, run_id: str, dag_id: str | None) -> OriginalRun:
    """The run as its folder describes it (identity, writes)."""
    identity_record = _json_or_none(location, IDENTITY_FILE)
    identity = None
    if isinstance(identity_record, dict) and identity_record.get("identity"):
        identity = ClusterIdentity.from_dict(identity_record["identity"], location.path(IDENTITY_FILE))
        dag_id = dag_id or (identity_record.get("pinned_by") or {}).get("dag_id")
    else:
        plan = _json_or_none(location, PLAN_FILE)
        if isinstance(plan, dict) and plan.get("identity"):
            identity = ClusterIdentity.from_dict(plan["identity"], location.path(PLAN_FILE))
    writes, logs = _writes(location)
    return OriginalRun(kind, dag_id, run_id, location.url, identity, writes, logs)


def _progress(location: DrainLocation, prefix: str = PROGRESS) -> dict[str, Any]:
    """Every completed step of the run's progress records (``progress.json``, ``progress-cleanup-<try>.json``)."""
    fs, root = fsspec.core.url_to_fs(location.url)
    completed: dict[str, Any] = {}
    for name in sorted(_ls(fs, root)):
        if name.startswith(prefix) and name.endswith(".json"):
            record = _json_or_none(location, name) or {}
            completed.update(record.get("completed") or {})
    return completed


# ---------------------------------------------------------------------------------------------
# What each kind of run left, and the cluster now
# ---------------------------------------------------------------------------------------------


def _plan_moves(original: OriginalRun, location: DrainLocation, hook: KafkaZooKeeperHook) -> UndoPlan:
    from airflow_provider_kafka_zk.hooks.zookeeper_drain import read_reassign
    from airflow_provider_kafka_zk.kafka.reassignment import reassignments_in_flight
    from airflow_provider_kafka_zk.operators.post_maintenance import drained_moves

    try:
        moved, _ = drained_moves(location)
    except Exception as exc:  # the run's records cannot say what it moved: named in the refusal
        return UndoPlan(original).with_refusals(
            [
                Refusal(
                    "no-artefacts",
                    f"{location.url}: what the run moved cannot be read ({type(exc).__name__}: {exc})",
                    "Nothing was planned; undo by hand from its rollback.json after checking each partition",
                    None,
                    (location.path(ROLLBACK_FILE),),
                )
            ]
        )
    throttles = load_throttle_record(location)["entities"] if location.exists(THROTTLES_FILE) else {}
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    topics: dict[str, tuple[str | None, int]] = {}
    assignments = []
    for topic in sorted({m.topic for m in moved}):
        path = znodes.topic_path(topic)
        try:
            data, stat = hook.get_znode(path)
        except ZnodeNotFoundError:
            continue
        decoded = znodes.TopicAssignment.decode(data, path)
        assignments.append(decoded)
        topics[topic] = (None if decoded.topic_id is None else str(decoded.topic_id), stat.czxid)
        for p, replicas in decoded.partitions.items():
            assignment[(topic, p)] = tuple(replicas)
    reassign, _ = read_reassign(hook)
    in_flight = reassignments_in_flight(assignments, reassign)
    configs: dict[str, Mapping[str, str] | None] = {}
    for key in throttles:
        path = f"/config/{key}"
        try:
            configs[key] = znodes.ConfigEntity.decode(hook.get_znode(path)[0], path).config
        except ZnodeNotFoundError:
            configs[key] = None
    now = MovesNow(
        assignment,
        set(in_flight.znode_partitions) | set(in_flight.topic_znode_partitions),
        topics,
        set(hook.live_broker_ids()),
        configs,
    )
    return plan_moves_undo(original, moved, throttles, now, election=location.exists("election.json"))


def _plan_repair(
    original: OriginalRun,
    location: DrainLocation,
    hook: KafkaZooKeeperHook,
    hosts: Callable[[], Any | None],
) -> UndoPlan:
    from airflow_provider_kafka_zk.kafka.steps import BrokerRestart, ControllerMove, FileRemoval

    try:
        plan = location.read_json(PLAN_FILE)
        steps = steps_from_dicts(plan.get("steps") or ())
    except (DrainError, ValueError, KeyError, TypeError) as exc:
        return UndoPlan(original).with_refusals(
            [
                Refusal(
                    "no-artefacts",
                    f"{location.path(PLAN_FILE)}: the repair's steps cannot be read ({type(exc).__name__}: {exc})",
                    "Nothing was planned; undo by hand from its rollback.json",
                    None,
                    (location.path(PLAN_FILE),),
                )
            ]
        )
    completed = _progress(location)
    versions = _written_versions(location)
    writes, refusals = [], []
    for s in steps:
        if not isinstance(s, TopicIdWrite) or s.id not in completed:
            continue
        version = (completed[s.id] or {}).get("version", versions.get(s.path))
        if version is None:
            refusals.append(
                Refusal(
                    "no-artefacts",
                    f"the repair's records do not say which version its write of {s.path} produced",
                    "Nothing was planned; put the znode back by hand from the repair's rollback.json",
                    None,
                    (s.path,),
                )
            )
            continue
        writes.append(RepairWrite(s, int(version)))
    controller_moved = any(isinstance(s, ControllerMove) and s.id in completed for s in steps)
    restarted = [s.broker_id for s in steps if isinstance(s, BrokerRestart) and s.id in completed]
    planned = {(s.broker_id, f.path): f for s in steps if isinstance(s, FileRemoval) for f in s.files}
    removed_paths = {
        (s.broker_id, p)
        for s in steps
        if isinstance(s, FileRemoval)
        for p in (completed.get(s.id) or {}).get("removed") or ()
    }
    record = _json_or_none(location, "rollback-files.json") or {}
    removed = []
    for entry in record.get("files") or ():
        key = (int(entry["broker_id"]), str(entry["path"]))
        if key not in removed_paths or key not in planned:
            continue
        f = planned[key]
        removed.append(
            RemovedFile(
                key[0],
                str(entry.get("host") or ""),
                f.topic,
                f.partition,
                f.log_dir,
                f.dir_name,
                f.name,
                _read_bytes(str(entry.get("copy") or "")),
                str(entry.get("sha256") or ""),
                f.target_id,
            )
        )
    znodes_now = {w.step.path: _observe(hook, w.step.path) for w in writes}
    host_hook = hosts() if removed else None
    files_now = _files_now(host_hook, removed) if host_hook is not None else None
    if removed and host_hook is None:
        refusals.append(_no_ssh("the repair removed files on broker hosts"))
    cases = {t: str(e.get("case") or "") for t, e in (plan.get("topics") or {}).items()}
    result = plan_repair_undo(
        original,
        writes=writes,
        controller_moved=controller_moved,
        cases=cases,
        removed=removed,
        restarted=restarted,
        znodes_now=znodes_now,
        files_now=files_now,
    )
    return result.with_refusals(refusals)


def _no_ssh(what: str) -> Refusal:
    return Refusal(
        "broker-host",
        f"{what}, and the cluster has no ssh_conn_id to put them back",
        "Nothing was planned; give the cluster an ssh_conn_id in the cluster file",
        None,
    )


def _written_versions(location: DrainLocation) -> dict[str, int]:
    """path -> the version the run's last versioned set produced (its change logs)."""
    out: dict[str, int] = {}
    for name in _change_log_names(location):
        for change in (_json_or_none(location, name) or {}).get("changes") or ():
            if change.get("op") == "SetDataOp" and change.get("new_version") is not None:
                out[str(change["path"])] = int(change["new_version"])
    return out


def _read_bytes(url: str) -> bytes | None:
    if not url:
        return None
    try:
        fs, path = fsspec.core.url_to_fs(url)
        return bytes(fs.cat_file(path))
    except (OSError, ValueError):
        return None


def _observe(hook: KafkaZooKeeperHook, path: str) -> ObservedZnode | None:
    try:
        data, stat = hook.get_znode(path)
    except ZnodeNotFoundError:
        return None
    return ObservedZnode(data, stat.version, stat.czxid)


def _files_now(host_hook: Any, removed: Sequence[RemovedFile]) -> dict[tuple[int, str], FileNow]:
    """Each removed file as read on its broker now (read-only; no symlink followed)."""
    from airflow_provider_kafka_zk.hooks.broker_partition_files import PartitionFile, read_partition_files

    out: dict[tuple[int, str], FileNow] = {}
    by_broker: dict[int, list[RemovedFile]] = {}
    for f in removed:
        by_broker.setdefault(f.broker_id, []).append(f)
    for broker, files in sorted(by_broker.items()):
        try:
            results = read_partition_files(
                host_hook,
                broker,
                [PartitionFile(f.log_dir, f.dir_name, f.name) for f in files],
                log_dirs=sorted({f.log_dir for f in files}),
            )
        except Exception as exc:  # the host cannot be read: each file says why
            results = [{"status": "refused", "detail": f"{type(exc).__name__}: {exc}"} for _ in files]
        for f, r in zip(files, results, strict=True):
            content = base64.b64decode(r["content_b64"]) if r.get("content_b64") else None
            out[(broker, f.path)] = FileNow(str(r["status"]), content, r.get("detail"))
    return out


def _plan_cleanup(
    original: OriginalRun,
    location: DrainLocation,
    hook: KafkaZooKeeperHook,
    hosts: Callable[[], Any | None],
    allow_running_broker_orphans: bool,
) -> UndoPlan:
    from airflow_provider_kafka_zk.kafka.logdir import parse_partition_dir_name

    verdicts = _json_or_none(location, "verdicts.json") or {}
    topic_of = {
        (int(d["broker_id"]), str(d["path"])): str(v["topic"])
        for v in [*(verdicts.get("verdicts") or ()), *(verdicts.get("verdicts_after_cleanup") or ())]
        for d in v.get("leftover_dirs") or ()
    }
    plan = _json_or_none(location, PLAN_FILE)  # kafka_zk_deletion_cleanup's plan: its moves name each topic
    try:
        planned = steps_from_dicts((plan or {}).get("steps") or ()) if isinstance(plan, dict) else []
    except (ValueError, KeyError, TypeError):
        planned = []
    topic_of.update(
        {(s.broker_id, d.path): d.topic for s in planned if isinstance(s, QuarantineMove) for d in s.dirs}
    )
    completed = _progress(location, "progress")
    results: list[tuple[int, str, Mapping[str, Any]]] = []
    for step_id, outcome in completed.items():
        if step_id.startswith("quarantine:broker-") and isinstance(outcome, Mapping):
            broker = int(step_id.rsplit("-", 1)[1])
            results += [(broker, str(outcome.get("host") or ""), r) for r in outcome.get("results") or ()]
    if not results:  # an older record: the cleanup report in verdicts.json
        for d in (verdicts.get("cleanup") or {}).get("directories") or ():
            results.append((int(d["broker_id"]), str(d.get("host") or ""), d))
    moved = []
    for broker, host, r in results:
        if r.get("status") not in ("moved", "already_moved") or not r.get("destination"):
            continue
        source, root = str(r["source"]), str(r["quarantine"])
        ts = str(r["destination"])[len(root.rstrip("/")) + 1 :].split("/", 1)[0]
        topic = topic_of.get((broker, source)) or parse_partition_dir_name(str(r["name"])).topic
        moved.append(
            MovedDir(
                broker,
                host,
                str(r["log_dir"]),
                str(r["name"]),
                str(r.get("kind") or "normal"),
                topic,
                root,
                ts,
            )
        )
    deleted = []
    saved = _saved_config_znodes(location)
    for step_id, outcome in completed.items():
        if step_id.startswith("delete-config:") and (outcome or {}).get("status") == "deleted":
            path = str(outcome.get("path") or f"/config/topics/{step_id.split(':', 1)[1]}")
            if path in saved:
                deleted.append(saved[path])
    if not completed:  # an older record: the cleanup report
        deleted += [
            saved[z["path"]]
            for z in (verdicts.get("cleanup") or {}).get("znodes") or ()
            if z.get("status") == "deleted" and z.get("path") in saved
        ]
    topics = sorted({d.topic for d in moved} | {c.topic for c in deleted})
    topics_back = {}
    for topic in topics:
        for path in (znodes.topic_path(topic), znodes.delete_topic_path(topic)):
            if hook.exists(path) is not None:
                topics_back[topic] = f"{hook.describe_path(path)} exists"
                break
    configs_now = {c.path: _observe(hook, c.path) for c in deleted}
    running = set(hook.live_broker_ids())
    dirs_now = None
    refusals = []
    host_hook = hosts() if moved else None
    if moved and host_hook is None:
        refusals.append(_no_ssh("the cleanup moved directories on broker hosts"))
    elif moved:
        dirs_now = _dirs_now(host_hook, moved, running, allow_running_broker_orphans)
    plan = plan_cleanup_undo(
        original,
        moved=moved,
        deleted=deleted,
        topics_back=topics_back,
        configs_now=configs_now,
        dirs_now=dirs_now,
        running=running,
        allow_running_broker_orphans=allow_running_broker_orphans,
    )
    return plan.with_refusals(refusals)


def _saved_config_znodes(location: DrainLocation) -> dict[str, DeletedConfig]:
    fs, root = fsspec.core.url_to_fs(location.url)
    out: dict[str, DeletedConfig] = {}
    for name in sorted(_ls(fs, f"{root}/rollback")):
        if not (name.startswith("znodes-") and name.endswith(".json")):
            continue
        for z in (_json_or_none(location, f"rollback/{name}") or {}).get("znodes") or ():
            data = z.get("data_base64")
            out[str(z["path"])] = DeletedConfig(
                str(z.get("topic") or str(z["path"]).rsplit("/", 1)[-1]),
                None if data is None else base64.b64decode(data),
                int(z.get("version") or 0),
            )
    return out


def _dirs_now(
    host_hook: Any, moved: Sequence[MovedDir], running: set[int], allow: bool
) -> dict[tuple[int, str], tuple[str, str | None]]:
    """Each quarantined directory as the host's restore script sees it now (a dry run)."""
    from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove, restore_directories

    out: dict[tuple[int, str], tuple[str, str | None]] = {}
    groups: dict[tuple[int, str, str], list[MovedDir]] = {}
    for d in moved:
        groups.setdefault((d.broker_id, d.quarantine, d.ts), []).append(d)
    for (broker, root, ts), dirs in sorted(groups.items()):
        try:
            found = restore_directories(
                host_hook,
                broker,
                [QuarantineMove(d.log_dir, d.name, root, d.kind) for d in dirs],
                log_dirs=sorted({d.log_dir for d in dirs}),
                ts=ts,
                dry_run=True,
                broker_running=broker in running,
                allow_running_broker_orphans=allow,
            )
            by_source = {r.get("source"): r for r in found["results"]}
            for d in dirs:
                r = by_source.get(d.source) or {"status": "refused", "detail": "no answer for it"}
                out[(broker, d.source)] = (str(r["status"]), r.get("detail"))
        except Exception as exc:  # the host cannot be asked: each directory says why
            for d in dirs:
                out[(broker, d.source)] = ("refused", f"{type(exc).__name__}: {exc}")
    return out


def earlier_undos(base: str, cluster: str, run_id: str, own: str) -> list[dict[str, Any]]:
    """Other undo runs of the same run (newest first), and what each said."""
    root = f"{base.rstrip('/')}/{cluster}/{UNDO_FOLDER}"
    fs, path = fsspec.core.url_to_fs(root)
    out = []
    for name in _ls(fs, path)[:SEARCH_LIMIT]:
        location = DrainLocation(f"{root}/{name}")
        if location.url.rstrip("/") == own.rstrip("/"):
            continue
        plan = _json_or_none(location, PLAN_FILE)
        undo = (plan or {}).get("undo") or {} if isinstance(plan, dict) else {}
        if (undo.get("original") or {}).get("run_id") != run_id:
            continue
        verify = _json_or_none(location, VERIFY_FILE) or {}
        out.append(
            {
                "run_id": plan.get("run_id"),
                "folder": location.url,
                "verdict": undo.get("verdict"),
                "verified": verify.get("ok"),
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# The operators
# ---------------------------------------------------------------------------------------------


def _host_hook(
    ssh_conn_id: Any, zk_conn_id: str, broker_hosts: Any, server_properties_path: Any
) -> Callable[[], Any | None]:
    """The broker hosts' hook, made (and its connections resolved) when first asked for: an undo
    that touches no broker disk needs no SSH connection. None without an ``ssh_conn_id``."""
    made: list[Any] = []

    def get() -> Any | None:
        if is_unset(ssh_conn_id):
            return None
        if not made:
            from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook

            hook = BrokerHostHook(
                str(ssh_conn_id),
                zk_conn_id,
                broker_hosts=_hosts(broker_hosts),
                server_properties_path=None
                if is_unset(server_properties_path)
                else str(server_properties_path),
            )
            hook.resolve_connections()
            made.append(hook)
        return made[0]

    return get


def _hosts(value: Any) -> dict[int | str, str] | None:
    if is_unset(value):
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value) if value else None


class UndoPlanOperator(BaseOperator):
    """Plan the way back from one mutating run of this provider (see the module docstring).

    :param cluster: the cluster the run changed (its artefact folder and connection).
    :param original_run_id: the Airflow run id of the run to undo.
    :param original_dag_id: its DAG (optional: found from the run id; a shipped DAG narrows the search).
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: the broker hosts' SSH connection (files and directories to put back).
    :param broker_hosts: broker id -> host overrides.
    :param server_properties_path: the brokers' server.properties.
    :param max_partitions_per_batch: at most this many partitions move back in one reassignment.
    :param max_bytes_per_batch: at most this many bytes move back in one reassignment (unset: no limit).
    :param allow_running_broker_orphans: move live-named directories back under a running broker too.
    :param base_path: the artefact store (default: the provider's configured base).
    :param artefacts_conn_id: the Airflow connection of a remote store.
    :param undo_ts: the run folder's name (default: this run's key).
    """

    template_fields: Sequence[str] = (
        "cluster",
        "original_run_id",
        "original_dag_id",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "max_partitions_per_batch",
        "max_bytes_per_batch",
        "allow_running_broker_orphans",
        "base_path",
        "artefacts_conn_id",
        "undo_ts",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        cluster: str,
        original_run_id: str,
        original_dag_id: str | None = None,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        ssh_conn_id: str | None = None,
        broker_hosts: Any = None,
        server_properties_path: str | None = None,
        max_partitions_per_batch: int | str = 100,
        max_bytes_per_batch: int | str | None = None,
        allow_running_broker_orphans: bool | str = False,
        base_path: str | None = None,
        artefacts_conn_id: str | None = None,
        undo_ts: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.original_run_id = original_run_id
        self.original_dag_id = original_dag_id
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.max_partitions_per_batch = max_partitions_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.allow_running_broker_orphans = allow_running_broker_orphans
        self.base_path = base_path
        self.artefacts_conn_id = artefacts_conn_id
        self.undo_ts = undo_ts

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.kafka.post_maintenance import batch_moves

        allow = parse_safety_flags(allow_running_broker_orphans=self.allow_running_broker_orphans)[
            "allow_running_broker_orphans"
        ]
        if is_unset(self.original_run_id) or not str(self.original_run_id).strip():
            raise UndoRefusedError(
                "undo",
                [Refusal("no-run", "no run id given", "Give run_id: the id of the DAG run to undo")],
                dry_run=False,
            )
        run_id = str(self.original_run_id).strip()
        dag_id = (
            None
            if is_unset(self.original_dag_id) or not str(self.original_dag_id).strip()
            else str(self.original_dag_id).strip()
        )
        max_partitions = positive_int(self.max_partitions_per_batch, "max_partitions_per_batch")
        max_bytes = (
            None
            if is_unset(self.max_bytes_per_batch)
            else positive_int(self.max_bytes_per_batch, "max_bytes_per_batch")
        )
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        kind, location, dag_id = find_original_run(base, self.cluster, run_id, dag_id)
        original = load_original(kind, location, run_id, dag_id)
        self.log.info(
            "Undoing %s (%s, %d cluster write(s) in %s)",
            original.label,
            kind.value,
            original.writes,
            location.url,
        )
        hosts = _host_hook(
            self.ssh_conn_id, self.kafka_zookeeper_conn_id, self.broker_hosts, self.server_properties_path
        )
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            identity = pin_zookeeper_identity(hook)
            lease, _ = read_lease(hook)
            common = run_refusals(
                original, identity_now=identity, lease=lease, run_state=self._run_state(context, original)
            )
            if any(r.rule == "another-cluster" for r in common):
                plan = UndoPlan(original)  # nothing of another cluster is read for a plan
            elif kind in (RunKind.DRAIN, RunKind.MOVE_BACK):
                plan = _plan_moves(original, location, hook)
            elif kind is RunKind.REPAIR:
                plan = _plan_repair(original, location, hook, hosts)
            else:
                plan = _plan_cleanup(original, location, hook, hosts, allow)
            if plan.nothing_to_do and not plan.already and original.writes and not plan.refusals:
                common.append(
                    Refusal(
                        "no-artefacts",
                        f"{original.label} wrote {original.writes} change(s) (its change logs: "
                        f"{', '.join(original.change_logs)}), but its records name nothing to put back",
                        "Nothing was planned; undo by hand from its change logs and rollback artefacts",
                        None,
                        (location.url,),
                    )
                )
            plan = plan.with_refusals(common)
            registered = hook.live_broker_ids()
        folder = DrainLocation(
            "/".join([base.rstrip("/"), self.cluster, UNDO_FOLDER, _resolve_ts(self.undo_ts, context)])
        )
        batches = (
            batch_moves(plan.moves, max_partitions=max_partitions, max_bytes=max_bytes) if plan.moves else []
        )
        document = plan_document(
            plan,
            cluster=self.cluster,
            run_id=context.get("run_id"),
            identity=identity,
            batches=batches,
            max_partitions_per_batch=max_partitions,
            max_bytes_per_batch=max_bytes,
            created_at=datetime.now(UTC).isoformat(),
            registered=registered,
            earlier_undos=earlier_undos(base, self.cluster, run_id, folder.url),
        )
        # the rollback of the undo (how the cluster is before it) exists before anything else does
        folder.write(ROLLBACK_FILE, json.dumps(rollback_document(plan, cluster=self.cluster), indent=1))
        folder.write(PLAN_FILE, json.dumps(document, indent=1))
        summary = describe(document)
        folder.write(SUMMARY_FILE, summary)
        if plan.nothing_to_do and not plan.refusals:
            folder.write(REPORT_FILE, summary)
        self.log.info("Undo plan %s\n%s", folder.url, summary)
        if plan.refusals:
            raise UndoRefusedError(f"undo of {original.label}", plan.refusals, dry_run=False)
        return {
            "plan_dir": folder.url,
            "undoes": original.to_dict(),
            "nothing_to_do": plan.nothing_to_do,
            "verdict": plan.verdict(),
            "moves": len(plan.moves),
            "batches": len(batches),
            "steps": len(plan.steps),
        }

    def _run_state(self, context: Context, original: OriginalRun) -> str | None:
        """The run's state in Airflow (None when it cannot be asked, e.g. the run is gone from the database)."""
        ti = context.get("ti")
        if ti is None or not original.dag_id or not hasattr(ti, "get_dagrun_state"):
            return None
        try:
            state = ti.get_dagrun_state(original.dag_id, original.run_id)
        except Exception as exc:  # a run deleted from the database: its artefacts and the lease still count
            self.log.warning(
                "The state of %s cannot be read (%s): judged from its artefacts and the lease",
                original.label,
                exc,
            )
            return None
        self.log.info("%s is %s in Airflow", original.label, state)
        return None if state is None else str(getattr(state, "value", state))


class UndoExecuteOperator(BatchWaitMixin, BaseOperator):
    """Carry out an undo plan on the step executor (see :func:`~airflow_provider_kafka_zk.maintenance.
    undo.execute_undo`): every remaining step checked before the first write (the dry run, the
    default, runs every check and writes nothing), then applied in order; a batch of partitions
    moving back waits in the triggerer and the task resumes from ``progress.json``.

    :param plan_dir: the undo run's folder (the plan task's ``plan_dir``).
    :param throttle_bytes_per_sec: the replication throttle of the moves back, bytes per second.
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: the broker hosts' SSH connection (files and directories to put back).
    :param broker_hosts: broker id -> host overrides.
    :param server_properties_path: the brokers' server.properties.
    :param dry_run: only check and log (the default).
    :param poll_interval: seconds between looks at a running reassignment or a controller election.
    :param batch_timeout: seconds a batch may take before the task fails (it keeps running).
    :param health_timeout: seconds to wait for healthy partitions after a controller move.
    :param artefacts_conn_id: the Airflow connection of a remote store.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "throttle_bytes_per_sec",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "dry_run",
        "poll_interval",
        "batch_timeout",
        "health_timeout",
        "artefacts_conn_id",
    )
    ui_color = "#fadbd8"
    WAIT_LABEL = "undo"

    def __init__(
        self,
        *,
        plan_dir: str,
        throttle_bytes_per_sec: int | str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        ssh_conn_id: str | None = None,
        broker_hosts: Any = None,
        server_properties_path: str | None = None,
        dry_run: bool | str = True,
        poll_interval: float | str = 10.0,
        batch_timeout: float | str = 6 * 3600,
        health_timeout: float | str = 120.0,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.throttle_bytes_per_sec = throttle_bytes_per_sec
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.dry_run = dry_run
        self.poll_interval = poll_interval
        self.batch_timeout = batch_timeout
        self.health_timeout = health_timeout
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        if is_unset(self.plan_dir):
            raise DrainError("no undo plan to execute (the plan task produced none)")
        return self._run(context, waited=None)

    def _run(self, context: Context, waited: tuple[int, str] | None) -> dict[str, Any]:
        from airflow_provider_kafka_zk.maintenance.undo import execute_undo
        from airflow_provider_kafka_zk.operators.approved_plan import approved_plan

        dry_run = parse_safety_flags(dry_run=self.dry_run)["dry_run"]
        rate = positive_int(self.throttle_bytes_per_sec, "throttle_bytes_per_sec")
        folder = artefacts_url(str(self.plan_dir), self.artefacts_conn_id)
        plan = load_plan(folder)
        batches = plan_batches(plan)
        original = (plan.get("undo") or {}).get("original") or {}
        if not original.get("identity"):
            raise UndoRefusedError(
                "undo",
                [
                    Refusal(
                        "no-artefacts",
                        f"{folder}/plan.json names no identity of the run it undoes",
                        "Plan again",
                    )
                ],
                dry_run=dry_run,
            )
        expected = ClusterIdentity.from_dict(original["identity"], f"{folder}/plan.json")
        if (plan.get("undo") or {}).get("nothing_to_do"):
            self.log.info("Nothing to undo: %s", (plan.get("undo") or {}).get("verdict"))
            return {"plan_dir": self.plan_dir, "dry_run": dry_run, "ran": []}
        result = execute_undo(
            folder,
            plan,
            batches,
            UndoSettings(
                str(self.kafka_zookeeper_conn_id),
                None if is_unset(self.ssh_conn_id) else str(self.ssh_conn_id),
                _hosts(self.broker_hosts),
                None if is_unset(self.server_properties_path) else str(self.server_properties_path),
                poll_interval=float(self.poll_interval),
                batch_timeout=float(self.batch_timeout),
                health_timeout=float(self.health_timeout),
            ),
            rate=rate,
            run=RunIdentity.from_context(context, fallback_run_id=folder),
            dry_run=dry_run,
            expected=expected,
            defer_wait=lambda step: self._defer_until_done(batches, step.batch, str(plan["cluster"]), rate),
            waited=waited,
            approval=approved_plan(self, context),
        )
        if dry_run:
            self.log.info("DRY RUN: nothing was written; every step was checked and is described above")
        else:
            self.log.info("Undo carried out: %d step(s) this try", len(result.ran))
        return {"plan_dir": self.plan_dir, "dry_run": dry_run, "ran": list(result.ran)}


class UndoVerifyOperator(BaseOperator):
    """Read back what the undo put back and write ``verify.json`` and ``report.txt``; fail on any
    difference: partitions where they were (with a leader among them and a full ISR), no throttle of
    the undone run or of the undo left, topic and config znodes holding the bytes from before the
    run, files holding their copies, directories back in their log dirs (the hosts' restore script,
    as a dry run, finds each one back).

    :param plan_dir: the undo run's folder.
    :param kafka_zookeeper_conn_id: the cluster's ZooKeeper connection.
    :param ssh_conn_id: the broker hosts' SSH connection (files and directories).
    :param broker_hosts: broker id -> host overrides.
    :param server_properties_path: the brokers' server.properties.
    :param artefacts_conn_id: the Airflow connection of a remote store.
    """

    template_fields: Sequence[str] = (
        "plan_dir",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "broker_hosts",
        "server_properties_path",
        "artefacts_conn_id",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        plan_dir: str,
        kafka_zookeeper_conn_id: str = KafkaZooKeeperHook.default_conn_name,
        ssh_conn_id: str | None = None,
        broker_hosts: Any = None,
        server_properties_path: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_dir = plan_dir
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.ssh_conn_id = ssh_conn_id
        self.broker_hosts = broker_hosts
        self.server_properties_path = server_properties_path
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.hooks.zookeeper_drain import read_states, throttles_still_set

        location = DrainLocation(artefacts_url(str(self.plan_dir), self.artefacts_conn_id))
        plan = load_plan(location.url)
        batches = plan_batches(plan)
        steps = undo_steps(plan)
        problems: list[str] = []
        checked: list[str] = []
        hosts = _host_hook(
            self.ssh_conn_id, self.kafka_zookeeper_conn_id, self.broker_hosts, self.server_properties_path
        )
        with KafkaZooKeeperHook(self.kafka_zookeeper_conn_id) as hook:
            moves = [m for b in batches for m in b]
            states = read_states(hook, [(m.topic, m.partition) for m in moves])
            for m in moves:
                path = znodes.topic_path(m.topic)
                now = _observe(hook, path)
                replicas = (
                    None
                    if now is None
                    else znodes.TopicAssignment.decode(now.data, path).partitions.get(m.partition)
                )
                state = states.get((m.topic, m.partition))
                where = f"{m.topic}-{m.partition}"
                if replicas is None or list(replicas) != list(m.target):
                    problems.append(f"{where}: replicas {replicas}, expected {list(m.target)} (where it was)")
                elif state is None or state.leader not in m.target or set(state.isr) != set(m.target):
                    problems.append(
                        f"{where}: leader {getattr(state, 'leader', None)}, ISR {getattr(state, 'isr', None)}"
                    )
                else:
                    checked.append(f"{where} on {list(m.target)}, leader {state.leader}, full ISR")
            entities: dict[str, dict[str, str]] = {}
            if location.exists(THROTTLES_FILE):
                entities.update(load_throttle_record(location)["entities"])
            for step in steps:
                if step.kind == "throttle_clear":
                    entities.setdefault(step.entity_key, {}).update(dict(step.keys))  # type: ignore[attr-defined]
            left = throttles_still_set(hook, entities)
            if left:
                problems.append(f"throttles still set: {left}")
            elif entities:
                checked.append(f"no throttle left on {', '.join(sorted(entities))}")
            for step in steps:
                if isinstance(step, TopicIdWrite | ConfigZnodeRestore):
                    want = step.new_data if isinstance(step, TopicIdWrite) else (step.data or b"")
                    now = _observe(hook, step.path)
                    if now is None or (now.data or b"") != want:
                        problems.append(f"{step.path} does not hold its bytes from before the run")
                    else:
                        checked.append(
                            f"{step.path} holds its bytes from before the run (version {now.version})"
                        )
                elif isinstance(step, QuarantineRestore | PartitionFileRestore):
                    problems += self._host_check(step, hosts(), checked)
        result = {
            "plan_dir": location.url,
            "verified_at": datetime.now(UTC).isoformat(),
            "ok": not problems,
            "problems": problems,
            "checked": checked,
        }
        location.write(VERIFY_FILE, json.dumps(result, indent=1))
        summary = location.read_text(SUMMARY_FILE) if location.exists(SUMMARY_FILE) else ""
        verdict = "Verification: OK" if not problems else f"Verification FAILED ({len(problems)} problem(s))"
        report = "\n".join(
            [verdict, *[f"  - {p}" for p in problems], *[f"  ok: {c}" for c in checked], "", summary]
        )
        location.write(REPORT_FILE, report)
        self.log.info("%s", report)
        if problems:
            raise DrainError(f"undo not verified ({len(problems)} problem(s)): " + "; ".join(problems[:10]))
        return {"ok": True, "report": location.path(REPORT_FILE), "verify": location.path(VERIFY_FILE)}

    def _host_check(self, step: Any, host_hook: Any | None, checked: list[str]) -> list[str]:
        """A restore step read back on its broker host (a dry run of the same script)."""
        from airflow_provider_kafka_zk.hooks.broker_partition_files import PartitionFile, read_partition_files
        from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantineMove, restore_directories

        if host_hook is None:
            return [f"broker {step.broker_id}: no ssh_conn_id to read back what was put back"]
        if isinstance(step, QuarantineRestore):
            found = restore_directories(
                host_hook,
                step.broker_id,
                [QuarantineMove(d.log_dir, d.name, step.quarantine_dir, d.kind) for d in step.dirs],
                log_dirs=sorted({d.log_dir for d in step.dirs}),
                ts=step.ts,
                dry_run=True,
                broker_running=step.broker_running,
                allow_running_broker_orphans=True,  # a read-back: nothing moves
            )
            problems = []
            for r in found["results"]:
                if r["status"] == "already_restored":
                    checked.append(f"broker {step.broker_id}: {r['source']} back in its log dir")
                else:
                    problems.append(
                        f"broker {step.broker_id}: {r.get('source')}: {r['status']} ({r.get('detail')})"
                    )
            return problems
        results = read_partition_files(
            host_hook,
            step.broker_id,
            [PartitionFile(f.log_dir, f.dir_name, f.name) for f in step.files],
            log_dirs=sorted({f.log_dir for f in step.files}),
        )
        problems = []
        for f, r in zip(step.files, results, strict=True):
            content = base64.b64decode(r["content_b64"]) if r.get("content_b64") else None
            if content == f.content:
                checked.append(f"broker {step.broker_id}: {f.path} holds its copy from before the run")
            else:
                problems.append(
                    f"broker {step.broker_id}: {f.path}: {r['status']}, not the copy from before the run"
                )
        return problems


__all__ = [
    "UndoExecuteOperator",
    "UndoPlanOperator",
    "UndoVerifyOperator",
    "earlier_undos",
    "find_original_run",
    "load_original",
]
