"""The README's demo command with --run-dag (what scripts/demo.sh runs): the DAG on the demo cluster,
and the report it writes as a browser shows it to the on-call engineer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One run of ``demo --run-dag --repair`` (several minutes): its stdout and workdir."""
    workdir = tmp_path_factory.mktemp("demo-run") / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--run-dag",
            "--repair",
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, workdir


def _report(out: str) -> Path:
    return Path(next(line.split("report: ", 1)[1] for line in out.splitlines() if "  report: " in line))


def test_demo_runs_the_daily_hygiene_dag_then_plans_and_carries_out_the_topic_id_repair(demo_run):
    out, workdir = demo_run
    assert "Daily hygiene audit of 'demo' (engine spark" in out
    assert (
        "coverage: 6 of 6 brokers' disks read; brokers 3 and 4 not running (not registered in ZooKeeper)"
        in out
    )
    act_now = out.split("act now (the report's first section):", 1)[1].split("by check:", 1)[0]
    assert act_now.index("[CRITICAL] topicId mismatch on clickstream") < act_now.index(
        "[CRITICAL] Broker 3 (127.0.0.5) is down"
    )
    assert "before starting broker 4: airflow dags trigger kafka_zk_pre_restart_check" in act_now
    assert "[CRITICAL] topic-id-mismatch: topicId mismatch on clickstream (KAFKA-14190)" in out
    assert "[CRITICAL] topic-id-missing-in-zookeeper: inventory-updates" in out
    assert "[CRITICAL] broker-down: broker 3 is down" in out
    assert "The DAG run FAILED at its gate, as expected here" in out
    # the pre-restart check of the crashed broker 4 finds its damaged offset index, with the remedy
    check = out.split("Pre-restart check of broker 4", 1)[1].split("topicId repair", 1)[0]
    # segment 0 is below broker 4's recovery point: Kafka 3.3.1 starts without looking at its index
    assert "[ERROR] sensor-readings-0 on broker 4: entry 14: offset 424 not greater" in check
    assert "so it stays until the index is removed" in check
    assert (
        "sensor-readings-0/00000000000000000000.index" in check and "Kafka rebuilds a missing index" in check
    )
    # then the repair plan for those two topics, as a dry run next to the audit
    assert "topicId repair, DRY RUN" in out and "nothing was changed; exit 0" in out
    assert "- clickstream: DIVERGED: ZooKeeper has " in out
    assert "- inventory-updates: PRECURSOR: the topic znode has no topic_id" in out
    assert "delete /controller (controller at plan time: broker 2)" in out
    report = _report(out)
    assert report.is_file() and report.is_relative_to(workdir)
    # --repair: the real run waits for a person; the demo shows the plan and its hash, approves over REST
    asked = out.split("kafka_zk_topic_id_repair waits in its approve task for a person", 1)[1]
    shown = re.search(r"- sha256 ([0-9a-f]{64})", asked).group(1)
    assert asked.index("Repair the topic ids of 2 topic(s) on cluster demo (KAFKA-14190)") < asked.index(
        shown
    )
    assert "Approved over REST (PATCH http://127.0.0.1:" in asked and "by admin at " in asked
    # the demo's dry run left its own record (not_needed) beside the real run's: pick the real one by
    # what it says, never by the order the file system lists the run folders in
    records = [
        json.loads(path.read_text())
        for path in sorted((workdir / "artefacts" / "demo" / "topic-id-repair").glob("*/approval.json"))
    ]
    [record] = [r for r in records if r["decision"] == "approved"]
    assert record["plan"]["sha256"] == shown
    # carried out against the simulated controller and brokers, verified by the audit rules
    repaired = out.split("topicId repair, carried out", 1)[1]
    assert f"Approved by admin at {record['decided_at']}" in repaired
    assert "- clickstream: diverged -> consistent (write_back)" in repaired
    assert "- inventory-updates: precursor -> consistent (write_back)" in repaired
    assert "audit: no topic-id finding for these topics" in repaired
    assert (
        "steps completed: write-topic-id:clickstream, write-topic-id:inventory-updates, move-controller,"
        in repaired
    )


def _ids_on_disk(workdir: Path, topic: str) -> set[str]:
    """The topic ids in the demo brokers' own partition.metadata files (not the audit's reading)."""
    ids = set()
    for path in (workdir / "hosts").glob(f"broker-*/**/{topic}-[0-9]*/partition.metadata"):
        match = re.search(r"^topic_id: (\S+)$", path.read_text(), flags=re.M)
        assert match, path
        ids.add(match.group(1))
    return ids


def test_the_demo_report_in_a_browser_names_broker_3_and_the_clickstream_id_to_write_back(demo_run, tmp_path):
    """Chromium opens the demo run's report.html: its first section is what to act on, visible
    without expanding anything. The repair ran afterwards, so the id is read from the report's own
    run (findings.parquet) and checked against the brokers' files: the write-back left them alone."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and chromedriver, (
        "Debian's chromium and chromium-driver are missing: run scripts/setup.sh"
    )
    out, workdir = demo_run
    report = _report(out)
    (disk_id,) = _ids_on_disk(workdir, "clickstream")
    summary = json.loads((report.parent / "summary.json").read_text())
    options = Options()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    try:
        driver.get(report.as_uri())
        sections = driver.find_elements(By.TAG_NAME, "section")
        first = sections[0]
        assert first.get_attribute("id") == "act-now" and first.is_displayed()
        driver.save_screenshot(str(tmp_path / "report.png"))
        first.screenshot(str(tmp_path / "act-now.png"))
        text = first.text  # what the browser renders: folded evidence (<details>) is not in it
        assert text.startswith("Act now")
        assert first.location["y"] < sections[1].location["y"]
        cards = {
            card.find_element(By.TAG_NAME, "h3").text: card.text
            for card in first.find_elements(By.CLASS_NAME, "incident")
        }
        broker = next(t for title, t in cards.items() if title.endswith("Broker 3 (127.0.0.5) is down"))
        assert "2 partition(s) offline (audit-rf1-0, audit-rf1-1)" in broker
        assert "Start broker 3 on 127.0.0.5" in broker
        clickstream = next(t for title, t in cards.items() if "topicId mismatch on clickstream" in title)
        assert f"id to write back\n{disk_id}" in clickstream
        conf = (
            '{"cluster": "demo", "topics": ["clickstream", "inventory-updates"], "strategy": "write_back", '
            '"dry_run": true}'
        )
        assert f"airflow dags trigger kafka_zk_topic_id_repair --conf '{conf}'" in clickstream
        assert "INCONSISTENT_TOPIC_ID" not in text
        assert summary["act_now"][0]["incident"] == "topic-id:clickstream"
    finally:
        driver.quit()
    for name in ("report.png", "act-now.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_demo_maintenance_window_drains_restarts_and_puts_the_cluster_back(tmp_path):
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_kafka_zk.testing.demo",
            "--maintenance",
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "Verification: OK; 1 moved partition(s) checked" in out  # the drain of broker 2
    # each real run waited for a person: the demo printed the plan and approved it over REST
    for dag_id in ("kafka_zk_pre_maintenance_drain", "kafka_zk_post_maintenance"):
        asked = out.split(f"{dag_id} waits in its approve task for a person", 1)[1]
        assert re.search(r"- sha256 [0-9a-f]{64}", asked.split("Approved over REST", 1)[0]), dag_id
        assert "Approved over REST (PATCH http://127.0.0.1:" in asked, dag_id
    assert out.count("Approved by admin at ") == 2  # both reports open with the decision
    after = out.split("After maintenance", 1)[1]
    assert "restores drain run " in after and "(run id manual__" in after
    assert "moved back: 1 of 1 partition(s)" in after
    assert "verified: partitions back in place with full ISRs, no leader imbalance" in after
