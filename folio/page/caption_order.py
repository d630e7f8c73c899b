"""Captions read beside their table or figure.

Why: a page's reading order comes from its text (the text layer's XY cut, tesseract's
paragraphs), which knows nothing of what a caption belongs to. A caption set under a
figure in one column, or over a table that spans both, can land a column away from it,
and a retrieval chunk then holds "Figure 3: ..." with text it does not describe. Once the
layout model has labelled the blocks, each Caption moves next to the Table or Figure it
sits on: right before it when above, right after it when below.

A caption belongs to the nearest table or figure that shares its horizontal extent and
lies within :data:`MAX_GAP_LINES` of the caption's own line height above or below it;
a caption with none stays where the text put it. The rule reads geometry only, never the
caption's words ("Table 2" or "Fig." vary by language and style).
"""

from __future__ import annotations

from collections.abc import Sequence

from folio.models import BBox, Block, Label

#: how far (in the caption's own line heights) a caption may sit from what it describes;
#: captions are typeset a line or two away, body text between them is further off
MAX_GAP_LINES = 3.0
#: the share of the narrower of the two that must overlap horizontally
MIN_X_OVERLAP = 0.5
_OBJECTS = frozenset({Label.TABLE.value, Label.FIGURE.value})


def _line_height(block: Block) -> float:
    """The caption's height per line (its box over its lines), at least 6 pt."""
    assert block.bbox is not None
    lines = max(1, block.content.strip().count("\n") + 1)
    return max(6.0, (block.bbox.y1 - block.bbox.y0) / lines)


def _x_overlap(a: BBox, b: BBox) -> float:
    narrower = min(a.x1 - a.x0, b.x1 - b.x0)
    if narrower <= 0:
        return 0.0
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) / narrower


def _gap(caption: BBox, target: BBox) -> tuple[float, bool]:
    """(vertical distance, caption above the target); overlapping boxes are 0 apart."""
    above = (caption.y0 + caption.y1) / 2 < (target.y0 + target.y1) / 2
    gap = target.y0 - caption.y1 if above else caption.y0 - target.y1
    return max(0.0, gap), above


def owner(caption: Block, blocks: Sequence[Block]) -> tuple[Block, bool] | None:
    """The table or figure ``caption`` describes and whether it sits above it; None
    when no table or figure is close enough under or over it."""
    if caption.bbox is None:
        return None
    limit = MAX_GAP_LINES * _line_height(caption)
    best: tuple[float, Block, bool] | None = None
    for block in blocks:
        if block.label not in _OBJECTS or block.bbox is None:
            continue
        if _x_overlap(caption.bbox, block.bbox) < MIN_X_OVERLAP:
            continue
        gap, above = _gap(caption.bbox, block.bbox)
        if gap <= limit and (best is None or gap < best[0]):
            best = (gap, block, above)
    return None if best is None else (best[1], best[2])


def captions_beside(blocks: Sequence[Block]) -> tuple[list[Block], int]:
    """``blocks`` with each caption moved next to its table or figure (``order``
    renumbered when anything moved), and how many captions moved."""
    ordered = sorted(blocks, key=lambda b: b.order)
    placed: list[tuple[Block, Block, bool]] = []
    for block in ordered:
        if block.label == Label.CAPTION.value:
            found = owner(block, ordered)
            if found is not None:
                placed.append((block, *found))
    if not placed:
        return list(blocks), 0
    moving = {id(caption) for caption, _, _ in placed}
    before: dict[int, list[Block]] = {}
    after: dict[int, list[Block]] = {}
    for caption, target, above in placed:
        (before if above else after).setdefault(id(target), []).append(caption)
    out: list[Block] = []
    for block in ordered:
        if id(block) in moving:
            continue
        out.extend(before.get(id(block), []))
        out.append(block)
        out.extend(after.get(id(block), []))
    was = {id(b): i for i, b in enumerate(ordered)}
    moved = sum(1 for i, b in enumerate(out) if id(b) in moving and was[id(b)] != i)
    if not moved:
        return list(blocks), 0
    renumbered = [b if b.order == i else b.model_copy(update={"order": i})
                  for i, b in enumerate(out)]
    return renumbered, moved
