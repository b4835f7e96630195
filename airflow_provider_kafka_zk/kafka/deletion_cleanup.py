"""The cleanup of deleted topics' leftovers, planned without I/O: what moves, what is left, and why.

A topic whose deletion settled INCOMPLETE (:mod:`.deletion`) left partition directories on broker
disks and/or its ``/config/topics/<t>`` znode. The cleanup moves the directories into a quarantine
on the same broker host (:class:`~.steps.QuarantineMove`, one step per broker) and, once every one
of a topic's directories is out, deletes the config znode (:class:`~.steps.ConfigZnodeDelete`).
Decided here, before anything is touched:

* a topic whose znode or deletion marker exists again is not touched at all (its directories may be
  a new topic's live replicas);
* a live-named (``normal``/``future``) orphan directory of a registered broker is left, unless the
  caller allows it (``allow_running_broker_orphans``): a running broker may hold it open;
  ``-delete``/``-stray`` directories, which Kafka closed before renaming, may move;
* a config znode stays while any of its topic's directories stays; one with children is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .steps import ConfigZnodeDelete, QuarantineDir, QuarantineMove, Step

# kinds a running broker closed before renaming (LogManager closes -delete and -stray logs)
SAFE_UNDER_RUNNING_BROKER = ("delete", "stray")


@dataclass(frozen=True)
class Leftover:
    """One leftover directory of a deleted topic on one broker."""

    broker_id: int
    topic: str
    log_dir: str
    name: str
    kind: str

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"


@dataclass(frozen=True)
class ConfigZnode:
    """A leftover ``/config/topics/<t>`` as read before the plan (None for the topic: already gone)."""

    version: int
    data: bytes | None
    children: int = 0


@dataclass(frozen=True)
class CleanupPlan:
    """The steps, and what the plan leaves alone (report entries, with why)."""

    steps: tuple[Step, ...]
    left_dirs: tuple[dict[str, Any], ...]
    left_znodes: tuple[dict[str, Any], ...]

    @property
    def moves(self) -> tuple[QuarantineMove, ...]:
        return tuple(s for s in self.steps if isinstance(s, QuarantineMove))

    @property
    def deletes(self) -> tuple[ConfigZnodeDelete, ...]:
        return tuple(s for s in self.steps if isinstance(s, ConfigZnodeDelete))


def plan_cleanup(
    leftovers: Iterable[Leftover],
    config_znodes: Mapping[str, ConfigZnode | None],
    *,
    reappeared: Mapping[str, str],
    running: Collection[int],
    ts: str,
    quarantine_dir: str | None = None,
    allow_running_broker_orphans: bool = False,
) -> CleanupPlan:
    """The cleanup of ``leftovers`` and of the ``config_znodes`` of INCOMPLETE topics.

    :param leftovers: every leftover directory of the topics to clean.
    :param config_znodes: topic -> its leftover config znode as read now (None: gone meanwhile).
    :param reappeared: topic -> why it is back in ZooKeeper (its znode or marker exists again).
    :param running: the brokers registered in ``/brokers/ids`` (running).
    :param ts: the run's folder name (the quarantine's subfolder).
    :param quarantine_dir: the quarantine root (None: ``<log dir>/../kafka-quarantine``).
    :param allow_running_broker_orphans: move live-named orphans of a running broker too.
    """
    by_broker: dict[int, list[QuarantineDir]] = {}
    left_dirs: list[dict[str, Any]] = []
    unfinished: set[str] = set()
    for d in sorted(leftovers, key=lambda x: (x.broker_id, x.path)):
        why = reappeared.get(d.topic)
        orphan_of_running = d.broker_id in running and d.kind not in SAFE_UNDER_RUNNING_BROKER
        if why is None and orphan_of_running and not allow_running_broker_orphans:
            why = (
                f"broker {d.broker_id} is running (registered in /brokers/ids): a {d.kind} directory it may "
                "hold open moves only while the broker is stopped (or with allow_running_broker_orphans)"
            )
        if why is not None:
            left_dirs.append({"broker_id": d.broker_id, "source": d.path, "status": "refused", "detail": why})
            unfinished.add(d.topic)
            continue
        by_broker.setdefault(d.broker_id, []).append(QuarantineDir(d.log_dir, d.name, d.kind, d.topic))
    steps: list[Step] = [
        QuarantineMove(
            id=f"quarantine:broker-{broker}",
            broker_id=broker,
            dirs=tuple(dirs),
            quarantine_dir=quarantine_dir,
            ts=ts,
            broker_running=broker in running,
            allow_running_broker_orphans=allow_running_broker_orphans,
        )
        for broker, dirs in sorted(by_broker.items())
    ]
    left_znodes: list[dict[str, Any]] = []
    for topic, znode in sorted(config_znodes.items()):
        path = f"/config/topics/{topic}"
        if topic in reappeared:
            left_znodes.append(
                {"path": path, "status": "refused", "detail": "the topic or its marker exists again"}
            )
        elif topic in unfinished:
            left_znodes.append(
                {
                    "path": path,
                    "status": "kept",
                    "detail": "some of the topic's directories were not quarantined",
                }
            )
        elif znode is None:
            left_znodes.append({"path": path, "status": "gone", "detail": "already removed"})
        elif znode.children:
            left_znodes.append({"path": path, "status": "refused", "detail": "it has children"})
        else:
            steps.append(
                ConfigZnodeDelete(
                    id=f"delete-config:{topic}", topic=topic, expected_version=znode.version, data=znode.data
                )
            )
    return CleanupPlan(tuple(steps), tuple(left_dirs), tuple(left_znodes))


__all__ = ["SAFE_UNDER_RUNNING_BROKER", "CleanupPlan", "ConfigZnode", "Leftover", "plan_cleanup"]
