"""A simulated broker's disk is rewritten from the model at every sync, as a real one is never: a
reader over SSH must never find server.properties (or a log dir file the model keeps) missing."""

from __future__ import annotations

import threading

from airflow_provider_kafka_zk.testing.simulator.disk_writer import broker_host, write_broker_hosts
from airflow_provider_kafka_zk.testing.simulator.scenarios import healthy_cluster


def test_a_reader_never_sees_a_host_file_vanish_while_syncs_rewrite_the_hosts(tmp_path):
    cluster = healthy_cluster()
    root = tmp_path / "hosts"
    write_broker_hosts(cluster, root, "127.0.0.1:2181/kafka")
    host = broker_host(cluster, 0, root)
    watched = [host.server_properties, *(d / "meta.properties" for d in host.log_dirs)]
    missing: list[str] = []
    stop = threading.Event()

    def read_while_syncing() -> None:
        while not stop.is_set():
            for path in watched:
                try:
                    path.read_bytes()
                except FileNotFoundError:
                    missing.append(str(path))

    reader = threading.Thread(target=read_while_syncing)
    reader.start()
    try:
        for _ in range(15):
            cluster.tick()
            write_broker_hosts(cluster, root, "127.0.0.1:2181/kafka")
    finally:
        stop.set()
        reader.join()
    assert missing == []
    assert not (tmp_path / ".hosts.staging").exists()  # nothing left beside the hosts


def test_a_sync_removes_what_the_model_no_longer_has(tmp_path):
    cluster = healthy_cluster()
    root = tmp_path / "hosts"
    write_broker_hosts(cluster, root, "127.0.0.1:2181/kafka")
    host = broker_host(cluster, 0, root)
    stray = host.log_dirs[0] / "not-from-the-model-0"
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"x")
    meta = host.log_dirs[0] / "meta.properties"
    before = meta.read_bytes()
    write_broker_hosts(cluster, root, "127.0.0.1:2181/kafka")
    assert not stray.exists()
    assert meta.read_bytes() == before
