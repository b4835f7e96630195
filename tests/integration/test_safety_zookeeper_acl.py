"""ZooKeeper ACLs and the mutation safety layer, against a real ZooKeeper holding a simulated cluster.

* Znodes this product creates get the ACL Kafka (``zookeeper.set.acl=true``) uses there: Kafka's
  principal ALL plus world READ, creator-only on sensitive paths (``/config/brokers``...), the
  maintenance lease included; on a world-open cluster they stay world-open.
* Credentials that cannot read (or write) a secured chroot make every operator fail with a
  ``ZooKeeperAuthError`` naming the znode with its chroot and the identity used, and change nothing.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.security import ACL, Id

from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook, ZooKeeperAuthError
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT
from airflow_provider_kafka_zk.maintenance.session import MaintenanceSession, RunIdentity
from airflow_provider_kafka_zk.testing.secure_zk import apply_kafka_secure_acls, digest_id
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster

pytestmark = pytest.mark.integration

KAFKA = ("kafka", "kafka-secret")
WORLD_READ = ACL(1, Id("world", "anyone"))
WORLD_ALL = ACL(31, Id("world", "anyone"))
RUN = RunIdentity("dag", "run1", "task", 1, "host")

# The znodes of the ACL test: Kafka would create each of them with these data.
REASSIGN = "/admin/reassign_partitions"
CHANGE_PREFIX = "/config/changes/config_change_"
BROKER_CONFIG = "/config/brokers/0"  # sensitive: creator-only
TOPIC_CONFIG = "/config/topics/x"
REASSIGN_DATA = b'{"version":1,"partitions":[]}'
CHANGE_DATA = b'{"version":2,"entity_path":"topics/x"}'
CONFIG_DATA = b'{"version":1,"config":{}}'


def _connection(monkeypatch, conn_id, server, chroot, *, login=None, password=None, **extra) -> str:
    conn = {
        "conn_type": "kafka_zookeeper",
        "host": server.connect_string,
        "extra": {"chroot": chroot, **extra},
    }
    if login is not None:
        conn.update(login=login, password=password)
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


def _product_connection(monkeypatch, server, chroot, who: str) -> str:
    """``none``: no credentials; ``kafka``: Kafka's own principal; ``ops``: a digest user without access."""
    if who == "none":
        return _connection(monkeypatch, "zk_none", server, chroot)
    password = {"kafka": KAFKA[1], "ops": "not-the-password"}[who]
    return _connection(
        monkeypatch, f"zk_{who}", server, chroot, login=who, password=password, auth_scheme="digest"
    )


@contextmanager
def _kazoo(server, chroot: str = "", auth: tuple[str, str] | None = None) -> Iterator[KazooClient]:
    auth_data = [("digest", f"{auth[0]}:{auth[1]}")] if auth else None
    client = KazooClient(hosts=server.connect_string + chroot, timeout=10.0, auth_data=auth_data)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int]]:
    """path -> (data, version) of every znode under the client's root, by a plain kazoo walk."""
    out: dict[str, tuple[bytes | None, int]] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.version)
        todo.extend(posixpath.join(path, c) for c in client.get_children(path))
    return out


def _secure(server, chroot: str, **kwargs) -> Id:
    with _kazoo(server) as root:
        return apply_kafka_secure_acls(root, chroot, KAFKA, **kwargs)


@contextlib.contextmanager
def _session(hook: KafkaZooKeeperHook, tmp_path) -> Iterator[MaintenanceSession]:
    """A real session on the hook's cluster, which the cluster file names and opts out of approval
    (the writes here are the test's own, behind no approval step: issue 31's rule)."""
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        f'[clusters.t]\nkafka_zookeeper_conn_id = "{hook.kafka_zookeeper_conn_id}"\nrequire_approval = false\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters))
        with MaintenanceSession(
            hook, cluster="t", artefact_dir=str(tmp_path / "art"), run=RUN, dry_run=False
        ) as session:
            yield session


# ---------------------------------------------------------------------------------------------
# Created znodes get the ACL Kafka uses
# ---------------------------------------------------------------------------------------------


def test_znodes_created_in_a_session_get_the_acls_kafka_uses(
    zookeeper_server, zk_chroot, tmp_path, monkeypatch, request
):
    request.addfinalizer(lambda: _remove_secured(zookeeper_server, zk_chroot))
    with DeployedCluster(incident_cluster(), zookeeper_server.connect_string, zk_chroot, tmp_path / "disks"):
        with _kazoo(zookeeper_server, zk_chroot, KAFKA) as kafka_zk:
            # room for the creates: Kafka deletes the reassignment znode when done, and creates
            # /config/brokers with the first broker config
            kafka_zk.delete(REASSIGN)
            kafka_zk.delete("/config/brokers", recursive=True)
            creator = _secure(zookeeper_server, zk_chroot)
            kafka_all = ACL(31, creator)
            assert creator == digest_id(*KAFKA)
            assert kafka_zk.get_acls("/config/topics")[0] == [kafka_all, WORLD_READ]  # Kafka's rule, set

            # Before: a plain kazoo create (what the code did) leaves each znode world-writable,
            # the sensitive broker config world-readable too.
            before = [
                kafka_zk.create(REASSIGN, REASSIGN_DATA),
                kafka_zk.create(CHANGE_PREFIX, CHANGE_DATA, sequence=True),
                kafka_zk.create(BROKER_CONFIG, CONFIG_DATA, makepath=True),
                kafka_zk.create(TOPIC_CONFIG, CONFIG_DATA),
            ]
            for path in [*before, "/config/brokers"]:
                assert kafka_zk.get_acls(path)[0] == [WORLD_ALL], path
            for path in before:
                kafka_zk.delete(path)
            kafka_zk.delete("/config/brokers")

            # After: the same creates through the product, inside a maintenance session.
            conn_id = _product_connection(monkeypatch, zookeeper_server, zk_chroot, "kafka")
            with KafkaZooKeeperHook(conn_id) as hook, _session(hook, tmp_path):
                assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)
                change = hook.create_sequential(CHANGE_PREFIX, CHANGE_DATA)
                assert hook.create_if_absent(BROKER_CONFIG, CONFIG_DATA, makepath=True)
                assert hook.create_if_absent(TOPIC_CONFIG, CONFIG_DATA)
            assert change.startswith(CHANGE_PREFIX) and len(change) == len(CHANGE_PREFIX) + 10

            def acl(path: str) -> set[ACL]:
                return set(kafka_zk.get_acls(path)[0])

            for path in (REASSIGN, change, TOPIC_CONFIG, LEASE_ROOT, LEASE_PATH):
                assert acl(path) == {kafka_all, WORLD_READ}, path
            for path in ("/config/brokers", BROKER_CONFIG):  # sensitive: no world entry at all
                assert acl(path) == {kafka_all}, path
            assert kafka_zk.get(BROKER_CONFIG)[0] == CONFIG_DATA

        # The ACLs hold: anyone reads the topic config but cannot change it; the broker config
        # is not even readable for another user.
        with _kazoo(zookeeper_server, zk_chroot) as anonymous:
            assert anonymous.get(TOPIC_CONFIG)[0] == CONFIG_DATA
            with pytest.raises(NoAuthError):
                anonymous.set(TOPIC_CONFIG, b"{}")
            with pytest.raises(NoAuthError):
                anonymous.delete(LEASE_PATH)
        with _kazoo(zookeeper_server, zk_chroot, ("ops", "ops")) as ops, pytest.raises(NoAuthError):
            ops.get(BROKER_CONFIG)


@pytest.mark.parametrize("who", ["none", "kafka"])
def test_on_a_world_open_cluster_created_znodes_stay_world_open(
    zookeeper_server, zk_chroot, tmp_path, monkeypatch, who
):
    deployed = DeployedCluster(
        incident_cluster(), zookeeper_server.connect_string, zk_chroot, tmp_path / "disks"
    )
    with deployed, _kazoo(zookeeper_server, zk_chroot) as client:
        client.delete("/config/brokers", recursive=True)
        assert client.get_acls("/config")[0] == [WORLD_ALL]  # no zookeeper.set.acl here
        conn_id = _product_connection(monkeypatch, zookeeper_server, zk_chroot, who)
        with KafkaZooKeeperHook(conn_id) as hook, _session(hook, tmp_path) as session:
            change = hook.create_sequential(CHANGE_PREFIX, CHANGE_DATA)
            assert hook.create_if_absent(BROKER_CONFIG, CONFIG_DATA, makepath=True)
            assert hook.create_if_absent(TOPIC_CONFIG, CONFIG_DATA)
            lease_acls = [client.get_acls(p)[0] for p in (LEASE_ROOT, LEASE_PATH)]
            assert session.release_lease()
        assert lease_acls == [[WORLD_ALL], [WORLD_ALL]]
        assert client.exists(LEASE_ROOT) is None  # released with its parent: the chroot as Kafka left it
        for path in (change, "/config/brokers", BROKER_CONFIG, TOPIC_CONFIG):
            # no digest/auth entry: nobody is locked out of a cluster that never used ACLs
            assert client.get_acls(path)[0] == [WORLD_ALL], path
        client.delete(TOPIC_CONFIG)  # still world-writable, without credentials


# ---------------------------------------------------------------------------------------------
# Credentials that cannot read the chroot: errors a person can act on, nothing changed
# ---------------------------------------------------------------------------------------------

IDENTITIES = {"none": "an unauthenticated session", "ops": "digest user 'ops'"}


@pytest.fixture(scope="module")
def unreadable_cluster(zookeeper_server, tmp_path_factory) -> Iterator[str]:
    """A secured chroot whose /brokers and /brokers/ids only Kafka's principal may read."""
    chroot = zookeeper_server.new_chroot()
    disks = tmp_path_factory.mktemp("unreadable")
    try:
        with DeployedCluster(incident_cluster(), zookeeper_server.connect_string, chroot, disks):
            _secure(zookeeper_server, chroot, creator_only=("/brokers", "/brokers/ids"))
            yield chroot
    finally:
        _remove_secured(zookeeper_server, chroot)


def _remove_secured(server, chroot: str) -> None:
    """Delete a secured chroot as Kafka's principal: the ZooKeeper is shared with other test
    modules, and a creator-only subtree would make their walks of the real root fail."""
    with _kazoo(server, "", KAFKA) as kafka_zk:
        if kafka_zk.exists(chroot):
            kafka_zk.delete(chroot, recursive=True)


@contextmanager
def _unchanged(server, chroot: str) -> Iterator[None]:
    with _kazoo(server, chroot, KAFKA) as kafka_zk:
        before = _tree(kafka_zk)
        assert "/brokers/ids/0" in before and LEASE_ROOT not in before
        yield
        assert _tree(kafka_zk) == before


def _assert_actionable(excinfo, chroot: str, path: str, who: str) -> None:
    exc = excinfo.value
    assert type(exc) is ZooKeeperAuthError and isinstance(exc, PermissionError)
    assert not isinstance(exc, KazooException)
    message = str(exc)
    assert f"{path} (chroot {chroot})" in message, message
    assert IDENTITIES[who] in message, message
    assert "not-the-password" not in message


@pytest.mark.parametrize("who", sorted(IDENTITIES))
def test_snapshot_operator_names_the_unreadable_znode(
    zookeeper_server, unreadable_cluster, tmp_path, monkeypatch, who
):
    from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

    chroot = unreadable_cluster
    conn_id = _product_connection(monkeypatch, zookeeper_server, chroot, who)
    op = ZooKeeperSnapshotOperator(
        task_id="snapshot", cluster="t", kafka_zookeeper_conn_id=conn_id, base_path=str(tmp_path)
    )
    with _unchanged(zookeeper_server, chroot), pytest.raises(ZooKeeperAuthError) as excinfo:
        op.execute(context={})
    _assert_actionable(excinfo, chroot, "/brokers", who)
    assert not list(tmp_path.rglob("*.parquet"))  # a failed walk publishes nothing


@pytest.mark.parametrize("who", sorted(IDENTITIES))
def test_list_broker_ids_names_the_unreadable_znode(zookeeper_server, unreadable_cluster, monkeypatch, who):
    from airflow_provider_kafka_zk.operators.inventory import ListBrokerIdsOperator

    chroot = unreadable_cluster
    conn_id = _product_connection(monkeypatch, zookeeper_server, chroot, who)
    op = ListBrokerIdsOperator(task_id="brokers", kafka_zookeeper_conn_id=conn_id)
    with _unchanged(zookeeper_server, chroot), pytest.raises(ZooKeeperAuthError) as excinfo:
        op.execute(context={})
    _assert_actionable(excinfo, chroot, "/brokers/ids", who)


@pytest.mark.parametrize("who", sorted(IDENTITIES))
def test_topic_deletion_verify_names_the_unreadable_znode(
    zookeeper_server, unreadable_cluster, tmp_path, monkeypatch, who
):
    from airflow_provider_kafka_zk.operators.deletion import TopicDeletionVerifyOperator

    chroot = unreadable_cluster
    conn_id = _product_connection(monkeypatch, zookeeper_server, chroot, who)
    monkeypatch.setenv(
        "AIRFLOW_CONN_HOSTS_SSH", json.dumps({"conn_type": "ssh", "host": "127.0.0.1", "login": "x"})
    )
    op = TopicDeletionVerifyOperator(
        task_id="verify",
        cluster="t",
        base_path=str(tmp_path),
        kafka_zookeeper_conn_id=conn_id,
        ssh_conn_id="hosts_ssh",
        topics=["orders"],
        deferrable=False,
        wait_timeout=1,
    )
    with _unchanged(zookeeper_server, chroot), pytest.raises(ZooKeeperAuthError) as excinfo:
        op.execute(context={})
    exc = excinfo.value
    message = str(exc)
    assert type(exc) is ZooKeeperAuthError and isinstance(exc, PermissionError), message
    assert "/brokers/ids" in message and f"(chroot {chroot})" in message, message
    assert IDENTITIES[who] in message, message


@pytest.mark.parametrize("who", sorted(IDENTITIES))
def test_first_write_of_a_session_names_the_znode_it_may_not_write(
    zookeeper_server, unreadable_cluster, tmp_path, monkeypatch, who
):
    chroot = unreadable_cluster
    conn_id = _product_connection(monkeypatch, zookeeper_server, chroot, who)
    with _unchanged(zookeeper_server, chroot), KafkaZooKeeperHook(conn_id) as hook:
        # the first write takes the lease: creating its parent is what the ACL forbids
        with _session(hook, tmp_path), pytest.raises(ZooKeeperAuthError) as excinfo:
            hook.create_if_absent("/admin/reassign_partitions", b"{}")
        assert hook._gate is None  # unbound again: no later write can slip through
    _assert_actionable(excinfo, chroot, LEASE_ROOT, who)
