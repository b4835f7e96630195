"""The api-server app that serves a run's artefacts (``report.html``, a plan's files, verdicts ...)
from the artefact store, local or remote, through the same artefact layer the operators use.

Mounted at ``/kafka-zk`` by :class:`~airflow_provider_kafka_zk.plugins.KafkaZkPlugin`. Every request
goes through Airflow's auth manager (``requires_access_dag``: the user must be allowed to read the
DAG's task logs; the UI's session cookie or a bearer token), then:

* the folder must be one the named task of that run published: its "Report"/"Plan" link, stored as an
  XCom by Airflow when the task finished, names it; nothing else of the store is reachable;
* the path is checked before any store access: no ``..``, no absolute path, no backslash or NUL,
  no empty segment; a local store's real path (symlinks resolved) must stay inside the folder;
* a page is sent with a Content-Security-Policy that runs no script (an artefact is data, and the
  api-server's origin holds the user's session), ``nosniff``; only HTML the audit writes is shown
  as HTML, other files as text or a download.
"""

from __future__ import annotations

import html
import mimetypes
import os
import posixpath
from collections.abc import Iterator
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, status
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from airflow_provider_kafka_zk.plugins.links import URL_PREFIX, artefact_url, parse_artefact_url

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
}
SHOWN_AS_HTML = (".html",)
SHOWN_AS_TEXT = (".txt", ".json", ".log", ".properties", ".toml", ".csv")
MAX_LISTED = 2000
CHUNK = 1024 * 1024


class ArtefactPathError(ValueError):
    """A path that could leave the published folder."""


def safe_relative(path: str) -> str:
    """``path`` as a clean relative path, or ArtefactPathError (``..``, absolute, ``\\``, NUL, ``//``).

    A trailing ``/`` (a folder) is kept off; the caller knows from the request.
    """
    if not path:
        return ""
    if "\x00" in path or "\\" in path or path.startswith("/"):
        raise ArtefactPathError(path)
    parts = path.rstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArtefactPathError(path)
    return "/".join(parts)


def _published_folders(dag_id: str, run_id: str, task_id: str) -> set[tuple[str, str]]:
    """(cluster, folder under the cluster) of each of our links the task stored (map index -1)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.execute(
            XComModel.get_many(
                run_id=run_id, dag_ids=dag_id, task_ids=task_id, map_indexes=-1
            ).with_only_columns(XComModel.key, XComModel.value)
        ).all()
    folders = set()
    for key, value in rows:
        if not str(key).startswith("_link_"):
            continue
        text = value if isinstance(value, str) else str(value)
        text = text.strip('"')
        parsed = parse_artefact_url(text)
        if parsed is None or parsed[:3] != (dag_id, run_id, task_id):
            continue
        cluster, relative = parsed[3], parsed[4]
        folder = relative if relative.endswith("/") else posixpath.dirname(relative)
        folders.add((cluster, folder.rstrip("/")))
    return folders


def _store(cluster: str) -> tuple[Any, str]:
    """(filesystem, root of the cluster's folder) of ``cluster``'s artefact store, bound as the
    operators bind it (the cluster file's base_path and artefacts_conn_id)."""
    from airflow_provider_kafka_zk.artefacts.object_storage import resolve_artefacts
    from airflow_provider_kafka_zk.artefacts.snapshots import validate_cluster_name
    from airflow_provider_kafka_zk.clusters import cluster_setting

    params = {"cluster": validate_cluster_name(cluster)}
    store = resolve_artefacts(
        str(cluster_setting(params, "base_path")), cluster_setting(params, "artefacts_conn_id") or None
    )
    return store.fs, f"{store.root.rstrip('/')}/{cluster}"


def _inside(fs: Any, root: str, path: str) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    if not isinstance(fs, LocalFileSystem):
        return True  # object stores and SFTP (never following a link here: paths were checked)
    real_root = os.path.realpath(root)
    return os.path.realpath(path) == real_root or os.path.realpath(path).startswith(real_root + os.sep)


def _index(fs: Any, folder_path: str, links: dict[str, Any], title: str) -> HTMLResponse:
    entries = []
    for info in fs.find(folder_path, detail=True, withdirs=False, maxdepth=4).values():
        name = info["name"][len(folder_path.rstrip("/")) + 1 :]
        entries.append((name, info.get("size")))
        if len(entries) >= MAX_LISTED:
            break
    entries.sort()
    rows = "".join(
        f'<tr><td><a href="{html.escape(links["href"](name))}">{html.escape(name)}</a></td>'
        f'<td style="text-align:right">{size if size is not None else ""}</td></tr>'
        for name, size in entries
    )
    summary = ""
    names = {name for name, _ in entries}
    for name in ("summary.txt", "report.txt"):
        if name in names:
            with fs.open(f"{folder_path}/{name}", "rb") as handle:
                summary += f"<h2>{name}</h2><pre>{html.escape(handle.read(256 * 1024).decode('utf-8', 'replace'))}</pre>"
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        '<body style="font-family:sans-serif;margin:2em">'
        f"<h1>{html.escape(title)}</h1><table><tr><th>file</th><th>bytes</th></tr>{rows}</table>"
        f"{summary}</body></html>"
    )
    return HTMLResponse(page, headers=SECURITY_HEADERS)


def _stream(fs: Any, path: str) -> Iterator[bytes]:
    with fs.open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def create_app() -> FastAPI:
    """The FastAPI app of the plugin (mounted at :data:`URL_PREFIX`)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    app = FastAPI(title="Kafka ZooKeeper-mode artefacts", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get(
        "/runs/{dag_id}/{run_id}/{task_id}/{cluster}/{path:path}",
        dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_LOGS))],
    )
    def artefact(dag_id: str, run_id: str, task_id: str, cluster: str, path: str = "") -> Response:
        try:
            relative = safe_relative(path)
        except ArtefactPathError:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such artefact") from None
        folders = _published_folders(dag_id, run_id, task_id)
        allowed = [
            folder
            for c, folder in folders
            if c == cluster and (relative == folder or relative.startswith(folder + "/"))
        ]
        if not allowed:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such artefact published by this task")
        fs, root = _store(cluster)
        full = f"{root}/{relative}" if relative else root
        if not _inside(fs, f"{root}/{allowed[0]}", full):
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such artefact")
        if fs.isdir(full):
            return _index(
                fs,
                full,
                {"href": lambda name: artefact_url(dag_id, run_id, task_id, cluster, f"{relative}/{name}")},
                f"{cluster}: {relative}/ ({task_id} of {run_id})",
            )
        if not fs.isfile(full):
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such artefact")
        name = posixpath.basename(full)
        headers = dict(SECURITY_HEADERS)
        if name.endswith(SHOWN_AS_HTML):
            media = "text/html; charset=utf-8"
        elif name.endswith(SHOWN_AS_TEXT):
            media = "text/plain; charset=utf-8"
        else:
            media = mimetypes.guess_type(name)[0] or "application/octet-stream"
            headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return StreamingResponse(_stream(fs, full), media_type=media, headers=headers)

    return app


__all__ = ["URL_PREFIX", "create_app", "safe_relative"]
