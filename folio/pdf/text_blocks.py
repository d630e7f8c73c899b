"""A text layer's lines cut into paragraph blocks, in reading order. Pure.

Why: :mod:`folio.pdf.text_layer` reads pdfium's glyphs into lines; what a reader needs is
blocks: runs on one baseline joined, short lines side by side kept as table cells, lines
stacked into paragraphs (same column, small gap, same font size), labelled heading or
text, and ordered by recursive XY cut (columns, bands, numbered grids). None of that
touches pdfium, so it lives apart from the extraction.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from folio.models import BBox, Block, Label
from folio.page import headings
from folio.page.list_items import ItemLine, is_bare_marker, list_pieces

#: pdfium marks a hyphen it believes was inserted at a line break with U+0002 (per-char
#: and bounded text) or U+FFFE (full text); the word continues on the next line
_BREAK_HYPHENS = ("\x02", "\ufffe")
#: a line this much larger than the body text is a heading
_HEADER_RATIO = 1.15
#: lines closer than this many line heights belong to the same paragraph
_PARAGRAPH_GAP = 0.7
#: runs that pdfium broke apart are rejoined across at most a word space; a 1em column
#: gutter (LaTeX's) must stay open
_JOIN_EM = 0.5
#: a run whose box is at most this many type sizes tall lies level (sub- and superscripts
#: and a larger run on the line stay within it; a sideways run is as tall as it is long)
_LEVEL_HEIGHT = 2.0
#: lines shorter than this sharing a row are table cells, not lines of a paragraph
_CELL_MAX_CHARS = 25
#: a list marker set apart from its item's words (``•`` then a tab) joins the run on its
#: right across at most this many type sizes
_MARKER_GAP_EM = 6.0
#: a paragraph set below this share of the body's size is a footnote's type
_FOOTNOTE_RATIO = 0.92
#: a page with this share of its glyphs monospaced is a typescript: its text is no code
_TYPEWRITTEN_SHARE = 0.85
#: monospaced runs on one line this many type sizes apart are one line of code
_CODE_GAP_EM = 20.0
_MAX_CUT_DEPTH = 64
#: columns without a paragraph of two lines, holding together under this share of a
#: page's characters, are scraps beside columns of text (:func:`_text_columns`)
_SCRAPS_SHARE = 0.02


@dataclass
class _Line:
    bbox: BBox
    text: str
    size: float | None
    cell: bool = False  # short, with another short line on its row: a table cell
    style: headings.Style = field(default_factory=headings.Style)

    @property
    def height(self) -> float:
        """Font size when known: a tight box around "massa." is half the line's height."""
        return max(self.bbox.y1 - self.bbox.y0, self.size or 0.0)


@dataclass
class _Para:
    lines: list[_Line]
    bbox: BBox = field(init=False)

    def __post_init__(self) -> None:
        self.bbox = self.lines[0].bbox

    def add(self, line: _Line) -> None:
        self.lines.append(line)
        self.bbox = self.bbox.union(line.bbox)


def _clean(text: str) -> str:
    """Normalise line ends and re-join words pdfium saw hyphenated at a line break."""
    # pdfium returns UTF-16; broken fonts yield lone surrogates, which JSON cannot carry
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for mark in _BREAK_HYPHENS:
        text = text.replace(mark + "\n", "").replace(mark, "")
    return text


def _merge_runs(lines: list[_Line]) -> list[_Line]:
    """Join runs on one baseline that pdfium broke apart (content drawn out of order, or
    a run in another script or size whose box sits a little higher), in the line's
    reading order: left to right, or right to left in a line of a right-to-left script
    (:func:`_right_to_left`): an Arabic heading ending in the word ``Python`` has that
    word at its left end."""
    merged: list[_Line] = []
    for line in sorted(lines, key=lambda ln: (round(ln.bbox.y0), ln.bbox.x0)):
        last = merged[-1] if merged else None
        code = last is not None and _code_beside(last, line)
        marker = last is not None and _marker_beside(last, line)
        if last is not None and (_same_line(last, line) or marker or code):
            left, right = sorted((last, line), key=lambda ln: ln.bbox.x0 + ln.bbox.x1)
            first, second = (right, left) if _right_to_left(left.text + right.text) \
                else (left, right)
            sizes = [s for s in (last.size, line.size) if s is not None]
            if marker and line.size:  # a marker's own size (a dingbat set larger) is not its line's
                sizes = [line.size]
            space = " " * (_spaces(left, right) if code else 1)
            merged[-1] = _Line(
                last.bbox.union(line.bbox), f"{first.text}{space}{second.text}",
                max(sizes, default=None), style=last.style.joined(line.style),
            )
        else:
            merged.append(line)
    return merged


def _same_line(a: _Line, b: _Line) -> bool:
    """Whether two runs are one line: level with each other, and at most a word space
    apart (or overlapping by as much), ``b`` right of ``a``, or on either side when both
    lie level (:func:`_level`; a page turned on its side stacks its lines side by side)."""
    height = min(a.bbox.y1 - a.bbox.y0, b.bbox.y1 - b.bbox.y0)
    overlap = min(a.bbox.y1, b.bbox.y1) - max(a.bbox.y0, b.bbox.y0)
    gap = b.bbox.x0 - a.bbox.x1
    if _level(a) and _level(b):
        gap = max(gap, a.bbox.x0 - b.bbox.x1)
    limit = _JOIN_EM * max(a.height, b.height)
    return height > 0 and overlap >= 0.5 * height and -limit <= gap <= limit


def _marker_beside(marker: _Line, line: _Line) -> bool:
    """Whether ``marker`` is a list marker alone (``•``, ``1.``) level with ``line`` and
    left of it by no more than a tab's width: the marker of that line's item."""
    if not is_bare_marker(marker.text):
        return False
    height = min(marker.bbox.y1 - marker.bbox.y0, line.bbox.y1 - line.bbox.y0)
    overlap = min(marker.bbox.y1, line.bbox.y1) - max(marker.bbox.y0, line.bbox.y0)
    gap = line.bbox.x0 - marker.bbox.x1
    return (height > 0 and overlap >= 0.5 * height
            and 0 <= gap <= _MARKER_GAP_EM * max(marker.height, line.height))


def _code_beside(a: _Line, b: _Line) -> bool:
    """Whether two monospaced runs are one line of code: level, ``b`` right of ``a``
    by at most :data:`_CODE_GAP_EM` type sizes (code aligns its columns with spaces)."""
    if not (a.style.whole_mono and b.style.whole_mono):
        return False
    height = min(a.bbox.y1 - a.bbox.y0, b.bbox.y1 - b.bbox.y0)
    overlap = min(a.bbox.y1, b.bbox.y1) - max(a.bbox.y0, b.bbox.y0)
    gap = b.bbox.x0 - a.bbox.x1
    return height > 0 and overlap >= 0.5 * height and 0 <= gap <= _CODE_GAP_EM * max(
        a.height, b.height)


def _spaces(left: _Line, right: _Line) -> int:
    """The spaces a monospaced line holds between two runs: the gap in character widths."""
    width = (left.bbox.x1 - left.bbox.x0) / max(len(left.text), 1)
    return max(1, round((right.bbox.x0 - left.bbox.x1) / width)) if width > 0 else 1


def _level(line: _Line) -> bool:
    """Whether a run lies level on the page: its box about one type size tall (a run
    read across a page turned on its side has a box as tall as the run is long)."""
    return line.size is not None and line.bbox.y1 - line.bbox.y0 <= _LEVEL_HEIGHT * line.size


def _right_to_left(text: str) -> bool:
    """Whether more of ``text``'s letters belong to right-to-left scripts (Arabic, Hebrew,
    Syriac, Thaana, N'Ko) than to left-to-right ones."""
    rtl = ltr = 0
    for char in text:
        kind = unicodedata.bidirectional(char)
        rtl += kind in ("R", "AL")
        ltr += kind == "L"
    return rtl > ltr


def _mark_cells(lines: list[_Line]) -> list[_Line]:
    """Flag short lines that share a row with another short line (table cells).

    Cells stay single blocks, so a table reads row by row instead of being stacked
    into one "paragraph" per column; long lines side by side are text columns.
    """
    short = [line for line in lines if len(line.text) < _CELL_MAX_CHARS]
    rows: dict[int, list[_Line]] = {}
    for line in short:
        rows.setdefault(round(line.bbox.y1 / 2), []).append(line)
    for line in short:
        key = round(line.bbox.y1 / 2)
        neighbours = [n for k in (key - 1, key, key + 1) for n in rows.get(k, [])]
        line.cell = any(n is not line and _same_row(n.bbox, line.bbox) for n in neighbours)
    return lines


def _same_row(a: BBox, b: BBox) -> bool:
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap >= 0.5 * min(a.y1 - a.y0, b.y1 - b.y0) and (a.x1 <= b.x0 or b.x1 <= a.x0)


def _paragraphs(lines: list[_Line], body: headings.Body | None = None) -> list[_Para]:
    """Stack lines into paragraphs: same column, small gap, same font size.

    Lines come top to bottom; a paragraph whose last line is already far above the
    current line is closed, so the search stays short on pages with thousands of runs.
    """
    paras: list[_Para] = []
    open_paras: list[_Para] = []
    for line in sorted(lines, key=lambda ln: (ln.bbox.y0, ln.bbox.x0)):
        open_paras = [p for p in open_paras if not _closed(p, line)]
        target = next((p for p in reversed(open_paras) if _continues(p, line, body)), None)
        if target is None:
            target = _Para([line])
            paras.append(target)
            open_paras.append(target)
        else:
            target.add(line)
    return paras


def _closed(para: _Para, line: _Line) -> bool:
    last = para.lines[-1]
    return line.bbox.y0 - last.bbox.y1 > _PARAGRAPH_GAP * max(last.height, line.height)


def _continues(para: _Para, line: _Line, body: headings.Body | None = None) -> bool:
    last = para.lines[-1]
    height = max(last.height, line.height)
    gap = line.bbox.y0 - last.bbox.y1
    overlap = min(last.bbox.x1, line.bbox.x1) - max(last.bbox.x0, line.bbox.x0)
    narrower = min(last.bbox.x1 - last.bbox.x0, line.bbox.x1 - line.bbox.x0)
    return (
        height > 0
        and not (line.cell or last.cell)
        and -0.5 * height <= gap <= _PARAGRAPH_GAP * height
        # code lines overlap little where the indentation changes (``print`` under a
        # deeper ``if``, ``return`` back at the function's level): same face, same block
        and (overlap >= 0.3 * narrower or (last.style.whole_mono and line.style.whole_mono))
        and _similar_size(last.size, line.size)
        and not (body is not None and headings.breaks_paragraph(
            [(ln.text, ln.style) for ln in para.lines], (line.text, line.style), body))
    )


def _similar_size(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return max(a, b) <= _HEADER_RATIO * min(a, b)


def _blocks(paras: list[_Para], body: headings.Body) -> list[Block]:
    """The paragraphs in reading order as blocks: monospaced ones (on a page not set
    mostly in a monospaced face: :func:`_typewritten`) as code with their lines and indentation, list items cut out of the rest
    (:mod:`folio.page.list_items`), each item a block with its marker and level."""
    ordered = _xy_order(paras)
    mono_body = _typewritten(ordered)
    labels = [_label(p, body) for p in ordered]
    code = [not mono_body and _is_code(p) for p in ordered]
    fixed = [label != Label.TEXT.value or is_code or any(ln.cell for ln in p.lines)
             for p, label, is_code in zip(ordered, labels, code, strict=True)]
    pieces = list_pieces([[ItemLine(ln.text, ln.bbox.x0, ln.height) for ln in p.lines]
                          for p in ordered], fixed,
                         footnotes=[_small_type(p, body) for p in ordered])
    blocks: list[Block] = []
    code_groups: list[list[_Line]] = []  # the paragraphs of the code block being built
    for piece in pieces:
        para = ordered[piece.para]
        lines = [para.lines[i] for i in piece.lines]
        box = lines[0].bbox
        for line in lines[1:]:
            box = box.union(line.bbox)
        order = len(blocks)
        if code[piece.para]:
            if blocks and blocks[-1].label == Label.CODE.value:  # code over a blank line
                code_groups.append(lines)
                blocks[-1].content = _code_text(code_groups)
                blocks[-1].bbox = _joined(blocks[-1].bbox, box)
                continue
            code_groups = [lines]
            blocks.append(Block(label=Label.CODE.value, bbox=box,
                                content=_code_text(code_groups), order=order))
        elif piece.marker is not None:
            texts = piece.item_texts
            content = _join([_Line(ln.bbox, t, ln.size) for ln, t in zip(lines, texts,
                                                                         strict=True)])
            blocks.append(Block(label=Label.LIST_ITEM.value, bbox=box, content=content,
                                order=order, marker=piece.marker.marker, level=piece.level))
        else:
            label = labels[piece.para] if len(lines) == len(para.lines) else Label.TEXT.value
            blocks.append(Block(label=label, bbox=box, content=_join(lines), order=order,
                                type_size=_type_size(para, body, label)))
    return blocks


def _small_type(para: _Para, body: headings.Body) -> bool:
    """Whether a paragraph is set smaller than the page's body text (a footnote's type)."""
    sizes = [line.size for line in para.lines if line.size]
    return bool(body.size and sizes and max(sizes) < _FOOTNOTE_RATIO * body.size)


def _joined(a: BBox | None, b: BBox) -> BBox:
    return b if a is None else a.union(b)


def _typewritten(paras: list[_Para]) -> bool:
    """Whether the page is set mostly (:data:`_TYPEWRITTEN_SHARE` of its glyphs) in a
    monospaced face: a typescript, whose text is no code (a page of code with a line of
    prose over and under it is not)."""
    glyphs = sum(line.style.glyphs for p in paras for line in p.lines)
    mono = sum(line.style.mono for p in paras for line in p.lines)
    return glyphs > 0 and mono >= _TYPEWRITTEN_SHARE * glyphs


def _is_code(para: _Para) -> bool:
    """Whether a paragraph is set in a monospaced face throughout (a listing, a command)."""
    return all(line.style.whole_mono for line in para.lines)


def _code_text(groups: list[list[_Line]]) -> str:
    """A code block's paragraphs (stretches between blank lines) as they stand: each
    line indented by its left edge over the block's leftmost line, in character widths
    of the monospaced face; a blank line between paragraphs."""
    lines = [ln for group in groups for ln in group]
    widths = [(ln.bbox.x1 - ln.bbox.x0) / len(ln.text) for ln in lines if len(ln.text) > 1]
    char = sorted(widths)[len(widths) // 2] if widths else 0.0
    left = min(ln.bbox.x0 for ln in lines)

    def text(line: _Line) -> str:
        indent = round((line.bbox.x0 - left) / char) if char > 0 else 0
        return " " * max(indent, 0) + _clean(line.text)

    return "\n\n".join("\n".join(text(line) for line in group) for group in groups)


def _type_size(para: _Para, body: headings.Body, label: str) -> float | None:
    """A heading's (or a short line's the layout model may call one) type size over the
    body's, for its level (folio.hierarchy); None for body text and where sizes are
    unknown."""
    sizes = [line.size for line in para.lines if line.size]
    if not body.size or not sizes or len(para.lines) > headings.MAX_LINES_LARGE:
        return None
    if label != Label.SECTION_HEADER.value and not any(
            headings.set_apart(line.style, body, line.text) for line in para.lines):
        return None
    return round(max(sizes) / body.size, 2)


def _label(para: _Para, body: headings.Body) -> str:
    if headings.is_heading([(line.text, line.style) for line in para.lines], body):
        return Label.SECTION_HEADER.value
    return Label.TEXT.value


def _join(lines: Iterable[_Line]) -> str:
    out = ""
    for line in lines:
        if out.endswith(_BREAK_HYPHENS):
            out = out[:-1] + line.text
        else:
            out = f"{out} {line.text}" if out else line.text
    return _clean(out)


def _xy_order(paras: list[_Para], depth: int = 0) -> list[_Para]:
    """Reading order by recursive XY cut.

    Columns are cut first when every side holds real paragraphs (two-column text);
    otherwise horizontal bands are cut first, so table rows read across; consecutive
    bands that share a column gap are one section (:func:`_sections`), so a full-width
    title over two columns whose headings line up across the gutter does not make the
    page read row by row. Deep cuts (pathological layouts) fall back to top-to-bottom
    order.
    """
    if len(paras) <= 1 or depth > _MAX_CUT_DEPTH:
        return sorted(paras, key=lambda p: (p.bbox.y0, p.bbox.x0))
    columns = _cut(paras, vertical=True)
    bands = _cut(paras, vertical=False)
    if len(columns) > 1 and _text_columns(columns):
        groups = columns
    elif len(bands) > 1:
        sections = _sections(bands)
        groups = sections if len(sections) > 1 else bands  # one section: rows of a table
    elif len(columns) > 1:
        groups = columns
    else:
        return sorted(paras, key=lambda p: (p.bbox.y0, p.bbox.x0))
    return [para for group in groups for para in _xy_order(group, depth + 1)]


def _text_columns(columns: list[list[_Para]]) -> bool:
    """Whether a page cut into these columns is columns of text, read left to right:
    each column holds a paragraph of more than one line, but for columns of scraps beside
    them that hold under :data:`_SCRAPS_SHARE` of the page's characters (a page number in
    the margin, a form's line numbers, a table's column of stars), which must not make two
    pages of a spread read row by row; they keep their place, beside the text they
    number. Columns of one-line cells only are a table's, read row by row."""
    real = [any(len(p.lines) > 1 for p in col) for col in columns]
    if all(real):
        return True
    chars = [sum(len(line.text) for p in col for line in p.lines) for col in columns]
    scraps = sum(n for n, is_real in zip(chars, real, strict=True) if not is_real)
    return sum(real) >= 2 and scraps < _SCRAPS_SHARE * sum(chars)


def _sections(bands: list[list[_Para]]) -> list[list[_Para]]:
    """Consecutive bands joined while each splits into columns and so do they together
    (their gutters line up): a stretch of two-column text whose headings or equations
    sit level across the gutter, to be cut into columns next. A band spanning the page
    (a title, a wide figure) ends the stretch. With a single band nothing changes.

    A stretch whose numbered items ("1.", "2.", ...) run in order across the rows and
    out of order down the columns is a grid of items the author numbered row by row:
    its bands stay apart (read across), as the numbers say."""
    if len(bands) < 2:
        return bands
    runs: list[list[list[_Para]]] = []
    split_last = False
    for band in bands:
        split = len(_cut(band, vertical=True)) > 1
        if runs and split and split_last and len(
                _cut([p for b in runs[-1] for p in b] + band, vertical=True)) > 1:
            runs[-1].append(band)
        else:
            runs.append([band])
        split_last = split
    out: list[list[_Para]] = []
    for run in runs:
        if len(run) > 1 and _numbered_across(run):
            out += run
        else:
            out.append([p for b in run for p in b])
    return out


_ITEM_NUMBER = re.compile(r"^\s*(\d{1,3})[.)]\s")


def _numbered_across(run: list[list[_Para]]) -> bool:
    """Whether the numbered paragraphs of these bands count up row by row (left to right
    in each band) but not column by column."""
    def numbers(paras: list[_Para]) -> list[int]:
        found = (_ITEM_NUMBER.match(p.lines[0].text) for p in paras)
        return [int(m.group(1)) for m in found if m]

    across = numbers([p for band in run for p in sorted(band, key=lambda q: q.bbox.x0)])
    columns = _cut([p for band in run for p in band], vertical=True)
    down = numbers([p for col in columns for p in sorted(col, key=lambda q: q.bbox.y0)])

    def rising(values: list[int]) -> bool:
        return all(a < b for a, b in zip(values, values[1:], strict=False))

    return len(across) >= 3 and rising(across) and not rising(down)


def _cut(paras: list[_Para], *, vertical: bool) -> list[list[_Para]]:
    """Split where no paragraph covers a stretch of the x (vertical) or y axis."""

    def span(p: _Para) -> tuple[float, float]:
        box = p.bbox
        return (box.x0, box.x1) if vertical else (box.y0, box.y1)

    groups: list[list[_Para]] = []
    reach = -math.inf
    for para in sorted(paras, key=lambda p: span(p)[0]):
        start, end = span(para)
        if groups and start < reach:
            groups[-1].append(para)
        else:
            groups.append([para])
        reach = max(reach, end)
    return groups
