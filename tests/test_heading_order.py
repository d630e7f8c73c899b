"""folio.hierarchy.order: one document's heading levels made consistent (issue 55)."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.hierarchy.levels import level_document
from folio.models import Block, Label
from folio.output.chunking import chunk_document
from folio.settings.config import ChunkSettings
from tests.doc_factory import document, page

H = Label.SECTION_HEADER.value


def heading(content: str, order: int, size: float | None = None, label: str = H) -> Block:
    return Block(label=label, content=content, order=order, type_size=size)


def text(content: str, order: int) -> Block:
    return Block(label=Label.TEXT.value, content=content, order=order)


def levels(doc_pages: list) -> list[tuple[str, int | None]]:  # type: ignore[type-arg]
    doc = document(doc_pages)
    level_document(doc)
    return [(b.content, b.level) for p in doc.pages for b in p.blocks
            if b.label in (H, Label.TITLE.value)]


def test_a_title_set_smaller_than_its_sections_goes_above_them() -> None:
    """docling's multi_page.pdf: a bold title at the body's size, larger section heads."""
    doc = document([
        page(0, [heading("The Evolution of the Word Processor", 0, 1.0), text("Intro.", 1),
                 heading("Pre-Digital Era", 2, 1.12), text("Typewriters.", 3)]),
        page(1, [heading("The Modern Era", 0, 1.12), text("Office suites.", 1)]),
    ])
    paths = {c.text: c.headings for c in chunk_document(doc, ChunkSettings(max_chars=40))}
    assert paths["Intro."] == ["The Evolution of the Word Processor"]
    assert paths["Typewriters."] == ["The Evolution of the Word Processor", "Pre-Digital Era"]
    assert paths["Office suites."] == ["The Evolution of the Word Processor", "The Modern Era"]
    assert [b.level for p in doc.pages for b in p.blocks if b.label == H] == [1, 2, 2]


def test_the_first_heading_after_body_text_or_numbered_is_no_title() -> None:
    after_text = levels([page(0, [text("Running words.", 0), heading("Abstract", 1, 1.0),
                                  heading("Methods", 2, 1.3)])])
    assert after_text == [("Abstract", 1), ("Methods", 1)]  # a jump from 0 is clamped
    numbered = levels([page(0, [heading("1 Scope", 0, 1.0), heading("Terms", 1, 1.6)])])
    assert numbered[0] == ("1 Scope", 1)


def test_shallowest_is_one_and_no_level_is_left_empty() -> None:
    bold_only = levels([page(0, [heading("Alpha", 0, 1.0), text("a", 1),
                                 heading("Beta", 2, 1.0), text("b", 3)])])
    assert bold_only == [("Alpha", 1), ("Beta", 1)]  # bands said 4
    gapped = levels([page(0, [heading("Chapter 1 Start", 0), text("a", 1),
                              heading("1.1.1 Deep", 2), text("b", 3),
                              heading("1.1.2 Deeper", 4)])])
    assert gapped == [("Chapter 1 Start", 1), ("1.1.1 Deep", 2), ("1.1.2 Deeper", 2)]


def test_model_marks_follow_the_document_order() -> None:
    doc = document([page(0, [heading("#### Report", 0, label=Label.TITLE.value),
                             heading("### Scope", 1), text("words", 2)])])
    doc.pages[0].markdown = "#### Report\n\n### Scope\n\nwords"
    level_document(doc)
    assert doc.pages[0].markdown == "# Report\n\n## Scope\n\nwords"
    level_document(doc)  # a second pass changes nothing
    assert doc.pages[0].markdown == "# Report\n\n## Scope\n\nwords"


def test_multi_page_pdf_title_heads_every_chunk_and_lists_are_lists(corpus: Path,
                                                                     tmp_path: Path) -> None:
    """docling's multi_page.pdf through the pipeline: its title (bold, body size) heads
    every chunk's path, and its bulleted lists come out as markdown lists."""
    from tests.pipeline_run import process_pdf

    pdf = corpus / "docling" / "multi_page.pdf"
    if not pdf.is_file():
        pytest.skip(f"{pdf} absent")
    doc, config = process_pdf(pdf, tmp_path)
    chunks = chunk_document(doc, config.chunk)
    title = "The Evolution of the Word Processor"
    assert chunks and all(c.headings[:1] == [title] for c in chunks)
    assert any(c.headings[1:] == ["The Rise of Personal Computers (1980s)"] for c in chunks)
    assert doc.pages[0].markdown.startswith(f"# {title}")
    assert "\n- IBM MT/ST" in doc.pages[0].markdown
    numbered = [b.marker for p in doc.pages for b in p.blocks if b.label == "List-Item"
                and b.marker != "-"]
    assert numbered[:5] == ["1.", "2.", "3.", "4.", "5."]
    text = "".join(c.text for c in chunks)
    assert "\uf0b7" not in text and "\n- " in text
