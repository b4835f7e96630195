"""The audit job's report on the demo's incident cluster (broker 3 stopped cleanly, broker 4 crashed,
clickstream's topicId differing from its replicas'), every broker's disk read as the demo reads them:
what on-call reads at 3 a.m."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib import resources

import pytest

from airflow_provider_kafka_zk.spark_jobs import audit as audit_job
from airflow_provider_kafka_zk.spark_jobs.package import build_package_zip
from airflow_provider_kafka_zk.testing.audit_artefacts import write_inventory_dirs, write_snapshot_rows
from airflow_provider_kafka_zk.testing.simulator import healthy_cluster, incident_cluster
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows

NOW_MS = 1_795_327_800_000
TAKEN = datetime(2026, 11, 22, 6, 0, tzinfo=UTC)


def _visible(page: str) -> str:
    """What a reader sees without expanding anything: no <details>, no markup."""
    text = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def _act_now(page: str) -> str:
    start = page.index('<section id="act-now">')
    return _visible(page[start : page.index("</section>", start)])


def _run(tmp_path, *, previous: bool) -> tuple[dict, str, list]:
    cluster = incident_cluster()
    base = tmp_path / "artefacts"
    if previous:  # the day before, every broker was registered
        write_snapshot_rows(
            base, "demo", cluster_rows(healthy_cluster(name="demo")), TAKEN - timedelta(days=1)
        )
    snapshot = write_snapshot_rows(base, "demo", cluster_rows(cluster), TAKEN)
    facts = {
        b: {
            "broker.id": b,
            "inter.broker.protocol.version": str(cluster.spec.ibp),
            "min.insync.replicas": cluster.spec.min_insync_replicas,
            "kafka_version": cluster.spec.kafka_version,
        }
        for b in cluster.brokers
    }
    summaries = {  # what the inventory over SSH records of each host, the stopped ones too
        b: {
            "host": broker.spec.host,
            "log_dirs": [
                {"path": "/data/kafka-logs-0", "exists": True, "clean_shutdown": broker.clean_shutdown}
            ],
        }
        for b, broker in cluster.brokers.items()
    }
    inventory = write_inventory_dirs(
        base,
        "demo",
        "20261122T060000",
        audit_dirs(cluster),
        broker_facts=facts,
        expected=sorted(cluster.brokers),
        broker_summaries=summaries,
    )
    out = tmp_path / "findings"
    summary = audit_job.run_audit(
        str(base), "demo", snapshot=str(snapshot), inventory=str(inventory), out=str(out), now_ms=NOW_MS
    )
    return summary, (out / "report.html").read_text(), audit_job.read_findings(str(out))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("first"), previous=False)


@pytest.fixture(scope="module")
def second_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("second"), previous=True)


def test_the_stopped_broker_leads_the_parquet_the_summary_and_the_page(first_run):
    summary, page, findings = first_run
    assert [(f.check, f.topic, f.broker_id) for f in findings[:3]] == [  # findings.parquet's order
        ("topic-id-mismatch", "clickstream", None),
        ("broker-down", None, 3),
        ("broker-down", None, 4),
    ]
    assert summary["top"][1].startswith("[CRITICAL] broker-down: broker 3 is down")
    # clickstream's repair comes first: brokers 3 and 4 hold its replicas and, started before the
    # write-back, would reject its LeaderAndIsr (clickstream-2, offline, would stay so)
    assert [(i["incident"], i["title"]) for i in summary["act_now"]] == [
        ("topic-id:clickstream", "topicId mismatch on clickstream (KAFKA-14190)"),
        ("broker:3", "Broker 3 (127.0.0.5) is down"),
        ("broker:4", "Broker 4 (127.0.0.6) is down"),
        (
            "topic-id:inventory-updates",
            "inventory-updates has no topic_id in ZooKeeper (KAFKA-14190 at the next controller failover)",
        ),
    ]
    assert audit_job.read_summary(summary["out"])["act_now"] == summary["act_now"]
    first = _act_now(page)
    visible = _visible(page)
    assert visible.index("Act now") < visible.index("Every other finding")
    assert first.index("topicId mismatch on clickstream") < first.index("Broker 3 (127.0.0.5) is down")
    # broker 3's card: what it causes, named, and what to do about a broker that is already down
    card = first[first.index("Broker 3 (127.0.0.5) is down") : first.index("Broker 4 (127.0.0.6) is down")]
    assert "First repair the topicId of clickstream (card above" in card
    assert card.index("First repair the topicId") < card.index("Start broker 3 on 127.0.0.5")
    assert "2 partition(s) offline (audit-rf1-0, audit-rf1-1)" in card
    assert "under min.insync.replicas" in card and "under-replicated" in card
    assert "deletion of legacy-orders blocked" in card
    assert "Start broker 3 on 127.0.0.5: it shut down cleanly" in card
    assert "reassign its" in card and "Keep its disk" in card
    assert "drain" not in card.lower()  # an already-down broker is not drained before stopping


def test_the_topic_id_card_shows_both_ids_the_id_to_write_back_and_the_dags_command(first_run):
    _, page, findings = first_run
    first = _act_now(page)
    card = first[first.index("topicId mismatch on clickstream") : first.index("Broker 3 (127.0.0.5) is down")]
    mismatch = next(f for f in findings if f.check == "topic-id-mismatch")
    zk_id = mismatch.evidence["zookeeper_topic_id"]
    (disk_id,) = mismatch.evidence["ids_on_disk"]
    assert f"ZooKeeper's topic_id {zk_id}" in card
    assert f"partition.metadata on the replicas {disk_id}" in card
    assert f"id to write back {disk_id}" in card
    conf = '{"cluster": "demo", "topics": ["clickstream", "inventory-updates"], "strategy": "write_back", "dry_run": '
    assert f"airflow dags trigger kafka_zk_topic_id_repair --conf '{conf}true}}'" in card
    assert f"airflow dags trigger kafka_zk_topic_id_repair --conf '{conf}false}}'" in card
    # the 3.3.1 brokers' own log line, never the error code no broker logs
    assert (
        f'"Topic ID in memory: {disk_id} does not match the topic ID for partition clickstream-0 received: '
        f'{zk_id}."' in card
    )
    assert "provided in the request" not in card  # every broker is 3.3.1
    assert "Brokers 3 and 4 are down and would reject them too once started" in card
    crashed = first[first.index("Broker 4 (127.0.0.6) is down") :]
    assert "(clickstream-2 stays offline)" in crashed  # its last in-sync replica, on broker 4
    visible = _visible(page)
    assert "INCONSISTENT_TOPIC_ID" not in visible
    assert "Restore the missing replicas" not in visible


def test_advice_fits_each_brokers_state(first_run):
    _, page, findings = first_run
    visible = _visible(page)
    drain = (
        "airflow dags trigger kafka_zk_pre_maintenance_drain --conf "
        '\'{"cluster": "demo", "brokers": [1], "scope": "rf1", "dry_run": true}\''
    )
    assert drain in visible  # broker 1 runs: drain its RF=1 partitions before stopping it
    assert '"brokers": [3]' not in visible  # broker 3 is down: nothing to drain
    crashed = next(f for f in findings if f.check == "broker-down" and f.broker_id == 4)
    check = 'airflow dags trigger kafka_zk_pre_restart_check --conf \'{"cluster": "demo", "broker": 4}\''
    assert f"Then: Broker 4 crashed: before starting it, run {check}" in crashed.action
    rf = next(f for f in findings if f.check == "under-min-isr" and f.topic == "metrics-rf1")
    assert rf.summary.startswith("replication factor 1 < min.insync.replicas=2")
    assert "Set min.insync.replicas=1 on metrics-rf1" in rf.action and "Start broker" not in rf.action


def test_header_and_coverage_say_what_is_true(first_run, second_run):
    summary, page, _ = first_run
    visible = _visible(page)
    assert "previous None" not in visible
    assert (
        "previous snapshot: none: no complete snapshot of demo is older than this one, so nothing was compared"
        in visible
    )
    assert summary["previous_snapshot_taken_at"] is None
    assert summary["snapshot_taken_at"] == "2026-11-22 06:00:00 UTC"
    assert summary["coverage_text"] == (
        "6 of 6 brokers' disks read; brokers 3 and 4 not running (not registered in ZooKeeper)"
    )
    assert summary["brokers"]["not_registered"] == [3, 4]
    assert f"Coverage : {summary['coverage_text']}." in visible
    assert "every live broker" not in visible and "Coverage PARTIAL" not in visible
    later, later_page, later_findings = second_run
    assert later["previous_snapshot_text"] == "2026-11-21 06:00:00 UTC (20261121T060000.000000Z)"
    assert "previous snapshot: 2026-11-21 06:00:00 UTC (20261121T060000.000000Z)" in _visible(later_page)
    root = next(f for f in later_findings if f.check == "broker-down" and f.broker_id == 3)
    assert "last seen registered in the snapshot of 2026-11-21 06:00 UTC" in root.summary


def test_the_template_ships_in_the_package_and_in_the_spark_zip(tmp_path):
    assert resources.files("airflow_provider_kafka_zk.templates").joinpath("report.html.j2").is_file()
    archive = build_package_zip(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import airflow_provider_kafka_zk.reports as r; "
        "assert r.__file__.startswith(sys.argv[1]), r.__file__; "
        "print(r.render_html([], {'cluster': 'z<b>', 'by_severity': {}}))"
    )
    page = subprocess.run(
        [sys.executable, "-c", code, archive], check=True, capture_output=True, text=True
    ).stdout
    assert "Kafka cluster audit: z&lt;b&gt;" in page and "No findings." in page
