"""folio.page.list_items and its use on every path: text layer (a LibreOffice PDF),
OCR paragraphs, a model's markdown; folio.page.private_use; lists and code in chunks."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest

from folio import samples
from folio.engines.markdown import blocks_to_markdown
from folio.engines.tesseract import Line, Paragraph, Word, paragraphs_to_blocks
from folio.models import Block, Label
from folio.output.chunking import chunk_document
from folio.page.list_items import ItemLine, list_pieces, split_marker
from folio.page.private_use import scrub, scrub_page
from folio.parsers import markdown
from folio.pdf.text_layer import extract
from folio.settings.config import ChunkSettings, RouteSettings
from tests.doc_factory import document, page
from tests.office_pdf import STRUCTURED_HTML, html_to_pdf


def pieces(*paras: list[str], ocr: bool = False) -> list[tuple[str | None, int | None, str]]:
    lines = [[ItemLine(t.lstrip(), 72 + 10 * (len(t) - len(t.lstrip())), 10) for t in p]
             for p in paras]
    return [(p.marker.marker if p.marker else None, p.level, p.content)
            for p in list_pieces(lines, ocr=ocr)]


def test_bullets_numbers_and_nesting_from_indentation() -> None:
    got = pieces(["The parts:", "\uf0b7 a reader", "that reads", "\uf0b7 a writer",
                  "  o local folders", "  o object stores", "\u2022 a scheduler"],
                 ["1. Fetch", "2. Convert", "  a) pages", "  b) images", "3. Read"])
    assert got == [
        (None, None, "The parts:"), ("-", 1, "a reader\nthat reads"), ("-", 1, "a writer"),
        ("-", 2, "local folders"), ("-", 2, "object stores"), ("-", 1, "a scheduler"),
        ("1.", 1, "Fetch"), ("2.", 1, "Convert"), ("a)", 2, "pages"), ("b)", 2, "images"),
        ("3.", 1, "Read")]


@pytest.mark.parametrize("lines", [
    ["2. Methods"],  # a numbered heading set like the body
    ["We moved in", "2019. The rest followed"],  # a year at a line's start
    ["see Section", "3. The results hold", "for every page"],  # a wrapped sentence
    ["A. Smith and B. Jones wrote it"],
])
def test_a_numbered_looking_line_alone_is_no_list(lines: list[str]) -> None:
    assert all(marker is None for marker, _, _ in pieces(lines))


def test_numbers_that_do_not_count_on_are_no_list() -> None:
    got = pieces(["1. First", "2. Second"], ["5. Results"])
    assert [m for m, _, _ in got] == ["1.", "2.", None]


def test_numbered_questions_with_their_answers_between_them_are_items() -> None:
    """A questionnaire's questions or a procedure's steps with other text between them:
    each counts on from a paragraph at its left edge elsewhere on the page."""
    got = pieces(["1. Does your country have a legal aid provider?"], ["  - Yes", "  - No"],
                 ["2. Run the statements that are shown in the example."],
                 ["  A note on what the statements change."],
                 ["3. Look at the definition of the table, as shown in the figure,",
                  "to see the masks"])
    assert [m for m, _, _ in got] == ["1.", "-", "-", "2.", None, "3."]
    assert got[5][2] == "Look at the definition of the table, as shown in the figure,\nto see the masks"


@pytest.mark.parametrize("paras", [
    # numbered headings set like the body, text between them
    [["1. Introduction"], ["Why we wrote this."], ["2. Methods"]],
    # the same count at another left edge
    [["1. Run the statements that are shown."], ["A note."],
     ["      2. Look at the definition of the table."]],
    # a numbered line inside a paragraph, beside a numbered paragraph
    [["2. Run the statements that are shown."], ["see Section", "3. The results hold.",
                                                  "for every page"]],
])
def test_numbers_apart_count_on_only_as_sentences_at_one_edge(paras: list[list[str]]) -> None:
    assert all(marker is None for marker, _, _ in pieces(*paras))


def test_markers_normalised() -> None:
    assert split_marker("(iv) text").marker == "(iv)"  # type: ignore[union-attr]
    assert split_marker("- text").marker == "-"  # type: ignore[union-attr]
    assert split_marker("-5 degrees") is None and split_marker("2019. A year") is None
    assert split_marker("r\x01 Database performance").marker == "-"  # type: ignore[union-attr]
    assert split_marker("\x84 Other (please specify)").marker == "-"  # type: ignore[union-attr]
    assert scrub("a\x01b\tc\n\x84") == "ab\tc\n"
    assert split_marker("« item") is None  # an OCR guess only on OCR pages
    assert split_marker("« item", ocr=True).marker == "-"  # type: ignore[union-attr]


def test_ocr_bullet_marks_only_among_others() -> None:
    assert [m for m, _, _ in pieces(["« one", "¢ two", "« three"], ocr=True)] == ["-"] * 3
    assert [m for m, _, _ in pieces(["He said « quoted » words"], ocr=True)] == [None]


def test_private_use_scrubbed_bullets_kept_as_bullets() -> None:
    assert scrub("a \uf0b7 b \ue123c\U000f0001") == "a \u2022 b c"
    blocks = [Block(label="Text", content="x\uf0a7 y", order=0, caption="c\ue000")]
    md = scrub_page(blocks, "x\uf0a7 y\ue000")
    assert md == "x\u2022 y" and blocks[0].content == "x\u2022 y" and blocks[0].caption == "c"


def test_text_layer_lists_nesting_and_code_from_a_libreoffice_pdf(tmp_path: Path) -> None:
    pdf = html_to_pdf(STRUCTURED_HTML, tmp_path)
    doc = pdfium.PdfDocument(pdf)
    blocks: list[Block] = []
    try:
        for index in range(len(doc)):
            w, h = doc[index].get_size()
            blocks += extract(doc[index], width_pt=w, height_pt=h, settings=RouteSettings()).blocks
    finally:
        doc.close()
    items = [(b.marker, b.level, b.content) for b in blocks if b.label == Label.LIST_ITEM.value]
    assert items == [
        ("-", 1, "a reader that takes documents from the source folder"),
        ("-", 1, "a writer that stores the results in the sink"),
        ("-", 2, "local folders"), ("-", 2, "object stores such as S3"),
        ("-", 1, "a scheduler that runs both"),
        ("1.", 1, "Fetch the file and compute its hash"), ("2.", 1, "Convert it into pages"),
        ("3.", 1, "Read every page with an engine")]
    code = [b.content for b in blocks if b.label == Label.CODE.value]
    assert code == ["def main(argv):\n    for name in argv:\n        print(name)\n    return 0"]
    md = blocks_to_markdown(blocks)
    assert "ship:\n\n- a reader" in md and "\n  - local folders\n" in md
    assert "```\ndef main(argv):\n    for name" in md
    assert any(b.content.startswith("Run the function") for b in blocks)  # "2019." no item


def _page_blocks(pdf: Path, index: int = 0) -> list[Block]:
    """A PDF page's text-layer blocks."""
    doc = pdfium.PdfDocument(pdf)
    try:
        w, h = doc[index].get_size()
        return extract(doc[index], width_pt=w, height_pt=h, settings=RouteSettings()).blocks
    finally:
        doc.close()


@pytest.mark.parametrize("apart", [False, True], ids=["one-run", "tab-apart"])
def test_a_bullet_set_larger_than_its_words_keeps_the_item_whole(
        tmp_path: Path, apart: bool) -> None:
    """A bullet in a dingbat font at 13 pt before 9 pt words (a questionnaire's check
    boxes): the item's second line is part of it, not a paragraph of its own. The bullet
    either opens the words' run or stands a tab's width apart (two runs joined)."""
    x = 96 if apart else 84
    show = []
    for item in range(3):
        y = 700 - 30 * item
        show += [f"/ZapfDingbats findfont 13 scalefont setfont 72 {y} moveto (l) show",
                 f"/Times-Roman findfont 9 scalefont setfont {x} {y} moveto "
                 f"(item {item} opens here and its words run on to) show",
                 f"{x} {y - 11} moveto (a second line under the first) show"]
    pdf = samples.write_postscript_pdf(tmp_path / "boxes.pdf", "\n".join([*show, "showpage"]))
    blocks = _page_blocks(pdf)
    assert [(b.label, b.marker, b.content) for b in blocks] == [
        (Label.LIST_ITEM.value, "-",
         f"item {n} opens here and its words run on to a second line under the first")
        for n in range(3)]


def _ocr_line(x: int, y: int, *words: str) -> Line:
    return Line(height=30, words=[Word(w, x + 90 * i, y, 80, 30, 95.0)
                                  for i, w in enumerate(words)])


def test_ocr_paragraphs_cut_into_items() -> None:
    para = Paragraph(lines=[_ocr_line(100, 100, "Three", "parts:"),
                            _ocr_line(100, 140, "«", "a", "reader"),
                            _ocr_line(100, 180, "¢", "a", "writer"),
                            _ocr_line(160, 220, "©", "local"),
                            _ocr_line(100, 260, "«", "a", "scheduler")])
    blocks = paragraphs_to_blocks([para], (0.36, 0.36))
    assert [(b.label, b.marker, b.level, b.content) for b in blocks] == [
        ("Text", None, None, "Three parts:"), ("List-Item", "-", 1, "a reader"),
        ("List-Item", "-", 1, "a writer"), ("List-Item", "-", 2, "local"),
        ("List-Item", "-", 1, "a scheduler")]
    assert blocks[1].bbox is not None and blocks[1].bbox.y0 == pytest.approx(140 * 0.36)


def test_model_markdown_bullets_in_a_paragraph_become_items() -> None:
    blocks, md = markdown.parse("Intro:\n\u2022 one\n\u2022 two\n\n1. x\n   - y\n2. z",
                                width_pt=600, height_pt=800)
    assert [(b.label, b.marker, b.level) for b in blocks] == [
        ("Text", None, None), ("List-Item", "-", 1), ("List-Item", "-", 1),
        ("List-Item", "1.", 1), ("List-Item", "-", 2), ("List-Item", "2.", 1)]
    assert "Intro:\n\n- one\n- two" in md and "1. x\n  - y\n2. z" in md


def _item(text: str, order: int, marker: str = "-") -> Block:
    return Block(label=Label.LIST_ITEM.value, content=text, order=order, marker=marker, level=1)


def test_a_list_stays_with_its_lead_in_and_code_is_never_cut() -> None:
    lead = Block(label="Text", content="The steps are these:", order=1)
    blocks = [Block(label="Text", content="x" * 150, order=0), lead,
              *(_item(f"step number {n}", n + 2, f"{n}.") for n in range(1, 5)),
              Block(label="Text", content="After the list.", order=7),
              Block(label=Label.CODE.value, content="a = 1\n\nb = 2\n  c = 3", order=8)]
    chunks = chunk_document(document([page(0, blocks)]), ChunkSettings(max_chars=200,
                                                                     overlap_chars=0))
    texts = [c.text for c in chunks]
    assert texts[0] == "x" * 150
    assert texts[1].startswith("The steps are these:\n\n1. step number 1\n2. step number 2")
    assert "4. step number 4" in texts[1]
    fenced = "```\na = 1\n\nb = 2\n  c = 3\n```"
    assert any(fenced in t for t in texts)


def test_code_in_a_face_measured_monospaced_and_dingbat_bullets(corpus: Path) -> None:
    """An IBM Redbook: SQL listings set in BookMasterGothic (monospaced, but neither
    named nor flagged so) and bullets in a dingbat font read as ``r`` U+0001."""
    pdf = corpus / "docling" / "redp5110_sampled.pdf"
    if not pdf.is_file():
        pytest.skip(f"{pdf} absent")
    doc = pdfium.PdfDocument(pdf)
    try:
        pages = {}
        for index in (2, 12):
            w, h = doc[index].get_size()
            pages[index] = extract(doc[index], width_pt=w, height_pt=h,
                                   settings=RouteSettings()).blocks
    finally:
        doc.close()
    code = [b.content for b in pages[12] if b.label == Label.CODE.value]
    assert any(c.startswith("CREATE MASK   HR_SCHEMA.MASK_TAX_ID_ON_EMPLOYEES\n"
                            "ON            HR_SCHEMA.EMPLOYEES AS EMPLOYEES") for c in code)
    items = [b.content for b in pages[2] if b.label == Label.LIST_ITEM.value]
    assert "Database performance and scalability" in items


def test_a_questionnaire_spread_reads_page_by_page_with_its_questions_as_items(
        corpus: Path) -> None:
    """Two printed pages on one PDF page (docling's table_mislabeled_as_picture): numbered
    questions with their answer boxes between them, answer boxes in Wingdings set larger
    than their words, page numbers in the margins and a column of stars in a table. The
    left page reads before the right one, each question is an item, and no answer is cut
    at its line."""
    pdf = corpus / "docling" / "table_mislabeled_as_picture.pdf"
    if not pdf.is_file():
        pytest.skip(f"{pdf} absent")
    blocks = _page_blocks(pdf)
    questions = [b.marker for b in blocks if b.label == Label.LIST_ITEM.value
                 and b.marker and b.marker[:-1].isdigit()]
    assert questions == ["23.", "24.", "25.", "26.", "27.", "28."]
    items = [b.content for b in blocks if b.label == Label.LIST_ITEM.value]
    assert ("They work in parallel to State funded private practitioners who take "
            "assignments to represent people eligible for legal aid") in items


def test_a_long_code_block_with_a_language_is_cut_into_pieces_each_closed_bare() -> None:
    """A model's fenced block (```python) longer than a chunk: every piece opens with the
    block's fence and closes with a bare one (```python as a closing fence is no fence:
    the rest of the markdown would be read as code)."""
    code = "```python\n" + "\n".join(f"value_{n} = {n}" for n in range(40)) + "\n```"
    blocks = [Block(label=Label.CODE.value, content=code, order=0)]
    chunks = chunk_document(document([page(0, blocks)]), ChunkSettings(max_chars=120,
                                                                     overlap_chars=0))
    assert len(chunks) > 2
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert lines[0] == "```python" and lines[-1] == "```", chunk.text
    joined = [line for c in chunks for line in c.text.split("\n")[1:-1]]
    assert joined == [f"value_{n} = {n}" for n in range(40)]
