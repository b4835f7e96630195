"""Cluster audit as Airflow tasks: the in-process audit (small clusters) and the findings gate.

The Spark path is a ``SparkSubmitOperator`` running ``airflow_provider_kafka_zk/spark_jobs/apps/kafka_zk_audit.py``; both paths
call :func:`airflow_provider_kafka_zk.spark_jobs.audit.run_audit` and publish the same
``<base>/<cluster>/findings/<ts>/`` artefacts, which :class:`FindingsGateOperator` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.kafka.findings import Severity
from airflow_provider_kafka_zk.reports import gate_message

if TYPE_CHECKING:
    from airflow.sdk import Context


class ClusterAuditOperator(BaseOperator):
    """Run the audit rules in this worker (engine ``in-process``) and publish the findings directory.

    For clusters small enough that Spark's start-up would dominate. Returns the summary
    (counts by check and severity, coverage, artefact paths).

    :param cluster: the cluster's name (its artefact directory).
    :param base_path: artefact base, local directory or fsspec URL.
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param inventory: the inventory run directory to audit (default: the latest).
    :param out: the findings directory to publish (default: ``<base>/<cluster>/findings/<now>``).
    :param snapshot: the snapshot directory (default: the latest complete one).
    :param previous: the snapshot to compare with (default: the one before; ``""`` for none).
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "snapshot",
        "previous",
        "inventory",
        "out",
    )
    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        cluster: str,
        base_path: str,
        inventory: str | None = None,
        out: str | None = None,
        snapshot: str | None = None,
        previous: str | None = None,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.base_path = base_path
        self.inventory = inventory
        self.out = out
        self.snapshot = snapshot
        self.previous = previous

    def execute(self, context: Context) -> dict[str, Any]:
        # imported here: the audit job's modules (rules, Arrow readers) would cost every task process
        # of the DAG their import when the DAG file is parsed
        from airflow_provider_kafka_zk.spark_jobs.audit import run_audit

        summary = run_audit(
            artefacts_url(self.base_path, self.artefacts_conn_id),
            self.cluster,
            snapshot=self.snapshot or None,
            previous=self.previous,
            inventory=self.inventory or None,
            out=self.out or None,
            engine="in-process",
        )
        self.log.info(
            "Audit of %s: %d finding(s) %s; report %s",
            self.cluster,
            summary["findings"],
            summary["by_severity"],
            summary["report"],
        )
        return summary


class FindingsGateOperator(BaseOperator):
    """Fail when the audit found anything at or above ``fail_on``, naming the incidents to act on and the report.

    The message comes from ``summary.json``'s data (:func:`~airflow_provider_kafka_zk.reports.gate_message`):
    the "act now" incidents (a stopped broker, a topicId incident) with their action and commands, then
    the worst findings no incident explains -- severities are fields there, never parsed from text.

    Failing is the point: the run fails and its ``alert`` task pages the findings. Findings
    do not change on a retry, so that failure skips retries (AirflowFailException); a missing or
    unreadable summary is an ordinary error and is retried.

    :param findings_path: the findings directory (its ``summary.json`` is read).
    :param fail_on: the lowest severity that fails: ``critical``, ``error``, ``warning`` or ``info``.
    :param top: how many of the worst findings the failure message names.
    :param artefacts_conn_id: the Airflow connection of a remote store (as the audit's).
    """

    template_fields: Sequence[str] = ("findings_path", "fail_on", "artefacts_conn_id")
    ui_color = "#f5b7b1"

    def __init__(
        self,
        *,
        findings_path: str,
        fail_on: str = "critical",
        top: int = 5,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.findings_path = findings_path
        self.fail_on = fail_on
        self.top = top

    def execute(self, context: Context) -> dict[str, Any]:
        threshold = Severity.parse(self.fail_on)
        from airflow_provider_kafka_zk.spark_jobs.audit import read_summary

        summary = read_summary(artefacts_url(self.findings_path, self.artefacts_conn_id))
        at_or_above = {
            name: count
            for name, count in summary["by_severity"].items()
            if count and Severity.parse(name) >= threshold
        }
        coverage = summary.get("coverage", {})
        if coverage.get("missing"):
            self.log.warning(
                "Coverage is %s: brokers %s were not inventoried (%s)",
                coverage.get("status"),
                coverage["missing"],
                coverage.get("description", ""),
            )
        message = gate_message(summary, threshold, top=self.top)
        result = {
            "cluster": summary["cluster"],
            "fail_on": threshold.name.lower(),
            "blocking": at_or_above,
            "by_severity": summary["by_severity"],
            "report": summary.get("report"),
            "coverage": coverage.get("status"),
        }
        if message is None:
            self.log.info(
                "Gate passed: nothing at or above %s (%s); report %s",
                threshold.name.lower(),
                summary["by_severity"],
                summary.get("report"),
            )
            return result
        raise AirflowFailException(message)
