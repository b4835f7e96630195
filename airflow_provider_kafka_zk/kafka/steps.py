"""The steps of a mutation, as the pure planners make them and the step executor carries them out.

A mutation (a topicId repair, a drain, a move-back, a cleanup, an election) is a list of typed,
frozen steps. Each step names what it reads and what it expects to find there -- a znode at a
version with given bytes, a file on a broker holding given content, a broker that must be
registered -- so :mod:`airflow_provider_kafka_zk.maintenance.executor` can check *every* step of a
run before the run's first write (the dry run is the real run minus the writes), and each has a
stable ``id`` so a retried run resumes after the last completed one.

The decisions the preflight makes are pure functions here: :func:`znode_verdict` (is a znode still
what the plan read, or already what the step writes), :func:`partition_file_verdict`,
:func:`render_command` (every template rendered with every value it will get, a bad placeholder a
typed :class:`CommandTemplateError` naming template and placeholder). Each refusal is a
:class:`Refusal`: a stable rule name, the cause with concrete ids, and what to do.

Steps of one ``GROUP`` that stand next to each other in a plan are applied in one ZooKeeper multi
(all topic-id writes of a repair: a race changes nothing). No I/O, no Airflow here.
"""

from __future__ import annotations

import base64
import enum
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .znodes import CONTROLLER, PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS

# ---------------------------------------------------------------------------------------------
# What a step reads, and the refusals
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZnodeExpectation:
    """A znode a step reads or writes, as the plan saw it.

    :param path: chroot-relative path.
    :param version: the zkVersion the plan read; None: the znode must not exist.
    :param data: the bytes the plan read (compared with the version; None: not compared).
    :param done_data: the bytes the step writes there: found, the step already ran (a resumed run).
    :param czxid: the znode's incarnation the plan read (a topic deleted and created again under
        the same name has another one); None: not compared.
    :param any_version: the znode must exist (and be the incarnation ``czxid``) but may have been
        rewritten since (a topic znode a reassignment of the same run rewrites): version and bytes
        are not compared.
    :param done_absent: the step deletes the znode: found absent, an earlier try already did.
    """

    path: str
    version: int | None
    data: bytes | None = None
    done_data: bytes | None = None
    czxid: int | None = None
    any_version: bool = False
    done_absent: bool = False


@dataclass(frozen=True)
class ObservedZnode:
    """A znode as the preflight read it (None where it does not exist)."""

    data: bytes | None
    version: int
    czxid: int = 0


@dataclass(frozen=True)
class Refusal:
    """A named refusal: the rule that refused, its cause (concrete znodes, files, brokers,
    partitions) and what to do. ``subjects`` lists what it names, for tests and reports."""

    rule: str
    cause: str
    action: str
    step_id: str | None = None
    subjects: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f" (step {self.step_id})" if self.step_id else ""
        return f"[{self.rule}]{where} {self.cause}. {self.action}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "step": self.step_id,
            "cause": self.cause,
            "action": self.action,
            "subjects": list(self.subjects),
        }


class StepState(enum.StrEnum):
    """A step's state as the preflight finds it: still to do, or already done by an earlier try."""

    PENDING = "pending"
    DONE = "done"


PLAN_AGAIN = "Nothing was written; make a new plan from a fresh snapshot and inventory"


def znode_verdict(
    step_id: str, expected: ZnodeExpectation, observed: ObservedZnode | None
) -> StepState | Refusal:
    """Whether a znode is still what the plan read (``PENDING``), already what the step writes
    (``DONE``), or neither (a :class:`Refusal` naming the znode and what differs)."""
    path = expected.path
    if expected.version is None:
        if observed is None:
            return StepState.PENDING
        if expected.done_data is not None and observed.data == expected.done_data:
            return StepState.DONE
        return Refusal(
            "znode-exists",
            f"{path} exists (version {observed.version}) but the plan needs it absent",
            "Wait for whoever wrote it to finish, then plan again",
            step_id,
            (path,),
        )
    if observed is None and expected.done_absent:
        return StepState.DONE
    if observed is None:
        return Refusal(
            "znode-gone",
            f"{path} is gone since the plan (it was at version {expected.version})",
            PLAN_AGAIN,
            step_id,
            (path,),
        )
    if expected.done_data is not None and observed.data == expected.done_data:
        return StepState.DONE
    if expected.czxid is not None and observed.czxid != expected.czxid:
        return Refusal(
            "znode-recreated",
            f"{path} was deleted and created again since the plan (czxid {observed.czxid:#x}, the plan "
            f"read {expected.czxid:#x})",
            PLAN_AGAIN,
            step_id,
            (path,),
        )
    if expected.any_version:
        return StepState.PENDING
    same_data = expected.data is None or observed.data == expected.data
    if observed.version != expected.version or not same_data:
        return Refusal(
            "znode-changed",
            f"{path} changed since the plan: version {observed.version} (the plan read {expected.version}), "
            f"data {'the same' if same_data else 'different'}",
            PLAN_AGAIN,
            step_id,
            (path,),
        )
    return StepState.PENDING


def partition_file_verdict(
    step_id: str,
    broker_id: int,
    path: str,
    holds: str | None,
    target: str,
    status: str,
    content: bytes | None,
    detail: str | None,
) -> StepState | Refusal:
    """A ``partition.metadata`` to be removed, as read on the broker (no symlink followed).

    :param holds: the id the plan read in it (the removal is planned against that content).
    :param target: the id the replica adopts after its restart: found already, the reset is done.
    :param status: the host script's status (``present``, ``absent``, ``refused``).
    """
    if status == "refused":
        return Refusal(
            "file-refused",
            f"broker {broker_id}: {path} cannot be read safely ({detail})",
            "Look at the file on the host; nothing was removed",
            step_id,
            (f"broker {broker_id}:{path}",),
        )
    if status == "absent" or content is None:
        return StepState.DONE  # already removed (an earlier try): nothing left to do for it
    text = content.decode("utf-8", "replace")
    if text.endswith(f"topic_id: {target}"):
        return StepState.DONE
    if holds is not None and not text.endswith(f"topic_id: {holds}"):
        return Refusal(
            "file-changed",
            f"broker {broker_id}: {path} no longer holds {holds} ({text!r})",
            PLAN_AGAIN,
            step_id,
            (f"broker {broker_id}:{path}",),
        )
    return StepState.PENDING


# ---------------------------------------------------------------------------------------------
# Command templates
# ---------------------------------------------------------------------------------------------


class CommandTemplateError(ValueError):
    """A command template cannot be rendered safely; names the template and the placeholder."""

    def __init__(self, template_name: str, template: str, placeholder: str | None, rule: str) -> None:
        self.template_name = template_name
        self.template = template
        self.placeholder = placeholder
        self.rule = rule
        super().__init__(f"{template_name} template {template!r}: {rule}")


def _shell_quote_state(text: str, quote: str | None, escaped: bool) -> tuple[str | None, bool]:
    """POSIX sh quoting after ``text``: the open quote (``'``, ``"`` or None), a pending backslash."""
    for ch in text:
        if escaped:
            escaped = False
        elif quote == "'":
            if ch == "'":
                quote = None
        elif ch == "\\":
            escaped = True
        elif quote == '"':
            if ch == '"':
                quote = None
        elif ch in "'\"":
            quote = ch
    return quote, escaped


def command_template_parts(name: str, template: Any, allowed: Sequence[str]) -> list[tuple[str, str | None]]:
    """``template`` split into (literal, placeholder or None) pieces; every rule checked.

    Only the ``allowed`` placeholders may appear in braces (``{{``/``}}`` are literal braces); a
    format spec or conversion is refused, and so is a placeholder inside the template's own quotes
    or right after a backslash (the shell quoting added when it is substituted would not hold there).

    :raises CommandTemplateError: naming ``name``, the template and the placeholder.
    """
    if not isinstance(template, str) or not template.strip():
        raise CommandTemplateError(name, str(template), None, "must be a non-empty string")
    if "\0" in template:
        raise CommandTemplateError(name, template, None, "must not contain a NUL byte")
    parts: list[tuple[str, str | None]] = []
    quote: str | None = None
    escaped = False
    allowed_text = " and ".join(f"{{{f}}}" for f in allowed)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # unbalanced braces
        raise CommandTemplateError(
            name, template, None, f"{exc} (write {{{{ and }}}} for literal braces)"
        ) from None
    for literal, placeholder, spec, conversion in parsed:
        quote, escaped = _shell_quote_state(literal, quote, escaped)
        if placeholder is None:
            parts.append((literal, None))
            continue
        if placeholder not in allowed:
            raise CommandTemplateError(
                name,
                template,
                placeholder,
                f"unknown placeholder {{{placeholder}}}; only {allowed_text} are substituted "
                "(write {{ and }} for literal braces)",
            )
        if spec or conversion is not None:
            raise CommandTemplateError(
                name,
                template,
                placeholder,
                f"placeholder {{{placeholder}}} must be plain (no format spec or conversion)",
            )
        if quote is not None or escaped:
            raise CommandTemplateError(
                name,
                template,
                placeholder,
                f"placeholder {{{placeholder}}} stands inside quotes or after a backslash; it is shell-quoted "
                "when substituted, so write it bare",
            )
        parts.append((literal, placeholder))
    return parts


def render_command(name: str, template: Any, values: Mapping[str, str], allowed: Sequence[str]) -> str:
    """``template`` with each placeholder replaced by its value, shell-quoted.

    :param name: the template's name in messages (``restart_command``).
    :param values: a value for every allowed placeholder.
    :raises CommandTemplateError: a rule of :func:`command_template_parts`, or a value missing.
    """
    import shlex

    out = []
    for literal, placeholder in command_template_parts(name, template, allowed):
        out.append(literal)
        if placeholder is not None:
            if placeholder not in values:
                raise CommandTemplateError(
                    name, template, placeholder, f"placeholder {{{placeholder}}} has no value"
                )
            out.append(shlex.quote(str(values[placeholder])))
    return "".join(out)


def template_refusals(
    name: str, template: Any, allowed: Sequence[str], uses: Iterable[tuple[str | None, Mapping[str, str]]]
) -> list[Refusal]:
    """Render ``template`` with every set of values it will get (``uses``: (step id, values));
    one refusal per distinct failure, before anything runs."""
    refusals: list[Refusal] = []
    seen: set[str] = set()
    for step_id, values in uses:
        try:
            render_command(name, template, values, allowed)
        except CommandTemplateError as exc:
            if str(exc) in seen:
                continue
            seen.add(str(exc))
            subjects = (name,) if exc.placeholder is None else (name, f"{{{exc.placeholder}}}")
            refusals.append(
                Refusal(
                    "command-template",
                    str(exc),
                    f"Fix {name} (only "
                    + ", ".join(f"{{{a}}}" for a in allowed)
                    + " are substituted); nothing was run",
                    step_id,
                    subjects,
                )
            )
    return refusals


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Step:
    """One step of a mutation: a stable ``id`` (progress is recorded per id) and what it reads."""

    id: str
    KIND: ClassVar[str] = ""
    #: steps of the same group standing next to each other apply in one ZooKeeper multi
    GROUP: ClassVar[str | None] = None
    #: whether the step changes the cluster (waits do not): the lease is taken before it
    MUTATES: ClassVar[bool] = True

    @property
    def kind(self) -> str:
        return self.KIND

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        """The znodes the preflight reads and compares with the plan."""
        return ()

    def brokers(self) -> tuple[int, ...]:
        """Brokers that must be registered when the step runs."""
        return ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.KIND} {self.id}"


@dataclass(frozen=True)
class TopicIdWrite(Step):
    """Write ``topic_id`` into a topic znode (versioned, partitions unchanged)."""

    KIND: ClassVar[str] = "write_topic_id"
    GROUP: ClassVar[str | None] = "topic-id-writes"
    topic: str = ""
    path: str = ""
    expected_version: int = 0
    old_data: bytes = b""
    new_data: bytes = b""
    old_topic_id: str | None = None
    topic_id: str = ""

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        return (ZnodeExpectation(self.path, self.expected_version, self.old_data, self.new_data),)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "topic": self.topic,
            "path": self.path,
            "expected_version": self.expected_version,
            "old_topic_id": self.old_topic_id,
            "topic_id": self.topic_id,
            "old_data_b64": _b64(self.old_data),
            "new_data_b64": _b64(self.new_data),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopicIdWrite:
        return cls(
            id=str(d["id"]),
            topic=str(d["topic"]),
            path=str(d["path"]),
            expected_version=int(d["expected_version"]),
            old_data=base64.b64decode(d["old_data_b64"]),
            new_data=base64.b64decode(d["new_data_b64"]),
            old_topic_id=d.get("old_topic_id"),
            topic_id=str(d["topic_id"]),
        )

    def describe(self) -> str:
        if not self.topic_id:  # an undo putting back a znode that had no id
            return (
                f"write {self.path} back without topic_id (versioned, expected version {self.expected_version}; "
                f"holds {self.old_topic_id or 'no id'} now); partitions unchanged"
            )
        return (
            f"write topic_id {self.topic_id} into {self.path} (versioned, expected version {self.expected_version}; "
            f"was {self.old_topic_id or 'no id'}); partitions unchanged"
        )


@dataclass(frozen=True)
class ControllerMove(Step):
    """Delete ``/controller`` once so a new controller loads the topic ids from ZooKeeper."""

    KIND: ClassVar[str] = "move_controller"
    topics: tuple[str, ...] = ()
    controller_at_plan: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "path": CONTROLLER,
            "controller_at_plan": self.controller_at_plan,
            "topics": list(self.topics),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControllerMove:
        return cls(
            id=str(d["id"]),
            topics=tuple(d.get("topics") or ()),
            controller_at_plan=d.get("controller_at_plan"),
        )

    def describe(self) -> str:
        return (
            f"delete /controller (controller at plan time: broker {self.controller_at_plan}) so a new controller "
            f"loads the restored id of {', '.join(self.topics)}; partitions keep serving while it moves"
        )


@dataclass(frozen=True)
class HealthWait(Step):
    """Wait until every partition of ``topics`` with a running replica has a leader and a full ISR."""

    KIND: ClassVar[str] = "wait_healthy"
    MUTATES: ClassVar[bool] = False
    topics: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "id": self.id, "topics": list(self.topics)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HealthWait:
        return cls(id=str(d["id"]), topics=tuple(d.get("topics") or ()))

    def describe(self) -> str:
        return f"wait until every partition of {', '.join(self.topics)} has a leader and full ISR"


@dataclass(frozen=True)
class PlannedFile:
    """One file a :class:`FileRemoval` removes (its bytes go to the rollback artefact first)."""

    broker_id: int
    topic: str
    partition: int
    log_dir: str
    dir_name: str
    name: str
    topic_id_on_disk: str | None  # what partition.metadata held when the plan read it
    target_id: str  # what the replica adopts at restart (ZooKeeper's id once the plan's writes ran)

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "topic": self.topic,
            "partition": self.partition,
            "log_dir": self.log_dir,
            "dir_name": self.dir_name,
            "name": self.name,
            "topic_id_on_disk": self.topic_id_on_disk,
            "target_id": self.target_id,
            "path": self.path,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlannedFile:
        return cls(
            broker_id=int(d["broker_id"]),
            topic=str(d["topic"]),
            partition=int(d["partition"]),
            log_dir=str(d["log_dir"]),
            dir_name=str(d["dir_name"]),
            name=str(d["name"]),
            topic_id_on_disk=d.get("topic_id_on_disk"),
            target_id=str(d["target_id"]),
        )


@dataclass(frozen=True)
class _BrokerFiles(Step):
    """Files of one broker a step acts on (their record type: ``FILE``)."""

    FILE: ClassVar[Any] = None
    broker_id: int = -1
    files: tuple[Any, ...] = ()

    def brokers(self) -> tuple[int, ...]:
        return (self.broker_id,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "broker_id": self.broker_id,
            "files": [f.to_dict() for f in self.files],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        return cls(
            id=str(d["id"]),
            broker_id=int(d["broker_id"]),
            files=tuple(cls.FILE.from_dict(f) for f in d.get("files") or ()),
        )


@dataclass(frozen=True)
class FileRemoval(_BrokerFiles):
    """Copy, then remove, files on one broker (the broker keeps running on them until restarted)."""

    KIND: ClassVar[str] = "reset_files"
    FILE: ClassVar[Any] = PlannedFile
    files: tuple[PlannedFile, ...] = ()

    def describe(self) -> str:
        return (
            f"broker {self.broker_id}: copy then remove {len(self.files)} file(s) "
            "(the broker keeps running on them until restarted)"
        )


@dataclass(frozen=True)
class ReplicaDisk:
    """One replica's directory as the inventory read it: what the restart rules need.

    :param topic_id: the id in its ``partition.metadata`` (None: no file).
    :param error: the file exists but cannot be read (Kafka takes the log dir offline at load).
    """

    broker_id: int
    topic: str
    partition: int
    log_dir: str
    topic_id: str | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "topic": self.topic,
            "partition": self.partition,
            "log_dir": self.log_dir,
            "topic_id": self.topic_id,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaDisk:
        return cls(
            int(d["broker_id"]),
            str(d["topic"]),
            int(d["partition"]),
            str(d["log_dir"]),
            d.get("topic_id"),
            d.get("error"),
        )


@dataclass(frozen=True)
class BrokerRestart(Step):
    """Run the restart command on one broker, then wait for its gate.

    ``disk`` is what the plan read of every replica of every partition with a replica on the broker
    (on all brokers): the restart rules are judged again at the preflight from it and the live state.
    ``resets`` are the partitions whose ``partition.metadata`` the plan removes on it first.
    """

    KIND: ClassVar[str] = "restart_broker"
    broker_id: int = -1
    is_controller: bool = False
    topics: tuple[str, ...] = ()
    resets: tuple[tuple[str, int], ...] = ()
    disk: tuple[ReplicaDisk, ...] = ()

    def brokers(self) -> tuple[int, ...]:
        return (self.broker_id,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "broker_id": self.broker_id,
            "is_controller": self.is_controller,
            "topics": list(self.topics),
            "resets": [[t, p] for t, p in self.resets],
            "disk": [d.to_dict() for d in self.disk],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BrokerRestart:
        return cls(
            id=str(d["id"]),
            broker_id=int(d["broker_id"]),
            is_controller=bool(d.get("is_controller")),
            topics=tuple(d.get("topics") or ()),
            resets=tuple((str(t), int(p)) for t, p in d.get("resets") or ()),
            disk=tuple(ReplicaDisk.from_dict(x) for x in d.get("disk") or ()),
        )

    def describe(self) -> str:
        return (
            f"restart broker {self.broker_id}{' (the controller, last)' if self.is_controller else ''} and wait: "
            f"registered again, back in the ISR of {', '.join(self.topics)}, under-replicated count back to the "
            "pre-run baseline, no partition left without a leader"
        )


# --- a drain (and a post-maintenance move-back, written as a drain plan) -----------------------


def _config_path(entity_type: str, entity_name: str) -> str:
    return f"/config/{entity_type}/{entity_name}"


@dataclass(frozen=True)
class PartitionMove:
    """One partition of a reassignment, identified by its topic's incarnation (not by name only).

    :param topic_id: the topic's id when the plan read it (None: the znode had none).
    :param topic_czxid: the topic znode's creation zxid when the plan read it: a topic deleted and
        created again under the same name has another one (None: an older plan, not compared).
    """

    topic: str
    partition: int
    replicas_before: tuple[int, ...]
    replicas_after: tuple[int, ...]
    topic_id: str | None = None
    topic_czxid: int | None = None
    size_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas_before": list(self.replicas_before),
            "replicas_after": list(self.replicas_after),
            "topic_id": self.topic_id,
            "topic_czxid": self.topic_czxid,
            "size_bytes": self.size_bytes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionMove:
        czxid = d.get("topic_czxid")
        return cls(
            str(d["topic"]),
            int(d["partition"]),
            tuple(int(b) for b in d["replicas_before"]),
            tuple(int(b) for b in d["replicas_after"]),
            d.get("topic_id"),
            None if czxid is None else int(czxid),
            int(d.get("size_bytes") or 0),
        )


@dataclass(frozen=True)
class DrainBatch(Step):
    """Create ``/admin/reassign_partitions`` for one batch of moves, then wait for Kafka to finish it.

    What ``/admin/reassign_partitions`` must show (absent, this batch's own request, or an earlier
    batch of the same plan still in flight) is judged by the handler, not as a znode expectation:
    a retried run finds its own request there and waits for it. Every target broker must be
    registered (a replica assigned to a broker that is down never joins the ISR, so the batch never
    completes); every moved topic must still be the incarnation the plan read (any version: the
    reassignment itself rewrites the topic znode).
    """

    KIND: ClassVar[str] = "drain_batch"
    batch: int = 0  # 0-based, in plan order
    batches: int = 1  # how many batches the plan has (for labels)
    moves: tuple[PartitionMove, ...] = ()

    @property
    def label(self) -> str:
        return f"batch {self.batch + 1}/{self.batches}"

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        incarnations = {m.topic: m.topic_czxid for m in self.moves if m.topic_czxid is not None}
        return tuple(
            ZnodeExpectation(f"/brokers/topics/{t}", -1, czxid=c, any_version=True)
            for t, c in sorted(incarnations.items())
        )

    def brokers(self) -> tuple[int, ...]:
        return tuple(sorted({b for m in self.moves for b in m.replicas_after}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "batch": self.batch,
            "batches": self.batches,
            "moves": [m.to_dict() for m in self.moves],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DrainBatch:
        return cls(
            id=str(d["id"]),
            batch=int(d["batch"]),
            batches=int(d.get("batches") or 1),
            moves=tuple(PartitionMove.from_dict(m) for m in d.get("moves") or ()),
        )

    def describe(self) -> str:
        shown = ", ".join(
            f"{m.topic}-{m.partition} {list(m.replicas_before)} -> {list(m.replicas_after)}"
            for m in self.moves[:10]
        )
        more = f" and {len(self.moves) - 10} more" if len(self.moves) > 10 else ""
        return (
            f"create {REASSIGN_PARTITIONS} for {self.label}: {len(self.moves)} partition(s) ({shown}{more}), "
            "then wait until Kafka completed it"
        )


@dataclass(frozen=True)
class ThrottleSet(Step):
    """Set replication throttle keys in one config entity (+ its change notification), before a batch.

    ``kafka-configs``' ZooKeeper path: read the whole map, merge these keys, versioned write, notify.
    The entity's version is not planned (batches of one run write the same entities in turn); the
    preflight checks the znode is a readable config entity. ``batch_step`` is the batch the
    throttles are for: already complete, they are not needed.
    """

    KIND: ClassVar[str] = "throttle_set"
    GROUP: ClassVar[str | None] = "throttle-sets"
    entity_type: str = ""  # topics | brokers
    entity_name: str = ""
    keys: tuple[tuple[str, str], ...] = ()
    batch_step: str = ""

    @property
    def entity_path(self) -> str:
        return _config_path(self.entity_type, self.entity_name)

    @property
    def entity_key(self) -> str:
        """``topics/<name>`` or ``brokers/<id>``, as ``throttles.json`` names it."""
        return f"{self.entity_type}/{self.entity_name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "entity_type": self.entity_type,
            "entity_name": self.entity_name,
            "keys": dict(self.keys),
            "batch_step": self.batch_step,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ThrottleSet:
        return cls(
            id=str(d["id"]),
            entity_type=str(d["entity_type"]),
            entity_name=str(d["entity_name"]),
            keys=tuple(sorted((str(k), str(v)) for k, v in dict(d["keys"]).items())),
            batch_step=str(d.get("batch_step") or ""),
        )

    def describe(self) -> str:
        return f"set {dict(self.keys)} on {self.entity_path} (+ a config change notification)"


@dataclass(frozen=True)
class ThrottleClear(Step):
    """Remove the throttle keys a run set from one entity, only where they still hold its values."""

    KIND: ClassVar[str] = "throttle_clear"
    entity_type: str = ""
    entity_name: str = ""
    keys: tuple[tuple[str, str], ...] = ()

    @property
    def entity_path(self) -> str:
        return _config_path(self.entity_type, self.entity_name)

    @property
    def entity_key(self) -> str:
        return f"{self.entity_type}/{self.entity_name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "entity_type": self.entity_type,
            "entity_name": self.entity_name,
            "keys": dict(self.keys),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ThrottleClear:
        return cls(
            id=str(d["id"]),
            entity_type=str(d["entity_type"]),
            entity_name=str(d["entity_name"]),
            keys=tuple(sorted((str(k), str(v)) for k, v in dict(d["keys"]).items())),
        )

    def describe(self) -> str:
        return (
            f"remove {sorted(k for k, _ in self.keys)} from {self.entity_path} where they still hold this run's "
            "values (+ a config change notification)"
        )


# --- a preferred leader election ------------------------------------------------------------------


@dataclass(frozen=True)
class ElectionRequest(Step):
    """Create ``/admin/preferred_replica_election`` for ``partitions``, then wait until the controller
    processed it (it deletes the znode).

    The znode (absent, or this run's own request in flight) is judged by the handler. A partition
    is requested only while its preferred replica is registered and in the ISR when the request is
    made; one that is not then is reported, not requested (Kafka's election would not move it).
    """

    KIND: ClassVar[str] = "election_request"
    partitions: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, preferred replica)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "id": self.id, "partitions": [list(p) for p in self.partitions]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ElectionRequest:
        return cls(
            id=str(d["id"]),
            partitions=tuple((str(t), int(p), int(b)) for t, p, b in d.get("partitions") or ()),
        )

    def describe(self) -> str:
        shown = ", ".join(f"{t}-{p}" for t, p, _ in self.partitions[:20])
        more = f" and {len(self.partitions) - 20} more" if len(self.partitions) > 20 else ""
        return (
            f"create {PREFERRED_REPLICA_ELECTION} with {len(self.partitions)} partition(s) ({shown}{more}), "
            "then wait until the controller processed it"
        )


# --- a deletion cleanup -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QuarantineDir:
    """One leftover directory of a deleted topic: ``<log_dir>/<name>`` (``kind`` from its name)."""

    log_dir: str
    name: str
    kind: str
    topic: str

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"log_dir": self.log_dir, "name": self.name, "kind": self.kind, "topic": self.topic}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuarantineDir:
        return cls(str(d["log_dir"]), str(d["name"]), str(d["kind"]), str(d["topic"]))


@dataclass(frozen=True)
class _QuarantineDirs(Step):
    """Directories of deleted topics on one broker host and the quarantine folder they go to (or
    come back from): ``<quarantine_dir or <log dir>/../kafka-quarantine>/<ts>/<name>``.

    Every topic whose directories move must still be gone from ZooKeeper (no topic znode, no
    deletion marker): a topic created again may own directories of that name. The host checks the
    rest (paths, symlinks, the filesystem, a running broker) in a dry run of the same script.
    """

    broker_id: int = -1
    dirs: tuple[QuarantineDir, ...] = ()
    quarantine_dir: str | None = None
    ts: str = ""
    broker_running: bool | None = None
    allow_running_broker_orphans: bool = False

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({d.topic for d in self.dirs}))

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        return tuple(
            ZnodeExpectation(path, None)
            for t in self.topics
            for path in (f"/brokers/topics/{t}", f"/admin/delete_topics/{t}")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "broker_id": self.broker_id,
            "dirs": [d.to_dict() for d in self.dirs],
            "quarantine_dir": self.quarantine_dir,
            "ts": self.ts,
            "broker_running": self.broker_running,
            "allow_running_broker_orphans": self.allow_running_broker_orphans,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        return cls(
            id=str(d["id"]),
            broker_id=int(d["broker_id"]),
            dirs=tuple(QuarantineDir.from_dict(x) for x in d.get("dirs") or ()),
            quarantine_dir=d.get("quarantine_dir"),
            ts=str(d["ts"]),
            broker_running=d.get("broker_running"),
            allow_running_broker_orphans=bool(d.get("allow_running_broker_orphans")),
        )

    @property
    def where(self) -> str:
        return f"{self.quarantine_dir or '<log dir>/../kafka-quarantine'}/{self.ts}/"


@dataclass(frozen=True)
class QuarantineMove(_QuarantineDirs):
    """Rename leftover directories of deleted topics into a quarantine folder on the same broker host."""

    KIND: ClassVar[str] = "quarantine_move"

    def describe(self) -> str:
        return (
            f"broker {self.broker_id}: move {len(self.dirs)} leftover director(ies) of "
            f"{', '.join(self.topics)} into {self.where} (same filesystem, no symlink followed)"
        )


@dataclass(frozen=True)
class ConfigZnodeDelete(Step):
    """Delete a deleted topic's leftover ``/config/topics/<t>`` (versioned; its bytes saved first).

    The topic and its deletion marker must still be gone; the znode must hold the version and bytes
    the plan read (absent: an earlier try deleted it). Consecutive deletes go in one ZooKeeper multi.
    """

    KIND: ClassVar[str] = "delete_config_znode"
    GROUP: ClassVar[str | None] = "config-znode-deletes"
    topic: str = ""
    expected_version: int = 0
    data: bytes | None = None

    @property
    def path(self) -> str:
        return _config_path("topics", self.topic)

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        return (
            ZnodeExpectation(f"/brokers/topics/{self.topic}", None),
            ZnodeExpectation(f"/admin/delete_topics/{self.topic}", None),
            ZnodeExpectation(self.path, self.expected_version, self.data, done_absent=True),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "topic": self.topic,
            "path": self.path,
            "expected_version": self.expected_version,
            "data_b64": None if self.data is None else _b64(self.data),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConfigZnodeDelete:
        data = d.get("data_b64")
        return cls(
            id=str(d["id"]),
            topic=str(d["topic"]),
            expected_version=int(d["expected_version"]),
            data=None if data is None else base64.b64decode(data),
        )

    def describe(self) -> str:
        return f"delete {self.path} (versioned: version {self.expected_version}; its bytes saved first)"


# --- an undo (kafka/undo.py plans these; maintenance/undo.py carries them out) ----------------------


@dataclass(frozen=True)
class QuarantineRestore(_QuarantineDirs):
    """Move directories a deletion cleanup quarantined back to where they were, on one broker host.

    The fields are the :class:`QuarantineMove`'s that moved them (same directories, quarantine root
    and ``ts``), so the host finds each at ``<quarantine>/<ts>/<name>`` and puts it back at
    ``<log_dir>/<name>`` with one rename on the same filesystem. A topic created again under the
    name would take a live-named directory for its own log: every topic must still be gone. The host
    refuses an occupied original place, a symlink anywhere, another filesystem, and a live-named
    directory under a running broker (unless allowed).
    """

    KIND: ClassVar[str] = "quarantine_restore"

    def describe(self) -> str:
        return (
            f"broker {self.broker_id}: move {len(self.dirs)} quarantined director(ies) of {', '.join(self.topics)} "
            f"back from {self.where} to their log dirs (one rename each, no symlink followed): "
            + ", ".join(d.path for d in self.dirs[:10])
            + (f" and {len(self.dirs) - 10} more" if len(self.dirs) > 10 else "")
        )


@dataclass(frozen=True)
class ConfigZnodeRestore(Step):
    """Create a deleted topic's ``/config/topics/<t>`` again with the bytes a cleanup saved.

    The topic and its deletion marker must still be gone; the znode must be absent (found holding
    exactly these bytes: an earlier try created it). Consecutive restores go in one ZooKeeper multi.
    """

    KIND: ClassVar[str] = "restore_config_znode"
    GROUP: ClassVar[str | None] = "config-znode-restores"
    topic: str = ""
    data: bytes | None = None

    @property
    def path(self) -> str:
        return _config_path("topics", self.topic)

    def znodes(self) -> tuple[ZnodeExpectation, ...]:
        return (
            ZnodeExpectation(f"/brokers/topics/{self.topic}", None),
            ZnodeExpectation(f"/admin/delete_topics/{self.topic}", None),
            ZnodeExpectation(self.path, None, done_data=self.data if self.data is not None else b""),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "id": self.id,
            "topic": self.topic,
            "path": self.path,
            "data_b64": None if self.data is None else _b64(self.data),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConfigZnodeRestore:
        data = d.get("data_b64")
        return cls(
            id=str(d["id"]), topic=str(d["topic"]), data=None if data is None else base64.b64decode(data)
        )

    def describe(self) -> str:
        size = 0 if self.data is None else len(self.data)
        return f"create {self.path} again with the {size} byte(s) the cleanup saved (persistent, Kafka's ACL)"


@dataclass(frozen=True)
class RestoredFile:
    """One broker file an undo writes back: ``<log_dir>/<dir_name>/<name>`` with ``content``.

    :param found_sha256: the sha256 of what the file held when the undo was planned (the broker
        rewrote it after the original run removed it); None: the file was absent then.
    :param target_id: the topic id the original run made the replica adopt: a file holding it is
        the broker's own rewrite, safe to replace; any other content refuses.
    """

    log_dir: str
    dir_name: str
    name: str
    content: bytes
    topic: str = ""
    partition: int = -1
    found_sha256: str | None = None
    target_id: str | None = None

    @property
    def path(self) -> str:
        return f"{self.log_dir.rstrip('/')}/{self.dir_name}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "log_dir": self.log_dir,
            "dir_name": self.dir_name,
            "name": self.name,
            "path": self.path,
            "content_b64": _b64(self.content),
            "topic": self.topic,
            "partition": self.partition,
            "found_sha256": self.found_sha256,
            "target_id": self.target_id,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RestoredFile:
        return cls(
            log_dir=str(d["log_dir"]),
            dir_name=str(d["dir_name"]),
            name=str(d["name"]),
            content=base64.b64decode(d["content_b64"]),
            topic=str(d.get("topic") or ""),
            partition=int(d.get("partition", -1)),
            found_sha256=d.get("found_sha256"),
            target_id=d.get("target_id"),
        )


@dataclass(frozen=True)
class PartitionFileRestore(_BrokerFiles):
    """Write removed ``partition.metadata`` files back on one broker (temporary file, then a rename
    in the partition directory; no symlink followed). A running broker keeps the id it holds in
    memory: the restored file is read at its next start."""

    KIND: ClassVar[str] = "restore_partition_files"
    FILE: ClassVar[Any] = RestoredFile
    files: tuple[RestoredFile, ...] = ()

    def describe(self) -> str:
        shown = ", ".join(f.path for f in self.files[:10])
        return (
            f"broker {self.broker_id}: write {len(self.files)} removed file(s) back ({shown}); "
            "read by the broker at its next start"
        )


STEP_TYPES: dict[str, type[Step]] = {
    t.KIND: t
    for t in (
        TopicIdWrite,
        ControllerMove,
        HealthWait,
        FileRemoval,
        BrokerRestart,
        DrainBatch,
        ThrottleSet,
        ThrottleClear,
        ElectionRequest,
        QuarantineMove,
        ConfigZnodeDelete,
        QuarantineRestore,
        ConfigZnodeRestore,
        PartitionFileRestore,
    )
}


def content_id(prefix: str, *parts: Any) -> str:
    """A step id stable for the same content (a re-planned, identical step keeps its id; a step
    with other content gets another, so a retry never skips it as done)."""
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{prefix}:{digest}"


def step_from_dict(d: Mapping[str, Any]) -> Step:
    """A step from its ``plan.json`` record; ``ValueError`` naming the kind when unknown."""
    kind = d.get("kind")
    cls = STEP_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown step kind {kind!r} (step {d.get('id')!r})")
    return cls.from_dict(d)  # type: ignore[attr-defined]


def steps_from_dicts(records: Iterable[Mapping[str, Any]]) -> list[Step]:
    """Every step of a plan; ids must be unique (progress is recorded per id)."""
    steps = [step_from_dict(r) for r in records]
    ids = [s.id for s in steps]
    if len(set(ids)) != len(ids):
        raise ValueError(f"step ids repeat in the plan: {sorted({i for i in ids if ids.count(i) > 1})}")
    return steps


def remaining(steps: Sequence[Step], completed: Iterable[str]) -> list[Step]:
    """The steps still to run, in order: a retried run continues after the last completed one."""
    done = set(completed)
    return [s for s in steps if s.id not in done]


def atomic_groups(steps: Sequence[Step]) -> list[list[Step]]:
    """``steps`` cut into the units the executor applies: consecutive steps of one ``GROUP``
    together (one ZooKeeper multi), every other step alone."""
    out: list[list[Step]] = []
    for step in steps:
        if out and step.GROUP is not None and out[-1][0].GROUP == step.GROUP:
            out[-1].append(step)
        else:
            out.append([step])
    return out


@dataclass(frozen=True)
class PreflightReport:
    """What the preflight found: refusals (nothing may be written), and the steps already done."""

    refusals: tuple[Refusal, ...] = ()
    done: tuple[str, ...] = ()
    checked: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return not self.refusals
