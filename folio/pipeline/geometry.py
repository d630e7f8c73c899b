"""Block boxes are data, not verdicts: every box is fitted to the page as folio renders it
(top-left origin, after /Rotate, the CropBox's offset taken out by
:class:`folio.pdf.pdfium_doc.PageGeometry`), and a box that still runs over is clipped to
the page and reported, never a reason to drop the page's text.

Why: text drawn past a page's CropBox (a bleed, a 2-up sheet cropped to one half, a
MediaBox far from the origin, a label set outside the visible page) is still the page's
text in pdfium's layer; validation once refused whole pages for such boxes and lost
everything on them. Pure.
"""

from __future__ import annotations

from folio.models import BBox, Block, Label

__all__ = ["BBOX_CLIP_TOLERANCE", "fit_blocks"]

#: boxes overshooting the page by less than this share of its size are rounding or glyph
#: overhang: clipped without a note
BBOX_CLIP_TOLERANCE = 0.02


def fit_blocks(blocks: list[Block], width: float, height: float) -> tuple[list[Block], str]:
    """Clip every box to the page (corners put in order first); returns the blocks and a
    note for the page when some box ran over by more than the tolerance ('' when none).
    A block wholly outside the page (a printer's slug above the CropBox, a job ticket in
    the bleed) keeps its text, as furniture: labelled a page header (above or left of the
    page) or footer (below or right), so it stays in document.json and out of the
    markdown, its box a line on the page's nearest edge. Pages of unknown size are left
    as they are."""
    if width <= 0 or height <= 0:
        return blocks, ""
    tol_x, tol_y = width * BBOX_CLIP_TOLERANCE, height * BBOX_CLIP_TOLERANCE
    over, worst, outside = 0, 0.0, 0
    for block in blocks:
        b = block.bbox
        if b is None:
            continue
        x0, x1 = sorted((b.x0, b.x1))
        y0, y1 = sorted((b.y0, b.y1))
        run = max(-x0, -y0, x1 - width, y1 - height, 0.0)
        if x0 < -tol_x or y0 < -tol_y or x1 > width + tol_x or y1 > height + tol_y:
            over, worst = over + 1, max(worst, run)
            if x1 <= 0 or y1 <= 0 or x0 >= width or y0 >= height:
                outside += 1
                before = y1 <= 0 or (x1 <= 0 and y0 < height)
                block.label = (Label.PAGE_HEADER if before else Label.PAGE_FOOTER).value
        block.bbox = BBox(x0=min(max(0.0, x0), width), y0=min(max(0.0, y0), height),
                          x1=min(max(0.0, x1), width), y1=min(max(0.0, y1), height))
    if not over:
        return blocks, ""
    where = (f", {outside} of them wholly outside it (kept as page furniture)"
             if outside else "")
    return blocks, (f"geometry: {over} block box(es) ran off the page by up to {worst:.0f} pt"
                    f"{where}; clipped to the page, text kept")
