"""No private-use character leaves a page: the one scrub every page's text passes. Pure.

Why: fonts map glyphs that Unicode has no place for (Symbol's and Wingdings' bullets,
arrows and ticks, a company logo, an icon font's glyphs) into the private-use areas
(U+E000-U+F8FF, planes 15 and 16). Their meaning lives in the font, not the text: a
reader sees a box, an embedder a token it never learnt, a search nothing a query can
type. Control characters (a glyph of a font without a Unicode map, read as U+0001) go
too. The bullets among them (:data:`folio.page.list_items.PUA_BULLETS`) have already
opened their list items where they stood at a line's start; anywhere else they become
``•``. Every other private-use character is dropped (its neighbours' spacing kept).

:func:`scrub_page` is applied where every engine's answer is accepted
(:func:`folio.pipeline.pages._accept`): blocks (content, caption, alt text, table cells)
and the page markdown.
"""

from __future__ import annotations

import re

from folio.models import Block
from folio.page.list_items import PUA_BULLETS

_PRIVATE = re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
#: control characters (not tab and line ends): a glyph read without Unicode
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BULLET = "\u2022"


def _replace(match: re.Match[str]) -> str:
    return _BULLET if match.group(0) in PUA_BULLETS else ""


def scrub(text: str) -> str:
    """``text`` with private-use bullets as ``•`` and every other private-use character
    dropped, and so are control characters (tab and line ends kept)."""
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    if not _PRIVATE.search(text):
        return text
    return _PRIVATE.sub(_replace, text)


def scrub_blocks(blocks: list[Block]) -> None:
    """Scrub the blocks' text in place: content, caption, alt text, table cells."""
    for block in blocks:
        block.content = scrub(block.content)
        if block.caption is not None:
            block.caption = scrub(block.caption)
        if block.alt is not None:
            block.alt = scrub(block.alt)
        for cell in block.cells or ():
            cell.text = scrub(cell.text)


def scrub_page(blocks: list[Block], markdown: str) -> str:
    """Scrub a page's blocks in place and return its markdown scrubbed."""
    scrub_blocks(blocks)
    return scrub(markdown)
