"""Undo a change this provider made: the way back, planned without I/O.

Every mutating run of this provider leaves beside its plan what it changed and how it was before:
the drain's and the move-back's ``rollback.json`` (each moved partition's replicas before) and
``throttles.json`` (the throttle values it set), the topicId repair's completed topic-id writes
(``progress.json``: the version each write produced) with the bytes before (``plan.json``) and the
copies of the files it removed (``rollback-files.json``), the deletion cleanup's quarantine moves
(their sources and destinations on each broker) and the config znodes it saved before deleting them.
The ``kafka_zk_undo`` DAG reads them (:mod:`airflow_provider_kafka_zk.operators.undo`), reads the
cluster now, and hands both to the planners here, which decide -- one typed step per change, from
:mod:`.steps` -- the way back:

* **drain / move-back**: every partition the run moved that is still where the run put it, in the
  topic the run moved (topic id and znode czxid), goes back where it was through a throttled
  reassignment (the drain's own batches: :class:`~.steps.ThrottleSet` + :class:`~.steps.DrainBatch`,
  then its throttles removed); throttle values of the run still in place are removed
  (:class:`~.steps.ThrottleClear`). A preferred leader election is not undone (a later election or
  failover moves leadership again): said, never attempted.
* **topicId repair**: every topic znode the run wrote goes back to its bytes before, as a versioned
  write expecting exactly the version and bytes the run's write produced
  (:class:`~.steps.TopicIdWrite`, all in one multi-op); when the run moved the controller so the
  brokers loaded the new id, the undo moves it again (:class:`~.steps.ControllerMove`) so they load
  the old one; ``partition.metadata`` files a ``file_reset`` removed are written back
  (:class:`~.steps.PartitionFileRestore`). Restarts are not undone; a restored file is read at the
  broker's next start.
* **deletion cleanup**: every directory the cleanup quarantined moves back to its log dir
  (:class:`~.steps.QuarantineRestore`), every config znode it deleted is created again with the saved
  bytes (:class:`~.steps.ConfigZnodeRestore`).

It refuses -- :class:`~.steps.Refusal` with a stable rule, the znode / file / broker / partition and
what to do -- when the run left no artefacts to undo from, is still running or holds the cluster's
maintenance lease, was made on another cluster, or when anything changed since the run wrote it (a
znode at another version or with other bytes, a partition moved since, a topic created again, a
quarantined directory's original place occupied or the directory gone). What is already as it was
before the run counts as done: a second undo of the same run plans nothing and says so.

Restoring a quarantined directory under a running broker follows Kafka's own behaviour (3.3.1,
``core/src/main/scala/kafka/log/LogManager.scala``): a broker reads its log dirs only when it starts
(``loadLogs``, called from ``startup``) and never rescans them, so a ``-delete`` or ``-stray``
directory put back under a running broker waits there, untouched, until the broker's next start,
where ``loadLog`` queues a ``-delete`` one for deletion again (``addLogToBeDeleted``) -- exactly what
would have happened without the cleanup. A live-named directory is different: a running broker asked
to host that partition (a topic created again under the name) reuses an existing directory
(``getOrCreateLog`` -> ``createLogDirectory`` -> ``Files.createDirectories``) and loads its segments
as the new topic's log (``UnifiedLog.initializeTopicId`` throws ``InconsistentTopicIdException`` when
its ``partition.metadata`` holds the deleted topic's id, and adopts the records when it has none). So
live-named directories go back only while their broker is stopped (unless the person allows it), as
the cleanup moved them; the undo refuses while the topic exists again, either way.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .drain import Move, human_bytes
from .kraft_migration_plan import MIGRATION_DAG_ID, MIGRATION_FOLDER  # its runs: migration_run_refusal
from .post_maintenance import DrainedMove, plan_move_back
from .safety import ClusterIdentity, LeaseHolder, identity_differences
from .steps import (
    ConfigZnodeRestore,
    ControllerMove,
    HealthWait,
    ObservedZnode,
    PartitionFileRestore,
    QuarantineDir,
    QuarantineRestore,
    Refusal,
    RestoredFile,
    Step,
    StepState,
    ThrottleClear,
    TopicIdWrite,
    ZnodeExpectation,
    content_id,
    znode_verdict,
)

UNDO_DAG_ID = "kafka_zk_undo"
UNDO_FOLDER = "undo"
"""The undo runs' folder under ``<base>/<cluster>/``."""
PLAN_KIND = "undo"
"""``plan.json``'s ``kind`` of an undo (a drain-shaped plan: its batches are the moves back)."""
PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
IN_FLIGHT_STATES = ("queued", "running", "restarting", "up_for_retry", "scheduled", "deferred")
"""Airflow DAG run states of a run that may still change the cluster."""
BY_HAND = (
    "by hand only if the kafka_zk_undo DAG cannot run (it checks versions and bytes first, and reaches "
    "TLS/SASL/Kerberos ensembles through the provider's connection; this command carries no such options)"
)
"""How a rollback record labels a hand command: the fallback, not the way."""


class RunKind(enum.StrEnum):
    """The kind of run an undo undoes (and the folder under ``<base>/<cluster>/`` it wrote)."""

    DRAIN = "drain"
    MOVE_BACK = "post-maintenance"
    REPAIR = "topic-id-repair"
    CLEANUP = "deletion-cleanup"

    @property
    def folders(self) -> tuple[str, ...]:
        """Where runs of this kind keep their artefacts, under ``<base>/<cluster>/``."""
        return {RunKind.CLEANUP: ("deletion-cleanup", "deletions")}.get(self, (self.value,))


DAG_KINDS: dict[str, RunKind] = {
    "kafka_zk_pre_maintenance_drain": RunKind.DRAIN,
    "kafka_zk_post_maintenance": RunKind.MOVE_BACK,
    "kafka_zk_topic_id_repair": RunKind.REPAIR,
    "kafka_zk_deletion_cleanup": RunKind.CLEANUP,
}
"""The shipped mutating DAGs and the kind of run each makes. A deletion cleanup run by
``TopicDeletionVerifyOperator(cleanup=True)`` in a team's own DAG is found by its run id alone."""


def kind_of_folder(folder_kind: str) -> RunKind | None:
    """The run kind whose artefacts live in ``<base>/<cluster>/<folder_kind>/`` (None: no undoable kind)."""
    for kind in RunKind:
        if folder_kind in kind.folders:
            return kind
    return None


# ---------------------------------------------------------------------------------------------
# How rollback records and alerts name the undo
# ---------------------------------------------------------------------------------------------


def undo_conf(
    cluster: str, run_id: str, dag_id: str | None = None, *, dry_run: bool = True
) -> dict[str, Any]:
    """The ``kafka_zk_undo`` conf that undoes run ``run_id`` of ``cluster`` (a dry run by default)."""
    conf: dict[str, Any] = {"cluster": cluster, "run_id": run_id}
    if dag_id:
        conf["dag_id"] = dag_id
    conf["dry_run"] = dry_run
    return conf


def trigger_command(dag_id: str, conf: Mapping[str, Any]) -> str:
    """``airflow dags trigger <dag> --conf '<json>'`` as a person pastes it."""
    text = json.dumps(dict(conf), separators=(", ", ": ")).replace("'", "'\\''")
    return f"airflow dags trigger {dag_id} --conf '{text}'"


@dataclass(frozen=True)
class MigrationRunRecord:
    """What a ``kafka_zk_kraft_migration`` run's folder says (None: the file or the field is missing).

    :param folder: the run's folder.
    :param direction: ``forward`` or ``back`` (its ``plan.json``).
    :param from_phase: the phase it planned from (``plan.json``; its ``signals.json`` before a plan).
    :param to_phase: the phase its plan leads to.
    :param verified_phase: the phase its verify step read at its end (``verify.json``).
    :param verified: whether it has a ``verify.json``.
    :param steps_done: steps its ``progress.json`` records completed.
    :param steps_planned: steps of its plan.
    """

    folder: str
    direction: str | None = None
    from_phase: str | None = None
    to_phase: str | None = None
    verified_phase: str | None = None
    verified: bool = False
    steps_done: int = 0
    steps_planned: int = 0

    @property
    def phase_now(self) -> tuple[str | None, str]:
        """The cluster's phase as far as the run's artefacts know it, and how they know it."""
        if self.verified:
            if self.verified_phase:
                return (
                    self.verified_phase,
                    f"read by the run's verify step at its end ({self.folder}/verify.json)",
                )
            return None, f"the run's verify step could not tell it ({self.folder}/verify.json)"
        if self.steps_planned and self.steps_done >= self.steps_planned and self.to_phase:
            return self.to_phase, (
                f"every step of the run's plan completed ({self.folder}/progress.json), not verified after"
            )
        if self.steps_done:
            return None, (
                f"the run stopped after {self.steps_done} of {self.steps_planned} steps ({self.folder}/"
                f"progress.json): between {self.from_phase} and {self.to_phase}"
            )
        if self.from_phase:
            return (
                self.from_phase,
                f"the run changed nothing; its plan read this phase ({self.folder}/plan.json)",
            )
        return None, f"no plan, progress or verify record in {self.folder}"


def migration_run_refusal(cluster: str, run_id: str, record: MigrationRunRecord | None) -> Refusal:
    """``kafka_zk_undo`` asked to undo a migration run: the way back is the migration DAG's own run in the
    other direction, which plans the revert from every signal of the cluster as it is now (the undo reads
    only what a run wrote) -- with the exact command, and the phase the run's artefacts know."""
    direction = "forward" if record is not None and record.direction == "back" else "back"
    dry = {"cluster": cluster, "direction": direction, "dry_run": True}
    real = dict(dry, dry_run=False)
    phase, source = record.phase_now if record is not None else (None, "")
    where = f" ({record.folder})" if record is not None else ""
    if phase is not None:
        known = f"The cluster's phase by that run's artefacts: {phase} ({source})"
    elif record is not None:
        known = f"The cluster's phase is not known from that run's artefacts ({source})"
    else:
        known = f"No folder of that run under <base>/{cluster}/{MIGRATION_FOLDER}/ tells its phase"
    if phase == "finalized":
        way = (
            "A finalized migration has no way back to ZooKeeper (Kafka's docs, 'Finalizing the migration'): "
            "a back run refuses"
        )
    elif direction == "forward":
        way = (
            f"That run went back; to move forward again trigger {MIGRATION_DAG_ID} with direction forward, a dry "
            "run first, then the real run (it waits for a person's approval)"
        )
    else:
        way = (
            f"Trigger {MIGRATION_DAG_ID} with direction back: it reads the phase the cluster is in now and "
            "plans its revert (Kafka's table, with deleteall, the chroot and /migration removed), one phase per "
            "run (from KRaft brokers: back to ZooKeeper-mode brokers first, a second back run ends in ZooKeeper "
            "mode) -- it refuses, naming every signal, when they disagree; a dry run first, then the real run "
            "(it waits for a person's approval)"
        )
    return Refusal(
        "migration-run",
        f"{run_id} is a run of {MIGRATION_DAG_ID}{where}: {UNDO_DAG_ID} does not undo a ZooKeeper-to-KRaft "
        f"migration run, the migration DAG's {direction} run does. {known}",
        f"Nothing was planned. {way}: {trigger_command(MIGRATION_DAG_ID, dry)} then "
        f"{trigger_command(MIGRATION_DAG_ID, real)}",
        None,
        (run_id, MIGRATION_DAG_ID),
    )


def undo_record(cluster: str, run_id: str | None, dag_id: str | None) -> dict[str, Any]:
    """What a rollback record says first: the DAG that undoes the run, with the exact conf (a dry
    run, then the real one). ``run_id`` None: a run outside Airflow (a script), which no DAG finds."""
    if not run_id:
        return {
            "dag_id": UNDO_DAG_ID,
            "note": "this run has no Airflow run id (run outside a DAG): the records below are the undo",
        }
    dry, real = undo_conf(cluster, run_id, dag_id), undo_conf(cluster, run_id, dag_id, dry_run=False)
    return {
        "dag_id": UNDO_DAG_ID,
        "conf": real,
        "dry_run_command": trigger_command(UNDO_DAG_ID, dry),
        "command": trigger_command(UNDO_DAG_ID, real),
        "note": "the undo checks every znode, partition, file and directory against what this run left "
        "before it writes, waits for a person's approval, and reaches secured ensembles through the "
        "cluster's connection",
    }


def undo_pointer(cluster: str, run_id: str | None, dag_id: str | None) -> dict[str, Any]:
    """What a rollback artefact written while run ``run_id`` changes the cluster names first: the
    undo DAG with the exact conf (:func:`undo_record`). An undo's own artefacts say how to make the
    undone change again instead (an undo is not undone by another undo); a run outside a DAG
    (``(no DAG)``) is undone by its DAG-less run id."""
    if dag_id == UNDO_DAG_ID:
        return {
            "note": "this run is an undo: to make the change it undid again, trigger the DAG that made it (it "
            "plans from the cluster as it then is)"
        }
    return undo_record(cluster, run_id, None if dag_id in (None, "", "(no DAG)") else dag_id)


# ---------------------------------------------------------------------------------------------
# The run being undone, and the refusals every kind shares
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OriginalRun:
    """The run an undo undoes, as its artefacts describe it.

    :param kind: what the run did.
    :param dag_id: its DAG (None: unknown, e.g. a cleanup in a team's own DAG without a record).
    :param run_id: its Airflow run id.
    :param folder: its artefact folder.
    :param identity: the cluster it pinned (``identity.json``; else its plan's), None when neither.
    :param writes: cluster writes its change logs list (the maintenance lease and the approval
        decision apart); 0 for a dry run or a run refused before its first write.
    :param change_logs: its ``changes-*.json`` names (what tells it wrote).
    """

    kind: RunKind
    dag_id: str | None
    run_id: str
    folder: str
    identity: ClusterIdentity | None
    writes: int = 0
    change_logs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.dag_id or self.kind.value} run {self.run_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "folder": self.folder,
            "identity": None if self.identity is None else self.identity.to_dict(),
            "writes": self.writes,
            "change_logs": list(self.change_logs),
        }


def run_refusals(
    original: OriginalRun,
    *,
    identity_now: ClusterIdentity,
    lease: LeaseHolder | None,
    run_state: str | None,
) -> list[Refusal]:
    """Why no undo of ``original`` may be planned now, whatever it did (empty: none).

    :param identity_now: the cluster behind the undo's connection now.
    :param lease: the cluster's maintenance lease holder now (None: no lease).
    :param run_state: the run's Airflow state (None: not known, e.g. the run is gone from the database).
    """
    out: list[Refusal] = []
    if original.writes and original.identity is None:
        out.append(
            Refusal(
                "no-artefacts",
                f"{original.label} wrote {original.writes} change(s) but its folder {original.folder} holds no "
                "identity.json and no plan naming the cluster: which cluster it changed cannot be proven",
                "Nothing was planned; undo by hand from its changes-*.json and rollback artefacts",
                None,
                (original.folder,),
            )
        )
    if original.identity is not None:
        problems = identity_differences(original.identity, identity_now)
        if problems:
            out.append(
                Refusal(
                    "another-cluster",
                    f"the undo's connection reaches another cluster than {original.label} changed: "
                    + "; ".join(problems),
                    "Nothing was planned; trigger the undo with the cluster that run changed (its identity.json "
                    "names it)",
                    None,
                    ("/cluster/id",),
                )
            )
    if run_state in IN_FLIGHT_STATES:
        out.append(
            Refusal(
                "run-in-flight",
                f"{original.label} is still {run_state} in Airflow: it may still change the cluster",
                "Nothing was planned; let it finish (or fail) first, then undo it",
                None,
                (original.run_id,),
            )
        )
    if (
        lease is not None
        and lease.run_id == original.run_id
        and (original.dag_id is None or lease.dag_id == original.dag_id)
    ):
        out.append(
            Refusal(
                "lease-held-by-run",
                f"{original.label} still holds the cluster's maintenance lease ({lease.describe()}): it is part-way "
                "through its change",
                "Nothing was planned; finish it (clear its failed task: it resumes and gives the lease back) or, "
                "if it is dead, wait for the lease to expire, then undo it",
                None,
                ("/kafka_zk_maintenance/lease",),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UndoPlan:
    """The way back from one run, or why there is none now.

    :param original: the run undone.
    :param steps: the typed steps that are not partition moves, in order (restores, throttle clears).
    :param moves: partitions that go back (current = where the run put them, target = where they were);
        the operator batches them into the drain-shaped plan's batches.
    :param refusals: why the undo may not run (nothing is written while there is one).
    :param already: what is already as it was before the run (done by an earlier undo, a move-back,
        a person): counted as done.
    :param not_undone: what no undo puts back, with why (an election, a restart, a rebuilt file).
    :param notes: what a person must know about the state the undo restores.
    :param incarnations: topic -> (topic id, czxid) of every topic whose partitions move back.
    """

    original: OriginalRun
    steps: tuple[Step, ...] = ()
    moves: tuple[Move, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    already: tuple[str, ...] = ()
    not_undone: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    incarnations: Mapping[str, tuple[str | None, int | None]] = field(default_factory=dict)

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps and not self.moves

    def with_refusals(self, refusals: Iterable[Refusal]) -> UndoPlan:
        return UndoPlan(
            self.original,
            self.steps,
            self.moves,
            (*self.refusals, *refusals),
            self.already,
            self.not_undone,
            self.notes,
            self.incarnations,
        )

    def verdict(self) -> str:
        """One sentence: what the undo does, or why it does nothing."""
        label = self.original.label
        if self.refusals:
            rules = sorted({r.rule for r in self.refusals})
            return f"Undo of {label} refused: {len(self.refusals)} problem(s) ({', '.join(rules)}); nothing will be written"
        if self.nothing_to_do:
            if not self.original.writes:
                return f"Nothing to undo: {label} changed nothing on the cluster (a dry run, or refused before its first write)"
            return (
                f"Nothing to undo: everything {label} changed is already as it was before it "
                f"({len(self.already)} item(s) already back)"
            )
        parts = []
        if self.moves:
            size = sum(m.size_bytes for m in self.moves)
            parts.append(f"move {len(self.moves)} partition(s) ({human_bytes(size)}) back")
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.kind] = counts.get(step.kind, 0) + 1
        names = {
            ThrottleClear.KIND: "remove the run's throttles from {} config entit(ies)",
            TopicIdWrite.KIND: "write {} topic znode(s) back",
            ControllerMove.KIND: "move the controller ({}x) so the brokers load the restored ids",
            PartitionFileRestore.KIND: "write removed files back on {} broker(s)",
            QuarantineRestore.KIND: "move quarantined directories back on {} broker(s)",
            ConfigZnodeRestore.KIND: "create {} deleted config znode(s) again",
        }
        parts += [names[k].format(n) for k, n in counts.items() if k in names]
        return f"Undo of {label}: " + "; ".join(parts)


def _plan_id(prefix: str, *parts: Any) -> str:
    return content_id(f"undo:{prefix}", *parts)


# --- drain and move-back ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MovesNow:
    """The cluster now, as a moves undo needs it.

    :param assignment: every partition of the run's topics -> its replicas (topic znodes).
    :param reassigning: partitions with a reassignment in flight.
    :param topics: topic -> (topic id, czxid) of the run's topics that exist.
    :param registered: brokers in ``/brokers/ids``.
    :param throttles: ``<type>/<name>`` -> that config entity's config now (None: no znode) for every
        entity the run recorded in ``throttles.json``.
    """

    assignment: Mapping[tuple[str, int], tuple[int, ...]]
    reassigning: Collection[tuple[str, int]] = ()
    topics: Mapping[str, tuple[str | None, int]] = field(default_factory=dict)
    registered: Collection[int] = ()
    throttles: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)


_MOVE_ACTIONS = {
    "partition-gone": "Nothing was planned; the partition was deleted since the run: undo nothing of it by hand",
    "topic-recreated": "Nothing was planned; the topic is not the one the run moved: its data must stay where it is",
    "reassignment-in-flight": "Nothing was planned; wait for the reassignment to finish, then undo again",
    "partition-moved-since": "Nothing was planned; someone moved it after the run: put it where you want it by "
    "hand, or (for a drain) use kafka_zk_post_maintenance with this drain_run, which leaves such partitions alone",
    "replica-count-changed": "Nothing was planned; its replica count changed since the run: move it by hand",
    "broker-not-registered": "Nothing was planned; start the broker(s) (a replica assigned to a broker that is "
    "down never joins the ISR), then undo again",
}


def plan_moves_undo(
    original: OriginalRun,
    moved: Sequence[DrainedMove],
    throttles_set: Mapping[str, Mapping[str, str]],
    now: MovesNow,
    *,
    sizes: Mapping[tuple[str, int], int] | None = None,
    election: bool = False,
) -> UndoPlan:
    """The undo of a drain or a post-maintenance move-back.

    :param moved: the run's moves: ``original`` = where each partition was before the run,
        ``drained_to`` = where the run put it, with the topic's incarnation the run read.
    :param throttles_set: ``throttles.json``'s entities: what the run set (``<type>/<name>`` -> keys).
    :param now: the cluster now.
    :param sizes: partition sizes now (else the run's).
    :param election: the run also elected preferred leaders (said as not undone).
    """
    back = plan_move_back(
        moved,
        now.assignment,
        reassigning=now.reassigning,
        sizes=sizes,
        topics=now.topics,
        registered=now.registered,
    )
    refusals = [
        Refusal(
            u.rule or "partition-moved-since",
            f"{u.topic}-{u.partition}: {u.reason}",
            _MOVE_ACTIONS.get(u.rule, "Nothing was planned"),
            None,
            (f"{u.topic}-{u.partition}",),
        )
        for u in back.untouched
    ]
    already = [f"{t}-{p} is where it was before the run" for t, p in back.already_back]
    steps: list[Step] = []
    for key, ours in sorted(throttles_set.items()):
        current = now.throttles.get(key)
        left = tuple(
            sorted((k, str(v)) for k, v in ours.items() if current is not None and current.get(k) == v)
        )
        if not left:
            already.append(f"the run's throttles on /config/{key} are gone")
            continue
        entity_type, name = key.split("/", 1)
        steps.append(
            ThrottleClear(
                id=_plan_id(f"clear-run-throttles:{key}", left),
                entity_type=entity_type,
                entity_name=name,
                keys=left,
            )
        )
    incarnations = {
        m.topic: (m.topic_id, m.topic_czxid) for m in moved if m.topic in {x.topic for x in back.moves}
    }
    not_undone = []
    if election:
        not_undone.append(
            "the run's preferred leader election is not undone: leadership is not a placement to restore, and a "
            "later election or failover moves it again (election.json lists what it elected)"
        )
    return UndoPlan(
        original,
        tuple(steps),
        tuple(back.moves),
        tuple(refusals),
        tuple(already),
        tuple(not_undone),
        (),
        incarnations,
    )


# --- topicId repair -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairWrite:
    """A topic-id write the repair completed: the step and the version its write produced."""

    step: TopicIdWrite
    version_after: int


@dataclass(frozen=True)
class RemovedFile:
    """A file a ``file_reset`` removed, with the copy it took first.

    :param content: the copy's bytes (None: the copy cannot be read).
    :param sha256: the sha256 the repair recorded for it.
    :param target_id: the id the replica was made to adopt (ZooKeeper's after the repair).
    """

    broker_id: int
    host: str
    topic: str
    partition: int
    log_dir: str
    dir_name: str
    name: str
    content: bytes | None
    sha256: str
    target_id: str | None = None

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}/{self.name}"


@dataclass(frozen=True)
class FileNow:
    """A broker file as read now (no symlink followed): ``present``, ``absent`` or ``refused``."""

    status: str
    content: bytes | None = None
    detail: str | None = None

    @property
    def sha256(self) -> str | None:
        return None if self.content is None else hashlib.sha256(self.content).hexdigest()


_CASE_NOTES = {
    "precursor": "{t}: the znode goes back WITHOUT topic_id: the KAFKA-14190 precursor returns -- the next "
    "controller failover mints a new id that no replica holds",
    "diverged": "{t}: the znode goes back to id {old} while the replicas hold {new}: the topic is DIVERGED again "
    "(KAFKA-14190) once a controller loads it",
    "split": "{t}: the znode goes back to id {old}; with the restored partition.metadata files the replicas "
    "disagree again at their next start (KAFKA-14190)",
}


def plan_repair_undo(
    original: OriginalRun,
    *,
    writes: Sequence[RepairWrite],
    controller_moved: bool,
    cases: Mapping[str, str],
    removed: Sequence[RemovedFile],
    restarted: Sequence[int],
    znodes_now: Mapping[str, ObservedZnode | None],
    files_now: Mapping[tuple[int, str], FileNow] | None = None,
) -> UndoPlan:
    """The undo of a topicId repair.

    :param writes: the topic-id writes the repair completed (progress), in plan order.
    :param controller_moved: the repair deleted ``/controller`` after its writes (the brokers loaded
        the new ids): the undo moves it again after its own writes.
    :param cases: topic -> the repair's diagnosis (``precursor``, ``diverged``, ``split``).
    :param removed: the files a ``file_reset`` removed (``rollback-files.json``), with their copies.
    :param restarted: the brokers the repair restarted (a restart is not undone).
    :param znodes_now: each written topic znode as read now (None: gone).
    :param files_now: each removed file as read on its broker now ((broker, path) -> what is there);
        None: not read (the execute step's preflight reads them).
    """
    refusals: list[Refusal] = []
    already: list[str] = []
    notes: list[str] = []
    not_undone: list[str] = []
    steps: list[Step] = []
    for w in writes:
        s = w.step
        step_id = _plan_id(f"write-back:{s.topic}", s.path, w.version_after)
        expected = ZnodeExpectation(s.path, w.version_after, s.new_data, done_data=s.old_data)
        verdict = znode_verdict(step_id, expected, znodes_now.get(s.path))
        if isinstance(verdict, Refusal):
            refusals.append(
                Refusal(
                    verdict.rule,
                    f"{verdict.cause}; the repair left it at version {w.version_after} with topic_id {s.topic_id}",
                    "Nothing was planned; someone changed the topic since the repair: look at it before putting "
                    "anything back (the repair's rollback.json holds its bytes before)",
                    None,
                    verdict.subjects,
                )
            )
            continue
        if verdict is StepState.DONE:
            already.append(f"{s.path} holds its bytes from before the repair again")
            continue
        steps.append(
            TopicIdWrite(
                id=step_id,
                topic=s.topic,
                path=s.path,
                expected_version=w.version_after,
                old_data=s.new_data,
                new_data=s.old_data,
                old_topic_id=s.topic_id,
                topic_id=s.old_topic_id or "",
            )
        )
        case = cases.get(s.topic)
        if case in _CASE_NOTES:
            notes.append(_CASE_NOTES[case].format(t=s.topic, old=s.old_topic_id, new=s.topic_id))
    written = [s for s in steps if isinstance(s, TopicIdWrite)]
    if written and controller_moved:
        topics = tuple(sorted(s.topic for s in written))
        steps.append(ControllerMove(id=_plan_id("move-controller", topics), topics=topics))
        steps.append(HealthWait(id=_plan_id("wait-healthy", topics), topics=topics))
    elif written:
        notes.append(
            "the repair did not move the controller, so neither does the undo: the running controller keeps "
            "the id it holds in memory; the restored bytes are loaded at the next controller failover"
        )
    by_broker: dict[int, list[RestoredFile]] = {}
    for f in removed:
        if f.name != PARTITION_METADATA:
            not_undone.append(
                f"broker {f.broker_id}: {f.path} is not written back: the broker rebuilt its leader epochs since "
                "its restart (it rewrites leader-epoch-checkpoint at every leader epoch change), and an old copy "
                f"would make its next start truncate by stale epochs; the copy stays in the repair's artefacts"
            )
            continue
        if f.content is None:
            refusals.append(
                Refusal(
                    "no-artefacts",
                    f"broker {f.broker_id}: the repair's copy of {f.path} cannot be read",
                    "Nothing was planned; find the copy (rollback-files.json names it) or undo without it by hand",
                    None,
                    (f"broker {f.broker_id}:{f.path}",),
                )
            )
            continue
        found = None if files_now is None else files_now.get((f.broker_id, f.path))
        found_sha = None
        if found is not None:
            verdict_text = _file_verdict(f, found)
            if verdict_text == "done":
                already.append(f"broker {f.broker_id}: {f.path} holds the repair's copy again")
                continue
            if verdict_text != "pending":
                refusals.append(
                    Refusal(
                        "file-changed" if found.status == "present" else "file-refused",
                        f"broker {f.broker_id}: {f.path} {verdict_text}",
                        "Nothing was planned; look at the file on the host before putting the old one back",
                        None,
                        (f"broker {f.broker_id}:{f.path}",),
                    )
                )
                continue
            found_sha = found.sha256
        by_broker.setdefault(f.broker_id, []).append(
            RestoredFile(
                f.log_dir, f.dir_name, f.name, f.content, f.topic, f.partition, found_sha, f.target_id
            )
        )
    for broker, files in sorted(by_broker.items()):
        steps.append(
            PartitionFileRestore(
                id=_plan_id(f"restore-files:broker-{broker}", [x.path for x in files]),
                broker_id=broker,
                files=tuple(files),
            )
        )
    if by_broker:
        notes.append(
            "a restored partition.metadata is read at its broker's next start (Kafka 3.3.1 reads it when it "
            "loads the log: UnifiedLog.initializeTopicId); the running broker keeps the id it holds in memory"
        )
    for broker in sorted(set(restarted)):
        not_undone.append(f"broker {broker} was restarted by the repair: a restart is not undone")
    return UndoPlan(
        original, tuple(steps), (), tuple(refusals), tuple(already), tuple(not_undone), tuple(notes)
    )


def _file_verdict(f: RemovedFile, found: FileNow) -> str:
    """``done`` (holds the copy), ``pending`` (absent, or the broker's own rewrite with the repair's
    target id), or why neither."""
    if found.status == "absent":
        return "pending"
    if found.status != "present" or found.content is None:
        return f"cannot be read safely ({found.detail or found.status})"
    if found.content == f.content or found.sha256 == f.sha256:
        return "done"
    text = found.content.decode("utf-8", "replace")
    if f.target_id and text.rstrip("\n").endswith(f"topic_id: {f.target_id}"):
        return "pending"
    return (
        f"holds neither the repair's copy nor the id the repair made it adopt ({f.target_id}): {text!r}; "
        "it changed since the repair"
    )


# --- deletion cleanup -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MovedDir:
    """A directory the cleanup moved into its quarantine: back from there to ``<log_dir>/<name>``."""

    broker_id: int
    host: str
    log_dir: str
    name: str
    kind: str
    topic: str
    quarantine: str
    ts: str

    @property
    def source(self) -> str:
        """Where it was (and goes back to)."""
        return f"{self.log_dir.rstrip('/')}/{self.name}"

    @property
    def destination(self) -> str:
        """Where the cleanup put it."""
        return f"{self.quarantine.rstrip('/')}/{self.ts}/{self.name}"


@dataclass(frozen=True)
class DeletedConfig:
    """A config znode the cleanup deleted, with the bytes it saved first."""

    topic: str
    data: bytes | None
    version: int

    @property
    def path(self) -> str:
        return f"/config/topics/{self.topic}"


SAFE_UNDER_RUNNING_BROKER = ("delete", "stray")
"""Directory kinds a running broker never opens once renamed (LogManager reads log dirs only at startup)."""
_DIR_STATUS = {
    "occupied": (
        "quarantine-original-occupied",
        "Nothing was moved; something is at the original place now (a new replica?): look at both before "
        "deciding which to keep",
    ),
    "missing": (
        "quarantine-missing",
        "Nothing was moved; the quarantined directory is gone from the quarantine and not back at its place "
        "(removed by hand?): nothing to restore from",
    ),
}


def plan_cleanup_undo(
    original: OriginalRun,
    *,
    moved: Sequence[MovedDir],
    deleted: Sequence[DeletedConfig],
    topics_back: Mapping[str, str],
    configs_now: Mapping[str, ObservedZnode | None],
    dirs_now: Mapping[tuple[int, str], tuple[str, str | None]] | None,
    running: Collection[int],
    allow_running_broker_orphans: bool = False,
) -> UndoPlan:
    """The undo of a deletion cleanup.

    :param moved: every directory the cleanup moved into a quarantine.
    :param deleted: every config znode it deleted (with the saved bytes).
    :param topics_back: topic -> why it exists again (its znode or deletion marker is back).
    :param configs_now: each deleted config znode as read now (None: absent).
    :param dirs_now: (broker, source) -> (the host's dry-run status, detail): ``would_restore``,
        ``already_restored``, ``occupied``, ``missing`` or ``refused``; None: the hosts were not asked.
    :param running: the brokers registered now (running).
    :param allow_running_broker_orphans: move live-named directories back under a running broker too.
    """
    refusals: list[Refusal] = []
    already: list[str] = []
    for topic, why in sorted(topics_back.items()):
        subjects = [f"broker {d.broker_id}:{d.source}" for d in moved if d.topic == topic]
        subjects += [c.path for c in deleted if c.topic == topic]
        refusals.append(
            Refusal(
                "topic-recreated",
                f"topic {topic} exists again ({why}): its old directories must not go back where the new topic's "
                "replicas live, nor its old config over the new one",
                "Nothing was planned; the quarantined copies stay where they are (copy what you need from them by "
                "hand)",
                None,
                (f"topic {topic}", *subjects),
            )
        )
    by_broker: dict[int, list[MovedDir]] = {}
    for d in sorted(moved, key=lambda x: (x.broker_id, x.source)):
        if d.topic in topics_back:
            continue
        status, detail = (dirs_now or {}).get((d.broker_id, d.source), ("would_restore", None))
        where = f"broker {d.broker_id} ({d.host}): {d.destination} -> {d.source}"
        if status == "already_restored":
            already.append(f"broker {d.broker_id}: {d.source} is back in its log dir")
            continue
        if status in _DIR_STATUS:
            rule, action = _DIR_STATUS[status]
            refusals.append(
                Refusal(
                    rule, f"{where}: {detail or status}", action, None, (f"broker {d.broker_id}:{d.source}",)
                )
            )
            continue
        if status not in ("would_restore",):
            refusals.append(
                Refusal(
                    "quarantine-refused",
                    f"{where}: {detail or status}",
                    "Nothing was moved; fix it on the host and undo again",
                    None,
                    (f"broker {d.broker_id}:{d.source}",),
                )
            )
            continue
        if (
            d.kind not in SAFE_UNDER_RUNNING_BROKER
            and d.broker_id in running
            and not allow_running_broker_orphans
        ):
            refusals.append(
                Refusal(
                    "broker-running",
                    f"{where}: broker {d.broker_id} is running (registered in /brokers/ids) and {d.name} is a "
                    f"live-named ({d.kind}) directory: a running broker asked to host that partition would take it "
                    "for its log (Kafka 3.3.1 LogManager.getOrCreateLog reuses an existing directory)",
                    f"Nothing was moved; stop broker {d.broker_id} and undo again (or allow it: "
                    "allow_running_broker_orphans)",
                    None,
                    (f"broker {d.broker_id}:{d.source}",),
                )
            )
            continue
        by_broker.setdefault(d.broker_id, []).append(d)
    steps: list[Step] = []
    for broker, dirs in sorted(by_broker.items()):
        for (root, ts), group in sorted(_groups(dirs).items()):
            steps.append(
                QuarantineRestore(
                    id=_plan_id(f"restore-dirs:broker-{broker}", root, ts, [d.source for d in group]),
                    broker_id=broker,
                    dirs=tuple(QuarantineDir(d.log_dir, d.name, d.kind, d.topic) for d in group),
                    quarantine_dir=root,
                    ts=ts,
                    broker_running=broker in running,
                    allow_running_broker_orphans=allow_running_broker_orphans,
                )
            )
    for c in sorted(deleted, key=lambda x: x.topic):
        if c.topic in topics_back:
            continue
        step_id = _plan_id(f"restore-config:{c.topic}", c.data)
        expected = ZnodeExpectation(c.path, None, done_data=c.data if c.data is not None else b"")
        verdict = znode_verdict(step_id, expected, configs_now.get(c.path))
        if isinstance(verdict, Refusal):
            refusals.append(
                Refusal(
                    verdict.rule,
                    f"{verdict.cause}, with other bytes than the cleanup saved (version {c.version})",
                    "Nothing was planned; someone created it again since the cleanup: keep theirs or put the saved "
                    "bytes back by hand",
                    None,
                    verdict.subjects,
                )
            )
        elif verdict is StepState.DONE:
            already.append(f"{c.path} holds the saved bytes again")
        else:
            steps.append(ConfigZnodeRestore(id=step_id, topic=c.topic, data=c.data))
    notes = []
    if any(isinstance(s, QuarantineRestore) for s in steps):
        notes.append(
            "a directory moved back under a running broker waits untouched until the broker's next start (Kafka "
            "3.3.1 reads its log dirs only at startup: LogManager.loadLogs), where a -delete directory is queued "
            "for deletion again, as before the cleanup"
        )
    return UndoPlan(original, tuple(steps), (), tuple(refusals), tuple(already), (), tuple(notes))


def _groups(dirs: Sequence[MovedDir]) -> dict[tuple[str, str], list[MovedDir]]:
    out: dict[tuple[str, str], list[MovedDir]] = {}
    for d in dirs:
        out.setdefault((d.quarantine, d.ts), []).append(d)
    return out


# ---------------------------------------------------------------------------------------------
# The plan as the run folder keeps it
# ---------------------------------------------------------------------------------------------


def plan_document(
    plan: UndoPlan,
    *,
    cluster: str,
    run_id: str | None,
    identity: ClusterIdentity,
    batches: Sequence[Sequence[Move]],
    max_partitions_per_batch: int,
    max_bytes_per_batch: int | None,
    created_at: str,
    registered: Collection[int] = (),
    earlier_undos: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """``plan.json`` of an undo: a drain-shaped plan (its batches are the moves back, so the drain's
    execution and throttle clearing carry them out) with the undo's other steps under ``undo``.

    :param registered: the brokers registered at plan time: the plan's ``request.brokers`` when no
        move and no step names a broker (the drain plan format names at least one).
    """
    from .drain import batches_json

    brokers = sorted(
        {b for m in plan.moves for b in (*m.current, *m.target)}
        | {int(s.broker_id) for s in plan.steps if getattr(s, "broker_id", -1) >= 0}
    ) or sorted(registered)
    return {
        "format": "kafka-zk-drain-plan",
        "version": 1,
        "kind": PLAN_KIND,
        "cluster": cluster,
        "created_at": created_at,
        "run_id": run_id,
        "identity": identity.to_dict(),
        "request": {
            "brokers": brokers,
            "scope": "all",
            "excluded_topics": [],
            "max_partitions_per_batch": max_partitions_per_batch,
            "max_bytes_per_batch": max_bytes_per_batch,
            "rack_aware": False,
            "allow_partial": False,
        },
        "complete": True,
        "batches": batches_json(batches),
        "topics": {
            t: {"topic_id": topic_id, "czxid": czxid}
            for t, (topic_id, czxid) in sorted(plan.incarnations.items())
            if czxid is not None
        },
        "unmovable": [],
        "unsatisfiable": [],
        "excluded": [],
        "unplanned": [],
        "undo": {
            "original": plan.original.to_dict(),
            "verdict": plan.verdict(),
            "steps": [s.to_dict() for s in plan.steps],
            "refusals": [r.to_dict() for r in plan.refusals],
            "already": list(plan.already),
            "not_undone": list(plan.not_undone),
            "notes": list(plan.notes),
            "nothing_to_do": plan.nothing_to_do,
            "earlier_undos": [dict(e) for e in earlier_undos],
        },
    }


def rollback_document(plan: UndoPlan, *, cluster: str) -> dict[str, Any]:
    """``rollback.json`` of an undo: how the cluster was before the undo (what the original run had
    left), so the undo itself can be undone -- Kafka's reassignment JSON of every partition it moves
    back (``partitions``: what the drain's execution checks before its first batch), and every znode,
    file and directory it puts back as it is now. Re-running the original DAG is the way forward
    again; the records are what a person needs to check it."""
    out: dict[str, Any] = {
        "version": 1,
        "partitions": [
            {"topic": m.topic, "partition": m.partition, "replicas": list(m.current)} for m in plan.moves
        ],
        "format": "kafka-zk-undo-rollback",
        "cluster": cluster,
        "undoes": plan.original.to_dict(),
        "znodes": [],
        "files": [],
        "directories": [],
        "throttles": [],
        "forward_again": (
            f"this undo puts back what {plan.original.label} changed; to redo that change, run "
            f"{plan.original.dag_id or 'the original DAG'} again (it plans from the cluster as it then is)"
        ),
    }
    import base64

    for step in plan.steps:
        if isinstance(step, TopicIdWrite):
            out["znodes"].append(
                {
                    "path": step.path,
                    "version_before_undo": step.expected_version,
                    "data_b64": base64.b64encode(step.old_data).decode(),
                    "data": step.old_data.decode("utf-8", "replace"),
                }
            )
        elif isinstance(step, ConfigZnodeRestore):
            out["znodes"].append({"path": step.path, "absent_before_undo": True})
        elif isinstance(step, PartitionFileRestore):
            out["files"] += [
                {"broker_id": step.broker_id, "path": f.path, "sha256_before_undo": f.found_sha256}
                for f in step.files
            ]
        elif isinstance(step, QuarantineRestore):
            out["directories"] += [
                {
                    "broker_id": step.broker_id,
                    "source": d.path,
                    "kind": d.kind,
                    "quarantine": step.quarantine_dir,
                    "ts": step.ts,
                }
                for d in step.dirs
            ]
        elif isinstance(step, ThrottleClear):
            out["throttles"].append({"entity": step.entity_key, "keys": dict(step.keys)})
    return out


def undo_steps(plan_doc: Mapping[str, Any]) -> list[Step]:
    """The non-move steps of an undo's ``plan.json`` (``undo.steps``), typed."""
    from .steps import steps_from_dicts

    return steps_from_dicts((plan_doc.get("undo") or {}).get("steps") or ())


def describe(plan_doc: Mapping[str, Any]) -> str:
    """``summary.txt`` of an undo: the verdict first, then every step, the refusals, what is already
    back, what no undo puts back, and what the restored state means."""
    from .steps import step_from_dict

    undo = plan_doc.get("undo") or {}
    original = undo.get("original") or {}
    lines = [str(undo.get("verdict") or "undo"), ""]
    lines.append(
        f"Undoes: {original.get('dag_id') or original.get('kind')} run {original.get('run_id')} "
        f"({original.get('folder')}; {original.get('writes', 0)} cluster write(s) in its change logs)"
    )
    refusals = undo.get("refusals") or []
    if refusals:
        lines.append("Refused (nothing will be written):")
        lines += [f"  - [{r['rule']}] {r['cause']}. {r['action']}" for r in refusals]
    batches = plan_doc.get("batches") or []
    records = list(undo.get("steps") or [])
    clears = [r for r in records if r.get("kind") == ThrottleClear.KIND]  # they run first
    lines += [
        f"{n}. {step_from_dict(r).describe()} (left by the run undone)" for n, r in enumerate(clears, 1)
    ]
    n = len(clears)
    for b, batch in enumerate(batches, 1):
        n += 1
        lines.append(f"{n}. batch {b}/{len(batches)}: move back, throttled:")
        lines += [
            f"     {m['topic']}-{m['partition']}: {list(m['current'])} -> {list(m['target'])} "
            f"({human_bytes(int(m.get('size_bytes') or 0))})"
            for m in batch[:50]
        ]
    if batches:
        n += 1
        lines.append(f"{n}. remove exactly the throttles this undo set (throttles.json)")
    for record in records:
        if record not in clears:
            n += 1
            lines.append(f"{n}. {step_from_dict(record).describe()}")
    for title, key in (
        ("Already as before the run (done)", "already"),
        ("Not undone", "not_undone"),
        ("What the restored state means", "notes"),
    ):
        if undo.get(key):
            lines.append(f"{title}:")
            lines += [f"  - {x}" for x in undo[key]]
    earlier = undo.get("earlier_undos") or []
    if earlier:
        lines.append("Earlier undos of the same run:")
        lines += [f"  - {e.get('run_id')} ({e.get('folder')}): {e.get('verdict')}" for e in earlier]
    return "\n".join(lines) + "\n"


def undo_summary(
    plan: Mapping[str, Any],
    rollback: Mapping[str, Any] | None,
    *,
    plan_dir: str,
    throttle_bytes_per_sec: int | None,
    batch_timeout_s: float | None,
    zookeeper: str,
) -> Any:
    """The approval summary of an undo plan (a :class:`~.approval.PlanSummary`): what goes back and
    why first, then every write in order, files and directories, the throttles, how long, and the
    rollback of the undo itself."""
    from .approval import PlanSummary, _duration, batch_seconds_at_rate, batch_throttles
    from .steps import step_from_dict

    undo = plan.get("undo") or {}
    original = undo.get("original") or {}
    batches = [list(b) for b in plan.get("batches") or []]
    steps = [step_from_dict(r) for r in undo.get("steps") or []]
    rate = int(throttle_bytes_per_sec or 0)
    change = [
        f"{m['topic']}-{m['partition']}: replicas {list(m['current'])} -> {list(m['target'])} (where it was before "
        f"the run; {human_bytes(int(m.get('size_bytes') or 0))})"
        for b in batches
        for m in b
    ][:60]
    change += [s.describe() for s in steps if not isinstance(s, ThrottleClear)]
    change += [f"what this means: {n}" for n in undo.get("notes") or ()]
    change += [f"already back: {a}" for a in (undo.get("already") or ())[:20]]
    writes: list[str] = []
    throttles: list[str] = []
    total_s = 0.0
    for s in steps:
        if isinstance(s, ThrottleClear):
            writes.append(s.describe() + " (left by the run undone)")
    for n, batch in enumerate(batches, 1):
        topic_configs, rated = batch_throttles(batch, rate) if rate > 0 else ({}, [])
        writes.append(
            f"batch {n}/{len(batches)}: set the throttles of {', '.join(f'/config/topics/{t}' for t in topic_configs)}"
            f" and {', '.join(f'/config/brokers/{b}' for b in rated) or 'no broker'} (+ config change notifications), "
            f"then create /admin/reassign_partitions with {len(batch)} partition(s)"
        )
        throttles.append(
            f"batch {n}: brokers {rated}: {human_bytes(rate)}/s" if rated else f"batch {n}: none"
        )
        total_s += batch_seconds_at_rate(batch, rate)
    if batches:
        writes.append(
            "after the last batch: remove exactly the throttle values this undo set (throttles.json)"
        )
    for s in steps:
        if isinstance(s, TopicIdWrite | ControllerMove | ConfigZnodeRestore):
            writes.append(s.describe())
    files = [s.describe() for s in steps if isinstance(s, PartitionFileRestore | QuarantineRestore)]
    duration = (
        [f"at least {_duration(total_s)} of copying at {human_bytes(rate)}/s per broker"] if batches else []
    )
    if batch_timeout_s and batches:
        duration.append(f"a batch running longer than {batch_timeout_s:g} s stops the run (it resumes)")
    if not duration:
        duration.append("seconds: znode writes and renames")
    again = original.get("dag_id") or "the DAG that made it"
    undo_lines = [
        f"{plan_dir.rstrip('/')}/rollback.json records how the cluster is before this undo (what the run left)"
        if rollback is not None
        else "rollback.json is MISSING: the execute step will refuse",
        f"to make the change again after this undo: trigger {again} again (it plans from the cluster as it then is)",
        f"ZooKeeper: {zookeeper}; this undo's changes-*.json list every write it makes",
    ]
    undo_lines += [f"not undone: {x}" for x in undo.get("not_undone") or ()]
    return PlanSummary(
        "undo",
        f"{undo.get('verdict') or 'Undo'} ({original.get('folder')})",
        (
            ("What will change (back to before the run)", tuple(change) or ("nothing",)),
            ("ZooKeeper writes, in order", tuple(writes) or ("none",)),
            ("Broker files and directories put back", tuple(files) or ("none",)),
            ("Brokers restarted", ("none: an undo restarts no broker",)),
            ("Throttles", tuple(throttles) or ("none: nothing moves",)),
            ("Expected duration", tuple(duration)),
            ("Rollback and how to undo", tuple(undo_lines)),
        ),
    )


__all__ = [
    "BY_HAND",
    "DAG_KINDS",
    "MIGRATION_DAG_ID",
    "MIGRATION_FOLDER",
    "PLAN_KIND",
    "UNDO_DAG_ID",
    "UNDO_FOLDER",
    "DeletedConfig",
    "FileNow",
    "MigrationRunRecord",
    "MovedDir",
    "MovesNow",
    "OriginalRun",
    "RemovedFile",
    "RepairWrite",
    "RunKind",
    "UndoPlan",
    "describe",
    "kind_of_folder",
    "migration_run_refusal",
    "plan_cleanup_undo",
    "plan_document",
    "plan_moves_undo",
    "plan_repair_undo",
    "rollback_document",
    "run_refusals",
    "trigger_command",
    "undo_conf",
    "undo_pointer",
    "undo_record",
    "undo_steps",
    "undo_summary",
]
