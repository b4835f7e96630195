"""The KRaft metadata log codec: bytes assembled by hand from the 3.9.0-rc3 schemas, round trips,
files (snapshot then log), and the image the records replay into."""

from __future__ import annotations

import struct

import pytest

from airflow_provider_kafka_zk.kafka.kraft_metadata import (
    MetadataImage,
    MetadataLogFile,
    MetadataRecordError,
    QuorumState,
    ZkMigrationState,
    decode_metadata_record,
    encode_metadata_batch,
    encode_metadata_record,
    metadata_log_reads,
    read_metadata_files,
    snapshot_file_name,
)
from airflow_provider_kafka_zk.kafka.records import Record, encode_record_batch
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

INCARNATION = KafkaUuid(bytes(range(16)))
TOPIC_ID = KafkaUuid.parse("Kxerhoh-TCK9GXC9ydbIhA")


def _compact(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_zk_migration_state_record_bytes() -> None:
    # frame 1, api key 21, version 0, ZkMigrationState int8, no tagged fields
    assert (
        encode_metadata_record("ZkMigrationStateRecord", 0, {"ZkMigrationState": 2})
        == b"\x01\x15\x00\x02\x00"
    )
    record = decode_metadata_record(b"\x01\x15\x00\x01\x00", "t")
    assert record.name == "ZkMigrationStateRecord" and ZkMigrationState(record["ZkMigrationState"]) is (
        ZkMigrationState.MIGRATION
    )


def test_register_broker_record_v2_bytes_by_hand() -> None:
    """RegisterBrokerRecord v2 of a ZooKeeper-mode broker in migration mode, field by field."""
    by_hand = (
        b"\x01\x00\x02"  # frame, api key 0, version 2
        + struct.pack(">i", 0)  # BrokerId
        + b"\x01"  # IsMigratingZkBroker (v2+, second in declaration order)
        + INCARNATION.raw
        + struct.pack(">q", 42)  # BrokerEpoch
        + b"\x02"  # EndPoints: one
        + _compact("PLAINTEXT")
        + _compact("127.0.0.1")
        + struct.pack(">H", 49092)
        + struct.pack(">h", 0)
        + b"\x00"  # the endpoint's tagged fields
        + b"\x01"  # Features: none
        + _compact("r0")  # Rack
        + b"\x01"  # Fenced
        + b"\x00"  # InControlledShutdown (v1+)
        + b"\x00"  # tagged fields (LogDirs is v3+)
    )
    fields = {
        "BrokerId": 0,
        "IsMigratingZkBroker": True,
        "IncarnationId": INCARNATION,
        "BrokerEpoch": 42,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 49092, "SecurityProtocol": 0}],
        "Features": [],
        "Rack": "r0",
        "Fenced": True,
    }
    assert encode_metadata_record("RegisterBrokerRecord", 2, fields) == by_hand
    record = decode_metadata_record(by_hand, "t")
    assert record["IsMigratingZkBroker"] is True
    assert record["EndPoints"][0]["Port"] == 49092
    assert record["Rack"] == "r0" and record["LogDirs"] == ()


def test_tagged_fields_are_written_only_when_not_default_and_read_back() -> None:
    plain = encode_metadata_record(
        "PartitionChangeRecord", 0, {"PartitionId": 1, "TopicId": TOPIC_ID}
    )  # every tagged field at its default: an empty tagged section
    assert plain == b"\x01\x05\x00" + struct.pack(">i", 1) + TOPIC_ID.raw + b"\x00"
    change = encode_metadata_record(
        "PartitionChangeRecord", 0, {"PartitionId": 1, "TopicId": TOPIC_ID, "Leader": 2, "Isr": [2, 0]}
    )
    # two tagged fields in tag order: Isr (tag 0: compact array of 2 int32) then Leader (tag 1)
    assert change.endswith(
        b"\x02" + b"\x00\x09\x03" + struct.pack(">ii", 2, 0) + b"\x01\x04" + struct.pack(">i", 2)
    )
    record = decode_metadata_record(change, "t")
    assert record["Isr"] == (2, 0) and record["Leader"] == 2 and record["Replicas"] is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x00\x15\x00\x02\x00", "frame version 1"),
        (b"\x01\x63\x00\x00", "a metadata record type"),
        (b"\x01\x15\x00\x02\x00\x00", "no bytes after"),
        (b"\x01\x15\x00", "1 more byte"),
    ],
)
def test_bad_records_name_what_is_wrong(data: bytes, expected: str) -> None:
    with pytest.raises(MetadataRecordError, match=expected):
        decode_metadata_record(data, "controller-3000/__cluster_metadata-0/x.log offset 7")


def _batch(records: list[tuple[str, int, dict]], base: int) -> bytes:
    return encode_metadata_batch(records, base_offset=base, epoch=1, timestamp=1)


def test_files_snapshot_then_the_log_after_its_end_offset() -> None:
    snapshot = _batch(
        [
            ("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}),
            ("ZkMigrationStateRecord", 0, {"ZkMigrationState": 2}),
        ],
        0,
    )
    control = encode_record_batch([Record(2, 1, b"\x00\x00\x00\x00", b"\x00\x00")], is_control=True)
    log = (
        _batch([("ZkMigrationStateRecord", 0, {"ZkMigrationState": 2})], 0)  # below the snapshot: skipped
        + control
        + _batch(
            [
                ("TopicRecord", 0, {"Name": "mig-a", "TopicId": TOPIC_ID}),
                (
                    "PartitionRecord",
                    0,
                    {
                        "PartitionId": 0,
                        "TopicId": TOPIC_ID,
                        "Replicas": [1, 2, 0],
                        "Isr": [1, 2, 0],
                        "Leader": 1,
                        "LeaderEpoch": 0,
                        "PartitionEpoch": 0,
                    },
                ),
                ("PartitionChangeRecord", 0, {"PartitionId": 0, "TopicId": TOPIC_ID, "Leader": 2}),
                ("ZkMigrationStateRecord", 0, {"ZkMigrationState": 1}),
            ],
            3,
        )
    )
    files = [
        MetadataLogFile(snapshot_file_name(2, 1), len(snapshot), snapshot),
        MetadataLogFile("00000000000000000000.log", len(log), log),
    ]
    records = read_metadata_files(files, "controller-3000")
    assert [r.name for r in records][:2] == ["FeatureLevelRecord", "ZkMigrationStateRecord"]
    image = MetadataImage.replay(records)
    assert image.metadata_version == 21
    assert image.zk_migration_state is ZkMigrationState.MIGRATION and image.zk_migration_state_offset == 6
    partition = image.partitions[(str(TOPIC_ID), 0)]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 1, 1)
    assert image.topics == {"mig-a": str(TOPIC_ID)}


def test_broker_registrations_replay_fencing_and_kraft_reregistration() -> None:
    def register(epoch: int, migrating: bool) -> tuple[str, int, dict]:
        return (
            "RegisterBrokerRecord",
            2,
            {
                "BrokerId": 0,
                "IsMigratingZkBroker": migrating,
                "IncarnationId": INCARNATION,
                "BrokerEpoch": epoch,
                "EndPoints": [],
                "Features": [],
                "Rack": None,
                "Fenced": True,
            },
        )

    records = [
        decode_metadata_record(encode_metadata_record(n, v, f), "t", i)
        for i, (n, v, f) in enumerate(
            [
                register(10, True),
                ("UnfenceBrokerRecord", 0, {"Id": 0, "Epoch": 10}),
                register(20, False),
                ("UnfenceBrokerRecord", 0, {"Id": 0, "Epoch": 10}),  # an older epoch: ignored
                ("BrokerRegistrationChangeRecord", 0, {"BrokerId": 0, "BrokerEpoch": 20, "Fenced": -1}),
            ]
        )
    ]
    broker = MetadataImage.replay(records).brokers[0]
    assert broker.kraft_broker and not broker.fenced and broker.epoch == 20 and broker.offset == 2


def test_reads_choose_the_newest_snapshot_and_the_segments_after_it() -> None:
    listing = [
        MetadataLogFile("00000000000000000000.log", 100),
        MetadataLogFile("00000000000000000500.log", 100),
        MetadataLogFile("00000000000000000900.log", 100),
        MetadataLogFile(snapshot_file_name(0, 0), 10),
        MetadataLogFile(snapshot_file_name(700, 3), 50),
        MetadataLogFile("quorum-state", 80),
    ]
    assert metadata_log_reads(listing, 1000) == [
        snapshot_file_name(700, 3),
        "00000000000000000500.log",
        "00000000000000000900.log",
    ]
    with pytest.raises(MetadataRecordError, match="at most 100 bytes"):
        metadata_log_reads(listing, 100)


def test_quorum_state_both_data_versions() -> None:
    v0 = b'{"clusterId":"","leaderId":3000,"leaderEpoch":4,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":3000}],"data_version":0}'
    v1 = b'{"leaderId":3001,"leaderEpoch":7,"votedId":3001,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    assert QuorumState.parse(v0, "q") == QuorumState(3000, 4)
    assert QuorumState.parse(v1, "q") == QuorumState(3001, 7)
