from __future__ import annotations

import logging

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.models import DocumentResult
from folio.pipeline import Services, load_document
from folio.trigger import document_event

log = logging.getLogger(__name__)


@task(name="load-document", cache_policy=NO_CACHE)
def load(doc: DocumentResult, services: Services) -> DocumentResult:
    """Outputs to the sink, chunks + embeddings to the vector store, then the done marker;
    then ``folio.document.indexed`` (or ``.quarantined``), which RAG jobs wait on."""
    doc = load_document(doc, services)
    announce(doc, services.out)
    return doc


def announce(doc: DocumentResult, out: str) -> None:
    """Emit the document's completion event (the flow run is attached as a related
    resource by Prefect); an events outage is logged, never fails the document."""
    from prefect.events import emit_event

    name, resource, related, payload = document_event(doc, out)
    try:
        emit_event(name, resource=resource, related=related, payload=payload)
    except Exception:
        log.warning("%s not emitted for %s", name, doc.source, exc_info=True)
