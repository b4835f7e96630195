"""The built-in demo cluster: real ZooKeeper and sshd on loopback, the simulated incident cluster in
them, and a report of what a Kafka tool reading ZooKeeper and the broker disks now finds.

    python -m airflow_provider_kafka_zk.testing.demo [--workdir .demo] [--kafka-version 3.3.1] [--keep-running]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from kazoo.client import KazooClient

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.logdir import DirKind

from .simulator import DeployedCluster, incident_cluster
from .simulator.readback import BrokerOnDisk, ZnodeReading, read_broker, read_zookeeper
from .sshd import SshServer
from .zookeeper import ZooKeeperServer

CHROOT = "/kafka_demo"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, default=Path(".demo"), help="where broker host roots go")
    parser.add_argument("--kafka-version", default="3.3.1", help="simulated release (2.8.x or 3.x)")
    parser.add_argument("--keep-running", action="store_true", help="keep the services up until Ctrl-C")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    workdir = args.workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    cluster = incident_cluster(kafka_version=args.kafka_version)
    addresses = tuple(b.spec.host for b in cluster.brokers.values())
    started = time.monotonic()
    with (
        ZooKeeperServer(workdir / "zookeeper") as zookeeper,
        SshServer(addresses, work_dir=workdir / "sshd") as sshd,
    ):
        print(
            f"ZooKeeper {zookeeper.connect_string} (pid {zookeeper.pid}); "
            f"sshd on {', '.join(addresses)} port {sshd.port} (pid {sshd.pid})"
        )
        with DeployedCluster(cluster, zookeeper.connect_string, CHROOT, workdir / "hosts") as deployed:
            client = KazooClient(hosts=deployed.zookeeper_connect)
            client.start()
            try:
                tree = read_zookeeper(client)
            finally:
                client.stop()
                client.close()
            disks = {b: read_broker(b, h.server_properties) for b, h in deployed.hosts.items()}
            print(report(deployed, tree, disks, time.monotonic() - started))
            if args.keep_running:
                print("\nServices and broker sessions stay up; Ctrl-C stops them.")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass
    return 0


def report(
    deployed: DeployedCluster, tree: dict[str, ZnodeReading], disks: dict[int, BrokerOnDisk], seconds: float
) -> str:
    """What the raw ZooKeeper tree and broker files show, incident by incident (read back, not the model)."""
    cluster = deployed.cluster
    spec = cluster.spec
    lines = []
    cluster_id = tree[zk.CLUSTER_ID].decoded.id
    controller = tree[zk.CONTROLLER].decoded
    live = sorted(int(p.rsplit("/", 1)[1]) for p in tree if p.startswith(zk.BROKER_IDS + "/"))
    replicas = sum(len(d.replicas) for d in disks.values())
    lines.append(
        f"\nSimulated Kafka {spec.kafka_version} cluster '{spec.name}' (IBP {spec.ibp}), cluster id {cluster_id}, "
        f"built in {seconds:.1f}s"
    )
    lines.append(f"  ZooKeeper: {deployed.zookeeper_connect}  ({len(tree)} znodes)")
    lines.append(f"  broker hosts: {deployed.root}  ({replicas} partition directories)")
    lines.append(
        f"  controller: broker {controller.broker_id}, epoch {tree[zk.CONTROLLER_EPOCH].data.decode()}"
    )
    lines.append("\nBrokers")
    for broker_id, broker in sorted(cluster.brokers.items()):
        disk = disks[broker_id]
        marker = disk.log_dirs[0].clean_shutdown
        if broker_id in live:
            status = "live (registered)"
        elif marker is not None:
            status = "STOPPED, clean shutdown marker present"
        else:
            status = "STOPPED, no clean-shutdown marker (crashed)"
        lines.append(
            f"  {broker_id}  rack {broker.spec.rack or '-'}  host {broker.spec.host}  "
            f"{len(disk.replicas):3d} dirs  {status}"
        )
    lines.append("\nTopics (from ZooKeeper)")
    for _, reading in sorted(tree.items()):
        if not isinstance(reading.decoded, zk.TopicAssignment):
            continue
        topic = reading.decoded
        rf = Counter(len(r) for r in topic.partitions.values()).most_common(1)[0][0]
        offline = sum(
            1
            for p in topic.partitions
            if tree[zk.partition_state_path(topic.topic, p)].decoded.leader == zk.NO_LEADER
        )
        flags = []
        if topic.topic_id is None:
            flags.append("NO topic_id")
        if topic.is_reassigning:
            flags.append("reassigning")
        if zk.delete_topic_path(topic.topic) in tree:
            flags.append("MARKED FOR DELETION")
        if offline:
            flags.append(f"{offline} offline")
        lines.append(
            f"  {topic.topic:22s} {len(topic.partitions):3d} partitions  RF {rf}  "
            f"topic_id {str(topic.topic_id) if topic.topic_id else '-':22s}  {', '.join(flags)}"
        )
    lines.append("\nIncidents, as the raw data shows them")
    lines += _incident_lines(tree, disks, live)
    lines.append("\nStep by step, what happened to this cluster:")
    lines += [f"  - {step}" for step in cluster.history]
    return "\n".join(lines)


def _incident_lines(
    tree: dict[str, ZnodeReading], disks: dict[int, BrokerOnDisk], live: list[int]
) -> list[str]:
    out = []
    topics = {r.decoded.topic: r.decoded for r in tree.values() if isinstance(r.decoded, zk.TopicAssignment)}
    all_replicas = [r for d in disks.values() for r in d.replicas]
    for name, topic in sorted(topics.items()):
        ids = {
            (r.broker_id, r.name.partition): r.topic_id
            for r in all_replicas
            if r.name.topic == name and r.name.kind is DirKind.NORMAL and r.topic_id is not None
        }
        if topic.topic_id is not None:
            wrong = sorted(k for k, v in ids.items() if v != topic.topic_id)
            if wrong:
                disk_ids = sorted({str(ids[k]) for k in wrong})
                out.append(
                    f"  [a] KAFKA-14190 {name}: ZooKeeper topic_id {topic.topic_id}, but {len(wrong)} replica(s) "
                    f"hold {', '.join(disk_ids)} in partition.metadata (brokers {sorted({b for b, _ in wrong})})"
                )
        elif ids:
            out.append(
                f"  [a] precursor {name}: topic znode has no topic_id; replicas hold "
                f"{', '.join(sorted({str(v) for v in ids.values()}))}; the next controller failover mints a new one"
            )
    for broker_id in sorted(disks):
        rf1 = sorted(
            f"{t}-{p}" for t, a in topics.items() for p, r in a.partitions.items() if r == (broker_id,)
        )
        if not rf1:
            continue
        state = "offline now" if broker_id not in live else "go offline if it stops"
        out.append(f"  [b] RF=1 on broker {broker_id} ({state}): {', '.join(rf1)}")
    for path in sorted(p for p in tree if p.startswith(zk.DELETE_TOPICS + "/")):
        name = path.rsplit("/", 1)[1]
        topic = topics.get(name)
        cause = "?"
        if topic is not None and topic.is_reassigning:
            cause = "reassignment in progress"
        elif topic is not None:
            down = sorted({b for r in topic.partitions.values() for b in r if b not in live})
            cause = f"replica broker(s) {down} offline" if down else "in progress"
        out.append(f"  [c] deletion of {name} pending: {cause}")
    for replica in all_replicas:
        if replica.name.topic not in topics:
            age_h = (time.time() - replica.path.stat().st_mtime) / 3600
            out.append(
                f"  [c] leftover on broker {replica.broker_id}: {replica.path.name} "
                f"({replica.name.kind.name.lower()}, {age_h:.0f} h old; topic gone from ZooKeeper)"
            )
    for replica in all_replicas:
        for problem in replica.index_problems:
            if problem.corrupt:
                out.append(f"  [d] broker {replica.broker_id}: {problem}")
    return out


if __name__ == "__main__":
    sys.exit(main())
