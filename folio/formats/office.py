"""Office documents LibreOffice headless converts: DOC, RTF and ODT into DOCX, XLS and ODS
into XLSX, PPT and ODP into PPTX, which folio then reads natively (folio.formats.office_read);
and into PDF for the conversion benchmark (bench/office_convert.py).

Every conversion is a LibreOffice of its own, and is treated as running hostile input:

- its own user profile in a fresh folder (``-env:UserInstallation``): conversions run side
  by side, and one that crashed or was killed leaves no lock behind for the next;
- macros off in that profile (security level "very high" and macro execution disabled),
  links to untrusted remote content blocked;
- the import filter named from the file's content (folio.formats.office_kind): LibreOffice
  left to guess reads random bytes as plain text and "converts" them;
- the input copied under a fixed name (``document.docx``), so no file name can turn into an
  option; argument lists, never a shell;
- a process group of its own, killed whole on timeout (``soffice`` is a script that starts
  ``oosplash``, which starts ``soffice.bin``: killing the first leaves the others running);
- an address-space limit (``prlimit --as``; inherited by every process it starts) and no
  core dumps; stdin closed, its output kept to a bounded tail; an environment with the
  locale and PATH only (no credentials reach the process that parses the document).

Failures end in typed errors: :class:`~folio.errors.EncryptedDocumentError` and
:class:`~folio.errors.OfficeConversionError` (the input's fault),
:class:`~folio.errors.OfficeTimeoutError` (retried later), and
:class:`~folio.errors.ConfigError` when LibreOffice is not installed.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from folio.errors import (
    ConfigError,
    EncryptedDocumentError,
    OfficeConversionError,
    OfficeTimeoutError,
)
from folio.formats.office_kind import OfficeKind, cfb_encryption, sniff_office

log = logging.getLogger(__name__)

#: executables tried on PATH, in order
SOFFICE_NAMES = ("soffice", "libreoffice")

INSTALL_HINT = (
    "LibreOffice (soffice) is not installed or not on PATH; Office documents need it: "
    "apt-get install --no-install-recommends libreoffice-writer-nogui "
    "libreoffice-calc-nogui libreoffice-impress-nogui (or run scripts/setup.sh)")

#: the shared library of each LibreOffice application, beside soffice in its program folder
_APP_LIBRARIES = {"writer": "libswlo.so", "calc": "libsclo.so", "impress": "libsdlo.so"}

#: the most of LibreOffice's own output kept for a reason (its tail)
_OUTPUT_LIMIT = 16 * 1024
#: lines of that output quoted in a reason
_TAIL_LINES = 3
#: what LibreOffice (or the loader starting it) prints when the address-space cap bites
_MEMORY_MARKERS = ("failed to map segment", "bad_alloc", "Cannot allocate memory",
                   "cannot allocate memory")
#: environment variables a conversion inherits: the locale (number and date formats in
#: spreadsheets), fonts' configuration and PATH; nothing else, no credentials
_ENV_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ", "FONTCONFIG_FILE", "FONTCONFIG_PATH")

#: the profile's settings (LibreOffice's registrymodifications.xcu format): macro security
#: "very high" (3: only signed macros from trusted locations, and none are trusted) and
#: macro execution disabled outright; links from untrusted documents blocked
_PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" \
xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting">\
<prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting">\
<prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting">\
<prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
</oor:items>
"""


def find_soffice() -> str | None:
    """The LibreOffice executable on PATH, or None."""
    for name in SOFFICE_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_libreoffice() -> None:
    """Raise :class:`ConfigError` (one line, with how to install it) when LibreOffice is
    missing: a run's preflight check for sources that hold Office documents."""
    if find_soffice() is None:
        raise ConfigError(INSTALL_HINT)


#: the names of the Office documents LibreOffice converts before they are read (DOCX, XLSX
#: and PPTX are read without it): what the run's preflight looks for among the entries it
#: listed (content decides the format later; a misnamed one that needs LibreOffice on a
#: host without it ends retryable with the same hint)
OFFICE_SUFFIXES = (".odt", ".ott", ".ods", ".ots", ".odp", ".otp", ".rtf", ".doc", ".dot",
                   ".xls", ".xlt", ".ppt", ".pot", ".pps")


def require_for(names: Iterable[str], enabled: bool) -> None:
    """:func:`require_libreoffice` when ``enabled`` (``office.enabled``) and one of the
    listed entries' ``names`` is an Office file LibreOffice converts: before any work, a
    run that would convert one on a host without LibreOffice stops with one line (exit 2),
    instead of quarantining each document with the same reason."""
    if enabled and any(name.lower().endswith(OFFICE_SUFFIXES) for name in names):
        require_libreoffice()


#: the OOXML format each LibreOffice application writes for the native readers
OOXML_TARGET = {"writer": "docx", "calc": "xlsx", "impress": "pptx"}


def convert_to_pdf(src: Path, work_dir: Path, *, timeout_s: float, memory_mb: int) -> Path:
    """Convert the Office document ``src`` into a PDF inside ``work_dir`` (the benchmark
    of conversions uses it; the pipeline reads Office files natively): :func:`convert`."""
    return convert(src, work_dir, "pdf", timeout_s=timeout_s, memory_mb=memory_mb)


def convert_to_ooxml(src: Path, work_dir: Path, *, timeout_s: float, memory_mb: int,
                     kind: OfficeKind | None = None) -> Path:
    """Convert ``src`` (DOC, RTF, ODT; XLS, ODS; PPT, ODP; an encrypted OOXML package)
    into the OOXML format of its application (DOCX, XLSX, PPTX: :data:`OOXML_TARGET`),
    which the native readers parse: :func:`convert`. ``kind``: what the caller already
    sniffed from the file (sniffed here otherwise)."""
    kind = kind or sniff_office(src)
    return convert(src, work_dir, OOXML_TARGET[kind.app], timeout_s=timeout_s,
                   memory_mb=memory_mb, kind=kind)


def convert(src: Path, work_dir: Path, target: str, *, timeout_s: float,
            memory_mb: int, kind: OfficeKind | None = None) -> Path:
    """Convert the Office document ``src`` into ``target`` (``pdf``, ``docx``, ``xlsx``,
    ``pptx``) inside ``work_dir``; return its path.

    The output's name is unique (conversions share ``work_dir``); the caller removes it.
    Nothing else is left in ``work_dir``, whatever happens.

    Raises:
        ConfigError: LibreOffice is not installed.
        EncryptedDocumentError: the document needs a password.
        OfficeConversionError: the file is corrupt, not an Office document, or
            LibreOffice failed on it (a crash, the memory limit) with no output.
        OfficeTimeoutError: the conversion ran longer than ``timeout_s``.
    """
    soffice = find_soffice()
    if soffice is None:
        raise ConfigError(INSTALL_HINT)
    kind = kind or sniff_office(src)  # the caller's, where it sniffed the file already
    work_dir.mkdir(parents=True, exist_ok=True)
    job = Path(tempfile.mkdtemp(prefix=".folio-office-", dir=work_dir))
    try:
        document = job / "in" / f"document.{kind.extension}"
        document.parent.mkdir()
        shutil.copyfile(src, document)
        profile = job / "profile"
        _write_profile(profile)
        out_dir = job / "out"
        argv = _command(soffice, kind, profile, document, out_dir, target)
        (job / "tmp").mkdir()
        returncode, output = _run(argv, env=_environment(job), cwd=job, timeout_s=timeout_s,
                                  memory_mb=memory_mb)
        produced = out_dir / f"document.{target}"
        if not _looks_like(produced, target):
            _check_module(soffice, kind)
            raise _failure(src, kind, returncode, output, memory_mb, target)
        result = work_dir / f"office-{job.name.rsplit('-', 1)[-1]}.{target}"
        os.replace(produced, result)
        return result
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _command(soffice: str, kind: OfficeKind, profile: Path, document: Path,
             out_dir: Path, target: str) -> list[str]:
    argv = [soffice, f"-env:UserInstallation={profile.as_uri()}", "--headless",
            "--invisible", "--norestore", "--nolockcheck", "--nodefault", "--nologo"]
    if kind.infilter:
        argv.append(f"--infilter={kind.infilter}")
    # absolute paths: they start with "/" and cannot be read as options
    return [*argv, "--convert-to", target, "--outdir", str(out_dir), str(document)]


def _write_profile(profile: Path) -> None:
    user = profile / "user"
    user.mkdir(parents=True)
    (user / "registrymodifications.xcu").write_text(_PROFILE_SETTINGS, encoding="utf-8")


def _environment(job: Path) -> dict[str, str]:
    env = {key: os.environ[key] for key in _ENV_KEEP if key in os.environ}
    env.update({key: value for key, value in os.environ.items() if key.startswith("LC_")})
    # LibreOffice writes its temp files and looks for dot-folders there: inside the job,
    # removed with it
    env.update(HOME=str(job), TMPDIR=str(job / "tmp"))
    return env


def _run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float,
         memory_mb: int) -> tuple[int, str]:
    """Run in a process group of its own (in folio's session, as Ghostscript and the page
    workers: a session of its own would get a CPU share of its own from the kernel's
    autogroups) and kill the whole group when it ends or times out: oosplash and
    soffice.bin are its children. The output is read on a thread into a bounded tail."""
    limit = memory_mb * 1024 * 1024
    prlimit = shutil.which("prlimit", path=env.get("PATH"))
    preexec: Callable[[], None] | None = None
    if prlimit:
        argv = [prlimit, f"--as={limit}", "--core=0", "--", *argv]
    else:  # no util-linux (not Linux): set the limits in the child before exec
        preexec = _limits_setter(limit)
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=env, cwd=cwd, process_group=0, preexec_fn=preexec)
    tail = bytearray()
    reader = threading.Thread(target=_read_tail, args=(proc, tail), daemon=True)
    reader.start()
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        reader.join(timeout=5)
        raise OfficeTimeoutError(
            f"LibreOffice ran longer than {timeout_s:g}s and was stopped "
            "(office.timeout_s)") from None
    finally:
        _kill_group(proc.pid)  # anything of it still running (or after a timeout: again)
    reader.join(timeout=5)
    return returncode, bytes(tail).decode("utf-8", errors="replace")


def _limits_setter(limit: int) -> Callable[[], None]:
    def set_limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return set_limits


def _read_tail(proc: subprocess.Popen[bytes], tail: bytearray) -> None:
    assert proc.stdout is not None
    with proc.stdout:
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 4096):
            tail += chunk
            if len(tail) > _OUTPUT_LIMIT:
                del tail[: len(tail) - _OUTPUT_LIMIT]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _check_module(soffice: str, kind: OfficeKind) -> None:
    """Raise :class:`ConfigError` when the LibreOffice application the document needs is
    not installed (Debian splits them: a host with Writer but not Calc fails every
    spreadsheet, which must not be taken for every spreadsheet being corrupt). Known only
    for installs laid out as LibreOffice's own (``program/lib*lo.so``); elsewhere no-op."""
    program = Path(os.path.realpath(soffice)).parent
    library = _APP_LIBRARIES[kind.app]
    if any(program.glob("lib*lo.so")) and not (program / library).exists():
        raise ConfigError(
            f"LibreOffice {kind.app.capitalize()} is not installed ({program / library} is "
            f"missing): apt-get install --no-install-recommends libreoffice-{kind.app}-nogui")


def _failure(src: Path, kind: OfficeKind, returncode: int, output: str,
             memory_mb: int, target: str) -> Exception:
    """The typed error for a conversion that wrote nothing."""
    if kind.cfb:
        why = cfb_encryption(src)
        if why is not None:
            return EncryptedDocumentError(
                f"the document is encrypted with a password ({why}); folio cannot open it")
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and "javaldx" not in line]
    said = " | ".join(lines[-_TAIL_LINES:]) or "no message"
    # soffice is a shell script: its program killed by a signal is its exit 128 + N
    killed = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    status = (f"killed by signal {signal.Signals(killed).name}"
              if killed in signal.valid_signals() else f"exit {returncode}")
    if killed or any(marker in output for marker in _MEMORY_MARKERS):
        status += f"; the memory limit is {memory_mb} MB (office.memory_mb)"
    return OfficeConversionError(
        f"LibreOffice could not convert this {kind.extension.upper()} document to "
        f"{target.upper()} "
        f"(filter {kind.infilter or 'detected'}): {said} ({status})")


def _looks_like(path: Path, target: str) -> bool:
    """Whether LibreOffice wrote a file that starts as ``target`` does (a PDF header, an
    OOXML package's ZIP header)."""
    if not path.is_file() or path.stat().st_size < 8:
        return False
    with path.open("rb") as handle:
        head = handle.read(5)
    return head == b"%PDF-" if target == "pdf" else head[:4] == b"PK\x03\x04"
