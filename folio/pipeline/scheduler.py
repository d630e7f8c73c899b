"""Pages, not documents, are the unit of work: one scheduler per run feeds the OCR engine
from the pages of every admitted document.

Why: with a window of documents (the old design), the engine waited for whichever
document was slowest to prepare, and one long PDF held back every short one behind it,
so a GPU stayed a quarter busy. Here three pools work side by side:

- **prepare** (``limits.document_concurrency`` threads; while the engine is short of
  pages, up to ``limits.render_burst_workers`` or twice as many, whichever is more):
  fetch, hash, probe, compress or repair a document (the caller's ``prepare`` function,
  so a flow can make it a task);
- **render** (``limits.render_workers`` threads, each driving one page-worker child, up
  to ``limits.render_burst_workers`` while the engine is short of pages): page batches of
  ``limits.pages_per_worker`` pages, taken round-robin across documents, so a 1000-page
  PDF's first pages reach the engine before its last are rendered and the short
  documents beside it are not queued behind it;
- **OCR** (:func:`ocr_threads` threads): the engine ladder, page by page, oldest
  first (but a page whose document's later pages are done goes first). Only pages that
  need the engine queue for it: a page with a trusted text layer (or a blank or failed
  one) ends on its render thread as it arrives. A generative engine's requests are
  bounded by its in-flight budget (:func:`ocr_concurrency`, the engine's own semaphore);
  the ladder holds a quarter more pages than that, so a page being encoded before its
  request or parsed after its answer never holds a server slot: on the H200, olmOCR 2's
  shape at 9 pages/s kept only 138 of 256 requests running at the server while folio's
  threads held all 256 (bench/results/engine_limit.json).

Admission and render-ahead share one watermark (:attr:`SchedulerLimits.watermark_pages`,
twice the OCR concurrency): a page batch is rendered only while fewer pages than that are
rendered-and-waiting or being rendered, so the queue in front of the engine stays short
and a short document's pages never wait behind hundreds of a long one's; a new document
is prepared whenever the admitted ones' *near* pages (each counted up to one batch, so
one long document never looks like a full queue) fall below it. Memory: rendered page
images waiting on disk are also bounded in bytes (``limits.prepared_image_mb``); a batch
starts only when its estimated bytes fit (always when nothing waits, so one page larger
than the budget cannot stall the run).

Finished documents come out of :meth:`PageScheduler.run` as their last page ends, not
in input order, so loading them overlaps the OCR of the rest.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from folio import progress
from folio.errors import is_transient_code
from folio.io.sources import SourceRef
from folio.models import DocumentResult, PagePrep, PageResult
from folio.pipeline import deadline as doc_deadline
from folio.pipeline.limits import SchedulerLimits
from folio.pipeline.outcome import quarantine
from folio.pipeline.page_jobs import needs_engine, worker_jobs
from folio.pipeline.pages import discard_image, process_page
from folio.pipeline.prepare import PreparedDocument
from folio.pipeline.scheduler_records import QueueSample, _Document, _Ready
from folio.pipeline.services import Services

if TYPE_CHECKING:
    from folio.pdf.page_worker import WorkerJob

log = logging.getLogger(__name__)

#: a page batch is admitted against the image budget at this many bytes a page until
#: real pages have been measured
FIRST_PAGE_ESTIMATE = 512 * 1024

Prepare = Callable[[SourceRef], "PreparedDocument | DocumentResult"]


class PageScheduler:
    """Runs the pages of many documents through the OCR ladder; see the module doc.

    Example::

        scheduler = PageScheduler(services, prepare=lambda ref: start_document(ref, services))
        for doc in scheduler.run(refs):   # OCR'd, not yet validated or loaded
            ...
    """

    def __init__(self, services: Services, *, prepare: Prepare,
                 limits: SchedulerLimits | None = None) -> None:
        self.services = services
        self.config = services.config
        self.limits = limits or SchedulerLimits.from_config(services.config)
        self._prepare = prepare
        self._cond = threading.Condition()
        self._docs: list[_Document] = []  # admitted, pages not all done
        self._rr = 0  # round-robin position over _docs for page batches
        self._ready: deque[_Ready] = deque()
        self._preparing = 0
        self._finished: deque[DocumentResult] = deque()
        self._trash: list[Path] = []  # finished documents' work dirs, removed off the lock
        #: finished documents' preparations, by id of their result: figures are cropped
        #: from their PDFs before the work dirs go (folio.figures.store)
        self._preps: dict[int, PreparedDocument] = {}
        self._image_bytes = 0  # images rendered and not yet discarded
        self._reserved = 0  # bytes promised to running page batches not yet received
        self._rendering = 0  # pages of running page batches not yet received
        self._batches = 0  # page batches running
        self._page_estimate = FIRST_PAGE_ESTIMATE
        self._measured = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: the largest image bytes seen waiting at once (for tests and benchmarks)
        self.peak_image_bytes = 0
        self.peak_in_ladder = 0
        self.peak_preparing = 0
        self.peak_batches = 0
        self._in_ladder = 0
        #: when the first and the last page ended (time.monotonic), None before any
        self.first_page_at: float | None = None
        self.last_page_at: float | None = None
        #: when :meth:`run` handed over its last document and stopped its threads
        self.finished_at: float | None = None
        #: about once a second: what stood in front of the engine (see :class:`QueueSample`)
        self.timeline: list[QueueSample] = []
        self._started_at = time.monotonic()

    # --- the public loop -------------------------------------------------------------------
    def run(self, refs: Iterable[SourceRef]) -> Iterator[DocumentResult]:
        """Yield every source's result (OCR'd, or finished early: cached, quarantined) as
        it ends. Closing the iterator early stops the workers and kills page workers."""
        pending = deque(refs)
        total = len(pending)
        yielded = 0
        lim = self.limits
        self._start_threads()
        self._started_at = time.monotonic()
        prepare_pool = ThreadPoolExecutor(max(lim.prepare_workers, lim.prepare_burst),
                                          thread_name_prefix="folio-prepare")
        # admission has its own thread: the caller may take a while with each document
        # it is handed (a flow submits a task per document), and a run of short
        # documents must not leave the engine waiting for the caller's loop
        control = threading.Thread(target=self._control_loop, args=(pending, prepare_pool),
                                   name="folio-admit", daemon=True)
        control.start()
        try:
            while yielded < total:
                with self._cond:
                    if not self._finished:
                        self._cond.wait(timeout=1.0)
                    done = list(self._finished)
                    self._finished.clear()
                    trash, self._trash = self._trash, []
                    preps = [self._preps.pop(id(doc), None) for doc in done]
                for doc, prep in zip(done, preps, strict=True):
                    if prep is not None:  # while its PDF is still there
                        figures(doc, prep, self.services)
                for folder in trash:
                    shutil.rmtree(folder, ignore_errors=True)
                for doc in done:
                    yielded += 1
                    yield doc
        finally:
            self._stop.set()
            with self._cond:
                self._cond.notify_all()
            control.join()
            prepare_pool.shutdown(wait=True, cancel_futures=True)
            for thread in self._threads:
                thread.join()
            self._discard_waiting()
            self.finished_at = time.monotonic()

    def _control_loop(self, pending: deque[SourceRef], prepare_pool: ThreadPoolExecutor) -> None:
        """Admit documents whenever there is room, and sample the queue, until stopped;
        say once when every page is at the engine (:meth:`Services.engine_has_every_page`)."""
        fed = False
        while True:
            with self._cond:
                if self._stop.is_set():  # checked under the lock: run() notifies under it
                    return
                self._sample()
                while pending and self._should_admit():
                    self._preparing += 1
                    self.peak_preparing = max(self.peak_preparing, self._preparing)
                    prepare_pool.submit(self._admit, pending.popleft())
                now_fed = not fed and not pending and self._all_at_engine()
                if not now_fed:
                    self._cond.wait(timeout=1.0)
            if now_fed:  # outside the lock: the services take their own
                fed = True
                try:
                    self.services.engine_has_every_page()
                except Exception:  # a hint for the embedder: never worth admission's thread
                    log.exception("telling the services every page is at the engine failed")

    def _all_at_engine(self) -> bool:
        """Nothing left to prepare, render or queue: every page is in the ladder or done
        (lock held; the caller knows no source waits for admission)."""
        return (not self._preparing and not self._ready and not self._rendering
                and not self._batches and not any(d.jobs for d in self._docs))

    def _sample(self) -> None:
        """One timeline entry per second at most (lock held)."""
        at = round(time.monotonic() - self._started_at, 1)
        if self.timeline and at - self.timeline[-1].t < 1.0:
            return
        self.timeline.append(QueueSample(
            t=at, ready=len(self._ready), in_ladder=self._in_ladder, rendering=self._rendering,
            preparing=self._preparing, documents=len(self._docs),
            at_server=self.services.requests_open()))

    # --- admission -------------------------------------------------------------------------
    def _near_pages(self) -> int:
        """Pages the engine will see soon: each document counted up to one page batch."""
        cap = self.limits.pages_per_worker
        return sum(min(d.outstanding, cap) for d in self._docs)

    def _should_admit(self) -> bool:
        lim = self.limits
        workers = lim.prepare_burst if self._engine_short() else lim.prepare_workers
        if self._preparing >= workers:
            return False
        if len(self._docs) + self._preparing >= lim.max_documents:
            return False
        # a document being prepared counts as one batch of pages until it is known
        near = self._near_pages() + self._preparing * lim.pages_per_worker
        return near < lim.watermark_pages

    def _engine_short(self) -> bool:
        """No page waits for the engine and the ladder, with what is being rendered, is
        below its budget: the engine will idle unless more documents come in."""
        return not self._ready and (
            self._in_ladder + self._rendering < self.limits.ocr_concurrency)

    def _admit(self, ref: SourceRef) -> None:
        try:
            prep = self._prepare(ref)
        except Exception as err:  # the prepare hook promises an outcome; keep it honest
            prep = quarantine(DocumentResult(source=ref.uri), err)
        with self._cond:
            self._preparing -= 1
            if isinstance(prep, DocumentResult):
                self._finished.append(prep)
            elif prep.result.page_count == 0:
                self._finish(_Document(prep=prep, jobs=deque(), deadline=0.0))
            else:
                jobs = deque(worker_jobs(prep, self.config))
                deadline = prep.started + self.config.limits.document_timeout_s
                self._docs.append(_Document(prep=prep, jobs=jobs, deadline=deadline))
            self._cond.notify_all()

    # --- rendering -------------------------------------------------------------------------
    def _start_threads(self) -> None:
        lim = self.limits
        for n in range(max(lim.render_workers, lim.render_burst)):
            self._spawn(self._render_loop, f"folio-render-{n}")
        for n in range(lim.ocr_threads):
            self._spawn(self._ocr_loop, f"folio-ocr-{n}")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _next_job(self) -> tuple[_Document, WorkerJob, int] | None:
        """The next page batch, round-robin over documents, when its bytes fit and a
        render slot is free (call with the lock held)."""
        candidates = [d for d in self._docs if d.jobs]
        if not candidates:
            return None
        lim = self.limits
        if self._batches >= (lim.render_burst if self._engine_short() else lim.render_workers):
            return None
        if len(self._ready) + self._rendering >= self.limits.watermark_pages:
            return None  # enough in front of the engine: render later, fairly
        doc = candidates[self._rr % len(candidates)]
        reserve = len(doc.jobs[0].pages) * self._page_estimate
        waiting = self._image_bytes + self._reserved
        if waiting and waiting + reserve > self.limits.image_budget_bytes:
            return None
        self._rr += 1
        self._batches += 1
        self.peak_batches = max(self.peak_batches, self._batches)
        doc.running_jobs += 1
        self._reserved += reserve
        self._rendering += len(doc.jobs[0].pages)
        return doc, doc.jobs.popleft(), reserve

    def _render_loop(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                picked = self._next_job()
                if picked is None:
                    self._cond.wait(timeout=0.5)
                    continue
            doc, job, reserve = picked
            try:
                self._render(doc, job, reserve)
            except Exception:  # never lose the thread: _render accounts for its pages
                log.exception("page batch of %s failed", doc.source)

    def _render(self, doc: _Document, job: WorkerJob, reserve: int) -> None:
        from folio.pdf.page_worker import prepare_pages

        per_page = reserve // max(len(job.pages), 1)
        seen: set[int] = set()
        bounded = doc_deadline.within(job, doc.deadline)  # the document's time left, or none
        pages = prepare_pages(bounded) if bounded is not None else iter(())
        try:
            for page in pages:
                seen.add(page.index)
                self._receive(doc, page, per_page)
                if self._stop.is_set() or time.monotonic() > doc.deadline:
                    break
        except Exception as err:  # the batch could not run at all: its pages say why
            reason = getattr(err, "reason", None) or f"worker: {type(err).__name__}: {err}"
            for index in job.pages:
                if index not in seen:
                    seen.add(index)
                    self._receive(doc, PagePrep(index=index, error=reason), per_page)
        finally:
            close = getattr(pages, "close", None)
            if callable(close):
                close()  # kills the child if it is still running
            if not self._stop.is_set() and time.monotonic() > doc.deadline:
                for index in job.pages:  # the rest of the batch: never rendered
                    if index not in seen:
                        seen.add(index)
                        self._receive(doc, PagePrep(index=index), per_page)
            with self._cond:
                unseen = len(job.pages) - len(seen)
                self._reserved -= per_page * unseen
                self._rendering -= unseen
                self._batches -= 1
                doc.running_jobs -= 1
                for index in job.pages:  # stopped early: the pages still end somewhere
                    if index not in seen and index not in doc.results:
                        doc.results[index] = PageResult(
                            index=index, width_pt=0, height_pt=0, reason="cancelled: run stopped",
                            retryable=True)
                self._maybe_finish(doc)
                self._cond.notify_all()

    def _receive(self, doc: _Document, page: PagePrep, reserved: int) -> None:
        if time.monotonic() > doc.deadline and (not page.error or is_transient_code(page.error)):
            # whatever its route (a text layer too): the document's time is up
            discard_image(page)
            page = doc_deadline.timed_out(page.index, self.config.limits.document_timeout_s)
        if not needs_engine(page, self.config):
            self._process_now(doc, page, reserved)
            return
        size = _image_size(page)
        with self._cond:
            self._reserved -= reserved
            self._rendering -= 1
            self._image_bytes += size
            self.peak_image_bytes = max(self.peak_image_bytes, self._image_bytes)
            if size:
                self._measured += 1  # running mean, so the estimate follows the documents
                self._page_estimate += (size - self._page_estimate) // min(self._measured, 64)
            self._ready.append(_Ready(doc, page, size))
            self._cond.notify_all()

    def _process_now(self, doc: _Document, page: PagePrep, reserved: int) -> None:
        """A page the engine never sees (a trusted text layer, a blank page, a page the
        worker could not prepare) ends here, on the render thread, at once: it must not
        queue behind engine pages for a ladder slot, since every page after it in its
        document waits for it before its chunks can close and be embedded."""
        self._end_here(doc, process_page(page, self.services), reserved)  # never raises

    def _end_here(self, doc: _Document, result: PageResult, reserved: int) -> None:
        """A received page that never waits for the engine: its result is recorded at
        once and its render reservation released."""
        with self._cond:
            self._reserved -= reserved
            self._rendering -= 1
            self._record(doc, result)
            self._cond.notify_all()
        self._announce(doc, result)

    # --- OCR -------------------------------------------------------------------------------
    def _ocr_loop(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not self._stop.is_set():
                    self._cond.wait(timeout=0.5)
                if self._stop.is_set():
                    return
                item = self._next_ready()
                self._in_ladder += 1
                self.peak_in_ladder = max(self.peak_in_ladder, self._in_ladder)
            page = item.page
            if time.monotonic() > item.doc.deadline:  # waited past the document's time
                discard_image(page)
                page = doc_deadline.timed_out(page.index, self.config.limits.document_timeout_s)
            result = process_page(page, self.services)  # never raises; drops the image
            with self._cond:
                self._in_ladder -= 1
                self._image_bytes -= item.size
                self._record(item.doc, result)
                self._cond.notify_all()
            self._announce(item.doc, result)

    def _next_ready(self) -> _Ready:
        """The oldest waiting page, except that a page with later pages of its document
        already done goes first (lock held): those pages, often a long born-digital
        document's text, cannot be chunked and embedded until it is back, and a run
        whose long documents end in its last seconds loads them after its last page.
        Scanned documents' pages end about in order, so they keep their turn."""
        for position, item in enumerate(self._ready):
            if item.doc.last_done > item.page.index:
                del self._ready[position]
                return item
        return self._ready.popleft()

    def _record(self, doc: _Document, result: PageResult) -> None:
        """A page's result (lock held); the document ends with its last page. Listeners
        hear of it after the lock is released (:meth:`_announce`): they do I/O."""
        doc.results[result.index] = result
        doc.last_done = max(doc.last_done, result.index)
        self.last_page_at = time.monotonic()
        self.first_page_at = self.first_page_at or self.last_page_at
        self._maybe_finish(doc)

    def _maybe_finish(self, doc: _Document) -> None:
        """Finish once every page has a result and no batch of it is still running (the
        last page's OCR can end before its batch's thread lets go; lock held)."""
        if doc in self._docs and doc.outstanding <= 0 and not doc.jobs and not doc.running_jobs:
            self._finish(doc)

    def _finish(self, doc: _Document) -> None:
        result = doc.prep.result
        for index in range(result.page_count):  # the workers promise every page; never drop one
            doc.results.setdefault(index, PageResult(
                index=index, width_pt=0, height_pt=0, reason="internal: page never reported",
                retryable=True))
        result.pages = [doc.results[i] for i in range(result.page_count)]
        result.engine = "+".join(sorted({p.engine for p in result.pages if p.engine}))
        result.seconds = time.monotonic() - doc.prep.started
        doc_deadline.mark_timed_out(result, self.config.limits.document_timeout_s)
        self._trash.append(Path(doc.prep.work_dir))
        self._preps[id(result)] = doc.prep
        if doc in self._docs:
            self._docs.remove(doc)
        self._finished.append(result)

    def _discard_waiting(self) -> None:
        with self._cond:
            while self._ready:
                discard_image(self._ready.popleft().page)
            trash = [*self._trash, *(Path(d.prep.work_dir) for d in self._docs)]
            self._trash = []
        for folder in trash:
            shutil.rmtree(folder, ignore_errors=True)

    def _announce(self, doc: _Document, result: PageResult) -> None:
        """Progress listeners, and the work that can start per page (early embedding)."""
        progress.emit(progress.ProgressEvent(
            kind="page-done", source=doc.source, pages=1, outcome=result.outcome))
        try:
            self.services.page_done(doc.prep.result, result)
        except Exception:  # only a head start: the document's load does it anyway
            log.exception("per-page work for %s failed", doc.source)


def figures(doc: DocumentResult, prep: PreparedDocument, services: Services) -> None:
    """The document's figure crops written beside its outputs and its links resolved
    (:mod:`folio.figures.store`); never raises: figures are not worth a document."""
    from folio.figures.store import store_figures
    from folio.output.outputs import document_folder

    config = services.config
    try:
        with services.clock.span("figures"):
            store_figures(doc, prep.text_pdf or prep.pdf,
                          None if doc.repaired else config.password, services.sink, config,
                          document_folder(doc), kind=prep.kind)
    except Exception:
        log.exception("figures of %s failed", doc.source)


def _image_size(page: PagePrep) -> int:
    if not page.image_path:
        return 0
    try:
        return os.path.getsize(page.image_path)
    except OSError:
        return 0
