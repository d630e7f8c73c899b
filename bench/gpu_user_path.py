"""folio on a GPU as users run it, against the raw engine on the same pages.

The pipeline phase is ``folio ingest --engine vllm --model M --preset P`` itself (the
CLI's own code path, in this process so pages and GPU utilization can be timed), with the
defaults a user gets: route auto, Ghostscript compression on, validation, outputs,
chunks, embeddings and the LanceDB vector store, the hardware profile picked from the
GPU. The benchmark changes only what synthetic weights need and what keeps phases
independent, each listed in the result with its reason (bench/gpu_bench_settings.SETTINGS).

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

This file holds the steps (the pipeline, raw and serve phases) and the command line; the
pieces they share with bench/gpu_multi.py and bench/engine_limit.py are modules of their
own: gpu_bench_settings (the benchmark's settings and the user's command line),
gpu_documents (the documents and the engine's pages), gpu_raw_engine (the raw engine's
client), gpu_sampler (the GPU and vLLM's queue while a phase runs), gpu_cli_run (one
`folio ingest` as a user runs it), gpu_deployments (the deployment and live phases) and
gpu_user_path_report (the results).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gpu_bench_settings import resolved, use_gpu
from bench.gpu_cli_run import run_cli, server_url, spec_key
from bench.gpu_deployments import live_client, phase_deployment, phase_live
from bench.gpu_documents import build_corpus, engine_pages, round_sources
from bench.gpu_raw_engine import raw_request, send_raw
from bench.gpu_sampler import Sampler
from bench.gpu_user_path_report import report


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
    key = spec_key(config)  # imports Prefect here, not in the sampler's thread
    run = run_cli(args, sources, out, report_path, work / f"cli-r{args.round}.log",
                  Sampler(args.gpu, lambda: server_url(key)))
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
            result = asyncio.run(send_raw(endpoint, model, images, **raw_request(config)))
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
