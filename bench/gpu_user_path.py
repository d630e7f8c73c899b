"""folio on a GPU as users run it, against the raw engine on the same pages.

The pipeline phase is ``folio ingest --engine vllm --model M --preset P`` itself (the
CLI's own code path, in this process so pages and GPU utilization can be timed), with the
defaults a user gets: route auto, Ghostscript compression on, validation, outputs,
chunks, embeddings and the LanceDB vector store, the hardware profile picked from the
GPU. The benchmark changes only what synthetic weights need and what keeps phases
independent, each listed in the result with its reason (:data:`SETTINGS`).

The raw phase sends the same pages (those the route sends to the engine, rendered by
folio's page worker exactly as the pipeline renders them) straight to a vLLM server of
the same configuration with the async OpenAI client, the profile's requests in flight.

Documents: the PDFs under ``--pdfs`` repeated as byte-distinct copies (a PDF comment after
``%%EOF``, so no two have the same hash) until ``--min-pages`` and ``--min-docs``; round
1 ingests the longest documents first, round 2 last.

Steps (each its own command, so a 10-minute limit per command fits; state in ``--work``;
servers are the host's shared servers, kept alive across commands by ``--owner-pid``):

    python bench/gpu_user_path.py corpus --pdfs .corpus-carry --work /tmp/gub
    python bench/gpu_user_path.py pipeline --gpu 0 --round 1 --work /tmp/gub --model M
    python bench/gpu_user_path.py raw --gpu 1 --round 1 --work /tmp/gub --model M
    python bench/gpu_user_path.py deployment --gpu 0 --work /tmp/gub --model M
    python bench/gpu_user_path.py live --gpu 0 --work /tmp/gub --model M
    python bench/gpu_user_path.py report --work /tmp/gub --out bench/results

With two GPUs, a round's pipeline and raw phases run at once on different GPUs (one
server each, the same configuration) and the next round swaps them; with one GPU they
run one after the other on the same server. Here, against the fake server:

    .venv/bin/python bench/gpu_user_path.py smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# imported here, not in the sampler's thread: importing beside Prefect's own imports in
# another thread can deadlock on a module lock
import httpx

from folio.gpu.server_probe import read_metrics

#: token counts of real answers: olmOCR 2's answers to its bench pages
#: (../shared/corpus/olmocr/bench_answers, front matter put back as it answers), UTF-8 bytes
#: / 4 rounded up (no Qwen tokenizer here; about 4 bytes a token for English), then 768
#: (the fixed count of earlier runs); made by bench/answer_lengths.py
ANSWER_LENGTHS = [28, 85, 1199, 394, 337, 929, 877, 879, 51, 768]

#: every setting the benchmark gives beyond the user's defaults, and why
SETTINGS: dict[str, tuple[Any, str]] = {
    "ocr.ignore_eos": (True, "synthetic weights emit noise: generate a fixed token count"),
    "ocr.max_tokens": (768, "the token count of pages not given one below"),
    "ocr.ignore_eos_lengths": (ANSWER_LENGTHS, "each page's fixed token count, picked by a hash "
                               "of its image from the lengths of olmOCR's published answers "
                               "for its bench pages (bench_answers, front matter included; "
                               "tokens estimated as UTF-8 bytes / 4) and 768 as before, so "
                               "short and long answers are both in the figure"),
    "ocr.max_attempts": (1, "noise would fail the output checks and be retried: one attempt"),
    "validation.max_repeat_ratio": (1.0, "random weights decode greedily into loops, which "
                                   "folio's loop check refuses (on the H200 at 774392a, 866 "
                                   "of 1062 pages went to the fallback engine; each phase's "
                                   "answers.repeat_ratio shows the loops): the check still "
                                   "runs on every page, in the ladder and in the validation "
                                   "suite, and refuses none"),
    "server.load_format": ("dummy", "random weights (no model weights can be downloaded)"),
    "server.extra_args": (["--no-enable-prefix-caching", "--mm-processor-cache-gb", "0"],
                          "caches off: the phase run second would be served the first one's "
                          "cached prefills and images of the same pages"),
}


#: what the benchmark sets around folio, not in it, and why (in every result too)
ENVIRONMENT: dict[str, str] = {
    "synthetic tokenizer": "bench/synthetic_text_vocab.py gives the synthetic model's tokens "
                           "texts of prose (about 4.6 characters a token), so folio parses, "
                           "checks, chunks and embeds about as much text a page as an OCR "
                           "model's answer has; phases measured before it (their measured_at, "
                           "up to 46e8b1e) got about 12,500 characters of <|filler_N|> marks "
                           "a page (1.75x the flow's CPU a page, "
                           "bench/results/output_text_cost.json), and the phases at 774392a "
                           "and 1dabbb9 8,448 (marked tokens, whose marks vLLM kept)",
    "CUDA_VISIBLE_DEVICES": "the phase's GPU: with two, pipeline and raw engine run at once on "
                            "different GPUs; with one, one after the other on one server",
    "FOLIO_SERVER__STATE_DIR": "one shared-server state folder per GPU, so each phase's runs "
                               "attach to the server of its own GPU",
    "FOLIO_SERVER_OWNER_PID": "a process that outlives each 10-minute device command, so the "
                              "servers started by one command serve the next ones (a user's "
                              "worker plays that part)",
    "PREFECT_HOME": "the CLI's Prefect state under the benchmark's work folder",
    "PREFECT_UI_ENABLED": "false for the Prefect servers the phases start (the CLI's local "
                          "server, the deployment phase's): Prefect 3.9.1's UI needs a newer "
                          "FastAPI than vLLM 0.26 is staged with; the API is the same",
    "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true for the deployment phase (Prefect's default "
                                          "is false); the benchmark reads only the run's "
                                          "state and times",
}


def user_settings() -> dict[str, Any]:
    return {key: value for key, (value, _) in SETTINGS.items()}


# --- documents ------------------------------------------------------------------------------


def build_corpus(pdfs: Path, work: Path, min_pages: int, min_docs: int) -> dict[str, Any]:
    """Byte-distinct copies of the PDFs until both minimums are met; pages per document."""
    import pypdfium2

    originals: list[tuple[Path, int]] = []
    for pdf in sorted(pdfs.rglob("*.pdf")):
        try:
            doc = pypdfium2.PdfDocument(str(pdf))
            count = len(doc)
            doc.close()
        except Exception as exc:
            print(f"skipping {pdf.name}: {exc}", file=sys.stderr)
            continue
        if count:
            originals.append((pdf, count))
    if not originals:
        raise SystemExit(f"no readable PDFs under {pdfs}")
    docs_dir = work / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    docs: list[dict[str, Any]] = []
    copy = 0
    while sum(d["pages"] for d in docs) < min_pages or len(docs) < min_docs:
        for pdf, count in originals:
            target = docs_dir / f"c{copy:02d}-{pdf.name}"
            target.write_bytes(pdf.read_bytes() + f"\n% folio benchmark copy {copy}\n".encode())
            docs.append({"path": str(target), "pages": count})
        copy += 1
    meta = {"documents": docs, "copies": copy, "originals": len(originals),
            "pages": sum(d["pages"] for d in docs)}
    (work / "corpus.json").write_text(json.dumps(meta, indent=1))
    return meta


def round_sources(work: Path, round_no: int) -> Path:
    """A folder of hard links to the documents, named so that sorted order (folio's
    discovery order) is longest first in odd rounds and longest last in even ones."""
    meta = json.loads((work / "corpus.json").read_text())
    docs = sorted(meta["documents"], key=lambda d: (-d["pages"], d["path"]))
    if round_no % 2 == 0:
        docs.reverse()
    folder = work / f"round{round_no}"
    folder.mkdir(exist_ok=True)
    for rank, doc in enumerate(docs):
        link = folder / f"{rank:05d}-{Path(doc['path']).name}"
        if not link.exists():
            os.link(doc["path"], link)  # folio does not follow symbolic links
    return folder


# --- the raw engine's pages -------------------------------------------------------------------


def engine_pages(work: Path, config: Any) -> list[Path]:
    """Every page the route sends to the engine, rendered as the pipeline renders it
    (cached in ``work``; the same for every round)."""
    from concurrent.futures import ThreadPoolExecutor

    from folio.page.route import route_page
    from folio.pdf.page_worker import WorkerJob, prepare_pages, probe

    listing = work / "engine-pages.json"
    if listing.exists():
        return [Path(p) for p in json.loads(listing.read_text())]
    meta = json.loads((work / "corpus.json").read_text())

    def one(i: int, doc: dict[str, Any]) -> list[str]:
        pdf = Path(doc["path"])
        info = probe(pdf, None, 120, 4096)
        job = WorkerJob(pdf=pdf, pages=list(range(info.page_count)), out_dir=work / "raw" / f"d{i}",
                        render_settings=config.render, route_settings=config.route,
                        # as the pipeline's scheduler asks it
                        render="untrusted" if config.route.mode == "auto" else "all",
                        timeout_s=900)
        kept = []
        for page in prepare_pages(job):
            if route_page(page, config.route).kind == "ocr" and page.image_path:
                kept.append(page.image_path)
            elif page.image_path:
                Path(page.image_path).unlink(missing_ok=True)
        return kept

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        images = [p for ps in pool.map(one, range(len(meta["documents"])), meta["documents"])
                  for p in ps]
    listing.write_text(json.dumps(images))
    return [Path(p) for p in images]


async def send_raw(base_url: str | list[str], model: str, images: list[Path], *, prompt: str,
                   image_first: bool, max_tokens: int, in_flight: int, max_pixels: int,
                   lengths: list[int] | None = None, temperature: float = 0.0,
                   top_p: float | None = None, api_key: str | None = None) -> dict[str, Any]:
    """The pages straight to the server (or servers: each page to the one with the fewest
    outstanding, ``in_flight`` each, as folio's dispatch does), timed. Each page asks for
    the token count folio's engine gives it (``lengths``: folio's fixed_length) with the
    preset's first sampling, as folio's first attempt does. ``api_key``: the key a server
    folio started requires (its endpoint's ``api_key``)."""
    from openai import AsyncOpenAI

    from folio.engines.openai_wire import encode_image, fixed_length

    bases = [base_url] if isinstance(base_url, str) else list(base_url)
    clients = [AsyncOpenAI(base_url=b, api_key=api_key or "x", timeout=3600, max_retries=0) for b in bases]
    outstanding = [0] * len(bases)
    urls = [encode_image(p, max_pixels)[0] for p in images]
    sem = asyncio.Semaphore(in_flight * len(bases))
    tokens = {"prompt": 0, "completion": 0}
    answers: list[str] = []

    async def one(url: str) -> None:
        image = {"type": "image_url", "image_url": {"url": url}}
        text = {"type": "text", "text": prompt}
        messages: Any = [{"role": "user", "content": [image, text] if image_first else [text, image]}]
        sampling: dict[str, Any] = {"temperature": temperature}
        if top_p is not None:
            sampling["top_p"] = top_p
        async with sem:
            k = min(range(len(bases)), key=lambda i: outstanding[i])
            outstanding[k] += 1
            try:
                r = await clients[k].chat.completions.create(
                    model=model, max_tokens=fixed_length(url, lengths or [], max_tokens),
                    extra_body={"ignore_eos": True}, messages=messages, **sampling)
            finally:
                outstanding[k] -= 1
        if len(answers) < 8 and r.choices:
            answers.append(r.choices[0].message.content or "")
        if r.usage:
            tokens["prompt"] += r.usage.prompt_tokens
            tokens["completion"] += r.usage.completion_tokens

    started = time.perf_counter()
    await asyncio.gather(*[one(u) for u in urls])
    seconds = time.perf_counter() - started
    for client in clients:
        await client.close()
    return {"pages": len(urls), "seconds": round(seconds, 2),
            "pages_per_s": round(len(urls) / seconds, 3),
            "prompt_tokens_per_page": tokens["prompt"] // max(1, len(urls)),
            "completion_tokens_per_page": tokens["completion"] // max(1, len(urls)),
            "answers": answer_sample(answers)}


def answer_sample(answers: list[str]) -> dict[str, Any]:
    """What a few of the model's answers look like to folio's checks: their length, their
    repeat ratio (the loop check refuses a page above ``validation.max_repeat_ratio``) and
    the start of the first, so a phase says whether synthetic answers pass as text."""
    from folio.page.quality import repeat_ratio

    return {"n": len(answers), "chars": [len(a) for a in answers],
            "repeat_ratio": [round(repeat_ratio(a), 3) for a in answers],
            "head": answers[0][:300] if answers else ""}


# --- sampling ---------------------------------------------------------------------------------


class Sampler:
    """NVML utilization of one GPU and vLLM's queue (/metrics), every half second."""

    def __init__(self, gpu: int | list[int], base_url: str | None | Any) -> None:
        """``base_url``: the server's URL, or a function that finds it (or a list of
        servers' URLs, whose queues are summed) once it runs; several GPUs: their mean."""
        self.gpu, self.base_url = gpu, base_url
        self.samples: list[tuple[float, float | None, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        gpus = self.gpu if isinstance(self.gpu, list) else [self.gpu]
        utils = [u for u in (nvml_utilization(g) for g in gpus) if u is not None]
        with httpx.Client() as client:  # one client: the sampler must not cost the run CPU
            while not self._stop.wait(0.5):
                found = self.base_url() if callable(self.base_url) else self.base_url
                urls = [found] if isinstance(found, str) else list(found or [])
                ms = [read_metrics(u, client=client) for u in urls]
                util = statistics.mean(u() for u in utils) if utils else None
                self.samples.append((time.monotonic(), util,
                                     sum(m.get("running", 0.0) for m in ms),
                                     sum(m.get("waiting", 0.0) for m in ms)))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self, start: float, end: float) -> dict[str, Any]:
        window = [s for s in self.samples if start <= s[0] <= end]
        gpu = [s[1] for s in window if s[1] is not None]
        return {"samples": len(window),
                "gpu_utilization_mean": round(statistics.mean(gpu), 1) if gpu else None,
                "running_mean": round(statistics.mean(s[2] for s in window), 1) if window else None,
                "waiting_mean": round(statistics.mean(s[3] for s in window), 1) if window else None,
                "series": self.series(window, start)}

    @staticmethod
    def series(window: list[tuple[float, float | None, float, float]], start: float
               ) -> list[dict[str, float | None]]:
        """One entry a second (the means of its samples): when the GPU went short, to set
        beside the scheduler's timing.queue and the host's CPU (bench/host_cpu.py)."""
        seconds: dict[int, list[tuple[float, float | None, float, float]]] = {}
        for sample in window:
            seconds.setdefault(int(sample[0] - start), []).append(sample)
        out: list[dict[str, float | None]] = []
        for second, group in sorted(seconds.items()):
            gpu = [g[1] for g in group if g[1] is not None]
            out.append({"t": float(second),
                        "gpu": round(statistics.mean(gpu), 1) if gpu else None,
                        "running": round(statistics.mean(g[2] for g in group), 1),
                        "waiting": round(statistics.mean(g[3] for g in group), 1)})
        return out


def nvml_utilization(index: int) -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:
        return None


# --- phases -----------------------------------------------------------------------------------


def use_gpu(args: argparse.Namespace) -> None:
    """This process (and the servers it starts) on one GPU, with that GPU's shared-server
    state, kept alive past this command by the owner process."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    os.environ["FOLIO_SERVER__STATE_DIR"] = str(Path(args.work) / f"servers-gpu{args.gpu}")
    if args.owner_pid:
        os.environ["FOLIO_SERVER_OWNER_PID"] = str(args.owner_pid)


def cli_args(args: argparse.Namespace, sources: Path, out: Path, report: Path) -> list[str]:
    """The user's command line: sources, outputs, the model; the benchmark's settings."""
    argv = ["ingest", str(sources), "--out", str(out), "--report", str(report), "--quiet",
            "--engine", "vllm", "--model", args.model, "--preset", args.preset]
    for key, value in user_settings().items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    if args.fake:
        # FOLIO_FAKE_PROFILE=h200: the GPU profile's budgets (256 in flight) against the fake
        profile = os.environ.get("FOLIO_FAKE_PROFILE", "cpu")
        argv += ["--set", f"server.command={json.dumps(fake_command())}", "--profile", profile]
    return argv


def fake_command() -> list[str]:
    """The test server; FOLIO_FAKE_DELAY (seconds a page, default 0.05) makes it as slow
    as a GPU, so a 2-core machine shows the tail after the last page as a GPU run has it,
    FOLIO_FAKE_CAPACITY (requests run at once, the rest queue) gives it a GPU's queue, and
    FOLIO_FAKE_LOCKSTEP (seconds) makes its answers leave together, as a batch engine ends
    requests of one output length in the same step."""
    command = [sys.executable, str(ROOT / "tests" / "openai_fake.py"), "--port", "{port}",
               "--delay", os.environ.get("FOLIO_FAKE_DELAY", "0.05"),
               "--output", "chandra1_page.html"]
    if os.environ.get("FOLIO_FAKE_CAPACITY"):
        command += ["--capacity", os.environ["FOLIO_FAKE_CAPACITY"]]
    if os.environ.get("FOLIO_FAKE_LOCKSTEP"):  # answers leave together, as a GPU run ends
        command += ["--lockstep", os.environ["FOLIO_FAKE_LOCKSTEP"]]
    return command


def resolved(args: argparse.Namespace, extra: tuple[str, ...] | list[str] = ()) -> Any:
    """The configuration the CLI resolves for the pipeline phase's own command line (the
    raw phase and the servers use it, so the two cannot drift apart); ``extra``: more
    options of that command line, as :func:`run_cli` takes them."""
    from folio import cli
    from folio.settings.run_config import resolve_config

    work = Path(args.work)
    options = cli._parser().parse_args([*cli_args(args, work, work, work / "unused.json"),
                                        *extra])
    return resolve_config(engine=options.engine, route=options.route,
                          reprocess=options.reprocess, settings=cli._settings(options))


def ocr_pages_in(out: Path, top: int = 8) -> tuple[int, int, dict[str, int]]:
    """From the outputs, in one pass: pages with a completed engine attempt, their
    completion tokens, and why attempts failed (the ``top`` reasons, numbers made ``N`` so
    one reason counts once: a phase whose pages went to the fallback says which check
    refused the model's answers)."""
    import re
    from collections import Counter

    pages = tokens = 0
    reasons: Counter[str] = Counter()
    for path in out.rglob("document.json"):
        for page in json.loads(path.read_text()).get("pages", []):
            attempts = page.get("attempts", [])
            done = [a for a in attempts if a.get("completion_tokens")]
            if done:
                pages += 1
                tokens += sum(a["completion_tokens"] for a in done)
            for attempt in attempts:
                if attempt.get("error"):
                    reason = re.sub(r"\d+(\.\d+)?", "N", str(attempt["error"]))[:120]
                    reasons[f"{attempt.get('engine')}: {reason}"] += 1
    return pages, tokens, dict(reasons.most_common(top))


def phase_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """`folio ingest` in a process of its own, as a user starts it: in this process, after
    Prefect had been imported here, the CLI's settings (Prefect's logs off, folio's local
    Prefect server) came too late and the run logged every task at INFO to a temporary
    server."""
    from folio.gpu.shared_server import ServerFiles, read_state

    use_gpu(args)
    work = Path(args.work)
    sources = round_sources(work, args.round)
    out, report_path = work / f"out-r{args.round}", work / f"report-r{args.round}.json"
    config = resolved(args)
    key = _spec_key(config)  # imports Prefect here, not in the sampler's thread
    run = run_cli(args, sources, out, report_path, work / f"cli-r{args.round}.log",
                  Sampler(args.gpu, lambda: _server_url(key)))
    report, timing, code = run.report, run.report["timing"], run.code
    pages, tokens, seconds = run.pages, run.tokens, timing["seconds"]
    state = read_state(ServerFiles(Path(os.environ["FOLIO_SERVER__STATE_DIR"]), key).state)
    window = run.window
    return {"phase": "pipeline", "round": args.round, "gpu": args.gpu, "exit_code": code,
            "documents": report["totals"]["documents"], "pages": report["totals"]["pages"],
            "pages_ocr": pages, "seconds": seconds, "cli_wall_seconds": run.wall_seconds,
            "pages_per_s": round(pages / seconds, 3), "all_pages_per_s": round(
                report["totals"]["pages"] / seconds, 3),
            "completion_tokens_per_page": tokens // max(pages, 1),
            "timing": timing, "totals": report["totals"], "attempt_errors": run.attempt_errors,
            "queue": window,
            "server": state.model_dump() if state else None,
            "config": report.get("config")}


@dataclass
class CliRun:
    """One `folio ingest` as a user runs it: its exit code and report, the pages and
    tokens its outputs hold, the sampler's window over the flow's own time."""

    code: int
    report: dict[str, Any]
    pages: int
    tokens: int
    attempt_errors: dict[str, int]
    wall_seconds: float
    window: dict[str, Any]


def run_cli(args: argparse.Namespace, sources: Path, out: Path, report_path: Path, log: Path,
            sampler: Sampler, extra: tuple[str, ...] = ()) -> CliRun:
    """`python -m folio_prefect.flows.cli ingest ...` in a process of its own (as a user starts it),
    sampled while it runs; the window is cut to the flow's own time from its report.
    ``extra``: more options of the user's command line (bench/engine_limit.py's route)."""
    report_path.unlink(missing_ok=True)
    # a phase repeated in one machine session (`profile 1` after `round 1`) starts from
    # nothing: the earlier outputs would have the done-index skip every document
    shutil.rmtree(out, ignore_errors=True)
    with sampler, log.open("w") as stderr:
        t0, wall0 = time.monotonic(), time.time()
        code = subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli",
                               *cli_args(args, sources, out, report_path), *extra],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr).returncode
        t1 = time.monotonic()
    if not report_path.is_file():
        raise SystemExit(f"folio ingest exited {code} without a report: see {log}")
    report = json.loads(report_path.read_text())
    timing = report["timing"]
    flow_start = t0 + (timing["started_unix"] - wall0)
    pages, tokens, errors = ocr_pages_in(out)
    return CliRun(code=code, report=report, pages=pages, tokens=tokens, attempt_errors=errors,
                  wall_seconds=round(t1 - t0, 2),
                  window=sampler.summary(flow_start, flow_start + timing["seconds"]))


def _spec_key(config: Any) -> str:
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    return VLLMTaskRunner.from_config(config).spec().key()


def _server_url(key: str) -> str | None:
    from folio.gpu.shared_server import ServerFiles, read_state

    state = read_state(ServerFiles(Path(os.environ["FOLIO_SERVER__STATE_DIR"]), key).state)
    return state.base_url if state and state.state == "ready" else None


def raw_request(config: Any) -> dict[str, Any]:
    """What the raw phase sends besides the pages: the preset's prompt and first sampling,
    the pipeline's token counts, in-flight budget and pixel cap."""
    from folio.settings.presets import get_preset

    preset = get_preset(config.ocr.preset)
    first = preset.sampling_for(0)
    return {"prompt": preset.prompt, "image_first": preset.image_first,
            "max_tokens": config.ocr.max_tokens, "lengths": config.ocr.ignore_eos_lengths,
            "temperature": first.temperature, "top_p": first.top_p,
            "in_flight": config.ocr.in_flight, "max_pixels": config.render.max_pixels}


def phase_raw(args: argparse.Namespace) -> dict[str, Any]:
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    use_gpu(args)
    config = resolved(args)
    images = engine_pages(Path(args.work), config)
    runner = VLLMTaskRunner.from_config(config)
    with runner:  # the same shared server the CLI would start or attach to
        endpoint = runner.endpoint
        assert endpoint is not None
        model = endpoint.served_model_name or config.ocr.model or "fake-ocr"
        with Sampler(args.gpu, endpoint.base_url) as sampler:
            t0 = time.monotonic()
            result = asyncio.run(send_raw(
                endpoint.base_url, model, images, **raw_request(config),
                api_key=getattr(endpoint, "api_key", None)))
            t1 = time.monotonic()
    return {"phase": "raw", "round": args.round, "gpu": args.gpu, **result,
            "queue": sampler.summary(t0, t1), "in_flight": config.ocr.in_flight}


def phase_serve(args: argparse.Namespace) -> dict[str, Any]:
    """Start this GPU's shared server the way a run would (preflight included) and leave
    it to serve the next commands (kept alive by ``--owner-pid``)."""
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    use_gpu(args)
    runner = VLLMTaskRunner.from_config(resolved(args))
    t0 = time.monotonic()
    with runner:
        endpoint = runner.endpoint
        assert endpoint is not None
        return {"phase": "serve", "gpu": args.gpu, "base_url": endpoint.base_url,
                "seconds": round(time.monotonic() - t0, 1),
                "preflight": runner.preflight_result.model_dump()
                if runner.preflight_result else None}


@contextmanager
def _prefect_stack(args: argparse.Namespace, config: Any, deployments: list[str],
                   deployment_env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """A Prefect server, the pools of folio_prefect.deployments.work_pools --apply,
    ``deployments`` made by `prefect deploy` from prefect.yaml, and one process worker on the GPU pool; yields
    the environment that reaches that server. Everything stops on exit.

    ``deployment_env`` replaces the deployments' environment (their job variables), as a
    user sets the model in prefect.yaml: a flow run's environment is the worker's
    overlaid with the deployment's, so the worker's own would lose to prefect.yaml's
    model."""
    from folio.gpu.profiles import load_profile

    profile = load_profile(config.ocr.profile)
    pool = "folio-h200" if args.fake else f"folio-{profile.name}"
    work = Path(args.work)
    home = work / "prefect-home"
    port = 4321
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
           # the UI needs a newer FastAPI than the one vLLM 0.26 is staged with (the server
           # died with "'FastAPI' object has no attribute 'frontend'"); the API is enough here
           "PREFECT_UI_ENABLED": "false"}
    logs = work / "deployment-logs"
    logs.mkdir(exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start([sys.executable, "-m", "prefect", "server", "start", "--port", str(port)],
                            env, logs / "server.log"))
        _wait_http(f"http://127.0.0.1:{port}/api/health", 120)
        subprocess.run([sys.executable, "-m", "folio_prefect.deployments.work_pools", "--apply"], env=env,
                       cwd=ROOT, check=True)
        overrides: list[str] = []
        if deployment_env is not None:
            job_env = {"PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true", **deployment_env}
            overrides = ["--job-variable", json.dumps({"env": job_env})]
        for name in deployments:  # one at a time: `prefect deploy` ignores overrides for several
            subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--name",
                            name, *overrides], env=env, cwd=ROOT, check=True)
        procs.append(_start([sys.executable, "-m", "prefect", "worker", "start", "--pool", pool],
                            env, logs / "worker.log"))
        yield {**env, "FOLIO_BENCH_POOL": pool}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _gpu_deployment_names(args: argparse.Namespace, config: Any) -> tuple[str, str]:
    """(document deployment, batch deployment) of prefect.yaml for this GPU's profile."""
    from folio.gpu.profiles import load_profile

    name = "h200" if args.fake else load_profile(config.ocr.profile).name
    return f"document-{name}", f"batch-{name}"


def phase_deployment(args: argparse.Namespace) -> dict[str, Any]:
    """The same pages through a Prefect server, a GPU deployment (flows/gpu.py) on a
    process work pool made by folio_prefect.deployments.work_pools, and one worker."""
    use_gpu(args)
    work = Path(args.work)
    config = resolved(args)
    _, deployment = _gpu_deployment_names(args, config)
    # the repository's own GPU deployment, as `prefect deploy` makes it from prefect.yaml
    with _prefect_stack(args, config, [deployment]) as env:
        sources = round_sources(work, 1)
        out = work / "out-deployment"
        report_path = work / "report-deployment.json"
        report_path.unlink(missing_ok=True)
        # the flow's `report` parameter writes the run report (an output, no change to
        # the run) for its timing: the seconds after the last page, the queue timeline
        parameters = {"sources": [str(sources)], "out": str(out), "engine": "vllm",
                      "report": str(report_path), "settings": _flow_settings()}
        script = (
            "import json,sys\nfrom prefect.deployments import run_deployment\n"
            f"r = run_deployment('folio-ingest/{deployment}', parameters=json.loads(sys.argv[1]),"
            " job_variables={'env': json.loads(sys.argv[2])}, timeout=3000)\n"
            "print(json.dumps({'state': r.state.type.value, 'start': r.start_time.timestamp() if r.start_time else None,"
            " 'end': r.end_time.timestamp() if r.end_time else None}))\n")
        with Sampler(args.gpu, None) as sampler:
            t0, wall0 = time.monotonic(), time.time()
            run = subprocess.run([sys.executable, "-c", script, json.dumps(parameters),
                                  json.dumps(_worker_env(args, config))],
                                 env=env, cwd=ROOT, capture_output=True, text=True, check=True)
            t1 = time.monotonic()
        pool = env["FOLIO_BENCH_POOL"]
    info = json.loads(run.stdout.strip().splitlines()[-1])
    pages, tokens, _ = ocr_pages_in(out)
    run_seconds = (info["end"] - info["start"]) if info["end"] and info["start"] else t1 - t0
    start_mono = t0 + ((info["start"] or wall0) - wall0)
    timing = (json.loads(report_path.read_text()).get("timing")
              if report_path.is_file() else None)
    return {"phase": "deployment", "gpu": args.gpu, "state": info["state"], "pool": pool,
            "pages_ocr": pages, "seconds": round(run_seconds, 2), "timing": timing,
            "submit_to_end_seconds": round(t1 - t0, 2),
            "pages_per_s": round(pages / run_seconds, 3),
            "completion_tokens_per_page": tokens // max(pages, 1),
            "queue": sampler.summary(start_mono, t1)}


def _flow_settings() -> dict[str, Any]:
    """The benchmark's settings a flow run takes as its ``settings`` parameter (the
    server's reach it through the worker's environment: :func:`_worker_env`)."""
    return {k: v for k, v in user_settings().items() if not k.startswith("server.")}


def phase_live(args: argparse.Namespace) -> dict[str, Any]:
    """The three ways runs reach a GPU pool, on the GPU: `prefect deploy` of the GPU
    deployments, one worker on the pool, then a person's run from the UI (the document
    deployment's form parameters), a RAG job's trigger (folio_prefect.deployments.trigger)
    and a sweep's batch (folio_prefect.tasks.sweep.submit_batch, the batch deployment),
    one after the other, each on a document of its own. Says, for each run, its state, its engine and profile, its pages
    and the shared server it used (one for all three, alive between them)."""
    use_gpu(args)
    work = Path(args.work)
    config = resolved(args)
    document, batch = _gpu_deployment_names(args, config)
    # three originals of 2-6 pages (a run of a few pages is what a UI run or a trigger is)
    documents = json.loads((work / "corpus.json").read_text())["documents"]
    sources = [Path(d["path"]) for d in documents
               if 2 <= d["pages"] <= 6 and Path(d["path"]).name.startswith("c00-")][:3]
    if len(sources) < 3:
        raise SystemExit(f"live: need 3 PDFs of 2-6 pages in {work / 'corpus.json'}")
    out = work / "out-live"
    shutil.rmtree(out, ignore_errors=True)
    state_dir = Path(os.environ["FOLIO_SERVER__STATE_DIR"])
    with _prefect_stack(args, config, [document, batch], _worker_env(args, config)) as env:
        before = _server_pids(state_dir)
        t0 = time.monotonic()
        client = subprocess.run(
            [sys.executable, __file__, "live-client", "--work", args.work],
            input=json.dumps({"document": f"folio-ingest-document/{document}",
                              "batch": f"folio-ingest/{batch}", "out": str(out),
                              "sources": [str(p) for p in sources],
                              "settings": _flow_settings()}),
            env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        after = _server_pids(state_dir)
    if client.returncode != 0:
        raise SystemExit(f"live runs failed:\n{client.stdout[-3000:]}\n{client.stderr[-3000:]}")
    runs = json.loads(client.stdout.strip().splitlines()[-1])
    # the benchmark's model, not prefect.yaml's placeholder, served every run
    ok = all(r["state"] == "COMPLETED" and r["engines"] == ["vllm"] and r["model"] == args.model
             for r in runs)
    return {"phase": "live", "gpu": args.gpu, "deployments": [document, batch],
            "runs": runs, "seconds": round(seconds, 1), "all_on_the_gpu_engine": ok,
            "pages_ocr": ocr_pages_in(out)[0],
            "shared_servers_before": before, "shared_servers_after": after}


def _server_pids(state_dir: Path) -> list[dict[str, Any]]:
    """The shared servers of this GPU's state folder: pid, state, generation."""
    from folio.gpu.shared_server import read_state

    states = [read_state(p) for p in sorted(state_dir.glob("*.json"))]
    return [{"server_pid": st.server_pid, "state": st.state, "generation": st.generation,
             "base_url": st.base_url} for st in states if st is not None]


def live_client(args: argparse.Namespace) -> None:
    """The client side of :func:`phase_live`, in a process whose environment reaches the
    benchmark's Prefect server (PREFECT_API_URL is read when Prefect is imported)."""
    from prefect.deployments import run_deployment

    from folio.settings.run_config import IngestRequest
    from folio_prefect.deployments.runs import wait_for_run
    from folio_prefect.deployments.trigger import trigger
    from folio_prefect.tasks.sweep import submit_batch

    spec = json.loads(sys.stdin.read())
    ui_src, trigger_src, batch_src = spec["sources"]
    # route ocr: every page to the GPU (with auto, the smallest documents' text layers
    # would keep them off it and prove nothing about the pool)
    common = {"out": spec["out"], "engine": "vllm", "route": "ocr", "settings": spec["settings"]}
    runs: list[dict[str, Any]] = []

    def finish(kind: str, run_id: Any, t0: float) -> None:
        run = wait_for_run(run_id, timeout=600)
        state = run.state
        report: dict[str, Any] = {}
        if state is not None and state.is_completed():
            report = state.result()  # type: ignore[assignment]
        docs = report.get("documents", [])
        runs.append({
            "kind": kind, "flow_run_id": str(run_id), "flow_run_name": run.name,
            "state": state.type.value if state else None,
            "seconds": round(time.monotonic() - t0, 1),
            "outcomes": sorted({d.get("outcome") for d in docs}),
            "engines": sorted({d.get("engine") for d in docs}),
            "profile": report.get("config", {}).get("ocr", {}).get("profile"),
            "model": report.get("config", {}).get("ocr", {}).get("model"),
            "in_flight": report.get("config", {}).get("ocr", {}).get("in_flight"),
            "pages": report.get("totals", {}).get("pages")})

    t0 = time.monotonic()  # a person's run from the UI: the document deployment's form
    ui = run_deployment(spec["document"], parameters={"source": ui_src, **common}, timeout=0)
    finish("ui-run", ui.id, t0)  # type: ignore[union-attr]
    t0 = time.monotonic()  # a RAG job's trigger
    triggered = trigger(IngestRequest(source=trigger_src, **common), deployment=spec["document"])
    finish("trigger", triggered.flow_run_id, t0)
    t0 = time.monotonic()  # a sweep's batch
    run_id = submit_batch(spec["batch"], f"live-{int(time.time())}",
                          {"sources": [batch_src], **common})
    finish("sweep-batch", run_id, t0)
    print(json.dumps(runs))


def _worker_env(args: argparse.Namespace, config: Any) -> dict[str, str]:
    """The flow run's job variables: the model, preset and server settings (the flow run
    builds its runner from its environment), and this GPU's shared-server state."""
    env = {"FOLIO_OCR__MODEL": args.model, "FOLIO_OCR__PRESET": args.preset,
           "FOLIO_SERVER__LOAD_FORMAT": str(SETTINGS["server.load_format"][0]),
           "FOLIO_SERVER__EXTRA_ARGS": json.dumps(SETTINGS["server.extra_args"][0]),
           "FOLIO_SERVER__STATE_DIR": os.environ["FOLIO_SERVER__STATE_DIR"],
           "CUDA_VISIBLE_DEVICES": os.environ["CUDA_VISIBLE_DEVICES"]}
    if os.environ.get("FOLIO_SERVER_OWNER_PID"):
        env["FOLIO_SERVER_OWNER_PID"] = os.environ["FOLIO_SERVER_OWNER_PID"]
    if args.fake:
        env.update({"FOLIO_SERVER__COMMAND": json.dumps(fake_command()),
                    "FOLIO_OCR__PROFILE": "cpu"})
    return env


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _wait_http(url: str, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {timeout:.0f} s")


# --- report -----------------------------------------------------------------------------------


def report(work: Path, out_dir: Path, command: str) -> dict[str, Any]:
    phases = [json.loads(p.read_text()) for p in sorted((work / "phases").glob("*.json"))
              if not p.name.startswith("serve-")]
    pipe = [p for p in phases if p["phase"] == "pipeline"]
    raw = [p for p in phases if p["phase"] == "raw"]
    dep = [p for p in phases if p["phase"] == "deployment"]
    meta = json.loads((work / "corpus.json").read_text())
    settings = {k: {"value": v, "why": why} for k, (v, why) in SETTINGS.items()}
    settings["environment"] = ENVIRONMENT
    gpu = _gpu_name()
    used = sorted({p["gpu"] for p in phases})
    machine = (f"{len(used)} x {gpu}: each round's pipeline and raw phases ran at once on "
               "different GPUs, one vLLM server per GPU with the same configuration"
               if len(used) > 1 else
               f"1 x {gpu}: each round's pipeline and raw phases ran one after the other "
               "on the same vLLM server")
    result: dict[str, Any] = {}
    if pipe and raw:
        p_rate = statistics.median(p["pages_per_s"] for p in pipe)
        r_rate = statistics.median(r["pages_per_s"] for r in raw)
        raw_rate = {r["round"]: r["pages_per_s"] for r in raw}
        util = [p["queue"]["gpu_utilization_mean"] for p in pipe
                if p["queue"].get("gpu_utilization_mean") is not None]
        result = {
            "gpu": gpu, "machine": machine, "commit": os.environ.get("FOLIO_BENCH_COMMIT"),
            "pages": pipe[0]["pages"], "pages_to_engine": pipe[0]["pages_ocr"],
            "documents": meta["documents"].__len__(),
            "pipeline_pages_per_s": round(p_rate, 3), "engine_pages_per_s": round(r_rate, 3),
            "ratio": round(p_rate / r_rate, 3),
            # what a stopwatch around `folio ingest` gives: the CLI's start, its checks and
            # its Prefect server (started by the first run, reused after) included
            "wall_ratio": round(statistics.median(
                p["pages_ocr"] / p["cli_wall_seconds"] for p in pipe) / r_rate, 3),
            "gpu_utilization_pipeline": round(statistics.median(util), 1) if util else None,
            "seconds_after_last_page": max(p["timing"]["after_last_page_s"] for p in pipe),
            # each round against its own raw phase (against the median one without)
            "round_ratios": [round(p["pages_per_s"] / raw_rate.get(p["round"], r_rate), 3)
                             for p in sorted(pipe, key=lambda x: x["round"])],
            "settings": settings, "command": command,
            "how": "pages_per_s counts pages with an engine attempt over the flow's own time "
                   "(report timing.seconds: settings, discovery, every stage, the last load); "
                   "the raw engine gets the same pages, rendered by folio's page worker, from "
                   "the original PDFs (the pipeline renders some from its Ghostscript copy).",
            "corpus": {k: meta[k] for k in ("copies", "originals", "pages")},
            "phases": phases,
        }
        (out_dir / "gpu_user_path.json").write_text(json.dumps(result, indent=1) + "\n")
    if dep and raw:
        d = dep[-1]
        r_rate = statistics.median(r["pages_per_s"] for r in raw)
        dep_result = {
            "gpu": gpu, "machine": machine, "commit": os.environ.get("FOLIO_BENCH_COMMIT"),
            "pages": pipe[0]["pages"] if pipe else None, "pages_to_engine": d["pages_ocr"],
            "documents": len(meta["documents"]), "pipeline_pages_per_s": d["pages_per_s"],
            "engine_pages_per_s": round(r_rate, 3), "ratio": round(d["pages_per_s"] / r_rate, 3),
            # from submitting the run to its end: the worker starting its process included
            "wall_ratio": round(d["pages_ocr"] / d["submit_to_end_seconds"] / r_rate, 3),
            "gpu_utilization_pipeline": d["queue"].get("gpu_utilization_mean"),
            "seconds_after_last_page": (d.get("timing") or {}).get("after_last_page_s"),
            "settings": settings, "command": command,
            "how": "a Prefect server, the pools of folio_prefect.deployments.work_pools --apply, flows/gpu.py:"
                   "ingest deployed to the GPU pool from this checkout, one process worker; "
                   "seconds from the flow run's start to its end as Prefect recorded them",
            "phase": d, "raw_phases": raw,
        }
        (out_dir / "gpu_deployment.json").write_text(json.dumps(dep_result, indent=1) + "\n")
        result["deployment"] = dep_result
    return result


def _gpu_name() -> str:
    from folio.gpu.profiles import detect_gpu

    info = detect_gpu()
    return info.name if info else "none (fake server)"


# --- main -------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["corpus", "serve", "pipeline", "raw", "deployment", "live",
                                     "live-client", "report", "smoke"])
    ap.add_argument("--work", default="/tmp/folio-gpu-user-path")
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--min-pages", type=int, default=1000)
    ap.add_argument("--min-docs", type=int, default=150)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--model", default="/tmp/synthetic-vlm")
    ap.add_argument("--preset", default="chandra")
    ap.add_argument("--owner-pid", type=int, help="keep shared servers alive while it lives")
    ap.add_argument("--fake", action="store_true", help="the fake server instead of vLLM")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--command", default="", help="the whole command sequence, for the result")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "phases").mkdir(exist_ok=True)
    if args.step == "smoke":
        return smoke(args)
    if args.step == "live-client":
        return live_client(args)
    if args.step == "corpus":  # the documents, and the raw engine's pages rendered once
        meta = build_corpus(Path(args.pdfs), work, args.min_pages, args.min_docs)
        images = engine_pages(work, resolved(args))
        print(json.dumps({**{k: v for k, v in meta.items() if k != "documents"},
                          "pages_to_engine": len(images)}))
        return
    if args.step == "report":
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result = report(work, out, args.command)
        print(json.dumps({k: result.get(k) for k in ("pipeline_pages_per_s", "engine_pages_per_s",
                                                      "ratio", "gpu_utilization_pipeline",
                                                      "seconds_after_last_page")}))
        return
    phase = {"serve": phase_serve, "pipeline": phase_pipeline, "raw": phase_raw,
             "deployment": phase_deployment, "live": phase_live}[args.step]
    result = phase(args)
    name = {"deployment": "deployment", "live": "live", "serve": f"serve-gpu{args.gpu}"}.get(
        args.step, f"{args.step}-r{args.round}")
    (work / "phases" / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: result.get(k) for k in ("phase", "round", "gpu", "pages_ocr", "pages",
                                                  "seconds", "pages_per_s", "queue")}, default=str))


def smoke(args: argparse.Namespace) -> None:
    """Every step against the fake server on a few corpus PDFs (no GPU)."""
    base = [sys.executable, __file__, "--work", args.work, "--fake"]
    steps = [["corpus", "--pdfs", args.pdfs, "--min-pages", "30", "--min-docs", "8"],
             ["pipeline", "--round", "1"], ["raw", "--round", "1"],
             ["raw", "--round", "2"], ["pipeline", "--round", "2"], ["deployment"], ["live"],
             ["report", "--out", str(Path(args.work) / "results")]]
    for step in steps:
        subprocess.run([*base[:2], step[0], *base[2:], *step[1:]], check=True)


if __name__ == "__main__":
    main()
