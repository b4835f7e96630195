"""Exact state of deployed clusters, for tests that assert "nothing changed" (or exactly what did).

:func:`capture` takes every znode (data, version) of each chroot, the ZooKeeper root's children, and
every path under each broker host root (kind, size, sha256; a symlink's target); :func:`differences`
lists what changed between two captures, for failure messages.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient


def walk_chroot(client: KazooClient, chroot: str) -> dict[str, tuple[bytes | None, int]]:
    """Path (relative to ``chroot``) -> (data, version); {} when the chroot does not exist.

    Pipelined level by level: a few round trips per level instead of two per znode.
    """
    if client.exists(chroot) is None:
        return {}
    out: dict[str, tuple[bytes | None, int]] = {}
    level = [chroot]
    while level:
        pending = [(p, client.get_async(p), client.get_children_async(p)) for p in level]
        level = []
        for path, data_reply, children_reply in pending:
            data, stat = data_reply.get(timeout=30)
            children = children_reply.get(timeout=30)
            out[path[len(chroot) :] or "/"] = (data, stat.version)
            level += [f"{path.rstrip('/')}/{c}" for c in children]
    return out


def disk_state(root: Path) -> dict[str, tuple[str, int, str | None]]:
    """Every path under a host root: kind, size and (files) sha256; symlinks with their target."""
    out: dict[str, tuple[str, int, str | None]] = {}
    for path in sorted(Path(root).rglob("*")):
        stat = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("l", stat.st_size, os.readlink(path))
        elif path.is_dir():
            out[rel] = ("d", 0, None)
        else:
            with path.open("rb") as handle:
                out[rel] = ("f", stat.st_size, hashlib.file_digest(handle, "sha256").hexdigest())
    return out


@dataclass
class State:
    """What a mutation may change: znodes per chroot, the root's children, files per host root."""

    zk: dict[str, dict[str, tuple[bytes | None, int]]]
    root_children: list[str]
    disk: dict[str, dict[str, tuple[str, int, str | None]]]


def capture(client: KazooClient, chroots: Iterable[str], roots: Iterable[Path]) -> State:
    return State(
        zk={c: walk_chroot(client, c) for c in sorted(set(chroots))},
        root_children=sorted(client.get_children("/")),
        disk={str(r): disk_state(Path(r)) for r in sorted({Path(r) for r in roots})},
    )


def differences(before: State, after: State, limit: int = 20) -> list[str]:
    """What changed, for failure messages (empty: nothing)."""
    out = []
    if before.root_children != after.root_children:
        out.append(
            f"ZooKeeper root children: +{sorted(set(after.root_children) - set(before.root_children))} "
            f"-{sorted(set(before.root_children) - set(after.root_children))}"
        )
    for kind, b_all, a_all in (("zk", before.zk, after.zk), ("disk", before.disk, after.disk)):
        for where in sorted(set(b_all) | set(a_all)):
            b, a = b_all.get(where, {}), a_all.get(where, {})
            for path in sorted(set(b) | set(a)):
                if b.get(path) != a.get(path):
                    out.append(f"{kind} {where}: {path}: {b.get(path)!r} -> {a.get(path)!r}"[:300])
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])
