"""pypdfium2, the one module that talks to pdfium: open, measure, render.

pdfium is not thread-safe, so every call into it from threads must hold
:data:`PDFIUM_LOCK` (the page worker is single-threaded, but library users may not be).
Hostile files can still crash or hang pdfium; that is why the pipeline calls this module
from the page worker process (:mod:`folio.pdf.worker_child`), never from the main process.

Coordinates: pdfium answers in PDF user space (origin bottom-left, y up, before /Rotate);
:meth:`PageGeometry.to_top_left` converts to folio's convention (origin top-left, y down,
after /Rotate, see :mod:`folio.models`).
"""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import NamedTuple, cast

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from folio.errors import EncryptedPdfError, MalformedPdfError, NotAPdfError
from folio.models import BBox, OutlineEntry

log = logging.getLogger(__name__)

#: one lock per process around every pdfium call made from more than one thread
PDFIUM_LOCK = threading.RLock()

#: PDF readers accept the header anywhere in the first KiB (PDF 32000-1, annex H)
_MAGIC_WINDOW = 1024
#: an image must cover this share of the page to count as the page's scan
_SCAN_COVERAGE = 0.5
#: a render whose channels vary by at most this much is "uniform" (blank)
_UNIFORM_TOLERANCE = 4
#: a pixel this much darker than the paper's median is ink (blank scans stay under ~30)
_INK_CONTRAST = 60
#: longest side of the thumbnail used to judge blankness when no render is at hand
_BLANK_PROBE_PX = 128
#: ink is judged at this resolution at most: a 3-pixel median filter removes specks of
#: up to a third of a millimetre here, whatever the render's resolution was
_INK_PROBE_DPI = 100.0


class PageGeometry(NamedTuple):
    """Page size after /Rotate, plus what is needed to map pdfium coordinates."""

    width_pt: float
    height_pt: float
    rotation: int  # clockwise degrees: 0, 90, 180, 270
    box: tuple[float, float, float, float]  # left, bottom, right, top in user space

    def to_top_left(self, left: float, bottom: float, right: float, top: float) -> BBox:
        """Map a user-space rectangle to a top-left-origin box on the rotated page."""
        x0, y0 = self._point(left, top)
        x1, y1 = self._point(right, bottom)
        return BBox(x0=min(x0, x1), y0=min(y0, y1), x1=max(x0, x1), y1=max(y0, y1))

    def _point(self, x: float, y: float) -> tuple[float, float]:
        left, bottom, right, top = self.box
        if self.rotation == 90:
            return y - bottom, x - left
        if self.rotation == 180:
            return right - x, y - bottom
        if self.rotation == 270:
            return top - y, right - x
        return x - left, top - y


def open_pdf(path: Path, password: str | None = None) -> pdfium.PdfDocument:
    """Open a PDF, translating pdfium's failures into folio's typed errors.

    Raises:
        NotAPdfError: no ``%PDF-`` header in the first KiB.
        EncryptedPdfError: a password is needed, the one given is wrong, or the security
            handler is unsupported.
        MalformedPdfError: it claims to be a PDF but pdfium cannot read it (a Ghostscript
            repair may still recover it, so it is not called "not a PDF").
    """
    with path.open("rb") as handle:
        head = handle.read(_MAGIC_WINDOW)
    if b"%PDF-" not in head:
        raise NotAPdfError(f"no %PDF- header in the first {_MAGIC_WINDOW} bytes")
    try:
        with PDFIUM_LOCK:
            doc = pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as exc:
        raise _typed_error(exc, password) from exc
    try:
        with PDFIUM_LOCK:
            # form fields (their values, checkboxes) are drawn into renders, as Chandra's
            # and olmOCR's renderers draw them: a filled form's answers are content
            doc.init_forms()
    except pdfium.PdfiumError as exc:  # a broken form does not make the page unreadable
        log.warning("form fields will not be drawn: %s", exc)
    return doc


def _typed_error(exc: pdfium.PdfiumError, password: str | None) -> Exception:
    code = exc.err_code
    if code == pdfium_c.FPDF_ERR_PASSWORD:
        return EncryptedPdfError("wrong password" if password else "password required")
    if code == pdfium_c.FPDF_ERR_SECURITY:
        return EncryptedPdfError("unsupported security handler")
    if code in (pdfium_c.FPDF_ERR_SUCCESS, pdfium_c.FPDF_ERR_PAGE):
        return MalformedPdfError("the document has no readable pages")
    return MalformedPdfError(f"pdfium cannot read it: {exc}")


#: an outline is read to this depth and this many entries at most: a hostile file's
#: bookmarks may nest deep or loop (pypdfium2 stops a loop; these bound the rest)
OUTLINE_MAX_DEPTH = 8
OUTLINE_MAX_ENTRIES = 5000
OUTLINE_MAX_TITLE = 300


def outline(doc: pdfium.PdfDocument) -> list[OutlineEntry]:
    """The document's bookmarks in order, each with its level (1 at the top) and the page
    it points to; empty when it has none, or when pdfium cannot read them (a broken
    outline costs the headings their outline levels, never the document)."""
    entries: list[OutlineEntry] = []
    try:
        for item in doc.get_toc(max_depth=OUTLINE_MAX_DEPTH):
            title = " ".join((item.get_title() or "").split())[:OUTLINE_MAX_TITLE]
            dest = item.get_dest()
            page = dest.get_index() if dest is not None else None
            if title:
                entries.append(OutlineEntry(level=item.level + 1, title=title,
                                            page=page if page is not None and page >= 0 else None))
            if len(entries) >= OUTLINE_MAX_ENTRIES:
                break
    except (pdfium.PdfiumError, ValueError, RuntimeError) as exc:
        log.info("outline not read: %s", exc)
        return []
    return entries


def page_geometry(page: pdfium.PdfPage) -> PageGeometry:
    """Size in points after /Rotate (pdfium swaps width and height for 90/270)."""
    width, height = page.get_size()
    return PageGeometry(width, height, page.get_rotation(), page.get_bbox())


def count_objects(page: pdfium.PdfPage) -> int:
    """Top-level page objects plus annotations: zero means nothing can be drawn."""
    return max(0, pdfium_c.FPDFPage_CountObjects(page)) + max(
        0, pdfium_c.FPDFPage_GetAnnotCount(page)
    )


def native_image_dpi(page: pdfium.PdfPage) -> float | None:
    """Resolution of the page's scanned image(s), None when no image covers the page.

    Only images covering at least half of the page count: a photo on a born-digital page
    says nothing about how finely the page's text should be rendered.
    """
    best: float | None = None
    for image in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
        sides = _scan_sides_pt(image, page)
        if sides is None:
            continue
        assert isinstance(image, pdfium.PdfImage)
        px_x, px_y = image.get_px_size()
        dpi = max(px_x / (sides[0] / 72.0), px_y / (sides[1] / 72.0))
        best = dpi if best is None else max(best, dpi)
    return best


def hidden_text_share(page: pdfium.PdfPage) -> float:
    """Share of text objects nobody sees: invisible (render mode 3) or painted over by a
    page-sized image. Both are the marks of an earlier OCR layer under a scan.
    """
    total = hidden = pending = 0
    for obj in page.get_objects():
        if obj.type == pdfium_c.FPDF_PAGEOBJ_TEXT:
            total += 1
            if (
                pdfium_c.FPDFTextObj_GetTextRenderMode(obj)
                == pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE
            ):
                hidden += 1
            else:
                pending += 1
        elif obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE and _scan_sides_pt(obj, page):
            hidden, pending = hidden + pending, 0
    return hidden / total if total else 0.0


def _scan_sides_pt(image: pdfium.PdfObject, page: pdfium.PdfPage) -> tuple[float, float] | None:
    """The image's drawn sides in points when it covers enough of the page to be a scan."""
    width, height = page.get_size()
    matrix = _page_matrix(image)
    side_x, side_y = math.hypot(matrix.a, matrix.b), math.hypot(matrix.c, matrix.d)
    if side_x <= 0 or side_y <= 0 or side_x * side_y < _SCAN_COVERAGE * width * height:
        return None
    return side_x, side_y


def _page_matrix(obj: pdfium.PdfObject) -> pdfium.PdfMatrix:
    """An object's matrix in page space: its own, then each enclosing form's."""
    matrix = obj.get_matrix()
    container = obj.container
    while container is not None:
        matrix = matrix.multiply(container.get_matrix())
        container = container.container
    return matrix


def render(page: pdfium.PdfPage, width_px: int, height_px: int) -> Image.Image:
    """Rasterise the page (annotations and /Rotate included) to exactly this RGB size."""
    bitmap = pdfium.PdfBitmap.new_native(
        width_px, height_px, pdfium_c.FPDFBitmap_BGR, rev_byteorder=True
    )
    try:
        bitmap.fill_rect((255, 255, 255, 255), 0, 0, width_px, height_px)
        flags = pdfium_c.FPDF_ANNOT | pdfium_c.FPDF_REVERSE_BYTE_ORDER
        pdfium_c.FPDF_RenderPageBitmap(bitmap, page, 0, 0, width_px, height_px, 0, flags)
        if page.formenv:  # the document's form fields (open_pdf initialised them)
            pdfium_c.FPDF_FFLDraw(page.formenv, bitmap, page, 0, 0, width_px, height_px, 0,
                                  flags)
        return bitmap.to_pil()  # RGB is copied out of the bitmap's buffer by PIL
    finally:
        bitmap.close()


def is_blank(page: pdfium.PdfPage, *, text_chars: int, image: Image.Image | None = None) -> bool:
    """True when nothing is drawn: no text, and no objects or a uniform render.

    Pass the page's render as ``image`` when there is one; otherwise a thumbnail is drawn.
    """
    if text_chars > 0:
        return False
    if count_objects(page) == 0:
        return True
    if image is None:
        width, height = page.get_size()
        scale = _BLANK_PROBE_PX / max(width, height, 1.0)
        image = render(page, max(1, round(width * scale)), max(1, round(height * scale)))
    return blank_render(image, page.get_size()[0])


def blank_render(image: Image.Image, width_pt: float) -> bool:
    """True when a page's image (``width_pt`` wide) shows no ink: uniform, or paper
    with specks only. Also how an image file's page is judged (folio.formats)."""
    gray = _at_most(image.convert("L"), width_pt, _INK_PROBE_DPI)
    low, high = cast(tuple[int, int], gray.getextrema())
    if high - low <= _UNIFORM_TOLERANCE:
        return True
    return _no_ink(gray)


def _at_most(gray: Image.Image, width_pt: float, dpi: float) -> Image.Image:
    """``gray`` (a render of a page ``width_pt`` wide) scaled down, by area averaging, to
    ``dpi`` when it is finer. Why: dust and the show-through of a blank book page's
    other side are specks a few pixels wide at the 300 dpi of an OCR render, which the
    median filter keeps there and removes at 100 dpi, where strokes of text stay."""
    scale = dpi * width_pt / 72.0 / max(gray.width, 1)
    if scale >= 1.0 or width_pt <= 0:
        return gray
    size = (max(1, round(gray.width * scale)), max(1, round(gray.height * scale)))
    return gray.resize(size, Image.Resampling.BOX)


def _no_ink(gray: Image.Image) -> bool:
    """A scanned blank page: paper with noise but no mark much darker than the paper.

    A 3x3 median filter removes isolated specks (dust, scanner noise) but keeps strokes,
    which span several pixels at any render that can be read; ink is anything darker than
    the paper's median by ``_INK_CONTRAST``.
    """
    from PIL import ImageFilter, ImageStat

    paper = ImageStat.Stat(gray).median[0]
    darkest, _ = cast(tuple[int, int], gray.filter(ImageFilter.MedianFilter(3)).getextrema())
    return paper - darkest < _INK_CONTRAST
