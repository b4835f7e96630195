"""A deployed simulated cluster that reacts while a DAG acts on it: Kafka's controller and brokers for
what a topicId repair does (see ``SimulatedController`` for reassignments).

Each tick, in a thread of the test process:

* partition.metadata / leader-epoch-checkpoint files removed on a running broker's disk are noted
  in the model (the broker keeps the id in memory until it restarts), so no sync brings them back;
* a topic znode rewritten from outside is adopted into the model (ZooKeeper only: the running
  controller keeps its in-memory id);
* a missing ``/controller`` while brokers run means an election: the winner loads ids from ZooKeeper
  and sends LeaderAndIsr (``SimulatedCluster.elect_controller``);
* ``/admin/preferred_replica_election`` is carried out and deleted, moved or not
  (``SimulatedCluster.preferred_replica_election``);
* restart requests written by :mod:`.restart` (the broker host's restart command) are carried out:
  a controlled shutdown, then a start (or, for a broker in ``fail_restart``, no start: a broker that
  does not come back); the broker starts with the server.properties on its host: one someone wrote
  there (a migration DAG) is adopted and kept byte for byte, and a change of migration mode is that
  step of a ZooKeeper-to-KRaft migration (into migration mode, to KRaft, back, out);
* with ``reassignments``, a :class:`~.controller.SimulatedController` steps in the same thread, so
  one runtime serves a drain, a restart and a move-back in turn;
* with ``delete_logs``, each running broker's ``kafka-delete-logs`` task removes ``-delete``
  directories when Kafka's LogManager would (:class:`~.log_deletion.DeleteLogsTask`).

Kafka's automatic leader rebalance is not simulated: a restarted broker leads nothing until an
election runs, which is what a cluster with ``auto.leader.rebalance.enable=false`` does (and one
with it on does for up to ``leader.imbalance.check.interval.seconds``).

It writes the model to ZooKeeper and the disks only when something changed, so the files stay still
while a DAG inventories them, as a real cluster's would.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import sys
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.errors import KafkaFormatError, ZnodeFormatError
from airflow_provider_kafka_zk.kafka.kraft_migration import BrokerMode, broker_mode
from airflow_provider_kafka_zk.kafka.logdir import DirKind, format_partition_dir_name, parse_java_properties

from .cluster import BrokerModel, ReplicaDir
from .controller import SimulatedController
from .deploy import DeployedCluster
from .disk_writer import broker_host, server_properties
from .log_deletion import DeleteLogsTask
from .log_recovery import load_broker_logs
from .render import topic_assignment

log = logging.getLogger(__name__)


class ClusterRuntime:
    """Runs the deployed cluster's reactions in a thread; use as a context manager.

    :param restart_dir: where the restart command leaves requests (created).
    :param fail_restart: brokers that stop and never start again when asked to restart.
    :param reassignments: also carry out partition reassignments (a ``SimulatedController``).
    :param delete_logs: also remove ``-delete`` directories on Kafka's schedule (a ``DeleteLogsTask``).
    """

    def __init__(
        self,
        deployed: DeployedCluster,
        *,
        restart_dir: Path,
        interval: float = 0.2,
        fail_restart: Collection[int] = (),
        reassignments: bool = False,
        delete_logs: bool = False,
    ) -> None:
        self.deployed = deployed
        self.restart_dir = Path(restart_dir)
        self.restart_dir.mkdir(parents=True, exist_ok=True)
        self.interval = interval
        self.fail_restart = set(fail_restart)
        self.restarted: list[int] = []
        self.elections: list[int] = []
        self.preferred_elections: list[dict[tuple[str, int], str]] = []
        self.controller = SimulatedController(deployed, partitions_per_step=50) if reassignments else None
        self.delete_logs = DeleteLogsTask(deployed) if delete_logs else None
        self._lock = threading.Lock()
        self._client = KazooClient(hosts=deployed.zookeeper_connect)
        self._client.start(timeout=15)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written = self._files_written()  # what the deployed cluster's last sync wrote

    def restart_command_template(self) -> str:
        """The restart command to give the repair (``{broker_id}`` is filled in by it)."""
        return " ".join(
            [
                shlex.quote(sys.executable),
                "-m",
                "airflow_provider_kafka_zk.testing.simulator.restart",
                "--dir",
                shlex.quote(str(self.restart_dir)),
                "--broker",
                "{broker_id}",
                "--timeout",
                "60",
            ]
        )

    # ------------------------------------------------------------------ one tick
    def step(self) -> bool:
        """One round; True when the model changed (and was synced)."""
        with self._lock:
            changed = self._note_removed_files()
            changed |= self._adopt_topic_znodes()
            changed |= self._elect_if_needed()
            if self.delete_logs is not None:
                changed |= self.delete_logs.step()
            if changed:
                self._sync()
            self._preferred_election()
            self._restart_requested()
            # stepped only while something moves: its sync rewrites the hosts, which must stay still
            # while a DAG inventories them (as a real cluster's files would)
            if self.controller is not None and (
                self.deployed.cluster.reassignment or self._client.exists(zk.REASSIGN_PARTITIONS)
            ):
                self.controller.step()
            return changed

    def _sync(self) -> None:
        """Sync the model, noting files removed from running brokers' disks right before the rewrite
        (a removal between a tick's first look and the rewrite would otherwise be undone)."""
        self.deployed.sync(before_disk=self._note_removed_files)
        self._written = self._files_written()

    def _replica_paths(self) -> Iterator[tuple[ReplicaDir, Path]]:
        cluster = self.deployed.cluster
        for d in cluster.dirs:
            if d.kind is not DirKind.NORMAL or not cluster.brokers[d.broker_id].online:
                continue
            host = broker_host(cluster, d.broker_id, self.deployed.root)
            yield (
                d,
                host.log_dirs[d.log_dir_index]
                / format_partition_dir_name(d.topic, d.partition, d.kind, d.unique_id),
            )

    def _files_written(self) -> set[Path]:
        """The partition.metadata / leader-epoch-checkpoint files the last sync wrote (from the model,
        as the disk writer decides: no look at the disk, so a removal right after is still seen)."""
        written = set()
        for d, path in self._replica_paths():
            if d.metadata_file and d.topic_id is not None:
                written.add(path / "partition.metadata")
            if d.epoch_file:
                written.add(path / "leader-epoch-checkpoint")
        return written

    def _note_removed_files(self) -> bool:
        """A running broker keeps its in-memory id when someone removes its files: note which files the
        last sync wrote that are gone now (a file the model only now wants is not written yet)."""
        changed = False
        for d, path in self._replica_paths():
            metadata, epochs = path / "partition.metadata", path / "leader-epoch-checkpoint"
            if d.metadata_file and metadata in self._written and not metadata.exists():
                d.metadata_file = False
                changed = True
            if d.epoch_file and epochs in self._written and not epochs.exists():
                d.epoch_file = False
                changed = True
        return changed

    def _adopt_topic_znodes(self) -> bool:
        cluster = self.deployed.cluster
        changed = False
        for name in list(cluster.topics):
            path = zk.topic_path(name)
            try:
                data, _ = self._client.get(path)
            except NoNodeError:  # deleted meanwhile: the deletion path is not this runtime's business
                continue
            ours = topic_assignment(cluster, name).encode()
            if data == ours:
                continue
            try:
                written = zk.TopicAssignment.decode(data, path)
            except ZnodeFormatError as exc:
                log.warning("Ignoring an undecodable write of %s: %s", path, exc)
                continue
            cluster.adopt_topic_znode(name, topic_id=written.topic_id, format_version=written.version)
            self.deployed.writer.note_external_write(path, data)
            changed = True
        return changed

    def _elect_if_needed(self) -> bool:
        cluster = self.deployed.cluster
        if not cluster.zookeeper_broker_ids() or self._client.exists(zk.CONTROLLER) is not None:
            return False
        migration = cluster.kraft_migration
        if migration is not None and migration.claimed and migration.controllers_running:
            log.warning("/controller deleted while the KRaft controller runs: not simulated, left as it is")
            return False
        self.deployed.writer.forget_ephemeral(zk.CONTROLLER)
        if migration is not None and migration.claimed:
            # the rollback's deletion of the stopped KRaft controller's /controller: the brokers elect,
            # the winner rebalances 5 s later (SimulatedCluster.delete_controller_znode)
            cluster.delete_controller_znode("deleteall")
            winner = cluster.controller_id
        else:
            winner = cluster.elect_controller()
        self.elections.append(winner)
        log.info("simulated controller election after /controller vanished: broker %d", winner)
        return True

    def _preferred_election(self) -> None:
        try:
            data, _ = self._client.get(zk.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return
        try:
            request = zk.PreferredReplicaElection.decode(data)
        except ZnodeFormatError as exc:
            log.warning("Ignoring an undecodable %s: %s", zk.PREFERRED_REPLICA_ELECTION, exc)
            partitions: tuple[zk.TopicPartition, ...] = ()
        else:
            partitions = request.partitions
        outcome = self.deployed.cluster.preferred_replica_election(partitions)
        self._sync()  # the new leaders first, then the znode goes (KafkaController)
        self._client.delete(zk.PREFERRED_REPLICA_ELECTION)
        self.preferred_elections.append(outcome)
        log.info("simulated preferred replica election: %s", outcome)

    def _restart_requested(self) -> None:
        cluster = self.deployed.cluster
        for request in sorted(self.restart_dir.glob("*.request")):
            broker_id = int(request.name.split(".", 1)[0])
            done = request.with_suffix(".done")
            request.unlink()
            # files removed after this tick's first look and before the request: the broker reads its
            # disk as it starts, so look again now (else a sync could write them back)
            self._note_removed_files()
            configured = self._configuration_written(broker_id)
            if broker_id in self.fail_restart:
                cluster.stop_broker(broker_id, clean=False)
                self._sync()
                log.info("simulated broker %d stopped and did not start again", broker_id)
            elif configured is not None and self._roll(broker_id, *configured):
                self._sync()
                self.restarted.append(broker_id)
            else:
                cluster.stop_broker(broker_id, clean=True)
                self._sync()  # the registration goes with the old session
                if self._load_logs(broker_id):
                    cluster.start_broker(broker_id)
                    self._sync()
                    self.restarted.append(broker_id)
            done.write_text(f"broker {broker_id} at {cluster.clock_ms}\n")

    def _configuration_written(self, broker_id: int) -> tuple[str, dict[str, str]] | None:
        """The broker's server.properties when someone (a migration DAG) wrote it since the last sync:
        a broker reads its file as it starts. None when it is what the model wrote."""
        cluster = self.deployed.cluster
        host = self.deployed.hosts.get(broker_id)
        if host is None:
            return None
        try:
            raw = host.server_properties.read_bytes()
        except OSError:
            return None
        broker = cluster.brokers[broker_id]
        text = raw.decode("latin-1")
        if text == (broker.server_properties_text or self._rendered(broker_id, broker)):
            return None
        try:
            settings = parse_java_properties(raw, str(host.server_properties))
        except KafkaFormatError as exc:
            log.warning(
                "broker %d: unreadable server.properties, restarting as configured before: %s", broker_id, exc
            )
            return None
        return text, settings

    def _rendered(self, broker_id: int, broker: BrokerModel) -> str:
        return server_properties(
            self.deployed.cluster, broker, self.deployed.hosts[broker_id], self.deployed.zookeeper_connect
        )

    def _roll(self, broker_id: int, text: str, settings: dict[str, str]) -> bool:
        """Restart a broker with the server.properties written on its host: the model adopts the file (its
        settings over what the simulator renders, the file kept byte for byte), and a change of mode is the
        migration's roll -- into migration mode (the KRaft controller claims after the last broker), to
        KRaft mode, back to ZooKeeper mode, out of migration mode (``SimulatedCluster.roll_broker_*``).
        Returns False when the mode stays (the caller restarts it the ordinary way)."""
        cluster = self.deployed.cluster
        broker = cluster.brokers[broker_id]
        before, after = cluster.broker_mode(broker_id), broker_mode(settings)
        base = parse_java_properties(
            self._rendered(
                broker_id, dataclasses.replace(broker, properties={}, server_properties_text=None)
            ).encode("latin-1"),
            "server.properties",
        )
        overlay: dict[str, str | None] = {k: v for k, v in settings.items() if base.get(k) != v}
        overlay.update({k: None for k in base if k not in settings})

        def adopt() -> None:
            broker.properties = dict(overlay)
            broker.server_properties_text = text

        rolls = {
            (BrokerMode.ZOOKEEPER, BrokerMode.MIGRATION): cluster.roll_broker_into_migration_mode,
            (BrokerMode.MIGRATION, BrokerMode.KRAFT): cluster.roll_broker_to_kraft,
            (BrokerMode.KRAFT, BrokerMode.MIGRATION): cluster.roll_broker_back_to_zookeeper,
            (BrokerMode.MIGRATION, BrokerMode.ZOOKEEPER): cluster.roll_broker_out_of_migration_mode,
        }
        roll = rolls.get((before, after))
        if before is not after and roll is None:
            log.warning(
                "broker %d: %s -> %s is no migration step; restarting it as configured",
                broker_id,
                before,
                after,
            )
        if roll is None or before is after:
            adopt()
            return False
        self._sync()  # nothing pending before the roll changes the registrations
        roll(broker_id)
        adopt()
        log.info("simulated broker %d restarted from %s to %s mode", broker_id, before.value, after.value)
        return True

    def _load_logs(self, broker_id: int) -> bool:
        """Kafka's log loading at the broker's start, on its disk (``log_recovery.load_broker_logs``:
        ``LogLoader`` of the release); False when it throws: Kafka exits, the broker stays down."""
        starts = load_broker_logs(self.deployed, broker_id)
        fatal = next((s.fatal for s in starts if s.fatal), None)
        if fatal is None:
            return True
        self._sync()
        log.info("simulated broker %d did not start: %s", broker_id, fatal)
        return False

    # ------------------------------------------------------------------ thread
    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception:  # keep reacting, like Kafka's event loop; tests see the log
                log.exception("simulated cluster runtime step failed")

    def __enter__(self) -> ClusterRuntime:
        self._thread = threading.Thread(target=self._loop, name="simulated-cluster-runtime", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.controller is not None:
            self.controller.stop()
        self._client.stop()
        self._client.close()
