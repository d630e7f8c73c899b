"""Ghostscript wrapper against the real gs: compression, repair, passwords, timeouts."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from folio import samples
from folio.errors import EncryptedPdfError, MalformedPdfError, TimeoutExpired
from folio.pdf import ghostscript
from folio.pdf.pdfium_doc import native_image_dpi, open_pdf

PASSWORD = "pa55-w0rd"


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gs")
    report = samples.write_text_pdf(root / "report.pdf", samples.report_pages(seed=1, n=2))
    return {
        "report": report,
        "scan": samples.write_scanned_pdf(root / "scan.pdf", report, dpi=200),
        "encrypted": samples.write_encrypted_pdf(root / "enc.pdf", PASSWORD),
        "malformed": samples.write_malformed_pdf(root / "bad.pdf", report),
        "not_pdf": samples.write_not_pdf(root / "not.pdf"),
    }


def _pages(path: Path, password: str | None = None) -> int:
    doc = open_pdf(path, password)
    try:
        return len(doc)
    finally:
        doc.close()


def _no_temp_dirs_left(directory: Path) -> bool:
    return not list(directory.glob(".folio-gs-*"))


def test_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", ghostscript.gs_version())


def test_compress_downsamples_scans(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    dst = tmp_path / "small.pdf"
    info = ghostscript.compress(pdfs["scan"], dst, image_dpi=72, timeout_s=60)
    assert info.used is False  # the caller decides
    assert info.original_bytes == pdfs["scan"].stat().st_size
    assert info.compressed_bytes == dst.stat().st_size
    assert info.compressed_bytes < info.original_bytes
    assert info.image_dpi == 72 and info.seconds > 0
    assert _pages(dst) == 2
    doc = open_pdf(dst)
    assert native_image_dpi(doc[0]) == pytest.approx(72, rel=0.05)  # was 200
    doc.close()
    assert _no_temp_dirs_left(tmp_path)


def test_compress_keeps_text_layer(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    dst = tmp_path / "report.pdf"
    ghostscript.compress(pdfs["report"], dst, image_dpi=150, timeout_s=60)
    assert "Quarterly Operations Report" in samples.page_text(dst)
    assert _pages(dst) == 2


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_compress_keeps_each_page_in_its_frame(
    tmp_path: Path, pdfs: dict[str, Path], rotation: int
) -> None:
    """A page turned with /Rotate keeps its size and its text where the original shows
    it: Ghostscript's default would turn it back so its text reads upright, and the
    original's text layer would then fall outside the rendered page."""
    import pypdfium2 as pdfium

    from folio.pdf.pdfium_doc import page_geometry

    src = tmp_path / "turned.pdf"
    doc = pdfium.PdfDocument(pdfs["report"])
    for page in doc:
        page.set_rotation(rotation)
    doc.save(src)
    doc.close()
    dst = tmp_path / "small.pdf"
    ghostscript.compress(src, dst, image_dpi=150, timeout_s=60)

    def frame(path: Path) -> tuple[tuple[float, float], tuple[float, float, float, float]]:
        pdf = open_pdf(path)
        try:
            page = pdf[0]
            geometry = page_geometry(page)
            text = page.get_textpage()
            first = text.get_charbox(0)  # the first glyph, mapped onto the shown page
            text.close()
            box = geometry.to_top_left(*first)
            return (geometry.width_pt, geometry.height_pt), (box.x0, box.y0, box.x1, box.y1)
        finally:
            pdf.close()

    (size_before, box_before), (size_after, box_after) = frame(src), frame(dst)
    assert size_after == pytest.approx(size_before, abs=1)
    assert box_after == pytest.approx(box_before, abs=2)


def test_compress_leaves_images_below_threshold_alone(
    tmp_path: Path, pdfs: dict[str, Path]
) -> None:
    dst = tmp_path / "same.pdf"
    ghostscript.compress(pdfs["scan"], dst, image_dpi=150, timeout_s=60)  # 200 < 1.5 x 150
    doc = open_pdf(dst)
    assert native_image_dpi(doc[0]) == pytest.approx(200, rel=0.02)
    doc.close()


def test_encrypted_input_with_password(
    tmp_path: Path, pdfs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    dst = tmp_path / "dec.pdf"
    with caplog.at_level(logging.DEBUG, logger="folio.pdf.ghostscript"):
        ghostscript.compress(pdfs["encrypted"], dst, image_dpi=150, timeout_s=60, password=PASSWORD)
    assert _pages(dst) == 1  # the rewrite is no longer encrypted
    logged = caplog.text
    assert "-sPDFPassword=***" in logged
    assert PASSWORD not in logged


@pytest.mark.parametrize("password", [None, "wrong-one"])
def test_encrypted_input_without_the_password(
    tmp_path: Path, pdfs: dict[str, Path], password: str | None
) -> None:
    dst = tmp_path / "out.pdf"
    with pytest.raises(EncryptedPdfError) as info:
        ghostscript.compress(pdfs["encrypted"], dst, image_dpi=150, timeout_s=60, password=password)
    assert not dst.exists()
    if password:
        assert password not in info.value.reason
    with pytest.raises(EncryptedPdfError):
        ghostscript.repair(pdfs["encrypted"], dst, timeout_s=60, password=password)
    assert _no_temp_dirs_left(tmp_path)


def test_not_a_pdf_fails_cleanly(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    dst = tmp_path / "out.pdf"
    with pytest.raises(MalformedPdfError, match="ghostscript failed"):
        ghostscript.compress(pdfs["not_pdf"], dst, image_dpi=150, timeout_s=60)
    assert not dst.exists()
    assert _no_temp_dirs_left(tmp_path)


def test_a_failure_with_exit_status_0_does_not_say_exit_0(tmp_path: Path) -> None:
    """gs can refuse every page and still exit 0: "ghostscript failed (exit 0)" read as a
    contradiction in a quarantine reason; say what gs said instead."""
    out = tmp_path / "none.pdf"
    with pytest.raises(MalformedPdfError) as info:
        ghostscript._check(0, "**** Error: xref\n   No pages will be processed (FirstPage > LastPage).\n", out)
    assert "exit 0" not in info.value.reason
    assert "processed no page" in info.value.reason and "No pages will be processed" in info.value.reason
    with pytest.raises(MalformedPdfError, match=r"ghostscript failed \(exit 1\)"):
        ghostscript._check(1, "Error: /syntaxerror\n", out)


def test_repair_recovers_what_pdfium_rejects(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    with pytest.raises(MalformedPdfError):
        open_pdf(pdfs["malformed"])
    fixed = ghostscript.repair(pdfs["malformed"], tmp_path / "fixed.pdf", timeout_s=60)
    assert fixed == tmp_path / "fixed.pdf"
    assert _pages(fixed) >= 1
    assert "Quarterly" in samples.page_text(fixed)


def test_odd_paths_are_not_options_or_templates(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    odd = tmp_path / "-dNOSAFER %d @x"
    odd.mkdir()
    src = odd / "-in.pdf"
    src.write_bytes(pdfs["report"].read_bytes())
    dst = odd / "out %d.pdf"
    ghostscript.repair(src, dst, timeout_s=60)
    assert _pages(dst) == 2


def test_relative_paths_work_from_any_directory(
    tmp_path: Path, pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gs runs inside its own temp dir: a relative output path (the default work dir is
    relative) must still land where the caller meant, not inside that temp dir."""
    monkeypatch.chdir(tmp_path)
    fixed = ghostscript.repair(pdfs["malformed"], Path("work/sub/fixed.pdf"), timeout_s=60)
    assert _pages(tmp_path / "work" / "sub" / "fixed.pdf") >= 1
    assert fixed.resolve() == (tmp_path / "work" / "sub" / "fixed.pdf").resolve()
    assert _no_temp_dirs_left(tmp_path / "work" / "sub")


def test_timeout_kills_the_process_group(
    tmp_path: Path, pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    killed: list[tuple[int, int]] = []
    real_killpg = os.killpg

    def spy(pgid: int, sig: int) -> None:
        killed.append((pgid, sig))
        real_killpg(pgid, sig)

    monkeypatch.setattr(ghostscript.os, "killpg", spy)
    with pytest.raises(TimeoutExpired, match="longer than"):
        ghostscript.compress(pdfs["scan"], tmp_path / "out.pdf", image_dpi=72, timeout_s=0.001)
    assert len(killed) == 1 and killed[0][1] == 9
    with pytest.raises(ProcessLookupError):  # the group is gone and reaped
        real_killpg(killed[0][0], 0)
    assert not (tmp_path / "out.pdf").exists()
    assert _no_temp_dirs_left(tmp_path)


def test_compressions_at_once_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``limits.ghostscript_workers`` bounds the run's Ghostscripts, however many documents
    are prepared at once (a GPU run's start prepares fourteen); the default is a quarter of
    the cores, at least two."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from folio.models import DocumentResult
    from folio.pdf.worker_protocol import PdfInfo
    from folio.pipeline import prepare
    from folio.settings.config import PipelineConfig
    from tests.peak import Peak

    peak = Peak()

    def slow_gs(src: Path, dst: Path, **_: object) -> None:
        with peak:
            time.sleep(0.1)
        raise MalformedPdfError("test: no output")

    monkeypatch.setattr(ghostscript, "compress", slow_gs)
    config = PipelineConfig.model_validate({"limits": {"ghostscript_workers": 2}})

    def one(n: int) -> str:
        doc = DocumentResult(source=f"d{n}.pdf", page_count=1)
        doc.compression.original_bytes = 50 * 1024 * 1024  # image-heavy: worth compressing
        (tmp_path / str(n)).mkdir()
        pdf = prepare._maybe_compress(tmp_path / "in.pdf", PdfInfo(page_count=1, encrypted=False,
                                      max_page_pt=792), doc, tmp_path / str(n), config)
        assert pdf == tmp_path / "in.pdf"  # compression failed: the original is used
        return doc.compression.note

    with ThreadPoolExecutor(6) as pool:
        notes = list(pool.map(one, range(6)))
    assert peak.most == 2 and all("ghostscript failed" in n for n in notes)
    from folio.pipeline.limits import ghostscript_workers

    assert ghostscript_workers(PipelineConfig()) == max(2, (os.cpu_count() or 1) // 4)
    assert ghostscript_workers(config) == 2
