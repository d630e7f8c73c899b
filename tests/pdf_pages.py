"""A test PDF's first page as the page worker prepares it: pdfium's text layer, and with
layout regions the table inputs (words and rulings) the labelling stage reads."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium

from folio.models import PagePrep, Region
from folio.pdf.page_layout import table_inputs
from folio.pdf.pdfium_doc import page_geometry
from folio.pdf.text_layer import extract
from folio.settings.config import RouteSettings


def first_page_prep(pdf: Path, regions: list[Region] | None = None) -> PagePrep:
    doc = pdfium.PdfDocument(str(pdf))
    try:
        page = doc[0]
        geometry = page_geometry(page)
        layer = extract(page, width_pt=geometry.width_pt, height_pt=geometry.height_pt,
                        settings=RouteSettings())
        if regions is not None:
            layer = table_inputs(layer, page, geometry, regions)
        prep = PagePrep(index=0, width_pt=geometry.width_pt, height_pt=geometry.height_pt,
                        text_layer=layer, layout=regions)
        page.close()
    finally:
        doc.close()
    return prep
