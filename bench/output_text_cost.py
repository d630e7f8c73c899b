"""Host CPU a page costs folio, by the text the OCR model answers: what a GPU benchmark's
synthetic output costs against text like a real model's.

Why: on the GPU machine folio's flow process and vLLM's front end share the host's cores.
A synthetic model's answer used to be 768 tokens of ``<|filler_N|>`` marks, about 12,500
characters a page (bench/synthetic_text_vocab.py says why); an OCR model's 768 tokens are
about 3,400 characters of prose. Everything folio does per page after the answer (parse,
checks, chunking, embedding) grows with that text, so the benchmark measured folio on more
CPU work a page than users' runs have. This runs ``folio ingest --route ocr`` (olmocr2
preset, the user's defaults) on the same PDFs against the fake server (tests/openai_fake.py)
answering each kind of text, and reports the flow process's core-seconds a page over the
flow's own time, from bench/host_cpu.py's samples.

    .venv/bin/python bench/output_text_cost.py --pdfs ../shared/corpus/olmocr --pages 80
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _measure import readable_pdfs, save
from synthetic_text_vocab import sample_text

TOKENS = 768  # the GPU benchmark's fixed answer length (bench/gpu_user_path.SETTINGS)


def outputs(work: Path) -> dict[str, Path]:
    """The answers compared: the old synthetic text, the rewritten vocabulary's, and a
    recorded olmOCR 2 page (a short one: 608 characters)."""
    rng = random.Random(0)
    filler = "".join(f"<|filler_{rng.randint(256, 151642)}|>" for _ in range(TOKENS))
    texts = {"filler_marks": filler, "word_like_tokens": sample_text(TOKENS)}
    out = {}
    for name, text in texts.items():
        out[name] = work / f"{name}.txt"
        out[name].write_text(text)
    out["recorded_olmocr2_page"] = ROOT / "tests" / "data" / "model_outputs" / "olmocr2_page.md"
    return out


def pick_pdfs(folder: Path, pages: int, into: Path) -> int:
    """Small PDFs from ``folder`` (sorted, so the same ones each time) until ``pages``."""
    into.mkdir(parents=True, exist_ok=True)
    total = 0
    for pdf, doc in readable_pdfs(folder):
        n = len(doc)
        if n > 12:
            continue
        shutil.copy(pdf, into / f"{total:04d}-{pdf.name}")
        total += n
        if total >= pages:
            break
    return total


def run_once(sources: Path, output: Path, work: Path) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {**os.environ, "PREFECT_HOME": str(work / "prefect"), "PREFECT_UI_ENABLED": "false",
           "FOLIO_SERVER__STATE_DIR": str(work / "state")}
    fake = [sys.executable, str(ROOT / "tests" / "openai_fake.py"), "--port", "{port}",
            "--delay", "0.05", "--output", str(output)]
    sampler = subprocess.Popen([sys.executable, str(ROOT / "bench" / "host_cpu.py"),
                                "--out", str(work / "cpu.json"), "--seconds", "1800"])
    report = work / "report.json"
    try:
        code = subprocess.run(
            [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(sources),
             "--out", str(work / "out"), "--report", str(report), "--quiet",
             "--engine", "vllm", "--model", "fake", "--preset", "olmocr2", "--route", "ocr",
             # the GPU benchmark's settings for synthetic weights, and the fake as its server
             "--set", f"ocr.max_tokens={TOKENS}", "--set", "ocr.ignore_eos=true",
             "--set", "ocr.max_attempts=1", "--set", f"server.command={json.dumps(fake)}",
             "--profile", "cpu"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
            stderr=(work / "cli.log").open("w")).returncode
    finally:
        sampler.terminate()
        sampler.wait()
    if code not in (0, 3):  # 3: some pages quarantined, which is a result too
        raise SystemExit(f"folio ingest exited {code}: see {work / 'cli.log'}")
    rep = json.loads(report.read_text())
    start = rep["timing"]["started_unix"]
    end = start + rep["timing"]["seconds"]
    cores: dict[str, float] = {}
    for s in json.loads((work / "cpu.json").read_text())["samples"]:
        if start <= s["unix"] <= end + 1:
            for kind, c in s["cores"].items():
                cores[kind] = cores.get(kind, 0.0) + c  # cores over about a second each
    pages = rep["totals"]["pages"]
    return {"exit_code": code, "pages": pages, "pages_ok": rep["totals"]["pages_ok"],
            "chunks": sum(d.get("chunks", 0) for d in rep["documents"]),
            "seconds": rep["timing"]["seconds"],
            "flow_core_seconds_per_page": round(cores.get("folio-flow", 0.0) / pages, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="folio-output-cost-"))
    pages = pick_pdfs(Path(args.pdfs), args.pages, work / "sources")
    texts = outputs(work)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in texts}
    for repeat in range(args.repeats):  # interleaved, so load on the host spreads over all
        for name, path in texts.items():
            result = run_once(work / "sources", path, work / f"run-{name}")
            runs[name].append(result)
            print(repeat, name, result, flush=True)
    rows = {}
    for name, rs in runs.items():
        text = texts[name].read_text()
        rows[name] = {
            "chars_per_page": len(text),
            "chunks_per_page": round(statistics.median(r["chunks"] / r["pages"] for r in rs), 2),
            "flow_core_seconds_per_page": statistics.median(
                r["flow_core_seconds_per_page"] for r in rs),
            "runs": rs}
    base = rows["word_like_tokens"]["flow_core_seconds_per_page"]
    for row in rows.values():
        row["over_word_like_tokens"] = round(row["flow_core_seconds_per_page"] / base, 2)
    result = {
        "what": "folio's flow process, core-seconds a page (median of the repeats) over the "
                "flow's own time, by the text the OCR model answers",
        "pages": pages, "pdfs": args.pdfs, "cpus": os.cpu_count(), "results": rows,
        "settings": {"route": "ocr", "engine": "vllm", "preset": "olmocr2",
                     "route_why": "every page to the model, as the GPU benchmark's pipeline "
                                  "phase does (bench/engine_limit.py); olmocr2, its fastest "
                                  "preset, where the host was fullest",
                     "ocr.max_tokens": TOKENS, "ocr.ignore_eos": True, "ocr.max_attempts": 1,
                     "why": "the GPU benchmark's settings for synthetic weights; the server "
                            "is tests/openai_fake.py answering the same text to every page "
                            "after 0.05 s",
                     "profile": "cpu (the fake's budgets: this host has no GPU)"}}
    print("wrote", save("output_text_cost", result))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
