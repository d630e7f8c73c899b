"""Sending a batch of claimed documents to the pipeline, and reading back what happened.

A batch goes out as one run of the document deployment (``run_deployment``), tagged with
its batch id, so that a sweep taking over the claims of a dead sweep can find the run and
wait for it instead of starting the documents again. A run whose process died (worker
killed) stays "Running" in Prefect forever; it is recognised by its missing heartbeats
(``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``), marked Crashed and its documents sent again.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
from prefect.client.schemas.objects import FlowRun
from prefect.states import Crashed

log = logging.getLogger(__name__)

SWEEP_TAG = "folio-sweep"
HEARTBEAT_EVENT = "prefect.flow-run.heartbeat"


def batch_tag(batch_id: str) -> str:
    return f"folio-batch:{batch_id}"


def submit_batch(
    deployment: str, batch_id: str, parameters: dict[str, Any]
) -> UUID:
    """Create the batch's run (idempotent per batch id) and return its id at once."""
    from prefect.deployments import run_deployment

    run: FlowRun = run_deployment(  # type: ignore[assignment]  # sync call, not a coroutine
        name=deployment, parameters=parameters, timeout=0,
        tags=[SWEEP_TAG, batch_tag(batch_id)], idempotency_key=f"folio-sweep-{batch_id}",
    )
    return run.id


def find_batch_run(batch_id: str) -> FlowRun | None:
    """The run a batch was sent as, if it was ever created."""
    tags = FlowRunFilterTags(all_=[batch_tag(batch_id)])
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=tags), limit=1)
    return runs[0] if runs else None


def read_run(run_id: UUID) -> FlowRun:
    with get_client(sync_client=True) as client:
        return client.read_flow_run(run_id)


def _seconds_since(when: datetime | None) -> float:
    if when is None:
        return float("inf")
    return (datetime.now(UTC) - when).total_seconds()


def _last_heartbeat(run: FlowRun) -> datetime | None:
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
        page = client.read_events(filter=flt, limit=50)
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
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run.id, Crashed(message=why), force=True)


def run_report(run: FlowRun) -> dict[str, Any] | None:
    """The ingest report a completed run returned (None: not completed, or its result
    was not persisted: the deployment needs ``PREFECT_RESULTS_PERSIST_BY_DEFAULT=true``
    and result storage the sweep can read)."""
    state = run.state
    if state is None or not state.is_completed():
        return None
    try:
        value = state.result(raise_on_failure=False)
    except Exception as exc:
        log.warning("run %s: its report cannot be read (%s)", run.name, type(exc).__name__)
        return None
    return value if isinstance(value, dict) else None


def slot(concurrency_limit: str | None) -> AbstractContextManager[Any]:
    """One slot of a Prefect global concurrency limit while a batch runs (if named)."""
    if not concurrency_limit:
        return nullcontext()
    from prefect.concurrency.sync import concurrency

    return concurrency(concurrency_limit, occupy=1, strict=True)


@task(name="sweep-batch", cache_policy=NO_CACHE, task_run_name="batch {batch_id}")
def send_batch(
    batch_id: str, *, deployment: str, parameters: dict[str, Any], inline: bool,
    concurrency_limit: str | None, poll_s: float, zombie_after_s: float,
) -> tuple[dict[str, Any] | None, FlowRun | None]:
    """Run one batch to the end: in this process (``inline``) or as a deployment run.

    Returns the run's report (None when it crashed or left none) and the run (None
    inline); documents without a line in the report are the caller's to resend.
    """
    with slot(concurrency_limit):
        if inline:
            from flows.ingest import ingest

            try:
                return ingest(**parameters), None
            except Exception:  # its documents are resent, then failed
                log.exception("batch %s failed in process", batch_id)
                return None, None
        run_id = submit_batch(deployment, batch_id, parameters)
        run = wait_for_run(run_id, poll_s=poll_s, zombie_after_s=zombie_after_s)
    return run_report(run), run


def wait_for_run(run_id: UUID, *, poll_s: float, zombie_after_s: float) -> FlowRun:
    """Poll until the run is final, or dead (then marked Crashed)."""
    import time

    while True:
        run = read_run(run_id)
        if run.state is not None and run.state.is_final():
            return run
        if is_zombie(run, zombie_after_s):
            crash_run(run, f"no heartbeat for {zombie_after_s:.0f} s: its process is gone")
            return read_run(run_id)
        time.sleep(poll_s)
