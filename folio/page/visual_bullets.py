"""Bullets an OCR engine left out, found in the page image. Pure (numpy).

Why: OCR engines drop a bullet that is small beside its text: Tesseract reads a 5-pixel
dot at 270 DPI as noise and starts the line at its first word, so a bulleted list comes
back as plain lines (docling's redp5110 page 3: nine items, none a list item). A reader
sees the bullet where the engine saw nothing: a small blob of ink alone, left of a line's
first word, and the same blob left of other lines at the same place.

What counts, for a line of height ``h`` (its box from the engine, in pixels):

* the band left of its first word, from :data:`REACH` line heights away up to the word,
  holds exactly one blob of ink (so a neighbouring column's words, or a line number with
  digits, are not bullets), at least :data:`MIN_GAP` of ``h`` before the word;
* the blob is small and compact: each side between :data:`MIN_SIDE` and :data:`MAX_SIDE`
  of ``h``, neither more than :data:`MAX_ASPECT` times the other (a dash is read by the
  engine itself), and its middle inside the line's box;
* and it is one of two or more such blobs on the page whose middles line up (within
  :data:`ALIGN` of ``h``) and whose sizes agree (within :data:`SIZE_SPREAD`): a list's
  bullets stand in a column, a speck of a scan does not repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: how far left of a line's first word a bullet may stand, in line heights
REACH = 3.0
#: the least space between a bullet and its text, in line heights
MIN_GAP = 0.12
#: a bullet's sides against its line's height: found ones measure 0.21-0.34 (dots of a
#: flyer, a report, a slide); a capital or a digit (a line number the engine dropped)
#: stands about 0.65 of the line's box and is left out
MIN_SIDE = 0.12
MAX_SIDE = 0.55
MAX_ASPECT = 1.8
#: bullets of one list stand this close to one column (in line heights)
ALIGN = 0.5
#: and differ in size by at most this share
SIZE_SPREAD = 0.4
#: ink: darker than this share of the way from the page's white to black
INK = 0.5


@dataclass(frozen=True)
class LineBox:
    """A line as the engine read it: its first word's left edge, its top and height
    (pixels)."""

    left: int
    top: int
    height: int


@dataclass(frozen=True)
class _Blob:
    line: int
    x_mid: float
    size: float
    height: int


def bullet_lines(gray: npt.NDArray[np.uint8], lines: Sequence[LineBox]) -> set[int]:
    """The indices of ``lines`` that a bullet the engine did not read stands before."""
    if gray.size == 0 or len(lines) < 2:
        return set()
    ink = _threshold(gray)
    blobs = [b for i, line in enumerate(lines) if (b := _blob(gray, ink, line, i)) is not None]
    found: set[int] = set()
    for blob in blobs:
        peers = [o for o in blobs if o is not blob
                 and abs(o.x_mid - blob.x_mid) <= ALIGN * max(o.height, blob.height)
                 and abs(o.size - blob.size) <= SIZE_SPREAD * max(o.size, blob.size)]
        if peers:
            found.add(blob.line)
    return found


def _blob(gray: npt.NDArray[np.uint8], threshold: float, line: LineBox,
          index: int) -> _Blob | None:
    h = line.height
    if h < 6:
        return None
    x0 = max(0, int(line.left - REACH * h))
    x1 = line.left
    y0, y1 = max(0, line.top), min(gray.shape[0], line.top + h)
    if x1 - x0 < 2 or y1 <= y0:
        return None
    band = gray[y0:y1, x0:x1]
    ink = band < threshold
    cols = np.flatnonzero(ink.any(axis=0))
    if cols.size == 0:
        return None
    if cols[-1] - cols[0] + 1 != cols.size:  # more than one run of inked columns
        return None
    rows = np.flatnonzero(ink[:, cols[0]:cols[-1] + 1].any(axis=1))
    if rows[-1] - rows[0] + 1 != rows.size:  # two blobs one over the other
        return None
    width, tall = int(cols.size), int(rows.size)
    if not all(MIN_SIDE * h <= side <= MAX_SIDE * h for side in (width, tall)):
        return None
    if max(width, tall) > MAX_ASPECT * min(width, tall):
        return None
    if x1 - (x0 + int(cols[-1]) + 1) < MIN_GAP * h:  # touching the word: part of it
        return None
    if rows[0] == 0 or rows[-1] == band.shape[0] - 1:  # cut by the line's box: not inside
        return None
    return _Blob(line=index, x_mid=x0 + (cols[0] + cols[-1]) / 2.0,
                 size=float(max(width, tall)), height=h)


def _threshold(gray: npt.NDArray[np.uint8]) -> float:
    """Halfway between the page's paper and its darkest ink (a grey scan's black is not 0)."""
    sample = gray[::4, ::4]  # a sixteenth of the pixels says the same
    white = float(np.percentile(sample, 90))
    black = float(sample.min())
    return white - INK * (white - black)
