"""Do Office files come out as their authors structured them? folio beside docling and
markitdown on Office files with known content (issue 54's "measured").

bench/office_docs.py writes a report (DOCX), a workbook (XLSX) and a deck (PPTX) from a
fixed spec, and LibreOffice converts them to ODT, RTF, DOC, XLS, ODS, ODP and PPT. Each
reader reads each file in a process of its own (bench/office_runs.py): folio as a user
runs it (``folio ingest FOLDER --out OUT``, its defaults: nothing changed), docling and
markitdown from their own virtualenv (``--anchors-python``). bench/office_scoring.py scores
what each wrote: word recall, list items as list items (and at their depth and kind),
headings at their level, table cells in their row and column, sheet names, notes,
comments, footnotes, link URLs, chart values and captions present, private-use glyphs;
folio from its blocks (document.json) and document.md, its chunks beside; the anchors from
their markdown. CPU seconds a file are the reader's process and all it reaped.

    .venv/bin/python bench/office_structure.py --anchors-python /work/wt/anchors-venv/bin/python

writes bench/results/office_structure.json (``--result NAME`` for another name). The
anchors' virtualenv (outside the repository; docling pulls torch):

    uv venv /work/wt/anchors-venv
    VIRTUAL_ENV=/work/wt/anchors-venv uv pip install docling 'markitdown[all]' 'lxml<6' odfdo
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import git, save

from bench.office_docs import build_all
from bench.office_runs import REPO, Run, anchor_run, folio_run, server_cpu_s, timed
from bench.office_scoring import score, word_recall
from bench.office_summary import summarise
from bench.office_truth import Fixture

ANCHORS = ("docling", "markitdown")
ANCHOR_NOTES = {
    "lxml<6": "markitdown 0.1.9's DOCX pre-processing parses word/document.xml with "
              "BeautifulSoup, which with lxml 6 drops the w: prefixes: every DOCX failed "
              "('Could not find the body element')",
    "odfdo": "docling reads ODT/ODS/ODP only with it (its ImportError says so)",
}


def _read(reader: str, fixture: Fixture, work: Path, anchors_python: str | None) -> Run:
    folder = Path(tempfile.mkdtemp(prefix=f"{reader}-", dir=work))
    if reader == "folio":
        run = folio_run(str(REPO / ".venv" / "bin" / "folio"), fixture.path, folder)
    else:
        assert anchors_python is not None
        run = anchor_run(anchors_python, reader, fixture.path, folder)
    print(f"{fixture.name} {reader}: {run.cpu_s} CPU s, {run.wall_s} s {run.error[:80]}",
          flush=True)
    return run


def _row(fixture: Fixture, run: Run) -> dict[str, Any]:
    row: dict[str, Any] = {
        "cpu_s": run.cpu_s, "wall_s": run.wall_s, "returncode": run.returncode,
        "error": run.error, "markdown_chars": len(run.markdown),
        "scores": score(fixture.truth, run.markdown, run.structure)}
    if run.chunks is not None:  # folio: what reaches the vector store
        chunk_text = "\n\n".join(run.chunks)
        row["outcome"] = run.outcome
        row["chunks"] = {"count": len(run.chunks),
                         "word_recall": round(word_recall(fixture.truth.text, chunk_text), 4),
                         "present": score(fixture.truth, chunk_text, run.structure)["present"],
                         "private_use_chars": sum(0xE000 <= ord(c) <= 0xF8FF
                                                  for c in chunk_text)}
    if run.detail:
        row["anchor"] = run.detail
    return row


def _versions(anchors_python: str | None) -> dict[str, str]:
    soffice = subprocess.run(["soffice", "--version"], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL).stdout.strip()
    found = {"libreoffice": soffice}
    if anchors_python:
        _, _, _, output = timed([anchors_python, "-c", "from importlib.metadata import "
                                 "version as v; print(v('docling'), v('markitdown'))"])
        docling, _, markitdown = output.strip().partition(" ")
        found.update(docling=docling, markitdown=markitdown)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors-python", help="the Python of a virtualenv with docling "
                        "and markitdown; without it only folio runs")
    parser.add_argument("--readers", default="folio,docling,markitdown")
    parser.add_argument("--jobs", type=int, default=2,
                        help="runs side by side (each one's CPU is its own; wall grows)")
    parser.add_argument("--result", default="office_structure")
    parser.add_argument("--keep", type=Path, help="keep the files and outputs here")
    args = parser.parse_args()
    readers = [r for r in args.readers.split(",") if r == "folio" or args.anchors_python]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    work = args.keep or Path(tempfile.mkdtemp(prefix="office-structure-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    fixtures = build_all(work / "files")
    build_s = time.monotonic() - t0
    load_before, server_before = os.getloadavg()[0], server_cpu_s()
    jobs = [(reader, fixture) for fixture in fixtures for reader in readers]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = list(pool.map(lambda job: _read(job[0], job[1], work, args.anchors_python),
                             jobs))
    files: dict[str, Any] = {f.name: {"format": f.format, "made_from": f.source,
                                      "bytes": f.path.stat().st_size, "readers": {}}
                             for f in fixtures}
    for (reader, fixture), run in zip(jobs, runs, strict=True):
        files[fixture.name]["readers"][reader] = _row(fixture, run)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    save(args.result, {
        "what": "Office files with known content (bench/office_docs.py) read by folio and "
                "the anchors, one file a process; scores by bench/office_scoring.py",
        "settings": {"folio": "the user's defaults: `folio ingest FOLDER --out OUT` "
                              "(--report and --quiet only; nothing changed)",
                     "anchors": "docling DocumentConverter().convert(file).document."
                                "export_to_markdown(); markitdown MarkItDown().convert(file)"
                                ".text_content; defaults",
                     "anchors_install": ANCHOR_NOTES if args.anchors_python else
                     "not run: no --anchors-python"},
        "versions": _versions(args.anchors_python),
        "commit": git("rev-parse", "--short", "HEAD"),
        "tree_differs": bool(git("status", "--porcelain", "--", "folio")),
        "started": started,
        "machine": f"the shared 2-core development machine ({os.cpu_count()} CPUs seen); "
                   f"{args.jobs} runs side by side",
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "build_files_s": round(build_s, 1),
        "run_s": round(time.monotonic() - t0 - build_s, 1),
        "folio_prefect_server_cpu_s": round(server_cpu_s() - server_before, 2),
        "summary": summarise(files, readers),
        "files": files,
    })


if __name__ == "__main__":
    main()
