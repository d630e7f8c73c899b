"""Ask a self-hosted Prefect server to (re)ingest a document, and wait until it is indexed.

Webhooks are Prefect Cloud only, so a RAG job on a self-hosted server has three ways in:

1. :func:`trigger` starts the document deployment with ``run_deployment`` and an
   idempotency key derived from the request (source, out, settings, revision): a retried
   trigger returns the run the first call created instead of starting a second one.
2. :func:`request_ingest` POSTs a ``folio.ingest.requested`` event to ``/api/events``; a
   deployment trigger in ``prefect.yaml`` turns it into a run (templated parameters). The
   event id is derived from the same key, and the server ignores an event id it saw in the
   last 30 minutes, so a retried POST does not start a second run either.
3. :func:`wait_for_indexed` polls ``/api/events/filter`` for the ``folio.document.indexed``
   (or ``.quarantined``) event the load stage emits per document, by source, document id
   or flow run, so a job can block until its document is searchable.

Prefect is imported inside the functions: the helpers that name events and resources
(:func:`document_event`, :func:`source_resource_id`) stay usable without it.

Example::

    run = trigger("s3://docs/in/report.pdf", out="s3://docs/out")
    done = wait_for_indexed(source="s3://docs/in/report.pdf", since=run.requested_at)
    assert done.indexed, done.reason
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun
    from prefect.events.schemas.events import ReceivedEvent

    from folio.models import DocumentResult

REQUESTED = "folio.ingest.requested"
INDEXED = "folio.document.indexed"
QUARANTINED = "folio.document.quarantined"
DOCUMENT_EVENTS = (INDEXED, QUARANTINED)
DOCUMENT_DEPLOYMENT = "folio-ingest-document/document"
#: namespace of the deterministic request event ids (uuid5 of the idempotency key)
_EVENT_NAMESPACE = uuid.UUID("5b0f7c1e-3a52-4f4e-9a0e-6f6c696f0001")
#: events reach the events API after the server's persister flushes (every ~5 s)
EVENT_SETTLE_S = 7.0


def normalize_source(uri: str) -> str:
    """The URI as the pipeline reports it: s3 URIs as given, local paths absolute (the
    form ``folio.io.sources`` gives documents, so resource ids match on both sides)."""
    if uri.startswith("s3://"):
        return uri
    return str(Path(uri.removeprefix("file://")).expanduser().absolute())


def source_resource_id(uri: str) -> str:
    """``folio.source.<sha256 of the normalized URI, 32 hex>``: a Prefect resource id."""
    return "folio.source." + hashlib.sha256(normalize_source(uri).encode()).hexdigest()[:32]


def document_resource_id(doc_id: str) -> str:
    return f"folio.document.{doc_id}"


class IngestRequest(BaseModel):
    """What a RAG job asks for; the document deployment's parameters plus a revision."""

    source: str
    out: str = "folio-out"
    engine: str = "tesseract"
    route: str = "auto"
    reprocess: bool = False
    settings: dict[str, Any] = Field(default_factory=dict)
    revision: str | None = Field(
        None, description="the caller's version of the source (ETag, object version, job "
        "id): a new revision is a new request; the same one is a retry")

    def normalized(self) -> IngestRequest:
        return self.model_copy(update={"source": normalize_source(self.source)})

    @property
    def key(self) -> str:
        """Idempotency key: equal requests (after normalizing the source) share it."""
        blob = json.dumps(self.normalized().model_dump(), sort_keys=True, default=str)
        return "folio-" + hashlib.sha256(blob.encode()).hexdigest()[:40]

    def parameters(self) -> dict[str, Any]:
        """Flow parameters of ``folio-ingest-document`` (the revision is not one)."""
        params = self.normalized().model_dump(exclude={"revision"})
        if not params["settings"]:
            params["settings"] = None
        return params


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
    documents: list[DocumentEvent] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 all indexed and ok; 3 some partial/quarantined; 1 the run did not complete;
        4 still running at the timeout (the CLI's contract)."""
        if self.state == "TIMEOUT":
            return 4
        if self.state != "COMPLETED":
            return 1
        return 0 if all(d.outcome == "ok" for d in self.documents) else 3


# --- events the load stage emits ---------------------------------------------------------


def document_event(
    doc: DocumentResult, out: str
) -> tuple[str, dict[str, str], list[dict[str, str]], dict[str, Any]]:
    """(name, resource, related, payload) of the event for a finished document: indexed
    unless quarantined (a cached document is indexed already and says so)."""
    from folio.models import DocumentOutcome

    name = QUARANTINED if doc.outcome is DocumentOutcome.QUARANTINED else INDEXED
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


def parse_event(event: ReceivedEvent) -> DocumentEvent:
    payload = dict(event.payload)
    flow_run = next((r.id.removeprefix("prefect.flow-run.") for r in event.related
                     if r.id.startswith("prefect.flow-run.")), None)
    known = {k: payload[k] for k in DocumentEvent.model_fields if k in payload}
    return DocumentEvent(event=event.event, occurred=event.occurred, flow_run_id=flow_run,
                         payload=payload, **known)


# --- 1. run_deployment with an idempotency key ------------------------------------------


def trigger(
    source: str,
    *,
    out: str = "folio-out",
    engine: str = "tesseract",
    route: str = "auto",
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
    revision: str | None = None,
    deployment: str = DOCUMENT_DEPLOYMENT,
) -> TriggeredRun:
    """Start ``deployment`` for one source (a file or a prefix); a repeat of the same
    request returns the existing run (``reused=True``) instead of starting another.

    Raises:
        prefect.exceptions.ObjectNotFound: no such deployment (run ``prefect deploy``).
    """
    from prefect.deployments import run_deployment

    request = IngestRequest(source=source, out=out, engine=engine, route=route,
                            reprocess=reprocess, settings=settings or {}, revision=revision)
    requested_at = datetime.now(UTC)
    flow_run: FlowRun = run_deployment(  # type: ignore[assignment]  # sync call
        deployment, parameters=request.parameters(), timeout=0, idempotency_key=request.key,
        as_subflow=False, tags=["folio-trigger"])
    created = flow_run.created or requested_at
    return TriggeredRun(
        flow_run_id=flow_run.id, flow_run_name=flow_run.name, key=request.key,
        reused=created < requested_at - timedelta(seconds=1), requested_at=requested_at,
        url=flow_run_url(flow_run.id))


def flow_run_url(flow_run_id: uuid.UUID) -> str | None:
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    return f"{ui.rstrip('/')}/runs/flow-run/{flow_run_id}" if ui else None


def wait_for_run(flow_run_id: uuid.UUID, *, timeout: float = 3600.0,
                 poll_s: float = 2.0) -> RunResult:
    """Wait for the run to end, then collect its documents' events (which reach the
    events API a few seconds after the run's final state)."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            flow_run = client.read_flow_run(flow_run_id)
            state = flow_run.state
            if state is not None and state.is_final():
                break
            if time.monotonic() > deadline:
                return RunResult(flow_run_id=flow_run_id, state="TIMEOUT")
            time.sleep(poll_s)
        result = RunResult(flow_run_id=flow_run_id, state=state.type.value)
        completed = result.state == "COMPLETED"
        since = (flow_run.created or state.timestamp) - timedelta(minutes=5)
        ended = state.timestamp
        settle = ended + timedelta(seconds=EVENT_SETTLE_S)
        grace = ended + timedelta(seconds=4 * EVENT_SETTLE_S)  # a run that wrote no event
        while True:
            result.documents = _document_events(
                client, related=[f"prefect.flow-run.{flow_run_id}"], since=since)
            now = datetime.now(UTC)
            if now >= grace or (now >= settle and (result.documents or not completed)):
                return result
            time.sleep(poll_s)


# --- 2. an event bound to the deployment by a deployment trigger ------------------------


def request_ingest(
    source: str,
    *,
    out: str = "folio-out",
    engine: str = "tesseract",
    route: str = "auto",
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
    revision: str | None = None,
) -> uuid.UUID:
    """POST a ``folio.ingest.requested`` event to the Prefect API; the deployment trigger
    in ``prefect.yaml`` starts the document deployment with its payload. Returns the event
    id (deterministic: a retried request within 30 minutes is dropped by the server)."""
    from prefect.client.orchestration import get_client
    from prefect.events import Event

    request = IngestRequest(source=source, out=out, engine=engine, route=route,
                            reprocess=reprocess, settings=settings or {}, revision=revision)
    event = Event(
        event=REQUESTED, id=uuid.uuid5(_EVENT_NAMESPACE, request.key),
        resource={"prefect.resource.id": source_resource_id(source),
                  "prefect.resource.name": source.rsplit("/", 1)[-1] or source},
        payload={**request.parameters(), "revision": revision, "key": request.key},
    )
    with get_client(sync_client=True) as client:
        client.request("POST", "/events", json=[event.model_dump(mode="json")])
    return event.id


# --- 3. wait for the completion event ---------------------------------------------------


def wait_for_indexed(
    source: str | None = None,
    *,
    doc_id: str | None = None,
    flow_run_id: uuid.UUID | str | None = None,
    timeout: float = 3600.0,
    since: datetime | None = None,
    poll_s: float = 2.0,
) -> DocumentEvent:
    """The first ``folio.document.indexed`` or ``.quarantined`` event for a source, a
    document id or a flow run that occurred after ``since`` (default: a minute before
    the call, for clock skew; pass the trigger's ``requested_at``).

    Quarantined documents end the wait too (check ``.indexed``): a job must not wait an
    hour for a document that will never be searchable.

    Raises:
        ValueError: none of source, doc_id, flow_run_id given.
        TimeoutError: no such event before ``timeout`` seconds.
    """
    from prefect.client.orchestration import get_client

    ids = ([source_resource_id(source)] if source else []) + (
        [document_resource_id(doc_id)] if doc_id else [])
    related = [f"prefect.flow-run.{flow_run_id}"] if flow_run_id else []
    if not ids and not related:
        raise ValueError("wait_for_indexed needs a source, a doc_id or a flow_run_id")
    since = since or datetime.now(UTC) - timedelta(minutes=1)
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            found = _document_events(client, any_resource=ids, related=related, since=since)
            if found:
                return found[0]
            if time.monotonic() > deadline:
                what = source or doc_id or flow_run_id
                raise TimeoutError(f"no {INDEXED} event for {what} within {timeout:.0f} s")
            time.sleep(poll_s)


def _document_events(
    client: SyncPrefectClient,
    *,
    since: datetime,
    any_resource: list[str] | None = None,
    related: list[str] | None = None,
) -> list[DocumentEvent]:
    """``folio.document.*`` events after ``since``, oldest first."""
    from prefect.events.filters import (
        EventAnyResourceFilter,
        EventFilter,
        EventNameFilter,
        EventOccurredFilter,
        EventOrder,
        EventRelatedFilter,
    )

    flt = EventFilter(
        occurred=EventOccurredFilter(since=since, until=datetime.now(UTC) + timedelta(days=1)),
        event=EventNameFilter(name=list(DOCUMENT_EVENTS)),
        any_resource=EventAnyResourceFilter(id=any_resource) if any_resource else None,
        related=EventRelatedFilter(id=related) if related else None,
        order=EventOrder.ASC,
    )
    page = client.read_events(filter=flt, limit=50)  # the API's maximum page
    events = list(page.events)
    while page.next_page is not None:
        page = client.read_events_page(str(page.next_page))
        events.extend(page.events)
    return [parse_event(e) for e in events]
