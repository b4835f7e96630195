"""Give a test chroot the ACLs a Kafka broker with ``zookeeper.set.acl=true`` would have set.

Kafka (``kafka.zk.ZkData.defaultAcls``, 3.x) creates every znode with ``CREATOR_ALL`` (its own
principal) plus world ``READ``; the sensitive paths (``/config/users``, ``/config/brokers``,
``/delegation_token/tokens`` and below) are creator-only. Here the broker's principal is a
ZooKeeper digest user (a plain test ZooKeeper), or a SASL user (``scheme="sasl"``, on a
:class:`~airflow_provider_kafka_zk.testing.secure_zk_server.SaslZooKeeperServer`, where Kafka's
``CREATOR_ALL`` becomes ``sasl:<user>``)::

    admin = KazooClient(hosts=server.connect_string)  # the ensemble root, not the chroot
    admin.start()
    creator = apply_kafka_secure_acls(admin, chroot, ("kafka", "kafka-secret"))

The sensitive list is written out here on purpose instead of being imported from the product
(:mod:`airflow_provider_kafka_zk.kafka.safety`): tests compare the product against it.
Importing this module does not import kazoo.
"""

from __future__ import annotations

import posixpath
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from kazoo.security import ACL, Id

#: kafka.zk.ZkData.SensitiveRootPaths (3.x): creator-only, no world entry.
KAFKA_SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")

PERM_READ = 1
PERM_ALL = 31


def digest_id(user: str, password: str) -> Id:
    """The ZooKeeper id a digest user authenticates as: ``digest:<user>:<base64 sha1>``."""
    from kazoo.security import Id, make_digest_acl_credential

    return Id("digest", make_digest_acl_credential(user, password))


def kafka_sensitive(path: str) -> bool:
    """``ZkData.sensitivePath``: a prefix test on the chroot-relative path, as Kafka does it."""
    return any(path.startswith(root) for root in KAFKA_SENSITIVE_ROOT_PATHS)


def kafka_acl(path: str, creator: Id, *, creator_only: bool = False) -> list[ACL]:
    """The ACL Kafka gives ``path`` (chroot-relative): creator ALL, plus world READ unless sensitive."""
    from kazoo.security import ACL, Id

    acl = [ACL(PERM_ALL, creator)]
    if not creator_only and not kafka_sensitive(path):
        acl.append(ACL(PERM_READ, Id("world", "anyone")))
    return acl


def apply_kafka_secure_acls(
    client: KazooClient,
    chroot: str,
    principal: tuple[str, str],
    *,
    creator_only: Iterable[str] = (),
    scheme: str = "digest",
) -> Id:
    """Set Kafka's ACLs on the chroot znode and every znode below it; returns the creator's id.

    :param client: a started client at the ensemble root (no chroot of its own); it is given the
        principal's digest credentials so it can still walk what becomes creator-only (with
        ``scheme="sasl"`` it must already be authenticated with SASL as that user).
    :param chroot: the Kafka chroot (``""`` for the ensemble root; ``/zookeeper`` is never touched).
    :param principal: (user, password) of the digest user playing the brokers' principal.
    :param creator_only: chroot-relative paths made creator-only too (stricter than Kafka: a
        cluster some credentials cannot read).
    :param scheme: ``digest``, ``sasl`` or ``x509`` (mutual TLS, Kafka 2.5+: ``principal`` is the
        certificate subject and the client must be connected with that certificate): how the
        brokers' principal authenticates.
    """
    if client.chroot:
        raise ValueError(f"give a client at the ensemble root, not one rooted at {client.chroot}")
    if chroot and (not chroot.startswith("/") or chroot != posixpath.normpath(chroot)):
        raise ValueError(f"chroot must be a plain absolute path, not {chroot!r}")
    user, password = principal
    if scheme == "digest":
        client.add_auth("digest", f"{user}:{password}")
        creator = digest_id(user, password)
    elif scheme in ("sasl", "x509"):
        from kazoo.security import Id

        creator = Id(scheme, user)
    else:
        raise ValueError(f"scheme must be digest, sasl or x509, not {scheme!r}")
    strict = set(creator_only)

    relative: list[str] = []
    queue = deque(["/"])
    while queue:  # list everything first: a creator-only parent must not hide its children
        rel = queue.popleft()
        relative.append(rel)
        for child in client.get_children(_full(chroot, rel)):
            child_rel = posixpath.join(rel, child)
            if not chroot and child_rel == "/zookeeper":
                continue
            queue.append(child_rel)
    for rel in relative:
        client.set_acls(_full(chroot, rel), kafka_acl(rel, creator, creator_only=rel in strict))
    return creator


def _full(chroot: str, rel: str) -> str:
    if rel == "/":
        return chroot or "/"
    return chroot + rel
