"""Heading levels (folio.hierarchy) and the hierarchical heading paths of chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.engines.markdown import blocks_to_markdown
from folio.hierarchy.levels import HeadingLeveler, level_document
from folio.hierarchy.numbering import is_bare_number, numbering_level, section_number
from folio.models import Block, Label, OutlineEntry
from folio.output.chunking import chunk_document
from folio.settings.config import ChunkSettings
from tests.doc_factory import document, page

H = Label.SECTION_HEADER.value
T = Label.TEXT.value


def heading(content: str, order: int, size: float | None = None,
            label: str = H) -> Block:
    return Block(label=label, content=content, order=order, type_size=size)


def text(content: str, order: int) -> Block:
    return Block(label=T, content=content, order=order)


@pytest.mark.parametrize(("title", "level"), [
    ("1 Introduction", 1), ("1. Introduction", 1), ("1.1 Scope", 2), ("1.1.2 Detail", 3),
    ("Chapter 3 Results", 1), ("CHAPTER IV", 1), ("Part II", 1), ("Appendix A", 1),
    ("Appendix B.2 Tables", 2), ("A.1 Proofs", 2), ("IV. Discussion", 1),
    ("1.2.3.4.5.6.7 Deep", 6),
    # no numbering: list marks, years, quantities, words
    ("(2) Note", None), ("3) Step", None), ("2024 Annual review", None),
    ("A Study of Tables", None), ("I think", None), ("Results", None),
])
def test_numbering_gives_the_level(title: str, level: int | None) -> None:
    assert numbering_level(title) == level


def test_section_numbers_and_bare_numbers() -> None:
    assert section_number("2.1.6 Change") == ("2", "1", "6")
    assert section_number("Chapter 1. Securing data") == ("1",)
    assert section_number("Appendix C") == ("C",)
    assert section_number("A Study") is None
    assert [is_bare_number(t) for t in ("1", "IV", "Chapter 2", "2 Methods")] == \
        [True, True, True, False]


def test_type_size_learned_from_numbered_headings_levels_unnumbered_ones() -> None:
    """``References`` set like ``1 Introduction`` is a top level, ``Remarks`` set like
    ``1.1`` a second: the document's own numbered headings say what each size means."""
    leveler = HeadingLeveler()
    p = page(0, [heading("1 Introduction", 0, 1.6), text("x", 1),
                 heading("1.1 Scope", 2, 1.2), text("y", 3),
                 heading("Remarks", 4, 1.21), heading("References", 5, 1.58),
                 heading("Notes", 6, 1.0)])
    leveler.page(p)
    assert [b.level for b in p.blocks if b.label == H] == [1, 2, 2, 1, 3]


def test_without_numbered_headings_type_size_bands_give_levels() -> None:
    p = page(0, [heading("Overview", 0, 2.0), heading("Background", 1, 1.4),
                 heading("Details", 2, 1.0), heading("Unknown size", 3)])
    HeadingLeveler().page(p)
    assert [b.level for b in p.blocks] == [1, 2, 4, 2]


def test_the_outline_wins_and_a_models_marks_count() -> None:
    """The author's bookmarks over numbering; a vision model's ``###`` where nothing else
    speaks; an outline entry names a heading only on its page (or the next)."""
    outline = [OutlineEntry(level=1, title="Methods", page=0),
               OutlineEntry(level=3, title="2 Data sources", page=0),
               OutlineEntry(level=1, title="Later", page=5)]
    p = page(0, [heading("Methods", 0, 1.0), heading("2 Data sources", 1),
                 heading("### Sampling", 2), heading("Later", 3)])
    HeadingLeveler(outline).page(p)
    assert [b.level for b in p.blocks] == [1, 3, 3, 2]


def test_chunk_paths_follow_levels() -> None:
    """A new heading pops the path to its level: the issue's ``Chapter 1 > 1.1 > 1.1.2``."""
    doc = document([
        page(0, [heading("Chapter 1 Security", 0, 2.0), text("Opening words.", 1),
                 heading("1.1 Fundamentals", 2, 1.5), text("About basics.", 3),
                 heading("1.1.2 Policies", 4, 1.2), text("About policies.", 5)]),
        page(1, [heading("1.2 Current state", 0, 1.5), text("Today.", 1),
                 heading("Chapter 2 Roles", 2, 2.0), text("Who does what.", 3)]),
    ])
    paths = {c.text: c.headings for c in chunk_document(doc, ChunkSettings(max_chars=20))}
    assert paths["About policies."] == ["Chapter 1 Security", "1.1 Fundamentals",
                                        "1.1.2 Policies"]
    assert paths["Today."] == ["Chapter 1 Security", "1.2 Current state"]
    assert paths["Who does what."] == ["Chapter 2 Roles"]


def test_a_bare_chapter_number_joins_its_title_and_numbers_leave_other_numbers() -> None:
    doc = document([page(0, [
        heading("1", 0, 4.0), heading("Securing the data", 1, 2.6), text("Breaches.", 2),
        heading("1.3.1 Existing controls", 3, 1.3), text("Controls.", 4),
        heading("2.1.6 Change usage", 5, 1.3), text("Commands.", 6)])])
    paths = {c.text: c.headings for c in chunk_document(doc, ChunkSettings(max_chars=12))}
    assert paths["Breaches."] == ["1 Securing the data"]
    assert paths["Controls."] == ["1 Securing the data", "1.3.1 Existing controls"]
    # 2.1.6 is not inside chapter 1, though chapter 2's heading was not on these pages
    assert paths["Commands."] == ["2.1.6 Change usage"]


def test_markdown_marks_follow_levels() -> None:
    blocks = [heading("1 Intro", 0, 1.6), text("Body.", 1), heading("1.1 Scope", 2, 1.2),
              heading("## Model's own", 3)]
    doc = document([page(0, blocks)])
    doc.pages[0].markdown = blocks_to_markdown(blocks)  # as an engine made it, "##" each
    level_document(doc)
    assert doc.pages[0].markdown.split("\n\n") == ["# 1 Intro", "Body.", "## 1.1 Scope",
                                                   "## Model's own"]
    assert blocks_to_markdown(doc.pages[0].blocks).startswith("# 1 Intro\n\nBody.\n\n## 1.1")


def test_the_outline_is_read_from_the_pdf(corpus: Path) -> None:
    from folio.pdf.pdfium_doc import open_pdf, outline

    doc = open_pdf(corpus / "ocrmypdf" / "multipage.pdf")
    try:
        entries = outline(doc)
    finally:
        doc.close()
    assert [(e.level, e.title, e.page) for e in entries] == [
        (1, "Chapter II", 0), (1, "Huge Page", 1), (1, "Wikipedia image", 2),
        (2, "Indented image", 3)]


def test_the_gpu_models_own_levels_reach_the_chunk_paths() -> None:
    """olmOCR's markdown ``#``/``##``/``###`` and Chandra's ``<h1>``-``<h3>`` keep their
    levels through the parsers to the chunks' heading paths."""
    from folio.parsers import chandra, markdown

    olmocr = "# Report\n\nIntro.\n\n## Methods\n\nHow.\n\n### Sampling\n\nDraws.\n\n## Results\n\nWins."
    html = ('<div data-bbox="0 0 900 50" data-label="Title"><h1>Report</h1></div>'
            '<div data-bbox="0 60 900 80" data-label="Text"><p>Intro.</p></div>'
            '<div data-bbox="0 90 900 110" data-label="Section-Header"><h2>Methods</h2></div>'
            '<div data-bbox="0 120 900 140" data-label="Text"><p>How.</p></div>'
            '<div data-bbox="0 150 900 170" data-label="Section-Header"><h3>Sampling</h3></div>'
            '<div data-bbox="0 180 900 200" data-label="Text"><p>Draws.</p></div>'
            '<div data-bbox="0 210 900 230" data-label="Section-Header"><h2>Results</h2></div>'
            '<div data-bbox="0 240 900 260" data-label="Text"><p>Wins.</p></div>')
    for blocks, _ in (markdown.parse(olmocr, width_pt=612, height_pt=792),
                      chandra.parse(html, width_pt=612, height_pt=792)):
        doc = document([page(0, blocks)])
        paths = {c.text: c.headings for c in chunk_document(doc, ChunkSettings(max_chars=8))}
        assert paths["Draws."] == ["Report", "Methods", "Sampling"], paths
        assert paths["Wins."] == ["Report", "Results"]
