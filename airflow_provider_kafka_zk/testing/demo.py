"""The built-in demo cluster: real ZooKeeper and sshd on loopback, the simulated incident cluster in
them, and a report of what a Kafka tool reading ZooKeeper and the broker disks now finds.

    python -m airflow_provider_kafka_zk.testing.demo [--workdir .demo] [--kafka-version 3.3.1] [--keep-running]
        [--run-dag [--repair]] [--maintenance]

``--run-dag`` then runs the daily hygiene DAG (``airflow dags test kafka_zk_daily_hygiene``: snapshot,
inventory over SSH, the audit on Spark, the gate) against the live services, in an Airflow home under
the workdir, and prints the findings summary. The gate fails on this cluster, as it should. Then
the topicId repair DAG plans the fix of the two KAFKA-14190 topics it found, as a dry run;
``--repair`` carries it out (the simulated controller and brokers react in a thread) and prints the
repair's verification (the same audit rules, on a fresh snapshot and inventory).

Every real run (``--repair``, the drain and move-back of ``--maintenance``) stops in its ``approve``
task until a person approves the plan it shows (issue 25). ``airflow dags test`` keeps such a run
alive until an answer arrives from outside (Airflow 3.3.2), so the demo starts ``airflow api-server``
on the same Airflow home and metadata database (loopback, a generated admin password), prints the plan
and its hash as the approval page shows them, and approves it over the REST API as a person would
(``PATCH .../taskInstances/approve/-1/hitlDetails``), then prints the decision.

``--keep-running`` then adds a drainable cluster (``demo_maintenance``: healthy, RF=1 topics, its
simulated controller carrying out reassignments in a thread), prints the commands that point one's
own ``airflow`` at both and try the drain (with the api-server a real drain's approval goes to, and
the REST calls that approve it), and waits; Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.versions import MATRIX_RELEASES, matrix_release

from .simulator import DeployedCluster, incident_cluster
from .simulator.readback import BrokerOnDisk, ZnodeReading, read_broker, read_zookeeper
from .simulator.scenarios import maintenance_cluster
from .sshd import SshServer
from .zookeeper import ZooKeeperServer

if TYPE_CHECKING:
    from .airflow_production import LocalApiServer

CHROOT = "/kafka_demo"
DAG_ID = "kafka_zk_daily_hygiene_demo"
REPO_DAGS = Path(__file__).resolve().parents[2] / "dags"
"""The checkout's DAG files; from an installed wheel the demo writes one DAG file of its own."""
DEMO_BROKER_HOSTS = {str(b): f"127.0.0.{2 + b}" for b in range(6)}
"""The demo's broker hosts: one loopback address per broker (sshd listens on each)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, default=Path(".demo"), help="where broker host roots go")
    parser.add_argument(
        "--kafka-version",
        default="3.3.1",
        type=_release,
        help="simulated ZooKeeper-mode release: a line of the version matrix ("
        + ", ".join(MATRIX_RELEASES)
        + ") or a full release such as 2.8.2",
    )
    parser.add_argument("--keep-running", action="store_true", help="keep the services up until Ctrl-C")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="with --run-dag: after the dry run, carry the topicId repair out and show its verification",
    )
    parser.add_argument(
        "--maintenance",
        action="store_true",
        help="instead of the incident cluster: a healthy one with RF=1 topics, drained, restarted and put back "
        "by kafka_zk_post_maintenance",
    )
    parser.add_argument(
        "--run-dag",
        action="store_true",
        help=f"run the {DAG_ID} DAG on the demo cluster and print its findings",
    )
    parser.add_argument(
        "--dags-folder",
        type=Path,
        default=None,
        help="DAGs folder (default: the checkout's dags/, else a DAG file the demo writes)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    workdir = args.workdir.resolve()
    args.dags_folder = args.dags_folder or default_dags_folder(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    cluster = (maintenance_cluster if args.maintenance else incident_cluster)(
        kafka_version=args.kafka_version
    )
    addresses = tuple(b.spec.host for b in cluster.brokers.values())
    started = time.monotonic()
    with (
        ZooKeeperServer(workdir / "zookeeper") as zookeeper,
        SshServer(addresses, work_dir=workdir / "sshd") as sshd,
    ):
        print(
            f"ZooKeeper {zookeeper.connect_string} (pid {zookeeper.pid}); "
            f"sshd on {', '.join(addresses)} port {sshd.port} (pid {sshd.pid})"
        )
        with DeployedCluster(cluster, zookeeper.connect_string, CHROOT, workdir / "hosts") as deployed:
            client = KazooClient(hosts=deployed.zookeeper_connect)
            client.start()
            try:
                tree = read_zookeeper(client)
            finally:
                client.stop()
                client.close()
            disks = {b: read_broker(b, h.server_properties) for b, h in deployed.hosts.items()}
            print(report(deployed, tree, disks, time.monotonic() - started))
            status = 0
            if args.maintenance:
                status = run_maintenance(workdir, zookeeper, sshd, addresses, args.dags_folder, deployed)
            elif args.run_dag:
                status = run_dag(workdir, zookeeper, sshd, addresses, args.dags_folder)
                if status == 0:
                    status = run_restart_check(workdir, zookeeper, sshd, addresses, args.dags_folder)
                if status == 0 and not cluster.uses_topic_ids:
                    print(
                        f"\nNo topicId repair: IBP {cluster.spec.ibp} has no topic ids (KAFKA-14190 needs 2.8+)"
                    )
                elif status == 0:
                    status = run_repair(workdir, zookeeper, sshd, addresses, args.dags_folder)
                if status == 0 and args.repair and cluster.uses_topic_ids:
                    status = run_repair(
                        workdir, zookeeper, sshd, addresses, args.dags_folder, deployed=deployed
                    )
            if args.keep_running:
                keep_running(workdir, zookeeper, sshd, addresses, args.dags_folder, args.kafka_version)
    return status


def _release(text: str) -> str:
    """``--kafka-version``: a matrix line (``2.3`` -> ``2.3.1``) or a full 0.11-3.9 release."""
    try:
        return matrix_release(text)
    except KafkaFormatError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DRAIN_CLUSTER = "demo_maintenance"
"""The cluster --keep-running adds for trying the drain: the incident cluster refuses every drain (its
planted reassignment is in flight, as it should), this healthy one with RF=1 topics does not."""
DRAIN_CHROOT = "/kafka_demo_maintenance"


def keep_running(
    workdir: Path,
    zookeeper: ZooKeeperServer,
    sshd: SshServer,
    addresses: tuple[str, ...],
    dags_folder: Path,
    kafka_version: str,
) -> None:
    """Deploy the drainable cluster beside the demo's, its simulated controller and brokers reacting in
    a thread (reassignments carried out), print how to use both from another shell and how to stop
    everything, then wait for Ctrl-C or SIGTERM (both stop the brokers, sshd and ZooKeeper)."""
    from .simulator.runtime import ClusterRuntime

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    with (
        contextlib.ExitStack() as stack,
        DeployedCluster(
            maintenance_cluster(name=DRAIN_CLUSTER, kafka_version=kafka_version),
            zookeeper.connect_string,
            DRAIN_CHROOT,
            workdir / "maintenance-hosts",
        ) as drainable,
        ClusterRuntime(drainable, restart_dir=workdir / "maintenance-restarts", reassignments=True),
    ):
        env = dag_environment(workdir, zookeeper, sshd, addresses, dags_folder, drain_cluster=True)
        api = stack.enter_context(approval_server(env, workdir))
        rf1 = sorted(
            f"{t}-{p}"
            for t, topic in drainable.cluster.topics.items()
            for p, partition in topic.partitions.items()
            if partition.replicas == [MAINTENANCE_BROKER]
        )
        print(
            f"\nCluster '{DRAIN_CLUSTER}' (healthy; RF=1 on broker {MAINTENANCE_BROKER}: {', '.join(rf1)}) "
            f"in ZooKeeper {drainable.zookeeper_connect}; its simulated controller carries out reassignments"
        )
        print("\n" + try_it_yourself(env, drain_cluster=DRAIN_CLUSTER, api=api), flush=True)
        print(
            f"\nServices and broker sessions stay up. To stop everything: Ctrl-C here, or kill {os.getpid()}"
            f"  (the demo; it stops the simulated brokers, the api-server pid {api.pid}, sshd pid {sshd.pid} and "
            f"ZooKeeper pid {zookeeper.pid}; were it killed with -9: kill {api.pid} {sshd.pid} {zookeeper.pid})",
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def try_it_yourself(
    env: Mapping[str, str], *, drain_cluster: str | None = None, api: LocalApiServer | None = None
) -> str:
    """The shell lines that point one's own ``airflow`` at the running demo: its home, cluster file and
    artefacts, and its connections as ``airflow connections add`` commands (stored in the metadata
    DB, the way users keep them).

    :param drain_cluster: a cluster the drain can be tried on (its real-run commands are printed).
    :param api: the api-server a real run's approval is answered at (its UI and the REST calls).
    """
    lines = ["To use the running demo from another shell:"]
    for name in (
        "AIRFLOW_HOME",
        "AIRFLOW__CORE__DAGS_FOLDER",
        "KAFKA_ZK_CLUSTERS_FILE",
        "KAFKA_ZK_ARTEFACTS_BASE",
    ):
        lines.append(f"export {name}={shlex.quote(env[name])}")
    lines.append("export PYSPARK_PYTHON=" + shlex.quote(env["PYSPARK_PYTHON"]) + " SPARK_LOCAL_IP=127.0.0.1")
    lines.append("airflow db migrate")
    for key in sorted(k for k in env if k.startswith("AIRFLOW_CONN_")):
        conn_id = key.removeprefix("AIRFLOW_CONN_").lower()
        lines.append(f"airflow connections add {conn_id} --conn-json {shlex.quote(env[key])}")
    lines.append(f"airflow dags test {DAG_ID}")
    lines.append(
        "airflow dags test kafka_zk_pre_maintenance_drain -c "
        + shlex.quote(json.dumps({"cluster": "demo", "brokers": [1], "dry_run": True}))
        + "  # the incident cluster refuses: the reassignment the demo planted is in flight"
    )
    if drain_cluster is not None:
        conf = {"cluster": drain_cluster, "brokers": [MAINTENANCE_BROKER], "dry_run": True}
        lines.append(
            f"# the drain of broker {MAINTENANCE_BROKER} on '{drain_cluster}': the plan only, then for real"
        )
        lines.append("airflow dags test kafka_zk_pre_maintenance_drain -c " + shlex.quote(json.dumps(conf)))
        conf = {**conf, "dry_run": False, "poll_interval_s": 0.5}
        lines.append("airflow dags test kafka_zk_pre_maintenance_drain -c " + shlex.quote(json.dumps(conf)))
        lines.append(
            "# or, with a scheduler running (airflow standalone): airflow dags trigger "
            "kafka_zk_pre_maintenance_drain -c " + shlex.quote(json.dumps(conf))
        )
        if api is not None:
            lines += approval_lines(api)
        lines.append(
            f"# artefacts: {env['KAFKA_ZK_ARTEFACTS_BASE']}/{drain_cluster}/drain/<ts>/ (plan.json, report.txt)"
        )
    return "\n".join(lines)


def approval_lines(api: LocalApiServer) -> list[str]:
    """How a person answers a real run's approval at the demo's api-server: its UI, then over REST."""
    base, password = api.base_url, api.passwords["admin"]
    credentials = json.dumps({"username": "admin", "password": password})
    path = "/api/v2/dags/kafka_zk_pre_maintenance_drain/dagRuns"
    answer = json.dumps({"chosen_options": ["Approve"], "params_input": {"comment": "reviewed"}})
    return [
        f"# the real run stops in its approve task until you approve the plan it shows: in the UI at {base} "
        f"(user admin, password {password}; the run's Required Actions), or over REST:",
        f"TOKEN=$(curl -s -X POST {base}/auth/token -H 'Content-Type: application/json' -d "
        f"{shlex.quote(credentials)} | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')",
        f"curl -s {shlex.quote(base + path + '/~/hitlDetails?response_received=false')} "
        '-H "Authorization: Bearer $TOKEN"   # the plan, its sha256, the run id',
        f'curl -s -X PATCH "{base}{path}/<run id>/taskInstances/approve/-1/hitlDetails" '
        f"-H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d {shlex.quote(answer)}",
    ]


@contextlib.contextmanager
def approval_server(env: Mapping[str, str], workdir: Path) -> Iterator[LocalApiServer]:
    """``airflow api-server`` on the demo's Airflow home (its metadata database migrated first)."""
    from .airflow_production import LocalApiServer

    airflow = str(Path(sys.executable).parent / "airflow")
    with (workdir / "api-server-migrate.log").open("w") as log_file:
        subprocess.run(
            [airflow, "db", "migrate"], env=dict(env), stdout=log_file, stderr=subprocess.STDOUT, check=True
        )
    with LocalApiServer(env) as api:
        yield api


def _plain(markdown: str) -> str:
    """The approval body as a terminal shows it (the UI renders the Markdown)."""
    return "\n".join(
        line.replace("**", "").replace("### ", "").replace("`", "") for line in markdown.splitlines()
    )


def dags_test_with_approval(
    command: list[str],
    env: Mapping[str, str],
    log_file: Any,
    api: LocalApiServer,
    dag_id: str,
    *,
    comment: str,
    timeout: float = 1800,
) -> int:
    """``airflow dags test`` of a real run: wait until it asks for approval, print what it shows, approve
    it over REST as a person would, print the decision, and wait for the run; its exit code."""
    process = subprocess.Popen(command, env=dict(env), stdout=log_file, stderr=subprocess.STDOUT)
    try:
        try:
            request = api.wait_for_approval_request(
                dag_id, timeout=timeout, alive=lambda: process.poll() is None
            )
        except AssertionError as exc:  # the run ended (failed) before asking
            print(f"  {exc}", file=sys.stderr)
            return process.wait()
        ti = request["task_instance"]
        print(f"\n  {dag_id} waits in its {ti['task_id']} task for a person. The approval page shows:")
        print("    " + _plain(request["body"]).rstrip().replace("\n", "\n    "), flush=True)
        answer = api.respond(dag_id, ti["dag_run_id"], ti["task_id"], "Approve", comment)
        print(
            f"  Approved over REST (PATCH {api.base_url}/api/v2/dags/{dag_id}/dagRuns/<run>/taskInstances/"
            f"{ti['task_id']}/-1/hitlDetails) by {answer['responded_by']['name']} at {answer['responded_at']}"
            f" ({comment}); the run carries out exactly the plan with that sha256",
            flush=True,
        )
        return process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def default_dags_folder(workdir: Path) -> Path:
    """The checkout's ``dags/`` when there is one, else a folder with one file calling every factory."""
    if (REPO_DAGS / "kafka_zk_daily_hygiene.py").is_file():
        return REPO_DAGS
    folder = workdir / "dags"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kafka_zk_dags.py").write_text(
        '"""Every DAG of airflow-provider-kafka-zk (written by the demo)."""\n\n'
        "from airflow_provider_kafka_zk.dags import create_all_dags\n\n"
        "globals().update(create_all_dags())\n"
    )
    return folder


def write_demo_clusters_file(workdir: Path, *, drain_cluster: bool = False) -> Path:
    """The cluster file naming the demo cluster (nothing is scheduled for a cluster no file names).

    :param drain_cluster: also name ``DRAIN_CLUSTER`` (its hosts under ``maintenance-hosts``; same sshd).
    """
    clusters = workdir / "kafka_zk_clusters.toml"
    hosts = ", ".join(f'"{b}" = "{h}"' for b, h in DEMO_BROKER_HOSTS.items())
    tables = [("demo", "kafka_zk_demo", "hosts")]
    if drain_cluster:
        tables.append((DRAIN_CLUSTER, f"kafka_zk_{DRAIN_CLUSTER}", "maintenance-hosts"))
    clusters.write_text(
        "\n".join(
            f"[clusters.{name}]\n"
            f'kafka_zookeeper_conn_id = "{conn_id}"\n'
            'ssh_conn_id = "kafka_zk_demo_ssh"\n'
            f'base_path = "{workdir / "artefacts"}"\n'
            f'server_properties_path = "{workdir / root}/broker-{{broker_id}}/config/server.properties"\n'
            f"broker_hosts = {{ {hosts} }}\n"
            for name, conn_id, root in tables
        )
    )
    return clusters


def dag_environment(
    workdir: Path,
    zookeeper: ZooKeeperServer,
    sshd: SshServer,
    addresses: tuple[str, ...],
    dags_folder: Path,
    *,
    drain_cluster: bool = False,
) -> dict[str, str]:
    """An isolated Airflow home under the workdir, the demo's cluster file and connections, and what
    spark-submit needs.

    :param drain_cluster: also the cluster file entry and connection of ``DRAIN_CLUSTER``.
    """
    venv_bin = str(Path(sys.executable).parent)
    extra = {}
    if drain_cluster:
        extra[f"AIRFLOW_CONN_KAFKA_ZK_{DRAIN_CLUSTER.upper()}"] = json.dumps(
            {
                "conn_type": "kafkazookeeper",
                "host": zookeeper.connect_string,
                "extra": {"chroot": DRAIN_CHROOT},
            }
        )
    return {
        **extra,
        **os.environ,
        "AIRFLOW_HOME": str(workdir / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "KAFKA_ZK_CLUSTERS_FILE": str(write_demo_clusters_file(workdir, drain_cluster=drain_cluster)),
        "KAFKA_ZK_ARTEFACTS_BASE": str(workdir / "artefacts"),
        "AIRFLOW_CONN_KAFKA_ZK_DEMO": json.dumps(
            {"conn_type": "kafkazookeeper", "host": zookeeper.connect_string, "extra": {"chroot": CHROOT}}
        ),
        "AIRFLOW_CONN_KAFKA_ZK_DEMO_SSH": json.dumps(sshd.airflow_connection_fields(addresses[0])),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }


def run_dag(
    workdir: Path, zookeeper: ZooKeeperServer, sshd: SshServer, addresses: tuple[str, ...], dags_folder: Path
) -> int:
    """``airflow dags test kafka_zk_daily_hygiene`` against the live demo; 0 when findings were produced."""
    env = dag_environment(workdir, zookeeper, sshd, addresses, dags_folder)
    airflow = str(Path(sys.executable).parent / "airflow")
    log_path = workdir / "dag-run.log"
    print(
        f"\nRunning the {DAG_ID} DAG (airflow dags test; Airflow home {env['AIRFLOW_HOME']}) ...", flush=True
    )
    started = time.monotonic()
    with log_path.open("w") as log_file:
        migrate = subprocess.run(
            [airflow, "db", "migrate"], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
        if migrate.returncode != 0:
            print(f"airflow db migrate failed; see {log_path}", file=sys.stderr)
            return 1
        result = subprocess.run(
            [airflow, "dags", "test", DAG_ID],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            timeout=1800,
        )
    seconds = time.monotonic() - started
    findings_root = workdir / "artefacts" / "demo" / "findings"
    runs = sorted(p for p in findings_root.glob("*") if (p / "summary.json").exists())
    if not runs:
        print(log_path.read_text()[-4000:])
        print(
            f"\nThe DAG produced no findings (exit {result.returncode}); full log: {log_path}",
            file=sys.stderr,
        )
        return 1
    print(findings_summary(json.loads((runs[-1] / "summary.json").read_text()), result.returncode, seconds))
    print(f"  DAG log: {log_path}")
    return 0


RESTART_CHECK_BROKER = 4  # the incident cluster's broker that crashed with a damaged offset index


def run_restart_check(
    workdir: Path, zookeeper: ZooKeeperServer, sshd: SshServer, addresses: tuple[str, ...], dags_folder: Path
) -> int:
    """``airflow dags test kafka_zk_pre_restart_check`` for the crashed broker: what its restart would do."""
    env = dag_environment(workdir, zookeeper, sshd, addresses, dags_folder)
    airflow = str(Path(sys.executable).parent / "airflow")
    log_path = workdir / "restart-check.log"
    conf = {"cluster": "demo", "broker": RESTART_CHECK_BROKER, "walk_all": True, "fail_on": "never"}
    print(
        f"\nRunning kafka_zk_pre_restart_check for broker {RESTART_CHECK_BROKER} (read-only) ...", flush=True
    )
    started = time.monotonic()
    with log_path.open("w") as log_file:
        result = subprocess.run(
            [airflow, "dags", "test", "kafka_zk_pre_restart_check", "-c", json.dumps(conf)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            timeout=1800,
        )
    reports = sorted((workdir / "artefacts" / "demo" / "log-scan").glob("*/report.txt"))
    if not reports:
        print(log_path.read_text()[-4000:])
        print(
            f"\nNo scan report was written (exit {result.returncode}); full log: {log_path}", file=sys.stderr
        )
        return 1
    print(
        f"\nPre-restart check of broker {RESTART_CHECK_BROKER} ({time.monotonic() - started:.0f}s; exit {result.returncode}):"
    )
    print("  " + reports[-1].read_text().rstrip().replace("\n", "\n  "))
    print(f"  artefacts: {reports[-1].parent}  DAG log: {log_path}")
    return 0 if result.returncode == 0 else 1


REPAIR_DAG_ID = "kafka_zk_topic_id_repair"
REPAIR_TOPICS = ("clickstream", "inventory-updates")


def run_repair(
    workdir: Path,
    zookeeper: ZooKeeperServer,
    sshd: SshServer,
    addresses: tuple[str, ...],
    dags_folder: Path,
    *,
    deployed: DeployedCluster | None = None,
) -> int:
    """``airflow dags test kafka_zk_topic_id_repair`` for the audit's topicId findings: a dry run that
    prints the plan, or -- given the deployed cluster, whose controller and brokers then react in a
    thread (``ClusterRuntime``) -- the real repair, printing its verification report. 0 on success."""
    from .simulator.runtime import ClusterRuntime

    dry_run = deployed is None
    env = dag_environment(workdir, zookeeper, sshd, addresses, dags_folder)
    airflow = str(Path(sys.executable).parent / "airflow")
    log_path = workdir / ("repair-dry-run.log" if dry_run else "repair.log")
    conf = {"cluster": "demo", "topics": list(REPAIR_TOPICS), "dry_run": dry_run, "poll_interval_s": 0.5}
    what = "as a dry run" if dry_run else "for real (the simulated controller and brokers react)"
    print(f"\nRunning the {REPAIR_DAG_ID} DAG {what} for {', '.join(REPAIR_TOPICS)} ...", flush=True)
    runs_root = workdir / "artefacts" / "demo" / "topic-id-repair"
    known = set(runs_root.glob("*")) if runs_root.exists() else set()
    started = time.monotonic()
    command = [airflow, "dags", "test", REPAIR_DAG_ID, "-c", json.dumps(conf)]
    with log_path.open("w") as log_file, contextlib.ExitStack() as stack:
        if deployed is not None:
            api = stack.enter_context(approval_server(env, workdir))
            stack.enter_context(ClusterRuntime(deployed, restart_dir=workdir / "restarts"))
            returncode = dags_test_with_approval(
                command, env, log_file, api, REPAIR_DAG_ID, comment="demo: the write-back plan was reviewed"
            )
        else:
            returncode = subprocess.run(
                command, env=env, stdout=log_file, stderr=subprocess.STDOUT, timeout=1800
            ).returncode
    result = subprocess.CompletedProcess(command, returncode)
    runs = sorted(p for p in runs_root.glob("*") if p not in known and (p / "summary.txt").exists())
    name = "summary.txt" if dry_run else "report.txt"
    if not runs or not (runs[-1] / name).exists():
        print(log_path.read_text()[-4000:])
        print(
            f"\nNo repair {name} was written (exit {result.returncode}); full log: {log_path}",
            file=sys.stderr,
        )
        return 1
    seconds = time.monotonic() - started
    if dry_run:
        print(f"\ntopicId repair, DRY RUN ({seconds:.0f}s; nothing was changed; exit {result.returncode}):")
    else:
        print(f"\ntopicId repair, carried out ({seconds:.0f}s; exit {result.returncode}):")
    print("  " + (runs[-1] / name).read_text().rstrip().replace("\n", "\n  "))
    if dry_run:
        print(
            f"  To carry it out: airflow dags trigger {REPAIR_DAG_ID} -c "
            + json.dumps({"cluster": "demo", "topics": list(REPAIR_TOPICS), "dry_run": False})
            + "  (it waits in its approve task for a person to approve the plan; here: demo --repair)"
        )
    print(f"  artefacts: {runs[-1]}  DAG log: {log_path}")
    refusal = next(
        (line for line in log_path.read_text().splitlines() if "TopicIdRepairRefusedError:" in line), None
    )
    if dry_run and result.returncode != 0 and refusal is not None:
        # e.g. 2.8.x: replicas of one topic hold two ids and some sit on stopped brokers; the plan
        # says so and the run refuses, which is its answer, not a failure of the demo
        print(
            "  The dry run refused a topic, as it should:" + refusal.split("TopicIdRepairRefusedError:", 1)[1]
        )
        return 0
    return 0 if result.returncode == 0 else 1


MAINTENANCE_BROKER = 2


def run_maintenance(
    workdir: Path,
    zookeeper: ZooKeeperServer,
    sshd: SshServer,
    addresses: tuple[str, ...],
    dags_folder: Path,
    deployed: DeployedCluster,
) -> int:
    """A maintenance window on the maintenance cluster: the drain of broker 2 (real run), broker 2
    stopped and started again, then ``kafka_zk_post_maintenance`` with the drain's run id; prints both
    reports. The simulated controller and brokers react in a thread. 0 when both runs passed."""
    from .simulator.runtime import ClusterRuntime

    env = dag_environment(workdir, zookeeper, sshd, addresses, dags_folder)
    airflow = str(Path(sys.executable).parent / "airflow")
    log_path = workdir / "maintenance.log"
    started = time.monotonic()
    with log_path.open("w") as log_file, approval_server(env, workdir) as api:

        def dags_test(dag_id: str, conf: dict) -> int:
            print(f"\nRunning {dag_id} with {json.dumps(conf)} ...", flush=True)
            with ClusterRuntime(deployed, restart_dir=workdir / "restarts", reassignments=True):
                return dags_test_with_approval(
                    [airflow, "dags", "test", dag_id, "-c", json.dumps(conf)],
                    env,
                    log_file,
                    api,
                    dag_id,
                    comment="demo: maintenance window approved",
                )

        base = workdir / "artefacts" / "demo"
        drain_conf = {
            "cluster": "demo",
            "brokers": [MAINTENANCE_BROKER],
            "dry_run": False,
            "poll_interval_s": 0.5,
        }
        status = dags_test("kafka_zk_pre_maintenance_drain", drain_conf)
        drains = sorted((base / "drain").glob("*/report.txt"))
        if status != 0 or not drains:
            print(f"The drain failed (exit {status}); full log: {log_path}", file=sys.stderr)
            return 1
        print("  " + drains[-1].read_text().rstrip().replace("\n", "\n  "))
        run_id = json.loads((drains[-1].parent / "plan.json").read_text())["run_id"]

        print(
            f"\nMaintenance: broker {MAINTENANCE_BROKER} stops (controlled shutdown) and starts again",
            flush=True,
        )
        deployed.cluster.stop_broker(MAINTENANCE_BROKER, clean=True)
        deployed.sync()
        deployed.cluster.start_broker(MAINTENANCE_BROKER)
        deployed.sync()

        status = dags_test(
            "kafka_zk_post_maintenance",
            {"cluster": "demo", "drain_run": run_id, "dry_run": False, "poll_interval_s": 0.5},
        )
        reports = sorted((base / "post-maintenance").glob("*/report.txt"))
        if not reports:
            print(
                f"kafka_zk_post_maintenance wrote no report (exit {status}); full log: {log_path}",
                file=sys.stderr,
            )
            return 1
    print(f"\nAfter maintenance ({time.monotonic() - started:.0f}s for the window; exit {status}):")
    print("  " + reports[-1].read_text().rstrip().replace("\n", "\n  "))
    print(f"  artefacts: {reports[-1].parent}  DAG log: {log_path}")
    return 0 if status == 0 else 1


def findings_summary(summary: dict, dag_exit: int, seconds: float) -> str:
    """The findings counts, the worst findings and where the report is."""
    lines = [
        f"\nDaily hygiene audit of '{summary['cluster']}' (engine {summary['engine']}, {seconds:.0f}s for the DAG run): "
        f"{summary['findings']} findings",
        "  by severity: " + ", ".join(f"{k} {v}" for k, v in summary["by_severity"].items()),
        f"  coverage: {summary.get('coverage_text') or summary['coverage'].get('status')}",
        "  act now (the report's first section):",
    ]
    for item in summary.get("act_now") or ():
        lines.append(f"    [{item['severity'].upper()}] {item['title']}")
        lines += [f"      {c['label']}: {c['command']}" for c in item.get("commands") or ()]
    lines.append("  by check:")
    for check, counts in summary["by_check"].items():
        lines.append(f"    {check:34s} " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    lines.append("  top findings:")
    lines += [f"    {line}" for line in summary["top"]]
    lines.append(f"  report: {summary['report']}")
    if dag_exit != 0:
        lines.append(
            "  The DAG run FAILED at its gate, as expected here: the incident cluster has critical findings, "
            "and the failing gate is what makes Airflow alert."
        )
    else:
        lines.append("  The gate passed: nothing at or above the configured severity.")
    return "\n".join(lines)


def report(
    deployed: DeployedCluster, tree: dict[str, ZnodeReading], disks: dict[int, BrokerOnDisk], seconds: float
) -> str:
    """What the raw ZooKeeper tree and broker files show, incident by incident (read back, not the model)."""
    cluster = deployed.cluster
    spec = cluster.spec
    lines = []
    cluster_id = tree[zk.CLUSTER_ID].decoded.id
    controller = tree[zk.CONTROLLER].decoded
    live = sorted(int(p.rsplit("/", 1)[1]) for p in tree if p.startswith(zk.BROKER_IDS + "/"))
    replicas = sum(len(d.replicas) for d in disks.values())
    lines.append(
        f"\nSimulated Kafka {spec.kafka_version} cluster '{spec.name}' (IBP {spec.ibp}), cluster id {cluster_id}, "
        f"built in {seconds:.1f}s"
    )
    lines.append(f"  ZooKeeper: {deployed.zookeeper_connect}  ({len(tree)} znodes)")
    lines.append(f"  broker hosts: {deployed.root}  ({replicas} partition directories)")
    lines.append(
        f"  controller: broker {controller.broker_id}, epoch {tree[zk.CONTROLLER_EPOCH].data.decode()}"
    )
    lines.append("\nBrokers")
    for broker_id, broker in sorted(cluster.brokers.items()):
        disk = disks[broker_id]
        marker = disk.log_dirs[0].clean_shutdown
        if broker_id in live:
            status = "live (registered)"
        elif marker is not None:
            status = "STOPPED, clean shutdown marker present"
        else:
            status = "STOPPED, no clean-shutdown marker (crashed)"
        lines.append(
            f"  {broker_id}  rack {broker.spec.rack or '-'}  host {broker.spec.host}  "
            f"{len(disk.replicas):3d} dirs  {status}"
        )
    lines.append("\nTopics (from ZooKeeper)")
    for _, reading in sorted(tree.items()):
        if not isinstance(reading.decoded, zk.TopicAssignment):
            continue
        topic = reading.decoded
        rf = Counter(len(r) for r in topic.partitions.values()).most_common(1)[0][0]
        offline = sum(
            1
            for p in topic.partitions
            if tree[zk.partition_state_path(topic.topic, p)].decoded.leader == zk.NO_LEADER
        )
        flags = []
        if topic.topic_id is None and cluster.uses_topic_ids:
            flags.append("NO topic_id")
        if topic.is_reassigning:
            flags.append("reassigning")
        if zk.delete_topic_path(topic.topic) in tree:
            flags.append("MARKED FOR DELETION")
        if offline:
            flags.append(f"{offline} offline")
        lines.append(
            f"  {topic.topic:22s} {len(topic.partitions):3d} partitions  RF {rf}  "
            f"topic_id {str(topic.topic_id) if topic.topic_id else '-':22s}  {', '.join(flags)}"
        )
    lines.append("\nIncidents, as the raw data shows them")
    lines += _incident_lines(tree, disks, live)
    lines.append("\nStep by step, what happened to this cluster:")
    lines += [f"  - {step}" for step in cluster.history]
    return "\n".join(lines)


def _incident_lines(
    tree: dict[str, ZnodeReading], disks: dict[int, BrokerOnDisk], live: list[int]
) -> list[str]:
    out = []
    topics = {r.decoded.topic: r.decoded for r in tree.values() if isinstance(r.decoded, zk.TopicAssignment)}
    all_replicas = [r for d in disks.values() for r in d.replicas]
    for name, topic in sorted(topics.items()):
        ids = {
            (r.broker_id, r.name.partition): r.topic_id
            for r in all_replicas
            if r.name.topic == name and r.name.kind is DirKind.NORMAL and r.topic_id is not None
        }
        if topic.topic_id is not None:
            wrong = sorted(k for k, v in ids.items() if v != topic.topic_id)
            if wrong:
                disk_ids = sorted({str(ids[k]) for k in wrong})
                out.append(
                    f"  [a] KAFKA-14190 {name}: ZooKeeper topic_id {topic.topic_id}, but {len(wrong)} replica(s) "
                    f"hold {', '.join(disk_ids)} in partition.metadata (brokers {sorted({b for b, _ in wrong})})"
                )
        elif ids:
            out.append(
                f"  [a] precursor {name}: topic znode has no topic_id; replicas hold "
                f"{', '.join(sorted({str(v) for v in ids.values()}))}; the next controller failover mints a new one"
            )
    for broker_id in sorted(disks):
        rf1 = sorted(
            f"{t}-{p}" for t, a in topics.items() for p, r in a.partitions.items() if r == (broker_id,)
        )
        if not rf1:
            continue
        state = "offline now" if broker_id not in live else "go offline if it stops"
        out.append(f"  [b] RF=1 on broker {broker_id} ({state}): {', '.join(rf1)}")
    reassign = tree.get(zk.REASSIGN_PARTITIONS)
    listed = {e.topic for e in reassign.decoded.partitions} if reassign is not None else set()
    for path in sorted(p for p in tree if p.startswith(zk.DELETE_TOPICS + "/")):
        name = path.rsplit("/", 1)[1]
        topic = topics.get(name)
        cause = "?"
        # before 2.4 only /admin/reassign_partitions tells: the topic znode has no adding/removing
        if topic is not None and (topic.is_reassigning or name in listed):
            cause = "reassignment in progress"
        elif topic is not None:
            down = sorted({b for r in topic.partitions.values() for b in r if b not in live})
            cause = f"replica broker(s) {down} offline" if down else "in progress"
        out.append(f"  [c] deletion of {name} pending: {cause}")
    for replica in all_replicas:
        if replica.name.topic not in topics:
            age_h = (time.time() - replica.path.stat().st_mtime) / 3600
            out.append(
                f"  [c] leftover on broker {replica.broker_id}: {replica.path.name} "
                f"({replica.name.kind.name.lower()}, {age_h:.0f} h old; topic gone from ZooKeeper)"
            )
    for replica in all_replicas:
        for problem in replica.index_problems:
            if problem.corrupt:
                out.append(f"  [d] broker {replica.broker_id}: {problem}")
    for broker_id in live:
        preferred = [
            (t, p)
            for t, a in topics.items()
            for p, r in a.partitions.items()
            if len(r) > 1 and r[0] == broker_id and zk.delete_topic_path(t) not in tree
        ]
        led = [
            (t, p) for t, p in preferred if tree[zk.partition_state_path(t, p)].decoded.leader == broker_id
        ]
        if preferred and len(led) < len(preferred) * 0.9:
            out.append(
                f"  [e] broker {broker_id} leads {len(led)} of the {len(preferred)} replicated partitions "
                "it is preferred leader for"
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
