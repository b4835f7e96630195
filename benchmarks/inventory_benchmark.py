"""Broker inventory over SSH vs a per-file SFTP walk, on one simulated broker with 12,000 partitions.

    .venv/bin/python benchmarks/inventory_benchmark.py [--partitions 12000] [--workdir DIR]

Builds a broker host root with the core encoders (per partition directory: partition.metadata,
leader-epoch-checkpoint and a small segment .log/.index/.timeindex), serves it with a real sshd on
127.0.0.1, then times in the same run:

* baseline: what a naive tool does over paramiko SFTP: list the log dir, list each partition
  directory, read partition.metadata and leader-epoch-checkpoint file by file (a round trip each);
* inventory: ``BrokerHostHook.inventory`` (one SSH connection, one remote command streaming JSON).

Both include connecting and parsing with the core parsers. Prints both times, the ratio (target
>= 10x) and whether the inventory is under 5 s. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

BROKER_ID = 1
TOPIC_PARTITIONS = 10  # 12,000 directories = 1,200 topics x 10 partitions


def build_broker(root: Path, partitions: int) -> Path:
    """Write server.properties and one log dir with ``partitions`` partition directories."""
    from airflow_provider_kafka_zk.kafka.logdir import (
        EpochEntry,
        LeaderEpochCheckpoint,
        MetaProperties,
        OffsetCheckpoint,
        PartitionMetadata,
        format_partition_dir_name,
    )
    from airflow_provider_kafka_zk.kafka.records import (
        LogSegmentWriter,
        Record,
        encode_record_batch,
        segment_file_name,
    )
    from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

    log_dir = root / "data" / "kafka-logs-0"
    log_dir.mkdir(parents=True)
    properties = root / "config" / "server.properties"
    properties.parent.mkdir(parents=True)
    properties.write_text(
        f"broker.id={BROKER_ID}\nlog.dirs={log_dir}\nzookeeper.connect=127.0.0.1:2181/kafka\n"
    )
    (log_dir / "meta.properties").write_bytes(
        MetaProperties(version=0, cluster_id="bSXPc0xJod0nPk2Pq19b2w", broker_id=BROKER_ID).encode(
            date_line="Sun Nov 22 04:33:54 UTC 2026"
        )
    )
    writer = LogSegmentWriter(0)
    writer.append(
        encode_record_batch(
            [
                Record(offset=o, timestamp=1_700_000_000_000 + o, key=b"k", value=b"v" * 100)
                for o in range(20)
            ],
            partition_leader_epoch=3,
        )
    )
    writer.close()
    log_bytes, index_bytes, time_bytes = (
        writer.log_bytes(),
        writer.offset_index_bytes(),
        writer.time_index_bytes(),
    )
    epochs = LeaderEpochCheckpoint((EpochEntry(0, 0), EpochEntry(3, 12))).encode()
    offsets = {}
    topic_ids: dict[str, bytes] = {}
    for number in range(partitions):
        topic, partition = f"bench-topic-{number // TOPIC_PARTITIONS:05d}", number % TOPIC_PARTITIONS
        if topic not in topic_ids:
            topic_ids[topic] = PartitionMetadata(KafkaUuid.random()).encode()
        path = log_dir / format_partition_dir_name(topic, partition)
        path.mkdir()
        (path / "partition.metadata").write_bytes(topic_ids[topic])
        (path / "leader-epoch-checkpoint").write_bytes(epochs)
        (path / segment_file_name(0, ".log")).write_bytes(log_bytes)
        (path / segment_file_name(0, ".index")).write_bytes(index_bytes)
        (path / segment_file_name(0, ".timeindex")).write_bytes(time_bytes)
        offsets[(topic, partition)] = 20
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (log_dir / name).write_bytes(OffsetCheckpoint.from_offsets(offsets).encode())
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        (log_dir / name).write_bytes(OffsetCheckpoint.from_offsets({}).encode())
    return properties


def sftp_walk(
    host: str, port: int, user: str, key_file: str, known_hosts: str, log_dir: str
) -> dict[str, str]:
    """The baseline: one SFTP round trip per directory listing and per file read."""
    import paramiko

    from airflow_provider_kafka_zk.kafka.logdir import (
        LeaderEpochCheckpoint,
        PartitionMetadata,
        parse_partition_dir_name,
    )

    client = paramiko.SSHClient()
    client.get_host_keys().load(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        host, port=port, username=user, key_filename=key_file, look_for_keys=False, allow_agent=False
    )
    ids = {}
    try:
        sftp = client.open_sftp()
        for entry in sftp.listdir_attr(log_dir):
            if not entry.longname.startswith("d"):
                continue
            path = f"{log_dir}/{entry.filename}"
            names = set(sftp.listdir(path))
            parse_partition_dir_name(entry.filename)
            if "partition.metadata" in names:
                with sftp.open(f"{path}/partition.metadata") as handle:
                    ids[entry.filename] = str(PartitionMetadata.parse(handle.read(), path).topic_id)
            if "leader-epoch-checkpoint" in names:
                with sftp.open(f"{path}/leader-epoch-checkpoint") as handle:
                    LeaderEpochCheckpoint.parse(handle.read(), path)
    finally:
        client.close()
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=12_000)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="inventory-bench-"))
    os.environ.setdefault("AIRFLOW_HOME", str(workdir / "airflow"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

    from airflow_provider_kafka_zk.testing.sshd import SshServer

    started = time.monotonic()
    if (workdir / "host").exists():
        shutil.rmtree(workdir / "host")
    properties = build_broker(workdir / "host", args.partitions)
    log_dir = str(workdir / "host" / "data" / "kafka-logs-0")
    print(
        f"built {args.partitions} partition directories in {time.monotonic() - started:.1f}s under {workdir}"
    )

    with SshServer(("127.0.0.1",), work_dir=workdir / "sshd") as sshd:
        os.environ.update(sshd.airflow_connection("127.0.0.1", "inventory_bench_ssh", conn_timeout=30))
        from airflow_provider_kafka_zk.hooks.broker_host import BrokerHostHook

        for name in ("paramiko", "airflow_provider_kafka_zk"):  # keep the output to the numbers
            logging.getLogger(name).setLevel(logging.WARNING)
        hook = BrokerHostHook(
            "inventory_bench_ssh",
            broker_hosts={BROKER_ID: "127.0.0.1"},
            server_properties_path=str(properties),
        )
        hook.inventory(BROKER_ID)  # warm-up: imports, page cache, sshd's first fork

        started = time.monotonic()
        baseline_ids = sftp_walk(
            "127.0.0.1",
            sshd.port,
            sshd.user,
            str(sshd.client_private_key_path),
            str(sshd.known_hosts_path),
            log_dir,
        )
        baseline = time.monotonic() - started

        started = time.monotonic()
        inventory = hook.inventory(BROKER_ID)
        ours = time.monotonic() - started

    ours_ids = {p.name: p.topic_id for p in inventory.partitions if p.topic_id}
    same = ours_ids == baseline_ids and len(ours_ids) == args.partitions
    ratio = baseline / ours if ours else float("inf")
    result = {
        "partition_dirs": args.partitions,
        "baseline_sftp_s": round(baseline, 3),
        "inventory_s": round(ours, 3),
        "remote_walk_s": round(float(inventory.remote.get("seconds", 0.0)), 3),
        "ratio": round(ratio, 1),
        "ratio_target_10x_met": ratio >= 10,
        "inventory_under_5s": ours < 5,
        "same_topic_ids": same,
    }
    print(f"baseline (per-file SFTP walk): {baseline:8.2f} s")
    print(f"inventory (one command):       {ours:8.2f} s  (remote walk {result['remote_walk_s']:.2f} s)")
    print(f"ratio: {ratio:.1f}x (target >= 10x: {'met' if ratio >= 10 else 'NOT met'})")
    print(f"inventory under 5 s: {'yes' if ours < 5 else 'NO'}; both saw the same topic ids: {same}")
    print(json.dumps(result))
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
