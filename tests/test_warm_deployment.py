"""The deployments as prefect.yaml makes them, on a real server and process worker, with
the warm server on (as a team gets it): a triggered document runs in a child of the warm
server and is indexed; a run cancelled from Prefect stops, and its process with it.

The session's stack (tests/prefect_stack.py) runs warm too; the stacks other tests start
themselves (tests/test_hosts.py) run with FOLIO_WARM=0 (tests/conftest.py), which
exercises the same deployment command's other branch: ``prefect.engine`` in the
launcher's own process."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from folio.samples import report_pages, write_long_pdf, write_scanned_pdf, write_text_pdf
from tests.prefect_stack import start_prefect_stack
from tests.process_reaper import stop_warm_servers, warm_runs

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]


def test_a_triggered_run_is_forked_warm_and_a_cancelled_one_stops(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    runtime = Path(tempfile.mkdtemp(prefix="fw-", dir="/tmp"))  # a socket path's 107 bytes
    (tmp_path / "home").mkdir()
    stack = start_prefect_stack(tmp_path / "home", ("document",), env={
        "FOLIO_WARM": "1", "FOLIO_WARM_IDLE_S": "300", "XDG_RUNTIME_DIR": str(runtime)})
    try:
        pdf = write_text_pdf(tmp_path / "one.pdf", report_pages(seed=31, n=1))
        done = stack.run(sys.executable, "-m", "folio_prefect.flows.cli", "trigger", str(pdf),
                         "--out", str(tmp_path / "out"), "--wait", "--timeout", "240",
                         timeout=300)
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        assert done.returncode == 0 and len(lines) == 2, done.stderr + stack.log_tail()
        result = lines[1]
        assert result["state"] == "COMPLETED"
        [doc] = result["documents"]
        assert doc["outcome"] == "ok" and doc["chunks"] > 0
        runs = warm_runs(runtime)
        targets = [t for _, t in runs]
        # the trigger command and the flow run (and its page workers' zygote) were forked
        assert "folio_prefect.flows.cli:run" in targets and "prefect.engine" in targets

        # a long scan, cancelled once it runs: the run ends Cancelled, its process too
        long_pdf = write_scanned_pdf(tmp_path / "long.pdf",
                                     write_long_pdf(tmp_path / "text.pdf", 40), dpi=150)
        started = stack.run(sys.executable, "-m", "folio_prefect.flows.cli", "trigger",
                            str(long_pdf), "--out", str(tmp_path / "out2"), timeout=300)
        run_id = json.loads(started.stdout.splitlines()[-1])["flow_run_id"]
        with temporary_settings({PREFECT_API_URL: stack.api_url}), \
                get_client(sync_client=True) as client:
            def state() -> str:
                return str(getattr(client.read_flow_run(run_id).state_type, "value", ""))

            child = _wait_for(lambda: _engine_child(runtime, seen={p for p, _ in runs}), 180)
            _wait_for(lambda: state() == "RUNNING", 180)
            from prefect.states import Cancelling

            client.set_flow_run_state(run_id, Cancelling(), force=True)
            ended = _wait_for(lambda: (s := state()) in ("CANCELLED", "CRASHED", "FAILED",
                                                          "COMPLETED") and s, 180)
        assert ended == "CANCELLED", stack.log_tail()
        _wait_for(lambda: not _alive(child), 60)
    finally:
        stack.stop()
        stop_warm_servers(runtime)


def _engine_child(runtime: Path, seen: set[int]) -> int | None:
    """The flow run's process the warm server forked after those ``seen``."""
    return next((pid for pid, target in warm_runs(runtime)
                 if target == "prefect.engine" and pid not in seen), None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def _wait_for(check, timeout: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout} s")
