"""Stage 4: outputs, chunks and vectors; the document is recorded as done last of all.

The source's new version replaces its old one here (docs/index-sync.md): the vector
write replaces every row of the source, document.json is written only after the vectors
and the done marker, and the live record and the old folder change last
(:mod:`folio.index.publish`)."""

from __future__ import annotations

import logging

from folio import progress
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline.outcome import quarantine
from folio.pipeline.services import Services
from folio.stores.base import DocumentVectors

log = logging.getLogger(__name__)


def load_document(doc: DocumentResult, services: Services) -> DocumentResult:
    """Write outputs, chunks and vectors; record the document as done last of all."""
    from folio.index import publish
    from folio.output import outputs

    if doc.cached:
        if doc.outcome is DocumentOutcome.QUARANTINED and not doc.retryable:
            # bytes quarantined for good before (under this or another source): an older
            # good version of this source must not stay searchable
            try:
                publish.drop_version(services.sink, services.store(), doc)
            except Exception as err:  # the verdict stands; the next run tries again
                log.warning("could not drop the old version of %s: %s", doc.source, err)
        services.loaded.append(doc)
        return doc
    try:
        if doc.outcome is DocumentOutcome.QUARANTINED:
            outputs.write_quarantine(services.sink, doc)
            if not doc.retryable:
                publish.drop_version(services.sink, services.store(), doc)
            return doc
        if doc.outcome is DocumentOutcome.SKIPPED:
            # the verdict on these bytes, so a rerun need not read them again (an S3
            # rerun goes from the listing to it: folio.pipeline.prepare.known_bad); an
            # entry skipped before it was read (a symlink out of the source) has no hash
            if doc.sha256:
                outputs.write_quarantine(services.sink, doc)
            return doc
        # running heads were labelled before validation (folio.pipeline.validate)
        clock = services.clock
        from folio.hierarchy.levels import level_document

        level_document(doc)  # heading levels into the blocks and the markdown's '#' marks
        previous = publish.begin(services.sink, doc)
        if services.config.store.kind == "none":
            with clock.span("outputs"):
                doc.outputs = outputs.write_document(services.sink, doc, with_json=False)
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
                doc.outputs = outputs.write_document(services.sink, doc, with_json=False)
            # batched with other documents; returns once this one's vectors are stored
            # (every row of the source replaced: its old version's leave in this write)
            with clock.span("vectors"):
                services.vectors().submit(DocumentVectors(doc_id=doc.doc_id, chunks=chunks,
                                                          vectors=vectors, source=doc.source))
        with clock.span("done-marker"):
            if doc.retryable:
                outputs.write_quarantine(services.sink, doc)
            else:
                outputs.mark_done(services.sink, doc)
            outputs.write_document_json(services.sink, doc, doc.outputs)
            publish.publish(services.sink, doc, previous)
    except Exception as err:
        quarantine(doc, err)
    finally:
        early = services.early_embeddings()
        if early is not None:
            early.discard(doc.doc_id)
        services.loaded.append(doc)
        progress.emit(progress.ProgressEvent(
            kind="document-done", source=doc.source, outcome=doc.outcome,
            pages=doc.page_count, seconds=doc.seconds))
    return doc
