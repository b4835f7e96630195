"""The daily audit at fleet scale (issue 35): the whole daily DAG on simulated clusters of 10k to 200k
partitions, under ``airflow dags test`` and under the production harness's scheduler, against the code
before (``--baseline``, default 8f9a414: main before issue 35) in the same run.

    python benchmarks/fleet_benchmark.py                                  # every size, both modes
    python benchmarks/fleet_benchmark.py --sizes 10000:12 --modes dags-test --repeat 3
    python benchmarks/fleet_benchmark.py --sizes 200000:50 --modes scheduler --skip-baseline
    python benchmarks/fleet_benchmark.py --sizes 200000:50 --modes scheduler,scheduler-replayed \
        --skip-baseline --hosts-dir /mnt/fleet   # a tmpfs mounted with nr_inodes=8000000

Per size (``partitions:brokers``; topics of 100 partitions, RF 3, Kafka 3.3.1, one log dir a broker,
20 records a partition) the benchmark builds the cluster itself -- the simulator's model, its
ZooKeeper tree in a real ZooKeeper and every broker's disk (``DeployedCluster``), timed -- and serves
the broker hosts with ``testing/sshd.py`` (a loopback address a broker, an sshd process per 16), then:

* **client / remote** (each run a fresh process, product and baseline alternating): the inventory of
  the broker with the most replica directories as the inventory task does it (SSH, parse, Arrow
  tables, Parquet) -- the process's own CPU seconds after its imports: the client side; and the
  broker-side script of each code walking that broker's disk locally (``python3``, as sshd runs it)
  -- its CPU seconds: the remote side;
* **dags test**: ``airflow dags test`` of the cluster's daily DAG (in-process audit; the shipped
  defaults otherwise) in a fresh Airflow home;
* **scheduler**: ``testing/airflow_production.py``'s deployment from this venv (PostgreSQL,
  api-server, scheduler, dag-processor, triggerer; LocalExecutor with ``--parallelism`` workers),
  the run triggered over REST without a logical date and timed by its own record (``queued_at``,
  when the trigger created it, to ``end_date``; also from the trigger call to the poll, each 1 s,
  that saw it end), with
  the CPU seconds every service's process tree spent meanwhile (a LocalExecutor worker's include the
  task processes it ran; sshd's the broker-side walks);
* **scheduler-replayed**: the same, with the brokers' side recorded once per code through the real
  SSH path and then replayed by ``_replay_broker.py`` (the test sshd's ``command=``): on a real
  deployment the walks run on the brokers' CPUs, here on the same two cores as Airflow; this mode
  charges this machine only the Airflow side (SSH, the stream, parsing, every task), and says
  whether the findings equal the real run's.

The baseline is the tree of ``--baseline`` (``git archive``; no worktree is left behind), first on
``PYTHONPATH`` of every process of its runs (the package imported from there is checked), its own
``dags/`` file as the DAGs folder; both byte-compiled first, as a wheel's install does. Stages come from the task instances' own start and end: a mapped
stage from its first start to its last end, with the sum of its tasks' durations. Printed: per size
and mode a table with the median and the spread (min-max) of ``--repeat`` runs, the 1-minute load
averages, the ratio to the baseline and to the figures issue 35 measured on 8f9a414
(``ISSUE_FIGURES``); the inventory's cost per replica directory and per broker (least squares over
the sizes); whether both codes wrote the same findings and inventory rows. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
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
RECORDS = 20
CLUSTER = "fleet"
SSH_CONN = "fleet_ssh"
ZK_CONN = "fleet_zk"
DAG_ID = f"kafka_zk_daily_hygiene_{CLUSTER}"
NEVER = "0 0 29 2 *"
"""A cron whose last fire time is before the DAG's start date: unpausing schedules no run."""
ISSUE_FIGURES: dict[int, dict[str, float]] = {
    # issue 35, `airflow dags test` on 8f9a414, in-process audit, 2 cores: seconds
    10_000: {"brokers": 12, "whole": 16.3, "snapshot": 0.2, "inventory": 7.0, "audit": 0.8, "build": 26.0},
    50_000: {"brokers": 24, "whole": 36.1, "snapshot": 0.9, "inventory": 24.5, "audit": 2.0, "build": 208.0},
    100_000: {"brokers": 50, "whole": 66.2, "snapshot": 2.0, "inventory": 50.5, "audit": 4.5, "build": 568.0},
}
STAGES = (
    "snapshot",
    "brokers",
    "inventory_groups",
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


def spread(values: list[float], digits: int = 1) -> str:
    """``median (min-max)``, or the one value."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# ------------------------------------------------------------------------------ the cluster
@dataclass
class Built:
    partitions: int
    brokers: int
    deployed: Any
    replicas: int
    znodes: int
    seconds: dict[str, float]
    load: float
    filesystem: str = "?"


def build_cluster(zookeeper: Any, partitions: int, brokers: int, root: Path) -> Built:
    """The simulated cluster in ZooKeeper and on disk (``DeployedCluster``), timed by part."""
    from airflow_provider_kafka_zk.testing.simulator import DeployedCluster
    from airflow_provider_kafka_zk.testing.simulator.cluster import SimulatedCluster
    from airflow_provider_kafka_zk.testing.simulator.spec import BrokerSpec, ClusterSpec, TopicSpec
    from airflow_provider_kafka_zk.testing.simulator.zk_writer import ZooKeeperTreeWriter

    seconds: dict[str, float] = {}
    before = load()
    started = time.monotonic()
    spec = ClusterSpec(
        name=CLUSTER,
        brokers=tuple(BrokerSpec(b, rack=f"r{b % 3 + 1}", host=broker_address(b)) for b in range(brokers)),
        topics=tuple(
            TopicSpec(
                f"topic-{i:05d}", partitions=PER_TOPIC, replication_factor=3, records_per_partition=RECORDS
            )
            for i in range(max(1, partitions // PER_TOPIC))
        ),
        min_insync_replicas=2,
        seed=35,
    )
    cluster = SimulatedCluster(spec)
    seconds["model"] = time.monotonic() - started
    started = time.monotonic()
    with _timed(ZooKeeperTreeWriter, "apply", seconds, "zookeeper"):
        deployed = DeployedCluster(cluster, zookeeper.connect_string, zookeeper.new_chroot("/fleet_"), root)
    seconds["zookeeper + disk"] = time.monotonic() - started
    seconds["disk"] = seconds["zookeeper + disk"] - seconds["zookeeper"]
    seconds["total"] = seconds["model"] + seconds["zookeeper + disk"]
    znodes = len(deployed.writer._persistent)
    return Built(
        partitions,
        brokers,
        deployed,
        len(cluster.dirs),
        znodes,
        seconds,
        max(before, load()),
        filesystem_type(root),
    )


@contextlib.contextmanager
def _timed(owner: type, method: str, seconds: dict[str, float], key: str) -> Any:
    """Add the time spent in ``owner.method`` meanwhile to ``seconds[key]`` (the build's ZooKeeper
    part, inside ``DeployedCluster``)."""
    original = getattr(owner, method)
    seconds.setdefault(key, 0.0)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[key] += time.monotonic() - started

    setattr(owner, method, timed)
    try:
        yield
    finally:
        setattr(owner, method, original)


FILES_PER_REPLICA = 6
"""A simulated replica directory: itself, its segment's .log/.index/.timeindex, partition.metadata and
leader-epoch-checkpoint (the inodes a build takes)."""
BYTES_PER_REPLICA = 24 << 10
"""What a replica directory takes on tmpfs, with room (measured 16 KiB: a page per non-empty file)."""


SHM = Path("/dev/shm")  # noqa: S108 - the builds go into a private mkdtemp under it


def hosts_root(work: Path, partitions: int, shm: Path = SHM) -> Path:
    """A new private directory on the shared-memory tmpfs when its free inodes and bytes hold the
    size's replica directories (RF 3) with a quarter to spare -- a build's time is the file system's
    create (this machine's ext4 went from 40 to 300 us a create after some millions of files) --
    else ``work``."""
    replicas = 3 * partitions
    try:
        free = os.statvfs(shm)
    except OSError:
        return work
    inodes, space = free.f_favail, free.f_bavail * free.f_frsize
    if inodes >= replicas * FILES_PER_REPLICA * 1.25 and space >= replicas * BYTES_PER_REPLICA * 1.25:
        return Path(tempfile.mkdtemp(prefix="fleet-hosts-", dir=shm))
    return work


def filesystem_type(path: Path) -> str:
    """The file system ``path`` is on (``df --output=fstype``), e.g. ext4 or tmpfs."""
    done = subprocess.run(["df", "--output=fstype", str(path)], capture_output=True, text=True, check=False)
    lines = done.stdout.split()
    return lines[-1] if done.returncode == 0 and len(lines) > 1 else "?"


# ------------------------------------------------------------------------------ the code under test
@dataclass
class Code:
    """The product (this checkout) or the baseline (an exported tree) as processes see it."""

    label: str
    root: Path
    pythonpath: str | None

    @property
    def dags_folder(self) -> Path:
        return self.root / "bench-dags"

    @property
    def package(self) -> Path:
        return (Path(self.pythonpath) if self.pythonpath else REPO) / "airflow_provider_kafka_zk"

    def compile_bytecode(self) -> None:
        """Byte-compile the package and the DAG file as installing a wheel does (pip compiles at
        install): a process run with PYTHONDONTWRITEBYTECODE (this shell's) would otherwise compile
        ~66 modules from source in every task process, ~0.2 s each, a cost no deployment pays."""
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", str(self.package), str(self.dags_folder)],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if k != "PYTHONPATH"}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env


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
                f'server_properties_path = "{server_properties(built)}"',
                f"broker_hosts = {{ {hosts} }}",
                "retries = 0",
                f'schedule = "{NEVER}"',
                "",
            ]
        )
    )
    return path


def server_properties(built: Built) -> str:
    return f"{built.deployed.root}/broker-{{broker_id}}/config/server.properties"


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


def conn_env(conns: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {f"AIRFLOW_CONN_{c.upper()}": json.dumps(f) for c, f in conns.items()}


# ------------------------------------------------------------------------------ client and remote side
CLIENT_SCRIPT = r"""
import json, os, sys, time
broker, props, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
import airflow_provider_kafka_zk, logging
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
from airflow_provider_kafka_zk.operators.inventory import inventory_tables, _parquet_bytes
logging.disable(logging.WARNING)
import pandas  # pyarrow loads it at its first conversion, in either code's task: on neither clock
hook = BrokerHostHook("%(ssh)s", "%(zk)s", broker_hosts={broker: "%(host)s"}, server_properties_path=props)
hook.resolve_connections()
started, cpu = time.monotonic(), time.process_time()
inventory = hook.inventory(broker)
partitions, log_dirs = inventory_tables(inventory, "fleet", "ts")
data = _parquet_bytes(partitions) + _parquet_bytes(log_dirs)
cpu, wall = time.process_time() - cpu, time.monotonic() - started
print(json.dumps({"cpu": cpu, "wall": wall, "dirs": len(inventory.partitions),
                  "remote_seconds": inventory.remote.get("seconds"), "package": airflow_provider_kafka_zk.__file__}))
"""


def client_run(code: Code, built: Built, broker: int, conns: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One fresh process inventorying ``broker`` as the task does; its CPU after its imports."""
    script = CLIENT_SCRIPT % {"ssh": SSH_CONN, "zk": ZK_CONN, "host": broker_address(broker)}
    return code_script(code, conns, script, [str(broker), server_properties(built), "-"], "client run")


def code_script(code: Code, conns: dict[str, dict[str, Any]], script: str, args: list[str], what: str) -> Any:
    """``script`` in a fresh process of ``code`` (its package checked) with the cluster's connections:
    the JSON of its last line."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=code.env({**os.environ, **conn_env(conns), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} of {code.label} failed: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["package"].startswith(str(code.package)), (code.label, result["package"])
    return result


def remote_run(code: Code, built: Built, broker: int) -> float:
    """The broker-side script of ``code`` walking ``broker``'s disk locally: its CPU seconds."""
    script = (code.package / "hooks" / "_broker_inventory_remote.py").read_bytes()
    host = built.deployed.hosts[broker]
    params = {
        "server_properties": str(host.server_properties),
        "main_classes": ["kafka.Kafka"],
        "override_keys": ["broker.id"],
        "log_dir_files": [
            "meta.properties",
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
        ],
        "partition_files": ["partition.metadata", "leader-epoch-checkpoint"],
        "partition_file_limit": 1 << 20,
        "log_dir_file_limit": 256 << 20,
    }
    answer = {"log_dirs": [str(d) for d in host.log_dirs]}
    stdin = (json.dumps(params) + "\n" + json.dumps(answer) + "\n").encode()
    before = os.times()
    subprocess.run(
        ["python3", "-c", script.decode()],
        input=stdin,
        stdout=subprocess.DEVNULL,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


RECORD_SCRIPT = r"""
import json, sys
import airflow_provider_kafka_zk, logging
from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
logging.disable(logging.WARNING)
hosts = json.loads(sys.argv[2])
hook = BrokerHostHook("%(ssh)s", "%(zk)s", broker_hosts={int(b): h for b, h in hosts.items()}, server_properties_path=sys.argv[1])
hook.resolve_connections()
for broker in sorted(int(b) for b in hosts):
    hook.inventory(broker)
print(json.dumps({"package": airflow_provider_kafka_zk.__file__}))
"""
REPLAYER = Path(__file__).resolve().parent / "_replay_broker.py"


@contextlib.contextmanager
def broker_sessions(sshd: Any, mode: str, folder: Path) -> Any:
    """Every session of the test sshd runs ``_replay_broker.py <mode> <folder>`` (the authorized key's
    ``command=``; sshd reads the file at each login), the key as it was afterwards."""
    keys = sshd.authorized_keys_path
    original = keys.read_text()
    command = f"python3 {REPLAYER} {mode} {folder}"
    keys.write_text(
        "".join(f'command="{command}" {line}\n' for line in original.splitlines() if line.strip())
    )
    try:
        yield
    finally:
        keys.write_text(original)


def record_brokers(
    code: Code, built: Built, sshd: Any, conns: dict[str, dict[str, Any]], folder: Path
) -> float:
    """Each broker's inventory stream as ``code``'s script writes it, through the real SSH path, into
    ``folder`` (one file per broker address): what ``scheduler-replayed`` answers with. Seconds taken."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    hosts = {b: broker_address(b) for b in sorted(built.deployed.cluster.brokers)}
    with broker_sessions(sshd, "record", folder):
        code_script(
            code,
            conns,
            RECORD_SCRIPT % {"ssh": SSH_CONN, "zk": ZK_CONN},
            [server_properties(built), json.dumps(hosts)],
            "recording the brokers",
        )
    missing = [h for h in hosts.values() if not (folder / f"{h}.jsonl").is_file()]
    if missing:
        raise RuntimeError(f"no recording of {missing}")
    return time.monotonic() - started


# ------------------------------------------------------------------------------ one DAG run
@dataclass
class Run:
    mode: str
    code: str
    seconds: float
    stages: dict[str, dict[str, float]]
    load: float
    state: str
    cpu: dict[str, float] = field(default_factory=dict)
    findings: bytes | None = None
    inventory: dict[int, Any] = field(default_factory=dict)
    recorded: float | None = None
    """Scheduler modes: the run's own record, ``queued_at`` (the trigger created it) to ``end_date``
    (the scheduler ended it), without the benchmark's 1 s polling and REST round trips."""


def _stages(
    rows: list[tuple[str, int, float | None, float | None, float | None]],
) -> dict[str, dict[str, float]]:
    """task id -> span (first start to last end), summed durations and task count."""
    by: dict[str, list[tuple[float, float, float]]] = {}
    for task_id, _map_index, start, end, duration in rows:
        if start is None or end is None:
            continue
        by.setdefault(task_id, []).append((start, end, duration if duration is not None else end - start))
    return {
        task_id: {
            "span": max(e for _, e, _ in items) - min(s for s, _, _ in items),
            "sum": sum(d for _, _, d in items),
            "tasks": len(items),
        }
        for task_id, items in by.items()
    }


def print_timeline(tis: list[dict[str, Any]], run_start: float | None) -> None:
    """Each task instance's start and end, seconds from the run's start (where the critical path's
    gaps are: scheduling between tasks, task start-up)."""
    rows = sorted(
        (_ts(t["start_date"]), _ts(t["end_date"]), t["task_id"], t["map_index"])
        for t in tis
        if t.get("start_date") and t.get("end_date")
    )
    if not rows:
        return
    zero = run_start if run_start is not None else rows[0][0]
    print("  timeline (s from the run's start):", flush=True)
    for start, end, task_id, map_index in rows:
        label = task_id if map_index in (None, -1) else f"{task_id}[{map_index}]"
        print(f"    {start - zero:6.1f} -> {end - zero:6.1f}  {label}", flush=True)


def _ts(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _outputs(base: Path) -> tuple[bytes | None, dict[int, Any]]:
    """The newest run's findings.parquet bytes and inventory rows per broker (without inventory_ts)."""
    import pyarrow.parquet as pq

    findings_root = base / CLUSTER / "findings"
    inventory_root = base / CLUSTER / "inventory"
    findings = None
    if findings_root.exists() and any(findings_root.iterdir()):
        newest = max(findings_root.iterdir(), key=lambda p: p.stat().st_mtime)
        if (newest / "findings.parquet").exists():
            findings = (newest / "findings.parquet").read_bytes()
    rows: dict[int, Any] = {}
    if inventory_root.exists() and any(inventory_root.iterdir()):
        newest = max(inventory_root.iterdir(), key=lambda p: p.stat().st_mtime)
        for broker_dir in newest.glob("broker=*"):
            table = pq.read_table(broker_dir / "part-0.parquet")
            rows[int(broker_dir.name.split("=")[1])] = table.drop_columns(
                ["inventory_ts"]
            ).replace_schema_metadata(None)
    return findings, rows


def dags_test(code: Code, work: Path, conns: dict[str, dict[str, Any]], clusters: Path, base: Path) -> Run:
    """One ``airflow dags test`` of the daily DAG in a fresh Airflow home; stages from its SQLite DB."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA_ZK_"))}
    env.update(
        {
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(code.dags_folder),
            "KAFKA_ZK_CLUSTERS_FILE": str(clusters),
            **conn_env(conns),
        }
    )
    env = code.env(env)
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    before = load()
    started = time.monotonic()
    done = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        rows = db.execute(
            "select task_id, map_index, start_date, end_date, duration from task_instance"
        ).fetchall()
    stages = _stages([(t, m, _ts(s), _ts(e), d) for t, m, s, e, d in rows])
    state = "success" if done.returncode == 0 else f"failed ({done.returncode})"
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    findings, inventory = _outputs(base)
    return Run("dags test", code.label, seconds, stages, max(before, load()), state, {}, findings, inventory)


def tree_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds of each named process and everything below it: live processes' own time plus what
    they reaped of their children's (a LocalExecutor worker reaps the task processes it ran)."""
    import psutil

    out: dict[str, float] = {}
    for name, pid in pids.items():
        total = 0.0
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = process.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
        out[name] = total
    return out


def scheduler_run(
    code: Code,
    work: Path,
    conns: dict[str, dict[str, Any]],
    clusters: Path,
    base: Path,
    parallelism: int,
    others: dict[str, int],
    mode: str = "scheduler",
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
            time.sleep(5)  # the unpause's scheduling loop settles
            pids = {name: service.process.pid for name, service in airflow.services.items()}
            pids.update(others)
            pids["postgres"] = postgres.pid or 0
            cpu_before = tree_cpu(pids)
            before = load()
            started = time.monotonic()
            run_id = airflow.trigger_rest(DAG_ID, {})
            try:
                airflow.wait_for_run(DAG_ID, run_id, timeout=3600)
            except AirflowRunFailed as failed:
                print(str(failed)[-5000:], file=sys.stderr)
            seconds = time.monotonic() - started
            cpu = {k: v - cpu_before.get(k, 0.0) for k, v in tree_cpu(pids).items()}
            run = airflow.run(DAG_ID, run_id)
            tis = airflow.task_instances(DAG_ID, run_id)
            after = load()
    stages = _stages(
        [
            (t["task_id"], t["map_index"], _ts(t["start_date"]), _ts(t["end_date"]), t.get("duration"))
            for t in tis
        ]
    )
    print_timeline(tis, _ts(run.get("start_date")) or _ts(run.get("queued_at")))
    shutil.rmtree(deployment, ignore_errors=True)
    findings, inventory = _outputs(base)
    queued, ended = _ts(run.get("queued_at")), _ts(run.get("end_date"))
    recorded = ended - queued if queued is not None and ended is not None else None
    return Run(
        mode,
        code.label,
        seconds,
        stages,
        max(before, after),
        run["state"],
        cpu,
        findings,
        inventory,
        recorded,
    )


# ------------------------------------------------------------------------------ the report
def _stage_values(runs: list[Run], stage: str, key: str = "span") -> list[float]:
    return [r.stages[stage][key] for r in runs if stage in r.stages]


def report_size(
    built: Built, runs: dict[tuple[str, str], list[Run]], side: dict[str, dict[str, list]]
) -> list[str]:
    """The size's tables: client/remote side, then one table per mode (codes as columns)."""
    lines = [
        "",
        f"## {built.partitions:,} partitions / {built.brokers} brokers: {built.replicas:,} replica directories, "
        f"{built.znodes:,} znodes",
        f"cluster built in {built.seconds['total']:.1f} s ({built.seconds['model']:.1f} s model, "
        f"{built.seconds['zookeeper + disk']:.1f} s ZooKeeper + disk; ZooKeeper {built.seconds['zookeeper']:.1f} s, "
        f"the disk {built.seconds['disk']:.1f} s on {built.filesystem}; "
        f"{built.seconds['total'] / built.replicas * 1e3:.2f} ms per replica directory; load {built.load:.1f})",
    ]
    issue = ISSUE_FIGURES.get(built.partitions)
    if issue and issue["brokers"] == built.brokers:
        lines[-1] += (
            f"; issue 35 on 8f9a414: {issue['build']:.0f} s ({issue['build'] / built.seconds['total']:.1f}x)"
        )
    if side:
        lines += [
            "",
            "| side (broker with the most replica directories) | " + " | ".join(side) + " | ratio |",
            "|---|" + "---:|" * (len(side) + 1),
        ]
        labels = list(side)
        for key, title in (
            ("client_cpu", "client CPU s"),
            ("client_us", "client CPU us per directory"),
            ("remote_cpu", "remote CPU s (broker-side script)"),
            ("client_wall", "inventory call wall s"),
        ):
            values = [side[c].get(key, []) for c in labels]
            cells = [spread(v, 3 if key != "client_us" else 1) for v in values]
            ratio = "-"
            if len(labels) == 2 and values[0] and values[1]:
                ratio = f"{median(values[1]) / median(values[0]):.2f}x"
            lines.append(f"| {title} | " + " | ".join(cells) + f" | {ratio} |")
    for mode in ("dags test", "scheduler", "scheduler, brokers replayed"):
        codes = [c for (m, c) in runs if m == mode]
        if not codes:
            continue
        lines += [
            "",
            f"### {mode}",
            "",
            "| stage (s) | " + " | ".join(codes) + " | ratio | issue 35 (8f9a414) |",
            "|---|" + "---:|" * (len(codes) + 2),
        ]
        per_code = {c: runs[(mode, c)] for c in codes}

        def row(
            title: str,
            values: dict[str, list[float]],
            issue_key: str | None = None,
            *,
            codes: list[str] = codes,
            mode: str = mode,
            out: list[str] = lines,
        ) -> None:
            out.append(_row(title, values, codes, issue_key if mode == "dags test" else None, issue, built))

        if mode.startswith("scheduler"):
            row(
                "**whole run** (run record: queued -> end)",
                {c: [r.recorded for r in per_code[c] if r.recorded is not None] for c in codes},
            )
            row(
                "whole run, polled (trigger call -> the poll that saw the end)",
                {c: [r.seconds for r in per_code[c]] for c in codes},
            )
        else:
            row("**whole run**", {c: [r.seconds for r in per_code[c]] for c in codes}, "whole")
        for stage in STAGES:
            if any(stage in r.stages for c in codes for r in per_code[c]):
                key = stage if stage in ("snapshot", "inventory", "audit") else None
                row(stage, {c: _stage_values(per_code[c], stage) for c in codes}, key)
                if stage == "inventory":
                    row(
                        "inventory, sum of task durations",
                        {c: _stage_values(per_code[c], stage, "sum") for c in codes},
                    )
        if mode.startswith("scheduler"):
            services = sorted({k for c in codes for r in per_code[c] for k in r.cpu})
            for service in services:
                row(f"CPU s: {service}", {c: [r.cpu.get(service, 0.0) for r in per_code[c]] for c in codes})
            row("CPU s: all", {c: [sum(r.cpu.values()) for r in per_code[c]] for c in codes})
        lines.append(
            "| 1-min load at the runs | "
            + " | ".join(", ".join(f"{r.load:.1f}" for r in per_code[c]) for c in codes)
            + " | | |"
        )
        lines.append(
            "| state | " + " | ".join(", ".join(r.state for r in per_code[c]) for c in codes) + " | | |"
        )
        if len(codes) == 2:
            same_findings = all(
                a.findings is not None and a.findings == b.findings
                for a in per_code[codes[0]]
                for b in per_code[codes[1]]
            )
            same_rows = all(
                set(a.inventory) == set(b.inventory)
                and all(a.inventory[k].equals(b.inventory[k]) for k in a.inventory)
                for a in per_code[codes[0]]
                for b in per_code[codes[1]]
            )
            lines.append(f"\nsame findings.parquet: {same_findings}; same inventory rows: {same_rows}")
    for (mode, code), replayed in runs.items():
        real = runs.get(("scheduler", code))
        if mode == "scheduler, brokers replayed" and real:
            same = all(a.findings is not None and a.findings == b.findings for a in replayed for b in real)
            lines.append(
                f"\n{code}: brokers replayed wrote the same findings.parquet as the real run: {same}"
            )
    return lines


def _row(
    title: str,
    values: dict[str, list[float]],
    codes: list[str],
    issue_key: str | None,
    issue: dict[str, float] | None,
    built: Built,
) -> str:
    """One table row: each code's median (spread), baseline / product, and issue 35's figure."""
    cells = [spread(values[c]) for c in codes]
    ratio = "-"
    if len(codes) == 2 and values[codes[0]] and values[codes[1]]:
        ratio = f"{median(values[codes[1]]) / max(median(values[codes[0]]), 1e-9):.2f}x"
    figure = "-"
    if issue and issue_key and issue["brokers"] == built.brokers:
        product = median(values[codes[0]])
        figure = f"{issue[issue_key]:.1f}" + (f" ({issue[issue_key] / product:.2f}x)" if product else "")
    return f"| {title} | " + " | ".join(cells) + f" | {ratio} | {figure} |"


def fit(points: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """Least squares ``y = a * brokers + b * replicas`` over ``(brokers, replicas, y)``."""
    if len({(p[0], p[1]) for p in points}) < 2:
        return None
    sxx = sum(p[0] * p[0] for p in points)
    sxy = sum(p[0] * p[1] for p in points)
    syy = sum(p[1] * p[1] for p in points)
    sxz = sum(p[0] * p[2] for p in points)
    syz = sum(p[1] * p[2] for p in points)
    det = sxx * syy - sxy * sxy
    if abs(det) < 1e-12:
        return None
    return (sxz * syy - syz * sxy) / det, (sxx * syz - sxy * sxz) / det


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000:12,50000:24,100000:50,200000:50", help="partitions:brokers,..."
    )
    parser.add_argument(
        "--modes",
        default="side,dags-test,scheduler",
        help="side, dags-test, scheduler, scheduler-replayed (the brokers' walks recorded once through"
        " SSH, then replayed: the Airflow machine's share alone; _replay_broker.py), or build: the clusters only",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each code in each mode")
    parser.add_argument("--side-repeat", type=int, default=3, help="client/remote runs of each code")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--parallelism", type=int, default=8, help="LocalExecutor's workers (scheduler mode)")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new directory in /var/tmp")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--hosts-dir",
        type=Path,
        default=None,
        help="where the broker hosts' disks are built (a file system's cost to create files is most of"
        " the build); default: /dev/shm when it has room for the size (hosts_root), else the work directory",
    )
    args = parser.parse_args(argv)

    from airflow_provider_kafka_zk.testing.sshd import SshServer
    from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

    work = args.workdir or Path(tempfile.mkdtemp(prefix="fleet-bench-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    codes = [product_code(work)]
    if not args.skip_baseline:
        codes.append(baseline_code(work, args.baseline))
    for code in codes:
        code.compile_bytecode()
    modes = args.modes.split(",")
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
    report: list[str] = [
        f"# fleet benchmark, {time.strftime('%Y-%m-%d %H:%M')}, codes: {[c.label for c in codes]}"
    ]
    points: dict[str, list[tuple[float, float, float]]] = {c.label: [] for c in codes}
    with ZooKeeperServer(work / "zookeeper") as zookeeper:
        for partitions, brokers in sizes:
            hosts = args.hosts_dir or hosts_root(work, partitions)
            root = hosts / f"hosts-{partitions}"
            built = build_cluster(zookeeper, partitions, brokers, root)
            print(
                f"built {partitions}/{brokers}: {built.replicas} replica dirs, {built.znodes} znodes, "
                f"{built.seconds['total']:.1f} s (ZooKeeper {built.seconds['zookeeper']:.1f} s, disk "
                f"{built.seconds['disk']:.1f} s on {built.filesystem}; load {built.load:.1f})",
                flush=True,
            )
            runs: dict[tuple[str, str], list[Run]] = {}
            side: dict[str, dict[str, list]] = {}
            try:
                with SshServer(
                    [broker_address(b) for b in range(brokers)], work_dir=work / f"sshd-{partitions}"
                ) as sshd:
                    base = work / f"artefacts-{partitions}"
                    clusters = cluster_file(work / f"clusters-{partitions}.toml", built, base)
                    conns = connections(built, sshd)
                    biggest = max(
                        built.deployed.hosts,
                        key=lambda b: len(built.deployed.cluster.replica_dirs(broker_id=b)),
                    )
                    if "side" in modes:
                        for _ in range(args.side_repeat):
                            for code in codes:
                                result = client_run(code, built, biggest, conns)
                                cell = side.setdefault(code.label, {})
                                cell.setdefault("client_cpu", []).append(result["cpu"])
                                cell.setdefault("client_wall", []).append(result["wall"])
                                cell.setdefault("client_us", []).append(result["cpu"] / result["dirs"] * 1e6)
                                cell.setdefault("remote_cpu", []).append(remote_run(code, built, biggest))
                        print(
                            f"side: { {c: {k: spread(v, 3) for k, v in d.items()} for c, d in side.items()} }",
                            flush=True,
                        )
                    for _ in range(args.repeat):
                        for mode in [
                            m for m in modes if m in ("dags-test", "scheduler", "scheduler-replayed")
                        ]:
                            for code in codes:
                                others = {
                                    "zookeeper": zookeeper.pid or 0,
                                    **{f"sshd{i}": p for i, p in enumerate(sshd.pids)},
                                }
                                if mode == "dags-test":
                                    run = dags_test(code, work, conns, clusters, base)
                                    if "inventory" in run.stages:
                                        points[code.label].append(
                                            (brokers, built.replicas, run.stages["inventory"]["sum"])
                                        )
                                elif mode == "scheduler":
                                    run = scheduler_run(
                                        code, work, conns, clusters, base, args.parallelism, others
                                    )
                                else:
                                    folder = work / f"recorded-{partitions}" / code.label.replace(" ", "-")
                                    if not folder.is_dir():
                                        took = record_brokers(code, built, sshd, conns, folder)
                                        print(
                                            f"recorded {brokers} brokers' streams ({code.label}) in {took:.1f} s",
                                            flush=True,
                                        )
                                    with broker_sessions(sshd, "replay", folder):
                                        run = scheduler_run(
                                            code,
                                            work,
                                            conns,
                                            clusters,
                                            base,
                                            args.parallelism,
                                            others,
                                            mode="scheduler, brokers replayed",
                                        )
                                runs.setdefault((run.mode, run.code), []).append(run)
                                print(
                                    f"{run.code:>20} {run.mode:9} {run.seconds:6.1f} s"
                                    + (
                                        f" (run record {run.recorded:.1f} s)"
                                        if run.recorded is not None
                                        else ""
                                    )
                                    + f" {run.state} load {run.load:.1f}: "
                                    + " ".join(f"{k}={v['span']:.1f}" for k, v in sorted(run.stages.items()))
                                    + (
                                        f" cpu={ {k: round(v, 1) for k, v in run.cpu.items()} }"
                                        if run.cpu
                                        else ""
                                    ),
                                    flush=True,
                                )
            finally:
                built.deployed.close()
                if not args.keep:
                    shutil.rmtree(root if hosts in (args.hosts_dir, work) else hosts, ignore_errors=True)
            report += report_size(built, runs, side)
            print("\n".join(report_size(built, runs, side)), flush=True)
    report += [
        "",
        "## inventory cost (dags test, sum of the inventory tasks' durations; least squares over the sizes)",
    ]
    fits = {label: fit(p) for label, p in points.items()}
    for label, result in fits.items():
        if result:
            report.append(
                f"- {label}: {result[0]:.3f} s per broker + {result[1] * 1e3:.4f} ms per replica directory"
            )
    if len(fits) == 2 and all(fits.values()):
        (pa_, pb), (ba, bb) = fits.values()  # type: ignore[misc]
        report.append(
            f"- ratio baseline / product: per replica directory {bb / pb:.2f}x, per broker {ba / max(pa_, 1e-9):.2f}x"
        )
    report.append("- issue 35 measured on 8f9a414: 0.29 s per broker + 0.117 ms per replica directory")
    print("\n".join(report))
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
