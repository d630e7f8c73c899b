"""pdfium_doc on real files: typed open errors, geometry after /Rotate, scans, blanks."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest

from folio import samples
from folio.errors import EncryptedPdfError, MalformedPdfError, NotAPdfError
from folio.pdf.pdfium_doc import (
    PDFIUM_LOCK,
    is_blank,
    native_image_dpi,
    open_pdf,
    page_geometry,
    render,
)


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pdfium")
    report = samples.write_text_pdf(root / "report.pdf", samples.report_pages(seed=1, n=2))
    one = samples.write_text_pdf(root / "one.pdf", samples.report_pages(seed=2, n=1))
    return {
        "report": report,
        "scan": samples.write_scanned_pdf(root / "scan.pdf", one, dpi=100),
        "blank": samples.write_blank_pdf(root / "blank.pdf"),
        "encrypted": samples.write_encrypted_pdf(root / "enc.pdf", "s3cret"),
        "malformed": samples.write_malformed_pdf(root / "bad.pdf", report),
        "not_pdf": samples.write_not_pdf(root / "not.pdf"),
    }


def _rotated_copy(src: Path, dst: Path, rotation: int, crop: tuple[float, ...] | None) -> Path:
    doc = pdfium.PdfDocument(src)
    try:
        page = doc[0]
        page.set_rotation(rotation)
        if crop:
            page.set_cropbox(*crop)
        page.close()
        doc.save(dst)
    finally:
        doc.close()
    return dst


def test_lock_is_reentrant() -> None:
    assert isinstance(PDFIUM_LOCK, type(threading.RLock()))
    with PDFIUM_LOCK, PDFIUM_LOCK:
        pass


def test_opens_a_good_pdf(pdfs: dict[str, Path]) -> None:
    doc = open_pdf(pdfs["report"])
    assert len(doc) == 2
    doc.close()


@pytest.mark.parametrize("content", [b"", b"plain text\n", b"\x89PNG\r\n\x1a\n" + b"\0" * 2000])
def test_not_a_pdf(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.pdf"
    path.write_bytes(content)
    with pytest.raises(NotAPdfError, match="%PDF-"):
        open_pdf(path)


def test_header_after_leading_junk_is_accepted(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    path = tmp_path / "junk.pdf"
    path.write_bytes(b"x" * 700 + pdfs["report"].read_bytes())
    assert len(open_pdf(path)) == 2


def test_header_only_is_malformed_not_missing(tmp_path: Path) -> None:
    path = tmp_path / "hdr.pdf"
    path.write_bytes(b"%PDF-1.4\n%%EOF\n")
    with pytest.raises(MalformedPdfError) as info:
        open_pdf(path)
    assert info.value.reason.startswith("malformed: ")


def test_truncated_pdf_is_malformed(pdfs: dict[str, Path]) -> None:
    with pytest.raises(MalformedPdfError):
        open_pdf(pdfs["malformed"])


def test_encrypted_needs_the_right_password(pdfs: dict[str, Path]) -> None:
    with pytest.raises(EncryptedPdfError) as missing:
        open_pdf(pdfs["encrypted"])
    assert missing.value.reason == "encrypted: password required"
    with pytest.raises(EncryptedPdfError) as wrong:
        open_pdf(pdfs["encrypted"], "nope")
    assert wrong.value.reason == "encrypted: wrong password"
    doc = open_pdf(pdfs["encrypted"], "s3cret")
    assert len(doc) == 1
    doc.close()


def _device_point(
    page: pdfium.PdfPage, x: float, y: float, scale: int = 100
) -> tuple[float, float]:
    """pdfium's own page-to-device mapping (integer pixels, hence the scale)."""
    width, height = page.get_size()
    dx, dy = ctypes.c_int(), ctypes.c_int()
    pdfium_c.FPDF_PageToDevice(
        page, 0, 0, round(width * scale), round(height * scale), 0, x, y, dx, dy
    )
    return dx.value / scale, dy.value / scale


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
@pytest.mark.parametrize("crop", [None, (30.0, 40.0, 500.0, 700.0)])
def test_to_top_left_matches_pdfium(
    tmp_path: Path, pdfs: dict[str, Path], rotation: int, crop: tuple[float, ...] | None
) -> None:
    path = _rotated_copy(pdfs["report"], tmp_path / "rot.pdf", rotation, crop)
    doc = open_pdf(path)
    page = doc[0]
    geometry = page_geometry(page)
    assert geometry.rotation == rotation
    portrait = geometry.width_pt < geometry.height_pt
    assert portrait == (rotation in (0, 180))
    box = geometry.to_top_left(100.0, 200.0, 300.0, 650.0)
    corners = [_device_point(page, x, y) for x, y in ((100, 650), (300, 200))]
    xs, ys = sorted(c[0] for c in corners), sorted(c[1] for c in corners)
    assert box.x0 == pytest.approx(xs[0], abs=0.02)
    assert box.x1 == pytest.approx(xs[1], abs=0.02)
    assert box.y0 == pytest.approx(ys[0], abs=0.02)
    assert box.y1 == pytest.approx(ys[1], abs=0.02)
    doc.close()


def test_native_dpi_of_a_scan(pdfs: dict[str, Path]) -> None:
    doc = open_pdf(pdfs["scan"])
    assert native_image_dpi(doc[0]) == pytest.approx(100.0, rel=0.01)
    doc.close()


def test_born_digital_page_has_no_native_dpi(pdfs: dict[str, Path]) -> None:
    doc = open_pdf(pdfs["report"])
    assert native_image_dpi(doc[0]) is None
    doc.close()


def test_render_exact_size_and_rotation(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    path = _rotated_copy(pdfs["report"], tmp_path / "rot.pdf", 90, None)
    doc = open_pdf(path)
    image = render(doc[0], 400, 309)
    assert image.size == (400, 309)
    assert image.mode == "RGB"
    low, high = image.convert("L").getextrema()  # one band: (darkest, lightest)
    assert isinstance(low, int) and isinstance(high, int)
    assert low < 128 < high  # text was drawn on white
    doc.close()


def test_blank_detection(pdfs: dict[str, Path]) -> None:
    blank = open_pdf(pdfs["blank"])
    assert is_blank(blank[0], text_chars=0)
    report = open_pdf(pdfs["report"])
    assert not is_blank(report[0], text_chars=100)
    scan = open_pdf(pdfs["scan"])
    assert not is_blank(scan[0], text_chars=0)  # objects, and the thumbnail is not uniform
    for doc in (blank, report, scan):
        doc.close()


def test_white_rectangle_page_is_blank(tmp_path: Path) -> None:
    doc = pdfium.PdfDocument.new()
    page = doc.new_page(200, 200)
    rect = pdfium_c.FPDFPageObj_CreateNewRect(10, 10, 100, 100)
    pdfium_c.FPDFPageObj_SetFillColor(rect, 255, 255, 255, 255)
    pdfium_c.FPDFPath_SetDrawMode(rect, pdfium_c.FPDF_FILLMODE_WINDING, 0)
    pdfium_c.FPDFPage_InsertObject(page, rect)
    page.gen_content()
    assert pdfium_c.FPDFPage_CountObjects(page) == 1
    assert is_blank(page, text_chars=0)
    pdfium_c.FPDFPageObj_SetFillColor(rect, 0, 0, 0, 255)
    page.gen_content()
    assert not is_blank(page, text_chars=0)
    doc.close()


def _scan(tmp_path: Path, mark: bool) -> Path:
    """A grey, noisy 'scanned' page; with ``mark``, only a small page number on it."""
    import random

    from PIL import Image, ImageDraw, ImageFont

    rnd = random.Random(3)
    img = Image.new("L", (1200, 1600), 214)
    px = img.load()
    assert px is not None
    for _ in range(20000):  # scanner noise and dust specks
        px[rnd.randrange(1200), rnd.randrange(1600)] = rnd.randint(190, 235)
    if mark:
        font = ImageFont.load_default(size=21)  # 21 px at 150 dpi: a 10-pt page number
        ImageDraw.Draw(img).text((590, 1520), "7", fill=30, font=font)
    path = tmp_path / f"scan-{mark}.pdf"
    img.save(path, "PDF", resolution=150)
    return path


@pytest.mark.parametrize("mark", [False, True])
def test_blank_scan_is_blank_but_a_page_number_is_not(tmp_path: Path, mark: bool) -> None:
    from folio.pdf.pdfium_doc import is_blank, open_pdf

    doc = open_pdf(_scan(tmp_path, mark))
    try:
        page = doc[0]
        image = page.render(scale=1000 / 792).to_pil()
        assert is_blank(page, text_chars=0, image=image) is (not mark)
    finally:
        doc.close()


def test_a_blank_page_with_specks_is_blank_at_an_ocr_resolution_too(tmp_path: Path) -> None:
    """Specks of dust (a few pixels at 300 dpi) survive the median filter at the OCR
    render's resolution; ink is judged at 100 dpi, so the page stays blank, while a
    page number on the same page is still ink."""
    from PIL import Image, ImageDraw, ImageFont

    from folio.pdf.pdfium_doc import is_blank, open_pdf

    for mark in (False, True):
        img = Image.new("L", (1200, 1600), 214)
        draw = ImageDraw.Draw(img)
        for x, y in ((300, 400), (800, 900), (500, 1300)):  # 1/4 mm specks, 3 px at 300 dpi
            draw.rectangle((x, y, x + 2, y + 2), fill=150)
        if mark:
            draw.text((590, 1520), "7", fill=30, font=ImageFont.load_default(size=21))
        path = tmp_path / f"specks-{mark}.pdf"
        img.save(path, "PDF", resolution=150)
        doc = open_pdf(path)
        try:
            page = doc[0]
            image = page.render(scale=300 / 72).to_pil()
            assert is_blank(page, text_chars=0, image=image) is (not mark)
        finally:
            doc.close()
