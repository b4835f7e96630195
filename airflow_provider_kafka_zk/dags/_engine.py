"""Which engine the daily audit runs on: the cluster file's, unless it says Spark and this host has no
``spark-submit`` (the package installed without its ``spark`` extra), when the audit runs in-process
and the DAG says so where people look (its description in the DAG list, its docs, the parse log)."""

from __future__ import annotations

import logging
import shutil
import warnings
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def audit_engine(cluster: str, settings: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(engine, warning)``: the engine the DAG uses and, when it fell back, why (else None).

    :param cluster: the cluster's name (for the message).
    :param settings: the cluster's settings (``engine``).
    """
    engine = str(settings["engine"])
    if engine != "spark" or shutil.which("spark-submit") is not None:
        return engine, None
    warning = (
        f"WARNING: engine 'spark' for cluster {cluster}, but there is no spark-submit on this host's PATH "
        "(install the package with its extra: pip install 'airflow-provider-kafka-zk[spark]' -c "
        "constraints.txt): the audit runs in-process instead (fine up to a few tens of thousands of "
        'partitions); set engine = "in-process" in the cluster file to silence this'
    )
    log.warning("%s", warning)
    warnings.warn(warning, UserWarning, stacklevel=2)
    return "in-process", warning
