"""One document's heading levels made consistent, once every page is levelled. Pure.

Why: each heading's level comes from its own signals (folio.hierarchy.levels: outline,
numbering, the model's ``#`` marks, type size), page by page. Taken one at a time they
can disagree as a reader never would: a title set in bold at the body's size gets a
deeper level than the larger section headings under it (docling's multi_page.pdf: the
title ``####``, its sections ``###``), a document whose headings are all bold body text
starts at level 4, a document that uses only levels 1 and 3 leaves 2 empty. So, over the
whole document, in reading order:

1. **A title is never deeper than its sections.** The document's first heading, with no
   body text before it and no numbering of its own, deeper than the shallowest of the
   headings after it, is the document's title: it goes one level above them.
2. **The shallowest heading is level 1, and no level is left empty**: the levels used
   are renumbered 1, 2, 3, ... in their order (the relative structure is kept).
3. **No jump beyond the structure**: a heading is at most one level under the heading
   before it (the first heading of a document is level 1): ``1`` then ``1.1.1`` with no
   ``1.1`` reads as 1 then 2.

Heading paths in the chunks follow (folio.output.chunking levels the document the same
way before it chunks).
"""

from __future__ import annotations

from collections.abc import Sequence

from folio.hierarchy.numbering import numbering_level
from folio.models import HEADING_LABELS, Block, Label, PageOutcome, PageResult

#: blocks that are the document's body text: a heading after one is no title
_BODY = frozenset({Label.TEXT.value, Label.LIST_ITEM.value, Label.TABLE.value,
                   Label.CODE.value})


def _reading_order(pages: Sequence[PageResult]) -> list[Block]:
    return [block for page in sorted(pages, key=lambda p: p.index)
            if page.outcome != PageOutcome.QUARANTINED
            for block in sorted(page.blocks, key=lambda b: b.order)]


def order_levels(pages: Sequence[PageResult]) -> None:
    """Make the heading levels of a document's pages consistent (see the module's
    docstring), in place; headings without a level are left alone."""
    blocks = _reading_order(pages)
    heads = [b for b in blocks if b.label in HEADING_LABELS and b.level is not None
             and b.content.strip()]
    if not heads:
        return
    levels = [int(b.level or 1) for b in heads]
    if _is_title(heads[0], blocks, levels):
        levels[0] = min(levels[1:]) - 1
    ranks = {level: rank for rank, level in enumerate(sorted(set(levels)), start=1)}
    previous = 0
    for block, level in zip(heads, levels, strict=True):
        block.level = max(1, min(ranks[level], previous + 1, 6))
        previous = block.level


def _is_title(first: Block, blocks: Sequence[Block], levels: Sequence[int]) -> bool:
    """Whether the first heading is a title set deeper than its sections: nothing of the
    body before it, no numbering, deeper than every later heading's shallowest."""
    if len(levels) < 2 or levels[0] <= min(levels[1:]):
        return False
    if numbering_level(first.content.lstrip("#").strip()) is not None:
        return False
    for block in blocks:
        if block is first:
            return True
        if block.label in _BODY and block.content.strip():
            return False
    return False
