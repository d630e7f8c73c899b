"""Bullets found in the page image (folio.page.visual_bullets): how many lines it marks, and
which, on the corpus's pages read by Tesseract.

Why: the finder adds a list marker the engine did not read; a false one turns a line of
prose into a list item. A person checks the marked lines printed here against the pages
(the result keeps them): on scans, where Tesseract reads what bullets it sees, the finder
should mark few; on born-digital pages rendered and read as images, the dots Tesseract
drops.

    .venv/bin/python bench/visual_bullets.py [--pages 4] [--out bench/results/visual_bullets.json]

Each PDF's first ``--pages`` pages rendered at 200 DPI (pages over 40 megapixels left
out), read with ``tesseract --psm 1`` as folio's engine calls it; pages Tesseract turned
upright are not searched (their word boxes are the turned image's), as in the engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import command, corpus_dir, git

from folio.engines.tesseract import TesseractEngine, visual_bullets
from folio.models import PagePrep

REPO = Path(__file__).resolve().parents[1]
SETS = {
    "scans": ("ocrmypdf/*.pdf", "olmocr/bench/*.pdf", "docling/ocr/*.pdf"),
    "born_digital_as_images": ("docling/*.pdf", "olmocr/gnarly/*.pdf",
                               "olmocr/sample_dataset/*.pdf"),
}
DPI = 200
MAX_PIXELS = 40e6


def scan(files: list[Path], pages: int, engine: TesseractEngine) -> dict[str, Any]:
    lines = 0
    marked: list[str] = []
    seconds: list[float] = []
    for pdf_path in files:
        try:
            pdf = pdfium.PdfDocument(str(pdf_path))
        except pdfium.PdfiumError:
            continue  # a malformed or encrypted file: not a page to read here
        for index in range(min(len(pdf), pages)):
            width, height = pdf[index].get_size()
            scale = DPI / 72
            if width * height * scale * scale > MAX_PIXELS:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                image = Path(tmp) / "page.png"
                pdf[index].render(scale=scale).to_pil().convert("L").save(image)
                prep = PagePrep(index=index, width_pt=width, height_pt=height,
                                image_path=str(image))
                paragraphs, rotated = engine._paragraphs(prep)
                lines += sum(len(p.lines) for p in paragraphs)
                if rotated:
                    continue
                started = time.perf_counter()
                found = visual_bullets(str(image), paragraphs)  # the image decoded, searched
                seconds.append(time.perf_counter() - started)
                for p, i in sorted(found):
                    text = " ".join(w.text for w in paragraphs[p].lines[i].words)
                    marked.append(f"{pdf_path.name} p{index + 1}: {text[:80]}")
    return {"documents": len(files), "pages": len(seconds), "lines": lines,
            "marked": len(marked),
            "seconds_per_page_median": round(statistics.median(seconds), 4) if seconds else None,
            "marked_lines": marked}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus_dir()))
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "visual_bullets.json"))
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    engine = TesseractEngine()
    started = time.monotonic()
    sets = {name: scan(sorted({f for pattern in patterns for f in corpus.glob(pattern)}),
                       args.pages, engine) for name, patterns in SETS.items()}
    result = {
        "command": command(argv=sys.argv if argv is None else ["bench/visual_bullets.py", *argv]),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "folio")),
        "engine": engine.model, "dpi": DPI, "pages_per_document": args.pages,
        "settings": {
            "dpi": {"value": DPI, "why": "one fixed resolution for every page, so the "
                    "finder is judged on the same pixels each run; folio's own render plan "
                    "picks 150-300 DPI by the page's text size (a page's bullet is then "
                    "larger or smaller in pixels, its share of the line height the same)"},
            "born_digital_as_images": {"value": True, "why": "born-digital pages have "
                                       "bullets with known ground truth; read as images, as a "
                                       "scan of them would be (folio's default reads their "
                                       "text layer instead)"},
            "engine": {"value": "TesseractEngine()._paragraphs", "why": "the lines Tesseract "
                       "reads, as folio's engine calls it (psm 1, upright check), without "
                       "the rest of the pipeline"},
        },
        "sets": sets, "wall_seconds": round(time.monotonic() - started, 1),
        "how": __doc__,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for name, row in sets.items():
        print(f"{name}: {row['lines']} lines, {row['marked']} marked")
        for line in row["marked_lines"]:
            print("  " + line)


if __name__ == "__main__":
    main()
