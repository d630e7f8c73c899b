"""The page worker: pdfium in a child process, one JSON line per page.

pdfium is not thread-safe, can hang or crash on hostile files, and a single render can
ask for gigabytes. So every document's pages are prepared in a child process (forked by
:mod:`folio.pdf.zygote`, or ``python -m folio.pdf.page_worker`` with
``FOLIO_WORKER_START=exec``) with an address-space limit (``RLIMIT_AS``), while the
parent enforces a wall-clock budget. The child streams one line per page; the pipe
is the queue, so a slow consumer makes the child wait instead of piling up images.

When the child dies mid-document the parent keeps every page it received, marks the page
in progress as the one that killed it, and starts a new child for the rest (at most
:data:`MAX_RESTARTS` times). Every requested page comes out exactly once, in order.

Wire protocol (child stdout, one :class:`_Message` JSON object per line): ``ready`` once
the document is open, then ``page`` per page, or one ``fatal`` when the document cannot
be opened (the parent re-raises the same folio error class); ``info`` answers a probe.
The job arrives on stdin, so the password never appears in a process listing.

Test-only hooks (read by the child; never set them in production):
``FOLIO_TEST_CRASH_ON_PAGE=N`` calls ``os.abort()`` before page N;
``FOLIO_TEST_HANG_ON_PAGE=N`` sleeps forever before page N (``probe``: in a probe).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, Literal, Self

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image
from pydantic import BaseModel, Field, SecretStr, SerializationInfo, field_serializer

from folio.config import RenderSettings, RouteSettings
from folio.errors import (
    EncryptedPdfError,
    FolioError,
    MalformedPdfError,
    NotAPdfError,
    PageTooLargeError,
    TimeoutExpired,
    WorkerCrashedError,
)
from folio.models import PagePrep
from folio.pdf import zygote
from folio.pdf.pdfium_doc import (
    PDFIUM_LOCK,
    is_blank,
    native_image_dpi,
    open_pdf,
    page_geometry,
    render,
)
from folio.pdf.render_plan import plan_page
from folio.pdf.text_layer import extract

log = logging.getLogger(__name__)

#: children started again after a crash, per :func:`prepare_pages` call
MAX_RESTARTS = 3
_CRASH_HOOK = "FOLIO_TEST_CRASH_ON_PAGE"
_HANG_HOOK = "FOLIO_TEST_HANG_ON_PAGE"
_REVEAL = "reveal_secrets"
_READ_CHUNK = 1 << 16
_STDERR_TAIL = 2000
_ERROR_CLASSES: dict[str, type[FolioError]] = {
    cls.code: cls for cls in (NotAPdfError, EncryptedPdfError, MalformedPdfError)
}


class _Request(BaseModel):
    """What every child needs: the file, its password and a memory cap."""

    pdf: Path
    password: SecretStr | None = None
    memory_mb: int = Field(4096, gt=0, description="RLIMIT_AS of the child process")

    @field_serializer("password", when_used="json")
    def _dump_password(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        """Masked in any JSON dump, except the one sent to the child over its stdin."""
        if value is None:
            return None
        reveal = isinstance(info.context, dict) and info.context.get(_REVEAL)
        return value.get_secret_value() if reveal else str(value)


class WorkerJob(_Request):
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


class PdfInfo(BaseModel):
    page_count: int
    encrypted: bool
    pdf_version: str | None = None  # "1.7"
    producer: str | None = None
    max_page_pt: float = 0.0  # longest page side in the document


class _Fatal(BaseModel):
    code: str
    message: str


class _Message(BaseModel):
    ready: int | None = None
    page: PagePrep | None = None
    info: PdfInfo | None = None
    fatal: _Fatal | None = None


# --- parent side --------------------------------------------------------------------------


def prepare_pages(job: WorkerJob) -> Iterator[PagePrep]:
    """Yield a :class:`PagePrep` for every index in ``job.pages``, once each, in order.

    Pages a child could not survive carry ``error="worker-crashed: ..."``; pages left
    when the time budget runs out carry ``error="timeout: ..."``.

    Raises:
        NotAPdfError, EncryptedPdfError, MalformedPdfError: the document cannot be opened.
        WorkerCrashedError: a child died before it could open the document.
        FileNotFoundError: ``job.pdf`` does not exist.
    """
    if not job.pdf.is_file():
        raise FileNotFoundError(job.pdf)
    job.out_dir.mkdir(parents=True, exist_ok=True)
    pending = deque(job.pages)
    budget = _Budget(job.timeout_s)
    crashes = 0
    while pending:
        with _Child("pages", job.model_copy(update={"pages": list(pending)})) as child:
            try:
                opened = yield from _stream(child, pending, budget)
            except _OutOfTime:
                reason = f"timeout: page worker exceeded {job.timeout_s:g}s"
                yield from (PagePrep(index=index, error=reason) for index in pending)
                return
            if not pending:
                return
            status, stderr_tail = child.wait(), child.stderr_tail()
        if not opened:
            raise WorkerCrashedError(
                f"page worker died before opening the document ({status}): {stderr_tail}"
            )
        crashes += 1
        victim = pending.popleft()
        log.warning("page %d killed the page worker (%s): %s", victim, status, stderr_tail)
        yield PagePrep(
            index=victim, error=f"worker-crashed: page {victim} killed the page worker ({status})"
        )
        if crashes > MAX_RESTARTS:
            reason = f"worker-crashed: not attempted after {crashes} page worker crashes"
            yield from (PagePrep(index=index, error=reason) for index in pending)
            return


def _stream(child: _Child, pending: deque[int], budget: _Budget) -> Generator[PagePrep, None, bool]:
    """Relay one child's pages; returns whether it got the document open."""
    opened = False
    for message in child.messages(budget):
        if message.fatal is not None:
            raise _error_class(message.fatal.code)(message.fatal.message)
        if message.ready is not None:
            opened = True
        if message.page is not None:
            if not pending or message.page.index != pending[0]:
                raise WorkerCrashedError(f"page worker sent page {message.page.index} out of order")
            pending.popleft()
            yield message.page
    return opened


def probe(pdf: Path, password: SecretStr | None, timeout_s: float, memory_mb: int) -> PdfInfo:
    """Page count, encryption, version and largest page, read in a child process.

    Raises:
        NotAPdfError, EncryptedPdfError, MalformedPdfError: as :func:`open_pdf` would.
        TimeoutExpired: the child took longer than ``timeout_s``.
        WorkerCrashedError: the child died (a hostile file can crash pdfium).
        FileNotFoundError: ``pdf`` does not exist.
    """
    if not pdf.is_file():
        raise FileNotFoundError(pdf)
    with _Child("probe", _Request(pdf=pdf, password=password, memory_mb=memory_mb)) as child:
        try:
            for message in child.messages(_Budget(timeout_s)):
                if message.fatal is not None:
                    raise _error_class(message.fatal.code)(message.fatal.message)
                if message.info is not None:
                    return message.info
        except _OutOfTime:
            raise TimeoutExpired(f"probing the PDF took longer than {timeout_s:g}s") from None
        raise WorkerCrashedError(f"probe worker died ({child.wait()}): {child.stderr_tail()}")


def _error_class(code: str) -> type[FolioError]:
    return _ERROR_CLASSES.get(code, MalformedPdfError)


class _OutOfTime(Exception):
    """The budget ran out while waiting for the child."""


class _Budget:
    """Seconds spent waiting on children; time the consumer holds a page is not counted."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def wait(self, selector: selectors.BaseSelector) -> None:
        """Block until the selector is ready, charging the wait to the budget."""
        while True:
            if self.left <= 0:
                raise _OutOfTime
            started = time.monotonic()
            ready = selector.select(timeout=self.left)
            self.left -= time.monotonic() - started
            if ready:
                return


class _Child:
    """A page worker process in its own session, killed with its group on exit."""

    def __init__(self, op: Literal["pages", "probe"], request: _Request) -> None:
        # closed in __exit__; a file, not a pipe, so a chatty child never blocks on it
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        payload = request.model_dump_json(context={_REVEAL: True}).encode()
        forked = zygote.spawn(op, payload, self._stderr.fileno())
        self._proc: subprocess.Popen[bytes] | zygote.ForkedChild
        if forked is not None:
            self._proc = forked
        else:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "folio.pdf.page_worker", op],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write(payload)
                self._proc.stdin.close()
            except BrokenPipeError:
                pass  # it died at once; wait() will say how
        log.debug("page worker pid %d started (%s)", self._proc.pid, op)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()
        self._stderr.close()

    def messages(self, budget: _Budget) -> Iterator[_Message]:
        """Parsed lines as they arrive; ends at EOF (a torn last line is dropped)."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                budget.wait(selector)
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield _Message.model_validate_json(line)

    def wait(self) -> str:
        """Reap the child; describe how it ended ("signal SIGABRT", "exit status 1")."""
        returncode = self._proc.wait()
        if returncode < 0:
            return f"signal {signal.Signals(-returncode).name}"
        return f"exit status {returncode}"

    def kill(self) -> None:
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - _STDERR_TAIL))
        return self._stderr.read().decode("utf-8", errors="replace").strip()


# --- child side ---------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """Child entry point (exec mode): read the request from stdin, answer on stdout."""
    return run(argv[0] if argv else "pages", sys.stdin.buffer.read())


def run(op: str, raw: bytes) -> int:
    """Answer one request (``op`` "probe" or "pages") on stdout; the exit code."""
    faulthandler.enable()  # a pdfium crash leaves a Python traceback in the parent's log
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        if op == "probe":
            request = _Request.model_validate_json(raw)
            _limit_memory(request.memory_mb)
            _emit(_probe(request))
        else:
            job = WorkerJob.model_validate_json(raw)
            _limit_memory(job.memory_mb)
            _run_pages(job)
    except BrokenPipeError:
        return 1  # the parent stopped listening (timeout, or its consumer stopped early)
    return 0


def _limit_memory(memory_mb: int) -> None:
    """Cap the address space (a huge render fails here, not in the OOM killer) and
    disable core dumps (a crash on a hostile file must not write gigabytes)."""
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _emit(message: _Message) -> None:
    sys.stdout.write(message.model_dump_json(exclude_none=True) + "\n")
    sys.stdout.flush()


def _secret(password: SecretStr | None) -> str | None:
    return password.get_secret_value() if password is not None else None


def _open(request: _Request) -> pdfium.PdfDocument | _Message:
    try:
        return open_pdf(request.pdf, _secret(request.password))
    except FolioError as exc:
        return _Message(fatal=_Fatal(code=exc.code, message=str(exc)))


def _probe(request: _Request) -> _Message:
    _test_hooks("probe")
    doc = _open(request)
    if isinstance(doc, _Message):
        return doc
    with PDFIUM_LOCK:
        try:
            return _Message(info=_document_info(doc))
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
    )


def _run_pages(job: WorkerJob) -> None:
    doc = _open(job)
    if isinstance(doc, _Message):
        _emit(doc)
        return
    text_doc = _open_text_pdf(job, len(doc))
    with PDFIUM_LOCK:
        try:
            page_count = len(doc)
            _emit(_Message(ready=page_count))
            for index in job.pages:
                _test_hooks(index)
                _emit(_Message(page=_prepare_page(doc, index, page_count, job, text_doc)))
        finally:
            doc.close()
            if text_doc is not None:
                text_doc.close()


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
        return _measure_and_render(page, index, job, text_page)
    except FolioError as exc:
        return PagePrep(index=index, error=exc.reason)
    except pdfium.PdfiumError as exc:
        return PagePrep(index=index, error=f"{MalformedPdfError.code}: {exc}")
    except MemoryError:
        return PagePrep(
            index=index,
            error=f"{PageTooLargeError.code}: out of memory under the {job.memory_mb} MB limit",
        )
    except Exception as exc:  # one bad page must not end the document
        log.exception("page %d failed", index)
        return PagePrep(index=index, error=f"error: {type(exc).__name__}: {exc}")
    finally:
        page.close()
        if text_page is not None:
            text_page.close()


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
        image_path = _save(image, job.out_dir, index, job.render_settings.image_format)
    blank = is_blank(page, text_chars=layer.chars, image=image)
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
