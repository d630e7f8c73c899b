"""What a RAG job's ingest request is, and the events that announce it and its documents:
the Prefect-free half of triggers.

Webhooks are Prefect Cloud only, so a RAG job on a self-hosted server has three ways in;
:mod:`folio_prefect.deployments.trigger` talks to the server for each of them, this
module decides what is said:

1. Starting the document deployment with an idempotency key derived from the request
   (:attr:`IngestRequest.key`: source, out, settings, revision, and the source's version
   as the trigger read it, :mod:`folio.io.source_version`): a retried trigger of the same
   bytes returns the run the first call created (unless that run failed) instead of
   starting a second one; a trigger after the bytes changed starts a new run.
2. A ``folio.ingest.requested`` event (:func:`requested_event`) whose id is derived from
   the same key: the server ignores an event id it saw in the last 30 minutes, so a
   retried POST does not start a second run either.
3. The ``folio.document.indexed`` (or ``.quarantined``) event the load stage emits per
   document (:func:`document_event`), found by source, document id or flow run, so a job
   can block until its document is searchable (:class:`DocumentEvent`).

Nothing here imports Prefect: the load stage, the CLI and a RAG job's own code name the
events and resources the same way with or without it.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

# the one request model (the flows', the CLI's, the triggers'), and how sources are named
from folio.output.report import ALL_QUARANTINED
from folio.settings.run_config import IngestRequest, normalize_source

if TYPE_CHECKING:
    from folio.models import DocumentResult

REQUESTED = "folio.ingest.requested"
INDEXED = "folio.document.indexed"
QUARANTINED = "folio.document.quarantined"
#: an entry not read by design (a format folio does not read: docs/inputs.md)
SKIPPED = "folio.document.skipped"
DOCUMENT_EVENTS = (INDEXED, QUARANTINED, SKIPPED)
DOCUMENT_DEPLOYMENT = "folio-ingest-document/document"
#: namespace of the deterministic request event ids (uuid5 of the idempotency key)
_EVENT_NAMESPACE = uuid.UUID("5b0f7c1e-3a52-4f4e-9a0e-6f6c696f0001")
#: events reach the events API after the server's persister flushes (every ~5 s): what a
#: wait that cannot use the server's event stream allows after a run's end
EVENT_SETTLE_S = 7.0


def source_resource_id(uri: str) -> str:
    """``folio.source.<sha256 of the normalized URI, 32 hex>``: a Prefect resource id."""
    return "folio.source." + hashlib.sha256(normalize_source(uri).encode()).hexdigest()[:32]


def document_resource_id(doc_id: str) -> str:
    return f"folio.document.{doc_id}"


class TriggeredRun(BaseModel):
    flow_run_id: uuid.UUID
    flow_run_name: str
    key: str
    reused: bool  # the key matched an earlier run: nothing new was started
    requested_at: datetime
    url: str | None = None


class DocumentEvent(BaseModel):
    """A ``folio.document.*`` event as a RAG job reads it."""

    event: str
    occurred: datetime
    source: str = ""
    doc_id: str = ""
    outcome: str = ""
    reason: str = ""
    chunks: int = 0
    cached: bool = False
    outputs: dict[str, str] = Field(default_factory=dict)
    vector_table: str = ""
    flow_run_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)

    @property
    def indexed(self) -> bool:
        return self.event == INDEXED


class RunResult(BaseModel):
    flow_run_id: uuid.UUID
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED, ... or TIMEOUT when still running
    #: the final state's message: why a run failed or crashed (``ConfigError: input not
    #: found: ...``), so a RAG job can log the cause without asking the Prefect API
    message: str = ""
    documents: list[DocumentEvent] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 all indexed and ok (or skipped: not read by design); 3 some partial/quarantined
        (or all quarantined: the run is Failed with :data:`folio.output.report.ALL_QUARANTINED`);
        1 the run failed otherwise; 4 still running at the timeout (the CLI contract)."""
        if self.state == "TIMEOUT":
            return 4
        if self.state == "FAILED" and self.message.startswith(ALL_QUARANTINED):
            return 3  # it ran, and quarantined every document (its events say why)
        if self.state != "COMPLETED":
            return 1
        return 0 if all(d.outcome in ("ok", "skipped") for d in self.documents) else 3


# --- the request event -------------------------------------------------------------------


def requested_event(request: IngestRequest) -> tuple[uuid.UUID, dict[str, str], dict[str, Any]]:
    """(id, resource, payload) of the ``folio.ingest.requested`` event for a request. The
    id is the request's key as a uuid5, so a retried request is the same event; the
    payload holds the flow's parameters that the deployment trigger templates."""
    source = request.source
    resource = {"prefect.resource.id": source_resource_id(source),
                "prefect.resource.name": source.rsplit("/", 1)[-1] or source}
    payload = {**request.parameters(), "revision": request.revision,
               "version": request.version, "key": request.key}
    return uuid.uuid5(_EVENT_NAMESPACE, request.key), resource, payload


# --- events the load stage emits ---------------------------------------------------------


def document_event(
    doc: DocumentResult, out: str
) -> tuple[str, dict[str, str], list[dict[str, str]], dict[str, Any]]:
    """(name, resource, related, payload) of the event for a finished document: indexed
    unless quarantined or skipped (a cached document is indexed already and says so)."""
    from folio.models import DocumentOutcome

    name = {DocumentOutcome.QUARANTINED: QUARANTINED,
            DocumentOutcome.SKIPPED: SKIPPED}.get(doc.outcome, INDEXED)
    resource = {"prefect.resource.id": source_resource_id(doc.source),
                "prefect.resource.name": doc.source.rsplit("/", 1)[-1] or doc.source}
    related = ([{"prefect.resource.id": document_resource_id(doc.doc_id),
                 "prefect.resource.role": "document"}] if doc.doc_id else [])
    payload = {
        "source": doc.source, "doc_id": doc.doc_id, "sha256": doc.sha256,
        "outcome": doc.outcome.value, "reason": doc.reason, "pages": doc.page_count,
        "pages_ok": doc.pages_ok, "pages_fallback": doc.pages_fallback,
        "pages_quarantined": doc.pages_quarantined, "chunks": doc.chunks,
        "outputs": doc.outputs, "vector_table": doc.vector_table, "cached": doc.cached,
        "retryable": doc.retryable, "config_hash": doc.config_hash, "out": out,
    }
    return name, resource, related, payload


def parse_document_event(event: str, occurred: datetime, related_ids: list[str],
                         payload: dict[str, Any]) -> DocumentEvent:
    """A received ``folio.document.*`` event (its name, time, related resource ids and
    payload) as a :class:`DocumentEvent`; the flow run is the related ``prefect.flow-run``."""
    flow_run = next((r.removeprefix("prefect.flow-run.") for r in related_ids
                     if r.startswith("prefect.flow-run.")), None)
    known = {k: payload[k] for k in DocumentEvent.model_fields if k in payload}
    return DocumentEvent(event=event, occurred=occurred, flow_run_id=flow_run,
                         payload=dict(payload), **known)
