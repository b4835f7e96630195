"""The known traps of a ZooKeeper-to-KRaft migration, each a check with its own refusal (pure).

From Kafka's and operators' issue trackers; the release each was fixed in read from the apache/kafka
history (the first release tags containing the fix commits):

============  ==========================================================  =============================
issue          what goes wrong                                             fixed in
============  ==========================================================  =============================
KAFKA-17146   a stale ``/migration`` makes a new attempt skip the initial  docs only (3.9.0: the revert
              load; its dual-write then deletes topics created meanwhile   for KRaft brokers omits it)
KAFKA-19480   ``/migration`` with null data (zookeeper-security-migration  not in 3.9.0 (apache/kafka
              without --enable.path.check): the migration hangs            #20627, merged 2025-10-07)
KAFKA-20488   a revert while the KRaft controller epoch is not below the   docs only (2026)
              ZooKeeper controller's: partitions offline
KAFKA-20960   finalizing before every broker re-registered as a KRaft      unfixed (open)
              broker
KAFKA-15605   topics marked for deletion migrated / resurrected            3.6.1, 3.7.0
KAFKA-16120   reassignments in hybrid mode leave stray partitions          3.6.2, 3.7.0
KAFKA-16222   quota entity names migrated sanitized (``%40``...)           3.6.2, 3.7.1, 3.8.0
KAFKA-16411   default quota entities migrated as the user named ""         3.6.2, 3.7.1, 3.8.0
KAFKA-15009   ACLs made while dual-writing not written to ZooKeeper        3.5.0
KAFKA-14970   SCRAM credentials not dual-written                           3.5.0
============  ==========================================================  =============================

The release-bound rows were checked against apache/kafka's history (``git log --grep`` for the issue,
then ``git tag --contains`` for the first release tag of each line holding the fix commit):
KAFKA-15605 1de84590c476 (3.6.1), 339d2556c64e (3.7.0); KAFKA-16120 7486223d9e39 (3.6.2), 4280df481619
(3.7.0); KAFKA-16222 c74a9832df47 (3.6.2), 81d5084ca9fe (3.7.1), 34d365fd8a8e (3.8.0); KAFKA-16411
fbff947d2595 (3.6.2), fedf8cfa7a2c (3.7.1), 8d914b543d5d (3.8.0); KAFKA-15009 82dae82de3df (3.5.0);
KAFKA-14970 56f732dbaf7c (3.5.0). tests/integration/test_kraft_migration_rollbacks.py plants each
alone on a release that has the bug (3.4.1, 3.6.1, 3.7.0).

Each :class:`Trap` says whether it applies, and if so whether the plan refuses (``refused``: the
run changes nothing and says what to do) or handles it (``handled``: a step of the plan does what
the trap needs, named in the plan).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .versions import KafkaVersion


class TrapStatus(enum.StrEnum):
    CLEAR = "clear"
    """Checked: not present (or the release has the fix)."""
    HANDLED = "handled"
    """Present: a step of this plan deals with it."""
    REFUSED = "refused"
    """Present: the plan refuses; nothing is changed."""


@dataclass(frozen=True)
class Trap:
    """One trap's check: the issue, what was found, and what the run does about it."""

    issue: str
    title: str
    status: TrapStatus
    evidence: str
    action: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "issue": self.issue,
            "title": self.title,
            "status": self.status.value,
            "evidence": self.evidence,
            "action": self.action,
            "source": self.source,
        }

    def __str__(self) -> str:
        tail = f" {self.action}" if self.action else ""
        return f"[{self.issue} {self.status.value}] {self.title}: {self.evidence}.{tail}"


def _fixed(release: KafkaVersion | None, fixes: Sequence[str]) -> bool | None:
    """Whether ``release`` carries a fix shipped in the ``fixes`` releases (one per release line,
    the lowest line's fix covering every line after it that has no entry). None: release unknown."""
    if release is None:
        return None
    versions = sorted(KafkaVersion.parse(f) for f in fixes)
    line = (release.major, release.minor)
    same_line = [v for v in versions if (v.major, v.minor) == line]
    if same_line:
        return not release < same_line[0]
    later_lines = [v for v in versions if (v.major, v.minor) < line]
    return bool(later_lines)


@dataclass(frozen=True)
class TrapInputs:
    """What the traps read.

    :param release: the brokers' lowest Kafka release (None: unknown -- every release-bound trap
        whose feature is in use then refuses).
    :param quota_entities: ZooKeeper's client quota entity paths (``users/<name>``,
        ``clients/<name>``, ``users/<u>/clients/<c>``), names as stored (sanitized).
    """

    release: KafkaVersion | None
    pending_deletions: tuple[str, ...] = ()
    reassigning: tuple[str, ...] = ()
    quota_entities: tuple[str, ...] = ()
    acl_entries: int = 0
    scram_credentials: int = 0
    stale_migration: str | None = None
    migration_null: bool = False
    stale_controller_logs: Mapping[int, str] = field(default_factory=dict)


def release_traps(inputs: TrapInputs) -> list[Trap]:
    """The traps bound to a release: each refuses when its feature is in use on a release without the fix."""
    release = inputs.release
    shown = (
        f"{release.major}.{release.minor}.{release.patch}" if release is not None else "an unknown release"
    )

    def trap(issue: str, title: str, fixes: Sequence[str], in_use: Sequence[str] | str, action: str) -> Trap:
        fixed = _fixed(release, fixes)
        used = (
            in_use if isinstance(in_use, str) else ", ".join(in_use[:8]) + (" ..." if len(in_use) > 8 else "")
        )
        source = f"fixed in {', '.join(fixes)}"
        if not used:
            return Trap(
                issue, title, TrapStatus.CLEAR, f"not in use ({source}; the cluster runs {shown})", "", source
            )
        if fixed:
            return Trap(
                issue,
                title,
                TrapStatus.CLEAR,
                f"{source}; the cluster runs {shown} (in use: {used})",
                "",
                source,
            )
        return Trap(
            issue,
            title,
            TrapStatus.REFUSED,
            f"in use: {used}; the cluster runs {shown}, {source}",
            action,
            source,
        )

    upgrade = "Upgrade every broker to 3.9.x first (the last ZooKeeper-mode release, with every fix)."
    sanitized = [e for e in inputs.quota_entities if "%" in e]
    defaults = [e for e in inputs.quota_entities if "<default>" in e.split("/")]
    return [
        trap(
            "KAFKA-15605",
            "topics marked for deletion are migrated",
            ("3.6.1", "3.7.0"),
            list(inputs.pending_deletions),
            "Let the deletions finish (kafka_zk_deletion_cleanup / the daily deletion verdict) or " + upgrade,
        ),
        trap(
            "KAFKA-16120",
            "a reassignment while brokers are in hybrid mode leaves stray partitions",
            ("3.6.2", "3.7.0"),
            list(inputs.reassigning),
            "Let the reassignment finish before the migration, and do not reassign until it is finalized; or "
            + upgrade,
        ),
        trap(
            "KAFKA-16222",
            "client quota entities are migrated under their sanitized ZooKeeper names",
            ("3.6.2", "3.7.1", "3.8.0"),
            sanitized,
            upgrade,
        ),
        trap(
            "KAFKA-16411",
            "default client quota entities are migrated as a user or client named ''",
            ("3.6.2", "3.7.1", "3.8.0"),
            defaults,
            upgrade,
        ),
        trap(
            "KAFKA-15009",
            "ACLs created while dual-writing are not written to ZooKeeper (lost by a rollback)",
            ("3.5.0",),
            f"{inputs.acl_entries} ACL entries" if inputs.acl_entries else "",
            upgrade,
        ),
        trap(
            "KAFKA-14970",
            "SCRAM credentials are not dual-written (lost by a rollback)",
            ("3.5.0",),
            f"{inputs.scram_credentials} SCRAM credentials" if inputs.scram_credentials else "",
            upgrade,
        ),
    ]


def stale_migration_trap(inputs: TrapInputs, *, handled_by_plan: bool) -> list[Trap]:
    """KAFKA-17146 / KAFKA-19480 before provisioning: a ``/migration`` left over or without data is
    removed by the plan (handled), after it was shown that no controller of the cluster file runs."""
    out = []
    if inputs.migration_null:
        out.append(
            Trap(
                "KAFKA-19480",
                "/migration without data (zookeeper-security-migration) makes the migration hang",
                TrapStatus.HANDLED if handled_by_plan else TrapStatus.REFUSED,
                "/migration exists with no data",
                "The plan deletes it before the controllers start (the driver would loop parsing it)."
                if handled_by_plan
                else "Run the DAG back (it removes /migration with the controllers stopped), then forward again.",
                # KafkaZkClient.getOrCreateMigrationState creates /migration only on NONODE and
                # MigrationZNode.decode fails on null data (3.9.0-rc3); apache/kafka#20627 recreates it
                "not fixed in 3.9.0 (apache/kafka#20627, merged 2025-10-07, recreates it)",
            )
        )
    else:
        out.append(
            Trap(
                "KAFKA-19480",
                "/migration without data",
                TrapStatus.CLEAR,
                "/migration is not empty or absent",
            )
        )
    if inputs.stale_migration and not inputs.migration_null:
        out.append(
            Trap(
                "KAFKA-17146",
                "a stale /migration makes a new attempt skip the initial load",
                TrapStatus.HANDLED if handled_by_plan else TrapStatus.REFUSED,
                inputs.stale_migration,
                "The plan saves and deletes it before the controllers start."
                if handled_by_plan
                else "Run the DAG back to remove it.",
                "docs/ops.html 3.9.0-rc3 'Reverting': the row for 'Migrating brokers to KRaft' never removes it",
            )
        )
    else:
        out.append(Trap("KAFKA-17146", "a stale /migration", TrapStatus.CLEAR, "no /migration left over"))
    for node, why in sorted(inputs.stale_controller_logs.items()):
        out.append(
            Trap(
                "KAFKA-17146",
                "a controller's metadata log from an earlier attempt",
                TrapStatus.REFUSED,
                f"controller {node}: {why}",
                "Its controller would skip the initial load and write its old metadata over ZooKeeper. Retire that "
                "storage (the DAG's back run from this phase renames it aside) or reformat it by hand, then plan again.",
            )
        )
    return out


def epoch_trap(
    zk_controller_epoch: int,
    kraft_controller_epoch: int,
    max_partition_controller_epoch: int,
    partitions_above: Sequence[str],
) -> tuple[Trap, int | None]:
    """KAFKA-20488: the ZooKeeper-mode controller elected when ``/controller`` goes gets epoch
    ``/controller_epoch`` + 1 (``KafkaZkClient.registerControllerAndIncrementControllerEpoch``); it
    aborts the election of any partition whose state znode carries a higher ``controller_epoch``
    (``ZkPartitionStateMachine.doElectLeaderForPartitions``, 3.9.0-rc3: "Aborted leader election ...
    already written by another controller"), and the dual-write wrote the KRaft epoch there
    (``ZkTopicMigrationClient`` passes ``state.kraftControllerEpoch()``). Handled by raising
    ``/controller_epoch`` in the same multi that deletes ``/controller``, so the new controller's
    epoch is above all of them. Returns the trap and the epoch to raise to (None: no need)."""
    highest = max(kraft_controller_epoch, max_partition_controller_epoch)
    new_epoch = zk_controller_epoch + 1
    if highest < new_epoch:
        return (
            Trap(
                "KAFKA-20488",
                "revert with a KRaft controller epoch above ZooKeeper's",
                TrapStatus.CLEAR,
                f"/controller_epoch {zk_controller_epoch}: the next ZooKeeper-mode controller gets epoch {new_epoch}, "
                f"above the KRaft epoch {kraft_controller_epoch} and every partition state's (highest "
                f"{max_partition_controller_epoch})",
            ),
            None,
        )
    shown = ", ".join(partitions_above[:8]) + (
        f" and {len(partitions_above) - 8} more" if len(partitions_above) > 8 else ""
    )
    return (
        Trap(
            "KAFKA-20488",
            "revert with a KRaft controller epoch above ZooKeeper's",
            TrapStatus.HANDLED,
            f"/controller_epoch {zk_controller_epoch} would give the next ZooKeeper-mode controller epoch {new_epoch}, "
            f"not above the KRaft epoch {kraft_controller_epoch} / partition states' {max_partition_controller_epoch}"
            + (f" ({shown})" if shown else "")
            + ": those partitions' elections would abort and stay offline",
            f"The plan raises /controller_epoch to {highest} (versioned, in the multi that deletes /controller), so the "
            f"new controller gets epoch {highest + 1}.",
            "PartitionStateMachine.scala 3.9.0-rc3 line 385; kafka-site PR 860 (KAFKA-20488)",
        ),
        highest,
    )


@dataclass(frozen=True)
class FinalizeFacts:
    """What finalization needs to know of every broker.

    :param kraft_registrations: broker -> (registered as a KRaft broker, fenced) from the metadata log.
    :param zookeeper_registered: brokers still in ``/brokers/ids``.
    :param broker_modes: broker -> the mode its file says.
    :param zookeeper_only: ZooKeeper-only features found (``broker 1: authorizer.class.name=...AclAuthorizer``).
    """

    brokers: tuple[int, ...]
    kraft_registrations: Mapping[int, tuple[bool, bool]]
    zookeeper_registered: tuple[int, ...]
    broker_modes: Mapping[int, str | None]
    zookeeper_only: tuple[str, ...] = ()


def finalize_traps(facts: FinalizeFacts) -> list[Trap]:
    """KAFKA-20960 and the ZooKeeper-only features: what must hold before the first controller
    restarts without the migration flag (after it, there is no way back)."""
    problems = []
    for broker in facts.brokers:
        registration = facts.kraft_registrations.get(broker)
        if registration is None:
            problems.append(f"broker {broker} is not registered in the KRaft quorum")
        elif not registration[0]:
            problems.append(
                f"broker {broker} is registered as a ZooKeeper-mode broker in migration mode, not as a KRaft broker"
            )
        elif registration[1]:
            problems.append(f"broker {broker} is registered as a KRaft broker but fenced")
        if broker in facts.zookeeper_registered:
            problems.append(f"broker {broker} is still registered in /brokers/ids")
        mode = facts.broker_modes.get(broker)
        if mode != "kraft-broker":
            problems.append(f"broker {broker}'s server.properties is not a KRaft broker's ({mode})")
    traps = [
        Trap(
            "KAFKA-20960",
            "finalizing before every broker re-registered as a KRaft broker",
            TrapStatus.REFUSED if problems else TrapStatus.CLEAR,
            "; ".join(problems)
            if problems
            else f"brokers {list(facts.brokers)} all registered as unfenced KRaft brokers",
            "Restart the brokers named in KRaft mode (this DAG's forward run from dual-write-zk-brokers does) and "
            "finalize when every one registered; the controller does not check it (KAFKA-20960, unfixed)."
            if problems
            else "",
            "KAFKA-20960 (apache/kafka PR 23338, open)",
        )
    ]
    traps.append(
        Trap(
            "zookeeper-only",
            "no ZooKeeper-only feature in use",
            TrapStatus.REFUSED if facts.zookeeper_only else TrapStatus.CLEAR,
            "; ".join(facts.zookeeper_only) if facts.zookeeper_only else "none found",
            "Move them to their KRaft equivalents (StandardAuthorizer, no zookeeper.* on KRaft nodes) first; after "
            "finalization ZooKeeper is no longer written"
            if facts.zookeeper_only
            else "",
            "docs/ops.html 3.9.0-rc3 'Migrating brokers to KRaft' (AclAuthorizer -> StandardAuthorizer)",
        )
    )
    return traps


def refusals(traps: Iterable[Trap]) -> list[Trap]:
    return [t for t in traps if t.status is TrapStatus.REFUSED]
