"""One exception tree for folio.

Two branches matter to callers: :class:`BadInputError` (the document itself is at fault;
retrying will not help, so the page or document is quarantined with the reason) and
:class:`TransientError` (infrastructure: a storage endpoint, an OCR server, a timeout;
retrying later may help, so the document is recorded as failed-retryable, never as done).
"""

from __future__ import annotations

import errno


class FolioError(Exception):
    """Base of every error folio raises on purpose."""

    #: short machine-readable code, used as the quarantine reason prefix
    code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def reason(self) -> str:
        """``code: message``, the text written next to a quarantined item."""
        return f"{self.code}: {self}"


class ConfigError(FolioError):
    """The configuration or the command line is wrong (a user error, not input's)."""

    code = "config"


# --- bad input: permanent --------------------------------------------------------------


class BadInputError(FolioError):
    """The input cannot be processed as given; retrying will not help."""

    code = "bad-input"


class NothingToDoError(BadInputError):
    """The request names nothing to work on: no PDF under the sources, no vectors to search."""

    code = "nothing-to-do"


class NotAPdfError(BadInputError):
    code = "not-a-pdf"


class EncryptedPdfError(BadInputError):
    code = "encrypted"


class EncryptedDocumentError(BadInputError):
    """An Office document sealed with a password folio does not have (PDFs: the
    ``password`` setting and :class:`EncryptedPdfError`)."""

    code = "encrypted"


class OfficeConversionError(BadInputError):
    """LibreOffice could not turn an Office document into a PDF: the file is corrupt, is
    not the format its content claims, or made LibreOffice fail or exceed its memory."""

    code = "office-conversion"


class MalformedPdfError(BadInputError):
    code = "malformed"


class PageTooLargeError(BadInputError):
    code = "page-too-large"


class ResourceLimitError(BadInputError):
    """The input made a process exceed a limit folio set on it (CPU time per page, memory
    of Ghostscript): a hostile or pathological file, not a fault to retry."""

    code = "resource-limit"


class PageCrashedError(BadInputError):
    """A page killed the page worker rendering it (a fault signal: pdfium aborting under
    the worker's memory cap, or a crash on a hostile page). Trying again would crash the
    same way, so it is the input's fault; a worker killed from outside (SIGKILL: the
    kernel's OOM killer, a person) stays a retryable ``worker-crashed``."""

    code = "page-crashed"
class BadImageError(BadInputError):
    """An image file Pillow cannot decode: a damaged header, truncated or corrupt data."""

    code = "bad-image"


class BadOutputError(BadInputError):
    """An engine answered, but the answer is unusable (repetition, truncation, garbage)."""

    code = "bad-output"


class ValidationFailedError(BadInputError):
    code = "validation"


# --- transient infrastructure ------------------------------------------------------------


class TransientError(FolioError):
    """Infrastructure trouble: worth retrying later; the document is not marked done."""

    code = "transient"


class TimeoutExpired(TransientError):
    code = "timeout"


class OfficeTimeoutError(TimeoutExpired):
    """A LibreOffice conversion ran past ``office.timeout_s`` and was killed. Transient,
    as a Ghostscript timeout is: on a crowded host a large document can run late and
    convert on the next sweep (folio.formats.office)."""


class EngineUnavailableError(TransientError):
    code = "engine-unavailable"


class StorageError(TransientError):
    code = "storage"


class OrchestratorUnavailableError(TransientError):
    """The Prefect API did not answer (its server down or restarting, the network cut)
    for longer than a caller rides out: what the runs it follows did is unknown, not
    failed; a later sweep finds them by their tags."""

    code = "orchestrator-unavailable"


class RunStoppedError(TransientError):
    """The run was stopped (Ctrl-C, SIGTERM, a cancelled flow run) while this work was
    still under way: nothing of it counts as done, and a rerun does it."""

    code = "cancelled"


class WorkerCrashedError(TransientError):
    """A page worker process died (signal, memory limit) before finishing."""

    code = "worker-crashed"


#: errno values that say the machine, not the document, is at fault: the disk (or quota)
#: is full, or the file system went read-only or failed under us
_OS_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def storage_error_from_os(exc: OSError, doing: str) -> StorageError | None:
    """A :class:`StorageError` for an OSError that is the machine's trouble (a full disk,
    a read-only or failing file system), so the work is retried later instead of the
    page being quarantined for good; None for any other OSError."""
    if exc.errno not in _OS_STORAGE_ERRNOS:
        return None
    return StorageError(f"{doing}: {exc.strerror or type(exc).__name__}")


def is_transient_code(reason: str) -> bool:
    """Whether a reason written as ``code: message`` (page-worker errors cross a process
    boundary as text) names a transient error class. The one place such text is read."""
    code = reason.split(":", 1)[0].strip()
    return code in _TRANSIENT_CODES


def _subclasses(cls: type[FolioError]) -> list[type[FolioError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _subclasses(child))]


_TRANSIENT_CODES = frozenset(c.code for c in _subclasses(TransientError)) | {"internal"}


# --- a run's verdict ----------------------------------------------------------------------


class AllQuarantinedError(FolioError):
    """A run in which every document it processed was quarantined: what the flow's Failed
    state carries (folio_prefect.flows.ingest.final_state), with the run's report, so a
    Python caller of the flow gets a typed error holding every document's line instead of
    Prefect's "cannot be resolved into an exception" for a bare report."""

    code = "all-quarantined"

    def __init__(self, message: str, report: dict[str, object]) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[type[AllQuarantinedError], tuple[str, dict[str, object]]]:
        # pickled with the run's result (Prefect persists a Failed state's data)
        return (type(self), (str(self), self.report))
