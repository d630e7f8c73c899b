"""Office files read from their own structure, through the real pipeline (issue 54).

The files are made here with known content (tests/office_files.py): a DOCX report, an
XLSX workbook, a PPTX deck and a hand-written ODT, and LibreOffice's own conversions of
them into RTF, DOC, ODT, XLS, ODS, PPT and ODP. Every one runs through
:func:`folio.pipeline.process_documents` in one run (validation on, as by default); the
legacy formats go through LibreOffice's conversion to OOXML and the same readers.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from folio.io.sources import discover
from folio.models import Block, DocumentOutcome, DocumentResult, Label
from folio.output.chunking import chunk_document
from folio.pipeline import Services, process_documents
from folio.settings.config import PipelineConfig
from tests.office_files import PNG, lo_convert, make_docx, make_odt, make_pptx, make_xlsx

_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
#: LibreOffice's conversions of the OOXML files: (source, target format)
LEGACY = [("report.docx", "rtf"), ("report.docx", "doc"), ("report.docx", "odt"),
          ("book.xlsx", "xls"), ("book.xlsx", "ods"), ("deck.pptx", "ppt"),
          ("deck.pptx", "odp")]


def run_pipeline(paths: list[Path], out: Path, **settings: object) -> dict[str, DocumentResult]:
    config = PipelineConfig.model_validate({
        "work_dir": str(out / "work"), "store": {"kind": "none"}, **settings})
    services = Services(config, str(out / "out"))
    try:
        docs = process_documents(discover([str(p) for p in paths], config.s3), services)
    finally:
        services.close()
    return {Path(d.source).name: d for d in docs}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("office-native")
    make_docx(src / "report.docx")
    make_xlsx(src / "book.xlsx")
    make_pptx(src / "deck.pptx")
    make_odt(src / "notes.odt")
    legacy = src / "legacy"
    legacy.mkdir()
    with ThreadPoolExecutor(4) as pool:
        made = list(pool.map(lambda job: lo_convert(src / job[0], job[1], legacy), LEGACY))
    for path in made:  # their own names: report.rtf, book.xls, deck.odp, ...
        path.rename(src / path.name)
    return src


@pytest.fixture(scope="module")
def docs(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, DocumentResult]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return run_pipeline(files, tmp_path_factory.mktemp("office-out"))


def blocks(doc: DocumentResult, label: str | None = None) -> list[Block]:
    return [b for p in doc.pages for b in sorted(p.blocks, key=lambda b: b.order)
            if label is None or b.label == label]


def markdown(doc: DocumentResult) -> str:
    return "\n\n".join(p.markdown for p in doc.pages)


WORD_FILES = ["report.docx", "report.rtf", "report.doc", "report.odt"]
SHEET_FILES = ["book.xlsx", "book.xls", "book.ods"]
DECK_FILES = ["deck.pptx", "deck.ppt", "deck.odp"]


def test_every_file_is_read_natively_and_ok(docs: dict[str, DocumentResult]) -> None:
    assert len(docs) == 11
    for name, doc in docs.items():
        assert doc.outcome is DocumentOutcome.OK, (name, doc.reason)
        assert all(p.engine == "office" and p.route == "text-layer" for p in doc.pages), name
        assert doc.engine == "office"
        text = markdown(doc) + " ".join(b.content for b in blocks(doc))
        assert not _PRIVATE_USE.search(text), name


@pytest.mark.parametrize("name", WORD_FILES)
def test_a_document_keeps_its_headings_lists_and_links(
        name: str, docs: dict[str, DocumentResult]) -> None:
    doc = docs[name]
    headings = [(b.content, b.level) for b in blocks(doc)
                if b.label in (Label.TITLE.value, Label.SECTION_HEADER.value)]
    assert headings == [("Annual Kestrel Report", 1), ("Overview", 2),
                        ("Regional figures", 3), ("Borderless details", 4), ("Appendix", 2)]
    items = [(b.content, b.marker, b.level) for b in blocks(doc, Label.LIST_ITEM.value)]
    assert items == [("First bullet point", "-", 1), ("Nested bullet point", "-", 2),
                     ("Second bullet point", "-", 1), ("Gather the receipts", "1.", 1),
                     ("File the claim", "2.", 1)]
    md = markdown(doc)
    assert "- First bullet point\n  - Nested bullet point\n- Second bullet point" in md
    assert "[the Kestrel site](https://example.com/kestrel)" in md
    assert "# Annual Kestrel Report" in md and "#### Borderless details" in md
    assert "A glyph bullet typed as text" in md


@pytest.mark.parametrize("name", WORD_FILES)
def test_a_document_s_tables_keep_their_merges_and_header(
        name: str, docs: dict[str, DocumentResult]) -> None:
    bordered, borderless = blocks(docs[name], Label.TABLE.value)
    assert bordered.cells is not None
    spans = {(c.text, c.row, c.col, c.row_span, c.col_span) for c in bordered.cells}
    assert {("Region and city", 0, 0, 1, 2), ("North", 2, 0, 2, 1), ("Bergen", 3, 1, 1, 1),
            ("7", 3, 2, 1, 1)} <= spans
    assert '<th colspan="2">Region and city</th>' in bordered.content
    assert '<td rowspan="2">North</td>' in bordered.content
    assert borderless.cells is not None
    assert ("Margin wrapped in a cell", 1, 0) in {(c.text, c.row, c.col)
                                                  for c in borderless.cells}
    assert "<th>Metric</th>" in borderless.content


def test_the_marked_header_rows_are_header_cells(docs: dict[str, DocumentResult]) -> None:
    """Both rows marked tblHeader in the DOCX head the table (<th>), not only the first."""
    bordered = blocks(docs["report.docx"], Label.TABLE.value)[0]
    assert "<tr><th>Region</th><th>City</th><th>Count</th></tr>" in bordered.content


@pytest.mark.parametrize("name", ["report.docx", "report.odt", "report.doc"])
def test_a_document_s_comment_heads_picture_and_pages(
        name: str, docs: dict[str, DocumentResult], tmp_path: Path) -> None:
    doc = docs[name]
    md = markdown(doc)
    assert "> Comment by Alice Reviewer: Please verify this figure" in md
    heads = [(b.label, b.content) for b in blocks(doc)
             if b.label in (Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value)]
    assert (Label.PAGE_HEADER.value, "Kestrel Holdings confidential") in heads
    assert (Label.PAGE_FOOTER.value, "Kestrel footer line") in heads
    assert "Kestrel Holdings confidential" not in md  # running heads: not body text
    assert doc.page_count == 2  # the author's page break
    assert doc.pages[1].blocks[0].content == "Appendix"
    (picture,) = blocks(doc, Label.PICTURE.value)
    assert picture.caption == "Figure 1: The red kestrel box"
    assert picture.image == "figures/p0001-1.png" and doc.figures == 1
    assert f"![Figure 1: The red kestrel box]({picture.image})" in md
    written = Path(doc.folder_uri) / picture.image
    assert written.read_bytes() == PNG  # the embedded PNG as it is, not re-encoded
    chunks = chunk_document(doc, PipelineConfig().chunk)
    figure = [c for c in chunks if c.kind == "figure"]
    assert figure and figure[0].image_uri == f"{doc.folder_uri}/{picture.image}"
    assert all("Kestrel Holdings confidential" not in c.text for c in chunks)


def test_the_docx_picture_keeps_its_alt_text(docs: dict[str, DocumentResult]) -> None:
    (picture,) = blocks(docs["report.docx"], Label.PICTURE.value)
    assert picture.alt == "A red rectangle"


def test_blocks_and_chunks_say_where_they_lie(docs: dict[str, DocumentResult]) -> None:
    doc = docs["report.docx"]
    nested = next(b for b in blocks(doc) if b.content == "Nested bullet point")
    assert nested.location == "Annual Kestrel Report > Overview"
    chunks = chunk_document(doc, PipelineConfig().chunk)
    table = next(c for c in chunks if c.kind == "table" and "Region and city" in c.text)
    assert table.headings == ["Annual Kestrel Report", "Overview", "Regional figures"]
    assert table.location == "Annual Kestrel Report > Overview > Regional figures"
    assert (table.page_start, table.page_end) == (1, 1)
    appendix = next(c for c in chunks if "Appendix text" in c.text)
    assert appendix.page_start == 2


def test_footnotes_and_endnotes_are_kept_and_labelled(docs: dict[str, DocumentResult]) -> None:
    doc = docs["notes.odt"]
    md = markdown(doc)
    assert "Osprey body text[^1] and more[^e1]." in md
    notes = [b.content for b in blocks(doc, Label.FOOTNOTE.value)]
    assert notes == ["[^1]: Osprey footnote words", "[^e1]: Osprey endnote words"]
    assert [(b.content, b.level) for b in blocks(doc, Label.SECTION_HEADER.value)] == [
        ("Osprey chapter", 2), ("Osprey section", 3)]
    chunks = chunk_document(doc, PipelineConfig().chunk)
    assert any("Osprey footnote words" in c.text for c in chunks)


@pytest.mark.parametrize("name", SHEET_FILES)
def test_a_sheet_is_a_section_headed_by_its_name_with_one_table(
        name: str, docs: dict[str, DocumentResult]) -> None:
    doc = docs[name]
    assert doc.page_count == 3
    shipments, summary, lookup = doc.pages
    assert [(b.label, b.content, b.level) for b in shipments.blocks[:1]] == [
        (Label.SECTION_HEADER.value, "Shipments", 1)]
    (table,) = [b for b in shipments.blocks if b.label == Label.TABLE.value]
    assert table.location == "Shipments!A1:D203"
    assert table.content.splitlines()[1] == (
        "<tr><th>Order</th><th>Region</th><th>Shipped</th><th>Units</th></tr>")
    assert table.cells is not None
    rows = {c.row for c in table.cells}
    assert len(rows) == 202  # the header, 200 data rows and the total; the empty row out
    first = {c.col: c.text for c in table.cells if c.row == 1}
    assert first == {0: "[ORD-0001](https://example.com/orders/1)", 1: "South",
                     2: "2024-01-02", 3: "3"}
    total = next(c for c in table.cells if c.text == "Total units")
    assert total.col_span == 3
    # the XLS conversion keeps the comment, not its author
    assert re.search(r"> Comment on B3( by Bob)?: Region was corrected", shipments.markdown)
    assert "<td>Average units</td><td>1.5</td>" in summary.markdown
    assert "<td>Margin</td><td>31.5%</td>" in summary.markdown  # as its format shows it
    assert lookup.blocks[0].content == "Lookup (hidden)" and "LK-77" in lookup.markdown
    assert "# Shipments" in shipments.markdown and "# Summary" in summary.markdown


@pytest.mark.parametrize("name", SHEET_FILES)
def test_a_long_sheet_is_chunked_by_rows_with_its_header_in_every_chunk(
        name: str, docs: dict[str, DocumentResult]) -> None:
    chunks = [c for c in chunk_document(docs[name], PipelineConfig().chunk)
              if c.kind == "table" and c.headings == ["Shipments"]]
    assert len(chunks) > 3
    header = "<tr><th>Order</th><th>Region</th><th>Shipped</th><th>Units</th></tr>"
    assert all(c.text.splitlines()[1] == header for c in chunks)
    orders = [m for c in chunks for m in re.findall(r"ORD-\d{4}", c.text)]
    assert orders == [f"ORD-{i:04d}" for i in range(1, 201)]  # each row once, in order
    assert all(c.page_start == 1 and c.location == "Shipments!A1:D203" for c in chunks)


@pytest.mark.parametrize("name", DECK_FILES)
def test_a_slide_is_a_page_with_its_title_bullets_table_chart_and_notes(
        name: str, docs: dict[str, DocumentResult]) -> None:
    doc = docs[name]
    assert doc.page_count == 5
    title, highlights, numbers, picture, untitled = doc.pages
    assert title.blocks[0].content == "Falcon Quarterly Review"
    assert highlights.blocks[0].content == "Highlights"
    assert highlights.blocks[0].label in (Label.TITLE.value, Label.SECTION_HEADER.value)
    items = [(b.content, b.marker, b.level) for b in highlights.blocks
             if b.label == Label.LIST_ITEM.value]
    assert items == [("Revenue grew", "-", 1), ("Mostly in the north", "-", 2),
                     ("Costs stayed flat", "-", 1),
                     ("[Dashboard](https://example.com/dashboard)", "-", 1)]
    notes = [b for b in highlights.blocks if b.location == "slide 2 notes"]
    assert [b.content for b in notes] == ["Speaker notes: Say the northern number twice"]
    assert all(b.location in ("slide 2", "slide 2 notes") for b in highlights.blocks)
    table, chart = [b for b in numbers.blocks if b.label == Label.TABLE.value]
    assert '<th colspan="2">Market</th>' in table.content
    assert "<td>Spring</td><td>17.5</td>" in chart.content and "Falcon sales" in chart.content
    assert "Chart: Sales by season" in numbers.markdown
    chunks = chunk_document(doc, PipelineConfig().chunk)
    noted = next(c for c in chunks if "northern number" in c.text)
    assert noted.page_start == 2 and noted.headings[-1] == "Highlights"
    assert any(b.label == Label.PICTURE.value for b in picture.blocks)
    assert [b.content for b in untitled.blocks] == ["Slide 5", "Words on an untitled slide"]
    last = next(c for c in chunks if "untitled slide" in c.text)
    assert last.headings[-1] == "Slide 5" and "Picture" not in last.headings


def test_the_pptx_picture_is_a_figure_with_its_alt_text(
        docs: dict[str, DocumentResult]) -> None:
    doc = docs["deck.pptx"]
    (picture,) = blocks(doc, Label.PICTURE.value)
    assert picture.alt == "A red falcon box" and picture.image == "figures/p0004-1.png"
    assert (Path(doc.folder_uri) / picture.image).read_bytes() == PNG


def test_speaker_notes_can_be_turned_off(folder: Path, tmp_path: Path) -> None:
    doc = run_pipeline([folder / "deck.pptx"], tmp_path,
                       office={"speaker_notes": False},
                       validation={"enabled": False})["deck.pptx"]
    assert doc.outcome is DocumentOutcome.OK
    assert "northern number" not in markdown(doc)
    assert PipelineConfig(office={"speaker_notes": False}).config_hash() != (
        PipelineConfig().config_hash())


def test_a_numbered_heading_keeps_its_number_and_a_text_box_its_words(tmp_path: Path) -> None:
    """Word shows a heading styled with numbering as "1 Scope" and a text box's words
    where the box is anchored: both are what a reader sees."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    d = docx.Document()
    num_id = d.styles["List Number"].element.pPr.numPr.numId.val
    for title in ("Scope", "Terms"):
        heading = d.add_heading(title, 1)
        heading._p.get_or_add_pPr().append(parse_xml(
            f'<w:numPr {nsdecls("w")}><w:ilvl w:val="0"/><w:numId w:val="{num_id}"/>'
            "</w:numPr>"))
    anchor = d.add_paragraph("Text before the box.")
    anchor._p.append(parse_xml(
        f'<w:r {nsdecls("w")} xmlns:v="urn:schemas-microsoft-com:vml"><w:pict><v:shape>'
        "<v:textbox><w:txbxContent><w:p><w:r><w:t>Words inside a text box</w:t></w:r>"
        "</w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r>"))
    d.save(str(tmp_path / "numbered.docx"))
    doc = run_pipeline([tmp_path / "numbered.docx"], tmp_path,
                       validation={"enabled": False})["numbered.docx"]
    assert [(b.content, b.level) for b in blocks(doc, Label.SECTION_HEADER.value)] == [
        ("1 Scope", 2), ("2 Terms", 2)]
    texts = [b.content for b in blocks(doc, Label.TEXT.value)]
    assert texts == ["Text before the box.", "Words inside a text box"]


@pytest.mark.usefixtures("folio_prefect_server")
def test_office_files_through_the_cli_reach_the_vector_store(tmp_path: Path) -> None:
    """`folio ingest` with the user's defaults (LanceDB, the embedding model): every file
    ok, and the store holds each sheet chunk with the sheet's header row and name."""
    import json
    import subprocess
    import sys

    import lancedb

    src = tmp_path / "in"
    src.mkdir()
    make_docx(src / "report.docx")
    make_xlsx(src / "book.xlsx")
    make_pptx(src / "deck.pptx")
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(src),
                          "--out", str(tmp_path / "out"), "--report", str(report), "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    lines = {Path(d["source"]).name: d for d in json.loads(report.read_text())["documents"]}
    assert {n: d["outcome"] for n, d in lines.items()} == {
        "report.docx": "ok", "book.xlsx": "ok", "deck.pptx": "ok"}
    rows = lancedb.connect(str(tmp_path / "out" / "_vectors")).open_table("chunks").to_pandas()
    sheet = rows[rows["text"].str.contains("ORD-0")]
    assert len(sheet) > 3
    assert all(t.splitlines()[1].startswith("<tr><th>Order</th>") for t in sheet["text"])
    assert all(list(h) == ["Shipments"] for h in sheet["headings"])
    # the citation a viewer opens: the sheet's range, kept in the vector table
    assert all(str(loc).startswith("Shipments!A1:") for loc in sheet["location"])
    notes = rows[rows["text"].str.contains("northern number")]
    assert list(notes["page_start"]) == [2]
    assert list(notes["location"]) == ["slide 2 notes"]
