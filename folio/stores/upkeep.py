"""Table upkeep on one background thread, off the write path.

Why: LanceDB maintenance (compaction, index update, old-version cleanup, the ANN index
build) grows with the table and took minutes at 1M rows; run inline, it stalled the
write that happened to trigger it, and with it the batch of documents behind that write.
A write now only asks for upkeep; this thread does it.

Guarantees:

- a store reports each committed write (:meth:`wrote`) and a run is asked for every
  ``every_writes`` writes or ``every_rows`` rows, whichever comes first;
- one run at a time per :class:`Upkeep` (one thread), and a caller's own call to the job
  is serialised with it by the job's lock (see ``LanceDBStore.maintain``);
- requests made while a run is going coalesce into one further run, so the work queued
  is bounded by one run whatever the write rate;
- a failing run is logged and retried after ``retry_s`` (doubling up to
  ``max_retry_s``); it never reaches a writer, whose data is committed before it asks;
- :meth:`close` waits a bounded time for a run in progress (an interrupted compaction
  commits nothing, so stopping is safe: it only leaves unreferenced files).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["Upkeep"]

log = logging.getLogger(__name__)


class Upkeep:
    """Run ``job`` on a daemon thread whenever :meth:`request` was called since its
    last successful run.

    Example:
        >>> upkeep = Upkeep(store.maintain, name="lancedb upkeep")  # doctest: +SKIP
        >>> upkeep.request()  # returns at once  # doctest: +SKIP
        >>> upkeep.wrote(rows=500)  # a committed write; asks for a run when due  # doctest: +SKIP
        >>> upkeep.wait_idle(timeout=60)  # doctest: +SKIP
    """

    def __init__(
        self,
        job: Callable[[], None],
        *,
        name: str,
        retry_s: float = 30.0,
        max_retry_s: float = 600.0,
        every_writes: int = 0,
        every_rows: int = 0,
    ) -> None:
        self._job = job
        self._every_writes = every_writes  # 0: not by writes
        self._every_rows = every_rows  # 0: not by rows
        self._writes = self._rows = 0  # since the last request made by wrote()
        self._name = name
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.runs = 0  # finished runs, failed or not (for tests and reports)
        self.failures = 0

    def wrote(self, rows: int = 0) -> None:
        """Count one committed write of ``rows`` rows; ask for a run once ``every_writes``
        writes or ``every_rows`` rows have come since the last time it asked (the write is
        committed before: upkeep never delays or fails it)."""
        with self._cond:
            self._writes += 1
            self._rows += rows
            due = (bool(self._every_writes) and self._writes >= self._every_writes) or (
                bool(self._every_rows) and self._rows >= self._every_rows)
            if due:
                self._writes = self._rows = 0
        if due:
            self.request()

    def request(self) -> None:
        """Ask for a run; returns at once (the thread starts on the first request)."""
        with self._cond:
            if self._closed:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        """A run is going or asked for."""
        with self._cond:
            return self._pending or self._running

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run is going or pending; False when ``timeout`` ran out first
        (a failing job stays pending until it succeeds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._running:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout: float = 60.0) -> bool:
        """Stop taking requests, let a run in progress end (at most ``timeout`` seconds)
        and stop the thread; False when the run was still going."""
        with self._cond:
            self._closed = True
            self._pending = False
            self._cond.notify_all()
            thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _loop(self) -> None:
        delay = self._retry_s
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._pending, self._running = False, True
            ok = self._run_once()
            with self._cond:
                self._running = False
                if not ok and not self._closed:
                    self._pending = True  # retried: the table still needs it
                self._cond.notify_all()
                if ok:
                    delay = self._retry_s
                    continue
                self._cond.wait_for(lambda: self._closed, timeout=delay)
                delay = min(delay * 2, self._max_retry_s)

    def _run_once(self) -> bool:
        try:
            self._job()
        except Exception as exc:  # logged and retried; never a writer's problem
            self.failures += 1
            log.warning("%s failed (retried later): %s", self._name, exc)
            return False
        finally:
            self.runs += 1
        return True
