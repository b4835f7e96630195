"""The alert as Airflow tasks: one alert per DAG run, sent by the run's last task.

``notify_check`` (:class:`NotifyCheckOperator`) fails the run when the cluster's alerts cannot be
delivered (provider missing, connection missing or incomplete), even when the cluster is clean: the
next incident would otherwise be lost. ``alert`` (:class:`RunAlertOperator`) runs after every other
task of the run, whatever their outcome (trigger rule ``all_done``, as a teardown so its own state
does not replace theirs as the run's); it collects the run's incidents (the audit's findings at or
above ``fail_on``, the deletions not done, the tasks that failed), compares their fingerprints with
the previous run's record, pages the new and worse ones once through every channel, records
``alert.json`` with the run's artefacts, and fails (retried) when a channel could not be reached.

Why a task and not a DAG-level ``on_failure_callback``: Airflow 3 runs DAG callbacks in the
dag-processor, where a failed send is one line in that process's log; a task has a log in the UI,
retries, a state a person sees, and runs where the artefact store and connections are reachable.
:class:`TestAlertOperator` sends a test alert through the same path (DAG ``kafka_zk_test_alert``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_kafka_zk.alerts import incidents as inc
from airflow_provider_kafka_zk.alerts.channels import AlertDeliveryError, deliver, notify_problems
from airflow_provider_kafka_zk.alerts.record import (
    alerts_root,
    previous_record,
    read_record,
    stamp,
    write_record,
)
from airflow_provider_kafka_zk.alerts.render import alert_content, render_text
from airflow_provider_kafka_zk.alerts.settings import parse_notify

if TYPE_CHECKING:
    from airflow.sdk import Context

FAILED_STATES = ("failed",)


class AlertNotDeliveredError(AirflowException):
    """A page did not reach every channel (retried; the record says which channels it reached)."""


class NotifyCheckOperator(BaseOperator):
    """Fail when a channel of ``notify`` cannot deliver: its provider, its connection, the sender.

    :param cluster: the cluster (for the message).
    :param notify: the cluster file's ``notify`` table.
    """

    template_fields: Sequence[str] = ("cluster",)
    ui_color = "#fcf3cf"

    def __init__(self, *, cluster: str, notify: Mapping[str, Any] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.notify = dict(notify or {})

    def execute(self, context: Context) -> list[str]:
        settings = parse_notify(self.notify, f"clusters.{self.cluster}.notify")
        problems = notify_problems(settings)
        if problems:
            raise AirflowFailException(
                f"Alerts of cluster {self.cluster} cannot be delivered, so an incident would go unseen: "
                + "; ".join(problems)
            )
        if not settings.delivers:
            self.log.warning(
                "Cluster %s has no notify channel: alerts go to the alert task's log only", self.cluster
            )
        names = [c.name for c in settings.channels]
        self.log.info("Alerts of %s can be delivered to %s", self.cluster, ", ".join(names))
        return names


class RunAlertOperator(BaseOperator):
    """One alert per run: page the run's new and worse incidents once, record them all.

    :param cluster: the cluster's name.
    :param notify: the cluster file's ``notify`` table.
    :param base_path: the artefact base (the record goes to ``<base>/<cluster>/alerts/<dag>/<stamp>``).
    :param artefacts_conn_id: the Airflow connection of a remote base.
    :param fail_on: the gate's threshold: findings at or above it are incidents.
    :param report_task_id: the audit task: its "Report" link (stored when it finished) names the
        run's findings folder and is the report's URL in the alert.
    :param deletions_task_id: the task whose ``verdicts`` XCom holds the deletions not done.
    :param represented_task_ids: failed tasks whose failure the incidents already say (the gate:
        its findings; the deletions task: its verdicts).
    """

    template_fields: Sequence[str] = ("cluster", "base_path", "artefacts_conn_id")
    ui_color = "#f9e79f"

    def __init__(
        self,
        *,
        cluster: str,
        notify: Mapping[str, Any] | None,
        base_path: str,
        fail_on: str = "critical",
        report_task_id: str = "audit",
        artefacts_conn_id: str | None = None,
        deletions_task_id: str = "deletions",
        represented_task_ids: Sequence[str] = ("gate",),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.notify = dict(notify or {})
        self.base_path = base_path
        self.artefacts_conn_id = artefacts_conn_id
        self.fail_on = fail_on
        self.report_task_id = report_task_id
        self.deletions_task_id = deletions_task_id
        self.represented_task_ids = tuple(represented_task_ids)

    # -- what the run says ------------------------------------------------------------------------
    def _finished_tasks(self, context: Context) -> dict[str, dict[int, str]]:
        """task id -> {map index: state} of the run's finished tasks (this one left out)."""
        ti = context["ti"]
        states: dict[str, dict[int, str]] = {}
        for crumb in ti.get_task_breadcrumbs(ti.dag_id, ti.run_id):
            if crumb["task_id"] != self.task_id:
                states.setdefault(crumb["task_id"], {})[int(crumb["map_index"])] = str(crumb["state"])
        return states

    def _report_link(self, context: Context) -> tuple[str, str] | None:
        """(report URL, findings folder) from the audit task's "Report" link (None: no audit output)."""
        from airflow_provider_kafka_zk.plugins.links import ReportLink, parse_artefact_url

        url = context["ti"].xcom_pull(task_ids=self.report_task_id, key=ReportLink().xcom_key)
        parsed = parse_artefact_url(url) if isinstance(url, str) and url else None
        if parsed is None or parsed[3] != self.cluster:
            return None
        relative = parsed[4].rsplit("/", 1)[0]
        return url, f"{self.base_path.rstrip('/')}/{self.cluster}/{relative}"

    def _summary(self, folder: str | None) -> dict[str, Any] | None:
        if not folder:
            return None
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
        from airflow_provider_kafka_zk.spark_jobs.audit import AuditInputError, read_summary

        try:
            return read_summary(artefacts_url(folder, self.artefacts_conn_id))
        except (AuditInputError, FileNotFoundError, NotADirectoryError):
            return None

    def _log_urls(self, context: Context, tasks: Mapping[str, Sequence[int]]) -> dict[str, str]:
        from airflow_provider_kafka_zk.plugins.links import run_url

        run = run_url(context["ti"].dag_id, context["ti"].run_id)
        out = {}
        for task_id, indexes in tasks.items():
            mapped = sorted(i for i in indexes if i >= 0)
            out[task_id] = f"{run}/tasks/{task_id}" + (f"/mapped/{mapped[0]}" if mapped else "")
        return out

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
        from airflow_provider_kafka_zk.plugins.links import run_url

        settings = parse_notify(self.notify, f"clusters.{self.cluster}.notify")
        ti = context["ti"]
        dag_run = context["dag_run"]
        finished = self._finished_tasks(context)
        failed = {
            task_id: [i for i, state in states.items() if state in FAILED_STATES]
            for task_id, states in finished.items()
            if any(state in FAILED_STATES for state in states.values())
        }
        report = self._report_link(context)
        summary = self._summary(report[1] if report else None)
        observed = [inc.TASKS]
        groups: list[list[inc.Incident]] = []
        if summary is not None:
            observed.append(inc.AUDIT)
            groups.append(inc.audit_incidents(summary, self.fail_on))
        deletions = set((finished.get(self.deletions_task_id) or {}).values())
        verdicts = (
            ti.xcom_pull(task_ids=self.deletions_task_id, key="verdicts") if "failed" in deletions else None
        )
        if verdicts is not None:
            observed.append(inc.DELETIONS)
            groups.append(inc.deletion_incidents(verdicts))
        elif deletions == {"success"}:
            observed.append(inc.DELETIONS)  # it ran clean: the deletions told before are done
        represented = set(self.represented_task_ids) | (
            {self.deletions_task_id} if verdicts is not None else set()
        )
        if summary is None:
            represented.discard("gate")
        unexplained = {t: i for t, i in failed.items() if t not in represented}
        groups.append(inc.task_incidents(unexplained, self._log_urls(context, unexplained)))
        incidents = inc.merge(self.cluster, *groups)

        base = artefacts_url(self.base_path, self.artefacts_conn_id)
        root = alerts_root(base, self.cluster, ti.dag_id)
        folder_name = stamp(dag_run.run_after)
        folder = f"{root}/{folder_name}"
        previous_name, previous = previous_record(root, folder_name)
        known = (previous or {}).get("known") or {}
        decision = inc.classify(incidents, known, observed)
        pages = decision.pages
        if settings.page_on == "every_run" and decision.classified:
            pages = list(decision.classified)
        content = alert_content(
            cluster=self.cluster,
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            run_url=run_url(ti.dag_id, ti.run_id),
            report_url=report[0] if report and summary is not None else None,
            classified=decision.classified,
            resolved=decision.resolved,
            coverage_text=(summary or {}).get("coverage_text"),
            failed_tasks=sorted(failed),
        )
        page_key = sorted(c.incident.fingerprint for c in pages)
        earlier = read_record(folder) or {}
        reached = {
            name
            for name, result in (earlier.get("deliveries") or {}).items()
            if result.get("ok") and earlier.get("page_key") == page_key
        }
        deliveries: dict[str, dict[str, Any]] = {}
        if pages:
            for channel in settings.channels:
                if channel.name in reached:
                    deliveries[channel.name] = {
                        **earlier["deliveries"][channel.name],
                        "skipped": "reached by an earlier try",
                    }
                    continue
                try:
                    deliveries[channel.name] = {"ok": True, "result": deliver(channel, content)}
                except AlertDeliveryError as exc:
                    deliveries[channel.name] = {"ok": False, "error": str(exc)}
        delivered = all(d["ok"] for d in deliveries.values())
        now = datetime.now(UTC).isoformat()
        record = {
            "cluster": self.cluster,
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "written_at": now,
            "previous": previous_name,
            "page_on": settings.page_on,
            "paged": bool(pages),
            "page_key": page_key,
            "deliveries": deliveries,
            "incidents": [
                {**c.incident.to_dict(), "status": c.status, "since": c.since} for c in decision.classified
            ],
            "resolved": decision.resolved,
            "failed_tasks": failed,
            "content": content,
            "known": inc.next_known(known, decision, observed, delivered=delivered, now=now),
        }
        path = write_record(folder, record)
        self.log.info("%s", render_text(content))
        if not pages:
            self.log.info(
                "Nothing paged: %d incident(s), none new or worse since %s (record: %s)",
                len(decision.classified),
                previous_name or "no earlier run",
                path,
            )
        for name, result in deliveries.items():
            self.log.info("Channel %s: %s", name, result.get("result") or result.get("error"))
        if not delivered:
            raise AlertNotDeliveredError(
                "ALERT NOT DELIVERED to "
                + "; ".join(d["error"] for d in deliveries.values() if not d["ok"])
                + f" (record: {path})"
            )
        return {"record": path, "paged": bool(pages), "incidents": len(decision.classified)}


class TestAlertOperator(BaseOperator):
    """Send a test alert through every channel of a cluster's ``notify`` (the on-call path, proven).

    :param cluster: the cluster (templated: the test DAG's form).
    """

    __test__ = False  # not a pytest class
    template_fields: Sequence[str] = ("cluster",)
    ui_color = "#f9e79f"

    def __init__(self, *, cluster: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster

    def execute(self, context: Context) -> dict[str, str]:
        from airflow_provider_kafka_zk.clusters import load_clusters
        from airflow_provider_kafka_zk.plugins.links import run_url

        configured = load_clusters()
        if self.cluster not in configured:
            raise AirflowFailException(f"cluster {self.cluster!r} is not in the cluster file")
        settings = parse_notify(configured[self.cluster].get("notify"), f"clusters.{self.cluster}.notify")
        ti = context["ti"]
        who = getattr(context["dag_run"], "triggering_user_name", None) or "airflow"
        content = alert_content(
            cluster=self.cluster,
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            run_url=run_url(ti.dag_id, ti.run_id),
            report_url=None,
            classified=[],
            test_by=who,
        )
        results, errors = {}, []
        for channel in settings.channels:
            try:
                results[channel.name] = deliver(channel, content)
                self.log.info("Test alert of %s: %s: %s", self.cluster, channel.name, results[channel.name])
            except AlertDeliveryError as exc:
                errors.append(str(exc))
        if not settings.delivers:
            errors.append(f"cluster {self.cluster} has no notify channel but the log: nobody would be paged")
        if errors:
            raise AirflowFailException("Test alert NOT delivered: " + "; ".join(errors))
        return results
