"""``folio_prefect.deployments.runs.wait_for_run``, the one wait for a run, as its two
users need it, on a real Prefect API: the trigger gives up at a timeout and leaves the run alone; the sweep
marks a run that can no longer finish Crashed instead of waiting for it forever. And an
API that does not answer: ridden out for a while, then a typed error, never a hang."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

import pytest

from folio.errors import OrchestratorUnavailableError, TransientError
from folio_prefect.deployments import runs
from folio_prefect.deployments.runs import find_run, read_run, riding_out, wait_for_run

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


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # nothing listens there once the socket is closed


def test_an_api_that_does_not_answer_ends_in_a_typed_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call here rides an outage out for OUTAGE_S, then says what it was doing and
    on which API, as a transient error (a sweep ends with it; a later one adopts)."""
    from uuid import uuid4

    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(runs, "OUTAGE_S", 2.0)
    monkeypatch.setattr(runs, "BACKOFF_S", (0.2, 0.5))
    url = f"http://127.0.0.1:{_closed_port()}/api"
    started = time.monotonic()
    with temporary_settings({PREFECT_API_URL: url}), \
            pytest.raises(OrchestratorUnavailableError) as caught:
        read_run(uuid4())
    assert 2.0 <= time.monotonic() - started < 30
    assert isinstance(caught.value, TransientError)
    assert url in str(caught.value) and "did not answer for 2 s" in str(caught.value)


def test_a_short_outage_is_ridden_out_and_an_answer_is_not_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx
    from prefect.exceptions import ObjectNotFound

    monkeypatch.setattr(runs, "BACKOFF_S", (0.05, 0.1))
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise httpx.ConnectError("refused")
        return "answer"

    assert riding_out("reading", flaky) == "answer" and len(tries) == 3

    def missing() -> str:
        tries.append(1)
        raise ObjectNotFound(http_exc=Exception("404"))

    tries.clear()
    with pytest.raises(ObjectNotFound):
        riding_out("reading", missing)
    assert len(tries) == 1  # the API answered: no run of that id, nothing to wait out
