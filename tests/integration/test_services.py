"""The real local services behave like the production ones the provider talks to.

ZooKeeper must keep data and port across restarts (later tests restart it mid-snapshot) and never
outlive a test; sshd must enforce host keys exactly as a broker host would, for paramiko and for
Airflow's SSHHook alike.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import paramiko
import pytest
from kazoo.client import KazooClient, KazooState

from airflow_provider_kafka_zk.testing.sshd import SshServer
from airflow_provider_kafka_zk.testing.zookeeper import ZooKeeperServer, ZooKeeperStartError

pytestmark = pytest.mark.integration


def _pid_alive(pid: int) -> bool:
    """True unless the PID is gone or a zombie waiting to be reaped by init."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _refuses_connections(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture
def private_zookeeper() -> Iterator[ZooKeeperServer]:
    """A server of its own, for tests that stop or restart it (the shared one stays untouched)."""
    with ZooKeeperServer() as server:
        yield server


def _strict_client(known_host_lines: list[str]) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    for line in known_host_lines:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(line)
        assert entry is not None and entry.key is not None
        for hostname in entry.hostnames:
            client.get_host_keys().add(hostname, entry.key.get_name(), entry.key)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return client


def _connect(client: paramiko.SSHClient, server: SshServer, address: str) -> None:
    client.connect(
        address,
        port=server.port,
        username=server.user,
        key_filename=str(server.client_private_key_path),
        look_for_keys=False,
        allow_agent=False,
        timeout=10,
    )


# -- ZooKeeper -------------------------------------------------------------------------------------


def test_zookeeper_serves_on_loopback(zookeeper_server: ZooKeeperServer):
    assert zookeeper_server.is_running and zookeeper_server.pid
    assert zookeeper_server.connect_string == f"127.0.0.1:{zookeeper_server.port}"
    assert zookeeper_server.hosts == zookeeper_server.connect_string
    assert zookeeper_server.four_letter("ruok") == "imok"
    assert "Mode: standalone" in zookeeper_server.four_letter("srvr")


def test_kazoo_client_works_inside_its_own_chroot(
    kazoo_client: KazooClient, zookeeper_server: ZooKeeperServer, zk_chroot: str
):
    assert kazoo_client.get_children("/") == []
    kazoo_client.create("/brokers/ids/0", b'{"version":5}', makepath=True)
    assert kazoo_client.get("/brokers/ids/0")[0] == b'{"version":5}'

    root = KazooClient(hosts=zookeeper_server.connect_string)
    root.start(timeout=15)
    try:
        assert root.get(f"{zk_chroot}/brokers/ids/0")[0] == b'{"version":5}'
    finally:
        root.stop()
        root.close()


def test_each_chroot_is_new_and_empty(zookeeper_server: ZooKeeperServer):
    first, second = zookeeper_server.new_chroot(), zookeeper_server.new_chroot()
    assert first != second
    assert first.startswith("/kafka_test_") and second.startswith("/kafka_test_")


def test_restart_keeps_port_data_and_session(private_zookeeper: ZooKeeperServer):
    chroot = private_zookeeper.new_chroot()
    client = KazooClient(hosts=private_zookeeper.connect_string + chroot, timeout=10.0)
    reconnected = threading.Event()
    states: list[str] = []

    def on_state(state: str) -> None:
        states.append(state)
        if state == KazooState.CONNECTED:
            reconnected.set()

    client.start(timeout=15)
    try:
        client.create("/topics/t1", b"persistent", makepath=True)
        client.create("/owner", b"ephemeral", ephemeral=True)
        client.add_listener(on_state)
        port, pid = private_zookeeper.port, private_zookeeper.pid

        private_zookeeper.restart()

        assert private_zookeeper.port == port
        assert private_zookeeper.pid != pid and not _pid_alive(pid)
        assert reconnected.wait(15), f"kazoo did not reconnect; states seen: {states}"
        assert KazooState.LOST not in states  # same session: the restart was shorter than its timeout
        assert client.get("/topics/t1")[0] == b"persistent"
        assert client.get("/owner")[0] == b"ephemeral"

        reconnected.clear()
        private_zookeeper.kill()  # a crash, not a shutdown: committed writes must still be there
        private_zookeeper.start()
        assert reconnected.wait(15), f"kazoo did not reconnect after kill; states seen: {states}"
        assert client.get("/topics/t1")[0] == b"persistent"
    finally:
        client.stop()
        client.close()


def test_stop_leaves_no_process_and_close_removes_temp_data():
    server = ZooKeeperServer().start()
    pid, port, data_dir = server.pid, server.port, server.data_dir
    assert pid is not None and _pid_alive(pid)

    server.stop()

    assert not server.is_running and server.pid is None
    assert not _pid_alive(pid)
    assert _refuses_connections("127.0.0.1", port)
    assert (data_dir / "version-2").is_dir()  # stop keeps data for a later start()
    server.close()
    assert not data_dir.exists()


def test_start_failure_names_the_cause_from_the_server_log():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        server = ZooKeeperServer(port=squatter.getsockname()[1], start_timeout=20)
        try:
            with pytest.raises(ZooKeeperStartError, match="Address already in use"):
                server.start()
            assert not server.is_running
        finally:
            server.close()


def test_importing_the_plugin_starts_nothing_and_imports_no_airflow():
    code = (
        "import sys, airflow_provider_kafka_zk.testing.pytest_plugin\n"
        "loaded = {'airflow', 'kazoo', 'paramiko'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- sshd ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["127.0.0.2", "127.0.0.3"])
def test_paramiko_connects_with_strict_host_key_checking(ssh_server: SshServer, address: str):
    client = _strict_client([ssh_server.known_hosts_line(address)])
    try:
        _connect(client, ssh_server, address)
        _, stdout, _ = client.exec_command("echo $USER; echo $SSH_CONNECTION", timeout=10)
        user, connection = stdout.read().decode().split("\n")[:2]
        assert stdout.channel.recv_exit_status() == 0
    finally:
        client.close()
    assert user == ssh_server.user
    assert connection.split()[2:] == [address, str(ssh_server.port)]  # reached that very "host"


def test_sessions_start_without_the_current_users_dotfiles(ssh_server: SshServer):
    """A broker-side cost measured through the harness is the product's: bash started by sshd reads
    ``~/.bashrc``, and a developer's (pyenv init here) cost ~0.2 s a session and made ``python3`` a
    shim script; sessions get the server's own empty HOME and a ``python3`` that is a real binary."""
    client = _strict_client([ssh_server.known_hosts_line("127.0.0.2")])
    try:
        _connect(client, ssh_server, "127.0.0.2")
        command = 'echo "$HOME"; head -c 4 "$(command -v python3)" | od -An -c | tr -d " "'
        _, stdout, _ = client.exec_command(command, timeout=10)
        home, python_head = stdout.read().decode().split("\n")[:2]
        assert stdout.channel.recv_exit_status() == 0
    finally:
        client.close()
    assert home == str(ssh_server.session_home)
    assert sorted(p.name for p in ssh_server.session_home.iterdir()) == []
    assert python_head == "177ELF", "python3 on a session's PATH is the interpreter, not a wrapper script"


def test_known_hosts_file_and_sftp(ssh_server: SshServer, tmp_path):
    client = paramiko.SSHClient()
    client.load_host_keys(str(ssh_server.known_hosts_path))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    target = tmp_path / "copied.txt"
    try:
        _connect(client, ssh_server, "127.0.0.4")
        with client.open_sftp() as sftp, sftp.open(str(target), "w") as remote:
            remote.write("over sftp")
    finally:
        client.close()
    assert target.read_text() == "over sftp"


def test_wrong_or_unknown_host_key_is_rejected(ssh_server: SshServer):
    impostor = SshServer(["127.0.0.2"])  # never started: only its freshly generated host key is used
    try:
        wrong_line = f"[127.0.0.2]:{ssh_server.port} {impostor.host_public_key}"
    finally:
        impostor.close()

    client = _strict_client([wrong_line])
    with pytest.raises(paramiko.BadHostKeyException):
        _connect(client, ssh_server, "127.0.0.2")
    client.close()

    client = _strict_client([ssh_server.known_hosts_line("127.0.0.3")])  # known on .3, not on .2
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        _connect(client, ssh_server, "127.0.0.2")
    client.close()


def test_airflow_ssh_hook_connects_through_env_connection(ssh_server: SshServer, monkeypatch):
    from airflow.providers.ssh.hooks.ssh import SSHHook

    for name, value in ssh_server.airflow_connection("127.0.0.3", "kafka_broker_3").items():
        monkeypatch.setenv(name, value)
    hook = SSHHook(ssh_conn_id="kafka_broker_3", conn_retry_attempts=1)
    with hook.get_conn() as client:
        _, stdout, _ = client.exec_command("echo $SSH_CONNECTION", timeout=10)
        assert stdout.read().decode().split()[2] == "127.0.0.3"


def test_airflow_ssh_hook_rejects_a_wrong_host_key(ssh_server: SshServer, monkeypatch):
    from airflow.providers.ssh.hooks.ssh import SSHHook

    impostor = SshServer(["127.0.0.3"])
    try:
        fields = ssh_server.airflow_connection_fields("127.0.0.3", conn_timeout=5)
        fields["extra"]["host_key"] = impostor.host_public_key
    finally:
        impostor.close()
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_BROKER_IMPOSTOR", json.dumps(fields))
    hook = SSHHook(ssh_conn_id="kafka_broker_impostor", conn_retry_attempts=1)
    with pytest.raises(paramiko.BadHostKeyException):
        hook.get_conn()


def test_sshd_stop_ends_listener_and_open_sessions():
    server = SshServer(["127.0.0.5", "127.0.0.6"]).start()
    client = _strict_client([server.known_hosts_line("127.0.0.6")])
    try:
        _connect(client, server, "127.0.0.6")
        client.exec_command("sleep 60")
        pid, port = server.pid, server.port
        assert pid is not None and _pid_alive(pid)
        sessions = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_child_of(int(p), pid)]
        assert sessions, "an open SSH session has its own sshd process"

        server.stop()

        assert not server.is_running and server.pid is None
        assert not _pid_alive(pid)
        assert not [p for p in sessions if _pid_alive(p)]
        assert _refuses_connections("127.0.0.5", port) and _refuses_connections("127.0.0.6", port)
    finally:
        client.close()
        server.close()
    assert not server.work_dir.exists()


def _is_child_of(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1]) == parent
    except (FileNotFoundError, ProcessLookupError):
        return False
