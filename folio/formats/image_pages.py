"""An image file's pages as the page worker prepares them: one :class:`PagePrep` a frame.

The seam: the page worker child (:mod:`folio.pdf.worker_child`) answers a probe or a
page batch for an image exactly as for a PDF, so everything after it (routing, engines,
validation, outputs, chunks, vectors, the done-index) does not know the difference.

Page geometry: a page of ``w`` x ``h`` pixels at ``dpi_x`` x ``dpi_y``
(:func:`folio.formats.images.resolution`) is ``w * 72 / dpi_x`` by ``h * 72 / dpi_y``
points; boxes are in those points, top-left origin, as for a PDF page.

Pixels: the adaptive render plan (:mod:`folio.pdf.render_plan`) treats the page as a
scan of that resolution (``native_dpi``: never upsampled past it; the pixel caps as for
PDFs). Where the plan's size is the image's own, the decoded pixels go to the engine
untouched; where it is smaller they are resized once, from the decoded pixels (never a
PDF round trip, never a second lossy encoding: pages are saved as
``render.image_format``, PNG by default). A CPU OCR engine gets a finer resample when
the text lines are too small for it (:mod:`folio.pdf.ocr_resolution`), as a PDF page is
rendered again finer. A preset with a reference image size gets the size its reference
pipeline computes from the image's own pixels (:func:`model_image_px`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO

from PIL import Image

from folio.errors import FolioError
from folio.formats.images import (
    PAGED_FORMATS,
    dpi_tag,
    frame_count,
    load_frame,
    open_image,
    resolution,
)
from folio.formats.tiff_frames import open_from_frame
from folio.models import PagePrep, RenderPlan, TextLayer
from folio.pdf.model_image import ModelSizing, chandra_fit, olmocr_size
from folio.pdf.pdfium_doc import blank_render
from folio.pdf.render_plan import MAX_SIDE_PX, plan_page
from folio.pdf.worker_protocol import (
    Fatal,
    PdfInfo,
    WorkerJob,
    WorkerMessage,
    WorkerRequest,
    page_failure,
)
from folio.settings.config import RenderSettings

__all__ = ["POINTS_PER_INCH", "answering", "image_info", "model_image_px", "page_plan",
           "prepare_image_pages"]

log = logging.getLogger(__name__)

POINTS_PER_INCH = 72.0


def image_info(path: Path, max_pixels: int) -> PdfInfo:
    """A probe's answer for an image: its pages and its largest page side in points.

    Raises:
        BadImageError, PageTooLargeError: as :func:`folio.formats.images.open_image`.
    """
    with open_image(path, max_pixels) as image:
        pages = frame_count(image)
        width, height = image.size
        (dx, dy), _ = resolution(width, height, dpi_tag(image))
        longest = max(width * POINTS_PER_INCH / dx, height * POINTS_PER_INCH / dy)
    return PdfInfo(page_count=pages, encrypted=False, max_page_pt=longest,
                   producer=f"image/{(image.format or 'unknown').lower()}")


def model_image_px(sizing: ModelSizing, width_px: int, height_px: int) -> tuple[int, int]:
    """The size a preset's reference pipeline sends for an image of this many pixels:
    olmOCR 1288 px on the longest side (it renders images as it renders pages), Chandra
    its ``scale_to_fit`` of the image's own pixels (it reads images as they are, with no
    DPI render)."""
    if sizing == "olmocr":
        return olmocr_size(float(width_px), float(height_px))
    return chandra_fit(width_px, height_px, 1 if sizing == "chandra1" else 2)


def page_plan(width_px: int, height_px: int, dpi: tuple[float, float],
              settings: RenderSettings) -> tuple[float, float, RenderPlan]:
    """The page's size in points and its render plan (pure arithmetic)."""
    width_pt = width_px * POINTS_PER_INCH / dpi[0]
    height_pt = height_px * POINTS_PER_INCH / dpi[1]
    if settings.model_sizing != "adaptive":
        w, h = model_image_px(settings.model_sizing, width_px, height_px)
        reason = f"{settings.model_sizing}'s size for a {width_px}x{height_px}px image -> {w}x{h}px"
        shrink = min(1.0, MAX_SIDE_PX / max(w, h), math.sqrt(settings.max_pixels / (w * h)))
        if shrink < 1.0:
            w, h = max(1, math.floor(w * shrink)), max(1, math.floor(h * shrink))
            reason += f"; pixel caps -> {w}x{h}px"
        return width_pt, height_pt, RenderPlan(dpi=w * POINTS_PER_INCH / width_pt,
                                               width_px=w, height_px=h, reason=reason)
    plan = plan_page(width_pt, height_pt, min_font_pt=None, native_dpi=min(dpi),
                     settings=settings)
    if (abs(plan.width_px - width_px) <= 1 and abs(plan.height_px - height_px) <= 1
            and dpi[0] == dpi[1]):
        # the plan is the image itself (a float hair off): its own pixels, no resample
        plan = plan.model_copy(update={"width_px": width_px, "height_px": height_px,
                                       "dpi": dpi[0]})
    return width_pt, height_pt, plan


def _sized(image: Image.Image, width_px: int, height_px: int) -> Image.Image:
    """The image at the plan's size: itself when that is its size, else one resample."""
    if image.size == (width_px, height_px):
        return image
    return image.resize((width_px, height_px), Image.Resampling.LANCZOS)


@contextmanager
def answering(request: WorkerRequest, emit: Callable[[WorkerMessage], None], *,
              answers: int, source: BinaryIO | None = None
              ) -> Iterator[Image.Image | None]:
    """The image of ``request`` (or ``source``, the same file opened at a later frame)
    opened, after the ``ready`` line; None after a ``fatal`` line when it does not open
    (a page batch's and a crop job's start). Its frames are not counted: the probe
    counted them once, and counting walked every frame of a 10,000-page TIFF each time
    (a frame past the last fails its page or crop)."""
    with ExitStack() as stack:
        try:
            image = stack.enter_context(open_image(source or request.pdf,
                                                   request.max_image_pixels))
        except FolioError as exc:
            emit(WorkerMessage(fatal=Fatal(code=exc.code, message=str(exc))))
            yield None
            return
        emit(WorkerMessage(ready=answers))
        yield image


def prepare_image_pages(job: WorkerJob, emit: Callable[[WorkerMessage], None],
                        save: Callable[[Image.Image, Path, int, str], Path],
                        hooks: Callable[[int], None]) -> None:
    """Answer a page batch for an image: ``ready``, then one ``page`` per index (a page
    that fails carries its error, as a PDF page does), or one ``fatal``."""
    with ExitStack() as stack:
        # a batch past the first frames opens the file at its first page, not by walking
        # every frame before it (folio.formats.tiff_frames)
        base = job.pages[0] if job.pages and job.pages[0] > 0 else 0
        rebased = open_from_frame(job.pdf, base) if base else None
        if rebased is None:
            base = 0
        else:
            stack.callback(rebased.close)
        image = stack.enter_context(answering(job, emit, answers=len(job.pages),
                                              source=rebased))
        if image is None:
            return
        for index in job.pages:
            hooks(index)
            emit(WorkerMessage(page=_one_page(image, index, base, job, save)))


def _one_page(image: Image.Image, index: int, base: int, job: WorkerJob,
              save: Callable[[Image.Image, Path, int, str], Path]) -> PagePrep:
    """Page ``index``, frame ``index - base`` of ``image`` (opened at frame ``base``)."""
    if index < base or (index > 0 and image.format not in PAGED_FORMATS):
        return PagePrep(index=index, error=f"bad-input: no page {index + 1} in this image")
    try:
        return _page(image, index, base, job, save)
    except Exception as exc:  # one bad page must not end the document
        return page_failure(index, exc, job)


def _page(image: Image.Image, index: int, base: int, job: WorkerJob,
          save: Callable[[Image.Image, Path, int, str], Path]) -> PagePrep:
    settings = job.render_settings
    frame, tag = load_frame(image, index - base, job.max_image_pixels, number=index + 1)
    dpi, why = resolution(frame.width, frame.height, tag)
    width_pt, height_pt, plan = page_plan(frame.width, frame.height, dpi, settings)
    plan = plan.model_copy(update={"reason": f"{why}; {plan.reason}"})
    pixels = _sized(frame, plan.width_px, plan.height_px)
    if job.ocr_resolution:
        pixels, plan = _for_ocr(frame, pixels, plan, width_pt, height_pt, settings)
    blank = blank_render(pixels, width_pt)
    layout = None
    if job.layout is not None and not blank:
        from folio.pdf.page_layout import detector  # onnxruntime: not in the zygote

        try:
            layout = detector(job.layout).detect(pixels, width_pt, height_pt)
        except Exception as exc:  # a layout failure costs the labels, never the page
            log.warning("layout detection failed: %s: %s", type(exc).__name__, exc)
    path = save(pixels, job.out_dir, index, settings.image_format)
    return PagePrep(index=index, width_pt=width_pt, height_pt=height_pt, plan=plan,
                    image_path=str(path), image_dpi_native=min(dpi),
                    text_layer=TextLayer(why="an image has no text layer"), blank=blank,
                    layout=layout)


def _for_ocr(frame: Image.Image, pixels: Image.Image, plan: RenderPlan, width_pt: float,
             height_pt: float, settings: RenderSettings) -> tuple[Image.Image, RenderPlan]:
    """A finer resample of the decoded frame when its text lines are too small for a CPU
    OCR engine (as a PDF page is rendered again finer); else both unchanged."""
    from folio.pdf.ocr_resolution import ocr_dpi, text_line_px

    finer = ocr_dpi(plan.dpi, text_line_px(pixels), width_pt, height_pt, settings)
    if finer is None:
        return pixels, plan
    dpi, why = finer
    width_px = max(1, math.floor(width_pt * dpi / POINTS_PER_INCH))
    height_px = max(1, math.floor(height_pt * dpi / POINTS_PER_INCH))
    plan = plan.model_copy(update={"dpi": dpi, "width_px": width_px, "height_px": height_px,
                                   "reason": f"{plan.reason}; {why}"})
    return _sized(frame, width_px, height_px), plan
