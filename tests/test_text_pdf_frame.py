"""The page worker reads the original's text layer beside a compressed copy only while
both show the page in the same frame: boxes from another frame would fall outside the
page that is rendered, and validation would quarantine a readable page."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium

from folio import samples
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import RenderSettings, RouteSettings


def _turned(src: Path, dst: Path, rotation: int) -> Path:
    doc = pdfium.PdfDocument(src)
    for page in doc:
        page.set_rotation(rotation)
    doc.save(dst)
    doc.close()
    return dst


def _job(pdf: Path, text_pdf: Path | None, out_dir: Path) -> WorkerJob:
    return WorkerJob(pdf=pdf, text_pdf=text_pdf, pages=[0], out_dir=out_dir,
                     render_settings=RenderSettings(), route_settings=RouteSettings(),
                     render="all", timeout_s=60, memory_mb=1024)


def test_a_copy_in_another_frame_uses_its_own_text_layer(tmp_path: Path) -> None:
    original = samples.write_text_pdf(tmp_path / "r.pdf", samples.report_pages(seed=1, n=1))
    copy = _turned(original, tmp_path / "copy.pdf", 90)  # as a PDF writer may turn a page
    (page,) = prepare_pages(_job(copy, original, tmp_path / "out"))
    (own,) = prepare_pages(_job(copy, None, tmp_path / "own"))
    assert page.error is None and page.text_layer is not None and own.text_layer is not None
    assert (page.width_pt, page.height_pt) == (792, 612)
    assert "Quarterly Operations Report" in page.text_layer.text
    # the boxes of the page as rendered (the copy's), not the original's upright ones
    assert [b.bbox for b in page.text_layer.blocks] == [b.bbox for b in own.text_layer.blocks]
    (upright,) = prepare_pages(_job(original, None, tmp_path / "upright"))
    assert upright.text_layer is not None  # and the original's own boxes are other boxes
    assert [b.bbox for b in page.text_layer.blocks] != [b.bbox for b in upright.text_layer.blocks]


def test_a_copy_in_the_same_frame_reads_the_original(tmp_path: Path) -> None:
    original = samples.write_text_pdf(tmp_path / "r.pdf", samples.report_pages(seed=1, n=1))
    turned = _turned(original, tmp_path / "turned.pdf", 270)
    copy = _turned(original, tmp_path / "copy.pdf", 270)
    (page,) = prepare_pages(_job(copy, turned, tmp_path / "out"))
    assert page.text_layer is not None and (page.width_pt, page.height_pt) == (792, 612)
    for block in page.text_layer.blocks:
        assert block.bbox is not None
        assert block.bbox.x1 <= page.width_pt + 1 and block.bbox.y1 <= page.height_pt + 1
