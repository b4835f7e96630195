"""The server.properties of each step of a ZooKeeper-to-KRaft migration, as edits of the files the
nodes run on (pure).

Every forward and backward step changes a few keys of a broker's or controller's file. The edit
keeps the file as its owner wrote it -- comments, order, spacing, keys it does not touch -- changes
a key's value in place, removes a key's lines, and puts a new key after the key it belongs with
(the controller settings after ``listener.security.protocol.map``, the migration flag after the
ZooKeeper settings), so a person reviewing the plan sees a short diff and the result reads like
Kafka's samples. Held to the real files of a 3.9.0 migration (tests/fixtures/real-kafka-3.9-
migration/config): ZooKeeper mode -> migration mode -> KRaft, and the two rollback rolls, give
those files byte for byte.

What each step sets, from docs/ops.html "ZooKeeper to KRaft Migration" (3.9.0-rc3) with what the
docs get wrong fixed, and ``KafkaConfig.validateValues`` (3.9.0-rc3, lines 855-1004):

* migration mode: ``zookeeper.metadata.migration.enable=true``, the quorum
  (``controller.quorum.voters`` or, 3.9's dynamic quorum, ``controller.quorum.bootstrap.servers``),
  ``controller.listener.names``, and the controller listener in ``listener.security.protocol.map``
  (the docs call it "listener.security.property.map"; a ZooKeeper-mode broker has no default mapping
  for it);
* KRaft broker: ``process.roles=broker``, ``node.id`` replacing ``broker.id`` (the same id),
  ``zookeeper.*`` and ``inter.broker.protocol.version`` removed, ``control.plane.listener.name``
  removed ("not supported in KRaft mode"), ``AclAuthorizer`` -> ``StandardAuthorizer``;
* rollback roll 1: the KRaft broker back to ZooKeeper mode *with* the migration flag (the file
  kept from the forward step when there is one);
* rollback roll 2: the flag, the quorum settings and ``controller.listener.names`` removed -- a
  plain ZooKeeper-mode broker refuses a non-empty ``controller.listener.names`` -- and the controller
  listener taken out of the protocol map again;
* a controller: the docs' sample plus what it lacks (``listener.security.protocol.map`` with the
  brokers' inter-broker listener, ``log.dirs``); finalization removes the flag and ``zookeeper.*``.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .logdir import _JAVA_LINE_BREAK, _split_property, parse_java_properties

MIGRATION_FLAG = "zookeeper.metadata.migration.enable"
QUORUM_VOTERS = "controller.quorum.voters"
QUORUM_BOOTSTRAP = "controller.quorum.bootstrap.servers"
CONTROLLER_LISTENER_NAMES = "controller.listener.names"
PROTOCOL_MAP = "listener.security.protocol.map"
PROCESS_ROLES = "process.roles"
NODE_ID = "node.id"
BROKER_ID = "broker.id"
ZOOKEEPER_CONNECT = "zookeeper.connect"
IBP = "inter.broker.protocol.version"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
"""``listener.security.protocol.map``'s default (``SocketServerConfigs``, 3.9.0-rc3)."""
NOT_IN_KRAFT = ("control.plane.listener.name", "broker.id.generation.enable", "reserved.broker.max.id")
"""Keys a KRaft broker drops: "control.plane.listener.name is not supported in KRaft mode"
(``validateControlPlaneListenerEmptyForKRaft``); broker id generation is ZooKeeper's."""


class NodeMode(enum.StrEnum):
    """What a node's server.properties makes of it (``KafkaConfig`` 3.9.0-rc3: ``processRoles``,
    ``migrationEnabled``)."""

    ZOOKEEPER = "zookeeper"
    """A ZooKeeper-mode broker (no ``process.roles``, no migration flag)."""
    MIGRATION = "zookeeper-migration"
    """A ZooKeeper-mode broker with ``zookeeper.metadata.migration.enable=true`` (hybrid)."""
    KRAFT_BROKER = "kraft-broker"
    """``process.roles=broker``."""
    CONTROLLER_MIGRATING = "kraft-controller-migrating"
    """``process.roles=controller`` with the migration flag."""
    CONTROLLER = "kraft-controller"
    """``process.roles=controller`` without it (finalized)."""
    OTHER = "other"
    """Combined mode or roles Kafka refuses: not something the migration plans for."""


class BrokerMode(enum.StrEnum):
    """How a broker runs, from its server.properties (:func:`broker_mode`)."""

    ZOOKEEPER = "zookeeper"
    """ZooKeeper mode, migration off."""
    MIGRATION = "zookeeper-migration"
    """ZooKeeper mode with ``zookeeper.metadata.migration.enable=true``: registers in ``/brokers/ids``
    and with the KRaft quorum."""
    KRAFT = "kraft"
    """``process.roles=broker``: a migration's KRaft broker, registered with the quorum only."""


def broker_mode(settings: Mapping[str, str]) -> BrokerMode:
    """A broker's mode from its server.properties' migration settings (``KafkaConfig``, 3.9.0-rc3:
    ``process.roles`` makes a KRaft node; ``zookeeper.metadata.migration.enable`` is a boolean, which
    ``ConfigDef`` reads trimmed and case-insensitively)."""
    roles = {r.strip() for r in settings.get("process.roles", "").split(",") if r.strip()}
    if "broker" in roles:
        return BrokerMode.KRAFT
    if settings.get("zookeeper.metadata.migration.enable", "").strip().lower() == "true":
        return BrokerMode.MIGRATION
    return BrokerMode.ZOOKEEPER


NODE_MODES = {
    BrokerMode.ZOOKEEPER: NodeMode.ZOOKEEPER,
    BrokerMode.MIGRATION: NodeMode.MIGRATION,
    BrokerMode.KRAFT: NodeMode.KRAFT_BROKER,
}
"""A broker's :class:`BrokerMode` as the phase reader's :class:`.kraft_migration_config.NodeMode`."""


def node_mode(props: Mapping[str, str]) -> NodeMode:
    """The mode ``props`` (a parsed server.properties) starts the node in: a controller's from
    ``process.roles``, a broker's by :func:`broker_mode` (the one broker rule)."""
    roles = {r.strip() for r in props.get(PROCESS_ROLES, "").split(",") if r.strip()}
    if "controller" in roles:
        if roles != {"controller"}:
            return NodeMode.OTHER  # combined mode: not a migration's node
        migrating = props.get(MIGRATION_FLAG, "").strip().lower() == "true"
        return NodeMode.CONTROLLER_MIGRATING if migrating else NodeMode.CONTROLLER
    if roles - {"broker"}:
        return NodeMode.OTHER
    return NODE_MODES[broker_mode(props)]


# ---------------------------------------------------------------------------------------------
# Editing a properties file in place
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    key: str
    first: int  # index of its first natural line
    last: int  # index of its last natural line (continuations)


def _entries(lines: Sequence[str]) -> list[_Entry]:
    """Each key/value's natural lines, as ``Properties.LineReader`` groups them."""
    out: list[_Entry] = []
    start: int | None = None
    pending = ""
    for index, raw in enumerate(lines):
        line = raw.lstrip(" \t\f")
        if start is None and (not line or line[0] in "#!"):
            continue
        if start is None:
            start = index
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        key, _ = _split_property(pending + line)
        out.append(_Entry(key, start, index))
        start, pending = None, ""
    if start is not None:
        key, _ = _split_property(pending)
        out.append(_Entry(key, start, len(lines) - 1))
    return out


def _escape_value(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch in " \t\f" and i == 0:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class ConfigEdit:
    """What a step does to one file: keys set (value, and after which key a new one goes),
    keys removed. A key set that exists keeps its place; ``rename`` moves a key's value line to a
    new key in place (``broker.id`` -> ``node.id``)."""

    set: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (key, value, anchors in preference order)
    remove: tuple[str, ...] = ()
    rename: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (old key, new key, lines put before it)

    def merge(self, other: ConfigEdit) -> ConfigEdit:
        return ConfigEdit(self.set + other.set, self.remove + other.remove, self.rename + other.rename)


def apply_edit(text: str, edit: ConfigEdit) -> str:
    """``text`` with ``edit`` applied; every line not named stays as it is (see the module doc).

    A key that appears twice (Java keeps the last) is set on its last line; its other lines go.
    """
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = _JAVA_LINE_BREAK.split(text)
    trailing_newline = bool(lines) and lines[-1] == ""
    if trailing_newline:
        lines = lines[:-1]
    # work on a list of blocks (one per natural line, a key's continuation lines merged)
    blocks: list[tuple[str | None, list[str]]] = []
    entries = {e.first: e for e in _entries(lines)}
    i = 0
    while i < len(lines):
        entry = entries.get(i)
        if entry is None:
            blocks.append((None, [lines[i]]))
            i += 1
        else:
            blocks.append((entry.key, lines[entry.first : entry.last + 1]))
            i = entry.last + 1

    def last_index(key: str) -> int | None:
        found = [n for n, (k, _) in enumerate(blocks) if k == key]
        return found[-1] if found else None

    for old, new, before in edit.rename:
        index = last_index(old)
        if index is None:
            continue
        value = parse_java_properties("\n".join(blocks[index][1]), "edit").get(old, "")
        replacement: list[tuple[str | None, list[str]]] = [(k, [f"{k}={v}"]) for k, v in _pairs(before)]
        replacement.append((new, [f"{new}={_escape_value(value)}"]))
        blocks[index : index + 1] = replacement
        blocks = [b for b in blocks if b[0] != old]
    for key in edit.remove:
        blocks = [b for b in blocks if b[0] != key]
    for key, value, anchors in edit.set:
        index = last_index(key)
        line = f"{key}={_escape_value(value)}"
        if index is not None:
            blocks = [b for n, b in enumerate(blocks) if b[0] != key or n == index]
            index = last_index(key)
            assert index is not None
            blocks[index] = (key, [line])
            continue
        where = next((last_index(a) for a in anchors if last_index(a) is not None), None)
        if where is None:
            if blocks and blocks[-1][1] and blocks[-1][1][-1].strip() == "" and blocks[-1][0] is None:
                where = len(blocks) - 2
            else:
                where = len(blocks) - 1
        blocks.insert(where + 1, (key, [line]))
    out = [line for _, block in blocks for line in block]
    return newline.join(out) + (newline if trailing_newline or not out else "")


def _pairs(items: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(item.split("=", 1)[0], item.split("=", 1)[1]) for item in items]


def config_diff(old: str | None, new: str, path: str) -> list[str]:
    """A unified diff of the file (``--- <path>`` / ``+++ <path>``), empty when nothing changes."""
    before = [] if old is None else old.splitlines()
    return list(
        difflib.unified_diff(
            before,
            new.splitlines(),
            fromfile=path if old is not None else "/dev/null",
            tofile=path,
            lineterm="",
            n=1,
        )
    )


def changed_keys(old: str | None, new: str) -> dict[str, tuple[str | None, str | None]]:
    """key -> (value before, value after) for every key whose value changes (None: absent)."""
    before = parse_java_properties(old or "", "before")
    after = parse_java_properties(new, "after")
    return {
        k: (before.get(k), after.get(k))
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    }


# ---------------------------------------------------------------------------------------------
# The quorum the brokers and controllers share
# ---------------------------------------------------------------------------------------------


class QuorumStyle(enum.StrEnum):
    """How nodes find the controllers: a static voter set (3.4+), or 3.9's bootstrap servers (KIP-853)."""

    VOTERS = "voters"
    BOOTSTRAP = "bootstrap"


@dataclass(frozen=True)
class ControllerNode:
    """One KRaft controller from the cluster file."""

    node_id: int
    host: str
    port: int
    config_path: str
    log_dir: str
    advertised_host: str | None = None

    @property
    def address(self) -> str:
        return f"{self.advertised_host or self.host}:{self.port}"


@dataclass(frozen=True)
class Quorum:
    """The controller quorum as every node's file names it.

    :param listener_name: the controllers' listener (``controller.listener.names``).
    :param security_protocol: its protocol in ``listener.security.protocol.map``.
    :param extra: more properties every controller gets (TLS/SASL, ZooKeeper client security ...).
    """

    controllers: tuple[ControllerNode, ...]
    style: QuorumStyle = QuorumStyle.VOTERS
    listener_name: str = "CONTROLLER"
    security_protocol: str = "PLAINTEXT"
    extra: Mapping[str, str] = field(default_factory=dict)

    def quorum_setting(self) -> tuple[str, str]:
        """(key, value): ``controller.quorum.voters=3000@h:9093,...`` or ``...bootstrap.servers=h:9093,...``."""
        nodes = sorted(self.controllers, key=lambda c: c.node_id)
        if self.style is QuorumStyle.VOTERS:
            return QUORUM_VOTERS, ",".join(f"{c.node_id}@{c.address}" for c in nodes)
        return QUORUM_BOOTSTRAP, ",".join(c.address for c in nodes)


def _protocol_map(text: str | None) -> list[tuple[str, str]]:
    pairs = []
    for item in (text if text is not None else DEFAULT_PROTOCOL_MAP).split(","):
        name, sep, protocol = item.strip().partition(":")
        if sep:
            pairs.append((name.strip(), protocol.strip()))
    return pairs


def _format_map(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f"{n}:{p}" for n, p in pairs)


# ---------------------------------------------------------------------------------------------
# The steps' edits
# ---------------------------------------------------------------------------------------------

_QUORUM_KEYS = (QUORUM_VOTERS, QUORUM_BOOTSTRAP)


def to_migration_mode(props: Mapping[str, str], quorum: Quorum) -> ConfigEdit:
    """A ZooKeeper-mode broker into migration mode ("Enter Migration Mode on the Brokers")."""
    key, value = quorum.quorum_setting()
    pairs = _protocol_map(props.get(PROTOCOL_MAP))
    if quorum.listener_name.upper() not in {n.upper() for n, _ in pairs}:
        pairs.append((quorum.listener_name, quorum.security_protocol))
    other_quorum_key = next(k for k in _QUORUM_KEYS if k != key)
    return ConfigEdit(
        set=(
            (PROTOCOL_MAP, _format_map(pairs), ("listeners", "advertised.listeners")),
            (key, value, (PROTOCOL_MAP,)),
            (CONTROLLER_LISTENER_NAMES, quorum.listener_name, (key,)),
            (MIGRATION_FLAG, "true", ("zookeeper.connection.timeout.ms", ZOOKEEPER_CONNECT)),
        ),
        remove=(other_quorum_key,) if other_quorum_key in props else (),
    )


def to_kraft_broker(props: Mapping[str, str], broker_id: int) -> ConfigEdit:
    """A broker in migration mode into a KRaft broker ("Migrating brokers to KRaft")."""
    remove = [k for k in props if k.startswith("zookeeper.")] + [
        k for k in (IBP, *NOT_IN_KRAFT) if k in props
    ]
    sets: list[tuple[str, str, tuple[str, ...]]] = []
    if props.get("authorizer.class.name", "").strip() == ACL_AUTHORIZER:
        sets.append(("authorizer.class.name", STANDARD_AUTHORIZER, ()))
    rename: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    if BROKER_ID in props:
        rename = ((BROKER_ID, NODE_ID, (f"{PROCESS_ROLES}=broker",)),)
    else:
        sets = [(PROCESS_ROLES, "broker", ()), (NODE_ID, str(broker_id), (PROCESS_ROLES,)), *sets]
    return ConfigEdit(set=tuple(sets), remove=tuple(remove), rename=rename)


def kraft_back_to_migration_mode(
    props: Mapping[str, str], zookeeper: Mapping[str, str], inter_broker_protocol_version: str
) -> ConfigEdit:
    """Rollback roll 1 for a KRaft broker without a kept file: ZooKeeper mode again with the flag.

    :param zookeeper: ``zookeeper.connect`` and any other ``zookeeper.*`` setting the brokers need
        (TLS, timeouts), in file order.
    :param inter_broker_protocol_version: the IBP the brokers ran before (the migration forbids changing it).
    """
    anchors = (CONTROLLER_LISTENER_NAMES,)
    sets: list[tuple[str, str, tuple[str, ...]]] = [(IBP, inter_broker_protocol_version, anchors)]
    previous = IBP
    for key, value in zookeeper.items():
        sets.append((key, value, (previous,)))
        previous = key
    sets.append((MIGRATION_FLAG, "true", (previous,)))
    if props.get("authorizer.class.name", "").strip() == STANDARD_AUTHORIZER:
        sets.append(("authorizer.class.name", ACL_AUTHORIZER, ()))
    rename = ((NODE_ID, BROKER_ID, ()),) if NODE_ID in props else ()
    return ConfigEdit(set=tuple(sets), remove=(PROCESS_ROLES,), rename=rename)


def migration_back_to_zookeeper(props: Mapping[str, str], quorum_listener: str | None = None) -> ConfigEdit:
    """Rollback roll 2 (and a revert before any KRaft broker): plain ZooKeeper mode again."""
    listener = quorum_listener or props.get(CONTROLLER_LISTENER_NAMES, "").split(",")[0].strip()
    remove = [k for k in (MIGRATION_FLAG, CONTROLLER_LISTENER_NAMES, *_QUORUM_KEYS) if k in props]
    sets: list[tuple[str, str, tuple[str, ...]]] = []
    if PROTOCOL_MAP in props and listener:
        pairs = [(n, p) for n, p in _protocol_map(props[PROTOCOL_MAP]) if n.upper() != listener.upper()]
        sets.append((PROTOCOL_MAP, _format_map(pairs), ()))
    return ConfigEdit(set=tuple(sets), remove=tuple(remove))


def finalize_controller(props: Mapping[str, str]) -> ConfigEdit:
    """ "Finalizing the migration": the controller without the flag and the ZooKeeper client settings."""
    return ConfigEdit(remove=tuple(k for k in props if k.startswith("zookeeper.")))


def unfinalize_controller(zookeeper: Mapping[str, str]) -> ConfigEdit:
    """Back from a finalization not yet in effect: the flag and ZooKeeper settings again."""
    sets: list[tuple[str, str, tuple[str, ...]]] = [(MIGRATION_FLAG, "true", ())]
    previous = MIGRATION_FLAG
    for key, value in zookeeper.items():
        sets.append((key, value, (previous,)))
        previous = key
    return ConfigEdit(set=tuple(sets))


_SAFE_VALUE = re.compile(r"[^\n\r]*\Z")


def controller_file(
    node: ControllerNode,
    quorum: Quorum,
    *,
    zookeeper_connect: str,
    inter_broker_listener: str,
    inter_broker_protocol: str,
    cluster: str,
) -> str:
    """A migration-ready controller's server.properties (docs' sample plus what it lacks).

    :param zookeeper_connect: the brokers' ``zookeeper.connect`` (hosts and chroot).
    :param inter_broker_listener: the brokers' ``inter.broker.listener.name``: the controller sends
        its RPCs to ZooKeeper-mode brokers there, so it needs that listener's protocol too.
    :param inter_broker_protocol: that listener's security protocol.
    """
    key, value = quorum.quorum_setting()
    protocol_map = _format_map(
        [(quorum.listener_name, quorum.security_protocol)]
        + (
            [(inter_broker_listener, inter_broker_protocol)]
            if inter_broker_listener != quorum.listener_name
            else []
        )
    )
    lines = [
        f"# KRaft controller {node.node_id} of cluster {cluster}, written by kafka_zk_kraft_migration",
        f"{PROCESS_ROLES}=controller",
        f"{NODE_ID}={node.node_id}",
        f"{key}={value}",
        f"{CONTROLLER_LISTENER_NAMES}={quorum.listener_name}",
        f"listeners={quorum.listener_name}://{node.host}:{node.port}",
        f"{PROTOCOL_MAP}={protocol_map}",
        f"log.dirs={node.log_dir}",
        "# the migration (removed when it is finalized)",
        f"{MIGRATION_FLAG}=true",
        f"{ZOOKEEPER_CONNECT}={zookeeper_connect}",
        f"inter.broker.listener.name={inter_broker_listener}",
    ]
    for extra_key, extra_value in quorum.extra.items():
        if not _SAFE_VALUE.match(extra_value):
            raise ValueError(f"kraft_controller_properties.{extra_key} holds a line break")
        lines.append(f"{extra_key}={_escape_value(extra_value)}")
    return "\n".join(lines) + "\n"


def zookeeper_settings(props: Mapping[str, str]) -> dict[str, str]:
    """``zookeeper.connect`` and every other ``zookeeper.*`` key but the migration flag, in file order."""
    return {k: v for k, v in props.items() if k.startswith("zookeeper.") and k != MIGRATION_FLAG}
