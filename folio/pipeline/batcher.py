"""Many documents per call to a slow shared resource (the vector store, Great Expectations).

Per-document calls serialised behind one lock (GX) or one table (LanceDB) made the last
documents of a GPU run queue for tens of seconds after the last page. Here callers hand
their item to a :class:`Batcher` and wait; one worker thread calls ``flush`` with
everything that has gathered (up to ``max_items``, distinct by ``key``) and hands each
caller its own result. With ``max_wait_s = 0`` nothing waits for company: while one batch
runs the next gathers, so batches grow exactly when the resource is the bottleneck. A
``flush`` that raises fails every item in its batch with that error. With ``workers`` > 1
that many batches run at once (a resource with several servers: validation children);
``key`` then keeps items apart within a batch only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from folio.errors import RunStoppedError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Entry(Generic[T, R]):
    item: T
    queued: float = field(default_factory=time.monotonic)
    done: Future[R] = field(default_factory=Future)


class Batcher(Generic[T, R]):
    """Calls ``flush(items) -> results`` (one result per item, in order) in batches."""

    def __init__(self, flush: Callable[[list[T]], Sequence[R]], *, name: str,
                 max_items: int = 32, max_wait_s: float = 0.0,
                 key: Callable[[T], Hashable] | None = None, workers: int = 1) -> None:
        self._flush_fn = flush
        self.name = name
        self.max_items = max(1, max_items)
        self.max_wait_s = max(0.0, max_wait_s)
        self._key = key
        self._workers = max(1, workers)
        self._cond = threading.Condition()
        self._pending: list[_Entry[T, R]] = []
        self._closed = False
        self._threads: list[threading.Thread] = []
        #: items in each flush so far (for tests and benchmarks)
        self.batch_sizes: list[int] = []

    def submit(self, item: T) -> R:
        """``item``'s result once its batch is flushed; raises what the flush raised, and
        :class:`RunStoppedError` once the run is closing (a document still loading when
        the run was stopped is retried by the next run, not reported as a bug)."""
        entry: _Entry[T, R] = _Entry(item)
        with self._cond:
            if self._closed:
                raise RunStoppedError(f"the run stopped before {self.name} took this document")
            self._pending.append(entry)
            if not self._threads:
                for n in range(self._workers):
                    thread = threading.Thread(target=self._run, daemon=True,
                                              name=f"folio-{self.name}-{n}")
                    thread.start()
                    self._threads.append(thread)
            self._cond.notify_all()
        return entry.done.result()

    def hurry(self) -> None:
        """No more company is coming (the run has handed over its last document): from
        now on nothing waits ``max_wait_s`` for others, so the run's last document is not
        held back for a batch that cannot grow."""
        with self._cond:
            self.max_wait_s = 0.0
            self._cond.notify_all()

    def close(self) -> None:
        """Flush what is waiting, then stop the workers."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def _due(self) -> bool:
        if not self._pending:
            return False
        if self._closed or len(self._pending) >= self.max_items:
            return True
        return time.monotonic() - self._pending[0].queued >= self.max_wait_s

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    if self._closed and not self._pending:
                        return
                    if not self._pending:  # submit, hurry and close all notify
                        self._cond.wait()
                        continue
                    wait = self._pending[0].queued + self.max_wait_s - time.monotonic()
                    self._cond.wait(timeout=max(wait, 0.01))
                batch = self._take()
            self._flush(batch)

    def _take(self) -> list[_Entry[T, R]]:
        """Up to ``max_items`` entries with distinct keys, oldest first (a second entry
        with the same key goes in the next batch); lock held."""
        batch: list[_Entry[T, R]] = []
        seen: set[Hashable] = set()
        rest: list[_Entry[T, R]] = []
        for entry in self._pending:
            key = self._key(entry.item) if self._key else id(entry)
            if len(batch) < self.max_items and key not in seen:
                seen.add(key)
                batch.append(entry)
            else:
                rest.append(entry)
        self._pending[:] = rest
        return batch

    def _flush(self, batch: list[_Entry[T, R]]) -> None:
        try:
            results = list(self._flush_fn([e.item for e in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"{self.name}: {len(results)} results for {len(batch)} items")
        except BaseException as err:  # every waiting caller learns what happened
            log.warning("%s of %d item(s) failed: %s", self.name, len(batch), err)
            for entry in batch:
                entry.done.set_exception(err)
            return
        self.batch_sizes.append(len(batch))
        for entry, result in zip(batch, results, strict=True):
            entry.done.set_result(result)
