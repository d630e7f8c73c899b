"""Chunks of kind table: only real tables, with their captions (issue 49, item 2)."""

from __future__ import annotations

from folio.models import BBox, Block, Label, Region, WordBox
from folio.output.chunking import chunk_document, is_table_caption, is_table_markup
from folio.page.layout_labels import label_blocks
from folio.settings.config import ChunkSettings
from tests.doc_factory import TABLE_HTML, block, document, page

SMALL = "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"


def _chunks(blocks: list[Block]) -> list[tuple[str, str]]:
    doc = document([page(0, blocks)])
    return [(c.kind, c.text) for c in chunk_document(doc, ChunkSettings(max_chars=400))]


def test_a_caption_over_a_table_goes_into_the_tables_chunk() -> None:
    chunks = _chunks([block("Text", "Some prose before the table.", 0, 10),
                      block("Caption", "Table 2-2 Comparison of the usage IDs", 1, 40),
                      block("Table", SMALL, 2, 60),
                      block("Text", "Prose after it.", 3, 200)])
    assert chunks == [("text", "Some prose before the table."),
                      ("table", f"Table 2-2 Comparison of the usage IDs\n\n{SMALL}"),
                      ("text", "Prose after it.")]


def test_a_caption_under_a_table_goes_into_the_tables_chunk() -> None:
    chunks = _chunks([block("Table", SMALL, 0, 10),
                      block("Text", "Table 3: Results on the test set.", 1, 80),
                      block("Text", "Table 3 shows that the model wins.", 2, 120)])
    assert chunks == [("table", f"{SMALL}\n\nTable 3: Results on the test set."),
                      ("text", "Table 3 shows that the model wins.")]


def test_a_figures_caption_and_a_sentence_about_a_table_are_no_table_captions() -> None:
    assert not is_table_caption(block("Caption", "Figure 3 The pipeline", 0))
    assert not is_table_caption(block("Text", "Table 3 shows that the model wins.", 0))
    assert is_table_caption(block("Caption", "Comparison of methods", 0))
    assert is_table_caption(block("Text", "TABLE IV. Ablations", 0))
    assert is_table_caption(block("Text", "Tab. 2 - Results", 0))


def test_kind_table_only_for_a_table() -> None:
    """A block labelled Table over prose (a grid could not be made of it) is text: kind
    table promises a whole table."""
    prose = "For example, assume that a business has assigned the duty to manage security."
    chunks = _chunks([block("Table", prose, 0, 10), block("Table", TABLE_HTML, 1, 100)])
    assert [kind for kind, _ in chunks] == ["text", "table"]
    assert is_table_markup("| a | b |\n|---|---|\n| 1 | 2 |")
    assert not is_table_markup(prose)


def _words(lines: list[tuple[str, float]], x0: float = 10.0) -> list[WordBox]:
    """One word box a word, the words of each line side by side at a prose's spacing."""
    out = []
    for text, y in lines:
        x = x0
        for word in text.split():
            width = 5.0 * len(word)
            out.append(WordBox(text=word, x0=x, y0=y, x1=x + width, y1=y + 10))
            x += width + 3.0
    return out


def test_prose_a_layout_model_boxed_as_a_table_keeps_its_label() -> None:
    """The class of cause of prose chunks of kind table: a table region over a paragraph
    whose words make no grid made a Table block of plain text. Its blocks now keep the
    engine's label; a region whose words do make a grid is still a table."""
    lines = [("For example, assume that a business has assigned the duty", 110.0),
             ("to manage security on IBM i to Theresa. Before release 7.2", 123.0),
             ("she needed special authority to grant these privileges.", 136.0)]
    para = Block(label=Label.TEXT.value, content=" ".join(t for t, _ in lines),
                 bbox=BBox(x0=10, y0=110, x1=330, y1=146), order=0)
    region = Region(label=Label.TABLE, bbox=BBox(x0=0, y0=100, x1=340, y1=150), score=0.8,
                    source_class="table")
    out, _ = label_blocks([para], [region], 0.5, _words(lines))
    assert [b.label for b in out] == [Label.TEXT.value]

    cells = {"Name": (10, 110), "Type": (150, 110), "ID": (10, 130), "INT": (150, 130),
             "Who": (10, 150), "TEXT": (150, 150)}
    blocks = [Block(label=Label.TEXT.value, content=t, order=n,
                    bbox=BBox(x0=x, y0=y, x1=x + 30, y1=y + 10))
              for n, (t, (x, y)) in enumerate(cells.items())]
    words = [WordBox(text=t, x0=x, y0=y, x1=x + 30, y1=y + 10) for t, (x, y) in cells.items()]
    region = Region(label=Label.TABLE, bbox=BBox(x0=0, y0=100, x1=300, y1=170), score=0.8,
                    source_class="table")
    out, _ = label_blocks(blocks, [region], 0.5, words)
    assert [b.label for b in out] == [Label.TABLE.value] and out[0].cells is not None
