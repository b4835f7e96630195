"""A simulated cluster put into a real ZooKeeper and onto disk, kept in step with its model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .cluster import SimulatedCluster
from .controller_host import ControllerHost, write_controller_hosts
from .disk_writer import BrokerHost, write_broker_hosts
from .log_damage import LogDamage, segment_stem
from .log_damage import apply as apply_log_damage
from .log_damage import record as record_log_damage
from .render import render_zookeeper
from .zk_writer import ZooKeeperTreeWriter


class DeployedCluster:
    """``SimulatedCluster`` living in ZooKeeper ``hosts`` under ``chroot`` and in ``root`` on disk.

    Live brokers hold real ZooKeeper sessions (their registrations are ephemeral), so keep this
    object open while something reads the cluster; ``close()`` ends the sessions as a shutdown of
    every broker would. After changing the model with an incident step, call ``sync()``.
    """

    def __init__(self, cluster: SimulatedCluster, zookeeper_hosts: str, chroot: str, root: Path) -> None:
        self.cluster = cluster
        self.zookeeper_hosts = zookeeper_hosts
        self.chroot = chroot
        self.root = Path(root)
        self.writer = ZooKeeperTreeWriter(zookeeper_hosts, chroot)
        self.hosts: dict[int, BrokerHost] = {}
        self.controller_hosts: dict[int, ControllerHost] = {}
        self.log_damage: list[LogDamage] = []
        self.sync()

    @property
    def zookeeper_connect(self) -> str:
        """What a broker's ``zookeeper.connect`` says: hosts plus the chroot."""
        return self.zookeeper_hosts + self.chroot

    def sync(self, before_disk: Callable[[], object] | None = None) -> dict[str, int]:
        """Write the model's current ZooKeeper tree (as a diff) and rewrite every broker host root.

        :param before_disk: called right before the host roots are rewritten (a runtime notes there
            what was removed from the disks meanwhile, so the rewrite does not bring it back).
        """
        counts = self.writer.apply(render_zookeeper(self.cluster))
        if before_disk is not None:
            before_disk()
        self.hosts = write_broker_hosts(
            self.cluster, self.root, self.zookeeper_connect, prepare=self._damage_again
        )
        self.controller_hosts = write_controller_hosts(self.cluster, self.root, self.zookeeper_connect)
        return counts

    def _damage_again(self, staging_root: Path) -> None:
        """The model holds no damage: the planted damage goes into the rewritten files before they
        replace the ones on disk (so the damage never disappears for a reader meanwhile)."""
        for damage in self.log_damage:
            apply_log_damage(self.cluster, staging_root, damage)

    def plant_log_damage(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        kind: str,
        *,
        segment: int = -1,
        drop_index: bool = False,
        index_rule: str = "last",
    ) -> Path:
        """Damage one replica's segment on its broker's disk (see :mod:`.log_damage` for the kinds);
        kept across syncs. Returns the damaged segment's path without suffix."""
        damage = LogDamage(broker_id, topic, partition, kind, segment, drop_index, index_rule)
        record_log_damage(self.cluster, damage)
        apply_log_damage(self.cluster, self.root, damage)
        self.log_damage.append(damage)
        return segment_stem(self.cluster, self.root, damage)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> DeployedCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
