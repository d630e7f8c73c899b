"""Decoding an image file into pages: Pillow, guarded, orientation applied, resolution known.

Runs in the page worker child (:mod:`folio.pdf.worker_child`), under its address-space
cap, never in the pipeline's process: a hostile image can ask for gigabytes.

- **Pages**: every frame of a TIFF is a page (a multi-page scan); a GIF, an animated WebP
  or a JPEG with preview frames (MPO) gives its first frame only: their frames are
  states of one picture, not pages of a document.
- **Guards**: the size in the header is checked against ``max_pixels`` before any pixel
  is decoded (Pillow's own decompression-bomb guard is set to the same figure, so it
  refuses what slips past); a truncated or corrupt file raises :class:`BadImageError`.
- **Orientation**: the EXIF orientation is applied before anything reads the pixels
  (a phone photo taken sideways is read upright).
- **Modes**: 1-bit, grey, 16-bit and palette images become 8-bit grey or RGB; alpha is
  laid on white paper; CMYK and YCbCr become RGB.
- **Resolution**: :func:`resolution` takes the file's DPI tags when they are plausible for
  a scan, else estimates it from the pixel size (see its docstring).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from folio.errors import BadImageError, PageTooLargeError

__all__ = ["ESTIMATE_LONG_SIDE_IN", "MIN_TAGGED_DPI", "PAGED_FORMATS", "dpi_tag", "frame_count", "load_frame",
           "open_image", "resolution"]

#: a DPI tag below this is taken for a default, not a measurement: cameras write 72,
#: screen captures 72 or 96, and a page scanned that coarsely is rare
MIN_TAGGED_DPI = 100.0
#: ... and above this for a broken tag
MAX_TAGGED_DPI = 4800.0
#: with no usable tag the longest side is taken for a letter page's long side (11 in; an
#: A4 page's is 11.7): 1700x2200 px reads as 200 DPI
ESTIMATE_LONG_SIDE_IN = 11.0
#: estimated resolutions stay in this range (a thumbnail is not a page the size of a stamp)
ESTIMATE_DPI_RANGE = (72.0, 1200.0)
#: formats whose every frame is a page
PAGED_FORMATS = frozenset({"TIFF"})


@contextmanager
def open_image(path: Path | BinaryIO, max_pixels: int) -> Iterator[Image.Image]:
    """The image, opened lazily (header read, no pixels decoded), after the size checks.

    Raises:
        BadImageError: not an image Pillow can read, or its header is damaged.
        PageTooLargeError: more than ``max_pixels`` pixels (a decompression bomb, or an
            absurd size).
    """
    Image.MAX_IMAGE_PIXELS = max_pixels  # Pillow refuses beyond twice this, warns beyond it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise PageTooLargeError(f"image over the {max_pixels}-pixel limit: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise BadImageError("not an image Pillow can read (damaged header?)") from exc
    except (OSError, SyntaxError, ValueError) as exc:  # Pillow's plugins raise all three
        raise BadImageError(f"unreadable image: {exc}") from exc
    try:
        width, height = image.size
        if width <= 0 or height <= 0:
            raise BadImageError(f"image of {width}x{height} px")
        if width * height > max_pixels:
            raise PageTooLargeError(
                f"image of {width}x{height} px is over the {max_pixels}-pixel limit")
        yield image
    finally:
        image.close()


def frame_count(image: Image.Image) -> int:
    """Pages in the image: every frame of a TIFF, the first frame of anything else.

    Raises:
        BadImageError: the frames cannot be counted (a damaged TIFF directory).
    """
    if image.format not in PAGED_FORMATS:
        return 1
    try:
        return max(1, int(getattr(image, "n_frames", 1)))
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadImageError(f"damaged TIFF page directory: {exc}") from exc


def load_frame(image: Image.Image, index: int, max_pixels: int, *, number: int | None = None
               ) -> tuple[Image.Image, tuple[float, float] | None]:
    """Frame ``index`` decoded, turned upright (EXIF orientation) and made 8-bit grey or
    RGB; with its DPI tags as (x, y) after the turn, or None without tags.

    Raises:
        BadImageError: truncated or corrupt pixel data.
        PageTooLargeError: this frame is over ``max_pixels``.
    """
    number = index + 1 if number is None else number  # the page's number, as messages say it
    try:
        image.seek(index)
        width, height = image.size
        if width * height > max_pixels:
            raise PageTooLargeError(
                f"page {number}: {width}x{height} px is over the {max_pixels}-pixel limit")
        dpi = dpi_tag(image)
        image.load()
        upright = ImageOps.exif_transpose(image)  # a copy, turned; or the frame unchanged
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadImageError(f"page {number}: corrupt or truncated image data: {exc}") \
            from exc
    if dpi is not None and upright.size != image.size and upright.size == image.size[::-1]:
        dpi = (dpi[1], dpi[0])  # turned a quarter: the axes' resolutions swap
    return _eight_bit(upright), dpi


def dpi_tag(image: Image.Image) -> tuple[float, float] | None:
    """The current frame's DPI tags (x, y) as the file states them; None without."""
    raw = image.info.get("dpi")
    try:
        x, y = (float(raw[0]), float(raw[1])) if raw else (0.0, 0.0)
    except (TypeError, ValueError, IndexError):
        return None
    if not (math.isfinite(x) and math.isfinite(y)) or x <= 0 or y <= 0:
        return None
    return x, y


def _eight_bit(image: Image.Image) -> Image.Image:
    """8-bit grey ("L") or RGB, what every engine and the layout model read."""
    mode = image.mode
    if mode in ("L", "RGB"):
        return image
    if mode == "1":
        return image.convert("L")
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        return _sixteen_to_grey(image)
    if mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        mode = image.mode
    if mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        rgba = image.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        flat = Image.alpha_composite(paper, rgba).convert("RGB")
        return flat.convert("L") if mode in ("LA", "La") else flat
    return image.convert("RGB")  # CMYK, YCbCr, LAB, HSV


def _sixteen_to_grey(image: Image.Image) -> Image.Image:
    """16- or 32-bit grey scaled to 8 bits by its range (a 16-bit scan spans 0..65535;
    Pillow's own conversion clips it at 255, which turns the page white)."""
    import numpy as np

    values = np.asarray(image, dtype=np.float64)
    top = float(values.max()) if values.size else 0.0
    scale = 255.0 / (65535.0 if top > 255 else 255.0)
    return Image.fromarray(np.clip(values * scale, 0, 255).astype(np.uint8), mode="L")


def resolution(width_px: int, height_px: int, tag: tuple[float, float] | None
               ) -> tuple[tuple[float, float], str]:
    """The (x, y) DPI a page is taken to be scanned at, and how it was decided.

    The file's tag when its finer axis is between :data:`MIN_TAGGED_DPI` and
    :data:`MAX_TAGGED_DPI` and the other at least half the minimum (scanners write their
    true resolution; a fax writes 204x196 or 204x98); else an estimate: the longest side is taken for 11 inches (a letter page's
    long side), within :data:`ESTIMATE_DPI_RANGE`, the same on both axes.
    """
    if (tag is not None and max(tag) >= MIN_TAGGED_DPI and min(tag) >= MIN_TAGGED_DPI / 2
            and max(tag) <= MAX_TAGGED_DPI):
        return tag, f"{tag[0]:.0f}x{tag[1]:.0f} dpi from the file's tags"
    low, high = ESTIMATE_DPI_RANGE
    dpi = min(max(max(width_px, height_px) / ESTIMATE_LONG_SIDE_IN, low), high)
    why = "no DPI tag" if tag is None else f"tag {tag[0]:.0f} dpi taken for a default"
    return (dpi, dpi), f"{why}: {dpi:.0f} dpi estimated (longest side = 11 in)"
