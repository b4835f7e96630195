"""The health gates around each restart of a migration run (pure).

Before a node restarts: stopping it must not take a partition offline or under
``min.insync.replicas`` (a rolling restart cannot help an RF=1 partition: the drain DAG can). After
it: registered again -- a ZooKeeper-mode broker in ``/brokers/ids`` with a new session, a KRaft broker
in the KRaft quorum as a KRaft broker, unfenced, with a registration newer than the restart -- and
every partition back to health: none offline, none under its ``min.insync.replicas``, the broker back
in the ISR of its partitions, compared with the run's baseline (what was already unhealthy before
the run does not hold the gate, and is said).

Partition health is read from ZooKeeper's partition state znodes in every phase: until the
migration is finalized the KRaft controller writes every leader and ISR change there too
(``ZkTopicMigrationClient.updateTopicPartitions``, 3.9.0-rc3). What is live differs: ZooKeeper's
registrations, plus the KRaft quorum's unfenced brokers once brokers run in KRaft mode.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from .kraft_metadata import MetadataImage
from .kraft_migration_config import ACL_AUTHORIZER, NodeMode, node_mode
from .model import ClusterState, PartitionInfo

PartitionKey = tuple[str, int]


def min_isr(state: ClusterState, broker_default: str | None = None) -> dict[str, int]:
    """Each topic's ``min.insync.replicas``: its override, else the dynamic cluster default, else the
    brokers' server.properties value (``broker_default``), else Kafka's default 1."""
    dynamic = state.configs.broker_default.get("min.insync.replicas")
    fallback = _int(dynamic) or _int(broker_default) or 1
    return {name: _int(t.config.get("min.insync.replicas")) or fallback for name, t in state.topics.items()}


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def live_brokers(state: ClusterState, image: MetadataImage | None) -> frozenset[int]:
    """ZooKeeper's registered brokers plus every broker the KRaft quorum holds unfenced (a KRaft-mode
    broker is registered there only; the quorum fences one that stops heartbeating)."""
    kraft = {b for b, r in image.brokers.items() if not r.fenced} if image else set()
    return frozenset(state.live_broker_ids) | frozenset(kraft)


@dataclass(frozen=True)
class Health:
    """What is unhealthy now: offline partitions, those under min ISR, and replicas out of the ISR."""

    offline: frozenset[PartitionKey]
    under_min_isr: frozenset[PartitionKey]
    out_of_isr: frozenset[tuple[PartitionKey, int]]

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "offline": sorted(f"{t}-{p}" for t, p in self.offline),
            "under_min_isr": sorted(f"{t}-{p}" for t, p in self.under_min_isr),
            "out_of_isr": sorted(f"{t}-{p}@{b}" for (t, p), b in self.out_of_isr),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Iterable[str]]) -> Health:
        def key(text: str) -> PartitionKey:
            topic, _, partition = text.rpartition("-")
            return topic, int(partition)

        out = set()
        for item in d.get("out_of_isr", ()):
            partition, _, broker = item.rpartition("@")
            out.add((key(partition), int(broker)))
        return cls(
            frozenset(key(x) for x in d.get("offline", ())),
            frozenset(key(x) for x in d.get("under_min_isr", ())),
            frozenset(out),
        )


def health(
    partitions: Mapping[PartitionKey, PartitionInfo], live: Collection[int], min_isrs: Mapping[str, int]
) -> Health:
    offline = {k for k, p in partitions.items() if p.is_offline(live)}
    under = {k for k, p in partitions.items() if k not in offline and len(p.isr) < min_isrs.get(k[0], 1)}
    out = {
        (k, b)
        for k, p in partitions.items()
        if k not in offline
        for b in (p.target_replicas or p.replicas)
        if b in live and b not in p.isr
    }
    return Health(frozenset(offline), frozenset(under), frozenset(out))


def _shown(keys: Iterable[PartitionKey], limit: int = 10) -> str:
    items = sorted(keys)
    text = ", ".join(f"{t}-{p}" for t, p in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def stop_risks(
    broker: int,
    partitions: Mapping[PartitionKey, PartitionInfo],
    live: Collection[int],
    min_isrs: Mapping[str, int],
) -> list[str]:
    """What stopping ``broker`` now would do: partitions it alone keeps online (offline while it is
    down), and partitions whose ISR without it falls under ``min.insync.replicas`` (acks=all
    producers fail). Empty: safe to restart."""
    alone = []
    below = []
    for key, p in partitions.items():
        if broker not in p.isr or p.is_offline(live):
            continue
        remaining = [b for b in p.isr if b != broker and b in live]
        if not remaining:
            alone.append(key)
        elif len(remaining) < min_isrs.get(key[0], 1):
            below.append(key)
    risks = []
    if alone:
        risks.append(
            f"broker {broker} is the only in-sync replica of {_shown(alone)}: they go offline while it restarts "
            "(move them first: kafka_zk_pre_maintenance_drain)"
        )
    if below:
        risks.append(
            f"without broker {broker}, {_shown(below)} fall under min.insync.replicas (producers with acks=all fail): "
            "wait until their followers are back in the ISR"
        )
    return risks


def roll_gate(
    broker: int,
    expect: str,
    *,
    zk_epochs: Mapping[int, int],
    epoch_before: int | None,
    kraft_offset_before: int,
    image: MetadataImage | None,
    now: Health,
    baseline: Health,
) -> list[str]:
    """Why broker ``broker``'s restart has not passed its gate yet (empty: passed).

    :param expect: ``zookeeper`` or ``kraft`` (see :class:`~.kraft_migration_steps.BrokerRoll`).
    :param zk_epochs: registered brokers' epochs (czxid of ``/brokers/ids/<id>``).
    :param epoch_before: the broker's ZooKeeper epoch before the restart (None: it was not registered).
    :param kraft_offset_before: the metadata log's last offset before the restart.
    :param image: the metadata log now (None: unread; a KRaft gate then waits).
    :param now: health now; ``baseline``: health before the run.
    """
    waiting = []
    if expect == "zookeeper":
        epoch = zk_epochs.get(broker)
        if epoch is None:
            waiting.append(f"broker {broker} is not registered in /brokers/ids")
        elif epoch_before is not None and epoch == epoch_before:
            waiting.append(f"broker {broker} still has its registration from before the restart")
    else:
        if broker in zk_epochs:
            waiting.append(f"broker {broker} is still registered in /brokers/ids (not a KRaft broker yet)")
        registration = image.brokers.get(broker) if image is not None else None
        if image is None:
            waiting.append("the controllers' metadata log could not be read")
        elif registration is None or registration.offset <= kraft_offset_before:
            waiting.append(f"broker {broker} has not registered in the KRaft quorum since its restart")
        elif not registration.kraft_broker:
            waiting.append(f"broker {broker} registered as a ZooKeeper-mode broker, not as a KRaft broker")
        elif registration.fenced:
            waiting.append(f"broker {broker} is registered in the KRaft quorum but still fenced")
    waiting += _worse_than_baseline(now, baseline)
    out = {k for k, b in now.out_of_isr if b == broker} - {k for k, b in baseline.out_of_isr if b == broker}
    if out:
        waiting.append(f"broker {broker} not back in the ISR of {_shown(out)}")
    return waiting


def controller_gate(
    node_id: int,
    action: str,
    *,
    quorum_leaders: Mapping[int, int | None],
    now: Health,
    baseline: Health,
) -> list[str]:
    """Why controller ``node_id``'s start or restart has not passed its gate yet, once its new process
    runs (empty: passed): the quorum has a leader again (some controller's ``quorum-state`` names one:
    ``leaderId`` -1 while an election runs, ``QuorumState``/``FileQuorumStateStore``, 3.9.0-rc3) and no
    partition went offline or under min.insync.replicas since the run began (a quorum without a leader
    fences no broker but elects no leader either).

    :param quorum_leaders: controller -> the leader its ``quorum-state`` names (None: not read).
    """
    waiting = []
    if not any(leader is not None and leader >= 0 for leader in quorum_leaders.values()):
        shown = ", ".join(
            f"{n}: {'?' if lead is None else lead}" for n, lead in sorted(quorum_leaders.items())
        )
        waiting.append(
            f"the KRaft quorum has no leader since controller {node_id}'s {action} (quorum-state: {shown})"
        )
    return waiting + _worse_than_baseline(now, baseline)


def _worse_than_baseline(now: Health, baseline: Health) -> list[str]:
    """Partitions offline or under min.insync.replicas now that were not when the run began."""
    waiting = []
    offline = now.offline - baseline.offline
    if offline:
        waiting.append(f"partitions offline (they were not before the run): {_shown(offline)}")
    under = now.under_min_isr - baseline.under_min_isr
    if under:
        waiting.append(f"partitions under min.insync.replicas: {_shown(under)}")
    return waiting


def zookeeper_only_features(files: Mapping[tuple[str, int], Mapping[str, str]]) -> tuple[str, ...]:
    """What a finalized (KRaft-only) cluster cannot keep: AclAuthorizer, ``zookeeper.*`` settings on a
    KRaft broker, a broker still in ZooKeeper mode."""
    found = []
    for (role, node), props in sorted(files.items()):
        if props.get("authorizer.class.name", "").strip() == ACL_AUTHORIZER:
            found.append(f"{role} {node}: authorizer.class.name={ACL_AUTHORIZER} (reads ACLs from ZooKeeper)")
        mode = node_mode(props)
        if role == "broker" and mode is not NodeMode.KRAFT_BROKER:
            found.append(f"broker {node} runs in {mode.value} mode")
        if role == "broker" and mode is NodeMode.KRAFT_BROKER:
            zk = sorted(k for k in props if k.startswith("zookeeper."))
            if zk:
                found.append(f"broker {node}: {', '.join(zk)} set")
    return tuple(found)
