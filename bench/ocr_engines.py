"""Tesseract against RapidOCR on the corpus's scans with reference text, side by side.

Both engines get the same page images, rendered as folio renders pages for a CPU OCR
engine (its render plan with ``ocr_resolution``: pages whose text lines are small are
rendered again finer), and are driven through folio's engine classes
(:class:`folio.engines.tesseract.TesseractEngine`,
:class:`folio.engines.rapidocr_engine.RapidOcrEngine`), so their blocks, reading order and
markdown are what the pipeline would get before layout labelling. Each page's markdown is
compared with its reference: word recall (order-free) and sequence similarity (reading
order), as bench/ocr_quality.py does. CPU seconds a page: every thread and child process
of the engine (Tesseract: the ``tesseract`` processes, read from RUSAGE_CHILDREN;
RapidOCR: the ONNX Runtime threads of the process that runs it), plus this process's own
parsing; medians over pages, after one untimed warm-up page per engine.

Pages: every MANIFEST row marked scanned whose ground truth is plain text: OCRmyPDF's
``linn`` variants (linn.txt; cardinal's four pages are linn turned 0/90/180/270) and
docling's ``ocr_test`` variants (one sentence; their reference is docling's Tesseract
output, so it favours Tesseract: reported apart).

RapidOCR runs in this process when it imports here; ``--rapidocr-python`` runs it in
another interpreter instead (rapidocr pulls opencv-python-headless, whose ``cv2`` clashes
with opencv-python's), through bench/_rapidocr_child.py, and the result says so.

    .venv/bin/python bench/ocr_engines.py [--rapidocr-python /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import corpus_dir, median, save

from folio.engines.base import OcrEngine
from folio.engines.rapidocr_engine import RapidOcrEngine, RawLine, raw_lines
from folio.engines.tesseract import TesseractEngine, tesseract_version
from folio.models import PagePrep
from folio.page.quality import sequence_similarity, word_recall
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import PipelineConfig

#: ground-truth files that are a page's plain text (the others are test lists or markup)
PLAIN_REFERENCES = ("ocrmypdf/linn.txt", "docling/ocr/groundtruth/")
CHILD = Path(__file__).resolve().parent / "_rapidocr_child.py"


def corpus_root() -> Path:
    root = corpus_dir()
    if not (root / "MANIFEST.tsv").is_file():
        raise SystemExit(f"corpus absent at {root}: set FOLIO_CORPUS_DIR")
    return root


def scans(root: Path) -> list[tuple[str, str]]:
    """(pdf, reference file) of every scanned document whose reference is plain text."""
    with open(root / "MANIFEST.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    found = []
    for row in rows:
        reference = row["ground_truth_file"].split(" ")[0]
        if "scanned" in row["kind"] and reference.startswith(PLAIN_REFERENCES):
            found.append((row["local_path"], reference))
    return found


def render(root: Path, pdf: str, out_dir: Path, config: PipelineConfig) -> list[PagePrep]:
    """The document's pages as folio renders them for a CPU OCR engine."""
    from folio.pdf.page_worker import probe

    info = probe(root / pdf, None, 120.0, config.limits.worker_memory_mb)
    job = WorkerJob(pdf=root / pdf, pages=list(range(info.page_count)), out_dir=out_dir,
                    render_settings=config.render, route_settings=config.route, render="all",
                    memory_mb=config.limits.worker_memory_mb, ocr_resolution=True)
    return list(prepare_pages(job))


def _cpu_s() -> float:
    """CPU seconds of this process (all threads) and its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class ChildReader:
    """RapidOCR in another interpreter: one image path out, one JSON answer back."""

    def __init__(self, python: str, threads: int) -> None:
        self.proc = subprocess.Popen([python, str(CHILD), str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline() or "{}")
        if "ready" not in ready:
            raise SystemExit(f"{python} could not start RapidOCR (see its stderr above)")
        self.version: str = ready["ready"]
        self.last_cpu_s = 0.0

    def __call__(self, image_path: str) -> list[RawLine]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(image_path + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        self.last_cpu_s = float(answer["cpu_s"])
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return raw_lines(answer["boxes"], answer["txts"], answer["scores"],
                         answer["word_results"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def measure(engine: OcrEngine, page: PagePrep, reference: str,
            child_cpu: Callable[[], float] | None) -> dict[str, Any]:
    """One page through one engine: its scores and the CPU and wall seconds it took."""
    cpu, wall = _cpu_s(), time.perf_counter()
    try:
        out = engine.recognize(page)
        text, error = out.markdown, None
    except Exception as exc:  # a failed page scores 0: the pipeline would fall back
        text, error = "", f"{type(exc).__name__}: {exc}"[:200]
    cpu_s = _cpu_s() - cpu + (child_cpu() if child_cpu else 0.0)
    return {"word_recall": round(word_recall(reference, text), 3),
            "sequence_similarity": round(sequence_similarity(reference, text), 3),
            "cpu_s": round(cpu_s, 2), "wall_s": round(time.perf_counter() - wall, 2),
            "error": error}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "pages": len(rows),
        "mean_word_recall": round(sum(r["word_recall"] for r in rows) / len(rows), 3),
        "median_word_recall": median([r["word_recall"] for r in rows]),
        "median_sequence_similarity": median([r["sequence_similarity"] for r in rows]),
        "median_cpu_s_per_page": median([r["cpu_s"] for r in rows]),
        "median_wall_s_per_page": median([r["wall_s"] for r in rows]),
        "failed_pages": sum(1 for r in rows if r["error"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rapidocr-python", help="run RapidOCR with this interpreter "
                        "(bench/_rapidocr_child.py) instead of in this process")
    parser.add_argument("--threads", type=int, default=1,
                        help="ONNX Runtime threads for RapidOCR (Tesseract: OMP_THREAD_LIMIT=1)")
    args = parser.parse_args()
    root = corpus_root()
    config = PipelineConfig.model_validate({"store": {"kind": "none"}})
    tesseract = TesseractEngine(languages="eng")
    child = ChildReader(args.rapidocr_python, args.threads) if args.rapidocr_python else None
    rapid = RapidOcrEngine(threads=args.threads, reader=child)
    engines: list[tuple[OcrEngine, Callable[[], float] | None]] = [
        (tesseract, None), (rapid, (lambda: child.last_cpu_s) if child else None)]
    pages: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="folio-ocr-engines-") as tmp:
        docs = [(pdf, ref, render(root, pdf, Path(tmp) / f"d{i}", config))
                for i, (pdf, ref) in enumerate(scans(root))]
        warm = next(p for _, _, preps in docs for p in preps if p.image_path)
        for engine, _ in engines:  # loads models, fills caches: not timed
            engine.recognize(warm)
        for pdf, ref, preps in docs:
            reference = (root / ref).read_text()
            for page in preps:
                row: dict[str, Any] = {"pdf": pdf, "page": page.index, "reference": ref,
                                       "dpi": round(page.plan.dpi) if page.plan else None}
                for engine, child_cpu in engines:
                    row[engine.name] = measure(engine, page, reference, child_cpu)
                pages.append(row)
                print(json.dumps(row), flush=True)
    if child is not None:
        child.close()
    groups = {"linn (OCRmyPDF scans, reference linn.txt)":
              [r for r in pages if r["reference"] == "ocrmypdf/linn.txt"],
              "ocr_test (docling, one sentence, reference is Tesseract's own output)":
              [r for r in pages if r["reference"] != "ocrmypdf/linn.txt"],
              "all": pages}
    table = {group: {engine.name: summary([r[engine.name] for r in rows])
                     for engine, _ in engines}
             for group, rows in groups.items() if rows}
    save("ocr_engines", {
        "engines": {
            "tesseract": f"{tesseract.model}, psm {tesseract.psm}, OMP_THREAD_LIMIT=1, "
                         "orientation check below 0.6 confidence (folio's TesseractEngine)",
            "rapidocr": f"{rapid.model if child is None else 'rapidocr ' + child.version}, "
                        f"ONNX Runtime intra-op threads {args.threads}, return_word_box, "
                        "folio's RapidOcrEngine (paragraphs + XY-cut order)",
        },
        "rapidocr_ran": (f"in another interpreter, {args.rapidocr_python} "
                         "(bench/_rapidocr_child.py): folio's venv has no rapidocr"
                         if child else "in this process"),
        "render": "folio's render plan with ocr_resolution (as for a CPU OCR engine), "
                  "same PNG for both engines",
        "cpu_s": "per page: the engine's threads and child processes plus this process's "
                 "parsing, after one untimed warm-up page per engine",
        "host": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs: "
                "wall seconds vary, CPU seconds less so)",
        "tesseract_version": tesseract_version(),
        "summary": table,
        "pages": pages,
    })


if __name__ == "__main__":
    main()
