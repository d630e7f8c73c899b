"""Chandra's output: HTML layout blocks, ``<div data-bbox="x0 y0 x1 y1" data-label="Text">``.

The page's markdown is made as Chandra's own pipeline makes it (chandra/output.py,
chandra-ocr 0.2.0 for Chandra 2 and 0.1.8 for Chandra 1 (which keeps an <img> without
src in a text block), Apache-2.0: ``parse_html`` then ``parse_markdown``), with the same
libraries (BeautifulSoup's html.parser, markdownify 1.1.0) and options: the top-level
divs in order, Blank-Page skipped, Page-Header/Page-Footer left out, a Text div without
inner tags wrapped in <p>, an <img> without src dropped outside figures, figures given
Chandra's image name, markdown with ATX headings, ``-`` bullets, escaped ``* _ $``,
math as ``$...$`` / ``$$...$$``, tables kept as HTML. tests/test_conformance.py checks
the markdown against the package's own function.

Each top-level div is also one Block in reading order (label mapped to folio's, box from
0-1024 for Chandra 1 or 0-1000 for Chandra 2 to page points, its content as markdown),
headers and footers included, so chunks and citations get the model's layout.

Deliberate differences from chandra, both for answers Chandra's prompt does not ask for:
an answer with no top-level div at all (a model that forgot the layout) is converted
whole instead of giving nothing, and a box written ``[x0, y0, x1, y1]`` (the format
Chandra 1's prompt names) is read instead of becoming the whole image.

Example:
    >>> blocks, md = parse('<div data-bbox="0 0 512 100" data-label="Section-Header">'
    ...                    '<h2>Intro</h2></div>', width_pt=612, height_pt=792)
    >>> blocks[0].label, blocks[0].bbox.x1, md
    ('Section-Header', 306.0, '## Intro')
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter, re_whitespace

from folio.models import Block
from folio.parsers._common import map_label, scaled_bbox, split_lists

CHANDRA1_BBOX_SCALE = 1024
CHANDRA2_BBOX_SCALE = 1000
_FIGURES = frozenset({"Image", "Figure"})
_RUNNING_HEADS = frozenset({"Page-Header", "Page-Footer"})
_ANY_TAG = re.compile("<.+>")


class _Markdownify(MarkdownConverter):  # type: ignore[misc]  # markdownify is untyped
    """chandra/output.py's converter: math delimiters, tables as HTML, escaped $."""

    def convert_math(self, el: Tag, text: str, parent_tags: Any) -> str:
        if el.has_attr("display") and el["display"] == "block":
            return "\n$$" + text.strip() + "$$\n"
        return " $" + text.strip() + "$ "

    def convert_table(self, el: Tag, text: str, parent_tags: Any) -> str:
        return "\n\n" + str(el) + "\n\n"

    def convert_a(self, el: Tag, text: str, parent_tags: Any) -> str:
        text = re.sub(r"([\[\]()])", r"\\\1", self.escape(text))
        return str(super().convert_a(el, text, parent_tags))

    def escape(self, text: str, parent_tags: Any = None) -> str:
        return str(super().escape(text, parent_tags)).replace("$", r"\$")

    def process_text(self, el: Any, parent_tags: Any = None) -> str:
        text = str(el) or ""
        if not el.find_parent("pre"):
            text = re_whitespace.sub(" ", text)
        if not el.find_parent(["pre", "code", "kbd", "samp", "math"]):
            text = self.escape(text)
        if el.parent.name == "li" and (not el.next_sibling
                                        or el.next_sibling.name in ["ul", "ol"]):
            text = text.rstrip()
        return text


_CONVERTER = _Markdownify(
    heading_style="ATX", bullets="-", escape_misc=False, escape_underscores=True,
    escape_asterisks=True, sub_symbol="<sub>", sup_symbol="<sup>",
)


def to_markdown(html: str) -> str:
    """``html`` as Chandra's parse_markdown converts it (empty when conversion fails)."""
    try:
        return str(_CONVERTER.convert(html)).strip()
    except Exception:  # chandra gives "" too: one page's odd HTML is no crash
        return ""


def _div_html(div: Tag, label: str | None, div_idx: int, html: str, version: int) -> str:
    """The inner HTML of one top-level div after chandra's parse_html touches it (Chandra
    1's, 0.1.8, keeps an <img> without src in a text block; Chandra 2's drops it)."""
    if label in _FIGURES:
        src = f"{hashlib.md5(html.encode('utf-8')).hexdigest()}_{div_idx}_img.webp"
        img = div.find("img")
        if isinstance(img, Tag):
            img["src"] = src
        else:
            div.append(BeautifulSoup(f"<img src='{src}'/>", "html.parser"))
    elif version >= 2:
        for img_tag in div.find_all("img"):
            if not img_tag.get("src"):
                img_tag.decompose()
    if label == "Text" and not _ANY_TAG.search(str(div.decode_contents()).strip()):
        text = str(div.decode_contents()).strip()
        div.clear()
        div.append(BeautifulSoup(f"<p>{text}</p>", "html.parser"))
    return str(div.decode_contents())


def parse(
    text: str,
    *,
    width_pt: float,
    height_pt: float,
    bbox_scale: int = CHANDRA1_BBOX_SCALE,
    image_px: tuple[int, int] | None = None,
) -> tuple[list[Block], str]:
    """Blocks (bboxes in page points, top-left origin) and the page markdown."""
    del image_px  # boxes are normalized: the image size does not matter
    soup = BeautifulSoup(text, "html.parser")
    divs = [d for d in soup.find_all("div", recursive=False) if isinstance(d, Tag)]
    if not divs:
        markdown = to_markdown(text)
        return ([Block(label="Text", content=markdown, order=0)] if markdown else []), markdown
    blocks: list[Block] = []
    page_html = ""
    for div_idx, div in enumerate(divs, start=1):
        raw_label = div.get("data-label")
        label = raw_label if isinstance(raw_label, str) else None
        if label == "Blank-Page":
            continue
        raw_box = div.get("data-bbox")
        content = _div_html(div, label, div_idx, text,
                            1 if bbox_scale == CHANDRA1_BBOX_SCALE else 2)
        if label not in _RUNNING_HEADS:
            page_html += content
        block_md = to_markdown(content)
        folio_label = map_label(label)
        if not block_md and folio_label not in _FIGURES:
            continue
        bbox = scaled_bbox(raw_box if isinstance(raw_box, str) else None, scale_x=bbox_scale,
                           scale_y=bbox_scale, width_pt=width_pt, height_pt=height_pt)
        blocks.append(Block(label=folio_label, bbox=bbox, content=block_md, order=len(blocks)))
    return split_lists(blocks), to_markdown(page_html)
