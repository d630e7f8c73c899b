"""Stage 3: Great Expectations over a document's pages, then the document's outcome."""

from __future__ import annotations

from folio.formats.native import is_native_page
from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.page.running_heads import mark_running_heads
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services

#: checks of where blocks lie: reported on the page (``notes``), never a quarantine. The
#: page stage already clipped every box to the page (folio.pipeline.geometry), so these
#: fire only on results made elsewhere; the content checks (no text, repeated n-grams,
#: low confidence, words lost on the way to the markdown or the chunks, unknown labels)
#: still quarantine
GEOMETRY_CHECKS = frozenset({"bbox-left", "bbox-top", "bbox-right", "bbox-bottom",
                             "bbox-ordered"})


def validate_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Great Expectations over the document's pages; pages failing a content check are
    quarantined, geometry failures only noted on the page.

    Running heads are labelled first (kept in the JSON, out of the markdown and the
    chunks, as the early chunk streams judged them), so the suite checks the markdown and
    chunks the load stage writes: a page left without text by them fails here."""
    if doc.cached or doc.outcome is DocumentOutcome.SKIPPED or (
            doc.outcome is DocumentOutcome.QUARANTINED and doc.reason):
        return doc
    # a native Office page's heads are labelled by its reader (a sheet's row is no head)
    mark_running_heads([p for p in doc.pages if not is_native_page(p)],
                       keep_in_markdown=services.config.chunk.keep_headers_footers)
    if services.config.validation.enabled and doc.pages:
        try:  # in one GX run with the other documents waiting for validation
            with services.clock.span("validate"):
                failures = services.validator().submit((doc.doc_id, doc.pages))
        except Exception as err:
            return quarantine(doc, err)
        for page in doc.pages:
            names = failures.get(page.index) or []
            geometry = [n for n in names if n in GEOMETRY_CHECKS]
            content = [n for n in names if n not in GEOMETRY_CHECKS]
            if geometry:  # boxes are data: reported, the page's text kept
                page.notes.append("validation reported: " + ", ".join(geometry))
            if content and page.outcome is not PageOutcome.QUARANTINED:
                page.outcome = PageOutcome.QUARANTINED
                page.reason = "validation: " + ", ".join(content)
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
    # a page that fell back to its text layer after a transient failure (an engine down)
    # keeps its document from being recorded as done: a later run reads it properly
    doc.retryable = doc.retryable or any(
        p.retryable for p in doc.pages
        if p.outcome in (PageOutcome.QUARANTINED, PageOutcome.FALLBACK))
