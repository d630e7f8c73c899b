"""The document pipeline, stage by stage, without Prefect.

Each stage takes and returns a :class:`DocumentResult` and never raises for problems of
the input: bad input becomes a quarantined outcome with a reason, infrastructure trouble
becomes a quarantined outcome marked ``retryable`` (never recorded as done), so every
input ends in a typed outcome. ``tasks/`` wraps each stage in a Prefect task.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from folio import progress
from folio.config import PipelineConfig
from folio.engines.base import GENERATIVE_ENGINES, EngineOutput, OcrEngine
from folio.errors import (
    BadInputError,
    BadOutputError,
    FolioError,
    MalformedPdfError,
    TransientError,
)
from folio.io.sinks import Sink, open_sink
from folio.io.sources import SourceRef, fetch
from folio.models import (
    Attempt,
    BBox,
    Block,
    DocumentOutcome,
    DocumentResult,
    PageOutcome,
    PagePrep,
    PageResult,
)
from folio.quality import repeat_ratio
from folio.route import route_page

if TYPE_CHECKING:
    from folio.embeddings import Embedder
    from folio.pdf.page_worker import PdfInfo, WorkerJob
    from folio.stores.base import VectorStore

log = logging.getLogger(__name__)

#: bytes per page above which a PDF is image-heavy enough for Ghostscript to pay off
COMPRESS_MIN_BYTES_PER_PAGE = 64 * 1024
#: Ghostscript's output is used only when it saves at least this share of the bytes
COMPRESS_MIN_SAVING = 0.10
#: bboxes overshooting the page by less than this share of its size are clipped
BBOX_CLIP_TOLERANCE = 0.02


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

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        close_store = getattr(self._store, "close", None)
        if callable(close_store):
            close_store()


class PreparedDocument(BaseModel):
    """A document that passed the checks and is ready for its pages to be prepared."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    result: DocumentResult
    pdf: Path  # what the page worker reads: the original, a compressed or a repaired copy
    work_dir: Path
    started: float


# --- stage 1: fetch, hash, cache, probe, compress/repair ------------------------------------


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def quarantine(doc: DocumentResult, err: BaseException) -> DocumentResult:
    """Turn an exception into the document's typed outcome."""
    if isinstance(err, FolioError):
        doc.reason = err.reason
        doc.retryable = isinstance(err, TransientError)
    else:  # a bug in folio or a library: keep the document, say what happened, retry later
        log.exception("internal error on %s", doc.source)
        doc.reason = f"internal: {type(err).__name__}: {err}"
        doc.retryable = True
    doc.outcome = DocumentOutcome.QUARANTINED
    for page in doc.pages:  # pages already known keep their index; none is dropped
        if page.outcome is PageOutcome.QUARANTINED and not page.reason:
            page.reason = doc.reason
    if doc.page_count and not doc.pages:
        doc.pages = [
            PageResult(index=i, width_pt=0, height_pt=0, reason=doc.reason)
            for i in range(doc.page_count)
        ]
    return doc


def start_document(ref: SourceRef, services: Services) -> PreparedDocument | DocumentResult:
    """Fetch, hash and probe a source; return a finished result when there is nothing to do
    (already done with this configuration, or not processable)."""
    config = services.config
    started = time.monotonic()
    doc = DocumentResult(source=ref.uri, config_hash=config.config_hash())
    progress.emit(progress.ProgressEvent(kind="document-start", source=ref.uri))
    try:
        if ref.size is not None and ref.size > config.limits.max_bytes:
            raise BadInputError(
                f"{ref.size} bytes is over the {config.limits.max_bytes}-byte limit",
                code="too-large",
            )
        work_dir = Path(config.work_dir) / f"{time.time_ns()}-{threading.get_ident()}"
        work_dir.mkdir(parents=True, exist_ok=True)
        local = fetch(ref, work_dir, config.s3)
        doc.sha256 = sha256_file(local)
        doc.doc_id = doc.sha256[:32]
        doc.compression.original_bytes = local.stat().st_size
        if not config.reprocess:
            from folio.outputs import find_done

            done = find_done(services.sink, doc.sha256, doc.config_hash)
            if done is not None:
                shutil.rmtree(work_dir, ignore_errors=True)
                done.source, done.cached, done.seconds = ref.uri, True, time.monotonic() - started
                return done
        pdf, info = _probe_or_repair(local, doc, work_dir, config)
        pdf = _maybe_compress(pdf, info, doc, work_dir, config)
        return PreparedDocument(result=doc, pdf=pdf, work_dir=work_dir, started=started)
    except Exception as err:  # every failure becomes an outcome
        doc.seconds = time.monotonic() - started
        return quarantine(doc, err)


def _probe_or_repair(
    local: Path, doc: DocumentResult, work_dir: Path, config: PipelineConfig
) -> tuple[Path, PdfInfo]:
    from folio.pdf import ghostscript
    from folio.pdf.page_worker import probe

    password = config.password
    limits = config.limits
    try:
        info = probe(local, password, limits.ghostscript_timeout_s, limits.worker_memory_mb)
        pdf = local
    except MalformedPdfError as first:
        repaired = work_dir / "repaired.pdf"
        try:
            ghostscript.repair(
                local, repaired, timeout_s=limits.ghostscript_timeout_s,
                password=password.get_secret_value() if password else None,
            )
            info = probe(repaired, None, limits.ghostscript_timeout_s, limits.worker_memory_mb)
        except FolioError as second:
            raise MalformedPdfError(f"{first}; Ghostscript repair failed too: {second}") from second
        doc.repaired = True
        pdf = repaired
        password = None
    if info.page_count == 0:
        raise MalformedPdfError("the PDF has no pages")
    if info.page_count > limits.max_pages:
        raise BadInputError(
            f"{info.page_count} pages is over the {limits.max_pages}-page limit", code="too-many-pages"
        )
    doc.page_count = info.page_count
    progress.emit(progress.ProgressEvent(kind="pages-known", source=doc.source, pages=doc.page_count))
    return pdf, info


def compression_dpi(max_page_pt: float, config: PipelineConfig) -> float:
    """The image resolution Ghostscript keeps: what the model will see of the largest page.

    Images are seen at the page's render DPI, which the pixel budget sets from the page
    size; downsampling below it loses information, keeping more buys nothing. (The plan may
    raise DPI for tiny vector text; that text is not an image and is not downsampled.)
    """
    render = config.render
    budget = render.longest_side_px / max(max_page_pt / 72.0, 1e-6)
    return max(render.min_dpi, min(render.max_dpi, budget))


def _maybe_compress(
    pdf: Path, info: PdfInfo, doc: DocumentResult, work_dir: Path, config: PipelineConfig
) -> Path:
    if not config.compress or doc.repaired:
        doc.compression.note = "disabled" if not config.compress else "repaired copy used"
        return pdf
    per_page = doc.compression.original_bytes / max(doc.page_count, 1)
    if per_page < COMPRESS_MIN_BYTES_PER_PAGE:
        doc.compression.note = f"{per_page / 1024:.0f} KiB/page: little image data to shrink"
        return pdf
    from folio.pdf import ghostscript
    from folio.pdf.page_worker import probe

    limits = config.limits
    out = work_dir / "compressed.pdf"
    try:
        comp = ghostscript.compress(
            pdf, out, image_dpi=compression_dpi(info.max_page_pt, config),
            timeout_s=limits.ghostscript_timeout_s,
            password=config.password.get_secret_value() if config.password else None,
        )
    except FolioError as err:  # compression is an optimisation: never fail the document
        doc.compression.note = f"ghostscript failed, original used: {err.reason}"
        return pdf
    doc.compression = comp
    saved = 1 - (comp.compressed_bytes or comp.original_bytes) / max(comp.original_bytes, 1)
    if saved < COMPRESS_MIN_SAVING:
        doc.compression.note = f"saved {saved:.0%} only: original used"
        return pdf
    try:
        check = probe(out, None, limits.ghostscript_timeout_s, limits.worker_memory_mb)
    except FolioError as err:
        doc.compression.note = f"compressed copy unreadable, original used: {err.reason}"
        return pdf
    if check.page_count != doc.page_count:
        doc.compression.note = f"compressed copy has {check.page_count} pages: original used"
        return pdf
    doc.compression.used = True
    doc.compression.note = f"saved {saved:.0%}"
    return out


# --- stage 2: prepare pages, route, OCR -----------------------------------------------------


def ocr_document(prep: PreparedDocument | DocumentResult, services: Services) -> DocumentResult:
    """Prepare every page in the page worker and turn it into blocks and markdown."""
    if isinstance(prep, DocumentResult):
        return prep
    doc = prep.result
    try:
        doc.pages = _ocr_pages(prep, services)
        doc.engine = "+".join(sorted({p.engine for p in doc.pages if p.engine}))
    except Exception as err:
        quarantine(doc, err)
    finally:
        shutil.rmtree(prep.work_dir, ignore_errors=True)
    doc.seconds = time.monotonic() - prep.started
    return doc


def _ocr_pages(prep: PreparedDocument, services: Services) -> list[PageResult]:
    config = services.config
    doc = prep.result
    deadline = prep.started + config.limits.document_timeout_s
    results: dict[int, PageResult] = {}
    concurrency = max(config.limits.page_concurrency, 1)
    if config.ocr.engine in ("vllm", "openai"):
        concurrency = max(concurrency, config.ocr.in_flight)
    pending: set[Future[PageResult]] = set()

    def collect(done: set[Future[PageResult]]) -> None:
        for fut in done:
            page_result = fut.result()
            results[page_result.index] = page_result

    def announce(fut: Future[PageResult]) -> None:  # as each page ends, not when collected
        if not fut.cancelled() and fut.exception() is None:
            progress.emit(progress.ProgressEvent(
                kind="page-done", source=doc.source, pages=1, outcome=fut.result().outcome))

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="folio-page") as pool:
        with PageStream(_worker_jobs(prep, config), config.limits.render_workers,
                        buffer=2 * concurrency) as pages:
            for page in pages:
                if time.monotonic() > deadline:
                    _discard_image(page)
                    results[page.index] = _page_failed(
                        page, f"timeout: document exceeded {config.limits.document_timeout_s:.0f} s")
                    continue
                future = pool.submit(process_page, page, services)
                future.add_done_callback(announce)
                pending.add(future)
                if len(pending) >= 2 * concurrency:  # backpressure on the page workers
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    collect(done)
        collect(set(wait(pending).done))
    for index in range(doc.page_count):  # the workers promise every page; never drop one
        if index not in results:
            results[index] = PageResult(
                index=index, width_pt=0, height_pt=0, reason="internal: page never reported")
    return [results[i] for i in range(doc.page_count)]


def _worker_jobs(prep: PreparedDocument, config: PipelineConfig) -> list[WorkerJob]:
    """The document's pages in batches, one page worker each (run a few at a time)."""
    from folio.pdf.page_worker import WorkerJob

    doc = prep.result
    size = config.limits.pages_per_worker
    return [
        WorkerJob(
            pdf=prep.pdf,
            password=None if doc.repaired else config.password,
            pages=list(range(start, min(start + size, doc.page_count))),
            out_dir=prep.work_dir / "pages",
            render_settings=config.render,
            route_settings=config.route,
            render="untrusted" if config.route.mode == "auto" else "all",
            memory_mb=config.limits.worker_memory_mb,
            timeout_s=config.limits.document_timeout_s,
        )
        for start in range(0, doc.page_count, size)
    ]


class PageStream:
    """Pages from several page-worker batches, merged as they come, ``workers`` at a time.

    A bounded queue carries backpressure to the workers (a full queue blocks the thread,
    which stops reading the child's pipe, which pauses the child); leaving the ``with``
    block stops every batch and kills its child.
    """

    _DONE = object()

    def __init__(self, jobs: list[WorkerJob], workers: int, *, buffer: int) -> None:
        self._jobs = jobs
        self._workers = max(1, min(workers, len(jobs)))
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(buffer, 1))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next = 0
        self._lock = threading.Lock()

    def __enter__(self) -> PageStream:
        for _ in range(self._workers):
            thread = threading.Thread(target=self._drive, daemon=True, name="folio-worker")
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        while any(t.is_alive() for t in self._threads):  # unblock producers waiting on put
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if isinstance(item, PagePrep):
                _discard_image(item)

    def __iter__(self) -> Iterator[PagePrep]:
        finished = 0
        while finished < self._workers:
            item = self._queue.get()
            if item is self._DONE:
                finished += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                assert isinstance(item, PagePrep)
                yield item

    def _take(self) -> WorkerJob | None:
        with self._lock:
            if self._next >= len(self._jobs):
                return None
            self._next += 1
            return self._jobs[self._next - 1]

    def _drive(self) -> None:
        from folio.pdf.page_worker import prepare_pages

        try:
            while not self._stop.is_set() and (job := self._take()) is not None:
                pages = prepare_pages(job)
                try:
                    for page in pages:
                        self._put(page)
                        if self._stop.is_set():
                            break
                finally:
                    close = getattr(pages, "close", None)
                    if callable(close):
                        close()  # kills the child if it is still running
        except BaseException as err:  # surfaced in the consuming thread
            self._put(err)
        finally:
            self._put(self._DONE)

    def _put(self, item: object) -> None:
        while True:
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                if self._stop.is_set() and item is not self._DONE:
                    if isinstance(item, PagePrep):
                        _discard_image(item)
                    return


def _discard_image(page: PagePrep) -> None:
    if page.image_path:
        Path(page.image_path).unlink(missing_ok=True)


def _page_failed(page: PagePrep, reason: str) -> PageResult:
    return PageResult(
        index=page.index, width_pt=page.width_pt, height_pt=page.height_pt, plan=page.plan,
        outcome=PageOutcome.QUARANTINED, reason=reason,
    )


def process_page(page: PagePrep, services: Services) -> PageResult:
    """Route one page and run the engine ladder: attempts, then fallbacks, then quarantine."""
    try:
        return _process_page(page, services)
    except Exception as err:  # one page's bug must not sink the document
        log.exception("page %s failed", page.index)
        return _page_failed(page, f"internal: {type(err).__name__}: {err}")
    finally:
        _discard_image(page)


def _process_page(page: PagePrep, services: Services) -> PageResult:
    config = services.config
    result = PageResult(
        index=page.index, width_pt=page.width_pt, height_pt=page.height_pt, plan=page.plan,
        blank=page.blank,
    )
    if page.error:
        result.reason = page.error
        return result
    route = route_page(page, config.route)
    result.route, result.route_reason = route.kind, route.reason
    if route.kind == "none":
        result.outcome, result.reason = PageOutcome.OK, "blank page"
        return result
    primary = "text-layer" if route.kind == "text-layer" else config.ocr.engine
    ladder: list[tuple[str, int, PageOutcome]] = [
        (primary, n, PageOutcome.OK if n == 0 else PageOutcome.RECOVERED)
        for n in range(config.ocr.max_attempts)
    ]
    ladder += [(name, 0, PageOutcome.FALLBACK) for name in config.ocr.fallback if name != primary]
    errors: list[str] = []
    last_transient = False
    for name, attempt, outcome in ladder:
        engine = services.engine(name)
        if attempt > 0 and getattr(engine, "deterministic", False) and not last_transient:
            continue  # the same input gives the same bad output: go to the fallbacks
        try:
            output = _recognize(engine, page, attempt)
            output.blocks = clip_blocks(output.blocks, page.width_pt, page.height_pt)
            problem = page_problem(output, page, config.validation.max_repeat_ratio,
                                   generative=name in GENERATIVE_ENGINES)
            if problem:
                output.attempt.error = problem
                result.attempts.append(output.attempt)
                raise BadOutputError(problem)
        except FolioError as err:
            attempt_record = getattr(err, "attempt", None)
            if isinstance(attempt_record, Attempt):
                result.attempts.append(attempt_record)
            elif not (result.attempts and result.attempts[-1].error == str(err)):
                result.attempts.append(Attempt(engine=name, error=err.reason))
            errors.append(err.reason)
            last_transient = isinstance(err, TransientError)
            continue
        result.attempts.append(output.attempt)
        result.engine, result.model = name, output.attempt.model
        result.prompt_format = output.prompt_format
        result.blocks, result.markdown = output.blocks, output.markdown
        result.outcome = outcome
        result.reason = "" if outcome is PageOutcome.OK else f"after: {errors[-1]}"
        return result
    result.outcome = PageOutcome.QUARANTINED
    result.reason = "; ".join(dict.fromkeys(errors)) or "no engine could read the page"
    return result


def _recognize(engine: OcrEngine, page: PagePrep, attempt: int) -> EngineOutput:
    try:
        return engine.recognize(page, attempt)
    except FolioError:
        raise
    except Exception as err:  # an engine bug reads as bad output for this page
        raise BadOutputError(f"{engine.name} failed: {type(err).__name__}: {err}") from err


def clip_blocks(blocks: list[Block], width: float, height: float) -> list[Block]:
    """Clip boxes that overshoot the page by a hair (rounding, glyph overhang); larger
    overshoots are left for validation to report."""
    tol_x, tol_y = width * BBOX_CLIP_TOLERANCE, height * BBOX_CLIP_TOLERANCE
    for block in blocks:
        b = block.bbox
        if b is None:
            continue
        if b.x0 >= -tol_x and b.y0 >= -tol_y and b.x1 <= width + tol_x and b.y1 <= height + tol_y:
            block.bbox = BBox(
                x0=max(0.0, b.x0), y0=max(0.0, b.y0), x1=min(width, b.x1), y1=min(height, b.y1)
            )
    return blocks


def page_problem(
    output: EngineOutput, page: PagePrep, max_repeat: float, *, generative: bool
) -> str | None:
    """The per-page checks the validation suite makes, applied while the page image still
    exists, so a failure can be retried or fall back instead of being quarantined."""
    text = output.markdown.strip()
    if not text and not page.blank:
        return "empty: no text on a non-blank page"
    ratio = repeat_ratio(text) if generative else 0.0
    if ratio > max_repeat:
        return f"repetition: {ratio:.0%} of the text is one repeated n-gram"
    return None


# --- stage 3: validation ---------------------------------------------------------------------


def validate_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Great Expectations over the document's pages; failing pages are quarantined."""
    if doc.cached or (doc.outcome is DocumentOutcome.QUARANTINED and doc.reason):
        return doc
    if services.config.validation.enabled and doc.pages:
        from folio.validation import validate_pages

        try:
            failures = validate_pages(doc.doc_id, doc.pages, services.config.validation)
        except Exception as err:
            return quarantine(doc, err)
        for page in doc.pages:
            names = failures.get(page.index)
            if names and page.outcome is not PageOutcome.QUARANTINED:
                page.outcome = PageOutcome.QUARANTINED
                page.reason = "validation: " + ", ".join(names)
    decide_outcome(doc)
    return doc


def decide_outcome(doc: DocumentResult) -> None:
    doc.check_accounting()
    readable = [p for p in doc.pages if p.outcome is not PageOutcome.QUARANTINED]
    if len(readable) == doc.page_count:
        doc.outcome = DocumentOutcome.OK
        doc.reason = ""
    elif not readable:
        doc.outcome = DocumentOutcome.QUARANTINED
        doc.reason = doc.reason or f"no page could be read: {doc.pages[0].reason}"
    else:
        doc.outcome = DocumentOutcome.PARTIAL
        doc.reason = f"{doc.pages_quarantined} of {doc.page_count} pages quarantined"
    doc.retryable = doc.retryable or any(
        p.reason.startswith(("transient", "timeout", "engine-unavailable", "worker-crashed"))
        for p in doc.pages if p.outcome is PageOutcome.QUARANTINED
    )


# --- stage 4: load ---------------------------------------------------------------------------


def load_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Write outputs, chunks and vectors; record the document as done last of all."""
    from folio import outputs

    if doc.cached:
        return doc
    try:
        if doc.outcome is DocumentOutcome.QUARANTINED:
            outputs.write_quarantine(services.sink, doc)
            return doc
        doc.outputs = outputs.write_document(services.sink, doc)
        if services.config.store.kind != "none":
            from folio.chunking import chunk_document, embedding_text

            chunks = chunk_document(doc, services.config.chunk)
            store = services.store()
            vectors = services.embedder().embed([embedding_text(c) for c in chunks])
            store.replace_document(doc.doc_id, chunks, vectors)
            doc.chunks, doc.vector_table = len(chunks), store.name
        if doc.retryable:
            outputs.write_quarantine(services.sink, doc)
        else:
            outputs.mark_done(services.sink, doc)
    except Exception as err:
        quarantine(doc, err)
    finally:
        progress.emit(progress.ProgressEvent(
            kind="document-done", source=doc.source, outcome=doc.outcome))
    return doc


def process_document(ref: SourceRef, services: Services) -> DocumentResult:
    """All stages for one document (the Prefect-free path; flows call the stages as tasks)."""
    prep = start_document(ref, services)
    doc = ocr_document(prep, services)
    doc = validate_document(doc, services)
    return load_document(doc, services)

