"""The metrics: one registry (README list, dashboard, statsd mapping made from it), figures from what
runs write, publishing that never fails or holds up a task (a Pushgateway that is down or silent, a
StatsD listener on loopback that receives the lines Airflow's own Stats layer sends)."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.figures import audit_figures
from airflow_provider_kafka_zk.kafka.findings import Finding, Severity
from airflow_provider_kafka_zk.kafka.steps import DrainBatch, PartitionMove, ThrottleSet
from airflow_provider_kafka_zk.metrics import dashboard as dash
from airflow_provider_kafka_zk.metrics import definitions as defs
from airflow_provider_kafka_zk.metrics import publish as pub
from airflow_provider_kafka_zk.metrics.figures import (
    approval_wait_seconds,
    daily_samples,
    maintenance_samples,
    run_result,
    stage_seconds,
    step_figures,
)

ROOT = Path(__file__).resolve().parents[2]


# -- one registry ---------------------------------------------------------------------------------


def test_names_follow_prometheus_conventions() -> None:
    for m in defs.METRICS:
        assert re.fullmatch(r"kafka_zk_[a-z0-9_]+", m.name)
        assert m.help.endswith(".") and m.labels[0] == "cluster", m.name
        assert (m.kind == defs.COUNTER) == m.name.endswith("_total")
        assert "topic" not in m.labels and "run_id" not in m.labels  # unbounded labels
    assert len({m.name for m in defs.METRICS}) == len(defs.METRICS)
    with pytest.raises(ValueError, match="_total"):
        defs.Metric("kafka_zk_x", defs.COUNTER, "x.", ("cluster",), defs.DAILY)
    with pytest.raises(ValueError, match="unknown label"):
        defs.Metric("kafka_zk_x", defs.GAUGE, "x.", ("cluster", "topic"), defs.DAILY)


def test_readme_metric_list_is_generated_from_the_registry() -> None:
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(defs.README_BEGIN), readme.index(defs.README_END) + len(defs.README_END)
    assert readme[start:end] == defs.markdown_table(), (
        "README is stale: paste `python -m airflow_provider_kafka_zk.metrics list`"
    )


def test_shipped_dashboard_is_the_builders_and_uses_only_defined_metrics() -> None:
    assert dash.shipped_dashboard() == dash.dashboard_text(), (
        "grafana_dashboard.json is stale: python -m airflow_provider_kafka_zk.metrics dashboard > "
        "airflow_provider_kafka_zk/metrics/grafana_dashboard.json"
    )
    board = json.loads(dash.shipped_dashboard())
    assert dash.unknown_metrics(board) == []
    used = {m for _, expr in dash.queries(board) for m in re.findall(r"kafka_zk_[a-z0-9_]+", expr)}
    shown = {m.name for m in defs.METRICS if m.group != defs.DELIVERY}
    assert shown <= used, f"metrics no panel shows: {sorted(shown - used)}"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for target in panel.get("targets", ()):
            assert target["datasource"]["uid"] == "${datasource}"
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "cluster", "dag_id"}


def test_statsd_mapping_turns_every_untagged_name_back_into_labels() -> None:
    mapping = defs.statsd_mapping("airflow")
    sample = pub.Sample(
        "kafka_zk_findings", {"cluster": "eu.1", "check": "broker-down", "severity": "error"}, 2
    )
    name = pub.stat_name(sample, tags=False)
    assert name == "kafka_zk_findings.eu_1.broker-down.error"
    assert '  - match: "airflow.kafka_zk_findings.*.*.*"' in mapping
    assert mapping.count("- match:") == len(defs.METRICS)


def test_command_prints_the_dashboard_and_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_provider_kafka_zk.metrics.__main__ import main

    assert main(["dashboard"]) == 0
    assert json.loads(capsys.readouterr().out)["uid"] == dash.UID
    assert main(["list"]) == 0
    assert defs.README_BEGIN in capsys.readouterr().out
    assert main(["nope"]) == 2


# -- figures --------------------------------------------------------------------------------------


def _finding(check: str, severity: Severity, **kw: object) -> Finding:
    return Finding(check=check, severity=severity, cluster="c", summary="s", action="a", **kw)  # type: ignore[arg-type]


def test_audit_figures_add_up_the_findings_evidence() -> None:
    findings = [
        _finding(
            "rf1-exposure-broker", Severity.WARNING, broker_id=1, evidence={"partitions": 3, "bytes": 300}
        ),
        _finding(
            "rf1-exposure-broker", Severity.ERROR, broker_id=4, evidence={"partitions": 2, "bytes": None}
        ),
        _finding("topic-id-mismatch", Severity.CRITICAL, topic="a"),
        _finding("topic-id-replicas-disagree", Severity.ERROR, topic="a"),
        _finding("topic-id-missing-in-zookeeper", Severity.WARNING, topic="b"),
        _finding("topic-id-resolved-since-previous", Severity.INFO, topic="c"),
        _finding("delete-dirs-past-delay", Severity.WARNING, broker_id=2, evidence={"bytes": 10}),
        _finding("orphan-partition-dirs", Severity.ERROR, broker_id=2, evidence={"bytes": 5}),
        _finding("stray-dirs", Severity.WARNING, broker_id=3, evidence={"bytes": 7}),
        _finding("broker-down", Severity.ERROR, broker_id=4),
    ]
    figures = audit_figures(
        findings,
        pending_deletions=["x", "y"],
        deletion_marker_ctimes={"x": 1_000, "y": 61_000},
        now_ms=121_000,
    )
    assert figures == {
        "rf1_exposure": {"1": {"partitions": 3, "bytes": 300}, "4": {"partitions": 2, "bytes": None}},
        "topic_id_trouble_topics": 2,
        "pending_deletions": 2,
        "oldest_pending_deletion_age_s": 120.0,
        "leftover_bytes": {"2": 15, "3": 7},
        "brokers_down": 1,
    }


def test_daily_samples_from_summary_and_durations() -> None:
    summary = {
        "by_check": {"broker-down": {"error": 1}, "rf1-exposure-broker": {"warning": 1, "error": 1}},
        "figures": {
            "rf1_exposure": {"1": {"partitions": 3, "bytes": 300}, "4": {"partitions": 2, "bytes": None}},
            "topic_id_trouble_topics": 2,
            "pending_deletions": 1,
            "oldest_pending_deletion_age_s": 9.5,
            "leftover_bytes": {"2": 15},
            "brokers_down": 1,
        },
    }
    crumbs = [
        {"task_id": "snapshot", "map_index": -1, "duration": 2.5},
        {"task_id": "inventory", "map_index": 0, "duration": 3.0},
        {"task_id": "inventory", "map_index": 1, "duration": 7.0},
        {"task_id": "gate", "map_index": -1, "duration": 1.0},
    ]
    stages = stage_seconds(crumbs)
    assert stages == {"snapshot": 2.5, "inventory": 7.0}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for s in daily_samples("c", summary, stages=stages, run_seconds=60.0, ended_at=1e9, success=False)
    }
    assert (
        samples[
            ("kafka_zk_findings", (("check", "rf1-exposure-broker"), ("cluster", "c"), ("severity", "error")))
        ]
        == 1
    )
    assert samples[("kafka_zk_rf1_exposure_bytes", (("broker", "1"), ("cluster", "c")))] == 300
    assert (
        "kafka_zk_rf1_exposure_bytes",
        (("broker", "4"), ("cluster", "c")),
    ) not in samples  # disk not read
    assert samples[("kafka_zk_rf1_exposure_partitions", (("broker", "4"), ("cluster", "c")))] == 2
    assert samples[("kafka_zk_daily_last_run_success", (("cluster", "c"),))] == 0.0
    assert samples[("kafka_zk_pending_deletion_oldest_age_seconds", (("cluster", "c"),))] == 9.5
    assert (
        samples[("kafka_zk_daily_stage_duration_seconds", (("cluster", "c"), ("stage", "inventory")))] == 7.0
    )
    for name, labels in samples:
        assert set(dict(labels)) == set(defs.metric(name).labels)
    # the audit did not finish: only the run's own figures
    bare = daily_samples("c", None, stages={}, run_seconds=None, ended_at=1e9, success=False)
    assert {s.name for s in bare} == {
        "kafka_zk_daily_last_run_timestamp_seconds",
        "kafka_zk_daily_last_run_success",
    }


def _drain_steps() -> list[object]:
    def moves(n: int, size: int) -> tuple[PartitionMove, ...]:
        return tuple(PartitionMove("t", i, (1,), (2,), size_bytes=size) for i in range(n))

    return [
        ThrottleSet(
            id="batch-1:throttle:brokers/1",
            entity_type="brokers",
            entity_name="1",
            keys=(),
            batch_step="batch-1",
        ),
        DrainBatch(id="batch-1", batch=0, batches=2, moves=moves(2, 100)),
        DrainBatch(id="batch-2", batch=1, batches=2, moves=moves(3, 1000)),
    ]


def test_step_figures_of_a_drain_part_way() -> None:
    steps = _drain_steps()
    figures = step_figures(steps, {"batch-1:throttle:brokers/1", "batch-1"}, rate=100)
    assert figures == {
        "steps": 3,
        "steps_done": 2,
        "partitions": 5,
        "bytes": 3200,
        "partitions_left": 3,
        "bytes_left": 3000,
        "batches": 2,
        "batch": 2,
        "throttle_bytes_per_second": 100,
        "estimated_remaining_s": 30.0,  # broker 2 receives and broker 1 sends 3000 bytes at 100 B/s
    }
    done = step_figures(steps, {s.id for s in steps}, rate=100)
    assert (done["partitions_left"], done["batch"], done["estimated_remaining_s"]) == (0, 2, 0)
    assert step_figures(steps[:1], set()) == {"steps": 1, "steps_done": 0}  # no reassignment


def test_maintenance_samples_result_and_approval_wait() -> None:
    approval = {
        "decision": "approved",
        "requested_at": "2026-01-01T00:00:00+00:00",
        "decided_at": "2026-01-01T00:05:00+00:00",
    }
    assert approval_wait_seconds(approval, now=0) == 300
    assert (
        approval_wait_seconds({**approval, "decision": "pending", "decided_at": None}, now=1767226200) == 600
    )
    assert approval_wait_seconds({"decision": "not_required"}, now=0) == 0.0
    assert approval_wait_seconds(None, now=0) is None
    assert run_result(finished=False, failed=False, approval=None) == "running"
    assert run_result(finished=True, failed=True, approval={"decision": "rejected"}) == "rejected"
    assert run_result(finished=True, failed=True, approval=approval) == "failed"
    samples = maintenance_samples(
        "c", "kafka_zk_pre_maintenance_drain", figures={"partitions_left": 3}, result="failed", now=5.0,
        approval=approval, writes=9, dry_run=False,
    )  # fmt: skip
    values = {(s.name, s.labels.get("result")): s.value for s in samples}
    assert values[("kafka_zk_maintenance_partitions_left", None)] == 3
    assert values[("kafka_zk_maintenance_cluster_writes", None)] == 9
    assert values[("kafka_zk_maintenance_result", "failed")] == 1.0
    assert values[("kafka_zk_maintenance_result", "succeeded")] == 0.0
    assert sum(v for (n, _), v in values.items() if n == "kafka_zk_maintenance_result") == 1.0


# -- settings -------------------------------------------------------------------------------------


def test_settings_off_by_default_section_then_cluster_file(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("METRICS_PUSHGATEWAY_URL", "METRICS_AIRFLOW", "METRICS_TIMEOUT_S"):
        monkeypatch.delenv(f"AIRFLOW__KAFKA_ZK__{key}", raising=False)
    assert not pub.metrics_settings("c", {"c": {}}).enabled
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__METRICS_PUSHGATEWAY_URL", "http://pg:9091/")
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__METRICS_TIMEOUT_S", "0.5")
    assert pub.metrics_settings("c", {"c": {}}) == pub.MetricsSettings("http://pg:9091", False, 0.5)
    assert pub.metrics_settings("c", {"c": {"metrics": False}}) == pub.MetricsSettings()
    own = pub.metrics_settings(
        "c", {"c": {"metrics_pushgateway_url": "http://other:1", "metrics_airflow": True}}
    )
    assert own == pub.MetricsSettings("http://other:1", True, 0.5)


# -- publishing never fails or stalls a task ------------------------------------------------------

SAMPLE = [pub.Sample("kafka_zk_brokers_down", {"cluster": "c"}, 1)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_pushgateway_that_is_down_is_logged_counted_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    pub._failed_at.clear()
    settings = pub.MetricsSettings(url, False, 2.0)
    with caplog.at_level(logging.WARNING):
        first = pub.publish(SAMPLE, cluster="c", job="j", grouping={"cluster": "c"}, settings=settings)
    assert first.failed and "URLError" in first.receivers["pushgateway"]
    assert "Metrics not delivered to the Pushgateway" in caplog.text and "the task goes on" in caplog.text
    second = pub.publish(SAMPLE, cluster="c", job="j", grouping={"cluster": "c"}, settings=settings)
    assert second.receivers["pushgateway"].startswith("skipped: a push to it failed")
    assert second.seconds < 0.5
    pub._failed_at.clear()


def test_a_silent_pushgateway_costs_at_most_the_timeout() -> None:
    """A receiver that accepts the connection and never answers: the push gives up at the timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        pub._failed_at.clear()
        started = time.monotonic()
        outcome = pub.publish(
            SAMPLE,
            cluster="c",
            job="j",
            grouping={"cluster": "c"},
            settings=pub.MetricsSettings(url, False, 0.3),
        )
        elapsed = time.monotonic() - started
    pub._failed_at.clear()
    assert outcome.failed and "timed out" in outcome.receivers["pushgateway"].lower()
    assert elapsed < 5  # bounded by the 0.3 s timeout (generous for a loaded machine)


def test_off_publishes_nothing_and_reads_nothing() -> None:
    outcome = pub.publish(SAMPLE, cluster="c", job="j", grouping={}, settings=pub.MetricsSettings())
    assert outcome.receivers == {} and outcome.samples == 0


@pytest.mark.parametrize("influx", [True, False])
def test_statsd_lines_through_airflows_own_stats_layer(monkeypatch: pytest.MonkeyPatch, influx: bool) -> None:
    """Airflow's Stats (the Task SDK's, as a task has it) sends our gauges; a loopback UDP listener
    receives them: with InfluxDB-style tags (statsd_exporter reads them) or labels in the name."""
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(5)
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.getsockname()[1]))
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
        monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", str(influx))
        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
        try:
            samples = [
                pub.Sample("kafka_zk_rf1_exposure_bytes", {"cluster": "eu1", "broker": "3"}, 1234),
                pub.Sample(
                    "kafka_zk_metrics_push_failures_total", {"cluster": "eu1", "receiver": "pushgateway"}, 1
                ),
            ]
            assert pub.through_airflow(samples) == 2
            lines = {listener.recv(2048).decode() for _ in samples}
        finally:  # back to what a process without [metrics] has
            stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
    if influx:
        assert lines == {
            "airflow.kafka_zk_rf1_exposure_bytes,cluster=eu1,broker=3:1234.0|g",
            "airflow.kafka_zk_metrics_push_failures_total,cluster=eu1,receiver=pushgateway:1|c",
        }
    else:
        assert lines == {
            "airflow.kafka_zk_rf1_exposure_bytes.eu1.3:1234.0|g",
            "airflow.kafka_zk_metrics_push_failures_total.eu1.pushgateway:1|c",
        }
