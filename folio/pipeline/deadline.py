"""One document's wall-time bound (``limits.document_timeout_s``), whatever its pages.

Why: the deadline was checked only when a page needed the engine, and each page batch's
worker had the whole limit of its own; a document of text-layer pages, or a 10,000-frame
TIFF, ran for many times the limit. Now the limit runs from the document's start: a
batch's worker gets what is left of it, a page that arrives after it (whatever its route)
ends ``document-timeout``, and batches not started by then are never started.

The verdict is not retried by every run (``retryable: false``): it would time out again
the same way. The document records the limit it ran into (``time_limit_s``); a run with a
larger limit tries it again (:func:`limit_raised`).
"""

from __future__ import annotations

import time

from folio.models import DocumentResult, PagePrep
from folio.pdf.worker_protocol import WorkerJob

__all__ = ["CODE", "limit_raised", "mark_timed_out", "timed_out", "within"]

#: the reason's code: not a transient one (folio.errors.is_transient_code), so not retried
CODE = "document-timeout"


def timed_out(index: int, limit_s: float) -> PagePrep:
    """The page a document's deadline ended before it was done."""
    return PagePrep(index=index, error=f"{CODE}: the document took over its {limit_s:g} s "
                                       "(limits.document_timeout_s)")


def within(job: WorkerJob, deadline: float) -> WorkerJob | None:
    """The batch with what is left of the document's time as its worker's bound; None when
    nothing is left (the batch is not started)."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    return job if job.timeout_s <= left else job.model_copy(update={"timeout_s": left})


def mark_timed_out(doc: DocumentResult, limit_s: float) -> None:
    """Record the limit on a document some of whose pages it ended."""
    if any(p.reason.startswith(CODE) for p in doc.pages):
        doc.time_limit_s = limit_s


def limit_raised(time_limit_s: object, limit_s: float) -> bool:
    """Whether an earlier verdict that ran into ``time_limit_s`` is to be tried again
    under the current ``limit_s``."""
    return isinstance(time_limit_s, int | float) and limit_s > time_limit_s
