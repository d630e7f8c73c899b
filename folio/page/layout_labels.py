"""Block labels from layout regions: each block takes the label of the region it lies in.

Why: the CPU engines (the text layer, tesseract) find words, lines and paragraphs but
not what a paragraph is; a layout detector (folio.page.layout) finds regions and their kind
but no text. A block belongs to a region when most of its area lies inside it
(``min_cover``, a share of the block, so a short line inside a large table counts fully
and a paragraph that merely touches a figure does not).

Overlaps: the detector suppresses duplicates within a class only, so a table and the
text regions it also sees inside it both reach here. :data:`PRIORITY` settles them: the
more specific kind wins (a table's cells are "text" to the model as well), then the region
covering more of the block, then the higher score. The blocks of one table become one
block (:data:`MERGED`). When the engine gave word boxes, the words inside that block's
members become a grid (:mod:`folio.tables.table_grid`): the block carries its cells and its
content is an HTML ``<table>``; without words, or when the words make no grid, its text
stays one line per member.

Figures that are tables: a layout model takes a shaded or colour-coded table, or one with
turned column headings, for a picture. A figure region whose blocks, leaving out the
prose it swallowed (a caption across it, a question over the table with nothing beside
it), make a grid of :data:`FIGURE_TABLE_MIN` rows and columns or more
(:func:`dense_columns`), with no word lost, is a table; charts and diagrams make no such
grid (their labels do not line up in full rows and columns) and stay figures.

Figures that are prose: a layout model takes a cover, a back cover or a page of boxed
columns for one picture. A figure region holding a paragraph of running prose (many words,
wrapped lines carrying sentences on) is no figure, since a drawing's labels are short
and sparse: its blocks take the labels the other regions or the engine give them, a
heading only where prose follows it (:func:`_prose_figure`).

Headings: a title or section-header region makes a heading only of words that read as
one (:func:`folio.page.headings.refuses_heading`: not a formula's letter, a trademark sign or
a footnote), and not of the body line under a heading the engine found in the same
region (the model's box is coarser than the engine's type sizes).

Text regions never replace a label the engine gave: CDLA's "text" is the catch-all (it
has no list class), so a List-Item or a heading the engine found from font sizes would
only lose information. Nor do figure regions replace a List-Item: a flyer, a cover or a
slide the model takes for one picture keeps its lists where its text stays text
(:mod:`folio.figures.regions`), and a real figure takes its bulleted labels in whole.
Blocks without a box or without a covering region keep their label. Pure.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence

from folio.models import HEADING_LABELS, BBox, Block, Label, Region, TableCell, WordBox, joined_box
from folio.page.headings import keeps_heading, refuses_heading
from folio.page.quality import normalize_words
from folio.page.running_heads import BAND
from folio.tables.table_grid import TableGrid, build_grid, grid_html, words_inside
from folio.tables.table_rows import lines

__all__ = ["CELL_MAX_WORDS", "FIGURE_TABLE_MIN", "MERGED", "PRIORITY", "cover",
           "dense_columns", "label_blocks", "merge_blocks", "region_for", "with_grid"]

#: a list item or code the engine found is never made a heading by a title region (a short
#: bold item, a one-line command look like headings to a layout model)
_STRUCTURED = frozenset({Label.LIST_ITEM.value, Label.CODE.value})
_HEADINGS = frozenset({Label.TITLE, Label.SECTION_HEADER})

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
#: a figure whose words make a grid of at least this many rows and columns is a table
FIGURE_TABLE_MIN = 3
#: a block of more words than this inside a figure, across at least PROSE_WIDTH of it,
#: or over or under the rest with nothing beside it, is prose (a caption), not a cell
CELL_MAX_WORDS = 12
PROSE_WIDTH = 0.6
#: a vertical gap of this many line heights ends a table found in a figure
TABLE_GAP = 3.0


def label_blocks(blocks: Sequence[Block], regions: Sequence[Region], min_cover: float,
                 words: Sequence[WordBox] = (), rulings: Sequence[BBox] = (),
                 page_height: float = 0.0) -> tuple[list[Block], int]:
    """``blocks`` relabelled from ``regions`` (changed ones copied), those sharing one
    :data:`MERGED` region joined into one, a table given its grid from ``words`` and
    ``rulings`` (the page's, in points) when they make one; and how many blocks
    changed. With the ``page_height`` known, a table region's members out in the page's
    head or foot band are left out of it (:func:`_beyond_table`)."""
    out: list[Block] = []
    changed = 0
    groups: dict[int, list[Block]] = {}
    frames: dict[int, BBox] = {}
    originals: dict[int, Block] = {}
    figures: dict[int, tuple[Region, list[tuple[Block, Block]]]] = {}
    heads = [b.bbox for b in blocks if b.bbox is not None and b.label in HEADING_LABELS]
    for original in blocks:
        block = original
        region = region_for(block.bbox, regions, min_cover) if block.bbox is not None else None
        label = block.label
        if region is not None and not (
                _keeps_engine_label(label, region.label)
                or (label == Label.LIST_ITEM.value and region.label is Label.FIGURE)
                or keeps_heading(label, block.content, block.bbox, region, regions, cover,
                                 min_cover)
                or refuses_heading(label, block.content, region, heads, cover, min_cover)):
            label = region.label.value
        if label != block.label:
            changed += 1
            block = block.relabelled(label)
        if region is not None and region.label in MERGED and label == region.label.value:
            groups.setdefault(id(region), []).append(block)
            frames[id(region)] = region.bbox
            originals[id(block)] = original
        if region is not None and region.label is Label.FIGURE:
            figures.setdefault(id(region), (region, []))[1].append((original, block))
        out.append(block)
    for region, pairs in figures.values():
        table = _figure_table(region, pairs, regions, min_cover, words, rulings)
        if table is None:
            freed = _prose_figure(region, pairs, regions, min_cover, words)
            out = [freed.get(id(b), b) for b in out]
            continue
        cells, swap = table
        out = [swap.get(id(b), b) for b in out]
        groups[id(region)] = cells
        frames[id(region)] = region.bbox
    for key, members in list(groups.items()):
        beyond = _beyond_table(members, page_height)
        if beyond:
            rest = [r for r in regions if id(r) != key]
            swap = {id(b): _outside(originals.get(id(b), b), rest, min_cover) for b in beyond}
            out = [swap.get(id(b), b) for b in out]
            groups[key] = members = [b for b in members if id(b) not in swap]
            if not members:
                continue
        if words_make_no_grid(members, words, rulings, frames.get(key)):
            # prose (or a code listing) the model took for a table: its blocks keep the
            # labels the other regions or the engine give them, not "Table", which
            # promises a table's rows and cells (a chunk of kind table, an HTML table)
            rest = [r for r in regions if id(r) != key]
            swap = {id(b): _outside(originals.get(id(b), b), rest, min_cover) for b in members}
            out = [swap.get(id(b), b) for b in out]
            continue
        merged = merge_blocks(members) if len(members) > 1 else members[0]
        gridded = with_grid(merged, members, words, rulings, frames.get(key))
        if gridded is merged and len(members) < 2:
            continue
        drop = {id(b) for b in members[1:]}
        out = [gridded if b is members[0] else b for b in out if id(b) not in drop]
        changed += len(members)
    return out, changed


def _figure_table(region: Region, pairs: Sequence[tuple[Block, Block]],
                  regions: Sequence[Region], min_cover: float, words: Sequence[WordBox],
                  rulings: Sequence[BBox]) -> tuple[list[Block], dict[int, Block]] | None:
    """Whether a figure region's blocks (``pairs``: each as the engine gave it and as
    labelled) are a table (see the module's docstring). If so, its cell blocks labelled
    Table, and every labelled block's replacement by id: the cells, and each prose block
    with the label the other regions give it; None when they make no grid of
    :data:`FIGURE_TABLE_MIN` rows and columns."""
    width = region.bbox.x1 - region.bbox.x0
    stack = _largest_stack([b for _, b in pairs if not _prose(b, width)])
    cells = [b for b in stack if not _lead(b, stack)]
    if len(cells) < FIGURE_TABLE_MIN ** 2 or not words:
        return None
    if any(_long(b) and _wrapped_prose(b, words) for b in cells):
        return None  # a page's column of prose beside headings (a cover), not a table
    boxes = [b.bbox for b in cells if b.bbox is not None]
    grid = build_grid(words_inside(words, boxes), _within(rulings, region.bbox))
    if grid is None or dense_columns(grid) < FIGURE_TABLE_MIN:
        return None
    if _lost_share(" ".join(b.content for b in cells), grid.cells) > MAX_LOST_SHARE:
        return None
    rest = [r for r in regions if r is not region]
    swap: dict[int, Block] = {}
    tables: list[Block] = []
    for original, block in pairs:
        if any(block is c for c in cells):
            tables.append(block.relabelled(Label.TABLE.value))
            swap[id(block)] = tables[-1]
            continue
        swap[id(block)] = _outside(original, rest, min_cover)
    return tables, swap


def _prose_figure(region: Region, pairs: Sequence[tuple[Block, Block]],
                  regions: Sequence[Region], min_cover: float, words: Sequence[WordBox]
                  ) -> dict[int, Block]:
    """A figure region that holds running prose is no figure: a paragraph of
    :data:`CELL_MAX_WORDS` words or more whose wrapped lines carry sentences on
    (:func:`_wrapped_prose`) is text, which a drawing's labels never are (short, sparse).
    A layout model takes a cover, a back cover or a page of boxed columns for one picture.
    Then each of the region's blocks (``pairs``: as the engine gave it and as labelled)
    takes the label the other regions or the engine give it (:func:`_outside`), a heading
    only where it heads prose (:func:`_heads_prose`): a bold label standing alone is a
    side note or a diagram's box, a heading is followed by the text it names. Returns
    each relabelled block's replacement by id; empty when the region holds no prose."""
    prose = [o for o, _ in pairs
             if o.label == Label.TEXT.value and _long(o) and _wrapped_prose(o, words)]
    if not prose:
        return {}
    rest = [r for r in regions if r is not region]
    others = [o for o, _ in pairs]
    swap: dict[int, Block] = {}
    for original, block in pairs:
        freed = _outside(original, rest, min_cover)
        if freed.label in HEADING_LABELS and not _heads_prose(freed, others, prose, words):
            freed = freed.relabelled(Label.TEXT.value)
        swap[id(block)] = freed
    return swap


def _heads_prose(heading: Block, blocks: Sequence[Block], prose: Sequence[Block],
                 words: Sequence[WordBox]) -> bool:
    """Whether the first of ``blocks`` under ``heading`` in its column (overlapping half
    the narrower width) is one of the ``prose`` paragraphs, within :data:`TABLE_GAP` of
    the heading's line heights."""
    box = heading.bbox
    if box is None:
        return False
    under = [b for b in blocks if b is not heading and b.bbox is not None
             and b.bbox.y0 >= box.y1 - 1.0 and _overlap_x(box, b.bbox)]
    if not under:
        return False
    first = min(under, key=lambda b: b.bbox.y0 if b.bbox else 0.0)
    assert first.bbox is not None
    line = (box.y1 - box.y0) / max(1, len(lines(words_inside(words, [box]))))
    return any(first is p for p in prose) and first.bbox.y0 - box.y1 <= TABLE_GAP * line


def _overlap_x(a: BBox, b: BBox) -> bool:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    return width >= 0.5 * min(a.x1 - a.x0, b.x1 - b.x0)


def _keeps_engine_label(label: str, region: Label) -> bool:
    """Whether a region of kind ``region`` leaves the engine's ``label`` as it is: a text
    region any label but Text (CDLA's catch-all), a heading region a list item or code."""
    return ((region is Label.TEXT and label != Label.TEXT.value)
            or (label in _STRUCTURED and region in _HEADINGS))


def _outside(original: Block, rest: Sequence[Region], min_cover: float) -> Block:
    """A block left out of a table: the label the other regions (``rest``) give it, or
    the engine's when none does, or only a figure or a table would, or a region that
    :func:`label_blocks` would not let replace it (a text region, a title over a list
    item): a list item stays one, with its marker."""
    again = region_for(original.bbox, rest, min_cover) if original.bbox is not None else None
    if (again is None or again.label in (Label.FIGURE, Label.TABLE)
            or _keeps_engine_label(original.label, again.label)):
        return original
    return original.relabelled(again.label.value)


def _beyond_table(members: Sequence[Block], page_height: float) -> list[Block]:
    """The members of a table region that lie apart from the table in the page's head or
    foot band (:data:`folio.page.running_heads.BAND`): a run of them cut off from the rest
    by a gap of over :data:`TABLE_GAP` line heights. A detector's table region drawn to
    the page's edge swallows the page number or the running footer below the table;
    left in, they become a row of the grid and are lost to the running-head rules.
    Empty when ``page_height`` is unknown."""
    if page_height <= 0 or len(members) < 2:
        return []
    runs = _stacks(members)
    if len(runs) < 2:
        return []
    top, bottom = BAND * page_height, (1 - BAND) * page_height
    main = max(runs, key=len)
    return [b for run in runs if run is not main and all(
        b.bbox is not None and (b.bbox.y1 <= top or b.bbox.y0 >= bottom) for b in run)
        for b in run]


def dense_columns(grid: TableGrid) -> int:
    """How many columns hold a cell of their own in at least half the rows below the
    head: a table's columns are filled row after row; a form, a list with tick boxes or
    a diagram's labels leave all but one or two columns mostly empty."""
    body = grid.rows - grid.header_rows
    if body < FIGURE_TABLE_MIN - 1:
        return 0
    filled: Counter[int] = Counter(c.col for c in grid.cells
                                   if c.col_span == 1 and c.row >= grid.header_rows)
    return sum(1 for n in filled.values() if n >= body / 2)


def _largest_stack(blocks: list[Block]) -> list[Block]:
    """The largest run of ``blocks`` without a vertical gap over :data:`TABLE_GAP` line
    heights: a table's rows follow one another, and a running footer or a note far
    below it, inside the same figure region, is not one of them."""
    return max(_stacks(blocks), key=len)


def _stacks(blocks: Sequence[Block]) -> list[list[Block]]:
    """``blocks`` with boxes, top to bottom, in runs cut at vertical gaps over
    :data:`TABLE_GAP` line heights (the median block height)."""
    boxed = sorted((b for b in blocks if b.bbox is not None),
                   key=lambda b: b.bbox.y0 if b.bbox else 0.0)
    if not boxed:
        return [[]]
    line = statistics.median(b.bbox.y1 - b.bbox.y0 for b in boxed if b.bbox)
    runs: list[list[Block]] = [[]]
    bottom = -math.inf
    for block in boxed:
        assert block.bbox is not None
        if runs[-1] and block.bbox.y0 - bottom > TABLE_GAP * line:
            runs.append([])
        runs[-1].append(block)
        bottom = max(bottom, block.bbox.y1)
    return runs


def _prose(block: Block, width: float) -> bool:
    """A paragraph, not a cell: many words across most of the region's ``width`` (a
    caption the figure region swallowed; a long cell stays narrow)."""
    box = block.bbox
    return (_long(block) and box is not None
            and box.x1 - box.x0 >= PROSE_WIDTH * width)


def _lead(block: Block, stack: Sequence[Block]) -> bool:
    """A paragraph over or under the table, not a cell: many words, first or last of the
    ``stack``, with no block beside it (a question above a checklist, a note under it, in
    a figure region drawn wider than the page's text column; a long cell has the other
    cells of its row beside it)."""
    box = block.bbox
    if not _long(block) or box is None:
        return False
    others = [o.bbox for o in stack if o is not block and o.bbox is not None]
    if any(_beside(box, o) for o in others):
        return False
    return all(o.y0 >= box.y1 for o in others) or all(o.y1 <= box.y0 for o in others)


def _long(block: Block) -> bool:
    return len(block.content.split()) > CELL_MAX_WORDS


def _wrapped_prose(block: Block, words: Sequence[WordBox]) -> bool:
    """Whether ``block`` is running prose: :data:`FIGURE_TABLE_MIN` lines or more, most
    of those after the first carrying a sentence on (starting in lower case). A cell's
    text wraps too, but a figure region whose blocks hold such paragraphs beside short
    headings is a cover or a page of columns: its lines line up with the headings as a
    grid's rows would. Cells stacked into one block by the engine start their lines
    afresh ("Navigate to a room", "Search an environment")."""
    if block.bbox is None:
        return False
    found = lines(words_inside(words, [block.bbox]))
    if len(found) < FIGURE_TABLE_MIN:
        return False
    carried = sum(1 for line in found[1:] if line.words[0].text[:1].islower())
    return carried * 2 > len(found) - 1


def _beside(a: BBox, b: BBox) -> bool:
    """Whether ``b`` sits on ``a``'s lines, left or right of it (their vertical extents
    overlap, their horizontal ones do not)."""
    return min(a.y1, b.y1) > max(a.y0, b.y0) and (b.x1 <= a.x0 or b.x0 >= a.x1)


def with_grid(table: Block, members: Sequence[Block], words: Sequence[WordBox],
              rulings: Sequence[BBox], frame: BBox | None = None) -> Block:
    """``table`` with its grid (cells, and an HTML table as content) from the words
    inside its ``members``' boxes and the rulings inside its box or its region's
    (``frame``); ``table`` itself when they make no grid.

    The region counts for rulings because a ruled table's frame and its head's rule lie
    a cell's padding outside its text, often further than the few points the text's
    own box is grown by; the words still come from the blocks, which the region may
    cut."""
    boxes = [m.bbox for m in members if m.bbox is not None]
    if table.bbox is None or not boxes:
        return table
    around = table.bbox if frame is None else table.bbox.union(frame)
    grid = build_grid(words_inside(words, boxes), _within(rulings, around))
    if grid is None or _lost_share(table.content, grid.cells) > MAX_LOST_SHARE:
        return table
    return table.model_copy(update={"cells": grid.cells, "content": grid_html(grid)})


def words_make_no_grid(members: Sequence[Block], words: Sequence[WordBox],
                       rulings: Sequence[BBox], frame: BBox | None = None) -> bool:
    """Whether the words inside a table region's blocks are there but line up in no grid
    (:func:`folio.tables.table_grid.build_grid` finds no rows of cells side by side): a
    paragraph, a code listing or a list a layout model boxed as a table. False without
    words (an engine that gave none: nothing says it is no table)."""
    boxes = [m.bbox for m in members if m.bbox is not None]
    inside = words_inside(words, boxes) if boxes else []
    if not inside:
        return False
    around = joined_box(members)
    if around is not None and frame is not None:
        around = around.union(frame)
    return build_grid(inside, _within(rulings, around) if around else []) is None


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
    box = joined_box(members)
    confidences = [m.confidence for m in members if m.confidence is not None]
    return Block(label=members[0].label, bbox=box, content=_lines(members),
                 order=min(m.order for m in members),
                 confidence=sum(confidences) / len(confidences) if confidences else None)


def _lines(members: Sequence[Block]) -> str:
    ordered = sorted(members, key=lambda m: m.order)
    return "\n".join(text for text in (" ".join(m.content.split()) for m in ordered) if text)
