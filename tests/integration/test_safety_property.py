"""Property-style safety test of every mutating operator against real parts.

For seeded random wrong inputs -- the connection (the right cluster, another real cluster in
another chroot, a chroot that does not exist, the ZooKeeper root, a chroot nested in the cluster,
an unreachable port), the safety flags (``True``, ``False``, ``'true'``, ``'false'``, ``''``,
``None``, ``'yes'``, ``'dry'``, ``'{{ params.dry_run }}'``, ``0``, ``1``) and, for the deletion
cleanup, the quarantine directory (default / absolute / relative / inside a log dir / containing a
log dir / through a symlink / with ``..``) -- each operator run must end in one of two ways:

* it raises a refusal (a ``MaintenanceRefusedError``, the drain's ``DrainError`` family, a
  ``QuarantinePathError``, ``ZooKeeperConnectionError`` for an unreachable ensemble, the snapshot
  load's own guards) and the state is EXACTLY unchanged: every znode (data, version) of every
  chroot involved, the ZooKeeper root's children, and every file (type, size, sha256) under every
  broker host root;
* it returns (or defers) and the state is the one predicted from the inputs: unchanged for a dry
  run; for a real run with the right connection, what the plan says and nothing else.

Operators: the drain's execute and clear steps, the deletion cleanup (the verifier's one-task cleanup,
and the execute step of ``kafka_zk_deletion_cleanup`` on its plan step's plan), the snapshot load, the
topicId repair, and the post-maintenance path -- the move-back of a real drain (also with its returning
broker down again, or a moved-back topic deleted and created again, after the plan: both must refuse)
and the preferred leader election (also while someone else's election is in flight).

Every writer is also drawn against the approval rule (issue 31): a real run with every other input
valid, on a cluster the cluster file does not opt out -- its entry requires approval (``none``), the
writer's ``cluster`` names an opted-out entry of another cluster (``wrong_label``), or the cluster is
in no entry (``no_entry``) -- must refuse with nothing changed; only an entry that names the cluster
by its connection and sets ``require_approval = false`` (``opted_out``, every other case) lets a
writer without an approval step write.

The draw is seeded: ``KAFKA_ZK_SAFETY_PROPERTY_SEED`` (default below) fixes every case, the case's
own seed and its drawn inputs are in its test id and in every failure message. The schedule is
stratified so that every connection kind, every flag value and every quarantine kind is drawn at
least once, and every operator gets fully valid real runs (the property would be vacuous if every
run refused). Clusters are shared across cases and redeployed only after a case changed one.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kazoo.client import KazooClient

from airflow_provider_kafka_zk.artefacts.snapshots import is_redacted_row, read_snapshot, write_snapshot
from airflow_provider_kafka_zk.hooks.broker_quarantine import QuarantinePathError, default_quarantine
from airflow_provider_kafka_zk.hooks.zookeeper import (
    KafkaZooKeeperHook,
    TargetNotEmptyError,
    ZooKeeperConnectionError,
)
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.leadership import ElectionScope, choose_election
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.reassignment import plan_throttles
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT, LeaseHolder
from airflow_provider_kafka_zk.maintenance import MaintenanceRefusedError, SafetyFlagError
from airflow_provider_kafka_zk.operators.deletion import (
    TopicDeletionNotSettledError,
    TopicDeletionUnsuccessfulError,
    TopicDeletionVerifyOperator,
)
from airflow_provider_kafka_zk.operators.deletion_cleanup import (
    DeletionCleanupExecuteOperator,
    DeletionCleanupPlanOperator,
)
from airflow_provider_kafka_zk.operators.drain import (
    ClearReplicationThrottlesOperator,
    DrainExecuteOperator,
    DrainPlanOperator,
)
from airflow_provider_kafka_zk.operators.drain_artefacts import DrainError
from airflow_provider_kafka_zk.operators.post_maintenance import (
    PostMaintenanceError,
    PostMaintenancePlanOperator,
    PreferredLeaderElectionOperator,
    read_leadership,
)
from airflow_provider_kafka_zk.operators.snapshot import (
    SourceClusterGuardError,
    ZooKeeperSnapshotLoadOperator,
)
from airflow_provider_kafka_zk.operators.topic_id_repair import (
    TopicIdRepairExecuteOperator,
    TopicIdRepairPlanOperator,
)
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs
from airflow_provider_kafka_zk.testing.cluster_state import State, capture, differences
from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)
from airflow_provider_kafka_zk.testing.simulator.controller import SimulatedController
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs
from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime
from airflow_provider_kafka_zk.testing.simulator.scenarios import topic_id_repair_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer

pytestmark = pytest.mark.integration

BASE_SEED = int(os.environ.get("KAFKA_ZK_SAFETY_PROPERTY_SEED", "20260517"))

# ---------------------------------------------------------------------------------------------
# What is drawn
# ---------------------------------------------------------------------------------------------

FLAG_VALUES: tuple[Any, ...] = (
    True,
    False,
    "true",
    "false",
    "",
    None,
    "yes",
    "dry",
    "{{ params.dry_run }}",
    0,
    1,
)
REAL = (False, "false")  # as dry_run: a real run
DRY = (True, "true")
BAD_FLAGS = ("", None, "yes", "dry", "{{ params.dry_run }}", 0, 1)  # neither a bool nor true/false text
WRONG_CONNS = ("other", "missing_chroot", "root_chroot", "nested_chroot", "unreachable")
CONNS = ("right", *WRONG_CONNS)
GOOD_QUARANTINES = ("default", "absolute")
BAD_QUARANTINES = ("relative", "inside_log_dir", "contains_log_dir", "symlink", "dotdot")
GOOD_LOAD_TARGETS = ("fresh", "missing")
BAD_LOAD_TARGETS = ("source", "inside_source", "other_cluster", "zk_root", "relative", "dotdot")
GOOD_THROTTLES = (1000, "4096", 1_048_576)
APPROVAL_KINDS = ("none", "wrong_label", "no_entry")  # besides "opted_out": each must refuse
WRITERS = ("execute", "clear", "cleanup", "cleanup_dag", "repair", "moveback", "elect")
BAD_THROTTLES = (0, "-5", "fast", None, True)


def strict(value: Any) -> bool | None:
    """The oracle's own reading of a safety flag: a bool, or the text true/false; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def positive(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return int(str(value).strip()) > 0
    except ValueError:
        return False


@dataclass(frozen=True)
class Case:
    """One drawn run: the operator, its inputs, and the seed they were drawn with."""

    op: str  # execute | clear | cleanup | load
    index: int
    seed: int
    conn: str
    flags: tuple[tuple[str, Any], ...]
    quarantine: str | None = None  # cleanup
    throttle: Any = None  # execute
    state: str | None = None  # clear: settled | moving
    target: str | None = None  # load
    snapshot: str | None = None  # load: ok | missing
    race: bool = False  # repair: the plan's second topic znode changes after the plan
    incident: str | None = None  # moveback / elect: the cluster changes after the plan (must refuse)
    approval: str = "opted_out"  # what the cluster file says of the cluster written to (APPROVAL_KINDS)

    @property
    def flag(self) -> dict[str, Any]:
        return dict(self.flags)

    def describe(self) -> str:
        parts = [f"{self.op}#{self.index}", f"seed={self.seed}", f"conn={self.conn}"]
        parts += [f"{k}={v!r}" for k, v in self.flags]
        extra = {
            "execute": ("throttle",),
            "clear": ("state",),
            "cleanup": ("quarantine",),
            "cleanup_dag": ("quarantine",),
            "repair": ("race",),
            "moveback": ("throttle", "incident"),
            "elect": ("incident",),
        }
        for name in extra.get(self.op, ("target", "snapshot")):
            parts.append(f"{name}={getattr(self, name)!r}")
        if self.approval != "opted_out":
            parts.append(f"approval={self.approval}")
        return " ".join(parts)

    # ----------------------------------------------------------------- the oracle
    def flags_valid(self) -> bool:
        return all(strict(v) is not None for _, v in self.flags)

    def mutates(self) -> bool:
        """Whether the inputs ask for a real change (every flag valid, none says dry)."""
        f = {k: strict(v) for k, v in self.flags}
        if self.op == "cleanup":
            return bool(f["cleanup"]) and f["dry_run"] is False
        if self.op == "load":
            return True
        return f["dry_run"] is False

    def fully_valid(self) -> bool:
        """Right connection, valid flags and paths: the run must reach the predicted state."""
        if not self.flags_valid():
            return False
        if self.op == "load":
            return self.conn == "right" and self.target in GOOD_LOAD_TARGETS and self.snapshot == "ok"
        if self.conn != "right" or self.approval != "opted_out":
            return False  # a wrong connection, or a cluster that needs approval (none is given here)
        if self.op == "execute" and not positive(self.throttle):
            return False
        if self.op == "repair" and self.race:
            return False  # the cluster is not in the state the plan assumed: must refuse
        if self.op == "moveback" and (self.incident is not None or not positive(self.throttle)):
            return False
        if self.op == "elect" and self.incident is not None:
            return False
        if self.op == "cleanup" and self.mutates() and self.quarantine not in GOOD_QUARANTINES:
            return False
        return not (
            self.op == "clear"
            and self.mutates()
            and self.state == "moving"
            and not strict(self.flag["force"])
        )


def _cycle(rng: random.Random, values: tuple[Any, ...]) -> Iterator[Any]:
    """Endless shuffled rounds of ``values``: every value is drawn once before any repeats."""
    while True:
        order = list(values)
        rng.shuffle(order)
        yield from order


def _draw_cases(base_seed: int) -> list[Case]:
    """The stratified schedule (profiles) from ``base_seed``; the free inputs from each case's seed."""
    schedule = random.Random(base_seed)
    bad_flags = _cycle(schedule, BAD_FLAGS)
    profiles: list[tuple[str, str]] = []
    # (operator, profile): valid real runs, a dry run, wrong connections, bad flags, bad paths
    profiles += [("execute", p) for p in ["real", "real", "dry", *WRONG_CONNS, "bad_flag", "bad_flag"]]
    profiles += [
        ("clear", p)
        for p in [
            "real",
            "real",
            "real_moving:force",
            "real_moving:",
            "dry",
            "other",  # the drain cluster's twin: only its /cluster/id tells it apart
            *schedule.sample(WRONG_CONNS[1:], 2),
        ]
    ]
    profiles += [("clear", "bad_flag")]
    profiles += [
        ("cleanup", p)
        for p in ["real:default", "real:absolute", "dry", "other", *schedule.sample(WRONG_CONNS[1:], 3)]
    ]
    profiles += [("cleanup", f"bad_path:{q}") for q in BAD_QUARANTINES]
    profiles += [("cleanup", p) for p in ["bad_flag", "bad_flag"]]
    profiles += [
        ("load", p)
        for p in ["fresh", "missing", *[f"bad_target:{t}" for t in schedule.sample(BAD_LOAD_TARGETS, 4)]]
    ]
    profiles += [("load", p) for p in ["unreachable", "missing_snapshot", "bad_flag", "bad_flag"]]
    # the topicId repair through the step executor (write_back of two topics, a controller move)
    profiles += [("repair", p) for p in ["real", "real", "dry", "race", *schedule.sample(WRONG_CONNS, 3)]]
    profiles += [("repair", "bad_flag")]
    # post-maintenance: the move-back of a real drain, and the preferred leader election
    profiles += [
        ("moveback", p)
        for p in ["real", "real", "dry", "broker_down", "recreated", *schedule.sample(WRONG_CONNS, 3)]
    ]
    profiles += [("moveback", "bad_flag")]
    profiles += [("elect", p) for p in ["real", "real", "dry", "foreign", *schedule.sample(WRONG_CONNS, 3)]]
    profiles += [("elect", "bad_flag")]
    # the deletion cleanup DAG's execute step, on a plan made by its plan step
    profiles += [
        ("cleanup_dag", p) for p in ["real", "real", "dry", "other", *schedule.sample(WRONG_CONNS[1:], 2)]
    ]
    profiles += [("cleanup_dag", "bad_flag")]
    # every writer, a real run with every other input valid, on a cluster that is not opted out
    profiles += [(op, f"approval:{kind}") for op in WRITERS for kind in APPROVAL_KINDS]
    cases = []
    counters: dict[str, int] = {}
    for number, (op, profile) in enumerate(profiles):
        index = counters[op] = counters.get(op, -1) + 1
        seed = base_seed * 1000 + number
        rng = random.Random(seed)
        kind, _, detail = profile.partition(":")

        def valid(choices: tuple[Any, ...], rng: random.Random = rng) -> Any:
            return rng.choice(choices)

        def anything(rng: random.Random = rng) -> Any:
            return rng.choice(FLAG_VALUES)

        if kind == "approval":
            cases.append(_approval_case(op, index, seed, detail, rng))
            continue
        conn = "right"
        if kind in WRONG_CONNS:
            conn = kind
        elif kind == "bad_flag":
            conn = rng.choice(CONNS) if op != "load" else "right"
        if op == "execute":
            if kind == "real":
                dry_run = valid(REAL)
            elif kind == "dry":
                dry_run = valid(DRY)
            elif kind == "bad_flag":
                dry_run = next(bad_flags)
            else:  # a wrong connection, mostly with a valid flag (so the connection is what is tested)
                dry_run = valid(REAL + DRY) if rng.random() < 0.75 else anything()
            throttle = valid(GOOD_THROTTLES) if kind == "real" or rng.random() < 0.8 else valid(BAD_THROTTLES)
            cases.append(Case(op, index, seed, conn, (("dry_run", dry_run),), throttle=throttle))
        elif op == "clear":
            state = "moving" if kind == "real_moving" else rng.choice(("settled", "moving"))
            flags = {"dry_run": valid(REAL), "force": valid(REAL + DRY)}
            if kind == "real":
                state = "settled"
            elif kind == "real_moving":  # with force: unthrottle anyway; without: must refuse
                flags["force"] = valid(DRY) if detail == "force" else valid(REAL)
            elif kind == "dry":
                flags["dry_run"] = valid(DRY)
            elif kind == "bad_flag":
                flags[rng.choice(("dry_run", "force"))] = next(bad_flags)
            elif rng.random() < 0.3:
                flags[rng.choice(("dry_run", "force"))] = anything()
            cases.append(Case(op, index, seed, conn, tuple(flags.items()), state=state))
        elif op == "cleanup":
            flags = {
                "cleanup": valid(DRY),
                "dry_run": valid(REAL),
                "allow_running_broker_orphans": valid(REAL),
            }
            quarantine = (
                detail if kind in ("real", "bad_path") else rng.choice(GOOD_QUARANTINES + BAD_QUARANTINES)
            )
            if kind == "dry":
                flags["dry_run"] = valid(DRY)
            elif kind == "bad_flag":
                flags[rng.choice(tuple(flags))] = next(bad_flags)
            elif kind in WRONG_CONNS and rng.random() < 0.3:
                flags[rng.choice(tuple(flags))] = anything()
            cases.append(Case(op, index, seed, conn, tuple(flags.items()), quarantine=quarantine))
        elif op == "cleanup_dag":
            if kind == "real":
                dry_run = valid(REAL)
            elif kind == "dry":
                dry_run = valid(DRY)
            elif kind == "bad_flag":
                dry_run = next(bad_flags)
            else:
                dry_run = valid(REAL + DRY) if rng.random() < 0.75 else anything()
            cases.append(
                Case(op, index, seed, conn, (("dry_run", dry_run),), quarantine=valid(GOOD_QUARANTINES))
            )
        elif op == "repair":
            if kind in ("real", "race"):
                dry_run = valid(REAL)
            elif kind == "dry":
                dry_run = valid(DRY)
            elif kind == "bad_flag":
                dry_run = next(bad_flags)
            else:
                dry_run = valid(REAL + DRY) if rng.random() < 0.75 else anything()
            cases.append(Case(op, index, seed, conn, (("dry_run", dry_run),), race=kind == "race"))
        elif op in ("moveback", "elect"):
            incident = kind if kind in ("broker_down", "recreated", "foreign") else None
            if kind == "real" or incident:
                dry_run = valid(REAL)
            elif kind == "dry":
                dry_run = valid(DRY)
            elif kind == "bad_flag":
                dry_run = next(bad_flags)
            else:
                dry_run = valid(REAL + DRY) if rng.random() < 0.75 else anything()
            throttle = None
            if op == "moveback":
                throttle = (
                    valid(GOOD_THROTTLES)
                    if kind == "real" or incident or rng.random() < 0.8
                    else valid(BAD_THROTTLES)
                )
            cases.append(
                Case(op, index, seed, conn, (("dry_run", dry_run),), throttle=throttle, incident=incident)
            )
        else:  # load
            if kind == "bad_flag":
                replay = next(bad_flags)
            else:  # the "fresh" load gets a real bool, every other a bool or true/false text
                replay = valid((True, False) if kind == "fresh" else REAL + DRY)
            target = {"fresh": "fresh", "missing": "missing", "bad_target": detail}.get(kind) or rng.choice(
                GOOD_LOAD_TARGETS
            )
            cases.append(
                Case(
                    op,
                    index,
                    seed,
                    "unreachable" if kind == "unreachable" else "right",
                    (("replay_versions", replay),),
                    target=target,
                    snapshot="missing" if kind == "missing_snapshot" else "ok",
                )
            )
    return cases


def _approval_case(op: str, index: int, seed: int, approval: str, rng: random.Random) -> Case:
    """A real run of ``op`` with the right connection and every other input valid, on a cluster
    whose cluster-file entry is ``approval`` (one of :data:`APPROVAL_KINDS`)."""
    real = (("dry_run", rng.choice(REAL)),)
    if op == "clear":
        flags = (*real, ("force", rng.choice(REAL + DRY)))
        return Case(op, index, seed, "right", flags, state="settled", approval=approval)
    if op == "cleanup":
        flags = (("cleanup", rng.choice(DRY)), *real, ("allow_running_broker_orphans", rng.choice(REAL)))
        return Case(
            op, index, seed, "right", flags, quarantine=rng.choice(GOOD_QUARANTINES), approval=approval
        )
    if op == "cleanup_dag":
        return Case(
            op, index, seed, "right", real, quarantine=rng.choice(GOOD_QUARANTINES), approval=approval
        )
    throttle = rng.choice(GOOD_THROTTLES) if op in ("execute", "moveback") else None
    return Case(op, index, seed, "right", real, throttle=throttle, approval=approval)


CASES = _draw_cases(BASE_SEED)


BUG_QUARANTINE_NOT_A_REFUSAL = (
    "operators/deletion.py TopicDeletionVerifyOperator._cleanup: a bad quarantine_dir does not refuse the "
    "cleanup. quarantine_directories() raises QuarantinePathError (relative, '..', inside or containing a "
    "log dir) before connecting, but _cleanup's per-broker `except Exception` turns it into a 'failed' "
    "directory entry (a symlinked path is only answered 'refused' per move by the host script) and carries "
    "on: _remove_config_znodes() deletes /config/topics/<topic>, the lease is released, and _conclude() "
    "raises TopicDeletionUnsuccessfulError -- a half-done cleanup (config znode gone, directories left) "
    "instead of a refusal with nothing changed"
)
BUG_REPLAY_FLAG_NOT_STRICT = (
    "operators/snapshot.py ZooKeeperSnapshotLoadOperator: replay_versions is not parsed strictly "
    "(parse_safety_flags/strict_flag) but handed to KafkaZooKeeperHook.load_snapshot_rows, which tests "
    "its truthiness (`if replay_versions:`): 'false', 'dry', 'yes', '{{ params.dry_run }}' and 1 replay "
    "the versions, '', None and 0 silently do not; the load runs instead of refusing"
)


def known_bug(case: Case) -> str | None:
    """Product bugs a case shows (the case stays, marked xfail strict); None when it must pass."""
    return None


def _params() -> Iterator[Any]:
    for case in CASES:
        bug = known_bug(case)
        marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
        yield pytest.param(case, id=case.describe(), marks=marks)


# ---------------------------------------------------------------------------------------------
# The state: every znode of every chroot involved, the root's children, every file on the hosts
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The clusters
# ---------------------------------------------------------------------------------------------

DRAIN_CLUSTER = "prop-drain"
MOVEBACK_CLUSTER = "prop-moveback"
ELECT_CLUSTER = "prop-elect"
REPAIR_CLUSTER = "prop-repair"
REPAIR_TOPICS = ["diverged", "precursor"]
DRAINED = 1
DELETION_CLUSTER = "prop-live"
SSH_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
LIVE_HOSTS = {0: SSH_ADDRESSES[0], 1: SSH_ADDRESSES[1], 2: SSH_ADDRESSES[2]}
LEFTOVER_BROKER = 2  # stopped; holds old-logs' plain leftover directory
DELETE_LEFTOVER_BROKER = 1  # running; holds old-logs' -delete directory (its own delete failed)
SSH_CONN = "prop_safety_ssh"
DAY_MS = 86_400_000
# old-logs' -delete directory was "renamed two days ago" (its mtime says so), but its age runs from
# its ctime, which is the deploy time: the cleanup cases look from two days later.
RENAMED_AGO_MS = 2 * DAY_MS
CONFIG_LEFT = b'{"version":1,"config":{"retention.ms":"86400000"}}'


def _drain_spec(name: str, seed: int) -> ClusterSpec:
    """Four brokers; broker 1 holds four RF=1 partitions (two batches of two) and RF=3 replicas."""
    return ClusterSpec(
        name,
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 2}", host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec(
                "single",
                6,
                1,
                assignment={0: (1,), 1: (1,), 2: (1,), 3: (0,), 4: (2,), 5: (3,)},
                records_per_partition=20,
            ),
            TopicSpec("lonely", 1, 1, assignment={0: (1,)}, records_per_partition=10),
            TopicSpec("replicated", 2, 3, records_per_partition=10),
        ),
        seed=seed,
    )


def _deletion_cluster(seed: int) -> SimulatedCluster:
    """``events`` live; ``old-logs`` deleted, leaving on broker 2 (stopped cleanly) a plain partition
    directory and on broker 1 (running) a ``-delete`` directory its own delete failed on; its config
    znode is planted after the deploy. (A stopped broker's ``-delete`` directory waits for its start:
    PENDING_DELETE_DELAY, never a leftover to clean.)"""
    spec = ClusterSpec(
        name="live",
        brokers=tuple(BrokerSpec(broker_id=b, host=h) for b, h in LIVE_HOSTS.items()),
        topics=(
            TopicSpec("events", partitions=3, replication_factor=2, records_per_partition=30),
            TopicSpec("old-logs", partitions=2, replication_factor=2, assignment={0: (1, 2), 1: (2, 0)}),
        ),
        seed=seed,
    )
    cluster = SimulatedCluster(spec)
    topic_id = cluster.topic("old-logs").zk_topic_id
    cluster.delete_topic("old-logs")
    cluster.leave_leftover_dirs(
        "old-logs", LEFTOVER_BROKER, [0], kind=DirKind.NORMAL, age_ms=3 * DAY_MS, topic_id=topic_id
    )
    cluster.leave_leftover_dirs(
        "old-logs", DELETE_LEFTOVER_BROKER, [1], kind=DirKind.DELETE, age_ms=2 * DAY_MS, topic_id=topic_id
    )
    cluster.stop_broker(LEFTOVER_BROKER, clean=True)
    return cluster


def _zk_conn(hosts: str, chroot: str, connect_timeout: float = 5) -> str:
    return json.dumps(
        {
            "conn_type": "kafka_zookeeper",
            "host": hosts,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": connect_timeout},
        }
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    deployed: DeployedCluster
    conn_id: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def chroot(self) -> str:
        return self.deployed.chroot

    @property
    def root(self) -> Path:
        return self.deployed.root


class World:
    """Every cluster the cases act on; each is (re)deployed lazily, and again only once a case changed it."""

    def __init__(self, zookeeper_server: Any, tmp: pytest.TempPathFactory, patch: pytest.MonkeyPatch) -> None:
        self.server = zookeeper_server
        self.tmp = tmp
        self.patch = patch
        self.numbers = iter(range(1_000_000))
        self.current: dict[str, Deployment] = {}
        self.dirty: set[str] = set()
        self.opened: list[DeployedCluster] = []
        self.base = tmp.mktemp("artefacts")
        self.clusters_file = tmp.mktemp("clusters") / "clusters.toml"
        self.built: dict[str, str] = {}  # label -> connection of its latest deployment (opted out)
        self.client = KazooClient(hosts=zookeeper_server.connect_string)
        self.client.start(timeout=15)
        self.missing_chroot = f"/kafka_prop_missing_{uuid.uuid4().hex[:10]}"
        self.set_conn("prop_missing_zk", self.missing_chroot)
        self.set_conn("prop_root_zk", "")
        self.patch.setenv(
            "AIRFLOW_CONN_PROP_UNREACHABLE_ZK", _zk_conn(f"127.0.0.1:{_closed_port()}", "", connect_timeout=2)
        )
        # another real cluster: the drain cluster's twin (same topics and assignment), its own /cluster/id
        self.other = self._deploy(SimulatedCluster(_drain_spec("other", seed=77)), "other")
        self._load_snapshot: tuple[str, list[Any]] | None = None

    def close(self) -> None:
        for deployed in self.opened:
            deployed.close()
        self.client.stop()
        self.client.close()

    def write_clusters(self, entries: Mapping[str, tuple[str, bool]]) -> None:
        """The cluster file: label -> (its connection, require_approval)."""
        self.clusters_file.write_text(
            "".join(
                f'[clusters.{label}]\nkafka_zookeeper_conn_id = "{conn}"\n'
                f"require_approval = {'true' if required else 'false'}\n"
                for label, (conn, required) in entries.items()
            )
        )
        self.patch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(self.clusters_file))

    def use_clusters(self, case: Case, label: str, deployment: Deployment) -> None:
        """The cluster file of one case: the cluster ``label`` names is ``deployment``'s (by its
        connection), opted out of approval -- or, for the approval cases, not (see the module doc)."""
        entries = {
            "opted_out": {label: (deployment.conn_id, False)},
            "none": {label: (deployment.conn_id, True)},
            "wrong_label": {label: (self.other.conn_id, False), "prop-prod": (deployment.conn_id, True)},
            "no_entry": {"prop-lab": (self.other.conn_id, False)},
        }[case.approval]
        self.write_clusters(entries)

    def set_conn(self, conn_id: str, chroot: str) -> str:
        self.patch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", _zk_conn(self.server.connect_string, chroot))
        return conn_id

    def _deploy(self, cluster: SimulatedCluster, kind: str, label: str | None = None) -> Deployment:
        """Deploy ``cluster``; named ``label`` in the cluster file (opted out of approval) while the
        world builds on it (the real drains a clear or a move-back case starts from)."""
        number = next(self.numbers)
        chroot = self.server.new_chroot(f"/kafka_prop_{kind.replace('-', '_')}_")
        deployed = DeployedCluster(
            cluster, self.server.connect_string, chroot, self.tmp.mktemp(f"hosts-{kind}-{number}")
        )
        self.opened.append(deployed)
        deployment = Deployment(deployed, self.set_conn(f"prop_{kind.replace('-', '_')}_zk_{number}", chroot))
        if label is not None:
            self.built[label] = deployment.conn_id
            self.write_clusters({name: (conn, False) for name, conn in self.built.items()})
        return deployment

    def conn_for(self, kind: str, deployment: Deployment) -> str:
        return {
            "right": deployment.conn_id,
            "other": self.other.conn_id,
            "missing_chroot": "prop_missing_zk",
            "root_chroot": "prop_root_zk",
            "nested_chroot": self.set_conn("prop_nested_zk", deployment.chroot + "/config"),
            "unreachable": "prop_unreachable_zk",
        }[kind]

    def get(self, kind: str) -> Deployment:
        if kind in self.dirty or kind not in self.current:
            old = self.current.pop(kind, None)
            if old is not None:  # its broker sessions end; the chroot and files stay, unused
                old.deployed.close()
                self.opened.remove(old.deployed)
            self.current[kind] = {
                "execute": self._build_execute,
                "clear-settled": lambda: self._build_clear(settled=True),
                "clear-moving": lambda: self._build_clear(settled=False),
                "cleanup": self._build_cleanup,
                "repair": self._build_repair,
                "moveback": self._build_moveback,
                "elect": self._build_elect,
            }[kind]()
            self.dirty.discard(kind)
        return self.current[kind]

    # ------------------------------------------------------------------ drain
    def _build_execute(self) -> Deployment:
        deployment = self._deploy(
            SimulatedCluster(_drain_spec(DRAIN_CLUSTER, seed=5)), "execute", DRAIN_CLUSTER
        )
        with KafkaZooKeeperHook(deployment.conn_id) as hook:
            walk = hook.snapshot()
            ref, _ = write_snapshot(str(self.base), DRAIN_CLUSTER, walk, source=hook.target_description())
        deployment.extra["snapshot"] = ref.path
        return deployment

    def plan(self, deployment: Deployment, tag: str) -> str:
        """A fresh plan dir from the deployment's safety snapshot: broker 1's four RF=1 partitions, two batches."""
        result = DrainPlanOperator(
            task_id="plan",
            cluster=DRAIN_CLUSTER,
            base_path=str(self.base),
            brokers=[DRAINED],
            snapshot_path=deployment.extra["snapshot"],
            inventory_ts="none",
            max_partitions_per_batch=2,
            drain_ts=tag,
        ).execute({})
        assert [len(b) for b in json.loads(Path(result["plan"]).read_text())["batches"]] == [2, 2]
        return result["plan_dir"]

    def _build_clear(self, *, settled: bool) -> Deployment:
        """A drain whose batch 1 was submitted for real (throttles set, lease held by the run);
        ``settled``: the controller then finished it, else it is still moving."""
        kind = "clear-settled" if settled else "clear-moving"
        deployment = self._build_execute()
        plan_dir = self.plan(deployment, f"{kind}-{uuid.uuid4().hex[:8]}")
        run_id = f"prop-{kind}-{uuid.uuid4().hex[:8]}"
        with pytest.raises(TaskDeferred):
            _execute_operator(plan_dir, deployment.conn_id, dry_run=False, throttle=1000).execute(
                {"run_id": run_id}
            )
        if settled:
            controller = SimulatedController(deployment.deployed, partitions_per_step=10)
            try:
                controller.run_until_idle()
            finally:
                controller.stop()
            assert self.client.exists(deployment.chroot + zk.REASSIGN_PARTITIONS) is None
        deployment.extra.update(plan_dir=plan_dir, run_id=run_id)
        return deployment

    # ------------------------------------------------------------------ deletion
    def _build_repair(self) -> Deployment:
        """The repair cluster and a write_back plan of its two topics that need one (from a real
        snapshot; the inventory written from the model: the plan touches no broker disk)."""
        cluster = topic_id_repair_cluster(name=REPAIR_CLUSTER)
        deployment = self._deploy(cluster, "repair")
        with KafkaZooKeeperHook(deployment.conn_id) as hook:
            ref, _ = write_snapshot(
                str(self.base), REPAIR_CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        tag = uuid.uuid4().hex[:8]
        inventory = write_inventory_dirs(
            self.base,
            REPAIR_CLUSTER,
            f"inv-{tag}",
            audit_dirs(cluster),
            broker_facts={b: {} for b in cluster.brokers},
            expected=set(cluster.brokers),
        )
        result = TopicIdRepairPlanOperator(
            task_id="plan",
            cluster=REPAIR_CLUSTER,
            base_path=str(self.base),
            snapshot_path=ref.path,
            inventory_path=str(inventory),
            topics=REPAIR_TOPICS,
            repair_ts=f"plan-{tag}",
        ).execute({})
        deployment.extra["plan_dir"] = result["plan_dir"]
        return deployment

    # ------------------------------------------------------------------ post-maintenance
    def _drain_for_real(self, deployment: Deployment, cluster: str) -> str:
        """Broker 1 drained for real (plan, execute, Kafka's controller, clear): its plan dir."""
        with KafkaZooKeeperHook(deployment.conn_id) as hook:
            ref, _ = write_snapshot(
                str(self.base), cluster, hook.snapshot(), source=hook.target_description()
            )
        plan_dir = DrainPlanOperator(
            task_id="plan",
            cluster=cluster,
            base_path=str(self.base),
            brokers=[DRAINED],
            snapshot_path=ref.path,
            inventory_ts="none",
            drain_ts=f"drain-{uuid.uuid4().hex[:8]}",
        ).execute({})["plan_dir"]
        context = {"run_id": f"prop-drain-{uuid.uuid4().hex[:8]}"}
        operator = _execute_operator(plan_dir, deployment.conn_id, dry_run=False, throttle=1_000_000)
        controller = SimulatedController(deployment.deployed, partitions_per_step=10)
        try:
            call = lambda: operator.execute(context)  # noqa: E731
            while True:
                try:
                    call()
                    break
                except TaskDeferred as deferred:
                    controller.run_until_idle()
                    event = _first_event(deferred.trigger)
                    call = lambda event=event: operator.execute_complete(context, event)  # noqa: E731
        finally:
            controller.stop()
        ClearReplicationThrottlesOperator(
            task_id="clear", plan_dir=plan_dir, kafka_zookeeper_conn_id=deployment.conn_id, dry_run=False
        ).execute(context)
        return plan_dir

    def _maintenance(self, deployment: Deployment) -> None:
        """The maintenance window: broker 1 stops (controlled shutdown) and starts again."""
        deployment.deployed.cluster.stop_broker(DRAINED, clean=True)
        deployment.deployed.sync()
        deployment.deployed.cluster.start_broker(DRAINED)
        deployment.deployed.sync()

    def _build_moveback(self) -> Deployment:
        """A real drain of broker 1, the maintenance, and the post-maintenance plan that moves its four
        RF=1 partitions back in two batches (the move-back cases each execute a fresh copy of it)."""
        deployment = self._deploy(
            SimulatedCluster(_drain_spec(MOVEBACK_CLUSTER, seed=9)), "moveback", MOVEBACK_CLUSTER
        )
        drain_dir = self._drain_for_real(deployment, MOVEBACK_CLUSTER)
        self._maintenance(deployment)
        with KafkaZooKeeperHook(deployment.conn_id) as hook:
            ref, _ = write_snapshot(
                str(self.base), MOVEBACK_CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        result = PostMaintenancePlanOperator(
            task_id="plan",
            cluster=MOVEBACK_CLUSTER,
            base_path=str(self.base),
            brokers=[DRAINED],
            drain_run=drain_dir,
            snapshot_path=ref.path,
            inventory_ts="none",
            max_partitions_per_batch=2,
            run_ts=f"post-{uuid.uuid4().hex[:8]}",
        ).execute({"run_id": "prop-post"})
        plan = json.loads(Path(result["plan_dir"], "plan.json").read_text())
        assert [len(b) for b in plan["batches"]] == [2, 2], plan["batches"]
        assert all(m["target"] == [DRAINED] for b in plan["batches"] for m in b)
        deployment.extra["plan_dir"] = result["plan_dir"]
        return deployment

    def _build_elect(self) -> Deployment:
        """Broker 1 back from the maintenance, leading none of the partitions it is preferred for."""
        deployment = self._deploy(SimulatedCluster(_drain_spec(ELECT_CLUSTER, seed=5)), "elect")
        self._maintenance(deployment)
        with KafkaZooKeeperHook(deployment.conn_id) as hook:
            choice = choose_election(read_leadership(hook), ElectionScope())
            ref, _ = write_snapshot(
                str(self.base), ELECT_CLUSTER, hook.snapshot(), source=hook.target_description()
            )
        assert choice.electable, "the maintenance left no preferred leader to elect"
        # the post-maintenance plan the election is pinned to (its cluster identity), as the DAG runs it
        result = PostMaintenancePlanOperator(
            task_id="plan",
            cluster=ELECT_CLUSTER,
            base_path=str(self.base),
            brokers=[DRAINED],
            snapshot_path=ref.path,
            inventory_ts="none",
            run_ts=f"post-{uuid.uuid4().hex[:8]}",
        ).execute({"run_id": "prop-post"})
        deployment.extra.update(
            electable=sorted((t, p) for t, p in choice.electable), plan_dir=result["plan_dir"]
        )
        return deployment

    def _build_cleanup(self) -> Deployment:
        deployment = self._deploy(_deletion_cluster(seed=31), "cleanup")
        self.client.create(deployment.chroot + "/config/topics/old-logs", CONFIG_LEFT)
        root = deployment.root
        (root / "qreal").mkdir()
        (root / "qlink").symlink_to(root / "qreal")
        [log_dir] = [str(d) for d in deployment.deployed.hosts[LEFTOVER_BROKER].log_dirs]
        leftovers = sorted(
            (str(d), p.name)
            for b in (DELETE_LEFTOVER_BROKER, LEFTOVER_BROKER)
            for d in deployment.deployed.hosts[b].log_dirs
            for p in Path(d).iterdir()
            if p.is_dir() and p.name.startswith("old-logs-")
        )
        assert len(leftovers) == 2 and sum(n.endswith("-delete") for _, n in leftovers) == 1, leftovers
        deployment.extra.update(log_dir=log_dir, leftovers=leftovers)
        return deployment

    # ------------------------------------------------------------------ snapshot loads
    def load_snapshot(self) -> tuple[str, list[Any]]:
        """A snapshot of the other cluster (taken once): (path, rows)."""
        if self._load_snapshot is None:
            with KafkaZooKeeperHook(self.other.conn_id) as hook:
                walk = hook.snapshot()
                ref, _ = write_snapshot(
                    str(self.tmp.mktemp("load-snapshots")), "other", walk, source=hook.target_description()
                )
            self._load_snapshot = (ref.path, read_snapshot(ref.path)[1])
        return self._load_snapshot


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with SshServer(SSH_ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def world(zookeeper_server, sshd, tmp_path_factory) -> Iterator[World]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            f"AIRFLOW_CONN_{SSH_CONN.upper()}",
            json.dumps(sshd.airflow_connection_fields(SSH_ADDRESSES[0], conn_timeout=5)),
        )
        w = World(zookeeper_server, tmp_path_factory, patch)
        try:
            yield w
        finally:
            w.close()


# ---------------------------------------------------------------------------------------------
# Running one case
# ---------------------------------------------------------------------------------------------

# What counts as a refusal, per operator (raised before anything changed)
REFUSALS: dict[str, tuple[type[BaseException], ...]] = {
    "repair": (MaintenanceRefusedError, ZooKeeperConnectionError),
    "moveback": (MaintenanceRefusedError, DrainError, ZooKeeperConnectionError),
    "elect": (MaintenanceRefusedError, PostMaintenanceError, ZooKeeperConnectionError),
    "execute": (MaintenanceRefusedError, DrainError, ZooKeeperConnectionError),
    "clear": (MaintenanceRefusedError, DrainError, ZooKeeperConnectionError),
    "cleanup": (MaintenanceRefusedError, QuarantinePathError, ZooKeeperConnectionError),
    "cleanup_dag": (MaintenanceRefusedError, QuarantinePathError, ZooKeeperConnectionError),
    "load": (
        SafetyFlagError,
        MaintenanceRefusedError,
        TargetNotEmptyError,
        SourceClusterGuardError,
        ZooKeeperConnectionError,
        FileNotFoundError,
        ValueError,  # a target chroot that is not a plain absolute path, refused before connecting
    ),
}
# The deletion verifier's own verdict failures: not refusals, but they report without changing anything
VERDICT_FAILURES = (TopicDeletionUnsuccessfulError, TopicDeletionNotSettledError)


@dataclass
class Outcome:
    raised: BaseException | None = None
    result: Any = None
    deferred: TaskDeferred | None = None


def _run(call: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(result=call())
    except TaskDeferred as deferred:
        return Outcome(deferred=deferred)
    except Exception as exc:
        return Outcome(raised=exc)


def _first_event(trigger: Any) -> dict[str, Any]:
    import asyncio

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger fired nothing")

    return asyncio.run(first())


def _execute_operator(plan_dir: str, conn_id: str, *, dry_run: Any, throttle: Any) -> DrainExecuteOperator:
    return DrainExecuteOperator(
        task_id="execute",
        plan_dir=plan_dir,
        kafka_zookeeper_conn_id=conn_id,
        throttle_bytes_per_sec=throttle,
        dry_run=dry_run,
        poll_interval=0.1,
        batch_timeout=30,
    )


@pytest.mark.parametrize("case", list(_params()))
def test_wrong_inputs_refuse_or_end_in_the_predicted_state(
    case: Case, world: World, tmp_path: Path, deletion_clock: Callable[[int], None]
) -> None:
    if case.op in ("cleanup", "cleanup_dag"):
        deletion_clock(RENAMED_AGO_MS)
    {
        "execute": _case_execute,
        "clear": _case_clear,
        "cleanup": _case_cleanup,
        "cleanup_dag": _case_cleanup_dag,
        "load": _case_load,
        "repair": _case_repair,
        "moveback": _case_moveback,
        "elect": _case_elect,
    }[case.op](case, world, tmp_path)


def _judge(
    case: Case,
    outcome: Outcome,
    before: State,
    after: State,
    predict: Callable[[], None],
    *,
    allowed_failures: tuple[type[BaseException], ...] = (),
) -> None:
    """The property; ``predict`` asserts the predicted end state of a fully valid real run."""
    what = case.describe()
    exc = outcome.raised
    changed = before != after
    if exc is not None and isinstance(exc, REFUSALS[case.op]) and not isinstance(exc, allowed_failures):
        assert not changed, (
            f"[{what}] refused with {type(exc).__name__}: {exc}\n"
            "but the state changed:\n  " + "\n  ".join(differences(before, after))
        )
        assert not case.fully_valid(), f"[{what}] every input is valid, yet the run refused: {exc!r}"
        return
    if not case.flags_valid():
        raise AssertionError(
            f"[{what}] a flag is neither a bool nor true/false text, yet the run did not refuse: "
            + (f"{type(exc).__name__}: {exc}" if exc is not None else f"returned {outcome.result!r}")
            + ("\nstate changes:\n  " + "\n  ".join(differences(before, after)) if changed else "")
        )
    if exc is not None and not isinstance(exc, allowed_failures):
        raise AssertionError(
            f"[{what}] raised {type(exc).__name__}, not a refusal: {exc}"
            + ("\nstate changes:\n  " + "\n  ".join(differences(before, after)) if changed else "")
        ) from exc
    if not case.mutates():
        assert not changed, f"[{what}] a dry run changed the state:\n  " + "\n  ".join(
            differences(before, after)
        )
        return False
    if not case.fully_valid():
        raise AssertionError(
            f"[{what}] a real run with a wrong input did not refuse "
            + (f"({type(exc).__name__}: {exc})" if exc is not None else f"(returned {outcome.result!r})")
            + (
                "; state changes:\n  " + "\n  ".join(differences(before, after))
                if changed
                else "; nothing changed"
            )
        )
    predict()


def _decode_topics(tree: Mapping[str, tuple[bytes | None, int]]) -> dict[str, zk.TopicAssignment]:
    prefix = zk.BROKER_TOPICS + "/"
    return {
        path[len(prefix) :]: zk.TopicAssignment.decode(data, path)
        for path, (data, _) in tree.items()
        if path.startswith(prefix) and "/" not in path[len(prefix) :]
    }


def _config(tree: Mapping[str, tuple[bytes | None, int]], path: str) -> dict[str, str] | None:
    if path not in tree:
        return None
    return dict(zk.ConfigEntity.decode(tree[path][0], path).config)


def _new_notifications(
    before: Mapping[str, tuple[bytes | None, int]], after: Mapping[str, tuple[bytes | None, int]]
) -> list[str]:
    prefix = zk.CONFIG_CHANGES + "/"
    return sorted(
        f"{n.entity_type}/{n.entity_name}"
        for path in set(after) - set(before)
        if path.startswith(prefix)
        for n in [zk.ConfigChangeNotification.decode(after[path][0], path)]
    )


def _assert_rest_unchanged(
    what: str,
    before: Mapping[str, tuple[bytes | None, int]],
    after: Mapping[str, tuple[bytes | None, int]],
    touched: set[str],
) -> None:
    """Every znode outside ``touched`` and the new notifications is exactly as before."""
    notes = zk.CONFIG_CHANGES + "/"
    rest_before = {p: v for p, v in before.items() if p not in touched}
    rest_after = {
        p: v for p, v in after.items() if p not in touched and not (p.startswith(notes) and p not in before)
    }
    assert rest_after == rest_before, f"[{what}] znodes outside the plan changed: " + str(
        sorted(p for p in set(rest_before) | set(rest_after) if rest_before.get(p) != rest_after.get(p))[:20]
    )


# ------------------------------------------------------------------------------------- execute
def _case_execute(case: Case, world: World, tmp_path: Path) -> None:
    deployment = world.get("execute")
    world.use_clusters(case, DRAIN_CLUSTER, deployment)
    plan_dir = world.plan(deployment, f"case-{case.seed}")
    run_id = f"prop-execute-{case.seed}"
    conn = world.conn_for(case.conn, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {deployment.root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = _execute_operator(plan_dir, conn, dry_run=case.flag["dry_run"], throttle=case.throttle)
    outcome = _run(lambda: operator.execute({"run_id": run_id}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.deferred is not None, f"[{what}] a real execute must defer on batch 1: {outcome}"
        b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
        plan = json.loads((Path(plan_dir) / "plan.json").read_text())
        targets = {(m["topic"], int(m["partition"])): tuple(m["target"]) for m in plan["batches"][0]}
        # the reassignment znode holds exactly batch 1's targets, without log_dirs
        data = a[zk.REASSIGN_PARTITIONS][0]
        assert b"log_dirs" not in (data or b"")
        submitted = zk.ReassignPartitions.decode(data)
        assert {(e.topic, e.partition): tuple(e.replicas) for e in submitted.partitions} == targets
        # throttles: what Kafka's tool sets for these moves, merged into each entity's config
        throttles = plan_throttles(targets, _decode_topics(b), int(str(case.throttle)))
        entities = {f"topics/{t}": c for t, c in throttles.topic_configs().items()}
        entities |= {f"brokers/{br}": c for br, c in throttles.broker_configs().items()}
        assert entities, f"[{what}] the plan predicts no throttle at all"
        touched = {zk.REASSIGN_PARTITIONS, LEASE_ROOT, LEASE_PATH}
        for key, config in entities.items():
            path = f"{zk.CONFIG}/{key}"
            touched.add(path)
            was = _config(b, path)
            assert _config(a, path) == {**(was or {}), **config}, f"[{what}] {path}"
            assert a[path][1] == (0 if was is None else b[path][1] + 1), (
                f"[{what}] {path} written more than once"
            )
        assert _new_notifications(b, a) == sorted(entities), f"[{what}] one notification per throttled entity"
        holder = LeaseHolder.decode(a[LEASE_PATH][0])
        assert holder is not None and holder.run_id == run_id, f"[{what}] the lease: {holder}"
        assert LEASE_PATH not in b
        _assert_rest_unchanged(what, b, a, touched)
        for chroot in chroots - {deployment.chroot}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        assert before.disk == after.disk and before.root_children == after.root_children

    if before != after:  # whatever the verdict: the next case gets a cluster as deployed
        world.dirty.add("execute")
    _judge(case, outcome, before, after, predict)


# ------------------------------------------------------------------------------------- repair
def _case_repair(case: Case, world: World, tmp_path: Path) -> None:
    deployment = world.get("repair")
    world.use_clusters(case, REPAIR_CLUSTER, deployment)
    plan_dir = tmp_path / "plan"  # a fresh copy per case: progress and identity are the run's own
    shutil.copytree(deployment.extra["plan_dir"], plan_dir)
    plan = json.loads((plan_dir / "plan.json").read_text())
    if case.race:  # an old client adds a partition to the second topic after the plan
        with deployment_lock(deployment):
            deployment.deployed.cluster.old_client_adds_partitions(REPAIR_TOPICS[1], 5, client="2.7")
            deployment.deployed.sync()
        world.dirty.add("repair")
    conn = world.conn_for(case.conn, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {deployment.root, world.other.root}
    with ClusterRuntime(deployment.deployed, restart_dir=tmp_path / "restarts"):
        before = capture(world.client, chroots, roots)
        operator = TopicIdRepairExecuteOperator(
            task_id="execute",
            plan_dir=str(plan_dir),
            kafka_zookeeper_conn_id=conn,
            dry_run=case.flag["dry_run"],
            poll_interval=0.2,
            health_timeout=60,
        )
        outcome = _run(lambda: operator.execute({"run_id": f"prop-repair-{case.seed}"}))
        after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
        writes = [s for s in plan["steps"] if s["kind"] == "write_topic_id"]
        assert {s["topic"] for s in writes} == set(REPAIR_TOPICS), f"[{what}] {plan['steps']}"
        for step in writes:  # the planned bytes, one version further
            assert a[step["path"]] == (base64.b64decode(step["new_data_b64"]), b[step["path"]][1] + 1), (
                f"[{what}] {step['path']}"
            )
        # one controller move (Kafka's election rewrites /controller, its epoch and partition states)
        assert int(a[zk.CONTROLLER_EPOCH][0]) == int(b[zk.CONTROLLER_EPOCH][0]) + 1, (
            f"[{what}] controller moves"
        )
        assert LEASE_PATH not in a and LEASE_ROOT not in a, f"[{what}] the lease is given back"
        touched = {s["path"] for s in writes} | {zk.CONTROLLER, zk.CONTROLLER_EPOCH}
        touched |= {p for p in set(a) | set(b) if p.endswith("/state") and p.startswith(zk.BROKER_TOPICS)}
        _assert_rest_unchanged(what, b, a, touched)
        for chroot in chroots - {deployment.chroot}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        metadata = [
            k
            for where in before.disk
            for k in set(before.disk[where]) | set(after.disk[where])
            if k.endswith("partition.metadata") and before.disk[where].get(k) != after.disk[where].get(k)
        ]
        assert metadata == [], f"[{what}] write_back touched broker files: {metadata}"

    if before != after:
        world.dirty.add("repair")
    _judge(case, outcome, before, after, predict)


def deployment_lock(deployment: Deployment) -> Any:
    """Nothing runs beside a case's own runtime: a change of the model needs no lock."""
    import contextlib

    return contextlib.nullcontext()


# ------------------------------------------------------------------------------------- moveback
def _recreate(deployment: Deployment, topic: str) -> None:
    """``topic`` deleted and created again with the same layout (a new znode incarnation)."""
    cluster = deployment.deployed.cluster
    layout = {p: tuple(m.replicas) for p, m in cluster.topic(topic).partitions.items()}
    cluster.delete_topic(topic)
    deployment.deployed.sync()
    cluster.create_topic(TopicSpec(topic, len(layout), 1, assignment=layout, records_per_partition=3))
    deployment.deployed.sync()


def _case_moveback(case: Case, world: World, tmp_path: Path) -> None:
    deployment = world.get("moveback")
    world.use_clusters(case, MOVEBACK_CLUSTER, deployment)
    plan_dir = tmp_path / "post"  # a fresh copy per case: progress and identity are the run's own
    shutil.copytree(deployment.extra["plan_dir"], plan_dir)
    plan = json.loads((plan_dir / "plan.json").read_text())
    if case.incident == "broker_down":  # the returning broker goes down again after the plan
        deployment.deployed.cluster.stop_broker(DRAINED, clean=True)
        deployment.deployed.sync()
        world.dirty.add("moveback")
    elif case.incident == "recreated":  # a moved-back topic is deleted and created again after the plan
        _recreate(deployment, "lonely")
        world.dirty.add("moveback")
    conn = world.conn_for(case.conn, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {deployment.root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = _execute_operator(str(plan_dir), conn, dry_run=case.flag["dry_run"], throttle=case.throttle)
    run_id = f"prop-moveback-{case.seed}"
    outcome = _run(lambda: operator.execute({"run_id": run_id}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.deferred is not None, f"[{what}] a real move-back must defer on batch 1: {outcome}"
        b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
        targets = {(m["topic"], int(m["partition"])): tuple(m["target"]) for m in plan["batches"][0]}
        submitted = zk.ReassignPartitions.decode(a[zk.REASSIGN_PARTITIONS][0])
        assert {(e.topic, e.partition): tuple(e.replicas) for e in submitted.partitions} == targets, what
        throttles = plan_throttles(targets, _decode_topics(b), int(str(case.throttle)))
        entities = {f"topics/{t}": c for t, c in throttles.topic_configs().items()}
        entities |= {f"brokers/{br}": c for br, c in throttles.broker_configs().items()}
        touched = {zk.REASSIGN_PARTITIONS, LEASE_ROOT, LEASE_PATH}
        for key, config in entities.items():
            path = f"{zk.CONFIG}/{key}"
            touched.add(path)
            was = _config(b, path)
            assert _config(a, path) == {**(was or {}), **config}, f"[{what}] {path}"
            assert a[path][1] == (0 if was is None else b[path][1] + 1), f"[{what}] {path} written twice"
        assert _new_notifications(b, a) == sorted(entities), f"[{what}] one notification per throttled entity"
        holder = LeaseHolder.decode(a[LEASE_PATH][0])
        assert holder is not None and holder.run_id == run_id, f"[{what}] the lease: {holder}"
        _assert_rest_unchanged(what, b, a, touched)
        for chroot in chroots - {deployment.chroot}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        assert before.disk == after.disk and before.root_children == after.root_children

    if before != after:
        world.dirty.add("moveback")
    _judge(case, outcome, before, after, predict)


# ------------------------------------------------------------------------------------- elect
def _case_elect(case: Case, world: World, tmp_path: Path) -> None:
    deployment = world.get("elect")
    world.use_clusters(case, ELECT_CLUSTER, deployment)
    if case.incident == "foreign":  # someone else's election is in flight
        world.client.create(
            deployment.chroot + zk.PREFERRED_REPLICA_ELECTION,
            zk.PreferredReplicaElection((zk.TopicPartition("single", 3),)).encode(),
        )
        world.dirty.add("elect")
    conn = world.conn_for(case.conn, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {deployment.root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = PreferredLeaderElectionOperator(
        task_id="elect",
        cluster=ELECT_CLUSTER,
        kafka_zookeeper_conn_id=conn,
        artefact_dir=str(tmp_path / "election"),
        plan_dir=deployment.extra["plan_dir"],
        dry_run=case.flag["dry_run"],
        poll_interval=0.2,
        timeout=30,
        deferrable=True,
    )
    outcome = _run(lambda: operator.execute({"run_id": f"prop-elect-{case.seed}"}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.deferred is not None, f"[{what}] a real election must defer on its request: {outcome}"
        b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
        requested = zk.PreferredReplicaElection.decode(a[zk.PREFERRED_REPLICA_ELECTION][0])
        assert sorted(requested.partitions) == deployment.extra["electable"], f"[{what}] {requested}"
        assert LEASE_PATH not in a and LEASE_ROOT not in a, f"[{what}] the lease went back at the deferral"
        _assert_rest_unchanged(what, b, a, {zk.PREFERRED_REPLICA_ELECTION})
        for chroot in chroots - {deployment.chroot}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        assert before.disk == after.disk and before.root_children == after.root_children

    if before != after:
        world.dirty.add("elect")
    _judge(case, outcome, before, after, predict)


# ------------------------------------------------------------------------------------- clear
def _case_clear(case: Case, world: World, tmp_path: Path) -> None:
    kind = f"clear-{case.state}"
    deployment = world.get(kind)
    world.use_clusters(case, DRAIN_CLUSTER, deployment)
    # a fresh plan dir per case: a copy of the run's artefacts (the lease is the run's, via run_id)
    plan_dir = tmp_path / "plan"
    shutil.copytree(
        deployment.extra["plan_dir"], plan_dir, ignore=shutil.ignore_patterns("changes-*", "identity.json")
    )
    record = json.loads((plan_dir / "throttles.json").read_text())
    conn = world.conn_for(case.conn, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {deployment.root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = ClearReplicationThrottlesOperator(
        task_id="clear",
        plan_dir=str(plan_dir),
        kafka_zookeeper_conn_id=conn,
        dry_run=case.flag["dry_run"],
        force=case.flag["force"],
    )
    outcome = _run(lambda: operator.execute({"run_id": deployment.extra["run_id"]}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.raised is None, f"[{what}] {outcome.raised!r}"
        b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
        touched = {LEASE_ROOT, LEASE_PATH}
        written = []
        for key, ours in record["entities"].items():
            path = f"{zk.CONFIG}/{key}"
            touched.add(path)
            was = _config(b, path)
            assert was is not None and all(was.get(k) == v for k, v in ours.items()), (
                f"[{what}] {path}: {was}"
            )
            assert _config(a, path) == {k: v for k, v in was.items() if k not in ours}, f"[{what}] {path}"
            assert a[path][1] == b[path][1] + 1, f"[{what}] {path} written more than once"
            written.append(key)
        assert _new_notifications(b, a) == sorted(written), f"[{what}] one notification per cleared entity"
        assert LEASE_PATH in b and LEASE_PATH not in a and LEASE_ROOT not in a, (
            f"[{what}] the lease is released"
        )
        _assert_rest_unchanged(what, b, a, touched)
        for chroot in chroots - {deployment.chroot}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        assert before.disk == after.disk and before.root_children == after.root_children

    if before != after:
        world.dirty.add(kind)
    _judge(case, outcome, before, after, predict)


# ------------------------------------------------------------------------------------- cleanup
def _quarantine_dir(case: Case, deployment: Deployment) -> str | None:
    root, log_dir = deployment.root, deployment.extra["log_dir"]
    return {
        "default": None,
        "absolute": str(root / "quarantine-prop"),
        "relative": "kafka-quarantine",
        "inside_log_dir": f"{log_dir}/kafka-quarantine",
        "contains_log_dir": str(Path(log_dir).parent),
        "symlink": str(root / "qlink" / "kafka-quarantine"),
        "dotdot": f"{log_dir}/../kafka-quarantine",
    }[str(case.quarantine)]


def _assert_cleaned(
    what: str,
    world: World,
    deployment: Deployment,
    before: State,
    after: State,
    chroots: set[str],
    quarantine: str | None,
    ts: str,
) -> None:
    """A real cleanup's predicted end state: the leftover config znode gone, exactly the leftovers
    moved into ``<quarantine>/<ts>/``, byte for byte, a listing beside them, nothing else changed."""
    root = deployment.root
    # ZooKeeper: exactly the leftover config znode is gone (the lease came and went)
    b, a = before.zk[deployment.chroot], after.zk[deployment.chroot]
    assert a == {p: v for p, v in b.items() if p != "/config/topics/old-logs"}, f"[{what}] " + str(
        differences(before, after)
    )
    for chroot in chroots - {deployment.chroot}:
        assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
    assert before.root_children == after.root_children
    assert before.disk[str(world.other.root)] == after.disk[str(world.other.root)]

    # disks: exactly the leftovers moved into <quarantine>/<ts>/, byte for byte, plus a listing
    # per broker (two brokers sharing an absolute quarantine: the second listing takes the next name)
    def rel(path: str | Path) -> str:
        return str(Path(path).relative_to(root))

    tops, q_roots = {}, set()
    for log_dir, name in deployment.extra["leftovers"]:
        q_root = Path(quarantine or default_quarantine(log_dir))
        q_roots.add(q_root)
        tops[rel(f"{log_dir}/{name}")] = rel(q_root / ts / name)
    disk_b, disk_a = before.disk[str(root)], after.disk[str(root)]
    expected = {}
    for path, value in disk_b.items():
        top = next((t for t in tops if path == t or path.startswith(t + "/")), None)
        expected[tops[top] + path[len(top) :] if top else path] = value
    for q_root in q_roots:
        for parent in [q_root / ts, *(q_root / ts).parents]:
            if parent == root:
                break
            expected.setdefault(rel(parent), ("d", 0, None))
    listings = {p for p in disk_a if Path(p).name.startswith("quarantine-listing") and p not in disk_b}
    assert len(listings) == 2 and all(disk_a[p][0] == "f" for p in listings), f"[{what}] listings {listings}"
    assert {p: v for p, v in disk_a.items() if p not in listings} == expected, f"[{what}] " + str(
        differences(before, after)
    )
    entries = [e["name"] for p in listings for e in json.loads((root / p).read_text())]
    assert sorted(entries) == sorted(n for _, n in deployment.extra["leftovers"])


def _case_cleanup(case: Case, world: World, tmp_path: Path) -> None:
    deployment = world.get("cleanup")
    world.use_clusters(case, DELETION_CLUSTER, deployment)
    conn = world.conn_for(case.conn, deployment)
    quarantine = _quarantine_dir(case, deployment)
    ts = f"20260101T{case.seed % 1_000_000:06d}"
    root = deployment.root
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = TopicDeletionVerifyOperator(
        task_id="verify",
        cluster=DELETION_CLUSTER,
        base_path=str(tmp_path / "artefacts"),
        kafka_zookeeper_conn_id=conn,
        ssh_conn_id=SSH_CONN,
        broker_hosts=LIVE_HOSTS,
        server_properties_path=str(root / "broker-{broker_id}" / "config" / "server.properties"),
        connect_timeout=3,
        topics=["old-logs"],
        deferrable=False,
        wait_timeout=0,
        poll_interval=0.5,
        quarantine_dir=quarantine,
        **case.flag,
    )
    outcome = _run(lambda: operator.execute({"ts_nodash": ts}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.raised is None, f"[{what}] {outcome.raised!r}"
        assert [(v["topic"], v["verdict"], v["deleted_everywhere"]) for v in outcome.result] == [
            ("old-logs", "deleted", True)
        ], f"[{what}] {outcome.result}"
        _assert_cleaned(what, world, deployment, before, after, chroots, quarantine, ts)

    if before != after:
        world.dirty.add("cleanup")
    _judge(case, outcome, before, after, predict, allowed_failures=VERDICT_FAILURES)


def _case_cleanup_dag(case: Case, world: World, tmp_path: Path) -> None:
    """The ``execute`` step of ``kafka_zk_deletion_cleanup`` on a plan its ``plan`` step made (with
    the right connection and a cluster file naming the cluster): the case's connection, flag and
    cluster-file entry go to the execute step only."""
    deployment = world.get("cleanup")
    root = deployment.root
    quarantine = _quarantine_dir(case, deployment)
    ts = f"20260102T{case.seed % 1_000_000:06d}"
    reach = {
        "ssh_conn_id": SSH_CONN,
        "broker_hosts": LIVE_HOSTS,
        "server_properties_path": str(root / "broker-{broker_id}" / "config" / "server.properties"),
        "connect_timeout": 3,
    }
    world.write_clusters({DELETION_CLUSTER: (deployment.conn_id, False)})
    planned = DeletionCleanupPlanOperator(
        task_id="plan",
        cluster=DELETION_CLUSTER,
        topics=["old-logs"],
        base_path=str(tmp_path / "artefacts"),
        kafka_zookeeper_conn_id=deployment.conn_id,
        quarantine_dir=quarantine,
        run_ts=ts,
        **reach,
    ).execute({"run_id": f"prop-cleanup-plan-{case.seed}"})
    assert planned["steps"] == 3, planned  # two brokers' moves and the config znode
    world.use_clusters(case, DELETION_CLUSTER, deployment)
    chroots = {deployment.chroot, world.other.chroot, world.missing_chroot}
    roots = {root, world.other.root}
    before = capture(world.client, chroots, roots)
    operator = DeletionCleanupExecuteOperator(
        task_id="execute",
        plan_dir=planned["plan_dir"],
        kafka_zookeeper_conn_id=world.conn_for(case.conn, deployment),
        dry_run=case.flag["dry_run"],
        **reach,
    )
    outcome = _run(lambda: operator.execute({"run_id": f"prop-cleanup-{case.seed}"}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.raised is None, f"[{what}] {outcome.raised!r}"
        assert (outcome.result["moved"], outcome.result["deleted"]) == (2, 1), f"[{what}] {outcome.result}"
        _assert_cleaned(what, world, deployment, before, after, chroots, quarantine, ts)

    if before != after:
        world.dirty.add("cleanup")
    _judge(case, outcome, before, after, predict)


# ------------------------------------------------------------------------------------- load
def _case_load(case: Case, world: World, tmp_path: Path) -> None:
    snapshot_path, rows = world.load_snapshot()
    busy = world.get("execute")  # another real cluster's chroot (not empty)
    fresh = None
    if case.target == "fresh":
        fresh = world.server.new_chroot("/kafka_prop_scratch_")
    missing = f"/kafka_prop_scratch_missing_{case.seed}_{uuid.uuid4().hex[:6]}"
    target = {
        "fresh": fresh,
        "missing": missing,
        "source": world.other.chroot,
        "inside_source": world.other.chroot + "/scratch",
        "other_cluster": busy.chroot,
        "zk_root": "/",
        "relative": missing.lstrip("/"),
        "dotdot": f"{missing}/../{missing.lstrip('/')}",
    }[str(case.target)]
    conn = "prop_unreachable_zk" if case.conn == "unreachable" else world.other.conn_id
    chroots = {world.other.chroot, busy.chroot, missing, world.missing_chroot}
    if fresh:
        chroots.add(fresh)
    roots = {world.other.root}
    before = capture(world.client, chroots, roots)
    operator = ZooKeeperSnapshotLoadOperator(
        task_id="load",
        kafka_zookeeper_conn_id=conn,
        target_chroot=target,
        snapshot_path=snapshot_path if case.snapshot == "ok" else str(tmp_path / "no-such-snapshot"),
        replay_versions=case.flag["replay_versions"],
    )
    outcome = _run(lambda: operator.execute({}))
    after = capture(world.client, chroots, roots)

    def predict() -> None:
        what = case.describe()
        assert outcome.raised is None, f"[{what}] {outcome.raised!r}"
        replay = strict(case.flag["replay_versions"])
        loaded = after.zk[target]
        expected = {
            r.path: (r.data, r.version if replay else 0)
            for r in rows
            if r.path != "/" and not is_redacted_row(r)
        }
        wrong = {
            p: (expected.get(p), loaded.get(p))
            for p in sorted(set(expected) | set(loaded))
            if p != "/" and expected.get(p) != loaded.get(p)
        }
        assert not wrong, (
            f"[{what}] the scratch chroot does not hold the snapshot with versions "
            f"{'replayed' if replay else 'not replayed'}; path: (expected, loaded): {dict(list(wrong.items())[:6])}"
        )
        assert before.zk[target] in ({}, {"/": loaded["/"]}), f"[{what}] the target was not empty"
        for chroot in chroots - {target}:
            assert before.zk[chroot] == after.zk[chroot], f"[{what}] {chroot} changed"
        new_top = set(after.root_children) - set(before.root_children)
        assert new_top <= {target.lstrip("/")}, f"[{what}] new chroots: {new_top}"
        assert before.disk == after.disk

    _judge(case, outcome, before, after, predict)


# ---------------------------------------------------------------------------------------------
# The draw itself
# ---------------------------------------------------------------------------------------------


def test_the_draw_covers_every_kind_of_wrong_input() -> None:
    by_op: dict[str, list[Case]] = {}
    for case in CASES:
        by_op.setdefault(case.op, []).append(case)
    assert {c.conn for c in by_op["execute"]} == {"right", *WRONG_CONNS}
    for op in ("execute", "clear", "cleanup", "cleanup_dag", "load", "repair", "moveback", "elect"):
        assert sum(c.fully_valid() and c.mutates() for c in by_op[op]) >= 2, op
        assert len({c.conn for c in by_op[op]}) >= 2, op
    # every bad quarantine path is tried by a real cleanup with the right connection
    real_right = [c for c in by_op["cleanup"] if c.conn == "right" and c.flags_valid() and c.mutates()]
    assert {c.quarantine for c in real_right} == set(GOOD_QUARANTINES + BAD_QUARANTINES)
    assert {c.target for c in by_op["load"]} >= set(GOOD_LOAD_TARGETS)
    assert len({c.target for c in by_op["load"]} & set(BAD_LOAD_TARGETS)) >= 4
    assert {c.state for c in by_op["clear"] if c.fully_valid() and c.mutates()} == {"settled", "moving"}
    drawn = [v for c in CASES for _, v in c.flags]
    for value in FLAG_VALUES:
        assert any(type(v) is type(value) and v == value for v in drawn), value
    assert any(c.race and c.mutates() and c.conn == "right" for c in by_op["repair"])
    assert {c.incident for c in by_op["moveback"]} == {None, "broker_down", "recreated"}
    assert {c.incident for c in by_op["elect"]} == {None, "foreign"}
    for op in WRITERS:  # every writer against every cluster-file entry that is not an opt-out
        assert {c.approval for c in by_op[op] if c.mutates() and c.conn == "right" and c.flags_valid()} == {
            "opted_out",
            *APPROVAL_KINDS,
        }, op
    assert 25 <= len(CASES) <= 100
    assert len({c.describe() for c in CASES}) == len(CASES)
    # the same seed draws the same cases
    assert _draw_cases(BASE_SEED) == CASES
