"""The page worker's parent side: pdfium runs in a child process, one JSON line per page.

pdfium is not thread-safe, can hang or crash on hostile files, and a single render can
ask for gigabytes. So every document's pages are prepared in a child process
(:mod:`folio.pdf.worker_child`, forked by :mod:`folio.pdf.zygote`, or run as
``python -m folio.pdf.worker_child`` with ``FOLIO_WORKER_START=exec``) with an
address-space limit, while this side enforces a wall-clock budget. The child streams one
line per page (:mod:`folio.pdf.worker_protocol`); the pipe is the queue, so a slow
consumer makes the child wait instead of piling up images.

When the child dies mid-document this side keeps every page it received, marks the page
in progress as the one that killed it, and starts a new child for the rest (at most
:data:`MAX_RESTARTS` times). Every requested page comes out exactly once, in order.
"""

from __future__ import annotations

import logging
import os
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

from pydantic import SecretStr

from folio.errors import (
    BadImageError,
    EncryptedPdfError,
    FolioError,
    MalformedPdfError,
    NotAPdfError,
    PageCrashedError,
    PageTooLargeError,
    ResourceLimitError,
    TimeoutExpired,
    WorkerCrashedError,
)
from folio.figures.crops import CropDone
from folio.models import PagePrep
from folio.pdf import zygote
from folio.pdf.worker_protocol import (
    REVEAL,
    CropJob,
    PdfInfo,
    WorkerJob,
    WorkerMessage,
    WorkerRequest,
)
from folio.security.redaction import child_env

__all__ = ["MAX_RESTARTS", "CropJob", "PdfInfo", "WorkerJob", "prepare_pages", "probe",
           "render_crops"]

log = logging.getLogger(__name__)

#: children started again after a crash, per :func:`prepare_pages` call
MAX_RESTARTS = 3
#: signals a page brings on itself: pdfium aborting or faulting (under the memory cap, or
#: on a hostile page); SIGXCPU is the per-page CPU limit. SIGKILL comes from outside (the
#: kernel's OOM killer, a person) and stays a retryable crash.
_FAULT_SIGNALS = frozenset({"SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGTRAP", "SIGFPE"})


def crash_reason(page: int, status: str, job: WorkerJob) -> str:
    """Why ``page`` ended the page worker that ``status`` describes: the input's fault
    (``resource-limit``, ``page-crashed``: not retried) when folio's own limits or a
    fault on the page ended it, else a retryable ``worker-crashed``."""
    signame = status.removeprefix("signal ") if status.startswith("signal ") else None
    if signame == "SIGXCPU":
        return (f"{ResourceLimitError.code}: page {page} took more than {job.page_cpu_s:g} CPU "
                "seconds to render (limits.page_cpu_s)")
    if signame in _FAULT_SIGNALS:
        return (f"{PageCrashedError.code}: page {page} crashed the page worker ({status}; "
                f"a hostile page, or one over the {job.memory_mb} MB memory limit, "
                "limits.worker_memory_mb)")
    return f"worker-crashed: page {page} killed the page worker ({status})"
_READ_CHUNK = 1 << 16
_STDERR_TAIL = 2000
_ERROR_CLASSES: dict[str, type[FolioError]] = {
    cls.code: cls for cls in (NotAPdfError, EncryptedPdfError, MalformedPdfError,
                              BadImageError, PageTooLargeError)
}


def prepare_pages(job: WorkerJob) -> Generator[PagePrep, None, None]:
    """Yield a :class:`PagePrep` for every index in ``job.pages``, once each, in order.
    A generator: a consumer that stops early closes it, which kills the child.

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
    inputs_fault = True  # every crash so far was the pages' own (crash_reason)
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
        reason = crash_reason(victim, status, job)
        inputs_fault = inputs_fault and not reason.startswith("worker-crashed")
        yield PagePrep(index=victim, error=reason)
        if crashes > MAX_RESTARTS:
            # pages of a document that crashed the worker this often would do it again
            code = PageCrashedError.code if inputs_fault else "worker-crashed"
            reason = f"{code}: not attempted after {crashes} page worker crashes"
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


def probe(pdf: Path, password: SecretStr | None, timeout_s: float, memory_mb: int,
          nice: int = 0, *, kind: Literal["pdf", "image"] = "pdf",
          max_image_pixels: int | None = None) -> PdfInfo:
    """Page count, encryption, version and largest page, read in a child process (at
    ``nice``: see :mod:`folio.pdf.zygote`).

    Raises:
        NotAPdfError, EncryptedPdfError, MalformedPdfError: as :func:`open_pdf` would.
        BadImageError, PageTooLargeError: an image (``kind="image"``) Pillow cannot read,
            or one over ``max_image_pixels``.
        TimeoutExpired: the child took longer than ``timeout_s``.
        WorkerCrashedError: the child died (a hostile file can crash pdfium).
        FileNotFoundError: ``pdf`` does not exist.
    """
    if not pdf.is_file():
        raise FileNotFoundError(pdf)
    request = WorkerRequest(pdf=pdf, password=password, memory_mb=memory_mb, nice=nice,
                            kind=kind)
    if max_image_pixels is not None:
        request.max_image_pixels = max_image_pixels
    with _Child("probe", request) as child:
        try:
            for message in child.messages(_Budget(timeout_s)):
                if message.fatal is not None:
                    raise _error_class(message.fatal.code)(message.fatal.message)
                if message.info is not None:
                    return message.info
        except _OutOfTime:
            raise TimeoutExpired(f"probing the {kind} took longer than {timeout_s:g}s") from None
        raise WorkerCrashedError(f"probe worker died ({child.wait()}): {child.stderr_tail()}")


def render_crops(job: CropJob, timeout_s: float) -> list[CropDone]:
    """Render a document's figure crops in a child process (:mod:`folio.figures.crops`),
    one :class:`CropDone` per crop in ``job.crops`` that the child answered; a crop
    the child did not reach (it crashed or ran out of time) is answered with why.

    Raises:
        NotAPdfError, EncryptedPdfError, MalformedPdfError: the PDF would not open.
    """
    done: dict[str, CropDone] = {}
    problem = ""
    with _Child("crops", job) as child:
        try:
            for message in child.messages(_Budget(timeout_s)):
                if message.fatal is not None:
                    raise _error_class(message.fatal.code)(message.fatal.message)
                if message.crop is not None:
                    done[message.crop.stem] = message.crop
        except _OutOfTime:
            problem = f"crops took longer than {timeout_s:g}s"
        if len(done) < len(job.crops) and not problem:
            problem = f"crop worker died ({child.wait()}): {child.stderr_tail()[-200:]}"
    return [done.get(spec.stem) or CropDone(stem=spec.stem, error=problem)
            for spec in job.crops]


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
    """A page worker process in its own process group, killed with its group on exit."""

    def __init__(self, op: Literal["pages", "probe", "crops"], request: WorkerRequest) -> None:
        # closed in __exit__; a file, not a pipe, so a chatty child never blocks on it
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        payload = request.model_dump_json(context={REVEAL: True}).encode()
        forked = zygote.spawn(op, payload, self._stderr.fileno(), request.nice)
        self._proc: subprocess.Popen[bytes] | zygote.ForkedChild
        if forked is not None:
            self._proc = forked
        else:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "folio.pdf.worker_child", op],
                env=child_env(),  # the password comes on stdin, no other secret at all
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                process_group=0,  # its own group, the caller's session: see folio/pdf/zygote.py
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

    def messages(self, budget: _Budget) -> Iterator[WorkerMessage]:
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
                        yield WorkerMessage.model_validate_json(line)

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
