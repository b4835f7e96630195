"""A drain run's folder: its files' names, where it is, the typed errors of the drain steps, and the
readers every step shares (``throttles.json``, the plan's pinned identity).

``<base>/<cluster>/drain/<ts>/`` (and ``post-maintenance/<ts>/``, a move-back written as a drain plan)
holds what the drain steps hand each other. Every file is validated whole before a step uses it,
and every failure names the file by its full URL. Below the operators and the maintenance layer,
which both read and write the folder (:mod:`airflow_provider_kafka_zk.operators.drain_artefacts`
re-exports everything here, with the plan-document and inventory helpers of the plan step).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_zk.artefacts.files import validate_cluster_name, write_atomically
from airflow_provider_kafka_zk.kafka import znodes
from airflow_provider_kafka_zk.kafka.drain_execution import Refusal, Step
from airflow_provider_kafka_zk.kafka.reassignment import TopicPartition
from airflow_provider_kafka_zk.kafka.safety import ClusterIdentity

PLAN_FORMAT = "kafka-zk-drain-plan"
ROLLBACK_FILE = "rollback.json"
REASSIGNMENT_FILE = "reassignment.json"
PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.txt"
THROTTLES_FILE = "throttles.json"
THROTTLES_CLEARED_FILE = "throttles_cleared.json"
VERIFY_FILE = "verify.json"
REPORT_FILE = "report.txt"
SAFETY_SNAPSHOT_FILE = "safety_snapshot.json"  # the snapshot the execute step checked the plan's read against


# ---------------------------------------------------------------------------------------------
# Typed errors: each says which znode / partition and what to do; none is worth a retry
# ---------------------------------------------------------------------------------------------


class DrainError(AirflowFailException):
    """A drain step refused or failed for a reason a retry cannot change."""


class IncompletePlanError(DrainError):
    """Some partitions in scope cannot be moved; the run stops unless ``allow_partial`` is true."""


class ReassignmentInFlightError(DrainError):
    """Another reassignment is running (the znode or adding/removing replicas in a topic znode)."""


class PlanOutdatedError(DrainError):
    """ZooKeeper no longer shows the assignment the plan was made from."""


class PlanReadDisagreementError(PlanOutdatedError):
    """The plan was made from a planning read of ZooKeeper, and the run's safety snapshot, or
    ZooKeeper before the first write, shows a different cluster where it matters to the drain."""


class ThrottlesStillNeededError(DrainError):
    """Partitions of this plan are still moving: removing the throttles now would unthrottle them."""


class DrainVerificationError(DrainError):
    """After the drain, ZooKeeper (or the disks) do not show what the plan promised."""


class DrainPlanError(DrainError):
    """A drain folder's file (``plan.json``, ``throttles.json``, ...) is missing or malformed.

    The message names the file by its full URL and says what is wrong with it.
    """


class DrainFileMissingError(DrainPlanError, FileNotFoundError):
    """The file is not there (still a FileNotFoundError for callers that handle that)."""


class DrainFileUnreadableError(DrainPlanError, ValueError):
    """The file is not UTF-8 JSON (still a ValueError for callers that handle that)."""


class DrainInventoryError(DrainError):
    """A file of the inventory folder is misnamed or unreadable; the message names the file."""


_REFUSAL_ERRORS: dict[Refusal, type[DrainError]] = {
    Refusal.FOREIGN_REASSIGNMENT: ReassignmentInFlightError,
    Refusal.PLAN_OUTDATED: PlanOutdatedError,
    Refusal.STILL_MOVING: ThrottlesStillNeededError,
    Refusal.WAIT_TIMED_OUT: DrainError,
    Refusal.WAIT_FAILED: DrainError,
}


def refusal_error(step: Step, advice: str | None = None) -> DrainError:
    """The typed error a refusing step of the core (:class:`Step`) is raised as.

    :param step: a step with ``refusal`` set.
    :param advice: the throttle advice to append after a space (None: the message alone).
    """
    if step.refusal is None:
        raise ValueError(f"not a refusal: {step.action.value} ({step.message})")
    message = step.message if advice is None else f"{step.message} {advice}"
    return _REFUSAL_ERRORS[step.refusal](message)


# ---------------------------------------------------------------------------------------------
# Artefacts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainLocation:
    """``<base>/<cluster>/drain/<ts>/`` on a local path or any fsspec URL.

    :param url: the folder (no trailing slash needed).
    """

    url: str

    @classmethod
    def of(cls, base: str, cluster: str, ts: str) -> DrainLocation:
        """The run folder of ``cluster`` at ``ts`` under the artefact store ``base``.

        :param base: the artefact store (path or fsspec URL).
        :param cluster: the cluster's name (checked: it becomes a folder name).
        :param ts: the run's timestamp folder name.
        """
        validate_cluster_name(cluster)
        return cls("/".join([base.rstrip("/"), cluster, "drain", ts]))

    def _fs(self) -> tuple[Any, str]:
        fs, root = fsspec.core.url_to_fs(self.url)
        return fs, root.rstrip("/")

    def exists(self, name: str) -> bool:
        """Whether the folder holds ``name`` (a step's own earlier output, say)."""
        fs, root = self._fs()
        return fs.exists(f"{root}/{name}")

    def path(self, name: str) -> str:
        """The full URL of ``name`` in the folder, as messages name it."""
        return f"{self.url.rstrip('/')}/{name}"

    def write(self, name: str, payload: bytes | str) -> str:
        """Write via a temporary name and a rename, so a reader never sees half a file."""
        data = payload.encode("utf-8") if isinstance(payload, str) else payload
        fs, root = self._fs()
        write_atomically(fs, f"{root}/{name}", data)
        return self.path(name)

    def read_json(self, name: str) -> Any:
        """The file's JSON; DrainFileMissingError / DrainFileUnreadableError naming its URL."""
        text = self.read_text(name)
        try:
            return json.loads(text)
        except ValueError as exc:
            raise DrainFileUnreadableError(f"{self.path(name)} is not JSON ({exc})") from None

    def read_text(self, name: str) -> str:
        """The file's UTF-8 text; DrainFileMissingError / DrainFileUnreadableError naming its URL."""
        fs, root = self._fs()
        try:
            data = fs.cat_file(f"{root}/{name}")
        except FileNotFoundError:
            raise DrainFileMissingError(f"{self.path(name)} is missing") from None
        except IsADirectoryError:
            raise DrainFileUnreadableError(f"{self.path(name)} is a directory, not a file") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DrainFileUnreadableError(f"{self.path(name)} is not UTF-8 text ({exc})") from None


def plan_identity(plan: Mapping[str, Any], where: str) -> ClusterIdentity:
    """The cluster identity the plan was made for (from its safety snapshot); refuses plans without one."""
    record = plan.get("identity")
    if not record or not record.get("cluster_id"):
        raise DrainPlanError(
            f"{where}/{PLAN_FILE} pins no cluster identity (made by an older version, or from a snapshot "
            "without /cluster/id): make a new plan"
        )
    try:
        return ClusterIdentity.from_dict(record, f"{where}/{PLAN_FILE}")
    except ValueError as exc:
        raise DrainPlanError(str(exc)) from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: Any, minimum: int | None = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum)


def _broker_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_int(b, 0) for b in value)


class _PlanCheck:
    """Structure checks of one plan or throttles file; every failure names the file (full URL)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, what: str) -> DrainPlanError:
        return DrainPlanError(f"{self.where}: {what}")

    def object(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{what} must be a JSON object, not {_shown(value)}")
        return value

    def key(self, record: Mapping[str, Any], key: str, what: str) -> Any:
        if key not in record:
            raise self.fail(f"{what} has no {key!r}")
        return record[key]

    def list(self, value: Any, what: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{what} must be a JSON list, not {_shown(value)}")
        return value

    def topic(self, value: Any, what: str) -> str:
        try:
            return znodes.validate_topic_name(value, source=what)
        except ValueError as exc:
            raise self.fail(str(exc)) from None  # names ``what`` as its source

    def partition(self, record: Mapping[str, Any], what: str) -> TopicPartition:
        topic = self.topic(self.key(record, "topic", what), f"{what} 'topic'")
        partition = self.key(record, "partition", what)
        if not _is_int(partition, 0):
            raise self.fail(
                f"{what} ({topic}): 'partition' must be a whole number >= 0, not {_shown(partition)}"
            )
        return topic, partition

    def brokers(self, record: Mapping[str, Any], key: str, what: str) -> list[int]:
        value = self.key(record, key, what)
        if not _broker_list(value):
            raise self.fail(f"{what}: {key!r} must be a non-empty list of broker ids, not {_shown(value)}")
        if len(set(value)) != len(value):
            raise self.fail(f"{what}: {key!r} names a broker twice ({value})")
        return value


def _throttle_entities(check: _PlanCheck, value: Any, what: str) -> dict[str, dict[str, str]]:
    for key, values in check.object(value, what).items():
        entity_type, _, name = key.partition("/")
        if entity_type == "topics":
            check.topic(name, f"{what} entity {key!r}")
        elif entity_type != "brokers" or not (name.isascii() and name.isdigit()):
            raise check.fail(f"{what} entity {key!r} is not 'topics/<name>' or 'brokers/<id>'")
        config = check.object(values, f"{what} entity {key!r}")
        if not all(isinstance(v, str) for v in config.values()):
            raise check.fail(f"{what} entity {key!r} holds non-text values: {_shown(config)}")
    return value


def load_throttle_record(location: DrainLocation) -> dict[str, Any]:
    """``throttles.json`` validated: ``{"entities": {"topics/<t>"|"brokers/<id>": {key: value}}, "previous": {...}}``.

    DrainPlanError naming the file (full URL) when it is missing, not JSON, or of another shape.
    ``previous`` (the values this run replaced) is optional and defaults to an empty map.
    """
    check = _PlanCheck(location.path(THROTTLES_FILE))
    record = check.object(location.read_json(THROTTLES_FILE), "the document")
    _throttle_entities(check, check.key(record, "entities", "the document"), "'entities'")
    _throttle_entities(check, record.setdefault("previous", {}), "'previous'")
    return record
