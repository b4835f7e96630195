"""The drain plan's read of ZooKeeper (:func:`planning_read`), and the drain steps' ZooKeeper reads
and writes re-exported from :mod:`~airflow_provider_kafka_zk.hooks.zookeeper_drain` (where they
live, below the maintenance layer that carries the steps out).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZnodeNotFoundError
from airflow_provider_kafka_zk.hooks.zookeeper_drain import (
    bootstrap_address,
    notify_config_change,
    observe,
    read_all_topics,
    read_reassign,
    read_states,
    throttles_still_set,
    update_config,
)
from airflow_provider_kafka_zk.kafka import znodes

if TYPE_CHECKING:
    from airflow_provider_kafka_zk.hooks.zookeeper_drain_read import DrainRead


def planning_read(
    hook: KafkaZooKeeperHook, brokers: Iterable[int], cluster: str = "", scope: str = "all"
) -> DrainRead:
    """The drain plan's read of ZooKeeper (see :mod:`~airflow_provider_kafka_zk.hooks.zookeeper_drain_read`),
    through the hook's walks (its auth errors, reconnects).

    :param hook: an open ZooKeeper hook.
    :param brokers: the brokers to drain.
    :param cluster: the cluster's name (the model's).
    :param scope: the drain's scope (which partition states are read).
    """
    from airflow_provider_kafka_zk.hooks.zookeeper_drain_read import read_for_drain

    def topics() -> list[str]:
        try:
            return hook.get_children(znodes.BROKER_TOPICS)
        except ZnodeNotFoundError:
            return []

    return read_for_drain(
        lambda include, exclude: hook.snapshot(include, exclude, in_memory=True),  # a few thousand rows
        topics,
        brokers,
        scope=scope,
        cluster=cluster,
    )


__all__ = [
    "bootstrap_address",
    "notify_config_change",
    "observe",
    "planning_read",
    "read_all_topics",
    "read_reassign",
    "read_states",
    "throttles_still_set",
    "update_config",
]
