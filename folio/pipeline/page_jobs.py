"""What a prepared document's pages ask of the scheduler: which need the engine, and the
page-worker batches that render them.

Why: the scheduler (:mod:`folio.pipeline.scheduler`) decides when work runs; which work
a document makes follows from the configuration alone (the route of each page, the
worker batch size and settings), so it lives apart from the threads that run it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from folio.models import PagePrep
from folio.page.route import route_page
from folio.pipeline.prepare import PreparedDocument
from folio.settings.config import PipelineConfig
from folio.settings.vocabulary import CPU_OCR_ENGINES

if TYPE_CHECKING:
    from folio.pdf.page_worker import WorkerJob

__all__ = ["needs_engine", "worker_jobs"]


def needs_engine(page: PagePrep, config: PipelineConfig) -> bool:
    """Whether the page goes up the engine ladder (else its text layer, or its error,
    is its result, and it takes no engine slot)."""
    if page.error:
        return False
    return route_page(page, config.route).kind not in ("text-layer", "none")


def worker_jobs(prep: PreparedDocument, config: PipelineConfig) -> list[WorkerJob]:
    """The document's pages in batches, one page-worker child each."""
    from folio.pdf.page_worker import WorkerJob

    doc = prep.result
    size = config.limits.pages_per_worker
    return [
        WorkerJob(
            pdf=prep.pdf,
            text_pdf=prep.text_pdf,
            password=None if doc.repaired else config.password,
            pages=list(range(start, min(start + size, doc.page_count))),
            out_dir=Path(prep.work_dir) / "pages",
            render_settings=config.render,
            route_settings=config.route,
            render="untrusted" if config.route.mode == "auto" else "all",
            memory_mb=config.limits.worker_memory_mb,
            nice=config.limits.worker_nice,
            timeout_s=config.limits.document_timeout_s,
            layout=config.active_layout(),
            # a CPU OCR engine reads small text better from a finer render
            ocr_resolution=config.ocr.engine in CPU_OCR_ENGINES,
        )
        for start in range(0, doc.page_count, size)
    ]
