"""Events as the server receives them, through its event stream (``/api/events/out``), so a
trigger learns that its run ended and its document is indexed the moment it happens.

Why not the events API alone: the server writes received events to its database in
batches (every ~5 s by default), so a poll of ``/api/events/filter`` sees a document's
``folio.document.indexed`` seconds after the run ended; ``folio trigger --wait`` used to
wait a fixed 7 s after the run's end for that. The stream hands over each event as it is
received; the server subscribes a client to it before sending the persisted backlog, so
nothing received after the stream opened is missed, and nothing persisted before is.

:class:`EventStream` runs Prefect's subscriber in a thread of its own and hands events to
the caller's thread through a queue. A stream that cannot be opened or that drops is
reported (:attr:`EventStream.broken`), never raised: the callers in
:mod:`folio_prefect.deployments.trigger` then poll the events API as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.events.filters import EventFilter
    from prefect.events.schemas.events import Event

log = logging.getLogger(__name__)

#: how long opening the stream may take before the caller polls instead
OPEN_TIMEOUT_S = 15.0
#: the flow run's final state types, as its ``prefect.flow-run.*`` events carry them
FINAL_TYPES = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})


def final_state_type(event: Event) -> str | None:
    """The final state type (``COMPLETED``, ``FAILED``, ...) a flow run's state-change
    event announces, else None."""
    if not event.event.startswith("prefect.flow-run."):
        return None
    validated = event.payload.get("validated_state")
    kind = validated.get("type") if isinstance(validated, dict) else None
    return kind if kind in FINAL_TYPES else None


class EventStream:
    """The server's events matching a filter, from the moment the stream opened (and those
    already persisted within the last minute), read with :meth:`next`.

    Use as a context manager; :attr:`broken` is True when the stream could not be opened or
    dropped, so the caller falls back to polling."""

    def __init__(self, flt: EventFilter) -> None:
        self._filter = flt
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._opened = threading.Event()
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.broken = False
        # the caller's Prefect settings (a temporary_settings block lives in a context
        # variable, which a new thread does not inherit)
        self._context = contextvars.copy_context()
        self._thread = threading.Thread(target=self._context.run, args=(self._run,),
                                        daemon=True, name="folio-event-stream")

    def __enter__(self) -> EventStream:
        self._thread.start()
        if not self._opened.wait(OPEN_TIMEOUT_S):
            self.broken = True
            log.info("the Prefect event stream did not open within %.0f s: polling instead",
                     OPEN_TIMEOUT_S)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._thread.join(timeout=5)

    def next(self, timeout: float) -> Event | None:
        """The next event, or None when none came within ``timeout`` seconds (or the
        stream is broken: check :attr:`broken`)."""
        if self.broken:
            time.sleep(max(0.0, timeout))
            return None
        try:
            event = self._events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if event is None:  # the pump ended: the stream dropped
            self.broken = True
        return event

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except asyncio.CancelledError:  # closed by __exit__
            pass
        except Exception:
            log.info("the Prefect event stream failed: polling instead", exc_info=True)
        finally:
            self._opened.set()
            self._events.put(None)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        from prefect.events.clients import get_events_subscriber

        async with get_events_subscriber(filter=self._filter, reconnection_attempts=3) as sub:
            self._opened.set()
            async for event in sub:
                if self._stop.is_set():
                    return
                self._events.put(event)
