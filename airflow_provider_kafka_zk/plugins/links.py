"""The URLs people click: a run's page in Airflow, and a run's artefacts served by the provider's
api-server plugin (:mod:`airflow_provider_kafka_zk.plugins.app`), plus the operator extra links
"Report" and "Plan" that point there.

An artefact URL names the task that published the folder, so the plugin can check that the folder
asked for is the one that task published (its link, stored by Airflow as an XCom when the task
finished) before it reads the store::

    {[api] base_url}/kafka-zk/runs/<dag_id>/<run_id>/<task_id>/<cluster>/<folder under the cluster>/<file>

No FastAPI here: workers import this module when a task with a link finishes.
"""

from __future__ import annotations

import logging
import posixpath
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, unquote, urlsplit

import attrs
from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

log = logging.getLogger(__name__)

URL_PREFIX = "/kafka-zk"
"""Where the plugin's FastAPI app is mounted on the api-server."""
RUNS = "runs"


def api_base_url() -> str:
    """Airflow's ``[api] base_url`` (what the UI is reached at), without a trailing slash."""
    from airflow.sdk.configuration import conf

    return str(conf.get("api", "base_url", fallback="http://localhost:8080/")).rstrip("/")


def run_url(dag_id: str, run_id: str) -> str:
    """The run's page in the Airflow UI."""
    return f"{api_base_url()}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def artefact_url(dag_id: str, run_id: str, task_id: str, cluster: str, relative: str) -> str:
    """The plugin's URL of ``relative`` (a path under ``<base>/<cluster>/``) as published by a task.

    :param dag_id: the DAG.
    :param run_id: the run.
    :param task_id: the task that published the folder (its link holds it).
    :param cluster: the cluster (the store's first level).
    :param relative: the folder or file under ``<base>/<cluster>/``; a folder ends with ``/``.
    """
    parts = [quote(p, safe="") for p in (dag_id, run_id, task_id, cluster)]
    return f"{api_base_url()}{URL_PREFIX}/{RUNS}/{'/'.join(parts)}/{quote(relative, safe='/')}"


def parse_artefact_url(url: str) -> tuple[str, str, str, str, str] | None:
    """(dag_id, run_id, task_id, cluster, relative) of an :func:`artefact_url` (None: not one)."""
    path = urlsplit(url).path
    marker = f"{URL_PREFIX}/{RUNS}/"
    at = path.find(marker)
    if at < 0:
        return None
    parts = path[at + len(marker) :].split("/", 4)
    if len(parts) < 5:
        return None
    return tuple(unquote(p) for p in parts)  # type: ignore[return-value]


def _plain(location: str) -> str:
    location = location.strip()
    if location.startswith("file://"):
        location = location[len("file://") :]
    return location.rstrip("/")


def relative_to_cluster(location: str, base: str, cluster: str) -> str | None:
    """``location`` (a folder or file URL/path) relative to ``<base>/<cluster>/`` (None: outside it)."""
    prefix = f"{_plain(base)}/{cluster}/"
    plain = _plain(location)
    if not plain.startswith(prefix):
        return None
    relative = plain[len(prefix) :]
    if not relative or relative != posixpath.normpath(relative) or relative.startswith(("/", "..")):
        return None
    return relative


def _argument(args: Any, flag: str) -> str | None:
    args = list(args or ())
    return str(args[args.index(flag) + 1]) if flag in args and args.index(flag) + 1 < len(args) else None


def _params(ti: Any) -> dict[str, Any]:
    try:
        return dict(ti.get_template_context().get("params") or {})
    except Exception:  # an old-style key without a context
        return {}


def published(operator: Any, ti: Any, cluster: str | None = None) -> tuple[str, str, str | None] | None:
    """(cluster, folder, file) a finished task published, from what the task was given or returned:
    the gate's ``findings_path``, the audit's ``out`` (``--out`` of the Spark one), a plan's
    ``plan_dir``, a report task's returned file. None when it published nothing (it failed first)."""
    cluster = (
        cluster
        or getattr(operator, "cluster", None)
        or _argument(getattr(operator, "application_args", None), "--cluster")
    )
    cluster = cluster or _params(ti).get("cluster")
    folder = getattr(operator, "findings_path", None) or getattr(operator, "out", None)
    folder = folder or _argument(getattr(operator, "application_args", None), "--out")
    file = None
    if not folder:
        value = ti.xcom_pull(task_ids=ti.task_id)
        if isinstance(value, dict) and value.get("plan_dir"):
            folder = value["plan_dir"]
        elif isinstance(value, str) and value:
            file, folder = value, posixpath.dirname(value.rstrip("/"))
    if not cluster or not folder or "{{" in str(folder):
        return None
    return str(cluster), str(folder), file


def _cluster_base(cluster: str) -> str:
    from airflow_provider_kafka_zk.clusters import cluster_setting

    return str(cluster_setting({"cluster": cluster}, "base_path"))


@attrs.define()
class _ArtefactLink(BaseOperatorLink):
    """A link to a folder or file the task published, served by the plugin."""

    cluster: str | None = None
    target: ClassVar[str] = (
        ""  # a file name in the folder, "" for the folder's index, "*" for the returned file
    )

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        ti: Any = ti_key  # on a worker, at the end of the task: the running task instance
        found = published(operator, ti, self.cluster)
        if found is None:
            return ""
        cluster, folder, file = found
        relative = relative_to_cluster(folder, _cluster_base(cluster), cluster)
        if relative is None:
            log.warning("%s link: %s is not under the artefact store of %s", self.name, folder, cluster)
            return ""
        if self.target == "*":
            if not file:
                return ""
            target = posixpath.basename(file)
        else:
            target = self.target
        return artefact_url(ti.dag_id, ti.run_id, ti.task_id, cluster, f"{relative}/{target}")


@attrs.define()
class ReportLink(_ArtefactLink):
    """ "Report": the audit's ``report.html`` (audit and gate tasks)."""

    name: ClassVar[str] = "Report"  # type: ignore[misc]
    target: ClassVar[str] = "report.html"


@attrs.define()
class RunReportLink(_ArtefactLink):
    """ "Report": the file a manual DAG's report task returned (its ``report.txt``)."""

    name: ClassVar[str] = "Report"  # type: ignore[misc]
    target: ClassVar[str] = "*"


@attrs.define()
class PlanLink(_ArtefactLink):
    """ "Plan": the plan's folder (plan.json, summary.txt, rollback.json ...), as an index page."""

    name: ClassVar[str] = "Plan"  # type: ignore[misc]
    target: ClassVar[str] = ""
