"""Per-run resources every stage shares: the output sink, engines, embedder, vector store."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from folio.config import PipelineConfig
from folio.engines.base import OcrEngine
from folio.io.sinks import Sink, open_sink

if TYPE_CHECKING:
    from folio.embeddings import Embedder
    from folio.pipeline.vector_batch import VectorBatcher
    from folio.stores.base import VectorStore


class Services:
    """Per-run resources shared by every document: output sink, engines, embedder, store.

    Built lazily and thread-safely, because Prefect runs tasks in threads and a CPU-only
    run must not pay for the embedder before a document reaches the load stage.
    """

    def __init__(self, config: PipelineConfig, out: str) -> None:
        self.config = config
        self.out = out
        self.sink: Sink = open_sink(out, config.s3)
        self._lock = threading.Lock()
        self._engines: dict[str, OcrEngine] = {}
        self._embedder: Embedder | None = None
        self._store: VectorStore | None = None
        self._vectors: VectorBatcher | None = None

    def engine(self, name: str) -> OcrEngine:
        with self._lock:
            if name not in self._engines:
                from folio.engines.registry import build_engine

                self._engines[name] = build_engine(name, self.config)
            return self._engines[name]

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                from folio.embeddings import Embedder

                self._embedder = Embedder(self.config.embedding)
            return self._embedder

    def store(self) -> VectorStore:
        embedder = self.embedder()
        with self._lock:
            if self._store is None:
                from folio.stores import open_store

                default_uri = self.sink.uri("_vectors")
                self._store = open_store(
                    self.config.store, default_uri=default_uri, s3=self.config.s3, dim=embedder.dim
                )
            return self._store

    def vectors(self) -> VectorBatcher:
        """The run's batched writer to the vector store (many documents per write)."""
        with self._lock:
            if self._vectors is None:
                from folio.pipeline.vector_batch import VectorBatcher

                store = self.config.store
                self._vectors = VectorBatcher(self.store, max_documents=store.batch_documents,
                                              max_wait_s=store.batch_wait_s)
            return self._vectors

    def close(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
        for engine in self._engines.values():
            engine.close()
        close_store = getattr(self._store, "close", None)
        if callable(close_store):
            close_store()
