"""The listener that proves "refused before any I/O" counts every connection made to it, also one
the client gave up on before anything was read, and nothing else."""

from __future__ import annotations

import socket

import pytest

from airflow_provider_kafka_zk.testing.silent_listener import SilentListener


def test_it_counts_each_connection_and_answers_none():
    with SilentListener() as dead:
        assert dead.address == f"127.0.0.1:{dead.port}"
        assert dead.attempts() == 0
        with socket.create_connection(("127.0.0.1", dead.port), timeout=5) as client:
            client.settimeout(0.2)
            with pytest.raises(TimeoutError):
                client.recv(1)  # nobody answers
        with socket.create_connection(("127.0.0.1", dead.port), timeout=5):
            pass  # closed at once: still counted
        assert dead.attempts() == 2
        assert dead.attempts() == 2  # counted once each


def test_its_port_is_closed_after_the_block():
    with SilentListener() as dead:
        port = dead.port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
