"""Heading levels for a document's pages, in reading order. Pure.

Each heading block gets :attr:`~folio.models.Block.level` from the first of these that
speaks for it:

1. the PDF's outline (its bookmarks), where an entry names the heading on its page or
   the next one: the author's own hierarchy;
2. its numbering (:func:`folio.hierarchy.numbering.numbering_level`): ``1.1.2`` is third;
3. the vision model's own ``#`` marks (olmOCR's markdown, Chandra's ``<h1>``-``<h6>``);
4. its type size over the body's (:attr:`~folio.models.Block.type_size`): the size the
   document's numbered headings of that size have (a ``References`` set like ``1
   Introduction`` is a top level too), else bands of size (:data:`SIZE_BANDS`);
5. a title is 1; any other heading :data:`DEFAULT_LEVEL`.

:class:`HeadingLeveler` goes page by page, so the chunker can level a long document's
first pages while its last ones are still in OCR, and the outputs (which level every page
at the end) see the same levels: what it learns of sizes comes only from pages before.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from folio.formats.native import is_native_page
from folio.hierarchy.numbering import numbering_level
from folio.hierarchy.order import order_levels
from folio.models import (
    HEADING_LABELS,
    Block,
    DocumentResult,
    Label,
    OutlineEntry,
    PageOutcome,
    PageResult,
)

#: a heading with no other sign of its level (a section header of unknown size)
DEFAULT_LEVEL = 2
#: (least type size over the body's, level) for a document without numbered headings of
#: that size: display type, a large heading, a heading a little larger, one set in bold
SIZE_BANDS = ((1.6, 1), (1.3, 2), (1.1, 3), (0.0, 4))
#: two type sizes (over the body's) within this are the same heading style
SIZE_TOLERANCE = 0.06
#: an outline entry names a heading on its page or this many pages after it (a bookmark
#: may point at the page before, where a chapter's opening spread starts)
OUTLINE_PAGES = 1
#: a heading the outline names by a longer title holds at least this share of it
OUTLINE_SHARE = 0.6

_MD_MARKS = re.compile(r"^(#{1,6})\s+")


def normalized(text: str) -> str:
    """Case, width, markdown marks, punctuation and spacing folded away."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join("".join(c if c.isalnum() else " " for c in text).split())


def heading_text(block: Block) -> str:
    """A heading block's words, without the ``#`` marks a model wrote."""
    return " ".join(_MD_MARKS.sub("", block.content.strip()).split()).strip("*_ ")


def model_level(block: Block) -> int | None:
    """The level the engine's own markdown gives (``### Scope`` is 3), or None."""
    match = _MD_MARKS.match(block.content.strip())
    return len(match.group(1)) if match else None


@dataclass
class HeadingLeveler:
    """Levels for one document's headings, fed its pages in index order."""

    outline: Sequence[OutlineEntry] = ()
    #: type size (over the body's, rounded) -> levels the numbered headings of it had
    sizes: dict[float, Counter[int]] = field(default_factory=dict)
    _used: set[int] = field(default_factory=set)  # outline entries already matched
    #: the outline's titles normalized once (an outline may have thousands of entries)
    _titles: list[str] | None = None

    def page(self, page: PageResult) -> None:
        """Set the level of each heading block of ``page`` (left alone: quarantined, and
        native Office pages, whose levels are their styles')."""
        if page.outcome == PageOutcome.QUARANTINED or is_native_page(page):
            return
        for block in sorted(page.blocks, key=lambda b: b.order):
            # a level already set is the document's (level_document, a native reader's)
            if block.label in HEADING_LABELS and block.content.strip() and block.level is None:
                block.level = self.level(block, page.index)

    def level(self, block: Block, page: int) -> int:
        text = heading_text(block)
        from_outline = self._outline_level(text, page)
        numbered = numbering_level(text)
        if block.type_size is not None and (from_outline or numbered):
            key = round(block.type_size, 2)
            self.sizes.setdefault(key, Counter())[from_outline or numbered or 0] += 1
        if from_outline is not None:
            return from_outline
        if numbered is not None:
            return numbered
        marked = model_level(block)
        if marked is not None:
            return marked
        if block.label == Label.TITLE.value:
            return 1
        if block.type_size is not None:
            return self._size_level(block.type_size)
        return DEFAULT_LEVEL

    def _outline_level(self, text: str, page: int) -> int | None:
        if not self.outline:
            return None
        name = normalized(text)
        if not name:
            return None
        if self._titles is None:
            self._titles = [normalized(entry.title) for entry in self.outline]
        for i, entry in enumerate(self.outline):
            if i in self._used:
                continue
            if entry.page is not None and not 0 <= page - entry.page <= OUTLINE_PAGES:
                continue
            if _same_title(name, self._titles[i]):
                self._used.add(i)
                return min(entry.level, 6)
        return None

    def _size_level(self, size: float) -> int:
        """The level numbered headings of this size had; between learned sizes, the
        nearest one's; larger than all, the top learned; smaller than all, one under the
        lowest; with none learned, :data:`SIZE_BANDS`."""
        if not self.sizes:
            return next(level for least, level in SIZE_BANDS if size >= least)
        learned = {s: counts.most_common(1)[0][0] for s, counts in self.sizes.items()}
        nearest = min(learned, key=lambda s: abs(s - size))
        if abs(nearest - size) <= SIZE_TOLERANCE:
            return learned[nearest]
        if size > max(learned):
            return min(learned.values())
        if size < min(learned):
            return min(max(learned.values()) + 1, 6)
        return learned[nearest]


def _same_title(heading: str, entry: str) -> bool:
    """An outline entry names the heading: the same words, or one holds the other whole
    and the shorter is most of it (a bookmark without the heading's number, a heading
    broken over two blocks)."""
    if heading == entry:
        return True
    short, long_ = sorted((heading, entry), key=len)
    return bool(short) and short in long_ and len(short) >= OUTLINE_SHARE * len(long_)


def level_document(doc: DocumentResult) -> None:
    """Level every heading of ``doc`` (pages in index order), make the levels consistent
    over the document (:func:`folio.hierarchy.order.order_levels`; a native Office page's
    levels are its styles', left as they are), and rewrite the ``#``
    marks of the page markdown the engine made from its blocks (a vision model's own
    markdown keeps its marks: its levels are among the signals). Headings levelled before
    keep their levels, so a second call changes nothing."""
    leveler = HeadingLeveler(doc.outline)
    pages = sorted(doc.pages, key=lambda p: p.index)
    for page in pages:
        leveler.page(page)
    # a native Office page's levels are its author's styles, kept as they are
    read = [page for page in pages if not is_native_page(page)]
    order_levels(read)
    for page in read:
        page.markdown = relevel_markdown(page.markdown, page.blocks)


def relevel_markdown(markdown: str, blocks: Sequence[Block]) -> str:
    """``markdown`` with each heading paragraph given its block's level: one that a block
    without marks of its own made (``## Scope`` -> ``### Scope``), and a model's own
    ``#`` marks where the document's order (:mod:`folio.hierarchy.order`) moved its
    level; other paragraphs as they are."""
    wanted: dict[str, str] = {}
    for block in blocks:
        content = block.content.strip()
        if block.level is None or block.label not in HEADING_LABELS:
            continue
        marked = model_level(block)
        if marked is not None:  # a model's marks, where the document's order moved it
            if marked != block.level:
                wanted[content] = "#" * block.level + " " + _MD_MARKS.sub("", content)
            continue
        for marks in ("# ", "## "):  # what folio.engines.markdown prefixes
            wanted[marks + content] = "#" * block.level + " " + content
    if not wanted:
        return markdown
    parts = markdown.split("\n\n")
    return "\n\n".join(wanted.get(part.strip(), part) for part in parts)
