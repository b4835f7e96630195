"""Artefacts: files that Spark jobs, people and later runs read (``<base>/<cluster>/<kind>/<ts>/``).

``<base>`` is a local directory or any fsspec URL. Every artefact is published atomically: its
files are written under temporary names and renamed, and its manifest comes last, so a directory
without a manifest is never a result.
"""

from typing import Any

_SNAPSHOT_NAMES = frozenset(
    {
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
    }
)


def __getattr__(name: str) -> Any:
    """The snapshot artefacts' names, imported from :mod:`.snapshots` when first asked for: it loads
    pyarrow, which ``artefacts.files`` / ``artefacts.store`` users (a trigger's thread in the
    triggerer, the alert task) do not need."""
    if name in _SNAPSHOT_NAMES:
        from . import snapshots

        return getattr(snapshots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
