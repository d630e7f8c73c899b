"""Stage 4: outputs, chunks and vectors; the document is recorded as done last of all."""

from __future__ import annotations

from folio import progress
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services
from folio.stores.base import DocumentVectors


def load_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Write outputs, chunks and vectors; record the document as done last of all."""
    from folio.output import outputs

    if doc.cached:
        return doc
    try:
        if doc.outcome is DocumentOutcome.QUARANTINED:
            outputs.write_quarantine(services.sink, doc)
            return doc
        # running heads were labelled before validation (folio.pipeline.validate)
        clock = services.clock
        if services.config.store.kind == "none":
            with clock.span("outputs"):
                doc.outputs = outputs.write_document(services.sink, doc)
        else:
            from folio.output.chunking import chunk_document, embedding_text

            with clock.span("chunk"):
                chunks = chunk_document(doc, services.config.chunk)
                texts = [embedding_text(c) for c in chunks]
            early = services.early_embeddings()  # most were embedded beside the OCR
            with clock.span("embed"):
                vectors = (early.vectors(doc.doc_id, texts) if early
                           else services.embedder().embed(texts))
            # known before the outputs are written, so document.json tells the same
            # chunk count and table as the report, the index and the store
            doc.chunks, doc.vector_table = len(chunks), services.store().name
            with clock.span("outputs"):
                doc.outputs = outputs.write_document(services.sink, doc)
            # batched with other documents; returns once this one's vectors are stored
            with clock.span("vectors"):
                services.vectors().submit(DocumentVectors(doc_id=doc.doc_id, chunks=chunks,
                                                          vectors=vectors))
        with clock.span("done-marker"):
            if doc.retryable:
                outputs.write_quarantine(services.sink, doc)
            else:
                outputs.mark_done(services.sink, doc)
    except Exception as err:
        quarantine(doc, err)
    finally:
        early = services.early_embeddings()
        if early is not None:
            early.discard(doc.doc_id)
        progress.emit(progress.ProgressEvent(
            kind="document-done", source=doc.source, outcome=doc.outcome,
            pages=doc.page_count, seconds=doc.seconds))
    return doc
