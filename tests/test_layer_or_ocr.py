"""Never worse than what was there (issue 10 item 7): an OCR reading poorer than the
page's own (untrusted) text layer does not replace it; both attempts are recorded. On a
PDF written here: a scan showing one line, with an earlier OCR of the whole page hidden
under it."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw, ImageFont

from folio import samples
from folio.io.sources import discover
from folio.models import TextLayer
from folio.page.layer_or_ocr import layer_is_better
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig


def layer(text: str, score: float = 0.75) -> TextLayer:
    return TextLayer(chars=len(text), text=text, score=score, trusted=False)


def test_ocr_stands_unless_it_reads_less_or_worse() -> None:
    words = samples.sentences(3, 12)
    assert layer_is_better(words, layer(words), width_pt=612, height_pt=792) is None
    why = layer_is_better("Quarterly report", layer(words), width_pt=612, height_pt=792)
    assert why is not None and why.startswith("text layer kept: OCR read 2 words")
    soup = " ".join(["xq zzkv"] * 80)  # as many words, none of them plausible
    assert layer_is_better(soup, layer(words), width_pt=612, height_pt=792) is not None
    junk = layer("!#$% " * 50, score=0.1)  # a layer the text-layer engine refuses
    assert layer_is_better("Quarterly report", junk, width_pt=612, height_pt=792) is None
    assert layer_is_better("Quarterly report", None, width_pt=612, height_pt=792) is None


def _scan_over_earlier_ocr(out: Path) -> Path:
    """A page-sized image with one legible line, and invisible text (render mode 3, an
    earlier OCR) holding the whole page's words."""
    doc = pdfium.PdfDocument.new()
    page = doc.new_page(612, 792)
    for row, line in enumerate(samples.sentences(3, 12).split(". ")):
        obj = pdfium_c.FPDFPageObj_NewTextObj(doc, b"Helvetica", 11.0)
        wide = (line + "\x00").encode("utf-16-le")
        pdfium_c.FPDFText_SetText(obj, ctypes.cast(ctypes.c_char_p(wide),
                                                   pdfium_c.FPDF_WIDESTRING))
        pdfium_c.FPDFTextObj_SetTextRenderMode(obj, pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE)
        pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 72, 720 - 14 * row)
        pdfium_c.FPDFPage_InsertObject(page, obj)
    scan = Image.new("L", (1275, 1650), 255)  # 150 dpi
    ImageDraw.Draw(scan).text((150, 150), "Quarterly report", fill=0,
                              font=ImageFont.load_default(size=40))
    image = pdfium.PdfImage.new(doc)
    image.set_bitmap(pdfium.PdfBitmap.from_pil(scan))
    image.set_matrix(pdfium.PdfMatrix(612, 0, 0, 792, 0, 0))
    page.insert_obj(image)
    page.gen_content()
    doc.save(out)
    doc.close()
    return out


def test_a_poorer_ocr_does_not_replace_the_text_layer(tmp_path: Path) -> None:
    pdf = _scan_over_earlier_ocr(tmp_path / "earlier-ocr.pdf")
    config = PipelineConfig.model_validate({"store": {"kind": "none"},
                                            "work_dir": str(tmp_path / "work")})
    services = Services(config, str(tmp_path / "out"))
    try:
        doc = process_document(discover([str(pdf)], config.s3)[0], services)
    finally:
        services.close()
    (page,) = doc.pages
    assert page.route == "ocr" and page.engine == "text-layer", page.attempts
    assert [a.engine for a in page.attempts] == ["tesseract", "text-layer"]
    assert (page.attempts[0].error or "").startswith("text layer kept: OCR read")
    assert page.attempts[1].error is None
    assert samples.sentences(3, 12).split(". ")[1] in page.markdown
