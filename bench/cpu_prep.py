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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import corpus_dir, median, save

from folio.errors import FolioError
from folio.models import PagePrep
from folio.pdf.page_worker import WorkerJob, prepare_pages, probe
from folio.pipeline import COMPRESS_MIN_BYTES_PER_PAGE, COMPRESS_MIN_SAVING, compression_dpi
from folio.settings.config import PipelineConfig

TOKEN_PX = 32 * 32


def corpus_pdfs() -> list[Path]:
    root = corpus_dir()
    if (root / "MANIFEST.tsv").is_file():
        return sorted(root.rglob("*.pdf"))
    from folio.samples import make_samples

    return sorted(make_samples(Path(tempfile.mkdtemp(prefix="folio-bench-"))).values())


def render(pdf: Path, pages: list[int], config: PipelineConfig, work: Path) -> tuple[float, list[PagePrep]]:
    """The page worker: pdfium render at the adaptive plan + PNG encoding; wall seconds."""
    started = time.perf_counter()
    job = WorkerJob(pdf=pdf, pages=pages, out_dir=work / "pages", render_settings=config.render,
                    route_settings=config.route, render="all", timeout_s=300)
    preps = []
    for prep in prepare_pages(job):
        preps.append(prep)
        if prep.image_path:
            Path(prep.image_path).unlink(missing_ok=True)
    return time.perf_counter() - started, preps


def compress(pdf: Path, config: PipelineConfig, work: Path) -> tuple[float, Path | None]:
    """Ghostscript where the pipeline would run it; (seconds, compressed copy if it pays)."""
    from folio.pdf import ghostscript

    info = probe(pdf, None, 60, 4096)
    if pdf.stat().st_size / max(info.page_count, 1) < COMPRESS_MIN_BYTES_PER_PAGE:
        return 0.0, None
    out = work / "c.pdf"
    started = time.perf_counter()
    try:
        comp = ghostscript.compress(pdf, out, image_dpi=compression_dpi(info.max_page_pt, config),
                                    timeout_s=120)
    except FolioError:
        return time.perf_counter() - started, None
    saved = 1 - (comp.compressed_bytes or comp.original_bytes) / max(comp.original_bytes, 1)
    used = saved >= COMPRESS_MIN_SAVING
    return time.perf_counter() - started, out if used else None


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
    totals: dict[str, list[float]] = {"gs": [], "render_original": [], "render_used": [], "pdftoppm": []}
    rendered = adaptive_tokens = fixed_tokens = compressed_docs = 0
    for rep in range(args.repeats):
        t = dict.fromkeys(totals, 0.0)
        for d in usable:
            with tempfile.TemporaryDirectory(prefix="folio-bench-") as tmp:
                work = Path(tmp)
                gs_s, small = compress(d["pdf"], config, work)
                orig_s, preps = render(d["pdf"], d["pages"], config, work)
                used_s = render(small, d["pages"], config, work)[0] if small else orig_s
                t["gs"] += gs_s
                t["render_original"] += orig_s
                t["render_used"] += used_s
                t["pdftoppm"] += pdftoppm_same_pixels(d["pdf"], preps, work)
            if rep == 0:
                compressed_docs += small is not None
                for p in preps:
                    if p.plan is None:
                        continue
                    rendered += 1
                    adaptive_tokens += p.plan.pixels // TOKEN_PX
                    fixed_tokens += int((p.width_pt / 72 * 200) * (p.height_pt / 72 * 200)) // TOKEN_PX
        for key in totals:
            totals[key].append(t[key])
        print(f"repeat {rep + 1}: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) + f" ({rendered} pages)")
    med = {k: median(v) for k, v in totals.items()}
    pipeline_s = med["gs"] + med["render_used"]
    save("cpu_prep", {
        "documents": len(usable),
        "documents_unreadable": [d for d in docs if "skipped" in d],
        "documents_compressed": compressed_docs,
        "pages": rendered,
        "repeats": args.repeats,
        "seconds_median": {k: round(v, 2) for k, v in med.items()},
        "pages_per_s_per_core": {
            "folio_pipeline_gs_plus_render": round(rendered / pipeline_s, 2),
            "folio_render_only": round(rendered / med["render_original"], 2),
            "pdftoppm_png_same_pixels": round(rendered / med["pdftoppm"], 2),
        },
        "ratio_folio_render_over_pdftoppm": round(med["pdftoppm"] / med["render_original"], 2),
        "ratio_folio_pipeline_over_pdftoppm": round(med["pdftoppm"] / pipeline_s, 2),
        "ratio_render_from_compressed_over_original": round(med["render_original"] / med["render_used"], 2),
        "visual_tokens_adaptive": adaptive_tokens,
        "visual_tokens_fixed_200dpi": fixed_tokens,
        "ratio_tokens_adaptive_over_200dpi": round(adaptive_tokens / max(fixed_tokens, 1), 3),
        "render_settings": config.render.model_dump(),
        "note": "one process at a time (per core). gs: Ghostscript on documents the pipeline "
                "would compress (>= 64 KiB/page); render: the page worker (process start, "
                "pdfium text layer + render at the adaptive plan + PNG encode); render_used: "
                "from the compressed copy where it saved >= 10%; pdftoppm -png per page at "
                "the same pixel size, as olmOCR runs it",
    })


if __name__ == "__main__":
    main()
