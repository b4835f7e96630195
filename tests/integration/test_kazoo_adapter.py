"""kazoo's private pieces, used only through ``hooks/_kazoo_protocol.py``, against a real ZooKeeper.

A new kazoo that renames its request queue, its session timeout or its connection thread fails
here (or at import, for a version outside the tested range), not in the middle of a snapshot walk.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import kazoo.version
import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from airflow_provider_kafka_zk.hooks._kazoo_protocol import (
    GET_CHILDREN,
    GET_DATA,
    SUPPORTED_KAZOO,
    UnsupportedKazooError,
    check_kazoo_version,
    connection_thread_alive,
    server_path,
    session_timeout_s,
    submit_multi_read,
    submit_transaction,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["2.10.0", "2.11.0", "2.11.3"])
def test_tested_kazoo_releases_load(version):
    check_kazoo_version(version)


@pytest.mark.parametrize("version", ["2.9.0", "2.12.0", "3.0.0", "dev"])
def test_other_kazoo_releases_are_refused_naming_the_range(version):
    with pytest.raises(
        UnsupportedKazooError,
        match=r"tested with kazoo 2\.10 to 2\.11 only: pip install 'kazoo>=2\.10,<2\.12'",
    ):
        check_kazoo_version(version)


def test_the_installed_kazoo_and_the_setup_pin_are_the_tested_range():
    installed = tuple(int(p) for p in kazoo.version.__version__.split(".")[:2])
    assert installed in SUPPORTED_KAZOO
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    requirements = [r.strip() for r in config["options"]["install_requires"].splitlines() if r.strip()]
    (pin,) = [r for r in requirements if r.startswith("kazoo")]
    low, high = SUPPORTED_KAZOO[0], SUPPORTED_KAZOO[-1]
    assert pin == f"kazoo>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"


def test_private_pieces_work_on_a_real_server(zookeeper_server, zk_chroot):
    client = KazooClient(hosts=zookeeper_server.connect_string + zk_chroot, timeout=7.0)
    assert session_timeout_s(client) == 7.0 and not connection_thread_alive(client)
    client.start(timeout=15.0)
    try:
        assert connection_thread_alive(client)
        assert 4.0 <= session_timeout_s(client) <= 7.0  # what the server granted
        created = submit_transaction(
            client,
            [
                Create(server_path(client, "/a"), None, OPEN_ACL_UNSAFE, 0),
                Create(server_path(client, "/a/b"), b"data", OPEN_ACL_UNSAFE, 0),
            ],
        ).get(timeout=10)
        assert created == ["/a", "/a/b"]  # kazoo strips the chroot from the replies
        assert client.get("/a/b")[0] == b"data"
        replies = submit_multi_read(
            client,
            [(GET_CHILDREN, server_path(client, "/a")), (GET_DATA, server_path(client, "/a/b"))],
        ).get(timeout=10)
        assert replies[0] == ["b"]
        data, stat = replies[1]
        assert data == b"data" and stat[8] == 4  # dataLength
    finally:
        client.stop()
        client.close()
    assert not connection_thread_alive(client)
