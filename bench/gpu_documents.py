"""The GPU benchmarks' documents and the engine's pages: byte-distinct copies of the PDFs
under ``--pdfs`` until a page and a document count are met (:func:`build_corpus`), each
round's folder of them in its order (:func:`round_sources`), and every page the route sends
to the engine, rendered by folio's page worker as the pipeline renders it
(:func:`engine_pages`: what the raw engine is sent).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def build_corpus(pdfs: Path, work: Path, min_pages: int, min_docs: int) -> dict[str, Any]:
    """Byte-distinct copies of the PDFs until both minimums are met; pages per document."""
    import pypdfium2

    originals: list[tuple[Path, int]] = []
    for pdf in sorted(pdfs.rglob("*.pdf")):
        try:
            doc = pypdfium2.PdfDocument(str(pdf))
            count = len(doc)
            doc.close()
        except Exception as exc:
            print(f"skipping {pdf.name}: {exc}", file=sys.stderr)
            continue
        if count:
            originals.append((pdf, count))
    if not originals:
        raise SystemExit(f"no readable PDFs under {pdfs}")
    docs_dir = work / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    docs: list[dict[str, Any]] = []
    copy = 0
    while sum(d["pages"] for d in docs) < min_pages or len(docs) < min_docs:
        for pdf, count in originals:
            target = docs_dir / f"c{copy:02d}-{pdf.name}"
            target.write_bytes(pdf.read_bytes() + f"\n% folio benchmark copy {copy}\n".encode())
            docs.append({"path": str(target), "pages": count})
        copy += 1
    meta = {"documents": docs, "copies": copy, "originals": len(originals),
            "pages": sum(d["pages"] for d in docs)}
    (work / "corpus.json").write_text(json.dumps(meta, indent=1))
    return meta


def round_sources(work: Path, round_no: int) -> Path:
    """A folder of hard links to the documents, named so that sorted order (folio's
    discovery order) is longest first in odd rounds and longest last in even ones."""
    meta = json.loads((work / "corpus.json").read_text())
    docs = sorted(meta["documents"], key=lambda d: (-d["pages"], d["path"]))
    if round_no % 2 == 0:
        docs.reverse()
    folder = work / f"round{round_no}"
    folder.mkdir(exist_ok=True)
    for rank, doc in enumerate(docs):
        link = folder / f"{rank:05d}-{Path(doc['path']).name}"
        if not link.exists():
            os.link(doc["path"], link)  # folio does not follow symbolic links
    return folder


def engine_pages(work: Path, config: Any) -> list[Path]:
    """Every page the route sends to the engine, rendered as the pipeline renders it
    (cached in ``work``; the same for every round)."""
    from concurrent.futures import ThreadPoolExecutor

    from folio.page.route import route_page
    from folio.pdf.page_worker import WorkerJob, prepare_pages, probe

    listing = work / "engine-pages.json"
    if listing.exists():
        return [Path(p) for p in json.loads(listing.read_text())]
    meta = json.loads((work / "corpus.json").read_text())

    def one(i: int, doc: dict[str, Any]) -> list[str]:
        pdf = Path(doc["path"])
        info = probe(pdf, None, 120, 4096)
        job = WorkerJob(pdf=pdf, pages=list(range(info.page_count)), out_dir=work / "raw" / f"d{i}",
                        render_settings=config.render, route_settings=config.route,
                        # as the pipeline's scheduler asks it
                        render="untrusted" if config.route.mode == "auto" else "all",
                        timeout_s=900)
        kept = []
        for page in prepare_pages(job):
            if route_page(page, config.route).kind == "ocr" and page.image_path:
                kept.append(page.image_path)
            elif page.image_path:
                Path(page.image_path).unlink(missing_ok=True)
        return kept

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        images = [p for ps in pool.map(one, range(len(meta["documents"])), meta["documents"])
                  for p in ps]
    listing.write_text(json.dumps(images))
    return [Path(p) for p in images]
