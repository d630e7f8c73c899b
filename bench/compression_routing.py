"""Does Ghostscript compression change which pages go to the OCR engine?

For every corpus PDF the pipeline would compress (its own rule and settings, profile h200
and preset chandra, as in the GPU benchmark), count the pages the route sends to the
engine three ways: in the original, in the compressed copy read alone, and in the copy
with its text layer read from the original (what the page worker does now).

    .venv/bin/python bench/compression_routing.py   # -> bench/results/compression_routing.json
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def engine_pages(pdf: Path, pages: int, config: Any, out: Path, text_pdf: Path | None = None
                 ) -> int:
    from folio.page.route import route_page
    from folio.pdf.page_worker import WorkerJob, prepare_pages

    job = WorkerJob(pdf=pdf, text_pdf=text_pdf, pages=list(range(pages)), out_dir=out,
                    render_settings=config.render, route_settings=config.route,
                    render="untrusted", timeout_s=600)
    count = 0
    for page in prepare_pages(job):
        count += route_page(page, config.route).kind == "ocr"
        if page.image_path:
            Path(page.image_path).unlink(missing_ok=True)
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compression_routing.json"))
    args = ap.parse_args()
    from folio.models import DocumentResult
    from folio.pdf.page_worker import probe
    from folio.pipeline.prepare import _maybe_compress
    from folio.settings.run_config import resolve_config

    config = resolve_config(engine="vllm", route="auto",
                            settings={"ocr.profile": "h200", "ocr.preset": "chandra"})
    corpus = Path(args.corpus)
    with (corpus / "MANIFEST.tsv").open() as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["set"] != "robustness"]
    documents: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="folio-gs-route-") as tmp:
        for n, row in enumerate(rows):
            pdf = corpus / row["local_path"]
            try:
                info = probe(pdf, None, 120, 4096)
            except Exception as exc:  # a corpus file folio refuses: skip it
                print(f"skip {pdf.name}: {exc}", file=sys.stderr)
                continue
            doc = DocumentResult(source=str(pdf), page_count=info.page_count)
            doc.compression.original_bytes = pdf.stat().st_size
            work = Path(tmp) / f"d{n}"
            work.mkdir()
            copy = _maybe_compress(pdf, info, doc, work, config)
            if copy == pdf:
                continue
            pages = info.page_count
            documents.append({
                "pdf": row["local_path"], "pages": pages, "note": doc.compression.note,
                "original": engine_pages(pdf, pages, config, work / "a"),
                "copy_alone": engine_pages(copy, pages, config, work / "b"),
                "copy_with_original_text": engine_pages(copy, pages, config, work / "c", pdf),
            })
    totals = {k: sum(d[k] for d in documents)
              for k in ("pages", "original", "copy_alone", "copy_with_original_text")}
    result = {"documents_compressed": len(documents), "totals": totals,
              "changed": [d for d in documents if d["copy_alone"] != d["original"]],
              "documents": documents,
              "command": "python bench/compression_routing.py " + " ".join(sys.argv[1:]),
              "how": "the pipeline's compression rule (_maybe_compress) and route (route auto) "
                     "with the settings the GPU benchmark resolves (profile h200, preset "
                     "chandra); pages counted are those routed to the OCR engine"}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"documents_compressed": len(documents), "totals": totals}))


if __name__ == "__main__":
    main()
