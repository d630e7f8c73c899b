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
from folio_prefect.deployments.event_stream import EventStream, final_state_type
from folio_prefect.deployments.runs import read_run, run_url, start_run, wait_for_run

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun
    from prefect.events.schemas.events import Event, ReceivedEvent

#: how many runs in a row a trigger starts again after earlier runs of the same bytes
#: ended without completing, before it returns the last one (its state says why)
MAX_RESTARTS = 20
#: while the event stream is silent, the run is read this often all the same (a stream
#: that missed the run's end costs this long at most)
SAFETY_READ_S = 10.0
#: a completed run's document events reach the stream before its final state (the flow
#: flushes them first); where one was sent late, it is waited for this long
DOCUMENT_GRACE_S = 3.0


def parse_event(event: ReceivedEvent) -> DocumentEvent:
    """A received Prefect event as the :class:`DocumentEvent` a RAG job reads."""
    return parse_document_event(event.event, event.occurred, [r.id for r in event.related],
                                dict(event.payload))


# --- 1. run_deployment with an idempotency key ------------------------------------------


def trigger(request: IngestRequest, *, deployment: str = DOCUMENT_DEPLOYMENT) -> TriggeredRun:
    """Start ``deployment`` for one request (a file or a prefix). The request's key holds
    the source's version as read now (:func:`versioned`): a repeat while the bytes are
    the same returns the existing run (``reused=True``) if it is in flight or completed;
    one after they changed, or after that run failed, crashed or was cancelled, starts a
    new run.

    Raises:
        prefect.exceptions.ObjectNotFound: no such deployment (run ``prefect deploy``).
    """
    request = versioned(request)
    requested_at = datetime.now(UTC)
    key = request.key
    for _ in range(MAX_RESTARTS + 1):
        flow_run = start_run(deployment, parameters=request.parameters(), idempotency_key=key,
                             tags=["folio-trigger"], as_subflow=False)
        created = flow_run.created or requested_at
        reused = created < requested_at - timedelta(seconds=1)
        state = flow_run.state
        if not (reused and state is not None and state.is_final() and not state.is_completed()):
            break
        # the same bytes, but that run ended without indexing them: a run of its own, keyed
        # after the one it follows, so retries of this trigger still start only one
        key = f"{request.key}-after-{flow_run.id.hex[:12]}"
    return TriggeredRun(flow_run_id=flow_run.id, flow_run_name=flow_run.name, key=key,
                        reused=reused, requested_at=requested_at, url=run_url(flow_run.id))


def versioned(request: IngestRequest) -> IngestRequest:
    """The request with its source's version (:func:`folio.io.source_version.source_version`),
    unless the caller gave one."""
    if request.version is not None:
        return request
    from folio.io.source_version import source_version

    return request.model_copy(update={"version": source_version(request)})


def wait_for_result(flow_run_id: uuid.UUID, *, timeout: float = 3600.0,
                    poll_s: float = 2.0) -> RunResult:
    """Wait for the run to end, then collect its documents' events. Both come from the
    server's event stream (:mod:`folio_prefect.deployments.event_stream`) as they happen:
    the run's final state, and the ``folio.document.*`` events its load stage sent before
    the run ended (the flow flushes them first). Where the stream cannot be used, the run
    is polled every ``poll_s`` and its events read from the events API, which has them a
    few seconds after the run's final state. State ``TIMEOUT``: still running after
    ``timeout`` seconds."""
    from prefect.events.filters import EventAnyResourceFilter, EventFilter

    deadline = time.monotonic() + timeout
    flt = EventFilter(any_resource=EventAnyResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"]))
    with EventStream(flt) as stream:
        documents: dict[str, DocumentEvent] = {}
        flow_run = read_run(flow_run_id)  # a run that ended before the stream opened
        if _is_final(flow_run) and _ended_s(flow_run) > EVENT_SETTLE_S:
            stream.broken = True  # its events are stored: the events API has them all
        next_read = time.monotonic() + SAFETY_READ_S
        while not _is_final(flow_run) and not stream.broken:
            left = deadline - time.monotonic()
            if left <= 0:
                return RunResult(flow_run_id=flow_run_id, state="TIMEOUT")
            event = stream.next(min(left, max(0.0, next_read - time.monotonic())))
            if event is not None and event.event in DOCUMENT_EVENTS:
                documents[str(event.id)] = _parse_live(event)
            elif (event is not None and final_state_type(event)) or time.monotonic() >= next_read:
                flow_run = read_run(flow_run_id)  # the stream said so, or a safety read
                next_read = time.monotonic() + SAFETY_READ_S
        if _is_final(flow_run) and not documents and _completed(flow_run):
            grace = time.monotonic() + DOCUMENT_GRACE_S
            while not documents and not stream.broken and time.monotonic() < grace:
                event = stream.next(grace - time.monotonic())
                if event is not None and event.event in DOCUMENT_EVENTS:
                    documents[str(event.id)] = _parse_live(event)
        if not stream.broken and _is_final(flow_run) and (documents or not _completed(flow_run)):
            result = _result_of(flow_run)
            result.documents = sorted(documents.values(), key=lambda d: d.occurred)
            return result
    left = max(0.0, deadline - time.monotonic())
    return _polled_result(flow_run_id, timeout=left, poll_s=poll_s)


def _is_final(flow_run: FlowRun) -> bool:
    return flow_run.state is not None and flow_run.state.is_final()


def _ended_s(flow_run: FlowRun) -> float:
    """Seconds since the run's current state began."""
    state = flow_run.state
    return 0.0 if state is None else (datetime.now(UTC) - state.timestamp).total_seconds()


def _completed(flow_run: FlowRun) -> bool:
    return flow_run.state is not None and flow_run.state.is_completed()


def _result_of(flow_run: FlowRun) -> RunResult:
    state = flow_run.state
    assert state is not None
    return RunResult(flow_run_id=flow_run.id, state=state.type.value,
                     message=" ".join((state.message or "").split()))


def _parse_live(event: Event) -> DocumentEvent:
    return parse_document_event(event.event, event.occurred, [r.id for r in event.related],
                                dict(event.payload))


def _polled_result(flow_run_id: uuid.UUID, *, timeout: float, poll_s: float) -> RunResult:
    """Without the event stream: poll the run until it ends
    (:func:`folio_prefect.deployments.runs.wait_for_run`), then read its documents'
    events from the events API, which has them a few seconds after the run's final state
    (:data:`folio.trigger.EVENT_SETTLE_S`); a completed run that sent none is given
    longer."""
    from prefect.client.orchestration import get_client

    flow_run = wait_for_run(flow_run_id, timeout=timeout, poll_s=poll_s)
    state = flow_run.state
    if state is None or not state.is_final():
        return RunResult(flow_run_id=flow_run_id, state="TIMEOUT")
    result = _result_of(flow_run)
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
    id (deterministic: a retried request for the same bytes within 30 minutes is dropped
    by the server; one after they changed is a new event: :func:`versioned`)."""
    from prefect.client.orchestration import get_client
    from prefect.events import Event

    event_id, resource, payload = requested_event(versioned(request))
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
    from prefect.events.filters import (
        EventAnyResourceFilter,
        EventFilter,
        EventNameFilter,
        EventRelatedFilter,
    )

    ids = ([source_resource_id(source)] if source else []) + (
        [document_resource_id(doc_id)] if doc_id else [])
    related = [f"prefect.flow-run.{flow_run_id}"] if flow_run_id else []
    if not ids and not related:
        raise ValueError("wait_for_indexed needs a source, a doc_id or a flow_run_id")
    since = since or datetime.now(UTC) - timedelta(minutes=1)
    deadline = time.monotonic() + timeout
    flt = EventFilter(event=EventNameFilter(name=list(DOCUMENT_EVENTS)),
                      any_resource=EventAnyResourceFilter(id=ids) if ids else None,
                      related=EventRelatedFilter(id=related) if related else None)
    # the stream first, so that an event received while the API is read is not missed;
    # the API is still read every poll_s, as before the stream: it has what the stream
    # delivered before this call (an event another wait already returned)
    with EventStream(flt) as stream, get_client(sync_client=True) as client:
        while True:
            found = _document_events(client, any_resource=ids, related=related, since=since)
            if found:
                return found[0]
            if time.monotonic() > deadline:
                what = source or doc_id or flow_run_id
                raise TimeoutError(f"no {INDEXED} event for {what} within {timeout:.0f} s")
            next_read = time.monotonic() + poll_s
            while (left := next_read - time.monotonic()) > 0:
                event = stream.next(left)
                if (event is not None and event.event in DOCUMENT_EVENTS
                        and event.occurred >= since):
                    return _parse_live(event)


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
