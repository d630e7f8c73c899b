"""The protocol every peer converter of ``bench/fidelity.py`` speaks, shared by the peer
scripts beside this file. It imports nothing beyond the standard library, so it runs in
any interpreter: the peer's own virtualenv included (``pymupdf4llm`` is AGPL and lives
only there, never in folio's).

A peer script is run as ``PYTHON bench/peers/NAME.py --out RESULTS.jsonl PDF...`` and
writes one JSON line per document, in the order given, flushed as each one ends (a run
cut short keeps what it finished)::

    {"source": PDF, "pages": [{"page": 1, "markdown": "...", "blocks": [[label, text]]}],
     "cpu_seconds": 1.2, "seconds": 1.5, "error": null}

``cpu_seconds`` is the CPU of the peer's own process tree spent on that document: this
process's user+system time (all threads), its reaped children, and its live
descendants with what they reaped (read from /proc), as ``bench/fidelity.py`` measures
folio. ``--warm-up PDF`` converts that document first, untimed, and writes a first line
``{"warm_up": PDF, "cpu_seconds": ...}`` (the process's CPU so far: imports, models
loaded, the warm-up itself), so one-time start-up is told apart from the per-document
figures, as a long ingestion run amortises it. ``--check`` prints a JSON object (the peer's versions and settings) and exits 0,
or exits 3 with the reason when the peer cannot run in this interpreter.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# bench/_measure.py: the standard library only, like this module (the peer's interpreter
# has none of folio's packages)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import tree_cpu_seconds

#: the exit status of ``--check`` (and of a run) when the peer's package is missing
MISSING = 3

Page = dict[str, Any]


def main(convert: Callable[[str], list[Page]], describe: Callable[[], dict[str, Any]],
         annotate: Callable[[str, list[Page]], None] | None = None,
         argv: list[str] | None = None) -> int:
    """Run ``convert`` on every PDF named on the command line, timed; ``annotate`` (not
    timed) may add what scoring needs but the user's output does not hold (a peer's own
    block labels). ``describe`` says what the peer is (versions, settings); it raises
    ImportError when the peer's package is absent."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="JSON lines, one per document")
    parser.add_argument("--check", action="store_true", help="print the peer's description")
    parser.add_argument("--warm-up", default=None, help="a PDF converted first, untimed")
    parser.add_argument("pdfs", nargs="*")
    args = parser.parse_args(argv)
    try:
        description = describe()
    except ImportError as exc:
        print(f"peer unavailable in {sys.executable}: {exc}", file=sys.stderr)
        return MISSING
    if args.check:
        print(json.dumps(description))
        return 0
    if not args.out:
        parser.error("--out is required unless --check")
    with open(args.out, "w") as out:
        if args.warm_up:
            error = None
            try:
                convert(args.warm_up)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            out.write(json.dumps({"warm_up": args.warm_up, "error": error,
                                  "cpu_seconds": round(tree_cpu_seconds(), 3)}) + "\n")
            out.flush()
        for pdf in args.pdfs:
            cpu0, wall0 = tree_cpu_seconds(), time.monotonic()
            pages: list[Page] = []
            error = None
            try:
                pages = convert(pdf)
            except Exception as exc:  # a peer's failure on one document is a result
                error = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
            seconds = time.monotonic() - wall0
            cpu = tree_cpu_seconds() - cpu0
            if annotate is not None and error is None:
                try:
                    annotate(pdf, pages)
                except Exception:  # labels are extra: the markdown stands without them
                    traceback.print_exc()
            out.write(json.dumps({"source": pdf, "pages": pages, "cpu_seconds": round(cpu, 3),
                                  "seconds": round(seconds, 3), "error": error}) + "\n")
            out.flush()
    return 0
