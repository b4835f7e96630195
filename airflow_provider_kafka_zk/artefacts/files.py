"""The one way artefacts are written: to a temporary name in the same directory, then renamed, so
a reader (a person, Spark, a later run) never sees half a file. Local files are fsynced first;
on object stores the object appears whole when the move (copy) completes."""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem


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
    temp = posixpath.join(parent, f".{posixpath.basename(final)}.{uuid.uuid4().hex}.tmp")
    try:
        if isinstance(fs, LocalFileSystem):
            with open(temp, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, final)
        else:
            with fs.open(temp, "wb") as handle:
                write(handle)
            fs.mv(temp, final)
    except BaseException:
        if fs.exists(temp):
            fs.rm(temp)
        raise
    return final


def write_url_atomically(url: str, payload: bytes, storage_options: Mapping[str, Any] | None = None) -> str:
    """:func:`write_atomically` for a local path or fsspec URL; returns the path on that filesystem."""
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    return write_atomically(fs, path, payload)
