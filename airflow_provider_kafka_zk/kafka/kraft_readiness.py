"""Can this ZooKeeper-mode cluster migrate to KRaft now? The readiness checks, pure.

Each check returns PASS, BLOCKER or WARNING with the evidence, the fix (the provider's DAG run with its
exact trigger where it has one) and the Kafka source or documentation the rule comes from, at the
release it applies to. The inputs are what the provider already reads: the snapshot's model
(:class:`~.model.ClusterState`), the daily audit's findings (the offline, under-min-ISR, deletion,
throttle and broker-down rules are the audit's: one implementation per rule), the topicId diagnosis
of :mod:`.topic_id_repair`, each broker's server.properties from the inventory, a few znodes the
model does not keep (ACLs, tokens, old consumers' offsets, the maintenance lease) and the users'
config keys. Nothing here does I/O or imports Airflow.

Kafka sources read (apache/kafka at the tags named): ``core/src/main/scala/kafka/server/KafkaConfig.scala``
(3.4.0, 3.5.0, 3.6.0, 3.7.0, 3.8.0, 3.9.0-rc3: the migration's config checks),
``server-common/.../MetadataVersion.java`` (``isMigrationSupported``: 3.4-IV0,
``isDirectoryAssignmentSupported``: 3.7-IV2), ``core/src/main/scala/kafka/zk/ZkMigrationClient.scala``
(``readAllMetadata``: what the initial load copies, per release), ``core/src/main/scala/kafka/zk/migration/
ZkTopicMigrationClient.scala`` and ``ZkConfigMigrationClient.scala`` (3.9.0-rc3),
``metadata/.../migration/KRaftMigrationDriver.java`` (3.9.0-rc3), ``core/src/main/scala/kafka/log/
LogManager.scala`` (``findStrayReplicas``, 3.9.0-rc3) and ``docs/ops.html`` ("ZooKeeper to KRaft
Migration", "Missing Features") at each tag.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .audit import TOPIC_ID_REPAIR_DAG, repair_commands, trigger_command
from .errors import KafkaFormatError
from .findings import Finding, brokers_text
from .kraft_migration import BrokerMode, MigrationState, broker_mode, migration_state
from .model import ClusterState
from .safety import LEASE_PATH, LeaseHolder
from .snapshot import ZnodeRow
from .topic_id_repair import TopicIdCase, TopicIdDiagnosis, write_back_effect
from .versions import KafkaVersion

# ---------------------------------------------------------------------------------------------
# Release rules (each read at the tag it names)
# ---------------------------------------------------------------------------------------------

MIGRATION_SINCE = KafkaVersion(3, 4)
"""``zookeeper.metadata.migration.enable`` and ``MigrationZNode`` first exist at 3.4.0."""
PRODUCTION_SINCE = KafkaVersion(3, 8)
"""docs/ops.html lists "Upgrade from ZooKeeper mode" among KRaft's missing features at 3.4.0/3.5.0 and
says "ZooKeeper to KRaft migration is considered an Early Access feature and is not recommended for
production clusters" at 3.6.0-3.7.1; the note is gone at 3.8.0."""
BRIDGE_LINE = (3, 9)
"""The last ZooKeeper-mode release line; Kafka 4.0 has no ZooKeeper mode."""
MIGRATION_IBP = KafkaVersion(3, 4, 0, 0)
"""``MetadataVersion.isMigrationSupported``: IBP >= 3.4-IV0 (3.9.0-rc3)."""
JBOD_IBP = KafkaVersion(3, 7, 0, 2)
"""``MetadataVersion.isDirectoryAssignmentSupported``: IBP >= 3.7-IV2 (3.7.0+)."""
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""``ScramMechanism`` names: the keys a SCRAM credential has in ``/config/users/<user>``."""
DEFAULT_RESERVED_BROKER_MAX_ID = 1000
DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)
"""``listener.security.protocol.map``'s default (``SocketServerConfigs``, 3.9.0-rc3)."""

SRC_CONFIG_39 = "KafkaConfig.scala validateValues, ZooKeeper-based branch, 3.9.0-rc3"
SRC_DOCS_39 = "docs/ops.html 'ZooKeeper to KRaft Migration', 3.9.0-rc3"


class Status(StrEnum):
    PASS = "pass"  # noqa: S105 (a status, not a password)
    WARNING = "warning"
    BLOCKER = "blocker"


@dataclass(frozen=True)
class FixRun:
    """A run of one of this provider's DAGs that fixes a blocker: its conf and the two command lines."""

    dag_id: str
    conf: Mapping[str, Any]
    dry_run: str
    run: str

    def to_dict(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "conf": dict(self.conf), "dry_run": self.dry_run, "run": self.run}


@dataclass(frozen=True)
class Check:
    """One readiness check's result.

    :param check: stable id (dashboards, tests).
    :param title: what it checks.
    :param status: PASS, WARNING or BLOCKER.
    :param evidence: what was found, with ids, brokers, paths.
    :param fix: what to do ("" when nothing).
    :param source: the Kafka source or documentation the rule follows, at its release tag.
    :param fix_runs: this provider's DAG runs that fix it, in the order to run them.
    :param details: machine-readable evidence.
    """

    check: str
    title: str
    status: Status
    evidence: str
    fix: str
    source: str
    fix_runs: tuple[FixRun, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "title": self.title,
            "status": self.status.value,
            "evidence": self.evidence,
            "fix": self.fix,
            "source": self.source,
            "fix_runs": [r.to_dict() for r in self.fix_runs],
            "details": dict(self.details),
        }


CHECK_ORDER: tuple[str, ...] = (
    "release",
    "inter-broker-protocol",
    "brokers-registered",
    "topic-ids",
    "partition-metadata",
    "reassignment",
    "topic-deletion",
    "preferred-election",
    "throttles",
    "partition-health",
    "maintenance-lease",
    "kraft-features",
    "migration-config",
    "controller-ids",
    "metadata-copy",
    "zookeeper-writers",
)
"""Every check, in report order within a status (blockers first, then warnings, then passes)."""


@dataclass(frozen=True)
class ReadinessReport:
    """Every check and one verdict: "ready to migrate", "N blockers", or the migration's phase."""

    cluster: str
    checks: tuple[Check, ...]
    migration: MigrationState | None = None

    @property
    def blockers(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.BLOCKER)

    @property
    def warnings(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.WARNING)

    @property
    def verdict(self) -> str:
        count = len(self.blockers)
        blockers = f"{count} blocker{'' if count == 1 else 's'}"
        if self.migration is not None:
            # ZooKeeper mode with a /migration left behind is no migration, but no ready cluster either
            state = (
                "/migration left over"
                if self.migration.left_over
                else ("left ZooKeeper" if self.migration.left_zookeeper else "migrating")
            )
            return f"{state} ({self.migration.phase_name})" + (f", {blockers}" if count else "")
        return "ready to migrate" if count == 0 else blockers

    def check(self, check_id: str) -> Check:
        return next(c for c in self.checks if c.check == check_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "kafka-zk-kraft-readiness",
            "version": 1,
            "cluster": self.cluster,
            "verdict": self.verdict,
            "ready": not self.blockers and self.migration is None,
            "blockers": len(self.blockers),
            "warnings": len(self.warnings),
            "migration": self.migration.to_dict() if self.migration is not None else None,
            "checks": [c.to_dict() for c in self.checks],
        }

    def text(self) -> str:
        """The report a person reads: the verdict, then the blockers with their fixes, then the rest."""
        lines = [f"KRaft migration readiness of {self.cluster}: {self.verdict.upper()}", ""]
        if self.migration is not None:
            m = self.migration
            lines += [
                f"Migration in progress, phase {m.phase_name} ({m.stage}): {m.description}.",
                f"  KRaft controller {m.kraft_controller_id} (epoch {m.kraft_controller_epoch}); /migration "
                f"metadata offset {m.metadata_offset} (epoch {m.metadata_epoch}); ZooKeeper controller epoch "
                f"{m.zk_controller_epoch}; brokers registered in /brokers/ids (ZooKeeper mode) {list(m.zk_brokers)}"
                + (f"; in KRaft mode {list(m.kraft_brokers)}" if m.kraft_brokers else ""),
                *([f"  {m.problem}"] if m.problem else []),
                f"  Next: {m.next_step}.",
                "",
            ]
        for check in self.checks:
            lines.append(f"[{check.status.value.upper()}] {check.title} ({check.check})")
            lines.append(f"  found: {check.evidence}")
            if check.fix:
                lines.append(f"  fix: {check.fix}")
            for run in check.fix_runs:
                lines.append(f"  dry run: {run.dry_run}")
                lines.append(f"  then:    {run.run}")
            lines.append(f"  rule: {check.source}")
            lines.append("")
        return "\n".join(lines)


def _ordered(checks: Iterable[Check]) -> tuple[Check, ...]:
    rank = {Status.BLOCKER: 0, Status.WARNING: 1, Status.PASS: 2}
    return tuple(sorted(checks, key=lambda c: (rank[c.status], CHECK_ORDER.index(c.check))))


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerConfig:
    """One broker's server.properties as the migration reads it (from its inventory summary).

    :param kafka_version: the release of the broker process started with that file (its jars).
    :param configured_broker_id: ``broker.id`` in the file; None when unset or -1 (generated).
    :param settings: the keys of :data:`.inventory.MIGRATION_KEYS` present, as written.
    """

    broker_id: int
    host: str | None
    kafka_version: str | None
    inter_broker_protocol_version: str | None
    configured_broker_id: int | None
    log_dirs: tuple[str, ...]
    server_properties_path: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_inventory_summary(cls, broker_id: int, summary: Mapping[str, Any]) -> BrokerConfig:
        """From the ``kafka_zk.inventory`` summary a broker's inventory file carries."""
        facts = summary.get("facts") or {}
        configured = facts.get("broker.id")
        return cls(
            broker_id=broker_id,
            host=summary.get("host"),
            kafka_version=facts.get("kafka_version"),
            inter_broker_protocol_version=facts.get("inter.broker.protocol.version"),
            configured_broker_id=int(configured) if configured is not None else None,
            log_dirs=tuple(facts.get("log.dirs") or ()),
            server_properties_path=facts.get("server_properties_path"),
            settings=dict(facts.get("migration_settings") or {}),
        )

    @property
    def migration_enabled(self) -> bool:
        return self.settings.get("zookeeper.metadata.migration.enable", "false").strip().lower() == "true"

    @property
    def mode(self) -> BrokerMode:
        """How the broker runs (:func:`.kraft_migration.broker_mode`): a migration's KRaft broker has no IBP
        and no ZooKeeper settings to check."""
        return broker_mode(self.settings)

    @property
    def where(self) -> str:
        return f"broker {self.broker_id}" + (
            f" ({self.server_properties_path})" if self.server_properties_path else ""
        )


@dataclass(frozen=True)
class ZooKeeperExtras:
    """What the readiness needs from znodes the model does not keep.

    :param acl_resources: ACL znodes (``/kafka-acl/<Type>/<name>``, ``/kafka-acl-extended/<pattern>/<Type>/<name>``).
    :param acl_entries: the entries in them.
    :param acl_unreadable: ACL znodes whose data is not ``{"version":1,"acls":[...]}``.
    :param delegation_tokens: children of ``/delegation_token/tokens``.
    :param consumer_groups: groups with offsets under ``/consumers/<group>/offsets`` (ZooKeeper-based consumers).
    :param lease: the maintenance lease's data, when ``/kafka_zk_maintenance/lease`` exists.
    :param lease_present: whether it exists.
    """

    acl_resources: int = 0
    acl_entries: int = 0
    acl_unreadable: tuple[str, ...] = ()
    delegation_tokens: int = 0
    consumer_groups: tuple[str, ...] = ()
    lease: bytes | None = None
    lease_present: bool = False

    PREFIXES = ("/kafka-acl/", "/kafka-acl-extended/", "/delegation_token/tokens/", "/consumers/", LEASE_PATH)

    @classmethod
    def from_rows(cls, rows: Iterable[ZnodeRow]) -> ZooKeeperExtras:
        """From a snapshot's rows (only the paths under :attr:`PREFIXES` are looked at)."""
        resources = entries = tokens = 0
        unreadable: list[str] = []
        groups: set[str] = set()
        lease: bytes | None = None
        lease_present = False
        for row in rows:
            path = row.path
            parts = path.strip("/").split("/")
            if path == LEASE_PATH:
                lease_present, lease = True, row.data
            elif (parts[0] == "kafka-acl" and len(parts) == 3) or (
                parts[0] == "kafka-acl-extended" and len(parts) == 4
            ):
                resources += 1
                try:
                    acls = json.loads(row.data or b"")["acls"]
                    if not isinstance(acls, list):
                        raise TypeError("acls is not a list")
                    entries += len(acls)
                except (ValueError, KeyError, TypeError):
                    unreadable.append(path)
            elif parts[:2] == ["delegation_token", "tokens"] and len(parts) == 3:
                tokens += 1
            elif parts[0] == "consumers" and len(parts) >= 3 and parts[2] == "offsets":
                groups.add(parts[1])
        return cls(resources, entries, tuple(unreadable), tokens, tuple(sorted(groups)), lease, lease_present)


@dataclass(frozen=True)
class ReadinessInputs:
    """Everything :func:`assess` reads.

    :param state: the snapshot's model.
    :param findings: the audit's findings on the same snapshot and inventory.
    :param brokers: server.properties of each inventoried broker.
    :param diagnoses: :func:`.topic_id_repair.diagnose` of every topic.
    :param extras: the znodes the model does not keep.
    :param user_configs: ``/config/users`` entities (``<user>`` or ``<user>/clients/<id>``) -> config,
        SCRAM values replaced by anything (only the keys are read); None when they were not read.
    :param controller_node_ids: the KRaft controllers' ``node.id`` values planned.
    :param kafka_version: the brokers' release when an inventory cannot tell (no running broker).
    """

    cluster: str
    state: ClusterState
    findings: Sequence[Finding]
    brokers: Mapping[int, BrokerConfig]
    diagnoses: Sequence[TopicIdDiagnosis]
    extras: ZooKeeperExtras
    user_configs: Mapping[str, Mapping[str, str]] | None
    controller_node_ids: tuple[int, ...] = (3000, 3001, 3002)
    kafka_version: str | None = None


def assess(inputs: ReadinessInputs) -> ReadinessReport:
    """Every check, blockers first, and the migration's state if one runs."""
    releases = _releases(inputs)
    release = _cluster_release(releases)
    checks = [
        _release_check(inputs, releases),
        _ibp_check(inputs, releases),
        _brokers_registered(inputs),
        *_topic_id_checks(inputs),
        _reassignment_check(inputs),
        _deletion_check(inputs),
        _preferred_election_check(inputs),
        _throttles_check(inputs),
        _partition_health_check(inputs),
        _lease_check(inputs),
        _features_check(inputs, releases),
        _config_check(inputs),
        _controller_ids_check(inputs),
        _metadata_copy_check(inputs, release),
        _zookeeper_writers_check(inputs),
    ]
    return ReadinessReport(inputs.cluster, _ordered(checks), _migration(inputs))


def _migration(inputs: ReadinessInputs) -> MigrationState | None:
    """The migration's state with each inventoried broker's mode (names the stage and the next step)."""
    return migration_state(inputs.state, {b: c.mode for b, c in inputs.brokers.items()})


def _kraft_mode(inputs: ReadinessInputs) -> list[int]:
    """Brokers whose server.properties makes them a migration's KRaft brokers."""
    return sorted(b for b, c in inputs.brokers.items() if c.mode is BrokerMode.KRAFT)


def _check(
    check: str,
    title: str,
    status: Status,
    evidence: str,
    fix: str,
    source: str,
    *,
    fix_runs: Sequence[FixRun] = (),
    **details: Any,
) -> Check:
    return Check(
        check,
        title,
        status,
        evidence,
        fix if status is not Status.PASS else "",
        source,
        tuple(fix_runs),
        details,
    )


def _known_brokers(inputs: ReadinessInputs) -> list[int]:
    state = inputs.state
    assigned = {b for p in state.partitions() for b in p.replicas}
    return sorted(set(state.brokers) | assigned | set(inputs.brokers))


# ---------------------------------------------------------------------------------------------
# Release and inter.broker.protocol.version
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Release:
    version: KafkaVersion | None
    how: str

    @property
    def text(self) -> str:
        if self.version is None:
            return "unknown"
        v = self.version
        return f"{v.release_line}.x" if "IBP" in self.how else f"{v.major}.{v.minor}.{v.patch}"


def _parse(text: str | None) -> KafkaVersion | None:
    if not text:
        return None
    try:
        return KafkaVersion.parse(text)
    except KafkaFormatError:
        return None


def _releases(inputs: ReadinessInputs) -> dict[int, _Release]:
    """Each broker's release: its jars, else the ``kafka_version`` param, else an IBP of 3.9 (a broker
    refuses an IBP above its release -- ``MetadataVersion.fromVersionString`` knows none -- and no
    ZooKeeper-mode release follows 3.9, so IBP 3.9 means 3.9.x)."""
    out = {}
    for b in _known_brokers(inputs):
        config = inputs.brokers.get(b)
        jars = _parse(config.kafka_version) if config is not None else None
        param = _parse(inputs.kafka_version)
        ibp = _parse(config.inter_broker_protocol_version) if config is not None else None
        if jars is not None:
            out[b] = _Release(jars, "its running process's kafka_<scala>-<release>.jar")
        elif param is not None:
            out[b] = _Release(param, "the kafka_version param")
        elif ibp is not None and (ibp.major, ibp.minor) == BRIDGE_LINE:
            out[b] = _Release(KafkaVersion(*BRIDGE_LINE), "its IBP 3.9 (no later ZooKeeper-mode release)")
        else:
            why = (
                "not inventoried"
                if config is None
                else "no running broker process with that server.properties"
            )
            out[b] = _Release(None, why)
    return out


def _releases_differ(releases: Iterable[_Release]) -> bool:
    """Known releases that differ, or a release line known only from an IBP that is not theirs (a
    broker whose release is inferred as 3.9.x runs the same release as one whose jars say 3.9.0, as
    far as anything shows)."""
    exact = {r.version for r in releases if r.version is not None and "IBP" not in r.how}
    lines = {(r.version.major, r.version.minor) for r in releases if r.version is not None and "IBP" in r.how}
    return len(exact) > 1 or len(lines) > 1 or any((v.major, v.minor) not in lines for v in exact if lines)


def _cluster_release(releases: Mapping[int, _Release]) -> KafkaVersion | None:
    """The lowest known release (what the migration's rules must hold for)."""
    known = [r.version for r in releases.values() if r.version is not None]
    return min(known) if known else None


def _release_check(inputs: ReadinessInputs, releases: Mapping[int, _Release]) -> Check:
    title = "Kafka release of every broker"
    by_release: dict[str, list[int]] = defaultdict(list)
    for b, r in sorted(releases.items()):
        by_release[r.text].append(b)
    listing = "; ".join(f"{text} on {brokers_text(bs)}" for text, bs in sorted(by_release.items()))
    details = {"brokers": {str(b): {"release": r.text, "from": r.how} for b, r in releases.items()}}
    unknown = sorted(b for b, r in releases.items() if r.version is None)
    upgrade = (
        "Upgrade every broker to the newest 3.9.x (rolling restart, IBP unchanged), then set "
        "inter.broker.protocol.version=3.9 in a second roll"
    )
    source = (
        f"{SRC_DOCS_39} 'Preparing for migration' (brokers on the docs' release, IBP set to its line); docs/ops.html "
        '3.4.0/3.5.0 ("Upgrade from ZooKeeper mode" among KRaft\'s missing features), 3.6.0-3.7.1 ("Early Access '
        '... not recommended for production clusters"), 3.8.0 (note gone); KafkaConfig.scala 3.4.0 '
        "(zookeeper.metadata.migration.enable appears)"
    )
    if unknown:
        return _check(
            "release",
            title,
            Status.BLOCKER,
            f"the release of {brokers_text(unknown)} is unknown ({', '.join(sorted({releases[b].how for b in unknown}))}); "
            f"found: {listing}",
            "Give server_properties_path for a running broker (the inventory reads the release from the jars of the "
            "process started with it), or the kafka_version param",
            source,
            **details,
        )
    if _releases_differ(releases.values()):
        return _check(
            "release",
            title,
            Status.BLOCKER,
            f"the brokers run different releases: {listing}",
            f"Finish the rolling upgrade: every broker on one release. {upgrade}",
            source,
            **details,
        )
    release = _cluster_release(releases)
    if release is None:
        return _check(
            "release", title, Status.BLOCKER, "no broker known", "Run the inventory", source, **details
        )
    if release < MIGRATION_SINCE:
        status, evidence = (
            Status.BLOCKER,
            f"{listing}: Kafka {release} has no ZooKeeper-to-KRaft migration (3.4+)",
        )
    elif release < PRODUCTION_SINCE:
        status, evidence = (
            Status.BLOCKER,
            f"{listing}: the documentation of Kafka {release.release_line} calls the migration "
            + (
                "a missing KRaft feature"
                if release < KafkaVersion(3, 6)
                else "Early Access, not for production clusters"
            ),
        )
    elif (release.major, release.minor) < BRIDGE_LINE:
        status, evidence = (
            Status.WARNING,
            f"{listing}: the migration is supported for production from 3.8; 3.9 is the last ZooKeeper-mode line "
            "(the bridge to 4.0) and carries the newest migration fixes",
        )
    else:
        status, evidence = Status.PASS, f"{listing}: the bridge release line to KRaft"
    return _check("release", title, status, evidence, upgrade, source, **details)


def _ibp_fix(release: KafkaVersion | None) -> str:
    """The IBP that unblocks, as the docs of the release the migration runs on ask: the brokers' own line
    from 3.8 (the first release with the migration for production), else -- a release that cannot migrate,
    or only as Early Access -- the bridge release's (docs/ops.html 3.9.0-rc3 'Preparing for migration': "the
    Kafka brokers must be upgraded to software version 3.9.0 and have the inter.broker.protocol.version
    configuration set to 3.9"). Never the value that blocks: a 3.3 cluster's own line is below 3.4."""
    if release is not None and release >= PRODUCTION_SINCE:
        return (
            f"Set inter.broker.protocol.version={release.release_line} on every broker (rolling restart) before the "
            "migration"
        )
    bridge = ".".join(str(n) for n in BRIDGE_LINE)
    return (
        f"Upgrade every broker to Kafka {bridge}.x (rolling restart, IBP unchanged), then set "
        f"inter.broker.protocol.version={bridge} in a second roll (docs/ops.html {bridge}, 'Preparing for migration': "
        f"brokers on {bridge}.0 with inter.broker.protocol.version={bridge})"
        + (
            f"; Kafka {release}'s own line {release.release_line} stays below 3.4-IV0"
            if release is not None
            else ""
        )
    )


def _ibp_check(inputs: ReadinessInputs, releases: Mapping[int, _Release]) -> Check:
    title = "inter.broker.protocol.version of every broker"
    source = (
        f'{SRC_CONFIG_39}: require(interBrokerProtocolVersion.isMigrationSupported, "Cannot enable ZooKeeper '
        "migration without setting 'inter.broker.protocol.version' to 3.4 or higher\") (MetadataVersion.java "
        f"IBP_3_4_IV0); {SRC_DOCS_39} 'Preparing for migration' (IBP set to the release's line) and 'Limitations' "
        '(changing it during the migration is not supported: "you may break the cluster")'
    )
    ibps: dict[int, str | None] = {}
    kraft = _kraft_mode(inputs)
    for b in _known_brokers(inputs):
        if b in kraft:
            continue  # a KRaft broker has no IBP: the quorum's metadata.version governs it
        config = inputs.brokers.get(b)
        ibps[b] = config.inter_broker_protocol_version if config is not None else None
        known = releases.get(b)
        if config is not None and ibps[b] is None and known is not None and known.version is not None:
            ibps[b] = known.version.release_line  # unset: Kafka's default is the broker's own release line
    by_ibp: dict[str, list[int]] = defaultdict(list)
    for b, ibp in sorted(ibps.items()):
        by_ibp[ibp or "unknown"].append(b)
    listing = "; ".join(f"{ibp} on {brokers_text(bs)}" for ibp, bs in sorted(by_ibp.items()))
    details = {"ibp": {str(b): v for b, v in ibps.items()}, "kraft_mode": kraft}
    migrating = migration_state(inputs.state) is not None
    if kraft and not ibps:
        return _check(
            "inter-broker-protocol",
            title,
            Status.PASS,
            f"{brokers_text(kraft)} in KRaft mode: no IBP (the KRaft quorum's metadata.version governs)",
            "",
            source,
            **details,
        )
    if kraft:
        listing += f"; {brokers_text(kraft)} in KRaft mode (no IBP)"
    unknown = by_ibp.get("unknown", [])
    if unknown:
        return _check(
            "inter-broker-protocol",
            title,
            Status.BLOCKER,
            f"no IBP known for {brokers_text(unknown)} (not inventoried, or neither the file nor the release says): "
            f"{listing}",
            "Inventory every broker (server_properties_path)",
            source,
            **details,
        )
    if len(by_ibp) > 1:
        return _check(
            "inter-broker-protocol",
            title,
            Status.BLOCKER,
            f"the brokers' IBPs differ: {listing}"
            + (": the IBP changed DURING the migration" if migrating else ": an IBP roll is not finished"),
            (
                "Put the IBP back to the value the migration started with on every broker, one at a time; Kafka does "
                "not support an IBP change during a migration"
                if migrating
                else "Finish the roll: the same inter.broker.protocol.version on every broker, then restart them one at "
                "a time; the IBP must not change once the migration starts"
            ),
            source,
            **details,
        )
    ibp_text = next(iter(by_ibp))
    ibp = _parse(ibp_text)
    release = _cluster_release(releases)
    if ibp is None:
        return _check(
            "inter-broker-protocol",
            title,
            Status.BLOCKER,
            f"unreadable IBP: {listing}",
            "Fix the value",
            source,
            **details,
        )
    if ibp < MIGRATION_IBP:
        return _check(
            "inter-broker-protocol",
            title,
            Status.BLOCKER,
            f"{listing}: below 3.4-IV0, a broker refuses to start with zookeeper.metadata.migration.enable=true",
            _ibp_fix(release),
            source,
            **details,
        )
    if release is not None and (ibp.major, ibp.minor) != (release.major, release.minor) and not migrating:
        return _check(
            "inter-broker-protocol",
            title,
            Status.BLOCKER,
            f"{listing} on Kafka {release}: the migration expects the IBP at the release's line "
            f"({release.release_line}) and it cannot change during the migration",
            f"Set inter.broker.protocol.version={release.release_line} on every broker (one rolling restart) first",
            source,
            **details,
        )
    return _check(
        "inter-broker-protocol",
        title,
        Status.PASS,
        f"{listing}" + (" (unchanged since the migration started)" if migrating else ""),
        "",
        source,
        **details,
    )


# ---------------------------------------------------------------------------------------------
# Brokers, topic ids
# ---------------------------------------------------------------------------------------------


def _of(inputs: ReadinessInputs, *checks: str) -> list[Finding]:
    return [f for f in inputs.findings if f.check in checks]


def _brokers_registered(inputs: ReadinessInputs) -> Check:
    title = "every broker holding replicas is up"
    source = (
        "KRaftMigrationDriver.areZkBrokersReadyForMigration (3.9.0-rc3): the migration waits until every broker "
        "registered in /brokers/ids and every broker named in a topic assignment registered with the KRaft "
        'quorum ("Still waiting for ZK brokers {} found in metadata to register with KRaft")'
    )
    down = _of(inputs, "broker-down")
    if not down:
        live = sorted(inputs.state.brokers)
        return _check(
            "brokers-registered", title, Status.PASS, f"{brokers_text(live)} registered", "", source
        )
    commands = [c for f in down for c in f.evidence.get("commands") or ()]
    return _check(
        "brokers-registered",
        title,
        Status.BLOCKER,
        "; ".join(f.summary for f in down),
        " ".join(f.action for f in down)
        + " The migration does not start before every broker named in an assignment registered.",
        source,
        brokers=[f.broker_id for f in down],
        commands=commands,
    )


def _repair_run(conf: Mapping[str, Any]) -> FixRun:
    commands = repair_commands(conf)
    return FixRun(TOPIC_ID_REPAIR_DAG, dict(conf), commands["dry_run"], commands["run"])


def _topic_id_checks(inputs: ReadinessInputs) -> list[Check]:
    """Topic ids in ZooKeeper and in every replica's partition.metadata (two checks)."""
    state = inputs.state
    migrated = [
        d for d in inputs.diagnoses if d.topic in state.topics and d.topic not in state.pending_deletions
    ]
    by_case: dict[TopicIdCase, list[TopicIdDiagnosis]] = defaultdict(list)
    for d in migrated:
        by_case[d.case].append(d)
    write_back = sorted(d.topic for d in by_case[TopicIdCase.PRECURSOR] + by_case[TopicIdCase.DIVERGED])
    split = sorted(by_case[TopicIdCase.SPLIT], key=lambda d: d.topic)
    unknown = sorted(by_case[TopicIdCase.UNKNOWN], key=lambda d: d.topic)
    nowhere = sorted(d.topic for d in by_case[TopicIdCase.CONSISTENT] if d.zookeeper_id is None)
    problems = [
        f"{d.topic}: {d.case.value}: {d.reason}"
        for d in sorted(migrated, key=lambda d: d.topic)
        if d.case in (TopicIdCase.PRECURSOR, TopicIdCase.DIVERGED, TopicIdCase.SPLIT, TopicIdCase.UNKNOWN)
    ]
    problems += [f"{t}: no topic_id in ZooKeeper and none on any replica" for t in nowhere]
    source = (
        "ZkTopicMigrationClient.iterateTopics (3.9.0-rc3): visitor.visitTopic(topic, topicIdOpt.get, ...) -- a topic "
        "znode without topic_id aborts the metadata load, and the id copied is ZooKeeper's; LogManager."
        "findStrayReplicas (3.9.0-rc3): a replica whose partition.metadata holds another id becomes a stray log "
        '("this partition now exists with topic ID X not Y"); KafkaController.processTopicIds (3.3.1/3.9): a new '
        "ZooKeeper controller mints a NEW id for a topic znode without one (KAFKA-14190)"
    )
    runs: list[FixRun] = []
    fixes: list[str] = []
    # order matters: a split topic without an id in ZooKeeper gets its chosen id first (file_reset writes it
    # into the znode before anything moves the controller); then one write_back run for every topic whose
    # replicas agree (it moves the controller once); then the other split topics
    for d in split:
        if d.zookeeper_id is None:
            ids = d.ids_on_disk
            keep = max(ids, key=lambda i: (len(ids[i]), i))
            runs.append(
                _repair_run(
                    {
                        "cluster": inputs.cluster,
                        "topics": [d.topic],
                        "strategy": "file_reset",
                        "chosen_topic_id": keep,
                    }
                )
            )
            fixes.append(
                f"{d.topic}: its replicas disagree and ZooKeeper has no id: file_reset keeping {keep} (on the most "
                "replicas), before any controller move"
            )
    if write_back:
        runs.append(_repair_run({"cluster": inputs.cluster, "topics": write_back, "strategy": "write_back"}))
        moved = [d.topic for d in by_case[TopicIdCase.DIVERGED] if d.zookeeper_id is not None]
        fixes.append(
            f"{', '.join(write_back)}: every replica holds one id"
            + (" (one run for all)" if len(write_back) > 1 else "")
            + f": {write_back_effect(write_back, moved)}"
        )
    for d in split:
        if d.zookeeper_id is not None:
            runs.append(
                _repair_run({"cluster": inputs.cluster, "topics": [d.topic], "strategy": "file_reset"})
            )
            fixes.append(f"{d.topic}: replicas disagree: file_reset to ZooKeeper's {d.zookeeper_id}")
    if unknown:
        fixes.append(
            "; ".join(f"{d.topic}: {d.reason}" for d in unknown)
            + " (the ids cannot be verified: fix that first, then run this check again)"
        )
    if nowhere:
        fixes.append(
            f"{', '.join(nowhere)}: no id anywhere (created before IBP 2.8): a ZooKeeper controller move gives them "
            "ids (processTopicIds) -- only once no topic is a precursor (above): that same move would mint new ids "
            "for those"
        )
    ids_check = _check(
        "topic-ids",
        "every topic has a topic_id in ZooKeeper and every replica agrees",
        Status.BLOCKER if problems else Status.PASS,
        "; ".join(problems)
        if problems
        else f"{len(migrated)} topics: ZooKeeper's topic_id is what every replica holds",
        " Then: ".join(fixes)
        + (
            (". Run them in this order" if len(runs) > 1 else ". Run it")
            + " before the migration: once the KRaft controller copied ZooKeeper's ids, a ZooKeeper write-back can no "
            "longer fix a replica"
            if runs
            else ""
        ),
        source,
        fix_runs=runs,
        cases={
            d.topic: d.case.value
            for d in migrated
            if d.case is not TopicIdCase.CONSISTENT or d.zookeeper_id is None
        },
    )
    missing = [
        (d.topic, r)
        for d in sorted(migrated, key=lambda d: d.topic)
        if d.case is TopicIdCase.CONSISTENT and d.zookeeper_id is not None
        for r in d.without_file
    ]
    meta_source = (
        "LogManager.findStrayReplicas (3.9.0-rc3): a migrating ZooKeeper-mode broker given the KRaft controller's "
        'full LeaderAndIsr throws "The log dir ... does not have a topic ID, which is not allowed when running in '
        'KRaft mode"; LogManager.isStrayKraftReplica (3.8+, KAFKA-16814): a KRaft broker sets such a log aside as '
        "stray; UnifiedLog.assignTopicId (3.x): a log without the file writes it on the next LeaderAndIsr carrying the id"
    )
    if not missing:
        return [
            ids_check,
            _check(
                "partition-metadata",
                "every replica holds partition.metadata",
                Status.PASS,
                "every replica read holds partition.metadata",
                "",
                meta_source,
            ),
        ]
    brokers = sorted({r.broker_id for _, r in missing})
    shown = ", ".join(f"{t}-{r.partition} on broker {r.broker_id} ({r.path})" for t, r in missing[:8])
    return [
        ids_check,
        _check(
            "partition-metadata",
            "every replica holds partition.metadata",
            Status.BLOCKER,
            f"{len(missing)} replica(s) without partition.metadata: {shown}"
            + (" ..." if len(missing) > 8 else ""),
            f"Once the topic-ids check passes, restart {brokers_text(brokers)}, one broker at a time, each after its "
            "pre-restart check ("
            + "; ".join(
                trigger_command("kafka_zk_pre_restart_check", {"cluster": inputs.cluster, "broker": b})
                for b in brokers
            )
            + "): at its return the controller's LeaderAndIsr carries the topic id and the broker writes the file "
            "(UnifiedLog.assignTopicId)",
            meta_source,
            replicas=[{"topic": t, "broker_id": r.broker_id, "path": r.path} for t, r in missing],
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Nothing pending
# ---------------------------------------------------------------------------------------------

_NOT_READ = (
    "ZkMigrationClient.readAllMetadata (3.9.0-rc3) copies topics, broker configs, client quotas and SCRAM "
    "credentials, the producer id block, ACLs and delegation tokens -- not the /admin request znodes"
)


def _reassignment_check(inputs: ReadinessInputs) -> Check:
    state = inputs.state
    title = "no partition reassignment in flight"
    moving = sorted({f"{tp.topic}-{tp.partition}" for tp in state.reassigning_partitions})
    listed = (
        [f"{e.topic}-{e.partition}" for e in state.reassign_partitions.partitions]
        if state.reassign_partitions
        else []
    )
    stale = _of(inputs, "reassignment-stale")
    source = (
        f"{_NOT_READ}; at the takeover the ZooKeeper controller driving the reassignment stops being controller "
        "(KafkaZkClient.tryRegisterKRaftControllerAsActiveController); managed platforms require no pending operation"
    )
    if not moving and not listed:
        return _check(
            "reassignment",
            title,
            Status.PASS,
            "no /admin/reassign_partitions, no adding/removing replicas",
            "",
            source,
        )
    evidence = []
    if listed:
        evidence.append(
            f"/admin/reassign_partitions lists {', '.join(listed[:8])}" + (" ..." if len(listed) > 8 else "")
        )
    if moving:
        evidence.append(
            f"topic znodes show {len(moving)} partition(s) moving ({', '.join(moving[:8])}{' ...' if len(moving) > 8 else ''})"
        )
    fix = (
        "Let it finish (kafka-reassign-partitions --verify, or the drain's ReassignmentSensor), then clear its throttles"
        + (f". It cannot finish as it is: {stale[0].summary}; {stale[0].action}" if stale else "")
    )
    return _check(
        "reassignment",
        title,
        Status.BLOCKER,
        "; ".join(evidence),
        fix,
        source,
        partitions=sorted(set(moving) | set(listed)),
    )


def _deletion_check(inputs: ReadinessInputs) -> Check:
    state = inputs.state
    title = "no topic marked for deletion, none left half-deleted"
    source = (
        'ZkTopicMigrationClient.iterateTopics (3.9.0-rc3): "Found N pending topic deletions. These will be not '
        'migrated to KRaft. After the migration, the brokers will reconcile their logs"; KRaftMigrationZkWriter.'
        "handleTopicsSnapshot clears the markers and deletes those topics from ZooKeeper; ZkConfigMigrationClient "
        "copies a topic's config only with its topic"
    )
    markers = sorted(state.pending_deletions)
    pending = {f.topic: f for f in _of(inputs, "deletion-pending")}
    half = _of(inputs, "deletion-half-done", "orphan-partition-dirs")
    if markers:
        evidence = "; ".join(
            pending[t].summary if t in pending else f"{t}: /admin/delete_topics/{t} present" for t in markers
        )
        fixes = [f"{t}: {pending[t].action}" for t in markers if t in pending and pending[t].action]
        return _check(
            "topic-deletion",
            title,
            Status.BLOCKER,
            evidence,
            ("; ".join(fixes) + ". " if fixes else "")
            + "Let each deletion complete in ZooKeeper mode: the migration would drop the topic and leave its logs to the "
            "brokers' reconciliation",
            source,
            topics=markers,
        )
    if half:
        return _check(
            "topic-deletion",
            title,
            Status.WARNING,
            "; ".join(f.summary for f in half),
            "; ".join(f.action for f in half) + " (nothing of a topic ZooKeeper no longer has is migrated)",
            source,
        )
    return _check(
        "topic-deletion",
        title,
        Status.PASS,
        "no /admin/delete_topics marker, no half-deleted topic",
        "",
        source,
    )


def _preferred_election_check(inputs: ReadinessInputs) -> Check:
    election = inputs.state.preferred_replica_election
    title = "no preferred leader election pending"
    source = f"{_NOT_READ}; KafkaController deletes /admin/preferred_replica_election once it carried it out"
    if election is None:
        return _check(
            "preferred-election", title, Status.PASS, "no /admin/preferred_replica_election", "", source
        )
    parts = [f"{p.topic}-{p.partition}" for p in election.partitions]
    return _check(
        "preferred-election",
        title,
        Status.BLOCKER,
        f"/admin/preferred_replica_election requests {len(parts)} partition(s) ({', '.join(parts[:8])})",
        "Wait: the controller carries it out and deletes it within seconds. If it stays, find why in the controller's "
        "controller.log (no controller, an undecodable request) and delete it only then",
        source,
        partitions=parts,
    )


def _throttles_check(inputs: ReadinessInputs) -> Check:
    title = "no replication throttle left"
    source = (
        "ZkMigrationClient.migrateBrokerConfigs and readTopicConfigs (3.9.0-rc3) copy dynamic broker and topic configs, "
        "throttles included, into KRaft; the brokers' rolling restarts of the migration re-replicate under them"
    )
    left = _of(inputs, "throttle-left-set")
    if not left:
        return _check("throttles", title, Status.PASS, "no leader/follower throttle set", "", source)
    commands = []
    for f in left:
        if f.path and f.path.startswith("/config/brokers/"):
            keys = (
                ",".join(sorted(f.evidence))
                or "leader.replication.throttled.rate,follower.replication.throttled.rate"
            )
            commands.append(
                f"kafka-configs --bootstrap-server <broker:port> --alter --entity-type brokers --entity-name "
                f"{f.path.rsplit('/', 1)[1]} --delete-config {keys}"
            )
        elif f.topic:
            commands.append(
                f"kafka-configs --bootstrap-server <broker:port> --alter --entity-type topics --entity-name {f.topic} "
                "--delete-config leader.replication.throttled.replicas,follower.replication.throttled.replicas"
            )
    return _check(
        "throttles",
        title,
        Status.BLOCKER,
        "; ".join(f.summary for f in left),
        "Remove them: " + "; ".join(commands),
        source,
        commands=commands,
    )


def _partition_health_check(inputs: ReadinessInputs) -> Check:
    title = "no offline or under-min-ISR partition"
    source = (
        f"{SRC_DOCS_39} 'Enter Migration Mode on the Brokers' and 'Migrating brokers to KRaft': every broker restarts "
        "twice, one at a time; a partition already offline, under min.insync.replicas or under-replicated loses "
        "availability (or its last copy) at those restarts"
    )
    # partitions a stopped broker explains are that broker's blocker (brokers-registered)
    broken = [
        f for f in _of(inputs, "offline-partitions", "under-min-isr") if not f.evidence.get("down_brokers")
    ]
    lagging = [f for f in _of(inputs, "under-replicated") if not f.evidence.get("down_brokers")]
    if broken:
        return _check(
            "partition-health",
            title,
            Status.BLOCKER,
            "; ".join(f.summary for f in broken),
            "; ".join(f.action for f in broken),
            source,
            topics=sorted({f.topic or "" for f in broken}),
        )
    if lagging:
        return _check(
            "partition-health",
            title,
            Status.WARNING,
            "; ".join(f.summary for f in lagging),
            "Let the followers catch up before the rolling restarts: " + "; ".join(f.action for f in lagging),
            source,
        )
    return _check(
        "partition-health", title, Status.PASS, "every partition has a leader and a full ISR", "", source
    )


def _lease_check(inputs: ReadinessInputs) -> Check:
    title = "no maintenance run of this provider holds the cluster"
    source = (
        f"kafka.safety: {LEASE_PATH} is held while a provider run writes ZooKeeper (drain, repair, cleanup, "
        "election); the KRaft controller owns ZooKeeper's metadata once it claims /controller"
    )
    extras = inputs.extras
    if not extras.lease_present:
        return _check("maintenance-lease", title, Status.PASS, f"{LEASE_PATH} is free", "", source)
    holder = LeaseHolder.decode(extras.lease)
    who = holder.describe() if holder is not None else "an unreadable holder record"
    return _check(
        "maintenance-lease",
        title,
        Status.BLOCKER,
        f"{LEASE_PATH} is held by {who}",
        "Let that run finish (or, if it died, check get "
        f"{LEASE_PATH} in zookeeper-shell and delete it once its expiry passed): no ZooKeeper writer may run beside "
        "the migration",
        source,
        holder=json.loads(holder.encode()) if holder is not None else None,
    )


# ---------------------------------------------------------------------------------------------
# Features and configuration
# ---------------------------------------------------------------------------------------------


def _features_check(inputs: ReadinessInputs, releases: Mapping[int, _Release]) -> Check:
    title = "no feature the release's migration or KRaft mode does not support"
    source = (
        "JBOD: docs/ops.html 3.4.0/3.5.0 'Missing Features' (KRaft without multiple log dirs); KafkaConfig.scala 3.6.0 "
        'require(logDirs.size == 1, "Cannot enable ZooKeeper migration when multiple log directories (aka JBOD) are in '
        'use.") (KAFKA-15450); 3.7.0-3.9.0-rc3 require(isDirectoryAssignmentSupported) for more than one log dir '
        "(IBP >= 3.7-IV2); docs/ops.html 3.8.0/3.9.0-rc3: KRaft JBOD is Early Access, not yet for production, and "
        "'Limitations': a failed log dir of a migrating ZK broker shuts it down (KAFKA-16431). Authorizers: "
        'KafkaConfig.scala 3.4.0/3.5.0 require(!authorizer.class.name) "ZooKeeper migration does not yet support '
        'authorizers" (gone at 3.6.0)'
    )
    blockers: list[str] = []
    warnings: list[str] = []
    for b, config in sorted(inputs.brokers.items()):
        release = releases.get(b, _Release(None, "")).version
        ibp = _parse(config.inter_broker_protocol_version)
        if len(config.log_dirs) > 1:
            dirs = f"{config.where}: {len(config.log_dirs)} log dirs (JBOD)"
            if release is None:
                blockers.append(f"{dirs} on an unknown release")
            elif release < KafkaVersion(3, 6):
                blockers.append(f"{dirs}: KRaft mode of Kafka {release.release_line} has no JBOD")
            elif release < KafkaVersion(3, 7):
                blockers.append(
                    f"{dirs}: Kafka {release.release_line} refuses migration mode with more than one log dir"
                )
            elif ibp is None or ibp < JBOD_IBP:
                blockers.append(
                    f"{dirs} with inter.broker.protocol.version={config.inter_broker_protocol_version}: migration mode "
                    "needs IBP >= 3.7-IV2 for JBOD"
                )
            else:
                warnings.append(
                    f"{dirs}: KRaft JBOD is Early Access in the docs; a failed log dir stops the broker"
                )
        if (
            release is not None
            and release < KafkaVersion(3, 6)
            and "authorizer.class.name" in config.settings
        ):
            blockers.append(
                f"{config.where}: authorizer.class.name={config.settings['authorizer.class.name']}: Kafka "
                f"{release.release_line} refuses migration mode with an authorizer"
            )
    if blockers:
        return _check(
            "kraft-features",
            title,
            Status.BLOCKER,
            "; ".join(blockers + warnings),
            "On 3.9: keep the log dirs and set inter.broker.protocol.version=3.9 (>= 3.7-IV2), or move each broker to one "
            "log dir (kafka-reassign-partitions with log_dirs) before the migration; upgrade 3.4/3.5 clusters to 3.9",
            source,
        )
    if warnings:
        return _check(
            "kraft-features",
            title,
            Status.WARNING,
            "; ".join(warnings),
            "Repair any failed log dir before each restart; test KRaft JBOD before relying on it",
            source,
        )
    return _check(
        "kraft-features",
        title,
        Status.PASS,
        "one log dir per broker; no feature the release lacks",
        "",
        source,
    )


def _parse_voters(text: str) -> list[int] | None:
    """``controller.quorum.voters``: ``{id}@{host}:{port},...`` (``QuorumConfig.parseVoterConnections``)."""
    ids = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not host or not port.isdigit():
            return None
        try:
            ids.append(int(node))
        except ValueError:
            return None
    return ids or None


def _protocol_map_names(text: str) -> set[str]:
    return {pair.split(":", 1)[0].strip().upper() for pair in text.split(",") if ":" in pair}


def _broker_config_problems(config: BrokerConfig) -> list[str]:
    """What ``KafkaConfig`` (3.9.0-rc3) refuses for a ZooKeeper-mode broker with migration enabled."""
    settings = config.settings
    problems = []
    voters_text = settings.get("controller.quorum.voters", "").strip()
    bootstrap = settings.get("controller.quorum.bootstrap.servers", "").strip()
    if voters_text and _parse_voters(voters_text) is None:
        problems.append(f"controller.quorum.voters={voters_text!r} is not {{id}}@{{host}}:{{port}},...")
    if not voters_text and not bootstrap:
        problems.append(
            'neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set ("If using '
            "zookeeper.metadata.migration.enable, either controller.quorum.bootstrap.servers must contain the set of "
            'bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers")'
        )
    names = [n.strip() for n in settings.get("controller.listener.names", "").split(",") if n.strip()]
    if not names:
        problems.append(
            'controller.listener.names is empty ("controller.listener.names must not be empty when running in '
            'ZooKeeper migration mode")'
        )
    mapped = _protocol_map_names(
        settings.get("listener.security.protocol.map", DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP)
    )
    unmapped = [n for n in names if n.upper() not in mapped]
    if unmapped:
        problems.append(
            f"controller listener {', '.join(unmapped)} not in listener.security.protocol.map (a ZooKeeper-mode broker "
            "gets no default mapping for it: effectiveListenerSecurityProtocolMap; the docs add it)"
        )
    if "process.roles" in settings:
        problems.append(
            f"process.roles={settings['process.roles']} makes it a KRaft node, not a migrating ZK broker"
        )
    return problems


def _kraft_broker_config_problems(config: BrokerConfig) -> list[str]:
    """What ``KafkaConfig.validateValues`` (3.9.0-rc3, KRaft branch) refuses for a migration's KRaft broker:
    ``node.id`` (a synonym of ``broker.id``, ``populateSynonyms``) must be set and be this broker's id, the
    quorum named (voters or bootstrap servers), a controller listener name given; docs/ops.html (3.9)
    'Migrating brokers to KRaft': ``process.roles=broker`` only (combined mode cannot be migrated to)."""
    settings = config.settings
    problems = []
    roles = {r.strip() for r in settings.get("process.roles", "").split(",") if r.strip()}
    if roles != {"broker"}:
        problems.append(
            f"process.roles={settings.get('process.roles')}: a migrated broker runs with broker only"
        )
    node = settings.get("node.id", "").strip()
    if config.configured_broker_id is None and not node:
        problems.append("no node.id (nor broker.id): KafkaConfig needs it in KRaft mode")
    elif node and node != str(config.broker_id):
        problems.append(
            f"node.id={node}, but the broker's id is {config.broker_id} (its meta.properties, its replicas)"
        )
    if (
        not settings.get("controller.quorum.voters", "").strip()
        and not settings.get("controller.quorum.bootstrap.servers", "").strip()
    ):
        problems.append("neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set")
    if not [n for n in settings.get("controller.listener.names", "").split(",") if n.strip()]:
        problems.append("controller.listener.names is empty")
    return problems


def _config_check(inputs: ReadinessInputs) -> Check:
    title = "configuration the migration needs on every broker"
    source = (
        f'{SRC_CONFIG_39}: broker.id >= 0 ("broker.id generation is incompatible with ZooKeeper migration"), '
        "brokerId <= reserved.broker.max.id while broker.id.generation.enable, controller.quorum.voters or "
        "controller.quorum.bootstrap.servers, controller.listener.names; "
        f"{SRC_DOCS_39} 'Enter Migration Mode on the Brokers' (the controller listener in listener.security.protocol.map)"
    )
    blockers: list[str] = []
    todo: list[str] = []
    enabled = sorted(b for b, c in inputs.brokers.items() if c.migration_enabled)
    kraft = _kraft_mode(inputs)
    for b, config in sorted(inputs.brokers.items()):
        settings = config.settings
        if b in kraft:  # rolled to KRaft mode during the migration: its own rules
            blockers += [f"{config.where} (KRaft mode): {p}" for p in _kraft_broker_config_problems(config)]
            continue
        reserved_text = settings.get("reserved.broker.max.id", str(DEFAULT_RESERVED_BROKER_MAX_ID))
        generation = settings.get("broker.id.generation.enable", "true").strip().lower() == "true"
        try:
            reserved = int(reserved_text)
        except ValueError:
            blockers.append(f"{config.where}: reserved.broker.max.id={reserved_text!r} is not a number")
            continue
        if config.configured_broker_id is None:
            too_high = generation and b > reserved
            blockers.append(
                f"{config.where}: broker.id not set (generated id {b}): set broker.id={b}"
                + (
                    f" and broker.id.generation.enable=false (or reserved.broker.max.id >= {b}): with generation on, "
                    f"KafkaConfig refuses a broker.id above reserved.broker.max.id={reserved}"
                    if too_high
                    else ""
                )
            )
        elif generation and config.configured_broker_id > reserved:
            blockers.append(
                f"{config.where}: broker.id={config.configured_broker_id} > reserved.broker.max.id={reserved} with "
                "broker.id.generation.enable on: set broker.id.generation.enable=false (the docs: broker.id must not "
                "exceed reserved.broker.max.id)"
            )
        if config.migration_enabled:
            blockers += [f"{config.where}: {p}" for p in _broker_config_problems(config)]
    if kraft:
        todo.append(f"{brokers_text(kraft)} in KRaft mode (process.roles=broker)")
    if not enabled and not kraft:
        todo.append(
            "no broker is in migration mode yet; at 'Enter Migration Mode on the Brokers' each gets "
            "zookeeper.metadata.migration.enable=true, controller.quorum.bootstrap.servers (or .voters), "
            "controller.listener.names and that listener in listener.security.protocol.map"
        )
    elif len(enabled) + len(kraft) < len(inputs.brokers) and enabled:
        todo.append(
            f"{brokers_text(enabled)} in migration mode, "
            f"{brokers_text(sorted(set(inputs.brokers) - set(enabled) - set(kraft)))} not yet (the migration starts when "
            "every broker is)"
        )
    details = {"migration_mode": enabled, "kraft_mode": kraft, "brokers": sorted(inputs.brokers)}
    if blockers:
        return _check(
            "migration-config",
            title,
            Status.BLOCKER,
            "; ".join(blockers),
            "Fix server.properties as named and restart those brokers one at a time",
            source,
            **details,
        )
    return _check(
        "migration-config",
        title,
        Status.PASS,
        "explicit broker.id on every broker; " + "; ".join(todo)
        if todo
        else "every broker's migration settings hold",
        "",
        source,
        **details,
    )


def _controller_ids_check(inputs: ReadinessInputs) -> Check:
    title = "KRaft controller node ids do not collide with broker ids"
    source = (
        f"{SRC_DOCS_39} 'Provisioning the KRaft controller quorum': \"The KRaft cluster node.id values must be different "
        'from any existing ZK broker broker.id. In KRaft-mode, the brokers and controllers share the same Node ID namespace."'
    )
    brokers = set(_known_brokers(inputs)) | {
        c.configured_broker_id for c in inputs.brokers.values() if c.configured_broker_id is not None
    }
    planned = set(inputs.controller_node_ids)
    configured: dict[int, list[int]] = defaultdict(list)
    for b, config in inputs.brokers.items():
        voters = _parse_voters(config.settings.get("controller.quorum.voters", "")) or []
        for node in voters:
            configured[node].append(b)
    clashes = sorted((planned | set(configured)) & brokers)
    details = {
        "planned": sorted(planned),
        "in_broker_configs": sorted(configured),
        "broker_ids": sorted(brokers),
    }
    if clashes:
        where = [
            f"{n} ("
            + ", ".join(
                (["planned"] if n in planned else [])
                + ([f"controller.quorum.voters of {brokers_text(configured[n])}"] if n in configured else [])
            )
            + ")"
            for n in clashes
        ]
        return _check(
            "controller-ids",
            title,
            Status.BLOCKER,
            f"controller node ids {', '.join(where)} are broker ids",
            f"Choose controller node.id values outside the broker ids {sorted(brokers)} (the docs use 3000+), in the "
            "controllers' node.id and every broker's controller.quorum.voters",
            source,
            **details,
        )
    return _check(
        "controller-ids",
        title,
        Status.PASS,
        f"controllers {sorted(planned | set(configured))}, brokers {sorted(brokers)}",
        "",
        source,
        **details,
    )


# ---------------------------------------------------------------------------------------------
# What will be copied
# ---------------------------------------------------------------------------------------------


def _metadata_copy_check(inputs: ReadinessInputs, release: KafkaVersion | None) -> Check:
    """Counts of what the initial load copies, what the release leaves behind, what would abort it."""
    state = inputs.state
    extras = inputs.extras
    title = "what the migration will copy"
    migrated = [t for t in state.topics.values() if t.name not in state.pending_deletions]
    topic_configs = [t for t in migrated if t.config]
    broker_configs = state.configs.brokers
    users = inputs.user_configs
    scram = 0
    quota_entities = 0
    aborting: list[str] = []
    entities: list[tuple[str, str, Mapping[str, str]]] = [
        ("clients", name, config) for name, config in state.configs.clients.items()
    ] + [("ips", name, config) for name, config in state.configs.ips.items()]
    if users is not None:
        entities += [("users", name, config) for name, config in users.items()]
    for entity_type, name, config in sorted(entities):
        keys = dict(config)
        if entity_type == "users" and "/clients/" not in name:
            for mechanism in SCRAM_MECHANISMS:
                if keys.pop(mechanism, None) is not None:
                    scram += 1
        bad = sorted(k for k, v in keys.items() if not _number(v))
        if bad:
            aborting.append(
                f'/config/{entity_type}/{name}: {", ".join(bad)} not a number (IllegalStateException "Unexpected client '
                'quota configuration value": ZkConfigMigrationClient.iterateClientQuotas -> ZkAdminManager.'
                "clientQuotaPropsToDoubleMap aborts the load)"
            )
        elif keys:
            quota_entities += 1
    counts = {
        "topics": len(migrated),
        "partitions": sum(t.partition_count for t in migrated),
        "topic_configs": len(topic_configs),
        "topic_config_keys": sum(len(t.config) for t in topic_configs),
        "broker_configs": len(broker_configs),
        "broker_config_keys": sum(len(c) for c in broker_configs.values()),
        "client_quota_entities": quota_entities,
        "scram_credentials": scram if users is not None else None,
        "acl_resources": extras.acl_resources,
        "acl_entries": extras.acl_entries,
        "delegation_tokens": extras.delegation_tokens,
        "producer_id_block": state.producer_id_block is not None,
    }
    not_carried: list[str] = []
    if release is not None and release >= MIGRATION_SINCE:  # before 3.4 nothing is migrated at all
        if release < KafkaVersion(3, 5):
            if extras.acl_resources:
                not_carried.append(f"{extras.acl_entries} ACL entries (ACLs are copied from 3.5)")
            if scram:
                aborting.append(
                    f"{scram} SCRAM credential(s): Kafka {release.release_line}'s load reads them as quotas and aborts "
                    "(ZkMigrationClient.migrateClientQuotas 3.4.0 has no SCRAM handling)"
                )
        if release < KafkaVersion(3, 6) and extras.delegation_tokens:
            not_carried.append(f"{extras.delegation_tokens} delegation token(s) (copied from 3.6)")
    if extras.consumer_groups:
        not_carried.append(
            f"offsets of ZooKeeper-based consumer groups {', '.join(extras.consumer_groups[:8])} under /consumers"
        )
    orphan_configs = sorted(set(state.configs.topics) - set(state.topics))
    if orphan_configs:
        not_carried.append(f"/config/topics of topics that no longer exist: {', '.join(orphan_configs[:8])}")
    if extras.acl_unreadable:
        aborting.append(f"ACL znodes the authorizer cannot read: {', '.join(extras.acl_unreadable[:8])}")
    unverified = (
        []
        if users is not None
        else ["/config/users was not read: SCRAM credentials and user quotas not checked"]
    )
    shown = ", ".join(
        f"{k.replace('_', ' ')} {'present' if v is True else v}"
        for k, v in counts.items()
        if v not in (None, False)
    )
    source = (
        "ZkMigrationClient.readAllMetadata: 3.4.0 topics, broker configs, client quotas, producer id; 3.5.0 + ACLs and "
        "SCRAM credentials; 3.6.0-3.9.0-rc3 + delegation tokens; ZkConfigMigrationClient.iterateClientQuotas (3.9.0-rc3: "
        "SCRAM mechanisms taken out, every other value must be a number)"
    )
    details = {"counts": counts, "not_carried": not_carried, "aborting": aborting, "unverified": unverified}
    if aborting:
        return _check(
            "metadata-copy",
            title,
            Status.BLOCKER,
            f"{shown}; the load would abort on: " + "; ".join(aborting),
            "Fix or remove those entries (kafka-configs --alter --delete-config) before the migration",
            source,
            **details,
        )
    if not_carried or unverified:
        return _check(
            "metadata-copy",
            title,
            Status.WARNING,
            f"{shown}; not carried: " + "; ".join(not_carried + unverified),
            "Move what you need before the migration (those items stay in ZooKeeper only)",
            source,
            **details,
        )
    return _check("metadata-copy", title, Status.PASS, shown, "", source, **details)


def _number(text: str) -> bool:
    """What ``String.toDouble`` (Java's ``Double.parseDouble``) accepts, for the values quotas hold."""
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Who writes ZooKeeper directly
# ---------------------------------------------------------------------------------------------


def _zookeeper_writers_check(inputs: ReadinessInputs) -> Check:
    state = inputs.state
    title = "no client or tool writes ZooKeeper directly"
    own = (
        "This provider's own writers (drain, topicId repair, deletion cleanup, post-maintenance move-back, preferred "
        "election) refuse while /migration exists or a KRaft controller holds /controller (kafka.safety."
        "kraft_migration_in_progress)"
    )
    source = (
        "KafkaZkClient.retryMigrationRequestsUntilConnected (3.9.0-rc3): every migration write is conditional on "
        "/controller_epoch and /migration, a write beside it is unknown to the KRaft log; Amazon MSK's migration "
        "prerequisites (no tool writing ZooKeeper directly)"
    )
    evidence = []
    uses_ids = any(t.topic_id is not None for t in state.topics.values())
    old_format = sorted(t.name for t in state.topics.values() if t.format_version < 3)
    if uses_ids and old_format:
        evidence.append(
            f"topic znodes last written in format v1/v2 by a pre-2.8 client or tool (kafka-topics --zookeeper <= 2.7, "
            f"AdminUtils): {', '.join(old_format[:8])}"
        )
    legacy = sorted(
        {f"{n.entity_type}/{n.entity_name}" for n in state.config_change_notifications if n.version == 1}
    )
    if legacy:
        evidence.append(
            f"config change notifications in the legacy version 1 (a 1.0-era tool): {', '.join(legacy[:8])}"
        )
    if inputs.extras.consumer_groups:
        evidence.append(
            f"ZooKeeper-based consumers commit offsets under /consumers ({', '.join(inputs.extras.consumer_groups[:8])})"
        )
    if state.reassign_partitions is not None:
        evidence.append("/admin/reassign_partitions (written by a --zookeeper tool or this provider's drain)")
    if state.preferred_replica_election is not None:
        evidence.append("/admin/preferred_replica_election (a --zookeeper tool or this provider's election)")
    if evidence:
        return _check(
            "zookeeper-writers",
            title,
            Status.WARNING,
            "; ".join(evidence),
            "Find and stop every tool that writes ZooKeeper (kafka-topics/kafka-configs/kafka-reassign-partitions/kafka-acls "
            "with --zookeeper or zookeeper.connect, old clients, automation) or move it to --bootstrap-server. "
            + own,
            source,
            traces=evidence,
        )
    return _check(
        "zookeeper-writers",
        title,
        Status.PASS,
        "no trace in ZooKeeper of a client writing it directly (a snapshot shows only what they leave behind: stop "
        f"every --zookeeper tool before the migration). {own}",
        "",
        source,
    )
