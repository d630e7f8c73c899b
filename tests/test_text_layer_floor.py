"""Never worse than the text layer, and pages without text are read (issue 50), on PDFs
written here through the CPU pipeline's defaults (route auto, tesseract, validation):

- a page that is only a drawing (no layer, OCR finds no words) is ok and marked as a
  page without text in document.json, pages.jsonl and the report, its document ok;
- a page whose whole text is seven accented letters in its layer (scored as junk, and
  invisible to OCR) keeps them;
- a page whose CropBox is offset from its MediaBox, with a printer's slug drawn above the
  visible page, keeps all its text: the body in the markdown, the slug as furniture in
  document.json, the boxes clipped and reported, nothing quarantined;
- a page on which every engine fails falls back to its layer's text at any score
  (outcome fallback, with a reason), and without a layer says why it failed.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from folio import samples
from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult, Label, PageOutcome, TextLayer
from folio.output.outputs import JSON, PAGES, document_folder
from folio.output.report import build_report
from folio.pipeline import Services, process_document, process_page
from folio.settings.config import PipelineConfig
from tests.pdf_pages import first_page_prep


def _text(doc: pdfium.PdfDocument, page: pdfium.PdfPage, text: str, x: float, y: float,
          *, size: float = 11.0, invisible: bool = False) -> None:
    obj = pdfium_c.FPDFPageObj_NewTextObj(doc, b"Helvetica", size)
    wide = (text + "\x00").encode("utf-16-le")
    pdfium_c.FPDFText_SetText(obj, ctypes.cast(ctypes.c_char_p(wide), pdfium_c.FPDF_WIDESTRING))
    if invisible:
        pdfium_c.FPDFTextObj_SetTextRenderMode(obj, pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE)
    pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, x, y)
    pdfium_c.FPDFPage_InsertObject(page, obj)


def _drawing(page: pdfium.PdfPage) -> None:
    """Filled shapes and no text: a diagram, a shading test."""
    for n in range(4):
        path = pdfium_c.FPDFPageObj_CreateNewRect(100 + 90 * n, 300, 70, 200 - 40 * n)
        pdfium_c.FPDFPageObj_SetFillColor(path, 40 * n, 90, 160, 255)
        pdfium_c.FPDFPath_SetDrawMode(path, pdfium_c.FPDF_FILLMODE_ALTERNATE, 0)
        pdfium_c.FPDFPage_InsertObject(page, path)


def _run(pdf: Path, tmp_path: Path) -> tuple[DocumentResult, Path]:
    config = PipelineConfig.model_validate({"store": {"kind": "none"},
                                            "work_dir": str(tmp_path / "work")})
    out = tmp_path / "out"
    services = Services(config, str(out))
    try:
        doc = process_document(discover([str(pdf)], config.s3)[0], services)
    finally:
        services.close()
    return doc, out / document_folder(doc)


def test_a_drawing_and_seven_accented_letters_are_read_not_quarantined(tmp_path: Path) -> None:
    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(612, 792)
    _drawing(page)
    page.gen_content()
    page = pdf.new_page(612, 792)
    _drawing(page)
    _text(pdf, page, "éàüöïçñ", 72, 700, invisible=True)
    page.gen_content()
    pdf.save(tmp_path / "drawing.pdf")
    pdf.close()

    doc, folder = _run(tmp_path / "drawing.pdf", tmp_path)
    drawing, letters = doc.pages
    assert doc.outcome is DocumentOutcome.OK, doc.reason
    assert drawing.outcome is PageOutcome.OK and drawing.blank, drawing.reason
    assert drawing.reason.startswith("no text on the page") and not drawing.retryable
    assert [a.engine for a in drawing.attempts] == ["tesseract"]  # no retry, no fallback
    assert letters.outcome is PageOutcome.OK and not letters.blank, letters.reason
    assert letters.engine == "text-layer" and "éàüöïçñ" in letters.markdown
    assert (letters.attempts[0].error or "").startswith("text layer kept: OCR read no words")

    records = [json.loads(line) for line in (folder / PAGES).read_text().splitlines()]
    assert [r["blank"] for r in records] == [True, False]
    assert json.loads((folder / JSON).read_text())["pages"][0]["blank"] is True
    totals = build_report([doc], seconds=1.0, out="x")["totals"]
    assert totals["pages_without_text"] == 1 and totals["pages_quarantined"] == 0


def test_text_outside_an_offset_crop_box_is_clipped_and_kept(tmp_path: Path) -> None:
    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(612, 792)
    body = samples.sentences(5, 10).split(". ")
    for row, line in enumerate(body):
        _text(pdf, page, line + ".", 90, 640 - 16 * row)
    # a printer's slug above the trimmed page, and a line that runs off its right edge
    _text(pdf, page, "14773_00_i-xviii.qxd 2/10/04 3:46 PM Page ii", 80, 760, size=8)
    _text(pdf, page, "Overlong caption running past the trimmed edge of this page", 400, 300)
    pdfium_c.FPDFPage_SetCropBox(page, 60, 30, 550, 740)
    page.gen_content()
    pdf.save(tmp_path / "cropped.pdf")
    pdf.close()

    doc, folder = _run(tmp_path / "cropped.pdf", tmp_path)
    (result,) = doc.pages
    assert doc.outcome is DocumentOutcome.OK and result.outcome is PageOutcome.OK, result.reason
    assert result.route == "text-layer"
    assert body[2] in result.markdown and "Overlong caption" in result.markdown
    assert "14773" not in result.markdown  # furniture: out of the markdown ...
    slug = [b for b in result.blocks if "14773" in b.content]  # ... kept in the JSON
    assert slug and slug[0].label == Label.PAGE_HEADER.value
    assert any(n.startswith("geometry: ") for n in result.notes), result.notes
    for block in result.blocks:
        assert block.bbox is not None
        assert 0 <= block.bbox.x0 <= block.bbox.x1 <= result.width_pt
        assert 0 <= block.bbox.y0 <= block.bbox.y1 <= result.height_pt
    assert "geometry: " in (folder / PAGES).read_text()


def test_a_page_every_engine_failed_on_falls_back_to_its_layer(tmp_path: Path) -> None:
    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(612, 792)
    _text(pdf, page, "ÀÉÎÕÜ ÇÑ", 72, 700)  # all accented: the judge calls it junk
    page.gen_content()
    pdf.save(tmp_path / "letters.pdf")
    pdf.close()
    prep = first_page_prep(tmp_path / "letters.pdf")
    assert prep.text_layer is not None and prep.text_layer.score < 0.3
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")  # tesseract fails on it: bad output
    prep = prep.model_copy(update={"image_path": str(broken)})
    services = Services(PipelineConfig.model_validate(
        {"store": {"kind": "none"}, "work_dir": str(tmp_path / "work")}), str(tmp_path / "o"))
    try:
        result = process_page(prep, services)
        assert result.outcome is PageOutcome.FALLBACK, result.reason
        assert result.engine == "text-layer" and "ÀÉÎÕÜ" in result.markdown
        assert result.reason.startswith("text layer kept (score 0.00) after: bad-output")
        assert not result.retryable

        # no layer with text (only unmapped glyphs): the failure is the page's outcome
        junk = TextLayer(chars=3, text="\ufffd\ufffd\ufffd", score=0.0)
        (tmp_path / "again.png").write_bytes(b"not a png")
        bare = prep.model_copy(update={"text_layer": junk,
                                       "image_path": str(tmp_path / "again.png")})
        failed = process_page(bare, services)
        assert failed.outcome is PageOutcome.QUARANTINED and failed.reason.startswith(
            "bad-output: tesseract"), failed.reason
    finally:
        services.close()
