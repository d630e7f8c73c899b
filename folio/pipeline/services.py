"""Per-run resources every stage shares: the output sink, engines, embedder, vector store."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from folio.engines.base import GENERATIVE_ENGINES, OcrEngine
from folio.io.layout import VECTORS
from folio.io.sinks import Sink, open_sink
from folio.pdf import zygote
from folio.pipeline.batcher import Batcher
from folio.pipeline.stage_clock import StageClock
from folio.settings.config import PipelineConfig

if TYPE_CHECKING:
    from folio.models import DocumentResult, PageResult
    from folio.output.embeddings import Embedder
    from folio.pipeline.early_embed import EarlyEmbeddings
    from folio.stores.base import DocumentVectors, VectorStore

log = logging.getLogger(__name__)


class Services:
    """Per-run resources shared by every document: output sink, engines, embedder, store.

    Built lazily and thread-safely, because Prefect runs tasks in threads and a CPU-only
    run must not pay for the embedder before a document reaches the load stage.
    """

    def __init__(self, config: PipelineConfig, out: str) -> None:
        from folio.security import work_dirs

        self.config = config
        self.out = out
        work_dirs.sweep(config.work_dir)  # what a killed run left (a decrypted copy, too)
        self.sink: Sink = open_sink(out, config.s3)
        self._lock = threading.Lock()
        self._engines: dict[str, OcrEngine] = {}
        self._embedder: Embedder | None = None
        self._store: VectorStore | None = None
        self._vectors: Batcher[DocumentVectors, None] | None = None
        self._validator: Batcher[tuple[str, list[PageResult]], dict[int, list[str]]] | None = None
        self._early: EarlyEmbeddings | None = None
        #: when each document's finishing stages ran (the report's ``timing.finishing``)
        self.clock = StageClock()
        #: documents whose load stage ended, in that order: what an interrupted run's
        #: report says finished (list.append is atomic: no lock)
        self.loaded: list[DocumentResult] = []
        self._handed_over = False  # every document is in its finishing: nothing to wait for
        self._engine_fed = False  # every page is at the engine: the CPU no longer feeds it
        # every document is probed by a page worker first: their zygote's imports overlap
        # the run's start (settings, the host check, listing the sources)
        zygote.prestart(config.limits.worker_nice)
        # a vision model's engine (its HTTP clients, its server's semaphore) is built while
        # the first documents are prepared, not by the first page's thread with every
        # other page of the ramp waiting on the lock behind it
        self._prebuild: threading.Thread | None = None
        if config.ocr.engine in GENERATIVE_ENGINES:
            self._prebuild = threading.Thread(target=self._build_early, args=(config.ocr.engine,),
                                              daemon=True, name="folio-engine-build")
            self._prebuild.start()

    def _build_early(self, name: str) -> None:
        try:
            self.engine(name)
        except Exception as exc:  # the first page builds it again and ends with the reason
            log.debug("engine %s not built ahead of the first page: %s", name, exc)

    def engine(self, name: str) -> OcrEngine:
        with self._lock:
            if name not in self._engines:
                from folio.engines.registry import build_engine

                self._engines[name] = build_engine(name, self.config)
            return self._engines[name]

    def requests_open(self) -> int | None:
        """Requests the run's engines have at their servers now (None: no engine counts
        them, as the CPU engines do not)."""
        counts = [getattr(e, "requests_open", None) for e in list(self._engines.values())]
        known = [c for c in counts if isinstance(c, int)]
        return sum(known) if known else None

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                from folio.output.embeddings import Embedder

                self._embedder = Embedder(self.config.embedding)
                if self.config.ocr.engine == "vllm" and not self._engine_fed:
                    # the vLLM server folio runs on this host, and folio's own threads that
                    # send it pages, need the cores while pages are still to be sent: a
                    # quarter of them until every page is at the engine (an openai endpoint
                    # is someone else's server, as a rule elsewhere)
                    self._embedder.cap_parallel(early_embed_workers(self.config))
            return self._embedder

    def store(self) -> VectorStore:
        """The run's vector store; with ``store.kind`` none, a store that holds nothing,
        and the embedder (whose dimension a real store needs) is never loaded."""
        if self.config.store.kind == "none":
            from folio.stores.base import NullStore

            return NullStore()
        embedder = self.embedder()
        with self._lock:
            if self._store is None:
                from folio.stores import open_store

                default_uri = self.sink.uri(VECTORS)
                self._store = open_store(
                    self.config.store, default_uri=default_uri, s3=self.config.s3,
                    dim=embedder.dim, embedder=embedder.model_id,
                )
            return self._store

    def early_embeddings(self) -> EarlyEmbeddings | None:
        """Chunks embedded while the OCR goes on (None when nothing is embedded)."""
        if self.config.store.kind == "none":
            return None
        with self._lock:
            if self._early is None:
                from folio.pipeline.early_embed import EarlyEmbeddings

                # small batches: a document's last chunks wait for company only briefly
                self._early = EarlyEmbeddings(self.embedder, self.config.chunk,
                                              batch=min(8, self.config.embedding.batch_size),
                                              workers=early_embed_workers(self.config),
                                              nice=self.config.embedding.nice)
            return self._early

    def page_done(self, doc: DocumentResult, page: PageResult) -> None:
        """A page has its OCR result: what can start before its document ends, starts."""
        early = self.early_embeddings()
        if early is not None:
            early.page_done(doc, page)

    def vectors(self) -> Batcher[DocumentVectors, None]:
        """The run's batched writer to the vector store: many documents per write (one
        LanceDB version, one transaction), the same document never twice in one."""
        with self._lock:
            if self._vectors is None:
                settings = self.config.store

                def write(batch: list[DocumentVectors]) -> list[None]:
                    self.store().replace_documents(batch)
                    return [None] * len(batch)

                wait = 0.0 if self._handed_over else settings.batch_wait_s
                self._vectors = Batcher(write, name="vector-writes",
                                        max_items=settings.batch_documents, max_wait_s=wait,
                                        key=lambda item: item.doc_id)
            return self._vectors

    def validator(self) -> Batcher[tuple[str, list[PageResult]], dict[int, list[str]]]:
        """The run's Great Expectations validation: every document waiting when GX is free
        goes into its next run (GX runs one at a time per process; per document, the last
        documents of a run queued behind each other)."""
        with self._lock:
            if self._validator is None:
                from folio.checks.validation import in_child, validate_documents

                settings, child = self.config.validation, in_child(self.config)
                self._validator = Batcher(
                    lambda items: validate_documents(items, settings, child=child),
                    name="validation", max_items=64,
                    # one batch per child at once; in the flow's process GX runs one at a time
                    workers=settings.child_processes if child else 1)
            return self._validator

    def engine_has_every_page(self) -> None:
        """Every page of the run is at the engine or done: nothing is left to prepare,
        render or send, so the embedder may take every core (the server, answering the
        last requests, needs one or two; the embedding threads run niced).

        Why not wait for the last document: on the H200 (engine_limit_issue29.json at
        dcec203) the documents that end in the server's last 30 s of answers were
        embedded four cores at a time while twelve stood idle, and 5 s of their chunks
        were left for after the last page: the whole gap to a plain client."""
        with self._lock:
            self._engine_fed = True
            if self._embedder is not None:
                self._embedder.cap_parallel(None)

    def last_document_handed_over(self) -> None:
        """Every document of the run is in its finishing: batches stop waiting for more."""
        self.engine_has_every_page()  # (the scheduler says so earlier; a flow without one here)
        with self._lock:
            self._handed_over = True
            batchers = [b for b in (self._validator, self._vectors) if b is not None]
        for batcher in batchers:
            batcher.hurry()

    def close(self) -> None:
        if self._prebuild is not None:  # an engine built after close would never be closed
            self._prebuild.join()
        if self._early is not None:
            self._early.close()
        for batcher in (self._validator, self._vectors):
            if batcher is not None:
                batcher.close()
        try:  # documents remove their own folders; leave no empty scratch root either
            self.config.work_dir.rmdir()
        except OSError:
            pass
        for engine in self._engines.values():
            engine.close()
        close_store = getattr(self._store, "close", None)
        if callable(close_store):
            close_store()


def early_embed_workers(config: PipelineConfig) -> int:
    """Embedding jobs run at once beside the OCR: ``embedding.parallel_batches`` when set,
    else a quarter of the cores (one on a small machine, where the CPU engines need the
    rest; four on a 16-core GPU host, until :meth:`Services.engine_has_every_page`).

    Why not more beside a GPU: all the cores (before a89320c) starved the server mid-run
    (the GPU dipped to 57-65% while a long document's chunks took 9-13 cores), and half of
    them in one run at e765251 left the GPU under 70% busy for 17 s of the run against 4-9
    s at a quarter (engine_limit_issue29.json's notes): while pages are still being sent,
    the sending threads and the server's front end need the CPU and the GIL first."""
    if config.embedding.parallel_batches:
        return config.embedding.parallel_batches
    return max(1, (os.cpu_count() or 1) // 4)
