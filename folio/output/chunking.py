"""Layout-aware chunking: retrieval units that follow the document's own structure.

Why not fixed windows over the markdown: a citation needs pages and boxes, an answer
needs whole tables, and a chunk is easier to judge when it knows its section. So blocks
are walked in reading order; headings close the current chunk and set the heading path;
text accumulates up to ``max_chars``; a block is only cut (paragraphs, then sentences,
then words) when it alone is too long; a table is one chunk, however long, on a PDF's
page (which bounds it); a table read natively from an Office file (a sheet of thousands
of rows) longer than several chunks is cut by rows, its header rows repeated in every
piece (folio.tables.table_split).
Page headers and footers are noise; quarantined pages contribute nothing. Pure.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

from folio.engines.markdown import code_markdown, list_item_markdown
from folio.figures.links import is_written
from folio.figures.text import (
    figure_context,
    figure_number,
    picture_text,
    referring_sentences,
    says_nothing,
)
from folio.formats.native import is_native_page
from folio.hierarchy.levels import HeadingLeveler, level_document
from folio.models import (
    HEADING_LABELS,
    BBox,
    Block,
    Chunk,
    DocumentResult,
    Label,
    PageOutcome,
    PageResult,
)
from folio.output.chunk_split import code_line_split, pack, split_long, with_overlap
from folio.output.chunk_tables import is_table_caption, is_table_markup
from folio.output.heading_path import HeadingPath, heading_of
from folio.page import running_heads
from folio.settings.config import ChunkSettings
from folio.tables.table_split import split_table

__all__ = ["ChunkStream", "chunk_document", "chunk_id", "embedding_text", "is_table_caption",
           "is_table_markup"]

_HEADING_LABELS = frozenset(label.lower() for label in HEADING_LABELS)
_SKIP_LABELS = frozenset(label.lower() for label in running_heads.HEAD_LABELS)
_TABLE_LABEL = Label.TABLE.lower()
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.DOTALL)
_PARAGRAPHS = re.compile(r"\n\s*\n")


def chunk_id(sha256: str, config_hash: str, index: int, source: str = "") -> str:
    """Deterministic: reprocessing a document yields the same ids, so stores replace. The
    source is part of it: the same bytes under two sources get rows of their own, so that
    deleting one source never removes the other's (docs/index-sync.md)."""
    key = f"{sha256}:{config_hash}:{index}" + (f":{source}" if source else "")
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def embedding_text(chunk: Chunk) -> str:
    """What to embed: the heading path gives a short chunk its topic."""
    if not chunk.headings:
        return chunk.text
    return " > ".join(chunk.headings) + "\n\n" + chunk.text


# --- accumulation -----------------------------------------------------------------------


@dataclass
class _Draft:
    """A chunk being built: its text parts and where each part came from."""

    headings: list[str]
    parts: list[str] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    boxes: list[tuple[int, BBox]] = field(default_factory=list)
    kind: Literal["text", "table", "figure"] = "text"
    image_uri: str | None = None  # a figure chunk's crop
    #: where its first block lies in a source without pages (a sheet's range, a slide)
    location: str | None = None
    #: the boxes already in ``boxes`` as plain tuples: a membership test on the list
    #: compared pydantic models one by one (a chunk of many small blocks took quadratic
    #: time, the validation's text agreement and the load stage's chunking both)
    seen: set[tuple[int, float, float, float, float]] = field(default_factory=set)
    chars: int = 0  # the parts' characters, kept as they are added

    @property
    def size(self) -> int:
        return self.chars + 2 * max(0, len(self.parts) - 1)

    #: per part, its box when that part added it to ``boxes`` (for :meth:`take_last`)
    added: list[BBox | None] = field(default_factory=list)
    #: pages of a list's later items (:meth:`add_list`)
    more_pages: set[int] = field(default_factory=set)

    def add(self, text: str, page: int, bbox: BBox | None) -> None:
        self.parts.append(text)
        self.pages.append(page)
        self.chars += len(text)
        self.added.append(None)
        if bbox is None:
            return
        key = (page, bbox.x0, bbox.y0, bbox.x1, bbox.y1)
        if key not in self.seen:
            self.seen.add(key)
            self.boxes.append((page, bbox))
            self.added[-1] = bbox

    def add_list(self, items: list[tuple[str, int, BBox | None]]) -> None:
        """A list's lines as one part (no blank line between items: one markdown list),
        each item's box kept; its pages all count for the chunk's page range."""
        self.add("\n".join(text for text, _, _ in items), items[0][1], items[0][2])
        for _, page, bbox in items[1:]:
            self.more_pages.add(page)
            if bbox is not None and (key := (page, bbox.x0, bbox.y0, bbox.x1, bbox.y1)) \
                    not in self.seen:
                self.seen.add(key)
                self.boxes.append((page, bbox))

    def take_last(self) -> tuple[str, int, BBox | None]:
        """Remove the last part added (and the box it added) and return it as ``add``
        took it."""
        text, page, bbox = self.parts.pop(), self.pages.pop(), self.added.pop()
        self.chars -= len(text)
        if bbox is not None:
            self.boxes.pop()
            self.seen.discard((page, bbox.x0, bbox.y0, bbox.x1, bbox.y1))
        return text, page, bbox


@dataclass
class _Chunker:
    doc: DocumentResult
    settings: ChunkSettings
    headings: HeadingPath = field(default_factory=HeadingPath)
    chunks: list[Chunk] = field(default_factory=list)
    draft: _Draft | None = None
    #: some text or table came since the last heading (see :meth:`HeadingPath.enter`)
    after_text: bool = True
    #: the draft's last part is a table's caption (:func:`is_table_caption`): a table
    #: right after it takes it into its own chunk
    caption_last: bool = False
    #: the draft is a table's, kept open for one more block: a caption under the table
    table_open: bool = False
    #: the location of the block being chunked (Block.location), given to drafts it opens
    location: str | None = None
    #: the page being chunked was read natively from an Office file (its tables are not
    #: bounded by a page: a long one is cut by rows)
    native: bool = False
    #: the list being read: its items' markdown lines, pages and boxes (:meth:`end_list`)
    items: list[tuple[str, int, BBox | None]] = field(default_factory=list)
    #: the draft's last part is a paragraph of text: a list right after it is its lead-in's
    text_last: bool = False
    #: the text of the pages around the one being chunked: where a figure's referring
    #: sentences are looked for (folio.figures.text)
    nearby: list[str] = field(default_factory=list)
    #: the blocks of the page being chunked, in reading order (a figure's context)
    page_blocks: list[Block] = field(default_factory=list)

    def flush(self) -> None:
        self.end_list()
        self._close()

    def _close(self) -> None:
        self.caption_last = self.table_open = self.text_last = False
        draft, self.draft = self.draft, None
        if draft is None or not draft.parts:
            return
        index = len(self.chunks)
        self.chunks.append(
            Chunk(
                id=chunk_id(self.doc.sha256, self.doc.config_hash, index, self.doc.source),
                doc_id=self.doc.doc_id,
                source=self.doc.source,
                index=index,
                text="\n\n".join(draft.parts),
                kind=draft.kind,
                page_start=min(draft.pages),
                page_end=max([*draft.pages, *draft.more_pages]),
                headings=draft.headings,
                boxes=draft.boxes,
                sha256=self.doc.sha256,
                config_hash=self.doc.config_hash,
                image_uri=draft.image_uri,
                location=draft.location,
            )
        )

    def _open(self) -> _Draft:
        if self.draft is None:
            self.draft = _Draft(headings=self.headings.names(), location=self.location)
        return self.draft

    def heading(self, block: Block) -> None:
        self.flush()
        level, text = heading_of(block)
        if text:
            self.headings.enter(level, text, after_text=self.after_text)
            self.after_text = False

    def table(self, block: Block, page: int) -> None:
        """A table is one chunk, with its caption: the one right before it (taken back
        from the text's chunk) or the one right after it (:meth:`after_table`). A table
        too long for that is cut by rows, its header rows heading every piece
        (:func:`folio.tables.table_split.split_table`); the caption goes with the first."""
        self.after_text = True
        caption = self.draft.take_last() if self.draft is not None and self.caption_last else None
        self.flush()
        pieces = (split_table(block.content.strip(), self.settings.max_chars) if self.native
                  else [block.content.strip()])
        for n, piece in enumerate(pieces):
            if n:
                self.flush()
            self.draft = _Draft(headings=self.headings.names(), kind="table",
                                location=self.location)
            if caption is not None and n == 0:
                self.draft.add(*caption)
            self.draft.add(piece.strip(), page, block.bbox)
        self.table_open = True

    def after_table(self, block: Block, page: int) -> bool:
        """Close the open table's chunk at ``block``: with it, when it is the table's
        caption set under it (True: the block is taken)."""
        taken = self.draft is not None and self.draft.parts and is_table_caption(block)
        if taken and self.draft is not None:
            self.draft.add(block.content.strip(), page, block.bbox)
        self.flush()
        return bool(taken)

    def figure(self, block: Block, page: int) -> None:
        """A figure is a chunk of its own: its caption, description and inner words, and
        its crop's URI (the document's folder in the sink joined with its image path).
        A figure with no words at all has nothing to embed and makes no chunk."""
        number = figure_number(block.caption)
        referring = (referring_sentences(number, self.nearby, block.caption or "")
                     if number else [])
        if says_nothing(block, referring):  # a generic caption alone: the text around it
            referring = figure_context(block, self.page_blocks)
        text = picture_text(block, referring)
        if not text:
            return
        self.flush()
        self.draft = _Draft(headings=self.headings.names(), kind="figure",
                            location=self.location)
        if block.image and is_written(block.image) and self.doc.folder_uri:
            self.draft.image_uri = f"{self.doc.folder_uri.rstrip('/')}/{block.image}"
        self.draft.add(text, page, block.bbox)
        self.flush()

    def end_list(self) -> None:
        """Add the list read so far as one part, with its lead-in where both fit a chunk:
        the paragraph before it is taken into the list's chunk when the list does not fit
        the chunk it is in. A list longer than a chunk is cut between items, the first
        piece with its lead-in."""
        items, self.items = self.items, []
        if not items:
            return
        self.after_text = True
        limit = max(1, self.settings.max_chars)
        pieces: list[list[tuple[str, int, BBox | None]]] = [[]]
        size = 0
        for item in items:
            if pieces[-1] and size + 1 + len(item[0]) > limit:
                pieces.append([])
                size = 0
            pieces[-1].append(item)
            size += len(item[0]) + 1
        draft = self._open()
        first = sum(len(t) + 1 for t, _, _ in pieces[0])
        if draft.parts and draft.size + 2 + first > limit:
            lead = draft.take_last() if self.text_last else None
            if lead is not None and len(lead[0]) + 2 + first > limit:
                draft.add(*lead)
                lead = None
            self._close()
            draft = self._open()
            if lead is not None:
                draft.add(*lead)
        for n, piece in enumerate(pieces):
            if n:
                self._close()
                draft = self._open()
            draft.add_list(piece)
        self.text_last = self.caption_last = False

    def list_item(self, block: Block, page: int) -> None:
        self.items.append((list_item_markdown(block), page, block.bbox))

    def code(self, block: Block, page: int) -> None:
        """A code block as a fenced block, whole where it fits a chunk (a code block
        longer than a chunk is cut between lines, each piece fenced)."""
        limit = max(1, self.settings.max_chars)
        fenced = code_markdown(block)
        if len(fenced) <= limit:
            self.text(fenced, page, block.bbox, whole=True)
            return
        inner = fenced.split("\n")
        fence = inner[0]  # may name a language (a model's own fence: ```python)
        close = fence[:len(fence) - len(fence.lstrip("`"))]  # a closing fence is bare
        room = max(1, limit - len(fence) - len(close) - 2)
        for piece in pack([line for part in inner[1:-1] for line in code_line_split(part, room)],
                           room, "\n"):
            self.text(f"{fence}\n{piece}\n{close}", page, block.bbox, whole=True)

    def text(self, content: str, page: int, bbox: BBox | None, *, whole: bool = False) -> None:
        """Add text; ``whole``: a unit never cut (a fenced code piece within the limit)."""
        self.end_list()
        self.after_text = True
        limit = max(1, self.settings.max_chars)
        if len(content) > limit and not whole:
            self.flush()
            overlap = min(max(0, self.settings.overlap_chars), limit // 2)
            pieces = with_overlap(split_long(content, limit - overlap), overlap)
            for piece in pieces[:-1]:
                self._open().add(piece, page, bbox)
                self.flush()
            content = pieces[-1]
        draft = self._open()
        if draft.parts and draft.size + 2 + len(content) > limit:
            self.flush()
            draft = self._open()
        draft.add(content, page, bbox)
        self.text_last = not whole

    def block(self, block: Block, page: int) -> None:
        label = block.label.lower()
        self.location = block.location
        if block.label == Label.PICTURE.value:
            self.figure(block, page)
            return
        skip = label in _SKIP_LABELS and not self.settings.keep_headers_footers
        if skip or not block.content.strip():
            return
        if self.table_open and self.after_table(block, page):
            return
        if block.label == Label.LIST_ITEM.value and block.marker is not None:
            self.list_item(block, page)
            return
        self.end_list()
        if label in _HEADING_LABELS:
            self.heading(block)
        elif label == _TABLE_LABEL and is_table_markup(block.content):
            self.table(block, page)
        elif block.label == Label.CODE.value:
            self.code(block, page)
        else:
            self.text(block.content.strip(), page, block.bbox)
            self.caption_last = is_table_caption(block) and self.draft is not None \
                and self.draft.parts[-1:] == [block.content.strip()]


def _blocks_from_markdown(markdown: str) -> list[Block]:
    """Blocks for a page that only has markdown: '#' paragraphs are headings, paragraphs
    made only of '|' rows are tables, the rest is text (no geometry)."""
    blocks = []
    for order, para in enumerate(p.strip() for p in _PARAGRAPHS.split(markdown)):
        if not para:
            continue
        lines = para.splitlines()
        if _MD_HEADING.match(para) and len(lines) == 1:
            label = Label.SECTION_HEADER.value
        elif all(line.lstrip().startswith("|") for line in lines):
            label = Label.TABLE.value
        else:
            label = Label.TEXT.value
        blocks.append(Block(label=label, content=para, order=order))
    return blocks


def _prose_of(pages: list[PageResult]) -> list[str]:
    """The running text of ``pages``: text and list blocks (the markdown without blocks)."""
    out: list[str] = []
    for page in pages:
        if page.outcome == PageOutcome.QUARANTINED:
            continue
        if not page.blocks:
            out.append(page.markdown)
        out += [b.content for b in page.blocks
                if b.label in (Label.TEXT.value, Label.LIST_ITEM.value)]
    return out


class ChunkStream:
    """A document's chunks as its pages arrive in reading order: every chunk but the one
    still open is final, so the chunks of a long document's first pages can be embedded
    while its last pages are still in OCR. Fed every page, it gives exactly
    :func:`chunk_document`'s chunks.

    Running headers and footers are left out (:mod:`folio.page.running_heads`); whether a
    line is one depends on the pages up to ``WINDOW`` ahead, so a page is chunked only
    once those have arrived (or at :meth:`close`)."""

    def __init__(self, doc: DocumentResult, settings: ChunkSettings) -> None:
        self._chunker = _Chunker(doc=doc, settings=settings)
        #: heading levels, page by page as the outputs set them (folio.hierarchy)
        self._leveler = HeadingLeveler(doc.outline)
        self._pages: list[PageResult] = []
        self._candidates: list[list[running_heads.Candidate]] = []  # one list a page
        self._fed = 0

    def add(self, page: PageResult) -> list[Chunk]:
        """The chunks that ``page`` (and the pages before it) closed; pages must come in
        index order."""
        before = len(self._chunker.chunks)
        self._pages.append(page)
        self._candidates.append(running_heads.candidates(page))
        while self._fed + running_heads.WINDOW < len(self._pages):
            self._feed(self._fed)
        return self._chunker.chunks[before:]

    def _feed(self, k: int) -> None:
        page = self._pages[k]
        self._fed = k + 1
        if page.outcome == PageOutcome.QUARANTINED:
            return
        self._leveler.page(page)
        keep = self._chunker.settings.keep_headers_footers
        native = is_native_page(page)  # its reader labelled its heads (folio.formats.native)
        self._chunker.native = native
        heads = (running_heads.heads(self._candidates, k)
                 if page.blocks and not keep and not native else {})
        heads = running_heads.spare_only_text(page.blocks, heads)
        blocks = [b for n, b in enumerate(page.blocks) if n not in heads]
        # a figure's referring sentences: on its page, the one before, the WINDOW after
        self._chunker.nearby = _prose_of(self._pages[max(0, k - 1):k + running_heads.WINDOW + 1])
        ordered = (sorted(blocks, key=lambda b: b.order) if page.blocks
                   else _blocks_from_markdown(page.markdown))
        self._chunker.page_blocks = ordered
        for block in ordered:
            # citations count pages as people do, from 1 (page_start, page_end, boxes)
            self._chunker.block(block, page.index + 1)

    def close(self) -> list[Chunk]:
        """The rest, once no page follows."""
        before = len(self._chunker.chunks)
        while self._fed < len(self._pages):
            self._feed(self._fed)
        self._chunker.flush()
        return self._chunker.chunks[before:]


def chunk_document(doc: DocumentResult, settings: ChunkSettings) -> list[Chunk]:
    """The document's chunks in reading order, with stable ids ``0..n-1``; the document
    is levelled first (:func:`folio.hierarchy.levels.level_document`, a no-op where the
    load stage did it), so heading paths follow the document's heading order."""
    level_document(doc)
    stream = ChunkStream(doc, settings)
    chunks: list[Chunk] = []
    for page in sorted(doc.pages, key=lambda p: p.index):
        chunks += stream.add(page)
    return chunks + stream.close()


def page_chunk_texts(doc: DocumentResult, page: PageResult, settings: ChunkSettings) -> list[str]:
    """What the chunker keeps of one page, by itself: its chunks' texts and the headings
    it enters into the heading path (a heading is carried by the chunks after it, not in
    their text). The same rules as :func:`chunk_document` on blocks whose running heads are
    already labelled (:func:`folio.page.running_heads.mark_running_heads`); used to check that
    the chunks agree with the page's markdown (:mod:`folio.page.text_agreement`)."""
    blocks = (sorted(page.blocks, key=lambda b: b.order) if page.blocks
              else _blocks_from_markdown(page.markdown))
    chunker = _Chunker(doc=doc, settings=settings, nearby=_prose_of([page]), page_blocks=blocks,
                       native=is_native_page(page))
    headings: list[str] = []
    for block in blocks:
        if block.label.lower() in _HEADING_LABELS and block.content.strip():
            headings.append(heading_of(block)[1])
        chunker.block(block, page.index + 1)
    chunker.flush()
    return [c.text for c in chunker.chunks] + headings
