"""Starting and following runs of deployments through the Prefect client: the one place
triggers (:mod:`folio_prefect.deployments.trigger`, ``folio trigger``) and the sweep
(:mod:`folio_prefect.tasks.sweep`, :mod:`folio_prefect.flows.sweep`) do it, so they agree
on idempotency, waiting and when a run is dead.

A run whose process died (worker killed) stays "Running" in Prefect forever; it is
recognised by its missing heartbeats (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` on the
workers), marked Crashed, and whoever waited for it decides what to send again.

A Prefect API that does not answer (its server restarting, say) is ridden out: each call
here is tried again with backoff for up to :data:`OUTAGE_S`, then fails with
:class:`folio.errors.OrchestratorUnavailableError`, never waits on without end.

Prefect is imported inside the functions, so a caller can set Prefect's environment
(log level, API URL) before the first call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from folio.errors import OrchestratorUnavailableError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

log = logging.getLogger(__name__)

T = TypeVar("T")

HEARTBEAT_EVENT = "prefect.flow-run.heartbeat"
#: how long a call here rides out a Prefect API that does not answer before it gives up;
#: Prefect's client retries each request for about a minute of its own first (once it
#: has reached the server), so this is several of those
OUTAGE_S = 300.0
#: the first wait between tries, and the longest (doubled from the one to the other): a
#: server back from a restart is seen within 10 s
BACKOFF_S = (1.0, 10.0)


def api_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the Prefect API was not there (refused, cut, timed out, or
    a 5xx from a server starting or stopping), as opposed to an answer (a 404, a 422)."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError

    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code >= 500


def riding_out(doing: str, call: Callable[[], T], *, outage_s: float | None = None) -> T:
    """``call()``, tried again with backoff while the Prefect API is unreachable, for at
    most ``outage_s`` seconds (:data:`OUTAGE_S` by default). Only for calls that are
    safe to repeat: reads, idempotent creates, forced state changes.

    Raises:
        OrchestratorUnavailableError: the API stayed unreachable that long; the message
            says what was being done and on which API.
    """
    limit = OUTAGE_S if outage_s is None else outage_s
    deadline = time.monotonic() + limit
    delay = BACKOFF_S[0]
    while True:
        try:
            return call()
        except Exception as exc:
            if not api_unreachable(exc):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise OrchestratorUnavailableError(
                    f"{doing}: the Prefect API at {_api_url()} did not answer for "
                    f"{limit:.0f} s ({type(exc).__name__}: {exc})") from exc
            log.warning("%s: the Prefect API did not answer (%s); trying again in %.0f s",
                        doing, type(exc).__name__, min(delay, left))
            time.sleep(min(delay, left))
            delay = min(delay * 2, BACKOFF_S[1])


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value() or "(the ephemeral API)")


def start_run(
    deployment: str,
    *,
    parameters: dict[str, Any],
    idempotency_key: str,
    tags: Sequence[str] = (),
    as_subflow: bool = True,
) -> FlowRun:
    """Create a run of ``deployment`` ("flow/deployment") and return it at once, without
    waiting for it. A repeated ``idempotency_key`` returns the run the first call created
    instead of starting another, so a retried call is safe. ``as_subflow``: called from a
    flow run, the new run shows as its subflow (Prefect's default); a trigger's run stands
    on its own.

    Raises:
        prefect.exceptions.ObjectNotFound: no such deployment (run ``prefect deploy``).
        OrchestratorUnavailableError: the API did not answer for :data:`OUTAGE_S`.
    """
    from prefect.deployments import run_deployment

    def start() -> FlowRun:
        run: FlowRun = run_deployment(  # type: ignore[assignment]  # sync call, not a coroutine
            name=deployment, parameters=parameters, timeout=0, tags=list(tags),
            idempotency_key=idempotency_key, as_subflow=as_subflow,
        )
        return run

    return riding_out(f"starting a run of {deployment}", start)  # idempotent: the key


def run_url(flow_run_id: UUID) -> str | None:
    """The run's page in the UI, when ``PREFECT_UI_URL`` is known."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    return f"{ui.rstrip('/')}/runs/flow-run/{flow_run_id}" if ui else None


def read_run(run_id: UUID) -> FlowRun:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return riding_out(f"reading run {run_id}", lambda: client.read_flow_run(run_id))


def find_run(tags: Sequence[str]) -> FlowRun | None:
    """A run carrying every one of ``tags``, if one was ever created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    flt = FlowRunFilter(tags=FlowRunFilterTags(all_=list(tags)))
    with get_client(sync_client=True) as client:
        runs = riding_out(f"looking for a run tagged {', '.join(tags)}",
                          lambda: client.read_flow_runs(flow_run_filter=flt, limit=1))
    return runs[0] if runs else None


def wait_for_run(
    run_id: UUID,
    *,
    timeout: float | None = None,
    poll_s: float = 2.0,
    zombie_after_s: float | None = None,
) -> FlowRun:
    """Poll the run every ``poll_s`` until its state is final, and return it.

    With ``zombie_after_s``, a run that can no longer finish (:func:`is_zombie`) is marked
    Crashed and returned then. With ``timeout`` (seconds), the run is returned as last
    read, not final, when the time is up: the caller tells the two apart by its state.

    Raises:
        OrchestratorUnavailableError: the API did not answer for :data:`OUTAGE_S` (or
            past ``timeout``): the run itself may well go on.
    """
    from prefect.client.orchestration import get_client

    deadline = None if timeout is None else time.monotonic() + timeout

    def read() -> FlowRun:
        outage = None if deadline is None else max(min(OUTAGE_S, deadline - time.monotonic()), 0)
        return riding_out(f"waiting for run {run_id}", lambda: client.read_flow_run(run_id),
                          outage_s=outage)

    with get_client(sync_client=True) as client:
        while True:
            run = read()
            if run.state is not None and run.state.is_final():
                return run
            if zombie_after_s is not None and is_zombie(run, zombie_after_s):
                crash_run(run, f"no heartbeat for {zombie_after_s:.0f} s: its process is gone")
                return read()
            if deadline is not None and time.monotonic() > deadline:
                return run
            time.sleep(poll_s)


def _seconds_since(when: datetime | None) -> float:
    if when is None:
        return float("inf")
    return (datetime.now(UTC) - when).total_seconds()


def _last_heartbeat(run: FlowRun) -> datetime | None:
    from prefect.client.orchestration import get_client
    from prefect.events.filters import (
        EventFilter,
        EventNameFilter,
        EventOccurredFilter,
        EventResourceFilter,
    )

    since = run.start_time or run.expected_start_time or datetime(1970, 1, 1, tzinfo=UTC)
    flt = EventFilter(
        occurred=EventOccurredFilter(since=since, until=datetime.now(UTC)),
        event=EventNameFilter(name=[HEARTBEAT_EVENT]),
        resource=EventResourceFilter(id=[f"prefect.flow-run.{run.id}"]),
    )
    with get_client(sync_client=True) as client:
        page = riding_out(f"reading the heartbeats of run {run.name}",
                          lambda: client.read_events(filter=flt, limit=50))
    return max((e.occurred for e in page.events), default=None)


def is_zombie(run: FlowRun, after_s: float) -> bool:
    """A run that can no longer finish: Running (or Cancelling) without a heartbeat, or
    Pending (handed to a worker that died before starting it), for ``after_s``.
    Scheduled and paused runs wait for a worker and are never zombies. ``after_s`` must
    be a few heartbeat intervals: a live run declared dead is sent again (twice done)."""
    state = run.state
    if state is None or state.is_final():
        return False
    age = _seconds_since(state.timestamp)
    if age < after_s:
        return False
    if state.is_running() or state.is_cancelling():
        last = _last_heartbeat(run)
        if last is None:  # heartbeats are off (a run sends one as it starts): cannot tell
            log.warning("run %s sends no heartbeats: set PREFECT_FLOWS_HEARTBEAT_FREQUENCY "
                        "on its workers, or a dead run is waited for forever", run.name)
            return False
        return _seconds_since(last) > after_s
    return bool(state.is_pending())


def crash_run(run: FlowRun, why: str) -> None:
    """Mark a dead run Crashed, so that the UI, automations and later sweeps agree."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        riding_out(f"marking run {run.name} Crashed",  # forced: the same state twice is fine
                   lambda: client.set_flow_run_state(run.id, Crashed(message=why), force=True))


def run_report(run: FlowRun) -> dict[str, Any] | None:
    """The ingest report a completed run returned, or the one a run failed for having
    quarantined every document carries (folio_prefect.flows.ingest.final_state). None:
    the run did not complete otherwise, or its result was not persisted: the deployment
    needs ``PREFECT_RESULTS_PERSIST_BY_DEFAULT=true`` and result storage the sweep can
    read."""
    # Prefect finds the S3 block's class by its slug
    import folio_prefect.deployments.result_storage  # noqa: F401
    from folio.errors import AllQuarantinedError
    from folio.output.report import ALL_QUARANTINED

    state = run.state
    quarantined = (state is not None and state.is_failed()
                   and (state.message or "").startswith(ALL_QUARANTINED))
    if state is None or not (state.is_completed() or quarantined):
        return None
    try:
        value = state.result(raise_on_failure=False)
    except Exception as exc:
        log.warning("run %s: its report cannot be read (%s)", run.name, type(exc).__name__)
        return None
    if isinstance(value, AllQuarantinedError):  # flows.ingest.final_state's Failed state
        return value.report
    return value if isinstance(value, dict) else None
