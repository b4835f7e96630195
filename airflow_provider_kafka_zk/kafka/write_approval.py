"""Which cluster-file entry a write really goes to, and whether it needs a person's approval (issue 31).

The approval rule follows the cluster a session writes to, never a label. The session knows its
target as the connection it actually uses (the ZooKeeper ensemble's ``host:port`` list and the
chroot) and, once it read it, the ``/cluster/id`` under that chroot (:class:`WriteTarget`). An entry
of the cluster file (:class:`ClusterEntry`) names its cluster in one of two ways:

* ``cluster_id = "<the cluster's /cluster/id>"`` pinned in its table: the entry is the cluster with
  that id, whatever connection reaches it (the strongest name: a re-pointed or rebuilt cluster
  no longer matches);
* otherwise its own connection (``kafka_zookeeper_conn_id``): the entry is the cluster at that
  chroot of that ensemble -- it matches a target with the same chroot and at least one ensemble
  member in common (hosts compared as written, case-insensitive, port included; an ensemble
  spelled with other names or addresses is not recognised -- pin ``cluster_id`` then).

Then (:func:`approval_requirement`): every entry that matches counts, the strictest wins (one that
requires approval makes the write require it); a target in no entry requires approval; only a
target whose every matching entry says ``require_approval = false`` may write without a person.
Before ``/cluster/id`` is read (the session refuses before any cluster I/O when it can), entries
that pin an id are undecided, and the requirement may be unknown yet (``None``).

:func:`label_problem` is the second half: a ``cluster`` argument must be an entry the target
matches (or, for a target in no entry, must not name another entry).

Pure: no Airflow, no I/O. The session side is :mod:`airflow_provider_kafka_zk.maintenance.approval`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def ensemble_members(hosts: Iterable[str]) -> frozenset[str]:
    """``host:port`` entries as compared: stripped, lower case (host names are case-insensitive)."""
    return frozenset(h.strip().lower() for h in hosts if h and h.strip())


@dataclass(frozen=True)
class WriteTarget:
    """What a session writes to: its connection's ensemble and chroot, and (once read) ``/cluster/id``.

    :param hosts: the connection's ``host:port`` members.
    :param chroot: the connection's chroot (``""`` for the root).
    :param cluster_id: ``/cluster/id`` read through that connection (None: not read yet).
    """

    hosts: frozenset[str]
    chroot: str
    cluster_id: str | None = None

    def describe(self) -> str:
        where = f"ZooKeeper {','.join(sorted(self.hosts))} chroot {self.chroot or '/'}"
        return where + (f", /cluster/id {self.cluster_id}" if self.cluster_id else "")


@dataclass(frozen=True)
class ClusterEntry:
    """One ``[clusters.<name>]`` table of the cluster file, as the approval rule reads it.

    :param name: the entry's name.
    :param require_approval: its ``require_approval``.
    :param cluster_id: its pinned ``cluster_id`` (None: named by its connection).
    :param hosts: its connection's ``host:port`` members (None: the connection cannot be read here).
    :param chroot: its connection's chroot.
    :param connection: its ``kafka_zookeeper_conn_id`` (for messages).
    :param unreadable: why its connection could not be read (for messages).
    """

    name: str
    require_approval: bool
    cluster_id: str | None = None
    hosts: frozenset[str] | None = None
    chroot: str = ""
    connection: str | None = None
    unreadable: str | None = None

    def matches(self, target: WriteTarget) -> bool | None:
        """Whether this entry is the target's cluster (None: only ``/cluster/id`` can tell)."""
        if self.cluster_id is not None:
            return None if target.cluster_id is None else self.cluster_id == target.cluster_id
        if self.hosts is None:
            return False
        return self.chroot == target.chroot and bool(self.hosts & target.hosts)

    def describe(self) -> str:
        if self.cluster_id is not None:
            return f"{self.name} (cluster_id {self.cluster_id})"
        if self.hosts is None:
            return f"{self.name} (connection {self.connection}: {self.unreadable or 'not readable here'})"
        return f"{self.name} (connection {self.connection}: {','.join(sorted(self.hosts))} chroot {self.chroot or '/'})"


@dataclass(frozen=True)
class ApprovalRequirement:
    """What the cluster file says about a write to one target.

    :param matched: entries the target is (decided).
    :param undecided: entries that pin a ``cluster_id`` not read yet.
    :param required: whether a real write needs a person's approval (None: depends on ``/cluster/id``).
    """

    matched: tuple[ClusterEntry, ...]
    undecided: tuple[ClusterEntry, ...]
    required: bool | None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.matched)

    def why(self) -> str:
        """Why approval is (or is not) required, for messages."""
        strict = [e.name for e in self.matched if e.require_approval]
        if strict:
            return f"the cluster file's entry {', '.join(strict)} sets require_approval = true (or leaves the default)"
        if self.matched:
            return f"the cluster file's entry {', '.join(self.names)} sets require_approval = false"
        if self.undecided:
            return (
                "which entry it is depends on its /cluster/id ("
                + ", ".join(e.describe() for e in self.undecided)
                + ")"
            )
        return "it is in no entry of the cluster file, which counts as require_approval = true"


def approval_requirement(entries: Sequence[ClusterEntry], target: WriteTarget) -> ApprovalRequirement:
    """The entries ``target`` matches and whether a real write to it needs approval (see the module
    docstring: the strictest matching entry wins; no entry counts as ``require_approval = true``)."""
    matched = tuple(e for e in entries if e.matches(target) is True)
    undecided = tuple(e for e in entries if e.matches(target) is None)
    required: bool | None
    if any(e.require_approval for e in matched):
        required = True
    elif not undecided:
        required = not matched
    elif not matched and all(e.require_approval for e in undecided):
        required = True  # whichever of them turns out to match (or none): approval is required
    elif matched and not any(e.require_approval for e in undecided):
        required = False
    else:
        required = None
    return ApprovalRequirement(matched, undecided, required)


def label_problem(label: str, entries: Sequence[ClusterEntry], target: WriteTarget) -> str | None:
    """What is wrong with the ``cluster`` argument ``label`` for a write to ``target`` (None: nothing,
    or nothing known yet before ``/cluster/id`` is read -- call again with it).

    The label must be an entry the target matches; for a target in no entry it must not name an
    entry of the file (that entry is another cluster).
    """
    by_name = {e.name: e for e in entries}
    requirement = approval_requirement(entries, target)
    if label in by_name:
        verdict = by_name[label].matches(target)
        if verdict is not False:
            return None
        reached = ", ".join(e.name for e in requirement.matched) or "no entry of the cluster file"
        return (
            f"cluster {label!r} names the entry {by_name[label].describe()}, but the connection used reaches "
            f"{target.describe()}, which is {reached}"
        )
    if requirement.matched:
        return (
            f"cluster {label!r} names no entry of the cluster file, but the connection used reaches "
            f"{target.describe()}, which is the entry {', '.join(requirement.names)}"
        )
    return None


__all__ = [
    "ApprovalRequirement",
    "ClusterEntry",
    "WriteTarget",
    "approval_requirement",
    "ensemble_members",
    "label_problem",
]
