"""The audit rules, written once: functions of one topic's evidence (plus cluster facts) returning
findings, and a few cluster-wide rules over the ClusterState.

The Spark job groups the evidence by topic and calls :func:`audit_topic` on the executors; a small
check calls it in-process. Inputs are plain data: the ZooKeeper side is the model's ``TopicState``,
the disk side is one :class:`ReplicaDir` per partition directory found by the broker inventory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from ._bulk import column_builder
from .broker_config import LOG_SEGMENT_DELETE_DELAY_MS, effective_setting
from .deletion import (
    DEFAULT_DELETE_MARGIN_MS,
    BrokerDeletionFacts,
    Cause,
    TopicDirectory,
    TopicInZooKeeper,
    Verdict,
    delete_dir_schedule,
    deletion_verdict,
    running_for_ms,
)
from .deletion_cleanup import cleanup_advice
from .errors import KafkaFormatError
from .findings import APPROVAL_STEP, TOPIC_ID_ROOT_CHECKS, Finding, Severity, brokers_text, trigger_command
from .inventory import age_reference_ms
from .kraft_migration import BrokerMode, MigrationState, migration_state
from .kraft_migration_phase import Phase
from .leadership import AutoRebalance, auto_rebalance, blocked_reasons, imbalance_advice, leader_imbalance
from .logdir import DirKind
from .model import ClusterState, TopicState
from .reassignment import BROKER_THROTTLE_KEYS
from .safety import KRAFT_FINALIZED_PATH, finalization_record_fields
from .topic_id_repair import write_back_effect
from .uuid import ONE_UUID, KafkaUuid
from .versions import KafkaVersion, has_stray_dirs, ibp_uses_topic_ids
from .znodes import ReassignmentEntry

UNPARSEABLE = "unparseable"


@dataclass(frozen=True, slots=True)  # slots: built by the hundred thousand (column_builder)
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
    size_bytes: int = 0  # the .log files only (an empty partition's preallocated indexes are not data)
    mtime_ms: int | None = None
    ctime_ms: int | None = None  # inode change time: a -delete directory's rename

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"

    @property
    def age_reference_ms(self) -> int | None:
        """When this directory's age starts (kafka.inventory.age_reference_ms: a rename leaves mtime alone,
        so a ``-delete`` directory counts from its ctime)."""
        kind = self.kind.name.lower() if isinstance(self.kind, DirKind) else self.kind
        return age_reference_ms(kind, self.mtime_ms, self.ctime_ms)

    def age_ms(self, now_ms: int) -> int:
        """Milliseconds since :attr:`age_reference_ms` (0 when unknown: never "past a delay")."""
        reference = self.age_reference_ms
        return 0 if reference is None else now_ms - reference

    @classmethod
    def from_inventory_row(cls, row: Mapping[str, Any]) -> ReplicaDir:
        """From a ``broker=<id>.parquet`` row (kafka.inventory.PartitionDirInventory.to_row)."""
        [replica_dir] = cls.from_inventory_columns({name: (value,) for name, value in row.items()})
        return replica_dir

    @classmethod
    def from_inventory_columns(cls, columns: Mapping[str, Sequence[Any]]) -> list[ReplicaDir]:
        """One directory per row of an inventory's columns, in their order (the audit reads a broker's
        Parquet file column by column: no dict per row).

        :param columns: ``broker_id`` and any of ``log_dir``, ``dir_name``, ``kind``, ``topic``,
            ``partition``, ``topic_id``, ``partition_metadata_present``, ``errors``, ``log_bytes``,
            ``mtime_ms``, ``ctime_ms`` (epoch ms), equally long; an absent column is None in every row
            (``ctime_ms`` of a file written before it was recorded).

        Every partition of a topic carries the same topic id: each distinct text is parsed once, and
        all its directories share the result (a bad one's error text too).
        """
        count = len(columns["broker_id"])

        def column(name: str) -> Sequence[Any]:
            values = columns.get(name)
            return [None] * count if values is None else values

        texts, present = column("topic_id"), column("partition_metadata_present")
        parsed = {text: _parse_topic_id(text) for text in set(texts) if text}
        no_id = (None, None)
        ids_and_errors = [
            parsed[text] if text else (None, _metadata_file_error(errors)) if metadata_present else no_id
            for text, metadata_present, errors in zip(texts, present, column("errors"), strict=True)
        ]
        kinds = {text: _DIR_KINDS.get(text or UNPARSEABLE, UNPARSEABLE) for text in set(column("kind"))}
        return _replica_dir_columns(
            count,
            [
                list(map(int, columns["broker_id"])),
                [log_dir or "" for log_dir in column("log_dir")],
                [name or "" for name in column("dir_name")],
                list(map(kinds.__getitem__, column("kind"))),
                column("topic"),
                column("partition"),
                [topic_id for topic_id, _ in ids_and_errors],
                list(map(bool, present)),
                [error for _, error in ids_and_errors],
                [int(size or 0) for size in column("log_bytes")],  # never the sparse preallocated indexes
                column("mtime_ms"),
                column("ctime_ms"),
            ],
        )


_replica_dir_columns = column_builder(ReplicaDir)


def _parse_topic_id(text: str) -> tuple[KafkaUuid | None, str | None]:
    """A partition.metadata topic id as the inventory recorded it: (the id, None) or (None, why not)."""
    try:
        return KafkaUuid.parse(text), None
    except KafkaFormatError as exc:
        return None, str(exc)


def _metadata_file_error(errors: Iterable[str] | None) -> str:
    """Why a partition.metadata file that is present gave no topic id (the inventory's error on it)."""
    return next((e for e in errors or () if "partition.metadata" in e), "partition.metadata unreadable")


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
    leader_imbalance_check_interval_seconds: int = 300
    defaulted: tuple[str, ...] = ()  # keys its server.properties does not set (Kafka's default applies)


@dataclass(frozen=True)
class BrokerInfo:
    """What is known of a broker besides ZooKeeper's live registration, for naming it in findings.

    ``host`` comes from its registration (now or in the previous snapshot) or its inventory;
    ``last_seen_ms`` is the time of the previous snapshot when it was registered there (None:
    unknown); ``clean_shutdown`` is whether every log dir holds ``.kafka_cleanshutdown`` (None:
    its disk was not read).
    """

    broker_id: int
    host: str | None = None
    rack: str | None = None
    registered: bool = False
    last_seen_ms: int | None = None
    registered_since_ms: int | None = None
    clean_shutdown: bool | None = None
    kafka_version: str | None = None  # from its jars (inventory), for the log lines it writes
    registered_ctime_ms: int | None = None  # its registration znode's ctime (ZooKeeper's clock), live only


def broker_infos(
    state: ClusterState,
    previous: ClusterState | None = None,
    inventory_summaries: Mapping[int, Mapping[str, Any]] | None = None,
    expected: Iterable[int] = (),
) -> dict[int, BrokerInfo]:
    """Every broker the cluster knows of: registered, named in a replica set, expected by the
    inventory, inventoried, or registered in the previous snapshot while still holding replicas."""
    summaries = inventory_summaries or {}
    assigned = {b for p in state.partitions() for b in p.replicas}
    ids = set(state.brokers) | assigned | {int(b) for b in expected} | {int(b) for b in summaries}
    if previous is not None:
        ids |= {b for b in previous.brokers if b in assigned}
    out = {}
    for b in sorted(ids):
        live = state.brokers.get(b)
        before = previous.brokers.get(b) if previous is not None else None
        summary = summaries.get(b) or {}
        log_dirs = [d for d in summary.get("log_dirs") or () if d.get("exists", True)]
        registration = (live or before).registration if (live or before) is not None else None
        out[b] = BrokerInfo(
            broker_id=b,
            host=(registration.host if registration is not None else None) or summary.get("host"),
            rack=registration.rack if registration is not None else None,
            registered=live is not None,
            last_seen_ms=previous.taken_at_ms if before is not None and previous is not None else None,
            registered_since_ms=(registration.timestamp_ms or None) if registration is not None else None,
            clean_shutdown=all(bool(d.get("clean_shutdown")) for d in log_dirs) if log_dirs else None,
            kafka_version=(summary.get("facts") or {}).get("kafka_version"),
            registered_ctime_ms=live.ctime_ms if live is not None else None,
        )
    return out


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
    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)  # host, last seen (broker_infos)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # /config/brokers/<entity>
    delete_margin_ms: int = DEFAULT_DELETE_MARGIN_MS  # deletion.deletion_verdict's margin
    # each inventoried broker's mode during a KRaft migration (kraft_migration.broker_mode): a broker in
    # KRaft mode serves without a /brokers/ids registration while a KRaft controller acts
    broker_modes: Mapping[int, BrokerMode] = field(default_factory=dict)

    @property
    def uses_topic_ids(self) -> bool:
        """IBP >= 2.8 on every broker (unknown IBP: assume the release default, i.e. yes)."""
        return self.ibp is None or ibp_uses_topic_ids(KafkaVersion.parse(self.ibp))

    def min_insync_default(self) -> int:
        values = [s.min_insync_replicas for s in self.settings.values()]
        return max(values) if values else 1

    def deletion_facts(self) -> dict[int, BrokerDeletionFacts]:
        """What decides each broker's deletions: delete.topic.enable, the log.segment.delete.delay.ms it
        runs with (server.properties or a dynamic broker config) and how long it has been running."""
        return dict(self._deletion_facts)

    @cached_property
    def _deletion_facts(self) -> dict[int, BrokerDeletionFacts]:  # once per facts, not per topic
        out = {}
        for b in set(self.settings) | set(self.live_brokers):
            settings = self.settings.get(b, BrokerSettings(b))
            info = self.brokers.get(b, BrokerInfo(b))
            live = b in self.live_brokers
            delay = effective_setting(
                LOG_SEGMENT_DELETE_DELAY_MS,
                broker_id=b,
                static_value=settings.log_segment_delete_delay_ms,
                dynamic_broker=self.broker_configs.get(str(b)),
                dynamic_default=self.broker_configs.get("<default>"),
                release=info.kafka_version,
            )
            out[b] = BrokerDeletionFacts(
                b,
                live=live,
                delete_topic_enable=settings.delete_topic_enable,
                delete_delay_ms=int(delay.value),
                running_for_ms=(
                    running_for_ms(self.now_ms, info.registered_since_ms, info.registered_ctime_ms)
                    if live
                    else None
                ),
            )
        return out


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
    if is_kraft_metadata_log(evidence):
        return []
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


def _down(brokers: Sequence[int]) -> str:
    return f"{brokers_text(brokers)} {'is' if len(set(brokers)) == 1 else 'are'} down"


def _count(items: Sequence[Any], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _partitions_text(topic: str, partitions: Sequence[int], limit: int = 6) -> str:
    shown = ", ".join(f"{topic}-{p}" for p in partitions[:limit])
    return shown + (f" and {len(partitions) - limit} more" if len(partitions) > limit else "")


# ---------------------------------------------------------------------------------------------
# topic ids (KAFKA-14190)
# ---------------------------------------------------------------------------------------------

TOPIC_ID_REPAIR_DAG = "kafka_zk_topic_id_repair"
"""``airflow_provider_kafka_zk.dags.topic_id_repair.DAG_ID`` (the core imports no Airflow; a test ties them)."""


def repair_commands(conf: Mapping[str, Any]) -> dict[str, str]:
    """The topicId repair DAG's dry run and real run for ``conf`` (its Params: ``cluster``, ``topics``,
    ``strategy``, ``chosen_topic_id``; ``dry_run`` is added)."""
    return {
        "dry_run": trigger_command(TOPIC_ID_REPAIR_DAG, {**conf, "dry_run": True}),
        "run": trigger_command(TOPIC_ID_REPAIR_DAG, {**conf, "dry_run": False}),
    }


def _command_list(commands: Mapping[str, str]) -> list[dict[str, str]]:
    """``evidence["commands"]``: what a report shows as copyable command lines, in order."""
    return [
        {"label": "dry run (changes nothing)", "command": commands["dry_run"]},
        {"label": f"then, once its plan is right ({APPROVAL_STEP})", "command": commands["run"]},
    ]


def _write_back_action(evidence: Mapping[str, Any], topic: str, path: str) -> str:
    """What to do about a topic whose replicas all hold one id: write it back (its finding's evidence).

    One builder for the rule and for :func:`combine_write_backs`, which puts every such topic in one
    run of the repair DAG.
    """
    wb, dry, run = evidence["write_back_id"], evidence["repair_dry_run"], evidence["repair_run"]
    topics = list(evidence["repair_conf"]["topics"])
    moved = list(evidence.get("repair_moves_controller_for") or ())
    together = (
        f" One run repairs {', '.join(topics[:-1])} and {topics[-1]}: {write_back_effect(topics, moved)}"
        + (
            "; a controller move before a missing id is back would mint a new one (KAFKA-14190)."
            if moved and len(moved) < len(topics)
            else "."
        )
        if len(topics) > 1
        else ""
    )
    if evidence.get("zookeeper_topic_id") is None:  # the precursor: nothing rejects anything yet
        moves = " before the run's one controller move, so" if moved else "; no controller move, no restart:"
        return (
            f"Before any controller move, write {wb} back: dry run {dry}, then {run} ({APPROVAL_STEP}). "
            f"write_back puts {wb} into "
            f"{path} (format v3, same partitions){moves} the next controller loads the id instead of minting "
            "one." + together
        )
    running = list(evidence.get("running_brokers") or evidence.get("brokers") or ())
    return (
        f"Write {wb} back: dry run {dry}, read its plan (summary.txt), then {run} ({APPROVAL_STEP}). "
        f"write_back puts {wb} into "
        f"{path} (format v3, partitions unchanged) and moves the controller so the new one sends that id; no "
        f"broker file is touched, no broker restarts. {evidence['until_repaired']}. "
        + (
            f"Do not restart {brokers_text(running)} first: a restarted broker rejects the controller's requests "
            f"for {topic} too and does not rejoin the ISR."
            if running
            else ""
        )
        + together
    )


def combine_write_backs(findings: Sequence[Finding], facts: ClusterFacts) -> list[Finding]:
    """Driver side: one repair-DAG run for every topic whose id can be written back.

    The write-back of a mismatched topic moves the controller; a topic that has no id in ZooKeeper
    yet (the precursor) gets a NEW one at that move. Separate runs, in either order, leave one of them
    broken, so their findings all name one run with every such topic.
    """
    roots = [
        f for f in findings if f.check in TOPIC_ID_ROOT_CHECKS and f.evidence.get("write_back_id") and f.topic
    ]
    if len(roots) < 2:
        return list(findings)
    conf = {"cluster": facts.cluster, "topics": sorted(str(f.topic) for f in roots), "strategy": "write_back"}
    commands = repair_commands(conf)
    # the run moves the controller only for topics whose ZooKeeper id was another (topic_id_repair.plan_repair)
    moved = sorted(str(f.topic) for f in roots if f.evidence.get("zookeeper_topic_id") is not None)
    combined = {}
    for f in roots:
        evidence = {
            **f.evidence,
            "repair_moves_controller_for": moved,
            "repair_conf": conf,
            "repair_dry_run": commands["dry_run"],
            "repair_run": commands["run"],
            "commands": _command_list(commands),
        }
        combined[id(f)] = replace(
            f, evidence=evidence, action=_write_back_action(evidence, str(f.topic), f.path or "")
        )
    return [combined.get(id(f), f) for f in findings]


def topic_id_log_line(versions: Iterable[str | None], partition: str, in_memory: str, received: str) -> str:
    """What the brokers' state-change.log says (ERROR) when the controller sends another topic id.

    3.x: ``Topic ID in memory: X does not match the topic ID for partition T-P received: Y.``; 2.8.x:
    ``Topic Id in memory: X does not match the topic Id for partition T-P provided in the request:
    Y.`` (``core/src/main/scala/kafka/server/ReplicaManager.scala`` ``becomeLeaderOrFollower`` at 2.8.2
    and 3.3.1; the 3.x line was seen on a real 3.3.1 cluster). ``INCONSISTENT_TOPIC_ID`` is only the
    response's error code: no broker logs it, so a search for it finds nothing. Unknown versions: both
    lines.
    """
    new = f"Topic ID in memory: {in_memory} does not match the topic ID for partition {partition} received: {received}."
    old = (
        f"Topic Id in memory: {in_memory} does not match the topic Id for partition {partition} provided in "
        f"the request: {received}."
    )
    lines = set()
    for text in versions:
        try:
            version = KafkaVersion.parse(text) if text else None
        except KafkaFormatError:
            version = None
        lines.add(None if version is None else (new if version.at_least("3.0") else old))
    if lines == {new} or lines == {old}:
        return f'"{lines.pop()}"'
    return f'"{new}" (2.8.x brokers: "{old}")'


def _ids_by_broker(dirs: Sequence[ReplicaDir], topic_id: str) -> list[int]:
    return sorted({d.broker_id for d in dirs if str(d.topic_id) == topic_id})


def check_topic_ids(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """KAFKA-14190 and its precursor, with the ids, the repair DAG's commands and the broker log line.

    ZooKeeper's ``topic_id`` is what the controller sends; ``partition.metadata`` is what each
    replica's log holds and never rewrites. When they differ the brokers reject the controller's
    next leader/ISR change for the topic. When every replica read agrees, writing that id back into
    the topic znode (``write_back``) repairs it without touching a broker; otherwise only removing
    the differing files with broker restarts (``file_reset``) does.
    """
    state = evidence.state
    if state is None:
        return []
    out = []
    topic = evidence.topic
    dirs = [d for d in _normal_dirs(evidence) if d.topic_id is not None]
    disk_ids = sorted({str(d.topic_id) for d in dirs})
    zk_id = state.topic_id
    assigned = {b for info in state.partitions.values() for b in info.replicas}
    unread = sorted(assigned - set(facts.inventoried))
    unread_note = (
        f" ({brokers_text(unread)} not read: the repair DAG inventories {'it' if len(unread) == 1 else 'them'} "
        "again before any write)"
        if unread
        else ""
    )
    if zk_id is not None:
        wrong = [d for d in dirs if d.topic_id != zk_id]
        if wrong:
            brokers = sorted({d.broker_id for d in wrong})
            example = min(wrong, key=lambda d: (d.partition or 0, d.broker_id))
            log_line = topic_id_log_line(
                (facts.brokers[b].kafka_version if b in facts.brokers else None for b in brokers),
                f"{topic}-{example.partition}",
                str(example.topic_id),
                str(zk_id),
            )
            running = [b for b in brokers if b in facts.live_brokers]
            stopped = [b for b in brokers if b not in facts.live_brokers]
            consequence = (
                f"Until then {brokers_text(running)} reject{'s' if len(running) == 1 else ''} every leader/ISR "
                f"change the controller sends for {topic} while kafka-topics --describe still looks healthy; "
                f"their state-change.log shows ERROR {log_line}"
                if running
                else f"The brokers' state-change.log shows ERROR {log_line}"
            ) + (
                f". {brokers_text(stopped).capitalize()} {'is' if len(stopped) == 1 else 'are'} down and "
                f"would reject them too once started: start {'it' if len(stopped) == 1 else 'them'} after "
                "the repair"
                if stopped
                else ""
            )
            if len(disk_ids) == 1:  # every replica read holds the same id: write it back, no restart
                write_back: str | None = disk_ids[0]
                conf: dict[str, Any] = {"cluster": facts.cluster, "topics": [topic], "strategy": "write_back"}
                commands = repair_commands(conf)
                what = (
                    f"topicId mismatch on {topic} (KAFKA-14190): ZooKeeper's topic_id is {zk_id}, but every replica "
                    f"read ({len(wrong)} on {brokers_text(brokers)}) holds {write_back} in partition.metadata; "
                    f"write {write_back} back into {state.path}{unread_note}"
                )
                action = ""  # _write_back_action, from the evidence below
            else:  # the replicas disagree among themselves: only a file reset (with restarts) fixes it
                write_back = None
                conf = {"cluster": facts.cluster, "topics": [topic], "strategy": "file_reset"}
                commands = repair_commands(conf)
                held = "; ".join(f"{i} on {brokers_text(_ids_by_broker(dirs, i))}" for i in disk_ids)
                what = (
                    f"topicId mismatch on {topic} (KAFKA-14190): ZooKeeper's topic_id is {zk_id}, the replicas hold "
                    f"{held}; no single id to write back: reset the {len(wrong)} replica(s) that differ{unread_note}"
                )
                action = (
                    f"Dry run {commands['dry_run']}, then {commands['run']}: file_reset removes partition.metadata "
                    f"only on the replicas whose id is not {zk_id} ({brokers_text(brokers)}) and restarts those "
                    "brokers one at a time (restart_command), the controller last, each gated on its ISR. To keep "
                    f'another id, add "chosen_topic_id" (one the replicas hold). {consequence}.'
                )
            mismatch = _finding(
                facts,
                "topic-id-mismatch",
                Severity.CRITICAL,
                what,
                action,
                topic=topic,
                broker_id=brokers[0] if len(brokers) == 1 else None,
                path=state.path,
                evidence={
                    "zookeeper_topic_id": str(zk_id),
                    "ids_on_disk": disk_ids,
                    "write_back_id": write_back,
                    "repair_conf": conf,
                    "repair_dry_run": commands["dry_run"],
                    "repair_run": commands["run"],
                    "commands": _command_list(commands),
                    "log_line": log_line,
                    "until_repaired": consequence,
                    "running_brokers": running,
                    "brokers": brokers,
                    "unread_brokers": unread,
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
            if write_back is not None:
                mismatch = replace(mismatch, action=_write_back_action(mismatch.evidence, topic, state.path))
            out.append(mismatch)
    elif dirs and facts.uses_topic_ids:
        brokers = sorted({d.broker_id for d in dirs})
        if len(disk_ids) == 1:
            write_back = disk_ids[0]
            conf = {"cluster": facts.cluster, "topics": [topic], "strategy": "write_back"}
            commands = repair_commands(conf)
            what = (
                f"{topic}: the topic znode {state.path} has no topic_id while every replica read ({len(dirs)} on "
                f"{brokers_text(brokers)}) holds {write_back}; the next controller failover mints a NEW id and "
                f"every replica will disagree (KAFKA-14190): write {write_back} back{unread_note}"
            )
            action = ""  # _write_back_action, from the evidence below
        else:
            write_back = None
            counts = {i: sum(1 for d in dirs if str(d.topic_id) == i) for i in disk_ids}
            keep = max(disk_ids, key=lambda i: (counts[i], i))
            conf = {
                "cluster": facts.cluster,
                "topics": [topic],
                "strategy": "file_reset",
                "chosen_topic_id": keep,
            }
            commands = repair_commands(conf)
            held = "; ".join(f"{i} on {brokers_text(_ids_by_broker(dirs, i))}" for i in disk_ids)
            what = (
                f"{topic}: the topic znode {state.path} has no topic_id and its replicas hold {len(disk_ids)} "
                f"different ids ({held}); the next controller failover mints a new one (KAFKA-14190){unread_note}"
            )
            action = (
                f"Before any controller move, choose the id the replicas keep ({keep} is on {counts[keep]} of "
                f"{len(dirs)} replicas read) and reset the others: dry run {commands['dry_run']}, then "
                f"{commands['run']}: file_reset removes partition.metadata on the replicas holding another id and "
                "restarts their brokers one at a time, the controller last."
            )
        precursor = _finding(
            facts,
            "topic-id-missing-in-zookeeper",
            Severity.CRITICAL,
            what,
            action,
            topic=topic,
            path=state.path,
            evidence={
                "zookeeper_topic_id": None,
                "ids_on_disk": disk_ids,
                "write_back_id": write_back,
                "znode_format_version": state.format_version,
                "repair_conf": conf,
                "repair_dry_run": commands["dry_run"],
                "repair_run": commands["run"],
                "commands": _command_list(commands),
                "brokers": brokers,
                "unread_brokers": unread,
            },
        )
        if write_back is not None:
            precursor = replace(precursor, action=_write_back_action(precursor.evidence, topic, state.path))
        out.append(precursor)
    if len(disk_ids) > 1:
        by_id: dict[str, list[str]] = defaultdict(list)
        for d in dirs:
            by_id[str(d.topic_id)].append(f"{d.broker_id}:{d.partition}")
        out.append(
            _finding(
                facts,
                "topic-id-replicas-disagree",
                Severity.CRITICAL,
                f"replicas of {topic} hold {len(disk_ids)} different topic ids: "
                + "; ".join(f"{i} on {brokers_text(_ids_by_broker(dirs, i))}" for i in disk_ids),
                "Only one id can match ZooKeeper's; the brokers holding another reject the controller for those "
                f"partitions. The topicId finding of {topic} has the repair DAG's file_reset command",
                topic=topic,
                evidence={"replicas_by_id": {k: sorted(v) for k, v in by_id.items()}},
            )
        )
    out += _topic_id_since_previous(evidence, facts, dirs, unread)
    if facts.uses_topic_ids:
        without = [d for d in _normal_dirs(evidence) if not d.metadata_present]
        if without:
            out.append(
                _finding(
                    facts,
                    "partition-metadata-missing",
                    Severity.WARNING,
                    f"{len(without)} replica(s) of {topic} have no partition.metadata although the IBP uses "
                    f"topic ids ({', '.join(d.path for d in without[:3])}{' ...' if len(without) > 3 else ''})",
                    "Brokers write it on the next LeaderAndIsr; a KRaft migration refuses logs without it",
                    topic=topic,
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
                f"{len(unreadable)} partition.metadata file(s) of {topic} cannot be parsed: "
                + ", ".join(f"{d.path}/partition.metadata on broker {d.broker_id}" for d in unreadable[:3])
                + (" ..." if len(unreadable) > 3 else ""),
                "Kafka takes the whole log dir offline on a malformed partition.metadata (KafkaStorageException)",
                topic=topic,
                evidence={
                    "files": [
                        {"broker_id": d.broker_id, "path": d.path, "error": d.metadata_error}
                        for d in unreadable
                    ]
                },
            )
        )
    return out


def _topic_id_since_previous(
    evidence: TopicEvidence, facts: ClusterFacts, dirs: Sequence[ReplicaDir], unread: Sequence[int]
) -> list[Finding]:
    """ZooKeeper's topic_id changed or vanished since the previous snapshot.

    A change *towards* the replicas (every replica read now holds ZooKeeper's new id) is a
    resolved incident -- what a correct write-back repair leaves -- and is reported as such (info),
    not paged. A change away from them, or one no replica was read for, is critical.
    """
    state = evidence.state
    previous = evidence.previous_topic_id
    if state is None or not evidence.previously_known or previous is None or state.topic_id == previous:
        return []
    topic, zk_id = evidence.topic, state.topic_id
    brokers = sorted({d.broker_id for d in dirs})
    base = {"previous": str(previous), "current": str(zk_id) if zk_id else None}
    if zk_id is not None and dirs and all(d.topic_id == zk_id for d in dirs):
        return [
            _finding(
                facts,
                "topic-id-resolved-since-previous",
                Severity.WARNING if unread else Severity.INFO,
                f"{topic}: topicId incident resolved: ZooKeeper's topic_id changed from {previous} (previous "
                f"snapshot) to {zk_id}, the id every replica read holds ({len(dirs)} on {brokers_text(brokers)})"
                + (f"; {brokers_text(unread)} not read" if unread else ""),
                (
                    f"Confirm {brokers_text(unread)} hold {zk_id} too (their partition.metadata) once their disks "
                    "can be read"
                    if unread
                    else "Nothing to do: ZooKeeper and every replica agree (a topicId repair's write_back leaves this)"
                ),
                topic=topic,
                path=state.path,
                evidence={
                    **base,
                    "resolved": True,
                    "replicas_agreeing": len(dirs),
                    "unread_brokers": list(unread),
                },
            )
        ]
    lost = zk_id is None
    on_disk = sorted({str(d.topic_id) for d in dirs})
    return [
        _finding(
            facts,
            "topic-id-lost-since-previous" if lost else "topic-id-changed-since-previous",
            Severity.CRITICAL,
            f"{topic}: topic_id {previous} in the previous snapshot is "
            + ("gone from the topic znode" if lost else f"now {zk_id}")
            + (
                f"; the replicas read hold {', '.join(on_disk)}" if on_disk else "; no replica of it was read"
            ),
            (
                "An old client or tool rewrote the topic znode (or the topic was re-created): see the topicId "
                f"finding of {topic} for the repair"
                if on_disk
                else f"An old client or tool rewrote {state.path} (or the topic was re-created): compare with the "
                f"replicas' partition.metadata on {brokers_text(sorted({b for i in state.partitions.values() for b in i.replicas}))} "
                "before any broker restart or controller move"
            ),
            topic=topic,
            path=state.path,
            evidence={**base, "resolved": False, "ids_on_disk": on_disk},
        )
    ]


# ---------------------------------------------------------------------------------------------
# deletion
# ---------------------------------------------------------------------------------------------


def check_deletion(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    state = evidence.state
    if state is not None and not evidence.delete_marker:
        return []  # an existing topic nobody asked to delete (-delete/-stray dirs: see check_dir_kinds)
    topic_dirs = [
        TopicDirectory(d.broker_id, d.path, d.partition or 0, d.kind, d.age_ms(facts.now_ms))
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
        margin_ms=facts.delete_margin_ms,
    )
    if verdict.verdict is Verdict.DELETED:
        return []
    if verdict.verdict in (Verdict.BLOCKED, Verdict.IN_PROGRESS, Verdict.PENDING_DELETE_DELAY):
        blocked = verdict.verdict is Verdict.BLOCKED
        down = sorted(b for b in verdict.blocking_brokers if b not in facts.live_brokers)
        return [
            _finding(
                facts,
                "deletion-pending",
                Severity.ERROR if blocked else Severity.INFO,
                (f"{_down(down)}: " if down else "")
                + f"deletion of {evidence.topic} is {verdict.verdict.name.replace('_', ' ').lower()}"
                + (f": {verdict.causes[0].value.replace('_', ' ')}" if verdict.causes else ""),
                verdict.evidence[-1],
                topic=evidence.topic,
                broker_id=verdict.blocking_brokers[0] if len(verdict.blocking_brokers) == 1 else None,
                path=f"/admin/delete_topics/{evidence.topic}" if evidence.delete_marker else None,
                evidence={
                    "verdict": verdict.verdict.value,
                    "causes": [c.value for c in verdict.causes],
                    "blocking_brokers": list(verdict.blocking_brokers),
                    "down_brokers": down if set(down) == set(verdict.blocking_brokers) else [],
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
                "Remove the leftover znodes once no marker exists (a new topic of that name would inherit its config). "
                + cleanup_advice(facts.cluster, [evidence.topic]),
                topic=evidence.topic,
                path=f"/config/topics/{evidence.topic}" if evidence.config_znode else None,
                evidence={"detail": [e for e in verdict.evidence if "znode" in e]},
            )
        )
    sizes = {d.path: d.size_bytes for d in evidence.dirs}
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
                "collide with them), after checking nobody restored them on purpose, "
                + (
                    f"while broker {broker_id} is stopped: it loaded them as logs at its start and holds their "
                    "files open, so moving them under it takes the whole log dir offline "
                    "(the cleanup leaves them while it runs)"
                    if broker_id in facts.live_brokers
                    else f"before broker {broker_id} starts again"
                )
                + ". "
                + cleanup_advice(facts.cluster, [evidence.topic]),
                topic=evidence.topic,
                broker_id=broker_id,
                path=dirs[0].path,
                evidence={
                    "paths": [d.path for d in dirs],
                    "bytes": sum(sizes.get(d.path, 0) for d in dirs),  # .log bytes, as the inventory counts
                },
            )
        )
    return out


def _knows_stray_dirs(release: str) -> bool:
    try:
        return has_stray_dirs(KafkaVersion.parse(release))
    except KafkaFormatError:
        return True  # an unreadable release: the newer rule, as when it is unknown


def check_dir_kinds(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """-delete directories Kafka should have removed by now, and -stray directories, whatever the topic's state.

    A ``-delete`` directory is left over only once its broker's own ``kafka-delete-logs`` schedule
    plus the margin has passed (:func:`~.deletion.delete_dir_schedule`, the rule the deletion
    verdict uses): until then Kafka removes it by itself, and a stopped broker does when it starts.
    """
    out = []
    deletion = facts.deletion_facts()
    # only these two kinds give findings: grouped by broker in one pass (not one pass a broker)
    by_broker: dict[int, list[ReplicaDir]] = {}
    for d in evidence.dirs:
        if d.kind is DirKind.DELETE or d.kind is DirKind.STRAY:
            by_broker.setdefault(d.broker_id, []).append(d)
    for broker_id in sorted(by_broker):
        on_broker = by_broker[broker_id]
        broker = deletion.get(broker_id, BrokerDeletionFacts(broker_id, live=broker_id in facts.live_brokers))
        delay = broker.delete_delay_ms
        # a -delete directory's age counts from its rename (ctime): a rename keeps the mtime, so a
        # directory renamed seconds ago with week-old segments is not past the delay
        old = [
            d
            for d in on_broker
            if d.kind is DirKind.DELETE
            and delete_dir_schedule(d.age_ms(facts.now_ms), broker, facts.delete_margin_ms).overdue
        ]
        if old:
            oldest_h = max(d.age_ms(facts.now_ms) for d in old) / 3_600_000
            out.append(
                _finding(
                    facts,
                    "delete-dirs-past-delay",
                    Severity.WARNING,
                    f"broker {broker_id} holds {len(old)} -delete director(ies) of {evidence.topic} that its "
                    f"kafka-delete-logs task should have removed (log.segment.delete.delay.ms={delay} ms after the "
                    f"rename, + {facts.delete_margin_ms} ms; oldest {oldest_h:.1f} h since its rename): "
                    + ", ".join(d.path for d in old[:3])
                    + (" ..." if len(old) > 3 else ""),
                    f'Broker {broker_id} should have removed them: look for "Exception while deleting" and '
                    f"{old[0].path} in its server.log (read-only or failing disk, permissions). They hold no live "
                    "replica any more: once the cause is fixed, removing them by hand frees the space (a restart "
                    "also queues them again)",
                    topic=evidence.topic,
                    broker_id=broker_id,
                    path=old[0].path,
                    evidence={
                        "paths": [d.path for d in old],
                        "delay_ms": delay,
                        "margin_ms": facts.delete_margin_ms,
                        "bytes": sum(d.size_bytes for d in old),
                        "dirs": [
                            {
                                "path": d.path,
                                "age_ms": d.age_ms(facts.now_ms),
                                "age_from": "ctime" if d.ctime_ms is not None else "mtime",
                            }
                            for d in old
                        ],
                    },
                )
            )
        stray = [d for d in on_broker if d.kind is DirKind.STRAY]
        if stray:
            info = facts.brokers.get(broker_id)
            release = info.kafka_version if info is not None else None
            # -stray exists from 3.6.1; an older broker cannot parse the name (its partition part is
            # not a number) and fails to load the log dir (``LocalLog.parseTopicPartitionName``, 3.6.0)
            too_old = release is not None and not _knows_stray_dirs(release)
            out.append(
                _finding(
                    facts,
                    "stray-dirs",
                    Severity.ERROR if too_old else Severity.WARNING,
                    f"broker {broker_id} holds {len(stray)} -stray director(ies) of {evidence.topic}"
                    + (f" that Kafka {release} cannot parse (-stray exists from 3.6.1)" if too_old else ""),
                    (
                        f"Kafka {release} refuses to load a log dir holding such a name: move them out of the "
                        "log dir before the broker restarts"
                        if too_old
                        else "Kafka never deletes -stray directories: check and remove them by hand"
                    ),
                    topic=evidence.topic,
                    broker_id=broker_id,
                    path=stray[0].path,
                    evidence={"paths": [d.path for d in stray], "bytes": sum(d.size_bytes for d in stray)},
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
                "this broker would reuse stale data; quarantine it "
                + (
                    f"while broker {d.broker_id} is stopped (it holds the files of every log it loaded open: moving "
                    "one under it takes the whole log dir offline)"
                    if d.broker_id in facts.live_brokers
                    else f"before broker {d.broker_id} starts again"
                ),
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
        partitions.sort()
        live = broker_id in facts.live_brokers
        size = sum(sizes.get((broker_id, p), 0) for p in partitions)
        listed = _partitions_text(evidence.topic, partitions)
        if live:
            what = (
                f"{_count(partitions, 'RF=1 partition')} of {evidence.topic} on broker {broker_id} ({listed}) "
                f"{'goes' if len(partitions) == 1 else 'go'} offline if it stops"
            )
        else:
            what = (
                f"broker {broker_id} is down: {_count(partitions, 'RF=1 partition')} of {evidence.topic} ({listed}) "
                f"{'is' if len(partitions) == 1 else 'are'} offline"
            )
        out.append(
            _finding(
                facts,
                "rf1-exposure",
                Severity.INFO,  # detail; the per-broker sum (rf1-exposure-broker) is the warning
                what,
                rf1_advice(broker_id, facts, size if broker_id in facts.inventoried else None),
                topic=evidence.topic,
                broker_id=broker_id,
                evidence={
                    "partitions": partitions,
                    "bytes": size,
                    "broker_live": live,
                    "down_brokers": [] if live else [broker_id],
                },
            )
        )
    return out


def rf1_advice(broker_id: int, facts: ClusterFacts, size: int | None) -> str:
    """What to do about a broker's RF=1 partitions: it depends on whether the broker runs now."""
    if broker_id in facts.live_brokers:
        conf = {"cluster": facts.cluster, "brokers": [broker_id], "scope": "rf1"}
        dry = trigger_command("kafka_zk_pre_maintenance_drain", {**conf, "dry_run": True})
        run = trigger_command("kafka_zk_pre_maintenance_drain", {**conf, "dry_run": False})
        return (
            f"Before stopping broker {broker_id}, drain them: dry run {dry}, then {run} ({APPROVAL_STEP}); "
            "or raise their "
            "replication factor"
        )
    data = f"({size} bytes)" if size is not None else "(size unknown: its disk was not read)"
    return (
        f"They are offline now: their only copy {data} is on broker {broker_id}'s disk. Start broker {broker_id} to "
        "bring them back, and keep that disk (replacing it loses them). The pre-maintenance drain cannot move "
        "them: a reassignment copies from a live replica and there is none"
    )


# ---------------------------------------------------------------------------------------------
# health
# ---------------------------------------------------------------------------------------------


def check_partition_health(evidence: TopicEvidence, facts: ClusterFacts) -> list[Finding]:
    """Offline, under-min-ISR and under-replicated partitions, one finding per topic and cause.

    Causes are concrete: stopped brokers whose return fixes the partition (``down_brokers`` and
    ``partitions_by_down_broker`` in the evidence, what :func:`broker_down_root_causes` adds up),
    registered brokers out of the ISR, or (under-min-ISR) a replication factor below
    ``min.insync.replicas``. For an offline partition the brokers named are its last in-sync
    replicas that are down: Kafka keeps the last ISR member when the leader goes to -1, and only
    that broker's return elects a leader without losing data.
    """
    state = evidence.state
    if state is None or evidence.delete_marker:
        return []  # a topic being deleted has leader -1 by design; check_deletion covers it
    live = facts.live_brokers
    min_isr = int(state.config.get("min.insync.replicas", facts.min_insync_default()))
    # (check, cause) -> partition -> the brokers it names
    groups: dict[tuple[str, str], dict[int, tuple[int, ...]]] = defaultdict(dict)
    for p, info in sorted(state.partitions.items()):
        if info.is_offline(live):
            needed = tuple(b for b in info.isr if b not in live) or tuple(
                b for b in info.replicas if b not in live
            )
            groups[("offline-partitions", "broker-down" if needed else "no-leader")][p] = needed
            continue
        target = info.target_replicas or info.replicas
        missing = tuple(b for b in target if b not in info.isr)
        down = tuple(b for b in missing if b not in live)
        lagging = tuple(b for b in missing if b in live)
        cause = "out-of-isr" if lagging else "broker-down"
        if info.under_replicated:
            groups[("under-replicated", cause)][p] = lagging or down
        if len(info.isr) < min_isr:
            if len(target) < min_isr:
                groups[("under-min-isr", "replication-factor")][p] = ()
            else:
                groups[("under-min-isr", cause)][p] = lagging or down
    topic = evidence.topic
    out = []
    for (check, cause), named in sorted(
        groups.items(), key=lambda kv: (CHECK_ORDER.index(kv[0][0]), kv[0][1])
    ):
        parts = sorted(named)
        brokers = tuple(sorted({b for bs in named.values() for b in bs}))
        listed = _partitions_text(topic, parts)
        n = _count(parts, "partition")
        has, are = ("has", "is") if len(parts) == 1 else ("have", "are")
        them = "it is" if len(brokers) == 1 else "they are"
        evidence_extra: dict[str, Any] = {}
        if check == "offline-partitions":
            severity = Severity.CRITICAL
            others = sorted({b for p in parts for b in state.partitions[p].replicas if b in live})
            if cause == "broker-down":
                what = (
                    f"{_down(brokers)}: {n} of {topic} {has} no leader ({listed}); {brokers_text(brokers)} "
                    f"{'holds' if len(brokers) == 1 else 'hold'} the last in-sync replica"
                )
                action = (
                    f"Start {brokers_text(brokers)} (see broker-down): a leader is elected as soon as {them} registered. "
                    + (
                        f"Unclean leader election would elect out-of-sync {brokers_text(others)} and lose the records "
                        "only the last in-sync replica holds."
                        if others
                        else "No replica is on a running broker: nothing else brings them back."
                    )
                )
            else:
                what = f"{n} of {topic} {has} no leader ({listed}) although every replica is registered"
                action = (
                    "Check the controller's log (controller.log, state-change.log) for these partitions; unclean "
                    "leader election loses data"
                )
            evidence_extra = {
                "leaders": {str(p): state.partitions[p].leader for p in parts},
                "isr": {str(p): list(state.partitions[p].isr) for p in parts},
                "replicas": {str(p): list(state.partitions[p].replicas) for p in parts},
            }
        elif check == "under-replicated":
            severity = Severity.WARNING
            if cause == "broker-down":
                what = f"{_down(brokers)}: {n} of {topic} {are} under-replicated ({listed})"
                action = f"They regain their replicas once {brokers_text(brokers)} {'is' if len(brokers) == 1 else 'are'} back and caught up (see broker-down)"
            else:
                what = f"{n} of {topic} {are} under-replicated ({listed}): registered {brokers_text(brokers)} out of the ISR"
                action = (
                    f"Check {brokers_text(brokers)}: replica fetcher errors or lag in server.log, disk, network "
                    "(UnderReplicatedPartitions on the leaders)"
                )
            evidence_extra = {"isr": {str(p): list(state.partitions[p].isr) for p in parts}}
        else:
            severity = Severity.ERROR
            if cause == "replication-factor":
                rf = min(
                    len(state.partitions[p].target_replicas or state.partitions[p].replicas) for p in parts
                )
                what = (
                    f"replication factor {rf} < min.insync.replicas={min_isr}: acks=all producers to {listed} always "
                    "fail (NOT_ENOUGH_REPLICAS), whichever brokers are up"
                )
                action = (
                    f"Set min.insync.replicas={rf} on {topic} (kafka-configs --alter --entity-type topics --entity-name "
                    f"{topic} --add-config min.insync.replicas={rf}) or raise its replication factor "
                    "(kafka-reassign-partitions with longer replica lists)"
                )
            elif cause == "broker-down":
                what = (
                    f"{_down(brokers)}: {n} of {topic} {has} fewer in-sync replicas than min.insync.replicas="
                    f"{min_isr} ({listed}): acks=all producers fail (NOT_ENOUGH_REPLICAS)"
                )
                action = (
                    f"Start {brokers_text(brokers)} (see broker-down): producers recover once {them} back in the "
                    "ISR. Lowering min.insync.replicas meanwhile trades durability for availability"
                )
            else:
                what = (
                    f"{n} of {topic} {has} fewer in-sync replicas than min.insync.replicas={min_isr} ({listed}): "
                    f"registered {brokers_text(brokers)} out of the ISR; acks=all producers fail"
                )
                action = f"Check why {brokers_text(brokers)} cannot keep up: replica fetcher errors in server.log, disk, network"
            evidence_extra = {
                "min_insync_replicas": min_isr,
                "isr": {str(p): list(state.partitions[p].isr) for p in parts},
            }
        down_cause = cause == "broker-down"
        out.append(
            _finding(
                facts,
                check,
                severity,
                what,
                action,
                topic=topic,
                partition=parts[0] if len(parts) == 1 else None,
                broker_id=brokers[0] if len(brokers) == 1 else None,
                evidence={
                    "partitions": parts,
                    "cause": cause,
                    **evidence_extra,
                    "down_brokers": list(brokers) if down_cause else [],
                    "partitions_by_down_broker": (
                        {str(b): [p for p in parts if b in named[p]] for b in brokers} if down_cause else {}
                    ),
                    **({} if down_cause else {"out_of_isr_registered": list(brokers)}),
                },
            )
        )
    return out


CHECK_ORDER = ("offline-partitions", "under-min-isr", "under-replicated")


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
        size_text = f"{size} bytes" if size is not None else "size unknown: its disk was not read"
        listed = ", ".join(
            _partitions_text(f.topic or "", f.evidence["partitions"], limit=4)
            for f in sorted(items, key=lambda f: f.topic or "")
        )
        out.append(
            _finding(
                facts,
                "rf1-exposure-broker",
                Severity.WARNING if live else Severity.ERROR,
                (
                    f"broker {broker_id}: {partitions} RF=1 partition(s) ({listed}; {size_text}) go offline if it stops"
                    if live
                    else f"broker {broker_id} is down: its {partitions} RF=1 partition(s) ({listed}; {size_text}) are "
                    "offline now"
                ),
                rf1_advice(broker_id, facts, size),
                broker_id=broker_id,
                evidence={
                    "partitions": partitions,
                    "bytes": size,
                    "topics": {f.topic: f.evidence["partitions"] for f in items},
                    "broker_live": live,
                    "down_brokers": [] if live else [broker_id],
                },
            )
        )
    return out


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def broker_down_root_causes(
    findings: Sequence[Finding], state: ClusterState, facts: ClusterFacts
) -> list[Finding]:
    """One ``broker-down`` finding per broker that holds replicas (or is known) but is not registered.

    It names the broker (id, host, rack, when last seen registered, whether it shut down cleanly)
    and adds up the findings it explains -- those whose ``evidence["down_brokers"]`` names it,
    written by the rules themselves (offline, under-min-ISR, under-replicated, blocked deletions,
    RF=1 data) -- so the report can put the one action that clears them first.
    """
    replicas: dict[int, int] = defaultdict(int)
    for info in state.partitions():
        for b in info.replicas:
            replicas[b] += 1
    down = sorted((set(replicas) | set(facts.brokers)) - set(facts.live_brokers))
    migration = migration_state(state, facts.broker_modes) if down else None
    kraft_active = migration is not None and migration.kraft_controller_active
    out = []
    for b in down:
        info = facts.brokers.get(b, BrokerInfo(b))
        caused = [f for f in findings if b in (f.evidence.get("down_brokers") or ())]
        by_check: dict[str, list[Finding]] = defaultdict(list)
        for f in caused:
            by_check[f.check].append(f)

        def partitions_of(f: Finding, broker: int = b) -> list[int]:
            by_broker = f.evidence.get("partitions_by_down_broker") or {}
            return list(by_broker.get(str(broker), f.evidence.get("partitions") or []))

        offline = [f"{f.topic}-{p}" for f in by_check["offline-partitions"] for p in partitions_of(f)]
        consequences = []
        if offline:
            shown = ", ".join(offline[:6]) + (f" and {len(offline) - 6} more" if len(offline) > 6 else "")
            consequences.append(f"{len(offline)} partition(s) offline ({shown})")
        for check, text in (
            ("under-min-isr", "under min.insync.replicas (acks=all producers fail)"),
            ("under-replicated", "under-replicated"),
        ):
            items = by_check[check]
            if items:
                count = sum(len(partitions_of(f)) for f in items)
                topics = sorted({f.topic or "" for f in items})
                consequences.append(f"{count} partition(s) in {_count(topics, 'topic')} {text}")
        blocked = sorted({f.topic or "" for f in by_check["deletion-pending"]})
        if blocked:
            consequences.append(f"deletion of {', '.join(blocked)} blocked")
        rf1 = by_check["rf1-exposure-broker"]
        only_copy = sum(int(f.evidence.get("partitions") or 0) for f in rf1)
        only_copy_bytes = next((f.evidence.get("bytes") for f in rf1), None)
        if only_copy:
            consequences.append(
                f"the only copy of {only_copy} RF=1 partition(s)"
                + (f" ({only_copy_bytes} bytes)" if only_copy_bytes is not None else "")
                + " is on its disk"
            )
        who = ", ".join(
            part
            for part in (
                f"host {info.host}" if info.host else "",
                f"rack {info.rack}" if info.rack else "",
                f"last seen registered in the snapshot of {_utc(info.last_seen_ms)}"
                if info.last_seen_ms
                else "",
                f"registered since {_utc(info.registered_since_ms)} then" if info.registered_since_ms else "",
                {True: "shut down cleanly", False: "did NOT shut down cleanly (crash or kill)", None: ""}[
                    info.clean_shutdown
                ],
            )
            if part
        )
        summary = (
            f"broker {b} is down: not registered in /brokers/ids"
            + (f" ({who})" if who else "")
            + f"; it holds {replicas.get(b, 0)} replica(s)"
            + (": " + "; ".join(consequences) if consequences else "")
        )
        if kraft_active and b not in facts.broker_modes:
            # a migration's KRaft broker is not in /brokers/ids either: only its server.properties tells
            summary += (
                "; a KRaft migration is in dual-write, where a broker in KRaft mode is not in /brokers/ids either, "
                "and this broker's server.properties was not read (not inventoried): ZooKeeper cannot tell which"
            )
        where = f" on {info.host}" if info.host else ""
        check_first = trigger_command("kafka_zk_pre_restart_check", {"cluster": facts.cluster, "broker": b})
        if info.clean_shutdown is True:
            action = (
                f"Start broker {b}{where}: it shut down cleanly, so it starts without log recovery; the rows that "
                f"name broker {b} below clear as it registers and catches up."
            )
        elif info.clean_shutdown is False:
            action = (
                f"Broker {b} crashed: before starting it, run {check_first} -- its start runs log recovery, which a "
                f"corrupt index or segment stops (the check names the files); then start it{where}."
            )
        else:
            action = (
                f"Find out why broker {b} is down (server.log, systemctl status kafka{where}). If it crashed, run "
                f"{check_first} before starting it; then start it. The rows that name broker {b} below clear as it "
                "registers and catches up."
            )
        others = replicas.get(b, 0) - only_copy
        if others:
            action += (
                f" If broker {b} cannot come back soon, reassign its {others} replicated replica(s) to running "
                "brokers (kafka-reassign-partitions --generate with the running brokers' ids, then --execute)"
                + (": its RF=1 partitions cannot move, they need its disk." if only_copy else ".")
            )
        if only_copy:
            action += " Keep its disk: replacing it loses the RF=1 data."
        # a topicId mismatch on a topic it holds: the broker would reject that topic's LeaderAndIsr
        # when it starts (3.3.1: "never rejoined an ISR"), so the write-back goes first
        mismatched = sorted(
            {
                f.topic
                for f in findings
                if f.check == "topic-id-mismatch"
                and f.topic
                and (topic := state.topic(f.topic)) is not None
                and any(b in info.replicas for info in topic.partitions.values())
            }
        )
        if mismatched:
            stuck = [p for p in offline if p.rsplit("-", 1)[0] in mismatched]
            action = (
                f"First repair the topicId of {', '.join(mismatched)} (card above; the write-back touches no broker "
                f"and works while broker {b} is down): started before it, broker {b} rejects the controller's "
                f"requests for {', '.join(mismatched)} and its replicas there do not rejoin the ISR"
                + (f" ({', '.join(stuck)} stays offline)" if stuck else "")
                + ". Then: "
                + action
            )
        commands = (
            []
            if info.clean_shutdown is True
            else [{"label": f"before starting broker {b}", "command": check_first}]
        )
        severity = max((f.severity for f in caused), default=Severity.WARNING)
        out.append(
            _finding(
                facts,
                "broker-down",
                max(severity, Severity.WARNING),
                summary,
                action,
                broker_id=b,
                path=f"/brokers/ids/{b}",
                evidence={
                    "host": info.host,
                    "rack": info.rack,
                    "last_seen_ms": info.last_seen_ms,
                    "registered_since_ms": info.registered_since_ms,
                    "clean_shutdown": info.clean_shutdown,
                    "replicas": replicas.get(b, 0),
                    "offline_partitions": offline,
                    "only_copy_partitions": only_copy,
                    "act_after": [f"topic-id:{t}" for t in mismatched],
                    "consequences": {check: len(items) for check, items in sorted(by_check.items()) if items},
                    "commands": commands,
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


def controller_rebalance_rule(state: ClusterState, facts: ClusterFacts) -> AutoRebalance:
    """The controller's auto leader rebalance settings (it is the controller that rebalances), from its
    server.properties as the inventory read them (:func:`~.leadership.auto_rebalance`)."""
    controller = None if state.controller is None else state.controller.broker_id
    settings = facts.settings.get(controller) if controller is not None else None
    info = facts.brokers.get(controller) if controller is not None else None
    return auto_rebalance(
        controller,
        None
        if settings is None
        else {
            "auto.leader.rebalance.enable": settings.auto_leader_rebalance_enable,
            "leader.imbalance.per.broker.percentage": settings.leader_imbalance_per_broker_percentage,
            "leader.imbalance.check.interval.seconds": settings.leader_imbalance_check_interval_seconds,
        },
        defaulted=settings.defaulted if settings is not None else (),
        broker_configs=facts.broker_configs,
        release=info.kafka_version if info is not None else None,
    )


def _leader_imbalance(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """Kafka's own rule and the controller's settings (it is the controller that rebalances)."""
    rule = controller_rebalance_rule(state, facts)
    reassigning = bool(state.reassign_partitions or state.reassigning_partitions)
    out = []
    migration = migration_state(state, facts.broker_modes)
    kraft_controller = (
        migration.kraft_controller_id if migration is not None and migration.kraft_controller_active else None
    )
    for broker_id, imbalance in leader_imbalance(state, threshold_percent=rule.imbalance_percent).items():
        if broker_id not in facts.live_brokers or not imbalance.over_threshold:
            continue  # a stopped broker's partitions are reported as offline / under-replicated
        blocked = blocked_reasons(state, imbalance.not_leading, facts.live_brokers)
        shown = ", ".join(f"{t}-{p}" for t, p in imbalance.not_leading[:10])
        more = len(imbalance.not_leading) - 10
        out.append(
            _finding(
                facts,
                "preferred-leader-imbalance",
                # during a migration's dual-write the KRaft controller rebalances: no ZooKeeper write fixes it
                Severity.WARNING if kraft_controller is None else Severity.INFO,
                f"broker {broker_id} leads {imbalance.preferred - len(imbalance.not_leading)} of the "
                f"{imbalance.preferred} partitions it is preferred leader for ({100 * imbalance.ratio:.0f}% "
                f"imbalance > leader.imbalance.per.broker.percentage={imbalance.threshold_percent}): "
                f"{shown}{f' and {more} more' if more > 0 else ''}",
                imbalance_advice(
                    imbalance,
                    auto_rebalance=rule.enabled,
                    blocked=blocked,
                    reassigning=reassigning,
                    check_interval_s=rule.check_interval_s,
                    cluster=facts.cluster,
                    kraft_controller=kraft_controller,
                ),
                broker_id=broker_id,
                evidence={
                    "preferred": imbalance.preferred,
                    "not_leading": len(imbalance.not_leading),
                    "partitions": [f"{t}-{p}" for t, p in imbalance.not_leading],
                    "threshold_percent": imbalance.threshold_percent,
                    "auto_leader_rebalance_enable": rule.enabled,
                    "leader_imbalance_check_interval_seconds": rule.check_interval_s,
                    "settings_from": "controller"
                    if rule.source == "its server.properties"
                    else "Kafka defaults",
                    "auto_rebalance": rule.describe(),
                    "not_electable": {f"{t}-{p}": r for (t, p), r in blocked.items()},
                },
            )
        )
    return out


def _being_moved(topic: TopicState, entry: ReassignmentEntry) -> bool:
    """Whether the controller is carrying this entry out, as the topic znode shows it.

    2.4+ controllers write adding/removing replicas; a pre-2.4 one (topic znode format 1) writes
    only the union of the new and the old replicas, without either (``KafkaController.
    onPartitionReassignment``, ``newAndOldReplicas``, 1.1.0 and 2.3.0).
    """
    part = topic.partitions[entry.partition]
    if part.is_reassigning:
        return True
    return topic.format_version == 1 and set(entry.replicas) < set(part.replicas)


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
        elif not _being_moved(topic, entry) and tuple(topic.partitions[entry.partition].replicas) != tuple(
            entry.replicas
        ):
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
    """Info facts for a KRaft migration that follow from the other findings (3.4+ migration rules).

    A migration needs every topic to have a ``topic_id``. How a topic gets one decides whether the
    advice is safe: a controller failover makes the new controller mint ids for topics without one
    (``KafkaController.initializeControllerContext`` -> ``processTopicIds`` -> ``zkClient.setTopicIds``,
    3.3.1) -- harmless when no replica holds an id, but exactly KAFKA-14190 when replicas already
    hold one (they keep theirs and reject the controller). So topics whose replicas hold an id get the
    topicId repair DAG's write-back (or file_reset when they disagree), never a controller failover.
    """
    # below IBP 2.8 no topic has an id yet: the IBP 3.4 a migration needs gives every topic one
    # at the first controller failover (``KafkaController.processTopicIds``, 3.4.0), nothing to flag
    no_id = (
        sorted(t.name for t in state.topics.values() if t.topic_id is None) if facts.uses_topic_ids else []
    )
    precursors = {f.topic: f for f in findings if f.check == "topic-id-missing-in-zookeeper" and f.topic}
    write_back = [t for t in no_id if t in precursors and precursors[t].evidence.get("write_back_id")]
    file_reset = [t for t in no_id if t in precursors and not precursors[t].evidence.get("write_back_id")]
    unread: dict[str, list[int]] = {}
    fresh = []
    for name in (t for t in no_id if t not in precursors):
        topic = state.topic(name)
        assigned = {b for info in topic.partitions.values() for b in info.replicas} if topic else set()
        missing_brokers = sorted(assigned - set(facts.inventoried))
        if missing_brokers:
            unread[name] = missing_brokers
        else:
            fresh.append(name)
    out = []
    if write_back:
        conf = dict(precursors[write_back[0]].evidence.get("repair_conf") or {})
        if not set(write_back) <= set(conf.get("topics") or ()):
            conf = {"cluster": facts.cluster, "topics": write_back, "strategy": "write_back"}
        commands = repair_commands(conf)
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{_count(write_back, 'topic')} {_lack(write_back)} a topic_id that their replicas hold "
                f"({_names(write_back)}): a KRaft migration cannot read them",
                f"Write the ids the replicas hold back before migrating, and before any controller move: dry run "
                f"{commands['dry_run']}, then {commands['run']} ({TOPIC_ID_REPAIR_DAG}, strategy write_back: each "
                "topic znode gets the id its replicas hold). Do not give them ids by a controller failover: the new "
                "controller would mint new ids, which every replica rejects (KAFKA-14190)",
                evidence={
                    "topics": write_back[:100],
                    "write_back_ids": {t: precursors[t].evidence["write_back_id"] for t in write_back[:100]},
                    "repair_conf": conf,
                    "commands": _command_list(commands),
                },
            )
        )
    if file_reset:
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{_count(file_reset, 'topic')} {_lack(file_reset)} a topic_id while their replicas hold different ids "
                f"({_names(file_reset)}): a KRaft migration cannot read them",
                f"Repair each with {TOPIC_ID_REPAIR_DAG}'s file_reset and the id to keep, as its "
                "topic-id-missing-in-zookeeper finding says (it writes that id into the topic znode first), before "
                "migrating and before any controller move: a failover would mint yet another id (KAFKA-14190)",
                evidence={
                    "topics": file_reset[:100],
                    "commands": {t: precursors[t].evidence.get("repair_run") for t in file_reset[:100]},
                },
            )
        )
    if unread:
        brokers = sorted({b for bs in unread.values() for b in bs})
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{_count(list(unread), 'topic')} {_lack(list(unread))} a topic_id ({_names(list(unread))}) and replicas of them on "
                f"{brokers_text(brokers)} were not read: a KRaft migration cannot read these topics",
                f"Inventory {brokers_text(brokers)} first: a replica there may hold an id, and then a controller move "
                "would mint a different one (KAFKA-14190); the audit then says how to give each its id",
                evidence={"topics": list(unread)[:100], "unread_brokers": brokers},
            )
        )
    if fresh:
        after = (
            f" -- only after the {len(write_back) + len(file_reset)} topic(s) above are repaired: a controller move "
            "before that mints new ids for them (KAFKA-14190)"
            if write_back or file_reset
            else ""
        )
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{_count(fresh, 'topic')} {_lack(fresh)} a topic_id and no replica holds one ({_names(fresh)}): a KRaft "
                "migration cannot read them",
                "The next controller move gives each a new id that its replicas adopt (nothing to disagree with)"
                + after,
                evidence={"topics": fresh[:100]},
            )
        )
    no_meta = sum(
        len(f.evidence.get("replicas", [])) for f in findings if f.check == "partition-metadata-missing"
    )
    if no_meta:
        out.append(
            _finding(
                facts,
                "kraft-readiness",
                Severity.INFO,
                f"{no_meta} replica(s) lack partition.metadata: KRaft brokers refuse or set aside such logs",
                "Let a LeaderAndIsr write them before migrating (any leader change or controller move sends one)"
                + (
                    f" -- but no controller move before {_names(write_back + file_reset)} "
                    f"{'has' if len(write_back + file_reset) == 1 else 'have'} its topic_id back (above): the new "
                    "controller would mint new ids for them (KAFKA-14190)"
                    if write_back or file_reset
                    else ""
                ),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# a ZooKeeper-to-KRaft migration in progress: its state, not incidents
# ---------------------------------------------------------------------------------------------

KRAFT_METADATA_TOPIC = "__cluster_metadata"
"""``KafkaRaftServer.MetadataPartition``'s topic (3.9.0-rc3): the KRaft metadata log, never a ZooKeeper topic."""


def is_kraft_metadata_log(evidence: TopicEvidence) -> bool:
    """``__cluster_metadata-0`` directories and nothing else of that name: the KRaft metadata log.

    A ZooKeeper-mode broker in migration mode runs a ``KafkaRaftManager`` whose log is
    ``__cluster_metadata-0`` in ``metadata.log.dir`` (by default the first of ``log.dirs``), with
    topic id ``METADATA_TOPIC_ID`` (``KafkaServer.startup``, ``KafkaMetadataLog.apply``, 3.9.0-rc3), as
    KRaft brokers do. ZooKeeper never has such a topic, so the deletion, placement and topicId rules
    would call it an orphan. A real topic of that name (a znode, a marker or a config) is audited.
    """
    return (
        evidence.topic == KRAFT_METADATA_TOPIC
        and evidence.state is None
        and not evidence.delete_marker
        and not evidence.config_znode
        and bool(evidence.dirs)
        and all(
            d.partition == 0 and d.kind is DirKind.NORMAL and (d.topic_id is None or d.topic_id == ONE_UUID)
            for d in evidence.dirs
        )
    )


KRAFT_READINESS_DAG = "kafka_zk_kraft_migration_readiness"
"""``airflow_provider_kafka_zk.dags.kraft_migration_readiness.DAG_ID`` (a test ties them)."""


def _finalization_contradicted(found: MigrationState, record: bytes, facts: ClusterFacts) -> Finding | None:
    """The finalization record beside brokers whose server.properties are not in KRaft mode (the only
    signals that contradict it: once finalized, ``/migration`` and ``/controller`` are frozen copies).
    Both cannot hold -- a finalized migration has no way back (docs/ops.html 3.9, "Finalizing the
    migration") -- so the finding names the two and how to tell which is true; the revert of a migration
    under way (deleting ``/controller`` and ``/migration``) does not apply. None: no such broker."""
    modes = found.broker_modes
    brokers = sorted(b for b, mode in modes.items() if mode is not BrokerMode.KRAFT)
    if not brokers:
        return None
    fields = finalization_record_fields(record)
    controllers = [str(c) for c in fields.get("controllers") or () if isinstance(c, int)]
    when = f" at {fields['recorded_at']} by run {fields.get('run')}" if fields.get("recorded_at") else ""
    named = f"the controllers it names ({', '.join(controllers)})" if controllers else "the KRaft controllers"
    return _finding(
        facts,
        "kraft-migration-inconsistent",
        Severity.ERROR,
        f"{KRAFT_FINALIZED_PATH} says the migration to KRaft was finalized{when}, but "
        f"{brokers_text(brokers)} {'have' if len(brokers) > 1 else 'has'} server.properties not in KRaft mode "
        f"({', '.join(f'{b}: {modes[b]}' for b in brokers)}): a finalized cluster has only KRaft brokers. "
        "Every writer of this provider refuses this ZooKeeper until one of the two is put right",
        f"Find out which is true. If the KRaft cluster runs (ask {named}: bin/kafka-metadata-quorum.sh "
        "--bootstrap-controller <controller host:port> describe --status), the record is right and there is "
        "no way back to ZooKeeper mode (docs/ops.html, 'Finalizing the migration'): either the inventory read "
        "another file than the one those brokers run with (check server_properties_path), or their files were "
        "edited back after the finalization and at their next restart they cannot join -- restore "
        "process.roles=broker, node.id and controller.quorum.voters (or controller.quorum.bootstrap.servers), "
        "without zookeeper.connect, before they restart. If instead this ZooKeeper now serves another cluster, "
        "in ZooKeeper mode, set up after that migration, the record is left over: delete it "
        f"(bin/zookeeper-shell.sh <zookeeper.connect with the chroot> delete {KRAFT_FINALIZED_PATH}; this "
        "provider's znode, Kafka never reads it)",
        path=KRAFT_FINALIZED_PATH,
        evidence=found.to_dict(),
    )


def kraft_migration_findings(state: ClusterState, facts: ClusterFacts) -> list[Finding]:
    """While a KRaft controller migrates the cluster, one finding saying where it stands and what is next.

    During the migration the persistent ``/controller`` held by a KRaft controller, the bumped
    ``/controller_epoch``, the KRaft epoch in partition states and -- once brokers run in KRaft mode --
    their absence from ``/brokers/ids`` are how Kafka migrates (see :mod:`.kraft_migration`): reported as
    the migration's state, not as incidents. The same signs without a migration -- a persistent
    ``/controller`` and no ``/migration`` -- are an error: no ZooKeeper-mode broker can become controller
    while it stays. After a rollback that left ``/migration`` behind (Kafka's documented revert does) the
    finding says to delete it: until then every writer of this provider refuses, and a later migration
    would skip its initial load (KAFKA-17146).
    """
    found = migration_state(state, facts.broker_modes)
    if found is None:
        return []
    if found.left_zookeeper:
        # ZooKeeper alone still looks like a dual-write: the phase reader read the finalization's record
        left = found.reason
        return [
            _finding(
                facts,
                "kraft-migration-finalized",
                Severity.INFO,
                left[0].upper() + left[1:],
                "Nothing to do in ZooKeeper: this provider's writers refuse it and its audit of this ZooKeeper no "
                "longer describes the cluster. Retire the cluster's ZooKeeper-mode DAG runs (daily hygiene, "
                "maintenance) for it and deprovision its ZooKeeper chroot",
                path=KRAFT_FINALIZED_PATH,
                evidence=found.to_dict(),
            )
        ]
    readiness = trigger_command(KRAFT_READINESS_DAG, {"cluster": facts.cluster})
    if found.inconsistent and state.kraft_finalized is not None:
        contradicted = _finalization_contradicted(found, state.kraft_finalized, facts)
        if contradicted is not None:
            return [contradicted]
    evidence = found.to_dict()
    if found.inconsistent:
        return [
            _finding(
                facts,
                "kraft-migration-inconsistent",
                Severity.ERROR,
                f"{found.problem}; /controller: KRaft controller or persistent znode "
                f"(id {found.kraft_controller_id}, kraftControllerEpoch {found.kraft_controller_epoch})",
                "If a KRaft quorum still runs with zookeeper.metadata.migration.enable, it owns /controller: "
                "look at its controllers first. If the migration was reverted, the documented revert deletes "
                "/controller and /migration (docs/ops.html, 'Reverting to ZooKeeper mode During the Migration'; "
                "with deleteall: ZooKeeper 3.5+ has no rmr), so a broker is elected again. Before that deletion "
                "every topic must have its topic_id in "
                "ZooKeeper (see the topicId findings): a new ZooKeeper-mode controller mints a NEW id for a "
                "topic without one, and its replicas then reject it (KAFKA-14190)",
                path="/controller",
                evidence=evidence,
            )
        ]
    severity = Severity.WARNING if found.problem or found.unknown_mode or found.left_over else Severity.INFO
    registered = list(found.zk_brokers)
    brokers = (
        f"brokers registered in /brokers/ids (ZooKeeper mode): {registered if registered else 'none'}"
        + (
            f"; in KRaft mode (registered with the quorum only, serving): {list(found.kraft_brokers)}"
            if found.kraft_brokers
            else ""
        )
    )
    summary = (
        f"KRaft migration, phase {found.phase_name} ({found.stage}): {found.description}; KRaft controller "
        f"{found.kraft_controller_id} (KRaft epoch {found.kraft_controller_epoch}), /migration metadata offset "
        f"{found.metadata_offset} (epoch {found.metadata_epoch}), ZooKeeper controller epoch "
        f"{found.zk_controller_epoch}; {brokers}"
        + (
            f". {found.problem}"
            if found.problem and found.phase not in (Phase.REVERTING, Phase.ZOOKEEPER)
            else ""
        )
        + (
            f". Marked for deletion before the takeover, not migrated (the brokers reconcile their logs, "
            f"ZkTopicMigrationClient.iterateTopics): {', '.join(sorted(state.pending_deletions))}"
            if found.kraft_controller_active and state.pending_deletions
            else ""
        )
    )
    if found.kraft_controller_active:
        not_incidents = (
            "Not incidents: a persistent /controller held by the KRaft controller, its epoch in /controller_epoch "
            "and in partition states, its writes to topic znodes"
            + (", brokers in KRaft mode missing from /brokers/ids" if found.kraft_brokers else "")
            + " are how Kafka migrates. "
        )
    else:
        not_incidents = ""
    action = (
        f"{not_incidents}Next: {found.next_step}. This provider's ZooKeeper writes (drain, topicId repair, deletion "
        f"cleanup, elections) refuse while /migration exists. Its state and blockers: {readiness}"
    )
    return [
        _finding(facts, "kraft-migration", severity, summary, action, path="/migration", evidence=evidence)
    ]


def _lack(topics: Sequence[str]) -> str:
    return "lacks" if len(topics) == 1 else "lack"


def _names(topics: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(topics[:limit])
    return shown + (f" and {len(topics) - limit} more" if len(topics) > limit else "")


# Findings whose advice changes leaders or moves partitions: on a topic whose replicas disagree with
# ZooKeeper's topic_id, any leader/ISR change is what the brokers reject (the 3.3.1 incident: produce
# failed after the next leader change), so they wait for the topicId repair.
_LEADER_CHANGING_CHECKS = ("preferred-leader-imbalance", "rf1-exposure", "rf1-exposure-broker")


def _topics_of(finding: Finding) -> set[str]:
    evidence = finding.evidence
    if finding.check == "preferred-leader-imbalance":
        return {str(p).rsplit("-", 1)[0] for p in evidence.get("partitions") or ()}
    if finding.check == "rf1-exposure-broker":
        return {str(t) for t in evidence.get("topics") or {}}
    return {finding.topic} if finding.topic else set()


def after_topic_id_repair(findings: Sequence[Finding]) -> list[Finding]:
    """Advice that would move leaders of a topic with a topicId mismatch says to repair it first."""
    mismatched = {f.topic for f in findings if f.check == "topic-id-mismatch" and f.topic}
    if not mismatched:
        return list(findings)
    out = []
    for f in findings:
        affected = sorted(_topics_of(f) & mismatched) if f.check in _LEADER_CHANGING_CHECKS else []
        if not affected:
            out.append(f)
            continue
        names = ", ".join(affected)
        auto = (
            " -- soon: with auto.leader.rebalance.enable on, the controller elects them itself at its next check"
            if f.check == "preferred-leader-imbalance" and f.evidence.get("auto_leader_rebalance_enable")
            else ""
        )
        action = (
            f"First repair the topicId of {names} (its topic-id-mismatch card){auto}: a leader change on "
            f"{names} -- an election or a partition move -- is what its brokers reject (KAFKA-14190), leaving "
            f"those partitions without a working leader. Then: {f.action}"
        )
        evidence = {
            **f.evidence,
            "act_after": sorted({*f.evidence.get("act_after", ()), *(f"topic-id:{t}" for t in affected)}),
        }
        out.append(replace(f, action=action, evidence=evidence))
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
    topic_level = combine_write_backs(
        [*topic_findings, *summarize_rf1_exposure(topic_findings, facts)], facts
    )
    return after_topic_id_repair(
        [
            *broker_down_root_causes(topic_level, state, facts),
            *topic_level,
            *audit_cluster(state, facts),
            *kraft_readiness(topic_level, state, facts),
            *kraft_migration_findings(state, facts),
        ]
    )


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
