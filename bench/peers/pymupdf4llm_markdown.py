"""Peer ``pymupdf4llm``: PyMuPDF4LLM's markdown with PyMuPDF-Layout active, running
headers and footers left out (``header=False, footer=False``): its documented best
setting for RAG. Page by page (``page_chunks=True``), so the olmOCR tests read each
page as they read folio's.

AGPL-3.0 (PyMuPDF, pymupdf4llm, pymupdf-layout): a benchmark-only peer. This script
runs only in the peer's own interpreter (``bench/fidelity.py --peer-python`` or
``FOLIO_PEER_PYTHON``; ``bench/requirements-peers.txt``), in a process of its own; folio
never imports it, nor anything it imports. Protocol: ``bench/peers/_common.py``.

Scoring only (not timed): the page boxes PyMuPDF-Layout classed ``page-header`` or
``page-footer`` come back as blocks ``Page-Header``/``Page-Footer`` with the text
inside their box, so header/footer recall reads the peer's own labels the way it reads
folio's blocks.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Page, main

#: the keyword arguments given to ``pymupdf4llm.to_markdown``, and why
SETTINGS: dict[str, Any] = {"header": False, "footer": False, "page_chunks": True,
                            "show_progress": False}
FURNITURE = {"page-header": "Page-Header", "page-footer": "Page-Footer"}


def _load() -> Any:
    import pymupdf.layout  # noqa: F401  (activates the layout model: imported first)
    import pymupdf4llm

    return pymupdf4llm


def describe() -> dict[str, Any]:
    import importlib.metadata as md

    p4l = _load()
    layout_fn = getattr(p4l, "_layout_to_markdown", None)
    params = list(inspect.signature(layout_fn).parameters) if layout_fn else []
    missing = [k for k in ("header", "footer", "page_chunks") if k not in params]
    if missing:
        raise ImportError(f"pymupdf4llm {p4l.__version__}: to_markdown takes no {missing}")
    from pymupdf4llm.helpers.document_layout import select_ocr_function

    ocr = select_ocr_function()
    versions: dict[str, str | None] = {}
    for name in ("pymupdf", "pymupdf4llm", "pymupdf-layout", "rapidocr", "onnxruntime"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return {"versions": versions, "layout_active": bool(getattr(p4l, "_use_layout", False)),
            "to_markdown": SETTINGS, "layout_to_markdown_parameters": params,
            "ocr_function": f"{ocr.__module__}.{ocr.__name__}" if callable(ocr) else None}


def convert(path: str) -> list[Page]:
    chunks = _load().to_markdown(path, **SETTINGS)
    pages = []
    for n, chunk in enumerate(chunks, 1):
        meta = chunk.get("metadata") or {}
        pages.append({"page": int(meta.get("page_number") or n), "markdown": chunk["text"],
                      "blocks": [], "boxes": [[b["class"], list(b["bbox"])]
                                              for b in chunk.get("page_boxes") or []]})
    return pages


def annotate(path: str, pages: list[Page]) -> None:
    """The text inside each box classed page-header/page-footer, as a labelled block."""
    import pymupdf

    with pymupdf.open(path) as doc:
        for page in pages:
            if not 1 <= page["page"] <= doc.page_count:
                continue
            pdf_page = doc[page["page"] - 1]
            for cls, bbox in page.pop("boxes", []):
                if cls in FURNITURE:
                    text = pdf_page.get_text("text", clip=pymupdf.Rect(bbox)).strip()
                    page["blocks"].append([FURNITURE[cls], text])


if __name__ == "__main__":
    sys.exit(main(convert, describe, annotate))
