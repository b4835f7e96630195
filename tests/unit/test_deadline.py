"""The daily DAG's deadline: how long a run may take, the reference Airflow serializes and the
scheduler finds through the plugin, and what the late-run page says (where it hangs, since when)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_kafka_zk.alerts import deadline as dl


def test_deadline_seconds_default_until_enough_runs_then_a_multiple_of_the_median() -> None:
    assert dl.deadline_seconds([100, 200], default_s=3600)[0] == 3600
    seconds, how = dl.deadline_seconds([100, 400, 200, 10_000], multiple=3)
    assert seconds == 900 and "median 300 s of the last 4 successful runs" in how
    assert dl.deadline_seconds([10, 10, 10], multiple=3)[0] == dl.FLOOR_S  # never a hair trigger
    assert dl.deadline_seconds([], default_s=20)[0] == 20  # an explicit default is taken as given


def test_recent_runs_reference_round_trips_through_airflows_serializer() -> None:
    from airflow.serialization.decoders import decode_deadline_reference
    from airflow.serialization.encoders import encode_deadline_reference

    ref = dl.RecentRunsDeadline(multiple=2.5, default_s=60)
    encoded = encode_deadline_reference(ref)
    assert encoded["__class_path"] == "airflow_provider_kafka_zk.alerts.deadline.RecentRunsDeadline"
    assert encoded["multiple"] == 2.5 and encoded["default_s"] == 60
    # the scheduler finds the class among the plugins' deadline references (the provider's plugin)
    decoded = decode_deadline_reference(encoded)
    assert decoded.inner_ref == ref
    assert decoded.inner_ref.required_kwargs == {"dag_id", "run_id"}


def test_daily_dag_carries_the_deadline_and_records_task_starts(tmp_path, monkeypatch) -> None:
    from airflow.sdk.definitions.deadline import DagRunQueuedAtDeadline

    from airflow_provider_kafka_zk.dags.daily_hygiene import build_dag

    base = {
        "kafka_zookeeper_conn_id": "zk",
        "ssh_conn_id": "ssh",
        "engine": "in-process",
        "fail_on": "critical",
        "schedule": None,
        "retries": 0,
        "retry_delay_s": 1,
        "retry_exponential_backoff": 2.0,
        "max_retry_delay_s": 1,
        "deletion_check": False,
        "log_scan": False,
        "base_path": str(tmp_path),
    }
    adaptive = build_dag("c", base)
    (alert,) = adaptive.deadline
    assert isinstance(alert.reference, dl.RecentRunsDeadline) and alert.interval == timedelta(0)
    assert alert.callback.path == "airflow_provider_kafka_zk.alerts.deadline.page_late_run"
    assert alert.callback.kwargs == {"cluster": "c"}
    assert all(dl.record_start in (t.on_execute_callback or []) for t in adaptive.tasks)

    fixed = build_dag("c", {**base, "deadline_s": 900})
    (alert,) = fixed.deadline
    assert isinstance(alert.reference, DagRunQueuedAtDeadline) and alert.interval == timedelta(seconds=900)
    assert not build_dag("c", {**base, "deadline_s": 0}).deadline

    from airflow_provider_kafka_zk.clusters import ClusterFileError

    with pytest.raises(ClusterFileError, match="deadline_s"):
        build_dag("c", {**base, "deadline_s": "soon"})


def test_where_it_hangs_names_the_unfinished_tasks_with_their_start() -> None:
    now = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
    states = {
        "snapshot": "success",
        "brokers": "success",
        "inventory_0": "success",
        "inventory_4": "running",
        "coverage": None,
        "notify_check": "success",
        "gate": "up_for_retry",
    }
    started = {
        "inventory_4": {"at": "2026-01-01T02:18:00+00:00", "try": 1, "host": "worker-2"},
        "gate": {"at": "2026-01-01T02:59:00+00:00", "try": 2},
    }
    hanging = dl.where_it_hangs({k: str(v) for k, v in states.items()}, started, now)
    assert hanging == [
        ("inventory[4]", "running: try 1 started 2026-01-01 02:18:00 UTC (42 min 0 s ago, on worker-2)"),
        ("gate", "up_for_retry: try 2 started 2026-01-01 02:59:00 UTC (1 min 0 s ago)"),
        ("coverage", "None"),
    ]
    incident = dl.late_run_incident(
        dag_id="kafka_zk_daily_hygiene_eu1",
        run_id="scheduled__x",
        started=now - timedelta(hours=3, minutes=12),
        deadline=now - timedelta(minutes=20),
        hanging=hanging,
        now=now,
    )
    assert incident.title == "kafka_zk_daily_hygiene_eu1 is late: still running 3 h 12 min after it started"
    assert "it hangs in inventory[4]" in incident.summary
    assert "its deadline was 2026-01-01 02:40:00 UTC" in incident.summary
    assert incident.facts == tuple(hanging) and incident.key == "deadline:kafka_zk_daily_hygiene_eu1"


def test_record_start_never_fails_the_task() -> None:
    class Ti:
        try_number = 3

        def __init__(self, fail: bool) -> None:
            self.fail, self.pushed = fail, {}

        def xcom_push(self, key: str, value: object) -> None:
            if self.fail:
                raise RuntimeError("API down")
            self.pushed[key] = value

    ok = Ti(False)
    dl.record_start({"ti": ok})
    assert ok.pushed[dl.STARTED_XCOM_KEY]["try"] == 3
    dl.record_start({"ti": Ti(True)})  # logged, not raised


def test_the_callback_answers_text(monkeypatch) -> None:
    """Airflow 3.3.2 stores a callback's return value in a text column: a dict there fails the
    triggerer's commit (and stops its loop)."""
    import asyncio
    import json

    monkeypatch.setattr(
        dl, "_page", lambda cluster, context: {"paged": True, "where": [("snapshot", "running")]}
    )
    answer = asyncio.run(dl.page_late_run("c", context={}))
    assert isinstance(answer, str) and json.loads(answer)["paged"] is True


def test_no_deadline_under_airflow_dags_test() -> None:
    """Airflow 3.3.2's ``dags test`` fails a succeeded run of a DAG with a deadline (it looks the
    deadline up by a dict instead of its id): the daily DAG leaves it out there."""
    assert dl.under_dags_test(["/venv/bin/airflow", "dags", "test", "kafka_zk_daily_hygiene_eu1"])
    assert dl.under_dags_test(["/venv/bin/airflow", "-v", "dags", "test", "x", "-c", "{}"])
    assert not dl.under_dags_test(["/venv/bin/airflow", "scheduler"])
    assert not dl.under_dags_test(["/venv/bin/airflow", "dags", "reserialize"])
    assert not dl.under_dags_test(["/venv/bin/pytest", "dags", "test"])
