"""A LibreOffice killed under its memory cap is reported as the cap (issue 58, finding 8):
``soffice`` is a shell script, so its program dying of SIGSEGV (what an allocation
refused under ``prlimit --as`` often ends in) reaches folio as exit 139, which was
reported "no message (exit 139)"."""

from __future__ import annotations

from pathlib import Path

from folio.formats import office
from folio.formats.office_kind import OfficeKind

#: stands for soffice: a shell script whose program dies of SIGSEGV
WRAPPER = "/usr/bin/python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'"


def test_a_program_killed_under_the_wrapper_is_reported_with_the_memory_cap(
    tmp_path: Path,
) -> None:
    returncode, output = office._run(["/bin/sh", "-c", WRAPPER], env={"PATH": "/usr/bin:/bin"},
                                     cwd=tmp_path, timeout_s=30, memory_mb=512)
    assert returncode == 139
    kind = OfficeKind(app="writer", infilter="", extension="docx")
    error = office._failure(tmp_path / "memo.docx", kind, returncode, output, 512, "docx")
    message = str(error)
    assert "killed by signal SIGSEGV" in message
    assert "the memory limit is 512 MB (office.memory_mb)" in message


def test_an_ordinary_exit_code_is_not_taken_for_a_signal(tmp_path: Path) -> None:
    kind = OfficeKind(app="writer", infilter="", extension="docx")
    message = str(office._failure(tmp_path / "memo.docx", kind, 1, "Error: source file could "
                                  "not be loaded", 512, "docx"))
    assert "(exit 1)" in message and "memory limit" not in message
