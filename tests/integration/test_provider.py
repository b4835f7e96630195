"""The provider registers with a real Airflow 3 install: a malformed provider dict can never land."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import airflow
import jsonschema
import pytest

from airflow_provider_kafka_zk import __version__
from airflow_provider_kafka_zk.get_provider_info import get_provider_info

pytestmark = pytest.mark.integration


def test_provider_info_matches_airflows_schema():
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-provider-kafka-zk"
    assert info["versions"] == [__version__]


def test_connection_fields_match_airflows_provider_yaml_schema():
    schema = json.loads((Path(airflow.__file__).parent / "provider.yaml.schema.json").read_text())
    jsonschema.validate(get_provider_info()["connection-types"], schema["properties"]["connection-types"])


def test_entry_point_is_registered():
    eps = importlib.metadata.entry_points(group="apache_airflow_provider")
    ours = [ep for ep in eps if ep.dist and ep.dist.name == "airflow-provider-kafka-zk"]
    assert len(ours) == 1
    assert ours[0].load()()["package-name"] == "airflow-provider-kafka-zk"


@pytest.mark.parametrize(
    ("conn_type", "hook_class"),
    [
        ("kafkazookeeper", "KafkaZooKeeperHook"),  # the type: no '_' (RFC 3986 scheme)
        ("kafka_zookeeper", "LegacyKafkaZooKeeperHook"),  # its first name: saved connections keep working
    ],
)
def test_providers_manager_loads_connection_type_and_form(airflow_home, conn_type, hook_class):
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()
    assert "airflow-provider-kafka-zk" in manager.providers
    hook = ProvidersManagerTaskRuntime().hooks[conn_type]
    assert hook is not None
    assert hook.hook_class_name == f"airflow_provider_kafka_zk.hooks.zookeeper.{hook_class}"
    assert hook.connection_id_attribute_name == "kafka_zookeeper_conn_id"
    widgets = manager.connection_form_widgets
    assert f"extra__{conn_type}__chroot" in widgets
    assert widgets[f"extra__{conn_type}__key_password"].is_sensitive
    behaviour = manager.field_behaviours[conn_type]
    assert behaviour["relabeling"]["host"] == "ZooKeeper hosts"


def test_airflow_providers_list_shows_the_provider(airflow_home):
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home)}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "providers", "list", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    rows = json.loads(out[out.index("[") :])
    ours = [r for r in rows if r["package_name"] == "airflow-provider-kafka-zk"]
    assert ours and ours[0]["version"] == __version__
