"""A finished document's figure crops: rendered in a child, written beside document.md.

Why after the pages and before validation: the crops need the PDF, which lives in the
document's work folder only until the scheduler hands the document over; and a vision
model's figure boxes exist only once its answers are in. So when a document's last page
is back, every Picture with a box gets one crop, rendered in a page worker child
(:func:`folio.pdf.page_worker.render_crops`), written to ``{slug}/figures/`` in the sink
(a temporary file and a rename locally, one PUT on S3: never half a file), and the pages'
links resolved (:func:`folio.figures.links.resolve_page`). Names are the page and the
figure's place on it, so a rerun writes the same files over themselves; crops an earlier
run left that this one does not write are removed after the new ones are in place.

Every failure here costs the figures, never the document: the pictures keep their
blocks (and chunks) without an image, and the links go, so none dangles.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from folio.figures.crops import CropJobSettings, CropSpec
from folio.figures.links import FIGURES_DIR, crop_name, is_written, resolve_page
from folio.io.sinks import Sink
from folio.models import DocumentResult, Label, PageOutcome
from folio.settings.config import PipelineConfig

__all__ = ["crop_specs", "store_figures", "store_images"]

log = logging.getLogger(__name__)

#: seconds a document's crops may take in the child
CROP_TIMEOUT_S = 300.0


def crop_specs(doc: DocumentResult) -> dict[str, CropSpec]:
    """One crop per Picture with a box and a pending image, by its pending name's
    key ``(page index, pending name)`` joined as ``"{index}/{name}"``; the crop's stem
    is the page (from 1) and the picture's place among the page's pictures (from 1)."""
    specs: dict[str, CropSpec] = {}
    for page in doc.pages:
        if page.outcome is PageOutcome.QUARANTINED:
            continue
        number = 0
        for block in sorted(page.blocks, key=lambda b: b.order):
            if block.label != Label.PICTURE.value:
                continue
            number += 1
            if block.bbox is None or not block.image or is_written(block.image):
                continue
            specs[f"{page.index}/{block.image}"] = CropSpec(
                page=page.index, bbox=block.bbox, stem=f"p{page.index + 1:04d}-{number}")
    return specs


def store_figures(doc: DocumentResult, pdf: Path, password: SecretStr | None, sink: Sink,
                  config: PipelineConfig, folder: str,
                  kind: Literal["pdf", "image"] = "pdf") -> DocumentResult:
    """Crop, write and link ``doc``'s figures (see the module's docstring); ``doc``
    with its pages' images and links resolved and its figure counts set. ``folder`` is
    the document's folder in the sink (:func:`folio.output.outputs.document_folder`);
    ``kind`` what ``pdf`` is: an image's crops are cut from its own pixels."""
    specs = crop_specs(doc) if config.figures.mode == "crops" else {}
    written: dict[str, str] = {}
    total = 0
    if specs:
        try:
            written, total = _write(specs, pdf, password, sink, config, folder, kind)
        except Exception as exc:  # the figures are lost, never the document
            log.warning("%s: figure crops not written: %s: %s", doc.source,
                        type(exc).__name__, exc)
    return _linked(doc, written, total, sink, config, folder)


#: image formats an Office file embeds that are written as they are (no re-encoding)
_AS_IS = {"png": "png", "jpg": "jpg", "jpeg": "jpg"}
#: formats Pillow re-encodes as PNG (a browser shows few of them); others (EMF, WMF, SVG)
#: keep their block, caption and alt text, without an image
_TO_PNG = frozenset({"gif", "bmp", "tif", "tiff", "webp"})


def store_images(doc: DocumentResult, images: dict[str, bytes], sink: Sink,
                 config: PipelineConfig, folder: str) -> DocumentResult:
    """Write the images an Office document embeds (pending name -> bytes, as the native
    readers found them: folio.formats.office_blocks.NativeRead) beside its outputs and
    resolve its pages' links, as :func:`store_figures` does for crops: PNG and JPEG as
    they are, GIF, BMP, TIFF and WebP as PNG, the rest not at all (their pictures keep
    their caption and alt text). Never raises: an image is not worth a document."""
    written: dict[str, str] = {}
    total = 0
    if config.figures.mode == "crops":
        numbers: dict[int, int] = {}
        for page in doc.pages:
            for block in sorted(page.blocks, key=lambda b: b.order):
                if block.label != Label.PICTURE.value or not block.image:
                    continue
                data = images.get(block.image)
                ext = block.image.rsplit(".", 1)[-1].lower()
                try:
                    data, ext = _as_written(data, ext, config)
                except Exception as exc:  # a broken image: the picture stays, unlinked
                    log.warning("%s: image %s not written: %s", doc.source, block.image, exc)
                    continue
                if data is None:
                    continue
                numbers[page.index] = numbers.get(page.index, 0) + 1
                rel = crop_name(page.index, numbers[page.index], ext)
                try:
                    sink.write_bytes(f"{folder}/{rel}", data)
                except Exception as exc:
                    log.warning("%s: image %s not written: %s", doc.source, rel, exc)
                    continue
                written[f"{page.index}/{block.image}"] = rel
                total += len(data)
    return _linked(doc, written, total, sink, config, folder)


def _linked(doc: DocumentResult, written: dict[str, str], total: int, sink: Sink,
            config: PipelineConfig, folder: str) -> DocumentResult:
    """``doc`` with its pages' links resolved to the ``written`` images (``"{page
    index}/{pending name}"`` -> path), its figure counts set, and crops an earlier run
    left that this one did not write removed."""
    doc.pages = [resolve_page(page, {name.split("/", 1)[1]: rel
                                     for name, rel in written.items()
                                     if name.startswith(f"{page.index}/")})
                 for page in doc.pages]
    doc.figures, doc.figure_bytes = len(written), total
    doc.folder_uri = sink.uri(folder)
    if config.figures.mode == "crops":
        _remove_stale(sink, folder, set(written.values()))
    return doc


def _as_written(data: bytes | None, ext: str,
                config: PipelineConfig) -> tuple[bytes | None, str]:
    """The bytes to write and their extension: as they are, as PNG, or None."""
    if not data:
        return None, ext
    if ext in _AS_IS:
        return data, _AS_IS[ext]
    if ext not in _TO_PNG:
        return None, ext
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if image.width * image.height > config.figures.max_pixels:
            return None, ext
        out = io.BytesIO()
        image.save(out, "PNG")
    return out.getvalue(), "png"


def _write(specs: dict[str, CropSpec], pdf: Path, password: SecretStr | None, sink: Sink,
           config: PipelineConfig, folder: str, kind: Literal["pdf", "image"]
           ) -> tuple[dict[str, str], int]:
    from folio.pdf.page_worker import CropJob, render_crops

    out_dir = Path(tempfile.mkdtemp(prefix="figures-", dir=_scratch(config)))
    try:
        job = CropJob(pdf=pdf, password=password, crops=list(specs.values()),
                      out_dir=out_dir, memory_mb=config.limits.worker_memory_mb,
                      nice=config.limits.worker_nice, kind=kind,
                      max_image_pixels=config.limits.max_image_pixels,
                      settings=CropJobSettings(dpi=config.figures.dpi,
                                               max_pixels=config.figures.max_pixels,
                                               jpeg_quality=config.figures.jpeg_quality))
        done = {c.stem: c for c in render_crops(job, CROP_TIMEOUT_S)}
        written: dict[str, str] = {}
        total = 0
        for key, spec in specs.items():
            crop = done.get(spec.stem)
            if crop is None or crop.path is None:
                log.warning("figure %s not cropped: %s", spec.stem,
                            crop.error if crop else "no answer")
                continue
            data = Path(crop.path).read_bytes()
            rel = f"{FIGURES_DIR}/{Path(crop.path).name}"
            sink.write_bytes(f"{folder}/{rel}", data)
            written[key] = rel
            total += len(data)
        return written, total
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _scratch(config: PipelineConfig) -> Path:
    from folio.security.work_dirs import ensure_root

    return ensure_root(config.work_dir)  # checked on every use (another user's? a link?)


def _remove_stale(sink: Sink, folder: str, keep: set[str]) -> None:
    """Crops an earlier run wrote under the document's folder that this one did not."""
    try:
        for name in list(sink.names(f"{folder}/{FIGURES_DIR}")):
            if name.removeprefix(f"{folder}/") not in keep:
                sink.delete(name)
    except Exception as exc:  # stale crops are clutter, not an error
        log.warning("stale figure crops under %s left: %s", folder, exc)
