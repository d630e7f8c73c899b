"""The GPU pipeline side by side with the raw engine, on the same server and pages, in one run.

One outer Prefect flow runs on a :class:`VLLMTaskRunner` that launches ``vllm serve``
(here usually ``--load-format dummy`` on the synthetic Qwen3-VL model of
../shared/device/make_synthetic_vlm.py) after the preflight check, then:

1. renders every page once with folio's page worker (for the raw phase; not timed),
2. warms the server up (a few requests),
3. **pipeline**: the real ``folio-ingest`` flow as a subflow (route=ocr: every page goes
   to the GPU once; ``ignore_eos`` + fixed ``max_tokens``; one attempt, no fallback),
   reusing the runner's server: probe, compress, page worker, OCR, parse, validate, write,
4. **raw**: the same page images sent straight to the same server with the async OpenAI
   client, ``in_flight`` at a time (what ../shared/device/bench_server.py measures),

steps 3 and 4 ``--rounds`` times in ABBA order, sampling ``/metrics`` (requests
running/waiting, cache hits) and NVML's GPU utilization throughout, and writes one JSON
with both throughputs (the median round of each), their ratio, the ratio of every round,
the queue depth, the vLLM command and this command line. vLLM's prefix and multimodal
processor caches are off by default: with them on, whichever phase runs second is served
the first one's cached work on the same pages (measured: nearly every image hit).

    # GPU box (after staging; see docs/gpu.md):
    python bench/gpu_pipeline.py --model /tmp/synthetic-vlm --load-format dummy \\
        --profile h100-80gb --pdfs .corpus-carry --min-pages 200 --max-tokens 768 \\
        --out $OUT/gpu_pipeline.json
    # here, against the fake server (smoke test of the same code path):
    .venv/bin/python bench/gpu_pipeline.py --fake --min-pages 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from folio.config import RenderSettings, RouteSettings
from folio.engines.openai_engine import encode_image
from folio.gpu.profiles import detect_gpu, load_profile
from folio.gpu.vllm_server import Endpoint, read_metrics
from folio.presets import get_preset


def select_pdfs(folder: Path, min_pages: int) -> tuple[list[Path], int]:
    """PDFs (sorted, readable ones only) until ``min_pages`` pages are reached."""
    import pypdfium2

    chosen: list[Path] = []
    pages = 0
    for pdf in sorted(folder.rglob("*.pdf")):
        try:
            doc = pypdfium2.PdfDocument(str(pdf))
            count = len(doc)
            doc.close()
        except Exception as exc:
            sys.stderr.write(f"skipping {pdf.name}: {exc}\n")
            continue
        if count == 0 or count > 400:
            continue
        chosen.append(pdf)
        pages += count
        if pages >= min_pages:
            break
    return chosen, pages


def render_all(pdfs: list[Path], render: RenderSettings, work: Path) -> list[Path]:
    """Every page as the pipeline would render it (page worker), for the raw phase."""
    from concurrent.futures import ThreadPoolExecutor

    from folio.pdf.page_worker import WorkerJob, prepare_pages, probe

    def one(i: int, pdf: Path) -> list[Path]:
        info = probe(pdf, None, 60, 4096)
        job = WorkerJob(pdf=pdf, pages=list(range(info.page_count)), out_dir=work / f"d{i}",
                        render_settings=render, route_settings=RouteSettings(mode="ocr"),
                        render="all", timeout_s=600)
        return [Path(p.image_path) for p in prepare_pages(job) if p.image_path]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        return [img for imgs in pool.map(one, range(len(pdfs)), pdfs) for img in imgs]


class PageTimeline:
    """When pages finished in the pipeline (folio.progress events), to see ramp-up and tail."""

    def __init__(self) -> None:
        self.done: list[float] = []

    def __call__(self, event: Any) -> None:
        if event.kind == "page-done":
            self.done.append(time.monotonic())

    def summary(self, t0: float, t1: float) -> dict[str, Any]:
        done = sorted(t - t0 for t in self.done)
        if not done:
            return {}
        at = {f"p{q}": round(done[min(len(done) - 1, int(q / 100 * len(done)))], 1)
              for q in (1, 10, 50, 90, 99)}
        return {"first_page_s": round(done[0], 1), "last_page_s": round(done[-1], 1),
                "after_last_page_s": round((t1 - t0) - done[-1], 1), **at}


class MetricsSampler:
    """Polls /metrics; summarises requests running/waiting per phase."""

    def __init__(self, endpoint: Endpoint, interval_s: float = 0.5) -> None:
        self.endpoint, self.interval_s = endpoint, interval_s
        self.samples: list[tuple[float, float, float]] = []
        self.gpu: list[tuple[float, float]] = []  # (time, NVML utilization %)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        utilization = _nvml_utilization()
        while not self._stop.wait(self.interval_s):
            m = read_metrics(self.endpoint.base_url)
            if m:
                self.samples.append((time.monotonic(), m.get("running", 0.0), m.get("waiting", 0.0)))
            if utilization is not None:
                self.gpu.append((time.monotonic(), utilization()))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self, start: float, end: float, full: int) -> dict[str, Any]:
        """Queue depth over [start, end]; when the first request ran, and when ``full``
        (max_num_seqs) first ran at once: the ramp-up the GPU saw."""
        window = [s for s in self.samples if start <= s[0] <= end]
        if not window:
            return {"samples": 0}
        running = [s[1] for s in window]
        waiting = [s[2] for s in window]
        gpu = [u for t, u in self.gpu if start <= t <= end]
        first = next((t - start for t, r, _ in window if r > 0), None)
        at_full = next((t - start for t, r, _ in window if r >= full), None)
        return {"samples": len(window), "running_mean": round(statistics.mean(running), 1),
                "running_max": max(running), "waiting_mean": round(statistics.mean(waiting), 1),
                "waiting_max": max(waiting),
                "first_running_s": None if first is None else round(first, 1),
                "first_full_s": None if at_full is None else round(at_full, 1),
                "gpu_utilization_mean": round(statistics.mean(gpu), 1) if gpu else None}


def _nvml_utilization() -> Any:
    """A function returning GPU 0's utilization (%), or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:
        return None


CACHES = {"prefix": "vllm:prefix_cache", "mm": "vllm:mm_cache"}


def cache_counters(base_url: str) -> dict[str, tuple[float, float]]:
    """vLLM's (queries, hits) per cache (prefix: tokens; mm: processed images)."""
    m = read_metrics(base_url)
    return {name: (m.get(f"{metric}_queries_total", 0.0), m.get(f"{metric}_hits_total", 0.0))
            for name, metric in CACHES.items()}


def hit_rates(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
              ) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in CACHES:
        queries = after[name][0] - before[name][0]
        out[name] = round((after[name][1] - before[name][1]) / queries, 3) if queries else None
    return out


async def raw_phase(endpoint: Endpoint, model: str, images: list[Path], *, prompt: str,
                    max_tokens: int, in_flight: int, max_pixels: int, image_first: bool) -> dict[str, Any]:
    """Direct concurrent requests, ``in_flight`` at a time (the async OpenAI client)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=endpoint.base_url, api_key="x", timeout=3600, max_retries=0)
    urls = [encode_image(p, max_pixels)[0] for p in images]
    sem = asyncio.Semaphore(in_flight)
    tokens = {"prompt": 0, "completion": 0}

    async def one(url: str) -> None:
        image = {"type": "image_url", "image_url": {"url": url}}
        text = {"type": "text", "text": prompt}
        async with sem:
            r = await client.chat.completions.create(
                model=model, max_tokens=max_tokens, temperature=0.0,
                extra_body={"ignore_eos": True},
                messages=[{"role": "user", "content": [image, text] if image_first else [text, image]}])
        if r.usage:
            tokens["prompt"] += r.usage.prompt_tokens
            tokens["completion"] += r.usage.completion_tokens

    started = time.perf_counter()
    await asyncio.gather(*[one(u) for u in urls])
    seconds = time.perf_counter() - started
    await client.close()
    return {"pages": len(urls), "seconds": round(seconds, 2),
            "pages_per_s": round(len(urls) / seconds, 3),
            "out_tok_per_s": round(tokens["completion"] / seconds),
            "prompt_tokens_per_page": tokens["prompt"] // max(1, len(urls)),
            "completion_tokens_per_page": tokens["completion"] // max(1, len(urls))}


def completion_tokens(out_dir: Path) -> tuple[int, int, int]:
    """(pages with an OCR attempt, prompt tokens, completion tokens) from the outputs."""
    pages = prompt = completion = 0
    for path in out_dir.rglob("*.json"):
        try:
            doc = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
        for page in doc.get("pages", []) if isinstance(doc, dict) else []:
            attempts = [a for a in page.get("attempts", []) if a.get("completion_tokens")]
            if attempts:
                pages += 1
                prompt += sum(a.get("prompt_tokens") or 0 for a in attempts)
                completion += sum(a["completion_tokens"] for a in attempts)
    return pages, prompt, completion


def kill_phase(endpoint: Any, pdfs: list[Path], pages: int, work: Path,
               settings: dict[str, Any]) -> dict[str, Any]:
    """Ingest ``pages`` pages again and SIGKILL the server's process group while requests are
    in flight: the run must complete with every page accounted for and none lost."""
    import signal

    from flows.ingest import ingest

    chosen, total = [], 0
    for pdf in pdfs:
        chosen.append(pdf)
        total += page_count(pdf)
        if total >= pages:
            break
    killed: dict[str, Any] = {}

    def killer() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            running = read_metrics(endpoint.base_url).get("vllm:num_requests_running", 0)
            if running >= 4:
                pid = getattr(endpoint, "pid", None)
                if pid:
                    os.killpg(pid, signal.SIGKILL)
                    killed.update(pid=pid, running=running, at=time.monotonic())
                return
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    t0 = time.monotonic()
    thread.start()
    report = ingest(sources=[str(p) for p in chosen], out=str(work / "out-kill"), engine="vllm",
                    route="ocr", reprocess=True, settings=settings)
    thread.join(timeout=1)
    totals = report["totals"]
    return {"pages": totals["pages"], "pages_ok": totals["pages_ok"],
            "pages_quarantined": totals["pages_quarantined"],
            "lost": totals["pages"] - totals["pages_ok"] - totals["pages_fallback"]
                    - totals["pages_quarantined"],
            "killed_pid": killed.get("pid"), "requests_running_when_killed": killed.get("running"),
            "seconds": round(time.monotonic() - t0, 1),
            "server_generation": getattr(endpoint, "generation", None)}


def _median_phase(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """The phase with the median throughput (the lower middle one for an even count)."""
    ordered = sorted(phases, key=lambda p: p["pages_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def page_count(pdf: Path) -> int:
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        return len(doc)
    finally:
        doc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model folder for vllm serve (synthetic: make_synthetic_vlm.py)")
    ap.add_argument("--load-format", help="dummy: random weights")
    ap.add_argument("--profile", default="auto")
    ap.add_argument("--preset", default="chandra", help="prompt + parser (chandra = Qwen3-VL-8B family)")
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"), help="folder of PDFs")
    ap.add_argument("--min-pages", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--longest-side", type=int, default=1280, help="render budget (reference: 1024x1280)")
    ap.add_argument("--max-pixels", type=int, default=1024 * 1280)
    ap.add_argument("--in-flight", type=int, help="requests in flight (default: the profile's)")
    ap.add_argument("--documents", type=int, default=64, help="documents in flight in the pipeline")
    ap.add_argument("--render-workers", type=int, default=8, help="page workers per document")
    ap.add_argument("--max-model-len", type=int)
    ap.add_argument("--vllm-exe", help="how to run vLLM's CLI (default: vllm, else python -m ...)")
    ap.add_argument("--no-pixel-cap", action="store_true", help="no --mm-processor-kwargs")
    ap.add_argument("--full", action="store_true", help="keep the vector store (default: none)")
    ap.add_argument("--caches", choices=("off", "on"), default="off",
                    help="vLLM's prefix cache and multimodal processor cache (off: a phase would "
                         "otherwise be served the cached prefills and processed images of the same "
                         "pages sent by the phase before it; real ingestion never repeats a page)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="pipeline/raw pairs, in ABBA order (pipeline, raw, raw, pipeline, ...)")
    ap.add_argument("--compress", action="store_true",
                    help="Ghostscript compression (off by default: the GPU image has no gs)")
    ap.add_argument("--skip-raw", action="store_true")
    ap.add_argument("--kill-pages", type=int, default=0,
                    help="then ingest this many pages again and SIGKILL the server mid-run")
    ap.add_argument("--fake", action="store_true", help="the fake server instead of vllm (smoke test)")
    ap.add_argument("--fake-delay", type=float, default=0.05, help="fake server seconds per request")
    ap.add_argument("--work", help="scratch folder (default: a temp dir)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpu_pipeline.json"))
    args = ap.parse_args()

    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.ingest import THREADS_PER_DOCUMENT, ingest
    from tasks.vllm_runner import VLLMTaskRunner, current_endpoint

    work = Path(args.work or tempfile.mkdtemp(prefix="folio-gpu-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    profile = load_profile("cpu" if args.fake and args.profile == "auto" else args.profile)
    preset = get_preset(args.preset)
    in_flight = args.in_flight or (16 if args.fake else profile.in_flight)
    render = RenderSettings(longest_side_px=args.longest_side, max_pixels=args.max_pixels)
    pdfs, pages = select_pdfs(Path(args.pdfs), args.min_pages)
    if not pdfs:
        raise SystemExit(f"no readable PDFs under {args.pdfs}")
    runner_options: dict[str, Any] = {
        "profile": profile.name, "preset": preset.name, "in_flight": in_flight, "max_tokens": args.max_tokens,
        "log_dir": str(work), "max_model_len": args.max_model_len}
    if args.fake:
        runner_options["server_command"] = [sys.executable, str(ROOT / "tests" / "openai_fake.py"),
                                            "--port", "{port}", "--output", "chandra1_page.html",
                                            "--delay", str(args.fake_delay)]
        runner_options["health_interval_s"] = 0.5
    else:
        if not args.model:
            raise SystemExit("--model is required (or --fake)")
        exe = args.vllm_exe.split() if args.vllm_exe else (
            ["vllm"] if shutil.which("vllm") else [sys.executable, "-m", "vllm.entrypoints.cli.main"])
        runner_options.update(model=args.model, load_format=args.load_format, executable=exe,
                              pixel_cap=not args.no_pixel_cap, startup_timeout_s=1200.0,
                              extra_args=["--no-enable-prefix-caching", "--mm-processor-cache-gb", "0"]
                              if args.caches == "off" else [])
    runner = VLLMTaskRunner(max_workers=8, **runner_options)
    settings = {
        "ocr.preset": preset.name, "ocr.max_tokens": args.max_tokens, "ocr.ignore_eos": True,
        "ocr.max_attempts": 1, "ocr.fallback": [], "ocr.in_flight": in_flight,
        "ocr.profile": profile.name, "render.longest_side_px": args.longest_side,
        "render.max_pixels": args.max_pixels, "limits.document_concurrency": args.documents,
        "limits.render_workers": args.render_workers,
        "limits.page_timeout_s": 3600.0, "limits.document_timeout_s": 7200.0,
    }
    if not args.full:
        settings["store.kind"] = "none"
    if not args.compress:
        settings["compress"] = False
    result: dict[str, Any] = {
        "command": "python bench/gpu_pipeline.py " + " ".join(sys.argv[1:]),
        "device": (detect_gpu().model_dump() if detect_gpu() else None),
        "profile": profile.name, "preset": preset.name, "fake": args.fake,
        "documents": len(pdfs), "pages_in_documents": pages,
        "max_tokens": args.max_tokens, "in_flight": in_flight, "caches": args.caches,
        "rounds": args.rounds,
        "max_num_seqs": profile.vllm.max_num_seqs, "render": render.model_dump(),
        "settings": settings,
    }

    @flow(name="gpu-pipeline-benchmark", task_runner=runner, log_prints=False)
    def benchmark() -> dict[str, Any]:
        endpoint = current_endpoint()
        assert endpoint is not None
        out: dict[str, Any] = {"server_base_url": endpoint.base_url,
                               "server_command": getattr(endpoint, "command", None),
                               "server_log": str(getattr(endpoint, "log_path", ""))}
        model = endpoint.served_model_name or args.model or "fake-ocr"
        t = time.perf_counter()
        images = render_all(pdfs, render, work / "raw-pages")
        out["raw_render_seconds"] = round(time.perf_counter() - t, 2)
        warm = images[: min(4, len(images))]
        asyncio.run(raw_phase(endpoint, model, warm, prompt=preset.prompt, max_tokens=16,
                              in_flight=4, max_pixels=args.max_pixels, image_first=preset.image_first))
        full = min(in_flight, profile.vllm.max_num_seqs or in_flight)
        sub = ingest.with_options(task_runner=ThreadPoolTaskRunner(
            max_workers=THREADS_PER_DOCUMENT * args.documents))

        def pipeline(sampler: MetricsSampler, n: int) -> dict[str, Any]:
            from folio import progress

            timeline = PageTimeline()
            progress.add_listener(timeline)
            caches = cache_counters(endpoint.base_url)
            t0 = time.monotonic()
            try:
                report = sub(sources=[str(p) for p in pdfs], out=str(work / f"out-{n}"), engine="vllm",
                             route="ocr", reprocess=True, settings=settings)
            finally:
                progress.remove_listener(timeline)
            t1 = time.monotonic()
            ocr_pages, prompt_tok, completion_tok = completion_tokens(work / f"out-{n}")
            seconds = t1 - t0
            return {
                "pages": report["totals"]["pages"], "pages_ocr": ocr_pages,
                "pages_ok": report["totals"]["pages_ok"],
                "pages_quarantined": report["totals"]["pages_quarantined"],
                "seconds": round(seconds, 2), "pages_per_s": round(ocr_pages / seconds, 3),
                "out_tok_per_s": round(completion_tok / seconds),
                "prompt_tokens_per_page": prompt_tok // max(1, ocr_pages),
                "completion_tokens_per_page": completion_tok // max(1, ocr_pages),
                "queue": sampler.summary(t0, t1, full),
                "timeline": timeline.summary(t0, t1),
                "cache_hit_rates": hit_rates(caches, cache_counters(endpoint.base_url)),
            }

        def raw(sampler: MetricsSampler) -> dict[str, Any]:
            caches = cache_counters(endpoint.base_url)
            t2 = time.monotonic()
            phase = asyncio.run(raw_phase(
                endpoint, model, images, prompt=preset.prompt, max_tokens=args.max_tokens,
                in_flight=in_flight, max_pixels=args.max_pixels, image_first=preset.image_first))
            phase["queue"] = sampler.summary(t2, time.monotonic(), full)
            phase["cache_hit_rates"] = hit_rates(caches, cache_counters(endpoint.base_url))
            return phase

        rounds: list[dict[str, Any]] = []
        with MetricsSampler(endpoint) as sampler:
            for n in range(args.rounds):
                one: dict[str, Any] = {}
                order = ("pipeline", "raw") if n % 2 == 0 else ("raw", "pipeline")
                for phase in order:
                    if phase == "pipeline":
                        one["pipeline"] = pipeline(sampler, n)
                    elif not args.skip_raw:
                        one["raw"] = raw(sampler)
                one["order"] = [p for p in order if p in one]
                rounds.append(one)
                Path(args.out + ".rounds").write_text(json.dumps(rounds, indent=1))  # if time runs out
            if args.kill_pages:
                kill_pdfs, _ = select_pdfs(Path(args.pdfs), args.kill_pages)  # not just --min-pages
                out["kill"] = kill_phase(endpoint, kill_pdfs, args.kill_pages, work, settings)
        out["rounds"] = rounds
        out["pipeline"] = _median_phase([r["pipeline"] for r in rounds])
        if not args.skip_raw:
            out["raw"] = _median_phase([r["raw"] for r in rounds])
        out["restarts"] = getattr(endpoint, "restarts", 0)
        return out

    t = time.perf_counter()
    try:
        result.update(benchmark())
    finally:
        result["wall_seconds"] = round(time.perf_counter() - t, 1)
    pipe, raw = result.get("pipeline"), result.get("raw")
    if pipe and raw:
        result["pipeline_over_raw"] = round(pipe["pages_per_s"] / raw["pages_per_s"], 3)
        result["round_ratios"] = [round(r["pipeline"]["pages_per_s"] / r["raw"]["pages_per_s"], 3)
                                  for r in result["rounds"] if "raw" in r]
        # the summary keys of the issue, on top
        result = {
            "gpu": (result.get("device") or {}).get("name", "fake" if args.fake else "unknown"),
            "model": args.model or "fake", "pages": pipe["pages_ocr"],
            "output_tokens_per_page": pipe["completion_tokens_per_page"],
            "pipeline_pages_per_s": pipe["pages_per_s"], "engine_pages_per_s": raw["pages_per_s"],
            "ratio": result["pipeline_over_raw"], **result}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str) + "\n")
    sys.stdout.write(json.dumps({k: result.get(k) for k in ("pipeline", "raw", "pipeline_over_raw", "round_ratios")},
                                indent=1) + "\n")


if __name__ == "__main__":
    main()
