"""Ghostscript, the one module that runs ``gs``: compress images, repair damaged files.

Safety rules, all enforced here: ``-dSAFER`` always, an argument list (never a shell), a
private temp directory per call (also gs's own ``TMPDIR``), its own process group killed
whole on timeout, an address-space cap (``RLIMIT_AS``, ``limits.ghostscript_memory_mb``),
output written next to ``dst`` (0600: a decrypted copy is as secret as the password) and
moved into place only when valid. The PDF password reaches gs in an argument file
(``@file``, 0600, in the private temp directory), never on its command line, which
every local user can read in ``ps``; gs inherits none of the run's secrets.

Ghostscript 10.0 exits 0 for some failures (a missing or wrong password, zero pages
processed), so its messages are read as well as its exit status.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from folio.errors import (
    ConfigError,
    EncryptedPdfError,
    MalformedPdfError,
    ResourceLimitError,
    TimeoutExpired,
)
from folio.models import CompressionInfo
from folio.security.redaction import child_env, redact_text

log = logging.getLogger(__name__)

GS_BINARY = "gs"
#: -dAutoRotatePages=/None: pdfwrite otherwise turns each page so that most of its text
#: reads upright, which moves a /Rotate page into another frame than the original's: the
#: text layer (read from the original) and every box folio reports would no longer match
#: the page as rendered, nor the page as the user's viewer shows it
_BASE_ARGS = ("-dSAFER", "-dBATCH", "-dNOPAUSE", "-dQUIET", "-sDEVICE=pdfwrite",
              "-dAutoRotatePages=/None")
_PASSWORD_FLAG = "-sPDFPassword="
#: gs says these on stdout/stderr; the first two can come with exit status 0
_PASSWORD_MARKERS = ("requires a password", "Password did not work", "Cannot decrypt")
_NO_PAGES_MARKER = "No pages will be processed"
#: gs says this when an allocation fails (under the address-space cap)
_MEMORY_MARKERS = ("VMerror", "out of memory", "Out of memory")
#: the default address-space cap (limits.ghostscript_memory_mb)
DEFAULT_MEMORY_MB = 2048
_TAIL_LINES = 8


def compress(
    src: Path, dst: Path, *, image_dpi: float, timeout_s: float, password: str | None = None,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> CompressionInfo:
    """Rewrite ``src`` to ``dst`` with images downsampled to ``image_dpi``; text stays text.

    Choose ``image_dpi`` from the render plan: below what the model sees loses
    information, above it buys nothing. Images are only resampled when they exceed
    1.5x the target (Ghostscript's threshold), and monochrome images can only be
    subsampled in Ghostscript 10. ``-dPDFSTOPONERROR`` makes a damaged input fail here
    instead of coming out silently incomplete (use :func:`repair` for those).
    ``used`` stays False: whether the smaller file is worth using is the caller's call.

    Raises:
        MalformedPdfError: Ghostscript failed or wrote no usable PDF.
        EncryptedPdfError: a password is needed or the one given is wrong.
        TimeoutExpired: it ran longer than ``timeout_s``.
    """
    dpi = f"{image_dpi:.0f}"
    options = [
        "-dPDFSTOPONERROR",
        "-dDetectDuplicateImages=true",
        "-dCompressFonts=true",
        "-dSubsetFonts=true",
        *_downsample_args("Color", "Bicubic", dpi),
        *_downsample_args("Gray", "Bicubic", dpi),
        *_downsample_args("Mono", "Subsample", dpi),
    ]
    started = time.monotonic()
    _run_pdfwrite(src, dst, options, timeout_s=timeout_s, password=password, memory_mb=memory_mb)
    return CompressionInfo(
        original_bytes=src.stat().st_size,
        compressed_bytes=dst.stat().st_size,
        image_dpi=image_dpi,
        seconds=round(time.monotonic() - started, 3),
        note=f"gs {gs_version()} pdfwrite, images > {1.5 * image_dpi:.0f}dpi -> {dpi}dpi",
    )


def repair(src: Path, dst: Path, *, timeout_s: float, password: str | None = None,
           memory_mb: int = DEFAULT_MEMORY_MB) -> Path:
    """Rewrite a damaged PDF with pdfwrite; Ghostscript recovers many files pdfium rejects.

    The result may lack what Ghostscript could not read: re-probe it for its page count.

    Raises:
        MalformedPdfError: Ghostscript could not make a PDF of it either.
        EncryptedPdfError: a password is needed or the one given is wrong.
        TimeoutExpired: it ran longer than ``timeout_s``.
    """
    _run_pdfwrite(src, dst, [], timeout_s=timeout_s, password=password, memory_mb=memory_mb)
    return dst


@lru_cache(maxsize=1)
def gs_version() -> str:
    """The installed Ghostscript's version, e.g. ``10.00.0``."""
    result = subprocess.run(
        [gs_binary(), "--version"], capture_output=True, text=True, timeout=30, check=True,
        env=child_env(),  # none of the run's secrets, as every other child
    )
    return result.stdout.strip()


def gs_binary() -> str:
    found = shutil.which(GS_BINARY)
    if found is None:
        raise ConfigError(f"Ghostscript ({GS_BINARY}) is not installed or not on PATH")
    return found


def _downsample_args(kind: str, method: str, dpi: str) -> list[str]:
    return [
        f"-dDownsample{kind}Images=true",
        f"-d{kind}ImageDownsampleType=/{method}",
        f"-d{kind}ImageResolution={dpi}",
    ]


def _run_pdfwrite(
    src: Path, dst: Path, options: list[str], *, timeout_s: float, password: str | None,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> None:
    """Run gs into a private temp dir beside ``dst``; move the output in when it is valid.

    gs runs with that temp dir as its working directory, so every path it is given is
    made absolute first (a relative one would be looked up inside the temp dir).
    """
    dst = dst.absolute()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".folio-gs-", dir=dst.parent) as tmp:
        out = Path(tmp) / "out.pdf"
        argv = [gs_binary(), *_BASE_ARGS, *options]
        if password:
            argv.append("@" + str(_password_file(Path(tmp), password)))
        # "%" in OutputFile is a page-number template; an absolute path never looks like
        # an option or an @argument-file
        argv += [f"-sOutputFile={str(out).replace('%', '%%')}", "-f", str(src.resolve())]
        env = child_env(TMPDIR=tmp, TEMP=tmp, TMP=tmp)
        log.debug("running %s", argv)
        returncode, output = _run(argv, env=env, cwd=tmp, timeout_s=timeout_s,
                                  memory_mb=memory_mb)
        _check(returncode, redact_text(output, [password]), out, memory_mb)
        os.chmod(out, 0o600)
        os.replace(out, dst)


def _password_file(tmp: Path, password: str) -> Path:
    """The password as a gs argument file (0600, in the private temp dir). gs reads a
    quoted value in it with ``\\"`` for a quote and every other character as it is.

    Raises:
        EncryptedPdfError: the password has a character gs cannot take this way (a line
            break, a NUL, or a backslash before a quote or at its end).
    """
    if any(c in password for c in "\n\r\0") or password.endswith("\\") or '\\"' in password:
        raise EncryptedPdfError("the password has a line break, a NUL or a backslash before "
                                "a quote: Ghostscript cannot be given it safely")
    path = tmp / "password.args"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(_PASSWORD_FLAG + '"' + password.replace('"', '\\"') + '"\n')
    return path


def _run(argv: list[str], *, env: dict[str, str], cwd: str, timeout_s: float,
         memory_mb: int = DEFAULT_MEMORY_MB) -> tuple[int, str]:
    """Run in a process group of its own; on timeout kill the whole group, not just gs.
    The address-space cap is set on the child right after it starts (``prlimit``: a
    ``preexec_fn`` is unsafe in a process with threads), before gs has read its input."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        process_group=0,  # its own group, the caller's session: see folio/pdf/zygote.py
    )
    try:
        limit = memory_mb * 1024 * 1024
        resource.prlimit(proc.pid, resource.RLIMIT_AS, (limit, limit))
        resource.prlimit(proc.pid, resource.RLIMIT_CORE, (0, 0))
    except (ProcessLookupError, PermissionError, ValueError, OSError):
        pass  # it ended already (its status says how)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise TimeoutExpired(f"ghostscript ran longer than {timeout_s:g}s") from None
    return proc.returncode, output.decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _check(returncode: int, output: str, out: Path,
           memory_mb: int = DEFAULT_MEMORY_MB) -> None:
    tail = " | ".join(line.strip() for line in output.strip().splitlines()[-_TAIL_LINES:])
    if any(marker in output for marker in _PASSWORD_MARKERS):
        raise EncryptedPdfError(f"ghostscript: {tail}")
    crashed = returncode < 0 and -returncode in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)
    if returncode != 0 and (crashed or any(m in output for m in _MEMORY_MARKERS)):
        raise ResourceLimitError(
            f"ghostscript stopped at its {memory_mb} MB memory limit "
            f"(limits.ghostscript_memory_mb; exit {returncode}): {tail or 'no message'}")
    if returncode != 0:
        raise MalformedPdfError(f"ghostscript failed (exit {returncode}): {tail}")
    if _NO_PAGES_MARKER in output:  # gs exits 0 here: "exit 0" in a reason misled
        raise MalformedPdfError(f"ghostscript processed no page: {tail}")
    if not _looks_like_pdf(out):
        raise MalformedPdfError(f"ghostscript wrote no valid PDF: {tail or 'no message'}")


def _looks_like_pdf(path: Path) -> bool:
    """Header at the start and an end-of-file marker in the last KiB."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with path.open("rb") as handle:
        head = handle.read(8)
        handle.seek(max(0, path.stat().st_size - 1024))
        tail = handle.read()
    return head.startswith(b"%PDF-") and b"%%EOF" in tail


