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
from airflow_provider_kafka_zk.alerts.settings import NotifySettings, parse_notify
from airflow_provider_kafka_zk.metrics.runs import publish_daily, publish_maintenance_run

if TYPE_CHECKING:
    from airflow.sdk import Context

FAILED_STATES = ("failed",)


class AlertNotDeliveredError(AirflowException):
    """A page did not reach every channel (retried; the record says which channels it reached)."""


def finished_tasks(ti: Any, exclude_task_id: str) -> dict[str, dict[int, str]]:
    """task id -> {map index: state} of the run's finished tasks (the alert itself left out).

    :param ti: the alert task's running task instance.
    :param exclude_task_id: the alert's own task id.
    """
    states: dict[str, dict[int, str]] = {}
    for crumb in ti.get_task_breadcrumbs(ti.dag_id, ti.run_id):
        if crumb["task_id"] != exclude_task_id:
            states.setdefault(crumb["task_id"], {})[int(crumb["map_index"])] = str(crumb["state"])
    return states


def failed_tasks(finished: Mapping[str, Mapping[int, str]]) -> dict[str, list[int]]:
    """task id -> its failed map indexes (``[-1]``: an unmapped task), for the tasks that failed."""
    return {
        task_id: [i for i, state in states.items() if state in FAILED_STATES]
        for task_id, states in finished.items()
        if any(state in FAILED_STATES for state in states.values())
    }


def log_urls(dag_id: str, run_id: str, tasks: Mapping[str, Sequence[int]]) -> dict[str, str]:
    """task id -> the page of its log in the Airflow UI (a mapped task's first failed instance)."""
    from airflow_provider_kafka_zk.plugins.links import run_url

    run = run_url(dag_id, run_id)
    out = {}
    for task_id, indexes in tasks.items():
        mapped = sorted(i for i in indexes if i >= 0)
        out[task_id] = f"{run}/tasks/{task_id}" + (f"/mapped/{mapped[0]}" if mapped else "")
    return out


def deliver_once(
    settings: NotifySettings,
    content: Mapping[str, Any],
    earlier: Mapping[str, Any] | None,
    page_key: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """Send ``content`` to every channel of ``settings`` that an earlier try of the same alert (its
    record ``earlier``, same ``page_key``) did not reach; channel name -> what it answered.

    :param settings: the cluster's notify.
    :param content: the alert (:func:`~.render.alert_content`).
    :param earlier: this run's record from an earlier try (None: the first).
    :param page_key: what this page is about (two tries with the same key are one page).
    """
    earlier = earlier or {}
    reached = {
        name
        for name, result in (earlier.get("deliveries") or {}).items()
        if result.get("ok") and earlier.get("page_key") == list(page_key)
    }
    deliveries: dict[str, dict[str, Any]] = {}
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
    return deliveries


def raise_unless_delivered(log: Any, deliveries: Mapping[str, Mapping[str, Any]], record: str) -> None:
    """Log what each channel answered; AlertNotDeliveredError (the task retries) when one failed."""
    for name, result in deliveries.items():
        log.info("Channel %s: %s", name, result.get("result") or result.get("error"))
    if not all(d["ok"] for d in deliveries.values()):
        raise AlertNotDeliveredError(
            "ALERT NOT DELIVERED to "
            + "; ".join(d["error"] for d in deliveries.values() if not d["ok"])
            + f" (record: {record})"
        )


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

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
        from airflow_provider_kafka_zk.plugins.links import run_url

        settings = parse_notify(self.notify, f"clusters.{self.cluster}.notify")
        ti = context["ti"]
        dag_run = context["dag_run"]
        finished = finished_tasks(ti, self.task_id)
        failed = failed_tasks(finished)
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
        groups.append(inc.task_incidents(unexplained, log_urls(ti.dag_id, ti.run_id, unexplained)))
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
        deliveries = deliver_once(settings, content, read_record(folder), page_key) if pages else {}
        delivered = all(d["ok"] for d in deliveries.values())
        metrics = publish_daily(ti, dag_run, self.cluster, summary, failed=bool(failed), logger=self.log)
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
            "metrics": metrics,
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
        raise_unless_delivered(self.log, deliveries, path)
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


def record_failure(context: Context) -> None:
    """``on_failure_callback`` of every task of a maintenance DAG: leave the error the task failed
    with (XCom ``kafka_zk_failure``) for the run's alert, which cannot read another task's log.
    Never raises: a callback must not hide the failure it reports."""
    from airflow_provider_kafka_zk.alerts.maintenance import FAILURE_XCOM_KEY, failure_record

    ti = context["ti"]
    try:
        ti.xcom_push(key=FAILURE_XCOM_KEY, value=failure_record(context.get("exception"), ti.try_number))
    except Exception as exc:  # the alert then says "see the log"
        ti.log.warning("Could not record the failure for the run's alert: %s: %s", type(exc).__name__, exc)


def _dag_order(dag: Any, exclude: str) -> list[str]:
    """The DAG's task ids, every task after its upstream ones, otherwise in definition order."""
    tasks = {t: task for t, task in dag.task_dict.items() if t != exclude}
    pending = {t: set(task.upstream_task_ids) & set(tasks) for t, task in tasks.items()}
    order: list[str] = []
    while pending:
        ready = [t for t, upstream in pending.items() if not upstream] or [next(iter(pending))]
        for t in ready:
            order.append(t)
            del pending[t]
        for upstream in pending.values():
            upstream.difference_update(ready)
    return order


class MaintenanceRunAlertOperator(BaseOperator):
    """The alert of a manually triggered DAG (drain, post-maintenance, topicId repair, pre-restart
    check, KRaft readiness): a failed run pages once, with what failed and why, where it stopped, what
    it had changed (its change logs), its rollback artefacts and what to do next (:mod:`.maintenance`).

    Runs last, after every task whatever its outcome (a teardown: the run's state stays theirs). The
    cluster and its ``notify`` are the run's ``params.cluster`` and the cluster file's, read at run
    time. A succeeded run pages nothing, but this task fails when a failed one could not be paged
    (provider missing, connection unusable): loud, without changing the run's own state.

    Every failed run pages (no fingerprint shared across runs: each is its own action with its own
    partial changes); a retry of this task, or of the run's failed tasks that fail at the same place
    again, does not page twice (the record ``<base>/<cluster>/alerts/<dag>/<run key>/alert.json``).

    :param cluster: the run's cluster (templated: ``params.cluster``).
    :param plan_task_id: the task whose XCom ``plan_dir`` is the run folder (its "Plan" link too).
    :param report_task_id: the task whose "Report" link is the run's report.
    :param throttle_task_id: the task that clears the replication throttles the run set.
    """

    template_fields: Sequence[str] = ("cluster",)
    ui_color = "#f9e79f"

    def __init__(
        self,
        *,
        cluster: str = "{{ params.cluster }}",
        plan_task_id: str = "plan",
        report_task_id: str = "report",
        throttle_task_id: str = "clear_throttles",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.plan_task_id = plan_task_id
        self.report_task_id = report_task_id
        self.throttle_task_id = throttle_task_id

    # -- what the run left ------------------------------------------------------------------------
    def _link(self, ti: Any, task_id: str, link: Any) -> str | None:
        if task_id not in self.dag.task_dict:
            return None
        url = ti.xcom_pull(task_ids=task_id, key=link.xcom_key)
        return url if isinstance(url, str) and url else None

    def _run_folder(self, ti: Any, dag_run: Any, base: str) -> str | None:
        from airflow_provider_kafka_zk.alerts.maintenance import ARTEFACT_KIND
        from airflow_provider_kafka_zk.operators._run import run_key_of

        if self.plan_task_id in self.dag.task_dict:
            plan = ti.xcom_pull(task_ids=self.plan_task_id)
            if isinstance(plan, Mapping) and plan.get("plan_dir"):
                return str(plan["plan_dir"])
        kind = ARTEFACT_KIND.get(ti.dag_id)
        return "/".join([base.rstrip("/"), self.cluster, kind, run_key_of(dag_run)]) if kind else None

    def _folder_files(self, folder: str, conn_id: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """(change-log name -> JSON, rollback artefact names) of the run folder (empty: none there)."""
        import json

        import fsspec

        from airflow_provider_kafka_zk.alerts.maintenance import CHANGE_LOG, ROLLBACK
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url

        fs, path = fsspec.core.url_to_fs(artefacts_url(folder, conn_id))
        try:
            names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
        except FileNotFoundError:
            return {}, []
        logs = {
            n: json.loads(fs.cat_file(f"{path.rstrip('/')}/{n}")) for n in names if CHANGE_LOG.fullmatch(n)
        }
        return logs, [n for n in names if ROLLBACK.fullmatch(n)]

    def _errors(self, ti: Any, failed: Mapping[str, Sequence[int]]) -> dict[str, dict[int, str]]:
        from airflow_provider_kafka_zk.alerts.maintenance import FAILURE_XCOM_KEY

        out: dict[str, dict[int, str]] = {}
        for task_id, indexes in failed.items():
            for index in indexes:
                record = ti.xcom_pull(task_ids=task_id, key=FAILURE_XCOM_KEY, map_indexes=index)
                if isinstance(record, Mapping) and record.get("error"):
                    out.setdefault(task_id, {})[index] = str(record["error"])
        return out

    def execute(self, context: Context) -> dict[str, Any]:
        import json

        from airflow_provider_kafka_zk.alerts import maintenance as mt
        from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
        from airflow_provider_kafka_zk.clusters import cluster_setting, load_clusters
        from airflow_provider_kafka_zk.operators._run import run_key_of
        from airflow_provider_kafka_zk.plugins.links import PlanLink, RunReportLink, run_url

        ti, dag_run = context["ti"], context["dag_run"]
        params = dict(context.get("params") or {})
        notes: list[str] = []
        configured = load_clusters()
        if self.cluster in configured:
            settings = parse_notify(configured[self.cluster].get("notify"), f"clusters.{self.cluster}.notify")
        else:
            settings = NotifySettings()
            notes.append(
                f"Cluster {self.cluster!r} is not in the cluster file: this alert went to the task log only."
            )
        base = str(cluster_setting({"cluster": self.cluster}, "base_path"))
        conn_id = cluster_setting({"cluster": self.cluster}, "artefacts_conn_id") or None

        finished = finished_tasks(ti, self.task_id)
        order = _dag_order(self.dag, self.task_id)
        failed_raw = failed_tasks(finished)
        failed = {t: failed_raw[t] for t in order if t in failed_raw}
        run_steps = mt.steps(order, finished)

        logs: dict[str, dict[str, Any]] = {}
        rollback: list[str] = []
        folder = None
        try:
            folder = self._run_folder(ti, dag_run, base)
            if folder and ti.dag_id not in mt.READ_ONLY:
                logs, rollback = self._folder_files(folder, conn_id)
        except Exception as exc:  # the page goes out regardless, saying what it could not read
            notes.append(f"Could not read the run folder {folder}: {type(exc).__name__}: {exc}")
        changes = mt.change_logs(logs)
        errors: dict[str, dict[int, str]] = {}
        try:
            errors = self._errors(ti, failed)
        except Exception as exc:
            notes.append(
                f"Could not read the failed tasks' errors ({type(exc).__name__}); their logs say why."
            )
        folder_url = self._link(ti, self.plan_task_id, PlanLink())
        if folder_url and not folder_url.endswith("/"):
            folder_url += "/"
        dry_run = params.get("dry_run") if isinstance(params.get("dry_run"), bool) else None
        throttles = None
        if self.throttle_task_id in self.dag.task_dict:
            throttles = set((finished.get(self.throttle_task_id) or {}).values()) == {"success"}
        changed = changes["writes"] > 0
        next_text, commands = mt.next_steps(
            ti.dag_id,
            cluster=self.cluster,
            run_id=ti.run_id,
            changed=changed,
            dry_run=dry_run,
            throttles_cleared=throttles,
            rollback_artefacts=rollback,
            lease=changes["lease"],
        )
        stopped = mt.stopped_at(run_steps)
        maintenance = {
            "headline": mt.headline(
                dag_id=ti.dag_id,
                cluster=self.cluster,
                failed=stopped,
                changed=changed,
                writes=changes["writes"],
                lease=changes["lease"],
                dry_run=dry_run,
            ),
            "triggered_by": getattr(dag_run, "triggering_user_name", None),
            "dry_run": dry_run,
            "params": json.dumps(params, default=str, sort_keys=True)[:1000],
            "steps": run_steps,
            "stopped_at": stopped,
            "read_only": ti.dag_id in mt.READ_ONLY,
            "writes": changes["writes"],
            "lease": changes["lease"],
            "change_logs": [
                {**log, "url": f"{folder_url}{log['name']}" if folder_url else None}
                for log in changes["logs"]
            ],
            "rollback": [{"name": n, "url": f"{folder_url}{n}" if folder_url else None} for n in rollback],
            "folder": folder,
            "folder_url": folder_url,
            "next_steps": next_text,
            "commands": commands,
            "notes": notes,
        }
        incidents = inc.merge(
            self.cluster,
            mt.failed_task_incidents(failed, errors, log_urls(ti.dag_id, ti.run_id, failed), changed=changed),
        )
        content = alert_content(
            cluster=self.cluster,
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            run_url=run_url(ti.dag_id, ti.run_id),
            report_url=self._link(ti, self.report_task_id, RunReportLink()),
            classified=[inc.Classified(i, inc.NEW) for i in incidents],
            failed_tasks=list(failed),
            maintenance=maintenance,
        )
        record_folder = (
            f"{alerts_root(artefacts_url(base, conn_id), self.cluster, ti.dag_id)}/{run_key_of(dag_run)}"
        )
        page_key = sorted(f"{t}[{i}]" for t, indexes in failed.items() for i in indexes)
        declined = None
        if folder and failed:
            try:
                from airflow_provider_kafka_zk.operators.approved_plan import read_approval

                approval = read_approval(artefacts_url(folder, conn_id))
            except Exception as exc:  # unreadable: page as for any failed run
                notes.append(f"Could not read the run's approval record: {type(exc).__name__}: {exc}")
                approval = None
            declined = mt.declined_by_a_person(
                failed, report_task_id=self.report_task_id, writes=changes["writes"], approval=approval
            )
        page = bool(failed) and declined is None
        deliveries = deliver_once(settings, content, read_record(record_folder), page_key) if page else {}
        metrics = publish_maintenance_run(
            cluster=self.cluster,
            dag_id=ti.dag_id,
            folder=folder,
            conn_id=conn_id,
            failed=list(failed),
            writes=changes["writes"],
            dry_run=dry_run,
            logger=self.log,
        )
        problems = [] if failed else notify_problems(settings)
        record = {
            "cluster": self.cluster,
            "dag_id": ti.dag_id,
            "run_id": ti.run_id,
            "written_at": datetime.now(UTC).isoformat(),
            "kind": "maintenance",
            "paged": page,
            "not_paged_because": declined,
            "page_key": page_key,
            "deliveries": deliveries,
            "failed_tasks": failed,
            "notify_problems": problems,
            "content": content,
            "metrics": metrics,
        }
        path = write_record(record_folder, record)
        self.log.info("%s", render_text(content))
        if not failed:
            self.log.info("Run succeeded: nothing paged (record: %s)", path)
        elif declined:
            self.log.info("Run failed because its plan was rejected: %s (record: %s)", declined, path)
        raise_unless_delivered(self.log, deliveries, path)
        if self.cluster not in configured:
            raise AirflowFailException(notes[0])
        if problems:
            raise AirflowFailException(
                f"This run succeeded, but a failed run of cluster {self.cluster} would page nobody: "
                + "; ".join(problems)
            )
        return {"record": path, "paged": page, "failed_tasks": list(failed)}
