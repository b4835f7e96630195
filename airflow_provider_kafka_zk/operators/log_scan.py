"""Pre-restart log and index scan: one task per broker, then the verdicts.

``BrokerLogScanOperator`` (made for ``.expand(broker_id=...)``) reads the run's inventory of the
broker (which partition directories, their recovery points, the broker's Kafka release), runs the
scan on the host (:mod:`~airflow_provider_kafka_zk.hooks.broker_log_scan`) and writes
``<base>/<cluster>/log-scan/<ts>/broker=<id>.parquet`` (one row per segment) with
``_summary/broker=<id>.json`` (what was read -- every batch's CRC of the segments a start recovers,
the segments not read and why --, bytes and seconds, budget, partitions and files skipped and why, the
inventory it used). The scan only reads, only regular files, bounded in bytes and in time (each
file's ``file_timeout``, the whole scan's ``scan_timeout``, the command's ``timeout``): what it could
not read is said, and a verdict always comes back. ``LogScanVerdictOperator`` judges every broker's rows with the pure core
(:mod:`~airflow_provider_kafka_zk.kafka.log_scan_rules`: the broker's version rules, ISR from the
snapshot for the remedy that loses least) and writes ``findings.parquet``, ``verdicts.json`` and
``report.txt``; it fails when a broker's verdict reaches ``fail_on``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import write_atomically
from airflow_provider_kafka_zk.artefacts.inventory_layout import broker_file as inventory_broker_file
from airflow_provider_kafka_zk.artefacts.inventory_layout import list_inventory
from airflow_provider_kafka_zk.artefacts.object_storage import artefacts_url
from airflow_provider_kafka_zk.artefacts.snapshots import (
    validate_cluster_name,
)
from airflow_provider_kafka_zk.clusters import default_artefacts_base
from airflow_provider_kafka_zk.hooks.broker_host import DEFAULT_PYTHON_INTERPRETERS, BrokerHostHook
from airflow_provider_kafka_zk.hooks.broker_log_scan import (
    DEFAULT_FILE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    PartitionToScan,
    scan_broker_logs,
)
from airflow_provider_kafka_zk.kafka.log_scan_rules import (
    SegmentRow,
    Verdict,
    index_rule,
    segment_rows,
)
from airflow_provider_kafka_zk.kafka.versions import KafkaVersion
from airflow_provider_kafka_zk.maintenance import parse_safety_flags
from airflow_provider_kafka_zk.operators.inventory import _resolve_ts, read_inventory_summary
from airflow_provider_kafka_zk.spark_jobs.log_scan import (
    LogScanInputError,
    describe_read,
    judge_scan,
    parquet_bytes,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

ROW_SCHEMA = pa.schema(
    [
        ("broker_id", pa.int32()),
        ("log_dir", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("active", pa.bool_()),
        ("log_size", pa.int64()),
        ("recovered_after_crash", pa.bool_()),
        ("index_json", pa.string()),
        ("timeindex_json", pa.string()),
        ("walk_json", pa.string()),
        ("problems_json", pa.string()),
        ("recovery_point", pa.int64()),
        ("log_start_offset", pa.int64()),
        ("high_watermark", pa.int64()),
        ("clean_shutdown", pa.bool_()),
        ("skipped", pa.string()),
        ("read_json", pa.string()),  # how the segment was read and why (log_scan.scan_partition)
    ]
)
DEFAULT_KAFKA_VERSION = "3.3.1"  # what the rules assume when neither the jars nor the IBP say


class LogScanError(AirflowFailException):
    """The scan cannot run or its result cannot be judged; the message names the broker and file."""


class RestartRiskError(AirflowFailException):
    """A broker's verdict reached ``fail_on``: the message says which broker, segment and remedy."""


def _url(base: str, cluster: str, ts: str) -> str:
    validate_cluster_name(cluster)
    return "/".join([base.rstrip("/"), cluster, "log-scan", ts])


def _write(url: str, data: bytes) -> str:
    fs, path = fsspec.core.url_to_fs(url)
    write_atomically(fs, path, data)
    return url


def broker_version(facts: Mapping[str, Any], override: str | None) -> tuple[KafkaVersion, str]:
    """The release whose rules apply: given, else the broker's jars, else its IBP, else the default."""
    for value, source in (
        (None if override in ("", "None") else override, "given"),
        (facts.get("kafka_version"), "the broker's jars"),
        (facts.get("inter.broker.protocol.version"), "inter.broker.protocol.version"),
    ):
        if value:
            try:
                return KafkaVersion.parse(str(value).split("-")[0]), source
            except ValueError:
                continue
    return KafkaVersion.parse(DEFAULT_KAFKA_VERSION), f"default ({DEFAULT_KAFKA_VERSION}: release unknown)"


def _seconds(name: str, value: Any) -> float | None:
    """A time limit from a parameter or a rendered template: positive seconds, None when empty."""
    if value in (None, "", "None"):
        return None
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise LogScanError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


class BrokerLogScanOperator(BaseOperator):
    """Scan one broker's segments and indexes over SSH (read-only) and write its rows.

    :param broker_id: the broker (mapped: ``.expand(broker_id=...)``).
    :param cluster: the cluster's name.
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param ssh_conn_id: the SSH connection template (strict host keys).
    :param kafka_zookeeper_conn_id: to look the host up in ZooKeeper when ``broker_hosts`` lacks it.
    :param broker_hosts: broker id -> host.
    :param inventory_ts: the run's inventory folder (which directories, recovery points, version).
    :param scan_ts: this scan's folder name (default: the run's).
    :param kafka_version: the broker's release when the inventory cannot tell.
    :param budget_mb: stop reading after this many MiB on the broker (partial: said in the summary).
    :param verify_crc: also read every segment Kafka will not recover, every batch's CRC checked
        (damage no start notices; reads the whole log). The segments a start recovers are always
        read so: the prediction does not depend on this.
    :param walk_all: also walk the batch headers of every segment Kafka will not recover.
    :param nice: CPU niceness on the host.
    :param timeout: hard time limit (s) of the command (the partitions sent before it are kept).
    :param file_timeout: time limit (s) of reading one file on the host; a file past it is reported as
        not read (default 300).
    :param scan_timeout: time limit (s) of the whole scan on the host, after which the remaining
        partitions are reported as not scanned (default: 90 % of ``timeout``).
    :param python_interpreters: interpreters tried on the host, in order (the scanner is stdlib only).
    """

    template_fields: Sequence[str] = (
        "broker_id",
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "ssh_conn_id",
        "kafka_zookeeper_conn_id",
        "broker_hosts",
        "inventory_ts",
        "scan_ts",
        "kafka_version",
        "budget_mb",
        "verify_crc",
        "walk_all",
        "timeout",
        "file_timeout",
        "scan_timeout",
    )
    ui_color = "#e6f2ff"

    def __init__(
        self,
        *,
        broker_id: int | str,
        cluster: str,
        base_path: str | None = None,
        ssh_conn_id: str,
        kafka_zookeeper_conn_id: str | None = None,
        broker_hosts: Mapping[int | str, str] | None = None,
        inventory_ts: str | None = None,
        scan_ts: str | None = None,
        kafka_version: str | None = None,
        budget_mb: int | str | None = None,
        verify_crc: bool | str = False,
        walk_all: bool | str = False,
        nice: int = 10,
        timeout: float | str = DEFAULT_TIMEOUT_S,
        file_timeout: float | str | None = DEFAULT_FILE_TIMEOUT_S,
        scan_timeout: float | str | None = None,
        python_interpreters: Sequence[str] = DEFAULT_PYTHON_INTERPRETERS,
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.broker_id = broker_id
        self.cluster = cluster
        self.base_path = base_path
        self.ssh_conn_id = ssh_conn_id
        self.kafka_zookeeper_conn_id = kafka_zookeeper_conn_id
        self.broker_hosts = broker_hosts
        self.inventory_ts = inventory_ts
        self.scan_ts = scan_ts
        self.kafka_version = kafka_version
        self.budget_mb = budget_mb
        self.verify_crc = verify_crc
        self.walk_all = walk_all
        self.nice = nice
        self.timeout = timeout
        self.file_timeout = file_timeout
        self.scan_timeout = scan_timeout
        self.python_interpreters = python_interpreters

    def execute(self, context: Context) -> dict[str, Any]:
        flags = parse_safety_flags(verify_crc=self.verify_crc, walk_all=self.walk_all)
        broker_id = int(self.broker_id)
        budget = None
        if self.budget_mb not in (None, "", "None"):
            try:
                budget = int(str(self.budget_mb)) * 1024 * 1024
            except ValueError:
                budget = -1
            if budget <= 0:
                raise LogScanError(f"budget_mb must be a positive whole number, not {self.budget_mb!r}")
        timeout = _seconds("timeout", self.timeout)
        file_timeout = _seconds("file_timeout", self.file_timeout)
        scan_timeout = _seconds("scan_timeout", self.scan_timeout)
        if timeout is None:
            raise LogScanError("timeout must be a positive number of seconds")
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        inventory_url = "/".join(
            [base.rstrip("/"), self.cluster, "inventory", _resolve_ts(self.inventory_ts, context)]
        )
        broker_file = list_inventory(inventory_url).files.get(
            broker_id, f"{inventory_url}/{inventory_broker_file(broker_id)}"
        )
        try:
            summary = read_inventory_summary(broker_file)
            fs, path = fsspec.core.url_to_fs(broker_file)
            with fs.open(path, "rb") as handle:
                dirs = pq.read_table(
                    handle,
                    columns=[
                        "kind",
                        "topic",
                        "partition",
                        "log_dir",
                        "dir_name",
                        "recovery_point",
                        "high_watermark",
                        "log_start_offset",
                        "symlink",
                    ],
                ).to_pylist()
        except FileNotFoundError:
            raise LogScanError(
                f"no inventory of broker {broker_id} at {broker_file}: run the inventory first"
            ) from None
        version, version_source = broker_version(summary.get("facts") or {}, self.kafka_version)
        rule = index_rule(version)
        markers = {d.get("path"): d.get("clean_shutdown") for d in summary.get("log_dirs") or ()}
        checkpoints = {
            (d["log_dir"], d["dir_name"]): (d.get("high_watermark"), d.get("log_start_offset")) for d in dirs
        }
        partitions = [
            PartitionToScan(
                d["log_dir"],
                d["dir_name"],
                d["topic"],
                int(d["partition"]),
                d["recovery_point"],
                markers.get(d["log_dir"]),
            )
            for d in dirs
            if d["kind"] == "normal" and d["topic"] is not None and d["partition"] is not None
        ]
        self.log.info(
            "Broker %d: scanning %d partition directories (Kafka %s from %s: index entries hold the batch's %s "
            "offset; budget %s; nice %d)",
            broker_id,
            len(partitions),
            version,
            version_source,
            rule,
            f"{budget} bytes" if budget else "none",
            self.nice,
        )
        step = max(1, len(partitions) // 10)

        def progress(done: int, total: int, read: int) -> None:
            if done % step == 0 or done == total:
                self.log.info(
                    "Broker %d: %d/%d partitions scanned, %.1f MiB read", broker_id, done, total, read / 2**20
                )

        hook = BrokerHostHook(
            self.ssh_conn_id,
            self.kafka_zookeeper_conn_id,
            broker_hosts=self.broker_hosts,
            python_interpreters=self.python_interpreters,
        )
        results, end = scan_broker_logs(
            hook,
            broker_id,
            partitions,
            index_rule=rule,
            verify_crc=flags["verify_crc"],
            walk_all=flags["walk_all"],
            budget_bytes=budget,
            nice=self.nice,
            timeout=timeout,
            file_timeout=file_timeout,
            scan_timeout=scan_timeout,
            on_progress=progress,
        )
        rows: list[SegmentRow] = []
        skipped, skipped_files, errors = [], [], []
        for part, result in zip(partitions, results, strict=True):
            where = f"{part.log_dir}/{part.dir_name}"
            if "result" in result:
                scan = result["result"]
                high_watermark, log_start = checkpoints.get((part.log_dir, part.dir_name), (None, None))
                rows += segment_rows(
                    broker_id,
                    part.log_dir,
                    part.topic,
                    part.partition,
                    scan,
                    recovery_point=part.recovery_point,
                    log_start_offset=log_start,
                    high_watermark=high_watermark,
                    clean_shutdown=markers.get(part.log_dir),
                )
                skipped_files += [f"{where}/{f['file']}: {f['reason']}" for f in scan.get("skipped") or ()]
                skipped_files += [
                    f"{where}/{s['base_offset']:020d}.log: {s['skipped']}"
                    for s in scan["segments"]
                    if s.get("skipped")
                ]
            elif "skipped" in result:
                skipped.append(f"{where}: {result['skipped']}")
            else:
                errors.append(str(result.get("error")))
        url = _url(base, self.cluster, self.scan_ts or _resolve_ts(None, context))
        table = pa.Table.from_pylist([r.to_row() for r in rows], schema=ROW_SCHEMA)
        _write(f"{url}/broker={broker_id}.parquet", parquet_bytes(table))
        record = {
            "broker_id": broker_id,
            "kafka_version": str(version),
            "version_source": version_source,
            "index_rule": rule,
            "partitions": len(partitions),
            "segments": len(rows),
            "bytes_read": end.get("bytes_read"),
            "budget_bytes": budget,
            "budget_exhausted": bool(end.get("budget_exhausted")),
            "skipped": skipped,
            "skipped_files": skipped_files,
            "stopped": end.get("stopped"),
            "timed_out": bool(end.get("timed_out")),
            "errors": errors,
            "verify_crc": flags["verify_crc"],
            "walk_all": flags["walk_all"],
            "read": end.get("read") or {},
            "seconds": end.get("seconds"),
            "clean_shutdown": {d: m for d, m in markers.items() if d},
            "timeout_s": timeout,
            "file_timeout_s": file_timeout,
            "scan_timeout_s": scan_timeout,
            "inventory": inventory_url,
        }
        _write(f"{url}/_summary/broker={broker_id}.json", json.dumps(record, indent=1).encode())
        if skipped:
            self.log.warning(
                "Broker %d: %d partition(s) not scanned (partial): %s", broker_id, len(skipped), skipped[0]
            )
        for file in skipped_files[:20]:
            self.log.warning("Broker %d: not read: %s", broker_id, file)
        for error in errors:
            self.log.warning("Broker %d: %s", broker_id, error)
        self.log.info(
            "Broker %d: %d segments, %s bytes read in %ss; %s; rows in %s",
            broker_id,
            len(rows),
            end.get("bytes_read"),
            end.get("seconds"),
            describe_read(end.get("read") or {}),
            url,
        )
        return {**record, "scan_dir": url}


class LogScanVerdictOperator(BaseOperator):
    """Judge every scanned broker: findings, the remedy that loses least, one verdict per broker.

    :param cluster: the cluster's name.
    :param base_path: artefact store root.
    :param artefacts_conn_id: the Airflow connection of a remote store base (``s3://``, ``sftp://``);
        default ``[kafka_zk] artefacts_conn_id``, else the store's default credentials.
    :param scan_ts: the scan's folder name (default: the run's).
    :param snapshot_path: a snapshot of the cluster (ISR and leaders for the remedies; which brokers run).
    :param fail_on: ``fails_recovery`` (default), ``loses_data_if_unclean``, ``rebuilds_indexes`` or
        ``never``: the verdict at or above which the task fails.
    """

    template_fields: Sequence[str] = (
        "cluster",
        "base_path",
        "artefacts_conn_id",
        "scan_ts",
        "snapshot_path",
        "fail_on",
    )
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        cluster: str,
        base_path: str | None = None,
        scan_ts: str | None = None,
        snapshot_path: str | None = None,
        fail_on: str = "fails_recovery",
        artefacts_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.artefacts_conn_id = artefacts_conn_id
        self.cluster = cluster
        self.base_path = base_path
        self.scan_ts = scan_ts
        self.snapshot_path = snapshot_path
        self.fail_on = fail_on

    def execute(self, context: Context) -> dict[str, Any]:
        levels = {v.name.lower(): v for v in Verdict}
        if self.fail_on != "never" and self.fail_on not in levels:
            raise LogScanError(f"fail_on must be one of {sorted(levels)} or 'never', not {self.fail_on!r}")
        base = artefacts_url(self.base_path or default_artefacts_base(), self.artefacts_conn_id)
        url = _url(base, self.cluster, self.scan_ts or _resolve_ts(None, context))
        try:
            result = judge_scan(base, self.cluster, url, snapshot=self.snapshot_path)
        except LogScanInputError as exc:
            raise LogScanError(str(exc)) from None
        for line in result["report_text"].splitlines():
            self.log.info("%s", line)
        verdicts = result["verdicts"]
        if self.fail_on != "never":
            threshold = levels[self.fail_on]
            bad = [v for v in verdicts if levels[v["verdict"]] >= threshold]
            if bad:
                raise RestartRiskError(
                    "; ".join(v["describe"] for v in bad) + f". Findings and remedies: {url}/report.txt"
                )
        return {"scan_dir": url, "verdicts": verdicts, "findings": result["findings"]}
