"""Section headings on born-digital pages (folio.page.headings; issue 30, item 3)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from folio.models import BBox, Block, Label, Region
from folio.page.headings import (
    Body,
    Style,
    breaks_paragraph,
    is_bold,
    is_heading,
    is_italic,
    keeps_heading,
    numbered,
)
from folio.page.layout_labels import cover, label_blocks

BODY = Body(size=10.0, face="Times-Roman")


def regular(text: str, size: float = 10.0) -> tuple[str, Style]:
    n = len(text.replace(" ", ""))
    return text, Style(glyphs=n, size=size, face="Times-Roman")


def bold(text: str, size: float = 10.0) -> tuple[str, Style]:
    n = len(text.replace(" ", ""))
    return text, Style(glyphs=n, bold=n, size=size, face="Times-Bold")


def italic(text: str, size: float = 10.0) -> tuple[str, Style]:
    n = len(text.replace(" ", ""))
    return text, Style(glyphs=n, italic=n, size=size, face="Times-Italic")


def test_a_numbered_heading_at_body_size_in_bold_is_a_heading() -> None:
    assert is_heading([bold("5.1 Hyper Parameter Optimization")], BODY)


def test_a_short_line_in_a_larger_font_is_a_heading() -> None:
    assert is_heading([regular("Related Work", size=14.0)], BODY)
    assert is_heading([regular("Results of the", 13.0), regular("second survey", 13.0)], BODY)


def test_a_short_italic_line_standing_alone_is_a_heading() -> None:
    assert is_heading([italic("Elastic Stop Nut")], BODY)


def test_a_long_bold_sentence_is_not_a_heading() -> None:
    sentence = ("We find that the proposed model performs better than every baseline on "
                "all of the benchmarks we tried.")
    assert not is_heading([bold(sentence)], BODY)
    assert not is_heading([bold("Note that this holds.")], BODY)  # a sentence's full stop


def test_a_page_number_is_not_a_heading() -> None:
    assert not is_heading([regular("12", size=14.0)], BODY)
    assert not is_heading([bold("7-45")], BODY)


def test_a_numbered_list_item_set_like_the_body_is_not_a_heading() -> None:
    assert not is_heading([regular("1. We propose a new method")], BODY)
    assert not is_heading([regular("2.3 Results")], BODY)  # numbered, but set as the body


def test_a_caption_in_bold_is_not_a_heading() -> None:
    assert not is_heading([bold("Figure 3-5 Special registers and adopted authority")], BODY)
    assert is_heading([bold("Tables and Figures")], BODY)


def test_a_page_set_all_in_bold_has_no_bold_headings() -> None:
    assert not is_heading([bold("Results")], Body(size=10.0, face="Times-Bold", bold=True))


def test_numbered_in_another_face_a_little_larger_is_a_heading() -> None:
    line = ("(1) Amendment of the act", Style(glyphs=20, size=10.8, face="Dotum-Medium"))
    assert is_heading([line], BODY)
    unnumbered = ("Amendment of the act", Style(glyphs=17, size=10.8, face="Dotum-Medium"))
    assert not is_heading([unnumbered], BODY)


def test_a_bold_heading_line_does_not_run_into_its_paragraph() -> None:
    heading = bold("5.1 Hyper Parameter Optimization")
    body_line = regular("We have chosen the PubTabNet data set to perform HPO, since")
    assert breaks_paragraph([heading], body_line, BODY)
    # a heading set after a paragraph's last line with no gap starts its own block
    assert breaks_paragraph([body_line], bold("Elastic Stop Nut"), BODY)
    # two body lines, and a bold phrase within a paragraph, do not break it
    assert not breaks_paragraph([body_line], regular("the data set is large."), BODY)
    assert not breaks_paragraph([body_line], bold("and then a sentence goes on, in bold,"),
                                BODY)


@pytest.mark.parametrize(("name", "weight", "flags", "want"), [
    ("ABCDEF+Arial-BoldMT", 0, 0, True),
    ("SFBX1000", 250, 0, True),
    ("CMBX10", -1, 0, True),
    ("LubalinGraphStd-Demi", 610, 0, True),
    ("Helvetica", 700, 0, True),
    ("Times-Roman", 400, 1 << 18, True),
    ("Times-Roman", 400, 0, False),
    ("SFRM1000", 250, 0, False),
    ("KoPubDotumMedium", 400, 0, False),
])
def test_bold_faces(name: str, weight: int, flags: int, want: bool) -> None:
    assert is_bold(name, weight, flags) is want


def test_italic_faces() -> None:
    assert is_italic("Times-Italic", 0)
    assert is_italic("Whatever", 1 << 6)
    assert is_italic("CMTI10", 0)
    assert not is_italic("Times-Roman", 0)


def test_numbering_patterns() -> None:
    for text in ("1 Introduction", "2.3 Results", "A.1 Proofs", "IV. DISCUSSION", "(2) Scope",
                 "3.6.6  Activating RCAC"):
        assert numbered(text), text
    for text in ("Introduction", "2023 was a year", "In 2.3 we"):
        assert not numbered(text), text


def test_a_heading_the_model_also_sees_as_a_running_head_stays_a_heading() -> None:
    box = BBox(x0=72, y0=75, x1=263, y1=85)
    head = Region(label=Label.PAGE_HEADER, bbox=BBox(x0=70, y0=74, x1=265, y1=86), score=0.8,
                  source_class="page-header")
    section = Region(label=Label.SECTION_HEADER, bbox=BBox(x0=70, y0=73, x1=266, y1=87),
                     score=0.5, source_class="section-header")
    title = Block(label=Label.SECTION_HEADER.value, bbox=box, content="The Evolution", order=0)
    out, _ = label_blocks([title], [head, section], 0.5)
    assert out[0].label == Label.SECTION_HEADER.value
    out, _ = label_blocks([title], [head], 0.5)  # the model alone: a running head
    assert out[0].label == Label.PAGE_HEADER.value
    assert not keeps_heading(Label.TEXT.value, "The Evolution", box, head, [head, section],
                             cover, 0.5)
    caption = Region(label=Label.CAPTION, bbox=head.bbox, score=0.9, source_class="caption")
    assert keeps_heading(Label.SECTION_HEADER.value, "3.6.6 Activating RCAC", box, caption,
                         [caption, section], cover, 0.5)
    assert not keeps_heading(Label.SECTION_HEADER.value, "Figure 3-10 Column masks", box,
                             caption, [caption, section], cover, 0.5)


def test_a_papers_numbered_heading_heads_the_chunks_after_it(corpus: Path,
                                                             tmp_path: Path) -> None:
    """A born-digital arXiv page: '5.1 Hyper Parameter Optimization' (bold, body size) ran
    into its paragraph, and every chunk's heading path was empty."""
    from folio.output.chunking import chunk_document
    from tests.pipeline_run import process_pdf

    pdf = corpus / "docling" / "2305.03393v1-pg9.pdf"
    if not pdf.is_file():
        pytest.skip(f"{pdf} absent")
    doc, config = process_pdf(pdf, tmp_path)
    lines = doc.pages[0].markdown.splitlines()
    # the document's shallowest headings are its top level (folio.hierarchy.order)
    assert "# 5.1 Hyper Parameter Optimization" in lines
    assert "# 5.2 Quantitative Results" in lines
    chunks = chunk_document(doc, config.chunk)
    paths = [c.headings for c in chunks]
    assert ["5.1 Hyper Parameter Optimization"] in paths
    assert ["5.2 Quantitative Results"] in paths
    after = [c for c in chunks if c.text.startswith("We have chosen the PubTabNet")]
    assert after and after[0].headings == ["5.1 Hyper Parameter Optimization"]


def test_a_chapter_number_in_display_size_is_a_heading() -> None:
    assert is_heading([regular("1", size=36.0)], BODY)
    assert is_heading([bold("IV", size=30.0)], BODY)
    assert not is_heading([regular("12", size=14.0)], BODY)  # a page number, a little larger
    assert not is_heading([regular("2024", size=36.0)], BODY)  # a year on a cover
    assert not is_heading([regular("1", size=36.0), regular("2", size=36.0)], BODY)


# --- the layout model's regions against the engine's headings ------------------------------

SECTION = Region(label=Label.SECTION_HEADER, bbox=BBox(x0=60, y0=100, x1=400, y1=140),
                 score=0.8, source_class="title")


def _block(text: str, box: BBox, label: Label = Label.TEXT, order: int = 0) -> Block:
    return Block(label=label.value, bbox=box, content=text, order=order)


@pytest.mark.parametrize("text", [
    "a",  # a formula's letter on a line of its own
    "2 + 8 = 12",  # a formula
    "\u00ae",  # a registered-trademark sign beside a cover's title
    "10) An index insurance pays on an index, such as rainfall, wind speed or temperature, "
    "that measures the loss without settling the loss itself, as a claim would do.",
])
def test_a_heading_region_gives_no_heading_to_words_that_name_nothing(text: str) -> None:
    out, _ = label_blocks([_block(text, BBox(x0=70, y0=105, x1=390, y1=135))], [SECTION], 0.5)
    assert out[0].label == Label.TEXT.value
    out, _ = label_blocks([_block("Results", BBox(x0=70, y0=105, x1=390, y1=135))],
                          [SECTION], 0.5)
    assert out[0].label == Label.SECTION_HEADER.value  # the model alone names a heading


def test_a_heading_region_over_a_heading_and_its_paragraphs_first_line() -> None:
    """The model's box takes in the body line under a heading; the engine, which set the
    line apart by its type, keeps it text."""
    heading = _block("(3) Principles of reading the terms", BBox(x0=70, y0=101, x1=390, y1=114),
                     Label.SECTION_HEADER)
    first_line = _block("Under the act on the terms, a term is read", BBox(
        x0=80, y0=118, x1=390, y1=131), order=1)
    out, _ = label_blocks([heading, first_line], [SECTION], 0.5)
    assert [b.label for b in out] == [Label.SECTION_HEADER.value, Label.TEXT.value]
    out, _ = label_blocks([first_line], [SECTION], 0.5)  # no heading of the engine's there
    assert out[0].label == Label.SECTION_HEADER.value


def _back_cover_pdf(out: Path) -> Path:
    """A back cover as a layout model sees one big picture: bold side notes on the left,
    a column of prose in the middle, and on the right a bold three-line heading over its
    paragraph."""
    from folio.samples import sentences, write_postscript_pdf

    def show(text: str, x: float, y: float, font: str, size: float) -> str:
        return f"/{font} findfont {size} scalefont setfont {x} {y} moveto ({text}) show"

    ps = []
    for i, text in enumerate(("Protect columns by", "defining column", "masks")):
        ps.append(show(text, 30, 420 - 12 * i, "Times-Bold", 12))
    for i, text in enumerate(textwrap.wrap(sentences(3, 8), 48)[:16]):
        ps.append(show(text, 160, 521 - 11 * i, "Times-Roman", 10))
    for i, text in enumerate(("BUILDING TECHNICAL", "INFORMATION BASED ON",
                              "PRACTICAL EXPERIENCE")):
        ps.append(show(text, 430, 500 - 12 * i, "Times-Bold", 12))
    for i, text in enumerate(textwrap.wrap(sentences(4, 5), 34)[:8]):
        ps.append(show(text, 430, 455 - 11 * i, "Times-Roman", 10))
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def _diagram_pdf(out: Path) -> Path:
    """A drawing's labels: a bold title over short labels in boxes, no prose."""
    from folio.samples import write_postscript_pdf

    ps = ["/Times-Bold findfont 12 scalefont setfont 200 600 moveto (Data Flow) show"]
    for i, text in enumerate(("Input files", "Parser", "Chunker", "Vector index")):
        ps.append(f"/Times-Roman findfont 9 scalefont setfont {100 + 110 * i} 560 moveto "
                  f"({text}) show")
        ps.append(f"newpath {95 + 110 * i} 552 moveto 90 0 rlineto 0 22 rlineto -90 0 rlineto "
                  "closepath stroke")
    ps.append("/Times-Bold findfont 10 scalefont setfont 220 520 moveto (Stored pages) show")
    ps.append("showpage")
    return write_postscript_pdf(out, "\n".join(ps))


def _read_with_figure(pdf: Path) -> list[Block]:
    """The page's text layer relabelled with one figure region over all its text."""
    from tests.pdf_pages import first_page_prep

    prep = first_page_prep(pdf)
    layer = prep.text_layer
    assert layer is not None
    boxes = [b.bbox for b in layer.blocks if b.bbox is not None]
    frame = BBox(x0=min(b.x0 for b in boxes) - 5, y0=min(b.y0 for b in boxes) - 5,
                 x1=max(b.x1 for b in boxes) + 5, y1=max(b.y1 for b in boxes) + 5)
    figure = Region(label=Label.FIGURE, bbox=frame, score=0.8, source_class="figure")
    out, _ = label_blocks(layer.blocks, [figure], 0.5, layer.words, [], prep.height_pt)
    return out


def test_a_figure_region_over_prose_is_no_figure_and_its_heading_heads_the_prose(
        tmp_path: Path) -> None:
    blocks = _read_with_figure(_back_cover_pdf(tmp_path / "back.pdf"))
    labels = {b.content: b.label for b in blocks}
    heading = "BUILDING TECHNICAL INFORMATION BASED ON PRACTICAL EXPERIENCE"
    assert labels.get(heading) == Label.SECTION_HEADER.value, labels
    # bold side notes with no text under them head nothing
    assert labels.get("Protect columns by defining column masks") == Label.TEXT.value, labels
    assert Label.FIGURE.value not in labels.values()
    assert sum(1 for label in labels.values() if label == Label.TEXT.value) == 3


def test_a_drawings_labels_stay_a_figure(tmp_path: Path) -> None:
    blocks = _read_with_figure(_diagram_pdf(tmp_path / "diagram.pdf"))
    assert blocks and {b.label for b in blocks} == {Label.FIGURE.value}


def test_runs_of_one_line_join_in_its_reading_order() -> None:
    """A run sitting a little higher than the rest of its line (another script, another
    size) sorts first; it still joins the line, on the side it stands: at the end of a
    right-to-left line when it stands at its left."""
    from folio.pdf.text_blocks import _Line, _merge_runs

    arabic = _Line(BBox(x0=265, y0=73, x1=522, y1=88), "تحسين الإنتاجية بلغة R و", 13.6)
    python = _Line(BBox(x0=224, y0=75, x1=265, y1=88), "Python", 13.6)
    merged = _merge_runs([python, arabic])
    assert [m.text for m in merged] == ["تحسين الإنتاجية بلغة R و Python"]
    assert merged[0].bbox == BBox(x0=224, y0=73, x1=522, y1=88)
    big = _Line(BBox(x0=120, y0=70, x1=200, y1=88), "Results", 14.0)
    small = _Line(BBox(x0=72, y0=74, x1=118, y1=88), "Table 2:", 12.0)
    assert [m.text for m in _merge_runs([small, big])] == ["Table 2: Results"]
    # a page turned on its side: its lines stand side by side, each as tall as it is long
    first = _Line(BBox(x0=445, y0=370, x1=456, y1=546), "Edgar in the early fourteenth", 10.6)
    second = _Line(BBox(x0=360, y0=372, x1=371, y1=559), "Genealogical Roll of the Kings", 10.6)
    assert len(_merge_runs([first, second])) == 2
