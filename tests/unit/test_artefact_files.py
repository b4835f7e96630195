"""The one atomic writer (local: temporary name, fsync, os.replace; object stores: the final key
written once, no temporary object) and the artefacts base resolved through ObjectStoragePath."""

from __future__ import annotations

import json
import uuid

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_kafka_zk.artefacts.files import write_atomically, write_url_atomically
from airflow_provider_kafka_zk.artefacts.object_storage import (
    BINDING_FILE_ENV,
    ArtefactsStore,
    ArtefactsStoreBindingError,
    artefacts_fs,
    artefacts_path,
    bind_from_environment,
    is_bound,
    resolve_artefacts,
    write_binding_file,
)
from airflow_provider_kafka_zk.operators.inventory import (
    InventoryLocation,
    inventory_coverage,
)
from airflow_provider_kafka_zk.operators.inventory import (
    write_atomically as write_inventory_file,
)


class Boom(RuntimeError):
    pass


def _failing(handle):
    handle.write(b"half of it")
    raise Boom


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_local_writes_replace_the_file_whole_and_leave_no_temporary(tmp_path, form):
    final = tmp_path / "run" / "summary.json"
    url = str(final) if form == "path" else f"file://{final}"
    assert write_url_atomically(url, b"one") == str(final)
    assert final.read_bytes() == b"one"
    fs = LocalFileSystem()
    seen = []

    def streaming(handle):
        handle.write(b"two")
        seen.extend(p.name for p in final.parent.iterdir())

    write_atomically(fs, str(final), streaming)
    assert final.read_bytes() == b"two"
    assert [n for n in seen if n != "summary.json"] and all(
        n.endswith(".tmp") for n in seen if n != "summary.json"
    )
    with pytest.raises(Boom):
        write_atomically(fs, str(final), _failing)
    assert final.read_bytes() == b"two"  # a failed write leaves the last complete file
    assert [p.name for p in final.parent.iterdir()] == ["summary.json"]


def test_on_an_object_store_the_final_key_is_written_once_without_a_temporary_object():
    fs = fsspec.filesystem("memory")
    root = f"/store-{uuid.uuid4().hex}/run"
    seen = []

    def streaming(handle):
        handle.write(b"rows")
        seen.extend(fs.ls(root, detail=False))

    assert write_atomically(fs, f"{root}/part-0.parquet", streaming) == f"{root}/part-0.parquet"
    assert fs.cat_file(f"{root}/part-0.parquet") == b"rows"
    assert all(not p.rsplit("/", 1)[1].startswith(".") for p in seen)  # never a temporary object
    with pytest.raises(Boom):  # a failed upload is discarded: no object, not even a partial one
        write_atomically(fs, f"{root}/other.parquet", _failing)
    assert not fs.exists(f"{root}/other.parquet")
    write_atomically(fs, f"{root}/manifest.json", b"{}")  # one put
    assert sorted(fs.ls(root, detail=False)) == [f"{root}/manifest.json", f"{root}/part-0.parquet"]


def test_the_artefacts_base_resolves_through_object_storage_path(tmp_path):
    for base in (str(tmp_path / "a"), f"file://{tmp_path}/a"):
        path = artefacts_path(base, conn_id="ignored_by_local_paths")
        assert type(path).__name__ == "ObjectStoragePath"
        fs, root, url = artefacts_fs(base, conn_id="ignored_by_local_paths")
        assert isinstance(fs, LocalFileSystem) and root == url == str(tmp_path / "a")


def test_the_inventory_writes_and_lists_through_the_resolved_store(tmp_path):
    location = InventoryLocation(f"file://{tmp_path}/base", "prod", "20261125T000000.000000Z", conn_id=None)
    assert location.url == str(tmp_path / "base" / "prod" / "inventory" / "20261125T000000.000000Z")
    import pyarrow as pa
    import pyarrow.parquet as pq

    for broker in (1, 4):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"broker_id": [broker]}), sink)
        write_inventory_file(location, location.broker_file(broker), sink.getvalue().to_pybytes())
    write_inventory_file(
        location, location.failure_file(2), json.dumps({"error_type": "X", "message": "m"}).encode()
    )
    coverage = inventory_coverage(location, [1, 2, 4])
    assert coverage.to_dict()["inventoried"] == [1, 4]
    assert (
        tmp_path / "base" / "prod" / "inventory" / "20261125T000000.000000Z" / "broker=4" / "part-0.parquet"
    ).is_file()


def test_a_store_airflow_has_no_filesystem_for(tmp_path):
    """memory:// has no Airflow provider: without a connection fsspec's own filesystem serves it
    (default credentials, as before ObjectStoragePath); with one, the error names what to install."""
    base = f"memory://store-{uuid.uuid4().hex}/artefacts"
    fs, root, url = artefacts_fs(base)
    assert type(fs).__name__ == "MemoryFileSystem" and root.endswith("/artefacts")
    assert url.startswith("memory://") and fsspec.core.url_to_fs(url)[1] == root
    with pytest.raises(ValueError, match=r"connection 'aws_artefacts'.*install the store's provider"):
        artefacts_fs(base, conn_id="aws_artefacts")


def test_a_binding_travels_to_a_job_as_a_private_file_and_binds_its_fsspec(tmp_path):
    """What the Spark submit hands the job: the store's class and options in a 0600 file; the job
    (no Airflow) binds its fsspec from it, so plain URLs of that protocol reach the same store."""
    protocol = f"kzktest{uuid.uuid4().hex[:8]}"
    binding = {
        "protocol": protocol,
        "fs_class": "fsspec.implementations.memory.MemoryFileSystem",
        "netloc": "",
        "options": {"secret_option": "s3cr3t"},
    }
    store = ArtefactsStore(LocalFileSystem(), "/", f"{protocol}://bucket", binding)
    assert "s3cr3t" not in repr(store)
    path = write_binding_file(store, str(tmp_path))
    assert path is not None and (tmp_path / "artefacts-store.json").stat().st_mode & 0o777 == 0o600
    assert not is_bound(f"{protocol}://bucket/x")
    assert bind_from_environment({BINDING_FILE_ENV: path}) is True
    assert is_bound(f"{protocol}://bucket/x")
    fs, _ = fsspec.core.url_to_fs(f"{protocol}://bucket/x")
    assert isinstance(fs, fsspec.implementations.memory.MemoryFileSystem)
    assert fs.storage_options["secret_option"] == "s3cr3t"  # the connection's options, as defaults
    assert bind_from_environment({}) is False
    unreadable = ArtefactsStore(LocalFileSystem(), "/", "x://y", {**binding, "options": {"o": object()}})
    with pytest.raises(ArtefactsStoreBindingError, match="not plain data"):
        write_binding_file(unreadable, str(tmp_path / "other"))
    with pytest.raises(ArtefactsStoreBindingError, match=r"missing\.json") as caught:
        bind_from_environment({BINDING_FILE_ENV: str(tmp_path / "missing.json")})
    assert "s3cr3t" not in str(caught.value)


def test_a_local_base_binds_nothing(tmp_path):
    store = resolve_artefacts(str(tmp_path / "a"), "ignored_by_local_paths")
    assert store.binding is None and store.url == str(tmp_path / "a")
    assert write_binding_file(store, str(tmp_path)) is None
