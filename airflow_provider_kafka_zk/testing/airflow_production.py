"""Airflow deployed the way a platform team deploys it, for tests: the provider's wheel in a fresh
virtualenv, a PostgreSQL metadata database, LocalExecutor, and ``airflow api-server``, ``airflow
scheduler``, ``airflow dag-processor`` and ``airflow triggerer`` as separate processes.

Why: ``airflow dags test`` runs every task in one process, gives the run a logical date and waits
for deferred tasks in-process (no triggerer). Runs created by ``airflow dags trigger`` or the REST
API have no logical date, deferrable tasks go to the triggerer and retries go through the scheduler:
only this shape shows whether a DAG works when the scheduler runs it.

::

    with ProductionVenv.build(work) as venv, PostgresServer(work / "pg") as pg:
        with AirflowProduction(venv, pg, work / "home", dags_folder=..., extra_env=...) as airflow:
            airflow.add_connection("kafka_zk_prod", {...})   # airflow connections add: the metadata DB
            run_id = airflow.trigger_rest("kafka_zk_pre_restart_check", {"cluster": "prod", "broker": 2})
            airflow.wait_for_run("kafka_zk_pre_restart_check", run_id)

Every server binds 127.0.0.1 on a free port and is stopped by PID (SIGTERM, then SIGKILL); each
gets the parent-death signal where it can, so nothing outlives the test run. PostgreSQL refuses to
run as root: as root, its cluster belongs to Debian's ``postgres`` user (``setpriv``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ._process import ServerProcess, free_port, spawn_logged, terminate, terminate_at_exit

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "AirflowProduction",
    "AirflowRunFailed",
    "ApiClient",
    "ApprovalRest",
    "LocalApiServer",
    "PostgresServer",
    "ProductionVenv",
    "TriggerFormBrowser",
    "build_wheel",
    "triggered_run_id",
]

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
"""The Airflow 3 services of a production deployment, each its own process."""
ADMIN = "admin"
_IGNORED = shutil.ignore_patterns(
    ".git", ".venv", ".demo", ".airflow", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*_cache"
)


class AirflowRunFailed(AssertionError):
    """A DAG run ended in another state than the one waited for (its task states in the message)."""


# ---------------------------------------------------------------------------------------------
# The provider installed from its wheel in a virtualenv of its own
# ---------------------------------------------------------------------------------------------


def build_wheel(out_dir: Path, source: Path = REPO) -> Path:
    """The wheel of the checkout at ``source``, built from a clean copy (the build leaves ``build/``
    and ``*.egg-info`` behind in the tree it runs in)."""
    copy = Path(tempfile.mkdtemp(prefix="kafka-zk-wheel-src-"))
    try:
        shutil.copytree(source, copy / "src", ignore=_IGNORED)
        out_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(copy / "src"), "-w", str(out_dir)],
            check=True,
            capture_output=True,
            timeout=900,
        )
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    (wheel,) = out_dir.glob("airflow_provider_kafka_zk-*.whl")
    return wheel


@dataclass
class ProductionVenv:
    """A virtualenv with the provider installed from its wheel, as README "Installing" says:
    ``pip install '<wheel>[spark]' apache-airflow-providers-postgres -c constraints.txt``.

    :param path: the virtualenv.
    :param seconds: how long building it took (wheel, venv, pip), for the report.
    """

    path: Path
    seconds: float = 0.0
    wheel: Path | None = None

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @classmethod
    def build(cls, work: Path, *, constraints: Path = REPO / "constraints.txt") -> ProductionVenv:
        """Build the wheel from this checkout, a fresh venv, and install the wheel with the ``spark``
        extra and the PostgreSQL provider under the project's constraints (one pip command)."""
        started = time.monotonic()
        wheel = build_wheel(work / "dist")
        venv = work / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300
        )
        done = subprocess.run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "-q",
                "--disable-pip-version-check",
                f"{wheel}[spark]",
                "apache-airflow-providers-postgres",
                "-c",
                str(constraints),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"pip install of {wheel.name} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        return cls(venv, time.monotonic() - started, wheel)

    def run(
        self, *args: str, env: Mapping[str, str], cwd: Path | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """A program of this venv (``airflow``, ``python`` ...) with ``env``, in ``cwd`` (never a
        checkout: ``python -c`` would import the package from there instead of the wheel)."""
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            env=dict(env),
            cwd=cwd or tempfile.gettempdir(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


# ---------------------------------------------------------------------------------------------
# PostgreSQL from Debian's package, a private cluster on loopback
# ---------------------------------------------------------------------------------------------


def postgres_bindir() -> Path:
    """Debian's ``/usr/lib/postgresql/<major>/bin`` (the newest), else ``pg_config --bindir``."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip())
        if (bindir / "postgres").is_file():
            return bindir
    raise FileNotFoundError("PostgreSQL is not installed: apt-get install postgresql (scripts/setup.sh does)")


class PostgresServer(ServerProcess):
    """A private PostgreSQL cluster (``initdb``) on 127.0.0.1 at a free port, with a database and a
    password-authenticated owner for Airflow; ``postgres`` runs as a child of this process.

    :param data_dir: where the cluster goes (default: a new temporary directory, deleted on close).
    :param database: the database created for Airflow.
    :param user: its owner (the cluster's superuser).
    """

    def __init__(
        self, data_dir: Path | None = None, *, database: str = "airflow", user: str = "airflow"
    ) -> None:
        self._owner_pid = os.getpid()
        self._cleanup_dir = None
        if data_dir is None:
            data_dir = Path(tempfile.mkdtemp(prefix="kafka-zk-postgres-"))
            self._cleanup_dir = weakref.finalize(self, shutil.rmtree, str(data_dir), ignore_errors=True)
        self.root = Path(data_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", database) or not re.fullmatch(r"[a-z_][a-z0-9_]*", user):
            raise ValueError(f"plain lower-case names only, not {database!r} / {user!r}")
        self.database = database  # checked above: safe to put in SQL text
        self.user = user
        self.password = secrets.token_urlsafe(16)
        self.port = free_port("127.0.0.1")
        self._process: subprocess.Popen[bytes] | None = None
        self._stop_finalizer: weakref.finalize | None = None
        self._bindir = postgres_bindir()

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL Airflow's ``[database] sql_alchemy_conn`` takes (psycopg2)."""
        password = urllib.parse.quote(self.password, safe="")
        return f"postgresql+psycopg2://{self.user}:{password}@127.0.0.1:{self.port}/{self.database}"

    def _as_owner(self) -> list[str]:
        """``setpriv`` to Debian's ``postgres`` user when we are root (PostgreSQL refuses root)."""
        prefix = [shutil.which("setpriv") or "setpriv"]
        if threading_is_main():
            prefix += ["--pdeathsig", "KILL"]
        if os.geteuid() == 0:
            prefix += ["--reuid=postgres", "--regid=postgres", "--init-groups"]
        return [*prefix, "--"]

    def _chown(self, *paths: Path) -> None:
        if os.geteuid() != 0:
            return
        owner = pwd.getpwnam("postgres")
        for path in paths:
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def start(self) -> Self:
        if self.is_running:
            return self
        data = self.root / "data"
        self._chown(self.root)
        os.chmod(self.root, 0o700)
        if not (data / "PG_VERSION").exists():
            password_file = self.root / "pwfile"
            password_file.write_text(self.password + "\n")
            self._chown(password_file)
            done = subprocess.run(
                [
                    *self._as_owner(),
                    str(self._bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    self.user,
                    "--pwfile",
                    str(password_file),
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            password_file.unlink()
            if done.returncode != 0:
                raise RuntimeError(f"initdb failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        if not self.log_path.exists():
            self.log_path.touch()
        self._chown(self.log_path)
        command = [
            *self._as_owner(),
            str(self._bindir / "postgres"),
            "-D",
            str(data),
            "-c",
            "listen_addresses=127.0.0.1",
            "-p",
            str(self.port),
            "-c",
            f"unix_socket_directories={self.root}",
            "-c",
            "fsync=off",  # throw-away data
            "-c",
            "max_connections=200",  # LocalExecutor workers, the api-server, scheduler, triggerer
        ]
        self._process = spawn_logged(
            command, self.log_path, f"PostgreSQL on 127.0.0.1:{self.port}", self.root
        )
        self._stop_finalizer = terminate_at_exit(self, self._process, self._owner_pid, 30)
        deadline = time.monotonic() + 60
        while True:
            self._raise_if_exited(RuntimeError, "PostgreSQL", f"127.0.0.1:{self.port}")
            ready = subprocess.run(
                [str(self._bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"], timeout=30
            )
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start within 60 s:\n{self.log_tail()}")
            time.sleep(0.2)
        self._create_database()
        return self

    def _create_database(self) -> None:
        psql = [
            str(self._bindir / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            "postgres",
            "-tAc",
        ]
        env = {**os.environ, "PGPASSWORD": self.password}
        exists = subprocess.run(
            [*psql, f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'"],  # noqa: S608 (checked name)
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if exists.stdout.strip() != "1":
            subprocess.run(
                [*psql, f'CREATE DATABASE "{self.database}"'], env=env, check=True, capture_output=True
            )

    def stop(self) -> None:
        """Fast shutdown (SIGINT: disconnect clients, no wait for them), then as every server."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=30)
        super().stop()


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------------------------------------
# Airflow's services
# ---------------------------------------------------------------------------------------------


class ApprovalRest:
    """What a person does with a waiting approval, over Airflow's REST API (``GET .../hitlDetails``,
    ``PATCH .../taskInstances/{task}/{map_index}/hitlDetails``). Mixed into the deployments, which
    give ``http(method, path, body, *, user=...)``."""

    def http(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, bytes]:
        raise NotImplementedError

    def waiting_approvals(self, dag_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """The HITL requests of ``dag_id`` (one run, or any) that nobody answered yet."""
        run = urllib.parse.quote(run_id, safe="") if run_id else "~"
        status, raw = self.http(
            "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run}/hitlDetails?response_received=false"
        )
        if status != 200:
            raise AssertionError(f"hitlDetails of {dag_id} answered {status}: {raw[:2000]!r}")
        return [d for d in json.loads(raw)["hitl_details"] if d["task_instance"]["state"] == "awaiting_input"]

    def wait_for_approval_request(
        self,
        dag_id: str,
        run_id: str | None = None,
        *,
        timeout: float = 900,
        alive: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """The first waiting approval of the run (or of the DAG): the HITL detail (subject, body,
        assigned users, the task instance). ``alive()`` false stops the wait (the run ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.waiting_approvals(dag_id, run_id)
            if found:
                return found[0]
            if alive is not None and not alive():
                raise AssertionError(f"{dag_id} {run_id or ''} ended without asking for an approval")
            time.sleep(1)
        raise AssertionError(f"{dag_id} {run_id or ''}: no approval request within {timeout:.0f} s")

    def respond(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        option: str,
        comment: str | None = None,
        *,
        user: str | None = None,
        expect: Iterable[int] = (200,),
    ) -> dict[str, Any]:
        """Approve or reject as ``user`` would (``option``: "Approve" / "Reject"); the response."""
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/"
            f"{task_id}/-1/hitlDetails"
        )
        body = {"chosen_options": [option], "params_input": {"comment": comment} if comment else {}}
        status, raw = self.http("PATCH", path, body, user=user)
        if status not in tuple(expect):
            raise AssertionError(f"PATCH {path} as {user or ADMIN} answered {status}: {raw[:2000]!r}")
        return json.loads(raw) if raw else {}


class ApiClient(ApprovalRest):
    """Airflow's REST API at ``base_url`` with the simple auth manager's users (name -> password), as a
    person or a script uses it (a token per user from ``POST /auth/token``).

    :param base_url: the api-server, e.g. ``http://127.0.0.1:8080``.
    :param passwords: user name -> password.
    """

    def __init__(self, base_url: str, passwords: Mapping[str, str]) -> None:
        self.base_url = base_url.rstrip("/")
        self.passwords = dict(passwords)
        self._tokens: dict[str, str] = {}

    def token(self, user: str = ADMIN) -> str:
        if user not in self._tokens:
            status, body = self.http(
                "POST", "/auth/token", {"username": user, "password": self.passwords[user]}, auth=False
            )
            if status not in (200, 201):
                raise AssertionError(f"no token for {user}: {status} {body!r}")
            self._tokens[user] = json.loads(body)["access_token"]
        return self._tokens[user]

    def http(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        auth: bool = True,
        timeout: float = 120,
        user: str | None = None,
    ) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token(user or ADMIN)}"
        where = urllib.parse.urlsplit(self.base_url)
        connection = http.client.HTTPConnection(
            where.hostname or "127.0.0.1", where.port or 80, timeout=timeout
        )
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


class LocalApiServer(ServerProcess, ApiClient):
    """``airflow api-server`` alone, on loopback, for an Airflow home whose runs come from ``airflow
    dags test`` (SQLite shared with it): what lets a person -- the demo, a test -- answer a
    human-in-the-loop task of such a run over REST (``dags test`` keeps the run alive until a response
    recorded from outside flips the task back to scheduled, Airflow 3.3.2 ``DAG.test``).

    :param env: the Airflow environment of the runs (``AIRFLOW_HOME``, connections ...).
    :param users: user name -> role (simple auth manager); each gets a generated password.
    """

    def __init__(self, env: Mapping[str, str], *, users: Mapping[str, str] | None = None) -> None:
        self._owner_pid = os.getpid()
        self._cleanup_dir = None
        self._process = None
        self._stop_finalizer = None
        self.home = Path(env["AIRFLOW_HOME"])
        self.users = dict(users or {ADMIN: "admin"})
        self.port = free_port("127.0.0.1")
        ApiClient.__init__(
            self, f"http://127.0.0.1:{self.port}", {u: secrets.token_urlsafe(12) for u in self.users}
        )
        self.env = {
            **env,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in self.users.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "api-passwords.json"),
        }

    @property
    def log_path(self) -> Path:
        return self.home / "api-server.log"

    def start(self) -> Self:
        if self.is_running:
            return self
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "api-passwords.json").write_text(json.dumps(self.passwords))
        airflow = Path(sys.executable).parent / "airflow"
        self._process = _spawn_with_env(
            [*_pdeathsig(), str(airflow), "api-server"], self.log_path, self.env, self.home
        )
        self._stop_finalizer = terminate_at_exit(self, self._process, self._owner_pid, 30)
        deadline = time.monotonic() + 300
        while True:
            self._raise_if_exited(RuntimeError, "airflow api-server", self.base_url)
            with contextlib.suppress(OSError):
                if self.http("GET", "/api/v2/monitor/health", auth=False, timeout=10)[0] == 200:
                    return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"airflow api-server did not answer within 300 s:\n{self.log_tail()}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process, self._owner_pid, 30, descendants=True)
        super().stop()


class DagsTestRun:
    """``airflow dags test <dag> [-c conf]`` in the background, its output in a file: a run that
    waits for a person (answered over a :class:`LocalApiServer`) while the test watches the cluster.

    :param dag_id: the DAG.
    :param conf: the run's conf (None: the DAG's defaults).
    :param log: where the run's output goes.
    :param env: its environment (default: this process's).
    """

    def __init__(
        self, dag_id: str, conf: Mapping[str, Any] | None, log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.log = log
        self._out = log.open("w")
        command = [str(Path(sys.executable).parent / "airflow"), "dags", "test", dag_id]
        if conf is not None:
            command += ["-c", json.dumps(dict(conf))]
        self.process = subprocess.Popen(
            command, env=dict(env or os.environ), stdout=self._out, stderr=subprocess.STDOUT
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        """The exit code and the output, once the run ended (killed after ``timeout`` s)."""
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._out.close()
        return code, self.log.read_text(errors="replace")


@dataclass
class _Service:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path


@dataclass
class AirflowProduction(ApiClient):
    """api-server, scheduler, dag-processor and triggerer of one Airflow home, on PostgreSQL, with
    LocalExecutor and the simple auth manager (one admin whose password this object writes).

    :param venv: the virtualenv the services run from (the provider's installed wheel).
    :param postgres: the metadata database's server.
    :param home: the Airflow home (created).
    :param dags_folder: the DAGs folder.
    :param extra_env: more environment (cluster file, Spark's variables ...); never ``PYTHONPATH``
        to a checkout: the wheel is what runs.
    :param parallelism: LocalExecutor's worker processes (the machine has 2 cores).
    :param connections: conn id -> fields, stored with ``airflow connections add`` after ``db
        migrate`` and before the first parse (a DAG file that checks its connections at parse time,
        as the daily one does for its alerts, parses clean at once).
    :param niceness: service -> ``nice`` increment (e.g. ``{"triggerer": -10}``: on a shared 2-core
        machine, its event loop's watchdog then measures the triggerer, not the other services).
    """

    venv: ProductionVenv
    postgres: PostgresServer
    home: Path
    dags_folder: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    parallelism: int = 8
    users: Mapping[str, str] = field(default_factory=dict)
    """More users of the simple auth manager than the admin: name -> role (each gets a password)."""
    connections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    niceness: Mapping[str, int] = field(default_factory=dict)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    port: int = field(default_factory=lambda: free_port("127.0.0.1"))
    services: dict[str, _Service] = field(default_factory=dict)
    started_s: dict[str, float] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment of every service and CLI call (the production settings)."""
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH", "KAFKA_ZK_"))
        }
        env.update(
            {
                "PATH": f"{self.venv.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                    [f"{ADMIN}:admin", *(f"{u}:{r}" for u, r in self.users.items())]
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                **self.extra_env,
            }
        )
        return env

    @property
    def _jwt_secret(self) -> str:
        path = self.home / "jwt_secret"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_urlsafe(32))
        return path.read_text()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        """``airflow db migrate``, ``airflow dags reserialize``, then the four services; returns when
        the API reports the scheduler, dag-processor and triggerer healthy."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.passwords = {ADMIN: self.password, **{u: secrets.token_urlsafe(12) for u in self.users}}
        (self.home / "passwords.json").write_text(json.dumps(self.passwords))
        started = time.monotonic()
        self.cli("db", "migrate", timeout=900)
        self.started_s["db migrate"] = time.monotonic() - started
        started = time.monotonic()
        for conn_id, fields in self.connections.items():
            self.add_connection(conn_id, fields)
        self.started_s[f"connections add ({len(self.connections)})"] = time.monotonic() - started
        started = time.monotonic()
        self.cli("dags", "reserialize", timeout=900)  # DAGs listed before the dag-processor's first loop
        self.started_s["dags reserialize"] = time.monotonic() - started
        started = time.monotonic()
        for name in SERVICES:
            nice = ["nice", "-n", str(self.niceness[name])] if name in self.niceness else []
            command = [*_pdeathsig(), *nice, str(self.venv.bin / "airflow"), name]
            if name in ("scheduler", "triggerer"):
                # Airflow's log server binds every interface on a fixed port (8793/8794, no host
                # option); one host's task logs are read from disk by the api-server anyway
                command.append("--skip-serve-logs")
            log_path = self.home / f"{name}.log"
            process = _spawn_with_env(command, log_path, self.env, self.home)
            self.services[name] = _Service(name, process, log_path)
        self._wait_until_healthy()
        self.started_s["services healthy"] = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Every service by PID (SIGTERM, SIGKILL after 30 s), the task processes below them too."""
        for name in reversed(SERVICES):
            service = self.services.pop(name, None)
            if service is not None:
                terminate(service.process, os.getpid(), 30, descendants=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _wait_until_healthy(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for service in self.services.values():
                if service.process.poll() is not None:
                    raise RuntimeError(
                        f"airflow {service.name} exited with {service.process.returncode}:\n"
                        + tail(service.log_path)
                    )
            try:
                status, body = self.http("GET", "/api/v2/monitor/health", auth=False, timeout=10)
                if status == 200:
                    last = json.loads(body)
                    if all(
                        (last.get(part) or {}).get("status") == "healthy"
                        for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
                    ):
                        return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"Airflow services not healthy within {timeout:.0f} s: {last}")

    def services_log(self, name: str) -> str:
        """The whole log of one service (``triggerer``, ``scheduler`` ...)."""
        return (self.home / f"{name}.log").read_text(errors="replace")

    # ------------------------------------------------------------------ the CLI
    def cli(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``airflow <args>`` from the venv with the services' environment."""
        done = self.venv.run("airflow", *args, env=self.env, cwd=self.home, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(
                f"airflow {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        return done

    def add_connection(self, conn_id: str, fields: Mapping[str, Any]) -> None:
        """``airflow connections add <id> --conn-json ...``: stored in the metadata database."""
        self.cli("connections", "add", conn_id, "--conn-json", json.dumps(dict(fields)))

    def trigger_cli(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        """``airflow dags trigger <dag> --conf ...`` (no logical date); the new run's id."""
        done = self.cli("dags", "trigger", dag_id, "--conf", json.dumps(dict(conf)), "--output", "json")
        return triggered_run_id(done.stdout)

    # ------------------------------------------------------------------ the REST API
    def api(self, method: str, path: str, body: Any = None, *, expect: Iterable[int] = (200,)) -> Any:
        status, raw = self.http(method, path, body)
        if status not in tuple(expect):
            raise AssertionError(f"{method} {path} answered {status}: {raw[:2000]!r}")
        return json.loads(raw) if raw else None

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def pause(self, dag_id: str) -> None:
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})

    def runs(self, dag_id: str, run_type: str | None = None) -> list[dict[str, Any]]:
        """The DAG's runs (of ``run_type``: ``scheduled``, ``manual`` ...), oldest first."""
        found = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=run_after")["dag_runs"]
        return [r for r in found if run_type is None or r["run_type"] == run_type]

    def trigger_rest(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        """``POST /api/v2/dags/{id}/dagRuns`` with ``logical_date: null`` (Airflow 3's default)."""
        run = self.api(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"logical_date": None, "conf": dict(conf)},
            expect=(200,),
        )
        assert run["logical_date"] is None, run
        return str(run["dag_run_id"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances?limit=1000"
        return self.api("GET", path)["task_instances"]

    def tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
        """The task instance's tries (its history and the current one), oldest first."""
        run = urllib.parse.quote(run_id, safe="")
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}"
        path += f"/{map_index}/tries" if map_index >= 0 else "/tries"
        return sorted(self.api("GET", path)["task_instances"], key=lambda t: t["try_number"])

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        run = urllib.parse.quote(run_id, safe="")
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}/logs/{try_number}?full_content=true"
        )
        if map_index >= 0:
            path += f"&map_index={map_index}"
        status, raw = self.http("GET", path)
        if status != 200:
            return f"(log of {task_id} try {try_number}: HTTP {status})"
        body = json.loads(raw)
        content = body.get("content")
        if isinstance(content, list):
            return "\n".join(
                str(line.get("event", line)) if isinstance(line, dict) else str(line) for line in content
            )
        return str(content)

    def wait_for_run(
        self, dag_id: str, run_id: str, *, state: str = "success", timeout: float = 900, watch: Any = None
    ) -> dict[str, Any]:
        """Poll the run until it ends; :class:`AirflowRunFailed` (with every task's state and the
        failed tasks' logs) unless it ended in ``state``. ``watch(task_instances)`` sees each poll."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(dag_id, run_id)
            if watch is not None:
                watch(self.task_instances(dag_id, run_id))
            if run["state"] in ("success", "failed"):
                break
            if time.monotonic() > deadline:
                raise AirflowRunFailed(
                    f"{dag_id} {run_id} still {run['state']} after {timeout:.0f} s: {self.describe(dag_id, run_id)}"
                )
            time.sleep(1)
        if run["state"] != state:
            raise AirflowRunFailed(
                f"{dag_id} {run_id} ended {run['state']}: {self.describe(dag_id, run_id, logs=True)}"
            )
        return run

    def describe(self, dag_id: str, run_id: str, *, logs: bool = False) -> str:
        """Every task's state; with ``logs``, the end of each failed try's log."""
        lines = []
        for ti in sorted(self.task_instances(dag_id, run_id), key=lambda t: (t["task_id"], t["map_index"])):
            lines.append(f"  {ti['task_id']}[{ti['map_index']}] {ti['state']} try {ti['try_number']}")
            if logs and ti["state"] in ("failed", "upstream_failed", "up_for_retry"):
                for t in range(1, (ti["try_number"] or 0) + 1):
                    text = self.task_log(dag_id, run_id, ti["task_id"], t, ti["map_index"])
                    lines.append("    | " + "\n    | ".join(text.splitlines()[-40:]))
        return "\n" + "\n".join(lines)


def triggered_run_id(stdout: str) -> str:
    """The run id in ``airflow dags trigger --output json``'s output (warnings may come before it)."""
    runs = json.loads(stdout[stdout.index("[{") :])
    return str(runs[0]["dag_run_id"])


def _pdeathsig() -> list[str]:
    setpriv = shutil.which("setpriv")
    if setpriv and threading_is_main():
        return [setpriv, "--pdeathsig", "KILL", "--"]
    return []


def _spawn_with_env(
    command: list[str], log_path: Path, env: Mapping[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """Like ``spawn_logged``, with an environment of its own."""
    with log_path.open("ab") as log:
        log.write(f"--- starting {' '.join(command[-2:])} at {time.ctime()}\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )


def tail(path: Path, lines: int = 80) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# The trigger form in a real browser
# ---------------------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class TriggerFormBrowser:
    """Headless Debian Chromium (Selenium, Debian's chromedriver: Selenium Manager never runs),
    logged in to the deployment's UI as its admin, filling in DAGs' trigger forms as a person does.

    :param airflow: the deployment whose UI is used.
    :param wait_s: how long any one step may take (the UI is slow while runs use both cores).
    """

    def __init__(self, airflow: AirflowProduction, *, wait_s: float = 180) -> None:
        self.airflow = airflow
        self.wait_s = wait_s
        self.driver: Any = None

    def __enter__(self) -> Self:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        for binary, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
            if not Path(binary).is_file():
                raise FileNotFoundError(
                    f"{binary} is missing: apt-get install {package} (scripts/setup.sh does)"
                )
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in (
            "--headless=new",
            "--no-sandbox",  # root in a container
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--window-size=1400,2400",
            "--lang=en-US",
        ):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
        self.driver.set_page_load_timeout(self.wait_s)
        try:
            self._login()
        except BaseException:
            self.driver.quit()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.driver is not None:
            self.driver.quit()

    def _wait(self, timeout: float | None = None) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout or self.wait_s, poll_frequency=0.2)

    def _login(self) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        self.driver.get(self.airflow.base_url + "/")
        self._wait().until(ec.visibility_of_element_located((By.NAME, "username"))).send_keys(ADMIN)
        self.driver.find_element(By.NAME, "password").send_keys(self.airflow.password)
        self.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self._wait().until(lambda d: "/auth/login" not in d.current_url)

    def open_form(self, dag_id: str) -> Any:
        """The DAG's page, its "Trigger" button, and the dialog with the form (returned)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        self.driver.get(f"{self.airflow.base_url}/dags/{dag_id}")
        self._wait().until(
            ec.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"))
        ).click()
        return self._wait().until(
            ec.visibility_of_element_located(
                (By.XPATH, f"//*[@role='dialog'][.//h2[contains(., '{dag_id}')]]")
            )
        )

    def field(self, dialog: Any, key: str) -> Any:
        """The form field (label, input, help text) of Param ``key``."""
        from selenium.webdriver.common.by import By

        element = (
            f"@name='element_{key}' or @id='element_{key}' or starts-with(@id,'number-input:element_{key}:')"
        )
        found = dialog.find_elements(
            By.XPATH, f".//*[@data-scope='field' and @data-part='root'][.//*[{element}]]"
        )
        if not found:
            raise AssertionError(f"the form has no field {key}")
        return found[-1]

    def fill(self, dialog: Any, key: str, value: Any) -> None:
        """Type ``value`` into Param ``key``'s field the way its widget takes it."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        field = self.field(dialog, key)
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
        selectors = (
            "input[role=combobox]",
            "input[role=spinbutton]",
            "[aria-roledescription=editor]",  # the JSON editor loads after the field, slowly under load
            f"textarea[name=element_{key}]",
            f"input[type=checkbox][name=element_{key}]",
        )

        def widgets(_driver: Any) -> list[list[Any]] | None:
            found = [field.find_elements(By.CSS_SELECTOR, selector) for selector in selectors]
            return found if any(found) else None

        try:
            combobox, spin, editor, textarea, checkbox = self._wait().until(widgets)
        except TimeoutException:
            raise AssertionError(f"no widget for {key} in the form") from None
        if combobox:
            combobox[0].click()
            combobox[0].send_keys(str(value))
            option = f"//*[@role='option'][normalize-space()='{value}']"
            self._wait().until(lambda d: d.find_elements(By.XPATH, option))
            self.driver.find_element(By.XPATH, option).click()
            hidden = field.find_element(By.CSS_SELECTOR, f"input[name=element_{key}]")
            self._wait().until(lambda d: hidden.get_attribute("value") == str(value))
        elif spin:
            spin[0].send_keys(Keys.CONTROL, "a")
            spin[0].send_keys(Keys.DELETE)
            spin[0].send_keys(str(value), Keys.TAB)
        elif editor:
            from selenium.webdriver.common.action_chains import ActionChains

            surface = field.find_elements(By.CSS_SELECTOR, ".view-lines") or editor
            ActionChains(self.driver).move_to_element(surface[0]).click().perform()
            text = json.dumps(value, separators=(",", ":"))
            actions = ActionChains(self.driver)
            actions.key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).send_keys(Keys.DELETE)
            # the editor closes brackets itself as they are opened (as it does for a person)
            actions.send_keys(text.rstrip("]}")).perform()
            if _editor_text(field) != text:
                ActionChains(self.driver).send_keys(text[len(text.rstrip("]}")) :]).perform()
            self._wait(30).until(lambda d: _editor_text(field) == text)
        elif textarea:
            textarea[0].clear()
            textarea[0].send_keys("\n".join(str(v) for v in value), Keys.TAB)
        elif checkbox[0].is_selected() != bool(value):
            field.find_element(
                By.XPATH, ".//label[.//input[@type='checkbox']] | .//*[@data-part='control']"
            ).click()

    def approval_page(
        self,
        dag_id: str,
        run_id: str,
        must_show: Iterable[str],
        screenshot: Path | None = None,
        task_id: str = "approve",
    ) -> str:
        """The task's Required Actions page (where a person approves or rejects), once it shows every
        text of ``must_show``; its text. ``screenshot``: save one there."""
        from selenium.webdriver.common.by import By

        wanted = list(must_show)
        run = urllib.parse.quote(run_id, safe="")
        self.driver.get(f"{self.airflow.base_url}/dags/{dag_id}/runs/{run}/tasks/{task_id}/required_actions")
        try:
            self._wait().until(lambda d: all(w in d.find_element(By.TAG_NAME, "body").text for w in wanted))
        except Exception:
            path = Path(tempfile.mkdtemp(prefix="kafka-zk-approval-page-")) / "page.png"
            self.driver.save_screenshot(str(path))
            raise AssertionError(
                f"the approval page of {dag_id} {run_id} does not show {wanted} (screenshot {path})"
            ) from None
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            assert self.driver.save_screenshot(str(screenshot))
        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        """Open the form, fill in ``conf``, name the run (Advanced Options -> Run ID), press Trigger;
        the run's id once the API shows it."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        dialog = self.open_form(dag_id)
        for key, value in conf.items():
            self.fill(dialog, key, value)
        run_id = f"browser__{dag_id}__{secrets.token_hex(4)}"
        advanced = dialog.find_element(By.XPATH, ".//button[contains(@id,'trigger:advancedOptions')]")
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", advanced)
        if advanced.get_attribute("aria-expanded") != "true":
            advanced.click()
        run_id_input = self._wait().until(lambda d: dialog.find_element(By.NAME, "dagRunId"))
        self._wait().until(ec.visibility_of(run_id_input))
        run_id_input.send_keys(run_id)
        submit = dialog.find_element(By.CSS_SELECTOR, "button[data-testid=trigger-dag-submit]")
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", submit)
        self._wait().until(lambda d: submit.is_enabled())
        submit.click()
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            status, _ = self.airflow.http("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if status == 200:
                return run_id
            time.sleep(0.5)
        path = Path(tempfile.mkdtemp(prefix="kafka-zk-trigger-form-")) / "form.png"
        self.driver.save_screenshot(str(path))
        raise AssertionError(f"the trigger form of {dag_id} made no run {run_id} (screenshot {path})")


def _editor_text(field: Any) -> str:
    """The text of a Monaco editor in ``field`` (its view lines), without white space."""
    from selenium.webdriver.common.by import By

    lines = field.find_elements(By.CSS_SELECTOR, ".view-lines")
    return "".join(lines[0].text.split()) if lines else ""
