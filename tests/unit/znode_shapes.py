"""The layout of a znode with its values masked, for golden comparisons of simulated znodes by kind."""

from __future__ import annotations

import json
import re

KINDS = (
    (re.compile(r"^/brokers/topics/[^/]+/partitions/[0-9]+/state$"), "state"),
    (re.compile(r"^/brokers/topics/[^/]+/partitions/[0-9]+$"), "partition"),
    (re.compile(r"^/brokers/topics/[^/]+/partitions$"), "partitions"),
    (re.compile(r"^/brokers/topics/[^/]+$"), "topic"),
    (re.compile(r"^/brokers/ids/[0-9]+$"), "registration"),
    (re.compile(r"^/config/(topics|brokers|clients|users|ips)/[^/]+$"), "config-entity"),
    (re.compile(r"^/config/changes/config_change_[0-9]{10}$"), "config-change"),
    (re.compile(r"^/admin/delete_topics/[^/]+$"), "delete-marker"),
)


def kind_of(path: str) -> str:
    return next((kind for pattern, kind in KINDS if pattern.match(path)), path)


def shape(value: object, names_are_values: bool = False) -> object:
    """A znode's JSON layout: keys in order (a partition number, a config's name are "<k>"), formats;
    a run of equal entries counts once, so the shape does not depend on a topic's size. Values are
    masked but -1."""
    if isinstance(value, dict):
        items: list[tuple[str, object]] = []
        for key, item in value.items():
            name = "<k>" if key.isdigit() or names_are_values else key
            entry = (name, shape(item, key == "config") if key != "version" else item)
            if not items or items[-1] != entry:
                items.append(entry)
        return ("{", tuple(items))
    if isinstance(value, list):
        return ("[", tuple(sorted({repr(shape(v)) for v in value})))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return -1 if value == -1 else "<int>"
    return "<str>"


def znode_shape(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return shape(json.loads(data))
    except ValueError:
        return "<text>"


def shapes(znodes: dict[str, tuple[bytes | None, bool]]) -> set[tuple[str, bool, object]]:
    return {(kind_of(p), ephemeral, znode_shape(data)) for p, (data, ephemeral) in znodes.items()}
