"""VLLMTaskRunner and VLLMServer lifecycle, with the fake server as "vllm serve".

Each test launches tests/openai_fake.py as the server command (a real process on a real
port), so start-up, health polling, crash restarts, re-sent requests, stopping and the
no-orphan guarantees are exercised as they would be with vLLM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.engines.openai_engine import OpenAIEngine
from folio.errors import ConfigError, EngineUnavailableError
from folio.gpu.preflight import QWEN3_VL_8B_CONFIG
from folio.gpu.server_probe import probe_server
from folio.gpu.shared_server import SharedEndpoint
from folio.gpu.vllm_server import VLLMServer, active_endpoint
from folio.models import PagePrep
from folio.settings.config import PipelineConfig
from folio_prefect.flows.vllm_runner import VLLMTaskRunner, current_endpoint
from tests.openai_fake import FakeServer

FAKE = str(Path(__file__).parent / "openai_fake.py")
pytestmark = pytest.mark.timeout(120)


def fake_cmd(*extra: str) -> list[str]:
    return [sys.executable, FAKE, "--port", "{port}", *extra]


def flow_runner(runner: VLLMTaskRunner) -> Any:
    """``runner`` as ``@flow(task_runner=...)`` takes it. Prefect types that parameter
    ``TaskRunner[PrefectFuture[Any]]``, an invariant generic that its own
    ThreadPoolTaskRunner (``TaskRunner[PrefectConcurrentFuture]``) does not match, so
    flows/gpu.py and flows/cli.py pass the runner as Any too."""
    return runner


def served_endpoint() -> VLLMServer | SharedEndpoint:
    """The current endpoint of a runner that started or shares a server: typed as any
    Endpoint, of which only these have a process (pid, restarts, generation)."""
    endpoint = current_endpoint()
    assert isinstance(endpoint, VLLMServer | SharedEndpoint), endpoint
    return endpoint


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def wait_gone(pid: int | None, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> PagePrep:
    path = tmp_path_factory.mktemp("img") / "p.png"
    Image.new("RGB", (400, 518), "white").save(path)
    return PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(path))


def config_for_runner() -> PipelineConfig:
    config = PipelineConfig()
    config.ocr.engine, config.ocr.preset = "vllm", "generic"
    config.ocr.request_retries = 1
    return config


# --- VLLMServer without Prefect --------------------------------------------------------------


def test_server_stops_with_its_process_group(tmp_path: Path) -> None:
    child_file = tmp_path / "child.pid"
    server = VLLMServer(fake_cmd("--child-pid-file", str(child_file), "--startup-delay", "0.3"),
                        health_interval_s=0.2).start()
    pid, child = server.pid, int(child_file.read_text())
    assert alive(pid) and alive(child) and probe_server(server.base_url)[0]
    assert server.metrics()["running"] == 0.0
    server.stop()
    assert wait_gone(pid) and wait_gone(child), "server and its children are gone"


def test_sigterm_ignored_escalates_to_sigkill() -> None:
    server = VLLMServer(fake_cmd("--ignore-sigterm"), health_interval_s=0.2, stop_timeout_s=0.5).start()
    pid = server.pid
    server.stop()
    assert wait_gone(pid, 5)


def test_killing_the_parent_takes_the_server_down(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: a SIGKILLed owner leaves no orphan server."""
    script = (
        "import sys, time\n"
        "from folio.gpu.vllm_server import VLLMServer\n"
        f"s = VLLMServer({fake_cmd()!r}, health_interval_s=0.2).start()\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parent.parent)
    assert owner.stdout is not None
    pid = int(owner.stdout.readline())
    assert alive(pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_gone(pid, 10), "the server died with its owner"


def test_start_failure_reports_the_log() -> None:
    cmd = [sys.executable, "-c", "import sys; print('CUDA out of memory (fake)'); sys.exit(3)"]
    server = VLLMServer(cmd, startup_timeout_s=10)
    with pytest.raises(EngineUnavailableError, match="CUDA out of memory"):
        server.start()
    assert server.state == "stopped"


def test_crash_restarts_are_bounded() -> None:
    server = VLLMServer(fake_cmd(), health_interval_s=0.1, max_restarts=1).start()
    try:
        for _ in range(2):
            pid = server.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid)
            server.wait_ready(20)
        assert server.restarts == 1 and server.state == "failed" and not server.wait_ready(1)
        assert "restart(s) are used up" in (server.error or "")
    finally:
        server.stop()


# --- the task runner in real Prefect flows ---------------------------------------------------


@pytest.fixture(scope="module")
def prefect(prefect_api: None) -> Iterator[None]:
    """The session's Prefect test harness (tests/conftest.py: prefect_test_harness)."""
    yield


def test_runner_owns_the_server_for_the_flow_run(prefect: None, page: PagePrep) -> None:
    from prefect import flow, task

    @task
    def ocr(i: int) -> dict[str, Any]:
        endpoint = served_endpoint()
        assert probe_server(endpoint.base_url)[0], "healthy before tasks"
        out = OpenAIEngine.from_config(config_for_runner()).recognize(page, 0)
        return {"pid": endpoint.pid, "blocks": len(out.blocks)}

    @flow(task_runner=flow_runner(VLLMTaskRunner(
        max_workers=4, profile="cpu", server_command=fake_cmd(), health_interval_s=0.2,
        shared=False)))
    def run() -> list[dict[str, Any]]:
        return [f.result() for f in [ocr.submit(i) for i in range(6)]]

    results = run()
    pids = {r["pid"] for r in results}
    assert len(pids) == 1 and all(r["blocks"] for r in results)
    assert wait_gone(pids.pop()), "stopped after the flow"
    assert active_endpoint() is None and current_endpoint() is None


def test_crash_mid_run_restarts_and_no_page_is_lost(prefect: None, page: PagePrep, tmp_path: Path) -> None:
    from prefect import flow, task

    marker = tmp_path / "died"

    @task
    def ocr_document(pages: int) -> dict[str, Any]:
        # like the pipeline: pages in a plain thread pool (no context variables there)
        engine = OpenAIEngine.from_config(config_for_runner())
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda _: engine.recognize(page, 0), range(pages)))
        endpoint = served_endpoint()
        return {"ok": sum(1 for o in outs if o.blocks), "restarts": endpoint.restarts,
                "generation": endpoint.generation, "pid": endpoint.pid}

    runner = VLLMTaskRunner(profile="cpu", health_interval_s=0.1, shared=False,
                            server_command=fake_cmd("--delay", "0.1", "--die-on", "6",
                                                    "--die-marker", str(marker)))

    @flow(task_runner=flow_runner(runner))
    def run() -> dict[str, Any]:
        return ocr_document.submit(24).result()

    result = run()
    assert marker.exists(), "the server crashed mid-run"
    assert result["ok"] == 24, "every page in flight at the crash was re-sent"
    assert result["restarts"] == 1 and result["generation"] == 2
    assert wait_gone(result["pid"]) and wait_gone(int(marker.read_text()))


def test_attach_mode_starts_nothing(prefect: None, page: PagePrep) -> None:
    from prefect import flow, task

    with FakeServer(output="generic_page.md") as fake:

        @task
        def ocr() -> str:
            endpoint = current_endpoint()
            assert endpoint is not None
            OpenAIEngine.from_config(config_for_runner()).recognize(page, 0)
            return endpoint.base_url

        @flow(task_runner=flow_runner(VLLMTaskRunner(endpoint=fake.url, server_command=["false"])))
        def run() -> tuple[str, bool]:
            return ocr.submit().result(), current_endpoint() is not None and not hasattr(
                current_endpoint(), "pid")

        url, remote = run()
        assert url == fake.url and remote and fake.state.requests == 1


def test_nested_subflow_reuses_the_server(prefect: None) -> None:
    from prefect import flow, task

    @task
    def where() -> tuple[int, int | None]:
        endpoint = current_endpoint()
        return id(endpoint), getattr(endpoint, "pid", None)

    runner = VLLMTaskRunner(profile="cpu", server_command=fake_cmd(), health_interval_s=0.2,
                            shared=False)

    @flow(task_runner=flow_runner(runner))
    def child() -> tuple[int, int | None]:
        return where.submit().result()

    @flow(task_runner=flow_runner(runner))
    def parent() -> tuple[tuple[int, int | None], tuple[int, int | None]]:
        return where.submit().result(), child()

    outer, inner = parent()
    assert outer == inner and outer[1] is not None
    assert wait_gone(outer[1])


def test_failing_flow_still_stops_the_server(prefect: None) -> None:
    from prefect import flow, task

    @task
    def boom() -> None:
        endpoint = served_endpoint()
        Path(os.environ["FOLIO_TEST_PID_FILE"]).write_text(str(endpoint.pid))
        raise RuntimeError("task failed")

    @flow(task_runner=flow_runner(VLLMTaskRunner(
        profile="cpu", server_command=fake_cmd(), health_interval_s=0.2, shared=False)))
    def run() -> None:
        boom.submit().result()

    pid_file = Path(os.environ.setdefault("FOLIO_TEST_PID_FILE", f"/tmp/folio-test-{os.getpid()}.pid"))
    with pytest.raises(RuntimeError, match="task failed"):
        run()
    assert wait_gone(int(pid_file.read_text()))
    pid_file.unlink()


def test_a_gpu_pool_run_whose_server_cannot_start_fails_with_its_error(
    prefect: None, tmp_path: Path
) -> None:
    """A deployment's run (flows/gpu.py builds its runner with defer_failure) whose vLLM
    server exits during start-up ends Failed with the server's error as its message, which
    the UI shows, instead of Crashed ("process exited with status code 1")."""
    from folio.samples import report_pages, write_text_pdf
    from folio_prefect.flows.ingest import ingest

    pdf = write_text_pdf(tmp_path / "a.pdf", report_pages(seed=3, n=1))
    dies = [sys.executable, "-c", "import sys; print('CUDA out of memory (fake)'); sys.exit(3)"]
    runner = VLLMTaskRunner(profile="cpu", server_command=dies, shared=False,
                            startup_timeout_s=20, defer_failure=True)
    state = ingest.with_options(task_runner=flow_runner(runner))(
        sources=[str(pdf)], out=str(tmp_path / "out"), engine="vllm", return_state=True)
    assert state.is_failed() and not state.is_crashed(), state
    assert "CUDA out of memory (fake)" in (state.message or ""), state.message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("document.json"))
    assert active_endpoint() is None and current_endpoint() is None


# --- configuration -------------------------------------------------------------------------------


def test_preflight_fails_fast_before_starting(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_VL_8B_CONFIG))
    runner = VLLMTaskRunner(profile="rtx-4090-24gb", model=str(tmp_path), max_model_len=65536)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="does not fit on rtx-4090-24gb"):
        runner.__enter__()
    assert time.monotonic() - started < 5 and runner.server is None


def test_duplicate_rebuilds_from_config_and_pickles() -> None:
    import cloudpickle

    runner = VLLMTaskRunner(8, profile="h100-80gb", model="/m", preset="chandra", load_format="dummy")
    assert runner.duplicate() == runner and runner.duplicate() is not runner
    assert cloudpickle.loads(cloudpickle.dumps(runner)) == runner
    config = config_for_runner()
    config.ocr.model, config.ocr.profile = "/m", "h100-80gb"
    assert VLLMTaskRunner.from_config(config).options["model"] == "/m"


def test_vllm_command_from_profile_preset_and_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_VL_8B_CONFIG))
    seen: dict[str, Any] = {}

    def fake_start(self: VLLMServer) -> VLLMServer:
        seen.update(command=self.command, env=self.env, in_flight=self.in_flight)
        raise EngineUnavailableError("not starting vllm in a unit test")

    monkeypatch.setattr(VLLMServer, "start", fake_start)
    runner = VLLMTaskRunner(
        profile="h100-80gb",
        model=str(tmp_path),
        preset="chandra",
        port=8123,
        load_format="dummy",
        executable=[sys.executable, "-m", "vllm.entrypoints.cli.main"],
        shared=False,
    )
    with pytest.raises(EngineUnavailableError):
        runner.__enter__()
    cmd = seen["command"]
    assert cmd[:5] == [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(tmp_path)]
    assert cmd[cmd.index("--port") + 1] == "8123" and cmd[cmd.index("--load-format") + 1] == "dummy"
    assert (
        json.loads(cmd[cmd.index("--mm-processor-kwargs") + 1])["size"]["longest_edge"]
        == 3072 * 2048
    )
    assert (
        seen["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
        and seen["in_flight"] == 128
    )
    assert runner.preflight_result is None  # reset after the failed start
    assert active_endpoint() is None


def test_gpu_concurrency_slot_is_held_while_the_server_runs(prefect: None) -> None:
    import asyncio

    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    async def limit(create: bool) -> int:
        async with get_client() as client:
            if create:
                await client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name="gpu-test-runner", limit=1)
                )
            return (
                await client.read_global_concurrency_limit_by_name("gpu-test-runner")
            ).active_slots

    asyncio.run(limit(True))

    @task
    def slots_now() -> int:
        return asyncio.run(limit(False))

    @flow(
        task_runner=flow_runner(VLLMTaskRunner(
            profile="cpu",
            server_command=fake_cmd(),
            health_interval_s=0.2,
            concurrency_limit="gpu-test-runner",
            shared=False,
        ))
    )
    def run() -> int:
        return slots_now.submit().result()

    assert run() == 1, "one slot held during the run"
    assert asyncio.run(limit(False)) == 0, "released after it"


# --- the host's shared server ----------------------------------------------------------------


def test_flow_runs_share_one_server_that_outlives_them(
    prefect: None, page: PagePrep, tmp_path: Path
) -> None:
    """A second run attaches to the first run's server (no second start-up); the server
    stays up between runs and stops by itself after the idle timeout."""
    from prefect import flow, task

    @task
    def ocr() -> tuple[int | None, int]:
        endpoint = served_endpoint()
        out = OpenAIEngine.from_config(config_for_runner()).recognize(page, 0)
        return endpoint.pid, len(out.blocks)

    runner = VLLMTaskRunner(profile="cpu", server_command=fake_cmd(), health_interval_s=0.2,
                            idle_timeout_s=2.0, state_dir=str(tmp_path / "servers"))

    @flow(task_runner=flow_runner(runner))
    def run() -> tuple[int | None, int]:
        return ocr.submit().result()

    first_pid, blocks = run()
    assert blocks and alive(first_pid), "the server outlives the run"
    second_pid, _ = run()
    assert second_pid == first_pid, "the second run attached instead of starting another"
    assert wait_gone(first_pid, timeout=15), "stopped after the idle timeout"


def test_shared_server_bounds_requests_across_runs(
    prefect: None, page: PagePrep, tmp_path: Path
) -> None:
    """Two runs at once on one shared server never exceed the budget together."""
    from prefect import flow, task

    cmd = fake_cmd("--delay", "0.2")
    # both runs hold the server before either sends a request: on a slow machine the
    # first run could otherwise end, and its server idle out, before the second started
    both_attached = threading.Barrier(2, timeout=120)

    @task
    def burst() -> int:
        engine = OpenAIEngine.from_config(config_for_runner())
        with ThreadPoolExecutor(8) as pool:
            return sum(1 for o in pool.map(lambda _: engine.recognize(page, 0), range(12))
                       if o.blocks)

    def make() -> Any:
        runner = VLLMTaskRunner(profile="cpu", server_command=cmd, in_flight=3,
                                health_interval_s=0.2, idle_timeout_s=1.0,
                                state_dir=str(tmp_path / "servers"))

        @flow(task_runner=flow_runner(runner))
        def run() -> tuple[int, str]:
            endpoint = current_endpoint()
            assert endpoint is not None
            both_attached.wait()
            return burst.submit().result(), endpoint.base_url

        return run

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda f: f(), [make(), make()]))
    assert [r[0] for r in results] == [12, 12]
    assert results[0][1] == results[1][1], "one server for both runs"
    stats = json.loads(__import__("httpx").get(results[0][1].removesuffix("/v1") + "/stats",
                                               timeout=5).text)
    assert 0 < stats["max_in_flight"] <= 3, stats
