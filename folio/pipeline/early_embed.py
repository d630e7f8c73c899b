"""Embeddings of a document's chunks while its later pages are still in OCR.

Why: a document's chunks used to be embedded only once its last page was done. On a GPU
run the documents that end last are the long ones, and embedding their hundreds of
chunks (0.05-0.15 core-seconds each with the packaged MiniLM, by length) kept the flow
running 10-20 s after the engine's last page. Here every finished page is fed, in reading
order, to the document's :class:`folio.output.chunking.ChunkStream`; chunks it closes are final
and are embedded in batches beside the OCR, and once the last page is in, the rest of the
document's chunks are embedded at once, beside its validation. At load time
:meth:`EarlyEmbeddings.vectors` hands back what was embedded early and embeds only what is
missing (chunks that changed because validation quarantined a page, work still queued):
the chunking at load time stays the one that counts, so early work can be wasted but never
wrong.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from folio.cpu_priority import background_pool
from folio.models import DocumentResult, PageResult
from folio.output.chunking import ChunkStream, embedding_text
from folio.settings.config import ChunkSettings

if TYPE_CHECKING:
    from folio.output.embeddings import Embedder

log = logging.getLogger(__name__)


@dataclass
class _DocumentChunks:
    """One document's pages in reading order, its closed chunks and their vectors."""

    stream: ChunkStream
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_page: int = 0
    waiting: dict[int, PageResult] = field(default_factory=dict)  # pages ahead of next_page
    pending: list[str] = field(default_factory=list)  # closed, not yet sent to embed
    vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    jobs: list[Future[None]] = field(default_factory=list)
    closed: bool = False  # every page is in: the stream's last chunk is closed too


class EarlyEmbeddings:
    """Per run: pages in, vectors of closed chunks out (see the module doc)."""

    def __init__(self, embedder: Callable[[], Embedder], settings: ChunkSettings,
                 batch: int = 32, workers: int = 1, nice: int = 0) -> None:
        self._embedder = embedder
        self._settings = settings
        self._batch = max(1, batch)
        self._lock = threading.Lock()
        self._docs: dict[str, _DocumentChunks] = {}
        # a job is one small batch on one core; ``workers`` jobs run at once, so the
        # embedding keeps pace with a GPU's pages instead of building a backlog that
        # load time has to embed after the last page
        self._pool = background_pool(workers, name="folio-early-embed", nice=nice)
        # a document whose pages are all in: the rest of its chunks start at once, beside
        # its validation, on as many cores as there are (the work is due now either way:
        # at the end of a GPU run dozens of documents end in the same second, and their
        # chunks waiting for validation first, then for four workers, were the run's tail)
        self._final = background_pool(os.cpu_count() or 1, name="folio-final-embed", nice=nice)
        self._closed = False

    def page_done(self, doc: DocumentResult, page: PageResult) -> None:
        """``page`` of ``doc`` has its OCR result (any order, any thread; cheap)."""
        with self._lock:
            if self._closed:
                return
            state = self._docs.get(doc.doc_id)
            if state is None:
                state = self._docs[doc.doc_id] = _DocumentChunks(ChunkStream(doc, self._settings))
        with state.lock:
            state.waiting[page.index] = page
            while state.next_page in state.waiting:
                closed = state.stream.add(state.waiting.pop(state.next_page))
                state.next_page += 1
                state.pending += [embedding_text(c) for c in closed]
            last = doc.page_count > 0 and state.next_page >= doc.page_count and not state.closed
            if last:  # no page follows: the chunks held back for later pages close now
                state.closed = True
                state.pending += [embedding_text(c) for c in state.stream.close()]
            if not state.pending or (len(state.pending) < self._batch and not last):
                return
            texts, state.pending = state.pending, []
            try:
                pool = self._final if last else self._pool
                state.jobs.append(pool.submit(self._embed, state, texts))
            except RuntimeError:  # closed under us: load time embeds them
                pass

    def _embed(self, state: _DocumentChunks, texts: list[str]) -> None:
        try:
            vectors = self._embedder().embed(texts)
        except Exception as err:  # only an optimisation: load time embeds them again
            log.debug("early embedding failed, left to load time: %s", err)
            return
        with state.lock:
            state.vectors.update(zip(texts, vectors, strict=True))

    def vectors(self, doc_id: str, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embeddings of ``texts`` in order: those embedded early, the rest now. The
        document is forgotten (its pages must not arrive again)."""
        known = self._take(doc_id)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        embedder = self._embedder()
        if missing:
            known.update(zip(missing, embedder.embed(missing), strict=True))
        if not texts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False)

    def discard(self, doc_id: str) -> None:
        """Forget a document that will not be embedded (quarantined, cached)."""
        with self._lock:
            self._docs.pop(doc_id, None)

    def _take(self, doc_id: str) -> dict[str, npt.NDArray[np.float32]]:
        with self._lock:
            state = self._docs.pop(doc_id, None)
        if state is None:
            return {}
        with state.lock:
            jobs = list(state.jobs)
        for job in jobs:  # queued behind other documents' batches: embedded now instead
            job.cancel()
        wait(jobs)  # the one running, if any
        with state.lock:
            return dict(state.vectors)

    def wait_idle(self) -> None:
        """Until every batch handed to the embedder so far is done."""
        with self._lock:
            states = list(self._docs.values())
        for state in states:
            with state.lock:
                jobs = list(state.jobs)
            wait(jobs)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._docs.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._final.shutdown(wait=True, cancel_futures=True)
