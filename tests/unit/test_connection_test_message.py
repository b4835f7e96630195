"""What a connection test shows (the UI's toast, ``airflow connections test``): a sentence naming the
cluster id, the ZooKeeper release and the live brokers, not a raw JSON string."""

from __future__ import annotations

from airflow_provider_kafka_zk.hooks.zookeeper import (
    CONN_TYPE,
    LEGACY_CONN_TYPE,
    KafkaZooKeeperHook,
    LegacyKafkaZooKeeperHook,
    connection_test_message,
    zookeeper_server_version,
)


def test_the_message_names_cluster_zookeeper_and_brokers():
    assert connection_test_message("AbCdEfGhIjKlMnOpQrStUv", "3.8.0", [0, 1, 5], "/kafka/eu1") == (
        "Kafka cluster AbCdEfGhIjKlMnOpQrStUv in /kafka/eu1 on ZooKeeper 3.8.0; live brokers: 0, 1, 5 (3)"
    )


def test_the_message_says_what_it_could_not_tell():
    text = connection_test_message(None, None, [], None)
    assert text == (
        "Kafka cluster (no /cluster/id yet) in / on ZooKeeper (version not told: srvr refused); "
        "live brokers: none (0)"
    )


class _Client:
    def __init__(self, reply: object) -> None:
        self.reply = reply

    def command(self, word: bytes) -> object:
        assert word == b"srvr"
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_the_version_comes_from_srvr():
    reply = (
        "Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49 UTC\n"
    )
    assert zookeeper_server_version(_Client(reply)) == "3.8.0"
    assert (
        zookeeper_server_version(_Client("srvr is not executed because it is not in the whitelist.\n"))
        is None
    )
    assert zookeeper_server_version(_Client(ConnectionResetError("TLS port"))) is None


def test_the_connection_type_has_no_underscore_and_the_old_name_still_resolves():
    assert "_" not in CONN_TYPE and "-" not in CONN_TYPE  # RFC 3986 scheme; '-' reads back as '_'
    assert KafkaZooKeeperHook.conn_type == CONN_TYPE
    assert LegacyKafkaZooKeeperHook.conn_type == LEGACY_CONN_TYPE == "kafka_zookeeper"
    assert issubclass(LegacyKafkaZooKeeperHook, KafkaZooKeeperHook)
