"""``folio_prefect.deployments.runs.wait_for_run``, the one wait for a run, as its two users need it, on
a real Prefect API: the trigger gives up at a timeout and leaves the run alone; the sweep
marks a run that can no longer finish Crashed instead of waiting for it forever."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

import pytest

from folio_prefect.deployments.runs import find_run, wait_for_run

pytestmark = pytest.mark.usefixtures("prefect_api")


def _flow_run(state: Any, tags: list[str] | None = None) -> UUID:
    """A run of a flow no worker will ever pick up, in ``state``."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    @flow(name="folio-runs-test")
    def nothing() -> None:
        pass

    with get_client(sync_client=True) as client:
        return client.create_flow_run(nothing, state=state, tags=tags).id


def test_wait_gives_up_at_the_timeout_then_returns_the_final_run() -> None:
    from prefect.client.orchestration import get_client
    from prefect.states import Completed, Scheduled

    run_id = _flow_run(Scheduled())
    started = time.monotonic()
    run = wait_for_run(run_id, timeout=0.5, poll_s=0.1)
    assert run.state is not None and run.state.is_scheduled()  # still waiting: not touched
    assert time.monotonic() - started < 30

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Completed(), force=True)
    run = wait_for_run(run_id, timeout=30, poll_s=0.1)
    assert run.state is not None and run.state.is_completed()


def test_a_run_no_worker_started_is_crashed_only_when_zombies_are_looked_for() -> None:
    from prefect.states import Pending

    run_id = _flow_run(Pending())
    time.sleep(1.0)  # Pending for longer than zombie_after_s below
    run = wait_for_run(run_id, timeout=0.3, poll_s=0.1)  # a trigger's wait: left Pending
    assert run.state is not None and run.state.is_pending()

    run = wait_for_run(run_id, poll_s=0.1, zombie_after_s=0.5)  # the sweep's wait
    assert run.state is not None and run.state.is_crashed()
    assert "no heartbeat" in (run.state.message or "")


def test_find_run_by_tags() -> None:
    from prefect.states import Scheduled

    run_id = _flow_run(Scheduled(), tags=["folio-sweep", "folio-batch:runs-test"])
    found = find_run(["folio-batch:runs-test"])
    assert found is not None and found.id == run_id
    assert find_run(["folio-batch:never-sent"]) is None
