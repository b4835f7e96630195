"""``spark-submit`` of this provider's Spark applications, with the package shipped from the same worker.

The audit and the log-scan verdicts run on Spark with the pure core as ``--py-files``. Building that
archive in an upstream task and reading it here would read another worker's disk on any
distributed executor (Celery, Kubernetes); this operator builds it in its own ``execute``, in a
temporary directory removed afterwards, from the package installed on the worker that submits.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

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
    :param kwargs: everything :class:`SparkSubmitOperator` takes (``conn_id``, ``conf``,
        ``application_args``, ``name`` ...); ``spark.ui.enabled=false`` and fast-start driver JVM
        options are the defaults of ``conf``.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "extra_py_files")

    def __init__(self, *, app: str, extra_py_files: str | None = None, **kwargs: Any) -> None:
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
            self._hook = None  # built from py_files by the parent's execute
            self.log.info("Submitting %s with --py-files %s", self.application, self.py_files)
            super().execute(context)
