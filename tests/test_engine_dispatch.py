"""Pages spread over several OpenAI-protocol servers (one per GPU on a multi-GPU host; CI
has no GPU, so the servers are tests/openai_fake.py): least-outstanding dispatch, each
server's own in-flight budget, and a server killed mid-run whose pages finish elsewhere,
none lost, none twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from PIL import Image

from folio.engines.dispatch import Dispatcher, NoEngineError
from folio.engines.openai_engine import OpenAIEngine
from folio.gpu.server_probe import free_port
from folio.gpu.vllm_server import RemoteEndpoint, endpoint_members
from folio.models import PagePrep
from folio.samples import report_pages, write_long_pdf, write_text_pdf
from folio.settings.config import PipelineConfig
from tests.openai_fake import FakeServer
from tests.test_scheduler import gpu_config, run_scheduler

FAKE = str(Path(__file__).parent / "openai_fake.py")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("spread")
    files = [write_long_pdf(root / "a-long.pdf", 30)]
    files += [write_text_pdf(root / f"b{n}.pdf", report_pages(seed=60 + n, n=1 + n % 3))
              for n in range(6)]
    return files


def spread_config(tmp_path: Path, urls: list[str]) -> PipelineConfig:
    config = gpu_config(tmp_path, "unused")
    config.ocr.endpoint, config.ocr.endpoints = None, urls
    return config


def test_the_least_busy_engine_gets_the_next_request_and_budgets_are_per_engine() -> None:
    a = RemoteEndpoint("http://127.0.0.1:9/v1", in_flight=2)
    b = RemoteEndpoint("http://127.0.0.1:10/v1", in_flight=2)
    dispatch = Dispatcher([a, b])
    assert dispatch.in_flight == 4
    leases = [dispatch.lease(1.0) for _ in range(4)]
    held = [lease.__enter__().endpoint.base_url for lease in leases]
    assert sorted(held) == sorted([a.base_url, b.base_url] * 2), "two each, alternating"
    fifth: list[str] = []
    waiter = threading.Thread(target=lambda: fifth.append(_lease_once(dispatch)))
    waiter.start()
    time.sleep(0.3)
    assert not fifth, "every engine full: the fifth request waits"
    leases[1].__exit__(None, None, None)  # one of b's... or a's: the freed engine takes it
    waiter.join(5)
    assert fifth == [held[1]]
    for lease in (leases[0], leases[2], leases[3]):
        lease.__exit__(None, None, None)
    dispatch.close()


def _lease_once(dispatch: Dispatcher) -> str:
    with dispatch.lease(1.0) as slot:
        return slot.endpoint.base_url


def test_no_healthy_engine_is_a_typed_error_after_the_wait() -> None:
    dead = RemoteEndpoint(f"http://127.0.0.1:{free_port()}/v1", in_flight=1)
    dispatch = Dispatcher([dead, dead], recheck_s=0.1)
    for slot in dispatch.slots:
        dispatch.set_aside(slot, "test")
    started = time.monotonic()
    with pytest.raises(NoEngineError, match="no engine answered"):
        _lease_once_timeout(dispatch, 0.5)
    assert 0.4 < time.monotonic() - started < 5
    dispatch.close()


def _lease_once_timeout(dispatch: Dispatcher, timeout_s: float) -> None:
    with dispatch.lease(timeout_s):
        pass


def test_the_faster_server_takes_more_pages_when_callers_keep_both_full(
    tmp_path: Path,
) -> None:
    """Eight callers always waiting (more than one server's budget of 4): each request
    goes where the fewest are outstanding, so a server 15 times faster takes most pages,
    and neither ever holds more than its own budget."""
    image = tmp_path / "p.png"
    Image.new("RGB", (400, 518), "white").save(image)
    page = PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(image))
    with FakeServer(delay_s=0.02) as fast, FakeServer(delay_s=0.3) as slow:
        config = spread_config(tmp_path, [fast.url, slow.url])
        engine = OpenAIEngine.from_config(config)
        try:
            with ThreadPoolExecutor(8) as pool:
                outputs = list(pool.map(lambda _: engine.recognize(page), range(80)))
        finally:
            engine.close()
        fast_n, slow_n = fast.state.requests, slow.state.requests
        fast_peak, slow_peak = fast.state.max_in_flight, slow.state.max_in_flight
    assert len(outputs) == 80 and fast_n + slow_n == 80, "each page sent once"
    assert fast_n > 3 * slow_n > 0, (fast_n, slow_n)
    assert fast_peak <= config.ocr.in_flight and slow_peak == config.ocr.in_flight


def test_the_scheduler_keeps_every_servers_budget_full(corpus: list[Path], tmp_path: Path) -> None:
    # answers slow enough (1 s) that the pages rendered meanwhile outnumber one server's
    # budget also on a busy machine: at 0.2 s the first answers came back before a fifth
    # page was rendered when the suite ran beside other work, and the ladder never held more
    # than one server's four
    with FakeServer(delay_s=1.0) as a, FakeServer(delay_s=1.0) as b:
        config = spread_config(tmp_path, [a.url, b.url])
        finished, scheduler = run_scheduler(config, tmp_path / "out", corpus)
        sent = (a.state.requests, b.state.requests)
        peaks = (a.state.max_in_flight, b.state.max_in_flight)
    pages = sum(d.page_count for _, d in finished)
    assert all(d.pages_ok == d.page_count for _, d in finished)
    assert sum(sent) == pages and min(sent) > pages // 4, sent
    assert max(peaks) <= config.ocr.in_flight, peaks
    # the page budget is both servers' together, and the run used more than one's
    assert scheduler.limits.ocr_concurrency == 2 * config.ocr.in_flight
    assert config.ocr.in_flight < scheduler.peak_in_ladder <= scheduler.limits.ocr_threads


@contextmanager
def fake_process(*extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """tests/openai_fake.py as its own process (so it can die), unsupervised."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, FAKE, "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        assert RemoteEndpoint(url).wait_ready(30), "fake server did not start"
        yield url, proc
    finally:
        proc.kill()
        proc.wait()


def test_a_server_killed_mid_run_loses_no_page_and_sends_none_twice(
    corpus: list[Path], tmp_path: Path
) -> None:
    with fake_process("--delay", "0.05") as (good, _), \
            fake_process("--delay", "0.05", "--die-on", "8") as (doomed, dying):
        config = spread_config(tmp_path, [good, doomed])
        finished, _ = run_scheduler(config, tmp_path / "out", corpus)
        assert dying.wait(5) is not None, "the second server died mid-run"
        served = httpx.get(good.removesuffix("/v1") + "/stats", timeout=5).json()["requests"]
    docs = [d for _, d in finished]
    assert len(docs) == len(corpus)
    pages = sum(d.page_count for d in docs)
    for doc in docs:
        assert sorted(p.index for p in doc.pages) == list(range(doc.page_count))
        assert doc.pages_ok == doc.page_count, [p.reason for p in doc.pages if p.reason]
    # the dead server answered at most 7 pages; the good one took every other page, and
    # each page's output was written once
    assert pages - 7 <= served <= pages
    for path in (tmp_path / "out").rglob("document.json"):
        written = json.loads(path.read_text())["pages"]
        assert len(written) == len({p["page"] for p in written})


def test_a_runner_with_two_engines_serves_pages_from_both_and_restarts_one_alone(
    corpus: list[Path], tmp_path: Path
) -> None:
    """``server.engines`` 2 (on a GPU host: one server per GPU, CUDA_VISIBLE_DEVICES set
    for each; here the CPU profile pins nothing): two shared servers, pages to both; the
    one that dies mid-run is restarted by its own supervisor while the other serves, and
    every page ends ok exactly once."""
    from folio.gpu.shared_server import pid_alive, read_state
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    marker = tmp_path / "died"
    command = [sys.executable, FAKE, "--port", "{port}", "--delay", "0.05",
               "--die-on", "12", "--die-marker", str(marker)]
    state_dir = tmp_path / "servers"
    runner = VLLMTaskRunner(profile="cpu", server_command=command, engines=2, in_flight=4,
                            state_dir=str(state_dir), health_interval_s=0.1,
                            idle_timeout_s=1.5)
    with runner:
        assert runner.endpoint is not None
        members = endpoint_members(runner.endpoint)
        assert len({m.base_url for m in members}) == 2, "two servers"
        config = gpu_config(tmp_path, "unused")
        config.ocr.engine, config.ocr.endpoint = "vllm", None
        finished, scheduler = run_scheduler(config, tmp_path / "out", corpus)
        served = [httpx.get(m.base_url.removesuffix("/v1") + "/stats", timeout=5).json()
                  for m in members]
    states = [s for s in (read_state(p) for p in state_dir.glob("*.json")) if s is not None]
    # the server that died had its 12th request when it died (--die-on counts its own);
    # its restarted process counts afresh, so the one that lived carries the rest
    assert marker.exists(), "one server died mid-run, after taking 12 pages"
    assert sorted(s.generation for s in states) == [1, 2], "only the one that died restarted"
    assert max(s["requests"] for s in served) > 0, served
    assert scheduler.limits.ocr_concurrency == 2 * config.ocr.in_flight
    for _, doc in finished:
        assert sorted(p.index for p in doc.pages) == list(range(doc.page_count))
        assert doc.pages_ok == doc.page_count, [p.reason for p in doc.pages if p.reason]
    deadline = time.monotonic() + 20  # idle past idle_timeout_s: both stop
    while any(pid_alive(s.server_pid) for s in states if s.server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(pid_alive(s.server_pid) for s in states if s.server_pid)


def test_gpu_groups_cover_every_visible_gpu_and_refuse_what_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from folio.errors import ConfigError
    from folio.gpu.profiles import engine_gpu_groups, load_profile, visible_gpus

    h200 = load_profile("h200")
    assert engine_gpu_groups(h200, 0, ["0", "1", "2", "3"]) == ["0", "1", "2", "3"]
    assert engine_gpu_groups(h200, 0, ["0"]) == [None], "one GPU: as before, nothing pinned"
    assert engine_gpu_groups(h200, 1, ["0", "1"]) == [None]
    assert engine_gpu_groups(h200, 2, ["4", "6", "7"]) == ["4", "6"]
    pair = h200.model_copy(update={"gpu_count": 2})  # tensor parallel 2: two GPUs a server
    assert engine_gpu_groups(pair, 0, ["0", "1", "2", "3", "4"]) == ["0,1", "2,3"]
    with pytest.raises(ConfigError, match="3 servers of 1 GPU"):
        engine_gpu_groups(h200, 3, ["0", "1"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert visible_gpus() == ["2", "3"], "the variable names the GPUs when set"
