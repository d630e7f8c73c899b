"""bench/gpu_user_path.py's report: ``gpu_user_path.json`` (the pipeline phases against
the raw engine's) and ``gpu_deployment.json`` (the deployment phase against them), made
from the phase files alone, so it runs again on any machine from a session's files.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

from bench.gpu_bench_settings import ENVIRONMENT, SETTINGS
from bench.gpu_sampler import gpu_name


def report(work: Path, out_dir: Path, command: str) -> dict[str, Any]:
    phases = [json.loads(p.read_text()) for p in sorted((work / "phases").glob("*.json"))
              if not p.name.startswith("serve-")]
    pipe = [p for p in phases if p["phase"] == "pipeline"]
    raw = [p for p in phases if p["phase"] == "raw"]
    dep = [p for p in phases if p["phase"] == "deployment"]
    meta = json.loads((work / "corpus.json").read_text())
    settings = {k: {"value": v, "why": why} for k, (v, why) in SETTINGS.items()}
    settings["environment"] = ENVIRONMENT
    gpu = gpu_name()
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
