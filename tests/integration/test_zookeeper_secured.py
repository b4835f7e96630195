"""ZooKeeper as production secures it, on real servers: SASL DIGEST-MD5, TLS with client auth.

* SASL: the hook authenticates with DIGEST-MD5 against a server JAAS config, walks a simulated
  cluster whose znodes carry Kafka's secure ACLs for a ``sasl`` principal (``sasl:kafka`` ALL +
  world READ, sensitive paths creator-only), and creates znodes with exactly the ACL Kafka would
  set there. Wrong credentials, or a principal the ACLs do not admit, give ZooKeeperAuthError
  naming the znode (with its chroot) and the identity, quickly -- never a bare kazoo error.
* TLS: the hook reaches a Netty ``secureClientPort`` with the CA, certificate and key of the
  connection's extras; a snapshot and a guarded write work over it; a client whose certificate
  the server does not trust, one without a certificate and one that does not trust the server
  get ZooKeeperTlsError naming the ensemble and the certificate.
* Kerberos (GSSAPI): the mechanism reaches kazoo/pure-sasl as configured, and without the
  ``kerberos`` module the hook refuses before connecting, saying what to install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.security import ACL, Id

from airflow_provider_kafka_zk.hooks.zookeeper import (
    KafkaZooKeeperHook,
    ZooKeeperAuthError,
    ZooKeeperConnectionConfig,
    ZooKeeperConnectionError,
    ZooKeeperSaslUnavailableError,
    ZooKeeperTlsError,
)
from airflow_provider_kafka_zk.kafka.safety import LEASE_PATH, LEASE_ROOT
from airflow_provider_kafka_zk.maintenance.session import MaintenanceSession, RunIdentity
from airflow_provider_kafka_zk.testing.secure_zk import apply_kafka_secure_acls, digest_id
from airflow_provider_kafka_zk.testing.secure_zk_server import SaslZooKeeperServer, TlsZooKeeperServer
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KAFKA = ("kafka", "kafka-secret")  # the brokers' SASL principal
OPS = ("ops", "ops-secret")  # a valid SASL user the Kafka ACLs do not admit
WORLD_READ = ACL(1, Id("world", "anyone"))
WORLD_ALL = ACL(31, Id("world", "anyone"))
SASL_KAFKA_ALL = ACL(31, Id("sasl", "kafka"))
RUN = RunIdentity("dag", "run1", "task", 1, "host")
REASSIGN = "/admin/reassign_partitions"
REASSIGN_DATA = b'{"version":1,"partitions":[]}'
BROKER_CONFIG = "/config/brokers/0"  # sensitive: Kafka makes it creator-only
CONFIG_DATA = b'{"version":1,"config":{}}'


def _set_connection(
    monkeypatch, conn_id: str, host: str, chroot: str, *, login=None, password=None, **extra
) -> str:
    conn: dict = {"conn_type": "kafka_zookeeper", "host": host, "extra": {"chroot": chroot, **extra}}
    if login is not None:
        conn.update(login=login, password=password)
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


@contextmanager
def _kazoo(hosts: str, **kwargs) -> Iterator[KazooClient]:
    client = KazooClient(hosts=hosts, timeout=10.0, **kwargs)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _sasl(user: tuple[str, str]) -> dict:
    return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user[0], "password": user[1]}}


def _tree(client: KazooClient) -> dict[str, tuple[bytes | None, int, int]]:
    """path -> (data, version, czxid) of every znode under the client's root, by a plain kazoo walk."""
    out: dict[str, tuple[bytes | None, int, int]] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.version, stat.czxid)
        todo.extend(posixpath.join(path, c) for c in client.get_children(path))
    return out


def _as_tree(walk) -> dict[str, tuple[bytes | None, int, int]]:
    return {r.path: (r.data, r.version, r.czxid) for r in walk.rows}


def _full_rows(walk) -> list[tuple]:
    """Every row with its data and all 11 Stat fields (what a pipelined walk must match)."""
    return [dataclasses.astuple(r) for r in walk.rows]


def _pipelined(hook: KafkaZooKeeperHook, fast) -> None:
    """The walk on sessions of its own (what a 3.4/3.5 server gets) reads what the multiRead walk
    read, every Stat field alike: the own sessions authenticate as the hook's connection does."""
    slow = hook.snapshot(method="pipelined", batch_ops=7, window=3, connections=2)
    assert slow.method == "pipelined"  # own sessions, not kazoo's connection
    assert _full_rows(slow) == _full_rows(fast) and slow.consistent


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
# SASL DIGEST-MD5
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sasl_server() -> Iterator[SaslZooKeeperServer]:
    server = SaslZooKeeperServer(dict([KAFKA, OPS]))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def sasl_cluster(sasl_server, tmp_path) -> Iterator[str]:
    """A simulated cluster under a fresh chroot, secured as a broker with ``zookeeper.set.acl=true``
    and SASL principal ``kafka`` leaves it; room made for the creates the tests do (Kafka deletes the
    reassignment znode when done and creates /config/brokers with the first broker config)."""
    chroot = sasl_server.new_chroot()
    with DeployedCluster(incident_cluster(), sasl_server.connect_string, chroot, tmp_path / "disks"):
        with _kazoo(sasl_server.connect_string + chroot) as plain:
            plain.delete(REASSIGN)
            plain.delete("/config/brokers", recursive=True)
            plain.create(BROKER_CONFIG, CONFIG_DATA, makepath=True)
        with _kazoo(sasl_server.connect_string, **_sasl(KAFKA)) as kafka_zk:
            creator = apply_kafka_secure_acls(kafka_zk, chroot, KAFKA, scheme="sasl")
            assert creator == Id("sasl", "kafka")
            assert kafka_zk.get_acls(chroot + "/config/topics")[0] == [SASL_KAFKA_ALL, WORLD_READ]
            assert kafka_zk.get_acls(chroot + BROKER_CONFIG)[0] == [SASL_KAFKA_ALL]
        yield chroot
    with _kazoo(sasl_server.connect_string, **_sasl(KAFKA)) as kafka_zk:  # as Kafka: creator-only inside
        kafka_zk.delete(chroot, recursive=True)


def _sasl_connection(
    monkeypatch, server, chroot, user: tuple[str, str], conn_id: str = "zk_sasl", **extra
) -> str:
    return _set_connection(
        monkeypatch,
        conn_id,
        server.connect_string,
        chroot,
        login=user[0],
        password=user[1],
        auth_scheme="sasl",
        sasl_mechanism="DIGEST-MD5",
        **extra,
    )


def test_sasl_snapshot_reads_a_cluster_with_kafkas_secure_acls(sasl_server, sasl_cluster, monkeypatch):
    chroot = sasl_cluster
    conn_id = _sasl_connection(monkeypatch, sasl_server, chroot, KAFKA)
    with KafkaZooKeeperHook(conn_id) as hook:
        walk = hook.snapshot()
        assert hook.get_znode(BROKER_CONFIG)[0] == CONFIG_DATA  # creator-only: only sasl:kafka reads it
        _pipelined(hook, walk)
    with _kazoo(sasl_server.connect_string + chroot, **_sasl(KAFKA)) as kafka_zk:
        expected = _tree(kafka_zk)
    assert _as_tree(walk) == expected and BROKER_CONFIG in expected and len(expected) > 100
    assert walk.consistent and walk.method == "multi-read"

    # Without credentials the same walk is refused at the creator-only znode: the walk above read
    # it because the server authenticated the hook as sasl:kafka, not because the tree is open.
    with _kazoo(sasl_server.connect_string + chroot) as anonymous, pytest.raises(NoAuthError):
        anonymous.get(BROKER_CONFIG)


def test_sasl_writes_get_the_acl_kafka_would_set(sasl_server, sasl_cluster, monkeypatch, tmp_path):
    chroot = sasl_cluster
    conn_id = _sasl_connection(monkeypatch, sasl_server, chroot, KAFKA)
    with KafkaZooKeeperHook(conn_id) as hook, _session(hook, tmp_path) as session:
        assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)  # the first write takes the lease
        assert hook.create_if_absent("/config/brokers/1", CONFIG_DATA)
        lease_acls = [hook.get_acl(p)[0] for p in (LEASE_ROOT, LEASE_PATH)]
        assert session.release_lease()
    with _kazoo(sasl_server.connect_string + chroot, **_sasl(KAFKA)) as kafka_zk:
        # exactly ZkData.defaultAcls(isSecure=true) for a broker authenticated as sasl:kafka
        # (CREATOR_ALL_ACL + READ_ACL_UNSAFE; creator-only on sensitive paths): no second entry
        assert kafka_zk.get_acls(REASSIGN)[0] == [SASL_KAFKA_ALL, WORLD_READ]
        assert kafka_zk.get_acls("/config/brokers/1")[0] == [SASL_KAFKA_ALL]
        assert kafka_zk.get(REASSIGN)[0] == REASSIGN_DATA
    assert lease_acls == [[SASL_KAFKA_ALL, WORLD_READ]] * 2
    # the ACL holds for another valid SASL user: readable, not writable
    with _kazoo(sasl_server.connect_string + chroot, **_sasl(OPS)) as ops:
        assert ops.get(REASSIGN)[0] == REASSIGN_DATA
        with pytest.raises(NoAuthError):
            ops.set(REASSIGN, b"{}")
        with pytest.raises(NoAuthError):
            ops.get("/config/brokers/1")


def _assert_typed(exc: BaseException, chroot: str, path: str, identity: str, secret: str) -> None:
    assert type(exc) is ZooKeeperAuthError and not isinstance(exc, KazooException)
    message = str(exc)
    assert f"{path} (chroot {chroot})" in message, message
    assert identity in message, message
    assert secret not in message


def test_wrong_sasl_password_is_a_typed_error_naming_the_cluster(sasl_server, sasl_cluster, monkeypatch):
    chroot = sasl_cluster
    wrong = ("kafka", "not-the-password")
    conn_id = _sasl_connection(monkeypatch, sasl_server, chroot, wrong, connect_timeout=5)
    with KafkaZooKeeperHook(conn_id) as hook, pytest.raises(ZooKeeperAuthError) as excinfo:
        hook.get_znode("/brokers/ids")
    _assert_typed(excinfo.value, chroot, "/", "SASL DIGEST-MD5 principal 'kafka'", "not-the-password")
    assert "authentication failed" in str(excinfo.value)

    # The snapshot operator fails the same way, with nothing written.
    from airflow_provider_kafka_zk.operators.snapshot import ZooKeeperSnapshotOperator

    op = ZooKeeperSnapshotOperator(
        task_id="s", cluster="t", kafka_zookeeper_conn_id=conn_id, base_path="/nonexistent"
    )
    with pytest.raises(ZooKeeperAuthError) as excinfo:
        op.execute(context={})
    _assert_typed(excinfo.value, chroot, "/", "SASL DIGEST-MD5 principal 'kafka'", "not-the-password")


def test_sasl_principal_the_acls_do_not_admit_gets_the_znode_named(
    sasl_server, sasl_cluster, monkeypatch, tmp_path
):
    chroot = sasl_cluster
    conn_id = _sasl_connection(monkeypatch, sasl_server, chroot, OPS)
    identity = "SASL DIGEST-MD5 principal 'ops'"
    with KafkaZooKeeperHook(conn_id) as hook:
        with pytest.raises(ZooKeeperAuthError) as excinfo:
            hook.snapshot()
        _assert_typed(excinfo.value, chroot, "/config/brokers", identity, OPS[1])
        with pytest.raises(ZooKeeperAuthError) as excinfo:  # own sessions: the same principal
            hook.snapshot(method="pipelined")
        _assert_typed(excinfo.value, chroot, "/config/brokers", identity, OPS[1])
        with _session(hook, tmp_path), pytest.raises(ZooKeeperAuthError) as excinfo:
            hook.create_if_absent(REASSIGN, REASSIGN_DATA)
        _assert_typed(excinfo.value, chroot, LEASE_ROOT, identity, OPS[1])
    with _kazoo(sasl_server.connect_string + chroot, **_sasl(KAFKA)) as kafka_zk:
        assert kafka_zk.exists(REASSIGN) is None and kafka_zk.exists(LEASE_ROOT) is None


# ---------------------------------------------------------------------------------------------
# Kerberos (GSSAPI): a real MIT KDC when this machine has one (krb5-kdc, krb5-admin-server,
# krb5-user and the `kerberos` Python module); the configuration checks run everywhere
# ---------------------------------------------------------------------------------------------


def _kerberos_missing() -> str | None:
    from airflow_provider_kafka_zk.testing.kerberos_kdc import kerberos_tools_missing

    missing = kerberos_tools_missing()
    try:
        import kerberos  # noqa: F401
    except ImportError:
        missing.append("the kerberos Python module")
    return ", ".join(missing) or None


@pytest.fixture(scope="module")
def kerberized() -> Iterator[tuple]:
    """A KDC with principals ``zookeeper/localhost`` (keytab) and ``airflow`` (password), and a
    ZooKeeper that authenticates GSSAPI clients with that keytab."""
    missing = _kerberos_missing()
    if missing:
        reason = f"no Kerberos here: {missing} missing (scripts/setup.sh installs them: krb5-kdc krb5-admin-server krb5-user libkrb5-dev, pip extra [kerberos])"
        if os.environ.get("CI"):
            pytest.fail(reason)  # CI runs setup.sh: a missing piece there is a broken set-up, not a skip
        pytest.skip(reason)
    from airflow_provider_kafka_zk.testing.kerberos_kdc import KerberosKdc
    from airflow_provider_kafka_zk.testing.secure_zk_server import kerberos_server_section

    kdc = KerberosKdc()
    try:
        kdc.start()
        keytab = kdc.directory / "zookeeper.keytab"
        service = kdc.add_principal("zookeeper/localhost", keytab=keytab)
        kdc.add_principal("airflow", password="airflow-kerberos-password")
        server = SaslZooKeeperServer(
            jaas_section=kerberos_server_section(keytab, service), krb5_conf=kdc.krb5_conf
        )
        try:
            server.start()
            yield kdc, server
        finally:
            server.close()
    finally:
        kdc.close()


def _gssapi_connection(monkeypatch, kdc, server, chroot: str, ccache, *, login: bool = True) -> str:
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    # the service principal is zookeeper/localhost: the connect string must say localhost
    return _set_connection(
        monkeypatch,
        "zk_kerberos",
        f"localhost:{server.port}",
        chroot,
        login=kdc.principal("airflow") if login else None,
        auth_scheme="sasl",
        sasl_mechanism="GSSAPI",
        connect_timeout=5,
    )


@pytest.mark.parametrize("login", [True, False], ids=["principal-named", "ticket-cache-principal"])
def test_gssapi_without_a_ticket_is_a_typed_error(kerberized, monkeypatch, tmp_path, login):
    kdc, server = kerberized
    chroot = server.new_chroot()
    conn_id = _gssapi_connection(monkeypatch, kdc, server, chroot, tmp_path / "no-ticket", login=login)
    with KafkaZooKeeperHook(conn_id) as hook, pytest.raises(ZooKeeperAuthError) as excinfo:
        hook.get_children("/")
    who = "principal 'airflow@KAFKA-ZK.TEST'" if login else "principal of the ticket cache"
    _assert_typed(excinfo.value, chroot, "/", f"Kerberos (SASL GSSAPI) {who}", "password")
    if login:
        assert "No credentials were supplied" in str(excinfo.value) and "kinit" in str(excinfo.value)


def test_gssapi_with_a_ticket_reads_and_writes_as_the_principal(kerberized, monkeypatch, tmp_path):
    """Kafka's secure ACLs for a Kerberos principal: the hook reads what is creator-only and creates
    znodes with exactly [sasl:<principal> ALL, world READ]."""
    kdc, server = kerberized
    principal = kdc.principal("airflow")
    ccache = tmp_path / "ticket"
    kdc.kinit("airflow", "airflow-kerberos-password", ccache)
    chroot = server.new_chroot()
    conn_id = _gssapi_connection(monkeypatch, kdc, server, chroot, ccache)
    gssapi = {"sasl_options": {"mechanism": "GSSAPI", "service": "zookeeper"}}
    hosts = f"localhost:{server.port}"
    with DeployedCluster(incident_cluster(), server.connect_string, chroot, tmp_path / "disks"):
        with _kazoo(server.connect_string + chroot) as plain:
            plain.delete(REASSIGN)
            plain.delete("/config/brokers", recursive=True)
            plain.create(BROKER_CONFIG, CONFIG_DATA, makepath=True)
        with _kazoo(hosts, **gssapi) as kafka_zk:  # the ticket's principal plays the brokers'
            assert apply_kafka_secure_acls(kafka_zk, chroot, (principal, ""), scheme="sasl") == Id(
                "sasl", principal
            )
        with KafkaZooKeeperHook(conn_id) as hook:
            walk = hook.snapshot()
            assert hook.get_znode(BROKER_CONFIG)[0] == CONFIG_DATA
            _pipelined(hook, walk)  # each own session does its own Kerberos exchange
            with _session(hook, tmp_path) as session:
                assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)
                assert session.release_lease()
        with _kazoo(hosts + chroot, **gssapi) as kafka_zk:
            assert _as_tree(walk) == {p: v for p, v in _tree(kafka_zk).items() if p != REASSIGN}
            assert kafka_zk.get_acls(REASSIGN)[0] == [ACL(31, Id("sasl", principal)), WORLD_READ]
    with _kazoo(hosts, **gssapi) as kafka_zk:
        kafka_zk.delete(chroot, recursive=True)
    assert f"authorizationID: {principal}" in server.log_tail(400)


def test_gssapi_extras_reach_kazoo_and_a_missing_kerberos_library_is_named(sasl_server, monkeypatch):
    import puresasl.mechanisms

    extra = {"auth_scheme": "sasl", "sasl_mechanism": "GSSAPI", "sasl_service": "zookeeper"}
    config = ZooKeeperConnectionConfig.from_connection(
        "zk1.example.com:2181", None, "airflow@EXAMPLE.COM", None, extra
    )
    assert config.kazoo_kwargs()["sasl_options"] == {
        "mechanism": "GSSAPI",
        "service": "zookeeper",
        "principal": "airflow@EXAMPLE.COM",
    }
    assert "Kerberos (SASL GSSAPI) principal 'airflow@EXAMPLE.COM'" in config.identity
    ticket_cache = ZooKeeperConnectionConfig.from_connection("zk1:2181", None, None, None, extra)
    assert "principal" not in ticket_cache.kazoo_kwargs()["sasl_options"]  # kinit's principal

    monkeypatch.setattr(puresasl.mechanisms, "have_kerberos", False)  # as on a worker without it
    conn_id = _set_connection(
        monkeypatch, "zk_gssapi", sasl_server.connect_string, "", auth_scheme="sasl", sasl_mechanism="GSSAPI"
    )
    with KafkaZooKeeperHook(conn_id) as hook, pytest.raises(ZooKeeperSaslUnavailableError) as excinfo:
        hook.get_conn()
    assert "kerberos" in str(excinfo.value) and "kinit" in str(excinfo.value)


# ---------------------------------------------------------------------------------------------
# TLS with client authentication
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsZooKeeperServer]:
    server = TlsZooKeeperServer(client_auth="need")
    try:
        server.start()
        yield server
    finally:
        server.close()


def _tls_connection(
    monkeypatch, server, chroot, conn_id="zk_tls", *, login=None, password=None, **overrides
) -> str:
    tls = server.tls
    extra = {
        "use_ssl": "true",
        "ca_file": str(tls.ca_cert),
        "cert_file": str(tls.client_cert),
        "key_file": str(tls.client_key),
        "connect_timeout": 3,
        **overrides,
    }
    extra = {k: v for k, v in extra.items() if v is not None}
    return _set_connection(
        monkeypatch, conn_id, server.secure_connect_string, chroot, login=login, password=password, **extra
    )


def test_tls_snapshot_and_guarded_write(tls_server, monkeypatch, tmp_path):
    chroot = tls_server.new_chroot()
    with DeployedCluster(incident_cluster(), tls_server.connect_string, chroot, tmp_path / "disks"):
        with _kazoo(tls_server.connect_string + chroot) as plain:
            plain.delete(REASSIGN)
            expected = _tree(plain)
        # the server certificate names 127.0.0.1: hostname checking on works too
        conn_id = _tls_connection(monkeypatch, tls_server, chroot, check_hostname="true")
        with KafkaZooKeeperHook(conn_id) as hook:
            assert hook.get_conn().check_hostname is True
            walk = hook.snapshot()
            assert _as_tree(walk) == expected and walk.consistent
            _pipelined(hook, walk)  # own sessions over TLS with the client certificate
            with _session(hook, tmp_path):
                assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)
        with _kazoo(tls_server.connect_string + chroot) as plain:
            assert plain.get(REASSIGN)[0] == REASSIGN_DATA
            assert plain.get_acls(REASSIGN)[0] == [WORLD_ALL]  # a cluster without zookeeper.set.acl


def test_tls_write_on_a_secured_chroot_gives_the_certificate_creator_rights(
    tls_server, monkeypatch, tmp_path
):
    """With mutual TLS the server authenticates the session as ``x509:<subject>``: Kafka's
    CREATOR_ALL on a secured cluster then names the certificate, so the product can undo its write."""
    chroot = tls_server.new_chroot()
    with DeployedCluster(incident_cluster(), tls_server.connect_string, chroot, tmp_path / "disks"):
        with _kazoo(tls_server.connect_string + chroot) as plain:
            plain.delete(REASSIGN)
        with _kazoo(tls_server.connect_string) as root:
            apply_kafka_secure_acls(root, chroot, ("kafka", "kafka-secret"))
        conn_id = _tls_connection(
            monkeypatch, tls_server, chroot, login="kafka", password="kafka-secret", auth_scheme="digest"
        )
        with KafkaZooKeeperHook(conn_id) as hook:
            with _session(hook, tmp_path) as session:
                assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)
                assert session.release_lease()
            acl = set(hook.get_acl(REASSIGN)[0])
        x509 = ACL(31, Id("x509", tls_server.tls.client_subject))
        kafka_all = ACL(31, digest_id("kafka", "kafka-secret"))
        assert acl == {kafka_all, WORLD_READ, x509}
        with _kazoo(tls_server.connect_string, auth_data=[("digest", "kafka:kafka-secret")]) as kafka_zk:
            kafka_zk.delete(chroot, recursive=True)


def test_mutual_tls_identity_as_kafkas_principal(tls_server, monkeypatch, tmp_path):
    """Kafka 2.5+ with ZooKeeper mTLS (KIP-515): the brokers' id is their certificate's ``x509:``
    subject. With that certificate and no other credentials the hook reads the creator-only
    znodes and creates znodes with exactly Kafka's ACL for it."""
    tls = tls_server.tls
    x509_all = ACL(31, Id("x509", tls.client_subject))
    chroot = tls_server.new_chroot()
    with DeployedCluster(incident_cluster(), tls_server.connect_string, chroot, tmp_path / "disks"):
        with _kazoo(tls_server.connect_string + chroot) as plain:
            plain.delete(REASSIGN)
            plain.delete("/config/brokers", recursive=True)
            plain.create(BROKER_CONFIG, CONFIG_DATA, makepath=True)
        certificate = {"use_ssl": True, "ca": str(tls.ca_cert), "certfile": str(tls.client_cert)}
        with _kazoo(tls_server.secure_connect_string, keyfile=str(tls.client_key), **certificate) as broker:
            apply_kafka_secure_acls(broker, chroot, (tls.client_subject, ""), scheme="x509")
        conn_id = _tls_connection(monkeypatch, tls_server, chroot)  # auth_scheme none: the certificate only
        with KafkaZooKeeperHook(conn_id) as hook:
            assert hook.get_znode(BROKER_CONFIG)[0] == CONFIG_DATA  # creator-only: the certificate reads it
            with _session(hook, tmp_path) as session:
                assert hook.create_if_absent(REASSIGN, REASSIGN_DATA)
                assert hook.create_if_absent("/config/brokers/1", CONFIG_DATA)
                assert session.release_lease()
            assert hook.get_acl(REASSIGN)[0] == [x509_all, WORLD_READ]
            assert hook.get_acl("/config/brokers/1")[0] == [x509_all]
            hook.get_conn().delete("/", recursive=True)  # the chroot, as the only identity that may


@pytest.mark.parametrize(
    "client, reason",
    [
        ("untrusted certificate", "certificate"),
        ("no certificate", "certificate"),
        ("server not trusted", "CERTIFICATE_VERIFY_FAILED"),
    ],
)
def test_tls_client_the_server_refuses_gets_a_typed_error(tls_server, monkeypatch, client, reason):
    tls = tls_server.tls
    overrides = {
        "untrusted certificate": {"cert_file": str(tls.rogue_cert), "key_file": str(tls.rogue_key)},
        "no certificate": {"cert_file": None, "key_file": None},
        "server not trusted": {"ca_file": str(tls.directory / "rogue-ca.crt")},
    }[client]
    conn_id = _tls_connection(monkeypatch, tls_server, "", **overrides)
    with KafkaZooKeeperHook(conn_id) as hook, pytest.raises(ZooKeeperTlsError) as excinfo:
        hook.get_children("/")
    exc = excinfo.value
    assert isinstance(exc, ZooKeeperConnectionError) and not isinstance(exc, KazooException)
    message = str(exc)
    assert tls_server.secure_connect_string in message and reason in message, message
    assert str(overrides.get("cert_file") or "none") in message or client == "server not trusted"


def test_plaintext_client_on_the_tls_port_gets_a_typed_error(tls_server, monkeypatch):
    conn_id = _set_connection(
        monkeypatch, "zk_plain_on_tls", tls_server.secure_connect_string, "", connect_timeout=3
    )
    with KafkaZooKeeperHook(conn_id) as hook, pytest.raises(ZooKeeperConnectionError) as excinfo:
        hook.get_children("/")
    assert tls_server.secure_connect_string in str(excinfo.value)
