"""Table layouts seen in reports and forms, on PDFs written here: column headings set
sideways in a ruled head whose frame lies a cell's padding above the text; a heading
broken over two lines, centred over its column, in a head that leaves the key column
empty; a question paragraph and a wide figure region around a checklist table; a table
region that reaches down over the page number.

Regions are given by hand (where the PostScript drew the table), so each test checks
the grid path deterministically, as :mod:`tests.test_table_pdf` does."""

from __future__ import annotations

from pathlib import Path

from folio.engines.base import EngineOutput
from folio.engines.text_layer import TextLayerEngine
from folio.models import BBox, Label, PageOutcome, PageResult, Region
from folio.page.running_heads import mark_running_heads
from folio.pipeline.pages import apply_layout
from folio.samples import PAGE_H, sentences, write_postscript_pdf
from tests.test_table_pdf import _grid, _layer, _prose, _rule, _show, _table

#: a permissions table as a reader sees it: the four headings after the first are set
#: sideways, running up the page, "No Authority" on one turned line
SIDEWAYS = [["User action", "Read access", "Write", "Admin rights", "No Authority"],
            ["Open a shared file", "X", "", "X", ""],
            ["Change the owner of a file", "X", "X", "X", ""],
            ["List the members of a group", "X", "", "X", "X"]]
SIDEWAYS_X = (72.0, 300.0, 330.0, 360.0, 390.0)  # left edges of the columns
SIDEWAYS_TOP = PAGE_H - 200.0  # the frame's top rule, PostScript y
#: the frame and the head's rule lie this far above the text (more than the few points
#: a table's text box is grown by when its rulings are picked)
PADDING = 7.0


def _sideways(text: str, x: float, y: float, size: float = 9) -> str:
    safe = text.replace("(", "\\(").replace(")", "\\)")
    return (f"gsave {x:.1f} {y:.1f} translate 90 rotate /Helvetica findfont {size} "
            f"scalefont setfont 0 0 moveto ({safe}) show grestore")


def _vrule(x: float, y0: float, y1: float) -> str:
    return f"newpath {x:.1f} {y0:.1f} moveto {x:.1f} {y1:.1f} lineto 0.5 setlinewidth stroke"


def sideways_pdf(out: Path) -> Path:
    """Prose, then the ruled permissions table: a frame, a rule under the head and under
    every row, a rule between columns, headings turned a right angle; prose below."""
    ps = _prose(PAGE_H - 90, seed=7, lines=4)
    top = SIDEWAYS_TOP
    head_bottom = top - 80
    left, right = SIDEWAYS_X[0] - 4, SIDEWAYS_X[-1] + 24
    ps.append(_show(SIDEWAYS[0][0], SIDEWAYS_X[0], top - PADDING - 7, "Helvetica", 9))
    for x, text in zip(SIDEWAYS_X[1:], SIDEWAYS[0][1:], strict=True):
        ps.append(_sideways(text, x + 15, head_bottom + 4))
    rules = [top, head_bottom]
    y = head_bottom
    for row in SIDEWAYS[1:]:
        y -= 19
        for x, text in zip(SIDEWAYS_X, row, strict=True):
            ps.append(_show(text, x + (8 if x > SIDEWAYS_X[0] else 0), y + 6, "Helvetica", 9))
        rules.append(y)
    ps += [_rule(left, right, r) for r in rules]
    ps += [_vrule(x, y, top) for x in (left, *[c - 2 for c in SIDEWAYS_X[1:]], right)]
    ps += _prose(y - 40, seed=8, lines=4)
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def _read(pdf: Path, region: BBox, label: Label = Label.TABLE) -> EngineOutput:
    """The text-layer engine's output for the page, relabelled with one region."""
    prep = _layer(pdf, [Region(label=label, bbox=region, score=0.9, source_class="x")])
    output = TextLayerEngine().recognize(prep)
    apply_layout(output, "text-layer", prep, min_cover=0.5)
    return output


def _text_box(pdf: Path, first: str, last: str, margin: float = 3.0) -> BBox:
    """From the top of the line holding ``first`` to the bottom of ``last``'s, across
    the words between: a detector's region drawn close to the text."""
    layer = _layer(pdf).text_layer
    assert layer is not None
    top = min(w.y0 for w in layer.words if w.text == first)
    bottom = max(w.y1 for w in layer.words if w.text == last)
    inside = [w for w in layer.words if top <= w.y0 and w.y1 <= bottom]
    return BBox(x0=min(w.x0 for w in inside) - margin, y0=top - margin,
                x1=max(w.x1 for w in inside) + margin, y1=bottom + margin)


def test_a_sideways_heading_is_one_word_read_up_the_page(tmp_path: Path) -> None:
    layer = _layer(sideways_pdf(tmp_path / "sideways.pdf")).text_layer
    assert layer is not None
    words = {w.text: w for w in layer.words}
    for heading in SIDEWAYS[0][1:]:  # whole, in reading order, not in pieces
        box = words[heading]
        assert box.y1 - box.y0 > box.x1 - box.x0, heading
    assert not {"No", "Authority", "Read", "access"} & set(words)
    assert any(block.content == "Read access" for block in layer.blocks)  # lines too


def test_sideways_headings_in_a_ruled_head_are_one_row(tmp_path: Path) -> None:
    """The frame's top rule lies a cell's padding above the text: the region's box, not
    the text's, decides which rulings are the table's, so the head's lines (the level
    heading, the long turned ones and the short one) stay between two rules: one row."""
    pdf = sideways_pdf(tmp_path / "sideways.pdf")
    output = _read(pdf, _text_box(pdf, "User", "group"))
    table = _table(output)
    assert _grid(table) == SIDEWAYS
    assert "<th>No Authority</th>" in output.markdown


#: a checklist under a question: the head leaves the key column empty and its first
#: heading is broken over two lines, centred over its column ("State funded" over
#: "legal aid", which would have fitted on the first line)
CHECKLIST = [["", "State funded legal aid", "CSOs"],
             ["Persons with disabilities", "x", "x"],
             ["Children", "x", "x"],
             ["Women", "x", ""],
             ["Migrants", "x", "x"],
             ["Refugees or stateless persons", "", "x"]]
CHECK_X = (90.0, 330.0, 410.0)  # centres of the mark columns: 330 and 410
QUESTION = ("28. Are specialized legal aid services provided focusing on specific "
            "disadvantaged population groups? If yes, please indicate to whom these "
            "services are provided, and by whom.")


def _centred(text: str, centre: float, y: float, size: float = 9,
             font: str = "Helvetica") -> str:
    return _show(text, centre - 0.25 * size * len(text), y, font, size)


def checklist_pdf(out: Path) -> Path:
    """The question in bold on three lines, then the checklist without rules."""
    words = QUESTION.split()
    y = PAGE_H - 120
    ps = []
    for i in range(3):
        ps.append(_show(" ".join(words[i * 9:(i + 1) * 9]), 72, y, "Helvetica-Bold", 9))
        y -= 11
    y -= 12
    ps.append(_centred("State funded", CHECK_X[1], y, font="Helvetica-Bold"))
    ps.append(_centred("CSOs", CHECK_X[2], y, font="Helvetica-Bold"))
    y -= 11
    ps.append(_centred("legal aid", CHECK_X[1], y, font="Helvetica-Bold"))
    for row in CHECKLIST[1:]:
        y -= 16
        ps.append(_show(row[0], CHECK_X[0], y, "Helvetica", 9))
        for centre, mark in zip(CHECK_X[1:], row[1:], strict=True):
            if mark:
                ps.append(_centred(mark, centre, y))
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def test_a_two_line_heading_in_a_head_without_keys_is_one_cell(tmp_path: Path) -> None:
    pdf = checklist_pdf(tmp_path / "checklist.pdf")
    output = _read(pdf, _text_box(pdf, "State", "Refugees", margin=6.0))
    assert _grid(_table(output)) == CHECKLIST
    assert "<th>State funded legal aid</th>" in output.markdown


def test_a_question_over_a_checklist_in_a_wide_figure_stays_text(tmp_path: Path) -> None:
    """A figure region drawn across the whole page (two pages of a spread, say) holds the
    question and the checklist: the question has no block beside it, so it is prose,
    not the table's first rows, though it fills less than half the region's width."""
    pdf = checklist_pdf(tmp_path / "checklist.pdf")
    question = _text_box(pdf, "28.", "whom.")
    region = BBox(x0=20, y0=question.y0 - 10, x1=1100, y1=question.y1 + 160)
    output = _read(pdf, region, Label.FIGURE)
    assert _grid(_table(output)) == CHECKLIST
    prose = [b for b in output.blocks if b.content.startswith("28.")]
    assert prose and prose[0].label != Label.TABLE.value and prose[0].cells is None


def test_a_table_region_over_the_page_number_leaves_it_out(tmp_path: Path) -> None:
    """A detector's table region drawn down to the page's foot takes in the page number
    far below the table: it is no row of the grid, and the running-head rules label it."""
    pdf = tmp_path / "numbered.pdf"
    words = QUESTION.split()
    ps = [_show(" ".join(words[:9]), 72, PAGE_H - 120, "Helvetica-Bold", 9)]
    y = PAGE_H - 150
    ps.append(_centred("State funded", CHECK_X[1], y, font="Helvetica-Bold"))
    ps.append(_centred("CSOs", CHECK_X[2], y, font="Helvetica-Bold"))
    ps.append(_centred("legal aid", CHECK_X[1], y - 11, font="Helvetica-Bold"))
    y -= 11
    for row in CHECKLIST[1:]:
        y -= 16
        ps.append(_show(row[0], CHECK_X[0], y, "Helvetica", 9))
        ps += [_centred(m, c, y) for c, m in zip(CHECK_X[1:], row[1:], strict=True) if m]
    ps.append(_centred("Page 7", 306, 40, size=10))
    ps.append("showpage")
    write_postscript_pdf(pdf, "\n".join(ps))
    table_box = _text_box(pdf, "State", "Refugees", margin=6.0)
    region = table_box.model_copy(update={"y1": PAGE_H - 20})
    output = _read(pdf, region)
    table = _table(output)
    assert _grid(table) == CHECKLIST
    assert "Page 7" not in table.content
    page = PageResult(index=6, width_pt=612, height_pt=PAGE_H, outcome=PageOutcome.OK,
                      engine="text-layer", blocks=output.blocks, markdown=output.markdown)
    mark_running_heads([page])
    footers = [b.content for b in page.blocks if b.label == Label.PAGE_FOOTER.value]
    assert footers == ["Page 7"] and "Page 7" not in page.markdown


def cover_pdf(out: Path) -> Path:
    """A back cover: short headings down the left, two paragraphs of prose beside them,
    labels down the right, a paragraph under the labels and a line at the foot."""
    ps = []
    y = PAGE_H - 250
    for heading in ("Implement roles and", "separation of duties", "", "Leverage row",
                    "permissions on the", "database", "", "Protect columns by",
                    "defining column", "masks"):
        if heading:
            ps.append(_show(heading, 30, y, "Helvetica-Bold", 9))
        y -= 12
    ps += [_show(" ".join(sentences(20 + i, 1).split()[:6]), 155, PAGE_H - 250 - 11 * i,
                 "Times-Roman", 9) for i in range(12)]
    for i, label in enumerate(("INTERNATIONAL", "TECHNICAL", "SUPPORT", "ORGANIZATION", "",
                               "BUILDING TECHNICAL", "INFORMATION BASED ON", "PRACTICAL")):
        if label:
            ps.append(_show(label, 400, PAGE_H - 250 - 11 * i, "Helvetica-Bold", 9))
    words = sentences(30, 4).split()
    ps += [_show(" ".join(words[4 * i:4 * i + 4]), 400, PAGE_H - 350 - 11 * i,
                 "Times-Roman", 9) for i in range(8)]
    ps.append(_show("For more: example.com/books", 400, PAGE_H - 460,
                    "Helvetica-Bold", 9))
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def test_a_cover_of_headings_beside_prose_stays_a_figure(tmp_path: Path) -> None:
    """A figure region over a whole cover: the paragraph in the right column has nothing
    beside it but lies between other blocks, so it stays in; headings, prose lines and
    labels that line up make no table."""
    pdf = cover_pdf(tmp_path / "cover.pdf")
    region = BBox(x0=0, y0=230, x1=612, y1=480)
    output = _read(pdf, region, Label.FIGURE)
    assert not any(b.label == Label.TABLE.value for b in output.blocks)
