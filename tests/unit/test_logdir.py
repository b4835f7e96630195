"""Log-dir text files and directory names: golden bytes from Kafka 3.3.1, round trips, and every
way a file can be malformed (each must raise LogDirFormatError naming the file)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.kafka.errors import LogDirFormatError
from airflow_provider_kafka_zk.kafka.logdir import (
    CleanShutdownMarker,
    DirKind,
    EpochEntry,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    OffsetCheckpointEntry,
    PartitionDirName,
    PartitionMetadata,
    encode_java_properties,
    format_partition_dir_name,
    java_date_string,
    parse_java_int,
    parse_java_properties,
    parse_partition_dir_name,
)
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.3.1"
LOG_DIRS = sorted(GOLDEN.glob("broker*/*/"))
HEX = "0123456789abcdef0123456789abcdef"
TOPIC_ID = "_Tw9oRGRTQarYuqBjHjr0g"  # golden-rf3's id (starts with '_')


def golden_files(pattern: str) -> list[Path]:
    files = sorted(GOLDEN.glob(pattern))
    assert files, pattern
    return files


def test_golden_tree_has_both_states_of_all_brokers() -> None:
    assert [p.relative_to(GOLDEN).as_posix() for p in LOG_DIRS] == [
        f"broker{b}/{state}" for b in range(3) for state in ("after-clean-stop", "running")
    ]


# --------------------------------------------------------------------------------------------
# directory names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("golden-rf3-0", PartitionDirName("golden-rf3", 0)),
        ("golden.dots-and-dashes-1", PartitionDirName("golden.dots-and-dashes", 1)),
        ("__consumer_offsets-49", PartitionDirName("__consumer_offsets", 49)),
        ("t-2147483647", PartitionDirName("t", 2147483647)),
        ("a-b.c-d-7." + HEX + "-delete", PartitionDirName("a-b.c-d", 7, DirKind.DELETE, HEX)),
        ("golden-rf1-3." + HEX + "-future", PartitionDirName("golden-rf1", 3, DirKind.FUTURE, HEX)),
        ("x.y-0." + HEX + "-stray", PartitionDirName("x.y", 0, DirKind.STRAY, HEX)),
    ],
)
def test_partition_dir_names_round_trip(name: str, expected: PartitionDirName) -> None:
    parsed = parse_partition_dir_name(name)
    assert parsed == expected
    assert parsed.name == name
    assert format_partition_dir_name(parsed.topic, parsed.partition, parsed.kind, parsed.unique_id) == name


def test_every_golden_partition_dir_name_parses() -> None:
    for partition_dir in golden_files("broker*/*/*-*/"):
        parsed = parse_partition_dir_name(partition_dir.name)
        assert parsed.kind is DirKind.NORMAL
        assert f"{parsed.topic}-{parsed.partition}" == partition_dir.name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "nodash",  # aborts LogManager startup in 3.9
        "topic-",
        "-3",
        "topic-x",
        "topic-1_0",  # Python int() would take it, Java does not
        "topic- 1",
        "topic-2147483648",
        "topic.abc-delete",  # no '-' before '.uniqueId'
        "t-0.-delete",  # empty unique id
        "t-0.a b-delete",  # the suffix pattern is \S+ only
        "t-x." + HEX + "-future",
        "t-0" + HEX + "-stray",  # no '.'
    ],
)
def test_partition_dir_names_kafka_rejects(name: str) -> None:
    with pytest.raises(LogDirFormatError) as caught:
        parse_partition_dir_name(name, source=f"/data/kafka/{name}")
    assert "topic-partition" in str(caught.value)
    assert caught.value.source == f"/data/kafka/{name}"


def test_partition_dir_name_java_quirks_are_kept() -> None:
    """Kafka's parser accepts these too (Integer.parseInt takes '+'; unique ids are unchecked)."""
    assert parse_partition_dir_name("t-+5") == PartitionDirName("t", 5)
    odd = parse_partition_dir_name("t-0.not-hex-delete")
    assert odd == PartitionDirName("t", 0, DirKind.DELETE, "not-hex")
    assert not odd.has_standard_unique_id
    assert parse_partition_dir_name("t-0." + HEX + "-delete").has_standard_unique_id


def test_delete_and_stray_names_are_capped_at_255_but_future_is_not() -> None:
    topic = "t" * 249
    delete = format_partition_dir_name(topic, 12, DirKind.DELETE, HEX)
    stray = format_partition_dir_name(topic, 12, DirKind.STRAY, HEX)
    future = format_partition_dir_name(topic, 12, DirKind.FUTURE, HEX)
    assert len(delete) == len(stray) == 255
    assert len(future) == 249 + len("-12.") + 32 + len("-future")
    parsed = parse_partition_dir_name(delete)
    assert topic.startswith(parsed.topic) and len(parsed.topic) == 255 - len("-12." + HEX + "-delete")
    assert parsed.topic_possibly_truncated
    assert not parse_partition_dir_name(future).topic_possibly_truncated
    assert len(format_partition_dir_name(topic, 12, DirKind.DELETE, HEX, cap_length=False)) > 255
    assert format_partition_dir_name("short", 1, DirKind.DELETE, HEX) == f"short-1.{HEX}-delete"


def test_format_generates_a_kafka_style_unique_id() -> None:
    parsed = parse_partition_dir_name(format_partition_dir_name("t", 0, DirKind.DELETE))
    assert parsed.kind is DirKind.DELETE and parsed.has_standard_unique_id
    with pytest.raises(ValueError, match="no unique id"):
        format_partition_dir_name("t", 0, DirKind.NORMAL, HEX)


# --------------------------------------------------------------------------------------------
# partition.metadata
# --------------------------------------------------------------------------------------------


def test_golden_partition_metadata_parse_and_reencode_byte_exact() -> None:
    for path in golden_files("broker*/*/*/partition.metadata"):
        data = path.read_bytes()
        parsed = PartitionMetadata.parse(data, str(path), strict=True)
        assert parsed.version == 0
        assert parsed.encode() == data
        assert len(data) == 43


def test_partition_metadata_golden_id_and_round_trip() -> None:
    data = (GOLDEN / "broker0/running/golden-rf3-0/partition.metadata").read_bytes()
    assert data == f"version: 0\ntopic_id: {TOPIC_ID}".encode()
    parsed = PartitionMetadata.parse(data, "pm")
    assert str(parsed.topic_id) == TOPIC_ID
    assert PartitionMetadata(KafkaUuid.parse(TOPIC_ID)).encode() == data


def test_partition_metadata_accepts_what_kafka_accepts_but_strict_does_not() -> None:
    canonical = f"version: 0\ntopic_id: {TOPIC_ID}"
    for tolerated in (
        canonical + "\n",
        canonical.replace("\n", "\r\n"),
        "version:\t0\ntopic_id:  " + TOPIC_ID,
    ):
        assert str(PartitionMetadata.parse(tolerated, "pm").topic_id) == TOPIC_ID
        with pytest.raises(LogDirFormatError, match="no trailing newline"):
            PartitionMetadata.parse(tolerated, "pm", strict=True)
    # 3.7+ accepts any version >= 0 and the parser keeps it (2.8-3.6 brokers need 0)
    assert PartitionMetadata.parse(f"version: 1\ntopic_id: {TOPIC_ID}", "pm").version == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"", "version: 0"),
        (b"version: 0", "line 2"),
        (b"version:0\ntopic_id: " + TOPIC_ID.encode(), "line 1"),
        (b"version: 0\ntopic_id:" + TOPIC_ID.encode(), "line 2"),
        (b"version: x\ntopic_id: " + TOPIC_ID.encode(), "integer"),
        (b"version: 0 \ntopic_id: " + TOPIC_ID.encode(), "integer"),
        (b"version: -1\ntopic_id: " + TOPIC_ID.encode(), ">= 0"),
        (b"version: 0: 1\ntopic_id: " + TOPIC_ID.encode(), "line 1"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "ZERO"),
        (b"version: 0\ntopic_id: " + TOPIC_ID[:-1].encode(), "topic id"),
        (b"version: 0\ntopic_id: not*base64*at*all*!!!", "topic id"),
        (b"version: 0\ntopic_id: \xff\xfe", "UTF-8"),
    ],
)
def test_partition_metadata_malformed(text: bytes, expected: str) -> None:
    with pytest.raises(LogDirFormatError, match=expected) as caught:
        PartitionMetadata.parse(text, "/data/kafka/t-0/partition.metadata")
    assert caught.value.source == "/data/kafka/t-0/partition.metadata"


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------

OFFSET_CHECKPOINT_NAMES = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


def test_golden_offset_checkpoints_parse_and_reencode_byte_exact() -> None:
    seen = 0
    for log_dir in LOG_DIRS:
        for name in OFFSET_CHECKPOINT_NAMES:
            data = (log_dir / name).read_bytes()
            parsed = OffsetCheckpoint.parse(data, str(log_dir / name))
            if data:
                assert parsed.encode() == data
            else:  # 0-byte file: Kafka creates it empty; it means "no entries"
                assert name == "cleaner-offset-checkpoint" and parsed.entries == ()
            seen += 1
    assert seen == 24


def test_golden_checkpoint_contents() -> None:
    replication = OffsetCheckpoint.parse(
        (GOLDEN / "broker0/running/replication-offset-checkpoint").read_bytes(), "hw"
    )
    assert len(replication.entries) == 23
    assert replication.offsets[("golden-rf3", 0)] == 6641
    assert replication.offsets[("golden.dots-and-dashes", 1)] == 494
    log_start = OffsetCheckpoint.parse(
        (GOLDEN / "broker0/running/log-start-offset-checkpoint").read_bytes(), "ls"
    )
    assert log_start.entries == () and log_start.encode() == b"0\n0\n"


def test_golden_leader_epoch_checkpoints_parse_and_reencode_byte_exact() -> None:
    for path in golden_files("broker*/*/*/leader-epoch-checkpoint"):
        data = path.read_bytes()
        assert LeaderEpochCheckpoint.parse(data, str(path)).encode() == data
    broker1 = LeaderEpochCheckpoint.parse(
        (GOLDEN / "broker1/after-clean-stop/golden-rf3-0/leader-epoch-checkpoint").read_bytes(), "lec"
    )
    assert broker1.entries == (EpochEntry(0, 0), EpochEntry(1, 6641))


def test_checkpoint_round_trips_and_lenient_forms() -> None:
    checkpoint = OffsetCheckpoint.from_offsets({("a-b.c", 0): 5, ("__consumer_offsets", 49): 2**40})
    assert checkpoint.encode() == b"0\n2\na-b.c 0 5\n__consumer_offsets 49 1099511627776\n"
    assert OffsetCheckpoint.parse(checkpoint.encode(), "c") == checkpoint
    assert OffsetCheckpoint.parse(b"", "c").entries == ()
    assert OffsetCheckpoint.parse(b"0\n", "c").entries == ()  # only the version line
    assert OffsetCheckpoint.parse(b"0", "c").entries == ()
    assert OffsetCheckpoint.parse(b"0\n1\nt\t0  7 \n", "c").entries == (OffsetCheckpointEntry("t", 0, 7),)
    assert OffsetCheckpoint.parse(b"0\r\n1\r\nt 0 7\r\n", "c").offsets == {("t", 0): 7}
    # a repeated partition: the broker's map keeps the last line
    assert OffsetCheckpoint.parse(b"0\n2\nt 0 1\nt 0 2\n", "c").offsets == {("t", 0): 2}
    epochs = LeaderEpochCheckpoint((EpochEntry(0, 0), EpochEntry(3, 2**33)))
    assert epochs.encode() == b"0\n2\n0 0\n3 8589934592\n"
    assert LeaderEpochCheckpoint.parse(epochs.encode(), "lec") == epochs


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"1\n0\n", "version 0"),
        (b"x\n0\n", "version line"),
        (b"0 \n0\n", "version line"),
        (b"0\n2\nt 0 1\n", "2 entries"),  # fewer entries than the count
        (b"0\n1\nt 0 1\nt 1 1\n", "1 entries"),  # more entries than the count
        (b"0\n0\nt 0 1\n", "0 entries"),
        (b"0\n-1\n", "non-negative"),
        (b"0\nx\n", "count"),
        (b"0\n1\nt 0\n", "topic partition offset"),
        (b"0\n1\nt 0 1 2\n", "topic partition offset"),
        (b"0\n1\n t 0 1\n", "topic partition offset"),  # leading whitespace splits off an empty field
        (b"0\n2\nt 0 1\n\n", "topic partition offset"),  # blank line
        (b"0\n1\nt x 1\n", "partition on line 3"),
        (b"0\n1\nt 0 1.5\n", "offset on line 3"),
        (b"0\n1\nt 2147483648 1\n", "int32"),
        (b"0\n1\nt 0 9223372036854775808\n", "int64"),
        (b"0\n1\nt\xff 0 1\n", "UTF-8"),
    ],
)
def test_offset_checkpoint_malformed(data: bytes, expected: str) -> None:
    with pytest.raises(LogDirFormatError, match=expected) as caught:
        OffsetCheckpoint.parse(data, "/data/kafka/replication-offset-checkpoint")
    assert caught.value.source == "/data/kafka/replication-offset-checkpoint"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"0\n1\n0\n", "epoch startOffset"),
        (b"0\n1\n0 0 0\n", "epoch startOffset"),
        (b"0\n1\n2147483648 0\n", "int32"),
        (b"0\n1\nx 0\n", "epoch on line 3"),
        (b"0\n1\n0 y\n", "start offset on line 3"),
        (b"0\n2\n0 0\n", "2 entries"),
    ],
)
def test_leader_epoch_checkpoint_malformed(data: bytes, expected: str) -> None:
    with pytest.raises(LogDirFormatError, match=expected):
        LeaderEpochCheckpoint.parse(data, "lec")


def test_parse_java_int_is_java_not_python() -> None:
    assert parse_java_int("-12", "s", "n") == -12
    assert parse_java_int("+7", "s", "n") == 7
    assert parse_java_int("9223372036854775807", "s", "n", bits=64) == 2**63 - 1
    for bad in ("", " 1", "1 ", "1_0", "0x10", "1.0", "2147483648"):
        with pytest.raises(LogDirFormatError):
            parse_java_int(bad, "s", "n")


# --------------------------------------------------------------------------------------------
# Java properties, meta.properties
# --------------------------------------------------------------------------------------------


def test_parse_java_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! also a comment \\\n"
        "   \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d\t=\t4 \n"
        "e\n"
        "f=\n"
        "g=one \\\n"
        "    two\\\n"
        "\tthree\n"
        "h\\=i=j\\:k\n"
        "uni=\\u00e9\\t\\n\\q\n"
        "a=again\n"
        "log.dirs=/data/a,/data/b\r\n"
        "last=\\\\"
    )
    assert parse_java_properties(text, "server.properties") == {
        "a": "again",
        "b": "2",
        "c": "3",
        "d": "4 ",
        "e": "",
        "f": "",
        "g": "one twothree",
        "h=i": "j:k",
        "uni": "é\t\nq",
        "log.dirs": "/data/a,/data/b",
        "last": "\\",
    }


def test_parse_java_properties_bytes_are_latin1_and_bad_unicode_escape_fails() -> None:
    assert parse_java_properties(b"k=caf\xe9\n", "p") == {"k": "café"}
    assert parse_java_properties("k=v\\\n", "p") == {"k": "v"}  # continuation at end of input
    with pytest.raises(LogDirFormatError, match="uXXXX") as caught:
        parse_java_properties("k=\\u12G4\n", "/etc/kafka/server.properties")
    assert caught.value.source == "/etc/kafka/server.properties"


def test_encode_java_properties_escapes_and_hash_order() -> None:
    out = encode_java_properties({"version": "0", "a b": " x=y#\u00e9"}, date_line="D")
    assert out == b"#\n#D\na\\ b=\\ x\\=y\\#\\u00E9\nversion=0\n"  # hash bins 2, then 13
    assert parse_java_properties(out, "p") == {"version": "0", "a b": " x=y#\u00e9"}
    assert (
        encode_java_properties({"k": "\u00e9"}, date_line="D", escape_unicode=False)
        == "#\n#D\nk=\u00e9\n".encode()
    )


def test_golden_meta_properties_parse_and_reencode_byte_exact() -> None:
    for path in golden_files("broker*/*/meta.properties"):
        data = path.read_bytes()
        meta = MetaProperties.parse(data, str(path))
        broker = int(path.parent.parent.name[-1])
        assert meta == MetaProperties(version=0, cluster_id="OCL4MTxnT3C42KhD0jWynw", broker_id=broker)
        assert meta.id == broker
        assert meta.date_line == "Sun Nov 22 04:33:54 UTC 2026"
        assert meta.encode() == data
        assert len(data) == 88


def test_meta_properties_encode_from_scratch_matches_kafka() -> None:
    meta = MetaProperties(version=0, cluster_id="OCL4MTxnT3C42KhD0jWynw", broker_id=0)
    date = java_date_string(dt.datetime(2026, 11, 22, 4, 33, 54, tzinfo=dt.UTC))
    assert date == "Sun Nov 22 04:33:54 UTC 2026"
    assert meta.encode(date) == (GOLDEN / "broker0/running/meta.properties").read_bytes()
    assert java_date_string(dt.datetime(2024, 1, 5, 7, 8, 9)) == "Fri Jan 05 07:08:09 UTC 2024"
    assert meta.encode().startswith(b"#\n#")  # default date line is "now"


def test_meta_properties_v1_directory_id_and_unknown_keys_round_trip() -> None:
    directory_id = KafkaUuid.parse("MvDxzVmcRsaTz33bUuRU6A")
    kraft = MetaProperties(version=1, cluster_id="c", node_id=3, directory_id=directory_id, date_line="D")
    data = kraft.encode()
    assert data == b"#\n#D\nnode.id=3\ndirectory.id=MvDxzVmcRsaTz33bUuRU6A\nversion=1\ncluster.id=c\n"
    assert MetaProperties.parse(data, "m") == kraft
    migrating = MetaProperties.parse(
        b"broker.id=1\nversion=0\ncluster.id=c\ndirectory.id=MvDxzVmcRsaTz33bUuRU6A\n", "m"
    )
    assert migrating.directory_id == directory_id and migrating.broker_id == 1
    assert (
        migrating.encode("D")
        == b"#\n#D\nbroker.id=1\ndirectory.id=MvDxzVmcRsaTz33bUuRU6A\nversion=0\ncluster.id=c\n"
    )
    extra = MetaProperties.parse(b"version=0\nbroker.id=1\nzz=top\n", "m")
    assert extra.other == (("zz", "top"),) and extra.cluster_id is None
    assert MetaProperties.parse(extra.encode("D"), "m") == extra


def test_meta_properties_lenient_like_kafka() -> None:
    assert MetaProperties.parse(b"broker.id=4\n", "m") == MetaProperties(
        version=0, cluster_id=None, broker_id=4
    )
    assert MetaProperties.parse(b"version= 0 \ncluster.id=c\n", "m").broker_id is None  # 3.9 trims version


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"version=2\nbroker.id=1\n", "version 0 or 1"),
        (b"version=zero\n", "version"),
        (b"version=0\nbroker.id=one\n", "broker.id"),
        (b"version=0\nbroker.id=1 \n", "broker.id"),
        (b"version=1\ncluster.id=c\n", "node.id"),
        (b"version=1\nnode.id=x\n", "node.id"),
        (b"version=0\nbroker.id=1\ndirectory.id=nope\n", "directory.id"),
        (b"version=0\nbroker.id=\\u00\n", "uXXXX"),
    ],
)
def test_meta_properties_malformed(data: bytes, expected: str) -> None:
    with pytest.raises(LogDirFormatError, match=expected) as caught:
        MetaProperties.parse(data, "/data/kafka/meta.properties")
    assert caught.value.source == "/data/kafka/meta.properties"


# --------------------------------------------------------------------------------------------
# .kafka_cleanshutdown
# --------------------------------------------------------------------------------------------


def test_golden_clean_shutdown_markers_are_empty() -> None:
    markers = golden_files("broker*/after-clean-stop/.kafka_cleanshutdown")
    assert len(markers) == 3
    assert not list(GOLDEN.glob("broker*/running/.kafka_cleanshutdown"))
    for path in markers:
        marker = CleanShutdownMarker.parse(path.read_bytes(), str(path))
        assert marker == CleanShutdownMarker() and marker.encode() == b""


def test_clean_shutdown_marker_json_round_trip_and_malformed() -> None:
    zk_mode = CleanShutdownMarker(broker_epoch=-1, version=0)
    assert zk_mode.encode() == b'{"version":0,"brokerEpoch":-1}'
    assert CleanShutdownMarker.parse(zk_mode.encode(), "m") == zk_mode
    assert (
        CleanShutdownMarker.parse(b'{"version":0,"brokerEpoch":12884901890,"x":1}', "m").broker_epoch
        == 12884901890
    )
    for bad in (
        b"garbage",
        b"[]",
        b'{"version":"0","brokerEpoch":1}',
        b'{"version":0,"brokerEpoch":1.5}',
        b"\xff",
    ):
        with pytest.raises(LogDirFormatError) as caught:
            CleanShutdownMarker.parse(bad, "/data/kafka/.kafka_cleanshutdown")
        assert caught.value.source == "/data/kafka/.kafka_cleanshutdown"
