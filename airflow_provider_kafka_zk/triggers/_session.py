"""The blocking side of one trigger run, off the triggerer's event loop.

The triggerer runs every trigger's ``run()`` on one asyncio loop; a blocking call there (a kazoo
request, an SSH round trip, a connection lookup) stalls every trigger of the process, and Airflow's
watchdog says so ("Triggerer's async thread was blocked ... badly-written trigger"). So a trigger
run owns a :class:`TriggerSession`: one worker thread where all its blocking calls run, in order,
and the clients they share -- one ZooKeeper session for the whole wait, not one per poll. When the
run ends for any reason (an event, an error, a cancel because the task was cleared or the triggerer
stops), :meth:`TriggerSession.aclose` closes those clients on that same thread, after any call still
in flight, without waiting on the loop for it to finish.

Only the stdlib is imported here: the triggerer imports a trigger's module on its event loop, so the
trigger modules keep their imports light and import the hooks inside the session's thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class TriggerSession:
    """One worker thread and the clients of one trigger run.

    :param label: names the thread (``kafka-zk-<label>``) in thread dumps and logs.
    """

    def __init__(self, label: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kafka-zk-{label}")
        self._zookeeper: dict[str, Any] = {}
        self._closed = False

    def zookeeper(self, kafka_zookeeper_conn_id: str) -> Any:
        """The run's ZooKeeper hook of that connection (opened on first use, kept until
        :meth:`aclose`). Call it only from inside :meth:`call`: it reads the connection and connects."""
        hook = self._zookeeper.get(kafka_zookeeper_conn_id)
        if hook is None:
            from airflow_provider_kafka_zk.hooks.zookeeper import KafkaZooKeeperHook

            hook = self._zookeeper[kafka_zookeeper_conn_id] = KafkaZooKeeperHook(kafka_zookeeper_conn_id)
        return hook

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on the session's thread; the loop awaits it. The trigger's
        logging context goes along (its lines land in the task's trigger log), as with
        :func:`asyncio.to_thread`."""
        if self._closed:
            raise RuntimeError("the trigger session is closed")
        context = contextvars.copy_context()
        call = functools.partial(context.run, function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _close_clients(self) -> None:
        for conn_id, hook in self._zookeeper.items():
            try:
                hook.close()
            except Exception as exc:  # closing must not hide how the run ended
                log.warning("Closing the ZooKeeper session of %s: %s: %s", conn_id, type(exc).__name__, exc)
        self._zookeeper.clear()

    async def aclose(self) -> None:
        """Close the run's clients on the session's thread, after any call still running there (a
        cancelled wait leaves its read to finish first), then let the thread end. Shielded: a second
        cancel does not stop the close, which goes on in the thread."""
        if self._closed:
            return
        self._closed = True
        future = self._executor.submit(contextvars.copy_context().run, self._close_clients)
        self._executor.shutdown(wait=False)
        await asyncio.shield(asyncio.wrap_future(future))
