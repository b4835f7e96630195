"""The snapshot operators in a real Airflow 3 DAG run (dag.test): a kafka_zookeeper connection from an
AIRFLOW_CONN_<ID> JSON env var, the XCom summary, the outlet Asset event, the load into a scratch chroot."""

from __future__ import annotations

import json
import textwrap

import pytest

from airflow_provider_kafka_zk.artefacts.snapshots import list_snapshots, read_snapshot
from airflow_provider_kafka_zk.testing.simulator import DeployedCluster, incident_cluster

pytestmark = pytest.mark.integration

DAG_FILE = textwrap.dedent(
    """
    import json
    import os

    from airflow.sdk import DAG

    from airflow_provider_kafka_zk.operators.snapshot import (
        ZooKeeperSnapshotLoadOperator,
        ZooKeeperSnapshotOperator,
    )

    config = json.loads(os.environ["KAFKA_ZK_SNAPSHOT_TEST_DAG"])
    with DAG("zookeeper_snapshot_test", schedule=None) as dag:
        snapshot = ZooKeeperSnapshotOperator(
            task_id="snapshot",
            cluster="incident",
            kafka_zookeeper_conn_id="incident_zk_dag",
            base_path="{{ params.base }}",
            exclude=["/zookeeper", "/admin/delete_topics"],
            keep_last=1,
            params={"base": config["base_path"]},
        )
        load = ZooKeeperSnapshotLoadOperator(
            task_id="load",
            kafka_zookeeper_conn_id="incident_zk_dag",
            snapshot_path="{{ ti.xcom_pull(task_ids='snapshot')['path'] }}",
            target_chroot=config["scratch"],
        )
        snapshot >> load
    """
)


def test_snapshot_and_load_in_a_dag_run(
    zookeeper_server, zk_chroot, tmp_path, monkeypatch, airflow_home, capfd
):
    cluster = incident_cluster()
    with DeployedCluster(cluster, zookeeper_server.connect_string, zk_chroot, tmp_path / "hosts"):
        dags = tmp_path / "dags"
        dags.mkdir()
        (dags / "zookeeper_snapshot_test_dag.py").write_text(DAG_FILE)
        base = tmp_path / "artefacts"
        scratch = zookeeper_server.new_chroot("/scratch_")
        monkeypatch.setenv(
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
            json.dumps(
                [
                    {
                        "name": "snapshot-test-dags",
                        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                        "kwargs": {"path": str(dags)},
                    }
                ]
            ),
        )
        monkeypatch.setenv(
            "AIRFLOW_CONN_INCIDENT_ZK_DAG",
            json.dumps(
                {
                    "conn_type": "kafka_zookeeper",
                    "host": zookeeper_server.connect_string,
                    "login": "auditor",
                    "password": "digest-secret-1",
                    "extra": {"chroot": zk_chroot, "auth_scheme": "digest"},
                }
            ),
        )
        monkeypatch.setenv(
            "KAFKA_ZK_SNAPSHOT_TEST_DAG", json.dumps({"base_path": str(base), "scratch": scratch})
        )
        from airflow.dag_processing.dagbag import DagBag
        from airflow.models.asset import AssetEvent, AssetModel
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        dag = DagBag(dag_folder=str(dags)).get_dag("zookeeper_snapshot_test")
        assert [o.uri for o in dag.get_task("snapshot").outlets] == ["kafka-zk://incident/snapshots"]
        run = dag.test()
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states == {"snapshot": "success", "load": "success"}

        with create_session() as session:
            xcoms = {
                x.task_id: XComModel.deserialize_value(x)
                for x in session.scalars(
                    select(XComModel).where(
                        XComModel.dag_id == "zookeeper_snapshot_test",
                        XComModel.run_id == run.run_id,
                        XComModel.key == "return_value",
                    )
                )
            }
            asset = session.scalar(
                select(AssetModel).where(AssetModel.uri == "kafka-zk://incident/snapshots")
            )
            events = session.scalars(select(AssetEvent).where(AssetEvent.asset_id == asset.id)).all()

    summary = xcoms["snapshot"]
    [ref] = list_snapshots(str(base), "incident")
    assert summary["path"] == ref.path and summary["snapshot"] == ref.name
    manifest, rows = read_snapshot(ref.path)
    assert summary["znodes"] == len(rows) == manifest["znodes"] > 150
    assert (
        summary["zxid_start"] == manifest["zxid"]["start"] <= summary["zxid_end"] == manifest["zxid"]["end"]
    )
    assert summary["consistent"] is True and summary["cluster_id"] == cluster.cluster_id
    assert summary["sha256"] == manifest["files"]["znodes.parquet"]["sha256"]
    assert not any(r.path.startswith("/admin/delete_topics") for r in rows)  # templated exclude
    assert manifest["source"] == {"hosts": [zookeeper_server.connect_string], "chroot": zk_chroot}
    assert events and events[-1].extra["path"] == ref.path

    load = xcoms["load"]
    assert load["snapshot"] == ref.path and load["created"] == len(rows) - 1
    assert load["target"].endswith(scratch)
    assert {e["path"] for e in load["ephemerals_as_persistent"]} >= {"/controller", "/brokers/ids/0"}

    logs = "".join(capfd.readouterr())
    assert "digest-secret-1" not in logs and "auditor:digest" not in logs
