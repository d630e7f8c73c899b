"""CPU preparation throughput and visual-token cost, folio vs pdftoppm, in one run.

For every corpus PDF (FOLIO_CORPUS_DIR, default ../shared/corpus; the built-in samples
when absent) it times, on one core each, side by side and repeated:

- folio: Ghostscript compression (only where the pipeline would use it) + the page worker
  (pdfium render at the adaptive plan + PNG encoding), i.e. what the pipeline runs;
- pdftoppm -png per page (what olmOCR runs) at exactly the same pixel sizes.

It also sums the visual tokens (pixels / 32^2, Qwen-VL style) of the adaptive plan and of
a fixed 200-DPI plan over the same pages.

    .venv/bin/python bench/cpu_prep.py [--repeats 3] [--max-pages 12]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import median, save

from folio.config import PipelineConfig
from folio.errors import FolioError
from folio.models import PagePrep
from folio.pdf.page_worker import WorkerJob, prepare_pages, probe
from folio.pipeline import COMPRESS_MIN_BYTES_PER_PAGE, compression_dpi

TOKEN_PX = 32 * 32


def corpus_pdfs() -> list[Path]:
    root = Path(os.environ.get("FOLIO_CORPUS_DIR", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
    if (root / "MANIFEST.tsv").is_file():
        return sorted(root.rglob("*.pdf"))
    from folio.samples import make_samples

    return sorted(make_samples(Path(tempfile.mkdtemp(prefix="folio-bench-"))).values())


def folio_prepare(pdf: Path, pages: list[int], config: PipelineConfig, work: Path) -> tuple[float, list[PagePrep], bool]:
    """Compress where the pipeline would, then render + encode every page; wall seconds."""
    from folio.pdf import ghostscript

    started = time.perf_counter()
    info = probe(pdf, None, 60, 4096)
    src, compressed = pdf, False
    if pdf.stat().st_size / max(info.page_count, 1) >= COMPRESS_MIN_BYTES_PER_PAGE:
        out = work / "c.pdf"
        try:
            comp = ghostscript.compress(pdf, out, image_dpi=compression_dpi(info.max_page_pt, config),
                                        timeout_s=120)
            if (comp.compressed_bytes or 0) < 0.9 * comp.original_bytes:
                src, compressed = out, True
        except FolioError:
            pass
    job = WorkerJob(pdf=src, pages=pages, out_dir=work / "pages", render_settings=config.render,
                    route_settings=config.route, render="all", timeout_s=300)
    preps = []
    for prep in prepare_pages(job):
        preps.append(prep)
        if prep.image_path:
            Path(prep.image_path).unlink(missing_ok=True)
    return time.perf_counter() - started, preps, compressed


def pdftoppm_same_pixels(pdf: Path, preps: list[PagePrep], work: Path) -> float:
    started = time.perf_counter()
    for prep in preps:
        if prep.plan is None or prep.image_path is None and prep.error:
            continue
        n = str(prep.index + 1)
        subprocess.run(["pdftoppm", "-png", "-f", n, "-l", n, "-scale-to-x", str(prep.plan.width_px),
                        "-scale-to-y", str(prep.plan.height_px), "-singlefile", str(pdf),
                        str(work / "ppm")], capture_output=True, timeout=300)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-pages", type=int, default=12, help="pages per document (first N)")
    args = ap.parse_args()
    config = PipelineConfig()
    docs: list[dict[str, Any]] = []
    for pdf in corpus_pdfs():
        try:
            info = probe(pdf, None, 60, 4096)
        except FolioError as err:
            docs.append({"pdf": pdf.name, "skipped": err.reason})
            continue
        docs.append({"pdf": pdf, "pages": list(range(min(info.page_count, args.max_pages)))})
    usable = [d for d in docs if "pages" in d]
    folio_s: list[float] = []
    ppm_s: list[float] = []
    rendered = adaptive_tokens = fixed_tokens = compressed_docs = 0
    for rep in range(args.repeats):
        total_folio = total_ppm = 0.0
        for d in usable:
            with tempfile.TemporaryDirectory(prefix="folio-bench-") as tmp:
                seconds, preps, compressed = folio_prepare(d["pdf"], d["pages"], config, Path(tmp))
                total_folio += seconds
                total_ppm += pdftoppm_same_pixels(d["pdf"], preps, Path(tmp))
            if rep == 0:
                compressed_docs += compressed
                for p in preps:
                    if p.plan is None:
                        continue
                    rendered += 1
                    adaptive_tokens += p.plan.pixels // TOKEN_PX
                    fixed_tokens += int((p.width_pt / 72 * 200) * (p.height_pt / 72 * 200)) // TOKEN_PX
        folio_s.append(total_folio)
        ppm_s.append(total_ppm)
        print(f"repeat {rep + 1}: folio {total_folio:.1f} s, pdftoppm {total_ppm:.1f} s for {rendered} pages")
    f, p = median(folio_s), median(ppm_s)
    save("cpu_prep", {
        "documents": len(usable),
        "documents_unreadable": [d for d in docs if "skipped" in d],
        "documents_compressed": compressed_docs,
        "pages": rendered,
        "repeats": args.repeats,
        "folio_pages_per_s_per_core": round(rendered / f, 2),
        "pdftoppm_pages_per_s_per_core": round(rendered / p, 2),
        "ratio_folio_over_pdftoppm": round(p / f, 2),
        "folio_seconds_median": round(f, 2),
        "pdftoppm_seconds_median": round(p, 2),
        "visual_tokens_adaptive": adaptive_tokens,
        "visual_tokens_fixed_200dpi": fixed_tokens,
        "ratio_tokens_adaptive_over_200dpi": round(adaptive_tokens / max(fixed_tokens, 1), 3),
        "render_settings": config.render.model_dump(),
        "note": "one process each (per core); folio = probe + Ghostscript where it pays + "
                "pdfium render + PNG encode; pdftoppm -png per page at the same pixel size",
    })


if __name__ == "__main__":
    main()
