"""KRaft readiness on running brokers (issue 32, item 4), as a real 3.3.1 cluster showed it wrong:

* with ``server_properties_path`` in the cluster file and brokers running on those files, the release
  was "unknown (no running broker process with that server.properties)" and the IBP "not known": the
  running process's jars were read for the identity check only. The inventory now reads the release of
  the process started with the configured file for the facts too (the same evidence);
* the IBP blocker's fix named the value that blocks ("set inter.broker.protocol.version=3.3" on 3.3.1):
  it names what Kafka's docs at the target release ask (docs/ops.html 3.9 'Preparing for migration':
  brokers on 3.9.0, IBP "3.9");
* the precursor's fix said the repair "moves the controller once": a write-back of topics without an
  id in ZooKeeper moves no controller (``topic_id_repair.plan_repair``: a controller move only for a
  topic whose ZooKeeper id was another one); the texts say what the plan does.
"""

from __future__ import annotations

from airflow_provider_kafka_zk.kafka.inventory import ServerPropertiesCandidate
from airflow_provider_kafka_zk.kafka.kraft_readiness import (
    Status,
)
from airflow_provider_kafka_zk.kafka.topic_id_repair import write_back_effect
from airflow_provider_kafka_zk.testing.in_process import audit_and_assess
from airflow_provider_kafka_zk.testing.simulator.rows import audit_dirs, cluster_rows, inventory_summaries
from airflow_provider_kafka_zk.testing.simulator.scenarios import kraft_ready_cluster

CLUSTER = "kraft"
JARS = ["kafka_2.13-{release}.jar"]  # what the remote reports: basenames of the kafka_*.jar on the classpath


def _configured_record(text: str, release: str | None) -> dict:
    """The inventory's record of a configured server.properties (hooks/_broker_inventory_remote.py), with
    the jars of the broker process started with that file when one runs."""
    return {
        "t": "server_properties",
        "source": "configured",
        "path": "/etc/kafka/server.properties",
        "file": {"data": text, "size": len(text)},
        "symlink": None,
        "running_kafka_jars": [j.format(release=release) for j in JARS] if release else None,
    }


def test_the_configured_server_properties_carries_the_running_brokers_release():
    record = _configured_record("broker.id=1\nlog.dirs=/data/kafka\n", "3.3.1")
    facts = ServerPropertiesCandidate.from_record(record).facts()
    assert facts.kafka_version == "3.3.1"
    # its IBP is then known too: unset means the release's line (KafkaConfig's default)
    assert facts.inter_broker_protocol_version == "3.3"
    assert (
        ServerPropertiesCandidate.from_record(_configured_record("broker.id=1\n", None)).facts().kafka_version
        is None
    )


def _report(cluster, release: str):
    """Readiness on brokers running on their configured server.properties (their processes' release)."""
    _, _, report = audit_and_assess(
        CLUSTER, cluster_rows(cluster), inventory_summaries(cluster, release), audit_dirs(cluster)
    )
    return report


def test_readiness_of_running_brokers_knows_their_release_and_ibp():
    report = _report(kraft_ready_cluster(name=CLUSTER), "3.9.0")
    assert report.check("release").status is Status.PASS, report.check("release").evidence
    assert "3.9.0 on brokers 0, 1, 2 and 3" in report.check("release").evidence
    assert report.check("inter-broker-protocol").status is Status.PASS
    assert report.verdict == "ready to migrate"


def test_the_ibp_fix_names_the_value_that_unblocks_at_the_target_release():
    """A 3.3.1 cluster (IBP 3.3), as the real one: 3.3 is what blocks; 3.9's docs ask for 3.9.0 and IBP 3.9."""
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version="3.3.1")
    check = _report(cluster, "3.3.1").check("inter-broker-protocol")
    assert check.status is Status.BLOCKER
    assert "inter.broker.protocol.version=3.3" not in check.fix
    assert "inter.broker.protocol.version=3.9" in check.fix and "3.9.0" in check.fix
    # a 3.8 cluster whose IBP roll stopped at 3.3: its own line unblocks, as its docs say
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version="3.8.1")
    for b in cluster.brokers:
        cluster.set_broker_properties(b, {"inter.broker.protocol.version": "3.3"})
    check = _report(cluster, "3.8.1").check("inter-broker-protocol")
    assert check.status is Status.BLOCKER and "inter.broker.protocol.version=3.8" in check.fix


def test_the_precursors_fix_says_what_the_write_back_plan_does():
    """Two precursors (no id in ZooKeeper, every replica agrees): their write-back run writes the ids and
    moves no controller; a diverged topic's does move it, once, after the writes."""
    cluster = kraft_ready_cluster(name=CLUSTER, kafka_version="3.9.0")
    cluster.old_client_adds_partitions("payments", 6, client="2.7")
    cluster.old_client_adds_partitions("orders", 8, client="2.7")
    check = _report(cluster, "3.9.0").check("topic-ids")
    assert check.status is Status.BLOCKER
    assert "moves the controller once" not in check.fix
    assert "no controller move" in check.fix
    assert write_back_effect(["orders", "payments"], moved=[]).startswith("write_back writes")
    assert "then moves the controller once" in write_back_effect(["a", "b"], moved=["a"])
    assert "no controller move" in write_back_effect(["a"], moved=[])
