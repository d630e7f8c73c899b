"""folio's child processes (Ghostscript, Tesseract) run in a process group of their own, in
the caller's session.

Why it matters: Linux's scheduler autogroups give each session an equal share of a busy
CPU. A child in a session of its own weighed as much as a whole vLLM server on the same
host; a dozen of them at a run's start starved the server's front end. The group of its
own is what a timeout kills. (Page workers: tests/test_zygote.py.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from folio.engines import tesseract
from folio.pdf import ghostscript


def _recording_binary(folder: Path, name: str, record: Path) -> None:
    """An executable ``name`` that writes its process group and session (fields 5 and 6
    of /proc/self/stat) to ``record`` and exits 0."""
    script = folder / name
    script.write_text(f"#!/bin/sh\nset -- $(cat /proc/$$/stat)\necho \"$5 $6 $$\" > '{record}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _group_and_session(record: Path) -> tuple[int, int, int]:
    pgrp, session, pid = (int(x) for x in record.read_text().split())
    return pgrp, session, pid


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_ghostscript_runs_in_a_group_of_its_own_in_our_session(
    fake_bin: Path, tmp_path: Path
) -> None:
    record = tmp_path / "gs.txt"
    _recording_binary(fake_bin, ghostscript.GS_BINARY, record)
    code, _ = ghostscript._run([ghostscript.gs_binary()], env=dict(os.environ),
                               cwd=str(tmp_path), timeout_s=30)
    assert code == 0
    pgrp, session, pid = _group_and_session(record)
    assert pgrp == pid  # what the timeout's killpg takes down
    assert session == os.getsid(0)


def test_tesseract_runs_in_a_group_of_its_own_in_our_session(
    fake_bin: Path, tmp_path: Path
) -> None:
    record = tmp_path / "tesseract.txt"
    _recording_binary(fake_bin, "tesseract", record)
    tesseract._run([str(fake_bin / "tesseract")], timeout_s=30)
    pgrp, session, pid = _group_and_session(record)
    assert pgrp == pid
    assert session == os.getsid(0)
