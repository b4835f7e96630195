"""The daily audit at fleet scale (issue 35): the whole daily DAG on simulated clusters of 10k to 200k
partitions, under ``airflow dags test`` and under the production harness's scheduler, against today's
code (``--baseline``, default main at 8f9a414) in the same run.

    python benchmarks/fleet_benchmark.py                                   # every size, both modes
    python benchmarks/fleet_benchmark.py --sizes 10000:12 --modes dags-test --repeat 2
    python benchmarks/fleet_benchmark.py --sizes 200000:50 --modes scheduler --skip-baseline

Per size (``partitions:brokers``; topics of 100 partitions, RF 3, Kafka 3.3.1, one log dir per broker)
the benchmark builds the cluster itself -- the simulator's model, its ZooKeeper tree in a real
ZooKeeper (``DeployedCluster``) and every broker's disk -- and serves the broker hosts with
``testing/sshd.py`` (one loopback address per broker; one sshd process per 16 of them), then runs
the cluster's daily hygiene DAG (in-process audit, the shipped defaults otherwise):

* ``dags-test``: ``airflow dags test`` in a fresh Airflow home (SQLite), the product and the
  baseline alternating run by run (both see the same load);
* ``scheduler``: ``testing/airflow_production.py``'s deployment (PostgreSQL, api-server, scheduler,
  dag-processor, triggerer, LocalExecutor with ``--parallelism`` workers), the run triggered over
  REST without a logical date, timed from the trigger to the run's end state.

The baseline is the tree of ``--baseline`` (``git archive``, no worktree left behind) put first on
``PYTHONPATH`` of every Airflow process, its own ``dags/`` file as the DAGs folder: the same DAG
file and operators as that commit had, reading the same cluster. Printed per run: the whole run
(process wall time for ``dags test``; trigger to end for the scheduler) and each stage from the task
instances' own start and end (the mapped inventory from its first start to its last end, with the
sum of its tasks' durations), the per-replica-directory and per-broker cost of the inventory, the
cluster's build time per replica, the ratio to the baseline and to the figures issue 35 measured on
8f9a414 (``ISSUE_FIGURES``), and the 1-minute load average. Findings and inventory rows of the
product and the baseline are compared row for row (``same findings`` / ``same inventory``).
Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
BASELINE = "8f9a414"
PER_TOPIC = 100
CLUSTER = "fleet"
SSH_CONN = "fleet_ssh"
ZK_CONN = "fleet_zk"
DAG_ID = f"kafka_zk_daily_hygiene_{CLUSTER}"
ISSUE_FIGURES = {
    # partitions: (brokers, whole run s, snapshot s, inventory s, audit s, cluster build s) on 8f9a414
    10_000: (12, 16.3, 0.2, 7.0, 0.8, 26.0),
    50_000: (24, 36.1, 0.9, 24.5, 2.0, 208.0),
    100_000: (50, 66.2, 2.0, 50.5, 4.5, 568.0),
}
STAGES = (
    "snapshot",
    "brokers",
    "inventory",
    "coverage",
    "audit",
    "gate",
    "deletions",
    "notify_check",
    "alert",
)


def load() -> float:
    return os.getloadavg()[0]


def broker_address(broker_id: int) -> str:
    """Loopback address of a broker host: 127.1.<id // 250>.<id % 250 + 1>."""
    return f"127.1.{broker_id // 250}.{broker_id % 250 + 1}"


# ------------------------------------------------------------------------------ the cluster
@dataclass
class Built:
    partitions: int
    brokers: int
    deployed: Any
    replicas: int
    znodes: int
    seconds: dict[str, float]


def build_cluster(zookeeper: Any, partitions: int, brokers: int, root: Path) -> Built:
    """The simulated cluster in ZooKeeper and on disk (``DeployedCluster``), timed by part."""
    from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
    from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster
    from airflow_provider_kafka_zk.testing.simulator.spec import BrokerSpec, ClusterSpec, TopicSpec

    seconds: dict[str, float] = {}
    started = time.monotonic()
    spec = ClusterSpec(
        name=CLUSTER,
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3 + 1}", host=broker_address(b)) for b in range(brokers)),
        topics=tuple(
            TopicSpec(f"topic-{i:05d}", partitions=PER_TOPIC, replication_factor=3, records_per_partition=20)
            for i in range(max(1, partitions // PER_TOPIC))
        ),
        min_insync_replicas=2,
        seed=35,
    )
    cluster = SimulatedCluster(spec)
    seconds["model"] = time.monotonic() - started
    started = time.monotonic()
    deployed = DeployedCluster(cluster, zookeeper.connect_string, zookeeper.new_chroot("/fleet_"), root)
    seconds["zookeeper + disk"] = time.monotonic() - started
    seconds["total"] = seconds["model"] + seconds["zookeeper + disk"]
    return Built(partitions, brokers, deployed, len(cluster.dirs), len(deployed.writer._persistent), seconds)


# ------------------------------------------------------------------------------ the code under test
@dataclass
class Code:
    """The product (this checkout) or the baseline (an exported tree) as Airflow processes see it."""

    label: str
    root: Path
    pythonpath: str | None

    @property
    def dags_folder(self) -> Path:
        return self.root / "bench-dags"


def product_code(work: Path) -> Code:
    code = Code("product", work / "product", None)
    code.dags_folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "dags" / "kafka_zk_daily_hygiene.py", code.dags_folder)
    return code


def baseline_code(work: Path, commit: str) -> Code:
    """``git archive <commit>`` into ``work``: its package first on PYTHONPATH, its DAG file."""
    root = work / f"baseline-{commit}"
    if not (root / "airflow_provider_kafka_zk").exists():
        root.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", commit], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    code = Code(f"baseline {commit}", root, str(root))
    code.dags_folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "dags" / "kafka_zk_daily_hygiene.py", code.dags_folder)
    return code


def cluster_file(path: Path, built: Built, base: Path) -> Path:
    deployed = built.deployed
    hosts = ", ".join(f'"{b}" = "{broker_address(b)}"' for b in sorted(deployed.cluster.brokers))
    path.write_text(
        "\n".join(
            [
                f"[clusters.{CLUSTER}]",
                f'kafka_zookeeper_conn_id = "{ZK_CONN}"',
                f'ssh_conn_id = "{SSH_CONN}"',
                f'base_path = "{base}"',
                'engine = "in-process"',
                f'server_properties_path = "{deployed.root}/broker-{{broker_id}}/config/server.properties"',
                f"broker_hosts = {{ {hosts} }}",
                "retries = 0",
                f'schedule = "{NEVER}"',
                "",
            ]
        )
    )
    return path


def connections(built: Built, sshd: Any) -> dict[str, dict[str, Any]]:
    deployed = built.deployed
    return {
        ZK_CONN: {
            "conn_type": "kafkazookeeper",
            "host": deployed.zookeeper_hosts,
            "extra": {"chroot": deployed.chroot, "connect_timeout": 10, "session_timeout": 30},
        },
        SSH_CONN: sshd.airflow_connection_fields(broker_address(0), conn_timeout=30),
    }


# ------------------------------------------------------------------------------ one run
@dataclass
class Run:
    mode: str
    code: str
    seconds: float
    stages: dict[str, dict[str, float]]
    load: float
    state: str
    findings: str | None = None
    inventory: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _stages(
    rows: list[tuple[str, int, float | None, float | None, float | None]],
) -> dict[str, dict[str, float]]:
    """task id -> span (first start to last end), summed durations and task count."""
    out: dict[str, dict[str, float]] = {}
    by: dict[str, list[tuple[float, float, float]]] = {}
    for task_id, _map_index, start, end, duration in rows:
        if start is None or end is None:
            continue
        by.setdefault(task_id, []).append((start, end, duration or end - start))
    for task_id, items in by.items():
        out[task_id] = {
            "span": max(e for _, e, _ in items) - min(s for s, _, _ in items),
            "sum": sum(d for _, _, d in items),
            "tasks": len(items),
            "start": min(s for s, _, _ in items),
            "end": max(e for _, e, _ in items),
        }
    return out


def _ts(value: str | None) -> float | None:
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def dags_test(code: Code, work: Path, conns: dict[str, dict[str, Any]], clusters: Path) -> Run:
    """One ``airflow dags test`` of the daily DAG in a fresh Airflow home; stages from its SQLite DB."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA_ZK_", "PYTHONPATH"))}
    env.update(
        {
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(code.dags_folder),
            "KAFKA_ZK_CLUSTERS_FILE": str(clusters),
            **{f"AIRFLOW_CONN_{c.upper()}": json.dumps(f) for c, f in conns.items()},
        }
    )
    if code.pythonpath:
        env["PYTHONPATH"] = code.pythonpath
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    before = load()
    started = time.monotonic()
    done = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID], env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        rows = db.execute(
            "select task_id, map_index, start_date, end_date, duration, state from task_instance"
        ).fetchall()
        states = {r[0]: r[5] for r in rows}
    stages = _stages([(t, m, _ts(s) if s else None, _ts(e) if e else None, d) for t, m, s, e, d, _ in rows])
    state = "success" if done.returncode == 0 else f"failed ({done.returncode})"
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    return Run("dags test", code.label, seconds, stages, max(before, load()), state, extra={"states": states})


def tree_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds of each named process and everything below it: live processes' own time plus what
    they reaped of their children's (a LocalExecutor worker reaps the task processes it ran)."""
    import psutil

    out: dict[str, float] = {}
    for name, pid in pids.items():
        total = 0.0
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = process.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
        out[name] = total
    return out


NEVER = "0 0 29 2 *"
"""A cron whose last fire time is before the DAG's start date: unpausing schedules no run."""


def scheduler_run(
    code: Code,
    work: Path,
    conns: dict[str, dict[str, Any]],
    clusters: Path,
    parallelism: int,
    others: dict[str, int],
) -> Run:
    """The production harness's deployment from this venv (the checkout's package, or the baseline's
    first on PYTHONPATH), the run triggered over REST without a logical date, timed to its end."""
    from airflow_provider_kafka_zk.testing.airflow_production import (
        AirflowProduction,
        AirflowRunFailed,
        PostgresServer,
        ProductionVenv,
    )

    deployment = Path(tempfile.mkdtemp(prefix="deployment-", dir=work))
    extra = {"KAFKA_ZK_CLUSTERS_FILE": str(clusters)}
    if code.pythonpath:
        extra["PYTHONPATH"] = code.pythonpath
    with PostgresServer() as postgres:
        airflow = AirflowProduction(
            ProductionVenv(VENV_BIN.parent),
            postgres,
            deployment / "home",
            dags_folder=code.dags_folder,
            extra_env=extra,
            connections=conns,
            parallelism=parallelism,
        )
        with airflow:
            airflow.unpause(DAG_ID)
            time.sleep(5)  # the unpause's own scheduling loop settles
            pids = {name: service.process.pid for name, service in airflow.services.items()}
            pids.update(others)
            pids["postgres"] = postgres.pid or 0
            cpu_before = tree_cpu(pids)
            before = load()
            started = time.monotonic()
            run_id = airflow.trigger_rest(DAG_ID, {})
            try:
                airflow.wait_for_run(DAG_ID, run_id, timeout=1800)
            except AirflowRunFailed as failed:
                print(str(failed)[-5000:], file=sys.stderr)
            seconds = time.monotonic() - started
            run = airflow.run(DAG_ID, run_id)
            cpu = {k: v - cpu_before.get(k, 0.0) for k, v in tree_cpu(pids).items()}
            tis = airflow.task_instances(DAG_ID, run_id)
            after = load()
            run_span = (_ts(run.get("end_date")) or 0) - (_ts(run.get("start_date")) or 0)
    stages = _stages(
        [
            (t["task_id"], t["map_index"], _ts(t["start_date"]), _ts(t["end_date"]), t.get("duration"))
            for t in tis
        ]
    )
    shutil.rmtree(deployment, ignore_errors=True)
    return Run(
        "scheduler",
        code.label,
        seconds,
        stages,
        max(before, after),
        run["state"],
        extra={"run_span": run_span, "states": {t["task_id"]: t["state"] for t in tis}, "cpu": cpu},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000:12,50000:24,100000:50,200000:50")
    parser.add_argument("--modes", default="dags-test,scheduler")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--parallelism", type=int, default=8, help="LocalExecutor's workers (scheduler mode)")
    args = parser.parse_args(argv)

    from airflow_provider_kafka_zk.testing.sshd import SshServer
    from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

    work = args.workdir or Path(tempfile.mkdtemp(prefix="fleet-bench-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    codes = [product_code(work)]
    if not args.skip_baseline:
        codes.append(baseline_code(work, args.baseline))
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
    with ZooKeeperServer(work / "zookeeper") as zookeeper:
        for partitions, brokers in sizes:
            root = work / f"hosts-{partitions}"
            built = build_cluster(zookeeper, partitions, brokers, root)
            print(
                f"built {partitions} partitions / {brokers} brokers: {built.replicas} replica dirs, "
                f"{built.znodes} znodes, {built.seconds} (load {load():.1f})",
                flush=True,
            )
            with SshServer([broker_address(b) for b in range(brokers)], work_dir=work / "sshd") as sshd:
                base = work / f"artefacts-{partitions}"
                clusters = cluster_file(work / f"clusters-{partitions}.toml", built, base)
                conns = connections(built, sshd)
                modes = args.modes.split(",")
                for _ in range(args.repeat):
                    for mode in modes:
                        for code in codes:
                            if mode == "dags-test":
                                run = dags_test(code, work, conns, clusters)
                            else:
                                others = {
                                    "zookeeper": zookeeper.pid or 0,
                                    **{f"sshd{i}": p for i, p in enumerate(sshd.pids)},
                                }
                            run = scheduler_run(code, work, conns, clusters, args.parallelism, others)
                            print(
                                f"{run.code:>20} {run.mode} {run.seconds:6.1f}s {run.state} load {run.load:.1f} {run.extra.get('run_span', '')} {run.extra.get('cpu', '')} "
                                + " ".join(
                                    f"{k}={v['span']:.1f}/{v['sum']:.1f}"
                                    for k, v in sorted(run.stages.items())
                                ),
                                flush=True,
                            )
            built.deployed.close()
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
