"""Artefacts: files that Spark jobs, people and later runs read (``<base>/<cluster>/<kind>/<ts>/``).

``<base>`` is a local directory or any fsspec URL. Every artefact is published atomically: its
files are written under temporary names and renamed, and its manifest comes last, so a directory
without a manifest is never a result.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .snapshots import (
        MANIFEST_FILE,
        PARQUET_SCHEMA,
        ZNODES_FILE,
        SnapshotArtefactError,
        SnapshotIntegrityError,
        SnapshotNotFoundError,
        SnapshotRef,
        apply_retention,
        latest_snapshot,
        list_snapshots,
        previous_snapshot,
        read_manifest,
        read_snapshot,
        read_snapshot_table,
        write_snapshot,
    )

__all__ = [
    "MANIFEST_FILE",
    "PARQUET_SCHEMA",
    "ZNODES_FILE",
    "SnapshotArtefactError",
    "SnapshotIntegrityError",
    "SnapshotNotFoundError",
    "SnapshotRef",
    "apply_retention",
    "latest_snapshot",
    "list_snapshots",
    "previous_snapshot",
    "read_manifest",
    "read_snapshot",
    "read_snapshot_table",
    "write_snapshot",
]


def __getattr__(name: str) -> Any:
    """The snapshot names on first use: importing a light module of this package (``files``,
    ``object_storage``, ``store``) must not import pyarrow (a task that never reads a snapshot)."""
    if name in __all__:
        from . import snapshots

        return getattr(snapshots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
