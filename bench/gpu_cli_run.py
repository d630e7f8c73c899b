"""One `folio ingest` as a user runs it, in a process of its own, sampled while it runs
(:func:`run_cli`), and what its outputs hold (:func:`ocr_pages_in`); the shared server a
configuration attaches to (:func:`spec_key`, :func:`server_url`), for the sampler.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gpu_bench_settings import ROOT, cli_args
from bench.gpu_sampler import Sampler


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


def spec_key(config: Any) -> str:
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    return VLLMTaskRunner.from_config(config).spec().key()


def server_url(key: str) -> str | None:
    from folio.gpu.shared_server import ServerFiles, read_state

    state = read_state(ServerFiles(Path(os.environ["FOLIO_SERVER__STATE_DIR"]), key).state)
    return state.base_url if state and state.state == "ready" else None
