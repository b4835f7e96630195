"""The provider's triggers never block the triggerer's event loop, on real parts (a real ZooKeeper,
the simulated incident cluster, broker hosts behind a real sshd):

* every blocking call of a trigger run -- connection lookup, kazoo requests, SSH inventories -- runs
  on that run's own thread, never on the loop's;
* one ZooKeeper session per trigger run, however many polls (the deletion check's broker-host
  lookup included), closed on that thread when the run ends, also when it is cancelled mid-poll;
* importing a trigger module (the triggerer does it on its loop) loads nothing heavy, and a
  deletion check (its first poll loads the hooks in the run's thread) loads no pyarrow/numpy,
  whose C initialisation holds the GIL, and so the loop, for tenths of a second.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster
from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.triggers.deletion import TopicDeletionTrigger
from airflow_provider_kafka_zk.triggers.leader_election import PreferredElectionTrigger
from airflow_provider_kafka_zk.triggers.reassignment import ReassignmentTrigger

pytestmark = pytest.mark.integration

ADDRESSES = tuple(f"127.0.0.{2 + broker}" for broker in range(6))
STOPPED = {"3": "127.0.0.5", "4": "127.0.0.6"}  # the incident cluster's stopped brokers
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def incident(zookeeper_server, tmp_path_factory):
    chroot = zookeeper_server.new_chroot("/kafka_trigger_sessions_")
    with (
        SshServer(ADDRESSES, work_dir=tmp_path_factory.mktemp("sshd")) as sshd,
        DeployedCluster(
            incident_cluster(), zookeeper_server.connect_string, chroot, tmp_path_factory.mktemp("hosts")
        ) as deployed,
        pytest.MonkeyPatch.context() as patch,
    ):
        zk = {
            "conn_type": "kafkazookeeper",
            "host": zookeeper_server.connect_string,
            "extra": {"chroot": chroot},
        }
        patch.setenv("AIRFLOW_CONN_TRIGGER_ZK", json.dumps(zk))
        patch.setenv(
            "AIRFLOW_CONN_TRIGGER_SSH",
            json.dumps(sshd.airflow_connection_fields(ADDRESSES[0], conn_timeout=5)),
        )
        yield deployed


@pytest.fixture
def spy(monkeypatch):
    """Every ZooKeeper hook made, the thread of every kazoo session start and request, the closes."""
    seen = {"hooks": 0, "threads": set(), "closed": 0}
    init, get_conn, close = KafkaZooKeeperHook.__init__, KafkaZooKeeperHook.get_conn, KafkaZooKeeperHook.close

    def counting_init(self, *args, **kwargs):
        seen["hooks"] += 1
        init(self, *args, **kwargs)

    def recording_get_conn(self):
        seen["threads"].add(threading.current_thread().name)
        return get_conn(self)

    def counting_close(self):
        seen["closed"] += self._client is not None
        close(self)

    monkeypatch.setattr(KafkaZooKeeperHook, "__init__", counting_init)
    monkeypatch.setattr(KafkaZooKeeperHook, "get_conn", recording_get_conn)
    monkeypatch.setattr(KafkaZooKeeperHook, "close", counting_close)
    return seen


def _events(trigger, *, cancel_after: float | None = None) -> list[dict]:
    """Run the trigger on a fresh loop like the triggerer (its loop thread is MainThread here)."""

    async def main() -> list[dict]:
        events = []

        async def consume() -> None:
            async for event in trigger.run():
                events.append(event.payload)

        task = asyncio.create_task(consume())
        if cancel_after is None:
            await task
        else:
            await asyncio.sleep(cancel_after)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return events

    return asyncio.run(main())


def _session_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kafka-zk-")]


def _wait_for_no_session_threads(timeout: float = 15) -> list[str]:
    deadline = time.monotonic() + timeout
    while _session_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    return _session_threads()


def test_a_reassignment_wait_uses_one_session_on_its_own_thread(incident, spy):
    # a target the cluster never reaches: the trigger polls until its deadline
    trigger = ReassignmentTrigger(
        kafka_zookeeper_conn_id="trigger_zk",
        targets=[["orders", 0, [0, 1, 2, 3, 4, 5]]],
        poll_interval=0.2,
        deadline=time.time() + 2,
    )
    (event,) = _events(trigger)
    assert event["status"] == "timeout" and event["moving"] == ["orders-0"]
    assert spy["hooks"] == 1 and spy["closed"] == 1  # about ten looks, one session
    assert spy["threads"] and all(t.startswith("kafka-zk-reassignment") for t in spy["threads"]), spy
    assert _wait_for_no_session_threads() == []


def test_a_cancelled_wait_closes_its_session_on_its_thread(incident, spy):
    trigger = ReassignmentTrigger(
        kafka_zookeeper_conn_id="trigger_zk", targets=[["orders", 0, [0, 1, 2, 3, 4, 5]]], poll_interval=0.2
    )
    assert _events(trigger, cancel_after=1.5) == []  # no deadline: only the cancel ends it
    assert spy["hooks"] == 1 and spy["closed"] == 1
    assert _wait_for_no_session_threads() == []
    election = PreferredElectionTrigger(kafka_zookeeper_conn_id="trigger_zk", czxid=1, poll_interval=0.2)
    (event,) = _events(election)  # no election znode: processed at the first look
    assert event["status"] == "complete"
    assert spy["hooks"] == 2 and spy["closed"] == 2
    assert _wait_for_no_session_threads() == []


def test_a_deletion_wait_uses_one_zookeeper_session_for_every_look(incident, spy):
    settings = {
        "kafka_zookeeper_conn_id": "trigger_zk",
        "ssh_conn_id": "trigger_ssh",
        "broker_hosts": STOPPED,
        "server_properties_path": f"{incident.root}/broker-{{broker_id}}/config/server.properties",
        "connect_timeout": 5,
    }
    trigger = TopicDeletionTrigger(
        settings=settings, topics=["legacy-orders"], poll_interval=0.5, deadline=time.time() + 4
    )
    (event,) = _events(trigger)
    assert event["status"] == "timeout", event
    (verdict,) = event["verdicts"]
    assert verdict["topic"] == "legacy-orders" and verdict["blocking_brokers"] == [3]
    # several looks (ZooKeeper, the registrations for the broker hosts, six inventories each): one session
    assert spy["hooks"] == 1 and spy["closed"] == 1, spy
    assert all(t.startswith("kafka-zk-deletion") for t in spy["threads"]), spy
    assert _wait_for_no_session_threads() == []


def test_trigger_modules_and_a_deletion_check_import_nothing_that_holds_the_loop():
    probe = """
import sys
import airflow.triggers.base, airflow.sdk  # the triggerer has these
before = set(sys.modules)
import airflow_provider_kafka_zk.triggers.deletion, airflow_provider_kafka_zk.triggers.reassignment
import airflow_provider_kafka_zk.triggers.leader_election
on_the_loop = sorted(set(sys.modules) - before)
import airflow_provider_kafka_zk.triggers.deletion_check, airflow_provider_kafka_zk.hooks.broker_host
import airflow_provider_kafka_zk.maintenance
import airflow_provider_kafka_zk.hooks._strict_ssh  # the check's first SSH connection (paramiko), in its thread
in_the_thread = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(on_the_loop)
print(in_the_thread)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO, check=True
    )
    on_the_loop, in_the_thread = (eval(line) for line in done.stdout.strip().splitlines()[-2:])  # noqa: S307
    assert all(m.startswith("airflow_provider_kafka_zk.triggers") for m in on_the_loop), on_the_loop
    assert "airflow_provider_kafka_zk.triggers.deletion_check" not in on_the_loop
    assert {"kazoo", "paramiko"} <= set(in_the_thread)  # what a deletion check needs
    assert not {"pyarrow", "numpy", "pandas", "pyspark"} & set(in_the_thread), in_the_thread
