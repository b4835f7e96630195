"""The identity pin of a broker host whose meta.properties hold no ``cluster.id`` (Kafka < 2.4).

Up to 2.3 Kafka writes meta.properties version 0 with ``broker.id`` only (BrokerMetadataCheckpoint,
2.3.0); the strict rule (cluster.id == ZooKeeper's /cluster/id) therefore refused every broker-file
change on 0.11-2.3 clusters. These tests first show why ``broker.id`` alone cannot replace it (a
host of another cluster with the same broker ids passes), then the rule that does: the configured
server.properties' zookeeper.connect (chroot and ensemble) and broker.id, the registration naming
the host SSH reached, and a release < 2.4.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_kafka_zk.kafka.safety import (
    LegacyBrokerEvidence,
    broker_identity_problems,
    legacy_broker_problems,
    parse_zookeeper_connect,
)

ZK_HOSTS = ("zk1.example.com:2181", "zk2.example.com:2181", "zk3.example.com:2181")
CHROOT = "/kafka-prod"
META = [("/data/kafka-logs-0", 2, None), ("/data/kafka-logs-1", 2, None)]  # what a 2.3 broker writes


def _evidence(**changes) -> LegacyBrokerEvidence:
    """Broker 2 of the cluster behind ZK_HOSTS + CHROOT, as a Kafka 2.3 host shows it."""
    base = LegacyBrokerEvidence(
        server_properties_path="/etc/kafka/server.properties",
        server_properties={
            "broker.id": "2",
            "zookeeper.connect": "zk1.example.com:2181,zk2.example.com,zk3.example.com:2181/kafka-prod",
            "inter.broker.protocol.version": "2.3",
        },
        server_properties_problem=None,
        reached_hosts=("kafka2.example.com", "10.0.0.12", "kafka2"),
        registered_hosts=("kafka2.example.com",),
        registration_versions=(4, 4, 4),
    )
    return dataclasses.replace(base, **changes)


def _problems(evidence: LegacyBrokerEvidence | None, meta=META, effective: int | None = 2) -> list[str]:
    return broker_identity_problems(
        2,
        "kafka2.example.com",
        "Ab3_ZkClusterIdxxxxxxx",
        meta,
        effective,
        legacy=evidence,
        zookeeper_hosts=ZK_HOSTS,
        chroot=CHROOT,
    )


def _broker_id_only_rule(broker_id: int, meta) -> bool:
    """The tempting fix: accept a cluster.id-less host when its meta.properties name the broker."""
    return all(b == broker_id for _, b, _ in meta)


def test_the_damage_a_broker_id_only_rule_would_do():
    # Another 2.3 cluster's broker 2 (its own ZooKeeper chroot, the same broker ids: every cluster
    # numbers its brokers 0..n) has exactly the same meta.properties: broker.id=2, no cluster.id.
    other_host_meta = [("/data/kafka-logs-0", 2, None), ("/data/kafka-logs-1", 2, None)]
    assert _broker_id_only_rule(2, other_host_meta)  # would quarantine the other cluster's live replicas
    # The rule: its server.properties points at the other cluster's chroot, and ZooKeeper registers
    # our broker 2 elsewhere.
    other = _evidence(
        server_properties={
            "broker.id": "2",
            "zookeeper.connect": "zk1.example.com:2181,zk2.example.com:2181/kafka-staging",
            "inter.broker.protocol.version": "2.3",
        },
        reached_hosts=("kafka-staging-2.example.com", "10.0.9.12", "kafka-staging-2"),
    )
    problems = _problems(other, other_host_meta)
    assert any("chroot '/kafka-staging'" in p and "'/kafka-prod'" in p for p in problems)
    assert any("/brokers/ids/2 names ['kafka2.example.com']" in p for p in problems)


def test_a_pre_2_4_host_with_every_piece_in_place_is_pinned():
    assert _problems(_evidence()) == []
    # the host answered under its IP only: the registration may name that address
    assert _problems(_evidence(reached_hosts=("10.0.0.12",), registered_hosts=("10.0.0.12",))) == []
    # an old release line, 0.11 (IBP written the 0.x way)
    old = _evidence(
        server_properties={**_evidence().server_properties, "inter.broker.protocol.version": "0.11.0"}
    )
    assert _problems(old) == []


def test_meta_properties_with_cluster_id_keep_the_strict_rule():
    # a host with cluster.id is never judged by the weaker rule, whatever evidence comes along
    meta = [("/d", 2, "SomeOtherClusterIdxxxx")]
    problems = _problems(_evidence(), meta)
    assert problems and "cluster.id='SomeOtherClusterIdxxxx'" in problems[0]
    assert _problems(_evidence(), [("/d", 2, "Ab3_ZkClusterIdxxxxxxx")]) == []


def test_some_files_with_cluster_id_and_some_without_is_doubt():
    # a 2.4+ broker writes cluster.id into every online log dir at each start
    meta = [("/d0", 2, "Ab3_ZkClusterIdxxxxxxx"), ("/d1", 2, None)]
    problems = _problems(_evidence(), meta)
    assert problems == [
        "broker 2 on kafka2.example.com: /d1/meta.properties has no cluster.id while other log dirs' have "
        "one (a 2.4+ broker writes it into every online log dir at start): a stale or copied log dir"
    ]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"server_properties_path": None}, "set server_properties_path"),
        (
            {"server_properties": None, "server_properties_problem": "not readable (PermissionError)"},
            "/etc/kafka/server.properties: not readable (PermissionError)",
        ),
        ({"registered_hosts": None}, "/brokers/ids/2 is not registered"),
        ({"registered_hosts": ("kafka7.example.com",)}, "another host answered"),
        ({"registration_versions": (4, 5, 4)}, "version 5 (Kafka >= 2.7)"),
        ({"feature_znode": True}, "/feature exists"),
        ({"kafka_version": "3.3.1"}, "runs Kafka 3.3.1, which writes cluster.id"),
    ],
)
def test_each_missing_or_contradicting_piece_refuses(changes, expected):
    problems = _problems(_evidence(**changes))
    assert any(expected in p for p in problems), problems
    assert all(p.startswith("broker 2 on kafka2.example.com") for p in problems)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"zookeeper.connect": "zk1.example.com:2181/kafka-staging"}, "chroot '/kafka-staging'"),
        ({"zookeeper.connect": "zk1.example.com:2181"}, "chroot '/'"),
        ({"zookeeper.connect": "zk9.example.com:2181/kafka-prod"}, "none of the connection's"),
        ({"zookeeper.connect": "zk1.example.com:2182/kafka-prod"}, "none of the connection's"),
        ({"zookeeper.connect": None}, "has no zookeeper.connect"),
        ({"broker.id": "3"}, "has broker.id=3, not 2"),
        ({"broker.id": "two"}, "not a number"),
        ({"broker.id": None}, "not a generated id"),  # generated ids are > reserved.broker.max.id
        ({"inter.broker.protocol.version": "2.4-IV1"}, "means Kafka >= 2.4"),
        ({"inter.broker.protocol.version": None}, "cannot tell the cluster's Kafka release"),
        ({"inter.broker.protocol.version": "latest"}, "is not a version"),
    ],
)
def test_server_properties_must_name_this_cluster_and_this_broker(props, expected):
    merged = {**_evidence().server_properties, **props}
    merged = {k: v for k, v in merged.items() if v is not None}
    problems = _problems(_evidence(server_properties=merged))
    assert any(expected in p and "/etc/kafka/server.properties" in p for p in problems), problems


def test_a_generated_broker_id_is_accepted_only_as_generated():
    props = {k: v for k, v in _evidence().server_properties.items() if k != "broker.id"}
    meta = [("/d0", 1001, None), ("/d1", 1001, None)]

    def problems(p, m=meta):
        ev = _evidence(server_properties=p)
        return broker_identity_problems(
            1001, "kafka2.example.com", "X", m, 1001, legacy=ev, zookeeper_hosts=ZK_HOSTS, chroot=CHROOT
        )

    assert problems(props) == []
    assert problems({**props, "broker.id": "-1"}) == []
    assert any(
        "broker.id.generation.enable=false" in p
        for p in problems({**props, "broker.id.generation.enable": "false"})
    )
    assert any("not a generated id" in p for p in problems({**props, "reserved.broker.max.id": "2000"}))


def test_the_broker_id_of_meta_properties_still_counts():
    problems = _problems(_evidence(), [("/d0", 2, None), ("/d1", 5, None)], effective=2)
    assert any("/d1/meta.properties says broker.id=5" in p for p in problems)
    assert any("runs broker 3, not broker 2" in p for p in _problems(_evidence(), effective=3))


def test_without_evidence_a_cluster_id_less_host_refuses():
    problems = _problems(None)
    assert problems and "no cluster.id" in problems[0] and "gathered no other proof" in problems[0]
    assert legacy_broker_problems(2, "h", [2], None, ZK_HOSTS, CHROOT)


def test_zookeeper_connect_is_read_as_zookeeper_reads_it():
    hosts, chroot = parse_zookeeper_connect("ZK1.example.com:2181,zk2.example.com/kafka/prod")
    assert hosts == {("zk1.example.com", 2181), ("zk2.example.com", 2181)} and chroot == "/kafka/prod"
    assert parse_zookeeper_connect("zk1:2181/") == (frozenset({("zk1", 2181)}), "")
    assert parse_zookeeper_connect("zk1:2181") == (frozenset({("zk1", 2181)}), "")
    assert parse_zookeeper_connect("[::1]:2182") == (frozenset({("::1", 2182)}), "")
    for bad in ("", "/kafka", "zk1:port/kafka"):
        with pytest.raises(ValueError):
            parse_zookeeper_connect(bad)


def test_a_registration_naming_the_host_by_dns_matches_its_address():
    # the session adds what each registered name resolves to: SSH's peer address then matches
    from airflow_provider_kafka_zk.maintenance.session import _with_addresses

    resolved = _with_addresses(("localhost", "no-such-host.invalid"))
    assert resolved[:2] == ("localhost", "no-such-host.invalid") and "127.0.0.1" in resolved
    evidence = _evidence(reached_hosts=("10.0.0.99", "127.0.0.1"), registered_hosts=resolved)
    assert _problems(evidence) == []
    assert _problems(_evidence(reached_hosts=("10.0.0.99",), registered_hosts=resolved))
