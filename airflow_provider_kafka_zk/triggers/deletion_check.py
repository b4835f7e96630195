"""One look at every topic marked for deletion: ZooKeeper, then every broker's disk, then the shared
verdict (:func:`kafka.deletion.deletion_verdict`) per topic.

Each check gathers what the verdict needs -- a handful of ZooKeeper reads per topic, and one
inventory round trip per broker host over SSH. The ``deletions`` task runs it directly; its deferred
wait (:class:`~airflow_provider_kafka_zk.triggers.deletion.TopicDeletionTrigger`) runs it on the
trigger's own thread with one ZooKeeper session for the whole wait. A broker whose disk could not be
read is named in the coverage; a topic gone from ZooKeeper is "deleted everywhere" only when every
expected broker was read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.broker_config import LOG_SEGMENT_DELETE_DELAY_MS, effective_setting
from airflow_provider_kafka_zk.kafka.deletion import (
    DEFAULT_DELETE_MARGIN_MS,
    BrokerDeletionFacts,
    DeletionVerdict,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
    deletion_verdict,
    running_for_ms,
)
from airflow_provider_kafka_zk.kafka.inventory import effective_broker_id
from airflow_provider_kafka_zk.kafka.logdir import DirKind

_KINDS = {k.name.lower(): k for k in DirKind}


def _now_ms() -> int:
    """The wall clock directory ages are counted to when no ``now_ms`` is given.

    One place, so tests can look from later: a ``-delete`` directory's age runs from its ctime (the
    broker's rename), which cannot be backdated, so a simulated "renamed two days ago" directory is
    only that old to a clock moved forward (tests/conftest.py ``deletion_clock``).
    """
    return int(time.time() * 1000)


@dataclass(frozen=True)
class LeftoverDirectory:
    """A verdict's leftover directory with what a cleanup needs: the log dir and exact name."""

    broker_id: int
    host: str
    log_dir: str
    name: str
    kind: str
    age_ms: int

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"


@dataclass(frozen=True)
class BrokerDisk:
    """What a cleanup needs to know about a broker host before touching it: where, which log dirs,
    and what each meta.properties says (for the maintenance session's identity pin)."""

    host: str
    log_dirs: tuple[str, ...]
    meta: tuple[tuple[str, int | None, str | None], ...]  # (log dir, broker.id, cluster.id)
    effective_broker_id: int | None
    host_evidence: Mapping[str, Any] | None = None  # pins a Kafka < 2.4 host (no cluster.id)


@dataclass
class DeletionCheck:
    """One look at ZooKeeper and every reachable broker disk, and the verdict for each topic."""

    verdicts: list[DeletionVerdict]
    expected_brokers: tuple[int, ...]
    inventoried: dict[int, str]  # broker -> host
    not_inventoried: dict[int, str]  # broker -> why
    live_brokers: tuple[int, ...]
    checked_at_ms: int
    dirs: dict[tuple[int, str], LeftoverDirectory] = field(default_factory=dict)  # (broker, path)
    disks: dict[int, BrokerDisk] = field(default_factory=dict)  # inventoried brokers only
    cluster_id: str | None = None  # ZooKeeper's /cluster/id, pinned before any verdict

    def coverage(self) -> dict[str, Any]:
        status = "complete" if not self.not_inventoried else ("partial" if self.inventoried else "empty")
        return {
            "status": status,
            "expected": list(self.expected_brokers),
            "inventoried": sorted(self.inventoried),
            "not_inventoried": {str(b): r for b, r in sorted(self.not_inventoried.items())},
        }

    def deleted_everywhere(self, verdict: DeletionVerdict) -> bool:
        """DELETED with every expected broker's disk read (the verdict alone counts only live ones)."""
        return verdict.verdict is Verdict.DELETED and not self.not_inventoried

    def settled(self, verdict: DeletionVerdict) -> bool:
        """Nothing more to wait for: deleted everywhere, or a finished verdict other than DELETED."""
        if verdict.verdict is Verdict.DELETED:
            return self.deleted_everywhere(verdict)
        return verdict.verdict.finished

    @property
    def all_settled(self) -> bool:
        return all(self.settled(v) for v in self.verdicts)

    def leftovers(self, verdict: DeletionVerdict) -> list[LeftoverDirectory]:
        return [self.dirs[(d.broker_id, d.path)] for d in verdict.leftover_dirs]

    def verdict_dict(self, verdict: DeletionVerdict) -> dict[str, Any]:
        return {
            "topic": verdict.topic,
            "verdict": verdict.verdict.value,
            "causes": [c.value for c in verdict.causes],
            "evidence": list(verdict.evidence),
            "blocking_brokers": list(verdict.blocking_brokers),
            "leftover_dirs": [
                {
                    "broker_id": d.broker_id,
                    "host": d.host,
                    "log_dir": d.log_dir,
                    "name": d.name,
                    "path": d.path,
                    "kind": d.kind,
                    "age_ms": d.age_ms,
                }
                for d in self.leftovers(verdict)
            ],
            "pending_dirs": [
                {"broker_id": d.broker_id, "path": d.path, "age_ms": d.age_ms} for d in verdict.pending_dirs
            ],
            "uninventoried_brokers": sorted({*verdict.uninventoried_brokers, *self.not_inventoried}),
            "coverage": self.coverage()["status"],
            "deleted_everywhere": self.deleted_everywhere(verdict),
            "settled": self.settled(verdict),
            "description": self.describe(verdict),
        }

    def describe(self, verdict: DeletionVerdict) -> str:
        text = verdict.describe()
        unread = sorted(self.not_inventoried)
        if unread:
            text += f"; brokers {unread} not read ({', '.join(self.not_inventoried[b] for b in unread)})"
        return text

    def to_dicts(self) -> list[dict[str, Any]]:
        return [self.verdict_dict(v) for v in self.verdicts]


@dataclass(frozen=True)
class _ClusterReads:
    """What one check reads from ZooKeeper besides the topics."""

    controller_live: bool
    live: set[int]
    registered: dict[int, tuple[int | None, int | None]]  # broker -> (registration timestamp, znode ctime)
    broker_configs: dict[str, dict[str, str]]  # /config/brokers/<entity> -> config


def _read_topics(
    zk_hook: Any, topics: Sequence[str], brokers: Iterable[int] = ()
) -> tuple[dict[str, TopicInZooKeeper], _ClusterReads]:
    """Pipelined reads of what ZooKeeper holds for ``topics``; also controller presence, live brokers
    with when each registered, and the dynamic broker configs (``/config/brokers/<id>`` and
    ``<default>``) of ``brokers`` and of every registered broker.

    An ACL refusal names the znode it happened on (ZooKeeperAuthError), never a bare kazoo error.
    """
    from kazoo.exceptions import AuthFailedError, NoAuthError, NoNodeError

    client = zk_hook.get_conn()

    def read(path: str, method: Any) -> Any:
        result = method(path)

        def get() -> Any:
            try:
                return result.get()
            except (NoAuthError, AuthFailedError) as exc:
                raise zk_hook.auth_error(path, exc) from None

        return get

    reads = {
        t: (
            read(znodes.topic_path(t), client.get_async),
            read(znodes.delete_topic_path(t), client.exists_async),
            read(znodes.config_entity_path("topics", t), client.exists_async),
        )
        for t in topics
    }
    reassign_read = read(znodes.REASSIGN_PARTITIONS, client.get_async)
    controller_read = read(znodes.CONTROLLER, client.exists_async)
    brokers_read = read(znodes.BROKER_IDS, client.get_children_async)
    try:
        data, _ = reassign_read()
        in_reassign = {e.topic for e in znodes.ReassignPartitions.decode(data).partitions}
    except NoNodeError:
        in_reassign = set()
    except znodes.ZnodeFormatError:
        in_reassign = set()  # Kafka 2.0+ ignores an undecodable request too
    found: dict[str, TopicInZooKeeper] = {}
    for topic, (topic_read, marker_read, config_read) in reads.items():
        try:
            data, _ = topic_read()
            assignment = znodes.TopicAssignment.decode(data, znodes.topic_path(topic))
        except NoNodeError:
            assignment = None
        reassigning = assignment is not None and (
            any(assignment.adding_replicas.values())
            or any(assignment.removing_replicas.values())
            or topic in in_reassign
        )
        found[topic] = TopicInZooKeeper(
            topic=topic,
            topic_znode=assignment is not None,
            delete_marker=marker_read() is not None,
            config_znode=config_read() is not None,
            replicas={p: tuple(r) for p, r in assignment.partitions.items()} if assignment else {},
            reassigning=reassigning,
        )
    try:
        live = {int(b) for b in brokers_read()}
    except NoNodeError:
        live = set()
    registrations = {b: read(znodes.broker_path(b), client.get_async) for b in sorted(live)}
    entities = ["<default>", *(str(b) for b in sorted(live | {int(b) for b in brokers}))]
    config_reads = {
        e: read(znodes.config_entity_path("brokers", e), client.get_async) for e in dict.fromkeys(entities)
    }
    registered: dict[int, tuple[int | None, int | None]] = {}
    for broker_id, get in registrations.items():
        try:
            data, stat = get()
        except NoNodeError:  # gone between the two reads: not live any more
            live.discard(broker_id)
            continue
        try:
            stamp = znodes.BrokerRegistration.decode(data, znodes.broker_path(broker_id)).timestamp_ms
        except znodes.ZnodeFormatError:
            stamp = None
        registered[broker_id] = (stamp, stat.ctime)
    configs: dict[str, dict[str, str]] = {}
    for entity, get in config_reads.items():
        path = znodes.config_entity_path("brokers", entity)
        try:
            data, _ = get()
            configs[entity] = dict(znodes.ConfigEntity.decode(data, path).config)
        except NoNodeError:
            continue
        except znodes.ZnodeFormatError:
            continue  # Kafka cannot read it either: the broker runs without it
    return found, _ClusterReads(controller_read() is not None, live, registered, configs)


def pending_deletion_topics(zk_hook: Any) -> list[str]:
    """Every topic with a marker under /admin/delete_topics (names validated, sorted)."""
    from airflow_provider_kafka_zk.hooks.zookeeper import ZnodeNotFoundError

    try:
        children = zk_hook.get_children(znodes.DELETE_TOPICS)
    except ZnodeNotFoundError:
        return []
    return [znodes.validate_topic_name(t, f"{znodes.DELETE_TOPICS}/{t}") for t in children]


def check_deletions(
    zk_hook: Any,
    host_hook: Any,
    topics: Sequence[str],
    *,
    expected_broker_ids: Iterable[int] = (),
    requested: bool = True,
    now_ms: int | None = None,
    max_parallel: int = 8,
    margin_ms: int = DEFAULT_DELETE_MARGIN_MS,
    expected_cluster_id: str | None = None,
) -> DeletionCheck:
    """ZooKeeper first, then one inventory per expected broker, then the shared verdict per topic.

    The connection must lead to a Kafka cluster (``/brokers/ids`` and ``/cluster/id``, the rule every
    mutation pins: :func:`maintenance.pin_zookeeper_identity`), and to ``expected_cluster_id`` when
    given (the cluster an earlier check of the same wait saw): a chroot without a cluster has no
    topics to find, which would read as "deleted". ``margin_ms``: see :func:`deletion_verdict`.
    """
    from airflow_provider_kafka_zk.maintenance import ClusterIdentityError, pin_zookeeper_identity

    identity = pin_zookeeper_identity(zk_hook)
    if expected_cluster_id is not None and identity.cluster_id != expected_cluster_id:
        raise ClusterIdentityError(
            f"{zk_hook.describe_path('/')} now holds cluster {identity.cluster_id}, not {expected_cluster_id} "
            "that this verification started on: refusing to give verdicts about another cluster"
        )
    expected_ids = {int(b) for b in expected_broker_ids} | {int(b) for b in host_hook.broker_hosts}
    zk_topics, reads = _read_topics(zk_hook, topics, expected_ids)
    controller_live, live = reads.controller_live, reads.live
    assigned = {b for t in zk_topics.values() for r in t.replicas.values() for b in r}
    expected = sorted(live | assigned | expected_ids)
    # Connections are resolved here, on the task's own thread: inside the pool's threads an Airflow
    # task cannot reach the metadata DB, so a connection stored there (not in an env var) would fail
    # every broker and make coverage falsely partial.
    host_hook.resolve_connections()

    def inventory(broker_id: int) -> tuple[int, Any, str | None]:
        try:
            return broker_id, host_hook.inventory(broker_id), None
        except Exception as exc:  # the broker is named in the coverage, never "deleted there"
            return broker_id, None, f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, min(max_parallel, len(expected) or 1))) as pool:
        results = list(pool.map(inventory, expected))
    if now_ms is None:
        now_ms = _now_ms()
    facts: dict[int, BrokerDeletionFacts] = {}
    inventoried: dict[int, str] = {}
    not_inventoried: dict[int, str] = {}
    disks: dict[int, BrokerDisk] = {}
    dirs_by_topic: dict[str, list[TopicDirectory]] = {t: [] for t in topics}
    located: dict[tuple[int, str], LeftoverDirectory] = {}
    for broker_id, inv, error in results:
        if inv is None:
            not_inventoried[broker_id] = error or "not inventoried"
            facts[broker_id] = BrokerDeletionFacts(broker_id, live=broker_id in live)
            continue
        inventoried[broker_id] = inv.host
        disks[broker_id] = BrokerDisk(
            host=inv.host,
            log_dirs=tuple(d.path for d in inv.log_dirs),
            meta=tuple(
                (d.path, d.meta.broker_id if d.meta else None, d.meta.cluster_id if d.meta else None)
                for d in inv.log_dirs
            ),
            effective_broker_id=effective_broker_id(inv.facts, inv.log_dirs),
            host_evidence=inv.remote.get("identity_evidence"),
        )
        kwargs: dict[str, Any] = {}
        if inv.facts.delete_topic_enable is not None:
            kwargs["delete_topic_enable"] = inv.facts.delete_topic_enable
        delay = effective_setting(
            LOG_SEGMENT_DELETE_DELAY_MS,
            broker_id=broker_id,
            static_value=inv.facts.log_segment_delete_delay_ms,
            dynamic_broker=reads.broker_configs.get(str(broker_id)),
            dynamic_default=reads.broker_configs.get("<default>"),
            release=inv.facts.kafka_version,
        )
        facts[broker_id] = BrokerDeletionFacts(
            broker_id,
            live=broker_id in live,
            delete_delay_ms=int(delay.value),
            running_for_ms=running_for_ms(now_ms, *reads.registered.get(broker_id, (None, None))),
            **kwargs,
        )
        for p in inv.partitions:
            kind = _KINDS.get(p.kind)
            if p.topic not in dirs_by_topic or kind is None or p.partition is None:
                continue
            # a -delete directory's age runs from its rename (ctime), the others' from their mtime
            reference = p.age_reference_ms
            age = now_ms - reference if reference is not None else 0
            leftover = LeftoverDirectory(broker_id, inv.host, p.log_dir, p.name, p.kind, age)
            located[(broker_id, leftover.path)] = leftover
            dirs_by_topic[p.topic].append(TopicDirectory(broker_id, leftover.path, p.partition, kind, age))
    verdicts = []
    for topic in topics:
        zk = zk_topics[topic]
        dirs = [d for d in dirs_by_topic[topic] if not zk.topic_znode or d.kind is DirKind.NORMAL]
        verdicts.append(
            deletion_verdict(
                zk,
                dirs,
                facts,
                inventoried=inventoried,
                controller_live=controller_live,
                requested=requested,
                margin_ms=margin_ms,
            )
        )
    return DeletionCheck(
        verdicts=verdicts,
        expected_brokers=tuple(expected),
        inventoried=inventoried,
        not_inventoried=not_inventoried,
        live_brokers=tuple(sorted(live)),
        checked_at_ms=now_ms,
        dirs=located,
        disks=disks,
        cluster_id=identity.cluster_id,
    )


def host_hook_from_kwargs(kwargs: Mapping[str, Any], zookeeper: Any = None) -> Any:
    """The BrokerHostHook a check uses, from the JSON-safe settings the trigger carries.

    :param kwargs: the settings (connection ids, hosts, paths).
    :param zookeeper: the ZooKeeper hook the broker hosts are looked up with (default: its own session).
    """
    from airflow_provider_kafka_zk.hooks.broker_host import DEFAULT_PYTHON_INTERPRETERS, BrokerHostHook

    return BrokerHostHook(
        kwargs["ssh_conn_id"],
        kwargs["kafka_zookeeper_conn_id"],
        broker_hosts=kwargs.get("broker_hosts") or None,
        server_properties_path=kwargs.get("server_properties_path"),
        known_hosts=tuple(kwargs.get("known_hosts") or ()),
        connect_timeout=kwargs.get("connect_timeout"),
        command_timeout=float(kwargs.get("command_timeout") or 900.0),
        connect_attempts=int(kwargs.get("connect_attempts") or 1),
        python_interpreters=tuple(kwargs.get("python_interpreters") or DEFAULT_PYTHON_INTERPRETERS),
        zookeeper=zookeeper,
    )


def run_check(settings: Mapping[str, Any], topics: Sequence[str], zk_hook: Any = None) -> DeletionCheck:
    """One complete check; the broker hosts are looked up through the same ZooKeeper session.

    :param settings: how to reach the cluster (the trigger's ``settings``).
    :param topics: the topics to give a verdict.
    :param zk_hook: an open ZooKeeper hook to use (kept open); default: a fresh one, closed after.
    """
    from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

    if zk_hook is None:
        with KafkaZooKeeperHook(settings["kafka_zookeeper_conn_id"]) as fresh:
            return run_check(settings, topics, fresh)
    return check_deletions(
        zk_hook,
        host_hook_from_kwargs(settings, zookeeper=zk_hook),
        topics,
        expected_broker_ids=settings.get("expected_broker_ids") or (),
        requested=bool(settings.get("requested", True)),
        margin_ms=int(settings.get("delete_margin_ms", DEFAULT_DELETE_MARGIN_MS)),
        expected_cluster_id=settings.get("cluster_id"),
    )
