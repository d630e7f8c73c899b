"""Section headings on born-digital pages, from how their lines are set. Pure.

A heading is a short line (or two or three) that stands apart from the body text around
it by how it is set: a larger font than the page's body text, a bold or italic face where
the body is upright and regular, or another typeface a little larger. Its words make a
name, not a sentence: they do not end in a full stop or a comma, they start with a capital,
a digit or a numbering mark (``1``, ``2.3``, ``A.1``, ``IV.``, ``(2)``), and a bare number
(a page number) or a long sentence set in bold is no heading, save a chapter's number set
on a line of its own in display size (:data:`CHAPTER_RATIO` times the body or more), as
books and reports open a chapter with a large ``1`` or ``IV`` over its title. A line set like the body is
no heading however it is numbered: ``1. We propose ...`` is a list item.

The text layer (:mod:`folio.pdf.text_layer`) measures each line's :class:`Style`, the
page's :class:`Body`, and asks :func:`breaks_paragraph` whether a heading line and the
paragraph under it (or over it) are two blocks, and :func:`is_heading` whether a
paragraph's lines make a heading. :func:`keeps_heading` settles a layout model that sees a
heading and a running head over the same line (the first line of a document's first page),
and :func:`refuses_heading` a heading region over words that name nothing or over the
first body line under the engine's own heading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from folio.models import BBox, Label, Region

#: a line this much larger than the body text is a heading (whatever its face)
SIZE_RATIO = 1.15
#: another typeface (not the body's) this much larger than the body text sets a heading
FACE_SIZE_RATIO = 1.05
#: the share of a line's glyphs in a bold (italic) face for the line to count as bold
WHOLE_LINE = 0.8
#: a heading has at most this many words (scripts written with spaces) ...
MAX_WORDS = 16
#: ... or characters (scripts written without spaces between words)
MAX_CHARS = 90
#: lines of a heading set larger than the body / set only in another face
MAX_LINES_LARGE = 3
MAX_LINES_FACE = 2

#: a bare number (one or two digits, or a roman numeral) on its own line set this many
#: times the body size or more is a chapter's number; a page number is set near the body's
CHAPTER_RATIO = 2.5
CHAPTER_NUMBER = re.compile(r"\d{1,2}|[IVXLC]{1,6}")
#: numbering that opens a heading: 1 / 2.3 / 2.3.1. / A.1 / IV. / (2) / 3) (not a year)
NUMBERING = re.compile(
    r"^(?:\d{1,2}(?:\.\d+)*\.?|[A-Z](?:\.\d+)+\.?|[IVXLC]+\.|\(\d+\)|\d+\))(?=\s|$)")
#: PDF font descriptor flags (PDF 32000, 9.8.2)
FLAG_FIXED_PITCH = 1 << 0
FLAG_ITALIC = 1 << 6
FLAG_FORCE_BOLD = 1 << 18
#: a bold face by name: Arial-BoldMT, Helvetica-Bd, LubalinGraph-Demi, NimbusRomNo9L-Medi,
#: TeX's CMBX10 / SFBX1000 / ptmb8t, Black and Heavy weights
_BOLD_NAME = re.compile(
    r"bold|black|heavy|demi|semibold|[-_,]bd|[-_,]med(?:i|ium)?$|^(?:cm|sf|lm)bx|^cmb\d|"
    r"^[a-z]{3}b[8r]",
    re.IGNORECASE)
_ITALIC_NAME = re.compile(r"italic|oblique|[-_,]it$|^(?:cm|sf|lm)(?:ti|sl|it)|^[a-z]{3}ri?8",
                          re.IGNORECASE)
#: a caption's opening: a figure's or table's name and number
CAPTION = re.compile(r"^(?i:fig(?:ure)?|tab(?:le)?|chart|example|listing|exhibit|plate|scheme)"
                     r"\.?\s*(?:\d+|[IVX]+\b|[A-Z]\.?\d+)(?:[-.:]\d+)*")
_SUBSET = re.compile(r"^[A-Z]{6}\+")
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uf900-\ufaff]")


def face_name(name: str) -> str:
    """The font's name without a subset prefix (``ABCDEF+Times-Bold`` -> ``Times-Bold``)."""
    return _SUBSET.sub("", name)


def is_bold(name: str, weight: int, flags: int) -> bool:
    """Whether a glyph's font is a bold face: its weight (when the font states one), the
    ForceBold flag, or its name."""
    return weight >= 600 or bool(flags & FLAG_FORCE_BOLD) or bool(_BOLD_NAME.search(face_name(name)))


#: a monospaced face by name: Courier, Consolas, Menlo, Monaco, anything "Mono" or "Code",
#: TeX's typewriter faces (CMTT10, SFTT1000, LMMono, txtt)
_MONO_NAME = re.compile(
    r"courier|mono|consol|menlo|monaco|inconsolata|code|typewriter|^(?:cm|sf|lm|ec|tx)tt",
    re.IGNORECASE)


def is_monospaced(name: str, flags: int) -> bool:
    """Whether a glyph's font is monospaced: the FixedPitch flag or its name."""
    return bool(flags & FLAG_FIXED_PITCH) or bool(_MONO_NAME.search(face_name(name)))


def is_italic(name: str, flags: int) -> bool:
    """Whether a glyph's font is italic or oblique: the Italic flag or its name."""
    return bool(flags & FLAG_ITALIC) or bool(_ITALIC_NAME.search(face_name(name)))


@dataclass
class Style:
    """How a line is set: glyph counts in bold and italic faces, its size, its main face."""

    glyphs: int = 0
    bold: int = 0
    italic: int = 0
    size: float | None = None
    face: str = ""
    #: glyphs in a monospaced face (:func:`is_monospaced`): code, where the body is not
    mono: int = 0
    #: glyphs per face name (a face measured monospaced on the page counts as mono)
    faces: dict[str, int] = field(default_factory=dict)

    @property
    def whole_mono(self) -> bool:
        return self.glyphs > 0 and self.mono >= WHOLE_LINE * self.glyphs

    @property
    def whole_bold(self) -> bool:
        return self.glyphs > 0 and self.bold >= WHOLE_LINE * self.glyphs

    @property
    def whole_italic(self) -> bool:
        return self.glyphs > 0 and self.italic >= WHOLE_LINE * self.glyphs

    def joined(self, other: Style) -> Style:
        """Two runs of one line as one (the face of the one with more glyphs)."""
        sizes = [s for s in (self.size, other.size) if s is not None]
        return Style(self.glyphs + other.glyphs, self.bold + other.bold,
                     self.italic + other.italic, max(sizes, default=None),
                     self.face if self.glyphs >= other.glyphs else other.face,
                     self.mono + other.mono,
                     {k: self.faces.get(k, 0) + other.faces.get(k, 0)
                      for k in {*self.faces, *other.faces}})


@dataclass(frozen=True)
class Body:
    """The page's body text: its median glyph size, its most used face, and whether most
    glyphs are bold or italic (a page set all in bold has no bold headings)."""

    size: float | None
    face: str = ""
    bold: bool = False
    italic: bool = False


def body_of(styles: Sequence[Style], size: float | None) -> Body:
    """The page's :class:`Body` from the styles of its running lines (not table cells):
    the face and size (to half a point) most glyphs are set in; ``size`` (the page's
    median glyph size) when no line has a known size."""
    counts: dict[tuple[str, float], int] = {}
    for s in styles:
        if s.size is not None:
            key = (s.face, round(s.size * 2) / 2)
            counts[key] = counts.get(key, 0) + s.glyphs
    glyphs = sum(s.glyphs for s in styles)
    face, mode = max(counts, key=lambda k: counts[k]) if counts else ("", size)
    return Body(
        size=mode or size,
        face=face,
        bold=glyphs > 0 and sum(s.bold for s in styles) >= 0.5 * glyphs,
        italic=glyphs > 0 and sum(s.italic for s in styles) >= 0.5 * glyphs,
    )


def set_apart(style: Style, body: Body, text: str = "") -> bool:
    """Whether a line is set apart from the body text: larger, bold or italic where the
    body is not, or, numbered (:func:`numbered`), another face a little larger."""
    if body.size and style.size and style.size >= SIZE_RATIO * body.size:
        return True
    if style.whole_bold and not body.bold:
        return True
    if style.whole_italic and not body.italic:
        return True
    return bool(body.size and style.size and style.face and body.face and numbered(text)
                and style.face != body.face and style.size >= FACE_SIZE_RATIO * body.size)


def is_name(text: str, lines: int = 1) -> bool:
    """Whether ``text`` reads as a heading's words rather than a sentence or a number."""
    text = " ".join(text.split())
    if not text or not any(c.isalpha() for c in text):
        return False  # a page number, a figure's value
    if CAPTION.match(text):
        return False  # "Figure 3-5 Special registers" names a figure, not a section
    if text[-1] in ".,;" and not NUMBERING.fullmatch(text):
        return False  # a sentence (or a run-in heading that is part of one)
    first = text[0]
    if first.isalpha() and first.islower():
        return False  # a sentence's continuation
    if _UNSPACED.search(text):
        return len(text) <= MAX_CHARS
    return len(text.split()) <= MAX_WORDS and lines <= MAX_LINES_LARGE


def is_heading(lines: Sequence[tuple[str, Style]], body: Body) -> bool:
    """Whether a paragraph's lines (text and style each) are a heading: every line set
    apart from the body (:func:`set_apart`), at most :data:`MAX_LINES_LARGE` lines when
    larger than the body, :data:`MAX_LINES_FACE` when only the face differs, and words
    that name rather than say (:func:`is_name`)."""
    if not lines or not all(set_apart(s, body, lines[0][0]) for _, s in lines):
        return False
    sizes = [s.size for _, s in lines if s.size is not None]
    larger = bool(body.size and sizes and min(sizes) >= SIZE_RATIO * body.size)
    if len(lines) > (MAX_LINES_LARGE if larger else MAX_LINES_FACE):
        return False
    if len(lines) == 1 and chapter_number(lines[0][0], lines[0][1], body):
        return True
    return is_name(" ".join(t for t, _ in lines), len(lines))


def chapter_number(text: str, style: Style, body: Body) -> bool:
    """Whether a line is a chapter's number: a bare number (:data:`CHAPTER_NUMBER`) set
    :data:`CHAPTER_RATIO` times the body's size or more."""
    return bool(body.size and style.size and style.size >= CHAPTER_RATIO * body.size
                and CHAPTER_NUMBER.fullmatch(text.strip()))


def breaks_paragraph(above: Sequence[tuple[str, Style]], line: tuple[str, Style],
                     body: Body) -> bool:
    """Whether ``line`` starts a new block instead of continuing the paragraph whose lines
    are ``above``, though it sits as close under it as a paragraph's next line: the lines
    above make a heading and ``line`` is set like the body (``5.1 Hyper Parameter
    Optimization`` in bold over its first paragraph), or ``line`` is set apart, could be
    a heading and the last line above is set like the body."""
    if not above:
        return False
    text, style = line
    if not set_apart(style, body, above[0][0]):
        return is_heading(above, body)
    last_text, last_style = above[-1]
    return set_apart(style, body, text) and not set_apart(last_style, body, last_text) \
        and is_name(text)


def numbered(text: str) -> bool:
    """Whether ``text`` opens with a section number (``2.3``, ``A.1``, ``IV.``, ``(2)``)."""
    return NUMBERING.match(text.strip()) is not None


_HEADINGS = frozenset({Label.TITLE, Label.SECTION_HEADER})
_HEADING_VALUES = frozenset(h.value for h in _HEADINGS)


def refuses_heading(label: str, text: str, region: Region, heads: Sequence[BBox],
                    cover: Callable[[BBox, BBox], float], min_cover: float) -> bool:
    """Whether a block the engine did not call a heading (``label``, its ``text``) keeps
    the engine's label though the region chosen for it (``region``) is a title or section
    header: its words do not read as a heading's (:func:`is_name`: a formula's ``a``, a
    ``®``, a footnote of forty words), or the engine found a heading of its own inside that
    region (``heads``: the boxes of the page's blocks the engine labelled a heading;
    ``cover`` and ``min_cover`` as for :func:`keeps_heading`). The model's box is coarse
    and may take in the first line of the paragraph under a heading; the engine, which
    kept that line apart by its type, knows which line is the heading."""
    if label in _HEADING_VALUES or region.label not in _HEADINGS:
        return False
    if not is_name(text):
        return True
    return any(cover(head, region.bbox) >= min_cover for head in heads)


def keeps_heading(label: str, text: str, box: BBox | None, region: Region, regions: Sequence[Region],
                  cover: Callable[[BBox, BBox], float], min_cover: float) -> bool:
    """Whether a block the engine labelled a heading (``label``, its ``text``) stays one
    though the region chosen for it (``region``) is a running head or a caption (one whose
    words do not open as a caption's do: :data:`CAPTION`): the layout model also found a
    title or section header over it (``cover``: a function of (box, region box) giving the
    share of the box inside). The model that sees both on a document's first line is unsure;
    the type size or face the engine saw settles it."""
    if (box is None or label not in _HEADING_VALUES
            or region.label not in (Label.PAGE_HEADER, Label.CAPTION) or CAPTION.match(text)):
        return False
    return any(r.label in _HEADINGS and cover(box, r.bbox) >= min_cover
               for r in regions)
