"""How close folio gets to the GPU's own limit: vLLM's offline engine, ``vllm serve`` as
folio starts it, and folio's pipeline, on the same page images and prompts.

For each preset (its prompt, its render size, its server-side pixel cap):

* **offline**: ``LLM.chat`` in this process, built from the very options folio gives
  ``vllm serve`` (:func:`engine_kwargs` reads them off folio's own command line), the
  pages as the same data URLs the engine sends. Preprocessing (decoding the images,
  vLLM's processor, adding the requests) is timed apart from the rest: vLLM creates its
  "Processed prompts" progress bar once every request is added, and :class:`_Clock`
  notes when. Pages/s count the whole call, preprocessing included.
* **served**: folio's shared server for the configuration (``VLLMTaskRunner``, as a run
  starts it), the same data URLs sent with the async OpenAI client, the profile's
  requests in flight (what bench/gpu_user_path.py calls the raw engine).
* **pipeline**: ``folio ingest --engine vllm`` on the documents those pages come from, in
  a process of its own, as a user runs it: every page rendered, sent, parsed, validated,
  embedded and loaded. Its default route (``ocr``) sends every page to the GPU, so the
  three phases have the same pages.

The presets: ``chandra`` (its long layout prompt, pages to 2048 px), ``chandra2`` (Chandra
2's prompt and image rule, 12384 output tokens: issue 47's reference settings), ``olmocr2``
(olmOCR 2's prompt, 1288 px) and ``generic`` (a short markdown prompt, 1600 px).
Documents: the PDFs under ``--pdfs`` as byte-distinct copies until ``--min-pages``.

Steps (state in ``--work``; each its own command, so a 10-minute limit per command fits):

    python bench/engine_limit.py pages --pdfs .corpus-carry --work /tmp/elim
    python bench/engine_limit.py offline --presets chandra,generic --work /tmp/elim
    python bench/engine_limit.py served --preset chandra --work /tmp/elim --owner-pid PID
    python bench/engine_limit.py pipeline --preset chandra --work /tmp/elim --owner-pid PID
    python bench/engine_limit.py served --preset chandra --tag api4 \
        --server-args '["--api-server-count", "4"]' --work /tmp/elim --owner-pid PID2
    python bench/engine_limit.py report --work /tmp/elim --out bench/results

A variant (``--tag``, ``--server-args``) is a served or pipeline phase whose ``vllm
serve`` gets more options after the benchmark's own: each setting the issue names is
measured that way before a profile takes it. Its server is a different one (the options
are part of a shared server's key): stop the previous one first (its owner process).

Here, without a GPU (the fake server; no offline phase):

    .venv/bin/python bench/engine_limit.py smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from bench.engine_limit_report import EXTRA_SETTINGS, report, save_phase, seed
from bench.engine_limit_variants import (
    cpu_list,
    refuse_a_variant_that_changes_nothing,
    variant_args,
    variant_settings,
)

# the GPU benchmark's documents, sender, sampler (bench/gpu_user_path.py's pieces)
from bench.gpu_bench_settings import SETTINGS, resolved, use_gpu
from bench.gpu_cli_run import run_cli, server_url, spec_key
from bench.gpu_documents import build_corpus, engine_pages, round_sources
from bench.gpu_raw_engine import raw_request, send_raw
from bench.gpu_sampler import Sampler

PRESETS = ("chandra", "chandra2", "olmocr2", "generic")


def engine_kwargs(argv: list[str]) -> dict[str, Any]:
    """``LLM(...)`` keyword arguments from ``vllm serve`` options: ``--max-num-seqs 256``
    becomes ``max_num_seqs=256`` (values read as JSON where they are JSON),
    ``--enforce-eager`` True and ``--no-enable-prefix-caching`` ``enable_prefix_caching=
    False``. Only options of the engine itself belong here (no host, port or model)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if not flag.startswith("--"):
            raise ValueError(f"not an option: {flag!r} in {argv}")
        name = flag[2:].replace("-", "_")
        has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        if has_value:
            raw = argv[i + 1]
            try:
                out[name] = json.loads(raw)
            except json.JSONDecodeError:
                out[name] = raw
            i += 2
        else:
            if name.startswith("no_"):
                out[name[3:]] = False
            else:
                out[name] = True
            i += 1
    return out


# --- configuration ------------------------------------------------------------------------


#: the synthetic model each preset's pages go to when ``--model`` is left at its default,
#: with the ``vllm serve`` options that give it the real checkpoint's form: olmocr2 is
#: olmOCR 2's own shape (bench/synthetic_qwen25vl.py), the others the Qwen3-VL-8B shape
#: Chandra is built on (../shared/device/make_synthetic_vlm.py)
DEFAULT_MODEL = "/tmp/synthetic-vlm"
MODEL_SHAPES: dict[str, tuple[str, list[str]]] = {
    "olmocr2": ("/tmp/synthetic-qwen25vl", ["--quantization", "fp8"]),
}
EXTRA_SETTINGS["olmocr2 model"] = (
    {"model": MODEL_SHAPES["olmocr2"][0], "server_args": MODEL_SHAPES["olmocr2"][1]},
    "olmOCR 2 is allenai/olmOCR-2-7B-1025-FP8, a Qwen2.5-VL-7B with FP8 weights: synthetic "
    "weights of that shape (bench/synthetic_qwen25vl.py), bfloat16 on disk, made FP8 by vLLM "
    "as it loads them (the real checkpoint says FP8 in its own config; vLLM may also quantize "
    "the vision encoder, which the real one keeps in bfloat16)")


def _shape(args: argparse.Namespace, preset: str) -> tuple[str, list[str]]:
    """The model folder and its server options for ``preset``: its own shape unless
    ``--model`` names one model for every preset."""
    if args.model == DEFAULT_MODEL and preset in MODEL_SHAPES:
        return MODEL_SHAPES[preset]
    return args.model, []


def _args_for(args: argparse.Namespace, preset: str) -> argparse.Namespace:
    """The GPU benchmark's argument namespace for one preset (its model shape's folder)."""
    model = _shape(args, preset)[0]
    return argparse.Namespace(**{**vars(args), "preset": preset, "round": 1, "model": model})


def config_for(args: argparse.Namespace, preset: str) -> Any:
    """What the CLI resolves for ``folio ingest --preset P`` (route ocr, the default) with the
    benchmark's settings (servers, pages and pipeline all read it)."""
    return resolved(_args_for(args, preset), user_options(args, preset))


def server_command(args: argparse.Namespace) -> list[str]:
    """The ``vllm serve`` command folio would start for this step's configuration."""
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    return VLLMTaskRunner.from_config(config_for(args, args.preset)).spec().command


def user_options(args: argparse.Namespace, preset: str) -> list[str]:
    """What the benchmark adds to the user's command line beyond bench/gpu_bench_settings.py's
    settings: the server options of the preset's model shape and, for a
    variant, its own server options (after the benchmark's) and folio settings."""
    # no --route: `--engine vllm` sends every page to the model by default (route ocr),
    # so the phases' pages are the same; a variant may ask another (route.mode=auto)
    out: list[str] = []
    extra = _shape(args, preset)[1] + variant_args(args)
    if extra:
        base = list(SETTINGS["server.extra_args"][0])
        out += ["--set", f"server.extra_args={json.dumps(base + extra)}"]
    for setting in variant_settings(args):
        out += ["--set", setting]
    return out


def phase_name(args: argparse.Namespace) -> str:
    tag = getattr(args, "tag", None) or (
        "default" if not variant_args(args) and not variant_settings(args) else "variant")
    return f"{args.step}-{args.preset}-{tag}"


def preset_work(args: argparse.Namespace, preset: str) -> Path:
    return Path(args.work) / preset


# --- pages --------------------------------------------------------------------------------


def choose_documents(docs: list[dict[str, Any]], min_pages: int,
                     min_documents: int) -> list[dict[str, Any]]:
    """The first documents by path until both ``min_pages`` pages and ``min_documents``
    documents are reached (issue 47's runs: >= 500 pages of >= 100 documents)."""
    chosen: list[dict[str, Any]] = []
    pages = 0
    for doc in sorted(docs, key=lambda d: d["path"]):
        if pages >= min_pages and len(chosen) >= min_documents:
            break
        chosen.append(doc)
        pages += doc["pages"]
    return chosen


def step_pages(args: argparse.Namespace) -> dict[str, Any]:
    """The documents (copies until ``--min-pages`` and ``--min-documents``, then as few as
    reach both) and, for each preset, every page rendered by folio's page worker at that
    preset's size."""
    work = Path(args.work)
    meta = build_corpus(Path(args.pdfs), work, args.min_pages, args.min_documents)
    chosen = choose_documents(meta["documents"], args.min_pages, args.min_documents)
    pages = sum(doc["pages"] for doc in chosen)
    out: dict[str, Any] = {"documents": len(chosen), "pages": pages, "presets": {}}
    for preset in args.presets.split(","):
        pw = preset_work(args, preset)
        pw.mkdir(parents=True, exist_ok=True)
        (pw / "corpus.json").write_text(json.dumps({**meta, "documents": chosen,
                                                    "pages": pages}, indent=1))
        images = engine_pages(pw, config_for(args, preset))
        out["presets"][preset] = len(images)
    return out


def _pages(args: argparse.Namespace, preset: str) -> list[Path]:
    listing = preset_work(args, preset) / "engine-pages.json"
    if not listing.is_file():
        raise SystemExit(f"no pages for {preset}: run the `pages` step first")
    return [Path(p) for p in json.loads(listing.read_text())]


def _messages(urls: list[str], prompt: str, image_first: bool) -> list[list[dict[str, Any]]]:
    """One conversation per page, as folio's engine and the served phase send it."""
    out = []
    for url in urls:
        image = {"type": "image_url", "image_url": {"url": url}}
        text = {"type": "text", "text": prompt}
        out.append([{"role": "user", "content": [image, text] if image_first else [text, image]}])
    return out


# --- offline ------------------------------------------------------------------------------


class _Clock:
    """A tqdm factory for ``LLM.chat(use_tqdm=...)`` that notes when vLLM creates its
    "Processed prompts" bar: the moment every request has been rendered and added."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

    def __call__(self, *a: Any, **kw: Any) -> Any:
        from tqdm import tqdm

        self.marks.setdefault(str(kw.get("desc", "")), time.perf_counter())
        # drawn to nowhere, not disabled: vLLM divides by the bar's elapsed time
        kw.update(file=open(os.devnull, "w"), mininterval=60.0)
        return tqdm(*a, **kw)


def step_offline(args: argparse.Namespace) -> dict[str, Any]:
    """Each preset's pages through one ``LLM`` built from folio's server options."""
    from vllm import LLM, SamplingParams

    from folio.engines.openai_wire import encode_image, fixed_length
    from folio.settings.presets import get_preset
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    use_gpu(argparse.Namespace(gpu=args.gpu, work=args.work, owner_pid=None))
    presets = args.presets.split(",")
    models = {_args_for(args, p).model for p in presets}
    if len(models) > 1:  # one LLM per process: vLLM does not give a GPU back reliably
        raise SystemExit(f"--presets {args.presets}: their models differ ({sorted(models)}); "
                         "run the offline step once per model")
    first = config_for(args, presets[0])
    # the very command line and environment folio starts `vllm serve` with for the first
    # preset (the others differ only in the pixel cap, given with each call below)
    spec = VLLMTaskRunner.from_config(first).spec()
    os.environ.update(spec.env)
    command = list(spec.command)
    kwargs = engine_kwargs(command[command.index("--port") + 2:])
    kwargs.pop("served_model_name", None)
    model = command[command.index("serve") + 1]
    t0 = time.perf_counter()
    llm = LLM(model=model, **kwargs)
    start_s = time.perf_counter() - t0
    results = []
    for name in presets:
        config = config_for(args, name)
        preset = get_preset(name)
        images = _pages(args, name)
        urls = [encode_image(p, config.render.max_pixels)[0] for p in images]
        conversations = _messages(urls, preset.prompt, preset.image_first)
        first = preset.sampling_for(0)  # folio's first attempt's sampling, its token counts
        params = [SamplingParams(max_tokens=fixed_length(u, config.ocr.ignore_eos_lengths,
                                                         config.ocr.max_tokens),
                                 ignore_eos=True, temperature=first.temperature,
                                 top_p=first.top_p if first.top_p is not None else 1.0)
                  for u in urls]
        mm = preset.mm_processor_kwargs(config.render.max_pixels)
        llm.chat(conversations[:4], params[:4], use_tqdm=False, mm_processor_kwargs=mm)  # warm-up
        # --repeats: the same pages again on the same engine, each run its own phase file
        # (the report takes the median, as for the served and pipeline phases)
        for run in range(1, args.repeats + 1):
            clock = _Clock()
            t0 = time.perf_counter()
            outs = llm.chat(conversations, params, use_tqdm=clock, mm_processor_kwargs=mm)
            seconds = time.perf_counter() - t0
            added = clock.marks.get("Processed prompts", t0) - t0
            prompt_tokens = sum(len(o.prompt_token_ids or []) for o in outs)
            completion = sum(len(o.outputs[0].token_ids) for o in outs)
            result = {"preset": name, "run_on_engine": run, "pages": len(outs),
                      "seconds": round(seconds, 2), "pages_per_s": round(len(outs) / seconds, 3),
                      "preprocessing_seconds": round(added, 2),
                      "after_preprocessing_seconds": round(seconds - added, 2),
                      "prompt_tokens_per_page": prompt_tokens // max(1, len(outs)),
                      "completion_tokens_per_page": completion // max(1, len(outs)),
                      "output_tokens_per_s": round(completion / seconds)}
            print(json.dumps(result), flush=True)
            results.append(result)
            _save(args, f"offline-{name}", {"phase": "offline", **result, "engine_start_s":
                                            round(start_s, 1), "engine_kwargs": kwargs,
                                            "mm_processor_kwargs": mm})
    return {"phase": "offline", "results": results, "engine_kwargs": kwargs}


# --- served and pipeline -----------------------------------------------------------------


def step_served(args: argparse.Namespace) -> dict[str, Any]:
    """The preset's pages to the shared server folio starts for its configuration."""
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    use_gpu(args)
    config = config_for(args, args.preset)
    images = _pages(args, args.preset)
    runner = VLLMTaskRunner.from_config(config)
    with runner:
        endpoint = runner.endpoint
        assert endpoint is not None
        model = endpoint.served_model_name or config.ocr.model or "fake-ocr"
        send = raw_request(config)
        warm = asyncio.run(send_raw(endpoint, model, images[:4], **send))
        if args.step == "warm":  # the server only, for a pipeline phase of its own
            return {"phase": "warm", "preset": args.preset, "answers": warm["answers"]}
        with Sampler(args.gpu, endpoint.base_url) as sampler:
            started = time.time()
            t0 = time.monotonic()
            result = asyncio.run(send_raw(endpoint, model, images, **send))
            t1 = time.monotonic()
    return {"phase": "served", "preset": args.preset, "variant": args.tag or "default",
            "server_args": variant_args(args), "folio_settings": variant_settings(args),
            **_server_and_start(args, started), **result, "in_flight": config.ocr.in_flight,
            # the series too (a sample a second): where the GPU went short, beside the
            # pipeline phase's own timing.queue
            "queue": sampler.summary(t0, t1)}


def step_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """``folio ingest`` (the engine's default route, ocr) on the documents of the preset's
    pages."""
    use_gpu(args)
    pw = preset_work(args, args.preset)
    pargs = _args_for(args, args.preset)
    sources = round_sources(pw, 1)
    out, report_path = pw / "out", pw / "report.json"
    config = config_for(args, args.preset)
    key = spec_key(config)
    started = time.time()
    run = run_cli(pargs, sources, out, report_path, pw / "cli.log",
                  Sampler(args.gpu, lambda: server_url(key)),
                  extra=tuple(user_options(args, args.preset)))
    seconds = run.report["timing"]["seconds"]
    return {"phase": "pipeline", "preset": args.preset, "variant": args.tag or "default",
            "server_args": variant_args(args), "folio_settings": variant_settings(args),
            **_server_and_start(args, started), "exit_code": run.code,
            # 1: the first run on a freshly started server; later runs on the same server
            # have measured faster in every plan (why is not known), so it is noted
            "run_on_server": args.run_on_server,
            "documents": run.report["totals"]["documents"], "pages": run.pages,
            "seconds": seconds, "pages_per_s": round(run.pages / seconds, 3),
            # every page of the documents a second, the model's and the text layer's
            # (differs from pages_per_s on a route that keeps text layers: --route auto)
            "document_pages_per_s": run.report["totals"].get("pages_per_s"),
            "cli_wall_seconds": run.wall_seconds,
            "completion_tokens_per_page": run.tokens // max(run.pages, 1),
            "totals": run.report["totals"], "attempt_errors": run.attempt_errors,
            "queue": run.window, "scheduler_queue": run.report["timing"].get("queue"),
            # when pages first and last ended, the finishing stages after the last page:
            # where the seconds outside the server's busy span went
            "timing": {k: v for k, v in run.report["timing"].items() if k != "queue"}}


def _server_and_start(args: argparse.Namespace, started: float) -> dict[str, Any]:
    """Which server a phase ran on (its owner process: one per server start, so a run's
    served and pipeline phases pair on it even where another server of the same preset
    and variant ran between them) and when it began (UTC)."""
    return {"server": f"owner-{args.owner_pid}" if args.owner_pid else None,
            "started_at": datetime.fromtimestamp(started, UTC).isoformat(
                timespec="seconds"),
            # the CPUs this step's processes may run on (the device script's SERVER_CPUS
            # for a served step, FOLIO_CPUS for a pipeline step), of the host's
            "cpus": f"{cpu_list(os.sched_getaffinity(0))} of {os.cpu_count()}"}


def _save(args: argparse.Namespace, name: str, result: dict[str, Any]) -> None:
    save_phase(Path(args.work) / "phases", name, result)


# --- main ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["pages", "offline", "seed", "served", "warm", "pipeline",
                                     "report", "smoke"])
    ap.add_argument("--work", default="/tmp/folio-engine-limit")
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--min-pages", type=int, default=1000)
    ap.add_argument("--min-documents", type=int, default=100,
                    help="documents at least (issue 47's runs: >= 500 pages of >= 100)")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--preset", default="chandra")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--model", default=DEFAULT_MODEL,
                    help="one model for every preset (default: each preset's model shape)")
    ap.add_argument("--owner-pid", type=int, help="keep the shared server alive while it lives")
    ap.add_argument("--server-args", default="",
                    help='a variant\'s vllm serve options, a JSON list: ["--api-server-count", "4"]')
    ap.add_argument("--folio-set", default="",
                    help='a variant\'s folio settings, a JSON list: '
                         '["limits.ocr_extra_pages=0"]')
    ap.add_argument("--tag", default="", help="the variant's name in the results")
    ap.add_argument("--repeats", type=int, default=1,
                    help="offline: timed runs of the same pages on one engine")
    ap.add_argument("--run-on-server", type=int,
                    help="pipeline: how many runs its server has served, this one included")
    ap.add_argument("--fake", action="store_true", help="the fake server instead of vLLM")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--command", default="", help="the whole command sequence, for the result")
    ap.add_argument("--gpu-name", default="",
                    help="report: the phases' GPU, when made again off the GPU machine")
    ap.add_argument("--earlier", default=str(ROOT / "bench" / "results" / "engine_limit.json"),
                    help="seed: the result whose offline phases this run reuses")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.step == "smoke":
        return smoke(args)
    if args.step == "report":
        result = report(work, Path(args.out), args.command, args.gpu_name)
        for row in result["results"]:
            print(json.dumps(row))
        return
    if args.step == "pages":
        print(json.dumps(step_pages(args)))
        return
    if args.step == "seed":
        print(json.dumps(seed(work, Path(args.earlier))))
        return
    if args.step == "offline":
        step_offline(args)
        return
    refuse_a_variant_that_changes_nothing(args, server_command)
    result = {"served": step_served, "warm": step_served, "pipeline": step_pipeline}[args.step](args)
    if args.step == "warm":
        print(json.dumps(result))
        return
    _save(args, phase_name(args), result)
    print(json.dumps({k: result.get(k) for k in ("phase", "preset", "pages", "seconds",
                                                  "pages_per_s", "prompt_tokens_per_page",
                                                  "attempt_errors")}))


def smoke(args: argparse.Namespace) -> None:
    """The pages, served and pipeline steps and the report against the fake server, on a
    few corpus PDFs (no GPU, so no offline phase)."""
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    base = [sys.executable, __file__]
    common = ["--work", str(work), "--fake"]
    steps = [["pages", "--pdfs", args.pdfs, "--min-pages", "20", "--min-documents", "3",
              "--presets", "chandra,generic"],
             ["served", "--preset", "chandra"], ["pipeline", "--preset", "chandra"],
             ["served", "--preset", "generic"],
             ["served", "--preset", "chandra", "--tag", "two-api-servers",
              "--server-args", '["--api-server-count", "2"]'],
             ["report", "--out", str(work / "results")]]
    for step in steps:
        subprocess.run([*base, step[0], *common, *step[1:]], check=True)


if __name__ == "__main__":
    main()
