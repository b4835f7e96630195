"""The provider's forms in the real Airflow 3 UI, driven by headless Debian Chromium (Selenium).

What runs: a real ZooKeeper with a simulated healthy cluster, and ``airflow api-server`` (it serves
the React UI and the REST API; ``airflow standalone`` adds a scheduler, a DAG processor and a
triggerer, which forms do not need: ``airflow dags reserialize`` puts the DAGs in the DB) on
127.0.0.1 at a free port, in its own Airflow home, with the simple auth manager and one admin user
whose password the test writes, and ``[core] test_connection = Enabled`` (Airflow 3 disables it by
default). The server is stopped by PID at the end of the module.

Checked on the rendered page, as a user sees it (screenshots go to ``docs/screenshots/``):

* the "Kafka ZooKeeper" connection form: ZooKeeper hosts and the Kafka chroot filled in, the port
  left empty as its placeholder suggests, saved, then "Test" (Airflow 3.3 tests a saved connection
  from the Connections list; the form itself has no Test button): success with the cluster id; a
  wrong chroot shows the hook's own message;
* the trigger form of ``kafka_zk_pre_maintenance_drain``: every Param has a title, a description and
  a unit where it is a quantity.

Why "Test" fails with "Bad Request" when the port is left empty, on Airflow <= 3.3.2: the UI's Test
button posts ``port: Number(connection.port)``, i.e. ``0`` for a stored NULL port, and the API's
check that the tested endpoint is still the stored one (``_same_endpoint``) treats ``""`` and
``None`` as unset but not ``0``; the masked password the UI sends is not "own credentials", so the
API answers 400 before the hook runs (fixed upstream in apache/airflow#73298). The empty-port cases
xfail for exactly that symptom while the installed Airflow has the bug, and pass once it is fixed.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_provider_kafka_zk.testing._process import free_port, pdeathsig_prefix, terminate
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, healthy_cluster

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# Screenshots go to the session's temporary directory; KAFKA_ZK_SCREENSHOTS=docs/screenshots refreshes
# the README's copies (a test run never changes tracked files otherwise).
SCREENSHOTS = Path(os.environ.get("KAFKA_ZK_SCREENSHOTS") or tempfile.mkdtemp(prefix="kafka-zk-screenshots-"))
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ADMIN = "admin"
DRAIN_DAG = "kafka_zk_pre_maintenance_drain"
WAIT_S = 180  # generous: two cores shared with other jobs; nothing here is a timed assertion
BAD_REQUEST_ISSUE = (
    "Airflow's Test button posts port 0 for a connection saved without a port and the API rejects "
    "it as 'a different endpoint' with 400 Bad Request (apache/airflow#73298, not in this Airflow)"
)


def _airflow_rejects_portless_test() -> bool:
    """True while the installed Airflow answers 400 to the UI's Test of a connection with no port."""
    try:
        from airflow.api_fastapi.core_api.routes.public.connections import _same_endpoint
    except ImportError:  # the check moved or went: assume fixed, the test then asserts success
        return False
    return not _same_endpoint(0, None)


# ----------------------------------------------------------------------------- services
@dataclass(frozen=True)
class AirflowUi:
    base_url: str
    password: str
    home: Path
    log_path: Path


@pytest.fixture(scope="module")
def healthy(zookeeper_server, tmp_path_factory) -> Iterator[DeployedCluster]:
    cluster = healthy_cluster(name="ui")
    with DeployedCluster(
        cluster,
        zookeeper_server.connect_string,
        zookeeper_server.new_chroot("/kafka_ui_"),
        tmp_path_factory.mktemp("ui-hosts"),
    ) as deployed:
        yield deployed


@pytest.fixture(scope="module")
def airflow_ui(airflow_home, tmp_path_factory) -> Iterator[AirflowUi]:
    """``airflow api-server`` on 127.0.0.1:<free port> in its own home with its own metadata DB."""
    # A fresh metadata DB, never a copy of the session's: other tests store connections there, and
    # a long list pages the new connection's row out of view.
    home = tmp_path_factory.mktemp("ui-airflow-home")
    password = secrets.token_urlsafe(16)
    passwords_file = home / "simple_auth_manager_passwords.json"
    passwords_file.write_text(json.dumps({ADMIN: password}))
    port = free_port("127.0.0.1")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__AUTH_MANAGER": (
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
        ),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
    }
    env.pop("KAFKA_ZK_CLUSTERS_FILE", None)  # the DAGs folder's example file: manual DAGs, no cluster
    airflow = str(VENV_BIN / "airflow")
    for command in (["db", "migrate"], ["dags", "reserialize"]):
        done = subprocess.run(
            [airflow, *command], env=env, cwd=home, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, (
            f"airflow {' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    log_path = home / "api-server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                *pdeathsig_prefix(),
                airflow,
                "api-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home,
            env=env,
            start_new_session=True,  # a Ctrl-C reaches pytest, whose teardown stops the server by PID
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(base_url, process, log_path)
        yield AirflowUi(base_url=base_url, password=password, home=home, log_path=log_path)
    finally:
        terminate(process, os.getpid(), grace=30, descendants=True)


def _wait_until_serving(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"airflow api-server exited with {process.returncode}:\n{_tail(log_path)}")
        try:
            if _http(base_url, "GET", "/api/v2/monitor/health", timeout=10)[0] == 200:
                return
        except OSError:  # refused while it starts, or a read timeout under load
            pass
        time.sleep(1)
    pytest.fail(f"airflow api-server did not answer within 600 s:\n{_tail(log_path)}")


def _http(
    base_url: str,
    method: str,
    path: str,
    body: dict | None = None,
    token: str | None = None,
    timeout: float = WAIT_S,
) -> tuple[int, bytes]:
    host, port = base_url.removeprefix("http://").split(":")
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ----------------------------------------------------------------------------- browser
@pytest.fixture(scope="module")
def browser(airflow_ui):
    """Headless Debian Chromium through Debian's chromedriver, logged in as the admin user.

    The driver's path is given, so Selenium Manager never runs (it would try to download one).
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for binary, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        assert Path(binary).is_file(), (
            f"{binary} is missing: apt-get install {package} (scripts/setup.sh does)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_S)
    try:
        _login(driver, airflow_ui)
        yield driver
    finally:
        driver.quit()


def _wait(driver, timeout: float = WAIT_S):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2)


def _login(driver, ui: AirflowUi) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(ui.base_url + "/")
    _wait(driver).until(ec.visibility_of_element_located((By.NAME, "username"))).send_keys(ADMIN)
    driver.find_element(By.NAME, "password").send_keys(ui.password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(driver).until(lambda d: "/auth/login" not in d.current_url)
    _wait(driver).until(ec.presence_of_element_located((By.XPATH, "//button[@aria-label='Admin']")))


# Records every toast the page shows (title and description), since toasts disappear after seconds.
_RECORD_TOASTS = """
window.__kzToasts = new Map();
if (!window.__kzToastObserver) {
  const record = () => document.querySelectorAll('[data-scope="toast"][data-part="root"]').forEach((el) => {
    const part = (name) => (el.querySelector(`[data-part="${name}"]`) || {}).textContent || "";
    if (part("title")) window.__kzToasts.set(el.id, {title: part("title"), description: part("description")});
  });
  window.__kzToastObserver = new MutationObserver(record);
  window.__kzToastObserver.observe(document.body, {childList: true, subtree: true, characterData: true});
}
"""


def _toasts(driver) -> list[dict[str, str]]:
    return driver.execute_script("return window.__kzToasts ? Array.from(window.__kzToasts.values()) : [];")


# ----------------------------------------------------------------------------- connection form
def _fill_connection_form(driver, ui: AirflowUi, conn_id: str, host: str, chroot: str, port: str) -> None:
    """Connections -> Add Connection -> "Kafka ZooKeeper", typed in as a person would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(ui.base_url + "/connections")
    _wait(driver).until(
        ec.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Add Connection']"))
    ).click()
    dialog = _wait(driver).until(
        ec.visibility_of_element_located(
            (By.XPATH, "//*[@role='dialog'][.//h2[normalize-space()='Add Connection']]")
        )
    )
    dialog.find_element(By.NAME, "connection_id").send_keys(conn_id)
    conn_type = dialog.find_element(By.CSS_SELECTOR, "input[role=combobox]")
    conn_type.send_keys("Kafka ZooKeeper")
    _wait(driver).until(
        ec.element_to_be_clickable(
            (By.XPATH, "//*[contains(@id,'-option-')][normalize-space()='Kafka ZooKeeper']")
        )
    ).click()
    host_input = _wait(driver).until(ec.visibility_of_element_located((By.NAME, "host")))
    assert (
        host_input.get_attribute("placeholder")
        == "zk1.example.com:2181,zk2.example.com:2181,zk3.example.com:2181"
    )
    port_input = dialog.find_element(By.NAME, "port")
    assert port_input.get_attribute("placeholder") == "2181"
    host_input.send_keys(host)
    if port:
        port_input.send_keys(port)
    dialog.find_element(By.XPATH, ".//button[normalize-space()='Extra Fields']").click()
    chroot_input = _wait(driver).until(ec.visibility_of_element_located((By.NAME, "element_chroot")))
    chroot_input.send_keys(chroot)
    chroot_input.send_keys(Keys.TAB)  # the extra fields are written to the extra JSON on blur
    dialog.find_element(
        By.XPATH, ".//button[normalize-space()='Standard Fields']"
    ).click()  # back, to be seen
    host_input = _wait(driver).until(ec.visibility_of_element_located((By.NAME, "host")))
    assert host_input.get_attribute("value") == host
    assert dialog.find_element(By.NAME, "port").get_attribute("value") == port


def _save_and_test(driver, conn_id: str, screenshot: str | None = None) -> dict[str, str]:
    """Save the open form, click the saved connection's Test button; the toast it shows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    if screenshot:
        _screenshot(driver, screenshot)
    _wait(driver).until(
        ec.element_to_be_clickable((By.XPATH, "//*[@role='dialog']//button[normalize-space()='Save']"))
    ).click()
    row = (By.XPATH, f"//tr[td[normalize-space()='{conn_id}']]")
    _wait(driver).until(ec.visibility_of_element_located(row))
    driver.execute_script(_RECORD_TOASTS)
    test_button = _wait(driver).until(
        ec.element_to_be_clickable((By.XPATH, f"{row[1]}//button[@aria-label='Test Connection']"))
    )
    test_button.click()
    toast = _wait(driver).until(
        lambda d: next((t for t in _toasts(d) if t["title"].startswith("Test Connection")), False)
    )
    return toast


def _port_cell(driver, conn_id: str) -> str:
    from selenium.webdriver.common.by import By

    headers = [th.text.strip() for th in driver.find_elements(By.XPATH, "//thead//th")]
    cells = driver.find_elements(By.XPATH, f"//tr[td[normalize-space()='{conn_id}']]/td")
    return cells[headers.index("Port")].text.strip()


def _screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    return path


def _xfail_if_airflow_rejects_portless_test(toast: dict[str, str], port: str) -> None:
    bad_request = {"title": "Test Connection Failed", "description": "Bad Request"}
    if not port and toast == bad_request and _airflow_rejects_portless_test():
        pytest.xfail(BAD_REQUEST_ISSUE)


# The port field as its placeholder invites (empty), and with the placeholder's value typed in.
PORTS = [pytest.param("2181", id="port-2181"), pytest.param("", id="port-left-empty")]


@pytest.mark.parametrize("port", PORTS)
def test_connection_form_test_shows_cluster_id(browser, airflow_ui, healthy, zookeeper_server, port):
    conn_id = f"ui_kafka_zk_{'port' if port else 'no_port'}"
    _fill_connection_form(browser, airflow_ui, conn_id, zookeeper_server.connect_string, healthy.chroot, port)
    toast = _save_and_test(browser, conn_id, screenshot="kafka-zookeeper-connection-form.png")
    assert _port_cell(browser, conn_id) == port  # saved exactly as typed
    _xfail_if_airflow_rejects_portless_test(toast, port)
    assert toast["title"] == "Test Connection Successful", toast
    # a sentence, not a raw JSON string: cluster id, the server's ZooKeeper release, live brokers
    assert re.fullmatch(
        rf"Kafka cluster {re.escape(healthy.cluster.cluster_id)} in {re.escape(healthy.chroot)} on "
        r"ZooKeeper 3\.[0-9]+\.[0-9]+; live brokers: 0, 1, 2, 3, 4, 5 \(6\)",
        toast["description"],
    ), toast
    _screenshot(browser, "kafka-zookeeper-connection-test-success.png")


@pytest.mark.parametrize("port", PORTS)
def test_connection_form_wrong_chroot_shows_hook_error(browser, airflow_ui, healthy, zookeeper_server, port):
    conn_id = f"ui_kafka_zk_wrong_chroot_{'port' if port else 'no_port'}"
    wrong = healthy.chroot + "_not_kafka"
    _fill_connection_form(browser, airflow_ui, conn_id, zookeeper_server.connect_string, wrong, port)
    toast = _save_and_test(browser, conn_id)
    _xfail_if_airflow_rejects_portless_test(toast, port)
    assert toast == {
        "title": "Test Connection Failed",
        "description": f"Connected, but {wrong} holds no Kafka cluster (/brokers/ids is missing): check the chroot",
    }


# ----------------------------------------------------------------------------- trigger form
# A Param whose name says it is a quantity must name its unit in its title or description.
_QUANTITY_NAME = re.compile(r"(_s|_ms|_mb|_mib|_gb|_bytes|_per_sec|_mb_per_sec|_seconds|_minutes)$|bytes")
_UNIT = re.compile(
    r"(\b(ms|s|sec|seconds?|minutes?|hours?|bytes?|B|[KMGT]i?B)\b|[KMGT]i?B/s|\bB/s)", re.IGNORECASE
)
RAW_BYTES = 1024 * 1024  # a default this large in a number field is a byte count: show MB


def _drain_params(ui: AirflowUi) -> dict[str, dict]:
    """The DAG's Params as the UI gets them (REST API, token for the same admin user)."""
    status, body = _http(ui.base_url, "POST", "/auth/token", {"username": ADMIN, "password": ui.password})
    assert status in (200, 201), body
    token = json.loads(body)["access_token"]
    status, body = _http(ui.base_url, "GET", f"/api/v2/dags/{DRAIN_DAG}/details", token=token)
    assert status == 200, body
    return json.loads(body)["params"]


def test_drain_trigger_form_titles_descriptions_units(browser, airflow_ui):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    params = _drain_params(airflow_ui)
    assert params, f"{DRAIN_DAG} has no Params"
    browser.get(f"{airflow_ui.base_url}/dags/{DRAIN_DAG}")
    _wait(browser).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"))
    ).click()
    dialog = _wait(browser).until(
        ec.visibility_of_element_located(
            (By.XPATH, f"//*[@role='dialog'][.//h2[contains(., '{DRAIN_DAG}')]]")
        )
    )
    _wait(browser).until(
        lambda d: dialog.find_elements(
            By.XPATH, ".//*[@name or @id][starts-with(@name,'element_') or starts-with(@id,'element_')]"
        )
    )

    problems: dict[str, list[str]] = {}
    shown: dict[str, tuple[str, str]] = {}
    for key in params:
        element = f"@name='element_{key}' or @id='element_{key}' or @id='number-input:element_{key}'"
        fields = dialog.find_elements(
            By.XPATH, f".//*[@data-scope='field' and @data-part='root'][.//*[{element}]]"
        )
        if not fields:
            problems[key] = ["not rendered"]
            continue
        field = fields[-1]  # the innermost field holding this Param's input
        label = field.find_element(By.XPATH, ".//label").text.replace("*", "").strip()
        helper = field.find_elements(By.XPATH, ".//*[@data-part='helper-text']")
        description = helper[0].text.strip() if helper else ""
        shown[key] = (label, description)
        missing = []
        if label == key:
            missing.append("title")
        if not description:
            missing.append("description")
        if _QUANTITY_NAME.search(key) and not _UNIT.search(f"{label} {description}"):
            missing.append("unit")
        for number in field.find_elements(By.XPATH, ".//input[@role='spinbutton']"):
            value = number.get_attribute("value") or ""
            if value and float(value) >= RAW_BYTES:
                missing.append(f"a human unit for its default {value} (a raw byte count)")
        if missing:
            problems[key] = missing

    browser.set_window_size(1400, 2400)  # the whole dialog in one picture
    try:
        _screenshot(browser, "kafka-zk-pre-maintenance-drain-trigger-form.png")
    finally:
        browser.set_window_size(1400, 1000)
    assert not problems, "Params of {} lack: {}\n(shown as label / description: {})".format(
        DRAIN_DAG,
        "; ".join(f"{key}: {', '.join(what)}" for key, what in problems.items()),
        json.dumps(shown, indent=1),
    )
