"""Office files with known content for the native readers' tests (tests/test_office_*.py):
made with python-docx, openpyxl and python-pptx (and by hand where those have no API:
a hyperlink, a header row mark, an ODT's footnotes), and LibreOffice's conversions of
them into the legacy formats."""

from __future__ import annotations

import datetime as dt
import io
import subprocess
from pathlib import Path

from folio.formats.office import find_soffice

__all__ = ["PNG", "lo_convert", "make_docx", "make_odt", "make_pptx", "make_xlsx"]


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (48, 32), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


#: the picture every document embeds: its bytes must come out as they are
PNG = _png()


def _hyperlink(paragraph, text: str, url: str) -> None:  # type: ignore[no-untyped-def]
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    rid = paragraph.part.relate_to(url, RT.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rid)
    run = OxmlElement("w:r")
    t = OxmlElement("w:t")
    t.text = text
    run.append(t)
    link.append(run)
    paragraph._p.append(link)


def _mark_header(row) -> None:  # type: ignore[no-untyped-def]
    from docx.oxml import OxmlElement

    row._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))


def make_docx(path: Path) -> Path:
    """A report: a title, headings at three levels, nested bulleted and numbered lists, a
    bordered table with a marked two-row header and merged cells, a borderless table, a
    picture with a caption and alt text, a hyperlink, a comment, a page break, a header
    and a footer, and a Symbol-font bullet glyph (private use) typed into the text."""
    import docx
    from docx.shared import Inches

    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "Kestrel Holdings confidential"
    d.sections[0].footer.paragraphs[0].text = "Kestrel footer line"
    d.add_heading("Annual Kestrel Report", 0)
    d.add_heading("Overview", 1)
    p = d.add_paragraph("The overview paragraph mentions ")
    _hyperlink(p, "the Kestrel site", "https://example.com/kestrel")
    d.add_paragraph("First bullet point", style="List Bullet")
    d.add_paragraph("Nested bullet point", style="List Bullet 2")
    d.add_paragraph("Second bullet point", style="List Bullet")
    d.add_paragraph("Gather the receipts", style="List Number")
    d.add_paragraph("File the claim", style="List Number")
    d.add_heading("Regional figures", 2)
    grid = d.add_table(rows=4, cols=3)
    grid.style = "Table Grid"
    grid.cell(0, 0).merge(grid.cell(0, 1)).text = "Region and city"
    grid.cell(0, 2).text = "Units"
    for c, text in enumerate(("Region", "City", "Count")):
        grid.cell(1, c).text = text
    grid.cell(2, 0).merge(grid.cell(3, 0)).text = "North"
    grid.cell(2, 1).text, grid.cell(2, 2).text = "Oslo", "12"
    grid.cell(3, 1).text, grid.cell(3, 2).text = "Bergen", "7"
    _mark_header(grid.rows[0])
    _mark_header(grid.rows[1])
    d.add_heading("Borderless details", 3)
    plain = d.add_table(rows=2, cols=2)  # python-docx's default style: no borders
    plain.cell(0, 0).text, plain.cell(0, 1).text = "Metric", "Value"
    plain.cell(1, 0).text, plain.cell(1, 1).text = "Margin wrapped in a cell", "31%"
    d.add_picture(io.BytesIO(PNG), width=Inches(1))
    d.inline_shapes[0]._inline.docPr.set("descr", "A red rectangle")
    d.add_paragraph("Figure 1: The red kestrel box", style="Caption")
    commented = d.add_paragraph("A sentence the reviewer questioned.")
    d.add_comment(commented.runs, text="Please verify this figure", author="Alice Reviewer")
    d.add_paragraph("\uf0b7 A glyph bullet typed as text")
    d.add_page_break()
    d.add_heading("Appendix", 1)
    d.add_paragraph("Appendix text on the second page.")
    d.save(str(path))
    return path


def make_xlsx(path: Path, *, rows: int = 200) -> Path:
    """A workbook: a ``Shipments`` sheet of ``rows`` data rows under a header row (a
    date column, a number column, a merged cell, a hyperlink, a comment, an empty row),
    a ``Summary`` sheet, and a hidden ``Lookup`` sheet."""
    import openpyxl
    from openpyxl.comments import Comment

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Shipments"
    ws.append(["Order", "Region", "Shipped", "Units"])
    for i in range(1, rows + 1):
        ws.append([f"ORD-{i:04d}", ["North", "South", "East"][i % 3],
                   dt.date(2024, 1, 1) + dt.timedelta(days=i), i * 3])
        if i == 5:
            ws.append([])  # an empty row between data rows
    ws["A2"].hyperlink = "https://example.com/orders/1"
    ws["B3"].comment = Comment("Region was corrected", "Bob")
    ws.merge_cells(f"A{rows + 3}:C{rows + 3}")
    ws[f"A{rows + 3}"] = "Total units"
    ws[f"D{rows + 3}"] = sum(i * 3 for i in range(1, rows + 1))
    summary = wb.create_sheet("Summary")
    summary.append(["Metric", "Value"])
    summary.append(["Orders", rows])
    summary.append(["Average units", 1.5])
    summary.append(["Margin", 0.315])
    summary["B4"].number_format = "0.0%"
    hidden = wb.create_sheet("Lookup")
    hidden.sheet_state = "hidden"
    hidden["A1"] = "Lookup code"
    hidden["A2"] = "LK-77"
    wb.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    """A deck: a title slide, a slide of nested bullets with a hyperlink and speaker
    notes, a slide with a merged table and a chart, a slide with a picture, a slide
    without a title."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    s = deck.slides.add_slide(deck.slide_layouts[0])
    s.shapes.title.text = "Falcon Quarterly Review"
    s.placeholders[1].text = "Prepared by operations"
    s = deck.slides.add_slide(deck.slide_layouts[1])
    s.shapes.title.text = "Highlights"
    frame = s.placeholders[1].text_frame
    frame.text = "Revenue grew"
    sub = frame.add_paragraph()
    sub.text, sub.level = "Mostly in the north", 1
    frame.add_paragraph().text = "Costs stayed flat"
    run = frame.add_paragraph().add_run()
    run.text = "Dashboard"
    run.hyperlink.address = "https://example.com/dashboard"
    s.notes_slide.notes_text_frame.text = "Say the northern number twice"
    s = deck.slides.add_slide(deck.slide_layouts[5])
    s.shapes.title.text = "Numbers"
    table = s.shapes.add_table(3, 3, Inches(1), Inches(1.5), Inches(6), Inches(1.2)).table
    table.cell(0, 0).merge(table.cell(0, 1))
    table.cell(0, 0).text, table.cell(0, 2).text = "Market", "Share"
    for r, (a, b, c) in enumerate([("EU", "Nordics", "14%"), ("US", "West", "22%")], 1):
        table.cell(r, 0).text, table.cell(r, 1).text, table.cell(r, 2).text = a, b, c
    data = CategoryChartData()
    data.categories = ["Spring", "Autumn"]
    data.add_series("Falcon sales", (17.5, 42))
    chart = s.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(3.2),
                               Inches(4), Inches(3), data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by season"
    s = deck.slides.add_slide(deck.slide_layouts[5])
    s.shapes.title.text = "Picture"
    pic = s.shapes.add_picture(io.BytesIO(PNG), Inches(1), Inches(2))
    pic._element.nvPicPr.cNvPr.set("descr", "A red falcon box")
    s = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title
    box = s.shapes.add_textbox(Inches(1), Inches(1), Inches(5), Inches(1))
    box.text_frame.text = "Words on an untitled slide"
    deck.save(str(path))
    return path


_ODT_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"')


def make_odt(path: Path) -> Path:
    """An ODT by hand: headings at two levels, a footnote and an endnote."""
    import zipfile

    body = (
        '<text:h text:outline-level="1">Osprey chapter</text:h>'
        '<text:h text:outline-level="2">Osprey section</text:h>'
        '<text:p>Osprey body text<text:note text:id="ftn1" text:note-class="footnote">'
        '<text:note-citation>1</text:note-citation><text:note-body><text:p>Osprey '
        'footnote words</text:p></text:note-body></text:note> and more'
        '<text:note text:id="edn1" text:note-class="endnote"><text:note-citation>i'
        '</text:note-citation><text:note-body><text:p>Osprey endnote words</text:p>'
        '</text:note-body></text:note>.</text:p>')
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        archive.writestr("META-INF/manifest.xml", (
            '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
            '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
            '<manifest:file-entry manifest:full-path="/" manifest:media-type='
            '"application/vnd.oasis.opendocument.text"/><manifest:file-entry '
            'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
            '</manifest:manifest>'))
        archive.writestr("content.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODT_NS} '
            f'office:version="1.2"><office:body><office:text>{body}</office:text>'
            '</office:body></office:document-content>'))
    return path


def lo_convert(src: Path, extension: str, out: Path) -> Path:
    """LibreOffice's own conversion of ``src`` to ``extension`` (a profile of its own)."""
    profile = out / f"profile-{src.stem}-{extension}"
    subprocess.run([find_soffice() or "soffice", f"-env:UserInstallation={profile.as_uri()}",
                    "--headless", "--norestore", "--convert-to", extension, "--outdir",
                    str(out), str(src)], check=True, capture_output=True, timeout=300,
                   stdin=subprocess.DEVNULL)
    made = out / f"{src.stem}.{extension}"
    assert made.is_file(), f"LibreOffice made no {extension} of {src.name}"
    return made
