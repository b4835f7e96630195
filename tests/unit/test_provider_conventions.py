"""The provider's public classes follow the conventions Airflow's provider docs render.

Every argument of a public operator, sensor, hook or trigger is documented with ``:param name:``
in its class docstring (the provider docs build renders those), and every operator that names a
cluster or a ZooKeeper connection lets both be templated, so one DAG file can serve a Params form.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import BaseHook, BaseOperator
from airflow.triggers.base import BaseTrigger

import airflow_provider_kafka_zk

LAYERS = ("operators", "sensors", "hooks", "triggers")


def _public_classes() -> list[type]:
    found: dict[str, type] = {}
    for layer in LAYERS:
        package = importlib.import_module(f"{airflow_provider_kafka_zk.__name__}.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, cls in vars(module).items():
                if (
                    inspect.isclass(cls)
                    and not name.startswith("_")
                    and cls.__module__ == module.__name__
                    and issubclass(cls, (BaseOperator, BaseHook, BaseTrigger))
                ):
                    found[f"{module.__name__}.{name}"] = cls
    return [found[key] for key in sorted(found)]


CLASSES = _public_classes()


def _own_arguments(cls: type) -> list[str]:
    if "__init__" not in vars(cls):
        return []
    signature = inspect.signature(cls.__init__)
    return [
        name
        for name, parameter in signature.parameters.items()
        if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


def test_the_provider_has_public_classes_to_check():
    names = {cls.__name__ for cls in CLASSES}
    assert {"KafkaZooKeeperHook", "ReassignmentSensor", "FindingsGateOperator"} <= names, names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_argument_has_a_param_doc(cls):
    doc = (cls.__doc__ or "") + (vars(cls)["__init__"].__doc__ or "" if "__init__" in vars(cls) else "")
    missing = [name for name in _own_arguments(cls) if f":param {name}:" not in doc]
    assert not missing, f"{cls.__module__}.{cls.__name__}: no ':param' for {missing}"


OPERATORS = [cls for cls in CLASSES if issubclass(cls, BaseOperator)]


@pytest.mark.parametrize("cls", OPERATORS, ids=lambda cls: cls.__name__)
def test_cluster_and_connection_arguments_are_templated(cls):
    arguments = set(_own_arguments(cls))
    templated = set(getattr(cls, "template_fields", ()))
    expected = arguments & {
        "cluster",
        "kafka_zookeeper_conn_id",
        "ssh_conn_id",
        "base_path",
        "brokers",
        "topics",
        "dry_run",
    }
    assert expected <= templated, f"{cls.__name__}: not templated: {sorted(expected - templated)}"


def _manual_params() -> list[tuple[str, str, Any]]:
    from airflow_provider_kafka_zk.dags import create_all_dags

    return [
        (dag_id, name, dag.params.get_param(name))
        for dag_id, dag in sorted(create_all_dags().items())
        for name in dag.params
    ]


@pytest.mark.parametrize(
    ("dag_id", "name", "param"), _manual_params(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_param_of_a_trigger_form_has_a_title_a_description_and_a_unit(dag_id, name, param):
    title = param.schema.get("title") or ""
    assert title and param.description, f"{dag_id}.{name}: title {title!r}, description {param.description!r}"
    if name.endswith("_s"):
        assert "(s)" in title, f"{dag_id}.{name}: seconds not named in {title!r}"
    if name.endswith(("_mb", "_mb_per_sec", "_mb_per_batch")):
        assert "MB" in title or "MiB" in title, f"{dag_id}.{name}: unit not named in {title!r}"
    assert "bytes" not in name, f"{dag_id}.{name}: a form asks for MB, not bytes"


def test_the_readme_lists_every_trigger_form_field_with_its_default():
    import runpy

    generated = runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "params_table.py"))
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    begin, end = generated["BEGIN"], generated["END"]
    shown = readme[readme.index(begin) : readme.index(end) + len(end)]
    assert shown == generated["params_table"](), "README is stale: run scripts/params_table.py and paste it"
