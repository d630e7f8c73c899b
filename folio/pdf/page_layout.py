"""Layout detection in the page worker child, beside the render.

Why here: the page image exists only in the child. Tesseract pages are rendered there
already (at the OCR resolution, which the detector shrinks to its 608x800 input); pages
with a trusted text layer are not rendered at all in ``render="untrusted"`` runs, so one
small render at ``layout.render_dpi`` (about 100 dpi: more pixels than the model's input
are wasted) is made for the detector alone and never written to disk. Detecting in the
parent would mean either pdfium in the parent (not thread-safe, and a hostile file could
crash the pipeline) or shipping images across processes and decoding them again; the
regions, a few hundred bytes a page, cross instead (:attr:`folio.models.PagePrep.layout`).

One detector per process: the onnxruntime session loads on first use (about a tenth of
a second) and serves every later page of the child's batch. The model's modules (numpy,
onnxruntime) are imported then too, in the child, never at module level: the zygote
imports this module before it forks, and must stay single-threaded (numpy's BLAS and
onnxruntime each start a thread when imported; a fork copies none of them, and a lock one
of them held at that moment would stay held in the child forever).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from folio.models import BBox, Label, Region, TextLayer
from folio.pdf.pdfium_doc import PageGeometry, render
from folio.settings.config import LayoutSettings

if TYPE_CHECKING:
    from folio.page.layout import LayoutDetector

__all__ = ["LONGEST_SIDE_PX", "detect_page", "detector", "layout_render_size",
           "table_inputs"]

log = logging.getLogger(__name__)

#: the longest side of a render made for detection: a poster at render_dpi would be
#: thousands of pixels for a model that looks at 800
LONGEST_SIDE_PX = 1600

#: a drawn path this thin (points) across its short side is a ruling line
RULING_MAX_PT = 2.0
#: a table region grown by this many points on each side when picking its words and
#: rulings: the detector's box may cut the frame or the outer letters by a hair
TABLE_MARGIN_PT = 4.0

#: regions whose words may become a table grid
_GRIDDED = frozenset({Label.TABLE, Label.FIGURE})

_detectors: dict[str, LayoutDetector] = {}


def detector(settings: LayoutSettings) -> LayoutDetector:
    """This process's detector for ``settings`` (made once, its model loaded on first use)."""
    from folio.page.layout import CdlaLayoutDetector  # here, not in the zygote (see above)

    key = settings.model_dump_json()
    found = _detectors.get(key)
    if found is None:
        found = _detectors[key] = CdlaLayoutDetector(settings)
    return found


def layout_render_size(width_pt: float, height_pt: float, dpi: float) -> tuple[int, int]:
    """Pixels of a render at ``dpi``, the longest side capped at :data:`LONGEST_SIDE_PX`."""
    scale = dpi / 72.0
    longest = max(width_pt, height_pt) * scale
    if longest > LONGEST_SIDE_PX:
        scale *= LONGEST_SIDE_PX / longest
    return max(1, round(width_pt * scale)), max(1, round(height_pt * scale))


def detect_page(page: pdfium.PdfPage, image: Image.Image | None, width_pt: float,
                height_pt: float, settings: LayoutSettings) -> list[Region] | None:
    """The page's layout regions, from ``image`` when the page was rendered, else from a
    render made here. None when detection failed: the page goes on without labels (a
    broken model must not cost the text); the reason goes to the child's stderr."""
    try:
        if image is None:
            image = render(page, *layout_render_size(width_pt, height_pt, settings.render_dpi))
        return detector(settings).detect(image, width_pt, height_pt)
    except Exception as exc:  # a layout failure costs the labels, never the page
        log.warning("layout detection failed: %s: %s", type(exc).__name__, exc)
        return None


def table_inputs(layer: TextLayer, page: pdfium.PdfPage, geometry: PageGeometry,
                 regions: list[Region] | None) -> TextLayer:
    """``layer`` with only the words inside table and figure regions (a figure may be a
    table the model took for a picture: :mod:`folio.page.layout_labels`), and the ruling
    lines there.

    Why here: the words and the page's drawn paths exist only in the child; the table
    grid is built in the parent, once the engine's blocks are labelled. Only what lies
    inside a table or figure crosses the pipe, so pages of text alone carry no words."""
    tables = [_grown(r.bbox) for r in regions or () if r.label in _GRIDDED]
    words = [w for w in layer.words
             if any(_inside((w.x0 + w.x1) / 2, (w.y0 + w.y1) / 2, box) for box in tables)]
    rulings = _rulings(page, geometry, tables) if words else []
    return layer.model_copy(update={"words": words, "rulings": rulings})


def _grown(box: BBox) -> BBox:
    m = TABLE_MARGIN_PT
    return BBox(x0=box.x0 - m, y0=box.y0 - m, x1=box.x1 + m, y1=box.y1 + m)


def _inside(x: float, y: float, box: BBox) -> bool:
    return box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1


def _rulings(page: pdfium.PdfPage, geometry: PageGeometry, tables: list[BBox]) -> list[BBox]:
    """Thin path objects (a stroked line, a filled hairline rectangle) whose middle lies
    in a table. Only each object's bounds are read: a path drawing a whole grid at once
    is one box that is not thin and is left out (cheap, and the gaps still find the
    columns)."""
    found: list[BBox] = []
    try:
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=2):
            box = geometry.to_top_left(*obj.get_bounds())
            if min(box.x1 - box.x0, box.y1 - box.y0) > RULING_MAX_PT:
                continue
            if any(_inside((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, t) for t in tables):
                found.append(box)
    except pdfium.PdfiumError as exc:  # rulings are a hint: the grid works without them
        log.warning("ruling lines unreadable: %s", exc)
        return []
    return found
