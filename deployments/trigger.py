"""Ask a self-hosted Prefect server to (re)ingest a document, and wait until it is indexed:
the Prefect half of :mod:`folio.trigger`, which decides what a request, its key and its
events are.

1. :func:`trigger` starts the document deployment with the request's idempotency key
   (:func:`folio_prefect.deployments.runs.start_run`): a retried trigger returns the run
   the first call created; :func:`wait_for_result` waits for it and its documents' events.
2. :func:`request_ingest` POSTs a ``folio.ingest.requested`` event to ``/api/events``; a
   deployment trigger in ``prefect.yaml`` turns it into a run (templated parameters).
3. :func:`wait_for_indexed` polls ``/api/events/filter`` for the ``folio.document.indexed``
   (or ``.quarantined``) event the load stage emits per document, by source, document id
   or flow run, so a job can block until its document is searchable.

Prefect is imported inside the functions, after the caller (the ``folio`` command) has
set Prefect's environment.

Example::

    run = trigger(IngestRequest(source="s3://docs/in/report.pdf", out="s3://docs/out"))
    done = wait_for_indexed(source="s3://docs/in/report.pdf", since=run.requested_at)
    assert done.indexed, done.reason
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from folio.settings.run_config import IngestRequest
from folio.trigger import (
    DOCUMENT_DEPLOYMENT,
    DOCUMENT_EVENTS,
    EVENT_SETTLE_S,
    INDEXED,
    REQUESTED,
    DocumentEvent,
    RunResult,
    TriggeredRun,
    document_resource_id,
    parse_document_event,
    requested_event,
    source_resource_id,
)
from folio_prefect.deployments.runs import run_url, start_run, wait_for_run

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.events.schemas.events import ReceivedEvent


def parse_event(event: ReceivedEvent) -> DocumentEvent:
    """A received Prefect event as the :class:`DocumentEvent` a RAG job reads."""
    return parse_document_event(event.event, event.occurred, [r.id for r in event.related],
                                dict(event.payload))


# --- 1. run_deployment with an idempotency key ------------------------------------------


def trigger(request: IngestRequest, *, deployment: str = DOCUMENT_DEPLOYMENT) -> TriggeredRun:
    """Start ``deployment`` for one request (a file or a prefix); a repeat of the same
    request returns the existing run (``reused=True``) instead of starting another.

    Raises:
        prefect.exceptions.ObjectNotFound: no such deployment (run ``prefect deploy``).
    """
    requested_at = datetime.now(UTC)
    flow_run = start_run(deployment, parameters=request.parameters(),
                         idempotency_key=request.key, tags=["folio-trigger"], as_subflow=False)
    created = flow_run.created or requested_at
    return TriggeredRun(
        flow_run_id=flow_run.id, flow_run_name=flow_run.name, key=request.key,
        reused=created < requested_at - timedelta(seconds=1), requested_at=requested_at,
        url=run_url(flow_run.id))


def wait_for_result(flow_run_id: uuid.UUID, *, timeout: float = 3600.0,
                    poll_s: float = 2.0) -> RunResult:
    """Wait for the run to end (:func:`folio_prefect.deployments.runs.wait_for_run`), then
    collect its documents' events, which reach the events API a few seconds after the
    run's final state. State ``TIMEOUT``: still running after ``timeout`` seconds."""
    from prefect.client.orchestration import get_client

    flow_run = wait_for_run(flow_run_id, timeout=timeout, poll_s=poll_s)
    state = flow_run.state
    if state is None or not state.is_final():
        return RunResult(flow_run_id=flow_run_id, state="TIMEOUT")
    result = RunResult(flow_run_id=flow_run_id, state=state.type.value,
                       message=" ".join((state.message or "").split()))
    completed = result.state == "COMPLETED"
    since = (flow_run.created or state.timestamp) - timedelta(minutes=5)
    ended = state.timestamp
    settle = ended + timedelta(seconds=EVENT_SETTLE_S)
    grace = ended + timedelta(seconds=4 * EVENT_SETTLE_S)  # a run that wrote no event
    with get_client(sync_client=True) as client:
        while True:
            result.documents = _document_events(
                client, related=[f"prefect.flow-run.{flow_run_id}"], since=since)
            now = datetime.now(UTC)
            if now >= grace or (now >= settle and (result.documents or not completed)):
                return result
            time.sleep(poll_s)


# --- 2. an event bound to the deployment by a deployment trigger ------------------------


def request_ingest(request: IngestRequest) -> uuid.UUID:
    """POST a ``folio.ingest.requested`` event to the Prefect API; the deployment trigger
    in ``prefect.yaml`` starts the document deployment with its payload. Returns the event
    id (deterministic: a retried request within 30 minutes is dropped by the server)."""
    from prefect.client.orchestration import get_client
    from prefect.events import Event

    event_id, resource, payload = requested_event(request)
    event = Event(event=REQUESTED, id=event_id, resource=resource, payload=payload)
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
