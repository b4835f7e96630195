"""Puts a simulated cluster's ZooKeeper tree into a real ZooKeeper server, and keeps it in step.

The first ``apply`` creates every persistent znode in bulk (pipelined async requests, parents
before children) and then re-writes each one ``version`` times, so its Stat.version is what
Kafka's history would have left (a state znode's partition epoch, /controller_epoch's fencing
version). Later calls apply only the difference (create / set / delete, deepest first).

Ephemeral znodes (broker registrations, /controller) are owned by one real ZooKeeper session per
live broker, as on a real cluster: a stopped broker's session is closed and ZooKeeper itself
removes its registration.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.serialization import Create, SetData
from kazoo.security import OPEN_ACL_UNSAFE

from airflow_provider_kafka_zk.hooks._kazoo_protocol import server_path, submit_transaction

log = logging.getLogger(__name__)

TXN_MIN = 64
"""Fewer writes than this go one by one (pipelined); more go as transactions."""
TXN_OPS = 1000
TXN_BYTES = 512 << 10
"""At most this many znodes / bytes of paths and data per transaction (a request must stay below
ZooKeeper's ``jute.maxbuffer``, 1 MiB by default)."""
TXN_WINDOW = 8


@dataclass(frozen=True)
class ZnodeRecord:
    """One znode as the simulated cluster has it.

    ``data`` None is a znode created with null data (Kafka's container znodes), distinct from b"".
    ``owner_broker`` is the broker whose session owns an ephemeral znode (None: persistent).
    ``version`` is how many times Kafka would have re-written the znode since creating it.
    """

    path: str
    data: bytes | None
    owner_broker: int | None = None
    version: int = 0


def _depth(path: str) -> int:
    return path.count("/")


def _start(hosts: str, timeout: float) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    return client


def ensure_chroot(hosts: str, chroot: str, timeout: float = 10.0) -> None:
    """Create the chroot path itself (a chrooted session cannot create its own root)."""
    if not chroot or chroot == "/":
        return
    client = _start(hosts, timeout)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()


class ZooKeeperTreeWriter:
    """Writes ZnodeRecords under ``chroot`` of the ZooKeeper at ``hosts``; owns the broker sessions."""

    def __init__(self, hosts: str, chroot: str, *, session_timeout: float = 10.0, window: int = 2000) -> None:
        ensure_chroot(hosts, chroot)
        self.hosts_with_chroot = hosts + (chroot if chroot != "/" else "")
        self.session_timeout = session_timeout
        self.window = window
        self.admin = _start(self.hosts_with_chroot, session_timeout)
        self._persistent: dict[str, bytes | None] = {}
        self._ephemeral: dict[str, tuple[int, bytes | None]] = {}
        self._sessions: dict[int, KazooClient] = {}

    # ------------------------------------------------------------------ public
    def apply(self, records: Iterable[ZnodeRecord]) -> dict[str, int]:
        """Make ZooKeeper hold exactly ``records`` (below the chroot). Returns counts of what was done."""
        persistent = {
            r.path: r for r in records if r.owner_broker is None and r.path not in ("/", "/zookeeper")
        }
        ephemeral = {r.path: r for r in records if r.owner_broker is not None}
        self._switch_kinds(persistent, ephemeral)
        first_write = not self._persistent
        created = self._create_missing([r for p, r in persistent.items() if p not in self._persistent])
        if first_write:
            changed = [r for r in persistent.values() if r.version > 0]
            rewrites = self._replay_versions(changed)
        else:
            changed = [
                r for p, r in persistent.items() if p in self._persistent and self._persistent[p] != r.data
            ]
            rewrites = self._pipelined(changed, lambda r: self.admin.set_async(r.path, r.data or b""))
        self._sync_ephemerals(ephemeral)
        gone = sorted((p for p in self._persistent if p not in persistent), key=_depth, reverse=True)
        self._pipelined(gone, lambda p: self.admin.delete_async(p), tolerate=NoNodeError)
        self._persistent = {p: r.data for p, r in persistent.items()}
        return {"created": created, "rewritten": rewrites, "deleted": len(gone), "ephemeral": len(ephemeral)}

    def note_external_write(self, path: str, data: bytes | None) -> None:
        """Someone else wrote ``path`` and the model adopted it: do not write it again."""
        if path in self._persistent:
            self._persistent[path] = data

    def forget_ephemeral(self, path: str) -> None:
        """Someone else deleted the ephemeral ``path`` (e.g. ``/controller``): create it anew when wanted."""
        self._ephemeral.pop(path, None)

    def session_id(self, broker_id: int) -> int | None:
        client = self._sessions.get(broker_id)
        return None if client is None else client.client_id[0]

    def close(self) -> None:
        """Close every broker session (their ephemerals vanish) and the admin session."""
        for broker_id in list(self._sessions):
            self._stop_session(broker_id)
        self.admin.stop()
        self.admin.close()

    def __enter__(self) -> ZooKeeperTreeWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _switch_kinds(self, persistent: dict[str, ZnodeRecord], ephemeral: dict[str, ZnodeRecord]) -> None:
        """A znode that changes kind is deleted first, as Kafka does it: a migrating KRaft controller
        deletes the ZooKeeper controller's ephemeral ``/controller`` and creates a persistent one in
        one multi (``tryRegisterKRaftControllerAsActiveController``, 3.9.0-rc3); the documented
        rollback deletes the persistent one so a broker creates an ephemeral one again."""
        for path in [p for p in persistent if p in self._ephemeral]:
            owner, _ = self._ephemeral.pop(path)
            if owner in self._sessions:
                with contextlib.suppress(NoNodeError):
                    self._sessions[owner].delete(path)
        for path in [p for p in ephemeral if p in self._persistent]:
            with contextlib.suppress(NoNodeError):
                self.admin.delete(path)
            del self._persistent[path]

    # ------------------------------------------------------------------ persistent
    def _create_missing(self, records: list[ZnodeRecord]) -> int:
        by_depth: dict[int, list[ZnodeRecord]] = {}
        for record in records:
            by_depth.setdefault(_depth(record.path), []).append(record)
        for depth in sorted(by_depth):
            self._in_transactions(
                by_depth[depth],
                lambda r: Create(server_path(self.admin, r.path), r.data, OPEN_ACL_UNSAFE, 0),
                lambda batch: self._pipelined(
                    batch,
                    lambda r: self.admin.create_async(r.path, r.data),
                    tolerate=NodeExistsError,
                    on_tolerated=lambda r: self.admin.set(r.path, r.data or b""),
                ),
            )
        return len(records)

    def _replay_versions(self, records: list[ZnodeRecord]) -> int:
        done = 0
        for round_number in range(max((r.version for r in records), default=0)):
            batch = [r for r in records if r.version > round_number]
            self._in_transactions(
                batch,
                lambda record: SetData(server_path(self.admin, record.path), record.data or b"", -1),
                lambda rest: self._pipelined(rest, lambda z: self.admin.set_async(z.path, z.data or b"")),
            )
            done += len(batch)
        return done

    def _in_transactions(
        self, records: list[ZnodeRecord], op: Callable[[ZnodeRecord], Any], one_by_one: Callable[[list], Any]
    ) -> None:
        """Many writes of one kind as multi-op transactions (one request and one log write for up to
        ``TXN_OPS`` znodes, ``TXN_BYTES`` of data: a fleet-sized tree in seconds, not minutes), a few
        in flight at once. A transaction that fails changed nothing (ZooKeeper's multi is atomic):
        its znodes are written ``one_by_one`` instead, which handles what exists already."""
        if len(records) < TXN_MIN:
            one_by_one(records)
            return
        batches: list[list[ZnodeRecord]] = [[]]
        size = 0
        for record in records:
            length = len(record.path) + len(record.data or b"")
            if batches[-1] and (len(batches[-1]) >= TXN_OPS or size + length > TXN_BYTES):
                batches.append([])
                size = 0
            batches[-1].append(record)
            size += length
        in_flight: list[tuple[list[ZnodeRecord], Any]] = []
        failed: list[ZnodeRecord] = []
        for number, batch in enumerate(batches):
            in_flight.append((batch, submit_transaction(self.admin, [op(r) for r in batch])))
            if len(in_flight) >= TXN_WINDOW or number == len(batches) - 1:
                for sent, result in in_flight:
                    outcome = result.get(timeout=120)
                    if any(isinstance(r, Exception) for r in outcome):
                        failed += sent
                in_flight = []
        if failed:
            one_by_one(failed)

    def _pipelined(
        self,
        items: Sequence,
        send: Callable,
        *,
        tolerate: type[Exception] | None = None,
        on_tolerated: Callable | None = None,
    ) -> int:
        for start in range(0, len(items), self.window):
            pending = [(item, send(item)) for item in items[start : start + self.window]]
            for item, result in pending:
                try:
                    result.get(timeout=60)
                except Exception as exc:
                    if tolerate is None or not isinstance(exc, tolerate):
                        raise
                    if on_tolerated is not None:
                        on_tolerated(item)
        return len(items)

    # ------------------------------------------------------------------ ephemeral
    def _sync_ephemerals(self, wanted: dict[str, ZnodeRecord]) -> None:
        owners = {r.owner_broker for r in wanted.values()}
        for broker_id in [b for b in self._sessions if b not in owners]:
            self._stop_session(broker_id)
        for path, (owner, data) in list(self._ephemeral.items()):
            record = wanted.get(path)
            if record is None or record.owner_broker != owner:
                if owner in self._sessions:
                    with contextlib.suppress(NoNodeError):  # deleted from outside already
                        self._sessions[owner].delete(path)
                del self._ephemeral[path]
            elif record.data != data:
                self._sessions[owner].set(path, record.data or b"")
                self._ephemeral[path] = (owner, record.data)
        # Registrations before /controller, like a broker that registers and then wins the election.
        for record in sorted(wanted.values(), key=lambda r: (r.path == "/controller", r.path)):
            if record.path in self._ephemeral:
                continue
            owner = record.owner_broker
            assert owner is not None
            client = self._sessions.get(owner)
            if client is None:
                client = self._sessions[owner] = _start(self.hosts_with_chroot, self.session_timeout)
            client.create(record.path, record.data, ephemeral=True)
            for _ in range(record.version):
                client.set(record.path, record.data or b"")
            self._ephemeral[record.path] = (owner, record.data)

    def _stop_session(self, broker_id: int) -> None:
        client = self._sessions.pop(broker_id)
        client.stop()
        client.close()
        self._ephemeral = {p: v for p, v in self._ephemeral.items() if v[0] != broker_id}
