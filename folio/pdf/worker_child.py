"""The page worker's child side: open the PDF with pdfium, answer a probe or prepare
pages (text layer, route, render plan, image), one :class:`WorkerMessage` line each on
stdout. Run by :mod:`folio.pdf.zygote` (forked) or as ``python -m folio.pdf.worker_child
OP`` with the request on stdin; :mod:`folio.pdf.page_worker` is the parent.

Test-only hooks (read here; never set them in production):
``FOLIO_TEST_CRASH_ON_PAGE=N`` calls ``os.abort()`` before page N;
``FOLIO_TEST_HANG_ON_PAGE=N`` sleeps forever before page N (``probe``: in a probe).
"""

from __future__ import annotations

import faulthandler
import logging
import math
import os
import resource
import sys
import time
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image
from pydantic import SecretStr

from folio.cpu_priority import lower_this_process
from folio.errors import FolioError, MalformedPdfError
from folio.figures.crops import CropDone, CropSpec, image_boxes, render_crop
from folio.models import PagePrep, RenderPlan
from folio.pdf.page_layout import detect_page, table_inputs
from folio.pdf.pdfium_doc import (
    PDFIUM_LOCK,
    is_blank,
    native_image_dpi,
    open_pdf,
    outline,
    page_geometry,
    render,
)
from folio.pdf.render_plan import plan_page
from folio.pdf.text_layer import extract
from folio.pdf.worker_protocol import (
    CropJob,
    Fatal,
    PdfInfo,
    WorkerJob,
    WorkerMessage,
    WorkerRequest,
    page_failure,
)
from folio.settings.config import RenderSettings

__all__ = ["main", "run"]

log = logging.getLogger(__name__)

_CRASH_HOOK = "FOLIO_TEST_CRASH_ON_PAGE"
_HANG_HOOK = "FOLIO_TEST_HANG_ON_PAGE"


def main(argv: list[str]) -> int:
    """Child entry point (exec mode): read the request from stdin, answer on stdout."""
    return run(argv[0] if argv else "pages", sys.stdin.buffer.read())


def run(op: str, raw: bytes) -> int:
    """Answer one request (``op`` "probe" or "pages") on stdout; the exit code."""
    faulthandler.enable()  # a pdfium crash leaves a Python traceback in the parent's log
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        if op == "probe":
            request = WorkerRequest.model_validate_json(raw)
            _limit_memory(request.memory_mb)
            lower_this_process(request.nice)  # forked: the zygote's already; exec: here
            _emit(_probe(request))
        elif op == "crops":
            crops = CropJob.model_validate_json(raw)
            _limit_memory(crops.memory_mb)
            lower_this_process(crops.nice)
            _run_crops(crops)
        else:
            job = WorkerJob.model_validate_json(raw)
            _limit_memory(job.memory_mb)
            lower_this_process(job.nice)
            _run_pages(job)
    except BrokenPipeError:
        return 1  # the parent stopped listening (timeout, or its consumer stopped early)
    return 0


def _limit_cpu(page_cpu_s: float | None) -> None:
    """Let the next page use ``page_cpu_s`` more CPU seconds than this process has used so
    far: over it the kernel sends SIGXCPU, which ends the child, and the parent reports
    the page as ``resource-limit`` (folio.pdf.page_worker). The soft limit only: the hard
    one stays, so the next page can raise it again."""
    if page_cpu_s is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + page_cpu_s) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _limit_memory(memory_mb: int) -> None:
    """Cap the address space (a huge render fails here, not in the OOM killer) and
    disable core dumps (a crash on a hostile file must not write gigabytes)."""
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _emit(message: WorkerMessage) -> None:
    sys.stdout.write(message.model_dump_json(exclude_none=True) + "\n")
    sys.stdout.flush()


def _secret(password: SecretStr | None) -> str | None:
    return password.get_secret_value() if password is not None else None


def _open(request: WorkerRequest) -> pdfium.PdfDocument | WorkerMessage:
    try:
        return open_pdf(request.pdf, _secret(request.password))
    except FolioError as exc:
        return WorkerMessage(fatal=Fatal(code=exc.code, message=str(exc)))


def _probe(request: WorkerRequest) -> WorkerMessage:
    _test_hooks("probe")
    if request.kind == "image":
        from folio.formats.image_pages import image_info

        try:
            return WorkerMessage(info=image_info(request.pdf, request.max_image_pixels))
        except FolioError as exc:
            return WorkerMessage(fatal=Fatal(code=exc.code, message=str(exc)))
    doc = _open(request)
    if isinstance(doc, WorkerMessage):
        return doc
    with PDFIUM_LOCK:
        try:
            return WorkerMessage(info=_document_info(doc))
        finally:
            doc.close()


def _document_info(doc: pdfium.PdfDocument) -> PdfInfo:
    version = doc.get_version()
    size = pdfium_c.FS_SIZEF()
    longest = 0.0
    for index in range(len(doc)):
        if pdfium_c.FPDF_GetPageSizeByIndexF(doc, index, size):
            longest = max(longest, size.width, size.height)
    return PdfInfo(
        page_count=len(doc),
        encrypted=pdfium_c.FPDF_GetSecurityHandlerRevision(doc) != -1,
        pdf_version=f"{version // 10}.{version % 10}" if version else None,
        producer=doc.get_metadata_value("Producer") or None,
        max_page_pt=longest,
        outline=outline(doc),
    )


def _run_pages(job: WorkerJob) -> None:
    if job.kind == "image":  # an image file's frames: the same messages (folio.formats)
        from folio.formats.image_pages import prepare_image_pages

        prepare_image_pages(job, _emit, _save, _test_hooks)
        return
    doc = _open(job)
    if isinstance(doc, WorkerMessage):
        _emit(doc)
        return
    text_doc = _open_text_pdf(job, len(doc))
    with PDFIUM_LOCK:
        try:
            page_count = len(doc)
            _emit(WorkerMessage(ready=page_count))
            for index in job.pages:
                _limit_cpu(job.page_cpu_s)
                _test_hooks(index)
                _emit(WorkerMessage(page=_prepare_page(doc, index, page_count, job, text_doc)))
        finally:
            doc.close()
            if text_doc is not None:
                text_doc.close()


def _run_crops(job: CropJob) -> None:
    """Render every crop of ``job``, one ``crop`` line each; a crop that fails says why
    in its line (the figure keeps its block, without an image). An image's crops are
    cut from its own pixels (:mod:`folio.formats.image_crops`)."""
    if job.kind == "image":
        from folio.formats.image_crops import image_crops

        image_crops(job, _emit)
        return
    doc = _open(job)
    if isinstance(doc, WorkerMessage):
        _emit(doc)
        return
    with PDFIUM_LOCK:
        try:
            _emit(WorkerMessage(ready=len(doc)))
            for spec in job.crops:
                _emit(WorkerMessage(crop=_crop(doc, spec, job)))
        finally:
            doc.close()


def _crop(doc: pdfium.PdfDocument, spec: CropSpec, job: CropJob) -> CropDone:
    try:
        page = doc[spec.page]
    except (pdfium.PdfiumError, IndexError) as exc:
        return CropDone(stem=spec.stem, error=f"page {spec.page + 1}: {exc}")
    try:
        return render_crop(page, page_geometry(page), spec, job.settings, job.out_dir)
    except MemoryError:
        return CropDone(stem=spec.stem, error=f"out of memory under {job.memory_mb} MB")
    except Exception as exc:  # one figure must not cost the others
        return CropDone(stem=spec.stem, error=f"{type(exc).__name__}: {exc}")
    finally:
        page.close()


def _open_text_pdf(job: WorkerJob, page_count: int) -> pdfium.PdfDocument | None:
    """The original beside a compressed copy, when it opens with the same pages; else
    None (the copy's own text layer is used)."""
    if job.text_pdf is None:
        return None
    try:
        text_doc = open_pdf(job.text_pdf, _secret(job.password))
    except FolioError as exc:
        log.warning("text layer from the copy: %s", exc)
        return None
    if len(text_doc) != page_count:
        text_doc.close()
        return None
    return text_doc


def _test_hooks(index: int | str) -> None:
    if os.environ.get(_CRASH_HOOK) == str(index):
        os.abort()
    if os.environ.get(_HANG_HOOK) == str(index):
        while True:
            time.sleep(3600)


def _prepare_page(doc: pdfium.PdfDocument, index: int, page_count: int, job: WorkerJob,
                  text_doc: pdfium.PdfDocument | None = None) -> PagePrep:
    """One page, with any failure recorded on the page instead of ending the document."""
    if not 0 <= index < page_count:
        return PagePrep(index=index, error=f"bad-input: no page {index} in {page_count} pages")
    try:
        page = doc[index]
    except pdfium.PdfiumError as exc:
        return PagePrep(index=index, error=f"{MalformedPdfError.code}: {exc}")
    text_page = None
    try:
        if text_doc is not None:
            try:
                text_page = text_doc[index]
            except pdfium.PdfiumError:  # the copy's own layer, then
                text_page = None
            if text_page is not None and not _same_frame(page, text_page):
                # the copy turned or resized the page: the original's boxes would not fit
                # the page rendered from the copy, so the copy's own layer it is
                log.warning("page %d: the compressed copy's page frame differs from the "
                            "original's; reading the copy's text layer", index)
                text_page.close()
                text_page = None
        return _measure_and_render(page, index, job, text_page)
    except pdfium.PdfiumError as exc:
        return PagePrep(index=index, error=f"{MalformedPdfError.code}: {exc}")
    except Exception as exc:  # one bad page must not end the document
        return page_failure(index, exc, job)
    finally:
        page.close()
        if text_page is not None:
            text_page.close()


def _same_frame(a: pdfium.PdfPage, b: pdfium.PdfPage) -> bool:
    """Whether two pages show the same size after /Rotate (within a point)."""
    ga, gb = page_geometry(a), page_geometry(b)
    return abs(ga.width_pt - gb.width_pt) <= 1 and abs(ga.height_pt - gb.height_pt) <= 1


def _for_ocr(page: pdfium.PdfPage, plan: RenderPlan, image: Image.Image, width_pt: float,
             height_pt: float, settings: RenderSettings) -> tuple[RenderPlan, Image.Image]:
    """The plan and render again at the resolution a CPU OCR engine needs when the
    text lines of ``image`` are too small for it; else both unchanged."""
    from folio.pdf.ocr_resolution import ocr_dpi, text_line_px  # numpy: not in the zygote

    finer = ocr_dpi(plan.dpi, text_line_px(image), width_pt, height_pt, settings)
    if finer is None:
        return plan, image
    dpi, why = finer
    width_px = max(1, math.floor(width_pt * dpi / 72.0))
    height_px = max(1, math.floor(height_pt * dpi / 72.0))
    plan = plan.model_copy(update={"dpi": dpi, "width_px": width_px, "height_px": height_px,
                                   "reason": f"{plan.reason}; {why}"})
    return plan, render(page, width_px, height_px)


def _measure_and_render(page: pdfium.PdfPage, index: int, job: WorkerJob,
                        text_page: pdfium.PdfPage | None = None) -> PagePrep:
    geometry = page_geometry(page)
    layer = extract(
        text_page if text_page is not None else page,
        width_pt=geometry.width_pt,
        height_pt=geometry.height_pt,
        settings=job.route_settings,
    )
    native_dpi = native_image_dpi(page)
    plan = plan_page(
        geometry.width_pt,
        geometry.height_pt,
        min_font_pt=layer.min_font_pt,
        native_dpi=native_dpi,
        settings=job.render_settings,
    )
    image_path: Path | None = None
    image: Image.Image | None = None
    if job.render == "all" or not layer.trusted:
        image = render(page, plan.width_px, plan.height_px)
        if job.ocr_resolution:
            plan, image = _for_ocr(page, plan, image, geometry.width_pt, geometry.height_pt,
                                   job.render_settings)
        image_path = _save(image, job.out_dir, index, job.render_settings.image_format)
    blank = is_blank(page, text_chars=layer.chars, image=image)
    layout = None
    if job.layout is not None and not blank:
        layout = detect_page(page, image, geometry.width_pt, geometry.height_pt, job.layout)
    layer = table_inputs(layer, page, geometry, layout)
    images = (None if job.figure_min_side_pt is None or blank
              else image_boxes(page, geometry, job.figure_min_side_pt))
    return PagePrep(
        index=index,
        width_pt=geometry.width_pt,
        height_pt=geometry.height_pt,
        rotation=geometry.rotation,
        plan=plan,
        image_path=str(image_path) if image_path else None,
        image_dpi_native=native_dpi,
        text_layer=layer,
        blank=blank,
        layout=layout,
        images=images,
    )


def _save(image: Image.Image, out_dir: Path, index: int, fmt: str) -> Path:
    """Encode (the costly part: PNG at compress_level=1) and move into place atomically."""
    path = out_dir / f"p{index:05d}.{fmt}"
    partial = out_dir / f".p{index:05d}.{fmt}.partial"
    if fmt == "png":
        image.save(partial, "PNG", compress_level=1)
    elif fmt == "jpeg":
        image.save(partial, "JPEG", quality=90)
    else:
        image.save(partial, "PPM")
    os.replace(partial, path)
    return path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
