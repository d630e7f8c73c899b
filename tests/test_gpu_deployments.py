"""The GPU deployments of prefect.yaml on a real Prefect server, with one process worker
on the ``folio-h200`` pool (CI has no GPU: the pool's vLLM server is the OpenAI-protocol
test server, given as ``FOLIO_SERVER__COMMAND`` in the worker's environment).

A UI run, a trigger and a sweep batch all run on that worker, OCR every page through the
host's one shared server (started by the first run, attached to by the others, alive
between them), and the server stops when the worker stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from folio.gpu.shared_server import pid_alive, read_state
from folio.samples import report_pages, write_text_pdf
from tests.prefect_stack import PrefectStack, _spawn

pytestmark = pytest.mark.timeout(600)

FAKE = str(Path(__file__).parent / "openai_fake.py")
GPU_POOL = "folio-h200"
DOCUMENT = "folio-ingest-document/document-h200"
BATCH = "folio-ingest/batch-h200"


@pytest.fixture(scope="module")
def gpu_worker(prefect_stack_server: PrefectStack, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[dict[str, Any]]:
    """Pools from the profiles, `prefect deploy --all` of prefect.yaml, one worker on the
    H200 pool."""
    stack = prefect_stack_server
    state_dir = tmp_path_factory.mktemp("gpu-servers")
    applied = stack.run(sys.executable, "-m", "folio_prefect.deployments.work_pools", "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    # every deployment of prefect.yaml, as a user deploys them (the GPU ones among them)
    deploy = stack.run(sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all")
    assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
    command = [sys.executable, FAKE, "--port", "{port}", "--delay", "0.05",
               "--output", "chandra1_page.html"]
    extra = {"FOLIO_SERVER__COMMAND": json.dumps(command),
             "FOLIO_SERVER__STATE_DIR": str(state_dir),
             "FOLIO_SERVER__IDLE_TIMEOUT_S": "300"}
    saved = dict(stack.env)
    stack.env.update(extra)
    try:
        worker = _spawn(stack, "gpu-worker", sys.executable, "-m", "prefect", "worker", "start",
                        "--pool", GPU_POOL, "--type", "process")
    finally:
        stack.env.clear()
        stack.env.update(saved)
    yield {"stack": stack, "state_dir": state_dir, "worker": worker, "env": extra}
    if worker.poll() is None:
        stop_worker(worker)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops a worker; SIGKILL after a minute. The server
    must stop with the worker either way, as it does after a kill too (its supervisor
    watches the worker's pid). The worker was started with SIGINT at its default
    (tests/prefect_stack._default_sigint): Prefect's worker stops on SIGTERM by sending
    itself SIGINT, and in a suite run in the background it used to ignore that and sit
    out the whole minute."""
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        tree = subprocess.run(["ps", "-o", "pid,stat,etime,args", "-g", str(worker.pid)],
                              capture_output=True, text=True).stdout
        warnings.warn(f"worker still running 60 s after SIGTERM, killed:\n{tree}", stacklevel=2)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)


def wait_report(flow_run_id: Any, stack: PrefectStack, timeout: float = 300) -> dict[str, Any]:
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(flow_run_id)
            if run.state and run.state.is_final():
                assert run.state.is_completed(), (run.state, stack.log_tail())
                result: dict[str, Any] = run.state.result()  # type: ignore[assignment]
                return result
            time.sleep(1)
    raise AssertionError(f"flow run {flow_run_id} did not finish:\n{stack.log_tail()}")


def server_states(state_dir: Path) -> list[Any]:
    return [s for s in (read_state(p) for p in state_dir.glob("*.json")) if s is not None]


def test_ui_run_trigger_and_sweep_batch_share_the_gpu_server(
    gpu_worker: dict[str, Any], prefect_stack: PrefectStack, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.deployments import run_deployment

    from folio.trigger import IngestRequest
    from folio_prefect.deployments.trigger import trigger
    from folio_prefect.tasks.sweep import submit_batch

    stack, state_dir = gpu_worker["stack"], gpu_worker["state_dir"]
    pdfs = [write_text_pdf(tmp_path / f"d{n}.pdf", report_pages(seed=40 + n, n=1 + n % 2))
            for n in range(3)]
    out = tmp_path / "out"
    every_page = {"engine": "vllm", "route": "ocr"}

    # a person's run from the UI: the deployment's form parameters
    ui = run_deployment(DOCUMENT, parameters={"source": str(pdfs[0]), "out": str(out),
                                              **every_page}, timeout=0)
    first = wait_report(ui.id, stack)  # type: ignore[union-attr]
    states = server_states(state_dir)
    assert len(states) == 1 and states[0].state == "ready", states
    server = states[0]
    # a RAG job's trigger, then a sweep's batch, on the same worker
    triggered = trigger(IngestRequest(source=str(pdfs[1]), out=str(out), **every_page),
                        deployment=DOCUMENT)
    second = wait_report(triggered.flow_run_id, stack)
    batch = submit_batch(BATCH, "gpu-batch-1", {"sources": [str(pdfs[2])], "out": str(out),
                                                 **every_page})
    third = wait_report(batch, stack)

    for report in (first, second, third):
        doc = report["documents"][0]
        assert doc["outcome"] == "ok" and doc["engine"] == "vllm", doc
        assert report["config"]["ocr"]["profile"] == "h200"
        assert report["config"]["ocr"]["in_flight"] == 256
    # exactly the settings of `folio ingest --engine vllm --profile h200 ...` on that host
    from folio import cli
    from folio.settings.run_config import resolve_config

    for key, value in gpu_worker["env"].items():
        monkeypatch.setenv(key, value)
    args = cli._parser().parse_args([
        "ingest", str(pdfs[0]), "--out", str(out), "--engine", "vllm", "--route", "ocr",
        "--profile", "h200", "--model", "datalab-to/chandra", "--preset", "chandra"])
    expected = resolve_config(engine="vllm", route="ocr", settings=cli._settings(args))
    assert first["config"] == expected.public_dump()

    after = server_states(state_dir)
    assert len(after) == 1 and after[0].server_pid == server.server_pid, "one server for all"
    assert after[0].generation == 1 and pid_alive(after[0].server_pid), "it outlived the runs"
    stats = httpx.get(after[0].base_url.removesuffix("/v1") + "/stats", timeout=5).json()
    assert stats["requests"] == sum(r["totals"]["pages"] for r in (first, second, third))

    worker = gpu_worker["worker"]  # the worker stops: so does its server
    stop_worker(worker)
    deadline = time.monotonic() + 20
    while pid_alive(after[0].server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(after[0].server_pid), "server left behind by a stopped worker"
