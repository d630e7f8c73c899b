"""GIL a page's text judgement costs: :func:`folio.pdf.text_layer.score_text`, which weighs
each distinct character once, against the per-character reference it replaced (kept in
tests/test_text_layer.py, where the two are checked to agree), side by side on the same
texts.

    .venv/bin/python bench/score_text.py --pdfs ../shared/corpus --pages 200

Why: the judgement runs on every page's text layer in the page workers and on every OCR
answer in the flow process (folio/page/layer_or_ocr.py). On the H200 its per-character helpers
were the deepest folio frames in about 6% of the flow's GIL samples
(bench/results/engine_limit_runs/1dabbb9-olmocr2-default/summary.json). The texts are the
corpus PDFs' text layers, a page each (pypdfium2), as documents are, not one of our files.
Results: ``bench/results/score_text.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _measure import save


def page_texts(pdfs: Path, pages: int, min_chars: int = 200) -> list[tuple[str, float]]:
    """Text layers of the PDFs' pages (sorted files), with the page's area in pt²."""
    import pypdfium2 as pdfium

    out: list[tuple[str, float]] = []
    for pdf in sorted(pdfs.rglob("*.pdf")):
        if "malformed" in str(pdf.relative_to(pdfs)):
            continue  # other benchmarks' business, and they may crash this process
        try:
            doc = pdfium.PdfDocument(str(pdf))
            for index in range(len(doc)):
                page = doc[index]
                text = page.get_textpage().get_text_range()
                width, height = page.get_size()
                if len(text) >= min_chars:
                    out.append((text, width * height))
                if len(out) >= pages:
                    return out
        except pdfium.PdfiumError:
            continue
    return out


def median_ms(judge: Callable[..., Any], text: str, area: float, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        judge(text, page_area_pt2=area)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    from folio.pdf.text_layer import score_text
    from tests.test_text_layer import _reference_score

    def reference(text: str, *, page_area_pt2: float) -> tuple[float, str]:
        return _reference_score(text, page_area_pt2)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    texts = page_texts(Path(args.pdfs), args.pages)
    rows = []
    for text, area in texts:
        assert score_text(text, page_area_pt2=area) == reference(text, page_area_pt2=area)
        rows.append({"chars": len(text),
                     "reference_ms": median_ms(reference, text, area, args.repeats),
                     "score_text_ms": median_ms(score_text, text, area, args.repeats)})
    ref = statistics.median(r["reference_ms"] for r in rows)
    new = statistics.median(r["score_text_ms"] for r in rows)
    result = {
        "what": "ms a page to judge its text (median over pages of each page's median of "
                "the repeats), the per-character reference against score_text, same texts, "
                "same results (asserted)",
        "pages": len(rows), "pdfs": args.pdfs,
        "chars_per_page_median": statistics.median(r["chars"] for r in rows),
        "reference_ms_per_page": round(ref, 3), "score_text_ms_per_page": round(new, 3),
        "reference_over_score_text": round(ref / new, 2),
        "total_reference_ms": round(sum(r["reference_ms"] for r in rows), 1),
        "total_score_text_ms": round(sum(r["score_text_ms"] for r in rows), 1),
    }
    print("wrote", save("score_text", result))


if __name__ == "__main__":
    main()
