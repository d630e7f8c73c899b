"""What the three output parsers share: label mapping, box scaling, page markdown."""

from __future__ import annotations

import re

from folio.engines.markdown import blocks_to_markdown
from folio.models import KNOWN_LABELS, BBox, Block, Label
from folio.page.list_items import ItemLine, list_pieces, split_marker

#: labels other vocabularies use, mapped onto folio's; anything else becomes Text
LABEL_ALIASES: dict[str, Label] = {
    "list-group": Label.LIST_ITEM,
    "list": Label.LIST_ITEM,
    "complex-block": Label.TEXT,
    "bibliography": Label.TEXT,
    "diagram": Label.FIGURE,
    "chemical-block": Label.FIGURE,
    "picture": Label.FIGURE,
    "chart": Label.FIGURE,
    "formula": Label.EQUATION,
    "equation": Label.EQUATION,
    "code": Label.CODE,
    "header": Label.PAGE_HEADER,
    "footer": Label.PAGE_FOOTER,
    "heading": Label.SECTION_HEADER,
    "title": Label.TITLE,
}
#: Picture is folio's own (folio.figures); a model's "picture" is a Figure like any other
_CANONICAL = {label.lower(): label for label in KNOWN_LABELS if label != Label.PICTURE}
#: left out of the page markdown (kept as blocks): running heads repeat on every page and
#: pollute retrieval chunks
NOT_IN_MARKDOWN = frozenset({Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def map_label(raw: str | None) -> str:
    """folio's label for a model's label; unknown labels become ``Text``."""
    key = (raw or "").strip().lower()
    if key in _CANONICAL:
        return _CANONICAL[key]
    return LABEL_ALIASES.get(key, Label.TEXT).value


def scaled_bbox(
    raw: str | None, *, scale_x: float, scale_y: float, width_pt: float, height_pt: float
) -> BBox | None:
    """Parse ``"x0 y0 x1 y1"`` / ``"[x0, y0, x1, y1]"`` and map it to page points.

    ``scale_x``/``scale_y`` are the model's coordinate range (1024 for Chandra 1, 1000
    for Chandra 2, the image size in pixels for pixel boxes). Boxes are clamped to the
    page and reordered; a box that is not four numbers, or is empty, gives None.
    """
    if not raw or scale_x <= 0 or scale_y <= 0:
        return None
    numbers = [float(n) for n in _NUMBER.findall(raw)]
    if len(numbers) != 4:
        return None
    x0, y0, x1, y1 = numbers
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    fx, fy = width_pt / scale_x, height_pt / scale_y

    def clamp(v: float, hi: float) -> float:
        return min(max(v, 0.0), hi)

    box = BBox(
        x0=clamp(x0 * fx, width_pt), y0=clamp(y0 * fy, height_pt),
        x1=clamp(x1 * fx, width_pt), y1=clamp(y1 * fy, height_pt),
    )
    return box if box.x1 > box.x0 and box.y1 > box.y0 else None


def page_markdown(blocks: list[Block]) -> str:
    """The page's markdown: blocks in reading order, page headers and footers left out."""
    return blocks_to_markdown([b for b in blocks if b.label not in NOT_IN_MARKDOWN])


#: a markdown list's nesting is its indentation in characters; an item two or more
#: characters right of the one above is nested under it (list_items.INDENT_SHARE of 2.0)
_MARKDOWN_LINE_HEIGHT = 2.0


def split_lists(blocks: list[Block]) -> list[Block]:
    """A model's list blocks (a markdown list, Chandra's List-Group) and paragraphs whose
    lines open with bullets (``• a`` / ``• b``, which markdown would run into one
    paragraph) as one List-Item block an item, with its marker and nesting level
    (:mod:`folio.page.list_items`), lead-in lines as Text; each keeps the block's box.
    Other blocks are kept; orders are renumbered."""
    out: list[Block] = []
    for block in blocks:
        out += _split_list(block)
    for order, block in enumerate(out):
        block.order = order
    return out


def _split_list(block: Block) -> list[Block]:
    listed = block.label == Label.LIST_ITEM.value
    if block.marker is not None or not (listed or block.label == Label.TEXT.value):
        return [block]
    lines = [line for line in block.content.split("\n") if line.strip()]
    if not any(split_marker(line) for line in lines):
        return [block]
    pieces = list_pieces(
        [[ItemLine(line.strip(), len(line) - len(line.lstrip()), _MARKDOWN_LINE_HEIGHT)
          for line in lines]], trust_numbers=listed)
    if not any(piece.item for piece in pieces):
        return [block]
    out = []
    for piece in pieces:
        if piece.marker is None:
            out.append(block.model_copy(update={"label": Label.TEXT.value,
                                                "content": "\n".join(piece.texts).strip()}))
        else:
            out.append(block.model_copy(update={
                "label": Label.LIST_ITEM.value, "content": piece.content,
                "marker": piece.marker.marker, "level": piece.level}))
    return out
