"""Parsing of the kafka_zookeeper connection into kazoo arguments (pure, no server needed)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_zk.hooks.zookeeper import ZooKeeperConnectionConfig


def config(host="zk1,zk2:2182", port=None, login=None, password=None, **extra):
    return ZooKeeperConnectionConfig.from_connection(host, port, login, password, extra)


def test_hosts_get_the_default_port_and_the_chroot():
    c = config(chroot="/kafka_cluster_01")
    assert c.hosts == ("zk1:2181", "zk2:2182")
    assert c.connect_string == "zk1:2181,zk2:2182/kafka_cluster_01"
    assert c.kazoo_kwargs()["hosts"] == "zk1:2181,zk2:2182/kafka_cluster_01"


def test_chroot_may_come_with_the_hosts_and_port_field_is_the_default():
    c = config(host="zk1,zk2/kafka/prod", port=2999)
    assert c.hosts == ("zk1:2999", "zk2:2999")
    assert c.chroot == "/kafka/prod"


@pytest.mark.parametrize("bad", ["kafka", "/a/../b", "/a/./b"])
def test_chroot_must_be_a_plain_absolute_path(bad):
    with pytest.raises(ValueError, match="chroot"):
        config(chroot=bad)


def test_root_chroot_means_no_chroot():
    assert config(chroot="/").chroot == ""


def test_digest_auth_and_secrets_stay_out_of_repr():
    c = config(login="kafka", password="s3cret", auth_scheme="digest")
    assert c.kazoo_kwargs()["auth_data"] == [("digest", "kafka:s3cret")]
    assert "s3cret" not in repr(c)


def test_login_alone_means_digest():
    assert config(login="kafka", password="pw").auth_scheme == "digest"


def test_sasl_and_tls_options_reach_kazoo():
    c = config(
        login="u",
        password="p",
        auth_scheme="sasl",
        sasl_mechanism="GSSAPI",
        use_ssl="true",
        verify_certs="false",
        ca_file="/ca.pem",
        key_password="kp",
    )
    kwargs = c.kazoo_kwargs()
    # pure-sasl's GSSAPI takes a principal (the ticket cache's credentials), not a password
    assert kwargs["sasl_options"] == {"mechanism": "GSSAPI", "service": "zookeeper", "principal": "u"}
    digest = config(login="u", password="p", auth_scheme="sasl").kazoo_kwargs()["sasl_options"]
    assert digest == {"mechanism": "DIGEST-MD5", "service": "zookeeper", "username": "u", "password": "p"}
    assert kwargs["use_ssl"] is True and kwargs["verify_certs"] is False
    assert kwargs["ca"] == "/ca.pem" and kwargs["keyfile_password"] == "kp"
    assert "kp" not in repr(c)


def test_timeouts_and_read_only():
    c = config(session_timeout="12", connect_timeout=3, read_only=True)
    assert c.kazoo_kwargs()["timeout"] == 12.0
    assert c.connect_timeout == 3.0 and c.read_only is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"host": ""}, "no host"),
        ({"auth_scheme": "kerberos"}, "auth_scheme"),
        ({"auth_scheme": "digest"}, "login"),
    ],
)
def test_bad_connections_are_refused_clearly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        config(**kwargs)


def test_jute_maxbuffer_comes_from_the_connection_then_the_provider_config(monkeypatch):
    """The size multi-op writes are cut under: the connection's field, else ``[kafka_zk]
    jute_maxbuffer``, else ZooKeeper's default (1048575)."""
    import json

    from airflow_provider_kafka_zk.hooks.zookeeper import DEFAULT_JUTE_MAXBUFFER, KafkaZooKeeperHook

    def conn(extra: dict) -> str:
        return json.dumps({"conn_type": "kafka_zookeeper", "host": "127.0.0.1", "port": 2181, "extra": extra})

    monkeypatch.delenv("AIRFLOW__KAFKA_ZK__JUTE_MAXBUFFER", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_ZK_PLAIN", conn({}))
    assert KafkaZooKeeperHook("zk_plain").config.jute_maxbuffer == DEFAULT_JUTE_MAXBUFFER == 1048575
    monkeypatch.setenv("AIRFLOW__KAFKA_ZK__JUTE_MAXBUFFER", "4194304")
    assert KafkaZooKeeperHook("zk_plain").config.jute_maxbuffer == 4194304
    monkeypatch.setenv("AIRFLOW_CONN_ZK_SMALL", conn({"jute_maxbuffer": 65536}))
    assert KafkaZooKeeperHook("zk_small").config.jute_maxbuffer == 65536
