"""Stage 1: fetch, hash, skip what is done, probe; repair or compress with Ghostscript."""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from folio import progress
from folio.errors import BadInputError, FolioError, MalformedPdfError
from folio.io.source_index import known_sha256, record_sha256
from folio.io.sources import SourceRef, fetch
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline.limits import ghostscript_workers
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services
from folio.settings.config import PipelineConfig

if TYPE_CHECKING:
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
        work_dir = Path(config.work_dir) / f"{time.time_ns()}-{threading.get_ident()}"
        work_dir.mkdir(parents=True, exist_ok=True)
        local = fetch(ref, work_dir, config.s3)
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
        probed, info = _probe_or_repair(local, doc, work_dir, config)
        pdf = _maybe_compress(probed, info, doc, work_dir, config)
        return PreparedDocument(result=doc, pdf=pdf, work_dir=work_dir, started=started,
                                text_pdf=probed if pdf != probed else None)
    except Exception as err:  # every failure becomes an outcome
        doc.seconds = time.monotonic() - started
        if work_dir is not None:  # nothing of a quarantined document stays behind
            shutil.rmtree(work_dir, ignore_errors=True)
        return quarantine(doc, err)


def _answered_before(ref: SourceRef, doc: DocumentResult, services: Services,
                     started: float) -> DocumentResult | None:
    """What an earlier run decided for these bytes (``doc.sha256``) and settings: its
    stored result when it finished them, its verdict when it quarantined them for good;
    None when they are to be processed."""
    from folio.output.outputs import find_done

    done = find_done(services.sink, doc.sha256, doc.config_hash)
    if done is not None:
        done.source, done.cached, done.seconds = ref.uri, True, time.monotonic() - started
        return done
    known = known_bad(services.sink, doc, services.config)
    if known is not None:
        known.seconds = time.monotonic() - started
    return known


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
            or record.get("config_hash") != doc.config_hash):
        return None
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
