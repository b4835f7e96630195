"""Write a big simulated ZooKeeper tree fast: thousand-op transactions instead of one create per znode.

``ZooKeeperTreeWriter`` (the simulator's writer) pipelines single creates, about 2,000 znodes/s
here; a 230k-znode benchmark tree would take two minutes. One transaction of a thousand creates is
one request and one log write, so the same tree loads in about ten seconds. Only for set-up of
large trees in tests and benchmarks; the result is the same tree (data, persistent/ephemeral kind,
Stat versions) the writer produces, minus the writer's later diff-and-sync ability.

Example::

    with BulkLoadedTree(zk.connect_string, "/big", render_zookeeper(cluster)) as tree:
        ...  # live brokers' ephemerals are held by one session per broker until close()
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create, SetData
from kazoo.security import OPEN_ACL_UNSAFE

from airflow_provider_kafka_zk.hooks._kazoo_protocol import server_path, submit_transaction

from .simulator.zk_writer import ZnodeRecord, ensure_chroot


class BulkLoadError(RuntimeError):
    """A bulk transaction failed (the message names its first znode and the error)."""


def _start(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    return client


def commit_pipelined(client: KazooClient, batches: Iterable[Sequence[Any]], window: int = 8) -> int:
    """Commit raw kazoo op lists as transactions, ``window`` in flight; returns the ops applied."""
    in_flight: deque[tuple[Sequence[Any], Any]] = deque()
    applied = 0

    def settle() -> None:
        nonlocal applied
        ops, result = in_flight.popleft()
        results = result.get(timeout=120)
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise BulkLoadError(f"transaction starting at {ops[0].path} failed: {failed[0]!r}")
        applied += len(ops)

    for ops in batches:
        in_flight.append((ops, submit_transaction(client, ops)))
        if len(in_flight) >= window:
            settle()
    while in_flight:
        settle()
    return applied


class BulkLoadedTree:
    """``records`` created under ``chroot`` of the ZooKeeper at ``hosts`` with transactions.

    Persistent znodes are created parents first and then re-written ``version`` times (so Stat
    versions match the simulator's); ephemeral ones are created by one session per owner broker,
    kept open until :meth:`close`.
    """

    def __init__(
        self, hosts: str, chroot: str, records: Iterable[ZnodeRecord], *, ops_per_txn: int = 1000
    ) -> None:
        ensure_chroot(hosts, chroot)
        self.hosts_with_chroot = hosts + (chroot if chroot != "/" else "")
        self.admin = _start(self.hosts_with_chroot)
        self.sessions: dict[int, KazooClient] = {}
        records = list(records)
        persistent = sorted(
            (r for r in records if r.owner_broker is None and r.path not in ("/", "/zookeeper")),
            key=lambda r: r.path,  # a parent sorts before its children
        )
        admin = self.admin
        creates = [Create(server_path(admin, r.path), r.data, OPEN_ACL_UNSAFE, 0) for r in persistent]
        self.created = commit_pipelined(admin, _chunks(creates, ops_per_txn))
        rewrites = [
            SetData(server_path(admin, r.path), r.data or b"", version)  # as ZooKeeperTreeWriter
            for r in persistent
            for version in range(r.version)
        ]
        self.rewritten = commit_pipelined(admin, _chunks(rewrites, ops_per_txn))
        for record in sorted(
            (r for r in records if r.owner_broker is not None),
            key=lambda r: (r.path == "/controller", r.path),
        ):
            owner = record.owner_broker
            assert owner is not None
            session = self.sessions.get(owner)
            if session is None:
                session = self.sessions[owner] = _start(self.hosts_with_chroot)
            session.create(record.path, record.data, ephemeral=True)
            for _ in range(record.version):
                session.set(record.path, record.data or b"")

    def close(self) -> None:
        for session in self.sessions.values():
            session.stop()
            session.close()
        self.sessions.clear()
        self.admin.stop()
        self.admin.close()

    def __enter__(self) -> BulkLoadedTree:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
