"""A daily run that is late pages once, saying where it hangs (Airflow 3.1+ deadline alerts).

Airflow 3.3.2 (``airflow.sdk.definitions.deadline``, ``airflow.models.deadline``): a DAG's
``DeadlineAlert`` is evaluated when a run is created (``_process_dagrun_deadline_alerts``: a
``deadline`` row with reference time + interval); the scheduler's loop marks every row past its
time and queues its callback once (``Deadline.handle_miss``; ``FOR UPDATE SKIP LOCKED``, so HA
schedulers do not duplicate it); a run that *succeeds* first has its rows pruned
(``DagRun.update_state`` -> ``prune_deadlines``), a run that *fails* does not, so the callback checks
that the run is still going. Callback kinds at 3.3.2: ``AsyncCallback`` (a coroutine run by the
triggerer, whose comms answer task states, the run's state and XComs) and ``SyncCallback`` (run by
an executor that supports it, whose comms answer connections and variables only). The pager is an
``AsyncCallback``: it needs the task states to say where the run hangs; its blocking work (comms,
the artefact store, SMTP/Slack) runs on a thread, off the triggerer's loop.

The deadline, per cluster (cluster file):

* ``deadline_s = N``: N seconds after the run was queued (Airflow's ``DAGRUN_QUEUED_AT`` reference).
* otherwise :class:`RecentRunsDeadline`: ``deadline_multiple`` (3) times the median duration of the
  DAG's last 10 successful runs, read by the scheduler from its database when the run is created
  (the DAG file cannot read it cheaply when parsed), never under 10 minutes; until 3 such runs exist,
  ``deadline_default_s`` (6 h). Registered by the provider's plugin (the scheduler finds custom
  references there).
* ``deadline_s = 0``: no deadline.

Where it hangs: every task of the daily DAG records when its try started (XCom
:data:`STARTED_XCOM_KEY`, by :func:`record_start`, an ``on_execute_callback``); the page names each
unfinished task with its state and, when it runs, since when and on which host.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from airflow.sdk.definitions.deadline import BaseDeadlineReference

log = logging.getLogger(__name__)

STARTED_XCOM_KEY = "kafka_zk_started"
DEADLINE_FILE = "deadline.json"
PAGE_KEY = ("deadline",)
"""What a late-run page is about: a second try of the callback reaches only the channels the first did not."""
MULTIPLE = 3.0
DEFAULT_S = 6 * 3600.0
FLOOR_S = 600.0
RUNS = 10
MIN_RUNS = 3
UNFINISHED = ("running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting",
              "awaiting_input", "none", "None")  # fmt: skip


def deadline_seconds(
    durations: Sequence[float],
    *,
    multiple: float = MULTIPLE,
    default_s: float = DEFAULT_S,
    floor_s: float = FLOOR_S,
    min_runs: int = MIN_RUNS,
) -> tuple[float, str]:
    """(seconds a run may take, how that was computed) from recent successful runs' durations.

    :param durations: the last successful runs' durations in seconds, newest first.
    """
    if len(durations) < min_runs:
        return default_s, (
            f"the default {default_s:.0f} s (only {len(durations)} successful run(s), {min_runs} needed)"
        )
    median = statistics.median(durations)
    return max(floor_s, multiple * median), (
        f"{multiple:g} x the median {median:.0f} s of the last {len(durations)} successful runs"
        + (f" (at least {floor_s:.0f} s)" if multiple * median < floor_s else "")
    )


@dataclass
class RecentRunsDeadline(BaseDeadlineReference):
    """A deadline reference: when the run was queued plus :func:`deadline_seconds` of the DAG's last
    successful runs, computed by the scheduler with its database session when the run is created."""

    multiple: float = MULTIPLE
    default_s: float = DEFAULT_S
    floor_s: float = FLOOR_S
    runs: int = RUNS
    min_runs: int = MIN_RUNS
    required_kwargs: ClassVar[set[str]] = {"dag_id", "run_id"}

    def _evaluate_with(self, *, session: Any, dag_id: str, run_id: str, **_: Any) -> datetime:
        from airflow.models import DagRun
        from airflow.utils.state import DagRunState
        from sqlalchemy import select

        rows = session.execute(
            select(DagRun.start_date, DagRun.end_date)
            .where(
                DagRun.dag_id == dag_id,
                DagRun.state == DagRunState.SUCCESS,
                DagRun.start_date.isnot(None),
                DagRun.end_date.isnot(None),
            )
            .order_by(DagRun.start_date.desc())
            .limit(self.runs)
        ).all()
        durations = [(end - start).total_seconds() for start, end in rows]
        seconds, how = deadline_seconds(
            durations,
            multiple=self.multiple,
            default_s=self.default_s,
            floor_s=self.floor_s,
            min_runs=self.min_runs,
        )
        queued = session.execute(
            select(DagRun.queued_at).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
        ).scalar()
        start = queued or datetime.now(UTC)
        log.info(
            "Deadline of %s %s: %s after %s (%s)", dag_id, run_id, timedelta(seconds=seconds), start, how
        )
        return start + timedelta(seconds=seconds)

    def serialize_reference(self) -> dict[str, Any]:
        return {
            **super().serialize_reference(),
            "multiple": self.multiple,
            "default_s": self.default_s,
            "floor_s": self.floor_s,
            "runs": self.runs,
            "min_runs": self.min_runs,
        }

    @classmethod
    def deserialize_reference(cls, reference_data: dict[str, Any]) -> RecentRunsDeadline:
        return cls(
            multiple=float(reference_data.get("multiple", MULTIPLE)),
            default_s=float(reference_data.get("default_s", DEFAULT_S)),
            floor_s=float(reference_data.get("floor_s", FLOOR_S)),
            runs=int(reference_data.get("runs", RUNS)),
            min_runs=int(reference_data.get("min_runs", MIN_RUNS)),
        )


def _number(settings: Mapping[str, Any], key: str, cluster: str, minimum: float) -> float | None:
    value = settings.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        from airflow_provider_kafka_zk.clusters import ClusterFileError

        raise ClusterFileError(
            f"clusters.{cluster}.{key} must be a number of seconds >= {minimum:g}, not {value!r}"
        )
    return float(value)


def under_dags_test(argv: Sequence[str] | None = None) -> bool:
    """Whether this process is ``airflow dags test``. It runs the DAG from its own parse, and Airflow
    3.3.2 then keeps the deadline definitions in the run's DAG where the scheduler keeps their
    database ids: a run that succeeds fails in ``DagRun.update_state`` (``DeadlineAlert.get_by_id``
    of a dict: "'dict' object has no attribute 'hex'"). No scheduler evaluates a deadline there."""
    args = list(sys.argv if argv is None else argv)
    words = [a for a in args[1:] if not a.startswith("-")]
    return bool(args) and Path(args[0]).name == "airflow" and words[:2] == ["dags", "test"]


def deadline_alert(cluster: str, settings: Mapping[str, Any]) -> Any:
    """The daily DAG's ``DeadlineAlert`` for ``cluster`` (None: ``deadline_s = 0``, or under
    ``airflow dags test``: :func:`under_dags_test`).

    :param settings: the cluster's settings (``deadline_s``, ``deadline_multiple``, ``deadline_default_s``).
    """
    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    fixed = _number(settings, "deadline_s", cluster, 0)
    callback = AsyncCallback(page_late_run, kwargs={"cluster": cluster})
    if fixed == 0:
        return None
    if under_dags_test():
        log.info(
            "airflow dags test: the daily DAG of %s runs without its deadline (no scheduler here)", cluster
        )
        return None
    if fixed is not None:
        return DeadlineAlert(
            reference=DeadlineReference.DAGRUN_QUEUED_AT,
            interval=timedelta(seconds=fixed),
            callback=callback,
            name=f"kafka_zk late daily run of {cluster}",
        )
    reference = RecentRunsDeadline(
        multiple=_number(settings, "deadline_multiple", cluster, 1) or MULTIPLE,
        default_s=_number(settings, "deadline_default_s", cluster, 1) or DEFAULT_S,
    )
    return DeadlineAlert(
        reference=reference,
        interval=timedelta(0),
        callback=callback,
        name=f"kafka_zk late daily run of {cluster}",
    )


def record_start(context: Mapping[str, Any]) -> None:
    """``on_execute_callback`` of every daily task: when and where this try started (XCom
    :data:`STARTED_XCOM_KEY`), for a late run's page. Never raises."""
    ti = context.get("ti")
    try:
        ti.xcom_push(
            key=STARTED_XCOM_KEY,
            value={"at": datetime.now(UTC).isoformat(), "try": ti.try_number, "host": socket.gethostname()},
        )
    except Exception as exc:
        log.warning("Could not record this task's start for a late-run page: %s: %s", type(exc).__name__, exc)


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------


def _text(state: Any) -> str:
    """A state as its value (``running``), whether the comms gave an enum or text."""
    return str(getattr(state, "value", state))


def _split_key(key: str) -> tuple[str, int]:
    """``GetTaskStates``' key: ``task`` or ``task_<map index>`` for a mapped instance."""
    head, _, tail = key.rpartition("_")
    return (head, int(tail)) if head and tail.isdigit() else (key, -1)


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _ago(since: datetime, now: datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min {rest % 60} s"


def where_it_hangs(
    states: Mapping[str, Any], started: Mapping[str, Mapping[str, Any]], now: datetime
) -> list[tuple[str, str]]:
    """(task, what) for every unfinished task, running ones first: state, since when, try, host.

    :param states: ``GetTaskStates``' map for the run (``task`` / ``task_<i>`` -> state).
    :param started: the same keys -> :func:`record_start`'s record (absent: not started).
    """
    out = []
    for key, state in states.items():
        if str(state) not in UNFINISHED:
            continue
        task, index = _split_key(key)
        name = f"{task}[{index}]" if index >= 0 else task
        text = str(state)
        record = started.get(key) or {}
        at = _parse_time(record.get("at"))
        if at is not None and str(state) in ("running", "deferred", "up_for_retry", "awaiting_input"):
            text += f": try {record.get('try')} started {at:%Y-%m-%d %H:%M:%S} UTC ({_ago(at, now)} ago"
            text += f", on {record['host']})" if record.get("host") else ")"
        out.append((name, text))
    order = {"running": 0, "deferred": 1, "up_for_retry": 2, "awaiting_input": 3}
    return sorted(out, key=lambda item: (order.get(item[1].split(":")[0].split(" ")[0], 9), item[0]))


def late_run_incident(
    *,
    dag_id: str,
    run_id: str,
    started: datetime | None,
    deadline: datetime | None,
    hanging: Sequence[tuple[str, str]],
    now: datetime,
    run_url: str | None = None,
) -> Any:
    """The page's one incident: the run, how late, and where it hangs."""
    from airflow_provider_kafka_zk.alerts.incidents import TASKS, Incident

    running = [name for name, what in hanging if what.startswith(("running", "deferred"))]
    where = (
        f"it hangs in {', '.join(running)}"
        if running
        else (
            "no task is running: " + ", ".join(f"{n} {w}" for n, w in hanging[:3])
            if hanging
            else "no task is unfinished"
        )
    )
    took = f" {_ago(started, now)} after it started" if started else ""
    late = f"; its deadline was {deadline:%Y-%m-%d %H:%M:%S} UTC" if deadline else ""
    return Incident(
        key=f"deadline:{dag_id}",
        source=TASKS,
        severity="error",
        title=f"{dag_id} is late: still running{took}",
        summary=f"Run {run_id} of {dag_id} is still running{took}{late}; {where}.",
        action=(
            "Open the task's log (the run link): a ZooKeeper that answers slowly, an SSH host that never "
            "closes the session or a Spark job waiting for executors are the usual causes. The run goes on; "
            "it pages again only through its own alert task when it ends."
        ),
        facts=tuple(hanging),
        magnitude=len(running),
        link=run_url,
    )


def _page(cluster: str, context: Mapping[str, Any]) -> dict[str, Any]:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from airflow.sdk.execution_time.xcom import XCom

    from airflow_provider_kafka_zk.alerts.incidents import NEW, Classified, merge
    from airflow_provider_kafka_zk.alerts.operators import deliver_once, raise_unless_delivered
    from airflow_provider_kafka_zk.alerts.record import alerts_root, stamp
    from airflow_provider_kafka_zk.alerts.render import alert_content, render_text
    from airflow_provider_kafka_zk.alerts.settings import parse_notify
    from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
    from airflow_provider_kafka_zk.clusters import cluster_setting, load_clusters
    from airflow_provider_kafka_zk.plugins.links import run_url

    dag_run = dict(context.get("dag_run") or {})
    dag_id, run_id = str(dag_run.get("dag_id")), str(dag_run.get("dag_run_id") or dag_run.get("run_id"))
    now = datetime.now(UTC)
    state = _text(RuntimeTaskInstance.get_dagrun_state(dag_id=dag_id, run_id=run_id))
    if state not in ("running", "queued"):
        log.info("%s %s ended (%s) before its deadline was handled: nothing to page", dag_id, run_id, state)
        return {"paged": False, "why": f"the run is {state}"}

    found = (RuntimeTaskInstance.get_task_states(dag_id=dag_id, run_ids=[run_id]) or {}).get(run_id) or {}
    states = {key: _text(value) for key, value in found.items()}
    started: dict[str, Any] = {}
    for key, task_state in states.items():
        if str(task_state) in ("running", "deferred", "up_for_retry", "awaiting_input"):
            task, index = _split_key(key)
            try:
                started[key] = XCom.get_one(
                    key=STARTED_XCOM_KEY, dag_id=dag_id, task_id=task, run_id=run_id, map_index=index
                )
            except Exception as exc:  # the page goes out without "since when"
                log.warning("Start of %s unknown: %s: %s", key, type(exc).__name__, exc)
    hanging = where_it_hangs(states, {k: v for k, v in started.items() if isinstance(v, Mapping)}, now)
    url = run_url(dag_id, run_id)
    incident = late_run_incident(
        dag_id=dag_id,
        run_id=run_id,
        started=_parse_time(dag_run.get("start_date")),
        deadline=_parse_time((context.get("deadline") or {}).get("deadline_time")),
        hanging=hanging,
        now=now,
        run_url=url,
    )
    content = alert_content(
        cluster=cluster,
        dag_id=dag_id,
        run_id=run_id,
        run_url=url,
        report_url=None,
        classified=[Classified(i, NEW) for i in merge(cluster, [incident])],
    )
    settings = parse_notify(load_clusters().get(cluster, {}).get("notify"), f"clusters.{cluster}.notify")
    base = artefacts_url(
        str(cluster_setting({"cluster": cluster}, "base_path")),
        cluster_setting({"cluster": cluster}, "artefacts_conn_id") or None,
    )
    run_after = _parse_time(dag_run.get("run_after")) or now
    folder = f"{alerts_root(base, cluster, dag_id)}/{stamp(run_after)}"
    deliveries = deliver_once(settings, content, _read(folder), PAGE_KEY)
    record = {
        "cluster": cluster,
        "dag_id": dag_id,
        "run_id": run_id,
        "written_at": now.isoformat(),
        "deadline": (context.get("deadline") or {}),
        "where": [list(h) for h in hanging],
        "page_key": list(PAGE_KEY),
        "deliveries": deliveries,
        "content": content,
    }
    _write(folder, record)
    log.warning("%s", render_text(content))
    raise_unless_delivered(log, deliveries, f"{folder}/{DEADLINE_FILE}")
    return {"paged": True, "where": hanging}


def _read(folder: str) -> dict[str, Any] | None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(f"{folder}/{DEADLINE_FILE}")
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None


def _write(folder: str, record: Mapping[str, Any]) -> None:
    import fsspec

    from airflow_provider_kafka_zk.artefacts.files import write_atomically

    fs, path = fsspec.core.url_to_fs(folder)
    write_atomically(
        fs, f"{path.rstrip('/')}/{DEADLINE_FILE}", json.dumps(record, indent=1, default=str).encode()
    )


async def page_late_run(cluster: str, context: Mapping[str, Any] | None = None, **_: Any) -> str:
    """The deadline's callback (an ``AsyncCallback``, run by the triggerer): page the cluster's
    ``notify`` channels once -- the run, how late, which tasks are unfinished, since when -- unless
    the run has ended meanwhile. ``<base>/<cluster>/alerts/<dag>/<run stamp>/deadline.json`` records
    it (a second call reaches only the channels the first did not).

    :param cluster: the cluster (the DAG's).
    :param context: what the scheduler hands a deadline callback: ``dag_run`` (the run as the REST
        API shows it) and ``deadline`` (its id and time).
    """
    outcome = await asyncio.to_thread(_page, cluster, dict(context or {}))
    # text, never a dict: Airflow 3.3.2 stores the return value in callback.output (a text column),
    # and a dict there fails the triggerer's commit (psycopg2 "can't adapt type 'dict'")
    return json.dumps(outcome, default=str)
