"""folio.page.text_agreement and chunking.page_chunk_texts: a page's body text, its markdown
and its chunks compared word for word, so a step that drops text cannot pass unseen."""

from __future__ import annotations

from folio.models import Block, DocumentResult, Label, PageOutcome, PageResult
from folio.output.chunking import page_chunk_texts
from folio.page.text_agreement import page_agreement, recall, words
from folio.settings.config import ChunkSettings


def _page(blocks: list[tuple[str, str]], markdown: str) -> PageResult:
    return PageResult(index=0, width_pt=612, height_pt=792, outcome=PageOutcome.OK,
                      markdown=markdown,
                      blocks=[Block(label=label, content=text, order=n)
                              for n, (label, text) in enumerate(blocks)])


def _agree(page: PageResult, **kw: bool) -> tuple[float | None, float | None]:
    doc = DocumentResult(source="x.pdf", doc_id="d", sha256="s", config_hash="c",
                         page_count=1, pages=[page])
    a = page_agreement(page, page_chunk_texts(doc, page, ChunkSettings(**kw)), **kw)
    return a.markdown_recall, a.chunk_recall


def test_words_leave_markup_out() -> None:
    html = "<table><tr><td>Net sales</td><td>1,200</td></tr></table>"
    assert words(html) == words("Net sales 1 200")
    assert words("## 5.1 Hyper *Parameter*") == words("5 1 hyper parameter")
    assert recall(words(""), words("a")) is None
    assert recall(words("a b b"), words("b a")) == 2 / 3


def test_a_page_that_kept_everything_agrees() -> None:
    page = _page([(Label.SECTION_HEADER.value, "## 2 Methods"),
                  (Label.TEXT.value, "We measured the samples twice."),
                  (Label.TABLE.value, "<table><tr><td>a</td><td>1</td></tr></table>")],
                 "## 2 Methods\n\nWe measured the samples twice.\n\n"
                 "<table><tr><td>a</td><td>1</td></tr></table>")
    assert _agree(page) == (1.0, 1.0)  # the heading counts through the heading path


def test_a_page_whose_markdown_lost_its_text_does_not_agree() -> None:
    """The one-page case of issue 30: every word in the blocks, none in document.md."""
    page = _page([(Label.TEXT.value, "Quarterly report of the board")], "")
    markdown, chunks = _agree(page)
    assert markdown == 0.0
    assert chunks is None  # nothing in the markdown, so nothing owed to the chunks


def test_running_heads_are_owed_only_when_kept() -> None:
    page = _page([(Label.PAGE_HEADER.value, "Journal of Things 12"),
                  (Label.TEXT.value, "Body text here.")], "Body text here.")
    assert _agree(page) == (1.0, 1.0)
    kept = _page([(Label.PAGE_HEADER.value, "Journal of Things 12"),
                  (Label.TEXT.value, "Body text here.")], "Body text here.")
    assert _agree(kept, keep_headers_footers=True)[0] == 3 / 7


def test_chunks_that_miss_markdown_text_do_not_agree() -> None:
    """Markdown with a paragraph no block holds (a model's answer whose blocks were cut
    short): the chunks, made from the blocks, miss it."""
    page = _page([(Label.TEXT.value, "first part")], "first part\n\nsecond part lost")
    markdown, chunks = _agree(page)
    assert markdown == 1.0
    assert chunks is not None and chunks < 0.5


def test_a_page_with_markdown_only_is_its_own_text() -> None:
    page = _page([], "# Title\n\nOne paragraph of a model's answer.")
    assert _agree(page) == (1.0, 1.0)
