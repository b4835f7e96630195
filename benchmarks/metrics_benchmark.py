"""What publishing metrics costs a task (issue 34: "no task slows measurably"), receiver off vs present
vs absent, in one run.

Two places where a task publishes, each timed whole in the same process, median of ``--repeat``:

* **a drain's execution** -- what the step executor does per batch: record the batch pending and then
  completed in ``progress.json`` (real files in a temporary folder), for a plan of ``--batches``
  batches of ``--partitions`` partitions each. With metrics on, every save also computes the plan's
  figures, keeps them in the record and publishes them (:func:`metrics.runs.observe_progress`).
* **a daily run's audit and alert** -- the in-process audit of the simulator's incident cluster (the
  ``audit`` task's body, :func:`spark_jobs.audit.run_audit`) and the alert's record, with and
  without the publication of the run's figures (:func:`metrics.figures.daily_samples` +
  :func:`metrics.publish.publish`, what the ``alert`` task adds).

Receivers: **off** (the default; the baseline), **present** (Debian's ``prometheus-pushgateway``,
started here on loopback; skipped when not installed), **absent** (a port nobody listens on: refused at
once, then skipped for a minute), **silent** (a socket that accepts and never answers: the push waits
for ``metrics_timeout_s``, then is skipped for a minute). Prints each case and its ratio to off.

    python benchmarks/metrics_benchmark.py [--batches 50] [--partitions 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow_provider_kafka_zk.kafka.steps import DrainBatch, PartitionMove
from airflow_provider_kafka_zk.maintenance.executor import ProgressLog
from airflow_provider_kafka_zk.metrics import publish as pub
from airflow_provider_kafka_zk.metrics import runs
from airflow_provider_kafka_zk.metrics.figures import daily_samples


def _plan(batches: int, partitions: int) -> list[DrainBatch]:
    return [
        DrainBatch(
            id=f"batch-{b + 1}",
            batch=b,
            batches=batches,
            moves=tuple(
                PartitionMove(f"t{b}", p, (1,), (2 + p % 4,), size_bytes=1_000_000 + p)
                for p in range(partitions)
            ),
        )
        for b in range(batches)
    ]


def _drain(folder: Path, steps: list[DrainBatch], settings: pub.MetricsSettings | None) -> None:
    """Every save a drain's execution makes, with the metrics hooks on when ``settings`` is given."""
    progress = ProgressLog(str(folder))
    if settings is not None:
        session = SimpleNamespace(cluster="bench", dry_run=False, run=SimpleNamespace(dag_id="bench_drain"))
        ctx = SimpleNamespace(session=session, progress=progress, plan_steps=steps)
        original = runs.metrics_settings
        runs.metrics_settings = lambda cluster, clusters=None: settings  # the benchmark's receiver
        try:
            runs.observe_progress(ctx, rate=50 * 1024 * 1024)
        finally:
            runs.metrics_settings = original
    for step in steps:
        progress.set_pending(step.id, {"request": {"partitions": len(step.moves)}})
        progress.complete({step.id: {"completed": "done"}})


def _audit_inputs(base: Path) -> dict[str, str]:
    """The simulator's incident cluster as audit inputs (snapshot + inventory), built once."""
    from datetime import UTC, datetime

    from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
    from airflow_provider_kafka_zk.testing.simulator import incident_cluster
    from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows

    cluster = incident_cluster(name="bench")
    snapshot = write_snapshot_rows(base, "bench", cluster_rows(cluster), datetime(2026, 11, 22, tzinfo=UTC))
    facts = {b: {"broker.id": b} for b in cluster.online_broker_ids()}
    inventory = write_inventory_dirs(
        base, "bench", "20261122T000000", audit_dirs(cluster), broker_facts=facts
    )
    return {"base": str(base), "snapshot": str(snapshot), "inventory": str(inventory)}


def _daily(folder: Path, inputs: dict[str, str], settings: pub.MetricsSettings | None) -> None:
    """The daily run's audit (in-process, as its ``audit`` task runs it) and the alert's record, plus
    the publication of the run's figures when ``settings`` is given (what the ``alert`` task adds)."""
    from airflow_provider_kafka_zk.spark_jobs.audit import run_audit

    summary = run_audit(
        inputs["base"],
        "bench",
        snapshot=inputs["snapshot"],
        inventory=inputs["inventory"],
        out=str(folder / "out"),
    )
    record: dict[str, Any] = {"findings": summary["findings"]}
    if settings is not None:
        samples = daily_samples(
            "bench",
            summary,
            stages={"snapshot": 3.0, "inventory": 9.0, "audit": 20.0},
            run_seconds=60.0,
            ended_at=time.time(),
            success=False,
        )
        record["metrics"] = pub.publish(
            samples, cluster="bench", job=pub.DAILY_JOB, grouping={"cluster": "bench"}, settings=settings
        ).to_dict()
    (folder / "alert.json").write_text(json.dumps(record))


def _once(run: Callable[[Path], None]) -> float:
    pub._failed_at.clear()  # each repetition is a new task process: no backoff carried over
    folder = Path(tempfile.mkdtemp(prefix="kafka-zk-metrics-bench-"))
    try:
        started = time.perf_counter()
        run(folder)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=2.0, help="metrics_timeout_s (default 2)")
    args = parser.parse_args()

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    cases: dict[str, pub.MetricsSettings | None] = {
        "off": None,
        "absent (refused)": pub.MetricsSettings(f"http://127.0.0.1:{_closed_port()}", False, args.timeout),
        "silent (never answers)": pub.MetricsSettings(
            f"http://127.0.0.1:{silent.getsockname()[1]}", False, args.timeout
        ),
    }
    gateway = None
    if shutil.which("prometheus-pushgateway"):
        from airflow_provider_kafka_zk.testing.prometheus import PushgatewayServer

        gateway = PushgatewayServer(Path(tempfile.mkdtemp(prefix="kafka-zk-bench-pg-"))).start()
        cases["present (Pushgateway)"] = pub.MetricsSettings(gateway.url, False, args.timeout)
    else:
        print("prometheus-pushgateway is not installed: no 'present' case")

    steps = _plan(args.batches, args.partitions)
    inputs = _audit_inputs(Path(tempfile.mkdtemp(prefix="kafka-zk-bench-audit-")))
    saves = 2 * args.batches
    print(
        f"drain execution: {args.batches} batches x {args.partitions} partitions, {saves} progress saves; "
        f"daily audit + alert: the incident cluster in process; median of {args.repeat}; timeout {args.timeout} s"
    )
    try:
        tasks = {
            "drain": lambda settings: lambda folder: _drain(folder, steps, settings),
            "daily": lambda settings: lambda folder: _daily(folder, inputs, settings),
        }
        for task in tasks.values():  # warm-up: imports and caches paid before any case is timed
            _once(task(None))
        times: dict[tuple[str, str], list[float]] = {}
        order = random.Random(34)
        for _ in range(args.repeat):  # the cases interleaved, in a shuffled order: no case always first
            runs_now = [(name, task_name) for name in cases for task_name in tasks]
            order.shuffle(runs_now)
            for name, task_name in runs_now:
                times.setdefault((name, task_name), []).append(_once(tasks[task_name](cases[name])))
        results = {
            name: (statistics.median(times[(name, "drain")]), statistics.median(times[(name, "daily")]))
            for name in cases
        }
        off_drain, off_alert = results["off"]
        print(
            f"{'receiver':<26}{'drain execution':>18}{'x off':>8}{'per save':>12}{'daily audit+alert':>19}{'x off':>8}"
        )
        for name, (drain, alert) in results.items():
            print(
                f"{name:<26}{drain * 1000:>15.1f} ms{drain / off_drain:>7.2f}x{drain / saves * 1000:>9.2f} ms"
                f"{alert * 1000:>16.1f} ms{alert / off_alert:>7.2f}x"
            )
    finally:
        silent.close()
        if gateway is not None:
            gateway.close()


if __name__ == "__main__":
    main()
