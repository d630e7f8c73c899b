"""folio.pdf.ocr_resolution: text lines measured on the render, and a page whose lines
are too small for Tesseract rendered again finer (a low-resolution scan upsampled), in
the page worker, for CPU OCR runs only."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from folio import samples
from folio.pdf.ocr_resolution import ocr_dpi, text_line_px
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import RenderSettings, RouteSettings


def lines_image(line_px: int, gap_px: int, n: int = 20, columns: int = 2) -> Image.Image:
    """A page of ``n`` dark bars ``line_px`` tall a column, ``gap_px`` apart; the second
    column's lines sit half a line lower (columns rarely line up)."""
    width, height = 1200, n * (line_px + gap_px) + 200
    image = Image.new("L", (width, height), 235)
    draw = ImageDraw.Draw(image)
    for col in range(columns):
        x0 = 60 + col * 580
        offset = col * (line_px + gap_px) // 2
        for i in range(n):
            y = 80 + offset + i * (line_px + gap_px)
            draw.rectangle((x0, y, x0 + 500, y + line_px - 1), fill=20)
    return image


@pytest.mark.parametrize("line_px", [10, 18, 40])
def test_line_height_is_measured_per_strip_so_columns_do_not_merge(line_px: int) -> None:
    assert text_line_px(lines_image(line_px, gap_px=line_px // 2)) == pytest.approx(line_px)


def test_a_page_without_lines_of_text_is_not_measured() -> None:
    assert text_line_px(Image.new("L", (800, 1000), 240)) is None
    assert text_line_px(lines_image(12, 6, n=1, columns=1)) is None


def test_small_lines_get_a_finer_render_within_the_caps() -> None:
    settings = RenderSettings()
    assert ocr_dpi(145, None, 612, 792, settings) is None
    assert ocr_dpi(145, settings.ocr_min_line_px, 612, 792, settings) is None  # tall enough
    dpi, why = ocr_dpi(100, 12, 612, 792, settings) or (0.0, "")
    assert dpi == pytest.approx(100 * settings.ocr_line_px / 12) and "12px" in why
    dpi, _ = ocr_dpi(300, 6, 180, 300, settings) or (0.0, "")
    assert dpi == settings.ocr_max_dpi
    dpi, _ = ocr_dpi(72, 8, 1183, 1921, settings) or (0.0, "")  # a newspaper page
    assert (1183 * dpi / 72) * (1921 * dpi / 72) <= settings.ocr_max_pixels * 1.001


def _job(pdf: Path, out_dir: Path, ocr: bool) -> WorkerJob:
    return WorkerJob(pdf=pdf, pages=[0], out_dir=out_dir, render_settings=RenderSettings(),
                     route_settings=RouteSettings(), render="untrusted", timeout_s=60,
                     memory_mb=1024, ocr_resolution=ocr)


def test_a_low_resolution_scan_is_upsampled_for_tesseract(tmp_path: Path) -> None:
    report = samples.write_text_pdf(tmp_path / "r.pdf", samples.report_pages(seed=1, n=1))
    scan = samples.write_scanned_pdf(tmp_path / "scan.pdf", report, dpi=100)
    (plain,) = prepare_pages(_job(scan, tmp_path / "a", ocr=False))
    assert plain.plan is not None and plain.plan.dpi <= 100.5  # the VLM plan: no upsampling
    (ocr,) = prepare_pages(_job(scan, tmp_path / "b", ocr=True))
    assert ocr.plan is not None and ocr.plan.dpi > 150 and "OCR: text lines" in ocr.plan.reason
    assert ocr.image_path is not None
    with Image.open(ocr.image_path) as image:
        assert image.size == (ocr.plan.width_px, ocr.plan.height_px)
        assert text_line_px(image) == pytest.approx(RenderSettings().ocr_line_px, rel=0.25)
