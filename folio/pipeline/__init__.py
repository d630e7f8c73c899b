"""The document pipeline, stage by stage, without Prefect.

Stages, one module each: :mod:`.prepare` (fetch, hash, done-index, probe, Ghostscript),
:mod:`.scheduler` (pages of every admitted document through render and OCR),
:mod:`.pages` (one page's route and engine ladder), :mod:`.validate` (Great
Expectations, the document's outcome) and :mod:`.load` (outputs, batched vectors, the
done marker). Each stage takes and returns a :class:`DocumentResult` and never raises
for problems of the input: bad input becomes a quarantined outcome with a reason,
infrastructure trouble a quarantined outcome marked ``retryable`` (never recorded as
done), so every input ends in a typed outcome. ``flows/`` runs the same stages with
Prefect tasks at the edges.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from folio.io.sources import SourceRef
from folio.models import DocumentResult
from folio.pipeline.limits import SchedulerLimits, ocr_concurrency
from folio.pipeline.load import load_document
from folio.pipeline.outcome import page_failed, quarantine
from folio.pipeline.pages import page_problem, process_page
from folio.pipeline.prepare import (
    COMPRESS_MIN_BYTES_PER_PAGE,
    COMPRESS_MIN_SAVING,
    PreparedDocument,
    compression_dpi,
    sha256_file,
    start_document,
)
from folio.pipeline.scheduler import PageScheduler
from folio.pipeline.services import Services
from folio.pipeline.validate import decide_outcome, validate_document

__all__ = [
    "COMPRESS_MIN_BYTES_PER_PAGE", "COMPRESS_MIN_SAVING", "PageScheduler", "PreparedDocument",
    "SchedulerLimits", "Services", "compression_dpi", "decide_outcome",
    "load_document", "ocr_concurrency", "page_failed", "page_problem",
    "process_document", "process_documents", "process_page", "quarantine", "sha256_file",
    "start_document", "validate_document",
]


def process_documents(refs: Iterable[SourceRef], services: Services, *,
                      finish_workers: int = 4) -> list[DocumentResult]:
    """Every stage for many documents (the Prefect-free path; flows run the same
    scheduler with tasks around prepare and finish): pages scheduled across documents,
    each finished document validated and loaded in a thread beside the OCR of the rest,
    so vector writes can batch. Results in the order documents finished."""
    scheduler = PageScheduler(services, prepare=lambda ref: start_document(ref, services))

    def finish(doc: DocumentResult) -> DocumentResult:
        return load_document(validate_document(doc, services), services)

    with ThreadPoolExecutor(finish_workers, thread_name_prefix="folio-finish") as pool:
        futures = [pool.submit(finish, doc) for doc in scheduler.run(refs)]
        services.last_document_handed_over()  # as the flow does: batches stop waiting
        return [future.result() for future in futures]


def process_document(ref: SourceRef, services: Services) -> DocumentResult:
    """All stages for one document."""
    return process_documents([ref], services)[0]
