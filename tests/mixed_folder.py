"""What a real document bucket holds, written here: PDFs beside a scan saved as a TIFF, a
phone photo saved as a JPEG (turned by its EXIF orientation), a ZIP, a text note and a
symlink out of the folder; a DOCX when asked. Shared by the input tests and
bench/image_inputs.py."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

from folio.samples import report_pages, write_text_pdf

__all__ = ["page_images", "write_docx", "write_mixed_folder"]


def page_images(pdf: Path, dpi: int) -> list[Image.Image]:
    """Each page of ``pdf`` rendered at ``dpi`` in grey, as a scanner saves a page."""
    doc = pdfium.PdfDocument(str(pdf))
    try:
        return [page.render(scale=dpi / 72).to_pil().convert("L") for page in doc]
    finally:
        doc.close()


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    """A minimal WordprocessingML document (the parts Word and LibreOffice need)."""
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    ns = "http://schemas.openxmlformats.org"
    parts = {
        "[Content_Types].xml": (
            f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{ns}/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.'
            'openxmlformats-package.relationships+xml"/><Default Extension="xml" '
            'ContentType="application/xml"/><Override PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.'
            'wordprocessingml.document.main+xml"/></Types>'),
        "_rels/.rels": (
            f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ns}/package/'
            f'2006/relationships"><Relationship Id="rId1" Type="{ns}/officeDocument/2006/'
            'relationships/officeDocument" Target="word/document.xml"/></Relationships>'),
        "word/document.xml": (
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{ns}/'
            f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>'),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return path


def write_mixed_folder(root: Path, *, dpi: int = 200, docx: bool = False,
                       scan_pages: int = 2) -> dict[str, str]:
    """The folder under ``root / "in"`` (the TIFF of ``scan_pages`` pages); returns each
    entry's name and the text of the page(s) it shows (empty for entries that are not
    documents)."""
    src = root / "in"
    src.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    pdf = write_text_pdf(src / "report.pdf", report_pages(seed=41, n=1))
    texts["report.pdf"] = report_pages(seed=41, n=1)[0].text()
    pages = report_pages(seed=42, n=scan_pages)
    scan_pdf = write_text_pdf(root / "scan-source.pdf", pages)
    frames = page_images(scan_pdf, dpi)
    frames[0].save(src / "scan.tif", save_all=True, append_images=frames[1:],
                   compression="tiff_lzw", dpi=(dpi, dpi))
    texts["scan.tif"] = "\n".join(p.text() for p in pages)
    photo_pages = report_pages(seed=43, n=1)
    photo = page_images(write_text_pdf(root / "photo-source.pdf", photo_pages), dpi)[0]
    exif = Image.Exif()
    exif[0x0112] = 8  # stored a quarter turned; "turn 90 degrees counter-clockwise to view"
    photo.rotate(-90, expand=True).convert("RGB").save(
        src / "photo.jpg", "JPEG", quality=92, exif=exif)
    texts["photo.jpg"] = photo_pages[0].text()
    with zipfile.ZipFile(src / "bundle.zip", "w") as archive:
        archive.writestr("readme.txt", "not a document")
    texts["bundle.zip"] = ""
    outside = root / "outside.pdf"
    outside.write_bytes(pdf.read_bytes())
    os.symlink(outside, src / "elsewhere.pdf")
    texts["elsewhere.pdf"] = ""
    if docx:
        lines = ["Folio reads office documents", "through LibreOffice into PDF"]
        write_docx(src / "memo.docx", lines)
        texts["memo.docx"] = " ".join(lines)
    return texts
