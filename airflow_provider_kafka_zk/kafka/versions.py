"""Kafka release and inter.broker.protocol.version (IBP) arithmetic.

Most format questions ("does this cluster use topic ids?", "which broker registration version is
written?") depend on the IBP, not on the release; a few (who creates partition.metadata, whether
the clean-shutdown marker holds JSON) depend on the release. Both are compared as tuples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from .errors import KafkaFormatError

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.\d+)?(?:-IV(\d+))?$")  # 0.x releases have a 4th part


@total_ordering
@dataclass(frozen=True)
class KafkaVersion:
    """``3.3.1`` (a release) or ``2.8-IV1`` (an IBP); an IBP without ``-IVn`` means its last IV."""

    major: int
    minor: int
    patch: int = 0
    iv: int | None = None

    @classmethod
    def parse(cls, text: str, source: str = "Kafka version") -> KafkaVersion:
        match = _VERSION.match(str(text).strip())
        if not match:
            raise KafkaFormatError(source, "a Kafka version such as 3.3.1, 2.8 or 2.8-IV1", repr(text))
        major, minor, patch, iv = match.groups()
        return cls(int(major), int(minor), int(patch or 0), None if iv is None else int(iv))

    def _key(self) -> tuple[int, int, int, int]:
        # "2.8" as an IBP means the newest IV of 2.8, so it sorts after every explicit 2.8-IVn.
        return (self.major, self.minor, self.patch, 1_000 if self.iv is None else self.iv)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, KafkaVersion):
            return NotImplemented
        return self._key() < other._key()

    def at_least(self, text: str) -> bool:
        return self >= KafkaVersion.parse(text)

    @property
    def release_line(self) -> str:
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}"
        if self.patch:
            text += f".{self.patch}"
        if self.iv is not None:
            text += f"-IV{self.iv}"
        return text


def ibp_uses_topic_ids(ibp: KafkaVersion) -> bool:
    """IBP >= 2.8-IV0: topic ids are created, kept in ZooKeeper and partition.metadata is kept."""
    return ibp >= KafkaVersion(2, 8, 0, 0)


def ibp_sends_topic_ids(ibp: KafkaVersion) -> bool:
    """IBP >= 2.8-IV1: LeaderAndIsr v5 carries topic ids to brokers."""
    return ibp >= KafkaVersion(2, 8, 0, 1)


def ibp_uses_alter_partition(ibp: KafkaVersion) -> bool:
    """IBP >= 2.7-IV2: only the controller writes partition state znodes (no isr_change notifications)."""
    return ibp >= KafkaVersion(2, 7, 0, 2)


def broker_registration_version(ibp: KafkaVersion) -> int:
    """Version of ``/brokers/ids/<id>`` a 2.x/3.x broker writes for this IBP (``BrokerInfo.apply`` in ZkData.scala, 3.3.1: 5 from IBP 2.7-IV0, 4 from 0.10.0-IV1)."""
    if ibp >= KafkaVersion(2, 7, 0, 0):
        return 5
    if ibp >= KafkaVersion(0, 10, 0, 1):
        return 4
    return 2


def topic_znode_version(release: KafkaVersion) -> int:
    """Format version of the topic znode a controller/admin of this release writes (``TopicZNode`` in ZkData.scala: v3 from 2.8, v2 from 2.4)."""
    if release >= KafkaVersion(2, 8):
        return 3
    if release >= KafkaVersion(2, 4):
        return 2
    return 1


def feature_znode_version(ibp: KafkaVersion) -> int:
    """``/feature`` v2 drops min_version_level from IBP 3.3-IV0 (``FeatureZNode`` in ZkData.scala, 3.3.1)."""
    return 2 if ibp >= KafkaVersion(3, 3, 0, 0) else 1


def clean_shutdown_marker_has_json(release: KafkaVersion) -> bool:
    """3.7+ writes ``{"version":0,"brokerEpoch":N}`` into ``.kafka_cleanshutdown``; older ones an empty file."""
    return release >= KafkaVersion(3, 7)


def writes_partition_metadata_on_create(release: KafkaVersion) -> bool:
    """3.0+ write partition.metadata for a log created with a known id; 2.8.x only on a later LeaderAndIsr."""
    return release >= KafkaVersion(3, 0)


# ---------------------------------------------------------------------------------------------
# The version matrix: one tested release per line, and the release rules the simulator and the
# rules follow (each read from Kafka's source at the release tag named in its docstring).
# ---------------------------------------------------------------------------------------------

MATRIX_RELEASES: dict[str, str] = {
    "0.11": "0.11.0.3",
    "1.1": "1.1.1",
    "2.0": "2.0.1",
    "2.3": "2.3.1",
    "2.4": "2.4.1",
    "2.7": "2.7.2",
    "2.8": "2.8.2",
    "3.0": "3.0.2",
    "3.3": "3.3.1",
    "3.6": "3.6.2",
    "3.9": "3.9.0",
}
"""The ZooKeeper-mode release lines the project is tested on, and the release simulated for each."""


def matrix_release(text: str) -> str:
    """``"2.3"`` -> ``"2.3.1"`` (the matrix release of that line); a full release is returned as given.

    :param text: a release line of :data:`MATRIX_RELEASES` or a full release such as ``2.8.2``.
    :raises KafkaFormatError: for text that is no Kafka version, or a 4.x (KRaft-only) release.
    """
    version = KafkaVersion.parse(text)
    if version.major >= 4:
        raise KafkaFormatError("Kafka version", "a ZooKeeper-mode release (0.11 to 3.9)", str(text))
    line = version.release_line
    if str(text).strip() == line and line in MATRIX_RELEASES:
        return MATRIX_RELEASES[line]
    return str(text).strip()


def offset_index_holds_last_offset(release: KafkaVersion) -> bool:
    """2.0+ index the chunk's last offset, 0.11-1.1 its first (``LogSegment.append``, 1.1.0 vs 2.0.0)."""
    return release >= KafkaVersion(2, 0)


def caps_suffixed_dir_names(release: KafkaVersion) -> bool:
    """2.3+ cut the topic so ``<t>-<p>.<uuid>-delete`` stays <= 255 chars (``Log.logDeleteDirName``, 2.3.0)."""
    return release >= KafkaVersion(2, 3)


def has_stray_dirs(release: KafkaVersion) -> bool:
    """3.6.1+ set replicas aside as ``<t>-<p>.<uuid>-stray`` (``LocalLog.StrayDirSuffix``: absent at
    3.6.0 and 3.5.2, present at 3.6.1, 3.6.2 and 3.7.0, from KAFKA-15605); older brokers cannot even
    parse such a name (``LocalLog.parseTopicPartitionName``, 3.6.0, throws KafkaException)."""
    return release >= KafkaVersion(3, 6, 1)


def meta_properties_has_cluster_id(release: KafkaVersion) -> bool:
    """2.4+ write ``cluster.id`` into meta.properties (``BrokerMetadataCheckpoint.write``, 2.3.0 vs 2.4.0)."""
    return release >= KafkaVersion(2, 4)


def writes_feature_znode(release: KafkaVersion) -> bool:
    """2.7+ controllers create ``/feature`` (KIP-584; ``KafkaController.setupFeatureVersioning``, 2.7.0)."""
    return release >= KafkaVersion(2, 7)


def controller_znode_version(release: KafkaVersion) -> int:
    """``/controller`` v2 (with ``kraftControllerEpoch``) from 3.4 (``ControllerZNode.encode``, 3.4.0)."""
    return 2 if release >= KafkaVersion(3, 4) else 1


def supports_kraft_migration(release: KafkaVersion) -> bool:
    """3.4+ can migrate to KRaft: only then may ``/migration`` exist (``MigrationZNode``, 3.4.0)."""
    return release >= KafkaVersion(3, 4)


def supports_directory_ids(release: KafkaVersion) -> bool:
    """3.7+ give each log dir a ``directory.id`` in meta.properties (KIP-858); a ZooKeeper-mode broker
    only when it starts with the migration on (``KafkaServer.startup``: ``generateValidDirectoryId``
    under ``config.migrationEnabled``, absent at 3.6.2, present at 3.7.0 and 3.9.0-rc3)."""
    return release >= KafkaVersion(3, 7)


def config_entity_types(release: KafkaVersion) -> tuple[str, ...]:
    """``/config/<type>`` paths every broker creates at startup.

    0.11-1.0 ``ZkUtils.persistentZkPaths``: topics and clients; 1.1-2.7 ``ZkData.PersistentZkPaths`` with
    ``ConfigType.all``: + users, brokers; 2.8+ + ips (``DynamicConfigManager.ConfigType``, 2.8.0).
    """
    if release < KafkaVersion(1, 1):
        return ("topics", "clients")
    if release < KafkaVersion(2, 8):
        return ("topics", "clients", "users", "brokers")
    return ("topics", "clients", "users", "brokers", "ips")


def creates_log_dir_event_path(release: KafkaVersion) -> bool:
    """``/log_dir_event_notification`` exists from 1.0 (JBOD, KIP-112; absent in 0.11 ``ZkUtils``)."""
    return release >= KafkaVersion(1, 0)
