"""The inventory layout's one reader: ``broker=<id>/`` partition directories (pyarrow's Hive
discovery), runs of the earlier flat ``broker=<id>.parquet`` layout, and typed errors naming the file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_kafka_zk.artefacts.inventory_layout import (
    InventoryLayoutError,
    broker_file,
    list_inventory,
    read_broker_tables,
)


def _table(broker: int) -> pa.Table:
    return pa.table({"broker_id": pa.array([broker, broker], pa.int32()), "dir_name": ["a-0", "b-1"]})


def _run(tmp_path, brokers, *, legacy=()):
    run = tmp_path / "inventory" / "20261125T000000.000000Z"
    for b in brokers:
        (run / broker_file(b)).parent.mkdir(parents=True)
        pq.write_table(_table(b), run / broker_file(b))
    run.mkdir(parents=True, exist_ok=True)
    for b in legacy:
        pq.write_table(_table(b), run / f"broker={b}.parquet")
    (run / "_logdirs").mkdir()
    pq.write_table(_table(0), run / "_logdirs" / "broker=0.parquet")
    (run / "_coverage.json").write_text("{}")
    (run / f"broker={brokers[0] if brokers else 9}").mkdir(exist_ok=True)
    (run / f"broker={brokers[0] if brokers else 9}" / ".part-0.parquet.123.tmp").write_bytes(b"half")
    return run


def test_partition_directories_are_found_by_hive_discovery(tmp_path):
    run = _run(tmp_path, [0, 2, 11])
    assert broker_file(2) == "broker=2/part-0.parquet"
    for url in (str(run), f"file://{run}"):
        found = list_inventory(url)
        assert found.brokers == [0, 2, 11] and not found.legacy  # no _logdirs, _coverage, temp file
        assert found.files[11] == str(run / "broker=11" / "part-0.parquet")
    tables = list(read_broker_tables(str(run), ["broker_id"]))
    assert [(b, t.column("broker_id").to_pylist()) for b, _, t in tables] == [(b, [b, b]) for b in (0, 2, 11)]


def test_runs_of_the_earlier_flat_layout_are_read(tmp_path):
    run = _run(tmp_path, [], legacy=[1, 3])
    found = list_inventory(str(run))
    assert found.legacy and found.brokers == [1, 3]
    assert found.files[3] == str(run / "broker=3.parquet")
    assert [b for b, _, _ in read_broker_tables(str(run), ["dir_name"])] == [1, 3]


def test_an_absent_run_is_empty(tmp_path):
    assert list_inventory(str(tmp_path / "nothing")).files == {}


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda run: (run / "broker=x").mkdir(), "broker=x"),
        (lambda run: (run / "broker=x.parquet").write_bytes(b"PAR1"), "broker=x.parquet"),
        (lambda run: (run / "stray.parquet").write_bytes(b"PAR1"), "stray.parquet"),
        (lambda run: pq.write_table(_table(2), run / "broker=2.parquet"), "broker 2 has two inventory files"),
    ],
)
def test_a_misnamed_broker_file_is_a_typed_error_naming_it(tmp_path, make, named):
    run = _run(tmp_path, [0, 2])
    if named == "broker=x":  # a directory needs a file for the discovery to look at it
        make(run)
        pq.write_table(_table(0), run / "broker=x" / "part-0.parquet")
    else:
        make(run)
    with pytest.raises(InventoryLayoutError, match=named.replace(".", r"\.")) as raised:
        list_inventory(str(run))
    assert "broker=0" not in str(raised.value)  # only the culprit is named
