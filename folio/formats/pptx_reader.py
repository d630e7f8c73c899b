"""A PPTX deck read slide by slide: a slide is a page (``location`` ``slide N``).

Its title is a heading (a title slide's centred title a Title at level 1, other slides'
titles section headers at level 2, under it); its text in the order of its shapes on the
slide (top to bottom, then left to right), with bullets and numbered paragraphs as list
items at their indent level (a body placeholder's paragraphs are bulleted unless they
say ``buNone``, as the master's bullets are); hyperlinks as markdown links; tables with
their merged cells and the first row as header (PowerPoint's "header row" flag does not survive a conversion); charts as a caption
and a table of their cached data; pictures as figures with their alt text; groups read
inside. Speaker notes follow the slide's content, labelled (``location`` ``slide N
notes``), unless ``office.speaker_notes`` is off. A hidden slide is read as the others,
its page noting it. A slide without a title is headed ``Slide N``, so its chunks do not
carry the heading of the slide before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from folio.formats.docx_numbering import format_number
from folio.formats.office_blocks import (
    NativeRead,
    PageDraft,
    clean_text,
    markdown_link,
    table_block,
)
from folio.formats.office_charts import chart_table, chart_title
from folio.models import Label, TableCell

__all__ = ["read_pptx"]

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_AUTO = re.compile(r"^(arabic|alphaLc|alphaUc|romanLc|romanUc)(Period|ParenR|ParenBoth|Plain)")
_FORMATS = {"arabic": "decimal", "alphaLc": "lowerLetter", "alphaUc": "upperLetter",
            "romanLc": "lowerRoman", "romanUc": "upperRoman"}
#: placeholder types whose paragraphs the master bullets
_BULLETED = frozenset({"BODY", "OBJECT"})


def _auto_marker(scheme: str, n: int) -> str:
    match = _AUTO.match(scheme)
    kind, punct = (match.group(1), match.group(2)) if match else ("arabic", "Period")
    number = format_number(n, _FORMATS[kind])
    return {"Period": f"{number}.", "ParenR": f"{number})", "ParenBoth": f"({number})"}.get(
        punct, number)


def _paragraph_text(paragraph: Any) -> str:
    parts = []
    for run in paragraph.runs:
        text = run.text
        address = run.hyperlink.address if run.hyperlink is not None else None
        parts.append(markdown_link(text, address) if address and text.strip() else text)
    if not paragraph.runs:
        parts.append(paragraph.text)
    return clean_text("".join(parts)).replace("\t", " ").strip()


def _text_frame(page: PageDraft, frame: Any, bulleted: bool, where: str) -> None:
    counts: dict[int, int] = {}
    for paragraph in frame.paragraphs:
        text = _paragraph_text(paragraph)
        level = min(int(paragraph.level or 0), 5)
        ppr = paragraph._p.find(f"{_A}pPr")
        auto = ppr.find(f"{_A}buAutoNum") if ppr is not None else None
        none = ppr is not None and ppr.find(f"{_A}buNone") is not None
        char = ppr is not None and ppr.find(f"{_A}buChar") is not None
        if not text:
            continue
        for deeper in [k for k in counts if k > level]:
            del counts[deeper]
        if auto is not None:
            start = int(auto.get("startAt") or 1)
            counts[level] = counts.get(level, start - 1) + 1
            marker: str | None = _auto_marker(auto.get("type") or "", counts[level])
        elif char or (bulleted and not none):
            marker = "-"
        else:
            marker = None
        if marker is None:
            page.add(Label.TEXT.value, text, location=where)
        else:
            page.add(Label.LIST_ITEM.value, text, marker=marker, level=level + 1,
                     location=where)


def _table(page: PageDraft, shape: Any, where: str) -> None:
    table = shape.table
    rows: list[list[TableCell]] = []
    for r, row in enumerate(table.rows):
        cells: list[TableCell] = []
        for c, cell in enumerate(row.cells):
            if cell.is_spanned:
                continue
            text = " ".join(t for t in (_paragraph_text(p) for p in cell.text_frame.paragraphs)
                            if t)
            cells.append(TableCell(row=r, col=c, row_span=cell.span_height if
                                   cell.is_merge_origin else 1, col_span=cell.span_width
                                   if cell.is_merge_origin else 1, text=text))
        rows.append(cells)
    block = table_block(rows, header_rows=1, order=0,
                        location=where)
    if block is not None:
        page.append(block)


def _chart(page: PageDraft, shape: Any, where: str) -> None:
    space = shape.chart._chartSpace
    title = chart_title(space)
    if title:
        page.add(Label.CAPTION.value, f"Chart: {title}", location=where)
    block = table_block(chart_table(space), header_rows=1, order=0, location=where)
    if block is not None:
        page.append(block)


def _picture(page: PageDraft, shape: Any, read: NativeRead, index: int, where: str) -> None:
    try:
        image = shape.image
        data, ext = image.blob, image.ext
    except (AttributeError, KeyError, ValueError):
        return
    pr = shape._element.find(".//{http://schemas.openxmlformats.org/presentationml/2006/main}"
                             "cNvPr")
    alt = clean_text((pr.get("descr") or pr.get("title") or "") if pr is not None else "").strip()
    name = read.image_name(index, ext)
    read.images[name] = data
    page.add(Label.PICTURE.value, alt, image=name, alt=alt or None, location=where)


def _position(shape: Any) -> tuple[int, int]:
    return (int(shape.top or 0), int(shape.left or 0))


def _shapes(page: PageDraft, shapes: Any, read: NativeRead, index: int, where: str,
            title: Any) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in sorted(shapes, key=_position):
        if title is not None and shape.shape_id == title.shape_id:
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            _shapes(page, shape.shapes, read, index, where, None)
        elif getattr(shape, "has_table", False) and shape.has_table:
            _table(page, shape, where)
        elif getattr(shape, "has_chart", False) and shape.has_chart:
            _chart(page, shape, where)
        elif shape.shape_type == MSO_SHAPE_TYPE.PICTURE or hasattr(shape, "image"):
            _picture(page, shape, read, index, where)
        elif shape.has_text_frame:
            kind = (shape.placeholder_format.type.name if shape.is_placeholder
                    and shape.placeholder_format.type is not None else "")
            _text_frame(page, shape.text_frame, kind in _BULLETED, where)


def read_pptx(path: Path, *, speaker_notes: bool) -> NativeRead:
    """The deck's pages, one a slide (see the module's docstring)."""
    from pptx import Presentation

    with path.open("rb") as handle:
        deck = Presentation(handle)
    read = NativeRead(pages=[], why="native PPTX: a page is a slide")
    for index, slide in enumerate(deck.slides):
        page = PageDraft()
        where = f"slide {index + 1}"
        if slide._element.get("show") in ("0", "false"):
            page.notes.append(f"slide {index + 1} is hidden in the deck")
        title = slide.shapes.title
        text = ""
        if title is not None and title.has_text_frame:
            text = " ".join(clean_text(title.text_frame.text).split())
        if text:
            centred = (title.placeholder_format.type is not None
                       and title.placeholder_format.type.name == "CENTER_TITLE")
            page.add(Label.TITLE.value if centred else Label.SECTION_HEADER.value, text,
                     level=1 if centred else 2, location=where)
        else:  # an untitled slide's chunks must not carry the slide before's heading
            page.add(Label.SECTION_HEADER.value, f"Slide {index + 1}", level=2,
                     location=where)
        _shapes(page, slide.shapes, read, index, where, title)
        if speaker_notes and slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            text = clean_text(frame.text).strip() if frame is not None else ""
            if text:
                page.add(Label.TEXT.value, f"Speaker notes: {text}",
                         location=f"{where} notes")
        read.pages.append(page)
    if not read.pages:
        read.pages.append(PageDraft())
    return read
