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
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from folio.models import BBox, TableCell, WordBox

__all__ = ["TableGrid", "build_grid", "grid_html", "header_rows", "lines", "upright",
           "words_inside"]

#: words closer than this many word heights belong to one phrase: word spaces are about
#: 0.25-0.5 of a word box's height, a column gap is usually a full em or more
PHRASE_GAP = 0.6
#: lines with at least this share of the fullest lines' phrases define the column gaps
FULL_SHARE = 0.75
#: full lines that may cross a column gap, as a share of them (a row whose key is
#: written across the key columns)
CROSSING_SHARE = 0.15
#: a column gap narrower than this many word heights is noise between ragged phrases
MIN_GAP = 0.3
#: a cell centred within this many word heights of several rows' joint middle spans them
ROW_SPAN_TOLERANCE = 0.25
#: a one-line cell whose middle is this many word heights below its row's is centred on
#: more than its row (OCR boxes of one line differ by less)
LOWER_CELL = 0.35
#: a word space, in word heights, for telling whether a word would have fitted on a line
WORD_SPACE = 0.3
#: two lines more than this many word heights apart are separate rows, whatever else
MAX_CONTINUATION_GAP = 1.0
#: a word box joins a line when it overlaps the line's band by this share of its height
LINE_OVERLAP = 0.5
#: a grid with fewer of its slots filled than this is no table read right (a form, a
#: page of loose labels the detector took for a table): it stays text, in reading order
MIN_FILLED = 0.4
#: a word box this many word heights tall is a word set at an angle
TURNED = 2.0
#: a heading centred within this many word heights of several columns' middle spans them
COL_SPAN_TOLERANCE = 1.0
#: a horizontal ruling this share of the table's width or wider rules a row (narrower
#: ones underline a group heading)
ROW_RULE_WIDTH = 0.8
#: scripts written right to left: a table in them is read mirrored
_RTL_CLASSES = frozenset({"R", "AL"})
#: a cell that is a figure: digits with the signs, separators and units around them
_NUMBER = re.compile(r"[-+−–(]?[$€£¥]?\s?[\d.,\s]*\d[\d.,\s]*%?\)?\*?")


class TableGrid(BaseModel):
    """A table as a grid: ``rows`` x ``cols`` slots, cells each in the slot of their top-
    left corner (spanning cells cover more than one slot; empty slots have no cell)."""

    rows: int
    cols: int
    cells: list[TableCell] = Field(default_factory=list)
    #: leading rows that head the columns (written as ``<th>``)
    header_rows: int = 1


@dataclass
class _Line:
    """Words on one baseline band, left to right: ``y0``/``y1`` enclose them all,
    ``top``/``bottom`` are their mean edges (the band a new word is matched against)."""

    words: list[WordBox]
    y0: float
    y1: float
    top: float
    bottom: float

    @classmethod
    def of(cls, word: WordBox) -> _Line:
        return cls([word], word.y0, word.y1, word.y0, word.y1)

    def add(self, word: WordBox) -> None:
        n = len(self.words)
        self.words.append(word)
        self.y0, self.y1 = min(self.y0, word.y0), max(self.y1, word.y1)
        self.top = (self.top * n + word.y0) / (n + 1)
        self.bottom = (self.bottom * n + word.y1) / (n + 1)


@dataclass
class _Phrase:
    """Words of one line closer than a word space: the unit that is placed in columns."""

    words: list[WordBox]
    first_col: int = 0
    last_col: int = 0

    @property
    def x0(self) -> float:
        return self.words[0].x0

    @property
    def x1(self) -> float:
        return max(w.x1 for w in self.words)

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)


@dataclass
class _Cell:
    """One cell being built: its text pieces (one a line), its span, the right edge of
    its last line and the width of its first word (to tell a wrapped line), and its
    top and bottom (to tell a cell centred over several rows)."""

    pieces: list[str]
    span: int
    right: float
    first_width: float
    top: float
    bottom: float
    left: float = 0.0


@dataclass
class _Row:
    """One grid row being built: its cells by first column."""

    y0: float
    y1: float
    cells: dict[int, _Cell] = field(default_factory=dict)


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


def lines(words: Sequence[WordBox]) -> list[_Line]:
    """Words clustered into lines by vertical overlap, top to bottom, each left to right.

    A word joins the lowest recent line whose band it overlaps by :data:`LINE_OVERLAP`
    of the smaller height (a superscript or a tall bracket still joins its line). The
    band is the mean of the line's word edges, not their union: a header cell centred
    between two header lines would otherwise widen the band over both and chain them
    into one line."""
    found: list[_Line] = []
    for word in sorted(words, key=lambda w: (w.y0 + w.y1) / 2):
        target = None
        for line in reversed(found[-3:]):  # only recent lines can overlap a word this low
            overlap = min(line.bottom, word.y1) - max(line.top, word.y0)
            if overlap >= LINE_OVERLAP * min(line.bottom - line.top, word.y1 - word.y0):
                target = line
                break
        if target is None:
            found.append(_Line.of(word))
        else:
            target.add(word)
    for line in found:
        line.words.sort(key=lambda w: w.x0)
    return sorted(found, key=lambda ln: ln.y0)


def _phrases(words: list[WordBox], height: float, walls: Sequence[float]) -> list[_Phrase]:
    """A line's words joined into phrases where the gap is under a word space and no
    vertical ruling (``walls``) runs between them."""
    out: list[_Phrase] = []
    for word in words:
        between = any(out[-1].x1 - 1 <= x <= word.x0 + 1 for x in walls) if out else False
        if out and not between and word.x0 - out[-1].x1 < PHRASE_GAP * height:
            out[-1].words.append(word)
        else:
            out.append(_Phrase([word]))
    return out


def separators(phrases: Sequence[Sequence[_Phrase]], height: float
               ) -> list[tuple[float, float]]:
    """Column gaps, left to right, as x-ranges that almost no phrase of a full line
    covers.

    Full lines are those with at least :data:`FULL_SHARE` as many phrases as the fullest
    lines (the second fullest, so one odd line cannot set the bar alone): a title, a
    group header spanning columns or a section row has fewer phrases and would close
    the gaps it crosses; its phrases become spanning cells instead. A few full lines may
    cross a gap too (:data:`CROSSING_SHARE`: "Average (Easy)" written over the key
    columns of a row of figures)."""
    counts = sorted((len(line) for line in phrases), reverse=True)
    if not counts or counts[0] < 2:
        return []
    bar = FULL_SHARE * counts[min(1, len(counts) - 1)]
    full_lines = [line for line in phrases if len(line) >= max(2.0, bar)]
    full = [p for line in full_lines for p in line]
    if not full:
        return []
    allowed = int(CROSSING_SHARE * len(full_lines))
    return [g for g in _uncovered(full, allowed) if g[1] - g[0] >= MIN_GAP * height]


def _uncovered(phrases: Sequence[_Phrase], allowed: int = 0) -> list[tuple[float, float]]:
    """The x-ranges between the phrases' leftmost and rightmost edges that at most
    ``allowed`` of them cover (a sweep over their edges: a table of a thousand phrases
    costs no more than a sort)."""
    events = sorted([(p.x0, 1) for p in phrases] + [(p.x1, -1) for p in phrases])
    gaps: list[tuple[float, float]] = []
    depth = 0
    for (x, step), (nxt, _) in zip(events, events[1:], strict=False):
        depth += step
        if depth <= allowed and nxt > x:
            if gaps and gaps[-1][1] == x:
                gaps[-1] = (gaps[-1][0], nxt)
            else:
                gaps.append((x, nxt))
    # a few phrases reaching further out than the rest make no column at the edges
    return [g for g in gaps if g[0] > events[0][0] and g[1] < events[-1][0]]


def _vertical(rulings: Sequence[BBox], height: float, span: tuple[float, float]
              ) -> list[float]:
    """The x of each vertical ruling line two rows or more tall strictly between the
    words' left and right ``span`` (the table's frame separates nothing)."""
    return sorted((r.x0 + r.x1) / 2 for r in rulings
                  if r.y1 - r.y0 >= 2 * height and r.x1 - r.x0 <= height / 2
                  and span[0] < (r.x0 + r.x1) / 2 < span[1])


def _with_walls(cuts: list[tuple[float, float]], walls: Sequence[float]
                ) -> list[tuple[float, float]]:
    """Gaps plus the vertical rulings that do not already lie in one, left to right."""
    out = list(cuts)
    for x in walls:
        if not any(a - 1 <= x <= b + 1 for a, b in out):
            out.append((x, x))
    return sorted(out)


def _horizontal(rulings: Sequence[BBox]) -> list[float]:
    """The y of each horizontal ruling line (wider than tall)."""
    return [(r.y0 + r.y1) / 2 for r in rulings if r.x1 - r.x0 > 4 * (r.y1 - r.y0)]


def _row_rules(rulings: Sequence[BBox], found: Sequence[_Line], span: tuple[float, float]
               ) -> list[float]:
    """The y of each full-width horizontal ruling when the table rules its rows, else [].

    A table that draws a rule between its rows (at least two full-width rules with lines
    both above and below) marks every row boundary with one, so the lines between two
    such rules are one row, however many lines its cells wrap to. A table ruled only at
    its head and foot (booktabs: a rule under the head, another over notes) is not: its
    body between two rules is many rows, which the guard on the largest band (under half
    the lines) keeps apart."""
    width = span[1] - span[0]
    ys = sorted((r.y0 + r.y1) / 2 for r in rulings if r.x1 - r.x0 > 4 * (r.y1 - r.y0)
                and r.x1 - r.x0 >= ROW_RULE_WIDTH * width)
    interior = [y for y in ys if any(ln.y1 <= y for ln in found) and any(ln.y0 >= y for ln in found)]
    if len(interior) < 2:
        return []
    bands = [sum(1 for ln in found if a <= ln.y0 and ln.y1 <= b) for a, b in zip(ys, ys[1:], strict=False)]
    return ys if max(bands, default=0) * 2 < len(found) else []


def _same_band(rules: Sequence[float], row: _Row, line: _Line) -> bool:
    """Whether ``line`` lies between the same two row rules as ``row`` (no rule between)."""
    return (any(y <= row.y0 for y in rules) and any(y >= line.y1 for y in rules)
            and not any(row.y1 <= y <= line.y0 for y in rules))


def _own_row(row: _Row, cells: dict[int, _Cell]) -> bool:
    """Whether a line is a data row of its own though no rule sits above it: it fills
    the key column (as the row above does) and holds a figure that sits under an empty
    slot or another figure of the row above. A table that rules groups of rows ("Easy |
    0.87" then "Normal | 0.88" under one topic) keeps them apart, while a cell's second
    line leaves the key empty or holds only wrapped words (figures do not wrap), and a
    heading's second line may end in a figure under its words ("mAP" over "(0.75)")."""
    if 0 not in cells or 0 not in row.cells:
        return False
    return any(_NUMBER.fullmatch(cell.pieces[0]) and (
        col not in row.cells or _NUMBER.fullmatch(row.cells[col].pieces[-1]))
        for col, cell in cells.items())


def _under_group_heading(row: _Row, cells: dict[int, _Cell], height: float) -> int | None:
    """The column of a cell of ``row`` centred over two or more adjacent cells of a line
    whose columns the row leaves otherwise empty: a group heading over its sub-headings
    ("TEDs" over "simple | complex | all"), which stay a row of their own."""
    cols = sorted(cells)
    for col, head in row.cells.items():
        centre = (head.left + head.right) / 2
        for i, a in enumerate(cols):
            for b in cols[i + 1:]:
                run = [c for c in cols if a <= c <= b]
                if run != list(range(a, b + 1)) or not a <= col <= b:
                    continue
                if any(a <= c <= b and c != col for c in row.cells):
                    continue
                if abs((cells[a].left + cells[b].right) / 2 - centre) <= COL_SPAN_TOLERANCE * height:
                    return col
    return None


def _place(phrases: list[_Phrase], cuts: list[tuple[float, float]]) -> None:
    """Each phrase's first and last column: the columns its x-range reaches into."""
    for phrase in phrases:
        phrase.first_col = sum(1 for a, _ in cuts if a < phrase.x0)
        phrase.last_col = sum(1 for _, b in cuts if b <= phrase.x1)
        phrase.last_col = max(phrase.first_col, phrase.last_col)


def _cells(phrases: list[_Phrase]) -> dict[int, _Cell]:
    """A line's cells by first column; phrases sharing a column join."""
    merged: list[_Phrase] = []
    for phrase in phrases:
        if merged and phrase.first_col <= merged[-1].last_col:
            last = merged[-1]
            last.words = last.words + phrase.words
            last.last_col = max(last.last_col, phrase.last_col)
        else:
            merged.append(_Phrase(list(phrase.words), phrase.first_col, phrase.last_col))
    return {p.first_col: _Cell([p.text], p.last_col - p.first_col + 1, p.x1,
                               p.words[0].x1 - p.words[0].x0, min(w.y0 for w in p.words),
                               max(w.y1 for w in p.words), p.x0) for p in merged}


def continues(row: _Row, line_cells: dict[int, _Cell], gap: float, height: float,
              limits: Sequence[float], head: bool = False) -> bool:
    """Whether a line's cells are the second line of ``row``'s cells.

    Only when the line is close below, every cell of it sits under a cell of the row,
    none is a figure, and either the row's first column (its key) is empty on this line
    while the row has one, or the line fills fewer columns than the row and either is
    a ``head`` line (see :func:`_rows`: headings broken over two lines to fit their
    columns, "State funded" over "legal aid", whatever their case or width) or each of
    its cells reads as wrapped: it starts in lower case, and its first word would not
    have fitted after the cell's line above within the column (``limits``: where each
    column's text must end). A new data row fills its key; a cell's second line rarely
    starts a sentence. Numbers do not wrap, so rows under a key written once ("2020 |
    Q1 | 5" then " | Q2 | 6") stay rows, and sub-headings under a group heading stay a
    row of their own: they fill columns the group heading's row has no cell in."""
    if gap > MAX_CONTINUATION_GAP * height or not line_cells:
        return False
    if not set(line_cells) <= set(row.cells):
        return False
    if any(_NUMBER.fullmatch(cell.pieces[0]) for cell in line_cells.values()):
        return False
    top, bottom = _band(row)
    if any(len(cell.pieces) == 1
           and cell.top + cell.bottom > top + bottom + 2 * LOWER_CELL * height
           for cell in row.cells.values()):
        return False  # a one-line cell of the row sits lower, beside this line: it spans
    if 0 not in line_cells and 0 in row.cells:
        return True
    if head and 0 not in row.cells and len(line_cells) < len(row.cells):
        return True
    return len(line_cells) < len(row.cells) and all(
        cell.pieces[0][:1].islower() and _wrapped(row.cells[col], cell, limits[col], height)
        for col, cell in line_cells.items())


def _wrapped(above: _Cell, below: _Cell, limit: float, height: float) -> bool:
    """Whether ``below``'s first word would have overrun ``limit`` on ``above``'s line."""
    return above.right + WORD_SPACE * height + below.first_width > limit


def _limits(cuts: Sequence[tuple[float, float]], right: float, height: float
            ) -> list[float]:
    """Where each column's text must end: a phrase gap before the next column's text
    (the right edge of the table for the last column)."""
    return [b - PHRASE_GAP * height for _, b in cuts] + [right]


def _rows(found: list[_Line], phrases: list[list[_Phrase]], rules: list[float],
          height: float, limits: Sequence[float], bands: Sequence[float] = ()) -> list[_Row]:
    """Lines joined into rows: a continuation line (:func:`continues`) with no
    horizontal ruling above it adds its text to the cells of the row above (a line is a
    head line when it lies above the first line that fills the key column and sits
    closer under the line above than the table's lines usually do: a heading's second
    line is set at the font's leading, rows further apart, so the first rows of a group
    whose key is centred lower down stay rows); a line
    centred between its neighbours in columns both leave empty (:func:`_between`) puts
    its cells in the row above, from where they span down (:func:`row_span`). When the
    table rules its rows (``bands``, :func:`_row_rules`), a line between the same two
    rules as the row above joins it, except sub-headings under a group heading, which
    keep a row of their own while the line's other cells join the cells above them."""
    rows: list[_Row] = []
    all_cells = [_cells(line_phrases) for line_phrases in phrases]
    keyed = [i for i, cells in enumerate(all_cells) if 0 in cells]
    gaps = [b.y0 - a.y1 for a, b in zip(found, found[1:], strict=False)]
    usual = statistics.median(gaps) if gaps else 0.0
    for i, (line, cells) in enumerate(zip(found, all_cells, strict=True)):
        if rows and 0 < i < len(found) - 1 and _between(
                found[i - 1:i + 2], [rows[-1].cells, cells, all_cells[i + 1]], height):
            rows[-1].cells.update(cells)  # disjoint from the row's cells: nothing lost
            continue
        if rows and bands and _same_band(bands, rows[-1], line) and not _own_row(rows[-1], cells):
            last = rows[-1]
            group = _under_group_heading(last, cells, height)
            joining = {c: cell for c, cell in cells.items()
                       if group is None or (c in last.cells and c != group
                                            and last.cells[c].span == 1)}
            for col, cell in joining.items():
                if col in last.cells:
                    last.cells[col].pieces += cell.pieces
                    last.cells[col].right = cell.right
                    last.cells[col].bottom = max(last.cells[col].bottom, cell.bottom)
                else:
                    last.cells[col] = cell
            rest = {c: cell for c, cell in cells.items() if c not in joining}
            last.y1 = max(last.y1, line.y1)
            if rest:
                rows.append(_Row(line.y0, line.y1, rest))
            continue
        if rows:
            last = rows[-1]
            ruled = any(last.y1 <= y <= line.y0 for y in rules)
            head = bool(keyed) and i < keyed[0] and line.y0 - found[i - 1].y1 < usual
            if not ruled and continues(last, cells, line.y0 - last.y1, height, limits, head):
                for col, cell in cells.items():
                    last.cells[col].pieces += cell.pieces
                    last.cells[col].span = min(max(last.cells[col].span, cell.span),
                                               _room(last.cells, col))
                    last.cells[col].right = cell.right
                    last.cells[col].bottom = max(last.cells[col].bottom, cell.bottom)
                last.y1 = max(last.y1, line.y1)
                continue
        rows.append(_Row(line.y0, line.y1, cells))
    return rows


def _room(cells: dict[int, _Cell], col: int) -> int:
    """How many columns the cell at ``col`` may span: up to the row's next cell (a
    wider second line must not cover a neighbour)."""
    after = [c for c in cells if c > col]
    return min(after) - col if after else 1 << 16


def _between(three: Sequence[_Line], cells: Sequence[dict[int, _Cell]], height: float
             ) -> bool:
    """Whether the middle of three lines is a cell centred over the other two: its
    middle lies halfway between theirs, they are closer than two lines' height (rows
    next to each other, not the middle line's neighbours in an evenly spaced table,
    which are always halfway), and its columns are empty on both (``cells``: those of
    the row above, the line's own, the line below's)."""
    above, line, below = ((ln.top + ln.bottom) / 2 for ln in three)
    if below - above >= 2 * height or abs(line - (above + below) / 2) > (
            ROW_SPAN_TOLERANCE * height):
        return False
    return all(_disjoint(cells[1], other) for other in (cells[0], cells[2]))


def _disjoint(a: dict[int, _Cell], b: dict[int, _Cell]) -> bool:
    """Whether no cell of ``a`` shares a column with a cell of ``b``."""
    return not any(ca < cb + b[cb].span and cb < ca + a[ca].span for ca in a for cb in b)


def _band(row: _Row) -> tuple[float, float]:
    """A row's band: the median top and bottom of its one-line cells (a cell centred
    over this row and the next, or one written on two lines, must not stretch the band
    it is measured against)."""
    cells = [c for c in row.cells.values() if len(c.pieces) == 1] or list(row.cells.values())
    return (statistics.median(c.top for c in cells), statistics.median(c.bottom for c in cells))


def row_span(rows: Sequence[_Row], r: int, col: int, height: float) -> int:
    """How many rows the cell of ``rows[r]`` at ``col`` spans: more than one when the
    rows below leave its columns empty and the cell sits centred on their joint band
    rather than on its own row (typeset tables centre a spanning cell vertically)."""
    cell = rows[r].cells[col]
    if len(cell.pieces) > 1:
        return 1  # a cell on several lines fills its own row's height
    centre = (cell.top + cell.bottom) / 2
    top, bottom = _band(rows[r])
    best, best_off = 1, abs(centre - (top + bottom) / 2)
    for below in range(r + 1, len(rows)):
        if any(c < col + cell.span and col < c + other.span
               for c, other in rows[below].cells.items()):
            break  # the column is taken on this row
        off = abs(centre - (top + _band(rows[below])[1]) / 2)
        if off < best_off and off <= ROW_SPAN_TOLERANCE * height:
            best, best_off = below - r + 1, off
    return best


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

