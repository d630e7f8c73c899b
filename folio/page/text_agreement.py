"""Do a page's text, its markdown and its chunks say the same thing?

Three outputs are made from one page: its blocks (``document.json``), its part of
``document.md`` and the chunks that go to the vector store. Each is derived separately
(running heads leave the markdown and the chunks, tables become HTML, headings become a
chunk's heading path), so a fault in one of those steps loses text silently: a page whose
only line was taken for a running head once came out with an empty ``document.md``, no
chunks, and the outcome ``ok``. This module measures, per page, how much of the body text
reaches the markdown and how much of the markdown reaches the chunks; the validation
suite holds both to a floor, so such a page is quarantined with a reason instead.

Words are compared as multisets of lower-cased word characters, with HTML tags and
markdown markup taken out first: a table cell is the same words as HTML or as text.
Pure: no I/O, no pipeline state.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel

from folio.models import Block, PageResult
from folio.page.running_heads import HEAD_LABELS

__all__ = ["PageAgreement", "page_agreement", "recall", "words"]

_TAG = re.compile(r"<[^>]*>")
_WORD = re.compile(r"\w+")
#: blocks that leave the markdown and the chunks by design (running heads); their words
#: are not owed to either
_FURNITURE = frozenset(label.lower() for label in HEAD_LABELS)


class PageAgreement(BaseModel):
    """One page's words in each output. ``markdown_recall``: share of the body's words
    found in the page's markdown; ``chunk_recall``: share of the markdown's words found in
    the page's chunks (text and heading path). ``None`` where there is nothing to owe."""

    page: int
    text_words: int  # every block, running heads included
    body_words: int  # what the markdown owes: blocks that are not running heads
    markdown_words: int
    chunk_words: int
    markdown_recall: float | None
    chunk_recall: float | None


def words(text: str) -> Counter[str]:
    """The multiset of words of ``text``, HTML tags and markdown markup left out."""
    return Counter(_tokens(text))


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(_TAG.sub(" ", text)) if w != "_"]


def recall(owed: Counter[str], got: Counter[str]) -> float | None:
    """Share of ``owed`` (a multiset) found in ``got``; ``None`` when nothing is owed."""
    total = sum(owed.values())
    if not total:
        return None
    return sum((owed & got).values()) / total


def _count(texts: Iterable[str]) -> Counter[str]:
    """:func:`words` of all ``texts`` together (one counter: a counter a text cost more
    than the counting, on pages of many small blocks)."""
    return Counter(w for text in texts for w in _tokens(text))


def _is_furniture(block: Block) -> bool:
    return block.label.lower() in _FURNITURE


def page_agreement(page: PageResult, chunk_texts: Iterable[str],
                   *, keep_headers_footers: bool = False) -> PageAgreement:
    """How much of ``page``'s text reached its markdown, and of that, its chunks.

    ``chunk_texts``: the texts (and heading names) of the chunks made from this page alone,
    in the order the chunker made them. With ``keep_headers_footers`` running heads are
    owed too (they stay in the markdown and the chunks then).
    """
    if page.blocks:
        text = _count(b.content for b in page.blocks)
        body = _count(b.content for b in page.blocks
                      if keep_headers_footers or not _is_furniture(b))
    else:  # a model's answer with no blocks: the markdown is the page's text
        text = body = words(page.markdown)
    markdown = words(page.markdown)
    chunks = _count(chunk_texts)
    return PageAgreement(
        page=page.index, text_words=sum(text.values()), body_words=sum(body.values()),
        markdown_words=sum(markdown.values()), chunk_words=sum(chunks.values()),
        markdown_recall=recall(body, markdown), chunk_recall=recall(markdown, chunks))
