"""Peer ``pdfium``: the PDF's own text layer as pdfium hands it out, page by page
(pypdfium2 ``get_text_range``), no layout, OCR, tables or furniture labels. The floor a
RAG pipeline gets for free; runs in folio's own interpreter (pypdfium2 is Apache-2.0/
BSD). Protocol: ``bench/peers/_common.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Page, main


def describe() -> dict[str, Any]:
    import pypdfium2

    return {"package": "pypdfium2", "version": str(pypdfium2.version.PYPDFIUM_INFO),
            "pdfium": str(pypdfium2.version.PDFIUM_INFO),
            "call": "PdfPage.get_textpage().get_text_range() per page"}


def convert(path: str) -> list[Page]:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(path)
    try:
        pages = []
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            text = textpage.get_text_range()
            textpage.close()
            page.close()
            pages.append({"page": i + 1, "markdown": text.replace("\r\n", "\n"), "blocks": []})
        return pages
    finally:
        pdf.close()


if __name__ == "__main__":
    sys.exit(main(convert, describe))
