"""``spark-submit`` of this provider's Spark applications, with the package shipped from the same worker.

The audit and the log-scan verdicts run on Spark with the pure core as ``--py-files``. Building that
archive in an upstream task and reading it here would read another worker's disk on any
distributed executor (Celery, Kubernetes); this operator builds it in its own ``execute``, in a
temporary directory removed afterwards, from the package installed on the worker that submits.

A remote artefacts base with an Airflow connection reaches the job the same way: the connection is
resolved here (:func:`~airflow_provider_kafka_zk.artefacts.object_storage.resolve_artefacts`) and its
filesystem options written to a file only this user can read, in that temporary directory; the job
gets the file's path in ``$KAFKA_ZK_ARTEFACTS_STORE_FILE`` (never a secret on the command line, in
an environment value or in the log) and binds its fsspec from it, without Airflow. That file is on
the submitting worker: it reaches a driver in ``client`` mode (local, standalone, YARN client), not a
``cluster``-mode driver, which must have the store's credentials of its own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from airflow_provider_kafka_zk.artefacts.object_storage import (
    BINDING_FILE_ENV,
    resolve_artefacts,
    write_binding_file,
)
from airflow_provider_kafka_zk.spark_jobs.package import application_path, build_package_zip

FAST_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Driver JVM options: these jobs are short, so start-up dominates (C1 only, serial GC)."""


class ProviderSparkSubmitOperator(SparkSubmitOperator):
    """Submit one of this provider's Spark applications with the provider package as ``--py-files``.

    Refuses a Spark connection that does not exist: ``SparkSubmitHook`` would silently fall back to
    YARN, which on most Airflow workers means a hung or misplaced job.

    :param app: the application's file name, ``kafka_zk_audit.py`` or ``kafka_zk_log_scan.py``
        (an explicit ``application=`` path overrides it).
    :param extra_py_files: further ``--py-files`` entries, comma-separated.
    :param artefacts_base: the artefacts base the job reads and writes (a remote one is resolved with
        ``artefacts_conn_id`` and handed to the job as a private file, see the module docstring).
    :param artefacts_conn_id: the Airflow connection of a remote store base; default
        ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param kwargs: everything :class:`SparkSubmitOperator` takes (``conn_id``, ``conf``,
        ``application_args``, ``name`` ...); ``spark.ui.enabled=false`` and fast-start driver JVM
        options are the defaults of ``conf``.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "extra_py_files",
        "artefacts_base",
        "artefacts_conn_id",
    )

    def __init__(
        self,
        *,
        app: str,
        extra_py_files: str | None = None,
        artefacts_base: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("application", application_path(app))
        kwargs["conf"] = {
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS,
            **(kwargs.get("conf") or {}),
        }
        if kwargs.get("py_files"):
            raise ValueError("py_files is built per run by ProviderSparkSubmitOperator: use extra_py_files")
        super().__init__(**kwargs)
        self.app = app
        self.extra_py_files = extra_py_files
        self.artefacts_base = artefacts_base
        self.artefacts_conn_id = artefacts_conn_id

    def execute(self, context: Any) -> None:
        conn_id = self._conn_id
        try:
            BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            raise AirflowFailException(
                f"Spark connection {conn_id!r} is not defined; without it spark-submit goes to YARN. "
                f"Define it, e.g. AIRFLOW_CONN_{conn_id.upper()}="
                '\'{"conn_type":"spark","host":"local[*]"}\' (or set engine = in-process)'
            ) from None
        with tempfile.TemporaryDirectory(prefix="kafka-zk-spark-") as work:
            archive = build_package_zip(work)
            self.py_files = ",".join(p for p in (archive, self.extra_py_files) if p)
            if self.artefacts_base:
                binding = write_binding_file(
                    resolve_artefacts(self.artefacts_base, self.artefacts_conn_id), work
                )
                if binding is not None:
                    self.env_vars = {**(self.env_vars or {}), BINDING_FILE_ENV: binding}
                    self.log.info("The job binds the artefact store from %s (mode 0600)", binding)
            self._hook = None  # built from py_files by the parent's execute
            self.log.info("Submitting %s with --py-files %s", self.application, self.py_files)
            super().execute(context)
