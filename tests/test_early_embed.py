"""Chunks embedded while a document's later pages are still in OCR (the packaged model)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from folio.models import DocumentResult, PageOutcome
from folio.output.chunking import chunk_document, embedding_text
from folio.output.embeddings import Embedder
from folio.page import running_heads
from folio.pipeline.early_embed import EarlyEmbeddings
from folio.settings.config import ChunkSettings, EmbeddingSettings
from tests.doc_factory import block, document, page


class CountingEmbedder(Embedder):
    """The real embedder, counting the texts it is asked for."""

    def __init__(self) -> None:
        super().__init__(EmbeddingSettings())
        self.texts = 0
        self._count_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._count_lock:
            self.texts += len(texts)
        return super().embed(texts)


def long_document(pages: int = 12, seed: str = "early") -> DocumentResult:
    rng = random.Random(seed)
    vocab = ["ledger", "river", "beacon", "harvest", "quartz", "meadow", "signal", "copper"]
    made = []
    for i in range(pages):
        blocks = [block("Section-header", f"## Part {i}", 0)]
        blocks += [block("Text", " ".join(rng.choice(vocab) for _ in range(60)) + ".", 1 + b)
                   for b in range(3)]
        made.append(page(i, blocks))
    return document(made, seed=seed)


def test_pages_in_any_order_give_the_load_time_vectors_and_most_are_early() -> None:
    embedder = CountingEmbedder()
    settings = ChunkSettings(max_chars=400)
    early = EarlyEmbeddings(lambda: embedder, settings, batch=4)
    doc = long_document()
    order = list(range(len(doc.pages)))
    random.Random(3).shuffle(order)
    for i in order:  # OCR ends pages out of order
        early.page_done(doc, doc.pages[i])
    early.wait_idle()
    during_ocr = embedder.texts
    chunks = chunk_document(doc, settings)
    texts = [embedding_text(c) for c in chunks]
    vectors = early.vectors(doc.doc_id, texts)
    at_load = embedder.texts - during_ocr
    # the last pages wait for the end: whether their lines are running heads depends on
    # the pages after them (folio.page.running_heads.WINDOW)
    tail = len({embedding_text(c) for c in chunks
                if c.page_end > len(doc.pages) - running_heads.WINDOW})  # page_end from 1
    assert vectors.shape == (len(texts), embedder.dim)
    assert np.allclose(vectors, Embedder(EmbeddingSettings()).embed(texts), atol=1e-5)
    assert during_ocr >= len(set(texts)) - 4 - tail, "most chunks are embedded before the load"
    assert at_load <= 4 + tail, "the load embeds only what was still open (under one batch)"
    assert tail < len(set(texts)) / 4
    early.close()


def test_a_document_whose_pages_are_all_in_is_embedded_before_its_load() -> None:
    """A short document (fewer pages than the running-heads window, fewer chunks than a
    batch) closes nothing while its pages arrive; once the last one is in, all its chunks
    are embedded at once, beside its validation, not after it at load time."""
    embedder = CountingEmbedder()
    settings = ChunkSettings(max_chars=400)
    early = EarlyEmbeddings(lambda: embedder, settings, batch=32, workers=1)
    doc = long_document(pages=2, seed="short")
    assert len(doc.pages) <= running_heads.WINDOW  # no page is chunked before the end
    early.page_done(doc, doc.pages[1])
    early.page_done(doc, doc.pages[0])
    early.wait_idle()
    during_ocr = embedder.texts
    texts = [embedding_text(c) for c in chunk_document(doc, settings)]
    vectors = early.vectors(doc.doc_id, texts)
    assert during_ocr == len(set(texts)) > 1
    assert embedder.texts == during_ocr, "nothing left for the load to embed"
    assert np.allclose(vectors, Embedder(EmbeddingSettings()).embed(texts), atol=1e-5)
    early.close()


def test_a_page_quarantined_after_ocr_changes_chunks_and_vectors_stay_right() -> None:
    embedder = CountingEmbedder()
    settings = ChunkSettings(max_chars=400)
    early = EarlyEmbeddings(lambda: embedder, settings, batch=2)
    doc = long_document(seed="quarantine")
    for p in doc.pages:
        early.page_done(doc, p)
    early.wait_idle()
    doc.pages[5].outcome = PageOutcome.QUARANTINED  # validation's verdict comes later
    texts = [embedding_text(c) for c in chunk_document(doc, settings)]
    vectors = early.vectors(doc.doc_id, texts)
    assert np.allclose(vectors, Embedder(EmbeddingSettings()).embed(texts), atol=1e-5)


def test_a_document_never_seen_is_embedded_at_load_and_discard_forgets() -> None:
    embedder = CountingEmbedder()
    early = EarlyEmbeddings(lambda: embedder, ChunkSettings(), batch=2)
    doc = long_document(pages=3, seed="unseen")
    texts = [embedding_text(c) for c in chunk_document(doc, ChunkSettings())]
    assert early.vectors(doc.doc_id, texts).shape == (len(texts), embedder.dim)
    assert embedder.texts == len(set(texts))
    assert early.vectors(doc.doc_id, []).shape == (0, embedder.dim)
    for p in doc.pages:
        early.page_done(doc, p)
    early.discard(doc.doc_id)
    early.close()
    early.page_done(doc, doc.pages[0])  # after close: ignored, not an error


def test_early_jobs_run_on_a_quarter_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from folio.pipeline.services import early_embed_workers
    from folio.settings.config import PipelineConfig

    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert early_embed_workers(PipelineConfig()) == 4
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert early_embed_workers(PipelineConfig()) == 1  # the CPU engines need the rest
    assert early_embed_workers(PipelineConfig.model_validate(
        {"embedding": {"parallel_batches": 3}})) == 3
