"""Run folders are keyed on what every run has (``run_after`` and the run id), never on a logical date.

A run created by ``airflow dags trigger`` or ``POST /api/v2/dags/{id}/dagRuns`` has no logical date:
Airflow 3 leaves ``ts``, ``ts_nodash``, ``ds``, ``logical_date`` out of its template context, and the
DAGs' Jinja environment is StrictUndefined, so a template naming one fails the task (a real drain
moved its partitions, then failed in every ``inventory_after`` task). These tests render every
templated field of every shipped DAG with exactly that context; the production harness
(``tests/integration/test_production_dags.py``) runs them for real.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kafka_zk.operators.inventory import TS_FORMAT, _resolve_ts, run_key, run_key_of

RUN_AFTER = datetime(2026, 11, 22, 6, 18, 0, 123456, tzinfo=UTC)
RUN_ID = "manual__2026-11-22T06:18:00.123456+00:00_AbCdEfGh"
LOGICAL_DATE_KEYS = ("ts", "ts_nodash", "ts_nodash_with_tz", "ds", "ds_nodash", "logical_date")


def test_run_key_sorts_by_run_after_and_tells_runs_apart():
    key = run_key(RUN_ID, RUN_AFTER)
    assert key.startswith(RUN_AFTER.strftime(TS_FORMAT) + "-")
    assert key == run_key(RUN_ID, RUN_AFTER)  # a retry or a cleared task finds the same folder
    assert run_key("manual__other", RUN_AFTER) != key  # same run_after, another run
    later = run_key("a", RUN_AFTER.replace(second=1))
    earlier = run_key("z", RUN_AFTER)
    assert sorted([later, earlier]) == [earlier, later]
    assert not set(key) & set(":+/ ")  # object stores and shells


def test_run_key_of_naive_run_after_is_utc():
    naive = RUN_AFTER.replace(tzinfo=None)
    assert run_key(RUN_ID, naive) == run_key(RUN_ID, RUN_AFTER)


def test_resolve_ts_needs_no_logical_date():
    dag_run = SimpleNamespace(run_id=RUN_ID, run_after=RUN_AFTER, logical_date=None)
    assert _resolve_ts(None, {"dag_run": dag_run}) == run_key(RUN_ID, RUN_AFTER)
    assert _resolve_ts("given", {"dag_run": dag_run}) == "given"


class _Ti:
    """The ``ti`` of a template context: xcom_pull answers what the upstream tasks return."""

    dag_id = "d"
    task_id = "t"
    run_id = RUN_ID
    map_index = -1
    try_number = 1

    def xcom_pull(self, task_ids: Any = None, **_: Any) -> Any:
        return {
            "path": "/artefacts/c/snapshots/x",
            "plan_dir": "/artefacts/c/drain/x",
            "inventory_ts": "k",
            "brokers": [1],
        }


def _context_without_logical_date(dag: Any, params: dict[str, Any]) -> dict[str, Any]:
    """What Airflow 3.3's task runner puts in a template context for a run with no logical date
    (``airflow.sdk.execution_time.task_runner``: the logical-date keys only when it has one)."""
    dag_run = SimpleNamespace(
        dag_id=dag.dag_id, run_id=RUN_ID, run_after=RUN_AFTER, logical_date=None, conf={}, run_type="manual"
    )
    return {
        "dag": dag,
        "dag_run": dag_run,
        "run_id": RUN_ID,
        "ti": _Ti(),
        "task_instance": _Ti(),
        "params": params,
        "conf": SimpleNamespace(),
        "macros": SimpleNamespace(),
        "var": SimpleNamespace(),
        **(dag.user_defined_macros or {}),
    }


def _form_values(dag: Any, cluster: str) -> dict[str, Any]:
    values = {}
    for key, param in dag.params.items():
        value = param.value if param.has_value else None
        values[key] = value
    values.update(cluster=cluster, brokers=[1], broker=1)
    return values


@pytest.fixture
def clusters_file(tmp_path, monkeypatch):
    path = tmp_path / "clusters.toml"
    path.write_text(
        f'[clusters.c]\nbase_path = "{tmp_path / "artefacts"}"\nengine = "in-process"\nlog_scan = true\n'
    )
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(path))
    return path


def test_every_template_of_every_shipped_dag_renders_without_a_logical_date(clusters_file):
    from jinja2 import StrictUndefined

    from airflow_provider_kafka_zk.dags import create_all_dags

    dags = create_all_dags()
    assert {
        "kafka_zk_daily_hygiene_c",
        "kafka_zk_pre_maintenance_drain",
        "kafka_zk_post_maintenance",
        "kafka_zk_topic_id_repair",
        "kafka_zk_deletion_cleanup",
        "kafka_zk_pre_restart_check",
    } <= set(dags)
    rendered = 0
    for dag in dags.values():
        env = dag.get_template_env()
        assert env.undefined is StrictUndefined or issubclass(env.undefined, StrictUndefined)
        params = _form_values(dag, "c") if dag.params else {}
        context = _context_without_logical_date(dag, params)
        for task in dag.tasks:
            fields = dict(getattr(task, "partial_kwargs", {}) or {})
            fields.update(getattr(task, "expand_input", SimpleNamespace(value={})).value or {})
            for name in task.template_fields:
                value = (
                    getattr(task, name, None) if not fields else fields.get(name, getattr(task, name, None))
                )
                for text in _strings(value):
                    if "{{" not in text:
                        continue
                    for key in LOGICAL_DATE_KEYS:  # a name of the context, not part of another name
                        assert not re.search(rf"(?<![\w.]){key}(?!\w)", text), (dag.dag_id, name, text)
                    env.from_string(text).render(**context)  # StrictUndefined raises on ts_nodash & co
                    rendered += 1
    assert rendered > 40  # every manual DAG's folder templates were among them


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_old_folder_template_fails_without_a_logical_date(clusters_file):
    """The check above is real: the expression the DAGs used before fails in this context."""
    from jinja2.exceptions import UndefinedError

    from airflow_provider_kafka_zk.dags import pre_maintenance_drain

    dag = pre_maintenance_drain.build_dag()
    context = _context_without_logical_date(dag, _form_values(dag, "c"))
    old = "{{ (ts_nodash or dag_run.run_after.strftime('%Y%m%dT%H%M%S')) ~ '-after' }}"
    with pytest.raises(UndefinedError):
        dag.get_template_env().from_string(old).render(**context)


def test_the_drain_folders_agree(clusters_file):
    """The drain's ``inventory_after`` folder and its verify task's inventory path name one folder,
    and it is the run key the operators use by default (plan folder, first inventory)."""
    from airflow_provider_kafka_zk.dags import pre_maintenance_drain

    dag = pre_maintenance_drain.build_dag()
    context = _context_without_logical_date(dag, _form_values(dag, "c"))
    env = dag.get_template_env()
    after = env.from_string(dag.get_task("inventory_after").partial_kwargs["inventory_ts"]).render(**context)
    verify = env.from_string(dag.get_task("verify").inventory_path).render(**context)
    key = run_key_of(context["dag_run"])
    assert after == f"{key}-after"
    assert verify.endswith(f"/c/inventory/{key}-after")
