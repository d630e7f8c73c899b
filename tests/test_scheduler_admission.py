"""The page scheduler's admission thread against the OpenAI-protocol test server: it
admits documents however long the caller takes with each, widens preparation while the
engine is short of pages, and tells the services once that every page is at the engine.

Why a file of its own: tests/test_scheduler.py passed 500 lines (issue 46); these tests
share its helpers (imported from it, as tests/test_engine_dispatch.py does) but not its
module-scoped corpus.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from folio.io.sources import discover
from folio.models import DocumentResult
from folio.pipeline import PageScheduler, Services, start_document
from tests.openai_fake import FakeServer
from tests.test_scheduler import PageLog, gpu_config, one_page_pdfs, run_scheduler

pytestmark = pytest.mark.timeout(300)


def test_the_scheduler_says_once_when_every_page_is_at_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once nothing is left to prepare, render or queue, the services hear it (the
    embedder's cap beside a local GPU server is lifted then), while the engine still
    holds pages, not only when the last document is done; and only once. The engine
    holds every request until it has been said, so saying it late fails the test."""
    sources = one_page_pdfs(tmp_path / "pdfs", seed=80, count=5)
    said: list[int] = []  # pages done when it was said
    fed = threading.Event()

    with PageLog() as pages:
        def record_fed(self: Services) -> None:
            said.append(len(pages.events))
            fed.set()

        monkeypatch.setattr(Services, "engine_has_every_page", record_fed)
        with FakeServer(delay_s=0.05, hold=fed) as fake:
            config = gpu_config(tmp_path, fake.url)
            config.ocr.in_flight = 8  # room for every page at once
            finished, _ = run_scheduler(config, tmp_path / "out", sources)
    assert len(finished) == 5 and all(d.pages_ok == d.page_count for _, d in finished)
    assert said == [0], said  # before any page had its answer, once


def test_preparation_widens_while_the_engine_is_short_of_pages(tmp_path: Path) -> None:
    """Many short documents, each slow to prepare, and an engine with room to spare:
    more documents are prepared at once than ``document_concurrency`` (up to the burst),
    so the engine is not left waiting on preparation; every document still ends."""
    sources = one_page_pdfs(tmp_path / "pdfs", seed=40, count=8)
    with FakeServer(delay_s=0.05) as fake:
        config = gpu_config(tmp_path, fake.url, document_concurrency=2)
        config.ocr.in_flight = 16
        services = Services(config, str(tmp_path / "out"))

        def slow_prepare(ref: Any) -> Any:
            time.sleep(0.5)  # like a probe and a Ghostscript pass
            return start_document(ref, services)

        scheduler = PageScheduler(services, prepare=slow_prepare)
        try:
            docs = list(scheduler.run(discover([str(p) for p in sources], config.s3)))
        finally:
            services.close()
    assert len(docs) == 8 and all(d.pages_ok == d.page_count for d in docs)
    assert scheduler.peak_preparing == scheduler.limits.prepare_burst == 4


def test_a_slow_caller_does_not_hold_back_admission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow takes a while with every document it is handed (it submits a task);
    new documents are still admitted meanwhile, so the engine is not left waiting on
    the caller's loop. Here the caller does not come back from the first document until
    every page of all six has ended (a minute at most): with admission in its loop, the
    other five would never start."""
    sources = one_page_pdfs(tmp_path / "pdfs", seed=60, count=6)
    pages_done: list[str] = []
    lock = threading.Lock()
    all_done = threading.Event()
    page_done = Services.page_done

    def record(self: Services, doc: DocumentResult, page: Any) -> None:
        page_done(self, doc, page)
        with lock:
            pages_done.append(doc.source)
            if len(pages_done) == len(sources):
                all_done.set()

    monkeypatch.setattr(Services, "page_done", record)
    with FakeServer(delay_s=0.05) as fake:
        config = gpu_config(tmp_path, fake.url, document_concurrency=1)
        services = Services(config, str(tmp_path / "out"))
        scheduler = PageScheduler(services, prepare=lambda ref: start_document(ref, services))
        seen: list[bool] = []  # whether every page had ended when the caller took each one
        try:
            for _ in scheduler.run(discover([str(p) for p in sources], config.s3)):
                if not seen:
                    all_done.wait(timeout=60.0)  # a caller busy with its first document
                seen.append(all_done.is_set())
        finally:
            services.close()
    assert len(seen) == 6 and all(seen), (seen, pages_done)
