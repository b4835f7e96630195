"""The one gate every mutation of a Kafka cluster passes: a maintenance session.

A mutating operator opens a :class:`MaintenanceSession` on its ZooKeeper hook before anything
changes. Opening it, in this order and before the first write:

0. in a real run, applies the one approval rule (:class:`~.approval.WriteApprovalRule`, issues 25
   and 31) before it reads anything of the cluster: the run's approved plan (``approval``), if
   given, is this run's, covers this task and is unchanged; the cluster file's entries are matched
   against the connection the session uses; a ``cluster`` argument naming another entry refuses;
   a write that needs approval and has none refuses (``ApprovalRequiredError``, saying how to add
   the approval step) -- whether or not an approval step exists in the DAG. The step executor
   applies it again right before the first write (:meth:`MaintenanceSession.verify_approval`);
1. pins the cluster: the chroot holds a Kafka cluster (``/brokers/ids``) and ``/cluster/id`` is
   there; equal to what the plan recorded (``expected``) and to ``identity.json`` of an earlier try
   of the same run, else :class:`ClusterIdentityError` naming both values; then the approval rule
   again with that ``/cluster/id`` (entries that pin one, the strictest entry wins, a cluster in
   no entry requires approval). A dry run refuses a ``cluster`` argument naming another entry too
   and logs whether a real run needs approval;
2. checks the artefact store is writable with room to spare (probe written and read back);
3. refuses when another run holds the cluster's maintenance lease (``/kafka_zk_maintenance/lease``
   under the chroot, a persistent znode naming DAG, run, task, host and since), naming the holder
   -- a dry run only reports it;
4. binds itself to the hook as its write gate. The first write takes (or, for the same run,
   renews; once expired, takes over) the lease; every write is a multi-op that starts with a
   CheckVersion of the lease (a stolen lease fails the write, nothing applied), every created
   znode gets the ACL Kafka uses on that cluster, and every change lands in the run's change log
   ``changes-<task>-<try>.json``. A step that writes nothing takes no lease.

Broker hosts a run touches on disk are pinned with :meth:`MaintenanceSession.pin_broker` (each
meta.properties must carry ZooKeeper's ``cluster.id`` and the expected ``broker.id``; on Kafka < 2.4,
whose files hold no cluster.id, the configured server.properties' ``zookeeper.connect`` and
``broker.id`` and the broker's registration naming the host stand in for it). Rollback
artefacts go through :meth:`MaintenanceSession.write_rollback`, which reads them back. Without a
session a hook refuses every write (``WriteOutsideSessionError``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import posixpath
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_zk.artefacts.files import write_url_atomically
from airflow_provider_kafka_zk.artefacts.store import (
    DEFAULT_MIN_FREE_BYTES,
    ArtefactStoreError,
    check_store_writable,
    write_and_verify,
)
from airflow_provider_kafka_zk.hooks.zookeeper import (
    CheckVersionOp,
    CreateOp,
    DeleteOp,
    KafkaZooKeeperHook,
    MultiOpError,
    ZnodeNotFoundError,
    ZnodeOp,
    ZnodeVersionConflictError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.kraft_migration import classify, refusal
from airflow_provider_kafka_zk.kafka.safety import (
    KRAFT_FINALIZED_PATH,
    LEASE_PATH,
    LEASE_ROOT,
    AclEntry,
    ClusterIdentity,
    KraftMigrationEvidence,
    LeaseHolder,
    LegacyBrokerEvidence,
    UnsafeFlagError,
    acl_for_new_znode,
    broker_identity_problems,
    identity_differences,
    lease_decision,
    strict_flag,
)
from airflow_provider_kafka_zk.maintenance.approval import (
    ApprovalRequiredError,
    PlanApproval,
    WriteApprovalRule,
)
from airflow_provider_kafka_zk.maintenance.errors import ClusterIdentityError, MaintenanceRefusedError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

IDENTITY_FILE = "identity.json"
DEFAULT_LEASE_TTL_S = 12 * 3600
MIN_LEASE_TTL_S = 10.0


def default_lease_ttl_s() -> float:
    """``[kafka_zk] lease_ttl_s`` from Airflow's config, else :data:`DEFAULT_LEASE_TTL_S`."""
    from airflow_provider_kafka_zk.clusters import provider_option

    text = provider_option("lease_ttl_s").strip()
    return lease_ttl_seconds(text, "[kafka_zk] lease_ttl_s") if text else float(DEFAULT_LEASE_TTL_S)


def lease_ttl_seconds(value: Any, name: str = "lease_ttl_s") -> float:
    """A lease TTL in seconds (rendered text accepted), at least :data:`MIN_LEASE_TTL_S`.

    :raises SafetyFlagError: anything else, before any I/O.
    """
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not seconds >= MIN_LEASE_TTL_S or seconds == float("inf"):
        raise SafetyFlagError(f"{name} must be a number of seconds >= {MIN_LEASE_TTL_S:g}, not {value!r}")
    return seconds


class SafetyFlagError(MaintenanceRefusedError, ValueError):
    """A safety switch was not a real boolean or true/false text."""


class BrokerIdentityPinError(ClusterIdentityError):
    """A broker host could not be proven to be that broker of this cluster (names broker, file, difference)."""


class MaintenanceLeaseHeldError(MaintenanceRefusedError):
    """Another run holds the cluster's maintenance lease."""


class MaintenanceLeaseLostError(MaintenanceRefusedError):
    """This run's lease is gone or was taken over: it must not write any more."""


class RollbackArtefactError(MaintenanceRefusedError):
    """The rollback artefact (or the artefact store) could not be written and read back."""


class KraftMigrationInProgressError(MaintenanceRefusedError):
    """A ZooKeeper-to-KRaft migration is in progress (or its rollback left ``/migration``): the message names
    the phase and what to do next."""


def parse_safety_flags(**flags: Any) -> dict[str, bool]:
    """Every flag through :func:`~airflow_provider_kafka_zk.kafka.safety.strict_flag`, before any I/O.

    :param flags: name -> value as rendered; raises :class:`SafetyFlagError` naming the first bad one.
    """
    try:
        return {name: strict_flag(value, name) for name, value in flags.items()}
    except UnsafeFlagError as exc:
        raise SafetyFlagError(str(exc)) from None


@dataclass(frozen=True)
class RunIdentity:
    """Which run acts: the lease holder record and the change log's names come from it."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    host: str

    @classmethod
    def from_context(cls, context: Mapping[str, Any] | None, *, fallback_run_id: str) -> RunIdentity:
        """From an Airflow task context; ``fallback_run_id`` names a run outside Airflow (a test, a script)."""
        context = context or {}
        ti = context.get("ti")
        dag = context.get("dag")
        dag_id = getattr(ti, "dag_id", None) or getattr(dag, "dag_id", None) or "(no DAG)"
        run_id = context.get("run_id") or getattr(ti, "run_id", None) or fallback_run_id
        task_id = getattr(ti, "task_id", None) or "(no task)"
        try_number = int(getattr(ti, "try_number", None) or 0)
        return cls(
            str(dag_id), str(run_id), str(task_id), try_number, f"{socket.gethostname()}:{os.getpid()}"
        )


def _found_at_chroot(hook: KafkaZooKeeperHook) -> str:
    """What the connection's chroot holds, for a refusal: its children, or that it does not exist."""
    try:
        children = hook.get_children("/")
    except ZnodeNotFoundError:
        return "the chroot itself does not exist"
    if not children:
        return "the chroot is empty"
    shown = ", ".join(f"/{c}" for c in children[:12])
    return f"found there: {shown}" + (f" and {len(children) - 12} more" if len(children) > 12 else "")


def pin_zookeeper_identity(hook: KafkaZooKeeperHook) -> ClusterIdentity:
    """The cluster behind ``hook``: refuses a chroot without a Kafka cluster or without ``/cluster/id``."""
    config = hook.config
    where = f"{','.join(config.hosts)} chroot {config.chroot or '/'}"
    if hook.exists(znodes.BROKER_IDS) is None:
        raise ClusterIdentityError(
            f"{where} holds no Kafka cluster ({znodes.BROKER_IDS} is missing): {_found_at_chroot(hook)}; "
            "wrong connection or chroot? Refusing to change anything"
        )
    try:
        cluster_id = hook.cluster_id()
    except znodes.ZnodeFormatError as exc:
        raise ClusterIdentityError(f"{where}: {znodes.CLUSTER_ID} is unreadable ({exc}): refusing") from None
    if not cluster_id:
        raise ClusterIdentityError(
            f"{where} has no {znodes.CLUSTER_ID}: cannot prove which cluster this is; refusing to change anything"
        )
    return ClusterIdentity(cluster_id, tuple(config.hosts), config.chroot)


class MaintenanceSession:
    """The gate of one mutating step (one task try) on one cluster; see the module docstring.

    :param hook: the cluster's ZooKeeper hook; the session binds itself to it as the write gate.
    :param cluster: the cluster's name in this product (artefact folder name).
    :param artefact_dir: the run's artefact folder (local path or fsspec URL): identity record,
        rollback artefacts and the change log go there.
    :param run: who acts (``RunIdentity.from_context``).
    :param dry_run: when true nothing is written to the cluster: no lease is taken, no gate bound
        (so any write attempt raises), a lease held by someone else is only reported.
    :param expected: the identity the plan was made for; any difference refuses.
    :param lease_ttl_s: how long the lease counts without renewal (default ``[kafka_zk] lease_ttl_s``,
        else 12 h). The lease is renewed by :meth:`renew_lease` (the step executor calls it at every
        step) and by :meth:`heartbeat` / :meth:`heartbeat_during` while a step waits; a session that
        outlived it stops before its next write (:class:`MaintenanceLeaseLostError`).
    :param min_free_bytes: free space the artefact store must have (local stores).
    :param single_step: the whole mutation happens inside this session (one task): the lease is
        given back on any exit, refusal included. Multi-task runs (a drain) leave it to their last step.
    :param approval: the run's approved plan (a real run after an approval step; None: there is
        none): verified when the session opens, before anything of the cluster is read, and again
        before the first write -- and required there when the cluster written to requires approval
        (:class:`~.approval.WriteApprovalRule`).
    :param kraft_migration: the session of the ZooKeeper-to-KRaft migration itself
        (``kafka_zk_kraft_migration``): the one writer allowed while a migration runs, so
        :meth:`refuse_if_migrating` lets it through; every other rule holds.
    :param lease_only: the session only gives back a lease this run holds (:meth:`release_lease`)
        and writes nothing else (its gate refuses any other write): it changes nothing of Kafka's,
        so the approval rule does not apply.
    """

    def __init__(
        self,
        hook: KafkaZooKeeperHook,
        *,
        cluster: str,
        artefact_dir: str,
        run: RunIdentity,
        dry_run: bool,
        expected: ClusterIdentity | None = None,
        lease_ttl_s: float | str | None = None,
        min_free_bytes: int = DEFAULT_MIN_FREE_BYTES,
        single_step: bool = False,
        approval: PlanApproval | None = None,
        kraft_migration: bool = False,
        lease_only: bool = False,
    ) -> None:
        if not isinstance(dry_run, bool):
            raise SafetyFlagError(f"dry_run must be parsed with parse_safety_flags first, got {dry_run!r}")
        self.hook = hook
        self.cluster = cluster
        self.artefact_dir = artefact_dir.rstrip("/")
        self.run = run
        self.dry_run = dry_run
        self.expected = expected
        self.lease_ttl_s = default_lease_ttl_s() if lease_ttl_s is None else lease_ttl_seconds(lease_ttl_s)
        self.min_free_bytes = int(min_free_bytes)
        self.single_step = single_step
        self.approval = approval
        self.kraft_migration = kraft_migration
        self.lease_only = lease_only
        self.approval_requirement: Any = None
        self.identity: ClusterIdentity | None = None
        self.lease_conflict: str | None = None
        self.changes: list[dict[str, Any]] = []
        self._lease_version: int | None = None
        self._lease_expires_ms: int | None = None
        self._lease_renewed_ms: int | None = None
        self._lease_lock = threading.RLock()
        self._acquiring = False
        self._releasing = False
        self._released = False
        self._acl_cache: dict[str, list[AclEntry]] = {}
        self._open = False

    # ------------------------------------------------------------------ opening
    def __enter__(self) -> MaintenanceSession:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.single_step and not self.dry_run and self._lease_version is not None:
                self.release_lease()  # only a lease this session took: nothing else of the run depends on it
        finally:
            self.close()

    def open(self) -> MaintenanceSession:
        self.verify_approval()  # before anything of the cluster is read
        identity = pin_zookeeper_identity(self.hook)
        if self.expected is not None:
            self._refuse_if_different(self.expected, identity, "the plan")
        self._apply_approval_rule(identity.cluster_id)
        try:
            check_store_writable(self.artefact_dir, min_free_bytes=self.min_free_bytes)
        except ArtefactStoreError as exc:
            raise RollbackArtefactError(
                f"artefact store not usable, refusing to change anything: {exc}"
            ) from None
        self.refuse_if_migrating()
        self.identity = self._identity_record(identity)
        log.info(
            "Maintenance session on cluster %s: /cluster/id %s, %s chroot %s (%s)",
            self.cluster,
            identity.cluster_id,
            ",".join(identity.hosts),
            identity.chroot or "/",
            "dry run: no lease, no writes" if self.dry_run else "the lease is taken at the first write",
        )
        holder = self._foreign_holder()
        if holder and self.dry_run:
            self.lease_conflict = holder
            log.warning("DRY RUN: a real run would refuse now: the maintenance lease is held by %s", holder)
        elif holder:
            raise self._held_error(holder)
        if not self.dry_run:
            self.hook.bind_gate(self)
        self._open = True
        return self

    def verify_approval(self) -> None:
        """A real run: the approval rule (:class:`~.approval.WriteApprovalRule`) as far as it can be
        applied without cluster I/O when the session opens, in full with the pinned ``/cluster/id``
        once it is pinned (the step executor calls this right before the first write).

        :raises PlanNotApprovedError: rejected, timed out, no decision recorded, another run's.
        :raises PlanChangedSinceApprovalError: a plan artefact or setting differs from the approved one.
        :raises ApprovalRequiredError: the cluster written to requires approval and none covers this write.
        :raises ClusterEntryMismatchError: ``cluster`` names another entry of the cluster file.
        """
        if self.dry_run or self.lease_only:
            return
        self._apply_approval_rule(self.identity.cluster_id if self.identity is not None else None)

    def _approval_rule(self) -> WriteApprovalRule:
        def connection() -> tuple[tuple[str, ...], str]:
            return self.hook.config.hosts, self.hook.config.chroot

        return WriteApprovalRule(
            label=self.cluster, connection=connection, run=self.run, approval=self.approval
        )

    def _apply_approval_rule(self, cluster_id: str | None) -> None:
        """The rule for this session's write; a dry run refuses only a ``cluster`` argument naming
        another entry, and logs what a real run needs."""
        from airflow_provider_kafka_zk.clusters import ClusterFileError

        if self.lease_only or (self.dry_run and cluster_id is None):
            return
        rule = self._approval_rule()
        try:
            if not self.dry_run:
                self.approval_requirement = rule.check(cluster_id)
                if cluster_id is not None and self.approval_requirement.required is False:
                    log.warning(
                        "Cluster %s: writing without a person's approval: %s",
                        self.cluster,
                        self.approval_requirement.why(),
                    )
                return
            rule.approval = None
            with contextlib.suppress(ApprovalRequiredError):
                rule.check(cluster_id)
            self.approval_requirement = rule.requirement
            if rule.requirement is not None and rule.requirement.required:
                log.info(
                    "DRY RUN: a real run writes to cluster %s only with a person's approval of its plan (%s)",
                    self.cluster,
                    rule.requirement.why(),
                )
        except ClusterFileError as exc:
            raise MaintenanceRefusedError(
                f"cannot tell whether a write to cluster {self.cluster} needs a person's approval: {exc}. "
                "Refusing to change anything"
            ) from None

    def _held_error(self, who: str) -> MaintenanceLeaseHeldError:
        return MaintenanceLeaseHeldError(
            f"cluster {self.cluster} is being changed by {who}: one maintenance writer per cluster, "
            f"refusing to start. If that run is dead, wait for the lease to expire or delete "
            f"{self.hook.describe_path(LEASE_PATH)} after checking"
        )

    def close(self) -> None:
        self.hook.unbind_gate(self)
        self._open = False

    def _refuse_if_different(self, pinned: ClusterIdentity, now: ClusterIdentity, source: str) -> None:
        problems = identity_differences(pinned, now)
        if problems:
            raise ClusterIdentityError(
                f"not the cluster {source} was made for: "
                + "; ".join(problems)
                + ". Refusing to change anything"
            )

    def _identity_record(self, identity: ClusterIdentity) -> ClusterIdentity:
        """``identity.json``: written by the first try of the run, compared by every later one."""
        url = f"{self.artefact_dir}/{IDENTITY_FILE}"
        existing = _read_json_or_none(url)
        if existing is not None:
            try:
                pinned = ClusterIdentity.from_dict(
                    existing.get("identity") if isinstance(existing, dict) else {}, url
                )
            except ValueError as exc:
                raise ClusterIdentityError(f"{exc}: refusing rather than re-pinning") from None
            self._refuse_if_different(pinned, identity, f"this run pinned in {url}")
            return ClusterIdentity(identity.cluster_id, identity.hosts, identity.chroot, dict(pinned.brokers))
        self._write_identity(identity)
        return identity

    def _write_identity(self, identity: ClusterIdentity) -> None:
        record = {
            "format": "kafka-zk-identity",
            "cluster": self.cluster,
            "pinned_at": datetime.now(UTC).isoformat(),
            "pinned_by": {"dag_id": self.run.dag_id, "run_id": self.run.run_id, "task_id": self.run.task_id},
            "identity": identity.to_dict(),
        }
        try:
            write_and_verify(f"{self.artefact_dir}/{IDENTITY_FILE}", json.dumps(record, indent=1).encode())
        except ArtefactStoreError as exc:
            raise RollbackArtefactError(str(exc)) from None

    # ------------------------------------------------------------------ brokers
    def pin_broker(
        self,
        broker_id: int,
        host: str,
        meta: Iterable[tuple[str, int | None, str | None]],
        effective_broker_id: int | None,
        *,
        host_evidence: Mapping[str, Any] | None = None,
    ) -> None:
        """Prove broker ``broker_id``'s host belongs to this cluster before touching its disk.

        :param meta: (log dir, broker.id, cluster.id) of every meta.properties read on the host.
        :param effective_broker_id: broker.id from server.properties (or meta.properties).
        :param host_evidence: the inventory's ``remote["identity_evidence"]`` (configured
            server.properties, the host SSH reached): pins a Kafka < 2.4 host, whose meta.properties
            hold no cluster.id, together with the broker's registration read here.
        :raises BrokerIdentityPinError: naming the broker, the file and what differed.
        """
        identity = self._require_identity()
        entries = list(meta)
        legacy = None
        if entries and any(c is None for _, _, c in entries):
            legacy = self._legacy_evidence(broker_id, host_evidence)
        problems = broker_identity_problems(
            broker_id,
            host,
            identity.cluster_id,
            entries,
            effective_broker_id,
            legacy=legacy,
            zookeeper_hosts=identity.hosts,
            chroot=identity.chroot,
        )
        if problems:
            raise BrokerIdentityPinError(
                "refusing to touch broker {} on {}: {}".format(broker_id, host, "; ".join(problems))
            )
        pinned = identity.with_broker(broker_id, host, identity.cluster_id)
        if broker_id in identity.brokers:
            self._refuse_if_different(identity, pinned, "this run pinned earlier")
        else:
            self.identity = pinned
            self._write_identity(pinned)
        if legacy is None:
            log.info(
                "Broker %d on %s: meta.properties carry cluster.id %s", broker_id, host, identity.cluster_id
            )
        else:
            log.info(
                "Broker %d on %s: meta.properties without cluster.id (Kafka < 2.4); pinned by broker.id, "
                "zookeeper.connect in %s and the registration in %s",
                broker_id,
                host,
                legacy.server_properties_path,
                self.hook.describe_path(f"{znodes.BROKER_IDS}/{broker_id}"),
            )

    def _legacy_evidence(
        self, broker_id: int, host_evidence: Mapping[str, Any] | None
    ) -> LegacyBrokerEvidence | None:
        """The host's evidence plus ZooKeeper's: the broker's registration, every registration's
        version and whether ``/feature`` exists (what would prove Kafka >= 2.7)."""
        if host_evidence is None:
            return None
        registered: tuple[str, ...] | None = None
        versions: list[int] = []
        children = self.hook.get_children(znodes.BROKER_IDS) if self.hook.exists(znodes.BROKER_IDS) else []
        for child in children:
            path = f"{znodes.BROKER_IDS}/{child}"
            try:
                data, _ = self.hook.get_znode(path)
                registration = znodes.BrokerRegistration.decode(data, path)
            except ZnodeNotFoundError:
                continue  # gone since the listing
            except (znodes.ZnodeFormatError, ValueError) as exc:
                if child == str(broker_id):
                    raise BrokerIdentityPinError(
                        f"refusing to touch broker {broker_id}: {self.hook.describe_path(path)} is unreadable ({exc})"
                    ) from None
                continue
            versions.append(registration.version)
            if registration.broker_id == broker_id:
                from airflow_provider_kafka_zk.hooks.broker_host import (
                    _registration_hosts,  # paramiko: only here
                )

                registered = _with_addresses(_registration_hosts(registration))
        props = host_evidence.get("server_properties")
        return LegacyBrokerEvidence(
            server_properties_path=host_evidence.get("server_properties_path"),
            server_properties=dict(props) if isinstance(props, Mapping) else None,
            server_properties_problem=host_evidence.get("server_properties_problem"),
            reached_hosts=tuple(str(h) for h in host_evidence.get("reached_hosts") or ()),
            registered_hosts=registered,
            registration_versions=tuple(versions),
            feature_znode=self.hook.exists(znodes.FEATURE) is not None,
            kafka_version=host_evidence.get("kafka_version"),
        )

    def require_broker(self, broker_id: int, host: str) -> None:
        """For broker-file changes: this broker at this host was pinned by :meth:`pin_broker`."""
        pinned = self._require_identity().brokers.get(broker_id)
        if pinned is None or pinned[0] != host:
            raise ClusterIdentityError(
                f"broker {broker_id} at {host} was not pinned in this maintenance session "
                f"(pinned: {pinned[0] if pinned else 'nothing'}): refusing to touch its files"
            )
        if self.dry_run:
            raise MaintenanceRefusedError("a dry-run session cannot authorise changes to broker files")

    def _require_identity(self) -> ClusterIdentity:
        if self.identity is None:
            raise RuntimeError("open the maintenance session first")
        return self.identity

    # ------------------------------------------------------------------ checks between steps
    def recheck(self) -> None:
        """Before each batch / step: still the same cluster, not migrating to KRaft, and (real runs)
        still our lease, not outlived."""
        self._refuse_if_different(
            self._require_identity(), pin_zookeeper_identity(self.hook), "this run pinned"
        )
        self.refuse_if_migrating()
        if self._lease_version is not None:
            self._refuse_if_outlived()
        if self.dry_run or self._lease_version is None:
            holder = self._foreign_holder()
            if holder and not self.dry_run:
                raise self._held_error(holder)
            return
        holder, stat = read_lease(self.hook)
        if stat is None:
            raise MaintenanceLeaseLostError(
                f"the maintenance lease {self.hook.describe_path(LEASE_PATH)} is gone: stopping before the next change"
            )
        if stat.version != self._lease_version or holder is None or not holder.same_run(self._me()):
            raise MaintenanceLeaseLostError(
                "the maintenance lease is now held by "
                + (holder.describe() if holder else "an unreadable record")
                + ": stopping before the next change"
            )

    def refuse_if_migrating(self) -> None:
        """Refuse (dry run too) while a ZooKeeper-to-KRaft migration runs: ``/migration`` exists or
        ``/controller`` is held by a KRaft controller or persistent (:func:`~airflow_provider_kafka_zk.
        kafka.safety.kraft_migration_in_progress`), and once it was finalized (the phase reader's
        finalized phase: the cluster left ZooKeeper). Every mutation passes here before its first write.

        :raises KraftMigrationInProgressError: naming the migration's evidence.
        """
        if self.kraft_migration:
            return  # the migration's own run: it is the migration's writer
        evidence = read_migration_evidence(self.hook)
        # the one phase rule: a migration under way, or finalized by kafka_zk_kraft_migration (its record)
        found = classify(evidence, zk_brokers=_registered_brokers(self.hook))
        if found is not None:
            raise KraftMigrationInProgressError(
                f"cluster {self.cluster} ({self.hook.describe_path('/')}): {refusal(found, evidence)}. "
                "Nothing was changed"
            )

    # ------------------------------------------------------------------ the lease
    def _refuse_if_outlived(self) -> None:
        expires = self._lease_expires_ms
        if expires is not None and int(time.time() * 1000) > expires:
            self._released = True  # no further write through this session
            raise MaintenanceLeaseLostError(
                f"this run outlived its maintenance lease: it expired at {_iso_ms(expires)} (last renewed "
                f"{_iso_ms(self._lease_renewed_ms or expires)}, TTL {self.lease_ttl_s:g}s), so another run may "
                "have taken the cluster since; stopping before the next change. Check "
                f"{self.hook.describe_path(LEASE_PATH)} and the cluster, then clear the task to resume"
            )

    @property
    def holds_lease(self) -> bool:
        return self._lease_version is not None and not self._released

    def renew_lease(self) -> None:
        """Push the lease's expiry ``lease_ttl_s`` ahead (a versioned set of the lease itself); a
        no-op while this session holds no lease (dry run, nothing written yet).

        :raises MaintenanceLeaseLostError: the lease is gone, another run's, or this run outlived it.
        """
        with self._lease_lock:
            if self.dry_run or self._lease_version is None or self._released:
                return
            self._refuse_if_outlived()
            holder, stat = read_lease(self.hook)
            if (
                stat is None
                or stat.version != self._lease_version
                or holder is None
                or not holder.same_run(self._me())
            ):
                raise self.fence_failed(
                    "the maintenance lease "
                    + self.hook.describe_path(LEASE_PATH)
                    + (
                        " is gone"
                        if stat is None
                        else f" is now held by {holder.describe() if holder else 'an unreadable record'}"
                    )
                    + ": stopping before the next change"
                )
            me = dataclasses.replace(self._me(), since_ms=holder.since_ms)
            self._acquiring = True
            try:
                new = self.hook.set_if_version(LEASE_PATH, me.encode(), stat.version)
            except ZnodeVersionConflictError:
                raise self.fence_failed(
                    f"the maintenance lease {self.hook.describe_path(LEASE_PATH)} changed while this run renewed it: "
                    "stopping before the next change"
                ) from None
            finally:
                self._acquiring = False
            self._lease_version = new.version
            self._lease_expires_ms = me.expires_ms
            self._lease_renewed_ms = int(time.time() * 1000)
            log.debug("Renewed the maintenance lease of %s until %s", self.cluster, _iso_ms(me.expires_ms))

    def heartbeat(self) -> None:
        """Renew the lease when a third of its TTL passed since the last renewal (call it while waiting)."""
        if self._lease_renewed_ms is None:
            return
        if int(time.time() * 1000) - self._lease_renewed_ms >= self.lease_ttl_s * 1000 / 3:
            self.renew_lease()

    def heartbeat_during(self, what: str) -> LeaseHeartbeat:
        """A context manager renewing the lease from a thread while ``what`` blocks (a restart
        command, a host script); the block must not write ZooKeeper itself. A lost lease is raised
        when the block ends, before the next write."""
        return LeaseHeartbeat(self, what)

    def _me(self) -> LeaseHolder:
        now = int(time.time() * 1000)
        return LeaseHolder(
            dag_id=self.run.dag_id,
            run_id=self.run.run_id,
            task_id=self.run.task_id,
            host=self.run.host,
            since_ms=now,
            expires_ms=now + int(self.lease_ttl_s * 1000),
            cluster_id=self._require_identity().cluster_id,
        )

    def take_lease(self) -> None:
        """Take (or renew) the run's lease now rather than at the first write (e.g. before restarts)."""
        if self.dry_run:
            raise MaintenanceRefusedError("a dry run takes no maintenance lease")
        if self._lease_version is None:
            self._acquire_lease()

    def _foreign_holder(self) -> str | None:
        holder, stat = read_lease(self.hook)
        if stat is None:
            return None
        me = self._me()
        decision = lease_decision(holder, True, me, me.since_ms)
        if decision in ("renew", "take_over"):
            return None
        return (
            holder.describe() if holder else f"an unreadable record at {self.hook.describe_path(LEASE_PATH)}"
        )

    def _acquire_lease(self) -> None:
        self.refuse_if_migrating()  # the first write of the session: look once more, right before it
        self._acquiring = True
        try:
            for _ in range(3):
                me = self._me()
                holder, stat = read_lease(self.hook)
                decision = lease_decision(holder, stat is not None, me, me.since_ms)
                if decision == "refuse":
                    raise self._held_error(
                        holder.describe() if holder else "an unreadable record (check it by hand)"
                    )
                if decision == "create":
                    self.hook.create_if_absent(LEASE_ROOT, None)
                    try:
                        self.hook.multi([CreateOp(LEASE_PATH, me.encode())])
                    except MultiOpError as exc:
                        if exc.reason == "NodeExistsError":
                            continue  # someone was quicker: read it and decide again
                        raise
                    self._lease_version = 0
                    self._lease_expires_ms, self._lease_renewed_ms = me.expires_ms, me.since_ms
                else:
                    assert holder is not None and stat is not None
                    if decision == "take_over":
                        log.warning("Taking over an expired maintenance lease of %s", holder.describe())
                    else:
                        me = dataclasses.replace(me, since_ms=holder.since_ms)
                    try:
                        new = self.hook.set_if_version(LEASE_PATH, me.encode(), stat.version)
                    except ZnodeVersionConflictError:
                        continue
                    self._lease_version = new.version
                    self._lease_expires_ms, self._lease_renewed_ms = me.expires_ms, int(time.time() * 1000)
                log.info(
                    "Holding the maintenance lease of %s (%s)",
                    self.cluster,
                    self.hook.describe_path(LEASE_PATH),
                )
                return
            raise MaintenanceLeaseHeldError(
                f"the maintenance lease of {self.cluster} kept changing while we tried to take it: refusing"
            )
        finally:
            self._acquiring = False

    def release_lease(self) -> bool:
        """Give the run's lease back (its last mutating step); False when this run does not hold it.

        Works whether or not this session wrote (the lease may come from an earlier task of the
        run). The lease and, when nothing else is under it, its parent go in one versioned
        multi-op, so the chroot is left as Kafka had it. No write is possible afterwards.
        """
        if self.dry_run:
            return False
        holder, stat = read_lease(self.hook)
        if stat is None:
            self._lease_version = None
            return False
        if holder is None or not holder.same_run(self._me()):
            log.warning(
                "Maintenance lease not released: it is held by %s", holder.describe() if holder else "?"
            )
            return False
        ops: list[ZnodeOp] = [DeleteOp(LEASE_PATH, stat.version)]
        root = self.hook.exists(LEASE_ROOT)
        if root is not None and root.numChildren == 1:
            ops.append(DeleteOp(LEASE_ROOT, root.version))
        self._releasing = True
        try:
            self.hook.multi(ops)
        except Exception as exc:  # a lost lease must not hide the step's own outcome
            log.warning("Maintenance lease not released (%s): %s", type(exc).__name__, exc)
            return False
        finally:
            self._releasing = False
            self._lease_version = None
            self._released = True
        log.info("Released the maintenance lease of %s", self.cluster)
        return True

    @property
    def changed_anything(self) -> bool:
        """Whether this session wrote anything to the cluster besides its own lease."""
        return any(not str(c.get("path", "")).startswith(LEASE_ROOT) for c in self.changes)

    # ------------------------------------------------------------------ artefacts
    def write_rollback(self, name: str, payload: bytes | str) -> str:
        """Write a rollback artefact and read it back byte for byte, before the change it undoes."""
        data = payload.encode("utf-8") if isinstance(payload, str) else payload
        try:
            return write_and_verify(f"{self.artefact_dir}/{name}", data)
        except ArtefactStoreError as exc:
            raise RollbackArtefactError(
                f"rollback artefact not safely stored, refusing to change anything: {exc}"
            ) from None

    def artefact_header(self) -> dict[str, Any]:
        """What every artefact of the run says about the target: the pinned identity, the run."""
        return {
            "identity": self._require_identity().to_dict(),
            "run": {"dag_id": self.run.dag_id, "run_id": self.run.run_id, "task_id": self.run.task_id},
        }

    # ------------------------------------------------------------------ the hook's write gate
    def fence_ops(self) -> list[ZnodeOp]:
        if self.lease_only and not self._releasing:
            raise MaintenanceRefusedError(
                "a lease-only session gives back its run's lease and writes nothing else"
            )
        if (not self._open and not self._acquiring) or self._released:
            raise MaintenanceLeaseLostError(
                "the maintenance session is closed or released its lease: no more writes"
            )
        if self._acquiring or self._releasing:
            return []
        if self._lease_version is None:
            self._acquire_lease()  # the first write of the session takes (or renews) the run's lease
        else:
            self._refuse_if_outlived()
        return [CheckVersionOp(LEASE_PATH, self._lease_version)]

    def acl_for(self, path: str) -> list[Any]:
        from kazoo.security import ACL, Id

        parent = posixpath.dirname(path) or "/"
        if parent not in self._acl_cache:
            acl, _ = self.hook.get_acl(parent)
            self._acl_cache[parent] = [AclEntry(e.perms, e.id.scheme, e.id.id) for e in acl]
        entries = acl_for_new_znode(
            path, self._acl_cache[parent], authenticated=self.hook.config.authenticated
        )
        return [ACL(e.perms, Id(e.scheme, e.id)) for e in entries]

    def fence_failed(self, message: str) -> Exception:
        self._lease_version = None
        self._released = True  # no further write through this session
        return MaintenanceLeaseLostError(message)

    def after_write(self, changes: Sequence[dict[str, Any]]) -> None:
        at = datetime.now(UTC).isoformat()
        self.changes.extend({"at": at, **c} for c in changes)
        name = f"changes-{self.run.task_id}-{self.run.try_number}.json"
        record = {"format": "kafka-zk-change-log", **self.artefact_header(), "changes": self.changes}
        try:
            write_url_atomically(f"{self.artefact_dir}/{name}", json.dumps(record, indent=1).encode())
        except OSError as exc:  # the change happened: say so loudly, do not hide it behind a store error
            log.error("Could not write the change log %s (%s); the change was made: %s", name, exc, changes)


def _with_addresses(hosts: tuple[str, ...]) -> tuple[str, ...]:
    """The registered host names plus the addresses they resolve to (a name that does not resolve
    adds nothing): the SSH peer address may match a registration that names the host by DNS."""
    out = list(hosts)
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            continue
        out.extend(str(info[4][0]) for info in infos if str(info[4][0]) not in out)
    return tuple(dict.fromkeys(out))


def read_lease(hook: KafkaZooKeeperHook) -> tuple[LeaseHolder | None, ZnodeStat | None]:
    """The lease record and its Stat in one read: (None, None) when there is no lease, (None, stat)
    when its data is not a record of ours."""
    try:
        data, stat = hook.get_znode(LEASE_PATH)
    except ZnodeNotFoundError:
        return None, None
    return LeaseHolder.decode(data), stat


def _registered_brokers(hook: KafkaZooKeeperHook) -> Iterator[int]:
    """Brokers registered in ``/brokers/ids`` (ZooKeeper mode): names a migration's phase in a refusal.

    Read only when iterated: :func:`classify` looks at them only when ZooKeeper shows a sign of a
    migration, so a session without one never reads ``/brokers/ids`` (its ACL may forbid it; the first
    write names the znode it may not write)."""
    try:
        children = hook.get_children(znodes.BROKER_IDS)
    except ZnodeNotFoundError:
        return
    yield from (int(c) for c in children if c.isdigit())


def read_migration_evidence(hook: KafkaZooKeeperHook) -> KraftMigrationEvidence:
    """``/migration``'s data, ``/controller``'s data and ephemeral owner and the provider's record of a
    finalized migration, as read now (one pipelined round trip: every writer reads them first)."""
    read = hook.get_many([znodes.MIGRATION, KRAFT_FINALIZED_PATH, znodes.CONTROLLER])

    def data(path: str) -> bytes | None:
        """The znode's bytes (``b""`` without data), None when it does not exist."""
        return (read[path][0] or b"") if path in read else None

    controller = read.get(znodes.CONTROLLER)
    owner = controller[1].ephemeralOwner if controller is not None else None
    return KraftMigrationEvidence(
        data(znodes.MIGRATION), data(znodes.CONTROLLER), owner, data(KRAFT_FINALIZED_PATH)
    )


class LeaseHeartbeat:
    """Renews a session's lease every third of its TTL from a daemon thread while a block runs."""

    def __init__(self, session: MaintenanceSession, what: str, interval_s: float | None = None) -> None:
        self.session = session
        self.what = what
        self.interval_s = interval_s if interval_s is not None else max(1.0, session.lease_ttl_s / 3)
        self.renewals = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.session.renew_lease()
                self.renewals += 1
            except BaseException as exc:  # handed to the main thread at the end of the block
                self.error = exc
                log.error("Maintenance lease not renewed while %s: %s", self.what, exc)
                return

    def __enter__(self) -> LeaseHeartbeat:
        if self.session.holds_lease:
            self._thread = threading.Thread(target=self._loop, name="kafka-zk-lease-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.error is not None and exc_type is None:
            raise self.error


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lease_held_by(hook: KafkaZooKeeperHook, run: RunIdentity) -> bool:
    """Whether the cluster's maintenance lease is held by ``run`` (same DAG and run id) right now."""
    holder, _ = read_lease(hook)
    return holder is not None and (holder.dag_id, holder.run_id) == (run.dag_id, run.run_id)


class ScratchLoadGate:
    """The write gate of a snapshot load into an empty scratch chroot (forensics, not a Kafka cluster).

    No lease and no identity (the target holds no cluster); ACLs world-open, as the load report says.
    """

    def fence_ops(self) -> list[ZnodeOp]:
        return []

    def acl_for(self, path: str) -> list[Any]:
        from kazoo.security import OPEN_ACL_UNSAFE

        return list(OPEN_ACL_UNSAFE)

    def after_write(self, changes: Sequence[dict[str, Any]]) -> None:
        return None

    def fence_failed(self, message: str) -> Exception:
        return RuntimeError(message)  # no fence ops: cannot happen


def _read_json_or_none(url: str) -> Any:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return None
    try:
        return json.loads(fs.cat_file(path))
    except OSError as exc:
        raise RollbackArtefactError(
            f"{url} cannot be read ({type(exc).__name__}: {exc}): refusing rather than re-pinning"
        ) from None
    except ValueError as exc:
        raise ClusterIdentityError(
            f"{url} is not readable JSON ({exc}): refusing rather than re-pinning"
        ) from None
