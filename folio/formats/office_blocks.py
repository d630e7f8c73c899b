"""What the native Office readers share: clean text, links, tables as grids, and a page
of blocks made into the pipeline's own :class:`~folio.models.PageResult`. Pure.

Native text is exact, so a native page never goes through OCR, running-head detection or
heading levelling (:func:`folio.formats.native.is_native_page`): the reader set labels and
levels from the file's own styles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from folio.engines.markdown import blocks_to_markdown
from folio.formats.native import NATIVE_ENGINE
from folio.models import Block, Label, PageOutcome, PageResult, TableCell
from folio.tables.table_grid import TableGrid, grid_html

__all__ = ["NativeRead", "PageDraft", "clean_text", "markdown_link", "native_page",
           "table_block"]
#: private-use code points (U+E000-U+F8FF): Symbol and Wingdings bullets, icon fonts'
#: glyphs; they mean nothing outside the font, so they never reach folio's text
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
#: control characters other than tab and newline (vertical tab is Word's line break)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LINK_TEXT = re.compile(r"([\[\]])")

_HEAD_LABELS = frozenset({Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value})


def clean_text(text: str) -> str:
    """``text`` without private-use glyphs and control characters (a vertical tab, Word's
    manual line break in some writers, becomes a newline)."""
    text = text.replace("\x0b", "\n")
    return _CONTROL.sub("", _PRIVATE_USE.sub("", text))


def markdown_link(text: str, url: str) -> str:
    """``[text](url)``; the URL alone where there is no text; brackets in the text and
    spaces or parentheses in the URL escaped so the link stays one link."""
    url = url.strip().replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    text = _LINK_TEXT.sub(r"\\\1", text.strip())
    if not url:
        return text
    return f"[{text or url}]({url})"


def table_block(rows: Sequence[Sequence[TableCell]], *, header_rows: int, order: int,
                location: str | None = None) -> Block | None:
    """A Table block from cells placed on a grid (``row``/``col`` slots, spans): its
    content the HTML (:func:`folio.tables.table_grid.grid_html`, header rows as ``<th>``),
    its ``cells`` the grid. None for a table without text."""
    cells = [cell for row in rows for cell in row]
    if not any(cell.text.strip() for cell in cells):
        return None
    n_rows = max(c.row + c.row_span for c in cells)
    n_cols = max(c.col + c.col_span for c in cells)
    grid = TableGrid(rows=n_rows, cols=n_cols, cells=cells,
                     header_rows=max(0, min(header_rows, n_rows - 1)) if n_rows > 1 else 0)
    return Block(label=Label.TABLE.value, content=grid_html(grid), order=order, cells=cells,
                 location=location)


@dataclass
class PageDraft:
    """One page's blocks as a reader finds them, in reading order."""

    blocks: list[Block] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, label: str, content: str, **fields: object) -> Block:
        block = Block(label=label, content=content, order=len(self.blocks), **fields)  # type: ignore[arg-type]
        self.blocks.append(block)
        return block

    def append(self, block: Block) -> None:
        self.blocks.append(block.model_copy(update={"order": len(self.blocks)}))


def native_page(index: int, draft: PageDraft, *, keep_heads: bool, why: str) -> PageResult:
    """A :class:`PageResult` of a native page: outcome ok, markdown from its blocks
    (running heads out of it unless ``keep_heads``, as on every other path), engine
    :data:`NATIVE_ENGINE`, no geometry."""
    shown = [b for b in draft.blocks if keep_heads or b.label not in _HEAD_LABELS]
    markdown = blocks_to_markdown(shown)
    return PageResult(index=index, width_pt=0.0, height_pt=0.0, route="text-layer",
                      route_reason=why, engine=NATIVE_ENGINE, blocks=draft.blocks,
                      markdown=markdown, blank=not markdown.strip(), outcome=PageOutcome.OK,
                      notes=draft.notes)


@dataclass
class NativeRead:
    """What a native reader found: its pages' blocks in reading order, and the embedded
    images its Picture blocks name (pending name -> the file's bytes, as stored in the
    package), written beside document.md by :func:`folio.figures.store.store_images`."""

    pages: list[PageDraft]
    images: dict[str, bytes] = field(default_factory=dict)
    #: what a page is in this format (the pages' ``route_reason``)
    why: str = ""

    def image_name(self, page: int, ext: str) -> str:
        """A pending name for the next image of page ``page`` (0-based)."""
        ext = ext.lower().lstrip(".") or "bin"
        return f"office-{page + 1:04d}-{len(self.images) + 1}.{'jpg' if ext == 'jpeg' else ext}"
