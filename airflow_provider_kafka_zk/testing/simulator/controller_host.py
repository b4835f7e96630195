"""The KRaft controllers' hosts of a migrating simulated cluster: their server.properties and meta.properties.

Layout of ``<root>/controller-<node.id>/``: ``config/server.properties`` (the recorded 3.9.0 migration's
``config/controller-3000.properties``: ``process.roles=controller``, ``node.id``, the quorum's bootstrap
servers and listener, the migration flag and ``zookeeper.connect`` -- and the ``listener.security.protocol.map``
and ``log.dirs`` docs/ops.html's sample lacks) and ``data/meta.properties`` as ``kafka-storage format`` wrote it
there (``version=1``, ``node.id``, ``directory.id``, ``cluster.id``: logs/01-controller.txt). The metadata log
(``bootstrap.checkpoint``, ``__cluster_metadata-0``) is not simulated.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kafka_zk.kafka.logdir import MetaProperties, java_date_string

from .cluster import SimulatedCluster


@dataclass(frozen=True)
class ControllerHost:
    """Where one KRaft controller's files are (as its host would show them over SSH)."""

    node_id: int
    address: str
    root: Path
    server_properties: Path
    metadata_log_dir: Path


def controller_hosts(cluster: SimulatedCluster, root: Path) -> dict[int, ControllerHost]:
    """The provisioned controllers' hosts (none before :meth:`SimulatedCluster.provision_kraft_controllers`)."""
    migration = cluster.kraft_migration
    out = {}
    for node in migration.controller_node_ids if migration is not None else ():
        host_root = root / f"controller-{node}"
        out[node] = ControllerHost(
            node_id=node,
            address=cluster.kraft_controller_address(node).rsplit(":", 1)[0],
            root=host_root,
            server_properties=host_root / "config" / "server.properties",
            metadata_log_dir=host_root / "data",
        )
    return out


def controller_server_properties(
    cluster: SimulatedCluster, host: ControllerHost, zookeeper_connect: str
) -> str:
    """A migrating controller's server.properties, keys as the recorded migration's controller had them."""
    migration = cluster.kraft_migration
    nodes = migration.controller_node_ids if migration is not None else (host.node_id,)
    settings = {
        "process.roles": "controller",
        "node.id": str(host.node_id),
        "controller.quorum.bootstrap.servers": ",".join(cluster.kraft_controller_address(n) for n in nodes),
        "controller.listener.names": "CONTROLLER",
        "listeners": f"CONTROLLER://{cluster.kraft_controller_address(host.node_id)}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(host.metadata_log_dir),
        "zookeeper.metadata.migration.enable": "true",
        "zookeeper.connect": zookeeper_connect,
        "inter.broker.listener.name": "PLAINTEXT",
    }
    header = f"# server.properties of simulated KRaft controller {host.node_id} ({cluster.spec.name})"
    return "\n".join([header, *(f"{k}={v}" for k, v in settings.items())]) + "\n"


def controller_meta_properties(cluster: SimulatedCluster, node_id: int) -> bytes:
    """``kafka-storage format``'s meta.properties of a controller (``MetaProperties`` v1, 3.9.0-rc3)."""
    formatted = dt.datetime.fromtimestamp(cluster.spec.start_time_ms / 1000, dt.UTC)
    meta = MetaProperties(
        version=1,
        cluster_id=cluster.cluster_id,
        node_id=node_id,
        directory_id=cluster.kraft_controller_directory_id(node_id),
    )
    return meta.encode(date_line=java_date_string(formatted))


def write_controller_hosts(
    cluster: SimulatedCluster, root: Path, zookeeper_connect: str
) -> dict[int, ControllerHost]:
    """(Re)write each provisioned controller's two files, each replaced atomically."""
    hosts = controller_hosts(cluster, root)
    for node, host in hosts.items():
        for path, data in (
            (host.server_properties, controller_server_properties(cluster, host, zookeeper_connect).encode()),
            (host.metadata_log_dir / "meta.properties", controller_meta_properties(cluster, node)),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            staged = path.with_name(f".{path.name}.tmp")
            staged.write_bytes(data)
            os.replace(staged, path)
    return hosts
