"""Artefacts: files that Spark jobs, people and later runs read (``<base>/<cluster>/<kind>/<ts>/``).

``<base>`` is a local directory or any fsspec URL. Every artefact is published atomically: its
files are written under temporary names and renamed, and its manifest comes last, so a directory
without a manifest is never a result.
"""

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
