"""Stage 1: fetch, hash, skip what is done, probe; repair or compress with Ghostscript."""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from folio import progress
from folio.checks.validation import in_child as validation_in_child
from folio.checks.validation import preload as preload_validation
from folio.errors import (
    BadInputError,
    ConfigError,
    FolioError,
    MalformedPdfError,
    TransientError,
)
from folio.formats.detect import detect_file
from folio.formats.handling import skip_reason
from folio.io.source_index import known_sha256, record_sha256
from folio.io.sources import SourceRef, fetch
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline.deadline import CODE as DOCUMENT_TIMEOUT
from folio.pipeline.deadline import limit_raised
from folio.pipeline.limits import ghostscript_workers
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services
from folio.security import work_dirs
from folio.settings.config import PipelineConfig

if TYPE_CHECKING:
    from folio.formats.office_blocks import NativeRead
    from folio.io.sinks import Sink
    from folio.pdf.page_worker import PdfInfo

log = logging.getLogger(__name__)

#: bytes per page above which a PDF is image-heavy enough for Ghostscript to pay off
COMPRESS_MIN_BYTES_PER_PAGE = 64 * 1024
#: Ghostscript's output is used only when it saves at least this share of the bytes
COMPRESS_MIN_SAVING = 0.10


class PreparedDocument(BaseModel):
    """A document that passed the checks and is ready for its pages to be prepared."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    result: DocumentResult
    pdf: Path  # what the page worker renders: the original, a compressed or a repaired copy
    #: "image": ``pdf`` is the original image file, its frames the pages (folio.formats)
    kind: Literal["pdf", "image"] = "pdf"
    #: the original when ``pdf`` is Ghostscript's compressed copy: its text layer is the one
    #: judged and kept (pdfwrite's rewrite of fonts can spoil a good one)
    text_pdf: Path | None = None
    work_dir: Path
    started: float


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def start_document(ref: SourceRef, services: Services) -> PreparedDocument | DocumentResult:
    """Fetch, hash and probe a source; return a finished result when there is nothing to do
    (already done with this configuration, or not processable)."""
    config = services.config
    started = time.monotonic()
    doc = DocumentResult(source=ref.uri, config_hash=config.config_hash())
    progress.emit(progress.ProgressEvent(kind="document-start", source=ref.uri))
    if ref.skip:  # listed, but no file of the source to read (folio.io.sources)
        return skipped(doc, ref.skip, started)
    work_dir: Path | None = None
    try:
        if ref.size is not None and ref.size > config.limits.max_bytes:
            raise BadInputError(
                f"{ref.size} bytes is over the {config.limits.max_bytes}-byte limit",
                code="too-large",
            )
        # an S3 object whose listed version (ETag, size, time) an earlier run hashed: its
        # verdict without downloading it (a rerun over a prefix of finished documents)
        listed_sha = None if config.reprocess else known_sha256(services.sink, ref)
        if listed_sha is not None:
            doc.sha256, doc.doc_id = listed_sha, listed_sha[:32]
            doc.compression.original_bytes = ref.size
            answered = _answered_before(ref, doc, services, started)
            if answered is not None:
                return answered
        work_dir = work_dirs.make(Path(config.work_dir))  # private; swept if the run is killed
        with services.clock.span("fetch"):
            local = fetch(ref, work_dir, config.s3, config.limits.max_bytes)
            doc.sha256 = sha256_file(local)
        doc.doc_id = doc.sha256[:32]
        doc.compression.original_bytes = local.stat().st_size
        if ref.is_s3 and doc.sha256 != listed_sha:
            _record_version(ref, doc.sha256, services)
        if not config.reprocess:
            answered = _answered_before(ref, doc, services, started)
            if answered is not None:
                shutil.rmtree(work_dir, ignore_errors=True)
                return answered
        if config.validation.enabled:  # GX imports (seconds) while this document is
            # converted, probed and read; once per process, never for a document with
            # nothing to do (a rerun that finds everything done)
            preload_validation(validation_in_child(config), config.validation.child_processes)
        fmt = detect_file(local, ref.name)
        doc.format = fmt.name
        if fmt.kind in ("text", "unsupported"):
            shutil.rmtree(work_dir, ignore_errors=True)
            return skipped(doc, skip_reason(fmt), started)
        if fmt.kind == "image":
            _probe_image(local, doc, config)
            return PreparedDocument(result=doc, pdf=local, kind="image", work_dir=work_dir,
                                    started=started)
        if fmt.kind == "office":
            if not config.office.enabled:
                shutil.rmtree(work_dir, ignore_errors=True)
                return skipped(doc, f"Office document not read: office.enabled is off "
                                    f"({fmt.mime})", started)
            with services.clock.span("convert"):
                return _read_office(local, doc, work_dir, services, started)
        with services.clock.span("probe"):
            probed, info = _probe_or_repair(local, doc, work_dir, config)
            pdf = _maybe_compress(probed, info, doc, work_dir, config)
        return PreparedDocument(result=doc, pdf=pdf, work_dir=work_dir, started=started,
                                text_pdf=probed if pdf != probed else None)
    except Exception as err:  # every failure becomes an outcome
        doc.seconds = time.monotonic() - started
        if work_dir is not None:  # nothing of a quarantined document stays behind
            shutil.rmtree(work_dir, ignore_errors=True)
        result = quarantine(doc, err)
        if isinstance(err, ConfigError):  # a setting or a missing tool (LibreOffice), not
            result.retryable = True        # the document: never a verdict on its bytes
        return result


def _office_within(local: Path, work_dir: Path, config: PipelineConfig, started: float,
                   doc: DocumentResult) -> NativeRead:
    """The Office read (a LibreOffice conversion first for the formats that need one),
    within what is left of the document's time (``limits.document_timeout_s`` from its
    start): a conversion cut short by it ends the document ``document-timeout`` (not
    retried unless the limit is raised), as its pages would (folio.pipeline.deadline); one
    cut short by ``office.timeout_s`` stays transient."""
    from folio.formats.office_read import read_office

    limit = config.limits.document_timeout_s
    left = started + limit - time.monotonic()
    bounded = config
    if left < config.office.timeout_s:
        office = config.office.model_copy(update={"timeout_s": max(left, 0.1)})
        bounded = config.model_copy(update={"office": office})
    try:
        return read_office(local, work_dir, bounded)
    except TransientError as err:
        if bounded is config or time.monotonic() < started + limit:
            raise
        doc.time_limit_s = limit
        raise BadInputError(f"the document took over its {limit:g} s "
                            "(limits.document_timeout_s) in its Office conversion",
                            code=DOCUMENT_TIMEOUT) from err


def skipped(doc: DocumentResult, reason: str, started: float) -> DocumentResult:
    """The typed outcome of an entry folio does not read: not an error, not retried."""
    doc.outcome, doc.reason, doc.retryable = DocumentOutcome.SKIPPED, reason, False
    doc.seconds = time.monotonic() - started
    return doc


def _read_office(local: Path, doc: DocumentResult, work_dir: Path, services: Services,
                 started: float) -> DocumentResult:
    """An Office document read from its own structure (folio.formats.office_read): its
    pages are done here, with no render or OCR (native text is exact); the images it
    embeds are written beside its outputs as figures. The result goes on to validation and
    the load stage as any other document's."""
    from folio.figures.store import store_images
    from folio.formats.office_read import fill_document
    from folio.output.outputs import document_folder

    config = services.config
    try:
        read = _office_within(local, work_dir, config, started, doc)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    _count_pages(doc, len(read.pages), config)
    fill_document(doc, read, config)
    store_images(doc, read.images, services.sink, config, document_folder(doc))
    doc.seconds = time.monotonic() - started
    return doc


def _probe_image(local: Path, doc: DocumentResult, config: PipelineConfig) -> None:
    """An image's pages (TIFF frames), read by Pillow in a page worker child under its
    memory cap: a decompression bomb or a damaged file fails there, typed."""
    from folio.pdf.page_worker import probe

    limits = config.limits
    info = probe(local, None, limits.ghostscript_timeout_s, limits.worker_memory_mb,
                 nice=limits.worker_nice, kind="image",
                 max_image_pixels=limits.max_image_pixels)
    _count_pages(doc, info.page_count, config)


def _count_pages(doc: DocumentResult, pages: int, config: PipelineConfig) -> None:
    if pages > config.limits.max_pages:
        raise BadInputError(
            f"{pages} pages is over the {config.limits.max_pages}-page limit", code="too-many-pages"
        )
    doc.page_count = pages
    progress.emit(progress.ProgressEvent(kind="pages-known", source=doc.source, pages=pages))


def _answered_before(ref: SourceRef, doc: DocumentResult, services: Services,
                     started: float) -> DocumentResult | None:
    """What an earlier run decided for these bytes (``doc.sha256``) and settings: its
    stored result when it finished them, its verdict when it quarantined them for good;
    None when they are to be processed."""
    from folio.output.outputs import find_done

    done = find_done(services.sink, doc.sha256, doc.config_hash)
    limit = services.config.limits.document_timeout_s
    if done is not None and limit_raised(done.time_limit_s, limit):
        return None  # its time ran out before: a larger limit reads the rest
    if done is not None and _live_here(ref, doc, done, services.sink):
        done.source, done.cached, done.seconds = ref.uri, True, time.monotonic() - started
        return done
    known = known_bad(services.sink, doc, services.config)
    if known is not None:
        known.seconds = time.monotonic() - started
    return known


def _live_here(ref: SourceRef, doc: DocumentResult, done: DocumentResult, sink: Sink) -> bool:
    """Whether the source's live version is these bytes with these settings: only then
    is the done marker its own (docs/index-sync.md). The same bytes done under another
    source, or done with these settings before a settings change replaced the rows, are
    processed again. A source done before live records existed (its done document names
    it, and it has no record) is adopted: its record is written, nothing is redone."""
    from folio.index.live import LiveRecord, read_live, write_live
    from folio.output.outputs import document_folder

    live = read_live(sink, ref.uri)
    if live is not None:
        return (live.state == "live" and live.sha256 == doc.sha256
                and live.config_hash == doc.config_hash)
    if done.source != ref.uri:
        return False
    write_live(sink, LiveRecord(source=ref.uri, sha256=doc.sha256, config_hash=doc.config_hash,
                                doc_id=done.doc_id, folder=document_folder(done),
                                chunks=done.chunks, vector_table=done.vector_table))
    return True


def _record_version(ref: SourceRef, sha256: str, services: Services) -> None:
    """Remember what this S3 version hashes to, so a rerun need not download it. An
    optimisation only: a failure to record it is logged and the document goes on."""
    try:
        record_sha256(services.sink, ref, sha256, services.config.s3)
    except FolioError as err:
        log.warning("could not record the version of %s (%s): a rerun downloads it again",
                    ref.uri, err)


def known_bad(sink: Sink, doc: DocumentResult, config: PipelineConfig) -> DocumentResult | None:
    """The earlier run's verdict on these bytes when it quarantined them for good
    (``retryable: false``) with the same settings: trying again would fail the same way,
    every run, and keep its exit code at 3. None when there is no such record, or a
    password is given now (an encrypted PDF's verdict may change with it)."""
    from folio.output.outputs import read_quarantine

    if config.password is not None:
        return None
    record = read_quarantine(sink, doc)
    if (record is None or record.get("retryable") is not False
            or record.get("config_hash") != doc.config_hash
            or limit_raised(record.get("time_limit_s"), config.limits.document_timeout_s)):
        return None
    if record.get("outcome") == DocumentOutcome.SKIPPED.value:  # a format not read
        return doc.model_copy(update={
            "outcome": DocumentOutcome.SKIPPED, "cached": True, "retryable": False,
            "reason": str(record.get("reason", "")),
            "format": str(record.get("format", ""))})
    return doc.model_copy(update={
        "outcome": DocumentOutcome.QUARANTINED, "cached": True, "retryable": False,
        "reason": f"{record.get('reason', '')} (quarantined by an earlier run with these "
                  "settings; --reprocess tries it again)"})


def _probe_or_repair(
    local: Path, doc: DocumentResult, work_dir: Path, config: PipelineConfig
) -> tuple[Path, PdfInfo]:
    from folio.pdf import ghostscript
    from folio.pdf.page_worker import probe

    password = config.password
    limits = config.limits
    try:
        info = probe(local, password, limits.ghostscript_timeout_s, limits.worker_memory_mb,
                     nice=config.limits.worker_nice)
        pdf = local
    except MalformedPdfError as first:
        repaired = work_dir / "repaired.pdf"
        try:
            ghostscript.repair(
                local, repaired, timeout_s=limits.ghostscript_timeout_s,
                memory_mb=limits.ghostscript_memory_mb,
                password=password.get_secret_value() if password else None,
            )
            info = probe(repaired, None, limits.ghostscript_timeout_s, limits.worker_memory_mb,
                     nice=config.limits.worker_nice)
        except FolioError as second:
            raise MalformedPdfError(f"{first}; Ghostscript repair failed too: {second}") from second
        doc.repaired = True
        pdf = repaired
        password = None
    if info.page_count == 0:
        raise MalformedPdfError("the PDF has no pages")
    _count_pages(doc, info.page_count, config)
    doc.outline = info.outline  # heading levels follow it (folio.hierarchy)
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


_GS_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_GS_SLOTS_LOCK = threading.Lock()


def ghostscript_slots(workers: int) -> threading.BoundedSemaphore:
    """The process's bound of ``workers`` Ghostscript compressions at once (one per size,
    so runs of the same settings share it; the size is
    :func:`~folio.pipeline.limits.ghostscript_workers`). A document waiting for a slot
    holds back only its own pages: documents that need no compression (most born-digital
    ones) pass it by, so at a GPU run's start the engine gets their pages while a few
    Ghostscripts shrink the rest."""
    with _GS_SLOTS_LOCK:
        return _GS_SLOTS.setdefault(workers, threading.BoundedSemaphore(workers))


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
        with ghostscript_slots(ghostscript_workers(config)):
            comp = ghostscript.compress(
                pdf, out, image_dpi=compression_dpi(info.max_page_pt, config),
                timeout_s=limits.ghostscript_timeout_s, memory_mb=limits.ghostscript_memory_mb,
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
        check = probe(out, None, limits.ghostscript_timeout_s, limits.worker_memory_mb,
                     nice=config.limits.worker_nice)
    except FolioError as err:
        doc.compression.note = f"compressed copy unreadable, original used: {err.reason}"
        return pdf
    if check.page_count != doc.page_count:
        doc.compression.note = f"compressed copy has {check.page_count} pages: original used"
        return pdf
    doc.compression.used = True
    doc.compression.note = f"saved {saved:.0%}"
    return out
