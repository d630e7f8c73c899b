"""The processes that parse hostile files, and ``gs --version``, get none of the run's
secrets in their environment (issue 58, finding 8): gdb showed FOLIO_PASSWORD, the S3 key
and Prefect's login in a page worker the zygote forked. Read from ``/proc/<pid>/environ``
of the real processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from folio import samples
from folio.pdf import ghostscript, zygote
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import RenderSettings, RouteSettings

SECRETS = {"FOLIO_PASSWORD": "pdf-pass-8812", "AWS_SECRET_ACCESS_KEY": "s3-secret-8812",
           "PREFECT_API_AUTH_STRING": "folio:login-8812"}


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def _children(parent: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat_line = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat_line.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(name))
    return found


def _writable_memory(pid: int) -> bytes:
    """The process's private writable mappings (its heap: where os.environ and the request
    it was sent live), read through /proc/<pid>/mem as a debugger would."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:
                continue
    return b"".join(chunks)


@pytest.mark.usefixtures("secrets")
def test_a_page_worker_forked_by_the_zygote_holds_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(zygote.MODE_ENV, "fork")
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "1")
    pdf = samples.write_long_pdf(tmp_path / "two.pdf", 2)
    job = WorkerJob(pdf=pdf, pages=[0, 1], out_dir=tmp_path / "out",
                    render_settings=RenderSettings(longest_side_px=300, min_dpi=20),
                    route_settings=RouteSettings(), timeout_s=60, memory_mb=1024)
    pages = prepare_pages(job)
    try:
        assert next(pages).index == 0  # the child now hangs before page 1: alive
        worker = zygote.current()
        assert worker is not None and worker.alive()
        (child,) = _children(worker._proc.pid)
        memory = _writable_memory(child)  # what gdb saw: os.environ is set after the fork
        assert b"FOLIO_TEST_HANG_ON_PAGE" in memory, "the run's other variables reach it"
        leaked = [name for name, value in SECRETS.items() if value.encode() in memory]
        assert not leaked, f"secrets in a page worker's memory: {leaked}"
    finally:
        pages.close()


@pytest.mark.usefixtures("secrets")
def test_gs_version_is_asked_without_the_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``gs`` first on PATH that writes down its environment and answers a version."""
    spy = tmp_path / "bin" / "gs"
    spy.parent.mkdir()
    seen = tmp_path / "environ"
    spy.write_text(f"#!/bin/sh\ncat /proc/$$/environ > {seen}\necho 10.0.0\n")
    spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{spy.parent}{os.pathsep}{os.environ['PATH']}")
    ghostscript.gs_version.cache_clear()
    try:
        assert ghostscript.gs_version() == "10.0.0"
    finally:
        ghostscript.gs_version.cache_clear()
    environ = seen.read_bytes()
    assert b"PATH=" in environ
    assert not [name for name, value in SECRETS.items() if value.encode() in environ]
