"""The page scheduler against the OpenAI-protocol test server (CI has no GPU): pages of
many documents through one engine budget, fairness to short documents, bounded memory,
a dying server, nothing lost."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from folio import progress
from folio.gpu.vllm_server import VLLMServer, register_endpoint, unregister_endpoint
from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.pipeline import (
    PageScheduler,
    SchedulerLimits,
    Services,
    process_documents,
    start_document,
)
from folio.samples import report_pages, write_long_pdf, write_scanned_pdf, write_text_pdf
from folio.settings.config import PipelineConfig
from tests.openai_fake import FakeServer

FAKE = str(Path(__file__).parent / "openai_fake.py")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One 48-page document first, then six short ones (file names sort in that order)."""
    root = tmp_path_factory.mktemp("sched")
    files = {"a-long": write_long_pdf(root / "a-long.pdf", 48)}
    for n in range(6):
        files[f"b-short{n}"] = write_text_pdf(root / f"b-short{n}.pdf",
                                              report_pages(seed=20 + n, n=1 + n % 2))
    return files


def gpu_config(tmp_path: Path, endpoint: str, **limits: Any) -> PipelineConfig:
    """Every page to the engine (route ocr), outputs only, small batches and budgets."""
    config = PipelineConfig.model_validate({
        "ocr": {"engine": "openai", "endpoint": endpoint, "preset": "generic", "in_flight": 4,
                "fallback": [], "max_attempts": 1, "request_retries": 1},
        "route": {"mode": "ocr"}, "store": {"kind": "none"}, "compress": False,
        "validation": {"data_docs": False},
        "limits": {"pages_per_worker": 4, "render_workers": 2, **limits},
        "work_dir": str(tmp_path / "work"),
    })
    return config


class PageLog:
    """page-done events as (time, source), collected from the scheduler's threads."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def __call__(self, event: progress.ProgressEvent) -> None:
        if event.kind == "page-done":
            with self._lock:
                self.events.append((time.monotonic(), event.source))

    def __enter__(self) -> PageLog:
        progress.add_listener(self)
        return self

    def __exit__(self, *exc: object) -> None:
        progress.remove_listener(self)


def one_page_pdfs(root: Path, *, seed: int, count: int) -> list[Path]:
    """``count`` short born-digital documents, one page each."""
    root.mkdir()
    return [write_text_pdf(root / f"d{n}.pdf", report_pages(seed=seed + n, n=1))
            for n in range(count)]


def run_scheduler(config: PipelineConfig, out: Path, sources: list[Path]
                  ) -> tuple[list[tuple[float, DocumentResult]], PageScheduler]:
    services = Services(config, str(out))
    scheduler = PageScheduler(services, prepare=lambda ref: start_document(ref, services))
    refs = discover([str(p) for p in sources], config.s3)
    finished: list[tuple[float, DocumentResult]] = []
    try:
        for doc in scheduler.run(refs):
            finished.append((time.monotonic(), doc))
    finally:
        services.close()
    return finished, scheduler


def test_long_document_first_does_not_hold_back_the_short_ones(
    corpus: dict[str, Path], tmp_path: Path
) -> None:
    long_doc = corpus["a-long"]
    with FakeServer(delay_s=0.05) as fake, PageLog() as pages:
        config = gpu_config(tmp_path, fake.url)
        finished, scheduler = run_scheduler(config, tmp_path / "out", list(corpus.values()))
    by_source = {Path(d.source).name: (t, d) for t, d in finished}
    assert len(by_source) == 7
    long_done_at, long_result = by_source[long_doc.name]
    assert long_result.page_count == 48 and long_result.pages_ok == 48
    short = [(t, d) for name, (t, d) in by_source.items() if name != long_doc.name]
    assert all(d.pages_ok == d.page_count for _, d in short)
    # every short document ended while the long one still had most of its pages to go
    long_pages_done = [t for t, src in pages.events if src == str(long_doc)]
    last_short = max(t for t, _ in short)
    assert sum(1 for t in long_pages_done if t <= last_short) < 24, "short ones waited"
    assert last_short < long_done_at
    # and the long document's first pages reached the engine before its last were rendered
    first_long_page = min(long_pages_done)
    assert first_long_page < long_done_at - 0.5
    assert scheduler.peak_in_ladder <= scheduler.limits.ocr_threads


def test_requests_in_flight_never_exceed_the_budget(corpus: dict[str, Path], tmp_path: Path) -> None:
    with FakeServer(delay_s=0.05) as fake:
        config = gpu_config(tmp_path, fake.url)
        finished, scheduler = run_scheduler(config, tmp_path / "out", list(corpus.values()))
        assert fake.state.requests == sum(d.page_count for _, d in finished) == 48 + 9
        assert 0 < fake.state.max_in_flight <= config.ocr.in_flight
    assert scheduler.peak_in_ladder <= scheduler.limits.ocr_threads


def test_a_page_being_parsed_does_not_hold_a_server_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client-side work on a page (here a parse 0.4x as long as the request itself)
    happens outside the request's slot: the server keeps the whole budget busy meanwhile.
    With one page thread per slot it held 4 x 1.5 / 2.1 = 2.9 of 4 on average. And
    however many answers arrive together, at most ``answer_gate.WORKERS`` are parsed at
    once, so the threads sending the next pages are not queued behind them for the GIL."""
    from folio.page import answer_gate
    from folio.settings.presets import ModelPreset

    real_parse = ModelPreset.parse
    parsing = {"now": 0, "most": 0}
    lock = threading.Lock()

    def slow_parse(self: ModelPreset, *args: Any, **kwargs: Any) -> Any:
        with lock:
            parsing["now"] += 1
            parsing["most"] = max(parsing["most"], parsing["now"])
        try:
            time.sleep(0.6)  # the GIL is free meanwhile, as it is not for a real parse
            return real_parse(self, *args, **kwargs)
        finally:
            with lock:
                parsing["now"] -= 1

    monkeypatch.setattr(ModelPreset, "parse", slow_parse)
    doc = write_long_pdf(tmp_path / "long.pdf", 16)
    with FakeServer(delay_s=1.5) as fake:
        config = gpu_config(tmp_path, fake.url)
        finished, scheduler = run_scheduler(config, tmp_path / "out", [doc])
        state = fake.state
        mean_in_flight = state.busy_s / state.span_s
        assert state.requests == 16 and 0 < state.max_in_flight <= config.ocr.in_flight
    assert finished[0][1].pages_ok == 16
    assert mean_in_flight >= 3.3, f"the server held {mean_in_flight:.2f} of 4 on average"
    assert scheduler.limits.ocr_threads > scheduler.limits.ocr_concurrency == 4
    assert parsing["most"] == answer_gate.WORKERS  # four answers came together, two parsed
    # the run's timeline counts the requests at the server (what a GPU run compares with
    # the server's own count): never over the budget, and near it while pages wait. Not
    # "equal to it at some sample": the control loop samples when an answer wakes it, the
    # moment that answer's slot is free, so a run can see 3 of 4 at every sample (one in
    # twenty under a full suite's load)
    at_server = [s.at_server for s in scheduler.timeline if s.at_server is not None]
    assert at_server and 3 <= max(at_server) <= 4, at_server


def test_prepared_image_bytes_stay_under_the_cap(corpus: dict[str, Path], tmp_path: Path) -> None:
    """A slow engine and a 1 MiB budget: rendering pauses instead of piling up images
    (sampled on disk, where the page workers write them)."""
    work = tmp_path / "work"
    peak = {"bytes": 0, "largest": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            sizes = []
            try:  # folders come and go under the walk: a document's is removed when it ends
                pngs = list(work.rglob("*.png"))
            except OSError:
                pngs = []
            for png in pngs:
                try:
                    sizes.append(png.stat().st_size)
                except OSError:
                    pass
            peak["bytes"] = max(peak["bytes"], sum(sizes))
            peak["largest"] = max([peak["largest"], *sizes])
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    with FakeServer(delay_s=0.1) as fake:
        config = gpu_config(tmp_path, fake.url, prepared_image_mb=1)
        sampler.start()
        try:
            finished, scheduler = run_scheduler(config, tmp_path / "out", [corpus["a-long"]])
        finally:
            stop.set()
            sampler.join()
    cap = 1024 * 1024
    assert finished[0][1].pages_ok == 48
    assert peak["largest"] > 0 and peak["bytes"] > 0
    assert scheduler.peak_image_bytes <= cap + peak["largest"], scheduler.peak_image_bytes
    # on disk the child may be one batch ahead of what the parent has read
    assert peak["bytes"] <= cap + config.limits.pages_per_worker * peak["largest"], peak
    assert not list(work.rglob("*.png")), "every image discarded"


def test_a_dying_server_loses_no_page(corpus: dict[str, Path], tmp_path: Path) -> None:
    """The supervised server exits hard mid-run: the requests in flight are sent again
    after its restart; every page of every document ends ok, exactly once."""
    marker = tmp_path / "died"
    server = VLLMServer([sys.executable, FAKE, "--port", "{port}", "--delay", "0.05",
                         "--die-on", "10", "--die-marker", str(marker)],
                        in_flight=4, health_interval_s=0.1)
    server.start()
    register_endpoint(server)
    try:
        config = gpu_config(tmp_path, "unused")
        config.ocr.engine, config.ocr.endpoint = "vllm", None
        finished, _ = run_scheduler(config, tmp_path / "out", list(corpus.values()))
    finally:
        unregister_endpoint(server)
        server.stop()
    assert marker.exists() and server.restarts == 1
    docs = [d for _, d in finished]
    assert len(docs) == 7
    for doc in docs:
        assert sorted(p.index for p in doc.pages) == list(range(doc.page_count))
        assert doc.pages_ok == doc.page_count, [p.reason for p in doc.pages if p.reason]


def test_cpu_path_loads_documents_in_batches(tmp_path: Path, corpus: dict[str, Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The Prefect-free path end to end with the default vector store: documents come out
    validated and loaded, their vectors written many documents per write.

    A document waits ``batch_wait_s`` for company at the vector store. At 2 s, on a
    2-core machine running the suite's other workers, the seven documents once came out
    of validation more than 2 s apart, and each was written alone (in one full run of
    six). So the wait here is 6 s, with a finishing thread for every document, so that
    none queues for a thread while the others wait at the store. Once the scheduler has
    handed over its last document the batches stop waiting, as in the flow."""
    handed_over = Services.last_document_handed_over
    calls: list[int] = []

    def record(self: Services) -> None:
        calls.append(1)
        handed_over(self)

    monkeypatch.setattr(Services, "last_document_handed_over", record)
    config = PipelineConfig.model_validate({
        "route": {"mode": "text-layer"}, "compress": False, "work_dir": str(tmp_path / "w"),
        "validation": {"data_docs": False}, "store": {"batch_wait_s": 6.0}})
    services = Services(config, str(tmp_path / "out"))
    refs = discover([str(p) for p in corpus.values()], config.s3)
    try:
        docs = list(process_documents(refs, services, finish_workers=len(refs)))
        batches = list(services.vectors().batch_sizes)
        store = services.store()
        stored = {d.doc_id: store.count(d.doc_id) for d in docs}
    finally:
        services.close()
    assert len(docs) == 7 and all(d.outcome is DocumentOutcome.OK for d in docs)
    assert all(p.outcome is PageOutcome.OK for d in docs for p in d.pages)
    assert sum(batches) == 7 and len(batches) < 7, batches
    assert calls == [1]
    assert stored == {d.doc_id: d.chunks for d in docs} and all(stored.values())


def test_limits_follow_the_configuration() -> None:
    gpu = PipelineConfig.model_validate({"ocr": {"engine": "vllm", "in_flight": 64},
                                         "limits": {"render_workers": 6, "prepared_image_mb": 8}})
    limits = SchedulerLimits.from_config(gpu)
    assert limits.ocr_concurrency == 64 and limits.render_workers == limits.render_burst == 6
    assert limits.ocr_threads == 64 + 16  # pages encoded or parsed outside a request
    for extra in (0, 5):
        set_extra = gpu.model_copy(update={"limits": gpu.limits.model_copy(
            update={"ocr_extra_pages": extra})})
        assert SchedulerLimits.from_config(set_extra).ocr_threads == 64 + extra
    assert limits.image_budget_bytes == 8 * 1024 * 1024 and limits.watermark_pages >= 128
    cpu = SchedulerLimits.from_config(PipelineConfig())
    assert cpu.ocr_concurrency == cpu.ocr_threads == PipelineConfig().limits.page_concurrency
    assert cpu.prepare_burst == 2 * cpu.prepare_workers


def test_text_layer_pages_never_queue_behind_engine_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scanned document is admitted first and keeps the (slow, narrow) engine busy; a
    born-digital one behind it ends on its trusted text layer at once, without a single
    request, instead of waiting for ladder slots behind the scanned pages.

    The engine holds every request until the born-digital pages are done (a minute at
    most), so the test does not race the machine's load: text pages that queued behind
    the engine would end only after that minute, behind scanned pages."""
    root = tmp_path / "pdfs"
    root.mkdir()
    scanned = write_scanned_pdf(root / "a-scanned.pdf",
                                write_long_pdf(tmp_path / "long.pdf", 8), dpi=100)
    digital = write_text_pdf(root / "b-digital.pdf", report_pages(seed=5, n=2))
    done: list[str] = []  # documents' names in the order their pages ended
    lock = threading.Lock()
    release_engine = threading.Event()
    page_done = Services.page_done

    def record(self: Services, doc: DocumentResult, page: Any) -> None:
        with lock:
            done.append(Path(doc.source).name)
            if done.count("b-digital.pdf") == 2:
                release_engine.set()
        page_done(self, doc, page)

    monkeypatch.setattr(Services, "page_done", record)
    with FakeServer(delay_s=0.4, hold=release_engine) as fake:
        config = gpu_config(tmp_path, fake.url, document_concurrency=1)
        config.route.mode = "auto"
        config.ocr.in_flight = 1
        finished, scheduler = run_scheduler(config, tmp_path / "out", [scanned, digital])
        requests = fake.state.requests
    by_name = {Path(d.source).name: (t, d) for t, d in finished}
    scanned_at, scanned_doc = by_name["a-scanned.pdf"]
    digital_at, digital_doc = by_name["b-digital.pdf"]
    assert scanned_doc.pages_ok == 8 and digital_doc.pages_ok == 2
    assert {p.route for p in digital_doc.pages} == {"text-layer"}
    assert requests == 8  # only the scanned pages went to the engine
    # both text pages ended while the engine held the scanned ones, so before any of them
    assert done[:2] == ["b-digital.pdf"] * 2, done
    assert digital_at < scanned_at
    # the run's queue timeline: about a sample a second, within the budgets
    timeline = scheduler.timeline
    assert len(timeline) >= 3 and timeline == sorted(timeline, key=lambda q: q.t)
    assert all(q.in_ladder <= scheduler.limits.ocr_threads and q.documents <= 2
               for q in timeline)
    assert any(q.in_ladder >= 1 for q in timeline)


def test_a_page_holding_back_done_pages_goes_to_the_engine_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mixed document (a scanned first page, then text pages) arrives while a scanned
    one's pages wait for the one-request engine: its engine page, with the later pages
    already done behind it, is sent before the waiting scanned pages.

    The order is made, not hoped for (a loaded machine reorders threads): the mixed
    document is prepared only once the scanned one's first batch waits for the engine,
    and the engine holds its first page until the mixed one's text pages are done. First
    come, first served would then end four scanned pages before the engine page."""
    import pypdfium2 as pdfium

    root = tmp_path / "pdfs"
    root.mkdir()
    text = write_long_pdf(tmp_path / "text.pdf", 6)
    scanned = write_scanned_pdf(root / "a-scanned.pdf", text, dpi=100)
    mixed = pdfium.PdfDocument.new()
    mixed.import_pages(pdfium.PdfDocument(str(scanned)), [0])
    mixed.import_pages(pdfium.PdfDocument(str(text)), [1, 2, 3, 4, 5])
    mixed.save(str(root / "b-mixed.pdf"))
    done: list[tuple[str, int]] = []  # (document, page) in the order pages ended
    arrived: list[tuple[str, int]] = []  # pages in the order they were rendered
    lock = threading.Lock()
    first_batch_waits, release_engine = threading.Event(), threading.Event()

    def record(self: Services, doc: DocumentResult, page: Any) -> None:
        with lock:
            done.append((Path(doc.source).name, page.index))
            if sum(1 for name, _ in done if name == "b-mixed.pdf") == 5:
                release_engine.set()  # the mixed document's five text pages are done

    receive = PageScheduler._receive

    def receive_logged(self: PageScheduler, doc: Any, page: Any, reserved: int) -> None:
        receive(self, doc, page, reserved)
        with lock:
            arrived.append((Path(doc.source).name, page.index))
            if arrived.count(("a-scanned.pdf", 3)):
                first_batch_waits.set()

    monkeypatch.setattr(Services, "page_done", record)
    monkeypatch.setattr(PageScheduler, "_receive", receive_logged)
    with FakeServer(delay_s=0.2, hold=release_engine) as fake:
        # one request and one page thread, so the pick order is the order pages are sent;
        # one page-worker child at a time, so each document's batches arrive in order
        config = gpu_config(tmp_path, fake.url, ocr_extra_pages=0, render_workers=1,
                            render_burst_workers=1)
        config.route.mode = "auto"
        config.ocr.in_flight = 1
        services = Services(config, str(tmp_path / "out"))

        def prepare(ref: Any) -> Any:
            if ref.uri.endswith("b-mixed.pdf"):
                assert first_batch_waits.wait(timeout=60)
            return start_document(ref, services)

        scheduler = PageScheduler(services, prepare=prepare)
        try:
            finished = list(scheduler.run(discover([str(scanned), str(root / "b-mixed.pdf")],
                                                   config.s3)))
        finally:
            services.close()
        assert fake.state.requests == 7
    mixed_doc = next(d for d in finished if d.source.endswith("b-mixed.pdf"))
    assert mixed_doc.pages_ok == 6 and mixed_doc.pages[0].route == "ocr"
    # the setup held: three scanned pages were waiting when the engine page arrived
    engine_arrived = arrived.index(("b-mixed.pdf", 0))
    assert {("a-scanned.pdf", i) for i in range(4)} <= set(arrived[:engine_arrived]), arrived
    # only the page already at the engine ended before it
    engine_page = done.index(("b-mixed.pdf", 0))
    assert [name for name, _ in done[:engine_page] if name == "a-scanned.pdf"] == [
        "a-scanned.pdf"], done


def test_rendering_widens_only_while_the_engine_is_short_of_pages(
    corpus: dict[str, Path], tmp_path: Path
) -> None:
    """With room in the engine and nothing waiting, more page batches render at once
    than ``render_workers`` (up to the burst); an engine that already holds its budget
    gets no more than ``render_workers``, so rendering does not crowd the machine.

    With one request in flight the engine is short of pages for an instant whenever its
    one page comes back before the next batch has rendered a page: a second batch may
    start then (seen on a loaded 2-core host), never the whole burst."""
    sources = list(corpus.values())
    peaks = {}
    for in_flight in (32, 1):
        with FakeServer(delay_s=0.05) as fake:
            config = gpu_config(tmp_path / str(in_flight), fake.url, render_workers=1,
                                render_burst_workers=3)
            config.ocr.in_flight = in_flight
            finished, scheduler = run_scheduler(config, tmp_path / f"out{in_flight}", sources)
        assert len(finished) == 7 and all(d.pages_ok == d.page_count for _, d in finished)
        peaks[in_flight] = scheduler.peak_batches
    assert peaks[32] == 3 and peaks[1] < 3, peaks
