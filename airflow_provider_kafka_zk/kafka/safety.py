"""The decisions of the mutation safety layer, pure: flags, cluster identity, the maintenance lease.

Every mutating path (drain, throttles, deletion cleanup, snapshot loads, later repairs) asks these
functions before it touches anything; :mod:`airflow_provider_kafka_zk.maintenance` does the I/O.
Nothing here imports Airflow or talks to a server.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------------------------------------
# Strict flags
# ---------------------------------------------------------------------------------------------


class UnsafeFlagError(ValueError):
    """A safety switch (``dry_run``, ``cleanup``, ...) got a value that is not clearly true or false."""

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = value
        hint = ""
        if isinstance(value, str) and "{{" in value:
            hint = " (an unrendered template: is the field in template_fields, is the DAG param defined?)"
        super().__init__(
            f"{name} must be a boolean or the text 'true'/'false', not {value!r}{hint}: "
            "refusing to run rather than guess (nothing was read or written)"
        )


def strict_flag(value: Any, name: str) -> bool:
    """``value`` as a bool when it is one, or the text true/false (any case, outer spaces ignored).

    Anything else -- ``None``, ``''``, ``0``/``1``, ``'yes'``, ``'dry'``, an unrendered
    ``'{{ params.dry_run }}'`` -- raises :class:`UnsafeFlagError`: a mutation must never start
    because a typo happened to be falsy.

    :param value: the flag as given (operator argument or rendered template).
    :param name: the flag's name, for the error message.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    raise UnsafeFlagError(name, value)


# ---------------------------------------------------------------------------------------------
# Sensitive znodes and ACLs (kafka.zk.ZkData, 3.x: SensitiveRootPaths / defaultAcls)
# ---------------------------------------------------------------------------------------------

#: Kafka creates these (and everything under them) creator-only when ``zookeeper.set.acl=true``.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")

#: Data a snapshot never stores in clear unless asked: SCRAM credentials and delegation tokens.
REDACTED_PREFIXES = ("/config/users/", "/delegation_token/")


def is_sensitive_path(path: str) -> bool:
    """Kafka's ``ZkData.sensitivePath``: a plain prefix test on the chroot-relative path."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


#: What a redacted znode's data starts with in a snapshot (followed by the hex sha256).
REDACTED_DATA_PREFIX = b"redacted:sha256:"


def is_redacted_path(path: str) -> bool:
    """Whether a snapshot replaces this znode's data by a digest (credentials, tokens)."""
    return any(path.startswith(prefix) for prefix in REDACTED_PREFIXES)


def is_redaction_digest(path: str, data: bytes | None) -> bool:
    """Whether ``data`` at ``path`` is a snapshot's digest, not the znode's real data."""
    return isinstance(data, bytes) and data.startswith(REDACTED_DATA_PREFIX) and is_redacted_path(path)


@dataclass(frozen=True)
class AclEntry:
    """One ZooKeeper ACL entry: ``perms`` bit mask, ``scheme`` and ``id`` (``world``/``anyone``...)."""

    perms: int
    scheme: str
    id: str


PERM_READ = 1
PERM_ALL = 31
WORLD_ALL = AclEntry(PERM_ALL, "world", "anyone")


def acl_for_new_znode(path: str, reference: Sequence[AclEntry], *, authenticated: bool) -> list[AclEntry]:
    """The ACL a znode this product creates gets: the one Kafka gave its Kafka-created neighbour.

    ``reference`` is the ACL read from the parent (Kafka created every parent we write under with
    the same rule it applies to the children). A world-open reference means the cluster does not
    use ``zookeeper.set.acl``: the new znode is world-open too. Otherwise the reference's entries are
    copied (so Kafka's own principal keeps full control of what we create), world READ is dropped
    on sensitive paths as Kafka does, and with credentials the creator (our session's ids) gets ALL
    so this product can undo its own write.

    :param path: chroot-relative path of the znode to create.
    :param reference: the parent's ACL.
    :param authenticated: whether our session has credentials (``auth`` ids exist).
    """
    if not reference or any(e == WORLD_ALL for e in reference):
        return [WORLD_ALL]
    sensitive = is_sensitive_path(path)
    acl = [e for e in reference if not (sensitive and e.scheme == "world")]
    if authenticated:
        acl.append(AclEntry(PERM_ALL, "auth", ""))
    if not acl:
        raise ValueError(f"no usable ACL for {path} from its parent's {list(reference)}")
    return acl


# ---------------------------------------------------------------------------------------------
# Cluster identity
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterIdentity:
    """Which cluster a run acts on: ZooKeeper's ``/cluster/id``, the ensemble and the chroot.

    Brokers the run touches on disk add ``brokers``: broker id -> (host, the ``cluster.id`` every
    meta.properties of that host reported).
    """

    cluster_id: str
    hosts: tuple[str, ...]
    chroot: str
    brokers: Mapping[int, tuple[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "zookeeper_hosts": list(self.hosts),
            "chroot": self.chroot or "/",
            "brokers": {str(b): {"host": h, "cluster_id": c} for b, (h, c) in sorted(self.brokers.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> ClusterIdentity:
        try:
            chroot = str(data["chroot"])
            return cls(
                cluster_id=str(data["cluster_id"]),
                hosts=tuple(str(h) for h in data["zookeeper_hosts"]),
                chroot="" if chroot == "/" else chroot,
                brokers={
                    int(b): (str(v["host"]), str(v["cluster_id"]))
                    for b, v in (data.get("brokers") or {}).items()
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"{where}: not a cluster identity record ({type(exc).__name__}: {exc})"
            ) from None

    def with_broker(self, broker_id: int, host: str, cluster_id: str) -> ClusterIdentity:
        brokers = dict(self.brokers)
        brokers[broker_id] = (host, cluster_id)
        return ClusterIdentity(self.cluster_id, self.hosts, self.chroot, brokers)


def identity_differences(pinned: ClusterIdentity, observed: ClusterIdentity) -> list[str]:
    """What differs between the identity a run pinned (plan, first try) and what it sees now.

    The cluster id and the chroot must be equal; the ensemble may be listed differently (a host
    replaced) as long as the cluster id holds, so hosts are not compared. Brokers pinned on both
    sides must agree.
    """
    problems = []
    if pinned.cluster_id != observed.cluster_id:
        problems.append(
            f"ZooKeeper /cluster/id is {observed.cluster_id!r} now, the run pinned {pinned.cluster_id!r}"
        )
    if (pinned.chroot or "/") != (observed.chroot or "/"):
        problems.append(f"chroot is {observed.chroot or '/'!r} now, the run pinned {pinned.chroot or '/'!r}")
    for broker, (host, cluster_id) in sorted(observed.brokers.items()):
        if broker in pinned.brokers and pinned.brokers[broker] != (host, cluster_id):
            was_host, was_id = pinned.brokers[broker]
            problems.append(
                f"broker {broker}: now {host} with cluster.id {cluster_id!r}, pinned {was_host} with {was_id!r}"
            )
    return problems


def broker_identity_problems(
    broker_id: int,
    host: str,
    zookeeper_cluster_id: str,
    meta: Iterable[tuple[str, int | None, str | None]],
    effective_broker_id: int | None,
) -> list[str]:
    """Why broker ``broker_id``'s host cannot be trusted to be that broker of that cluster.

    ``meta`` is (log dir, broker.id, cluster.id) of every meta.properties read on the host (None
    where absent). Any absence counts: a log dir without meta.properties is doubt, not agreement.

    :param broker_id: the broker the run means to touch.
    :param host: where it was reached.
    :param zookeeper_cluster_id: ``/cluster/id`` pinned from ZooKeeper.
    :param meta: meta.properties facts per log dir.
    :param effective_broker_id: broker.id from server.properties (or the one meta.properties agree on).
    """
    problems = []
    entries = list(meta)
    if effective_broker_id != broker_id:
        problems.append(f"host {host} runs broker {effective_broker_id}, not broker {broker_id}")
    if not entries:
        problems.append(f"broker {broker_id} on {host}: no log dir with a meta.properties was read")
    for log_dir, meta_broker, meta_cluster in entries:
        if meta_broker is None or meta_cluster is None:
            problems.append(
                f"broker {broker_id} on {host}: {posixpath.join(log_dir, 'meta.properties')} "
                "missing or without broker.id/cluster.id"
            )
            continue
        if meta_broker != broker_id:
            problems.append(
                f"broker {broker_id} on {host}: {log_dir}/meta.properties says broker.id={meta_broker}"
            )
        if meta_cluster != zookeeper_cluster_id:
            problems.append(
                f"broker {broker_id} on {host}: {log_dir}/meta.properties says cluster.id={meta_cluster!r}, "
                f"ZooKeeper /cluster/id is {zookeeper_cluster_id!r}"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# The maintenance lease: one writer per cluster
# ---------------------------------------------------------------------------------------------

#: Under the Kafka chroot. Kafka ignores znodes it does not know; its migration copies known paths only.
LEASE_ROOT = "/kafka_zk_maintenance"
LEASE_PATH = f"{LEASE_ROOT}/lease"


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a cluster's maintenance lease, and until when it counts without renewal."""

    dag_id: str
    run_id: str
    task_id: str
    host: str
    since_ms: int
    expires_ms: int
    cluster_id: str

    def same_run(self, other: LeaseHolder) -> bool:
        return (self.dag_id, self.run_id) == (other.dag_id, other.run_id)

    def describe(self) -> str:
        return (
            f"DAG {self.dag_id!r} run {self.run_id!r} (task {self.task_id!r} on {self.host}, "
            f"since {_iso(self.since_ms)}, lease until {_iso(self.expires_ms)})"
        )

    def encode(self) -> bytes:
        return json.dumps(
            {
                "format": "kafka-zk-maintenance-lease",
                "version": 1,
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "task_id": self.task_id,
                "host": self.host,
                "since_ms": self.since_ms,
                "expires_ms": self.expires_ms,
                "cluster_id": self.cluster_id,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> LeaseHolder | None:
        """The holder, or None when the znode does not hold one of our records (then: doubt)."""
        try:
            raw = json.loads(data or b"")
            return cls(
                dag_id=str(raw["dag_id"]),
                run_id=str(raw["run_id"]),
                task_id=str(raw["task_id"]),
                host=str(raw["host"]),
                since_ms=int(raw["since_ms"]),
                expires_ms=int(raw["expires_ms"]),
                cluster_id=str(raw["cluster_id"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def lease_decision(current: LeaseHolder | None, exists: bool, me: LeaseHolder, now_ms: int) -> str:
    """What to do with the lease znode: ``create``, ``renew`` (ours), ``take_over`` (expired) or ``refuse``.

    An unreadable record is never taken over: a person must look at it.
    """
    if not exists:
        return "create"
    if current is None:
        return "refuse"
    if current.same_run(me):
        return "renew"
    if current.expires_ms < now_ms:
        return "take_over"
    return "refuse"


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
