"""The pre-restart scan against real parts: a simulated cluster in a real ZooKeeper, its broker hosts
behind a real sshd (127.0.0.1-4), the scan script run there over SSH, and the DAG run by
``airflow dags test`` with the ZooKeeper connection stored in the Airflow metadata DB."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.testing.simulator import (
    BrokerSpec,
    ClusterSpec,
    DeployedCluster,
    SimulatedCluster,
    TopicSpec,
)

pytestmark = pytest.mark.integration

CLUSTER = "scan-test"
ZK_CONN = "scan_zk"
SSH_CONN = "scan_ssh"
DAG_ID = "kafka_zk_pre_restart_check"


def _spec() -> ClusterSpec:
    return ClusterSpec(
        "scan",
        brokers=tuple(BrokerSpec(b, rack=None, host=f"127.0.0.{b + 1}") for b in range(4)),
        topics=(
            TopicSpec("orders", 4, 3, records_per_partition=600),
            TopicSpec("metrics", 2, 1, assignment={0: (1,), 1: (2,)}, records_per_partition=600),
        ),
    )


@pytest.fixture
def live(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    yield from _deploy(_spec(), zookeeper_server, ssh_server, tmp_path, monkeypatch)


def _deploy(spec, zookeeper_server, ssh_server, tmp_path, monkeypatch):
    """The cluster deployed; the ZooKeeper connection stored in the Airflow metadata DB, the SSH one
    in an env var; a cluster file. Yields (deployed, artefact base)."""
    chroot = zookeeper_server.new_chroot("/kafka_scan_")
    hosts = tmp_path / "hosts"
    cluster = SimulatedCluster(spec)
    with DeployedCluster(cluster, zookeeper_server.connect_string, chroot, hosts) as deployed:
        base = tmp_path / "artefacts"
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.{CLUSTER}]\nkafka_zookeeper_conn_id = "{ZK_CONN}"\nssh_conn_id = "{SSH_CONN}"\n'
            f'base_path = "{base}"\n'
            f'server_properties_path = "{hosts / "broker-{broker_id}" / "config" / "server.properties"}"\n'
            # a crashed broker is not in ZooKeeper: its host comes from here
            + "broker_hosts = { "
            + ", ".join(f'"{b.broker_id}" = "{b.host}"' for b in spec.brokers)
            + " }\n"
        )
        monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        airflow = str(Path(sys.executable).parent / "airflow")
        subprocess.run(
            [airflow, "connections", "delete", ZK_CONN], capture_output=True, env=os.environ.copy()
        )
        conn = {
            "conn_type": "kafka_zookeeper",
            "host": zookeeper_server.connect_string,
            "extra": {"chroot": chroot, "session_timeout": 10, "connect_timeout": 5},
        }
        added = subprocess.run(
            [airflow, "connections", "add", ZK_CONN, "--conn-json", json.dumps(conn)],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        assert added.returncode == 0, added.stderr
        for name, value in ssh_server.airflow_connection("127.0.0.1", SSH_CONN, conn_timeout=5).items():
            monkeypatch.setenv(name, value)
        yield deployed, base


def _dags_test(conf: dict) -> subprocess.CompletedProcess:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run(
        [airflow, "dags", "test", DAG_ID, "-c", json.dumps({"cluster": CLUSTER, **conf})],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=400,
    )


def _checksums(root: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _scan_dir(base: Path) -> Path:
    return sorted((base / CLUSTER / "log-scan").iterdir())[0]


def test_a_healthy_broker_restarts_clean_and_the_scan_changes_nothing(live):
    deployed, base = live
    before = _checksums(deployed.root)
    run = _dags_test({"broker": 1, "walk_all": True, "verify_crc": True})
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    assert _checksums(deployed.root) == before  # read-only
    scan = _scan_dir(base)
    verdicts = json.loads((scan / "verdicts.json").read_text())
    assert [(v["broker_id"], v["verdict"], v["partial"]) for v in verdicts] == [(1, "restarts_clean", False)]
    assert pq.read_table(scan / "findings.parquet").num_rows == 0
    rows = pq.read_table(scan / "broker=1.parquet").to_pylist()
    assert ("metrics", 0) in {(r["topic"], r["partition"]) for r in rows}  # broker 1's RF=1 partition
    assert all(r["walk_json"] and json.loads(r["walk_json"])["stop"] is None for r in rows)
    output = run.stdout + run.stderr
    assert "partitions scanned" in output and "broker 1 restarts clean" in output


def test_a_broken_index_and_a_repeated_offset_are_found_over_ssh_with_their_remedies(live):
    deployed, base = live
    cluster = deployed.cluster
    cluster.corrupt_offset_index(2, "orders", next(d.partition for d in cluster.replica_dirs("orders", 2)))
    deployed.sync()
    # the seed's case on broker 2's RF=1 partition: a batch appended again after a crash, and the
    # segment's .index gone (so the next start rebuilds it and meets the repeated offset)
    part = deployed.hosts[2].log_dirs[0] / "metrics-1"
    log = part / "00000000000000000000.log"
    data = log.read_bytes()
    pos = last = 0
    while pos < len(data):
        last, pos = pos, pos + int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
    log.write_bytes(data + data[last:] * 3)  # again and again: one lands where the rebuild indexes
    (part / "00000000000000000000.index").unlink(missing_ok=True)
    before = _checksums(deployed.root)

    run = _dags_test({"broker": 2})
    output = run.stdout + run.stderr
    assert run.returncode != 0  # fail_on=fails_recovery
    assert "broker 2 will fail recovery at" in output and "metrics-1/00000000000000000000.log" in output
    assert _checksums(deployed.root) == before
    scan = _scan_dir(base)
    findings = pq.read_table(scan / "findings.parquet").to_pylist()
    fatal = [f for f in findings if f["kind"] == "recovery-fails"]
    assert fatal and fatal[0]["topic"] == "metrics" and fatal[0]["severity"] == "critical"
    # RF=1: no replica to copy from; cut where the offsets first go back (the first repeat)
    assert f"truncate -s {len(data)} " in fatal[0]["remedy"]
    assert "ERROR Exiting Kafka due to fatal exception during startup." in json.loads(
        fatal[0]["kafka_log_json"]
    )
    # the running broker's damaged (active) index: a crash rebuilds it, a clean restart keeps it
    index = [f for f in findings if f["kind"] == "index-damaged" and f["topic"] == "orders"]
    assert index and index[0]["file"].endswith(".index") and "remove" in index[0]["remedy"]
    assert index[0]["severity"] == "warning" and "a clean restart keeps it" in index[0]["summary"]
    report = (scan / "report.txt").read_text()
    assert report.index("[CRITICAL]") < report.index("[WARNING]")  # the worst first
    assert "Kafka will log:" in report and "predicted for: a clean restart; an unclean restart" in report


def test_the_daily_dag_runs_the_optional_scan_stage_with_its_verdicts_on_spark(live, tmp_path):
    """``log_scan = true`` in the cluster file: every broker scanned, the verdicts judged on Spark
    (spark-submit, local[2]), and the run fails on the broker that will not restart."""
    deployed, base = live
    part = deployed.hosts[2].log_dirs[0] / "metrics-1"
    log = part / "00000000000000000000.log"
    data = log.read_bytes()
    pos = last = 0
    while pos < len(data):
        last, pos = pos, pos + int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
    log.write_bytes(data + data[last:] * 3)
    (part / "00000000000000000000.index").unlink(missing_ok=True)
    clusters = Path(os.environ["KAFKA_ZK_CLUSTERS_FILE"])
    clusters.write_text(
        clusters.read_text() + 'log_scan = true\nlog_scan_budget_mb = 512\nengine = "spark"\n'
    )
    airflow = str(Path(sys.executable).parent / "airflow")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }
    run = subprocess.run(
        [airflow, "dags", "test", f"kafka_zk_daily_hygiene_{CLUSTER}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0
    scan = _scan_dir(base)
    assert sorted(p.name for p in scan.glob("broker=*.parquet")) == [f"broker={b}.parquet" for b in range(4)]
    verdicts = {v["broker_id"]: v["verdict"] for v in json.loads((scan / "verdicts.json").read_text())}
    assert verdicts == {0: "restarts_clean", 1: "restarts_clean", 2: "fails_recovery", 3: "restarts_clean"}
    assert "KAFKA_ZK_LOG_SCAN" in output and "RESTART RISK: broker 2 will fail recovery at" in output
    assert "findings written" in output or (base / CLUSTER / "findings").exists()  # the audit ran too


def test_the_drain_moves_nothing_off_a_broker_that_would_not_restart(live):
    """The restart check gates the drain's execution (the plan is made in parallel from its own
    read, issue 17, and may be written): with dry_run false and a drained broker that would fail
    recovery, the run fails on the verdict before any write: no reassignment, no throttle, no change
    log."""
    from kazoo.client import KazooClient

    deployed, base = live
    part = deployed.hosts[2].log_dirs[0] / "metrics-1"
    log = part / "00000000000000000000.log"
    data = log.read_bytes()
    pos = last = 0
    while pos < len(data):
        last, pos = pos, pos + int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
    log.write_bytes(data + data[last:] * 3)
    (part / "00000000000000000000.index").unlink(missing_ok=True)
    airflow = str(Path(sys.executable).parent / "airflow")
    run = subprocess.run(
        [
            airflow,
            "dags",
            "test",
            "kafka_zk_pre_maintenance_drain",
            "-c",
            json.dumps({"cluster": CLUSTER, "brokers": [2], "dry_run": False}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0 and "broker 2 will fail recovery at" in output
    written = {p.name for p in (base / CLUSTER / "drain").rglob("*") if p.is_file()}
    # the plan's own files may be there; nothing the execute step writes (throttles, change log)
    assert not [n for n in written if n == "throttles.json" or n.startswith("changes-")], written
    zk = KazooClient(hosts=deployed.zookeeper_connect)
    zk.start(timeout=15)
    try:
        assert zk.exists("/admin/reassign_partitions") is None
        configs = zk.get_children("/config/brokers") if zk.exists("/config/brokers") else []
        assert all(b"throttled" not in zk.get(f"/config/brokers/{b}")[0] for b in configs)
    finally:
        zk.stop()
        zk.close()
    # with the check set to report only, the drain plans as before and the report stays in the scan folder
    plans_before = set((base / CLUSTER / "drain").glob("*/plan.json"))
    run = subprocess.run(
        [
            airflow,
            "dags",
            "test",
            "kafka_zk_pre_maintenance_drain",
            "-c",
            json.dumps({"cluster": CLUSTER, "brokers": [2], "dry_run": True, "restart_check": "never"}),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert set((base / CLUSTER / "drain").glob("*/plan.json")) - plans_before


DAMAGED = "damaged"


@pytest.fixture
def damaged(zookeeper_server, ssh_server, tmp_path, monkeypatch, airflow_home):
    """Broker 2 holds one RF=1 partition per kind of damage (small segments: several per partition)
    and a 9 MiB one for the emptied index."""
    spec = _spec()
    spec = ClusterSpec(
        spec.name,
        brokers=spec.brokers,
        topics=(
            *spec.topics,
            TopicSpec(
                DAMAGED,
                7,
                1,
                config={"segment.bytes": "60000"},
                assignment={p: (2,) for p in range(7)},
                records_per_partition=1200,
            ),
            TopicSpec(
                "bulky",
                1,
                1,
                assignment={0: (2,)},
                records_per_partition=9000,
                record_value_bytes=1000,
                records_per_batch=100,
            ),
        ),
    )
    yield from _deploy(spec, zookeeper_server, ssh_server, tmp_path, monkeypatch)


def test_every_damage_the_simulator_plants_is_found_with_its_segment_and_offset(damaged):
    deployed, base = damaged
    planted = {
        "repeated_offset": deployed.plant_log_damage(2, DAMAGED, 0, "repeated_offset", drop_index=True),
        "truncated_segment": deployed.plant_log_damage(2, DAMAGED, 1, "truncated_segment"),
        "torn_last_batch": deployed.plant_log_damage(2, DAMAGED, 2, "torn_last_batch"),
        "oversized_index": deployed.plant_log_damage(2, DAMAGED, 3, "oversized_index", segment=0),
        "index_not_multiple": deployed.plant_log_damage(2, DAMAGED, 4, "index_not_multiple", segment=0),
        "zero_length_index": deployed.plant_log_damage(2, "bulky", 0, "zero_length_index"),
    }
    deployed.cluster.stop_broker(2, clean=False)  # a crash: the restart in question recovers
    deployed.sync()  # (the damage survives the rewrite of the host roots)
    assert all(p.with_suffix(".log").exists() for p in planted.values())
    run = _dags_test({"broker": 2, "walk_all": True, "fail_on": "never"})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    findings = pq.read_table(_scan_dir(base) / "findings.parquet").to_pylist()

    def found(stem: Path, suffix: str) -> list[dict]:
        return [f for f in findings if f["file"] == str(stem.with_suffix(suffix))]

    [fatal] = found(planted["repeated_offset"], ".log")
    assert fatal["kind"] == "recovery-fails" and fatal["offset"] is not None and fatal["position"]
    # a log cut inside its last batch: recovery drops the partial batch, no offset is lost
    [torn] = found(planted["truncated_segment"], ".log")
    assert torn["kind"] == "recovery-truncates-tail" and torn["position"] and torn["bytes_at_risk"], torn
    # the last batch's length intact but its bytes zeroed: its CRC fails, the whole batch goes
    [crc] = found(planted["torn_last_batch"], ".log")
    assert crc["kind"] == "recovery-loses-data" and crc["position"] and crc["bytes_at_risk"], crc
    assert (
        crc["lost_end"] - crc["lost_first"] == 20 and crc["held_elsewhere"] == "not_held"
    )  # one batch, RF=1
    for kind in ("oversized_index", "index_not_multiple", "zero_length_index"):
        [f] = found(planted[kind], ".index")
        assert f["kind"] == "index-damaged", (kind, f)
    # nothing else on broker 2 and nothing on the other partitions of the damaged topic
    damaged_files = {str(p.with_suffix(s)) for p in planted.values() for s in (".log", ".index")}
    assert {f["file"] for f in findings} <= damaged_files
    verdict = json.loads((_scan_dir(base) / "verdicts.json").read_text())[0]
    assert verdict["verdict"] == "fails_recovery" and verdict["failing_segment"] == str(
        planted["repeated_offset"].with_suffix(".log")
    )


def test_the_seeds_case_in_0_11_format_is_fatal_after_a_crash_even_with_its_index(damaged):
    """0.11-1.1: a crash leaves the active index's zero tail, which fails the strict startup check,
    so the index is rebuilt at load -- where the repeated offset stops the broker."""
    deployed, base = damaged
    stem = deployed.plant_log_damage(2, DAMAGED, 5, "repeated_offset", index_rule="first")
    assert stem.with_suffix(".index").exists()
    run = _dags_test({"broker": 2, "kafka_version": "0.11.0.2"})
    output = run.stdout + run.stderr
    assert run.returncode != 0 and "broker 2 will fail recovery at" in output
    findings = pq.read_table(_scan_dir(base) / "findings.parquet").to_pylist()
    critical = [f for f in findings if f["severity"] == "critical"]
    assert [(f["kind"], f["file"]) for f in critical] == [("recovery-fails", str(stem.with_suffix(".log")))]
    # (the simulator's other partitions carry 2.0+ indexes, whose entries hold last offsets: judged by
    # 0.11 rules every entry mismatches. A crash rebuilds the zero-tailed active ones at load; the
    # inactive ones pass 0.11's startup check -- it reads the size and the last entry only -- and stay)
    assert {f["kind"] for f in findings if f not in critical} <= {"index-damaged"}
    # the same bytes judged by 2.0+ rules: the index's entries hold first offsets, which 2.0+ would
    # not write -- the scan says so instead of calling the broker healthy
    run = _dags_test({"broker": 2, "kafka_version": "3.3.1", "fail_on": "never"})
    assert run.returncode == 0
    scans = sorted((base / CLUSTER / "log-scan").iterdir())
    later = pq.read_table(scans[-1] / "findings.parquet").to_pylist()
    mine = [f for f in later if f["file"].startswith(str(stem.parent))]
    assert mine and "want at least its last offset" in " ".join(f["summary"] for f in mine)


# ---------------------------------------------------------------------------------------------
# a verdict always comes back (issue 23): regular files only, bounded in time
# ---------------------------------------------------------------------------------------------


def test_a_fifo_named_like_a_time_index_does_not_block_the_scan_and_is_reported(live):
    """Before: the scan blocked in ``open()`` on the FIFO until its 1800 s bound, then no verdict."""
    deployed, base = live
    part = deployed.hosts[1].log_dirs[0] / "metrics-0"
    timeindex = sorted(part.glob("*.timeindex"))[-1]
    timeindex.unlink()
    os.mkfifo(timeindex)
    try:
        run = _dags_test({"broker": 1, "walk_all": True, "fail_on": "never"})
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    finally:
        timeindex.unlink()
    scan = _scan_dir(base)
    [verdict] = json.loads((scan / "verdicts.json").read_text())
    assert verdict["partial"] and f"{part}/{timeindex.name}: a FIFO: not read" in verdict["skipped_files"]
    assert "(PARTIAL: some files were not read)" in verdict["describe"]
    findings = pq.read_table(scan / "findings.parquet").to_pylist()
    assert [f["kind"] for f in findings if f["topic"] == "metrics"] == ["not-read"]
    assert f"not read: {part}/{timeindex.name}: a FIFO: not read" in (scan / "report.txt").read_text()


def test_the_whole_scan_is_bounded_in_time_and_says_what_it_left(live, ssh_server):
    """The operator's limits reach the host: past the whole-scan limit every partition left is
    reported with the reason, and the verdict says PARTIAL instead of failing without one."""
    from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook
    from airflow_provider_kafka_zk.hooks.broker_log_scan import PartitionToScan, scan_broker_logs

    deployed, _ = live
    log_dir = deployed.hosts[1].log_dirs[0]
    partitions = [
        PartitionToScan(str(log_dir), d.name, d.name.rsplit("-", 1)[0], int(d.name.rsplit("-", 1)[1]))
        for d in sorted(log_dir.iterdir())
        if d.is_dir()
    ]
    hook = BrokerHostHook(
        SSH_CONN, None, broker_hosts={1: "127.0.0.2"}, connect_timeout=5, connect_attempts=1
    )
    results, end = scan_broker_logs(hook, 1, partitions, index_rule="last", scan_timeout=0, file_timeout=5)
    assert [r.get("skipped") for r in results] == ["the scan's time limit was reached"] * len(partitions)
    assert end["stopped"] == "the scan's time limit was reached"
    results, end = scan_broker_logs(hook, 1, partitions, index_rule="last", scan_timeout=600, file_timeout=60)
    assert all("result" in r for r in results) and end["stopped"] is None


# ---------------------------------------------------------------------------------------------
# the prediction against the simulated broker's start (issue 26)
# ---------------------------------------------------------------------------------------------


def test_the_verdict_for_a_crashed_broker_is_what_its_start_then_does(damaged):
    """Broker 2 killed while producing: segment 1 of an RF=1 partition holds a batch again and the
    recovery point is still at its base. The scan says Kafka will empty that segment and delete every
    later one, naming the offsets and bytes; the simulated start (Kafka 3.3.1's LogLoader) then does
    exactly that, and logs what the real 3.3.1 broker logged: "Found invalid offset during recovery
    ... Corruption found in segment 13188, truncating to offset 13188", then the later segments
    deleted."""
    from airflow_provider_kafka_zk.kafka.records import iter_log_entries
    from airflow_provider_kafka_zk.testing.simulator.log_damage import LogDamage, plant
    from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_broker

    deployed, base = damaged
    deployed.cluster.stop_broker(2, clean=False)
    deployed.sync()
    stem = plant(deployed, LogDamage(2, DAMAGED, 6, "repeated_offset", segment=1, unflushed_from=1))
    part = stem.parent
    bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
    sizes = {b: (part / f"{b:020d}.log").stat().st_size for b in bases}
    assert len(bases) >= 3
    run = _dags_test({"broker": 2, "fail_on": "never"})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    scan = _scan_dir(base)
    [verdict] = json.loads((scan / "verdicts.json").read_text())
    assert verdict["verdict"] == "loses_data_if_unclean" and verdict["scenarios"] == [
        "its start after an unclean shutdown"
    ]
    [loss] = [
        f
        for f in pq.read_table(scan / "findings.parquet").to_pylist()
        if f["kind"] == "recovery-loses-data" and f["partition"] == 6
    ]
    assert loss["file"] == str(stem.with_suffix(".log")) and loss["held_elsewhere"] == "not_held"
    assert (loss["lost_first"], loss["lost_end"]) == (bases[1], 1200)
    assert loss["bytes_at_risk"] == sum(sizes[b] for b in bases[1:])
    predicted_log = json.loads(loss["kafka_log_json"])

    starts = start_broker(deployed, 2)  # Kafka's start, on the broker's disk
    outcome = next(p for s in starts for n, p in s.partitions.items() if n == part.name)
    assert outcome.fatal is None and outcome.log_end_after == bases[1]
    assert [s.action for s in outcome.segments] == ["kept", "emptied"] + ["deleted"] * (len(bases) - 2)
    assert predicted_log == outcome.lines
    ident = f"[LogLoader partition={part.name}, dir={part.parent}] "  # LogLoader's logIdent (3.3.1)
    assert (
        f"WARN {ident}Corruption found in segment {bases[1]}, truncating to offset {bases[1]}"
        in outcome.lines
    )
    # on the disk after the start (kept across syncs, as on a real disk): the log ends where the
    # verdict said, and the first segment holds every offset below it
    assert sorted(int(p.name[:20]) for p in part.glob("*.log")) == bases[:2]
    kept = [
        e.last_offset
        for e in iter_log_entries((part / f"{bases[0]:020d}.log").read_bytes(), "kept", verify_crc=True)
    ]
    assert kept[-1] == bases[1] - 1 and (part / f"{bases[1]:020d}.log").stat().st_size == 0
    assert deployed.cluster.brokers[2].online


def test_a_corrupt_batch_in_the_middle_of_the_active_segment_is_found_by_the_default_check(damaged):
    """Issue 32, item 1, over SSH: broker 2 killed while producing, a bit flipped in a batch in the
    middle of an RF=1 partition's active segment. The default check (no option) reads every batch of
    every segment the start recovers, CRCs included, and predicts the truncation; the simulated start
    (Kafka 3.3.1's LogLoader) then does exactly that. The summary says what was read and not."""
    from airflow_provider_kafka_zk.kafka.records import iter_log_entries
    from airflow_provider_kafka_zk.testing.simulator.log_damage import LogDamage, plant
    from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_broker

    deployed, base = damaged
    deployed.cluster.stop_broker(2, clean=False)
    deployed.sync()
    stem = plant(deployed, LogDamage(2, DAMAGED, 6, "corrupt_batch", segment=-1))
    log = stem.with_suffix(".log")
    entries = list(iter_log_entries(log.read_bytes(), str(log), verify_crc=True))
    [bad] = [e for e in entries if e.crc_valid is False]
    assert bad is not entries[-1]  # not the last batch: the old default never read its CRC
    run = _dags_test({"broker": 2, "fail_on": "never"})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    scan = _scan_dir(base)
    [loss] = [
        f
        for f in pq.read_table(scan / "findings.parquet").to_pylist()
        if f["kind"] == "recovery-loses-data" and f["partition"] == 6
    ]
    assert (loss["lost_first"], loss["lost_end"], loss["position"]) == (bad.base_offset, 1200, bad.position)
    assert loss["bytes_at_risk"] == log.stat().st_size - bad.position
    lines = json.loads(loss["kafka_log_json"])
    assert (
        f"WARN Found invalid messages in log segment {log} at byte offset {bad.position}: Record is corrupt (stored crc = {bad.crc}, computed crc = "
        in "\n".join(lines)
    )
    summary = json.loads((scan / "_summary" / "broker=2.json").read_text())
    read = summary["read"]
    assert read["crc_segments"] >= 9 and read["crc_bytes"] > 0 and read["not_read_segments"] > 0
    assert read["crc_impl"] in ("libext2fs", "crc32c module", "python")
    report = (scan / "report.txt").read_text()
    assert "read whole, every batch's CRC checked:" in report and "no start reads them either" in report

    starts = start_broker(deployed, 2)
    outcome = next(p for s in starts for n, p in s.partitions.items() if n == stem.parent.name)
    assert outcome.log_end_after == bad.base_offset and outcome.lines == lines
    assert log.stat().st_size == bad.position


def test_the_simulated_restart_loads_logs_as_kafka_does_and_a_fatal_load_keeps_the_broker_down(
    damaged, tmp_path
):
    """The runtime's restart (what the repair's and the drain's restart commands call) now loads the
    broker's logs as Kafka 3.3.1 does: a missing index with a repeated offset throws at load
    ("Exiting Kafka due to fatal exception during startup"), so the broker does not come back; a
    healthy broker restarts as before."""
    import time

    from airflow_provider_kafka_zk.testing.simulator.runtime import ClusterRuntime

    deployed, _ = damaged
    deployed.plant_log_damage(2, DAMAGED, 0, "repeated_offset", drop_index=True)
    with ClusterRuntime(deployed, restart_dir=tmp_path / "restarts") as runtime:
        for broker in (1, 2):
            (tmp_path / "restarts" / f"{broker}.x.request").write_text("now")
            deadline = time.monotonic() + 60
            while not (tmp_path / "restarts" / f"{broker}.x.done").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        assert runtime.restarted == [1]
    assert deployed.cluster.brokers[1].online and not deployed.cluster.brokers[2].online
    # Kafka 3.3.1 exits through KafkaServer.shutdown: LogManager.shutdown marks every log dir clean and
    # checkpoints the recovery points of the logs it loaded only (issue 32, item 3) -- kept across syncs
    from airflow_provider_kafka_zk.kafka.logdir import OffsetCheckpoint
    from airflow_provider_kafka_zk.testing.simulator.log_recovery import start_broker

    deployed.sync()
    [log_dir] = deployed.hosts[2].log_dirs
    assert (log_dir / ".kafka_cleanshutdown").exists()
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    loaded = OffsetCheckpoint.parse(checkpoint.read_bytes(), str(checkpoint)).offsets
    assert sorted(loaded) == [("bulky", 0)]  # loaded before damaged-0 threw; the others dropped
    part = log_dir / f"{DAMAGED}-0"
    active = sorted(part.glob("*.log"))[-1]
    size = active.stat().st_size
    assert active.with_suffix(".index").stat().st_size == 10_485_760  # left by the failed rebuild
    # the next plain start skips recovery: the broker comes up with the repeated batches kept
    starts = start_broker(deployed, 2)
    assert not any(s.fatal for s in starts) and all(s.clean_shutdown for s in starts)
    assert deployed.cluster.brokers[2].online and active.stat().st_size == size
