"""What the page worker's parent and child say to each other: the request on the child's
stdin, one :class:`WorkerMessage` JSON line per event on its stdout.

``ready`` once the document is open, then ``page`` per page, or one ``fatal`` when the
document cannot be opened (the parent re-raises the same folio error class); ``info``
answers a probe. The request arrives on stdin, so the password never appears in a
process listing; it is masked in every other JSON dump.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, SerializationInfo, field_serializer

from folio.errors import FolioError, PageTooLargeError, storage_error_from_os
from folio.figures.crops import CropDone, CropJobSettings, CropSpec
from folio.models import OutlineEntry, PagePrep
from folio.settings.config import LayoutSettings, RenderSettings, RouteSettings

__all__ = ["REVEAL", "CropJob", "Fatal", "PdfInfo", "WorkerJob", "WorkerMessage",
           "WorkerRequest", "page_failure"]

_log = logging.getLogger("folio.pdf.worker_child")  # the page worker's own log

#: serialisation context key that puts the password in clear (the child's stdin only)
REVEAL = "reveal_secrets"


class WorkerRequest(BaseModel):
    """What every child needs: the file, its password and a memory cap."""

    pdf: Path
    password: SecretStr | None = None
    memory_mb: int = Field(4096, gt=0, description="RLIMIT_AS of the child process")
    nice: int = Field(0, ge=0, le=19, description="the child's nice value: it yields the CPU "
                      "to a co-located server (folio.pdf.zygote)")
    kind: Literal["pdf", "image"] = Field(
        "pdf", description="what the file is: a PDF (pdfium) or an image (Pillow, "
        "folio.formats.image_pages); the field keeps its name for both")
    max_image_pixels: int = Field(
        180_000_000, gt=0, description="an image (or a frame of one) with more pixels is "
        "refused before it is decoded")

    @field_serializer("password", when_used="json")
    def _dump_password(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        """Masked in any JSON dump, except the one sent to the child over its stdin."""
        if value is None:
            return None
        reveal = isinstance(info.context, dict) and info.context.get(REVEAL)
        return value.get_secret_value() if reveal else str(value)


class WorkerJob(WorkerRequest):
    """One page worker run: which pages of which PDF, rendered how and where."""

    pages: list[int]
    text_pdf: Path | None = Field(
        None, description="the original when pdf is a compressed copy: text layers are read "
        "and judged here, pages rendered from pdf (same pages, same sizes)")
    out_dir: Path = Field(description="rendered images go here as p{index:05d}.{format}")
    render_settings: RenderSettings
    route_settings: RouteSettings
    render: Literal["all", "untrusted"] = Field(
        "all", description="untrusted: skip rendering pages whose text layer is trusted"
    )
    timeout_s: float = Field(
        900.0, gt=0, description="time spent waiting on children (not on the consumer)"
    )
    page_cpu_s: float | None = Field(
        None, gt=0, description="CPU seconds one page may take in the child (RLIMIT_CPU, "
        "raised page by page); a page over it ends the child with SIGXCPU")
    layout: LayoutSettings | None = Field(
        None, description="detect layout regions on every non-blank page with these "
        "settings (PagePrep.layout); None: no detection")
    ocr_resolution: bool = Field(
        False, description="pages go to a CPU OCR engine: render those whose text lines "
        "are too small again at the resolution it reads best (folio.pdf.ocr_resolution)")
    figure_min_side_pt: float | None = Field(
        None, description="list the page's image objects of at least this shorter side "
        "(PagePrep.images: figures the layout model misses); None: not at all")


class CropJob(WorkerRequest):
    """Figure crops of one document (folio.figures.crops), one ``crop`` line each."""

    crops: list[CropSpec]
    out_dir: Path = Field(description="crops are written here as {stem}.png or .jpg")
    settings: CropJobSettings = Field(default_factory=CropJobSettings)


class PdfInfo(BaseModel):
    page_count: int
    encrypted: bool
    pdf_version: str | None = None  # "1.7"
    producer: str | None = None
    max_page_pt: float = 0.0  # longest page side in the document
    outline: list[OutlineEntry] = Field(default_factory=list)  # bookmarks (folio.pdf.pdfium_doc)


class Fatal(BaseModel):
    code: str
    message: str


class WorkerMessage(BaseModel):
    ready: int | None = None
    page: PagePrep | None = None
    info: PdfInfo | None = None
    fatal: Fatal | None = None
    crop: CropDone | None = None


def page_failure(index: int, exc: BaseException, job: WorkerJob) -> PagePrep:
    """The page a failed render leaves, for every kind of input a page worker reads (a
    PDF's page, an image's frame): the error's reason, so that one bad page never ends
    its document. Out of memory is the page's size under ``job``'s limit; a full working
    folder the machine's (retried later); anything else an error with its type, logged."""
    if isinstance(exc, FolioError):
        return PagePrep(index=index, error=exc.reason)
    if isinstance(exc, MemoryError):
        return PagePrep(index=index, error=f"{PageTooLargeError.code}: out of memory under "
                        f"the {job.memory_mb} MB limit")
    if isinstance(exc, OSError):
        storage = storage_error_from_os(exc, f"page {index + 1} in {job.out_dir}")
        if storage is not None:
            return PagePrep(index=index, error=storage.reason)
    _log.error("page %d failed", index, exc_info=exc)
    return PagePrep(index=index, error=f"error: {type(exc).__name__}: {exc}")
