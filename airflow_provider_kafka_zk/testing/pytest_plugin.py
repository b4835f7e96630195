"""pytest fixtures for real local ZooKeeper and sshd, usable by any project.

Load it from a conftest.py::

    pytest_plugins = ["airflow_provider_kafka_zk.testing.pytest_plugin"]

Servers are session-scoped and shared (one JVM start per run); isolation comes from a fresh
chroot per test. Importing this module starts nothing and imports neither Airflow nor kazoo.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer

if TYPE_CHECKING:
    from kazoo.client import KazooClient

# One address per simulated broker host; Linux answers on all of 127.0.0.0/8 without set-up.
SSH_TEST_ADDRESSES: tuple[str, ...] = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole session; tests share it through separate chroots."""
    server = ZooKeeperServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_chroot(zookeeper_server: ZooKeeperServer) -> str:
    """A fresh, empty, existing chroot path (e.g. ``/kafka_test_0000000042``) for this test."""
    if not zookeeper_server.is_running:
        # A test that stopped or killed the shared server must not fail every later test.
        zookeeper_server.start()
    return zookeeper_server.new_chroot()


@pytest.fixture
def kazoo_client(zookeeper_server: ZooKeeperServer, zk_chroot: str) -> Iterator[KazooClient]:
    """A started KazooClient rooted at this test's chroot; stopped and closed afterwards."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper_server.connect_string + zk_chroot, timeout=10.0)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="session")
def ssh_server() -> Iterator[SshServer]:
    """One real sshd on a free port on 127.0.0.1-4, with generated host and client keys."""
    server = SshServer(SSH_TEST_ADDRESSES)
    try:
        server.start()
        yield server
    finally:
        server.close()
