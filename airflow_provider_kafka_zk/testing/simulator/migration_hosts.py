"""The hosts a KRaft migration DAG drives, on a simulated cluster: the KRaft controllers' hosts (their
config file, ``kafka-storage format``, their metadata log, quorum-state and log lines), every node's
Kafka process, and the commands of the cluster file's templates.

:class:`MigrationRuntime` is a :class:`~.runtime.ClusterRuntime` that also answers the requests of
:mod:`.node_command` -- the command every template of the migration's cluster file runs:

* ``restart-broker``: the broker restarts with the server.properties the DAG wrote; the file decides
  the mode (:func:`~airflow_provider_kafka_zk.kafka.kraft_migration_config.node_mode`) and the
  simulator's migration step of that move runs (into migration mode, to KRaft, back to ZooKeeper,
  out of migration mode); a file Kafka 3.9's ``KafkaConfig`` refuses (``controller.listener.names`` in
  plain ZooKeeper mode, a KRaft broker without ``node.id``) leaves the broker down;
* ``format``: ``meta.properties`` v1 (node.id, a directory.id, the cluster id) and the bootstrap
  snapshot, in the log dir the controller's file names; a formatted dir fails as the tool does;
* ``start`` / ``stop`` / ``restart`` a controller: with the migration flag, the first start of the
  quorum provisions it (``/migration`` created) and a start after a stop runs it again; without the
  flag once every controller runs so, the migration is finalized (POST_MIGRATION);

and, each tick, writes what the controllers' hosts hold from the model, as Kafka 3.9.0 writes it
(:mod:`airflow_provider_kafka_zk.kafka.kraft_metadata`): the metadata log grows by the records of each
event -- the quorum's activation (PRE_MIGRATION), each broker's registration (a ZooKeeper-mode broker
in migration mode, or a KRaft broker) with its unfencing, the metadata migration (topics, partitions,
configs, client quotas, ACLs, SCRAM credentials, delegation tokens, then MIGRATION), the
finalization (POST_MIGRATION) -- and the controller's log gets the lines of the recorded migration
(tests/fixtures/real-kafka-3.9-migration/logs/controller-migration-log-excerpt.txt). Every running
node has a process whose command line is ``... kafka.Kafka <its properties file>`` (what the DAG's
``/proc`` check finds); a restart is a new process.

The broker hosts' ``config/`` directories belong to the operator once written: the model's syncs
leave them as the DAG wrote them (files kept beside them included).

Planted traps: ``no_kraft_registration`` -- brokers whose restart as a KRaft broker registers nothing
new with the quorum (KAFKA-20960); ``kraft_epoch`` -- the KRaft leader epoch the controller claims
with (KAFKA-20488 when it exceeds ``/controller_epoch``); ``failing_restarts`` -- restart commands
that fail before touching the broker (a roll stopped part-way: some brokers moved, the others not).

Finalization: once the quorum's leader runs without the migration flag it writes POST_MIGRATION and
the cluster stops writing ZooKeeper (:meth:`~.cluster.SimulatedCluster.finalize_kraft_migration`).
The simulator's own ZooKeeper sync still mirrors its model afterwards, so a test of a finalized
cluster changes nothing in the model after the finalization (no restarts, no new topics).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.kraft_metadata import (
    METADATA_PARTITION_DIR,
    QUORUM_STATE_FILE,
    ZkMigrationState,
    encode_metadata_batch,
    snapshot_file_name,
)
from airflow_provider_kafka_zk.kafka.kraft_migration_config import ControllerNode, NodeMode, node_mode
from airflow_provider_kafka_zk.kafka.logdir import MetaProperties, java_date_string, parse_java_properties
from airflow_provider_kafka_zk.kafka.uuid import KafkaUuid

from .cluster import SimulationError
from .deploy import DeployedCluster
from .runtime import ClusterRuntime

log = logging.getLogger(__name__)

METADATA_VERSION_39 = 21  # 3.9-IV0
SERVER_LOG = "logs/server.log"
_SLEEPER = "import time\nwhile True:\n    time.sleep(3600)\n"
ACL_RESOURCE_TYPES = {
    "Topic": 2,
    "Group": 3,
    "Cluster": 4,
    "TransactionalId": 5,
    "DelegationToken": 6,
    "User": 7,
}
ACL_OPERATIONS = {
    "All": 2,
    "Read": 3,
    "Write": 4,
    "Create": 5,
    "Delete": 6,
    "Alter": 7,
    "Describe": 8,
    "ClusterAction": 9,
    "DescribeConfigs": 10,
    "AlterConfigs": 11,
    "IdempotentWrite": 12,
    "CreateTokens": 13,
    "DescribeTokens": 14,
}


class OperatorOwnedDeployment(DeployedCluster):
    """A deployed cluster whose broker hosts' ``config/`` directories are the operator's once the
    first sync wrote them: later syncs carry them over as they are (DAG-written files and the files
    kept beside them survive)."""

    def _damage_again(self, staging_root: Path) -> None:
        super()._damage_again(staging_root)
        for host in sorted(self.root.glob("broker-*")):
            config = host / "config"
            if not config.is_dir():
                continue
            target = staging_root / host.name / "config"
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(config, target, symlinks=True)


@dataclass
class ControllerHost:
    """One KRaft controller's host state (its files are where its :class:`ControllerNode` says)."""

    node: ControllerNode
    process: subprocess.Popen[bytes] | None = None
    started_with_flag: bool | None = None
    directory_id: KafkaUuid | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def log_file(self) -> Path:
        return Path(self.node.log_dir).parent / SERVER_LOG


@dataclass
class _Log:
    """The quorum's metadata log as appended so far (one segment), and its epoch."""

    batches: list[bytes] = field(default_factory=list)
    next_offset: int = 0
    epoch: int = 1

    def append(self, records: Sequence[tuple[str, int, dict[str, Any]]]) -> int:
        if not records:
            return self.next_offset - 1
        self.batches.append(
            encode_metadata_batch(records, self.next_offset, self.epoch, int(time.time() * 1000))
        )
        self.next_offset += len(records)
        return self.next_offset - 1


class MigrationRuntime(ClusterRuntime):
    """A :class:`~.runtime.ClusterRuntime` that also plays the migration's hosts (see the module doc).

    :param controllers: the KRaft controllers of the cluster file (paths on this machine).
    :param command_dir: where :mod:`.node_command` leaves its requests (created).
    :param no_kraft_registration: brokers whose KRaft restart does not re-register (KAFKA-20960).
    :param kraft_epoch: the KRaft leader epoch the active controller claims ``/controller`` with.
    :param failing_restarts: broker -> how many of its next restart commands fail before touching it
        (exit 1, as ``systemctl restart`` refused): a roll interrupted part-way.
    """

    def __init__(
        self,
        deployed: DeployedCluster,
        *,
        controllers: Sequence[ControllerNode],
        command_dir: Path,
        restart_dir: Path,
        no_kraft_registration: Collection[int] = (),
        kraft_epoch: int = 1,
        failing_restarts: Mapping[int, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(deployed, restart_dir=restart_dir, **kwargs)
        self.controllers = {c.node_id: ControllerHost(c) for c in controllers}
        self.command_dir = Path(command_dir)
        self.command_dir.mkdir(parents=True, exist_ok=True)
        self.no_kraft_registration = set(no_kraft_registration)
        self.failing_restarts = dict(failing_restarts or {})
        self.restart_requests: list[int] = []
        self.kraft_epoch = kraft_epoch
        self.metadata = _Log(epoch=kraft_epoch)
        self.broker_processes: dict[int, subprocess.Popen[bytes]] = {}
        self._registered: dict[int, tuple[int, bool]] = {}  # broker -> (registered_at_ms, kraft) logged
        self._process_keys: dict[int, int] = {}  # broker -> registered_at_ms of its running process
        self._epochs: dict[int, int] = {}  # broker -> its registration's broker epoch
        self._fenced: set[int] = set()
        self._events: set[str] = set()
        self.finalized = False
        self.refused_starts: list[tuple[int, str]] = []

    # ------------------------------------------------------------------ templates
    def command(self, action: str) -> str:
        """The command template of ``action`` for the cluster file (placeholders filled in by the DAG)."""
        parts = [
            shlex.quote(sys.executable),
            "-m",
            "airflow_provider_kafka_zk.testing.simulator.node_command",
            "--dir",
            shlex.quote(str(self.command_dir)),
            "--action",
            action,
            "--node",
            "{broker_id}" if action == "restart-broker" else "{node_id}",
            "--timeout",
            "90",
        ]
        if action == "format":
            parts += ["--config", "{config}", "--cluster-id", "{cluster_id}"]
        return " ".join(parts)

    # ------------------------------------------------------------------ one tick
    def step(self) -> bool:
        changed = super().step()
        with self._lock:
            self._answer_commands()
            self._claim_with_planted_epoch()
            self._write_controller_hosts()
            self._keep_broker_processes()
        return changed

    def _elect_if_needed(self) -> bool:
        """The DAG's hand-back, adopted before the runtime's election syncs the model back: a
        ``/controller_epoch`` raised from outside (KAFKA-20488) counts for the election's new epoch;
        a ``/migration`` deleted from outside once no KRaft controller holds ``/controller`` is gone
        from the model too."""
        cluster = self.deployed.cluster
        data, stat = self._client.get(zk.CONTROLLER_EPOCH)
        epoch = int(data.decode())
        if epoch > cluster.controller_epoch:
            cluster.controller_epoch, cluster.controller_epoch_version = epoch, stat.version
            self.deployed.writer.note_external_write(zk.CONTROLLER_EPOCH, data)
        elected = super()._elect_if_needed()
        migration = cluster.kraft_migration
        if migration is not None and not migration.claimed and self._client.exists(zk.MIGRATION) is None:
            cluster.delete_migration_znode()
            return True
        return elected

    def _claim_with_planted_epoch(self) -> None:
        migration = self.deployed.cluster.kraft_migration
        if (
            self.kraft_epoch != 1
            and migration is not None
            and migration.claimed
            and migration.kraft_controller_epoch != self.kraft_epoch
        ):
            self.deployed.cluster.kraft_migration = replace(
                migration, kraft_controller_epoch=self.kraft_epoch
            )
            self._sync()

    # ------------------------------------------------------------------ commands
    def _answer_commands(self) -> None:
        for request in sorted(self.command_dir.glob("*.request")):
            done = request.with_suffix(".done")
            try:
                ask = json.loads(request.read_text())
            except ValueError:
                continue
            request.unlink()
            try:
                status, message = self._do(ask)
            except SimulationError as exc:
                status, message = 1, f"simulated node refused: {exc}"
            log.info("node command %s: %s %s", ask, status, message)
            temporary = done.with_name(f".{done.name}.tmp")
            temporary.write_text(json.dumps({"status": status, "message": message}))
            temporary.replace(done)  # the command never reads a half-written answer

    def _do(self, ask: dict[str, Any]) -> tuple[int, str]:
        action, node = ask["action"], int(ask["node"])
        if action == "restart-broker":
            self.restart_requests.append(node)
            if self.failing_restarts.get(node, 0) > 0:
                # the restart refused before it touched the broker (systemd's answer to a caller without
                # the right to restart the unit): the broker keeps running with the file it started with
                self.failing_restarts[node] -= 1
                return 1, (
                    "Failed to restart kafka.service: Interactive authentication required.\n"
                    "See system logs and 'systemctl status kafka.service' for details."
                )
            return self._restart_broker(node)
        host = self.controllers.get(node)
        if host is None:
            return 1, f"no KRaft controller {node} on this host"
        if action == "format":
            return self._format(host, str(ask.get("config")), str(ask.get("cluster_id")))
        if action in ("stop", "restart"):
            self._stop_controller(host, restarting=action == "restart")
        if action in ("start", "restart"):
            return self._start_controller(host)
        return 0, f"controller {node} stopped"

    # -- brokers -------------------------------------------------------------------------------
    def _broker_file(self, broker_id: int) -> Path:
        return self.deployed.root / f"broker-{broker_id}" / "config" / "server.properties"

    def _restart_broker(self, broker_id: int) -> tuple[int, str]:
        cluster = self.deployed.cluster
        broker = cluster.broker(broker_id)
        props = parse_java_properties(
            self._broker_file(broker_id).read_bytes(), str(self._broker_file(broker_id))
        )
        mode = node_mode(props)
        refused = _refused_by_kafka_config(props, mode)
        flag_in_model = broker.properties.get("zookeeper.metadata.migration.enable") == "true"
        if broker.online:
            cluster.stop_broker(broker_id, clean=True)
            self._sync()  # its registration goes with its old session: the start registers anew
        try:
            if refused:
                if broker.online:
                    cluster.stop_broker(broker_id, clean=True)
                self.refused_starts.append((broker_id, refused))
                self._sync()
                return 0, f"broker {broker_id} stopped; it did not start: {refused}"  # systemctl returns 0
            if mode is NodeMode.MIGRATION and broker.kraft_mode:
                cluster.roll_broker_back_to_zookeeper(broker_id)
            elif mode is NodeMode.MIGRATION and not flag_in_model:
                cluster.roll_broker_into_migration_mode(broker_id)
            elif mode is NodeMode.KRAFT_BROKER and not broker.kraft_mode:
                cluster.roll_broker_to_kraft(broker_id)
            elif mode is NodeMode.ZOOKEEPER and flag_in_model:
                cluster.roll_broker_out_of_migration_mode(broker_id)
            else:
                cluster.start_broker(broker_id)
        except SimulationError as exc:
            if broker.online:
                cluster.stop_broker(broker_id, clean=True)
            self.refused_starts.append((broker_id, str(exc)))
            self._sync()
            return 0, f"broker {broker_id} stopped; it did not start: {exc}"
        self._sync()
        self.restarted.append(broker_id)
        return 0, f"kafka (broker {broker_id}) restarted in {mode.value} mode"

    def _keep_broker_processes(self) -> None:
        for broker_id, broker in sorted(self.deployed.cluster.brokers.items()):
            process = self.broker_processes.get(broker_id)
            if not broker.online:
                if process is not None:
                    _kill(process)
                    del self.broker_processes[broker_id]
                continue
            started = broker.registered_at_ms
            if process is None or process.poll() is not None or self._process_keys.get(broker_id) != started:
                if process is not None:
                    _kill(process)
                self.broker_processes[broker_id] = _process(
                    self._broker_file(broker_id), self.deployed.cluster.spec.kafka_version
                )
                self._process_keys[broker_id] = started

    # -- controllers ---------------------------------------------------------------------------
    def _format(self, host: ControllerHost, config: str, cluster_id: str) -> tuple[int, str]:
        path = Path(config)
        if not path.is_file():
            return 1, f"{config} does not exist"
        props = parse_java_properties(path.read_bytes(), config)
        if node_mode(props) not in (NodeMode.CONTROLLER, NodeMode.CONTROLLER_MIGRATING):
            return 1, f"{config} is not a KRaft controller's configuration"
        if props.get("node.id") != str(host.node.node_id):
            return 1, f"{config}: node.id {props.get('node.id')} is not {host.node.node_id}"
        log_dir = Path(props.get("log.dirs") or props.get("log.dir") or host.node.log_dir)
        meta = log_dir / "meta.properties"
        if meta.exists():
            return (
                1,
                f"Log directory {log_dir} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
            )
        host.directory_id = KafkaUuid(self.deployed.cluster.rng.randbytes(16))
        if not any((Path(c.node.log_dir) / "meta.properties").exists() for c in self.controllers.values()):
            # a new quorum (an earlier attempt's storage was renamed aside): a new metadata log
            self.metadata = _Log(epoch=self.kraft_epoch)
            self._events.clear()
            self._registered.clear()
            self._epochs.clear()
            self._fenced.clear()
            self.finalized = False
        partition = log_dir / METADATA_PARTITION_DIR
        partition.mkdir(parents=True, exist_ok=True)
        bootstrap = encode_metadata_batch(
            [("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION_39})],
            0,
            0,
        )
        (log_dir / "bootstrap.checkpoint").write_bytes(bootstrap)
        (partition / snapshot_file_name(0, 0)).write_bytes(b"")
        meta.write_bytes(
            MetaProperties(1, cluster_id, node_id=host.node.node_id, directory_id=host.directory_id).encode(
                java_date_string()
            )
        )
        return 0, f"Formatting metadata directory {log_dir} with metadata.version 3.9-IV0."

    def _start_controller(self, host: ControllerHost) -> tuple[int, str]:
        cluster = self.deployed.cluster
        path = Path(host.node.config_path)
        props = parse_java_properties(path.read_bytes(), str(path))
        mode = node_mode(props)
        log_dir = Path(props.get("log.dirs") or host.node.log_dir)
        meta = log_dir / "meta.properties"
        if mode not in (NodeMode.CONTROLLER, NodeMode.CONTROLLER_MIGRATING) or not meta.exists():
            return 1, f"controller {host.node.node_id} did not start: not a formatted KRaft controller"
        parsed = MetaProperties.parse(meta.read_bytes(), str(meta))
        if parsed.cluster_id != cluster.cluster_id:
            return (
                1,
                f"controller {host.node.node_id} did not start: cluster.id {parsed.cluster_id} is not ZooKeeper's",
            )
        if host.running:
            _kill(host.process)
        host.process = _process(path, self.deployed.cluster.spec.kafka_version)
        host.started_with_flag = mode is NodeMode.CONTROLLER_MIGRATING
        migrating = " ZK migration mode is enabled." if host.started_with_flag else ""
        self._line(
            host,
            f"INFO [QuorumController id={host.node.node_id}] Creating new QuorumController with clusterId "
            f"{cluster.cluster_id}.{migrating}",
        )
        migration = cluster.kraft_migration
        running = [c for c in self.controllers.values() if c.running]
        if host.started_with_flag:
            if migration is None and len(running) * 2 > len(self.controllers):
                cluster.provision_kraft_controllers(tuple(sorted(self.controllers)))
            elif (
                migration is not None
                and not migration.controllers_running
                and len(running) * 2 > len(self.controllers)
            ):
                cluster.kraft_migration = replace(migration, controllers_running=True)
        self._finalize_if_active_without_flag()
        self._sync()
        return 0, f"controller {host.node.node_id} started"

    def _finalize_if_active_without_flag(self) -> None:
        """The quorum's leader (the lowest running id here) activates; started without the migration
        flag while the log says MIGRATION, it writes POST_MIGRATION (``ActivationRecordsGenerator.
        recordsForNonEmptyLog``, 3.9.0-rc3, logged through ``log::warn`` by ``QuorumController``): the
        finalization takes effect the moment leadership reaches a controller without the flag, whatever
        the others run with."""
        cluster = self.deployed.cluster
        migration = cluster.kraft_migration
        running = sorted(n for n, c in self.controllers.items() if c.running)
        if (
            self.finalized
            or not running
            or self.controllers[running[0]].started_with_flag is not False
            or migration is None
            or not migration.claimed
            or not migration.metadata_migrated
        ):
            return
        cluster.finalize_kraft_migration()
        self.finalized = True
        self._line(
            self.controllers[running[0]],
            f"WARN [QuorumController id={running[0]}] Performing controller activation. Loaded ZK migration state "
            "of MIGRATION. Completing the ZK migration since this controller was configured with "
            "'zookeeper.metadata.migration.enable' set to 'false'.",
        )

    def _stop_controller(self, host: ControllerHost, *, restarting: bool = False) -> None:
        if host.running:
            _kill(host.process)
        host.process = None
        cluster = self.deployed.cluster
        migration = cluster.kraft_migration
        if (
            not restarting
            and migration is not None
            and migration.controllers_running
            and not migration.finalized
            and not any(c.running for c in self.controllers.values())
        ):
            cluster.stop_kraft_controllers()
            self._sync()
        elif not restarting:
            self._finalize_if_active_without_flag()  # leadership moved to the next running controller
            self._sync()

    # ------------------------------------------------------------------ the controllers' files
    def _line(self, host: ControllerHost | None, text: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()) + ",000"
        for target in [host] if host is not None else [c for c in self.controllers.values() if c.running]:
            target.log_file.parent.mkdir(parents=True, exist_ok=True)
            with target.log_file.open("a") as handle:
                handle.write(f"[{stamp}] {text}\n")

    def _write_controller_hosts(self) -> None:
        cluster = self.deployed.cluster
        migration = cluster.kraft_migration
        active = min((n for n, c in self.controllers.items() if c.running), default=None)
        records: list[tuple[str, int, dict[str, Any]]] = []
        if migration is not None and "provisioned" not in self._events and active is not None:
            self._events.add("provisioned")
            records.append(
                ("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION_39})
            )
            records.append(
                ("ZkMigrationStateRecord", 0, {"ZkMigrationState": int(ZkMigrationState.PRE_MIGRATION)})
            )
            for node in sorted(self.controllers):
                records.append(
                    (
                        "RegisterControllerRecord",
                        0,
                        {
                            "ControllerId": node,
                            "IncarnationId": KafkaUuid(bytes(16)),
                            "ZkMigrationReady": True,
                            "EndPoints": [],
                            "Features": [],
                        },
                    )
                )
            self._line(
                None,
                f"WARN [QuorumController id={active}] Performing controller activation. The metadata log appears to be empty. Putting the controller into pre-migration mode. No metadata updates will be allowed until the ZK metadata has been migrated.",
            )
            for before, after in (
                ("UNINITIALIZED", "INACTIVE"),
                ("INACTIVE", "WAIT_FOR_CONTROLLER_QUORUM"),
                ("WAIT_FOR_CONTROLLER_QUORUM", "WAIT_FOR_BROKERS"),
            ):
                self._line(
                    None,
                    f"INFO [KRaftMigrationDriver id={active}] {active} transitioning from {before} to {after} state",
                )
        if "provisioned" in self._events and active is not None:
            for broker_id, broker in sorted(cluster.brokers.items()):
                flag = broker.properties.get("zookeeper.metadata.migration.enable") == "true"
                if not broker.online or not (flag or broker.kraft_mode):
                    continue
                key = (broker.registered_at_ms, broker.kraft_mode)
                if self._registered.get(broker_id) == key:
                    continue
                if broker.kraft_mode and broker_id in self.no_kraft_registration:
                    self._registered[broker_id] = key
                    continue  # KAFKA-20960 planted: no KRaft registration
                self._registered[broker_id] = key
                epoch = self.metadata.next_offset + len(records)
                self._epochs[broker_id] = epoch
                self._fenced.discard(broker_id)
                records.append(
                    (
                        "RegisterBrokerRecord",
                        3,
                        {
                            "BrokerId": broker_id,
                            "IsMigratingZkBroker": not broker.kraft_mode,
                            "IncarnationId": KafkaUuid(cluster.rng.randbytes(16)),
                            "BrokerEpoch": epoch,
                            "EndPoints": [],
                            "Features": [],
                            "Rack": broker.spec.rack,
                            "Fenced": True,
                        },
                    )
                )
                records.append(("UnfenceBrokerRecord", 0, {"Id": broker_id, "Epoch": epoch}))
        for broker_id in sorted(self._epochs):
            broker = cluster.brokers.get(broker_id)
            if broker is not None and not broker.online and broker_id not in self._fenced:
                # the quorum fences a broker that stopped heartbeating (BrokerHeartbeatManager)
                self._fenced.add(broker_id)
                records.append(
                    (
                        "BrokerRegistrationChangeRecord",
                        0,
                        {"BrokerId": broker_id, "BrokerEpoch": self._epochs[broker_id], "Fenced": 1},
                    )
                )
        if (
            migration is not None
            and migration.claimed
            and migration.metadata_migrated
            and "migrated" not in self._events
        ):
            self._events.add("migrated")
            data = self._migrated_records()
            records += data
            records.append(
                ("ZkMigrationStateRecord", 0, {"ZkMigrationState": int(ZkMigrationState.MIGRATION)})
            )
            for before, after in (
                ("WAIT_FOR_BROKERS", "BECOME_CONTROLLER"),
                ("BECOME_CONTROLLER", "ZK_MIGRATION"),
            ):
                self._line(
                    None,
                    f"INFO [KRaftMigrationDriver id={active}] {active} transitioning from {before} to {after} state",
                )
            self._line(
                None,
                f"INFO [KRaftMigrationDriver id={active}] Completed migration of metadata from ZooKeeper to KRaft. {len(data)} records were generated in 17 ms across 1 batches.",
            )
            for before, after in (
                ("ZK_MIGRATION", "SYNC_KRAFT_TO_ZK"),
                ("SYNC_KRAFT_TO_ZK", "KRAFT_CONTROLLER_TO_BROKER_COMM"),
                ("KRAFT_CONTROLLER_TO_BROKER_COMM", "DUAL_WRITE"),
            ):
                self._line(
                    None,
                    f"INFO [KRaftMigrationDriver id={active}] {active} transitioning from {before} to {after} state",
                )
        if self.finalized and "finalized" not in self._events:
            self._events.add("finalized")
            records.append(
                ("ZkMigrationStateRecord", 0, {"ZkMigrationState": int(ZkMigrationState.POST_MIGRATION)})
            )
        if records:
            self.metadata.append(records)
        for host in self.controllers.values():
            log_dir = Path(host.node.log_dir)
            if not (log_dir / "meta.properties").exists():
                continue
            partition = log_dir / METADATA_PARTITION_DIR
            segment = b"".join(self.metadata.batches)
            target = partition / "00000000000000000000.log"
            if not target.exists() or target.stat().st_size != len(segment):
                temp = partition / ".segment.tmp"
                temp.write_bytes(segment)
                temp.replace(target)
            leader = active if active is not None else -1
            quorum = json.dumps(
                {"leaderId": leader, "leaderEpoch": self.metadata.epoch, "votedId": -1, "data_version": 1}
            )
            state = partition / QUORUM_STATE_FILE
            if not state.exists() or state.read_text() != quorum:
                state.write_text(quorum)

    def _migrated_records(self) -> list[tuple[str, int, dict[str, Any]]]:
        """What the initial load copies (``ZkMigrationClient.readAllMetadata``, 3.9.0-rc3), from the model."""
        cluster = self.deployed.cluster
        out: list[tuple[str, int, dict[str, Any]]] = []
        for topic in sorted(cluster.topics.values(), key=lambda t: t.name):
            topic_id = topic.zk_topic_id
            if topic_id is None:
                continue
            out.append(("TopicRecord", 0, {"Name": topic.name, "TopicId": topic_id}))
            for p, part in sorted(topic.partitions.items()):
                out.append(
                    (
                        "PartitionRecord",
                        0,
                        {
                            "PartitionId": p,
                            "TopicId": topic_id,
                            "Replicas": list(part.replicas),
                            "Isr": list(part.isr),
                            "Leader": part.leader,
                            "LeaderEpoch": part.leader_epoch,
                            "PartitionEpoch": 0,
                        },
                    )
                )
            for key, value in sorted(topic.config.items()):
                out.append(
                    (
                        "ConfigRecord",
                        0,
                        {"ResourceType": 2, "ResourceName": topic.name, "Name": key, "Value": value},
                    )
                )
        for name, config in sorted(getattr(cluster, "broker_configs", {}).items()):
            for key, value in sorted(config.items()):
                entity = "" if name == "<default>" else str(name)
                out.append(
                    (
                        "ConfigRecord",
                        0,
                        {"ResourceType": 4, "ResourceName": entity, "Name": key, "Value": value},
                    )
                )
        for kind, configs in (("client-id", cluster.client_configs), ("user", cluster.user_configs)):
            for name, config in sorted(configs.items()):
                for key, value in sorted(config.items()):
                    if key.startswith("SCRAM-"):
                        continue
                    entity = [{"EntityType": kind, "EntityName": None if name == "<default>" else name}]
                    out.append(
                        (
                            "ClientQuotaRecord",
                            0,
                            {"Entity": entity, "Key": key, "Value": float(value), "Remove": False},
                        )
                    )
        for user, config in sorted(cluster.user_configs.items()):
            for mechanism, code in (("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 2)):
                if mechanism in config:
                    fields = dict(item.split("=", 1) for item in config[mechanism].split(","))
                    out.append(
                        (
                            "UserScramCredentialRecord",
                            0,
                            {
                                "Name": user,
                                "Mechanism": code,
                                "Salt": base64.b64decode(fields["salt"]),
                                "StoredKey": base64.b64decode(fields["stored_key"]),
                                "ServerKey": base64.b64decode(fields["server_key"]),
                                "Iterations": int(fields["iterations"]),
                            },
                        )
                    )
        for (pattern, resource_type, name), entries in sorted(cluster.acls.items()):
            for entry in entries:
                out.append(
                    (
                        "AccessControlEntryRecord",
                        0,
                        {
                            "Id": KafkaUuid(cluster.rng.randbytes(16)),
                            "ResourceType": ACL_RESOURCE_TYPES[resource_type],
                            "ResourceName": name,
                            "PatternType": 3 if pattern == "literal" else 4,
                            "Principal": entry["principal"],
                            "Host": entry["host"],
                            "Operation": ACL_OPERATIONS[entry["operation"]],
                            "PermissionType": 3 if entry["permissionType"] == "Allow" else 2,
                        },
                    )
                )
        for token_id, token in sorted(cluster.delegation_tokens.items()):
            out.append(
                (
                    "DelegationTokenRecord",
                    0,
                    {
                        "Owner": f"User:{token['owner']}",
                        "Requester": f"User:{token['owner']}",
                        "Renewers": [],
                        "IssueTimestamp": token["issueTimestamp"],
                        "MaxTimestamp": token["maxTimestamp"],
                        "ExpirationTimestamp": token["expiryTimestamp"],
                        "TokenId": token_id,
                    },
                )
            )
        return out

    def change(self, step: Any) -> None:
        """Run ``step(cluster)`` -- an incident or a planted trap -- between two ticks, then sync."""
        with self._lock:
            step(self.deployed.cluster)
            self._sync()

    def register_broker(self, broker_id: int, *, kraft: bool) -> None:
        """A registration of broker ``broker_id`` with the quorum, as a KRaft broker or (KAFKA-20960
        planted: a start that never re-registered as a KRaft broker) as a ZooKeeper-mode broker in
        migration mode, while its file says KRaft."""
        with self._lock:
            epoch = self.metadata.next_offset
            self._epochs[broker_id] = epoch
            self._fenced.discard(broker_id)
            self.metadata.append(
                [
                    (
                        "RegisterBrokerRecord",
                        3,
                        {
                            "BrokerId": broker_id,
                            "IsMigratingZkBroker": not kraft,
                            "IncarnationId": KafkaUuid(bytes(16)),
                            "BrokerEpoch": epoch,
                            "EndPoints": [],
                            "Features": [],
                            "Rack": None,
                            "Fenced": True,
                        },
                    ),
                    ("UnfenceBrokerRecord", 0, {"Id": broker_id, "Epoch": epoch}),
                ]
            )

    # ------------------------------------------------------------------ lifetime
    def close_processes(self) -> None:
        for process in self.broker_processes.values():
            _kill(process)
        self.broker_processes.clear()
        for host in self.controllers.values():
            if host.process is not None:
                _kill(host.process)
                host.process = None

    def __exit__(self, *exc_info: object) -> None:
        try:
            super().__exit__(*exc_info)
        finally:
            self.close_processes()


def _refused_by_kafka_config(props: dict[str, str], mode: NodeMode) -> str | None:
    """What ``KafkaConfig.validateValues`` (3.9.0-rc3) refuses of a broker's file, else None."""
    if mode is NodeMode.ZOOKEEPER and props.get("controller.listener.names", "").strip():
        return "controller.listener.names must be empty when not running in KRaft mode"
    if mode is NodeMode.MIGRATION and not props.get("controller.listener.names", "").strip():
        return "controller.listener.names must not be empty when running in ZooKeeper migration mode"
    if mode is NodeMode.KRAFT_BROKER and "node.id" not in props:
        return "Missing configuration `node.id` which is required when `process.roles` is defined"
    if "node.id" in props and "broker.id" in props and props["node.id"] != props["broker.id"]:
        return "You must set `node.id` to the same value as `broker.id`."
    if mode not in (NodeMode.ZOOKEEPER, NodeMode.MIGRATION, NodeMode.KRAFT_BROKER):
        return f"not a broker's configuration ({mode.value})"
    return None


def _process(config: Path, release: str) -> subprocess.Popen[bytes]:
    """A process standing for a running Kafka node: its command line ends ``-cp <...>/kafka_2.13-<release>.jar
    kafka.Kafka <config>``, as ``kafka-run-class.sh`` starts one (the inventory reads the release there)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SLEEPER,
            "-cp",
            f"/opt/kafka/libs/kafka_2.13-{release}.jar",
            "kafka.Kafka",
            str(config),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kill(process: subprocess.Popen[bytes] | None) -> None:
    if process is None:
        return
    process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
