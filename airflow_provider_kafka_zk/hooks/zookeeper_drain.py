"""What the drain steps read and write in ZooKeeper, the way Kafka's own tooling does.

Reads: every topic znode (the in-flight check must see all of them), the partition states of a
batch, the reassign znode with its czxid, the throttles a run left set. Writes: a throttle is a
read-modify-versioned-write of ``/config/<type>/<name>`` plus a ``config_change_`` notification, as
``kafka-configs`` does on its ZooKeeper path (``AdminZkClient.scala``, 3.3.1); writes go through the
hook, so only inside a maintenance session. The decisions around them are in
:mod:`~airflow_provider_kafka_zk.kafka.drain_execution`; the steps that call them in
:mod:`~airflow_provider_kafka_zk.maintenance.drain`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from airflow_provider_kafka_zk.hooks.zookeeper import (
    KafkaZooKeeperHook,
    ZnodeNotFoundError,
    ZnodeVersionConflictError,
)
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.drain_execution import Batch, Observed
from airflow_provider_kafka_zk.kafka.reassignment import (
    TopicPartition,
    config_without_our_values,
    merged_config,
)

log = logging.getLogger(__name__)


def read_all_topics(hook: KafkaZooKeeperHook) -> dict[str, znodes.TopicAssignment]:
    """Every topic znode (the in-flight check must look at all of them); deleted meanwhile: left out.

    :param hook: an open ZooKeeper hook.
    """
    names = []
    for name in hook.get_children(znodes.BROKER_TOPICS):
        try:
            names.append(znodes.validate_topic_name(name, f"{znodes.BROKER_TOPICS}/{name}"))
        except znodes.InvalidTopicNameError as exc:
            # never planned (the plan lists it as unplanned); Kafka itself cannot serve it either
            log.warning("Skipping topic znode %r: %s", name, exc)
    found = hook.get_many(znodes.topic_path(t) for t in names)
    return {
        t: znodes.TopicAssignment.decode(found[path][0], path)
        for t in names
        if (path := znodes.topic_path(t)) in found
    }


def read_states(
    hook: KafkaZooKeeperHook, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, znodes.PartitionState]:
    """The state znodes of ``partitions`` that exist (completion needs the ISR).

    :param hook: an open ZooKeeper hook.
    :param partitions: the partitions to read.
    """
    paths = {tp: znodes.partition_state_path(*tp) for tp in partitions}
    found = hook.get_many(paths.values())
    return {tp: znodes.PartitionState.decode(found[p][0], p) for tp, p in paths.items() if p in found}


def read_reassign(hook: KafkaZooKeeperHook) -> tuple[znodes.ReassignPartitions | None, int | None]:
    """The reassign znode and its czxid (None, None when there is none).

    :param hook: an open ZooKeeper hook.
    """
    try:
        data, stat = hook.get_znode(znodes.REASSIGN_PARTITIONS)
    except ZnodeNotFoundError:
        return None, None
    return znodes.ReassignPartitions.decode(data), stat.czxid


def notify_config_change(hook: KafkaZooKeeperHook, entity_type: str, entity_name: str) -> str:
    """``/config/changes/config_change_<seq>`` (sequential, version 2 ``entity_path``), as Kafka writes it.

    Brokers apply a dynamic config change only when notified; returns the notification's path.

    :param hook: an open ZooKeeper hook (in a maintenance session).
    :param entity_type: ``topics`` or ``brokers``.
    :param entity_name: the topic name or broker id.
    """
    note = znodes.ConfigChangeNotification(0, entity_type, entity_name)
    return hook.create_sequential(f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}", note.encode())


def update_config(
    hook: KafkaZooKeeperHook,
    entity_type: str,
    entity_name: str,
    *,
    set_values: Mapping[str, str] | None = None,
    remove_values: Mapping[str, str] | None = None,
    create_if_missing: bool = False,
    attempts: int = 5,
) -> tuple[dict[str, str], list[str], bool]:
    """kafka-configs' ZooKeeper path: read the whole map, change our keys, versioned write, notify.

    ``remove_values`` removes a key only while it still holds our value. Returns (previous config,
    keys someone else changed, whether anything was written). A concurrent writer makes us re-read.

    :param hook: an open ZooKeeper hook (in a maintenance session).
    :param entity_type: ``topics`` or ``brokers``.
    :param entity_name: the topic name or broker id.
    :param set_values: keys to set.
    :param remove_values: keys to remove, each only while it holds this value.
    :param create_if_missing: create the entity's znode when absent (a broker without overrides).
    :param attempts: how many version conflicts to take before giving up.
    :raises ZnodeVersionConflictError: changed by someone else ``attempts`` times in a row.
    """
    path = znodes.config_entity_path(entity_type, entity_name)
    last_version = 0
    for _ in range(attempts):
        try:
            data, stat = hook.get_znode(path)
        except ZnodeNotFoundError:
            if not create_if_missing or not set_values:
                if set_values:
                    raise
                return {}, [], False
            entity = znodes.ConfigEntity(entity_type, entity_name, dict(set_values))
            if hook.create_if_absent(path, entity.encode()):
                notify_config_change(hook, entity_type, entity_name)
                return {}, [], True
            continue  # created by someone meanwhile: read it and merge
        last_version = stat.version
        entity = znodes.ConfigEntity.decode(data, path)
        current = dict(entity.config)
        others: list[str] = []
        new = merged_config(current, set_values or {})
        if remove_values:
            new, others = config_without_our_values(new, remove_values)
        if new == current:
            return current, others, False
        encoded = znodes.ConfigEntity(entity_type, entity_name, new, entity.version).encode()
        try:
            hook.set_if_version(path, encoded, stat.version)
        except ZnodeVersionConflictError:
            continue
        notify_config_change(hook, entity_type, entity_name)
        return current, others, True
    raise ZnodeVersionConflictError(
        path, f"{path} (changed by someone else {attempts} times while we wrote it)", last_version, None
    )


def observe(hook: KafkaZooKeeperHook, batch: Batch) -> Observed:
    """What :func:`~airflow_provider_kafka_zk.kafka.drain_execution.next_step` needs about ``batch``.

    :param hook: an open ZooKeeper hook.
    :param batch: the batch about to be decided.
    """
    topics = read_all_topics(hook)
    reassign, czxid = read_reassign(hook)
    states = read_states(hook, [(m.topic, m.partition) for m in batch])
    return Observed(topics, states, reassign, czxid, hook.describe_path(znodes.REASSIGN_PARTITIONS))


def throttles_still_set(
    hook: KafkaZooKeeperHook, entities: Mapping[str, Mapping[str, str]]
) -> dict[str, list[str]]:
    """Per ``<type>/<name>`` entity, the keys that still hold the value this run set (gone: none).

    :param hook: an open ZooKeeper hook.
    :param entities: ``throttles.json``'s ``entities``: what this run set.
    """
    left = {}
    for key, ours in entities.items():
        path = f"/config/{key}"
        try:
            current = znodes.ConfigEntity.decode(hook.get_znode(path)[0], path).config
        except ZnodeNotFoundError:
            continue
        still = sorted(k for k, v in ours.items() if current.get(k) == v)
        if still:
            left[key] = still
    return left


def bootstrap_address(hook: KafkaZooKeeperHook | None) -> str:
    """host:port of a registered broker's first endpoint, for commands a person can paste.

    :param hook: an open ZooKeeper hook, or None (then a placeholder).
    """
    if hook is None:
        return "<broker-host:port>"
    try:
        for broker in hook.live_broker_ids():
            registration, _ = hook.get_broker(broker)
            for endpoint in registration.endpoints:
                _, _, address = endpoint.partition("://")
                if address:
                    return address
    except Exception as exc:  # advice only: never hide the real error behind a lookup failure
        log.debug("No broker endpoint for the advice: %s", exc)
    return "<broker-host:port>"


__all__ = [
    "bootstrap_address",
    "notify_config_change",
    "observe",
    "read_all_topics",
    "read_reassign",
    "read_states",
    "throttles_still_set",
    "update_config",
]
