"""Locating the Spark applications and shipping the package to Spark executors.

Both work from an installed wheel: the applications are package files found through
``importlib.resources``, and the ``--py-files`` archive is built from the installed package on the
worker that submits, per run, so no task ever reads another worker's disk.
"""

from __future__ import annotations

import os
import uuid
import zipfile
from importlib import resources
from pathlib import Path

PACKAGE = "airflow_provider_kafka_zk"
ARCHIVE_NAME = f"{PACKAGE}.zip"
APPLICATIONS = ("kafka_zk_audit.py", "kafka_zk_log_scan.py")

_AIRFLOW_LAYERS = {"testing", "hooks", "operators", "sensors", "triggers", "dags"}
"""Sub-packages the executors never need (they import Airflow or start services)."""


def application_path(name: str) -> str:
    """The file ``spark-submit`` runs for one of :data:`APPLICATIONS`.

    :param name: the application's file name, e.g. ``kafka_zk_audit.py``.
    """
    if name not in APPLICATIONS:
        raise ValueError(f"unknown Spark application {name!r}; known: {', '.join(APPLICATIONS)}")
    path = Path(str(resources.files(f"{PACKAGE}.spark_jobs.apps").joinpath(name)))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the installed {PACKAGE} has no {name} (a broken install?)")
    return str(path)


def build_package_zip(dest_dir: str | os.PathLike[str]) -> str:
    """Zip the installed package (without its Airflow layers) for ``--py-files``; atomic, returns the path.

    The executors need only the pure core, the artefact readers and the jobs, never Airflow.

    :param dest_dir: local directory the archive is written to (created if missing).
    """
    package = Path(str(resources.files(PACKAGE)))
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    final = dest / ARCHIVE_NAME
    temp = dest / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        with zipfile.ZipFile(temp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(package.rglob("*")):
                relative = path.relative_to(package.parent)
                top = relative.parts[1] if len(relative.parts) > 1 else ""
                if (
                    path.is_dir()
                    or top in _AIRFLOW_LAYERS
                    or "__pycache__" in relative.parts
                    or path.suffix == ".pyc"
                ):
                    continue
                archive.write(path, relative.as_posix())
        os.replace(temp, final)
    finally:
        temp.unlink(missing_ok=True)
    return str(final)
