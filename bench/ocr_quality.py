"""OCR quality through the whole pipeline on OCRmyPDF's scanned ``linn`` variants.

Each variant goes through folio's pipeline as a user would run it (adaptive render plan,
routing, tesseract, parsing, validation), and the page markdown is compared with the
corpus's reference ``linn.txt``: word recall (order-free) and sequence similarity (order).

    .venv/bin/python bench/ocr_quality.py
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import corpus_dir, median, save

from folio.io.sources import discover
from folio.page.quality import sequence_similarity, word_recall
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig

REFERENCE = "ocrmypdf/linn.txt"


def main() -> None:
    root = corpus_dir()
    if not (root / "MANIFEST.tsv").is_file():
        raise SystemExit(f"corpus absent at {root}: set FOLIO_CORPUS_DIR")
    with open(root / "MANIFEST.tsv", newline="") as fh:
        variants = [r["local_path"] for r in csv.DictReader(fh, delimiter="\t")
                    if r["ground_truth_file"].startswith(REFERENCE) and "scanned" in r["kind"]]
    reference = (root / REFERENCE).read_text()
    config = PipelineConfig.model_validate({"store": {"kind": "none"}})
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="folio-ocrq-") as tmp:
        services = Services(config, tmp)
        for path in variants:
            ref = discover([str(root / path)], config.s3)[0]
            doc = process_document(ref, services)
            text = "\n".join(p.markdown for p in doc.pages)
            results.append({
                "pdf": path, "outcome": doc.outcome.value, "pages": doc.page_count,
                "engine": doc.engine, "dpi": [round(p.plan.dpi) for p in doc.pages if p.plan],
                "word_recall": round(word_recall(reference, text), 3),
                "sequence_similarity": round(sequence_similarity(reference, text), 3),
                "seconds": round(doc.seconds, 1),
            })
            print(results[-1])
    save("ocr_quality", {
        "engine": "tesseract (psm 1, OMP_THREAD_LIMIT=1), default render plan",
        "reference": REFERENCE,
        "variants": results,
        "median_word_recall": median([r["word_recall"] for r in results]),
        "median_sequence_similarity": median([r["sequence_similarity"] for r in results]),
    })


if __name__ == "__main__":
    main()
