"""Tables as tables on the CPU route, on PDFs written here: a ruled and a borderless table
(with a header cell on two lines) come back as grids with the right rows and columns, in
the block's cells and as an HTML table in the markdown, and a chunk never splits one.

The page's table region is given by hand in most tests (where the PostScript drew the
table), so they test the grid path itself, deterministically; one test runs the whole
pipeline with the layout model finding the region."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image

from folio.engines.base import EngineOutput
from folio.engines.text_layer import TextLayerEngine
from folio.io.sources import discover
from folio.models import (
    BBox,
    Block,
    DocumentResult,
    Label,
    PageOutcome,
    PagePrep,
    PageResult,
    Region,
    RenderPlan,
)
from folio.output.chunking import chunk_document
from folio.pipeline import Services, process_document
from folio.pipeline.pages import apply_layout
from folio.samples import PAGE_H, SamplePage, sentences, write_postscript_pdf, write_text_pdf
from folio.settings.config import ChunkSettings, PipelineConfig
from tests.pdf_pages import first_page_prep

RULED = [["Region", "Revenue", "Growth", "Staff"],
         ["North", "1200", "4.5%", "31"],
         ["South", "980", "3.1%", "22"],
         ["West", "1430", "6.2%", "40"],
         ["East", "875", "2.8%", "18"]]
#: the borderless table as a reader sees it: the second column's header is on two lines
BORDERLESS = [["Product", "Unit price", "Units sold", "Returns"],
              ["Desk lamp", "24.50", "1,210", "14"],
              ["Office chair", "189.00", "342", "9"],
              ["Bookshelf", "75.25", "518", "3"],
              ["Filing cabinet", "132.10", "97", "1"]]
#: x of each borderless column, and the table's top (PostScript y, up from the bottom)
COLS_X = (72.0, 220.0, 320.0, 420.0)
TABLE_TOP = PAGE_H - 200.0
ROW_PITCH = 16.0


def _show(text: str, x: float, y: float, font: str = "Helvetica", size: float = 10) -> str:
    safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"/{font} findfont {size} scalefont setfont {x:.1f} {y:.1f} moveto ({safe}) show"


def _prose(y: float, seed: int, lines: int) -> list[str]:
    words = sentences(seed, 12).split()
    out = []
    for i in range(lines):
        out.append(_show(" ".join(words[i * 12:(i + 1) * 12]), 72, y - 14 * i, "Times-Roman", 11))
    return out


def borderless_pdf(out: Path) -> Path:
    """Prose, a borderless table whose header cells "Unit price" and "Units sold" are
    written on two lines each, then prose again."""
    ps = _prose(PAGE_H - 90, seed=3, lines=5)
    y = TABLE_TOP
    head = [("Product", ""), ("Unit", "price"), ("Units", "sold"), ("Returns", "")]
    for x, (first, second) in zip(COLS_X, head, strict=True):
        ps.append(_show(first, x, y, "Helvetica-Bold"))
        if second:
            ps.append(_show(second, x, y - 11, "Helvetica-Bold"))
    y -= 11 + ROW_PITCH
    for row in BORDERLESS[1:]:
        for x, text in zip(COLS_X, row, strict=True):
            ps.append(_show(text, x, y))
        y -= ROW_PITCH
    ps += _prose(y - 30, seed=4, lines=5)
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def borderless_region() -> BBox:
    """Where the borderless table lies, in points from the top-left."""
    top = PAGE_H - TABLE_TOP - 12
    bottom = PAGE_H - (TABLE_TOP - 11 - ROW_PITCH * len(BORDERLESS)) + 2
    return BBox(x0=66, y0=top, x1=480, y1=bottom)


def ruled_pdf(out: Path) -> Path:
    """folio.samples' page with a ruled table (a grid of stroked lines) under prose."""
    page = SamplePage(title="Quarterly figures", paragraphs=[sentences(5, 6)], table=RULED)
    return write_text_pdf(out, [page])


def _table_box(pdf: Path, first: str, last: str) -> BBox:
    """The box from word ``first``'s line to word ``last``'s, across the text width,
    grown by a margin (what a layout model's table region looks like)."""
    layer = _layer(pdf).text_layer
    assert layer is not None
    top = min(w.y0 for w in layer.words if w.text == first)
    bottom = max(w.y1 for w in layer.words if w.text == last)
    return BBox(x0=66, y0=top - 6, x1=546, y1=bottom + 6)


def _layer(pdf: Path, regions: list[Region] | None = None) -> PagePrep:
    return first_page_prep(pdf, regions)


def _read(pdf: Path, table: BBox) -> EngineOutput:
    """The text-layer engine's output for the page, relabelled with one table region."""
    regions = [Region(label=Label.TABLE, bbox=table, score=0.9, source_class="table")]
    prep = _layer(pdf, regions)
    output = TextLayerEngine().recognize(prep)
    apply_layout(output, "text-layer", prep, min_cover=0.5)
    return output


def _grid(block: Block) -> list[list[str]]:
    assert block.cells is not None
    rows = max(c.row + c.row_span for c in block.cells)
    cols = max(c.col + c.col_span for c in block.cells)
    out = [["" for _ in range(cols)] for _ in range(rows)]
    for cell in block.cells:
        out[cell.row][cell.col] = cell.text
    return out


def _table(output: EngineOutput) -> Block:
    (table,) = [b for b in output.blocks if b.label == Label.TABLE.value]
    return table


def test_ruled_table_comes_back_with_its_rows_and_columns(tmp_path: Path) -> None:
    pdf = ruled_pdf(tmp_path / "ruled.pdf")
    output = _read(pdf, _table_box(pdf, "Region", "East"))
    assert _grid(_table(output)) == RULED
    assert _layer(pdf, [Region(Label.TABLE, _table_box(pdf, "Region", "East"), 0.9,
                               "table")]).text_layer.rulings  # type: ignore[union-attr]


def test_borderless_table_with_a_two_line_header(tmp_path: Path) -> None:
    pdf = borderless_pdf(tmp_path / "borderless.pdf")
    output = _read(pdf, borderless_region())
    table = _table(output)
    assert _grid(table) == BORDERLESS  # "Unit" over "price" is one cell, "Unit price"
    assert "<th>Unit price</th>" in output.markdown
    assert output.markdown.count("<tr>") == len(BORDERLESS)
    assert "<td>Office chair</td><td>189.00</td><td>342</td><td>9</td>" in output.markdown
    prose = [b for b in output.blocks if b.label != Label.TABLE.value]
    assert prose and all(b.cells is None for b in prose)
    assert not any("Desk lamp" in b.content for b in prose)  # the table's words, once


def test_only_table_words_cross_the_page_worker_pipe(tmp_path: Path) -> None:
    pdf = borderless_pdf(tmp_path / "borderless.pdf")
    region = Region(Label.TABLE, borderless_region(), 0.9, "table")
    words = _layer(pdf, [region]).text_layer.words  # type: ignore[union-attr]
    assert {"Desk", "lamp", "Returns"} <= {w.text for w in words}
    assert len(words) == sum(len(cell.split()) for row in BORDERLESS for cell in row)
    assert _layer(pdf, []).text_layer.words == []  # type: ignore[union-attr]


def _document(output: EngineOutput) -> DocumentResult:
    page = PageResult(index=0, width_pt=612, height_pt=792, blocks=output.blocks,
                      markdown=output.markdown, engine="text-layer",
                      outcome=PageOutcome.OK)
    return DocumentResult(source="t.pdf", doc_id="d" * 32, page_count=1, pages=[page])


def test_a_chunk_never_splits_the_table(tmp_path: Path) -> None:
    pdf = borderless_pdf(tmp_path / "borderless.pdf")
    doc = _document(_read(pdf, borderless_region()))
    table_html = _table(_read(pdf, borderless_region())).content
    for max_chars in (80, 400, 4000):  # smaller than the table, about its size, larger
        chunks = chunk_document(doc, ChunkSettings(max_chars=max_chars, overlap_chars=10))
        holding = [c for c in chunks if "<table>" in c.text or "</table>" in c.text]
        assert len(holding) == 1, max_chars
        assert holding[0].kind == "table" and table_html in holding[0].text
        assert "Filing cabinet" not in " ".join(c.text for c in chunks if c.kind != "table")


@pytest.mark.slow  # the whole pipeline with the layout model (about 10 s)
@pytest.mark.usefixtures("layout_model")
def test_pipeline_finds_the_table_and_writes_its_grid(tmp_path: Path) -> None:
    pdf = ruled_pdf(tmp_path / "ruled.pdf")
    config = PipelineConfig.model_validate({"store": {"kind": "none"},
                                            "work_dir": str(tmp_path / "work")})
    services = Services(config, str(tmp_path / "out"))
    try:
        doc = process_document(discover([str(pdf)], config.s3)[0], services)
    finally:
        services.close()
    (page,) = doc.pages
    # the model may call more a table than is one (prose has no column gaps: it stays text)
    (table,) = [b for b in page.blocks if b.label == Label.TABLE.value and b.cells]
    assert _grid(table) == RULED
    assert "<table>" in page.markdown
    assert DocumentResult.model_validate_json(doc.model_dump_json()).pages[0].blocks == \
        page.blocks  # the cells survive the document JSON


def test_scanned_table_grid_from_tesseract_words(tmp_path: Path) -> None:
    """The same borderless table as a scan: Tesseract's word boxes make the grid."""
    from folio.engines.tesseract import TesseractEngine

    dpi = 200
    pdf = borderless_pdf(tmp_path / "borderless.pdf")
    image = tmp_path / "page.png"
    doc = pdfium.PdfDocument(str(pdf))
    try:
        doc[0].render(scale=dpi / 72).to_pil().convert("L").save(image)
    finally:
        doc.close()
    width, height = Image.open(image).size
    regions = [Region(Label.TABLE, borderless_region(), 0.9, "table")]
    prep = PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(image),
                    plan=RenderPlan(dpi=dpi, width_px=width, height_px=height, reason="test"),
                    layout=regions)
    output = TesseractEngine(languages="eng").recognize(prep)
    apply_layout(output, "tesseract", prep, min_cover=0.5)
    grid = _grid(_table(output))
    assert len(grid) == len(BORDERLESS) and all(len(row) == 4 for row in grid)
    assert grid[0][1] == "Unit price" and grid[0][2] == "Units sold"
    assert [row[0] for row in grid] == [row[0] for row in BORDERLESS]


#: a results table with group headings over column pairs and column headings turned 45
#: degrees (as papers set narrow numeric columns); its rows as a reader sees them
GROUPED = [["Task", "Procedure", "Completion", "Procedure", "Completion"],
           ["Easy", "0.87", "0.20", "0.80", "0.10"],
           ["Normal", "0.88", "0.40", "0.68", "0.20"],
           ["Challenge", "0.46", "0.00", "0.39", "0.05"],
           ["Average", "0.74", "0.20", "0.62", "0.12"]]
#: narrow columns: a turned heading's box reaches over the next column's
GROUPED_X = (72.0, 200.0, 224.0, 270.0, 294.0)
CAPTION = ("Table 2: Procedure and completion scores of the two agents on each level of the tasks, "
           "averaged over five seeds; higher is better in every column of the table.")


def _turned(text: str, x: float, y: float, size: float = 9) -> str:
    safe = text.replace("(", "\\(").replace(")", "\\)")
    return (f"gsave {x:.1f} {y:.1f} translate 45 rotate /Helvetica findfont {size} scalefont "
            f"setfont 0 0 moveto ({safe}) show grestore")


def grouped_pdf(out: Path) -> Path:
    """A caption, then the grouped table: "Alpha" centred over columns 1-2 and "Beta"
    over 3-4, headings turned 45 degrees, four rows of figures; prose below."""
    ps = [_show(CAPTION[:88], 72, PAGE_H - 90, "Times-Roman", 10),
          _show(CAPTION[88:], 72, PAGE_H - 102, "Times-Roman", 10)]
    top = PAGE_H - 130
    for name, first, second in (("Alpha", GROUPED_X[1], GROUPED_X[2]),
                                ("Beta", GROUPED_X[3], GROUPED_X[4])):
        centre = (first + second + 18) / 2  # the figures are about 18pt wide
        ps.append(_show(name, centre - 2.5 * len(name), top, "Helvetica", 9))
    heads_y = top - 40
    ps.append(_show(GROUPED[0][0], GROUPED_X[0], heads_y, "Helvetica", 9))
    for x, text in zip(GROUPED_X[1:], GROUPED[0][1:], strict=True):
        ps.append(_turned(text, x, heads_y))
    y = heads_y - 14
    for row in GROUPED[1:]:
        for x, text in zip(GROUPED_X, row, strict=True):
            ps.append(_show(text, x, y, "Helvetica", 9))
        y -= 12
    ps += _prose(y - 40, seed=5, lines=4)
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def _read_figure(pdf: Path, first: str, last: str) -> EngineOutput:
    """The page read with one *figure* region from word ``first``'s line to ``last``'s
    (a layout model taking a table for a picture)."""
    regions = [Region(label=Label.FIGURE, bbox=_table_box(pdf, first, last), score=0.9,
                      source_class="figure")]
    prep = _layer(pdf, regions)
    output = TextLayerEngine().recognize(prep)
    apply_layout(output, "text-layer", prep, min_cover=0.5)
    return output


def test_a_table_taken_for_a_figure_is_a_table_with_turned_and_grouped_headings(
        tmp_path: Path) -> None:
    pdf = grouped_pdf(tmp_path / "grouped.pdf")
    output = _read_figure(pdf, "Table", "Average")
    table = _table(output)
    grid = _grid(table)
    assert grid[1:] == GROUPED  # turned headings sit over their own columns
    assert table.cells is not None
    groups = {(c.text, c.col, c.col_span) for c in table.cells if c.row == 0}
    assert groups == {("Alpha", 1, 2), ("Beta", 3, 2)}  # centred over two columns each
    assert '<th colspan="2">Alpha</th>' in output.markdown
    assert "<th>Completion</th>" in output.markdown  # both heading rows are the head
    caption = [b for b in output.blocks if b.content.startswith("Table 2:")]
    assert caption and caption[0].label == Label.TEXT.value and caption[0].cells is None


def test_prose_taken_for_a_figure_is_text_not_a_table(tmp_path: Path) -> None:
    pdf = borderless_pdf(tmp_path / "borderless.pdf")
    layer = _layer(pdf).text_layer
    assert layer is not None
    words = [w for w in layer.words if w.y1 < borderless_region().y0]
    region = BBox(x0=66, y0=min(w.y0 for w in words) - 4, x1=546,
                  y1=max(w.y1 for w in words) + 4)
    prep = _layer(pdf, [Region(Label.FIGURE, region, 0.9, "figure")])
    output = TextLayerEngine().recognize(prep)
    apply_layout(output, "text-layer", prep, min_cover=0.5)
    assert not any(b.label == Label.TABLE.value for b in output.blocks)
    # wrapped prose is no drawing's labels: the region is no figure (layout_labels)
    assert not any(b.label == Label.FIGURE.value for b in output.blocks)
    assert any(b.label == Label.TEXT.value for b in output.blocks)


#: a table that rules every row, as a reader sees it: each body row's key is on one line
#: and its figures on two, "Score" heads the three columns under it, and "Wall time" is
#: one heading on two lines
RULED_ROWS = [["Model", "Score", "", "", "Wall time"],
              ["", "easy", "hard", "all", ""],
              ["Base", "0.91 0.93", "0.85 0.81", "0.88 0.87", "2.7 5.4"],
              ["Large", "0.90 0.94", "0.84 0.80", "0.86 0.85", "1.9 3.8"],
              ["Small", "0.95 0.92", "0.82 0.79", "0.89 0.84", "1.2 2.0"]]
RULED_X = (72.0, 200.0, 260.0, 320.0, 400.0)


def _rule(x0: float, x1: float, y: float) -> str:
    return f"newpath {x0:.1f} {y:.1f} moveto {x1:.1f} {y:.1f} lineto 0.5 setlinewidth stroke"


def ruled_rows_pdf(out: Path) -> Path:
    """Prose, then a table with a full-width rule above, below and between every row
    (a short one under "Score" only), whose cells are written on two lines each."""
    ps = _prose(PAGE_H - 90, seed=5, lines=4)
    y = TABLE_TOP
    left, right = RULED_X[0] - 4, RULED_X[-1] + 60
    ps.append(_rule(left, right, y + 12))
    ps.append(_show("Model", RULED_X[0], y, "Helvetica-Bold"))
    ps.append(_show("Score", RULED_X[2], y, "Helvetica-Bold"))
    ps.append(_show("Wall", RULED_X[4], y, "Helvetica-Bold"))
    ps.append(_rule(RULED_X[1] - 2, RULED_X[3] + 30, y - 4))
    y -= 13
    for x, text in zip(RULED_X[1:], ["easy", "hard", "all", "time"], strict=True):
        ps.append(_show(text, x, y, "Helvetica-Bold"))
    for row in RULED_ROWS[2:]:
        ps.append(_rule(left, right, y - 5))
        y -= 17
        for line in range(2):
            for x, text in zip(RULED_X, row, strict=True):
                if line < len(text.split()):
                    ps.append(_show(text.split()[line], x, y - 12 * line))
        y -= 12
    ps.append(_rule(left, right, y - 5))
    ps += _prose(y - 40, seed=6, lines=4)
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def test_lines_between_two_row_rules_are_one_row(tmp_path: Path) -> None:
    pdf = ruled_rows_pdf(tmp_path / "ruled_rows.pdf")
    output = _read(pdf, _table_box(pdf, "Model", "2.0"))
    table = _table(output)
    assert _grid(table) == RULED_ROWS
    score = next(c for c in table.cells or [] if c.text == "Score")
    assert (score.row, score.col, score.col_span) == (0, 1, 3)
