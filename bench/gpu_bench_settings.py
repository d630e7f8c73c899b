"""The GPU benchmarks' settings and the user's command line they run: what they give folio
beyond a user's defaults and why (:data:`SETTINGS`, in every result), what they set around
folio and why (:data:`ENVIRONMENT`), the fake server that stands for vLLM off the GPU
machine, and the configuration the CLI resolves from that command line (:func:`resolved`),
which the raw engine's client and the servers read too, so the phases cannot drift apart.

bench/gpu_user_path.py, bench/gpu_multi.py and bench/engine_limit.py all start from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# before any step imports Prefect (each benchmark imports this module first)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

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
    options of that command line, as bench/gpu_cli_run.run_cli takes them."""
    from folio import cli
    from folio.settings.run_config import resolve_config

    work = Path(args.work)
    options = cli._parser().parse_args([*cli_args(args, work, work, work / "unused.json"),
                                        *extra])
    return resolve_config(engine=options.engine, route=options.route,
                          reprocess=options.reprocess, settings=cli._settings(options))
