"""Key-order emulation of Kafka's JVM maps.

Expected orders come from real Kafka 3.3.1 znodes (tests/fixtures/real-kafka-3.3.1) or were
produced by the JVM itself (Scala 2.13 collections, JDK 17 HashMap/Properties, Jackson) when the
emulation was written; they are literals here so the tests need no JVM.
"""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.kafka import _jackson as jackson


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("version", 351608024),
        ("Aa", 2112),
        ("BB", 2112),
        ("😀", 1772899),  # two UTF-16 code units, as Java hashes them
        ("listener_security_protocol_map", 740874377),
    ],
)
def test_java_string_hash_matches_string_hashcode(text: str, expected: int) -> None:
    assert jackson.java_string_hash(text) == expected


def test_java_string_hash_overflows_to_negative_like_java() -> None:
    assert jackson.java_string_hash("removing_replicas") == 1671277817
    assert jackson.java_string_hash("adding_replicas") < 0
    assert -(2**31) <= jackson.java_string_hash("x" * 1000) < 2**31


@pytest.mark.parametrize(("entries", "capacity"), [(0, 16), (3, 8), (4, 8), (6, 16), (11, 16), (12, 32)])
def test_scala_mutable_map_literal_capacity(entries: int, capacity: int) -> None:
    assert jackson.scala_mutable_map_literal_capacity(entries) == capacity


def test_topic_znode_top_level_order_is_kafka_3_3_1s() -> None:
    keys = ["version", "partitions", "adding_replicas", "removing_replicas", "topic_id"]
    capacity = jackson.scala_mutable_map_literal_capacity(4)
    assert jackson.scala_mutable_map_order(keys, capacity) == [
        "partitions",
        "topic_id",
        "adding_replicas",
        "removing_replicas",
        "version",
    ]
    assert jackson.scala_mutable_map_order(keys[:4], capacity) == [
        "partitions",
        "adding_replicas",
        "removing_replicas",
        "version",
    ]


def test_broker_registration_orders_for_each_written_version() -> None:
    base = ["version", "host", "port", "endpoints", "jmx_port", "timestamp"]
    capacity = jackson.scala_mutable_map_literal_capacity(6)
    assert jackson.scala_mutable_map_order(base, capacity) == [
        "endpoints",
        "jmx_port",
        "port",
        "host",
        "version",
        "timestamp",
    ]
    v5 = [*base, "rack", "listener_security_protocol_map", "features"]
    assert jackson.scala_mutable_map_order(v5, capacity) == [
        "features",
        "listener_security_protocol_map",
        "endpoints",
        "rack",
        "jmx_port",
        "port",
        "host",
        "version",
        "timestamp",
    ]


def test_fifty_partition_keys_in_a_growing_scala_map() -> None:
    order = jackson.scala_mutable_map_order([str(p) for p in range(50)])
    assert order[:8] == ["44", "45", "46", "47", "48", "49", "10", "11"]
    assert order[16:19] == ["0", "1", "2"]
    assert order[-4:] == ["40", "41", "42", "43"]
    assert sorted(order, key=int) == [str(p) for p in range(50)]


def test_scala_mutable_bucket_is_sorted_by_hash_not_insertion() -> None:
    # 'k110' and 'k121' share a bucket; Scala 2.13 keeps buckets sorted by hash (JVM-checked),
    # java.util.HashMap keeps insertion order in the same situation.
    assert jackson.scala_mutable_map_order(["k110", "k121"]) == ["k121", "k110"]
    assert jackson.java_hash_map_order(["k110", "k121"]) == ["k110", "k121"]


def test_scala_mutable_grows_one_entry_earlier_than_java() -> None:
    # 12 entries: Scala grows to 32 buckets before inserting the 12th, java.util.HashMap stays
    # at 16 until the 13th, so 't10' lands elsewhere (both orders produced by the JVM).
    keys = [f"t{i}" for i in range(12)]
    assert jackson.scala_mutable_map_order(keys) == [
        "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t0", "t1", "t2", "t3"
    ]  # fmt: skip
    assert jackson.java_hash_map_order(keys) == [
        "t4", "t5", "t6", "t10", "t7", "t8", "t9", "t11", "t0", "t1", "t2", "t3"
    ]  # fmt: skip


def test_scala_immutable_map_keeps_insertion_order_up_to_four() -> None:
    keys = ["version", "broker", "block_start", "block_end"]
    assert jackson.scala_immutable_map_order(keys) == keys


def test_scala_immutable_champ_order_for_five_and_six_entries() -> None:
    state = ["version", "leader", "leader_epoch", "controller_epoch", "isr"]
    assert jackson.scala_immutable_map_order(state) == [
        "controller_epoch",
        "leader",
        "version",
        "leader_epoch",
        "isr",
    ]
    assert jackson.scala_immutable_map_order([*state, "leader_recovery_state"]) == [
        "controller_epoch",
        "leader",
        "version",
        "leader_recovery_state",
        "leader_epoch",
        "isr",
    ]
    migration = [
        "version",
        "kraft_controller_id",
        "kraft_controller_epoch",
        "kraft_metadata_offset",
        "kraft_metadata_epoch",
    ]
    assert jackson.scala_immutable_map_order(migration) == [
        "version",
        "kraft_metadata_offset",
        "kraft_controller_id",
        "kraft_metadata_epoch",
        "kraft_controller_epoch",
    ]


def test_scala_immutable_champ_sub_node_comes_after_single_entries() -> None:
    # 'f20' and 'f25' share the level-0 fragment 0, so they form a sub-node iterated last.
    keys = ["f20", "f21", "f22", "f23", "f24", "f25"]
    assert jackson.scala_immutable_map_order(keys) == ["f24", "f21", "f22", "f23", "f25", "f20"]


def test_equal_hashes_keep_insertion_order() -> None:
    keys = ["AaAa", "BBBB", "AaBB", "BBAa", "x", "y"]  # the first four share one String.hashCode
    for order in (
        jackson.scala_mutable_map_order(keys),
        jackson.java_hash_map_order(keys),
        jackson.scala_immutable_map_order(keys),
        jackson.java_properties_order(keys),
    ):
        assert [k for k in order if k not in ("x", "y")] == keys[:4]


def test_java_properties_order_matches_real_topic_configs() -> None:
    assert jackson.java_properties_order(["cleanup.policy", "segment.bytes", "compression.type"]) == [
        "compression.type",
        "cleanup.policy",
        "segment.bytes",
    ]
    for inserted in (
        ["min.insync.replicas", "retention.ms", "cleanup.policy"],
        ["cleanup.policy", "retention.ms", "min.insync.replicas"],
    ):
        assert jackson.java_properties_order(inserted) == [
            "cleanup.policy",
            "min.insync.replicas",
            "retention.ms",
        ]


def test_java_properties_resize_reorders_a_bucket_like_concurrent_hash_map() -> None:
    keys = ["c14", "c98", "g93", "a12", "e91", "b26", "e8", "b9", "d82", "c65", "g2", "f62"]
    expected = ["g93", "a12", "c98", "c65", "f62", "b26", "c14", "g2", "e8", "b9", "e91", "d82"]
    assert jackson.java_properties_order(keys) == expected
    assert jackson.java_hash_map_order(keys) != expected  # HashMap would not reorder


def test_reorder_helpers_keep_values() -> None:
    mapping = {"version": 1, "status": 1, "features": {}}
    ordered = jackson.scala_mutable_map(mapping, jackson.scala_mutable_map_literal_capacity(3))
    assert list(ordered) == ["features", "version", "status"]
    assert ordered == mapping


def test_dumps_is_compact_and_keeps_key_order() -> None:
    assert jackson.dumps({"b": [1, -2], "a": None, "c": True, "d": False, "e": "x/y"}) == (
        b'{"b":[1,-2],"a":null,"c":true,"d":false,"e":"x/y"}'
    )
    assert jackson.dumps({"t": (1, 2)}) == b'{"t":[1,2]}'


def test_dumps_escapes_like_jackson() -> None:
    # Byte-for-byte what Jackson 2 wrote for the same strings (upper-case hex, DEL and U+2028 raw).
    value = {'a"b': 0, "\x01\x1f\x7f": 3, "\u2028x": 5, "\b\f": 2, "back\\slash": 1, "é€😀/": 4}
    assert jackson.dumps(value) == (
        b'{"a\\"b":0,"\\u0001\\u001F\x7f":3,"\xe2\x80\xa8x":5,"\\b\\f":2,"back\\\\slash":1,'
        b'"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/":4}'
    )
    assert jackson.dumps("tab\tnl\ncr\r") == b'"tab\\tnl\\ncr\\r"'


def test_dumps_rejects_values_kafka_never_writes() -> None:
    with pytest.raises(TypeError, match="float"):
        jackson.dumps({"x": 1.5})
