"""bench/office_docs.py: the Office benchmark's files hold what their truth says, read back
with the libraries that wrote them (python-docx, openpyxl, python-pptx) and with the raw
XML where those have no API (footnotes, list numbering). LibreOffice's conversions are not
made here (bench/office_structure.py makes them): the OOXML files alone take seconds."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from bench.office_docs import SHIPMENT_ROWS, build_sources
from bench.office_truth import Fixture

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Fixture]:
    return {f.name: f for f in build_sources(tmp_path_factory.mktemp("office-docs"))}


def _numbered(paragraph: Any) -> bool:
    """Whether a paragraph's style (or one it is based on) gives it list numbering: a
    real list item, with a bullet or number of Word's own, not typed text."""
    style = paragraph.style
    while style is not None:
        if style.element.find(f"{W}pPr/{W}numPr") is not None:
            return True
        style = style.base_style
    return False


def test_report_lists_headings_and_tables_read_back(made: dict[str, Fixture]) -> None:
    from docx import Document

    fixture = made["report.docx"]
    document: Any = Document(str(fixture.path))
    items = [(p.text, p.style.name) for p in document.paragraphs if p.style.name.startswith("List")]
    truth = fixture.truth
    assert [text for text, _ in items] == [i.text for i in truth.list_items]
    for (_, style), item in zip(items, truth.list_items, strict=True):
        assert style.startswith("List Number" if item.ordered else "List Bullet")
        assert style.endswith(f" {item.level}") or (item.level == 1 and style[-1].isalpha())
    assert all(_numbered(p) for p in document.paragraphs if p.style.name.startswith("List"))
    assert not any(_numbered(p) for p in document.paragraphs if p.style.name == "Normal")
    headings = [(p.text, p.style.name) for p in document.paragraphs
                if p.style.name == "Title" or p.style.name.startswith("Heading")]
    assert [(t, 1 if s == "Title" else int(s.split()[-1]) + 1) for t, s in headings] == [
        (h.text, h.level) for h in truth.headings]
    assert {h.level for h in truth.headings} == {1, 2, 3, 4}  # a Title and three levels
    for table, expected in zip(document.tables, truth.tables, strict=True):
        for cell in expected.cells:
            docx_cell = table.cell(cell.row, cell.col)
            assert docx_cell.text == cell.text
            # a merged cell is the same cell at every slot it spans
            far = table.cell(cell.row + cell.row_span - 1, cell.col + cell.col_span - 1)
            assert far._tc is docx_cell._tc
    assert document.tables[0].style.name == "Table Grid"
    assert any(c.row_span > 1 for c in truth.tables[1].cells)


def test_report_comment_footnote_link_and_picture(made: dict[str, Fixture]) -> None:
    from docx import Document

    fixture = made["report.docx"]
    document: Any = Document(str(fixture.path))
    assert [c.text for c in document.comments] == fixture.truth.comments
    urls = [r.target_ref for r in document.part.rels.values() if r.is_external]
    assert urls == fixture.truth.links
    with zipfile.ZipFile(fixture.path) as archive:
        footnotes = archive.read("word/footnotes.xml").decode()
        body = archive.read("word/document.xml").decode()
        types = archive.read("[Content_Types].xml").decode()
        pictures = [n for n in archive.namelist() if n.startswith("word/media/")]
    assert fixture.truth.footnotes[0] in footnotes
    assert 'w:footnoteReference w:id="1"' in body and "footnotes+xml" in types
    assert [Path(p).suffix for p in pictures] == [".png"]
    captions = [p.text for p in document.paragraphs if p.style.name == "Caption"]
    assert captions == fixture.truth.captions
    words = " ".join(p.text for p in document.paragraphs)
    assert all(fragment in words or any(fragment == c.text for t in fixture.truth.tables
                                        for c in t.cells)
               for fragment in fixture.truth.text)


def test_workbook_cached_values_and_sheets(made: dict[str, Fixture]) -> None:
    from openpyxl import load_workbook

    fixture = made["workbook.xlsx"]
    values = load_workbook(fixture.path, data_only=True)
    formulas = load_workbook(fixture.path)
    assert values.sheetnames == fixture.truth.sheets == ["Shipments", "Summary"]
    for table in fixture.truth.tables:
        sheet = values[table.name]
        assert sheet.max_row == (SHIPMENT_ROWS + 1 if table.name == "Shipments" else 6)
        for cell in table.cells:
            value = sheet.cell(cell.row + 1, cell.col + 1).value
            shown = value.date().isoformat() if hasattr(value, "date") else value
            if isinstance(shown, float):
                shown = f"{shown:.4f}".rstrip("0").rstrip(".")
            assert str(shown) == cell.text, (table.name, cell)
    # the totals are formulas whose cached values a reader sees
    assert str(formulas["Shipments"]["G2"].value).startswith("=")
    assert str(formulas["Summary"]["C2"].value).startswith("=SUMIF")


def test_deck_bullets_table_notes_and_chart(made: dict[str, Fixture]) -> None:
    from pptx import Presentation

    fixture = made["deck.pptx"]
    deck = Presentation(str(fixture.path))
    slides = list(deck.slides)
    assert [s.shapes.title.text for s in slides] == [h.text for h in fixture.truth.headings]
    body = slides[1].placeholders[1].text_frame.paragraphs
    assert [(p.text, p.level + 1) for p in body] == [
        (i.text, i.level) for i in fixture.truth.list_items]
    notes = [s.notes_slide.notes_text_frame.text for s in slides if s.has_notes_slide]
    assert notes == fixture.truth.notes
    table = next(s.table for s in slides[2].shapes if s.has_table)
    assert table.cell(0, 0).is_merge_origin and table.cell(0, 2).is_spanned
    chart = next(s.chart for s in slides[3].shapes if s.has_chart)
    values = [f"{v:g}" for plot in chart.plots for series in plot.series
              for v in series.values]
    assert values == fixture.truth.chart_values
