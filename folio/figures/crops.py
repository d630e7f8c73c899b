"""Figure crops rendered from the page, in the page worker's child; their encoding.

Why in the child: pdfium is not thread-safe and a hostile file can crash it or ask for
gigabytes, so it runs only in a page worker child (:mod:`folio.pdf.worker_child`, op
``crops``) under the same memory cap and time budget as the page renders. The crop is
rendered from the page itself at ``figures.dpi`` (not cut out of the model's downscaled
image, which for a vision model is about 100 dpi and blurred by resampling), only the
figure's rectangle, so a small figure on a large page costs little.

Encoding: PNG for line art (few colours, flat areas: a diagram, a chart, a scan of a
drawing; lossless and small), JPEG for photographs (many colours, where PNG is several
times larger). The choice reads a thumbnail's colour count (:func:`is_photo`).

Also here: the page's image objects as boxes (:func:`image_boxes`), which the CPU path
uses for figures the layout model misses (:func:`folio.figures.regions.cpu_pictures`).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from folio.models import BBox

if TYPE_CHECKING:
    import pypdfium2 as pdfium
    from PIL import Image

    from folio.pdf.pdfium_doc import PageGeometry

__all__ = ["CropDone", "CropSpec", "crop_size", "encode", "image_boxes", "is_photo",
           "render_crop"]

log = logging.getLogger(__name__)

#: a thumbnail of this many pixels a side tells a photograph from line art
THUMB_PX = 64
#: more distinct colours than this in the thumbnail: a photograph (line art, even
#: anti-aliased, keeps to a few dozen; a photograph's 4096 pixels are mostly distinct)
PHOTO_COLOURS = 1024


class CropSpec(BaseModel):
    """One crop to render: which page, which box (points, top-left origin), and the
    file's stem (its extension follows the encoding)."""

    page: int
    bbox: BBox
    stem: str


class CropDone(BaseModel):
    """One crop rendered and written by the child (``path``), or why not (``error``)."""

    stem: str
    path: str | None = None
    format: Literal["png", "jpeg"] | None = None
    width_px: int = 0
    height_px: int = 0
    bytes: int = 0
    error: str | None = None


class CropJobSettings(BaseModel):
    """How crops are made (from ``figures.*``)."""

    dpi: float = Field(150.0, gt=0)
    max_pixels: int = Field(4_000_000, gt=0)
    jpeg_quality: int = Field(85, ge=1, le=100)


def crop_size(bbox: BBox, dpi: float, max_pixels: int) -> tuple[float, int, int]:
    """(scale in pixels per point, width, height) of a crop of ``bbox`` at ``dpi``, the
    scale lowered so that width*height stays within ``max_pixels``."""
    w_pt, h_pt = max(bbox.x1 - bbox.x0, 1.0), max(bbox.y1 - bbox.y0, 1.0)
    scale = dpi / 72.0
    if w_pt * h_pt * scale * scale > max_pixels:
        scale = math.sqrt(max_pixels / (w_pt * h_pt))
    return scale, max(1, math.floor(w_pt * scale)), max(1, math.floor(h_pt * scale))


def is_photo(image: Image.Image) -> bool:
    """Whether ``image`` looks like a photograph (many distinct colours) rather than
    line art (see :data:`PHOTO_COLOURS`)."""
    from PIL import Image as PILImage

    thumb = image.convert("RGB")
    thumb.thumbnail((THUMB_PX, THUMB_PX), PILImage.Resampling.NEAREST)
    return thumb.getcolors(PHOTO_COLOURS) is None


def encode(image: Image.Image, out_dir: Path, stem: str, jpeg_quality: int
           ) -> tuple[Path, Literal["png", "jpeg"]]:
    """Write ``image`` as ``stem.png`` (line art) or ``stem.jpg`` (a photograph),
    atomically (a temporary name, then a rename); its path and format."""
    photo = is_photo(image)
    fmt: Literal["png", "jpeg"] = "jpeg" if photo else "png"
    path = out_dir / f"{stem}.{'jpg' if photo else 'png'}"
    partial = out_dir / f".{path.name}.partial"
    if photo:
        image.convert("RGB").save(partial, "JPEG", quality=jpeg_quality, optimize=True)
    else:
        image.save(partial, "PNG", optimize=True)
    os.replace(partial, path)
    return path, fmt


def render_crop(page: pdfium.PdfPage, geometry: PageGeometry, spec: CropSpec,
                settings: CropJobSettings, out_dir: Path) -> CropDone:
    """Render ``spec``'s box of ``page`` at the crop resolution and write it."""
    box = BBox(x0=max(0.0, spec.bbox.x0), y0=max(0.0, spec.bbox.y0),
               x1=min(geometry.width_pt, spec.bbox.x1), y1=min(geometry.height_pt, spec.bbox.y1))
    if box.x1 - box.x0 < 1 or box.y1 - box.y0 < 1:
        return CropDone(stem=spec.stem, error="empty box")
    scale, _, _ = crop_size(box, settings.dpi, settings.max_pixels)
    # pdfium's crop is in points from each edge of the page as it is shown (rotated)
    crop = (box.x0, geometry.height_pt - box.y1, geometry.width_pt - box.x1, box.y0)
    bitmap = page.render(scale=scale, crop=crop, may_draw_forms=True)
    try:
        image = bitmap.to_pil()
        path, fmt = encode(image, out_dir, spec.stem, settings.jpeg_quality)
    finally:
        bitmap.close()
    return CropDone(stem=spec.stem, path=str(path), format=fmt, width_px=image.width,
                    height_px=image.height, bytes=path.stat().st_size)


def image_boxes(page: pdfium.PdfPage, geometry: PageGeometry, min_side: float) -> list[BBox]:
    """The page's image objects (inside form XObjects too) as boxes in points, top-left
    origin, those with a shorter side under ``min_side`` left out (icons, bullets,
    rules: most of a page's image objects, and only the figures cross the pipe)."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    found: list[BBox] = []
    try:
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
            box = geometry.to_top_left(*obj.get_bounds())
            box = BBox(x0=max(0.0, box.x0), y0=max(0.0, box.y0),
                       x1=min(geometry.width_pt, box.x1), y1=min(geometry.height_pt, box.y1))
            if min(box.x1 - box.x0, box.y1 - box.y0) >= min_side:
                found.append(box)
    except pdfium.PdfiumError as exc:  # a hint for missed figures: the page goes on
        log.warning("image objects unreadable: %s", exc)
        return []
    return found
