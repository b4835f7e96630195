"""The artefacts base as Airflow's ``ObjectStoragePath``: a local path, ``file://``, or a remote store
URL (``s3://bucket/prefix``, ``sftp://host/dir``) with the Airflow connection that holds its
credentials.

Operators resolve the base once, here (:func:`resolve_artefacts`). The artefact layer below is fsspec
only and opens plain URLs, so the Spark jobs stay free of Airflow. To make those plain URLs reach the
store with the connection's credentials, resolving *binds* the URL's protocol in this process's
fsspec: the filesystem class that Airflow's provider built from the connection (``s3`` from
apache-airflow-providers-amazon, ``sftp`` from apache-airflow-providers-sftp ...) is registered for
the protocol, with the options it was built with as fsspec defaults (``fsspec.config.conf``). The same
binding, written to a file only its owner can read, lets a Spark job do the same without Airflow
(:func:`write_binding_file`, :func:`bind_from_environment`): secrets never go on a command line, in
an environment variable's value or in a log.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from .files import display_url

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

BINDING_FILE_ENV = "KAFKA_ZK_ARTEFACTS_STORE_FILE"
"""Environment variable naming a job's binding file (its path only: the file holds the options)."""


_BOUND: dict[str, str] = {}  # protocol -> the binding in force in this process (as JSON text)


class ArtefactsStoreBindingError(ValueError):
    """A binding (file) that cannot be used; the message names the file or the store, never a secret."""


@dataclass(frozen=True)
class ArtefactsStore:
    """A resolved artefacts base.

    ``fs``/``root``: the filesystem and the base's path on it; ``url``: the plain URL (no credentials)
    that the fsspec-only layer and the Spark jobs open; ``binding``: how this process's fsspec was
    bound to the connection (None for a local base or a store used with default credentials).
    """

    fs: AbstractFileSystem
    root: str
    url: str
    binding: Mapping[str, Any] | None = None

    def __repr__(self) -> str:  # the binding holds credentials: never print it
        return f"ArtefactsStore(url={self.url!r}, bound={self.binding is not None})"


def artefacts_path(base: str, conn_id: str | None = None) -> ObjectStoragePath:
    """``base`` as an ``ObjectStoragePath`` (no conn_id: the store's default credentials).

    :param base: a local directory, ``file://`` URL or remote store URL.
    :param conn_id: the Airflow connection of the store (ignored by local paths); default: Airflow's
        ``[kafka_zk] artefacts_conn_id``.
    """
    from airflow.sdk import ObjectStoragePath

    from airflow_provider_kafka_zk.clusters import provider_option

    return ObjectStoragePath(base, conn_id=conn_id or provider_option("artefacts_conn_id") or None)


def _import(qualified: str) -> type[AbstractFileSystem]:
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def bind_filesystem(binding: Mapping[str, Any]) -> None:
    """Make fsspec open ``<protocol>://`` URLs with ``binding``'s class and options, in this process.

    :param binding: ``protocol``, ``fs_class`` (module.Class), ``netloc`` (the URL's host part) and
        ``options`` (the keyword arguments the class was built with, credentials included).
    """
    protocol = str(binding["protocol"])
    key = json.dumps(dict(binding), sort_keys=True, default=repr)
    if _BOUND.get(protocol) == key:  # already in force: keep fsspec's cached instance (and connection)
        return
    netloc = str(binding.get("netloc") or "")
    cls = _import(str(binding["fs_class"]))
    attrs: dict[str, Any] = {"protocol": (protocol,), "__module__": cls.__module__}
    if netloc and cls._strip_protocol(f"{protocol}://{netloc}/x").lstrip("/").startswith("x"):
        # a store whose paths drop the host (SFTP): URLs made from paths must carry it again
        def unstrip_protocol(self: AbstractFileSystem, name: str) -> str:
            path = self._strip_protocol(name)
            return f"{protocol}://{netloc}/{path.lstrip('/')}"

        attrs["unstrip_protocol"] = unstrip_protocol
    bound = type(cls.__name__, (cls,), attrs)
    fsspec.config.conf[protocol] = dict(binding.get("options") or {})
    fsspec.register_implementation(protocol, bound, clobber=True)
    _BOUND[protocol] = key


def is_bound(url: str) -> bool:
    """Whether ``url``'s store was bound in this process (so only fsspec, not Spark's JVM, reaches it).

    :param url: a local path or store URL.
    """
    return "://" in url and url.split("://", 1)[0] in _BOUND


_SSH_PROTOCOLS = ("sftp", "ssh")


def _ssh_host_key_options(base: str, conn_id: str | None) -> dict[str, Any] | None:
    """``known_hosts`` for an SFTP store: the connection's ``known_hosts`` extra (a file), else
    ``~/.ssh/known_hosts``. The SFTP provider's filesystem (sshfs) otherwise connects with
    ``known_hosts=None``, i.e. without checking the server's host key; ``no_host_key_check`` is refused.
    """
    if not conn_id:
        return None
    from airflow.sdk import BaseHook

    extras = BaseHook.get_connection(conn_id).extra_dejson
    if str(extras.get("no_host_key_check", "")).lower() == "true":
        raise ArtefactsStoreBindingError(
            f"artefacts base {base}: connection {conn_id!r} sets no_host_key_check; the store's host key "
            "is always verified: give a known_hosts extra (a file) or add the key to ~/.ssh/known_hosts"
        )
    return {"known_hosts": os.path.expanduser(str(extras.get("known_hosts") or "~/.ssh/known_hosts"))}


def resolve_artefacts(base: str, conn_id: str | None = None) -> ArtefactsStore:
    """Resolve ``base`` through ``ObjectStoragePath`` with ``conn_id``, and bind this process's fsspec
    to that connection so the plain URL reaches the store (see the module docstring).

    :param base: a local directory, ``file://`` URL or remote store URL.
    :param conn_id: the Airflow connection of the store; default ``[kafka_zk] artefacts_conn_id``;
        none: the store's default credentials. Local paths ignore it.
    """
    path = artefacts_path(base, conn_id)
    host_keys = _ssh_host_key_options(base, path.conn_id) if path.protocol in _SSH_PROTOCOLS else None
    try:
        if host_keys is not None:  # what path.fs does, with the host-key check the provider leaves out
            from airflow.sdk.io.fs import get_fs

            fs = get_fs(path.protocol, path.conn_id, host_keys)
        else:
            fs = path.fs
    except ValueError as exc:  # "No filesystem registered for scheme s3": no provider for it
        if path.conn_id:
            raise ValueError(
                f"artefacts base {base} with connection {path.conn_id!r}: Airflow has no filesystem for "
                f"{path.protocol}:// ({exc}); install the store's provider (s3: "
                "apache-airflow-providers-amazon, sftp: apache-airflow-providers-sftp[sshfs])"
            ) from None
        fs, root = fsspec.core.url_to_fs(base)  # fsspec's own, with the store's default credentials
        root = root.rstrip("/") or "/"
        return ArtefactsStore(fs, root, display_url(fs, root))
    if isinstance(fs, LocalFileSystem):
        root = path.path.rstrip("/") or "/"
        return ArtefactsStore(fs, root, root)
    url = base.rstrip("/")
    binding = None
    if path.conn_id:
        binding = {
            "protocol": path.protocol,
            "fs_class": f"{type(fs).__module__}.{type(fs).__qualname__}",
            "netloc": urlsplit(base).netloc,
            "options": dict(getattr(fs, "storage_options", {}) or {}),
        }
        bind_filesystem(binding)
    fs, root = fsspec.core.url_to_fs(url)
    return ArtefactsStore(fs, root.rstrip("/") or "/", url, binding)


def artefacts_fs(base: str, conn_id: str | None = None) -> tuple[AbstractFileSystem, str, str]:
    """(filesystem, path on it, plain URL) of ``base`` (:func:`resolve_artefacts`).

    :param base: as :func:`resolve_artefacts`.
    :param conn_id: as :func:`resolve_artefacts`.
    """
    store = resolve_artefacts(base, conn_id)
    return store.fs, store.root, store.url


def artefacts_url(base: str, conn_id: str | None = None) -> str:
    """The plain URL of ``base`` for the fsspec-only layer, after binding (:func:`resolve_artefacts`).

    :param base: as :func:`resolve_artefacts`.
    :param conn_id: as :func:`resolve_artefacts`.
    """
    return resolve_artefacts(base, conn_id).url


def write_binding_file(store: ArtefactsStore, directory: str) -> str | None:
    """Write ``store``'s binding for a job as a file only its owner can read (mode 0600) in
    ``directory``; returns its path, or None when there is nothing to bind.

    ArtefactsStoreBindingError when the connection's options are not plain data (JSON).

    :param store: a resolved store.
    :param directory: a private directory of the submitting task (removed after the job).
    """
    if store.binding is None:
        return None
    try:
        text = json.dumps(dict(store.binding))
    except (TypeError, ValueError):
        raise ArtefactsStoreBindingError(
            f"artefact store {store.url}: the connection's filesystem options are not plain data, so a job "
            "cannot be handed them; give the job's host the store's default credentials instead"
        ) from None
    path = os.path.join(directory, "artefacts-store.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return path


def bind_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """In a job: bind fsspec from the file named by ``$KAFKA_ZK_ARTEFACTS_STORE_FILE`` (if set).

    Returns whether a binding was applied; ArtefactsStoreBindingError naming the file otherwise.

    :param environ: the environment (default ``os.environ``).
    """
    path = (environ if environ is not None else os.environ).get(BINDING_FILE_ENV)
    if not path:
        return False
    try:
        with open(path) as handle:
            binding = json.load(handle)
        bind_filesystem(binding)
    except (OSError, ValueError, KeyError, ImportError, AttributeError) as exc:
        raise ArtefactsStoreBindingError(
            f"artefact store binding file {path}: {type(exc).__name__}"
        ) from None
    return True
