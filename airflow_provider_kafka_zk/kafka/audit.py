"""The audit rules, written once: functions of one topic's evidence (plus cluster facts) returning
findings, and a few cluster-wide rules over the ClusterState.

The Spark job groups the evidence by topic and calls :func:`audit_topic` on the executors; a small
check calls it in-process. Inputs are plain data: the ZooKeeper side is the model's ``TopicState``,
the disk side is one :class:`ReplicaDir` per partition directory found by the broker inventory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .deletion import (
    BrokerDeletionFacts,
    Cause,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
    deletion_verdict,
)
from .errors import KafkaFormatError
from .findings import Finding, Severity
from .leadership import blocked_reasons, imbalance_advice, leader_imbalance
from .logdir import DirKind
from .model import ClusterState, TopicState
from .reassignment import BROKER_THROTTLE_KEYS
from .uuid import KafkaUuid
from .versions import KafkaVersion, ibp_uses_topic_ids

UNPARSEABLE = "unparseable"


@dataclass(frozen=True)
class ReplicaDir:
    """One directory found in a broker's log dir (from the inventory), as the rules need it."""

    broker_id: int
    log_dir: str
    name: str
    kind: DirKind | str  # a DirKind, or "unparseable" when Kafka would reject the name
    topic: str | None
    partition: int | None
    topic_id: KafkaUuid | None
    metadata_present: bool = False
    metadata_error: str | None = None
    size_bytes: int = 0
    mtime_ms: int | None = None

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"

    @classmethod
    def from_inventory_row(cls, row: Mapping[str, Any]) -> ReplicaDir:
        """From a ``broker=<id>.parquet`` row (kafka.inventory.PartitionDirInventory.to_row)."""
        kind_text = row.get("kind") or UNPARSEABLE
        kind: DirKind | str = _DIR_KINDS.get(kind_text, UNPARSEABLE)
        topic_id = None
        metadata_error = None
        if row.get("topic_id"):
            try:
                topic_id = KafkaUuid.parse(row["topic_id"])
            except KafkaFormatError as exc:
                metadata_error = str(exc)
        elif row.get("partition_metadata_present"):
            metadata_error = next(
                (e for e in row.get("errors") or () if "partition.metadata" in e),
                "partition.metadata unreadable",
            )
        return cls(
            broker_id=int(row["broker_id"]),
            log_dir=row.get("log_dir") or "",
            name=row.get("dir_name") or "",
            kind=kind,
            topic=row.get("topic"),
            partition=row.get("partition"),
            topic_id=topic_id,
            metadata_present=bool(row.get("partition_metadata_present")),
            metadata_error=metadata_error,
            size_bytes=int(row.get("log_bytes") or row.get("total_bytes") or 0),
            mtime_ms=row.get("mtime_ms"),
        )


_DIR_KINDS = {
    "normal": DirKind.NORMAL,
    "delete": DirKind.DELETE,
    "future": DirKind.FUTURE,
    "stray": DirKind.STRAY,
}
_DIR_KINDS.update({k.name.lower(): k for k in DirKind})


@dataclass(frozen=True)
class BrokerSettings:
    """server.properties values the rules depend on (Kafka's defaults when absent)."""

    broker_id: int
    delete_topic_enable: bool = True
    inter_broker_protocol_version: str | None = None
    min_insync_replicas: int = 1
    leader_imbalance_per_broker_percentage: int = 10
    auto_leader_rebalance_enable: bool = True
    log_segment_delete_delay_ms: int = 60_000


@dataclass(frozen=True)
class ClusterFacts:
    """What every topic's rules may look at besides the topic itself."""

    cluster: str
    now_ms: int
    live_brokers: frozenset[int]
    inventoried: frozenset[int]
    settings: Mapping[int, BrokerSettings] = field(default_factory=dict)
    controller_live: bool = True
    reassign_znode_partitions: frozenset[tuple[str, int]] = frozenset()
    ibp: str | None = None  # lowest inter.broker.protocol.version seen on the brokers

    @property
    def uses_topic_ids(self) -> bool:
        """IBP >= 2.8 on every broker (unknown IBP: assume the release default, i.e. yes)."""
        return self.ibp is None or ibp_uses_topic_ids(KafkaVersion.parse(self.ibp))

    def min_insync_default(self) -> int:
        values = [s.min_insync_replicas for s in self.settings.values()]
        return max(values) if values else 1

    def deletion_facts(self) -> dict[int, BrokerDeletionFacts]:
        brokers = set(self.settings) | set(self.live_brokers)
        return {
            b: BrokerDeletionFacts(
                b,
                live=b in self.live_brokers,
                delete_topic_enable=self.settings.get(b, BrokerSettings(b)).delete_topic_enable,
                delete_delay_ms=self.settings.get(b, BrokerSettings(b)).log_segment_delete_delay_ms,
            )
            for b in brokers
        }


@dataclass(frozen=True)
class TopicEvidence:
    """Everything known about one topic name: its ZooKeeper record (None once deleted) and its dirs."""

    topic: str
    state: TopicState | None
    delete_marker: bool = False
    config_znode: bool = False
    dirs: tuple[ReplicaDir, ...] = ()
    previous_topic_id: KafkaUuid | None = None
    previously_known: bool = False


def audit_topic(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """Run every topic rule; this is the one function the Spark job and in-process checks call."""
    out: list[Finding] = []
    for rule in TOPIC_RULES:
        out.extend(rule(evidence, facts))
    return out


def _finding(
    facts: ClusterFacts, check: str, severity: Severity, summary: str, action: str, **kw: Any
) -> Finding:
    return Finding(
        check=check, severity=severity, cluster=facts.cluster, summary=summary, action=action, **kw
    )


def _normal_dirs(evidence: TopicEvidence) -> list[ReplicaDir]:
    return [d for d in evidence.dirs if d.kind is DirKind.NORMAL]


# ---------------------------------------------------------------------------------------------
# topic ids (KAFKA-14190)
# ---------------------------------------------------------------------------------------------


def check_topic_ids(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    state = evidence.state
    if state is None:
        return []
    out = []
    dirs = [d for d in _normal_dirs(evidence) if d.topic_id is not None]
    disk_ids = sorted({str(d.topic_id) for d in dirs})
    zk_id = state.topic_id
    if zk_id is not None:
        wrong = [d for d in dirs if d.topic_id != zk_id]
        if wrong:
            brokers = sorted({d.broker_id for d in wrong})
            out.append(
                _finding(
                    facts,
                    "topic-id-mismatch",
                    Severity.CRITICAL,
                    f"{len(wrong)} replica(s) of {evidence.topic} hold a topic id in partition.metadata that differs "
                    f"from ZooKeeper's {zk_id} (brokers {brokers})",
                    "A restart of those brokers, or the next leader/ISR change, makes them reject the controller "
                    "(INCONSISTENT_TOPIC_ID): partitions lose their leader/ISR while kafka-topics still looks fine. "
                    "If all replicas agree on one id, write it back into the topic znode (format v3, keep the "
                    "partitions) and move the controller; verify before any broker restart.",
                    topic=evidence.topic,
                    broker_id=brokers[0] if len(brokers) == 1 else None,
                    path=state.path,
                    evidence={
                        "zookeeper_topic_id": str(zk_id),
                        "replicas": [
                            {
                                "broker_id": d.broker_id,
                                "partition": d.partition,
                                "path": d.path,
                                "topic_id": str(d.topic_id),
                            }
                            for d in sorted(wrong, key=lambda d: (d.broker_id, d.partition or 0))
                        ],
                    },
                )
            )
    elif dirs and facts.uses_topic_ids:
        out.append(
            _finding(
                facts,
                "topic-id-missing-in-zookeeper",
                Severity.CRITICAL,
                f"{evidence.topic}: the topic znode has no topic_id while its replicas hold {', '.join(disk_ids)}; "
                "the next controller failover will mint a NEW id and every replica will disagree (KAFKA-14190)",
                f"Before any controller move, write topic_id {disk_ids[0]} back into {state.path} "
                "(format v3, same partitions)"
                if len(disk_ids) == 1
                else "Replicas disagree; resolve which id is right first",
                topic=evidence.topic,
                path=state.path,
                evidence={"ids_on_disk": disk_ids, "znode_format_version": state.format_version},
            )
        )
    if len(disk_ids) > 1:
        by_id: dict[str, list[str]] = defaultdict(list)
        for d in dirs:
            by_id[str(d.topic_id)].append(f"{d.broker_id}:{d.partition}")
        out.append(
            _finding(
                facts,
                "topic-id-replicas-disagree",
                Severity.CRITICAL,
                f"replicas of {evidence.topic} hold {len(disk_ids)} different topic ids",
                "Only one id can match ZooKeeper; the others' partitions will be skipped by their brokers",
                topic=evidence.topic,
                evidence={"replicas_by_id": {k: sorted(v) for k, v in by_id.items()}},
            )
        )
    if (
        evidence.previously_known
        and evidence.previous_topic_id is not None
        and zk_id != evidence.previous_topic_id
    ):
        lost = zk_id is None
        out.append(
            _finding(
                facts,
                "topic-id-lost-since-previous" if lost else "topic-id-changed-since-previous",
                Severity.CRITICAL,
                f"{evidence.topic}: topic_id {evidence.previous_topic_id} in the previous snapshot is "
                + ("gone from the topic znode" if lost else f"now {zk_id}"),
                "An old client or tool rewrote the topic znode (or the topic was re-created): compare with the "
                "replicas' partition.metadata before any broker restart",
                topic=evidence.topic,
                path=state.path,
                evidence={
                    "previous": str(evidence.previous_topic_id),
                    "current": str(zk_id) if zk_id else None,
                },
            )
        )
    if facts.uses_topic_ids:
        without = [d for d in _normal_dirs(evidence) if not d.metadata_present]
        if without:
            out.append(
                _finding(
                    facts,
                    "partition-metadata-missing",
                    Severity.WARNING,
                    f"{len(without)} replica(s) of {evidence.topic} have no partition.metadata although the IBP uses "
                    "topic ids",
                    "Brokers write it on the next LeaderAndIsr; a KRaft migration refuses logs without it",
                    topic=evidence.topic,
                    evidence={"replicas": [{"broker_id": d.broker_id, "path": d.path} for d in without]},
                )
            )
    unreadable = [d for d in _normal_dirs(evidence) if d.metadata_error]
    if unreadable:
        out.append(
            _finding(
                facts,
                "partition-metadata-unreadable",
                Severity.ERROR,
                f"{len(unreadable)} partition.metadata file(s) of {evidence.topic} cannot be parsed",
                "Kafka takes the whole log dir offline on a malformed partition.metadata (KafkaStorageException)",
                topic=evidence.topic,
                evidence={
                    "files": [
                        {"broker_id": d.broker_id, "path": d.path, "error": d.metadata_error}
                        for d in unreadable
                    ]
                },
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# deletion
# ---------------------------------------------------------------------------------------------


def check_deletion(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    state = evidence.state
    if state is not None and not evidence.delete_marker:
        return []  # an existing topic nobody asked to delete (-delete/-stray dirs: see check_dir_kinds)
    topic_dirs = [
        TopicDirectory(
            d.broker_id, d.path, d.partition or 0, d.kind, facts.now_ms - (d.mtime_ms or facts.now_ms)
        )
        for d in evidence.dirs
        if isinstance(d.kind, DirKind) and (state is None or d.kind is DirKind.NORMAL)
    ]
    zk = TopicInZooKeeper(
        topic=evidence.topic,
        topic_znode=state is not None,
        delete_marker=evidence.delete_marker,
        config_znode=evidence.config_znode,
        replicas={p: info.replicas for p, info in state.partitions.items()} if state else {},
        reassigning=bool(
            state
            and (state.is_reassigning or any(t == evidence.topic for t, _ in facts.reassign_znode_partitions))
        ),
    )
    verdict = deletion_verdict(
        zk,
        topic_dirs,
        facts.deletion_facts(),
        inventoried=facts.inventoried,
        controller_live=facts.controller_live,
    )
    if verdict.verdict is Verdict.DELETED:
        return []
    if verdict.verdict in (Verdict.BLOCKED, Verdict.IN_PROGRESS):
        blocked = verdict.verdict is Verdict.BLOCKED
        return [
            _finding(
                facts,
                "deletion-pending",
                Severity.ERROR if blocked else Severity.INFO,
                f"deletion of {evidence.topic} is {verdict.verdict.name.replace('_', ' ').lower()}"
                + (f": {verdict.causes[0].value.replace('_', ' ')}" if verdict.causes else ""),
                verdict.evidence[-1],
                topic=evidence.topic,
                broker_id=verdict.blocking_brokers[0] if len(verdict.blocking_brokers) == 1 else None,
                path=f"/admin/delete_topics/{evidence.topic}" if evidence.delete_marker else None,
                evidence={
                    "verdict": verdict.verdict.value,
                    "causes": [c.value for c in verdict.causes],
                    "blocking_brokers": list(verdict.blocking_brokers),
                    "detail": list(verdict.evidence),
                },
            )
        ]
    out = []
    if {Cause.CONFIG_ZNODE_LEFT, Cause.PARTITIONS_LEFT} & set(verdict.causes):
        out.append(
            _finding(
                facts,
                "deletion-half-done",
                Severity.ERROR,
                f"{evidence.topic} is gone from /brokers/topics but znodes remain",
                "Remove the leftover znodes once no marker exists (a new topic of that name would inherit its config)",
                topic=evidence.topic,
                path=f"/config/topics/{evidence.topic}" if evidence.config_znode else None,
                evidence={"detail": [e for e in verdict.evidence if "znode" in e]},
            )
        )
    for broker_id in sorted({d.broker_id for d in verdict.leftover_dirs if d.kind is DirKind.NORMAL}):
        dirs = [d for d in verdict.leftover_dirs if d.broker_id == broker_id and d.kind is DirKind.NORMAL]
        out.append(
            _finding(
                facts,
                "orphan-partition-dirs",
                Severity.ERROR,
                f"broker {broker_id} holds {len(dirs)} partition director(ies) of {evidence.topic}, a topic ZooKeeper "
                "no longer knows",
                "Move them to a quarantine directory on the broker (a topic re-created with that name would "
                "collide with them), after checking nobody restored them on purpose",
                topic=evidence.topic,
                broker_id=broker_id,
                path=dirs[0].path,
                evidence={"paths": [d.path for d in dirs]},
            )
        )
    return out


def check_dir_kinds(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """-delete directories past the delay and -stray directories, whatever the topic's state."""
    out = []
    for broker_id in sorted({d.broker_id for d in evidence.dirs}):
        on_broker = [d for d in evidence.dirs if d.broker_id == broker_id]
        delay = facts.settings.get(broker_id, BrokerSettings(broker_id)).log_segment_delete_delay_ms
        old = [
            d
            for d in on_broker
            if d.kind is DirKind.DELETE and facts.now_ms - (d.mtime_ms or facts.now_ms) > delay
        ]
        if old:
            oldest_h = max(facts.now_ms - (d.mtime_ms or facts.now_ms) for d in old) / 3_600_000
            out.append(
                _finding(
                    facts,
                    "delete-dirs-past-delay",
                    Severity.WARNING,
                    f"broker {broker_id} holds {len(old)} -delete director(ies) of {evidence.topic} older than its "
                    f"log.segment.delete.delay.ms ({delay} ms; oldest {oldest_h:.1f} h)",
                    "The broker should have removed them: check its log for deletion errors and its disk",
                    topic=evidence.topic,
                    broker_id=broker_id,
                    path=old[0].path,
                    evidence={"paths": [d.path for d in old]},
                )
            )
        stray = [d for d in on_broker if d.kind is DirKind.STRAY]
        if stray:
            out.append(
                _finding(
                    facts,
                    "stray-dirs",
                    Severity.WARNING,
                    f"broker {broker_id} holds {len(stray)} -stray director(ies) of {evidence.topic}",
                    "Kafka never deletes -stray directories: check and remove them by hand",
                    topic=evidence.topic,
                    broker_id=broker_id,
                    path=stray[0].path,
                    evidence={"paths": [d.path for d in stray]},
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# placement and RF=1 exposure
# ---------------------------------------------------------------------------------------------


def check_placement(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    state = evidence.state
    if state is None or evidence.delete_marker:
        return []
    out = []
    found: dict[tuple[int, int], ReplicaDir] = {}
    for d in evidence.dirs:
        if d.kind in (DirKind.NORMAL, DirKind.FUTURE) and d.partition is not None:
            found.setdefault((d.broker_id, d.partition), d)
    extra = [
        d
        for (b, p), d in sorted(found.items())
        if d.kind is DirKind.NORMAL and (p not in state.partitions or b not in state.partitions[p].replicas)
    ]
    for d in extra:
        out.append(
            _finding(
                facts,
                "replica-dir-not-assigned",
                Severity.WARNING,
                f"broker {d.broker_id} holds {d.name} but is not in that partition's replica set",
                "A leftover of an old reassignment or a restored disk: it takes space and a re-assignment back to "
                "this broker would reuse stale data; quarantine it",
                topic=evidence.topic,
                partition=d.partition,
                broker_id=d.broker_id,
                path=d.path,
                evidence={
                    "replicas": list(state.partitions[d.partition].replicas)
                    if d.partition in state.partitions
                    else None
                },
            )
        )
    for p, info in sorted(state.partitions.items()):
        for b in info.replicas:
            if b in facts.inventoried and (b, p) not in found and b not in info.adding_replicas:
                out.append(
                    _finding(
                        facts,
                        "assigned-replica-missing-dir",
                        Severity.ERROR,
                        f"broker {b} is a replica of {evidence.topic}-{p} but has no directory for it",
                        "The replica has no data on that broker: it cannot be in the ISR; check the broker's log dirs "
                        "(a failed disk?) and let it re-replicate",
                        topic=evidence.topic,
                        partition=p,
                        broker_id=b,
                        evidence={"replicas": list(info.replicas)},
                    )
                )
    return out


def check_rf1_exposure(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """Per (topic, broker): RF=1 partitions that go offline when that broker stops (summed per broker later)."""
    state = evidence.state
    if state is None:
        return []
    sizes = {(d.broker_id, d.partition): d.size_bytes for d in _normal_dirs(evidence)}
    by_broker: dict[int, list[int]] = defaultdict(list)
    for p, info in state.partitions.items():
        if len(info.replicas) == 1:
            by_broker[info.replicas[0]].append(p)
    out = []
    for broker_id, partitions in sorted(by_broker.items()):
        live = broker_id in facts.live_brokers
        out.append(
            _finding(
                facts,
                "rf1-exposure",
                Severity.INFO,  # detail; the per-broker sum (rf1-exposure-broker) is the warning
                f"{len(partitions)} RF=1 partition(s) of {evidence.topic} on broker {broker_id} "
                + ("go offline if it stops" if live else "are offline: their broker is down"),
                "Drain them (kafka_zk_pre_maintenance_drain) before stopping the broker, or raise the replication factor",
                topic=evidence.topic,
                broker_id=broker_id,
                evidence={
                    "partitions": sorted(partitions),
                    "bytes": sum(sizes.get((broker_id, p), 0) for p in partitions),
                    "broker_live": live,
                },
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# health
# ---------------------------------------------------------------------------------------------


def check_partition_health(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    state = evidence.state
    if state is None or evidence.delete_marker:
        return []  # a topic being deleted has leader -1 by design; check_deletion covers it
    offline, urp, under_min = [], [], []
    min_isr = int(state.config.get("min.insync.replicas", facts.min_insync_default()))
    for p, info in sorted(state.partitions.items()):
        if info.is_offline(facts.live_brokers):
            offline.append(p)
            continue
        if info.under_replicated:
            urp.append(p)
        if len(info.isr) < min_isr:
            under_min.append(p)
    out = []
    if offline:
        out.append(
            _finding(
                facts,
                "offline-partitions",
                Severity.CRITICAL,
                f"{len(offline)} partition(s) of {evidence.topic} have no live leader",
                "Bring back the brokers holding their replicas; unclean leader election loses data",
                topic=evidence.topic,
                partition=offline[0] if len(offline) == 1 else None,
                evidence={
                    "partitions": offline,
                    "leaders": {str(p): state.partitions[p].leader for p in offline},
                    "replicas": {str(p): list(state.partitions[p].replicas) for p in offline},
                },
            )
        )
    if urp:
        out.append(
            _finding(
                facts,
                "under-replicated",
                Severity.WARNING,
                f"{len(urp)} partition(s) of {evidence.topic} are under-replicated",
                "Check the brokers missing from the ISR",
                topic=evidence.topic,
                evidence={"partitions": urp, "isr": {str(p): list(state.partitions[p].isr) for p in urp}},
            )
        )
    if under_min:
        out.append(
            _finding(
                facts,
                "under-min-isr",
                Severity.ERROR,
                f"{len(under_min)} partition(s) of {evidence.topic} have fewer in-sync replicas than "
                f"min.insync.replicas={min_isr}: acks=all producers fail",
                "Restore the missing replicas' brokers",
                topic=evidence.topic,
                evidence={"partitions": under_min, "min_insync_replicas": min_isr},
            )
        )
    return out


TOPIC_RULES: tuple[Callable[[TopicEvidence, ClusterFacts], list[Finding]], ...] = (
    check_topic_ids,
    check_deletion,
    check_dir_kinds,
    check_placement,
    check_rf1_exposure,
    check_partition_health,
)


# ---------------------------------------------------------------------------------------------
# cluster-wide rules (driver side: over the ClusterState and the per-topic findings)
# ---------------------------------------------------------------------------------------------


def summarize_rf1_exposure(findings: Iterable[Finding], facts: ClusterFacts) -> list[Finding]:
    """One finding per broker adding up the per-topic ``rf1-exposure`` findings."""
    per_broker: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.check == "rf1-exposure" and f.broker_id is not None:
            per_broker[f.broker_id].append(f)
    out = []
    for broker_id, items in sorted(per_broker.items()):
        partitions = sum(len(f.evidence["partitions"]) for f in items)
        size = sum(int(f.evidence["bytes"]) for f in items) if broker_id in facts.inventoried else None
        live = broker_id in facts.live_brokers
        size_text = f"{size} bytes" if size is not None else "size unknown (broker not inventoried)"
        out.append(
            _finding(
                facts,
                "rf1-exposure-broker",
                Severity.WARNING if live else Severity.ERROR,
                f"broker {broker_id}: {partitions} RF=1 partition(s), {size_text} "
                + ("go offline if it stops" if live else "offline now (broker down)"),
                "Run the pre-maintenance drain for this broker before stopping it",
                broker_id=broker_id,
                evidence={
                    "partitions": partitions,
                    "bytes": size,
                    "topics": {f.topic: f.evidence["partitions"] for f in items},
                },
            )
        )
    return out


def audit_cluster(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """Cluster-wide rules: undecodable znodes, leader imbalance, reassignment znode, throttles, coverage."""
    out = []
    for finding in state.findings:
        out.append(
            _finding(
                facts,
                "znode-undecodable",
                Severity.ERROR,
                f"{finding.path}: {finding.message}",
                "Kafka may ignore or fail on this znode; fix it with a versioned write after taking a snapshot",
                path=finding.path,
                evidence={"kind": str(finding.kind)},
            )
        )
    out += _leader_imbalance(state, facts)
    out += _reassignment_znode(state, facts)
    out += _throttles_left(state, facts)
    missing = sorted(facts.live_brokers - facts.inventoried)
    if missing:
        out.append(
            _finding(
                facts,
                "inventory-coverage-partial",
                Severity.WARNING,
                f"brokers {missing} were not inventoried: disk findings cover only {sorted(facts.inventoried)}",
                "Fix SSH access to those brokers; until then nothing on their disks is checked",
                evidence={"missing": missing, "inventoried": sorted(facts.inventoried)},
            )
        )
    if facts.controller_live and state.controller is None:
        out.append(
            _finding(
                facts,
                "no-controller",
                Severity.CRITICAL,
                "no broker holds /controller",
                "Check the brokers' ZooKeeper sessions",
            )
        )
    return out


def _leader_imbalance(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """Kafka's own rule and the controller's settings (it is the controller that rebalances)."""
    controller = None if state.controller is None else state.controller.broker_id
    settings = (
        facts.settings.get(controller, BrokerSettings(-1)) if controller is not None else BrokerSettings(-1)
    )
    reassigning = bool(state.reassign_partitions or state.reassigning_partitions)
    out = []
    for broker_id, imbalance in leader_imbalance(
        state, threshold_percent=settings.leader_imbalance_per_broker_percentage
    ).items():
        if broker_id not in facts.live_brokers or not imbalance.over_threshold:
            continue  # a stopped broker's partitions are reported as offline / under-replicated
        blocked = blocked_reasons(state, imbalance.not_leading)
        shown = ", ".join(f"{t}-{p}" for t, p in imbalance.not_leading[:10])
        more = len(imbalance.not_leading) - 10
        out.append(
            _finding(
                facts,
                "preferred-leader-imbalance",
                Severity.WARNING,
                f"broker {broker_id} leads {imbalance.preferred - len(imbalance.not_leading)} of the "
                f"{imbalance.preferred} partitions it is preferred leader for ({100 * imbalance.ratio:.0f}% "
                f"imbalance > leader.imbalance.per.broker.percentage={imbalance.threshold_percent}): "
                f"{shown}{f' and {more} more' if more > 0 else ''}",
                imbalance_advice(
                    imbalance,
                    auto_rebalance=settings.auto_leader_rebalance_enable,
                    blocked=blocked,
                    reassigning=reassigning,
                ),
                broker_id=broker_id,
                evidence={
                    "preferred": imbalance.preferred,
                    "not_leading": len(imbalance.not_leading),
                    "partitions": [f"{t}-{p}" for t, p in imbalance.not_leading],
                    "threshold_percent": imbalance.threshold_percent,
                    "auto_leader_rebalance_enable": settings.auto_leader_rebalance_enable,
                    "settings_from": "controller" if controller in facts.settings else "Kafka defaults",
                    "not_electable": {f"{t}-{p}": r for (t, p), r in blocked.items()},
                },
            )
        )
    return out


def _reassignment_znode(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    znode = state.reassign_partitions
    if znode is None:
        return []
    problems = []
    for entry in znode.partitions:
        topic = state.topic(entry.topic)
        dead = sorted(b for b in entry.replicas if b not in facts.live_brokers)
        if topic is None or entry.partition not in topic.partitions:
            problems.append(f"{entry.topic}-{entry.partition}: unknown partition")
        elif dead:
            problems.append(
                f"{entry.topic}-{entry.partition}: target names broker(s) {dead} that are not live"
            )
        elif not topic.partitions[entry.partition].is_reassigning and tuple(
            topic.partitions[entry.partition].replicas
        ) != tuple(entry.replicas):
            problems.append(f"{entry.topic}-{entry.partition}: listed but the controller is not moving it")
    if not problems:
        return []
    return [
        _finding(
            facts,
            "reassignment-stale",
            Severity.ERROR,
            f"/admin/reassign_partitions cannot complete: {problems[0]}"
            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
            "A 1.1+ controller only reacts to the znode's creation; fix the cause, then delete and re-create it "
            "(never edit it in place)",
            path="/admin/reassign_partitions",
            evidence={"problems": problems},
        )
    ]


def _throttles_left(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    if state.reassign_partitions is not None or state.reassigning_partitions:
        return []
    out = []
    for entity, config in sorted(state.configs.brokers.items()):
        keys = sorted(k for k in BROKER_THROTTLE_KEYS if k in config)
        if keys:
            out.append(
                _finding(
                    facts,
                    "throttle-left-set",
                    Severity.WARNING,
                    f"broker {entity} still has {', '.join(keys)} set with no reassignment in flight",
                    "Remove them (kafka-configs --delete-config): they cap replication after any future broker outage",
                    broker_id=int(entity) if entity.isdigit() else None,
                    path=f"/config/brokers/{entity}",
                    evidence={k: config[k] for k in keys},
                )
            )
    for topic, replicas in sorted(state.replication_throttles.topic_replicas.items()):
        if replicas.leader or replicas.follower:
            out.append(
                _finding(
                    facts,
                    "throttle-left-set",
                    Severity.WARNING,
                    f"topic {topic} still lists throttled replicas with no reassignment in flight",
                    "Remove leader/follower.replication.throttled.replicas from the topic config",
                    topic=topic,
                    path=f"/config/topics/{topic}",
                )
            )
    return out


def kraft_readiness(findings: Sequence[Finding], state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """Info facts for a KRaft migration that follow from the other findings (3.4+ migration rules)."""
    no_id = sorted(t.name for t in state.topics.values() if t.topic_id is None)
    no_meta = sum(
        len(f.evidence.get("replicas", [])) for f in findings if f.check == "partition-metadata-missing"
    )
    out = []
    if no_id:
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{len(no_id)} topic(s) lack a topic_id: a KRaft migration cannot read them",
                "Give them ids (IBP >= 2.8 controller failover) before migrating",
                evidence={"topics": no_id[:100]},
            )
        )
    if no_meta:
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{no_meta} replica(s) lack partition.metadata: KRaft brokers refuse or set aside such logs",
                "Let a LeaderAndIsr write them (controller move) before migrating",
            )
        )
    return out


def audit(
    state: ClusterState,
    evidence: Iterable[TopicEvidence],
    facts: ClusterFacts,
) -> list[Finding]:
    """The whole audit in-process (small clusters, tests): every topic, then the cluster-wide rules."""
    findings: list[Finding] = []
    for item in evidence:
        findings += audit_topic(item, facts)
    return finish(findings, state, facts)


def finish(topic_findings: list[Finding], state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """Driver-side step shared by the in-process and Spark paths."""
    return [
        *topic_findings,
        *summarize_rf1_exposure(topic_findings, facts),
        *audit_cluster(state, facts),
        *kraft_readiness(topic_findings, state, facts),
    ]


def gather_evidence(
    state: ClusterState,
    dirs: Iterable[ReplicaDir],
    previous: ClusterState | None = None,
) -> list[TopicEvidence]:
    """Group ZooKeeper records and directories by topic name (the Spark job does the same with a groupBy)."""
    by_topic: dict[str, list[ReplicaDir]] = defaultdict(list)
    for d in dirs:
        if d.topic is not None:
            by_topic[d.topic].append(d)
    names = set(state.topics) | set(by_topic) | set(state.pending_deletions) | set(state.configs.topics)
    out = []
    for name in sorted(names):
        prev = previous.topic(name) if previous is not None else None
        out.append(
            TopicEvidence(
                topic=name,
                state=state.topic(name),
                delete_marker=name in state.pending_deletions,
                config_znode=name in state.configs.topics,
                dirs=tuple(by_topic.get(name, ())),
                previous_topic_id=prev.topic_id if prev is not None else None,
                previously_known=prev is not None,
            )
        )
    return out
