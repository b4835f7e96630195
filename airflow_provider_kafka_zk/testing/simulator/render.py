"""The exact ZooKeeper tree of a simulated cluster, encoded by the core codecs (byte-for-byte Kafka)."""

from __future__ import annotations

from airflow_provider_kafka_zk.kafka import _jackson
from airflow_provider_kafka_zk.kafka import znodes as zk
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT
from airflow_provider_kafka_zk.kafka.versions import (
    KafkaVersion,
    broker_registration_version,
    config_entity_types,
    controller_znode_version,
    creates_log_dir_event_path,
    feature_znode_version,
    writes_feature_znode,
)

from .cluster import PRODUCER_ID_BLOCK_SIZE, SimulatedCluster
from .zk_writer import ZnodeRecord

_CONTAINERS = (zk.ADMIN, zk.BROKERS, zk.CLUSTER, zk.CONFIG)


def broker_registration(cluster: SimulatedCluster, broker_id: int) -> zk.BrokerRegistration:
    broker = cluster.brokers[broker_id]
    endpoint = f"PLAINTEXT://{broker.spec.host}:{broker.spec.listener_port}"
    version = broker_registration_version(cluster.spec.ibp)
    return zk.BrokerRegistration.for_listeners(
        broker_id,
        (endpoint,),
        {"PLAINTEXT": "PLAINTEXT"},
        timestamp_ms=broker.registered_at_ms,
        version=version,
        rack=broker.spec.rack if version >= 3 else None,
    )


def topic_assignment(cluster: SimulatedCluster, topic_name: str) -> zk.TopicAssignment:
    topic = cluster.topics[topic_name]
    parts = topic.partitions
    return zk.TopicAssignment(
        topic=topic_name,
        partitions={p: tuple(m.replicas) for p, m in parts.items()},
        topic_id=topic.zk_topic_id,
        adding_replicas={p: tuple(m.adding) for p, m in parts.items() if m.adding},
        removing_replicas={p: tuple(m.removing) for p, m in parts.items() if m.removing},
        version=topic.znode_format,
    )


def persistent_paths(release: KafkaVersion) -> tuple[str, ...]:
    """The paths a broker of ``release`` creates at startup (``ZkUtils.persistentZkPaths`` 0.11.0.0 and
    1.0.0; ``ZkData.PersistentZkPaths`` 1.1.0 to 3.9.0-rc3): no ``/log_dir_event_notification`` before
    1.0, config roots by :func:`~airflow_provider_kafka_zk.kafka.versions.config_entity_types`."""
    config_roots = {f"{zk.CONFIG}/{t}" for t in config_entity_types(release)}
    return tuple(
        p
        for p in zk.PERSISTENT_PATHS
        if (not p.startswith(zk.CONFIG + "/") or p == zk.CONFIG_CHANGES or p in config_roots)
        and (p != zk.LOG_DIR_EVENT_NOTIFICATION or creates_log_dir_event_path(release))
    )


def render_zookeeper(cluster: SimulatedCluster) -> list[ZnodeRecord]:
    """Every znode the cluster's ZooKeeper holds (below the chroot), as Kafka would have written it."""
    spec = cluster.spec
    records = [ZnodeRecord(p, None) for p in _CONTAINERS]
    records += [
        ZnodeRecord(p, None) for p in persistent_paths(spec.release) if p != zk.LATEST_PRODUCER_ID_BLOCK
    ]
    records.append(ZnodeRecord(zk.CLUSTER_ID, zk.ClusterId(cluster.cluster_id).encode()))

    block_broker, block_start, block_version = cluster.latest_producer_id_block()
    block = zk.ProducerIdBlock(block_broker, block_start, block_start + PRODUCER_ID_BLOCK_SIZE - 1)
    records.append(ZnodeRecord(zk.LATEST_PRODUCER_ID_BLOCK, block.encode(), version=block_version))

    for broker_id in cluster.zookeeper_broker_ids():  # a migration's KRaft brokers are not registered here
        records.append(
            ZnodeRecord(
                zk.broker_path(broker_id),
                broker_registration(cluster, broker_id).encode(),
                owner_broker=broker_id,
                version=1,  # registered, then updated once at startup
            )
        )
    migration = cluster.kraft_migration
    if migration is not None and migration.claimed:
        # The KRaft controller holds /controller as a persistent znode with its epoch
        # (``KafkaZkClient.tryRegisterKRaftControllerAsActiveController``, 3.6.2 and 3.9.0-rc3).
        kraft = zk.ControllerRegistration(
            migration.kraft_controller_id,
            cluster.controller_elected_at_ms,
            version=2,
            kraft_controller_epoch=migration.kraft_controller_epoch,
        )
        records.append(ZnodeRecord(zk.CONTROLLER, kraft.encode()))
    else:
        controller = zk.ControllerRegistration(
            cluster.controller_id,
            cluster.controller_elected_at_ms,
            version=controller_znode_version(spec.release),
        )
        records.append(ZnodeRecord(zk.CONTROLLER, controller.encode(), owner_broker=cluster.controller_id))
    if migration is not None:
        # the migration state the KRaft controller keeps (``MigrationZNode``, ``getOrCreateMigrationState``)
        records.append(ZnodeRecord(zk.MIGRATION, migration.encode(), version=migration.zk_version))
    records.append(
        ZnodeRecord(
            zk.CONTROLLER_EPOCH,
            zk.ControllerEpoch(cluster.controller_epoch).encode(),
            version=cluster.controller_epoch_version,
        )
    )
    if writes_feature_znode(spec.release):
        enabled = spec.ibp >= KafkaVersion(2, 7, 0, 0)
        feature = zk.FeatureZNode(feature_znode_version(spec.ibp) if enabled else 1, 1 if enabled else 0, {})
        data = feature.encode() if spec.release >= KafkaVersion(3, 3) else feature.encode_kafka_2_7()
        records.append(ZnodeRecord(zk.FEATURE, data))

    for name, topic in sorted(cluster.topics.items()):
        records.append(
            ZnodeRecord(
                zk.topic_path(name), topic_assignment(cluster, name).encode(), version=topic.znode_version
            )
        )
        records.append(ZnodeRecord(zk.topic_partitions_path(name), None))
        for p, part in sorted(topic.partitions.items()):
            records.append(ZnodeRecord(zk.topic_partition_path(name, p), None))
            state = zk.PartitionState(
                topic=name,
                partition=p,
                leader=part.leader,
                leader_epoch=part.leader_epoch,
                controller_epoch=part.controller_epoch,
                isr=tuple(part.isr),
            )
            records.append(
                ZnodeRecord(zk.partition_state_path(name, p), state.encode(), version=part.state_version)
            )
        if topic.config_znode:
            records.append(
                ZnodeRecord(
                    zk.config_entity_path("topics", name),
                    zk.ConfigEntity("topics", name, topic.config).encode(),
                    version=cluster.config_versions.get(f"topics/{name}", 0),
                )
            )
    for entity, config in sorted(cluster.broker_configs.items()):
        records.append(
            ZnodeRecord(
                zk.config_entity_path("brokers", entity),
                zk.ConfigEntity("brokers", entity, config).encode(),
                version=cluster.config_versions.get(f"brokers/{entity}", 0),
            )
        )
    for sequence, entity_path in enumerate(cluster.config_changes):
        entity_type, entity_name = entity_path.split("/", 1)
        note = zk.ConfigChangeNotification(sequence, entity_type, entity_name)
        records.append(ZnodeRecord(note.path, note.encode()))
    for topic_name in sorted(cluster.delete_markers):
        records.append(ZnodeRecord(zk.delete_topic_path(topic_name), None))
    if cluster.reassignment:
        entries = tuple(zk.ReassignmentEntry(t, p, tuple(r)) for t, p, r in cluster.reassignment)
        records.append(ZnodeRecord(zk.REASSIGN_PARTITIONS, zk.ReassignPartitions(entries).encode()))
    if cluster.preferred_election_request:
        election = zk.PreferredReplicaElection(
            tuple(zk.TopicPartition(t, p) for t, p in cluster.preferred_election_request)
        )
        records.append(ZnodeRecord(zk.PREFERRED_REPLICA_ELECTION, election.encode()))
    if cluster.maintenance_lease is not None:
        records += [ZnodeRecord(LEASE_ROOT, None), ZnodeRecord(LEASE_PATH, cluster.maintenance_lease)]
    records += security_metadata(cluster)
    return records


# AclAuthorizer's stores and resource types (``ZkAclStore``, ``AclEntry.ResourceTypes``, 3.9.0-rc3):
# ``createAclPaths`` creates each store's path and one child per resource type at startup.
ACL_RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"


def acl_store_path(pattern: str) -> str:
    """``LiteralAclStore.aclPath`` or ``ExtendedAclStore.aclPath`` (``/kafka-acl-extended/<pattern>``)."""
    return LITERAL_ACL_PATH if pattern == "literal" else f"{EXTENDED_ACL_PATH}/{pattern}"


def security_metadata(cluster: SimulatedCluster) -> list[ZnodeRecord]:
    """ACLs, SCRAM credentials and quotas, delegation tokens, ZooKeeper-based consumer offsets.

    ACL znodes as ``ResourceZNode.encode`` (``{"version":1,"acls":[...]}``, java HashMaps:
    ``AclEntry.toJsonCompatibleMap``/``toMap``); user and client configs as any config entity; token
    znodes as ``DelegationTokenManagerZk.toJsonCompatibleMap`` (version 3, a Scala immutable Map); an
    old consumer's offset as the decimal text ``ZookeeperConsumerConnector`` wrote.
    """
    records: list[ZnodeRecord] = []
    if cluster.acls:
        for pattern in ("literal", "prefixed"):
            store = acl_store_path(pattern)
            if pattern != "literal":
                records.append(ZnodeRecord(EXTENDED_ACL_PATH, None))
            records.append(ZnodeRecord(store, None))
            records += [ZnodeRecord(f"{store}/{t}", None) for t in ACL_RESOURCE_TYPES]
        records += [ZnodeRecord("/kafka-acl-changes", None), ZnodeRecord("/kafka-acl-extended-changes", None)]
        for (pattern, resource_type, name), entries in sorted(cluster.acls.items()):
            body = _jackson.java_hash_map(
                {"version": 1, "acls": [_jackson.java_hash_map(e) for e in entries]}
            )
            records.append(
                ZnodeRecord(f"{acl_store_path(pattern)}/{resource_type}/{name}", _jackson.dumps(body))
            )
    for entity_type, configs in (("users", cluster.user_configs), ("clients", cluster.client_configs)):
        for name, config in sorted(configs.items()):
            records.append(
                ZnodeRecord(
                    zk.config_entity_path(entity_type, name),
                    zk.ConfigEntity(entity_type, name, config).encode(),
                    version=cluster.config_versions.get(f"{entity_type}/{name}", 0),
                )
            )
    if cluster.delegation_tokens:
        records += [ZnodeRecord("/delegation_token", None), ZnodeRecord("/delegation_token/tokens", None)]
        for token_id, info in sorted(cluster.delegation_tokens.items()):
            body = _jackson.scala_immutable_map(
                {
                    "version": 3,
                    "owner": f"User%3A{info['owner']}",
                    "tokenRequester": f"User%3A{info['owner']}",
                    "renewers": [],
                    "issueTimestamp": info["issueTimestamp"],
                    "maxTimestamp": info["maxTimestamp"],
                    "expiryTimestamp": info["expiryTimestamp"],
                    "tokenId": token_id,
                }
            )
            records.append(ZnodeRecord(f"/delegation_token/tokens/{token_id}", _jackson.dumps(body)))
    containers: set[str] = set()
    for (group, topic, partition), offset in sorted(cluster.zk_consumer_offsets.items()):
        base = f"{zk.CONSUMERS}/{group}"
        for path in (base, f"{base}/offsets", f"{base}/offsets/{topic}"):
            if path not in containers:
                containers.add(path)
                records.append(ZnodeRecord(path, None))
        records.append(ZnodeRecord(f"{base}/offsets/{topic}/{partition}", str(offset).encode()))
    return records
