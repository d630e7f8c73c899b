"""Adaptive render resolution: spend the model's pixel budget where it buys information.

Pure arithmetic, no pdfium: the page worker measures the page (size, smallest text, native
resolution of a scanned image) and this module turns the measurements into a DPI and a
pixel size, with the rule that decided it spelled out in ``RenderPlan.reason``.

Rules, in order (a later rule overrides an earlier one):

1. budget: the DPI that makes the longest side ``settings.longest_side_px``;
2. small text: raise the DPI (up to ``max_dpi``) until the smallest text is
   ``min_text_px`` tall;
3. native scan resolution: never above the DPI of the page's scanned image (upsampling
   adds tokens, not information), but not below ``min_dpi`` either;
4. clamp to ``[min_dpi, max_dpi]``;
5. hard caps: ``max_pixels`` (width x height) and ``MAX_SIDE_PX`` per side; these win
   over ``min_dpi`` because they protect memory, not quality.

A preset whose model has a reference pipeline (``settings.model_sizing``: olmOCR 2,
Chandra 1 and 2) skips rules 1-4: the page gets the size that pipeline sends
(:mod:`folio.pdf.model_image`), under the same hard caps.

Example:
    >>> from folio.settings.config import RenderSettings
    >>> plan = plan_page(612, 792, min_font_pt=None, native_dpi=None, settings=RenderSettings())
    >>> plan.width_px, plan.height_px, plan.reason
    (1236, 1600, 'budget 1600px longest side -> 145dpi')
"""

from __future__ import annotations

import math

from folio.errors import PageTooLargeError
from folio.models import RenderPlan
from folio.pdf.model_image import ModelSizing, model_image_size
from folio.settings.config import RenderSettings

#: no rendered side may exceed this many pixels, whatever the settings say
MAX_SIDE_PX = 10_000

_POINTS_PER_INCH = 72.0
#: slack for float error when converting back to whole pixels (1e-6 px, never a real pixel)
_EPSILON_PX = 1e-6


def plan_page(
    width_pt: float,
    height_pt: float,
    *,
    min_font_pt: float | None,
    native_dpi: float | None,
    settings: RenderSettings,
) -> RenderPlan:
    """Choose the DPI and pixel size for one page.

    Args:
        width_pt: page width in points after /Rotate.
        height_pt: page height in points after /Rotate.
        min_font_pt: smallest text on the page (text layer), None when there is no text.
        native_dpi: resolution of the page's scanned image, None when it has none.
        settings: the pixel budget and limits.

    Raises:
        PageTooLargeError: a side is not a positive number of points up to
            ``settings.max_page_pt``; nothing is allocated for such pages.
    """
    _check_page_size(width_pt, height_pt, settings.max_page_pt)
    if settings.model_sizing != "adaptive":
        return _model_plan(settings.model_sizing, width_pt, height_pt, settings.max_pixels)
    longest = max(width_pt, height_pt)
    dpi = settings.longest_side_px * _POINTS_PER_INCH / longest
    reasons = [f"budget {settings.longest_side_px}px longest side -> {dpi:.0f}dpi"]

    if min_font_pt is not None and min_font_pt > 0:
        needed = settings.min_text_px * _POINTS_PER_INCH / min_font_pt
        if needed > dpi:
            dpi = min(needed, settings.max_dpi)
            reasons.append(f"small text {min_font_pt:.1f}pt -> {dpi:.0f}dpi")

    if native_dpi is not None and native_dpi > 0 and dpi > native_dpi:
        dpi = max(native_dpi, settings.min_dpi)
        reasons.append(f"scan native {native_dpi:.0f}dpi, no upsampling -> {dpi:.0f}dpi")

    clamped = min(max(dpi, settings.min_dpi), settings.max_dpi)
    if not math.isclose(clamped, dpi):
        reasons.append(f"clamped to [{settings.min_dpi:.0f}, {settings.max_dpi:.0f}]dpi")
        dpi = clamped

    dpi, cap_reason = _apply_pixel_caps(dpi, width_pt, height_pt, settings.max_pixels)
    if cap_reason:
        reasons.append(cap_reason)

    width_px, height_px = _pixel_size(dpi, width_pt, height_pt, settings.max_pixels)
    if settings.grid_px > 1:
        width_px, height_px = _on_grid(width_px, height_px, settings.grid_px, settings.max_pixels)
        reasons.append(f"on the model's {settings.grid_px}px grid -> {width_px}x{height_px}px")
    return RenderPlan(dpi=dpi, width_px=width_px, height_px=height_px, reason="; ".join(reasons))


def _model_plan(sizing: ModelSizing, width_pt: float, height_pt: float,
                max_pixels: int) -> RenderPlan:
    """The reference pipeline's size, shrunk (aspect kept) only by the hard caps."""
    width_px, height_px = model_image_size(sizing, width_pt, height_pt)
    reason = f"{sizing}'s own image size -> {width_px}x{height_px}px"
    shrink = min(1.0, MAX_SIDE_PX / max(width_px, height_px),
                 math.sqrt(max_pixels / (width_px * height_px)))
    if shrink < 1.0:
        width_px = max(1, math.floor(width_px * shrink))
        height_px = max(1, math.floor(height_px * shrink))
        reason += f"; pixel caps -> {width_px}x{height_px}px"
    dpi = width_px * _POINTS_PER_INCH / width_pt
    return RenderPlan(dpi=dpi, width_px=width_px, height_px=height_px, reason=reason)


def _on_grid(width_px: int, height_px: int, grid: int, max_pixels: int) -> tuple[int, int]:
    """Each side rounded to the nearest multiple of ``grid`` (at least one cell), as
    Qwen-VL processors round an image before cutting it into patches; then, while over
    ``max_pixels``, the longer side one cell shorter (never past MAX_SIDE_PX)."""
    cap = MAX_SIDE_PX // grid * grid
    width = min(max(grid, round(width_px / grid) * grid), cap)
    height = min(max(grid, round(height_px / grid) * grid), cap)
    while width * height > max_pixels and max(width, height) > grid:
        if width >= height:
            width -= grid
        else:
            height -= grid
    return width, height


def _check_page_size(width_pt: float, height_pt: float, max_page_pt: float) -> None:
    for side in (width_pt, height_pt):
        if not math.isfinite(side) or side <= 0 or side > max_page_pt:
            raise PageTooLargeError(
                f"page {width_pt:.6g}x{height_pt:.6g}pt is outside (0, {max_page_pt:.0f}]pt"
            )


def _apply_pixel_caps(
    dpi: float, width_pt: float, height_pt: float, max_pixels: int
) -> tuple[float, str]:
    """Lower the DPI until the render fits the area and side caps (even below min_dpi)."""
    reason = ""
    area_px = (width_pt * dpi / _POINTS_PER_INCH) * (height_pt * dpi / _POINTS_PER_INCH)
    if area_px > max_pixels:
        dpi = _POINTS_PER_INCH * math.sqrt(max_pixels / (width_pt * height_pt))
        reason = f"pixel cap {max_pixels} -> {dpi:.1f}dpi"
    longest_px = max(width_pt, height_pt) * dpi / _POINTS_PER_INCH
    if longest_px > MAX_SIDE_PX:
        dpi = MAX_SIDE_PX * _POINTS_PER_INCH / max(width_pt, height_pt)
        reason = f"side cap {MAX_SIDE_PX}px -> {dpi:.1f}dpi"
    return dpi, reason


def _pixel_size(dpi: float, width_pt: float, height_pt: float, max_pixels: int) -> tuple[int, int]:
    """Whole pixels, at least 1 per side, never above the caps (rounding down)."""
    scale = dpi / _POINTS_PER_INCH
    width_px = max(1, math.floor(width_pt * scale + _EPSILON_PX))
    height_px = max(1, math.floor(height_pt * scale + _EPSILON_PX))
    while width_px * height_px > max_pixels and max(width_px, height_px) > 1:
        if width_px >= height_px:
            width_px -= 1
        else:
            height_px -= 1
    return min(width_px, MAX_SIDE_PX), min(height_px, MAX_SIDE_PX)
