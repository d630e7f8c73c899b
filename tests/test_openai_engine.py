"""The OpenAI-protocol engine against the fake server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.engines.openai_engine import (
    EngineBadOutputError,
    EngineDownError,
    OpenAIEngine,
    client_count,
)
from folio.engines.openai_wire import encode_image
from folio.errors import BadOutputError, ConfigError, EngineUnavailableError
from folio.gpu.server_probe import free_port
from folio.gpu.vllm_server import RemoteEndpoint, register_endpoint, unregister_endpoint
from folio.models import PagePrep
from folio.settings.config import PipelineConfig
from folio.settings.presets import get_preset
from tests.openai_fake import FakeServer


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> PagePrep:
    path = tmp_path_factory.mktemp("img") / "p.png"
    Image.new("RGB", (500, 647), "white").save(path)
    return PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(path))


def engine(fake: FakeServer, *, in_flight: int = 8, preset: str = "generic", **kw: Any) -> OpenAIEngine:
    kw.setdefault("backoff_s", 0.01)
    return OpenAIEngine(endpoint=RemoteEndpoint(fake.url, in_flight=in_flight), model="fake-ocr",
                        preset=get_preset(preset), **kw)


@pytest.mark.parametrize("fake", [{"output": "chandra1_page.html"}], indirect=True)
def test_ok_path_parses_recorded_output(fake: FakeServer, page: PagePrep) -> None:
    out = engine(fake, preset="chandra").recognize(page, 0)
    assert out.attempt.finish_reason == "stop" and out.attempt.error is None
    assert out.attempt.prompt_tokens == 1330 and out.attempt.completion_tokens
    assert out.attempt.temperature == 0.0 and out.attempt.model == "fake-ocr"
    assert out.blocks[1].label == "Section-Header" and out.blocks[1].bbox is not None
    assert out.prompt_format == "chandra:chandra" and "Regional revenue review" in out.markdown
    assert fake.state.images == 1


@pytest.mark.parametrize("fake", [{"fail_on": {1, 2}}], indirect=True)
def test_5xx_then_success(fake: FakeServer, page: PagePrep) -> None:
    out = engine(fake).recognize(page, 0)
    assert out.blocks and fake.state.requests == 3


@pytest.mark.parametrize("fake", [{"fail_always": True, "fail_status": 502}], indirect=True)
def test_persistent_5xx_is_engine_unavailable(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineDownError) as info:
        engine(fake, max_retries=2).recognize(page, 0)
    assert fake.state.requests == 3
    attempt = info.value.attempt
    assert attempt.error is not None and "HTTP 502" in attempt.error
    assert info.value.code == "engine-unavailable"


def test_connection_refused_is_engine_unavailable(page: PagePrep) -> None:
    eng = OpenAIEngine(endpoint=RemoteEndpoint(f"http://127.0.0.1:{free_port()}/v1"), model="m",
                       preset=get_preset("generic"), max_retries=1, backoff_s=0.01)
    with pytest.raises(EngineUnavailableError, match="connection"):
        eng.recognize(page, 0)


@pytest.mark.parametrize("fake", [{"always_length": True}], indirect=True)
def test_length_is_bad_output_with_attempt(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineBadOutputError) as info:
        engine(fake, max_tokens=512).recognize(page, 1)
    attempt = info.value.attempt
    assert attempt.finish_reason == "length" and attempt.completion_tokens == 512
    assert attempt.error is not None and "token limit" in attempt.error
    assert attempt.temperature == 0.2 and attempt.seconds >= 0


@pytest.mark.parametrize("fake", [{"garbage_below_temperature": 0.5}], indirect=True)
def test_ladder_raises_temperature_until_the_output_is_good(
    fake: FakeServer, page: PagePrep, tmp_path: Path
) -> None:
    """Looping output fails the page's repetition check (judged once, on the parsed
    page), and the pipeline's ladder asks again, warmer, until the answer is good."""
    from folio.pipeline import Services, process_page

    config = PipelineConfig.model_validate({
        "ocr": {"engine": "openai", "endpoint": fake.url, "model": "fake-ocr",
                "preset": "generic", "max_attempts": 4, "fallback": [], "request_retries": 1},
        "store": {"kind": "none"}, "work_dir": str(tmp_path / "work")})
    services = Services(config, str(tmp_path / "out"))
    image = tmp_path / "p.png"
    Image.new("RGB", (500, 647), "white").save(image)
    try:
        result = process_page(page.model_copy(update={"image_path": str(image)}), services)
    finally:
        services.close()
    failed = [a for a in result.attempts if a.error]
    assert [a.temperature for a in failed] == [0.0, 0.2]
    assert all("repetition" in (a.error or "") for a in failed)
    assert result.outcome == "recovered" and result.attempts[-1].temperature == 0.5
    assert result.blocks and fake.state.temperatures == [0.0, 0.2, 0.5]


@pytest.mark.parametrize("fake", [{"delay_s": 0.05}], indirect=True)
def test_in_flight_bound_holds_under_32_concurrent_calls(fake: FakeServer, page: PagePrep) -> None:
    engines = [engine(fake, in_flight=4), engine(fake, in_flight=4)]  # share one semaphore
    with ThreadPoolExecutor(32) as pool:
        outs = list(pool.map(lambda i: engines[i % 2].recognize(page, 0), range(32)))
    assert len(outs) == 32 and all(o.blocks for o in outs)
    assert fake.state.max_in_flight == 4


@pytest.mark.parametrize("fake", [{"delay_s": 0.1}], indirect=True)
def test_a_large_budget_spreads_its_connections_over_several_clients(
    fake: FakeServer, page: PagePrep
) -> None:
    """httpcore walks a client's every connection on each request, so a budget of
    hundreds is split over clients of about 32 connections; the in-flight bound is still
    the engine's one semaphore, and every request is answered."""
    assert client_count(20) == 1 and client_count(32) == 1 and client_count(260) == 9
    eng = engine(fake, in_flight=60)  # 64 connections: two clients
    try:
        with ThreadPoolExecutor(75) as pool:
            outs = list(pool.map(lambda _: eng.recognize(page, 0), range(150)))
        pools = [client._transport._pool for client in eng._clients]  # type: ignore[attr-defined]
        assert len(pools) == 2 and all(p.connections for p in pools), "both clients were used"
    finally:
        eng.close()
    assert len(outs) == 150 and all(o.blocks for o in outs)
    assert fake.state.requests == 150 and 30 < fake.state.max_in_flight <= 60


def test_the_clients_share_the_process_s_tls_context(fake: FakeServer) -> None:
    """Each client used to load the CA bundle into a context of its own (25 ms of GIL
    each, nine of them when a GPU run's first page built the engine); now one context
    serves every client and every probe."""
    from folio.io.tls import ssl_context

    eng = engine(fake, in_flight=60)
    try:
        contexts = {id(c._transport._pool._ssl_context) for c in eng._clients}  # type: ignore[attr-defined]
        assert len(eng._clients) == 2 and contexts == {id(ssl_context())}
    finally:
        eng.close()


def gpu_run(fake: FakeServer, tmp_path: Path) -> PipelineConfig:
    """A run's configuration with the fake server as its vision model, no vector store."""
    return PipelineConfig.model_validate({
        "ocr": {"engine": "openai", "endpoint": fake.url, "model": "fake-ocr",
                "preset": "generic"},
        "store": {"kind": "none"}, "work_dir": str(tmp_path / "work")})


def cpu_run(config: PipelineConfig) -> PipelineConfig:
    """The same run on Tesseract."""
    return config.model_copy(update={"ocr": config.ocr.model_copy(update={"engine": "tesseract"})})


def test_a_vision_model_s_engine_is_built_before_the_first_page(
    fake: FakeServer, tmp_path: Path
) -> None:
    """The run's services build the engine in the background from the start, so the
    first page's thread (and every page queued behind the build lock) finds it ready; a
    CPU engine is still built only when a page needs it."""
    from folio.pipeline import Services

    config = gpu_run(fake, tmp_path)
    services = Services(config, str(tmp_path / "out"))
    try:
        assert services._prebuild is not None
        services._prebuild.join(10)
        assert list(services._engines) == ["openai"]
        assert fake.state.requests == 0, "building sends nothing"
    finally:
        services.close()
    cpu = Services(cpu_run(config), str(tmp_path / "out2"))
    try:
        assert cpu._prebuild is None and not cpu._engines
    finally:
        cpu.close()


def test_a_vllm_run_caps_its_embedder_until_every_page_is_at_the_engine(
    fake: FakeServer, tmp_path: Path
) -> None:
    """While pages are still being sent to the vLLM server folio runs on this host, the
    run's embedding takes a quarter of the cores (the server and the sending need the
    rest); once every page is at the engine (the scheduler says so), or at the latest once
    every document is in its finishing, all of them. A CPU run's embedder is never capped,
    nor one beside someone else's endpoint (``--engine openai``)."""
    from folio.pipeline import Services
    from folio.pipeline.services import early_embed_workers

    remote = gpu_run(fake, tmp_path)
    config = remote.model_copy(update={"ocr": remote.ocr.model_copy(update={"engine": "vllm"})})
    for signal in (Services.engine_has_every_page, Services.last_document_handed_over):
        services = Services(config, str(tmp_path / "out"))
        try:
            embedder = services.embedder()
            assert embedder._cap == early_embed_workers(config)
            signal(services)
            assert embedder._cap is None, signal
        finally:
            services.close()
    for other in (cpu_run(config), remote):
        services = Services(other, str(tmp_path / "out2"))
        try:
            assert services.embedder()._cap is None
        finally:
            services.close()


def test_an_engine_that_cannot_be_built_early_fails_on_its_first_page(tmp_path: Path) -> None:
    """No server registered yet (a task runner that starts it later): the early build
    fails quietly, and the page that needs the engine gets the error, not a thread."""
    from folio.pipeline import Services

    config = PipelineConfig.model_validate({
        "ocr": {"engine": "vllm", "preset": "generic"},
        "store": {"kind": "none"}, "work_dir": str(tmp_path / "work")})
    services = Services(config, str(tmp_path / "out"))
    try:
        assert services._prebuild is not None
        services._prebuild.join(10)
        assert not services._engines
        with pytest.raises(ConfigError, match="no endpoint"):
            services.engine("vllm")
    finally:
        services.close()


@pytest.mark.parametrize("fake", [{"output": "olmocr2_page.md", "midstream_error_on": {1}}], indirect=True)
def test_streaming_and_a_stream_cut_midway(fake: FakeServer, page: PagePrep) -> None:
    out = engine(fake, preset="olmocr2", stream=True).recognize(page, 0)
    assert fake.state.requests == 2  # the cut stream was retried
    assert out.attempt.completion_tokens and out.blocks[0].label == "Title"
    assert out.markdown.startswith("# Network latency audit")


@pytest.mark.parametrize("fake", [{"always_length": True}], indirect=True)
def test_ignore_eos_benchmark_mode_accepts_fixed_length(fake: FakeServer, page: PagePrep) -> None:
    out = engine(fake, ignore_eos=True, max_tokens=768).recognize(page, 0)
    assert out.attempt.finish_reason == "length" and out.attempt.completion_tokens == 768


@pytest.mark.parametrize("fake", [{"fail_on": {1}, "fail_status": 400}], indirect=True)
def test_400_is_bad_output_for_the_page(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineBadOutputError) as info:
        engine(fake).recognize(page, 0)
    error = info.value.attempt.error
    assert error is not None and "HTTP 400" in error and fake.state.requests == 1


def test_page_without_image_is_bad_output() -> None:
    eng = OpenAIEngine(endpoint=RemoteEndpoint("http://127.0.0.1:9/v1"), model="m", preset=get_preset("generic"))
    with pytest.raises(BadOutputError, match="no rendered image"):
        eng.recognize(PagePrep(index=0), 0)


def test_from_config_endpoint_registry_and_errors(fake: FakeServer, page: PagePrep) -> None:
    config = PipelineConfig()
    config.ocr.engine, config.ocr.endpoint, config.ocr.model = "openai", fake.url, "fake-ocr"
    eng = OpenAIEngine.from_config(config)
    assert eng.endpoint.base_url == fake.url and eng.name == "openai" and eng.recognize(page, 0).blocks
    config.ocr.endpoint = None
    with pytest.raises(ConfigError, match="no endpoint"):
        OpenAIEngine.from_config(config)
    remote = RemoteEndpoint(fake.url, served_model_name="fake-ocr", in_flight=3)
    register_endpoint(remote)
    try:
        assert OpenAIEngine.from_config(config).endpoint is remote
    finally:
        unregister_endpoint(remote)


def test_model_is_discovered_from_v1_models(fake: FakeServer) -> None:
    eng = OpenAIEngine(endpoint=RemoteEndpoint(fake.url), preset=get_preset("generic"))
    assert eng.model == "fake-ocr"


def test_large_or_odd_images_are_reencoded(tmp_path: Path) -> None:
    big = tmp_path / "big.ppm"
    Image.new("RGB", (3000, 3000), "white").save(big)
    url, size = encode_image(big, 1_000_000)
    assert url.startswith("data:image/png;base64,") and size[0] * size[1] <= 1_000_000
    small = tmp_path / "s.jpg"
    Image.new("RGB", (10, 10)).save(small)
    assert encode_image(small, 1_000_000)[0].startswith("data:image/jpeg;base64,")


def test_threads_share_one_semaphore_per_endpoint() -> None:
    from folio.engines.endpoint_bounds import endpoint_semaphore

    url = f"http://127.0.0.1:{free_port()}/v1"
    sems: list[threading.BoundedSemaphore] = []  # held, as engines hold theirs
    lock = threading.Lock()

    def get() -> None:
        s = endpoint_semaphore(url, 5)
        with lock:
            sems.append(s)

    threads = [threading.Thread(target=get) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sems) == 8 and len({id(s) for s in sems}) == 1


def test_a_closed_engine_says_so(fake: FakeServer, page: PagePrep) -> None:
    eng = engine(fake)
    eng.close()
    with pytest.raises(EngineUnavailableError, match="closed"):
        eng.recognize(page, 0)
    assert fake.state.requests == 0


def test_a_url_s_bound_goes_with_the_last_engine_that_held_it() -> None:
    """A later server on a port the OS hands out again gets its own limit, not the one
    set for a server that is gone."""
    import gc

    from folio.engines.endpoint_bounds import endpoint_semaphore

    url = f"http://127.0.0.1:{free_port()}/v1"
    first = endpoint_semaphore(url, 16)
    assert endpoint_semaphore(url, 4) is first  # held: one bound for the URL
    del first
    gc.collect()
    again = endpoint_semaphore(url, 4)
    for _ in range(4):
        assert again.acquire(blocking=False)
    assert not again.acquire(blocking=False)


def test_a_request_body_with_its_image_spliced_in_is_the_json_encoder_s() -> None:
    """The page image goes into the body as bytes, not through json.dumps (milliseconds of
    GIL a request); the bytes sent must be exactly what the encoder would have made."""
    import base64
    import json
    import os

    from folio.engines.openai_wire import IMAGE_SLOT, encode_body

    def reference(body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()

    url = "data:image/png;base64," + base64.b64encode(os.urandom(30_000)).decode()
    prompt = 'One page — café, "quoted", a back\\slash, a line\nbreak, \u2028'
    for content in ([{"type": "image_url", "image_url": {"url": url}},
                     {"type": "text", "text": prompt}],
                    [{"type": "text", "text": prompt},
                     {"type": "image_url", "image_url": {"url": url, "detail": "high"}}],
                    [{"type": "image_url", "image_url": {"url": "https://example.org/p.png"}}],
                    [{"type": "image_url", "image_url": {"url": url}},
                     {"type": "text", "text": f"a prompt that names {IMAGE_SLOT}"}]):
        body = {"model": "m", "messages": [{"role": "user", "content": content}],
                "max_tokens": 768, "temperature": 0.0, "ignore_eos": True}
        assert encode_body(body) == reference(body)
        assert json.loads(encode_body(body)) == body
