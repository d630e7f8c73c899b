"""The sweep's task: send a batch of claimed documents to the pipeline, and read back
what happened.

A batch goes out as one run of the document deployment, tagged with its batch id, so that
a sweep taking over the claims of a dead sweep can find the run and wait for it instead of
starting the documents again. Starting, finding and waiting for runs, and telling a dead
run from a live one, is :mod:`folio_prefect.deployments.runs`.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from uuid import UUID

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import FlowRun

from folio_prefect.deployments.runs import find_run, riding_out, run_report, start_run, wait_for_run
from folio.errors import OrchestratorUnavailableError

log = logging.getLogger(__name__)

SWEEP_TAG = "folio-sweep"


def batch_tag(batch_id: str) -> str:
    return f"folio-batch:{batch_id}"


def submit_batch(
    deployment: str, batch_id: str, parameters: dict[str, Any]
) -> UUID:
    """Create the batch's run (idempotent per batch id) and return its id at once."""
    run = start_run(deployment, parameters=parameters, idempotency_key=f"folio-sweep-{batch_id}",
                    tags=[SWEEP_TAG, batch_tag(batch_id)])
    return run.id


def find_batch_run(batch_id: str) -> FlowRun | None:
    """The run a batch was sent as, if it was ever created."""
    return find_run([batch_tag(batch_id)])


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

    Inline, a batch whose run cannot reach the Prefect API is run again once the API is
    back (ingest is idempotent: what it finished is found done). A subflow started while
    the server is down fails at once (Prefect retries a refused connection only on a
    client that has reached the server before, and the one that makes the subflow's run
    is new): without this, a server restarting for 12 s failed every document sent
    meanwhile, twice (resent once), and left them to the next sweep.

    Raises:
        OrchestratorUnavailableError: the API stayed away for ``OUTAGE_S``; the sweep
            ends with it (claims expire, a later sweep takes the documents over).
    """
    with slot(concurrency_limit):
        if inline:
            from folio_prefect.flows.ingest import ingest, run_report_of

            try:  # a batch whose documents were all quarantined fails, with its report
                return riding_out(f"running batch {batch_id} in process",
                                  lambda: run_report_of(ingest(**parameters,
                                                               return_state=True))), None
            except OrchestratorUnavailableError:
                raise
            except Exception:  # its documents are resent, then failed
                log.exception("batch %s failed in process", batch_id)
                return None, None
        run_id = submit_batch(deployment, batch_id, parameters)
        run = wait_for_run(run_id, poll_s=poll_s, zombie_after_s=zombie_after_s)
    return run_report(run), run
