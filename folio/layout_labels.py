"""Block labels from layout regions: each block takes the label of the region it lies in.

Why: the CPU engines (the text layer, tesseract) find words, lines and paragraphs but
not what a paragraph is; a layout detector (folio.layout) finds regions and their kind
but no text. A block belongs to a region when most of its area lies inside it
(``min_cover``, a share of the block, so a short line inside a large table counts fully
and a paragraph that merely touches a figure does not).

Overlaps: the detector suppresses duplicates within a class only, so a table and the
text regions it also sees inside it both reach here. :data:`PRIORITY` settles them: the
more specific kind wins (a table's cells are "text" to the model as well), then the region
covering more of the block, then the higher score. The blocks of one table become one
block (:data:`MERGED`). When the engine gave word boxes, the words inside that block's
members become a grid (:mod:`folio.table_grid`): the block carries its cells and its
content is an HTML ``<table>``; without words, or when the words make no grid, its text
stays one line per member.

Text regions never replace a label the engine gave: CDLA's "text" is the catch-all (it
has no list class), so a List-Item or a heading the engine found from font sizes would
only lose information. Blocks without a box or without a covering region keep their
label. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from folio.models import BBox, Block, Label, Region, TableCell, WordBox
from folio.quality import normalize_words
from folio.table_grid import build_grid, grid_html, words_inside

__all__ = ["MERGED", "PRIORITY", "cover", "label_blocks", "merge_blocks", "region_for",
           "with_grid"]

#: the kind that wins when regions of several kinds cover a block, most specific first
PRIORITY: tuple[Label, ...] = (
    Label.TABLE,
    Label.FIGURE,
    Label.CAPTION,
    Label.PAGE_HEADER,
    Label.PAGE_FOOTER,
    Label.TITLE,
    Label.SECTION_HEADER,
    Label.EQUATION,
    Label.TEXT,
)
_RANK = {label: rank for rank, label in enumerate(PRIORITY)}


def cover(block: BBox, region: BBox) -> float:
    """The share of ``block``'s area inside ``region`` (0..1); 0 for an empty block."""
    area = (block.x1 - block.x0) * (block.y1 - block.y0)
    if area <= 0:
        return 0.0
    width = min(block.x1, region.x1) - max(block.x0, region.x0)
    height = min(block.y1, region.y1) - max(block.y0, region.y0)
    return max(0.0, width) * max(0.0, height) / area


def region_for(box: BBox, regions: Sequence[Region], min_cover: float) -> Region | None:
    """The region whose label ``box`` takes: of those covering at least ``min_cover`` of
    it, the first by :data:`PRIORITY`, then by cover, then by score; None if none does."""
    best: tuple[int, float, float] | None = None
    chosen: Region | None = None
    for region in regions:
        share = cover(box, region.bbox)
        if share < min_cover:
            continue
        key = (-_RANK.get(region.label, len(PRIORITY)), share, region.score)
        if best is None or key > best:
            best, chosen = key, region
    return chosen


#: kinds whose blocks inside one region become one block: an engine cuts a table into a
#: block per cell, which as separate blocks make one-word chunks that mean nothing on
#: their own. Figures are labelled but not joined: a false figure over body text (a
#: page the model misreads) would have its paragraphs interleaved row by row
MERGED: frozenset[Label] = frozenset({Label.TABLE})


def label_blocks(blocks: Sequence[Block], regions: Sequence[Region], min_cover: float,
                 words: Sequence[WordBox] = (), rulings: Sequence[BBox] = ()
                 ) -> tuple[list[Block], int]:
    """``blocks`` relabelled from ``regions`` (changed ones copied), those sharing one
    :data:`MERGED` region joined into one, a table given its grid from ``words`` and
    ``rulings`` (the page's, in points) when they make one; and how many blocks
    changed."""
    out: list[Block] = []
    changed = 0
    groups: dict[int, list[Block]] = {}
    for block in blocks:
        region = region_for(block.bbox, regions, min_cover) if block.bbox is not None else None
        label = block.label
        if region is not None and not (region.label is Label.TEXT and label != Label.TEXT.value):
            label = region.label.value
        if label != block.label:
            changed += 1
            block = block.model_copy(update={"label": label})
        if region is not None and region.label in MERGED and label == region.label.value:
            groups.setdefault(id(region), []).append(block)
        out.append(block)
    for members in groups.values():
        merged = merge_blocks(members) if len(members) > 1 else members[0]
        gridded = with_grid(merged, members, words, rulings)
        if gridded is merged and len(members) < 2:
            continue
        drop = {id(b) for b in members[1:]}
        out = [gridded if b is members[0] else b for b in out if id(b) not in drop]
        changed += len(members)
    return out, changed


def with_grid(table: Block, members: Sequence[Block], words: Sequence[WordBox],
              rulings: Sequence[BBox]) -> Block:
    """``table`` with its grid (cells, and an HTML table as content) from the words
    inside its ``members``' boxes; ``table`` itself when they make no grid."""
    boxes = [m.bbox for m in members if m.bbox is not None]
    if table.bbox is None or not boxes:
        return table
    grid = build_grid(words_inside(words, boxes), _within(rulings, table.bbox))
    if grid is None or _lost_share(table.content, grid.cells) > MAX_LOST_SHARE:
        return table
    return table.model_copy(update={"cells": grid.cells, "content": grid_html(grid)})


#: a grid missing more than this share of its block's words is refused: the words came
#: from the table region (grown a little), and a block the region covers only in part
#: has words outside it; the block's text is kept whole instead
MAX_LOST_SHARE = 0.02


def _lost_share(text: str, cells: Sequence[TableCell]) -> float:
    """The share of ``text``'s words (as a multiset) that no cell holds."""
    want = Counter(normalize_words(text))
    if not want:
        return 0.0
    have = Counter(normalize_words(" ".join(c.text for c in cells)))
    return sum((want - have).values()) / sum(want.values())


def _within(rulings: Sequence[BBox], box: BBox, margin: float = 4.0) -> list[BBox]:
    """The rulings whose middle lies in ``box`` grown by ``margin`` points (a table's
    frame is drawn just outside its text)."""
    return [r for r in rulings
            if box.x0 - margin <= (r.x0 + r.x1) / 2 <= box.x1 + margin
            and box.y0 - margin <= (r.y0 + r.y1) / 2 <= box.y1 + margin]


def merge_blocks(members: Sequence[Block]) -> Block:
    """One block of several (one label): the first one's place in the reading order, the
    union of their boxes, their text one line each in the engine's reading order (the
    engine's order, not a guess at rows: multi-line cells make rows a grid question, left
    to a table-structure step), the mean of their confidences."""
    box = members[0].bbox
    for member in members[1:]:
        if box is not None and member.bbox is not None:
            box = box.union(member.bbox)
    confidences = [m.confidence for m in members if m.confidence is not None]
    return Block(label=members[0].label, bbox=box, content=_lines(members),
                 order=min(m.order for m in members),
                 confidence=sum(confidences) / len(confidences) if confidences else None)


def _lines(members: Sequence[Block]) -> str:
    ordered = sorted(members, key=lambda m: m.order)
    return "\n".join(text for text in (" ".join(m.content.split()) for m in ordered) if text)
