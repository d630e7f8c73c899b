"""Embedding threads yield the CPU to the work a run waits on (nice value per thread)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from folio.cpu_priority import background_pool
from folio.output.embeddings import Embedder
from folio.pipeline.early_embed import EarlyEmbeddings
from folio.settings.config import ChunkSettings, EmbeddingSettings
from tests.doc_factory import block, document, page

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice values are a Linux feature")


def niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_background_pool_runs_its_jobs_at_a_higher_nice_value_and_leaves_the_caller() -> None:
    base = niceness()
    with background_pool(2, name="test-bg", nice=5) as pool:
        assert pool.submit(niceness).result() == min(19, base + 5)
    with background_pool(1, name="test-bg0", nice=0) as pool:
        assert pool.submit(niceness).result() == base
    assert niceness() == base


class RecordingEmbedder(Embedder):
    """The real embedder, noting the nice value each batch ran at."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        super().__init__(settings)
        self.seen: set[int] = set()

    def _run(self, session: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.seen.add(niceness())
        return super()._run(session, texts)


def test_embedding_batches_and_early_embedding_run_niced() -> None:
    base = niceness()
    embedder = RecordingEmbedder(EmbeddingSettings(batch_size=4, parallel_batches=2, nice=7))
    texts = [f"chunk number {i} about rivers and ledgers" for i in range(16)]
    embedder.embed(texts)  # four batches over the embedder's own pool
    assert embedder.seen == {min(19, base + 7)}

    embedder.seen.clear()
    early = EarlyEmbeddings(lambda: embedder, ChunkSettings(max_chars=200), batch=1, nice=7)
    doc = document([page(0, [block("Text", "a paragraph about quartz and copper " * 8, 0)])],
                   seed="nice")
    early.page_done(doc, doc.pages[0])  # its only page: the final chunks embed at once
    early.wait_idle()
    early.close()
    assert embedder.seen == {min(19, base + 7)}
