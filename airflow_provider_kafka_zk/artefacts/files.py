"""The one way artefacts are written, so a reader (a person, Spark, a later run) never sees half a
file: on a local (or mounted) filesystem, to a temporary name in the same directory, fsynced, then
``os.replace``d; on a remote filesystem with an atomic rename (SFTP: OpenSSH's posix-rename
extension), to a temporary name then renamed there, since its writes go straight to disk; on an object store, straight to the final key, since an object only appears once its
upload (one put, or a multipart upload's completion on close) succeeds -- a temporary object and a
move would cost a copy and leave a window with two. Where a set of files counts only once its
manifest exists (snapshots), the manifest is written last."""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

_RENAMING_FILESYSTEMS = ("sshfs.", "fsspec.implementations.sftp")
"""Modules of remote filesystems whose writes land in place (a reader could see half a file) and whose
``mv`` is an atomic rename (SFTP's posix-rename@openssh.com): there a temporary name and a rename."""


def display_url(fs: AbstractFileSystem, path: str) -> str:
    """How messages name ``path`` on ``fs``: a plain path locally, a URL with its protocol elsewhere."""
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


def renames_atomically(fs: AbstractFileSystem) -> bool:
    """True for a remote filesystem written through a temporary name and a rename (SFTP)."""
    return any((cls.__module__ + ".").startswith(_RENAMING_FILESYSTEMS) for cls in type(fs).__mro__)


def write_atomically(fs: AbstractFileSystem, final: str, payload: bytes | Callable[[BinaryIO], None]) -> str:
    """Write ``payload`` to ``final`` on ``fs`` (parents created); returns ``final``.

    :param fs: the filesystem (local or fsspec).
    :param final: the path the file gets once complete.
    :param payload: the bytes, or a function that writes the file piece by piece into the open
        temporary file (a large file never held whole in memory).
    """
    write = payload if callable(payload) else (lambda handle: handle.write(payload))
    parent = posixpath.dirname(final)
    fs.makedirs(parent, exist_ok=True)
    if renames_atomically(fs):
        temp = posixpath.join(parent, f".{posixpath.basename(final)}.{uuid.uuid4().hex}.tmp")
        try:
            with fs.open(temp, "wb") as handle:
                write(handle)
            fs.mv(temp, final)  # sshfs and fsspec's sftp: posix-rename, replacing ``final`` at once
        except BaseException:
            if fs.exists(temp):
                fs.rm(temp)
            raise
        return final
    if not isinstance(fs, LocalFileSystem):
        if not callable(payload):
            fs.pipe_file(final, payload)  # one put
            return final
        # fsspec's two-step write (as its transactions do): parts uploaded as they fill, the object
        # made only by commit() (S3: CompleteMultipartUpload); a failed write is discarded (aborted)
        existed = fs.exists(final)
        handle = fs.open(final, "wb", autocommit=False)
        try:
            try:
                write(handle)
            finally:
                handle.close()
        except BaseException:
            handle.discard()
            if not existed and fs.exists(final):  # a store that writes through (fsspec's memory://)
                fs.rm(final)
            raise
        handle.commit()
        return final
    temp = posixpath.join(parent, f".{posixpath.basename(final)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return final


def write_url_atomically(url: str, payload: bytes, storage_options: Mapping[str, Any] | None = None) -> str:
    """:func:`write_atomically` for a local path or fsspec URL; returns the path on that filesystem."""
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    return write_atomically(fs, path, payload)


_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def validate_cluster_name(cluster: str) -> str:
    """A cluster name is one path component: letters, digits, ``.``, ``_``, ``-`` (no ``..``)."""
    if not isinstance(cluster, str) or not _CLUSTER_NAME.fullmatch(cluster) or ".." in cluster:
        raise ValueError(
            f"cluster name {cluster!r} must be 1-200 characters of letters, digits, '.', '_', '-' "
            "(it becomes a directory name)"
        )
    return cluster
