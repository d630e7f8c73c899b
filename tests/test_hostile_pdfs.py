"""Hostile PDFs end in a typed, non-retryable outcome within bounded time and memory
(docs/security.md; issue 44 item 8). The files are built here, small: a content stream
that inflates a few hundred kilobytes to hundreds of megabytes, and one with millions of
path segments; the limits are set low so that each test takes seconds."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from folio.errors import ResourceLimitError, TimeoutExpired, is_transient_code
from folio.pdf import ghostscript
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import RenderSettings, RouteSettings
from folio.settings.resources import LimitSettings

pytestmark = pytest.mark.timeout(120)


def flate_of_repeats(chunk: bytes, repeats: int) -> bytes:
    """zlib data that inflates to ``chunk * repeats``, built without compressing all of
    it: after a full flush, deflate writes each identical chunk as the same bytes."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    again = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    adler = 1
    for _ in range(repeats):
        adler = zlib.adler32(chunk, adler)
    return b"\x78\x9c" + first + again * (repeats - 1) + comp.flush() + struct.pack(">I", adler)


def one_page_pdf(out: Path, content: bytes) -> Path:
    """A one-page PDF whose page has ``content`` (already Flate-encoded) as its stream."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content
            + b"\nendstream"]
    body, offsets = b"%PDF-1.4\n", []
    for number, obj in enumerate(objs, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    body += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objs) + 1, xref)
    out.write_bytes(body)
    return out


@pytest.fixture(scope="module")
def inflating(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~300 KB on disk, a 320 MiB content stream once inflated."""
    data = flate_of_repeats(b" " * (1 << 20), 320)
    assert len(data) < 1 << 20
    return one_page_pdf(tmp_path_factory.mktemp("hostile") / "inflate.pdf", data)


@pytest.fixture(scope="module")
def many_paths(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~100 KB on disk, a million subpaths (three million segments) on one page."""
    data = flate_of_repeats(b"0 0 m 612 792 l 0 792 l h S\n" * 40000, 25)
    return one_page_pdf(tmp_path_factory.mktemp("hostile") / "paths.pdf", data)


def _job(pdf: Path, out: Path, **limits: object) -> WorkerJob:
    return WorkerJob.model_validate({
        "pdf": pdf, "pages": [0], "out_dir": out, "render_settings": RenderSettings(),
        "route_settings": RouteSettings(), "timeout_s": 60, **limits})


def test_a_stream_inflating_past_the_memory_cap_is_the_inputs_fault(
    inflating: Path, tmp_path: Path,
) -> None:
    """Before: one worker grew to 3.1 GiB on such a file, and a crash was a retryable
    ``worker-crashed``, paid again by every run."""
    (page,) = list(prepare_pages(_job(inflating, tmp_path, memory_mb=256, page_cpu_s=30)))
    assert page.error is not None
    assert page.error.split(":", 1)[0] in ("page-crashed", "page-too-large"), page.error
    assert not is_transient_code(page.error), "not retried"


def test_a_page_over_its_cpu_budget_ends_resource_limit(
    many_paths: Path, tmp_path: Path,
) -> None:
    """Before: 200 million path segments ran 134 s and ended ``worker-crashed ...
    SIGABRT`` with ``retryable=true``. The per-page CPU limit ends it in about a
    second of CPU, as the input's fault."""
    (page,) = list(prepare_pages(_job(many_paths, tmp_path, memory_mb=2048, page_cpu_s=1)))
    assert page.error is not None and page.error.startswith(
        f"{ResourceLimitError.code}: page 0 took more than 1 CPU seconds"), page.error
    assert not is_transient_code(page.error)


def test_ghostscript_has_a_memory_cap_and_a_timeout(many_paths: Path, tmp_path: Path) -> None:
    """Before: Ghostscript ran without a memory limit. A PostScript allocation past the
    cap fails in gs (VMerror) and is reported as the input's fault; the hostile PDF is
    stopped at the timeout (compression then keeps the original, a repair quarantines)."""
    returncode, output = ghostscript._run(
        [ghostscript.gs_binary(), "-dSAFER", "-dNODISPLAY", "-dBATCH", "-dNOPAUSE", "-c",
         "/a 4000 array def 0 1 3999 { a exch 60000 string put } for"],  # 240 MB
        env={}, cwd=str(tmp_path), timeout_s=30, memory_mb=128)
    assert returncode != 0 and "VMerror" in output
    with pytest.raises(ResourceLimitError, match="128 MB memory limit"):
        ghostscript._check(returncode, output, tmp_path / "none.pdf", 128)
    with pytest.raises(TimeoutExpired):
        ghostscript.compress(many_paths, tmp_path / "c.pdf", image_dpi=150, timeout_s=1)


def test_the_limits_are_settings_with_their_defaults() -> None:
    limits = LimitSettings()
    assert limits.page_cpu_s == 120.0 and limits.worker_memory_mb == 4096
    assert limits.ghostscript_memory_mb == 2048 and limits.ghostscript_timeout_s == 120.0
    for name in ("page_cpu_s", "worker_memory_mb", "ghostscript_memory_mb"):
        assert LimitSettings.model_fields[name].description


def test_only_a_page_that_brings_the_worker_down_itself_is_its_own_fault(tmp_path: Path) -> None:
    """A worker killed from outside (SIGKILL: the kernel's OOM killer, a person) is the
    host's business and retried; a fault signal or the CPU limit is the page's."""
    from folio.pdf.page_worker import crash_reason

    job = _job(tmp_path / "x.pdf", tmp_path, memory_mb=512, page_cpu_s=5)
    assert crash_reason(2, "signal SIGKILL", job).startswith("worker-crashed: page 2")
    assert is_transient_code(crash_reason(2, "signal SIGKILL", job))
    assert crash_reason(2, "signal SIGXCPU", job).startswith("resource-limit: page 2")
    assert crash_reason(2, "signal SIGSEGV", job).startswith("page-crashed: page 2")
    assert "512 MB" in crash_reason(2, "signal SIGABRT", job)
