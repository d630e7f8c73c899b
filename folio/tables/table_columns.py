"""A table's columns from its words: phrases, the gaps between them, ruling walls. Pure.

Why: :mod:`folio.tables.table_grid` builds a grid from word boxes in two passes, columns then
rows; this module is the column pass (a phrase is words closer than a word space; the
column gaps are the x-ranges no phrase of a full line covers, plus vertical rulings),
kept apart from the row pass (:mod:`folio.tables.table_rows`) so each stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from folio.models import BBox, WordBox

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


def _place(phrases: list[_Phrase], cuts: list[tuple[float, float]]) -> None:
    """Each phrase's first and last column: the columns its x-range reaches into."""
    for phrase in phrases:
        phrase.first_col = sum(1 for a, _ in cuts if a < phrase.x0)
        phrase.last_col = sum(1 for _, b in cuts if b <= phrase.x1)
        phrase.last_col = max(phrase.first_col, phrase.last_col)


def _limits(cuts: Sequence[tuple[float, float]], right: float, height: float
            ) -> list[float]:
    """Where each column's text must end: a phrase gap before the next column's text
    (the right edge of the table for the last column)."""
    return [b - PHRASE_GAP * height for _, b in cuts] + [right]
