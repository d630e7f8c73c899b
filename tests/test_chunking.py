"""folio.output.chunking: layout-aware chunks from hand-built documents."""

from __future__ import annotations

import itertools

from folio.models import Chunk, PageOutcome
from folio.output.chunking import chunk_document, chunk_id, embedding_text
from folio.settings.config import ChunkSettings
from tests.doc_factory import TABLE_HTML, block, document, page, report_document

SETTINGS = ChunkSettings(max_chars=200, overlap_chars=0)


def test_headings_path_and_structure() -> None:
    chunks = chunk_document(report_document(), SETTINGS)
    summary = [(c.kind, c.headings, c.page_start, c.page_end, c.text[:20]) for c in chunks]
    assert summary == [
        ("text", ["Annual Report 2024"], 1, 1, "ACME had a strong ye"),
        ("text", ["Annual Report 2024", "Finances"], 1, 1, "Revenue is summarise"),
        ("table", ["Annual Report 2024", "Finances"], 1, 1, "<table><tr><th>Year<"),
        ("text", ["Annual Report 2024", "Finances"], 2, 2, "The table shows stea"),
        ("text", ["Annual Report 2024", "Finances", "Costs"], 2, 2, "Costs fell because t"),
        ("text", ["Annual Report 2024", "Outlook"], 4, 4, "Next year the compan"),
    ]
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_tables_are_never_split() -> None:
    chunks = chunk_document(report_document(), SETTINGS)
    tables = [c for c in chunks if c.kind == "table"]
    assert len(tables) == 1 and tables[0].text == TABLE_HTML
    assert len(TABLE_HTML) > SETTINGS.max_chars


def test_page_furniture_and_headings_not_in_text() -> None:
    text = " ".join(c.text for c in chunk_document(report_document(), SETTINGS))
    assert "ACME Corp — Annual Report" not in text and "Page 1" not in text
    assert "Annual Report 2024" not in text  # headings live in .headings


def test_quarantined_pages_contribute_nothing() -> None:
    doc = report_document()
    doc.pages[2].blocks = [block("Text", "garbage garbage garbage", 0)]
    doc.pages[2].markdown = "garbage garbage garbage"
    assert doc.pages[2].outcome == PageOutcome.QUARANTINED
    chunks = chunk_document(doc, SETTINGS)
    assert all("garbage" not in c.text for c in chunks)
    assert all(3 not in (c.page_start, c.page_end) for c in chunks)  # index 2: page 3


def test_chunks_cite_pages_from_1_and_keep_boxes() -> None:
    doc = document(
        [
            page(0, [block("Text", "First part of a paragraph that goes on", 0, 700)]),
            page(1, [block("Text", "and ends on the next page.", 0, 40)]),
        ]
    )
    (chunk,) = chunk_document(doc, ChunkSettings(max_chars=500))
    # pages as people cite them (document.md's "page 1"), boxes numbered the same way
    assert (chunk.page_start, chunk.page_end) == (1, 2)
    assert [(p, b.y0) for p, b in chunk.boxes] == [(1, 700), (2, 40)]


def test_a_box_is_cited_once_per_chunk_however_many_blocks_share_it() -> None:
    # an engine may cut one paragraph into several blocks over one box; the chunk cites
    # the box once, and boxes that differ stay in reading order
    doc = document([page(0, [block("Text", "One half of it,", 0, 100),
                             block("Text", "the other half.", 1, 100),
                             block("Text", "A later line.", 2, 300)])])
    (chunk,) = chunk_document(doc, ChunkSettings(max_chars=500))
    assert [(p, b.y0) for p, b in chunk.boxes] == [(1, 100), (1, 300)]
    assert len(chunk.text) == len("One half of it,\n\nthe other half.\n\nA later line.")


def test_long_block_split_on_sentences_within_limit() -> None:
    sentences = [f"Sentence number {i} says something useful." for i in range(40)]
    doc = document([page(0, [block("Text", " ".join(sentences), 0)])])
    chunks = chunk_document(doc, ChunkSettings(max_chars=200))
    assert len(chunks) > 1
    assert all(len(c.text) <= 200 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)  # cut between sentences
    assert " ".join(c.text for c in chunks) == " ".join(sentences)


def test_long_block_split_on_paragraphs_first() -> None:
    paras = ["alpha " * 20, "beta " * 20, "gamma " * 20]
    doc = document([page(0, [block("Text", "\n\n".join(p.strip() for p in paras), 0)])])
    chunks = chunk_document(doc, ChunkSettings(max_chars=130))
    assert [c.text.split()[0] for c in chunks] == ["alpha", "beta", "gamma"]


def test_unbroken_text_is_hard_split() -> None:
    doc = document([page(0, [block("Text", "x" * 450, 0)])])
    chunks = chunk_document(doc, ChunkSettings(max_chars=200))
    assert [len(c.text) for c in chunks] == [200, 200, 50]


def test_overlap_between_pieces_of_a_long_block() -> None:
    words = " ".join(f"w{i}" for i in range(200))
    doc = document([page(0, [block("Text", words, 0)])])
    chunks = chunk_document(doc, ChunkSettings(max_chars=200, overlap_chars=30))
    assert len(chunks) > 2
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.text.split()[0] in prev.text.split()


def test_small_blocks_accumulate_up_to_max_chars() -> None:
    blocks = [block("Text", f"Paragraph {i} " + "word " * 10, i, y=30 * i) for i in range(10)]
    chunks = chunk_document(document([page(0, blocks)]), ChunkSettings(max_chars=200))
    assert 1 < len(chunks) < 10
    assert all(len(c.text) <= 200 for c in chunks)
    assert sum(len(c.boxes) for c in chunks) == 10


def test_deterministic_ids() -> None:
    doc = report_document()
    first = chunk_document(doc, SETTINGS)
    second = chunk_document(doc.model_copy(deep=True), SETTINGS)
    assert [c.id for c in first] == [c.id for c in second]
    assert first[0].id == chunk_id(doc.sha256, doc.config_hash, 0)
    assert len(first[0].id) == 32 and len({c.id for c in first}) == len(first)
    other = doc.model_copy(update={"config_hash": "another"})
    assert chunk_document(other, SETTINGS)[0].id != first[0].id


def test_blocks_in_reading_order_not_list_order() -> None:
    doc = document([page(0, [block("Text", "second", 1), block("Text", "first", 0)])])
    (chunk,) = chunk_document(doc, SETTINGS)
    assert chunk.text == "first\n\nsecond"


def test_heading_levels_pop_correctly() -> None:
    blocks = [
        block("Section-Header", "# A", 0),
        block("Section-Header", "## B", 1),
        block("Section-Header", "### C", 2),
        block("Text", "under C", 3),
        block("Section-Header", "## D", 4),
        block("Text", "under D", 5),
        block("Section-Header", "**Plain bold header**", 6),
        block("Text", "under plain", 7),
    ]
    chunks = chunk_document(document([page(0, blocks)]), SETTINGS)
    assert [c.headings for c in chunks] == [["A", "B", "C"], ["A", "D"], ["A", "Plain bold header"]]


def test_markdown_only_pages() -> None:
    p = page(0, [])
    p.markdown = "# Intro\n\nSome text here.\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    chunks = chunk_document(document([p]), SETTINGS)
    assert [(c.kind, c.headings) for c in chunks] == [("text", ["Intro"]), ("table", ["Intro"])]
    assert chunks[0].boxes == []


def test_empty_document() -> None:
    assert chunk_document(document([]), SETTINGS) == []


def test_embedding_text_adds_headings() -> None:
    chunk = chunk_document(report_document(), SETTINGS)[1]
    assert embedding_text(chunk).startswith("Annual Report 2024 > Finances\n\nRevenue")


def test_chunk_stream_fed_page_by_page_gives_the_documents_chunks() -> None:
    """What early embedding relies on: chunks closed while pages arrive are final."""
    from folio.output.chunking import ChunkStream

    doc = report_document()
    words = " ".join(f"word{i}" for i in range(400))
    doc.pages += [page(len(doc.pages) + n, [block("Text", words[: 300 + 200 * n], 0)])
                  for n in range(4)]
    doc.page_count = len(doc.pages)
    settings = ChunkSettings(max_chars=500)
    stream = ChunkStream(doc, settings)
    streamed: list[Chunk] = []
    for p in doc.pages:
        before = len(streamed)
        streamed += stream.add(p)
        # nothing is handed out while it can still grow: each closed chunk ends before p
        assert all(c.page_end <= p.index for c in streamed[before:])
    streamed += stream.close()
    assert [c.model_dump() for c in streamed] == [
        c.model_dump() for c in chunk_document(doc, settings)]
