"""The image size a vision model's own pipeline sends it, for the presets that have one.

Why: a model answers best to images like those it was trained and evaluated on. olmOCR 2
saw every page rendered to 1288 px on its longest side, whatever the page holds; Chandra
renders at 192 DPI or more (the shortest side at least 1024 px) and then fits the image
to an area of 3072x2048 px (Chandra 2 on a 28 px grid). folio's adaptive plan
(:mod:`folio.pdf.render_plan`) moves away from those sizes for small text and low-DPI
scans, which is right for a model without a reference and wrong for these. Pure
arithmetic; tests/test_conformance.py checks the sizes against the reference code.

Deliberate differences, both named in the conformance tests:

- olmOCR renders with ``pdftoppm -r DPI``, DPI from the MediaBox's longest side as
  ``pdfinfo`` prints it (two decimals), and poppler rounds each side up: where the
  printed size is a hair short of the real one (841.92 for 841.9217 pt) or the
  arithmetic a hair over (720 pt), the longest side becomes 1289 px (9 of the corpus's
  first pages). folio renders the page as pdfium shows it (the CropBox) from its exact
  size, so its longest side is 1288 px: what olmOCR means to send.
- Chandra renders at the DPI, then resizes with Lanczos to the fitted size; folio
  renders straight at the fitted size (the same size, one resampling fewer).

Example:
    >>> model_image_size("olmocr", 612, 792)
    (996, 1288)
    >>> model_image_size("chandra2", 612, 792)
    (1624, 2100)
"""

from __future__ import annotations

import math
from typing import Literal

__all__ = ["ModelSizing", "chandra_fit", "chandra_render_size", "model_image_size",
           "olmocr_size"]

ModelSizing = Literal["olmocr", "chandra1", "chandra2"]

#: olmOCR's --target_longest_image_dim (olmocr/pipeline.py)
OLMOCR_LONGEST_PX = 1288
#: Chandra's IMAGE_DPI and MIN_PDF_IMAGE_DIM (chandra/settings.py)
CHANDRA_DPI = 192.0
CHANDRA_MIN_SIDE_PX = 1024
#: chandra/model/util.py scale_to_fit: max_size, and min_size per version, Chandra 2's grid
CHANDRA_MAX_AREA = 3072 * 2048
CHANDRA1_MIN_AREA = 28 * 28
CHANDRA2_MIN_AREA = 1792 * 28
CHANDRA2_GRID = 28
#: float error of the size arithmetic (a side of 1288.0000000002 px is 1288 px)
_EPSILON_PX = 1e-6


def olmocr_size(width_pt: float, height_pt: float,
                longest_px: int = OLMOCR_LONGEST_PX) -> tuple[int, int]:
    """The longest side ``longest_px``, the other in proportion, rounded up as poppler
    rounds a side (less the float error, see the module doc)."""
    dpi = longest_px * 72.0 / max(width_pt, height_pt)
    return (max(1, math.ceil(width_pt * dpi / 72.0 - _EPSILON_PX)),
            max(1, math.ceil(height_pt * dpi / 72.0 - _EPSILON_PX)))


def chandra_render_size(width_pt: float, height_pt: float) -> tuple[int, int]:
    """chandra/input.py load_pdf_images: the DPI is the larger of 192 and the one that
    makes the shortest side 1024 px; pypdfium2 rounds each side up."""
    dpi = max(CHANDRA_MIN_SIDE_PX / min(width_pt, height_pt) * 72.0, CHANDRA_DPI)
    scale = dpi / 72.0
    return max(1, math.ceil(width_pt * scale)), max(1, math.ceil(height_pt * scale))


def chandra_fit(width: int, height: int, version: Literal[1, 2]) -> tuple[int, int]:
    """chandra/model/util.py scale_to_fit: the size an image of ``width`` x ``height`` is
    resized to before it is sent (Chandra 1: only when over or under the area bounds;
    Chandra 2: always onto the 28 px grid, the aspect ratio kept as well as the grid
    allows)."""
    if width <= 0 or height <= 0:
        return width, height
    pixels = width * height
    if version == 1:
        if pixels > CHANDRA_MAX_AREA:
            scale = (CHANDRA_MAX_AREA / pixels) ** 0.5
            return math.floor(width * scale), math.floor(height * scale)
        if pixels < CHANDRA1_MIN_AREA:
            scale = (CHANDRA1_MIN_AREA / pixels) ** 0.5
            return math.ceil(width * scale), math.ceil(height * scale)
        return width, height
    ratio = width / height
    scale = 1.0
    if pixels > CHANDRA_MAX_AREA:
        scale = (CHANDRA_MAX_AREA / pixels) ** 0.5
    elif pixels < CHANDRA2_MIN_AREA:
        scale = (CHANDRA2_MIN_AREA / pixels) ** 0.5
    grid = CHANDRA2_GRID
    w_blocks = max(1, round(width * scale / grid))
    h_blocks = max(1, round(height * scale / grid))
    while w_blocks * h_blocks * grid * grid > CHANDRA_MAX_AREA:
        if w_blocks == 1 and h_blocks == 1:
            break
        if w_blocks == 1:
            h_blocks -= 1
            continue
        if h_blocks == 1:
            w_blocks -= 1
            continue
        # take the cell off the side whose loss keeps the aspect ratio closer
        if abs((w_blocks - 1) / h_blocks - ratio) < abs(w_blocks / (h_blocks - 1) - ratio):
            w_blocks -= 1
        else:
            h_blocks -= 1
    return w_blocks * grid, h_blocks * grid


def model_image_size(sizing: ModelSizing, width_pt: float, height_pt: float) -> tuple[int, int]:
    """The pixel size ``sizing``'s pipeline sends for a page of this size (after /Rotate)."""
    if sizing == "olmocr":
        return olmocr_size(width_pt, height_pt)
    w, h = chandra_render_size(width_pt, height_pt)
    return chandra_fit(w, h, 1 if sizing == "chandra1" else 2)
