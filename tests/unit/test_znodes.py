"""Znode codecs: golden bytes from a real Kafka 3.3.1 cluster, every version, malformed input.

Byte strings not taken from the golden dump were checked against the JVM (Scala 2.13
collections + Jackson) when the codecs were written: key order is part of the format.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kafka_zk.kafka import znodes as z
from airflow_provider_kafka_zk.kafka.errors import ZnodeFormatError
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

GOLDEN = Path(__file__).parents[1] / "fixtures" / "real-kafka-3.3.1" / "zk_tree.json"
TOPIC_ID = KafkaUuid.parse("_Tw9oRGRTQarYuqBjHjr0g")


@cache
def golden_znodes() -> dict[str, bytes | None]:
    tree = json.loads(GOLDEN.read_text())
    assert all(node["encoding"] in ("utf-8", None) for node in tree["znodes"])
    return {
        node["path"]: None if node["data"] is None else node["data"].encode("utf-8")
        for node in tree["znodes"]
    }


# --------------------------------------------------------------------------------------------
# Golden: the real Kafka 3.3.1 ZooKeeper tree
# --------------------------------------------------------------------------------------------


def test_every_golden_znode_decodes_to_the_expected_kind() -> None:
    znodes = golden_znodes()
    assert len(znodes) == 166
    kinds: dict[str, int] = {}
    for path, data in znodes.items():
        decoded = z.decode_znode(path, data)
        kinds[type(decoded).__name__] = kinds.get(type(decoded).__name__, 0) + 1
        if path.startswith("/zookeeper"):
            assert decoded == data  # not Kafka's: handed back untouched
    assert kinds == {
        "NoneType": 84,  # containers: /brokers, /config/topics, /brokers/topics/<t>/partitions/<p>, ...
        "BrokerRegistration": 3,
        "TopicAssignment": 5,
        "PartitionState": 61,
        "ConfigEntity": 5,
        "ControllerRegistration": 1,
        "ControllerEpoch": 1,
        "ClusterId": 1,
        "FeatureZNode": 1,
        "ProducerIdBlock": 1,
        "bytes": 3,
    }


def test_golden_znodes_re_encode_to_the_exact_bytes_kafka_wrote() -> None:
    checked: dict[str, int] = {}
    for path, data in golden_znodes().items():
        decoded = z.decode_znode(path, data)
        if decoded is None or isinstance(decoded, bytes):
            continue
        assert decoded.encode() == data, path
        checked[type(decoded).__name__] = checked.get(type(decoded).__name__, 0) + 1
    assert checked == {
        "BrokerRegistration": 3,
        "TopicAssignment": 5,
        "PartitionState": 61,
        "ConfigEntity": 5,
        "ControllerRegistration": 1,
        "ControllerEpoch": 1,
        "ClusterId": 1,
        "FeatureZNode": 1,
        "ProducerIdBlock": 1,
    }


def test_golden_consumer_offsets_topic() -> None:
    path = "/brokers/topics/__consumer_offsets"
    topic = z.decode_znode(path, golden_znodes()[path])
    assert isinstance(topic, z.TopicAssignment)
    assert topic.topic == "__consumer_offsets"
    assert sorted(topic.partitions) == list(range(50))
    assert topic.partitions[49] == (1,)
    assert topic.version == 3
    assert topic.topic_id is not None
    assert topic.encode().startswith(
        b'{"partitions":{"44":[0],"45":[2],"46":[1],"47":[0],"48":[2],"49":[1],"10"'
    )
    assert not topic.is_reassigning


def test_golden_values() -> None:
    znodes = golden_znodes()
    broker = z.decode_znode("/brokers/ids/1", znodes["/brokers/ids/1"])
    assert broker == z.BrokerRegistration(
        broker_id=1,
        version=5,
        host="127.0.0.1",
        port=25193,
        endpoints=("PLAINTEXT://127.0.0.1:25193",),
        jmx_port=-1,
        timestamp_ms=1795322033728,
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        features={},
    )
    assert broker.parsed_endpoints == (z.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 25193, "PLAINTEXT"),)
    rf3 = z.decode_znode("/brokers/topics/golden-rf3", znodes["/brokers/topics/golden-rf3"])
    assert isinstance(rf3, z.TopicAssignment)
    assert rf3.topic_id == TOPIC_ID
    assert rf3.partitions == {0: (0, 1, 2), 1: (2, 0, 1), 2: (1, 2, 0)}
    state_path = "/brokers/topics/golden-rf3/partitions/0/state"
    assert z.decode_znode(state_path, znodes[state_path]) == z.PartitionState(
        "golden-rf3", 0, leader=0, leader_epoch=0, controller_epoch=1, isr=(0, 1, 2)
    )
    assert z.decode_znode(z.CONTROLLER, znodes[z.CONTROLLER]) == z.ControllerRegistration(1, 1795322034379)
    assert z.decode_znode(z.CONTROLLER_EPOCH, znodes[z.CONTROLLER_EPOCH]) == z.ControllerEpoch(1)
    assert z.decode_znode(z.CLUSTER_ID, znodes[z.CLUSTER_ID]) == z.ClusterId("OCL4MTxnT3C42KhD0jWynw")
    assert z.decode_znode(z.FEATURE, znodes[z.FEATURE]) == z.FeatureZNode(2, z.FEATURE_ENABLED, {})
    block = z.decode_znode(z.LATEST_PRODUCER_ID_BLOCK, znodes[z.LATEST_PRODUCER_ID_BLOCK])
    assert block == z.ProducerIdBlock(broker_id=2, block_start=2000, block_end=2999)
    assert isinstance(block, z.ProducerIdBlock) and block.size == 1000
    config_path = "/config/topics/golden-config"
    assert z.decode_znode(config_path, znodes[config_path]) == z.ConfigEntity(
        "topics",
        "golden-config",
        {"cleanup.policy": "delete", "min.insync.replicas": "2", "retention.ms": "86400000"},
    )


def test_golden_tree_has_every_persistent_path() -> None:
    assert set(z.PERSISTENT_PATHS) <= set(golden_znodes())


# --------------------------------------------------------------------------------------------
# /brokers/ids/<id>
# --------------------------------------------------------------------------------------------

BROKER_V2 = (
    b'{"endpoints":["PLAINTEXT://h1:9092"],"jmx_port":9999,"port":9092,"host":"h1","version":2,'
    b'"timestamp":"1700000000000"}'
)
BROKER_V4 = (
    b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SSL"},'
    b'"endpoints":["INTERNAL://h1:9092","EXTERNAL://h1.example.com:9093"],"rack":"rack-a","jmx_port":-1,'
    b'"port":9092,"host":"h1","version":4,"timestamp":"1700000000000"}'
)
BROKER_V5 = (
    b'{"features":{"metadata.version":{"min_version":1,"max_version":7}},'
    b'"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://[::1]:9093"],"rack":"r1",'
    b'"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1700000000000"}'
)


@pytest.mark.parametrize("data", [BROKER_V2, BROKER_V4, BROKER_V5])
def test_broker_registration_round_trips_written_versions(data: bytes) -> None:
    broker = z.BrokerRegistration.decode(data, "/brokers/ids/7")
    assert broker.broker_id == 7
    assert broker.encode() == data
    assert z.BrokerRegistration.decode(broker.encode(), "/brokers/ids/7") == broker


def test_broker_registration_v4_fields() -> None:
    broker = z.BrokerRegistration.decode(BROKER_V4, "/brokers/ids/7")
    assert (broker.version, broker.host, broker.port, broker.rack) == (4, "h1", 9092, "rack-a")
    assert broker.parsed_endpoints[1] == z.BrokerEndpoint("EXTERNAL", "h1.example.com", 9093, "SSL")


def test_broker_registration_v5_without_plaintext_has_no_host() -> None:
    broker = z.BrokerRegistration.decode(BROKER_V5, "/brokers/ids/7")
    assert (broker.host, broker.port) == (None, -1)
    assert broker.features == {"metadata.version": z.SupportedFeatureRange(1, 7)}
    assert broker.parsed_endpoints == (z.BrokerEndpoint("SSL", "::1", 9093, "SSL"),)


def test_broker_registration_v1_derives_a_plaintext_endpoint() -> None:
    data = b'{"jmx_port":-1,"timestamp":"1400000000000","host":"old","version":1,"port":9092}'
    broker = z.BrokerRegistration.decode(data, "/brokers/ids/0")
    assert broker.endpoints == ("PLAINTEXT://old:9092",)
    assert broker.listener_security_protocol_map is None and broker.features is None
    assert b"endpoints" not in broker.encode()
    assert z.BrokerRegistration.decode(broker.encode(), "/brokers/ids/0") == broker


def test_broker_registration_v3_reads_rack_and_default_protocols() -> None:
    data = (
        b'{"version":3,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1",'
        b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"],"rack":"r1"}'
    )
    broker = z.BrokerRegistration.decode(data, "/brokers/ids/3")
    assert broker.rack == "r1"
    assert [e.security_protocol for e in broker.parsed_endpoints] == ["PLAINTEXT", "SSL"]
    assert z.BrokerRegistration.decode(broker.encode(), "/brokers/ids/3") == broker


def test_broker_registration_for_listeners_matches_what_kafka_writes() -> None:
    broker = z.BrokerRegistration.for_listeners(
        7,
        ("INTERNAL://h1:9092", "EXTERNAL://h1.example.com:9093"),
        {"EXTERNAL": "SSL", "INTERNAL": "PLAINTEXT", "UNUSED": "SASL_SSL"},
        timestamp_ms=1700000000000,
        version=4,
        rack="rack-a",
    )
    assert broker.encode() == BROKER_V4


def test_broker_registration_v2_drops_rack_like_kafka() -> None:
    broker = z.BrokerRegistration.decode(BROKER_V2, "/brokers/ids/7")
    with_rack = z.BrokerRegistration(**{**broker.__dict__, "rack": "r1"})
    assert with_rack.encode() == BROKER_V2


# --------------------------------------------------------------------------------------------
# /brokers/topics/<topic>
# --------------------------------------------------------------------------------------------

TOPIC_V1 = b'{"version":1,"partitions":{"2":[3,1],"0":[1,2],"1":[2,3]}}'
TOPIC_V2 = b'{"version":2,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},"removing_replicas":{}}'
TOPIC_V3_NO_ID = b'{"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"version":3}'
TOPIC_V3_REASSIGNING = (
    b'{"partitions":{"0":[4,5,1,2],"1":[2,3]},"topic_id":"_Tw9oRGRTQarYuqBjHjr0g",'
    b'"adding_replicas":{"0":[4,5]},"removing_replicas":{"0":[1,2]},"version":3}'
)


@pytest.mark.parametrize("data", [TOPIC_V1, TOPIC_V2, TOPIC_V3_NO_ID, TOPIC_V3_REASSIGNING])
def test_topic_assignment_round_trips_every_version(data: bytes) -> None:
    topic = z.TopicAssignment.decode(data, "/brokers/topics/orders")
    assert topic.encode() == data
    assert z.TopicAssignment.decode(topic.encode(), "/brokers/topics/orders") == topic


def test_topic_v1_keeps_partition_order_and_has_no_id() -> None:
    topic = z.TopicAssignment.decode(TOPIC_V1, "/brokers/topics/orders")
    assert list(topic.partitions) == [2, 0, 1]
    assert topic.topic_id is None and topic.version == 1
    assert topic.adding_replicas == {} and topic.removing_replicas == {}


def test_topic_version_3_without_topic_id_is_not_an_id() -> None:
    topic = z.TopicAssignment.decode(TOPIC_V3_NO_ID, "/brokers/topics/orders")
    assert topic.version == 3
    assert topic.topic_id is None


def test_topic_id_is_read_whatever_the_version_says() -> None:
    data = b'{"version":1,"partitions":{"0":[1]},"topic_id":"_Tw9oRGRTQarYuqBjHjr0g"}'
    assert z.TopicAssignment.decode(data, "/brokers/topics/t").topic_id == TOPIC_ID
    odd = b'{"version":42,"partitions":{"0":[1]}}'
    assert z.TopicAssignment.decode(odd, "/brokers/topics/t").version == 42


def test_topic_reassignment_fields() -> None:
    topic = z.TopicAssignment.decode(TOPIC_V3_REASSIGNING, "/brokers/topics/orders")
    assert topic.is_reassigning
    assert topic.topic_id == TOPIC_ID
    assert topic.partitions[0] == (4, 5, 1, 2)
    assert topic.target_replicas(0) == (4, 5)
    assert topic.original_replicas(0) == (1, 2)
    assert topic.target_replicas(1) == topic.original_replicas(1) == (2, 3)


def test_old_writers_drop_what_they_do_not_know() -> None:
    topic = z.TopicAssignment.decode(TOPIC_V3_REASSIGNING, "/brokers/topics/orders")
    assert topic.encode_v1() == b'{"version":1,"partitions":{"0":[4,5,1,2],"1":[2,3]}}'
    assert topic.encode_v2() == (
        b'{"version":2,"partitions":{"0":[4,5,1,2],"1":[2,3]},"adding_replicas":{"0":[4,5]},'
        b'"removing_replicas":{"0":[1,2]}}'
    )
    no_id = z.TopicAssignment("orders", {0: (1, 2)})
    assert no_id.encode_v3() == TOPIC_V3_NO_ID


def test_topic_encode_skips_empty_reassignment_lists() -> None:
    topic = z.TopicAssignment("t", {0: (1,)}, adding_replicas={0: ()}, removing_replicas={0: ()})
    assert not topic.is_reassigning
    assert z.TopicAssignment("t", {0: ()}).encode_v3().startswith(b'{"partitions":{"0":[]},')
    assert (
        topic.encode() == b'{"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{},"version":3}'
    )


# --------------------------------------------------------------------------------------------
# Partition state, controller, epoch
# --------------------------------------------------------------------------------------------

STATE_PATH = "/brokers/topics/orders/partitions/3/state"


def test_partition_state_with_leader_recovery_state() -> None:
    data = (
        b'{"controller_epoch":3,"leader":2,"version":1,"leader_recovery_state":1,"leader_epoch":7,"isr":[2]}'
    )
    state = z.PartitionState.decode(data, STATE_PATH)
    assert (state.topic, state.partition, state.leader_recovery_state) == ("orders", 3, z.RECOVERING)
    assert state.encode() == data


def test_partition_state_without_leader() -> None:
    data = b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":5,"isr":[2]}'
    state = z.PartitionState.decode(data, STATE_PATH)
    assert not state.has_leader and state.leader == z.NO_LEADER
    assert state.leader_recovery_state == z.RECOVERED
    assert state.encode() == data
    assert z.PartitionState.decode(state.encode(), STATE_PATH) == state


def test_partition_state_reads_keys_in_any_order() -> None:
    data = b'{"version":1,"leader":1,"leader_epoch":2,"controller_epoch":3,"isr":[1,0]}'
    state = z.PartitionState.decode(data, STATE_PATH)
    assert (state.leader, state.leader_epoch, state.controller_epoch, state.isr) == (1, 2, 3, (1, 0))


@pytest.mark.parametrize(
    ("registration", "data"),
    [
        (
            z.ControllerRegistration(1, 1700000000000),
            b'{"version":1,"brokerid":1,"timestamp":"1700000000000"}',
        ),
        (
            z.ControllerRegistration(1, 1700000000000, version=2, kraft_controller_epoch=-1),
            b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}',
        ),
        (
            z.ControllerRegistration(3000, 1700000000000, version=2, kraft_controller_epoch=5),
            b'{"version":2,"brokerid":3000,"timestamp":"1700000000000","kraftControllerEpoch":5}',
        ),
    ],
)
def test_controller_registration_versions(registration: z.ControllerRegistration, data: bytes) -> None:
    assert registration.encode() == data
    assert z.ControllerRegistration.decode(data) == registration


def test_controller_registration_kraft_flag() -> None:
    assert not z.ControllerRegistration(1, 0).is_kraft_controller
    assert not z.ControllerRegistration(1, 0, version=2, kraft_controller_epoch=-1).is_kraft_controller
    assert z.ControllerRegistration(3000, 0, version=2, kraft_controller_epoch=5).is_kraft_controller


@pytest.mark.parametrize(("data", "epoch"), [(b"0", 0), (b"17", 17), (b"+5", 5), (b"2147483647", 2**31 - 1)])
def test_controller_epoch_is_plain_text(data: bytes, epoch: int) -> None:
    assert z.ControllerEpoch.decode(data) == z.ControllerEpoch(epoch)
    assert z.ControllerEpoch(epoch).encode() == str(epoch).encode()


# --------------------------------------------------------------------------------------------
# /admin
# --------------------------------------------------------------------------------------------


def test_delete_topic_marker_takes_the_topic_from_the_path() -> None:
    for data in (None, b""):
        marker = z.decode_znode("/admin/delete_topics/golden.dots-and-dashes", data)
        assert marker == z.DeleteTopicMarker("golden.dots-and-dashes")
    assert z.DeleteTopicMarker("t").encode() == b""
    assert z.DeleteTopicMarker("t").path == "/admin/delete_topics/t"


REASSIGN = (
    b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]},'
    b'{"topic":"u","partition":4,"replicas":[2]}]}'
)


def test_reassign_partitions_round_trip() -> None:
    request = z.ReassignPartitions.decode(REASSIGN)
    assert request.partitions[0] == z.ReassignmentEntry("t", 0, (1, 2, 3))
    assert request.targets == {z.TopicPartition("t", 0): (1, 2, 3), z.TopicPartition("u", 4): (2,)}
    assert request.encode() == REASSIGN


@pytest.mark.parametrize(
    ("cls", "path"),
    [
        (z.PreferredReplicaElection, z.PREFERRED_REPLICA_ELECTION),
        (z.IsrChangeNotification, "/isr_change_notification/isr_change_0000000042"),
    ],
)
def test_partition_list_znodes_round_trip(cls: Any, path: str) -> None:
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    decoded = z.decode_znode(path, data)
    assert isinstance(decoded, cls)
    assert decoded.partitions == (z.TopicPartition("t", 0), z.TopicPartition("u", 3))
    assert decoded.encode() == data


def test_isr_change_and_log_dir_event_keep_their_sequence() -> None:
    isr = z.decode_znode("/isr_change_notification/isr_change_0000000042", b'{"version":1,"partitions":[]}')
    assert isinstance(isr, z.IsrChangeNotification) and isr.sequence == 42
    assert isr.path == "/isr_change_notification/isr_change_0000000042"
    data = b'{"version":1,"broker":2,"event":1}'
    event = z.decode_znode("/log_dir_event_notification/log_dir_event_0000000007", data)
    assert event == z.LogDirEventNotification(7, 2)
    assert isinstance(event, z.LogDirEventNotification) and event.encode() == data
    assert event.path == "/log_dir_event_notification/log_dir_event_0000000007"


# --------------------------------------------------------------------------------------------
# /config
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data", "entity_type", "entity_name", "version"),
    [
        (
            "/config/changes/config_change_0000000003",
            b'{"version":2,"entity_path":"topics/foo"}',
            "topics",
            "foo",
            2,
        ),
        (
            "/config/changes/config_change_0000000004",
            b'{"version":2,"entity_path":"users/alice/clients/c1"}',
            "users",
            "alice/clients/c1",
            2,
        ),
        (
            "/config/changes/config_change_0000000005",
            b'{"version":2,"entity_path":"brokers/<default>"}',
            "brokers",
            "<default>",
            2,
        ),
        (
            "/config/changes/config_change_0000000006",
            b'{"version":1,"entity_type":"clients","entity_name":"c1"}',
            "clients",
            "c1",
            1,
        ),
    ],
)
def test_config_change_notification_versions(
    path: str, data: bytes, entity_type: str, entity_name: str, version: int
) -> None:
    change = z.decode_znode(path, data)
    assert isinstance(change, z.ConfigChangeNotification)
    assert (change.entity_type, change.entity_name, change.version) == (entity_type, entity_name, version)
    assert change.path == path
    assert change.encode() == data


@pytest.mark.parametrize(
    ("path", "entity_type", "entity_name"),
    [
        ("/config/brokers/<default>", "brokers", "<default>"),
        ("/config/brokers/2", "brokers", "2"),
        ("/config/users/alice", "users", "alice"),
        ("/config/users/alice/clients/c1", "users", "alice/clients/c1"),
        ("/config/users/<default>/clients/<default>", "users", "<default>/clients/<default>"),
        ("/config/clients/my%2Fclient", "clients", "my%2Fclient"),
        ("/config/ips/10.0.0.1", "ips", "10.0.0.1"),
        ("/config/topics/orders", "topics", "orders"),
    ],
)
def test_config_entities(path: str, entity_type: str, entity_name: str) -> None:
    data = b'{"version":1,"config":{"leader.replication.throttled.rate":"10000000"}}'
    entity = z.decode_znode(path, data)
    assert isinstance(entity, z.ConfigEntity)
    assert (entity.entity_type, entity.entity_name) == (entity_type, entity_name)
    assert entity.config == {"leader.replication.throttled.rate": "10000000"}
    assert entity.path == path
    assert entity.encode() == data


def test_config_entity_encodes_in_properties_order() -> None:
    entity = z.ConfigEntity(
        "topics", "t", {"segment.bytes": "1", "cleanup.policy": "compact", "compression.type": "lz4"}
    )
    assert entity.encode() == (
        b'{"version":1,"config":{"compression.type":"lz4","cleanup.policy":"compact","segment.bytes":"1"}}'
    )


# --------------------------------------------------------------------------------------------
# /cluster/id, /feature, /migration, /latest_producer_id_block
# --------------------------------------------------------------------------------------------


def test_cluster_id_version_is_a_string() -> None:
    assert z.ClusterId("OCL4MTxnT3C42KhD0jWynw").encode() == b'{"version":"1","id":"OCL4MTxnT3C42KhD0jWynw"}'


@pytest.mark.parametrize(
    "data",
    [
        b'{"features":{},"version":2,"status":1}',
        b'{"features":{},"version":1,"status":0}',
        b'{"features":{"metadata.version":{"max_version_level":7}},"version":2,"status":1}',
        b'{"features":{"metadata.version":{"max_version_level":4,"min_version_level":1}},"version":1,"status":1}',
    ],
)
def test_feature_znode_versions_round_trip(data: bytes) -> None:
    feature = z.FeatureZNode.decode(data)
    assert feature.encode() == data
    assert z.FeatureZNode.decode(feature.encode()) == feature


def test_feature_znode_as_written_by_2_7_to_3_2() -> None:
    data = b'{"features":{"f":{"min_version_level":1,"max_version_level":2}},"version":1,"status":1}'
    feature = z.FeatureZNode.decode(data)
    assert feature.features == {"f": z.FinalizedFeature(max_version_level=2, min_version_level=1)}
    assert feature.encode_kafka_2_7() == data


def test_feature_v2_ignores_min_level() -> None:
    data = b'{"features":{"f":{"max_version_level":2,"min_version_level":1}},"version":2,"status":1}'
    assert z.FeatureZNode.decode(data).features == {"f": z.FinalizedFeature(2)}


def test_migration_znode_round_trip() -> None:
    data = (
        b'{"version":0,"kraft_metadata_offset":12345678901,"kraft_controller_id":3000,'
        b'"kraft_metadata_epoch":2,"kraft_controller_epoch":4}'
    )
    migration = z.decode_znode(z.MIGRATION, data)
    assert migration == z.MigrationZNode(3000, 4, 12345678901, 2)
    assert isinstance(migration, z.MigrationZNode) and migration.encode() == data


def test_empty_producer_id_block_is_no_block_yet() -> None:
    assert z.decode_znode(z.LATEST_PRODUCER_ID_BLOCK, None) is None
    assert z.decode_znode(z.LATEST_PRODUCER_ID_BLOCK, b"") is None


# --------------------------------------------------------------------------------------------
# Dispatch, names, paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/brokers",
        "/brokers/seqid",
        "/brokers/topics/t/partitions",
        "/brokers/topics/t/partitions/0",
        "/config/users/alice/clients",
        "/config/changes",
        "/admin/delete_topics",
    ],
)
def test_containers_decode_to_none(path: str) -> None:
    assert z.decode_znode(path, None) is None
    assert z.decode_znode(path, b"") is None


@pytest.mark.parametrize(
    "path", ["/zookeeper/quota", "/kafka-acl/Topic/t", "/consumers/g/offsets/t/0", "/delegation_token", "/x"]
)
def test_unknown_paths_return_the_raw_bytes(path: str) -> None:
    data = b"\xff not json"
    assert z.decode_znode(path, data) is data


@pytest.mark.parametrize("name", ["a", "golden.dots-and-dashes", "__consumer_offsets", "x" * 249, "A_b-9"])
def test_valid_topic_names(name: str) -> None:
    assert z.validate_topic_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a/b", "a b", "tö", "a\n", 5, None])
def test_invalid_topic_names(name: Any) -> None:
    with pytest.raises(z.InvalidTopicNameError) as raised:
        z.validate_topic_name(name)
    assert isinstance(raised.value, ZnodeFormatError)


def test_path_builders() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_state_path("t", 4) == "/brokers/topics/t/partitions/4/state"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert z.config_entity_path("brokers", "<default>") == "/config/brokers/<default>"
    assert z.config_entity_path("users", "alice/clients/c1") == "/config/users/alice/clients/c1"
    assert z.config_change_path(3) == "/config/changes/config_change_0000000003"
    assert z.isr_change_path(12) == "/isr_change_notification/isr_change_0000000012"
    assert z.log_dir_event_path(0) == "/log_dir_event_notification/log_dir_event_0000000000"
    with pytest.raises(z.InvalidTopicNameError):
        z.topic_path("../controller")
    with pytest.raises(ValueError, match="entity type"):
        z.config_entity_path("groups", "g")
    with pytest.raises(TypeError):
        z.broker_path(True)


# --------------------------------------------------------------------------------------------
# Malformed input: always a ZnodeFormatError naming the znode and what was expected
# --------------------------------------------------------------------------------------------

B = "/brokers/ids/1"
T = "/brokers/topics/t"
S = "/brokers/topics/t/partitions/0/state"
GOOD_BROKER = json.loads(BROKER_V4)
GOOD_STATE = {"controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}


def _with(base: dict[str, Any], **changes: Any) -> bytes:
    merged = {**base, **changes}
    return json.dumps({k: v for k, v in merged.items() if v is not _DROP}).encode()


_DROP = object()

MALFORMED = [
    # any JSON znode
    (B, None, "JSON data"),
    (B, b'{"version":5', "expected JSON"),
    (B, b"\xff\xfe", "UTF-8"),
    (B, b"[]", "JSON object"),
    (B, b'{"version":NaN}', "JSON"),
    # broker registration
    ("/brokers/ids/abc", BROKER_V4, "/brokers/ids/<id>"),
    ("/brokers/ids/99999999999", BROKER_V4, "broker id as a 32-bit integer"),
    ("/config/changes/config_change_x", b'{"version":2,"entity_path":"topics/t"}', "config_change_<seq>"),
    ("/isr_change_notification/other", b'{"version":1,"partitions":[]}', "isr_change_<seq>"),
    (B, _with(GOOD_BROKER, version=True), "'version' as a 32-bit integer"),
    (B, _with(GOOD_BROKER, version=0), "version >= 1"),
    (B, _with(GOOD_BROKER, jmx_port=_DROP), "key 'jmx_port'"),
    (B, _with(GOOD_BROKER, timestamp=1700000000000), "'timestamp' as a string of decimal digits"),
    (B, _with(GOOD_BROKER, endpoints="PLAINTEXT://h:1"), "'endpoints' as a JSON array of strings"),
    (B, _with(GOOD_BROKER, endpoints=["h:9092"]), "LISTENER://host:port"),
    (B, _with(GOOD_BROKER, endpoints=["OTHER://h:9092"]), "listener 'OTHER'"),
    (B, _with(GOOD_BROKER, listener_security_protocol_map={"INTERNAL": "TLS"}), "security protocols"),
    (B, _with(GOOD_BROKER, port=1.0), "'port' as a 32-bit integer"),
    (B, _with(GOOD_BROKER, features={"f": {"max_version": 1}}), "'min_version'"),
    # topic
    (T, b'{"version":3,"partitions":{"0":[1]},"topic_id":"not-a-uuid"}', "topic_id"),
    (T, b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAAA"}', "topic_id"),
    (T, b'{"version":3,"partitions":{"0":[1]},"topic_id":null}', "topic_id"),
    (T, b'{"version":3}', "key 'partitions'"),
    (T, b'{"version":3,"partitions":[]}', "'partitions' to be a JSON object"),
    (T, b'{"version":3,"partitions":{"a":[1]}}', "partition key 'a'"),
    (T, b'{"version":3,"partitions":{"01":[1]}}', "partition key '01'"),
    (T, b'{"version":3,"partitions":{"0":[1,"2"]}}', "array of integers"),
    (T, b'{"version":3,"partitions":{"0":[true]}}', "array of integers"),
    (T, b'{"version":"3","partitions":{"0":[1]}}', "'version' as a 32-bit integer"),
    (T, b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"0":"1"}}', "array of integers"),
    ("/brokers/topics/bad%name", b'{"version":3,"partitions":{}}', "topic name"),
    ("/brokers/topics/..", b'{"version":3,"partitions":{}}', "'.' and '..'"),
    # partition state
    (S, _with(GOOD_STATE, leader="1"), "'leader' as a 32-bit integer"),
    (S, _with(GOOD_STATE, leader=2**31), "'leader' as a 32-bit integer"),
    (S, _with(GOOD_STATE, isr=_DROP), "key 'isr'"),
    (S, _with(GOOD_STATE, leader_recovery_state=2), "'leader_recovery_state' 0 or 1"),
    (S, _with(GOOD_STATE, controller_epoch=False), "'controller_epoch'"),
    ("/brokers/topics/t/partitions/x/state", _with(GOOD_STATE), "partition as a non-negative"),
    # controller, epoch
    (z.CONTROLLER, b'{"version":1,"timestamp":"1"}', "key 'brokerid'"),
    (z.CONTROLLER, b'{"version":1,"brokerid":1,"timestamp":"soon"}', "'timestamp'"),
    (
        z.CONTROLLER,
        b'{"version":2,"brokerid":1,"timestamp":"1","kraftControllerEpoch":"5"}',
        "kraftControllerEpoch",
    ),
    (z.CONTROLLER_EPOCH, b"1.5", "32-bit decimal integer"),
    (z.CONTROLLER_EPOCH, b"", "32-bit decimal integer"),
    (z.CONTROLLER_EPOCH, b" 1", "32-bit decimal integer"),
    (z.CONTROLLER_EPOCH, b'"1"', "32-bit decimal integer"),
    (z.CONTROLLER_EPOCH, b"2147483648", "32-bit decimal integer"),
    (z.CONTROLLER_EPOCH, None, "no data"),
    (z.CONTROLLER_EPOCH, b"\xff", "UTF-8"),
    # admin
    ("/admin/delete_topics/" + "x" * 250, None, "at most 249 characters"),
    ("/admin/delete_topics/a b", None, "topic name"),
    (
        z.REASSIGN_PARTITIONS,
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]}]}',
        "Kafka 2.0+ controllers",
    ),
    (z.REASSIGN_PARTITIONS, b'{"version":1,"partitions":[],"note":"x"}', "extra keys ['note']"),
    (z.REASSIGN_PARTITIONS, b'{"version":1,"partitions":{}}', "'partitions' as a JSON array"),
    (z.REASSIGN_PARTITIONS, b'{"version":1,"partitions":[{"topic":"t","partition":0}]}', "key 'replicas'"),
    (
        z.REASSIGN_PARTITIONS,
        b'{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
        "partition",
    ),
    (z.REASSIGN_PARTITIONS, b'{"version":1,"partitions":[7]}', "partitions[0] to be a JSON object"),
    (
        z.PREFERRED_REPLICA_ELECTION,
        b'{"version":1,"partitions":[{"topic":"t","partition":"0"}]}',
        "'partition'",
    ),
    (z.PREFERRED_REPLICA_ELECTION, b'{"version":1}', "key 'partitions'"),
    (
        "/isr_change_notification/isr_change_0000000001",
        b'{"version":1,"partitions":[{"topic":1}]}',
        "'topic'",
    ),
    (
        "/log_dir_event_notification/log_dir_event_0000000001",
        b'{"version":1,"broker":true,"event":1}',
        "'broker'",
    ),
    # config
    ("/config/topics/t", b'{"version":1,"config":{"retention.ms":86400000}}', "JSON string"),
    ("/config/topics/t", b'{"version":1,"config":{"x":null}}', "JSON string"),
    ("/config/topics/t", b'{"version":1}', "key 'config'"),
    ("/config/brokers/abc", b'{"version":1,"config":{}}', "broker id or '<default>'"),
    ("/config/topics/bad%name", b'{"version":1,"config":{}}', "topic name"),
    ("/config/changes/config_change_0000000001", b'{"version":3,"entity_path":"topics/t"}', "version 1 or 2"),
    ("/config/changes/config_change_0000000001", b'{"version":2,"entity_path":"topics"}', "entity_path"),
    ("/config/changes/config_change_0000000001", b'{"version":2,"entity_path":"groups/g"}', "entity_path"),
    ("/config/changes/config_change_0000000001", b'{"version":2}', "key 'entity_path'"),
    (
        "/config/changes/config_change_0000000001",
        b'{"version":1,"entity_type":"brokers","entity_name":"1"}',
        "'topics' or 'clients'",
    ),
    (
        "/config/changes/config_change_0000000001",
        b'{"version":1,"entity_type":"topics"}',
        "key 'entity_name'",
    ),
    # cluster id, feature, migration, producer ids
    (z.CLUSTER_ID, b'{"version":1,"id":"OCL4MTxnT3C42KhD0jWynw"}', "'version' as a JSON string"),
    (z.CLUSTER_ID, b'{"version":"1"}', "key 'id'"),
    (z.FEATURE, b'{"features":{},"version":3,"status":1}', "version 1 or 2"),
    (z.FEATURE, b'{"features":{},"version":0,"status":1}', "version 1 or 2"),
    (z.FEATURE, b'{"features":{},"version":2}', "key 'status'"),
    (z.FEATURE, b'{"features":{},"version":2,"status":null}', "key 'status'"),
    (z.FEATURE, b'{"features":{},"version":2,"status":2}', "'status' 0 (disabled) or 1 (enabled)"),
    (z.FEATURE, b'{"version":2,"status":1}', "key 'features'"),
    (z.FEATURE, b'{"features":{"f":{"max_version_level":2}},"version":1,"status":1}', "'min_version_level'"),
    (
        z.FEATURE,
        b'{"features":{"f":{"min_version_level":3,"max_version_level":2}},"version":1,"status":1}',
        "1 <=",
    ),
    (z.FEATURE, b'{"features":{"f":{"max_version_level":0}},"version":2,"status":1}', "1 <="),
    (z.FEATURE, b'{"features":{"f":{"max_version_level":1,"x":"y"}},"version":2,"status":1}', "'x'"),
    (z.MIGRATION, b'{"version":1,"kraft_controller_id":1}', "/migration version 0"),
    (
        z.MIGRATION,
        b'{"version":0,"kraft_controller_id":1,"kraft_controller_epoch":1,"kraft_metadata_epoch":1}',
        "offset",
    ),
    (
        z.LATEST_PRODUCER_ID_BLOCK,
        b'{"version":1,"broker":2,"block_start":2000,"block_end":"2999"}',
        "'block_start' as a string of decimal digits",
    ),
    (
        z.LATEST_PRODUCER_ID_BLOCK,
        b'{"version":1,"broker":2,"block_start":"2000","block_end":"1999"}',
        "block_end >=",
    ),
    (z.LATEST_PRODUCER_ID_BLOCK, b'{"version":1,"block_start":"1","block_end":"2"}', "key 'broker'"),
]


@pytest.mark.parametrize(("path", "data", "expected"), MALFORMED)
def test_malformed_znodes_raise_a_typed_error_naming_the_znode(
    path: str, data: bytes | None, expected: str
) -> None:
    with pytest.raises(ZnodeFormatError) as raised:
        z.decode_znode(path, data)
    assert raised.value.source == path
    assert expected in str(raised.value)
    assert str(raised.value).startswith(f"{path}: expected ")


def test_class_decoders_check_their_path() -> None:
    with pytest.raises(ZnodeFormatError, match="/brokers/topics/<topic>"):
        z.TopicAssignment.decode(TOPIC_V1, "/brokers/ids/1")
    with pytest.raises(ZnodeFormatError, match="/brokers/topics/<t>/partitions/<p>/state"):
        z.PartitionState.decode(b"{}", "/brokers/topics/t")


def test_decode_is_cheap_enough_for_large_snapshots() -> None:
    import time

    data = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,0,1]}'
    paths = [f"/brokers/topics/topic-{i % 500}/partitions/{i % 40}/state" for i in range(5_000)]
    start = time.perf_counter()
    for path in paths:
        z.decode_znode(path, data)
    assert time.perf_counter() - start < 1.0  # ~0.12 s here (~25 µs a znode)
