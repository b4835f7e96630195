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

from airflow_provider_kafka_zk.kafka.errors import ZnodeFormatError
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.kafka.znodes import ControllerRegistration, MigrationZNode

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
    *,
    legacy: LegacyBrokerEvidence | None = None,
    zookeeper_hosts: Sequence[str] = (),
    chroot: str = "",
) -> list[str]:
    """Why broker ``broker_id``'s host cannot be trusted to be that broker of that cluster.

    ``meta`` is (log dir, broker.id, cluster.id) of every meta.properties read on the host (None
    where absent). Any absence counts: a log dir without meta.properties is doubt, not agreement.
    When *every* file has a broker.id but none a cluster.id (Kafka < 2.4, see
    :data:`CLUSTER_ID_IN_META_SINCE`), :func:`legacy_broker_problems` decides from ``legacy``;
    some files with cluster.id and some without is doubt (a 2.4+ broker writes it to every dir).

    :param broker_id: the broker the run means to touch.
    :param host: where it was reached.
    :param zookeeper_cluster_id: ``/cluster/id`` pinned from ZooKeeper.
    :param meta: meta.properties facts per log dir.
    :param effective_broker_id: broker.id from server.properties (or the one meta.properties agree on).
    :param legacy: the other proof of the host, for files without cluster.id.
    :param zookeeper_hosts: the connection's ZooKeeper hosts (checked against server.properties).
    :param chroot: the connection's chroot.
    """
    problems = []
    entries = list(meta)
    if entries and all(b is not None and c is None for _, b, c in entries):
        if effective_broker_id != broker_id:
            problems.append(f"host {host} runs broker {effective_broker_id}, not broker {broker_id}")
        problems.extend(
            f"broker {broker_id} on {host}: {d}/meta.properties says broker.id={b}"
            for d, b, _ in entries
            if b != broker_id
        )
        return problems + legacy_broker_problems(
            broker_id, host, [b for _, b, _ in entries if b is not None], legacy, zookeeper_hosts, chroot
        )
    if effective_broker_id != broker_id:
        problems.append(f"host {host} runs broker {effective_broker_id}, not broker {broker_id}")
    if not entries:
        problems.append(f"broker {broker_id} on {host}: no log dir with a meta.properties was read")
    for log_dir, meta_broker, meta_cluster in entries:
        if meta_broker is not None and meta_cluster is None:
            problems.append(
                f"broker {broker_id} on {host}: {posixpath.join(log_dir, 'meta.properties')} has no cluster.id "
                "while other log dirs' have one (a 2.4+ broker writes it into every online log dir at "
                "start): a stale or copied log dir"
            )
            continue
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
# Brokers before 2.4: meta.properties without cluster.id
# ---------------------------------------------------------------------------------------------

#: The release that started writing ``cluster.id`` into meta.properties. Up to 2.3 a version-0 file
#: holds ``version`` and ``broker.id`` only (``BrokerMetadata(brokerId: Int)`` and
#: ``BrokerMetadataCheckpoint.write`` in core/src/main/scala/kafka/server/BrokerMetadataCheckpoint.scala,
#: 0.11.0.0 and 2.3.0); 2.4.0 adds ``clusterId: Option[String]`` there, and ``KafkaServer.startup``
#: (core/src/main/scala/kafka/server/KafkaServer.scala, 2.4.0) rewrites every online log dir's file
#: with ZooKeeper's ``/cluster/id`` at each start. So a 2.4+ broker that ever started has cluster.id
#: in each file, and a file without it is either a pre-2.4 broker's or not a real broker's.
CLUSTER_ID_IN_META_SINCE = (2, 4)

#: ZooKeeper's default client port (``ConnectStringParser``: a host without a port means 2181).
ZOOKEEPER_DEFAULT_PORT = 2181

#: Kafka's default ``reserved.broker.max.id``: generated broker ids are ``/brokers/seqid`` + this
#: (``KafkaServer.generateBrokerId``, ``KafkaConfig.MaxReservedBrokerId``, 2.3.0).
DEFAULT_RESERVED_BROKER_MAX_ID = 1000


@dataclass(frozen=True)
class LegacyBrokerEvidence:
    """What pins a broker host whose meta.properties carry no ``cluster.id`` (Kafka before 2.4).

    The hooks gather it: the configured server.properties read on the host in the inventory's SSH
    round trip (never through a symlink), the names of the host that SSH reached, and, from
    ZooKeeper, the broker's registration and what proves a release >= 2.4/2.7.

    :param server_properties_path: the configured path (``server_properties_path``), None when not set.
    :param server_properties: the file's keys that matter here, None when it could not be used.
    :param server_properties_problem: why not (absent, unreadable, a symlink), when None above.
    :param reached_hosts: the host as the SSH connection named it, its peer address, its own hostname.
    :param registered_hosts: the hosts of ``/brokers/ids/<id>`` (host + endpoints); None: not registered.
    :param registration_versions: the ``version`` of every registration in ``/brokers/ids``.
    :param feature_znode: whether ``/feature`` exists (2.7+ controllers create it).
    :param kafka_version: the release of the broker process started with that server.properties
        (its ``kafka_<scala>-<release>.jar``), when one runs.
    """

    server_properties_path: str | None
    server_properties: Mapping[str, str] | None
    server_properties_problem: str | None
    reached_hosts: tuple[str, ...]
    registered_hosts: tuple[str, ...] | None
    registration_versions: tuple[int, ...] = ()
    feature_znode: bool = False
    kafka_version: str | None = None


def parse_zookeeper_connect(text: str) -> tuple[frozenset[tuple[str, int]], str]:
    """``zookeeper.connect`` as ZooKeeper reads it: (host, port) set and the chroot ('' for none).

    The chroot starts at the first ``/`` (``KafkaServer.initZkClient``, 2.3.0, and ZooKeeper's
    ``ConnectStringParser``); hosts are compared in lower case, a missing port is 2181.

    :raises ValueError: no host, or a port that is not a number.
    """
    text = text.strip()
    hosts_part, slash, chroot = text.partition("/")
    chroot = (slash + chroot).rstrip("/") if slash else ""
    hosts: set[tuple[str, int]] = set()
    for item in hosts_part.split(","):
        item = item.strip()
        if not item:
            continue
        host, colon, port = item.rpartition(":") if ":" in item else (item, "", "")
        host = host.strip("[]").lower()
        if not host:
            raise ValueError(f"no host in {item!r}")
        try:
            hosts.add((host, int(port) if colon else ZOOKEEPER_DEFAULT_PORT))
        except ValueError:
            raise ValueError(f"port of {item!r} is not a number") from None
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {text!r}")
    return frozenset(hosts), chroot


def _release_problems(evidence: LegacyBrokerEvidence, where: str) -> list[str]:
    """Why the cluster may not be pre-2.4; empty when the evidence says it is."""
    newer = [v for v in evidence.registration_versions if v >= 5]
    if newer:
        # v5 registrations are written at IBP >= 2.7-IV0 (BrokerInfo.apply, ZkData.scala, 2.7.0)
        return [f"{where}: registrations in /brokers/ids have version 5 (Kafka >= 2.7), yet no cluster.id"]
    if evidence.feature_znode:
        return [f"{where}: /feature exists (created by Kafka >= 2.7 controllers), yet no cluster.id"]
    if evidence.kafka_version:
        try:
            release = KafkaVersion.parse(evidence.kafka_version)
        except ValueError:
            return [f"{where}: the broker's release {evidence.kafka_version!r} is not a Kafka version"]
        if (release.major, release.minor) >= CLUSTER_ID_IN_META_SINCE:
            return [f"{where}: the broker runs Kafka {release}, which writes cluster.id, yet there is none"]
        return []
    ibp = (evidence.server_properties or {}).get("inter.broker.protocol.version")
    if ibp is None:
        return [
            f"{where}: cannot tell the cluster's Kafka release (no running broker to read it from and no "
            f"inter.broker.protocol.version in {evidence.server_properties_path}): a pin without cluster.id "
            "is only accepted for Kafka < 2.4"
        ]
    try:
        version = KafkaVersion.parse(ibp)
    except ValueError:
        return [
            f"{where}: inter.broker.protocol.version={ibp!r} in {evidence.server_properties_path} is not a version"
        ]
    # The release is at least the IBP. An IBP < 2.4 under a 2.4+ release (mid-upgrade) is no hole:
    # that broker rewrote its meta.properties with cluster.id when it started (KafkaServer, 2.4.0).
    if (version.major, version.minor) >= CLUSTER_ID_IN_META_SINCE:
        return [
            f"{where}: inter.broker.protocol.version={ibp} in {evidence.server_properties_path} means "
            "Kafka >= 2.4, which writes cluster.id: a file without it is not this broker's"
        ]
    return []


def legacy_broker_problems(
    broker_id: int,
    host: str,
    meta_broker_ids: Sequence[int],
    evidence: LegacyBrokerEvidence | None,
    zookeeper_hosts: Sequence[str],
    chroot: str,
) -> list[str]:
    """Why a host whose meta.properties have no ``cluster.id`` cannot be pinned as broker ``broker_id``.

    Accepted only for a cluster older than 2.4 (see :data:`CLUSTER_ID_IN_META_SINCE`) when all of:
    the configured server.properties (read without following a symlink) has a ``zookeeper.connect``
    with the connection's chroot and at least one of its ZooKeeper hosts, and ``broker.id`` equal
    to ``broker_id`` (or unset with broker id generation on and a generated meta.properties id);
    the registration ``/brokers/ids/<broker_id>`` names the host SSH reached. meta.properties'
    ``broker.id`` was checked by the caller. Weaker than a ``cluster.id`` (two clusters may share
    ZooKeeper hosts and chroot only by misconfiguration), so every piece must be present.

    :param meta_broker_ids: broker.id of every meta.properties on the host.
    :param evidence: what the hooks read; None: nothing was (a caller that does not pass it).
    :param zookeeper_hosts: the connection's ZooKeeper hosts (``host[:port]``).
    :param chroot: the connection's chroot ('' or '/' for none).
    """
    where = f"broker {broker_id} on {host}"
    if evidence is None:
        return [
            f"{where}: meta.properties has no cluster.id (Kafka < 2.4 writes version 0 with broker.id only) "
            "and this step gathered no other proof of the host's identity: refusing"
        ]
    problems = _release_problems(evidence, where)
    path = evidence.server_properties_path
    if path is None:
        problems.append(
            f"{where}: meta.properties has no cluster.id (Kafka < 2.4), and without it the host is pinned "
            "by its server.properties: set server_properties_path (the broker's real file, not a symlink)"
        )
    elif evidence.server_properties is None:
        problems.append(f"{where}: {path}: {evidence.server_properties_problem or 'not readable'}")
    else:
        props = evidence.server_properties
        problems.extend(_zookeeper_connect_problems(where, path, props, zookeeper_hosts, chroot))
        problems.extend(_server_broker_id_problems(broker_id, where, path, props, meta_broker_ids))
    if evidence.registered_hosts is None:
        problems.append(
            f"{where}: /brokers/ids/{broker_id} is not registered, so ZooKeeper cannot confirm the host "
            "(without cluster.id in meta.properties the broker must be running when it is pinned)"
        )
    else:
        reached = {h.lower() for h in evidence.reached_hosts if h}
        registered = {h.lower() for h in evidence.registered_hosts if h}
        if not reached & registered:
            problems.append(
                f"{where}: /brokers/ids/{broker_id} names {sorted(registered)}, but SSH reached "
                f"{sorted(reached)}: another host answered (fix broker_hosts or the DNS)"
            )
    return problems


def _zookeeper_connect_problems(
    where: str, path: str, props: Mapping[str, str], zookeeper_hosts: Sequence[str], chroot: str
) -> list[str]:
    text = props.get("zookeeper.connect")
    if text is None:
        return [f"{where}: {path} has no zookeeper.connect"]
    try:
        theirs, their_chroot = parse_zookeeper_connect(text)
        ours, _ = parse_zookeeper_connect(",".join(zookeeper_hosts))
    except ValueError as exc:
        return [f"{where}: {path}: zookeeper.connect={text!r} unreadable ({exc})"]
    problems = []
    our_chroot = (chroot or "").rstrip("/")
    if their_chroot != our_chroot:
        problems.append(
            f"{where}: {path} has zookeeper.connect chroot {their_chroot or '/'!r}, the connection's is "
            f"{our_chroot or '/'!r}: the host belongs to another cluster (or the connection's chroot is wrong)"
        )
    if not theirs & ours:
        problems.append(
            f"{where}: {path} has zookeeper.connect hosts {sorted(f'{h}:{p}' for h, p in theirs)}, none of "
            f"the connection's {sorted(f'{h}:{p}' for h, p in ours)}: another ensemble's broker "
            "(or name the same ZooKeeper hosts in both)"
        )
    return problems


def _server_broker_id_problems(
    broker_id: int, where: str, path: str, props: Mapping[str, str], meta_broker_ids: Sequence[int]
) -> list[str]:
    text = props.get("broker.id")
    configured: int | None = None
    if text is not None:
        try:
            configured = int(text.strip())
        except ValueError:
            return [f"{where}: {path} has broker.id={text!r}, not a number"]
    if configured is not None and configured >= 0:
        if configured != broker_id:
            return [f"{where}: {path} has broker.id={configured}, not {broker_id}"]
        return []
    # unset or -1: the id is generated from /brokers/seqid + reserved.broker.max.id (2.3.0
    # KafkaServer.getBrokerIdAndOfflineDirs, generateBrokerId) and then kept in meta.properties
    generation = props.get("broker.id.generation.enable", "true").strip().lower()
    if generation != "true":
        return [
            f"{where}: {path} sets no broker.id and broker.id.generation.enable={generation}: "
            "Kafka would not start this broker"
        ]
    try:
        reserved = int(props.get("reserved.broker.max.id", str(DEFAULT_RESERVED_BROKER_MAX_ID)).strip())
    except ValueError:
        return [f"{where}: {path} has an unreadable reserved.broker.max.id"]
    if broker_id <= reserved or any(b != broker_id for b in meta_broker_ids):
        return [
            f"{where}: {path} sets no broker.id (generated), but {broker_id} is not a generated id "
            f"(> reserved.broker.max.id {reserved}) kept in every meta.properties"
        ]
    return []


# ---------------------------------------------------------------------------------------------
# The maintenance lease: one writer per cluster
# ---------------------------------------------------------------------------------------------

#: Under the Kafka chroot. Kafka ignores znodes it does not know; its migration copies known paths only.
LEASE_ROOT = "/kafka_zk_maintenance"
LEASE_PATH = f"{LEASE_ROOT}/lease"
#: Written by kafka_zk_kraft_migration once its finalization took effect (POST_MIGRATION): from then on
#: Kafka neither reads nor writes this ZooKeeper -- ZooKeeper alone cannot tell that from a dual-write
#: (the KRaft controller's persistent /controller and /migration stay as its last write left them).
KRAFT_FINALIZED_PATH = f"{LEASE_ROOT}/kraft_finalized"


def finalization_record_fields(record: bytes | None) -> dict[str, Any]:
    """``KRAFT_FINALIZED_PATH``'s JSON fields (``recorded_at``, ``run``, ``controllers`` ...); ``{}`` for
    a record without data or one that is no JSON object (its presence alone still says finalized)."""
    try:
        fields = json.loads(record or b"{}")
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def cluster_left_zookeeper(record: bytes | None) -> str:
    """Why nothing of this provider writes the ZooKeeper of a finalized cluster (``KRAFT_FINALIZED_PATH``'s
    record): after "Finalizing the migration" (docs/ops.html 3.9) the controllers run without
    ``zookeeper.metadata.migration.enable`` and the metadata lives in the KRaft quorum only; ZooKeeper is a
    copy frozen at the last dual write that no Kafka process reads, and there is no way back."""
    fields = finalization_record_fields(record)
    when = (
        f" (recorded {fields['recorded_at']} by run {fields.get('run')})" if fields.get("recorded_at") else ""
    )
    return (
        f"the cluster left ZooKeeper: its migration to KRaft was finalized{when}. Its metadata lives in the KRaft "
        "quorum only; this ZooKeeper is a copy frozen at the last dual write that no Kafka process reads or writes, "
        "so a change here would change nothing Kafka sees, and there is no way back to ZooKeeper mode. Use Kafka's "
        "Admin API against the KRaft cluster; deprovision this ZooKeeper (or its chroot) once nothing else uses it"
    )


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


# ---------------------------------------------------------------------------------------------
# ZooKeeper-to-KRaft migration: no tool writes while a KRaft controller owns the metadata
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KraftMigrationEvidence:
    """What ZooKeeper shows of a KRaft migration: ``/migration`` and ``/controller`` as read.

    :param migration_data: ``/migration``'s bytes, or None when the znode does not exist.
    :param controller_data: ``/controller``'s bytes, or None when there is no controller.
    :param controller_ephemeral_owner: ``/controller``'s Stat ``ephemeralOwner`` (0: persistent).
    :param finalized_record: ``KRAFT_FINALIZED_PATH``'s bytes (kafka_zk_kraft_migration finalized the
        migration: ZooKeeper alone still looks like a dual-write), or None when there is none; the phase
        reader's signal (:mod:`.kraft_migration_phase`, through :func:`.kraft_migration.classify`).
    """

    migration_data: bytes | None
    controller_data: bytes | None
    controller_ephemeral_owner: int | None
    finalized_record: bytes | None = None


def kraft_migration_signs(evidence: KraftMigrationEvidence) -> list[str]:
    """The signs of a migration ZooKeeper shows (see :func:`kraft_migration_in_progress`), each as text."""
    reasons: list[str] = []
    if evidence.migration_data is not None:
        try:
            state = MigrationZNode.decode(evidence.migration_data)
        except ZnodeFormatError as exc:
            reasons.append(f"/migration exists but cannot be read ({exc})")
        else:
            reasons.append(
                f"/migration exists (KRaft controller {state.kraft_controller_id}, epoch "
                f"{state.kraft_controller_epoch}, metadata offset {state.kraft_metadata_offset})"
            )
    if evidence.controller_data is not None:
        try:
            controller = ControllerRegistration.decode(evidence.controller_data)
        except ZnodeFormatError:
            controller = None  # an unreadable /controller is the identity pin's and the plan's concern
        if controller is not None and controller.is_kraft_controller:
            reasons.append(
                f"/controller is held by KRaft controller {controller.broker_id} "
                f"(kraftControllerEpoch {controller.kraft_controller_epoch})"
            )
        if evidence.controller_ephemeral_owner == 0:
            reasons.append("/controller is a persistent znode (a ZooKeeper-mode controller's is ephemeral)")
    return reasons


def kraft_migration_in_progress(evidence: KraftMigrationEvidence) -> str | None:
    """Why ZooKeeper is (or may be) under a KRaft controller, or None when it is not.

    Kafka 3.4+ (``KafkaZkClient.tryRegisterKRaftControllerAsActiveController``, ``ZkData
    MigrationZNode``/``ControllerZNode`` at 3.4.0 and 3.9.0-rc3): a migrating KRaft controller creates
    ``/migration`` and holds ``/controller`` as a *persistent* znode whose ``kraftControllerEpoch`` is
    its epoch (a ZooKeeper controller writes -1 into an ephemeral one). Every ZooKeeper write it makes
    is a multi-op conditional on ``/controller_epoch`` and ``/migration``; a tool writing beside it
    changes metadata the KRaft log does not know. The documented rollback deletes both znodes
    (``docs/ops.html``, 3.9; it leaves ``/migration``, which a real 3.9.0 rollback showed). Any of the
    three signs, or a ``/migration`` that cannot be read, counts. A finalized migration (the record in
    ``evidence``) is the phase reader's to tell (:func:`.kraft_migration.classify`), not a sign here.
    """
    reasons = kraft_migration_signs(evidence)
    if not reasons:
        return None
    return (
        "a ZooKeeper-to-KRaft migration is in progress: "
        + "; ".join(reasons)
        + ". A KRaft controller owns the metadata from its claim until the migration is finalized or rolled back, "
        "and /migration stays until someone deletes it; this tool does not write ZooKeeper meanwhile"
    )
