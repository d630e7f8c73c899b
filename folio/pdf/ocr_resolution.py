"""The resolution a CPU OCR engine needs: measured from the text on the rendered page.

Why: the render plan (:mod:`folio.pdf.render_plan`) spends a vision model's pixel budget
(1600 px on the longest side by default) and never goes above a scan's own resolution.
Tesseract needs something else: its accuracy depends on the size of the letters in
pixels (an x-height of about 12 px or more, a line of about 24 px from ascender to
descender), not on the page. A newspaper page rendered to 1600 px, or a small book page rendered at
300 dpi, gives lines of 10-17 px, which Tesseract misreads ("cveral" for "general"). So
when a page goes to Tesseract, the text lines of the plan's render are measured (a
row-ink profile, :func:`text_line_px`), and a page whose lines are too small is
rendered again at the resolution that makes them :attr:`RenderSettings.ocr_line_px`
tall: upsampled when the scan is coarser than that (pdfium interpolates), within
:attr:`RenderSettings.ocr_max_dpi` and :attr:`RenderSettings.ocr_max_pixels`. The vision
models' plan is left as it is. Pure (numpy and Pillow).
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

from folio.settings.config import RenderSettings

__all__ = ["STRIPS", "ocr_dpi", "text_line_px"]

#: the page is measured in this many vertical strips, so the lines of two columns that
#: do not sit level do not merge into one tall band
STRIPS = 4
#: a row is inked when at least this share of a strip's pixels are ink
_ROW_INK_SHARE = 0.01
#: ink is this much darker than the paper (the median grey)
_INK_CONTRAST = 60
#: bands shorter than this many pixels are rules and specks, not lines of text
_MIN_BAND_PX = 3
#: at least this many bands make a measurement (a page of a few words says little)
_MIN_BANDS = 5


def text_line_px(image: Image.Image) -> float | None:
    """The median height in pixels of the page's text lines (ascender to descender), or
    None when there are too few lines to tell.

    Rows of each vertical strip with some ink form bands separated by blank rows
    (line spacing); a band is a line of text, or several lines that touch, which only
    ever overestimates the height (and so never upsamples a page that does not need it).
    """
    gray = np.asarray(image.convert("L"), dtype=np.int16)
    if gray.size == 0:
        return None
    paper = int(np.median(gray))
    ink = gray < paper - _INK_CONTRAST
    heights: list[int] = []
    for strip in np.array_split(ink, STRIPS, axis=1):
        if strip.shape[1] == 0:
            continue
        inked = strip.mean(axis=1) >= _ROW_INK_SHARE
        heights += [h for h in _runs(inked) if h >= _MIN_BAND_PX]
    if len(heights) < _MIN_BANDS:
        return None
    return float(np.median(heights))


def _runs(flags: np.ndarray) -> list[int]:
    """Lengths of the runs of True in a 1-D boolean array."""
    padded = np.concatenate(([False], flags, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [int(b - a) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def ocr_dpi(plan_dpi: float, line_px: float | None, width_pt: float, height_pt: float,
            settings: RenderSettings) -> tuple[float, str] | None:
    """The DPI to render the page at for OCR, and why; None when the plan's render will
    do (lines unmeasured, or at least :attr:`RenderSettings.ocr_min_line_px` tall)."""
    if line_px is None or line_px <= 0 or line_px >= settings.ocr_min_line_px:
        return None
    dpi = min(plan_dpi * settings.ocr_line_px / line_px, settings.ocr_max_dpi)
    area_in2 = (width_pt / 72.0) * (height_pt / 72.0)
    if area_in2 > 0:
        dpi = min(dpi, math.sqrt(settings.ocr_max_pixels / area_in2))
    if dpi <= plan_dpi * 1.1:  # capped to about the plan: not worth a second render
        return None
    return dpi, (f"OCR: text lines {line_px:.0f}px at {plan_dpi:.0f}dpi -> {dpi:.0f}dpi "
                 f"for {settings.ocr_line_px:.0f}px lines")
