"""Is the artefact store usable? Checked before any mutation, so rollback artefacts can be written.

:func:`check_store_writable` writes a probe file under the store URL (creating the directory),
reads it back, compares the bytes and deletes it; on a local filesystem it also checks the free
space. :func:`write_and_verify` writes an artefact with the one atomic writer
(:func:`~airflow_provider_kafka_zk.artefacts.files.write_atomically`) and reads it back. Both raise
:class:`ArtefactStoreError` naming the URL and the cause, never a bare library exception.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import posixpath
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from .files import display_url, write_atomically

log = logging.getLogger(__name__)

DEFAULT_MIN_FREE_BYTES = 64 * 1024**2
PROBE_PREFIX = ".kafka-zk-store-probe-"

#: ``ArtefactStoreError.reason`` values and how the message words them.
REASONS = {
    "read_only": "read-only filesystem",
    "permission_denied": "permission denied",
    "no_space": "no space left",
    "not_a_directory": "not a directory (a file is in the way)",
    "mismatch": "what was read back differs from what was written",
    "unreachable": "the store could not be reached",
    "error": "the store failed",
}

_ERRNO_REASONS = {
    errno.EROFS: "read_only",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.ENOTDIR: "not_a_directory",
    errno.EEXIST: "not_a_directory",  # makedirs over a file
    errno.EISDIR: "not_a_directory",
}


class ArtefactStoreError(OSError):
    """The artefact store at ``url`` cannot be trusted with artefacts; ``reason`` is a key of REASONS."""

    def __init__(self, url: str, reason: str, detail: str = "") -> None:
        self.url = url
        self.reason = reason
        self.detail = detail
        text = f"artefact store {url}: {REASONS.get(reason, reason)}"
        super().__init__(f"{text} ({detail})" if detail else text)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (XCom, subprocesses) despite the signature
        return (type(self), (self.url, self.reason, self.detail))


@dataclass(frozen=True)
class StoreCheck:
    """What :func:`check_store_writable` found. ``free_bytes`` is None on remote stores."""

    url: str
    local: bool
    probe_bytes: int
    free_bytes: int | None
    min_free_bytes: int
    free_space: str
    probe_deleted: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return "permission_denied"
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return "not_a_directory"
    if isinstance(exc, OSError) and exc.errno in _ERRNO_REASONS:
        return _ERRNO_REASONS[exc.errno]
    if isinstance(exc, ConnectionError | TimeoutError):
        return "unreachable"
    return "error"


def _wrap(url: str, exc: BaseException, doing: str) -> ArtefactStoreError:
    if isinstance(exc, ArtefactStoreError):
        return exc
    return ArtefactStoreError(url, _reason(exc), f"{doing}: {type(exc).__name__}: {exc}")


def _fs(url: str, storage_options: Mapping[str, Any] | None) -> tuple[AbstractFileSystem, str]:
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except Exception as exc:
        raise _wrap(url, exc, "opening the store") from exc
    return fs, path.rstrip("/") or "/"


def _read_back(url: str, fs: AbstractFileSystem, path: str, payload: bytes) -> None:
    try:
        found = fs.cat_file(path)
    except Exception as exc:
        raise _wrap(url, exc, f"reading back {display_url(fs, path)}") from exc
    if found != payload:
        raise ArtefactStoreError(
            url,
            "mismatch",
            f"read back {display_url(fs, path)}: {len(found)} bytes, sha256 {hashlib.sha256(found).hexdigest()[:16]}; "
            f"wrote {len(payload)} bytes, sha256 {hashlib.sha256(payload).hexdigest()[:16]}",
        )


def check_store_writable(
    url: str,
    *,
    min_free_bytes: int = DEFAULT_MIN_FREE_BYTES,
    storage_options: Mapping[str, Any] | None = None,
) -> StoreCheck:
    """Prove that artefacts can be written under ``url`` now; raises :class:`ArtefactStoreError`.

    Creates the directory, checks the local free space (>= ``min_free_bytes``; unknown, and not a
    failure, on a remote fsspec store), writes a probe file with the atomic writer, reads it back,
    compares the bytes and deletes it (a probe that cannot be deleted is logged, not fatal).
    """
    fs, root = _fs(url, storage_options)
    local = isinstance(fs, LocalFileSystem)
    try:
        fs.makedirs(root, exist_ok=True)
        if not fs.isdir(root):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", root)
    except Exception as exc:
        raise _wrap(url, exc, f"creating {root}") from exc

    free_bytes: int | None = None
    if local:
        try:
            free_bytes = shutil.disk_usage(root).free
        except OSError as exc:
            raise _wrap(url, exc, "reading the free space") from exc
        if free_bytes < min_free_bytes:
            raise ArtefactStoreError(
                url, "no_space", f"{free_bytes} bytes free, at least {min_free_bytes} required"
            )
        free_space = f"{free_bytes} bytes free (>= {min_free_bytes} required)"
    else:
        free_space = f"unknown (remote store {fs.protocol!r}: free space is not checked)"

    probe = posixpath.join(root, f"{PROBE_PREFIX}{uuid.uuid4().hex}")
    payload = b"kafka-zk artefact store probe\n" + os.urandom(32)
    try:
        try:
            write_atomically(fs, probe, payload)
        except Exception as exc:
            raise _wrap(url, exc, f"writing {display_url(fs, probe)}") from exc
        _read_back(url, fs, probe, payload)
    finally:
        deleted = _remove(fs, probe)
    return StoreCheck(
        url=url,
        local=local,
        probe_bytes=len(payload),
        free_bytes=free_bytes,
        min_free_bytes=min_free_bytes,
        free_space=free_space,
        probe_deleted=deleted,
    )


def _remove(fs: AbstractFileSystem, path: str) -> bool:
    try:
        if fs.exists(path):
            fs.rm(path)
        return True
    except Exception as exc:
        log.warning(
            "Could not delete the store probe %s: %s: %s", display_url(fs, path), type(exc).__name__, exc
        )
        return False


def write_and_verify(url: str, payload: bytes, *, storage_options: Mapping[str, Any] | None = None) -> str:
    """Write ``payload`` to the file ``url`` atomically, read it back and compare; returns ``url``'s
    location (a local path, or the fsspec URL). Raises :class:`ArtefactStoreError` on any failure."""
    fs, path = _fs(url, storage_options)
    try:
        write_atomically(fs, path, payload)
    except Exception as exc:
        raise _wrap(url, exc, f"writing {display_url(fs, path)}") from exc
    _read_back(url, fs, path, payload)
    return display_url(fs, path)
