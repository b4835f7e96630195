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
