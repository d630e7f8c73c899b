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


#: how long the flow waits for its events to be sent before it reports its end
FLUSH_TIMEOUT_S = 10.0


def flush_announcements(timeout_s: float = FLUSH_TIMEOUT_S) -> None:
    """Send every event emitted so far before the run reports its end: Prefect sends
    events from a background worker, drained only as the process exits, after the run's
    final state. Flushed here, a document's ``folio.document.*`` event reaches the server
    before the run's end, so a trigger that sees the end has the documents too
    (:func:`folio_prefect.deployments.trigger.wait_for_result`). The next event emitted
    starts a new sender. An events outage is logged, never fails the run."""
    from prefect.events.worker import EventsWorker

    try:
        EventsWorker.drain_all(timeout=timeout_s, at_exit=False)
    except Exception:
        log.warning("the documents' events were not flushed", exc_info=True)
