"""Chandra's output: HTML layout blocks, ``<div data-bbox="x0 y0 x1 y1" data-label="Text">``.

Chandra 1 normalizes boxes to 0-1024, Chandra 2 to 0-1000 (pass ``bbox_scale``); boxes
may be written as JSON lists or space-separated. Each div becomes one Block in reading
order, its inner HTML converted to markdown (tables stay HTML). Text outside any div (a
model that forgot the layout wrapper) becomes Text blocks without a box, so nothing the
model read is dropped; a generation cut mid-div keeps what was written.

Example:
    >>> blocks, md = parse('<div data-bbox="0 0 512 100" data-label="Section-Header">'
    ...                    '<h2>Intro</h2></div>', width_pt=612, height_pt=792)
    >>> blocks[0].label, blocks[0].bbox.x1, md
    ('Section-Header', 306.0, '## Intro')
"""

from __future__ import annotations

from folio.models import Block
from folio.parsers._common import map_label, page_markdown, scaled_bbox
from folio.parsers._html import Node, parse_html, to_markdown

CHANDRA1_BBOX_SCALE = 1024
CHANDRA2_BBOX_SCALE = 1000
#: labels that carry no content worth a block
_SKIP_LABELS = frozenset({"blank-page"})


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
    blocks: list[Block] = []
    loose: list[Node] = []

    def flush_loose() -> None:
        if loose:
            content = to_markdown(Node(tag="div", children=list(loose)))
            loose.clear()
            if content:
                blocks.append(Block(label="Text", content=content, order=len(blocks)))

    def walk(node: Node) -> None:
        for child in node.children:
            if child.tag == "div" and ("data-label" in child.attrs or "data-bbox" in child.attrs):
                flush_loose()
                raw_label = child.get("data-label")
                if raw_label.strip().lower() in _SKIP_LABELS:
                    continue
                content = to_markdown(child)
                label = map_label(raw_label)
                if not content and label not in ("Figure", "Image"):
                    continue
                bbox = scaled_bbox(
                    child.get("data-bbox"), scale_x=bbox_scale, scale_y=bbox_scale,
                    width_pt=width_pt, height_pt=height_pt,
                )
                blocks.append(Block(label=label, bbox=bbox, content=content, order=len(blocks)))
            elif child.tag == "div" and _has_layout_div(child):
                flush_loose()
                walk(child)  # a wrapper around the layout divs
            else:
                loose.append(child)
        flush_loose()

    walk(parse_html(text))
    return blocks, page_markdown(blocks)


def _has_layout_div(node: Node) -> bool:
    return any(
        c.tag == "div" and ("data-label" in c.attrs or "data-bbox" in c.attrs) or _has_layout_div(c)
        for c in node.elements()
    )
