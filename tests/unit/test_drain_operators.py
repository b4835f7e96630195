"""The drain DAG's form, cluster file and the trigger's wire format, without services."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError
from airflow.sdk.module_loading import import_string

from airflow_provider_kafka_zk.clusters import cluster_setting
from airflow_provider_kafka_zk.sensors.reassignment import parse_targets
from airflow_provider_kafka_zk.triggers.reassignment import (
    ReassignmentTrigger,
    decode_targets,
    encode_targets,
)

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "kafka_zk_pre_maintenance_drain.py"


def _load_dag(monkeypatch, clusters_file: Path | None):
    """The drain DAG as Airflow gets it: by executing the thin DAG file."""
    monkeypatch.setenv("KAFKA_ZK_CLUSTERS_FILE", str(clusters_file) if clusters_file else "/nonexistent.toml")
    spec = importlib.util.spec_from_file_location("drain_dag_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kafka_zk_pre_maintenance_drain


def _validate(params: ParamsDict, overrides: dict) -> dict:
    """What the trigger form does with a conf: the DAG's params updated, then validated."""
    merged = copy.deepcopy(params)
    for key, value in overrides.items():
        merged[key] = value
    return merged.validate()


def test_trigger_serializes_to_an_importable_classpath_and_back():
    trigger = ReassignmentTrigger(
        kafka_zookeeper_conn_id="zk",
        targets=encode_targets({("t", 1): (3, 2), ("a", 0): (1,)}),
        sizes=[["t", 1, 10]],
        poll_interval=2.5,
        deadline=123.0,
        label="batch 1/1",
        echo={"batch": 0},
    )
    classpath, kwargs = trigger.serialize()
    again = import_string(classpath)(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (classpath, kwargs)
    assert decode_targets(kwargs["targets"]) == {("a", 0): (1,), ("t", 1): (3, 2)}


def test_sensor_targets_from_tool_json_text_file_or_triples(tmp_path):
    tool = {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [2], "log_dirs": ["any"]}],
    }
    path = tmp_path / "reassignment.json"
    path.write_text(json.dumps(tool))
    expected = {("t", 0): (2,)}
    assert parse_targets(tool) == parse_targets(json.dumps(tool)) == parse_targets(str(path)) == expected
    assert parse_targets([["t", 0, [2]]]) == expected


def test_dag_form_requires_brokers_and_defaults_to_a_dry_run(monkeypatch):
    dag = _load_dag(monkeypatch, None)
    assert dag.schedule is None
    params = dag.params
    assert params["dry_run"] is True and params["allow_partial"] is False and params["scope"] == "rf1"
    with pytest.raises(ParamValidationError):
        ParamsDict(dict(params.items())).validate()  # brokers has no default: required
    cluster = params.get_param("cluster").schema["enum"][0]
    with pytest.raises(ParamValidationError, match="cluster"):
        _validate(params, {"brokers": [1]})  # no default cluster: the user chooses
    for bad in ({"brokers": []}, {"brokers": ["one"]}, {"throttle_mb_per_sec": 0}, {"scope": "some"}):
        with pytest.raises(ParamValidationError):
            _validate(params, {"cluster": cluster, "brokers": [1], **bad})
    valid = _validate(params, {"cluster": cluster, "brokers": [1, 2], "max_bytes_per_batch": None})
    assert valid["brokers"] == [1, 2]
    assert (
        _validate(params, {"cluster": cluster, "brokers": [1], "excluded_topics": None})["excluded_topics"]
        is None
    )
    assert {"execute", "clear_throttles", "verify", "stop_if_dry_run"} <= set(dag.task_ids)
    assert dag.get_task("clear_throttles").trigger_rule == "all_done"


def test_clusters_come_from_the_cluster_file(monkeypatch, tmp_path):
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[defaults]\nbase_path = "/srv/artefacts"\n'
        '[clusters.prod]\nkafka_zookeeper_conn_id = "zk_prod"\nssh_conn_id = "ssh_prod"\nbase_path = "s3://x"\n'
        'server_properties_path = "${DRAIN_TEST_HOSTS}/broker-{broker_id}/server.properties"\n'
        '[clusters.stage]\nzookeeper_conn_id = "zk_stage"\n'
        "[clusters.old]\nenabled = false\n"
    )
    monkeypatch.setenv("DRAIN_TEST_HOSTS", "/hosts")
    param = _load_dag(monkeypatch, clusters).params.get_param("cluster")
    assert param.schema["enum"] == ["prod", "stage"]
    assert cluster_setting({"cluster": "prod"}, "base_path") == "s3://x"
    assert cluster_setting({"cluster": "stage"}, "base_path") == "/srv/artefacts"
    assert cluster_setting({"cluster": "prod"}, "server_properties_path") == (
        "/hosts/broker-{broker_id}/server.properties"
    )
    assert cluster_setting({"cluster": "stage"}, "kafka_zookeeper_conn_id") == "zk_stage"
    assert cluster_setting({"cluster": "stage"}, "ssh_conn_id") == "kafka_zk_stage_ssh"
    assert cluster_setting({"cluster": "stage"}, "broker_hosts") is None
