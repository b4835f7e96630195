"""Preferred leaders, decided without I/O: Kafka's imbalance rule, who an election can move, and why not.

Kafka's rules (``KafkaController.scala``, 3.3.1):

* ``checkAndTriggerAutoLeaderRebalance``: partitions of topics not queued for deletion are grouped by
  their first replica (the preferred leader, alive or not); a broker's imbalance is the share of its
  group whose leader is another broker (a partition without a state znode does not count as
  imbalanced; one with leader -1 does). Above ``leader.imbalance.per.broker.percentage`` (the
  *controller's* setting, default 10) an automatic election runs every
  ``leader.imbalance.check.interval.seconds`` (300) -- only when ``auto.leader.rebalance.enable``
  (default true) is on and no reassignment is in flight.
* ``PreferredReplicaPartitionLeaderElectionStrategy``: a partition moves to its first replica only
  when that replica is alive and in the ISR; the leader epoch goes up by one, the ISR is unchanged.
* A ZooKeeper-triggered election (``/admin/preferred_replica_election``) skips unknown partitions
  and topics being deleted, and the controller deletes the whole znode when done, moved or not.
* The automatic rebalance runs on the controller: ``onControllerFailover`` schedules the first
  check 5 s after it became controller (``if (config.autoLeaderRebalanceEnable)``), and
  ``processAutoPreferredReplicaLeaderElection`` the next one ``leader.imbalance.check.interval.seconds``
  later; its controller.log says "Processing automatic preferred replica leader election", then
  "Starting replica leader election (PREFERRED) for partitions <tp,...> triggered by AutoTriggered".
  The three settings are static ``KafkaConfig`` vals (defaults true / 10 / 300; none is in
  ``DynamicBrokerConfig.AllDynamicConfigs`` at 1.1 .. 3.9), read from the controller's server.properties
  (:func:`auto_rebalance`; a value for them under ``/config/brokers`` is ignored by Kafka).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .broker_config import (
    AUTO_LEADER_REBALANCE_ENABLE,
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    effective_setting,
)
from .findings import APPROVAL_STEP, trigger_command
from .model import ClusterState, PartitionInfo
from .znodes import PreferredReplicaElection, TopicPartition

DEFAULT_IMBALANCE_PERCENT = 10  # leader.imbalance.per.broker.percentage
DEFAULT_CHECK_INTERVAL_S = 300  # leader.imbalance.check.interval.seconds
# jute.maxbuffer is 1 MiB by default on both ends; stay well under it
DEFAULT_MAX_ELECTION_BYTES = 512 * 1024
DEFAULT_MAX_ELECTION_PARTITIONS = 1000


@dataclass(frozen=True)
class LeaderImbalance:
    """One broker's share of the partitions it should lead but does not."""

    broker_id: int
    preferred: int  # partitions whose first replica is this broker
    not_leading: tuple[TopicPartition, ...]  # of those, led by another broker or by none
    threshold_percent: int

    @property
    def ratio(self) -> float:
        return len(self.not_leading) / self.preferred if self.preferred else 0.0

    @property
    def over_threshold(self) -> bool:
        """Kafka's test: ``imbalanceRatio > leaderImbalancePerBrokerPercentage / 100``."""
        return self.ratio > self.threshold_percent / 100


def leader_imbalance(
    state: ClusterState, *, threshold_percent: int = DEFAULT_IMBALANCE_PERCENT
) -> dict[int, LeaderImbalance]:
    """Every preferred-leader broker's imbalance, by Kafka's rule (alive or not: Kafka does not filter)."""
    groups: dict[int, list[PartitionInfo]] = defaultdict(list)
    for info in state.partitions():
        if info.topic in state.pending_deletions or not info.replicas:
            continue
        groups[info.replicas[0]].append(info)
    return {
        broker: LeaderImbalance(
            broker,
            len(infos),
            tuple(
                TopicPartition(i.topic, i.partition)
                for i in infos
                if i.state is not None and i.state.leader != broker
            ),
            threshold_percent,
        )
        for broker, infos in sorted(groups.items())
    }


@dataclass(frozen=True)
class NotElectable:
    """A partition a preferred election would leave where it is, and why."""

    topic: str
    partition: int
    preferred: int | None
    leader: int | None
    reason: str

    def describe(self) -> str:
        return (
            f"{self.topic}-{self.partition} (leader {self.leader}, preferred {self.preferred}): {self.reason}"
        )


def why_not_electable(info: PartitionInfo, live: Collection[int], deleting: Collection[str]) -> str | None:
    """None when an election would move ``info`` to its preferred replica; the reason otherwise."""
    preferred = info.preferred_leader
    if preferred is None:
        return "no replicas assigned"
    if info.topic in deleting:
        return "the topic is being deleted (Kafka skips it)"
    if info.state is None:
        return "no partition state znode"
    if preferred not in live:
        return f"preferred replica {preferred} is offline"
    if preferred not in info.isr:
        return f"preferred replica {preferred} is not in the ISR {list(info.isr)}"
    return None


@dataclass(frozen=True)
class ElectionScope:
    """Which partitions to consider: those whose preferred replica is one of ``brokers`` and/or of
    ``topics``; both None means every partition whose leader is not its preferred replica."""

    brokers: frozenset[int] | None = None
    topics: frozenset[str] | None = None

    def covers(self, info: PartitionInfo) -> bool:
        if self.brokers is not None and info.preferred_leader not in self.brokers:
            return False
        return self.topics is None or info.topic in self.topics

    def describe(self) -> str:
        parts = []
        if self.brokers is not None:
            parts.append(f"preferred leader on broker(s) {sorted(self.brokers)}")
        if self.topics is not None:
            parts.append(f"topic(s) {', '.join(sorted(self.topics))}")
        return " and ".join(parts) or "every partition"


@dataclass(frozen=True)
class ElectionChoice:
    """What an election over a scope would do: ``electable`` move, ``not_electable`` stay (with why)."""

    electable: tuple[TopicPartition, ...]
    not_electable: tuple[NotElectable, ...]
    already_preferred: int


def choose_election(state: ClusterState, scope: ElectionScope) -> ElectionChoice:
    """Partitions in ``scope`` not led by their preferred replica, split by whether Kafka would move them."""
    live = state.live_broker_ids
    electable: list[TopicPartition] = []
    stay: list[NotElectable] = []
    already = 0
    for info in state.partitions():
        if not scope.covers(info):
            continue
        if info.leader is not None and info.leader == info.preferred_leader:
            already += 1
            continue
        reason = why_not_electable(info, live, state.pending_deletions)
        if reason is None:
            electable.append(TopicPartition(info.topic, info.partition))
        else:
            stay.append(NotElectable(info.topic, info.partition, info.preferred_leader, info.leader, reason))
    return ElectionChoice(tuple(sorted(electable)), tuple(stay), already)


def election_batches(
    partitions: Sequence[TopicPartition],
    *,
    max_partitions: int = DEFAULT_MAX_ELECTION_PARTITIONS,
    max_bytes: int = DEFAULT_MAX_ELECTION_BYTES,
) -> list[tuple[TopicPartition, ...]]:
    """Consecutive batches whose ``/admin/preferred_replica_election`` znode stays within both limits."""
    if max_partitions < 1 or max_bytes < 1:
        raise ValueError("max_partitions and max_bytes must be positive")
    empty = len(PreferredReplicaElection(()).encode())
    batches: list[tuple[TopicPartition, ...]] = []
    current: list[TopicPartition] = []
    size = empty
    for tp in partitions:
        entry = len(json.dumps({"topic": tp[0], "partition": tp[1]}, separators=(",", ":")).encode()) + 1
        if empty + entry > max_bytes:
            raise ValueError(f"{tp[0]}-{tp[1]} alone does not fit in {max_bytes} bytes")
        if current and (len(current) >= max_partitions or size + entry > max_bytes):
            batches.append(tuple(current))
            current, size = [], empty
        current.append(tp)
        size += entry
    if current:
        batches.append(tuple(current))
    for batch in batches:  # the estimate above is exact for Kafka's compact JSON; make sure
        if len(PreferredReplicaElection(batch).encode()) > max_bytes:
            raise ValueError(f"an election batch of {len(batch)} partitions exceeds {max_bytes} bytes")
    return batches


@dataclass(frozen=True)
class ElectionOutcome:
    elected: tuple[TopicPartition, ...]
    not_moved: tuple[NotElectable, ...]

    def summary(self) -> str:
        text = f"{len(self.elected)} partition(s) now led by their preferred replica"
        if self.not_moved:
            text += f"; {len(self.not_moved)} not moved: " + "; ".join(
                n.describe() for n in self.not_moved[:10]
            )
            if len(self.not_moved) > 10:
                text += f"; and {len(self.not_moved) - 10} more"
        return text


def election_outcome(state: ClusterState, requested: Iterable[TopicPartition]) -> ElectionOutcome:
    """After the controller deleted the znode: which requested partitions have their preferred leader."""
    live = state.live_broker_ids
    elected, stay = [], []
    for topic, partition in requested:
        topic_state = state.topic(topic)
        info = None if topic_state is None else topic_state.partitions.get(partition)
        if info is None:
            stay.append(NotElectable(topic, partition, None, None, "the partition no longer exists"))
        elif info.leader is not None and info.leader == info.preferred_leader:
            elected.append(TopicPartition(topic, partition))
        else:
            reason = why_not_electable(info, live, state.pending_deletions) or (
                "the controller did not move it (is a controller running? see its log)"
            )
            stay.append(NotElectable(topic, partition, info.preferred_leader, info.leader, reason))
    return ElectionOutcome(tuple(elected), tuple(stay))


def imbalance_advice(
    imbalance: LeaderImbalance,
    *,
    auto_rebalance: bool,
    blocked: Mapping[TopicPartition, str],
    reassigning: bool,
    check_interval_s: int = DEFAULT_CHECK_INTERVAL_S,
    cluster: str | None = None,
    kraft_controller: int | None = None,
) -> str:
    """What fixes one broker's imbalance: Kafka itself (auto rebalance), an election, or the cause first.

    :param kraft_controller: a migrating KRaft controller acts as controller: it elects (its own
        ``auto.leader.rebalance.enable``, or the Admin API's election); a ZooKeeper-written election
        request is read by no KRaft controller, and this provider's election refuses meanwhile."""
    electable = [tp for tp in imbalance.not_leading if tp not in blocked]
    broker = imbalance.broker_id
    conf = {"cluster": cluster or "<cluster>", "brokers": [broker]}
    trigger = (
        f"run kafka_zk_post_maintenance's election: dry run {trigger_command('kafka_zk_post_maintenance', conf)}, "
        f"then {trigger_command('kafka_zk_post_maintenance', {**conf, 'dry_run': False})} ({APPROVAL_STEP}; or "
        "kafka-leader-election.sh --election-type PREFERRED --all-topic-partitions)"
    )
    if kraft_controller is not None:
        trigger = (
            "run kafka-leader-election.sh --bootstrap-server <a broker> --election-type PREFERRED "
            f"--all-topic-partitions (the Admin API: KRaft controller {kraft_controller} carries it out; during the "
            "migration no KRaft controller reads /admin/preferred_replica_election, and kafka_zk_post_maintenance's "
            "election, which writes it, refuses)"
        )
    if not electable:
        reasons = sorted(set(blocked.values()))
        return f"No election can move them now: {'; '.join(reasons[:3])}. Fix that first"
    if kraft_controller is not None and not reassigning:
        return (
            f"Expected after the migration's rolling restarts: KRaft controller {kraft_controller} elects preferred "
            "leaders itself while its own auto.leader.rebalance.enable is on (Kafka's default), at its next check "
            f"(its leader.imbalance.check.interval.seconds, {DEFAULT_CHECK_INTERVAL_S} s by default); if this "
            f"persists, {trigger}"
        )
    if auto_rebalance and not reassigning:
        return (
            f"auto.leader.rebalance.enable is on: the controller elects them at its next check (every "
            f"leader.imbalance.check.interval.seconds={check_interval_s} s); if this persists, {trigger}"
        )
    why = (
        "a reassignment is in flight, which holds back Kafka's automatic rebalance"
        if auto_rebalance
        else "auto.leader.rebalance.enable=false: Kafka will not move leadership back by itself"
    )
    return f"{why}; {trigger}"


def blocked_reasons(
    state: ClusterState, partitions: Iterable[TopicPartition], live: Iterable[int] | None = None
) -> dict[TopicPartition, str]:
    """For each given partition an election could not move, why (absent: it could).

    :param live: the brokers that serve (default: those registered in ``/brokers/ids``; during a
        migration KRaft-mode brokers serve without a registration there)."""
    live = state.live_broker_ids if live is None else frozenset(live)
    out = {}
    for tp in partitions:
        topic = state.topic(tp[0])
        info = None if topic is None else topic.partitions.get(tp[1])
        reason = (
            "the partition no longer exists"
            if info is None
            else why_not_electable(info, live, state.pending_deletions)
        )
        if reason is not None:
            out[tp] = reason
    return out


# ---------------------------------------------------------------------------------------------
# Kafka's own automatic rebalance: its settings, and what it elected before a tool did
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AutoRebalance:
    """The controller's automatic preferred-leader election as it runs (``KafkaController``, 3.3.1)."""

    controller_id: int | None
    enabled: bool
    imbalance_percent: int
    check_interval_s: int
    source: str  # where the values came from
    notes: tuple[str, ...] = ()  # values in ZooKeeper Kafka ignores for these keys

    def describe(self) -> str:
        where = f"controller {self.controller_id}" if self.controller_id is not None else "the controller"
        if not self.enabled:
            text = f"auto.leader.rebalance.enable=false on {where} ({self.source}): Kafka never moves leaders back by itself"
        else:
            text = (
                f"auto.leader.rebalance.enable=true on {where} ({self.source}): every "
                f"leader.imbalance.check.interval.seconds={self.check_interval_s} s (the first 5 s after it became "
                f"controller) it elects the preferred leaders of each broker whose imbalance is above "
                f"leader.imbalance.per.broker.percentage={self.imbalance_percent}%"
            )
        return text + "".join(f"; {n}" for n in self.notes)


def auto_rebalance(
    controller_id: int | None,
    server_properties: Mapping[str, Any] | None,
    *,
    defaulted: Collection[str] = (),
    broker_configs: Mapping[str, Mapping[str, str]] | None = None,
    release: str | None = None,
) -> AutoRebalance:
    """The controller's rule from its server.properties (``server_properties``: key -> value as the
    inventory parsed it; None: not read, Kafka's defaults) -- one implementation for the audit and
    post-maintenance. Values under ``/config/brokers/<id>`` or ``<default>`` are named as ignored."""
    configs = broker_configs or {}
    known = server_properties is not None
    values = {}
    notes: list[str] = []
    for key in (
        AUTO_LEADER_REBALANCE_ENABLE,
        LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
        LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    ):
        set_there = known and key not in defaulted and (server_properties or {}).get(key) is not None
        setting = effective_setting(
            key,
            broker_id=controller_id if controller_id is not None else -1,
            static_value=(server_properties or {}).get(key) if set_there else None,
            dynamic_broker=configs.get(str(controller_id)) if controller_id is not None else None,
            dynamic_default=configs.get("<default>"),
            release=release,
        )
        values[key] = setting.value
        notes += setting.ignored
    if controller_id is None:
        source = "no controller registered: Kafka's defaults"
    elif not known:
        source = "its server.properties was not read: Kafka's defaults"
    else:
        source = "its server.properties"
    return AutoRebalance(
        controller_id,
        bool(values[AUTO_LEADER_REBALANCE_ENABLE]),
        int(values[LEADER_IMBALANCE_PER_BROKER_PERCENTAGE]),
        int(values[LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS]),
        source,
        tuple(notes),
    )


@dataclass(frozen=True)
class ElectedBeforeUs:
    """Partitions in an election's scope that were not led by their preferred replica when the run
    planned, are now, and were neither requested nor moved by the run: someone else elected them."""

    partitions: tuple[TopicPartition, ...]
    rule: AutoRebalance

    @property
    def by(self) -> str:
        if self.rule.enabled:
            return "Kafka's auto leader rebalance"
        return "another election (not Kafka's own: auto.leader.rebalance.enable=false)"


def elected_before_us(
    before: ClusterState,
    now: ClusterState,
    scope: ElectionScope,
    rule: AutoRebalance,
    *,
    requested: Collection[TopicPartition] = (),
    moved: Collection[TopicPartition] = (),
) -> ElectedBeforeUs:
    """What was elected between the plan's snapshot (``before``) and ``now`` without this run."""
    asked = {tuple(tp) for tp in requested} | {tuple(tp) for tp in moved}
    found = []
    for info in before.partitions():
        key = (info.topic, info.partition)
        if not scope.covers(info) or key in asked:
            continue
        if info.leader is not None and info.leader == info.preferred_leader:
            continue
        topic = now.topic(info.topic)
        current = None if topic is None else topic.partitions.get(info.partition)
        if current is not None and current.leader is not None and current.leader == current.preferred_leader:
            found.append(TopicPartition(*key))
    return ElectedBeforeUs(tuple(sorted(found)), rule)


def election_report_line(elected: int, before_us: ElectedBeforeUs) -> str:
    """The report's line about preferred leaders: how many this run elected, and -- when someone else
    already did -- who ("elected: 0, because Kafka's auto leader rebalance already did")."""
    if not before_us.partitions:
        return f"preferred leaders elected: {elected}"
    shown = ", ".join(f"{t}-{p}" for t, p in before_us.partitions[:10])
    more = f" and {len(before_us.partitions) - 10} more" if len(before_us.partitions) > 10 else ""
    why = "because" if elected == 0 else "and"
    return (
        f"preferred leaders elected: {elected}, {why} {before_us.by} already elected "
        f"{len(before_us.partitions)} ({shown}{more}) before this run's election; {before_us.rule.describe()}"
    )
