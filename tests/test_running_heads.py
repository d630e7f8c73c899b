"""Running headers and footers: found by repetition near the page edges, labelled, kept
in the blocks and left out of the markdown and the chunks; the streaming chunker agrees
with the whole-document one."""

from __future__ import annotations

from folio.models import BBox, Block, DocumentResult, Label, PageOutcome, PageResult
from folio.output.chunking import ChunkStream, chunk_document
from folio.page.running_heads import head_blocks, mark_running_heads
from folio.settings.config import ChunkSettings

W, H = 612.0, 792.0


def block(text: str, y0: float, y1: float, order: int, label: str = Label.TEXT.value) -> Block:
    return Block(label=label, content=text, order=order, bbox=BBox(x0=72, y0=y0, x1=540, y1=y1))


def page(index: int, header: str | None, footer: str | None, body: str) -> PageResult:
    blocks = []
    if header is not None:
        blocks.append(block(header, 30, 42, 0))
    # the body in 10 pt type: about 94 characters a 468 pt line, a line every 12 pt
    blocks.append(block(body, 100, 100 + 12 * (len(body) // 94 + 1), 1))
    if footer is not None:
        blocks.append(block(footer, 750, 762, 2))
    result = PageResult(index=index, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                        engine="text-layer", blocks=blocks)
    result.markdown = "\n\n".join(b.content for b in blocks)
    return result


def body(n: int) -> str:
    return f"Paragraph {n} of the report discusses the quarterly results in some detail. " * 3


def report(n: int = 6) -> DocumentResult:
    pages = [page(i, "ACME Corp - Annual Report 2024", f"Page {i + 1} of {n}", body(i))
             for i in range(n)]
    return DocumentResult(source="r.pdf", sha256="a" * 64, doc_id="a" * 20,
                          config_hash="c", page_count=n, pages=pages)


def test_repeated_header_and_page_numbers_are_labelled_and_left_out_of_the_markdown() -> None:
    doc = report()
    assert mark_running_heads(doc.pages) == 12
    for p in doc.pages:
        assert [b.label for b in p.blocks] == [Label.PAGE_HEADER.value, Label.TEXT.value,
                                              Label.PAGE_FOOTER.value]
        assert "ACME Corp" not in p.markdown and "Page " not in p.markdown
        assert p.markdown.startswith("Paragraph")
    assert mark_running_heads(doc.pages) == 0  # idempotent


def test_alternating_book_heads_count_and_one_off_lines_do_not() -> None:
    titles = ["CHAPTER 3. SOILS", "BRITISH HUSBANDRY"]
    pages = [page(i, titles[i % 2], None, body(i)) for i in range(5)]
    pages.append(page(5, "A heading only this page has", None, body(5)))
    heads = [head_blocks(pages, k) for k in range(len(pages))]
    assert all(heads[k] == {0: Label.PAGE_HEADER.value} for k in range(5))
    assert heads[5] == {}


def test_body_text_and_long_repeats_stay() -> None:
    notice = "This notice repeats on every page. " * 6  # longer than a running head
    pages = [page(i, notice, None, body(i)) for i in range(3)]
    assert all(head_blocks(pages, k) == {} for k in range(3))
    # a short line in the middle of the page is body text, however often it repeats
    mid = [PageResult(index=i, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                      blocks=[block("Continued", 400, 412, 0)]) for i in range(3)]
    assert all(head_blocks(mid, k) == {} for k in range(3))


def test_a_lone_page_number_is_a_footer_even_on_one_page() -> None:
    one = [page(0, None, "- 17 -", body(0))]
    assert head_blocks(one, 0) == {1: Label.PAGE_FOOTER.value}  # no header block here
    assert head_blocks([page(0, None, "xiv", body(0))], 0) == {1: Label.PAGE_FOOTER.value}
    for words in ("Updated on 12 March", "Civil", "mix"):  # not page numbers
        assert head_blocks([page(0, None, words, body(0))], 0) == {}


def test_the_stream_and_the_whole_document_give_the_same_chunks_without_heads() -> None:
    settings = ChunkSettings(max_chars=300)
    doc = report(7)
    stream = ChunkStream(doc, settings)
    streamed = []
    for p in doc.pages:
        streamed += stream.add(p)
    streamed += stream.close()
    whole = chunk_document(doc, settings)
    assert [c.text for c in streamed] == [c.text for c in whole]
    assert not any("ACME Corp" in c.text or "Page " in c.text for c in whole)
    mark_running_heads(doc.pages)  # what the load does first: the same chunks after it
    assert [c.text for c in chunk_document(doc, settings)] == [c.text for c in whole]


def test_keep_headers_footers_keeps_them_in_the_markdown_and_chunks_but_labels_them() -> None:
    settings = ChunkSettings(max_chars=300, keep_headers_footers=True)
    doc = report(4)
    mark_running_heads(doc.pages, keep_in_markdown=True)
    assert all(p.blocks[0].label == Label.PAGE_HEADER.value for p in doc.pages)
    assert all("ACME Corp" in p.markdown for p in doc.pages)
    assert any("ACME Corp" in c.text for c in chunk_document(doc, settings))


def piece(text: str, x0: float, x1: float, y0: float, order: int,
          label: str = Label.TEXT.value) -> Block:
    return Block(label=label, content=text, order=order, bbox=BBox(x0=x0, y0=y0, x1=x1, y1=y0 + 9))


def test_a_footer_line_cut_in_pieces_is_one_footer_and_its_far_neighbours_join_it() -> None:
    """Only the page number repeats or is recognisable; the chapter title beside it, and a
    report title further along the same baseline, are the same running footer."""
    pages = []
    for i, chapter in enumerate(["Chapter 2. Roles and separation of duties",
                                 "Chapter 3. Row and Column Access Control"]):
        blocks = [piece(body(i), 72, 540, 100, 0),
                  piece(chapter, 345, 521, 755, 1),
                  piece(str(11 + 4 * i), 536, 547, 755, 2),
                  piece("Global Study on Legal Aid", 72, 200, 755, 3)]
        pages.append(PageResult(index=i, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                                engine="text-layer", blocks=blocks))
    mark_running_heads(pages)
    for i, p in enumerate(pages):
        heads = [(b.label, b.content) for b in p.blocks if b.label != Label.TEXT.value]
        assert heads == [(Label.PAGE_FOOTER.value, p.blocks[1].content),
                         (Label.PAGE_FOOTER.value, "Global Study on Legal Aid")]
        assert p.blocks[1].content.startswith("Chapter ") and p.blocks[1].content.endswith(
            str(11 + 4 * i))
        assert "Chapter" not in p.markdown and p.markdown.startswith("Paragraph")
    assert mark_running_heads(pages) == 0 and len(pages[0].blocks) == 3  # idempotent


def test_a_page_number_a_little_higher_counts_only_with_nothing_below_it() -> None:
    """LaTeX puts the folio 12% up a letter page; a number with a line under it is a
    list item or a cell."""
    def one(blocks: list[Block]) -> PageResult:
        return PageResult(index=0, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                          engine="text-layer", blocks=blocks)
    latex = one([piece(body(0), 72, 540, 100, 0), piece("1", 303, 308, 696, 1)])
    assert head_blocks([latex], 0) == {1: Label.PAGE_FOOTER.value}
    listed = one([piece(body(0), 72, 540, 100, 0), piece("1", 303, 308, 696, 1),
                  piece("the first item of a list", 72, 300, 712, 2)])
    assert head_blocks([listed], 0) == {}
    equation = one([piece(body(0), 72, 540, 100, 0), piece("(3)", 520, 540, 696, 1)])
    assert head_blocks([equation], 0) == {}
    # a chapter's number in display size over its title, set as a heading, is no folio
    chapter = one([piece("1", 500, 523, 93, 0), piece("Chapter 1. Security", 80, 540, 254, 1),
                   piece(body(0), 72, 540, 350, 2)])
    assert head_blocks([chapter], 0) == {0: Label.PAGE_HEADER.value}
    chapter.blocks[0] = chapter.blocks[0].model_copy(
        update={"label": Label.SECTION_HEADER.value})
    assert head_blocks([chapter], 0) == {}


def test_a_footer_on_two_lines_is_one_footer() -> None:
    """An address over a phone number, the document number over its ISSN: the lines of
    one footer, stacked, are one block (a layout model draws one region over them);
    footers side by side stay two, and the body text above joins neither."""
    pages = []
    for i in range(2):
        blocks = [piece(body(i), 72, 540, 100, 0),
                  piece("07233 Seoul, Yeongdeungpo-gu, Uisadang-daero 1", 65, 252, 745, 1),
                  piece("Tel. 02-788-4510", 65, 136, 756, 2),
                  piece("Registration 31-9735045-001338-14", 357, 504, 745, 3),
                  piece("ISSN 2005-744X", 437, 504, 756, 4),
                  piece(str(i + 1), 300, 306, 770, 5)]
        pages.append(PageResult(index=i, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                                engine="text-layer", blocks=blocks))
    mark_running_heads(pages)
    for p in pages:
        footers = [b.content for b in p.blocks if b.label == Label.PAGE_FOOTER.value]
        assert "07233 Seoul, Yeongdeungpo-gu, Uisadang-daero 1\nTel. 02-788-4510" in footers
        assert "Registration 31-9735045-001338-14\nISSN 2005-744X" in footers
        assert p.blocks[0].label == Label.TEXT.value and p.markdown.startswith("Paragraph")


def test_a_pages_only_text_is_never_a_running_head() -> None:
    """A one-page document whose only line a layout model labelled Page-Header came out
    with an empty document.md, 0 chunks and outcome ok: its only text stays."""
    only = PageResult(index=0, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                      engine="tesseract",
                      blocks=[block("Minutes of the board, 3 March 2024", 30, 42, 0,
                                    Label.PAGE_HEADER.value)])
    doc = DocumentResult(source="one.pdf", sha256="b" * 64, doc_id="b" * 20, config_hash="c",
                         page_count=1, pages=[only])
    mark_running_heads(doc.pages)
    assert [b.label for b in only.blocks] == [Label.TEXT.value]
    assert "Minutes of the board" in only.markdown
    assert chunk_document(doc, ChunkSettings())  # and it is searchable
    # a page with body text keeps its head labelled and out of the markdown
    two = page(0, None, None, body(0))
    two.blocks.insert(0, block("Minutes of the board", 30, 42, 0, Label.PAGE_HEADER.value))
    mark_running_heads([two])
    assert two.blocks[0].label == Label.PAGE_HEADER.value


def one_page(*blocks: Block) -> list[PageResult]:
    return [PageResult(index=0, width_pt=W, height_pt=H, outcome=PageOutcome.OK,
                       engine="tesseract", blocks=list(blocks))]


def prose(y0: float, order: int) -> Block:
    """Ten lines of 10 pt body text (94 characters a 468 pt line, a line every 12 pt)."""
    return block(body(order) * 4, y0, y0 + 120, order)


def test_a_folio_line_is_a_running_head_on_its_own_page() -> None:
    """A book's head line, its page number at one end, needs no neighbour page."""
    for text in ("400 BRITISH HUSBANDRY. (Ch. XIX.", "Journal of Soil Science 12"):
        assert head_blocks(one_page(block(text, 30, 40, 0), prose(44, 1)), 0) == {
            0: Label.PAGE_HEADER.value}
        foot = one_page(prose(600, 0), block(text, 750, 760, 1))
        assert head_blocks(foot, 0) == {1: Label.PAGE_FOOTER.value}
    # a list item or a section's number (a point on it), a sentence run on from the page
    # before, a heading, or a line with something beyond it are no folio lines
    for text, label in (("26. If your country allows it", Label.TEXT.value),
                        ("12 eggs were laid that spring", Label.TEXT.value),
                        ("2 Methods and materials", Label.SECTION_HEADER.value)):
        assert head_blocks(one_page(block(text, 30, 40, 0, label), prose(44, 1)), 0) == {}
    # a chapter's number set in display type over the body is no folio line
    display = Block(label=Label.TEXT.value, content="Chapter 12", order=0,
                    bbox=BBox(x0=72, y0=30, x1=300, y1=60))
    assert head_blocks(one_page(display, prose(64, 1)), 0) == {}
    assert head_blocks(one_page(block("Chapter 12", 30, 40, 0), prose(44, 1)), 0) == {
        0: Label.PAGE_HEADER.value}
    beyond = one_page(prose(100, 0), block("Table 2 Yields", 720, 730, 1),
                      block("Source: survey data of the year.", 750, 760, 2))
    assert 1 not in head_blocks(beyond, 0)


def small(text: str, y0: float, order: int, size: float = 7.0) -> Block:
    """One line of ``text`` in ``size`` pt type (half an em a character)."""
    return Block(label=Label.TEXT.value, content=text, order=order,
                 bbox=BBox(x0=72, y0=y0, x1=72 + 0.5 * size * len(text), y1=y0 + size))


def test_a_small_line_set_apart_at_the_edge_is_a_running_head_on_its_own_page() -> None:
    journal = "Journal of Applied Physics 112, 033512 (2012)"
    assert head_blocks(one_page(small(journal, 30, 0), prose(70, 1)), 0) == {
        0: Label.PAGE_HEADER.value}
    notice = "Downloaded from https://example.org on 3 May 2021"
    assert head_blocks(one_page(prose(600, 0), small(notice, 760, 1)), 0) == {
        1: Label.PAGE_FOOTER.value}
    # in the body's type, or close to the body (a paragraph's last line), it stays
    assert head_blocks(one_page(small(journal, 30, 0, size=10.0), prose(70, 1)), 0) == {}
    assert head_blocks(one_page(small(journal, 30, 0), prose(40, 1)), 0) == {}
    # a footnote at the foot of the page is text, whatever its type
    for note in ("* Research fellow, 02-788-4582, someone@example.org",
                 "1) The standard terms of the policy", "3The survey of 2019"):
        assert head_blocks(one_page(prose(600, 0), small(note, 760, 1)), 0) == {}


def test_a_one_line_folio_page_keeps_its_text_in_the_chunks() -> None:
    """A page whose only line reads as a running head keeps it, in the markdown and in
    the chunks the stream makes."""
    only = one_page(block("Minutes of the board, 3 March 2024", 30, 42, 0))
    doc = DocumentResult(source="one.pdf", sha256="c" * 64, doc_id="c" * 20, config_hash="c",
                         page_count=1, pages=only)
    mark_running_heads(doc.pages)
    assert only[0].blocks[0].label == Label.TEXT.value
    assert "Minutes" in chunk_document(doc, ChunkSettings())[0].text


def test_a_small_line_set_apart_counts_under_a_heading_label_but_not_on_two_lines() -> None:
    """Headings are not set smaller than their text: a layout model's "title" over a
    journal line in small type does not save it. Two lines of small type (a note without
    its mark) are not one line of furniture."""
    journal = small("Journal of Applied Physics 112, 033512 (2012)", 60, 0)
    titled = journal.model_copy(update={"label": Label.SECTION_HEADER.value})
    assert head_blocks(one_page(titled, prose(100, 1)), 0) == {0: Label.PAGE_HEADER.value}
    assert journal.bbox is not None
    two = journal.model_copy(update={"bbox": journal.bbox.model_copy(
        update={"y1": journal.bbox.y0 + 15.5})})  # two lines: twice the height
    assert head_blocks(one_page(two, prose(100, 1)), 0) == {}


def test_page_of_pages_anywhere_in_a_short_edge_line_is_a_folio_line() -> None:
    for text in ("Page 3 of 12 Annual statement", "Form 1040 (page 2/4) Instructions"):
        assert head_blocks(one_page(prose(600, 0), block(text, 750, 760, 1)), 0) == {
            1: Label.PAGE_FOOTER.value}
    # a sentence naming a page is not one
    assert head_blocks(one_page(prose(600, 0), block(
        "the terms are set out on page 3 of the contract", 750, 760, 1)), 0) == {}


def test_a_block_in_the_half_inch_margin_set_apart_is_a_running_head_in_any_type() -> None:
    """Body text is set at least half an inch from the top and bottom edges: a line
    wholly within it, a line's height or more from the rest, is furniture (a print date,
    a browser's title line), whatever its size."""
    date = block("10/1/24, 3:42 PM   Edgar, King of England", 16, 25, 0)
    assert head_blocks(one_page(date, prose(60, 1)), 0) == {0: Label.PAGE_HEADER.value}
    url = block("https://en.wikipedia.org/wiki/Edgar", 769, 777, 1)
    assert head_blocks(one_page(prose(600, 0), url), 0) == {1: Label.PAGE_FOOTER.value}
    # close to the body (a cropped scan's first line), further in, or a heading: text
    assert head_blocks(one_page(date, prose(28, 1)), 0) == {}
    assert head_blocks(one_page(block("Edgar, King of England", 40, 49, 0), prose(90, 1)),
                       0) == {}
    heading = block("Edgar, King of England", 16, 25, 0, Label.TITLE.value)
    assert head_blocks(one_page(heading, prose(60, 1)), 0) == {}
