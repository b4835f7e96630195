"""Trigger that waits until topic deletions reach a finished verdict, off the worker.

Each poll is one :func:`~.deletion_check.check_deletions` (ZooKeeper, then every broker's disk over
SSH, then the verdicts), run on the trigger run's own thread with one ZooKeeper session for the
whole wait (:class:`~._session.TriggerSession`), so the triggerer's event loop never blocks. The
module imports nothing heavy (the triggerer imports it on its loop); the check's names are
re-exported from :mod:`.deletion_check` on first use.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kafka_zk.triggers._session import TriggerSession

CLASSPATH = "airflow_provider_kafka_zk.triggers.deletion.TopicDeletionTrigger"
_CHECK_NAMES = frozenset(
    {
        "BrokerDisk",
        "DeletionCheck",
        "LeftoverDirectory",
        "check_deletions",
        "host_hook_from_kwargs",
        "pending_deletion_topics",
        "run_check",
    }
)


def __getattr__(name: str) -> Any:
    """The deletion check's names, imported from :mod:`.deletion_check` when first asked for."""
    if name in _CHECK_NAMES:
        from airflow_provider_kafka_zk.triggers import deletion_check

        return getattr(deletion_check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TopicDeletionTrigger(BaseTrigger):
    """Poll until every topic's deletion verdict is settled, or ``deadline`` (epoch s) passes.

    Fires once: ``{"status": "settled" | "timeout" | "error", "verdicts": [...], "coverage": {...},
    "message": str}``. The deadline is checked here (not through Airflow's trigger timeout) so the
    event carries the last verdicts.

    :param settings: how to reach the cluster (connection ids, hosts, paths; JSON-serialisable).
    :param topics: the topics whose verdicts are awaited.
    :param poll_interval: seconds between checks.
    :param deadline: epoch seconds after which a ``timeout`` event fires (None: no deadline).
    """

    def __init__(
        self,
        *,
        settings: Mapping[str, Any],
        topics: Sequence[str],
        poll_interval: float = 30.0,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.settings = dict(settings)
        self.topics = [str(t) for t in topics]
        self.poll_interval = float(poll_interval)
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "settings": self.settings,
                "topics": self.topics,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
            },
        )

    def _check(self, session: TriggerSession) -> tuple[bool, dict[str, Any]]:
        """One check on the session's thread: (all settled, the event's payload); a failed check is an
        ``error`` payload, ``refused`` when it met another cluster than the one it started on."""
        from airflow_provider_kafka_zk.maintenance import ClusterIdentityError
        from airflow_provider_kafka_zk.triggers.deletion_check import run_check

        try:
            zookeeper = session.zookeeper(self.settings["kafka_zookeeper_conn_id"])
            check = run_check(self.settings, self.topics, zookeeper)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            return False, {
                "status": "error",
                "message": message,
                "refused": isinstance(exc, ClusterIdentityError),
            }
        payload = {
            "verdicts": check.to_dicts(),
            "coverage": check.coverage(),
            "message": " | ".join(check.describe(v) for v in check.verdicts),
            "cluster_id": check.cluster_id,
        }
        return check.all_settled, payload

    async def run(self) -> AsyncIterator[TriggerEvent]:
        session = TriggerSession("deletion")
        last = None
        try:
            while True:
                try:
                    settled, payload = await session.call(self._check, session)
                except Exception as exc:  # the session itself failed
                    payload = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "refused": False}
                if payload.get("status") == "error":
                    yield TriggerEvent(payload)
                    return
                if payload["message"] != last:
                    self.log.info("Deletions: %s", payload["message"])
                    last = payload["message"]
                if settled:
                    yield TriggerEvent({"status": "settled", **payload})
                    return
                if self.deadline is not None and time.time() >= self.deadline:
                    yield TriggerEvent({"status": "timeout", **payload})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await session.aclose()  # also when cancelled: the session's thread closes the client
