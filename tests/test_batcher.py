"""The batcher that puts many documents into one call to a slow shared resource."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from folio.errors import RunStoppedError
from folio.models import DocumentResult
from folio.pipeline.batcher import Batcher
from folio.pipeline.outcome import quarantine


def test_items_arriving_while_a_flush_runs_share_the_next_one() -> None:
    release = threading.Event()
    calls: list[list[int]] = []

    def flush(items: list[int]) -> list[int]:
        calls.append(list(items))
        if len(calls) == 1:
            release.wait(5)  # the resource is busy: the others gather meanwhile
        return [i * 10 for i in items]

    batcher: Batcher[int, int] = Batcher(flush, name="test", max_items=8)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(batcher.submit, 0)
        while not calls:
            time.sleep(0.01)
        rest = [pool.submit(batcher.submit, i) for i in range(1, 6)]
        time.sleep(0.2)
        release.set()
        assert first.result() == 0 and [f.result() for f in rest] == [10, 20, 30, 40, 50]
    assert calls[0] == [0] and sorted(calls[1]) == [1, 2, 3, 4, 5]
    batcher.close()


def test_with_two_workers_the_next_batch_starts_while_the_first_still_runs() -> None:
    """Two workers (two validation children): an item arriving while a batch is being
    flushed is flushed at once by the other worker, not after the first batch."""
    release = threading.Event()
    calls: list[list[int]] = []

    def flush(items: list[int]) -> list[int]:
        calls.append(list(items))
        if 0 in items:
            release.wait(5)  # the first batch holds its worker
        return [i * 10 for i in items]

    batcher: Batcher[int, int] = Batcher(flush, name="test", max_items=8, workers=2)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(batcher.submit, 0)
        while not calls:
            time.sleep(0.01)
        second = pool.submit(batcher.submit, 1)
        assert second.result(timeout=3) == 10  # done while the first batch still runs
        assert not first.done()
        release.set()
        assert first.result() == 0
    assert calls == [[0], [1]]
    batcher.close()


def test_hurry_stops_an_item_waiting_for_company_that_will_not_come() -> None:
    batcher: Batcher[int, int] = Batcher(lambda items: items, name="test", max_wait_s=30)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(batcher.submit, 7)
        time.sleep(0.2)
        assert not waiting.done(), "waits for others to share its call"
        started = time.monotonic()
        batcher.hurry()
        assert waiting.result(timeout=5) == 7
        assert time.monotonic() - started < 5
    batcher.close()


def test_a_failing_flush_fails_every_item_of_its_batch_and_the_next_batch_runs() -> None:
    def flush(items: list[int]) -> list[int]:
        if 13 in items:
            raise OSError("store unreachable")
        return items

    batcher: Batcher[int, int] = Batcher(flush, name="test")
    with pytest.raises(OSError, match="unreachable"):
        batcher.submit(13)
    assert batcher.submit(14) == 14
    batcher.close()
    with pytest.raises(RunStoppedError, match="stopped"):
        batcher.submit(15)


def test_a_document_still_loading_when_the_run_stops_is_cancelled_not_a_bug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ctrl-C closes the batchers while loader threads still hand documents in: each ends
    as a retryable "cancelled" outcome, with no traceback on the user's screen."""
    batcher: Batcher[int, int] = Batcher(lambda items: items, name="vector-writes")
    batcher.close()
    doc = DocumentResult(doc_id="d", source="s3://b/a.pdf", sha256="0" * 64, page_count=1)
    with caplog.at_level(logging.DEBUG):
        try:
            batcher.submit(1)
        except Exception as exc:  # what load_document's caller does with it
            quarantine(doc, exc)
    assert doc.reason.startswith("cancelled: ") and doc.retryable
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
