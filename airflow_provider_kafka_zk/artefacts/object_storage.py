"""The artefacts base as Airflow's ``ObjectStoragePath``: a local path, ``file://``, or an object
store URL (``s3://bucket/prefix``) with the Airflow connection that holds its credentials.

Operators resolve the base here and hand the artefact layer the resulting filesystem and path (the
layer itself is fsspec only, so the Spark jobs stay free of Airflow: they get a plain URL). An object
store's filesystem comes from its provider's registration with Airflow (``s3`` from
apache-airflow-providers-amazon, ``gs`` from the Google provider ...), configured from ``conn_id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath


def artefacts_path(base: str, conn_id: str | None = None) -> ObjectStoragePath:
    """``base`` as an ``ObjectStoragePath`` (no conn_id: the store's default credentials).

    :param base: a local directory, ``file://`` URL or object-store URL.
    :param conn_id: the Airflow connection of the store (ignored by local paths); default: Airflow's
        ``[kafka_zk] artefacts_conn_id``.
    """
    from airflow.sdk import ObjectStoragePath

    from airflow_provider_kafka_zk.clusters import provider_option

    return ObjectStoragePath(base, conn_id=conn_id or provider_option("artefacts_conn_id") or None)


def artefacts_fs(base: str, conn_id: str | None = None) -> tuple[AbstractFileSystem, str, str]:
    """(filesystem, path on it, plain URL) of ``base``: the filesystem configured from the connection,
    the URL without it (``s3://bucket/x``, or the local path), for Airflow-free readers such as Spark.

    :param base: as :func:`artefacts_path`.
    :param conn_id: as :func:`artefacts_path`.
    """
    path = artefacts_path(base, conn_id)
    try:
        fs = path.fs
    except ValueError as exc:  # "No filesystem registered for scheme s3": no provider for it
        if path.conn_id:
            raise ValueError(
                f"artefacts base {base} with connection {path.conn_id!r}: Airflow has no filesystem for "
                f"{path.protocol}:// ({exc}); install the store's provider (s3: apache-airflow-providers-amazon)"
            ) from None
        fs, root = fsspec.core.url_to_fs(base)  # fsspec's own, with the store's default credentials
        root = root.rstrip("/") or "/"
        return fs, root, root if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(root)
    root = path.path.rstrip("/") or "/"
    url = root if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(root)
    return fs, root, url
