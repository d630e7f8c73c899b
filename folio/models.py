"""The data contract: one source of truth for every stage, output file and report.

Coordinates: every bbox is in PDF points with the origin at the page's top-left corner and
y growing downwards (the way images and OCR engines see a page), after the page's /Rotate
has been applied. ``Block.bbox_norm`` is the same box divided by the page size (0..1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, computed_field


class PageOutcome(StrEnum):
    OK = "ok"  # first attempt succeeded and validated
    RECOVERED = "recovered"  # succeeded after a retry or a repair
    FALLBACK = "fallback"  # primary route failed; a fallback engine produced the text
    QUARANTINED = "quarantined"  # nothing usable; reason says why; a later run may retry


class DocumentOutcome(StrEnum):
    OK = "ok"  # every page ok or recovered
    PARTIAL = "partial"  # some pages fell back or were quarantined
    QUARANTINED = "quarantined"  # the document as a whole could not be processed
    #: not read, by design: a format folio does not read, or an entry that is no file of
    #: the source (a symlink out of it, a device); reason says which (docs/inputs.md)
    SKIPPED = "skipped"


class Label(StrEnum):
    """Block labels (Chandra's vocabulary, which covers olmOCR's and docling's)."""

    TEXT = "Text"
    TITLE = "Title"
    SECTION_HEADER = "Section-Header"
    LIST_ITEM = "List-Item"
    TABLE = "Table"
    FIGURE = "Figure"
    IMAGE = "Image"
    CAPTION = "Caption"
    EQUATION = "Equation-Block"
    CODE = "Code-Block"
    FOOTNOTE = "Footnote"
    PAGE_HEADER = "Page-Header"
    PAGE_FOOTER = "Page-Footer"
    FORM = "Form"
    TOC = "Table-Of-Contents"
    #: one figure as a whole (folio.figures): its crop, caption, alt text and inner words
    PICTURE = "Picture"


KNOWN_LABELS: frozenset[str] = frozenset(label.value for label in Label)
#: the labels of a heading: a document's title and its section headers
HEADING_LABELS: frozenset[str] = frozenset({Label.TITLE.value, Label.SECTION_HEADER.value})


class BBox(BaseModel):
    """Axis-aligned box in page points, top-left origin."""

    x0: float
    y0: float
    x1: float
    y1: float

    def normalized(self, width: float, height: float) -> BBox:
        return BBox(x0=self.x0 / width, y0=self.y0 / height, x1=self.x1 / width, y1=self.y1 / height)

    def union(self, other: BBox) -> BBox:
        return BBox(
            x0=min(self.x0, other.x0),
            y0=min(self.y0, other.y0),
            x1=max(self.x1, other.x1),
            y1=max(self.y1, other.y1),
        )


class WordBox(BaseModel):
    """One word and its box in page points (top-left origin): what a table's grid is
    built from (pdfium's character boxes joined at spaces, or a Tesseract word)."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float


class TableCell(BaseModel):
    """One cell of a table's grid: its top-left slot and how many rows and columns it
    spans (a header over two columns has ``col_span=2``)."""

    row: int
    col: int
    row_span: int = 1
    col_span: int = 1
    text: str = ""


class Block(BaseModel):
    label: str
    bbox: BBox | None = None  # points; None when the engine gives no geometry
    content: str  # markdown; tables as HTML
    order: int  # reading order within the page
    confidence: float | None = None
    #: a table's grid, when one was found (CPU engines: folio.tables.table_grid); None for every
    #: other block, and for tables kept as text (absent in documents written before)
    cells: list[TableCell] | None = None
    #: a Picture's crop, relative to the document's folder (``figures/p0001-1.png``);
    #: None for other blocks, and for pictures whose crop was not written (folio.figures)
    image: str | None = None
    #: a Picture's caption, where one belongs to it (folio.page.caption_order)
    caption: str | None = None
    #: a Picture's description by the engine (Chandra's alt text, olmOCR's ``![alt]``)
    alt: str | None = None
    #: a heading's level, 1 (a title, a chapter) to 6, from its numbering, its type, the
    #: PDF's outline or the model's own ``#`` marks (folio.hierarchy); a List-Item's
    #: nesting depth, 1 (a top-level item) to 6; None for every other block (and in
    #: documents written before)
    level: int | None = Field(None, ge=1, le=6)
    #: a List-Item's marker as its author wrote it, normalised: ``-`` for any bullet
    #: (•, ◦, ▪, ‣, -, *, a Symbol or Wingdings glyph), else the number or letter with its
    #: punctuation (``1.``, ``2)``, ``a.``, ``iv.``, ``(a)``); the item's text is
    #: ``content``, without the marker. None for other blocks, and for list blocks that
    #: carry their own markdown list (a VLM's answer)
    marker: str | None = None
    #: where the block lies in a source without pages of its own (folio.formats' native
    #: Office readers): ``Shipments!A1:G51`` for a sheet's range, ``slide 3``,
    #: ``slide 3 notes``; None where the page number says it all
    location: str | None = None
    #: a heading's type size over the body text's on its page (1.0: the body's size, set
    #: apart by weight or face), as the engine measured it (text layer: glyph sizes;
    #: tesseract: line heights); None where not measured
    type_size: float | None = None

    def relabelled(self, label: str) -> Block:
        """This block under another label. A list item that is no longer one keeps its
        marker in its words (``2. Look at ...``): only a List-Item carries a marker."""
        if self.marker is None or label == Label.LIST_ITEM.value:
            return self.model_copy(update={"label": label})
        return self.model_copy(update={"label": label, "marker": None, "level": None,
                                       "content": f"{self.marker} {self.content}"})


def joined_box(blocks: Sequence[Block]) -> BBox | None:
    """The box of several blocks joined into one in the first one's place: the first
    one's box grown by every later box (None when the first has no box)."""
    box = blocks[0].bbox
    for block in blocks[1:]:
        if box is not None and block.bbox is not None:
            box = box.union(block.bbox)
    return box


@dataclass(frozen=True)
class Region:
    """One layout region of a page, as a layout detector (folio.page.layout) found it.

    Here rather than in folio.page.layout because it crosses the page worker's line protocol
    (:attr:`PagePrep.layout`) and the parent must read it without loading the model.

    Attributes:
        label: folio's block label for the detector's class.
        bbox: in PDF points, top-left origin, within the page.
        score: the model's class score, 0..1.
        source_class: the model's own class name (``table_caption`` and
            ``figure_caption`` both become Caption; this keeps which).
    """

    label: Label
    bbox: BBox
    score: float
    source_class: str


class RenderPlan(BaseModel):
    """How a page is rasterised and why (olmOCR/Chandra style pixel budgets)."""

    dpi: float
    width_px: int
    height_px: int
    reason: str  # e.g. "budget 1288px longest side; small text 6.1pt -> 150dpi"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pixels(self) -> int:
        return self.width_px * self.height_px


class TextLayer(BaseModel):
    """What pdfium found in the page's own text layer, and whether to trust it."""

    chars: int = 0
    text: str = ""
    blocks: list[Block] = Field(default_factory=list)
    min_font_pt: float | None = None
    score: float = 0.0  # 0 (junk/absent) .. 1 (trustworthy)
    trusted: bool = False
    why: str = ""
    #: word boxes for table grids: only those inside the page's table regions cross the
    #: page worker's pipe (the page worker filters them), so a page without tables adds
    #: nothing to the protocol
    words: list[WordBox] = Field(default_factory=list)
    #: thin drawn lines (ruling lines) inside the page's table regions, in points
    rulings: list[BBox] = Field(default_factory=list)


class PagePrep(BaseModel):
    """One page as the page worker prepared it: geometry, plan, text layer, image file.

    This is the line protocol between the page worker process and the pipeline.
    """

    index: int
    width_pt: float = 0.0
    height_pt: float = 0.0
    rotation: int = 0
    plan: RenderPlan | None = None
    image_path: str | None = None  # rendered image, owned by the pipeline once received
    image_dpi_native: float | None = None  # resolution of the largest embedded image
    text_layer: TextLayer | None = None
    blank: bool = False  # nothing drawn on the page (no text, no image, uniform render)
    # layout regions found in the page worker; None: detection did not run on this page
    layout: list[Region] | None = None
    #: the page's image objects big enough to be figures (points, top-left origin);
    #: None: not looked for (folio.figures.crops.image_boxes)
    images: list[BBox] | None = None
    error: str | None = None  # set when the page could not be loaded or rendered
    #: degrees to turn the image (PIL's counter-clockwise transpose, as olmOCR turns it)
    #: before a model reads it: the corrections a model asked for so far (olmOCR's
    #: rotation_correction), set by the page's attempt ladder
    turn: int = 0


class Attempt(BaseModel):
    engine: str
    model: str = ""
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    error: str | None = None  # None when the attempt produced usable output
    #: degrees the page image was turned clockwise before it was read (an upside-down or
    #: sideways scan); boxes are in the page's own orientation either way
    rotated: int = 0
    #: what the model said of the image it saw: turn it by this many degrees to read it
    #: (olmOCR's rotation_correction, when its is_rotation_valid is false)
    rotation_correction: int | None = None


class PageResult(BaseModel):
    index: int
    width_pt: float
    height_pt: float
    plan: RenderPlan | None = None
    route: Literal["text-layer", "ocr", "none"] = "none"
    route_reason: str = ""
    engine: str = ""
    model: str = ""
    prompt_format: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    blocks: list[Block] = Field(default_factory=list)
    markdown: str = ""
    blank: bool = False
    outcome: PageOutcome = PageOutcome.QUARANTINED
    reason: str = ""
    #: the page failed for a reason a later run may not meet (a timeout, a crashed worker,
    #: an unreachable engine or store): its document is not recorded as done
    retryable: bool = False
    #: what was found and fixed or only reported, never a reason to drop the page's text
    #: (boxes clipped to the page, geometry checks validation reports): see
    #: docs/page-outcomes.md
    notes: list[str] = Field(default_factory=list)


class CompressionInfo(BaseModel):
    used: bool = False
    original_bytes: int = 0
    compressed_bytes: int | None = None
    image_dpi: float | None = None
    seconds: float = 0.0
    note: str = ""


class OutlineEntry(BaseModel):
    """One bookmark of the PDF's outline: the author's own table of contents."""

    level: int = Field(ge=1)  # 1: a top-level entry, 2: under one, ...
    title: str
    #: the page it points to, from 0 (the PDF's own page index): the one page field of
    #: document.json that counts from 0 (README); None: no page destination
    page: int | None = None


class DocumentResult(BaseModel):
    source: str
    doc_id: str = ""  # sha256 of the bytes, first 32 hex
    sha256: str = ""
    config_hash: str = ""
    page_count: int = 0
    pages: list[PageResult] = Field(default_factory=list)
    outcome: DocumentOutcome = DocumentOutcome.QUARANTINED
    reason: str = ""
    retryable: bool = False  # True when the failure was transient: a later run retries it
    #: the ``limits.document_timeout_s`` its unfinished pages ran into (they end
    #: ``document-timeout``, not retried): a later run tries it again only with a larger one
    time_limit_s: float | None = None
    #: what the source is, detected from its content (folio.formats.detect): "pdf",
    #: "jpeg", "tiff", "docx", "zip", ...; empty when it was never read
    format: str = ""
    repaired: bool = False  # pdfium could only open it after a Ghostscript rewrite
    compression: CompressionInfo = Field(default_factory=CompressionInfo)
    engine: str = ""
    seconds: float = 0.0
    cached: bool = False  # served from a previous run's outputs; no OCR done
    #: figure crops written beside document.md and their bytes (folio.figures)
    figures: int = 0
    figure_bytes: int = 0
    #: the document's folder in the sink (local path or s3:// URI), where figures/ lies
    folder_uri: str = ""
    chunks: int = 0
    outputs: dict[str, str] = Field(default_factory=dict)
    vector_table: str = ""
    #: the PDF's outline (bookmarks), read when the document was opened: heading levels
    #: (folio.hierarchy) follow it where it names a heading
    outline: list[OutlineEntry] = Field(default_factory=list)

    def count(self, *outcomes: PageOutcome) -> int:
        return sum(1 for p in self.pages if p.outcome in outcomes)

    @property
    def pages_ok(self) -> int:
        return self.count(PageOutcome.OK, PageOutcome.RECOVERED)

    @property
    def pages_fallback(self) -> int:
        return self.count(PageOutcome.FALLBACK)

    @property
    def pages_quarantined(self) -> int:
        return self.count(PageOutcome.QUARANTINED)

    @property
    def pages_without_text(self) -> int:
        """Pages read and found to hold no text (nothing drawn, or a drawing or image in
        which OCR found no words, with no text layer): ``blank``, outcome ok."""
        return sum(1 for p in self.pages if p.blank and p.outcome is not PageOutcome.QUARANTINED)

    def check_accounting(self) -> None:
        """pages in = ok + fallback + quarantined; raises AssertionError if broken."""
        indexes = sorted(p.index for p in self.pages)
        if indexes != list(range(self.page_count)):
            raise AssertionError(
                f"{self.source}: page results {indexes[:5]}... do not cover 0..{self.page_count - 1}"
            )
        total = self.pages_ok + self.pages_fallback + self.pages_quarantined
        if total != self.page_count:
            raise AssertionError(f"{self.source}: {total} outcomes for {self.page_count} pages")


class Chunk(BaseModel):
    """A retrieval unit with what a citation needs (page span, boxes, heading path).

    Pages are numbered from 1, as people cite them and as ``document.md``,
    ``pages.jsonl``, ``document.json`` and ``folio search`` show them (``PageResult.index``
    is the only 0-based page count, inside the pipeline).
    """

    id: str  # deterministic: hash(source, document sha, config hash, chunk index)
    doc_id: str
    source: str
    index: int
    text: str
    kind: Literal["text", "table", "figure"] = "text"
    page_start: int  # first page, from 1
    page_end: int  # last page, from 1
    headings: list[str] = Field(default_factory=list)
    boxes: list[tuple[int, BBox]] = Field(default_factory=list)  # (page number from 1, bbox)
    #: the version the chunk belongs to (docs/index-sync.md): the source's bytes and the
    #: settings' hash; a source's rows are replaced whole when either changes
    sha256: str = ""
    config_hash: str = ""
    #: a figure chunk's crop: a local path or ``s3://`` URI an application can show
    image_uri: str | None = None
    #: where the chunk starts in a source without pages of its own (its first block's
    #: :attr:`Block.location`: ``Shipments!A1:G51``, ``slide 3``); the blocks in
    #: pages.jsonl carry it too; not (yet) a column of the vector stores
    location: str | None = None
