"""Images as documents, measured: word recall, CPU per page against an image-only PDF,
and a mixed folder through an S3 endpoint with a rerun that reads nothing again.

1. Recall: the first page of born-digital corpus PDFs (MANIFEST kind ``born-digital``,
   at least 1000 characters of text layer on page 1, in path order: no pick by result),
   rendered by pdfium at 150, 200 and 300 DPI and saved as PNG, JPEG (quality 90, as a
   scanner's default) and TIFF (LZW), each read by folio as an image file with tesseract;
   word recall against the page's own text layer (folio.page.quality.word_recall).
2. CPU: the same 200-DPI page as a PNG file and as an image-only PDF (Pillow's PDF of the
   same pixels), each through the whole pipeline, alternated, repeated; CPU seconds of the
   process tree (page workers and tesseract included) per page, medians, and their ratio.
3. S3: the mixed folder of tests/mixed_folder.py (PDF, 2-page TIFF, EXIF-turned JPEG, ZIP,
   a symlink out of the folder; a DOCX when folio.formats.office is importable) run
   locally, then uploaded to moto's S3 server (a symlink cannot be an object) and run
   twice through a proxy that counts the GETs of the sources: the rerun must get none.
   LibreOffice seconds per DOCX when the converter is there.

Settings: the defaults (tesseract, route auto, layout on) except ``store.kind=none`` and
``validation.enabled=false`` (neither changes a page's text; both add the same constant
to either side of the CPU comparison) and ``reprocess=true`` in part 2 (each repeat reads
the document again instead of finding it done).

    .venv/bin/python bench/image_inputs.py [--pages 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _measure import corpus_dir, median, save, tree_cpu_seconds

from folio.io.sources import discover
from folio.models import DocumentResult
from folio.page.quality import word_recall
from folio.pipeline import Services, process_documents
from folio.settings.config import PipelineConfig

DPIS = (150, 200, 300)
FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
           "png": ("PNG", {}), "jpeg": ("JPEG", {"quality": 90}),
           "tiff": ("TIFF", {"compression": "tiff_lzw"})}
CHANGED = {"store.kind": ("none", "no vector store: embeddings do not change a page's text"),
           "validation.enabled": (False, "Great Expectations adds the same to both sides"),
           "reprocess": (True, "CPU part only: each repeat reads the page again instead of "
                               "answering from the first run's result")}


def born_digital_pages(limit: int) -> list[tuple[Path, str]]:
    """(pdf, text layer of page 1) of the first ``limit`` born-digital corpus PDFs with at
    least 1000 characters on page 1, in manifest path order."""
    import pypdfium2 as pdfium

    root = corpus_dir()
    chosen: list[tuple[Path, str]] = []
    with (root / "MANIFEST.tsv").open() as fh:
        rows = sorted(csv.DictReader(fh, delimiter="\t"), key=lambda r: r["local_path"])
    for row in rows:
        if "born-digital" not in row["kind"] or "text_chars_p1=" not in row["pdfium_probe"]:
            continue
        chars = int(row["pdfium_probe"].split("text_chars_p1=")[1].split(";")[0])
        if chars < 1000:
            continue
        pdf = root / row["local_path"]
        doc = pdfium.PdfDocument(str(pdf))
        try:
            text = doc[0].get_textpage().get_text_range()
        finally:
            doc.close()
        chosen.append((pdf, text))
        if len(chosen) == limit:
            break
    return chosen


def render(pdf: Path, dpi: int) -> Any:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        return doc[0].render(scale=dpi / 72).to_pil().convert("RGB")
    finally:
        doc.close()


def config(work: Path, **extra: Any) -> PipelineConfig:
    return PipelineConfig.model_validate({"work_dir": str(work), "store": {"kind": "none"},
                                          "validation": {"enabled": False}, **extra})


def run_one(path: Path, services: Services) -> DocumentResult:
    (doc,) = process_documents(discover([str(path)], services.config.s3), services)
    return doc


def recall_part(pages: list[tuple[Path, str]], work: Path) -> dict[str, Any]:
    services = Services(config(work / "w"), str(work / "out-recall"))
    rows = []
    try:
        for pdf, text in pages:
            for dpi in DPIS:
                image = render(pdf, dpi)
                for name, (fmt, options) in FORMATS.items():
                    path = work / f"{pdf.stem}-{dpi}.{name}"
                    image.save(path, fmt, dpi=(dpi, dpi), **options)
                    doc = run_one(path, services)
                    markdown = "\n".join(p.markdown for p in doc.pages)
                    rows.append({"pdf": str(pdf.relative_to(corpus_dir())), "dpi": dpi,
                                 "format": name, "outcome": doc.outcome.value,
                                 "recall": round(word_recall(text, markdown), 4),
                                 "plan": doc.pages[0].plan.reason if doc.pages and
                                 doc.pages[0].plan else ""})
                    print(rows[-1], flush=True)
    finally:
        services.close()
    summary = {f"{dpi}dpi_{name}": round(median([r["recall"] for r in rows
                                                 if r["dpi"] == dpi and r["format"] == name]), 4)
               for dpi in DPIS for name in FORMATS}
    at200 = [r["recall"] for r in rows if r["dpi"] == 200]
    return {"median_recall": summary, "median_recall_200dpi_all_formats": round(median(at200), 4),
            "target_200dpi": 0.95, "pages": rows}


def cpu_part(pages: list[tuple[Path, str]], work: Path, repeats: int) -> dict[str, Any]:
    services = Services(config(work / "wc", reprocess=True), str(work / "out-cpu"))
    rows = []
    try:
        for pdf, text in pages:
            image = render(pdf, 200).convert("L")
            png, image_pdf = work / f"{pdf.stem}-cpu.png", work / f"{pdf.stem}-cpu-image.pdf"
            image.save(png, "PNG", dpi=(200, 200))
            image.save(image_pdf, "PDF", resolution=200)
            run_one(png, services)  # warm: models, zygote, tesseract's data
            seconds: dict[str, list[float]] = {"image": [], "pdf": []}
            recall: dict[str, float] = {}
            for _ in range(repeats):
                for kind, path in (("image", png), ("pdf", image_pdf)):
                    before = tree_cpu_seconds()
                    doc = run_one(path, services)
                    seconds[kind].append(tree_cpu_seconds() - before)
                    recall[kind] = word_recall(text, "\n".join(p.markdown for p in doc.pages))
            rows.append({"pdf": str(pdf.relative_to(corpus_dir())),
                         "image_cpu_s": round(median(seconds["image"]), 3),
                         "image_pdf_cpu_s": round(median(seconds["pdf"]), 3),
                         "ratio": round(median(seconds["image"]) / median(seconds["pdf"]), 3),
                         "recall_image": round(recall["image"], 4),
                         "recall_image_pdf": round(recall["pdf"], 4),
                         "all_image_s": [round(s, 3) for s in seconds["image"]],
                         "all_pdf_s": [round(s, 3) for s in seconds["pdf"]]})
            print(rows[-1], flush=True)
    finally:
        services.close()
    return {"median_ratio_image_to_image_pdf": round(median([r["ratio"] for r in rows]), 3),
            "target_ratio": 1.1, "repeats": repeats, "pages": rows}


def s3_part(work: Path) -> dict[str, Any]:
    from tests.mixed_folder import write_mixed_folder
    from tests.s3_fault_proxy import FaultProxy
    from tests.s3_server import start_s3_server

    office = importlib.util.find_spec("folio.formats.office") is not None
    texts = write_mixed_folder(work / "mixed", dpi=200, docx=office)
    local_services = Services(config(work / "wl"), str(work / "out-local"))
    try:
        started = time.monotonic()
        local = process_documents(discover([str(work / "mixed" / "in")], local_services.config.s3),
                                  local_services)
        local_s = time.monotonic() - started
    finally:
        local_services.close()
    result: dict[str, Any] = {
        "entries": sorted(texts), "office_converter": office,
        "local": {Path(d.source).name: {"outcome": d.outcome.value, "format": d.format,
                                        "reason": d.reason, "pages": d.page_count}
                  for d in local},
        "local_seconds": round(local_s, 2)}
    if office:
        result["office_seconds_per_docx"] = [
            round(d.seconds, 2) for d in local if d.format == "docx"]
    with start_s3_server() as server:
        bucket = server.create_bucket()
        for path in sorted((work / "mixed" / "in").iterdir()):
            if not path.is_symlink():
                server.client.put_object(Bucket=bucket, Key=f"in/{path.name}",
                                         Body=path.read_bytes())
        proxy = FaultProxy(server.endpoint_url, match=f"/{bucket}/in/", methods={"GET"}).start()
        try:
            s3_config = config(work / "ws", s3={
                "endpoint_url": proxy.url, "region": "us-east-1", "access_key_id": "test",
                "secret_access_key": "test"})
            for run in ("first", "rerun"):
                proxy.seen = 0
                services = Services(s3_config, f"s3://{bucket}/out")
                try:
                    started = time.monotonic()
                    docs = process_documents(discover([f"s3://{bucket}/in/"], s3_config.s3),
                                             services)
                    seconds = time.monotonic() - started
                finally:
                    services.close()
                result[f"s3_{run}"] = {
                    "seconds": round(seconds, 2), "source_gets": proxy.seen,
                    "documents": {Path(d.source).name: {
                        "outcome": d.outcome.value, "cached": d.cached, "format": d.format,
                        "reason": d.reason} for d in docs}}
        finally:
            proxy.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pages = born_digital_pages(args.pages)
    with tempfile.TemporaryDirectory(prefix="folio-images-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        data: dict[str, Any] = {
            "settings_changed": {k: {"value": v, "reason": why} for k, (v, why) in CHANGED.items()},
            "pages_digest": hashlib.sha256("".join(str(p) for p, _ in pages).encode()
                                           ).hexdigest()[:12],
            "recall": recall_part(pages, work),
            "cpu": cpu_part(pages, work, args.repeats),
            "s3": s3_part(work),
        }
        data["seconds"] = round(time.monotonic() - started, 1)
    save("image_inputs", data)


if __name__ == "__main__":
    main()
