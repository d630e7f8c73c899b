"""The three output parsers on recorded samples in each model's documented format."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.models import KNOWN_LABELS
from folio.parsers import chandra, markdown, olmocr
from folio.parsers._html import html_to_markdown

DATA = Path(__file__).parent / "data" / "model_outputs"
W, H = 612.0, 792.0


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_chandra1_blocks_labels_and_boxes() -> None:
    blocks, md = chandra.parse(sample("chandra1_page.html"), width_pt=W, height_pt=H, bbox_scale=1024)
    labels = [b.label for b in blocks]
    assert labels == ["Page-Header", "Section-Header", "Text", "List-Item", "List-Item",
                      "List-Item", "Table", "Caption", "Equation-Block", "Figure", "Footnote",
                      "Page-Footer"]
    assert [b.order for b in blocks] == list(range(len(blocks)))
    # the model's List-Group is one List-Item an item, nested by its indentation
    items = [(b.marker, b.level, b.content) for b in blocks[3:6]]
    assert items == [("-", 1, "West: new cluster online"),
                     ("-", 1, "East: backup policy reviewed"), ("-", 2, "weekly restore tests")]
    assert blocks[3].bbox == blocks[5].bbox  # each item keeps the group's box
    assert all(b.label in KNOWN_LABELS for b in blocks)
    header = blocks[1].bbox
    assert header is not None  # [72, 110, 952, 170] of 1024 -> points
    assert header.x0 == pytest.approx(72 / 1024 * W) and header.y1 == pytest.approx(170 / 1024 * H)
    table = blocks[6].content
    assert table.startswith("<table>") and 'colspan="2"' in table and "North<br/>(restated)" in table
    assert "$r = \\frac{\\Delta R}{R_0}$" in blocks[2].content and "**region**" in blocks[2].content
    assert blocks[8].content == "$$R_{total} = \\sum_i R_i$$"  # chandra's block-math form
    assert "  - weekly restore tests" in md
    # page headers and footers are blocks but not page markdown
    assert "Confidential" not in md and "# Regional revenue review" in md


def test_chandra2_scale_unknown_labels_and_blank_page() -> None:
    blocks, md = chandra.parse(sample("chandra2_page.html"), width_pt=W, height_pt=H, bbox_scale=1000)
    labels = [b.label for b in blocks]
    assert labels == ["Section-Header", "Text", "Code-Block", "Figure", "Form", "Text", "Text"]
    first = blocks[0].bbox
    assert first is not None and first.x1 == pytest.approx(930 / 1000 * W)
    assert "```\nfor key in bucket.list(prefix):\n    process(key)\n```" in md
    assert blocks[4].content.split() == ["Approved", "Rejected"]  # as chandra: inputs dropped
    assert "Label the parser has never seen." in md  # unknown label -> Text, kept


def test_chandra_truncated_output_and_loose_text() -> None:
    text = sample("chandra1_page.html")
    cut = text[: text.index("Table 1: revenue") + 12]  # a generation stopped mid-div
    blocks, _ = chandra.parse(cut, width_pt=W, height_pt=H)
    assert blocks[-1].label == "Caption" and blocks[-1].content.startswith("Table 1")
    blocks, md = chandra.parse("Just text, no divs <b>at all</b>", width_pt=W, height_pt=H)
    assert [(b.label, b.bbox) for b in blocks] == [("Text", None)] and "**at all**" in md


def test_chandra_bad_boxes_become_none() -> None:
    html = ('<div data-bbox="oops" data-label="Text">a</div>'
            '<div data-bbox="10 10 10 10" data-label="Text">b</div>'
            '<div data-bbox="[900, 900, 100, 100]" data-label="Text">c</div>')
    blocks, _ = chandra.parse(html, width_pt=W, height_pt=H)
    assert blocks[0].bbox is None and blocks[1].bbox is None
    box = blocks[2].bbox  # reversed corners are reordered
    assert box is not None and box.x0 < box.x1 and box.y0 < box.y1


def test_olmocr_front_matter_markdown_and_html_table() -> None:
    meta, body = olmocr.split_front_matter(sample("olmocr2_page.md"))
    assert meta == {"primary_language": "en", "is_rotation_valid": True, "rotation_correction": 0,
                    "is_table": False, "is_diagram": False}
    assert body.startswith("# Network latency audit")
    blocks, md = olmocr.parse(sample("olmocr2_page.md"), width_pt=W, height_pt=H, image_px=(1000, 1294))
    labels = [b.label for b in blocks]
    assert labels == ["Title", "Text", "Section-Header", "Table", "Text", "Equation-Block", "Figure",
                      "List-Item", "List-Item"]  # a markdown list: one block an item
    assert all(b.marker is not None and b.level == 1 for b in blocks[7:])
    assert blocks[3].content.startswith("<table><tr><th>Server</th>")
    fig = blocks[6].bbox  # page_100_500_400_300.png in image pixels
    assert fig is not None and fig.x0 == pytest.approx(100 * W / 1000) and fig.y1 == pytest.approx(800 * H / 1294)
    assert not md.startswith("---") and "primary_language" not in md


def test_olmocr_without_or_with_broken_front_matter() -> None:
    assert olmocr.split_front_matter("no front matter")[0] == {}
    meta, body = olmocr.split_front_matter("---\nprimary_language: en\nstill going")
    assert meta == {} and body.startswith("---")
    blocks, _ = olmocr.parse("---\nprimary_language: null\n---\n", width_pt=W, height_pt=H)
    assert blocks == []  # a blank page


def test_generic_markdown_pipe_table_lists_and_title() -> None:
    blocks, md = markdown.parse(sample("generic_page.md"), width_pt=W, height_pt=H)
    assert [b.label for b in blocks] == ["Title", "Text", "Section-Header", "Table", "List-Item",
                                         "List-Item", "Text"]
    assert [(b.marker, b.content) for b in blocks[4:6]] == [
        ("1.", "Pay by bank transfer."), ("2.", "Quote the invoice number.")]
    assert all(b.bbox is None for b in blocks)
    assert blocks[3].content == (
        "<table><thead><tr><th>Item</th><th>Qty</th><th>Price</th></tr></thead><tbody>"
        "<tr><td>Backup archive (TB)</td><td>12</td><td>240.00</td></tr>"
        "<tr><td>Restore test | weekly</td><td>4</td><td>80.00</td></tr></tbody></table>"
    )
    assert "1. Pay by bank transfer.\n2. Quote the invoice number." in md


def test_generic_markdown_wrapped_in_a_fence_and_unclosed_blocks() -> None:
    blocks, _ = markdown.parse("```markdown\n# T\n\ntext\n```", width_pt=W, height_pt=H)
    assert [b.label for b in blocks] == ["Title", "Text"]
    blocks, _ = markdown.parse("intro\n\n```python\nx = 1\n", width_pt=W, height_pt=H)
    assert blocks[-1].label == "Code-Block" and "x = 1" in blocks[-1].content
    blocks, _ = markdown.parse("$$\na + b", width_pt=W, height_pt=H)
    assert blocks[0].label == "Equation-Block"


def test_html_to_markdown_escapes_table_text_and_drops_scripts() -> None:
    md = html_to_markdown("<table><tr><td onclick='x()'>a &lt; b <script>bad()</script></td></tr></table>"
                          "<h3>Head</h3><ol><li>one</li><li>two</li></ol><a href='u'>link</a>")
    assert "<td>a &lt; b</td>" in md and "onclick" not in md and "bad()" not in md
    assert "### Head" in md and "1. one\n2. two" in md and "[link](u)" in md


@pytest.mark.parametrize("garbage", ["", "<<<>>>", "<div data-label='Text'>" * 50, "| a |\n|---|",
                                     "\x00\x01 binary", "---\n---\n---", "<table><tr><td>"])
def test_parsers_never_raise(garbage: str) -> None:
    for parse in (chandra.parse, olmocr.parse, markdown.parse):
        blocks, md = parse(garbage, width_pt=W, height_pt=H)
        assert isinstance(md, str) and all(b.label in KNOWN_LABELS for b in blocks)
