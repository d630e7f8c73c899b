"""bench/engine_limit.py's phase files and its report: where each phase's result is
kept (:func:`save_phase`), an earlier session's phases seeded beside this one's
(:func:`seed`), and ``engine_limit.json`` made from them (:func:`report`), with the
settings the benchmark changes and why each variant was measured.

Why a file of its own: bench/engine_limit.py passed 500 lines (issue 46), and making the
report reads only the phase files, never vLLM or folio's pipeline: it runs again on any
machine from a session's files (``engine_limit.py report``).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the GPU benchmark's settings, environment and GPU name
from bench.gpu_bench_settings import ENVIRONMENT, SETTINGS
from bench.gpu_sampler import gpu_name as detected_gpu_name

#: what the phases change beyond bench/gpu_bench_settings.py's settings (the route is none of
#: it: `--engine vllm` sends every page to the model by default, so the offline, served
#: and pipeline phases have the same pages; a variant's own settings are in its row)
EXTRA_SETTINGS: dict[str, tuple[Any, str]] = {}

# why a variant (a tag other than ``default``) was measured: the report's ``variants`` field
# lists every variant's changed settings beside this reason, so that no figure measured in
# a configuration users do not run by default reads as a headline
VARIANT_WHY: dict[str, str] = {
    "nocompress": "what Ghostscript's compression costs the server's ramp; users compress by "
                  "default",
    "nice0": "page workers at nice 0 when 10 was the default beside a served engine",
    "auto": "the other route a user may choose (`route.mode=auto`), measured for the "
            "default route's choice",
    "x0": "no pages prepared ahead of the OCR stage (`limits.ocr_extra_pages=0`)",
    "api4": "four vLLM API servers instead of folio's one",
    "seqs384": "384 sequences a step and 384 requests in flight (`--max-num-seqs 384`, "
               "`ocr.in_flight=384`) for the GPU-busy target: the plain server ran 216-218 of "
               "its 256 with none waiting and the GPU 88-89% busy",
    "pin": "the vLLM server on CPUs of its own and folio on the others (the device "
           "script's SERVER_CPUS and FOLIO_CPUS, each phase's `cpus`): whether the engine's "
           "slower steps beside the pipeline come from sharing cores",
    "mnbt16k": "16384 tokens a step (`--max-num-batched-tokens 16384`) against the h200 "
               "profile's 32768 (the h100-80gb profile sets 16384 itself: on an H100 the "
               "variant is the default, and bench/engine_limit.py refuses it) for the "
               "GPU-busy target: the plain "
               "server's GPU dips below 80% in the seconds when answers end and new pages "
               "join (prefill and image encoding beside the decode), and is 100% busy in the "
               "last seconds when none join",
}


def save_phase(phases: Path, name: str, result: dict[str, Any]) -> Path:
    """Write one phase's result. Seeded copies of it (an earlier session's, which carry
    ``measured_at``) give way to it; this session's earlier runs of the same phase stay
    beside it as ``NAME-runK``, so the report's median counts every repeat (a run's place
    on its server moves its figure: see ``run_on_server``)."""
    phases.mkdir(parents=True, exist_ok=True)
    for old in [phases / f"{name}.json", *phases.glob(f"{name}-run*.json")]:
        if old.is_file() and "measured_at" in json.loads(old.read_text()):
            old.unlink()
    path, n = phases / f"{name}.json", 1
    while path.exists():
        n += 1
        path = phases / f"{name}-run{n}.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    return path


def seed(work: Path, earlier: Path) -> list[str]:
    """An earlier run's phases (same pages, same machine kind), each marked with the commit
    it was measured at: one device session cannot hold all three phases of every preset,
    so a session measures some and keeps the rest. A phase measured again replaces its
    seeded copy (same file name)."""
    data = json.loads(earlier.read_text())
    phases = work / "phases"
    phases.mkdir(parents=True, exist_ok=True)
    names = []
    for p in data.get("phases", []):
        p.setdefault("measured_at", data.get("commit"))
        if p.get("phase") == "offline":
            name = f"offline-{p['preset']}"
        else:
            name = f"{p['phase']}-{p['preset']}-{p.get('variant') or 'default'}"
        base, n = name, 1
        while name in names:  # repeated runs of one phase all count (the report's median)
            n += 1
            name = f"{base}-run{n}"
        (phases / f"{name}.json").write_text(json.dumps(p, indent=1))
        names.append(name)
    return names


def _run_order(path: Path) -> tuple[str, int]:
    """``NAME.json`` then ``NAME-run2.json``, ``NAME-run3.json``...: the order they ran in
    (a plain sort puts ``-run2`` first)."""
    name, _, n = path.stem.rpartition("-run")
    return (name, int(n)) if name and n.isdigit() else (path.stem, 1)


def report(work: Path, out_dir: Path, command: str, gpu_name: str = "") -> dict[str, Any]:
    """``engine_limit.json`` from the phase files under ``work`` (``gpu_name``: the GPU
    they ran on, when the report is made again elsewhere from the same files)."""
    phases = [json.loads(p.read_text()) for p in sorted((work / "phases").glob("*.json"),
                                                         key=_run_order)]
    by: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    offline_by: dict[str, list[dict[str, Any]]] = {}
    # a phase found after the run not to have run the user's configuration carries
    # ``invalid`` (why): it stays in the result's phases and counts in no row
    for p in (p for p in phases if not p.get("invalid")):
        if p["phase"] == "offline":  # one offline engine per preset: every variant's yardstick
            offline_by.setdefault(p["preset"], []).append(p)
        else:
            by.setdefault((p["preset"], p.get("variant", "default")), {}).setdefault(
                p["phase"], []).append(p)
    for preset in offline_by:
        by.setdefault((preset, "default"), {})
    for (preset, _), got in by.items():
        if preset in offline_by:
            got["offline"] = offline_by[preset]
    settings = {k: {"value": v, "why": why} for k, (v, why) in
                {**SETTINGS, **EXTRA_SETTINGS}.items()}
    settings["environment"] = ENVIRONMENT
    rows = []
    for (preset, variant), got in sorted(by.items()):
        rate = {ph: round(statistics.median(r["pages_per_s"] for r in rs), 3)
                for ph, rs in got.items()}
        offline = rate.get("offline")
        served = got.get("served") or got.get("pipeline") or [{}]
        row: dict[str, Any] = {
            "preset": preset, "variant": variant,
            "server_args": served[-1].get("server_args", []),
            "folio_settings": (got.get("pipeline") or [{}])[-1].get("folio_settings", []),
            "pages": max(r["pages"] for rs in got.values() for r in rs),
            # seeded offline phases may come from an earlier page set: each phase's own count
            "pages_by_phase": {ph: rs[-1]["pages"] for ph, rs in got.items()},
            "offline_pages_per_s": offline, "served_pages_per_s": rate.get("served"),
            "pipeline_pages_per_s": rate.get("pipeline"),
            "served_over_offline": round(rate["served"] / offline, 3)
            if offline and "served" in rate else None,
            "pipeline_over_offline": round(rate["pipeline"] / offline, 3)
            if offline and "pipeline" in rate else None,
            "pipeline_over_served": round(rate["pipeline"] / rate["served"], 3)
            if "pipeline" in rate and "served" in rate else None,
        }
        if "pipeline" in got:  # every run, with its place on its server
            docs = [r["document_pages_per_s"] for r in got["pipeline"]
                    if r.get("document_pages_per_s") is not None]
            if docs:  # all the documents' pages, layer-kept ones too
                row["pipeline_document_pages_per_s"] = round(statistics.median(docs), 3)
            row["pipeline_runs"] = [{"pages_per_s": r["pages_per_s"],
                                     "run_on_server": r.get("run_on_server"),
                                     "measured_at": r.get("measured_at") or os.environ.get(
                                         "FOLIO_BENCH_COMMIT")} for r in got["pipeline"]]
        for key in ("prompt_tokens_per_page", "preprocessing_seconds", "measured_at"):
            if "offline" in got and key in got["offline"][-1]:
                row[f"offline_{key}"] = got["offline"][-1][key]
        if "served" in got:
            row["served_prompt_tokens_per_page"] = got["served"][-1].get("prompt_tokens_per_page")
        # the GPU's busy share and the requests the server ran on average (of the in-flight
        # budget the client held): where a phase fell short of the engine
        # (medians over a phase's runs, as its pages/s)
        for ph in ("served", "pipeline"):
            for key, name in (("gpu_utilization_mean", "gpu_utilization"),
                              ("running_mean", "running_mean")):
                got_values = [r["queue"].get(key) for r in got.get(ph, [])]
                values = [v for v in got_values if v is not None]
                if values:
                    row[f"{ph}_{name}"] = round(statistics.median(values), 1)
        if "pipeline" in got:
            # the requests folio had sent and not yet had answered (its scheduler's
            # timeline), beside the server's running: the gap is in between
            means = []
            for r in got["pipeline"]:
                sent = [q["at_server"] for q in r.get("scheduler_queue") or []
                        if q.get("at_server") is not None and q.get("in_ladder", 0) > 0]
                if sent:
                    means.append(statistics.mean(sent))
            if means:
                row["pipeline_at_server_mean"] = round(statistics.median(means), 1)
        # seeded phases say where they were measured; this run's phases, this commit
        row["measured_at"] = {ph: rs[-1].get("measured_at") or os.environ.get(
            "FOLIO_BENCH_COMMIT") for ph, rs in got.items()}
        row["missing"] = [ph for ph in ("offline", "served", "pipeline") if ph not in got]
        rows.append(row)
    variants = {"default": "the user's defaults (no folio setting changed beyond `settings`)"}
    for row in rows:
        if row["variant"] != "default":
            changed = [*row["folio_settings"], *row["server_args"]]
            # the variant's own phases (the offline yardstick is every variant's)
            at = sorted({str(c) for ph, c in row["measured_at"].items() if ph != "offline"})
            variants[row["variant"]] = (
                f"{', '.join(map(str, changed)) or 'no setting changed'} "
                f"(measured at {', '.join(at)}): "
                f"{VARIANT_WHY.get(row['variant'], 'a variant, not the user default')}")
    not_counted = [{k: p.get(k) for k in ("phase", "preset", "variant", "pages_per_s",
                                          "run_on_server", "invalid")}
                   for p in phases if p.get("invalid")]
    result = {"gpu": gpu_name or detected_gpu_name(),
              "commit": os.environ.get("FOLIO_BENCH_COMMIT"),
              "results": rows, "variants": variants, "not_counted": not_counted,
              "settings": settings,
              "command": command,
              "how": "offline: LLM.chat in one process built from folio's `vllm serve` options "
                     "(bench/engine_limit.engine_kwargs), pages/s over the whole call "
                     "(preprocessing included; preprocessing_seconds: until vLLM had every "
                     "request); served: the same data URLs to folio's shared server, the "
                     "profile's requests in flight; pipeline: `folio ingest --engine vllm` (its "
                     "default route, ocr: every page to the model) on the documents of "
                     "those pages, over the flow's own time. One GPU, the "
                     "phases one after the other.",
              "phases": phases}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "engine_limit.json").write_text(json.dumps(result, indent=1) + "\n")
    return result
