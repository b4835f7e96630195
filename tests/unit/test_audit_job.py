"""The audit job (driver module) on artefacts written from the simulator: inputs, facts, outputs, engines."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.kafka.audit import ReplicaDir
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.kafka.logdir import DirKind
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid
from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.spark_jobs.package import build_package_zip
from airflow_provider_kafka_zk.testing.audit_artefacts import (
    INVENTORY_SCHEMA,
    write_inventory_dirs,
    write_snapshot_rows,
)
from airflow_provider_kafka_zk.testing.simulator import healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows

NOW_MS = 1_763_800_000_000
TAKEN = datetime(2026, 11, 22, 6, 0, tzinfo=UTC)


def _facts(cluster) -> dict[int, dict]:
    return {
        b: {
            "broker.id": b,
            "inter.broker.protocol.version": str(cluster.spec.ibp),
            "min.insync.replicas": cluster.spec.min_insync_replicas,
            "delete.topic.enable": True,
        }
        for b in cluster.brokers
    }


def _artefacts(tmp_path: Path, cluster, inventoried=None, previous_rows=None) -> dict[str, str]:
    base = tmp_path / "artefacts"
    name = cluster.spec.name
    previous = None
    if previous_rows is not None:
        previous = write_snapshot_rows(base, name, previous_rows, TAKEN - timedelta(days=1))
    snapshot = write_snapshot_rows(base, name, cluster_rows(cluster), TAKEN)
    live = set(cluster.online_broker_ids())
    wanted = live if inventoried is None else set(inventoried)
    facts = {b: f for b, f in _facts(cluster).items() if b in wanted}
    inventory = write_inventory_dirs(
        base,
        name,
        "20261122T060000",
        audit_dirs(cluster),
        broker_facts=facts,
        expected=sorted(cluster.brokers),
    )
    return {
        "base": str(base),
        "cluster": name,
        "snapshot": str(snapshot),
        "previous": str(previous) if previous else None,
        "inventory": str(inventory),
    }


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    return _artefacts(tmp_path_factory.mktemp("incident"), incident_cluster())


def test_inputs_build_the_facts_from_zookeeper_and_the_inventory(incident):
    inputs = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=incident["inventory"], now_ms=NOW_MS
    )
    cluster = incident_cluster()
    assert inputs.snapshot == incident["snapshot"] and inputs.previous_snapshot is None
    assert inputs.facts.live_brokers == frozenset(cluster.online_broker_ids())
    assert inputs.facts.inventoried == frozenset(cluster.online_broker_ids())
    assert inputs.facts.ibp == str(cluster.spec.ibp)
    assert inputs.facts.settings[0].min_insync_replicas == cluster.spec.min_insync_replicas
    assert inputs.facts.reassign_znode_partitions == frozenset((t, p) for t, p, _ in cluster.reassignment)
    assert inputs.coverage["status"] == "partial" and inputs.coverage["missing"] == [3, 4]
    assert (
        len(inputs.dirs)
        == inputs.replica_dirs
        == sum(1 for d in audit_dirs(cluster) if d.broker_id in inputs.facts.inventoried)
    )
    assert list(inputs.dirs) == sorted(inputs.dirs, key=lambda d: (d.broker_id, d.log_dir, d.name))
    assert sorted(inputs.broker_summaries) == sorted(inputs.facts.inventoried)


def test_the_audit_reads_no_dict_rows_and_gives_them_only_when_asked(incident, monkeypatch):
    def no_rows(*_args, **_kwargs):
        raise AssertionError("the audit's path built dict rows")

    files, _ = audit_job.inventory_files(incident["inventory"])
    rows, _, _ = audit_job.read_inventory_rows(files)
    monkeypatch.setattr(audit_job, "read_inventory_rows", no_rows)
    inputs = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=incident["inventory"], now_ms=NOW_MS
    )
    assert audit_job.run_in_process(inputs)
    monkeypatch.undo()
    assert inputs.dir_rows == rows  # read when first asked
    assert sorted(map(ReplicaDir.from_inventory_row, rows), key=_dir_key) == list(inputs.dirs)
    spark_side = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=incident["inventory"], read_rows=False
    )
    assert spark_side.dirs == () and spark_side.dir_rows == [] and spark_side.replica_dirs == len(rows)


def _dir_key(d: ReplicaDir) -> tuple:
    return (d.broker_id, d.log_dir, d.name)


GOOD_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
BAD_ID = "not*a*topic*id"
OLD_MTIME, RENAMED_CTIME = 1_763_000_000_000, 1_763_700_000_000


def _dir_row(name: str, **values) -> dict:
    row = {
        "cluster": "c",
        "inventory_ts": "t",
        "broker_id": 1,
        "host": "b1",
        "log_dir": "/data/kafka",
        "dir_name": name,
        "kind": "normal",
        "topic": name.rsplit("-", 1)[0],
        "partition": int(name.rsplit("-", 1)[1]) if name[-1].isdigit() else None,
        "mtime": datetime.fromtimestamp(OLD_MTIME / 1000, UTC),
        "partition_metadata_present": False,
        "topic_id": None,
        "log_bytes": 100,
        "total_bytes": 100,
        "errors": [],
        "ctime": datetime.fromtimestamp(RENAMED_CTIME / 1000, UTC),
    }
    return {**row, **values}


def _broker_file(path: Path, rows: list[dict], *, ctime: bool = True) -> str:
    schema = INVENTORY_SCHEMA.append(pa.field("ctime", pa.timestamp("ms", tz="UTC")))
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table if ctime else table.drop_columns(["ctime"]), path)
    return str(path)


@pytest.fixture
def odd_dirs(tmp_path) -> list[str]:
    """Two broker files with every case the rules read differently: a shared good topic id, a bad one on
    two directories, unreadable partition.metadata, kinds Kafka rejects, nulls, and a file from before
    the ``ctime`` column."""
    meta_present = {"partition_metadata_present": True}
    new = [
        _dir_row("t-1", topic_id=GOOD_ID, **meta_present),
        _dir_row("t-0", topic_id=GOOD_ID, log_bytes=None, **meta_present),
        _dir_row("u-0", topic_id=BAD_ID, **meta_present),
        _dir_row("u-1", topic_id=BAD_ID, **meta_present),
        _dir_row("v-0", errors=["/data/kafka/v-0/partition.metadata: bad version line"], **meta_present),
        _dir_row("v-1", errors=["/data/kafka/v-1/00000000000000000000.index: truncated"], **meta_present),
        _dir_row("t-2.0123456789abcdef0123456789abcdef-delete", kind="delete", topic="t", partition=2),
        _dir_row("t-3.0123456789abcdef0123456789abcdef-future", kind="future", topic="t", partition=3),
        _dir_row("lost+found", kind="unparseable", topic=None, partition=None, log_bytes=0),
        _dir_row("w-0", kind="sideways"),
        _dir_row("w-1", kind=None, log_dir=None),
    ]
    old = [
        _dir_row(
            "t-4.0123456789abcdef0123456789abcdef-delete", broker_id=0, kind="delete", topic="t", partition=4
        ),
        _dir_row("t-5", broker_id=0),
    ]
    return [
        _broker_file(tmp_path / "new.parquet", new),
        _broker_file(tmp_path / "old.parquet", old, ctime=False),
    ]


def test_directories_are_built_from_the_columns_field_by_field(odd_dirs):
    dirs, _, count = audit_job.read_inventory_dirs(odd_dirs)
    assert count == len(dirs) == 13
    by_name = {d.name: d for d in dirs}
    assert [(d.broker_id, d.name) for d in dirs][:2] == [
        (0, "t-4.0123456789abcdef0123456789abcdef-delete"),
        (0, "t-5"),
    ]  # sorted by broker, log dir, name
    good = KafkaUuid.parse(GOOD_ID)
    with pytest.raises(KafkaFormatError) as bad:
        KafkaUuid.parse(BAD_ID)
    assert BAD_ID in str(bad.value)
    assert by_name["t-0"] == ReplicaDir(
        1, "/data/kafka", "t-0", DirKind.NORMAL, "t", 0, good, True, None, 0, OLD_MTIME, RENAMED_CTIME
    )
    assert by_name["t-1"].topic_id == good and by_name["t-1"].size_bytes == 100
    for name in ("u-0", "u-1"):  # every directory with the bad id says why, in the parser's words
        assert (by_name[name].topic_id, by_name[name].metadata_error) == (None, str(bad.value))
    assert by_name["v-0"].metadata_error == "/data/kafka/v-0/partition.metadata: bad version line"
    assert by_name["v-1"].metadata_error == "partition.metadata unreadable"
    renamed = by_name["t-2.0123456789abcdef0123456789abcdef-delete"]
    assert renamed.kind is DirKind.DELETE and renamed.age_reference_ms == RENAMED_CTIME
    assert by_name["t-3.0123456789abcdef0123456789abcdef-future"].kind is DirKind.FUTURE
    assert by_name["t-3.0123456789abcdef0123456789abcdef-future"].age_reference_ms == OLD_MTIME
    assert {by_name[n].kind for n in ("lost+found", "w-0", "w-1")} == {"unparseable"}
    assert by_name["w-1"].log_dir == "" and by_name["w-1"].path == "/w-1"
    before_ctime = by_name["t-4.0123456789abcdef0123456789abcdef-delete"]  # the old file: mtime is all
    assert (before_ctime.ctime_ms, before_ctime.age_reference_ms) == (None, OLD_MTIME)
    assert by_name["t-5"].ctime_ms is None and by_name["t-5"].mtime_ms == OLD_MTIME
    # the row reader (Spark's executors, maintenance) agrees field by field, and so do the rows' ages
    rows, _, _ = audit_job.read_inventory_rows(odd_dirs)
    assert sorted(map(ReplicaDir.from_inventory_row, rows), key=_dir_key) == dirs
    assert {r["dir_name"]: r["age_reference_ms"] for r in rows} == {d.name: d.age_reference_ms for d in dirs}


def test_each_distinct_topic_id_is_parsed_once(odd_dirs, monkeypatch):
    parsed = []
    parse = KafkaUuid.parse

    def counting(text, source="Uuid"):
        parsed.append(text)
        return parse(text, source)

    monkeypatch.setattr(KafkaUuid, "parse", counting)
    dirs, _, _ = audit_job.read_inventory_dirs(odd_dirs)
    assert sorted(parsed) == sorted([GOOD_ID, BAD_ID])
    by_name = {d.name: d for d in dirs}
    assert by_name["t-0"].topic_id is by_name["t-1"].topic_id


def test_in_process_run_publishes_findings_report_and_summary(incident, tmp_path):
    out = tmp_path / "findings"
    summary = audit_job.run_audit(
        incident["base"],
        incident["cluster"],
        inventory=incident["inventory"],
        out=str(out),
        engine="in-process",
        now_ms=NOW_MS,
    )
    assert sorted(p.name for p in out.iterdir()) == ["findings.parquet", "report.html", "summary.json"]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary, default=str))
    assert on_disk["by_check"]["topic-id-mismatch"] == {"critical": 1}
    assert on_disk["by_severity"]["critical"] >= 3
    assert on_disk["coverage"]["status"] == "partial"
    assert on_disk["report"] == str(out / "report.html")
    findings = audit_job.read_findings(str(out))
    assert len(findings) == on_disk["findings"]
    assert findings[0].severity is Severity.CRITICAL  # worst first
    mismatch = next(f for f in findings if f.check == "topic-id-mismatch")
    assert mismatch.topic == "clickstream" and mismatch.evidence["replicas"]
    html = (out / "report.html").read_text()
    assert "topic-id-mismatch" in html and "Coverage PARTIAL" in html


def test_previous_snapshot_is_found_and_used(tmp_path):
    cluster = incident_cluster()
    before = healthy_cluster(name="demo")
    paths = _artefacts(tmp_path, cluster, previous_rows=cluster_rows(before))
    inputs = audit_job.load_inputs(
        paths["base"], paths["cluster"], inventory=paths["inventory"], now_ms=NOW_MS
    )
    assert inputs.previous_snapshot == paths["previous"] and inputs.previous is not None
    assert inputs.previous_absent_reason is None
    none = audit_job.load_inputs(paths["base"], paths["cluster"], previous="", now_ms=NOW_MS)
    assert none.previous is None and none.previous_snapshot is None
    assert none.previous_absent_reason.startswith("the comparison was turned off")
    first = audit_job.load_inputs(paths["base"], paths["cluster"], snapshot=paths["previous"], now_ms=NOW_MS)
    assert first.previous is None
    assert first.previous_absent_reason.startswith("no complete snapshot of demo is older than this one")


def test_missing_inputs_are_named(tmp_path):
    with pytest.raises(audit_job.AuditInputError, match="no complete snapshot of demo"):
        audit_job.load_inputs(str(tmp_path), "demo")
    paths = _artefacts(tmp_path, incident_cluster())
    with pytest.raises(audit_job.AuditInputError, match="run the broker inventory first"):
        audit_job.load_inputs(paths["base"], "demo", inventory=str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="engine must be one of"):
        audit_job.run_audit(paths["base"], "demo", engine="dask")


def test_no_temporary_files_survive_a_failed_write(tmp_path, monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(audit_job, "render_html", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        audit_job.write_findings(str(tmp_path / "out"), [], {"cluster": "c"})
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["findings.parquet"]  # no summary: incomplete


def test_package_zip_holds_the_core_and_no_airflow_layers(tmp_path):
    path = build_package_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert "airflow_provider_kafka_zk/kafka/audit.py" in names
    assert "airflow_provider_kafka_zk/spark_jobs/audit.py" in names
    assert "airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py" in names
    layers = ("/operators/", "/hooks/", "/dags/", "/testing/", "/sensors/", "/triggers/")
    assert not [n for n in names if any(layer in n for layer in layers) or n.endswith(".pyc")]
    assert [p.name for p in tmp_path.iterdir()] == ["airflow_provider_kafka_zk.zip"]


def test_driver_module_imports_no_airflow():
    code = (
        "import sys, airflow_provider_kafka_zk.spark_jobs.audit; "
        "assert not [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')], 'airflow imported'"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


RENAMED_MS = 1_795_500_000_000  # every directory's ctime (after the simulated clock's last write)


def _add_ctime(path: Path, ctime_ms: int) -> None:
    """Rewrite a broker file the way a current inventory writes it: with the ``ctime`` column."""
    table = pq.read_table(path)
    column = pa.array([ctime_ms] * table.num_rows, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    pq.write_table(table.append_column(pa.field("ctime", column.type), column), path)


def _run_with_ctime(incident, tmp_path: Path, old_brokers=(), ctime_ms: int = RENAMED_MS) -> list[str]:
    """A copy of the incident's inventory run with ctime recorded, except on ``old_brokers``."""
    run = tmp_path / "inventory"
    shutil.copytree(incident["inventory"], run)
    files, by_broker = audit_job.inventory_files(str(run))
    for broker, path in by_broker.items():
        if broker not in old_brokers:
            _add_ctime(Path(path), ctime_ms)
    return files


def _ages(rows) -> dict[tuple, tuple]:
    """mtime, ctime and the age reference the rules use (ReplicaDir: the one place that rule lives)."""
    return {
        (r["broker_id"], r["log_dir"], r["dir_name"]): (
            r["mtime_ms"],
            r["ctime_ms"],
            ReplicaDir.from_inventory_row(r).age_reference_ms,
        )
        for r in rows
    }


def test_audit_rows_count_a_delete_directorys_age_from_its_ctime(incident, tmp_path):
    files, _ = audit_job.inventory_files(incident["inventory"])
    before, _, _ = audit_job.read_inventory_rows(files)  # written before the ctime column existed
    assert {r["kind"] for r in before} >= {"delete", "normal"}
    assert all(r["ctime_ms"] is None and r["age_reference_ms"] == r["mtime_ms"] for r in before)
    renamed = max(r["mtime_ms"] for r in before) + 1_000  # after every write, and a second ago
    now = renamed + 1_000
    old_deletes = [r for r in before if r["kind"] == "delete"]
    assert len(old_deletes) == 2 and all(now - r["mtime_ms"] > 86_400_000 for r in old_deletes)

    rows, _, count = audit_job.read_inventory_rows(_run_with_ctime(incident, tmp_path, ctime_ms=renamed))
    assert count == len(rows) == len(before)
    for row in rows:
        assert row["ctime_ms"] == renamed
        if row["kind"] == "delete":  # renamed a second ago, whatever its (two days old) mtime says
            assert row["age_reference_ms"] == renamed and now - row["age_reference_ms"] < 60_000
        else:
            assert row["age_reference_ms"] == row["mtime_ms"]
    assert {k: v[0] for k, v in _ages(rows).items()} == {k: v[0] for k, v in _ages(before).items()}
    assert all(row["age_reference_ms"] == ReplicaDir.from_inventory_row(row).age_reference_ms for row in rows)


def _delete_dir_findings(incident, tmp_path, files, now_ms):
    """The audit's delete-dirs-past-delay findings for the inventory ``files`` (a copy of the run)."""
    inputs = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=str(Path(files[0]).parents[1]), now_ms=now_ms
    )
    return [f for f in audit_job.run_in_process(inputs) if f.check == "delete-dirs-past-delay"]


def test_a_delete_directory_renamed_seconds_ago_is_not_past_the_delay(incident, tmp_path):
    """The 3.3.1 false alarm: Kafka renamed the directory a second ago but its mtime (which a rename
    keeps) is two days old; its age must come from the ctime."""
    files, _ = audit_job.inventory_files(incident["inventory"])
    before, _, _ = audit_job.read_inventory_rows(files)
    # two minutes after the last write: the brokers (registered as the model started) have been up past
    # their first kafka-delete-logs run (30 s after the start) and the margin
    renamed = max(r["mtime_ms"] for r in before) + 120_000
    fresh = _run_with_ctime(incident, tmp_path / "fresh", ctime_ms=renamed)
    assert _delete_dir_findings(incident, tmp_path, fresh, now_ms=renamed + 1_000) == []
    # the same directories, found two days after the rename: past log.segment.delete.delay.ms
    later = _delete_dir_findings(incident, tmp_path, fresh, now_ms=renamed + 2 * 86_400_000)
    assert later and all("oldest 48.0 h" in f.summary for f in later)
    # an inventory from before the ctime column: the mtime is all there is (the old behaviour)
    old = _run_with_ctime(incident, tmp_path / "old", old_brokers=set(range(6)), ctime_ms=renamed)
    assert _delete_dir_findings(incident, tmp_path, old, now_ms=renamed + 1_000)


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("test_audit_job")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from an atexit hook, after pytest closed its
    # capture streams ("--- Logging error ---"); that message is noise, not a failure.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.mark.parametrize("scenario", ["incident", "incident-partial", "healthy-with-previous"])
def test_spark_and_in_process_engines_give_identical_findings(spark, tmp_path, scenario):
    if scenario == "healthy-with-previous":
        cluster = healthy_cluster()
        paths = _artefacts(tmp_path, cluster, previous_rows=cluster_rows(healthy_cluster(seed=3)))
    else:
        cluster = incident_cluster()
        paths = _artefacts(
            tmp_path, cluster, inventoried={0, 1, 5} if scenario == "incident-partial" else None
        )
    inputs = audit_job.load_inputs(
        paths["base"], paths["cluster"], inventory=paths["inventory"], now_ms=NOW_MS
    )
    in_process = audit_job.run_in_process(inputs)
    on_spark = audit_job.run_spark(inputs, spark)
    assert in_process  # something to compare
    assert [f.to_row() for f in on_spark] == [f.to_row() for f in in_process]


def test_spark_rows_carry_the_same_ages_across_old_and_new_files(spark, incident, tmp_path):
    # one file of the run predates the ctime column: broker 2's (its -delete directories count from
    # mtime), then broker 0's (broker 2's count from their rename)
    for old, delete_age_from in ((2, "mtime"), (0, "ctime")):
        files = _run_with_ctime(incident, tmp_path / f"old-{old}", old_brokers={old})
        rows, _, _ = audit_job.read_inventory_rows(files)
        expected = _ages(r for r in rows if r["topic"] is not None)
        on_spark = _ages(r.asDict() for r in audit_job.inventory_dataframe(spark, files).collect())
        assert on_spark == expected
        assert {v[1] for k, v in expected.items() if k[0] == old} == {None}
        assert {v[1] for k, v in expected.items() if k[0] != old} == {RENAMED_MS}
        deletes = [(m, a) for r in rows if r["kind"] == "delete" for m, _, a in [_ages([r]).popitem()[1]]]
        assert len(deletes) == 2
        assert all(a == (m if delete_age_from == "mtime" else RENAMED_MS) for m, a in deletes)


def _legacy_copy(run: str, tmp_path: Path) -> Path:
    """The run as inventories wrote it before partition directories: flat ``broker=<id>.parquet``."""
    legacy = tmp_path / "legacy-run"
    shutil.copytree(run, legacy)
    for part in sorted(legacy.glob("broker=*/part-0.parquet")):
        part.rename(legacy / f"{part.parent.name}.parquet")
        part.parent.rmdir()
    return legacy


def test_a_run_in_the_earlier_flat_layout_audits_the_same_on_both_engines(spark, incident, tmp_path):
    """Runs written before ``broker=<id>/`` directories stay readable (later audits compare with
    them): the same files, the same findings in process and on Spark; the current layout is read by
    Spark's own partition discovery over the run directory (its ``broker`` column)."""
    legacy = _legacy_copy(incident["inventory"], tmp_path)
    files, by_broker = audit_job.inventory_files(str(legacy))
    assert files and all(Path(f).parent == legacy for f in files)
    assert sorted(by_broker) == sorted(audit_job.inventory_files(incident["inventory"])[1])
    current = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=incident["inventory"], now_ms=NOW_MS
    )
    earlier = audit_job.load_inputs(
        incident["base"], incident["cluster"], inventory=str(legacy), now_ms=NOW_MS
    )
    expected = [f.to_row() for f in audit_job.run_in_process(current)]
    assert expected and [f.to_row() for f in audit_job.run_in_process(earlier)] == expected
    assert [f.to_row() for f in audit_job.run_spark(earlier, spark)] == expected
    assert [f.to_row() for f in audit_job.run_spark(current, spark)] == expected

    discovered = spark.read.parquet(incident["inventory"])  # what inventory_dataframe reads
    pairs = {(r["broker"], r["broker_id"]) for r in discovered.select("broker", "broker_id").collect()}
    assert pairs == {(b, b) for b in by_broker}
    frame = audit_job.inventory_dataframe(spark, current.inventory_files, current.inventory)
    assert (
        frame.count()
        == audit_job.inventory_dataframe(spark, earlier.inventory_files, earlier.inventory).count()
    )
