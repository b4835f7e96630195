"""While the KRaft controller dual-writes: is ZooKeeper what the KRaft metadata says? (pure)

Until the migration is finalized the KRaft controller writes every change into ZooKeeper too, so a
revert finds ZooKeeper up to date. What ZooKeeper holds that KRaft does not (a tool that wrote
ZooKeeper directly), or KRaft holds that ZooKeeper lacks (a dual-write the release does not do,
KAFKA-15009, KAFKA-14970), is lost one way or the other: after a revert, or after finalization.
Compared, as far as the release carries them (``ZkMigrationClient`` / ``KRaftMigrationZkWriter``,
3.4.0-3.9.0-rc3): topics and their ids, partitions and their replicas, topic and broker configs,
client quotas, ACLs (3.5+), SCRAM credentials (3.5+), delegation tokens (3.6+).

Names as each side stores them: ZooKeeper sanitizes quota entity names (``Sanitizer.sanitize``: URL
encoding, ``<default>`` for the default entity); KRaft keeps the name itself and ``null`` for the
default (KAFKA-16222, KAFKA-16411 fixed how the migration maps them).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from .kraft_metadata import MetadataImage
from .model import ClusterState
from .versions import KafkaVersion

RESOURCE_TYPES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}
PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {
    2: "All",
    3: "Read",
    4: "Write",
    5: "Create",
    6: "Delete",
    7: "Alter",
    8: "Describe",
    9: "ClusterAction",
    10: "DescribeConfigs",
    11: "AlterConfigs",
    12: "IdempotentWrite",
    13: "CreateTokens",
    14: "DescribeTokens",
}
PERMISSIONS = {2: "Deny", 3: "Allow"}
"""``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType`` codes (clients, 3.9.0-rc3)."""
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class CheckStatus(enum.StrEnum):
    SAME = "same"
    DIFFERENT = "different"
    NOT_CARRIED = "not-carried"


@dataclass(frozen=True)
class DualWriteCheck:
    """One kind of metadata compared: what differs, each side named."""

    what: str
    status: CheckStatus
    evidence: str
    zookeeper_only: tuple[str, ...] = ()
    kraft_only: tuple[str, ...] = ()
    differing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "status": self.status.value,
            "evidence": self.evidence,
            "zookeeper_only": list(self.zookeeper_only),
            "kraft_only": list(self.kraft_only),
            "differing": list(self.differing),
        }


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """The ACL and user znodes (the model does not keep them).

    :param acls: ``(resource type name, resource name, pattern, principal, host, operation, permission)``.
    :param users: ``/config/users`` entity -> keys (SCRAM mechanism keys and quota keys).
    """

    acls: frozenset[tuple[str, str, str, str, str, str, str]] = frozenset()
    users: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    tokens: frozenset[str] = frozenset()

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, bytes | None]], users: Mapping[str, Mapping[str, str]] | None = None
    ) -> ZooKeeperSecurity:
        """From ``(path, data)`` of the ACL znodes (``/kafka-acl/<Type>/<name>``,
        ``/kafka-acl-extended/prefixed/<Type>/<name>``) and the token znodes."""
        acls = set()
        tokens = set()
        for path, data in rows:
            parts = path.strip("/").split("/")
            if parts[0] == "kafka-acl" and len(parts) == 3:
                pattern, resource_type, name = "LITERAL", parts[1], parts[2]
            elif parts[0] == "kafka-acl-extended" and len(parts) == 4:
                pattern, resource_type, name = parts[1].upper(), parts[2], parts[3]
            elif parts[:2] == ["delegation_token", "tokens"] and len(parts) == 3:
                tokens.add(parts[2])
                continue
            else:
                continue
            try:
                entries = json.loads(data or b"{}").get("acls") or []
            except ValueError:
                continue
            for e in entries:
                acls.add(
                    (
                        resource_type,
                        name,
                        pattern,
                        str(e.get("principal")),
                        str(e.get("host")),
                        str(e.get("operation")),
                        str(e.get("permissionType")),
                    )
                )
        return cls(frozenset(acls), dict(users or {}), frozenset(tokens))


def _compare(
    what: str, zookeeper: Mapping[str, Any], kraft: Mapping[str, Any], limit: int = 20
) -> DualWriteCheck:
    z_only = sorted(set(zookeeper) - set(kraft))
    k_only = sorted(set(kraft) - set(zookeeper))
    differ = sorted(k for k in set(zookeeper) & set(kraft) if zookeeper[k] != kraft[k])
    details = [f"{k}: ZooKeeper {zookeeper[k]!r}, KRaft {kraft[k]!r}" for k in differ[:limit]]
    if not (z_only or k_only or differ):
        return DualWriteCheck(what, CheckStatus.SAME, f"{len(zookeeper)} the same on both sides")
    parts = []
    if z_only:
        parts.append(f"only in ZooKeeper: {', '.join(z_only[:limit])}")
    if k_only:
        parts.append(f"only in KRaft: {', '.join(k_only[:limit])}")
    if differ:
        parts.append("different: " + "; ".join(details))
    return DualWriteCheck(
        what, CheckStatus.DIFFERENT, "; ".join(parts), tuple(z_only), tuple(k_only), tuple(differ)
    )


def compare(
    state: ClusterState,
    image: MetadataImage,
    security: ZooKeeperSecurity,
    release: KafkaVersion | None,
) -> list[DualWriteCheck]:
    """Every kind of metadata compared between ZooKeeper (``state``, ``security``) and KRaft (``image``)."""
    checks = []
    live = {t.name: t for t in state.topics.values() if t.name not in state.pending_deletions}
    checks.append(
        _compare(
            "topics and their ids",
            {n: str(t.topic_id) if t.topic_id else None for n, t in live.items()},
            {n: i for n, i in image.topics.items()},
        )
    )
    names = image.topic_names()
    checks.append(
        _compare(
            "partitions and their replicas",
            {
                f"{t}-{p}": list(info.target_replicas or info.replicas)
                for t, topic in live.items()
                for p, info in topic.partitions.items()
            },
            {
                f"{names.get(tid, tid)}-{p}": list(part.replicas)
                for (tid, p), part in image.partitions.items()
            },
        )
    )
    checks.append(
        _compare(
            "topic configs",
            {t: dict(topic.config) for t, topic in live.items() if topic.config},
            {n: dict(c) for (kind, n), c in image.configs.items() if kind == "topic" and c},
        )
    )
    checks.append(
        _compare(
            "broker configs",
            {("" if n == "<default>" else n): dict(c) for n, c in state.configs.brokers.items() if c},
            {n: dict(c) for (kind, n), c in image.configs.items() if kind == "broker" and c},
        )
    )
    zk_quotas: dict[str, dict[str, float]] = {}
    entities: list[tuple[str, str, Mapping[str, str]]] = [
        ("clients", n, c) for n, c in state.configs.clients.items()
    ] + [("ips", n, c) for n, c in state.configs.ips.items()]
    entities += [("users", n, c) for n, c in (security.users or state.configs.users).items()]
    for kind, name, config in entities:
        values = {k: float(v) for k, v in config.items() if k not in SCRAM_KEYS and _is_number(v)}
        if values:
            zk_quotas[_quota_key(kind, name)] = values
    checks.append(
        _compare(
            "client quotas",
            zk_quotas,
            {
                ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in sorted(entity)): dict(
                    values
                )
                for entity, values in image.client_quotas.items()
                if values
            },
        )
    )
    carries_security = release is None or not release < KafkaVersion(3, 5)
    if carries_security:
        checks.append(
            _compare(
                "ACLs",
                {"|".join(a): True for a in security.acls},
                {
                    "|".join(
                        (
                            RESOURCE_TYPES.get(int(a["ResourceType"]), str(a["ResourceType"])),
                            a["ResourceName"],
                            PATTERN_TYPES.get(int(a["PatternType"]), str(a["PatternType"])),
                            a["Principal"],
                            a["Host"],
                            OPERATIONS.get(int(a["Operation"]), str(a["Operation"])),
                            PERMISSIONS.get(int(a["PermissionType"]), str(a["PermissionType"])),
                        )
                    ): True
                    for a in image.acls.values()
                },
            )
        )
        checks.append(
            _compare(
                "SCRAM users",
                {
                    f"{unquote(user)}/{key}": True
                    for user, config in security.users.items()
                    if "/clients/" not in user
                    for key in config
                    if key in SCRAM_KEYS
                },
                {f"{user}/{mechanism}": True for user, mechanism in image.scram},
            )
        )
    else:
        checks.append(
            DualWriteCheck(
                "ACLs and SCRAM users",
                CheckStatus.NOT_CARRIED,
                f"Kafka {release} does not migrate them (3.5+)",
            )
        )
    if release is None or not release < KafkaVersion(3, 6):
        checks.append(
            _compare(
                "delegation tokens",
                {t: True for t in security.tokens},
                {t: True for t in image.delegation_tokens},
            )
        )
    return checks


def _quota_key(kind: str, name: str) -> str:
    entity_type = QUOTA_ENTITY_TYPES[kind]
    if kind == "users" and "/clients/" in name:
        user, client = name.split("/clients/", 1)
        parts = [("client-id", client), ("user", user)]
    else:
        parts = [(entity_type, name)]
    return ",".join(f"{t}={unquote(n) if n != '<default>' else '<default>'}" for t, n in sorted(parts))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def differences(checks: Iterable[DualWriteCheck]) -> list[DualWriteCheck]:
    return [c for c in checks if c.status is CheckStatus.DIFFERENT]
