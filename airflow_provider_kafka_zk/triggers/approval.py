"""Trigger that waits, in the triggerer, for a person's answer to an approval request and ends the
approval task with the decision itself -- the task never resumes on a worker from here.

Why not the human-in-the-loop operator's own wait (Airflow 3.3.2, ``airflow/`` and ``airflow/sdk``
of the pinned release; :mod:`airflow_provider_kafka_zk.operators.approval` says it in full): an
answer resumes a parked task into a second worker workload with the same try number, and the
scheduler fails that workload when it handles the first workload's late "success" event after it
queued the second (``scheduler_job_runner._process_executor_events`` spares only a SCHEDULED task
instance, apache/airflow#66374; QUEUED is apache/airflow#67287, RUNNING apache/airflow#72716); and
an answer recorded while the task is parking does not wake it (the response route tests the task
state it read before it locked the row), so it waits until its time-out. This trigger reads the
answer Airflow recorded (the execution API's ``GET /hitlDetails/{ti_id}``) every ``poll_interval``
seconds and ends the task with :class:`~airflow.triggers.base.TaskSuccessEvent` -- no second
workload, nothing to race -- after writing the decision where the worker would have
(:func:`~airflow_provider_kafka_zk.artefacts.approval_record.write_decision`). A decision that stops
the writes skips the task's direct downstream tasks the way Airflow's SkipMixin records it (XCom
``skipmixin_key``, honoured by the scheduler's NotPreviouslySkippedDep).

Only the stdlib and Airflow's trigger base are imported at module level (the triggerer imports this
on its event loop); the reads and writes run on the run's own thread
(:class:`~._session.TriggerSession`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from airflow_provider_kafka_zk.triggers._session import TriggerSession

CLASSPATH = "airflow_provider_kafka_zk.triggers.approval.PlanAnswerTrigger"
SKIPMIXIN_KEY = "skipmixin_key"
"""The XCom Airflow's SkipMixin leaves for the scheduler (``{"skipped": [task ids]}``)."""


class PlanAnswerTrigger(BaseTrigger):
    """Ends the approval task once Airflow holds an answer to its request, or its time is up.

    :param ti_id: the approval task instance (its HITL request is keyed by it).
    :param record: the waiting decision record (``approval.json`` as the step wrote it when it asked:
        run, plan folder, plan hash shown, ``requested_at``).
    :param skip: the task ids to skip when the decision stops the writes.
    :param deadline: epoch seconds after which nobody's answer counts (time-out).
    :param xcom_key: the XCom the decision record goes to (the execute steps read it).
    :param comment_param: the request's free-text parameter recorded as the comment.
    :param poll_interval: seconds between looks at Airflow's record.
    """

    def __init__(
        self,
        *,
        ti_id: str,
        record: dict[str, Any],
        skip: Sequence[str],
        deadline: float,
        xcom_key: str,
        comment_param: str = "comment",
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()
        self.ti_id = str(ti_id)
        self.record = dict(record)
        self.skip = list(skip)
        self.deadline = float(deadline)
        self.xcom_key = xcom_key
        self.comment_param = comment_param
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "ti_id": self.ti_id,
                "record": self.record,
                "skip": self.skip,
                "deadline": self.deadline,
                "xcom_key": self.xcom_key,
                "comment_param": self.comment_param,
                "poll_interval": self.poll_interval,
            },
        )

    def _look(self) -> dict[str, Any] | None:
        """One look at Airflow's record of the answer (on the session's thread): the decision record,
        written to the plan folder, once there is an answer or the time is up; None until then."""
        from uuid import UUID

        from airflow.sdk.execution_time.hitl import get_hitl_detail_content_detail

        from airflow_provider_kafka_zk.artefacts.approval_record import write_decision
        from airflow_provider_kafka_zk.kafka.approval import timed_out, with_answer

        answer = get_hitl_detail_content_detail(UUID(self.ti_id))
        if not hasattr(answer, "response_received"):  # an error answer of the API server
            raise RuntimeError(f"cannot read the approval request of task instance {self.ti_id}: {answer!r}")
        if answer.response_received:
            by = answer.responded_by_user
            at = answer.responded_at
            record = with_answer(
                self.record,
                chosen=list(answer.chosen_options or []),
                by={"id": by.id, "name": by.name} if by is not None else None,
                at=at.isoformat() if at is not None else datetime.now(UTC).isoformat(),
                comment=(answer.params_input or {}).get(self.comment_param),
            )
        elif time.time() >= self.deadline:
            record = timed_out(self.record, datetime.now(UTC).isoformat())
        else:
            return None
        write_decision(str(record["plan_dir"]), record)
        self._push(record)
        return record

    def _push(self, record: dict[str, Any]) -> None:
        """The decision's XComs, pushed as the task itself pushes them (Task SDK, the configured XCom
        backend): a :class:`TaskSuccessEvent`'s own ``xcoms`` are stored JSON-encoded once more by
        Airflow 3.3.2's ``TaskInstance.xcom_push``, and a task pulling them gets a string back."""
        from airflow.sdk.execution_time.xcom import XCom

        from airflow_provider_kafka_zk.kafka.approval import Decision

        where = {"dag_id": record["dag_id"], "task_id": record["task_id"], "run_id": record["run_id"]}
        XCom.set(key=self.xcom_key, value=record, **where)
        if Decision(record["decision"]).lets_writes_run:
            XCom.set(key="return_value", value=record, **where)

    def _end(self, record: dict[str, Any]) -> TriggerEvent:
        """The event that ends the approval task with ``record`` as its decision (its XComs pushed)."""
        from airflow_provider_kafka_zk.kafka.approval import Decision

        writes = Decision(record["decision"]).lets_writes_run
        # the scheduler reads SkipMixin's XCom itself (NotPreviouslySkippedDep), where this encoding
        # is the one it expects
        xcoms = None if writes else {SKIPMIXIN_KEY: {"skipped": self.skip}}
        who = (record.get("decided_by") or {}).get("name") or "nobody (time-out)"
        self.log.info(
            "Decision: %s by %s at %s%s; plan sha256 %s (recorded in %s/approval.json)%s",
            str(record["decision"]).upper(),
            who,
            record.get("decided_at"),
            f" ({record['comment']})" if record.get("comment") else "",
            (record.get("plan") or {}).get("sha256"),
            record.get("plan_dir"),
            "" if writes else f"; skipping {', '.join(self.skip) or 'nothing'}",
        )
        return TaskSuccessEvent(xcoms=xcoms)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        session = TriggerSession("approval")
        failures = 0
        try:
            while True:
                try:
                    record = await session.call(self._look)
                    failures = 0
                except Exception as exc:  # the API server restarting, the store unreachable: look again
                    failures += 1
                    self.log.warning(
                        "Approval of task instance %s: look %d failed: %s: %s",
                        self.ti_id,
                        failures,
                        type(exc).__name__,
                        exc,
                    )
                    if failures >= 10:
                        yield TaskFailedEvent()  # the task's retry asks Airflow again
                        return
                    record = None
                if record is not None:
                    yield self._end(record)
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await session.aclose()
