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
from folio.figures.links import FIGURES_DIR, is_written, resolve_page
from folio.io.sinks import Sink
from folio.models import DocumentResult, Label, PageOutcome
from folio.settings.config import PipelineConfig

__all__ = ["crop_specs", "store_figures"]

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
    doc.pages = [resolve_page(page, {name.split("/", 1)[1]: rel
                                     for name, rel in written.items()
                                     if name.startswith(f"{page.index}/")})
                 for page in doc.pages]
    doc.figures, doc.figure_bytes = len(written), total
    doc.folder_uri = sink.uri(folder)
    if config.figures.mode == "crops":
        _remove_stale(sink, folder, set(written.values()))
    return doc


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
    config.work_dir.mkdir(parents=True, exist_ok=True)
    return config.work_dir


def _remove_stale(sink: Sink, folder: str, keep: set[str]) -> None:
    """Crops an earlier run wrote under the document's folder that this one did not."""
    try:
        for name in list(sink.names(f"{folder}/{FIGURES_DIR}")):
            if name.removeprefix(f"{folder}/") not in keep:
                sink.delete(name)
    except Exception as exc:  # stale crops are clutter, not an error
        log.warning("stale figure crops under %s left: %s", folder, exc)
