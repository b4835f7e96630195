"""Where an inventory run keeps each broker's rows, and the one reader of that layout.

``<base>/<cluster>/inventory/<ts>/broker=<id>/part-0.parquet``: a Hive-style partition column
``broker``, so pyarrow's dataset discovery (here) and Spark's own partition discovery (the audit
job reads the run directory) both get the broker from the directory name; names starting with
``_`` or ``.`` (``_logdirs/``, ``_failures/``, ``_coverage.json``, temporary files) are skipped by
both. Runs written before this layout hold flat ``broker=<id>.parquet`` files; they are still read
(audits compare a run with earlier days' runs), by the same function.

No Airflow here: the Spark jobs import it on the executors' side of the py_files archive.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import fsspec
import pyarrow as pa

from .files import display_url

if TYPE_CHECKING:
    import pyarrow.dataset as ds

PARTITION_COLUMN = "broker"
PART_FILE = "part-0.parquet"


@cache
def hive_partitioning() -> ds.Partitioning:
    """``broker=<id>`` directories; an id that is not a whole number fails the discovery.

    Made when first needed: ``pyarrow.dataset`` loads pandas (about 0.4 s of CPU), which every task
    process of a DAG importing this module would pay for at parse time otherwise.
    """
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([(PARTITION_COLUMN, pa.int32())]), flavor="hive")


_LEGACY_PREFIX, _LEGACY_SUFFIX = f"{PARTITION_COLUMN}=", ".parquet"


class InventoryLayoutError(ValueError):
    """An inventory run holds a broker file or directory whose name carries no broker id (named)."""


def broker_file(broker_id: int) -> str:
    """The path of a broker's rows, relative to the run directory.

    :param broker_id: the broker.
    """
    return f"{PARTITION_COLUMN}={int(broker_id)}/{PART_FILE}"


def legacy_broker_id(name: str) -> int | None:
    """The broker of a flat ``broker=<id>.parquet`` (the layout before partition directories), else
    None; InventoryLayoutError naming ``name`` when it has that shape without a whole number.

    :param name: a file's base name.
    """
    if not (name.startswith(_LEGACY_PREFIX) and name.endswith(_LEGACY_SUFFIX)):
        return None
    number = name[len(_LEGACY_PREFIX) : -len(_LEGACY_SUFFIX)]
    if _not_an_id(f"{_LEGACY_PREFIX}{number}"):
        raise InventoryLayoutError(
            f"inventory file name carries no broker id ({number!r} is not a whole number)"
        )
    return int(number)


def is_legacy_file(url: str) -> bool:
    """Whether a broker file is a flat ``broker=<id>.parquet`` (the earlier layout).

    :param url: a broker file's path or URL, as :func:`list_inventory` gives it.
    """
    return not posixpath.basename(posixpath.dirname(url)).startswith(_LEGACY_PREFIX)


def _not_an_id(name: str) -> bool:
    """``broker=<something>`` where the something is no whole number."""
    if not name.startswith(_LEGACY_PREFIX):
        return False
    number = name[len(_LEGACY_PREFIX) :]
    digits = number[1:] if number.startswith("-") else number
    return not (digits.isascii() and digits.isdigit())


@dataclass(frozen=True)
class InventoryRun:
    """The broker files of one inventory run.

    :param url: the run directory (a local path or fsspec URL).
    :param files: broker id -> its file's URL (sorted by broker).
    :param legacy: the run holds flat ``broker=<id>.parquet`` files (the earlier layout).
    """

    url: str
    files: dict[int, str]
    legacy: bool

    @property
    def brokers(self) -> list[int]:
        return sorted(self.files)


def _fragments(
    url: str, fs: fsspec.AbstractFileSystem | None = None
) -> Iterator[tuple[int, str, ds.ParquetFileFragment]]:
    """(broker id, file URL, fragment) per broker file of the run, either layout; none when absent."""
    if fs is None:
        fs, root = fsspec.core.url_to_fs(url)
    else:
        root = fs._strip_protocol(url)
    root = root.rstrip("/") or "/"
    if not fs.exists(root):
        return
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(
            root,
            filesystem=fs,
            format="parquet",
            schema=pa.schema([(PARTITION_COLUMN, pa.int32())]),  # no file is opened to list them
            partitioning=hive_partitioning(),
            exclude_invalid_files=False,
            ignore_prefixes=[".", "_"],
        )
    except pa.ArrowInvalid as exc:  # e.g. broker=x/: name the directory
        bad = [
            display_url(fs, p)
            for p in fs.ls(root, detail=False)
            if _not_an_id(posixpath.basename(p.rstrip("/"))) and fs.isdir(p)
        ]
        raise InventoryLayoutError(
            f"{', '.join(bad) or url}: an inventory partition directory carries no broker id ({exc})"
        ) from None
    for fragment in dataset.get_fragments():
        path = fragment.path
        keys = ds.get_partition_keys(fragment.partition_expression)
        if PARTITION_COLUMN in keys:
            yield int(keys[PARTITION_COLUMN]), display_url(fs, path), fragment
            continue
        relative = posixpath.relpath(path, root)
        try:
            broker = legacy_broker_id(relative) if "/" not in relative else None
        except InventoryLayoutError as exc:
            raise InventoryLayoutError(f"{display_url(fs, path)}: {exc}") from None
        if broker is None:
            raise InventoryLayoutError(
                f"{display_url(fs, path)}: not an inventory broker file (expected broker=<id>/{PART_FILE} or "
                f"{_LEGACY_PREFIX}<id>{_LEGACY_SUFFIX} under {url})"
            )
        yield broker, display_url(fs, path), fragment


def list_inventory(url: str, fs: fsspec.AbstractFileSystem | None = None) -> InventoryRun:
    """The broker files of the run at ``url`` (empty when the run does not exist).

    InventoryLayoutError naming the file or directory whose name carries no broker id, and when a
    broker has two files (both layouts in one run).

    :param url: ``<base>/<cluster>/inventory/<ts>`` (local path or fsspec URL).
    :param fs: the filesystem holding it, when not the URL's default one (e.g. configured from an
        Airflow connection).
    """
    files: dict[int, str] = {}
    legacy = False
    for broker, path, _ in _fragments(url, fs):
        if broker in files:
            raise InventoryLayoutError(
                f"{url}: broker {broker} has two inventory files: {files[broker]}, {path}"
            )
        files[broker] = path
        legacy |= is_legacy_file(path)
    return InventoryRun(url, dict(sorted(files.items())), legacy)


def read_broker_tables(url: str, columns: list[str]) -> Iterator[tuple[int, str, pa.Table]]:
    """(broker id, file URL, table of ``columns``) per broker file of the run, sorted by broker.

    InventoryLayoutError for a misnamed file; a file that is no readable Parquet or lacks a
    column raises pyarrow's error (callers name the file with the URL given first).

    :param url: the run directory.
    :param columns: the columns to read.
    """
    fs, _ = fsspec.core.url_to_fs(url)
    for broker, path in list_inventory(url).files.items():
        yield broker, path, _read(fs, path, columns)


def _read(fs: fsspec.AbstractFileSystem, url: str, columns: list[str]) -> pa.Table:
    import pyarrow.parquet as pq

    _, path = fsspec.core.url_to_fs(url)
    with fs.open(path, "rb") as handle:
        return pq.read_table(handle, columns=columns)
