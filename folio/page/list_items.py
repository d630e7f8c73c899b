"""A page's list items: which lines open an item, its marker, its nesting. Pure.

Why: a text layer, an OCR engine and a VLM all hand over lines; a reader (and a chunker)
needs a bulleted or numbered list as a list. Every path cuts its paragraphs into lines
with a left edge and a line height (for a model's markdown: the indentation in characters)
and asks :func:`list_pieces` which runs of lines are items.

What opens an item:

* a bullet: ``•◦▪‣●○■□▸►–·`` and the like, the Symbol and Wingdings private-use glyphs a
  word processor's bullets map to (U+F0B7, U+F0A7, U+F076, U+F0D8, ...), a dingbat
  font's glyph read without Unicode (a control character, or a letter then one: ``r``
  U+0001),
  and ``-``, ``*``, ``+`` followed by a space;
* a number or letter: ``1.``, ``1)``, ``a.``, ``iv.``, ``(a)``, ``(2)``, only where the
  list around it counts on by it (``1.`` next to ``2.``, ``a)`` next to ``b)``, no other
  text between them), or, for paragraphs that read as sentences, where a paragraph at the
  same left edge elsewhere on the page does (a questionnaire's questions with their
  answers between them): a single numbered-looking line (``2. Methods``, a wrapped
  sentence that starts ``3. The``) is no list, and a year (four digits) never is;
* on an OCR page, the marks Tesseract reads bullets as (``«``, ``¢``, ``©``, ``°``, ``»``,
  ``®``), and on any page a letter ``o`` and a space (Word's second-level bullet), only
  where two or more bulleted items sit together (a bullet the engine did not read at
  all is found in the image, :mod:`folio.page.visual_bullets`, and comes here as ``•``).

Nesting comes from the items' left edges: an item right of the item above by more than
:data:`INDENT_SHARE` of a line height is one level deeper, one back at an earlier edge
returns to that level.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

#: Symbol, Wingdings and Webdings glyphs that fonts map into the private-use area, as
#: bullets (a word processor's bullet list in Symbol or Wingdings). Every one reads as a
#: bullet: a list marker in the text it opens, a ``•`` anywhere else (folio.page.private_use)
PUA_BULLETS = frozenset(chr(c) for c in (
    0xF0B7, 0xF0A7, 0xF076, 0xF0D8, 0xF0FC, 0xF0A8, 0xF06E, 0xF06C, 0xF071, 0xF0E8, 0xF0D9,
    0xF0A2, 0xF0AE, 0xF097, 0xF0F0, 0xF0B2, 0xF075, 0xF077, 0xF0E0, 0xF0D7, 0xF0FB, 0xF0A1,
    0xF06F, 0xF070, 0xF0C4, 0xF0F8, 0xF0DC, 0xF02D, 0xF02A, 0xF0BE,
))
#: bullet glyphs that open an item with or without a space after them
BULLET_GLYPHS = frozenset("•◦▪‣●○■□▫▸►▹▻⁃∙⦁➢➤➣➔→✓✔❖◆◇♦·") | PUA_BULLETS
#: ASCII and dash bullets: an item only with a space after them (``-5 °C`` is no item)
_SPACED_BULLETS = frozenset("-*+–—")
#: what Tesseract reads a round bullet as; bullets only where two or more items sit together
OCR_BULLETS = frozenset("«»¢©°®")
#: Word's second-level bullet is a letter ``o`` (in Courier New); an item only among others
_LETTER_BULLETS = frozenset("o")
#: an item this share of its line height right of the item above is nested under it
INDENT_SHARE = 0.6
MAX_LEVEL = 6

_NUMBERED = re.compile(
    r"^(?:\((?P<paren>\d{1,2}|[a-zA-Z]|[ivxIVX]{1,5})\)"
    r"|(?P<plain>\d{1,2}|[a-zA-Z]|[ivxIVX]{1,5})(?P<punct>[.)]))\s+(?=\S)")
_ROMAN = {"i": 1, "v": 5, "x": 10}


@dataclass(frozen=True)
class Marker:
    """A line's opening list marker, normalised (``-`` for a bullet), the rest of the
    line, and what it counts as: the (kind, value) readings of a number or letter (``i``
    is the ninth letter and roman one), empty for a bullet."""

    marker: str
    rest: str
    readings: tuple[tuple[str, int], ...] = ()
    #: a mark OCR made of a bullet, or a letter ``o``: trusted only among other bullets
    ocr_guess: bool = False

    @property
    def numbered(self) -> bool:
        return bool(self.readings)


def _roman(text: str) -> int | None:
    values = [_ROMAN.get(c) for c in text.lower()]
    if None in values or not values:
        return None
    total = 0
    nums = [v for v in values if v is not None]
    for i, v in enumerate(nums):
        total += -v if i + 1 < len(nums) and v < nums[i + 1] else v
    return total if 0 < total < 40 else None


def _readings(token: str, style: str) -> tuple[tuple[str, int], ...]:
    if token.isdigit():
        return ((f"num{style}", int(token)),)
    out: list[tuple[str, int]] = []
    case = "upper" if token.isupper() else "lower"
    if len(token) == 1:
        out.append((f"alpha-{case}{style}", ord(token.lower()) - ord("a") + 1))
    roman = _roman(token)
    if roman is not None:
        out.append((f"roman-{case}{style}", roman))
    return tuple(out)


def _control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char) == "Cc"


def is_bullet_glyph(char: str) -> bool:
    """Whether ``char`` is a bullet wherever it opens a line: a bullet glyph, or a
    dingbat font's glyph read without Unicode as a control character."""
    return char in BULLET_GLYPHS or _control(char)


def is_bare_marker(text: str) -> bool:
    """Whether ``text`` is a list marker alone (a bullet glyph, ``1.``, ``(a)``): a run
    the text layer keeps apart from its item's words by a tab's width."""
    text = text.strip()
    return (len(text) == 1 and text in BULLET_GLYPHS) or (
        split_marker(text + " x") is not None and len(text) <= 5 and text not in "-*+")


def split_marker(text: str, *, ocr: bool = False) -> Marker | None:
    """The list marker that opens ``text`` (leading spaces ignored), None without one.

    A numbered marker is a candidate: :func:`list_pieces` keeps it only where the items
    around it count on by it."""
    line = text.lstrip()
    if not line:
        return None
    head = line[0]
    if _control(head) or (len(line) > 2 and _control(line[1]) and not head.isdigit()):
        # a dingbat font's glyph without Unicode: ``r`` then U+0001 (Wingdings' box), or
        # a control character alone (U+0084, a form's check box)
        rest = line[1 if _control(head) else 2:].lstrip()
        return Marker("-", rest) if rest else None
    if head in BULLET_GLYPHS:
        rest = line[1:].lstrip()
        return Marker("-", rest) if rest else None
    guess = head in _LETTER_BULLETS or (ocr and head in OCR_BULLETS)
    if head in _SPACED_BULLETS or guess:
        if len(line) > 2 and line[1] == " " and line[2:].strip():
            return Marker("-", line[2:].strip(), ocr_guess=guess)
        return None
    match = _NUMBERED.match(line)
    if match is None:
        return None
    rest = line[match.end():]
    if match.group("paren") is not None:
        token = match.group("paren")
        return Marker(f"({token})", rest, _readings(token, "()"))
    token, punct = match.group("plain"), match.group("punct")
    return Marker(f"{token}{punct}", rest, _readings(token, punct))


@dataclass(frozen=True)
class ItemLine:
    """One line of a paragraph: its text, its left edge and its height (page points;
    for a model's markdown, the indentation in characters and a height of 2)."""

    text: str
    x0: float = 0.0
    height: float = 10.0


@dataclass
class Piece:
    """A run of one paragraph's lines: a list item (``marker`` set, its text without the
    marker, its ``level``) or text (``marker`` None)."""

    para: int
    lines: list[int]
    texts: list[str]
    marker: Marker | None = None
    level: int | None = None
    x0: float = 0.0
    height: float = 10.0
    fixed: bool = False  # a heading, a table: never an item, ends a list

    @property
    def item(self) -> bool:
        return self.marker is not None

    @property
    def item_texts(self) -> list[str]:
        """Its lines, the first without the marker."""
        if self.marker is None:
            return list(self.texts)
        return [self.marker.rest, *self.texts[1:]]

    @property
    def content(self) -> str:
        """The item's text without its marker (text: its lines as they were)."""
        if self.marker is None:
            return "\n".join(self.texts)
        return "\n".join(t.strip() for t in self.item_texts).strip()


def _candidates(paras: Sequence[Sequence[ItemLine]], fixed: Sequence[bool], ocr: bool,
                footnotes: Sequence[bool]) -> list[Piece]:
    pieces: list[Piece] = []
    for p, lines in enumerate(paras):
        if fixed[p]:
            pieces.append(Piece(p, list(range(len(lines))), [ln.text for ln in lines],
                                fixed=True))
            continue
        current: Piece | None = None
        for i, line in enumerate(lines):
            marker = split_marker(line.text, ocr=ocr)
            if marker is not None and marker.numbered and footnotes[p]:
                marker = None  # "1)" in small type under the text: a footnote
            if marker is not None or current is None:
                current = Piece(p, [i], [line.text], marker, x0=line.x0, height=line.height)
                pieces.append(current)
            else:
                current.lines.append(i)
                current.texts.append(line.text)
    return pieces


def _runs(pieces: list[Piece]) -> list[list[Piece]]:
    """Maximal runs of consecutive item candidates (text or a fixed block ends a run)."""
    runs: list[list[Piece]] = []
    current: list[Piece] = []
    for piece in pieces:
        if piece.item:
            current.append(piece)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _counts_on(piece: Piece, run: list[Piece]) -> bool:
    """Whether the nearest numbered item of the same kind before it in the run counts one
    less, or the nearest after it one more (``2. Methods`` after ``3. Third`` does not)."""
    assert piece.marker is not None
    at = run.index(piece)
    for kind, value in piece.marker.readings:
        before = next((p for p in reversed(run[:at]) if _value(p, kind) is not None), None)
        after = next((p for p in run[at + 1:] if _value(p, kind) is not None), None)
        if (before is not None and _value(before, kind) == value - 1) or (
                after is not None and _value(after, kind) == value + 1):
            return True
    return False


def _openings(pieces: list[Piece]) -> dict[tuple[str, int], list[float]]:
    """The left edges of the page's numbered paragraphs that read as sentences, by each
    reading of their number (for :func:`_counts_on_apart`: one pass over the page, not
    one for each doubtful item)."""
    edges: dict[tuple[str, int], list[float]] = {}
    for piece in pieces:
        if _sentence_opening(piece):
            assert piece.marker is not None
            for reading in piece.marker.readings:
                edges.setdefault(reading, []).append(piece.x0)
    return edges


def _counts_on_apart(piece: Piece, openings: dict[tuple[str, int], list[float]]) -> bool:
    """Whether a numbered paragraph that reads as a sentence has a neighbour in count
    (one less or one more) elsewhere on the page that opens a paragraph at the same left
    edge and reads as one too (``openings``): a questionnaire's questions with their
    answers between them, a procedure's steps with a screenshot or a note between them.
    A heading set like the body (``2. Methods``: one line, no closing stop) never counts
    on this way, nor does a numbered line inside a paragraph (``3. The`` wrapped from the
    line above)."""
    assert piece.marker is not None
    if not _sentence_opening(piece):
        return False
    tolerance = INDENT_SHARE * max(piece.height, 1.0)
    return any(abs(x0 - piece.x0) <= tolerance
               for kind, value in piece.marker.readings
               for near in (value - 1, value + 1)
               for x0 in openings.get((kind, near), ()))


def _sentence_opening(piece: Piece) -> bool:
    """A numbered piece that opens its paragraph and runs over more than one line or
    ends as a sentence or a question does."""
    return (piece.marker is not None and piece.marker.numbered and not piece.fixed
            and piece.lines[0] == 0
            and (len(piece.lines) > 1 or piece.content.rstrip().endswith(_SENTENCE_ENDS)))


_SENTENCE_ENDS = (".", "?", "!", ":", ";")


def _value(piece: Piece, kind: str) -> int | None:
    if piece.marker is None:
        return None
    return next((v for k, v in piece.marker.readings if k == kind), None)


def _unmark(pieces: list[Piece], doubtful: set[int]) -> list[Piece]:
    """Doubtful items back to text: joined to the piece before them in their paragraph,
    else text of their own."""
    out: list[Piece] = []
    for index, piece in enumerate(pieces):
        if index not in doubtful:
            out.append(piece)
            continue
        last = out[-1] if out else None
        if last is not None and last.para == piece.para and not last.fixed:
            last.lines += piece.lines
            last.texts += piece.texts
        else:
            piece.marker = None
            out.append(piece)
    return out


def _nest(run: list[Piece]) -> None:
    """Levels from the items' left edges (see the module's docstring)."""
    edges: list[float] = []
    for piece in run:
        tolerance = INDENT_SHARE * max(piece.height, 1.0)
        while edges and piece.x0 < edges[-1] - tolerance:
            edges.pop()
        if not edges or piece.x0 > edges[-1] + tolerance:
            edges.append(piece.x0)
        piece.level = min(len(edges), MAX_LEVEL)


def list_pieces(paras: Sequence[Sequence[ItemLine]], fixed: Sequence[bool] | None = None,
                *, ocr: bool = False, trust_numbers: bool = False,
                footnotes: Sequence[bool] | None = None) -> list[Piece]:
    """A page's paragraphs (in reading order) cut into list items and text.

    ``fixed`` marks paragraphs that are never items (a heading, a table); they end a
    list. ``trust_numbers``: numbered markers are items without a neighbour in count (a
    model's markdown list, whose markers the model wrote as a list's). Items get their
    nesting level; text pieces keep their lines as they were. ``footnotes`` marks
    paragraphs set smaller than the body, where ``1)`` numbers a footnote, not an item
    (their bullets still open items)."""
    flags = list(fixed) if fixed is not None else [False] * len(paras)
    notes = list(footnotes) if footnotes is not None else [False] * len(paras)
    pieces = _candidates(paras, flags, ocr, notes)
    for _ in range(3):  # a doubtful item turned text splits its run: judge again
        doubtful: set[int] = set()
        position = {id(piece): i for i, piece in enumerate(pieces)}
        openings = _openings(pieces)
        for run in _runs(pieces):
            bullets = sum(1 for p in run if p.marker is not None and not p.marker.numbered)
            for piece in run:
                assert piece.marker is not None
                if (piece.marker.numbered and not trust_numbers and not _counts_on(piece, run)
                        and not _counts_on_apart(piece, openings)):
                    doubtful.add(position[id(piece)])
                elif piece.marker.ocr_guess and bullets < 2:
                    doubtful.add(position[id(piece)])
        if not doubtful:
            break
        pieces = _unmark(pieces, doubtful)
    for run in _runs(pieces):
        _nest(run)
    return pieces
