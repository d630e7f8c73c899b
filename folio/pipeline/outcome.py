"""Turning failures into typed outcomes: nothing raised for bad input, nothing dropped."""

from __future__ import annotations

import logging

from folio.errors import FolioError, TransientError
from folio.models import DocumentOutcome, DocumentResult, PageOutcome, PagePrep, PageResult
from folio.security.redaction import redact_uri

log = logging.getLogger(__name__)


def quarantine(doc: DocumentResult, err: BaseException) -> DocumentResult:
    """Turn an exception into the document's typed outcome."""
    if isinstance(err, FolioError):
        doc.reason = err.reason
        doc.retryable = isinstance(err, TransientError)
    else:  # a bug in folio or a library: keep the document, say what happened, retry later
        log.exception("internal error on %s", doc.source)
        doc.reason = f"internal: {type(err).__name__}: {err}"
        doc.retryable = True
    # the reason goes to document.json, the report and the UI: a DSN or endpoint an
    # error message quotes keeps its user, not its password
    doc.reason = redact_uri(doc.reason)
    doc.outcome = DocumentOutcome.QUARANTINED
    for page in doc.pages:  # pages already known keep their index; none is dropped
        if page.outcome is PageOutcome.QUARANTINED and not page.reason:
            page.reason, page.retryable = doc.reason, doc.retryable
    if doc.page_count and not doc.pages:
        doc.pages = [
            PageResult(index=i, width_pt=0, height_pt=0, reason=doc.reason,
                       retryable=doc.retryable)
            for i in range(doc.page_count)
        ]
    return doc


def page_failed(page: PagePrep, reason: str, *, retryable: bool) -> PageResult:
    """A page that never reached an engine (worker error, document timeout)."""
    return PageResult(
        index=page.index, width_pt=page.width_pt, height_pt=page.height_pt, plan=page.plan,
        outcome=PageOutcome.QUARANTINED, reason=reason, retryable=retryable,
    )
