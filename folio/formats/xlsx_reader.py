"""An XLSX workbook read sheet by sheet: each sheet a page, a section headed by its name,
its used range one table with its header row.

Values are what Excel shows when it opens the file: formulas give the value Excel cached
when it last saved the workbook (a workbook written by a program that computes no
formulas has none: such cells are empty), dates read as ISO dates (``2024-03-31``,
``2024-03-31 14:05:00`` with a time), whole numbers without ``.0``. Rows with no value
are left out of the table (a blank row between blocks of data is layout, not data);
columns with no value at either edge are trimmed. Hidden sheets are read as the others,
their heading saying ``(hidden)``: what a workbook hides from its reader may still be what
a search is for. A lone value in the first row over a wider table (a title set above the
columns) becomes the table's caption, the row under it the header row. Merged cells are
colspan/rowspan; hyperlinks are markdown links; cell comments follow the table, labelled
with their cell; charts drawn on the sheet follow as tables of their data, pictures as
figures.

Bounds: sheets are streamed (openpyxl's read-only mode), at most ``max_rows`` rows of a
sheet and ``max_cells`` cells of the workbook are read; the rest is not, and the sheet's
page says so in its notes and in a line of its markdown.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from folio.formats.office_blocks import (
    NativeRead,
    PageDraft,
    clean_text,
    markdown_link,
    table_block,
)
from folio.formats.office_charts import chart_table, chart_title
from folio.formats.ooxml_parts import Package
from folio.models import Label, TableCell

__all__ = ["read_xlsx"]

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_XDR = "{http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_REF = re.compile(r"^\$?([A-Z]{1,3})\$?(\d+)$")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def column_letter(n: int) -> str:
    """1 -> A, 27 -> AA."""
    out = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def _column_number(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - ord("A") + 1
    return n


def _cell(ref: str) -> tuple[int, int] | None:
    """``B3`` -> (row 3, column 2)."""
    match = _REF.match(ref.strip().upper())
    return (int(match.group(2)), _column_number(match.group(1))) if match else None


def sheet_ref(name: str) -> str:
    """A sheet's name as a reference writes it: quoted unless plain (``'Q3 Sales'``)."""
    return name if _PLAIN_NAME.match(name) else "'" + name.replace("'", "''") + "'"


def value_text(value: Any, number_format: str | None = "") -> str:
    """A cell's value as Excel shows it, near enough to search: ISO dates, whole numbers
    without ``.0``, percentages as percentages (``0.31`` formatted ``0%`` is ``31%``),
    booleans as TRUE/FALSE."""
    if value is None:
        return ""
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and "%" in (number_format or "")):
        return f"{value * 100:.12g}%"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"
    return clean_text(str(value)).strip()


@dataclass
class _Extras:
    """What openpyxl's read-only mode does not give: merges, links, comments, drawings."""

    merges: list[tuple[int, int, int, int]] = field(default_factory=list)  # r1, c1, r2, c2
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    comments: list[tuple[str, str, str]] = field(default_factory=list)  # ref, author, text
    drawings: list[str] = field(default_factory=list)  # drawing part names


def _extras(package: Package, part: str) -> _Extras:
    found = _Extras()
    rels = package.rels(part)
    links: dict[str, str] = {}
    try:
        with package.archive.open(part) as stream:
            for _, el in etree.iterparse(stream, events=("end",), resolve_entities=False,
                                         no_network=True, huge_tree=True,
                                         tag=(f"{S}mergeCell", f"{S}hyperlink", f"{S}row",
                                              f"{S}drawing")):
                if el.tag == f"{S}mergeCell":
                    a, _, b = (el.get("ref") or "").partition(":")
                    first, last = _cell(a), _cell(b or a)
                    if first and last:
                        found.merges.append((*first, *last))
                elif el.tag == f"{S}hyperlink":
                    rel = rels.get(el.get(f"{R}id") or "")
                    if rel is not None and rel.external:
                        links[el.get("ref") or ""] = rel.target
                elif el.tag == f"{S}drawing":
                    rel = rels.get(el.get(f"{R}id") or "")
                    if rel is not None and not rel.external:
                        found.drawings.append(rel.target)
                el.clear()  # rows are openpyxl's: kept out of memory here
    except (etree.XMLSyntaxError, KeyError, zipfile.BadZipFile):
        return found
    for ref, url in links.items():
        cell = _cell(ref.partition(":")[0])
        if cell:
            found.links[cell] = url
    for rel in rels.values():
        if rel.type == "comments" and not rel.external:
            root = package.xml(rel.target)
            if root is None:
                continue
            authors = [clean_text("".join(a.itertext())) for a in root.iter(f"{S}author")]
            for comment in root.iter(f"{S}comment"):
                author_id = int(comment.get("authorId") or 0)
                author = (authors[author_id] if 0 <= author_id < len(authors) else "").strip()
                text = clean_text("".join(t.text or "" for t in comment.iter(f"{S}t")))
                found.comments.append((comment.get("ref") or "", author, " ".join(text.split())))
    return found


@dataclass
class _Budget:
    max_rows: int
    cells_left: int


def _sheet(page: PageDraft, ws: Any, extras: _Extras, name: str, budget: _Budget) -> None:
    rows: list[tuple[int, list[str]]] = []
    declared = getattr(ws, "max_row", None)
    stopped: int | None = None
    for r, cells in enumerate(ws.iter_rows(), start=1):
        if len(rows) >= budget.max_rows or budget.cells_left <= 0:
            stopped = r
            break
        texts = [value_text(getattr(c, "value", None), getattr(c, "number_format", ""))
                 for c in cells]
        if not any(texts):
            continue
        budget.cells_left -= len(texts)
        rows.append((r, texts))
    if stopped is not None:
        why = ("office.max_rows" if len(rows) >= budget.max_rows else "office.max_cells")
        note = (f"sheet {name}: rows from {stopped} on not read (over {why}; the sheet "
                f"declares {declared or 'more'} rows)")
        page.notes.append(note)
    if rows:
        _table(page, rows, extras, name)
    if stopped is not None:
        page.add(Label.TEXT.value, f"*{page.notes[-1]}*", location=name)


def _table(page: PageDraft, rows: list[tuple[int, list[str]]], extras: _Extras,
           name: str) -> None:
    filled = [c for _, texts in rows for c, t in enumerate(texts, start=1) if t]
    c_min, c_max = min(filled), max(filled)
    first = [t for t in rows[0][1][c_min - 1:c_max] if t]
    if len(rows) > 2 and len(first) == 1 and len([t for t in rows[1][1] if t]) >= 2:
        page.add(Label.CAPTION.value, first[0], location=f"{sheet_ref(name)}!"
                 f"{column_letter(c_min)}{rows[0][0]}")  # a title set above the columns
        rows = rows[1:]
    kept = [r for r, _ in rows]
    position = {r: n for n, r in enumerate(kept)}
    spans: dict[tuple[int, int], tuple[int, int]] = {}
    covered: set[tuple[int, int]] = set()
    for r1, c1, r2, c2 in extras.merges:
        inside = [r for r in kept if r1 <= r <= r2]
        if r1 not in position or not inside:
            continue
        c1, c2 = max(c1, c_min), min(c2, c_max)
        if c1 > c2:
            continue
        spans[(r1, c1)] = (len(inside), c2 - c1 + 1)
        covered.update((r, c) for r in inside for c in range(c1, c2 + 1) if (r, c) != (r1, c1))
    grid: list[list[TableCell]] = []
    for r, texts in rows:
        row: list[TableCell] = []
        for c in range(c_min, c_max + 1):
            if (r, c) in covered:
                continue
            text = texts[c - 1] if c - 1 < len(texts) else ""
            if (r, c) in extras.links and text:
                text = markdown_link(text, extras.links[(r, c)])
            row_span, col_span = spans.get((r, c), (1, 1))
            row.append(TableCell(row=position[r], col=c - c_min, row_span=row_span,
                                 col_span=col_span, text=text))
        grid.append(row)
    where = (f"{sheet_ref(name)}!{column_letter(c_min)}{kept[0]}:"
             f"{column_letter(c_max)}{kept[-1]}")
    block = table_block(grid, header_rows=1, order=0, location=where)
    if block is not None:
        page.append(block)


def _after(page: PageDraft, package: Package, read: NativeRead, extras: _Extras,
           name: str, index: int) -> None:
    """Comments, then the charts and pictures drawn on the sheet."""
    for ref, author, text in extras.comments:
        if text:
            who = f" by {author}" if author else ""
            page.add(Label.TEXT.value, f"> Comment on {ref}{who}: {text}",
                     location=f"{sheet_ref(name)}!{ref}")
    for drawing in extras.drawings:
        rels = package.rels(drawing)
        root = package.xml(drawing)
        if root is None:
            continue
        for anchor in root:
            for chart in anchor.iter(f"{_C}chart"):
                rel = rels.get(chart.get(f"{R}id") or "")
                chart_root = package.xml(rel.target) if rel and not rel.external else None
                if chart_root is None:
                    continue
                title = chart_title(chart_root)
                if title:
                    page.add(Label.CAPTION.value, f"Chart: {title}", location=name)
                block = table_block(chart_table(chart_root), header_rows=1, order=0,
                                    location=name)
                if block is not None:
                    page.append(block)
            for blip in anchor.iter(f"{_A}blip"):
                rel = rels.get(blip.get(f"{R}embed") or "")
                data = package.read(rel.target) if rel and not rel.external else None
                if not data or rel is None:
                    continue
                pr = anchor.find(f".//{_XDR}cNvPr")
                alt = clean_text((pr.get("descr") or pr.get("title") or "")
                                 if pr is not None else "").strip()
                image = read.image_name(index, posixpath.splitext(rel.target)[1])
                read.images[image] = data
                page.add(Label.PICTURE.value, alt, image=image, alt=alt or None, location=name)


def read_xlsx(path: Path, *, max_rows: int, max_cells: int) -> NativeRead:
    """The workbook's pages, one a sheet (see the module's docstring)."""
    import openpyxl

    read = NativeRead(pages=[], why="native XLSX: a page is a sheet")
    budget = _Budget(max_rows=max_rows, cells_left=max_cells)
    with path.open("rb") as handle, Package(zipfile.ZipFile(path)) as package:
        workbook = openpyxl.load_workbook(handle, read_only=True, data_only=True,
                                          keep_links=False)
        try:
            for index, ws in enumerate(workbook.worksheets):
                name = clean_text(ws.title)
                page = PageDraft()
                hidden = getattr(ws, "sheet_state", "visible") != "visible"
                page.add(Label.SECTION_HEADER.value, name + (" (hidden)" if hidden else ""),
                         level=1, location=sheet_ref(name))
                extras = _extras(package, getattr(ws, "_worksheet_path", ""))
                _sheet(page, ws, extras, name, budget)
                _after(page, package, read, extras, name, index)
                read.pages.append(page)
        finally:
            workbook.close()
    if not read.pages:
        read.pages.append(PageDraft())
    return read
