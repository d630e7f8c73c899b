"""Figure crops of an image input, cut from the image's own pixels. Runs in the page
worker's child (op ``crops``, :mod:`folio.pdf.worker_child`), as a PDF's crops do.

Why not render: an image has no page to render again; its decoded frame (turned upright
as its pages were, :func:`folio.formats.images.load_frame`) is the finest there is. The
figure's box (page points, top-left origin) maps to pixels by the frame's resolution
(:func:`folio.formats.images.resolution`, the same the page's size in points came from),
and the crop keeps the image's own resolution: never upsampled to ``figures.dpi``, and
downsampled only past ``figures.max_pixels``. Encoding as for a PDF's crops
(:func:`folio.figures.crops.encode`: PNG for line art, JPEG for a photograph).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PIL import Image

from folio.figures.crops import CropDone, CropSpec, encode
from folio.formats.image_pages import POINTS_PER_INCH, answering
from folio.formats.images import load_frame, resolution
from folio.pdf.worker_protocol import CropJob, WorkerMessage

__all__ = ["crop_box_px", "image_crops"]



def crop_box_px(spec: CropSpec, size: tuple[int, int], dpi: tuple[float, float]
                ) -> tuple[int, int, int, int] | None:
    """The crop's box in the frame's pixels (left, top, right, bottom), clipped to the
    frame; None when nothing of it is left."""
    fx, fy = dpi[0] / POINTS_PER_INCH, dpi[1] / POINTS_PER_INCH
    left, top = max(0, math.floor(spec.bbox.x0 * fx)), max(0, math.floor(spec.bbox.y0 * fy))
    right = min(size[0], math.ceil(spec.bbox.x1 * fx))
    bottom = min(size[1], math.ceil(spec.bbox.y1 * fy))
    if right - left < 1 or bottom - top < 1:
        return None
    return left, top, right, bottom


def image_crops(job: CropJob, emit: Callable[[WorkerMessage], None]) -> None:
    """Answer a crop job for an image: ``ready``, then one ``crop`` line a crop (a crop
    that fails says why in its line), or one ``fatal`` when the image does not open."""
    with answering(job, emit, answers=len(job.crops)) as image:
        if image is None:
            return
        frames: dict[int, tuple[Image.Image, tuple[float, float]]] = {}
        for spec in job.crops:
            emit(WorkerMessage(crop=_crop(image, frames, spec, job)))


def _crop(image: Image.Image, frames: dict[int, tuple[Image.Image, tuple[float, float]]],
          spec: CropSpec, job: CropJob) -> CropDone:
    if spec.page < 0:
        return CropDone(stem=spec.stem, error=f"no page {spec.page + 1}")
    try:  # a page past the image's last frame fails its seek, below
        if spec.page not in frames:
            frames.clear()  # one decoded frame at a time: a TIFF's pages can be large
            frame, tag = load_frame(image, spec.page, job.max_image_pixels)
            frames[spec.page] = (frame, resolution(frame.width, frame.height, tag)[0])
        frame, dpi = frames[spec.page]
        box = crop_box_px(spec, frame.size, dpi)
        if box is None:
            return CropDone(stem=spec.stem, error="empty box")
        crop = frame.crop(box)
        pixels = crop.width * crop.height
        if pixels > job.settings.max_pixels:
            shrink = math.sqrt(job.settings.max_pixels / pixels)
            crop = crop.resize((max(1, math.floor(crop.width * shrink)),
                                max(1, math.floor(crop.height * shrink))),
                               Image.Resampling.LANCZOS)
        path, fmt = encode(crop, job.out_dir, spec.stem, job.settings.jpeg_quality)
    except MemoryError:
        return CropDone(stem=spec.stem, error=f"out of memory under {job.memory_mb} MB")
    except Exception as exc:  # one figure must not cost the others
        return CropDone(stem=spec.stem, error=f"{type(exc).__name__}: {exc}")
    return CropDone(stem=spec.stem, path=str(path), format=fmt, width_px=crop.width,
                    height_px=crop.height, bytes=path.stat().st_size)
