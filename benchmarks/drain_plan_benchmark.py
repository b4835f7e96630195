"""Drain plan end to end (issue 17): what the user waits for, with kafka-assigner as the baseline.

For each size in ``--partitions`` x ``--brokers`` a real, throw-away ZooKeeper (loopback, started
and stopped by PID by ``testing.zookeeper.ZooKeeperServer``) gets a simulated Kafka 3.3.1 tree
(brokers on 3 racks, registered with their rack; topics of ``--per-topic`` partitions, a
``--rf1-share`` of the topics RF=1 and the rest RF=3, all placed by Kafka's own rack-aware
assignment, so RF=1 partitions sit on the drained broker 0 and elsewhere). Then, each in a fresh
process, on the same tree:

* product: what the drain DAG's ``plan`` task (``DrainPlanOperator`` with a
  ``kafka_zookeeper_conn_id``) does, minus Airflow: imports (interpreter start-up, kazoo, walker,
  model, planner; not Airflow); read: the planning read, ``hooks.zookeeper_drain_read.read_for_drain``
  (the one the operator calls through ``operators.drain_zookeeper.planning_read``): one listing of
  ``/brokers/topics``, a walk (``ZnodeTreeWalker``, multiRead, the hook's defaults) of
  ``/cluster/id``, ``/brokers/ids``, ``/controller``, ``/controller_epoch``, ``/brokers/topics``
  without the topics' ``partitions`` subtrees, ``/admin/reassign_partitions`` and
  ``/admin/delete_topics``, the model of those rows, a second walk of the state znodes of the
  partitions the plan must move (scope ``rf1``: the RF=1 partitions on the drained broker, the
  planner's own ``in_drain_scope`` rule), and ``ClusterState.from_snapshot`` of all rows
  (``partial_read``); model: the in-flight check; plan: ``plan_from_state`` (the operator's inputs
  and ``plan_drain``: scope ``rf1``, rack-aware, 500 per batch) and the plan's files (with the
  read's record). There is no inventory, so, as the operator does then, sizes are unknown (0 bytes)
  and the planner balances partition counts. Timed from the process launch to its exit. Not timed:
  the DAG's full ``safety_snapshot`` task, which runs in parallel with the inventory and the plan
  and which the execute step checks the plan's read against before its first write (it is on the
  path to a change, not to the decision); ``--also-snapshot`` times that earlier path as well.
* product, snapshot (``--also-snapshot``): the plan from the full safety snapshot, as the DAG made
  it before: the full walk, the snapshot artefact written (Parquet + manifest), read back and
  verified, ``ClusterState.from_snapshot`` of the whole tree, the in-flight check, the same plan.
* kafka-assigner (``kafka-tools`` 0.1.9 from PyPI in a scratch venv, see ``_assigner_baseline.py``):
  ``kafka-assigner --generate --skip-ple ... -x <every topic that is not RF=1> remove -b 0``
  (rack-unaware round robin), which plans only: it reads ZooKeeper and writes nothing; a stub
  ``kafka-reassign-partitions.sh`` satisfies its start-up check. Wall time of the process.

An untimed walk before the runs (it also warms the ZooKeeper JVM up for both tools) and one after
them check that nothing changed the tree (znode count and highest zxid). Both plans are scored the
same way, from the tree the benchmark built: moves, receivers (brokers that gain replicas),
balance (max/min partitions added per receiver), rack violations (a moved partition whose replicas
were on distinct racks before and are not after: an RF=1 partition has one replica, so none can
occur in an RF=1 drain), moves of partitions that are not RF=1, and RF=1 partitions left on the
drained broker. Targets are printed next to the numbers with a met / not met verdict, never
asserted: at 200k partitions the product <= 6 s end to end and >= 2x faster than kafka-assigner,
0 rack violations, 0 moves of non-RF=1 partitions.

    python benchmarks/drain_plan_benchmark.py                # 50k,100k,200k x 6,50 brokers (~10 min)
    python benchmarks/drain_plan_benchmark.py --partitions 200000 --brokers 50 --repeat 3
    python benchmarks/drain_plan_benchmark.py --skip-baseline --also-snapshot --also-in-memory
    python benchmarks/drain_plan_benchmark.py --planner-only # plan_drain alone, log-normal sizes

``--also-in-memory`` adds a "product, mem" row: the full walk and the model built from the walk's
rows in the same process, no artefact (what a single task doing snapshot and plan would cost). ``--planner-only``
keeps the earlier inner-loop measurement (issue 6): ``plan_drain`` on an in-memory cluster with
log-normal sizes, ``--rf1-on-broker`` RF=1 partitions on broker 0 (target < 1 s, bytes balance
<= 1.10). The machine's load moves the numbers: compare rows of one run, and use ``--repeat``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snapshot_benchmark import peak_rss_mb  # benchmarks/ is sys.path[0] for a script

TopicPartition = tuple[str, int]
DRAINED = 0
CHROOT = "/bench"
DEFAULT_PARTITIONS, DEFAULT_BROKERS = "50000,100000,200000", "6,50"
TARGET_SECONDS, TARGET_RATIO, TARGET_PARTITIONS = 6.0, 2.0, 200_000
_TOPIC_PATH = re.compile(r"/brokers/topics/([^/]+)")


# ------------------------------------------------------------------------------ product worker
def _plan_files(workdir: str, plan: Any, read: dict[str, Any] | None) -> str:
    """The plan task's files (rollback.json first), as the operator writes them."""
    from airflow_provider_kafka_zk.kafka.drain import batches_json, dumps_tool_json

    out = Path(workdir, "plan")
    out.mkdir()
    (out / "rollback.json").write_text(dumps_tool_json(plan.rollback_json()))
    (out / "reassignment.json").write_text(dumps_tool_json(plan.reassignment_json()))
    document = {
        "batches": batches_json(plan.batches),
        "added_partitions": {str(b): v for b, v in plan.added_partitions.items()},
        "rack_aware_effective": plan.rack_aware,
        "read": read,
    }
    (out / "plan.json").write_text(json.dumps(document, indent=1))
    (out / "summary.txt").write_text(plan.summary() + "\n")
    return str(out / "reassignment.json")


def product_worker(hosts: str, chroot: str, workdir: str, mode: str) -> None:
    """The plan as the DAG makes it, in this fresh process; prints one JSON line of timestamps.

    Timestamps are ``time.perf_counter()`` (CLOCK_MONOTONIC, shared with the parent), so the parent
    can count the interpreter's start-up into the imports. ``mode``: ``read`` (the drain DAG's plan
    task: ``read_for_drain``), ``snapshot`` (the earlier path: full walk, snapshot artefact written
    and read back, model of the whole tree), ``memory`` (full walk, model from the walk's rows).
    """
    from kazoo.client import KazooClient

    from airflow_provider_kafka_zk.hooks.zookeeper_drain_read import read_for_drain
    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import ZnodeTreeWalker
    from airflow_provider_kafka_zk.kafka.drain import DrainRequest
    from airflow_provider_kafka_zk.kafka.drain_execution import plan_from_state
    from airflow_provider_kafka_zk.kafka.model import ClusterState
    from airflow_provider_kafka_zk.kafka.reassignment import reassignments_in_flight

    if mode == "snapshot":
        from airflow_provider_kafka_zk.artefacts.snapshots import read_snapshot, write_snapshot
    stamps = {"imported": time.perf_counter()}
    client = KazooClient(hosts=hosts + chroot, timeout=30)
    client.start()
    read_record = None
    try:
        if mode == "read":  # what DrainPlanOperator does with a kafka_zookeeper_conn_id
            read = read_for_drain(
                lambda include, exclude: ZnodeTreeWalker(
                    client, include=include, exclude=exclude, in_memory=True
                ).run(),
                lambda: client.get_children("/brokers/topics"),
                [DRAINED],
                scope="rf1",  # the request's below
                cluster="bench",
            )
            state, znodes = read.state, read.znodes
            read_record = read.record()
            stamps["walked"] = stamps["written"] = stamps["read"] = time.perf_counter()
        else:
            walk = ZnodeTreeWalker(client).run()  # the defaults KafkaZooKeeperHook.snapshot passes
    finally:
        client.stop()
        client.close()
    walk_rss = peak_rss_mb()
    if mode != "read":
        znodes = walk.znodes
        stamps["walked"] = time.perf_counter()
        if mode == "memory":
            stamps["written"] = stamps["walked"]
            rows = walk.rows
        else:  # the snapshot task publishes the artefact; the plan task reads it
            ref, _ = write_snapshot(workdir, "bench", walk, source={"hosts": [hosts], "chroot": chroot})
            stamps["written"] = time.perf_counter()
            _, rows = read_snapshot(ref.path)
        del walk
        stamps["read"] = time.perf_counter()
        state = ClusterState.from_snapshot(rows, cluster="bench")
        del rows
    in_flight = reassignments_in_flight(
        (t.assignment for t in state.topics.values()), state.reassign_partitions
    )
    if in_flight.any:
        raise SystemExit(f"reassignment in flight: {in_flight.describe()}")
    stamps["modelled"] = time.perf_counter()

    # the plan task from here on, without an inventory (sizes unknown): its inputs and plan_drain
    request = DrainRequest(brokers=frozenset({DRAINED}), scope="rf1", max_partitions_per_batch=500)
    plan = plan_from_state(state, request, sizes={})
    stamps["plan_drain"] = time.perf_counter()
    reassignment = _plan_files(workdir, plan, read_record)
    stamps["planned"] = time.perf_counter()
    print(
        json.dumps(
            {
                **stamps,
                "mode": mode,
                "znodes": znodes,
                "walk_rss_mb": walk_rss,
                "rss_mb": peak_rss_mb(),
                "complete": plan.complete,
                "rack_aware": plan.rack_aware,
                "reassignment": reassignment,
            }
        ),
        flush=True,
    )


def task_worker(hosts: str, chroot: str, workdir: str, mode: str) -> None:
    """The drain DAG's ``plan`` task as Airflow runs it, in this fresh interpreter: ``import
    airflow.sdk`` first (what every task process has before the task's own code), then the
    operator's module, ``DrainPlanOperator`` as the DAG configures it (planning read of the
    ``kafka_zookeeper`` connection ``AIRFLOW_CONN_BENCH_ZK``, scope ``rf1``, 500 per batch, no
    inventory) and its ``execute``. ``mode`` ``bare``: ``import airflow.sdk`` and exit (the cost
    every task pays, subtracted to give the task's own cost).

    Both end as Airflow's task process ends: its atexit functions, then ``os._exit`` -- no
    interpreter teardown (``_fork_main`` in ``airflow/sdk/execution_time/supervisor.py``, Airflow
    3.3.2: the forked task process "always exits via os._exit()"). A normal exit would add the
    teardown of every module and object to the task (measured here: over a second for the plan
    task under load), which no Airflow task pays.
    """
    import airflow.sdk  # noqa: F401 - first, as in a task process

    stamps = {"sdk": time.perf_counter()}
    if mode == "bare":
        print(json.dumps({**stamps, "mode": mode}), flush=True)
        _exit_as_airflow_does()
    from airflow_provider_kafka_zk.operators.drain import DrainPlanOperator

    stamps["imported"] = time.perf_counter()
    operator = DrainPlanOperator(
        task_id="plan",
        cluster="bench",
        brokers=[DRAINED],
        base_path=workdir,
        kafka_zookeeper_conn_id="bench_zk",
        scope="rf1",
        max_partitions_per_batch=500,
        inventory_ts="none",
        drain_ts="bench",
    )
    result = operator.execute({"run_id": "bench"})
    stamps["planned"] = time.perf_counter()
    heavy = sorted(m for m in ("pandas", "pyarrow", "numpy", "paramiko") if m in sys.modules)
    print(
        json.dumps(
            {
                **stamps,
                "mode": mode,
                "reassignment": result["reassignment"],
                "complete": result["complete"],
                "rss_mb": peak_rss_mb(),
                "heavy_modules": heavy,
            }
        ),
        flush=True,
    )
    _exit_as_airflow_does()


def _exit_as_airflow_does() -> None:
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def run_task(hosts: str, mode: str) -> Run:
    """One task (or bare) process, timed from before its launch to after its exit."""
    with tempfile.TemporaryDirectory(prefix="drain-task-") as workdir:
        cmd = [sys.executable, __file__, "--worker", "--hosts", hosts, "--chroot", CHROOT]
        cmd += ["--workdir", workdir, "--mode", mode]
        conn = {"conn_type": "kafka_zookeeper", "host": hosts, "extra": {"chroot": CHROOT}}
        env = {**os.environ, "AIRFLOW_CONN_BENCH_ZK": json.dumps(conn)}
        load = os.getloadavg()[0]
        launched = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        ended = time.perf_counter()
        if done.returncode != 0:
            raise RuntimeError(f"{mode} worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
        [info] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        if mode == "task":
            document = json.loads(Path(info["reassignment"]).read_text())
            targets = {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in document["partitions"]}
    info["load"] = load
    split = {"sdk": info["sdk"] - launched}
    if mode == "task":
        split.update(imports=info["imported"] - info["sdk"], execute=info["planned"] - info["imported"])
        split["exit"] = ended - info["planned"]
    return Run(ended - launched, targets, split, info)


@dataclass
class Run:
    """One timed process: total wall time and, for the product, where it went."""

    seconds: float
    targets: dict[TopicPartition, tuple[int, ...]]
    split: dict[str, float] | None = None
    info: dict[str, Any] | None = None


def run_product(hosts: str, mode: str = "read") -> Run:
    """One product run in a fresh process, timed from before its launch to after its exit."""
    with tempfile.TemporaryDirectory(prefix="drain-bench-") as workdir:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            "--hosts",
            hosts,
            "--chroot",
            CHROOT,
            "--workdir",
            workdir,
        ]
        cmd += ["--mode", mode]
        launched = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        ended = time.perf_counter()
        if done.returncode != 0:
            raise RuntimeError(f"product worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
        [info] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        document = json.loads(Path(info["reassignment"]).read_text())
    targets = {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in document["partitions"]}
    split = {  # the phases add up to the total
        "imports": info["imported"] - launched,  # interpreter start-up included
        # read: planning read (2 walks + ClusterState); snapshot: full walk + artefact written
        "read": info["written"] - info["imported"],
        "model": info["modelled"] - info["written"],  # [artefact read + ClusterState +] in-flight check
        "plan": info["planned"] - info["modelled"],  # plan_from_state (inputs + plan_drain) + files
        "exit": ended - info["planned"],
    }
    return Run(ended - launched, targets, split, info)


def run_assigner(hosts: str, excluded: Sequence[str], executable: Path, tools: Path) -> tuple[Run, list[str]]:
    import _assigner_baseline as baseline

    tools_path, env = baseline.stub_tools(tools)
    cmd = baseline.command(executable, hosts + CHROOT, tools_path, [DRAINED], excluded)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kafka-assigner failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Run(seconds, baseline.parse_targets(done.stderr + done.stdout)), cmd


# ------------------------------------------------------------------------------ tree and scoring
@dataclass
class Tree:
    """What the benchmark knows about the tree it built, to score both plans independently."""

    assignment: dict[TopicPartition, tuple[int, ...]]
    racks: dict[int, str]
    znodes: int
    topics: int


def build_spec(partitions: int, brokers: int, per_topic: int, rf1_share: float) -> Any:
    """Topics of ``per_topic``; topic t is RF=1 when ``floor((t+1)*share) > floor(t*share)`` (spread)."""
    from airflow_provider_kafka_zk.testing.simulator import BrokerSpec, ClusterSpec, TopicSpec

    topics = []
    for t in range((partitions + per_topic - 1) // per_topic):
        rf1 = int((t + 1) * rf1_share) > int(t * rf1_share)
        topics.append(
            TopicSpec(
                f"{'single' if rf1 else 'topic'}-{t:05d}",
                partitions=min(per_topic, partitions - t * per_topic),
                replication_factor=1 if rf1 else 3,
                records_per_partition=0,
            )
        )
    return ClusterSpec(
        name="bench",
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3}") for b in range(brokers)),
        topics=tuple(topics),
    )


def build_tree(
    hosts: str, partitions: int, brokers: int, per_topic: int, rf1_share: float
) -> tuple[Any, Tree]:
    """(open BulkLoadedTree, what it holds); close the first when done."""
    from airflow_provider_kafka_zk.testing.simulator import SimulatedCluster
    from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper
    from airflow_provider_kafka_zk.testing.zk_bulk import BulkLoadedTree

    spec = build_spec(partitions, brokers, per_topic, rf1_share)
    records = render_zookeeper(SimulatedCluster(spec))
    assignment: dict[TopicPartition, tuple[int, ...]] = {}
    for record in records:
        match = _TOPIC_PATH.fullmatch(record.path)
        if match and record.data:
            for p, replicas in json.loads(record.data)["partitions"].items():
                assignment[(match[1], int(p))] = tuple(replicas)
    started = time.perf_counter()
    loaded = BulkLoadedTree(hosts, CHROOT, records)
    tree = Tree(
        assignment, {b.broker_id: str(b.rack) for b in spec.brokers}, len(records) + 1, len(spec.topics)
    )
    rf1_here = sum(1 for r in assignment.values() if r == (DRAINED,))
    print(
        f"tree: {partitions:,} partitions in {tree.topics:,} topics, {brokers} brokers on 3 racks, "
        f"{tree.znodes:,} znodes; {rf1_here:,} RF=1 partitions on broker {DRAINED} "
        f"(loaded in {time.perf_counter() - started:.1f} s)",
        flush=True,
    )
    return loaded, tree


@dataclass
class Score:
    moves: int
    receivers: int
    eligible: int
    balance: float | None
    rack_violations: int
    non_rf1_moves: int
    rf1_left: int
    onto_drained: int


def score(tree: Tree, targets: Mapping[TopicPartition, tuple[int, ...]]) -> Score:
    """Score a plan (partition -> target replicas) against the tree, the same way for both tools."""
    added: Counter[int] = Counter()
    moves = rack_violations = non_rf1 = onto_drained = 0
    for tp, target in targets.items():
        current = tree.assignment[tp]
        if target == current:
            continue
        moves += 1
        non_rf1 += len(current) != 1
        onto_drained += DRAINED in target
        added.update(b for b in target if b not in current)
        before = {tree.racks[b] for b in current}
        after = {tree.racks[b] for b in target}
        rack_violations += len(before) == len(current) and len(after) < len(target)
    rf1_left = sum(
        1 for tp, r in tree.assignment.items() if r == (DRAINED,) and targets.get(tp, r) == (DRAINED,)
    )
    counts = [n for n in added.values() if n]
    return Score(
        moves=moves,
        receivers=len(counts),
        eligible=len(tree.racks) - 1,
        balance=max(counts) / min(counts) if counts else None,
        rack_violations=rack_violations,
        non_rf1_moves=non_rf1,
        rf1_left=rf1_left,
        onto_drained=onto_drained,
    )


# ------------------------------------------------------------------------------ end to end
HEADER = (
    f"{'partitions':>10} {'brk':>3} {'tool':<17} {'total s':>7} {'imports':>7} {'read':>8} {'model':>5} "
    f"{'plan':>5} {'exit':>4} {'ratio':>6} {'moves':>6} {'recv':>5} {'balance':>7} {'rackV':>5} "
    f"{'nonRF1':>6} {'left':>4}"
)
LEGEND = (
    "total s: process launch to exit, best of --repeat; product phases (they add up to the total): "
    "imports = interpreter start-up + imports; read = product: the plan task's planning read (read_for_drain: "
    "2 walks + ClusterState), product, snapshot/mem: full walk [+ snapshot artefact written]; model = "
    "product: in-flight check; product, snapshot: artefact read back + ClusterState + in-flight check "
    "(product, mem: walk.rows + ClusterState + check); "
    "plan = plan_from_state (operator inputs + plan_drain) + plan files; exit = interpreter exit. ratio = kafka-assigner / "
    "product; recv = receivers/eligible brokers; balance = max/min partitions added per receiver; rackV = "
    "rack violations; nonRF1 = moves of partitions that are not RF=1; left = RF=1 partitions still on the "
    "drained broker"
)


def _row(partitions: int, brokers: int, tool: str, run: Run, s: Score, ratio: str) -> str:
    split = run.split or {}
    phases = " ".join(
        f"{split[k]:>{w}.2f}" if k in split else f"{'-':>{w}}"
        for k, w in (("imports", 7), ("read", 8), ("model", 5), ("plan", 5), ("exit", 4))
    )
    balance = f"{s.balance:.3f}" if s.balance else "-"
    receivers = f"{s.receivers}/{s.eligible}"
    return (
        f"{partitions:>10,} {brokers:>3} {tool:<17} {run.seconds:>7.2f} {phases} {ratio:>6} {s.moves:>6,} "
        f"{receivers:>5} {balance:>7} {s.rack_violations:>5} {s.non_rf1_moves:>6} {s.rf1_left:>4}"
    )


def tree_fingerprint(hosts: str) -> tuple[int, int]:
    """(znodes, highest czxid/mzxid/pzxid) from an untimed walk; also warms the ZooKeeper JVM up, so
    that neither tool meets a cold server (it runs C1-compiled code)."""
    from kazoo.client import KazooClient

    from airflow_provider_kafka_zk.hooks.zookeeper_snapshot import ZnodeTreeWalker

    client = KazooClient(hosts=hosts + CHROOT, timeout=30)
    client.start()
    try:
        walk = ZnodeTreeWalker(client).run()
        return walk.znodes, walk.max_zxid_seen
    finally:
        client.stop()
        client.close()


def _best(runs: Sequence[Run]) -> Run:
    return min(runs, key=lambda r: r.seconds)


def _product_note(label: str, runs: Sequence[Run]) -> str:
    best = _best(runs)
    info, split = best.info or {}, best.split or {}
    times = ", ".join(f"{r.seconds:.2f}" for r in runs)
    if info["mode"] == "read":
        artefact = f"planning read (2 walks + ClusterState) {info['read'] - info['imported']:.2f} s; model:"
        return (
            f"{label}: runs {times} s; {info['znodes']:,} znodes read; {artefact} in-flight check "
            f"{info['modelled'] - info['read']:.2f} s; plan: plan_from_state (inputs + plan_drain) "
            f"{info['plan_drain'] - info['modelled']:.2f} s, files {info['planned'] - info['plan_drain']:.2f} s; "
            f"exit {split['exit']:.2f} s; peak RSS {info['rss_mb']:.0f} MB; complete={info['complete']} "
            f"rack_aware={info['rack_aware']}"
        )
    if info["written"] != info["walked"]:
        artefact = (
            f"walk {info['walked'] - info['imported']:.2f} s, artefact write {info['written'] - info['walked']:.2f} s; "
            f"model: artefact read {info['read'] - info['written']:.2f} s"
        )
    else:
        artefact = f"walk {info['walked'] - info['imported']:.2f} s; model: walk.rows {info['read'] - info['written']:.2f} s"
    return (
        f"{label}: runs {times} s; {info['znodes']:,} znodes; snapshot: {artefact}, ClusterState + in-flight "
        f"check {info['modelled'] - info['read']:.2f} s; plan: plan_from_state (inputs + plan_drain) "
        f"{info['plan_drain'] - info['modelled']:.2f} s, files {info['planned'] - info['plan_drain']:.2f} s; "
        f"exit {split['exit']:.2f} s; peak RSS {info['rss_mb']:.0f} MB ({info['walk_rss_mb']:.0f} after the "
        f"walk); complete={info['complete']} rack_aware={info['rack_aware']}"
    )


TASK_HEADER = (
    "| partitions | brokers | task, whole process (s) | bare `import airflow.sdk` (s) | task's own cost (s) "
    "| own cost after the sdk import (s) | kafka-assigner (s) | ratio assigner / own | moves (task, assigner) "
    "| 1-min load at the runs | heavy modules |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
)
TASK_LEGEND = (
    "The plan task as Airflow runs it: a fresh interpreter that imports airflow.sdk first, then "
    "operators.drain, DrainPlanOperator(...).execute(). Own cost = whole task process - bare "
    "`import airflow.sdk` process, paired run by run (bare, task, core path, kafka-assigner alternate). "
    "Cells: best (min-max over --repeat). Ratio: kafka-assigner's best / own best, then its best / the "
    "own cost's worst run in brackets (target >= 2x), on both own-cost columns. The second "
    "column is the same difference without the interpreter start and the sdk import itself: (task exit - "
    "its sdk import's end) - (bare exit - its sdk import's end), run by run; on a loaded machine the sdk "
    "import's own spread (seconds) swamps the whole-process difference. Heavy modules: "
    "pandas/pyarrow/numpy/paramiko the task process had imported."
)


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _task_row(partitions: int, brokers: int, runs: dict[str, list[Run]], tree: Tree) -> str:
    tasks, bares, assigners = runs["task"], runs["bare"], runs["kafka-assigner"]
    own = [t.seconds - b.seconds for t, b in zip(tasks, bares, strict=True)]
    after = [
        (t.seconds - t.split["sdk"]) - (b.seconds - b.split["sdk"])  # type: ignore[index]
        for t, b in zip(tasks, bares, strict=True)
    ]
    loads = ", ".join(f"{r.info['load']:.1f}" for r in tasks if r.info)
    task_moves = score(tree, _best(tasks).targets).moves
    heavy = ",".join(_best(tasks).info.get("heavy_modules", [])) or "none"  # type: ignore[union-attr]
    if assigners:
        best = min(r.seconds for r in assigners)
        ratio = "; ".join(
            f"{label} {best / min(v):.1f}x ({best / max(v):.1f}x)" if min(v) > 0 else f"{label} -"
            for label, v in (("whole-bare", own), ("after sdk", after))
        )
        assigner = _spread([r.seconds for r in assigners])
        moves = f"{task_moves:,}, {score(tree, _best(assigners).targets).moves:,}"
    else:
        ratio, assigner, moves = "-", "-", f"{task_moves:,}, -"
    return (
        f"| {partitions:,} | {brokers} | {_spread([r.seconds for r in tasks])} | "
        f"{_spread([r.seconds for r in bares])} | {_spread(own)} | {_spread(after)} | {assigner} | {ratio} | "
        f"{moves} | {loads} | {heavy} |"
    )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def end_to_end(args: argparse.Namespace, matrix: Sequence[tuple[int, int]]) -> None:
    """Each (partitions, brokers) on its own tree, the tools alternating; the table again at the end."""
    import _assigner_baseline as baseline

    from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

    executable = None
    if not args.skip_baseline:
        executable = baseline.ensure_venv(Path(args.assigner_venv))
        print(f"baseline: {baseline.version(Path(args.assigner_venv))} ({executable})", flush=True)
    lines: list[str] = []
    task_lines: list[str] = []
    notes: list[str] = []
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="drain-bench-tools-") as tools:
        for partitions, brokers in matrix:
            runs: dict[str, list[Run]] = {
                "task": [],
                "bare": [],
                "product": [],
                "product, snapshot": [],
                "product, mem": [],
                "kafka-assigner": [],
            }
            # a fresh server per tree: the JVM holds only this tree, and no chroot has to be deleted
            with ZooKeeperServer() as zk:
                loaded, tree = build_tree(
                    zk.connect_string, partitions, brokers, args.per_topic, args.rf1_share
                )
                with loaded:
                    excluded = sorted({t for (t, _), r in tree.assignment.items() if len(r) != 1})
                    before = tree_fingerprint(zk.connect_string)
                    load_start = os.getloadavg()[0]
                    for _ in range(args.repeat):  # alternate, so all see the same machine load
                        runs["bare"].append(run_task(zk.connect_string, "bare"))
                        runs["task"].append(run_task(zk.connect_string, "task"))
                        runs["product"].append(run_product(zk.connect_string))
                        if executable is not None:
                            run, cmd = run_assigner(zk.connect_string, excluded, executable, Path(tools))
                            runs["kafka-assigner"].append(run)
                        if args.also_snapshot:
                            runs["product, snapshot"].append(run_product(zk.connect_string, "snapshot"))
                        if args.also_in_memory:
                            runs["product, mem"].append(run_product(zk.connect_string, "memory"))
                    load_end = os.getloadavg()[0]
                    after = tree_fingerprint(zk.connect_string)
            label = f"{partitions:,}/{brokers}"
            notes.append(
                f"machine {label}: {os.cpu_count()} CPUs; 1-min load average {load_start:.1f} before the runs, "
                f"{load_end:.1f} after"
            )
            notes.append(
                f"tree {label}: {'unchanged' if after == before else 'CHANGED'} by the runs "
                f"({before[0]:,} znodes, highest zxid {before[1]:#x} before; {after[0]:,}, {after[1]:#x} after)"
            )
            if runs["kafka-assigner"]:
                shown = [c if len(c) < 80 else c[:60] + f"...({len(excluded)} topics)" for c in cmd]
                times = ", ".join(f"{r.seconds:.2f}" for r in runs["kafka-assigner"])
                notes.append(f"kafka-assigner {label}: runs {times} s: {' '.join(shown)}")
            assigner = _best(runs["kafka-assigner"]) if runs["kafka-assigner"] else None
            task_lines.append(_task_row(partitions, brokers, runs, tree))
            print(TASK_HEADER.splitlines()[0], task_lines[-1], sep="\n", flush=True)
            for tool in ("product", "product, snapshot", "product, mem"):
                if not runs[tool]:
                    continue
                best = _best(runs[tool])
                ratio = assigner.seconds / best.seconds if assigner else None
                s = score(tree, best.targets)
                lines.append(_row(partitions, brokers, tool, best, s, f"{ratio:.1f}x" if ratio else "-"))
                notes.append(_product_note(f"{tool} {label}", runs[tool]))
                if s.onto_drained:
                    notes.append(
                        f"{tool} {label}: {s.onto_drained} moves put a replica ON the drained broker"
                    )
                if tool == "product" and partitions == TARGET_PARTITIONS:
                    verdicts.append(
                        f"{label}: end to end {best.seconds:.2f} s <= {TARGET_SECONDS:.0f} s: "
                        f"{_verdict(best.seconds <= TARGET_SECONDS)}; "
                        + (
                            f"{ratio:.2f}x faster than kafka-assigner ({assigner.seconds:.2f} s) >= "
                            f"{TARGET_RATIO:.0f}x: {_verdict(ratio >= TARGET_RATIO)}; "
                            if assigner and ratio
                            else "kafka-assigner not run; "
                        )
                        + f"rack violations {s.rack_violations}: {_verdict(s.rack_violations == 0)}; "
                        f"non-RF=1 moves {s.non_rf1_moves}: {_verdict(s.non_rf1_moves == 0)}"
                    )
            if assigner is not None:
                lines.append(
                    _row(partitions, brokers, "kafka-assigner", assigner, score(tree, assigner.targets), "")
                )
            print("\n".join([HEADER, *lines]), flush=True)

    print()
    print(HEADER)
    print("\n".join(lines))
    print(LEGEND)
    print()
    print(TASK_HEADER)
    print("\n".join(task_lines))
    print(TASK_LEGEND)
    print(
        f"targets (printed, not asserted) at {TARGET_PARTITIONS:,} partitions: product <= {TARGET_SECONDS:.0f} s "
        f"end to end and >= {TARGET_RATIO:.0f}x faster than kafka-assigner; rackV 0; nonRF1 0"
    )
    for verdict in verdicts:
        print(f"  {verdict}")
    for note in notes:
        print(note)


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


# ------------------------------------------------------------------------------ planner only
def build_in_memory(
    brokers: int, partitions: int, rf1_on_drained: int, seed: int = 1
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[int, Any], dict[TopicPartition, int]]:
    """The issue-6 cluster: RF=1 on broker 0 and elsewhere, RF=3 the rest, log-normal sizes."""
    from airflow_provider_kafka_zk.kafka.drain import BrokerInfo

    rng = random.Random(seed)
    info = {b: BrokerInfo(b, rack=f"r{b % 3}") for b in range(brokers)}
    assignment: dict[TopicPartition, tuple[int, ...]] = {}
    sizes: dict[TopicPartition, int] = {}
    for i in range(partitions):
        tp = (f"topic-{i // 100:05d}", i % 100)
        if i < rf1_on_drained:
            replicas: tuple[int, ...] = (DRAINED,)
        elif i % 10 == 0:
            replicas = (1 + rng.randrange(brokers - 1),)  # RF=1 elsewhere: not in scope
        else:
            first = rng.randrange(brokers)
            replicas = (first, (first + 1) % brokers, (first + 2) % brokers)
        assignment[tp] = replicas
        sizes[tp] = int(rng.lognormvariate(18, 1.5))  # median ~65 MB, long tail
    return assignment, info, sizes


def planner_only(args: argparse.Namespace) -> None:
    from airflow_provider_kafka_zk.kafka.drain import DrainRequest, plan_drain

    for partitions, brokers in itertools.product(_ints(args.partitions), _ints(args.brokers)):
        assignment, info, sizes = build_in_memory(brokers, partitions, args.rf1_on_broker)
        request = DrainRequest(brokers=frozenset({DRAINED}), scope="rf1", max_partitions_per_batch=500)
        started = time.perf_counter()
        plan = plan_drain(assignment, info, request, sizes=sizes)
        elapsed = time.perf_counter() - started
        counts = [c for c in plan.added_partitions.values() if c]
        print(
            f"{brokers} brokers, {len(assignment):,} partitions, {len(plan.moves):,} RF=1 moves off broker "
            f"{DRAINED}: planning {elapsed:.3f} s (target < 1 s); bytes added max/min over {len(counts)} "
            f"destinations {plan.balance_ratio:.4f} (target <= 1.10); partitions added min {min(counts)} "
            f"max {max(counts)}; {len(plan.batches)} batches",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default=None, help=f"comma-separated (default {DEFAULT_PARTITIONS})")
    parser.add_argument("--brokers", default=None, help=f"comma-separated (default {DEFAULT_BROKERS})")
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--rf1-share", type=float, default=0.25, help="share of the topics that are RF=1")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool (the best is shown)")
    parser.add_argument("--skip-baseline", action="store_true", help="no kafka-assigner")
    parser.add_argument(
        "--also-in-memory", action="store_true", help="a 'product, mem' row: model from the walk's rows"
    )
    parser.add_argument("--assigner-venv", default=str(Path(tempfile.gettempdir()) / "kafka-assigner-venv"))
    parser.add_argument("--planner-only", action="store_true", help="plan_drain alone, in memory")
    parser.add_argument("--rf1-on-broker", type=int, default=4_000, help="--planner-only: RF=1 on broker 0")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--chroot", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument(
        "--also-snapshot",
        action="store_true",
        help="a 'product, snapshot' row: the earlier path (full walk, artefact, read back, whole model)",
    )
    parser.add_argument("--mode", default="read", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker and args.mode in ("task", "bare"):
        task_worker(args.hosts, args.chroot, args.workdir, args.mode)
    elif args.worker:
        product_worker(args.hosts, args.chroot, args.workdir, args.mode)
    elif args.planner_only:
        args.partitions = args.partitions or "200000"
        args.brokers = args.brokers or "50"
        planner_only(args)
    else:
        partitions = _ints(args.partitions or DEFAULT_PARTITIONS)
        brokers = _ints(args.brokers or DEFAULT_BROKERS)
        end_to_end(args, list(itertools.product(partitions, brokers)))


if __name__ == "__main__":
    main()
