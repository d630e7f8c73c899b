"""folio on every GPU of a host: the pipeline on 1 GPU and on N, and the raw engines on
the same pages, for the issue "Every GPU of a host".

The pipeline phase is `folio ingest --engine vllm` with the user's defaults, exactly as in
bench/gpu_user_path.py (same documents, same benchmark settings); the only difference
between the 1-GPU and the N-GPU phase is CUDA_VISIBLE_DEVICES, from which folio's default
(`server.engines` 0) starts one vLLM server per visible GPU. The raw phase sends the same
engine pages straight to the same servers, each page to the one with the fewest
outstanding. The phases of one GPU set share their servers through a state folder of
their own and an owner process: kill it before the next set (GPU memory is the servers').

    python bench/gpu_user_path.py corpus --pdfs .corpus-carry --work /tmp/gub
    python bench/gpu_multi.py pipeline --gpus 0 --work /tmp/gub --owner-pid A
    python bench/gpu_multi.py raw --gpus 0 --work /tmp/gub --owner-pid A
    kill A
    python bench/gpu_multi.py pipeline --gpus 0,1 --work /tmp/gub --owner-pid B
    python bench/gpu_multi.py raw --gpus 0,1 --work /tmp/gub --owner-pid B
    kill B
    python bench/gpu_multi.py pipeline --gpus 0,1 --mode dp --work /tmp/gub --owner-pid C
    python bench/gpu_multi.py raw --gpus 0,1 --mode dp --work /tmp/gub --owner-pid C
    python bench/gpu_multi.py report --work /tmp/gub --out bench/results

``--mode dp`` is the other data-parallel choice: one ``vllm serve --data-parallel-size N``
over the N GPUs, with N times the profile's requests in flight.

Here, against the fake server (two fake servers stand for two GPUs):

    .venv/bin/python bench/gpu_multi.py smoke
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# the user-path benchmark's own pieces (bench/gpu_user_path.py)
from bench.gpu_bench_settings import ROOT, SETTINGS, resolved
from bench.gpu_cli_run import run_cli
from bench.gpu_documents import engine_pages, round_sources
from bench.gpu_raw_engine import raw_request, send_raw
from bench.gpu_sampler import Sampler, gpu_name


def gpu_list(args: argparse.Namespace) -> list[int]:
    return [int(g) for g in args.gpus.split(",") if g.strip()]


def use_gpus(args: argparse.Namespace) -> Path:
    """This process and the servers folio starts see ``--gpus``; their state is this set's."""
    gpus = gpu_list(args)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
    state = Path(args.work) / f"servers-gpus-{'-'.join(map(str, gpus))}"
    os.environ["FOLIO_SERVER__STATE_DIR"] = str(state)
    if args.owner_pid:
        os.environ["FOLIO_SERVER_OWNER_PID"] = str(args.owner_pid)
    if args.fake:  # the CPU profile pins no GPU: say how many servers stand for the GPUs
        os.environ["FOLIO_SERVER__ENGINES"] = str(len(gpus))
    return state


def dp_options(args: argparse.Namespace) -> list[str]:
    """``--mode dp``: vLLM's own data parallelism instead of one server per GPU: one
    ``vllm serve --data-parallel-size N`` over the N GPUs (``server.engines`` 1), with N
    times the profile's requests in flight, so both choices get the same budget per GPU.
    Empty for the default mode (folio's: one server per GPU)."""
    n = len(gpu_list(args))
    if args.mode != "dp" or n < 2:
        return []
    from folio.gpu.profiles import load_profile

    config = resolved(args)
    per_gpu = config.ocr.in_flight or load_profile(config.ocr.profile).in_flight
    extra = [*SETTINGS["server.extra_args"][0], "--data-parallel-size", str(n)]
    return ["--set", "server.engines=1", "--set", f"ocr.in_flight={per_gpu * n}",
            "--set", f"server.extra_args={json.dumps(extra)}"]


def ready_urls(state_dir: Path) -> list[str]:
    from folio.gpu.shared_server import read_state

    states = [read_state(p) for p in sorted(state_dir.glob("*.json"))]
    return [s.base_url for s in states if s is not None and s.state == "ready" and s.base_url]


def phase_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    state_dir = use_gpus(args)
    work = Path(args.work)
    tag = phase_tag(args)
    sources = round_sources(work, 1)
    out, report_path = work / f"out-multi-{tag}", work / f"report-multi-{tag}.json"
    run = run_cli(args, sources, out, report_path, work / f"cli-multi-{tag}.log",
                  Sampler(gpu_list(args), lambda: ready_urls(state_dir)),
                  extra=tuple(dp_options(args)))
    seconds, pages = run.report["timing"]["seconds"], run.pages
    return {"phase": "pipeline", "gpus": gpu_list(args), "mode": mode(args),
            "servers": len(ready_urls(state_dir)),
            "exit_code": run.code, "pages": run.report["totals"]["pages"], "pages_ocr": pages,
            "seconds": seconds, "cli_wall_seconds": run.wall_seconds,
            "pages_per_s": round(pages / seconds, 3),
            "completion_tokens_per_page": run.tokens // max(pages, 1),
            "after_last_page_s": run.report["timing"].get("after_last_page_s"),
            "queue": run.window, "config": run.report.get("config")}


def phase_raw(args: argparse.Namespace) -> dict[str, Any]:
    from folio.gpu.vllm_server import endpoint_members
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    use_gpus(args)
    config = resolved(args, dp_options(args))
    images = engine_pages(Path(args.work), config)
    with VLLMTaskRunner.from_config(config) as runner:  # the servers the CLI used
        assert runner.endpoint is not None
        bases = [m.base_url for m in endpoint_members(runner.endpoint)]
        model = runner.endpoint.served_model_name or config.ocr.model or "fake-ocr"
        with Sampler(gpu_list(args), bases) as sampler:
            t0 = time.monotonic()
            # the pipeline's token counts and first sampling, as gpu_user_path's raw phase
            result = asyncio.run(send_raw(runner.endpoint, model, images,
                                          **raw_request(config)))
            t1 = time.monotonic()
    return {"phase": "raw", "gpus": gpu_list(args), "mode": mode(args), "servers": len(bases),
            **result,
            "queue": sampler.summary(t0, t1), "in_flight_per_server": config.ocr.in_flight}


def report(work: Path, out_dir: Path, command: str) -> dict[str, Any]:
    """bench/results/gpu_multi.json: one entry per GPU count above one, each against the
    1-GPU pipeline of the same session."""
    phases = [json.loads(p.read_text()) for p in sorted((work / "phases").glob("multi-*.json"))]
    by = {(p["phase"], len(p["gpus"]), p.get("mode", "servers")): p for p in phases}
    one = by.get(("pipeline", 1, "servers"))
    results = []
    for (phase, n, how), pipe in sorted(by.items()):
        raw = by.get(("raw", n, how))
        if phase != "pipeline" or n == 1 or raw is None or one is None:
            continue
        results.append({
            "gpus": n, "mode": how, "servers": pipe["servers"], "pages": pipe["pages"],
            "pages_to_engine": pipe["pages_ocr"],
            "pipeline_pages_per_s_1gpu": one["pages_per_s"],
            "pipeline_pages_per_s": pipe["pages_per_s"],
            "scaling": round(pipe["pages_per_s"] / one["pages_per_s"], 3),
            "engine_pages_per_s": raw["pages_per_s"],
            "engine_pages_per_s_1gpu": (by.get(("raw", 1, "servers")) or {}).get("pages_per_s"),
            "ratio": round(pipe["pages_per_s"] / raw["pages_per_s"], 3),
            "gpu_utilization_pipeline": pipe["queue"].get("gpu_utilization_mean"),
            "seconds_after_last_page": pipe.get("after_last_page_s"),
        })
    settings = {k: {"value": v, "why": why} for k, (v, why) in SETTINGS.items()}
    result = {"gpu": gpu_name(), "commit": os.environ.get("FOLIO_BENCH_COMMIT"),
              "cpus": os.cpu_count(), "results": results, "settings": settings,
              "command": command,
              "how": "the 1-GPU and N-GPU pipeline phases are `folio ingest --engine vllm` with "
                     "the user's defaults on round 1's documents (longest first), differing only "
                     "in CUDA_VISIBLE_DEVICES; the raw phases send the route's engine pages to "
                     "the same servers, each page to the one with the fewest outstanding",
              "phases": phases}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_multi.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def smoke(args: argparse.Namespace) -> None:
    """Every step against the fake server (two fake servers for two GPUs)."""
    base = [sys.executable, __file__, "--work", args.work, "--fake"]
    user_path = ROOT / "bench" / "gpu_user_path.py"  # its corpus step: the documents, the pages
    subprocess.run([sys.executable, str(user_path), "corpus", "--work", args.work,
                    "--fake", "--pdfs", args.pdfs, "--min-pages", "30", "--min-docs", "8"],
                   check=True)
    for gpus, how in (("0", "servers"), ("0,1", "servers"), ("0,1", "dp")):
        owner = subprocess.Popen(["sleep", "600"])
        try:
            for step in ("pipeline", "raw"):
                subprocess.run([*base[:2], step, *base[2:], "--gpus", gpus, "--mode", how,
                                "--owner-pid", str(owner.pid)], check=True)
        finally:
            owner.kill()
            owner.wait()
    subprocess.run([*base[:2], "report", *base[2:], "--out",
                    str(Path(args.work) / "results")], check=True)


def mode(args: argparse.Namespace) -> str:
    return "dp" if dp_options(args) else "servers"


def phase_tag(args: argparse.Namespace) -> str:
    """g1, g2 (one server per GPU) or g2-dp (vLLM's data parallelism)."""
    n = len(gpu_list(args))
    return f"g{n}-dp" if mode(args) == "dp" else f"g{n}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["pipeline", "raw", "report", "smoke"])
    ap.add_argument("--work", default="/tmp/folio-gpu-multi")
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--gpus", default="0", help="comma-separated GPU indices")
    ap.add_argument("--model", default="/tmp/synthetic-vlm")
    ap.add_argument("--preset", default="chandra")
    ap.add_argument("--owner-pid", type=int, help="keep this set's servers alive while it lives")
    ap.add_argument("--mode", choices=["servers", "dp"], default="servers",
                    help="servers: folio's default, one vLLM server per GPU; dp: one server "
                         "with vLLM's --data-parallel-size over the GPUs")
    ap.add_argument("--fake", action="store_true", help="the fake server instead of vLLM")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--command", default="", help="the whole command sequence, for the result")
    args = ap.parse_args()
    work = Path(args.work)
    (work / "phases").mkdir(parents=True, exist_ok=True)
    if args.step == "smoke":
        return smoke(args)
    if args.step == "report":
        result = report(work, Path(args.out), args.command)
        print(json.dumps(result["results"]))
        return
    phase = {"pipeline": phase_pipeline, "raw": phase_raw}[args.step](args)
    name = f"multi-{args.step}-{phase_tag(args)}"
    (work / "phases" / f"{name}.json").write_text(json.dumps(phase, indent=1, default=str))
    print(json.dumps({k: phase.get(k) for k in ("phase", "gpus", "servers", "pages_ocr",
                                                "seconds", "pages_per_s")}))


if __name__ == "__main__":
    main()
