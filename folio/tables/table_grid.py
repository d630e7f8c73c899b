"""A table's grid (rows, columns, cells) from the boxes of its words. Pure.

Why: the CPU engines see a table as words on a page; a reader (and a retrieval chunk)
needs to know which number sits under which heading. Tables in general share a few
traits this module relies on, none of them specific to one document:

* a row's words sit on one baseline band: rows are clusters of word boxes by their
  vertical overlap (:func:`lines`);
* columns are separated by gaps that run down the whole table: the x-ranges no phrase
  covers (:func:`separators`); a phrase is words closer than a word space, so the space
  inside "Net income" never reads as a column gap. A title or a header spanning several
  columns crosses a gap, so only the fullest lines define gaps (:data:`FULL_SHARE`), and
  the phrases of other lines that cross one become spanning cells. Vertical ruling
  lines, when the page has them, are separators too;
* a cell written on two lines leaves the first column (the row's key) empty on its
  second line, or carries on a phrase in lower case; such a line joins the row above
  (:func:`continues`), so a two-line header cell is one cell. A horizontal ruling line
  between two lines always starts a new row.

* a word set at an angle (column headings turned 45 or 90 degrees to fit narrow
  columns) has a box far taller than a line; it starts at its column, so it is placed by
  the first letter's square at its box's bottom-left (:func:`upright`);
* the head of a table is the rows above its first figures (:func:`header_rows`); a
  heading there with empty slots either side that is centred over several columns heads
  them all (a group heading such as "ReACT" over "Procedure | Completion | Knowledge").

Input boxes are in any unit with y growing downwards (page points here). Word order
within a cell follows the page (top to bottom, left to right; right to left, columns
too, when most letters are of a right-to-left script). A grid mostly empty
(:data:`MIN_FILLED`) is refused: forms and loose labels make sparse, misleading grids.
"""

from __future__ import annotations

import html
import statistics
import unicodedata
from collections.abc import Sequence

from pydantic import BaseModel, Field

from folio.models import BBox, TableCell, WordBox
from folio.tables.table_columns import (
    _limits,
    _Phrase,
    _phrases,
    _place,
    _vertical,
    _with_walls,
    separators,
)
from folio.tables.table_rows import (
    _NUMBER,
    COL_SPAN_TOLERANCE,
    _horizontal,
    _Row,
    _row_rules,
    _rows,
    lines,
    row_span,
)

__all__ = ["TableGrid", "build_grid", "grid_html", "header_rows", "upright", "words_inside"]

#: a grid with fewer of its slots filled than this is no table read right (a form, a
#: page of loose labels the detector took for a table): it stays text, in reading order
MIN_FILLED = 0.4
#: a word box this many word heights tall is a word set at an angle
TURNED = 2.0
#: scripts written right to left: a table in them is read mirrored
_RTL_CLASSES = frozenset({"R", "AL"})


class TableGrid(BaseModel):
    """A table as a grid: ``rows`` x ``cols`` slots, cells each in the slot of their top-
    left corner (spanning cells cover more than one slot; empty slots have no cell)."""

    rows: int
    cols: int
    cells: list[TableCell] = Field(default_factory=list)
    #: leading rows that head the columns (written as ``<th>``)
    header_rows: int = 1


def build_grid(words: Sequence[WordBox], rulings: Sequence[BBox] = ()) -> TableGrid | None:
    """The grid of the table whose words are ``words``; None when they do not make one
    (set sideways, fewer than two rows or two columns, fewer than half the rows with two cells or
    more, or mostly empty: a table the grid cannot read stays text, and so does prose a
    layout model took for a table).

    ``rulings`` are thin boxes of the page's ruling lines within the table (vertical ones
    separate columns, horizontal ones rows); they are optional.
    """
    words = [w for w in words if w.text.strip() and w.x1 > w.x0 and w.y1 > w.y0]
    if len(words) < 2:
        return None
    if _sideways(words):
        return None  # rows run down the page: its lines are not the table's rows
    if _right_to_left(words):  # read it mirrored: words and columns run right to left
        words = [_mirror(w) for w in words]
        rulings = [BBox(x0=-r.x1, y0=r.y0, x1=-r.x0, y1=r.y1) for r in rulings]
    height = statistics.median(w.y1 - w.y0 for w in words)
    words = [upright(w, height) for w in words]
    left, right = min(w.x0 for w in words), max(w.x1 for w in words)
    walls = _vertical(rulings, height, (left, right))
    rows_of_words = lines(words)
    phrases = [_phrases(line.words, height, walls) for line in rows_of_words]
    cuts = _with_walls(separators(phrases, height), walls)
    if not cuts:
        return None
    for line in phrases:
        _place(line, cuts)
    limits = _limits(cuts, right, height)
    bands = _row_rules(rulings, rows_of_words, (left, right))
    grid_rows = _rows(rows_of_words, phrases, _horizontal(rulings), height, limits, bands)
    if len(grid_rows) < 2 or sum(len(r.cells) > 1 for r in grid_rows) < len(grid_rows) / 2:
        return None  # most rows of a table have cells side by side; prose has none
    grid = _grid(grid_rows, len(cuts) + 1, height)
    grid.header_rows = header_rows(grid)
    _centre_headings(grid, grid_rows, _column_extents(phrases, len(cuts) + 1), height)
    return grid if filled_share(grid) >= MIN_FILLED else None


def upright(word: WordBox, height: float) -> WordBox:
    """``word`` placed by its first letter when it is set at an angle (a box over
    :data:`TURNED` line ``height``s tall and over 1.5 wide): a heading turned to run up
    to the right starts at its box's bottom-left, where its first letter's box, about a
    ``height`` inside the corner, stands over its column; the word becomes a ``height``
    square centred there (half as wide, so the next turned heading stays apart). Words
    set level, or turned a right angle (as narrow as a line is tall), are unchanged."""
    if word.y1 - word.y0 <= TURNED * height or word.x1 - word.x0 <= 1.5 * height:
        return word
    centre = word.x0 + height
    return word.model_copy(update={"x0": centre - height / 4, "x1": centre + height / 4,
                                   "y0": word.y1 - height})


def header_rows(grid: TableGrid) -> int:
    """How many leading rows head the table: those above the first row holding a figure
    (at least one; at most half the rows; one when no row holds a figure)."""
    numeric = sorted({c.row for c in grid.cells if _NUMBER.fullmatch(c.text.strip())})
    if not numeric:
        return 1
    return max(1, min(numeric[0], grid.rows // 2))


def _column_extents(phrases: Sequence[Sequence[_Phrase]], n_cols: int
                    ) -> list[tuple[float, float] | None]:
    """Each column's left and right text edges, from the phrases inside one column."""
    out: list[tuple[float, float] | None] = [None] * n_cols
    for line in phrases:
        for p in line:
            if p.first_col == p.last_col and p.first_col < n_cols:
                old = out[p.first_col]
                out[p.first_col] = (p.x0, p.x1) if old is None else (
                    min(old[0], p.x0), max(old[1], p.x1))
    return out


def _centre_headings(grid: TableGrid, rows: Sequence[_Row],
                     extents: Sequence[tuple[float, float] | None], height: float) -> None:
    """Widen each heading of the head rows over the free columns either side when it is
    centred over them (the widest such run; spans of other cells untouched)."""
    for cell in grid.cells:
        if cell.row >= grid.header_rows or cell.row_span > 1:
            continue
        built = rows[cell.row].cells.get(cell.col)
        if built is None:
            continue
        centre = (built.left + built.right) / 2
        taken = {c.col + k for c in grid.cells if c.row <= cell.row < c.row + c.row_span
                 and c is not cell for k in range(c.col_span)}
        best: tuple[int, int] | None = None
        last = cell.col + cell.col_span - 1
        a = cell.col
        while a >= 0 and a not in taken:
            b = last
            while b < grid.cols and b not in taken:
                ends = (extents[a], extents[b]) if b < len(extents) else (None, None)
                if ends[0] is not None and ends[1] is not None and (b - a > last - cell.col) and (
                        abs((ends[0][0] + ends[1][1]) / 2 - centre) <= COL_SPAN_TOLERANCE * height):
                    if best is None or b - a > best[1] - best[0]:
                        best = (a, b)
                b += 1
            a -= 1
        if best is not None:
            cell.col, cell.col_span = best[0], best[1] - best[0] + 1


def _grid(rows: list[_Row], n_cols: int, height: float) -> TableGrid:
    cells = [
        TableCell(row=r, col=col, col_span=row.cells[col].span,
                  row_span=row_span(rows, r, col, height),
                  text=" ".join(row.cells[col].pieces))
        for r, row in enumerate(rows)
        for col in sorted(row.cells)
    ]
    used = max(c.col + c.col_span for c in cells)
    return TableGrid(rows=len(rows), cols=max(n_cols, used), cells=cells)


def filled_share(grid: TableGrid) -> float:
    """The share of the grid's slots that a cell covers (spans count for every slot)."""
    covered = sum(c.row_span * c.col_span for c in grid.cells)
    return covered / (grid.rows * grid.cols) if grid.rows and grid.cols else 0.0


def _right_to_left(words: Sequence[WordBox]) -> bool:
    """Whether most of the letters are of a right-to-left script (Arabic, Hebrew)."""
    letters = [c for w in words for c in w.text if c.isalpha()]
    rtl = sum(1 for c in letters if unicodedata.bidirectional(c) in _RTL_CLASSES)
    return bool(letters) and rtl > len(letters) / 2


def _sideways(words: Sequence[WordBox]) -> bool:
    """Whether most words of three letters or more are taller than wide: a page or a
    table set sideways (a scan read turned a right angle), whose grid would cross it."""
    long = [w for w in words if len(w.text) >= 3]
    tall = sum(1 for w in long if w.y1 - w.y0 > w.x1 - w.x0)
    return bool(long) and tall > len(long) / 2


def _mirror(word: WordBox) -> WordBox:
    return word.model_copy(update={"x0": -word.x1, "x1": -word.x0})


def words_inside(words: Sequence[WordBox], boxes: Sequence[BBox]) -> list[WordBox]:
    """The words whose centre lies in one of ``boxes`` (the blocks of a table)."""

    def inside(word: WordBox, box: BBox) -> bool:
        cx, cy = (word.x0 + word.x1) / 2, (word.y0 + word.y1) / 2
        return box.x0 <= cx <= box.x1 and box.y0 <= cy <= box.y1

    return [w for w in words if any(inside(w, box) for box in boxes)]


def grid_html(grid: TableGrid) -> str:
    """The grid as an HTML ``<table>``: the head rows (:attr:`TableGrid.header_rows`) as
    header cells, spans as rowspan/colspan, empty slots as empty cells."""
    covered: set[tuple[int, int]] = set()
    by_slot = {(c.row, c.col): c for c in grid.cells}
    out = ["<table>"]
    for r in range(grid.rows):
        tag = "th" if r < grid.header_rows and grid.rows > 1 else "td"
        parts = []
        for col in range(grid.cols):
            if (r, col) in covered:
                continue
            cell = by_slot.get((r, col))
            if cell is None:
                parts.append(f"<{tag}></{tag}>")
                continue
            covered.update((r + dr, col + dc) for dr in range(cell.row_span)
                           for dc in range(cell.col_span))
            attrs = (f' rowspan="{cell.row_span}"' if cell.row_span > 1 else "") + (
                f' colspan="{cell.col_span}"' if cell.col_span > 1 else "")
            parts.append(f"<{tag}{attrs}>{html.escape(cell.text, quote=False)}</{tag}>")
        out.append("<tr>" + "".join(parts) + "</tr>")
    out.append("</table>")
    return "\n".join(out)
