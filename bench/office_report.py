"""report.docx for bench/office_docs.py: a report with a Title, headings at three levels,
nested bulleted and numbered lists, a bordered and a borderless table with merged cells, a
comment, a footnote, a hyperlink and a captioned PNG picture; written with python-docx
from the fixed content below, returned with its truth."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bench.office_truth import Cell, Heading, ListItem, Table, Truth

TITLE = "Northwind Logistics Quarterly Report"
LINK_TEXT, LINK_URL = "carrier portal", "https://example.com/carriers/portal"
COMMENT = "Check these totals against the ledger before publishing."
FOOTNOTE = "Figures exclude returns processed after the quarter closed."
CAPTION = "Figure 1: Weekly parcel volume at the Leeds depot"
ALT = "Bar chart of weekly parcel volume"

#: the body in order: (kind, text, level); kinds: h (heading, level 1-3 = Heading N),
#: p (paragraph), b (bullet item), n (numbered item); list levels from 1
BODY: tuple[tuple[str, str, int], ...] = (
    ("h", "Overview", 1),
    ("p", "This report summarises shipments handled by the Northwind depots during the "
          "third quarter, with volumes, delays and the actions agreed for the winter.", 0),
    ("h", "Scope", 2),
    ("h", "Regions covered", 3),
    ("p", "Five regions sent consignments through the depots this quarter:", 0),
    ("b", "Inbound freight from coastal ports", 1),
    ("b", "Container terminals at the northern harbour", 2),
    ("b", "Bulk cargo piers", 2),
    ("b", "Outbound parcels to retail partners", 1),
    ("b", "Cold chain deliveries", 1),
    ("b", "Pharmaceutical consignments", 2),
    ("b", "Vaccines packed with dry ice", 3),
    ("h", "Receiving procedure", 2),
    ("p", "Every consignment follows the same steps at the dock:", 0),
    ("n", "Check the delivery note against the booking", 1),
    ("n", "Scan each pallet label", 2),
    ("n", "Record damaged pallets separately", 2),
    ("n", "Move the goods to their assigned bay", 1),
    ("n", "Confirm receipt in the warehouse system", 1),
    ("h", "Results", 1),
    ("p", "Depot performance improved in every region except the south.", 0),
)
CONCLUSION = ("The winter plan adds two refrigerated trailers and extends the evening "
              "shift at Bristol from November onwards.")

#: the bordered table (Table Grid): a title row merged over all four columns, a header
#: row, data rows, and a last row whose first cell spans two columns
BORDERED = (("Depot performance by region", "", "", ""),
            ("Region", "Parcels", "Pallets", "On time"),
            ("North", "1240", "86", "97 percent"),
            ("South", "980", "112", "91 percent"),
            ("Coastal total", "", "198", "95 percent"))
#: the borderless table (python-docx's default style): its first column's first cell spans
#: two rows
BORDERLESS = (("Product", "Warehouse", "Stock"),
              ("Pallet wrap", "Leeds", "320"),
              ("", "Bristol", "275"),
              ("Cable ties", "Leeds", "1500"))


def _table_truth(name: str, rows: tuple[tuple[str, ...], ...],
                 spans: dict[tuple[int, int], tuple[int, int]]) -> Table:
    cells = []
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            if text:
                row_span, col_span = spans.get((r, c), (1, 1))
                cells.append(Cell(row=r, col=c, text=text, row_span=row_span,
                                  col_span=col_span))
    return Table(name=name, cells=cells)


BORDERED_SPANS = {(0, 0): (1, 4), (4, 0): (1, 2)}
BORDERLESS_SPANS = {(1, 0): (2, 1)}


def png_bars(heights: tuple[int, ...], width: int = 240, height: int = 120) -> bytes:
    """A small PNG of vertical bars (the report's picture)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    step = width // len(heights)
    for i, bar in enumerate(heights):
        draw.rectangle((i * step + 4, height - bar, (i + 1) * step - 4, height - 1),
                       fill=(40, 90, 160))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _add_table(document: Any, rows: tuple[tuple[str, ...], ...],
               spans: dict[tuple[int, int], tuple[int, int]], style: str | None) -> None:
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    if style:
        table.style = style
    for (r, c), (row_span, col_span) in spans.items():
        table.cell(r, c).merge(table.cell(r + row_span - 1, c + col_span - 1))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            if text:
                table.cell(r, c).text = text


def _add_hyperlink(paragraph: Any, text: str, url: str) -> None:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    r_id = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    paragraph._p.append(parse_xml(
        f'<w:hyperlink {nsdecls("w", "r")} r:id="{r_id}"><w:r><w:rPr><w:u w:val="single"/>'
        f"</w:rPr><w:t>{escape(text)}</w:t></w:r></w:hyperlink>"))


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_FOOTNOTES = (
    f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{_W}">'
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
    '</w:footnote><w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r>'
    '<w:continuationSeparator/></w:r></w:p></w:footnote><w:footnote w:id="1"><w:p><w:r>'
    '<w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteRef/></w:r><w:r>'
    '<w:t xml:space="preserve"> {text}</w:t></w:r></w:p></w:footnote></w:footnotes>')


def _add_footnote(document: Any, paragraph: Any, text: str) -> None:
    """A footnote part (python-docx has no footnote API) and its reference at the end of
    ``paragraph``."""
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    part = Part(PackURI("/word/footnotes.xml"),
                "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml",
                _FOOTNOTES.format(text=escape(text)).encode(), document.part.package)
    document.part.relate_to(part, RELATIONSHIP_TYPE.FOOTNOTES)
    paragraph._p.append(parse_xml(
        f'<w:r {nsdecls("w")}><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
        '<w:footnoteReference w:id="1"/></w:r>'))


_LIST_STYLES = {("b", 1): "List Bullet", ("b", 2): "List Bullet 2", ("b", 3): "List Bullet 3",
                ("n", 1): "List Number", ("n", 2): "List Number 2",
                ("n", 3): "List Number 3"}


def build_report(path: Path) -> Truth:
    """Write report.docx at ``path``; its truth."""
    from docx import Document
    from docx.shared import Inches

    document = Document()
    document.add_heading(TITLE, level=0)
    truth = Truth(text=[TITLE], headings=[Heading(text=TITLE, level=1)])
    for kind, text, level in BODY:
        truth.text.append(text)
        if kind == "h":
            document.add_heading(text, level=level)
            truth.headings.append(Heading(text=text, level=level + 1))
        elif kind == "p":
            document.add_paragraph(text)
        else:
            document.add_paragraph(text, style=_LIST_STYLES[(kind, level)])
            truth.list_items.append(ListItem(text=text, level=level, ordered=kind == "n"))
    # the overview's paragraph gets the link, the footnote and the comment
    overview = document.paragraphs[2]
    overview.add_run(" Carriers book slots through the ")
    _add_hyperlink(overview, LINK_TEXT, LINK_URL)
    commented = overview.add_run(".")
    _add_footnote(document, overview, FOOTNOTE)
    document.add_comment(commented, text=COMMENT, author="Auditor", initials="AU")
    truth.text.append(f"Carriers book slots through the {LINK_TEXT}.")
    _add_table(document, BORDERED, BORDERED_SPANS, "Table Grid")
    document.add_paragraph("Stock held at the end of the quarter:")
    _add_table(document, BORDERLESS, BORDERLESS_SPANS, None)
    shape = document.add_picture(io.BytesIO(png_bars((30, 55, 80, 70, 95, 110))),
                                 width=Inches(3))
    shape._inline.docPr.set("descr", ALT)
    document.add_paragraph(CAPTION, style="Caption")
    document.add_heading("Conclusion", level=1)
    document.add_paragraph(CONCLUSION)
    document.save(str(path))
    tables = [_table_truth("bordered table", BORDERED, BORDERED_SPANS),
              _table_truth("borderless table", BORDERLESS, BORDERLESS_SPANS)]
    truth.text += ["Stock held at the end of the quarter:", CAPTION, "Conclusion", CONCLUSION]
    truth.text += [cell.text for table in tables for cell in table.cells]
    truth.headings.append(Heading(text="Conclusion", level=2))
    truth.tables, truth.captions = tables, [CAPTION]
    truth.comments, truth.footnotes, truth.links = [COMMENT], [FOOTNOTE], [LINK_URL]
    return truth
