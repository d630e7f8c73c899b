"""Running headers and footers: lines that repeat at the top or bottom of nearby pages.

Why: a running head ("TILBURG UNIVERSITY", "Revision 2.4 P/N 119 036", "Page 7 of 40")
is on every page, so left in the text it becomes noise in every retrieval chunk and
breaks sentences that run across a page break. A layout model labels some of them;
these rules catch them on any engine's blocks, by what makes a running head one:

- it sits in the top or bottom band of the page (:data:`BAND`);
- it is short (:data:`MAX_CHARS`);
- it repeats, at about the same height, on a page at most :data:`WINDOW` pages away
  (two, so that books' alternating left/right heads count) once digits are ignored
  (page numbers change); or it is a page number on its own ("7", "- 7 -", "Page 7 of 40",
  "vii").

Decisions about page ``k`` need only pages ``k - WINDOW .. k + WINDOW``, so a document's
pages can be judged as they arrive in order (:class:`folio.chunking.ChunkStream` lags
:data:`WINDOW` pages behind), and judging a whole document gives the same answer. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from folio.engines.markdown import BLOCK_MARKDOWN_ENGINES, blocks_to_markdown
from folio.models import Block, Label, PageResult

__all__ = ["BAND", "MAX_CHARS", "WINDOW", "candidates", "head_blocks", "heads",
           "mark_running_heads"]

#: the share of the page height at the top and the bottom where running heads live
BAND = 0.12
#: longer blocks are body text even when they repeat (a repeated notice, a form field)
MAX_CHARS = 160
#: pages either side in which a repeat makes a running head
WINDOW = 2
#: the same place: centres at most this share of the page height apart
SAME_HEIGHT = 0.03

_HEAD_LABELS = frozenset({Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value})
_PAGE_NUMBER = re.compile(
    r"^[\s\-–—.(\[]*(?:page|p\.|seite|página|pagina)?\s*"
    # arabic, or a roman front-matter number up to xxxix ("civil" and "mix" are words)
    r"(?:\d{1,4}|(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3}))"
    r"(?:\s*(?:of|/|von|de|sur)\s*\d{1,4})?[\s\-–—.)\]]*$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Candidate:
    block: int  # index into the page's blocks
    band: str  # "top" or "bottom"
    key: str  # the text with digits and spacing normalised
    centre: float  # vertical centre as a share of the page height
    number: bool  # a page number on its own


def _key(text: str) -> str:
    return _SPACE.sub(" ", _DIGITS.sub("#", text.lower())).strip(" .,:;-–—|")


def candidates(page: PageResult) -> list[Candidate]:
    """The page's possible running heads: short blocks with a box in its top or bottom
    band (what :func:`heads` compares across pages; computed once a page)."""
    height = page.height_pt
    if height <= 0:
        return []
    found = []
    for n, block in enumerate(page.blocks):
        text = block.content.strip()
        box = block.bbox
        if box is None or not text or len(text) > MAX_CHARS or "\n\n" in text:
            continue
        if box.y1 <= BAND * height:
            band = "top"
        elif box.y0 >= (1 - BAND) * height:
            band = "bottom"
        else:
            continue
        key = _key(text)
        if not key:
            continue
        found.append(Candidate(block=n, band=band, key=key,
                                centre=(box.y0 + box.y1) / 2 / height,
                                number=bool(_PAGE_NUMBER.match(text))))
    return found


def heads(by_page: Sequence[list[Candidate]], k: int) -> dict[int, str]:
    """The running heads of page ``k`` as ``{block index: label}``, from the
    :func:`candidates` of the pages in reading order (only those within :data:`WINDOW`
    of ``k`` are read)."""
    near = [c for j in range(max(0, k - WINDOW), min(len(by_page), k + WINDOW + 1)) if j != k
            for c in by_page[j]]
    found: dict[int, str] = {}
    for cand in by_page[k]:
        repeated = any(o.band == cand.band and o.key == cand.key
                       and abs(o.centre - cand.centre) <= SAME_HEIGHT for o in near)
        if repeated or cand.number:
            label = Label.PAGE_HEADER if cand.band == "top" else Label.PAGE_FOOTER
            found[cand.block] = label.value
    return found


def head_blocks(pages: Sequence[PageResult], k: int) -> dict[int, str]:
    """The running heads of ``pages[k]`` (``pages`` in reading order, as many as there
    are); see :func:`heads`."""
    return heads([candidates(p) if abs(j - k) <= WINDOW else [] for j, p in enumerate(pages)], k)


def label_page(page: PageResult, found: dict[int, str], *, keep_in_markdown: bool = False
               ) -> int:
    """Label the page's running heads; unless ``keep_in_markdown``, its markdown is
    rebuilt without them where the engine made it from blocks (those labelled here and
    those a layout model labelled before). How many blocks were newly labelled."""
    changed = 0
    for n, label in found.items():
        block: Block = page.blocks[n]
        if block.label not in _HEAD_LABELS:
            block.label = label
            changed += 1
    has_heads = any(b.label in _HEAD_LABELS for b in page.blocks)
    if has_heads and not keep_in_markdown and page.engine in BLOCK_MARKDOWN_ENGINES:
        page.markdown = blocks_to_markdown(
            [b for b in page.blocks if b.label not in _HEAD_LABELS])
    return changed


def mark_running_heads(pages: Sequence[PageResult], *, keep_in_markdown: bool = False) -> int:
    """Label every running head of a document's pages (in reading order); how many
    blocks were newly labelled. All decisions are made before any label changes, so
    they do not depend on the order pages are labelled in."""
    by_page = [candidates(p) for p in pages]
    decided = [heads(by_page, k) for k in range(len(pages))]
    return sum(label_page(page, found, keep_in_markdown=keep_in_markdown)
               for page, found in zip(pages, decided, strict=True))
