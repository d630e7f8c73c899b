"""Stage 3: Great Expectations over a document's pages, then the document's outcome."""

from __future__ import annotations

from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.page.running_heads import mark_running_heads
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services


def validate_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Great Expectations over the document's pages; failing pages are quarantined.

    Running heads are labelled first (kept in the JSON, out of the markdown and the
    chunks, as the early chunk streams judged them), so the suite checks the markdown and
    chunks the load stage writes: a page left without text by them fails here."""
    if doc.cached or (doc.outcome is DocumentOutcome.QUARANTINED and doc.reason):
        return doc
    mark_running_heads(doc.pages, keep_in_markdown=services.config.chunk.keep_headers_footers)
    if services.config.validation.enabled and doc.pages:
        try:  # in one GX run with the other documents waiting for validation
            with services.clock.span("validate"):
                failures = services.validator().submit((doc.doc_id, doc.pages))
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
        p.retryable for p in doc.pages if p.outcome is PageOutcome.QUARANTINED)
