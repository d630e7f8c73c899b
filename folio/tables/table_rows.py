"""A table's rows from its lines of words: which lines are one row, which cells span. Pure.

Why: :mod:`folio.tables.table_grid` builds a grid from word boxes in two passes, columns then
rows; this module is the row pass (lines by vertical overlap, a cell's second line
joining its row, row rules, cells centred over several rows), kept apart from the
column pass (:mod:`folio.tables.table_columns`) so each stays readable.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from folio.models import BBox, WordBox
from folio.tables.table_columns import _Phrase

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
#: a heading centred within this many word heights of several columns' middle spans them
COL_SPAN_TOLERANCE = 1.0
#: a horizontal ruling this share of the table's width or wider rules a row (narrower
#: ones underline a group heading)
ROW_RULE_WIDTH = 0.8
#: a cell that is a figure: digits with the signs, separators and units around them
_NUMBER = re.compile(r"[-+−–(]?[$€£¥]?\s?[\d.,\s]*\d[\d.,\s]*%?\)?\*?")


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
