"""Many documents per vector-store write.

One write per document made LanceDB add a fragment and a table version per document, so
writes slowed as a table grew, and a run's last documents queued behind each other's
commits. Here load threads hand their document's chunks to a :class:`VectorBatcher`
and wait; one flusher thread writes whatever has gathered, as one
``replace_documents`` call, when ``max_documents`` are waiting or the oldest has waited
``max_wait_s``. A failed write fails every document in it (each is then quarantined as
retryable by the load stage, never marked done).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from folio.models import Chunk
from folio.stores.base import DocumentVectors, VectorStore

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    item: DocumentVectors
    queued: float = field(default_factory=time.monotonic)
    done: Future[None] = field(default_factory=Future)


class VectorBatcher:
    """Gathers documents' vectors and writes them in batches (thread-safe)."""

    def __init__(self, store: Callable[[], VectorStore], *, max_documents: int = 32,
                 max_wait_s: float = 0.5) -> None:
        self._store = store
        self.max_documents = max(1, max_documents)
        self.max_wait_s = max_wait_s
        self._cond = threading.Condition()
        self._pending: list[_Entry] = []
        self._closed = False
        self._thread: threading.Thread | None = None
        #: documents in each write so far (for tests and benchmarks)
        self.batch_sizes: list[int] = []

    def write(self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]) -> None:
        """Return once ``doc_id``'s chunks are in the store; raise what the write raised."""
        entry = _Entry(DocumentVectors(doc_id=doc_id, chunks=chunks, vectors=vectors))
        with self._cond:
            if self._closed:
                raise RuntimeError("vector batcher is closed")
            self._pending.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="folio-vectors",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        entry.done.result()

    def close(self) -> None:
        """Write what is waiting, then stop the flusher."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _due(self) -> bool:
        if not self._pending:
            return False
        if self._closed or len(self._pending) >= self.max_documents:
            return True
        return time.monotonic() - self._pending[0].queued >= self.max_wait_s

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    if self._closed and not self._pending:
                        return
                    wait = self.max_wait_s
                    if self._pending:
                        wait = max(0.0, self._pending[0].queued + self.max_wait_s - time.monotonic())
                    self._cond.wait(timeout=max(wait, 0.01))
                batch = _take_batch(self._pending, self.max_documents)
            self._flush(batch)

    def _flush(self, batch: list[_Entry]) -> None:
        try:
            self._store().replace_documents([e.item for e in batch])
        except BaseException as err:  # every waiting document learns what happened
            log.warning("vector write of %d document(s) failed: %s", len(batch), err)
            for entry in batch:
                entry.done.set_exception(err)
            return
        self.batch_sizes.append(len(batch))
        for entry in batch:
            entry.done.set_result(None)


def _take_batch(pending: list[_Entry], limit: int) -> list[_Entry]:
    """Up to ``limit`` entries with distinct documents, oldest first (the same bytes under
    two names are one document: its second write goes in the next batch)."""
    batch: list[_Entry] = []
    seen: set[str] = set()
    rest: list[_Entry] = []
    for entry in pending:
        if len(batch) < limit and entry.item.doc_id not in seen:
            seen.add(entry.item.doc_id)
            batch.append(entry)
        else:
            rest.append(entry)
    pending[:] = rest
    return batch
