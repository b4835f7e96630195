"""Every shipped DAG, run the way production runs it (issue 24): the provider's wheel installed in a
fresh virtualenv (``pip install '<wheel>[spark]' apache-airflow-providers-postgres -c
constraints.txt``), Airflow's metadata DB on PostgreSQL (Debian's package, a private cluster on
loopback), LocalExecutor, and ``airflow api-server``, ``scheduler``, ``dag-processor`` and
``triggerer`` as four processes (``airflow_provider_kafka_zk.testing.airflow_production``).
Connections are stored with ``airflow connections add``.

The deployment and its simulated clusters are the session's (``conftest.py``): ``prod`` (healthy,
RF=1 topics, its simulated controller carrying out reassignments in a thread), ``incident`` (the
demo's incident cluster; it alerts by e-mail) and ``healthy`` (on a ZooKeeper of its own, stopped and
started again in the outage test). Every DAG is triggered three ways and must succeed each time:

* ``POST /api/v2/dags/{id}/dagRuns`` with ``logical_date: null`` (Airflow 3's default; the run has no
  ``ts``/``ds``: the bug of issue 24), including a real drain (its wait on the reassignment deferred
  to the triggerer) and the post-maintenance move-back of that drain by run id -- both real runs
  wait in their ``approve`` task until the test approves them over REST, as a person would
  (issue 25);
* ``airflow dags trigger`` (no logical date either), the topicId repair by the exact command line
  the audit report prints;
* the trigger form in headless Chromium, filled in field by field as a person does.

All runs are triggered up front and run concurrently (Airflow serialises each mutating DAG itself:
``max_active_runs=1``), with the session's alert scenarios (``test_production_scheduled_alerts.py``); the
tests then look at the results. One harness per session: the venv is built once (about a minute with
a warm pip cache). ``KAFKA_ZK_PRODUCTION_VENV=<dir>`` reuses a venv built before (for iterating on
the tests, never in CI).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from airflow_provider_kafka_zk.kafka.approval import PLAN_INPUTS, plan_digest
from airflow_provider_kafka_zk.kafka.audit import repair_commands
from airflow_provider_kafka_zk.kafka.deletion_cleanup import cleanup_commands
from airflow_provider_kafka_zk.operators._run import run_key
from airflow_provider_kafka_zk.testing.airflow_production import (
    AirflowProduction,
    AirflowRunFailed,
    tail,
    triggered_run_id,
)

# The first test pays for the deployment and for every run (they run concurrently, once): more than
# the suite's 600 s per test on two shared cores.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

DAILY = "kafka_zk_daily_hygiene_{}"
KRAFT = "kafka_zk_kraft_migration_readiness"
DRAIN = "kafka_zk_pre_maintenance_drain"
POST = "kafka_zk_post_maintenance"
REPAIR = "kafka_zk_topic_id_repair"
RESTART = "kafka_zk_pre_restart_check"
TEST_ALERT = "kafka_zk_test_alert"
MIGRATION = "kafka_zk_kraft_migration"
CLEANUP = "kafka_zk_deletion_cleanup"
CLEANUP_CONF = {"cluster": "incident", "topics": ["old-logs"]}  # the incident cluster's leftovers
UNDO = "kafka_zk_undo"
DRAINED = 2  # prod's broker with RF=1 partitions
REPAIR_TOPICS = ["clickstream", "inventory-updates"]  # the incident cluster's KAFKA-14190 topics
RUN_TIMEOUT = 1500  # generous: two cores shared by 4 services, LocalExecutor workers, Spark and Chromium


# ----------------------------------------------------------------------------- the runs
@dataclass
class Run:
    path: str  # rest | cli | browser
    dag_id: str
    conf: dict[str, Any]
    run_id: str = ""
    state: str = ""
    error: str = ""
    seconds: float = 0.0
    triggered_at: float = 0.0
    states_seen: dict[str, set[str]] = field(default_factory=dict)
    approval: dict[str, Any] = field(default_factory=dict)  # the HITL request it showed, when approved


@dataclass
class Campaign:
    runs: list[Run]
    seconds: float

    def of(self, path: str) -> list[Run]:
        return [r for r in self.runs if r.path == path]


def _watch(run: Run):
    def seen(task_instances: list[dict[str, Any]]) -> None:
        for ti in task_instances:
            run.states_seen.setdefault(ti["task_id"], set()).add(str(ti["state"]))

    return seen


def _approving(airflow: AirflowProduction, run: Run):
    """The watch of a real run: record its states, and approve its plan over REST the moment the
    request can be read there (an answer at any moment is honoured:
    ``test_production_approval_race.py``)."""
    states = _watch(run)

    def seen(task_instances: list[dict[str, Any]]) -> None:
        states(task_instances)
        if run.approval or not any(ti["task_id"] == "approve" for ti in task_instances):
            return
        for request in airflow.unanswered_approvals(run.dag_id, run.run_id):
            airflow.respond(run.dag_id, run.run_id, "approve", "Approve", "reviewed by the campaign")
            run.approval = request

    return seen


def _wait(airflow: AirflowProduction, run: Run) -> None:
    watch = _approving(airflow, run) if run.conf.get("dry_run") is False else _watch(run)
    try:
        airflow.wait_for_run(run.dag_id, run.run_id, timeout=RUN_TIMEOUT, watch=watch)
        run.state = "success"
    except AirflowRunFailed as exc:
        run.state, run.error = "failed", str(exc)
    run.seconds = time.monotonic() - run.triggered_at


REST_RUNS = [
    ("daily", DAILY.format("prod"), {}),
    ("drain", DRAIN, {"cluster": "prod", "brokers": [DRAINED], "dry_run": False, "poll_interval_s": 0.5}),
    ("repair", REPAIR, {"cluster": "incident", "topics": REPAIR_TOPICS, "dry_run": True}),
    ("restart", RESTART, {"cluster": "prod", "broker": DRAINED}),
    ("kraft", KRAFT, {"cluster": "prod", "fail_on_blockers": False}),
    ("test alert", TEST_ALERT, {"cluster": "incident"}),  # the cluster that alerts by e-mail
    (
        "migration",
        MIGRATION,
        {"cluster": "kraft", "direction": "forward"},
    ),  # a dry run: the plan to provision
    ("cleanup", CLEANUP, CLEANUP_CONF),  # a dry run: plans the moves, checks them on every host
]


@pytest.fixture(scope="module")
def campaign(deployment, alert_scenarios, browser_session) -> Campaign:
    """Trigger every DAG over REST, the CLI and the browser form, then wait for every run (the
    alert scenarios started first run meanwhile)."""
    airflow = deployment.airflow
    started = time.monotonic()
    for dag_id in {
        DAILY.format("prod"),
        DAILY.format("healthy"),
        DRAIN,
        POST,
        REPAIR,
        RESTART,
        KRAFT,
        TEST_ALERT,
        MIGRATION,
        CLEANUP,
        UNDO,
    }:
        airflow.unpause(dag_id)
    runs: dict[str, Run] = {}

    def trigger(key: str, run: Run) -> None:
        run.triggered_at = time.monotonic()
        try:
            if run.path == "rest":
                run.run_id = airflow.trigger_rest(run.dag_id, run.conf)
            elif run.path == "cli":
                run.run_id = airflow.trigger_cli(run.dag_id, run.conf)
            else:
                run.run_id = browser_session.trigger(run.dag_id, run.conf)
        except Exception as exc:  # recorded: the test of that path fails with it
            run.state, run.error = "not triggered", f"{type(exc).__name__}: {exc}"
        runs[key] = run

    for name, dag_id, conf in REST_RUNS:
        trigger(f"rest {name}", Run("rest", dag_id, conf))
    # The CLI: the commands a person types, on the healthy cluster (and the incident one for the
    # repair, by the exact command line the audit report prints).
    for name, dag_id, conf in [
        ("daily", DAILY.format("healthy"), {}),
        ("drain", DRAIN, {"cluster": "healthy", "brokers": [1], "dry_run": True}),
        ("post", POST, {"cluster": "healthy", "brokers": [1], "dry_run": True}),
        ("restart", RESTART, {"cluster": "healthy", "broker": 1}),
        ("kraft", KRAFT, {"cluster": "healthy", "fail_on_blockers": False}),
        ("test alert", TEST_ALERT, {"cluster": "incident"}),
        ("migration", MIGRATION, {"cluster": "kraft", "direction": "forward", "dry_run": True}),
    ]:
        trigger(f"cli {name}", Run("cli", dag_id, conf))
    # the topicId repair and the deletion cleanup by the exact command lines their findings print
    for key, dag_id, printed in (
        (
            "cli repair",
            REPAIR,
            repair_commands({"cluster": "incident", "topics": REPAIR_TOPICS, "strategy": "auto"})["dry_run"],
        ),
        ("cli cleanup", CLEANUP, cleanup_commands(CLEANUP_CONF["cluster"], CLEANUP_CONF["topics"])[0]),
    ):
        run = Run("cli", dag_id, {"printed": printed})
        run.triggered_at = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", printed + " --output json"],
            env=airflow.env,
            cwd=airflow.home,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode == 0:
            run.run_id = triggered_run_id(done.stdout)
        else:
            run.state, run.error = "not triggered", done.stdout[-2000:] + done.stderr[-2000:]
        runs[key] = run
    # The browser: the trigger form, field by field.
    for name, dag_id, conf in [
        ("restart", RESTART, {"cluster": "incident", "broker": 0}),
        ("repair", REPAIR, {"cluster": "incident", "topics": REPAIR_TOPICS}),
        ("drain", DRAIN, {"cluster": "healthy", "brokers": [1]}),
        ("post", POST, {"cluster": "healthy", "brokers": [1]}),
        ("daily", DAILY.format("healthy"), {}),  # in-process (prod's audit on Spark runs once, over REST)
        ("kraft", KRAFT, {"cluster": "healthy", "fail_on_blockers": False}),
        ("test alert", TEST_ALERT, {"cluster": "incident"}),
        ("migration", MIGRATION, {"cluster": "kraft", "direction": "forward"}),
    ]:
        trigger(f"browser {name}", Run("browser", dag_id, conf))

    # the move-back of the real drain, by its run id, once the drain is done
    drain = runs["rest drain"]
    if drain.run_id:
        _wait(airflow, drain)
    post = Run(
        "rest",
        POST,
        {"cluster": "prod", "drain_run": drain.run_id, "dry_run": False, "poll_interval_s": 0.5},
    )
    if drain.state == "success":
        trigger("rest post", post)
    else:
        post.state, post.error = "not triggered", "the drain it undoes failed"
        runs["rest post"] = post
    # the undo, once both are done: the move-back's over REST (a dry run: the plan moves its partitions
    # back where the drain had put them), the drain's by the CLI (nothing left to undo: the move-back
    # put everything back, and its throttles are gone -- the DAG skips the approval and says so)
    undo_rest = Run("rest", UNDO, {"cluster": "prod", "run_id": post.run_id, "dry_run": True})
    undo_cli = Run("cli", UNDO, {"cluster": "prod", "run_id": drain.run_id, "dry_run": False})
    if post.run_id:
        _wait(airflow, post)
    for key, run in (("rest undo", undo_rest), ("cli undo", undo_cli)):
        if post.state == "success":
            trigger(key, run)
        else:
            run.state, run.error = "not triggered", "the runs it undoes failed"
            runs[key] = run
    for run in runs.values():
        if run.run_id and not run.state:
            _wait(airflow, run)
    return Campaign(list(runs.values()), time.monotonic() - started)


def _report(campaign: Campaign, path: str) -> str:
    return "\n".join(
        f"{r.dag_id} {r.run_id or '-'}: {r.state} ({r.seconds:.0f} s) {r.error}" for r in campaign.of(path)
    )


ALL_DAGS = {DAILY.format("prod"), DRAIN, POST, REPAIR, RESTART, KRAFT, TEST_ALERT, MIGRATION, CLEANUP}
"""Every DAG the provider ships (a daily one per cluster: prod's)."""
FORM_DAGS = ALL_DAGS - {CLEANUP}
"""The DAGs the browser triggers from their forms (the cleanup's form has no field another form
lacks: REST and CLI only, to keep the campaign short)."""


def test_every_dag_succeeds_triggered_over_rest_without_a_logical_date(deployment, campaign):
    runs = campaign.of("rest")
    assert {r.dag_id for r in runs} == ALL_DAGS | {UNDO}
    for run in runs:
        assert run.state == "success", _report(campaign, "rest")
        assert deployment.airflow.run(run.dag_id, run.run_id)["logical_date"] is None


def test_every_dag_succeeds_triggered_by_airflow_dags_trigger(deployment, campaign):
    runs = campaign.of("cli")
    assert {r.dag_id.replace("healthy", "prod") for r in runs} == ALL_DAGS | {UNDO}
    for run in runs:
        assert run.state == "success", _report(campaign, "cli")
        assert deployment.airflow.run(run.dag_id, run.run_id)["logical_date"] is None


def test_every_dag_succeeds_from_its_trigger_form_in_a_browser(deployment, campaign):
    runs = campaign.of("browser")
    # the undo needs a run id of a finished run: it is triggered over REST and the CLI only
    assert {r.dag_id.replace("healthy", "prod") for r in runs} == FORM_DAGS
    for run in runs:
        assert run.state == "success", _report(campaign, "browser")
        dag_run = deployment.airflow.run(run.dag_id, run.run_id)
        assert dag_run["run_type"] == "manual", dag_run
        for key, value in run.conf.items():
            assert dag_run["conf"].get(key) == value, (key, dag_run["conf"])


def test_the_test_alert_reached_the_mailbox_from_every_path(deployment, campaign):
    """``kafka_zk_test_alert`` on the cluster that alerts by e-mail: each run (REST, CLI, form) sent
    its test message to the SMTP server on loopback, and says which run sent it."""
    runs = [r for r in campaign.runs if r.dag_id == TEST_ALERT]
    assert len(runs) == 3 and all(r.state == "success" for r in runs), _report(campaign, "rest")
    subject = "[kafka-zk] incident: TEST alert (the on-call path works)"
    tests = [m for m in deployment.smtp.messages if m.message["Subject"] == subject]
    assert len(tests) == 3, [m.message["Subject"] for m in deployment.smtp.messages]
    for run in runs:
        link = f"/dags/{TEST_ALERT}/runs/{urllib.parse.quote(run.run_id, safe='')}"
        assert sum(link in m.html() for m in tests) == 1, run.run_id


def test_the_real_drain_waited_in_the_triggerer_and_was_put_back(deployment, campaign):
    airflow = deployment.airflow
    drain = next(r for r in campaign.of("rest") if r.dag_id == DRAIN)
    assert drain.state == "success", drain.error
    # the API showed the execute task deferred while the run went on ...
    assert "deferred" in drain.states_seen["execute"], drain.states_seen
    # ... and the triggerer ran its trigger: the trigger's own ZooKeeper sessions (the provider's
    # kazoo logger) are in the triggerer's log. (Its "N triggers currently running" line is a
    # once-a-minute sample: a short wait falls between two.)
    triggerer_log = airflow.services_log("triggerer")
    assert "airflow_provider_kafka_zk.kazoo" in triggerer_log, tail(airflow.home / "triggerer.log")
    # both waited for a person's approval, and carried out exactly the plan the approval showed
    post = next(r for r in campaign.of("rest") if r.dag_id == POST)
    for run, folder_kind, writers in (
        (drain, "drain", {"execute": {"throttle_bytes_per_sec": 50 * 1024 * 1024}}),
        (post, "post-maintenance", {"move_back": {"throttle_bytes_per_sec": 50 * 1024 * 1024}}),
    ):
        assert run.approval, f"{run.dag_id}: no approval request seen"
        shown = run.approval["body"].split("- sha256 `", 1)[1].split("`", 1)[0]
        dag_run = airflow.run(run.dag_id, run.run_id)
        key = run_key(run.run_id, datetime.fromisoformat(dag_run["run_after"].replace("Z", "+00:00")))
        folder = deployment.artefacts / "prod" / folder_kind / key
        record = json.loads((folder / "approval.json").read_text())
        assert (record["decision"], record["decided_by"]["name"], record["plan"]["sha256"]) == (
            "approved",
            "admin",
            shown,
        )
        files = {name: (folder / name).read_bytes() for name in PLAN_INPUTS}
        settings = {
            task: {**values, "kafka_zookeeper_conn_id": "kafka_zk_prod"} for task, values in writers.items()
        }
        # clearing the throttles writes too: covered by the same approval (issue 31)
        settings["clear_throttles"] = {"kafka_zookeeper_conn_id": "kafka_zk_prod", "force": False}
        if run is post:  # the election is a writing task of the same plan
            brokers = json.loads(files["plan.json"])["returning_brokers"]
            settings["elect_preferred_leaders"] = {
                "brokers": brokers,
                "topics": None,
                "kafka_zookeeper_conn_id": "kafka_zk_prod",
            }
        assert plan_digest(files, settings).sha256 == shown  # the hash is of exactly these inputs
        execute = next(iter(writers))
        # every try's log: a resumption after the trigger may run as a later try (under load, Airflow
        # 3.3.2's scheduler can queue it twice and fail the first; the retry resumes from progress.json)
        log = "\n".join(airflow.task_log(run.dag_id, run.run_id, execute, t) for t in range(1, 4))
        assert f"carrying out the approved plan sha256 {shown} (approved by admin)" in log, log[-3000:]
    # partitions moved off the drained broker, then back by the post-maintenance run
    assert post.state == "success", post.error
    drained = {k for k, r in deployment.prod_assignment.items() if r == (DRAINED,)}
    assert drained, "prod has RF=1 partitions on the drained broker"
    # the run's folders carry its run key (run_after + run id; no logical date): the plan, and the
    # inventory after the move that issue 24's drain never wrote
    dag_run = airflow.run(DRAIN, drain.run_id)
    key = run_key(drain.run_id, datetime.fromisoformat(dag_run["run_after"].replace("Z", "+00:00")))
    plan = json.loads((deployment.artefacts / "prod" / "drain" / key / "plan.json").read_text())
    assert plan["run_id"] == drain.run_id
    moved = {(m["topic"], int(m["partition"])) for batch in plan["batches"] for m in batch}
    assert moved == drained, plan["batches"]
    assert (deployment.artefacts / "prod" / "inventory" / f"{key}-after").is_dir()
    now = deployment.assignment("prod")
    assert {k: now[k] for k in drained} == {k: (DRAINED,) for k in drained}  # moved back


def test_the_undo_plans_the_way_back_of_a_move_back_and_nothing_for_a_drain_already_undone(
    deployment, campaign
):
    airflow = deployment.airflow
    undos = {r.path: r for r in campaign.runs if r.dag_id == UNDO}
    assert set(undos) == {"rest", "cli"} and all(r.state == "success" for r in undos.values()), [
        (r.path, r.state, r.error) for r in undos.values()
    ]
    post = next(r for r in campaign.of("rest") if r.dag_id == POST)
    drain = next(r for r in campaign.of("rest") if r.dag_id == DRAIN)

    def folder(run: Run):
        dag_run = airflow.run(UNDO, run.run_id)
        return (
            deployment.artefacts
            / "prod"
            / "undo"
            / run_key(run.run_id, datetime.fromisoformat(dag_run["run_after"].replace("Z", "+00:00")))
        )

    moved = json.loads((folder(undos["rest"]) / "plan.json").read_text())
    assert moved["undo"]["original"]["run_id"] == post.run_id
    drained = {k for k, r in deployment.prod_assignment.items() if r == (DRAINED,)}
    back = {(m["topic"], m["partition"]) for b in moved["batches"] for m in b}
    assert back == drained and all(m["current"] == [DRAINED] for b in moved["batches"] for m in b)
    assert "DRY RUN" in airflow.task_log(UNDO, undos["rest"].run_id, "execute", 1)
    nothing = (folder(undos["cli"]) / "report.txt").read_text()
    assert nothing.startswith(f"Nothing to undo: everything {DRAIN} run {drain.run_id} changed is already")
    states = {ti["task_id"]: ti["state"] for ti in airflow.task_instances(UNDO, undos["cli"].run_id)}
    assert states["approve"] == "skipped" and states["execute"] == "skipped" and states["report"] == "success"


def test_retries_after_a_zookeeper_outage(deployment, campaign):
    """ZooKeeper stops in the middle of a run and comes back on the same port: the task that met
    the outage fails, is retried by the scheduler, and the run succeeds."""
    airflow, zookeeper = deployment.airflow, deployment.outage_zookeeper
    port = zookeeper.port
    run_id = airflow.trigger_rest(RESTART, {"cluster": "healthy", "broker": 3})
    states: dict[str, set[str]] = {}
    deadline = time.monotonic() + RUN_TIMEOUT
    stopped = False
    try:
        while time.monotonic() < deadline:
            tis = {ti["task_id"]: ti for ti in airflow.task_instances(RESTART, run_id)}
            for task_id, ti in tis.items():
                states.setdefault(task_id, set()).add(str(ti["state"]))
            if not stopped and tis.get("snapshot", {}).get("state") == "success":
                zookeeper.stop()  # mid-run: the snapshot is taken, the inventory needs ZooKeeper
                stopped = True
            if stopped and any(ti["state"] == "up_for_retry" for ti in tis.values()):
                break
            if airflow.run(RESTART, run_id)["state"] in ("success", "failed"):
                break
            time.sleep(0.5)
    finally:
        zookeeper.start()
    assert zookeeper.port == port
    airflow.wait_for_run(RESTART, run_id, timeout=RUN_TIMEOUT)
    retried = {t: s for t, s in states.items() if "up_for_retry" in s}
    assert retried, f"no task met the outage: {states}"
    for task_id in retried:
        tries = airflow.tries(RESTART, run_id, task_id)
        assert [t["state"] for t in tries][-1] == "success", tries
        assert any(t["state"] == "failed" for t in tries[:-1]) or len(tries) >= 2, tries


def test_connection_test_names_the_cluster_and_no_scheme_warning_is_logged(deployment, campaign):
    """``airflow connections test`` shows the cluster id, the ZooKeeper release and the live brokers;
    no process logged Airflow's "schemes shall not contain '_'" for the ``kafkazookeeper`` type
    (with the old type name, ``kafka_zookeeper``, it logs it on every fetch)."""
    airflow = deployment.airflow
    prod = deployment.clusters["prod"]
    done = airflow.cli("connections", "test", "kafka_zk_prod")
    out = done.stdout + done.stderr
    assert "Connection success!" in out, out
    live = ", ".join(str(b) for b in sorted(prod.cluster.online_broker_ids()))
    assert f"Kafka cluster {prod.cluster.cluster_id} in /kafka_prod on ZooKeeper 3." in out, out
    assert f"live brokers: {live} (" in out, out
    logs = [
        airflow.home / f"{name}.log" for name in ("api-server", "scheduler", "triggerer", "dag-processor")
    ]
    logs += list((airflow.home / "logs").rglob("*.log"))
    warned = [str(p) for p in logs if "shall not contain" in p.read_text(errors="replace")]
    assert not warned, warned
    assert "shall not contain" not in out


def test_the_services_run_the_installed_wheel(deployment):
    """The wheel, not this checkout: the venv's package, and pyspark's files are its own release."""
    airflow = deployment.airflow
    probe = (
        "import airflow_provider_kafka_zk as m, pyspark, importlib.metadata as md, shutil;"
        "print(m.__file__); print(pyspark.__version__, md.version('pyspark')); print(shutil.which('spark-submit'))"
    )
    done = airflow.venv.run("python", "-c", probe, env=airflow.env, cwd=airflow.home)
    package, versions, spark_submit = done.stdout.split("\n")[:3]
    assert package.startswith(str(airflow.venv.path)), package
    assert "site-packages" in package
    files, wheel = versions.split()
    assert files == wheel, versions
    assert spark_submit.startswith(str(airflow.venv.bin)), spark_submit


def test_harness_timings(deployment, campaign):
    """Not an assertion on time: the numbers the report gives (start-up, each run)."""
    lines = [f"{k}: {v:.1f} s" for k, v in deployment.timings.items()]
    lines += [f"{r.path:8s} {r.dag_id}: {r.seconds:.0f} s ({r.state})" for r in campaign.runs]
    lines.append(f"campaign (all runs, concurrent): {campaign.seconds:.0f} s")
    print("\n" + "\n".join(lines))
    (deployment.airflow.home.parent / "timings.txt").write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- the browser
@pytest.fixture(scope="module")
def browser_session(production_browser):
    return production_browser
